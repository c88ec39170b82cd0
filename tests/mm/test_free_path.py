"""The v6.6 free path on ``tiny`` (issue 19): ``__free_one_page`` merges,
``buddy_merge_likely`` tail placement, the list neighbours ``list_del``
writes, and the exact ``struct page`` and ``zone->free_area`` lines (and
their cost by distance) charged per freed page for scripted sequences, and
the NR_FREE_PAGES folds.

tiny: CPUs 0, 1, 4, 5 on socket 0 (0/4 and 1/5 SMT siblings), 2, 3, 6, 7 on
socket 1; a line costs 10 ns from an SMT sibling, 50 ns within a socket, 200
ns across; zone 0's home CPU is 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.mm.buddy import (
    FA_NEXT,
    FA_NR_FREE,
    FA_OP,
    FREE_AREA_LINES,
    HEAD_NEXT,
    HEAD_PREV,
    MIGRATE_UNMOVABLE,
    VM_STAT_LINE,
)
from mmsim.mm.free_list import NIL, FreeList
from mmsim.mm.page_alloc import COLD, MAX_ORDER, MIGRATE_MOVABLE, PageAllocator, Zone
from mmsim.mm.system import System


def test_free_list_head_tail_and_neighbours() -> None:
    fl = FreeList()
    assert fl.add(5, 1) == NIL and fl.add(3, 2) == 5  # head inserts return the old first entry
    assert fl.add_tail(9, 3) == 5  # a tail insert returns the old last entry
    assert list(fl) == [3, 5, 9] and fl.first == 3 and fl.last == 9
    assert fl.remove(5) == (1, 3, 9)  # list_del: the stamp and both neighbours
    assert fl.remove(3) == (2, NIL, 9)  # the first entry's prev is the list head
    assert fl.pop_first() == (9, 3, NIL)
    assert not fl and len(fl) == 0


def _bare_zone(tiny: Machine) -> tuple[PageAllocator, Zone]:
    pa = System(tiny, resolve("v6.6"), 0).page_alloc
    z = pa.zones[0]
    z.pristine = z.pristine_end  # no MAX_ORDER block: only the blocks each test puts in
    for lists in z.free_area:
        for fl in lists:
            assert not fl
    z.free_pages = 0
    return pa, z


def _owner(z: Zone, pfn: int, cpu: int, dirty: bool = True) -> None:
    z.page_owner[pfn] = cpu << 1 | int(dirty)


def test_merge_writes_the_buddy_and_its_list_neighbours(tiny: Machine) -> None:
    pa, z = _bare_zone(tiny)
    fa = z.free_area
    for pfn in (11, 1, 21):  # order-0 list, first to last: 21, 1, 11
        fa[0][MIGRATE_MOVABLE].add(pfn, COLD)
    fa[1][MIGRATE_MOVABLE].add(6, COLD)
    _owner(z, 1, 5)  # the buddy: SMT sibling of CPU 1, 10 ns
    _owner(z, 21, 0)  # its prev: same socket, 50 ns
    _owner(z, 11, 2)  # its next: the other socket, 200 ns
    _owner(z, 2, 1)  # the failed order-1 buddy: CPU 1's own line, 0
    _owner(z, 6, 3, dirty=False)  # the order-1 list's first entry: clean on the other socket, 200
    # pfn 4 (the order+1 buddy buddy_merge_likely reads): no table remembers it, so it is in memory
    # (tiny: 100 ns from socket 0); free_area[0], [1]: home CPU 0, 50 each
    pa.lines = 0
    assert pa._free_one_page(z, 1, 0, 0, 7, MIGRATE_MOVABLE) == 1
    # merged to order 1 at pfn 0; 4 is not free at order 2, so it goes to the head of order 1
    assert list(fa[0][MIGRATE_MOVABLE]) == [21, 11]
    assert list(fa[1][MIGRATE_MOVABLE]) == [0, 6]
    # lines: buddy 1, its neighbours 21 and 11, failed buddy 2, order+1 buddy 4, old first 6:
    # 3 + 3 per merge (the freed page's own line is the caller's: free_pcppages_bulk)
    assert pa.lines == 6
    assert pa._cs == 10 + 50 + 200 + 0 + 100 + 200 + 50 + 50
    # every written line now belongs to CPU 1; a read one keeps its writer; pfn 4, read from memory,
    # is held clean by CPU 1
    assert [z.page_owner[p] for p in (1, 21, 11, 6)] == [1 << 1 | 1] * 4
    assert z.page_owner[2] == 1 << 1 | 1 and z.page_owner[4] == 1 << 1 | 0


def test_buddy_merge_likely_puts_the_block_at_the_tail(tiny: Machine) -> None:
    pa, z = _bare_zone(tiny)
    fa = z.free_area
    for pfn in (11, 21):  # order 0: 21 first, 11 last
        fa[0][MIGRATE_MOVABLE].add(pfn, COLD)
    fa[1][MIGRATE_MOVABLE].add(2, COLD)  # the order-1 buddy of the block {0, 1}
    pa.lines = 0
    # free pfn 0: buddy 1 is in use (no merge); the combined block {0, 1}'s buddy 2 is free at
    # order 1, so a merge is likely soon: add_to_free_list_tail, next to the old last entry 11
    assert pa._free_one_page(z, 4, 0, 0, 3, MIGRATE_MOVABLE) == 0
    assert list(fa[0][MIGRATE_MOVABLE]) == [21, 11, 0]
    # lines: failed buddy 1 (read), order+1 buddy 2 (read), old last entry 11 (written); no table
    # remembers them: in memory (100 ns), all three in vmemmap page 0 (struct pages 0-63), so the
    # L2 streamer covers the third after STREAM_START = 2 misses: an L2 hit (12 ns). free_area: the
    # tail insert writes head.prev (byte 24 of free_area[0], line 0) and nr_free (byte 96, line 1),
    # last written by the home CPU 0, an SMT sibling of CPU 4: 10 ns each
    assert pa.lines == 3 and pa.zone_lines == 2 and pa._cs == 2 * 100 + 12 + 2 * 10
    # the same free with 2 in use goes to the head: head.next (byte 16, line 0) and nr_free
    pa2, z2 = _bare_zone(tiny)
    for pfn in (11, 21):
        z2.free_area[0][MIGRATE_MOVABLE].add(pfn, COLD)
    pa2.zone_lines = 0
    assert pa2._free_one_page(z2, 4, 0, 0, 3, MIGRATE_MOVABLE) == 0
    assert list(z2.free_area[0][MIGRATE_MOVABLE]) == [0, 21, 11]
    assert pa2.zone_lines == 2 and pa2._cs == 2 * 100 + 12 + 2 * 10


def test_no_order_plus_one_read_at_max_order_minus_one(tiny: Machine) -> None:
    pa, z = _bare_zone(tiny)
    pa.lines = 0
    # an order-9 block whose buddy is in use: buddy_merge_likely returns false at
    # order >= MAX_ORDER - 1 without reading anything; the list is empty: no neighbour
    assert pa._free_one_page(z, 0, 512, MAX_ORDER - 1, 3, MIGRATE_MOVABLE) == 0
    assert pa.lines == 1 and list(z.free_area[MAX_ORDER - 1][MIGRATE_MOVABLE]) == [512]


def _run(s: System, cpu: int, body: Any) -> None:
    t = Task(9, "t", cpu=cpu)

    def gen() -> Generator[Any, Any, None]:
        yield from body(t)

    s.sched.spawn(t, gen())
    s.engine.run()


def test_pcp_drain_lines_per_page(tiny: Machine) -> None:
    s = System(tiny, resolve("v6.6"), 0)
    pa = s.page_alloc
    z = pa.zones[0]
    # CPU 5 takes pfns 0 and 1 from the buddy lists (the order-10 block at 0 splits: 2, 4, ...,
    # 512 stay free at orders 1..9); CPU 1 (5's SMT sibling) has them on its PCP, 0 the oldest.
    assert pa._rmqueue_smallest(z, 5, 0, MIGRATE_MOVABLE) == (0, COLD)
    assert pa._rmqueue_smallest(z, 5, 0, MIGRATE_MOVABLE) == (1, COLD)
    pa._cs = 0.0
    pcp = pa.pcps[1][0]
    pcp.lists[MIGRATE_MOVABLE] = deque([(0, 4), (1, 5)])
    pcp.count = 2
    pa.lines = pa.zone_lines = 0
    _run(s, 1, lambda t: pa._free_pcppages_bulk(t, z, pcp, 2, MIGRATE_MOVABLE))
    # page 0: its own line, failed buddy 1, order+1 buddy 2 (free: to the tail of an empty list);
    # page 1: its own line and 10 merges (buddies 0, 2, 4, ..., 512, no list neighbours), order 10
    # reached: no buddy_merge_likely read
    assert pa.lines == 3 + 1 + 10
    assert dict(z.free_area[MAX_ORDER][MIGRATE_MOVABLE]) == {0: 5}
    assert z.free_pages == z.managed_pages
    # costs, all lines last written by CPU 5 (10 ns from CPU 1) unless CPU 1 took them since.
    # struct pages: page 0: own line, buddy 1, buddy 2 = 30; page 1: own line 10, buddy 0 (CPU 1
    # wrote it as page 0) 0, buddies 2, 4, ..., 512 9 x 10 = 100.
    # free_area lines (104 bytes per order; CPU 5's two allocations read or wrote lines 0-6, 8-17):
    # page 0's insert into the empty order-0 list: head.next/prev (line 0) and nr_free (line 1) = 20;
    # page 1's 10 deletions of an only entry (head.next, head.prev, nr_free) and its insert at
    # order 10, new lines per order 0..10: {} {2, 3} {4} {5, 6} {8} {9} {10, 11} {12} {13, 14}
    # {15, 16} {17} = 15 lines = 150. Path: 2 blocks x 80 + 10 merges x 40 cycles at 1 GHz.
    assert pa.cs_stats["free_pcppages_bulk"] == [1, 30 + 20 + 100 + 150 + 2 * 80 + 10 * 40]
    # free_area line accesses: 2 per op with both head pointers, 3 at orders 1 and 9 (the MOVABLE
    # head straddles two lines there): page 0's insert, page 1's 10 deletions and its insert
    assert pa.zone_lines == 2 + (2 + 3 + 7 * 2 + 3) + 2


@pytest.mark.parametrize(("order", "lines", "ns"), [(1, 1, 50), (3, 7, 50), (4, 15, 100)])
def test_compound_tails_outside_the_lock(tiny: Machine, order: int, lines: int, ns: int) -> None:
    pa = System(tiny, resolve("v6.6"), 0).page_alloc
    z = pa.zones[0]
    pa.lines = 0
    # free_pages_prepare on a block last prepared by the home CPU 0, from CPU 1 (same socket):
    # (1 << order) - 1 tail lines, 10 in flight at a time
    assert pa._tails(z, 64, order, 1) == ns
    assert pa.lines == lines
    assert pa._tails(z, 64, order, 1) == 0  # CPU 1 wrote them last


def test_free_area_lines_by_the_v6_6_layout() -> None:
    # struct free_area: 6 list heads of 16 bytes, then nr_free: 104 bytes per order, from a line
    assert FREE_AREA_LINES == 18
    assert FA_NEXT[0] == [0, 0, 0] and FA_NEXT[1] == [1, 1, 2]
    assert FA_OP[0][MIGRATE_MOVABLE][0] == (1,)  # a middle entry's list_del: nr_free only
    assert FA_OP[0][MIGRATE_MOVABLE][HEAD_NEXT] == (0, 1)
    # order 1 MOVABLE: head.next at byte 120 (line 1), head.prev at 128 (line 2), nr_free at 200
    assert FA_OP[1][MIGRATE_MOVABLE][HEAD_NEXT | HEAD_PREV] == (1, 2, 3)
    assert FA_OP[1][MIGRATE_MOVABLE][HEAD_PREV] == (2, 3)
    # order 3 UNMOVABLE: next at 312 (line 4), prev at 320 (line 5), nr_free at 408 (line 6)
    assert FA_OP[3][MIGRATE_UNMOVABLE][HEAD_NEXT] == (4, 6) and FA_OP[3][MIGRATE_UNMOVABLE][HEAD_PREV] == (5, 6)
    assert FA_OP[MAX_ORDER][MIGRATE_MOVABLE][HEAD_NEXT] == (16, 17)


def test_empty_orders_scanned_are_read_once_per_cpu(tiny: Machine) -> None:
    pa, z = _bare_zone(tiny)
    z.free_area[2][MIGRATE_MOVABLE].add(4, COLD)  # the only free block: order 2 at pfn 4
    pa.zone_lines = pa.lines = 0
    assert pa._rmqueue_smallest(z, 1, 0, MIGRATE_MOVABLE) == (4, COLD)
    # head.next of orders 0 and 1 read (lines 0, 1: home CPU 0, dirty: 50 each); order 2's only
    # entry taken (head.next/prev on line 3, nr_free on 4: 100); expand to orders 1 and 0, each
    # into an empty list: order 1 {1, 2, 3}: line 2 new (50), order 0 {0, 1}: both CPU 1's now.
    # struct pages: block 4, halves 6 and 5, remembered by no table: memory (100 ns) for the first
    # two, the third streamed (vmemmap page 0's third miss): an L2 hit, 12 ns
    assert pa.zone_lines == 2 + 2 + 3 + 2
    assert pa._cs == 2 * 50 + 100 + 50 + 2 * 100 + 12
    assert z.area_lines[0] == 1 << 1 | 1 and z.area_lines[3] == 1 << 1 | 1


def test_nr_free_pages_folds_past_the_threshold(tiny: Machine) -> None:
    pa, z = _bare_zone(tiny)
    t = pa._stat_threshold[0]
    assert t == 40  # calculate_normal_threshold: 2 x fls(8) x (1 + fls(1 GiB / 128 MiB)), <= 125
    pa._cs = 0.0
    pa._mod_free_pages(z, 1, t)  # |x| = t: stays in CPU 1's vm_stat_diff
    assert pa._stat_diff[1][0] == t and pa.stat_folds == 0 and pa._cs == 0
    pa._mod_free_pages(z, 1, 1)  # past it: zone->vm_stat and vm_zone_stat, last written by CPU 0
    assert pa._stat_diff[1][0] == 0 and pa.stat_folds == 1 and pa._cs == 2 * 50
    pa._mod_free_pages(z, 2, -(t + 1))  # CPU 2, the other socket: 200 each
    assert pa.stat_folds == 2 and pa._cs == 2 * 50 + 2 * 200


def test_own_line_costs_the_level_still_holding_it(tiny: Machine) -> None:
    """A struct page line CPU 1 touched last, by its reuse distance in CPU 1's byte clocks (tiny:
    L1d 32 KiB, L2 256 KiB at 12 ns, inclusive LLC 1 MiB 16-way at 40 ns, memory 100 ns)."""
    pa, z = _bare_zone(tiny)
    l2, l3 = pa.cache.l2.of_cpu[1], pa.cache.llc.of_cpu[1]
    assert pa._line(z, 100, 1, True) == 100  # no table remembers it: memory
    kib = 1024
    for d2, d3, ns in [(16 * kib, 16 * kib, 0),  # within an L1d's worth: inside the path instructions
                       (128 * kib, 128 * kib, 12),  # L1d evicted, L2 holds it
                       (512 * kib, 128 * kib, 40),  # L2 evicted; the LLC (Poisson(2) <= 15 ways: 1)
                       (512 * kib, 64 * 1024 * kib, 100)]:  # past the LLC's horizon: memory
        pa._end_section()
        l2._clock += d2
        l3._clock += d3
        assert pa._line(z, 100, 1, True) == ns
    assert pa._line(z, 100, 1, False) == 0  # just touched


def test_streamer_covers_a_vmemmap_page_after_two_misses(tiny: Machine) -> None:
    pa, z = _bare_zone(tiny)
    # three lines of vmemmap page 2 (struct pages 128-191), descending: memory, memory, then the
    # streamer's (STREAM_START = 2) prefetch into the L2
    assert [pa._line(z, p, 0, False) for p in (190, 150, 130)] == [100, 100, 12]
    # 32 other pages' first misses push page 2 out of the streamer's 32 trackers
    assert [pa._line(z, (10 + i) << 6, 0, False) for i in range(32)] == [100] * 32
    assert pa._line(z, 131, 0, False) == 100
    assert pa._line(z, 132, 0, False) == 100 and pa._line(z, 133, 0, False) == 12
    pa._end_section()  # the stream state does not outlive a zone->lock section
    assert pa._line(z, 134, 0, False) == 100


def test_watermark_reads_order_0_are_not_modelled(tiny: Machine) -> None:
    """``zone_watermark_fast`` (v6.6): an order-0 request reads zone->vm_stat[NR_FREE_PAGES] and passes
    the fast check. Not modelled (reverted in session 11: it moves the fast-forward sampler's phase)."""
    pa, z = _bare_zone(tiny)
    pa.zone_lines = 0
    assert pa._watermark_lines(z, 1, 0) == 0 and pa.zone_lines == 0


def test_watermark_reads_scan_nr_free_up_to_a_non_empty_list(tiny: Machine) -> None:
    """``__zone_watermark_ok`` for order 3 with the only free block at order 5 (MOVABLE): vm_stat
    (line 18), nr_free of orders 3 (byte 408: line 6), 4 (512: line 8) and 5 (616: line 9), then
    order 5's head.next of UNMOVABLE (520: line 8) and MOVABLE (536: line 8), non-empty: 4 lines."""
    pa, z = _bare_zone(tiny)
    z.free_area[5][MIGRATE_MOVABLE].add(32, COLD)
    assert FA_NR_FREE[3] == 6 and FA_NR_FREE[4] == 8 and FA_NR_FREE[5] == 9 and FA_NEXT[5][:2] == [8, 8]
    pa.zone_lines = 0
    assert pa._watermark_lines(z, 1, 3) == 4 * 50
    assert pa.zone_lines == 4
    # a lock holder's later write to a line the reader took pays a HIT from the reader: CPU 5
    # (CPU 1's SMT sibling) writes order 4's nr_free line, 10 ns from CPU 1
    assert pa._area_op(z, 5, (FA_NR_FREE[4],)) == 10


def test_allocation_charges_the_watermark_reads_outside_the_lock(tiny: Machine) -> None:
    """An order-3 allocation from an empty PCP: the reads of zone_watermark_fast are charged to
    get_page_from_freelist, not to the rmqueue_bulk section."""
    s = System(tiny, resolve("v6.6"), 0)
    pa = s.page_alloc
    z = pa.zones[0]
    pa.zone_lines = 0
    wm_lines = [0]
    orig = pa._watermark_lines

    def counted(zz: Zone, cpu: int, order: int) -> float:
        before = pa.zone_lines
        ns = orig(zz, cpu, order)
        wm_lines[0] += pa.zone_lines - before
        return ns

    pa._watermark_lines = counted  # type: ignore[method-assign, assignment]
    _run(s, 1, lambda t: _alloc(pa, t, 3))
    # vm_stat, nr_free of orders 3 .. 10 (lines 6, 8, 9, 11, 12, 14, 16, 17), order 10's pristine
    # MOVABLE head.next of UNMOVABLE (line 16) and MOVABLE (line 16): 9 lines
    assert wm_lines[0] == 9
    assert z.area_lines[FA_NR_FREE[3]] >> 1 == 1


def _alloc(pa: PageAllocator, t: Task, order: int) -> Generator[Any, Any, None]:
    _pfn, pending = yield from pa.alloc_pages_pfn(t, 0, order, MIGRATE_MOVABLE)
    if pending:
        yield pending


def test_a_shared_zone_line_is_read_again_from_the_readers_own_cache(tiny: Machine) -> None:
    """Zone.area_sh: CPUs that read a free_area / vm_stat line keep valid copies until a write."""
    pa, z = _bare_zone(tiny)
    ln = (VM_STAT_LINE,)
    assert pa._area_op(z, 1, ln, False) == 50  # dirty at the home CPU 0: a HITM in the socket
    assert pa._area_op(z, 2, ln, False) == 200  # the other socket, from the forwarder CPU 1
    assert pa._area_op(z, 1, ln, False) == 0  # CPU 1 still holds its copy (just touched): no transfer
    assert set(z.area_sh[VM_STAT_LINE]) == {1, 2}
    assert pa._area_op(z, 5, ln, True) == 200  # a write: from the forwarder CPU 2, every copy invalidated
    assert set(z.area_sh[VM_STAT_LINE]) == {5}
    assert pa._area_op(z, 1, ln, False) == 10  # CPU 1's copy is gone: from CPU 5, its SMT sibling


def _legacy_take(pa: PageAllocator, order: int, count: int, cpu: int) -> list[int]:
    """Blocks taken one ``__rmqueue`` at a time with every line's cost computed (and dropped), as
    ``take_functional`` did before session 15."""
    saved, got = pa._cs, []
    for _ in range(count):
        r = pa._rmqueue(pa._pick(0, order), cpu, order, MIGRATE_MOVABLE)
        assert r is not None
        got.append(r[0])
    pa._cs = saved
    return got


@pytest.mark.parametrize("count", [300, 1500, 5000])
def test_functional_take_leaves_the_line_state_a_simulated_take_leaves(tiny: Machine, count: int) -> None:
    """A fast-forward skip's take (``take_functional``, its loop ``_rmqueue_fn``) computes no line cost, but
    every struct page and free_area line ends with the owner, the byte-clock stamps and the sharers the same
    takes leave when their cost is computed; the free lists and counters are the same too. 300 pages: inside
    one split block; 1,500: a bulk MAX_ORDER block, then singles; 5,000: several of each."""
    a, b = (System(tiny, resolve("v6.6"), 0).page_alloc for _ in range(2))
    for pa in (a, b):
        _legacy_take(pa, 0, 70, 1)  # CPU 1 took some first: the lines are not all cold
        _legacy_take(pa, 2, 5, 5)
    pfns: list[int] = []
    a.take_functional(0, 0, count, cpu=2, pfns=pfns)
    want: list[int] = []
    if count < 1 << MAX_ORDER:  # no bulk MAX_ORDER take: block by block with every cost computed
        want = _legacy_take(b, 0, count, 2)
    else:  # take_functional's own bulk takes, the rest one __rmqueue each (its loop _rmqueue_fn off)
        b._rmqueue_fn = lambda *args: []
        b.take_functional(0, 0, count, cpu=2, pfns=want)
    assert len(pfns) == count and pfns == want
    za, zb = a.zones[0], b.zones[0]
    assert list(za.page_owner.items()) == list(zb.page_owner.items())  # owners, in eviction order
    assert za.page_at == zb.page_at
    assert za.area_lines == zb.area_lines and za.area_at == zb.area_at and za.area_sh == zb.area_sh
    assert [[list(fl) for fl in lists] for lists in za.free_area] == \
        [[list(fl) for fl in lists] for lists in zb.free_area]
    assert (za.free_pages, a.lines, a.zone_lines) == (zb.free_pages, b.lines, b.zone_lines)
    assert a._fn is None and a._cs == b._cs
    assert len(za.page_owner) == za.owner_cap  # tiny's table holds 256 lines: every case evicts


def test_a_functional_take_leaves_the_pcp_pages_lines_as_the_cpus_last_refill(tiny: Machine) -> None:
    """Session 33: a skip's take writes every skipped page's struct page line, more than ``owner_cap`` (the
    pages the LLC holds) once a skip is long; it used to push the lines of the pages on the taking CPU's PCP
    list out of ``page_owner``, so the first allocations after the skip paid a memory miss each. The skipped
    faults would have refilled that list, so its pages' lines are the CPU's newest writes after the take."""
    pa = System(tiny, resolve("v6.6"), 0).page_alloc
    z = pa.zones[0]
    pcp = pa.pcps[1][z.index]
    on_pcp = _legacy_take(pa, 0, 31, 1)  # CPU 1's last refill: 31 pages
    pcp.lists[MIGRATE_MOVABLE].extend((pfn, 0) for pfn in on_pcp)
    _legacy_take(pa, 0, 40, 2)  # another CPU's writes after it
    pa.take_functional(0, 0, 3 * z.owner_cap, cpu=1)  # a skip of three LLCs' worth of pages
    kk = (pa._l2c[1]._clock, pa._l3c[1].advance(pa._engine.now))
    newest = list(z.page_owner.items())[-len(on_pcp):]
    assert newest == [(pfn, 1 << 1 | 1) for pfn in on_pcp]
    assert all(z.page_at[pfn] == kk for pfn in on_pcp)
    assert len(z.page_owner) == z.owner_cap
    # CPU 2's PCP (empty) and the other CPUs' pages: only what the take itself wrote is left
    assert not any(owner >> 1 == 2 for owner in z.page_owner.values())
