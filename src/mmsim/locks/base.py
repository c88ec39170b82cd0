"""What every lock needs: the engine, the machine's line-transfer costs, the
counters and the scheduler (for sleeping locks), and a cache line model.

A contended cache line is a serial resource: a locked read-modify-write
(``lock xadd``, ``lock cmpxchg``) has to own the line exclusively, so
concurrent atomics from different CPUs complete one after another, each
paying the transfer from the previous owner (NUMA distance matters). That is
the whole cost of an uncontended rwsem read acquisition on a shared
``mm_struct`` — the mechanism behind "a read lock is still an atomic on a
shared cache line".

Spinners (CPUs polling the line with plain loads: ticket-lock waiters, the
qspinlock pending waiter and MCS queue head) hold shared copies. Any write
invalidates all of them and each re-reads the line (the *re-read storm*).
The re-reads are served one after another, each from the line's current
holder: the first from the writer, whose copy is modified (a HITM transfer),
every later one from the previous reader (a clean HIT forward, MESIF's F
state). The order is the order the requests reach the line, which nothing in
the model fixes; following Boyd-Wickizer et al. ("Non-scalable locks are
dangerous", Linux Symposium 2012, §3: the waiter that gets the lock is at a
uniformly random place among the re-readers) each read is charged the
*expected* cost over that order, so the model stays deterministic:

* first read: mean over spinners ``w`` of ``HITM(writer, w)``;
* each later read: mean over ordered spinner pairs ``(i, j)`` of ``HIT(i, j)``;
* the line is busy for the whole storm; a given reader is served, on
  average, after the first read and half of the others.

After a storm the line is Shared among the readers; the next write pays the
expected transfer from a random reader (the F-state holder) to the writer.

All transfer costs come from :func:`_transfer_ns`, the one place that asks the
machine: HITM (``line_xfer_*_ns``) for modified lines, HIT (``line_hit_*_ns``)
for clean forwards, by distance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmsim.engine.core import Engine
from mmsim.engine.cpu import Scheduler
from mmsim.machine.model import Machine
from mmsim.metrics.counters import Counters, LockStat

SHARED = -1  # CacheLine.owner after a re-read storm: Shared among the last readers


def _transfer_ns(machine: Machine, src: int, dst: int, modified: bool) -> float:
    """ns to bring a line held by ``src`` to ``dst``: a HITM (``modified``, the
    line is dirty in ``src``'s cache) or a HIT (clean forward), from the cost
    model's line-transfer figures by distance (``Machine.xfer_ns``). The single
    place lock code reads transfer costs."""
    return machine.xfer_ns(src, dst, modified=modified)


class LineCosts:
    """CPU x CPU transfer tables (HITM and HIT) of one machine, as nested lists
    for scalar look-ups and numpy arrays for sums over spinner sets. Built once
    per machine (:func:`line_costs`)."""

    __slots__ = ("hitm", "hit", "hitm_np", "hit_np", "hit_t")

    def __init__(self, machine: Machine) -> None:
        n = machine.ncpus
        self.hitm = [[_transfer_ns(machine, a, b, True) for b in range(n)] for a in range(n)]
        self.hit = [[_transfer_ns(machine, a, b, False) for b in range(n)] for a in range(n)]
        self.hitm_np = np.array(self.hitm, dtype=np.float64)
        self.hit_np = np.array(self.hit, dtype=np.float64)
        self.hit_t = np.ascontiguousarray(self.hit_np.T)


_COSTS: dict[int, tuple[Machine, LineCosts]] = {}


def line_costs(machine: Machine) -> LineCosts:
    """The machine's :class:`LineCosts` (cached; a few machines per process)."""
    hit = _COSTS.get(id(machine))
    if hit is not None and hit[0] is machine:
        return hit[1]
    if len(_COSTS) > 8:
        _COSTS.clear()
    lc = LineCosts(machine)
    _COSTS[id(machine)] = (machine, lc)
    return lc


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
    """One cache line that several CPUs write with atomics, and spinners read.

    ``rmw(cpu, now)`` returns the ns until ``cpu``'s locked RMW completes: it
    waits for the line to be free (``free_at``), then pays the transfer from
    the current holder; if CPUs are spinning on the line, the write sets off
    the re-read storm (module docstring) and the line stays busy until it is
    over. State is a few numbers and a per-CPU spinner count: millions of
    atomics cost no events. Several objects may share one line (false
    sharing), e.g. ``page_table_lock`` and ``mmap_sem.count`` in
    ``struct mm_struct``.
    """

    __slots__ = ("costs", "owner", "home", "free_at", "transfers", "nspin", "_cnt", "_pairs", "_snap", "_nsnap")

    def __init__(self, machine: Machine, owner: int = 0) -> None:
        self.costs = line_costs(machine)
        self.owner = owner
        self.home = owner
        self.free_at = 0
        self.transfers = 0
        self.nspin = 0
        # spinners per CPU, allocated on the first spinner: most lines never have one, and a
        # run has a line per shared struct page
        self._cnt: np.ndarray | None = None
        self._pairs = 0.0  # sum of HIT(i, j) over ordered pairs of distinct spinners
        self._snap: np.ndarray | None = None  # readers of the last storm (owner == SHARED)
        self._nsnap = 0

    # -- spinners ------------------------------------------------------------
    def add_spinner(self, cpu: int) -> None:
        c = self.costs
        cnt = self._cnt
        if cnt is None:
            cnt = self._cnt = np.zeros(len(c.hitm), dtype=np.float64)
        if self.nspin:
            self._pairs += float(c.hit_np[cpu] @ cnt + c.hit_t[cpu] @ cnt)
        cnt[cpu] += 1.0
        self.nspin += 1

    def remove_spinner(self, cpu: int) -> None:
        cnt = self._cnt
        assert cnt is not None, "remove_spinner without add_spinner"
        cnt[cpu] -= 1.0
        self.nspin -= 1
        if self.nspin:
            c = self.costs
            self._pairs -= float(c.hit_np[cpu] @ cnt + c.hit_t[cpu] @ cnt)
        else:
            self._pairs = 0.0

    def storm(self, writer: int) -> tuple[float, float]:
        """The re-read storm a write by ``writer`` sets off: (first read, each
        later read), expected ns. (0, 0) without spinners."""
        n = self.nspin
        if not n or self._cnt is None:
            return 0.0, 0.0
        first = float(self.costs.hitm_np[writer] @ self._cnt) / n
        per = self._pairs / (n * (n - 1)) if n > 1 else 0.0
        return first, per

    # -- writes --------------------------------------------------------------
    def rfo_ns(self, cpu: int) -> float:
        """Expected ns to get the line exclusive at ``cpu`` (read-for-ownership)."""
        o = self.owner
        if o == cpu:
            return 0.0
        if o == SHARED and self._snap is not None:
            return float(self.costs.hit_t[cpu] @ self._snap) / self._nsnap
        return self.costs.hitm[o][cpu]

    def write(self, cpu: int, now: int) -> tuple[int, float, float]:
        """A write by ``cpu`` at ``now``: queue for the line, take it, set off
        the storm. Returns (ns until the write completes, first read, each later
        read) of the storm; the line is busy until the storm ends."""
        start = self.free_at if self.free_at > now else now
        cost = self.rfo_ns(cpu)
        if cost:
            self.transfers += 1
        first, per = self.storm(cpu)
        done = start - now + int(cost)
        if self.nspin and self._cnt is not None:
            self.free_at = start + int(cost + first + (self.nspin - 1) * per)
            self.owner = SHARED
            self._snap = self._cnt.copy()
            self._nsnap = self.nspin
        else:
            self.free_at = start + int(cost)
            self.owner = cpu
        return done, first, per

    def rmw(self, cpu: int, now: int) -> int:
        """A locked RMW by ``cpu``: ns until it completes."""
        return self.write(cpu, now)[0]
