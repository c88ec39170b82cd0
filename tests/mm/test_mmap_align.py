"""Issue 22: mmap placement per kernel policy, exactly as v6.12's __get_unmapped_area computes it."""

from __future__ import annotations

import pytest

from mmsim.engine.core import Task
from mmsim.kernels.catalog import resolve
from mmsim.machine import get_machine
from mmsim.mm.mmap import MMAP_BASE, MmStruct, Vma
from mmsim.mm.system import System
from mmsim.workloads.will_it_scale import malloc_mmap_size, request2size

M = 1 << 20
LEN = 128 * M + 4096  # what glibc mmaps for malloc(128 MiB)


def mm_of(kernel: str) -> MmStruct:
    return MmStruct(System(get_machine("tiny"), resolve(kernel), seed=0), home_cpu=0)


def test_glibc_malloc_128m_mmaps_128m_plus_a_page() -> None:
    assert request2size(128 * M) == 134217744  # (req + SIZE_SZ + 15) & ~15
    assert malloc_mmap_size(128 * M) == LEN == 134221824  # ALIGN_UP(nb + SIZE_SZ, 4096)
    assert malloc_mmap_size(128 * M) % (2 * M) == 4096  # not a multiple of PMD_SIZE


def test_mmap_base_is_not_pmd_aligned() -> None:
    assert MMAP_BASE == 0x7FFFF7FFF000
    assert MMAP_BASE % (2 * M) == 2 * M - 4096


def test_no_thp_alignment_before_efa7df3e3bb5() -> None:
    mm = mm_of("v6.7")
    assert mm.placement(LEN) == MMAP_BASE - LEN == 0x7FFFEFFFE000
    assert mm.placement(128 * M) == MMAP_BASE - 128 * M


def test_efa7df3e3bb5_aligns_every_mapping_of_at_least_2m() -> None:
    mm = mm_of("d4148aeab412^")
    # len_pad = LEN + 2M; ret = MMAP_BASE - len_pad = 0x7FFFEFDFE000; off_sub = -ret & (2M - 1) = 0x2000
    ret = MMAP_BASE - (LEN + 2 * M)
    assert ret == 0x7FFFEFDFE000 and (-ret) & (2 * M - 1) == 0x2000
    assert mm.placement(LEN) == 0x7FFFEFE00000
    assert mm.placement(2 * M) == MMAP_BASE - 4 * M + 4096  # 2 MiB: aligned too (ret + off_sub)
    assert mm.placement(2 * M) % (2 * M) == 0
    assert mm.placement(2 * M - 4096) == MMAP_BASE - 2 * M + 4096  # < PMD_SIZE: as it comes


def test_d4148aeab412_aligns_only_multiples_of_2m() -> None:
    mm = mm_of("d4148aeab412")
    assert mm.placement(LEN) == MMAP_BASE - LEN  # 128M + 4K: unaligned, as before efa7df3e3bb5
    assert mm.placement(128 * M) == MMAP_BASE - 130 * M + 4096 == 0x7FFFEFE00000  # multiple: aligned


def test_padded_area_already_aligned_takes_its_top() -> None:
    mm = mm_of("d4148aeab412")
    top = 0x7FFF00000000  # a 2 MiB-aligned start of an existing mapping
    mm.vmas.append(Vma(top, MMAP_BASE))
    # ret = top - 6M is aligned: off_sub == 0 and MMF_TOPDOWN -> ret + PMD_SIZE, flush below the VMA
    assert mm.placement(4 * M) == top - 4 * M


def test_a_hole_left_by_munmap_is_found_again() -> None:
    mm = mm_of("d4148aeab412")
    a = Vma(mm.placement(LEN), MMAP_BASE)
    mm.vmas.append(a)
    b_start = mm.placement(LEN)
    assert b_start == a.start - LEN
    mm.vmas.append(Vma(b_start, b_start + LEN))
    mm.vmas.remove(a)
    assert mm.placement(LEN) == MMAP_BASE - LEN  # the highest gap that fits: a's old place


@pytest.mark.parametrize(("kernel", "aligned"), [("849d5cff4d48^", False), ("849d5cff4d48", True)])
def test_dev_zero_private_alignment_has_no_length_condition(kernel: str, aligned: bool) -> None:
    mm = mm_of(kernel)
    start = mm.placement(LEN, "devzero")
    assert (start % (2 * M) == 0) is aligned
    assert start == (0x7FFFEFE00000 if aligned else MMAP_BASE - LEN)


def test_mmap_pgoff_takes_mmap_lock_for_write_and_links_the_vma() -> None:
    mm = mm_of("d4148aeab412^")
    s = mm.system
    t = Task(0, "t", cpu=0, mm=mm)
    out: list[Vma] = []

    def body():  # type: ignore[no-untyped-def]
        out.append((yield from mm.mmap_pgoff(t, LEN)))

    s.sched.spawn(t, body())
    s.engine.run()
    assert out[0].start == 0x7FFFEFE00000 and out[0].size == LEN
    assert mm.vmas == out
    assert mm.mmap_sem.stat.acquisitions == 1
