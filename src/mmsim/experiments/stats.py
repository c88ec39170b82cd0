"""Repeated-run statistics as the kernel test robot reports them.

``summarize`` gives one arm's mean, standard deviation and %stddev;
``change`` compares two arms: %change, LKP's rule and Welch's t-test.
``direction`` is the KPI table: whether a higher value of a metric is better
(throughput) or worse (elapsed time, misses, lock waits), so a change reads
as an improvement or a regression.

LKP's rule, as lkp-tests implements it (``lib/stats.rb``
``__get_changed_stats``, ``sort_remove_margin``, ``get_min_mean_max``, and
``lib/changed_stat.rb`` ``LKP::ChangedStat#change?`` in the ``--distance``
mode the robot bisects with):

1. Each arm's values are sorted and ``n >> 5`` values (at most 3) are cut
   from each end: outliers only go once there are 32 runs or more.
2. ``min``, ``mid`` and ``max`` of what is left; LKP calls the middle
   element ``mean``, it is the median.
3. With 3 or more values in both arms: changed when the ranges are
   disjoint and the gap exceeds half the distance between the mids
   (``min_b > max_a && min_b - max_a > (mid_b - mid_a) / 2``, or the mirror).
   With fewer: changed when the gap exceeds ``distance`` × the wider range
   (``min_b - max_a > max(len_a, len_b) * distance``, or the mirror).
4. The change must also be large enough: ``ratio = max(mid) / min(mid)``
   (capped at 5) above 1.01 for performance metrics (the benchmark's own and
   ``perf-stat.*`` here) and above 1.1 for the rest (vmstat, lock_stat,
   profile lines, ...).

LKP's further per-family filters (``reasonable_perf_change?``: minimum
absolute deltas for lock_stat, vmstat, ...) are not applied: every flattened
metric is kept and shown with ``--all``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MARGIN_SHIFT = 5  # lkp-tests lib/stats.rb: cut n >> 5 values from each end ...
MAX_MARGIN = 3  # ... at most 3 (__get_changed_stats, for non-failure, non-latency stats)
MAX_RATIO = 5.0  # lib/stats.rb MAX_RATIO
PERF_RATIO = 1.01  # __get_changed_stats: `next unless ratio > 1.01`
OTHER_RATIO = 1.1  # ... `next unless ratio > 1.1 || perf_metric?(k)`
DISTANCE = 1.0  # `lkp compare -D N` for arms under 3 runs; mmsim's choice: the gap must exceed the wider range
ALPHA = 0.05  # Welch's t-test level
NOISE_PCT = 100 * (PERF_RATIO - 1)  # the smallest |%change| a Welch-only decision may call significant


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stddev: float  # sample standard deviation (n - 1); 0 for one run
    min: float
    max: float

    @property
    def pct_stddev(self) -> float:
        """stddev as % of the mean, as LKP prints it (``± 2%``)."""
        return 100.0 * self.stddev / abs(self.mean) if self.mean else 0.0


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("summarize: no values")
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return Summary(n, mean, math.sqrt(var), min(values), max(values))


def pct_change(a: float, b: float) -> float:
    """(b - a) / |a| in %; 0 when both are 0, ±inf when only a is 0."""
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return 100.0 * (b - a) / abs(a)


def sort_remove_margin(values: Sequence[float]) -> list[float]:
    """lib/stats.rb ``sort_remove_margin``: sorted, ``min(n >> 5, 3)`` values cut from each end."""
    v = sorted(values)
    margin = min(len(v) >> MARGIN_SHIFT, MAX_MARGIN)
    return v[margin:len(v) - margin] if margin else v


def lkp_changed(a: Sequence[float], b: Sequence[float], perf_metric: bool = True,
                distance: float = DISTANCE) -> bool:
    """LKP's rule (see the module docstring); ``a`` is the base arm."""
    sa, sb = sort_remove_margin(a), sort_remove_margin(b)
    min_a, mid_a, max_a = sa[0], sa[len(sa) // 2], sa[-1]
    min_b, mid_b, max_b = sb[0], sb[len(sb) // 2], sb[-1]
    if len(sa) < 3 or len(sb) < 3:
        min_gap = max(max_a - min_a, max_b - min_b) * distance
        changed = min_b - max_a > min_gap or min_a - max_b > min_gap
    else:
        changed = ((min_b > max_a and min_b - max_a > (mid_b - mid_a) / 2)
                   or (min_a > max_b and min_a - max_b > (mid_a - mid_b) / 2))
    if not changed:
        return False
    lo, hi = sorted((mid_a, mid_b))
    ratio = min(hi / lo, MAX_RATIO) if lo > 0 else MAX_RATIO
    return ratio > (PERF_RATIO if perf_metric else OTHER_RATIO)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's unequal-variance t-test.

    Defined here for the degenerate cases scipy returns NaN for: with one run
    per arm there is no variance estimate (p = 1, nothing can be concluded);
    with zero variance in both arms (a deterministic model) equal means give
    p = 1 and different means p = 0.
    """
    if len(a) < 2 or len(b) < 2:
        return 1.0
    if min(a) == max(a) and min(b) == max(b):
        return 1.0 if a[0] == b[0] else 0.0
    from scipy import stats

    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


@dataclass(frozen=True)
class Change:
    a: Summary
    b: Summary
    pct_change: float
    lkp: bool  # LKP's range-gap rule
    welch_p: float
    direction: int  # +1 higher is better, -1 lower is better, 0 unknown

    @property
    def welch(self) -> bool:
        return self.welch_p < ALPHA and abs(self.pct_change) >= NOISE_PCT

    @property
    def significant(self) -> bool:
        """Both tests agree: LKP's range gap and Welch's t-test (when it can decide)."""
        if self.a.n < 2 or self.b.n < 2:
            return self.lkp
        return self.lkp and self.welch

    @property
    def verdict(self) -> str:
        """``improvement`` / ``regression`` / ``change`` (no KPI direction) / ``""`` (not significant)."""
        if not self.significant:
            return ""
        if self.direction == 0:
            return "change"
        return "improvement" if (self.pct_change > 0) == (self.direction > 0) else "regression"


def change(a: Sequence[float], b: Sequence[float], metric: str = "", perf_metric: bool = True) -> Change:
    """Arm ``a`` (the base) against arm ``b``; ``perf_metric`` picks LKP's 1.01 (else 1.1) ratio floor."""
    sa, sb = summarize(a), summarize(b)
    return Change(sa, sb, pct_change(sa.mean, sb.mean), lkp_changed(a, b, perf_metric), welch_p(a, b),
                  direction(metric))


# -- KPI direction ------------------------------------------------------------------
# lkp-tests etc/index-perf-all.yaml (read by lib/stats.rb kpi_stat_direction):
# the benchmarks mmsim models, with LKP's sign (1 higher is better, -1 lower).
_LKP_INDEX_PERF: list[tuple[str, int]] = [
    (r"vm-scalability\.median", 1),
    (r"vm-scalability\.throughput", 1),
    (r"will-it-scale\..+_ops", 1),
    (r"will-it-scale\.scalability", 1),
    (r"lmbench3\..+\.MB/sec", 1),
    (r"pmbench\.latency\.ns\.average", -1),
    (r"pmbench\.throughput\.aps", 1),
]
# LKP has no direction for anything else ("undefined"); mmsim adds patterns
# over its own names (lockstress, thp_memscale, perf-stat, lock_stat, ...).
# First match wins.
_DIRECTIONS: list[tuple[str, int]] = [
    (r"throughput|bandwidth|\.bw(_|$)|MB/s|per_second|per_sec|_ops$|\.ops$|"
     r"instructions-per-cycle|ipc$", +1),
    (r"elapsed|latency|seconds|_time|wait|_ns$|_us$|contentions|cache-misses|miss-rate|context-switches|"
     r"cpu-migrations|cycles$|spin", -1),
]


def direction(metric: str) -> int:
    """+1 if a higher value of ``metric`` is better, -1 if lower is better, 0 if it is neither."""
    for pattern, d in _LKP_INDEX_PERF:
        if re.fullmatch(pattern, metric):
            return d
    for pattern, d in _DIRECTIONS:
        if re.search(pattern, metric):
            return d
    return 0


def kpi_rank(metric: str) -> tuple[bool, bool, bool, str]:
    """Sort key of benchmark metrics, headline first: throughput, other higher-is-better
    metrics, lower-is-better ones (elapsed time), then metrics without a direction."""
    d = direction(metric)
    return d == 0, "throughput" not in metric, d != 1, metric


def primary_kpi(metrics: Iterable[str]) -> str:
    """The workload's headline metric (e.g. ``vm-scalability.throughput``): the first by :func:`kpi_rank`."""
    return min(metrics, key=kpi_rank)
