"""thp_memscale ``mapping=hugetlb`` (seeds/001's hugetlbfs variant) on the new pool, on ``tiny``."""

from __future__ import annotations

import pytest

from mmsim.experiments.run import RunSpec, run
from mmsim.mm.hugetlb import I_MMAP_CLASS


@pytest.mark.parametrize("kernel,mutex,reads", [
    ("v3.12", "hugetlb_instantiation_mutex", False),
    ("v5.6", "hugetlb_fault_mutex_table", False),
    ("v5.7", "hugetlb_fault_mutex_table", True),
])
def test_hugetlb_mode_faults_each_huge_page_once(kernel: str, mutex: str, reads: bool) -> None:
    r = run(RunSpec("thp_memscale", "tiny", kernel, params={"threads": "4", "bytes": "8m", "mapping": "hugetlb"}))
    # 8 * 10^6 bytes -> 4 huge pages per thread, each faulted once (hugetlb_no_page); and main's first
    # write to each thread stack's top page (glibc allocate_stack), a 4 KiB anonymous fault
    faults = 4 * 4
    assert r.perf["page-faults"] == faults + 4
    assert r.vmstat["htlb_buddy_alloc_success"] == 0  # the pool (nr_hugepages = 16) is preallocated
    assert r.locks[mutex]["acquisitions"] == faults
    assert r.locks[I_MMAP_CLASS]["read_acquisitions"] == (faults if reads else 0)
    assert r.locks["hugetlb_lock"]["acquisitions"] == 4 + faults  # 4 reservations at mmap + one per fault
    assert r.metrics["thp_memscale.elapsed_seconds"] > 0
