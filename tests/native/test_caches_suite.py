"""validate --suite caches (native/caches.py): the rows that run fast, and the counter-case."""

from __future__ import annotations

import pytest

from mmsim.machine import get_machine
from mmsim.native import caches as vc


def test_westmere_chase_plateaus_in_cycles() -> None:
    rows = vc.chase_rows("westmere-ex-4s", get_machine("westmere-ex-4s"), native=False)
    assert [r["quantity"] for r in rows] == ["chase.128K", "chase.4096K"]
    assert all(r["ok"] for r in rows), rows


def test_genoa_counter_case_moves_the_published_way() -> None:
    """9890ecab6ad9: sequential clearing cuts Genoa's (L2-event) miss rate to a small fraction; Ice Lake's
    (LLC-event) rate does not move; the clearing time is unchanged in the model (info row)."""
    rows = {(r["machine"], r["quantity"]): r for r in vc.counter_case_rows(lambda s: None)}
    ratio = rows[("genoa-9654-2s", "clear.llc_miss_rate.sequential/target-last")]
    assert ratio["ok"] and ratio["simulated"] < 0.05
    assert rows[("icelake-6338-2s", "clear.llc_miss_rate_change_points")]["simulated"] == 0.0
    assert rows[("genoa-9654-2s", "clear.bandwidth.sequential/target-last")]["ok"] is None


@pytest.mark.slow
def test_seed_rows_report_the_clear_order_counts() -> None:
    rows = {r["quantity"]: r for r in vc.seed_rows(lambda s: None)}
    assert rows["clear_order.ipc.v4.13"]["ok"] and rows["clear_order.ipc.v4.14"]["ok"]
    assert rows["clear_order.user_time_change_pct"]["simulated"] < 0
