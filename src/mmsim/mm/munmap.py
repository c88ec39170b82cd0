"""Unmapping (mm/mmap.c ``do_munmap`` → ``unmap_region``; mm/memory.c
``unmap_page_range``/``zap_pte_range``/``zap_huge_pmd``, ``free_pgtables``;
mm/mmu_gather.c ``tlb_finish_mmu`` → mm/swap.c ``release_pages``).

Under ``mmap_lock`` for write: every present PTE is cleared and its page
released, a huge PMD releases its THP and the deposited PTE table, the PTE
tables of the range are freed, the TLB is flushed on every CPU the mm runs
on (one IPI round trip to each), and the VMA goes away. The pages are the
ones the fault paths allocated for this mm and PMD slot, freed through the
page allocator in the order they were allocated (``release_pages`` batches
them onto the PCP; THPs go to the THP PCP list on v5.14+).

It lives here until mm/mmap.py and mm/memory.py take it over.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from mmsim.engine.core import PARK, Task
from mmsim.mm import memcg_kmem, zap
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE

PAGE_SHIFT = 12
# arch/x86/mm/tlb.c tlb_single_page_flush_ceiling (v4.7+ default): above it flush_tlb_mm_range flushes the mm
TLB_SINGLE_PAGE_FLUSH_CEILING = 33


class Gather:
    """The parts of ``struct mmu_gather`` (mm/mmu_gather.c, include/asm-generic/tlb.h v6.7) that decide the
    final flush: ``start``/``end``, ``cleared_ptes`` / ``cleared_pmds`` (the stride of
    ``tlb_get_unmap_shift``) and the page tables handed to ``pte_free_tlb``."""

    __slots__ = ("start", "end", "cleared_ptes", "tables")

    def __init__(self) -> None:
        self.tables: list[int] = []
        self.reset()

    def reset(self) -> None:
        """``__tlb_reset_range`` after a flush (a ``force_flush`` of a table's dirty shared PTEs)."""
        self.start, self.end, self.cleared_ptes = 1 << 64, 0, False

    def add(self, addr: int, size: int, pte: bool) -> None:
        """``__tlb_adjust_range`` (with ``tlb_flush_pte_range`` for a PTE, ``tlb_flush_pmd_range`` for a huge
        PMD and for a freed table: ``pte_free_tlb`` adds ``PAGE_SIZE`` at the table's address)."""
        self.start = min(self.start, addr)
        self.end = max(self.end, addr + size)
        self.cleared_ptes |= pte

    def zap_table(self, vma: Vma, slot: int, bm: Any) -> None:
        """A PTE table's present entries inside ``vma`` (their lowest and highest page); the table itself is
        added by :meth:`flush_ns` (``free_pgtables`` runs after the zap: ``free_pte_range`` is called with the
        range's address in that PMD, the VMA's start in its first)."""
        base = slot << PMD_SHIFT
        lo = max(vma.start, base)
        self.tables.append(lo)
        if bm is not None:
            first, last = (lo - base) >> PAGE_SHIFT, (min(vma.end, base + (1 << PMD_SHIFT)) - base) >> PAGE_SHIFT
            idx = np.flatnonzero(bm[first:last])
            if len(idx):
                self.add(base + ((first + int(idx[0])) << PAGE_SHIFT), (int(idx[-1]) - int(idx[0]) + 1) << PAGE_SHIFT,
                         True)

    def flush_ns(self, s: Any) -> int:
        """``tlb_flush`` → ``flush_tlb_mm_range``'s local part (arch/x86/mm/tlb.c v6.7): nothing for an empty
        range (an untouched mapping); INVLPG per page up to the ceiling, else a full flush of the mm. The
        stride is ``PAGE_SHIFT`` if any PTE was cleared since the last flush, else ``PMD_SHIFT``."""
        for addr in self.tables:  # free_pgtables -> pte_free_tlb: tlb_flush_pmd_range(tlb, addr, PAGE_SIZE)
            self.add(addr, 1 << PAGE_SHIFT, False)
        if not self.end:
            return 0
        shift = PAGE_SHIFT if self.cleared_ptes else PMD_SHIFT
        full = (self.end - self.start) >> shift > TLB_SINGLE_PAGE_FLUSH_CEILING
        ns, _ = path("flush_tlb_mm_range/full" if full else "flush_tlb_mm_range/local", s.machine.freq_ghz)
        return ns

    def rcu(self, s: Any) -> bool:
        """Tables were freed and go through ``tlb_remove_table``'s RCU batch (policy ``pgtable_free``)."""
        return bool(self.tables) and s.policy("pgtable_free") == "rcu"

    def free_tables(self, task: Task, s: Any) -> Generator[Any, Any, None]:
        """Policy ``pgtable_free=rcu`` (mm/mmu_gather.c v6.7 ``tlb_remove_table``): the first table takes a
        batch page (``__get_free_page(GFP_NOWAIT)``), ``tlb_table_flush`` at the end ``call_rcu``s it, and
        ``tlb_remove_table_rcu`` after the grace period frees the batch page (the tables' own pages are freed
        with the mapping's, :meth:`PageAlloc.free_owned`). Simplified: the batch is freed at once, by the same
        CPU (the RCU softirq's CPU is the caller's), not a grace period later. One batch holds
        ``MAX_TABLE_BATCH`` tables ((4096 - 24) / 8 = 509 on x86-64), more than any modelled munmap frees."""
        if not self.rcu(s):
            return
        c = s.counters
        pa = s.page_alloc
        f = s.machine.freq_ghz
        pfn, pending = yield from pa.alloc_pages_pfn(task, s.machine.cpu_node(task.cpu), 0)
        for name in ("tlb_remove_table", "call_rcu", "tlb_remove_table_rcu"):
            ns, ins = path(name, f)
            pending += c.busy(task.cpu, name, ns, ins)
        pending = yield from pa.free_pages(task, pfn, 0, pending)
        if pending:
            yield pending


def do_munmap(task: Task, mm: MmStruct, vma: Vma, cpus: list[int]) -> Generator[Any, Any, None]:
    """Unmap all of ``vma``; ``cpus``: the CPUs in ``mm_cpumask`` (TLB shootdown)."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    pa = s.page_alloc
    d = mm.mmap_sem.down_write(task)
    if d is PARK:
        yield d
        d = 0
    ns, ins = path("do_munmap", s.machine.freq_ghz)
    pending = d + c.busy(cpu, "do_munmap", ns, ins)
    zap_ns, zap_ins = path("zap_pte", s.machine.freq_ghz)
    pt = mm.pgtables
    tlb = Gather()
    for slot in range(vma.start >> PMD_SHIFT, ((vma.end - 1) >> PMD_SHIFT) + 1):
        state = pt.pmd.pop(slot, None)
        if state is None:
            continue
        pt.shared.pop(slot, None)
        none = 0
        if state == PMD_TABLE:
            bm = pt.ptes.pop(slot, None)
            n = int(bm.sum()) if bm is not None else 0
            none = zap.none_ptes(vma, slot, n)
            tlb.zap_table(vma, slot, bm)
            pt.nr_pte_tables -= 1
            for pfn in range(slot << 9, (slot + 1) << 9):
                pt.zero_ptes.discard(pfn)
                pt.wp_ptes.discard(pfn)
                pt.shared.pop(("P", pfn), None)
        else:
            assert state == PMD_HUGE
            n = 1
            tlb.add(slot << PMD_SHIFT, 1 << PMD_SHIFT, False)
            if slot in pt.zero_huge:
                pt.zero_huge.discard(slot)
            else:  # zap_huge_pmd -> zap_deposited_table: the deposited PTE table is freed
                pending += memcg_kmem.uncharge_pgtable(task, s)
            pt.wp_huge.discard(slot)
            pt.huge_node.pop(slot, None)
        if state == PMD_TABLE:  # free_pgtables -> free_pte_range -> pte_free_tlb
            pending += memcg_kmem.uncharge_pgtable(task, s)
        pending += c.busy(cpu, "unmap_page_range", zap_ns * n, zap_ins * n) + zap.scan_none(task, s, none)
        pending = yield from pa.free_owned(task, (mm, slot), pending)
    # flush_tlb_mm_range: the local flush, an IPI to every other CPU of the mm and the wait for its ack
    xfer = s.machine.xfer_ns
    pending += c.busy(cpu, "flush_tlb_mm_range",
                      tlb.flush_ns(s) + int(sum(2 * xfer(cpu, o, modified=True) for o in cpus if o != cpu)))
    if tlb.rcu(s):
        yield pending
        pending = 0
        yield from tlb.free_tables(task, s)
    mm.vmas.remove(vma)
    pending += unlink_anon_vmas(task, s, vma)
    if getattr(vma.file, "is_shmem", False):  # free_pgtables -> unlink_file_vma under i_mmap_rwsem
        from mmsim.mm.shmem import unlink_file_vma

        pending = yield from unlink_file_vma(task, vma, pending)
    yield pending
    yield mm.mmap_sem.up_write(task)


def unlink_anon_vmas(task: Task, s: Any, vma: Vma) -> int:
    """mm/rmap.c ``unlink_anon_vmas`` (v6.7), from ``free_pgtables``: a VMA with an ``anon_vma`` drops its
    chain and, as the last user, frees the ``anon_vma``. Returns the ns charged (0 without one)."""
    if not vma.anon_vma:
        return 0
    ns, ins = path("unlink_anon_vmas", s.machine.freq_ghz)
    charged: int = s.counters.busy(task.cpu, "unlink_anon_vmas", ns, ins)
    return charged


def vm_munmap(task: Task, mm: MmStruct, vma: Vma, cpus: list[int]) -> Generator[Any, Any, None]:
    """``__vm_munmap(start, len, unlock=true)`` of all of ``vma`` as v4.20+ (dd2283f2605e) and v6.12
    (mm/vma.c ``do_vmi_align_munmap``) do it: under ``mmap_lock`` for write detach the VMA
    (``vms_gather_munmap_vmas``), then ``mmap_write_downgrade`` and, under the read lock,
    ``vms_clear_ptes``: ``lru_add_drain``, ``unmap_vmas`` (``zap_pte_range`` under each table's PTE lock /
    ``zap_huge_pmd`` under the PMD lock),
    ``free_pgtables`` (the PTE tables of the range, and the deposited one of a huge PMD), and
    ``tlb_finish_mmu``: the TLB flush (an IPI round trip to every other CPU of ``mm_cpumask``), then
    ``free_pages_and_swap_cache`` → ``folios_put_refs``: ``__page_cache_release`` and the memcg
    uncharge (mm/lru_anon.py, where enabled) and the pages back to the allocator.

    Per table (v6.7 ``zap_pte_range``, mm/zap.py): the walk past its ``pte_none`` slots in the range and,
    for a ``MAP_SHARED`` tmpfs VMA, each page-cache folio's rmap/accessed/dirty work, its struct page line
    and, with a dirty PTE, the ``force_flush``."""
    from mmsim.mm import lru_anon

    s = mm.system
    c = s.counters
    cpu = task.cpu
    pa = s.page_alloc
    yield mm.mmap_sem.down_write(task)
    ns, ins = path("do_munmap", s.machine.freq_ghz)
    yield c.busy(cpu, "do_munmap", ns, ins)
    mm.vmas.remove(vma)
    yield mm.mmap_sem.downgrade(task)
    yield from lru_anon.lru_add_drain(task, s)  # vms_clear_ptes: lru_add_drain()
    zap_ns, zap_ins = path("zap_pte", s.machine.freq_ghz)
    pt = mm.pgtables
    lru = lru_anon.state(s)
    slots = []
    folio_nodes: list[int] = []
    lo, hi = vma.start >> PMD_SHIFT, (vma.end - 1) >> PMD_SHIFT
    populated = sorted(k for k in pt.pmd if lo <= k <= hi)  # the populated PMD slots only
    shmem = getattr(vma.file, "is_shmem", False)
    miss_ns = 0.0
    tlb = Gather()
    if shmem and vma.shared:  # every present PTE maps a page-cache folio (mm/zap.py)
        n_file = sum(int(pt.ptes[k].sum()) for k in populated if pt.pmd[k] == PMD_TABLE and k in pt.ptes)
        miss_ns = zap.struct_page_ns(s, cpu, zap.file_reuse_bytes(n_file))
    for slot in populated:
        state = pt.pmd[slot]
        # zap_pte_range under the table's PTE lock (pte_offset_map_lock); zap_huge_pmd under pmd_lock
        lk = pt.pte_lockptr(slot) if state == PMD_TABLE else pt.pmd_lockptr(slot)
        yield lk.acquire(task)
        del pt.pmd[slot]
        pt.shared.pop(slot, None)
        bits = None
        none = 0
        deposit = 0  # zap_huge_pmd -> zap_deposited_table -> pte_free, under the PMD lock
        if state == PMD_TABLE:
            bm = pt.ptes.pop(slot, None)
            n = int(bm.sum()) if bm is not None else 0
            none = zap.none_ptes(vma, slot, n)
            tlb.zap_table(vma, slot, bm)
            if shmem and vma.shared and bm is not None:  # this VMA's PTEs (threads' VMAs may share a table)
                first = max(vma.start, slot << 21) - (slot << 21) >> 12
                last = min(vma.end, (slot + 1) << 21) - (slot << 21) >> 12
                bits = first + np.flatnonzero(bm[first:last])
            pt.nr_pte_tables -= 1  # free_pgtables (after the zap, without the PTE lock)
            for pfn in range(slot << 9, (slot + 1) << 9):
                pt.zero_ptes.discard(pfn)
                pt.wp_ptes.discard(pfn)
                pt.shared.pop(("P", pfn), None)
        else:
            n = 1  # zap_huge_pmd
            tlb.add(slot << PMD_SHIFT, 1 << PMD_SHIFT, False)
            if slot not in pt.zero_huge:
                deposit = memcg_kmem.uncharge_pgtable(task, s)
            pt.zero_huge.discard(slot)
            pt.wp_huge.discard(slot)
            pt.huge_node.pop(slot, None)
        yield c.busy(cpu, "unmap_page_range", zap_ns * n, zap_ins * n) + zap.scan_none(task, s, none) + deposit
        flush = False
        if bits is not None:
            flush = yield from zap.zap_file_ptes(task, s, mm, vma, slot, bits, miss_ns, cpus)
        lk.release(task)
        if state == PMD_TABLE:  # free_pgtables -> free_pte_range -> pte_free_tlb (outside the PTE lock)
            ns = memcg_kmem.uncharge_pgtable(task, s)
            if ns:
                yield ns
        if flush:
            tlb.reset()
            yield from zap.force_flush_tail(task, s)
        slots.append(slot)
        if lru is not None:
            folio_nodes += lru.folios.pop((id(mm), slot), [])
    d = unlink_anon_vmas(task, s, vma)  # free_pgtables
    if d:
        yield d
    if getattr(vma.file, "is_shmem", False):  # free_pgtables -> unlink_file_vma under i_mmap_rwsem
        from mmsim.mm.shmem import unlink_file_vma

        yield from unlink_file_vma(task, vma, 0)
    # tlb_finish_mmu: flush_tlb_mm_range (the local flush, an IPI to every other CPU of the mm and the wait
    # for its ack), then the pages (tlb_batch_pages_flush) and the tables' RCU batch (tlb_table_flush)
    xfer = s.machine.xfer_ns
    yield c.busy(cpu, "flush_tlb_mm_range",
                 tlb.flush_ns(s) + int(sum(2 * xfer(cpu, o, modified=True) for o in cpus if o != cpu)))
    yield from lru_anon.release_folios(task, s, folio_nodes)
    pending = 0
    for slot in slots:
        pending = yield from pa.free_owned(task, (mm, slot), pending)
    if pending:
        yield pending
    yield from tlb.free_tables(task, s)
    yield mm.mmap_sem.up_read(task)
