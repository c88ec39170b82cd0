"""hugetlbfs (mm/hugetlb.c, fs/hugetlbfs/inode.c, arch/x86/mm/hugetlbpage.c).

**The pool** (``struct hstate``, 2 MiB pages): ``nr_huge_pages``,
``free_huge_pages`` (per node), ``resv_huge_pages``, ``surplus_huge_pages``
and ``nr_overcommit_huge_pages``, all under ``hugetlb_lock``. A mapping
reserves its pages at mmap time (``hugetlbfs_file_mmap`` →
``hugetlb_reserve_pages`` → ``hugetlb_acct_memory`` →
``gather_surplus_pages``, v5.7): if free pages do not cover the new
reservations, surplus pages are allocated from the buddy allocator up to
``nr_overcommit_hugepages``, else mmap fails with ENOMEM. A fault without a
reservation (a forked child's COW of a private mapping: the reserve map
belongs to the parent, ``HPAGE_RESV_OWNER``) takes a free unreserved page
or a new surplus page (``alloc_huge_page`` → ``alloc_surplus_huge_page``),
else the fault gets SIGBUS (``hugetlb_cow`` / ``hugetlb_no_page``:
``vmf_error(-ENOSPC)``). A freed surplus page goes back to the buddy
allocator (``free_huge_page`` → ``update_and_free_page``).

**The mapping**: every hugetlb VMA has a hugetlbfs inode (``vma.file``); a
MAP_HUGETLB anonymous mapping gets its own unlinked inode
(``hugetlb_file_setup``), which fork shares with the children. Its
``i_mapping->i_mmap_rwsem`` has the lockdep class
``&hugetlbfs_i_mmap_rwsem_key`` (``hugetlbfs_get_inode``:
``lockdep_set_class(&inode->i_mapping->i_mmap_rwsem,
&hugetlbfs_i_mmap_rwsem_key)``), so lock_stat reports it under that name,
not ``&mapping->i_mmap_rwsem``.

**The fault** (``hugetlb_fault``, v5.7 with c0d0381ade79): take
``i_mmap_rwsem`` for read (policy ``hugetlb_i_mmap_rwsem``: ``never`` before
c0d0381ade79, ``always`` with it, ``if-shareable`` = Mike Kravetz's proposed
fix, only when ``vma_shareable()``), ``huge_pte_alloc`` (``huge_pmd_share``
for shareable VMAs), then the hashed ``hugetlb_fault_mutex_table[hash]``
with ``hash = hugetlb_fault_mutex_hash(mapping, idx)`` — the same mutex for
the same page index in every process mapping the inode (1b426bac66e6,
v5.2) — and ``hugetlb_no_page`` (new page: ``alloc_huge_page``,
``clear_huge_page``, map under ``huge_pte_lock``) or ``hugetlb_cow`` (copy
the shared page with ``copy_user_huge_page``). Both locks are held to the
end of the fault, copy included. Writers of ``i_mmap_rwsem``: fork
(``dup_mmap`` links the child's VMA), ``unmap_single_vma`` for hugetlb
(around ``__unmap_hugepage_range_final``) and ``unlink_file_vma`` at munmap
and exit.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable
from typing import Any

from mmsim.engine.core import PARK, Task
from mmsim.errors import UserError
from mmsim.locks.rwsem import Mutex, RwSem
from mmsim.locks.spinlock import Spinlock
from mmsim.metrics.events import VmEvent
from mmsim.mm.costs import path
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PUD_SHIFT

HPAGE_SHIFT = 21
HPAGE_SIZE = 1 << HPAGE_SHIFT
HPAGE_ORDER = 9
PAGES_PER_PUD = 1 << (PUD_SHIFT - PMD_SHIFT)
HTLB_ALLOC = int(VmEvent.HTLB_BUDDY_ALLOC_SUCCESS)
COW_FAULT = int(VmEvent.COW_FAULT)
I_MMAP_CLASS = "&hugetlbfs_i_mmap_rwsem_key"
I_MMAP_POLICIES = ("never", "always", "if-shareable")

# name -> (cycles, instructions); estimate: hot-path length of the mm/hugetlb.c (v5.7) code named,
# at IPC ~1, like mm/costs.py. No result hinges on them: they are the same in every arm.
_PATHS: dict[str, tuple[int, int]] = {
    # hugetlb_fault: huge_pte_offset, huge_pte_alloc walk, vma_hugecache_offset, jhash2 of (mapping, idx). estimate
    "hugetlb_fault": (400, 400),
    # hugetlb_cow under the PTL: huge_ptep_clear_flush, mmu notifiers, page_remove_rmap,
    # hugepage_add_new_anon_rmap, set_huge_pte_at. estimate
    "hugetlb_cow": (1200, 1000),
    # prep_new_huge_page + prep_compound_page: initialise 511 tail struct pages (~10 instructions each). estimate
    "prep_new_huge_page": (6000, 5000),
    # update_and_free_page: clear the flags of 512 struct pages, destroy the compound page. estimate
    "update_and_free_page": (6000, 5000),
    # __unmap_hugepage_range, per huge PTE: huge_ptep_get_and_clear, page_remove_rmap, tlb_remove_page. estimate
    "__unmap_hugepage_range": (300, 300),
    # copy_hugetlb_page_range, per huge PTE: two PTLs, wrprotect, get_page, page_dup_rmap, set_huge_pte_at. estimate
    "copy_hugetlb_page_range": (300, 300),
    # hugetlb_reserve_pages / hugetlb_acct_memory bookkeeping (region_chg/region_add, subpool). estimate
    "hugetlb_reserve_pages": (800, 800),
    # unlink_file_vma / vma_interval_tree_insert_after under i_mmap_rwsem. estimate
    "vma_interval_tree": (200, 200),
}


def _path(name: str, freq_ghz: float) -> tuple[int, int]:
    cyc, ins = _PATHS[name]
    return int(cyc / freq_ghz), ins


def hugetlb_error(what: str, pool: HugetlbPool, need: int, kernel_outcome: str) -> UserError:
    """The pool cannot satisfy a mapping: one line naming the pool sysctls."""
    return UserError(
        "nr_hugepages/nr_overcommit_hugepages",
        f"{pool.nr_hugepages_set}/{pool.nr_overcommit_huge_pages}",
        f"a pool that covers {what} ({need} huge pages of 2 MiB); with this pool the kernel {kernel_outcome}",
    )


class IMmapRwsem(RwSem):
    """``i_mmap_rwsem``: an rwsem with the kernel's rwsem behaviours
    (:class:`~mmsim.locks.rwsem.RwsemPolicy`: writer/reader optimistic spinning,
    hand-off, and d3681e269fff's wake-all of queued readers, v5.3)."""

    def __init__(self, system: Any, home_cpu: int) -> None:
        super().__init__(system.locks, I_MMAP_CLASS, home_cpu, policy=system.rwsem_policy())


class HugetlbfsInode:
    """A hugetlbfs inode and its ``address_space``: ``i_mmap_rwsem``, the
    page cache (shared mappings), the inode reserve map (shared mappings)
    and the PMD pages that ``huge_pmd_share`` hands out."""

    def __init__(self, system: Any, ino: int, home_cpu: int, anon: bool) -> None:
        self.ino = ino
        self.anon = anon  # an unlinked MAP_HUGETLB inode: freed with its last mapping
        self.i_mmap_rwsem = IMmapRwsem(system, home_cpu)
        self.vmas: list[Any] = []  # the i_mmap interval tree
        self.pages: dict[int, tuple[Hashable, int]] = {}  # page cache: idx -> (page key, node)
        self.resv_map: set[int] = set()  # shared mappings: reserved file indices
        # huge_pmd_share: PUD-sized file range -> the page tables sharing its PMD page
        self.pmd_sharers: dict[int, list[Any]] = {}


class PrivateResv:
    """``vma->vm_private_data`` of a private hugetlb mapping's owner: its
    ``resv_map`` (reserved page indices) and which of them were consumed."""

    def __init__(self, npages: int) -> None:
        self.npages = npages
        self.consumed: set[int] = set()


class HugetlbPool:
    """``struct hstate`` for 2 MiB pages, its counters and ``hugetlb_lock``."""

    def __init__(self, system: Any, nr_hugepages: int, nr_overcommit: int = 0) -> None:
        m = system.machine
        self.system = system
        self.lock = Spinlock(system.locks, "hugetlb_lock", system.spin_kind_for("hugetlb_lock"), 0)
        n = len(m.nodes)
        # Spread over nodes like hugetlb_hstate_alloc_pages (round-robin over N_MEMORY).
        self.free_node = [nr_hugepages // n + (1 if i < nr_hugepages % n else 0) for i in range(n)]
        self.surplus_node = [0] * n
        self.buddy_pfns: list[list[int]] = [[] for _ in range(n)]  # per node: blocks taken from the buddy allocator
        cap = [int(node.memory_gib * 1024) // 2 for node in m.nodes]
        for i, (f, c) in enumerate(zip(self.free_node, cap, strict=True)):
            if f > c:
                raise UserError(
                    "nr_hugepages", nr_hugepages, f"at most {sum(cap)} on this machine (node {i} holds {c})"
                )
        self.nr_hugepages_set = nr_hugepages
        self.nr_huge_pages = nr_hugepages
        self.free_huge_pages = nr_hugepages
        self.resv_huge_pages = 0
        self.surplus_huge_pages = 0
        self.nr_overcommit_huge_pages = nr_overcommit
        self.single_mutex = Mutex(system.locks, "hugetlb_instantiation_mutex", 0, spin_on_owner=True,
                                  mpolicy=system.mutex_policy())
        self.fault_mutexes: dict[int, Mutex] = {}
        # hugetlb_init: num_fault_mutexes = roundup_pow_of_two(8 * num_possible_cpus())
        self.table_size = 1 << (8 * m.ncpus - 1).bit_length()
        self._next_ino = 0
        self._mm_ids: dict[int, int] = {}  # mm -> a number in order of first fault (deterministic hash key)
        self.hugetlb_usage: dict[int, Any] = {}  # mm -> mm->hugetlb_usage (an atomic)

    # -- accounting (hugetlb_lock held by the caller's generator) --------------
    def counters(self) -> dict[str, int]:
        """/proc/meminfo HugePages_{Total,Free,Rsvd,Surp}."""
        return {"HugePages_Total": self.nr_huge_pages, "HugePages_Free": self.free_huge_pages,
                "HugePages_Rsvd": self.resv_huge_pages, "HugePages_Surp": self.surplus_huge_pages}

    def new_inode(self, home_cpu: int, anon: bool = True) -> HugetlbfsInode:
        """``hugetlbfs_get_inode`` (``get_next_ino``)."""
        self._next_ino += 1
        return HugetlbfsInode(self.system, self._next_ino, home_cpu, anon)

    def fault_mutex(self, inode: HugetlbfsInode, idx: int, mm: Any = None, addr: int = 0) -> Mutex:
        """``hugetlb_fault_mutex_table[hugetlb_fault_mutex_hash(...)]``. Policy
        ``hugetlb_fault_hash``: ``mapping-index`` (1b426bac66e6, v5.2: the same
        key for shared and private mappings, so every process mapping an inode
        takes the same mutex for the same page) or ``private-by-mm`` (v3.15 ..
        v5.1: a private mapping (``mm`` given) keys off (mm, address)). The
        kernel hashes with jhash2; a multiplicative hash stands in for it
        (deterministic; different pages of one key never collide here)."""
        if self.system.policy("hugetlb_fault_lock") == "instantiation-mutex":
            return self.single_mutex
        if mm is not None and self.system.policy("hugetlb_fault_hash") == "private-by-mm":
            n = self._mm_ids.setdefault(id(mm), len(self._mm_ids) + 1)
            h = (n * 0x85EBCA6B + (addr >> HPAGE_SHIFT)) & (self.table_size - 1)
        else:
            h = (inode.ino * 0x9E3779B1 + idx) & (self.table_size - 1)
        mx = self.fault_mutexes.get(h)
        if mx is None:
            mx = self.fault_mutexes[h] = Mutex(self.system.locks, "hugetlb_fault_mutex_table", 0, spin_on_owner=True,
                                                        mpolicy=self.system.mutex_policy())
        return mx

    def _busy(self, task: Task, name: str, n: int = 1) -> int:
        ns, ins = _path(name, self.system.machine.freq_ghz)
        r: int = self.system.counters.busy(task.cpu, name, ns * n, ins * n)
        return r

    def _buddy_node(self, task: Task) -> Generator[Any, Any, int]:
        """``alloc_fresh_huge_page`` → ``alloc_buddy_huge_page`` (an order-9
        buddy allocation under ``zone->lock``) + ``prep_new_huge_page``. The
        block's pfn is kept with its node's surplus blocks."""
        s = self.system
        pa = s.page_alloc
        pfn, pending = yield from pa.alloc_pages_pfn(task, s.machine.cpu_node(task.cpu), HPAGE_ORDER)
        yield pending + self._busy(task, "prep_new_huge_page")
        s.counters.vm[task.cpu][HTLB_ALLOC] += 1
        node = int(pa.page_node(pfn))
        self.buddy_pfns[node].append(pfn)
        return node

    def _free_to_buddy(self, task: Task, node: int) -> Generator[Any, Any, None]:
        """``update_and_free_page`` → ``__free_pages(page, 9)`` (``free_one_page``
        under ``zone->lock``). Huge pages of a node are interchangeable in the
        model, so the block returned is the node's last one taken from the buddy
        allocator: the allocator's free lists stay exact."""
        pending = self._busy(task, "update_and_free_page")
        pfn = self.buddy_pfns[node].pop()
        pending = yield from self.system.page_alloc.free_pages(task, pfn, HPAGE_ORDER, pending)
        if pending:
            yield pending

    def alloc_surplus_huge_page(self, task: Task) -> Generator[Any, Any, int]:
        """v5.7: check ``surplus_huge_pages < nr_overcommit_huge_pages`` under
        ``hugetlb_lock``, allocate from the buddy allocator without it, then
        count the page as surplus under the lock. Returns the node, or -1."""
        yield self.lock.acquire(task)
        if self.surplus_huge_pages >= self.nr_overcommit_huge_pages:
            self.lock.release(task)
            return -1
        self.lock.release(task)
        node = yield from self._buddy_node(task)
        yield self.lock.acquire(task)
        self.nr_huge_pages += 1
        self.surplus_huge_pages += 1
        self.surplus_node[node] += 1
        self.lock.release(task)
        return node

    def hugetlb_acct_memory(self, task: Task, delta: int) -> Generator[Any, Any, bool]:
        """``hugetlb_acct_memory`` (v5.7): reserve ``delta`` pages, gathering
        surplus pages (``gather_surplus_pages``) when the free pages do not
        cover them; a negative delta returns reservations
        (``return_unused_surplus_pages``). False = -ENOMEM (nothing changed)."""
        yield self.lock.acquire(task)
        if delta <= 0:
            # return_unused_surplus_pages: free_pool_huge_page takes free pages of nodes with surplus
            self.resv_huge_pages += delta
            nodes: list[int] = []
            for _ in range(min(-delta, self.surplus_huge_pages)):
                nd = next((x for x in range(len(self.free_node))
                           if self.free_node[x] > 0 and self.surplus_node[x] > 0), -1)
                if nd < 0:
                    break
                self.free_node[nd] -= 1
                self.free_huge_pages -= 1
                self.surplus_node[nd] -= 1
                self.surplus_huge_pages -= 1
                self.nr_huge_pages -= 1
                nodes.append(nd)
            self.lock.release(task)
            for nd in nodes:
                yield from self._free_to_buddy(task, nd)
            return True
        needed = self.resv_huge_pages + delta - self.free_huge_pages
        if needed <= 0:  # gather_surplus_pages: the free pages cover it
            self.resv_huge_pages += delta
            self.lock.release(task)
            return True
        self.lock.release(task)
        got: list[int] = []
        while needed > 0:  # gather_surplus_pages drops hugetlb_lock to allocate
            for _ in range(needed):
                nd = yield from self.alloc_surplus_huge_page(task)
                if nd < 0:  # over nr_overcommit_hugepages: give back what was allocated, -ENOMEM
                    for x in got:
                        yield from self.free_huge_page(task, x)
                    return False
                got.append(nd)
            yield self.lock.acquire(task)
            # retry: another mapping may have reserved meanwhile (two children's mmaps at once each counted
            # the same free pages: the pool ended with fewer free pages than reservations, a reserved fault
            # then found none)
            needed = self.resv_huge_pages + delta - (self.free_huge_pages + len(got))
            if needed > 0:
                self.lock.release(task)
        keep = max(0, needed + len(got))  # the pages still wanted (others' gathering may have covered some)
        for nd in got[:keep]:  # enqueue_huge_page: the new pages are free (and now reserved)
            self.free_huge_pages += 1
            self.free_node[nd] += 1
        self.resv_huge_pages += delta
        self.lock.release(task)
        for nd in got[keep:]:  # "Free unnecessary surplus pages to the buddy allocator"
            yield from self.free_huge_page(task, nd)
        return True

    def _take_free(self, n: int, node: int = 0) -> list[int]:
        """Dequeue ``n`` free pages, the local node first (``dequeue_huge_page_nodemask``)."""
        order = self.system.page_alloc.zonelist[node]
        out = []
        for _ in range(n):
            nd = next(x for x in order if self.free_node[x] > 0)
            self.free_node[nd] -= 1
            self.free_huge_pages -= 1
            out.append(nd)
        return out

    def alloc_huge_page(self, task: Task, reserved: bool) -> Generator[Any, Any, int]:
        """``alloc_huge_page`` (v5.7): a reserved fault takes a free page and
        the reservation; an unreserved one needs ``free - resv > 0``
        (``dequeue_huge_page_vma``), else a surplus page from the buddy
        allocator. Returns the node, or -1 (the caller's SIGBUS)."""
        s = self.system
        d = self.lock.acquire(task)
        if d is PARK:
            yield d
            d = 0
        ns, ins = path("dequeue_huge_page_node", s.machine.freq_ghz)
        yield d + s.counters.busy(task.cpu, "dequeue_huge_page_node", ns, ins)
        if reserved or self.free_huge_pages - self.resv_huge_pages > 0:
            node = self._take_free(1, s.machine.cpu_node(task.cpu))[0]
            if reserved:
                self.resv_huge_pages -= 1
            self.lock.release(task)
            return node
        self.lock.release(task)
        return (yield from self.alloc_surplus_huge_page(task))

    def free_huge_page(self, task: Task, node: int) -> Generator[Any, Any, None]:
        """``free_huge_page`` (v5.7): a surplus page returns to the buddy
        allocator, any other to the node's free list."""
        yield self.lock.acquire(task)
        if self.surplus_node[node] > 0:
            self.surplus_node[node] -= 1
            self.surplus_huge_pages -= 1
            self.nr_huge_pages -= 1
            self.lock.release(task)
            yield from self._free_to_buddy(task, node)
            return
        self.free_node[node] += 1
        self.free_huge_pages += 1
        self.lock.release(task)

    def usage(self, mm: Any) -> Any:
        """``mm->hugetlb_usage`` (``hugetlb_count_add``: an atomic on the mm)."""
        c = self.hugetlb_usage.get(id(mm))
        if c is None:
            from mmsim.locks.rwsem import AtomicCounter

            c = self.hugetlb_usage[id(mm)] = AtomicCounter(self.system.locks, "mm->hugetlb_usage", mm.home_cpu)
        return c


# -- mmap / fork / munmap ------------------------------------------------------


def hugetlbfs_file_mmap(task: Task, mm: Any, vma: Any) -> Generator[Any, Any, None]:
    """fs/hugetlbfs/inode.c ``hugetlbfs_file_mmap`` → ``hugetlb_reserve_pages``
    (v5.7) for a new hugetlb VMA (``vma.file`` set by the caller, or a new
    anonymous inode from ``hugetlb_file_setup``). Shared: reserve the file
    indices no earlier mapping reserved (``region_chg`` on the inode's
    map). Private: the whole range, owned by this VMA (``HPAGE_RESV_OWNER``).
    Raises a UserError (the kernel's mmap ENOMEM) if the pool cannot."""
    s = mm.system
    pool: HugetlbPool = s.hugetlb
    if vma.file is None:
        vma.file = pool.new_inode(mm.home_cpu, anon=True)
    inode: HugetlbfsInode = vma.file
    npages = vma.size >> HPAGE_SHIFT
    first = vma.pgoff
    yield pool._busy(task, "hugetlb_reserve_pages")
    if vma.shared:
        new = [i for i in range(first, first + npages) if i not in inode.resv_map]
        chg = len(new)
    else:
        chg = npages
    ok = yield from pool.hugetlb_acct_memory(task, chg)
    if not ok:
        raise hugetlb_error("this mapping's reservation", pool, chg,
                            "fails mmap() with ENOMEM (hugetlb_reserve_pages -> hugetlb_acct_memory)")
    if vma.shared:
        inode.resv_map.update(new)
    else:
        vma.private_data = PrivateResv(npages)
    yield inode.i_mmap_rwsem.down_write(task)  # vma_link -> __vma_link_file
    yield pool._busy(task, "vma_interval_tree")
    inode.vmas.append(vma)
    yield inode.i_mmap_rwsem.up_write(task)


def dup_hugetlb_vma(task: Task, parent: Any, child: Any, vma: Any, cvma: Any) -> Generator[Any, Any, None]:
    """kernel/fork.c ``dup_mmap`` for one hugetlb VMA: the child's VMA goes
    into the file's i_mmap tree under ``i_mmap_lock_write``; the reserve map
    is not inherited (``reset_vma_resv_huge_pages``); then
    ``copy_hugetlb_page_range`` (v5.7): per present huge PTE, both PTLs,
    write-protect a private (COW) mapping in both, ``get_page`` +
    ``page_dup_rmap`` (atomics on the head page and ``compound_mapcount``)."""
    s = parent.system
    pool: HugetlbPool = s.hugetlb
    inode: HugetlbfsInode = vma.file
    cvma.file, cvma.pgoff, cvma.private_data = inode, vma.pgoff, None
    yield inode.i_mmap_rwsem.down_write(task)
    yield pool._busy(task, "vma_interval_tree")
    inode.vmas.append(cvma)
    yield inode.i_mmap_rwsem.up_write(task)
    pp, cp = parent.pgtables, child.pgtables
    cpu = task.cpu
    for slot in range(vma.start >> PMD_SHIFT, vma.end >> PMD_SHIFT):
        if pp.pmd.get(slot) != PMD_HUGE:
            continue
        pud = slot >> (PUD_SHIFT - PMD_SHIFT)
        if pud not in cp.pud_present:
            cp.pud_present.add(pud)
            cp.nr_pmd_tables += 1
        key = page_of(parent, vma, slot)
        now = s.engine.now
        d = s.page_line(key).rmw(cpu, now) + s.page_line((key, "compound_mapcount")).rmw(cpu, now)
        yield (pool._busy(task, "copy_hugetlb_page_range") + s.counters.busy(cpu, "copy_hugetlb_page_range", d)
               + pool.usage(child).add(task, "hugetlb_count_add"))
        s.page_mapcount[key] = s.page_mapcount.get(key, 1) + 1
        if not vma.shared:
            pp.wp_huge.add(slot)
            pp.shared[slot] = key
            cp.wp_huge.add(slot)
            cp.shared[slot] = key
        cp.pmd[slot] = PMD_HUGE
        cp.huge_node[slot] = pp.huge_node.get(slot, 0)


def unmap_hugetlb_vma(task: Task, mm: Any, vma: Any, exiting: bool = False) -> Generator[Any, Any, None]:
    """Tear down one hugetlb VMA, as ``munmap`` (under mmap_sem for write) or
    ``exit_mmap`` (``exiting``: the mm has no other user, no mmap_sem) do
    (v5.7): ``unmap_single_vma`` takes ``i_mmap_lock_write`` around
    ``__unmap_hugepage_range_final`` (per huge PTE: clear it under the PTL,
    ``page_remove_rmap``, and free the page with its last reference:
    ``free_huge_page``); ``free_pgtables`` → ``unlink_file_vma`` takes it
    again to remove the VMA from i_mmap; ``hugetlb_vm_op_close`` returns the
    owner's unused reservations; the last mapping of an anonymous inode
    frees its page cache and inode reservations (``hugetlbfs_evict_inode``
    → ``remove_inode_hugepages``)."""
    s = mm.system
    pool: HugetlbPool = s.hugetlb
    inode: HugetlbfsInode = vma.file
    cpu = task.cpu
    if not exiting:
        yield mm.mmap_sem.down_write(task)
    rw = inode.i_mmap_rwsem
    yield rw.down_write(task)
    pt = mm.pgtables
    to_free: list[int] = []
    unshared = _huge_pmd_unshare(pt, vma)
    slots = [sl for sl in range(vma.start >> PMD_SHIFT, vma.end >> PMD_SHIFT) if pt.pmd.get(sl) == PMD_HUGE]
    for slot in slots:
        key = page_of(mm, vma, slot)
        if (slot >> (PUD_SHIFT - PMD_SHIFT)) in unshared:  # huge_pmd_unshare: the PMD page stays with others
            del pt.pmd[slot]
            pt.huge_node.pop(slot, None)
            continue
        lk = pt.pmd_lockptr(slot)  # huge_pte_lock
        yield lk.acquire(task)
        yield pool._busy(task, "__unmap_hugepage_range")
        left = s.page_mapcount.get(key, 1) - 1
        if left > 0:
            line = s.page_line((key, "compound_mapcount"))
            yield s.counters.busy(cpu, "page_remove_rmap", line.rmw(cpu, s.engine.now))
            s.page_mapcount[key] = left
        else:
            s.page_mapcount.pop(key, None)
            if not vma.shared:
                to_free.append(pt.huge_node.get(slot, 0))
        del pt.pmd[slot]
        pt.wp_huge.discard(slot)
        pt.shared.pop(slot, None)
        pt.huge_node.pop(slot, None)
        lk.release(task)
    yield rw.up_write(task)
    for node in to_free:  # tlb_finish_mmu -> put_page -> free_huge_page
        yield from pool.free_huge_page(task, node)
    yield rw.down_write(task)  # free_pgtables -> unlink_file_vma
    yield pool._busy(task, "vma_interval_tree")
    inode.vmas.remove(vma)
    yield rw.up_write(task)
    resv = vma.private_data
    if isinstance(resv, PrivateResv):  # hugetlb_vm_op_close
        unused = resv.npages - len(resv.consumed)
        if unused:
            yield from pool.hugetlb_acct_memory(task, -unused)
    if inode.anon and not inode.vmas:
        yield from _evict_inode(task, pool, inode)
    if vma in mm.vmas:
        mm.vmas.remove(vma)
    if not exiting:
        yield mm.mmap_sem.up_write(task)


def _huge_pmd_unshare(pt: Any, vma: Any) -> set[int]:
    """``huge_pmd_unshare`` (v5.7) for every PMD page of ``vma`` that another
    mm still shares: drop this mm's reference (``put_page`` on the PMD
    page, ``pud_clear``). Returns the PUD slots unshared this way."""
    out: set[int] = set()
    if not vma.shared:
        return out
    for frange, sharers in vma.file.pmd_sharers.items():
        mine = [e for e in sharers if e[0] is pt and e[1] is vma]
        for e in mine:
            sharers.remove(e)
        if mine and sharers:
            out.add((vma.start + ((frange * PAGES_PER_PUD - vma.pgoff) << HPAGE_SHIFT)) >> PUD_SHIFT)
    return out


def _evict_inode(task: Task, pool: HugetlbPool, inode: HugetlbfsInode) -> Generator[Any, Any, None]:
    """``remove_inode_hugepages`` + ``hugetlb_unreserve_pages``: free the page
    cache pages and return the reservations never consumed."""
    unused = len(inode.resv_map - set(inode.pages))
    for key, node in list(inode.pages.values()):
        pool.system.page_mapcount.pop(key, None)
        yield from pool.free_huge_page(task, node)
    inode.pages.clear()
    inode.resv_map.clear()
    if unused:
        yield from pool.hugetlb_acct_memory(task, -unused)


def page_of(mm: Any, vma: Any, slot: int) -> Hashable:
    """The page mapped at PMD ``slot``: the page cache page of a shared
    mapping, the page inherited over fork, or the mm's own page."""
    if vma.shared:
        return ("HT", vma.file.ino, idx_of(vma, slot << PMD_SHIFT))
    k: Hashable = mm.pgtables.shared.get(slot) or ("H", id(mm), slot)
    return k


def idx_of(vma: Any, addr: int) -> int:
    """``vma_hugecache_offset``: the huge-page index in the file."""
    return int(((addr - vma.start) >> HPAGE_SHIFT) + vma.pgoff)


def vma_shareable(vma: Any, addr: int) -> bool:
    """arch/x86/mm/hugetlbpage.c ``vma_shareable`` (v5.7): VM_MAYSHARE and the
    PUD-aligned 1 GiB around ``addr`` lies inside the VMA."""
    base = addr & ~((1 << PUD_SHIFT) - 1)
    return bool(vma.shared) and vma.start <= base and base + (1 << PUD_SHIFT) <= vma.end


# -- the fault -----------------------------------------------------------------


def _takes_i_mmap(s: Any, vma: Any, addr: int) -> bool:
    pol = s.policy("hugetlb_i_mmap_rwsem")
    return pol == "always" or (pol == "if-shareable" and vma_shareable(vma, addr))


def huge_pte_alloc(task: Task, mm: Any, vma: Any, addr: int, held: bool) -> Generator[Any, Any, None]:
    """arch/x86/mm/hugetlbpage.c ``huge_pte_alloc`` (v5.7): with the PUD none,
    ``huge_pmd_share`` for a shareable VMA — look for a VMA of the same file
    whose PMD page covers this range and link it (``get_page`` on it) —
    else ``pmd_alloc``. Before c0d0381ade79 ``huge_pmd_share`` takes
    ``i_mmap_lock_write`` itself; after it the caller holds the read side
    (``held``)."""
    pt = mm.pgtables
    pud = addr >> PUD_SHIFT
    if pud in pt.pud_present:
        return
    if vma_shareable(vma, addr):
        inode: HugetlbfsInode = vma.file
        rw = inode.i_mmap_rwsem
        if not held:
            yield rw.down_write(task)
        frange = idx_of(vma, addr & ~((1 << PUD_SHIFT) - 1)) // PAGES_PER_PUD
        sharers = inode.pmd_sharers.setdefault(frange, [])
        if sharers:  # share the PMD page: no new table
            s = mm.system
            yield s.counters.busy(task.cpu, "huge_pmd_share", s.page_line(("pmd page", inode.ino, frange))
                                  .rmw(task.cpu, s.engine.now))
            pt.pud_present.add(pud)
            _mirror_shared(pt, sharers[0], vma, addr)
        sharers.append((pt, vma))
        if not held:
            yield rw.up_write(task)
        if pud in pt.pud_present:
            return
    from mmsim.mm.memory import __pmd_alloc  # circular: memory dispatches hugetlb faults here

    yield from __pmd_alloc(task, mm, pud)


def _mirror_shared(pt: Any, src: tuple[Any, Any], vma: Any, addr: int) -> None:
    """A shared PMD page: the entries another mm already set are present here."""
    spt, svma = src
    base = addr & ~((1 << PUD_SHIFT) - 1)
    for i in range(PAGES_PER_PUD):
        a = base + (i << PMD_SHIFT)
        sa = svma.start + ((idx_of(vma, a) - svma.pgoff) << HPAGE_SHIFT)
        if spt.pmd.get(sa >> PMD_SHIFT) == PMD_HUGE:
            pt.pmd[a >> PMD_SHIFT] = PMD_HUGE
            pt.huge_node[a >> PMD_SHIFT] = spt.huge_node.get(sa >> PMD_SHIFT, 0)


def _set_huge_pte(mm: Any, vma: Any, slot: int, node: int) -> None:
    """``set_huge_pte_at``; in a shared PMD page every sharer sees the entry."""
    pt = mm.pgtables
    pt.pmd[slot] = PMD_HUGE
    pt.huge_node[slot] = node
    if vma.shared and vma_shareable(vma, slot << PMD_SHIFT):
        addr = slot << PMD_SHIFT
        idx = idx_of(vma, addr)
        for spt, svma in vma.file.pmd_sharers.get(idx // PAGES_PER_PUD, []):
            sa = svma.start + ((idx - svma.pgoff) << HPAGE_SHIFT)
            if (sa >> PUD_SHIFT) in spt.pud_present:
                spt.pmd[sa >> PMD_SHIFT] = PMD_HUGE
                spt.huge_node[sa >> PMD_SHIFT] = node


def hugetlb_fault(task: Task, mm: Any, vma: Any, addr: int, write: bool = True) -> Generator[Any, Any, str]:
    """mm/hugetlb.c ``hugetlb_fault`` (v5.6 / v5.7 by policy
    ``hugetlb_i_mmap_rwsem``). Returns ``"hugetlb"`` (new page),
    ``"hugetlb-cow"`` (copied), ``"hugetlb-reuse"`` or ``"none"``."""
    s = mm.system
    pool: HugetlbPool = s.hugetlb
    if vma.file is None:  # a VMA built without hugetlbfs_file_mmap (no reservation)
        vma.file = pool.new_inode(mm.home_cpu, anon=True)
        vma.private_data = None if vma.shared else PrivateResv(0)
    inode: HugetlbfsInode = vma.file
    slot = addr >> PMD_SHIFT
    rw = inode.i_mmap_rwsem if _takes_i_mmap(s, vma, addr) else None
    d = rw.down_read(task) if rw is not None else 0
    if d is PARK:
        yield d
        d = 0
    yield d + pool._busy(task, "hugetlb_fault")  # one event: the lock's atomic and the walk
    yield from huge_pte_alloc(task, mm, vma, addr, rw is not None)
    idx = idx_of(vma, addr)
    mx = pool.fault_mutex(inode, idx, None if vma.shared else mm, addr)
    yield mx.lock(task)
    pt = mm.pgtables
    kind = "none"
    if pt.pmd.get(slot) != PMD_HUGE:
        kind = yield from hugetlb_no_page(task, mm, vma, addr, idx)
    elif write and slot in pt.wp_huge:
        kind = yield from hugetlb_cow(task, mm, vma, addr)
    d = mx.unlock(task)
    yield d + (rw.up_read(task) if rw is not None else 0)
    return kind


def hugetlb_no_page(task: Task, mm: Any, vma: Any, addr: int, idx: int) -> Generator[Any, Any, str]:
    """``hugetlb_no_page`` (v5.7): a shared mapping finds the page in the page
    cache or allocates and adds it; a private one allocates an anonymous
    page (with the owner's reservation if it has one). A new page is cleared
    (``clear_huge_page``) and mapped under ``huge_pte_lock``. No page:
    SIGBUS (raised as a UserError naming the pool)."""
    s = mm.system
    pool: HugetlbPool = s.hugetlb
    inode: HugetlbfsInode = vma.file
    slot = addr >> PMD_SHIFT
    cached = inode.pages.get(idx) if vma.shared else None
    if cached is not None:
        key, node = cached
    else:
        if vma.shared:
            reserved = idx in inode.resv_map
        else:
            resv = vma.private_data
            reserved = isinstance(resv, PrivateResv) and idx - vma.pgoff < resv.npages and idx not in resv.consumed
        node = yield from pool.alloc_huge_page(task, reserved)
        if node < 0:
            raise hugetlb_error("every fault of this run", pool, 1,
                                "sends SIGBUS to the faulting task (hugetlb_no_page: alloc_huge_page -ENOSPC)")
        if not vma.shared and isinstance(vma.private_data, PrivateResv) and reserved:
            vma.private_data.consumed.add(idx)
        key = ("HT", inode.ino, idx) if vma.shared else ("H", id(mm), slot)
        from mmsim.mm.memory import clear_huge_page  # circular: memory dispatches hugetlb faults here

        yield from clear_huge_page(task, s, node, key, addr)
        if vma.shared:
            inode.pages[idx] = (key, node)  # huge_add_to_page_cache
    ns, ins = path("hugetlb_no_page", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "hugetlb_no_page", ns, ins)
    lk = mm.pgtables.pmd_lockptr(slot)  # huge_pte_lockptr: the PMD page's lock, or mm->page_table_lock
    d = lk.acquire(task)
    if d is PARK:
        yield d
        d = 0
    if cached is not None:
        s.page_mapcount[key] = s.page_mapcount.get(key, 0) + 1
    else:
        s.page_mapcount[key] = 1
    _set_huge_pte(mm, vma, slot, node)
    yield d + pool.usage(mm).add(task, "hugetlb_count_add")  # one event: the PTL section
    lk.release(task)
    return "hugetlb"


def hugetlb_cow(task: Task, mm: Any, vma: Any, addr: int) -> Generator[Any, Any, str]:
    """``hugetlb_cow`` (v5.7), entered with the fault mutex (and, by policy,
    i_mmap_rwsem) held: under the PTL, a page mapped once is reused
    (``page_mapcount == 1 && PageAnon``); otherwise ``get_page``, drop the
    PTL, ``alloc_huge_page`` (a forked child has no reservation: a free
    unreserved page or a new surplus page), ``copy_user_huge_page`` (policy
    ``huge_copy_order``), and under the PTL again
    ``huge_ptep_clear_flush``, ``page_remove_rmap`` (an atomic on the old
    page's ``compound_mapcount``, a line every child shares), map the new
    page; ``put_page(old)``. No page: SIGBUS (a UserError naming the pool)."""
    s = mm.system
    pool: HugetlbPool = s.hugetlb
    c = s.counters
    cpu = task.cpu
    slot = addr >> PMD_SHIFT
    pt = mm.pgtables
    lk = pt.pmd_lockptr(slot)
    old = page_of(mm, vma, slot)
    d = lk.acquire(task)
    if d is PARK:
        yield d
        d = 0
    now = s.engine.now
    d += c.busy(cpu, "page_mapcount", s.page_line((old, "compound_mapcount")).rmw(cpu, now))
    if s.page_mapcount.get(old, 1) <= 1:
        yield d
        pt.wp_huge.discard(slot)
        pt.shared.pop(slot, None)
        lk.release(task)
        return "hugetlb-reuse"
    yield d + c.busy(cpu, "get_page", s.page_line(old).rmw(cpu, now))
    lk.release(task)
    # The owner's COW of a page still shared uses no reserve (outside_reserve); see hugetlb_cow.
    node = yield from pool.alloc_huge_page(task, False)
    if node < 0:
        raise hugetlb_error("the COW copies of every process", pool, 1,
                            "sends SIGBUS to the faulting task (hugetlb_cow: alloc_huge_page -ENOSPC)")
    new = ("H", id(mm), slot)
    from mmsim.mm.memory import copy_user_huge_page  # circular: memory dispatches hugetlb faults here

    yield from copy_user_huge_page(task, s, node, new, old, addr)
    d = lk.acquire(task)
    if d is PARK:
        yield d
        d = 0
    now = s.engine.now
    yield (d + pool._busy(task, "hugetlb_cow")  # one event: the PTL section and its two atomics
           + c.busy(cpu, "page_remove_rmap", s.page_line((old, "compound_mapcount")).rmw(cpu, now))
           + c.busy(cpu, "put_page", 2 * s.page_line(old).rmw(cpu, now)))
    s.page_mapcount[old] = s.page_mapcount.get(old, 1) - 1
    s.page_mapcount[new] = 1
    pt.wp_huge.discard(slot)
    pt.shared.pop(slot, None)
    pt.huge_node[slot] = node
    lk.release(task)
    c.vm[cpu][COW_FAULT] += 1
    return "hugetlb-cow"
