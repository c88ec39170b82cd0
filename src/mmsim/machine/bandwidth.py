"""Memory bandwidth shared among concurrent streams, per NUMA node: processor sharing.

A stream (a page clear, a copy, the DRAM traffic of a user pass) is an amount
of write-equivalent bytes (a byte read costs ``write_bw / read_bw`` of a byte
written). While ``n`` streams are active on a node, each is served at
``min(core, capacity / n)`` bytes/ns: the node's write bandwidth shared
equally (processor sharing), and never more than one core can stream
(``cost.core_clear_gbs``, the same for every stream of a machine). The share
is re-evaluated whenever a stream starts or ends, so a stream's completion
time moves when others start during it.

Exact with a virtual clock (as in fair-queueing schedulers): ``v`` counts the
bytes served to *each* active stream since the node's first stream; it
advances at ``rate(n)``. A stream of ``b`` bytes starting at virtual time
``v0`` ends when ``v`` reaches ``v0 + b`` (its finish tag), whatever the
arrivals in between; streams end in tag order. The real time of the next end
is ``t + (tag - v) / rate(n)``.

Two kinds of callers:

* **waiters** (:meth:`start_write`: ``clear_huge_page``, the page-table page
  clears) park their task and are woken at the stream's exact end: while a
  task waits on a node, one engine event is kept at the node's next stream
  end, and moved whenever a start changes it.
* **predicted** (:meth:`write_ns`, :meth:`occupy` with a duration from
  :meth:`rate`) get the duration the stream would have if no other stream
  started before it ends (the ends of the active ones are counted); the
  stream itself stays in the sharing with its exact end. Their callers fold
  the duration into a longer busy period (the user passes of usemem and
  thp_memscale accumulate it as pending time), so it cannot be moved later.
  Instead :meth:`lateness` tells, at the task's next stream, how much later
  than predicted the previous one ended; the caller charges that then
  (``mm/memory.py``), so a task's time is its streams' time under the
  sharing, one stream late.

A call at a time before the node's last one (a stream that a caller started
``delay`` ns ahead) starts at that last time: the error is at most the delay.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

from mmsim.machine.model import Machine

EPS = 1e-6  # ns: a stream whose end is within this of ``now`` has ended (float rounding of the walk)

Done = Callable[[int], None]


class _Node:
    """One node's sharing state: real time, virtual clock, active streams by finish tag."""

    __slots__ = ("capacity", "cap", "t", "v", "heap", "waiters", "token", "seq", "tracked", "ended")

    def __init__(self, capacity: float, cap: float) -> None:
        self.capacity = capacity  # bytes/ns (GB/s) written
        self.cap = cap  # bytes/ns: one stream's limit (a core)
        self.t = 0.0
        self.v = 0.0
        self.heap: list[tuple[float, int, Done | None]] = []  # (finish tag, seq, waiter's callback)
        self.waiters = 0
        self.token = 0  # the current wake-up event's; older events are stale
        self.seq = 0
        self.tracked: dict[int, tuple[float, float]] = {}  # predicted stream id -> (finish tag, end at start)
        self.ended: dict[int, float] = {}  # tracked streams that ended -> their end

    def rate(self, n: int) -> float:
        """Bytes/ns each of ``n`` active streams gets."""
        share = self.capacity / n
        return self.cap if self.cap < share else share


