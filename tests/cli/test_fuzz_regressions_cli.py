"""Bad input found by a CLI fuzzing round (session 32) after the earlier rounds' fixes: each case is one stderr
line ``mmsim: error: FIELD: ...``, exit 2, before anything runs, nothing stored.

What each case did before: ``run -r 99999999999`` hung building the specs (sweep and compare checked their
grids, run did not); ``--seed 2^63`` ran and then failed as a "damaged" store (exit 1, the run lost); a store
path with a name too long was a traceback, one under a regular file or too long for its lock file failed only
after the run; ``report``/``plot``/``results export`` to a directory, a missing directory or a name too long
were tracebacks after the work; ``results import /dev/zero`` hung and a binary file was a traceback;
``--workers 10^40`` went to the process pool or a Dask cluster as it was; an unknown ``-p`` name or a click
usage error echoed a 5000-character value whole.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mmsim.cli_workflow as cli_workflow
import mmsim.experiments.reproduce as reproduce_mod
import mmsim.experiments.run as run_mod
from conftest import cli_error_line
from mmsim.cli import main

Cap = pytest.CaptureFixture[str]
RUN = ("run", "lockstress", "--machine", "tiny", "-p", "tasks=2", "-p", "iterations=50")
SERIAL = ("--executor", "serial", "-p", "tasks=2", "-p", "iterations=50", "-r", "1")
MAX_SEED = 2**63 - 1
LONG_NAME = "x" * 300  # over NAME_MAX (255)


error_line = cli_error_line


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail at once (instead of simulating for minutes) if a refused command reaches its runs."""
    def ran(*a: object, **k: object) -> None:
        raise AssertionError("the command started running")

    monkeypatch.setattr(run_mod, "run_repeated", ran)
    monkeypatch.setattr(reproduce_mod, "reproduce", ran)


@pytest.mark.parametrize("n", ["99999999999", str(2**63), str(10**40)])
def test_run_repeat_beyond_memory_is_refused_before_specs_are_built(capsys: Cap, no_runs: None, n: str) -> None:
    err = error_line(capsys, *RUN, "-r", n, "--no-store")
    assert "estimated memory" in err and "runs of run lockstress" in err and "--force" in err


def test_run_repeat_seeds_past_2_63_with_force(capsys: Cap, no_runs: None) -> None:
    assert f"-r/--repeat: invalid value {10**40}; allowed: at most 2^63" in error_line(
        capsys, *RUN, "-r", str(10**40), "--force", "--no-store")


@pytest.mark.parametrize("argv", [
    (*RUN, "--seed", str(2**63)),
    (*RUN, "--seed", str(10**40)),
    ("compare", "lockstress", "-k", "v3.12", "-k", "v3.13", *SERIAL, "--seed", str(2**63)),
    ("sweep", "lockstress", *SERIAL, "--seed", str(2**63)),
    ("bisect", "lockstress", "--good", "v3.12", "--bad", "v3.13", *SERIAL, "--seed", str(2**63)),
    ("reproduce", "split-pmd-ptl", "--seed", str(2**63)),
])
def test_seed_beyond_the_stores_64_bits(capsys: Cap, store_path: Path, no_runs: None, argv: tuple[str, ...]) -> None:
    assert f"--seed: invalid value {argv[-1]}; allowed: an integer from 0 to 2^63-1" in error_line(capsys, *argv)
    assert not store_path.exists()


@pytest.mark.parametrize("argv, field", [
    ((*RUN, "--seed", str(MAX_SEED), "-r", "2"), f"--seed: invalid value {MAX_SEED}; allowed: an integer from 0 "
     f"to {MAX_SEED - 1} (-r 2 runs seeds --seed .. --seed+1, each at most 2^63-1)"),
    (("sweep", "lockstress", *SERIAL[:-2], "-r", "3", "--seed", str(MAX_SEED - 1)),
     f"allowed: an integer from 0 to {MAX_SEED - 2} (-r 3 runs"),
    # a bisect step adds seeds up to --max-runs, 3 x -r by default
    (("bisect", "lockstress", "--good", "v3.12", "--bad", "v3.13", *SERIAL, "--seed", str(MAX_SEED)),
     f"to {MAX_SEED - 2} (a step runs up to 3 seeds from --seed"),
    (("bisect", "lockstress", "--good", "v3.12", "--bad", "v3.13", *SERIAL, "--max-runs", "5", "--seed",
      str(MAX_SEED - 2)), f"to {MAX_SEED - 4} (a step runs up to 5 seeds"),
])
def test_last_seed_beyond_2_63(capsys: Cap, no_runs: None, argv: tuple[str, ...], field: str) -> None:
    assert field in error_line(capsys, *argv, "--no-store")


def test_the_largest_seed_still_runs(capsys: Cap, store_path: Path) -> None:
    assert main([*RUN, "--seed", str(MAX_SEED), "--no-progress"]) == 0
    assert store_path.exists() and capsys.readouterr().err == ""


def _bad_stores(tmp_path: Path) -> list[str]:
    afile = tmp_path / "a-file"
    afile.write_text("x")
    return [str(tmp_path / LONG_NAME),  # a name too long: was a traceback
            str(afile / "x.duckdb"),  # under a regular file: failed after the run
            str(tmp_path / ("y" * 253)),  # fits, but its lock file y...y.lock does not: failed after the run
            str(tmp_path / "new" / LONG_NAME / "x.duckdb")]  # a directory to create with a name too long


