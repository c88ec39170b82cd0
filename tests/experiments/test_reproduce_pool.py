"""reproduce's queue: arms longest first by their measured weight, an arm whose spec another arm already has
run once, and the progress events carry the work done so the ETA follows the long arms."""

from __future__ import annotations

import pytest

from mmsim.experiments import reproduce as rp
from mmsim.experiments.run import RunResult, RunSpec
from mmsim.progress import ProgressEvent


def _evaluate(res: dict[str, RunResult]) -> tuple[list[rp.Check], list[str]]:
    return [rp.Check(arm, None, float(r.metrics["lockstress.acquisitions_per_second"]), None)
            for arm, r in res.items()], []


@pytest.fixture
def three_arms(monkeypatch: pytest.MonkeyPatch) -> str:
    rp._load()
    arms = {"short": RunSpec("lockstress", kernel="v3.12", params={"tasks": "2"}),
            "long": RunSpec("lockstress", kernel="v4.14", params={"tasks": "2"}),
            "copy": RunSpec("lockstress", kernel="v3.12", params={"tasks": "2"})}
    monkeypatch.setitem(rp.EXPERIMENTS, "tiny-three", rp.Experiment("tiny-three", "t", "test", arms, _evaluate))
    monkeypatch.setitem(rp._ARM_WEIGHTS, "tiny-three", {"short": 1.0, "long": 3.0, "copy": 1.0})
    return "tiny-three"


def test_longest_first_copies_run_once_and_progress_counts_work(three_arms: str) -> None:
    seen: list[ProgressEvent] = []
    (o,) = rp.reproduce([three_arms], seed=1, progress=seen.append, workers=1)
    # "copy" has the spec of "short": one run for both, the same result object, and both arms reported
    assert o.arms["copy"] is o.arms["short"]
    assert [(e.phase, e.arm, e.done, e.work_done) for e in seen] == [
        ("start", "long", 0, 0.0), ("end", "long", 1, 3.0),
        ("start", "short", 1, 3.0), ("end", "short", 2, 4.0), ("end", "copy", 3, 4.0)]
    assert {e.total for e in seen} == {3} and {e.work_total for e in seen} == {4.0}


def test_copies_give_what_separate_runs_give(three_arms: str) -> None:
    """The shared run is the run the copy would have made (a run depends only on its spec and seed)."""
    from mmsim.experiments.run import run

    (o,) = rp.reproduce([three_arms], seed=1, workers=2)
    alone = run(RunSpec("lockstress", kernel="v3.12", params={"tasks": "2"}, seed=1), guard=False)
    assert o.arms["copy"].metrics == alone.metrics and o.arms["copy"].perf == alone.perf


def test_eta_follows_the_work_left_on_the_workers_seen() -> None:
    from mmsim.cli_progress import ProgressView

    view = ProgressView("reproduce", enabled=None)
    view.mode = "lines"
    lines: list[str] = []
    view._write = lines.append  # type: ignore[method-assign]

    def ev(arm: str, phase: str, done: int, wall: float, work: float) -> ProgressEvent:
        return ProgressEvent("reproduce x", arm, phase, done, 4, wall, work_done=work, work_total=10.0)

    view._on(ev("long", "start", 0, 0.0, 0.0))
    view._on(ev("mid", "start", 0, 0.0, 0.0))  # two workers
    # the long arm (6 of 10 units) took 30 s: 4 units left at 5 s a unit on 2 workers = 10 s, whatever
    # share of the arms (1 of 4) is done
    view._on(ev("long", "end", 1, 30.0, 6.0))
    view._on(ev("short", "start", 1, 0.0, 6.0))
    view._on(ev("mid", "end", 2, 15.0, 9.0))  # 9 units in 45 s: 1 left = 5 s / 2
    view._on(ev("copy", "end", 3, 15.0, 9.0))  # shared the mid run: adds no work or time
    view._on(ev("short", "end", 4, 5.0, 10.0))
    ends = [ln for ln in lines if " done in " in ln]
    assert [ln.split("; ")[-1].strip() if "ETA" in ln else "" for ln in ends] == [
        "ETA 10.0 s", "ETA 2.5 s", "ETA 2.5 s", ""]


def test_every_arm_has_a_measured_weight() -> None:
    """An arm missing from _ARM_WEIGHTS falls back to its experiment's longest arm, which would put a
    short new arm at the front of the queue and skew the ETA: every registered arm is listed, and no
    listed arm is gone."""
    rp._load()
    registered = {(e, a) for e, exp in rp.EXPERIMENTS.items() for a in exp.arms}
    listed = {(e, a) for e, arms in rp._ARM_WEIGHTS.items() for a in arms}
    assert registered == listed


def test_noise_reaches_every_arm_and_its_summary(three_arms: str) -> None:
    """``reproduce --noise``: each arm runs with the modelled variation drawn from the seed (its summary says
    which draw), a noiseless reproduce says nothing of it, and the same seed gives the same results."""
    from mmsim.experiments.run import NOISE_SOURCES

    (quiet,) = rp.reproduce([three_arms], seed=1, workers=1)
    (noisy,) = rp.reproduce([three_arms], seed=1, workers=1, noise=True)
    (again,) = rp.reproduce([three_arms], seed=1, workers=1, noise=True)
    assert all(r.noise == NOISE_SOURCES for r in noisy.arms.values())
    assert all(not r.noise for r in quiet.arms.values())
    arms = noisy.to_dict()["arms"]
    assert all(a["noise"] == NOISE_SOURCES and a["seed"] == 1 for a in arms.values())
    assert all("noise" not in a for a in quiet.to_dict()["arms"].values())
    assert noisy.to_dict()["simulated"] == again.to_dict()["simulated"]  # the same draw (wall time aside)
    assert all(noisy.arms[k].metrics == again.arms[k].metrics for k in noisy.arms)
    assert quiet.to_dict()["simulated"] != noisy.to_dict()["simulated"]  # the interrupts land in the runs
