"""Memory bandwidth shared among concurrent streams, per NUMA node.

A stream (a page clear, a copy, a user-space sequential write) runs at the
smaller of one core's bandwidth and its fair share of the node's bandwidth
among the streams active on that node when it starts. The share is fixed
for the stream's duration: streams are chunks of at most a huge page, short
next to the changes in concurrency, so the error is second order. Streams
end on their own (a per-node heap of end times, expired lazily), so a
caller can fold a stream into a longer busy period without an end event.
"""

from __future__ import annotations

import heapq

from mmsim.machine.model import Machine


class MemoryBandwidth:
    __slots__ = ("machine", "_ends", "_write_gbs", "bytes_written")

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self._ends: list[list[int]] = [[] for _ in machine.nodes]
        self._write_gbs = [n.write_bw_gbs for n in machine.nodes]
        self.bytes_written = [0] * len(machine.nodes)

    def write_ns(self, node: int, nbytes: int, core_gbs: float, now: int) -> int:
        """Duration in ns of a write stream of ``nbytes`` to ``node`` starting ``now``."""
        ends = self._ends[node]
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        share = self._write_gbs[node] / (len(ends) + 1)
        rate = core_gbs if core_gbs < share else share  # GB/s == bytes/ns
        d = int(nbytes / rate) + 1
        heapq.heappush(ends, now + d)
        self.bytes_written[node] += nbytes
        return d

    def active(self, node: int, now: int) -> int:
        return sum(1 for e in self._ends[node] if e > now)
