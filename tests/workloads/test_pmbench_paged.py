"""pmbench ``sampling=page``: exact page probabilities, and the same run as access by access on ``tiny``."""

from __future__ import annotations

import numpy as np
import pytest

from mmsim.errors import UserError
from mmsim.experiments.run import RunSpec, run
from mmsim.machine.model import Machine
from mmsim.workloads.pmbench import PatternGen


@pytest.mark.parametrize("pattern,shape", [("uniform", 1.0), ("normal", 150.0), ("normal", 1.00001),
                                           ("pareto", 1.161)])
def test_page_probabilities_are_the_distribution_draw_samples(pattern: str, shape: float) -> None:
    n = 1000
    pr = PatternGen(pattern, n, shape, np.random.default_rng(0)).probs()
    assert pr.shape == (n,) and pr.min() >= 0 and pr.sum() == pytest.approx(1.0)
    k = 400_000
    x = PatternGen(pattern, n, shape, np.random.default_rng(3)).draw(k)
    freq = np.bincount(x, minlength=n) / k
    # total variation distance between the empirical and the computed distribution: sampling noise only
    # (E|f - p| summed over n pages is about sqrt(2 n / (pi k)) = 0.028 for a uniform 1000 pages)
    assert 0.5 * np.abs(freq - pr).sum() < 0.03
    if pattern != "uniform":
        assert freq.max() == pytest.approx(pr.max(), rel=0.05)  # the hottest page's share


def test_linear_pattern_has_no_page_sampling(use_tiny_preset: Machine) -> None:
    with pytest.raises(UserError) as e:
        run(RunSpec("pmbench", "tiny", "v5.4", params={"mapsize": "4", "setsize": "4", "pattern": "linear",
                                                      "sampling": "page", "duration": "0.01"}))
    assert e.value.field == "-p sampling"


def _run(sampling: str, **extra: str) -> tuple[dict[str, float], dict[str, int]]:
    params = {"mapsize": "8", "setsize": "8", "duration": "0.25", "pattern": "normal", "shape": "300",
              "read_pct": "80", "sampling": sampling, **extra}
    r = run(RunSpec("pmbench", "tiny", "v5.4", params=params, policies={"thp": "never"}))
    return r.metrics, r.vmstat


def test_page_sampling_gives_the_access_by_access_results(use_tiny_preset: Machine) -> None:
    """Same faults (one first touch per page touched, a COW fault for a zero page written), same access
    count and latency within sampling noise and the LLC approximation. 0.25 s: past the cold-cache
    transient (the first ~0.1 s), which the page model's hit rate, capped by the accesses so far, only
    approximates. The access count's agreement is 5%: measured on 2026-12-01 (issue 19's free path), page
    mode gave -5 ... 0% against access mode over __rmqueue path lengths of 60 to 150 cycles (the fault
    cost shifts where the cold-cache transient ends); the 2% this test used to assert held by chance.
    Issue 15 gave the zero-page read fault its own path (do_anonymous_page/zero, 80 cycles): page mode
    then gave -0.2, -6.3, -5.8 and -2.9% at 50, 80, 150 and 400 cycles of it (access mode within 0.5%),
    so the agreement asserted is 7%."""
    a, va = _run("access")
    b, vb = _run("page")
    assert sum(v for k, v in b.items() if k.startswith("pmbench.hist.")) == b["pmbench.accesses"]
    assert b["pmbench.accesses"] == pytest.approx(a["pmbench.accesses"], rel=0.07)
    assert b["pmbench.latency_us"] == pytest.approx(a["pmbench.latency_us"], rel=0.03)
    assert vb["pgfault"] == pytest.approx(va["pgfault"], rel=0.02)
    # the histogram rows: LLC hits and misses land in the same log2 buckets
    rows_a = {k for k, v in a.items() if k.startswith("pmbench.hist.") and v > 0.01 * a["pmbench.accesses"]}
    rows_b = {k for k, v in b.items() if k.startswith("pmbench.hist.") and v > 0.01 * b["pmbench.accesses"]}
    assert rows_a == rows_b


def test_page_sampling_numa_balancing_run(use_tiny_preset: Machine) -> None:
    """A chunk ends where task_numa_work is due: the same scan, PTE updates and hinting faults as
    access by access (uniform over 1024 written pages: every marked page is touched again); deterministic."""
    def spec(sampling: str) -> RunSpec:
        return RunSpec("pmbench", "tiny", "v5.4",
                       params={"mapsize": "4", "setsize": "4", "duration": "0.3", "pattern": "uniform",
                               "read_pct": "0", "sampling": sampling},
                       policies={"numa_balancing": "1", "thp": "never", "numa_balancing_scan_delay_ms": "100",
                                 "numa_balancing_scan_period_min_ms": "100"})

    r = run(spec("page"))
    a = run(spec("access"))
    m, vm = r.metrics, r.vmstat
    assert m["autonuma.scans"] == a.metrics["autonuma.scans"] >= 1
    # all 1024 pages, marked once, and the worker's stack top page (main's write in glibc's allocate_stack);
    # the thread's own stack accesses are not modelled, so that page takes no hinting fault
    assert vm["numa_pte_updates"] == a.vmstat["numa_pte_updates"] == 1024 + 1
    assert vm["numa_hint_faults"] == a.vmstat["numa_hint_faults"] == 1024
    assert m["autonuma.scan_share_pct"] > 0
    assert m["pmbench.accesses"] == pytest.approx(a.metrics["pmbench.accesses"], rel=0.02)
    assert run(spec("page")).to_dict() | {"sim": None} == r.to_dict() | {"sim": None}
