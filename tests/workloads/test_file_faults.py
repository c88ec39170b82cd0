"""will-it-scale page_fault2/3 and vm-scalability shm-pread-seq on ``tiny`` (issue 22): faults, page-cache
pages allocated once per file, COW copies freed by munmap, the VMA-lock events per kernel."""

from __future__ import annotations

import pytest

from mmsim.experiments.run import RunSpec, run

PAGES = 1024  # memsize 4m


@pytest.mark.parametrize("mode", ["processes", "threads"])
@pytest.mark.parametrize("test", ["page_fault2", "page_fault3"])
def test_file_fault_counts(test: str, mode: str) -> None:
    r = run(RunSpec(f"will-it-scale/{test}", "tiny", "v6.6+164b06f238b9+4ed4379881aa",
                    params={"nr_task": "2", "mode": mode, "memsize": "4m", "loops": "2", "warmup": "1"}))
    per = "per_thread_ops" if mode == "threads" else "per_process_ops"
    assert r.metrics[f"will-it-scale.{per}"] > 0
    assert r.command == f"{test}_{mode} -t 2"
    # every page of every round faults once: 2 tasks x 3 rounds
    assert r.vmstat["pgfault"] == 2 * 3 * PAGES
    # each task's file is filled once (the warm-up round), later rounds find the pages
    assert r.metrics["shmem.alloced"] == 2 * PAGES and r.metrics["shmem.shmem_faults"] == 2 * 3 * PAGES
    v = r.vmstat
    if test == "page_fault3":  # shared faults under the VMA lock (4ed4379881aa)
        assert (v["vma_lock_success"], v["vma_lock_retry"], v["vma_lock_abort"]) == (2 * 3 * PAGES, 0, 0)
    else:  # COW faults retry under mmap_lock before 4de8c93a4751
        assert (v["vma_lock_success"], v["vma_lock_retry"], v["vma_lock_abort"]) == (0, 2 * 3 * PAGES, 0)
        # the private copies went back at each munmap: what stays allocated is the page cache and
        # the page tables (a PMD table per mm, plus PTE tables a racing thread allocated and lost)
        in_use = v["pgalloc_normal"] - v["pgfree"]
        assert 2 * PAGES < in_use <= 2 * PAGES + 4


def test_shm_pread_seq_reads_one_file() -> None:
    k = "v6.6+164b06f238b9+4ed4379881aa+4de8c93a4751"
    res = {}
    for arm, kernel in (("parent", k), ("patched", k + "+12214eba1992")):
        res[arm] = run(RunSpec("vm-scalability/shm-pread-seq", "tiny", kernel,
                               params={"nr_task": "4", "unit_size": "256k"}))
    for r in res.values():
        # one copy of the 64 pages for all 4 processes
        assert r.metrics["shmem.alloced"] == 64
        assert r.metrics["vm-scalability.workload"] == 4 * (256 * 1024 // 8 + 256 * 1024)
        assert r.metrics["vm-scalability.nr_task"] == 4
    a, b = res["parent"].vmstat, res["patched"].vmstat
    # parent: a fault fault-around could not finish retries under mmap_lock; patched: none retry
    assert a["vma_lock_retry"] > 0 and b["vma_lock_retry"] == 0
    assert b["vma_lock_success"] == b["pgfault"]
    ma, mb = res["parent"].metrics, res["patched"].metrics
    # a retried fault runs map_pages twice
    assert ma["shmem.map_pages_calls"] == a["pgfault"] + a["vma_lock_retry"]
    assert mb["shmem.map_pages_calls"] == b["pgfault"]
