"""autonuma-scan: the experiment's arms, and (slow) the full reproduction."""

from __future__ import annotations

import pytest

from mmsim.experiments.reproduce import EXPERIMENTS, _load, reproduce
from mmsim.kernels import resolve


def test_arms_differ_only_by_the_scan_check() -> None:
    _load()
    e = EXPERIMENTS["autonuma-scan"]
    a, b = e.arms["v5.4"], e.arms["v5.5"]
    assert (a.workload, a.machine, a.params, a.policies) == (b.workload, b.machine, b.params, b.policies)
    pa = resolve(a.kernel, list(a.patches), a.policies).policies
    pb = resolve(b.kernel, list(b.patches), b.policies).policies
    assert {k for k in pa if pa[k] != pb[k]} == {"numa_scan_check"}
    assert (pa["numa_scan_check"], pb["numa_scan_check"]) == ("page-first", "protnone-first")
    assert resolve("v5.5").patches[-1] == "a818f5363a0e"


@pytest.mark.slow
def test_reproduce_autonuma_scan() -> None:
    (o,) = reproduce(["autonuma-scan"])
    c = {x.metric: x for x in o.checks}
    # the mechanism: protnone-first reads exactly the skipped struct pages fewer
    a, b = o.arms["v5.4"].metrics, o.arms["v5.5"].metrics
    assert a["autonuma.scan_struct_page_refs"] - b["autonuma.scan_struct_page_refs"] == pytest.approx(
        b["autonuma.scan_protnone_skipped"], rel=0.2)
    assert c["scan_share_change_pct"].simulated <= 0.0
