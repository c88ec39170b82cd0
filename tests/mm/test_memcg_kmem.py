"""kmem charges to the memcg (mm/memcg_kmem.py; mm/memcontrol.c, mm/memcontrol-v1.c), exact on ``tiny``
(1 GHz, in-socket line transfer 50 ns; CPUs 0 and 1 on node 0).

Costs: a page charge is 120 cycles (``__memcg_kmem_charge_page``), an uncharge 100, an object charge 110,
an object uncharge 90; each page-counter level is one atomic on its own line.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.metrics.events import VmEvent
from mmsim.mm import memcg_kmem
from mmsim.mm.system import System
from mmsim.native import sysinfo


def _system(version: str, levels: int = 2) -> System:
    k = resolve("v6.6", overrides={"memcg_kmem": version, "memcg_levels": str(levels)})
    return System(get_machine("tiny"), k, 0)


def _on(s: System, cpu: int, f: Callable[[Task], int]) -> int:
    """Run ``f`` as a task on ``cpu``; returns the ns it charged."""
    out: list[int] = []

    def body(t: Task) -> Generator[Any, Any, None]:
        ns = f(t)
        out.append(ns)
        yield ns

    t = Task(cpu, f"t{cpu}", cpu=cpu)
    s.sched.spawn(t, body(t))
    s.engine.run()
    return out[0]


def test_off_charges_nothing() -> None:
    s = _system("off")
    assert memcg_kmem.state(s) is None
    assert _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 3)) == 0


def test_v2_page_charges_come_from_the_stock_in_batches_of_64() -> None:
    s = _system("v2")
    st = memcg_kmem.state(s)
    assert st is not None and len(st.memory) == 2 and st.kmem == []
    def atomics() -> int:  # the lock_stat class (every level's counter) counts each atomic
        return st.memory[0].stat.acquisitions

    # the first order-3 charge on CPU 1 refills the stock: 64 charged on both levels, 56 kept
    _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 3))
    assert (st.stock[1], st.charges, atomics()) == (56, 1, 2)
    for _ in range(7):  # seven more come from the stock: no atomic
        _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 3))
    assert (st.stock[1], st.charges, atomics()) == (0, 1, 2)
    _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 3))  # empty: a second batch
    assert (st.stock[1], st.charges) == (56, 2)
    # CPU 0 uncharges into its own stock and drains it once it holds more than 64 pages
    for _ in range(8):
        _on(s, 0, lambda t: memcg_kmem.uncharge_page(t, s, 3))
    assert (st.stock[0], st.uncharges) == (64, 0)
    _on(s, 0, lambda t: memcg_kmem.uncharge_page(t, s, 3))
    assert (st.stock[0], st.uncharges, atomics()) == (0, 1, 6)


def test_v1_charges_the_kmem_counters_every_time() -> None:
    s = _system("v1", levels=3)
    st = memcg_kmem.state(s)
    assert st is not None and len(st.kmem) == 3
    # the first charge: 120 ns + 3 memory-counter atomics + 3 kmem-counter atomics, each line moving
    # from its home CPU 0 to CPU 1 (50 ns)
    assert _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 0)) == 120 + 6 * 50
    # from the stock: the kmem counters still take one atomic each, their lines now on CPU 1 (hits)
    ns = _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 0))
    assert (st.kmem[0].stat.acquisitions, st.memory[0].stat.acquisitions) == (6, 3)  # per class, all levels
    assert 120 <= ns < 120 + 3 * 50
    # the uncharge on CPU 0 pulls each kmem line back: 100 ns + 3 transfers
    assert _on(s, 0, lambda t: memcg_kmem.uncharge_page(t, s, 0)) == 100 + 3 * 50


def test_objects_charge_whole_pages_and_keep_the_rest_as_bytes() -> None:
    s = _system("v2")
    st = memcg_kmem.state(s)
    assert st is not None
    # a 4104-byte head (kmalloc-4k + the objcg pointer): 2 pages from the page stock, 4096 - 8 bytes kept
    _on(s, 1, lambda t: memcg_kmem.charge_object(t, s, 4104))
    assert (st.stock[1], st.obj_stock[1]) == (62, 4088)
    _on(s, 1, lambda t: memcg_kmem.charge_object(t, s, 264))  # an sk_buff: from the byte stock
    assert (st.stock[1], st.obj_stock[1]) == (62, 3824)
    # freeing both on CPU 0: 4104 + 264 bytes, of which one whole page goes back to CPU 0's page stock
    _on(s, 0, lambda t: memcg_kmem.uncharge_object(t, s, 4104))
    assert (st.obj_stock[0], st.stock[0]) == (8, 1)
    _on(s, 0, lambda t: memcg_kmem.uncharge_object(t, s, 264))
    assert (st.obj_stock[0], st.stock[0]) == (272, 1)


def test_the_host_memcg_from_proc_self_cgroup() -> None:
    assert sysinfo.memcg("4:memory:/process_api/8a90\n0::/\n") == {"memcg_kmem": "v1", "memcg_levels": "3"}
    assert sysinfo.memcg("7:cpu,memory:/a\n") == {"memcg_kmem": "v1", "memcg_levels": "2"}
    assert sysinfo.memcg("0::/user.slice/user-0.slice/session-1.scope\n") == {"memcg_kmem": "v2",
                                                                               "memcg_levels": "4"}
    assert sysinfo.memcg("0::/\n") == {"memcg_kmem": "off"}
    assert sysinfo.memcg("") == {}


def _map_fault_unmap(s: System, npages: int, write: bool = True, unmap: bool = True, cpu: int = 0,
                     v6: bool = True) -> tuple[int, int]:
    """One task: map ``npages`` anonymous pages, fault each, then munmap (the v4.20+ ``vm_munmap`` or the
    older ``do_munmap``); returns the page tables charged (net) after the faults and at the end."""
    from mmsim.mm import memory
    from mmsim.mm.mmap import MmStruct
    from mmsim.mm.munmap import do_munmap, vm_munmap

    mm = MmStruct(s, cpu)
    t = Task(cpu, f"t{cpu}", cpu=cpu, mm=mm)
    seen: list[int] = []

    def net() -> int:
        st = memcg_kmem.state(s)
        return st.pgtable_charges if st is not None else 0

    def body() -> Generator[Any, Any, None]:
        vma = yield from mm.do_mmap(t, npages * 4096)
        for addr in range(vma.start, vma.end, 4096):
            if not mm.pgtables.pte_bitmap(addr >> 21)[(addr >> 12) & 511] and mm.pgtables.pmd.get(addr >> 21) != 2:
                yield from memory.handle_mm_fault(t, mm, vma, addr, write)
        seen.append(net())
        if unmap:
            if v6:
                yield from vm_munmap(t, mm, vma, [cpu])
            else:
                yield from do_munmap(t, mm, vma, [cpu])
        seen.append(net())

    s.sched.spawn(t, body())
    s.engine.run()
    return seen[0], seen[1]


def _pt_system(kernel: str, thp: str = "never", **over: str) -> System:
    return System(get_machine("tiny"), resolve(kernel, overrides={"thp": thp, **over}), 0)


def test_page_tables_are_charged_from_3e79ec7_v4_8() -> None:
    """A first 4 KiB fault in a fresh mm makes a PMD table (__pmd_alloc) and a PTE table (__pte_alloc): two
    charges with pgtable_account on (v4.13, v6.6), none before (v3.13). The munmap frees the PTE table (its
    uncharge); the model keeps PMD tables for the mm's life."""
    assert _map_fault_unmap(_pt_system("v3.13"), 4, v6=False) == (0, 0)
    for kernel in ("v4.13", "v6.6"):
        s = _pt_system(kernel)
        assert s.policy("pgtable_account") == "on"
        assert _map_fault_unmap(s, 4, v6=kernel == "v6.6") == (2, 1), kernel
    s = _pt_system("v6.6", memcg_kmem="off")  # the root memcg: nothing charged
    assert _map_fault_unmap(s, 4) == (0, 0) and memcg_kmem.state(s) is None


