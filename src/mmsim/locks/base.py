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

    def stat(self, name: str, kind: str) -> LockStat:
        """The lock_stat entry of a lock *class* (all instances share it)."""
        s = self.stats.get(name)
        if s is None:
            s = self.stats[name] = LockStat(name=name, kind=kind, instances=0)
        s.instances += 1
        return s


class CacheLine:
    """One cache line that several CPUs write with atomics.

    ``rmw(cpu)`` returns the ns until ``cpu``'s atomic completes: it waits
    for the line to be free (``free_at``), then pays the transfer from the
    last owner. State is two numbers, so millions of atomics cost no events.
    """

    __slots__ = ("machine", "owner", "free_at", "transfers")

    def __init__(self, machine: Machine, owner: int = 0) -> None:
        self.machine = machine
        self.owner = owner
        self.free_at = 0
        self.transfers = 0

    def rmw(self, cpu: int, now: int) -> int:
        start = self.free_at if self.free_at > now else now
        if self.owner != cpu:
            cost = int(self.machine.xfer_ns(self.owner, cpu))
            self.owner = cpu
            self.transfers += 1
        else:
            cost = 0
        self.free_at = start + cost
        return self.free_at - now
