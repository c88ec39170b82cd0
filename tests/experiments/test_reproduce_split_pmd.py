"""Full published scale (512 threads x 512m on sgi-uv2000-512): slow, run in CI's slow step."""

from __future__ import annotations

import functools

import pytest

from conftest import reproduce_once
from mmsim.experiments.reproduce import Outcome


@functools.cache
def _outcome() -> Outcome:
    o = reproduce_once("split-pmd-ptl")
    return o


@pytest.mark.slow
def test_split_pmd_ptl_mechanism() -> None:
    o = _outcome()
    checks = {c.metric: c for c in o.checks}
    assert checks["ptl_wait_share.v3.12"].ok and checks["ptl_wait_share.v3.13"].ok
    assert checks["speedup"].simulated > 18.0  # a large speed-up; its band is the xfail below
    a, b = o.arms["v3.12"], o.arms["v3.13"]
    # the mechanism: the top profile line on v3.12 is the ticket spin loop, not on v3.13
    assert a.profile[0]["symbol"] == "_raw_spin_lock"
    assert b.profile[0]["symbol"] != "_raw_spin_lock"
    assert a.locks["&mm->page_table_lock"]["contentions"] > 100_000
    # every THP fault and every __pte_alloc takes pmd_lock() once (c4088ebdca64): mm-wide on
    # v3.12, split on v3.13, where only __pmd_alloc still takes mm->page_table_lock
    assert b.locks["ptlock_ptr(pmd page)"]["acquisitions"] >= b.vmstat["thp_fault_alloc"]
    assert (b.locks["ptlock_ptr(pmd page)"]["acquisitions"] + b.locks["&mm->page_table_lock"]["acquisitions"]
            == a.locks["&mm->page_table_lock"]["acquisitions"])
    # contentions fall by more than an order of magnitude (2026-12-01: 124,306 -> 4,432, 28x; more than
    # 100x before the issue-17/19 merges made the v3.13 arm's faults arrive closer together); the wait
    # share, which is what the speed-up rests on, falls 3,000x (ptl_wait_share checks above)
    assert b.locks["ptlock_ptr(pmd page)"]["contentions"] < a.locks["&mm->page_table_lock"]["contentions"] / 10


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issues 17/19 moved the v3.13 arm, which is bound by DRAM bandwidth: the "
                   "speed-up left its 18-72x band (docs/locks.md, 'Seed results'); strict: passing means the doc "
                   "must change")
def test_split_pmd_ptl_speedup_in_band() -> None:
    o = _outcome()
    assert 18.0 <= {c.metric: c for c in o.checks}["speedup"].simulated <= 72.0
    assert o.ok
