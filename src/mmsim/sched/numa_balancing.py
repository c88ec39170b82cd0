"""Automatic NUMA balancing, the scheduler side (kernel/sched/fair.c, v5.4;
the memory-tiering mode of v5.18+/v6.6).

* ``task_tick_numa``: on the tick, once the task has run ``numa_scan_period``
  since its last stamp and the mm's ``numa_next_scan`` has passed, queue
  ``task_numa_work`` to run on the next return to user space. Workloads call
  :func:`task_tick_numa` at their return-to-user points; the work runs in
  the task's context, charged to its CPU.
* ``task_numa_work``: at most once per ``numa_scan_period`` per mm (the
  ``cmpxchg`` on ``mm->numa_next_scan``), from ``mm->numa_scan_offset``, call
  ``change_prot_numa`` on 2 MiB-aligned chunks of the VMAs until
  ``scan_size_mb`` of pages were in ranges with updates or 8× that much
  virtual space was covered; wrapping around increments ``numa_scan_seq``.
* ``task_numa_fault``: per hinting fault, the private/shared and
  local/remote statistics (``numa_faults_locality``); at the first fault
  after a new ``numa_scan_seq`` ``task_numa_placement`` runs
  ``update_task_scan_period`` (scan slower when faults are private or local,
  faster when remote and shared), clamped to ``task_scan_min/max``.
* ``should_numa_migrate_memory``: the two-stage ``last_cpupid`` filter; in
  the tiering mode (``numa_balancing=2``) a slow-tier page is promoted when
  the top-tier node has ample free space, else when its hint-fault latency
  (fault time − scan time) is under the hot threshold and the per-node
  promotion rate limit allows.

Not modelled: NUMA groups (``task_numa_group``: tasks are never merged into
a group, so faults are shared only when another task last touched the
page), moving tasks to their preferred node (``numa_migrate_preferred`` /
``task_numa_migrate``; tasks stay on their CPUs), the decay of
``numa_faults``, the tiering mode's adaptive threshold
(``numa_promotion_adjust_threshold``) and demotion of cold DRAM pages.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.mm.mprotect import change_prot_numa
from mmsim.mm.pgtable import PMD_HUGE, PMD_TABLE

NUMA_PERIOD_SLOTS = 10  # kernel/sched/fair.c
NUMA_PERIOD_THRESHOLD = 7  # kernel/sched/fair.c
MAX_SCAN_WINDOW = 2560  # MB/s: "never scan more PTEs than MAX_SCAN_WINDOW MB/sec"
PAGE_SHIFT = 12
HPAGE_SIZE = 2 << 20
MS = 1_000_000
# (cycles, instructions) of task_numa_work around the change_prot_numa calls: mmap_sem trylock,
# find_vma, the VMA filters, the offset update. estimate
TASK_NUMA_WORK = (800, 800)
# task_numa_fault's statistics (numa_faults[] updates, placement check). estimate
TASK_NUMA_FAULT = (150, 150)


# change_prot_numa and what it calls in the model: the page-table scanning time of seeds/002's profile.
SCAN_FUNCS = ("change_prot_numa", "change_pte_range", "change_huge_pmd", "flush_tlb_mm_range")


def scan_share(s: Any) -> float:
    """Cycles in page-table scanning (``SCAN_FUNCS``) / all cycles of the run."""
    prof = s.counters.profile_total()
    total = sum(e.ns for e in prof.values())
    scan = sum(prof[f].ns for f in SCAN_FUNCS if f in prof)
    return scan / total if total else 0.0


@dataclass
class NumaTask:
    """The ``task_struct`` NUMA balancing fields of one task."""

    scan_period_ms: int  # p->numa_scan_period
    scan_period_max_ms: int = 0
    node_stamp_ns: int = 0
    scan_seq: int = 0  # p->numa_scan_seq
    locality: list[int] = field(default_factory=lambda: [0, 0, 0])  # remote, local, migrate failed
    faults_private: int = 0
    faults_shared: int = 0
    pages_migrated: int = 0
    period_history: list[int] = field(default_factory=list)


@dataclass
class NumaMm:
    """The ``mm_struct`` NUMA balancing fields."""

    next_scan_ns: int  # mm->numa_next_scan
    scan_offset: int = 0  # mm->numa_scan_offset
    scan_seq: int = 0  # mm->numa_scan_seq


@dataclass
class PromoteRate:
    """Per-node promotion rate-limit window (``pgdat->nbp_rl_start`` / ``nbp_rl_nr_cand``)."""

    start_ms: float = 0.0
    nr_cand: int = 0


NUMA_BALANCING_NORMAL = 0x1  # include/linux/sched/sysctl.h (v5.18+; RFC 03/10 of seeds/002's series)
NUMA_BALANCING_MEMORY_TIERING = 0x2


def mode(s: Any) -> int:
    """``sysctl_numa_balancing_mode``: an OR of the flags above."""
    return int(s.policy("numa_balancing"))


def enabled(s: Any) -> bool:
    return mode(s) != 0


def tiering(s: Any) -> bool:
    return bool(mode(s) & NUMA_BALANCING_MEMORY_TIERING)


def normal(s: Any) -> bool:
    return bool(mode(s) & NUMA_BALANCING_NORMAL)


def _sysctl(s: Any, name: str) -> int:
    return int(s.policy(f"numa_balancing_{name}"))


def init_task(s: Any, task: Task, mm: Any) -> NumaTask:
    """``init_numa_balancing`` at fork: period = scan delay; the mm's first scan
    is ``scan_delay`` from now. Registers ``task`` as a user of ``mm``."""
    users = s.mm_tasks.setdefault(id(mm), [])
    if task not in users:
        users.append(task)
    delay = _sysctl(s, "scan_delay_ms")
    if id(mm) not in s.numa_mm:
        s.numa_mm[id(mm)] = NumaMm(s.engine.now + delay * MS)
    nt = NumaTask(scan_period_ms=delay)
    task.data["numa"] = nt
    return nt


def get_mm_rss(mm: Any) -> int:
    """Resident pages of ``mm`` (``get_mm_rss``), from the page tables."""
    pt = mm.pgtables
    n = 0
    covered: tuple[int, int] | None = None
    if len(pt.dense) == 1:  # a workload's dense range (pgtable.DenseNuma): one count over its flat array
        d = pt.dense[0]
        if all(pt.pmd.get(d.first_slot + k) == PMD_TABLE for k in range(d.nslots)):
            covered = (d.first_slot, d.first_slot + d.nslots)
            n += int(np.count_nonzero(d.present))
    n += sum(int(b.sum()) for s, b in pt.ptes.items() if pt.pmd.get(s) == PMD_TABLE
             and (covered is None or not covered[0] <= s < covered[1]))
    huge = sum(1 for v in pt.pmd.values() if v == PMD_HUGE)
    return n + 512 * huge


def task_nr_scan_windows(s: Any, mm: Any) -> int:
    nr_scan_pages = _sysctl(s, "scan_size_mb") << (20 - PAGE_SHIFT)
    rss = get_mm_rss(mm) or nr_scan_pages
    rss = -(-rss // nr_scan_pages) * nr_scan_pages
    return max(1, rss // max(1, nr_scan_pages))


def task_scan_min(s: Any, mm: Any) -> int:
    """``task_scan_min`` (v5.4): at most MAX_SCAN_WINDOW MB/s of PTEs."""
    scan_size = max(1, _sysctl(s, "scan_size_mb"))
    windows = MAX_SCAN_WINDOW // scan_size if scan_size < MAX_SCAN_WINDOW else 1
    floor = 1000 // windows
    scan = _sysctl(s, "scan_period_min_ms") // task_nr_scan_windows(s, mm)
    return max(floor, scan)


def task_scan_max(s: Any, mm: Any) -> int:
    """``task_scan_max`` (v5.4) without a NUMA group."""
    smin = task_scan_min(s, mm)
    smax = _sysctl(s, "scan_period_max_ms") // task_nr_scan_windows(s, mm)
    return max(smin, smax)


def task_tick_numa(s: Any, task: Task, mm: Any) -> bool:
    """``task_tick_numa``: True when ``task_numa_work`` is due on return to user."""
    nt: NumaTask | None = task.data.get("numa")
    if nt is None or not enabled(s):
        return False
    now = s.engine.now
    runtime = now - max(0, task.started_at)  # se.sum_exec_runtime of an always-running task
    period = nt.scan_period_ms * MS
    if runtime > nt.node_stamp_ns + period:
        if not nt.node_stamp_ns:
            nt.scan_period_ms = task_scan_min(s, mm)  # task_scan_start without a NUMA group
        nt.node_stamp_ns += period
        return bool(now >= s.numa_mm[id(mm)].next_scan_ns)
    return False


def next_tick_ns(s: Any, task: Task, mm: Any) -> int:
    """The earliest time :func:`task_tick_numa` can return True for ``task``:
    its runtime past ``node_stamp + numa_scan_period`` and the mm's
    ``numa_next_scan`` passed (workloads that sample accesses in chunks end a
    chunk there). Without NUMA balancing state: far in the future."""
    nt: NumaTask | None = task.data.get("numa")
    if nt is None or not enabled(s):
        return 1 << 62
    own = max(0, task.started_at) + nt.node_stamp_ns + nt.scan_period_ms * MS + 1
    return max(own, int(s.numa_mm[id(mm)].next_scan_ns))


def task_numa_work(task: Task, mm: Any) -> Generator[Any, Any, int]:
    """``task_numa_work`` (kernel/sched/fair.c, v5.4); returns PTEs updated."""
    s = mm.system
    st: NumaMm = s.numa_mm[id(mm)]
    nt: NumaTask = task.data["numa"]
    now = s.engine.now
    if now < st.next_scan_ns:
        return 0
    if nt.scan_period_max_ms == 0:
        nt.scan_period_max_ms = task_scan_max(s, mm)
    st.next_scan_ns = now + nt.scan_period_ms * MS
    nt.node_stamp_ns += 2 * 4 * MS  # p->node_stamp += 2 * TICK_NSEC (HZ = 250)
    pages = _sysctl(s, "scan_size_mb") << (20 - PAGE_SHIFT)
    virtpages = pages * 8
    if not pages:
        return 0
    ns, ins = TASK_NUMA_WORK
    yield s.counters.busy(task.cpu, "task_numa_work", int(ns / s.machine.freq_ghz) + 1, ins)
    s.numa_stats["scans"] += 1
    now_ms = now / MS
    # v5.4: skip !vma_migratable / !vma_policy_mof / hugetlb VMAs, and "inaccessible VMAs to avoid any
    # confusion between PROT_NONE and NUMA hinting ptes" (a thread stack's guard page)
    vmas = sorted((v for v in mm.vmas if v.anon and not v.hugetlb and not v.prot_none and _policy_mof(s, v)),
                  key=lambda v: v.start)
    start = st.scan_offset
    todo = [v for v in vmas if v.end > start]
    if not todo:
        st.scan_offset = 0
        st.scan_seq += 1  # reset_ptenuma_scan
        start = 0
        todo = vmas
    updated = 0
    done = False
    for vma in todo:
        while True:
            start = max(start, vma.start)
            end = min((start + (pages << PAGE_SHIFT) + HPAGE_SIZE - 1) & ~(HPAGE_SIZE - 1), vma.end)
            n = yield from change_prot_numa(task, mm, start, end, now_ms)
            updated += n
            if n:
                pages -= (end - start) >> PAGE_SHIFT
            virtpages -= (end - start) >> PAGE_SHIFT
            start = end
            if pages <= 0 or virtpages <= 0:
                done = True
                break
            if end == vma.end:
                break
        if done:
            break
    if done:  # "goto out" with a VMA in hand: resume here next time (a find_vma miss then wraps)
        st.scan_offset = start
    else:  # ran off the last VMA: reset_ptenuma_scan
        st.scan_offset = 0
        st.scan_seq += 1
    return updated


def _policy_mof(s: Any, vma: Any) -> bool:
    from mmsim.mm.mempolicy import get_vma_policy

    return get_vma_policy(s, vma).mof


def task_numa_fault(s: Any, task: Task, mm: Any, mem_node: int, priv: bool, migrated: bool, failed: bool) -> int:
    """``task_numa_fault`` (v5.4) for one page; returns the ns charged."""
    nt: NumaTask | None = task.data.get("numa")
    if nt is None:
        return 0
    local = mem_node == s.machine.cpu_node(task.cpu)
    seq = s.numa_mm[id(mm)].scan_seq
    if nt.scan_seq != seq:
        task_numa_placement(s, nt, mm, seq)
    if migrated:
        nt.pages_migrated += 1
    if failed:
        nt.locality[2] += 1
    if priv:
        nt.faults_private += 1
    else:
        nt.faults_shared += 1
    nt.locality[1 if local else 0] += 1
    ns, ins = TASK_NUMA_FAULT
    r: int = s.counters.busy(task.cpu, "task_numa_fault", int(ns / s.machine.freq_ghz) + 1, ins)
    return r


def task_numa_placement(s: Any, nt: NumaTask, mm: Any, seq: int) -> None:
    """``task_numa_placement``: on a new scan sequence, adapt the scan period
    from the faults since the last one (preferred-node selection is not modelled)."""
    nt.scan_seq = seq
    nt.scan_period_max_ms = task_scan_max(s, mm)
    update_task_scan_period(s, nt, mm, nt.faults_shared, nt.faults_private)
    nt.faults_shared = nt.faults_private = 0


def update_task_scan_period(s: Any, nt: NumaTask, mm: Any, shared: int, private: int) -> None:
    """``update_task_scan_period`` (kernel/sched/fair.c, v5.4)."""
    remote, local, failed = nt.locality
    if local + shared == 0 or failed:
        nt.scan_period_ms = min(nt.scan_period_max_ms, nt.scan_period_ms << 1)
        s.numa_mm[id(mm)].next_scan_ns = s.engine.now + nt.scan_period_ms * MS
        nt.period_history.append(nt.scan_period_ms)
        return  # numa_faults_locality is not cleared on this path (v5.4)
    period_slot = -(-nt.scan_period_ms // NUMA_PERIOD_SLOTS)
    lr_ratio = (local * NUMA_PERIOD_SLOTS) // max(1, local + remote)
    ps_ratio = (private * NUMA_PERIOD_SLOTS) // max(1, private + shared)
    if ps_ratio >= NUMA_PERIOD_THRESHOLD:
        diff = max(1, ps_ratio - NUMA_PERIOD_THRESHOLD) * period_slot  # mostly private: scan slower
    elif lr_ratio >= NUMA_PERIOD_THRESHOLD:
        diff = max(1, lr_ratio - NUMA_PERIOD_THRESHOLD) * period_slot  # mostly local: scan slower
    else:
        diff = -(NUMA_PERIOD_THRESHOLD - max(lr_ratio, ps_ratio)) * period_slot  # remote and shared: faster
    lo, hi = task_scan_min(s, mm), task_scan_max(s, mm)
    nt.scan_period_ms = min(max(nt.scan_period_ms + diff, lo), hi)
    nt.period_history.append(nt.scan_period_ms)
    nt.locality = [0, 0, 0]


def pgdat_free_space_enough(s: Any, node: int) -> bool:
    """v6.6 ``pgdat_free_space_enough``: free pages above the promotion watermark
    plus max(1 GiB, node size / 16)."""
    from mmsim.mm.migrate import high_wmark_pages

    z = s.page_alloc.zones[node]
    enough = max((1 << 30) >> PAGE_SHIFT, z.managed_pages >> 4)
    return bool(z.free_pages > high_wmark_pages(s, node) + enough)


def should_numa_migrate_memory(s: Any, task: Task, last_cpu: int, src_nid: int, now_ms: float,
                               scan_ms: float) -> tuple[bool, int]:
    """``should_numa_migrate_memory`` (v6.6 form; the v5.4 one is its
    non-tiering part). Returns (migrate?, new last_cpu for the page)."""
    dst_nid = s.machine.cpu_node(task.cpu)
    if tiering(s) and not s.numa_toptier[src_nid]:  # folio_use_access_time()
        s.numa_stats["pgpromote_candidate"] += 1
        if pgdat_free_space_enough(s, dst_nid):
            return True, last_cpu
        latency = now_ms - scan_ms  # numa_hint_fault_latency
        if latency >= _sysctl(s, "hot_threshold_ms"):
            return False, last_cpu
        return not _promotion_rate_limited(s, dst_nid, now_ms), last_cpu
    this_cpu = task.cpu
    if last_cpu < 0:
        return True, this_cpu  # first fault: cpupid unset
    if s.machine.cpu_node(last_cpu) != dst_nid:
        return False, this_cpu  # the two-stage filter: two faults in a row from dst_nid
    return True, this_cpu


def _promotion_rate_limited(s: Any, nid: int, now_ms: float) -> bool:
    """``numa_promotion_rate_limit``: at most ``promote_rate_limit_mbps`` of
    candidates per node per second window."""
    rl: dict[int, PromoteRate] = s.numa_promote_rl
    w = rl.setdefault(nid, PromoteRate(now_ms))
    limit = _sysctl(s, "promote_rate_limit_mbps") << (20 - PAGE_SHIFT)
    if now_ms - w.start_ms > 1000:
        w.start_ms = now_ms
        w.nr_cand = 0
    w.nr_cand += 1
    return w.nr_cand > limit
