"""The library's one progress hook: plain events at arm start and end, rendered by the CLI.

Every command that runs simulations (``run``, ``reproduce``, ``compare``,
``sweep``, ``bisect``, ``validate``) accepts ``progress``: a callable taking
one :class:`ProgressEvent`. Events are small frozen dataclasses of plain
values, so a worker process can send them back over a pipe or queue and the
parent hand them to the same hook. The library never prints; the CLI
(:mod:`mmsim.cli_progress`) draws a rich bar with ETA on a terminal and one
line per event otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProgressEvent:
    experiment: str  # what runs: "compare lockstress", "reproduce split-pmd-ptl"
    arm: str  # which run: "v3.13 seed 2", "A: v3.12"
    phase: str  # "start" or "end"
    done: int  # arms finished, this one included at "end"
    total: int  # arms in the experiment
    wall_seconds: float = 0.0  # host time of the arm, at "end"
    # the estimated host time of the arms finished so far and of all arms (any unit; 0 = unknown): the ETA
    # then follows the work left, not the count of arms left (reproduce's arms differ by 100x)
    work_done: float = 0.0
    work_total: float = 0.0


ProgressHook = Callable[[ProgressEvent], None]


def arm_label(result: dict[str, Any]) -> str:
    """``kernel seed N`` of a ``RunResult.to_dict()``."""
    return f"{result.get('kernel', '?')} seed {result.get('seed', '?')}"


def from_counts(hook: ProgressHook | None, experiment: str) -> Callable[[int, int, dict[str, Any]], None] | None:
    """Adapt :data:`mmsim.experiments.executors.Progress` (done, total, last result) to ``hook``."""
    if hook is None:
        return None

    def update(done: int, total: int, last: dict[str, Any]) -> None:
        if not last:  # the first call: what the store already held
            hook(ProgressEvent(experiment, f"{done} from the results store" if done else "", "start", done, total))
            return
        wall = float((last.get("sim") or {}).get("wall_seconds", 0.0))
        hook(ProgressEvent(experiment, arm_label(last), "end", done, total, wall))

    return update


class Steps:
    """Start and end events for ``total`` named steps of one experiment (``mmsim validate``'s cases)::

        steps = Steps(hook, "validate locks", 8)
        with steps("ticket hold=0"):
            ...

    A ``None`` hook makes it a no-op, so library code calls it unconditionally.
    """

    def __init__(self, hook: ProgressHook | None, experiment: str, total: int) -> None:
        self.hook, self.experiment, self.total, self.done = hook, experiment, total, 0

    def __call__(self, label: str) -> AbstractContextManager[None]:
        return self._step(label)

    @contextmanager
    def _step(self, label: str) -> Iterator[None]:
        if self.hook is not None:
            self.hook(ProgressEvent(self.experiment, label, "start", self.done, self.total))
        t0 = time.monotonic()
        yield
        self.done += 1
        if self.hook is not None:
            self.hook(ProgressEvent(self.experiment, label, "end", self.done, self.total, time.monotonic() - t0))
