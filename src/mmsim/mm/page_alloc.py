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
On top, every cache line the code touches costs the transfer from the CPU that
wrote it last (:meth:`Machine.xfer_ns`, HITM while dirty there, HIT once read
elsewhere): the ``zone->free_area`` lines each list operation touches, by the
v6.6 layout (``mm/buddy.py``: list head ``next``/``prev`` and ``nr_free``), the
NR_FREE_PAGES folds into ``zone->vm_stat`` / ``vm_zone_stat`` and,
one by one as v6.6 touches them, the ``struct page`` lines (issue 19): in
``free_pcppages_bulk`` the page (``get_pcppage_migratetype``, ``list_del``);
in ``__free_one_page`` each buddy tested (read), each buddy merged and its two
free-list neighbours (written), the order+1 buddy ``buddy_merge_likely`` reads
and the entry the block is inserted next to (head or tail); in
``__rmqueue_smallest``/``expand`` the block, its list successor, each split
half and the entry it goes next to. Outside the lock, ``free_pages_prepare``
and ``prep_compound_page`` write every tail page of a compound block, and
``zone_watermark_fast`` reads, without the lock, for an order > 0 request, ``zone->vm_stat``
and the ``free_area`` counts and list heads it scans (``BuddyLists._watermark_lines``,
session 11: docs/pcp-free-high.md). The
owners of recent lines are remembered in a bounded table per zone; a line not
in it is in memory. So a zone lock hand-off moves the data it protects, and a
long batch under one hold amortises it. A line this CPU touched last costs
the level its caches still hold it in, by its reuse distance in the CPU's
byte clocks (:mod:`mmsim.machine.hierarchy`): nothing in the L1d, else the
L2 / LLC latency or memory, with the L2 streamer covering a vmemmap 4 KiB
page of struct pages after two misses (``BuddyLists._own_ns``, session 10:
docs/validation-paths.md).
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
from mmsim.mm.buddy import (  # noqa: F401 (constants kept importable from here for callers and tests)
    COLD,
    FALLBACKS,
    MAX_ORDER,
    MIGRATE_MOVABLE,
    MIGRATE_PCPTYPES,
    MIGRATE_RECLAIMABLE,
    MIGRATE_UNMOVABLE,
    NR_ORDERS,
    PAGEBLOCK_ORDER,
    ZONE_FLAGS_LINE,
    BuddyLists,
    Zone,
)
from mmsim.mm.costs import path
from mmsim.mm.pcp import PCPF_FREE_HIGH_BATCH, Pcp, PcpRules

PAGE_SHIFT = 12
PAGE_SIZE = 4096
PAGE_ALLOC_COSTLY_ORDER = 3
HPAGE_PMD_ORDER = 9

NR_LOWORDER_PCP_LISTS = MIGRATE_PCPTYPES * (PAGE_ALLOC_COSTLY_ORDER + 1)



PGALLOC = int(VmEvent.PGALLOC_NORMAL)
PGFREE = int(VmEvent.PGFREE)
PCP_REFILL = int(VmEvent.PCP_REFILL)
PCP_DRAIN = int(VmEvent.PCP_DRAIN)
PCP_DRAIN_PAGES = int(VmEvent.PCP_DRAIN_PAGES)
PCP_FREE_HIGH = int(VmEvent.PCP_FREE_HIGH)
ZONE_ALLOC_PAGES = int(VmEvent.ZONE_ALLOC_PAGES)


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


def calculate_normal_threshold(managed_pages: int, online_cpus: int) -> int:
    """mm/vmstat.c ``calculate_normal_threshold`` (v6.6): the per-CPU ``stat_threshold`` of a zone,
    2 × fls(CPUs) × (1 + fls(memory in 128 MiB units)), at most 125."""
    mem = managed_pages >> (27 - PAGE_SHIFT)
    return min(125, 2 * online_cpus.bit_length() * (1 + mem.bit_length()))


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