def test_a_huge_fault_charges_its_deposited_table_and_the_zero_huge_page_none() -> None:
    """4 MiB at an unaligned base: a 4 KiB head, one aligned 2 MiB region, a 4 KiB tail (514 faults). With
    THP, the write fault of the aligned region charges pte_alloc_one's deposited table beside the PMD table
    and the two PTE tables: 4; the munmap frees the PTE tables and zap_huge_pmd the deposit
    (zap_deposited_table), leaving the PMD table. A read maps the huge zero page, which the model does
    without a deposited table: 3, then 1."""
    for unmap_v6 in (True, False):
        s = _pt_system("v6.6", thp="always")
        assert _map_fault_unmap(s, 1024, v6=unmap_v6) == (4, 1)
        assert s.counters.vm_total()[VmEvent.THP_FAULT_ALLOC] == 1
    s = _pt_system("v6.6", thp="always")
    assert _map_fault_unmap(s, 1024, write=False) == (3, 1)
    assert s.counters.vm_total()[VmEvent.THP_FAULT_ALLOC] == 0


def test_page_table_charges_cost_what_a_kmem_page_charge_costs() -> None:
    """On cgroup v1 with 3 levels, each table charge adds one atomic on every level's kmem counter
    (memcg1_account_kmem) and each uncharge one more: a fault + munmap of one table and one PMD table on
    CPU 0 makes 2 charges and 1 uncharge, 3 kmem atomics each; the memory counters take one batch of 64."""
    s = _pt_system("v6.6", memcg_kmem="v1", memcg_levels="3")
    assert _map_fault_unmap(s, 1) == (2, 1)
    st = memcg_kmem.state(s)
    assert st is not None
    assert st.kmem[0].stat.acquisitions == 9  # one lock_stat class for the three levels' counters
    assert (st.stock[0], st.charges) == (64 - 2 + 1, 1)


