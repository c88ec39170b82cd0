"""Spinlocks: the ticket lock (x86, v2.6.25 .. v4.1) and the queued spinlock
(qspinlock, x86 default since v4.2, kernel/locking/qspinlock.c).

Both grant the lock in FIFO order; they differ in what a hand-off costs.

* **Ticket** (``arch/x86/include/asm/spinlock.h``, ``__ticket_spin_lock``):
  every waiter spins reading ``lock->tickets.head`` on the *same* line. The
  release (``__ticket_unlock``: ``head++``) invalidates every waiter's copy;
  all of them re-read the line, and the home agent serves those reads one at
  a time, the next ticket holder at a uniformly random position among them.
  The hand-off therefore costs the releaser→next transfer plus, on average,
  half of the re-reads of the other waiters: it grows linearly with the
  number of waiters. This is the Markov model of Boyd-Wickizer, Kaashoek,
  Morris and Zeldovich, "Non-scalable locks are dangerous", Linux Symposium
  2012, §3 (collapse when hand-off time grows with waiters); each re-read
  is charged the line transfer from the lock's home CPU to the waiter.
* **Queued** (MCS, ``queued_spin_lock_slowpath``): each waiter spins on its
  own per-CPU ``mcs_spinlock`` node; only the queue head watches the lock
  word. A hand-off is one transfer of the lock word to the head, whatever
  the number of waiters.

The lock word lives on a :class:`~mmsim.locks.base.CacheLine` that other
objects may share (``mm->page_table_lock`` shares its line with
``mmap_sem.count`` in ``struct mm_struct``): ticket waiters are registered
as spinners on that line, so *any* write to it — a new ticket (``xadd``), the
release, or an unrelated atomic on a neighbouring field — sets off the
re-read storm and occupies the line.

Spinning is busy CPU time, charged on grant to the waiter's CPU under the
function that spins (``_raw_spin_lock`` for ticket locks, whose spin loop is
inlined there; ``native_queued_spin_lock_slowpath`` for qspinlock), so the
cycle profile shows where the time went. lock_stat counters are kept inside.
"""

from __future__ import annotations

from collections import deque
from enum import Enum
from typing import Any

from mmsim.engine.core import PARK, Task
from mmsim.locks.base import CacheLine, LockContext


class SpinlockKind(str, Enum):
    TICKET = "ticket"
    QUEUED = "queued"


class Spinlock:
    __slots__ = (
        "ctx", "name", "kind", "stat", "holder", "acquired_at", "waiters",
        "line", "_spin_func", "_xfer",
    )

    def __init__(
        self, ctx: LockContext, name: str, kind: SpinlockKind, home_cpu: int = 0, line: CacheLine | None = None
    ) -> None:
        kind = ctx.spin_kinds.get(name, kind)  # a per-class spinlock.CLASS policy
        self.ctx = ctx
        self.name = name
        self.kind = kind
        self.stat = ctx.stat(name, f"spinlock({kind.value})")
        self.holder: Task | None = None
        self.acquired_at = 0
        self.waiters: deque[tuple[Task, int]] = deque()
        self.line = line if line is not None else CacheLine(ctx.machine, home_cpu)
        self._spin_func = (
            "_raw_spin_lock" if kind is SpinlockKind.TICKET else "native_queued_spin_lock_slowpath"
        )
        self._xfer = ctx.machine.xfer_ns

    def acquire(self, task: Task) -> Any:
        """``spin_lock()``. Returns ns to yield (uncontended) or PARK (queued)."""
        st = self.stat
        st.acquisitions += 1
        cpu = task.cpu
        now = self.ctx.engine.now
        # xadd on the ticket / xchg on the MCS tail: one RMW of the lock line
        cost = self.line.rmw(cpu, now)
        if self.holder is None and not self.waiters:
            self.holder = task
            self.acquired_at = now + cost
            return self.ctx.counters.busy(cpu, "_raw_spin_lock", cost)
        st.contentions += 1
        self.waiters.append((task, now))
        if self.kind is SpinlockKind.TICKET:
            self.line.add_spinner(cpu)
        return PARK

    def release(self, task: Task) -> int:
        """``spin_unlock()``: hand the lock to the next waiter, if any. Returns 0."""
        if self.holder is not task:
            raise RuntimeError(f"{self.name}: released by {task!r}, held by {self.holder!r}")
        now = self.ctx.engine.now
        st = self.stat
        hold = now - self.acquired_at
        st.hold_ns_total += hold
        if hold > st.hold_ns_max:
            st.hold_ns_max = hold
        rel_cpu = task.cpu
        if not self.waiters:
            self.holder = None
            return 0
        nxt, since = self.waiters.popleft()
        ncpu = nxt.cpu
        line = self.line
        start = line.free_at if line.free_at > now else now
        x = self._xfer(rel_cpu, ncpu, modified=True)  # the unlock store left the lock word dirty
        if self.kind is SpinlockKind.TICKET:
            # head++ invalidates every spinner; the next ticket holder is served at a
            # uniformly random place in the re-read storm: half the others on average.
            line.remove_spinner(ncpu)
            h = start - now + int(x + line.spin_sum / 2)
        else:
            h = start - now + int(x)
        line.free_at = start + int(x + line.spin_sum)
        line.owner = ncpu
        self.holder = nxt
        self.acquired_at = now + h
        wait = now + h - since
        st.wait_ns_total += wait
        if wait > st.wait_ns_max:
            st.wait_ns_max = wait
        self.ctx.counters.busy(ncpu, self._spin_func, wait)
        self.ctx.engine.wake(nxt, h)
        return 0
