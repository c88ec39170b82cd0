"""``run(spec) -> RunResult``: one simulation of one workload on one machine
and kernel, the unit every other experiment (repeat, compare, sweep,
reproduce) is built from."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import mmsim.machine as _machine
from mmsim.errors import UserError
from mmsim.experiments import guard as _guard
from mmsim.kernels.catalog import resolve
from mmsim.metrics.events import PerfEvent
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params

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

    def to_dict(self) -> dict[str, Any]:
        return {
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
            "mode": self.mode,
            "policies": self.policies,
            "command": self.command,
        }

    def lock_wait_share(self, name: str) -> float:
        """Share of all CPU time spent waiting for lock class ``name``."""
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
    kernel = resolve(spec.kernel, list(spec.patches), spec.policies)
    if guard:
        _guard.check(w.name, params, machine, kernel.policies, spec.exact)
    system = System(machine, kernel, spec.seed, exact=spec.exact)
    w.setup(system, params)
    t0 = time.perf_counter()
    system.engine.run()
    wall = time.perf_counter() - t0
    return _result(spec, system, w, params, wall)


def _result(spec: RunSpec, system: System, w: Any, params: dict[str, Any], wall: float) -> RunResult:
    m = system.machine
    c = system.counters
    perf_t = c.perf_total()
    elapsed_ns = system.elapsed_ns if system.elapsed_ns >= 0 else system.engine.now
    cycles = int(perf_t[PerfEvent.TASK_CLOCK] * m.freq_ghz)
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
    prof = c.profile_total()
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
    vm = {e.vmstat_name: v for e, v in c.vm_total().items()}
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
    )
