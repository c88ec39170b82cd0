"""Repeated-run statistics as the kernel test robot reports them.

``summarize`` gives one arm's mean, standard deviation and %stddev;
``change`` compares two arms: %change, LKP's range-gap rule and Welch's
t-test. ``direction`` is the KPI table: for each metric, whether a higher
value is better (throughput) or worse (elapsed time, misses, lock waits), so
a change reads as an improvement or a regression.

LKP's rule (lkp-tests ``lib/stats.rb``, the check behind ``lkp compare``
and the robot's reports) does not test means: it asks whether the two arms'
*value ranges* are disjoint with a clear gap. As implemented here:

1. With 5 or more runs in an arm, its lowest and highest values are trimmed
   (one outlier each side); with fewer, nothing is trimmed.
2. The arms are changed when their trimmed ranges do not overlap and the gap
   between them is at least half the distance between the means
   (``gap >= |mean_b - mean_a| / 2``), so two wide, barely-separated clouds
   do not count.
3. A change smaller than ``noise_pct`` (default 1 %) of the base mean is
   never reported, whatever the ranges: a simulated run with no run-to-run
   noise would otherwise flag every last-digit difference.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NOISE_PCT = 1.0  # smallest |%change| ever called significant (LKP hides sub-1% changes too)
ALPHA = 0.05  # Welch's t-test level


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


def _trim(values: Sequence[float]) -> list[float]:
    s = sorted(values)
    return s[1:-1] if len(s) >= 5 else s


def lkp_changed(a: Sequence[float], b: Sequence[float], noise_pct: float = NOISE_PCT) -> bool:
    """LKP's range-gap rule (see the module docstring)."""
    ta, tb = _trim(a), _trim(b)
    ma, mb = math.fsum(a) / len(a), math.fsum(b) / len(b)
    if abs(pct_change(ma, mb)) < noise_pct:
        return False
    if min(tb) > max(ta):
        gap = min(tb) - max(ta)
    elif min(ta) > max(tb):
        gap = min(ta) - max(tb)
    else:
        return False
    return gap >= abs(mb - ma) / 2


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


def change(a: Sequence[float], b: Sequence[float], metric: str = "", noise_pct: float = NOISE_PCT) -> Change:
    sa, sb = summarize(a), summarize(b)
    return Change(sa, sb, pct_change(sa.mean, sb.mean), lkp_changed(a, b, noise_pct), welch_p(a, b),
                  direction(metric))


# -- KPI direction ------------------------------------------------------------------
# Like lkp-tests' per-metric "higher is better" list, but as patterns over
# mmsim's metric names: benchmark metrics by their own names, then the
# perf-stat / vmstat / profile / lock_stat families. First match wins.

_DIRECTIONS: list[tuple[str, int]] = [
    (r"throughput|bandwidth|\.bw(_|$)|per_second|per_sec|_ops$|\.ops$|per_process_ops|per_thread_ops|"
     r"instructions-per-cycle|ipc$|^vm-scalability\.median$", +1),
    (r"elapsed|latency|seconds|_time|wait|_ns$|_us$|contentions|cache-misses|miss-rate|context-switches|"
     r"cpu-migrations|cycles$|spin", -1),
]


def direction(metric: str) -> int:
    """+1 if a higher value of ``metric`` is better, -1 if lower is better, 0 if it is neither."""
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
