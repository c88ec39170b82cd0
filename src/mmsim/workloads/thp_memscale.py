"""thp_memscale (SGI / Alex Thorlton, used in the split-PMD-lock thread,
seeds/001): ``thp_memscale -c THREADS -b BYTES [-C BASECPU]``.

The main thread creates ``-c`` threads (``pthread_create``: glibc's
``allocate_stack`` — an 8 MiB + 4 KiB stack mmap, the first write to its top
page, the guard page's mprotect — and ``clone``); each thread pins itself to CPU ``basecpu + id``
(``runon``), ``malloc(bytes)`` — above glibc's mmap threshold that is an
anonymous ``mmap`` of bytes + 16 rounded up to pages, placed top-down and so
generally not 2 MiB aligned — and then writes its whole buffer once,
sequentially; the first write to each page (or 2 MiB huge page) faults. Each fault's and each syscall's
return to user space is a preemption point (``Scheduler.user_return``): main, which shares CPU 0 with
thread 0, is switched in there when it is woken.
The benchmark time is the elapsed time of the process (``perf stat``).

``-b`` takes decimal multipliers (k = 10^3, m = 10^6, g = 10^9): the
published THP-off run with ``-c 80 -b 512m`` shows exactly 10,000,550 page
faults = 80 × 512·10^6 / 4096 + 550.

``-m`` (param ``basemem``): the published run is ``thp_memscale -C 0 -m 0
-c 512 -b 512m``. The benchmark's source is not public in the thread, so the
model reads ``-m`` by analogy with ``-C`` as the first memory node, and
places each page by first touch on the faulting thread's own node (the
kernel's default local allocation, which a thread pinned to ``basecpu + i``
gets). With ``-C 0 -m 0`` that reading and first touch agree; other values
are accepted (a node of the machine), shown in the command line, and do not
move memory: the model has no evidence of what the benchmark does with them.

``verify`` (default ``page``): after its write each thread calls ``get_mempolicy(&node, NULL, 0, addr,
MPOL_F_NODE | MPOL_F_ADDR)`` once for every 4 KiB page address of its buffer, in order
(:func:`mmsim.mm.mempolicy.get_mempolicy_addr_node`: ``mmap_sem`` for read and, in ``follow_page_mask``,
the page's table lock: ``mm->page_table_lock`` for a huge PMD in v3.12, the split PMD lock from v3.13,
the split PTE lock for a 4 KiB page). The source is not public; the call is in the author's NMI backtraces
of thp_memscale on the 512-core UV (linux-mm 2013-11-07), and the per-4 KiB stride and its place after the
write are inferences from the published runs (docs/locks.md, session 21). ``verify=none`` leaves it out.
Before v3.15 each call's two ``find_vma`` lookups, as each fault's one, go through the mm's shared
``mm->mmap_cache`` (read on every lookup, written on a miss; :class:`mmsim.mm.mmap.MmapCache`, docs/locks.md
session 31).

``mapping=hugetlb`` is Kirill Shutemov's variant in seeds/001 (``mmap`` with
MAP_HUGETLB instead of malloc; the pool is sized to fit).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.metrics.events import VmEvent
from mmsim.metrics.sampling import FastForward
from mmsim.mm import memcg_kmem, memory
from mmsim.mm.costs import path
from mmsim.mm.huge_memory import thp_applies
from mmsim.mm.mempolicy import get_mempolicy_addr_node
from mmsim.mm.mmap import MmStruct
from mmsim.mm.page_alloc import HPAGE_PMD_ORDER
from mmsim.mm.pgtable import PMD_HUGE, PMD_TABLE, PUD_SHIFT
from mmsim.workloads import libc
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, register

# estimate: (cycles, instructions) per 8-byte word of the buffer-writing loop with the line cached: one
# store per cycle (one store-data port on Haswell-class cores, Opt. manual) plus the loop's increment and
# branch; plausible 0.5-2 cycles, 1-3 instructions (the benchmark's source is not public)
STORE_LOOP = (1.0, 2.0)

MALLOC_HEADER = 16  # glibc chunk header of an mmapped chunk (2 * SIZE_SZ)
# Fast mode (mmsim.metrics.sampling): detailed windows of FF_WINDOW_PER_THREAD faults per thread, then a
# skip of the workload's own skip ratio x the window's simulated time; the first FF_WARM and last FF_TAIL faults
# of each thread's steady region are always detailed. Chosen for speed (host time ~1/(1 + ratio) of the region),
# checked against --exact in docs/performance.md; not a model constant (nothing simulated depends on it).
FF_WINDOW_PER_THREAD = 16
FF_MIN_WINDOW = 2048
# thp_memscale's write phase: 49, chosen in session 34 by a rule written before its runs (issue 20's 72 x 512m
# THP-off arm, --noise seeds 1-3: +0.80 / +0.43 / +0.72 % from --exact, each within its CI95; 19 and 29 failed
# on the CI) and made this workload's own in session 35 (docs/performance.md). Each fault workload has its own
# (will_it_scale.FF_SKIP_RATIO, vm_scalability.FF_SKIP_RATIO): how many detailed windows a stable estimate
# needs depends on the workload's own variability (page_fault3 with the per-VMA lock was +7.0 % at 49).
FF_SKIP_RATIO = 49.0
FF_WARM = 8
FF_TAIL = 16
# The node check's calls (verify=page) are all alike and change no state: a skip of FF_CHECK_SKIP_RATIO x the
# window once every steady thread is in its check (host time only, checked against --exact in
# tests/experiments/test_fast_forward.py and docs/performance.md).
FF_CHECK_SKIP_RATIO = 49.0


def parse_bytes(v: str) -> int:
    """thp_memscale's size syntax: a number with optional k/m/g (powers of 1000)."""
    s = str(v).strip().lower()
    mult = {"k": 10**3, "m": 10**6, "g": 10**9}.get(s[-1:], 1)
    num = s[:-1] if s[-1:] in "kmg" else s
    if not num.isdigit() or int(num) == 0:
        raise ValueError
    return int(num) * mult


