"""devzero-thp-align's write-bound line (issue 22): how much removing fault overhead can gain, from the
parent arm's own profile."""

from __future__ import annotations

from mmsim.experiments.exp_mmap_align import _eval_devzero
from mmsim.experiments.run import RunResult


def _result(tput: float, minor: float, profile: list[tuple[str, float]]) -> RunResult:
    return RunResult(
        workload="vm-scalability/anon-w-seq-mt", machine="tiny", kernel="v6.6", params={}, seed=0,
        metrics={"vm-scalability.throughput": tput, "vm-scalability.time.minor_page_faults": minor,
                 "proc-vmstat.thp_fault_alloc": 10.0},
        perf={}, vmstat={}, locks={}, sim={}, policies={},
        profile=[{"symbol": s, "cycles": 1, "percent": p, "instructions": 1} for s, p in profile])


def test_write_bound_from_the_parent_profile() -> None:
    parent = _result(100.0, 200.0, [("usemem [user]", 59.3), ("clear_page_erms", 40.5), ("page_fault", 0.2)])
    patched = _result(100.0, 120.0, [("usemem [user]", 59.0), ("clear_page_erms", 41.0)])
    _, notes = _eval_devzero({"849d5cff4d48^": parent, "849d5cff4d48": patched})
    line = next(n for n in notes if n.startswith("write bound:"))
    # 99.8% writes: at most 100 / 99.8 - 1 = +0.20%
    assert line == ("write bound: 99.8% of 849d5cff4d48^'s cycles are the stores and clears (node write bandwidth "
                    "shared by the node's threads), 0.20% everything else; removing all of that would gain at most "
                    "+0.20%, below the band's +1%: the run is bound by the write bandwidth, not the faults")
    parent = _result(100.0, 200.0, [("usemem [user]", 60.0), ("clear_page_erms", 30.0), ("page_fault", 10.0)])
    _, notes = _eval_devzero({"849d5cff4d48^": parent, "849d5cff4d48": patched})
    assert "gain at most +11.11%, the band is reachable under this bound" in notes[1]
