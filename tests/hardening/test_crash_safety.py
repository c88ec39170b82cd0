"""Crash-safe results (issue 9, item 4): all or nothing per run, concurrent sweeps, a sweep killed with SIGKILL.

Every test drives real processes (``python -m mmsim sweep ...`` or a writer loop) on one DuckDB store and then
checks the whole store with :func:`reliability_common.check_store`: each run has exactly its metric rows, no
metric row lacks its run. ``tests/workflow/test_store.py`` covers concurrent ``Store.add`` calls from forked
writers and ``tests/workflow/test_executors.py`` a sweep interrupted by an exception; here the interruptions
are ``kill -9`` (no ``finally``, no flush, no unlock) and the writers are whole CLI sweeps.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from reliability_common import alive, check_store, child_env, children, mmsim_cmd

from mmsim.experiments.executors import canonical
from mmsim.experiments.run import RunSpec
from mmsim.results.store import Store, run_id, spec_hash

TIMEOUT = 180  # seconds: a hung child (e.g. a stale store lock) fails the test instead of hanging the suite
FLUSH = 0.2  # MMSIM_FLUSH_SECONDS for the killed sweep: stored points appear early, the test stays short


def _sweep_args(store: Path, think_ns: list[int], iterations: int, *extra: str) -> list[str]:
    return ["sweep", "lockstress", "-p", "tasks=8", "-p", f"iterations={iterations}",
            "-p", "think_ns=" + ",".join(map(str, think_ns)), "--store", str(store), "--json", "--no-progress", *extra]


def _run_ids(think_ns: list[int], iterations: int) -> set[str]:
    """The store keys a sweep over these points must leave (seed 0, kernel v3.13, machine tiny)."""
    out = set()
    for t in think_ns:
        spec = RunSpec("lockstress", params={"tasks": "8", "iterations": str(iterations), "think_ns": str(t)})
        out.add(run_id(spec_hash(canonical(spec)), 0))
    return out


def test_sigkilled_sweep_reruns_only_the_missing_points(tmp_path: Path) -> None:
    """``mmsim sweep`` (process pool, 2 workers) killed with SIGKILL once some points are stored; the re-run
    computes exactly the missing points and the store ends with one whole result per point. The orphaned
    pool workers exit on their own."""
    store = tmp_path / "results.duckdb"
    points, iterations = list(range(100, 120)), 4000  # 20 points of ~0.15 s host time each
    cmd = mmsim_cmd(*_sweep_args(store, points, iterations, "--executor", "process", "--workers", "2"))
    env = child_env(MMSIM_FLUSH_SECONDS=str(FLUSH))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + TIMEOUT
    stored = 0
    while stored == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        stored = Store(store).count()
    workers = children(proc.pid)
    assert proc.poll() is None, "the sweep ended before it could be killed half-way"
    proc.send_signal(signal.SIGKILL)  # the sweep process only, like the OOM killer: its pool workers are orphaned
    proc.wait(TIMEOUT)
    stored = Store(store).count()  # a last batch may have committed between the poll and the kill
    assert 0 < stored < len(points), f"killed with {stored} of {len(points)} points stored"
    assert workers, "the sweep had no pool workers"
    until = time.monotonic() + 10
    while any(map(alive, workers)) and time.monotonic() < until:
        time.sleep(0.1)
    orphans = [w for w in workers if alive(w)]
    for w in orphans:  # leave no process behind when the check fails
        os.kill(w, signal.SIGKILL)
    assert not orphans, "orphaned pool workers outlived the killed sweep"
    before = set(check_store(store))

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert rerun.returncode == 0, rerun.stderr
    doc = json.loads(rerun.stdout)
    assert doc["executed"] == len(points) - stored and len(doc["points"]) == len(points)
    after = check_store(store)
    assert len(after) == len(set(after)) == len(points) and set(after) == _run_ids(points, iterations)
    assert before < set(after)


def test_two_concurrent_sweeps_lose_nothing_and_duplicate_nothing(tmp_path: Path) -> None:
    """Two ``mmsim sweep`` processes on one store at once, overlapping grids: the union, each run once."""
    store = tmp_path / "results.duckdb"
    iterations = 4000  # ~0.07 s per point: both sweeps run (and write) at the same time
    grids = [list(range(1, 11)), list(range(6, 16))]  # 10 points each, 5 shared: 15 distinct runs
    procs = [subprocess.Popen(mmsim_cmd(*_sweep_args(store, g, iterations, "--executor", "serial")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
             for g in grids]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err
        docs.append(json.loads(out))
    union = set(grids[0]) | set(grids[1])
    ids = check_store(store)
    assert len(ids) == len(set(ids)) == len(union) and set(ids) == _run_ids(sorted(union), iterations)
    assert [len(d["points"]) for d in docs] == [len(g) for g in grids]
    assert len(union) <= sum(d["executed"] for d in docs) <= sum(map(len, grids))
    # a shared point is the same run whichever sweep computed or reused it
    shared = {p["swept"]["think_ns"]: p["runs"] for p in docs[0]["points"]}
    for p in docs[1]["points"]:
        if p["swept"]["think_ns"] in shared:
            assert p["runs"] == shared[p["swept"]["think_ns"]]


_WRITER = textwrap.dedent("""
    import sys
    from mmsim.experiments.run import RunSpec, run
    from mmsim.results.store import Store, StoredRun, spec_hash

    store, first, batch = Store(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    res = run(RunSpec("lockstress", params={"tasks": "8", "iterations": "50"})).to_dict()
    i = first
    while True:  # until killed: one transaction of `batch` runs after another
        runs = [StoredRun(spec_hash({"n": n}), {"n": n}, 0, res) for n in range(i, i + batch)]
        store.add(runs)
        i += batch
""")


@pytest.mark.parametrize("kills", [4])
def test_writer_killed_mid_transaction_leaves_whole_batches(tmp_path: Path, kills: int) -> None:
    """A process adding batches of runs in a loop is SIGKILLed at random moments (``kills`` times, each
    one a fresh writer on the same store): every batch is in the store whole or not at all, and the store
    opens, reads and takes writes after every kill (no stale lock, no torn file)."""
    store, batch = tmp_path / "results.duckdb", 5
    rng = random.Random(9)
    for k in range(kills):
        start = Store(store).count()
        w = subprocess.Popen(mmsim_cmd()[:1] + ["-c", _WRITER, str(store), str(100_000 * k), str(batch)],
                             stderr=subprocess.PIPE, env=child_env(), start_new_session=True)
        deadline = time.monotonic() + TIMEOUT
        while Store(store).count() == start and w.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert w.poll() is None, w.stderr.read() if w.stderr else ""
        time.sleep(rng.uniform(0.0, 0.3))  # somewhere in the next transactions: open, insert, commit, close
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(TIMEOUT)
        if w.stderr:
            w.stderr.close()
        ids = check_store(store)
        assert len(ids) % batch == 0 and len(ids) > start, f"kill {k}: {len(ids)} runs, not whole batches of {batch}"


def test_bad_flush_interval_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsim.errors import UserError
    from mmsim.experiments.sweep import sweep

    store = tmp_path / "results.duckdb"
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv("MMSIM_FLUSH_SECONDS", bad)
        with pytest.raises(UserError, match="MMSIM_FLUSH_SECONDS"):
            sweep("lockstress", {"tasks": "2", "iterations": "10"}, executor="serial", store=Store(store))
    assert not store.exists()
