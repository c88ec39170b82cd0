"""vm-scalability anon cases on ``tiny`` (2 sockets x 2 cores x 2 threads, 2 x 1 GiB, 1 MiB L3 per socket).

Layout: each usemem child has its own mm and mmaps ``size / nr_task``
bytes top-down from MMAP_BASE (2^47 - 4 KiB - 128 MiB), so a 16 MiB region
starts 4 KiB below a 2 MiB boundary: one 4 KiB page, seven 2 MiB huge
pages, and a last 2 MiB slot that ends 4 KiB short of its boundary and so
takes 511 4 KiB faults. Per task: 7 THP faults + 512 small faults.
"""

from __future__ import annotations

import pytest

from mmsim.errors import UserError
from mmsim.experiments.run import RunResult, RunSpec, run
from mmsim.machine import get_machine
from mmsim.machine.hierarchy import STREAM_START
from mmsim.workloads.vm_scalability import fork_cpus, memparse

SMALL = {"nr_task": "4", "size": "64m"}


def _run(case: str, kernel: str = "v4.14", **params: str) -> RunResult:
    return run(RunSpec(f"vm-scalability/{case}", "tiny", kernel, params={**SMALL, **params}))


def test_anon_w_seq_faults_and_metrics() -> None:
    r = _run("anon-w-seq")
    assert r.vmstat["thp_fault_alloc"] == 4 * 7
    assert r.perf["page-faults"] == 4 * (7 + 512)
    # unit_bytes = bytes / 8 (allocation) + bytes written, per task
    per = 16 << 20
    assert r.metrics["vm-scalability.workload"] == 4 * (per // 8 + per)
    assert r.metrics["vm-scalability.throughput"] > 0
    assert r.metrics["vm-scalability.time.user_time"] > 0
    assert r.perf["cache-references"] > r.perf["cache-misses"] > 0
    assert r.profile[0]["symbol"] in ("usemem [user]", "clear_page_erms")


def test_anon_r_seq_maps_zero_pages_and_never_clears() -> None:
    r = _run("anon-r-seq")
    assert r.vmstat["thp_fault_alloc"] == 0
    assert r.perf["page-faults"] == 4 * (7 + 512)
    # only page-table pages are cleared (4 KiB each: 64 "instructions", one per line)
    clears = next(p for p in r.profile if p["symbol"] == "clear_page_erms")
    assert clears["instructions"] <= 4 * 16 * 64
    # the 4 KiB zero page stays in each core's L2 (no LLC request); the 2 MiB huge zero page
    # (> the 256 KiB L2) reaches the LLC: at most every line of its 7 passes per task, and only
    # the streamer's first STREAM_START demand lines of a sub-page can miss
    assert 0 < r.perf["cache-references"] <= 4 * 7 * 512 * 64
    assert 0 < r.perf["cache-misses"] <= 4 * 7 * 512 * STREAM_START


def test_anon_cow_seq_copies_every_page_once_per_child() -> None:
    r = _run("anon-cow-seq")
    # parent: 7 THP + 512 small write faults (MAP_POPULATE); each child: one COW per page.
    assert r.counters["cow_fault"] == 4 * (7 + 512)
    assert r.vmstat["thp_fault_alloc"] == 7 + 4 * 7
    assert any(p["symbol"] == "copy_page" for p in r.profile)


def test_anon_cow_seq_splits_each_shared_thp_and_copies_4k_since_v5_8() -> None:
    """Issue 15, 3917c80280c9 (thp_cow=split, v5.8+): each child's first write to a shared THP splits its
    PMD (thp_split_pmd) and every 4 KiB sub-page is then its own COW fault; no THP is allocated for a copy."""
    r = _run("anon-cow-seq", kernel="v6.7")
    assert r.vmstat["thp_split_pmd"] == 4 * 7
    assert r.counters["cow_fault"] == 4 * (7 * 512 + 512)
    assert r.vmstat["thp_fault_alloc"] == 7  # the parent's prefault only
    assert r.perf["page-faults"] == (7 + 512) + 4 * (7 * 512 + 512)  # parent's MAP_POPULATE + children
    old = _run("anon-cow-seq", kernel="v4.14")  # v4.13 semantics: one 2 MiB copy per shared THP
    assert old.vmstat["thp_split_pmd"] == 0 and old.counters["cow_fault"] == 4 * (7 + 512)
    assert r.vmstat["pgalloc_normal"] == old.vmstat["pgalloc_normal"]  # the same pages, 4 KiB at a time


def test_anon_w_rand_faults_every_page_once() -> None:
    r = _run("anon-w-rand", size="16m", nr_task="2")  # 8 MiB each: 2^20 random writes
    per = 8 << 20
    # region starts 4 KiB below a 2 MiB boundary: 1 + 3 huge + 511 small pages
    assert r.vmstat["thp_fault_alloc"] == 2 * 3
    assert r.perf["page-faults"] == 2 * (1 + 3 + 511)
    assert r.metrics["vm-scalability.workload"] == 2 * (per // 8 + per)


def test_clear_order_changes_llc_hits_under_contention() -> None:
    # 8 tasks on 2 x 1 MiB: far less than 2 MiB of LLC per task
    a = _run("anon-w-seq", kernel="v4.13", nr_task="8", size="128m")
    b = _run("anon-w-seq", kernel="v4.14", nr_task="8", size="128m")
    assert b.perf["cache-misses"] < a.perf["cache-misses"]


def test_same_seed_same_result() -> None:
    a, b = _run("anon-w-rand", size="16m"), _run("anon-w-rand", size="16m")
    assert a.metrics == b.metrics and a.perf == b.perf


@pytest.mark.parametrize(
    ("param", "value"),
    [("nr_task", "0"), ("nr_task", "x"), ("nr_task", "0%"), ("size", "12q"), ("size", "0"), ("runtime", "0")],
)
def test_bad_params(param: str, value: str) -> None:
    with pytest.raises(UserError) as e:
        _run("anon-w-seq", **{param: value})
    assert e.value.field == f"-p {param}"


def test_size_larger_than_memory_is_refused() -> None:
    with pytest.raises(UserError, match="fits in tiny"):
        _run("anon-cow-seq", size="2g")  # parent + 4 children x 512 MiB > 2 GiB
    with pytest.raises(UserError, match="fits in tiny"):
        _run("anon-w-seq", size="3g")


def test_memparse_and_fork_cpus() -> None:
    assert memparse("1k") == 1024 and memparse("3g") == 3 << 30 and memparse("4096") == 4096
    m = get_machine("tiny")
    # socket 0 cores 0,1; socket 1 cores 2,3; siblings +4: spread over sockets, cores before siblings
    assert fork_cpus(m, 8) == [0, 2, 1, 3, 4, 6, 5, 7]
    assert fork_cpus(m, 10)[8:] == [0, 2]
