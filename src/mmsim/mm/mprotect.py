"""NUMA hinting PTEs: ``change_prot_numa`` → ``change_pte_range`` (mm/mprotect.c).

``change_prot_numa(vma, addr, end)`` (mm/mempolicy.c, v5.4) is
``change_protection(vma, addr, end, PAGE_NONE, 0, 1)``: walk the PMDs of the
range; a none PMD is skipped, a huge PMD goes to ``change_huge_pmd``, a PTE
table to ``change_pte_range`` under its PTE lock. For each present PTE with
``prot_numa`` the v5.4 loop (policy ``numa_scan_check=page-first``) does::

    page = vm_normal_page(vma, addr, oldpte);      /* NULL for the zero page */
    if (!page || PageKsm(page)) continue;          /* reads page->mapping: the struct page line */
    if (is_cow_mapping(..) && page_mapcount(page) != 1) continue;
    if (page_is_file_cache(page) && PageDirty(page)) continue;
    if (pte_protnone(oldpte)) continue;            /* already a hinting PTE */
    if (target_node == page_to_nid(page)) continue;
    ... ptep_modify_prot_start / pte_modify(PAGE_NONE) / ptep_modify_prot_commit; pages++

a818f5363a0e ("autonuma: reduce cache footprint when scanning page tables",
v5.5; policy ``protnone-first``) moves the ``pte_protnone`` test before
``vm_normal_page``, so a PTE that is still a hinting PTE from the previous
pass never touches its struct page. ``target_node`` is the CPU's node only
for a single-threaded private mapping (``mm_users == 1``), else
NUMA_NO_NODE. In the tiering mode (``numa_balancing=2``, v5.18+) pages on
top-tier (DRAM) nodes are skipped after the struct page lookup and the
scan time is recorded for the hot threshold.

Memory: PTEs are 8 bytes, 8 per 64-byte line; a struct page is 64 bytes, one
line. Both go through the LLC model (the same byte clock and capacity as
``machine/llc.py``, at line granularity): a line touched again before
``capacity`` bytes of other data went through the LLC is a hit. A missed
struct page line stalls for the memory latency of the node holding the
memmap, overlapped across loop iterations up to the core's memory-level
parallelism; PTE lines are read sequentially and overlap fully in the fill
buffers. The costs are charged to ``change_pte_range``.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES
from mmsim.metrics.events import VmEvent
from mmsim.mm.page_alloc import PAGE_SHIFT
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE, PTRS_PER_PTE, numa_arrays

NUMA_PTE_UPDATES = int(VmEvent.NUMA_PTE_UPDATES)
LINE = 64
PTES_PER_LINE = 8
NEVER = -1e30

# (cycles, instructions), estimates from the C code of the named v5.4 paths (IPC ~1 where not stalled).
# change_pte_range per PTE table: pte_offset_map_lock, flush_tlb_batched_pending, lazy MMU enter/leave. estimate
SCAN_TABLE = (120, 120)
# one loop iteration on a none PTE: load, pte_present() test, advance. estimate
SCAN_PTE_NONE = (3, 5)
# one iteration on a present PTE up to the prot_numa branch (incl. the pte_protnone test). estimate
SCAN_PTE_PRESENT = (8, 12)
# vm_normal_page + PageKsm + is_cow_mapping/page_mapcount + page_is_file_cache + page_to_nid, on a cached
# struct page line. estimate
SCAN_PAGE_CHECKS = (25, 35)
# ptep_modify_prot_start (a locked xchg, ~20 cycles on Skylake: Agner Fog's instruction tables), pte_modify,
# ptep_modify_prot_commit, pages++. estimate
SCAN_PTE_UPDATE = (30, 20)
# change_huge_pmd on a huge PMD: __pmd_trans_huge_lock, pmdp_invalidate, set_pmd_at. estimate
SCAN_HUGE_PMD = (300, 250)
# change_prot_numa per call: change_protection_range setup, mmu_notifier range start/end, tlb bookkeeping. estimate
PROT_NUMA_CALL = (400, 400)
# Misses of independent loop iterations overlap: Skylake-SP's 224-entry reorder buffer (Intel Optimization
# Reference Manual, 2.2) holds ~224 / 40 instructions ≈ 5 iterations of the page-first loop body.
STRUCT_PAGE_MLP = 5
# Sequential PTE lines overlap in the L1D fill buffers (Intel Optimization Reference Manual: 10 on
# Nehalem..Haswell; the value vm-scalability's random-access model uses too).
PTE_LINE_MLP = 10
# A full-mm TLB flush on the scanning CPU (flush_tlb_mm_range above tlb_single_page_flush_ceiling = 33
# pages: a CR3 reload and the refill of the working set's entries). estimate
TLB_FLUSH_LOCAL = (500, 100)

SCAN_CHECKS = ("page-first", "protnone-first")


def mm_users(s: Any, mm: Any) -> int:
    """``atomic_read(&mm->mm_users)``: the tasks registered as sharing ``mm``."""
    return max(1, len(s.mm_tasks.get(id(mm), ())))


def mm_cpus(s: Any, mm: Any) -> list[int]:
    """``mm_cpumask(mm)``: CPUs currently running a task of ``mm``."""
    cpus = s.sched.cpus
    return [t.cpu for t in s.mm_tasks.get(id(mm), ()) if cpus[t.cpu].current is t]


def touch_lines(s: Any, cpu: int, key: Hashable, nlines: int, idx: np.ndarray, now: int) -> int:
    """Reference lines ``idx`` (in order) of the object ``key`` (``nlines``
    64-byte lines) from ``cpu`` at ``now`` through its LLC instance: the LRU
    stack-distance rule of ``machine/llc.py`` at line granularity. Counts perf
    cache-references / cache-misses per line and returns the misses."""
    n = len(idx)
    if n == 0:
        return 0
    c = s.cache.of_cpu(cpu)
    clk = c.advance(now)
    a = s.line_stamps.get(key)
    if a is None:
        a = s.line_stamps[key] = np.full(nlines, NEVER)
    own = np.arange(n, dtype=np.float64) * LINE
    hit = (clk - a[idx] + own) < c.capacity
    a[idx] = clk + own + LINE
    c.add_stream(now, n * LINE, 0)
    nmiss = int(n - np.count_nonzero(hit))
    p = s.counters.perf[cpu]
    p[CACHE_REFERENCES] += n
    p[CACHE_MISSES] += nmiss
    return nmiss


def touch_line(s: Any, cpu: int, key: Hashable, nlines: int, i: int, now: int) -> int:
    """:func:`touch_lines` for the one line ``i`` (a hinting fault's struct
    page), in scalar code; returns 1 on a miss, else 0."""
    c = s.cache.of_cpu(cpu)
    clk = c.advance(now)
    a = s.line_stamps.get(key)
    if a is None:
        a = s.line_stamps[key] = np.full(nlines, NEVER)
    miss = 0 if clk - float(a[i]) < c.capacity else 1
    a[i] = clk + LINE
    c.add_stream(now, LINE, 0)
    p = s.counters.perf[cpu]
    p[CACHE_REFERENCES] += 1
    p[CACHE_MISSES] += miss
    return miss


def mem_latency_ns(s: Any, cpu: int, node: int) -> float:
    """Idle load-to-use latency from ``cpu`` to memory on ``node``
    (:meth:`Machine.mem_latency_ns`: the node's own latency from its socket, its
    remote latency from the nearest other socket, SLIT-scaled beyond)."""
    lat: float = s.machine.mem_latency_ns(cpu, node)
    return lat


def memmap_node(s: Any, node: int) -> int:
    """Where the struct pages of ``node`` live: a CPU-less (hot-added PMEM)
    node's memmap is allocated when it is onlined, from its socket's DRAM
    node; every other node holds its own (``sparse_init_nid``)."""
    m = s.machine
    if any(sk.node == node for sk in m.sockets):  # node_cpus(node) is not empty: a socket's own node
        return node
    return int(m.sockets[m.nodes[node].socket].node)


def _memmap_latency(s: Any, cpu: int) -> np.ndarray:
    """Per node, the latency from ``cpu`` to the memory holding that node's struct pages (cached per run)."""
    cache: dict[int, np.ndarray] = s.__dict__.setdefault("_memmap_lat", {})
    a = cache.get(cpu)
    if a is None:
        a = cache[cpu] = np.array([mem_latency_ns(s, cpu, memmap_node(s, n)) for n in range(len(s.machine.nodes))])
    return a


