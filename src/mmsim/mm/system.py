"""One simulated kernel instance on one machine: the run-wide context that
every kernel function receives (engine, scheduler, counters, locks, memory
bandwidth, page allocator, slab caches, hugetlb pool, policies)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from mmsim.engine.core import Engine
from mmsim.engine.cpu import Scheduler
from mmsim.kernels.catalog import ResolvedKernel
from mmsim.locks.base import CacheLine, LockContext
from mmsim.locks.rwsem import MutexPolicy, RwsemPolicy
from mmsim.locks.spinlock import SpinlockKind
from mmsim.machine.bandwidth import MemoryBandwidth
from mmsim.machine.hierarchy import CacheHierarchy
from mmsim.machine.model import Machine, MemoryType
from mmsim.metrics.counters import Counters
from mmsim.mm.costs import path
from mmsim.mm.hugetlb import HugetlbPool
from mmsim.mm.page_alloc import PageAllocator
from mmsim.mm.slub import Slub

# Scanner / hinting-fault statistics that /proc/vmstat has no item for (the mechanism lines of autonuma-scan).
NUMA_STATS = (
    "scans",  # task_numa_work runs that scanned
    "scan_ptes_present",  # present PTEs the scanner looked at
    "scan_struct_page_refs",  # struct page lines change_pte_range read
    "scan_struct_page_misses",  # ... of which missed the LLC
    "scan_protnone_skipped",  # PTEs already protnone when scanned
    "numa_migrate_failed",  # migrate_misplaced_page failures (target node short of free pages)
    "pgpromote_candidate",  # tiering mode: slow-tier hinting faults considered for promotion
    "pgpromote_success",  # tiering mode: pages promoted to a top-tier node
    "pgdemote_kswapd",  # tiering mode: pages kswapd demoted to a slow-tier node
)


class System:
    def __init__(self, machine: Machine, kernel: ResolvedKernel, seed: int, exact: bool = False) -> None:
        self.machine = machine
        # exact: every operation an event; else a workload may attach a sampling controller
        # (mmsim.metrics.sampling.FastForward) to fast-forward its steady state
        self.exact = exact
        self.fast_forward: Any = None
        self.kernel = kernel
        self.engine = Engine(seed)
        self.counters = Counters(machine.ncpus)
        c = machine.cost
        self.sched = Scheduler(self.engine, machine.ncpus, self.counters, int(c.ctx_switch_ns), int(c.wakeup_ns),
                               int(c.wake_ipi_ns))
        self.locks = LockContext(self.engine, machine, self.counters, self.sched)
        self.spin_kind = SpinlockKind(kernel.get("spinlock"))
        self.bandwidth = MemoryBandwidth(machine, self.engine)
        self.cache = CacheHierarchy(machine, self.counters)
        # struct page lines of pages shared between processes (refcount / mapcount atomics)
        self._page_lines: dict[Hashable, CacheLine] = {}
        self.page_mapcount: dict[Hashable, int] = {}
        self.page_alloc = PageAllocator(self)
        self.slab = Slub(self)  # slab caches, made on first use
        self.hugetlb = HugetlbPool(self, 0)
        self.elapsed_ns = -1  # set by the workload when the benchmark ends; else engine.now
        self.workload_state: dict[str, Any] = {}
        # NUMA balancing / tiering (mm/mprotect.py, sched/numa_balancing.py, mm/mempolicy.py):
        self.mempolicies: dict[int, Any] = {}  # id(vma) -> MemPolicy (mbind)
        self.mm_tasks: dict[int, list[Any]] = {}  # id(mm) -> tasks sharing it (mm_users)
        self.numa_mm: dict[int, Any] = {}  # id(mm) -> per-mm scanner state
        self.line_stamps: dict[Hashable, Any] = {}  # line-granular LLC stamps (struct pages, PTE lines)
        # node_is_toptier(): DRAM nodes (memory tiers, v5.18+: PMEM is the slow tier)
        self.numa_toptier = np.array([n.mem_type is MemoryType.DRAM for n in machine.nodes], dtype=bool)
        self.numa_stats: dict[str, int] = dict.fromkeys(NUMA_STATS, 0)
        self.numa_promote_rl: dict[int, Any] = {}  # node -> promotion rate-limit window (tiering mode)

    def policy(self, name: str) -> str:
        return self.kernel.get(name)

    def flag(self, name: str) -> bool:
        return self.kernel.flag(name)

    def spin_kind_for(self, lock_class: str) -> SpinlockKind:
        """The spinlock implementation of one lock class: policy ``spinlock_<class>``
        (page_table_lock, ptlock, zone_lock, hugetlb_lock, list_lock, unix_lock,
        lockstress), or the kernel's ``spinlock`` where that is ``default``."""
        v = self.kernel.policies.get(f"spinlock_{lock_class}", "default")
        return self.spin_kind if v == "default" else SpinlockKind(v)

    def rwsem_policy(self) -> RwsemPolicy:
        """This kernel's rwsem behaviours (locks/rwsem.py), from its policies."""
        f = self.flag
        return RwsemPolicy(
            spin_on_owner=f("rwsem_spin_on_owner"),
            writer_spin_on_readers=f("rwsem_writer_spin_on_readers"),
            reader_spin=f("rwsem_reader_spin"),
            handoff=f("rwsem_handoff"),
            wake_all=self.policy("rwsem_reader_wake") == "all",
            reader_steal=f("rwsem_reader_steal"),
            reader_spin_adaptive=f("rwsem_reader_spin_adaptive"),
            wait_lock=f("rwsem_wait_lock"),
            wake_in_wait_lock=f("rwsem_wake_in_wait_lock"),
        )

    def mutex_policy(self) -> MutexPolicy:
        f = self.flag
        return MutexPolicy(osq=f("mutex_osq"), handoff=f("mutex_handoff"), wait_lock=f("rwsem_wait_lock"),
                           wake_in_wait_lock=f("mutex_wake_in_wait_lock"))

    def page_line(self, key: Hashable) -> CacheLine:
        """The cache line of a shared page's struct page field named by ``key``."""
        try:  # hot (several calls per file fault); the line exists after its first use
            return self._page_lines[key]
        except KeyError:
            ln = self._page_lines[key] = CacheLine(self.machine, 0)
            return ln

    def set_hugetlb_pool(self, nr_hugepages: int, nr_overcommit_hugepages: int = 0) -> None:
        """``vm.nr_hugepages`` and ``vm.nr_overcommit_hugepages`` at boot / before the workload."""
        self.hugetlb = HugetlbPool(self, nr_hugepages, nr_overcommit_hugepages)

    def start_vmstat_timer(self, done: Callable[[], bool]) -> None:
        """``vmstat_update``: a deferrable kworker on every CPU each
        ``vm.stat_interval`` (mm/vmstat.c, default HZ = 1 s), which preempts
        the running task at its next preemption point."""
        period = int(self.policy("stat_interval_ms")) * 1_000_000
        if period <= 0:
            return
        sched = self.sched
        busy_cpus = self._busy_cpus
        work_ns, _ = path("refresh_cpu_vm_stats", self.machine.freq_ghz)

        def tick(_now: int) -> None:
            for cpu in busy_cpus():
                sched.run_kernel_work(cpu, "vmstat_update", work_ns)

        sched.periodic(period, tick, done)

    def _busy_cpus(self) -> list[int]:
        return [c.id for c in self.sched.cpus if c.current is not None]
