"""The results store: schema, reuse keys, no loss or duplicates under concurrent writers, DataFrames, export."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest
from wf_common import SMALL

import mmsim.results
from mmsim.errors import UserError
from mmsim.experiments.run import RunSpec, run
from mmsim.results.store import Store, StoredRun, flat_metrics, spec_hash


def _result(seed: int = 0) -> dict[str, Any]:
    return run(RunSpec("lockstress", params=SMALL, seed=seed)).to_dict()


def _stored(i: int, res: dict[str, Any]) -> StoredRun:
    spec = {"n": i}
    return StoredRun(spec_hash(spec), spec, i, {**res, "seed": i})


def test_default_path_env_and_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MMSIM_RESULTS", str(tmp_path / "x.duckdb"))
    assert mmsim.results.default_path() == tmp_path / "x.duckdb"
    monkeypatch.delenv("MMSIM_RESULTS")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert mmsim.results.default_path() == tmp_path / "data" / "mmsim" / "results.duckdb"


def test_flat_metrics_names() -> None:
    f = flat_metrics(_result())
    assert f["lockstress.acquisitions_per_second"] > 0
    assert f["perf-stat.page-faults"] == 0
    assert "perf-stat.instructions-per-cycle" in f
    assert any(k.startswith("perf-profile.self.cycles-pp.") for k in f)
    assert f["lock_stat.lockstress.acquisitions"] == 8 * 50
    assert "sim.wall_seconds" not in f and "sim.events" in f


def test_add_get_and_no_duplicates(store_path: Path) -> None:
    st = Store(store_path)
    res = _result()
    runs = [_stored(i, res) for i in range(3)]
    assert st.add(runs) == 3
    assert st.add(runs) == 0, "same run ids: nothing added"
    assert st.count() == 3
    got = st.get([(runs[1].spec_hash, 1), ("nope", 0)])
    assert list(got) == [(runs[1].spec_hash, 1)] and got[(runs[1].spec_hash, 1)]["seed"] == 1
    df = mmsim.results.runs(store_path)
    assert len(df) == 3 and set(df.columns) >= {"spec_hash", "seed", "spec", "mmsim_version", "created"}
    m = mmsim.results.metrics(store_path, metric="acquisitions_per_second")
    assert len(m) == 3 and set(m["metric"]) == {"lockstress.acquisitions_per_second"}
    wide = mmsim.results.metrics(store_path, wide=True, seed=[0, 2])
    assert len(wide) == 2 and "perf-stat.cycles" in wide.columns


def _writer(path: str, ids: list[int], res: dict[str, Any]) -> None:
    st = Store(path)
    for i in ids:  # one transaction per run: maximal interleaving between the writers
        st.add([_stored(i, res)])


def test_concurrent_writers_lose_nothing_duplicate_nothing(store_path: Path) -> None:
    res = _result()
    # three processes, overlapping id ranges: 0..7, 4..11, 8..15 -> 16 distinct runs
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(store_path), list(range(a, a + 8)), res)) for a in (0, 4, 8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    st = Store(store_path)
    assert st.count() == 16
    df = st.runs()
    assert sorted(df["seed"]) == list(range(16))
    nmetrics = len(flat_metrics(res))
    assert len(st.metrics()) == 16 * nmetrics


def test_export_csv_parquet(store_path: Path, tmp_path: Path) -> None:
    import pandas as pd

    Store(store_path).add([_stored(i, _result()) for i in range(2)])
    assert mmsim.results.export(tmp_path / "r.csv", store_path) == 2
    assert mmsim.results.export(tmp_path / "r.parquet", store_path, wide=False, metric="cycles") >= 2
    assert len(pd.read_csv(tmp_path / "r.csv")) == 2
    assert set(pd.read_parquet(tmp_path / "r.parquet")["metric"]) >= {"perf-stat.cycles"}
    with pytest.raises(UserError, match="--output"):
        mmsim.results.export(tmp_path / "r.xlsx", store_path)
    with pytest.raises(UserError, match="results filter"):
        mmsim.results.runs(store_path, colour="red")


def test_missing_store_gives_empty_frames(tmp_path: Path) -> None:
    assert mmsim.results.runs(tmp_path / "none.duckdb").empty
    assert not (tmp_path / "none.duckdb").exists()
