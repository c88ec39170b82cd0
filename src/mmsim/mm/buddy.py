"""The buddy free lists of a zone (mm/page_alloc.c, v6.6) and the ``struct
page`` line costs charged while the allocator walks them (issue 19): split
out of :mod:`mmsim.mm.page_alloc`, whose ``PageAllocator`` mixes
:class:`BuddyLists` in. The module docstring of ``page_alloc`` describes the
model; the line counts are in docs/sources-page-alloc.md (C.2, C.3).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from mmsim.locks.spinlock import Spinlock
from mmsim.machine.hierarchy import STREAM_START
from mmsim.machine.presets import FILL_BUFFERS
from mmsim.mm.free_list import NIL, FreeList

MAX_ORDER = 10  # v6.4+ spelling (inclusive): the largest block is order 10 (4 MiB) on x86-64
NR_ORDERS = MAX_ORDER + 1
PAGEBLOCK_ORDER = 9  # HUGETLB_PAGE_ORDER on x86-64

# enum migratetype (include/linux/mmzone.h)
MIGRATE_UNMOVABLE, MIGRATE_MOVABLE, MIGRATE_RECLAIMABLE = 0, 1, 2
MIGRATE_PCPTYPES = 3
# mm/page_alloc.c fallbacks[]
FALLBACKS = ((MIGRATE_RECLAIMABLE, MIGRATE_MOVABLE), (MIGRATE_RECLAIMABLE, MIGRATE_UNMOVABLE),
             (MIGRATE_UNMOVABLE, MIGRATE_MOVABLE))

COLD = -1  # stamp of memory never written since boot
# L2 streamer: "Detects and maintains up to 32 streams ... For each 4K byte page ... one forward and one
# backward stream" (Intel Optimization Reference Manual §2.3.5.4, docs/sources-caches.md 2): the 4 KiB
# vmemmap pages of struct pages tracked at once by BuddyLists._streamed
STREAMS = 32

# The free_area lines of struct zone (include/linux/mmzone.h, v6.6). ``struct free_area`` is
# ``struct list_head free_list[MIGRATE_TYPES]`` (16 bytes each: ``next``, ``prev``) then ``unsigned
# long nr_free``. MIGRATE_TYPES is 6 with CONFIG_CMA and CONFIG_MEMORY_ISOLATION (UNMOVABLE, MOVABLE,
# RECLAIMABLE, HIGHATOMIC, CMA, ISOLATE; both options are y in distribution configs such as LKP's
# x86_64-rhel-8.3: an assumption), so an element is 104 bytes. ``free_area[]`` starts on a cache line:
# ``CACHELINE_PADDING(_pad1_)`` precedes it (v6.5/v6.6 layout quoted in store id 34598568687). So an
# order's list head and its ``nr_free`` are often on different lines, neighbouring orders share
# lines, and a few list heads straddle two (e.g. order 3 UNMOVABLE: ``next`` at byte 312, ``prev``
# at 320). 11 x 104 = 1144 bytes = 18 lines.
MIGRATE_TYPES = 6
FREE_AREA_BYTES = MIGRATE_TYPES * 16 + 8
CACHE_LINE = 64
FREE_AREA_LINES = -(-NR_ORDERS * FREE_AREA_BYTES // CACHE_LINE)


def _fa_line(order: int, byte: int) -> int:
    return (order * FREE_AREA_BYTES + byte) // CACHE_LINE


# FA_OP[order][mt][mask]: the distinct free_area lines one list operation writes: ``nr_free``, plus
# the list head's ``next`` (mask 1) and/or ``prev`` (mask 2) field. FA_NEXT[order][mt]: the line of
# ``next`` alone (``list_first_entry_or_null`` reads it).
FA_NEXT = [[_fa_line(o, 16 * mt) for mt in range(MIGRATE_PCPTYPES)] for o in range(NR_ORDERS)]
FA_OP = [[[tuple(sorted({_fa_line(o, MIGRATE_TYPES * 16)}
                        | ({_fa_line(o, 16 * mt)} if mask & 1 else set())
                        | ({_fa_line(o, 16 * mt + 8)} if mask & 2 else set())))
           for mask in range(4)] for mt in range(MIGRATE_PCPTYPES)] for o in range(NR_ORDERS)]
HEAD_NEXT, HEAD_PREV = 1, 2
# FA_NR_FREE[order]: the line of ``free_area[order].nr_free`` (``__zone_watermark_ok`` reads it)
FA_NR_FREE = [_fa_line(o, MIGRATE_TYPES * 16) for o in range(NR_ORDERS)]
# zone->flags, right after free_area[] (include/linux/mmzone.h, v5.0-v6.4 or without CONFIG_UNACCEPTED_MEMORY):
# byte 1,144, on the last free_area line (docs/pcp-free-high.md, session 28)
ZONE_FLAGS_LINE = NR_ORDERS * FREE_AREA_BYTES // CACHE_LINE
# zone->vm_stat[] (after CACHELINE_PADDING(_pad3_) in struct zone): NR_FREE_PAGES is item 0, so its
# line is the array's first; kept in Zone.area_lines after the free_area lines.
VM_STAT_LINE = FREE_AREA_LINES


class Zone:
    __slots__ = (
        "node", "index", "start_pfn", "end_pfn", "managed_pages", "free_pages", "lock", "home",
        "free_area", "pristine", "pristine_end", "pb_mt", "area_lines", "area_at", "area_sh", "page_owner", "page_at",
        "tail_owner", "owner_cap",
        "wmark_min", "wmark_low", "wmark_high", "batch", "high", "high_max", "below_high",
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
        self.free_area: list[list[FreeList]] = [[FreeList(), FreeList(), FreeList()] for _ in range(NR_ORDERS)]
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
        # free_area line -> last CPU to take it << 1 | dirty (see BuddyLists._area_op)
        self.area_lines = [home << 1 | 1] * (FREE_AREA_LINES + 1)
        # pfn -> last writer << 1 | dirty (1 until another CPU read the line): recent struct page lines.
        # Oldest write first; at ``owner_cap`` the oldest goes. An OrderedDict, not a dict: a dict's first
        # entry after many deletions from the front is found by scanning their dummies (CPython): 5.5% of a
        # profiled 72-thread thp_memscale run, ~3% of its unprofiled CPU time (session 15; same results).
        self.page_owner: OrderedDict[int, int] = OrderedDict()
        # pfn -> (L2, LLC byte clock of the CPU that touched it last, at that access): where it still is
        self.page_at: dict[int, tuple[float, float]] = {}
        self.area_at: list[tuple[float, float] | None] = [None] * (FREE_AREA_LINES + 1)
        # free_area / vm_stat line -> the CPUs holding a valid copy since its last write, with their stamps
        self.area_sh: list[dict[int, tuple[float, float]]] = [{} for _ in range(FREE_AREA_LINES + 1)]
        # (head pfn << 4 | order) -> last writer of the block's tail struct pages (compound pages)
        self.tail_owner: OrderedDict[int, int] = OrderedDict()
        self.owner_cap = owner_cap
        self.wmark_min = self.wmark_low = self.wmark_high = 0
        self.batch = self.high = self.high_max = 1
        self.below_high = False  # ZONE_BELOW_HIGH (57c0419c5f0e)

    def pageblock_mt(self, pfn: int) -> int:
        return self.pb_mt.get(pfn >> PAGEBLOCK_ORDER, MIGRATE_MOVABLE)

    def nr_free(self, order: int) -> int:
        """``free_area[order].nr_free`` (blocks)."""
        n = sum(len(d) for d in self.free_area[order])
        if order == MAX_ORDER:
            n += (self.pristine_end - self.pristine) >> MAX_ORDER
        return n


class BuddyLists:
    """The zone->lock side of the allocator: ``__rmqueue_smallest`` / ``expand``, the
    migratetype fallback, ``__free_one_page``, and the line accounting they charge into
    ``self._cs`` (the current critical section)."""

    _cs: float
    splits: int
    lines: int
    zone_lines: int
    stat_folds: int
    _stat_diff: list[list[int]]
    _stat_threshold: list[int]
    _global_stat: list[int]
    _xrows: list[list[float] | None]
    _xfer: Callable[..., float]
    _ncpus: int
    _global_at: list[tuple[float, float] | None]
    _l2c: list[Any]
    _l3c: list[Any]
    _engine: Any
    _l1_bytes: float
    _lat2: float
    _lat3: float
    _mem_ns: Callable[[int, int], float]
    _probs1: Callable[[float, float], tuple[float, float]]
    _stream: dict[int, int]
    # A fast-forward skip's functional take (``PageAllocator.take_functional``): the byte clocks of the
    # taking CPU at that moment, fixed for the whole take; while set, the line accounting keeps every
    # line's state (owner, stamps, sharers) as a simulated take would and computes no cost.
    _fn: tuple[float, float] | None = None

    def _end_section(self) -> None:
        """A zone->lock section ended: the streamer state of its struct page lines is dropped."""
        if self._stream:
            self._stream = {}

    def _line(self, z: Zone, pfn: int, cpu: int, write: bool) -> float:
        """One access by ``cpu`` to the ``struct page`` line of ``pfn``: the transfer from the CPU
        that wrote it last (HITM while the line is dirty there, HIT once another CPU has read
        it); if ``cpu`` wrote it last, the level its own caches still hold it in
        (:meth:`_own_ns`); a line no table remembers is in memory. A write makes ``cpu`` the
        owner. A read followed by a write of the same line in one kernel step is one access
        (the write). Every access stamps the line with ``cpu``'s byte clocks."""
        self.lines += 1
        po = z.page_owner
        at = z.page_at
        st = po.get(pfn, -1)
        fn = self._fn
        if fn is None:
            k2 = self._l2c[cpu]._clock
            k3 = self._l3c[cpu].advance(self._engine.now)
        else:
            k2, k3 = fn
        if st < 0:
            if len(po) >= z.owner_cap:
                old = next(iter(po))
                del po[old]
                at.pop(old, None)
            po[pfn] = cpu << 1 | int(write)  # a read from memory leaves it clean here
            at[pfn] = (k2, k3)
            return 0.0 if fn is not None else self._cold_ns(cpu, z.node, pfn)
        if st >> 1 == cpu:
            last = at.get(pfn)
            if write:
                del po[pfn]
                po[pfn] = cpu << 1 | 1
            at[pfn] = (k2, k3)
            # a remembered line with no stamp (set by hand in tests) counts as just touched
            if last is None or fn is not None:
                return 0.0
            return self._own_ns(cpu, z.node, pfn, k2 - last[0], k3 - last[1])
        if write:
            del po[pfn]
            po[pfn] = cpu << 1 | 1
        elif st & 1:
            po[pfn] = st - 1
        at[pfn] = (k2, k3)
        if fn is not None:
            return 0.0
        row = self._xrows[st]
        if row is None:
            row = self._xrows[st] = [self._xfer(st >> 1, d, modified=bool(st & 1)) for d in range(self._ncpus)]
        return row[cpu]

    def _own_ns(self, cpu: int, node: int, key: int, d2: float, d3: float) -> float:
        """A line ``cpu`` touched last, ``d2`` / ``d3`` bytes ago in its L2 / LLC byte clocks: 0 in
        the L1d (an L1 hit is inside the path instructions; exact LRU, as the hierarchy's L2),
        else the expected extra latency of the level the cache hierarchy finds it in (the
        presets' L2 / L3 ``latency_ns``, the idle memory latency to ``node``), with the L2
        streamer (:meth:`_streamed`) for struct page lines (``key`` = pfn >= 0)."""
        if d2 < self._l1_bytes:
            return 0.0
        p2, p3 = self._probs1(d2, d3)
        if p2 >= 1.0:
            return self._lat2
        if key >= 0 and self._streamed(key):
            return self._lat2
        return p2 * self._lat2 + p3 * self._lat3 + (1.0 - p2 - p3) * self._mem_ns(cpu, node)

    def _cold_ns(self, cpu: int, node: int, key: int) -> float:
        """A line no table remembers: in memory (with the streamer for struct page lines)."""
        if key >= 0 and self._streamed(key):
            return self._lat2
        return self._mem_ns(cpu, node)

    def _streamed(self, pfn: int) -> bool:
        """The L2 streamer (Opt. manual §2.3.5.4: ascending and descending sequences, within a
        4 KiB page): an L2 miss on the ``struct page`` of ``pfn`` is covered (prefetched into the
        L2) after ``STREAM_START`` misses in the same vmemmap 4 KiB page (64 struct pages), as
        the hierarchy treats a page's data; within one zone->lock section (the state is
        dropped at :meth:`_end_section`; at most ``STREAMS`` pages tracked). Otherwise the miss is
        counted here."""
        vp = pfn >> 6
        st = self._stream
        n = st.get(vp, 0)
        if n >= STREAM_START:
            return True
        if not n and len(st) >= STREAMS:
            del st[next(iter(st))]  # the oldest tracked 4 KiB page makes room
        st[vp] = n + 1
        return False

    def _tails(self, z: Zone, pfn: int, order: int, cpu: int) -> float:
        """The tail ``struct page``s of a compound block, ``(1 << order) - 1`` lines written by
        ``prep_compound_page`` (allocation) and ``free_pages_prepare`` (free), outside
        zone->lock. They are contiguous and independent stores, so they overlap
        ``FILL_BUFFERS`` at a time (Little's law, as the presets' clear rate). Tracked per
        block (head pfn, order), not per page: a simplification."""
        n = (1 << order) - 1
        self.lines += n
        key = pfn << 4 | order
        to = z.tail_owner
        own = to.pop(key, z.home)
        if len(to) >= z.owner_cap:
            del to[next(iter(to))]
        to[key] = cpu
        if own == cpu:
            return 0.0
        return -(-n // FILL_BUFFERS) * self._xfer(own, cpu, modified=True)

    def touch_struct_page(self, z: Zone, pfn: int, cpu: int) -> float:
        """A write to the ``struct page`` line of ``pfn`` by a caller outside this module
        (SLUB's ``struct slab``): the transfer from its last writer, in ns."""
        return self._line(z, pfn, cpu, True)

    def _area_op(self, z: Zone, cpu: int, lines: tuple[int, ...], write: bool = True) -> float:
        """One list operation's accesses to ``zone->free_area`` lines (``FA_OP`` / ``FA_NEXT``): each
        line costs the transfer from the CPU that took it last (HITM while dirty there, HIT once
        read), or the level ``cpu``'s caches hold it in if ``cpu`` still has a valid copy (it took
        it last, or read it and nobody wrote it since: ``Zone.area_sh``). A read leaves the line
        clean with ``cpu`` as its forwarder (MESIF's F state goes to the last requester) and the
        earlier holders keep shared copies; a later write by another sharer pays a HIT from the
        forwarder (the upgrade's snoop, approximated by a transfer) and invalidates every copy."""
        return self._lines_op(z.area_lines, cpu, lines, write, z.area_at, z.node, z.area_sh)

    def _lines_op(self, al: list[int], cpu: int, lines: tuple[int, ...], write: bool,
                  at: list[tuple[float, float] | None] | None = None, node: int = 0,
                  sh: list[dict[int, tuple[float, float]]] | None = None) -> float:
        """``at``: the lines' stamps (the accessing CPU's byte clocks at the last access), for the
        cost of a line ``cpu`` took last by the level it is still in (:meth:`_own_ns`); None: free.
        ``sh``: per line, the CPUs holding a valid copy since the last write, with their own stamps
        (session 11: a CPU re-reading a line it shares pays its own cache level, not a transfer)."""
        xr = self._xrows
        self.zone_lines += len(lines)
        ns = 0.0
        fn = self._fn
        if at is not None:
            if fn is None:
                k2 = self._l2c[cpu]._clock
                k3 = self._l3c[cpu].advance(self._engine.now)
            else:
                k2, k3 = fn
        for ln in lines:
            st = al[ln]
            if at is not None:
                last = at[ln]
                at[ln] = (k2, k3)
            held = None
            if sh is not None:
                copies = sh[ln]
                if cpu in copies:
                    held = copies[cpu]
                    last = held
                if write:
                    sh[ln] = {cpu: (k2, k3)}
                else:
                    copies[cpu] = (k2, k3)
            if st >> 1 == cpu or (held is not None and not write):
                if write:
                    al[ln] = cpu << 1 | 1
                if at is not None and last is not None and fn is None:
                    ns += self._own_ns(cpu, node, -1, k2 - last[0], k3 - last[1])
                continue
            al[ln] = cpu << 1 | int(write)
            if fn is not None:
                continue
            row = xr[st]
            if row is None:
                row = xr[st] = [self._xfer(st >> 1, d, modified=bool(st & 1)) for d in range(self._ncpus)]
            ns += row[cpu]
        return ns

    def _mod_free_pages(self, z: Zone, cpu: int, delta: int) -> None:
        """``__mod_zone_page_state(zone, NR_FREE_PAGES, delta)`` (mm/vmstat.c, v6.6), under
        zone->lock here: the CPU's ``vm_stat_diff`` (an s8, local) takes the delta; past
        ``stat_threshold`` it is folded with ``zone_page_state_add``: ``atomic_long_add`` on
        ``zone->vm_stat[NR_FREE_PAGES]`` and on the global ``vm_zone_stat[NR_FREE_PAGES]``, two
        lines every CPU of every zone writes (charged into the current section)."""
        row = self._stat_diff[cpu]
        x = row[z.index] + delta
        if abs(x) > self._stat_threshold[z.index]:
            self.stat_folds += 1
            self._cs += self._lines_op(z.area_lines, cpu, (VM_STAT_LINE,), True, z.area_at, z.node, z.area_sh) \
                + self._lines_op(self._global_stat, cpu, (0,), True, self._global_at, z.node)
            x = 0
        row[z.index] = x

    def _watermark_lines(self, z: Zone, cpu: int, order: int) -> float:
        """The lock-free reads of ``zone_watermark_fast`` (v6.6 ``get_page_from_freelist``, before
        ``rmqueue``, on every allocation; the v6.5/v6.6-era mm/page_alloc.c of store id 51773817566):
        ``zone_page_state(z, NR_FREE_PAGES)`` reads ``zone->vm_stat``'s first line; an order-0
        request passes the fast check there. For order > 0, ``__zone_watermark_ok`` scans ``o`` =
        order .. MAX_ORDER: ``area->nr_free`` (``continue`` if 0), then ``free_area_empty(area, mt)``
        (``head.next``) for mt = 0, 1, 2 up to the first non-empty list, and returns true there.
        Each line once, as a read (:meth:`_lines_op`); the cost in ns, charged by the caller outside
        the lock. The read-mostly lines (``_watermark``, ``lowmem_reserve``,
        ``nr_reserved_highatomic``, vm_stat's second line with NR_FREE_CMA_PAGES) are not charged;
        the CMA / HIGHATOMIC checks are never reached (the lists here hold no such blocks).

        Not modelled: the order-0 request's ``vm_stat`` read. It was implemented and reverted in
        session 11 because it makes two fast-forward agreement tests fail
        (``tests/experiments/test_fast_forward.py``). Its cost is ~1.8 ns per fault, but it moves
        the sampler's window phase; docs/pcp-free-high.md, "Session 11", has the measurements."""
        if not order:
            return 0.0
        lines = [VM_STAT_LINE]
        fa = z.free_area
        for o in range(order, NR_ORDERS):
            ln = FA_NR_FREE[o]
            if ln not in lines:
                lines.append(ln)
            if not z.nr_free(o):
                continue
            for mt in range(MIGRATE_PCPTYPES):
                ln = FA_NEXT[o][mt]
                if ln not in lines:
                    lines.append(ln)
                if fa[o][mt] or (o == MAX_ORDER and mt == MIGRATE_MOVABLE and z.pristine < z.pristine_end):
                    return self._lines_op(z.area_lines, cpu, tuple(lines), False, z.area_at, z.node, z.area_sh)
        return self._lines_op(z.area_lines, cpu, tuple(lines), False, z.area_at, z.node, z.area_sh)

    # -- the buddy lists (caller holds zone->lock) ----------------------------------
    def _rmqueue_smallest(self, z: Zone, cpu: int, order: int, mt: int) -> tuple[int, int] | None:
        """``__rmqueue_smallest`` + ``expand`` (v6.6): the first free block of ``mt`` at
        ``order`` or above, split down; the upper halves go to the head of the lower lists.
        Lines: the block's ``struct page`` (read and written), its list successor's (``prev``
        written by ``list_del``), and per split level the half's and the lower list's old first
        entry's; the ``free_area`` lines of each list operation (``FA_OP``) and the head.next read
        of each empty order scanned (``FA_NEXT``). Never-split MAX_ORDER blocks
        (``pristine``) sit after the order-10 list's entries."""
        fa = z.free_area
        line = self._line
        area_op = self._area_op
        for o in range(order, NR_ORDERS):
            area = fa[o][mt]
            if area:
                pfn, stamp, nxt = area.pop_first()
                cs = line(z, pfn, cpu, True)
                if nxt != NIL:
                    cs += line(z, nxt, cpu, True)
                # list_first_entry reads head.next; list_del writes it (and head.prev if now empty)
                cs += area_op(z, cpu, FA_OP[o][mt][HEAD_NEXT | (HEAD_PREV if nxt == NIL else 0)])
            elif o == MAX_ORDER and z.pristine < z.pristine_end and mt == MIGRATE_MOVABLE \
                    and z.pageblock_mt(z.pristine) == MIGRATE_MOVABLE:
                pfn, stamp = z.pristine, COLD
                z.pristine += 1 << MAX_ORDER
                cs = line(z, pfn, cpu, True)
                cs += area_op(z, cpu, FA_OP[o][mt][HEAD_NEXT])
            else:
                # get_page_from_free_area on an empty list: a read of head.next
                self._cs += area_op(z, cpu, (FA_NEXT[o][mt],), False)
                continue
            self.splits += o - order  # expand()'s levels: their instructions are charged with the section
            while o > order:
                o -= 1
                half = pfn + (1 << o)
                f = fa[o][mt].add(half, stamp)
                cs += line(z, half, cpu, True)
                if f != NIL:
                    cs += line(z, f, cpu, True)
                    cs += area_op(z, cpu, FA_OP[o][mt][HEAD_NEXT])  # add_to_free_list
                else:
                    cs += area_op(z, cpu, FA_OP[o][mt][HEAD_NEXT | HEAD_PREV])  # into an empty list
            self._cs += cs
            z.free_pages -= 1 << order
            return pfn, stamp
        return None

    def _rmqueue_fn(self, z: Zone, cpu: int, order: int, mt: int, count: int) -> list[int]:
        """Up to ``count`` blocks of ``__rmqueue_smallest`` in a functional take (``_fn`` set): the same
        list operations and the same line state as :meth:`_rmqueue_smallest` with :meth:`_line` and
        :meth:`_lines_op` (owners, stamps, sharers, eviction order, the ``lines`` / ``zone_lines``
        counts), written out in one loop, with no cost. Stops early, with the blocks taken so far, when
        no block of ``mt`` is left (the caller falls back to :meth:`_rmqueue`). Checked against the
        simulated take in tests/mm/test_free_path.py.

        The struct page writes are applied after the loop, which reads none of them: ``page_owner`` is an
        LRU of writes (a write moves its pfn to the end, a new pfn evicts the oldest at ``owner_cap``), so
        its state after the take is the old entries then the written pfns in the order of their last
        write, cut to the newest ``owner_cap``; the same as one write at a time, in C-level calls."""
        kk = self._fn
        assert kk is not None
        fa = z.free_area
        al, aat, ash = z.area_lines, z.area_at, z.area_sh
        own = cpu << 1 | 1
        got: list[int] = []
        ws: list[int] = []  # the struct page lines written, in order
        w = ws.append
        # free_area lines: every line this take writes ends as one write by ``cpu`` leaves it (a read of it
        # by ``cpu`` after that changes nothing), and a line it only reads as one read leaves it (a second
        # read by the same CPU changes nothing); so both are applied once, after the loop (session 33:
        # the per-operation writes were a third of a skip's host time).
        ops: set[int] = set()  # the list operations' line tuples written, as o << 2 | HEAD_NEXT/HEAD_PREV
        oadd = ops.add
        rl: set[int] = set()
        radd = rl.add
        nzone = 0
        lists = [fa[o][mt] for o in range(NR_ORDERS)]
        oplen = [[len(FA_OP[o][mt][k]) if k else 0 for k in range(4)] for o in range(NR_ORDERS)]
        pristine_ok = mt == MIGRATE_MOVABLE
        while len(got) < count:
            for o in range(order, NR_ORDERS):
                area = lists[o]
                pfn = area.first
                if pfn != NIL:
                    # FreeList.pop_first, inline
                    nodes = area.nodes
                    _, nxt, stamp = nodes.pop(pfn)
                    area.first = nxt
                    w(pfn)
                    if nxt != NIL:
                        nodes[nxt][0] = NIL
                        w(nxt)
                        k = HEAD_NEXT
                    else:
                        area.last = NIL
                        k = HEAD_NEXT | HEAD_PREV
                    oadd(o << 2 | k)
                    nzone += oplen[o][k]
                elif o == MAX_ORDER and pristine_ok and z.pristine < z.pristine_end \
                        and z.pageblock_mt(z.pristine) == MIGRATE_MOVABLE:
                    pfn, stamp = z.pristine, COLD
                    z.pristine += 1 << MAX_ORDER
                    w(pfn)
                    oadd(o << 2 | HEAD_NEXT)
                    nzone += oplen[o][HEAD_NEXT]
                else:
                    radd(FA_NEXT[o][mt])  # an empty list's head.next, read
                    nzone += 1
                    continue
                while o > order:
                    o -= 1
                    half = pfn + (1 << o)
                    # FreeList.add, inline
                    lst = lists[o]
                    f = lst.first
                    lst.nodes[half] = [NIL, f, stamp]
                    lst.first = half
                    w(half)
                    if f != NIL:
                        lst.nodes[f][0] = half
                        w(f)
                        k = HEAD_NEXT
                    else:
                        lst.last = half
                        k = HEAD_NEXT | HEAD_PREV
                    oadd(o << 2 | k)
                    nzone += oplen[o][k]
                z.free_pages -= 1 << order
                got.append(pfn)
                break
            else:
                break
        wl: set[int] = set()
        for k in ops:
            wl.update(FA_OP[k >> 2][mt][k & 3])
        for ln in rl - wl:  # _lines_op(..., write=False)
            copies = ash[ln]
            if not (al[ln] >> 1 == cpu or cpu in copies):
                al[ln] = cpu << 1
            aat[ln] = kk
            copies[cpu] = kk
        for ln in wl:  # _lines_op(..., write=True)
            al[ln] = own
            aat[ln] = kk
            ash[ln] = {cpu: kk}
        if ws:
            last = list(dict.fromkeys(reversed(ws)))
            last.reverse()  # the written pfns, each once, in the order of its last write
            self._lines_written(z, last, own, kk)
        self.lines += len(ws)
        self.zone_lines += nzone
        return got

    @staticmethod
    def _lines_written(z: Zone, pfns: list[int], own: int, kk: tuple[float, float]) -> None:
        """The ``struct page`` lines of ``pfns`` (each once, oldest write first) written by the owner state
        ``own`` in a functional take stamped ``kk``: each becomes the newest entry of ``page_owner`` (an LRU of
        writes), and the oldest entries past ``owner_cap`` are dropped; as :meth:`_line` leaves them."""
        po, at = z.page_owner, z.page_at
        for pfn in pfns:
            po[pfn] = own
            po.move_to_end(pfn)
        at.update(dict.fromkeys(pfns, kk))
        for _ in range(len(po) - z.owner_cap):
            at.pop(po.popitem(last=False)[0], None)

    def _rmqueue(self, z: Zone, cpu: int, order: int, mt: int) -> tuple[int, int] | None:
        """``__rmqueue``: the requested type, else steal from a fallback type."""
        got = self._rmqueue_smallest(z, cpu, order, mt)
        if got is None and self._rmqueue_fallback(z, order, mt, cpu):
            got = self._rmqueue_smallest(z, cpu, order, mt)
        return got

    def _find_fallback(self, z: Zone, order: int, start_mt: int, cpu: int) -> int:
        """``find_suitable_fallback``: ``free_area_empty`` reads each fallback type's head.next."""
        for fmt in FALLBACKS[start_mt]:
            self._cs += self._area_op(z, cpu, (FA_NEXT[order][fmt],), False)
            if z.free_area[order][fmt] or (order == MAX_ORDER and fmt == MIGRATE_MOVABLE
                                           and z.pristine < z.pristine_end):
                return fmt
        return -1

    def _rmqueue_fallback(self, z: Zone, order: int, start_mt: int, cpu: int) -> bool:
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
            found = self._find_fallback(z, cur, start_mt, cpu)
            if found >= 0:
                break
        if found < 0:
            return False
        if not can_steal(cur) and cur > order:  # find_smallest
            for cur in range(order, NR_ORDERS):
                found = self._find_fallback(z, cur, start_mt, cpu)
                if found >= 0:
                    break
        area = z.free_area[cur][found]
        if area:
            pfn = area.first
        else:
            pfn = z.pristine
            z.pristine += 1 << MAX_ORDER
            area.add(pfn, COLD)
        if cur >= PAGEBLOCK_ORDER:
            for pb in range(pfn >> PAGEBLOCK_ORDER, (pfn + (1 << cur)) >> PAGEBLOCK_ORDER):  # change_pageblock_range
                self._set_pb_mt(z, pb, start_mt)
        elif can_steal(cur):
            moved = self._move_freepages_block(z, pfn, start_mt)
            if moved >= 1 << (PAGEBLOCK_ORDER - 1):
                self._set_pb_mt(z, pfn >> PAGEBLOCK_ORDER, start_mt)
            return True
        z.free_area[cur][start_mt].add_tail(pfn, area.pop(pfn))  # move_to_free_list (single_page)
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
                        lists[mt].add_tail(p, lists[m].pop(p))  # move_to_free_list
                        moved += 1 << o
        return moved

    def _free_one_page(self, z: Zone, cpu: int, pfn: int, order: int, stamp: int, mt: int = -1) -> int:
        """``__free_one_page`` (v6.6) into ``mt``'s lists (-1: the pageblock's type, as
        ``free_one_page`` reads it): merge with free buddies up to MAX_ORDER, then
        ``buddy_merge_likely`` picks the list tail when the order+1 buddy is free. Returns the
        merge levels. Lines (caller holds zone->lock): per merge the buddy's ``struct page``
        (``page_is_buddy`` read, ``del_page_from_free_list`` write) and its two list neighbours
        (written; none where a neighbour is the list head); the failed buddy (read); the order+1
        buddy ``buddy_merge_likely`` tests (read, below order MAX_ORDER - 1); the old first (head
        insert) or last (tail insert) entry of the target list (written); the ``free_area`` lines of
        each list operation (``FA_OP``); the NR_FREE_PAGES delta (:meth:`_mod_free_pages`)."""
        if mt < 0:
            mt = z.pageblock_mt(pfn)
        fa = z.free_area
        line = self._line
        levels = 0
        cs = 0.0
        z.free_pages += 1 << order
        self._mod_free_pages(z, cpu, 1 << order)  # __mod_zone_freepage_state (no isolated pageblocks)
        while order < MAX_ORDER:
            buddy = pfn ^ (1 << order)
            bmt = 0  # the buddy's list (its migratetype)
            for bl in fa[order]:
                if buddy in bl:
                    break
                bmt += 1
            else:
                cs += line(z, buddy, cpu, False)  # page_is_buddy fails
                break
            cs += line(z, buddy, cpu, True)
            bstamp, prev, nxt = bl.remove(buddy)
            mask = 0
            if prev != NIL:
                cs += line(z, prev, cpu, True)
            else:
                mask = HEAD_NEXT
            if nxt != NIL:
                cs += line(z, nxt, cpu, True)
            else:
                mask |= HEAD_PREV
            cs += self._area_op(z, cpu, FA_OP[order][bmt][mask])  # del_page_from_free_list
            if bstamp > stamp:
                stamp = bstamp
            pfn &= ~(1 << order)
            order += 1
            levels += 1
        to_tail = False
        if order < MAX_ORDER - 1:  # buddy_merge_likely: is the combined block's order+1 buddy free?
            higher = (pfn & ~(1 << order)) ^ (1 << (order + 1))
            cs += line(z, higher, cpu, False)
            hl = fa[order + 1]
            to_tail = higher in hl[0] or higher in hl[1] or higher in hl[2]
        fl = fa[order][mt]
        f = fl.add_tail(pfn, stamp) if to_tail else fl.add(pfn, stamp)
        if f != NIL:
            cs += line(z, f, cpu, True)
            mask = HEAD_PREV if to_tail else HEAD_NEXT
        else:
            mask = HEAD_NEXT | HEAD_PREV  # the first entry: both of the head's pointers
        self._cs += cs + self._area_op(z, cpu, FA_OP[order][mt][mask])
        return levels
