"""Page-fault paths (mm/memory.c, arch/x86/mm/fault.c).

``do_page_fault`` → ``handle_mm_fault`` → ``__handle_mm_fault``: allocate
the PMD table if the PUD is empty (``__pmd_alloc``), then either a huge
fault (``do_huge_pmd_anonymous_page``, mm/huge_memory.py) when the PMD is
none and THP applies, or the PTE table (``__pte_alloc``) and
``do_anonymous_page``. ``mmap_sem`` is held for read around it all.
Each function is a generator run inside the faulting task; every ``yield``
is CPU time (int ns) or a wait (PARK), charged to the named kernel function.
"""

from __future__ import annotations

import functools
from collections.abc import Generator, Hashable
from typing import Any

import numpy as np

from mmsim.engine.core import PARK, Task
from mmsim.machine.hierarchy import subpage_range
from mmsim.metrics.counters import PAGE_FAULTS
from mmsim.metrics.events import VmEvent
from mmsim.mm import (  # cycles: called at run time
    huge_memory,
    hugetlb,
    lru_anon,
    memcg_kmem,
    memory_file,
    mempolicy,
    vma_lock,
)
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE, PUD_SHIFT, note_pte_node, numa_arrays
from mmsim.mm.user_loops import loop_cost
from mmsim.mm.vma_lock import RETRY, vmf_anon_prepare

PGFAULT = int(VmEvent.PGFAULT)
NUMA_HINT_FAULTS = int(VmEvent.NUMA_HINT_FAULTS)
NUMA_HINT_FAULTS_LOCAL = int(VmEvent.NUMA_HINT_FAULTS_LOCAL)
# (cycles, instructions) of do_numa_page around its locks and migration: pte_modify back to
# vma->vm_page_prot, ptep_modify_prot_commit, update_mmu_cache, vm_normal_page, numa_migrate_prep
# (get_page, the vmstat events), mpol_misplaced. estimate
DO_NUMA_PAGE = (500, 450)
# do_huge_pmd_numa_page without migration: pmd_modify, set_pmd_at, the same bookkeeping. estimate
DO_HUGE_PMD_NUMA_PAGE = (600, 500)
COW_FAULT = int(VmEvent.COW_FAULT)
PAGE_SHIFT = 12
SUBPAGE = 1 << PAGE_SHIFT
HPAGE_NR = 512
HPAGE_SIZE = HPAGE_NR * SUBPAGE


