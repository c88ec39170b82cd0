"""The file half of mm/memory.c (v6.6, v6.7): ``do_fault`` → ``do_read_fault``,
``do_cow_fault``, ``do_shared_fault``, with ``do_fault_around`` →
``filemap_map_pages`` and ``finish_fault``, for tmpfs files (mm/shmem.py).

Under the per-VMA lock (``vma_locked``; mm/vma_lock.py) each path returns
``"retry"`` (VM_FAULT_RETRY) where the kernel does:

* ``do_read_fault``: at its start unless ``vma_lock_fault_around`` (f5617ffeb450,
  v6.6); else after fault-around, if fault-around did not map the address,
  unless ``vma_lock_read_fault`` (12214eba1992, v6.7, ``vmf_can_call_fault``:
  shmem's vm_ops has ``map_pages``). The retry under mmap_lock runs
  fault-around again: ``map_pages`` twice;
* ``do_cow_fault``: at its start unless ``vma_lock_cow_fault`` (4de8c93a4751,
  v6.7); with it, ``vmf_anon_prepare`` still retries when the VMA has no
  anon_vma yet (the first COW fault of each new mapping), unless v6.10's
  ``mmap_read_trylock`` (737019cf6ac5, policy ``vma_lock_anon_vma``) succeeds;
* ``do_shared_fault``: at its start unless ``vma_lock_shared_fault``
  (4ed4379881aa, v6.7).

Fault kinds returned: ``file-around`` (mapped by fault-around), ``file-read``,
``file-cow``, ``file-shared``, ``none`` (the PTE was already there).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.mm import lru_anon, memory
from mmsim.mm.costs import path
from mmsim.mm.pgtable import PMD_SHIFT, note_pte_node
from mmsim.mm.shmem import (
    ShmemInode,
    fault_stats,
    file_update_time,
    folio_ref,
    folio_trylock,
    folio_unlock,
    folio_unlock_bit,
    folio_wake_bit,
    shmem_fault,
)
from mmsim.mm.vma_lock import RETRY, vmf_anon_prepare
from mmsim.mm.zap import file_reuse_bytes

PAGE_SHIFT = 12
PTRS_PER_PTE = 512
FAULT_AROUND_PAGES = 16  # mm/memory.c fault_around_pages = 65536 >> PAGE_SHIFT (debugfs fault_around_bytes)


def _index(vma: Any, addr: int) -> int:
    """``linear_page_index``: the file index ``addr`` maps."""
    return int((addr - vma.start) >> PAGE_SHIFT) + int(vma.pgoff)


def _reuse(vma: Any) -> int:
    """mm/zap.py's lower bound on the reuse distance of a file folio's struct page line met again in a
    round over the whole mapping: 72 B for each page of the VMA."""
    return file_reuse_bytes(int(vma.end - vma.start) >> PAGE_SHIFT)


def _done(kind: str) -> Generator[Any, Any, str]:
    """A path that returns ``kind`` at once, without an event."""
    yield from ()  # no event (a generator all the same)
    return kind


def do_fault(task: Task, mm: Any, vma: Any, addr: int, write: bool, vma_locked: bool) -> Generator[Any, Any, str]:
    """``do_pte_missing`` → ``do_fault``: read, private write (COW) or shared write.

    Not a generator itself: it returns the generator of the path taken, which the caller drives with
    ``yield from`` at once, so the test below runs at the same point of the simulation as before and
    every event of that path resumes one generator level fewer (a host-time saving only)."""
    pt = mm.pgtables
    if pt.pte_bitmap(addr >> PMD_SHIFT)[(addr >> PAGE_SHIFT) & 511]:
        return _done("none")  # mapped meanwhile (write faults on present read-only PTEs are not modelled)
    if not write:
        return do_read_fault(task, mm, vma, addr, vma_locked)
    if not vma.shared:
        return do_cow_fault(task, mm, vma, addr, vma_locked)
    return do_shared_fault(task, mm, vma, addr, vma_locked)


def do_read_fault(task: Task, mm: Any, vma: Any, addr: int, vma_locked: bool) -> Generator[Any, Any, str]:
    s = mm.system
    if vma_locked and s.policy("vma_lock_fault_around") != "on":
        return RETRY
    mapped = yield from do_fault_around(task, mm, vma, addr)
    if mapped:
        return "file-around"
    if vma_locked and s.policy("vma_lock_read_fault") != "on":
        return RETRY
    inode: ShmemInode = vma.file
    idx = _index(vma, addr)
    node = yield from shmem_fault(task, inode, idx, _reuse(vma))
    yield from finish_fault(task, mm, vma, addr, inode, idx, node, anon_key=None)
    yield from folio_unlock(task, inode, idx)
    return "file-read"


def do_cow_fault(task: Task, mm: Any, vma: Any, addr: int, vma_locked: bool) -> Generator[Any, Any, str]:
    """``do_cow_fault``: ``vmf_anon_prepare`` / ``anon_vma_prepare``, a new anonymous page, ``__do_fault``,
    copy the file page into it, ``finish_fault`` (anon rmap, ``folio_add_lru_vma``), unlock and put the
    file folio. The new page belongs to the mm and is freed by munmap."""
    s = mm.system
    if vma_locked and s.policy("vma_lock_cow_fault") != "on":
        return RETRY
    if not vma.anon_vma:
        if vma_locked:  # vmf_anon_prepare: anon_vma_prepare needs mmap_lock (v6.10+: a trylock of it)
            ok = yield from vmf_anon_prepare(task, mm, vma, True)
            if not ok:
                return RETRY
        else:
            vma.anon_vma = True  # anon_vma_prepare (not charged: once per VMA)
    slot = addr >> PMD_SHIFT
    pfn = addr >> PAGE_SHIFT
    home = s.machine.cpu_node(task.cpu)
    fast = s.page_alloc.pcp_alloc_fast(task, home, owner=(mm, slot))
    if fast is None:
        node = yield from s.page_alloc.alloc_pages(task, home, 0, owner=(mm, slot))
    else:
        node, ns = fast
        yield ns
    inode: ShmemInode = vma.file
    idx = _index(vma, addr)
    src_node = yield from shmem_fault(task, inode, idx, _reuse(vma))
    key = ("P", id(mm), pfn)
    del src_node
    # the new anonymous folio's own work as in do_anonymous_page (issue 15: memory.anon_folio)
    yield memory.copy_pages(task, s, node, key, inode.key(idx), 1, memory._range(0, 1), "copy_page") \
        + memory.anon_folio(task, s)
    yield from finish_fault(task, mm, vma, addr, inode, idx, node, anon_key=key)
    yield from folio_unlock(task, inode, idx)
    yield folio_ref(task, inode, idx, "folio_put")
    return "file-cow"


def do_shared_fault(task: Task, mm: Any, vma: Any, addr: int, vma_locked: bool) -> Generator[Any, Any, str]:
    """``do_shared_fault``: ``__do_fault`` (shmem_fault), no ``page_mkwrite`` for shmem, ``finish_fault``,
    ``fault_dirty_shared_page`` (``folio_mark_dirty`` → ``noop_dirty_folio``, ``folio_unlock``,
    ``file_update_time``)."""
    s = mm.system
    if vma_locked and s.policy("vma_lock_shared_fault") != "on":
        return RETRY
    inode: ShmemInode = vma.file
    idx = _index(vma, addr)
    node = yield from shmem_fault(task, inode, idx, _reuse(vma))
    yield from finish_fault(task, mm, vma, addr, inode, idx, node, anon_key=None)
    inode.dirty_tables.add((id(mm), addr >> PMD_SHIFT))  # the PTE is dirty (mm/zap.py: force_flush at unmap)
    ns, ins = path("fault_dirty_shared_page", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "fault_dirty_shared_page", ns, ins) + folio_ref(
        task, inode, idx, "folio_mark_dirty")
    d, waiters = folio_unlock_bit(task, inode, idx)  # folio_unlock, inline: no generator per fault
    yield d
    if waiters is not None:
        yield from folio_wake_bit(task, inode, idx, waiters)
    yield file_update_time(task, inode) + 1
    return "file-shared"


def finish_fault(
    task: Task, mm: Any, vma: Any, addr: int, inode: ShmemInode, idx: int, node: int, anon_key: Any
) -> Generator[Any, Any, None]:
    """``finish_fault`` → ``set_pte_range`` under the PTE lock: ``folio_add_file_rmap_range`` (an atomic on
    the file folio's ``_mapcount``) or, for a COW copy, ``folio_add_new_anon_rmap`` (a page nobody else
    sees), its memcg charge and ``folio_add_lru_vma`` (mm/lru_anon.py: released by munmap)."""
    s = mm.system
    pt = mm.pgtables
    slot = addr >> PMD_SHIFT
    lk = pt.pte_lockptr(slot)
    yield lk.acquire(task)
    ns, ins = path("finish_fault", s.machine.freq_ghz)
    d = s.counters.busy(task.cpu, "finish_fault", ns, ins)
    if anon_key is None:
        d += folio_ref(task, inode, idx, "folio_add_file_rmap_range")
    yield d
    pt.pte_bitmap(slot)[(addr >> PAGE_SHIFT) & 511] = True
    note_pte_node(pt, slot, (addr >> PAGE_SHIFT) & 511, node)
    lk.release(task)
    if anon_key is not None:  # set_pte_range: folio_add_new_anon_rmap + folio_add_lru_vma (and its charge)
        yield from lru_anon.new_anon_folio(task, s, node, 1, (id(mm), slot))


def do_fault_around(task: Task, mm: Any, vma: Any, addr: int) -> Generator[Any, Any, bool]:
    """``do_fault_around`` → ``filemap_map_pages`` over the ``fault_around_pages`` window (aligned down,
    clipped to the VMA and the PTE table): every folio of the window in the page cache is looked at
    (``next_uptodate_folio``: ``folio_try_get``, ``folio_trylock``; a locked folio is skipped) and mapped
    where its PTE is none, under the PTE lock. Returns whether ``addr`` got mapped (VM_FAULT_NOPAGE)."""
    s = mm.system
    cpu = task.cpu
    inode: ShmemInode = vma.file
    pt = mm.pgtables
    slot = addr >> PMD_SHIFT
    nr = FAULT_AROUND_PAGES
    pte_off = (addr >> PAGE_SHIFT) & (PTRS_PER_PTE - 1)
    vma_off = (addr - vma.start) >> PAGE_SHIFT
    vma_pages = (vma.end - vma.start) >> PAGE_SHIFT
    from_pte = max(pte_off & ~(nr - 1), pte_off - min(pte_off, vma_off))
    to_pte = min(from_pte + nr, PTRS_PER_PTE, pte_off + vma_pages - vma_off)
    first = _index(vma, addr) - (pte_off - from_pte)
    ns, ins = path("do_fault_around", s.machine.freq_ghz)
    fns, fins = path("filemap_map_folio", s.machine.freq_ghz)
    bits = pt.pte_bitmap(slot)
    lk = pt.pte_lockptr(slot)
    yield s.counters.busy(cpu, "do_fault_around", ns, ins)
    fst = fault_stats(s)
    fst["map_pages_calls"] += 1
    mapped = False
    locked_pte = False
    for i in range(to_pte - from_pte):
        idx = first + i
        node = inode.pages.get(idx)
        if node is None:
            continue
        fst["map_pages_folios"] += 1
        d = folio_ref(task, inode, idx, "next_uptodate_folio")  # folio_try_get
        ok, dl = folio_trylock(task, inode, idx)
        if not ok:
            yield d + dl + folio_ref(task, inode, idx, "folio_put")
            continue
        if not locked_pte:
            yield d + dl
            d = dl = 0
            yield lk.acquire(task)
            locked_pte = True
        pte = from_pte + i
        d += dl + s.counters.busy(cpu, "filemap_map_pages", fns, fins)
        if not bits[pte]:
            bits[pte] = True
            note_pte_node(pt, slot, pte, node)
            d += folio_ref(task, inode, idx, "folio_add_file_rmap_range")
            fst["map_pages_mapped"] += 1
            mapped = mapped or pte == pte_off
        else:
            d += folio_ref(task, inode, idx, "folio_put")  # already mapped: drop the reference
        yield d
        d, waiters = folio_unlock_bit(task, inode, idx)  # folio_unlock, inline: no generator per folio
        yield d
        if waiters is not None:
            yield from folio_wake_bit(task, inode, idx, waiters)
    if locked_pte:
        lk.release(task)
    return mapped
