"""Issue 22: malloc1 on tiny: the header fault per placement policy, v6.12 munmap, the LRU/memcg model."""

from __future__ import annotations

from typing import Any

from mmsim.engine.core import Task
from mmsim.kernels.catalog import resolve
from mmsim.machine import get_machine
from mmsim.mm import lru_anon, memory
from mmsim.mm.mmap import MmStruct
from mmsim.mm.munmap import vm_munmap
from mmsim.mm.system import System
from mmsim.workloads.will_it_scale import Malloc1, malloc_mmap_size

LEN = malloc_mmap_size(128 << 20)


def run_loop(kernel: str, n: int = 3, overrides: dict[str, str] | None = None,
             ) -> tuple[System, MmStruct, list[str], list[int]]:
    s = System(get_machine("tiny"), resolve(kernel, overrides=overrides), seed=0)
    s.page_alloc.track_owners = True
    lru_anon.enable(s)
    mm = MmStruct(s, home_cpu=0)
    t = Task(0, "malloc1", cpu=0, mm=mm)
    kinds: list[str] = []
    starts: list[int] = []

    def body() -> Any:
        for _ in range(n):
            vma = yield from mm.mmap_pgoff(t, LEN)
            starts.append(vma.start)
            kinds.append((yield from memory.handle_mm_fault(t, mm, vma, vma.start, write=True)))
            yield from vm_munmap(t, mm, vma, [0])

    s.sched.spawn(t, body())
    s.engine.run()
    return s, mm, kinds, starts


def test_efa7df3e3bb5_faults_a_thp_per_iteration_at_the_same_address() -> None:
    s, mm, kinds, starts = run_loop("d4148aeab412^")
    assert kinds == ["thp"] * 3
    assert starts == [0x7FFFEFE00000] * 3  # aligned, and the hole is reused
    st = lru_anon.state(s)
    assert st is not None
    # a THP goes to the LRU at once (large folio) and leaves it at unmap: 2 lru_lock rounds per iteration
    assert s.locks.stats["&lruvec->lru_lock"].acquisitions == 6
    # the PMD lock: set_pmd_at at the fault, zap_huge_pmd at the unmap; memcg: a THP charges and
    # uncharges both page-counter levels directly (no stock); the page tables' kmem charges (3e79ec7: the PMD
    # table and each iteration's deposited PTE table) take one batch of 64 on both levels into this CPU's
    # stock, and their uncharges give the pages back to it
    assert s.locks.stats["ptlock_ptr(pmd page)"].acquisitions == 6
    assert s.locks.stats["memcg->memory.usage"].acquisitions == 3 * (2 + 2) + 2
    assert st.nr_lru == [0, 0] and st.folios == {}
    assert mm.vmas == [] and mm.pgtables.pmd == {} and mm.pgtables.nr_pte_tables == 0


def test_d4148aeab412_faults_a_4k_page_and_frees_its_pte_table() -> None:
    s, mm, kinds, starts = run_loop("d4148aeab412")
    assert kinds == ["anon"] * 3
    assert starts == [0x7FFFF7FFF000 - LEN] * 3
    # the 4 KiB folio waits on the lru_add batch; munmap's lru_add_drain moves it, then it is released
    assert s.locks.stats["&lruvec->lru_lock"].acquisitions == 6
    assert mm.pgtables.nr_pte_tables == 0  # free_pgtables
    # the PTE lock: do_anonymous_page's set_pte_at, then zap_pte_range; the PMD lock only populates
    # the new PTE table (__pte_alloc) once per iteration
    assert s.locks.stats["ptlock_ptr(pte page)"].acquisitions == 6
    assert s.locks.stats["ptlock_ptr(pmd page)"].acquisitions == 3
    # memcg: the first 4 KiB charge refills the stock (64 pages, one page_counter per level), the rest
    # come from it, and so do the page tables' kmem charges (the PMD table, each iteration's PTE table: one
    # stock per CPU); every unmap uncharges on both levels
    assert s.locks.stats["memcg->memory.usage"].acquisitions == 2 + 3 * 2


def test_munmap_downgrades_mmap_lock() -> None:
    s, mm, _, _ = run_loop("d4148aeab412", n=1)
    sem = mm.mmap_sem
    assert sem.writer is None and sem.readers == 0
    st = s.locks.stats["&mm->mmap_lock"]
    assert st.extra["read_acquisitions"] == 1  # the fault; munmap's read side comes from the downgrade


def test_window_rates_count_only_the_common_window() -> None:
    # task 0 ends warm-up (1 iteration) at 10, task 1 at 20; the first last iteration is at 50
    rates = Malloc1.window_rates([[10, 30, 50], [20, 40, 60]], warmup=1)
    assert rates == [2 / 30e-9, 1 / 30e-9]  # (20, 50]: task 0 finishes 30 and 50, task 1 finishes 40
    assert Malloc1.window_rates([[10, 12], [20, 40]], warmup=1) is None  # no overlap
    assert Malloc1.window_rates([[10], [20]], warmup=1) is None


