"""shmem/tmpfs as the page cache needs it (mm/shmem.c, mm/filemap.c, v6.6).

A tmpfs file is a :class:`ShmemInode`: its ``address_space`` holds the page
cache (``i_pages``: an xarray under its ``xa_lock``), ``i_mmap_rwsem`` (the
rmap tree of the VMAs mapping it) and the shmem inode's ``info->lock``. No
disk and no writeback: a page, once allocated into the file, stays until the
file goes away (the workloads' files live for the whole run).

``shmem_fault`` → ``shmem_get_folio_gfp(SGP_CACHE)``: ``filemap_get_entry``
(an RCU walk of the xarray, ``folio_try_get``: an atomic on the folio's
refcount) and, if found, ``folio_lock`` (PG_locked; a locked folio makes the
fault sleep on the hashed folio wait queue, ``folio_wait_bit_common``, until
``folio_unlock`` → ``folio_wake_bit`` hands the lock to the first exclusive
waiter, as ``wake_page_function`` does since v5.9). If the index is a hole,
``shmem_alloc_and_add_folio``: allocate an order-0 folio (tmpfs ``huge=never``,
the default), set it locked, ``shmem_add_to_page_cache`` (the memcg charge, then
the insert under ``xa_lock_irq(i_pages)``; losing a race to another inserter frees
the page and looks again), ``shmem_recalc_inode`` under ``info->lock``,
``folio_add_lru`` (the per-CPU batches and ``lruvec->lru_lock`` of mm/lru_anon.py,
which a tmpfs file switches on), then clear it (``clear_highpage``: a hole reads
as zeroes) and mark it uptodate. The folio is returned locked (``VM_FAULT_LOCKED``).

Keys: a page-cache page is ``("F", ino, index)`` for the LLC model and for
its ``struct page`` line (:meth:`System.page_line`), shared by every mapping
of the file.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Hashable
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.locks.rwsem import RwSem
from mmsim.locks.spinlock import Spinlock
from mmsim.mm import lru_anon
from mmsim.mm.costs import path
from mmsim.mm.zap import streamed_miss, struct_page_ns, zap_stats

I_PAGES_CLASS = "&mapping->i_pages (xa_lock)"
I_MMAP_CLASS = "&mapping->i_mmap_rwsem"
INFO_LOCK_CLASS = "&info->lock"
WAIT_TABLE_CLASS = "folio_wait_table[].lock"
PAGE_WAIT_TABLE_BITS = 8  # mm/filemap.c: folio_wait_table[PAGE_WAIT_TABLE_SIZE]
# file_update_time changes mtime at most once per tick of the coarse clock: one jiffy at CONFIG_HZ=1000
# (x86_64-rhel-8.3, the robot's kconfig; inference: RHEL 8 configs set HZ_1000)
JIFFY_NS = 1_000_000


class ShmemInode:
    """A tmpfs inode (``shmem_file_setup`` / ``shmem_get_inode``) and its mapping."""

    is_shmem = True

    def __init__(self, s: Any, ino: int, home_cpu: int, size: int) -> None:
        self.system = s
        self.ino = ino
        self.size = size  # i_size (ftruncate)
        self.pages: dict[int, int] = {}  # i_pages: index -> node of the folio
        self.locked: dict[int, deque[Task]] = {}  # PG_locked folios -> their exclusive waiters
        self.xa_lock = Spinlock(s.locks, I_PAGES_CLASS, s.spin_kind, home_cpu)
        self.info_lock = Spinlock(s.locks, INFO_LOCK_CLASS, s.spin_kind, home_cpu)
        self.i_mmap_rwsem = RwSem(s.locks, I_MMAP_CLASS, home_cpu, policy=s.rwsem_policy())
        self.vmas: list[Any] = []  # the i_mmap interval tree
        self.mtime_tick = -1
        self.stats = {"alloced": 0, "add_races": 0, "lock_waits": 0, "lookups": 0}
        # folio flags folio_mark_accessed reads and writes at unmap (mm/zap.py): PG_referenced, PG_active
        npages = -(-size // 4096)
        self.referenced = np.zeros(npages, dtype=bool)
        self.active = np.zeros(npages, dtype=bool)
        # each cached folio's pfn (-1: none): the struct page line's place in the vmemmap, whose 4 KiB
        # pages the L2 streamer follows (mm/zap.py streamed_misses)
        self.pfn = np.full(npages, -1, dtype=np.int64)
        # (id(mm), PMD slot) of PTE tables holding a dirty PTE of this file (do_shared_fault's write): the
        # unmap's delay_rmap / force_flush
        self.dirty_tables: set[tuple[int, int]] = set()

    def key(self, idx: int) -> Hashable:
        return ("F", self.ino, idx)


FAULT_STATS = ("map_pages_calls", "map_pages_folios", "map_pages_mapped", "shmem_faults")


def fault_stats(s: Any) -> dict[str, int]:
    """Counters of the file fault paths (no vm_event_item counts them): ``filemap_map_pages`` passes,
    folios they looked at and mapped, ``shmem_fault`` calls."""
    st: dict[str, int] | None = getattr(s, "shmem_fault_stats", None)
    if st is None:
        st = s.shmem_fault_stats = dict.fromkeys(FAULT_STATS, 0)
    return st


def shmem_metrics(s: Any) -> dict[str, float]:
    """The mechanism counts of a run, summed over its tmpfs files, as ``shmem.*`` metrics."""
    out = {f"shmem.{k}": float(v) for k, v in fault_stats(s).items()}
    for k in ("alloced", "add_races", "lock_waits"):
        out[f"shmem.{k}"] = float(sum(i.stats[k] for i in getattr(s, "shmem_inodes", [])))
    out.update({f"munmap.{k}": float(v) for k, v in zap_stats(s).items()})
    return out


def shmem_file_setup(s: Any, home_cpu: int, size: int) -> ShmemInode:
    """``shmem_file_setup`` / a file created on tmpfs (``mkstemp`` + ``ftruncate``): an empty, sparse file."""
    n: int = getattr(s, "shmem_next_ino", 0) + 1
    s.shmem_next_ino = n
    inode = ShmemInode(s, n, home_cpu, size)
    lru_anon.enable(s)  # page-cache folios go on the LRU (and are charged to the memcg)
    s.shmem_inodes = [*getattr(s, "shmem_inodes", []), inode]
    return inode


def shmem_mmap(task: Task, mm: Any, vma: Any) -> Generator[Any, Any, None]:
    """``shmem_mmap`` (``file_accessed``, ``vma->vm_ops = &shmem_vm_ops``, which has ``.map_pages =
    filemap_map_pages`` and no ``page_mkwrite``), then ``vma_link`` → ``__vma_link_file`` under
    ``i_mmap_rwsem`` for write."""
    inode: ShmemInode = vma.file
    s = mm.system
    yield inode.i_mmap_rwsem.down_write(task)
    inode.vmas.append(vma)
    ns, ins = path("vma_interval_tree", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "vma_interval_tree_insert", ns, ins)
    yield inode.i_mmap_rwsem.up_write(task)


def unlink_file_vma(task: Task, vma: Any, pending: int) -> Generator[Any, Any, int]:
    """``free_pgtables`` → ``unlink_file_vma``: remove the VMA from i_mmap under ``i_mmap_rwsem``."""
    inode: ShmemInode = vma.file
    s = inode.system
    yield pending
    d = inode.i_mmap_rwsem.down_write(task)
    yield d
    inode.vmas.remove(vma)
    ns, ins = path("vma_interval_tree", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "unlink_file_vma", ns, ins)
    yield inode.i_mmap_rwsem.up_write(task)
    return 0


# -- the folio lock (PG_locked) and the hashed folio wait queues ---------------------------------

def _wait_lock(s: Any, inode: ShmemInode, idx: int) -> Spinlock:
    """``folio_waitqueue(folio)``: one of 256 hashed wait queues, each with its spinlock
    (deterministic hash of the folio here, ``hash_ptr`` of its address in the kernel)."""
    table: dict[int, Spinlock] | None = getattr(s, "folio_wait_table", None)
    if table is None:
        table = s.folio_wait_table = {}
    h = (inode.ino * 0x9E3779B1 + idx * 0x85EBCA6B) >> 7 & ((1 << PAGE_WAIT_TABLE_BITS) - 1)
    lk = table.get(h)
    if lk is None:
        lk = table[h] = Spinlock(s.locks, WAIT_TABLE_CLASS, s.spin_kind, 0)
    return lk


def folio_trylock(task: Task, inode: ShmemInode, idx: int) -> tuple[bool, int]:
    """``folio_trylock``: test_and_set_bit_lock(PG_locked). Returns (taken, ns charged)."""
    s = inode.system
    d: int = s.page_line(("F", inode.ino, idx)).write(task.cpu, s.engine.now, True)[0]  # .key, .rmw inline
    if idx in inode.locked:
        return False, s.counters.busy(task.cpu, "folio_trylock", d)
    inode.locked[idx] = deque()
    return True, s.counters.busy(task.cpu, "folio_trylock", d)


def folio_lock(task: Task, inode: ShmemInode, idx: int) -> Generator[Any, Any, None]:
    """``folio_lock``: the atomic, or ``__folio_lock`` → ``folio_wait_bit_common`` (queue under the
    wait-queue spinlock, set PG_waiters, test the bit again, sleep in ``io_schedule``) until the
    lock is handed over."""
    ok, d = folio_trylock(task, inode, idx)
    yield d
    if not ok:
        yield from folio_lock_wait(task, inode, idx)


def folio_lock_wait(task: Task, inode: ShmemInode, idx: int) -> Generator[Any, Any, None]:
    """``__folio_lock`` after a failed ``folio_trylock``: :func:`folio_lock`'s slow path."""
    s = inode.system
    lk = _wait_lock(s, inode, idx)
    yield lk.acquire(task)
    ns, ins = path("folio_wait_queue", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "folio_wait_bit_common", ns, ins)
    q = inode.locked.get(idx)
    if q is None:  # unlocked meanwhile: folio_trylock_flag after queueing takes it
        inode.locked[idx] = deque()
        lk.release(task)
        return
    q.append(task)
    inode.stats["lock_waits"] += 1
    lk.release(task)
    yield s.sched.sleep(task)