def stream_write(task: Task, system: Any, node: int, nbytes: int, func: str, delay: int = 0) -> int:
    """A write stream over ``nbytes`` that no later access re-reads (page-table
    pages), starting ``delay`` ns from now and sharing the node's bandwidth;
    charges and returns its ns (as predicted at its start: machine/bandwidth.py).
    Instructions: one per 64-byte line."""
    d = system.bandwidth.write_ns(node, nbytes, system.machine.cost.core_clear_gbs, system.engine.now + delay)
    ns: int = system.counters.busy(task.cpu, func, d, nbytes // 64)
    return ns


def start_stream(task: Task, s: Any, node: int, nbytes: int, func: str) -> int:
    """Start a write stream of ``nbytes`` that ``task`` waits for (the caller then yields
    PARK): at the stream's exact end under the node's bandwidth sharing, its ns are charged
    to ``func`` (one instruction per 64-byte line) and the task is woken. Returns the ns it
    would take if no other stream started (for models that need a duration now)."""
    now = s.engine.now
    cpu = task.cpu
    engine = s.engine
    counters = s.counters

    def done(end: int) -> None:
        counters.busy(cpu, func, end - now, nbytes // 64)
        engine.wake(task, max(0, end - engine.now))

    d: int = s.bandwidth.start_write(node, nbytes, s.machine.cost.core_clear_gbs, now, done)
    return d


def clear_user_pages(task: Task, system: Any, node: int, nbytes: int, func: str) -> Generator[Any, Any, None]:
    """``clear_page_erms`` over ``nbytes``, as one bandwidth-shared stream the task waits for."""
    start_stream(task, system, node, nbytes, func)
    yield PARK


# -- huge page sub-page order (clear_huge_page / copy_user_huge_page) ---------

ORDER_POLICIES = ("sequential", "target-last")


@functools.lru_cache(maxsize=2048)
def huge_page_order(policy: str, target: int, n: int = HPAGE_NR) -> np.ndarray:
    """The order in which the kernel processes the ``n`` sub-pages of a huge
    page when the faulting sub-page is ``target``.

    ``sequential``: ``clear_huge_page`` / ``copy_user_huge_page`` before
    c79b57e462b5 (v4.14) / c9f4cd713835 (v4.18): ``for (i = 0; i < n; i++)``.

    ``target-last``: ``process_huge_page()`` (mm/memory.c, v4.18; the same
    loop was inline in ``clear_huge_page`` in v4.14): if the target is in the
    first half (``2 * t <= n``) process ``n-1 .. 2t`` downwards, else
    ``0 .. base-1`` upwards with ``base = n - 2 * (n - t)``; then the
    remaining ``2l`` sub-pages around the target pairwise from the outside
    in (``base + i`` and ``base + 2l - 1 - i``), so the target comes last.
    """
    if policy == "sequential":
        out = list(range(n))
    elif policy == "target-last":
        if not 0 <= target < n:
            raise ValueError(f"target sub-page {target} outside 0..{n - 1}")
        out = []
        if 2 * target <= n:
            base, ln = 0, target
            out.extend(range(n - 1, 2 * target - 1, -1))
        else:
            base = n - 2 * (n - target)
            ln = n - target
            out.extend(range(base))
        for i in range(ln):
            out.append(base + i)
            out.append(base + 2 * ln - 1 - i)
    else:
        raise ValueError(f"unknown sub-page order policy {policy!r}; allowed: {', '.join(ORDER_POLICIES)}")
    a = np.array(out, dtype=np.int64)
    a.setflags(write=False)
    return a


def clear_huge_page(task: Task, s: Any, node: int, key: Hashable, addr_hint: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``clear_huge_page(page, addr_hint, HPAGE_PMD_NR)``: 512
    ``clear_user_highpage`` calls in the order of policy ``huge_clear_order``,
    one bandwidth-shared stream the task waits for (its end moves as other
    streams start and end: machine/bandwidth.py); each sub-page enters the
    LLC as it is cleared (so the last ones cleared are the hottest), at the
    rate predicted when it starts. The per-sub-page
    ``cond_resched()`` is honoured once after the stream."""
    order = huge_page_order(s.policy("huge_clear_order"), (addr_hint >> PAGE_SHIFT) & (HPAGE_NR - 1))
    now = s.engine.now
    d = start_stream(task, s, node, HPAGE_SIZE, "clear_page_erms")  # its end is exact; d as predicted now
    s.cache.fill(task.cpu, key, HPAGE_NR, order, d, now)
    yield PARK
    if s.sched.cpus[task.cpu].need_resched:
        yield from s.sched.cond_resched(task)


def copy_pages(
    task: Task, s: Any, node: int, dst: Hashable, src: Hashable, npages: int, order: np.ndarray, func: str
) -> int:
    """Copy sub-pages ``order`` of page ``src`` into the new page ``dst``
    (``copy_user_highpage`` each: ``copy_page``, rep movsq). A source
    sub-page still in the LLC is read from it; a missed one is read from
    DRAM; the destination is written (its write-back charged now). Returns
    the ns charged."""
    m = s.machine
    bw = s.bandwidth
    core = m.cost.core_clear_gbs
    now = s.engine.now
    rate = bw.rate(node, core, now)
    t_core = SUBPAGE / core
    eq_wb = float(SUBPAGE)
    eq_rd = bw.equiv_bytes(node, SUBPAGE, 0)
    t_hit = max(t_core, eq_wb / rate)
    t_miss = max(t_core, (eq_rd + eq_wb) / rate)
    nmiss, dur = s.cache.access(task.cpu, src, npages, order, t_hit, t_miss, now, own_insert_per_sub=SUBPAGE)
    total = int(dur.sum()) + 1
    s.cache.fill(task.cpu, dst, npages, order, total, now)
    n = len(order)
    bw.occupy(node, now, int((nmiss * eq_rd + n * eq_wb) / rate), nmiss * SUBPAGE, n * SUBPAGE)
    ns: int = s.counters.busy(task.cpu, func, total, n * SUBPAGE // 64)
    return ns


def copy_user_huge_page(
    task: Task, s: Any, node: int, dst: Hashable, src: Hashable, addr_hint: int
) -> Generator[Any, Any, None]:
    """mm/memory.c ``copy_user_huge_page(dst, src, addr_hint, vma, HPAGE_PMD_NR)``
    in the order of policy ``huge_copy_order`` (target-last since
    c9f4cd713835, v4.18)."""
    order = huge_page_order(s.policy("huge_copy_order"), (addr_hint >> PAGE_SHIFT) & (HPAGE_NR - 1))
    yield copy_pages(task, s, node, dst, src, HPAGE_NR, order, "copy_page")
    if s.sched.cpus[task.cpu].need_resched:
        yield from s.sched.cond_resched(task)


def user_access(
    task: Task,
    s: Any,
    node: int,
    key: Hashable,
    npages: int,
    first: int,
    last: int,
    write: bool,
    loop: tuple[float, float],
    func: str,
    delay: int = 0,
) -> int:
    """User code touching sub-pages ``first..last-1`` of page ``key`` in order,
    every 8-byte word (usemem's ``do_rw_once``), starting ``delay`` ns from
    now. ``loop`` = (cycles, instructions) per word when the data is cached, or a
    :class:`~mmsim.mm.user_loops.UserLoop` whose cycles follow the core's issue width.
    A sub-page still in the LLC costs only the loop; a missed one streams
    from DRAM at the bandwidth share (a write miss reads the line for
    ownership and later writes it back), timed at the share it gets at
    its start; how much later (or earlier) the task's previous pass's DRAM
    traffic ended under the node's bandwidth sharing is added here
    (:func:`bw_lateness`). Returns the ns charged."""
    m = s.machine
    bw = s.bandwidth
    now = s.engine.now + delay
    words = SUBPAGE // 8
    cyc, insns = loop_cost(m, loop)
    t_hit = words * cyc / (m.freq_ghz * smt_speed(s, task.cpu))
    wr = SUBPAGE if write else 0
    eq = bw.equiv_bytes(node, SUBPAGE, wr)
    rate = bw.rate(node, m.cost.core_clear_gbs, now)
    t_miss = max(t_hit, eq / rate)
    late = bw_lateness(task, s, now)
    if npages == 1:  # a 4 KiB page: the hierarchy's scalar path
        nmiss, d = s.cache.access1(task.cpu, key, t_hit, t_miss, now)
        if nmiss > 0.0:
            sid = bw.occupy(node, now, int(nmiss * eq / rate), nmiss * SUBPAGE, nmiss * wr, track=True)
            if sid:
                task.data["bw_stream"] = (node, sid)
        ns1: int = s.counters.busy(task.cpu, func, max(1, int(d) + 1 + late), int(words * insns))
        return ns1
    idx = _range(first, last)
    nmiss, dur = s.cache.access(task.cpu, key, npages, idx, t_hit, t_miss, now)
    if nmiss:
        sid = bw.occupy(node, now, int(nmiss * eq / rate), nmiss * SUBPAGE, nmiss * wr, track=True)
        if sid:
            task.data["bw_stream"] = (node, sid)
    ns: int = s.counters.busy(task.cpu, func, max(1, int(np.add.reduce(dur)) + 1 + late), int(len(idx) * words * insns))
    return ns


def bw_lateness(task: Task, s: Any, now: int) -> int:
    """ns by which ``task``'s previous user pass's DRAM traffic ended after the end it was
    charged for (negative: before): streams that started or ended during it changed its
    share (machine/bandwidth.py). Charged by the caller at the task's next pass."""
    prev = task.data.pop("bw_stream", None)
    if prev is None:
        return 0
    lat: int = s.bandwidth.lateness(prev[0], prev[1], now)
    return lat


def smt_speed(s: Any, cpu: int) -> float:
    """Relative speed of core-bound code on ``cpu``: ``smt_thread_speed`` while
    an SMT sibling is running a task, else 1."""
    cpus = s.sched.cpus
    for sib in s.machine.smt_siblings(cpu):
        if cpus[sib].current is not None:
            return float(s.machine.cost.smt_thread_speed)
    return 1.0


_range = subpage_range  # a read-only np.arange(first, last), built once per pair


def page_key(mm: Any, addr: int, huge: bool) -> Hashable:
    """The LLC key of the page mapped at ``addr`` in ``mm``: the huge or
    small zero page, a page still COW-shared with the process it was
    inherited from (its owner's key), or the mm's own page."""
    pt = mm.pgtables
    if huge:
        slot = addr >> PMD_SHIFT
        if slot in pt.zero_huge:
            return HUGE_ZERO_PAGE
        return pt.shared.get(slot) or ("H", id(mm), slot)
    pfn = addr >> PAGE_SHIFT
    if pfn in pt.zero_ptes:
        return ZERO_PAGE
    return pt.shared.get(("P", pfn)) or ("P", id(mm), pfn)


ZERO_PAGE: Hashable = ("P", "zero_page")  # the shared empty_zero_page
HUGE_ZERO_PAGE: Hashable = ("H", "huge_zero_page")  # mm/huge_memory.c huge_zero_page


def __pmd_alloc(task: Task, mm: MmStruct, pud_slot: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``__pmd_alloc``: a new PMD table, linked under mm->page_table_lock."""
    s = mm.system
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(task.cpu), 0, owner=(mm, "pud", pud_slot))
    ns = memcg_kmem.charge_pgtable(task, s)  # pmd_alloc_one: GFP_KERNEL_ACCOUNT since 3e79ec7 (v4.8)
    if ns:
        yield ns
    yield from clear_user_pages(task, s, s.machine.cpu_node(task.cpu), 4096, "clear_page_erms")
    lk = mm.page_table_lock
    yield lk.acquire(task)
    if pud_slot not in mm.pgtables.pud_present:
        mm.pgtables.pud_present.add(pud_slot)
        mm.pgtables.nr_pmd_tables += 1
    lk.release(task)


def __pte_alloc(task: Task, mm: MmStruct, pmd_slot: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``__pte_alloc`` (v3.13): a new PTE table (``pte_alloc_one``),
    populated under ``pmd_lock(mm, pmd)`` since c4088ebdca64 ("mm: convert the
    rest to new page table lock api", v3.13): the split PMD lock where PMD locks
    are split, else ``mm->page_table_lock`` (as v3.12 took it); ``mm->nr_ptes``
    counted there."""
    s = mm.system
    yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(task.cpu), 0, owner=(mm, pmd_slot))
    ns = memcg_kmem.charge_pgtable(task, s)  # pte_alloc_one: __userpte_alloc_gfp has __GFP_ACCOUNT (3e79ec7)
    if ns:
        yield ns
    yield from clear_user_pages(task, s, s.machine.cpu_node(task.cpu), 4096, "clear_page_erms")
    pt = mm.pgtables
    lk = pt.pmd_lockptr(pmd_slot)
    yield lk.acquire(task)
    if pmd_slot not in pt.pmd:
        pt.pmd[pmd_slot] = PMD_TABLE
        pt.nr_pte_tables += 1
        if mm.nr_ptes is not None:
            yield mm.nr_ptes.add(task, "__pte_alloc")
    lk.release(task)


def clear_user_highpage(task: Task, s: Any, node: int, key: Hashable, delay: int = 0) -> int:
    """``clear_user_highpage`` of one new 4 KiB page (``clear_page_erms``):
    a bandwidth-shared stream that leaves the page in the LLC. Returns ns."""
    now = s.engine.now + delay
    d = s.bandwidth.write_ns(node, SUBPAGE, s.machine.cost.core_clear_gbs, now)
    s.cache.fill(task.cpu, key, 1, _range(0, 1), d, now)
    ns: int = s.counters.busy(task.cpu, "clear_page_erms", d, SUBPAGE // 64)
    return ns


def anon_folio(task: Task, s: Any) -> int:
    """The new 4 KiB anonymous folio's work that ``CostModel.anon_folio_ns`` measures (a write fault
    minus a zero-page read fault, less the allocator fast path, the clear and the path difference:
    memcg charge, struct page preparation, anon rmap, LRU add), charged as ``alloc_anon_folio``.
    When mm/lru_anon.py models the memcg charge and the LRU add itself (``lru_anon.enable``), their
    cycles (``CHARGE``, ``LRU_ADD_FN``) are taken out so that nothing is charged twice. 0 where the
    field is ``None`` (the presets: their ``page_fault_ns`` includes it). Returns the ns charged."""
    extra = s.machine.cost.anon_folio_ns
    if extra is None:
        return 0
    if lru_anon.state(s) is not None:
        extra -= (lru_anon.CHARGE[0] + lru_anon.LRU_ADD_FN[0]) / s.machine.freq_ghz
    if extra <= 0:
        return 0
    ns: int = s.counters.busy(task.cpu, "alloc_anon_folio", int(extra))
    return ns


def do_anonymous_page(task: Task, mm: MmStruct, vma: Vma, addr: int, write: bool = True) -> Generator[Any, Any, None]:
    """mm/memory.c ``do_anonymous_page`` (v6.7): for a read, map the shared zero page
    (``my_zero_pfn``: the read branch's own, shorter path, "do_anonymous_page/zero"); for a write,
    allocate, clear, the new folio's work (:func:`anon_folio`), map under the PTE lock.
    RSS uses the per-task cache (SPLIT_RSS_COUNTING), so no shared atomic.
    The PCP fast path and the clear touch no shared state, so they are one
    busy period (one event)."""
    s = mm.system
    slot = addr >> PMD_SHIFT
    if not write:
        lk = mm.pgtables.pte_lockptr(slot)
        yield lk.acquire(task)
        ns, ins = path("do_anonymous_page/zero", s.machine.freq_ghz)
        yield s.counters.busy(task.cpu, "do_anonymous_page", ns, ins)
        mm.pgtables.pte_bitmap(slot)[(addr >> PAGE_SHIFT) & 511] = True
        mm.pgtables.zero_ptes.add(addr >> PAGE_SHIFT)
        lk.release(task)
        return
    pa = s.page_alloc
    home = mempolicy.alloc_node(s, vma, addr, task.cpu)
    key = ("P", id(mm), addr >> PAGE_SHIFT)
    fast = pa.pcp_alloc_fast(task, home, owner=(mm, addr >> PMD_SHIFT))
    if fast is None:
        node = yield from pa.alloc_pages(task, home, 0, owner=(mm, addr >> PMD_SHIFT))
        yield clear_user_highpage(task, s, node, key) + anon_folio(task, s)
    else:
        node, ns = fast
        yield ns + clear_user_highpage(task, s, node, key, ns) + anon_folio(task, s)
    lk = mm.pgtables.pte_lockptr(slot)
    yield lk.acquire(task)
    ns, ins = path("do_anonymous_page", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "do_anonymous_page", ns, ins)
    mm.pgtables.pte_bitmap(slot)[(addr >> PAGE_SHIFT) & 511] = True
    note_pte_node(mm.pgtables, slot, (addr >> PAGE_SHIFT) & 511, node)
    yield from lru_anon.new_anon_folio(task, s, node, 1, (id(mm), slot))  # issue 22: memcg + LRU if enabled
    lk.release(task)


def handle_mm_fault(
    task: Task, mm: MmStruct, vma: Vma, addr: int, write: bool = True, pre_ns: int = 0
) -> Generator[Any, Any, str]:
    """``__do_page_fault`` + ``handle_mm_fault``. Returns the fault kind taken:
    ``"thp"``, ``"thp-zero"``, ``"thp-cow"``, ``"hugetlb"``, ``"anon"``,
    ``"zero"``, ``"cow"``, ``"numa"`` (a NUMA hinting fault) or ``"none"``
    (already mapped as needed).
    ``pre_ns``: busy time the caller charged but has not yielded yet (user
    work before the faulting access), folded into the first event."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    c.perf[cpu][PAGE_FAULTS] += 1
    c.vm[cpu][PGFAULT] += 1
    yield pre_ns + c.busy(cpu, "page_fault", int(s.machine.cost.page_fault_ns))
    if s.policy("vma_lock") != "off":  # v6.4+: the per-VMA lock first (mm/vma_lock.py)
        done = yield from vma_lock.fault_under_vma_lock(task, mm, vma, addr, write)
        if done is not None:
            return done
        # lock_mm_and_find_vma (v6.5; v6.4 in do_user_addr_fault): mmap_read_trylock's load, then its
        # try_cmpxchg below (older kernels' down_read_trylock is modelled as the cmpxchg alone)
        yield mm.mmap_sem.trylock_load(task)
    d = mm.mmap_sem.down_read(task)
    if d is PARK:
        yield d
        d = 0
    mc = mm.mmap_cache
    if mc is not None:  # __do_page_fault's find_vma (mm->mmap_cache before v3.15: MmapCache), in the first event
        d += mc.find_vma(cpu, vma)
    kind = yield from __handle_mm_fault(task, mm, vma, addr, write, False, d)
    yield mm.mmap_sem.up_read(task)
    return kind


def __handle_mm_fault(
    task: Task, mm: MmStruct, vma: Vma, addr: int, write: bool, vma_locked: bool, pre_ns: int = 0
) -> Generator[Any, Any, str]:
    """mm/memory.c ``handle_mm_fault`` → ``__handle_mm_fault`` under mmap_lock or (``vma_locked``,
    FAULT_FLAG_VMA_LOCK) the VMA lock; returns the fault kind, or ``"retry"`` (VM_FAULT_RETRY) from a
    path that cannot run under the VMA lock (hugetlb_fault; the file fault paths, mm/memory_file.py;
    ``vmf_anon_prepare`` on a VMA without an anon_vma, v6.10+: mm/vma_lock.py)."""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    ns, ins = path("handle_mm_fault", s.machine.freq_ghz)
    yield pre_ns + c.busy(cpu, "handle_mm_fault", ns, ins)
    kind = "none"
    pt = mm.pgtables
    if vma.hugetlb and vma_locked:
        return "retry"  # hugetlb_fault (v6.6): "TODO: Handle faults under the VMA lock"
    if vma.hugetlb:
        kind = yield from hugetlb.hugetlb_fault(task, mm, vma, addr, write)
    else:
        pud = addr >> PUD_SHIFT
        if pud not in pt.pud_present:
            yield from __pmd_alloc(task, mm, pud)
        slot = addr >> PMD_SHIFT
        state = pt.pmd.get(slot)
        if state == PMD_HUGE and slot in pt.huge_protnone:
            yield from do_huge_pmd_numa_page(task, mm, addr)
            kind = "numa"
        if state == PMD_HUGE and write and (slot in pt.wp_huge or slot in pt.zero_huge):
            kind = yield from huge_memory.do_huge_pmd_wp_page(task, mm, vma, addr)
            state = pt.pmd.get(slot)
            if kind == "thp-split":  # VM_FAULT_FALLBACK: the same fault goes on at PTE level (do_wp_page)
                kind = "none"
        elif state is None and huge_memory.thp_applies(s, vma, addr):
            if not vma.anon_vma:  # do_huge_pmd_anonymous_page: anon_vma_prepare / vmf_anon_prepare first
                ok = yield from vmf_anon_prepare(task, mm, vma, vma_locked)
                if not ok:
                    return RETRY
            ok = yield from huge_memory.do_huge_pmd_anonymous_page(task, mm, vma, addr, write)
            if ok:
                kind = "thp" if write else "thp-zero"
            state = pt.pmd.get(slot)
        if kind == "none" and state != PMD_HUGE:
            if state is None:
                yield from __pte_alloc(task, mm, slot)
            pfn = addr >> PAGE_SHIFT
            prot = pt.protnone.get(slot)
            if getattr(vma.file, "is_shmem", False):
                kind = yield from memory_file.do_fault(task, mm, vma, addr, write, vma_locked)
            elif not pt.pte_bitmap(slot)[pfn & 511]:
                if write and not vma.anon_vma:  # do_anonymous_page: anon_vma_prepare / vmf_anon_prepare
                    ok = yield from vmf_anon_prepare(task, mm, vma, vma_locked)
                    if not ok:
                        return RETRY
                yield from do_anonymous_page(task, mm, vma, addr, write)
                kind = "anon" if write else "zero"
            elif prot is not None and prot[pfn & 511]:
                # handle_pte_fault: pte_protnone() && vma_is_accessible() -> do_numa_page
                yield from do_numa_page(task, mm, vma, addr)
                kind = "numa"
            elif write and (pfn in pt.zero_ptes or pfn in pt.wp_ptes):
                if not vma.anon_vma:
                    # wp_page_copy's anon_vma_prepare (every kernel: v3.x do_wp_page already had it; v6.7+
                    # through vmf_anon_prepare). Under the v6.4..v6.9 rule a VMA without an anon_vma is never
                    # VMA-locked, so there it is the plain anon_vma_prepare (docs/fault-front-half.md, session 13)
                    ok = yield from vmf_anon_prepare(task, mm, vma, vma_locked)
                    if not ok:
                        return RETRY
                yield from do_wp_page(task, mm, vma, addr)
                kind = "cow"
    return kind


def anon_vma_prepare(task: Task, s: Any, vma: Vma) -> int:
    """mm/rmap.c ``anon_vma_prepare`` (v6.7) on a VMA without an ``anon_vma``: a new ``anon_vma`` and
    ``anon_vma_chain`` linked to it (once per VMA; malloc1 pays it every iteration). Returns the ns charged."""
    vma.anon_vma = True
    ns, ins = path("anon_vma_prepare", s.machine.freq_ghz)
    charged: int = s.counters.busy(task.cpu, "__anon_vma_prepare", ns, ins)
    return charged


def do_wp_page(task: Task, mm: MmStruct, vma: Vma, addr: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``do_wp_page`` → ``wp_page_copy`` (v4.13): a write to a
    write-protected PTE shared after fork (or to the zero page): allocate a
    page, ``cow_user_page`` (copy; or clear for the zero page), then under
    the PTE lock map it and ``page_remove_rmap`` the old page (an atomic on
    its ``_mapcount``, a line shared by every process mapping it). A sub-page
    of a split THP is never reused (v6.7 ``wp_can_reuse_anon_folio``: a large
    folio's refcount is above 3) and is copied like any shared page."""
    s = mm.system
    cpu = task.cpu
    pt = mm.pgtables
    pfn = addr >> PAGE_SHIFT
    home = s.machine.cpu_node(cpu)
    node = yield from s.page_alloc.alloc_pages(task, home, 0)
    key = ("P", id(mm), pfn)
    if pfn in pt.zero_ptes:
        yield clear_user_highpage(task, s, node, key) + anon_folio(task, s)
        old: Hashable = ZERO_PAGE
    else:
        old = pt.shared.get(("P", pfn)) or ("P", id(mm), pfn)
        yield copy_pages(task, s, node, key, old, 1, _range(0, 1), "copy_page") + anon_folio(task, s)
    lk = pt.pte_lockptr(addr >> PMD_SHIFT)
    yield lk.acquire(task)
    ns, ins = path("do_anonymous_page", s.machine.freq_ghz)
    yield s.counters.busy(cpu, "wp_page_copy", ns, ins)
    if old is not ZERO_PAGE:
        now = s.engine.now
        d = s.page_line(old).rmw(cpu, now)
        if isinstance(old, tuple) and old[0] == "Hsub":
            # a sub-page of a PTE-mapped THP (huge_memory.__split_huge_pmd, v5.8+): v6.7's
            # __folio_remove_rmap also drops the folio's _nr_pages_mapped, and folio_put its refcount
            # (the head's line): lines every process sharing the THP writes
            d += s.page_line((old[1], "_nr_pages_mapped")).rmw(cpu, now) + s.page_line(old[1]).rmw(cpu, now)
        yield s.counters.busy(cpu, "page_remove_rmap", d)
    pt.zero_ptes.discard(pfn)
    pt.wp_ptes.discard(pfn)
    pt.shared.pop(("P", pfn), None)
    note_pte_node(pt, addr >> PMD_SHIFT, pfn & 511, node)
    lk.release(task)
    s.counters.vm[cpu][COW_FAULT] += 1


def copy_page_range(task: Task, parent: MmStruct, child: MmStruct, vma: Vma) -> Generator[Any, Any, None]:
    """kernel/fork.c ``dup_mmap`` → mm/memory.c ``copy_page_range`` for one
    private anonymous VMA, run by the forking task. Each huge PMD goes
    through ``copy_huge_pmd`` (v4.13): a deposited PTE table
    (``pte_alloc_one``), ``get_page`` + ``page_dup_rmap`` (atomics on the
    head page and ``compound_mapcount``), ``pmdp_set_wrprotect`` on the
    parent, the same write-protected entry in the child. Each PTE table
    goes through ``copy_pte_range``: per present PTE ``get_page`` +
    ``page_dup_rmap`` and write protection (one busy period per table).
    Pages are then COW-shared: ``mm.pgtables.shared`` maps the child's
    slot to the parent's page."""
    s = parent.system
    c = s.counters
    cpu = task.cpu
    pp, cp = parent.pgtables, child.pgtables
    first, last = vma.start >> PMD_SHIFT, (vma.end - 1) >> PMD_SHIFT
    ns_huge, ins_huge = path("copy_huge_pmd", s.machine.freq_ghz)
    ns_pte, ins_pte = path("copy_one_pte", s.machine.freq_ghz)
    for slot in range(first, last + 1):
        state = pp.pmd.get(slot)
        if state is None:
            continue
        pud = slot >> (PUD_SHIFT - PMD_SHIFT)
        if pud not in cp.pud_present:
            cp.pud_present.add(pud)
            cp.nr_pmd_tables += 1
        if state == PMD_HUGE:
            yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), 0)  # pte_alloc_one
            ns = memcg_kmem.charge_pgtable(task, s)
            if ns:
                yield ns
            if slot in pp.zero_huge:
                cp.zero_huge.add(slot)
            else:
                key = pp.shared.get(slot) or ("H", id(parent), slot)
                now = s.engine.now
                d = s.page_line(key).rmw(cpu, now) + s.page_line((key, "compound_mapcount")).rmw(cpu, now)
                yield c.busy(cpu, "copy_huge_pmd", ns_huge + d, ins_huge)
                s.page_mapcount[key] = s.page_mapcount.get(key, 1) + 1
                pp.wp_huge.add(slot)
                pp.shared[slot] = key
                cp.wp_huge.add(slot)
                cp.shared[slot] = key
                cp.huge_node[slot] = pp.huge_node.get(slot, 0)
            cp.pmd[slot] = PMD_HUGE
        else:
            bits = pp.ptes.get(slot)
            n = int(bits.sum()) if bits is not None else 0
            yield from s.page_alloc.alloc_pages(task, s.machine.cpu_node(cpu), 0)  # the child's PTE table
            cp.pmd[slot] = PMD_TABLE
            cp.nr_pte_tables += 1
            if bits is not None:
                cp.ptes[slot] = bits.copy()
                for i in np.flatnonzero(bits):
                    pfn = (slot << 9) + int(i)
                    if pfn in pp.zero_ptes:
                        cp.zero_ptes.add(pfn)
                    else:
                        key = pp.shared.get(("P", pfn)) or ("P", id(parent), pfn)
                        pp.wp_ptes.add(pfn)
                        pp.shared[("P", pfn)] = key
                        cp.wp_ptes.add(pfn)
                        cp.shared[("P", pfn)] = key
            yield c.busy(cpu, "copy_pte_range", n * ns_pte + 1, n * ins_pte)


def do_numa_page(task: Task, mm: MmStruct, vma: Vma, addr: int) -> Generator[Any, Any, None]:
    """mm/memory.c ``do_numa_page`` (v5.4): under the PTE lock restore the
    PTE's protection (no longer ``pte_protnone``), read the struct page
    (``page_cpupid_last``, ``page_to_nid``: one line, through the LLC),
    ``numa_migrate_prep`` (``numa_hint_faults``, ``numa_hint_faults_local``)
    and ``mpol_misplaced``; after unlocking, ``migrate_misplaced_page`` to the
    target node, then ``task_numa_fault``."""
    from mmsim.mm import migrate, mprotect
    from mmsim.sched import numa_balancing

    s = mm.system
    cpu = task.cpu
    pt = mm.pgtables
    slot = addr >> PMD_SHIFT
    i = (addr >> PAGE_SHIFT) & 511
    lk = pt.pte_lockptr(slot)
    yield lk.acquire(task)
    nid_a, prot, last_a, scan_a = numa_arrays(pt, slot)
    prot[i] = False
    page_nid = int(nid_a[i])
    if page_nid < 0:
        page_nid = s.machine.cpu_node(mm.home_cpu)
    now = s.engine.now
    miss = mprotect.touch_line(s, cpu, ("struct page", id(mm), slot), 512, i, now)
    stall = mprotect.mem_latency_ns(s, cpu, mprotect.memmap_node(s, page_nid)) if miss else 0.0
    v = s.counters.vm[cpu]
    v[NUMA_HINT_FAULTS] += 1
    this_nid = s.machine.cpu_node(cpu)
    if page_nid == this_nid:
        v[NUMA_HINT_FAULTS_LOCAL] += 1
    last = int(last_a[i])
    priv = last < 0 or last == cpu  # cpupid_match_pid (one task per CPU in the workloads modelled)
    target, moron = mempolicy.mpol_misplaced(s, vma, addr, cpu, page_nid)
    if moron and target >= 0:
        ok, last_a[i] = numa_balancing.should_numa_migrate_memory(s, task, last, page_nid, now / 1e6,
                                                                  float(scan_a[i]))
        if not ok:
            target = mempolicy.NUMA_NO_NODE
    if target == page_nid:
        target = mempolicy.NUMA_NO_NODE
    ns, ins = DO_NUMA_PAGE
    d = s.counters.busy(cpu, "do_numa_page", int(ns / s.machine.freq_ghz + stall) + 1, ins)
    failed = False
    if target >= 0 and not migrate.migrate_balanced_pgdat(s, target, 1):
        s.numa_stats["numa_migrate_failed"] += 1  # numamigrate_isolate_page refuses: no isolation, no copy
        target = mempolicy.NUMA_NO_NODE
        failed = True
    if target < 0:
        # no migration: task_numa_fault's bookkeeping folded into the same busy period (one event)
        yield d + numa_balancing.task_numa_fault(s, task, mm, page_nid, priv, False, failed)
        lk.release(task)
        return
    yield d
    lk.release(task)
    migrated = yield from migrate.migrate_misplaced_page(task, mm, addr, page_nid, target)
    if migrated:
        if numa_balancing.tiering(s) and not s.numa_toptier[page_nid]:
            s.numa_stats["pgpromote_success"] += 1
        page_nid = target
    yield numa_balancing.task_numa_fault(s, task, mm, page_nid, priv, migrated, not migrated)


def do_huge_pmd_numa_page(task: Task, mm: MmStruct, addr: int) -> Generator[Any, Any, None]:
    """mm/huge_memory.c ``do_huge_pmd_numa_page`` (v5.4) without migration of
    the huge page (``migrate_misplaced_transhuge_page`` is not modelled):
    restore the PMD, count the hinting fault, ``task_numa_fault`` for 512 pages
    (counted as one fault here)."""
    from mmsim.sched import numa_balancing

    s = mm.system
    cpu = task.cpu
    slot = addr >> PMD_SHIFT
    pt = mm.pgtables
    lk = pt.pmd_lockptr(slot)
    yield lk.acquire(task)
    pt.huge_protnone.discard(slot)
    node = pt.huge_node.get(slot, s.machine.cpu_node(mm.home_cpu))
    v = s.counters.vm[cpu]
    v[NUMA_HINT_FAULTS] += 1
    if node == s.machine.cpu_node(cpu):
        v[NUMA_HINT_FAULTS_LOCAL] += 1
    ns, ins = DO_HUGE_PMD_NUMA_PAGE
    yield s.counters.busy(cpu, "do_huge_pmd_numa_page", int(ns / s.machine.freq_ghz) + 1, ins)
    lk.release(task)
    yield numa_balancing.task_numa_fault(s, task, mm, node, True, False, False)
