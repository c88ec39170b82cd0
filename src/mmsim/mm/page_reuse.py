"""Is a page's data still in the LLC when it is allocated again?

A small stand-in, kept apart so it can be replaced by the LLC model: every
allocation writes its pages (a clear or a copy), so on each socket a byte
clock advances by the bytes allocated there; a freed block is stamped with
its socket and that clock. When it is allocated again on the same socket
with fewer than one LLC's worth of bytes allocated in between (its LIFO
reuse distance), its lines are taken as still in the LLC (hot); otherwise,
or when it moved to another socket, or was never written, cold.
"""

from __future__ import annotations

from typing import Any

SOCKET_BITS = 8


class PageReuse:
    __slots__ = ("clock", "llc_bytes", "_socket", "hot_pages", "cold_pages")

    def __init__(self, machine: Any) -> None:
        self.clock = [0] * len(machine.sockets)
        l3 = machine.cache("L3")
        # one LLC instance per socket: size x (CPUs per socket / CPUs sharing one instance)
        per_socket = machine.ncpus // len(machine.sockets)
        self.llc_bytes = l3.size_kib * 1024 * max(1, per_socket // l3.shared_by)
        self._socket: list[int] = [machine.cpu_socket(c) for c in range(machine.ncpus)]
        self.hot_pages = 0
        self.cold_pages = 0

    def stamp(self, cpu: int) -> int:
        """The stamp of a block freed now by ``cpu``."""
        s: int = self._socket[cpu]
        return self.clock[s] << SOCKET_BITS | s

    def alloc(self, cpu: int, stamp: int, nbytes: int) -> bool:
        """A block with ``stamp`` is allocated by ``cpu``; True if its data is in this socket's LLC."""
        s = self._socket[cpu]
        now = self.clock[s]
        self.clock[s] = now + nbytes
        hot = stamp >= 0 and (stamp & ((1 << SOCKET_BITS) - 1)) == s and now - (stamp >> SOCKET_BITS) < self.llc_bytes
        if hot:
            self.hot_pages += nbytes >> 12
        else:
            self.cold_pages += nbytes >> 12
        return hot
