"""lockstress on ``tiny``: exact timings without and with contention."""

from __future__ import annotations

import pytest

from mmsim.errors import UserError
from mmsim.experiments.run import RunSpec, run
from mmsim.machine.model import Machine

pytestmark = pytest.mark.usefixtures("use_tiny_preset")


@pytest.mark.parametrize(
    ("lock", "hold_total"),
    [("spinlock", 2000), ("mutex", 2000), ("rwsem-read", 2000), ("rwsem-write", 2000), ("atomic", 0)],
)
def test_one_task_is_uncontended(lock: str, hold_total: int) -> None:
    params = {"tasks": "1", "iterations": "10", "think_ns": "1000", "hold_ns": "200", "lock": lock}
    r = run(RunSpec("lockstress", "tiny", "v3.12", params=params))
    # Task 0 on CPU 0, lock line homed on CPU 0: every acquire/release costs 0 ns.
    # elapsed = iterations × (think + acquire + hold) = 10 × (1000 + 0 + 200) = 12000 ns;
    # atomic has no critical section: 10 × (1000 + 0) = 10000 ns.
    elapsed_ns = 10 * (1000 + (0 if lock == "atomic" else 200))
    assert r.metrics["lockstress.elapsed_seconds"] == pytest.approx(elapsed_ns / 1e9, rel=1e-12)
    assert r.metrics["lockstress.acquisitions_per_second"] == pytest.approx(10 / (elapsed_ns / 1e9))
    assert r.metrics["lockstress.mean_wait_ns"] == 0.0
    st = r.locks["lockstress"]
    assert (st["acquisitions"], st["contentions"], st["wait_ns_total"]) == (10, 0, 0)
    assert st["hold_ns_total"] == hold_total
    assert r.perf["context-switches"] == 0
    assert r.perf["task-clock"] == pytest.approx(elapsed_ns / 1e6)  # ms, all busy


def test_two_tasks_ticket_spinlock() -> None:
    r = run(RunSpec("lockstress", "tiny", "v3.12",
                    params={"tasks": "2", "iterations": "2", "think_ns": "1000", "hold_ns": "200"}))
    # CPUs 0 and 1 (same socket, 50 ns), line home CPU 0.
    # t=1000: T0 takes it (0 ns); T1's xadd 0→1 50 (line free 1050), spins.
    # T0 releases at 1200: its unlock store takes the line back from CPU 1 (50), CPU 1
    # re-reads it at the end of the PAUSE it is in (tiny: 10 cycles at 1 GHz, 5 ns on average;
    # session 35) (50): hand-off 105 → T1 holds 1305..1505 (wait 305).
    # T0 thinks to 2200, xadd: the line is Shared with CPU 1 → 50 → holds 2250..2450.
    # T1 thinks 1505..2505: T0 released at 2450, so no contention: xadd 0→1 50 →
    # holds 2555..2755. Elapsed 2755 ns.
    st = r.locks["lockstress"]
    assert st["kind"] == "spinlock(ticket)"
    assert (st["acquisitions"], st["contentions"]) == (4, 1)
    assert (st["wait_ns_total"], st["wait_ns_max"]) == (305, 305)
    assert (st["hold_ns_total"], st["hold_ns_max"]) == (800, 200)
    assert r.metrics["lockstress.elapsed_seconds"] == pytest.approx(2755e-9, rel=1e-12)
    assert r.metrics["lockstress.mean_wait_ns"] == 305 / 4
    assert r.metrics["lockstress.acquisitions_per_second"] == pytest.approx(4 / 2755e-9)


def test_too_many_tasks_is_a_user_error(tiny: Machine) -> None:
    with pytest.raises(UserError) as e:
        run(RunSpec("lockstress", "tiny", "v3.12", params={"tasks": "9"}))
    assert e.value.field == "-p tasks"


def test_bad_param_is_a_user_error() -> None:
    with pytest.raises(UserError) as e:
        run(RunSpec("lockstress", "tiny", "v3.12", params={"lock": "rcu"}))
    assert e.value.field == "-p lock"
    assert e.value.allowed == "spinlock, mutex, rwsem-read, rwsem-write, atomic"


