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
from mmsim.mm import lru_anon, memcg_kmem
from mmsim.mm import memory as _mem  # circular: memory.handle_mm_fault calls in here
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE, note_pte_node

HPAGE_PMD_SIZE = 2 << 20
HPAGE_PMD_ORDER = 9
THP_FAULT_ALLOC = int(VmEvent.THP_FAULT_ALLOC)
COW_FAULT = int(VmEvent.COW_FAULT)
THP_SPLIT_PMD = int(VmEvent.THP_SPLIT_PMD)



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
    s.cache.bind(("H", id(mm), slot), s.page_alloc.last_pfn, HPAGE_PMD_ORDER)  # its cache state is the frame's
    # __do_huge_pmd_anonymous_page (v3.13): pte_alloc_one() first, then clear_huge_page()
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), 0, owner=owner)  # pte_alloc_one
    ns = memcg_kmem.charge_pgtable(task, s)  # the deposited table is charged like any (3e79ec7, v4.8)
    if ns:
        yield ns
    yield from _mem.clear_huge_page(task, s, node, ("H", id(mm), slot), addr)
    lk = pt.pmd_lockptr(slot)
    yield lk.acquire(task)
    if slot in pt.pmd:  # raced: someone mapped it (pmd_none() false under the lock)
        lk.release(task)
        ns = memcg_kmem.uncharge_pgtable(task, s)  # pte_free(mm, pgtable)
        if ns:
            yield ns
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


# --- issue 15: THP COW split (3917c80280c9) ---
# (cycles, instructions) of __split_huge_pmd + __split_huge_pmd_locked for an anonymous THP (the v6.1-era
# mm/huge_memory.c read, store id 21518380), counted from the code: mmu_notifier range start/end, pmd_lock
# (charged apart), pmdp_invalidate (a local flush_pmd_tlb_range), pgtable_trans_huge_withdraw +
# pmd_populate (~200 together); per sub-page mk_pte, maybe_mkwrite, pte_wrprotect, pte_mkold, the
# soft-dirty/uffd tests, pte_offset_map, set_pte_at (~15 instructions) and atomic_inc(&page[i]._mapcount)
# (a locked RMW on the sub-page's own struct page line, ~20 cycles uncontended): ~35 cycles x 512; then
# the compound_mapcount / _nr_pages_mapped accounting and munlock_vma_page (~100). estimate (plausible
# 10,000-40,000 cycles: the 512 struct page lines may miss). The head page's refcount (page_ref_add) and
# the compound mapcount lines are charged apart, by the line model.
SPLIT_HUGE_PMD = (18_200, 8_000)
# __split_huge_zero_page_pmd: pmdp_huge_clear_flush, withdraw, 512 x pfn_pte(my_zero_pfn) + pte_mkspecial
# + set_pte_at (~8 instructions, no atomic), pmd_populate. estimate (plausible 3,000-8,000)
SPLIT_HUGE_ZERO_PMD = (4_500, 4_300)


def subpage_key(huge: Any, i: int) -> tuple[str, Any, int]:
    """The page key of sub-page ``i`` of the THP ``huge`` once its PMD was split into PTEs."""
    return ("Hsub", huge, i)


def __split_huge_pmd(task: Task, mm: MmStruct, slot: int, old: Any) -> Generator[Any, Any, None]:
    """mm/huge_memory.c ``__split_huge_pmd`` (v5.8+; the v6.1-era code read) of a write-protected
    anonymous huge PMD: under the PMD lock, withdraw the deposited PTE table and fill it with 512
    write-protected PTEs to the THP's sub-pages (``old`` is the THP's key; ``None``: the huge zero
    page, ``__split_huge_zero_page_pmd``: 512 zero-page PTEs). The THP stays one (large) folio, now
    PTE-mapped: each later write to it is a 4 KiB COW fault (``do_wp_page``)."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    pt = mm.pgtables
    lk = pt.pmd_lockptr(slot)
    yield lk.acquire(task)
    cyc, ins = SPLIT_HUGE_PMD if old is not None else SPLIT_HUGE_ZERO_PMD
    d = c.busy(cpu, "__split_huge_pmd_locked", int(cyc / s.machine.freq_ghz), ins)
    if old is not None:  # page_ref_add(page, HPAGE_PMD_NR - 1) and the compound_mapcount decrement
        now = s.engine.now
        d += c.busy(cpu, "page_ref_add", s.page_line(old).rmw(cpu, now))
        d += c.busy(cpu, "page_remove_rmap", s.page_line((old, "compound_mapcount")).rmw(cpu, now))
    yield d
    pfn0 = slot << 9
    pt.pmd[slot] = PMD_TABLE
    pt.nr_pte_tables += 1  # the deposited table, now in use
    pt.pte_bitmap(slot)[:] = True
    node = pt.huge_node.pop(slot, s.machine.cpu_node(mm.home_cpu))
    if old is None:
        pt.zero_huge.discard(slot)
        pt.zero_ptes.update(range(pfn0, pfn0 + 512))
    else:
        pt.wp_huge.discard(slot)
        pt.shared.pop(slot, None)
        pt.wp_ptes.update(range(pfn0, pfn0 + 512))
        for i in range(512):
            pt.shared[("P", pfn0 + i)] = subpage_key(old, i)
    for i in range(512):
        note_pte_node(pt, slot, i, node)
    lk.release(task)
    c.vm[cpu][THP_SPLIT_PMD] += 1


def do_huge_pmd_wp_page(task: Task, mm: MmStruct, vma: Vma, addr: int) -> Generator[Any, Any, str]:
    """mm/huge_memory.c ``do_huge_pmd_wp_page``, by policy ``thp_cow``. ``split`` (3917c80280c9, v5.8;
    the same in v6.18, whose ``wp_huge_pmd`` calls it for anonymous VMAs): the huge zero page always,
    and a THP another mapping still shares (not ``PageAnonExclusive``, ``folio_ref_count`` > 1), go to
    ``fallback``: :func:`__split_huge_pmd` and ``VM_FAULT_FALLBACK``, after which ``__handle_mm_fault``
    handles the same fault at PTE level (``do_wp_page``: a 4 KiB copy); returns ``"thp-split"``. A THP
    mapped once is reused. ``copy`` (v4.13), below: a
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
    if s.policy("thp_cow") == "split":
        if old is not None:
            yield lk.acquire(task)
            if s.page_mapcount.get(old, 1) <= 1:  # folio_ref_count == 1: reuse
                pt.wp_huge.discard(slot)
                pt.shared.pop(slot, None)
                lk.release(task)
                return "thp-reuse"
            lk.release(task)  # unlock_fallback
        yield from __split_huge_pmd(task, mm, slot, old)
        return "thp-split"
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
    s.cache.bind(new, s.page_alloc.last_pfn, HPAGE_PMD_ORDER)
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