def folio_unlock(task: Task, inode: ShmemInode, idx: int) -> Generator[Any, Any, None]:
    """``folio_unlock``: clear PG_locked; with waiters (PG_waiters) ``folio_wake_bit`` under the wait-queue
    spinlock wakes the first exclusive waiter, which gets the lock (``wake_page_function``)."""
    d, q = folio_unlock_bit(task, inode, idx)
    yield d
    if q is not None:
        yield from folio_wake_bit(task, inode, idx, q)


def folio_unlock_bit(task: Task, inode: ShmemInode, idx: int) -> tuple[int, deque[Task] | None]:
    """:func:`folio_unlock`'s atomic (clear PG_locked), for a caller that yields its ns itself (no generator
    per fault). Returns (ns charged, the waiters to wake with :func:`folio_wake_bit` or None)."""
    s = inode.system
    d: int = s.counters.busy(task.cpu, "folio_unlock",
                             s.page_line(("F", inode.ino, idx)).write(task.cpu, s.engine.now, True)[0])
    q = inode.locked[idx]
    if not q:
        del inode.locked[idx]
        return d, None
    return d, q


def folio_wake_bit(task: Task, inode: ShmemInode, idx: int, q: deque[Task]) -> Generator[Any, Any, None]:
    """``folio_wake_bit`` under the wait-queue spinlock: the first exclusive waiter of ``q`` gets the lock."""
    s = inode.system
    lk = _wait_lock(s, inode, idx)
    yield lk.acquire(task)
    ns, ins = path("folio_wait_queue", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "folio_wake_bit", ns, ins)
    nxt = q.popleft()
    lk.release(task)
    s.sched.wake_up(nxt)


