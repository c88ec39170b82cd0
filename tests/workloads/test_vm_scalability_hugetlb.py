"""vm-scalability anon-w-seq-hugetlb / anon-cow-seq-hugetlb on ``tiny``: the
case scripts' sizes and pool, the i_mmap_rwsem reads per policy, the pool
back to its start after every process exited, and pool errors."""

from __future__ import annotations

from typing import Any

import pytest

from mmsim.errors import UserError
from mmsim.experiments.run import RunSpec, _result
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.mm.hugetlb import I_MMAP_CLASS
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params

H = 2 << 20
COW = "vm-scalability/anon-cow-seq-hugetlb"
WSEQ = "vm-scalability/anon-w-seq-hugetlb"


def _sim(workload: str, kernel: str, **params: str) -> tuple[System, Any]:
    w = get_workload(workload)
    p = resolve_params(w, params)
    s = System(get_machine("tiny"), resolve(kernel), 0)
    w.setup(s, p)
    s.engine.run()
    return s, _result(RunSpec(workload, "tiny", kernel, params=params), s, w, p, 0.0)


@pytest.mark.parametrize("kernel,reads", [("c0d0381ade79^", False), ("c0d0381ade79", True),
                                          ("c0d0381ade79+fix", False)])
def test_cow_case_reads_i_mmap_rwsem_only_where_the_policy_takes_it(kernel: str, reads: bool) -> None:
    # unit_size 40 MiB, 4 children: usemem gets 40 MiB / 5 = 8 MiB = 4 huge pages each
    s, r = _sim(COW, kernel, nr_task="4", size="40m")
    faults = 4 + 4 * 4  # the parent's MAP_POPULATE + every child's COW
    assert r.perf["page-faults"] == faults
    assert r.counters["cow_fault"] == 16
    assert r.locks[I_MMAP_CLASS]["read_acquisitions"] == (faults if reads else 0)
    # writers: the parent's mmap, 4 fork links, 5 exits x (unmap + unlink)
    assert r.locks[I_MMAP_CLASS]["acquisitions"] - r.locks[I_MMAP_CLASS]["read_acquisitions"] == 1 + 4 + 10
    # setup_hugetlb: nr_hugepages 0, overcommit unit_size / 2 MiB + nr_task + 1 = 25; all returned at the end
    assert s.hugetlb.nr_overcommit_huge_pages == 25
    assert s.hugetlb.counters() == {"HugePages_Total": 0, "HugePages_Free": 0, "HugePages_Rsvd": 0,
                                    "HugePages_Surp": 0}
    assert r.metrics["vm-scalability.throughput"] > 0
    # usemem's unit_bytes: done_bytes = bytes / 8 (prealloc) + the bytes each child wrote
    assert r.metrics["vm-scalability.workload"] == 4 * ((8 << 20) // 8 + (8 << 20))


def test_w_seq_case_each_child_has_its_own_inode() -> None:
    s, r = _sim(WSEQ, "c0d0381ade79", nr_task="4", size="32m")
    assert r.perf["page-faults"] == 16  # 8 MiB each = 4 huge pages
    assert r.locks[I_MMAP_CLASS]["instances"] == 4
    assert r.locks[I_MMAP_CLASS]["read_acquisitions"] == 16
    assert s.hugetlb.counters()["HugePages_Total"] == 0


def test_command_is_the_case_script_line() -> None:
    w = get_workload(COW)
    assert w.command(resolve_params(w, {"nr_task": "288"})) == (
        "usemem -n 288 -T 300 --prealloc --prefault -O -U $(($((mem / 2)) / (nr_task+1)))")
    w = get_workload(WSEQ)
    assert w.command(resolve_params(w, {"nr_task": "4", "size": "1g"})) == (
        f"usemem -n 4 -T 300 -O -U $(({1 << 30} / nr_task))")


@pytest.mark.parametrize("params,outcome", [
    ({"nr_overcommit_hugepages": "3"}, "ENOMEM"),  # the parent's 4 pages cannot be reserved
    ({"nr_overcommit_hugepages": "10"}, "SIGBUS"),  # reserved, but 4 children x 4 COW copies do not fit
    ({"nr_hugepages": "4", "nr_overcommit_hugepages": "0"}, "SIGBUS"),
])
def test_pool_too_small_is_refused_before_running(params: dict[str, str], outcome: str) -> None:
    w = get_workload(COW)
    p = resolve_params(w, {"nr_task": "4", "size": "40m", **params})
    s = System(get_machine("tiny"), resolve("c0d0381ade79"), 0)
    with pytest.raises(UserError) as e:
        w.setup(s, p)
    assert outcome in str(e.value)
    assert s.engine.events == 0


def test_w_seq_pool_too_small_is_enomem() -> None:
    w = get_workload(WSEQ)
    p = resolve_params(w, {"nr_task": "4", "size": "32m", "nr_overcommit_hugepages": "15"})
    with pytest.raises(UserError, match="ENOMEM"):
        w.setup(System(get_machine("tiny"), resolve("v5.7"), 0), p)


def test_bad_pool_values_are_user_errors() -> None:
    w = get_workload(COW)
    with pytest.raises(UserError, match="nr_overcommit_hugepages"):
        resolve_params(w, {"nr_overcommit_hugepages": "-1"})
    with pytest.raises(UserError, match="nr_hugepages"):
        resolve_params(w, {"nr_hugepages": "many"})


def test_cli_pool_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsim.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["run", COW, "--machine", "tiny", "--kernel", "c0d0381ade79", "-p", "nr_task=4", "-p", "size=40m",
                 "-p", "nr_overcommit_hugepages=3"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "ENOMEM" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
