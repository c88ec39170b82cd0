"""Kernels as named policy sets; patches as named deltas with upstream ids.

A *policy* is one modelled behaviour that changed between kernels (which
spinlock implementation, whether the PMD page-table lock is split, ...).
A *kernel* is a base version's full policy set; a *patch* is a delta to a
few policies with its upstream commit id and subject. ``resolve`` applies
patches and ``--set`` overrides on top of a kernel, validating every name
and value, so both arms of an A/B run differ only by the policy under test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmsim.errors import UserError

INT_MAX = 2**31 - 1  # C int: pcp->batch, proc_dointvec_minmax sysctls
UINT_MAX = 2**32 - 1  # u32: the debugfs numa_balancing knobs (debugfs_create_u32, v5.10+)
PAGE_SIZE = 4096


def is_file(text: str) -> bool:
    """``Path(text).is_file()`` for a name the user typed: False, not OSError, for a name the file system
    cannot hold (ENAMETOOLONG: a bisect series' kernel string of 40 patches is > 255 bytes; or a NUL byte)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def size_bytes(value: str) -> int:
    """A policy size (``512k``, ``1m``, ``2m``, ``4096``): the kernel's ``memparse`` (powers of 1024)."""
    from mmsim.workloads.vm_scalability import memparse

    return memparse(value)


@dataclass(frozen=True)
class Policy:
    """One modelled kernel behaviour.

    ``kind`` is ``choice`` (one of ``allowed``), ``int`` (an integer in
    ``lo..hi``, or one of ``special``) or ``size`` (bytes with k/m/g, in
    ``lo..hi`` bytes). The bounds are the kernel's own: the sysctl's
    ``extra1``/``extra2``, the C type, or the clamp the kernel function
    applies; ``bound`` says which. ``source`` names the kernel code modelled.
    """

    name: str
    allowed: tuple[str, ...]  # kind "choice": the values
    help: str
    source: str = ""
    kind: str = "choice"
    lo: int = 0
    hi: int = INT_MAX
    special: tuple[str, ...] = ()
    bound: str = ""

    def describe(self) -> str:
        """The allowed values, as an error message or ``mmsim policies`` shows them."""
        if self.kind == "choice":
            return ", ".join(self.allowed)
        if self.kind == "size":
            rng = f"a size {_fmt_size(self.lo)}..{_fmt_size(self.hi)} (k/m/g suffixes)"
        else:
            rng = f"an integer {self.lo}..{self.hi}"
        extra = " or ".join(self.special)
        return (f"{extra} or " if extra else "") + rng + (f" ({self.bound})" if self.bound else "")

    def check(self, value: str, where: str) -> str:
        value = str(value).strip()
        if self.kind == "choice":
            if value not in self.allowed:
                raise UserError(f"{where}.{self.name}", value, self.allowed)
            return value
        if value in self.special:
            return value
        try:
            if self.kind == "size":
                n = size_bytes(value)
            elif value.isascii() and value.lstrip("-").isdigit():
                n = int(value)
            else:
                raise ValueError(value)
        except ValueError:
            raise UserError(f"{where}.{self.name}", value, self.describe()) from None
        if not self.lo <= n <= self.hi:
            raise UserError(f"{where}.{self.name}", value, self.describe())
        return value


def _fmt_size(n: int) -> str:
    for shift, unit in ((40, "t"), (30, "g"), (20, "m"), (10, "k")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _num(name: str, help: str, source: str, lo: int = 0, hi: int = INT_MAX, bound: str = "",
         kind: str = "int", special: tuple[str, ...] = ()) -> Policy:
    return Policy(name, (), help, source, kind, lo, hi, special, bound)


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("spinlock", ("ticket", "queued"),
               "spinlock implementation: ticket (x86 v2.6.25..v4.1) or queued/MCS (qspinlock, v4.2+)",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("pmd_ptl", ("mm", "split"),
               "PMD-level page table lock: mm->page_table_lock, or one per PMD table (e009bb30c8df, v3.13)",
               "include/linux/mm.h pmd_lockptr()"),
        Policy("pte_ptl", ("split", "mm"),
               "PTE-level page table lock: one per PTE table (USE_SPLIT_PTE_PTLOCKS) or mm-wide",
               "include/linux/mm.h pte_lockptr()"),
        Policy("thp", ("always", "madvise", "never"), "/sys/kernel/mm/transparent_hugepage/enabled",
               "mm/huge_memory.c enabled_store()"),
        Policy("rwsem_spin_on_owner", ("off", "on"),
               "rwsem writer optimistic spinning (4fc828e24cd9, v3.16)",
               "kernel/locking/rwsem-xadd.c rwsem_optimistic_spin()"),
        Policy("rwsem_writer_spin_on_readers", ("off", "on"),
               "rwsem writers also spin on a reader-owned sem, for (10 + readers/2) us up to 25 us "
               "(7d43f1ce9dd0, v5.3)",
               "kernel/locking/rwsem.c rwsem_optimistic_spin(), rwsem_rspin_threshold()"),
        Policy("rwsem_reader_spin", ("off", "on"),
               "rwsem readers spin on a running writer owner and steal a reader-owned sem while writers "
               "wait (cf69482d62d9, v5.3; removed by 617f3ef95177, v5.11)",
               "kernel/locking/rwsem.c rwsem_down_read_slowpath(), rwsem_try_read_lock_unqueued()"),
        Policy("rwsem_reader_spin_adaptive", ("off", "on"),
               "RWSEM_RD_NONSPINNABLE: after a writer's spin on readers timed out, readers neither spin nor "
               "steal until a writer takes the sem by the fast path or by spinning (5cfd92e12e13, v5.3; "
               "removed with reader spinning by 617f3ef95177, v5.11)",
               "kernel/locking/rwsem.c rwsem_disable_reader_optspin(), rwsem_down_read_slowpath()"),
        Policy("rwsem_reader_steal", ("off", "on"),
               "a reader in the rwsem slowpath takes a sem no writer holds and no hand-off protects, "
               "without spinning (1a728dff855a, v5.11)",
               "kernel/locking/rwsem.c rwsem_down_read_slowpath()"),
        Policy("rwsem_handoff", ("off", "on"),
               "RWSEM_FLAG_HANDOFF: a waiter queued 4 ms stops spinners and fast paths from stealing "
               "(4f23dbc1e657, v5.3)",
               "kernel/locking/rwsem.c rwsem_try_write_lock(), rwsem_mark_wake()"),
        Policy("mmap_lock_name", ("mmap_sem", "mmap_lock"),
               "name of mm's rwsem in lock_stat: &mm->mmap_sem, &mm->mmap_lock from da1c55f1b272 (v5.8)",
               "include/linux/mm_types.h struct mm_struct"),
        Policy("mutex_osq", ("off", "on"),
               "mutex: every optimistic spinner queues on the cancelable MCS lock (OSQ) while the owner "
               "runs (fb0527bd5ea9, v3.15); off: one spinner at a time, the others sleep",
               "kernel/locking/mutex.c mutex_optimistic_spin(), kernel/locking/osq_lock.c"),
        Policy("rwsem_wait_lock", ("off", "on"),
               "the rwsem's and the mutex's sem->wait_lock / lock->wait_lock sections (a sleeper queueing "
               "itself, a release waking waiters), on the count's cache line, FIFO; off: not modelled "
               "(before session 27)",
               "v3.13 kernel/locking/rwsem-xadd.c rwsem_down_read_failed(), rwsem_wake(); v5.x "
               "kernel/locking/rwsem.c; kernel/locking/mutex.c (docs/sources-rwsem-wait-lock.md)"),
        Policy("rwsem_wake_in_wait_lock", ("off", "on"),
               "a rwsem release calls wake_up_process for each woken waiter while holding wait_lock; off: "
               "on a wake_q after the unlock (133e89ef5ef3, v4.8)",
               "v3.13 kernel/locking/rwsem-xadd.c __rwsem_do_wake(); v4.8 rwsem-xadd.c rwsem_wake()"),
        Policy("mutex_wake_in_wait_lock", ("off", "on"),
               "a mutex unlock wakes the next waiter while holding wait_lock; off: after the unlock "
               "(1329ce6fbbe4, v4.6)",
               "kernel/locking/mutex.c __mutex_unlock_slowpath()"),
        Policy("mutex_handoff", ("off", "on"),
               "MUTEX_FLAG_HANDOFF: a woken first waiter that lost the mutex to a spinner gets it at the "
               "next unlock (9d659ae14b54, v4.10)",
               "kernel/locking/mutex.c __mutex_lock_common(), __mutex_unlock_slowpath()"),
        Policy("spinlock_page_table_lock", ("default", "ticket", "queued"),
               "spinlock implementation of &mm->page_table_lock only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("spinlock_ptlock", ("default", "ticket", "queued"),
               "spinlock implementation of split page table locks (ptlock_ptr) only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("spinlock_zone_lock", ("default", "ticket", "queued"),
               "spinlock implementation of &zone->lock only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("spinlock_hugetlb_lock", ("default", "ticket", "queued"),
               "spinlock implementation of hugetlb_lock only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("spinlock_list_lock", ("default", "ticket", "queued"),
               "spinlock implementation of SLUB &n->list_lock only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("spinlock_unix_lock", ("default", "ticket", "queued"),
               "spinlock implementation of AF_UNIX &u->lock only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("spinlock_lockstress", ("default", "ticket", "queued"),
               "spinlock implementation of the lockstress workload's lock only; default: the spinlock policy",
               "arch/x86/include/asm/spinlock.h; kernel/locking/qspinlock.c"),
        Policy("locktorture_rand", ("shared", "private"),
               "the locktorture writers' torture_random() state: shared (static DEFINE_TORTURE_RANDOM in "
               "lock_torture_writer, one line every writer updates) or private (each writer's own, on its "
               "kthread stack: c0e1472d8078, v5.7)",
               "kernel/locking/locktorture.c lock_torture_writer()"),
        Policy("hugetlb_fault_lock", ("instantiation-mutex", "fault-mutex-table"),
               "hugetlb fault serialisation: one global mutex, or the hashed table (8382d914ebf7, v3.15)",
               "mm/hugetlb.c hugetlb_fault()"),
        Policy("vma_cache", ("mm", "task"),
               "find_vma's cache: mm->mmap_cache, one per mm on mm_struct's first line (v3.14 and before), or "
               "per thread (615d6e8756c8, v3.15)",
               "mm/mmap.c find_vma(); mm/vmacache.c"),
        Policy("nr_ptes_atomic", ("off", "on"),
               "mm->nr_ptes as atomic_long_t (e1f56c89b040, v3.13) instead of a counter under the PTL",
               "include/linux/mm_types.h struct mm_struct"),
        _num("stat_interval_ms", "vmstat_update period (sysctl vm.stat_interval, default HZ = 1000 ms); 0: off",
             "mm/vmstat.c vmstat_update()", 0, INT_MAX, "proc_dointvec_jiffies: an int"),
        _num("pcp_batch_cap", "zone_batchsize cap: 512 KiB (batch 31), 1 MiB after d8a759b57035 (batch 63), v4.19",
             "mm/page_alloc.c zone_batchsize()", PAGE_SIZE, 1 << 43,
             "at least a page; cap / PAGE_SIZE / 4 fits the int pcp->batch", kind="size"),
        _num("pcp_batch", "pcp->batch: auto (zone_batchsize() of the zone and pcp_batch_cap) or this many pages",
             "mm/page_alloc.c zone_batchsize(), pageset_update()", 1, INT_MAX,
             "zone_batchsize() clamps to >= 1; pcp->batch is an int", special=("auto",)),
        Policy("pcp_orders", ("0", "0-3+thp"),
               "orders kept on PCP lists: 0 only, or 0-3 and the THP order (44042b449872, v5.14)",
               "mm/page_alloc.c order_to_pindex()"),
        Policy("pcp_high", ("6xbatch", "zone_highsize", "2xbatch"),
               "pcp->high: 6 x batch, or zone_highsize from the low watermark (b92ca18e8ca5, v5.14); "
               "2xbatch: the debug setting of 52166607ecc9's measurements",
               "mm/page_alloc.c zone_highsize()"),
        _num("pcp_high_min", "pcp->high_min: auto (zone_highsize() of the zone) or this many pages (the host's "
             "/proc/zoneinfo value, which follows its boot-time watermarks)",
             "mm/page_alloc.c zone_set_pageset_high_and_batch()", 1, INT_MAX, "pcp->high_min is an int",
             special=("auto",)),
        _num("pcp_high_max", "pcp->high_max: auto (zone_highsize() at MIN_PERCPU_PAGELIST_HIGH_FRACTION, or "
             "high_min without auto-tuning) or this many pages (the host's /proc/zoneinfo value)",
             "mm/page_alloc.c zone_set_pageset_high_and_batch()", 1, INT_MAX, "pcp->high_max is an int",
             special=("auto",)),
        _num("percpu_pagelist_high_fraction",
             "sysctl vm.percpu_pagelist_high_fraction (74f44822097c, v5.14); 0 = from the low watermark",
             "mm/page_alloc.c percpu_pagelist_high_fraction_sysctl_handler()", 8, INT_MAX,
             "MIN_PERCPU_PAGELIST_HIGH_FRACTION", special=("0",)),
        Policy("pcp_free_factor", ("off", "on"),
               "double the pages freed per PCP drain while freeing without allocating (3b12e7e97938, v5.14)",
               "mm/page_alloc.c nr_pcp_free()"),
        Policy("pcp_free_high", ("off", "free_factor", "consecutive"),
               "drain the whole PCP on a high-order free after a drain (f26b3fa04611, v5.18); "
               "consecutive: only after another high-order free (ca71fe1ad922, v6.7)",
               "mm/page_alloc.c free_unref_page_commit()"),
        Policy("pcp_free_high_batch", ("off", "v1", "llc"),
               "PCPF_FREE_HIGH_BATCH: keep batch pages before a free_high drain if the per-CPU data cache "
               "share > 4 x batch (v1: lore 20230920061856.257597-4-ying.huang@intel.com) or the LLC "
               "slice > 3 x batch (llc: 362d37a106dd, v6.7)",
               "mm/page_alloc.c free_unref_page_commit(), drivers/base/cacheinfo.c"),
        Policy("skb_small_head", ("off", "on"),
               "skb heads of up to SKB_SMALL_HEAD_CACHE_SIZE from their own slab cache, skbuff_small_head, "
               "instead of kmalloc (bf9f1baa279f, v6.3)",
               "net/core/skbuff.c kmalloc_reserve()"),
        # --- issue 15: kernel memory charged to the memcg (mm/memcg_kmem.py) ---
        Policy("memcg_kmem", ("off", "v2", "v1"),
               "__GFP_ACCOUNT allocations (a unix socket's skbs since \"af_unix: charge buffers to kmemcg\", "
               "linux-mm 2016-05, v4.8) charged to the task's memcg: off (root memcg, nothing charged), v2, or "
               "v1 (also the unbatched memcg->kmem page counters, memcg1_account_kmem)",
               "mm/memcontrol.c obj_cgroup_charge_pages(), refill_stock(); mm/memcontrol-v1.c "
               "memcg1_account_kmem()"),
        Policy("pgtable_account", ("off", "on"),
               "user page tables (pte_alloc_one, pmd_alloc_one, pud_alloc_one) allocated with __GFP_ACCOUNT and "
               "charged to the task's memcg like any kmem page (3e79ec7 \"arch: x86: charge page tables to "
               "kmemcg\", v4.8); needs memcg_kmem",
               "arch/x86/mm/pgtable.c PGALLOC_GFP, __userpte_alloc_gfp; mm/page_alloc.c __alloc_pages() -> "
               "__memcg_kmem_charge_page()"),
        _num("memcg_levels", "page counters charged per memcg charge: the task's memcg and each ancestor up to "
             "the root (page_counter_try_charge walks c->parent)", "mm/page_counter.c page_counter_try_charge()",
             1, 64, "cgroup nesting depth + 1; 64 is far beyond any real hierarchy"),
        Policy("huge_clear_order", ("sequential", "target-last"),
               "clear_huge_page sub-page order: 0..511, or farthest first and the faulting sub-page last "
               "(c79b57e462b5, v4.14)",
               "mm/memory.c clear_huge_page()"),
        Policy("huge_copy_order", ("sequential", "target-last"),
               "copy_user_huge_page sub-page order, as huge_clear_order (c9f4cd713835, v4.18)",
               "mm/memory.c copy_user_huge_page()"),
        Policy("hugetlb_fault_hash", ("private-by-mm", "mapping-index"),
               "hugetlb fault mutex key of a private mapping: (mm, address), or (mapping, index) as for shared "
               "ones (1b426bac66e6, v5.2)",
               "mm/hugetlb.c hugetlb_fault_mutex_hash()"),
        Policy("rwsem_reader_wake", ("until-writer", "all"),
               "rwsem release wakes the readers queued before the first writer, or all queued readers up to 256 "
               "(d3681e269fff, v5.3); honoured by hugetlbfs i_mmap_rwsem",
               "kernel/locking/rwsem.c rwsem_mark_wake()"),
        Policy("hugetlb_i_mmap_rwsem", ("never", "always", "if-shareable"),
               "hugetlb_fault takes i_mmap_rwsem for read: never (before c0d0381ade79), always (c0d0381ade79, "
               "v5.7), if-shareable (only when vma_shareable(): Mike Kravetz's proposed fix, linux-mm 2020-06-25)",
               "mm/hugetlb.c hugetlb_fault()"),
        Policy("numa_balancing", ("0", "1", "2", "3"),
               "sysctl kernel.numa_balancing, OR of flags: 1 NUMA_BALANCING_NORMAL, 2 NUMA_BALANCING_MEMORY_TIERING "
               "(promote hot pages from non-top-tier nodes, v5.18+), 3 both; 0 off",
               "kernel/sched/core.c sysctl_numa_balancing()"),
        Policy("numa_scan_check", ("page-first", "protnone-first"),
               "change_pte_range with prot_numa: look up the struct page before pte_protnone(), or check "
               "pte_protnone() first (a818f5363a0e, v5.5)",
               "mm/mprotect.c change_pte_range()"),
        _num("numa_balancing_scan_delay_ms", "sysctl kernel.numa_balancing_scan_delay_ms (default 1000)",
             "kernel/sched/fair.c init_numa_balancing()", 0, UINT_MAX, "unsigned int"),
        _num("numa_balancing_scan_period_min_ms", "sysctl kernel.numa_balancing_scan_period_min_ms (default 1000)",
             "kernel/sched/fair.c task_scan_min()", 0, UINT_MAX, "unsigned int"),
        _num("numa_balancing_scan_period_max_ms", "sysctl kernel.numa_balancing_scan_period_max_ms (default 60000)",
             "kernel/sched/fair.c task_scan_max()", 0, UINT_MAX, "unsigned int"),
        _num("numa_balancing_scan_size_mb", "sysctl kernel.numa_balancing_scan_size_mb (default 256)",
             "kernel/sched/fair.c task_numa_work()", 1, UINT_MAX,
             "unsigned int; 0 would divide by zero in task_nr_scan_windows()'s round_up"),
        _num("numa_balancing_hot_threshold_ms",
             "tiering mode: hint-fault latency below which a slow-tier page is hot (default 1000, v5.18+)",
             "kernel/sched/fair.c numa_hint_fault_latency()", 0, UINT_MAX, "unsigned int"),
        _num("numa_balancing_promote_rate_limit_mbps",
             "tiering mode: promotion rate limit per node in MB/s (default 65536, v5.18+)",
             "kernel/sched/fair.c numa_promotion_rate_limit()", 0, INT_MAX, "proc_dointvec_minmax, extra1 = 0"),
        # --- issue 22: the per-VMA lock (mm/vma_lock.py, mm/memory_file.py) ---
        Policy("vma_lock", ("off", "anon", "file"),
               "per-VMA lock in the x86 fault path: off (every fault under mmap_lock); anon: lock_vma_under_rcu "
               "for anonymous VMAs with an anon_vma (50ee32537206, 0bff0aaea03e, v6.4; the anon_vma condition is "
               "policy vma_lock_anon_vma); file: file-backed VMAs too, their ->fault paths still retried under "
               "mmap_lock (350f6bbca1de, v6.6)",
               "mm/memory.c lock_vma_under_rcu(); arch/x86/mm/fault.c do_user_addr_fault()"),
        Policy("vma_lock_anon_vma", ("check", "retry", "trylock"),
               "an anonymous VMA without an anon_vma under the per-VMA lock: check (lock_vma_under_rcu refuses it, "
               "v6.4..v6.9), retry (taken; vmf_anon_prepare in do_anonymous_page / do_huge_pmd_anonymous_page "
               "returns VM_FAULT_RETRY: a373baed5a9d), trylock (vmf_anon_prepare mmap_read_trylocks around "
               "__anon_vma_prepare and the fault goes on under the VMA lock: 737019cf6ac5, v6.10)",
               "mm/memory.c lock_vma_under_rcu(), __vmf_anon_prepare(); mm/huge_memory.c "
               "do_huge_pmd_anonymous_page()"),
        Policy("vma_lock_fault_around", ("off", "on"),
               "do_read_fault runs fault-around (->map_pages) under the VMA lock before it retries "
               "(f5617ffeb450, v6.6); off: the retry is at do_read_fault's start",
               "mm/memory.c do_read_fault()"),
        Policy("vma_lock_cow_fault", ("off", "on"),
               "do_cow_fault proceeds under the VMA lock when the VMA has an anon_vma (vmf_anon_prepare; "
               "4de8c93a4751, v6.7); off: VM_FAULT_RETRY under mmap_lock",
               "mm/memory.c do_cow_fault(), vmf_anon_prepare()"),
        Policy("vma_lock_shared_fault", ("off", "on"),
               "do_shared_fault calls ->fault under the VMA lock when vm_ops->map_pages exists "
               "(vmf_can_call_fault; 4ed4379881aa, v6.7); off: VM_FAULT_RETRY under mmap_lock",
               "mm/memory.c do_shared_fault(), vmf_can_call_fault()"),
        Policy("vma_lock_read_fault", ("off", "on"),
               "do_read_fault calls ->fault after fault-around under the VMA lock when vm_ops->map_pages "
               "exists (12214eba1992, v6.7); off: VM_FAULT_RETRY, fault-around again under mmap_lock",
               "mm/memory.c do_read_fault(), vmf_can_call_fault()"),
        # --- issue 19: PCP high auto-tuning (v6.7), patches 4-9 of Huang Ying's series ---
        Policy("pcp_batch_scale_max", ("off", "0", "1", "2", "3", "4", "5", "6"),
               "CONFIG_PCP_BATCH_SCALE_MAX: the largest free_factor / alloc_factor (52166607ecc9, v6.7: "
               "default 5, range 0-6); off: no limit",
               "mm/Kconfig PCP_BATCH_SCALE_MAX; mm/page_alloc.c nr_pcp_free()"),
        Policy("pcp_alloc_factor", ("off", "on"),
               "double the pages a PCP refill takes per refill without a free, halved by every free "
               "(c0a242394cb9, v6.7)",
               "mm/page_alloc.c nr_pcp_alloc(), free_unref_page_commit()"),
        Policy("pcp_high_tuning", ("off", "framework", "auto"),
               "pcp->high between high_min (the zone_highsize value) and high_max (managed / 8 over the node's "
               "CPUs): framework keeps high = high_min (90b41691b988), auto raises it on refill and drain and "
               "lowers it on free_high (51a755c56dc0), both v6.7",
               "mm/page_alloc.c nr_pcp_high(), nr_pcp_alloc(), zone_set_pageset_high_and_batch()"),
        Policy("pcp_below_high", ("off", "on"),
               "ZONE_BELOW_HIGH: below the high watermark, stop raising pcp->high and lower it on free "
               "(57c0419c5f0e, v6.7)",
               "mm/page_alloc.c get_page_from_freelist(), nr_pcp_high()"),
        Policy("zone_flags_line", ("none", "free_area", "lock"),
               "the line rmqueue()'s test_bit(ZONE_BOOSTED_WATERMARK, &zone->flags) loads after every PCP-path "
               "allocation: none before 1c30844d2dfe (v5.0); the last free_area line (flags right after "
               "free_area[]); the zone lock's own line from v6.5 with CONFIG_UNACCEPTED_MEMORY "
               "(dcdfdd40fa82: unaccepted_pages moves flags onto lock's line; docs/pcp-free-high.md, session 28)",
               "mm/page_alloc.c rmqueue(); include/linux/mmzone.h struct zone"),
        Policy("zone_flags_free", ("off", "on"),
               "nr_pcp_high()'s test_bit(ZONE_RECLAIM_ACTIVE, &zone->flags) on every PCP free that is not a "
               "free_high one: a load of the zone_flags_line layout's line (c49c2c47dab6, v5.14)",
               "mm/page_alloc.c free_unref_page_commit(), nr_pcp_high()"),
        Policy("pcp_free_count", ("off", "on"),
               "pcp->free_count (pages freed, halved per allocation) replaces free_factor for free_high "
               "and the drain size (6ccdcb6d3a74, v6.7)",
               "mm/page_alloc.c free_unref_page_commit(), nr_pcp_free()"),
        Policy("pcp_free_high_threshold", ("batch", "batch+high_min/2"),
               "pcp->free_count a high-order free needs to trigger free_high: batch (6ccdcb6d3a74, v6.7), or "
               "batch + pcp->high_min / 2 (c544a952ba61, v6.15)",
               "mm/page_alloc.c free_unref_page_commit() (v6.15: free_frozen_page_commit())"),
        # --- issue 22: mappings and THP alignment (mm/mmap.py) ---
        Policy("thp_anon_align", ("off", "pmd-if-large", "pmd-if-multiple"),
               "__get_unmapped_area of a hint-less anonymous mapping: top-down as it comes (off), aligned to "
               "PMD_SIZE by thp_get_unmapped_area when len >= PMD_SIZE (efa7df3e3bb5, v6.8), or only when len "
               "is a multiple of PMD_SIZE (d4148aeab412, v6.12)",
               "mm/mmap.c __get_unmapped_area(); mm/huge_memory.c __thp_get_unmapped_area()"),
        Policy("dev_zero_align", ("off", "thp"),
               "get_unmapped_area_zero of a MAP_PRIVATE /dev/zero mapping: mm_get_unmapped_area (off), or "
               "thp_get_unmapped_area, PMD-aligned whenever len >= PMD_SIZE (849d5cff4d48, linux-next 2025-09)",
               "drivers/char/mem.c get_unmapped_area_zero()"),
        # --- issue 15/22: page-table freeing at munmap (mm/munmap.py) ---
        Policy("pgtable_free", ("page", "rcu"),
               "how x86 ___pte_free_tlb frees an unmapped range's page tables: with the gathered pages "
               "(tlb_remove_page: bare metal up to v6.13), or batched and freed after an RCU grace period "
               "(tlb_remove_table, CONFIG_MMU_GATHER_RCU_TABLE_FREE: a KVM guest with PV TLB flush, whose "
               "kvm_guest_init sets pv_ops.mmu.tlb_remove_table = tlb_remove_table; x86-64 on bare metal from "
               "Qi Zheng's \"x86: mm: free page table pages by RCU instead of semi RCU\", posted 2024-12 for "
               "linux-next: v6.14 by its merge window, not checked against a tag)",
               "arch/x86/mm/pgtable.c ___pte_free_tlb(); arch/x86/kernel/kvm.c kvm_guest_init(); "
               "mm/mmu_gather.c tlb_remove_table()"),
        # --- issue 15: THP COW split (3917c80280c9) ---
        Policy("thp_cow", ("copy", "split"),
               "a write to a write-protected anonymous huge PMD shared after fork (or the huge zero page): copy "
               "(clear) a whole new THP (do_huge_pmd_wp_page, v4.13), or split the PMD and fall back to 4 KiB "
               "do_wp_page COW faults (3917c80280c9 \"thp: change CoW semantics for anon-THP\", v5.8)",
               "mm/huge_memory.c do_huge_pmd_wp_page(), __split_huge_pmd_locked()"),
    )
}


def policy(name: str, where: str) -> Policy:
    """The policy called ``name``, or a UserError naming ``where`` and the policies there are."""
    p = POLICIES.get(name)
    if p is None:
        raise UserError(where, name, sorted(POLICIES))
    return p


@dataclass(frozen=True)
class Patch:
    commit: str
    subject: str
    changes: dict[str, str]
    version: str = ""  # first release containing it


@dataclass(frozen=True)
class Kernel:
    name: str
    base: str
    policies: dict[str, str]
    patches: tuple[str, ...] = ()
    description: str = ""


PATCHES: dict[str, Patch] = {
    p.commit: p
    for p in (
        # The generic split PMD lock; USE_SPLIT_PMD_PTLOCKS also needs the architecture's
        # ARCH_ENABLE_SPLIT_PMD_PTLOCK, which x86 got from the series' last patch (below).
        Patch("e009bb30c8df", "mm: implement split page table lock for PMD level", {}, "v3.13"),
        # "[PATCHv5 11/11] x86, mm: enable split page table lock for PMD level" (linux-mm,
        # Message-Id 1381154053-4848-12-git-send-email-kirill.shutemov@linux.intel.com), merged
        # for v3.13 with the series; its upstream commit id was not found in the stored corpus,
        # so it is catalogued under this name.
        Patch("x86-splitpmd", "x86, mm: enable split page table lock for PMD level",
              {"pmd_ptl": "split"}, "v3.13"),
        Patch("e1f56c89b040", "mm: convert mm->nr_ptes to atomic_long_t", {"nr_ptes_atomic": "on"}, "v3.13"),
        # Davidlohr Bueso, 2014-04-07, merged for v3.15 (mm/vmacache.c; verified by blame lines in stored trees)
        Patch("615d6e8756c8", "mm: per-thread vma caching", {"vma_cache": "task"}, "v3.15"),
        Patch("8382d914ebf7", "mm, hugetlb: improve page-fault scalability",
              {"hugetlb_fault_lock": "fault-mutex-table"}, "v3.15"),
        Patch("fb0527bd5ea9", "locking/mutexes: Introduce cancelable MCS lock for adaptive spinning",
              {"mutex_osq": "on"}, "v3.15"),
        Patch("4fc828e24cd9", "locking/rwsem: Support optimistic spinning",
              {"rwsem_spin_on_owner": "on"}, "v3.16"),
        Patch("9d659ae14b54", "locking/mutex: Add lock handoff to avoid starvation",
              {"mutex_handoff": "on"}, "v4.10"),
        Patch("a33fda35e3a7", "locking/qspinlock: Introduce a simple generic 4-byte queued spinlock",
              {"spinlock": "queued"}, "v4.2"),
        # the wake-ups of the sleeping locks leave wait_lock (docs/sources-rwsem-wait-lock.md: absent from
        # v4.5.7 / v4.7.4, present in v4.6.2 / v4.8.15)
        Patch("1329ce6fbbe4", "locking/mutex: Allow next waiter lockless wakeup",
              {"mutex_wake_in_wait_lock": "off"}, "v4.6"),
        Patch("133e89ef5ef3", "locking/rwsem: Enable lockless waiter wakeup(s)",
              {"rwsem_wake_in_wait_lock": "off"}, "v4.8"),
        # tip core/rcu, 24 Mar 2020 (tip-bot2 mail, store id 48041276917); in Paul McKenney's "RCU commits
        # for v5.7" pull (store id 7179659054). A workload change, not a lock change: it moves which lines
        # the locktorture writers share (workloads/locktorture.py).
        Patch("c0e1472d8078", "locktorture: Use private random-number generators",
              {"locktorture_rand": "private"}, "v5.7"),
        Patch("d8a759b57035", "mm, page_alloc: double zone's batchsize", {"pcp_batch_cap": "1m"}, "v4.19"),
        Patch("44042b449872", "mm/page_alloc: allow high-order pages to be stored on the per-cpu lists",
              {"pcp_orders": "0-3+thp"}, "v5.14"),
        Patch("b92ca18e8ca5", "mm/page_alloc: disassociate the pcp->high from pcp->batch",
              {"pcp_high": "zone_highsize"}, "v5.14"),
        Patch("3b12e7e97938", "mm/page_alloc: scale the number of pages that are batch freed",
              {"pcp_free_factor": "on"}, "v5.14"),
        Patch("c49c2c47dab6", "mm/page_alloc: limit the number of pages on PCP lists when reclaim is active",
              {"zone_flags_free": "on"}, "v5.14"),
        Patch("f26b3fa04611", "mm/page_alloc: limit number of high-order pages on PCP during bulk free",
              {"pcp_free_high": "free_factor"}, "v5.18"),
        Patch("da1c55f1b272", "mmap locking API: rename mmap_sem to mmap_lock",
              {"mmap_lock_name": "mmap_lock"}, "v5.8"),
        Patch("ca71fe1ad922", "mm, pcp: avoid to drain PCP when process exit",
              {"pcp_free_high": "consecutive"}, "v6.7"),
        # Computes the per-CPU LLC slice 362d37a106dd reads; no allocator behaviour of its own.
        Patch("94a3bfe4073c", "cacheinfo: calculate size of per-CPU data cache slice", {}, "v6.7"),
        Patch("362d37a106dd", "mm, pcp: reduce lock contention for draining high-order pages",
              {"pcp_free_high_batch": "llc"}, "v6.7"),
        # Vladimir Davydov's kmemcg series (linux-mm 2016-05-23, [PATCH 6/8]; merged for v4.8 with
        # "af_unix: charge buffers to kmemcg"); the short id as Balbir Singh's powerpc series cites it
        # (linux-mm 2017-05-01, "Implement page table accounting for powerpc")
        Patch("3e79ec7", "arch: x86: charge page tables to kmemcg", {"pgtable_account": "on"}, "v4.8"),
        Patch("bf9f1baa279f", "net: add dedicated kmem_cache for typical/small skb->head",
              {"skb_small_head": "on"}, "v6.3"),
        Patch("c79b57e462b5", "mm: hugetlb: clear target sub-page last when clearing huge page",
              {"huge_clear_order": "target-last"}, "v4.14"),
        Patch("c9f4cd713835", "mm, huge page: copy target sub-page last when copy huge page",
              {"huge_copy_order": "target-last"}, "v4.18"),
        Patch("1b426bac66e6", "hugetlb: use same fault hash key for shared and private mappings",
              {"hugetlb_fault_hash": "mapping-index"}, "v5.2"),
        Patch("4f23dbc1e657", "locking/rwsem: Implement lock handoff to prevent lock starvation",
              {"rwsem_handoff": "on"}, "v5.3"),
        Patch("d3681e269fff", "locking/rwsem: Wake up almost all readers in wait queue",
              {"rwsem_reader_wake": "all"}, "v5.3"),
        Patch("cf69482d62d9", "locking/rwsem: Enable readers spinning on writer",
              {"rwsem_reader_spin": "on"}, "v5.3"),
        Patch("7d43f1ce9dd0", "locking/rwsem: Enable time-based spinning on reader-owned rwsem",
              {"rwsem_writer_spin_on_readers": "on"}, "v5.3"),
        Patch("5cfd92e12e13", "locking/rwsem: Adaptive disabling of reader optimistic spinning",
              {"rwsem_reader_spin_adaptive": "on"}, "v5.3"),
        Patch("617f3ef95177", "locking/rwsem: Remove reader optimistic spinning",
              {"rwsem_reader_spin": "off", "rwsem_reader_spin_adaptive": "off"}, "v5.11"),
        Patch("1a728dff855a", "locking/rwsem: Enable reader optimistic lock stealing",
              {"rwsem_reader_steal": "on"}, "v5.11"),
        Patch("c0d0381ade79", "hugetlbfs: use i_mmap_rwsem for more pmd sharing synchronization",
              {"hugetlb_i_mmap_rwsem": "always"}, "v5.7"),
        # Proposed in seeds/004 (Mike Kravetz, 2020-06-25), never merged as such: no commit id, no release.
        Patch("hugetlb-rwsem-if-shareable",
              "hugetlbfs: take i_mmap_rwsem in hugetlb_fault only if vma_shareable() (proposed fix)",
              {"hugetlb_i_mmap_rwsem": "if-shareable"}),
        # v6.1 went back to i_mmap_rwsem in huge_pmd_share only; the per-VMA lock that replaced it
        # (8d9bfb260814, shareable VMAs only) is not modelled.
        Patch("3a47c54f09c4", "hugetlbfs: revert use i_mmap_rwsem for more pmd sharing synchronization",
              {"hugetlb_i_mmap_rwsem": "never"}, "v6.1"),
        Patch("1c30844d2dfe", "mm: reclaim small amounts of memory when an external fragmentation event occurs",
              {"zone_flags_line": "free_area"}, "v5.0"),
        # With CONFIG_UNACCEPTED_MEMORY, which LKP's x86_64-rhel-8.3 config has from v6.5 (AMD_MEM_ENCRYPT=y
        # selects it; the robot's attached config, store id 40186099498): docs/pcp-free-high.md, session 28.
        Patch("dcdfdd40fa82", "mm: Add support for unaccepted memory", {"zone_flags_line": "lock"}, "v6.5"),
        # Merged by Linus 2019-12-01 for v5.5 (seeds/002, RFC 02/10, acked by Mel Gorman).
        Patch("a818f5363a0e", "autonuma: reduce cache footprint when scanning page tables",
              {"numa_scan_check": "protnone-first"}, "v5.5"),
        # --- issue 22: the per-VMA lock ---
        # v6.4: lock_vma_under_rcu (anonymous VMAs with an anon_vma only) and x86's VMA-lock-first fault path;
        # the policy needs both, so it is set by the second.
        Patch("50ee32537206", "mm: introduce lock_vma_under_rcu to be used from arch-specific code", {}, "v6.4"),
        Patch("0bff0aaea03e", "x86/mm: try VMA lock-based page fault handling first", {"vma_lock": "anon"}, "v6.4"),
        Patch("350f6bbca1de", "mm: allow per-VMA locks on file-backed VMAs", {"vma_lock": "file"}, "v6.6"),
        # 24 Jul 2023 (Yin Fengwei, store id 38428985327), in the v6.6 merge window's mm tree (store id 65766428204)
        Patch("f5617ffeb450", "mm: run the fault-around code under the VMA lock",
              {"vma_lock_fault_around": "on"}, "v6.6"),
        # "Handle more faults under the VMA lock" (Matthew Wilcox, 6 Oct 2023), v6.7 in this order (the robot
        # reports' parents: 164b06f238b9 -> 4ed4379881aa, 4de8c93a4751 -> 12214eba1992).
        # wp_page_copy of private file pages (do_wp_page) is not modelled: no behaviour of its own here.
        Patch("164b06f238b9", "mm: call wp_page_copy() under the VMA lock", {}, "v6.7"),
        Patch("4ed4379881aa", "mm: handle shared faults under the VMA lock",
              {"vma_lock_shared_fault": "on"}, "v6.7"),
        Patch("4de8c93a4751", "mm: handle COW faults under the VMA lock", {"vma_lock_cow_fault": "on"}, "v6.7"),
        Patch("12214eba1992", "mm: handle read faults under the VMA lock", {"vma_lock_read_fault": "on"}, "v6.7"),
        # "Improve anon_vma scalability for anon VMAs" (Matthew Wilcox, 26 Apr 2024; patches 2/4 and 4/4, store ids
        # 40335629794, 40596904626), in the "MM updates for 6.10-rc1" pull (store id 26004344308): v6.10. The ids are
        # mm-stable's, as in linux-next of 2024-05-20 (store id 65753356838); not checked against a v6.10 tree.
        Patch("a373baed5a9d", "mm: delay the check for a NULL anon_vma", {"vma_lock_anon_vma": "retry"}, "v6.10"),
        Patch("737019cf6ac5", "mm: optimise vmf_anon_prepare() for VMAs without an anon_vma",
              {"vma_lock_anon_vma": "trylock"}, "v6.10"),
        # --- issue 19: PCP high auto-tuning, v3 patches 4-9 (1-3 are above); ids verified in the
        # upstream listing (docs/sources-page-alloc.md C.1), texts read as in docs/pcp-series.md ---
        Patch("52166607ecc9", "mm: restrict the pcp batch scale factor to avoid too long latency",
              {"pcp_batch_scale_max": "5"}, "v6.7"),
        Patch("c0a242394cb9", "mm, page_alloc: scale the number of pages that are batch allocated",
              {"pcp_alloc_factor": "on"}, "v6.7"),
        Patch("90b41691b988", "mm: add framework for PCP high auto-tuning", {"pcp_high_tuning": "framework"}, "v6.7"),
        Patch("51a755c56dc0", "mm: tune PCP high automatically", {"pcp_high_tuning": "auto"}, "v6.7"),
        Patch("57c0419c5f0e", "mm, pcp: decrease PCP high if free pages < high watermark",
              {"pcp_below_high": "on"}, "v6.7"),
        Patch("6ccdcb6d3a74", "mm, pcp: reduce detecting time of consecutive high order page freeing",
              {"pcp_free_count": "on", "pcp_free_factor": "off"}, "v6.7"),
        # Nikhil Dhama, "mm: pcp: increase pcp->free_count threshold to trigger free_high" (store ids 13986680661:
        # the final changelog, 20100711996: the code as merged); upstream c544a952ba61, in v6.15 (the robot's
        # netperf report on it, store id 4812500590, names v6.15 vanilla as its base).
        Patch("c544a952ba61", "mm: pcp: increase pcp->free_count threshold to trigger free_high",
              {"pcp_free_high_threshold": "batch+high_min/2"}, "v6.15"),
        # --- issue 22: mappings and THP alignment ---
        # Merged for v6.8: a robot report names it 6.7.0-rc4-00061-gefa7df3e3bb5 (the mm tree on v6.7-rc4,
        # store id 25380681085). The top-down fix 85b9f46e8ea4 ("mm: thp_get_unmapped_area must honour
        # topdown preference", Jan 2024, store id 19849712320) is folded in: v6.8 has both.
        Patch("efa7df3e3bb5", "mm: align larger anonymous mappings on THP boundaries",
              {"thp_anon_align": "pmd-if-large"}, "v6.8"),
        # "[PATCH hotfix 6.12]" (Message-ID 20241024151228.101841-2-vbabka@suse.cz), robot report on
        # torvalds master 7 Nov 2024
        Patch("d4148aeab412", "mm, mmap: limit THP alignment of anonymous mappings to PMD-aligned sizes",
              {"thp_anon_align": "pmd-if-multiple"}, "v6.12"),
        # linux-next 2025-09-28 (robot report 202509281337.d1edd7ab-lkp@intel.com); the release it merged
        # in was not verified, so it belongs to no catalogued release
        Patch("849d5cff4d48", "/dev/zero: try to align PMD_SIZE for private mapping", {"dev_zero_align": "thp"}),
        # --- issue 15: THP COW split (3917c80280c9) ---
        # Kirill A. Shutemov, merged for v5.8 (the patch as posted: store id 49167029271; the v5.8+ code read
        # in a v6.1-era mm/huge_memory.c, store id 21518380, and in v6.18's wp_huge_pmd, store id 54831735195)
        Patch("3917c80280c9", "thp: change CoW semantics for anon-THP", {"thp_cow": "split"}, "v5.8"),
    )
}

_V312 = {
    "spinlock": "ticket",
    "pmd_ptl": "mm",
    "pte_ptl": "split",
    "thp": "always",
    "rwsem_spin_on_owner": "off",
    "rwsem_writer_spin_on_readers": "off",
    "rwsem_reader_spin": "off",
    "rwsem_reader_steal": "off",
    "rwsem_reader_spin_adaptive": "off",
    "rwsem_handoff": "off",
    "rwsem_wait_lock": "on",
    "rwsem_wake_in_wait_lock": "on",
    "mutex_wake_in_wait_lock": "on",
    "mutex_osq": "off",
    "mmap_lock_name": "mmap_sem",
    "mutex_handoff": "off",
    "spinlock_page_table_lock": "default",
    "spinlock_ptlock": "default",
    "spinlock_zone_lock": "default",
    "spinlock_hugetlb_lock": "default",
    "spinlock_list_lock": "default",
    "spinlock_unix_lock": "default",
    "spinlock_lockstress": "default",
    "locktorture_rand": "shared",
    "hugetlb_fault_lock": "instantiation-mutex",
    "nr_ptes_atomic": "off",
    "vma_cache": "mm",
    "stat_interval_ms": "1000",
    "pcp_batch_cap": "512k",
    "pcp_batch": "auto",
    "pcp_orders": "0",
    "pcp_high": "6xbatch",
    "percpu_pagelist_high_fraction": "0",
    "pcp_free_factor": "off",
    "pcp_free_high": "off",
    "pcp_free_high_batch": "off",
    "skb_small_head": "off",
    # Tasks in a non-root cgroup v2 memcg two counters deep: page_counter_try_charge walks c->parent up to
    # and including the root's counter (mm/page_counter.c), so a test cgroup directly under the root is 2,
    # one under a slice 3 (this VM: 3, native/sysinfo.memcg). Not pinned by the sources: estimate, plausible
    # 2-4. mm/lru_anon.py's user-page charges use the same counters. (Before session 18 lru_anon had its own
    # MEMCG_LEVELS = 2 and said the root was not charged on v2: only tasks *in* the root memcg are not.)
    "memcg_kmem": "v2",
    "memcg_levels": "2",
    "pgtable_account": "off",
    "huge_clear_order": "sequential",
    "huge_copy_order": "sequential",
    "hugetlb_fault_hash": "private-by-mm",
    "rwsem_reader_wake": "until-writer",
    "hugetlb_i_mmap_rwsem": "never",
    # NUMA balancing (v3.8+). Off unless --set numa_balancing=1|2, as on a kernel booted with
    # numa_balancing=disable; the sysctl defaults are kernel/sched/fair.c's (v5.4).
    "numa_balancing": "0",
    "numa_scan_check": "page-first",
    "numa_balancing_scan_delay_ms": "1000",
    "numa_balancing_scan_period_min_ms": "1000",
    "numa_balancing_scan_period_max_ms": "60000",
    "numa_balancing_scan_size_mb": "256",
    "numa_balancing_hot_threshold_ms": "1000",
    "numa_balancing_promote_rate_limit_mbps": "65536",
    # --- issue 22: the per-VMA lock (v6.4+) ---
    "vma_lock": "off",
    "vma_lock_fault_around": "off",
    "vma_lock_cow_fault": "off",
    "vma_lock_shared_fault": "off",
    "vma_lock_read_fault": "off",
    "vma_lock_anon_vma": "check",
    # issue 19: PCP high auto-tuning (v6.7)
    "pcp_batch_scale_max": "off",
    "pcp_alloc_factor": "off",
    "pcp_high_tuning": "off",
    "pcp_below_high": "off",
    "pcp_free_count": "off",
    "zone_flags_line": "none",
    "zone_flags_free": "off",
    "pcp_free_high_threshold": "batch",
    "pcp_high_min": "auto",
    "pcp_high_max": "auto",
    # --- issue 22: mappings and THP alignment ---
    "thp_anon_align": "off",
    "dev_zero_align": "off",
    # --- issue 15: THP COW split (3917c80280c9) ---
    "thp_cow": "copy",
    # --- issue 15/22: page-table freeing at munmap ---
    "pgtable_free": "page",
}


def _apply(base: dict[str, str], patches: tuple[str, ...]) -> dict[str, str]:
    out = dict(base)
    for p in patches:
        out.update(PATCHES[p].changes)
    return out


def _release(name: str, upto: str) -> Kernel:
    """A release = v3.12 plus every catalogued patch merged at or before it."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v[1:].split("."))

    pts = tuple(c for c, p in PATCHES.items() if p.version and key(p.version) <= key(upto))
    desc = f"Linux {name} (policies of catalogued patches merged by {name})"
    return Kernel(name, name, _apply(_V312, pts), pts, desc)


def _hugetlb_rwsem_kernels() -> tuple[Kernel, ...]:
    """seeds/004: c0d0381ade79 (merged for v5.7-rc1), its parent 49aef7175cc6 and
    the parent's policies + c0d0381ade79 + the proposed if-shareable fix. The
    parent has every catalogued patch of v5.6 (none of the catalogue's mm or
    locking patches landed between v5.6 and 49aef7175cc6; c0e1472d8078, a
    locktorture change of the same merge window, acts on no path these arms run)."""
    base = _release("v5.6", "v5.6")
    c0 = ("c0d0381ade79",)
    fix = ("c0d0381ade79", "hugetlb-rwsem-if-shareable")
    return (
        Kernel("c0d0381ade79^", "v5.6", dict(base.policies), base.patches,
               "49aef7175cc6, the parent of c0d0381ade79 (v5.6 policies)"),
        Kernel("c0d0381ade79", "v5.6", _apply(base.policies, c0), base.patches + c0,
               "c0d0381ade79: hugetlb_fault holds i_mmap_rwsem for read"),
        Kernel("c0d0381ade79+fix", "v5.6", _apply(base.policies, fix), base.patches + fix,
               "c0d0381ade79 + proposed fix: i_mmap_rwsem only for shareable VMAs"),
    )


def _mmap_align_kernels() -> tuple[Kernel, ...]:
    """Issue 22: the robot's base/patched pairs. d4148aeab412's parent 15e8156713cc is v6.12-rc: every
    catalogued patch up to v6.11 (efa7df3e3bb5 and v6.10's a373baed5a9d / 737019cf6ac5 included),
    d4148aeab412 not. 849d5cff4d48's parent
    337135e6124b is linux-next of 2025-09-28, after d4148aeab412 (v6.12): the catalogue's v6.12+
    policies (no catalogued patch landed between v6.12 and that date)."""
    v611, v612 = _release("v6.11", "v6.11"), _release("v6.12", "v6.12")
    dz = ("849d5cff4d48",)
    return (
        Kernel("d4148aeab412^", "v6.11", dict(v611.policies), v611.patches,
               "15e8156713cc, the parent of d4148aeab412 (v6.12-rc; efa7df3e3bb5 aligns every anonymous mapping "
               ">= 2 MiB)"),
        Kernel("d4148aeab412", "v6.11", dict(v612.policies), v612.patches,
               "d4148aeab412: THP alignment only for anonymous mappings whose length is a multiple of 2 MiB"),
        Kernel("849d5cff4d48^", "v6.12", dict(v612.policies), v612.patches,
               "337135e6124b, the parent of 849d5cff4d48 (linux-next 2025-09-28; v6.12+ policies)"),
        Kernel("849d5cff4d48", "v6.12", _apply(v612.policies, dz), v612.patches + dz,
               "849d5cff4d48: MAP_PRIVATE /dev/zero mappings THP-aligned"),
    )


KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel("v3.12", "v3.12", dict(_V312), (), "Linux v3.12: ticket spinlocks, mm-wide PMD lock"),
        _release("v3.13", "v3.13"),
        _release("v4.13", "v4.13"),
        _release("v4.14", "v4.14"),
        _release("v4.17", "v4.17"),
        _release("v4.18", "v4.18"),
        _release("v5.4", "v5.4"),
        _release("v5.5", "v5.5"),
        _release("v5.6", "v5.6"),
        _release("v5.7", "v5.7"),
        _release("v6.6", "v6.6"),
        _release("v6.7", "v6.7"),
        _release("v6.12", "v6.12"),
        _release("v6.15", "v6.15"),  # the nearest to a v6.15+ host (validate's closest_kernel)
        *_hugetlb_rwsem_kernels(),
        *_mmap_align_kernels(),  # issue 22
    )
}


@dataclass(frozen=True)
class ResolvedKernel:
    name: str
    policies: dict[str, str]
    patches: tuple[str, ...] = field(default=())

    def get(self, name: str) -> str:
        return self.policies[name]

    def flag(self, name: str) -> bool:
        return self.policies[name] == "on"


def load_kernel_yaml(path: str | Path) -> Kernel:
    """A user kernel: ``name``, ``base`` (a catalogued kernel), ``patches``, ``policies``
    (schema: :class:`mmsim.kernels.schema.KernelFile`)."""
    from pydantic import ValidationError

    from mmsim import inputs
    from mmsim.kernels.schema import KernelFile, as_text, to_user_error

    p = Path(path)
    data: Any = inputs.load_yaml(p, p.name, "a kernel YAML file", "a YAML mapping with name, base, patches, policies")
    if not isinstance(data, dict):
        raise UserError(p.name, type(data).__name__, "a YAML mapping with name, base, patches, policies")
    try:
        spec = KernelFile.model_validate(data)
    except ValidationError as e:
        raise to_user_error(e, p.name, KernelFile, data) from None
    if spec.base not in KERNELS:
        raise UserError(f"{p.name}: base", spec.base, sorted(KERNELS))
    pol = {k: as_text(v) for k, v in (spec.policies or {}).items()}
    r = resolve(spec.base, [str(x) for x in spec.patches or ()], pol, where=p.name)
    return Kernel(spec.name if spec.name is not None else p.stem, spec.base, r.policies, r.patches,
                  spec.description)


def resolve(
    kernel: str,
    patches: list[str] | tuple[str, ...] = (),
    overrides: dict[str, str] | None = None,
    where: str = "--set",
) -> ResolvedKernel:
    """Kernel name or YAML path + patches + ``--set`` overrides → policies."""
    if kernel in KERNELS:
        k = KERNELS[kernel]
    elif kernel.endswith((".yaml", ".yml")) or is_file(kernel):
        k = load_kernel_yaml(kernel)
    else:
        raise UserError("kernel", kernel, sorted(KERNELS) + ["or a kernel YAML file"])
    pol = dict(k.policies)
    applied = list(k.patches)
    label = k.name
    for pid in patches:
        p = lookup_patch(pid)
        if p.commit in applied:  # v3.12+X+X, v3.13+e009bb30c8df: was listed (and labelled) twice
            raise UserError("patch", pid, f"a patch the kernel does not have yet ({label} has {p.commit[:12]})")
        pol.update(p.changes)
        applied.append(p.commit)
        label += f"+{p.commit[:12]}"
    for name, value in (overrides or {}).items():
        pol[name] = policy(name, where).check(value, where)
    if overrides:
        label += "".join(f",{a}={b}" for a, b in sorted(overrides.items()))
    return ResolvedKernel(label, pol, tuple(applied))


def lookup_patch(pid: str) -> Patch:
    """A catalogued patch by its commit id (at least 7 characters), or a patch YAML file."""
    if pid.endswith((".yaml", ".yml")) or is_file(pid):
        return load_patch_yaml(pid)
    match = [c for c in PATCHES if c.startswith(pid) and len(pid) >= 7]
    if len(match) != 1:
        raise UserError("patch", pid, sorted(PATCHES) + ["or a patch YAML file"])
    return PATCHES[match[0]]


def load_patch_yaml(path: str | Path) -> Patch:
    """A user patch: ``commit`` (an id, default the file name), ``subject``, ``changes`` (policy: value)
    (schema: :class:`mmsim.kernels.schema.PatchFile`).

    Example (``batch127.yaml``)::

        commit: batch127
        subject: "mm, pcp: try a batch of 127"
        changes:
          pcp_batch: 127
    """
    from pydantic import ValidationError

    from mmsim import inputs
    from mmsim.kernels.schema import PatchFile, as_text, to_user_error

    p = Path(path)
    what = "a YAML mapping with commit, subject, changes, version"
    data: Any = inputs.load_yaml(p, p.name, "a patch YAML file", what)
    if not isinstance(data, dict):
        raise UserError(p.name, type(data).__name__, what)
    try:
        spec = PatchFile.model_validate(data)
    except ValidationError as e:
        raise to_user_error(e, p.name, PatchFile, data) from None
    out: dict[str, str] = {}
    for name, value in spec.changes.items():
        out[name] = policy(name, f"{p.name}: changes").check(as_text(value), f"{p.name}: changes")
    commit = str(spec.commit or p.stem)
    return Patch(commit, spec.subject or commit, out, str(spec.version or ""))


def split_kernel(text: str) -> tuple[str, tuple[str, ...]]:
    """``v3.12+e009bb30c8df+e1f56c89b040`` → (``v3.12``, patches); a catalogued kernel name or a YAML
    file is taken whole. A patch may be a patch YAML file: ``v6.6+my.yaml``."""
    if text in KERNELS or "+" not in text or is_file(text):
        return text, ()  # a catalogued name may itself contain "+" (c0d0381ade79+fix)
    base, *patches = text.split("+")
    if not base.strip() or any(not p.strip() for p in patches):  # v3.12+, +x, v3.12++x: was run as v3.12 / x
        raise UserError("kernel", text, "a kernel name, or BASE+PATCH+... with a kernel name and patch commit ids "
                        "or patch YAML files, none empty (mmsim kernels lists both)")
    return base, tuple(patches)


def resolve_kernel(text: str, patches: list[str] | tuple[str, ...] = (),
                   overrides: dict[str, str] | None = None) -> ResolvedKernel:
    """A kernel as users write it (a name, ``BASE+PATCH+...``, a kernel YAML), then ``patches``
    (commit ids or patch YAML files) and ``--set`` overrides."""
    base, extra = split_kernel(text)
    return resolve(base, [*extra, *patches], overrides)


def list_kernels() -> list[Kernel]:
    return list(KERNELS.values())


def list_patches() -> list[Patch]:
    return list(PATCHES.values())
