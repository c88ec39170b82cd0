"""Issue 22: vm-scalability anon-w-seq-mt on tiny: /dev/zero MAP_PRIVATE placement per 849d5cff4d48."""

from __future__ import annotations

import pytest

from mmsim.experiments.run import RunSpec, run


@pytest.mark.parametrize(("kernel", "small", "huge"), [
    # 8 threads x 64 MiB, top-down from mmap_base (2 MiB - 4 KiB past a boundary): each mapping starts
    # 4 KiB below a boundary, so 1 + 511 of its pages are 4 KiB faults and 31 of its 32 slots THPs
    ("849d5cff4d48^", 8 * 512, 8 * 31),
    ("849d5cff4d48", 0, 8 * 32),  # thp_get_unmapped_area: every mapping PMD-aligned
])
def test_dev_zero_alignment_decides_the_4k_faults(kernel: str, small: int, huge: int) -> None:
    r = run(RunSpec("vm-scalability/anon-w-seq-mt", "tiny", kernel, params={"nr_task": "8", "size": "512m"},
                    policies={"thp": "always"}))
    assert r.metrics["proc-vmstat.thp_fault_alloc"] == huge
    # and main's write to each thread stack's top page (glibc allocate_stack): one fault per thread
    assert r.metrics["vm-scalability.time.minor_page_faults"] == small + huge + 8
    assert r.metrics["vm-scalability.workload"] == 512 << 20
