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


def _simulate(tiny: Machine, kernel: str, verify: str = "page") -> System:
    # exact: the counts below are the model's, not a fast-mode extrapolation (with the find_vma cache of
    # v3.13, session 31, the node check reaches its steady state on tiny and the fast mode skips 2,524 calls)
    s = System(tiny, resolve(kernel), 0, exact=True)
    w = get_workload("thp_memscale")
    w.setup(s, resolve_params(w, {**PARAMS, "verify": verify}))
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
    # each stack is split by its guard page's mprotect (glibc allocate_stack): the stack keeps the top
    # S - 4096 bytes, the guard VMA (appended when the mprotect runs) its lowest page. Main's write to
    # stack2's top page queues behind threads 0's and 1's malloc mmaps (v3.13 down_read behind a waiting
    # writer), so their VMAs come before stack2's guard; the same for stack3's and thread 2's malloc.
    # The threads' mallocs are mapped in thread order (session 18 and before: 1, 2, 3, 0, when main
    # re-took mmap_sem ahead of every woken malloc).
    g = 4096
    assert got == [
        ("stack", S - g, S - g),  # stack0
        ("stack guard", S, g),
        ("stack", 2 * S - g, S - g),  # stack1
        ("stack guard", 2 * S, g),
        ("stack", 3 * S - g, S - g),  # stack2
        ("malloc", 3 * S + M, M),  # malloc0
        ("malloc", 3 * S + 2 * M, M),  # malloc1
        ("stack guard", 3 * S, g),
        ("stack", 4 * S + 2 * M - g, S - g),  # stack3
        ("malloc", 4 * S + 3 * M, M),  # malloc2
        ("stack guard", 4 * S + 2 * M, g),
        ("malloc", 4 * S + 4 * M, M),  # malloc3
    ]
    assert [MMAP_BASE - s.workload_state["buffers"][i + 1].start for i in range(4)] == [
        3 * S + M, 3 * S + 2 * M, 4 * S + 3 * M, 4 * S + 4 * M]


def test_page_fault_counts(tiny: Machine) -> None:
    # In pages mod 512 (2 MiB): MMAP_BASE ≡ 511, S ≡ 1, M = 1954 ≡ 418. Start offsets:
    # malloc0 511 - 3 - 418 = 90; malloc1 511 - 3 - 836 ≡ 184 (above stack3: test_vma_layout);
    # malloc2 511 - 4 - 1254 ≡ 277; malloc3 511 - 4 - 1672 ≡ 371. With 1954 pages each:
    #   malloc0: 422 head pages, then 1532 pages = 2 full huge pages + 508 → 2 THP + 930 4K
    #   malloc1: 328 head, 1626 = 3 huge + 90 → 3 THP + 418 4K; malloc2: 235 + 3 + 183 → 3 + 418;
    #   malloc3: 141 + 3 + 277 → 3 + 418.
    # Page faults = 2 + 930 + 3 × (3 + 418) = 2195 by the threads; THP = 11. Main adds one 4 KiB fault
    # per thread on the stack's top page (allocate_stack's struct pthread; no stack top is 2 MiB-aligned
    # here: stack k ends at MMAP_BASE - k·S ≡ 511 - k pages mod 512): 2199.
    s = _simulate(tiny, "v3.13")
    mm = s.workload_state["tasks"][0].mm
    mallocs = {tid - 1: v for tid, v in s.workload_state["buffers"].items()}  # thread i runs on CPU i
    split = {cpu: _split(v.start, v.end) for cpu, v in mallocs.items()}
    assert {cpu: (n, len(small)) for cpu, (n, small) in split.items()} == {
        0: (2, 930), 1: (3, 418), 2: (3, 418), 3: (3, 418),
    }
    vm = s.counters.vm_total()
    assert vm[VmEvent.PGFAULT] == 2195 + 4
    assert vm[VmEvent.THP_FAULT_ALLOC] == 11
    # Thread i faults on CPU i only: per-CPU counts match its own VMA; main (CPU 0) adds the 4 stack tops.
    for cpu, (n, small) in split.items():
        assert s.counters.vm[cpu][int(VmEvent.PGFAULT)] == n + len(small) + (4 if cpu == 0 else 0)
        assert s.counters.vm[cpu][int(VmEvent.THP_FAULT_ALLOC)] == n
    # Pages: 11 × (512 + deposited PTE table) + 2184 small pages + one PTE table per
    # 2 MiB slot holding small pages (adjacent mallocs share the slot at their seam)
    # + one PMD table (all mallocs and stacks are in one 1 GiB PUD slot), and the 4 stack-top pages with
    # their PTE tables (stack3's top shares its 2 MiB slot with a malloc's small pages: 3 new tables).
    small_all = [a for _, sm in split.values() for a in sm]
    tops = [v.end - 4096 for v in mm.vmas if v.name == "stack"]
    pte_tables = len({a >> 21 for a in small_all + tops})
    assert len({a >> 21 for a in small_all}) == 6 and pte_tables == 9
    assert len({a >> 30 for a in small_all + tops}) == 1
    assert vm[VmEvent.PGALLOC_NORMAL] == 11 * 513 + 2184 + 4 + pte_tables + 1 == 7841
    pa = s.page_alloc
    assert pa.free_pages_count() + vm[VmEvent.PGALLOC_NORMAL] == 2 * 262_144


