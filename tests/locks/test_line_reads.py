"""CacheLine.read: a plain load by a CPU that does not spin on the line (``zone->flags`` beside
``zone->lock`` from v6.5: docs/pcp-free-high.md, session 28), and the PCP path's load of that line on
``tiny`` (transfers 0 -> 1 50 ns, 0 -> 2 200 ns, 0 -> 4 10 ns)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.locks.base import CacheLine
from mmsim.machine.model import Machine
from mmsim.mm.buddy import ZONE_FLAGS_LINE
from mmsim.mm.page_alloc import MIGRATE_MOVABLE
from mmsim.mm.system import System


def test_a_read_shares_the_line_and_the_next_write_takes_it_back(tiny: Machine) -> None:
    line = CacheLine(tiny, owner=0)
    assert line.read(2, 0) == 200  # HITM from the owner, CPU 0
    assert line.read(2, 0) == 0  # its copy is still valid
    assert line.read(1, 0) == 200  # a clean forward from the last reader, CPU 2 (socket 1 -> 0)
    assert line.read(0, 0) == 0  # the owner kept its copy
    # The owner's store: no longer only its line, an upgrade past the readers' copies, a transfer from the
    # last reader (CPU 1 -> CPU 0: 50 ns)
    assert line.write(0, 1000)[0] == 50
    assert (line.owner, line.transfers) == (0, 1)
    assert line.write(0, 2000)[0] == 0  # exclusive again: free
    assert line.read(1, 3000) == 50  # the copies were invalidated: HITM from CPU 0 again


def test_a_reader_that_writes_takes_the_line_from_the_other_holder(tiny: Machine) -> None:
    line = CacheLine(tiny, owner=0)
    assert line.read(2, 0) == 200
    # CPU 2 read last and now writes: its own copy is shared with the owner, CPU 0 (0 -> 2: 200 ns)
    assert line.rmw(2, 500) == 200
    assert line.owner == 2
    assert line.read(2, 1000) == 0


def test_a_read_waits_for_a_write_queued_on_the_line(tiny: Machine) -> None:
    line = CacheLine(tiny, owner=0)
    assert line.rmw(2, 0) == 200  # busy until 200
    assert line.read(1, 100) == 100 + 200  # waits 100 ns, then HITM from CPU 2 (socket 1 -> 0)


def _alloc_pending(s: System, cpu: int) -> int:
    """One order-0 PCP allocation on ``cpu``: the busy time its fast path charged (ns)."""
    out: list[int] = []

    def body(t: Task) -> Generator[Any, Any, None]:
        _pfn, pending = yield from s.page_alloc.alloc_pages_pfn(t, 0, 0, MIGRATE_MOVABLE)
        out.append(pending)

    t = Task(cpu, f"t{cpu}", cpu=cpu)
    s.sched.spawn(t, body(t))
    s.engine.run()
    return out[0]


def test_v6_6_allocations_load_the_zone_lock_line(tiny: Machine) -> None:
    """v6.6 (dcdfdd40fa82's layout): after CPU 0 refilled its PCP under zone->lock, CPU 2's allocation
    loads the lock's line from CPU 0 (200 ns more than with the load left out), and CPU 2's next one finds
    its copy; CPU 0's next zone->lock operation takes the line back from CPU 2."""
    s = System(tiny, resolve("v6.6"), 0)
    z = s.page_alloc.zones[0]
    assert s.page_alloc.flags_line == "lock"
    _alloc_pending(s, 0)  # refill (lock, unlock): CPU 0 owns the line
    line = z.lock.line
    assert line.owner == 0 and not line._rd
    a = _alloc_pending(s, 2)  # CPU 2 refills too (its own PCP), then loads flags: its own line by then
    assert line.owner == 2 and line._rd == set()  # the load after its own unlock: free
    b = _alloc_pending(s, 0)  # CPU 0: from its PCP, loads the line CPU 2 wrote last
    assert 2 not in line._rd and line._rd == {0}
    s2 = System(tiny, resolve("v6.6", [], {"zone_flags_line": "none"}), 0)
    _alloc_pending(s2, 0)
    a2 = _alloc_pending(s2, 2)
    b2 = _alloc_pending(s2, 0)
    assert (a - a2, b - b2) == (0, 200)


def test_v5_loads_the_last_free_area_line(tiny: Machine) -> None:
    """v5.0-v6.4: flags right after free_area[]: byte 1,144, the last free_area line, read (not the lock's)."""
    assert ZONE_FLAGS_LINE == 17
    s = System(tiny, resolve("v5.4"), 0)
    assert s.page_alloc.flags_line == "free_area"
    z = s.page_alloc.zones[0]
    _alloc_pending(s, 2)
    assert 2 in z.area_sh[ZONE_FLAGS_LINE]
    assert not z.lock.line._rd
    assert resolve("v4.18").get("zone_flags_line") == "none"


def _free_pending(s: System, cpu: int, pfn: int) -> int:
    """One order-0 free on ``cpu`` onto its PCP (no drain): the busy time it charged (ns)."""
    out: list[int] = []

    def body(t: Task) -> Generator[Any, Any, None]:
        out.append((yield from s.page_alloc.free_pages(t, pfn, 0)))

    t = Task(cpu, f"t{cpu}", cpu=cpu)
    s.sched.spawn(t, body(t))
    s.engine.run()
    return out[0]


def test_v6_6_frees_load_the_zone_lock_line(tiny: Machine) -> None:
    """v5.14+ (c49c2c47dab6): nr_pcp_high()'s test_bit(ZONE_RECLAIM_ACTIVE) on a PCP free. CPU 0 refilled
    (it owns the lock's line); CPU 2 frees a page it did not allocate: 200 ns more than without the load."""
    costs = []
    for over in ({}, {"zone_flags_free": "off"}):
        s = System(tiny, resolve("v6.6", [], over or None), 0)
        assert s.page_alloc.flags_on_free is not bool(over)
        _alloc_pending(s, 0)
        pfn = s.page_alloc.last_pfn
        costs.append(_free_pending(s, 2, pfn))
    assert costs[0] - costs[1] == 200
