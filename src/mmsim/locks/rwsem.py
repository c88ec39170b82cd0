"""Sleeping locks: the read-write semaphore and the mutex, by kernel version.

``RwSem`` models ``lib/rwsem-xadd.c`` (v3.x–v4.x) and ``kernel/locking/rwsem.c``
(v5.3+; the v5.3..v5.10 behaviour was read in v5.4.286's rwsem.c, tree
KINGFIOX/linux-5.4.286, which has v5.7's rwsem). What changed between kernels
is an :class:`RwsemPolicy`, set from the kernel catalogue by the lock's user:

* every ``down_read``/``up_read``/``down_write``/``up_write`` is a locked
  RMW of ``sem->count``, an atomic on a shared cache line
  (:class:`~mmsim.locks.base.CacheLine`);
* fast paths: a reader enters while no writer holds it, nobody is queued and
  no hand-off is pending (``rwsem_read_trylock``: ``RWSEM_READ_FAILED_MASK``);
  a writer while the count is 0;
* a release whose first waiter is a sleeping writer wakes it and grants
  nothing (``rwsem_mark_wake``; v3.x/v4.x ``__rwsem_do_wake``: "Wake writer at
  the front of the queue, but do not grant it the lock yet as we want other
  writers to be able to steal it"): a writer arriving before it runs takes the
  free sem, and the woken one, finding it taken, sleeps again first in the
  queue. Readers (queued) are granted by the waker, as the kernel adds their
  bias. Until session 16 the model granted the writer at the release;
* ``spin_on_owner`` (4fc828e24cd9, v3.16, ``rwsem_optimistic_spin``): a
  contended writer spins (on the OSQ, one spinner polling the owner, the rest
  on their own MCS node) while a running writer owns the sem, and takes it on
  release *ahead of the sleeping waiters* (``rwsem_try_write_lock_unqueued``
  ignores the waiters bit); otherwise it sleeps;
* ``writer_spin_on_readers`` (7d43f1ce9dd0, v5.3): a writer also spins on a
  reader-owned sem, for ``rwsem_rspin_threshold`` = (10 + readers/2) µs, at
  most 25 µs; past it the sem is marked non-spinnable and it sleeps. The limit
  starts when the spinner first finds the sem reader-owned
  (``rwsem_optimistic_spin``: ``OWNER_READER`` sets ``rspin_threshold``), also
  when that happens under it: a writer owner that downgrades (munmap's
  ``mmap_write_downgrade``) or releases to readers. Until session 11 the model
  armed it only for a writer that began to spin on readers, so a writer that
  began on a writer owner spun through a whole downgraded munmap;
* ``reader_spin`` (cf69482d62d9, v5.3; removed by 617f3ef95177, v5.11): a
  contended reader spins on a running writer owner and, on a reader-owned sem
  with no hand-off pending, takes the lock at once although writers are
  queued (``rwsem_try_read_lock_unqueued``: reader lock stealing);
* ``reader_spin_adaptive`` (5cfd92e12e13, v5.3, "Adaptive disabling of
  reader optimistic spinning"): a writer whose spin on a reader-owned sem
  timed out sets ``RWSEM_RD_NONSPINNABLE`` as well; while it is set readers
  neither spin nor steal, they queue. A sleeper that saw the bits at slowpath
  entry sets it again when it gets the lock; a writer that gets the lock by
  the fast path or by spinning clears it (``rwsem_set_owner``);
* ``reader_steal`` (1a728dff855a, v5.11, with the removal above): a reader in
  the slowpath still takes a sem that no writer holds and no hand-off
  protects, without spinning (``rwsem_down_read_slowpath``), except one that
  other readers own: "To prevent a constant stream of readers from starving a
  sleeping waiter, don't attempt optimistic lock stealing if the lock is
  currently owned by readers" (``RWSEM_READER_OWNED && rcnt > 1 &&
  !RWSEM_WRITER_LOCKED`` → ``goto queue``; v6.6 kernel/locking/rwsem.c, the same
  test from v5.11 to v6.18). The model missed that test until session 11;
* ``handoff`` (4f23dbc1e657, v5.3): once the first waiter has waited
  ``RWSEM_WAIT_TIMEOUT`` (4 ms), ``RWSEM_FLAG_HANDOFF`` stops spinners and
  fast-path lockers from stealing; the next release goes to that waiter;
* ``wake_all`` (d3681e269fff, v5.3, ``rwsem_mark_wake``): a release that
  wakes readers wakes every queued reader up to ``MAX_READERS_WAKEUP``, not
  only those queued before the first writer.

``Mutex`` (``kernel/locking/mutex.c``) is the write side only with a
:class:`MutexPolicy`: ``osq`` (fb0527bd5ea9, v3.15: every optimistic spinner
queues on the cancelable MCS lock and spins while the owner runs; off: one
spinner at a time, the others sleep) and ``handoff`` (9d659ae14b54, v4.10:
a woken first waiter that lost the lock to a spinner sets
``MUTEX_FLAG_HANDOFF`` and the next unlock hands the lock to it).

lock_stat: the class's entry holds both sides, and ``read``/``write`` each
side (``/proc/lock_stat``'s ``-R`` and ``-W`` lines).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mmsim.engine.core import PARK, Task
from mmsim.locks.base import CacheLine, LockContext
from mmsim.metrics.counters import LockStat

MAX_READERS_WAKEUP = 0x100  # kernel/locking/rwsem.c (v5.3+)
RWSEM_WAIT_TIMEOUT_NS = 4_000_000  # DIV_ROUND_UP(HZ, 250) jiffies = 4 ms at HZ 250 or 1000


def rspin_threshold_ns(readers: int) -> int:
    """``rwsem_rspin_threshold`` (v5.3): (20 + min(readers, 30)) µs / 2."""
    return (20 + min(readers, 30)) * 1000 // 2


@dataclass(frozen=True)
class RwsemPolicy:
    spin_on_owner: bool = False
    writer_spin_on_readers: bool = False
    reader_spin: bool = False
    handoff: bool = False
    wake_all: bool = False
    reader_steal: bool = False
    reader_spin_adaptive: bool = False
    wait_lock: bool = False  # sem->wait_lock sections (docs/locks.md, session 27); off in unit tests' default
    wake_in_wait_lock: bool = False  # wake_up_process under wait_lock (before 133e89ef5ef3, v4.8)


@dataclass(frozen=True)
class MutexPolicy:
    osq: bool = False
    handoff: bool = False
    wait_lock: bool = False  # lock->wait_lock sections
    wake_in_wait_lock: bool = False  # the next waiter woken under wait_lock (before 1329ce6fbbe4, v4.6)


class _Waiter:
    __slots__ = ("task", "write", "since", "spinning", "woken", "saw_nonspin", "rspin", "pending", "asleep",
                 "woke")

    def __init__(self, task: Task, write: bool, since: int, spinning: bool) -> None:
        self.task = task
        self.write = write
        self.since = since
        self.spinning = spinning
        self.woken = False  # a mutex waiter woken once that lost the lock (handoff)
        self.saw_nonspin = False  # non-spinnable bits seen at slowpath entry (5cfd92e12e13)
        self.rspin = 0  # reader phases this spinner has seen: only the latest one's threshold counts
        self.pending = False  # a sleeping writer woken by a release, not yet running its retry
        self.asleep = True  # False while a sleeper still holds or waits for wait_lock (its sleep comes after)
        self.woke = False  # woken before its deferred sleep: the sleep is skipped


class RwSem:
    _kind = "rwsem"
    _f_read, _f_read_up = "down_read", "up_read"
    _f_write, _f_write_up = "down_write", "up_write"
    _f_spin = "rwsem_optimistic_spin"
    _f_slow = "rwsem_down_write_slowpath"
    _f_read_slow = "rwsem_down_read_slowpath"
    _f_wake = "rwsem_wake"
    _wl_class = "&sem->wait_lock"

    def __init__(
        self, ctx: LockContext, name: str, home_cpu: int = 0, spin_on_owner: bool = True,
        line: CacheLine | None = None, policy: RwsemPolicy | None = None,
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.stat = ctx.stat(name, self._kind)
        st = self.stat
        if st.read is None:
            st.read = LockStat(name, self._kind, instances=0)
            st.write = LockStat(name, self._kind, instances=0)
        assert st.read is not None and st.write is not None
        self._rst: LockStat = st.read
        self._wst: LockStat = st.write
        self.line = line if line is not None else CacheLine(ctx.machine, home_cpu)
        self.stat.lines.append(self.line)
        self.policy = policy if policy is not None else RwsemPolicy(spin_on_owner=spin_on_owner)
        self.readers = 0
        self.writer: Task | None = None
        self.waitq: deque[_Waiter] = deque()  # sleeping waiters, FIFO
        self.osq: deque[_Waiter] = deque()  # optimistic spinners, OSQ order
        self.handoff = False
        self.nonspinnable = False  # RWSEM_WR_NONSPINNABLE after a reader-owned spin timed out
        self.rd_nonspinnable = False  # RWSEM_RD_NONSPINNABLE (5cfd92e12e13): readers may not spin
        self.last_cpu = -1
        self._read_since: dict[int, int] = {}
        self._write_since = 0
        self._waker = -1  # the releasing task's CPU while a release wakes waiters (wake_up_q runs on it)
        self._ipi = 0  # ns of reschedule IPIs that release sent (Scheduler.wake_up)
        self._wl_init(self.policy.wait_lock, self.policy.wake_in_wait_lock)
        for k in ("read_acquisitions", "read_contentions", "sleeps", "line_wait_ns", "steals", "handoffs",
                  "spin_timeouts", "wasted_wakeups"):
            st.extra.setdefault(k, 0)

    # -- wait_lock (docs/locks.md, session 27) ----------------------------------
    def _wl_init(self, on: bool, inside: bool) -> None:
        """``sem->wait_lock``: a FIFO spinlock on the count's line whose sections are reserved when they
        are asked for (their order is the ticket / queue order, their length known then)."""
        self._wl_on = on
        self._wl_inside = inside
        self._wl_free = 0  # when the last reserved section ends
        self._wl_cpu = -1  # that section's CPU (the next holder's hand-off is from it)
        self._wl_wakes: list[tuple[_Waiter, bool]] | None = None  # a waker's wake-ups, while it decides them
        self._wl_stat: LockStat | None = None
        if on:
            self._wl_stat = self.ctx.stat(self._wl_class, "spinlock(wait_lock)")
            self._wl_stat.lines.append(self.line)

    def _wl_acquire(self, cpu: int, now: int) -> int:
        """``raw_spin_lock_irq(&sem->wait_lock)`` by ``cpu`` at ``now``: its RMW on the line, then (held)
        spinning on the line until the previous section's end plus the hand-off. Returns the section's
        start (engine time)."""
        st = self._wl_stat
        assert st is not None
        line = self.line
        prev = self._wl_cpu
        st.note_acquire(cpu, prev)
        arrive = now + line.rmw(cpu, now)
        free = self._wl_free
        if free <= arrive:
            return arrive
        st.note_contention(cpu, prev)
        start = free + (int(line.costs.hitm[prev][cpu]) if 0 <= prev != cpu else 0)
        line.add_spinner(cpu)
        self.ctx.engine.call_at(start, self._wl_unspin, cpu)
        st.note_wait(start - now)
        return start

    def _wl_release(self, cpu: int, start: int, end: int) -> None:
        """The section of ``cpu`` runs from ``start`` to ``end``; the unlock store at ``end``."""
        st = self._wl_stat
        assert st is not None
        self._wl_free = end
        self._wl_cpu = cpu
        st.note_hold(end - start)
        self.ctx.engine.call_at(end, self._wl_unlock, cpu)

    def _wl_unspin(self, cpu: int) -> None:
        self.line.remove_spinner(cpu)

    def _wl_unlock(self, cpu: int) -> None:
        self.line.write(cpu, self.ctx.engine.now)

    def _do_sleep(self, w: _Waiter) -> None:
        """A sleeper's section is over: ``schedule()`` (unless a grant woke it first)."""
        if w.woke:
            return
        w.asleep = True
        self.ctx.sched.sleep(w.task)

    def _deferred_wake(self, w: _Waiter) -> None:
        """A wake-up decided in a waker's section, at its time (the IPI was the waker's, in its section
        or after it: not charged again)."""
        if not w.asleep:
            w.woke = True
            self.ctx.engine.wake(w.task, 0)
            return
        self.ctx.sched.wake_up(w.task)

    def _wake(self, task: Task, wake: Callable[[], None]) -> int:
        """A release's wake-ups (``wake()`` decides them) on ``task``'s CPU. With sleepers queued and the
        wait_lock modelled, as ``rwsem_wake``'s section: per woken waiter the store to its ``waiter.task``
        (its stack line: a HITM to its CPU) and, with ``_wl_inside``, its wake-up's IPI; then the count's
        adjustment; each wake-up happens at its place in the section, or after the unlock (wake_q).
        Returns the waker's ns (spin, section, IPIs)."""
        self._waker, self._ipi = task.cpu, 0
        if not self._wl_on or not self.waitq:
            wake()
            self._waker = -1
            return self._ipi
        cpu = task.cpu
        now = self.ctx.engine.now
        start = self._wl_acquire(cpu, now)
        self._wl_wakes = []
        wake()
        wakes, self._wl_wakes = self._wl_wakes, None
        self._waker = -1
        hitm = self.line.costs.hitm
        ipi_ns = self.ctx.sched.wake_ipi_ns
        inside = self._wl_inside
        # each wake-up's IPI (estimate: the sleeper's CPU idle when it is woken)
        ipi = [ipi_ns if w.task.cpu != cpu else 0 for w, _ in wakes]
        ipis = sum(ipi)
        t = start
        at: list[int] = []
        for (w, _), i in zip(wakes, ipi, strict=True):
            wc = w.task.cpu
            t += int(hitm[cpu][wc]) if wc != cpu else 0
            if inside:
                t += i
                at.append(t)
        end = t + self.line.local_ns  # the count's adjustment, on the line this CPU now has
        self._wl_release(cpu, start, end)
        if not inside:
            t = end
            for i in ipi:
                t += i
                at.append(t)
        for (w, granted), when in zip(wakes, at, strict=True):
            if granted:
                wait = when - w.since
                self.stat.note_wait(wait)
                (self._wst if w.write else self._rst).note_wait(wait)
                if w.write:
                    self._write_since = when
                else:
                    self._read_since[w.task.tid] = when
            self.ctx.engine.call_at(when, self._deferred_wake, w)
        c = self.ctx.counters
        c.busy(cpu, "_raw_spin_lock_irq", start - now)
        c.busy(cpu, self._f_wake, end - start - (ipis if inside else 0))
        if ipis:
            c.busy(cpu, "smp_send_reschedule", ipis)
        return end - now + (0 if inside else ipis) + self._ipi

    # -- helpers -------------------------------------------------------------
    def _line_rmw(self, task: Task) -> int:
        """The atomic on ``count``: queue for the line, move it here. Returns ns."""
        now = self.ctx.engine.now
        line = self.line
        start = max(now, line.free_at)
        d: int = line.write(task.cpu, now, True)[0]  # CacheLine.rmw, one call fewer
        self.stat.extra["line_wait_ns"] += start - now
        return d

    def _atomic(self, task: Task, func: str) -> int:
        """:meth:`_line_rmw` (inlined: every uncontended down/up is one) charged to ``func``."""
        now = self.ctx.engine.now
        line = self.line
        start = max(now, line.free_at)
        d: int = line.write(task.cpu, now, True)[0]
        self.stat.extra["line_wait_ns"] += start - now
        return self.ctx.counters.busy(task.cpu, func, d)

    def _note_acquire(self, cpu: int, write: bool) -> None:
        self.stat.note_acquire(cpu, self.last_cpu)
        (self._wst if write else self._rst).note_acquire(cpu, self.last_cpu)
        if not write:
            self.stat.extra["read_acquisitions"] += 1

    def _note_contention(self, cpu: int, write: bool) -> None:
        self.stat.note_contention(cpu, self.last_cpu)
        (self._wst if write else self._rst).note_contention(cpu, self.last_cpu)
        if not write:
            self.stat.extra["read_contentions"] += 1

    def _hold_end(self, since: int, write: bool) -> None:
        hold = self.ctx.engine.now - since
        self.stat.note_hold(hold)
        (self._wst if write else self._rst).note_hold(hold)

    def _owner_running(self) -> bool:
        w = self.writer
        return w is not None and self.ctx.sched.cpus[w.cpu].current is w

    def _take(self, task: Task, write: bool, at: int) -> None:
        if write:
            self.writer = task
            self._write_since = at
            self.nonspinnable = False  # rwsem_set_owner(): owner = current, flags cleared
            self.rd_nonspinnable = False
        else:
            self.readers += 1
            self._read_since[task.tid] = at
        self.last_cpu = task.cpu

    def _grant(self, w: _Waiter, delay: int) -> None:
        now = self.ctx.engine.now
        deferred = not w.spinning and self._wl_wakes is not None
        if deferred:  # in a waker's wait_lock section: its wait and wake-up are timed by the section (_wake)
            assert self._wl_wakes is not None
            self._wl_wakes.append((w, True))
        else:
            wait = now + delay - w.since
            self.stat.note_wait(wait)
            (self._wst if w.write else self._rst).note_wait(wait)
        self._take(w.task, w.write, now + delay)
        if w.saw_nonspin and not w.spinning and self.policy.reader_spin_adaptive:
            # rwsem_disable_reader_optspin() / rwsem_mark_wake(): a sleeper that saw the
            # non-spinnable bits at slowpath entry sets the reader one on acquiring
            self.rd_nonspinnable = True
        if deferred:
            return
        if w.spinning:
            self.ctx.counters.busy(w.task.cpu, self._f_spin, wait)
            self.ctx.engine.wake(w.task, delay)
        else:
            self._ipi += self.ctx.sched.wake_up(w.task, waker_cpu=self._waker)

    def _sleep(self, task: Task, write: bool, since: int) -> Any:
        self.stat.extra["sleeps"] += 1
        w = _Waiter(task, write, since, False)
        w.saw_nonspin = self.rd_nonspinnable or (write and self.nonspinnable)
        if self._wl_on:
            # rwsem_down_{read,write}_failed / __mutex_lock_slowpath: under wait_lock, the list insertion (a
            # write to the previous tail waiter's rwsem_waiter, on its stack) and the count's adjustment;
            # the task sleeps at the section's end
            cpu = task.cpu
            now = self.ctx.engine.now
            prev = self.waitq[-1].task.cpu if self.waitq else cpu
            start = self._wl_acquire(cpu, now)
            end = start + (int(self.line.costs.hitm[prev][cpu]) if prev != cpu else 0) + self.line.local_ns
            self._wl_release(cpu, start, end)
            c = self.ctx.counters
            c.busy(cpu, "_raw_spin_lock_irq", start - now)
            c.busy(cpu, self._f_slow if write else self._f_read_slow, end - start)
            self.waitq.append(w)
            w.asleep = False
            self.ctx.engine.call_at(end, self._do_sleep, w)
            return PARK
        self.waitq.append(w)
        return self.ctx.sched.sleep(task)

    def _spin(self, task: Task, write: bool, since: int) -> Any:
        w = _Waiter(task, write, since, True)
        self.osq.append(w)
        if write and self.policy.writer_spin_on_readers and self.writer is None and self.readers:
            self._arm_rspin(w)
        return PARK  # spinning: keeps its CPU

    def _arm_rspin(self, w: _Waiter) -> None:
        """``rspin_threshold`` re-initialised at a non-reader -> reader owner change (v6.6
        rwsem_optimistic_spin: "This allows a writer to steal the lock in between 2 reader phases and
        have the threshold reset at the beginning of the 2nd reader phase"): an earlier phase's timer
        is void."""
        now = self.ctx.engine.now
        w.rspin += 1
        self.ctx.engine.call_at(now + rspin_threshold_ns(self.readers), self._rspin_timeout, (w, w.rspin))

    def _readers_own(self) -> None:
        """The sem just became reader-owned under spinning writers (a downgrade, or readers woken by a
        release): each starts its ``rwsem_rspin_threshold`` now (module docstring)."""
        if self.policy.writer_spin_on_readers and self.writer is None and self.readers:
            for w in self.osq:
                if w.write:
                    self._arm_rspin(w)

    def _rspin_timeout(self, arg: tuple[_Waiter, int]) -> None:
        """A writer spinning on a reader-owned sem gives up: non-spinnable, sleep."""
        w, phase = arg
        if phase != w.rspin or w not in self.osq or self.writer is not None or not self.readers:
            return
        self.osq.remove(w)
        self.nonspinnable = True  # rwsem_set_nonspinnable(): both bits
        if self.policy.reader_spin_adaptive:
            self.rd_nonspinnable = True
        w.saw_nonspin = True
        self.stat.extra["spin_timeouts"] += 1
        self.ctx.counters.busy(w.task.cpu, self._f_spin, self.ctx.engine.now - w.since)
        self.stat.extra["sleeps"] += 1
        w.spinning = False
        self.waitq.append(w)
        self.ctx.sched.sleep(w.task)

    def _check_handoff(self) -> None:
        if self.policy.handoff and not self.handoff and self.waitq:
            if self.ctx.engine.now - self.waitq[0].since >= RWSEM_WAIT_TIMEOUT_NS:
                self.handoff = True
                self.stat.extra["handoffs"] += 1

    def _wake_readers(self) -> None:
        """``rwsem_mark_wake`` for readers: those before the first writer, or (wake_all)
        every queued reader up to MAX_READERS_WAKEUP, skipping writers."""
        q = self.waitq
        if self.policy.wake_all:
            woken = [w for w in q if not w.write][:MAX_READERS_WAKEUP]
            ids = {id(w) for w in woken}
            rest = [w for w in q if id(w) not in ids]
            q.clear()
            q.extend(rest)
        else:
            woken = []
            while q and not q[0].write:
                woken.append(q.popleft())
        for w in woken:
            self._grant(w, 0)

    def _reader_spinners_in(self, rel_cpu: int) -> None:
        """Reader spinners at the front of the OSQ join a reader-owned sem."""
        xfer = self.line.costs.hitm
        while self.osq and not self.osq[0].write and not self.handoff:
            w = self.osq.popleft()
            self._grant(w, int(xfer[rel_cpu][w.task.cpu]))

    def _wake_next(self, rel_cpu: int) -> None:
        """The lock just became free (or reader-owned with readers allowed in)."""
        if self.writer is not None:
            return
        self._check_handoff()
        xfer = self.line.costs.hitm
        if self.readers == 0 and self.osq and not self.handoff:
            # an optimistic spinner steals the lock ahead of the sleepers
            w = self.osq[0]
            if w.write:
                self.osq.popleft()
                self.stat.extra["steals"] += bool(self.waitq)
                self._grant(w, int(xfer[rel_cpu][w.task.cpu]))
                self._wake_writer()  # the release woke the first waiter all the same: it will find it taken
                return
            self.stat.extra["steals"] += bool(self.waitq)
            self._reader_spinners_in(rel_cpu)
            if self.waitq and not self.waitq[0].write:
                self._wake_readers()  # RWSEM_WAKE_READ_OWNED
            self._readers_own()
            return
        q = self.waitq
        if not q:
            return
        if q[0].write:
            if self.readers == 0:
                if self.handoff and not q[0].pending:
                    # RWSEM_FLAG_HANDOFF / MUTEX_FLAG_HANDOFF: nobody else may take it, so it is the first
                    # waiter's from the release on
                    w = q.popleft()
                    self.handoff = False
                    self._grant(w, int(xfer[rel_cpu][w.task.cpu]))
                else:
                    self._wake_writer()
            return
        self.handoff = False
        self._wake_readers()
        self._readers_own()
        if self.policy.reader_spin:
            self._reader_spinners_in(rel_cpu)

    def _wake_writer(self) -> None:
        """``rwsem_mark_wake`` / ``__mutex_unlock_slowpath`` with a sleeping writer first in the queue:
        wake it, and grant nothing ("Until the task is actually later awoken later by the caller, other
        writers are able to steal it"; docs/locks.md, session 16). When it runs it retries
        (:meth:`_retry_write`). A writer already woken and on its way is not woken twice."""
        q = self.waitq
        if not q or not q[0].write or q[0].pending:
            return
        w = q[0]
        w.pending = True
        task = w.task
        task.gen = self._retry_write(w, task.gen)
        if self._wl_wakes is not None:  # in a waker's wait_lock section: woken at its time (_wake)
            self._wl_wakes.append((w, False))
            return
        self._ipi += self.ctx.sched.wake_up(task, waker_cpu=self._waker)

    def _retry_write(self, w: _Waiter, body: Any) -> Any:
        """The woken writer, running again: ``rwsem_try_write_lock`` (``__mutex_trylock``), one atomic on
        the count's line. It takes the lock if nobody holds it and no hand-off is set for another
        waiter; else it sleeps again, still first in the queue. Then ``body`` (the task's own
        generator, parked in ``down_write``) goes on."""
        task = w.task
        self._on_woken(w)
        d = self._line_rmw(task)
        yield self.ctx.counters.busy(task.cpu, self._f_slow, d)
        task.gen = body
        w.pending = False
        if self.writer is None and self.readers == 0 and self.waitq and self.waitq[0] is w:
            self.waitq.popleft()
            self.handoff = False
            now = self.ctx.engine.now
            wait = now - w.since
            self.stat.note_wait(wait)
            self._wst.note_wait(wait)
            self._take(task, True, now)
            self.ctx.engine.wake(task, 0)
        else:
            self.stat.extra["wasted_wakeups"] += 1
            self.stat.extra["sleeps"] += 1
            self._check_handoff()
            self.ctx.sched.sleep(task)
        yield PARK

    def _on_woken(self, w: _Waiter) -> None:
        """Hook: what a woken writer sets before its retry (the mutex's hand-off flag)."""

    def _can_spin(self, write: bool) -> bool:
        if self.handoff:
            return False
        if self.writer is not None:
            return self._owner_running()
        if not self.readers:
            return True  # OWNER_NULL: free (being handed over)
        if write:
            return self.policy.writer_spin_on_readers and not self.nonspinnable
        return not (self.policy.reader_spin_adaptive and self.rd_nonspinnable)

    # -- the API --------------------------------------------------------------
    def down_read(self, task: Task) -> Any:
        now = self.ctx.engine.now
        self._note_acquire(task.cpu, False)
        if self.writer is None and not self.waitq and not self.handoff:
            cost = self._atomic(task, self._f_read)
            self._take(task, False, now + cost)
            return cost
        # Contended: the failed atomic is part of the wait (a spinner's spin time
        # starts with it; a sleeper gives up its CPU), so it is not charged twice.
        d = self._line_rmw(task)
        self._note_contention(task.cpu, False)
        p = self.policy
        rd_ok = not (p.reader_spin_adaptive and self.rd_nonspinnable)
        # v5.11+ rwsem_down_read_slowpath: a sem other readers own is not stolen (module docstring)
        steal = p.reader_steal and self.writer is None and (p.reader_spin or not self.readers)
        if (p.reader_spin and rd_ok and self._can_spin(False)) or steal:
            if self.writer is None and not self.handoff:
                # rwsem_try_read_lock_unqueued on a reader-owned sem: steal it
                self.stat.extra["steals"] += 1
                self.stat.note_wait(d)
                self._rst.note_wait(d)
                self._take(task, False, now + d)
                return self.ctx.counters.busy(task.cpu, self._f_read, d)
            if p.reader_spin:
                return self._spin(task, False, now)
        return self._sleep(task, False, now)

    def trylock_load(self, task: Task) -> int:
        """``__down_read_trylock`` (v5.3+; rwsem-xadd's is the same loop) starts with
        ``atomic_long_read(&sem->count)`` and then ``try_cmpxchg``s it: the load brings the line
        here first, so under contention the try_cmpxchg (:meth:`down_read`, after a yield) may
        find it taken again and pays a second transfer. Returns ns of the load."""
        return self._atomic(task, "down_read_trylock")

    def up_read(self, task: Task) -> int:
        cost = self._atomic(task, self._f_read_up)
        self.readers -= 1
        self._hold_end(self._read_since.pop(task.tid), False)
        if self.readers == 0:
            self.nonspinnable = False  # clear_wr_nonspinnable
            # rwsem_wake / wake_up_q run on the releasing CPU, which pays each reschedule IPI to an idle CPU
            cost += self._wake(task, lambda: self._wake_next(task.cpu))
        return cost

    def down_write(self, task: Task) -> Any:
        now = self.ctx.engine.now
        self._note_acquire(task.cpu, True)
        if self.writer is None and self.readers == 0 and not self.waitq and not self.osq and not self.handoff:
            cost = self._atomic(task, self._f_write)
            self._take(task, True, now + cost)
            return cost
        d = self._line_rmw(task)
        self._note_contention(task.cpu, True)
        if self.writer is None and self.readers == 0 and not self.handoff:
            # Free, with a woken writer on its way: rwsem_try_write_lock_unqueued (spinning, v3.16+) or the
            # queued writer's own rwsem_try_write_lock (v3.x); __mutex_trylock for the mutex.
            self.stat.extra["steals"] += bool(self.waitq)
            self.stat.note_wait(d)
            self._wst.note_wait(d)
            self._take(task, True, now + d)
            return self.ctx.counters.busy(task.cpu, self._f_write, d)
        if self._may_spin_write():
            return self._spin(task, True, now)
        return self._sleep(task, True, now)

    def _may_spin_write(self) -> bool:
        return self.policy.spin_on_owner and self._can_spin(True)

    def up_write(self, task: Task) -> int:
        if self.writer is not task:
            raise RuntimeError(f"{self.name}: up_write by {task!r}, held by {self.writer!r}")
        cost = self._atomic(task, self._f_write_up)
        self.writer = None
        self._hold_end(self._write_since, True)
        return cost + self._wake(task, lambda: self._wake_next(task.cpu))  # as in up_read

    def downgrade(self, task: Task) -> int:
        """``downgrade_write`` (kernel/locking/rwsem.c): the writer keeps the sem as a reader (one
        atomic on the count); readers queued at the head are woken (``rwsem_downgrade_wake``,
        RWSEM_WAKE_READ_OWNED). Used by munmap since dd2283f2605e (v4.20). Issue 22."""
        if self.writer is not task:
            raise RuntimeError(f"{self.name}: downgrade_write by {task!r}, held by {self.writer!r}")
        cost = self._atomic(task, self._f_write_up)
        self.writer = None
        self._hold_end(self._write_since, True)
        self._take(task, False, self.ctx.engine.now + cost)

        def wake() -> None:  # rwsem_downgrade_wake, RWSEM_WAKE_READ_OWNED
            if self.waitq and not self.waitq[0].write:
                self._wake_readers()
            self._readers_own()

        return cost + self._wake(task, wake)  # as in up_read


