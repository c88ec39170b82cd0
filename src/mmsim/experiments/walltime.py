"""Host wall-time estimate of one run, for the resource guard (:mod:`mmsim.experiments.guard`).

wall seconds ~ estimated engine events x host seconds per event x the fast
mode's share of events still simulated. Host cost per event measured on the
reproduce runs on the 2-core development VM, quiet (2026-12-01, CPython
3.11; docs/performance.md): it is the model code per event that differs
between workloads (the LLC fixed point of a huge-page pass, the hugetlb
fault's many locks), not the engine.
"""

from __future__ import annotations

# host microseconds per engine event, measured: sim.wall_seconds / sim.events per reproduce arm
US_PER_EVENT: dict[str, float] = {
    "thp_memscale": 4.6,  # split-pmd-ptl arms 4.5, 72 x 32m THP off 4.6
    "vm-scalability/anon-w-seq": 10.5,  # clear-order v4.14 (v4.13: 6.8)
    "vm-scalability/anon-cow-seq-hugetlb": 7.5,  # hugetlb-rwsem c0d0381ade79 (6.8-7.5 over the three arms)
    "pmbench": 4.4,  # autonuma-scan v5.4
    "lmbench/bw_unix": 4.7,  # pcp-free-high parent
}
DEFAULT_US_PER_EVENT = 10.5  # the dearest measured, for workloads without a measurement
# thp_memscale's fast mode on a 4 KiB steady state: 5,819,238 events for the 72-thread x 512m THP-off
# arm against ~9.0 M faults x 6.1 events per fault event by event (0.106). Huge-page runs are estimated
# as exact: their threads are rarely all in the steady region at once (split-pmd-ptl skips nothing).
FAST_4K_EVENT_SHARE = {"thp_memscale": 0.11}
# a run estimated longer than this asks for --force (or --exact, which asks for event by event on purpose)
MAX_WALL_SECONDS = 300.0


def estimate_wall_seconds(workload: str, events_4k: float, events_other: float, exact: bool) -> float:
    """Estimated host seconds of a run with ``events_4k`` engine events from 4 KiB work units and
    ``events_other`` from the rest (2 MiB faults, second units), as :func:`guard.estimate` counts them."""
    share = 1.0 if exact else FAST_4K_EVENT_SHARE.get(workload, 1.0)
    us = US_PER_EVENT.get(workload, DEFAULT_US_PER_EVENT)
    return (events_4k * share + events_other) * us * 1e-6


def format_seconds(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"
