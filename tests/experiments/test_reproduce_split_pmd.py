"""Full published scale (512 threads x 512m on sgi-uv2000-512): slow, run in CI's slow step."""

from __future__ import annotations

import functools
import math

import pytest

from conftest import reproduce_once
from mmsim.experiments.reproduce import Outcome


@functools.cache
def _outcome() -> Outcome:
    o = reproduce_once("split-pmd-ptl")
    return o


@pytest.mark.slow
def test_split_pmd_ptl_v312_spins_on_the_mm_wide_lock() -> None:
    o = _outcome()
    checks = {c.metric: c for c in o.checks}
    assert checks["ptl_wait_share.v3.12"].ok
    # a large speed-up (80.7x until session 16, 12.5x in 16-18, 10.3x in 19-20, 159.8x in 21 with the node check,
    # 261.8x in session 22, 34.1x in sessions 23-24, 100.6x since session 25's owner's window, 96.0x with the
    # rwsem's wait_lock in session 27, 96.9x with find_vma's shared mmap_cache in session 31: the band test below)
    assert checks["speedup"].simulated > 10.0
    a = o.arms["v3.12"]
    # the mechanism: the top profile line on v3.12 is the ticket spin loop
    assert a.profile[0]["symbol"] == "_raw_spin_lock"
    assert a.locks["&mm->page_table_lock"]["contentions"] > 100_000


@pytest.mark.slow
def test_split_pmd_ptl_pmd_lock_accounting() -> None:
    """Every THP fault and every __pte_alloc takes pmd_lock() once (c4088ebdca64) and counts one page table in
    mm->nr_ptes under it: mm-wide on v3.12, split on v3.13, where only __pmd_alloc still takes
    mm->page_table_lock. (Until session 16 the two arms also had the same VMA layout, so v3.13's two locks
    summed to v3.12's one; since the start-up order decides where each malloc lands, the arms' layouts, and
    so their page-table counts, may differ: 125,515 on v3.12 against 125,005 + 514 on v3.13.)"""
    o = _outcome()
    a, b = o.arms["v3.12"], o.arms["v3.13"]
    # since session 21 the node check's get_mempolicy takes the PMD lock too, once per 4 KiB address of each
    # THP (~64 M calls, most of them fast-forwarded, their lock counts extrapolated): every nr_ptes update is
    # made under it, and the check adds ~512 acquisitions per THP fault (tiny's exact counts:
    # tests/workloads/test_thp_memscale.py)
    pmd, nr = b.locks["ptlock_ptr(pmd page)"]["acquisitions"], b.locks["mm->nr_ptes"]["acquisitions"]
    assert nr >= b.vmstat["thp_fault_alloc"]
    assert 400 * b.vmstat["thp_fault_alloc"] < pmd - nr < 600 * b.vmstat["thp_fault_alloc"]
    assert 0 < b.locks["&mm->page_table_lock"]["acquisitions"] < 1024  # __pmd_alloc: ~1 per 1 GiB, 512 threads
    # v3.12: THP faults, __pte_alloc and __pmd_alloc all on the one lock (nr_ptes a plain counter under it)
    assert a.locks["&mm->page_table_lock"]["acquisitions"] >= a.vmstat["thp_fault_alloc"]


