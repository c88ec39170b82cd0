"""Transparent huge page faults (mm/huge_memory.c).

``do_huge_pmd_anonymous_page`` (v3.12/v3.13): allocate an order-9 page
(``alloc_hugepage_vma``), clear it outside any lock (``clear_huge_page``:
512 × ``clear_page`` with ``cond_resched()`` between sub-pages), allocate
the PTE table to deposit (``pte_alloc_one``), then under the PMD lock
(``mm->page_table_lock``, or the split PMD lock after e009bb30c8df):
``set_pmd_at``, ``page_add_new_anon_rmap``,
``pgtable_trans_huge_deposit`` (links the PTE table on ``pmd_huge_pte``),
``add_mm_counter(mm, MM_ANONPAGES, HPAGE_PMD_NR)`` (an atomic on
``mm->rss_stat``) and ``mm->nr_ptes`` (plain under the lock, or
``atomic_long_inc`` after e1f56c89b040).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.metrics.events import VmEvent
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT

HPAGE_PMD_SIZE = 2 << 20
HPAGE_PMD_ORDER = 9
THP_FAULT_ALLOC = int(VmEvent.THP_FAULT_ALLOC)


def thp_applies(system: Any, vma: Vma, addr: int) -> bool:
    """``transparent_hugepage_enabled(vma)`` and the huge range fits the VMA."""
    mode = system.policy("thp")
    if mode == "never" or (mode == "madvise" and not vma.thp_advised) or not vma.anon:
        return False
    haddr = addr & ~(HPAGE_PMD_SIZE - 1)
    return haddr >= vma.start and haddr + HPAGE_PMD_SIZE <= vma.end


def do_huge_pmd_anonymous_page(task: Task, mm: MmStruct, vma: Vma, addr: int) -> Generator[Any, Any, bool]:
    s = mm.system
    c = s.counters
    cpu = task.cpu
    owner = (mm, addr >> PMD_SHIFT)
    node = yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), HPAGE_PMD_ORDER, owner=owner)
    yield from _clear_huge_page(task, s, node)
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), 0, owner=owner)  # pte_alloc_one
    slot = addr >> PMD_SHIFT
    pt = mm.pgtables
    lk = pt.pmd_lockptr(slot)
    yield lk.acquire(task)
    if slot in pt.pmd:  # raced: someone mapped it (pmd_none() false under the lock)
        lk.release(task)
        return False
    ns, ins = path("__do_huge_pmd_anonymous_page", s.machine.freq_ghz)
    yield c.busy(cpu, "__do_huge_pmd_anonymous_page", ns, ins)
    line = pt.pmd_huge_pte_line(slot)
    yield c.busy(cpu, "pgtable_trans_huge_deposit", line.rmw(cpu, s.engine.now))
    pt.pmd[slot] = PMD_HUGE
    yield mm.rss_stat.add(task, "add_mm_counter")
    if mm.nr_ptes is not None:
        yield mm.nr_ptes.add(task, "do_huge_pmd_anonymous_page")
    lk.release(task)
    c.vm[cpu][THP_FAULT_ALLOC] += 1
    return True


def _clear_huge_page(task: Task, s: Any, node: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``clear_huge_page``: 512 sub-page clears in one stream; the
    per-sub-page ``cond_resched()`` is honoured once after the stream."""
    from mmsim.mm.memory import stream_write

    yield stream_write(task, s, node, HPAGE_PMD_SIZE, "clear_page_erms")
    if s.sched.cpus[task.cpu].need_resched:
        yield from s.sched.cond_resched(task)
