"""Drawing :class:`mmsim.progress.ProgressEvent` on stderr: rich with ETA on a terminal, plain lines otherwise.

``--progress`` forces the rich bar, ``--no-progress`` silences both; by
default a terminal gets the bar and a pipe or log gets one line per arm::

    mmsim: compare lockstress: [3/6] v3.13 seed 2 done in 0.41 s; ETA 1.2 s
"""

from __future__ import annotations

import sys
import time
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from mmsim.progress import ProgressEvent, ProgressHook


def _eta(elapsed: float, done: float, total: float) -> str:
    if done <= 0 or done >= total:
        return ""
    s = elapsed / done * (total - done)
    return f"; ETA {s:.1f} s" if s < 120 else f"; ETA {s / 60:.1f} min"


class ProgressView(AbstractContextManager["ProgressView"]):
    """A context whose :attr:`hook` renders events; ``mode`` is ``rich``, ``lines`` or ``off``."""

    def __init__(self, label: str, enabled: bool | None = None, hold_first_batch: bool = False) -> None:
        """``hold_first_batch``: in line mode, keep the lines of the first batch of runs (up to the
        second ``start`` event) until the next batch starts or the command ends well, so that an
        error found from the first results (bisect's ``--metric``) is still the only line on stderr."""
        tty = sys.stderr.isatty()
        self.mode = "off" if enabled is False else ("rich" if (enabled or tty) else "lines")
        self.label = label
        self.t0 = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        self._from_store = 0
        self._held: list[str] | None = [] if hold_first_batch else None
        self._starts = 0
        # events with work estimates (reproduce): work and host seconds of the finished runs, and how many
        # ran at once (a pool's workers), for _work_eta
        self._work_seen = 0.0
        self._work_wall = 0.0
        self._inflight = 0
        self._parallel = 1

    @property
    def hook(self) -> ProgressHook | None:
        return None if self.mode == "off" else self._on

    def __enter__(self) -> ProgressView:
        if self.mode == "rich":
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"),
                                 TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                                 console=Console(stderr=True), transient=False)
            self._task = self._bar.add_task(self.label, total=None, count="", eta="?")
            self._bar.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(et, e, tb)
        if et is None:
            self._flush()

    def _flush(self) -> None:
        if self._held:
            sys.stderr.write("".join(self._held))
            sys.stderr.flush()
        self._held = None

    def _write(self, line: str) -> None:
        if self._held is not None:
            self._held.append(line)
            return
        sys.stderr.write(line)
        sys.stderr.flush()

    def _track_work(self, ev: ProgressEvent) -> None:
        if ev.phase == "start":
            self._inflight += 1
            self._parallel = max(self._parallel, self._inflight)
        elif ev.work_done > self._work_seen:  # a run's end (an arm that shared another's run adds no work)
            self._work_seen = ev.work_done
            self._work_wall += ev.wall_seconds
            self._inflight -= 1

    def _work_eta(self, ev: ProgressEvent) -> str:
        """The work left at the rate one worker did the finished runs' work, times the runs seen at once:
        not the share of arms done, since one arm can be 50x another."""
        left = ev.work_total - ev.work_done
        if ev.done >= ev.total or left <= 0 or self._work_wall <= 0 or self._work_seen <= 0:
            return ""
        s = left * self._work_wall / self._work_seen / self._parallel
        return f"; ETA {s:.1f} s" if s < 120 else f"; ETA {s / 60:.1f} min"

    def _on(self, ev: ProgressEvent) -> None:
        if ev.phase == "start":
            self._starts += 1
            if self._starts == 2:
                self._flush()
            if ev.arm.endswith("from the results store"):
                self._from_store = ev.done  # not run again: the ETA counts only the runs made here
        if ev.work_total > 0:
            self._track_work(ev)
        elapsed = time.monotonic() - self.t0
        ran = ev.done - self._from_store
        todo = ev.total - self._from_store
        eta = "" if ev.phase == "start" else (
            self._work_eta(ev) if ev.work_total > 0 else _eta(elapsed, ran, todo))
        if self.mode == "rich":
            desc = f"{ev.experiment}: {ev.arm}" if ev.arm else ev.experiment
            # the bar follows the estimated work when the event has it (reproduce), else the count; the
            # ETA is the one the line mode prints, as of the last run finished (rich's own needs a steady
            # stream of updates, and these come once per run)
            work = ev.work_total > 0
            fields: dict[str, str] = {"count": f"{ev.done}/{ev.total}"}
            if ev.phase == "end":
                fields["eta"] = eta.removeprefix("; ETA ") or ("0 s" if ev.done >= ev.total else "?")
            self._bar.update(self._task, completed=ev.work_done if work else ev.done,
                             total=ev.work_total if work else ev.total, description=desc, **fields)
            return
        if ev.phase == "start" and not ev.arm:
            return
        if ev.phase == "start":
            line = f"[{ev.done}/{ev.total}] {ev.arm} ..."
        else:
            line = f"[{ev.done}/{ev.total}] {ev.arm} done in {ev.wall_seconds:.2f} s" + eta
        self._write(f"mmsim: {ev.experiment}: {line}\n")
