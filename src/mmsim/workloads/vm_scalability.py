"""vm-scalability's anonymous-memory cases, driving ``usemem``.

The case scripts (vm-scalability ``case-anon-*``) source ``hw_vars`` (``mem``
= MemTotal in bytes) and run:

* ``anon-w-seq``:  ``usemem -n $nr_task $((mem / nr_task / 2))``
* ``anon-w-rand``: ``usemem -n $nr_task --random $((mem / nr_task / 2))``
* ``anon-r-seq``:  ``usemem -n $nr_task --readonly $size`` (the case sizes it
  from ``PTE_LIMIT``, which the stored ``hw_vars`` does not define; mmsim
  uses the same ``mem / nr_task / 2`` as the write cases, overridable)
* ``anon-cow-seq``: ``usemem -n $nr_task --prealloc --prefault $((mem / nr_task / 2))``
* ``anon-w-seq-hugetlb``: ``unit_size=$((mem / 2))``, ``setup_hugetlb``, then
  ``usemem -n $nr_task -O -U $((unit_size / nr_task))``
* ``anon-cow-seq-hugetlb``: ``unit_size=$((mem / 2))``, ``setup_hugetlb``, then
  ``usemem -n $nr_task --prealloc --prefault -O -U $((unit_size / (nr_task+1)))``

``setup_hugetlb`` sets only ``nr_overcommit_hugepages`` (to
``unit_size / Hugepagesize + nr_task + 1``; ``nr_hugepages`` stays 0), so
every huge page is a surplus page from the buddy allocator. ``-O -U`` is
``MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB``: one unlinked hugetlbfs inode
per mapping (``hugetlb_file_setup``), which the forked children share.
In the hugetlb cases each child then exits (``exit_mmap``: the hugetlb
VMA's unmap and unlink take that inode's ``i_mmap_rwsem`` for write) while
the others still run; the parent exits last.

``usemem`` (usemem.c): ``main`` takes ``start_time``, then with ``--prealloc``
``mmap``s the region (``/dev/zero`` MAP_PRIVATE, i.e. anonymous; with
``--prefault`` MAP_POPULATE write-faults every page in the parent) and sets
``done_bytes = bytes / 8``; it forks ``nr_task`` children which signal
ready and wait for "GO" on a pipe (``ready()``/``synchronize_tasks()``).
Each child then runs ``do_units``: without prealloc it ``mmap``s its own
region (``rw_bytes = bytes / 8``), and ``do_rw_once`` writes (or reads)
every 8-byte word in order (``--random``: ``bytes / 8`` words at random
indices), checking ``runtime_exceeded()`` every 64 Ki words. It prints
``unit_bytes / delta_us`` in KB/s, where ``delta_us`` runs from the
parent's ``start_time``. vm-scalability.throughput is the sum over tasks.

Tasks are placed as the scheduler's fork balancing does
(``select_task_rq_fair`` → ``find_idlest_group`` with SD_BALANCE_FORK): the
least loaded socket first, idle cores before SMT siblings.

The user loop cost per word (``USEMEM_LOOP``, ``USEMEM_RANDOM_LOOP``) is
``do_rw_once``'s body compiled with ``-O``, its cycles measured natively
with the line cached (mm/user_loops.py has the figures and sources). Misses cost what the memory model
says (machine/bandwidth.py, machine/llc.py). ``vm-scalability.time.user_time`` is what getrusage reports:
the loop, plus each user-mode fault's share that tick-based accounting counts as user
(mm/user_loops.py ``FAULT_USER_CYCLES``); system time is the rest.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES
from mmsim.metrics.events import VmEvent
from mmsim.metrics.sampling import sim_now
from mmsim.mm import hugetlb, memory
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, PMD_TABLE
from mmsim.mm.user_loops import USEMEM_LOOP as USEMEM_LOOP  # re-exported: vm_scalability_shm uses it
from mmsim.mm.user_loops import (
    USEMEM_RANDOM_LOOP,  # per-word costs, sourced in mm/user_loops.py
    fault_user_ns,
)
from mmsim.workloads import libc
from mmsim.workloads.base import ParamInfo, parse_int, register

# usemem.c do_rw_once: runtime_exceeded() is checked when !(i & 0xffff)
RUNTIME_CHECK_WORDS = 0x10000
PGFAULT = int(VmEvent.PGFAULT)
# estimate: L1D fill buffers (Optimization Reference Manual: 10 on Nehalem..Haswell) bound the
# random-access misses one core keeps in flight
RANDOM_MLP = 10
HPAGE = 2 << 20
PAGE = 4096
# Fast mode: the fault loop's skip ratio (thp_memscale.fault_fast_forward), this workload's own. 9, the shared value
# of sessions 16-34; not measured at another ratio. A sampling setting, not a model constant.
FF_SKIP_RATIO = 9.0


def memparse(v: str) -> int:
    """usemem's ``memparse``: a number with optional k/m/g/t (powers of 1024)."""
    s = str(v).strip().lower()
    shift = {"k": 10, "m": 20, "g": 30, "t": 40}.get(s[-1:], 0)
    num = s[:-1] if shift else s
    if not num.isdigit() or int(num) == 0:
        raise ValueError
    return int(num) << shift


