"""The resource guard against measurement (issue 24, item 2): per workload, at several scales, the estimate
of events and peak memory is within 3x of a real run (the wall-time estimate, a host figure, is measured by
benchmarks/guard_wall_per_event.py); and every runaway case of the issue is refused with its estimate,
before anything runs.

Each measured run is a child process (``python -c``): its ``VmHWM`` is the run's peak memory (not
``ru_maxrss``, which an exec'd child inherits from a large parent: pytest's 255 MB was seen), and its
"wall" is the CPU time of ``run()`` (user + system), which the guard estimates: on this shared 2-core host the
elapsed time of the same run varies 2-3x with the other jobs, the CPU time much less. The fast suite measures
one small case per workload family; ``-m slow`` every case.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reliability_common import child_env

import mmsim.machine as machines
from mmsim.cli import main
from mmsim.errors import UserError
from mmsim.experiments import guard
from mmsim.kernels.catalog import resolve
from mmsim.workloads.base import get_workload, resolve_params

FACTOR = 3.0
CHILD = r"""
import json, resource, sys
from mmsim.experiments.run import RunSpec, run
m, w, p, pol = json.loads(sys.argv[1])
u0 = resource.getrusage(resource.RUSAGE_SELF)
r = run(RunSpec(w, m, "v4.14", policies=pol, params=p), guard=False)
u1 = resource.getrusage(resource.RUSAGE_SELF)
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"events": r.sim["events"], "cpu": u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime,
                  "rss": hwm * 1024}))
