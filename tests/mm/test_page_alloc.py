"""The page allocator on ``tiny``: zone_batchsize, PCP refills, zonelist fallback."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.metrics.events import VmEvent
from mmsim.mm.page_alloc import zone_batchsize
from mmsim.mm.system import System


@pytest.mark.parametrize(
    ("pages", "batch"),
    [
        # batch = rounddown_pow_of_two(b + b/2) - 1 with b = max(1, min(pages/1024, 128) / 4)
        (262_144, 31),  # 1 GiB: 256 → clamp 128 → 32 → 48 → 32 - 1
        (131_072, 31),  # 512 MiB: 128 (exactly 512 KiB, not clamped) → 32 → 31
        (65_536, 15),  # 256 MiB: 64 → 16 → 24 → 16 - 1
        (32_768, 7),  # 128 MiB: 32 → 8 → 12 → 8 - 1
        (8192, 1),  # 32 MiB: 8 → 2 → 3 → 2 - 1
        (4096, 0),  # 16 MiB: 4 → 1 → 1 → 1 - 1 (the kernel then uses max(1, batch))
        (100, 0),  # 0 → clamped up to 1 → 0
        (1 << 30, 31),  # huge zone: clamped at 128 → 31
    ],
)
def test_zone_batchsize(pages: int, batch: int) -> None:
    assert zone_batchsize(pages) == batch


def _alloc(s: System, cpu: int, node: int, order: int, n: int = 1) -> list[int]:
    got: list[int] = []
    t = Task(1, "t", cpu=cpu)

    def body() -> Generator[Any, Any, None]:
        for _ in range(n):
            got.append((yield from s.page_alloc.alloc_pages(t, node, order)))

    s.sched.spawn(t, body())
    s.engine.run()
    return got


def test_tiny_zones(tiny: Machine) -> None:
    pa = System(tiny, resolve("v3.13"), 0).page_alloc
    assert [z.managed_pages for z in pa.zones] == [262_144, 262_144]
    assert [(z.batch, z.high) for z in pa.zones] == [(31, 186), (31, 186)]
    assert pa.zonelist == [[0, 1], [1, 0]]
    # zone->lock homes: the first CPU of each node (0 and 2).
    assert [z.lock.line.home for z in pa.zones] == [0, 2]


def test_pcp_refill_once_per_batch(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    assert _alloc(s, 5, 0, 0, n=32) == [0] * 32
    pa = s.page_alloc
    # 31 pages per refill: pages 1 and 32 each refill → 62 taken, 30 left on CPU 5's PCP.
    assert pa.zones[0].free_pages == 262_144 - 62
    assert pa.pcp[5] == [30, 0]
    assert pa.zones[0].lock.stat.acquisitions == 2
    assert s.counters.vm_total()[VmEvent.PGALLOC_NORMAL] == 32
    assert pa.free_pages_count() + 32 == 2 * 262_144
    # Time: 32 × 60 (pcp path) + 2 × 31 × 150 (rmqueue_bulk) + zone lock line:
    # CPU 5 ← home 0 once (same socket, 50 ns), then it stays on CPU 5.
    assert s.engine.now == 32 * 60 + 2 * 31 * 150 + 50


def test_fallback_to_the_next_node_by_distance(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    s.page_alloc.zones[0].free_pages = 100  # node 0 cannot serve an order-9 block
    assert _alloc(s, 0, 0, 9) == [1]
    # zone 1's lock line comes from CPU 2 to CPU 0 (200 ns), then __rmqueue 150.
    assert s.engine.now == 350
    assert s.page_alloc.zones[1].free_pages == 262_144 - 512
    assert s.page_alloc.zones[0].free_pages == 100


def test_out_of_memory(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    for z in s.page_alloc.zones:
        z.free_pages = 511
    with pytest.raises(MemoryError, match="no node has 512 free pages"):
        _alloc(s, 0, 0, 9)


def _small_node_machine(tiny: Machine) -> Machine:
    # 16 MiB nodes: 4096 pages → zone_batchsize 0.
    nodes = tuple(dataclasses.replace(n, memory_gib=1 / 64) for n in tiny.nodes)
    return dataclasses.replace(tiny, name="tiny-16m", nodes=nodes)


def test_small_zone_pcp_batch_is_at_least_one(tiny: Machine) -> None:
    s = System(_small_node_machine(tiny), resolve("v3.13"), 0)
    assert s.page_alloc.zones[0].managed_pages == 4096
    _alloc(s, 0, 0, 0)
    assert s.page_alloc.pcp[0][0] == 0
    assert s.page_alloc.zones[0].free_pages == 4095