def test_bad_store_path_is_refused_before_the_run(capsys: Cap, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for store in _bad_stores(tmp_path):
        assert "--store: invalid value" in error_line(capsys, *RUN, "--store", store)
        monkeypatch.setenv("MMSIM_RESULTS", store)
        assert "$MMSIM_RESULTS: invalid value" in error_line(capsys, *RUN)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing created


@pytest.mark.parametrize("cmd", [("compare", "lockstress", "-k", "v3.12", "-k", "v3.13", *SERIAL),
                                 ("sweep", "lockstress", *SERIAL), ("reproduce", "split-pmd-ptl")])
def test_bad_store_path_workflow_commands(capsys: Cap, tmp_path: Path, no_runs: None, cmd: tuple[str, ...]) -> None:
    for store in _bad_stores(tmp_path)[:2]:
        assert "--store: invalid value" in error_line(capsys, *cmd, "--store", store)


def test_results_commands_with_a_store_name_too_long(capsys: Cap, tmp_path: Path) -> None:
    store = str(tmp_path / LONG_NAME)
    assert "--store: invalid value" in error_line(capsys, "results", "list", "--store", store)
    assert "--store: invalid value" in error_line(capsys, "results", "export", str(tmp_path / "e.csv"),
                                                  "--store", store)


def _outputs(tmp_path: Path, suffix: str) -> list[str]:
    d = tmp_path / ("dir" + suffix)
    d.mkdir()
    return [str(d), str(tmp_path / "missing" / ("x" + suffix)), str(tmp_path / (LONG_NAME + suffix))]


def test_report_plot_export_to_a_bad_output(capsys: Cap, tmp_path: Path, store_path: Path) -> None:
    sweep = tmp_path / "sweep.json"
    assert main(["sweep", "lockstress", *SERIAL, "-p", "tasks=1,2", "--no-store", "--no-progress", "--json"]) == 0
    sweep.write_text(capsys.readouterr().out)
    for out in _outputs(tmp_path, ".html"):
        assert "--output: invalid value" in error_line(capsys, "report", str(sweep), "-o", out)
    for out in _outputs(tmp_path, ".png"):
        assert "--output: invalid value" in error_line(capsys, "plot", "scaling", str(sweep), "-o", out)
    for out in _outputs(tmp_path, ".csv"):
        assert "--output: invalid value" in error_line(capsys, "results", "export", out)
    assert not store_path.exists()


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/proc/self"), reason="root sees /proc as writable")
def test_an_output_that_fails_only_when_written(capsys: Cap, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.json"
    assert main(["sweep", "lockstress", *SERIAL, "-p", "tasks=1,2", "--no-store", "--no-progress", "--json"]) == 0
    sweep.write_text(capsys.readouterr().out)
    assert "(No such file or directory)" in error_line(capsys, "report", str(sweep), "-o", "/proc/r.html")
    assert "(No such file or directory)" in error_line(capsys, "plot", "scaling", str(sweep), "-o", "/proc/p.png")


def test_results_import_of_a_device_fifo_binary_or_deep_file(capsys: Cap, tmp_path: Path, store_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00junk")
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "\n")
    assert "FILE: invalid value '/dev/zero'" in error_line(capsys, "results", "import", "/dev/zero")
    assert "not a FIFO" in error_line(capsys, "results", "import", str(fifo))
    assert "in UTF-8" in error_line(capsys, "results", "import", str(binary))
    assert "in UTF-8" in error_line(capsys, "results", "import", str(deep))
    assert not store_path.exists()


@pytest.mark.parametrize("cmd", [("compare", "lockstress", "-k", "v3.12", "-k", "v3.13", *SERIAL),
                                 ("sweep", "lockstress", *SERIAL),
                                 ("bisect", "lockstress", "--good", "v3.12", "--bad", "v3.13", *SERIAL),
                                 ("reproduce", "split-pmd-ptl")])
def test_workers_beyond_the_host(capsys: Cap, no_runs: None, cmd: tuple[str, ...]) -> None:
    assert "--workers: invalid value 100000; allowed: an integer from 1 to 240" in error_line(
        capsys, *cmd, "--workers", "100000", "--no-store")
    assert f"--workers: invalid value {10**40}; allowed: an integer from 1 to {cli_workflow.MAX_WORKERS}" in (
        error_line(capsys, *cmd, "--workers", str(10**40), "--force", "--no-store"))


@pytest.mark.parametrize("n", [str(2**63), str(10**40)])
@pytest.mark.parametrize("workload", ["vm-scalability/anon-r-seq", "vm-scalability/anon-w-seq"])
def test_nr_task_beyond_a_c_long(capsys: Cap, workload: str, n: str) -> None:
    """nr_task keeps its text (8 or 50%), so the C-long bound on integer -p values missed it: 10^40 tasks got
    as far as a '-p size' error or the guard's '1e+30 events from 0 zero-page faults'."""
    assert f"-p nr_task: invalid value '{n}'; allowed: an integer >= 1 or a percentage like 50%, at most 2^63-1" in (
        error_line(capsys, "run", workload, "--machine", "tiny", "-p", f"nr_task={n}", "--no-store"))


def test_long_names_and_values_are_cut(capsys: Cap) -> None:
    err = error_line(capsys, *RUN, "-p", "x" * 5000 + "=1", "--no-store")
    assert err.startswith("mmsim: error: -p xxx") and "...: invalid value '1'" in err and len(err) < 400
    err = error_line(capsys, "completion", "x" * 5000)
    assert "Invalid value for 'shell'" in err and len(err) < 400