def folio_ref(task: Task, inode: ShmemInode, idx: int, func: str) -> int:
    """An atomic on the folio's refcount or mapcount (``folio_try_get``, ``folio_put``, the rmap
    counters): a locked RMW of its ``struct page`` line. Returns ns charged."""
    s = inode.system
    # CacheLine.rmw and ShmemInode.key inline (several calls per file fault)
    ns: int = s.counters.busy(task.cpu, func, s.page_line(("F", inode.ino, idx)).write(task.cpu, s.engine.now, True)[0])
    return ns


# -- shmem_fault --------------------------------------------------------------------------------

def shmem_fault(task: Task, inode: ShmemInode, idx: int, reuse_bytes: int = 0) -> Generator[Any, Any, int]:
    """``shmem_fault`` → ``shmem_get_folio_gfp(SGP_CACHE)``. Returns the folio's node; the folio
    is locked and referenced.

    A folio found in the page cache whose struct page line this CPU touched last (the line's owner) is
    read from where ``reuse_bytes`` of this CPU's references since put it (mm/zap.py
    ``struct_page_ns``: the L2, the L3 or memory; the caller's lower bound, 72 B per page of the VMA),
    unless the L2 streamer covers it (mm/zap.py ``streamed_misses``: faults in page order read the
    struct pages of consecutive pfns); a line another CPU wrote last costs its transfer
    (:func:`folio_ref`) instead."""
    s = inode.system
    fault_stats(s)["shmem_faults"] += 1
    ns, ins = path("shmem_fault", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "shmem_fault", ns, ins)
    while True:
        ns, ins = path("filemap_get_entry", s.machine.freq_ghz)
        inode.stats["lookups"] += 1
        d = s.counters.busy(task.cpu, "filemap_get_entry", ns, ins)
        node = inode.pages.get(idx)
        if node is not None:
            if reuse_bytes and s.page_line(inode.key(idx)).owner == task.cpu:
                miss = int(struct_page_ns(s, task.cpu, reuse_bytes))
                if miss and streamed_miss(s, task.cpu, int(inode.pfn[idx])):
                    zap_stats(s)["fault_struct_page_misses"] += 1
                    d += s.counters.busy(task.cpu, "filemap_get_entry [struct page]", miss)
            yield d + folio_ref(task, inode, idx, "filemap_get_entry")  # folio_try_get
            ok, d = folio_trylock(task, inode, idx)  # folio_lock, its fast path here: no generator per fault
            yield d
            if not ok:
                yield from folio_lock_wait(task, inode, idx)
            return node
        yield d
        node = yield from shmem_alloc_and_add_folio(task, inode, idx)
        if node >= 0:
            return node
        inode.stats["add_races"] += 1  # -EEXIST: another task added it first; look again


