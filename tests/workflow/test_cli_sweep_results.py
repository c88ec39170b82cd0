"""sweep and results through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wf_common import QMACHINE_P, QSPIN, SMALL_P

from mmsim.cli import main

Cap = pytest.CaptureFixture[str]


def cli(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_json_text_and_results(capsys: Cap, tmp_path: Path, store_path: Path) -> None:
    argv = ["sweep", "lockstress", *SMALL_P, *QMACHINE_P, "-p", "tasks=2,8", "-k", "v3.12", "-k", f"v3.12+{QSPIN}",
            "--executor", "serial"]
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kind"] == "sweep" and d["grid"]["tasks"] == ["2", "8"] and d["runs_total"] == 4 and d["executed"] == 4
    pts = {(p["kernel"], p["swept"]["tasks"]): p for p in d["points"]}
    assert set(pts) == {("v3.12", "2"), ("v3.12", "8"), (f"v3.12+{QSPIN}", "2"), (f"v3.12+{QSPIN}", "8")}
    thr = {k: p["summary"]["lockstress.acquisitions_per_second"]["mean"] for k, p in pts.items()}
    # on Ice Lake-SP (non-inclusive L3) the ticket lock's 8 waiters re-read one after another: 1.75x since session
    # 35 (a spinner re-reads after the PAUSE it is in, 140 cycles there: the queued lock's one re-reader waits
    # P / 2, a ticket storm of seven P / 8); 1.91x from session 29's qspinlock hand-off (its new holder no longer
    # waits for its lock-word store; 1.65x before; tiny's 1.70x until session 23, when tiny's inclusive L3 began to
    # serve a storm per socket)
    assert round(thr[(f"v3.12+{QSPIN}", "8")] / thr[("v3.12", "8")], 2) == 1.75
    assert pts[("v3.12", "8")]["params"]["tasks"] == 8 and pts[("v3.12", "8")]["runs"][0]["seed"] == 0

    code, out, _ = cli(capsys, *argv)
    assert "4 run(s) (0 run now, 4 from the results store)" in out and "tasks=8" in out

    code, out, _ = cli(capsys, "results", "list", "--kernel", "v3.12")
    assert code == 0 and f"{store_path}: 4 run(s) stored; showing 2" in out
    code, out, _ = cli(capsys, "results", "list", "--metric", "acquisitions_per_second", "--json")
    rows = json.loads(out)
    assert len(rows) == 4 and {r["metric"] for r in rows} == {"lockstress.acquisitions_per_second"}
    code, out, _ = cli(capsys, "results", "export", str(tmp_path / "x.parquet"))
    assert code == 0 and "wrote 4 row(s)" in out
    code, out, _ = cli(capsys, "results", "path")
    assert out.strip() == str(store_path)
    code, out, _ = cli(capsys, "results", "path", "--store", str(tmp_path / "other.duckdb"))
    assert out.strip() == str(tmp_path / "other.duckdb")


@pytest.mark.parametrize(("argv", "needle"), [
    (["-p", "tasks=1,,2"], "-p tasks"),
    (["-p", "tasks=2", "--workers", "0", "--executor", "dask"], "--workers"),
    (["-p", "tasks=2", "--executor", "dask", "--scheduler", "localhost:1"], "--scheduler"),
    (["-p", "tasks=2", "-m", "no-such-box"], "machine"),
])
def test_sweep_bad_input(capsys: Cap, store_path: Path, argv: list[str], needle: str) -> None:
    code, out, err = cli(capsys, "sweep", "lockstress", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err, err
    assert not store_path.exists()


def test_results_bad_export_name(capsys: Cap, tmp_path: Path) -> None:
    code, _, err = cli(capsys, "results", "export", str(tmp_path / "x.txt"))
    assert code == 2 and "--output" in err


def test_progress_bar_with_eta_on_stderr(capsys: Cap) -> None:
    code, out, err = cli(capsys, "sweep", "lockstress", *SMALL_P, "-p", "tasks=1,2,3", "--executor", "serial",
                         "--progress", "--no-store")
    assert code == 0 and "sweep lockstress" in err and "3/3" in err and "ETA" in err
    assert "ETA" not in out
    code, out, err = cli(capsys, "sweep", "lockstress", *SMALL_P, "--executor", "serial", "--no-store")
    # not a terminal: one plain line per run
    assert err.startswith("mmsim: sweep lockstress: [1/1] ") and err.count("\n") == 1, err
    code, out, err = cli(capsys, "sweep", "lockstress", *SMALL_P, "--executor", "serial", "--no-store",
                         "--no-progress")
    assert err == ""


def test_store_that_is_not_a_duckdb_file(capsys: Cap, tmp_path: Path) -> None:
    bad = tmp_path / "notes.duckdb"
    bad.write_text("not a database\n")
    code, out, err = cli(capsys, "sweep", "lockstress", *SMALL_P, "--executor", "serial", "--store", str(bad))
    assert code == 2 and out == "" and "--store" in err and "DuckDB" in err and len(err.strip().splitlines()) == 1
    assert bad.read_text() == "not a database\n"
