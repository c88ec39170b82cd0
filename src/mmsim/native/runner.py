"""``run_native(spec) -> RunResult``: one workload executed on the host kernel.

First whatever a killed earlier run left behind is undone
(:func:`mmsim.native.journal.recover`, each action reported). Everything is
checked before anything runs (workload, ``-p``, ``--set``, the memory cap
over every parameter that reserves host memory). The run's changes are
recorded in a journal before they are made. The workload then runs in a
worker process (:mod:`mmsim.native.worker`) in its own process group, under
``perf stat`` software events when perf can count and ``spec.perf`` asks for them, and dies with this
process; the hugetlb pool is grown for the run and restored after it. The result has the shape of ``mmsim run``'s
(:class:`~mmsim.experiments.run.RunResult`) with ``mode = "native"``, plus
``rusage``, ``host`` (the THP/hugetlb settings in force) and ``notes``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mmsim.errors import UserError
from mmsim.native import journal, safety, sysinfo
from mmsim.native.workloads import get_native, resolve_native_params

THP_VALUES = ("always", "madvise", "never")
# perf software events (include/uapi/linux/perf_event.h PERF_COUNT_SW_*), counted over the worker process tree
PERF_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults", "minor-faults", "major-faults")


@dataclass(frozen=True)
class NativeSpec:
    workload: str
    params: dict[str, str] = field(default_factory=dict)
    policies: dict[str, str] = field(default_factory=dict)
    warm: bool = False  # touch and free the footprint just before the run (see worker.warm)
    # Count perf stat's software events. They are not free: with page-faults and minor-faults counted, every
    # fault runs the perf software-event hooks (___perf_sw_event in do_user_addr_fault). Measured 2026-12-03 on
    # this host, page_fault3 processes x 2, best round, four runs each: 810-858 k ops/s under perf stat,
    # 903-931 k without (-8 to -10%). validate's references are measured without it (docs/native.md).
    perf: bool = True


def check_policies(policies: dict[str, str]) -> str | None:
    """``--set`` in native mode: only ``thp`` (applied per mapping with madvise)."""
    for name, value in policies.items():
        if name != "thp":
            raise UserError("--set", name, "thp (the only policy native mode can apply)")
        if value not in THP_VALUES:
            raise UserError("--set thp", value, THP_VALUES)
    return policies.get("thp")


@cache
def perf_works() -> bool:
    """perf is installed and may count software events for our own processes."""
    exe = sysinfo.perf_path()
    if exe is None:
        return False
    try:
        r = subprocess.run([exe, "stat", "-x,", "-e", "task-clock", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and b"task-clock" in r.stderr


def parse_perf_csv(text: str) -> dict[str, float]:
    """``perf stat -x,`` lines (value,unit,event,...) -> {event: value}; task-clock in ms."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        value, event = parts[0], parts[2].split(":")[0]
        try:
            out[event] = float(value)
        except ValueError:
            continue  # <not counted> / <not supported>
    return out


def _host_settings() -> dict[str, str]:
    return {**sysinfo.thp_settings(), **sysinfo.hugetlb_settings(), **sysinfo.page_reporting(),
            "kernel": sysinfo.kernel_release()}


PAGE_REPORTING_NOTE = (
    "free page reporting is on (page_reporting.order={order}): freed blocks of that order go back to the "
    "hypervisor a moment later, and faults on them also wait for the hypervisor; results vary with how long "
    "ago the memory was freed (--warm measures the guest kernel alone)"
)


def _notes(thp: str | None, host: dict[str, str], warm: bool, hugetlb: bool) -> list[str]:
    notes = []
    order = host.get("page_reporting.order")
    if order is not None and int(order) <= 9 and not warm:
        notes.append(PAGE_REPORTING_NOTE.format(order=order))
    enabled = host.get("thp.enabled", "")
    if thp == "always" and enabled in ("", "never"):
        notes.append(f"THP requested but the host's THP is {enabled or 'absent'}: MADV_HUGEPAGE has no effect")
    if thp is None and not hugetlb:
        notes.append(f"no --set thp: the host's policy ({enabled or 'no THP'}) applies, no madvise")
    notes.append("vmstat deltas are system-wide: other processes on the host add to them")
    return notes


def _stderr(line: str) -> None:
    sys.stderr.write(f"mmsim: {line}\n")
    sys.stderr.flush()


def recover(log: Callable[[str], None] = _stderr) -> list[str]:
    """Undo what killed native runs left (sysctls, workers, temp dirs); each action is logged and returned."""
    lines = journal.recover()
    for line in lines:
        log(line)
    return lines


