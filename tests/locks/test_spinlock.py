"""Ticket vs queued spinlocks on ``tiny``: exact grant times and lock_stat.

Transfers on tiny: SMT sibling 10 ns, same socket 50 ns, other socket 200 ns.
CPUs 0,1,4,5 are socket 0; 2,3,6,7 socket 1; siblings are c and c+4.

Every write to the lock line (an arrival's xadd / set-pending / xchg_tail, the
unlock store) first takes the line from its holder (read-for-ownership: HITM
from the last writer, or, after a re-read storm, the mean HIT from the last
storm's readers), then invalidates the spinners, whose re-reads are served: the
first from the writer (mean HITM(writer, w)); tiny's L3 is inclusive, so then one
forward per further socket with spinners (mean HIT over ordered pairs of their
sockets), and a socket's other cores read its L3 one after another (40 ns each;
SMT siblings share their core's read), off the line's path. The next owner is
served half-way through: first + (k-1)/2 · forward + Σ_s c_s (m_s-1) / 2n · 40
(n spinners on k sockets, c_s of them on m_s cores of socket s). Ticket waiters all
spin on the line; qspinlock's only the pending waiter and the MCS queue head,
and a queue head that takes the lock writes its successor's node (one HITM).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from conftest import Rig
from mmsim.engine.core import PARK, Task
from mmsim.locks.spinlock import Spinlock, SpinlockKind

H = 1000  # hold time (ns)


def _contend(
    r: Rig, kind: SpinlockKind, cpus: list[int], hold: int = H, home: int = 0
) -> tuple[Spinlock, dict[int, int], dict[int, int]]:
    """Tasks on ``cpus`` all call spin_lock() at t=0 (in list order); each holds
    ``hold`` ns. Returns the lock, grant time and release time by CPU."""
    lk = Spinlock(r.ctx, "lk", kind, home_cpu=home)
    granted: dict[int, int] = {}
    released: dict[int, int] = {}

    def body(t: Task) -> Generator[Any, Any, None]:
        yield lk.acquire(t)
        granted[t.cpu] = r.engine.now
        yield r.counters.busy(t.cpu, "critical_section", hold)
        released[t.cpu] = r.engine.now
        assert lk.release(t) == 0

    for i, cpu in enumerate(cpus):
        t = Task(i, f"t{i}", cpu=cpu)
        r.engine.start(t, body(t))
    r.engine.run()
    return lk, granted, released


def test_ticket_grant_times(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk, granted, released = _contend(r, SpinlockKind.TICKET, [0, 2, 6, 1])
    # Arrivals at t=0, one xadd each on the lock line (home CPU 0):
    #   CPU 0: owner 0, 0 ns: granted at 0.
    #   CPU 2: RFO 0→2 200; no spinners.                          line free 200, spinners {2}
    #   CPU 6: RFO 2→6 10; storm {2}: HITM(6,2) 10.               line free 220, spinners {2,6}
    #   CPU 1: RFO from {2}: 200; storm {2,6} (one socket): first 200, no forward: free 620;
    #          spinners {2,6,1} on sockets {1, 0}.
    # Release by 0 at 1000: RFO from {2,6}: 200; storm n=3 on k=2 sockets: first (200+200+50)/3 = 150, sent
    #   when the first of the 3 spinners ends its PAUSE (tiny: 10 ns; P / (n + 1) = 2.5, session 35),
    #   one forward 200 (2 and 6 are one core: one L3 read); CPU 2 half-way: 200 + int(152.5 + 200/2) = 452
    #   → 1452.
    # Release by 2 at 2452: RFO from {2,6,1}: (0+10+200)/3 = 70; storm {6,1}: first
    #   (10+200)/2 = 105 + 10/3, one forward 200: 70 + int(108.3 + 100) = 278 → 2730.
    # Release by 6 at 3730: RFO from {6,1}: (0+200)/2 = 100; storm {1}: 200 + 10/2 → 4035.
    assert granted == {0: 0, 2: 1452, 6: 2730, 1: 4035}
    assert released[1] == 5035
    st = lk.stat
    assert (st.acquisitions, st.contentions) == (4, 3)
    assert st.wait_ns_total == 1452 + 2730 + 4035  # all waited from t=0
    assert (st.wait_ns_min, st.wait_ns_max) == (1452, 4035)
    assert (st.hold_ns_total, st.hold_ns_min, st.hold_ns_max) == (4 * H, H, H)
    # lock->cpu: 0 first, so every later acquisition and contention bounced
    assert (st.acq_bounces, st.con_bounces) == (3, 3)
    assert st.kind == "spinlock(ticket)"
    # Spinning is charged on grant to the waiter's CPU under _raw_spin_lock.
    assert r.counters.prof_ns[2]["_raw_spin_lock"] == 1452
    assert r.counters.prof_ns[6]["_raw_spin_lock"] == 2730
    assert r.counters.prof_ns[1]["_raw_spin_lock"] == 4035
    assert lk.holder is None
    assert (lk.line.nspin, lk.line.owner) == (0, 1)
    cols = st.to_dict()["lock_stat"]
    assert cols == {
        "con-bounces": 3, "contentions": 3, "waittime-min": 1452, "waittime-max": 4035,
        "waittime-total": 8217, "waittime-avg": 8217 / 3, "acq-bounces": 3, "acquisitions": 4,
        "holdtime-min": H, "holdtime-max": H, "holdtime-total": 4 * H, "holdtime-avg": float(H),
    }


def test_queued_grant_times(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk, granted, _ = _contend(r, SpinlockKind.QUEUED, [0, 2, 6, 1])
    # Every storm's first re-read waits for the first of its n spinners to end its PAUSE: P / (n + 1), P = 10 ns
    # on tiny (10 cycles at 1 GHz, session 35); a node hand-off's waiter sees the store P / 2 late.
    # CPU 2 sets pending (RFO 200) and spins on the lock word; CPU 6's fast-path cmpxchg (RFO 10 + storm
    # {2} 10 + 5: its RMW done at 210, line free at 225) queues it as MCS head, spinning on the lock word; CPU 1's
    # (RFO from {2,6} 200 + storm 200 + 3.3: done at 425, line free at 628) queues it behind 6 (it writes 6's node:
    # HITM(6,1) 200) and it spins locally. Each queued arrival then makes its xchg_tail, the slowpath's 40
    # cycles (40 ns at 1 GHz) after its cmpxchg (session 29): 6's at 250, queued behind 628, RFO from {2,6}
    # (0+10)/2 = 5 + storm 5 + 3.3: line free 641; 1's at 465, queued behind 641, RFO 200 + storm 203.3: free 1044.
    # Release by 0 at 1000: queued behind 1044; RFO from {2,6}: 200; storm {2,6} (one socket, one core):
    #   first 203.3, no forward, no L3 queue: CPU 2 (pending) holds at 1447. Its clear_pending_set_locked, from
    #   its readers {2,6} (5), and CPU 6's re-read (10 + 5) take the line until 1467: a plain store, which CPU 2
    #   does not wait for (it retires from the store buffer, session 29).
    # Release by 2 at 2447: RFO from {6}: 10; storm {6}: 15 → 2472: CPU 6, the queue head, holds; its
    #   set_locked (own line) and its write of CPU 1's node (HITM(6,1) 200, seen 5 later) are stores it does not
    #   wait for; CPU 1 is queue head from then: when the node store reaches it (2677) it reads the lock word, a
    #   HITM from CPU 6 (200), and both keep a copy.
    # Release by 6 at 3472 (its stores long done): it takes the line back from CPU 1's copy (200); storm {1}:
    #   205 → 3877; CPU 1, the last waiter, claims with cmpxchg (a locked RMW it waits for) on its own copy: 0.
    assert granted == {0: 0, 2: 1447, 6: 2472, 1: 3877}
    st = lk.stat
    assert (st.acquisitions, st.contentions) == (4, 3)
    assert st.wait_ns_total == 1447 + 2472 + 3877
    assert st.wait_ns_max == 3877
    assert (st.hold_ns_total, st.hold_ns_max) == (4 * H, H)
    assert st.extra["lock_word_stores"] == 3  # each contended grant's set_locked / clear_pending_set_locked
    assert st.extra["mcs_node_transfers"] == 2  # CPU 1 linking behind 6; 6 handing the head to 1
    assert st.extra["xchg_tail_rmws"] == 2  # the two queued arrivals (6, 1)
    assert st.extra["head_first_reads"] == 1  # CPU 1, made head by CPU 6's MCS hand-off
    assert "unlocks_behind_grant_stores" not in st.extra  # every hold (1 us) outlasts the grant's stores
    assert st.kind == "spinlock(queued)"
    assert r.counters.prof_ns[2]["native_queued_spin_lock_slowpath"] == 1447
    assert "_raw_spin_lock" not in r.counters.prof_ns[2]


@pytest.mark.parametrize("nwait", [1, 2, 3, 4])
def test_ticket_vs_queued_handoff(make_rig: Callable[[], Rig], nwait: int) -> None:
    """``nwait`` waiters on socket 1 (CPUs 2, 3, 6, 7; 2/6 and 3/7 SMT siblings), holder
    on CPU 0, hold 10 µs (longer than any storm, so every release finds the line free).

    First hand-off (0 → 2), both kinds: RFO of the line back to CPU 0 from the last
    arrival's readers (200) + CPU 2's place in the storm: first 200 (HITM 0→socket 1);
    every re-reader is on socket 1, so no forward; its cores (2/6 and 3/7: at most two)
    read the L3 one after another (40 ns; a random reader waits Σ c(m-1)/2n · 40 = 20
    whenever both cores have one). The first re-read is sent when the first of the n
    spinners ends its PAUSE: P / (n + 1), P = 10 ns on tiny (session 35). Ticket: all
    nwait waiters re-read: 200 + int(200 + 5) = 405, 200 + int(203.3 + 20) = 423,
    int(202.5 + 20) → 422, int(202 + 20) → 422. Queued: at most 2 re-readers (pending
    CPU 2 and queue head CPU 3): 405, 423, 423, 423; CPU 2's lock-word store
    (clear_pending_set_locked) then takes the line from its readers {2, 3} (25), a plain
    store CPU 2 does not wait for (session 29).
    Second hand-off (2 → 3): ticket RFO from the readers {2, 3, 6, 7}[:nwait] + first
    HITM from 2 + its PAUSE share + the L3 queue: 25 + int(50 + 5) = 80; 20 + int(30 +
    3.3 + 20) = 73; 27 + int(36.7 + 2.5 + 20) = 86. Queued: the unlock store takes the
    line from CPU 3 (50: CPU 2's store left 3 the only reader), CPU 3's re-read (50 + 5):
    105; its claim (the cmpxchg when it is the last waiter, 0: nobody else reads the
    line; else set_locked and the write of 6's node, stores it does not wait for) adds
    nothing."""
    hold = 10_000
    cpus = [0] + [2, 3, 6, 7][:nwait]
    _, g_ticket, _ = _contend(make_rig(), SpinlockKind.TICKET, cpus, hold)
    _, g_queued, _ = _contend(make_rig(), SpinlockKind.QUEUED, cpus, hold)
    assert g_ticket[2] - hold == [405, 423, 422, 422][nwait - 1]
    assert g_queued[2] - hold == [405, 423, 423, 423][nwait - 1]
    if nwait >= 2:
        assert g_ticket[3] - g_ticket[2] - hold == [80, 73, 86][nwait - 2]
        assert g_queued[3] - g_queued[2] - hold == [105, 105, 105][nwait - 2]


def test_uncontended_acquire_pays_the_line_transfer(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk = Spinlock(r.ctx, "lk", SpinlockKind.QUEUED, home_cpu=0)
    t = Task(1, "t", cpu=2)
    log: list[tuple[int, int]] = []

    def body() -> Generator[Any, Any, None]:
        for _ in range(2):
            d = lk.acquire(t)
            yield d
            log.append((d, r.engine.now))
            yield 100
            lk.release(t)

    r.engine.start(t, body())
    r.engine.run()
    # First: line on home CPU 0 → CPU 2: 200 ns; second: line already on CPU 2: 0.
    assert log == [(200, 200), (0, 300)]
    assert (lk.stat.acquisitions, lk.stat.contentions, lk.stat.wait_ns_total) == (2, 0, 0)
    assert lk.stat.hold_ns_total == 200  # 200..300 and 300..400
    assert r.counters.prof_ns[2]["_raw_spin_lock"] == 200


def test_release_by_non_holder_raises(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk = Spinlock(r.ctx, "lk", SpinlockKind.TICKET)
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=1)
    with pytest.raises(RuntimeError, match="released by"):
        lk.release(a)  # not held at all
    assert lk.acquire(a) == 0
    assert lk.acquire(b) is PARK
    with pytest.raises(RuntimeError, match="lk: released by"):
        lk.release(b)


def test_lock_class_shares_one_stat(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    a = Spinlock(r.ctx, "ptl", SpinlockKind.QUEUED)
    b = Spinlock(r.ctx, "ptl", SpinlockKind.QUEUED)
    assert a.stat is b.stat and a.stat.instances == 2
    assert r.ctx.stats["ptl"].to_dict()["instances"] == 2
