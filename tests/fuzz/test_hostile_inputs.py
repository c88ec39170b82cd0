"""The hostile-input corpus (issue 23) as a test: every case ends with exit 0, or one error line and exit 2
(1 for a closed/full output), within 5 s and 512 MiB, and never echoes a planted secret.

The default suite runs a bounded sample (every class several times); ``-m stress`` runs 5,600 cases
(~30 min on 2 CPUs: not in CI, whose 90 minutes the full-scale experiments need).
The generator and the contained runner are in ``hostile_corpus.py``.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_corpus import CLASSES, Case, Corpus, Outcome, Server, cases, run_forked

FAST_CASES = 4 * len(CLASSES)  # 56
SLOW_CASES = 400 * len(CLASSES)  # 5,600


def _json(argv: list[str], env: dict[str, str]) -> object:
    out = subprocess.run([sys.executable, "-m", "mmsim", *argv, "--json"], capture_output=True, text=True,
                         env=env, check=True, timeout=300)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"), "MMSIM_RESULTS": str(home / "results.duckdb"),
            "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), "OPENBLAS_NUM_THREADS": "1",
            "MPLBACKEND": "Agg"}


@pytest.fixture(scope="module")
def corpus(env: dict[str, str]) -> Corpus:
    """Real results of every kind (tiny lockstress runs, a few seconds) and the tiny machine."""
    small = ["-p", "iterations=20", "--no-store", "--executor", "serial"]
    machine = _json(["machine", "show", "tiny"], env)
    assert isinstance(machine, dict)
    machine = {k: v for k, v in machine.items() if k not in ("cpus", "cores")}
    results = {
        "run": _json(["run", "lockstress", "-p", "iterations=20"], env),
        "compare": _json(["compare", "lockstress", "-k", "v3.12", "-k", "v4.14", "-r", "2", *small], env),
        "sweep": _json(["sweep", "lockstress", "-p", "tasks=1,2", *small], env),
        "bisect": _json(["bisect", "lockstress", "--good", "v3.12", "--bad", "v3.12+e009bb30c8df", "-r", "1",
                         *small], env),
        "reproduce": [{"id": "x", "title": "t", "ok": True, "notes": [], "arms": {},
                       "checks": [{"metric": "m", "published": 1.0, "simulated": 1.0, "band": [0.5, 2.0],
                                   "ok": True, "kind": "band", "note": ""}]}],
    }
    return Corpus(machine, results)


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[Server]:
    s = Server(env)
    yield s
    s.close()


def _run_all(server: Server, corpus: Corpus, n: int, seed: int, tmp: Path) -> dict[str, object]:
    counts: collections.Counter[str] = collections.Counter()
    by_class: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    slowest = 0.0
    for i, case in enumerate(cases(corpus, n, seed)):
        d = tmp / f"c{i}"
        out = server.run(case, d)
        shutil.rmtree(d, ignore_errors=True)
        by_class[case.klass] += 1
        slowest = max(slowest, out.seconds)
        p = out.problem(case)
        counts["hang" if out.rc is None and out.signal is None else "ok" if p is None else
               "traceback" if p.startswith("traceback") else "other"] += 1
        counts[f"exit {out.rc}"] += 1
        if p:
            problems.append(f"{case.label()}: {p}")
    report = {"cases": n, "counts": dict(counts), "classes": dict(by_class), "slowest_seconds": round(slowest, 2),
              "problems": problems[:20]}
    print(json.dumps(report, indent=1))
    return report


def test_hostile_sample(server: Server, corpus: Corpus, tmp_path: Path) -> None:
    r = _run_all(server, corpus, FAST_CASES, seed=23, tmp=tmp_path)
    assert r["problems"] == []
    assert r["classes"] == {c: FAST_CASES // len(CLASSES) for c in CLASSES}


@pytest.mark.stress
def test_hostile_full(server: Server, corpus: Corpus, tmp_path: Path) -> None:
    r = _run_all(server, corpus, SLOW_CASES, seed=2023, tmp=tmp_path)
    assert r["problems"] == []


def test_runner_catches_hangs_and_memory_blowups(tmp_path: Path) -> None:
    """The containment itself: a child that loops forever is killed and reported as a hang; one that
    allocates past the limit dies with MemoryError, reported as a traceback."""
    import hostile_corpus as hc

    case = Case("x", [])
    import mmsim.cli

    real_main = mmsim.cli.main  # restored below, whether or not mmsim.cli was imported before this test
    try:
        mmsim.cli.main = lambda argv=None: (lambda: [None for _ in iter(int, 1)])() or 0
        old = hc.WALL_SECONDS
        hc.WALL_SECONDS = 0.5
        res = run_forked([], tmp_path)
        assert res["rc"] is None and res["signal"] is None  # killed by the runner
        hc.WALL_SECONDS = old
        mmsim.cli.main = lambda argv=None: len(bytearray(2 << 30))
        res = run_forked([], tmp_path)
        out = Outcome(res["rc"], "", (tmp_path / "stderr").read_text(), res["seconds"], res["signal"])
        assert out.problem(case) is not None and "MemoryError" in out.stderr
    finally:
        hc.WALL_SECONDS = 5.0
        mmsim.cli.main = real_main
