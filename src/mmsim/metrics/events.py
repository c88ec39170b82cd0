"""Typed counter names: perf-stat software/hardware events and vmstat events.

``VmEvent`` mirrors the kernel's ``enum vm_event_item``
(include/linux/vm_event_item.h) for the items the model produces; the
member names are the lower-case names ``/proc/vmstat`` prints.
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

    @property
    def vmstat_name(self) -> str:
        return self.name.lower()


N_PERF = len(PerfEvent)
N_VM = len(VmEvent)
