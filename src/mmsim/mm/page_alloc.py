"""The page allocator (mm/page_alloc.c): buddy free areas, ``zone->lock``,
per-CPU page lists (PCP).

**Zones.** One ZONE_NORMAL per NUMA node. Its free pages are real buddy
blocks: ``free_area[order][migratetype]`` is an insertion-ordered dict
``pfn -> stamp`` (the last entry is the list head: ``__free_one_page`` and
``expand`` add there, ``__rmqueue_smallest`` takes from there), so split and
merge are exact, by pfn. Never-split MAX_ORDER blocks are one range
(``pristine``) rather than dict entries: host memory grows with the
fragments in use, not with simulated memory. Each pageblock (order 9) has a
migratetype (default MOVABLE, the others in a dict); ``__rmqueue_fallback``
steals blocks from other types as ``steal_suitable_fallback`` does.
Watermarks follow ``__setup_per_zone_wmarks`` (``min_free_kbytes`` from
``calculate_min_free_kbytes``, ``watermark_scale_factor`` 10).

**PCP.** Per CPU and zone: lists per (order, migratetype) — order 0 only
before 44042b449872 (v5.13), orders 0..3 and the THP order after — with
``count``, ``batch`` (``zone_batchsize``), ``high`` (``6 * batch`` before
b92ca18e8ca5, ``zone_highsize`` after), ``free_factor`` (3b12e7e97938) and the
``free_high`` rule of f26b3fa04611, optionally with ``PCPF_PREV_FREE_HIGH_ORDER``
(ca71fe1ad922) and ``PCPF_FREE_HIGH_BATCH`` (362d37a106dd: the posted v1 rule,
per-CPU data cache share > 4 × batch, or the merged rule, LLC slice > 3 × batch).

**Costs.** Instructions of each function body come from :mod:`mmsim.mm.costs`.
On top, every cache line the code writes costs the transfer from the CPU that
wrote it last (:meth:`Machine.xfer_ns`): the zone's ``free_area`` list heads
(one owner per order) and the ``struct page`` of each block touched (its own,
its buddy's when merging, a list neighbour's). The owners of recently written
``struct page`` lines are remembered in a bounded table per zone; a line not
in it counts as last written by the zone's home CPU. This is what makes a
zone lock hand-off expensive — the data it protects moves with it — and what
a long batch under one hold amortises.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Generator
from math import isqrt
from typing import Any

from mmsim.engine.core import Task
from mmsim.kernels.catalog import size_bytes
from mmsim.locks.spinlock import Spinlock
from mmsim.metrics.counters import Counters
from mmsim.metrics.events import VmEvent
from mmsim.mm.costs import path

PAGE_SHIFT = 12
PAGE_SIZE = 4096
MAX_ORDER = 10  # v6.4+ spelling (inclusive): the largest block is order 10 (4 MiB) on x86-64
NR_ORDERS = MAX_ORDER + 1
PAGEBLOCK_ORDER = 9  # HUGETLB_PAGE_ORDER on x86-64
PAGE_ALLOC_COSTLY_ORDER = 3
HPAGE_PMD_ORDER = 9

# enum migratetype (include/linux/mmzone.h)
MIGRATE_UNMOVABLE, MIGRATE_MOVABLE, MIGRATE_RECLAIMABLE = 0, 1, 2
MIGRATE_PCPTYPES = 3
# mm/page_alloc.c fallbacks[]
FALLBACKS = ((MIGRATE_RECLAIMABLE, MIGRATE_MOVABLE), (MIGRATE_RECLAIMABLE, MIGRATE_UNMOVABLE),
             (MIGRATE_UNMOVABLE, MIGRATE_MOVABLE))
NR_LOWORDER_PCP_LISTS = MIGRATE_PCPTYPES * (PAGE_ALLOC_COSTLY_ORDER + 1)

# per_cpu_pages.flags
PCPF_PREV_FREE_HIGH_ORDER = 0x01
PCPF_FREE_HIGH_BATCH = 0x02

COLD = -1  # stamp of memory never written since boot

PGALLOC = int(VmEvent.PGALLOC_NORMAL)
PGFREE = int(VmEvent.PGFREE)
PCP_REFILL = int(VmEvent.PCP_REFILL)
PCP_DRAIN = int(VmEvent.PCP_DRAIN)
PCP_DRAIN_PAGES = int(VmEvent.PCP_DRAIN_PAGES)
PCP_FREE_HIGH = int(VmEvent.PCP_FREE_HIGH)


def zone_batchsize(managed_pages: int, cap_bytes: int = 512 * 1024) -> int:
    """mm/page_alloc.c ``zone_batchsize()`` (CONFIG_MMU): about a thousandth of
    the zone, at most ``cap_bytes`` (512 KiB until d8a759b57035, 1 MiB after),
    /4, rounded down to 2^n - 1."""
    batch = min(managed_pages >> 10, cap_bytes // PAGE_SIZE)
    batch //= 4
    if batch < 1:
        batch = 1
    b = batch + batch // 2
    return (1 << (b.bit_length() - 1)) - 1


def min_free_kbytes(lowmem_pages: int) -> int:
    """mm/page_alloc.c ``calculate_min_free_kbytes``: int_sqrt(lowmem_kbytes * 16), clamped."""
    return min(max(isqrt(lowmem_pages * (PAGE_SIZE >> 10) * 16), 128), 262144)


def zone_highsize(low_wmark: int, managed_pages: int, batch: int, node_cpus: int, fraction: int) -> int:
    """mm/page_alloc.c ``zone_highsize()`` (v5.14+): the low watermark (or
    managed / ``percpu_pagelist_high_fraction``) split over the node's CPUs,
    at least 4 × batch."""
    total = managed_pages // fraction if fraction else low_wmark
    high = total // (node_cpus or 1)
    return max(high, batch << 2)


def pcp_data_cache_bytes(machine: Any, rule: str) -> int:
    """What ``PCPF_FREE_HIGH_BATCH`` compares with 3 or 4 × batch.

    * ``v1`` (the posted series, 2023-09-20, "cacheinfo: calculate per-CPU data
      cache size"): ``size_data`` = the sum over data and unified cache levels
      of size / CPUs sharing it.
    * ``llc`` (merged 94a3bfe4073c, "cacheinfo: calculate size of per-CPU data
      cache slice"): ``per_cpu_data_slice_size`` = LLC size / CPUs sharing it.
    """
    if rule == "v1":
        return sum(c.size_kib * 1024 // c.shared_by for c in machine.caches)
    l3 = machine.cache("L3")
    return int(l3.size_kib * 1024 // l3.shared_by)


class Zone:
    __slots__ = (
        "node", "index", "start_pfn", "end_pfn", "managed_pages", "free_pages", "lock", "home",
        "free_area", "pristine", "pristine_end", "pb_mt", "area_owner", "page_owner", "owner_cap",
        "wmark_min", "wmark_low", "wmark_high", "batch", "high",
    )

    def __init__(self, node: int, start_pfn: int, pages: int, lock: Spinlock, home: int, owner_cap: int) -> None:
        self.node = node
        self.index = node
        self.start_pfn = start_pfn
        self.end_pfn = start_pfn + pages
        self.managed_pages = pages
        self.free_pages = pages
        self.lock = lock
        self.home = home
        self.free_area: list[list[dict[int, int]]] = [[{}, {}, {}] for _ in range(NR_ORDERS)]
        top = 1 << MAX_ORDER
        self.pristine = start_pfn
        self.pristine_end = start_pfn + (pages // top) * top
        # memblock_free_all: the tail that is not a whole MAX_ORDER block, as aligned smaller blocks.
        pfn = self.pristine_end
        for order in range(MAX_ORDER - 1, -1, -1):
            if pfn + (1 << order) <= self.end_pfn:
                self.free_area[order][MIGRATE_MOVABLE][pfn] = COLD
                pfn += 1 << order
        self.pb_mt: dict[int, int] = {}  # pageblock index -> migratetype, if not MOVABLE
        self.area_owner = [home] * NR_ORDERS
        self.page_owner: dict[int, int] = {}
        self.owner_cap = owner_cap
        self.wmark_min = self.wmark_low = self.wmark_high = 0
        self.batch = self.high = 1

    def pageblock_mt(self, pfn: int) -> int:
        return self.pb_mt.get(pfn >> PAGEBLOCK_ORDER, MIGRATE_MOVABLE)

    def nr_free(self, order: int) -> int:
        """``free_area[order].nr_free`` (blocks)."""
        n = sum(len(d) for d in self.free_area[order])
        if order == MAX_ORDER:
            n += (self.pristine_end - self.pristine) >> MAX_ORDER
        return n


class Pcp:
    """``struct per_cpu_pages`` of one CPU and zone. A list's head is its right end."""

    __slots__ = ("lists", "count", "high", "batch", "free_factor", "flags")

    def __init__(self, nlists: int, high: int, batch: int, flags: int) -> None:
        self.lists: list[deque[tuple[int, int]]] = [deque() for _ in range(nlists)]
        self.count = 0
        self.high = high
        self.batch = batch
        self.free_factor = 0
        self.flags = flags


class PcpRow(dict[int, Pcp]):
    """One CPU's PCPs by zone index, each made on first access."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[int], Pcp]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, zi: int) -> Pcp:
        p = self[zi] = self._make(zi)
        return p


class PageAllocator:
    """Zones, PCPs and the zonelist order of every node."""

    def __init__(self, system: Any) -> None:
        m = system.machine
        self.system = system
        self.counters: Counters = system.counters
        self._freq = m.freq_ghz
        self._xfer = m.xfer_ns
        self.cache = system.cache  # machine/hierarchy.py: is a reallocated frame still cached?
        pol = system.policy
        self.high_orders = pol("pcp_orders") == "0-3+thp"
        self.free_factor_on = pol("pcp_free_factor") == "on"
        self.free_high_rule = pol("pcp_free_high")
        self.nlists = NR_LOWORDER_PCP_LISTS + 1 if self.high_orders else MIGRATE_PCPTYPES
        cap = size_bytes(pol("pcp_batch_cap"))
        batch_set = pol("pcp_batch")  # "auto", or pages: pcp->batch as set by hand
        # struct page lines whose last writer is remembered: as many blocks as the LLC holds pages.
        owner_cap = m.cache("L3").size_kib * 1024 // PAGE_SIZE
        self.zones: list[Zone] = []
        start = 0
        for n in m.nodes:
            pages = int(n.memory_gib * (1 << 30)) // PAGE_SIZE
            home = self._node_cpu(m, n.id)
            lock = Spinlock(system.locks, "&zone->lock", system.spin_kind_for("zone_lock"), home_cpu=home)
            self.zones.append(Zone(n.id, start, pages, lock, home, owner_cap))
            start += -(-pages >> MAX_ORDER) << MAX_ORDER
        self._setup_wmarks()
        for z in self.zones:
            z.batch = max(1, zone_batchsize(z.managed_pages, cap)) if batch_set == "auto" else int(batch_set)
            if pol("pcp_high") == "zone_highsize":
                z.high = zone_highsize(z.wmark_low, z.managed_pages, z.batch, len(m.node_cpus(z.node)) or m.ncpus,
                                       int(pol("percpu_pagelist_high_fraction")))
            else:
                z.high = 6 * z.batch  # pageset_set_batch (v3.x .. v5.13)
        rule = pol("pcp_free_high_batch")
        cache_pages = pcp_data_cache_bytes(m, rule) >> PAGE_SHIFT if rule != "off" else 0
        mult = 4 if rule == "v1" else 3
        zones = self.zones
        nlists = self.nlists

        def make(zi: int) -> Pcp:
            z = zones[zi]
            return Pcp(nlists, z.high, z.batch,
                       PCPF_FREE_HIGH_BATCH if rule != "off" and cache_pages > mult * z.batch else 0)

        # pcps[cpu][zone index]; built on first use: most CPU x zone pairs never are.
        self.pcps = [PcpRow(make) for _ in range(m.ncpus)]
        nn = len(m.nodes)
        self.zonelist = [sorted(range(nn), key=lambda j: (m.distances[i][j], j)) for i in range(nn)]
        self._zone_starts = [z.start_pfn for z in self.zones]
        self._pcp_path = path("rmqueue_pcplist", self._freq)
        self._cs = 0.0  # line-transfer ns accumulated inside the current critical section
        self.last_alloc_hot = False  # was the block just allocated still cached (CacheHierarchy.on_alloc)?
        self.last_pfn = -1  # the block just allocated (the mm code binds its mapping to it)
        # owner -> [pfn << 4 | order]: blocks a caller will free by owner (an unmap); kept only
        # when a workload frees what it faulted in (track_owners), so other runs pay nothing.
        self.owned: dict[Any, list[int]] = {}
        self.track_owners = False

    # -- set-up ---------------------------------------------------------------
    @staticmethod
    def _node_cpu(m: Any, node: int) -> int:
        cpus = [c for c in range(m.ncores) if m.cpu_node(c) == node]
        return cpus[0] if cpus else 0

    def _setup_wmarks(self) -> None:
        """``__setup_per_zone_wmarks``: min split by managed pages, low/high
        apart by max(min/4, managed × watermark_scale_factor (10) / 10000)."""
        total = sum(z.managed_pages for z in self.zones)
        pages_min = min_free_kbytes(total) >> (PAGE_SHIFT - 10)
        for z in self.zones:
            z.wmark_min = pages_min * z.managed_pages // total
            tmp = max(z.wmark_min >> 2, z.managed_pages * 10 // 10000)
            z.wmark_low = z.wmark_min + tmp
            z.wmark_high = z.wmark_low + tmp

    # -- helpers ----------------------------------------------------------------
    def zone_of(self, pfn: int) -> Zone:
        z = self.zones[bisect_right(self._zone_starts, pfn) - 1]
        if not z.start_pfn <= pfn < z.end_pfn:
            raise ValueError(f"pfn {pfn} is in no zone")
        return z

    def page_node(self, pfn: int) -> int:
        return self.zone_of(pfn).node

    def pindex(self, order: int, mt: int) -> int:
        """``order_to_pindex``."""
        if order > PAGE_ALLOC_COSTLY_ORDER:
            return NR_LOWORDER_PCP_LISTS
        return MIGRATE_PCPTYPES * order + mt

    def pcp_allowed_order(self, order: int) -> bool:
        if order == 0:
            return True
        return self.high_orders and (order <= PAGE_ALLOC_COSTLY_ORDER or order == HPAGE_PMD_ORDER)

    def _pick(self, node: int, order: int) -> Zone:
        """``get_page_from_freelist`` over the zonelist: the low watermark first
        (``zone_watermark_fast``), then the min watermark (the slow path)."""
        unusable = (1 << order) - 1
        zl = self.zonelist[node]
        for n in zl:
            z = self.zones[n]
            if z.free_pages - unusable > z.wmark_low:
                return z
        for n in zl:
            z = self.zones[n]
            if z.free_pages - unusable > z.wmark_min and z.free_pages > unusable:
                return z
        raise MemoryError(f"out of memory: no node has {1 << order} free pages above its min watermark")

    def _touch_page(self, z: Zone, pfn: int, cpu: int) -> float:
        """Write the ``struct page`` line of ``pfn``: the transfer from its last writer."""
        po = z.page_owner
        own = po.pop(pfn, -1)
        if own < 0:
            own = z.home
            if len(po) >= z.owner_cap:
                del po[next(iter(po))]
        po[pfn] = cpu
        return self._xfer(own, cpu, modified=True) if own != cpu else 0.0

    def touch_struct_page(self, z: Zone, pfn: int, cpu: int) -> float:
        """A write to the ``struct page`` line of ``pfn`` by a caller outside this module
        (SLUB's ``struct slab``): the transfer from its last writer, in ns."""
        return self._touch_page(z, pfn, cpu)

    def _touch_area(self, z: Zone, order: int, cpu: int) -> None:
        """A list operation on ``free_area[order]``: its head line and a neighbour's struct page."""
        own = z.area_owner[order]
        if own != cpu:
            z.area_owner[order] = cpu
            self._cs += 2 * self._xfer(own, cpu, modified=True)

    # -- the buddy lists (caller holds zone->lock) ----------------------------------
    def _rmqueue_smallest(self, z: Zone, cpu: int, order: int, mt: int) -> tuple[int, int] | None:
        """``__rmqueue_smallest`` + ``expand``: the first free block of ``mt`` at
        ``order`` or above, split down; the upper halves go back to the lists."""
        fa = z.free_area
        for o in range(order, NR_ORDERS):
            area = fa[o][mt]
            if area:
                pfn, stamp = area.popitem()
            elif o == MAX_ORDER and z.pristine < z.pristine_end and mt == MIGRATE_MOVABLE \
                    and z.pageblock_mt(z.pristine) == MIGRATE_MOVABLE:
                pfn, stamp = z.pristine, COLD
                z.pristine += 1 << MAX_ORDER
            else:
                continue
            self._touch_area(z, o, cpu)
            self._cs += self._touch_page(z, pfn, cpu)
            while o > order:
                o -= 1
                half = pfn + (1 << o)
                fa[o][mt][half] = stamp
                self._touch_area(z, o, cpu)
                self._cs += self._touch_page(z, half, cpu)
            z.free_pages -= 1 << order
            return pfn, stamp
        return None

    def _rmqueue(self, z: Zone, cpu: int, order: int, mt: int) -> tuple[int, int] | None:
        """``__rmqueue``: the requested type, else steal from a fallback type."""
        got = self._rmqueue_smallest(z, cpu, order, mt)
        if got is None and self._rmqueue_fallback(z, order, mt):
            got = self._rmqueue_smallest(z, cpu, order, mt)
        return got

    def _find_fallback(self, z: Zone, order: int, start_mt: int) -> int:
        for fmt in FALLBACKS[start_mt]:
            if z.free_area[order][fmt] or (order == MAX_ORDER and fmt == MIGRATE_MOVABLE
                                           and z.pristine < z.pristine_end):
                return fmt
        return -1

    def _rmqueue_fallback(self, z: Zone, order: int, start_mt: int) -> bool:
        """``__rmqueue_fallback`` + ``steal_suitable_fallback`` (v6.6): the largest
        fallback block; for a MOVABLE request that could not steal its pageblock,
        the smallest instead. A block of pageblock order or more changes its
        pageblocks' type; a smaller one moves its pageblock's free pages
        (``move_freepages_block``) and takes the pageblock if that is half of it."""

        def can_steal(cur: int) -> bool:  # can_steal_fallback
            return cur >= PAGEBLOCK_ORDER // 2 or start_mt != MIGRATE_MOVABLE

        found = -1
        cur = MAX_ORDER
        for cur in range(MAX_ORDER, order - 1, -1):
            found = self._find_fallback(z, cur, start_mt)
            if found >= 0:
                break
        if found < 0:
            return False
        if not can_steal(cur) and cur > order:  # find_smallest
            for cur in range(order, NR_ORDERS):
                found = self._find_fallback(z, cur, start_mt)
                if found >= 0:
                    break
        area = z.free_area[cur][found]
        if area:
            pfn = next(reversed(area))
        else:
            pfn = z.pristine
            z.pristine += 1 << MAX_ORDER
            area[pfn] = COLD
        if cur >= PAGEBLOCK_ORDER:
            for pb in range(pfn >> PAGEBLOCK_ORDER, (pfn + (1 << cur)) >> PAGEBLOCK_ORDER):  # change_pageblock_range
                self._set_pb_mt(z, pb, start_mt)
        elif can_steal(cur):
            moved = self._move_freepages_block(z, pfn, start_mt)
            if moved >= 1 << (PAGEBLOCK_ORDER - 1):
                self._set_pb_mt(z, pfn >> PAGEBLOCK_ORDER, start_mt)
            return True
        z.free_area[cur][start_mt][pfn] = area.pop(pfn)  # move_to_free_list (single_page)
        return True

    @staticmethod
    def _set_pb_mt(z: Zone, pb: int, mt: int) -> None:
        if mt == MIGRATE_MOVABLE:
            z.pb_mt.pop(pb, None)
        else:
            z.pb_mt[pb] = mt

    @staticmethod
    def _move_freepages_block(z: Zone, pfn: int, mt: int) -> int:
        """``move_freepages_block``: every free block inside ``pfn``'s pageblock
        goes to ``mt``'s lists; returns the pages moved (alike pages are not
        tracked: every allocated page counts as of another type)."""
        start = pfn >> PAGEBLOCK_ORDER << PAGEBLOCK_ORDER
        moved = 0
        for o in range(PAGEBLOCK_ORDER):
            lists = z.free_area[o]
            for p in range(start, start + (1 << PAGEBLOCK_ORDER), 1 << o):
                for m in range(MIGRATE_PCPTYPES):
                    if m != mt and p in lists[m]:
                        lists[mt][p] = lists[m].pop(p)
                        moved += 1 << o
        return moved

    def _free_one_page(self, z: Zone, cpu: int, pfn: int, order: int, stamp: int) -> int:
        """``__free_one_page``: merge with free buddies up to MAX_ORDER; returns
        the merge levels (for the path cost). The buddy's struct page is read
        (``page_is_buddy``) at every level."""
        mt = z.pageblock_mt(pfn)
        fa = z.free_area
        levels = 0
        z.free_pages += 1 << order
        while order < MAX_ORDER:
            buddy = pfn ^ (1 << order)
            self._cs += self._touch_page(z, buddy, cpu)
            lists = fa[order]
            for bl in lists:
                if buddy in bl:
                    break
            else:
                break
            bstamp = bl.pop(buddy)
            if bstamp > stamp:
                stamp = bstamp
            self._touch_area(z, order, cpu)
            pfn &= ~(1 << order)
            order += 1
            levels += 1
        fa[order][mt][pfn] = stamp
        self._touch_area(z, order, cpu)
        return levels

    def _charge_cs(self, cpu: int, func: str, ns: int, ins: int) -> int:
        """Charge a critical section: path instructions + the line transfers it made."""
        extra = int(self._cs)
        self._cs = 0.0
        return self.counters.busy(cpu, func, ns + extra, ins)

    # -- allocation --------------------------------------------------------------------
    def alloc_pages_pfn(
        self, task: Task, node: int, order: int, mt: int = MIGRATE_MOVABLE, pending: int = 0,
    ) -> Generator[Any, Any, tuple[int, int]]:
        """``__alloc_pages`` → ``get_page_from_freelist`` → ``rmqueue``. Returns
        ``(pfn, pending_ns)``: busy time charged but not yet yielded (the PCP
        fast path yields nothing, so a caller can fold it into its next event).
        ``pending`` is the caller's own not-yet-yielded time."""
        cpu = task.cpu
        c = self.counters
        z = self._pick(node, order)
        c.vm[cpu][PGALLOC] += 1 << order
        if self.pcp_allowed_order(order):
            ns, ins = self._pcp_path
            pending += c.busy(cpu, "get_page_from_freelist", ns, ins)
            pcp = self.pcps[cpu][z.index]
            if self.free_factor_on:
                pcp.free_factor >>= 1
            lst = pcp.lists[self.pindex(order, mt)]
            if not lst:
                yield pending
                pending = 0
                yield from self._rmqueue_bulk(task, z, pcp, lst, order, mt)
            pfn, _ = lst.pop()
            pcp.count -= 1 << order
            extra = int(self._touch_page(z, pfn, cpu))  # prep_new_page writes the struct page
            if extra:
                pending += c.busy(cpu, "get_page_from_freelist", extra)
        else:
            if pending:
                yield pending
                pending = 0
            yield z.lock.acquire(task)
            got = self._rmqueue(z, cpu, order, mt)
            ns, ins = path("__rmqueue", self._freq)
            yield self._charge_cs(cpu, "__rmqueue", ns, ins)
            z.lock.release(task)
            if got is None:
                raise MemoryError(f"zone {z.node}: no free block of order {order}")
            pfn, _ = got
        self.last_pfn = pfn
        self.last_alloc_hot = self.cache.on_alloc(cpu, pfn, order, self.system.engine.now) >= 0.5
        return pfn, pending

    def _rmqueue_bulk(
        self, task: Task, z: Zone, pcp: Pcp, lst: deque[tuple[int, int]], order: int, mt: int,
    ) -> Generator[Any, Any, None]:
        """``rmqueue_bulk`` under ``zone->lock``: ``batch >> order`` (at least 2) blocks."""
        cpu = task.cpu
        batch = pcp.batch
        if batch > 1 and order:
            batch = max(batch >> order, 2)
        yield z.lock.acquire(task)
        n = 0
        while n < batch:
            got = self._rmqueue(z, cpu, order, mt)
            if got is None:
                break
            lst.appendleft(got)  # list_add_tail
            n += 1
        ns, ins = path("__rmqueue", self._freq)
        yield self._charge_cs(cpu, "rmqueue_bulk", ns * n, ins * n)
        z.lock.release(task)
        pcp.count += n << order
        self.counters.vm[cpu][PCP_REFILL] += 1
        if not lst:
            raise MemoryError(f"zone {z.node}: rmqueue_bulk found no order-{order} block")

    def alloc_pages(
        self, task: Task, node: int, order: int, mt: int = MIGRATE_MOVABLE, owner: Any = None,
    ) -> Generator[Any, Any, int]:
        """``alloc_pages_node(node, gfp, order)``; returns the node the pages came
        from. ``owner``: remember the block under that key for :meth:`free_owned`."""
        pfn, pending = yield from self.alloc_pages_pfn(task, node, order, mt)
        if pending:
            yield pending
        if owner is not None and self.track_owners:
            self.owned.setdefault(owner, []).append(pfn << 4 | order)
        return self.page_node(pfn)

    def pcp_alloc_fast(self, task: Task, node: int, owner: Any = None) -> tuple[int, int] | None:
        """Order-0 MOVABLE allocation served from this CPU's PCP without any lock:
        ``(node, ns)`` charged but not yielded, or None if a refill is needed.
        (The hot path of every 4 KiB fault: kept lean.)"""
        z = self.zones[node]
        if z.free_pages <= z.wmark_low:
            z = self._pick(node, 0)
        cpu = task.cpu
        pcp = self.pcps[cpu][z.index]
        lst = pcp.lists[MIGRATE_MOVABLE]
        if not lst:
            return None
        if self.free_factor_on:
            pcp.free_factor >>= 1
        pfn, _ = lst.pop()
        pcp.count -= 1
        self.counters.vm[cpu][PGALLOC] += 1
        self.last_pfn = pfn
        self.last_alloc_hot = self.cache.on_alloc(cpu, pfn, 0, self.system.engine.now) >= 0.5
        if owner is not None and self.track_owners:
            self.owned.setdefault(owner, []).append(pfn << 4)
        ns, ins = self._pcp_path
        ns += int(self._touch_page(z, pfn, cpu))
        return z.node, self.counters.busy(cpu, "get_page_from_freelist", ns, ins)

    # -- freeing ------------------------------------------------------------------------
    def free_pages(self, task: Task, pfn: int, order: int, pending: int = 0) -> Generator[Any, Any, int]:
        """``__free_pages`` → ``free_unref_page`` (PCP orders) or ``free_one_page``.
        Returns the busy ns charged but not yielded (see :meth:`alloc_pages_pfn`)."""
        cpu = task.cpu
        c = self.counters
        z = self.zone_of(pfn)
        stamp = 0  # free-list stamps are unused: the cache hierarchy keeps a frame's state
        self.cache.on_free(cpu, pfn, order)
        extra = self._touch_page(z, pfn, cpu)  # free_pages_prepare / put_page on the struct page
        if not self.pcp_allowed_order(order):
            c.vm[cpu][PGFREE] += 1 << order
            if pending:
                yield pending
            yield z.lock.acquire(task)
            levels = self._free_one_page(z, cpu, pfn, order, stamp)
            ns, ins = self._free_path(1, levels)
            yield self._charge_cs(cpu, "free_one_page", ns + int(extra), ins)
            z.lock.release(task)
            return 0
        ns, ins = path("free_unref_page", self._freq)
        pending += c.busy(cpu, "free_unref_page", ns + int(extra), ins)
        pcp = self.pcps[cpu][z.index]
        pindex = self.pindex(order, z.pageblock_mt(pfn) if order <= PAGE_ALLOC_COSTLY_ORDER else 0)
        n = self._free_unref_page_commit(cpu, pcp, pfn, stamp, order, pindex)
        if n:
            yield pending
            yield from self._free_pcppages_bulk(task, z, pcp, n, pindex)
            return 0
        return pending

    def _free_unref_page_commit(self, cpu: int, pcp: Pcp, pfn: int, stamp: int, order: int, pindex: int) -> int:
        """``free_unref_page_commit``: add to the PCP; returns how many pages to
        drain now (0: none). The free_high rule per the kernel's policies."""
        self.counters.vm[cpu][PGFREE] += 1 << order
        pcp.lists[pindex].append((pfn, stamp))
        pcp.count += 1 << order
        free_high = False
        rule = self.free_high_rule
        if rule != "off":
            if 0 < order <= PAGE_ALLOC_COSTLY_ORDER:
                if rule == "consecutive":
                    free_high = pcp.free_factor > 0 and bool(pcp.flags & PCPF_PREV_FREE_HIGH_ORDER)
                    pcp.flags |= PCPF_PREV_FREE_HIGH_ORDER
                else:
                    free_high = pcp.free_factor > 0
                if free_high and pcp.flags & PCPF_FREE_HIGH_BATCH:
                    free_high = pcp.count >= pcp.batch
            elif pcp.flags & PCPF_PREV_FREE_HIGH_ORDER:
                pcp.flags &= ~PCPF_PREV_FREE_HIGH_ORDER
        high = 0 if free_high else pcp.high  # nr_pcp_high (no reclaim is active)
        if pcp.count < high:
            return 0
        if free_high:
            self.counters.vm[cpu][PCP_FREE_HIGH] += 1
            return pcp.count
        return self._nr_pcp_free(pcp, high)

    def _nr_pcp_free(self, pcp: Pcp, high: int) -> int:
        """``nr_pcp_free``: batch doubled for every free-only drain (3b12e7e97938),
        between batch and high - batch; before it, free_hot_cold_page freed ``batch``."""
        batch = pcp.batch
        if not self.free_factor_on:
            return batch
        if high < batch:
            return 1
        lo, hi = batch, high - batch
        b = batch << pcp.free_factor
        if b < hi:
            pcp.free_factor += 1
        return min(max(b, lo), hi)

    def _free_pcppages_bulk(self, task: Task, z: Zone, pcp: Pcp, count: int, pindex: int) -> Generator[Any, Any, None]:
        """``free_pcppages_bulk`` under ``zone->lock``: round-robin over the lists,
        the requested one first, each emptied from its tail (oldest pages)."""
        cpu = task.cpu
        count = min(pcp.count, count)
        yield z.lock.acquire(task)
        lists = pcp.lists
        nl = len(lists)
        pindex -= 1
        blocks = pages = levels = 0
        while count > 0:
            while True:
                pindex = pindex + 1 if pindex + 1 < nl else 0
                lst = lists[pindex]
                if lst:
                    break
            order = pindex // MIGRATE_PCPTYPES if pindex < NR_LOWORDER_PCP_LISTS else HPAGE_PMD_ORDER
            nr = 1 << order
            while True:
                pfn, stamp = lst.popleft()
                count -= nr
                pcp.count -= nr
                pages += nr
                blocks += 1
                levels += self._free_one_page(z, cpu, pfn, order, stamp)
                if count <= 0 or not lst:
                    break
        ns, ins = self._free_path(blocks, levels)
        yield self._charge_cs(cpu, "free_pcppages_bulk", ns, ins)
        z.lock.release(task)
        v = self.counters.vm[cpu]
        v[PCP_DRAIN] += 1
        v[PCP_DRAIN_PAGES] += pages

    def _free_path(self, blocks: int, levels: int) -> tuple[int, int]:
        ns, ins = path("__free_one_page", self._freq)
        lns, lins = path("__free_one_page/merge", self._freq)
        return ns * blocks + lns * levels, ins * blocks + lins * levels

    def free_owned(self, task: Task, owner: Any, pending: int = 0) -> Generator[Any, Any, int]:
        """Free every block recorded under ``owner`` (``release_pages`` of an unmap)."""
        for code in self.owned.pop(owner, ()):
            pending = yield from self.free_pages(task, code >> 4, code & 15, pending)
        return pending

    # -- accounting ---------------------------------------------------------------------
    @property
    def pcp(self) -> list[list[int]]:
        """``pcp[cpu][node]``: pages on each CPU's PCP for each zone."""
        return [[row[z.index].count if z.index in row else 0 for z in self.zones] for row in self.pcps]

    def free_pages_count(self) -> int:
        """Free pages in the buddy lists plus those sitting on PCPs."""
        return sum(z.free_pages for z in self.zones) + sum(p.count for row in self.pcps for p in row.values())

    def buddy_free_pages(self, z: Zone) -> int:
        """Free pages counted from the lists themselves (a check on ``z.free_pages``)."""
        return sum(z.nr_free(o) << o for o in range(NR_ORDERS))