def parse_size(v: str) -> int:
    """``auto`` (0: the case script's ``mem / 2`` in total) or a usemem size."""
    return 0 if str(v).strip() == "auto" else memparse(v)


def parse_nr_task(v: str) -> str:
    """An integer >= 1, or a percentage of the machine's CPUs (LKP's ``nr_task: 50%``)."""
    s = str(v).strip()
    if s.endswith("%"):
        if not s[:-1].isdigit() or not 0 < int(s[:-1]) <= 1000:
            raise ValueError
        return s
    if not s.isdigit() or int(s) < 1:
        raise ValueError
    return s


def parse_auto_int(v: str) -> int:
    """``auto`` (-1) or an integer >= 0."""
    s = str(v).strip()
    if s == "auto":
        return -1
    if not s.isdigit():
        raise ValueError
    return int(s)


def resolve_nr_task(v: str, ncpus: int) -> int:
    if v.endswith("%"):
        return max(1, ncpus * int(v[:-1]) // 100)
    return int(v)


def fork_cpus(machine: Any, n: int) -> list[int]:
    """CPUs for ``n`` forked tasks as fork balancing spreads them: round robin
    over sockets, within a socket each core's first thread before any
    sibling; beyond one task per CPU, wrap around."""
    ncores = machine.ncores
    tpc = machine.sockets[0].threads_per_core
    per_socket = machine.sockets[0].cores
    order_by_socket: list[list[int]] = [[] for _ in machine.sockets]
    for t in range(tpc):
        for core in range(ncores):
            order_by_socket[core // per_socket].append(t * ncores + core)
    seq = [cpus[i] for i in range(len(order_by_socket[0])) for cpus in order_by_socket]
    return [seq[i % len(seq)] for i in range(n)]


class UsememCase:
    """One ``case-anon-*`` script: usemem with that case's options."""

    def __init__(self, case: str, desc: str, *, random: bool = False, readonly: bool = False,
                 cow: bool = False, hugetlb: bool = False) -> None:
        self.name = f"vm-scalability/{case}"
        self.case = case
        self.description = desc
        self.random = random
        self.readonly = readonly
        self.cow = cow
        self.hugetlb = hugetlb
        self.params = {
            "nr_task": ParamInfo("100%", "-n: number of usemem processes, or a percentage of the CPUs",
                                 parse_nr_task, "an integer >= 1 or a percentage like 50%"),
            "size": ParamInfo(0, "total bytes over all tasks (usemem gets size / nr_task each); auto = MemTotal / 2 "
                              "as the case script computes", parse_size,
                              "auto or a size like 64g, 512m (k/m/g/t = 2^10..)"),
            "runtime": ParamInfo(300, "-T: seconds before usemem stops early (LKP's runtime)", parse_int(1),
                                 "an integer >= 1"),
        }
        if hugetlb:
            div = "(nr_task + 1)" if cow else "nr_task"
            self.params["size"] = ParamInfo(
                0, f"unit_size: total bytes; usemem gets unit_size / {div} each; auto = MemTotal / 2 as the case "
                "script computes", parse_size, "auto or a size like 64g, 512m (k/m/g/t = 2^10..)")
            self.params["nr_hugepages"] = ParamInfo(0, "vm.nr_hugepages (the case script leaves it at 0)",
                                                    parse_int(0), "an integer >= 0")
            self.params["nr_overcommit_hugepages"] = ParamInfo(
                "auto", "vm.nr_overcommit_hugepages; auto = setup_hugetlb's unit_size / 2 MiB + nr_task + 1",
                parse_auto_int, "auto or an integer >= 0")

    # -- set-up --------------------------------------------------------------
    def _sizes(self, system: Any, p: dict[str, Any]) -> tuple[int, int]:
        m = system.machine
        nr = resolve_nr_task(p["nr_task"], m.ncpus)
        mem = int(sum(n.memory_gib for n in m.nodes) * (1 << 30))
        total = p["size"] or mem // 2
        per = total // (nr + 1 if self.hugetlb and self.cow else nr)
        if per < PAGE:
            raise UserError("-p size", p["size"] or "auto", f"at least {nr * PAGE} bytes for {nr} tasks")
        footprint = per * (nr + 1 if self.cow else nr)
        if footprint > mem:
            raise UserError("-p size", p["size"], f"a total that fits in {m.name}'s {mem >> 30} GiB "
                            f"({'nr_task + 1 copies for COW' if self.cow else 'all tasks'})")
        return nr, per

    def command(self, p: dict[str, Any]) -> str:
        opts = " --random" if self.random else " --readonly" if self.readonly else ""
        opts += " --prealloc --prefault" if self.cow else ""
        nr = p["nr_task"]
        if self.hugetlb:
            div = "(nr_task+1)" if self.cow else "nr_task"
            unit = p["size"] or "$((mem / 2))"
            return f"usemem -n {nr} -T {p['runtime']}{opts} -O -U $(({unit} / {div}))"

        per = "$((mem / nr_task / 2))" if not p["size"] else (
            str(p["size"] // int(nr)) if nr.isdigit() else f"$(({p['size']} / nr_task))")
        return f"usemem -n {nr} -T {p['runtime']}{opts} {per}"

    def _hugetlb_pool(self, system: Any, p: dict[str, Any], nr: int, per: int) -> None:
        """``setup_hugetlb``, and the pool check: a run the kernel would fail
        (mmap ENOMEM at reservation, SIGBUS at a fault) is refused here."""
        mem = int(sum(n.memory_gib for n in system.machine.nodes) * (1 << 30))
        unit = p["size"] or mem // 2
        over = p["nr_overcommit_hugepages"]
        if over == "auto" or over < 0:
            over = unit // HPAGE + nr + 1  # setup_hugetlb: nr_hp = unit_size/Hugepagesize/1024 + nr_task + 1
        system.set_hugetlb_pool(p["nr_hugepages"], over)
        pool = system.hugetlb
        have = p["nr_hugepages"] + over
        pages = -(-per // HPAGE)
        if self.cow and pages > have:
            raise hugetlb.hugetlb_error("the parent's mapping", pool, pages,
                                        "fails the parent's mmap() with ENOMEM (hugetlb_reserve_pages)")
        if not self.cow and pages * nr > have:
            raise hugetlb.hugetlb_error(f"{nr} mappings of {pages} pages", pool, pages * nr,
                                        "fails a child's mmap() with ENOMEM (hugetlb_reserve_pages)")
        if self.cow and pages * (nr + 1) > have:
            raise hugetlb.hugetlb_error(f"the parent's pages and {nr} COW copies", pool, pages * (nr + 1),
                                        "sends SIGBUS to a child's COW fault (hugetlb_cow: alloc_huge_page "
                                        "-ENOSPC; children have no reservation)")

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        nr, per = self._sizes(system, p)
        if self.hugetlb:
            self._hugetlb_pool(system, p, nr, per)
        cpus = fork_cpus(system.machine, nr)
        main = Task(0, "usemem", cpu=cpus[0])
        main.mm = MmStruct(system, home_cpu=cpus[0])
        st: dict[str, Any] = {"nr": nr, "per": per, "cpus": cpus, "ready": 0, "done": 0, "tput": [],
                              "children": [], "unit_bytes": []}
        system.workload_state = st
        system.sched.spawn(main, self._main(system, main, p))
        system.start_vmstat_timer(lambda: main.state == "done")

    def _main(self, system: Any, main: Task, p: dict[str, Any]) -> Generator[Any, Any, None]:
        st = system.workload_state
        c = system.counters
        st["start"] = system.engine.now  # gettimeofday(&start_time) in main()
        pre_vma = None
        done_bytes = 0
        if self.cow:
            pre_vma = yield from main.mm.do_mmap(main, st["per"], hugetlb=self.hugetlb)
            yield from self._populate(system, main, pre_vma)
            done_bytes = st["per"] // 8
        for i in range(st["nr"]):
            ns, ins = path("copy_process/fork", system.machine.freq_ghz)  # fork(): usemem's processes
            yield c.busy(main.cpu, "copy_process", ns, ins)
            mm = MmStruct(system, home_cpu=st["cpus"][i])
            cvma = pre_vma
            if pre_vma is not None and self.hugetlb:
                cvma = Vma(pre_vma.start, pre_vma.end, hugetlb=True)
                mm.vmas.append(cvma)
                mm.free_top = main.mm.free_top
                yield from hugetlb.dup_hugetlb_vma(main, main.mm, mm, pre_vma, cvma)
            elif pre_vma is not None:
                mm.vmas.append(Vma(pre_vma.start, pre_vma.end))
                mm.free_top = main.mm.free_top
                yield from memory.copy_page_range(main, main.mm, mm, pre_vma)
            t = Task(i + 1, f"usemem/{i}", cpu=st["cpus"][i], mm=mm)
            st["children"].append(t)
            system.sched.spawn(t, self._child(system, t, p, cvma, done_bytes))
        # synchronize_tasks(): read one byte per child, then write "GO".
        while st["ready"] < st["nr"]:
            st["parent_waiting"] = main
            yield system.sched.sleep(main)
        st.pop("parent_waiting", None)
        st["go"] = system.engine.now  # write(GO): the children start their units
        for t in st["children"]:
            system.sched.wake_up(t)
        while st["done"] < st["nr"]:
            st["joiner"] = main
            yield system.sched.sleep(main)
        system.elapsed_ns = system.engine.now
        if pre_vma is not None and self.hugetlb:
            yield from hugetlb.unmap_hugetlb_vma(main, main.mm, pre_vma, exiting=True)  # exit_mmap

    def _populate(self, system: Any, t: Task, vma: Vma) -> Generator[Any, Any, None]:
        """MAP_POPULATE: ``__mm_populate`` write-faults every page (FOLL_WRITE
        for a private writable mapping) in the parent."""
        pt = t.mm.pgtables
        addr = vma.start
        f0 = _faults(system)
        while addr < vma.end:
            yield from memory.handle_mm_fault(t, t.mm, vma, addr, write=True)
            addr = ((addr >> PMD_SHIFT) + 1) << PMD_SHIFT if pt.pmd.get(addr >> PMD_SHIFT) == PMD_HUGE else addr + PAGE
        system.workload_state["populate_faults"] = _faults(system) - f0  # GUP faults: no exception, no user tick

    def _child(
        self, system: Any, t: Task, p: dict[str, Any], pre_vma: Vma | None, done_bytes: int
    ) -> Generator[Any, Any, None]:
        st = system.workload_state
        per = st["per"]
        if pre_vma is None:
            vma = yield from t.mm.do_mmap(t, per, hugetlb=self.hugetlb)
            rw_bytes = per // 8
        else:
            vma, rw_bytes = pre_vma, 0
        # ready(): write to the pipe, poll for GO.
        st["ready"] += 1
        if st["ready"] == st["nr"] and "parent_waiting" in st:
            system.sched.wake_up(st["parent_waiting"])
        yield system.sched.sleep(t)
        deadline = st["start"] + p["runtime"] * 1_000_000_000
        if self.random:
            rw_bytes += yield from self._rw_random(system, t, vma, per, deadline)
        else:
            rw_bytes += yield from self._rw_seq(system, t, vma, vma.start, vma.start + per, deadline)
        unit_bytes = done_bytes + rw_bytes
        delta_us = max(1, (system.engine.now - st["start"]) // 1000)
        st["tput"].append(((unit_bytes * 1_000_000) >> 10) / delta_us)
        st["unit_bytes"].append(unit_bytes)
        if self.hugetlb:
            yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma, exiting=True)  # exit_mmap
        st["done"] += 1
        if st["done"] == st["nr"] and "joiner" in st:
            system.sched.wake_up(st["joiner"])

    def _rw_seq(
        self, system: Any, t: Task, vma: Vma, start: int, end: int, deadline: int
    ) -> Generator[Any, Any, int]:
        """``do_rw_once`` in order: a fault where the page is not mapped as
        needed, then the user loop over the page through the LLC model."""
        write = not self.readonly
        pt = t.mm.pgtables
        home = system.machine.cpu_node(t.cpu)
        func = "usemem [user]"
        addr = start
        pending = 0
        done = 0
        ff = system.fast_forward
        lo = hi = unit = 0
        if ff is not None:  # one steady region of identical write faults (mmsim.metrics.sampling)
            from mmsim.workloads.thp_memscale import steady_region

            lo, hi, unit = steady_region(system, vma, start, end)
            ff.register(t.tid, max(0, (hi - lo) // unit), t.cpu)
        while addr < end:
            if ff is not None and lo <= addr < hi:
                k = ff.poll(t.tid, (addr - lo) // unit)
                if k:
                    skip_anon_writes(system, t, addr, k, unit, home)
                    done += k * unit
                    addr += k * unit
                    continue
                if addr + unit >= hi:
                    ff.leave(t.tid)
            slot = addr >> PMD_SHIFT
            state = pt.pmd.get(slot)
            huge = state == PMD_HUGE
            if huge:
                mapped = not write or not (slot in pt.wp_huge or slot in pt.zero_huge)
            elif state == PMD_TABLE and (ptb := pt.ptes.get(slot)) is not None and ptb[(addr >> 12) & 511]:
                pfn = addr >> 12
                mapped = not write or not (pfn in pt.zero_ptes or pfn in pt.wp_ptes)
            else:
                mapped = False
            if not mapped:
                yield from memory.handle_mm_fault(t, t.mm, vma, addr, write=write, pre_ns=pending)
                pending = 0
                huge = pt.pmd.get(slot) == PMD_HUGE
            if huge:
                nxt = min((slot + 1) << PMD_SHIFT, end)
                first, last = (addr >> 12) & 511, ((nxt - 1) >> 12 & 511) + 1
                key = memory.page_key(t.mm, addr, True)
                node = pt.huge_node.get(slot, home)
                pending += memory.user_access(t, system, node, key, 512, first, last, write, USEMEM_LOOP, func,
                                              pending)
            else:
                nxt = min(addr + PAGE, end)
                key = memory.page_key(t.mm, addr, False)
                pending += memory.user_access(t, system, home, key, 1, 0, 1, write, USEMEM_LOOP, func, pending)
            done += nxt - addr
            addr = nxt
            if sim_now(system) + pending > deadline:
                break
        if pending:
            yield pending
        if ff is not None:
            ff.exit(t.tid)
        return done

    def _rw_random(
        self, system: Any, t: Task, vma: Vma, per: int, deadline: int
    ) -> Generator[Any, Any, int]:
        """``do_rw_once --random``: ``per / 8`` writes at uniformly random word
        indices, in batches of the runtime-check interval. The first access to
        each page faults (in the order the draws reach it); the rest are
        charged in bulk. A random line is in the LLC with probability
        (this task's share of the LLC) / (its region), else it is a miss
        that takes a bandwidth share or, when bandwidth is not the limit,
        the memory latency over the misses one core keeps in flight."""
        m = system.machine
        rng = system.engine.rng.stream(f"usemem/{t.tid}")
        pt = t.mm.pgtables
        words = per // 8
        cache = system.cache.of_cpu(t.cpu)
        sharing = sum(1 for c in system.workload_state["cpus"] if system.cache.of_cpu(c) is cache)
        p_hit = min(1.0, cache.capacity / sharing / per)
        home = m.cpu_node(t.cpu)
        lat = m.nodes[home].latency_ns
        cyc, insns = USEMEM_RANDOM_LOOP
        t_hit = cyc / (m.freq_ghz * memory.smt_speed(system, t.cpu))
        bw = system.bandwidth
        eq = bw.equiv_bytes(home, 64, 64)
        done = 0
        base = vma.start >> 12
        mapped = np.zeros(((vma.start + per - 1) >> 12) - base + 1, dtype=bool)
        while done < words:
            b = min(RUNTIME_CHECK_WORDS, words - done)
            idx = rng.integers(0, words - 1, size=b) if words > 1 else np.zeros(b, dtype=np.int64)
            pg = ((vma.start + idx * 8) >> 12) - base
            new = ~mapped[pg]
            if new.any():
                cand, pos = np.unique(pg[new], return_index=True)
                for i in cand[np.argsort(pos)]:
                    if mapped[i]:
                        continue
                    addr = (int(i) + base) << 12
                    yield from memory.handle_mm_fault(t, t.mm, vma, max(addr, vma.start), write=True)
                    if pt.pmd.get(addr >> PMD_SHIFT) == PMD_HUGE:
                        lo = max(((addr >> PMD_SHIFT) << 9) - base, 0)
                        mapped[lo:lo + 512] = True
                    else:
                        mapped[i] = True
            now = system.engine.now
            rate = bw.rate(home, m.cost.core_clear_gbs, now)
            t_miss = max(t_hit, eq / rate, lat / RANDOM_MLP)
            misses = round(b * (1.0 - p_hit))
            d = int(misses * t_miss + (b - misses) * t_hit) + 1
            bw.occupy(home, now, int(misses * eq / rate), misses * 64, misses * 64)
            p = system.counters.perf[t.cpu]
            p[CACHE_REFERENCES] += b
            p[CACHE_MISSES] += misses
            yield system.counters.busy(t.cpu, "usemem [user]", d, int(b * insns))
            done += b
            if system.engine.now > deadline:
                break
        return done * 8

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        c = system.counters
        total = sum(sum(d.values()) for d in c.prof_ns)
        # getrusage's user time: the loop, plus the share of each user-mode fault that tick accounting reports
        # as user (mm/user_loops.py FAULT_USER_CYCLES); MAP_POPULATE's faults are not taken from user mode
        user_faults = _faults(system) - st.get("populate_faults", 0)
        user = sum(d.get("usemem [user]", 0) for d in c.prof_ns) + fault_user_ns(system.machine, user_faults)
        tput = st["tput"]
        return {
            "vm-scalability.throughput": float(sum(tput)),
            "vm-scalability.median": float(np.median(tput)) if tput else 0.0,
            "vm-scalability.workload": float(sum(st["unit_bytes"])),
            "vm-scalability.time.user_time": user / 1e9,
            "vm-scalability.time.system_time": (total - user) / 1e9,
            "vm-scalability.time.elapsed_time": system.elapsed_ns / 1e9,
            "vm-scalability.nr_task": float(st["nr"]),
        }


for _w in (
    UsememCase("anon-w-seq", "usemem -n N: each process writes its own anonymous region once, in order"),
    UsememCase("anon-w-rand", "usemem -n N --random: random 8-byte writes over each process's region",
               random=True),
    UsememCase("anon-r-seq", "usemem -n N --readonly: each process reads its untouched region (zero page)",
               readonly=True),
    UsememCase("anon-cow-seq", "usemem --prealloc --prefault: the parent populates, N children write it (COW)",
               cow=True),
    UsememCase("anon-w-seq-hugetlb", "usemem -O -U: each process writes its own MAP_HUGETLB region once, in order",
               hugetlb=True),
    UsememCase("anon-cow-seq-hugetlb", "usemem --prealloc --prefault -O -U: the parent populates a MAP_HUGETLB "
               "region, N children write it (hugetlb COW)", cow=True, hugetlb=True),
):
    register(_w)


class UsememThreadsCase(UsememCase):
    """Issue 22: ``case-anon-w-seq-mt`` (vm-scalability, last changed b4f8f4e):
    ``usemem -t $nr_task $((unit_size / nr_task))`` with ``unit_size = mem / 2``: ``nr_task`` threads of
    one process (``-t``), each mapping its own region of ``/dev/zero`` (usemem's default file,
    MAP_PRIVATE: an anonymous VMA after ``mmap_zero``, placed by ``get_unmapped_area_zero``, policy
    ``dev_zero_align``) and writing every word once, in order. Threads are placed as fork balancing
    places new tasks (``wake_up_new_task``). The anonymous-folio LRU and memcg model is on."""

    def __init__(self, case: str, desc: str) -> None:
        super().__init__(case, desc)
        self.params["nr_task"] = ParamInfo("100%", "-t: number of usemem threads, or a percentage of the CPUs",
                                           parse_nr_task, "an integer >= 1 or a percentage like 50%")
        self.params["size"] = ParamInfo(0, "unit_size: total bytes over all threads (each maps size / nr_task); "
                                        "auto = MemTotal / 2 as the case script computes", parse_size,
                                        "auto or a size like 64g, 512m (k/m/g/t = 2^10..)")

    def command(self, p: dict[str, Any]) -> str:
        nr = p["nr_task"]
        per = "$((mem / 2 / nr_task))" if not p["size"] else (
            str(p["size"] // int(nr)) if nr.isdigit() else f"$(({p['size']} / nr_task))")
        return f"usemem -t {nr} -T {p['runtime']} {per}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        from mmsim.mm import lru_anon

        nr, per = self._sizes(system, p)
        lru_anon.enable(system)
        cpus = fork_cpus(system.machine, nr)
        main = Task(0, "usemem", cpu=cpus[0])
        main.mm = MmStruct(system, home_cpu=cpus[0])
        st: dict[str, Any] = {"nr": nr, "per": per, "cpus": cpus, "ready": 0, "done": 0, "tput": [],
                              "children": [], "unit_bytes": []}
        system.workload_state = st
        if not system.exact and not self.readonly and system.policy("numa_balancing") == "0":
            from mmsim.workloads.thp_memscale import fault_fast_forward

            system.fast_forward = fault_fast_forward(system, nr, FF_SKIP_RATIO)
        system.sched.spawn(main, self._main_threads(system, main, p))
        system.start_vmstat_timer(lambda: main.state == "done")

    def _main_threads(self, system: Any, main: Task, p: dict[str, Any]) -> Generator[Any, Any, None]:
        st = system.workload_state
        st["start"] = system.engine.now
        for i in range(st["nr"]):
            yield from libc.pthread_create(system, main)  # glibc: the stack's mmap, fault, mprotect; clone
            t = Task(i + 1, f"usemem/{i}", cpu=st["cpus"][i], mm=main.mm)
            st["children"].append(t)
            system.sched.spawn(t, self._thread(system, t, p))
        while st["ready"] < st["nr"]:
            st["parent_waiting"] = main
            yield system.sched.sleep(main)
        st.pop("parent_waiting", None)
        for t in st["children"]:
            system.sched.wake_up(t)
        while st["done"] < st["nr"]:
            st["joiner"] = main
            yield system.sched.sleep(main)
        system.elapsed_ns = sim_now(system)

    def _thread(self, system: Any, t: Task, p: dict[str, Any]) -> Generator[Any, Any, None]:
        st = system.workload_state
        per = st["per"]
        # usemem.c do_units: ready() (write to the pipe, wait for GO), then do_unit -> allocate(): the mmap
        # of /dev/zero comes after GO, so the threads' mmaps meet on the shared mm's mmap_lock
        st["ready"] += 1
        if st["ready"] == st["nr"] and "parent_waiting" in st:
            system.sched.wake_up(st["parent_waiting"])
        yield system.sched.sleep(t)
        vma = yield from t.mm.mmap_pgoff(t, per, kind="devzero", name="/dev/zero")
        deadline = st["start"] + p["runtime"] * 1_000_000_000
        rw_bytes = yield from self._rw_seq(system, t, vma, vma.start, vma.start + per, deadline)
        delta_us = max(1, (sim_now(system) - st["start"]) // 1000)
        st["tput"].append(((rw_bytes * 1_000_000) >> 10) / delta_us)
        st["unit_bytes"].append(rw_bytes)
        st["done"] += 1
        if st["done"] == st["nr"] and "joiner" in st:
            system.sched.wake_up(st["joiner"])

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        from mmsim.metrics.events import VmEvent

        out = super().metrics(system, p)
        vm = system.counters.vm
        out["vm-scalability.time.minor_page_faults"] = float(sum(v[int(VmEvent.PGFAULT)] for v in vm))
        out["proc-vmstat.thp_fault_alloc"] = float(sum(v[int(VmEvent.THP_FAULT_ALLOC)] for v in vm))
        return out


def _faults(system: Any) -> int:
    """Page faults so far (``PGFAULT`` summed over CPUs; fast-forwarded faults included)."""
    return int(sum(int(v[PGFAULT]) for v in system.counters.vm))


def skip_anon_writes(system: Any, t: Task, addr: int, k: int, unit: int, node: int) -> None:
    """The state after ``k`` skipped anonymous write faults of ``unit`` bytes from ``addr`` (a
    fast-forward skip; costs extrapolated): thp_memscale's page tables and allocations
    (:func:`~mmsim.workloads.thp_memscale.skip_mapped`), and ``new_anon_folio``'s LRU folios, memcg
    stock and ``lru_add`` batch (mm/lru_anon.py), where that model is on."""
    from mmsim.mm import lru_anon
    from mmsim.workloads.thp_memscale import skip_mapped

    skip_mapped(system, t, addr, k, unit, node)
    lru = lru_anon.state(system)
    if lru is None:
        return
    mm_id = id(t.mm)
    for a in range(addr, addr + k * unit, unit):
        lru.folios.setdefault((mm_id, a >> PMD_SHIFT), []).append(node)
    lru_anon.skip_new_folios(system, t.cpu, [node] * k, unit // PAGE)


register(UsememThreadsCase("anon-w-seq-mt", "usemem -t N: N threads of one process each write their own "
                           "/dev/zero MAP_PRIVATE region once, in order"))