class PcpRow(dict[int, Pcp]):
    """One CPU's PCPs by zone index, each made on first access."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[int], Pcp]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, zi: int) -> Pcp:
        p = self[zi] = self._make(zi)
        return p


class PageAllocator(BuddyLists):
    """Zones, PCPs and the zonelist order of every node; the buddy lists and line costs are
    :class:`mmsim.mm.buddy.BuddyLists`'."""

    def __init__(self, system: Any) -> None:
        m = system.machine
        self.system = system
        self.counters: Counters = system.counters
        self._freq = m.freq_ghz
        self._xfer: Callable[..., float] = m.xfer_ns
        self._ncpus = m.ncpus
        # transfer cost to each CPU from (last writer << 1 | dirty), built a row at a time on first use
        self._xrows: list[list[float] | None] = [None] * (2 * m.ncpus)
        self.cache = system.cache  # machine/hierarchy.py: is a reallocated frame still cached?
        # this CPU's own struct page / zone lines, by the level still holding them (BuddyLists._own_ns)
        self._l2c = self.cache.l2.of_cpu
        self._l3c = self.cache.llc.of_cpu
        self._engine = system.engine
        self._l1_bytes = float(m.cache("L1d").capacity_kib * 1024)
        self._lat2 = float(m.cache("L2").latency_ns)
        self._lat3 = float(m.cache("L3").latency_ns)
        self._mem_ns = m.mem_latency_ns
        self._probs1 = self.cache._probs1
        self._stream = {}
        pol = system.policy
        self.high_orders = pol("pcp_orders") == "0-3+thp"
        self.rules = PcpRules(pol)
        self.free_factor_on = self.rules.free_factor_on
        self.free_count_on = self.rules.free_count_on
        self.below_high_on = self.rules.below_high_on
        # rmqueue()'s test_bit(ZONE_BOOSTED_WATERMARK, &zone->flags) after a PCP-path allocation: which line
        # it loads (docs/pcp-free-high.md, session 28)
        self.flags_line = pol("zone_flags_line")
        self.flags_on_free = pol("zone_flags_free") == "on"  # nr_pcp_high()'s load of it on a free (v5.14)
        self.nlists = NR_LOWORDER_PCP_LISTS + 1 if self.high_orders else MIGRATE_PCPTYPES
        cap = size_bytes(pol("pcp_batch_cap"))
        batch_set = pol("pcp_batch")  # "auto", or pages: pcp->batch as set by hand
        # struct page lines whose last writer is remembered: as many blocks as the LLC holds pages.
        owner_cap = m.cache("L3").capacity_kib * 1024 // PAGE_SIZE
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
            if pol("pcp_high") == "2xbatch":
                z.high = 2 * z.batch  # 52166607ecc9's debug patches: "Set PCP high to be 2 * batch"
            elif pol("pcp_high") == "zone_highsize":
                z.high = zone_highsize(z.wmark_low, z.managed_pages, z.batch, len(m.node_cpus(z.node)) or m.ncpus,
                                       int(pol("percpu_pagelist_high_fraction")))
            else:
                z.high = 6 * z.batch  # pageset_set_batch (v3.x .. v5.13)
            z.high_max = z.high
            if self.rules.tuning != "off" and pol("pcp_high") == "zone_highsize" \
                    and int(pol("percpu_pagelist_high_fraction")) == 0:
                # 90b41691b988: high_max = zone_highsize at MIN_PERCPU_PAGELIST_HIGH_FRACTION (8)
                z.high_max = zone_highsize(z.wmark_low, z.managed_pages, z.batch,
                                           len(m.node_cpus(z.node)) or m.ncpus, 8)
            # the host's own sizes (validate's host policies: /proc/zoneinfo), where its watermarks are not ours
            if pol("pcp_high_min") != "auto":
                z.high = int(pol("pcp_high_min"))
                z.high_max = max(z.high_max, z.high)
            if pol("pcp_high_max") != "auto":
                z.high_max = max(int(pol("pcp_high_max")), z.high)
        rule = pol("pcp_free_high_batch")
        cache_pages = pcp_data_cache_bytes(m, rule) >> PAGE_SHIFT if rule != "off" else 0
        mult = 4 if rule == "v1" else 3
        zones = self.zones
        nlists = self.nlists

        def make(zi: int) -> Pcp:
            z = zones[zi]
            return Pcp(nlists, z.high, z.batch,
                       PCPF_FREE_HIGH_BATCH if rule != "off" and cache_pages > mult * z.batch else 0, z.high_max)

        # pcps[cpu][zone index]; built on first use: most CPU x zone pairs never are.
        self.pcps = [PcpRow(make) for _ in range(m.ncpus)]
        nn = len(m.nodes)
        self.zonelist = [sorted(range(nn), key=lambda j: (m.distances[i][j], j)) for i in range(nn)]
        self._zone_starts = [z.start_pfn for z in self.zones]
        self._pcp_path = path("rmqueue_pcplist", self._freq)
        self._cs = 0.0  # line-transfer ns accumulated inside the current critical section
        self.splits = 0  # expand() levels split since the last section was charged (_split_path)
        self.lines = 0  # struct page line accesses charged through _line / _tails (for tests)
        self.zone_lines = 0  # zone->free_area / vm_stat line accesses charged through _lines_op (for tests)
        # NR_FREE_PAGES: each CPU's vm_stat_diff per zone, the zones' stat_threshold, the global
        # vm_zone_stat line (owner << 1 | dirty), and how many folds were made (BuddyLists._mod_free_pages)
        self._stat_diff = [[0] * len(self.zones) for _ in range(m.ncpus)]
        self._stat_threshold = [calculate_normal_threshold(z.managed_pages, m.ncpus) for z in self.zones]
        self._global_stat = [self.zones[0].home << 1 | 1]
        self._global_at = [None]
        self.stat_folds = 0
        # zone->lock sections by function: [count, ns charged inside them] (validate --suite paths)
        self.cs_stats: dict[str, list[int]] = {}
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
                if self.below_high_on and not z.below_high and z.free_pages - unusable <= z.wmark_high:
                    z.below_high = True  # 57c0419c5f0e: zone_watermark_fast(high) failed
                return z
        for n in zl:
            z = self.zones[n]
            if z.free_pages - unusable > z.wmark_min and z.free_pages > unusable:
                return z
        raise MemoryError(f"out of memory: no node has {1 << order} free pages above its min watermark")

    def _charge_cs(self, cpu: int, func: str, ns: int, ins: int) -> int:
        """Charge a critical section: path instructions + the line transfers it made."""
        extra = int(self._cs)
        self._cs = 0.0
        self._end_section()
        st = self.cs_stats.get(func)
        if st is None:
            st = self.cs_stats[func] = [0, 0]
        st[0] += 1
        st[1] += ns + extra
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
        wm = int(self._watermark_lines(z, cpu, order))  # zone_watermark_fast: lock-free zone line reads
        if wm:
            pending += c.busy(cpu, "get_page_from_freelist", wm)
        if self.pcp_allowed_order(order):
            ns, ins = self._pcp_path
            pending += c.busy(cpu, "get_page_from_freelist", ns, ins)
            pcp = self.pcps[cpu][z.index]
            self.rules.on_alloc(pcp)
            lst = pcp.lists[self.pindex(order, mt)]
            if not lst:
                yield pending
                pending = 0
                yield from self._rmqueue_bulk(task, z, pcp, lst, order, mt)
            pfn, _ = lst.pop()
            pcp.count -= 1 << order
            extra = self._line(z, pfn, cpu, True) + self._zone_flags(z, cpu)  # prep_new_page; rmqueue's out:
            if order:
                extra += self._tails(z, pfn, order, cpu)  # prep_compound_page
            extra = int(extra)
            if extra:
                pending += c.busy(cpu, "get_page_from_freelist", extra)
        else:
            if pending:
                yield pending
                pending = 0
            yield z.lock.acquire(task)
            got = self._rmqueue(z, cpu, order, mt)
            if got is not None:
                self._mod_free_pages(z, cpu, -(1 << order))  # rmqueue_buddy: __mod_zone_freepage_state
            ns, ins = self._split_path(1)
            yield self._charge_cs(cpu, "__rmqueue", ns, ins)
            z.lock.release(task)
            c.vm[cpu][ZONE_ALLOC_PAGES] += 1 << order
            if got is None:
                raise MemoryError(f"zone {z.node}: no free block of order {order}")
            pfn, _ = got
            if order:
                pending += c.busy(cpu, "get_page_from_freelist", int(self._tails(z, pfn, order, cpu)))
        self.last_pfn = pfn
        self.last_alloc_hot = self.cache.on_alloc(cpu, pfn, order, self.system.engine.now) >= 0.5
        return pfn, pending

    def _rmqueue_bulk(
        self, task: Task, z: Zone, pcp: Pcp, lst: deque[tuple[int, int]], order: int, mt: int,
    ) -> Generator[Any, Any, None]:
        """``rmqueue_bulk`` under ``zone->lock``: ``nr_pcp_alloc`` blocks (``batch >> order``, at
        least 2, scaled by ``alloc_factor`` after c0a242394cb9)."""
        cpu = task.cpu
        batch = self.rules.nr_pcp_alloc(pcp, z, order)
        yield z.lock.acquire(task)
        n = 0
        while n < batch:
            got = self._rmqueue(z, cpu, order, mt)
            if got is None:
                break
            lst.appendleft(got)  # list_add_tail
            n += 1
        self._mod_free_pages(z, cpu, -(n << order))  # __mod_zone_page_state(NR_FREE_PAGES), under the lock
        ns, ins = self._split_path(n)
        yield self._charge_cs(cpu, "rmqueue_bulk", ns, ins)
        z.lock.release(task)
        pcp.count += n << order
        v = self.counters.vm[cpu]
        v[PCP_REFILL] += 1
        v[ZONE_ALLOC_PAGES] += n << order
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
        if z.free_pages <= z.wmark_high:
            z = self._pick(node, 0)
        cpu = task.cpu
        pcp = self.pcps[cpu][z.index]
        lst = pcp.lists[MIGRATE_MOVABLE]
        if not lst:
            return None
        if self.free_factor_on:
            pcp.free_factor >>= 1
        elif self.free_count_on:
            pcp.free_count >>= 1
        pfn, _ = lst.pop()
        pcp.count -= 1
        self.counters.vm[cpu][PGALLOC] += 1
        self.last_pfn = pfn
        self.last_alloc_hot = self.cache.on_alloc(cpu, pfn, 0, self.system.engine.now) >= 0.5
        if owner is not None and self.track_owners:
            self.owned.setdefault(owner, []).append(pfn << 4)
        ns, ins = self._pcp_path
        ns += int(self._line(z, pfn, cpu, True) + self._zone_flags(z, cpu))
        return z.node, self.counters.busy(cpu, "get_page_from_freelist", ns, ins)

    def _zone_flags(self, z: Zone, cpu: int) -> float:
        """The load of ``zone->flags`` at ``rmqueue()``'s ``out:`` (``test_bit(ZONE_BOOSTED_WATERMARK)``,
        1c30844d2dfe, v5.0): on the last ``free_area`` line, or from v6.5 with CONFIG_UNACCEPTED_MEMORY on
        the zone lock's own line (policy ``zone_flags_line``; docs/pcp-free-high.md, session 28). ns."""
        fl = self.flags_line
        if fl == "lock":
            return float(z.lock.line.read(cpu, self._engine.now))
        if fl == "free_area":
            return self._lines_op(z.area_lines, cpu, (ZONE_FLAGS_LINE,), False, z.area_at, z.node, z.area_sh)
        return 0.0

    def take_functional(self, node: int, order: int, count: int, cpu: int = 0,
                        pfns: list[int] | None = None) -> None:
        """Take ``count`` blocks of ``order`` for ``node`` out of the free pool without charging
        any time: the functional part of a fast-forward skip (:mod:`mmsim.metrics.sampling`), so
        that free + allocated pages still add up to the managed pages and the zone watermarks see
        the memory the skipped faults used. ``pgalloc`` is counted here, exactly, on ``cpu`` (the
        skip leaves it out of its extrapolation). Never-split MAX_ORDER blocks go in bulk; the rest one
        ``__rmqueue`` at a time (its line state changes as in a simulated take; no cost is computed:
        ``BuddyLists._fn``). ``pfns``, if given,
        receives the first pfn of each block taken, in order."""
        saved, splits = self._cs, self.splits
        self._fn = kk = (self._l2c[cpu]._clock, self._l3c[cpu].advance(self._engine.now))
        try:
            used = self._take(node, order, count, cpu, pfns)
        finally:
            self._fn = None
        for z in used:
            self._pcp_lines_refilled(z, cpu, kk)
        self._cs, self.splits = saved, splits
        self.counters.vm[cpu][PGALLOC] += count << order

    def _pcp_lines_refilled(self, z: Zone, cpu: int, kk: tuple[float, float]) -> None:
        """After a functional take by ``cpu`` from ``z``: the ``struct page`` lines of the pages on ``cpu``'s
        PCP lists of ``z`` as the skipped interval leaves them. The skipped faults would have emptied and
        refilled those lists (``rmqueue_bulk`` writes each page's line), so at the interval's end the pages on
        them were written by ``cpu`` in its last refill, after most of the interval's other writes. The skip
        keeps the lists' pages as they were (their identity does not matter; the allocator's counts do), so
        their lines are made ``cpu``'s most recent writes here, stamped at the take. Without this the take's
        own writes (every skipped page's line) pushed them out of ``page_owner`` (``owner_cap``: as many
        pages as the LLC holds) once a skip took more pages than that, and the first allocations after the skip
        paid a memory miss per page that no exact run pays (docs/performance.md, session 33)."""
        pcp = self.pcps[cpu].get(z.index)
        if pcp is None:
            return
        self._lines_written(z, [pfn for lst in pcp.lists for pfn, _ in lst], cpu << 1 | 1, kk)

    def _take(self, node: int, order: int, count: int, cpu: int, pfns: list[int] | None) -> list[Zone]:
        """The blocks of :meth:`take_functional`; returns the zones they came from."""
        per = 1 << (MAX_ORDER - order)  # blocks of ``order`` in one MAX_ORDER block
        left = count
        used: list[Zone] = []
        while left > 0:
            z = self._pick(node, order)
            if z not in used:
                used.append(z)
            if (left >= per and z.pristine < z.pristine_end
                    and z.pageblock_mt(z.pristine) == MIGRATE_MOVABLE):
                if pfns is not None:
                    pfns.extend(range(z.pristine, z.pristine + (1 << MAX_ORDER), 1 << order))
                z.pristine += 1 << MAX_ORDER
                z.free_pages -= 1 << MAX_ORDER
                left -= per
                continue
            if left < per or z.pristine >= z.pristine_end:
                # Block by block as __rmqueue_smallest takes them (pristine blocks never come back and
                # ``left`` only falls, so no bulk take can come up), for as many blocks as _pick would keep
                # choosing this zone with no side effect: above its low watermark, and above its high one
                # while that check can still set below_high.
                sz = 1 << order
                thr = z.wmark_high if self.below_high_on and not z.below_high else z.wmark_low
                room = z.free_pages - (sz - 1) - max(thr, z.wmark_low)
                n = min(left, 1 + max(0, -(-room // sz) - 1)) if z.free_pages - (sz - 1) > z.wmark_low else 1
                blocks = self._rmqueue_fn(z, cpu, order, MIGRATE_MOVABLE, n)
                if blocks:
                    if pfns is not None:
                        pfns.extend(blocks)
                    left -= len(blocks)
                    continue
            got = self._rmqueue(z, cpu, order, MIGRATE_MOVABLE)  # the migratetype fallback
            if got is None:
                raise MemoryError(f"zone {z.node}: no free block of order {order} for a skipped fault")
            if pfns is not None:
                pfns.append(got[0])
            left -= 1
        return used

    def take_owned_functional(self, node: int, order: int, owner: Any, cpu: int = 0) -> None:
        """:meth:`take_functional` of one block, remembered under ``owner`` for :meth:`free_owned`
        (a skipped fault's PTE table, which the unmap frees like a simulated one's)."""
        saved, splits = self._cs, self.splits
        self._fn = (self._l2c[cpu]._clock, self._l3c[cpu].advance(self._engine.now))
        try:
            got = self._rmqueue(self._pick(node, order), cpu, order, MIGRATE_MOVABLE)
        finally:
            self._fn = None
        self._cs, self.splits = saved, splits
        if got is None:
            raise MemoryError(f"node {node}: no free block of order {order} for a skipped fault")
        self.counters.vm[cpu][PGALLOC] += 1 << order
        if self.track_owners:
            self.owned.setdefault(owner, []).append(got[0] << 4 | order)

    # -- freeing ------------------------------------------------------------------------
    def free_pages(self, task: Task, pfn: int, order: int, pending: int = 0) -> Generator[Any, Any, int]:
        """``__free_pages`` → ``free_unref_page`` (PCP orders) or ``free_one_page``.
        Returns the busy ns charged but not yielded (see :meth:`alloc_pages_pfn`)."""
        cpu = task.cpu
        c = self.counters
        z = self.zone_of(pfn)
        stamp = 0  # free-list stamps are unused: the cache hierarchy keeps a frame's state
        self.cache.on_free(cpu, pfn, order)
        extra = self._line(z, pfn, cpu, True)  # free_pages_prepare / put_page on the struct page
        if order:
            extra += self._tails(z, pfn, order, cpu)  # free_pages_prepare: every tail's flags
        if not self.pcp_allowed_order(order):
            c.vm[cpu][PGFREE] += 1 << order
            pending += c.busy(cpu, "free_pages_prepare", int(extra))
            if pending:
                yield pending
            yield z.lock.acquire(task)
            levels = self._free_one_page(z, cpu, pfn, order, stamp)
            ns, ins = self._free_path(1, levels)
            yield self._charge_cs(cpu, "free_one_page", ns, ins)
            z.lock.release(task)
            return 0
        ns, ins = path("free_unref_page", self._freq)
        pending += c.busy(cpu, "free_unref_page", ns + int(extra), ins)
        pcp = self.pcps[cpu][z.index]
        pindex = self.pindex(order, z.pageblock_mt(pfn) if order <= PAGE_ALLOC_COSTLY_ORDER else 0)
        n, free_high = self._free_unref_page_commit(cpu, z, pcp, pfn, stamp, order, pindex)
        if self.flags_on_free and not free_high:  # nr_pcp_high: test_bit(ZONE_RECLAIM_ACTIVE, &zone->flags)
            fl = int(self._zone_flags(z, cpu))
            if fl:
                pending += c.busy(cpu, "free_unref_page", fl)
        if n:
            yield pending
            yield from self._free_pcppages_bulk(task, z, pcp, n, pindex)
            if z.below_high and z.free_pages > z.wmark_high:
                z.below_high = False  # 57c0419c5f0e: cleared after a drain above the high watermark
            return 0
        return pending

    def _free_unref_page_commit(self, cpu: int, z: Zone, pcp: Pcp, pfn: int, stamp: int, order: int,
                                pindex: int) -> tuple[int, bool]:
        """``free_unref_page_commit``: add to the PCP; returns how many pages to
        drain now (0: none), by the kernel's PCP rules (:class:`PcpRules`), and whether it is a
        ``free_high`` free."""
        self.counters.vm[cpu][PGFREE] += 1 << order
        pcp.lists[pindex].append((pfn, stamp))
        pcp.count += 1 << order
        n, free_high = self.rules.commit(pcp, z, order)
        if free_high:
            self.counters.vm[cpu][PCP_FREE_HIGH] += 1
        return n, free_high

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
            if pindex < NR_LOWORDER_PCP_LISTS:
                order, mt = divmod(pindex, MIGRATE_PCPTYPES)
            else:
                order, mt = HPAGE_PMD_ORDER, -1  # the THP list mixes types: page->index = the pageblock's
            nr = 1 << order
            while True:
                # list_last_entry, get_pcppage_migratetype (page->index), list_del: the page's line. Its
                # list predecessor (next_pfn's prev write) is this CPU's own PCP entry: no transfer.
                pfn, stamp = lst.popleft()
                self._cs += self._line(z, pfn, cpu, True)
                count -= nr
                pcp.count -= nr
                pages += nr
                blocks += 1
                levels += self._free_one_page(z, cpu, pfn, order, stamp, mt)
                if count <= 0 or not lst:
                    break
        ns, ins = self._free_path(blocks, levels)
        yield self._charge_cs(cpu, "free_pcppages_bulk", ns, ins)
        z.lock.release(task)
        v = self.counters.vm[cpu]
        v[PCP_DRAIN] += 1
        v[PCP_DRAIN_PAGES] += pages

    def _split_path(self, blocks: int) -> tuple[int, int]:
        """(ns, instructions) of ``blocks`` x ``__rmqueue`` and the ``expand()`` levels split since the last
        charge (``splits``, counted by ``_rmqueue_smallest``; reset here)."""
        ns, ins = path("__rmqueue", self._freq)
        sns, sins = path("expand/level", self._freq)
        levels = self.splits
        self.splits = 0
        return ns * blocks + sns * levels, ins * blocks + sins * levels

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
