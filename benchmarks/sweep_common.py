"""Shared by the sweep benchmarks: a lockstress point calibrated to a wall time, and one timed sweep."""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from mmsim.experiments.run import RunSpec, run
from mmsim.experiments.sweep import sweep
from mmsim.results.store import Store

BASE = {"tasks": "8", "think_ns": "500"}


def calibrate(seconds: float) -> int:
    """lockstress iterations for one run of about ``seconds`` host wall time (measured here, now)."""
    probe = 5000
    t0 = time.perf_counter()
    run(RunSpec("lockstress", params={**BASE, "iterations": str(probe)}))
    dt = time.perf_counter() - t0
    return max(100, int(probe * seconds / dt))


def timed_sweep(params: dict[str, str], executor: str, workers: int | None) -> tuple[float, Any, float]:
    """Wall seconds of one sweep through a fresh results store (as the CLI does it), the sweep, and
    the sum of the runs' own wall times (``sim.wall_seconds``, measured inside the worker around
    the simulation): busy / (wall × workers) is how well the executor kept its workers fed,
    which contention from other jobs on the machine slows down but does not hide."""
    with tempfile.TemporaryDirectory() as d:
        st = Store(Path(d) / "r.duckdb")
        t0 = time.perf_counter()
        s = sweep("lockstress", params, executor=executor, workers=workers, store=st)
        wall = time.perf_counter() - t0
        return wall, s, float(st.runs()["wall_seconds"].sum())


def host() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(),
            "loadavg_1m": round(os.getloadavg()[0], 2), "python": platform.python_version()}


def same_metrics(a: Any, b: Any) -> bool:
    return [(p.kernel, p.swept, p.runs) for p in a.points] == [(p.kernel, p.swept, p.runs) for p in b.points]
