"""The guard's wall-time estimate (mmsim.experiments.guard): the > 5 min refusal and its exemptions."""

from __future__ import annotations

import pytest

from mmsim.errors import UserError
from mmsim.experiments import guard
from mmsim.machine import get_machine
from mmsim.workloads.base import get_workload, resolve_params


def _thp_off(nbytes: str) -> dict[str, object]:
    return resolve_params(get_workload("thp_memscale"), {"threads": "72", "bytes": nbytes})


def test_fast_mode_estimate_is_the_fast_share_of_the_4k_events() -> None:
    m = get_machine("xeon-e5-2699v3-2s")
    p, pol = _thp_off("512m"), {"thp": "never"}
    exact = guard.estimate("thp_memscale", p, m, pol, exact=True)
    fast = guard.estimate("thp_memscale", p, m, pol)
    assert fast.events == exact.events  # events are those of exact simulation; only the wall differs
    # its 4 KiB faults (9.0 M x 6.1 events) and node-check calls (9.0 M x 5) dominate this arm: its fast wall is
    # the exact one at their fast shares (0.0204 each since session 35; the faults were 0.1004 at ratio 9), weighted by
    # their events (measured 2026-12-04: 9,116,532 events simulated, 92 s of CPU, against 6.43 M and 193 s)
    ev = 9_000_072 * guard.EVENTS_PER_UNIT["thp_memscale"][0], 9_000_072 * guard.CHECK_EVENTS
    share = (ev[0] * guard.fast_4k_share("thp_memscale", 9_000_072, 72)
             + ev[1] * guard.fast_4k_share("thp_memscale", 9_000_072, 72, check=True)) / sum(ev)
    assert fast.wall == pytest.approx(share * exact.wall, rel=0.01)


def test_fast_share_follows_the_fast_forward_settings() -> None:
    # issue 20's 72-thread arm: 72 x 24 edge faults + a 2,048-fault window + a fiftieth of the rest (the write
    # phase's own ratio, 49 since session 35) = 0.0204 (at ratio 9 it was 0.1004; measured then: 0.106 of the
    # exact events)
    assert guard.fast_4k_share("thp_memscale", 9_000_000, 72) == pytest.approx((1728 + 2048 + 8_996_224 / 50) / 9e6)
    # 3 threads x 6m on tiny: 4,398 faults, mostly inside the first 2,048-fault window and the edges
    assert guard.fast_4k_share("thp_memscale", 4398, 3) == pytest.approx((72 + 2048 + 2278 / 50) / 4398)
    assert guard.fast_4k_share("thp_memscale", 1000, 3) == 1.0  # too short to skip anything
    # the node check's calls skip at their region's own ratio (FF_CHECK_SKIP_RATIO 49): a fiftieth of the rest
    assert guard.fast_4k_share("thp_memscale", 9_000_000, 72, check=True) == pytest.approx(
        (1728 + 2048 + 8_996_224 / 50) / 9e6)
    assert guard.fast_4k_share("pmbench", 10**6, 8) == 1.0  # no fast mode


def test_long_run_refused_unless_forced_or_exact() -> None:
    m = get_machine("xeon-e5-2699v3-2s")
    p, pol = _thp_off("8g"), {"thp": "never"}
    est = guard.estimate("thp_memscale", p, m, pol)
    assert est.wall > guard.DEFAULT_MAX_WALL
    with guard.override("1e12", None, False), pytest.raises(UserError) as e:
        guard.check("thp_memscale", p, m, pol)
    assert "estimated wall time" in str(e.value) and "--force" in str(e.value)
    with guard.override("1e12", None, True):
        guard.check("thp_memscale", p, m, pol)  # --force
    with guard.override("1e12", None, False):
        guard.check("thp_memscale", p, m, pol, exact=True)  # --exact: asked for on purpose
    # issue 20's 72-thread x 512m THP-off arm: ~9.0 M faults, not refused in fast mode. Measured 2026-12-03:
    # 192 s of CPU (412 s before the functional take stopped costing its lines; 26-30 s in session 8, before
    # the struct page and zone lines): issue 20's 60 s target is not met (docs/performance.md, session 15)
    # Since session 21 the workload's default also checks every page's node (verify=page: 9.0 M get_mempolicy
    # calls more): estimated at 301 s in session 21 (the calls at the faults' skip ratio), 193 s since session
    # 22 (at their own, FF_CHECK_SKIP_RATIO); measured 92 s of CPU (docs/performance.md, session 22). The faults
    # alone (verify=none): 165 s
    no_check = resolve_params(get_workload("thp_memscale"), {"threads": "72", "bytes": "512m", "verify": "none"})
    assert guard.estimate("thp_memscale", no_check, m, pol).wall < guard.DEFAULT_MAX_WALL
    assert guard.estimate("thp_memscale", _thp_off("512m"), m, pol).wall < guard.DEFAULT_MAX_WALL
