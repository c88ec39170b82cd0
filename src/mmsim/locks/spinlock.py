"""Spinlocks: the ticket lock (x86, v2.6.25 .. v4.1) and the queued spinlock
(qspinlock, x86 default since v4.2, a33fda35e3a7, kernel/locking/qspinlock.c).

Both grant the lock in FIFO order; they differ in who spins on which line,
and so in what a hand-off costs.

* **Ticket** (v3.12 ``arch/x86/include/asm/spinlock.h``: ``arch_spin_lock``
  takes a ticket with ``xadd`` and spins reading ``lock->tickets.head``;
  ``arch_spin_unlock`` does ``head++``). Every waiter spins on the lock's
  line. The release is a write by the releasing CPU: it takes the line from
  its current holder, invalidates every waiter's copy, and the waiters'
  re-reads are served one after another from the line's current holder
  (:class:`~mmsim.locks.base.CacheLine`: the first from the releaser, HITM;
  the others clean forwards). The next ticket holder is, on average, half-way
  through that storm, and the line is busy until all of it is over, so a
  hand-off grows linearly with the number of waiters: the collapse of
  Boyd-Wickizer, Kaashoek, Morris and Zeldovich, "Non-scalable locks are
  dangerous", Linux Symposium 2012.
* **Queued** (v4.2+ ``queued_spin_lock`` / ``queued_spin_lock_slowpath``):
  the first contender sets the *pending* bit and spins on the lock word; the
  next ones queue on per-CPU MCS nodes (``xchg_tail``, then a write of the
  predecessor's ``node->next``), and only the queue head spins on the lock
  word; the others spin on their own node, which nobody else touches. So at
  most two CPUs (pending waiter and queue head) re-read the lock word after a
  release. When the queue head takes the lock it passes the head role on
  with ``arch_mcs_spin_unlock_contended(&next->locked)``: a write of the next
  waiter's node line, whose owner is spinning on it (one HITM). A hand-off is
  therefore the lock word's transfer plus, for a queue head, the next
  waiter's node: constant in the number of waiters. The new holder (pending
  waiter or queue head) then stores to the lock word
  (``clear_pending_set_locked`` / ``set_locked``, or the last waiter's
  ``cmpxchg``): one more write of the line, made when its re-read has seen
  the lock free (:meth:`Spinlock._granted`). Not modelled: a releaser that
  comes straight back re-taking the lock by the fast path while another CPU
  waits out the pending hand-over (``_Q_PENDING_LOOPS``); grants are FIFO.

The lock word lives on a :class:`~mmsim.locks.base.CacheLine` that other
objects may share (``mm->page_table_lock`` shares its line with
``mmap_sem.count`` in ``struct mm_struct``): a write to any of them sets off
the spinners' storm.

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

# Roles of a queued-spinlock waiter
_PENDING, _HEAD, _QUEUED = 0, 1, 2


class SpinlockKind(str, Enum):
    TICKET = "ticket"
    QUEUED = "queued"


class Spinlock:
    __slots__ = (
        "ctx", "name", "kind", "stat", "holder", "acquired_at", "waiters", "line", "last_cpu", "_spin_func",
        "_ticket",
    )

    def __init__(
        self, ctx: LockContext, name: str, kind: SpinlockKind, home_cpu: int = 0, line: CacheLine | None = None
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.kind = kind
        self.stat = ctx.stat(name, f"spinlock({kind.value})")
        self.holder: Task | None = None
        self.acquired_at = 0
        # (task, since, role, node_link_ns); role is unused by ticket locks
        self.waiters: deque[list[Any]] = deque()
        self.line = line if line is not None else CacheLine(ctx.machine, home_cpu)
        self.last_cpu = -1  # CPU of the last acquisition (lock_stat's bounces)
        self._ticket = kind is SpinlockKind.TICKET
        self._spin_func = "_raw_spin_lock" if self._ticket else "native_queued_spin_lock_slowpath"

    def acquire(self, task: Task) -> Any:
        """``spin_lock()``. Returns ns to yield (uncontended) or PARK (spinning)."""
        st = self.stat
        cpu = task.cpu
        now = self.ctx.engine.now
        st.note_acquire(cpu, self.last_cpu)
        # xadd on the ticket / cmpxchg, set-pending or xchg_tail on the lock word: one RMW
        cost = self.line.rmw(cpu, now)
        if self.holder is None and not self.waiters:
            self.holder = task
            self.acquired_at = now + cost
            self.last_cpu = cpu
            return self.ctx.counters.busy(cpu, "_raw_spin_lock", cost)
        st.note_contention(cpu, self.last_cpu)
        w = self.waiters
        if self._ticket:
            w.append([task, now, _QUEUED, 0])
            self.line.add_spinner(cpu)
            return PARK
        if not w:  # queued_fetch_set_pending_acquire: spin on the lock word
            w.append([task, now, _PENDING, 0])
            self.line.add_spinner(cpu)
            return PARK
        # MCS queue (xchg_tail). Behind only the pending waiter the queue was empty: this
        # node is the head and spins on the lock word; else it writes its predecessor's
        # node->next (a HITM of that node's line) and spins on its own node.
        if len(w) == 1 and w[0][2] == _PENDING:
            w.append([task, now, _HEAD, 0])
            self.line.add_spinner(cpu)
            return PARK
        link = int(self.line.costs.hitm[w[-1][0].cpu][cpu])
        st.extra["mcs_node_transfers"] = st.extra.get("mcs_node_transfers", 0) + 1
        w.append([task, now, _QUEUED, link])
        return PARK

    def release(self, task: Task) -> int:
        """``spin_unlock()``: hand the lock to the next waiter, if any. Returns 0
        (the unlock store retires from the store buffer; the releaser does not wait)."""
        if self.holder is not task:
            raise RuntimeError(f"{self.name}: released by {task!r}, held by {self.holder!r}")
        now = self.ctx.engine.now
        st = self.stat
        st.note_hold(now - self.acquired_at)
        line = self.line
        # The unlock store: take the line, invalidate the spinners, storm.
        done, first, per = line.write(task.cpu, now)
        if not self.waiters:
            self.holder = None
            return 0
        nxt, since, role, _ = self.waiters.popleft()
        ncpu = nxt.cpu
        # The next owner is, on average, half-way through the storm of the spinners.
        h = done + int(first + (line.nspin - 1) * per / 2)
        line.remove_spinner(ncpu)
        self.holder = nxt
        self.last_cpu = ncpu
        if not self._ticket:
            # The new holder's store to the lock word (clear_pending_set_locked for the pending waiter,
            # set_locked or the last waiter's cmpxchg for the queue head), when its re-read has seen
            # the lock free: at that time, so that what the others do meanwhile (the releaser's
            # cmpxchg straight after its unlock) is on the line first.
            self.acquired_at = now + h
            self.ctx.engine.call_at(now + h, self._granted, (nxt, since, role))
            return 0
        self.acquired_at = now + h
        wait = now + h - since
        st.note_wait(wait)
        self.ctx.counters.busy(ncpu, self._spin_func, wait)
        self.ctx.engine.wake(nxt, h)
        return 0

    def _granted(self, arg: tuple[Task, int, int]) -> None:
        """qspinlock: the new holder's lock-word store, then (a queue head with a successor) the
        hand-off of the queue head role to the next node; then its critical section starts."""
        nxt, since, role = arg
        now = self.ctx.engine.now
        ncpu = nxt.cpu
        line = self.line
        st = self.stat
        h = line.write(ncpu, now)[0]
        st.extra["lock_word_stores"] = st.extra.get("lock_word_stores", 0) + 1
        if role == _HEAD and self.waiters:
            # arch_mcs_spin_unlock_contended(&next->locked): the next waiter's node line
            succ = self.waiters[0]
            if succ[2] == _QUEUED:
                h += int(line.costs.hitm[ncpu][succ[0].cpu])
                succ[2] = _HEAD
                line.add_spinner(succ[0].cpu)
                st.extra["mcs_node_transfers"] = st.extra.get("mcs_node_transfers", 0) + 1
        self.acquired_at = now + h
        wait = now + h - since
        st.note_wait(wait)
        self.ctx.counters.busy(ncpu, self._spin_func, wait)
        self.ctx.engine.wake(nxt, h)
