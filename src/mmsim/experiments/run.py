"""``run(spec) -> RunResult``: one simulation of one workload on one machine
and kernel, the unit every other experiment (repeat, compare, sweep,
reproduce) is built from."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import mmsim.machine as _machine
from mmsim.errors import UserError
from mmsim.experiments import guard as _guard
from mmsim.experiments import noise as _noise
from mmsim.kernels.catalog import resolve_kernel
from mmsim.machine.cacheorg import LINE_SPIN_FUNCS, SPIN_FUNCS, spin_instructions
from mmsim.metrics.counters import line_spin_misses
from mmsim.metrics.events import PROC_VMSTAT, PerfEvent
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params

if TYPE_CHECKING:
    import pandas as pd

    from mmsim.progress import ProgressHook
    from mmsim.results.store import Store

PROFILE_LINES = 30


@dataclass(frozen=True)
class RunSpec:
    workload: str
    machine: str = "tiny"
    kernel: str = "v3.13"
    patches: tuple[str, ...] = ()
    policies: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    # event by event throughout; False lets a workload fast-forward its steady state (metrics/sampling.py)
    exact: bool = False
    noise: bool = False  # run-to-run variation from modelled sources (:func:`apply_noise`), seeded


#: The noise sources :func:`apply_noise` models (``RunResult.noise``, part of the store key).
NOISE_SOURCES = _noise.SOURCES


def apply_noise(system: System) -> Callable[[], None]:
    """Run-to-run variation from its mechanism, drawn from the run's seed (``--noise``): start skew,
    timer ticks and device interrupts (:mod:`mmsim.experiments.noise`, docs/noise.md). Call it before
    the workload's set-up and the function it returns after."""
    return _noise.apply(system)


@dataclass
class RunResult:
    workload: str
    machine: str
    kernel: str
    params: dict[str, Any]
    seed: int
    metrics: dict[str, float]
    perf: dict[str, float]
    vmstat: dict[str, int]
    profile: list[dict[str, Any]]
    locks: dict[str, dict[str, Any]]
    sim: dict[str, float]
    policies: dict[str, str]
    command: str = ""
    mode: str = "sim"
    noise: str = ""  # the noise sources of a --noise run, else ""
    # model-only counters (no /proc/vmstat item: PCP list events, SLUB statistics, COW copies); mmsim.NAME
    counters: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "workload": self.workload,
            "machine": self.machine,
            "kernel": self.kernel,
            "params": self.params,
            "seed": self.seed,
            "metrics": self.metrics,
            "perf": self.perf,
            "vmstat": self.vmstat,
            "profile": self.profile,
            "locks": self.locks,
            "sim": self.sim,
            "counters": self.counters,
            "mode": self.mode,
            "policies": self.policies,
            "command": self.command,
        }
        if self.noise:
            d["noise"] = self.noise
        return d

    def to_frame(self) -> pd.DataFrame:
        """One row: workload, machine, kernel, seed, each parameter (``param.NAME``), each policy
        (``policy.NAME``) and every flat metric (benchmark, perf-stat, proc-vmstat, lock_stat...)."""
        return frame([self.to_dict()])

    def lock_wait_share(self, name: str) -> float:
        """Time spent waiting for lock class ``name`` (spinning and sleeping) over the tasks' CPU time
        (task-clock); sleeping waits are not CPU time, so the ratio can exceed 1."""
        total = self.perf["task-clock"] * 1e6
        st = self.locks.get(name)
        return (st["wait_ns_total"] / total) if st and total else 0.0


def run(spec: RunSpec, guard: bool = True) -> RunResult:
    """Validate everything first (nothing runs on bad input), then simulate.

    ``guard``: refuse a spec whose estimated events or memory exceed the limits
    (:mod:`mmsim.experiments.guard`); executors pass False, the parent checked.
    """
    if spec.seed < 0:
        raise UserError("--seed", spec.seed, "an integer >= 0")
    w = get_workload(spec.workload)
    params = resolve_params(w, spec.params)
    machine = _machine.get_machine(spec.machine)
    kernel = resolve_kernel(spec.kernel, spec.patches, spec.policies)  # BASE+PATCH+... allowed
    if guard:
        _guard.check(w.name, params, machine, kernel.policies, spec.exact)
    system = System(machine, kernel, spec.seed, exact=spec.exact)
    after_setup = apply_noise(system) if spec.noise else None
    w.setup(system, params)
    if after_setup is not None:
        after_setup()  # tasks spawned while running (forks) get interrupts, not a start skew
    t0 = time.perf_counter()
    system.engine.run()
    wall = time.perf_counter() - t0
    res = _result(spec, system, w, params, wall)
    # the System's tasks, generators and locks reference each other: free a large run's arrays now, not at the
    # cyclic collector's next pass (a pool worker would otherwise hold them through its next arm)
    del system
    gc.collect()
    return res


def frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """Runs (``RunResult.to_dict()``) as a DataFrame: a row per run, parameters and policies as
    ``param.*`` / ``policy.*`` columns (typed values, not JSON text), then the flat metrics."""
    import pandas as pd

    from mmsim.results.store import flat_metrics

    rows = []
    for r in results:
        row: dict[str, Any] = {k: r.get(k) for k in ("workload", "machine", "kernel", "seed")}
        row.update({f"param.{k}": v for k, v in (r.get("params") or {}).items()})
        row.update({f"policy.{k}": v for k, v in (r.get("policies") or {}).items()})
        row.update(flat_metrics(r))
        rows.append(row)
    return pd.DataFrame(rows)