def test_a_skip_takes_its_tables_from_the_stock() -> None:
    s = _pt_system("v6.6")
    st = memcg_kmem.state(s)
    assert st is not None
    memcg_kmem.skip_pgtables(s, 1, 3)  # empty stock: one batch, 61 left
    assert (st.stock[1], st.charges, st.pgtable_charges) == (61, 1, 3)
    memcg_kmem.skip_pgtables(s, 1, 61)
    assert (st.stock[1], st.charges) == (0, 1)
    memcg_kmem.skip_pgtables(s, 1, 1)
    assert (st.stock[1], st.charges, st.pgtable_charges) == (63, 2, 65)
    memcg_kmem.skip_pgtables(_pt_system("v3.13"), 1, 5)  # off before v4.8: nothing to keep


def test_user_and_kmem_charges_share_one_stock_and_the_counters() -> None:
    """mm/memcontrol.c try_charge_memcg: one memcg_stock per CPU and one page_counter per level, for a user
    folio (mm/lru_anon.py mem_cgroup_charge) and a kmem page alike. A 4 KiB folio's charge refills CPU 1's
    stock (64 on both levels: 2 atomics, 63 left); a page table's kmem charge then takes one of them (no
    atomic); its uncharge gives it back. In the root memcg (memcg_kmem=off) nothing reaches a page counter."""
    from mmsim.mm import lru_anon

    s = _system("v2")
    st = memcg_kmem.state(s)
    lru = lru_anon.enable(s)
    assert st is not None and lru.stock is st.stock and lru.counters is st.memory

    def user(t: Task) -> Generator[Any, Any, None]:
        yield from lru_anon.mem_cgroup_charge(t, s, 1)

    t = Task(1, "t1", cpu=1)
    s.sched.spawn(t, user(t))
    s.engine.run()
    assert (st.stock[1], st.memory[0].stat.acquisitions) == (63, 2)
    _on(s, 1, lambda t: memcg_kmem.charge_page(t, s, 0))
    assert (st.stock[1], st.memory[0].stat.acquisitions) == (62, 2)
    _on(s, 1, lambda t: memcg_kmem.uncharge_page(t, s, 0))
    assert (st.stock[1], st.memory[0].stat.acquisitions) == (63, 2)

    s = _system("off")
    lru = lru_anon.enable(s)
    assert lru.counters == []
    t = Task(1, "t1", cpu=1)
    s.sched.spawn(t, user(t))
    s.engine.run()
    assert "memcg->memory.usage" not in s.locks.stats
