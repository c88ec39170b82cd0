"""pmbench as LKP's ``tests/pmbench`` runs it: several processes, each its own
map, bound to nodes, after ``eatmem``; a steady-state window of the run.

The LKP job behind seeds/002 (``jobs/pmbench-dcpmm.yaml``; see
docs/autonuma-scan.md for the sources) starts ``nr_processes`` copies of
``pmbench -s S -m S -pnormal_ih -j1 -c -i -rR 900``, process ``i`` (1-based)
under ``numactl --cpunodebind=$((i % nr_node))`` when ``cpu_node_bind: even``
(lib/numactl.sh), ``nr_node`` counting every node in /sys, the CPU-less PMEM
nodes included. numactl (2.0.12..2.0.19, ``numa_run_on_node_mask_all``) ORs
the CPU masks of the nodes given; a CPU-less node's mask is empty, the
kernel's ``sched_setaffinity`` refuses an empty mask (``-EINVAL``) and
numactl's ``checkerror("sched_setaffinity")`` exits with status 1 before
``execvp``: that pmbench never runs. Here too: such a process is counted in
``pmbench.processes_failed`` and does nothing.

``eatmem`` (LKP setup/eatmem: ``usemem --mlock --prefault`` under
``numactl --membind``) takes its pages off the node's free count before
anything else; they are mlocked (unevictable: kswapd never demotes them) and
belong to sleeping processes that never run ``task_numa_work``, so they are
never scanned nor migrated. The memmap of a CPU-less (hot-added PMEM) node
is allocated from its socket's DRAM node when it is onlined (64 bytes per 4
KiB page).

``-i`` (pmbench.c ``init_garbage``): the main thread writes every page before
the worker starts, so each map is resident, placed by first touch on the
process's node and then along its zonelist once the node is at its low
watermark (``get_page_from_freelist``). Processes on one node initialise
concurrently: the node's pages above the low watermark are shared equally.
The placement is computed in bulk, not fault by fault.

The window: pmbench runs ``duration`` seconds; mmsim simulates
``[window_start, window_start + window)`` (default: LKP perf-profile's
``delay = runtime / 2`` and ``duration = 10 s``). Its starting state is the
scanner's steady state at ``window_start``, computed by
:func:`mmsim.workloads.pmbench_scan.scan_state` from the scan-period rules of
``task_numa_work`` / ``update_task_scan_period``. Inside the window the
scanner is the kernel model itself (``task_numa_work`` → ``change_prot_numa``
→ ``change_pte_range``, per PTE table). The accesses are per page rates:
access ``k`` of a process goes to page ``i`` with the pattern's probability
``p_i``, so a protnone page is touched in ``dt`` of user time with probability
``1 - exp(-A p_i)`` (``A`` accesses): the NUMA hinting faults of a chunk are
drawn vectorised and charged as ``do_numa_page`` / ``task_numa_fault`` (the
costs of ``mm/memory.py`` and ``sched/numa_balancing.py``), and the migration
decisions follow ``mpol_misplaced`` / ``should_numa_migrate_memory`` /
``migrate_balanced_pgdat`` in bulk. An access costs pmbench's loop overhead
plus an LLC hit or the memory latency of the page's node (the independent
reference model of ``workloads/pmbench.py``'s ``sampling=page``).

Tiering (``numa_balancing=2``, RFC 03/10 of the series, merged in v5.18):
DRAM pages are not made protnone; a hinting fault on a PMEM page is a
promotion candidate (promoted when the DRAM node has ample free space, else
when its hint-fault latency is under the hot threshold and the per-node rate
limit allows); a promotion that finds the DRAM node below its high watermark
fails and wakes kswapd, which demotes the node's coldest pmbench pages
(the inactive tail: the smallest access probability) to the PMEM node of the
same socket until the free count is back above the promotion watermark
(``high + (high - low)``, v6.0 WMARK_PROMO).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.machine.model import MemoryType
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES, PAGE_FAULTS
from mmsim.metrics.events import VmEvent
from mmsim.mm import memcg_kmem, memory
from mmsim.mm import migrate as mmigrate
from mmsim.mm.costs import path
from mmsim.mm.mmap import MmStruct
from mmsim.mm.mprotect import mem_latency_ns, memmap_node
from mmsim.mm.pgtable import PMD_SHIFT, PMD_TABLE, PTRS_PER_PTE, PUD_SHIFT, dense_numa
from mmsim.sched import numa_balancing as nb
from mmsim.workloads import libc, pmbench_scan

PAGE = 4096
LINE = 64
LINES_PER_PAGE = PAGE // LINE
MS = 1_000_000
TICK_NS = 4_000_000  # HZ = 250 (v5.4 x86 defconfig)
# A chunk of accesses is drawn again at least every second of simulated time (and at every possible scan), so
# that the access rate follows the time the kernel takes (the previous chunk's kernel share; in the steady state
# it changes little). A modelling choice, not a measured value.
CHUNK_MAX_NS = 1_000_000_000
STRUCT_PAGE_BYTES = 64  # sizeof(struct page) on x86-64
PGFAULT = int(VmEvent.PGFAULT)
NUMA_HINT_FAULTS = int(VmEvent.NUMA_HINT_FAULTS)
NUMA_HINT_FAULTS_LOCAL = int(VmEvent.NUMA_HINT_FAULTS_LOCAL)


def cpu_nodes(m: Any) -> set[int]:
    """Nodes with CPUs (``node_state(N_CPU)``)."""
    return {sk.node for sk in m.sockets}


def bindings(m: Any, processes: int, mode: str, basecpu: int) -> list[tuple[int, int | None]]:
    """LKP ``numa_node_binding`` for processes 1..n: ``(node or -1, cpu or None)``.
    ``even``: node ``i % nr_node`` (all nodes; ``even%LIST``: ``LIST[i % len]``); a CPU-less node gives ``cpu``
    None (numactl exits 1, see the module docstring). The CPU of a bound
    process: the next unused CPU of the node, one per core first."""
    from mmsim.workloads.pmbench_pattern import node_list

    nr_node = len(m.nodes)
    even = list(range(nr_node)) if mode == "even" else node_list(mode[5:]) if mode.startswith("even%") else []
    if any(n >= nr_node for n in even):
        raise UserError("-p cpu_node_bind", mode, f"node ids 0..{nr_node - 1} of {m.name}")
    with_cpus = cpu_nodes(m)
    used: set[int] = set()
    out: list[tuple[int, int | None]] = []
    for i in range(1, processes + 1):
        if even:
            node = even[i % len(even)]
            if node not in with_cpus:
                out.append((node, None))
                continue
            cands = [c for c in range(m.ncpus) if m.cpu_node(c) == node and c not in used]
            if not cands:
                raise UserError("-p processes", processes, f"at most one process per CPU of node {node} on {m.name}")
            cpu = cands[0]
        else:
            cpu = basecpu + i - 1
            if cpu >= m.ncpus:
                raise UserError("-p processes", processes, f"at most {m.ncpus - basecpu} on {m.name} (one CPU each)")
            node = m.cpu_node(cpu)
        used.add(cpu)
        out.append((node, cpu))
    return out


def online_pmem_memmap(system: Any) -> dict[int, int]:
    """The memmap of each CPU-less node, taken from its socket's DRAM node
    (``sparse_add_section`` at ``add_memory``; no ``memmap_on_memory`` in v5.4).
    Returns {DRAM node: pages taken}."""
    m = system.machine
    taken: dict[int, int] = {}
    for n in range(len(m.nodes)):
        if n in cpu_nodes(m):
            continue
        z = system.page_alloc.zones[n]
        k = -(-z.managed_pages * STRUCT_PAGE_BYTES // PAGE)
        host = memmap_node(system, n)
        system.page_alloc.zones[host].free_pages -= k
        taken[host] = taken.get(host, 0) + k
    return taken


def place_initialized(system: Any, procs: list[dict[str, Any]], npages: int) -> None:
    """``-i`` in bulk: each process's ``npages`` in address order on its node
    until the node's free pages above the low watermark are used (shared
    equally by the processes of that node), then along the zonelist. Sets
    ``proc["segments"]`` = [(node, pages), ...] and charges the zones."""
    pa = system.page_alloc
    groups: dict[int, list[dict[str, Any]]] = {}
    for pr in procs:
        groups.setdefault(pr["node"], []).append(pr)
        pr["segments"] = []
        pr["left"] = npages
    for node in sorted(groups):
        grp = groups[node]
        for n in pa.zonelist[node]:
            need = [pr for pr in grp if pr["left"] > 0]
            if not need:
                break
            z = pa.zones[n]
            avail = max(0, z.free_pages - z.wmark_low)
            share = avail // len(need)
            for pr in need:
                k = min(pr["left"], share)
                if k:
                    pr["segments"].append((n, k))
                    pr["left"] -= k
                    z.free_pages -= k
        if any(pr["left"] > 0 for pr in grp):
            raise UserError("-p setsize", npages * PAGE >> 20, f"a size whose maps fit in {system.machine.name}'s "
                            "memory above the low watermarks (the kernel would OOM-kill)")


class LkpRun:
    """The multi-process steady-state run (see the module docstring)."""

    def __init__(self, system: Any, p: dict[str, Any], read_pct: int) -> None:
        from mmsim.workloads import pmbench as wl

        self.wl: Any = wl
        self.s = system
        self.p = p
        self.read_pct = read_pct

    # -- setup ------------------------------------------------------------------------------------------
    def setup(self) -> None:
        s, p = self.s, self.p
        m = s.machine
        if p["initialize"] != 1:
            raise UserError("-p initialize", p["initialize"], "1 with processes/cpu_node_bind/eatmem (the "
                            "multi-process model starts from the map -i made resident)")
        if p["jobs"] != 1:
            raise UserError("-p jobs", p["jobs"], "1 with processes/cpu_node_bind/eatmem (LKP's nr_threads: 1)")
        if p["pattern"] == "linear":
            raise UserError("-p pattern", "linear", "uniform, normal, normal_ih or pareto with processes > 1 "
                            "(a distribution, not a sequence)")
        if p["mempolicy"] != "default" or p["memhog"]:
            raise UserError("-p mempolicy" if p["mempolicy"] != "default" else "-p memhog",
                            p["mempolicy"] if p["mempolicy"] != "default" else p["memhog"],
                            "the default with processes/cpu_node_bind/eatmem (use eatmem)")
        start = p["window_start"] if p["window_start"] >= 0 else p["duration"] / 2
        if p["window"] == -1 and not nb.enabled(s):
            raise UserError("-p window", -1, "seconds > 0 without NUMA balancing (-1: one scan pass needs it)")
        if start + max(p["window"], 0) > p["duration"]:
            raise UserError("-p window", p["window"], f"at most duration - window_start ({p['duration'] - start:g} s)")
        self.window_s = float(p["window"])
        if p["eatmem_node"] >= len(m.nodes):
            raise UserError("-p eatmem_node", p["eatmem_node"], f"a node id 0..{len(m.nodes) - 1} of {m.name}")
        self.t0_s = start
        st = s.workload_state
        st.update({"done": 0, "hist": np.zeros(self.wl.NBUCKETS, dtype=np.int64), "lat_sum_ns": 0.0,
                   "accesses": 0, "lkp": self})
        if p["eatmem"]:
            z = s.page_alloc.zones[p["eatmem_node"]]
            k = p["eatmem"] * 256
            if k > z.free_pages - z.wmark_min:
                raise UserError("-p eatmem", p["eatmem"], f"at most {(z.free_pages - z.wmark_min) // 256} MiB "
                                f"on node {p['eatmem_node']} of {m.name}")
            z.free_pages -= k
            st["eatmem"] = {"node": p["eatmem_node"], "pages": k}
        st["memmap"] = online_pmem_memmap(s)
        binds = bindings(m, p["processes"], p["cpu_node_bind"], p["basecpu"])
        self.procs: list[dict[str, Any]] = [{"id": i + 1, "node": n, "cpu": c} for i, (n, c) in enumerate(binds)
                                            if c is not None]
        st["failed"] = [i + 1 for i, (_n, c) in enumerate(binds) if c is None]
        if not self.procs:
            raise UserError("-p cpu_node_bind", p["cpu_node_bind"], f"a binding that starts at least one process "
                            f"on {m.name} (every process was bound to a CPU-less node)")
        self.npages = (p["setsize"] << 20) // PAGE
        self.mappages = (p["mapsize"] << 20) // PAGE
        place_initialized(s, self.procs, self.mappages)
        from mmsim.workloads.pmbench import PatternGen

        self.probs = np.zeros(self.mappages)
        gen = PatternGen(p["pattern"], self.npages, p["shape"], s.engine.rng.stream("pmbench/probs"))
        self.probs[: self.npages] = gen.probs()
        for pr in self.procs:
            main = Task(2 * pr["id"], f"pmbench.{pr['id']}", cpu=pr["cpu"])
            mm = MmStruct(s, home_cpu=pr["cpu"])
            main.mm = mm
            pr["main"] = main
            s.sched.spawn(main, self._main(pr))
        s.start_vmstat_timer(lambda: st["done"] >= len(self.procs))

    # -- one process --------------------------------------------------------------------------------------
    def _main(self, pr: dict[str, Any]) -> Generator[Any, Any, None]:
        s, p = self.s, self.p
        main: Task = pr["main"]
        mm: MmStruct = main.mm
        numa_on = nb.enabled(s)
        if numa_on:
            nb.init_task(s, main, mm)
        vma = yield from mm.do_mmap(main, p["mapsize"] << 20, name=f"pmbench.{pr['id']} map")
        first = vma.start >> PMD_SHIFT
        nslots = ((vma.end - 1) >> PMD_SHIFT) - first + 1
        dense = dense_numa(mm.pgtables, first, nslots)
        page0 = (vma.start >> 12) - first * PTRS_PER_PTE
        pt = mm.pgtables
        # -i's result: every page present, its node by the bulk placement; the page tables exist
        sl = slice(page0, page0 + self.mappages)
        dense.present[sl] = True
        nid = dense.nid[sl]
        pos = 0
        for n, k in pr["segments"]:
            nid[pos:pos + k] = n
            pos += k
        for k in range(nslots):
            pt.pmd[first + k] = PMD_TABLE
            pt.pud_present.add((first + k) >> (PUD_SHIFT - PMD_SHIFT))
        pt.nr_pte_tables += nslots
        memcg_kmem.skip_pgtables(s, main.cpu, nslots)  # -i's tables, charged before the timed part
        # struct page lines of the map, flat, with per-table views for change_pte_range's touch_lines
        sp = np.full(nslots * PTRS_PER_PTE, -1e30)
        for k in range(nslots):
            s.line_stamps[("struct page", id(mm), first + k)] = sp[k * PTRS_PER_PTE:(k + 1) * PTRS_PER_PTE]
        pr.update(dense=dense, page0=page0, sp=sp, vma=vma)
        yield from libc.pthread_create(s, main)  # glibc: the stack's mmap, fault, mprotect; clone
        t = Task(2 * pr["id"] + 1, f"pmbench.{pr['id']}/0", cpu=pr["cpu"], mm=mm)
        pr["worker"] = t
        if numa_on:
            nb.init_task(s, t, mm)
            pmbench_scan.init_steady_state(s, t, mm, pr, self, self.t0_s)
        s.sched.spawn(t, self._worker(pr))
        pr["joiner"] = main
        while not pr.get("finished"):
            yield s.sched.sleep(main)
        s.elapsed_ns = max(s.elapsed_ns, s.engine.now)

    def _worker(self, pr: dict[str, Any]) -> Generator[Any, Any, None]:
        s, p = self.s, self.p
        m = s.machine
        t: Task = pr["worker"]
        mm = t.mm
        cpu = t.cpu
        dense = pr["dense"]
        sl = slice(pr["page0"], pr["page0"] + self.mappages)
        nid = dense.nid[sl]
        prot = dense.protnone[sl]
        scan_ms = dense.scan_ms[sl]
        sp = pr["sp"][pr["page0"]:pr["page0"] + self.mappages]
        rng = s.engine.rng.stream(f"pmbench.{pr['id']}")
        ghz = m.freq_ghz
        wl = self.wl
        over_ns = (wl.RDTSCP_PAIR_CYC + wl.HISTO_LOOP_CYC + wl.PATTERN_CYC[p["pattern"]] + p["delay"]) / ghz
        timer_ns = wl.RDTSCP_PAIR_CYC / 2 / ghz
        l3 = m.caches[-1].latency_ns
        nnodes = len(m.nodes)
        lat_tbl = np.array([mem_latency_ns(s, cpu, n) for n in range(nnodes)])
        memmap_lat = np.array([mem_latency_ns(s, cpu, memmap_node(s, n)) for n in range(nnodes)])
        here = m.cpu_node(cpu)
        c = s.cache.of_cpu(cpu)
        sharers = sum(1 for q in self.procs if s.cache.of_cpu(q["cpu"]) is c)
        w_lines = c.capacity / LINE / max(1, sharers)
        miss_w, hit_share = self._llc_mix(w_lines)
        numa_on = nb.enabled(s)
        fault_ns = (m.cost.page_fault_ns + path("handle_mm_fault", ghz)[0]
                    + memory.DO_NUMA_PAGE[0] / ghz + nb.TASK_NUMA_FAULT[0] / ghz)
        fault_ins = path("handle_mm_fault", ghz)[1] + memory.DO_NUMA_PAGE[1] + nb.TASK_NUMA_FAULT[1]
        if p["window"] == -1:  # one whole scan pass of this process at its steady state (pmbench_scan.schedule)
            sch = pr["schedule"]
            pass_s = sch.scans_per_pass * sch.period_ms / 1000
            self.window_s = max(self.window_s, pass_s)
            end = int(pass_s * 1e9)
        else:
            end = int(p["window"] * 1e9)
        kern_frac = 0.0
        def mix() -> tuple[float, np.ndarray]:
            by_node = np.bincount(np.maximum(nid, 0).astype(np.intp), weights=miss_w, minlength=nnodes)
            return over_ns + float(by_node @ lat_tbl) + hit_share * l3, by_node

        acc_ns, miss_node = mix()
        nid_dirty = False
        while s.engine.now < end:
            now = s.engine.now
            horizon = min(end, now + CHUNK_MAX_NS)
            if numa_on:
                horizon = min(horizon, max(nb.next_tick_ns(s, t, mm), now + TICK_NS))
            dt = horizon - now
            if nid_dirty or pr.pop("nid_dirty", False):
                acc_ns, miss_node = mix()
                nid_dirty = False
            a_est = dt * (1.0 - kern_frac) / acc_ns  # accesses this chunk, at the previous chunk's kernel share
            kern = 0.0
            nf = 0
            if numa_on:
                kern, nf, moved = self._hint_faults(pr, t, mm, rng, nid, prot, scan_ms, sp, a_est, dt, here,
                                                    lat_tbl, memmap_lat, fault_ns, fault_ins)
                nid_dirty = moved
            user_ns = max(0.0, dt - kern)
            k = user_ns / acc_ns
            kern_frac = min(0.9, kern / dt) if dt else 0.0
            c.advance(now)
            c.add_stream(now, k * LINE, int(dt))
            perf = s.counters.perf[cpu]
            perf[CACHE_REFERENCES] += int(k) + nf
            misses_by_node = k * miss_node
            perf[CACHE_MISSES] += int(misses_by_node.sum()) + nf
            s.counters.busy(cpu, "pmbench [user]", int(user_ns) + 1, int(wl.USER_INSNS * k))
            lat = np.append(lat_tbl, l3) + timer_ns
            counts = np.rint(np.append(misses_by_node, k * hit_share)).astype(np.int64)
            wl.Pmbench._record_counts(s.workload_state, lat, counts)
            if nf:
                wl.Pmbench._record_counts(s.workload_state, np.array([kern / nf + float(lat_tbl[here]) + timer_ns]),
                                  np.array([nf], dtype=np.int64))
            yield max(1, int(dt))
            if numa_on and nb.task_tick_numa(s, t, mm):
                yield from nb.task_numa_work(t, mm)
        pr["finished"] = True
        s.workload_state["done"] += 1
        s.sched.wake_up(pr["joiner"])

    def _llc_mix(self, w_lines: float) -> tuple[np.ndarray, float]:
        """Per access, the chance of an LLC miss to page i (independent references: a hit when the line was
        referenced within the last ``w_lines`` lines, ``1 - (1 - p_i / 64)^W``), and the hit share; shared by
        the processes with the same share of an LLC."""
        cache: dict[float, tuple[np.ndarray, float]] = self.__dict__.setdefault("_mix", {})
        got = cache.get(w_lines)
        if got is None:
            pr_ = self.probs
            hitp = -np.expm1(w_lines * np.log1p(-pr_ / LINES_PER_PAGE))
            got = cache[w_lines] = (pr_ * (1.0 - hitp), float(pr_ @ hitp))
        return got

    def _hint_faults(self, pr: dict[str, Any], t: Task, mm: Any, rng: np.random.Generator, nid: np.ndarray,
                     prot: np.ndarray, scan_ms: np.ndarray, sp: np.ndarray, a_est: float, dt: int, here: int,
                     lat_tbl: np.ndarray, memmap_lat: np.ndarray, fault_ns: float,
                     fault_ins: int) -> tuple[float, int, bool]:
        """The NUMA hinting faults of one chunk, vectorised: ``do_numa_page``
        (v5.4) for each protnone page touched, in bulk. Returns (kernel ns,
        faults, whether pages moved)."""
        s = self.s
        cpu = t.cpu
        fi, tau = self._touched_protnone(rng, prot, a_est)
        nf = len(fi)
        if not nf:
            return 0.0, 0, False
        prot[fi] = False
        c = s.cache.of_cpu(cpu)
        now = s.engine.now
        clk = c.advance(now)
        chunk_bytes = a_est * LINE
        at_clk = clk + tau * chunk_bytes
        miss = (at_clk - sp[fi]) >= c.capacity  # do_numa_page reads the page's struct page line
        sp[fi] = at_clk
        fnid = nid[fi].astype(np.int64)
        stall = float(memmap_lat[fnid[miss]].sum())
        nlocal = int(np.count_nonzero(fnid == here))
        v = s.counters.vm[cpu]
        v[NUMA_HINT_FAULTS] += nf
        v[NUMA_HINT_FAULTS_LOCAL] += nlocal
        v[PGFAULT] += nf
        s.counters.perf[cpu][PAGE_FAULTS] += nf
        nt: nb.NumaTask = t.data["numa"]
        seq = s.numa_mm[id(mm)].scan_seq
        if nt.scan_seq != seq:
            nb.task_numa_placement(s, nt, mm, seq)
        kern = nf * fault_ns + stall
        s.counters.busy(cpu, "do_numa_page", int(nf * (fault_ns - nb.TASK_NUMA_FAULT[0] / s.machine.freq_ghz)
                                                 + stall) + 1, fault_ins * nf)
        s.counters.busy(cpu, "task_numa_fault", int(nf * nb.TASK_NUMA_FAULT[0] / s.machine.freq_ghz) + 1,
                        nb.TASK_NUMA_FAULT[1] * nf)
        remote = fnid != here
        moved_any = False
        failed = 0
        migrated = 0
        if np.any(remote):
            ri = fi[remote]
            rt = tau[remote]
            if nb.tiering(s):
                ri, rt = self._promotion_candidates(ri, rt, scan_ms, now, dt, here)
            if len(ri):
                z = s.page_alloc.zones[here]
                ok = int(min(len(ri), max(0, z.free_pages - mmigrate.high_wmark_pages(s, here) - 1)))
                order = np.argsort(rt, kind="stable")
                go = ri[order[:ok]]
                failed = len(ri) - ok
                if ok:
                    kern += self._migrate(cpu, go, nid, here, "migrate_pages")
                    if nb.tiering(s):
                        s.numa_stats["pgpromote_success"] += ok
                    moved_any = True
                    migrated = ok
                if failed:
                    s.numa_stats["numa_migrate_failed"] += failed
                    if nb.tiering(s):
                        kern_d = self.kswapd_demote(here)
                        moved_any = moved_any or kern_d > 0
        nt.faults_private += nf
        nt.locality[1] += nlocal
        nt.locality[0] += nf - nlocal
        nt.locality[2] += failed
        nt.pages_migrated += migrated
        return kern, nf, moved_any

    def _touched_protnone(self, rng: np.random.Generator, prot: np.ndarray,
                          a_est: float) -> tuple[np.ndarray, np.ndarray]:
        """The protnone pages touched among ``a_est`` accesses, and the position (0..1) of each one's first
        access in the chunk. Page i's accesses are a Poisson stream of mean ``a p_i``. Where that mean is at
        least 0.05 (the pattern's middle, an interval for a unimodal pattern) every protnone page is drawn;
        in the tails, where most protnone pages are, the tails' accesses are drawn instead (their number
        Poisson, each page by p_i, each at a uniform position) and those that hit a protnone page fault:
        the same law (thinning), at a cost that follows the accesses, not the pages."""
        p_ = self.probs
        lo, hi = 0, len(p_)
        cum = self.__dict__.get("_cum")
        if cum is None and self.unimodal():
            cum = self.__dict__["_cum"] = np.cumsum(p_)
        if cum is not None:
            cut = 0.05 / max(a_est, 1e-300)
            left = p_[: len(p_) // 2]
            lo = int(np.searchsorted(left, cut))
            hi = len(p_) - int(np.searchsorted(p_[::-1][: len(p_) - len(p_) // 2], cut))
            hi = max(hi, lo)
        idx = lo + np.flatnonzero(prot[lo:hi])
        rate = a_est * p_[idx]
        u = rng.random(len(idx))
        hit = u < -np.expm1(-rate)
        fi = idx[hit]
        tau = -np.log1p(-u[hit]) / np.maximum(rate[hit], 1e-300)
        if cum is not None and (lo > 0 or hi < len(p_)):
            m_lo = float(cum[lo - 1]) if lo else 0.0
            m_hi = float(cum[-1] - cum[hi - 1]) if hi < len(p_) else 0.0
            k = int(rng.poisson(a_est * (m_lo + m_hi)))
            if k:
                x = rng.random(k) * (m_lo + m_hi)
                x = np.where(x < m_lo, x, x - m_lo + float(cum[hi - 1]))
                pg = np.minimum(np.searchsorted(cum, x, side="right"), len(p_) - 1)
                pos = rng.random(k)
                order = np.argsort(pos, kind="stable")
                pg, pos = pg[order], pos[order]
                first = np.unique(pg, return_index=True)[1]
                pg, pos = pg[first], pos[first]
                keep = prot[pg]
                fi = np.concatenate([fi, pg[keep]])
                tau = np.concatenate([tau, pos[keep]])
        return fi, tau

    def unimodal(self) -> bool:
        """The pattern's page probabilities rise to the middle and fall after it (normal, normal_ih)."""
        p_ = self.probs[: self.npages]
        h = len(p_) // 2
        tol = 1e-7 * float(p_.max()) if len(p_) else 0.0  # float noise at the flat top
        return bool(len(p_) > 2 and np.all(np.diff(p_[:h]) >= -tol) and np.all(np.diff(p_[h:]) <= tol)
                    and self.npages == self.mappages and not np.all(p_ == p_[0]))

    def _promotion_candidates(self, ri: np.ndarray, rt: np.ndarray, scan_ms: np.ndarray, now: int, dt: int,
                              dst: int) -> tuple[np.ndarray, np.ndarray]:
        """``should_numa_migrate_memory`` in the tiering mode for slow-tier pages:
        all pass when ``pgdat_free_space_enough``; else those whose hint-fault
        latency is under the hot threshold, then the per-node rate limit
        (``numa_promotion_rate_limit``: candidates counted in 1 s windows)."""
        s = self.s
        s.numa_stats["pgpromote_candidate"] += len(ri)
        if nb.pgdat_free_space_enough(s, dst):
            return ri, rt
        t_ms = (now + rt * dt) / MS
        hot = (t_ms - scan_ms[ri]) < int(s.policy("numa_balancing_hot_threshold_ms"))
        ri, rt = ri[hot], rt[hot]
        if not len(ri):
            return ri, rt
        w = s.numa_promote_rl.setdefault(dst, nb.PromoteRate(now / MS))
        limit = int(s.policy("numa_balancing_promote_rate_limit_mbps")) << (20 - 12)
        if now / MS - w.start_ms > 1000:
            w.start_ms = now / MS
            w.nr_cand = 0
        allowed = max(0, limit - w.nr_cand)
        w.nr_cand += len(ri)
        order = np.argsort(rt, kind="stable")[:allowed]
        return ri[order], rt[order]

    def _migrate(self, cpu: int, pages: np.ndarray, nid: np.ndarray, dst: int, func: str) -> float:
        """``migrate_pages`` of ``pages`` (indices into ``nid``) to ``dst``: the
        per-page path of mm/migrate.py and a 4 KiB copy at one core's streaming
        rate (``core_clear_gbs``); the source pages go back to their zones."""
        s = self.s
        m = s.machine
        n = len(pages)
        src = np.bincount(nid[pages].astype(np.int64), minlength=len(m.nodes))
        for node, k in enumerate(src.tolist()):
            if k:
                s.page_alloc.zones[node].free_pages += k
        s.page_alloc.zones[dst].free_pages -= n
        nid[pages] = dst
        path_ns = n * mmigrate.MIGRATE_PATH[0] / m.freq_ghz
        copy_ns = n * PAGE / m.cost.core_clear_gbs
        s.counters.busy(cpu, func, int(path_ns) + 1, n * mmigrate.MIGRATE_PATH[1])
        s.counters.busy(cpu, "migrate_page_copy", int(copy_ns) + 1, 0)
        v = s.counters.vm[cpu]
        v[int(VmEvent.PGMIGRATE_SUCCESS)] += n
        v[int(VmEvent.NUMA_PAGES_MIGRATED)] += n
        return float(path_ns + copy_ns)

    def kswapd_demote(self, node: int) -> float:
        """kswapd on ``node`` (tiering): demote the coldest pmbench pages of the
        node to its socket's PMEM node until the free count reaches the
        promotion watermark. Charged to ``kswapd`` on the node's last CPU (an
        idle one). Returns the ns charged."""
        s = self.s
        m = s.machine
        z = s.page_alloc.zones[node]
        promo = z.wmark_high + (z.wmark_high - z.wmark_low)
        want = promo - z.free_pages
        if want <= 0:
            return 0.0
        targets = [n for n in range(len(m.nodes)) if n not in cpu_nodes(m) and m.nodes[n].socket ==
                   m.nodes[node].socket and m.nodes[n].mem_type is MemoryType.PMEM]
        if not targets:
            return 0.0
        dst = targets[0]
        procs = [q for q in self.procs if "dense" in q]
        order = self.__dict__.get("_cold_order")
        if order is None:  # the pages from the least to the most accessed (the same for every process)
            order = self.__dict__["_cold_order"] = np.argsort(self.probs, kind="stable").astype(np.int32)
        kcpu = max(cc for cc in range(m.ncpus) if m.cpu_node(cc) == node)
        ns = 0.0
        left = int(want)
        # the inactive tail: each process's coldest pages on the node, the processes taken in turn
        picks = []
        for q in procs:
            nid = q["dense"].nid[q["page0"]:q["page0"] + self.mappages]
            sel = order[np.flatnonzero(nid[order] == node)[:left]]
            picks.append((q, nid, sel))
        share = -(-left // max(1, sum(1 for _q, _n, sel in picks if len(sel))))
        done = 0
        for _q, nid, sel in picks:
            take = sel[: min(share, left - done)]
            if len(take):
                ns += self._migrate(kcpu, take, nid, dst, "kswapd [demote]")
                done += len(take)
        s.numa_stats["pgdemote_kswapd"] = s.numa_stats.get("pgdemote_kswapd", 0) + done
        for q in procs:
            q["nid_dirty"] = True
        return ns


def run_metrics(system: Any, p: dict[str, Any]) -> dict[str, float]:
    st = system.workload_state
    run: LkpRun = st["lkp"]
    n = st["accesses"] or 1
    out: dict[str, float] = {
        "pmbench.latency_us": round(st["lat_sum_ns"] / n / 1e3, 6),
        "pmbench.accesses": float(st["accesses"]),
        "pmbench.throughput": round(st["accesses"] / run.window_s, 1),
        "pmbench.throughput.aps": round(st["accesses"] / run.window_s, 1),
        "pmbench.window_s": round(run.window_s, 3),
        "pmbench.processes_started": float(len(run.procs)),
        "pmbench.processes_failed": float(len(st["failed"])),
        "pmbench.window_start_s": float(run.t0_s),
    }
    for k, c in enumerate(st["hist"]):
        if c:
            out[f"pmbench.hist.2^({k},{k + 1})ns"] = float(c)
    m = system.machine
    for pr in run.procs:
        if "dense" not in pr:
            continue
        nid = pr["dense"].nid[pr["page0"]:pr["page0"] + run.mappages]
        cnt = np.bincount(np.maximum(nid, 0).astype(np.int64), minlength=len(m.nodes))
        for node, k in enumerate(cnt.tolist()):
            key = f"pmbench.pages_node{node}"
            out[key] = out.get(key, 0.0) + float(k)
    if "eatmem" in st:
        out["eatmem.pages"] = float(st["eatmem"]["pages"])
    out["autonuma.scan_share_pct"] = 100 * nb.scan_share(system)
    for k, v in system.numa_stats.items():
        out[f"autonuma.{k}"] = float(v)
    periods = [pr["worker"].data["numa"].scan_period_ms for pr in run.procs if "worker" in pr
               and "numa" in pr["worker"].data]
    if periods:
        out["autonuma.scan_period_ms.mean"] = float(sum(periods) / len(periods))
    return out


