"""compare and bisect through the CLI: the LKP table, verdicts naming the patch, JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from wf_common import QMACHINE, QMACHINE_P, QSPIN, QSPIN_SUBJECT, SMALL, SMALL_P

from mmsim.cli import main
from mmsim.experiments.bisect import bisect, load_series, series_from_kernels
from mmsim.experiments.compare import compare

Cap = pytest.CaptureFixture[str]


def cli(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_text_is_lkp_layout_with_robot_verdict(capsys: Cap) -> None:
    code, out, err = cli(capsys, "compare", "lockstress", "-k", "v3.12", "-k", f"v3.12+{QSPIN}", *SMALL_P,
                         *QMACHINE_P, "-r", "3", "--executor", "serial")
    assert code == 0, err
    assert "%stddev     %change         %stddev" in out
    row = next(line for line in out.splitlines() if line.endswith("  lockstress.acquisitions_per_second"))
    assert "%" in row and row.split()[1].startswith("+")
    assert ('FYI, we noticed a +' in out and "improvement of lockstress.acquisitions_per_second due to commit "
            f'{QSPIN} ("{QSPIN_SUBJECT}")' in out)
    # the mechanism: ticket spinning (_raw_spin_lock) replaced by the qspinlock slow path
    assert "of cycles in _raw_spin_lock" in out and "native_queued_spin_lock_slowpath" in out
    assert "(6 run now, 0 from the results store)" in out
    code, out, _ = cli(capsys, "compare", "lockstress", "-k", "v3.12", "-k", f"v3.12+{QSPIN}", *SMALL_P,
                       *QMACHINE_P, "-r", "3")
    assert "(0 run now, 6 from the results store)" in out


def test_compare_json_and_a_regression_named_as_such(capsys: Cap) -> None:
    # B -> A: the same change read backwards is a regression "due to reverting" the patch
    code, out, err = cli(capsys, "compare", "lockstress", "-k", f"v3.12+{QSPIN}", "-k", "v3.12", *SMALL_P,
                         *QMACHINE_P, "-r", "2", "--executor", "serial", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kind"] == "compare" and d["runs"] == 2 and d["seeds"] == [0, 1]
    assert [a["kernel"] for a in d["arms"]] == [f"v3.12+{QSPIN}", "v3.12"]
    m = {x["metric"]: x for x in d["metrics"]}
    thr = m["lockstress.acquisitions_per_second"]
    assert thr["benchmark"] and thr["direction"] == "higher" and thr["verdict"] == "regression"
    assert thr["lkp_changed"] and thr["welch_p"] == 0.0 and len(thr["a"]["values"]) == 2
    assert thr["pct_change"] == pytest.approx(100 * (thr["b"]["mean"] - thr["a"]["mean"]) / thr["a"]["mean"])
    assert d["regression"] is True
    assert d["verdicts"][0].startswith("noticed a -") and "due to reverting commit a33fda35e3a7" in d["verdicts"][0]
    assert {"perf-stat.cycles", "lock_stat.lockstress.wait-share%"} <= set(m)


def test_compare_no_change_is_said_plainly() -> None:
    c = compare("lockstress", ["v3.12", "v3.12+e009bb30c8df"], params=SMALL, runs=2, executor="serial")
    assert not c.regression
    assert c.verdicts[0].startswith("no significant change (lockstress.acquisitions_per_second +0.0%")
    assert c.culprit == 'commit e009bb30c8df ("mm: implement split page table lock for PMD level")'


@pytest.mark.parametrize(("argv", "needle"), [
    (["-k", "v3.12"], "--kernel"),
    (["-k", "v3.12", "-k", "v9"], "kernel"),
    (["-k", "v3.12", "-k", "v3.12+deadbeef00"], "patch"),
    (["-k", "v3.12", "-k", "v3.13", "-r", "0"], "-r/--runs"),
    (["-k", "v3.12", "-k", "v3.13", "-p", "tasks"], "-p/--param"),
    (["-k", "v3.12", "-k", "v3.13", "--executor", "gpu"], "--executor"),
])
def test_compare_bad_input(capsys: Cap, store_path: Path, argv: list[str], needle: str) -> None:
    code, out, err = cli(capsys, "compare", "lockstress", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err
    assert not store_path.exists()


def _series(tmp_path: Path, patches: list[str]) -> Path:
    p = tmp_path / "series.yaml"
    p.write_text("base: v3.12\npatches:\n" + "".join(f"  - {c}\n" for c in patches))
    return p


SERIES = ["e009bb30c8df", "e1f56c89b040", "8382d914ebf7", QSPIN, "4fc828e24cd9"]


def test_bisect_series_file_names_the_first_bad_patch(capsys: Cap, tmp_path: Path) -> None:
    code, out, err = cli(capsys, "bisect", "lockstress", "--series", str(_series(tmp_path, SERIES)), *SMALL_P,
                         *QMACHINE_P, "--metric", "lockstress.acquisitions_per_second", "--executor", "serial",
                         "-r", "2")
    assert code == 0, err
    assert f'first bad commit: {QSPIN} ("{QSPIN_SUBJECT}")  [4 of 5]' in out
    assert "FYI, we noticed a +" in out and f"due to commit {QSPIN}" in out  # the compare of the last step


def test_bisect_library_steps_and_stability() -> None:
    b = bisect("lockstress", series_from_kernels("v3.12", "v4.14"), threshold_pct=10, params=SMALL, runs=2,
               executor="serial", machine=QMACHINE)
    d = b.to_dict()
    assert QSPIN in [s["commit"] for s in d["series"]]
    assert d["first_bad"]["commit"] == QSPIN
    assert d["steps"][0]["state"] == "good" and d["steps"][1]["state"] == "bad"
    assert all(s["stable"] and s["pct_stddev"] == 0.0 for s in d["steps"])  # the model has no run-to-run noise
    # binary search: ends + ceil(log2(n)) midpoints at most
    n = d["npatches"]
    assert len(d["steps"]) <= 2 + (n - 1).bit_length()
    assert d["compare"]["arms"][1]["kernel"].endswith(QSPIN)


def test_bisect_nothing_to_bisect(tmp_path: Path) -> None:
    b = bisect("lockstress", load_series(_series(tmp_path, ["e009bb30c8df", "e1f56c89b040"])), params=SMALL,
               runs=1, executor="serial")
    assert b.first_bad is None and b.summary.startswith("nothing to bisect")


@pytest.mark.parametrize(("argv", "needle"), [
    (["--good", "v3.12"], "--good/--bad"),
    (["--good", "v3.13", "--bad", "v3.12"], "--bad"),
    (["--good", "v3.12", "--bad", "v3.12"], "--bad"),
    (["--series", "/nonexistent.yaml"], "--series"),
    (["--good", "v3.12", "--bad", "v4.14", "--metric", "nope"], "--metric"),
    (["--good", "v3.12", "--bad", "v4.14", "--threshold", "0"], "--threshold"),
])
def test_bisect_bad_input(capsys: Cap, argv: list[str], needle: str) -> None:
    code, _out, err = cli(capsys, "bisect", "lockstress", *argv, *SMALL_P, "-r", "1", "--executor", "serial")
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_bisect_series_file_errors(tmp_path: Path) -> None:
    from mmsim.errors import UserError

    bad = tmp_path / "bad.yaml"
    bad.write_text("base: v3.12\npatches: [nope123]\n")
    with pytest.raises(UserError, match="patch"):
        load_series(bad)
    bad.write_text("base: v3.12\nextra: 1\npatches: [e009bb30c8df]\n")
    with pytest.raises(UserError, match="base, patches"):
        load_series(bad)


def test_bisect_stability_rule_adds_runs_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Noise injected per seed (odd seeds +20 %): every step exceeds the bounds, grows to --max-runs, is flagged."""
    import mmsim.experiments.bisect as bmod

    real = bmod.flat_metrics

    def noisy(res: dict[str, Any]) -> dict[str, float]:
        f = real(res)
        f["lockstress.acquisitions_per_second"] *= 1.2 if res["seed"] % 2 else 1.0
        return f

    monkeypatch.setattr(bmod, "flat_metrics", noisy)
    b = bisect("lockstress", series_from_kernels("v3.12", f"v3.12+{QSPIN}"), params=SMALL, runs=2, max_runs=4,
               executor="serial", machine=QMACHINE)
    d = b.to_dict()
    assert [s["runs"] for s in d["steps"]] == [4, 4]
    assert all(not s["stable"] and s["state"].endswith("(unstable)") for s in d["steps"])
    assert "WARNING: 2 step(s) stayed above the stability bounds" in d["summary"]
    assert d["first_bad"]["commit"] == QSPIN  # the change (+65 % on Ice Lake) still dwarfs the noise