"""
Case = tuple[str, str, dict[str, str], dict[str, str]]
FAST: list[Case] = [
    ("tiny", "vm-scalability/anon-w-seq", {"nr_task": "4", "size": "96m"}, {"thp": "never"}),
    ("tiny", "will-it-scale/page_fault1", {"nr_task": "3", "memsize": "4m"}, {"thp": "never"}),
    ("tiny", "lmbench/bw_unix", {"pairs": "2", "bytes": "8m", "msg": "1m"}, {}),
    ("tiny", "lockstress", {"tasks": "8", "iterations": "3000", "lock": "mutex"}, {}),
    ("tiny", "pmbench", {"mapsize": "64", "setsize": "32", "duration": "0.2", "jobs": "2"}, {}),
    ("tiny", "pmbench", {"mapsize": "16", "setsize": "16", "duration": "0.5", "sampling": "page", "jobs": "2"}, {}),
]
SLOW: list[Case] = [
    ("tiny", "vm-scalability/anon-w-seq", {"nr_task": "2", "size": "12m"}, {"thp": "never"}),
    ("tiny", "vm-scalability/anon-w-rand", {"nr_task": "2", "size": "24m"}, {"thp": "never"}),
    ("tiny", "vm-scalability/anon-r-seq", {"nr_task": "3", "size": "12m"}, {}),
    ("tiny", "vm-scalability/anon-w-seq-hugetlb", {"nr_task": "4", "size": "32m"}, {}),
    ("tiny", "vm-scalability/anon-cow-seq", {"nr_task": "3", "size": "6m"}, {"thp": "never"}),
    ("tiny", "vm-scalability/anon-cow-seq-hugetlb", {"nr_task": "3", "size": "48m"}, {}),
    ("tiny", "will-it-scale/page_fault1", {"nr_task": "4", "memsize": "16m", "loops": "4"}, {"thp": "never"}),
    ("tiny", "thp_memscale", {"threads": "3", "bytes": "6m"}, {"thp": "never"}),
    ("tiny", "lmbench/bw_unix", {"pairs": "1", "bytes": "2m", "msg": "32k"}, {}),
    ("tiny", "lmbench/bw_unix", {"pairs": "1", "bytes": "1m", "msg": "4k"}, {}),
    ("tiny", "lockstress", {"tasks": "3", "iterations": "300"}, {}),
    ("tiny", "pmbench", {"mapsize": "8", "setsize": "4", "duration": "0.04"}, {}),
    ("tiny", "pmbench", {"mapsize": "64", "setsize": "64", "duration": "2", "jobs": "2"}, {}),
    ("tiny", "pmbench", {"mapsize": "16", "setsize": "16", "duration": "0.5", "sampling": "page"}, {}),
    ("tiny", "pmbench", {"mapsize": "64", "setsize": "64", "duration": "1", "sampling": "page", "jobs": "2"}, {}),
    ("tiny", "pmbench", {"mapsize": "1024", "setsize": "1024", "duration": "0.05", "sampling": "page", "jobs": "2"},
     {}),
    ("tiny", "pmbench", {"mapsize": "8", "setsize": "4", "duration": "0.01", "delay": "100000"}, {}),
    ("tiny", "pmbench", {"mapsize": "8", "setsize": "4", "duration": "0.01", "delay": "10000000000000",
                         "cold": "1", "jobs": "4"}, {}),
    ("xeon-phi-7295", "vm-scalability/anon-w-rand", {"size": "128m"}, {}),
    ("xeon-phi-7295", "vm-scalability/anon-w-rand", {"size": "1g"}, {}),
    ("xeon-phi-7295", "vm-scalability/anon-w-seq", {"size": "128m"}, {}),
]


def _measure(case: Case) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], capture_output=True, text=True,
                         timeout=600, env=child_env(), check=True)
    got: dict[str, Any] = json.loads(out.stdout)
    return got


def _check(case: Case) -> None:
    m, w, p, pol = case
    wl = get_workload(w)
    est = guard.estimate(wl.name, resolve_params(wl, p), machines.get_machine(m), resolve("v4.14", [], pol).policies)
    got = _measure(case)
    # Events and peak memory are the run's own; its CPU time is the host's (this VM class runs the same run
    # 2.5-3.7x apart from session to session), so the wall estimate is checked by
    # benchmarks/guard_wall_per_event.py on a quiet host, not here (no timed assertions in tests).
    ratios = {"events": est.events / got["events"], "memory": est.memory / got["rss"]}
    bad = {k: round(r, 2) for k, r in ratios.items() if not 1 / FACTOR <= r <= FACTOR}
    assert not bad, f"{case}: estimate/actual {bad} (estimate {est}, actual {got})"


@pytest.mark.parametrize("case", FAST, ids=[f"{c[1]}-{i}" for i, c in enumerate(FAST)])
def test_estimate_within_3x_of_measured_events_memory(case: Case) -> None:
    _check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(SLOW)])
def test_estimate_within_3x_at_every_scale(case: Case) -> None:
    _check(case)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmsim: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(("argv", "needles"), [
    # 5.6 M events and 73 s before: the 4 GiB buffers cannot exist on tiny's 2 GiB
    (["run", "lmbench/bw_unix", "-p", "msg=4g"], ["simulated memory", "8.0 GiB", "at most 2.0 GiB"]),
    (["run", "lmbench/bw_unix", "-p", f"msg={2**63 - 1}"], ["simulated memory"]),  # 2^63: refused by -p parsing
    (["run", "lmbench/bw_unix", "-m", "xeon-e5-2699v3-2s", "-p", "msg=4g", "-p", "bytes=400g"],
     ["estimated events", "skbs x 12 events"]),
    # 2^64 (3.8 GB in 60 s before) is now refused by -p parsing; 2^63 - 1 cycles: 1.25e15 simulated s of 9.2e9 s
    # accesses (131,072 in the warm-up, 4,096 in the batch that crosses the end)
    (["run", "pmbench", "-p", f"delay={2**63 - 1}", "-p", "duration=0.01"], ["estimated simulated time", "1.25e+15 s"]),
    # 4.5e4 events estimated and > 150 s before: ~570 CPU s of page sampling (565) and first touches (5)
    (["run", "pmbench", "-p", "mapsize=1024", "-p", "setsize=1024", "-p", "jobs=8", "-p", "duration=10",
      "-p", "sampling=page"], ["estimated wall time: invalid value '570 s'", "20,279 chunks of 262,144 pages"]),
    # 3.3 GB in 60 s before (every spec built first): refused from the grid's size alone
    (["sweep", "lockstress", "-p", "tasks=1", "-r", "99999999999"], ["estimated memory", "1e+11 runs"]),
    (["compare", "lockstress", "-k", "v3.12", "-k", "v3.13", "-r", "99999999999"], ["estimated memory"]),
])
def test_issue_cases_are_refused_with_their_estimate(argv: list[str], needles: list[str],
                                                     capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    line = _refused([*argv, *(["--store", str(tmp_path / "r.duckdb")] if argv[0] != "run" else [])], capsys)
    for n in needles:
        assert n in line, line
    assert not (tmp_path / "r.duckdb").exists()


def test_anon_w_rand_on_xeon_phi_counts_sub_thp_mappings_and_index_batches() -> None:
    """288 tasks x 3.6 MiB, each mapping placed top-down from MMAP_BASE (4 KiB below a 2 MiB boundary): it holds
    no aligned 2 MiB block, so every page is a 4 KiB fault (the estimate was 2.2x low in events when it took each
    mapping to start on a 2 MiB boundary, with one THP per task; the run makes 262,368 4 KiB faults), and each
    task's 64 Ki-word index batch (1.1 MiB, 10x low before)."""
    from mmsim.mm.mmap import MMAP_BASE

    w = get_workload("vm-scalability/anon-w-rand")
    m = machines.get_machine("xeon-phi-7295")
    est = guard.estimate(w.name, resolve_params(w, {"size": "1g"}), m, resolve("v4.14", [], {}).policies)
    pages = -(-((1 << 30) // 288) // 4096)
    start, end = MMAP_BASE - pages * 4096, MMAP_BASE
    assert end // (2 << 20) - -(-start // (2 << 20)) == 0  # no aligned 2 MiB block inside [start, end)
    assert est.basis == f"{288 * pages:,} page faults x 6.1 events"
    assert est.memory >= 288 * 65536 * 17


def test_thp_blocks_of_a_placed_mapping() -> None:
    """_faults counts the aligned 2 MiB blocks inside [start, start + n): 4 MiB from a boundary is two; shifted by
    4 KiB it is one, with 511 + 1 pages of 4 KiB faults around it; 4 MiB less a page from 4 KiB past a boundary
    ends on one and keeps its second block."""
    hp = 2 << 20
    assert guard._faults(2 * hp, True, start=8 * hp) == (0, 2)
    assert guard._faults(2 * hp, True, start=8 * hp + 4096) == (512, 1)
    assert guard._faults(2 * hp - 4096, True, start=8 * hp + 4096) == (511, 1)
    assert guard._faults(hp, True, start=8 * hp + 4096) == (512, 0)
    assert guard._faults(2 * hp + 4096, True) == (1, 2)  # no start: taken to start on a boundary


def test_unphysical_clock_is_refused_by_the_guard() -> None:
    w = get_workload("thp_memscale")
    m = dataclasses.replace(machines.get_machine("tiny"), freq_ghz=1e-9)
    with pytest.raises(UserError, match="freq_ghz"):
        guard.check(w.name, resolve_params(w, {}), m, resolve("v4.14", [], {}).policies)


def test_wall_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    big = ["run", "lockstress", "-p", "tasks=8", "-p", "iterations=100000"]  # 3.2e6 events x 1.5 us + 0.09 s = 4.9 s
    monkeypatch.setenv(guard.ENV_WALL, "1")
    assert "estimated wall time: invalid value '4.89 s'" in _refused(big, capsys)
    assert main(["run", "lockstress", "-p", "tasks=2", "-p", "iterations=100"]) == 0  # 0.09 s
    capsys.readouterr()
    monkeypatch.setenv(guard.ENV_WALL, "0.5")
    assert "$MMSIM_MAX_WALL" in _refused(big, capsys)


def test_cow_of_a_shared_thp_splits_from_v5_8() -> None:
    """3917c80280c9 (v5.8, policy thp_cow=split): each child's write to the parent's THP splits it and COWs
    512 pages of 4 KiB, so the estimate counts 512 small faults per child per 2 MiB, and the parent's THPs once
    (measured on tiny, nr_task=3, 24m, v6.7: 51,662 events estimated, 59,063 run)."""
    w = get_workload("vm-scalability/anon-cow-seq")
    m = machines.get_machine("tiny")
    params = resolve_params(w, {"nr_task": "3", "size": "24m"})
    copy = guard.estimate(w.name, params, m, resolve("v5.7", [], {}).policies)
    split = guard.estimate(w.name, params, m, resolve("v6.7", [], {}).policies)
    per = (24 << 20) // 3
    s, h = guard._faults(per, True, start=guard._first_mmap_start(per))  # placed 4 KiB off a boundary: 512, 3
    assert (s, h) == (512, 3)
    assert copy.basis.startswith(f"{4 * s:,} page faults x 7.7 events + {4 * h:,} 2 MiB faults")
    assert split.basis.startswith(f"{4 * s + 3 * h * 512:,} page faults x 7.7 events + {h:,} 2 MiB faults")
