"""The results key is the resolved inputs' content, not their names (issue 24, item 3).

A sweep on ``-m host`` stores its runs; ``mmsim calibrate`` then writes a new
``host.yaml``; the same sweep must run again instead of reporting the old
numbers (before the fix: ``executed 0``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mmsim.cli import main
from mmsim.experiments.executors import canonical
from mmsim.experiments.run import RunSpec
from mmsim.machine import get_machine
from mmsim.machine.presets import PRESETS
from mmsim.machine.yamlio import save_machine
from mmsim.results.store import spec_hash

SWEEP = ["sweep", "lockstress", "-p", "tasks=1,2", "-p", "iterations=50", "-m", "host", "-r", "2",
         "--executor", "serial", "--json"]


@pytest.fixture(autouse=True)
def _fresh_host_preset() -> Iterator[None]:
    yield
    PRESETS["host"].cache_clear()  # type: ignore[attr-defined]  # no later test sees this test's host.yaml


def _executed(capsys: pytest.CaptureFixture[str], store: Path) -> int:
    """One sweep as a new ``mmsim`` process would see it (the host preset is cached per process)."""
    PRESETS["host"].cache_clear()  # type: ignore[attr-defined]
    assert main([*SWEEP, "--store", str(store)]) == 0
    return int(json.loads(capsys.readouterr().out)["executed"])


def test_recalibrated_host_runs_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    host = tmp_path / "mmsim" / "host.yaml"
    host.parent.mkdir()
    tiny = dataclasses.replace(get_machine("tiny"), name="host")
    save_machine(tiny, host)
    store = tmp_path / "r.duckdb"
    assert _executed(capsys, store) == 4
    save_machine(tiny, host)  # rewritten, same content: the stored runs stand
    assert _executed(capsys, store) == 0
    cost = dataclasses.replace(tiny.cost, page_fault_ns=tiny.cost.page_fault_ns * 2)
    save_machine(dataclasses.replace(tiny, cost=cost), host)  # "recalibrated": one cost constant moved
    assert _executed(capsys, store) == 4


def test_key_covers_machine_content_policies_params_seed_and_model() -> None:
    base = RunSpec("lockstress", "tiny", "v4.14", params={"tasks": "2", "iterations": "50"})
    c = canonical(base)
    assert {"machine_content", "policies", "params", "model", "mmsim_version", "patches"} <= set(c)
    assert c["params"]["tasks"] == 2 and c["machine_content"] != canonical(
        dataclasses.replace(base, machine="xeon-e5-2699v3-2s"))["machine_content"]
    other = {
        "machine": canonical(dataclasses.replace(base, machine="xeon-e5-2699v3-2s")),
        "kernel": canonical(dataclasses.replace(base, kernel="v3.12")),
        "param": canonical(dataclasses.replace(base, params={"tasks": "3", "iterations": "50"})),
    }
    for what, o in other.items():
        assert spec_hash(o) != spec_hash(c), what
    assert spec_hash(canonical(dataclasses.replace(base, seed=5))) == spec_hash(c)  # the seed is the key's 2nd part