def record(store: Store | None, pairs: list[tuple[RunSpec, dict[str, Any]]],
           canon: list[dict[str, Any]] | None = None) -> int:
    """Put finished runs (spec, ``RunResult.to_dict()``) into the results store, keyed as
    :func:`mmsim.experiments.executors.run_many` keys them (a run with the same inputs and seed is
    replaced); ``canon``: the specs' :func:`~mmsim.experiments.executors.canonical` forms, if known.
    Returns how many were stored."""
    if store is None or not pairs:
        return 0
    from mmsim.experiments.executors import canonical
    from mmsim.results.store import StoredRun, spec_hash

    runs = []
    for i, (spec, res) in enumerate(pairs):
        c = canon[i] if canon else canonical(spec)
        runs.append(StoredRun(spec_hash(c), c, spec.seed, res))
    store.add(runs, replace=True)
    return len(runs)


def run_repeated(spec: RunSpec, runs: int = 1, store: Store | None = None,
                 progress: ProgressHook | None = None) -> list[RunResult]:
    """``perf stat -r N``: ``spec`` with seeds seed, seed + 1, ..., each run, stored (unless ``store``
    is None) as it finishes, with a progress event at each run's start and end. Everything is
    validated (and the store opened) before the first run starts."""
    from mmsim.experiments.executors import checked
    from mmsim.progress import ProgressEvent

    if runs < 1:
        raise UserError("-r/--repeat", runs, "an integer >= 1")
    specs = [replace(spec, seed=spec.seed + i) for i in range(runs)]
    first, est = checked(specs[0])
    canon = [first] * runs  # the seed is not part of the canonical inputs
    if not spec.exact:  # the N runs together within the CPU-time limit of one (as sweep, compare, bisect)
        _guard.check_total([est.wall], f"run {spec.workload} -r {runs}", runs)
    if store is not None:
        store.count()  # a bad --store fails here, before anything runs
    out: list[RunResult] = []
    what = f"run {spec.workload}"
    for i, s in enumerate(specs):
        arm = f"{canon[i]['kernel']} seed {s.seed}"
        if progress:
            progress(ProgressEvent(what, arm, "start", i, runs))
        r = run(s, guard=False)  # canonical() ran the guard
        out.append(r)
        record(store, [(s, r.to_dict())], [canon[i]])
        if progress:
            progress(ProgressEvent(what, arm, "end", i + 1, runs, float(r.sim["wall_seconds"])))
    return out


def _result(spec: RunSpec, system: System, w: Any, params: dict[str, Any], wall: float) -> RunResult:
    m = system.machine
    c = system.counters
    perf_t = c.perf_total()
    elapsed_ns = system.elapsed_ns if system.elapsed_ns >= 0 else system.engine.now
    cycles = int(perf_t[PerfEvent.TASK_CLOCK] * m.freq_ghz)
    prof = c.profile_total()
    # spinning retires its pause loop's instructions (the lock models charge spin time only); a spinlock
    # waiter's loop stalls on each re-read of its lock's line: the lines' misses and stall, spread over the
    # spinlock spin symbols by their spin time (docs/locks.md, session 27)
    misses, stall_ns = line_spin_misses(system.locks.stats)
    line_ns = sum(prof[f].ns for f in LINE_SPIN_FUNCS if f in prof and not prof[f].insns) or 1
    for f in SPIN_FUNCS:
        e = prof.get(f)
        if e is not None and not e.insns:
            share = e.ns / line_ns if f in LINE_SPIN_FUNCS else 0.0
            e.insns = spin_instructions(m.name, e.ns * m.freq_ghz, misses * share, stall_ns * share * m.freq_ghz)
            perf_t[PerfEvent.INSTRUCTIONS] += e.insns
    perf = {
        "task-clock": perf_t[PerfEvent.TASK_CLOCK] / 1e6,
        "context-switches": perf_t[PerfEvent.CONTEXT_SWITCHES],
        "cpu-migrations": perf_t[PerfEvent.CPU_MIGRATIONS],
        "page-faults": perf_t[PerfEvent.PAGE_FAULTS],
        "cycles": cycles,
        "instructions": perf_t[PerfEvent.INSTRUCTIONS],
        "cache-references": perf_t[PerfEvent.CACHE_REFERENCES],
        "cache-misses": perf_t[PerfEvent.CACHE_MISSES],
        "ipc": round(perf_t[PerfEvent.INSTRUCTIONS] / cycles, 4) if cycles else 0.0,
        "seconds-time-elapsed": elapsed_ns / 1e9,
    }
    total_ns = sum(e.ns for e in prof.values()) or 1
    profile = [
        {
            "symbol": f,
            "cycles": int(e.ns * m.freq_ghz),
            "percent": round(100.0 * e.ns / total_ns, 3),
            "instructions": e.insns,
        }
        for f, e in sorted(prof.items(), key=lambda kv: (-kv[1].ns, kv[0]))[:PROFILE_LINES]
    ]
    vm_all = c.vm_total()
    vm = {e.vmstat_name: v for e, v in vm_all.items() if e in PROC_VMSTAT}
    model_counters = {e.vmstat_name: v for e, v in vm_all.items() if e not in PROC_VMSTAT}
    locks = {name: st.to_dict() for name, st in sorted(system.locks.stats.items())}
    return RunResult(
        workload=w.name,
        machine=m.name,
        kernel=system.kernel.name,
        params={k: params[k] for k in sorted(params)},
        seed=spec.seed,
        metrics=w.metrics(system, params),
        perf=perf,
        vmstat=vm,
        profile=profile,
        locks=locks,
        sim={"events": system.engine.events, "wall_seconds": round(wall, 4), "simulated_seconds": elapsed_ns / 1e9,
             **(system.fast_forward.report() if system.fast_forward is not None else {})},
        policies=dict(sorted(system.kernel.policies.items())),
        command=w.command(params),
        noise=NOISE_SOURCES if spec.noise else "",
        counters=model_counters,
    )
