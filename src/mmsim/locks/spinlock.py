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
  the others clean forwards; on an inclusive L3 one forward per socket, the
  socket's other waiters reading its L3). The next ticket holder is, on average, half-way
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
  waiter's node line, whose owner is spinning on it (one HITM, seen at the end
  of the PAUSE it finds the waiter in: half a PAUSE later on average, session
  35); the new head
  then reads the lock word, so the holder's unlock takes the line back from
  its copy before the head's re-read. A hand-off is constant in the number
  of waiters. The new holder (pending waiter or queue head) stores to the lock
  word (``clear_pending_set_locked`` / ``set_locked``, or the last waiter's
  ``cmpxchg``): one more write of the line, made when its re-read has seen
  the lock free (:meth:`Spinlock._granted`). Those stores and the node store
  are plain x86 stores: the holder does not wait for them, but its unlock
  becomes visible only after them; only the ``cmpxchg`` is waited for. Each
  queued arrival also makes its ``xchg_tail`` RMW, after the slowpath's own
  instructions (session 29, docs/locks.md). The slowpath as v4.13 has it
  (``queued_spin_lock_slowpath``, read in the stored corpus; v4.16+ bounds the
  hand-over wait by ``_Q_PENDING_LOOPS`` and sets pending with one
  ``fetch_or``, the same accesses at two CPUs): an arrival whose fast-path
  ``cmpxchg`` finds a pending -> locked hand-over under way (``0,1,0``) reads
  the word until it ends, then makes the "trylock || pending" ``cmpxchg``, one
  more RMW, on the line the new holder's store has taken; an arrival that
  finds the lock held and no waiter sets pending on the line its failed
  ``cmpxchg`` brought (no second transfer).

**Re-takes ahead of a request in flight** (session 11). A waiter's RMW (ticket
``xadd``, qspinlock pending ``cmpxchg``) that takes the line from its old
owner is in flight until its transfer ends
(:meth:`~mmsim.locks.base.CacheLine.arrival`); the old owner's own RMWs
meanwhile complete locally, one after another, and push the request back
(the cache lock). So a holder that releases and comes straight back (no think
time) takes the lock again, as often as its local RMWs fit in that window:
the ticket releaser takes the next ticket ahead of the waiter's ``xadd``
(v3.12 ``arch/x86/include/asm/spinlock.h``: ``arch_spin_lock``'s ``xadd`` on
``lock->tickets``, ``arch_spin_unlock``'s unlocked ``__add`` of ``head``; read
in halfline/rhel7, a v3.10-based tree that carries v3.12's paravirt-ticketlock
code), and the qspinlock releaser's fast-path ``cmpxchg`` finds the word 0
before the other CPU's pending bit lands. Grants are FIFO among the waiters
whose RMWs have landed.

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
# estimate: the instructions of queued_spin_lock_slowpath between the fast path's failed cmpxchg and xchg_tail
# (v4.16+: the val tests, this_cpu_ptr of qnodes, node->count++, encode_tail, grab_mcs_node, the node's
# locked/next stores, queued_spin_trylock's read and test), ~40 at IPC ~1; plausible 20-80 cycles
SLOWPATH_CYCLES = 40
_NOT_READY = 1 << 62  # a queued waiter's time of its first read of the lock word, before it is queue head


class SpinlockKind(str, Enum):
    TICKET = "ticket"
    QUEUED = "queued"


