"""The guard's wall-time estimate (mmsim.experiments.walltime): the > 5 min refusal and its exemptions."""

from __future__ import annotations

import pytest

from mmsim.errors import UserError
from mmsim.experiments import guard
from mmsim.experiments.walltime import MAX_WALL_SECONDS, estimate_wall_seconds
from mmsim.machine import get_machine
from mmsim.workloads.base import get_workload, resolve_params


def _thp_off(nbytes: str) -> dict[str, object]:
    return resolve_params(get_workload("thp_memscale"), {"threads": "72", "bytes": nbytes})


def test_estimate_is_events_times_cost_per_event() -> None:
    assert estimate_wall_seconds("thp_memscale", 1e6, 0.0, exact=True) == pytest.approx(4.6)
    assert estimate_wall_seconds("thp_memscale", 1e6, 0.0, exact=False) == pytest.approx(4.6 * 0.11)
    assert estimate_wall_seconds("no-such-workload", 0.0, 1e6, exact=False) == pytest.approx(10.5)


def test_long_run_refused_unless_forced_or_exact() -> None:
    m = get_machine("xeon-e5-2699v3-2s")
    p, pol = _thp_off("8g"), {"thp": "never"}
    est = guard.estimate("thp_memscale", p, m, pol)
    assert est.wall_seconds > MAX_WALL_SECONDS
    with guard.override("1e10", None, False), pytest.raises(UserError) as e:
        guard.check("thp_memscale", p, m, pol)
    assert "estimated wall time" in str(e.value) and "--force" in str(e.value)
    with guard.override("1e10", None, True):
        guard.check("thp_memscale", p, m, pol)  # --force
    with guard.override("1e10", None, False):
        guard.check("thp_memscale", p, m, pol, exact=True)  # --exact: asked for on purpose
    # issue 20's 72-thread x 512m THP-off arm: ~9.0 M faults, within the limit in fast mode
    assert guard.estimate("thp_memscale", _thp_off("512m"), m, pol).wall_seconds < 60