def shmem_alloc_and_add_folio(task: Task, inode: ShmemInode, idx: int) -> Generator[Any, Any, int]:
    """Allocate, lock, insert under the xa_lock, account, add to the LRU, clear. Returns the node,
    or -1 when another task inserted the index first (the new folio is freed)."""
    s = inode.system
    cpu = task.cpu
    ns, ins = path("shmem_alloc_folio", s.machine.freq_ghz)
    yield s.counters.busy(cpu, "shmem_alloc_folio", ns, ins)
    pfn, pending = yield from s.page_alloc.alloc_pages_pfn(task, s.machine.cpu_node(cpu), 0)
    node: int = s.page_alloc.page_node(pfn)
    if pending:
        yield pending
    yield from lru_anon.mem_cgroup_charge(task, s, 1)  # shmem_add_to_page_cache: mem_cgroup_charge
    yield inode.xa_lock.acquire(task)  # xas_lock_irq(&xas)
    if idx in inode.pages:
        inode.xa_lock.release(task)
        pending = yield from s.page_alloc.free_pages(task, pfn, 0)
        if pending:
            yield pending
        return -1
    inode.pages[idx] = node
    inode.pfn[idx] = pfn
    inode.locked[idx] = deque()  # __folio_set_locked before the insert: lookups find it locked
    ns, ins = path("shmem_add_to_page_cache", s.machine.freq_ghz)
    yield s.counters.busy(cpu, "shmem_add_to_page_cache", ns, ins)
    inode.xa_lock.release(task)
    inode.stats["alloced"] += 1
    yield inode.info_lock.acquire(task)  # shmem_recalc_inode
    ns, ins = path("shmem_recalc_inode", s.machine.freq_ghz)
    yield s.counters.busy(cpu, "shmem_recalc_inode", ns, ins)
    inode.info_lock.release(task)
    yield from lru_anon.folio_add_lru(task, s, node, False)
    yield _memory.clear_user_highpage(task, s, node, inode.key(idx))  # clear_highpage; folio_mark_uptodate
    return node


def file_update_time(task: Task, inode: ShmemInode) -> int:
    """``file_update_time`` from ``fault_dirty_shared_page`` (shmem has no ``page_mkwrite``): the
    inode's times change when the coarse clock has ticked since the last update. Returns ns charged."""
    s = inode.system
    tick = s.engine.now // JIFFY_NS
    if tick == inode.mtime_tick:
        return 0
    inode.mtime_tick = tick
    ns, ins = path("file_update_time", s.machine.freq_ghz)
    d: int = s.counters.busy(task.cpu, "file_update_time", ns, ins)
    return d


# at the end (memory -> memory_file imports this module's names); bound once, not imported per fault
from mmsim.mm import memory as _memory  # noqa: E402
