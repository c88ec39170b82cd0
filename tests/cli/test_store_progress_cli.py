"""Every run lands in the results store (run, reproduce) unless --no-store; progress lines on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsim.cli import main
from mmsim.progress import ProgressEvent

Cap = pytest.CaptureFixture[str]


def cli(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_results_list_shows_a_run_made_with_mmsim_run(capsys: Cap, store_path: Path) -> None:
    assert cli(capsys, "run", "lockstress", "--machine", "tiny", "--seed", "4", "-p", "tasks=2")[0] == 0
    rows = json.loads(cli(capsys, "results", "list", "--json")[1])
    assert [(r["workload"], r["machine"], r["kernel"], r["seed"]) for r in rows] == [("lockstress", "tiny", "v3.13", 4)]
    # the same run again replaces it; -r 2 adds seed 5
    assert cli(capsys, "run", "lockstress", "--machine", "tiny", "--seed", "4", "-p", "tasks=2", "-r", "2",
               "--no-noise")[0] == 0
    rows = json.loads(cli(capsys, "results", "list", "--json")[1])
    assert sorted(r["seed"] for r in rows) == [4, 5]
    # -r N turns noise on: two more runs, under their own keys
    assert cli(capsys, "run", "lockstress", "--machine", "tiny", "--seed", "4", "-p", "tasks=2", "-r", "2")[0] == 0
    assert len(json.loads(cli(capsys, "results", "list", "--json")[1])) == 4


def test_repeat_shows_perfs_spread(capsys: Cap) -> None:
    out = cli(capsys, "run", "lockstress", "--machine", "tiny", "-r", "3", "--no-store", "--no-progress")[1]
    assert "(3 runs):" in out and "( +- " in out.split("seconds time elapsed")[0]


def test_no_store_stores_nothing(capsys: Cap, store_path: Path) -> None:
    assert cli(capsys, "run", "lockstress", "--machine", "tiny", "--no-store")[0] == 0
    assert not store_path.exists()


def test_bad_input_stores_nothing_and_prints_no_progress(capsys: Cap, store_path: Path) -> None:
    code, _, err = cli(capsys, "run", "lockstress", "--machine", "tiny", "--set", "pcp_batch=0")
    assert code == 2 and err.count("\n") == 1 and not store_path.exists()


def test_plain_progress_lines_when_not_a_terminal(capsys: Cap) -> None:
    code, _, err = cli(capsys, "run", "lockstress", "--machine", "tiny", "-r", "2", "--no-store")
    lines = err.splitlines()
    assert code == 0 and len(lines) == 4
    assert lines[0] == "mmsim: run lockstress: [0/2] v3.13 seed 0 ..."
    assert lines[1].startswith("mmsim: run lockstress: [1/2] v3.13 seed 0 done in ") and "; ETA " in lines[1]
    assert lines[3].startswith("mmsim: run lockstress: [2/2] v3.13 seed 1 done in ") and "ETA" not in lines[3]
    assert cli(capsys, "run", "lockstress", "--machine", "tiny", "--no-store", "--no-progress")[2] == ""


def test_library_hook_hears_arm_start_and_end() -> None:
    from mmsim.experiments.run import RunSpec, run_repeated

    seen: list[ProgressEvent] = []
    run_repeated(RunSpec("lockstress", params={"tasks": "2"}), 2, None, seen.append)
    assert [(e.phase, e.done, e.total, e.arm) for e in seen] == [
        ("start", 0, 2, "v3.13 seed 0"), ("end", 1, 2, "v3.13 seed 0"),
        ("start", 1, 2, "v3.13 seed 1"), ("end", 2, 2, "v3.13 seed 1")]
    assert all(e.experiment == "run lockstress" for e in seen)


def test_reproduce_stores_each_arm_and_reports_progress(capsys: Cap, store_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsim.experiments import reproduce as rp
    from mmsim.experiments.run import RunResult, RunSpec

    def evaluate(res: dict[str, RunResult]) -> tuple[list[rp.Check], list[str]]:
        return [rp.Check("acq", None, float(res["b"].metrics["lockstress.acquisitions_per_second"]), None)], []

    rp._load()
    arms = {"a": RunSpec("lockstress", kernel="v3.12", params={"tasks": "2"}),
            "b": RunSpec("lockstress", kernel="v4.14", params={"tasks": "2"})}
    monkeypatch.setitem(rp.EXPERIMENTS, "tiny-two-arms", rp.Experiment("tiny-two-arms", "t", "test", arms, evaluate))
    code, _, err = cli(capsys, "reproduce", "tiny-two-arms", "--seed", "2")
    assert code == 0
    assert err.splitlines()[0] == "mmsim: reproduce tiny-two-arms: [0/2] a ..."
    rows = json.loads(cli(capsys, "results", "list", "--json")[1])
    assert sorted((r["kernel"], r["seed"]) for r in rows) == [("v3.12", 2), ("v4.14", 2)]
