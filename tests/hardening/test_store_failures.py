"""Store failures (issue 24, item 4): checked before any run, one-line causes, no computed run lost.

* a truncated (damaged) store, a full filesystem, a read-only store or a new
  store path on a read-only filesystem: the sweep stops before any run with
  one line naming the file and the cause;
* ``results list`` / ``export`` notice the damage; a read-only store can be read;
* the store failing mid-sweep: the runs it could not take go to a side file,
  the sweep ends with one line naming the cause and the file, and
  ``mmsim results import`` loads them (the re-run then executes nothing).

The full-filesystem and read-only cases mount a small tmpfs (root only); the
fault-injection cases run anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_common import check_store

from mmsim.cli import main
from mmsim.experiments import executors
from mmsim.experiments.sweep import sweep
from mmsim.results.store import Store, StoreError

ROOT = os.geteuid() == 0
POINTS = ["tasks=2", "iterations=" + ",".join(str(i) for i in range(20, 26))]  # 6 small lockstress points


def _sweep_argv(store: Path, *extra: str) -> list[str]:
    return ["sweep", "lockstress", "-p", POINTS[0], "-p", POINTS[1], "--executor", "serial", "--store", str(store),
            "--json", *extra]


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmsim: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fails the test if any run starts (the executors' entry point is wrapped)."""
    started: list[int] = []
    real = executors.execute

    def execute(specs: Any, *a: Any, **k: Any) -> Iterator[tuple[int, dict[str, Any]]]:
        started.append(len(specs))
        yield from real(specs, *a, **k)

    monkeypatch.setattr(executors, "execute", execute)
    return started


def _made_store(path: Path) -> int:
    assert main(_sweep_argv(path)) == 0
    return Store(path).count()


def test_truncated_store_stops_before_running_and_list_export_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_runs: list[int]
) -> None:
    store = tmp_path / "r.duckdb"
    assert _made_store(store) == 6
    no_runs.clear()
    with open(store, "r+b") as f:
        f.truncate(store.stat().st_size // 2)
    capsys.readouterr()
    rc = main(_sweep_argv(store, "-p", "think_ns=7"))
    line = _one_line(capsys.readouterr().err)
    assert rc == 1 and line.startswith(f"mmsim: error: results store {store}: damaged (")
    assert "Could not read" in line  # DuckDB's own cause
    assert no_runs == []
    for argv in (["results", "list", "--store", str(store)], ["results", "export", str(tmp_path / "x.csv"),
                                                                 "--store", str(store)]):
        assert main(argv) == 1, argv
        assert "damaged" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "x.csv").exists()


def test_not_a_store_and_special_files_are_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       no_runs: list[int]) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n")
    assert main(_sweep_argv(junk)) == 2
    assert "--store" in (line := _one_line(capsys.readouterr().err)) and "a DuckDB results file (" in line
    for path, what in ((tmp_path, "not a directory"), (Path("/dev/null"), "not a device")):
        assert main(_sweep_argv(path)) == 2
        assert what in _one_line(capsys.readouterr().err)
    assert not Path("/dev/null.lock").exists()
    assert no_runs == []


