"""clear-order: full published scale (72 processes, 64 GiB on xeon-e5-2699v3-2s) is slow; the
registration and the arms are checked fast."""

from __future__ import annotations

import pytest

from mmsim.experiments import reproduce as rp


def test_registered_with_arms_that_differ_only_by_the_patch() -> None:
    rp._load()
    e = rp.EXPERIMENTS["clear-order"]
    assert set(e.arms) == {"v4.13", "v4.14", "v4.13/4", "v4.14/4"}
    a, b = e.arms["v4.13"], e.arms["v4.14"]
    assert (a.workload, a.machine, a.params, a.policies) == (b.workload, b.machine, b.params, b.policies)
    assert a.params["nr_task"] == "72" and "size" not in a.params  # the case script's MemTotal / 2


@pytest.mark.slow
def test_clear_order_in_band_with_mechanism() -> None:
    (o,) = rp.reproduce(["clear-order"])
    checks = {c.metric: c for c in o.checks}
    assert o.ok, [c.to_dict() for c in o.checks if c.ok is False]
    assert 15.0 <= checks["throughput_change_pct"].simulated <= 45.0
    a, b = o.arms["v4.13"], o.arms["v4.14"]
    # the mechanism: fewer LLC misses for the same references; same faults and clears
    assert b.perf["cache-references"] == a.perf["cache-references"]
    assert b.perf["cache-misses"] < a.perf["cache-misses"]
    assert a.vmstat["thp_fault_alloc"] == b.vmstat["thp_fault_alloc"] > 30_000
    assert checks["throughput_change_pct.4_processes"].ok