def _ns(s: Any, cyc: float) -> float:
    return float(cyc / s.machine.freq_ghz)


def change_pte_range(
    task: Task, mm: Any, slot: int, target_node: int, now_ms: float, lo: int = 0, hi: int = PTRS_PER_PTE
) -> Generator[Any, Any, int]:
    """One PTE table (``slot``) under its PTE lock, its PTEs ``[lo, hi)`` (the part of the table inside
    the range being changed: a table can hold the ends of two VMAs); returns the PTEs updated.
    Vectorised over the PTEs; one busy period charged to ``change_pte_range``."""
    s = mm.system
    cpu = task.cpu
    pt = mm.pgtables
    present = pt.ptes.get(slot)
    nid, prot, _last, scan_ms = numa_arrays(pt, slot)
    whole = lo == 0 and hi == PTRS_PER_PTE
    if not whole:  # views: the updates below write through to the table's arrays
        nid, prot, scan_ms = nid[lo:hi], prot[lo:hi], scan_ms[lo:hi]
        present = present[lo:hi] if present is not None else None
    lk = pt.pte_lockptr(slot)
    yield lk.acquire(task)
    now = s.engine.now
    pres = present if present is not None else np.zeros(hi - lo, dtype=bool)
    npresent = int(np.count_nonzero(pres))
    # PTE lines: the range's lines of the table are read in order.
    pte_key = ("pte table", id(mm), slot)
    lines = _ALL_PTE_LINES if whole else _ALL_PTE_LINES[lo // PTES_PER_LINE:(hi - 1) // PTES_PER_LINE + 1]
    pte_miss = touch_lines(s, cpu, pte_key, PTRS_PER_PTE // PTES_PER_LINE, lines, now)
    # Which present PTEs look up their struct page.
    has_page = pres & (nid >= 0)  # vm_normal_page() is NULL for the zero page
    check = s.policy("numa_scan_check")
    if check == "protnone-first":
        lookup = has_page & ~prot
    else:
        lookup = has_page
    eligible = has_page & ~prot
    if target_node >= 0:
        eligible &= nid != target_node
    if s.policy("numa_balancing") == "2":
        # tiering without NUMA_BALANCING_NORMAL: "Skip scanning top tier node if normal numa balancing is
        # disabled" (v6.6)
        eligible &= ~s.numa_toptier[np.maximum(nid, 0)]
    sel = np.flatnonzero(lookup)  # in the range
    idx = sel + lo if lo else sel  # struct page lines are indexed by the PTE's place in the table
    sp_miss = 0
    stall = 0.0
    if len(idx):
        sp_key = ("struct page", id(mm), slot)
        sp_miss = touch_lines(s, cpu, sp_key, PTRS_PER_PTE, idx, now)
        if sp_miss:
            # the memmap latency averaged over the looked-up pages' nodes (misses spread in proportion)
            by_node = _memmap_latency(s, cpu)
            lat = float(by_node[nid[sel]].mean())
            stall = sp_miss * lat / STRUCT_PAGE_MLP
    hits = len(idx) - sp_miss
    l3 = s.machine.caches[-1].latency_ns
    nupd = int(np.count_nonzero(eligible))
    cyc = (
        SCAN_TABLE[0]
        + (hi - lo - npresent) * SCAN_PTE_NONE[0]
        + npresent * SCAN_PTE_PRESENT[0]
        + len(idx) * SCAN_PAGE_CHECKS[0]
        + nupd * SCAN_PTE_UPDATE[0]
    )
    ins = (
        SCAN_TABLE[1]
        + (hi - lo - npresent) * SCAN_PTE_NONE[1]
        + npresent * SCAN_PTE_PRESENT[1]
        + len(idx) * SCAN_PAGE_CHECKS[1]
        + nupd * SCAN_PTE_UPDATE[1]
    )
    pte_stall = pte_miss * mem_latency_ns(s, cpu, s.machine.cpu_node(mm.home_cpu)) / PTE_LINE_MLP
    ns = _ns(s, cyc) + stall + hits * l3 / STRUCT_PAGE_MLP + pte_stall
    st = s.numa_stats
    st["scan_ptes_present"] += npresent
    st["scan_struct_page_refs"] += len(idx)
    st["scan_struct_page_misses"] += sp_miss
    st["scan_protnone_skipped"] += int(np.count_nonzero(has_page & prot))
    if nupd:
        prot |= eligible
        scan_ms[eligible] = now_ms
        s.counters.vm[cpu][NUMA_PTE_UPDATES] += nupd
    yield s.counters.busy(cpu, "change_pte_range", int(ns) + 1, ins)
    lk.release(task)
    return nupd


_ALL_PTE_LINES = np.arange(PTRS_PER_PTE // PTES_PER_LINE, dtype=np.int64)
_ALL_PTE_LINES.setflags(write=False)


def change_huge_pmd(task: Task, mm: Any, slot: int) -> Generator[Any, Any, int]:
    """mm/huge_memory.c ``change_huge_pmd`` with prot_numa (v5.4): skip the huge
    zero page and PMDs already protnone, else make the PMD a hinting PMD."""
    s = mm.system
    pt = mm.pgtables
    if slot in pt.zero_huge or slot in pt.huge_protnone:
        return 0
    if s.policy("numa_balancing") == "2" and s.numa_toptier[pt.huge_node.get(slot, 0)]:
        return 0
    lk = pt.pmd_lockptr(slot)
    yield lk.acquire(task)
    pt.huge_protnone.add(slot)
    s.counters.vm[task.cpu][NUMA_PTE_UPDATES] += PTRS_PER_PTE
    yield s.counters.busy(task.cpu, "change_huge_pmd", int(_ns(s, SCAN_HUGE_PMD[0])) + 1, SCAN_HUGE_PMD[1])
    lk.release(task)
    return PTRS_PER_PTE


def change_prot_numa(task: Task, mm: Any, start: int, end: int, now_ms: float) -> Generator[Any, Any, int]:
    """mm/mempolicy.c ``change_prot_numa`` → ``change_protection_range`` over
    ``[start, end)`` (2 MiB aligned ranges as ``task_numa_work`` hands them
    out); returns ``nr_updated``. A TLB flush of the mm follows when any PTE
    changed (``flush_tlb_range``): local, plus a shootdown IPI to every other
    CPU currently running the mm, waited for."""
    s = mm.system
    cpu = task.cpu
    pt = mm.pgtables
    yield s.counters.busy(cpu, "change_prot_numa", int(_ns(s, PROT_NUMA_CALL[0])) + 1, PROT_NUMA_CALL[1])
    single = mm_users(s, mm) == 1
    target = s.machine.cpu_node(cpu) if single else -1
    pages = 0
    first, last = start >> PMD_SHIFT, (end - 1) >> PMD_SHIFT
    for slot in range(first, last + 1):
        state = pt.pmd.get(slot)
        if state == PMD_TABLE:
            lo = (start >> PAGE_SHIFT) & (PTRS_PER_PTE - 1) if slot == first else 0
            hi = (((end - 1) >> PAGE_SHIFT) & (PTRS_PER_PTE - 1)) + 1 if slot == last else PTRS_PER_PTE
            pages += yield from change_pte_range(task, mm, slot, target, now_ms, lo, hi)
        elif state == PMD_HUGE:
            pages += yield from change_huge_pmd(task, mm, slot)
        if s.sched.cpus[cpu].need_resched:
            yield from s.sched.cond_resched(task)
    if pages:
        yield flush_tlb_range(task, mm)
    return pages


def flush_tlb_range(task: Task, mm: Any) -> int:
    """arch/x86/mm/tlb.c ``flush_tlb_mm_range`` for a range above the single-page
    ceiling: a local full flush, and ``native_flush_tlb_others`` to the other
    CPUs running the mm (an IPI each way: two cache-line transfers to the
    farthest of them, sent in parallel). Returns the ns charged."""
    s = mm.system
    cpu = task.cpu
    ns = _ns(s, TLB_FLUSH_LOCAL[0])
    others = [c for c in mm_cpus(s, mm) if c != cpu]
    if others:
        ns += 2 * max(s.machine.xfer_ns(cpu, c, modified=True) for c in others)  # IPI and ack lines
    r: int = s.counters.busy(cpu, "flush_tlb_mm_range", int(ns) + 1, TLB_FLUSH_LOCAL[1])
    return r