def test_no_free_space_stops_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch, no_runs: list[int]) -> None:
    class Full:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(os, "statvfs", lambda p: Full())
    assert main(_sweep_argv(tmp_path / "r.duckdb")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "not enough free space (40,960 bytes free" in line and "a new store and 6 run(s)" in line
    assert no_runs == [] and not (tmp_path / "r.duckdb").exists()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root only), unmounted afterwards."""
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(d: Path) -> None:
    with open(d / "fill", "wb") as f, pytest.raises(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
            os.fsync(f.fileno())


def test_full_2mib_tmpfs_stops_before_running(tmpfs: Path, capsys: pytest.CaptureFixture[str],
                                              no_runs: list[int]) -> None:
    _fill(tmpfs)
    assert main(_sweep_argv(tmpfs / "r.duckdb")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "not enough free space (0 bytes free" in line
    assert no_runs == []


def test_read_only_store_is_readable_and_refuses_writes_before_running(
    tmpfs: Path, capsys: pytest.CaptureFixture[str], no_runs: list[int]
) -> None:
    store = tmpfs / "r.duckdb"
    assert _made_store(store) == 6
    (tmpfs / "r.duckdb.lock").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    no_runs.clear()
    capsys.readouterr()
    assert main(["results", "list", "--store", str(store), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 6
    assert Store(store).count() == 6
    for path in (store, tmpfs / "new.duckdb"):
        assert main(_sweep_argv(path, "-p", "think_ns=7")) == 2
        assert "read-only" in _one_line(capsys.readouterr().err)
    assert no_runs == []


def test_store_failing_mid_sweep_loses_no_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Two batches are stored, then every write fails as on a full disk: the other runs go to the side file,
    the sweep ends with one line naming the cause and the file, and ``results import`` completes the store."""
    import duckdb

    store = tmp_path / "r.duckdb"
    monkeypatch.setenv("MMSIM_SPILL_DIR", str(tmp_path / "spill"))
    real_add = Store.add
    calls: list[int] = []

    def add(self: Store, runs: Any, replace: bool = False) -> int:
        runs = list(runs)
        calls.append(len(runs))
        if len(calls) > 2:
            with self._open(read_only=False) as con:  # fails inside the store's own error handling
                con.execute("BEGIN TRANSACTION")
                raise duckdb.IOException('IO Error: Could not write file "r.duckdb.wal": No space left on device')
        return real_add(self, runs[:1], replace) + real_add(self, runs[1:], replace)

    monkeypatch.setattr(Store, "add", add)
    monkeypatch.setattr(executors, "flush_seconds", lambda: 0.01)
    # one run per batch: the progress callback waits for the writer to flush each result
    import time

    def slow(done: int, total: int, last: dict[str, Any]) -> None:
        time.sleep(0.1)

    with pytest.raises(StoreError) as e:
        sweep("lockstress", {"tasks": "2", "iterations": "20,21,22,23,24,25"}, executor="serial",
              store=Store(store), progress=slow)
    msg = str(e.value)
    assert "write failed (cannot write: IO Error" in msg and "No space left on device" in msg
    side = Path(msg.split(" are in ")[1].split(":")[0])
    assert side.parent == tmp_path / "spill"
    stored = Store(store).count()
    spilled = len(side.read_text().splitlines())
    assert stored == 2 and stored + spilled == 6, (stored, spilled, calls)
    monkeypatch.setattr(Store, "add", real_add)
    capsys.readouterr()
    assert main(["results", "import", str(side), "--store", str(store)]) == 0
    assert f"imported {spilled} new run(s)" in capsys.readouterr().out
    assert len(check_store(store)) == 6
    again = sweep("lockstress", {"tasks": "2", "iterations": "20,21,22,23,24,25"}, executor="serial",
                  store=Store(store))
    assert again.executed == 0


def test_full_tmpfs_mid_sweep_real_enospc(tmpfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The same with a real ``No space left on device``: the tmpfs is filled after the first runs are stored."""
    import time

    store = tmpfs / "r.duckdb"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(executors, "flush_seconds", lambda: 0.01)

    def progress(done: int, total: int, last: dict[str, Any]) -> None:
        time.sleep(0.1)
        if done == 2:
            _fill(tmpfs)

    with pytest.raises(StoreError) as e:
        sweep("lockstress", {"tasks": "2", "iterations": "20,21,22,23,24,25"}, executor="serial",
              store=Store(store), progress=progress)
    msg = str(e.value)
    assert "No space left on device" in msg and "mmsim results import" in msg
    side = Path(msg.split(" are in ")[1].split(":")[0])
    assert side.parent == tmp_path / "state" / "mmsim" / "unsaved"  # the store's own filesystem is full
    (tmpfs / "fill").unlink()
    # the user makes room (DuckDB grew the file into what the fill left: 2,084,864 bytes on 2 MiB, measured)
    subprocess.run(["mount", "-o", "remount,size=8m", str(tmpfs)], check=True)
    spilled = len(side.read_text().splitlines())
    stored = Store(store).count()
    assert stored >= 1 and stored + spilled == 6, (stored, spilled)
    assert main(["results", "import", str(side), "--store", str(store)]) == 0
    assert len(check_store(store)) == 6