@pytest.mark.slow
def test_split_pmd_ptl_v313_is_not_spin_bound() -> None:
    """An expected failure in sessions 16-18 (main spawned the 512 threads in 5 ms and their first faults
    collapsed on page_table_lock in __pmd_alloc); since session 19's glibc pthread_create (main's write to
    each new stack queues behind the woken mallocs) the threads start one by one again (docs/locks.md)."""
    o = _outcome()
    checks = {c.metric: c for c in o.checks}
    a, b = o.arms["v3.12"], o.arms["v3.13"]
    assert checks["ptl_wait_share.v3.13"].ok
    assert b.profile[0]["symbol"] != "_raw_spin_lock"
    # contentions fall by more than an order of magnitude (2026-12-01: 124,306 -> 4,432, 28x); the wait
    # share, which is what the speed-up rests on, falls 3,000x (ptl_wait_share checks above)
    assert b.locks["ptlock_ptr(pmd page)"]["contentions"] < a.locks["&mm->page_table_lock"]["contentions"] / 10
    assert b.locks["&mm->page_table_lock"]["contentions"] < 100


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="out of its band since session 25: 96.9x against 18-72x (docs/locks.md)")
def test_split_pmd_ptl_speedup_in_band() -> None:
    """In its band in sessions 23-24 (34.1x: v3.12 921 s against 1,076 s published, v3.13 27.0 s against
    29.7 s): on the UV's inclusive L3 a storm is one forward per socket, not per waiter (docs/locks.md).
    Out since session 25, when the owner's window was made to end at the snoop (half the transfer), not
    when the data lands: v3.12 2,734.6 s, v3.13 27.18 s, 100.6x. The decision and the expectation (the
    v3.12 arm slows, the speed-up rises) were written before the run; the mechanism stays, the miss is
    reported (docs/locks.md, session 25). Session 27's rwsem wait_lock: v3.13 28.48 s, 96.0x (v3.12 unchanged).
    Session 31's find_vma cache (mm->mmap_cache, shared before v3.15): v3.12 2,733.1 s, v3.13 28.20 s, 96.9x.
    Strict: it fails loudly if the result comes back into the band.
    Before: 80.7x after issues 17/19, 12.5x in sessions 16-18, 10.3x in 19-20, 159.8x in 21, 261.8x in 22."""
    o = _outcome()
    assert 18.0 <= {c.metric: c for c in o.checks}["speedup"].simulated <= 72.0
    assert o.ok


def test_v313_note_names_each_page_table_lock() -> None:
    """The v3.13 line shows which lock the waiting is on: the split PMD locks, or mm->page_table_lock, which
    v3.13 still takes in __pmd_alloc (where the full-scale start-up collapses since session 16)."""
    from mmsim.experiments.exp_split_pmd import _eval_split_pmd
    from mmsim.experiments.run import RunSpec, run

    p = {"threads": "4", "bytes": "8m"}
    res = {k: run(RunSpec("thp_memscale", "tiny", k, params=p)) for k in ("v3.12", "v3.13")}
    _, notes = _eval_split_pmd(res)
    assert notes[1].startswith("v3.13: ") and "split ptlock_ptr(pmd page) " in notes[1]
    assert "&mm->page_table_lock (__pmd_alloc only) " in notes[1] and "contentions); top symbol " in notes[1]
    # v3.12's convoy line as perf c2c would show it: what the mm_struct line's writes met (tests/locks/
    # test_line_counters.py has the counts of a scripted sequence)
    assert notes[2].startswith("v3.12: its cache line (mm_struct's, with mmap_sem's count): ")
    assert "% queued behind earlier writes and their re-read storms, " in notes[2]
    assert "% completed in the writer's own window" in notes[2]
    assert " µs until its re-read: IPC " in notes[2] and ", published 0.041)" in notes[2]


@pytest.mark.slow
def test_split_pmd_ptl_reports_the_fast_modes_ci() -> None:
    """Both arms fast-forward the node check: each elapsed check carries its arm's 95% half-width and the
    speed-up the two in quadrature (relative), so a user sees how far sampling could have moved it."""
    o = _outcome()
    checks = {c.metric: c for c in o.checks}
    a, b = o.arms["v3.12"], o.arms["v3.13"]
    ea, eb = a.sim["elapsed_ci95_seconds"], b.sim["elapsed_ci95_seconds"]
    assert ea > 0 and eb > 0
    assert checks["elapsed_seconds.v3.12"].ci95 == ea
    assert checks["elapsed_seconds.v3.13"].ci95 == eb
    ta, tb = checks["elapsed_seconds.v3.12"].simulated, checks["elapsed_seconds.v3.13"].simulated
    assert checks["speedup"].ci95 == pytest.approx(ta / tb * math.hypot(ea / ta, eb / tb))
