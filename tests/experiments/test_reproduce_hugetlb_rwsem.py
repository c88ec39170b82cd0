"""hugetlb-rwsem: the full published scale is slow (three arms of 288 tasks on
xeon-phi-7295); the evaluation itself is checked fast on small tiny arms."""

from __future__ import annotations

import pytest

from mmsim.experiments import exp_hugetlb_rwsem as exp
from mmsim.experiments.reproduce import EXPERIMENTS, _load, reproduce
from mmsim.experiments.run import RunSpec, run
from mmsim.mm.hugetlb import I_MMAP_CLASS


def test_registered_with_three_arms_differing_only_by_the_policy() -> None:
    _load()
    e = EXPERIMENTS["hugetlb-rwsem"]
    assert list(e.arms) == [exp.PARENT, exp.BAD, exp.FIX]
    specs = list(e.arms.values())
    assert {(s.workload, s.machine, tuple(s.params.items())) for s in specs} == {
        (exp.WORKLOAD, exp.MACHINE, (("nr_task", "288"),))}


def test_evaluation_on_tiny_arms_reports_reads_per_policy() -> None:
    res = {k: run(RunSpec(exp.WORKLOAD, "tiny", k, params={"nr_task": "8", "size": "72m"}))
           for k in (exp.PARENT, exp.BAD, exp.FIX)}
    checks, notes = exp._eval(res)
    by = {c.metric: c for c in checks}
    assert by["i_mmap_rwsem_reads.parent"].simulated == 0 and by["i_mmap_rwsem_reads.parent"].ok
    assert by["i_mmap_rwsem_reads.fix"].simulated == 0 and by["i_mmap_rwsem_reads.fix"].ok
    assert by["i_mmap_rwsem_reads.c0d0381ade79"].ok
    assert by["i_mmap_rwsem_reads.c0d0381ade79"].simulated == res[exp.BAD].perf["page-faults"] == 4 + 8 * 4
    assert by["fix_vs_parent_pct"].simulated == 0.0  # a private mapping: the fix never takes the lock
    assert res[exp.BAD].locks[I_MMAP_CLASS]["read_acquisitions"] == 36
    assert any("read acquisitions" in n for n in notes)


@pytest.mark.slow
def test_hugetlb_rwsem_in_band_with_mechanism() -> None:
    (o,) = reproduce(["hugetlb-rwsem"])
    by = {c.metric: c for c in o.checks}
    assert o.ok, [c.to_dict() for c in o.checks if c.ok is False]
    assert -45.0 <= by["throughput_change_pct"].simulated <= -20.0
    assert -5.0 <= by["fix_vs_parent_pct"].simulated <= 5.0
    a, b = o.arms[exp.PARENT], o.arms[exp.BAD]
    # the mechanism: readers wait behind the exit-time writers; the count line itself is not the cost
    assert b.locks[I_MMAP_CLASS]["read_contentions"] > 1000
    assert a.locks[I_MMAP_CLASS]["read_contentions"] == 0
    assert by["i_mmap_rwsem_count_line_wait_share.c0d0381ade79"].simulated < 0.01
