"""Memory tiering (numa_balancing=2, v5.18+) and memory policies on ``cascadelake-optane-2s``
(DRAM nodes 0, 1; Optane nodes 2, 3 without CPUs)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import pytest

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.mm import memory
from mmsim.mm.mempolicy import MemPolicy, Mode, alloc_node, make_policy, mpol_misplaced, set_vma_policy
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.mprotect import change_prot_numa, mem_latency_ns, memmap_node
from mmsim.mm.pgtable import numa_arrays
from mmsim.mm.system import System
from mmsim.sched import numa_balancing

BASE = 1 << 30
SLOT = BASE >> 21


def _setup(mode: str) -> tuple[System, MmStruct, Vma, Task]:
    s = System(get_machine("cascadelake-optane-2s"),
               resolve("v5.4", overrides={"numa_balancing": mode, "thp": "never"}), seed=0)
    mm = MmStruct(s, home_cpu=0)
    vma = Vma(BASE, BASE + (2 << 20))
    mm.vmas.append(vma)
    t = Task(1, "t", cpu=0, mm=mm)
    numa_balancing.init_task(s, t, mm)
    numa_balancing.init_task(s, Task(2, "sibling", cpu=1, mm=mm), mm)
    return s, mm, vma, t


def _place(s: System, mm: MmStruct, vma: Vma, t: Task) -> Generator[Any, Any, None]:
    """Page 0 on Optane node 2, page 1 on DRAM node 0 (preferred policies at fault time)."""
    set_vma_policy(s, vma, MemPolicy(Mode.PREFERRED, (2,)))
    yield from memory.handle_mm_fault(t, mm, vma, BASE, True)
    set_vma_policy(s, vma, MemPolicy(Mode.DEFAULT))
    yield from memory.handle_mm_fault(t, mm, vma, BASE + 4096, True)


def test_tiering_mode_scans_only_the_slow_tier_and_promotes_hot_pages() -> None:
    s, mm, vma, t = _setup("2")

    def body() -> Generator[Any, Any, None]:
        yield from _place(s, mm, vma, t)
        n = yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        assert n == 1
        assert numa_arrays(mm.pgtables, SLOT)[1][:2].tolist() == [True, False]
        yield from memory.handle_mm_fault(t, mm, vma, BASE, False)

    s.sched.spawn(t, body())
    s.engine.run()
    nid = numa_arrays(mm.pgtables, SLOT)[0]
    assert nid[:2].tolist() == [0, 0]  # promoted to the CPU's DRAM node
    vm = {e.vmstat_name: v for e, v in s.counters.vm_total().items()}
    assert vm["numa_hint_faults"] == 1 and vm["numa_pages_migrated"] == 1 and vm["pgmigrate_success"] == 1
    assert s.numa_stats["pgpromote_candidate"] == 1 and s.numa_stats["pgpromote_success"] == 1


def test_normal_mode_marks_both_tiers() -> None:
    s, mm, vma, t = _setup("1")

    def body() -> Generator[Any, Any, None]:
        yield from _place(s, mm, vma, t)
        n = yield from change_prot_numa(t, mm, BASE, BASE + (2 << 20), 0.0)
        assert n == 2

    s.sched.spawn(t, body())
    s.engine.run()


def test_tiering_hot_threshold_and_rate_limit_when_dram_is_tight() -> None:
    s, _mm, _vma, t = _setup("2")
    s.page_alloc.zones[0].free_pages = 1 << 18  # 1 GiB free: below the 'enough free space' bar
    ok, _ = numa_balancing.should_numa_migrate_memory(s, t, -1, 2, now_ms=5000.0, scan_ms=4500.0)
    assert ok  # hint-fault latency 500 ms < 1000 ms threshold
    ok, _ = numa_balancing.should_numa_migrate_memory(s, t, -1, 2, now_ms=5000.0, scan_ms=3000.0)
    assert not ok  # 2000 ms: cold
    s2, _mm2, _v2, t2 = _setup("2")
    s2.kernel.policies["numa_balancing_promote_rate_limit_mbps"] = "1"  # 256 pages per second window
    s2.page_alloc.zones[0].free_pages = 1 << 18
    res = [numa_balancing.should_numa_migrate_memory(s2, t2, -1, 2, 100.0, 99.0)[0] for _ in range(300)]
    assert sum(res) == 256


def test_latency_and_memmap_nodes() -> None:
    s, _mm, _vma, _t = _setup("1")
    assert mem_latency_ns(s, 0, 0) == 81.0
    assert mem_latency_ns(s, 0, 1) == 140.4  # remote DRAM: MLC on Gold 6240 (remote_latency_ns)
    assert mem_latency_ns(s, 0, 2) == 305.0  # Optane on the CPU's socket
    assert mem_latency_ns(s, 0, 3) == pytest.approx(305.0 * 28 / 17)
    assert [memmap_node(s, n) for n in range(4)] == [0, 1, 0, 1]


def test_mempolicy_placement_and_misplacement() -> None:
    s, _mm, vma, _t = _setup("1")
    m = s.machine
    pol = make_policy(m, "interleave", "0,2")
    set_vma_policy(s, vma, pol)
    assert [alloc_node(s, vma, BASE + i * 4096, 0) for i in range(4)] == [0, 2, 0, 2]
    set_vma_policy(s, vma, make_policy(m, "bind", "1,3"))
    assert alloc_node(s, vma, BASE, 0) == 1  # node 0's zonelist: 0, 2 (17), 1 (21), 3 (28)
    assert mpol_misplaced(s, vma, BASE, 0, 3) == (-1, False)  # plain bind: no MPOL_F_MOF
    set_vma_policy(s, vma, make_policy(m, "bind", "0,2", "numa_balancing"))
    assert mpol_misplaced(s, vma, BASE, 0, 2) == (0, True)
    set_vma_policy(s, vma, make_policy(m, "default", ""))
    assert mpol_misplaced(s, vma, BASE, 24, 0) == (1, True)  # CPU 24: first core of socket 1
    with pytest.raises(UserError):
        make_policy(m, "preferred", "0,1")
    with pytest.raises(UserError):
        make_policy(m, "bind", "4")
    assert np.array_equal(s.numa_toptier, [True, True, False, False])