class Mutex(RwSem):
    """``struct mutex``: exclusive only; optimistic spinning while the owner runs
    (policy ``osq``), else sleeps; ``handoff`` as in the module docstring."""

    _kind = "mutex"
    _f_write, _f_write_up = "mutex_lock", "mutex_unlock"
    _f_spin = "mutex_spin_on_owner"
    _f_slow = "__mutex_lock_slowpath"
    _f_wake = "__mutex_unlock_slowpath"
    _wl_class = "&lock->wait_lock"

    def __init__(
        self, ctx: LockContext, name: str, home_cpu: int = 0, spin_on_owner: bool = True,
        line: CacheLine | None = None, mpolicy: MutexPolicy | None = None,
    ) -> None:
        super().__init__(ctx, name, home_cpu, spin_on_owner, line, RwsemPolicy(spin_on_owner=spin_on_owner))
        self.mpolicy = mpolicy if mpolicy is not None else MutexPolicy()
        self._wl_init(self.mpolicy.wait_lock, self.mpolicy.wake_in_wait_lock)

    def _may_spin_write(self) -> bool:
        if not self.policy.spin_on_owner or not self._owner_running():
            return False
        if self.mpolicy.osq:
            return not self.handoff
        return not self.osq and not self.waitq  # one spinner at a time, no queue

    def _check_handoff(self) -> None:
        if self.mpolicy.handoff and self.waitq and self.waitq[0].woken:
            self.handoff = True

    def _on_woken(self, w: _Waiter) -> None:
        # v4.10 __mutex_lock_common: the first waiter, woken, sets MUTEX_FLAG_HANDOFF before its trylock;
        # an unlock that finds the flag hands the lock over (_check_handoff, then the grant in _wake_next)
        w.woken = True

    def lock(self, task: Task) -> Any:
        return self.down_write(task)

    def unlock(self, task: Task) -> int:
        return self.up_write(task)


class AtomicCounter:
    """A plain shared counter updated with atomics (``atomic_long_add`` on
    ``mm->rss_stat``, ``mm->nr_ptes``...). Reported with the locks as kind
    ``atomic``: ``acquisitions`` = operations, ``wait`` = time queued for the line."""

    def __init__(self, ctx: LockContext, name: str, home_cpu: int = 0, line: CacheLine | None = None) -> None:
        self.ctx = ctx
        self.stat = ctx.stat(name, "atomic")
        self.line = line if line is not None else CacheLine(ctx.machine, home_cpu)
        self.stat.lines.append(self.line)

    def add(self, task: Task, func: str) -> int:
        now = self.ctx.engine.now
        start = max(now, self.line.free_at)
        d = self.line.rmw(task.cpu, now)
        st = self.stat
        st.acquisitions += 1
        if start > now:
            st.contentions += 1
            st.note_wait(start - now)
        return self.ctx.counters.busy(task.cpu, func, d)
