"""Page-fault paths (mm/memory.c, arch/x86/mm/fault.c).

``do_page_fault`` → ``handle_mm_fault`` → ``__handle_mm_fault``: allocate
the PMD table if the PUD is empty (``__pmd_alloc``), then either a huge
fault (``do_huge_pmd_anonymous_page``, mm/huge_memory.py) when the PMD is
none and THP applies, or the PTE table (``__pte_alloc``) and
``do_anonymous_page``. ``mmap_sem`` is held for read around it all.
Each function is a generator run inside the faulting task; every ``yield``
is CPU time (int ns) or a wait (PARK), charged to the named kernel function.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import PARK, Task
from mmsim.metrics.counters import PAGE_FAULTS
from mmsim.metrics.events import VmEvent
from mmsim.mm import huge_memory, hugetlb
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE, PUD_SHIFT

PGFAULT = int(VmEvent.PGFAULT)
PAGE_SHIFT = 12


def stream_write(task: Task, system: Any, node: int, nbytes: int, func: str, delay: int = 0) -> int:
    """A write stream over ``nbytes`` (``clear_page_erms``, user stores) starting
    ``delay`` ns from now, sharing the node's bandwidth; charges and returns its ns.
    Instructions: one 64-byte store per line (``rep stosb`` retires far fewer;
    this is an upper bound used only for IPC)."""
    d = system.bandwidth.write_ns(node, nbytes, system.machine.cost.core_clear_gbs, system.engine.now + delay)
    ns: int = system.counters.busy(task.cpu, func, d, nbytes // 64)
    return ns


def clear_user_pages(task: Task, system: Any, node: int, nbytes: int, func: str) -> Generator[Any, Any, None]:
    """``clear_page_erms`` over ``nbytes``, as one bandwidth-shared stream."""
    yield stream_write(task, system, node, nbytes, func)


def __pmd_alloc(task: Task, mm: MmStruct, pud_slot: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``__pmd_alloc``: a new PMD table, linked under mm->page_table_lock."""
    s = mm.system
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(task.cpu), 0, owner=(mm, "pud", pud_slot))
    yield from clear_user_pages(task, s, s.machine.cpu_node(task.cpu), 4096, "clear_page_erms")
    lk = mm.page_table_lock
    yield lk.acquire(task)
    if pud_slot not in mm.pgtables.pud_present:
        mm.pgtables.pud_present.add(pud_slot)
        mm.pgtables.nr_pmd_tables += 1
    lk.release(task)


def __pte_alloc(task: Task, mm: MmStruct, pmd_slot: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``__pte_alloc`` (v3.13): a new PTE table, populated under
    mm->page_table_lock; ``mm->nr_ptes`` counted there."""
    s = mm.system
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(task.cpu), 0, owner=(mm, pmd_slot))
    yield from clear_user_pages(task, s, s.machine.cpu_node(task.cpu), 4096, "clear_page_erms")
    lk = mm.page_table_lock
    yield lk.acquire(task)
    pt = mm.pgtables
    if pmd_slot not in pt.pmd:
        pt.pmd[pmd_slot] = PMD_TABLE
        pt.nr_pte_tables += 1
        if mm.nr_ptes is not None:
            yield mm.nr_ptes.add(task, "__pte_alloc")
    lk.release(task)


def do_anonymous_page(task: Task, mm: MmStruct, vma: Vma, addr: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``do_anonymous_page``: allocate, clear, map under the PTE lock.
    RSS uses the per-task cache (SPLIT_RSS_COUNTING), so no shared atomic.
    The PCP fast path and the clear touch no shared state, so they are one
    busy period (one event)."""
    s = mm.system
    pa = s.page_alloc
    home = s.machine.cpu_node(task.cpu)
    fast = pa.pcp_alloc_fast(task, home, owner=(mm, addr >> PMD_SHIFT))
    if fast is None:
        node = yield from pa.alloc_pages(task, home, 0, owner=(mm, addr >> PMD_SHIFT))
        yield stream_write(task, s, node, 4096, "clear_page_erms")
    else:
        node, ns = fast
        yield ns + stream_write(task, s, node, 4096, "clear_page_erms", ns)
    slot = addr >> PMD_SHIFT
    lk = mm.pgtables.pte_lockptr(slot)
    yield lk.acquire(task)
    ns, ins = path("do_anonymous_page", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "do_anonymous_page", ns, ins)
    mm.pgtables.pte_bitmap(slot)[(addr >> PAGE_SHIFT) & 511] = True
    lk.release(task)


def handle_mm_fault(
    task: Task, mm: MmStruct, vma: Vma, addr: int, write: bool = True, pre_ns: int = 0
) -> Generator[Any, Any, str]:
    """``__do_page_fault`` + ``handle_mm_fault``. Returns the fault kind taken:
    ``"thp"``, ``"hugetlb"``, ``"anon"`` or ``"none"`` (already mapped).
    ``pre_ns``: busy time the caller charged but has not yielded yet (user
    work before the faulting access), folded into the first event."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    c.perf[cpu][PAGE_FAULTS] += 1
    c.vm[cpu][PGFAULT] += 1
    yield pre_ns + c.busy(cpu, "page_fault", int(s.machine.cost.page_fault_ns))
    d = mm.mmap_sem.down_read(task)
    if d is PARK:
        yield d
        d = 0
    ns, ins = path("handle_mm_fault", s.machine.freq_ghz)
    yield d + c.busy(cpu, "handle_mm_fault", ns, ins)
    kind = "none"
    pt = mm.pgtables
    if vma.hugetlb:
        kind = yield from hugetlb.hugetlb_fault(task, mm, vma, addr)
    else:
        pud = addr >> PUD_SHIFT
        if pud not in pt.pud_present:
            yield from __pmd_alloc(task, mm, pud)
        slot = addr >> PMD_SHIFT
        state = pt.pmd.get(slot)
        if state is None and huge_memory.thp_applies(s, vma, addr):
            ok = yield from huge_memory.do_huge_pmd_anonymous_page(task, mm, vma, addr)
            if ok:
                kind = "thp"
            state = pt.pmd.get(slot)
        if kind == "none" and state != PMD_HUGE:
            if state is None:
                yield from __pte_alloc(task, mm, slot)
            if not pt.pte_bitmap(slot)[(addr >> PAGE_SHIFT) & 511]:
                yield from do_anonymous_page(task, mm, vma, addr)
                kind = "anon"
    yield mm.mmap_sem.up_read(task)
    return kind