@pytest.mark.parametrize("verify", ["none", "page"])
@pytest.mark.parametrize("kernel", ["v3.12", "v3.13"])
def test_lock_acquisitions(tiny: Machine, kernel: str, verify: str) -> None:
    s = _simulate(tiny, kernel, verify)
    st = {name: x.acquisitions for name, x in s.locks.stats.items()}
    # The node check (verify=page, docs/locks.md session 21): one get_mempolicy per page of each malloc
    # (1954 a thread): mmap_sem for read each, and the page's table lock: the 11 huge PMDs' 11 x 512 pages
    # under the PMD lock (v3.12 mm->page_table_lock, v3.13 the split PMD lock), the other 4 x 1954 - 5632
    # = 2184 under their PTE table's split lock.
    calls, huge = (4 * 1954, 11 * 512) if verify == "page" else (0, 0)
    # mmap_sem: 2199 faults (read) + 4 stacks, 4 guard mprotects, 4 mallocs (write).
    assert st["&mm->mmap_sem"] == 2199 + 12 + calls
    assert st["ptlock_ptr(pte page)"] == 2188 + calls - huge  # one per 4 KiB fault (split PTE locks on both)
    assert st["mm->rss_stat"] == 11  # add_mm_counter per THP fault
    if kernel == "v3.12":
        # page_table_lock: 1 PMD table + 9 PTE tables + 11 huge PMDs.
        assert st["&mm->page_table_lock"] == 1 + 9 + 11 + huge
        assert "ptlock_ptr(pmd page)" not in st and "mm->nr_ptes" not in st
    else:
        # v3.13: only __pmd_alloc takes page_table_lock; __pte_alloc takes pmd_lock()
        # (c4088ebdca64), the split PMD lock, as the 11 huge PMD faults do.
        assert st["&mm->page_table_lock"] == 1
        assert st["ptlock_ptr(pmd page)"] == 9 + 11 + huge
        assert st["mm->nr_ptes"] == 9 + 11  # __pte_alloc + huge PMD deposit
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
    ff = {"ff_cycles", "ff_skipped_ops", "ff_window_ops", "ff_windows_discarded", "ff_windows_unsteady",
          "ff_skipped_seconds", "elapsed_ci95_seconds"}
    assert set(a["sim"]) == {"events", "wall_seconds", "simulated_seconds"} | ff
    # 2,199 faults: too few for a window of 2,048 and a skip; the node check's 7,816 calls skip 2,524 of them
    # (0 until session 31: with find_vma's shared mmap_cache, v3.13, its windows agree on tiny)
    assert a["sim"]["ff_skipped_ops"] == 2524
    assert _strip_wall(a) == _strip_wall(b)
    assert a["perf"]["page-faults"] == 2199
    assert a["vmstat"]["thp_fault_alloc"] == 11
    assert a["command"] == "thp_memscale -C 0 -m 0 -c 4 -b 8000000"
    assert a["metrics"]["thp_memscale.elapsed_seconds"] == a["sim"]["simulated_seconds"]


@pytest.mark.usefixtures("use_tiny_preset")
def test_thp_never_has_only_small_faults() -> None:
    r = run(RunSpec("thp_memscale", "tiny", "v3.13", policies={"thp": "never"}, params=PARAMS))
    # Every page of the four 1954-page mallocs faults once, and each stack's top page (main's write).
    assert r.perf["page-faults"] == 4 * 1954 + 4
    assert r.vmstat["thp_fault_alloc"] == 0


def test_mmap_cache_load_waits_are_cpu_time(tiny: Machine) -> None:
    """``mm->mmap_cache`` (v3.12): a ``find_vma`` whose load waits for the line another CPU wrote stalls its CPU,
    so the wait is charged to that CPU as ``find_vma`` (task-clock and the profile), exactly the ns returned
    (session 33: the callers yielded it uncharged, and the 72-thread arm showed its CPUs idle)."""
    from mmsim.metrics.events import PerfEvent
    from mmsim.mm.mmap import MmStruct

    s = System(tiny, resolve("v3.12"), 0)
    mm = MmStruct(s, home_cpu=0)
    mc = mm.mmap_cache
    assert mc is not None
    a, b = object(), object()
    c = s.counters
    assert mc.find_vma(1, a) > 0  # the line starts at CPU 0: a transfer; a miss, CPU 1 stores
    d = mc.find_vma(2, b)  # CPU 1 wrote it: CPU 2's load waits; a miss again
    assert d > 0
    assert c.prof_ns[2]["find_vma"] == d and c.perf[2][PerfEvent.TASK_CLOCK] == d
    assert mc.find_vma(2, b) == 0 and c.prof_ns[2]["find_vma"] == d  # its own copy: a hit, nothing charged
