"""What ``zap_pte_range`` does per PTE table beyond clearing present PTEs (mm/memory.c, v6.7).

Read in mm/memory.c of v6.7 (``zap_pte_range``: page_remove_rmap, ``tlb_delay_rmap``, hugetlb_zap_begin
and ``zap_install_uffd_wp_if_needed`` taking ``details``; the code the store holds as id 39934386522),
mm/mmu_gather.c and mm/swap.c of the same release. Session 9 (issues 15 and 22) added:

* **The walk over none PTEs.** ``zap_pte_range(addr, end)`` reads every PTE slot of the range and
  ``continue``s past each ``pte_none`` one: a VMA that touched one page of a 2 MiB table (malloc1's
  header) pays 511 of these. ``zap_pte_range/none`` per slot.
* **A present PTE that maps a page-cache folio** (``!PageAnon``): ``pte_dirty`` → ``set_page_dirty``
  (shmem: ``noop_dirty_folio``, the folio is dirty already) and, since ``tlb_delay_rmap`` is true on x86,
  ``delay_rmap`` and ``force_flush``; ``pte_young`` → ``mark_page_accessed``; ``page_remove_rmap`` (at once
  or in ``tlb_flush_rmaps``): the ``_mapcount`` atomic and ``__lruvec_stat_mod_folio(NR_FILE_MAPPED)``;
  ``__tlb_remove_page``; then ``tlb_flush_mmu`` → ``free_pages_and_swap_cache`` → ``release_pages``:
  ``folio_put_testzero`` (the page cache keeps its reference, nothing is freed). Charged as one measured
  aggregate, ``zap_pte_range/file``, plus the state-dependent parts below. Session 12 measured it again on
  the host with its parts split by perf (mm/costs.py, docs/fault-front-half.md "Session 12"): 200 cycles,
  against session 9's 300 from a loaded host. In v6.6 none of these per-folio steps is batched for an
  order-0 folio (``page_remove_rmap`` and ``release_pages`` walk the gathered pages one by one; the
  delayed rmap only moves the ``_mapcount`` atomic after the table's TLB flush).
* **The folio's ``struct page`` line.** The fault touched it (``folio_try_get``, the lock, the rmap) a
  whole round earlier. Between the two, this CPU referenced at least the struct page lines (64 B) and the
  PTEs (8 B) of every other page of the mapping, so the line's reuse distance is at least
  ``72 B x present file PTEs``: a hit in the L2 (exact LRU, as machine/hierarchy.py treats the L2) while that
  is smaller than the L2, else an L3 hit (``latency_ns`` of the L3) while smaller than the L3, else memory.
  A lower bound: the user's own stores and the kernel's other lines are not counted.
* **The L2 streamer over those lines** (session 11). Consecutive pages of a tmpfs file are mostly
  consecutive pfns (measured on the host, kernel 6.18: 96% of a 128 MiB memfd's neighbouring pages have
  their struct pages in the same or the next 4 KiB vmemmap page; the model's allocator gives 99%), so
  the struct page lines a sequential walk reads (the unmap's PTE order, and the next round's faults in
  page order) form an ascending or descending stream in each vmemmap 4 KiB page, which the L2 streamer
  follows (Intel Opt. manual §2.3.5.4, as mm/buddy.py treats the allocator's own struct page lines:
  ``STREAM_START`` demand misses per 4 KiB page, then covered, ``STREAMS`` pages tracked per core).
  :func:`streamed_misses` counts the lines it does not cover, per CPU, across calls; a covered line is
  an L2 hit (0 here, as an L2 hit is above). Measured on the host against it (session 11, 2 tasks):
  page_fault3's munmap takes 130-220 ns per page of thread CPU time in all; charging a full L3 latency
  per page (132 ns on that calibration) put the model at 294 ns.
* **``folio_mark_accessed``** (mm/swap.c v6.7) as a state machine per folio (``PG_referenced``,
  ``PG_active``, kept in :class:`~mmsim.mm.shmem.ShmemInode`): not referenced → set it; referenced and
  inactive → ``folio_activate`` (mm/lru_anon.py: the per-CPU ``activate`` batch, moved under
  ``lruvec->lru_lock``) and clear it; referenced and active → nothing. A page_fault3 file's pages are
  activated at the second unmap of their mapping and left alone from the fourth on.
* **The same line at the next fault** (mm/shmem.py ``shmem_fault``, a folio found in the page cache): the
  same lower bound, when this CPU touched the line last (``fault_struct_page_misses``).
* **``force_flush`` per table** with a dirty shared PTE: ``tlb_flush_mmu_tlbonly`` → ``flush_tlb_mm_range``
  over the table's range (512 pages > ``tlb_single_page_flush_ceiling`` = 33: a full flush of the mm;
  the IPI round trip to each other CPU of ``mm_cpumask``, as mm/munmap.py charges the final flush), and
  ``tlb_flush_mmu`` → ``free_pages_and_swap_cache`` → ``lru_add_drain``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.machine.hierarchy import STREAM_START
from mmsim.mm.buddy import STREAMS
from mmsim.mm.costs import path

STRUCT_PAGE_BYTES = 64  # sizeof(struct page) on x86-64: one cache line
PTE_BYTES = 8
PTRS_PER_PTE = 512
ZAP_STATS = ("zap_none_ptes", "zap_file_ptes", "zap_struct_page_misses", "zap_force_flushes", "folio_activate",
             "folio_set_referenced", "fault_struct_page_misses")


def zap_stats(s: Any) -> dict[str, int]:
    """Counts of the pieces above (no vm_event_item counts them, except ``pgactivate``)."""
    st: dict[str, int] | None = getattr(s, "zap_stats", None)
    if st is None:
        st = s.zap_stats = dict.fromkeys(ZAP_STATS, 0)
    return st


def none_ptes(vma: Any, slot: int, present: int) -> int:
    """PTE slots of PMD ``slot`` inside ``vma`` that ``zap_pte_range`` walks past as ``pte_none``."""
    lo = max(int(vma.start), slot << 21)
    hi = min(int(vma.end), (slot + 1) << 21)
    return max(0, ((hi - lo) >> 12) - present)


def scan_none(task: Task, s: Any, n: int) -> int:
    """``zap_pte_range``'s ``pte_none`` → ``continue`` for ``n`` slots. Returns ns charged."""
    if n <= 0:
        return 0
    zap_stats(s)["zap_none_ptes"] += n
    cyc, ins = path("zap_pte_range/none", 1.0)
    d: int = s.counters.busy(task.cpu, "unmap_page_range", int(cyc * n / s.machine.freq_ghz), ins * n)
    return d


