"""kernel/sched/fair.c NUMA balancing arithmetic (v5.4) on ``tiny``."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_TABLE
from mmsim.mm.system import System
from mmsim.sched import numa_balancing as nb

MIB = 1 << 20
BASE = 1 << 32


def _mm(tiny: Machine, present_mib: int, **ov: str) -> tuple[System, MmStruct]:
    s = System(tiny, resolve("v5.4", overrides={"numa_balancing": "1", **ov}), seed=0)
    mm = MmStruct(s, home_cpu=0)
    pt = mm.pgtables
    for k in range(present_mib // 2):  # fully populated PTE tables
        slot = (BASE >> 21) + k
        pt.pmd[slot] = PMD_TABLE
        pt.pte_bitmap(slot)[:] = True
    return s, mm


def test_scan_period_bounds_follow_rss(tiny: Machine) -> None:
    s, mm = _mm(tiny, 64)  # below one 256 MB window
    assert nb.task_nr_scan_windows(s, mm) == 1
    assert nb.task_scan_min(s, mm) == 1000 and nb.task_scan_max(s, mm) == 60000
    s, mm = _mm(tiny, 1024)  # 4 windows: 1000/4 = 250 ms (floor 1000 / (2560/256) = 100 ms)
    assert nb.task_nr_scan_windows(s, mm) == 4
    assert nb.task_scan_min(s, mm) == 250 and nb.task_scan_max(s, mm) == 15000


def _task(s: System, mm: MmStruct, period: int) -> nb.NumaTask:
    nt = nb.init_task(s, Task(1, "t", cpu=0, mm=mm), mm)
    nt.scan_period_ms = period
    nt.scan_period_max_ms = nb.task_scan_max(s, mm)
    return nt


def test_update_task_scan_period(tiny: Machine) -> None:
    s, mm = _mm(tiny, 64)
    # private faults (ps_ratio 10 >= 7): slower by (10 - 7) slots of period / 10
    nt = _task(s, mm, 2000)
    nt.locality = [5, 5, 0]
    nb.update_task_scan_period(s, nt, mm, shared=0, private=10)
    assert nt.scan_period_ms == 2000 + 3 * 200 and nt.locality == [0, 0, 0]
    # shared and remote: faster by (7 - max(lr, ps)) slots, clamped to task_scan_min
    nt = _task(s, mm, 3000)
    nt.locality = [9, 1, 0]
    nb.update_task_scan_period(s, nt, mm, shared=9, private=1)
    assert nt.scan_period_ms == 3000 - 6 * 300
    nt = _task(s, mm, 1100)
    nt.locality = [10, 0, 0]
    nb.update_task_scan_period(s, nt, mm, shared=10, private=0)
    assert nt.scan_period_ms == 1000
    # no local and no shared faults, or failed migrations: double, up to the max
    nt = _task(s, mm, 40000)
    nt.locality = [3, 0, 0]
    nb.update_task_scan_period(s, nt, mm, shared=0, private=3)
    assert nt.scan_period_ms == 60000 and nt.locality == [3, 0, 0]


def test_task_numa_work_scans_256mb_of_updated_ranges_then_wraps(tiny: Machine) -> None:
    s, mm = _mm(tiny, 600)  # 300 PTE tables = 600 MiB populated
    vma = Vma(BASE, BASE + 600 * MIB)
    mm.vmas.append(vma)
    t = Task(1, "t", cpu=0, mm=mm)
    nb.init_task(s, t, mm)
    nb.init_task(s, Task(2, "sibling", cpu=2, mm=mm), mm)  # mm_users 2: no target node
    for slot in mm.pgtables.ptes:
        mm.pgtables.pte_nid[slot] = np.zeros(512, dtype=np.int16)
        mm.pgtables.protnone[slot] = np.zeros(512, dtype=bool)
        mm.pgtables.last_cpu[slot] = np.full(512, -1, dtype=np.int16)
        mm.pgtables.scan_ms[slot] = np.zeros(512)
    st = s.numa_mm[id(mm)]
    done: list[int] = []

    def body() -> Generator[Any, Any, None]:
        for k in range(3):
            s.engine.now = (k + 2) * 10**9
            st.next_scan_ns = 0
            done.append((yield from nb.task_numa_work(t, mm)))
            done.append(st.scan_offset - BASE if st.scan_offset else -1)
            done.append(st.scan_seq)

    s.sched.spawn(t, body())
    s.engine.run()
    # 256 MiB per call; the third call covers the last 88 MiB and wraps (numa_scan_seq += 1)
    assert done == [65536, 256 * MIB, 0, 65536, 512 * MIB, 0, 88 * 256, -1, 1]
    assert s.numa_stats["scans"] == 3


def test_task_tick_numa_waits_for_the_scan_delay(tiny: Machine) -> None:
    s, mm = _mm(tiny, 4)
    t = Task(1, "t", cpu=0, mm=mm)
    t.started_at = 0
    nb.init_task(s, t, mm)
    s.engine.now = 999_000_000
    assert not nb.task_tick_numa(s, t, mm)
    s.engine.now = 1_001_000_000
    assert nb.task_tick_numa(s, t, mm)
    assert t.data["numa"].scan_period_ms == 1000  # task_scan_start = task_scan_min without a NUMA group


def test_scan_share_counts_only_the_scanner(tiny: Machine) -> None:
    s = _mm(tiny, 2)[0]
    c = s.counters
    c.busy(0, "pmbench [user]", 900)
    c.busy(0, "change_pte_range", 60)
    c.busy(1, "change_prot_numa", 30)
    c.busy(1, "do_numa_page", 10)
    assert nb.scan_share(s) == 90 / 1000


def test_next_tick_ns_is_the_first_time_task_tick_numa_fires(tiny: Machine) -> None:
    """The bound a chunked workload ends its chunk at: task_tick_numa is False just before it, True at it,
    also when numa_next_scan is later than the task's own stamp."""
    s, mm = _mm(tiny, 4)
    t = Task(1, "t", cpu=0, mm=mm)
    t.started_at = 0
    nb.init_task(s, t, mm)
    due = nb.next_tick_ns(s, t, mm)
    assert due == 1_000_000_001  # scan delay 1000 ms: runtime must exceed it
    s.engine.now = due - 1
    assert not nb.task_tick_numa(s, t, mm)
    s.engine.now = due
    assert nb.task_tick_numa(s, t, mm)
    s.numa_mm[id(mm)].next_scan_ns = 5_000_000_000  # another task of the mm scanned: the mm waits
    due = nb.next_tick_ns(s, t, mm)
    assert due == 5_000_000_000
    s.engine.now = due - 1
    assert not nb.task_tick_numa(s, t, mm)
    s.engine.now = due
    assert nb.task_tick_numa(s, t, mm)
    s2 = System(tiny, resolve("v5.4"), seed=0)  # numa_balancing=0: never
    assert nb.next_tick_ns(s2, Task(2, "u", cpu=0), mm) >= 1 << 62