def test_malloc1_size_must_fit_below_mmap_base(capsys: Any) -> None:
    from mmsim.cli import main

    assert main(["run", "will-it-scale/malloc1", "--machine", "tiny", "-p", "size=100000g", "-p", "nr_task=8",
                 "-p", "mode=threads"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mmsim: error: -p size: invalid value 107374182400000; allowed: at most 16383g for 8 mapping(s) "
                   "of one mm below mmap_base (larger fails with ENOMEM)"]


def test_each_new_vma_prepares_and_unlinks_its_anon_vma_once() -> None:
    # mm/rmap.c: anon_vma_prepare on the first write fault of each new VMA (700 cycles = 700 ns on tiny's
    # 1 GHz), unlink_anon_vmas in free_pgtables at munmap (500); the VMA-lock path never prepares one
    s, _, kinds, _ = run_loop("d4148aeab412")
    prof = s.counters.profile_total()
    assert kinds == ["anon"] * 3
    assert (prof["__anon_vma_prepare"].ns, prof["__anon_vma_prepare"].insns) == (3 * 700, 3 * 600)
    assert (prof["unlink_anon_vmas"].ns, prof["unlink_anon_vmas"].insns) == (3 * 500, 3 * 450)
    assert prof["do_mmap_pgoff"].ns == 3 * 3080 and prof["do_munmap"].ns == 3 * 8216


def test_tlb_finish_mmu_flushes_one_page_locally_for_the_header_and_nothing_when_untouched() -> None:
    # the header PTE and its table's pte_free_tlb cover [vma.start, +4 KiB): 1 page <= the ceiling of 33,
    # so flush_tlb_mm_range/local (779 cycles = 779 ns on tiny's 1 GHz) per munmap; a THP (one huge PMD,
    # stride PMD_SHIFT: 1 entry) also flushes locally; one CPU in mm_cpumask: no IPI
    s, _, kinds, _ = run_loop("d4148aeab412")
    assert kinds == ["anon"] * 3
    assert s.counters.profile_total()["flush_tlb_mm_range"].ns == 3 * 779
    s, _, kinds, _ = run_loop("d4148aeab412^")
    assert kinds == ["thp"] * 3
    assert s.counters.profile_total()["flush_tlb_mm_range"].ns == 3 * 779


def test_gather_range_decides_local_or_full_flush() -> None:
    import numpy as np

    from mmsim.mm.mmap import Vma
    from mmsim.mm.munmap import Gather

    s = System(get_machine("tiny"), resolve("v6.7"), seed=0)
    vma = Vma(0x200000, 0x200000 + (64 << 21))
    g = Gather()
    assert g.flush_ns(s) == 0  # untouched: tlb->end == 0, no flush
    bm = np.zeros(512, dtype=bool)
    bm[[3, 32]] = True  # with the table's page at the VMA start: pages 0..32, 33 pages, the ceiling itself
    g = Gather()
    g.zap_table(vma, 1, bm)
    assert g.flush_ns(s) == 779 and (g.start, g.end) == (0x200000, 0x200000 + (33 << 12))
    bm[33] = True  # 34 pages > 33
    g = Gather()
    g.zap_table(vma, 1, bm)
    assert g.flush_ns(s) == 300
    g = Gather()  # 64 tables of only none PTEs after a force flush's reset: 64 PMD strides > 33
    for slot in range(1, 65):
        g.zap_table(vma, slot, None)
    assert g.flush_ns(s) == 300 and not g.cleared_ptes


def test_pgtable_free_rcu_batches_the_tables_through_call_rcu() -> None:
    # tlb_remove_table: a batch page per munmap that freed a table (alloc + free through the PCP), the batch
    # set-up 441, call_rcu 208, the RCU callback 200 cycles; the default (tlb_remove_page) charges none of it
    base, *_ = run_loop("d4148aeab412")
    s, mm, kinds, _ = run_loop("d4148aeab412", overrides={"pgtable_free": "rcu"})
    prof = s.counters.profile_total()
    assert kinds == ["anon"] * 3
    assert (prof["tlb_remove_table"].ns, prof["call_rcu"].ns, prof["tlb_remove_table_rcu"].ns) == (
        3 * 441, 3 * 208, 3 * 200)
    assert "tlb_remove_table" not in base.counters.profile_total()
    from mmsim.mm.page_alloc import PGALLOC

    pgalloc = [sum(v[PGALLOC] for v in x.counters.vm) for x in (base, s)]
    assert pgalloc[1] - pgalloc[0] == 3  # one batch page per iteration
    assert mm.pgtables.nr_pte_tables == 0 and s.page_alloc.free_pages_count() == base.page_alloc.free_pages_count()