def struct_page_ns(s: Any, cpu: int, reuse_bytes: int) -> float:
    """The cost of reading a struct page line last touched ``reuse_bytes`` of this CPU's references ago:
    0 in the L2, the L3's latency in the L3, else the memory latency of the CPU's node."""
    m = s.machine
    lv: tuple[int, int, float] | None = getattr(s, "struct_page_levels", None)
    if lv is None:  # the machine's L2 size, L3 size (-1: none) and L3 latency, looked up once per run
        try:
            l2 = m.cache("L2").capacity_kib * 1024
        except KeyError:
            l2 = 0
        try:
            l3 = m.cache("L3")
            lv = (l2, l3.capacity_kib * 1024, float(l3.latency_ns))
        except KeyError:
            lv = (l2, -1, 0.0)
        s.struct_page_levels = lv
    if reuse_bytes < lv[0]:
        return 0.0
    if reuse_bytes < lv[1]:
        return lv[2]
    return float(m.mem_latency_ns(cpu, m.cpu_node(cpu)))


def streamed_miss(s: Any, cpu: int, pfn: int) -> bool:
    """:func:`streamed_misses` of one line (the fault path's lookup): whether the streamer misses it."""
    st = _streams(s, cpu)
    if pfn < 0:
        return True
    return _track(st, pfn >> 6, 1) > 0


def streamed_misses(s: Any, cpu: int, pfns: np.ndarray) -> int:
    """Of the struct page lines of ``pfns``, read in this order by ``cpu``, the ones the L2 streamer does not
    cover: the first ``STREAM_START`` in each vmemmap 4 KiB page (64 struct pages) since that page's stream
    was last tracked on this CPU; at most ``STREAMS`` pages tracked, the least recently used dropped. A pfn
    < 0 (not known) is a miss. The per-CPU state lives on the System (``struct_page_streams``)."""
    n = len(pfns)
    if n == 0:
        return 0
    st = _streams(s, cpu)
    pf = np.asarray(pfns, dtype=np.int64)
    unknown = int((pf < 0).sum())
    vp = pf[pf >= 0] >> 6
    if len(vp) == 0:
        return unknown
    # runs of one vmemmap page: within a run the order of the lines does not change the count
    cut = np.flatnonzero(vp[1:] != vp[:-1]) + 1
    starts = np.concatenate(([0], cut))
    lengths = np.diff(np.concatenate((starts, [len(vp)])))
    misses = unknown
    for v, ln in zip(vp[starts].tolist(), lengths.tolist(), strict=True):
        misses += _track(st, v, ln)
    return misses


