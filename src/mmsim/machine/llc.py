"""The shared last-level cache, as reuse distance in bytes inserted.

One ``SharedCache`` per LLC instance (a socket's L3; a Knights Landing tile's
L2 where that is the last level), shared by every CPU under it. Its state
is a *byte clock*: the number of bytes referenced in it so far by all of
those CPUs — page clears, copy sources and destinations, user reads and
writes. The clock advances continuously: every stream registers its rate for its duration (a heap of stream ends, like
``machine/bandwidth.py``), so ``clock(t)`` is exact for the streams known at
``t``.

A 4 KiB sub-page last referenced at clock ``c`` is still cached at a later
access when fewer than ``capacity`` bytes of *other distinct data* were
referenced since, ``clock(now) - c < capacity``: the LRU stack-distance rule
for a fully associative cache. Every reference counts, hits included — a
hit moves its line to MRU above the older lines it passes — so the clock
advances with every sub-page written, read, cleared or copied. (Repeated
references to the same line within the interval count again, which
overstates the distance for data re-read by many CPUs, like the zero page;
the streaming workloads modelled here re-reference little.) Set
associativity and the replacement policy of real LLCs (pseudo-LRU,
adaptive insertion) are not modelled: this is the capacity effect only, the
one the clear/copy order changes act on (c79b57e462b5: "the begin of huge
page is evicted from the cache after we finishing clearing the end").

Stamps are kept per (cache instance, page key) as a numpy array of sub-page
stamps; all work is vectorised over the 512 sub-pages of a huge page, never
a Python call per line. Stamps that no access could still hit are pruned.

The counters produced are perf's ``cache-references`` / ``cache-misses``
(LLC references and misses, per 64-byte line).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Any

import numpy as np

from mmsim.machine.model import Machine
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES

SUBPAGE = 4096  # granularity of the model: one base page
NEVER = -1e30  # stamp of a sub-page never inserted (always a miss)
FIXPOINT_ITERS = 64
_NEVER1 = [NEVER]  # np.array(_NEVER1) == np.full(1, NEVER), built faster


def last_level(machine: Machine) -> Any:
    """The last cache level of ``machine`` (L3, or L2 on machines without one)."""
    return machine.caches[-1]


class SharedCache:
    """One LLC instance: capacity, byte clock and sub-page stamps."""

    __slots__ = ("capacity", "horizon", "line", "_t", "_clock", "_rate", "_ends", "stamps", "_since_prune")

    def __init__(self, capacity: int, line: int, horizon: float = 0.0) -> None:
        self.capacity = float(capacity)
        # distance past which no stamp can hit (pruned): the capacity for exact LRU; further for a
        # set-associative level, where a line survives with falling probability (machine/hierarchy.py)
        self.horizon = float(horizon) if horizon > 0 else float(capacity)
        self.line = line
        self._t = 0
        self._clock = 0.0
        self._rate = 0.0  # bytes/ns being inserted now, all streams
        self._ends: list[tuple[int, float]] = []
        self.stamps: dict[Hashable, np.ndarray] = {}
        self._since_prune = 0.0

    def advance(self, now: int) -> float:
        """The byte clock at ``now`` (``now`` never goes backwards)."""
        ends = self._ends
        t, clk, rate = self._t, self._clock, self._rate
        if now < t:
            now = t
        while ends and ends[0][0] <= now:
            e, r = heapq.heappop(ends)
            clk += rate * (e - t)
            t = e
            rate -= r
        clk += rate * (now - t)
        self._t, self._clock, self._rate = now, clk, (rate if rate > 1e-12 else 0.0)
        return clk

    @property
    def rate(self) -> float:
        """Insertion rate (bytes/ns) of the streams active at the last ``advance``."""
        return self._rate

    def add_stream(self, now: int, nbytes: float, duration: int) -> None:
        """Insert ``nbytes`` uniformly over ``[now, now + duration]``
        (call ``advance(now)`` first)."""
        if nbytes <= 0:
            return
        if duration <= 0:
            self._clock += nbytes
        else:
            r = nbytes / duration
            self._rate += r
            heapq.heappush(self._ends, (now + duration, r))
        self._since_prune += nbytes
        if self._since_prune > self.horizon:
            self._prune()

    def _prune(self) -> None:
        """Drop stamp arrays no future access can hit (all older than capacity)."""
        self._since_prune = 0.0
        horizon = self._clock - self.horizon
        # (a 4 KiB page's array has one stamp: index it rather than pay numpy's reduction)
        dead = [k for k, a in self.stamps.items() if (a[0] if len(a) == 1 else a.max()) < horizon]
        for k in dead:
            del self.stamps[k]


class CacheModel:
    """All LLC instances of a machine and the operations the mm code performs."""

    def __init__(self, machine: Machine, counters: Any) -> None:
        llc = last_level(machine)
        self.level = llc.name
        self.counters = counters
        tpc = machine.sockets[0].threads_per_core
        cores_per = max(1, llc.shared_by // tpc)
        ncores = machine.ncores
        self._inst: list[int] = [(c % ncores) // cores_per for c in range(machine.ncpus)]
        n = max(self._inst) + 1
        self.caches: list[SharedCache] = [SharedCache(llc.size_kib * 1024, llc.line_bytes) for _ in range(n)]
        self.lines_per_sub = SUBPAGE // llc.line_bytes
        self.fixpoint_unconverged = 0

    def of_cpu(self, cpu: int) -> SharedCache:
        return self.caches[self._inst[cpu]]

    def _count(self, cpu: int, refs: int, misses: int) -> None:
        p = self.counters.perf[cpu]
        p[CACHE_REFERENCES] += refs * self.lines_per_sub
        p[CACHE_MISSES] += misses * self.lines_per_sub

    def fill(self, cpu: int, key: Hashable, npages: int, order: np.ndarray, duration: int, now: int) -> None:
        """Write whole sub-pages ``order`` (in that order) of page ``key`` over
        ``duration`` ns starting ``now``: a page clear or a copy destination.
        The lines were not cached (a new page), so every line is a reference
        and a miss; each sub-page is stamped at the clock when it is written."""
        c = self.of_cpu(cpu)
        clk = c.advance(now)
        n = len(order)
        a = c.stamps.get(key)
        if a is None or len(a) != npages:
            a = c.stamps[key] = np.array(_NEVER1) if npages == 1 else np.full(npages, NEVER)
        if n == 1:
            a[int(order[0])] = clk + c.rate * duration + SUBPAGE
        else:
            j = np.arange(1, n + 1, dtype=np.float64)
            a[order] = clk + c.rate * (duration * j / n) + SUBPAGE * j
        c.add_stream(now, n * SUBPAGE, duration)
        self._count(cpu, n, n)

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
    ) -> tuple[int, np.ndarray]:
        """Access sub-pages ``idx`` of page ``key`` in that order, starting
        ``now``: a cached sub-page takes ``t_hit`` ns, a missed one ``t_miss``
        ns. ``own_insert_per_sub``: bytes this CPU also references per
        sub-page processed (a copy's destination). Returns (misses,
        per-sub-page durations).

        Whether sub-page k hits depends on its distance
        ``clock(now) - stamp_k + R x_k + own_k``, where ``R`` is the
        reference rate of the other streams, ``x_k`` the time before k (which
        depends on the hits before k: a hit is faster) and ``own_k`` this
        CPU's own references before k. That causal system is solved by
        iterating the monotone map from "all miss" to its least fixed point
        (the causal solution), vectorised.
        """
        c = self.of_cpu(cpu)
        clk = c.advance(now)
        n = len(idx)
        a = c.stamps.get(key)
        if a is None or len(a) != npages:
            a = c.stamps[key] = np.full(npages, NEVER)
        if n == 1:  # one sub-page: the same rule without arrays (4 KiB pages)
            i = int(idx[0])
            hit1 = clk - a[i] < c.capacity
            d = t_hit if hit1 else t_miss
            a[i] = clk + c.rate * d + SUBPAGE + own_insert_per_sub
            c.add_stream(now, SUBPAGE, int(d))
            self._count(cpu, 1, 0 if hit1 else 1)
            return (0 if hit1 else 1), np.array([d])
        base = clk - a[idx]
        rate = c.rate
        per_sub = SUBPAGE + own_insert_per_sub
        own = np.arange(n, dtype=np.float64) * per_sub
        hit = np.zeros(n, dtype=bool)
        cap = c.capacity
        for _ in range(FIXPOINT_ITERS):
            dur = np.where(hit, t_hit, t_miss)
            x = np.cumsum(dur) - dur
            new = (base + rate * x + own) < cap
            if np.array_equal(new, hit):
                break
            hit = new
        else:
            self.fixpoint_unconverged += 1
        dur = np.where(hit, t_hit, t_miss)
        nmiss = int(n - hit.sum())
        after = np.cumsum(dur)
        a[idx] = clk + rate * after + own + per_sub
        c.add_stream(now, n * SUBPAGE, int(after[-1]) if n else 0)
        self._count(cpu, n, nmiss)
        return nmiss, dur

    def forget(self, cpu: int, key: Hashable) -> None:
        """The page was freed (its contents are dead)."""
        self.of_cpu(cpu).stamps.pop(key, None)
