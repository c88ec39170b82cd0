"""plot and report: files a person can open, and the HTML page loaded in a real headless browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from wf_common import QMACHINE, QSPIN, SMALL

from mmsim.cli import main
from mmsim.experiments.bisect import bisect, series_from_kernels
from mmsim.experiments.compare import compare
from mmsim.experiments.run import RunSpec, run
from mmsim.experiments.sweep import sweep

Cap = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("saved")
    data: dict[str, Any] = {
        "compare": compare("lockstress", ["v3.12", f"v3.12+{QSPIN}"], params=SMALL, runs=2,
                           executor="serial", machine=QMACHINE).to_dict(),
        "sweep": sweep("lockstress", {**SMALL, "tasks": "1,2,4,8"}, ["v3.12", f"v3.12+{QSPIN}"], runs=2,
                       executor="serial").to_dict(),
        "bisect": bisect("lockstress", series_from_kernels("v3.12", "v4.14"), params=SMALL, runs=1,
                         executor="serial", machine=QMACHINE).to_dict(),
        "run": run(RunSpec("lockstress", kernel="v3.12", patches=(QSPIN,), policies={"pcp_batch": "127"},
                           params=SMALL)).to_dict(),
        # the shape of `mmsim reproduce --json` (experiments.reproduce.Outcome.to_dict), arms from real runs
        "reproduce": [{"id": "x", "title": "t", "ok": False, "notes": ["a note"],
                       "checks": [{"metric": "speedup", "published": 36.2, "simulated": 10.0, "band": [18, 72],
                                   "ok": False, "note": ""}],
                       "arms": {k: {key: r[key] for key in ("kernel", "machine", "params", "metrics", "perf", "sim")}
                                | {"profile": r["profile"][:10]}
                                for k, r in (("ticket", run(RunSpec("lockstress", params=SMALL)).to_dict()),
                                             ("queued", run(RunSpec("lockstress", patches=(QSPIN,),
                                                                    params=SMALL)).to_dict()))}}],
    }
    out = {}
    for k, v in data.items():
        out[k] = d / f"{k}.json"
        out[k].write_text(json.dumps(v))
    return out


@pytest.mark.parametrize(("kind", "src", "fmt", "magic"), [
    ("scaling", "sweep", "png", b"\x89PNG"),
    ("scaling", "sweep", "svg", b"<?xml"),
    ("profile", "compare", "svg", b"<?xml"),
    ("locks", "compare", "png", b"\x89PNG"),
    ("locks", "sweep", "png", b"\x89PNG"),
])
def test_plot_writes_image(capsys: Cap, tmp_path: Path, saved: dict[str, Path], kind: str, src: str, fmt: str,
                           magic: bytes) -> None:
    out = tmp_path / f"p.{fmt}"
    assert main(["plot", kind, str(saved[src]), "-o", str(out)]) == 0
    assert out.read_bytes()[:5].startswith(magic) and out.stat().st_size > 5000


def test_scaling_plot_has_one_line_per_kernel_with_error_bars(saved: dict[str, Path]) -> None:
    from mmsim.report import plots

    fig = plots.scaling(json.loads(saved["sweep"].read_text()))
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["v3.12", f"v3.12+{QSPIN}"]
    assert ax.get_xlabel() == "tasks" and ax.get_ylabel() == "lockstress.acquisitions_per_second"
    assert [list(line.get_xdata()) for line in ax.get_lines()[:1]] == [[1.0, 2.0, 4.0, 8.0]]


@pytest.mark.parametrize(("argv", "needle"), [
    (["scaling", "{compare}", "-o", "x.png"], "INPUT"),
    (["pie", "{compare}", "-o", "x.png"], "KIND"),
    (["profile", "{compare}", "-o", "x.jpg"], "--output"),
    (["scaling", "{sweep}", "-o", "x.png", "--x", "colour"], "--x"),
    (["scaling", "/nonexistent.json", "-o", "x.png"], "INPUT"),
])
def test_plot_bad_input(capsys: Cap, tmp_path: Path, saved: dict[str, Path], argv: list[str], needle: str) -> None:
    args = [a.format(**{k: str(v) for k, v in saved.items()}) for a in argv]
    args = [str(tmp_path / a) if a.startswith("x.") else a for a in args]
    assert main(args[:0] + ["plot", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert not list(tmp_path.glob("x.*"))


@pytest.mark.parametrize("kind", ["compare", "sweep", "bisect", "reproduce", "run"])
def test_report_is_self_contained(tmp_path: Path, saved: dict[str, Path], kind: str) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(saved[kind]), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    # no external resources: nothing fetched by src= or href= (SVG namespaces are names, not fetches)
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", page)
    assert "<link" not in page and "<script src" not in page and "<metadata>" not in page
    if kind in ("compare", "bisect"):
        assert "FYI, we noticed a +" in page and QSPIN in page
    assert page.count("<svg") >= (1 if kind in ("reproduce", "run") else 2)
    if kind == "compare":
        assert "Amean     lockstress.acquisitions_per_second" in page and "in testcase: lockstress" in page


def test_run_report_shows_what_ran(tmp_path: Path, saved: dict[str, Path]) -> None:
    out = tmp_path / "run.html"
    assert main(["report", str(saved["run"]), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<title>run lockstress on tiny: v3.12+a33fda35e3a7,pcp_batch=127</title>" in page
    for row in ("<td class=\"l\">seed</td><td class=\"l\">0</td>",
                "<td class=\"l\">pcp_batch</td><td class=\"l\">auto</td><td class=\"l\">127</td>",
                "<td class=\"l\">spinlock</td><td class=\"l\">ticket</td><td class=\"l\">queued</td>",
                "<td class=\"l\">tasks</td><td class=\"l\">" + SMALL["tasks"] + "</td>",
                "Performance counter stats for", "native_queued_spin_lock_slowpath"):
        assert row in page, row


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_report_renders_in_headless_chromium(tmp_path: Path, saved: dict[str, Path]) -> None:
    """A real browser loads each page, runs its script, and we read the resulting DOM back."""
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed in CI (.ci/run installs it)")
        pytest.skip("chromium not installed (apt-get install chromium); CI always runs this test")
    for kind in ("compare", "sweep", "bisect", "reproduce", "run"):
        out = tmp_path / f"{kind}.html"
        assert main(["report", str(saved[kind]), "-o", str(out)]) == 0
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", out.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout
        assert 'data-rendered="ok"' in dom, dom[:500]
        ntables = dom.count("<table")
        nplots = dom.count('<div class="plot"><svg')
        assert f"rendered: {ntables} tables, {nplots} plots" in dom
        assert nplots >= (1 if kind in ("reproduce", "run") else 2)