def _streams(s: Any, cpu: int) -> dict[int, int]:
    """``cpu``'s tracked vmemmap pages (page -> lines read since tracked), least recently used first."""
    streams: dict[int, dict[int, int]] | None = getattr(s, "struct_page_streams", None)
    if streams is None:
        streams = s.struct_page_streams = {}
    st = streams.get(cpu)
    if st is None:
        st = streams[cpu] = {}
    return st


def _track(st: dict[int, int], v: int, n: int) -> int:
    """``n`` lines of vmemmap page ``v`` read: the demand misses among them (up to ``STREAM_START`` since the
    page was tracked); ``v`` becomes the most recently used, the least recently used dropped past ``STREAMS``."""
    c = st.pop(v, 0)
    if len(st) >= STREAMS:
        del st[next(iter(st))]  # the least recently used tracked page makes room
    st[v] = c + n
    return max(0, min(n, STREAM_START - c))


def file_reuse_bytes(n_file: int) -> int:
    """The lower bound on a file folio's struct page reuse distance in a round over ``n_file`` pages."""
    return n_file * (STRUCT_PAGE_BYTES + PTE_BYTES)


def zap_file_ptes(
    task: Task, s: Any, mm: Any, vma: Any, slot: int, bits: np.ndarray, miss_ns: float, cpus: list[int]
) -> Generator[Any, Any, bool]:
    """The file-folio work of ``zap_pte_range`` for the present PTEs ``bits`` (indices into the table) of a
    shared tmpfs VMA, under the table's PTE lock. Returns ``force_flush`` (a dirty PTE was zapped): the
    caller runs :func:`force_flush_tail` after dropping the lock."""
    from mmsim.mm import lru_anon

    inode = vma.file
    n = len(bits)
    if n == 0:
        return False
    cpu = task.cpu
    st = zap_stats(s)
    st["zap_file_ptes"] += n
    f = s.machine.freq_ghz
    cyc, ins = path("zap_pte_range/file", 1.0)
    d = s.counters.busy(cpu, "zap_pte_range [file folio]", int(cyc * n / f), ins * n)
    idx = ((slot << 21) - vma.start >> 12) + int(vma.pgoff) + bits.astype(np.int64)
    if miss_ns > 0:
        miss = streamed_misses(s, cpu, inode.pfn[idx])
        st["zap_struct_page_misses"] += miss
        if miss:
            d += s.counters.busy(cpu, "zap_pte_range [struct page]", int(miss_ns * miss))
    # folio_mark_accessed on every young PTE (each page was accessed through its PTE)
    ref, act = inode.referenced, inode.active
    r, a = ref[idx], act[idx]
    set_ref = idx[~r]
    activate = idx[r & ~a]
    ref[set_ref] = True
    if len(set_ref):
        st["folio_set_referenced"] += len(set_ref)
        c2, i2 = path("folio_set_referenced", 1.0)
        d += s.counters.busy(cpu, "folio_mark_accessed", int(c2 * len(set_ref) / f), i2 * len(set_ref))
    yield d
    if len(activate):
        act[activate] = True
        ref[activate] = False
        st["folio_activate"] += len(activate)
        yield from lru_anon.folio_activate(task, s, [inode.pages.get(int(i), 0) for i in activate])
    dirty = (id(mm), slot) in inode.dirty_tables
    inode.dirty_tables.discard((id(mm), slot))
    if dirty:
        # force_flush: tlb_flush_mmu_tlbonly (a full flush: the table's 512 pages > the ceiling of 33)
        st["zap_force_flushes"] += 1
        c3, i3 = path("flush_tlb_mm_range/full", 1.0)
        xfer = s.machine.xfer_ns
        ipi = sum(2 * xfer(cpu, o, modified=True) for o in cpus if o != cpu)
        yield s.counters.busy(cpu, "flush_tlb_mm_range", int(c3 / f + ipi), i3)
    return dirty


def force_flush_tail(task: Task, s: Any) -> Generator[Any, Any, None]:
    """``tlb_flush_mmu`` after the PTE lock is dropped: ``free_pages_and_swap_cache`` → ``lru_add_drain``
    (``release_pages``' per-folio work is in ``zap_pte_range/file``)."""
    from mmsim.mm import lru_anon

    yield from lru_anon.lru_add_drain(task, s)
