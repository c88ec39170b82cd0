"""Discrete-event core: integer time (ns), a heap of ``(time, seq, task, value)``.

Modelled after SimPy's ``Environment`` (a heap of ``(time, priority, seq,
event)``) but leaner: a *task* is a generator that yields either

* an ``int`` — the number of nanoseconds it keeps its CPU busy before it is
  resumed (the caller has already charged those nanoseconds to a profile
  entry, see :meth:`Task.busy`), or
* :data:`PARK` — the task is parked in some wait queue (a lock, a sleeping
  rwsem); whoever owns that queue resumes it with :meth:`Engine.wake`.

Every heap entry carries a monotonically increasing ``seq`` so two entries at
the same time are always popped in the order they were pushed: runs are
deterministic, and the heap never has to compare tasks.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from typing import Any

from mmsim.engine.rng import RngStreams

# defined there: a class of a compiled module (mmsim.corebuild) cannot subclass RuntimeError
from mmsim.errors import SimulationError as SimulationError

#: Sentinel yielded by a task that has put itself into a wait queue.
PARK: Any = object()

TaskGen = Generator[Any, Any, None]


class Task:
    """A schedulable thread of control: one kernel/user task (thread or process).

    ``cpu`` is the CPU it currently runs on; ``mm`` the address space it
    shares with its siblings (threads share one, processes have their own).
    The engine only needs ``gen``; the rest is bookkeeping for the model.
    """

    __slots__ = ("tid", "name", "gen", "cpu", "mm", "started_at", "finished_at", "state", "data")

    def __init__(self, tid: int, name: str, cpu: int = 0, mm: Any = None) -> None:
        self.tid = tid
        self.name = name
        self.gen: TaskGen | None = None
        self.cpu = cpu
        self.mm = mm
        self.started_at = -1
        self.finished_at = -1
        self.state = "new"
        self.data: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Task({self.tid}, {self.name!r}, cpu={self.cpu}, {self.state})"


class Engine:
    """The event loop. Owns the clock, the heap and the run's RNG streams."""

    def __init__(self, seed: int = 0) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Any, Any]] = []
        self._seq = 0
        self.events = 0
        self.rng = RngStreams(seed)
        self._on_exit: list[Callable[[Task], None]] = []

    # -- scheduling -----------------------------------------------------
    def start(self, task: Task, gen: TaskGen, delay: int = 0) -> None:
        """Start ``gen`` as the body of ``task`` after ``delay`` ns."""
        task.gen = gen
        task.state = "runnable"
        self.wake(task, delay)

    def wake(self, task: Task, delay: int = 0, value: Any = None) -> None:
        """Resume a parked ``task`` ``delay`` ns from now, sending it ``value``."""
        if delay < 0:
            raise SimulationError(f"negative delay {delay} for {task!r}")
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay, self._seq, task, value))

    def call_at(self, when: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run plain callback ``fn(arg)`` at absolute time ``when`` (>= now)."""
        if when < self.now:
            raise SimulationError(f"call_at in the past: {when} < {self.now}")
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, arg))

    def on_exit(self, fn: Callable[[Task], None]) -> None:
        """Register ``fn(task)`` to be called when any task's generator ends."""
        self._on_exit.append(fn)

    # -- the loop -------------------------------------------------------
    def run(self, until: int | None = None) -> int:
        """Process events until the heap is empty (or time ``until``); returns now."""
        heap = self._heap
        pop = heapq.heappop
        push = heapq.heappush
        park = PARK
        events = 0
        seq = self._seq
        limit: float = until if until is not None else float("inf")
        try:
            while heap:
                if heap[0][0] > limit:
                    assert until is not None
                    self.now = until
                    break
                when, _, obj, value = pop(heap)
                self.now = when
                events += 1
                if obj.__class__ is not Task:
                    self._seq = seq
                    obj(value)  # a plain callback
                    seq = self._seq
                    continue
                gen = obj.gen
                while True:
                    try:
                        self._seq = seq
                        y = gen.send(value)  # type: ignore[union-attr]
                        seq = self._seq
                    except StopIteration:
                        seq = self._seq
                        obj.state = "done"
                        obj.finished_at = when
                        for fn in self._on_exit:
                            fn(obj)
                        seq = self._seq
                        break
                    if y.__class__ is int:
                        # Inlined from wake(): the hot path of every simulation.
                        if y < 0:
                            raise SimulationError(f"{obj!r} yielded a negative delay {y}")
                        seq += 1
                        when += y
                        # The entry (when, seq) would be the next one popped: it is earlier than every
                        # other entry (ties go to the smaller seq, and this seq is the largest), so
                        # resume the task now instead of pushing and popping it. Same order, same count.
                        if (not heap or when < heap[0][0]) and when <= limit:
                            self.now = when
                            events += 1
                            value = None
                            continue
                        push(heap, (when, seq, obj, None))
                    elif y is not park:
                        raise SimulationError(f"{obj!r} yielded {y!r}; expected int ns or PARK")
                    break
        finally:
            self._seq = seq
            self.events += events
        return self.now
