"""Shared helpers of the determinism, crash-safety and worker-failure tests (a plain module: tests/ has no packages)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mmsim.results.store import Store, flat_metrics


def mmsim_cmd(*args: str) -> list[str]:
    """``python -m mmsim ARGS``: a fresh interpreter running the CLI, as a user would."""
    return [sys.executable, "-m", "mmsim", *args]


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child ``mmsim``: this one, with ``src/`` importable even from a bare checkout."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else src
    return env


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A ``RunResult.to_dict()`` as JSON would carry it, without ``sim.wall_seconds`` (the host's time)."""
    out: dict[str, Any] = json.loads(json.dumps(result))
    out["sim"].pop("wall_seconds", None)
    return out


def check_store(path: Path) -> list[str]:
    """Assert the store is whole: every run has exactly its metric rows (as many as ``flat_metrics`` of its
    stored result gives) and no metric row lacks its run. Returns the run ids."""
    with Store(path)._connect() as con:
        runs = con.execute("SELECT run_id, result FROM runs ORDER BY run_id").fetchall()
        per_run = dict(con.execute("SELECT run_id, count(*) FROM metrics GROUP BY run_id").fetchall())
        orphans = con.execute("SELECT count(*) FROM metrics WHERE run_id NOT IN (SELECT run_id FROM runs)").fetchone()
    assert orphans is not None and orphans[0] == 0, f"{orphans[0] if orphans else '?'} metric rows without a run"
    for rid, res in runs:
        want = len(flat_metrics(json.loads(res)))
        assert per_run.get(rid, 0) == want, f"run {rid}: {per_run.get(rid, 0)} metric rows, expected {want}"
    return [rid for rid, _ in runs]


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
    return kids


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker, which a Dask LocalCluster (spawn context) starts and which
    otherwise stays this process's child for the rest of the session (tests elsewhere check that a run leaves
    no child behind). It restarts on demand."""
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_fd", None) is not None:
        tracker._stop()
