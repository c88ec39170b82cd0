"""thp_memscale on ``tiny``: 4 threads × 8m (8,000,000 bytes each).

VMA layout (top-down from MMAP_BASE, page-aligned, no hole reuse):
the main thread mmaps an 8 MiB + 4 KiB stack per thread (S = 8,392,704),
``clone``s, and loops; a thread's ``malloc(8e6)`` is an mmap of
8,000,016 bytes → 1954 pages (M = 8,003,584). Thread i runs on CPU i, so
thread 0 shares CPU 0 with main and only runs once main sleeps in
pthread_join. Main takes mmap_sem for stack i+1 in the same event in which
it spawns thread i, so thread i's malloc lands *after* stack i+1 — except
thread 1's, which is done (~9 µs after its wake-up) while main is still in
copy_process for thread 2, and thread 2's: main's mmap of stack3 sleeps on
mmap_sem, and while the release's wake-up of main is under way thread 2's
malloc takes the free sem (v3.13 ``__rwsem_do_wake``: "do not grant it the
lock yet as we want other writers to be able to steal it"; one steal).
Order, top down:

    stack0, stack1, stack2, malloc1, malloc2, stack3, malloc3, malloc0.

Faults of one malloc VMA [s, e): every page is written (the buffer
[s+16, s+16+8e6) touches all 1954 pages). A 2 MiB-aligned range that lies
fully inside the VMA takes one THP fault; every other page one 4 KiB fault.
"""

from __future__ import annotations

from typing import Any

import pytest

from mmsim.experiments.run import RunSpec, run
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.metrics.events import VmEvent
from mmsim.mm.mmap import MMAP_BASE
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params

HP = 2 << 20
S = (8 << 20) + 4096
M = 1954 * 4096  # ceil(8_000_016 / 4096) pages
PARAMS = {"threads": "4", "bytes": "8m"}


def _simulate(tiny: Machine, kernel: str) -> System:
    s = System(tiny, resolve(kernel), 0)
    w = get_workload("thp_memscale")
    w.setup(s, resolve_params(w, PARAMS))
    s.engine.run()
    return s