class ThpMemscale:
    name = "thp_memscale"
    description = "threads each malloc and write their own buffer (SGI thp_memscale); elapsed seconds"
    params = {
        "threads": ParamInfo(8, "-c: number of threads (or processes)", parse_int(1), "an integer >= 1"),
        "bytes": ParamInfo(parse_bytes("64m"), "-b: bytes per thread (k/m/g = 10^3/10^6/10^9)", parse_bytes,
                           "a size like 512m, 2g, 4096"),
        "mode": ParamInfo("threads", "threads share one mm; processes have their own",
                          parse_choice("threads", "processes"), "threads, processes"),
        "mapping": ParamInfo("thp", "thp: malloc with THP per the kernel's thp policy; hugetlb: MAP_HUGETLB",
                             parse_choice("thp", "hugetlb"), "thp, hugetlb"),
        "basecpu": ParamInfo(0, "-C: first CPU; thread i runs on basecpu + i", parse_int(0), "an integer >= 0"),
        "basemem": ParamInfo(0, "-m: first memory node (see the module docstring: the model places every "
                             "page on the faulting CPU's node)", parse_int(0), "an integer >= 0"),
        "verify": ParamInfo("page", "after the write, get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) on every 4 KiB "
                            "page of the buffer (page; docs/locks.md session 21) or no check (none); mapping=thp "
                            "only (the hugetlbfs variant's follow_hugetlb_page is not modelled)",
                            parse_choice("page", "none"), "page, none"),
    }

    def command(self, p: dict[str, Any]) -> str:
        exe = "thp_memscale_hugetlbfs" if p["mapping"] == "hugetlb" else "thp_memscale"
        return f"{exe} -C {p['basecpu']} -m {p['basemem']} -c {p['threads']} -b {p['bytes']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        n = p["threads"]
        from mmsim.errors import UserError

        if p["basemem"] >= len(m.nodes):
            raise UserError("-p basemem", p["basemem"], f"a node from 0 to {len(m.nodes) - 1} on {m.name}")
        if p["basecpu"] >= m.ncpus:
            raise UserError("-p basecpu", p["basecpu"], f"an integer from 0 to {m.ncpus - 1} on {m.name}")
        if p["basecpu"] + n > m.ncpus:
            raise UserError("-p threads", n, f"at most {m.ncpus - p['basecpu']} on {m.name} (one CPU per thread)")
        if p["mapping"] == "hugetlb":
            per = -(-p["bytes"] // (2 << 20))
            system.set_hugetlb_pool(per * n)
        main = Task(0, "thp_memscale", cpu=p["basecpu"])
        mm = MmStruct(system, home_cpu=p["basecpu"])
        main.mm = mm
        system.sched.spawn(main, self._main(system, main, p))
        system.workload_state = {"tasks": [], "done": 0, "n": n, "buffers": {}}  # buffers: tid -> its VMA
        if not system.exact and p["mapping"] == "thp" and system.policy("numa_balancing") == "0":
            system.fast_forward = fault_fast_forward(system, n, FF_SKIP_RATIO)
        system.start_vmstat_timer(lambda: main.state == "done")

    def _main(self, system: Any, main: Task, p: dict[str, Any]) -> Generator[Any, Any, None]:
        c = system.counters
        st = system.workload_state
        for i in range(p["threads"]):
            mm = main.mm if p["mode"] == "threads" else MmStruct(system, home_cpu=p["basecpu"] + i)
            if p["mode"] == "threads":
                yield from libc.pthread_create(system, main)
            else:  # fork: copy_process of a process (its mm copied apart, MmStruct above)
                ns, ins = path("copy_process/fork", system.machine.freq_ghz)
                yield c.busy(main.cpu, "copy_process", ns, ins)
            t = Task(i + 1, f"thp_memscale/{i}", cpu=p["basecpu"] + i, mm=mm)
            st["tasks"].append(t)
            system.sched.spawn(t, self._thread(system, t, p))
        # pthread_join: sleep until the last thread exits.
        while st["done"] < p["threads"]:
            st["joiner"] = main
            yield system.sched.sleep(main)
        ff = system.fast_forward
        system.elapsed_ns = system.engine.now + (ff.skipped_ns if ff is not None else 0)

    def _thread(self, system: Any, t: Task, p: dict[str, Any]) -> Generator[Any, Any, None]:
        mm: MmStruct = t.mm
        if p["mapping"] == "hugetlb":
            length = -(-p["bytes"] // (2 << 20)) * (2 << 20)
            vma = yield from mm.do_mmap(t, length, hugetlb=True)
            start = vma.start
            step = 2 << 20
        else:
            vma = yield from mm.do_mmap(t, p["bytes"] + MALLOC_HEADER)
            start = vma.start + MALLOC_HEADER
            step = 4096
        end = start + p["bytes"]
        st = system.workload_state
        st["buffers"][t.tid] = vma
        check = p["verify"] == "page" and p["mapping"] == "thp"
        nops = yield from self._write_buffer(system, t, vma, start, end, step, final=not check)
        if check:
            yield from self._check_nodes(system, t, start, end, nops, vma)
        st["done"] += 1
        if st["done"] == p["threads"] and "joiner" in st:
            system.sched.wake_up(st["joiner"])

    def _write_buffer(
        self, system: Any, t: Task, vma: Any, start: int, end: int, step: int, final: bool = True
    ) -> Generator[Any, Any, int]:
        """Sequential write of [start, end): a fault at each unmapped page, then the
        user stores to it through the cache hierarchy (:func:`memory.user_access`: a
        sub-page still cached costs the store loop, a missed one its read for ownership
        and write-back at the bandwidth share)."""
        pt = t.mm.pgtables
        sched = system.sched
        node = system.machine.cpu_node(t.cpu)
        addr = start & ~(step - 1)
        pending = 0  # user store time charged, folded into the next event
        ff: FastForward | None = system.fast_forward
        lo = hi = unit = 0
        if ff is not None:
            lo, hi, unit = steady_region(system, vma, start, end)
            ff.register(t.tid, max(0, (hi - lo) // unit), t.cpu)
        while addr < end:
            if ff is not None and lo <= addr < hi:
                k = ff.poll(t.tid, (addr - lo) // unit)
                if k:
                    skip_mapped(system, t, addr, k, unit, node)
                    addr += k * unit
                    continue
                if addr + unit >= hi:
                    ff.leave(t.tid)
            slot = addr >> 21
            state = pt.pmd.get(slot)
            # a PTE table another thread has just linked may have no PTE array yet (pte_bitmap makes it)
            ptb = pt.ptes.get(slot) if state == PMD_TABLE else None
            if state != PMD_HUGE and not (ptb is not None and ptb[(addr >> 12) & 511]):
                yield from memory.handle_mm_fault(t, t.mm, vma, max(addr, start), pre_ns=pending)
                pending = 0
                if sched.cpus[t.cpu].need_resched:  # the fault's return to user space (docs/locks.md, session 22)
                    yield from sched.user_return(t)
            if pt.pmd.get(slot) == PMD_HUGE:
                nxt = (slot + 1) << 21
            else:
                nxt = addr + 4096
            lo_b, hi_b = max(addr, start), min(nxt, end)
            if pt.pmd.get(slot) == PMD_HUGE:  # the stores go through the cache hierarchy, as usemem's do
                key = memory.page_key(t.mm, lo_b, True)
                first, last = (lo_b >> 12) & 511, ((hi_b - 1) >> 12 & 511) + 1
                pending += memory.user_access(t, system, pt.huge_node.get(slot, node), key, 512, first, last,
                                              True, STORE_LOOP, "thp_memscale [user]", pending)
            else:
                key = memory.page_key(t.mm, lo_b, False)
                pending += memory.user_access(t, system, node, key, 1, 0, 1, True, STORE_LOOP,
                                              "thp_memscale [user]", pending)
            addr = nxt
        if pending:
            yield pending
        if ff is not None:
            if final:
                ff.exit(t.tid)
            else:
                ff.leave(t.tid)
        return max(0, (hi - lo) // unit) if unit else 0

    def _check_nodes(self, system: Any, t: Task, start: int, end: int, first: int,
                     vma: Any = None) -> Generator[Any, Any, None]:
        """The node check after the write (docs/locks.md, session 21): one ``get_mempolicy(MPOL_F_NODE |
        MPOL_F_ADDR)`` per 4 KiB page address of the buffer, in order. A steady region of the fast mode of
        its own (positions from ``first``, past the write's); a skipped call changes no state."""
        ff: FastForward | None = system.fast_forward
        sched = system.sched
        lo = -(-start // 4096) * 4096
        n = max(0, (end - lo) // 4096)
        if ff is not None:
            ff.register(t.tid, n, t.cpu, start=first, skip_ratio=FF_CHECK_SKIP_RATIO, stateless=True)
        i = 0
        addr = start & ~4095
        while addr < end:
            if ff is not None and addr >= lo:
                k = ff.poll(t.tid, first + i)
                if k:
                    i += k
                    addr += k * 4096
                    continue
                if i + 1 >= n:
                    ff.leave(t.tid)
            yield from get_mempolicy_addr_node(t, t.mm, addr, vma)
            if sched.cpus[t.cpu].need_resched:  # the syscall's return to user space
                yield from sched.user_return(t)
            if addr >= lo:
                i += 1
            addr += 4096
        if ff is not None:
            ff.exit(t.tid)

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        return {"thp_memscale.elapsed_seconds": system.elapsed_ns / 1e9}


def fault_fast_forward(system: Any, nthreads: int, skip_ratio: float, same_ops: bool = False) -> FastForward:
    """The sampling controller of a run of ``nthreads`` threads each faulting through a steady region
    (thp_memscale, will-it-scale page_fault3, vm-scalability anon-w-seq-mt), with this module's window
    settings and the calling workload's own ``skip_ratio`` (its ``FF_SKIP_RATIO``). pgalloc is left out of
    the extrapolation: each workload's functional skip takes the skipped faults' pages from the allocator,
    which counts them exactly. ``same_ops``: every thread
    skips the window's mean number of operations (:class:`FastForward`), keeping their phases."""
    return FastForward(
        lambda: system.engine.now, system.counters, system.locks.stats, nthreads,
        window_ops=max(FF_MIN_WINDOW, FF_WINDOW_PER_THREAD * nthreads), skip_ratio=skip_ratio,
        warm=FF_WARM, tail=FF_TAIL, exact_vm=frozenset({int(VmEvent.PGALLOC_NORMAL)}), same_ops=same_ops,
    )


def steady_region(system: Any, vma: Any, start: int, end: int) -> tuple[int, int, int]:
    """The part of a thread's buffer where every fault is the same kind:
    ``(lo, hi, unit)``. With THP, the 2 MiB-aligned middle (one huge fault per
    2 MiB); without, every 4 KiB page from the first whole one."""
    hp = 2 << 20
    lo_h = -(-start // hp) * hp
    hi_h = end // hp * hp
    if hi_h > lo_h and thp_applies(system, vma, lo_h):
        return lo_h, hi_h, hp
    lo = -(-start // 4096) * 4096
    return lo, end // 4096 * 4096, 4096


def skip_mapped(system: Any, t: Task, addr: int, k: int, unit: int, node: int) -> None:
    """The state after ``k`` skipped faults of ``unit`` bytes from ``addr`` (the functional part
    of a fast-forward; their costs were extrapolated): the page tables, and the pages and page-table
    pages those faults took from the allocator (a huge fault's own and its deposited PTE table)."""
    pt = t.mm.pgtables
    pa = system.page_alloc
    end = addr + k * unit
    tables = 0
    for pud in range(addr >> PUD_SHIFT, ((end - 1) >> PUD_SHIFT) + 1):
        if pud not in pt.pud_present:
            pt.pud_present.add(pud)
            pt.nr_pmd_tables += 1
            pt.table_ctor_lock(pud=pud)
            tables += 1
    if unit == 2 << 20:
        for slot in range(addr >> 21, end >> 21):
            pt.pmd[slot] = PMD_HUGE
            pt.huge_node[slot] = node
        pa.take_functional(node, HPAGE_PMD_ORDER, k, t.cpu)
        # each huge fault's pte_alloc_one (the deposited PTE table), and the PMD tables
        pa.take_functional(node, 0, k + tables, t.cpu)
        memcg_kmem.skip_pgtables(system, t.cpu, k + tables)
        return
    a = addr
    while a < end:
        slot = a >> 21
        nxt = min(end, (slot + 1) << 21)
        if slot not in pt.pmd:
            pt.pmd[slot] = PMD_TABLE
            pt.nr_pte_tables += 1
            pt.table_ctor_lock(pmd_slot=slot)
            tables += 1
        pt.pte_bitmap(slot)[(a >> 12) & 511:((nxt - 1) >> 12 & 511) + 1] = True
        a = nxt
    pa.take_functional(node, 0, k + tables, t.cpu)
    memcg_kmem.skip_pgtables(system, t.cpu, tables)


register(ThpMemscale())
