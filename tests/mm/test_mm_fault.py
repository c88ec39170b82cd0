"""One task faulting on ``tiny`` (1.0 GHz: path cycles = ns), v3.12 vs v3.13.

Every lock and line lives on CPU 0 (mm home CPU 0, zone 0 lock on CPU 0) and
the task runs on CPU 0, so no transfers: the timeline is fault entry,
path lengths, the PCP refill and the clears (10 GB/s = 10 bytes/ns,
int(bytes / 10) + 1 ns per stream).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.metrics.counters import PAGE_FAULTS
from mmsim.metrics.events import VmEvent
from mmsim.mm import memory
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_TABLE
from mmsim.mm.system import System

GIB = 1 << 30
MIB = 1 << 20
TOTAL_PAGES = 2 * GIB // 4096  # two 1 GiB nodes = 524288 pages

# Shared prefix of every first fault in a fresh mm (t in ns):
#   page_fault 1000 → 1000; mmap_sem down_read 0; handle_mm_fault 300 → 1300;
#   __pmd_alloc: get_page_from_freelist 60 → 1360, PCP empty → rmqueue_bulk of
#   batch 31 pages under zone->lock: 31 × 70 = 2170 and expand()'s 36 split levels (RMQ_SPLITS:
#   pfns 0-30 taken from a fresh order-10 block leave 6 free blocks, pfn 31 and orders 5-9, and
#   each split adds one, each take after the first removes one: 6 + 30) × 22 = 792, plus the
#   struct page lines of a never-touched order-10 block (RMQ_LINES) → 5294; clear 4096 B:
#   int(4096/10)+1 = 410 → 5704; link under mm->page_table_lock (0 ns).
# RMQ_LINES: from memory (100 ns), the first two misses of each vmemmap 4 KiB page (64 struct
#   pages): pfns 0 and 32 (vmemmap page 0), the halves 512, 256, 128, 64 (pages 8, 4, 2, 1);
#   the other 31 lines of vmemmap page 0 touched (pfns 1-31: taken or split off as halves)
#   streamed into the L2: 12 ns each.
RMQ_LINES = 2 * 100 + 4 * 100 + 31 * 12
RMQ_SPLITS = 36 * 22  # mm/costs.py "expand/level" (docs/validation-paths.md, session 30)
PMD_ALLOC_DONE = 3940 + RMQ_SPLITS + RMQ_LINES
# THP: anon_vma_prepare (the VMA's first write fault) 700 → +700; __rmqueue order 9 (block 512,
# a half this CPU wrote 4 KiB of clearing ago: in its L1d, 0): 70; clear 2 MiB: int(2097152/10)+1 =
# 209716; pte_alloc_one from the PCP: 60; PMD lock (0); __do_huge_pmd_anonymous_page 300; deposit,
# rss_stat, nr_ptes atomics 0; the 511 tail struct pages (prep_compound_page) were last written by
# CPU 0 itself: 0.
THP_DONE = 214_786 + RMQ_SPLITS + RMQ_LINES
# 4 KiB: __pte_alloc: 60 → 4000, clear 410 → 4410, populate under page_table_lock;
# anon_vma_prepare (the VMA's first write fault) 700 → 5110;
# do_anonymous_page: PCP fast path 60 + clear 410 → 5580; PTE lock;
# do_anonymous_page path 400 → 5980 (+ RMQ_LINES).
ANON_DONE = 5980 + RMQ_SPLITS + RMQ_LINES


def _system(tiny: Machine, kernel: str, **overrides: str) -> tuple[System, MmStruct, Task]:
    s = System(tiny, resolve(kernel, overrides=overrides or None), seed=0)
    mm = MmStruct(s, home_cpu=0)
    return s, mm, Task(1, "t", cpu=0, mm=mm)


def _fault(s: System, mm: MmStruct, t: Task, vma: Vma, addrs: list[int]) -> list[str]:
    kinds: list[str] = []

    def body() -> Generator[Any, Any, None]:
        for a in addrs:
            kind = yield from memory.handle_mm_fault(t, mm, vma, a)
            kinds.append(kind)

    s.sched.spawn(t, body())
    s.engine.run()
    return kinds


def _vm(s: System) -> dict[VmEvent, int]:
    return s.counters.vm_total()


@pytest.mark.parametrize(
    ("kernel", "pmd_lock"), [("v3.12", "&mm->page_table_lock"), ("v3.13", "ptlock_ptr(pmd page)")]
)
def test_thp_fault(tiny: Machine, kernel: str, pmd_lock: str) -> None:
    s, mm, t = _system(tiny, kernel)
    vma = Vma(GIB, GIB + 4 * MIB)  # 2 MiB aligned: both huge ranges fit
    mm.vmas.append(vma)
    assert _fault(s, mm, t, vma, [GIB]) == ["thp"]
    assert s.engine.now == THP_DONE
    vm = _vm(s)
    # PMD table (1) + huge page (512) + deposited PTE table (1).
    assert vm[VmEvent.PGALLOC_NORMAL] == 1 + 512 + 1
    assert vm[VmEvent.THP_FAULT_ALLOC] == 1
    assert vm[VmEvent.PGFAULT] == 1 and s.counters.perf[0][PAGE_FAULTS] == 1
    assert mm.pgtables.pmd == {GIB >> 21: PMD_HUGE}
    assert mm.pgtables.nr_pmd_tables == 1 and mm.pgtables.nr_pte_tables == 0
    locks = s.locks.stats
    if kernel == "v3.12":
        # __pmd_alloc and the huge PMD both under mm->page_table_lock; no split lock exists.
        assert locks["&mm->page_table_lock"].acquisitions == 2
        assert "ptlock_ptr(pmd page)" not in locks
        assert "mm->nr_ptes" not in locks
    else:
        assert locks["&mm->page_table_lock"].acquisitions == 1  # __pmd_alloc only
        assert locks[pmd_lock].acquisitions == 1
        assert locks["mm->nr_ptes"].acquisitions == 1  # atomic_long_inc (e1f56c89b040)
    # The huge PMD is set under the PMD lock for exactly the 300 ns of its path.
    assert locks[pmd_lock].hold_ns_total == 300
    assert locks["mm->rss_stat"].acquisitions == 1
    assert locks["&mm->mmap_sem"].acquisitions == 1
    assert locks["&mm->mmap_sem"].hold_ns_total == THP_DONE - 1000  # read-held from 1000
    assert "ptlock_ptr(pte page)" not in locks
    prof = s.counters.prof_ns[0]
    assert prof["clear_page_erms"] == 410 + 209_716
    assert prof["rmqueue_bulk"] == 2170 + RMQ_SPLITS + RMQ_LINES and prof["__rmqueue"] == 70


def test_thp_fault_then_same_huge_page_is_mapped(tiny: Machine) -> None:
    s, mm, t = _system(tiny, "v3.13")
    vma = Vma(GIB, GIB + 4 * MIB)
    kinds = _fault(s, mm, t, vma, [GIB, GIB + 4096 * 7])
    # The second address is in the same huge page: a fault that finds it mapped.
    assert kinds == ["thp", "none"]
    assert _vm(s)[VmEvent.PGFAULT] == 2 and _vm(s)[VmEvent.THP_FAULT_ALLOC] == 1


@pytest.mark.parametrize("kernel", ["v3.12", "v3.13"])
def test_4k_fault_at_misaligned_vma_edge(tiny: Machine, kernel: str) -> None:
    s, mm, t = _system(tiny, kernel)
    vma = Vma(GIB + 4096, GIB + 4096 + 4 * MIB)  # huge range [GIB, GIB+2M) starts below the VMA
    assert _fault(s, mm, t, vma, [vma.start]) == ["anon"]
    assert s.engine.now == ANON_DONE
    vm = _vm(s)
    assert vm[VmEvent.PGALLOC_NORMAL] == 3  # PMD table, PTE table, the page
    assert vm[VmEvent.THP_FAULT_ALLOC] == 0
    slot = GIB >> 21
    assert mm.pgtables.pmd == {slot: PMD_TABLE}
    assert mm.pgtables.ptes[slot].nonzero()[0].tolist() == [1]  # PTE index of GIB + 4096
    locks = s.locks.stats
    # pte_ptl=split on both: the PTE is set under the PTE table page's lock.
    assert locks["ptlock_ptr(pte page)"].acquisitions == 1
    assert locks["ptlock_ptr(pte page)"].hold_ns_total == 400
    # __pmd_alloc populates under mm->page_table_lock; __pte_alloc under pmd_lock(): that is
    # page_table_lock on v3.12, the split PMD lock on v3.13 (c4088ebdca64).
    if kernel == "v3.12":
        assert locks["&mm->page_table_lock"].acquisitions == 2
        assert "ptlock_ptr(pmd page)" not in locks
    else:
        assert locks["&mm->page_table_lock"].acquisitions == 1
        assert locks["ptlock_ptr(pmd page)"].acquisitions == 1


def test_thp_never_gives_only_4k_faults(tiny: Machine) -> None:
    s, mm, t = _system(tiny, "v3.13", thp="never")
    vma = Vma(GIB, GIB + 4 * MIB)
    kinds = _fault(s, mm, t, vma, [GIB, GIB + 4096, GIB + 2 * MIB])
    assert kinds == ["anon", "anon", "anon"]
    vm = _vm(s)
    assert vm[VmEvent.THP_FAULT_ALLOC] == 0
    # 1 PMD table + 2 PTE tables (one per 2 MiB) + 3 pages.
    assert vm[VmEvent.PGALLOC_NORMAL] == 6
    assert mm.pgtables.nr_pte_tables == 2
    # First fault as the misaligned one (5980). Second (same PTE table): entry 1000
    # + 300, PCP page 60 + clear 410, PTE path 400 = 2170 → 7450. Third (next 2 MiB):
    # 1300 + __pte_alloc (60 + 410) + 470 + 400 = 2640 → 10790.
    assert s.engine.now == ANON_DONE + 2170 + 2640 == 10_790 + RMQ_SPLITS + RMQ_LINES


def test_thp_madvise_needs_the_advice(tiny: Machine) -> None:
    s, mm, t = _system(tiny, "v3.13", thp="madvise")
    plain, advised = Vma(GIB, GIB + 2 * MIB), Vma(GIB + 2 * MIB, GIB + 4 * MIB, thp_advised=True)
    kinds: list[str] = []

    def body() -> Generator[Any, Any, None]:
        for vma in (plain, advised):
            kinds.append((yield from memory.handle_mm_fault(t, mm, vma, vma.start)))

    s.sched.spawn(t, body())
    s.engine.run()
    assert kinds == ["anon", "thp"]


def test_page_conservation(tiny: Machine) -> None:
    s, mm, t = _system(tiny, "v3.13")
    vma = Vma(GIB + 4096, GIB + 8 * MIB)
    # One 4 KiB fault at the edge, then huge pages at GIB+2M, +4M, +6M.
    _fault(s, mm, t, vma, [vma.start, GIB + 2 * MIB, GIB + 4 * MIB, GIB + 6 * MIB])
    pa = s.page_alloc
    allocated = _vm(s)[VmEvent.PGALLOC_NORMAL]
    # PMD table + PTE table + page + 3 × (512 + deposited PTE table) = 1542.
    assert allocated == 3 + 3 * 513
    assert pa.free_pages_count() + allocated == TOTAL_PAGES
    # The buddy lists gave 31 (one PCP refill) + 3 × 512; the PCP holds the rest.
    assert pa.zones[0].free_pages == TOTAL_PAGES // 2 - 31 - 3 * 512
    assert pa.zones[1].free_pages == TOTAL_PAGES // 2
    assert pa.pcp[0] == [31 - 6, 0]


def test_read_fault_maps_the_zero_page_with_its_own_path_and_write_pays_the_folio(tiny: Machine) -> None:
    """Issue 15: a zero-page read fault is charged do_anonymous_page's read branch (80 cycles), no
    folio work; a write fault pays ``anon_folio_ns`` on top of the allocator and the clear."""
    import dataclasses

    m = dataclasses.replace(tiny, cost=dataclasses.replace(tiny.cost, anon_folio_ns=250.0))
    s, mm, t = _system(m, "v3.13", thp="never")
    vma = Vma(GIB, GIB + 4 * MIB)
    done: list[int] = []

    def body() -> Generator[Any, Any, None]:
        for a, w in ((GIB, False), (GIB + 4096, False), (GIB + 8192, True)):
            yield from memory.handle_mm_fault(t, mm, vma, a, write=w)
            done.append(s.engine.now)

    s.sched.spawn(t, body())
    s.engine.run()
    # First read: PMD_ALLOC_DONE, __pte_alloc 60 + 410, do_anonymous_page/zero 80 (no anon_vma_prepare).
    assert done[0] == PMD_ALLOC_DONE + 470 + 80
    # Second read, same PTE table: entry 1000 + handle_mm_fault 300 + 80.
    assert done[1] - done[0] == 1380
    # Write: anon_vma_prepare 700 + 1300 + PCP 60 + clear 410 + anon_folio 250 + do_anonymous_page 400.
    assert done[2] - done[1] == 700 + 1300 + 60 + 410 + 250 + 400
    prof = s.counters.prof_ns[0]
    assert prof["alloc_anon_folio"] == 250 and prof["do_anonymous_page"] == 80 + 80 + 400
    assert mm.pgtables.zero_ptes == {GIB >> 12, (GIB + 4096) >> 12}
