"""Time sharing on ``tiny`` (8 CPUs, ctx_switch_ns = 2000, wakeup_ns = 5000):
v6.6 slices of 0.75 ms × (1 + ilog2(min(ncpus, 8))) = 3 ms, preemption at the
next preemption point once the slice is used, woken tasks wait for it."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from conftest import Rig
from mmsim.engine.core import Task
from mmsim.engine.cpu import sched_base_slice_ns
from mmsim.metrics.counters import CONTEXT_SWITCHES

Log = list[tuple[str, int]]
MS = 1_000_000


def test_base_slice_scales_with_log2_of_the_cpus_up_to_8() -> None:
    assert [sched_base_slice_ns(n) for n in (1, 2, 3, 4, 8, 64)] == [
        750_000, 1_500_000, 1_500_000, 2_250_000, 3_000_000, 3_000_000]


def _chunks(r: Rig, t: Task, log: Log, n: int, ns: int = MS) -> Generator[Any, Any, None]:
    """A CPU-bound task: ``n`` chunks of ``ns``, a return to user space after each."""
    for _ in range(n):
        log.append((t.name, r.engine.now))
        yield r.counters.busy(t.cpu, "work", ns)
        yield from r.sched.user_return(t)


def test_two_cpu_bound_tasks_share_a_cpu_in_slices(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    r.sched.enable_time_sharing()
    assert r.sched.slice_ns == 3 * MS
    log: Log = []
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=0)
    r.sched.spawn(a, _chunks(r, a, log, 5))
    r.sched.spawn(b, _chunks(r, b, log, 5))
    assert not r.sched.cpus[0].need_resched  # a's slice protects it
    r.engine.run()
    # a runs 0..3 ms; its slice ends → switch (2000 ns) → b 3.002..6.002 ms; b's slice
    # ends → a at 6.004 ms for its last two chunks, exits at 8.004 → b at 8.006.
    assert log == [("a", 0), ("a", MS), ("a", 2 * MS),
                   ("b", 3 * MS + 2000), ("b", 4 * MS + 2000), ("b", 5 * MS + 2000),
                   ("a", 6 * MS + 4000), ("a", 7 * MS + 4000),
                   ("b", 8 * MS + 6000), ("b", 9 * MS + 6000)]
    assert a.finished_at == 8 * MS + 4000 and b.finished_at == 10 * MS + 6000
    assert r.counters.perf[0][CONTEXT_SWITCHES] == 2  # two slice preemptions; exits are not counted


def test_without_time_sharing_a_waiting_task_runs_at_the_next_user_return(make_rig: Callable[[], Rig]) -> None:
    """Return to user space is a preemption point in every preemption model (v3.x entry_64.S
    ``sysret_careful`` / ``retint_careful``; docs/locks.md, session 22): without time sharing a waiting task
    asks at once, and the current one switches out when its chunk returns to user space."""
    r = make_rig()
    log: Log = []
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=0)
    r.sched.spawn(a, _chunks(r, a, log, 3))
    r.sched.spawn(b, _chunks(r, b, log, 1))
    assert r.sched.cpus[0].need_resched  # a waiting task asks at once
    r.engine.run()
    # a's first chunk returns to user at 1 ms → switch (2000 ns) → b's chunk; b returns to user at 2.002 ms
    # with a waiting → a at 2.004; a returns at 3.004 with b waiting → b runs to its exit → a at 3.008
    assert log == [("a", 0), ("b", MS + 2000), ("a", 2 * MS + 4000), ("a", 3 * MS + 8000)]
    assert r.counters.perf[0][CONTEXT_SWITCHES] == 3  # a, b, a switched out; exits are not counted


def test_a_woken_task_waits_for_the_current_slice(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    r.sched.enable_time_sharing()
    log: Log = []
    s, a = Task(1, "s", cpu=0), Task(2, "a", cpu=0)

    def sleeper() -> Generator[Any, Any, None]:
        v = yield r.sched.sleep(s)
        log.append((f"s woke {v}", r.engine.now))

    r.sched.spawn(s, sleeper())
    r.sched.spawn(a, _chunks(r, a, log, 5), delay=10)
    r.engine.call_at(MS // 2, lambda _: r.sched.wake_up(s, "x"))
    r.engine.run()
    # s sleeps at 0; a runs from 10; s woken at 0.5 ms waits for a's slice to end at
    # 3 ms + 10, then runs (2000 ns switch) and exits; a resumes 2000 ns later.
    assert log == [("a", 10), ("a", MS + 10), ("a", 2 * MS + 10), ("s woke x", 3 * MS + 2010),
                   ("a", 3 * MS + 4010), ("a", 4 * MS + 4010)]
    assert r.counters.perf[0][CONTEXT_SWITCHES] == 2  # s's sleep, a's preemption


def test_a_task_woken_after_the_slice_preempts_at_the_next_point(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    r.sched.enable_time_sharing()
    log: Log = []
    s, a = Task(1, "s", cpu=0), Task(2, "a", cpu=0)

    def sleeper() -> Generator[Any, Any, None]:
        yield r.sched.sleep(s)
        log.append(("s", r.engine.now))

    r.sched.spawn(s, sleeper())
    r.sched.spawn(a, _chunks(r, a, log, 2, 4 * MS), delay=10)
    r.engine.call_at(3 * MS + 500, lambda _: r.sched.wake_up(s))
    r.engine.run()
    # a's slice ended at 3 ms + 10: the wake-up sets need_resched at once and a
    # switches out at the end of its 4 ms chunk.
    assert log == [("a", 10), ("s", 4 * MS + 2010), ("a", 4 * MS + 4010)]
    assert r.counters.perf[0][CONTEXT_SWITCHES] == 2


def test_a_kworker_still_asks_for_the_cpu_at_once(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    r.sched.enable_time_sharing()
    log: Log = []
    a = Task(1, "a", cpu=0)
    r.sched.spawn(a, _chunks(r, a, log, 2))
    r.sched.run_kernel_work(0, "drain", 100)
    assert r.sched.cpus[0].need_resched
    r.engine.run()
    assert log == [("a", 0), ("a", MS + 2000 + 100 + 2000)]
    assert r.counters.prof_ns[0]["drain"] == 100
