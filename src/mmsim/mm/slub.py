"""The SLUB slab allocator (mm/slub.c, v6.6), at the depth a cross-CPU
alloc/free stream needs (the skb heads and ``sk_buff``\\ s of AF_UNIX).

**Geometry** (``kmem_cache_open`` → ``calculate_sizes``): the object size
rounded to the alignment (``SLAB_HWCACHE_ALIGN``: a cache line, halved while
the object fits twice), the slab order from ``calculate_order`` — at least
``4 * (fls(nr_cpus) + 1)`` objects per slab, capped by the objects an order
``slub_max_order`` (= ``PAGE_ALLOC_COSTLY_ORDER``) slab holds, with at most
1/16 .. 1/4 of the slab left over — ``min_partial`` (``set_min_partial``:
ilog2(size) / 2 clamped to 5 .. 10) and ``cpu_partial`` /
``cpu_partial_slabs`` (``set_cpu_partial`` → ``slub_set_cpu_partial``).

**State.** A slab is its head pfn, its ``inuse`` count and where it is: a
CPU's current slab (``kmem_cache_cpu.slab``, frozen), on a CPU's partial list
(frozen), on its node's partial list, or full and on no list (v6.6 keeps no
full list without debugging). Objects are not individual: ``inuse`` counts the
objects not on the slab's own freelist (``slab->freelist``), and a CPU's
``freelist`` is the count of objects its lockless freelist holds for its
current slab, so ``objects - inuse`` are the objects freed back to the slab.
An allocation returns the :class:`Slab` its object came from; freeing takes it.

**Paths** (the v6.6 functions, by name): ``slab_alloc_node`` (lockless fast
path) → ``___slab_alloc`` (``get_freelist``, the CPU partial list,
``get_partial_node`` under ``n->list_lock`` taking one slab and filling the
CPU partial list with up to ``cpu_partial_slabs / 2`` more, ``new_slab``);
``slab_free`` (fast path when the object's slab is this CPU's slab) →
``__slab_free`` (a frozen slab: cmpxchg only; a full slab: frozen onto this
CPU's partial list by ``put_cpu_partial``, which moves the whole list to the
node, ``__unfreeze_partials`` under ``n->list_lock``, once it holds
``cpu_partial_slabs``; an empty slab on the node list: ``discard_slab`` if
the node keeps ``min_partial`` others). ``get_any_partial`` (other nodes'
lists, tried ~2% of the time by ``remote_node_defrag_ratio``) is not
modelled: every slab is allocated and refilled from the allocating CPU's node.

**Pages.** Slabs come from :meth:`PageAllocator.alloc_pages_pfn` (order
``oo_order``, MIGRATE_UNMOVABLE: no ``SLAB_RECLAIM_ACCOUNT`` here) and go back
through :meth:`PageAllocator.free_pages` — ``__free_pages`` →
``free_unref_page``: the PCP and its free_high rule — on the CPU that
discards them.

**Costs.** Path lengths from :mod:`mmsim.mm.costs`. Line transfers: the slab's
``struct page`` (``freelist``/``counters``, written by every cmpxchg and list
operation) through the page allocator's last-writer table
(:meth:`PageAllocator.touch_struct_page`); the list neighbours' ``struct
page`` on ``list_del``/``list_add_tail``; ``kmem_cache_node``'s first line —
``list_lock``, ``nr_partial``, the ``partial`` head and the
``nr_slabs``/``total_objects`` atomics (CONFIG_SLUB_DEBUG) share it — is the
spinlock's own :class:`CacheLine`, so the list head is free to its holder and
``inc_slabs_node``/``dec_slabs_node`` are atomics on the lock's line; the
free pointer of the next object, read on allocation, comes from the CPU that
freed it; a new slab's free pointers are written into every object.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.base import CacheLine
from mmsim.locks.spinlock import Spinlock
from mmsim.machine.presets import FILL_BUFFERS
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES, Counters
from mmsim.metrics.events import VmEvent
from mmsim.mm.buddy import MIGRATE_UNMOVABLE
from mmsim.mm.costs import path
from mmsim.mm.page_alloc import PAGE_ALLOC_COSTLY_ORDER, PAGE_SHIFT, PAGE_SIZE, PageAllocator

# mm/slub.c (v6.6)
MIN_PARTIAL = 5
MAX_PARTIAL = 10
MAX_OBJS_PER_PAGE = 32767
SLUB_MAX_ORDER = PAGE_ALLOC_COSTLY_ORDER  # slub_max_order default
SLUB_MIN_ORDER = 0
# include/linux/slab.h (v6.6, SLUB, x86-64): kmalloc caches from 8 B to 2 pages; bigger is kmalloc_large.
KMALLOC_MIN_SIZE = 8
KMALLOC_MAX_CACHE_SIZE = PAGE_SIZE << 1
SLAB_HWCACHE_ALIGN = 0x00002000
CACHE_LINE = 64  # cache_line_size() on x86-64

# where a slab is
ON_CPU, ON_CPU_PARTIAL, ON_NODE_PARTIAL, FULL, FREED = range(5)

# SLUB statistics (enum stat_item, CONFIG_SLUB_STATS), kept per CPU as vm events and per cache.
ALLOC_FASTPATH = int(VmEvent.SLAB_ALLOC_FASTPATH)
ALLOC_SLOWPATH = int(VmEvent.SLAB_ALLOC_SLOWPATH)
ALLOC_FROM_PARTIAL = int(VmEvent.SLAB_ALLOC_FROM_PARTIAL)
ALLOC_SLAB = int(VmEvent.SLAB_NEW)
FREE_FASTPATH = int(VmEvent.SLAB_FREE_FASTPATH)
FREE_SLOWPATH = int(VmEvent.SLAB_FREE_SLOWPATH)
FREE_FROZEN = int(VmEvent.SLAB_FREE_FROZEN)
FREE_ADD_PARTIAL = int(VmEvent.SLAB_FREE_ADD_PARTIAL)
FREE_SLAB = int(VmEvent.SLAB_DISCARD)
CPU_PARTIAL_ALLOC = int(VmEvent.CPU_PARTIAL_ALLOC)
CPU_PARTIAL_FREE = int(VmEvent.CPU_PARTIAL_FREE)
CPU_PARTIAL_NODE = int(VmEvent.CPU_PARTIAL_NODE)
CPU_PARTIAL_DRAIN = int(VmEvent.CPU_PARTIAL_DRAIN)
SLAB_EVENTS = tuple(e for e in VmEvent if VmEvent.SLAB_ALLOC_FASTPATH <= e <= VmEvent.CPU_PARTIAL_DRAIN)


def order_objects(order: int, size: int) -> int:
    return (PAGE_SIZE << order) // size


def get_order(size: int) -> int:
    """``get_order``: the smallest order whose block holds ``size`` bytes."""
    return max(0, (size - 1) >> PAGE_SHIFT).bit_length()


def calc_slab_order(size: int, min_objects: int, max_order: int, fract_leftover: int) -> int:
    """mm/slub.c ``calc_slab_order`` (v6.6): the first order from the one that
    holds ``min_objects`` whose leftover is at most 1/``fract_leftover``."""
    if order_objects(SLUB_MIN_ORDER, size) > MAX_OBJS_PER_PAGE:
        return get_order(size * MAX_OBJS_PER_PAGE) - 1
    order = max(SLUB_MIN_ORDER, get_order(min_objects * size))
    while order <= max_order:
        slab_size = PAGE_SIZE << order
        if slab_size % size <= slab_size // fract_leftover:
            break
        order += 1
    return order


def calculate_order(size: int, nr_cpus: int) -> int:
    """mm/slub.c ``calculate_order`` (v6.6): ``min_objects = 4 * (fls(nr_cpus) + 1)``,
    capped by what a ``slub_max_order`` slab holds; fewer objects, then more
    waste, until an order <= ``slub_max_order`` fits."""
    min_objects = 4 * (nr_cpus.bit_length() + 1)
    min_objects = min(min_objects, order_objects(SLUB_MAX_ORDER, size))
    while min_objects > 1:
        fraction = 16
        while fraction >= 4:
            order = calc_slab_order(size, min_objects, SLUB_MAX_ORDER, fraction)
            if order <= SLUB_MAX_ORDER:
                return order
            fraction //= 2
        min_objects -= 1
    order = calc_slab_order(size, 1, SLUB_MAX_ORDER, 1)
    if order <= SLUB_MAX_ORDER:
        return order
    return calc_slab_order(size, 1, 10, 1)  # MAX_ORDER


def calculate_alignment(flags: int, size: int) -> int:
    """mm/slab_common.c ``calculate_alignment``: a cache line for
    SLAB_HWCACHE_ALIGN, halved while two objects fit in it; else a word."""
    align = 8
    if flags & SLAB_HWCACHE_ALIGN:
        ralign = CACHE_LINE
        while size <= ralign // 2:
            ralign //= 2
        align = max(align, ralign)
    return align


def kmalloc_size_roundup(size: int) -> int:
    """The object size of the kmalloc cache ``kmalloc(size)`` uses (``kmalloc_index``:
    powers of two from 8 B, plus 96 and 192)."""
    if size <= 0 or size > KMALLOC_MAX_CACHE_SIZE:
        raise ValueError(f"kmalloc size {size} is not served by a kmalloc cache (1 .. {KMALLOC_MAX_CACHE_SIZE})")
    if size <= KMALLOC_MIN_SIZE:
        return KMALLOC_MIN_SIZE
    if 64 < size <= 96:
        return 96
    if 128 < size <= 192:
        return 192
    return 1 << (size - 1).bit_length()


def kmalloc_cache_name(size: int) -> str:
    """``kmalloc_info[]`` names: ``kmalloc-96``, ``kmalloc-1k``, ``kmalloc-4k``."""
    return f"kmalloc-{size >> 10}k" if size >= 1024 else f"kmalloc-{size}"


class Slab:
    """One slab (``struct slab`` over its head ``struct page``)."""

    __slots__ = ("cache", "pfn", "zone", "node", "objects", "inuse", "frozen", "where", "freer")

    def __init__(self, cache: KmemCache, pfn: int, zone: Any, cpu: int) -> None:
        self.cache = cache
        self.pfn = pfn
        self.zone = zone
        self.node: int = zone.node
        self.objects = cache.objects
        self.inuse = cache.objects  # new_slab: the whole freelist goes to the allocating CPU
        self.frozen = True
        self.where = ON_CPU
        self.freer = cpu  # last CPU that wrote a free pointer into the slab's freelist

    def __repr__(self) -> str:
        return f"Slab({self.cache.name}, pfn={self.pfn}, inuse={self.inuse}/{self.objects}, where={self.where})"


class KmemCacheCpu:
    """``struct kmem_cache_cpu``: the current slab, its lockless freelist (a count) and the partial list."""

    __slots__ = ("slab", "freelist", "fp_cpu", "partial")

    def __init__(self) -> None:
        self.slab: Slab | None = None
        self.freelist = 0
        self.fp_cpu = -1  # the CPU that wrote the free pointers of the objects on ``freelist``
        self.partial: list[Slab] = []  # the last one is the head (``c->partial``)


class KmemCacheNode:
    """``struct kmem_cache_node``: the node partial list under ``list_lock``."""

    __slots__ = ("node", "partial", "line", "list_lock", "nr_slabs")

    def __init__(self, system: Any, node: int, home: int) -> None:
        self.node = node
        self.partial: list[Slab] = []  # index 0 is the first (``n->partial.next``)
        self.line = CacheLine(system.machine, home)
        self.list_lock = Spinlock(system.locks, "&n->list_lock", system.spin_kind_for("list_lock"), home,
                                  line=self.line)
        self.nr_slabs = 0

    @property
    def nr_partial(self) -> int:
        return len(self.partial)


class KmemCache:
    """``struct kmem_cache`` as ``kmem_cache_open`` sets it up for SLUB (v6.6), no debugging."""

    def __init__(self, system: Any, name: str, object_size: int, flags: int = 0) -> None:
        if object_size <= 0:
            raise ValueError(f"kmem_cache {name}: object_size must be > 0, got {object_size}")
        m = system.machine
        self.name = name
        self.object_size = object_size
        align = calculate_alignment(flags, object_size)
        self.size = -(-object_size // align) * align  # the free pointer sits inside the object
        self.order = calculate_order(self.size, m.ncpus)
        self.objects = order_objects(self.order, self.size)
        self.min_partial = min(MAX_PARTIAL, max(MIN_PARTIAL, (self.size.bit_length() - 1) // 2))
        if self.size >= PAGE_SIZE:  # set_cpu_partial
            self.cpu_partial = 6
        elif self.size >= 1024:
            self.cpu_partial = 24
        elif self.size >= 256:
            self.cpu_partial = 52
        else:
            self.cpu_partial = 120
        self.cpu_partial_slabs = -(-self.cpu_partial * 2 // self.objects)  # slub_set_cpu_partial
        self.cpu = [KmemCacheCpu() for _ in range(m.ncpus)]
        homes = {n.id: min(m.node_cpus(n.id) or [0]) for n in m.nodes}
        self.node = [KmemCacheNode(system, n.id, homes[n.id]) for n in m.nodes]
        self.stats: dict[str, int] = {}
        self.slabs: dict[int, Slab] = {}  # live slabs by head pfn

    def geometry(self) -> dict[str, int]:
        """What /sys/kernel/slab/<cache>/ shows of the layout."""
        return {"object_size": self.object_size, "slab_size": self.size, "order": self.order,
                "objs_per_slab": self.objects, "min_partial": self.min_partial,
                "cpu_partial": self.cpu_partial, "cpu_partial_slabs": self.cpu_partial_slabs}


class Slub:
    """Every slab cache of one run (made on first use) and the SLUB paths."""

    def __init__(self, system: Any) -> None:
        self.system = system
        self.pa: PageAllocator = system.page_alloc
        self.counters: Counters = system.counters
        m = system.machine
        self._freq = m.freq_ghz
        self._xfer = m.xfer_ns
        self._cpu_node = [m.cpu_node(c) for c in range(m.ncpus)]
        self.caches: dict[str, KmemCache] = {}
        l3 = m.cache("L3")
        self._llc_ns = l3.latency_ns
        self._node_ns = [n.latency_ns for n in m.nodes]
        self._p = {k: path(k, self._freq) for k in (
            "slab_alloc", "slab_free", "___slab_alloc", "__slab_free", "put_cpu_partial",
            "get_partial_node", "__unfreeze_partials", "allocate_slab", "allocate_slab/object", "discard_slab")}

    def kmem_cache_create(self, name: str, object_size: int, flags: int = 0) -> KmemCache:
        """``kmem_cache_create`` (no merging with other caches: each name is one cache)."""
        s = self.caches.get(name)
        if s is None:
            s = self.caches[name] = KmemCache(self.system, name, object_size, flags)
        return s

    def kmalloc_slab(self, size: int) -> KmemCache:
        """``kmalloc_slab``: the KMALLOC_NORMAL cache for ``size`` bytes."""
        sz = kmalloc_size_roundup(size)
        return self.kmem_cache_create(kmalloc_cache_name(sz), sz)

    # -- helpers -------------------------------------------------------------------------
    def _stat(self, s: KmemCache, cpu: int, item: int) -> None:
        self.counters.vm[cpu][item] += 1
        k = VmEvent(item).vmstat_name
        s.stats[k] = s.stats.get(k, 0) + 1

    def _touch(self, slab: Slab, cpu: int) -> float:
        """A write to the slab's ``struct page`` (cmpxchg of freelist/counters, list links)."""
        return self.pa.touch_struct_page(slab.zone, slab.pfn, cpu)

    def _busy(self, cpu: int, func: str, extra: float = 0.0, times: int = 1) -> int:
        ns, ins = self._p[func]
        return self.counters.busy(cpu, func, ns * times + int(extra), ins * times)

    def _remove_partial(self, n: KmemCacheNode, slab: Slab, cpu: int) -> float:
        """``remove_partial`` → ``list_del``: the neighbours' links (the list head is on the
        lock's line, which the holder owns)."""
        lst = n.partial
        i = lst.index(slab)
        cost = 0.0
        if i > 0:
            cost += self._touch(lst[i - 1], cpu)
        if i + 1 < len(lst):
            cost += self._touch(lst[i + 1], cpu)
        del lst[i]
        slab.where = FULL
        return cost

    def _add_partial(self, n: KmemCacheNode, slab: Slab, cpu: int) -> float:
        """``add_partial(n, slab, DEACTIVATE_TO_TAIL)``: the old tail's link."""
        cost = self._touch(n.partial[-1], cpu) if n.partial else 0.0
        n.partial.append(slab)
        slab.where = ON_NODE_PARTIAL
        return cost

    # -- allocation ------------------------------------------------------------------------
    def slab_alloc_node(self, task: Task, s: KmemCache, pending: int = 0) -> Generator[Any, Any, tuple[Slab, int]]:
        """``slab_alloc_node`` → ``__slab_alloc_node`` (v6.6): pop this CPU's lockless
        freelist, else ``___slab_alloc``. Returns the object's slab and the busy
        ns not yet yielded (``pending``, as in :mod:`mmsim.mm.page_alloc`)."""
        cpu = task.cpu
        c = s.cpu[cpu]
        slab = c.slab
        if slab is not None and c.freelist:
            c.freelist -= 1
            self._stat(s, cpu, ALLOC_FASTPATH)
            fp = c.fp_cpu
            pending += self._busy(cpu, "slab_alloc", self._xfer(fp, cpu, modified=True) if fp != cpu else 0.0)
            return slab, pending
        return (yield from self._slab_alloc_slow(task, s, c, pending))

    def _slab_alloc_slow(
        self, task: Task, s: KmemCache, c: KmemCacheCpu, pending: int,
    ) -> Generator[Any, Any, tuple[Slab, int]]:
        """``___slab_alloc`` (v6.6)."""
        cpu = task.cpu
        self._stat(s, cpu, ALLOC_SLOWPATH)
        pending += self._busy(cpu, "___slab_alloc")
        slab = c.slab
        while True:
            if slab is not None:  # redo: c->freelist is empty; get_freelist takes the slab's
                extra = self._touch(slab, cpu)
                got = slab.objects - slab.inuse
                slab.inuse = slab.objects
                if got:
                    return slab, pending + self._load(s, c, slab, cpu, got, extra)
                slab.frozen = False  # full: unfrozen onto no list (DEACTIVATE_BYPASS)
                slab.where = FULL
                c.slab = None
                pending += self.counters.busy(cpu, "___slab_alloc", int(extra))
            if not c.partial:
                break
            slab = c.slab = c.partial.pop()  # new_slab: slub_percpu_partial(c)
            slab.where = ON_CPU
            self._stat(s, cpu, CPU_PARTIAL_ALLOC)
        n = s.node[self._cpu_node[cpu]]
        if n.partial:  # get_partial_node's racy check before the lock
            found = yield from self._get_partial_node(task, s, n, pending)
            pending = 0
            if found is not None:
                return found[0], self._install(s, c, found[0], cpu, found[1])
        slab, pending = yield from self._new_slab(task, s, n.node, pending)
        return slab, pending + self._install(s, c, slab, cpu, slab.objects)

    def _install(self, s: KmemCache, c: KmemCacheCpu, slab: Slab, cpu: int, got: int) -> int:
        """``retry_load_slab``: the new CPU slab. The kernel flushes a CPU slab that
        appeared meanwhile (another task on this CPU); here a task keeps its CPU
        through ``___slab_alloc`` (it spins, never sleeps), so none can."""
        if c.slab is not None:
            raise RuntimeError(f"{s.name}: CPU {cpu} got a slab during ___slab_alloc (deactivate_slab not modelled)")
        c.slab = slab
        return self._load(s, c, slab, cpu, got, 0.0)

    def _load(self, s: KmemCache, c: KmemCacheCpu, slab: Slab, cpu: int, got: int, extra: float) -> int:
        """``load_freelist``: the first object is returned, the rest become ``c->freelist``."""
        slab.where = ON_CPU
        c.freelist = got - 1
        c.fp_cpu = slab.freer
        if slab.freer != cpu:
            extra += self._xfer(slab.freer, cpu, modified=True)  # get_freepointer of the returned object
        return self.counters.busy(cpu, "___slab_alloc", int(extra))

    def _get_partial_node(
        self, task: Task, s: KmemCache, n: KmemCacheNode, pending: int,
    ) -> Generator[Any, Any, tuple[Slab, int] | None]:
        """``get_partial_node`` (v6.6) under ``n->list_lock``: ``acquire_slab`` of the first
        slab (its whole freelist) and of up to ``cpu_partial_slabs / 2 + 1`` more, which
        ``put_cpu_partial(s, slab, 0)`` puts on this CPU's partial list frozen. Returns
        the first slab and its objects, or None if the list was emptied meanwhile."""
        cpu = task.cpu
        if pending:
            yield pending
        yield n.list_lock.acquire(task)
        cs = 0.0
        first: Slab | None = None
        got = taken = partial_slabs = 0
        c = s.cpu[cpu]
        while n.partial:
            slab = n.partial[0]
            cs += self._remove_partial(n, slab, cpu) + self._touch(slab, cpu)
            slab.frozen = True
            taken += 1
            if first is None:
                first = slab
                got = slab.objects - slab.inuse
                slab.inuse = slab.objects
                self._stat(s, cpu, ALLOC_FROM_PARTIAL)
            else:
                c.partial.append(slab)  # put_cpu_partial(s, slab, 0): never drains
                slab.where = ON_CPU_PARTIAL
                self._stat(s, cpu, CPU_PARTIAL_NODE)
                partial_slabs += 1
            if partial_slabs > s.cpu_partial_slabs // 2:
                break
        yield self._busy(cpu, "get_partial_node", cs, taken)
        n.list_lock.release(task)
        return None if first is None else (first, got)

    def _new_slab(self, task: Task, s: KmemCache, node: int, pending: int) -> Generator[Any, Any, tuple[Slab, int]]:
        """``new_slab`` → ``allocate_slab`` (v6.6): ``alloc_slab_page`` of order
        ``oo_order(s->oo)``, a free pointer written into every object (each a line of
        the new slab: in the LLC if the pages were hot, from DRAM if not), then
        ``inc_slabs_node`` (an atomic on the node's first line)."""
        cpu = task.cpu
        pa = self.pa
        pfn, pending = yield from pa.alloc_pages_pfn(task, node, s.order, MIGRATE_UNMOVABLE, pending)
        hot = pa.last_alloc_hot
        z = pa.zone_of(pfn)
        slab = Slab(s, pfn, z, cpu)
        s.slabs[pfn] = slab
        self._stat(s, cpu, ALLOC_SLAB)
        lines = s.objects
        lat = self._llc_ns if hot else self._node_ns[z.node]
        p = self.counters.perf[cpu]
        p[CACHE_REFERENCES] += lines
        if not hot:
            p[CACHE_MISSES] += lines
        n = s.node[z.node]
        n.nr_slabs += 1
        mem = lines * lat / FILL_BUFFERS + pa.touch_struct_page(z, pfn, cpu)
        mem += n.line.rmw(cpu, self.system.engine.now)
        pending += self._busy(cpu, "allocate_slab", mem)
        pending += self._busy(cpu, "allocate_slab/object", 0.0, lines)
        return slab, pending

    # -- freeing ---------------------------------------------------------------------------
    def slab_free(self, task: Task, slab: Slab, pending: int = 0) -> Generator[Any, Any, int]:
        """``kmem_cache_free`` / ``kfree`` → ``slab_free`` → ``do_slab_free`` (v6.6):
        onto this CPU's lockless freelist if the object's slab is this CPU's slab,
        else ``__slab_free``. Returns busy ns not yet yielded."""
        s = slab.cache
        cpu = task.cpu
        c = s.cpu[cpu]
        if slab is c.slab:
            c.freelist += 1
            self._stat(s, cpu, FREE_FASTPATH)
            return pending + self._busy(cpu, "slab_free")
        return (yield from self._slab_free_slow(task, s, slab, pending))

    def _slab_free_slow(self, task: Task, s: KmemCache, slab: Slab, pending: int) -> Generator[Any, Any, int]:
        """``__slab_free`` (v6.6)."""
        cpu = task.cpu
        if slab.where == FREED or slab.inuse <= 0:
            raise RuntimeError(f"{s.name}: double free into {slab!r}")
        self._stat(s, cpu, FREE_SLOWPATH)
        pending += self._busy(cpu, "__slab_free", self._touch(slab, cpu))
        # The last free into a slab on the node list takes n->list_lock before its cmpxchg,
        # then reads the slab again (the kernel's cmpxchg retry loop).
        n: KmemCacheNode | None = None
        while True:
            prior = slab.inuse < slab.objects  # the slab's freelist is not empty
            needs_lock = not slab.frozen and prior and slab.inuse == 1
            if not needs_lock or n is not None:
                break
            n = s.node[slab.node]
            if pending:
                yield pending
                pending = 0
            yield n.list_lock.acquire(task)
        if n is not None and not needs_lock:
            n.list_lock.release(task)
            n = None
        slab.inuse -= 1
        slab.freer = cpu
        if n is None:
            if slab.frozen:
                self._stat(s, cpu, FREE_FROZEN)  # a CPU slab or on a CPU partial list: no list work
            elif not prior:  # full, on no list: freeze it onto this CPU's partial list
                slab.frozen = True
                pending = yield from self.put_cpu_partial(task, s, slab, pending)
                self._stat(s, cpu, CPU_PARTIAL_FREE)
            return pending  # else: objects left, it stays on the node list
        if n.nr_partial >= s.min_partial:  # slab_empty
            cs = self._remove_partial(n, slab, cpu)
            yield self.counters.busy(cpu, "__slab_free", int(cs))
            n.list_lock.release(task)
            return (yield from self.discard_slab(task, s, slab, pending))
        n.list_lock.release(task)  # an empty slab stays: the node keeps min_partial
        return pending

    def put_cpu_partial(self, task: Task, s: KmemCache, slab: Slab, pending: int) -> Generator[Any, Any, int]:
        """``put_cpu_partial(s, slab, 1)`` (v6.6): push onto this CPU's partial list;
        if it already holds ``cpu_partial_slabs``, that whole list goes to the
        node first (``__unfreeze_partials``, outside the local lock)."""
        cpu = task.cpu
        c = s.cpu[cpu]
        pending += self._busy(cpu, "put_cpu_partial")
        drain: list[Slab] = []
        if c.partial and len(c.partial) >= s.cpu_partial_slabs:
            drain, c.partial = c.partial, []
        c.partial.append(slab)
        slab.where = ON_CPU_PARTIAL
        if drain:
            drain.reverse()  # the chain from its head (the newest)
            pending = yield from self._unfreeze_partials(task, s, drain, pending)
            self._stat(s, cpu, CPU_PARTIAL_DRAIN)
        return pending

    def _unfreeze_partials(self, task: Task, s: KmemCache, slabs: list[Slab], pending: int) -> Generator[Any, Any, int]:
        """``__unfreeze_partials`` (v6.6): unfreeze each slab under its node's
        ``list_lock``; an empty one is discarded (after the lock) if the node
        already keeps ``min_partial`` slabs, the others go to the list's tail."""
        cpu = task.cpu
        n: KmemCacheNode | None = None
        cs = 0.0
        count = 0
        discard: list[Slab] = []
        for slab in slabs:
            n2 = s.node[slab.node]
            if n2 is not n:
                if n is not None:
                    yield self._busy(cpu, "__unfreeze_partials", cs, count)
                    n.list_lock.release(task)
                    cs, count = 0.0, 0
                n = n2
                if pending:
                    yield pending
                    pending = 0
                yield n.list_lock.acquire(task)
            cs += self._touch(slab, cpu)
            count += 1
            slab.frozen = False
            if not slab.inuse and n.nr_partial >= s.min_partial:
                discard.append(slab)
                slab.where = FULL
            else:
                cs += self._add_partial(n, slab, cpu)
                self._stat(s, cpu, FREE_ADD_PARTIAL)
        if n is not None:
            yield self._busy(cpu, "__unfreeze_partials", cs, count)
            n.list_lock.release(task)
        for slab in discard:
            pending = yield from self.discard_slab(task, s, slab, pending)
        return pending

    def discard_slab(self, task: Task, s: KmemCache, slab: Slab, pending: int) -> Generator[Any, Any, int]:
        """``discard_slab``: ``dec_slabs_node`` (an atomic on the node's first line),
        ``free_slab`` → ``__free_slab`` → ``__free_pages(order)``."""
        cpu = task.cpu
        n = s.node[slab.node]
        n.nr_slabs -= 1
        slab.where = FREED
        del s.slabs[slab.pfn]
        self._stat(s, cpu, FREE_SLAB)
        pending += self._busy(cpu, "discard_slab", n.line.rmw(cpu, self.system.engine.now))
        return (yield from self.pa.free_pages(task, slab.pfn, s.order, pending))

    # -- accounting --------------------------------------------------------------------------
    def slab_pages(self) -> int:
        """Pages held by all slabs (for page conservation)."""
        return sum(n.nr_slabs << s.order for s in self.caches.values() for n in s.node)

    def objects_in_use(self, s: KmemCache) -> int:
        """Objects allocated and not freed: ``inuse`` of every live slab minus the CPUs' lockless freelists."""
        return sum(sl.inuse for sl in s.slabs.values()) - sum(c.freelist for c in s.cpu if c.slab is not None)
