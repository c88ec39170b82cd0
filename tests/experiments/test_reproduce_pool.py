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


def test_eta_follows_the_work_left() -> None:
    from mmsim.cli_progress import _eta

    # 1 of 4 arms done but it was 3/4 of the work: 10 s so far -> ~3.3 s left, not 30 s
    assert _eta(10.0, 3.0, 4.0) == "; ETA 3.3 s"
    assert _eta(10.0, 1, 4) == "; ETA 30.0 s"
