"""What every lock needs: the engine, the machine's line-transfer costs, the
counters and the scheduler (for sleeping locks), and a cache line model.

A contended cache line is a serial resource: a locked read-modify-write
(``lock xadd``, ``lock cmpxchg``) has to own the line exclusively, so
concurrent atomics from different CPUs complete one after another, each
paying the transfer from the previous owner (NUMA distance matters). That is
the whole cost of an uncontended rwsem read acquisition on a shared
``mm_struct`` — the mechanism behind "a read lock is still an atomic on a
shared cache line".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmsim.engine.core import Engine
from mmsim.engine.cpu import Scheduler
from mmsim.machine.model import Machine
from mmsim.metrics.counters import Counters, LockStat


@dataclass
class LockContext:
    """Shared by every lock of a run; owns the lock_stat table."""

    engine: Engine
    machine: Machine
    counters: Counters
    sched: Scheduler
    stats: dict[str, LockStat] = field(default_factory=dict)
    # lock class -> SpinlockKind where the kernel sets one class apart (policy spinlock.CLASS)
    spin_kinds: dict[str, Any] = field(default_factory=dict)

    def stat(self, name: str, kind: str) -> LockStat:
        """The lock_stat entry of a lock *class* (all instances share it)."""
        s = self.stats.get(name)
        if s is None:
            s = self.stats[name] = LockStat(name=name, kind=kind, instances=0)
        s.instances += 1
        return s


class CacheLine:
    """One cache line that several CPUs write with atomics, and spinners read.

    ``rmw(cpu, now)`` returns the ns until ``cpu``'s locked RMW completes: it
    waits for the line to be free (``free_at``), then pays the transfer from
    the last owner. If CPUs are spinning on the line (ticket-lock waiters
    reading ``head``), the write invalidates their copies and all of them
    re-read it; the home agent serves those reads one at a time, so the line
    stays busy for the sum of their transfers (``spin_sum``) before the next
    RMW can have it. State is a few numbers: millions of atomics cost no
    events. Several objects may share one line (false sharing), e.g.
    ``page_table_lock`` and ``mmap_sem.count`` in ``struct mm_struct``.
    """

    __slots__ = ("machine", "owner", "home", "free_at", "transfers", "spin_sum", "nspin", "_xfer")

    def __init__(self, machine: Machine, owner: int = 0) -> None:
        self.machine = machine
        self.owner = owner
        self.home = owner
        self.free_at = 0
        self.transfers = 0
        self.spin_sum = 0.0
        self.nspin = 0
        self._xfer = machine.xfer_ns

    def add_spinner(self, cpu: int) -> None:
        self.nspin += 1
        self.spin_sum += self._xfer(self.home, cpu, modified=True)

    def remove_spinner(self, cpu: int) -> None:
        self.nspin -= 1
        self.spin_sum -= self._xfer(self.home, cpu, modified=True)
        if self.nspin == 0:
            self.spin_sum = 0.0

    def rmw(self, cpu: int, now: int) -> int:
        start = self.free_at if self.free_at > now else now
        if self.owner != cpu:
            cost = int(self._xfer(self.owner, cpu, modified=True))  # the RMW left it dirty
            self.owner = cpu
            self.transfers += 1
        else:
            cost = 0
        self.free_at = start + cost + int(self.spin_sum)
        return start + cost - now
