"""vma-lock-shared-fault's munmap/fault mechanism rows (issue 22, session 11): mmap_lock's write-side
average wait, the zap's read hold and the VMA-lock wait share, read from the runs' lock_stat."""

from __future__ import annotations

from typing import Any

import pytest

from mmsim.experiments.exp_vma_lock import MMAP_LOCK, VM_LOCK, _eval_shared
from mmsim.experiments.run import RunResult, RunSpec, run


def _result(per: str, ops: float, locks: dict[str, dict[str, Any]]) -> RunResult:
    return RunResult(
        workload="will-it-scale/page_fault3", machine="tiny", kernel="v6.6", params={}, seed=0,
        metrics={f"will-it-scale.{per}": ops}, perf={"task-clock": 10.0},
        vmstat={"pgfault": 100, "vma_lock_retry": 0, "vma_lock_success": 100},
        profile=[{"symbol": "page_fault", "cycles": 1, "percent": 100.0, "instructions": 1}], locks=locks,
        sim={}, policies={})


def _mmap_lock(w_wait_avg: float, r_hold_avg: float, r_cont: int, r_acq: int) -> dict[str, Any]:
    return {"wait_ns_total": 2_000_000, "acquisitions": 4 + r_acq, "contentions": 3 + r_cont, "steals": 5,
            "handoffs": 1, "line_wait_ns": 0,
            "lock_stat": {"W": {"contentions": 3, "acquisitions": 4, "waittime-avg": w_wait_avg},
                          "R": {"contentions": r_cont, "acquisitions": r_acq, "holdtime-avg": r_hold_avg}}}


def test_munmap_rows_from_lock_stat() -> None:
    parent = _result("per_thread_ops", 100.0, {MMAP_LOCK: _mmap_lock(2_500_000, 900, 7, 100)})
    patched = _result("per_thread_ops", 150.0, {MMAP_LOCK: _mmap_lock(4_000_000, 8_000_000, 0, 0),
                                                VM_LOCK: {"wait_ns_total": 1_000_000}})
    procs = _result("per_process_ops", 10.0, {})
    checks, notes = _eval_shared({"parent": parent, "patched": patched, "parent/processes": procs,
                                  "patched/processes": procs})
    got = {c.metric: (c.published, c.simulated) for c in checks}
    assert got["per_thread_ops_change_pct"][1] == 50.0
    assert got["mmap_lock_write_wait_avg_ms.parent"] == (0.82, 2.5)
    assert got["mmap_lock_write_wait_avg_ms.patched"] == (1.85, 4.0)
    assert got["munmap_zap_read_hold_avg_ms.patched"] == (None, 8.0)
    assert got["vm_lock_wait_share.parent"] == (None, 0.0)
    assert got["vm_lock_wait_share.patched"] == (None, 0.1)  # 1 ms of 10 ms task-clock
    assert notes[2] == ("threads, parent: mmap_lock write side (every mmap and munmap) 3/4 contended, average "
                        "wait 2.50 ms (published, munmap's down_write_killable: 0.82 ms parent, 1.85 ms patched); "
                        "read side 7 contended of 100, 5 steals, 1 hand-offs (published: 11285 down_read_killable "
                        "slowpath waits in the parent, 0 patched)")
    assert notes[3].startswith("threads, patched: mmap_lock write side (every mmap and munmap) 3/4 contended, "
                               "average wait 4.00 ms")


