"""autonuma-scan: the experiment's arms, and (slow) the full reproduction."""

from __future__ import annotations

import pytest

from conftest import reproduce_once
from mmsim.experiments.reproduce import EXPERIMENTS, _load
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
    ta, tb = e.arms["v5.4.tiering"], e.arms["v5.5.tiering"]
    assert (ta.params, ta.policies) == (tb.params, tb.policies)
    assert (a.policies["numa_balancing"], ta.policies["numa_balancing"]) == ("1", "2")
    # the LKP job (facts.md): 8 x pmbench -s13824 -m13824 -pnormal_ih -j1 -c -i -r80 900, eatmem 47G on node 1
    assert {k: a.params[k] for k in ("processes", "setsize", "mapsize", "pattern", "ratio", "cold", "initialize",
                                      "jobs", "cpu_node_bind", "eatmem", "eatmem_node", "duration")} == {
        "processes": "8", "setsize": "13824m", "mapsize": "13824m", "pattern": "normal_ih", "ratio": "80",
        "cold": "1", "initialize": "1", "jobs": "1", "cpu_node_bind": "even", "eatmem": "47g", "eatmem_node": "1",
        "duration": "900"}


@pytest.mark.slow
def test_reproduce_autonuma_scan() -> None:
    o = reproduce_once("autonuma-scan")
    c = {x.metric: x for x in o.checks}
    # the mechanism: protnone-first reads exactly the skipped struct pages fewer
    a, b = o.arms["v5.4"].metrics, o.arms["v5.5"].metrics
    assert a["autonuma.scan_struct_page_refs"] - b["autonuma.scan_struct_page_refs"] == pytest.approx(
        b["autonuma.scan_protnone_skipped"], rel=0.2)
    assert c["scan_share_change_pct"].ok  # the band, -35 ... -10
    assert a["pmbench.processes_started"] == 4  # the 4 bound to CPU-less nodes 2, 3 never start
    # task_scan_max: 60,000 ms / task_nr_scan_windows; the RSS is the 13.5 GiB map (54 windows of 256 MiB
    # exactly) plus the worker's stack top page (glibc allocate_stack, since session 19; 1111 before): 55
    assert a["autonuma.scan_period_ms.mean"] == 60000 // 55 == 1090.0
    assert a["autonuma.scan_ptes_present"] == b["autonuma.scan_ptes_present"]  # same scans, same PTEs
