"""will-it-scale (Anton Blanchard) ``page_fault1``, as LKP runs it: ``nr_task``
copies, each bound to its own CPU (cores first, then SMT siblings), as
processes or as threads of one process, each looping

    c = mmap(NULL, MEMSIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    for (i = 0; i < MEMSIZE; i += pagesize) { c[i] = 0; (*iterations)++; }
    munmap(c, MEMSIZE);

with MEMSIZE = 128 MiB. Every first write to a page faults (a 4 KiB page, or
a THP where the kernel's ``thp`` policy and the 2 MiB alignment allow); the
munmap frees everything through the page allocator, so the allocator, its
PCP lists and ``zone->lock`` see both sides. LKP reports
``will-it-scale.per_process_ops`` (or ``per_thread_ops``): iterations per
second per task, and ``will-it-scale.workload``: their sum. Here each task
runs ``loops`` rounds (will-it-scale runs for a fixed time instead).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.metrics.sampling import sim_now, t975
from mmsim.mm import memcg_kmem, memory
from mmsim.mm.mmap import MmStruct
from mmsim.mm.munmap import do_munmap
from mmsim.mm.pgtable import PMD_HUGE, PMD_TABLE
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, register
from mmsim.workloads.lmbench import parse_lm_bytes

MEMSIZE = 128 * 1024 * 1024  # page_fault1.c
PAGE = 4096
# Fast mode: the fault loop's skip ratio (thp_memscale.fault_fast_forward), this workload's own. 9, the shared value
# of sessions 16-34; at 49 vma-lock-shared-fault's patched arm (page_fault3, 16 threads) went +7.0 % from --exact
# (docs/performance.md, session 34). A sampling setting, not a model constant.
FF_SKIP_RATIO = 9.0


# The parameters every will-it-scale test shares (runtest.py's -t and the _processes / _threads binaries).
TASK_PARAMS = {
    "nr_task": ParamInfo(1, "tasks, one per CPU (cores first)", parse_int(1), "an integer >= 1"),
    "mode": ParamInfo("processes", "processes (own mm each) or threads (one mm)",
                      parse_choice("processes", "threads"), "processes, threads"),
}


def check_nr_task(m: Any, n: int) -> None:
    """One task per CPU, as will-it-scale binds them."""
    if n > m.ncpus:
        raise UserError("-p nr_task", n, f"at most {m.ncpus} on {m.name} (one CPU per task)")


class PageFault1:
    name = "will-it-scale/page_fault1"
    description = "will-it-scale page_fault1: mmap 128M, write every page, munmap; ops = pages written"
    params = {
        **TASK_PARAMS,
        "memsize": ParamInfo(MEMSIZE, "bytes mapped per round (MEMSIZE = 128m)", parse_lm_bytes,
                             "a size like 128m"),
        "loops": ParamInfo(1, "mmap/write/munmap rounds per task", parse_int(1), "an integer >= 1"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"page_fault1_{p['mode']} -t {p['nr_task']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        n = p["nr_task"]
        check_nr_task(m, n)
        system.page_alloc.track_owners = True
        cpus = list(range(n))
        shared = MmStruct(system, home_cpu=0) if p["mode"] == "threads" else None
        st: dict[str, Any] = {"ops": [0] * n, "spans": [0] * n}
        system.workload_state = st
        for i in cpus:
            mm = shared if shared is not None else MmStruct(system, home_cpu=i)
            t = Task(i, f"page_fault1/{i}", cpu=i, mm=mm)
            system.sched.spawn(t, self._task(system, t, i, cpus if shared is not None else [i], p))

    def _task(self, s: Any, t: Task, i: int, mm_cpus: list[int], p: dict[str, Any]) -> Generator[Any, Any, None]:
        mm: MmStruct = t.mm
        st = s.workload_state
        start = s.engine.now
        store_ns = int(s.machine.cache("L3").latency_ns)  # c[i] = 0 on a page already cleared by the kernel
        for _ in range(p["loops"]):
            vma = yield from mm.do_mmap(t, p["memsize"])
            pt = mm.pgtables
            pending = 0
            for addr in range(vma.start, vma.end, PAGE):
                slot = addr >> 21
                state = pt.pmd.get(slot)
                # a PTE table another thread has just linked may have no PTE array yet (pte_bitmap makes it)
                ptb = pt.ptes.get(slot) if state == PMD_TABLE else None
                if state != PMD_HUGE and not (ptb is not None and ptb[(addr >> 12) & 511]):
                    yield from memory.handle_mm_fault(t, mm, vma, addr, pre_ns=pending)
                    pending = 0
                pending += s.counters.busy(t.cpu, "page_fault1 [user]", store_ns)
                st["ops"][i] += 1
            if pending:
                yield pending
            yield from do_munmap(t, mm, vma, mm_cpus)
        st["spans"][i] = s.engine.now - start
        s.elapsed_ns = max(s.elapsed_ns, s.engine.now)

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        rates = [ops / (ns / 1e9) for ops, ns in zip(st["ops"], st["spans"], strict=True) if ns]
        per = "per_thread_ops" if p["mode"] == "threads" else "per_process_ops"
        return {
            f"will-it-scale.{per}": round(sum(rates) / len(rates), 2) if rates else 0.0,
            "will-it-scale.workload": round(sum(rates), 2),
        }


register(PageFault1())


# --- issue 22: malloc1 ------------------------------------------------------------------------------
# glibc malloc/malloc.c (store id 582719522): DEFAULT_MMAP_THRESHOLD_MIN (128 * 1024) is the initial
# mp_.mmap_threshold; free() raises it only to chunks of at most DEFAULT_MMAP_THRESHOLD_MAX
# (4 * 1024 * 1024 * sizeof(long) = 32 MiB on 64-bit), so a 128 MiB request always takes sysmalloc_mmap.
MMAP_THRESHOLD_MIN = 128 * 1024
MMAP_THRESHOLD_MAX = 4 * 1024 * 1024 * 8
SIZE_SZ = 8  # sizeof(INTERNAL_SIZE_T) on x86-64
MALLOC_ALIGN_MASK = 2 * SIZE_SZ - 1  # MALLOC_ALIGNMENT = 16
# estimate: syscall entry/exit of mmap/munmap (entry_SYSCALL_64, with PTI) plus glibc's malloc/free
# bookkeeping around them, ~600 cycles a call; plausible 200-2000
SYSCALL_CYCLES = 600


def request2size(req: int) -> int:
    """glibc ``request2size``: ``(req + SIZE_SZ + MALLOC_ALIGN_MASK) & ~MALLOC_ALIGN_MASK`` (MINSIZE floor)."""
    return max(4 * SIZE_SZ, (req + SIZE_SZ + MALLOC_ALIGN_MASK) & ~MALLOC_ALIGN_MASK)


def malloc_mmap_size(req: int, pagesize: int = PAGE) -> int:
    """The length glibc's ``sysmalloc_mmap`` passes to mmap for ``malloc(req)`` (``req`` at or above the
    mmap threshold): ``ALIGN_UP (nb + SIZE_SZ, pagesize)`` with ``nb = request2size(req)``
    (MALLOC_ALIGNMENT == CHUNK_HDR_SZ on x86-64). 128 MiB -> 128 MiB + 4 KiB."""
    nb = request2size(req)
    return -(-(nb + SIZE_SZ) // pagesize) * pagesize


class Malloc1:
    """will-it-scale ``tests/malloc1.c`` ("malloc/free of 128MB"): each task loops
    ``addr = malloc(128UL*1024*1024); free(addr); (*iterations)++;`` and touches nothing itself.

    glibc serves the request with ``sysmalloc_mmap``: ``mmap`` of 128 MiB + 4 KiB (a private anonymous
    mapping placed by ``__get_unmapped_area``, mm/mmap.py ``placement``), then ``set_head`` writes the
    chunk header (``prev_size`` = 0 and ``size | IS_MMAPPED``) at the start of the mapping: the one
    first touch, a write fault at ``vma.start``; ``free`` → ``munmap_chunk`` → ``munmap`` of the same
    range (mm/munmap.py ``vm_munmap``). Whether that fault is a THP (2 MiB cleared) or a 4 KiB page
    depends only on the mapping's alignment, i.e. on the kernel's placement policy.

    The anonymous-folio LRU and memcg model (mm/lru_anon.py) is on for this workload. Rates are
    counted as will-it-scale samples them, over a window in which every task is past its ``warmup``
    iterations (the harness's warm-up) and none has finished (:meth:`window_rates`)."""

    name = "will-it-scale/malloc1"
    description = "will-it-scale malloc1: malloc(128M) + free in a loop; glibc mmaps 128M+4K, writes its header"
    params = {
        **TASK_PARAMS,
        "size": ParamInfo(128 * 1024 * 1024, "bytes per malloc (malloc1.c: 128UL*1024*1024)", parse_lm_bytes,
                          "a size like 128m"),
        "loops": ParamInfo(20, "malloc/free pairs per task after warm-up", parse_int(1), "an integer >= 1"),
        "warmup": ParamInfo(2, "pairs per task before the measurement starts", parse_int(0), "an integer >= 0"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"malloc1_{p['mode']} -t {p['nr_task']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        from mmsim.mm import lru_anon

        m = system.machine
        n = p["nr_task"]
        check_nr_task(m, n)
        if p["size"] < MMAP_THRESHOLD_MIN:
            raise UserError("-p size", p["size"], f"at least {MMAP_THRESHOLD_MIN} (glibc's mmap threshold; "
                            "smaller requests come from the heap, not modelled)")
        from mmsim.mm.mmap import MMAP_BASE, PMD_SIZE

        per_mm = n if p["mode"] == "threads" else 1  # mappings one mm holds at once
        limit = MMAP_BASE // per_mm - 2 * PMD_SIZE  # each with its alignment padding, below mmap_base
        if malloc_mmap_size(p["size"]) > limit:
            raise UserError("-p size", p["size"], f"at most {limit >> 30}g for {per_mm} mapping(s) of one mm below "
                            "mmap_base (larger fails with ENOMEM)")
        system.page_alloc.track_owners = True
        lru_anon.enable(system)
        cpus = list(range(n))
        shared = MmStruct(system, home_cpu=0) if p["mode"] == "threads" else None
        st: dict[str, Any] = {"ops": [0] * n, "spans": [0] * n, "kinds": {}, "done_at": [[] for _ in cpus]}
        system.workload_state = st
        for i in cpus:
            mm = shared if shared is not None else MmStruct(system, home_cpu=i)
            t = Task(i, f"malloc1/{i}", cpu=i, mm=mm)
            system.sched.spawn(t, self._task(system, t, i, cpus if shared is not None else [i], p))

    def _task(self, s: Any, t: Task, i: int, mm_cpus: list[int], p: dict[str, Any]) -> Generator[Any, Any, None]:
        from mmsim.mm.munmap import vm_munmap

        mm: MmStruct = t.mm
        st = s.workload_state
        length = malloc_mmap_size(p["size"])
        sys_ns = int(SYSCALL_CYCLES / s.machine.freq_ghz)
        start = s.engine.now
        for it in range(p["warmup"] + p["loops"]):
            if it == p["warmup"]:
                start = s.engine.now
            yield s.counters.busy(t.cpu, "malloc1 [syscall]", sys_ns)
            vma = yield from mm.mmap_pgoff(t, length, kind="anon")
            kind = yield from memory.handle_mm_fault(t, mm, vma, vma.start, write=True)  # set_head()
            st["kinds"][kind] = st["kinds"].get(kind, 0) + 1
            yield s.counters.busy(t.cpu, "malloc1 [syscall]", sys_ns)
            yield from vm_munmap(t, mm, vma, mm_cpus)
            st["done_at"][i].append(s.engine.now)
            if it >= p["warmup"]:
                st["ops"][i] += 1
        st["spans"][i] = s.engine.now - start
        s.elapsed_ns = max(s.elapsed_ns, s.engine.now)

    @staticmethod
    def window_rates(done_at: list[list[int]], warmup: int) -> list[float] | None:
        """will-it-scale's sampling: iterations per second of each task over one window in which every
        task is past its warm-up and still running (from the last task's end of warm-up to the first
        task's last iteration). None if the tasks' measured stretches do not overlap."""
        if warmup < 1 or any(len(d) <= warmup for d in done_at):
            return None
        lo = max(d[warmup - 1] for d in done_at)
        hi = min(d[-1] for d in done_at)
        if hi <= lo:
            return None
        return [sum(1 for x in d if lo < x <= hi) / ((hi - lo) / 1e9) for d in done_at]

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        rates = self.window_rates(st["done_at"], p["warmup"])
        if rates is None:  # no common window: each task's own measured stretch
            rates = [ops / (ns / 1e9) for ops, ns in zip(st["ops"], st["spans"], strict=True) if ns]
        per = "per_thread_ops" if p["mode"] == "threads" else "per_process_ops"
        kinds = st["kinds"]
        total = sum(kinds.values()) or 1
        return {
            f"will-it-scale.{per}": round(sum(rates) / len(rates), 2) if rates else 0.0,
            "will-it-scale.workload": round(sum(rates), 2),
            "malloc1.thp_fault_share": round(kinds.get("thp", 0) / total, 4),
        }


register(Malloc1())


# --- issue 22: page_fault2 / page_fault3 (tmpfs file mappings) ---

class _FileFault:
    """will-it-scale ``page_fault2`` / ``page_fault3`` (tests/page_fault2.c, page_fault3.c @ 75f66e45697e):
    each task, once, ``mkstemp("/tmp/willitscale.XXXXXX")``, ``ftruncate(fd, MEMSIZE)``, ``unlink``; then
    loops ``mmap(NULL, MEMSIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE`` (page_fault2) or ``MAP_SHARED``
    (page_fault3) ``, fd, 0)``, one store per page (``(*iterations)++`` each), ``munmap``. In thread mode
    every thread makes its own file in its own ``testcase()`` but all share one mm. ``/tmp`` is tmpfs on
    the robot (the profiles run through ``shmem_fault``), so the file is a :class:`~mmsim.mm.shmem.ShmemInode`:
    the first round allocates its pages into the page cache, later rounds find them there (page_fault3
    maps them, page_fault2 copies each into a new anonymous page, freed by the munmap). munmap is
    ``vm_munmap`` (mm/munmap.py: the zap under the downgraded read lock, as v4.20+ do it).
    ``warmup`` rounds are run first and not counted (will-it-scale samples after its warm-up)."""

    name = ""
    description = ""
    shared = False
    params = {
        **TASK_PARAMS,
        "memsize": ParamInfo(MEMSIZE, "bytes mapped per round (MEMSIZE = 128m)", parse_lm_bytes,
                             "a size like 128m"),
        "loops": ParamInfo(1, "counted mmap/write/munmap rounds per task", parse_int(1), "an integer >= 1"),
        "warmup": ParamInfo(1, "rounds per task before counting (the first populates the page cache)",
                            parse_int(0), "an integer >= 0"),
        "sample": ParamInfo("auto", "fast mode for threads whose faults take mmap_lock (their rounds end in munmap "
                            "convoys): auto = event by event; phases = sampled, every thread skipping the same "
                            "faults (reported with a 95% CI; measured -3.9% against --exact at 128m)",
                            parse_choice("auto", "phases"), "auto, phases"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"{self.name.split('/')[1]}_{p['mode']} -t {p['nr_task']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        n = p["nr_task"]
        check_nr_task(m, n)
        system.page_alloc.track_owners = True
        cpus = list(range(n))
        shared = MmStruct(system, home_cpu=0) if p["mode"] == "threads" else None
        system.workload_state = {"ops": [0] * n, "spans": [0] * n, "t0": [0] * n}
        # Fast mode (mmsim.metrics.sampling) for page_fault3. Threads whose faults take the shared mm's
        # mmap_lock (no VMA-lock shared faults, 4ed4379881aa) are not sampled unless asked (sample=phases):
        # each round's munmap waits there for every faulting reader and stalls them behind it, so the rounds
        # end in convoys whose order depends on where each thread is in its round, and the counted round's
        # rate with them. Any change to the run redraws that order: exact runs over noise seeds spread by
        # the tasks' own spread (+-5% at 95%, 8m), and a sampled run is such a draw (docs/performance.md,
        # session 14: -0.5%, +4.0%, -3.9% against exact at 8m, 32m, 128m). With sample=phases the controller
        # skips only while every thread is inside its fault loop (readers only: no mmap or munmap in
        # flight) and skips the same number of faults for each thread (same_ops), keeping their relative
        # positions; the reported CI includes the tasks' spread.
        convoys = p["mode"] == "threads" and system.policy("vma_lock_shared_fault") != "on"
        if (self.shared and not system.exact and system.policy("numa_balancing") == "0"
                and (not convoys or p["sample"] == "phases")):
            from mmsim.workloads.thp_memscale import fault_fast_forward

            system.fast_forward = fault_fast_forward(system, n, FF_SKIP_RATIO, same_ops=convoys)
        for i in cpus:
            mm = shared if shared is not None else MmStruct(system, home_cpu=i)
            t = Task(i, f"{self.name.split('/')[1]}/{i}", cpu=i, mm=mm)
            system.sched.spawn(t, self._task(system, t, i, cpus if shared is not None else [i], p))

    def _task(self, s: Any, t: Task, i: int, mm_cpus: list[int], p: dict[str, Any]) -> Generator[Any, Any, None]:
        from mmsim.mm.munmap import vm_munmap
        from mmsim.mm.shmem import shmem_file_setup

        mm: MmStruct = t.mm
        st = s.workload_state
        inode = shmem_file_setup(s, t.cpu, p["memsize"])
        store_ns = int(s.machine.cache("L3").latency_ns)  # c[i] = 0 on a page the fault just mapped
        user_fn = f"{self.name.split('/')[1]} [user]"  # the user loop's profile line (built once, not per page)
        ff = s.fast_forward
        node = s.machine.cpu_node(t.cpu)
        npages = p["memsize"] // PAGE
        start = sim_now(s)
        for r in range(p["warmup"] + p["loops"]):
            if r == p["warmup"]:
                start = sim_now(s)
                st["t0"][i] = s.engine.now
            counted = r >= p["warmup"]
            vma = yield from mm.do_mmap(t, p["memsize"], anon=False, shared=self.shared, file=inode)
            bits = mm.pgtables.pte_bitmap
            pending = 0
            if ff is not None:  # each round is a steady region of one fault per page
                ff.register(t.tid, npages, t.cpu, start=r * npages)
            addr = vma.start
            while addr < vma.end:
                if ff is not None:
                    j = (addr - vma.start) // PAGE
                    k = ff.poll(t.tid, r * npages + j)
                    if k:
                        skip_file_faults(s, t, mm, vma, inode, addr, k, node)
                        if counted:
                            st["ops"][i] += k
                        addr += k * PAGE
                        continue
                    if j + 1 == npages:
                        ff.leave(t.tid)
                if not bits(addr >> 21)[(addr >> 12) & 511]:
                    yield from memory.handle_mm_fault(t, mm, vma, addr, pre_ns=pending)
                    pending = 0
                pending += s.counters.busy(t.cpu, user_fn, store_ns)
                if counted:
                    st["ops"][i] += 1
                addr += PAGE
            if pending:
                yield pending
            yield from vm_munmap(t, mm, vma, mm_cpus)  # v4.20+: the zap under the downgraded read lock
        if ff is not None:
            ff.exit(t.tid)
        st["spans"][i] = sim_now(s) - start
        s.elapsed_ns = max(s.elapsed_ns, sim_now(s))

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        from mmsim.mm.shmem import shmem_metrics

        base = PageFault1.metrics(self, system, p)  # type: ignore[arg-type]
        return {**base, **self.sampling_ci(system, p), **shmem_metrics(system)}

    @staticmethod
    def sampling_ci(system: Any, p: dict[str, Any]) -> dict[str, float]:
        """Fast mode's 95% half-widths of ``per_*_ops`` (ops/s); nothing in exact mode or when nothing was
        skipped. ``_ci95_skips``: the skips' own error, what the sampling estimates: each task's counted span
        is uncertain by the skips made in it (:meth:`FastForward.ci95_ns_since`); the tasks skip together,
        so their errors are summed. ``_ci95``: that and, in quadrature, the spread of the tasks' rates
        (Student t over their standard error of the mean). A skip moves the tasks' phases, which decide who
        waits behind whom (munmap convoys, the lock's queue); a noise seed moves them too, and exact runs
        over noise seeds spread as much as this term says (docs/performance.md, session 14). Where the
        tasks' spread is systematic (where each CPU sits), it overstates the interval."""
        ff = system.fast_forward
        st = system.workload_state
        if ff is None or not ff.skipped_ops:
            return {}
        runs = [(ops / (ns / 1e9), ns, t0) for ops, ns, t0 in zip(st["ops"], st["spans"], st["t0"], strict=True)
                if ns]
        if not runs:
            return {}
        n = len(runs)
        skips = sum(rate * ff.ci95_ns_since(t0) / ns for rate, ns, t0 in runs) / n
        spread = 0.0
        if n > 1:
            mean = sum(r for r, _, _ in runs) / n
            sd = math.sqrt(sum((r - mean) ** 2 for r, _, _ in runs) / (n - 1))
            spread = t975(n - 1) * sd / math.sqrt(n)
        per = "per_thread_ops" if p["mode"] == "threads" else "per_process_ops"
        return {f"will-it-scale.{per}_ci95": round(math.sqrt(skips**2 + spread**2), 2),
                f"will-it-scale.{per}_ci95_skips": round(skips, 2)}


def skip_file_faults(s: Any, t: Task, mm: MmStruct, vma: Any, inode: Any, addr: int, k: int, node: int) -> None:
    """The state after ``k`` skipped write faults on a ``MAP_SHARED`` tmpfs mapping from ``addr`` (the
    functional part of a fast-forward; their costs were extrapolated): ``shmem_fault``'s lookups, and
    for indices not yet cached ``shmem_alloc_and_add_folio``'s folios (the allocation, the page cache
    entry, the memcg stock and the LRU batch); the folios' struct page lines, written by this CPU; the PMD
    and PTE tables ``__pmd_alloc`` / ``__pte_alloc``
    would have allocated (owned by the mm, for the unmap to free), and the PTEs ``finish_fault`` sets."""
    from mmsim.mm import lru_anon
    from mmsim.mm.memory_file import _index
    from mmsim.mm.pgtable import PUD_SHIFT
    from mmsim.mm.shmem import fault_stats

    pt = mm.pgtables
    pa = s.page_alloc
    first = _index(vma, addr)
    fault_stats(s)["shmem_faults"] += k
    inode.stats["lookups"] += k
    new = [idx for idx in range(first, first + k) if idx not in inode.pages]
    if new:
        pfns: list[int] = []
        pa.take_functional(node, 0, len(new), t.cpu, pfns)
        for idx, pfn in zip(new, pfns, strict=True):
            inode.pages[idx] = node
            inode.pfn[idx] = pfn
        inode.stats["alloced"] += len(new)
        lru_anon.skip_new_folios(s, t.cpu, [node] * len(new))
    # the folios' struct page lines as the skipped faults leave them: written last by this CPU
    # (finish_fault's rmap count, folio_mark_dirty, folio_unlock), so later faults find them here
    now = s.engine.now
    import numpy as np

    from mmsim.mm.memory_file import _reuse
    from mmsim.mm.zap import streamed_misses, struct_page_ns, zap_stats

    if struct_page_ns(s, t.cpu, _reuse(vma)) > 0:  # the count shmem_fault keeps (its time was extrapolated)
        fresh = set(new)
        found = [idx for idx in range(first, first + k)
                 if idx not in fresh and s.page_line(inode.key(idx)).owner == t.cpu]
        # and the streamer state those lookups leave, in the same order
        idx_found = np.asarray(found, dtype=np.int64)
        zap_stats(s)["fault_struct_page_misses"] += streamed_misses(s, t.cpu, inode.pfn[idx_found])
    for idx in range(first, first + k):
        s.page_line(inode.key(idx)).write(t.cpu, now)
    end = addr + k * PAGE
    a = addr
    while a < end:
        slot = a >> 21
        nxt = min(end, (slot + 1) << 21)
        pud = a >> PUD_SHIFT
        if pud not in pt.pud_present:
            pt.pud_present.add(pud)
            pt.nr_pmd_tables += 1
            pt.table_ctor_lock(pud=pud)
            pa.take_owned_functional(node, 0, (mm, "pud", pud), t.cpu)
            memcg_kmem.skip_pgtables(s, t.cpu, 1)
        if slot not in pt.pmd:
            pt.pmd[slot] = PMD_TABLE
            pt.nr_pte_tables += 1
            pt.table_ctor_lock(pmd_slot=slot)
            pa.take_owned_functional(node, 0, (mm, slot), t.cpu)
            memcg_kmem.skip_pgtables(s, t.cpu, 1)
        pt.pte_bitmap(slot)[(a >> 12) & 511:((nxt - 1) >> 12 & 511) + 1] = True
        inode.dirty_tables.add((id(mm), slot))  # do_shared_fault's PTEs are dirty
        a = nxt


class PageFault2(_FileFault):
    name = "will-it-scale/page_fault2"
    description = ("will-it-scale page_fault2: MAP_PRIVATE 128M of a tmpfs file, write every page (COW), "
                   "munmap; ops = pages written")
    shared = False


class PageFault3(_FileFault):
    name = "will-it-scale/page_fault3"
    description = ("will-it-scale page_fault3: MAP_SHARED 128M of a tmpfs file, write every page, munmap; "
                   "ops = pages written")
    shared = True
    # The unmap's folio_mark_accessed (mm/zap.py) sets PG_referenced at the first round, activates every
    # folio at the second and sets PG_referenced again at the third; from the fourth on it finds each folio
    # active and referenced and does nothing, which is will-it-scale's steady state (its runs last minutes,
    # hundreds of rounds). So three rounds come before the counted ones.
    params = {
        **_FileFault.params,
        "warmup": ParamInfo(3, "rounds per task before counting (1: populate the page cache; 2-3: the unmaps "
                            "that reference and activate its folios)", parse_int(0), "an integer >= 0"),
    }


register(PageFault2())
register(PageFault3())
