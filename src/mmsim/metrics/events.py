"""Typed counter names: perf-stat software/hardware events and vmstat events.

``VmEvent`` mirrors the kernel's ``enum vm_event_item``
(include/linux/vm_event_item.h) for the items the model produces; the
member names are the lower-case names ``/proc/vmstat`` prints. It also holds
counters that have no /proc/vmstat item (PCP list events, SLUB statistics,
COW copies): :data:`PROC_VMSTAT` tells the two apart. Results report the
first under ``vmstat`` (LKP: ``proc-vmstat.NAME``), the others under
``counters`` (``mmsim.NAME``), so that no name under ``proc-vmstat.`` is one
a real kernel does not print.
"""

from __future__ import annotations

from enum import IntEnum


class PerfEvent(IntEnum):
    """The events ``perf stat`` prints by default (plus LLC references/misses)."""

    TASK_CLOCK = 0  # ns of CPU time of the measured tasks
    CONTEXT_SWITCHES = 1
    CPU_MIGRATIONS = 2
    PAGE_FAULTS = 3
    CYCLES = 4
    INSTRUCTIONS = 5
    CACHE_REFERENCES = 6
    CACHE_MISSES = 7

    @property
    def perf_name(self) -> str:
        return self.name.lower().replace("_", "-")


class VmEvent(IntEnum):
    """Subset of ``enum vm_event_item`` (v6.6 names) produced by the model."""

    PGALLOC_NORMAL = 0
    PGFREE = 1
    PGFAULT = 2
    PGMAJFAULT = 3
    THP_FAULT_ALLOC = 4
    THP_FAULT_FALLBACK = 5
    HTLB_BUDDY_ALLOC_SUCCESS = 6
    NUMA_PTE_UPDATES = 7
    NUMA_HINT_FAULTS = 8
    NUMA_HINT_FAULTS_LOCAL = 9
    NUMA_PAGES_MIGRATED = 10
    PGMIGRATE_SUCCESS = 11
    COW_FAULT = 12  # not a kernel vm_event_item: do_wp_page copies, kept for COW workloads
    # Not vm_event_items either: the PCP events the mm_page_pcpu_drain tracepoint and
    # Huang Ying's free_high counting (seeds/003) observe.
    PCP_REFILL = 13  # rmqueue_bulk calls (zone->lock taken to refill a PCP list)
    PCP_DRAIN = 14  # free_pcppages_bulk calls (zone->lock taken to drain a PCP)
    PCP_DRAIN_PAGES = 15  # pages drained by free_pcppages_bulk
    PCP_FREE_HIGH = 16  # drains of the whole PCP by the free_high rule (f26b3fa04611)
    # SLUB statistics (mm/slub.c enum stat_item, CONFIG_SLUB_STATS: /sys/kernel/slab/<cache>/<item>),
    # summed over all caches; not vm_event_items either. The kernel's item in brackets where renamed.
    SLAB_ALLOC_FASTPATH = 17  # lockless pop of the CPU freelist [alloc_fastpath]
    SLAB_ALLOC_SLOWPATH = 18  # ___slab_alloc [alloc_slowpath]
    SLAB_ALLOC_FROM_PARTIAL = 19  # a slab taken from the node partial list [alloc_from_partial]
    SLAB_NEW = 20  # new_slab: pages from the page allocator [alloc_slab]
    SLAB_FREE_FASTPATH = 21  # push onto this CPU's freelist (object of the CPU slab) [free_fastpath]
    SLAB_FREE_SLOWPATH = 22  # __slab_free [free_slowpath]
    SLAB_FREE_FROZEN = 23  # __slab_free into a frozen (CPU or CPU-partial) slab [free_frozen]
    SLAB_FREE_ADD_PARTIAL = 24  # a slab put on the node partial list [free_add_partial]
    SLAB_DISCARD = 25  # discard_slab: pages back to the page allocator [free_slab]
    CPU_PARTIAL_ALLOC = 26  # CPU slab refilled from the CPU partial list
    CPU_PARTIAL_FREE = 27  # a full slab frozen onto the freeing CPU's partial list
    CPU_PARTIAL_NODE = 28  # a slab moved from the node list to the CPU partial list
    CPU_PARTIAL_DRAIN = 29  # a CPU partial list moved to the node list (__unfreeze_partials)
    # Not a vm_event_item: pages taken from the buddy lists (rmqueue_bulk refills and rmqueue_buddy),
    # Huang Ying's "alloc_zone" in the PCP auto-tuning cover letters.
    ZONE_ALLOC_PAGES = 30
    # CONFIG_PER_VMA_LOCK_STATS vm_event_items (52f238653e45, v6.4): lock_vma_under_rcu's outcomes
    VMA_LOCK_SUCCESS = 31  # the fault was handled under the VMA lock
    VMA_LOCK_ABORT = 32  # lock_vma_under_rcu found no usable VMA: the fault goes to mmap_lock
    VMA_LOCK_RETRY = 33  # handled under the VMA lock until VM_FAULT_RETRY: redone under mmap_lock
    VMA_LOCK_MISS = 34  # the VMA was detached after it was found (not produced: no concurrent unmap of it)
    # issue 15: mm/vmstat.c "thp_split_pmd" (CONFIG_TRANSPARENT_HUGEPAGE, v4.5+): __split_huge_pmd_locked
    THP_SPLIT_PMD = 35

    @property
    def vmstat_name(self) -> str:
        return self.name.lower()


#: The items /proc/vmstat prints, by their ``vmstat_text`` names (mm/vmstat.c: ``TEXTS_FOR_ZONES("pgalloc")``
#: gives ``pgalloc_normal``; the rest are literal strings, under CONFIG_TRANSPARENT_HUGEPAGE, CONFIG_HUGETLB_PAGE,
#: CONFIG_NUMA_BALANCING and CONFIG_MIGRATION). Checked against ``vmstat_text`` in torvalds/linux mm/vmstat.c
#: (read at 00c010e130e5, after v6.15) and in a v3.1x-era copy: all twelve are in both, with these spellings,
#: so v6.6 (the names the model uses) has them too. Every other VmEvent is model-only.
PROC_VMSTAT = frozenset({
    VmEvent.PGALLOC_NORMAL, VmEvent.PGFREE, VmEvent.PGFAULT, VmEvent.PGMAJFAULT,
    VmEvent.THP_FAULT_ALLOC, VmEvent.THP_FAULT_FALLBACK, VmEvent.HTLB_BUDDY_ALLOC_SUCCESS,
    VmEvent.NUMA_PTE_UPDATES, VmEvent.NUMA_HINT_FAULTS, VmEvent.NUMA_HINT_FAULTS_LOCAL,
    VmEvent.NUMA_PAGES_MIGRATED, VmEvent.PGMIGRATE_SUCCESS,
    # vmstat_text under CONFIG_PER_VMA_LOCK_STATS (52f238653e45 "mm: introduce per-VMA lock statistics", v6.4:
    # "vma_lock_success", "vma_lock_abort", "vma_lock_retry", "vma_lock_miss"; the patch text, store id 24274891212)
    VmEvent.VMA_LOCK_SUCCESS, VmEvent.VMA_LOCK_ABORT, VmEvent.VMA_LOCK_RETRY, VmEvent.VMA_LOCK_MISS,
    # vmstat_text "thp_split_pmd" (count_vm_event(THP_SPLIT_PMD) in __split_huge_pmd_locked, v4.5+)
    VmEvent.THP_SPLIT_PMD,
})

N_PERF = len(PerfEvent)
N_VM = len(VmEvent)