class MemoryBandwidth:
    __slots__ = ("machine", "engine", "_nodes", "_rw_ratio", "bytes_written", "bytes_read")

    def __init__(self, machine: Machine, engine: Any = None) -> None:
        self.machine = machine
        self.engine = engine  # needed by start_write only (its end is an engine event)
        core = float(machine.cost.core_clear_gbs)
        self._nodes = [_Node(float(n.write_bw_gbs), core) for n in machine.nodes]
        # A byte read costs write_bw / read_bw of a byte written (read bandwidth is higher).
        self._rw_ratio = [n.write_bw_gbs / n.read_bw_gbs for n in machine.nodes]
        self.bytes_written = [0] * len(machine.nodes)
        self.bytes_read = [0] * len(machine.nodes)

    # -- the sharing ------------------------------------------------------------------
    def _advance(self, nd: _Node, now: float) -> None:
        """Serve the active streams up to ``now``: pop those that end by then, in tag order,
        calling their waiters with their end time (ns, rounded up)."""
        if now <= nd.t:
            return
        heap = nd.heap
        t, v = nd.t, nd.v
        while heap:
            tag = heap[0][0]
            end = t + (tag - v) / nd.rate(len(heap))
            if end > now + EPS:
                break
            _, sid, done = heapq.heappop(heap)
            t, v = (end if end > t else t), tag
            if sid in nd.tracked:
                nd.ended[sid] = end
            if done is not None:
                nd.waiters -= 1
                done(max(0, math.ceil(end - EPS)))
        if heap:
            v += (now - t) * nd.rate(len(heap))
        nd.t, nd.v = now, v

    def _end_of(self, nd: _Node, tag: float) -> float:
        """The real time at which the stream with finish tag ``tag`` ends if no stream starts
        before: the active streams end in tag order, each end raising the others' share."""
        t, v, n = nd.t, nd.v, len(nd.heap)
        for g, _, _ in sorted(nd.heap):
            t += (g - v) / nd.rate(n)
            v = g
            n -= 1
            if g >= tag:
                break
        return t

    def _add(
        self, nd: _Node, now: float, eq_bytes: float, done: Done | None, charged: float = -1.0, end: bool = True
    ) -> float:
        """Start a stream of ``eq_bytes`` at ``now`` (or the node's time if later); returns its
        end if no other stream starts before (0 unless ``end``). ``charged`` >= 0: remember it
        for :meth:`lateness` with the end its caller charged (its id is then ``nd.seq``)."""
        self._advance(nd, now)
        nd.seq += 1
        tag = nd.v + eq_bytes
        heapq.heappush(nd.heap, (tag, nd.seq, done))
        if done is not None:
            nd.waiters += 1
        if charged >= 0.0:
            nd.tracked[nd.seq] = (tag, charged)
        if nd.waiters:
            self._schedule(nd)
        return self._end_of(nd, tag) if end else 0.0

    def _schedule(self, nd: _Node) -> None:
        """While a task waits on the node, keep one engine event at the next end of any stream
        (as the active streams stand): each end changes the others' share."""
        tag = nd.heap[0][0]
        end = nd.t + (tag - nd.v) / nd.rate(len(nd.heap))
        nd.token += 1
        self.engine.call_at(max(self.engine.now, math.ceil(end - EPS)), self._wake, (nd, nd.token))

    def _wake(self, arg: tuple[_Node, int]) -> None:
        nd, token = arg
        if token != nd.token:
            return  # moved by a later start
        self._advance(nd, float(self.engine.now))
        if nd.waiters:
            self._schedule(nd)

    # -- callers ---------------------------------------------------------------------------
    def _check(self, core_gbs: float) -> None:
        if core_gbs != self._nodes[0].cap:
            raise ValueError(f"stream limit {core_gbs} GB/s differs from the machine's core_clear_gbs "
                             f"{self._nodes[0].cap}: processor sharing needs one limit per machine")

    def start_write(self, node: int, nbytes: int, core_gbs: float, now: int, done: Done) -> int:
        """Start a write stream of ``nbytes`` to ``node`` at ``now`` whose task waits for it:
        ``done(end_ns)`` is called (from an engine event, or from a later start that passes its
        end) at its exact end. Returns the ns it would take if no other stream started."""
        self._check(core_gbs)
        self.bytes_written[node] += nbytes
        nd = self._nodes[node]
        start = max(float(now), nd.t)
        return int(self._add(nd, start, float(nbytes), done) - start) + 1

    def write_ns(self, node: int, nbytes: int, core_gbs: float, now: int) -> int:
        """Duration in ns of a write stream of ``nbytes`` to ``node`` starting ``now``, if no
        other stream starts before it ends (its end in the sharing moves if one does)."""
        self._check(core_gbs)
        self.bytes_written[node] += nbytes
        nd = self._nodes[node]
        start = max(float(now), nd.t)
        return int(self._add(nd, start, float(nbytes), None) - start) + 1

    def rate(self, node: int, core_gbs: float, now: int) -> float:
        """Bytes/ns (write-equivalent) a stream starting ``now`` on ``node`` gets at first:
        the smaller of ``core_gbs`` and an equal share with the active streams."""
        self._check(core_gbs)
        nd = self._nodes[node]
        self._advance(nd, float(now))
        return nd.rate(len(nd.heap) + 1)

    def equiv_bytes(self, node: int, read_bytes: float, write_bytes: float) -> float:
        """DRAM traffic in write-equivalent bytes (reads weighted by write_bw / read_bw)."""
        return write_bytes + read_bytes * self._rw_ratio[node]

    def occupy(
        self, node: int, now: int, duration: int, read_bytes: int, write_bytes: int, track: bool = False
    ) -> int:
        """Register the DRAM traffic of a stream whose caller timed it as ``duration`` ns at
        :meth:`rate` (same ``node`` and ``now``): ``duration x rate`` write-equivalent bytes.
        Returns an id for :meth:`lateness` if ``track`` (else 0)."""
        self.bytes_read[node] += read_bytes
        self.bytes_written[node] += write_bytes
        if duration <= 0:
            return 0
        nd = self._nodes[node]
        start = max(float(now), nd.t)
        self._advance(nd, start)
        self._add(nd, start, duration * nd.rate(len(nd.heap) + 1), None, start + duration if track else -1.0, False)
        return nd.seq if track else 0

    def lateness(self, node: int, sid: int, now: int) -> int:
        """How many ns tracked stream ``sid`` ends after the end its caller charged (``now +
        duration`` of :meth:`occupy`): positive when streams that started during it slowed it,
        negative when the ends of others sped it up. As known at ``now``: its end if it has
        ended, else its end as the active streams stand. Forgets it."""
        nd = self._nodes[node]
        if sid not in nd.tracked:
            return 0
        self._advance(nd, float(now))
        tag, predicted = nd.tracked.pop(sid)
        end = nd.ended.pop(sid, None)
        if end is None:
            end = self._end_of(nd, tag)
        return int(end - predicted)

    def ends(self, node: int) -> list[float]:
        """The end times (ns) of ``node``'s active streams, in order, if no other stream starts."""
        nd = self._nodes[node]
        return [self._end_of(nd, tag) for tag, _, _ in sorted(nd.heap)]

    def active(self, node: int, now: int) -> int:
        """Streams still active on ``node`` at ``now``."""
        nd = self._nodes[node]
        self._advance(nd, float(max(now, 0)))
        return len(nd.heap)
