"""Byte clocks: the reuse-distance state of one cache instance.

One ``SharedCache`` per cache instance (a core's L2, a socket's or CCD's
L3), shared by every CPU under it. Its state is a *byte clock*: the number
of bytes referenced in it so far by all of those CPUs — page clears, copy
sources and destinations, user reads and writes. The clock advances
continuously: every stream registers its rate for its duration (a heap of
stream ends, like ``machine/bandwidth.py``), so ``clock(t)`` is exact for
the streams known at ``t``. Every reference counts, hits included (a hit
moves its line to MRU above the older lines it passes). Repeated references
to the same line within the interval count again, which overstates the
distance for data re-read by many CPUs, like the zero page; the streaming
workloads modelled here re-reference little.

Stamps are kept per (cache instance, page key) as a numpy array of sub-page
stamps (the clock when each 4 KiB sub-page was last referenced). Stamps no
access could still hit (older than ``horizon``) are pruned. What a distance
means — hit or miss, with which probability — is
:mod:`mmsim.machine.hierarchy`'s business.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Any

import numpy as np

from mmsim.machine.model import Machine

SUBPAGE = 4096  # granularity of the model: one base page
NEVER = -1e30  # stamp of a sub-page never inserted (always a miss)
_max = np.maximum.reduce  # ndarray.max() without its Python wrapper (numpy/_core/_methods.py _amax)



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
        # a page's sub-page stamps; a 4 KiB page's one stamp is a plain float (cheaper than an array)
        self.stamps: dict[Hashable, Any] = {}
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

    def add_now(self, nbytes: float) -> None:
        """Insert ``nbytes`` at once (a private cache whose own streams need no rate)."""
        self._clock += nbytes
        self._since_prune += nbytes
        if self._since_prune > self.horizon:
            self._prune()

    def _prune(self) -> None:
        """Drop stamp arrays no future access can hit (all older than capacity)."""
        self._since_prune = 0.0
        horizon = self._clock - self.horizon
        amax = _max
        dead = [k for k, a in self.stamps.items() if (a if a.__class__ is float else amax(a)) < horizon]
        for k in dead:
            del self.stamps[k]
