"""RwSem and Mutex on ``tiny``: sharing, exclusion, FIFO wake-ups, sleeping vs spinning.

Costs: every down/up is an RMW on the count's line (home CPU 0); transfers
SMT 10 / socket 50 / remote 200 ns. A sleeper woken on its idle CPU resumes
wakeup_ns + ctx_switch_ns = 5000 + 2000 = 7000 ns after the wake-up.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from conftest import Rig
from mmsim.engine.core import PARK, Task
from mmsim.locks.rwsem import Mutex, RwSem
from mmsim.metrics.counters import CONTEXT_SWITCHES

Log = list[tuple[str, str, int]]


def _user(r: Rig, sem: RwSem, log: Log, t: Task, write: bool, hold: int) -> Generator[Any, Any, None]:
    down, up = (sem.down_write, sem.up_write) if write else (sem.down_read, sem.up_read)
    d = down(t)
    yield d
    log.append((t.name, "in", r.engine.now))
    yield r.counters.busy(t.cpu, "hold", hold)
    log.append((t.name, "out", r.engine.now))
    yield up(t)


def _spawn(
    r: Rig, sem: RwSem, log: Log, tid: int, name: str, cpu: int, write: bool, hold: int, at: int
) -> Task:
    t = Task(tid, name, cpu=cpu)
    r.sched.spawn(t, _user(r, sem, log, t, write, hold), delay=at)
    return t


def _cs(r: Rig) -> int:
    return sum(p[CONTEXT_SWITCHES] for p in r.counters.perf)


def test_readers_share(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    sem = RwSem(r.ctx, "sem", home_cpu=0, spin_on_owner=False)
    log: Log = []
    _spawn(r, sem, log, 1, "r1", 0, False, 1000, 0)
    _spawn(r, sem, log, 2, "r2", 1, False, 1000, 0)
    r.engine.run()
    # r1 (CPU 0): count line already on CPU 0 → in at 0, out at 1000.
    # r2 (CPU 1): line 0→1 50 → in at 50 while r1 holds it, out at 1050.
    assert log == [("r1", "in", 0), ("r2", "in", 50), ("r1", "out", 1000), ("r2", "out", 1050)]
    # up_read: r1 at 1000: line 1→0 50 (free at 1050); r2 at 1050: 0→1 50 → ends 1100.
    assert r.engine.now == 1100
    st = sem.stat
    assert (st.acquisitions, st.contentions, st.wait_ns_total) == (2, 0, 0)
    assert st.extra == {"read_acquisitions": 2, "read_contentions": 0, "sleeps": 0, "line_wait_ns": 0, "steals": 0,
                        "handoffs": 0, "spin_timeouts": 0, "wasted_wakeups": 0}
    assert (st.hold_ns_total, st.hold_ns_max) == (2000, 1000)  # 0..1000 and 50..1050
    assert _cs(r) == 0
    assert sem.line.transfers == 3


def test_writer_excludes_queued_writer_blocks_readers_and_fifo_wakeups(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    sem = RwSem(r.ctx, "sem", home_cpu=0, spin_on_owner=False)
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
    _spawn(r, sem, log, 2, "r1", 1, False, 1000, 100)
    _spawn(r, sem, log, 3, "r2", 3, False, 1000, 200)
    _spawn(r, sem, log, 4, "w2", 2, True, 1000, 300)
    _spawn(r, sem, log, 5, "r3", 5, False, 1000, 400)
    r.engine.run()
    # Arrivals (each an RMW of the count line, then a sleep: spin_on_owner off):
    #   w1  t=0   CPU 0: 0 ns, takes it (write_since 0).
    #   r1  t=100 CPU 1: 0→1 50, line free at 150; writer held → sleeps.
    #   r2  t=200 CPU 3: 1→3 200, line free at 400; sleeps.
    #   w2  t=300 CPU 2: waits for the line until 400 (+100), 3→2 50 → 450; sleeps.
    #   r3  t=400 CPU 5: waits until 450 (+50), 2→5 200 → 650; sleeps behind w2.
    # w1 up_write at 10000 (0 ← 5: 50): wakes the leading readers r1, r2 (not
    #   w2, not r3 behind it): granted at 10000, running at 10000 + 7000 = 17000.
    # r1, r2 out at 18000; r1 up_read: 0→1 50 (free 18050); r2 up_read waits
    #   50, 1→3 200 (free 18250). Last reader out at 18000 → w2, first in the queue, is
    #   woken but granted nothing (rwsem_mark_wake: "other writers are able to steal it"):
    #   running at 18000 + 7000 = 25000, its trylock 3→2 50 → in at 25050.
    # w2 out at 26050; up_write on its own line (0) → grant r3 at 26050, running at
    #   33050, out at 34050, up_read 2→5 200 → done at 34250.
    assert log == [
        ("w1", "in", 0),
        ("w1", "out", 10_000),
        ("r1", "in", 17_000),
        ("r2", "in", 17_000),
        ("r1", "out", 18_000),
        ("r2", "out", 18_000),
        ("w2", "in", 25_050),
        ("w2", "out", 26_050),
        ("r3", "in", 33_050),
        ("r3", "out", 34_050),
    ]
    assert r.engine.now == 34_250
    st = sem.stat
    assert (st.acquisitions, st.contentions) == (5, 4)
    # Waits run from arrival to grant (a reader's wake-up latency is not included; the writer's
    # retry is its grant): r1 10000-100, r2 10000-200, w2 25050-300, r3 26050-400.
    assert st.wait_ns_total == 9900 + 9800 + 24_750 + 25_650
    assert st.wait_ns_max == 25_650
    # Holds run from grant to release: w1 10000, r1/r2 10000..18000, w2 25050..26050, r3 26050..34050.
    assert st.hold_ns_total == 10_000 + 8000 + 8000 + 1000 + 8000
    assert st.hold_ns_max == 10_000
    # line_wait: w2 100 + r3 50 + r2's up_read 50.
    assert st.extra == {"read_acquisitions": 3, "read_contentions": 3, "sleeps": 4, "line_wait_ns": 200,
                        "steals": 0, "handoffs": 0, "spin_timeouts": 0, "wasted_wakeups": 0}
    # One context switch per sleeper, on its own CPU.
    cs = [p[CONTEXT_SWITCHES] for p in r.counters.perf]
    assert cs == [0, 1, 1, 1, 0, 1, 0, 0]


def test_writer_spins_on_a_running_owner(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    sem = RwSem(r.ctx, "sem", home_cpu=0, spin_on_owner=True)
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
    _spawn(r, sem, log, 2, "w2", 4, True, 1000, 100)
    r.engine.run()
    # w2 (CPU 4, SMT sibling of 0) at 100: 0→4 10; the owner holds it and nobody
    # queues → spins. w1 up_write at 10000 (4→0 10) hands over with xfer(0,4)=10:
    # w2 in at 10010 (no wake-up latency), out at 11010, up_write 0→4 10 → 11020.
    assert log == [("w1", "in", 0), ("w1", "out", 10_000), ("w2", "in", 10_010), ("w2", "out", 11_010)]
    assert r.engine.now == 11_020
    st = sem.stat
    assert st.extra["sleeps"] == 0 and _cs(r) == 0
    assert (st.contentions, st.wait_ns_total) == (1, 10_010 - 100)
    assert r.counters.prof_ns[4]["rwsem_optimistic_spin"] == 9910
    assert st.hold_ns_total == 10_000 + 1000


def test_writer_sleeps_without_spin_on_owner(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    sem = RwSem(r.ctx, "sem", home_cpu=0, spin_on_owner=False)
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
    _spawn(r, sem, log, 2, "w2", 4, True, 1000, 100)
    r.engine.run()
    # Same as above but w2 sleeps: woken at 10000 (granted nothing), runs at 17000, its
    # trylock 0→4 10 → in at 17010.
    assert log[2:] == [("w2", "in", 17_010), ("w2", "out", 18_010)]
    assert r.counters.prof_ns[4]["rwsem_down_write_slowpath"] == 10
    assert sem.stat.extra["sleeps"] == 1
    assert r.counters.perf[4][CONTEXT_SWITCHES] == 1 and _cs(r) == 1
    assert "rwsem_optimistic_spin" not in r.counters.prof_ns[4]


def test_up_write_by_non_owner_raises(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    sem = RwSem(r.ctx, "sem")
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=1)
    assert sem.down_write(a) == 0
    with pytest.raises(RuntimeError, match="sem: up_write by"):
        sem.up_write(b)


def test_mutex_spins_then_hands_over(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    mx = Mutex(r.ctx, "mx", home_cpu=0, spin_on_owner=True)
    log: list[tuple[str, int]] = []

    def body(t: Task, hold: int) -> Generator[Any, Any, None]:
        yield mx.lock(t)
        log.append((t.name, r.engine.now))
        yield hold
        yield mx.unlock(t)

    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=1)
    r.sched.spawn(a, body(a, 5000))
    r.sched.spawn(b, body(b, 100), delay=10)
    r.engine.run()
    # b at 10: 0→1 50, spins. a unlock at 5000 (1→0 50) hands over: + xfer(0,1)=50 → 5050;
    # b unlock at 5150: 0→1 50 → 5200.
    assert log == [("a", 0), ("b", 5050)]
    assert r.engine.now == 5200
    st = mx.stat
    assert st.kind == "mutex"
    assert (st.acquisitions, st.contentions, st.wait_ns_total) == (2, 1, 5040)
    assert r.counters.prof_ns[1]["mutex_spin_on_owner"] == 5040
    assert r.counters.prof_ns[0]["mutex_lock"] == 0 and r.counters.prof_ns[1]["mutex_unlock"] == 50


def test_mutex_waiter_sleeps_when_the_owner_sleeps(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    mx = Mutex(r.ctx, "mx", home_cpu=0, spin_on_owner=True)
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=1)

    def owner() -> Generator[Any, Any, None]:
        yield mx.lock(a)
        yield r.sched.sleep(a)  # blocks (e.g. on I/O) holding the mutex
        yield mx.unlock(a)

    def waiter() -> Generator[Any, Any, None]:
        got = mx.lock(b)
        assert got is PARK
        yield got

    r.sched.spawn(a, owner())
    r.sched.spawn(b, waiter(), delay=10)
    r.engine.call_at(100_000, lambda _: r.sched.wake_up(a))
    r.engine.run()
    # The owner is asleep when b contends: b should sleep, not spin for ~107 µs.
    assert mx.stat.extra["sleeps"] == 1
    assert "mutex_spin_on_owner" not in r.counters.prof_ns[1]
