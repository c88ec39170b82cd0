"""Bad input found by the second CLI fuzzing round (session 32, after tests/cli/test_fuzz_regressions_cli.py's
fixes): each case is one stderr line ``mmsim: error: FIELD: ...``, exit 2, before anything runs, nothing stored.

What each case did before: ``-k v3.12+`` (an empty patch component) ran plain v3.12 and ``+x`` ran patch x on an
empty base name; a sweep, compare, bisect or ``run -r N`` of runs each under ``$MMSIM_MAX_WALL`` ran however
long they took together (a 3-point sweep of 144 s points: 432 s without a word); ``sweep -p tasks=1,1`` (and
``-k A -k A``, ``-m M -m M``) ran and showed the same point twice; ``-k v3.12+X+X`` listed patch X twice;
``--store ''`` used the default store; ``results export ''`` was a traceback; ``calibrate --out`` with a name
too long was a traceback, and a FIFO blocked its write after the measurements.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import mmsim.experiments.executors as executors_mod
import mmsim.experiments.run as run_mod
from conftest import cli_error_line
from mmsim.cli import main
from mmsim.errors import UserError
from mmsim.experiments import guard

Cap = pytest.CaptureFixture[str]
LOCK = ("lockstress", "-p", "tasks=2", "-p", "iterations=50")
SERIAL = ("--executor", "serial")


error_line = cli_error_line


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail at once (instead of simulating) if a refused command reaches its runs."""
    def ran(*a: object, **k: object) -> None:
        raise AssertionError("the command started running")

    monkeypatch.setattr(run_mod, "run", ran)
    monkeypatch.setattr(executors_mod, "execute", ran)


# -- kernels: BASE+PATCH+... with an empty part ----------------------------------------------------------------

EMPTY_PARTS = ["v3.12+", "+", "+e009bb30c8df", "v3.12++e009bb30c8df", "v3.12+e009bb30c8df+", "v3.12+ "]


@pytest.mark.parametrize("kernel", EMPTY_PARTS)
def test_kernel_with_an_empty_part(capsys: Cap, store_path: Path, no_runs: None, kernel: str) -> None:
    want = f"kernel: invalid value {kernel!r}; allowed: a kernel name, or BASE+PATCH+... with"
    assert want in error_line(capsys, "run", *LOCK, "-m", "tiny", "-k", kernel)
    assert want in error_line(capsys, "sweep", *LOCK, *SERIAL, "-k", kernel)
    assert want in error_line(capsys, "compare", *LOCK, *SERIAL, "-r", "1", "-k", "v3.12", "-k", kernel)
    assert want in error_line(capsys, "bisect", *LOCK, *SERIAL, "-r", "1", "--good", "v3.12", "--bad", kernel)
    assert want in error_line(capsys, "kernels", "show", kernel)
    assert not store_path.exists()


@pytest.mark.parametrize("argv, want", [
    (("-k", "v3.12+e009bb30c8df+e009bb30c8df"), "(v3.12+e009bb30c8df has e009bb30c8df)"),
    (("-k", "v3.13+e009bb30"), "(v3.13 has e009bb30c8df)"),  # v3.13 has it merged
    (("-k", "v3.12+e009bb30c8df", "--patch", "e009bb30c8df"), "(v3.12+e009bb30c8df has e009bb30c8df)"),
])
def test_a_patch_the_kernel_already_has(capsys: Cap, store_path: Path, no_runs: None, argv: tuple[str, ...],
                                        want: str) -> None:
    """It was applied (a no-op) and listed twice in the kernel's patches and label."""
    err = error_line(capsys, "run", *LOCK, "-m", "tiny", *argv)
    assert "patch: invalid value" in err and f"allowed: a patch the kernel does not have yet {want}" in err
    assert not store_path.exists()


def test_a_bisect_series_listing_a_patch_twice(capsys: Cap, tmp_path: Path, no_runs: None) -> None:
    series = tmp_path / "s.yaml"
    series.write_text("base: v3.12\npatches: [e009bb30c8df, e009bb30c8df]\n")
    assert "a patch the kernel does not have yet" in error_line(capsys, "bisect", *LOCK, *SERIAL, "-r", "1",
                                                                "--series", str(series))


def test_kernel_names_with_a_plus_still_work(capsys: Cap) -> None:
    assert main(["kernels", "show", "c0d0381ade79+fix", "--json"]) == 0  # a catalogued name containing "+"
    assert main(["kernels", "show", "v3.12+e009bb30c8df", "--json"]) == 0
    capsys.readouterr()


# -- the guard's CPU-time limit on a command's runs together ------------------------------------------------------

HEAVY = ("lockstress", "-p", "tasks=8", "-p", "iterations=10000")  # ~0.57 s estimated per run


@pytest.mark.parametrize("argv, what", [
    (("run", *HEAVY, "-m", "tiny", "-r", "5"), "run lockstress -r 5: invalid value '2.85 s'"),
    (("sweep", *HEAVY[:3], "-p", "iterations=10000,10001,10002", *SERIAL), "sweep lockstress"),
    (("compare", *HEAVY, *SERIAL, "-r", "3", "-k", "v3.12", "-k", "v3.13"), "compare lockstress"),
    (("bisect", *HEAVY, *SERIAL, "-r", "3", "--good", "v3.12", "--bad", "v3.13"), "bisect lockstress"),
])
def test_total_wall_time_is_guarded(capsys: Cap, store_path: Path, no_runs: None, monkeypatch: pytest.MonkeyPatch,
                                    argv: tuple[str, ...], what: str) -> None:
    monkeypatch.setenv("MMSIM_MAX_WALL", "1")
    err = error_line(capsys, *argv)
    assert f"estimated wall time of {what}" in err and "runs together, the limit of one run" in err, err
    assert "$MMSIM_MAX_WALL=SECONDS; --force to run anyway" in err
    assert not store_path.exists()


