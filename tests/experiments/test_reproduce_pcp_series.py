"""pcp-series (issue 19): six kernels of the PCP auto-tuning series on lmbench bw_unix -P 16, icelake-6338-2s."""

from __future__ import annotations

import pytest

from conftest import reproduce_once

# The checks that do not pass as the model stands (docs/pcp-series.md): the zone-lock share of base and p1
# is 20 points under the published one, as in pcp-free-high (p3's came into its +-10 points with the zone
# lines by layout, session 7). The p5 -> p7 miss-rate rise is a direction band that the model has no
# mechanism for: -0.08 points in session 7, +0.11 from session 8's lock changes, -0.12 since session 25's
# owner's window (5.69% -> 5.57%; published +2.6); +0.18 with session 28's zone->flags loads on allocation,
# -0.004 once the free path's load was added too (docs/pcp-series.md): out again, and listed (-0.10 since session
# 29's qspinlock hand-off; -0.05 with session 30's split levels). p3's zone-lock share left its band with that
# hand-off too: 11.7% -> 10.8%, the band from 11.2% (docs/pcp-series.md, session 29), and came back into it with
# expand()'s split-level instructions (session 30): 10.8% -> 11.5%. Session 35 (a spinner's PAUSE before its
# re-read, docs/locks.md) moved the p5 -> p7 rise from -0.05 to +0.04 points: in its direction band, by the same
# sign flips as before (the model still has no mechanism for the published +2.6), so it leaves this list.
KNOWN_OUT = {"zone_lock_share.base", "zone_lock_share.p1"}


@pytest.mark.slow
def test_pcp_series_bands() -> None:
    o = reproduce_once("pcp-series")
    c = {ch.metric: ch for ch in o.checks}
    banded = [ch for ch in o.checks if ch.band is not None]
    assert len(banded) == 5 + 6 + 5 + 1
    for ch in banded:
        assert ch.ok is (ch.metric not in KNOWN_OUT), ch.to_dict()
    # the mechanism: free_high drains fall ~15x with 362d37a106dd, and alloc_factor (p5) takes more pages per
    # refill from the buddy lists
    assert c["free_high_ratio.p3"].simulated < 0.1
    assert c["alloc_zone_ratio.p5"].simulated > c["alloc_zone_ratio.p3"].simulated
    assert not o.ok
    assert any("simulated | published" in n for n in o.notes)
