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

from mmsim.engine.core import PARK, Task
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
        if state == PMD_TABLE:
            bm = pt.ptes.pop(slot, None)
            n = int(bm.sum()) if bm is not None else 0
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
        pending += c.busy(cpu, "unmap_page_range", zap_ns * n, zap_ins * n)
        pending = yield from pa.free_owned(task, (mm, slot), pending)
    # flush_tlb_mm_range: an IPI to every other CPU of the mm and the wait for its ack
    xfer = s.machine.xfer_ns
    pending += c.busy(cpu, "flush_tlb_mm_range", int(sum(2 * xfer(cpu, o, modified=True) for o in cpus if o != cpu)))
    mm.vmas.remove(vma)
    if getattr(vma.file, "is_shmem", False):  # free_pgtables -> unlink_file_vma under i_mmap_rwsem
        from mmsim.mm.shmem import unlink_file_vma

        pending = yield from unlink_file_vma(task, vma, pending)
    yield pending
    yield mm.mmap_sem.up_write(task)
