"""Determinism (issue 9, item 3): the same spec and seed give identical metrics on every executor and in fresh
interpreters.

The full ``RunResult.to_dict()`` is compared (metrics, perf-stat, vmstat, profile, lock_stat, ``sim.events``,
``sim.simulated_seconds``, ...); only ``sim.wall_seconds``, the host's time, is left out. The workloads cover
the model's main paths on ``tiny``: THP faults (thp_memscale), random anonymous writes drawn from the seeded
RNG (vm-scalability/anon-w-rand), lock contention (lockstress), pipes/sockets (lmbench/bw_unix) and a random
access pattern with latency histograms (pmbench). ``tests/workflow/test_executors.py`` already checks the
sweep-level metrics of lockstress on the three executors; this module checks whole results, RNG-driven
workloads and separate processes with different hash seeds (a model that iterated over a ``set`` of strings
would differ there).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from reliability_common import child_env, comparable, mmsim_cmd, stop_resource_tracker

from mmsim.experiments.executors import run_many
from mmsim.experiments.run import RunSpec

SEED = 7
KERNEL = "v3.13"
# Small versions of each workload: 0.01-0.3 s of host time each on this machine.
CASES: list[tuple[str, dict[str, str]]] = [
    ("thp_memscale", {"threads": "4", "bytes": "16m"}),
    ("vm-scalability/anon-w-rand", {"nr_task": "4", "size": "32m"}),
    ("lockstress", {"tasks": "8", "iterations": "200"}),
    ("lmbench/bw_unix", {"bytes": "2097152"}),
    ("pmbench", {"mapsize": "16", "setsize": "8", "duration": "0.5"}),
]
RNG_DRIVEN = ("vm-scalability/anon-w-rand", "pmbench")  # their results depend on the seed


def _specs(seed: int = SEED) -> list[RunSpec]:
    return [RunSpec(w, "tiny", KERNEL, params=p, seed=seed) for w, p in CASES]


@pytest.fixture(autouse=True, scope="module")
def _no_leftover_children() -> Iterator[None]:
    yield
    stop_resource_tracker()


@pytest.fixture(scope="module")
def serial() -> list[dict[str, Any]]:
    results, executed = run_many(_specs(), executor="serial")
    assert executed == len(CASES)
    return [comparable(r) for r in results]


def test_the_seed_matters_for_rng_driven_workloads(serial: list[dict[str, Any]]) -> None:
    """Not a vacuous comparison: another seed changes the RNG-driven results (and only the seed field elsewhere)."""
    other, _ = run_many(_specs(SEED + 1), executor="serial")
    for (w, _p), a, b in zip(CASES, serial, map(comparable, other), strict=True):
        changed = sorted(k for k in a if a[k] != b[k])
        if w in RNG_DRIVEN:
            assert {"metrics", "perf", "sim"} <= set(changed), (w, changed)
        else:
            assert changed == ["seed"], (w, changed)


def test_serial_process_and_dask_give_identical_results(serial: list[dict[str, Any]]) -> None:
    proc, _ = run_many(_specs(), executor="process", workers=2)
    dask, _ = run_many(_specs(), executor="dask", workers=2)  # a LocalCluster of 2 worker processes
    for (w, _p), s, p, d in zip(CASES, serial, proc, dask, strict=True):
        assert comparable(p) == s, f"{w}: process executor differs from serial"
        assert comparable(d) == s, f"{w}: dask executor differs from serial"


def _cli_run(workload: str, params: dict[str, str], hash_seed: str) -> subprocess.Popen[str]:
    args = ["run", workload, "-m", "tiny", "-k", KERNEL, "--seed", str(SEED), "--json"]
    for k, v in params.items():
        args += ["-p", f"{k}={v}"]
    return subprocess.Popen(mmsim_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(PYTHONHASHSEED=hash_seed))


def test_two_fresh_processes_give_identical_results(serial: list[dict[str, Any]]) -> None:
    """``python -m mmsim run ... --json`` twice per workload, with different PYTHONHASHSEEDs, two at a time."""
    for (w, p), s in zip(CASES, serial, strict=True):
        procs = [_cli_run(w, p, hs) for hs in ("1", "2")]
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outs.append(comparable(json.loads(out)))
        assert outs[0] == outs[1], f"{w}: two fresh processes differ"
        assert outs[0] == s, f"{w}: a fresh process differs from this one"
