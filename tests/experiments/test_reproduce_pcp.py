"""pcp-free-high at published scale (16 pairs on icelake-6338-2s): a few seconds."""

from __future__ import annotations

import pytest

from conftest import reproduce_once
from mmsim.experiments.reproduce import Outcome


def _outcome() -> Outcome:
    """One run for both tests (~28 s each on session 24's VM): the session's shared run (conftest)."""
    return reproduce_once("pcp-free-high")


def test_pcp_free_high_mechanism_and_bands() -> None:
    o = _outcome()
    c = {ch.metric: ch for ch in o.checks}
    for name in ("bandwidth_change_pct", "zone_lock_spin_share.patched", "free_high_change_pct",
                 "llc_miss_rate.parent", "llc_miss_rate.patched"):
        assert c[name].ok, c[name].to_dict()
    a, b = o.arms["parent"], o.arms["patched"]
    # the mechanism: far fewer zone->lock acquisitions and PCP drains, spin share halved
    assert b.locks["&zone->lock"]["acquisitions"] * 3 < a.locks["&zone->lock"]["acquisitions"]
    assert b.counters["pcp_drain"] * 5 < a.counters["pcp_drain"]
    assert b.lock_wait_share("&zone->lock") <= 0.5 * a.lock_wait_share("&zone->lock")
    assert a.profile[1]["symbol"] == "native_queued_spin_lock_slowpath"
    # refills are the writer side and do not change
    assert a.counters["pcp_refill"] == b.counters["pcp_refill"]
    assert o.to_dict()["bands"]["zone_lock_spin_share.parent"] == [0.3, 0.6]
    # SLUB (v6.6): every remote free of a head or sk_buff lands in the writer's frozen CPU slab
    # (a writer has at most 4 kmalloc-4k heads in flight, a slab holds 8): 3 slabs per writer,
    # none discarded, no n->list_lock
    for r in (a, b):
        assert r.counters["slab_new"] == 16 * 3 and r.counters["slab_discard"] == 0
        assert r.counters["slab_free_frozen"] == r.counters["slab_free_slowpath"] == 2 * 2 * 16 * 4 * 160
        assert r.locks["&n->list_lock"]["acquisitions"] == 0
    assert c["all_spinlock_spin_share.parent"].simulated >= c["zone_lock_spin_share.parent"].simulated


@pytest.mark.xfail(strict=True, reason="issue 19: the parent's zone->lock spin share is 23.2% since session 29's "
                   "qspinlock hand-off (26.7% before), below its 30-60% band (docs/pcp-free-high.md); "
                   "strict: passing means the doc must change")
def test_pcp_free_high_parent_spin_share_is_in_its_band() -> None:
    o = _outcome()
    c = {ch.metric: ch for ch in o.checks}
    assert c["zone_lock_spin_share.parent"].ok, c["zone_lock_spin_share.parent"].to_dict()
    assert o.ok