def _split(start: int, end: int) -> tuple[int, list[int]]:
    """(number of THP faults, addresses of 4 KiB faults) of a fully written VMA."""
    first = -(-start // HP) * HP
    nhuge = max(0, (end - first) // HP)
    huge_end = first + nhuge * HP
    small = [a for a in range(start, end, 4096) if not (first <= a < huge_end)]
    return nhuge, small


def test_vma_layout(tiny: Machine) -> None:
    s = _simulate(tiny, "v3.13")
    mm = s.workload_state["tasks"][0].mm
    got = [(v.name or "malloc", MMAP_BASE - v.start, v.size) for v in mm.vmas]
    assert got == [
        ("stack", S, S),  # stack0
        ("stack", 2 * S, S),  # stack1
        ("stack", 3 * S, S),  # stack2
        ("malloc", 3 * S + M, M),  # malloc1
        ("malloc", 3 * S + 2 * M, M),  # malloc2
        ("stack", 4 * S + 2 * M, S),  # stack3
        ("malloc", 4 * S + 3 * M, M),  # malloc3
        ("malloc", 4 * S + 4 * M, M),  # malloc0
    ]


def test_page_fault_counts(tiny: Machine) -> None:
    # In pages mod 512 (2 MiB): MMAP_BASE ≡ 511, S ≡ 1, M = 1954 ≡ 418. Start offsets:
    # malloc1 511 - 3 - 418 = 90; malloc2 511 - 3 - 836 ≡ 184 (above stack3: test_vma_layout);
    # malloc3 511 - 4 - 1254 ≡ 277; malloc0 511 - 4 - 1672 ≡ 371. With 1954 pages each:
    #   malloc1: 422 head pages, then 1532 pages = 2 full huge pages + 508 → 2 THP + 930 4K
    #   malloc2: 328 head, 1626 = 3 huge + 90 → 3 THP + 418 4K; malloc3: 235 + 3 + 183 → 3 + 418;
    #   malloc0: 141 + 3 + 277 → 3 + 418.
    # Page faults = 2 + 930 + 3 × (3 + 418) = 2195; THP = 11.
    s = _simulate(tiny, "v3.13")
    mm = s.workload_state["tasks"][0].mm
    mallocs = {cpu: v for cpu, v in zip((1, 2, 3, 0), [v for v in mm.vmas if not v.name], strict=True)}
    split = {cpu: _split(v.start, v.end) for cpu, v in mallocs.items()}
    assert {cpu: (n, len(small)) for cpu, (n, small) in split.items()} == {
        1: (2, 930), 2: (3, 418), 3: (3, 418), 0: (3, 418),
    }
    vm = s.counters.vm_total()
    assert vm[VmEvent.PGFAULT] == 2195
    assert vm[VmEvent.THP_FAULT_ALLOC] == 11
    # Thread i faults on CPU i only: per-CPU counts match its own VMA.
    for cpu, (n, small) in split.items():
        assert s.counters.vm[cpu][int(VmEvent.PGFAULT)] == n + len(small)
        assert s.counters.vm[cpu][int(VmEvent.THP_FAULT_ALLOC)] == n
    # Pages: 11 × (512 + deposited PTE table) + 2184 small pages + one PTE table per
    # 2 MiB slot holding small pages (adjacent mallocs share the slot at their seam)
    # + one PMD table (all mallocs are in one 1 GiB PUD slot).
    small_all = [a for _, sm in split.values() for a in sm]
    pte_tables = len({a >> 21 for a in small_all})
    assert pte_tables == 6
    assert len({a >> 30 for a in small_all}) == 1
    assert vm[VmEvent.PGALLOC_NORMAL] == 11 * 513 + 2184 + pte_tables + 1 == 7834
    pa = s.page_alloc
    assert pa.free_pages_count() + vm[VmEvent.PGALLOC_NORMAL] == 2 * 262_144


@pytest.mark.parametrize("kernel", ["v3.12", "v3.13"])
def test_lock_acquisitions(tiny: Machine, kernel: str) -> None:
    s = _simulate(tiny, kernel)
    st = {name: x.acquisitions for name, x in s.locks.stats.items()}
    # mmap_sem: 2195 faults (read) + 4 stacks + 4 mallocs (write).
    assert st["&mm->mmap_sem"] == 2195 + 8
    assert st["ptlock_ptr(pte page)"] == 2184  # one per 4 KiB fault (split PTE locks on both)
    assert st["mm->rss_stat"] == 11  # add_mm_counter per THP fault
    if kernel == "v3.12":
        # page_table_lock: 1 PMD table + 6 PTE tables + 11 huge PMDs.
        assert st["&mm->page_table_lock"] == 1 + 6 + 11
        assert "ptlock_ptr(pmd page)" not in st and "mm->nr_ptes" not in st
    else:
        # v3.13: only __pmd_alloc takes page_table_lock; __pte_alloc takes pmd_lock()
        # (c4088ebdca64), the split PMD lock, as the 11 huge PMD faults do.
        assert st["&mm->page_table_lock"] == 1
        assert st["ptlock_ptr(pmd page)"] == 6 + 11
        assert st["mm->nr_ptes"] == 6 + 11  # __pte_alloc + huge PMD deposit
    # zone->lock: one per order-9 block + one PCP refill per 31 order-0 pages per CPU.
    refills = 0
    for cpu in range(tiny.ncpus):
        order0 = s.counters.vm[cpu][int(VmEvent.PGALLOC_NORMAL)] - 512 * s.counters.vm[cpu][
            int(VmEvent.THP_FAULT_ALLOC)]
        refills += -(-order0 // 31)
    assert st["&zone->lock"] == 11 + refills


def test_elapsed_is_at_least_the_bandwidth_bound(tiny: Machine) -> None:
    s = _simulate(tiny, "v3.13")
    # Each node writes at most 10 GB/s (10 bytes/ns): the run cannot be shorter than
    # its busiest node's bytes / 10. Threads 0, 1 write node 0; 2, 3 node 1; each
    # node gets the kernel's clears (>= 2 x 8e6 bytes); the user stores go through the
    # cache hierarchy, so only the sub-pages no longer cached are written (and read) again.
    bw = s.bandwidth.bytes_written
    assert 2 * 8_000_000 < min(bw) < 2 * 8_000_000 * 2
    assert s.elapsed_ns >= max(bw) / 10
    assert s.elapsed_ns < s.engine.now  # the vmstat timer's last (no-op) tick is at 1 s
    assert s.engine.now == 1_000_000_000


def _strip_wall(d: dict[str, Any]) -> dict[str, Any]:
    d = dict(d)
    d["sim"] = {k: v for k, v in d["sim"].items() if k != "wall_seconds"}
    return d


@pytest.mark.usefixtures("use_tiny_preset")
def test_same_seed_same_result() -> None:
    spec = RunSpec("thp_memscale", "tiny", "v3.13", params=PARAMS, seed=7)
    a, b = run(spec).to_dict(), run(spec).to_dict()
    # the fast-forward's report (mmsim.metrics.sampling) is part of every non-exact thp_memscale run
    ff = {"ff_cycles", "ff_skipped_ops", "ff_window_ops", "ff_windows_discarded", "ff_skipped_seconds",
          "elapsed_ci95_seconds"}
    assert set(a["sim"]) == {"events", "wall_seconds", "simulated_seconds"} | ff
    assert a["sim"]["ff_skipped_ops"] == 0  # 2,195 faults: too few for a window of 2,048 and a skip
    assert _strip_wall(a) == _strip_wall(b)
    assert a["perf"]["page-faults"] == 2195
    assert a["vmstat"]["thp_fault_alloc"] == 11
    assert a["command"] == "thp_memscale -C 0 -m 0 -c 4 -b 8000000"
    assert a["metrics"]["thp_memscale.elapsed_seconds"] == a["sim"]["simulated_seconds"]


@pytest.mark.usefixtures("use_tiny_preset")
def test_thp_never_has_only_small_faults() -> None:
    r = run(RunSpec("thp_memscale", "tiny", "v3.13", policies={"thp": "never"}, params=PARAMS))
    # Every page of the four 1954-page mallocs faults once.
    assert r.perf["page-faults"] == 4 * 1954
    assert r.vmstat["thp_fault_alloc"] == 0
