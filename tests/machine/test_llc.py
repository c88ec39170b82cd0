"""The byte clock of one cache instance (machine/llc.py's SharedCache)."""

from __future__ import annotations

import numpy as np
import pytest

from mmsim.machine import get_machine
from mmsim.machine.hierarchy import CacheHierarchy
from mmsim.machine.llc import SUBPAGE, SharedCache
from mmsim.metrics.counters import Counters


def test_clock_integrates_streams_exactly() -> None:
    c = SharedCache(1 << 20, 64)
    c.advance(0)
    c.add_stream(0, 1000.0, 100)  # 10 B/ns for 100 ns
    c.add_stream(0, 500.0, 50)  # 10 B/ns for 50 ns
    assert c.advance(50) == pytest.approx(1000.0)
    assert c.advance(100) == pytest.approx(1500.0)
    assert c.advance(1000) == pytest.approx(1500.0) and c.rate == 0.0


def test_pruned_stamps_are_dropped_after_the_horizon_passes() -> None:
    h = CacheHierarchy(get_machine("tiny"), Counters(8))
    llc = h.of_cpu(0)
    h.fill(0, "old", 1, np.array([0]), 10, 0)
    n = int(2 * llc.horizon // SUBPAGE) + 1  # twice the distance no line survives
    for i in range(n):
        h.fill(0, ("new", i), 1, np.array([0]), 10, 10 * (i + 1))
    assert "old" not in llc.stamps
    assert llc.horizon > llc.capacity  # a 16-way LLC keeps some lines past its capacity
