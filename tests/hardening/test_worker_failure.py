"""Worker failure (issue 9, item 5): a Dask worker, or a process-pool worker, killed with SIGKILL during a sweep.

A local cluster of two nanny-supervised worker processes runs a sweep through the dask executor
(``--scheduler ADDRESS``, the same code path as ``--workers N``, which builds such a cluster itself). When a
result arrives, the test SIGKILLs a worker process that is running a task, twice in one sweep. The
scheduler re-runs the lost tasks on the other worker (or on the one its nanny restarts); the sweep must end
with every point, each stored exactly once, and with the same metrics as a serial run: a re-run task is the
same deterministic run. The process executor (the default) gets the same treatment: a dead worker breaks
a ``ProcessPoolExecutor``, and the executor re-runs the unfinished runs on a new pool.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_common import check_store, children, stop_resource_tracker

from mmsim.experiments import executors
from mmsim.experiments.run import RunSpec
from mmsim.experiments.sweep import sweep
from mmsim.results.store import Store

GRID = {"tasks": "8", "iterations": "4000", "think_ns": ",".join(str(t) for t in range(100, 110))}  # 10 points
KILL_AT = (1, 4)  # SIGKILL a busy worker when the 1st and the 4th result arrive


@pytest.fixture(autouse=True, scope="module")
def _no_leftover_children() -> Iterator[None]:
    yield
    stop_resource_tracker()


def test_sweep_survives_killed_dask_workers(tmp_path: Path) -> None:
    from distributed import LocalCluster

    store = Store(tmp_path / "results.duckdb")
    killed: list[tuple[int, int]] = []  # (result count at the kill, tasks the killed worker was running)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.CRITICAL) as cluster:
        scheduler = cluster.scheduler
        assert scheduler is not None  # in this process: its state names each worker's pid and tasks

        def kill_a_busy_worker(done: int, total: int, last: dict[str, Any]) -> None:
            if not last or done not in KILL_AT:
                return
            busy = [(len(ws.processing), ws.pid) for ws in list(scheduler.workers.values()) if ws.processing]
            if busy:
                ntasks, pid = max(busy)
                os.kill(pid, signal.SIGKILL)
                killed.append((done, ntasks))

        s = sweep("lockstress", GRID, executor="dask", scheduler=cluster.scheduler_address, store=store,
                  progress=kill_a_busy_worker)
    assert len(killed) == len(KILL_AT) and all(n >= 1 for _, n in killed), killed
    npoints = len(GRID["think_ns"].split(","))
    assert s.executed == len(s.points) == npoints
    ids = check_store(store.path)
    assert len(ids) == len(set(ids)) == npoints
    serial = sweep("lockstress", GRID, executor="serial")
    assert [p.runs for p in s.points] == [p.runs for p in serial.points]


def _pool_workers() -> list[int]:
    """This process's forked children (a fork keeps the parent's command line): the process pool's workers."""
    me = Path("/proc/self/cmdline").read_bytes()
    out = []
    for pid in children(os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == me:
                out.append(pid)
        except OSError:
            continue
    return out


def test_sweep_survives_killed_process_pool_workers(tmp_path: Path) -> None:
    store = Store(tmp_path / "results.duckdb")
    killed: list[int] = []  # result count at each kill

    def kill_a_pool_worker(done: int, total: int, last: dict[str, Any]) -> None:
        if last and done in KILL_AT:
            workers = _pool_workers()
            if workers:  # both workers are busy: the pool queues every task up front
                os.kill(workers[0], signal.SIGKILL)
                killed.append(done)

    s = sweep("lockstress", GRID, executor="process", workers=2, store=store, progress=kill_a_pool_worker)
    assert killed == list(KILL_AT)
    npoints = len(GRID["think_ns"].split(","))
    assert s.executed == len(s.points) == npoints
    ids = check_store(store.path)
    assert len(ids) == len(set(ids)) == npoints
    serial = sweep("lockstress", GRID, executor="serial")
    assert [p.runs for p in s.points] == [p.runs for p in serial.points]


_REAL_WORK = executors._work


def _die_on_seed_3(spec: RunSpec) -> dict[str, Any]:
    """A run that kills its worker every time (as a spec the OOM killer always picks would)."""
    if spec.seed == 3:
        os._exit(1)
    return _REAL_WORK(spec)


def test_a_run_that_always_kills_its_worker_ends_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded: after POOL_RESTARTS new pools the sweep stops with an error naming the cause, not a loop; what
    finished is stored whole, the deadly run is not."""
    monkeypatch.setattr(executors, "_work", _die_on_seed_3)  # forked workers see it too
    monkeypatch.setattr(executors, "POOL_RESTARTS", 1)
    store = Store(tmp_path / "results.duckdb")
    specs = [RunSpec("lockstress", params={"tasks": "8", "iterations": "50"}, seed=i) for i in range(4)]
    with pytest.raises(RuntimeError, match="worker processes died 2 times"):
        executors.run_many(specs, executor="process", workers=2, store=store)
    ids = check_store(store.path)
    assert len(ids) <= 3 and not any(i.endswith("-3") for i in ids)
