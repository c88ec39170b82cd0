"""The LLC model (machine/llc.py) on ``tiny``: 1 MiB of L3 per socket = 256 sub-pages.

With no other traffic, after a 2 MiB clear in order ``o`` and a user pass
over sub-pages 0..511 in order, sub-page k's distance is the bytes
referenced since it was cleared: the sub-pages cleared after it plus the
sub-pages the pass touched before it.

* sequential clear: 511 - k cleared after it + k touched before = 511
  sub-pages > 256: every sub-page misses.
* target-last clear (target 0 → order 511 .. 0): k cleared after it + k
  touched before = 2k < 256 for k < 128: exactly 128 hits.
"""

from __future__ import annotations

import numpy as np
import pytest

from mmsim.machine import get_machine
from mmsim.machine.llc import SUBPAGE, CacheModel
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES, Counters
from mmsim.mm.memory import huge_page_order

CLEAR_NS = 100_000


def _pass(order_policy: str, other_rate: float = 0.0) -> tuple[int, Counters]:
    m = get_machine("tiny")
    counters = Counters(m.ncpus)
    cm = CacheModel(m, counters)
    if other_rate:
        # another CPU of socket 0 streams new data through the LLC during the whole test
        c = cm.of_cpu(1)
        c.advance(0)
        c.add_stream(0, other_rate * 10 * CLEAR_NS, 10 * CLEAR_NS)
    cm.fill(0, "page", 512, huge_page_order(order_policy, 0), CLEAR_NS, 0)
    misses, _ = cm.access(0, "page", 512, np.arange(512), 10.0, 100.0, CLEAR_NS)
    return misses, counters


def test_capacity_is_the_socket_l3() -> None:
    cm = CacheModel(get_machine("tiny"), Counters(8))
    assert len(cm.caches) == 2 and cm.caches[0].capacity == 1 << 20
    assert cm.of_cpu(0) is cm.of_cpu(1) is cm.of_cpu(4) and cm.of_cpu(2) is not cm.of_cpu(0)


def test_sequential_clear_misses_every_subpage() -> None:
    misses, c = _pass("sequential")
    assert misses == 512
    # 512 sub-pages cleared (all miss) + 512 accessed, 64 lines each
    assert c.perf[0][CACHE_REFERENCES] == 1024 * 64
    assert c.perf[0][CACHE_MISSES] == 1024 * 64


def test_target_last_turns_misses_into_hits_exactly() -> None:
    misses, c = _pass("target-last")
    assert misses == 512 - 128
    assert c.perf[0][CACHE_MISSES] == (512 + 384) * 64


def test_target_subpage_alone_hits_only_with_target_last() -> None:
    m = get_machine("tiny")
    for policy, want in (("sequential", 1), ("target-last", 0)):
        cm = CacheModel(m, Counters(m.ncpus))
        cm.fill(0, "p", 512, huge_page_order(policy, 0), CLEAR_NS, 0)
        misses, _ = cm.access(0, "p", 512, np.array([0]), 10.0, 100.0, CLEAR_NS)
        assert misses == want, policy


def test_other_cpus_traffic_shortens_the_reuse_window() -> None:
    alone, _ = _pass("target-last")
    # 40 bytes/ns from another CPU: 4 MB over the clear, about 2 sub-pages per sub-page cleared
    shared, _ = _pass("target-last", other_rate=40.0)
    assert shared > alone
    # a huge stream evicts everything but the target, written last and touched first (distance 0)
    flooded, _ = _pass("target-last", other_rate=10_000.0)
    assert flooded == 511


def test_clock_integrates_streams_exactly() -> None:
    cm = CacheModel(get_machine("tiny"), Counters(8))
    c = cm.of_cpu(0)
    c.advance(0)
    c.add_stream(0, 1000.0, 100)  # 10 B/ns for 100 ns
    c.add_stream(0, 500.0, 50)  # 10 B/ns for 50 ns
    assert c.advance(50) == pytest.approx(1000.0)
    assert c.advance(100) == pytest.approx(1500.0)
    assert c.advance(1000) == pytest.approx(1500.0) and c.rate == 0.0


def test_pruned_stamps_are_dropped_after_capacity_passes() -> None:
    cm = CacheModel(get_machine("tiny"), Counters(8))
    cm.fill(0, "old", 1, np.array([0]), 10, 0)
    for i in range(600):  # 600 sub-pages > 2 x 256 = twice the capacity
        cm.fill(0, ("new", i), 1, np.array([0]), 10, 10 * (i + 1))
    assert "old" not in cm.of_cpu(0).stamps
    assert SUBPAGE * 600 > 2 * cm.of_cpu(0).capacity
