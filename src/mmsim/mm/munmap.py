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
from mmsim.mm import zap
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE


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
            pt.nr_pte_tables -= 1
            for pfn in range(slot << 9, (slot + 1) << 9):
                pt.zero_ptes.discard(pfn)
                pt.wp_ptes.discard(pfn)
                pt.shared.pop(("P", pfn), None)
        else:
            assert state == PMD_HUGE
            n = 1
            pt.zero_huge.discard(slot)
            pt.wp_huge.discard(slot)
            pt.huge_node.pop(slot, None)
        pending += c.busy(cpu, "unmap_page_range", zap_ns * n, zap_ins * n) + zap.scan_none(task, s, none)
        pending = yield from pa.free_owned(task, (mm, slot), pending)
    # flush_tlb_mm_range: an IPI to every other CPU of the mm and the wait for its ack
    xfer = s.machine.xfer_ns
    pending += c.busy(cpu, "flush_tlb_mm_range", int(sum(2 * xfer(cpu, o, modified=True) for o in cpus if o != cpu)))
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
        if state == PMD_TABLE:
            bm = pt.ptes.pop(slot, None)
            n = int(bm.sum()) if bm is not None else 0
            none = zap.none_ptes(vma, slot, n)
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
            pt.zero_huge.discard(slot)
            pt.wp_huge.discard(slot)
            pt.huge_node.pop(slot, None)
        yield c.busy(cpu, "unmap_page_range", zap_ns * n, zap_ins * n) + zap.scan_none(task, s, none)
        flush = False
        if bits is not None:
            flush = yield from zap.zap_file_ptes(task, s, mm, vma, slot, bits, miss_ns, cpus)
        lk.release(task)
        if flush:
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
    # tlb_finish_mmu: flush_tlb_mm_range, an IPI to every other CPU of the mm and the wait for its ack
    xfer = s.machine.xfer_ns
    yield c.busy(cpu, "flush_tlb_mm_range", int(sum(2 * xfer(cpu, o, modified=True) for o in cpus if o != cpu)))
    yield from lru_anon.release_folios(task, s, folio_nodes)
    pending = 0
    for slot in slots:
        pending = yield from pa.free_owned(task, (mm, slot), pending)
    if pending:
        yield pending
    yield mm.mmap_sem.up_read(task)
