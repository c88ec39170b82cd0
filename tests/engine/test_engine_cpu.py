"""The scheduler on ``tiny`` (ctx_switch_ns = 2000, wakeup_ns = 5000).

Context switches are counted for the task switched *out* (perf's
``context-switches``), ``__schedule`` (2000 ns) is charged to the task
switched in, and waking a task on an idle CPU costs wakeup_ns + ctx_switch_ns.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from conftest import Rig
from mmsim.engine.core import Task
from mmsim.metrics.counters import CONTEXT_SWITCHES, TASK_CLOCK

Log = list[tuple[str, int]]


def test_second_task_runs_after_the_first_sleeps(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    eng, sched, c = r.engine, r.sched, r.counters
    log: Log = []
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=0)

    def body_a() -> Generator[Any, Any, None]:
        log.append(("a", eng.now))
        yield c.busy(0, "work_a", 100)
        v = yield sched.sleep(a)
        log.append((f"a woke {v}", eng.now))

    def body_b() -> Generator[Any, Any, None]:
        log.append(("b", eng.now))
        yield c.busy(0, "work_b", 50)

    sched.spawn(a, body_a())
    sched.spawn(b, body_b())  # CPU 0 busy: b waits on the run queue
    assert list(sched.cpus[0].runqueue) == [b] and sched.cpus[0].need_resched
    eng.call_at(3000, lambda _: sched.wake_up(a, "hello"))
    eng.run()
    # a: 0..100 busy, sleeps at 100 → switch to b: b runs at 100 + 2000 = 2100,
    # busy 50 → exits at 2150 → CPU 0 idle from 2150. wake_up(a) at 3000 on the
    # idle CPU: resumes at 3000 + 5000 + 2000 = 10000 with the value "hello".
    assert log == [("a", 0), ("b", 2100), ("a woke hello", 10000)]
    assert b.finished_at == 2150 and a.finished_at == 10000
    # One context switch: a switched out at 100 (b's exit is not counted).
    assert c.perf[0][CONTEXT_SWITCHES] == 1
    assert c.prof_ns[0] == {"work_a": 100, "__schedule": 4000, "work_b": 50}
    assert c.perf[0][TASK_CLOCK] == 4150
    # Idle time: 2150..3000 (the wake-up latency is charged as if busy).
    assert sched.cpus[0].idle_ns == 850


def test_wake_up_on_a_busy_cpu_queues_with_its_value(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    eng, sched, c = r.engine, r.sched, r.counters
    log: Log = []
    s, busy = Task(1, "s", cpu=3), Task(2, "busy", cpu=3)

    def sleeper() -> Generator[Any, Any, None]:
        v = yield sched.sleep(s)
        log.append((f"s got {v}", eng.now))

    def worker() -> Generator[Any, Any, None]:
        yield c.busy(3, "w", 1000)
        sched.wake_up(s, 42)  # CPU 3 is busy (this task): s goes on the run queue
        yield c.busy(3, "w", 500)

    sched.spawn(s, sleeper())
    sched.spawn(busy, worker(), delay=10)
    eng.run()
    # s sleeps at 0 (CPU idle from 0). worker enqueued at 10 on the idle CPU, runs
    # 10..1010, wakes s (queued), runs to 1510 and exits → switch to s: 1510 + 2000.
    assert log == [("s got 42", 3510)]
    assert c.perf[3][CONTEXT_SWITCHES] == 1  # s's sleep
    assert sched.cpus[3].idle_ns == 10


def test_cond_resched_switches_when_the_run_queue_is_not_empty(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    eng, sched, c = r.engine, r.sched, r.counters
    log: Log = []
    a, b = Task(1, "a", cpu=1), Task(2, "b", cpu=1)

    def body_a() -> Generator[Any, Any, None]:
        yield c.busy(1, "a", 100)
        assert sched.cpus[1].need_resched
        yield from sched.cond_resched(a)
        log.append(("a back", eng.now))
        yield from sched.cond_resched(a)  # empty run queue: no switch, no time
        log.append(("a again", eng.now))

    def body_b() -> Generator[Any, Any, None]:
        log.append(("b", eng.now))
        yield c.busy(1, "b", 300)

    sched.spawn(a, body_a())
    sched.spawn(b, body_b())
    eng.run()
    # a yields at 100 → switch to b at 100 + 2000 = 2100; b runs 300 → exits at
    # 2400 → switch back to a: 2400 + 2000 = 4400.
    assert log == [("b", 2100), ("a back", 4400), ("a again", 4400)]
    assert c.perf[1][CONTEXT_SWITCHES] == 1
    assert c.prof_ns[1]["__schedule"] == 4000
    assert not sched.cpus[1].need_resched


def test_run_kernel_work_preempts_at_cond_resched(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    eng, sched, c = r.engine, r.sched, r.counters
    log: Log = []
    a = Task(1, "a", cpu=1)

    def body_a() -> Generator[Any, Any, None]:
        for _ in range(3):
            yield c.busy(1, "a", 1000)
            log.append(("a", eng.now))
            if sched.cpus[1].need_resched:
                yield from sched.cond_resched(a)

    sched.spawn(a, body_a())
    eng.call_at(500, lambda _: sched.run_kernel_work(1, "vmstat_update", 4000))
    eng.run()
    # kworker queued at 500. a reaches cond_resched at 1000 → kworker runs at
    # 1000 + 2000 = 3000 for 4000 → exits at 7000 → a back at 7000 + 2000 = 9000,
    # then 9000..10000 and 10000..11000 without preemption.
    assert log == [("a", 1000), ("a", 10000), ("a", 11000)]
    assert a.finished_at == 11000
    assert c.prof_ns[1] == {"a": 3000, "__schedule": 4000, "vmstat_update": 4000}
    assert c.perf[1][CONTEXT_SWITCHES] == 1


def test_run_kernel_work_on_an_idle_cpu_runs_at_once(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    r.sched.run_kernel_work(6, "vmstat_update", 700)
    assert r.engine.run() == 700
    assert r.counters.prof_ns[6] == {"vmstat_update": 700}
    assert r.sched.cpus[6].current is None and r.sched.cpus[6].idle_since == 700
    assert r.counters.perf[6][CONTEXT_SWITCHES] == 0


def test_spawn_with_delay_and_periodic(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    eng, sched = r.engine, r.sched
    ticks: list[int] = []
    t = Task(1, "t", cpu=2)
    sched.spawn(t, iter_busy(r, 2, 2500), delay=1000)
    sched.periodic(1000, ticks.append, lambda: t.state == "done")
    eng.run()
    # t enqueued at 1000, busy 2500 → done at 3500. Ticks at 1000, 2000, 3000;
    # the tick at 4000 sees t done and stops.
    assert t.started_at == 1000 and t.finished_at == 3500
    assert ticks == [1000, 2000, 3000]
    assert eng.now == 4000


def iter_busy(r: Rig, cpu: int, ns: int) -> Generator[Any, Any, None]:
    yield r.counters.busy(cpu, "busy", ns)


def test_a_wake_onto_an_idle_cpu_charges_the_waker_its_ipi(make_rig: Callable[[], Rig]) -> None:
    # CostModel.wake_ipi_ns (the reschedule IPI smp_send_reschedule sends an idle CPU): 700 ns here
    r = make_rig()
    eng, sched, c = r.engine, r.sched, r.counters
    sched.wake_ipi_ns = 700
    log: Log = []
    s, q, w = Task(1, "s", cpu=0), Task(2, "q", cpu=2), Task(3, "w", cpu=1)

    def sleeper(t: Task) -> Generator[Any, Any, None]:
        yield sched.sleep(t)
        log.append((t.name, eng.now))

    def waker() -> Generator[Any, Any, None]:
        yield c.busy(1, "w", 100)
        ipi = sched.wake_up(s, waker_cpu=1)  # CPU 0 idle: the IPI is the waker's
        log.append(("ipi s", ipi))
        yield ipi
        ipi = sched.wake_up(q)  # no waker named (a workload's join): nobody is charged
        log.append(("ipi q", ipi))

    sched.spawn(s, sleeper(s))
    sched.spawn(q, sleeper(q))
    sched.spawn(w, waker())
    eng.run()
    # s woken at 100: runs at 100 + 5000 + 2000; the waker paid 700 ns on CPU 1, then woke q at 800
    assert log == [("ipi s", 700), ("ipi q", 0), ("s", 7100), ("q", 7800)]
    assert c.prof_ns[1] == {"w": 100, "smp_send_reschedule": 700}


def test_no_ipi_for_a_busy_cpu_or_the_wakers_own(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    eng, sched, c = r.engine, r.sched, r.counters
    sched.wake_ipi_ns = 700
    got: list[int] = []
    a, b, busy = Task(1, "a", cpu=3), Task(2, "b", cpu=4), Task(3, "busy", cpu=4)

    def sleeper(t: Task) -> Generator[Any, Any, None]:
        yield sched.sleep(t)

    def waker() -> Generator[Any, Any, None]:
        yield c.busy(4, "w", 100)
        got.append(sched.wake_up(b, waker_cpu=4))  # the waker's own CPU, busy (it runs): queued, no IPI
        got.append(sched.wake_up(a, waker_cpu=3))  # a waker that names the target's own CPU: no IPI
        yield c.busy(4, "w", 10)

    sched.spawn(a, sleeper(a))
    sched.spawn(b, sleeper(b))
    sched.spawn(busy, waker(), delay=5)
    eng.run()
    assert got == [0, 0]
    assert "smp_send_reschedule" not in c.prof_ns[3] and "smp_send_reschedule" not in c.prof_ns[4]