def test_set_rwsem_reader_spin_changes_the_lock() -> None:
    """``mmsim run lockstress --machine tiny --set rwsem_reader_spin=on``: 1 writer
    (CPU 0) and 2 readers (CPUs 1, 2) on v4.13's rwsem (writer spinning, no reader
    spinning, no spinning on reader-owned sems). Off: every one of the 40 reader and 19
    of the 20 writer acquisitions contend, and a contended reader sleeps (a context
    switch and the 7 µs wake-up each time): 40 + 19 writer sleeps. On (cf69482d62d9):
    readers spin on the running writer and never sleep, and they take the sem while a
    writer woken by their release is still waking up (rwsem_try_read_lock_unqueued on a
    free sem: 26 steals); the writer contends 7 times and sleeps 7 times."""
    params = {"tasks": "3", "iterations": "20", "think_ns": "1000", "hold_ns": "2000", "lock": "rwsem-read",
              "writers": "1"}
    off = run(RunSpec("lockstress", "tiny", "v4.13", params=params))
    on = run(RunSpec("lockstress", "tiny", "v4.13", policies={"rwsem_reader_spin": "on"}, params=params))
    so, sn = off.locks["lockstress"], on.locks["lockstress"]
    assert (so["sleeps"], sn["sleeps"]) == (59, 7)
    assert (so["steals"], sn["steals"]) == (0, 26)
    assert (off.perf["context-switches"], on.perf["context-switches"]) == (59, 7)
    assert so["lock_stat"]["R"]["contentions"] == sn["lock_stat"]["R"]["contentions"] == 40
    assert (so["lock_stat"]["W"]["contentions"], sn["lock_stat"]["W"]["contentions"]) == (19, 7)
    # the rwsem's wait_lock sections (docs/locks.md, session 27) lengthen each sleep and wake-up: without them
    # the times are session 26's
    assert (off.metrics["lockstress.elapsed_seconds"], on.metrics["lockstress.elapsed_seconds"]) == (
        372_502e-9, 120_826e-9)
    nowl = {"rwsem_wait_lock": "off"}
    off0 = run(RunSpec("lockstress", "tiny", "v4.13", policies=nowl, params=params))
    on0 = run(RunSpec("lockstress", "tiny", "v4.13", policies={**nowl, "rwsem_reader_spin": "on"}, params=params))
    assert (off0.metrics["lockstress.elapsed_seconds"], on0.metrics["lockstress.elapsed_seconds"]) == (
        358_050e-9, 118_800e-9)


def test_set_spinlock_kind_per_lock_class() -> None:
    """The spinlock kind per lock class (issue 16): on v3.12 (ticket), ``--set
    spinlock_lockstress=queued`` makes the lockstress lock a qspinlock and nothing
    else, exactly as v4.13's queued default does; ``spinlock_page_table_lock=queued``
    does not touch it. 4 tasks on CPUs 0, 1 (socket 0), 2, 3 (socket 1), no think
    time: 19 of the 20 acquisitions contend. The queued lock's hand-offs carry at most
    two re-readers (pending waiter, MCS head) plus the node writes (34 of them), the
    queued arrivals' xchg_tail RMWs and the new holder's lock-word store (19, one per
    contended grant, which it does not wait for), so the waits are
    shorter than under the ticket lock's storms of three (which tiny's inclusive L3
    serves per socket since session 23: 80,103 ns in all; 79,958 before session 35's PAUSE, P / (n + 1) =
    2.5 ns per storm of three at tiny's 10 ns: the elapsed time +42 ns over the 19 hand-offs; 82,447 before
    session 23)."""
    params = {"tasks": "4", "iterations": "5", "think_ns": "0", "hold_ns": "1000"}

    def go(kernel: str, policies: dict[str, str]) -> tuple[str, int, int, object, float]:
        st = (r := run(RunSpec("lockstress", "tiny", kernel, policies=policies, params=params))).locks["lockstress"]
        return (st["kind"], st["contentions"], st["wait_ns_total"], st.get("mcs_node_transfers"),
                r.metrics["lockstress.elapsed_seconds"])

    ticket = ("spinlock(ticket)", 19, 80_103, None, 26_858e-9)
    # 77,132 ns and 26.008 us until session 29 (the new holder waited for its lock-word store; now it does not,
    # each queued arrival makes its xchg_tail, and a new queue head reads the word: docs/locks.md); 75,500 ns and
    # 25.675 us until session 35 (each hand-off's head re-read and MCS node store seen after the waiter's
    # PAUSE, P / 2 = 5 ns: +107 ns elapsed over 19 hand-offs, each wait spanning ~4 of them)
    queued = ("spinlock(queued)", 19, 75_898, 34, 25_782e-9)
    assert go("v3.12", {}) == ticket
    assert go("v3.12", {"spinlock_page_table_lock": "queued"}) == ticket
    assert go("v3.12", {"spinlock_lockstress": "queued"}) == queued
    assert go("v3.12", {"spinlock": "queued"}) == queued
    assert go("v4.13", {}) == queued


def test_lock_stat_table_splits_rwsem_sides() -> None:
    """The /proc/lock_stat rendering: an rwsem gets a -W and a -R line with the real
    columns; 1 writer + 2 readers on v3.12 (no spinning: every contention sleeps)."""
    from mmsim.report.text import LOCK_STAT_COLUMNS, lock_stat_table

    params = {"tasks": "3", "iterations": "20", "think_ns": "1000", "hold_ns": "2000", "lock": "rwsem-read",
              "writers": "1"}
    r = run(RunSpec("lockstress", "tiny", "v3.12", params=params))
    t = lock_stat_table(r.locks)
    assert t.headers == ["class", *LOCK_STAT_COLUMNS]
    # and the rwsem's wait_lock (docs/locks.md, session 27): 59 sleepers queueing, and the releases that woke
    # them (39), each a section
    assert [row[0] for row in t.rows] == ["lockstress-W", "lockstress-R", "&sem->wait_lock"]
    assert r.locks["&sem->wait_lock"]["acquisitions"] == 59 + 39 and r.locks["lockstress"]["sleeps"] == 59
    ls = r.locks["lockstress"]["lock_stat"]
    assert ls["W"]["acquisitions"] == 20 and ls["R"]["acquisitions"] == 40
    assert ls["W"]["acquisitions"] + ls["R"]["acquisitions"] == r.locks["lockstress"]["acquisitions"]
    assert ls["W"]["contentions"] + ls["R"]["contentions"] == r.locks["lockstress"]["contentions"]
