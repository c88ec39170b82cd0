"""rwsem and mutex behaviours by kernel version, on ``tiny``: exact hand-off
order and counts for each policy (locks/rwsem.py's RwsemPolicy/MutexPolicy).

Costs as in test_rwsem.py: every down/up is an RMW on the count's line (home
CPU 0); transfers SMT 10 / socket 50 / remote 200 ns; a sleeper woken on its
idle CPU resumes wakeup_ns + ctx_switch_ns = 7000 ns after the wake-up.
CPUs 0, 1, 4, 5 are socket 0; 2, 3, 6, 7 socket 1.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from conftest import Rig
from mmsim.engine.core import Task
from mmsim.locks.rwsem import Mutex, MutexPolicy, RwSem, RwsemPolicy, rspin_threshold_ns
from mmsim.metrics.counters import CONTEXT_SWITCHES

Log = list[tuple[str, str, int]]


def _user(r: Rig, sem: RwSem, log: Log, t: Task, write: bool, hold: int, loops: int = 1) -> Generator[Any, Any, None]:
    down, up = (sem.down_write, sem.up_write) if write else (sem.down_read, sem.up_read)
    for _ in range(loops):
        yield down(t)
        log.append((t.name, "in", r.engine.now))
        yield r.counters.busy(t.cpu, "hold", hold)
        log.append((t.name, "out", r.engine.now))
        yield up(t)


def _spawn(r: Rig, sem: RwSem, log: Log, tid: int, name: str, cpu: int, write: bool, hold: int, at: int,
           loops: int = 1) -> Task:
    t = Task(tid, name, cpu=cpu)
    r.sched.spawn(t, _user(r, sem, log, t, write, hold, loops), delay=at)
    return t


def _cs(r: Rig) -> int:
    return sum(p[CONTEXT_SWITCHES] for p in r.counters.perf)


def _ins(log: Log) -> list[str]:
    return [n for n, what, _ in log if what == "in"]


def test_spinning_writer_steals_ahead_of_a_sleeping_reader(make_rig: Callable[[], Rig]) -> None:
    """v3.16 (4fc828e24cd9): a writer spins on a running writer owner even with
    waiters queued, and takes the lock ahead of them on release."""
    r = make_rig()
    sem = RwSem(r.ctx, "sem", policy=RwsemPolicy(spin_on_owner=True))
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
    _spawn(r, sem, log, 2, "r1", 1, False, 1000, 100)  # readers do not spin: sleeps
    _spawn(r, sem, log, 3, "w2", 4, True, 1000, 200)  # spins although r1 is queued
    r.engine.run()
    # w1 up_write at 10000 (line 4→0 10) → w2 (spinner) in at 10000 + xfer(0,4) 10 = 10010.
    # w2 out 11010, up_write (0→4 10) → r1 woken, running at 11010 + 7000 = 18010.
    assert log == [("w1", "in", 0), ("w1", "out", 10_000), ("w2", "in", 10_010), ("w2", "out", 11_010),
                   ("r1", "in", 18_010), ("r1", "out", 19_010)]
    st = sem.stat
    assert (st.extra["steals"], st.extra["sleeps"], _cs(r)) == (1, 1, 1)
    assert st.to_dict()["lock_stat"]["R"]["contentions"] == 1  # type: ignore[index]
    assert st.to_dict()["lock_stat"]["W"]["contentions"] == 1  # type: ignore[index]


def test_reader_spins_on_a_running_writer_v53(make_rig: Callable[[], Rig]) -> None:
    """cf69482d62d9 (v5.3): a contended reader spins on a running writer owner."""
    def go(reader_spin: bool) -> tuple[Log, int, int]:
        r = make_rig()
        sem = RwSem(r.ctx, "sem", policy=RwsemPolicy(spin_on_owner=True, reader_spin=reader_spin))
        log: Log = []
        _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
        _spawn(r, sem, log, 2, "r1", 1, False, 1000, 100)
        r.engine.run()
        return log, sem.stat.extra["sleeps"], _cs(r)

    # spinning: in at 10000 + xfer(0,1) 50; sleeping: woken at 10000, runs at 17000
    assert go(True) == ([("w1", "in", 0), ("w1", "out", 10_000), ("r1", "in", 10_050), ("r1", "out", 11_050)], 0, 0)
    assert go(False) == ([("w1", "in", 0), ("w1", "out", 10_000), ("r1", "in", 17_000), ("r1", "out", 18_000)], 1, 1)


def test_reader_steals_a_reader_owned_sem_past_a_queued_writer(make_rig: Callable[[], Rig]) -> None:
    """v5.3 reader spinning (rwsem_try_read_lock_unqueued) lets a reader join a reader-owned
    sem although a writer waits; before, it queues behind the writer. v5.11's reader lock
    stealing (1a728dff855a) does not take a sem other readers own: "don't attempt optimistic
    lock stealing if the lock is currently owned by readers" (v6.6 rwsem_down_read_slowpath:
    RWSEM_READER_OWNED && rcnt > 1 && !RWSEM_WRITER_LOCKED -> queue), so r2 queues behind w1."""
    def go(policy: RwsemPolicy) -> tuple[list[str], int]:
        r = make_rig()
        sem = RwSem(r.ctx, "sem", policy=policy)
        log: Log = []
        _spawn(r, sem, log, 1, "r1", 0, False, 10_000, 0)
        _spawn(r, sem, log, 2, "w1", 2, True, 1000, 100)  # reader-owned, no reader spin: sleeps
        _spawn(r, sem, log, 3, "r2", 1, False, 1000, 200)
        r.engine.run()
        return _ins(log), sem.stat.extra["steals"]

    assert go(RwsemPolicy(spin_on_owner=True)) == (["r1", "w1", "r2"], 0)  # v3.16 .. v5.2
    assert go(RwsemPolicy(spin_on_owner=True, reader_spin=True)) == (["r1", "r2", "w1"], 1)  # v5.3 .. v5.10
    assert go(RwsemPolicy(spin_on_owner=True, reader_steal=True)) == (["r1", "w1", "r2"], 0)  # v5.11+


def _downgrader(r: Rig, sem: RwSem, log: Log, t: Task, write_hold: int, read_hold: int) -> Generator[Any, Any, None]:
    yield sem.down_write(t)
    log.append((t.name, "in", r.engine.now))
    yield r.counters.busy(t.cpu, "hold", write_hold)
    yield sem.downgrade(t)  # munmap's mmap_write_downgrade
    log.append((t.name, "downgraded", r.engine.now))
    yield r.counters.busy(t.cpu, "hold", read_hold)
    log.append((t.name, "out", r.engine.now))
    yield sem.up_read(t)


def test_a_writer_spinning_on_a_writer_that_downgrades_starts_its_reader_threshold_then(
        make_rig: Callable[[], Rig]) -> None:
    """v5.3+ (writer_spin_on_readers): w1 spins on w0, a running writer owner; w0 downgrades and
    holds the sem as a reader for 50 us. rwsem_optimistic_spin re-initialises rspin_threshold at
    the non-reader -> reader change, so w1 gives up rspin_threshold(1) = 10.5 us after the
    downgrade and sleeps, instead of spinning through the reader phase."""
    pol = RwsemPolicy(spin_on_owner=True, writer_spin_on_readers=True)
    r = make_rig()
    sem = RwSem(r.ctx, "sem", policy=pol)
    log: Log = []
    t0 = Task(1, "w0", cpu=0)
    r.sched.spawn(t0, _downgrader(r, sem, log, t0, 1000, 50_000))
    _spawn(r, sem, log, 2, "w1", 1, True, 1000, 100)
    r.engine.run()
    assert log[0] == ("w0", "in", 0)  # w0's write hold ends at 1000, where its downgrade's atomic makes it a reader
    down_at = next(at for n, what, at in log if what == "downgraded")
    spin = r.counters.prof_ns[1]["rwsem_optimistic_spin"]
    assert sem.stat.extra["spin_timeouts"] == 1
    # from its arrival at 100 to rspin_threshold(1) past the owner change at 1000
    assert spin == 1000 + rspin_threshold_ns(1) - 100 == 11_400
    w1_in = next(at for n, what, at in log if n == "w1" and what == "in")
    assert w1_in > down_at + 50_000  # it slept through the reader phase and was woken at w0's up_read


def test_writer_spins_on_readers_for_the_threshold_then_sleeps(make_rig: Callable[[], Rig]) -> None:
    """7d43f1ce9dd0 (v5.3): a writer spins on a reader-owned sem for
    rwsem_rspin_threshold = (20 + readers) µs / 2, then marks it non-spinnable and sleeps."""
    assert rspin_threshold_ns(1) == 10_500 and rspin_threshold_ns(40) == 25_000
    pol = RwsemPolicy(spin_on_owner=True, writer_spin_on_readers=True)

    def go(hold: int) -> tuple[Log, int, int, int]:
        r = make_rig()
        sem = RwSem(r.ctx, "sem", policy=pol)
        log: Log = []
        _spawn(r, sem, log, 1, "r1", 0, False, hold, 0)
        _spawn(r, sem, log, 2, "w1", 1, True, 1000, 100)
        r.engine.run()
        return log, sem.stat.extra["spin_timeouts"], _cs(r), r.counters.prof_ns[1]["rwsem_optimistic_spin"]

    # r1 holds 5 µs < threshold: w1 spins from 100 and is in at 5000 + xfer(0,1) 50.
    log, timeouts, cs, spin = go(5000)
    assert log[2] == ("w1", "in", 5050) and (timeouts, cs, spin) == (0, 0, 4950)
    # r1 holds 50 µs: w1 gives up at 100 + 10500 = 10600 (spun 10500), sleeps; woken at
    # 50000 → runs at 57000, its trylock 0→1 50 → in at 57050.
    log, timeouts, cs, spin = go(50_000)
    assert log[2] == ("w1", "in", 57_050) and (timeouts, cs, spin) == (1, 1, 10_500)


def test_handoff_stops_spinners_starving_a_sleeper(make_rig: Callable[[], Rig]) -> None:
    """4f23dbc1e657 (v5.3): two writers ping-pong the lock by spinning; a reader
    asleep in the queue gets it once it has waited RWSEM_WAIT_TIMEOUT (4 ms) with
    the hand-off, and only after the writers are done without it."""
    def go(handoff: bool) -> tuple[int, int]:
        r = make_rig()
        sem = RwSem(r.ctx, "sem", policy=RwsemPolicy(spin_on_owner=True, handoff=handoff))
        log: Log = []
        _spawn(r, sem, log, 1, "w1", 0, True, 1000, 0, loops=5000)
        _spawn(r, sem, log, 2, "w2", 4, True, 1000, 500, loops=5000)
        _spawn(r, sem, log, 3, "r1", 1, False, 1000, 600)
        r.engine.run()
        return next(t for n, w, t in log if n == "r1" and w == "in"), sem.stat.extra["handoffs"]

    got_h, n_h = go(True)
    got_n, n_n = go(False)
    assert n_h == 1 and n_n == 0
    # With the hand-off: the writers alternate every 1010 ns (hold 1000 + SMT hand-off 10), so
    # w1 releases at 1000 + 2020·k; the first release at or after 600 + 4 ms is k = 1980,
    # at 4,000,600 exactly; it goes to r1, running 7 µs later.
    assert got_h == 4_000_600 + 7000
    # Without: r1 waits for the 10,000 writer sections to end.
    assert got_n > 10_000 * 1000


def test_mutex_osq_lets_every_spinner_spin(make_rig: Callable[[], Rig]) -> None:
    """fb0527bd5ea9 (v3.15): every optimistic spinner queues on the OSQ while the
    owner runs; before it only one spins and the others sleep."""
    def go(osq: bool) -> tuple[list[tuple[str, int]], int]:
        r = make_rig()
        mx = Mutex(r.ctx, "mx", mpolicy=MutexPolicy(osq=osq))
        log: Log = []
        _spawn(r, mx, log, 1, "a", 0, True, 10_000, 0)
        _spawn(r, mx, log, 2, "b", 1, True, 1000, 100)
        _spawn(r, mx, log, 3, "c", 2, True, 1000, 200)
        r.engine.run()
        return [(n, t) for n, w, t in log if w == "in"], _cs(r)

    # OSQ: b in at 10000 + xfer(0,1) 50; b out 11050, c in at 11050 + xfer(1,2) 200.
    assert go(True) == ([("a", 0), ("b", 10_050), ("c", 11_250)], 0)
    # One spinner: b spins, c sleeps. a's unlock at 10000 wakes c (the first waiter) and b, spinning,
    # takes the lock (in at 10050); c runs at 17000, b long done (11050), and its trylock 1→2 200
    # takes the lock at 17200.
    assert go(False) == ([("a", 0), ("b", 10_050), ("c", 17_200)], 1)


def test_mutex_handoff_to_a_woken_waiter(make_rig: Callable[[], Rig]) -> None:
    """9d659ae14b54 (v4.10): the first waiter, woken once and beaten by a spinner,
    sets MUTEX_FLAG_HANDOFF; the next unlock hands the lock to it."""
    def go(handoff: bool) -> tuple[list[str], int]:
        r = make_rig()
        mx = Mutex(r.ctx, "mx", mpolicy=MutexPolicy(osq=True, handoff=handoff))
        order: list[str] = []
        a, b, c, d = (Task(i, n, cpu=cpu) for i, n, cpu in ((1, "a", 0), (2, "b", 1), (3, "c", 2), (4, "d", 3)))

        def owner() -> Generator[Any, Any, None]:
            yield mx.lock(a)
            order.append("a")
            yield r.sched.sleep(a)  # blocks holding the mutex: b, arriving now, sleeps
            yield 10_000
            yield mx.unlock(a)

        def user(t: Task, hold: int) -> Generator[Any, Any, None]:
            yield mx.lock(t)
            order.append(t.name)
            yield hold
            yield mx.unlock(t)

        r.sched.spawn(a, owner())
        r.sched.spawn(b, user(b, 100), delay=10)
        r.engine.call_at(1000, lambda _: r.sched.wake_up(a))
        r.sched.spawn(c, user(c, 10_000), delay=9000)  # a runs again: c spins
        r.sched.spawn(d, user(d, 100), delay=12_000)  # c runs: d spins
        r.engine.run()
        return order, mx.stat.extra["wasted_wakeups"]

    assert go(False) == (["a", "c", "d", "b"], 1)  # b starves behind every spinner
    assert go(True) == (["a", "c", "b", "d"], 1)  # b gets it at c's unlock


def test_adaptive_disabling_of_reader_spinning(make_rig: Callable[[], Rig]) -> None:
    """5cfd92e12e13 (v5.3): r1 holds the read lock 50 µs; w1 (CPU 1, at 100) spins on
    the reader-owned sem, times out at 100 + 10.5 µs and sets both non-spinnable bits,
    then sleeps. r2 arriving at 20 µs: without the adaptive disabling it steals the
    reader-owned sem past the queued writer; with it, it queues behind w1."""
    def go(adaptive: bool) -> tuple[list[str], bool]:
        r = make_rig()
        pol = RwsemPolicy(spin_on_owner=True, writer_spin_on_readers=True, reader_spin=True,
                          reader_spin_adaptive=adaptive)
        sem = RwSem(r.ctx, "sem", policy=pol)
        log: Log = []
        _spawn(r, sem, log, 1, "r1", 0, False, 50_000, 0)
        _spawn(r, sem, log, 2, "w1", 1, True, 1000, 100)
        _spawn(r, sem, log, 3, "r2", 2, False, 1000, 20_000)
        r.engine.run()
        return _ins(log), sem.stat.extra["spin_timeouts"] == 1

    assert go(False) == (["r1", "r2", "w1"], True)
    assert go(True) == (["r1", "w1", "r2"], True)


def test_wake_all_readers_past_a_queued_writer(make_rig: Callable[[], Rig]) -> None:
    """d3681e269fff (v5.3, rwsem_mark_wake): a release that wakes readers wakes every
    queued reader, not only those queued before the first writer. No spinning (pre-v3.16
    policy otherwise), so everybody who finds the sem held sleeps, FIFO: r1, w2, r2."""
    def go(wake_all: bool) -> tuple[Log, int]:
        r = make_rig()
        sem = RwSem(r.ctx, "sem", policy=RwsemPolicy(spin_on_owner=False, wake_all=wake_all))
        log: Log = []
        _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
        _spawn(r, sem, log, 2, "r1", 1, False, 1000, 100)
        _spawn(r, sem, log, 3, "w2", 2, True, 1000, 200)
        _spawn(r, sem, log, 4, "r2", 3, False, 1000, 300)
        r.engine.run()
        return [(n, t) for n, w, t in log if w == "in"], _cs(r)

    # until-writer: w1's up_write at 10000 wakes r1 only (runs 7 µs later, 17000); r1's
    # up_read at 18000 wakes w2, granting nothing: it runs at 25000 and its trylock (1→2 200)
    # takes the sem at 25200; w2's up_write at 26200 wakes r2 (33200).
    assert go(False) == ([("w1", 0), ("r1", 17_000), ("w2", 25_200), ("r2", 33_200)], 3)
    # wake-all: w1's up_write wakes r1 and r2 (both in at 17000); the last up_read at 18000
    # (r2's, CPU 3) wakes w2: running at 25000, trylock 3→2 50 → in at 25050.
    assert go(True) == ([("w1", 0), ("r1", 17_000), ("r2", 17_000), ("w2", 25_050)], 3)


def test_a_woken_writer_races_for_the_sem(make_rig: Callable[[], Rig]) -> None:
    """rwsem_mark_wake (every version): a release wakes the first waiter, a writer, and grants
    nothing ("Until the task is actually later awoken later by the caller, other writers are able to
    steal it"). w1 (CPU 0) takes the sem twice in a row; w2 (CPU 4, its SMT sibling: 10 ns) arrives
    at 100 and sleeps (no spinning). w1's up_write at 10000 (4→0 10) wakes w2; w1 itself, back in
    down_write at 10010, finds the sem free and takes it (a steal). w2 runs at 17000, its trylock
    (0→4 10) finds w1 holding it: a wasted wake-up, asleep again, still first. w1's next up_write at
    20010 wakes it again: running at 27010, in at 27020."""
    r = make_rig()
    sem = RwSem(r.ctx, "sem", policy=RwsemPolicy())
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0, loops=2)
    _spawn(r, sem, log, 2, "w2", 4, True, 1000, 100)
    r.engine.run()
    assert [(n, t) for n, w, t in log if w == "in"] == [("w1", 0), ("w1", 10_010), ("w2", 27_020)]
    x = sem.stat.extra
    assert (x["steals"], x["wasted_wakeups"], x["sleeps"], _cs(r)) == (1, 1, 2, 2)
    assert r.counters.prof_ns[4]["rwsem_down_write_slowpath"] == 20  # two trylocks, 10 ns each
    # w2 waited from 100 until its second trylock took the sem
    assert sem.stat.wait_ns_max == 27_020 - 100


def test_handoff_ends_the_race_after_4ms(make_rig: Callable[[], Rig]) -> None:
    """4f23dbc1e657 (v5.3): as above with 3 ms holds and three rounds of w1. Without the hand-off
    w1 steals the sem at every release and w2 gets it last. With it, the release at 6,000,010 finds
    w2 first and waiting since 100 (over RWSEM_WAIT_TIMEOUT): RWSEM_FLAG_HANDOFF stops w1's steal,
    the sem is w2's from the release, and w1 sleeps behind it."""
    def go(handoff: bool) -> tuple[list[str], int]:
        r = make_rig()
        sem = RwSem(r.ctx, "sem", policy=RwsemPolicy(handoff=handoff))
        log: Log = []
        _spawn(r, sem, log, 1, "w1", 0, True, 3_000_000, 0, loops=3)
        _spawn(r, sem, log, 2, "w2", 4, True, 1000, 100)
        r.engine.run()
        return _ins(log), sem.stat.extra["handoffs"]

    assert go(False) == (["w1", "w1", "w1", "w2"], 0)
    assert go(True) == (["w1", "w1", "w2", "w1"], 1)