class Spinlock:
    __slots__ = (
        "ctx", "name", "kind", "stat", "holder", "acquired_at", "waiters", "line", "last_cpu", "_spin_func",
        "_ticket", "_handover", "_watchers", "_sb_task", "_sb_done", "_deferred", "_slowpath_ns",
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
        # (task, since, role, node_link_ns, land, bounced, ready): role is unused by ticket locks; land is when
        # the waiter's RMW reaches the line as issued (the line's arrival() has it as pushed back since); bounced:
        # its contention was counted as a con-bounce; ready: when it reads the lock word (a queued waiter: once
        # its predecessor's MCS hand-off has reached it)
        self.waiters: deque[list[Any]] = deque()
        self.line = line if line is not None else CacheLine(ctx.machine, home_cpu)
        self.stat.lines.append(self.line)
        self.last_cpu = -1  # CPU of the last acquisition (lock_stat's bounces)
        self._ticket = kind is SpinlockKind.TICKET
        # qspinlock: a pending -> locked hand-over under way (the word reads 0,1,0 until the new holder's
        # clear_pending_set_locked), and the arrivals waiting it out (task, since)
        self._handover = False
        self._watchers: list[tuple[Task, int]] = []
        self._spin_func = "_raw_spin_lock" if self._ticket else "native_queued_spin_lock_slowpath"
        # qspinlock: the holder whose grant stores (lock word, MCS node) are still on their way, and when the
        # last of them completes: its unlock store cannot become visible before (stores in program order)
        self._sb_task: Task | None = None
        self._sb_done = 0
        # a release waiting for those stores (the releasing task), and an acquire by that task meanwhile
        # (task, since): its locked RMW drains the store buffer, so it waits for the unlock too
        self._deferred: list[Any] | None = None
        self._slowpath_ns = max(1, round(SLOWPATH_CYCLES / ctx.machine.freq_ghz))

    def acquire(self, task: Task) -> Any:
        """``spin_lock()``. Returns ns to yield (uncontended) or PARK (spinning).

        The arrival's RMW (ticket ``xadd``; qspinlock's fast-path ``cmpxchg``) takes its place in the
        line's order when it is issued, except against the line's old owner: a remote RMW is in flight
        until its transfer ends (:meth:`CacheLine.arrival`), and the old owner's own RMWs meanwhile
        complete first. So a holder that releases and comes straight back takes the lock again ahead of
        a waiter whose RMW is still in flight (:meth:`release` waits for it to land)."""
        now = self.ctx.engine.now
        d = self._deferred
        if d is not None and d[0] is task:
            # its own unlock is still waiting for its grant stores: the fast path's locked cmpxchg drains the
            # store buffer first, so it is issued once the unlock is visible (_release_visible)
            d.append(now)
            return PARK
        return self._acquire(task, now, now)

    def _acquire(self, task: Task, now: int, since: int) -> Any:
        """:meth:`acquire` at ``now`` of a task that called it at ``since`` (earlier when its RMW waited for
        its own unlock to become visible)."""
        st = self.stat
        cpu = task.cpu
        st.note_acquire(cpu, self.last_cpu)
        line = self.line
        cost = line.rmw(cpu, now)
        if self.holder is None and (not self.waiters or self._ahead_of_inflight(cpu, now)):
            self._take(task)
            self.acquired_at = now + cost
            if self.waiters:
                st.extra["retakes_ahead_of_inflight"] = st.extra.get("retakes_ahead_of_inflight", 0) + 1
            return self.ctx.counters.busy(cpu, "_raw_spin_lock", cost + now - since)
        land = now + cost if line.remote else now
        return self._arrive(task, since, land)

    def _ahead_of_inflight(self, cpu: int, now: int) -> bool:
        """The lock is free and its first waiter's RMW is still in flight to a line ``cpu`` still owns:
        ``cpu``'s RMW completes first (the waiter has not taken its ticket / set its pending bit)."""
        w = self.waiters[0]
        return self.line.arrival(w[0].cpu) > now and cpu == self.line._prev

    def _landed(self, arg: tuple[Task, int]) -> None:
        """The first waiter's RMW reaches the line after its releaser let the lock go: if nobody took
        the lock meanwhile, the waiter's RMW finds it free and the waiter holds it."""
        task, _land = arg
        now = self.ctx.engine.now
        a = self.line.arrival(task.cpu)
        if a > now:  # pushed back by the old owner's local RMWs (cache lock)
            self.ctx.engine.call_at(a, self._landed, (task, a))
            return
        if self.holder is not None or not self.waiters or self.waiters[0][0] is not task:
            return
        w = self.waiters.popleft()
        if task.cpu in self.line._cpu:
            self.line.remove_spinner(task.cpu)
        self._take(task)
        # Its RMW found the lock free: an uncontended acquisition after all (lock_stat counts a contention
        # only when the trylock fails), whose time since issue was the RMW's transfer.
        st = self.stat
        st.contentions -= 1
        if w[5]:
            st.con_bounces -= 1
        st.extra["landed_on_free_lock"] = st.extra.get("landed_on_free_lock", 0) + 1
        self.ctx.counters.busy(task.cpu, "_raw_spin_lock", now - w[1])
        self.ctx.engine.wake(task, 0)

    def _take(self, task: Task) -> int:
        now = self.ctx.engine.now
        self.holder = task
        self.acquired_at = now
        self.last_cpu = task.cpu
        return 0

    def _arrive(self, task: Task, since: int, land: int) -> Any:
        """The arrival's RMW acts on the lock word (v3.12 ``arch_spin_lock``'s ``xadd``; v4.13
        ``queued_spin_lock``'s fast-path ``atomic_cmpxchg_acquire(&lock->val, 0, _Q_LOCKED_VAL)``)."""
        cpu = task.cpu
        self.stat.note_contention(cpu, self.last_cpu)
        b = self.last_cpu >= 0 and cpu != self.last_cpu  # the contention was a con-bounce
        w = self.waiters
        if self._ticket:
            w.append([task, since, _QUEUED, 0, land, b, land])
            self.line.add_spinner(cpu)
            return PARK
        if self._handover and not w:
            # val == _Q_PENDING_VAL (0,1,0): "wait for in-progress pending->locked hand-overs", reading the word
            self._watchers.append((task, since))
            return PARK
        if w or self._handover:
            return self._enqueue(task, since, land, b)
        # v4.13 slowpath "trylock || pending": atomic_cmpxchg_acquire(&lock->val, val, new), new = locked |
        # pending, on the line the fast path's RMW has just brought here: no second transfer
        return self._pending(task, since, land, b)

    def _set_pending(self, task: Task, since: int) -> Any:
        """A watcher after the pending -> locked hand-over: v4.13's "trylock || pending" cmpxchg, one RMW
        on the line the new holder's store took (its re-read and the RMW are one transfer: the RFO brings
        the line with the new value)."""
        line = self.line
        now = self.ctx.engine.now
        cost = line.rmw(task.cpu, now)
        self.stat.extra["pending_rmws"] = self.stat.extra.get("pending_rmws", 0) + 1
        land = now + cost if line.remote else now
        if self.waiters:
            return self._enqueue(task, since, land, False)
        return self._pending(task, since, land, False)

    def _pending(self, task: Task, since: int, land: int, bounced: bool) -> Any:
        """0,0,1 -> 0,1,1: the pending waiter, spinning on the lock word."""
        self.waiters.append([task, since, _PENDING, 0, land, bounced, land])
        self.line.add_spinner(task.cpu)
        return PARK

    def _enqueue(self, task: Task, since: int, land: int, bounced: bool) -> Any:
        """MCS queue (``xchg_tail``). Behind only the pending waiter (or a pending -> locked hand-over)
        the queue was empty: this node is the head and spins on the lock word; else it writes its
        predecessor's node->next (a HITM of that node's line) and spins on its own node."""
        w = self.waiters
        cpu = task.cpu
        now = self.ctx.engine.now
        t = land + self._slowpath_ns
        self.ctx.engine.call_at(t if t > now else now, self._xchg_tail, task)
        if not w or (len(w) == 1 and w[0][2] == _PENDING):
            w.append([task, since, _HEAD, 0, land, bounced, land])
            self.line.add_spinner(cpu)
            return PARK
        st = self.stat
        link = int(self.line.costs.hitm[w[-1][0].cpu][cpu])
        st.extra["mcs_node_transfers"] = st.extra.get("mcs_node_transfers", 0) + 1
        w.append([task, since, _QUEUED, link, land, bounced, _NOT_READY])
        return PARK

    def _head_reads(self, task: Task) -> None:
        """A waiter made queue head by its predecessor's MCS hand-off reads the lock word when the node store
        has reached it (v4.13 ``queued_spin_lock_slowpath``: ``atomic_cond_read_acquire(&lock->val,
        !(VAL & _Q_LOCKED_PENDING_MASK))``): the line comes from its owner and both keep a copy, so the
        holder's unlock store has to take it back (:meth:`CacheLine.write` invalidates the readers) before the
        head's re-read (docs/locks.md, session 29)."""
        if self.holder is task or task.cpu not in self.line._cpu:  # granted, or no longer spinning here
            return
        self.line.read(task.cpu, self.ctx.engine.now)
        st = self.stat
        st.extra["head_first_reads"] = st.extra.get("head_first_reads", 0) + 1

    def _xchg_tail(self, task: Task) -> None:
        """The queueing arrival's ``xchg_tail()``: a second locked RMW on the lock word (v4.13
        ``queued_spin_lock_slowpath``: after the fast path's ``cmpxchg`` failed and the node was set up,
        ``old = xchg_tail(lock, tail)``, an ``xchg`` of the tail half-word), the slowpath's own instructions
        (:data:`SLOWPATH_CYCLES`) after the first RMW completed. If another CPU took the line in between (a
        new holder's store, or the re-read of a queue head or pending waiter spinning on it) the RMW takes it
        back and the spinners re-read it (docs/locks.md, session 29). v4.16+'s ``queued_spin_trylock`` read
        just before it and the RMW are one transfer (the RFO brings the line with its value)."""
        if self.holder is task:  # granted before its RMW came (not reachable within one transfer)
            return
        self.line.rmw(task.cpu, self.ctx.engine.now)
        st = self.stat
        st.extra["xchg_tail_rmws"] = st.extra.get("xchg_tail_rmws", 0) + 1

    def release(self, task: Task) -> int:
        """``spin_unlock()``: hand the lock to the next waiter, if any. Returns 0
        (the unlock store retires from the store buffer; the releaser does not wait)."""
        if self.holder is not task or self._deferred is not None:
            raise RuntimeError(f"{self.name}: released by {task!r}, held by {self.holder!r}")
        now = self.ctx.engine.now
        self.stat.note_hold(now - self.acquired_at)
        if self._sb_task is task:
            self._sb_task = None
            if self._sb_done > now:
                # its grant stores are still on their way: the unlock store becomes visible after them
                self._deferred = [task]
                self.ctx.engine.call_at(self._sb_done, self._release_visible, task)
                self.stat.extra["unlocks_behind_grant_stores"] = (
                    self.stat.extra.get("unlocks_behind_grant_stores", 0) + 1)
                return 0
        self._unlock(task)
        return 0

    def _release_visible(self, task: Task) -> None:
        """A deferred unlock (:meth:`release`) becomes visible now; then the releaser's own acquire, if it
        made one meanwhile, issues its RMW."""
        d = self._deferred
        self._deferred = None
        self._unlock(task)
        if d is not None and len(d) > 1:
            now = self.ctx.engine.now
            r = self._acquire(task, now, d[1])
            if r is not PARK:  # its RMW took the lock: it goes on when the RMW completes
                self.ctx.engine.wake(task, r - (now - d[1]))

    def _unlock(self, task: Task) -> None:
        """The unlock store, visible at the engine's now: hand the lock to the next waiter, if any."""
        now = self.ctx.engine.now
        st = self.stat
        line = self.line
        # The unlock store: take the line, invalidate the spinners, storm.
        done, first, mid = line.write(task.cpu, now)
        if not self.waiters:
            self.holder = None
            return
        w0 = self.waiters[0]
        if line.arrival(w0[0].cpu) > now and task.cpu == line._prev:
            # The first waiter's RMW is still in flight to the line this CPU owns: it has not taken its
            # ticket (set its pending bit) yet, so the lock is free until it lands.
            self.holder = None
            self.ctx.engine.call_at(line.arrival(w0[0].cpu), self._landed, (w0[0], w0[4]))
            return
        e = self.waiters.popleft()
        nxt, since, role, ready = e[0], e[1], e[2], e[6]
        ncpu = nxt.cpu
        # The next owner is, on average, half-way through the storm of the spinners (CacheLine.storm).
        h = done + int(first + mid)
        if ready > now + h:
            # a queue head that is not spinning on the lock word yet (its MCS hand-off is still on its way:
            # _granted): its first read of the word, when it gets there, brings the line from the releaser
            h = ready - now + int(line.costs.hitm[task.cpu][ncpu])
        line.remove_spinner(ncpu)
        self.holder = nxt
        self.last_cpu = ncpu
        if not self._ticket:
            self._handover = True
            # The new holder's store to the lock word (clear_pending_set_locked for the pending waiter,
            # set_locked or the last waiter's cmpxchg for the queue head), when its re-read has seen
            # the lock free: at that time, so that what the others do meanwhile (the releaser's
            # cmpxchg straight after its unlock) is on the line first.
            self.acquired_at = now + h
            self.ctx.engine.call_at(now + h, self._granted, (nxt, since, role))
            return
        self.acquired_at = now + h
        wait = now + h - since
        st.note_wait(wait)
        self.ctx.counters.busy(ncpu, self._spin_func, wait)
        self.ctx.engine.wake(nxt, h)

    def _granted(self, arg: tuple[Task, int, int]) -> None:
        """qspinlock: the new holder's lock-word access, then (a queue head with a successor) the
        hand-off of the queue head role to the next node; its critical section starts at once.

        v4.13 ``queued_spin_lock_slowpath``: the pending waiter's ``clear_pending_set_locked()`` and a queue
        head's ``set_locked()`` are ``WRITE_ONCE()`` stores, and ``arch_mcs_spin_unlock_contended()`` is
        ``smp_store_release()``: plain stores on x86, which retire into the store buffer (Intel SDM vol. 3A
        §8.2.2), so the holder goes on while the line comes (docs/locks.md, session 29; as the releaser's
        unlock store in :meth:`release`). The store takes the line all the same (later accesses queue behind
        it). Only the last queued waiter's ``atomic_cmpxchg_relaxed(&lock->val, val, _Q_LOCKED_VAL)`` is a
        locked RMW whose result the CPU waits for."""
        nxt, since, role = arg
        now = self.ctx.engine.now
        ncpu = nxt.cpu
        line = self.line
        st = self.stat
        last = role == _HEAD and not self.waiters  # the cmpxchg that clears the tail
        h = line.write(ncpu, now, last)[0]
        sb = 0  # ns until the holder's buffered stores are done
        if not last:  # a plain store: the holder goes on, the store completes in h
            sb, h = h, 0
        st.extra["lock_word_stores"] = st.extra.get("lock_word_stores", 0) + 1
        if role == _HEAD and self.waiters:
            # arch_mcs_spin_unlock_contended(&next->locked): the next waiter's node line, a store the holder
            # does not wait for; the successor sees it one node transfer later (the store and its re-read of
            # node->locked, one transfer as a ping-pong's one-way trip) and only then reads the lock word
            # (release: a hold shorter than that makes the hand-off wait for it)
            succ = self.waiters[0]
            if succ[2] == _QUEUED:
                succ[2] = _HEAD
                xfer = line.costs.hitm[ncpu][succ[0].cpu]
                # the waiter sees the store after the PAUSE the store found it in, P / 2 on average (session 35);
                # the holder's store itself is done when its transfer is
                link = int(xfer + line.pause_ns / 2)
                succ[6] = now + link
                if int(xfer) > sb:  # the node store overlaps the lock word's (different lines)
                    sb = int(xfer)
                line.add_spinner(succ[0].cpu)
                self.ctx.engine.call_at(now + link, self._head_reads, succ[0])
                st.extra["mcs_node_transfers"] = st.extra.get("mcs_node_transfers", 0) + 1
        if sb:
            self._sb_task = nxt
            self._sb_done = now + sb
        self.acquired_at = now + h
        wait = now + h - since
        st.note_wait(wait)
        self.ctx.counters.busy(ncpu, self._spin_func, wait)
        self.ctx.engine.wake(nxt, h)
        self._handover = False
        if self._watchers:
            # The hand-over is over (0,0,1, or with a tail): each watcher goes on with "trylock || pending".
            # Its re-read and its cmpxchg are one transfer: the RFO brings the line with the new value.
            ws, self._watchers = self._watchers, []
            for t, since in ws:
                r = self._set_pending(t, since)
                if r is not PARK:
                    self.ctx.counters.busy(t.cpu, "_raw_spin_lock", now - since)
                    self.ctx.engine.wake(t, 0)
