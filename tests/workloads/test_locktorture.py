"""locktorture (kernel/locking/locktorture.c spin_lock writers): placement, the
single-writer cost breakdown, the mdelay fold, and the published-curve rows."""

from __future__ import annotations

import pytest

from mmsim.experiments.run import RunSpec, run
from mmsim.machine import get_machine
from mmsim.native.locks import CNA_STOCK, COLLAPSE_FACTOR, TOLERANCE_PCT, published_rows
from mmsim.workloads.locktorture import (
    LONG_DELAY_NS,
    LONG_ODDS,
    LOOP_NS,
    SECTION_CYCLES,
    SHORT_DELAY_NS,
    core_ns,
    spread_cpu,
)


def test_spread_placement_sockets_then_cores_then_siblings() -> None:
    m = get_machine("haswell-ex-4s")  # 4 sockets x 18 cores x 2 threads; CPU c's core is c % 72
    cpus = [spread_cpu(m, i) for i in range(144)]
    assert cpus[:6] == [0, 18, 36, 54, 1, 19]
    assert [m.cpu_socket(c) for c in cpus[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert cpus[71] == 71 and cpus[72] == 72  # the 73rd writer is the first SMT sibling (of CPU 0)
    assert sorted(cpus) == list(range(144))


def test_one_writer_pays_only_its_delays() -> None:
    """Alone, every line stays in the writer's cache after its first touch and the lock
    is never contended: each iteration is the loop's own LOOP_NS, the section's three
    64-bit divisions (SECTION_CYCLES at tiny's 1 GHz) plus udelay(2) when the 1-in-4 coin
    falls. So the window is exactly filled by those (to one iteration)."""
    r = run(RunSpec("locktorture", "tiny", "v5.7", params={"nwriters": "1", "duration_us": "2000"}))
    m = r.metrics
    ops = m["locktorture.writes"]
    udelays = round(m["locktorture.udelay_share"] * ops)
    busy = ops * (LOOP_NS + SECTION_CYCLES) + udelays * SHORT_DELAY_NS
    assert 2_000_000 - (LOOP_NS + SECTION_CYCLES + SHORT_DELAY_NS) - 500 <= busy <= 2_000_000  # 500: first touch
    assert 0.2 < m["locktorture.udelay_share"] < 0.3  # 1/4 (binomial, ~1,000 draws)
    # mdelay(100) at odds 1/(n * 200,000), folded in by renewal-reward
    per_op = 1 / m["locktorture.active_writes_per_second"] + LONG_DELAY_NS / LONG_ODDS / 1e9
    assert m["locktorture.writes_per_second"] == pytest.approx(1 / per_op, rel=1e-12)


def test_section_divisions_and_smt_sibling_speed() -> None:
    """74 cycles of divisions (32 + 2 x 21) in the section; a writer whose SMT sibling has a
    writer runs its core-bound time at smt_thread_speed. tiny: 1 GHz, 4 cores x 2 threads; five
    writers put the fifth on CPU 4, the sibling of writer 0's CPU 0."""
    assert SECTION_CYCLES == 74
    m = get_machine("tiny")
    placed = {spread_cpu(m, i) for i in range(5)}
    assert sorted(placed) == [0, 1, 2, 3, 4]
    speed = m.cost.smt_thread_speed
    slow = (round(LOOP_NS / speed), round(74 / speed))
    assert core_ns(m, 0, placed) == core_ns(m, 4, placed) == slow
    assert core_ns(m, 2, placed) == (LOOP_NS, 74)
    h = get_machine("haswell-ex-4s")  # 2.6 GHz: 74 cycles = 28 ns; writer 73 (CPU 72) is CPU 0's sibling
    assert core_ns(h, 0, {spread_cpu(h, i) for i in range(72)}) == (LOOP_NS, 28)
    assert core_ns(h, 0, {spread_cpu(h, i) for i in range(73)}) == (round(LOOP_NS / 0.65), round(28.46 / 0.65))


def test_contended_critical_section_overlaps_independent_misses() -> None:
    """Two writers on different sockets of tiny: the section's three independent
    first accesses (flag, stats, rand) cost the slowest transfer, not the sum, so
    a hand-off cycle is well under the serial sum of its transfers."""
    m = get_machine("tiny")
    r = run(RunSpec("locktorture", "tiny", "v5.7", params={"nwriters": "2", "duration_us": "2000"}))
    ns_per_op = 1e9 / r.metrics["locktorture.active_writes_per_second"]
    remote = m.xfer_ns(spread_cpu(m, 0), spread_cpu(m, 1), modified=True)
    # lower bound: the lock word and one section miss change hands each time
    assert ns_per_op > 2 * remote


def test_published_rows_verdicts_follow_the_tolerances() -> None:
    rows = published_rows(lambda s: None)
    assert len(rows) == len(CNA_STOCK)  # one ratio per thread count but 1, and the collapse point
    for r in rows[:-1]:
        assert r["reference_kind"] == "published"
        assert r["ok"] is (abs(r["error_pct"]) <= TOLERANCE_PCT)
    peak = rows[-1]
    assert peak["reference"] == 36.0
    assert peak["ok"] is (1 / COLLAPSE_FACTOR <= peak["simulated"] / 36.0 <= COLLAPSE_FACTOR)


def test_too_many_writers_is_a_user_error() -> None:
    from mmsim.errors import UserError

    with pytest.raises(UserError, match="nwriters"):
        run(RunSpec("locktorture", "tiny", "v5.7", params={"nwriters": "9"}))


def test_rand_state_is_shared_before_v5_7_and_private_from_it() -> None:
    """c0e1472d8078 (v5.7) gave each writer its own torture_random() state. Two writers on tiny (1 GHz:
    cycles = ns): private, every torture_random access hits its writer's L1, so the profile's
    torture_random time is exactly LOOP_NS per loop-head call (one per iteration, including the at most
    two iterations still open when the window ends); shared, the state's line moves between the two
    writers and that time is larger."""
    from mmsim.kernels import KERNELS

    assert KERNELS["v5.6"].policies["locktorture_rand"] == "shared"
    assert KERNELS["v5.7"].policies["locktorture_rand"] == "private"
    spent = {}
    for v in ("shared", "private"):
        r = run(RunSpec("locktorture", "tiny", "v5.7", policies={"locktorture_rand": v},
                        params={"nwriters": "2", "duration_us": "2000"}))
        writes = int(r.metrics["locktorture.writes"])
        cycles = next(p["cycles"] for p in r.profile if p["symbol"] == "torture_random")
        spent[v] = (cycles, writes)
    cycles, writes = spent["private"]
    assert cycles % LOOP_NS == 0 and writes <= cycles // LOOP_NS <= writes + 2
    cycles, writes = spent["shared"]
    assert cycles > LOOP_NS * (writes + 2)
