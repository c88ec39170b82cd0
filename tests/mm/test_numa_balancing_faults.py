"""NUMA balancing on ``tiny`` (two DRAM nodes: CPUs 0,1,4,5 on node 0; 2,3,6,7 on node 1).

A task on CPU 0 faults pages in, ``change_prot_numa`` marks them, and the
next access takes a NUMA hinting fault (``do_numa_page``). Counters are
checked exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.mm import memory
from mmsim.mm.mempolicy import MemPolicy, Mode, set_vma_policy
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.mprotect import change_prot_numa
from mmsim.mm.pgtable import numa_arrays
from mmsim.mm.system import System
from mmsim.sched import numa_balancing

BASE = 1 << 30  # 2 MiB aligned: PMD slot 512
SLOT = BASE >> 21


def _system(tiny: Machine, check: str = "page-first", threads: int = 2) -> tuple[System, MmStruct, Vma]:
    """One mm; with ``threads`` = 2 a sibling thread (CPU 2, idle) makes ``mm_users`` 2, so
    ``change_pte_range`` has no ``target_node`` (it is only set for single-threaded mms)."""
    s = System(tiny, resolve("v5.4", overrides={"numa_balancing": "1", "numa_scan_check": check, "thp": "never"}),
               seed=0)
    mm = MmStruct(s, home_cpu=0)
    vma = Vma(BASE, BASE + (2 << 20))
    mm.vmas.append(vma)
    if threads == 2:
        numa_balancing.init_task(s, Task(9, "sibling", cpu=2, mm=mm), mm)
    return s, mm, vma


def _run(s: System, t: Task, body: Callable[[], Generator[Any, Any, None]]) -> None:
    s.sched.spawn(t, body())
    s.engine.run()


def _vm(s: System) -> dict[str, int]:
    return {e.vmstat_name: v for e, v in s.counters.vm_total().items()}


@pytest.mark.parametrize("check", ["page-first", "protnone-first"])
def test_scan_marks_exactly_the_present_pages_not_yet_protnone(tiny: Machine, check: str) -> None:
    s, mm, vma = _system(tiny, check)
    t = Task(1, "t", cpu=0, mm=mm)
    numa_balancing.init_task(s, t, mm)
    writes = [0, 1, 5, 100, 511]
    reads = [7, 8]  # read faults map the zero page: vm_normal_page() is NULL, never marked

    def body() -> Generator[Any, Any, None]:
        for i in writes:
            yield from memory.handle_mm_fault(t, mm, vma, BASE + i * 4096, True)
        for i in reads:
            yield from memory.handle_mm_fault(t, mm, vma, BASE + i * 4096, False)
        _nid, prot, _last, _scan = numa_arrays(mm.pgtables, SLOT)
        prot[5] = True  # already a hinting PTE from an earlier pass
        n = yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        assert n == 4

    _run(s, t, body)
    _nid, prot, _last, _scan = numa_arrays(mm.pgtables, SLOT)
    assert np.flatnonzero(prot).tolist() == [0, 1, 5, 100, 511]
    assert _vm(s)["numa_pte_updates"] == 4
    # page-first reads the struct page of every present non-zero page (5); protnone-first skips page 5
    assert s.numa_stats["scan_struct_page_refs"] == (5 if check == "page-first" else 4)
    assert s.numa_stats["scan_protnone_skipped"] == 1
    assert s.numa_stats["scan_ptes_present"] == 7


def test_protnone_first_touches_fewer_struct_page_lines(tiny: Machine) -> None:
    misses = {}
    for check in ("page-first", "protnone-first"):
        s, mm, vma = _system(tiny, check)
        t = Task(1, "t", cpu=0, mm=mm)
        numa_balancing.init_task(s, t, mm)

        def body(s: System = s, mm: MmStruct = mm, vma: Vma = vma, t: Task = t) -> Generator[Any, Any, None]:
            for i in range(512):
                yield from memory.handle_mm_fault(t, mm, vma, BASE + i * 4096, True)
            yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
            s.line_stamps.clear()  # a long time later: nothing of the scan is cached any more
            yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 1.0)

        _run(s, t, body)
        misses[check] = s.numa_stats["scan_struct_page_misses"]
        assert _vm(s)["numa_pte_updates"] == 512  # the second pass finds every PTE protnone
    assert misses == {"page-first": 1024, "protnone-first": 512}


def test_single_threaded_scan_skips_pages_on_the_task_node(tiny: Machine) -> None:
    """``target_node = numa_node_id()`` for a single-threaded private mapping (v5.4)."""
    s, mm, vma = _system(tiny, threads=1)
    t = Task(1, "t", cpu=0, mm=mm)
    numa_balancing.init_task(s, t, mm)

    def body() -> Generator[Any, Any, None]:
        for i in range(3):
            yield from memory.handle_mm_fault(t, mm, vma, BASE + i * 4096, True)
        n = yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        assert n == 0

    _run(s, t, body)
    assert not numa_arrays(mm.pgtables, SLOT)[1].any()
    assert _vm(s)["numa_pte_updates"] == 0
    assert s.counters.profile_total().get("flush_tlb_mm_range") is None  # nothing changed: no flush


def _misplaced(tiny: Machine) -> tuple[System, MmStruct, Vma, Task]:
    """A page allocated on node 1 (policy preferred=1 at fault time), then the default policy."""
    s, mm, vma = _system(tiny)
    t = Task(1, "t", cpu=0, mm=mm)
    numa_balancing.init_task(s, t, mm)
    set_vma_policy(s, vma, MemPolicy(Mode.PREFERRED, (1,)))
    return s, mm, vma, t


def test_hinting_fault_migrates_a_misplaced_page_once(tiny: Machine) -> None:
    s, mm, vma, t = _misplaced(tiny)
    kinds: list[str] = []

    def body() -> Generator[Any, Any, None]:
        yield from memory.handle_mm_fault(t, mm, vma, BASE, True)
        set_vma_policy(s, vma, MemPolicy(Mode.DEFAULT))
        assert numa_arrays(mm.pgtables, SLOT)[0][0] == 1
        for k in range(2):
            yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), float(k))
            kinds.append((yield from memory.handle_mm_fault(t, mm, vma, BASE, False)))

    _run(s, t, body)
    assert kinds == ["numa", "numa"]
    nid, prot, last, _ = numa_arrays(mm.pgtables, SLOT)
    assert nid[0] == 0 and not prot[0] and last[0] == 0
    vm = _vm(s)
    assert vm["numa_hint_faults"] == 2
    assert vm["numa_hint_faults_local"] == 1  # the second fault finds the page on the CPU's node
    assert vm["numa_pages_migrated"] == 1
    assert vm["pgmigrate_success"] == 1
    assert vm["numa_pte_updates"] == 2
    assert t.data["numa"].pages_migrated == 1
    prof = s.counters.profile_total()
    assert prof["migrate_page_copy"].ns > 0 and prof["do_numa_page"].ns > 0


def test_two_stage_filter_waits_for_a_second_fault_from_the_same_node(tiny: Machine) -> None:
    s, mm, vma, t = _misplaced(tiny)

    def body() -> Generator[Any, Any, None]:
        yield from memory.handle_mm_fault(t, mm, vma, BASE, True)
        set_vma_policy(s, vma, MemPolicy(Mode.DEFAULT))
        numa_arrays(mm.pgtables, SLOT)[2][0] = 2  # last faulted from CPU 2 (node 1)
        yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        yield from memory.handle_mm_fault(t, mm, vma, BASE, False)

    _run(s, t, body)
    nid, _prot, last, _ = numa_arrays(mm.pgtables, SLOT)
    assert nid[0] == 1 and last[0] == 0  # not migrated; cpupid now CPU 0
    vm = _vm(s)
    assert vm["numa_hint_faults"] == 1 and vm["numa_pages_migrated"] == 0 and vm["numa_hint_faults_local"] == 0


def test_no_migration_when_the_target_node_is_full(tiny: Machine) -> None:
    s, mm, vma, t = _misplaced(tiny)

    def body() -> Generator[Any, Any, None]:
        yield from memory.handle_mm_fault(t, mm, vma, BASE, True)
        set_vma_policy(s, vma, MemPolicy(Mode.DEFAULT))
        s.page_alloc.zones[0].free_pages = 0
        yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        yield from memory.handle_mm_fault(t, mm, vma, BASE, False)

    _run(s, t, body)
    assert numa_arrays(mm.pgtables, SLOT)[0][0] == 1
    assert _vm(s)["numa_pages_migrated"] == 0 and s.numa_stats["numa_migrate_failed"] == 1
    assert t.data["numa"].locality == [1, 0, 1]  # one remote fault, one migration failure


def test_bound_vma_is_not_scanned(tiny: Machine) -> None:
    """vma_policy_mof(): a plain MPOL_BIND policy has no MPOL_F_MOF, so task_numa_work skips it."""
    s, mm, vma = _system(tiny)
    t = Task(1, "t", cpu=0, mm=mm)
    numa_balancing.init_task(s, t, mm)
    set_vma_policy(s, vma, MemPolicy(Mode.BIND, (0,)))

    def body() -> Generator[Any, Any, None]:
        yield from memory.handle_mm_fault(t, mm, vma, BASE, True)
        s.engine.now = 2_000_000_000  # past numa_next_scan (scan delay 1 s)
        n = yield from numa_balancing.task_numa_work(t, mm)
        assert n == 0

    _run(s, t, body)
    assert _vm(s)["numa_pte_updates"] == 0


def test_scan_cost_difference_is_the_skipped_struct_page_lookups(tiny: Machine) -> None:
    """Half of 512 present PTEs still protnone, nothing cached: protnone-first saves exactly
    256 x (the page checks + a struct page miss overlapped STRUCT_PAGE_MLP-wide)."""
    from mmsim.mm import mprotect

    ns = {}
    for check in ("page-first", "protnone-first"):
        s, mm, vma = _system(tiny, check)
        t = Task(1, "t", cpu=0, mm=mm)
        numa_balancing.init_task(s, t, mm)

        def body(s: System = s, mm: MmStruct = mm, vma: Vma = vma, t: Task = t) -> Generator[Any, Any, None]:
            for i in range(512):
                yield from memory.handle_mm_fault(t, mm, vma, BASE + i * 4096, True)
            numa_arrays(mm.pgtables, SLOT)[1][::2] = True
            s.line_stamps.clear()
            s.counters.prof_ns[0].pop("change_pte_range", None)
            yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)

        _run(s, t, body)
        ns[check] = s.counters.profile_total()["change_pte_range"].ns
    per = mprotect.SCAN_PAGE_CHECKS[0] / tiny.freq_ghz + 100.0 / mprotect.STRUCT_PAGE_MLP  # tiny: 100 ns DRAM
    assert ns["page-first"] - ns["protnone-first"] == pytest.approx(256 * per, abs=1)


def test_huge_pmd_is_marked_and_faults_once(tiny: Machine) -> None:
    """change_huge_pmd: one hinting PMD for 512 PTE updates; do_huge_pmd_numa_page restores it."""
    s = System(tiny, resolve("v5.4", overrides={"numa_balancing": "1", "thp": "always"}), seed=0)
    mm = MmStruct(s, home_cpu=0)
    vma = Vma(BASE, BASE + (2 << 20))
    mm.vmas.append(vma)
    t = Task(1, "t", cpu=0, mm=mm)
    numa_balancing.init_task(s, t, mm)
    numa_balancing.init_task(s, Task(9, "sibling", cpu=2, mm=mm), mm)
    kinds: list[str] = []

    def body() -> Generator[Any, Any, None]:
        kinds.append((yield from memory.handle_mm_fault(t, mm, vma, BASE, True)))
        n = yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        assert n == 512 and SLOT in mm.pgtables.huge_protnone
        n = yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        assert n == 0  # already a hinting PMD
        kinds.append((yield from memory.handle_mm_fault(t, mm, vma, BASE + 4096, False)))
        kinds.append((yield from memory.handle_mm_fault(t, mm, vma, BASE + 8192, False)))

    _run(s, t, body)
    assert kinds == ["thp", "numa", "none"]
    vm = _vm(s)
    assert vm["numa_pte_updates"] == 512 and vm["numa_hint_faults"] == 1 and vm["numa_hint_faults_local"] == 1
    assert SLOT not in mm.pgtables.huge_protnone
