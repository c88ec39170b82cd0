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
    __slots__ = ("machine", "_ends", "_write_gbs", "_rw_ratio", "bytes_written", "bytes_read")

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self._ends: list[list[int]] = [[] for _ in machine.nodes]
        self._write_gbs = [n.write_bw_gbs for n in machine.nodes]
        # A byte read costs write_bw / read_bw of a byte written (read bandwidth is higher).
        self._rw_ratio = [n.write_bw_gbs / n.read_bw_gbs for n in machine.nodes]
        self.bytes_written = [0] * len(machine.nodes)
        self.bytes_read = [0] * len(machine.nodes)

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

    def rate(self, node: int, core_gbs: float, now: int) -> float:
        """Bytes/ns (write-equivalent) a stream starting ``now`` on ``node`` gets:
        the smaller of ``core_gbs`` and a fair share of the node."""
        ends = self._ends[node]
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        share = self._write_gbs[node] / (len(ends) + 1)
        return core_gbs if core_gbs < share else share

    def equiv_bytes(self, node: int, read_bytes: float, write_bytes: float) -> float:
        """DRAM traffic in write-equivalent bytes (reads weighted by write_bw / read_bw)."""
        return write_bytes + read_bytes * self._rw_ratio[node]

    def occupy(self, node: int, now: int, duration: int, read_bytes: int, write_bytes: int) -> None:
        """Register a stream that keeps ``node`` busy for ``duration`` ns from ``now``."""
        if duration > 0:
            heapq.heappush(self._ends[node], now + duration)
        self.bytes_read[node] += read_bytes
        self.bytes_written[node] += write_bytes

    def active(self, node: int, now: int) -> int:
        return sum(1 for e in self._ends[node] if e > now)
