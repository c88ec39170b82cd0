"""Executors give identical metrics; the store makes sweeps resumable; bad input fails before any run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wf_common import QSPIN, SMALL

from mmsim.errors import UserError
from mmsim.experiments import executors
from mmsim.experiments.run import RunSpec
from mmsim.experiments.sweep import parse_grid, sweep
from mmsim.results.store import Store


def _metrics(s: Any) -> list[tuple[str, str, dict[str, str], list[dict[str, float]]]]:
    return [(p.machine, p.kernel, p.swept, p.runs) for p in s.points]


def test_parse_grid_and_kernel() -> None:
    assert parse_grid({"tasks": "1,2, 4", "lock": "mutex"}) == {"tasks": ["1", "2", "4"], "lock": ["mutex"]}
    with pytest.raises(UserError, match="-p tasks"):
        parse_grid({"tasks": "1,,2"})
    assert executors.parse_kernel("v3.12+e009bb30c8df+a33fda35e3a7") == ("v3.12", ("e009bb30c8df", "a33fda35e3a7"))
    assert executors.parse_kernel("v4.14") == ("v4.14", ())
    from mmsim.kernels.catalog import KERNELS

    for name in KERNELS:  # a catalogued name is taken whole, even with a "+" in it (c0d0381ade79+fix)
        assert executors.parse_kernel(name) == (name, ())


def test_serial_process_dask_identical(store_path: Path) -> None:
    grid = {**SMALL, "tasks": "2,4,8"}
    kernels = ["v3.12", f"v3.12+{QSPIN}"]
    ser = sweep("lockstress", grid, kernels, runs=2, executor="serial", store=None)
    proc = sweep("lockstress", grid, kernels, runs=2, executor="process", workers=2, store=None)
    dask = sweep("lockstress", grid, kernels, runs=2, executor="dask", workers=2, store=Store(store_path))
    assert len(ser.points) == 6 and ser.executed == proc.executed == dask.executed == 12
    assert _metrics(ser) == _metrics(proc) == _metrics(dask)
    # and the store now answers the whole sweep without running anything
    again = sweep("lockstress", grid, kernels, runs=2, executor="serial", store=Store(store_path))
    assert again.executed == 0 and _metrics(again) == _metrics(ser)
    assert Store(store_path).count() == 12


class _Kill(Exception):
    pass


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_killed_sweep_resumes_without_recomputing(store_path: Path, executor: str) -> None:
    grid = {**SMALL, "tasks": "1,2,3,4,5,6"}
    seen: list[int] = []

    def die_after_three(done: int, total: int, last: dict[str, Any]) -> None:
        if last:
            seen.append(done)
        if len(seen) == 3:
            raise _Kill

    with pytest.raises(_Kill):
        sweep("lockstress", grid, executor=executor, workers=2, store=Store(store_path), progress=die_after_three)
    assert Store(store_path).count() == 3, "the finished runs were kept"
    rest = sweep("lockstress", grid, executor=executor, workers=2, store=Store(store_path))
    assert rest.executed == 3 and len(rest.points) == 6
    assert Store(store_path).count() == 6


def test_fresh_reruns_and_replaces(store_path: Path) -> None:
    st = Store(store_path)
    a = sweep("lockstress", SMALL, executor="serial", store=st)
    b = sweep("lockstress", SMALL, executor="serial", store=st, fresh=True)
    assert (a.executed, b.executed, st.count()) == (1, 1, 1)


def test_bad_input_fails_before_anything_runs(store_path: Path) -> None:
    bad = [
        ({"tasks": "2,x"}, "-p tasks"),
        ({"nope": "1"}, "-p nope"),
    ]
    for params, needle in bad:
        with pytest.raises(UserError, match=needle):
            sweep("lockstress", params, store=Store(store_path))
    with pytest.raises(UserError, match="kernel"):
        sweep("lockstress", SMALL, kernels=["v9.99"], store=Store(store_path))
    with pytest.raises(UserError, match="--executor"):
        sweep("lockstress", SMALL, executor="mpi", store=Store(store_path))
    with pytest.raises(UserError, match="--scheduler"):
        sweep("lockstress", SMALL, executor="process", scheduler="tcp://x:1", store=Store(store_path))
    assert not store_path.exists()


def test_user_error_inside_a_worker_comes_back_as_user_error() -> None:
    # 9 tasks on the 8-CPU tiny machine: only the workload's setup can tell
    specs = [RunSpec("lockstress", params={**SMALL, "tasks": "9"})] * 2
    with pytest.raises(UserError, match="-p tasks"):
        executors.run_many(specs, executor="process", workers=2)


def test_dask_scheduler_address_uses_an_existing_cluster(store_path: Path) -> None:
    """--scheduler tcp://HOST:PORT: connect to a running cluster (here one started in this process)."""
    import logging

    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
        addr = cluster.scheduler_address
        assert addr.startswith("tcp://")
        s = sweep("lockstress", {**SMALL, "tasks": "2,4"}, executor="dask", scheduler=addr, store=Store(store_path))
        assert s.executed == 2 and cluster.scheduler is not None
    ser = sweep("lockstress", {**SMALL, "tasks": "2,4"}, executor="serial")
    assert _metrics(s) == _metrics(ser)


def test_unreachable_scheduler_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "SCHEDULER_TIMEOUT", "1s")
    with pytest.raises(UserError, match="--scheduler"):
        sweep("lockstress", SMALL, executor="dask", scheduler="tcp://127.0.0.1:9")


def test_background_writer_stores_finished_runs_before_the_sweep_ends(store_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """What a `kill -9` would find: runs finished more than FLUSH_SECONDS ago are already in the store."""
    import time

    from mmsim.experiments.run import run
    from mmsim.results.store import StoredRun, spec_hash

    monkeypatch.setattr(executors, "FLUSH_SECONDS", 0.05)
    st = Store(store_path)
    w = executors._Writer(st, replace=False)
    res = run(RunSpec("lockstress", params=SMALL)).to_dict()
    w.put(StoredRun(spec_hash({"x": 1}), {"x": 1}, 0, res))
    deadline = time.monotonic() + 10
    while st.count() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert st.count() == 1, "flushed by the background thread, before close()"
    w.put(StoredRun(spec_hash({"x": 2}), {"x": 2}, 0, res))
    w.close()
    assert st.count() == 2


def test_a_model_change_invalidates_stored_runs(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs are keyed by the model's source fingerprint too: new model code, new runs (same version number)."""
    st = Store(store_path)
    assert sweep("lockstress", SMALL, executor="serial", store=st).executed == 1
    assert sweep("lockstress", SMALL, executor="serial", store=st).executed == 0
    monkeypatch.setattr(executors, "model_fingerprint", lambda: "0123456789abcdef")
    assert sweep("lockstress", SMALL, executor="serial", store=st).executed == 1
    assert st.count() == 2


def test_model_fingerprint_covers_the_model_not_the_workflow() -> None:
    fp = executors.model_fingerprint()
    assert len(fp) == 16 and executors.canonical(RunSpec("lockstress"))["model"] == fp
    for model_file in ("mm/memory.py", "locks/spinlock.py", "experiments/run.py", "workloads/lockstress.py"):
        assert not model_file.startswith(executors._NOT_MODEL)
    for other in ("report/html.py", "cli_workflow.py", "cli.py", "results/store.py", "experiments/compare.py"):
        assert other.startswith(executors._NOT_MODEL)