def run_native(spec: NativeSpec, log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """Run ``spec`` on the host; a :class:`~mmsim.native.safety.Skip` when it cannot run here."""
    from mmsim.experiments.run import RunResult

    w = get_native(spec.workload)
    params = resolve_native_params(w, spec.params)
    thp = check_policies(spec.policies)
    recovered = recover(log)  # first: a killed run's hugetlb pool would also shrink MemAvailable
    safety.check_host_memory(w.name, params, w.footprint(params))
    job = {"workload": w.name, "params": spec.params, "thp": thp, "warm": spec.warm}
    pages = w.hugetlb_pages(params)
    from mmsim.native.workloads import overcommit_pages

    with safety.terminate_as_exception(), journal.Journal() as jr:
        if pages:
            guard: safety.HugetlbPool | safety.HugetlbSysctls = (
                safety.HugetlbSysctls(pages, params["nr_hugepages"], overcommit_pages(params), journal=jr)
                if "nr_overcommit_hugepages" in params else safety.HugetlbPool(pages, journal=jr))
            with guard:
                host = _host_settings()  # the pool as the run sees it, before it is restored
                out, perf = _run_worker(job, jr, spec.perf)
        else:
            host = _host_settings()
            out, perf = _run_worker(job, jr, spec.perf)
    wall = out["wall_seconds"]
    # perf counts the whole worker process tree, interpreter start-up included; so does its elapsed time
    perf = {**perf, "seconds-time-elapsed": out["process_seconds"]} if perf else {}
    res = RunResult(
        workload=w.name, machine="host", kernel=sysinfo.kernel_release(),
        params={k: params[k] for k in sorted(params)}, seed=0, metrics=out["metrics"], perf=perf,
        vmstat=out["vmstat"], profile=[], locks={},
        sim={"wall_seconds": round(wall, 4), "process_seconds": out["process_seconds"]},
        policies={"thp": thp or "host default"}, command=w.command(params), mode="native",
    )
    d: dict[str, Any] = res.to_dict()
    notes = [f"recovered: {line}" for line in recovered] + _notes(thp, host, spec.warm, pages > 0)
    d.update(warm=spec.warm, rusage=out["rusage"], host=host, notes=notes)
    if out.get("warm_seconds"):
        d["warm_seconds"] = out["warm_seconds"]  # CPU seconds of each warm-up pass (worker.warm)
    return d


def _run_worker(job: dict[str, Any], jr: journal.Journal,
                want_perf: bool = True) -> tuple[dict[str, Any], dict[str, float]]:
    """Run the worker (under perf stat when it works and ``want_perf``); its process group is always killed and reaped.

    The worker (or perf, its parent) gets PR_SET_PDEATHSIG and the read end of
    a pipe whose only write end this process holds: when this process dies,
    the worker sees EOF and kills its whole group (perf and the forked tasks).
    The temp dir and the group are in the journal, for recovery after SIGKILL.
    """
    tmp = jr.tmpdir()
    try:
        out_path, perf_path = tmp / "out.json", tmp / "perf.csv"
        watch_r, watch_w = os.pipe()
        cmd = [sys.executable, "-m", "mmsim.native.worker", json.dumps(job), str(out_path), str(watch_r)]
        use_perf = want_perf and perf_works()
        if use_perf:
            exe = sysinfo.perf_path() or "perf"
            cmd = [exe, "stat", "-x,", "-o", str(perf_path), "-e", ",".join(PERF_EVENTS), "--", *cmd]
        env = {**os.environ, "PYTHONPATH": _src_path() + os.pathsep + os.environ.get("PYTHONPATH", "")}
        try:
            proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    env=env, pass_fds=(watch_r,), preexec_fn=safety.die_with_parent(os.getpid()))
        finally:
            os.close(watch_r)
        t0 = time.perf_counter()
        try:
            with safety.Reaper(proc):
                jr.group(proc.pid)
                _, err = proc.communicate()
        finally:
            os.close(watch_w)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0 or not out_path.is_file():
            lines = err.decode(errors="replace").strip().splitlines()
            raise RuntimeError(f"native worker failed (exit {proc.returncode}): {lines[-1] if lines else ''}")
        out: dict[str, Any] = json.loads(out_path.read_text())
        out["process_seconds"] = round(elapsed, 6)
        perf = parse_perf_csv(perf_path.read_text()) if use_perf and perf_path.is_file() else {}
        return out, perf
    finally:
        jr.drop_tmpdir(tmp)


def _src_path() -> str:
    """The directory holding the ``mmsim`` package, so the worker imports this same tree."""
    return str(Path(__file__).resolve().parents[2])
