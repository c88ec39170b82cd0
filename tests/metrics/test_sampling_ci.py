"""The fast mode's confidence interval (mmsim.metrics.sampling, docs/performance.md session 32): a group of
skips is as uncertain as the mean of its windows' rates, which may have long-range dependence."""

from __future__ import annotations

import math
import random

import pytest

from mmsim.metrics.counters import Counters
from mmsim.metrics.sampling import LRD_MIN, STEADY_TOL, FastForward, lrd_rel_se, t975, trend_rel


def test_independent_rates_average_as_one_over_sqrt_n() -> None:
    """Independent windows: the standard error of their mean is sd / sqrt(n) (the fitted slope is ~-1)."""
    rng = random.Random(1)
    n = 64
    rates = [100.0 * (1.0 + 0.03 * rng.gauss(0.0, 1.0)) for _ in range(n)]
    mu = sum(rates) / n
    sd = math.sqrt(sum((r - mu) ** 2 for r in rates) / (n - 1)) / mu
    se = lrd_rel_se(rates)
    assert 0.6 * sd / math.sqrt(n) < se < 1.6 * sd / math.sqrt(n)


def test_a_persistent_regime_does_not_average_out() -> None:
    """Two regimes, each holding for half of the windows (the long-range dependence of a convoy's order):
    block means do not converge, the slope is ~0, and the error of the mean stays near one window's spread,
    far above sd / sqrt(n)."""
    rng = random.Random(2)
    n = 64
    rates = [(103.0 if i < n // 2 else 97.0) + 0.3 * rng.gauss(0.0, 1.0) for i in range(n)]
    mu = sum(rates) / n
    sd = math.sqrt(sum((r - mu) ** 2 for r in rates) / (n - 1)) / mu
    se = lrd_rel_se(rates)
    assert se > 3 * sd / math.sqrt(n)
    assert se <= sd * 1.5


def test_a_constant_series_or_one_too_short_to_fit_has_no_estimate() -> None:
    assert lrd_rel_se([130.0] * 10) == 0.0
    assert lrd_rel_se([100.0, 104.0, 98.0, 103.0, 97.0]) == 0.0  # blocks of 2: only two


def _controller(skips: list[tuple[int, float, float, int, float]], stateless: bool = False) -> FastForward:
    ff = FastForward(lambda: 0, Counters(1), {}, 1, window_ops=8, skip_ratio=9.0, warm=0, tail=0)
    ff._skips = [(*k, stateless) for k in skips]
    return ff


def test_groups_add_in_quadrature_and_small_groups_count_linearly() -> None:
    """Fewer than LRD_MIN windows: their skips' half-widths, each at least STEADY_TOL of its skip, summed (no
    correlation can be fitted); groups (skip ratios) in quadrature; ``ci95_ns_since`` keeps the later skips."""
    one = _controller([(10, 9.0, 100.0, 1000, 0.0)])
    assert one.ci95_ns == pytest.approx(STEADY_TOL * 1000)
    two = _controller([(10, 9.0, 100.0, 1000, 50.0), (20, 9.0, 101.0, 1000, 5.0)])
    assert two.ci95_ns == pytest.approx(50.0 + STEADY_TOL * 1000)
    assert two.ci95_ns_since(15) == pytest.approx(STEADY_TOL * 1000)
    both = _controller([(10, 9.0, 100.0, 1000, 50.0), (20, 49.0, 100.0, 4000, 0.0)])
    assert both.ci95_ns == pytest.approx(math.hypot(50.0, STEADY_TOL * 4000))
    five = _controller([(i, 9.0, 100.0 + i, 1000, 1.0) for i in range(LRD_MIN - 1)])
    assert five.ci95_ns == pytest.approx((LRD_MIN - 1) * STEADY_TOL * 1000)


def test_a_group_of_windows_takes_its_mean_rates_error() -> None:
    """LRD_MIN or more windows: t(n-1) x the relative error of their mean x the group's skipped time, and never
    less than the skips' own half-widths in quadrature; where the skips change no state, plus the windows'
    trend x that time (session 37)."""
    rates = [100.0, 104.0, 98.0, 103.0, 97.0, 101.0]
    sk = [(i, 9.0, r, 1000, 1.0) for i, r in enumerate(rates)]
    ff = _controller(sk)
    assert ff.ci95_ns == pytest.approx(t975(5) * lrd_rel_se(rates) * 6000)
    # halves 100, 104, 98 and 103, 97, 101: means 100.667 and 100.333
    assert trend_rel(rates) == pytest.approx(abs(301.0 / 302.0 - 1.0))
    still = _controller(sk, stateless=True)
    assert still.ci95_ns == pytest.approx((t975(5) * lrd_rel_se(rates) + trend_rel(rates)) * 6000)
    quiet = _controller([(i, 9.0, 100.0, 1000, 30.0) for i in range(LRD_MIN)])  # identical rates, noisy windows
    assert quiet.ci95_ns == pytest.approx(math.sqrt(LRD_MIN) * 30.0)


def test_the_trend_is_how_far_the_later_half_moved_from_the_earlier() -> None:
    """Skips that change no state (the node check): a rate that drifts down 1 % over its windows and then
    holds (session 36's v3.13 probe: 429-433 ns per call, then 427.8) widens the CI by that drift over the
    skipped time, which the variance-time estimate of a settled series does not see; an odd count puts the
    middle window in the later half."""
    assert trend_rel([100.0, 100.0, 99.0, 99.0]) == pytest.approx(0.01)
    assert trend_rel([100.0, 99.0, 99.0]) == pytest.approx(0.01)
    assert trend_rel([100.0] * 9) == 0.0
    assert trend_rel([100.0]) == 0.0
    drifting = [100.0 - 0.1 * i for i in range(10)] + [99.0] * 10
    sk = [(i, 49.0, r, 10_000, 0.0) for i, r in enumerate(drifting)]
    ff = _controller(sk, stateless=True)
    without = t975(len(drifting) - 1) * lrd_rel_se(drifting) * 200_000
    assert ff.ci95_ns == pytest.approx(without + trend_rel(drifting) * 200_000)
    assert ff.ci95_ns - without == pytest.approx((1.0 - 99.0 / 99.55) * 200_000)
    # a region whose skips apply its state change follows the trend window by window: no term
    assert _controller(sk).ci95_ns == pytest.approx(without)


def test_a_stationary_series_widens_by_about_its_noise() -> None:
    """Without a trend the term is the noise of two half-means: the CI widens, but by about the standard error
    itself, not more (independent windows, 1 % spread)."""
    rng = random.Random(5)
    rates = [100.0 * (1.0 + 0.01 * rng.gauss(0.0, 1.0)) for _ in range(32)]
    se = lrd_rel_se(rates)
    assert trend_rel(rates) < 3 * se


def test_a_group_is_one_ratio_and_one_kind_of_region() -> None:
    """Skips of a region that changes no state and of one that does, at the same ratio, are two groups (in
    quadrature); a skip is of the first kind when any of its threads' regions is."""
    ff = FastForward(lambda: 0, Counters(1), {}, 2, window_ops=8, skip_ratio=49.0, warm=0, tail=0)
    ff.register(1, 100, 0)
    ff.register(2, 100, 0, start=0, skip_ratio=49.0, stateless=True)
    assert ff.stateless == {2}
    ff.register(2, 100, 0, start=200)
    assert not ff.stateless
    ff._skips = [(0, 49.0, 100.0, 1000, 0.0, False), (1, 49.0, 100.0, 1000, 0.0, True)]
    assert ff.ci95_ns == pytest.approx(math.hypot(STEADY_TOL * 1000, STEADY_TOL * 1000))
