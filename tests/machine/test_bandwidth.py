"""Processor sharing of a node's bandwidth (machine/bandwidth.py), exact end times.

tiny: 10 GB/s (= bytes/ns) written per node, one core streams 10 GB/s. The capped cases use a
node of 10 GB/s with a core limit of 4 GB/s.
"""

from __future__ import annotations

from collections.abc import Generator
from types import SimpleNamespace
from typing import Any

import pytest

from mmsim.engine.core import PARK, Engine, Task
from mmsim.machine import get_machine
from mmsim.machine.bandwidth import MemoryBandwidth

TINY_CORE = 10.0


def _capped() -> Any:
    node = SimpleNamespace(write_bw_gbs=10.0, read_bw_gbs=20.0)
    return SimpleNamespace(cost=SimpleNamespace(core_clear_gbs=4.0), nodes=[node])


def _run(bw_machine: Any, streams: list[tuple[int, int]], core: float) -> tuple[dict[int, int], dict[int, int]]:
    """Tasks waiting for write streams (start ns, bytes) on node 0: their end times as the
    bandwidth model reports them, and when the engine resumed each task."""
    eng = Engine(0)
    bw = MemoryBandwidth(bw_machine, eng)
    ends: dict[int, int] = {}
    resumed: dict[int, int] = {}

    def body(i: int, task: Task, nbytes: int) -> Generator[Any, Any, None]:
        def done(end: int) -> None:
            ends[i] = end
            eng.wake(task, end - eng.now)

        bw.start_write(0, nbytes, core, eng.now, done)
        yield PARK
        resumed[i] = eng.now

    for i, (start, nbytes) in enumerate(streams):
        t = Task(i, f"s{i}")
        eng.start(t, body(i, t, nbytes), start)
    eng.run()
    return ends, resumed


def test_a_later_stream_slows_the_running_one() -> None:
    """A: 1000 B at 0 alone at 10 B/ns (500 B by 50); B starts at 50: 5 B/ns each, A ends at
    150; B has 500 B left, alone again at 10 B/ns: ends at 200. (The share fixed at the start
    would give A 100 and B 50 + 1000 / 5 = 250.)"""
    ends, resumed = _run(get_machine("tiny"), [(0, 1000), (50, 1000)], TINY_CORE)
    assert ends == {0: 150, 1: 200}
    assert resumed == ends


def test_equal_streams_started_together_end_together() -> None:
    ends, _ = _run(get_machine("tiny"), [(0, 1000)] * 4, TINY_CORE)
    assert ends == {0: 400, 1: 400, 2: 400, 3: 400}  # 4000 B at 10 B/ns


def test_core_limit_and_share() -> None:
    """Core limit 4 B/ns, node 10 B/ns. A 800 B and B 400 B at 0: 4 B/ns each (the share, 5,
    is above the limit); C 200 B at 50: 10/3 B/ns each. A and B have 200 B each by 50; C and B
    end together at 50 + 200 / (10/3) = 110; A, 400 B left, alone at 4 B/ns: 210."""
    ends, resumed = _run(_capped(), [(0, 800), (0, 400), (50, 200)], 4.0)
    assert ends == {0: 210, 1: 110, 2: 110}
    assert resumed == ends


def test_predicted_duration_counts_the_ends_of_active_streams() -> None:
    """write_ns at 50 next to A (1000 B from 0, 500 B left): 5 B/ns until A ends at 150, then
    10 B/ns for the last 500 B: ends at 200, 150 ns (+1, rounded up as before). A's end, in the
    sharing, moved from 100 to 150."""
    bw = MemoryBandwidth(get_machine("tiny"))
    assert bw.write_ns(0, 1000, TINY_CORE, 0) == 101
    assert bw.write_ns(0, 1000, TINY_CORE, 50) == 151
    assert bw.ends(0) == [pytest.approx(150.0), pytest.approx(200.0)]
    assert bw.active(0, 149) == 2 and bw.active(0, 151) == 1 and bw.active(0, 200) == 0


def test_occupy_registers_duration_times_rate_bytes() -> None:
    """A caller timed a stream at ``rate`` (5 B/ns next to one active stream) for 100 ns: 500 B.
    With A (1000 B from 0, 500 B left at 50) both end at 150."""
    bw = MemoryBandwidth(get_machine("tiny"))
    bw.write_ns(0, 1000, TINY_CORE, 0)
    assert bw.rate(0, TINY_CORE, 50) == 5.0
    bw.occupy(0, 50, 100, 250, 250)
    assert bw.ends(0) == [pytest.approx(150.0), pytest.approx(150.0)]
    assert bw.bytes_read[0] == 250 and bw.bytes_written[0] == 1250


def test_waiter_woken_at_its_moved_end() -> None:
    """A waits for 1000 B from 0; a predicted stream of 1000 B starts at 50 (another task's user
    pass): A's wake-up moves from 100 to 150."""
    eng = Engine(0)
    bw = MemoryBandwidth(get_machine("tiny"), eng)
    woke: list[int] = []
    a = Task(0, "a")

    def body_a() -> Generator[Any, Any, None]:
        bw.start_write(0, 1000, TINY_CORE, eng.now, lambda end: eng.wake(a, end - eng.now))
        yield PARK
        woke.append(eng.now)

    def body_b() -> Generator[Any, Any, None]:
        yield 50
        bw.write_ns(0, 1000, TINY_CORE, eng.now)

    eng.start(a, body_a())
    eng.start(Task(1, "b"), body_b())
    eng.run()
    assert woke == [150]


def test_one_stream_limit_per_machine() -> None:
    bw = MemoryBandwidth(get_machine("tiny"))
    with pytest.raises(ValueError, match="core_clear_gbs"):
        bw.write_ns(0, 1000, 5.0, 0)


def test_lateness_of_a_tracked_stream() -> None:
    """A pass timed at 10 B/ns alone for 100 ns (1000 B) from 0; a stream of 1000 B starts at
    50: the pass's last 500 B go at 5 B/ns, it ends at 150, 50 ns later than charged."""
    bw = MemoryBandwidth(get_machine("tiny"))
    rate = bw.rate(0, TINY_CORE, 0)
    sid = bw.occupy(0, 0, int(1000 / rate), 1000, 0, track=True)
    bw.write_ns(0, 1000, TINY_CORE, 50)
    assert bw.lateness(0, sid, 160) == 50
    assert bw.lateness(0, sid, 160) == 0  # forgotten
    # asked while still active: its end as the streams stand (150), at 120
    bw = MemoryBandwidth(get_machine("tiny"))
    sid = bw.occupy(0, 0, 100, 1000, 0, track=True)
    bw.write_ns(0, 1000, TINY_CORE, 50)
    assert bw.lateness(0, sid, 120) == 50
