"""The event loop: time order, seq tie-breaking, run(until=), PARK/wake, call_at, errors."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import PARK, Engine, SimulationError, Task


def _yields(*values: Any) -> Generator[Any, Any, None]:
    """A task body that yields ``values`` in turn."""
    yield from values


def _sleeper(
    log: list[tuple[str, int]], eng: Engine, name: str, delays: list[int]
) -> Generator[Any, Any, None]:
    for d in delays:
        log.append((name, eng.now))
        yield d
    log.append((name + ":end", eng.now))


def test_events_pop_in_time_order() -> None:
    eng = Engine()
    log: list[tuple[str, int]] = []
    # a: 0 -> 30 -> end at 30; b: 0 -> 10 -> 25 -> end at 25.
    eng.start(Task(1, "a"), _sleeper(log, eng, "a", [30]))
    eng.start(Task(2, "b"), _sleeper(log, eng, "b", [10, 15]))
    assert eng.run() == 30
    assert log == [("a", 0), ("b", 0), ("b", 10), ("b:end", 25), ("a:end", 30)]


def test_ties_break_by_insertion_order() -> None:
    eng = Engine()
    log: list[tuple[str, int]] = []
    # Started with delays 5, 0, 5: at t=5, "c" was pushed after "a" (higher seq)
    # even though "a" was started first with the same delay → a before c.
    for i, (name, delay) in enumerate([("a", 5), ("b", 0), ("c", 5)]):
        t = Task(i, name)
        eng.start(t, _sleeper(log, eng, name, []), delay)
    eng.run()
    assert log == [("b:end", 0), ("a:end", 5), ("c:end", 5)]


def _log_task(log: list[str]) -> Generator[Any, Any, None]:
    log.append("task")
    yield from ()


def test_ties_between_tasks_and_callbacks_follow_seq() -> None:
    eng = Engine()
    log: list[str] = []
    eng.call_at(7, lambda v: log.append(f"cb1:{v}"), "x")
    eng.start(Task(1, "t"), _log_task(log), 7)
    eng.call_at(7, lambda v: log.append(f"cb2:{v}"), "y")
    eng.run()
    assert log == ["cb1:x", "task", "cb2:y"]


def test_run_until_stops_before_later_events_and_resumes() -> None:
    eng = Engine()
    log: list[tuple[str, int]] = []
    eng.start(Task(1, "a"), _sleeper(log, eng, "a", [10, 10, 10]))  # events at 0, 10, 20, 30
    # Events at exactly `until` are processed; the clock is set to `until`.
    assert eng.run(until=20) == 20
    assert log == [("a", 0), ("a", 10), ("a", 20)]
    assert eng.events == 3
    assert eng.run(until=25) == 25  # nothing due in (20, 25]: only the clock moves
    assert eng.events == 3
    assert eng.run() == 30
    assert log[-1] == ("a:end", 30)
    assert eng.events == 4


def test_run_until_after_last_event_leaves_clock_at_last_event() -> None:
    eng = Engine()
    eng.call_at(40, lambda _: None)
    # The heap empties before `until`: now is the last event's time, not `until`.
    assert eng.run(until=100) == 40


def test_park_and_wake_with_value() -> None:
    eng = Engine()
    got: list[tuple[Any, int]] = []
    t = Task(1, "p")

    def body() -> Generator[Any, Any, None]:
        v = yield PARK
        got.append((v, eng.now))

    eng.start(t, body())
    eng.call_at(100, lambda _: eng.wake(t, 25, "hello"))  # resumes at 100 + 25
    eng.run()
    assert got == [("hello", 125)]
    assert t.state == "done" and t.finished_at == 125
    # Events: start (t=0), callback (t=100), wake (t=125).
    assert eng.events == 3


def test_parked_task_without_waker_never_finishes() -> None:
    eng = Engine()
    t = Task(1, "p")

    def body() -> Generator[Any, Any, None]:
        yield PARK

    eng.start(t, body())
    assert eng.run() == 0
    assert t.state == "runnable" and t.finished_at == -1


def test_on_exit_hooks_run_with_the_task() -> None:
    eng = Engine()
    done: list[tuple[str, int]] = []
    eng.on_exit(lambda task: done.append((task.name, eng.now)))
    eng.start(Task(1, "x"), _yields(3), 2)
    eng.run()
    assert done == [("x", 5)]


def test_negative_delay_is_an_error() -> None:
    eng = Engine()
    with pytest.raises(SimulationError, match="negative delay -1"):
        eng.wake(Task(1, "t"), -1)


def test_call_at_in_the_past_is_an_error() -> None:
    eng = Engine()
    eng.call_at(10, lambda _: None)
    eng.run()
    with pytest.raises(SimulationError, match="call_at in the past: 9 < 10"):
        eng.call_at(9, lambda _: None)
    eng.call_at(10, lambda _: None)  # == now is allowed


def test_yielding_something_else_is_an_error() -> None:
    eng = Engine()
    eng.start(Task(1, "t"), _yields(1.5))
    with pytest.raises(SimulationError, match=r"yielded 1\.5"):
        eng.run()


def test_yielding_a_negative_int_is_an_error() -> None:
    eng = Engine()
    seen: list[int] = []

    def body() -> Generator[Any, Any, None]:
        yield 10
        yield -5
        seen.append(eng.now)

    eng.start(Task(1, "t"), body())
    with pytest.raises(SimulationError):
        eng.run()
    assert seen == []


def test_event_count_accumulates_over_runs() -> None:
    eng = Engine()
    # 3 yields + the final resume that raises StopIteration = 4 events.
    eng.start(Task(1, "t"), _yields(1, 1, 1))
    eng.call_at(1, lambda _: None)  # one callback event
    eng.run()
    assert eng.events == 5
    eng.start(Task(2, "u"), _yields())
    eng.run()
    assert eng.events == 6


def test_seq_stays_monotonic_across_callbacks_and_tasks() -> None:
    eng = Engine()
    order: list[str] = []
    t = Task(1, "t")

    def body() -> Generator[Any, Any, None]:
        yield 0  # re-pushed with a fresh seq at t=0
        order.append("task")

    def cb(_: Any) -> None:
        order.append("cb")
        eng.call_at(0, lambda _: order.append("cb-from-cb"))

    eng.start(t, body())
    eng.call_at(0, cb)
    eng.run()
    # Heap at t=0: task(seq1), cb(seq2). task yields 0 → seq3; cb → pushes seq4.
    assert order == ["cb", "task", "cb-from-cb"]


def test_a_task_resumed_without_the_heap_keeps_heap_order() -> None:
    """A task whose next time is before every pending entry resumes at once (no push/pop); one whose next
    time ties a pending entry goes after it (the older seq), as a push would; events are counted the same."""
    eng = Engine()
    log: list[tuple[str, int]] = []
    eng.start(Task(1, "a"), _sleeper(log, eng, "a", [3, 4, 1]))  # 0, 3, 7 (ties b), 8
    eng.start(Task(2, "b"), _sleeper(log, eng, "b", []), 7)
    eng.call_at(5, lambda v: log.append(("cb", eng.now)))
    assert eng.run() == 8
    assert log == [("a", 0), ("a", 3), ("cb", 5), ("b:end", 7), ("a", 7), ("a:end", 8)]
    assert eng.events == 6  # a at 0, 3, 7, 8; the callback; b


def test_a_task_waking_another_at_its_own_time_lets_it_run_first() -> None:
    """``wake(other, 0)`` during a step puts ``other`` at now; the waker's ``yield 0`` then ties it and
    goes after it."""
    eng = Engine()
    log: list[str] = []
    b = Task(2, "b")

    def a_body() -> Generator[Any, Any, None]:
        log.append("a1")
        eng.wake(b)
        yield 0
        log.append("a2")

    def b_body() -> Generator[Any, Any, None]:
        yield PARK
        log.append("b")

    eng.start(b, b_body())
    eng.start(Task(1, "a"), a_body(), 1)
    eng.run()
    assert log == ["a1", "b", "a2"]