def test_total_wall_time_counts_only_runs_not_in_the_store(capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = ["sweep", *HEAVY[:3], "-p", "iterations=200,201", *SERIAL, "--no-progress"]
    assert main(sweep) == 0  # 2 cheap points, stored
    monkeypatch.setenv("MMSIM_MAX_WALL", "1")
    assert main([*sweep[:5], "iterations=200,201,10000", *sweep[6:]]) == 0  # one new point: under the limit
    capsys.readouterr()
    assert "estimated wall time of sweep" in error_line(capsys, *sweep[:5], "iterations=200,10001,10002",
                                                        *sweep[6:])


def test_total_wall_time_with_force_or_exact(capsys: Cap, no_runs: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSIM_MAX_WALL", "1")
    for extra in ("--force", "--exact"):  # past the check, to the first run
        with pytest.raises(AssertionError, match="started running"):
            main(["run", *HEAVY, "-m", "tiny", "-r", "5", "--no-store", "--no-progress", extra])
    with pytest.raises(UserError):
        guard.check_total([0.6, 0.6], "x")
    guard.check_total([0.6], "x")  # one run: guard.check's own limit
    monkeypatch.setenv("MMSIM_FORCE", "1")
    guard.check_total([0.6], "x", 10**12)
    capsys.readouterr()


# -- sweep axes list each value once ------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, want", [
    (("-p", "tasks=1,1"), "-p tasks: invalid value '1,1'; allowed: distinct values ('1' is given twice"),
    (("-p", "tasks=1,2, 1"), "-p tasks: invalid value '1,2, 1'; allowed: distinct values ('1' is given twice"),
    (("-k", "v3.12", "-k", "v3.12"), "--kernel: invalid value 'v3.12 v3.12'; allowed: distinct values"),
    (("-m", "tiny", "-m", "tiny"), "--machine: invalid value 'tiny tiny'; allowed: distinct values"),
])
def test_sweep_duplicate_values(capsys: Cap, store_path: Path, no_runs: None, extra: tuple[str, ...],
                                want: str) -> None:
    assert want in error_line(capsys, "sweep", "lockstress", "-p", "iterations=50", *SERIAL, *extra)
    assert not store_path.exists()


# -- --store '', results export '' --------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [("run", *LOCK, "-m", "tiny"), ("sweep", *LOCK, *SERIAL), ("results", "list"),
                                  ("results", "path"), ("results", "export", "out.csv")])
def test_an_empty_store_path(capsys: Cap, store_path: Path, no_runs: None, argv: tuple[str, ...]) -> None:
    """``--store ''`` used the default store ($MMSIM_RESULTS or ~/.local/share/mmsim/results.duckdb)."""
    assert "--store: invalid value ''; allowed: a results file path" in error_line(capsys, *argv, "--store", "")
    assert not store_path.exists()


@pytest.mark.parametrize("out", ["", "/"])
def test_results_export_to_an_empty_name(capsys: Cap, out: str) -> None:
    """``results export ''`` (the path '.') was a traceback: ValueError from Path.with_name for NAME.tmp."""
    assert "allowed: a writable file path (it is a directory)" in error_line(capsys, "results", "export", out)


# -- calibrate --out ------------------------------------------------------------------------------------------------

@pytest.fixture
def no_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmsim.native.calibrate as calibrate_mod

    def measured(*a: object, **k: object) -> None:
        raise AssertionError("calibrate started measuring")

    monkeypatch.setattr(calibrate_mod, "measure", measured)


def test_calibrate_out_refused_before_measuring(capsys: Cap, tmp_path: Path, no_measuring: None) -> None:
    """A name too long was a traceback; a FIFO blocked the write after ~15 s of measurements; a device was
    written to."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for out, why in [(str(tmp_path / ("x" * 300 + ".yaml")), "(File name too long"),
                     (str(fifo), "(a regular file, not a device or FIFO)"),
                     ("/dev/null", "(a regular file, not a device or FIFO)"),
                     (str(tmp_path), "a file path (it is a directory)")]:
        err = error_line(capsys, "calibrate", "--out", out)
        assert err.startswith("mmsim: error: --out: invalid value '") and why in err, err


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/proc/self"), reason="root sees /proc as writable")
def test_calibrate_out_that_fails_only_when_written(capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    import mmsim.native.calibrate as calibrate_mod
    from mmsim.machine import get_machine

    tiny = get_machine("tiny")
    monkeypatch.setattr(calibrate_mod, "measure", lambda log: {})
    monkeypatch.setattr(calibrate_mod, "detect_host", lambda: tiny)
    monkeypatch.setattr(calibrate_mod, "build_machine", lambda raw, host, prev: (tiny, []))
    assert "allowed: a writable file path (No such file or directory; nothing was saved)" in error_line(
        capsys, "calibrate", "--out", "/proc/h.yaml")


# -- a valid run that was a traceback ------------------------------------------------------------------------------

def test_hugetlb_children_reserving_at_once(capsys: Cap) -> None:
    """Two children's mmap()s gathered surplus pages at the same time, each counting the same free pages
    (gather_surplus_pages without its retry): 508 pages for 512 reservations, and a reserved fault found no
    free page (RuntimeError: generator raised StopIteration, a traceback)."""
    assert main(["run", "vm-scalability/anon-w-seq-hugetlb", "-m", "tiny", "-p", "nr_task=2", "-p", "runtime=1",
                 "-p", "nr_hugepages=4", "-p", "size=auto", "--no-store", "--no-progress", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["vmstat"]["htlb_buddy_alloc_success"] == 508  # 2 x 256 pages: the 4 static pages + 508 surplus
