"""The buddy allocator on ``tiny``: batch/high/watermarks, split and merge by
pfn, migratetype fallback, the cost of a zone->lock critical section,
zonelist fallback and conservation."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.machine.model import Machine
from mmsim.metrics.events import VmEvent
from mmsim.mm.page_alloc import (
    COLD,
    MAX_ORDER,
    MIGRATE_MOVABLE,
    MIGRATE_UNMOVABLE,
    min_free_kbytes,
    zone_batchsize,
    zone_highsize,
)
from mmsim.mm.system import System

ZONE_PAGES = 262_144  # tiny: two 1 GiB nodes


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


def test_zone_batchsize_doubled_cap() -> None:
    # d8a759b57035: the cap is 1 MiB = 256 pages → 64 → 96 → 64 - 1
    assert zone_batchsize(262_144, 1 << 20) == 63
    assert zone_batchsize(131_072, 1 << 20) == 31  # 128 pages, not capped


def test_watermarks_and_high_on_tiny_and_icelake() -> None:
    # tiny: 524288 pages = 2 GiB → int_sqrt(2097152 KiB × 16) = 5792 KiB → 1448 pages, 724 per zone;
    # low/high apart by max(724/4, 262144 × 10 / 10000 = 262).
    assert min_free_kbytes(524_288) == 5792
    s = System(get_machine("tiny"), resolve("v6.6"), 0)
    z = s.page_alloc.zones[0]
    assert (z.wmark_min, z.wmark_low, z.wmark_high) == (724, 986, 1248)
    # zone_highsize: 986 / 4 CPUs of the node = 246, at least 4 × 63.
    assert (z.batch, z.high) == (63, 252)
    assert zone_highsize(986, ZONE_PAGES, 63, 4, 0) == 252
    assert zone_highsize(986, ZONE_PAGES, 63, 4, 8) == ZONE_PAGES // 8 // 4
    # v3.13: batch 31, high = 6 × batch
    z = System(get_machine("tiny"), resolve("v3.13"), 0).page_alloc.zones[0]
    assert (z.batch, z.high) == (31, 186)
    # icelake: 256 GiB → min_free_kbytes 65536 → 8192 pages per zone; low = 8192 + 33554;
    # high = 41746 / 64 CPUs per node = 652.
    z = System(get_machine("icelake-6338-2s"), resolve("v6.6"), 0).page_alloc.zones[1]
    assert (z.wmark_min, z.wmark_low, z.batch, z.high) == (8192, 41746, 63, 652)


def test_tiny_zones(tiny: Machine) -> None:
    pa = System(tiny, resolve("v3.13"), 0).page_alloc
    assert [z.managed_pages for z in pa.zones] == [ZONE_PAGES, ZONE_PAGES]
    assert [(z.start_pfn, z.end_pfn) for z in pa.zones] == [(0, ZONE_PAGES), (ZONE_PAGES, 2 * ZONE_PAGES)]
    assert pa.zonelist == [[0, 1], [1, 0]]
    # zone->lock homes: the first CPU of each node (0 and 2).
    assert [z.lock.line.home for z in pa.zones] == [0, 2]
    assert [z.nr_free(MAX_ORDER) for z in pa.zones] == [256, 256]


def test_split_then_merge_back_exactly(tiny: Machine) -> None:
    s = System(tiny, resolve("v6.6"), 0)
    pa = s.page_alloc
    z = pa.zones[0]
    # __rmqueue_smallest(order 0): the first MAX_ORDER block (pfn 0) splits; the upper
    # half of each level stays free: pfn 512 at order 9, 256 at 8, ..., 1 at 0.
    assert pa._rmqueue_smallest(z, 0, 0, MIGRATE_MOVABLE) == (0, COLD)
    assert [dict(z.free_area[o][MIGRATE_MOVABLE]) for o in range(MAX_ORDER)] == [
        {1 << o: COLD} for o in range(MAX_ORDER)
    ]
    assert z.pristine == 1 << MAX_ORDER and z.free_pages == ZONE_PAGES - 1
    assert pa._rmqueue_smallest(z, 0, 0, MIGRATE_MOVABLE) == (1, COLD)
    assert pa._rmqueue_smallest(z, 0, 3, MIGRATE_MOVABLE) == (8, COLD)  # order 3 list had pfn 8
    assert pa.buddy_free_pages(z) == z.free_pages == ZONE_PAGES - 10
    # free pfn 1: its buddy 0 is in use, no merge.
    assert pa._free_one_page(z, 0, 1, 0, 5) == 0
    assert dict(z.free_area[0][MIGRATE_MOVABLE]) == {1: 5}
    # free pfn 0: merges 1 (order 0), 2 (1), 4 (2); stops at order 3 (8 is in use).
    assert pa._free_one_page(z, 0, 0, 0, 7) == 3
    assert dict(z.free_area[3][MIGRATE_MOVABLE]) == {0: 7}  # the newest stamp of the merged blocks
    assert not z.free_area[0][MIGRATE_MOVABLE] and not z.free_area[2][MIGRATE_MOVABLE]
    # free pfn 8 (order 3): merges all the way back to one MAX_ORDER block at pfn 0.
    assert pa._free_one_page(z, 0, 8, 3, 9) == MAX_ORDER - 3
    assert dict(z.free_area[MAX_ORDER][MIGRATE_MOVABLE]) == {0: 9}
    assert all(not z.free_area[o][MIGRATE_MOVABLE] for o in range(MAX_ORDER))
    assert z.free_pages == ZONE_PAGES == pa.buddy_free_pages(z)


def test_unmovable_steals_a_whole_max_order_block(tiny: Machine) -> None:
    pa = System(tiny, resolve("v6.6"), 0).page_alloc
    z = pa.zones[0]
    # No UNMOVABLE block: __rmqueue_fallback takes the largest MOVABLE one (a MAX_ORDER
    # block), both its pageblocks become UNMOVABLE, and it splits on UNMOVABLE lists.
    assert pa._rmqueue(z, 0, 3, MIGRATE_UNMOVABLE) == (0, COLD)
    assert z.pb_mt == {0: MIGRATE_UNMOVABLE, 1: MIGRATE_UNMOVABLE}
    assert [sorted(z.free_area[o][MIGRATE_UNMOVABLE]) for o in range(3, MAX_ORDER)] == [
        [1 << o] for o in range(3, MAX_ORDER)
    ]
    # the next UNMOVABLE allocation needs no fallback
    assert pa._rmqueue(z, 0, 3, MIGRATE_UNMOVABLE) == (8, COLD)
    assert z.pb_mt == {0: MIGRATE_UNMOVABLE, 1: MIGRATE_UNMOVABLE}
    # freeing goes to the pageblock's type
    pa._free_one_page(z, 0, 8, 3, COLD)
    assert 8 in z.free_area[3][MIGRATE_UNMOVABLE]


def _alloc(s: System, cpu: int, node: int, order: int, n: int = 1) -> list[int]:
    got: list[int] = []
    t = Task(1, "t", cpu=cpu)

    def body() -> Generator[Any, Any, None]:
        for _ in range(n):
            got.append((yield from s.page_alloc.alloc_pages(t, node, order)))

    s.sched.spawn(t, body())
    s.engine.run()
    return got


def test_critical_section_pays_the_lines_it_writes(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    assert _alloc(s, 5, 0, 9) == [0]
    # v3.13 has no PCP for order 9: zone->lock line from its home CPU 0 to CPU 5 (same
    # socket, 50 ns), __rmqueue 70 cycles, and the lines touched under the lock, all last
    # written by CPU 0 (50 ns each), except struct pages no table remembers: the block's (a
    # pristine block: no list neighbour) and the freed upper half's (the order-9 list was empty),
    # both from memory (100 ns; vmemmap pages 0 and 8, one miss each); free_area lines
    # (struct free_area is 104 bytes): the empty order-9 list's head.next read (line 14), the
    # order-10 head.next and nr_free written (lines 16, 17), then the order-9 head.prev (line 15;
    # head.next and nr_free are on lines 14 and 16, already CPU 5's). NR_FREE_PAGES -512 is past
    # the zone's stat_threshold: a fold into zone->vm_stat and vm_zone_stat (2 lines). After the
    # lock, prep_compound_page writes 511 tail pages, 10 at a time: 52 transfers of 50 ns. expand() splits
    # the order-10 block once: 22 cycles (mm/costs.py "expand/level").
    assert s.page_alloc._stat_threshold == [40, 40]  # 2 x fls(8 CPUs) x (1 + fls(1 GiB / 128 MiB))
    assert s.engine.now == 50 + 70 + 22 + 2 * 100 + (4 + 2) * 50 + 52 * 50
    assert s.page_alloc.stat_folds == 1
    assert dict(s.page_alloc.zones[0].free_area[9][MIGRATE_MOVABLE]) == {512: COLD}


def test_pcp_refill_once_per_batch(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    assert _alloc(s, 5, 0, 0, n=32) == [0] * 32
    pa = s.page_alloc
    # 31 pages per refill: pages 1 and 32 each refill → 62 taken, 30 left on CPU 5's PCP.
    assert pa.zones[0].free_pages == ZONE_PAGES - 62
    assert pa.pcp[5] == [30, 0]
    assert pa.zones[0].lock.stat.acquisitions == 2
    vm = s.counters.vm_total()
    assert vm[VmEvent.PGALLOC_NORMAL] == 32
    assert vm[VmEvent.PCP_REFILL] == 2
    assert pa.free_pages_count() + 32 == 2 * ZONE_PAGES


def test_fallback_to_the_next_node_by_distance(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    s.page_alloc.zones[0].free_pages = 1000  # below node 0's low watermark (986) for order 9
    assert _alloc(s, 0, 0, 9) == [1]
    assert s.page_alloc.zones[1].free_pages == ZONE_PAGES - 512
    assert s.page_alloc.zones[0].free_pages == 1000


def test_out_of_memory(tiny: Machine) -> None:
    s = System(tiny, resolve("v3.13"), 0)
    for z in s.page_alloc.zones:
        z.free_pages = 724 + 511  # min watermark + order 9 - 1: not above it
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


def test_small_fallback_blocks(tiny: Machine) -> None:
    pa = System(tiny, resolve("v6.6"), 0).page_alloc
    z, z1 = pa.zones
    for zz in (z, z1):
        zz.pristine = zz.pristine_end  # no MAX_ORDER block left: only the blocks put below
    fa = z.free_area
    fa[0][MIGRATE_MOVABLE][0] = COLD
    fa[3][MIGRATE_MOVABLE][8] = COLD
    z.free_pages = 1 + 8
    # UNMOVABLE order 0 with only MOVABLE blocks: the largest (order 3) is found; unmovable
    # requests steal, so its pageblock's free pages move (9 pages, under half of 512: the
    # pageblock stays MOVABLE), and the order-0 page at pfn 0 is taken from the UNMOVABLE list.
    assert pa._rmqueue(z, 0, 0, MIGRATE_UNMOVABLE) == (0, COLD)
    assert dict(fa[3][MIGRATE_UNMOVABLE]) == {8: COLD} and not fa[3][MIGRATE_MOVABLE]
    assert z.pb_mt == {}
    # MOVABLE order 1 with only UNMOVABLE blocks of orders 3 and 2: order 3 < pageblock_order/2
    # cannot steal, so the smallest fitting block (order 2) moves alone and splits.
    b = z1.start_pfn
    fa1 = z1.free_area
    fa1[3][MIGRATE_UNMOVABLE][b + 8] = COLD
    fa1[2][MIGRATE_UNMOVABLE][b + 600] = COLD
    z1.free_pages = 8 + 4
    assert pa._rmqueue(z1, 2, 1, MIGRATE_MOVABLE) == (b + 600, COLD)
    assert dict(fa1[1][MIGRATE_MOVABLE]) == {b + 602: COLD}
    assert dict(fa1[3][MIGRATE_UNMOVABLE]) == {b + 8: COLD}
    assert z1.free_pages == 8 + 2 == pa.buddy_free_pages(z1)
