"""stats: summaries, %change, LKP's range-gap rule, Welch's t-test, KPI directions — exact values."""

from __future__ import annotations

import math

import pytest

from mmsim.experiments import stats


def test_summary_sample_stddev() -> None:
    s = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.n, s.mean, s.min, s.max) == (4, 2.5, 1.0, 4.0)
    assert s.stddev == pytest.approx(math.sqrt(5 / 3))
    assert s.pct_stddev == pytest.approx(100 * math.sqrt(5 / 3) / 2.5)
    assert stats.summarize([7.0]).stddev == 0.0


def test_pct_change() -> None:
    assert stats.pct_change(100.0, 66.6) == pytest.approx(-33.4)
    assert stats.pct_change(0.0, 0.0) == 0.0
    assert stats.pct_change(0.0, 5.0) == math.inf


def test_lkp_rule_under_three_runs_needs_a_gap_wider_than_the_ranges() -> None:
    # 2 runs per arm: min_gap = max(len_a, len_b) * distance(1)
    assert stats.lkp_changed([10, 11], [13, 14])  # gap 2 > 1
    assert not stats.lkp_changed([10, 12], [12.5, 14.5])  # gap 0.5 < 2
    assert not stats.lkp_changed([10, 13], [12, 15])  # overlap
    assert stats.lkp_changed([10.0], [10.5])  # one run each: ranges 0, any gap counts (ratio 1.05 > 1.01)


def test_lkp_rule_three_runs_gap_over_half_the_median_distance() -> None:
    # mids 11 and 15, gap = 14 - 12 = 2 ... > (15 - 11) / 2 = 2? no (strict)
    assert not stats.lkp_changed([10, 11, 12], [14, 15, 16])
    # gap 14.5 - 12 = 2.5 > (15.5 - 11) / 2 = 2.25
    assert stats.lkp_changed([10, 11, 12], [14.5, 15.5, 16.5])
    # the mid is the middle element (LKP's "mean"), not the average: one far value does not move it
    assert stats.lkp_changed([10, 11, 12], [14.5, 15.5, 99])


def test_lkp_margin_cuts_outliers_only_from_32_runs() -> None:
    base = [10.0 + 0.01 * i for i in range(31)]
    b = [12.0 + 0.01 * i for i in range(32)]
    assert stats.sort_remove_margin(base) == base  # 31 >> 5 = 0
    assert not stats.lkp_changed(base[:30] + [12.5], b[:31]), "31 runs: the 12.5 stays and overlaps"
    assert stats.sort_remove_margin(base + [30.0]) == base[1:]  # 32 >> 5 = 1 cut from each end
    assert stats.lkp_changed(base + [12.5], b), "32 runs: the 12.5 is cut"


def test_lkp_ratio_floor_perf_and_other_metrics() -> None:
    assert not stats.lkp_changed([100.0] * 3, [100.5] * 3)  # ratio 1.005 <= 1.01
    assert stats.lkp_changed([100.0] * 3, [101.5] * 3)
    assert not stats.lkp_changed([100.0] * 3, [105.0] * 3, perf_metric=False)  # 1.05 <= 1.1 for vmstat & co
    assert stats.lkp_changed([100.0] * 3, [111.0] * 3, perf_metric=False)
    assert stats.lkp_changed([0.0] * 3, [1.0] * 3, perf_metric=False)  # from 0: ratio capped at MAX_RATIO


def test_welch_against_scipy_and_degenerate_cases() -> None:
    from scipy import stats as sps

    a, b = [1.0, 2.0, 3.0, 4.0], [3.0, 4.5, 5.0, 6.5]
    assert stats.welch_p(a, b) == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)
    assert stats.welch_p([1.0], [2.0]) == 1.0
    assert stats.welch_p([2.0, 2.0], [2.0, 2.0]) == 1.0
    assert stats.welch_p([2.0, 2.0], [3.0, 3.0]) == 0.0


def test_verdict_uses_kpi_direction() -> None:
    c = stats.change([100.0, 101, 99], [66.0, 67, 67.6], "vm-scalability.throughput")
    assert c.direction == 1 and c.significant and c.verdict == "regression"
    c = stats.change([100.0, 101, 99], [66.0, 67, 67.6], "thp_memscale.elapsed_seconds")
    assert c.direction == -1 and c.verdict == "improvement"
    c = stats.change([100.0, 101, 99], [100.0, 101, 99], "vm-scalability.throughput")
    assert not c.significant and c.verdict == ""


@pytest.mark.parametrize(("metric", "d"), [
    ("vm-scalability.throughput", 1), ("lmbench.bw_unix", 1), ("will-it-scale.per_process_ops", 1),
    ("lockstress.acquisitions_per_second", 1), ("perf-stat.instructions-per-cycle", 1),
    ("vm-scalability.median", 1), ("vm-scalability.time.user_time", -1), ("vm-scalability.workload", 0),
    ("pmbench.latency.ns.average", -1), ("pmbench.throughput.aps", 1), ("lmbench3.bw_unix.MB/sec", 1),
    ("thp_memscale.elapsed_seconds", -1), ("lockstress.mean_wait_ns", -1), ("perf-stat.cache-misses", -1),
    ("lock_stat.&mm->page_table_lock.contentions", -1), ("proc-vmstat.thp_fault_alloc", 0),
])
def test_direction_table(metric: str, d: int) -> None:
    assert stats.direction(metric) == d


def test_primary_kpi() -> None:
    vm = ["vm-scalability.median", "vm-scalability.nr_task", "vm-scalability.throughput",
          "vm-scalability.time.elapsed_time", "vm-scalability.workload"]
    assert stats.primary_kpi(vm) == "vm-scalability.throughput"
    assert stats.primary_kpi(["lockstress.elapsed_seconds", "lockstress.mean_wait_ns",
                              "lockstress.acquisitions_per_second"]) == "lockstress.acquisitions_per_second"
    assert stats.primary_kpi(["thp_memscale.elapsed_seconds"]) == "thp_memscale.elapsed_seconds"
