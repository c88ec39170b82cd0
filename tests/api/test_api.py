"""The curated Python API: mmsim.__all__ is exactly the documented names, each usable; to_frame()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mmsim

API = ["RunSpec", "bisect", "compare", "get_machine", "reproduce", "resolve_kernel", "results", "run", "sweep"]


def test_all_is_the_curated_api() -> None:
    assert mmsim.__all__ == API
    for name in API:
        assert getattr(mmsim, name) is not None, name
    with pytest.raises(AttributeError):
        _ = mmsim.no_such_name  # type: ignore[attr-defined]


def test_import_mmsim_stays_light() -> None:
    # the names load on first use: importing mmsim pulls in neither the simulator nor pandas
    code = "import sys, mmsim; print(sorted(m for m in ('mmsim.api', 'pandas', 'mmsim.mm.system') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_run_and_its_frame(tmp_path: Path) -> None:
    store = tmp_path / "r.duckdb"
    r = mmsim.run("lockstress", kernel="v6.6+362d37a106dd", params={"tasks": "2"}, seed=3, store=store)
    assert not isinstance(r, list)
    df = r.to_frame()
    assert df.loc[0, "kernel"] == "v6.6+362d37a106dd" and df.loc[0, "seed"] == 3
    assert df.loc[0, "param.tasks"] == 2  # typed, not JSON text
    assert df.loc[0, "policy.pcp_free_high_batch"] == "llc"
    assert df.loc[0, "lockstress.acquisitions_per_second"] == r.metrics["lockstress.acquisitions_per_second"]
    assert list(mmsim.results.runs(store)["seed"]) == [3]
    assert mmsim.resolve_kernel("v6.6+362d37a106dd").policies == r.policies
    assert mmsim.get_machine("tiny").ncpus == 8  # 2 sockets x 2 cores x 2 threads


def test_compare_and_sweep_frames(tmp_path: Path) -> None:
    store = tmp_path / "r.duckdb"
    c = mmsim.compare("lockstress", ["v3.12", "v4.14"], params={"tasks": "2", "iterations": "50"}, runs=2,
                      store=store)
    df = c.to_frame()
    row = df[df.metric == "lockstress.acquisitions_per_second"].iloc[0]
    assert row["v3.12 mean"] == c.a.values["lockstress.acquisitions_per_second"][0]
    assert len(c.runs_frame()) == 4
    s = mmsim.sweep("lockstress", {"tasks": "1,2", "iterations": "50"}, store=store)
    sf = s.to_frame()
    assert list(sf["param.tasks"]) == [1, 2] and "lockstress.acquisitions_per_second" in sf
    again = mmsim.sweep("lockstress", {"tasks": "1,2", "iterations": "50"}, store=store)
    assert (s.executed, again.executed) == (2, 0)  # the Python sweep uses the store


def test_results_frames_have_params_and_policies_as_columns(tmp_path: Path) -> None:
    store = tmp_path / "r.duckdb"
    mmsim.run("lockstress", params={"tasks": "2"}, seed=1, store=store)
    df = mmsim.results.runs(store)
    assert df.loc[0, "param.tasks"] == 2 and df.loc[0, "policy.spinlock"] == "ticket"  # v3.13, before qspinlock
    wide = mmsim.results.metrics(store, wide=True)
    assert wide.loc[0, "param.tasks"] == 2 and "lockstress.acquisitions_per_second" in wide
    assert "param.tasks" not in mmsim.results.runs(store, expand=False)
