"""Sleeping locks: the read-write semaphore and the mutex.

``RwSem`` models ``lib/rwsem-xadd.c`` (v3.x–v4.x) / ``kernel/locking/rwsem.c``:

* every ``down_read``/``up_read``/``down_write``/``up_write`` is a locked
  RMW of ``sem->count``, i.e. an atomic on a shared cache line
  (:class:`~mmsim.locks.base.CacheLine`): with hundreds of CPUs taking the
  read side, the line transfers *are* the cost;
* readers enter while no writer holds or waits (a queued writer blocks new
  readers, as ``rwsem_down_read_failed`` queues behind it);
* a contended writer optimistically spins while the lock is held by a
  running writer (``rwsem_optimistic_spin``, v3.16+, policy
  ``spin_on_owner``), otherwise sleeps (``schedule()``);
* release wakes the waiter at the head: a writer, or every reader queued
  before the next writer (``__rwsem_do_wake`` with ``RWSEM_WAKE_ANY``).

``Mutex`` (``kernel/locking/mutex.c``) is the write side only, with
``mutex_spin_on_owner`` optimistic spinning (v2.6.30+).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from mmsim.engine.core import PARK, Task
from mmsim.locks.base import CacheLine, LockContext


class RwSem:
    _kind = "rwsem"
    _f_read, _f_read_up = "down_read", "up_read"
    _f_write, _f_write_up = "down_write", "up_write"
    _f_spin = "rwsem_optimistic_spin"

    def __init__(
        self, ctx: LockContext, name: str, home_cpu: int = 0, spin_on_owner: bool = True,
        line: CacheLine | None = None,
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.stat = ctx.stat(name, self._kind)
        self.line = line if line is not None else CacheLine(ctx.machine, home_cpu)
        self.readers = 0
        self.writer: Task | None = None
        self.writer_spinning = False
        # (task, is_write, since, spinning)
        self.waitq: deque[tuple[Task, bool, int, bool]] = deque()
        self.spin_on_owner = spin_on_owner
        self._read_since: dict[int, int] = {}
        self._write_since = 0
        st = self.stat
        st.extra.setdefault("read_acquisitions", 0)
        st.extra.setdefault("read_contentions", 0)
        st.extra.setdefault("sleeps", 0)
        st.extra.setdefault("line_wait_ns", 0)

    # -- helpers -------------------------------------------------------------
    def _line_rmw(self, task: Task) -> int:
        """The atomic on ``count``: queue for the line, move it here. Returns ns."""
        now = self.ctx.engine.now
        start = max(now, self.line.free_at)
        d = self.line.rmw(task.cpu, now)
        self.stat.extra["line_wait_ns"] += start - now
        return d

    def _atomic(self, task: Task, func: str) -> int:
        return self.ctx.counters.busy(task.cpu, func, self._line_rmw(task))

    def _hold_end(self, since: int) -> None:
        hold = self.ctx.engine.now - since
        st = self.stat
        st.hold_ns_total += hold
        if hold > st.hold_ns_max:
            st.hold_ns_max = hold

    def _wait(self, task: Task, is_write: bool) -> Any:
        st = self.stat
        st.contentions += 1
        if not is_write:
            st.extra["read_contentions"] += 1
        spin = (
            is_write
            and self.spin_on_owner
            and self.writer is not None
            and self.ctx.sched.cpus[self.writer.cpu].current is self.writer  # owner on CPU
            and self.readers == 0
            and not self.waitq
        )
        self.waitq.append((task, is_write, self.ctx.engine.now, spin))
        if spin:
            return PARK  # spinning: keeps its CPU
        st.extra["sleeps"] += 1
        return self.ctx.sched.sleep(task)

    def _grant(self, task: Task, is_write: bool, since: int, spinning: bool, delay: int) -> None:
        now = self.ctx.engine.now
        wait = now + delay - since
        st = self.stat
        st.wait_ns_total += wait
        if wait > st.wait_ns_max:
            st.wait_ns_max = wait
        if is_write:
            self.writer = task
            self._write_since = now + delay
        else:
            self.readers += 1
            self._read_since[task.tid] = now + delay
        if spinning:
            self.ctx.counters.busy(task.cpu, self._f_spin, wait)
            self.ctx.engine.wake(task, delay)
        else:
            self.ctx.sched.wake_up(task)

    def _wake_next(self, rel_cpu: int) -> None:
        q = self.waitq
        if not q:
            return
        task, is_write, since, spinning = q[0]
        if is_write:
            if self.readers == 0 and self.writer is None:
                q.popleft()
                x = int(self.ctx.machine.xfer_ns(rel_cpu, task.cpu, modified=True))
                self._grant(task, True, since, spinning, x)
            return
        if self.writer is not None:
            return
        while q and not q[0][1]:
            task, _, since, spinning = q.popleft()
            self._grant(task, False, since, spinning, 0)

    # -- the API --------------------------------------------------------------
    def down_read(self, task: Task) -> Any:
        st = self.stat
        st.acquisitions += 1
        st.extra["read_acquisitions"] += 1
        if self.writer is None and not self.waitq:
            cost = self._atomic(task, self._f_read)
            self.readers += 1
            self._read_since[task.tid] = self.ctx.engine.now + cost
            return cost
        # Contended: the failed atomic is part of the wait (a spinner's spin time
        # starts with it; a sleeper gives up its CPU), so it is not charged twice.
        self._line_rmw(task)
        return self._wait(task, False)

    def up_read(self, task: Task) -> int:
        cost = self._atomic(task, self._f_read_up)
        self.readers -= 1
        self._hold_end(self._read_since.pop(task.tid))
        if self.readers == 0:
            self._wake_next(task.cpu)
        return cost

    def down_write(self, task: Task) -> Any:
        self.stat.acquisitions += 1
        if self.writer is None and self.readers == 0 and not self.waitq:
            cost = self._atomic(task, self._f_write)
            self.writer = task
            self._write_since = self.ctx.engine.now + cost
            return cost
        self._line_rmw(task)
        return self._wait(task, True)

    def up_write(self, task: Task) -> int:
        if self.writer is not task:
            raise RuntimeError(f"{self.name}: up_write by {task!r}, held by {self.writer!r}")
        cost = self._atomic(task, self._f_write_up)
        self.writer = None
        self._hold_end(self._write_since)
        self._wake_next(task.cpu)
        return cost


class Mutex(RwSem):
    """``struct mutex``: exclusive only, spins on a running owner, else sleeps."""

    _kind = "mutex"
    _f_write, _f_write_up = "mutex_lock", "mutex_unlock"
    _f_spin = "mutex_spin_on_owner"

    def lock(self, task: Task) -> Any:
        return self.down_write(task)

    def unlock(self, task: Task) -> int:
        return self.up_write(task)


class AtomicCounter:
    """A plain shared counter updated with atomics (``atomic_long_add`` on
    ``mm->rss_stat``, ``mm->nr_ptes``...). Reported with the locks as kind
    ``atomic``: ``acquisitions`` = operations, ``wait`` = time queued for the line."""

    def __init__(self, ctx: LockContext, name: str, home_cpu: int = 0) -> None:
        self.ctx = ctx
        self.stat = ctx.stat(name, "atomic")
        self.line = CacheLine(ctx.machine, home_cpu)

    def add(self, task: Task, func: str) -> int:
        now = self.ctx.engine.now
        start = max(now, self.line.free_at)
        d = self.line.rmw(task.cpu, now)
        st = self.stat
        st.acquisitions += 1
        if start > now:
            st.contentions += 1
            st.wait_ns_total += start - now
            if start - now > st.wait_ns_max:
                st.wait_ns_max = start - now
        return self.ctx.counters.busy(task.cpu, func, d)