def test_zap_chain_bound_from_the_runs() -> None:
    """16 zaps of 6 ms per round: a round lasts >= 96 ms, per_thread_ops <= 32768 / 0.096 = 341,333; from a
    parent at 225,000 the patch can gain at most +51.7%, under the band's +61.1%."""
    params = {"nr_task": 16, "memsize": 128 << 20}
    parent = _result("per_thread_ops", 225_000.0, {MMAP_LOCK: _mmap_lock(2_500_000, 900, 7, 100)})
    patched = _result("per_thread_ops", 262_000.0, {MMAP_LOCK: _mmap_lock(4_000_000, 6_000_000, 0, 0)})
    parent.params, patched.params = params, params
    procs = _result("per_process_ops", 10.0, {})
    _, notes = _eval_shared({"parent": parent, "patched": patched, "parent/processes": procs,
                             "patched/processes": procs})
    line = next(n for n in notes if n.startswith("zap chain:"))
    assert line == ("zap chain: 16 munmaps per round each zap 6.00 ms under the read lock, one after another (each "
                    "waits in down_write for the last), so a round lasts >= 96.0 ms and per_thread_ops <= 341,333; "
                    "patched reaches 77% of it, parent 66%; the patch can gain at most +51.7% over this parent, "
                    "below the band's +61.1%: the chain of zaps, not the fault path, bounds the change (published "
                    "patched 458,520 implies a zap <= 4.47 ms)")
    patched.locks[MMAP_LOCK]["lock_stat"]["R"]["holdtime-avg"] = 3_000_000  # a 48 ms chain: +203% possible
    _, notes = _eval_shared({"parent": parent, "patched": patched, "parent/processes": procs,
                             "patched/processes": procs})
    # 225,000 x 1.611 = 362,475 of a 682,667 cap
    assert ("at most +203.4% over this parent, the band's +61.1% needs patched >= 362,475, 53% of the bound"
            in notes[4])


@pytest.mark.usefixtures("use_tiny_preset")
def test_read_fault_startup_line_is_the_forks_share() -> None:
    """vma-lock-read-fault's start-up line: the parent's forks (copy_process/fork each, one after another on
    its CPU) against each arm's elapsed time, and against the published 300 s."""
    from mmsim.experiments.exp_vma_lock import _startup_line
    from mmsim.machine.presets import get_machine
    from mmsim.mm.costs import PATH_CYCLES

    r = run(RunSpec("vm-scalability/shm-pread-seq", "tiny", "v6.6", params={"nr_task": "4", "unit_size": "1m"}))
    fork_ms = 4 * PATH_CYCLES["copy_process/fork"][0] / get_machine("tiny").freq_ghz / 1e6
    el_ms = r.metrics["vm-scalability.time.elapsed_time"] * 1e3
    line = _startup_line(r, r)
    assert line.startswith(f"start-up: the parent's 4 forks take {fork_ms:.1f} ms of the parent arm's {el_ms:.1f} ms")
    assert line.endswith(f"in the published 300 s run (the scored figure) {100 * fork_ms / 300e3:.4f}%")


@pytest.mark.usefixtures("use_tiny_preset")
def test_read_fault_scores_the_runtime_run() -> None:
    """The scored throughput is each process's rate from GO carried to usemem's deadline: from_go x (T - S) / T,
    with S = main's start_time to GO (the forks and more), and every process's from-GO rate is above the rate
    usemem prints for the run as simulated (its delta_us also holds the start-up)."""
    from mmsim.experiments.exp_vma_lock import throughput_at_runtime
    from mmsim.machine.presets import get_machine
    from mmsim.mm.costs import PATH_CYCLES

    r = run(RunSpec("vm-scalability/shm-pread-seq", "tiny", "v6.6", params={"nr_task": "4", "unit_size": "1m"}))
    m = r.metrics
    fork_s = 4 * PATH_CYCLES["copy_process/fork"][0] / get_machine("tiny").freq_ghz / 1e9
    assert m["vm-scalability.startup_seconds"] > fork_s
    assert m["vm-scalability.startup_seconds"] < m["vm-scalability.time.elapsed_time"]
    assert m["vm-scalability.throughput_from_go"] > m["vm-scalability.throughput"]
    s, go = m["vm-scalability.startup_seconds"], m["vm-scalability.throughput_from_go"]
    assert throughput_at_runtime(r) == go * (300.0 - s) / 300.0
    assert throughput_at_runtime(r, runtime_s=2 * s) == pytest.approx(go / 2, rel=1e-12)
