"""The cache hierarchy of a machine: private L2s, a shared LLC, prefetch, perf's counting.

One model for every bulk memory reference (page clears and copies, user
passes over pages, the page allocator's freed-and-reallocated frames).

**Levels and instances.** The L2 is private to a core (shared by its SMT
siblings; on Knights Mill by the two cores of a tile), the LLC shared by the
CPUs under one instance (a socket's L3, an AMD CCD's L3). Each instance is a
byte clock (:class:`mmsim.machine.llc.SharedCache`): the bytes referenced
through it, continuously advanced by the streams running on it. A sub-page
(4 KiB, 64 lines) keeps one stamp per level: the clock when it was last
touched there. Its reuse distance ``d`` at a later access is the clock since
(plus the rate of the other streams times the time into the pass, and this
CPU's own references earlier in the pass: the causal fixed point of
``machine/llc.py``).

**Associativity (Smith's approximation).** A line survives ``d`` bytes of
other distinct data in a ``W``-way cache of ``S`` sets if fewer than ``W`` of
those ``d / 64`` lines fell into its set. With lines spread over sets at
random (the slice hash of Intel LLCs and the scattered physical frames of 4
KiB pages), that count is binomial ``(d/64, 1/S)``, for these sizes Poisson
with mean ``λ = d·W / capacity``: ``P(hit) = P(Poisson(λ) ≤ W - 1)`` (A. J.
Smith, "A comparative study of set associative memory mapping algorithms and
their use for cache and main memory", IEEE TSE 1978). It has no cliff: a
20-way LLC keeps 47% of the lines at ``d = capacity``, 99.7% at half, 3.5%
at 1.5 × capacity; a direct-mapped cache (``W = 1``, the KNM MCDRAM cache)
``e^-λ``. ``tests/machine/test_hierarchy.py`` checks it against an exact
set-associative LRU simulation of random-placed sweeps. This is the LLC's
rule. The L2 is indexed by plain address bits that lie within a page, so a
working set smaller than it has no conflict misses (the flat L2 plateaus of
pointer-chase measurements, docs/sources-caches.md 5): the L2 is exact LRU,
a line survives less than one capacity. Pseudo-LRU and adaptive insertion
are not modelled (LRU within a set).

**Inclusion** (per machine, :mod:`mmsim.machine.cacheorg`):

* ``inclusive`` (Haswell-EP and older Xeons): every L2 line is in the LLC;
  an LLC eviction back-invalidates the L2 copy, so an L2 hit needs the line
  in both: ``p_L2 = P2(d2) · P3(d3)``, ``p_LLC = P3(d3) - p_L2``.
* ``victim`` (non-inclusive: Skylake-SP, Cascade Lake, Ice Lake-SP, Zen):
  fills go to the L2 only; the LLC receives L2 evictions. A line enters the
  LLC when its core has referenced an L2's worth since, so its LLC distance
  counts only the traffic after that: ``d3' = d3 · max(0, d2 - C2) / d2``;
  ``p_L2 = P2(d2)``, ``p_LLC = (1 - p_L2) · P3(d3')``.
* ``memory-side`` (KNM MCDRAM cache mode): in front of memory, not of the
  cores; no back-invalidation: ``p_L2 = P2(d2)``, ``p_LLC = (1 - p_L2) P3(d3)``.

**Hardware prefetch** (Intel Optimization Manual §2.3.5.4, in
docs/sources-caches.md 2): the L2 streamer follows an ascending stream
within a 4 KiB page, up to 20 lines ahead; after its first ``STREAM_START``
demand misses of a sub-page, the remaining lines of that sub-page are
prefetched. Into the L2 normally; "to the last level cache only … if there
are many outstanding requests" — modelled as: when the pass is memory-bound
(a missed sub-page takes longer than the core loop, so the L2's miss queue
is full). Prefetch changes which requests are demand requests, and so perf's
counts; it does not change time: a missed sub-page already streams at the
core's bandwidth share (machine/bandwidth.py), as a prefetched stream does.
``rep stosb`` clears (``clear_page_erms``) use fast-string stores: no read
for ownership, an invalidation per whole destination line (SDM Vol. 3A
§8.2.4), so a clear reads nothing from memory, and the streamer has nothing
to fetch for it.

**perf's events** (docs/sources-caches.md 3), per line, expected values:

* ``intel-llc`` (0x4f2e / 0x412e, LONGEST_LAT_CACHE): core-originated demand
  requests to the LLC, excluding hardware-prefetch fills. A clear: one
  ownership request per line that misses the L2, a miss when the line is not
  in the LLC. A streamed pass: ``STREAM_START`` demand requests per sub-page
  that misses the L2 (the rest hit lines the streamer brought into the L2),
  or every line when the streamer prefetches to the LLC only (the demand
  request then finds the line there); misses are the demand requests of
  sub-pages in neither level.
* ``amd-l2`` (0xff60 / 0x0964, Zen): every L2 request (L1 misses and L2
  prefetches); misses are demand requests that miss the L2.
* ``knl-l2`` (L2_REQUESTS on KNL/KNM): L2 references and L2 misses.

**Frames.** A mapping's key is bound to its physical frame with
:meth:`CacheHierarchy.bind`, so a page freed and reallocated keeps its cache
state; :meth:`CacheHierarchy.on_alloc` tells the page allocator how much of
a block is still cached. All work per page pass is vectorised over its
sub-pages, never a Python call per line.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from mmsim.machine.cacheorg import AMD_L2, INCLUSIVE, KNL_L2, VICTIM, CacheOrg, cache_org
from mmsim.machine.llc import NEVER, SUBPAGE, SharedCache
from mmsim.machine.model import Machine
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES

# The ufunc reductions ``ndarray.max()`` / ``.min()`` / ``.sum()`` call (numpy/_core/_methods.py: ``_amax`` is
# ``umr_maximum(a, axis, None, out, keepdims, initial, where)``), without their Python wrapper: the same
# reduction, the same result, on the small arrays of every fault's accesses (issue 20, host time only).
_max = np.maximum.reduce
_min = np.minimum.reduce
_sum = np.add.reduce

# Demand misses of a sub-page before the L2 streamer covers the rest of it. estimate, plausible 1-4: the
# streamer needs an ascending pair of misses to detect a stream (Opt. manual §2.3.5.4), and the adjacent-line
# prefetcher completes the first miss to its 128-byte pair; a Coffee Lake measurement (docs/sources-caches.md 2)
# finds the first two lines of every page present.
STREAM_START = 2
TABLE_PER_CAP = 512  # survival table resolution: points per capacity of reuse distance
EPS = 1e-6  # survival below this is 0, above 1 - EPS is 1 (exact counts for clear-cut cases)
FIX_ITERS = 12
FIX_TOL = 1e-3  # the fixed point of a pass is reached: its total time moved by less than this share


def survival(ways: int, hashed: bool = True, random: bool = False) -> np.ndarray:
    """P(a line survives d bytes of other data), tabulated at d = k / TABLE_PER_CAP capacities
    (Smith's Poisson approximation; ends with one 0). ``hashed=False``: an address-indexed cache
    whose set-index bits lie within the page: exact LRU, a line survives less than a capacity."""
    if not hashed:
        return np.concatenate([np.ones(TABLE_PER_CAP), np.zeros(1)])
    x = np.arange(0, 64 * TABLE_PER_CAP, dtype=np.float64) / TABLE_PER_CAP
    if random:  # each of the Poisson(x W) fills into the set evicts this line with probability 1/W
        ways = 1
    lam = x * ways
    term = np.exp(-lam)  # P(Poisson(lam) = 0), then = k for k < ways, summed
    p = term.copy()
    for k in range(1, ways):
        term = term * lam / k
        p += term
    p[p < EPS] = 0.0
    p[p > 1.0 - EPS] = 1.0
    p[0] = 1.0
    end = int(np.argmax(p == 0.0)) + 1 if (p == 0.0).any() else len(p)
    out: np.ndarray = p[:end].copy()
    out[-1] = 0.0
    return out


class Level:
    """One cache level: its instances (byte clocks) and survival table."""

    __slots__ = ("name", "caches", "of_cpu", "table", "scale", "last", "capacity", "horizon", "exact")

    def __init__(self, machine: Machine, name: str, random: bool = False) -> None:
        c = machine.cache(name)
        self.name = name
        self.capacity = float(c.capacity_kib * 1024)
        # L2: indexed by address bits 6..14-16, inside a 4 KiB page's colour bits or a huge page, so a
        # contiguous working set below its size has no conflicts (Molka et al. 2015 and 7-cpu.com
        # measure flat L2 plateaus up to the size): exact LRU. The LLC's sets are spread by the slice
        # hash (Intel) or by scattered frames: Smith's formula. Direct-mapped: e^-x either way.
        self.exact = name == "L2"
        self.table = survival(c.ways, hashed=not self.exact, random=random)
        self.last = float(len(self.table) - 1)
        self.scale = TABLE_PER_CAP / self.capacity
        self.horizon = self.last / self.scale  # bytes: no line survives this distance
        tpc = machine.sockets[0].threads_per_core
        cores_per = max(1, c.shared_by // tpc)
        inst = [(cpu % machine.ncores) // cores_per for cpu in range(machine.ncpus)]
        self.caches = [SharedCache(c.capacity_kib * 1024, c.line_bytes, self.horizon) for _ in range(max(inst) + 1)]
        self.of_cpu = [self.caches[i] for i in inst]

    def p(self, d: np.ndarray) -> np.ndarray:
        """Survival probability at reuse distances ``d`` (bytes)."""
        if self.exact:  # exact LRU: survives under one capacity
            r: np.ndarray = (d < self.capacity).astype(np.float64)
            return r
        x = d * self.scale
        np.minimum(x, self.last, out=x)
        np.maximum(x, 0.0, out=x)
        t: np.ndarray = self.table.take(x.astype(np.intp))
        return t

    def p1(self, d: float) -> float:
        """:meth:`p` of one distance."""
        x = d * self.scale
        return float(self.table[0 if x <= 0 else int(min(x, self.last))])


_RANGES: dict[tuple[int, int], np.ndarray] = {}


def subpage_range(first: int, last: int) -> np.ndarray:
    """A read-only ``np.arange(first, last)``, built once per pair (:meth:`CacheHierarchy.access`
    recognises these and slices instead of gathering)."""
    a = _RANGES.get((first, last))
    if a is None:
        a = np.arange(first, last, dtype=np.int64)
        a.setflags(write=False)
        _RANGES[(first, last)] = a
    return a


_OWN: dict[tuple[int, int], np.ndarray] = {}


def _own(n: int, per_sub: int) -> np.ndarray:
    """``arange(n) * per_sub`` (read-only, built once per pair): a pass's own earlier bytes."""
    a = _OWN.get((n, per_sub))
    if a is None:
        a = _OWN[(n, per_sub)] = np.arange(n, dtype=np.float64) * per_sub
        a.setflags(write=False)
    return a


def _stamps(c: SharedCache, key: Hashable, npages: int) -> np.ndarray:
    """The sub-page stamp array of a page of ``npages`` > 1 sub-pages."""
    a = c.stamps.get(key)
    if a is None or a.__class__ is float or len(a) != npages:
        a = c.stamps[key] = np.empty(npages)  # np.full(npages, NEVER) without its Python wrapper
        a.fill(NEVER)
    return a


def _stamp1(c: SharedCache, key: Hashable) -> float:
    """The one stamp of a 4 KiB page (a float; NEVER if none)."""
    a = c.stamps.get(key)
    return a if a.__class__ is float else NEVER


MIXED_ORDER = 3  # PAGE_ALLOC_COSTLY_ORDER: the largest block whose pages are looked up one by one


def _page(stamps: dict[Hashable, Any], pfn: int, orders: list[int]) -> float:
    """The stamp of frame ``pfn`` from the block it was last stamped in (blocks of ``orders``)."""
    for o in orders:
        head = pfn >> o << o
        a = stamps.get(("F", head))
        if a is None:
            continue
        if a.__class__ is float:
            return a if o == 0 else NEVER
        if len(a) == 1 << o:
            return float(a[pfn - head])
    return NEVER


def _block(c: SharedCache, key: Hashable, n: int) -> np.ndarray:
    """Stamps of a block of ``n`` sub-pages, for reading (NEVER where unknown)."""
    a = c.stamps.get(key)
    if a is None:
        return np.full(n, NEVER)
    if a.__class__ is float:
        return np.full(n, a if n == 1 else NEVER)
    return a if len(a) == n else np.full(n, NEVER)


class CacheHierarchy:
    """L2 + LLC of every CPU of a machine, with its inclusion policy and perf event map.

    Interface (stable; the page allocator and the mm code call it):

    * :meth:`fill` — whole sub-pages written by a ``rep stosb`` clear or a copy destination;
    * :meth:`access` — a sequential pass over sub-pages (user loop, copy source); returns the
      expected memory sub-pages and per-sub-page ns;
    * :meth:`bind` — name the frame a mapping's key is backed by (state follows the frame);
    * :meth:`resident` / :meth:`on_alloc` / :meth:`on_free` — a frame block's cached share.
    """

    def __init__(self, machine: Machine, counters: Any, org: CacheOrg | None = None) -> None:
        self.machine = machine
        self.counters = counters
        self.org = org if org is not None else cache_org(machine.name)
        self.l2 = Level(machine, "L2")
        self.llc = Level(machine, "L3", random=self.org.replacement == "random")
        self.level = "L3"
        self.lines_per_sub = SUBPAGE // machine.cache("L3").line_bytes
        self._alias: dict[Hashable, Hashable] = {}
        self._orders: list[int] = []  # block orders stamped under frame keys (bind, touch)
        self._res = [[0.0, 0.0] for _ in range(machine.ncpus)]  # fractional perf counts carried
        # expected sub-pages found in L2 / LLC / memory, over all passes (diagnostics, validate)
        self.found = [0.0, 0.0, 0.0]
        self.fixpoint_unconverged = 0
        self._amd = self.org.perf == AMD_L2
        self._l2_events = self.org.perf in (AMD_L2, KNL_L2)  # perf's cache events count the L2
        self.alloc_hot_pages = 0  # pages handed out by the allocator still cached (on_alloc), and not
        self.alloc_cold_pages = 0

    # -- compatibility with machine/llc.py's CacheModel -------------------------------------
    @property
    def caches(self) -> list[SharedCache]:
        return self.llc.caches

    def of_cpu(self, cpu: int) -> SharedCache:
        """The LLC instance of ``cpu``."""
        return self.llc.of_cpu[cpu]

    # -- frames --------------------------------------------------------------------------
    def bind(self, key: Hashable, pfn: int, order: int) -> None:
        """The page mapped under ``key`` is the block of 2^order frames at ``pfn``: its stamps are the
        frame's."""
        self._alias[key] = ("F", pfn)
        self._order_used(order)

    def _order_used(self, order: int) -> None:
        if order not in self._orders:
            self._orders = sorted({*self._orders, order})

    def resident(self, cpu: int, pfn: int, order: int, now: int) -> tuple[float, float]:
        """Expected share of block ``pfn`` (2^order pages) in ``cpu``'s L2 and in its LLC only.
        A block stamped whole is read whole; otherwise (the buddy allocator split or merged it since)
        each page's stamp is taken from whichever block it was last stamped in, for blocks of up to
        ``MIXED_ORDER`` (larger ones count as not cached)."""
        n = 1 << order
        k = ("F", pfn)
        c2, c3 = self.l2.of_cpu[cpu], self.llc.of_cpu[cpu]
        st2, st3 = c2.stamps, c3.stamps
        whole = k in st3 or k in st2
        if not whole and order > MIXED_ORDER:
            return 0.0, 0.0
        k3 = c3.advance(now)
        if n == 1:
            if not whole and not self._orders:
                return 0.0, 0.0
            o2, o3 = ((_stamp1(c2, k), _stamp1(c3, k)) if whole
                      else (_page(st2, pfn, self._orders), _page(st3, pfn, self._orders)))
            if o2 == NEVER and o3 == NEVER:
                return 0.0, 0.0
            return self._probs1(c2._clock - o2, k3 - o3)
        a2, a3 = st2.get(k), st3.get(k)
        if whole and a2.__class__ is not float and a3.__class__ is not float and (
                a3 is None or len(a3) == n) and (a2 is None or len(a2) == n):
            b2, b3 = _block(c2, k, n), _block(c3, k, n)
        else:
            b2 = np.array([_page(st2, pfn + i, self._orders) for i in range(n)])
            b3 = np.array([_page(st3, pfn + i, self._orders) for i in range(n)])
        p2, p3 = self._probs(c2._clock - b2, k3 - b3)
        return float(p2.mean()), float(p3.mean())

    def on_alloc(self, cpu: int, pfn: int, order: int, now: int) -> float:
        """The page allocator hands block ``pfn`` to ``cpu``: the expected share of its lines
        still cached (L2 or LLC) where ``cpu`` will touch it. No state changes."""
        p2, p3 = self.resident(cpu, pfn, order, now)
        if p2 + p3 >= 0.5:
            self.alloc_hot_pages += 1 << order
        else:
            self.alloc_cold_pages += 1 << order
        return p2 + p3

    def touch(self, cpu: int, pfn: int, order: int, nbytes: int, now: int, reread: bool = False) -> None:
        """``cpu`` referenced ``nbytes`` of block ``pfn`` at ``now`` (an skb fragment written or
        read, a new slab's free pointers), timed and counted by its caller: the block is stamped
        in ``cpu``'s L2 and LLC and their clocks advance by ``nbytes`` (the LLC's not for a ``reread``
        of lines it holds from another CPU's write); no perf counts."""
        k = ("F", pfn)
        self._order_used(order)
        c2, c3 = self.l2.of_cpu[cpu], self.llc.of_cpu[cpu]
        k3 = c3.advance(now) + nbytes
        k2 = c2._clock + nbytes
        if order == 0:
            c2.stamps[k] = k2
            c3.stamps[k] = k3
        else:
            _stamps(c2, k, 1 << order)[:] = k2
            _stamps(c3, k, 1 << order)[:] = k3
        c2.add_now(nbytes)
        if not reread:  # a re-read of lines the LLC just counted (the skb reader) moves them, adds nothing
            c3.add_stream(now, nbytes, 0)

    def on_free(self, cpu: int, pfn: int, order: int) -> None:
        """Block ``pfn`` was freed by ``cpu``. Its lines stay cached (freeing writes no data; the
        struct page lines are the allocator's); kept as a hook so callers need not change when
        the model does."""

    # -- probabilities ---------------------------------------------------------------------
    def _probs(self, d2: np.ndarray, d3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P(L2 hit), P(LLC hit, L2 miss)) at L2 / LLC reuse distances ``d2`` / ``d3``."""
        q2 = self.l2.p(d2)
        pol = self.org.llc
        if pol == INCLUSIVE:
            q3 = self.llc.p(d3)
            p2 = q2 * q3
            return p2, q3 - p2
        if pol == VICTIM:
            c2 = self.l2.capacity
            d3e = d3 * np.maximum(0.0, d2 - c2) / np.maximum(d2, 1.0)
            return q2, (1.0 - q2) * self.llc.p(d3e)
        return q2, (1.0 - q2) * self.llc.p(d3)

    def _any(self, d2: np.ndarray, d3: np.ndarray) -> np.ndarray:
        """P(cached in L2 or LLC): :meth:`_probs` summed (for inclusive, the LLC alone)."""
        pol = self.org.llc
        if pol == INCLUSIVE:
            return self.llc.p(d3)
        q2 = self.l2.p(d2)
        if pol == VICTIM:
            c2 = self.l2.capacity
            d3 = d3 * np.maximum(0.0, d2 - c2) / np.maximum(d2, 1.0)
        r: np.ndarray = q2 + (1.0 - q2) * self.llc.p(d3)
        return r

    def _probs1(self, d2: float, d3: float) -> tuple[float, float]:
        """:meth:`_probs` of one sub-page, without arrays."""
        q2 = self.l2.p1(d2)
        pol = self.org.llc
        if pol == INCLUSIVE:
            q3 = self.llc.p1(d3)
            return q2 * q3, q3 - q2 * q3
        if pol == VICTIM:
            c2 = self.l2.capacity
            d3 = d3 * max(0.0, d2 - c2) / max(d2, 1.0)
        return q2, (1.0 - q2) * self.llc.p1(d3)

    def _count(
        self, cpu: int, n: int, s2: float, s3: float, streamed: bool, llc_only: bool, starts: float = -1.0,
    ) -> None:
        """Add perf's cache-references / cache-misses for ``n`` sub-pages of which ``s2`` are
        expected in the L2 and ``s3`` in the LLC only. ``starts``: sub-pages at which the streamer
        (re)starts (default all ``n``); the others' lines are all prefetched."""
        sm = n - s2 - s3
        f = self.found
        f[0] += s2
        f[1] += s3
        f[2] += sm
        lines = self.lines_per_sub
        # demand lines per sub-page: the stream's start-up where it (re)starts, none where it continues
        if streamed:
            dem = STREAM_START if starts < 0 else STREAM_START * starts / n
        else:
            dem = lines
        if self._l2_events:
            refs = n * lines + ((n - s2) * (lines - dem) if (streamed and self._amd) else 0.0)
            miss = (n - s2) * dem
        else:
            refs = (n - s2) * (lines if (llc_only or not streamed) else dem)
            miss = sm * dem
        r = self._res[cpu]
        rr = r[0] + refs
        rm = r[1] + miss
        ir, im = int(rr), int(rm)
        r[0] = rr - ir
        r[1] = rm - im
        if ir or im:
            p = self.counters.perf[cpu]
            p[CACHE_REFERENCES] += ir
            p[CACHE_MISSES] += im

    # -- operations ----------------------------------------------------------------------
    def fill(self, cpu: int, key: Hashable, npages: int, order: np.ndarray, duration: int, now: int) -> None:
        """Write whole sub-pages ``order`` (in that order) of page ``key`` over ``duration`` ns
        from ``now``: a ``rep stosb`` clear or a copy destination. Lines still cached (a
        reallocated frame) are write hits; the rest are ownership requests (Intel: no read)."""
        k = self._alias.get(key, key)
        c2, c3 = self.l2.of_cpu[cpu], self.llc.of_cpu[cpu]
        k2, k3 = c2._clock, c3.advance(now)
        n = len(order)
        s2 = s3 = 0.0
        if npages == 1:
            o2, o3 = _stamp1(c2, k), _stamp1(c3, k)
            if o3 > k3 - self.llc.horizon or o2 > k2 - self.l2.horizon:
                s2, s3 = self._probs1(k2 - o2, k3 - o3)
            c2.stamps[k] = k2 + SUBPAGE
            c3.stamps[k] = k3 + c3.rate * duration + SUBPAGE
        else:
            a2, a3 = _stamps(c2, k, npages), _stamps(c3, k, npages)
            old2, old3 = a2[order], a3[order]
            j = _own(n + 1, 1)[1:]
            if _max(old3) >= k3 - self.llc.horizon or _max(old2) >= k2 - self.l2.horizon:
                own = SUBPAGE * (j - 1)  # this clear's own earlier sub-pages
                t = duration * (j - 1) / n
                p2v, p3v = self._probs(k2 - old2 + own, k3 - old3 + c3.rate * t + own)
                s2, s3 = float(_sum(p2v)), float(_sum(p3v))
            a2[order] = k2 + SUBPAGE * j
            a3[order] = k3 + c3.rate * (duration * j / n) + SUBPAGE * j
        c2.add_now(n * SUBPAGE)
        c3.add_stream(now, n * SUBPAGE, duration)
        org = self.org
        if org.clear_rfo:  # the clear reads for ownership: an ascending store stream the streamer follows
            starts = float(n)
            if org.stream_across_pages and n > 1:  # it continues where the next sub-page is the next page
                starts = 1.0 + float(np.count_nonzero(np.diff(order) != 1))
            self._count(cpu, n, s2, s3, streamed=True, llc_only=False, starts=starts)
        else:
            self._count(cpu, n, s2, s3, streamed=False, llc_only=False)

    def access1(
        self, cpu: int, key: Hashable, t_hit: float, t_miss: float, now: int, own_insert_per_sub: int = 0,
        streamed: bool = True,
    ) -> tuple[float, float]:
        """:meth:`access` of a 4 KiB page, without arrays: (expected memory share, expected ns)."""
        k = self._alias.get(key, key)
        c2, c3 = self.l2.of_cpu[cpu], self.llc.of_cpu[cpu]
        k2, k3 = c2._clock, c3.advance(now)
        s2, s3 = self._probs1(k2 - _stamp1(c2, k), k3 - _stamp1(c3, k))
        d = t_miss - (s2 + s3) * (t_miss - t_hit)
        per_sub = SUBPAGE + own_insert_per_sub
        c2.stamps[k] = k2 + per_sub
        c3.stamps[k] = k3 + c3.rate * d + per_sub
        c2.add_now(SUBPAGE)
        c3.add_stream(now, SUBPAGE, int(d))
        self._count(cpu, 1, s2, s3, streamed, t_miss > t_hit)
        return 1.0 - s2 - s3, d

    def access(
        self,
        cpu: int,
        key: Hashable,
        npages: int,
        idx: np.ndarray,
        t_hit: float,
        t_miss: float,
        now: int,
        own_insert_per_sub: int = 0,
        streamed: bool = True,
    ) -> tuple[float, np.ndarray]:
        """A pass over sub-pages ``idx`` of page ``key`` in that order from ``now``: a cached
        sub-page (L2 or LLC) takes ``t_hit`` ns, one from memory ``t_miss``.
        ``own_insert_per_sub``: bytes this CPU also references per sub-page (a copy's
        destination). ``streamed``: each sub-page is walked line by line upwards (the L2
        streamer follows it); False for a pointer chase. Returns (expected sub-pages from
        memory, expected ns per sub-page).

        The distances depend on the time into the pass, which depends on the hits before:
        the causal fixed point, iterated from "all miss" on the expected times. (The L2 is
        private: its clock advances by whole passes, without a rate.)"""
        k = self._alias.get(key, key)
        c2, c3 = self.l2.of_cpu[cpu], self.llc.of_cpu[cpu]
        k2, k3 = c2._clock, c3.advance(now)
        n = len(idx)
        per_sub = SUBPAGE + own_insert_per_sub
        llc_only = t_miss > t_hit
        gap = t_miss - t_hit
        if npages == 1:
            pm, d = self.access1(cpu, key, t_hit, t_miss, now, own_insert_per_sub, streamed)
            return pm, np.array([d])
        a2, a3 = _stamps(c2, k, npages), _stamps(c3, k, npages)
        r3 = c3.rate
        own = _own(n, per_sub)
        i0 = int(idx[0])
        sl: Any = slice(i0, i0 + n) if idx is _RANGES.get((i0, i0 + n)) else idx  # a range: slice, not gather
        b2 = own - a2[sl]
        b2 += k2
        b3 = own - a3[sl]
        b3 += k3
        s2 = s3 = 0.0
        if _min(b3) >= self.llc.horizon and _min(b2) >= self.l2.horizon:
            dur = np.full(n, t_miss)  # nothing of it is cached: no iteration needed
        else:
            inclusive = self.org.llc == INCLUSIVE
            total = n * t_miss
            dur = np.full(n, t_miss)
            x = np.empty(n)
            tol = FIX_TOL * total
            for _ in range(FIX_ITERS):
                dur.cumsum(out=x)
                x -= dur
                if inclusive:  # cached = in the LLC
                    x *= r3
                    x += b3
                    q3 = self.llc.p(x)
                    new = q3 * -gap
                    new += t_miss
                else:
                    new = t_miss - self._any(b2, b3 + r3 * x) * gap
                t = float(_sum(new))
                dur = new
                if abs(t - total) <= tol or r3 == 0.0:
                    break
                total = t
            else:
                self.fixpoint_unconverged += 1
            if inclusive:
                p2 = self.l2.p(b2)
                p2 *= q3
                s2 = float(_sum(p2))
                s3 = float(_sum(q3)) - s2
            else:
                dur.cumsum(out=x)
                x -= dur
                p2, p3 = self._probs(b2, b3 + r3 * x)
                s2, s3 = float(_sum(p2)), float(_sum(p3))
        after = dur.cumsum()
        last = float(after[-1])
        a2[sl] = own + (k2 + per_sub)
        after *= r3
        after += own
        after += k3 + per_sub
        a3[sl] = after
        c2.add_now(n * SUBPAGE)
        c3.add_stream(now, n * SUBPAGE, int(last))
        self._count(cpu, n, s2, s3, streamed, llc_only)
        return n - s2 - s3, dur

    def forget(self, cpu: int, key: Hashable) -> None:
        """The page's data is dead and its frame not tracked (a key never bound to a frame)."""
        k = self._alias.get(key, key)
        self.l2.of_cpu[cpu].stamps.pop(k, None)
        self.llc.of_cpu[cpu].stamps.pop(k, None)
