"""Transparent huge page faults (mm/huge_memory.c).

``do_huge_pmd_anonymous_page`` (v3.12 .. v4.18): allocate an order-9 page
(``alloc_hugepage_vma``), allocate the PTE table to deposit
(``pte_alloc_one``), clear the huge page outside any lock
(``clear_huge_page``: 512 × ``clear_page`` with ``cond_resched()`` between
sub-pages, in the order of policy ``huge_clear_order``), then under the PMD lock
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
from mmsim.mm import lru_anon
from mmsim.mm import memory as _mem  # circular: memory.handle_mm_fault calls in here
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT

HPAGE_PMD_SIZE = 2 << 20
HPAGE_PMD_ORDER = 9
THP_FAULT_ALLOC = int(VmEvent.THP_FAULT_ALLOC)
COW_FAULT = int(VmEvent.COW_FAULT)



def thp_applies(system: Any, vma: Vma, addr: int) -> bool:
    """``transparent_hugepage_enabled(vma)`` and the huge range fits the VMA."""
    mode = system.policy("thp")
    if mode == "never" or (mode == "madvise" and not vma.thp_advised) or not vma.anon:
        return False
    haddr = addr & ~(HPAGE_PMD_SIZE - 1)
    return haddr >= vma.start and haddr + HPAGE_PMD_SIZE <= vma.end


def do_huge_pmd_anonymous_page(
    task: Task, mm: MmStruct, vma: Vma, addr: int, write: bool = True
) -> Generator[Any, Any, bool]:
    """For a read fault with ``use_zero_page`` (the default), map the huge
    zero page under the PMD lock (``set_huge_zero_page``, v4.13); else the
    allocate / ``clear_huge_page`` / map sequence described above."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    slot = addr >> PMD_SHIFT
    pt = mm.pgtables
    if not write:
        lk = pt.pmd_lockptr(slot)
        yield lk.acquire(task)
        if slot in pt.pmd:
            lk.release(task)
            return False
        ns, ins = path("__do_huge_pmd_anonymous_page", s.machine.freq_ghz)
        yield c.busy(cpu, "set_huge_zero_page", ns, ins)
        pt.pmd[slot] = PMD_HUGE
        pt.zero_huge.add(slot)
        lk.release(task)
        return True
    owner = (mm, slot)
    node = yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), HPAGE_PMD_ORDER, owner=owner)
    # __do_huge_pmd_anonymous_page (v3.13): pte_alloc_one() first, then clear_huge_page()
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), 0, owner=owner)  # pte_alloc_one
    yield from _mem.clear_huge_page(task, s, node, ("H", id(mm), slot), addr)
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
    pt.huge_node[slot] = node
    yield mm.rss_stat.add(task, "add_mm_counter")
    if mm.nr_ptes is not None:
        yield mm.nr_ptes.add(task, "do_huge_pmd_anonymous_page")
    yield from lru_anon.new_anon_folio(task, s, node, 1 << HPAGE_PMD_ORDER, (id(mm), slot))  # issue 22
    lk.release(task)
    c.vm[cpu][THP_FAULT_ALLOC] += 1
    return True


def do_huge_pmd_wp_page(task: Task, mm: MmStruct, vma: Vma, addr: int) -> Generator[Any, Any, str]:
    """mm/huge_memory.c ``do_huge_pmd_wp_page`` (v4.13): a write to a
    write-protected huge PMD. The huge zero page is replaced by a new
    cleared page. A page inherited over fork and still mapped elsewhere
    (``page_trans_huge_mapcount() > 1``) is copied into a new huge page with
    ``copy_user_huge_page`` outside the lock; then, under the PMD lock, the
    new page is mapped and the old one loses a mapping
    (``page_remove_rmap``: an atomic on ``compound_mapcount``) and its
    references (``put_page``: atomics on ``_refcount``) — struct page lines
    every child of the same parent hits. A page mapped once is reused."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    slot = addr >> PMD_SHIFT
    pt = mm.pgtables
    lk = pt.pmd_lockptr(slot)
    zero = slot in pt.zero_huge
    old = None if zero else (pt.shared.get(slot) or ("H", id(mm), slot))
    if old is not None:
        yield lk.acquire(task)
        head, mapcount = s.page_line(old), s.page_line((old, "compound_mapcount"))
        yield c.busy(cpu, "page_trans_huge_mapcount", mapcount.rmw(cpu, s.engine.now))
        if s.page_mapcount.get(old, 1) <= 1:  # reuse: only this mapping left
            pt.wp_huge.discard(slot)
            pt.shared.pop(slot, None)
            lk.release(task)
            return "thp-reuse"
        yield c.busy(cpu, "get_page", head.rmw(cpu, s.engine.now))
        lk.release(task)
    node = yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), HPAGE_PMD_ORDER)
    new = ("H", id(mm), slot)
    if zero:
        yield from _mem.clear_huge_page(task, s, node, new, addr)
    else:
        # v4.13 passes haddr; c9f4cd713835 (v4.18) passes vmf->address. For a
        # sequential writer both are the first sub-page.
        hint = addr if s.policy("huge_copy_order") == "target-last" else addr & ~(HPAGE_PMD_SIZE - 1)
        yield from _mem.copy_user_huge_page(task, s, node, new, old, hint)
    yield lk.acquire(task)
    ns, ins = path("do_huge_pmd_wp_page", s.machine.freq_ghz)
    yield c.busy(cpu, "do_huge_pmd_wp_page", ns, ins)
    if old is not None:
        now = s.engine.now
        yield c.busy(cpu, "page_remove_rmap", s.page_line((old, "compound_mapcount")).rmw(cpu, now))
        yield c.busy(cpu, "put_page", 2 * s.page_line(old).rmw(cpu, s.engine.now))
        s.page_mapcount[old] = s.page_mapcount.get(old, 1) - 1
    else:
        yield mm.rss_stat.add(task, "add_mm_counter")
    pt.zero_huge.discard(slot)
    pt.wp_huge.discard(slot)
    pt.shared.pop(slot, None)
    pt.huge_node[slot] = node
    lk.release(task)
    c.vm[cpu][THP_FAULT_ALLOC] += 1
    c.vm[cpu][COW_FAULT] += 1
    return "thp-cow"
