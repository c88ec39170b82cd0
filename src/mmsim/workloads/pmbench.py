"""pmbench (Jisoo Yang, Intel; used in seeds/002): ``pmbench [-m MAPSIZE]
[-s SETSIZE] [-p PATTERN] [-e SHAPE] [-r RATIO] [-j JOBS] [-d DELAY] [-c]
DURATION``.

From pmbench's source (pmbench.c, pattern.c, doc/pmbench.1): the main
thread ``mmap``s ``mapsize`` MiB (anonymous, private) and starts ``jobs``
threads sharing it; each thread keeps its own pattern generator drawing page
numbers in ``[0, setsize pages)``: ``linear`` (stride ``shape``, with
phase wrap-around), ``uniform``, ``normal`` (Box-Muller, mean ``n/2``,
standard deviation ``shape`` pages; out-of-range draws map to ``n/2``) or
``pareto`` (bounded Pareto on ``[1, n]`` with index ``shape``). Each access
touches one word at a random offset in the page, a read with probability
``ratio`` %, timed by ``rdtscp`` on both sides, then busy-waits ``delay``
cycles. Unless ``-c``, a warm-up of the pattern's own length (linear and
normal: n, uniform: 4n, pareto: 8n accesses) runs first, unmeasured. The
report: per thread the net average access latency (bench mean minus the
pattern-generation mean) and a log2 latency histogram.

Simulation: accesses run in numpy batches (never a Python call per access).
A batch stops at the first access that needs the kernel (a page not yet
present, or a NUMA hinting PTE/PMD), which goes through ``handle_mm_fault``
as one timed access. Each access references one 64-byte line through the
LLC model (the byte clock and capacity rule of ``machine/llc.py``, at line
granularity): a hit costs the LLC latency, a miss the idle latency of the
page's node from the CPU (PMEM's own latency, SLIT-scaled when remote).
``rdtscp`` serialises, so misses never overlap. NUMA balancing's
``task_tick_numa`` is checked at each return to user space (every batch or
fault); its ``task_numa_work`` then runs in the thread.

The mmsim extras ``mempolicy`` / ``nodes`` / ``mpol_flags`` are what
``numactl --membind/--interleave/--preferred`` would set; ``basecpu`` places
thread i on CPU ``basecpu + i``. ``duration`` accepts fractions of a second
(pmbench takes whole seconds).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import numpy as np

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.machine.model import MemoryType
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES
from mmsim.mm import memory
from mmsim.mm.costs import path
from mmsim.mm.mempolicy import make_policy, set_vma_policy
from mmsim.mm.mmap import MmStruct
from mmsim.mm.mprotect import mem_latency_ns
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, dense_numa
from mmsim.sched import numa_balancing
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, register

PAGE = 4096
LINE = 64
LINES_PER_PAGE = PAGE // LINE
BATCH = 4096  # accesses per numpy batch (~1-2 ms of simulated time)
# Cycles per access besides the memory reference: two rdtscp (~32 cycles each on Skylake: Agner Fog's
# instruction tables), the histogram update and loop (~15, estimate), plus the pattern generator,
# estimated from pattern.c: an LCG step (~10), Box-Muller per value (two LCG draws, log, sqrt, a
# division, halved: two values per round, ~60), bounded Pareto (pow, ~80), linear (~5).
RDTSCP_PAIR_CYC = 64
HISTO_LOOP_CYC = 15
PATTERN_CYC = {"linear": 5, "uniform": 10, "normal": 60, "pareto": 80}
WARMUP_RUNS = {"linear": 1, "uniform": 4, "normal": 1, "pareto": 8}  # pattern.c get_warmup_run, x n
NBUCKETS = 40
USER_INSNS = 40  # instructions per access of pmbench's histo loop (estimate, with the generator)


def parse_duration(v: str) -> float:
    d = float(str(v))
    if not d > 0 or d > 3600:
        raise ValueError
    return d


def parse_exit(v: str) -> float:
    d = float(str(v))
    if not d >= 0:
        raise ValueError
    return d


def parse_shape(v: str) -> float:
    d = float(str(v))
    if not d > 0:
        raise ValueError
    return d


def parse_nodes(v: str) -> str:
    s = str(v).strip()
    if s and not all(p.strip().isdigit() for p in s.split(",")):
        raise ValueError
    return s


class PatternGen:
    """One thread's page-number generator (pattern.c), vectorised."""

    def __init__(self, pattern: str, n: int, shape: float, rng: np.random.Generator) -> None:
        self.pattern = pattern
        self.n = n
        self.shape = shape
        self.rng = rng
        self.i = 0
        self.phase = 0
        self.stride = max(1, int(shape))

    def draw(self, k: int) -> np.ndarray:
        n = self.n
        if self.pattern == "uniform":
            return np.asarray(self.rng.integers(0, n, k), dtype=np.int64)
        if self.pattern == "normal":
            y = self.rng.standard_normal(k) * int(self.shape) + n // 2
            out: np.ndarray = y.astype(np.int64)
            out[(y < 0) | (out >= n)] = n // 2
            return out
        if self.pattern == "pareto":
            a = self.shape
            u = self.rng.random(k)
            u[u == 0] = 1.0
            val = (1.0 - u * (1.0 - (1.0 / n) ** a)) ** (-1.0 / a)
            return np.asarray(np.minimum(val.astype(np.int64) - 1, n - 1), dtype=np.int64)
        return self._linear(k)

    def _linear(self, k: int) -> np.ndarray:
        parts = []
        while k > 0:
            left = -(-(self.n - self.i) // self.stride)
            m = min(k, left)
            parts.append(self.i + self.stride * np.arange(m, dtype=np.int64))
            self.i += self.stride * m
            k -= m
            if self.i >= self.n:
                self.phase = (self.phase + 1) % self.stride
                self.i = self.phase
        return np.concatenate(parts)


class Pmbench:
    name = "pmbench"
    description = "pmbench: timed single-word accesses over a mapped set by a pattern; latency and histogram"
    params = {
        "mapsize": ParamInfo(256, "-m: map size in MiB", parse_int(1, 1 << 22), "an integer MiB >= 1"),
        "setsize": ParamInfo(128, "-s: working-set size in MiB (<= mapsize)", parse_int(1, 1 << 22),
                             "an integer MiB >= 1"),
        "pattern": ParamInfo("uniform", "-p: page access pattern",
                             parse_choice("linear", "uniform", "normal", "pareto"),
                             "linear, uniform, normal, pareto"),
        "shape": ParamInfo(1.00001, "-e: linear stride, normal stdev (pages), pareto index", parse_shape,
                           "a number > 0"),
        "read_pct": ParamInfo(50, "-r: read percentage (0 = write only, 100 = read only)", parse_int(0, 100),
                              "an integer 0..100"),
        "jobs": ParamInfo(1, "-j: worker threads", parse_int(1), "an integer >= 1"),
        "duration": ParamInfo(5.0, "DURATION in seconds (pmbench requires it; mmsim default 5)", parse_duration,
                              "seconds, > 0 and <= 3600"),
        "delay": ParamInfo(0, "-d: busy-wait cycles between accesses", parse_int(0), "an integer >= 0"),
        "cold": ParamInfo(0, "-c: 1 = no warm-up", parse_int(0, 1), "0 or 1"),
        "mempolicy": ParamInfo("default", "numactl policy of the map: default, bind, interleave, preferred",
                               parse_choice("default", "bind", "interleave", "preferred"),
                               "default, bind, interleave, preferred"),
        "nodes": ParamInfo("", "numactl node list for the policy, e.g. 0,2", parse_nodes,
                           "comma-separated node ids"),
        "mpol_flags": ParamInfo("none", "numa_balancing = MPOL_F_NUMA_BALANCING (bind, v5.12+)",
                                parse_choice("none", "numa_balancing"), "none, numa_balancing"),
        "basecpu": ParamInfo(0, "thread i runs on CPU basecpu + i", parse_int(0), "an integer >= 0"),
        "memhog": ParamInfo(0, "percent of every DRAM node's memory held by another process (memhog) "
                            "before pmbench starts", parse_int(0, 100), "an integer 0..100"),
        "memhog_exit": ParamInfo(0.0, "seconds after the start when memhog exits and frees its memory (0: never)",
                                 parse_exit, "seconds >= 0"),
    }

    def command(self, p: dict[str, Any]) -> str:
        cmd = (f"pmbench -m {p['mapsize']} -s {p['setsize']} -p {p['pattern']} -e {p['shape']:g} "
               f"-r {p['read_pct']} -j {p['jobs']} -d {p['delay']}{' -c' if p['cold'] else ''} {p['duration']:g}")
        if p["memhog"]:
            hog = f"numactl -m <DRAM nodes> memhog {p['memhog']}%"
            if p["memhog_exit"]:
                hog = f"timeout {p['memhog_exit']:g} {hog}"
            cmd = f"{hog} & {cmd}"
        if p["mempolicy"] != "default":
            flag = {"bind": "--membind", "interleave": "--interleave", "preferred": "--preferred"}[p["mempolicy"]]
            cmd = f"numactl {flag}={p['nodes']} {cmd}"
        return cmd

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        if p["setsize"] > p["mapsize"]:
            raise UserError("-p setsize", p["setsize"], f"at most mapsize ({p['mapsize']} MiB)")
        if p["basecpu"] + p["jobs"] > m.ncpus:
            raise UserError("-p jobs", p["jobs"], f"at most {m.ncpus - p['basecpu']} on {m.name} (one CPU each)")
        pol = make_policy(m, p["mempolicy"], p["nodes"], p["mpol_flags"])
        if p["memhog"]:
            # `numactl -m <DRAM nodes> memhog SIZE` run first (Huang Ying's tiering test scripts do this to
            # push a benchmark's memory into PMEM): those pages are simply taken off the DRAM zones.
            taken = {}
            for n, nd in enumerate(m.nodes):
                if nd.mem_type is MemoryType.DRAM:
                    z = system.page_alloc.zones[n]
                    taken[n] = z.free_pages * p["memhog"] // 100
                    z.free_pages -= taken[n]
            # what is left above the min watermarks (__alloc_pages' last resort) must hold the working set
            # and its PTE pages, else the kernel would OOM-kill at a fault: refused here, not simulated
            left = sum(max(0, z.free_pages - z.wmark_min) for z in system.page_alloc.zones)
            need = (p["setsize"] << 20) // PAGE
            need += -(-need // 512)
            if left < need:
                raise UserError("-p memhog", p["memhog"], f"a percentage that leaves {need} pages (-p setsize and its "
                                f"page tables) above the min watermarks of {m.name} (leaves {left})")
            if p["memhog_exit"]:
                # `kill -9 $memhog` (the promotion test script): its pages go back to the free lists.
                def hog_exit(_: Any) -> None:
                    for n, k in taken.items():
                        system.page_alloc.zones[n].free_pages += k

                system.engine.call_at(int(p["memhog_exit"] * 1e9), hog_exit)
        main = Task(0, "pmbench", cpu=p["basecpu"])
        mm = MmStruct(system, home_cpu=p["basecpu"])
        main.mm = mm
        system.workload_state = {"done": 0, "hist": np.zeros(NBUCKETS, dtype=np.int64), "lat_sum_ns": 0.0,
                                 "accesses": 0, "policy": pol}
        system.sched.spawn(main, self._main(system, main, p))
        system.start_vmstat_timer(lambda: main.state == "done")

    def _main(self, system: Any, main: Task, p: dict[str, Any]) -> Generator[Any, Any, None]:
        st = system.workload_state
        mm: MmStruct = main.mm
        if numa_balancing.enabled(system):
            numa_balancing.init_task(system, main, mm)
        vma = yield from mm.do_mmap(main, p["mapsize"] << 20, name="pmbench map")
        set_vma_policy(system, vma, st["policy"])
        first = vma.start >> PMD_SHIFT
        nslots = ((vma.end - 1) >> PMD_SHIFT) - first + 1
        dense = dense_numa(mm.pgtables, first, nslots)
        npages = (p["setsize"] << 20) // PAGE
        st["dense"] = dense
        st["page0"] = (vma.start >> 12) - first * 512  # index of the map's first page in the dense arrays
        # LLC stamps of the set's lines (0 = never referenced; else byte clock + 1), allocated lazily by the OS
        st["stamps"] = np.zeros(npages * LINES_PER_PAGE, dtype=np.float32)
        st["scratch"] = np.zeros(npages * LINES_PER_PAGE, dtype=np.int32)  # duplicate detection in a batch
        tasks = []
        for i in range(p["jobs"]):
            ns, ins = path("copy_process", system.machine.freq_ghz)
            yield system.counters.busy(main.cpu, "copy_process", ns, ins)
            t = Task(i + 1, f"pmbench/{i}", cpu=p["basecpu"] + i, mm=mm)
            if numa_balancing.enabled(system):
                numa_balancing.init_task(system, t, mm)
            tasks.append(t)
        for i, t in enumerate(tasks):
            system.sched.spawn(t, self._thread(system, t, vma, p, npages, i))
        while st["done"] < p["jobs"]:
            st["joiner"] = main
            yield system.sched.sleep(main)
        system.elapsed_ns = system.engine.now

    def _thread(self, s: Any, t: Task, vma: Any, p: dict[str, Any], npages: int, i: int) -> Generator[Any, Any, None]:
        st = s.workload_state
        gen = PatternGen(p["pattern"], npages, p["shape"], s.engine.rng.stream(f"pmbench/{i}"))
        rng = s.engine.rng.stream(f"pmbench/{i}/rw")
        if not p["cold"]:
            yield from self._accesses(s, t, vma, p, gen, rng, WARMUP_RUNS[p["pattern"]] * npages, None, False)
        end = s.engine.now + int(p["duration"] * 1e9)
        yield from self._accesses(s, t, vma, p, gen, rng, -1, end, True)
        st["done"] += 1
        if st["done"] == p["jobs"] and "joiner" in st:
            s.sched.wake_up(st["joiner"])

    def _accesses(self, s: Any, t: Task, vma: Any, p: dict[str, Any], gen: PatternGen, rng: np.random.Generator,
                  count: int, end: int | None, measure: bool) -> Generator[Any, Any, None]:
        """``count`` accesses (or until ``end`` ns), batch by batch."""
        st = s.workload_state
        m = s.machine
        mm = t.mm
        dense = st["dense"]
        page0 = st["page0"]
        ghz = m.freq_ghz
        cpu = t.cpu
        over_ns = (RDTSCP_PAIR_CYC + HISTO_LOOP_CYC + PATTERN_CYC[p["pattern"]] + p["delay"]) / ghz
        timer_ns = RDTSCP_PAIR_CYC / 2 / ghz  # the part of the rdtscp pair inside the timed region
        l3 = m.caches[-1].latency_ns
        # memory latency by the page's node; index -1 is the shared zero page (read faults), always cached
        lat_tbl = np.array([mem_latency_ns(s, cpu, n) for n in range(len(m.nodes))] + [l3])
        wr_frac = 1.0 - p["read_pct"] / 100.0
        numa_on = numa_balancing.enabled(s)
        done = 0
        pending = 0
        while (count < 0 or done < count) and (end is None or s.engine.now + pending < end):
            k = BATCH if count < 0 else min(BATCH, count - done)
            pages = gen.draw(k)
            lines = rng.integers(0, LINES_PER_PAGE, k)
            writes = rng.random(k) < wr_frac
            g = pages + page0
            pos = 0
            while pos < k:
                need_idx = pos + np.flatnonzero(self._need(mm, dense, g[pos:], writes[pos:]))
                seg = pos  # start of the pending bulk segment
                rescan = False
                for j in need_idx.tolist():
                    gj = int(g[j])
                    if not self._needs_kernel(mm, dense, gj, bool(writes[j])):
                        continue  # faulted in earlier in this batch: an ordinary access
                    if j > seg:
                        sel = slice(seg, j)
                        pending += self._bulk(s, cpu, st, pages[sel], lines[sel], dense.nid[g[sel]], lat_tbl, l3,
                                              over_ns, timer_ns, s.engine.now + pending, measure)
                        done += j - seg
                    # the faulting access: timed as a whole (fault + the access itself)
                    addr = vma.start + int(pages[j]) * PAGE + int(lines[j]) * LINE
                    t0 = s.engine.now + pending
                    yield from memory.handle_mm_fault(t, mm, vma, addr, bool(writes[j]), pre_ns=pending)
                    pending = 0
                    self._mark_huge(mm, dense, addr)
                    acc = float(lat_tbl[dense.nid[gj]])  # the access itself, after the fault: a miss
                    pending += s.counters.busy(cpu, "pmbench [user]", int(acc + over_ns) + 1, USER_INSNS)
                    if measure:
                        self._record_one(st, s.engine.now - t0 + acc + timer_ns)
                    self._touch_one(s, cpu, st, int(pages[j]) * LINES_PER_PAGE + int(lines[j]), s.engine.now)
                    done += 1
                    seg = j + 1
                    if numa_on and numa_balancing.task_tick_numa(s, t, mm):
                        yield pending
                        pending = 0
                        yield from numa_balancing.task_numa_work(t, mm)
                        rescan = True  # PTEs changed: test the rest of the batch again
                        break
                    if end is not None and s.engine.now + pending >= end:
                        break
                pos = seg
                if rescan:
                    continue
                if (end is None or s.engine.now + pending < end) and pos < k:
                    sel = slice(pos, k)
                    pending += self._bulk(s, cpu, st, pages[sel], lines[sel], dense.nid[g[sel]], lat_tbl, l3,
                                          over_ns, timer_ns, s.engine.now + pending, measure)
                    done += k - pos
                break
            if pending:
                yield pending
                pending = 0
            if numa_on and numa_balancing.task_tick_numa(s, t, mm):
                yield from numa_balancing.task_numa_work(t, mm)
        if pending:
            yield pending

    @staticmethod
    def _need(mm: Any, dense: Any, g: np.ndarray, writes: np.ndarray) -> np.ndarray:
        """Accesses that enter the kernel: page not present, a NUMA hinting PTE
        or PMD, or a write to the zero page (nid -1: a COW fault)."""
        need = ~dense.present[g] | dense.protnone[g] | (writes & (dense.nid[g] < 0))
        hp = mm.pgtables.huge_protnone
        if hp:
            need |= np.isin((g >> 9) + dense.first_slot, list(hp))
        return np.asarray(need, dtype=bool)

    @staticmethod
    def _needs_kernel(mm: Any, dense: Any, gj: int, write: bool) -> bool:
        if not dense.present[gj] or dense.protnone[gj] or (write and dense.nid[gj] < 0):
            return True
        return (gj >> 9) + dense.first_slot in mm.pgtables.huge_protnone

    @staticmethod
    def _mark_huge(mm: Any, dense: Any, addr: int) -> None:
        """A huge mapping: its 512 pages are present for the batch test."""
        slot = addr >> PMD_SHIFT
        if mm.pgtables.pmd.get(slot) == PMD_HUGE:
            k = slot - dense.first_slot
            dense.present[k * 512:(k + 1) * 512] = True
            dense.nid[k * 512:(k + 1) * 512] = mm.pgtables.huge_node.get(slot, 0)

    @staticmethod
    def _touch(s: Any, cpu: int, st: dict[str, Any], pages: np.ndarray, lines: np.ndarray, now: int) -> np.ndarray:
        """Reference the lines through the LLC; returns the hit mask."""
        c = s.cache.of_cpu(cpu)
        clk = c.advance(now)
        ln = pages * LINES_PER_PAGE + lines
        stamps = st["stamps"]
        old = stamps[ln].astype(np.float64)
        n = len(ln)
        own = np.arange(n, dtype=np.float64) * LINE
        hit = (old > 0) & ((clk - (old - 1.0) + own) < c.capacity)
        if n > 1:
            # re-referenced within the batch: still cached. Writing positions in reverse leaves each line's
            # first position in the scratch array, so later occurrences differ from it.
            scratch = st["scratch"]
            order = np.arange(n, dtype=np.int32)
            scratch[ln[::-1]] = order[::-1]
            hit |= scratch[ln] != order
        stamps[ln] = clk + own + LINE + 1.0
        c.add_stream(now, n * LINE, 0)
        nmiss = int(n - np.count_nonzero(hit))
        perf = s.counters.perf[cpu]
        perf[CACHE_REFERENCES] += n
        perf[CACHE_MISSES] += nmiss
        return np.asarray(hit, dtype=bool)

    @staticmethod
    def _touch_one(s: Any, cpu: int, st: dict[str, Any], ln: int, now: int) -> bool:
        """:meth:`_touch` for one line (the access after a fault), in scalar code."""
        c = s.cache.of_cpu(cpu)
        clk = c.advance(now)
        stamps = st["stamps"]
        old = float(stamps[ln])
        hit = old > 0 and clk - (old - 1.0) < c.capacity
        stamps[ln] = clk + LINE + 1.0
        c.add_stream(now, LINE, 0)
        perf = s.counters.perf[cpu]
        perf[CACHE_REFERENCES] += 1
        if not hit:
            perf[CACHE_MISSES] += 1
        return hit

    @staticmethod
    def _record_one(st: dict[str, Any], lat_ns: float) -> None:
        b = min(NBUCKETS - 1, max(0, int(math.log2(max(lat_ns, 1.0)))))
        st["hist"][b] += 1
        st["lat_sum_ns"] += lat_ns
        st["accesses"] += 1

    def _bulk(self, s: Any, cpu: int, st: dict[str, Any], pages: np.ndarray, lines: np.ndarray, nid: np.ndarray,
              lat_tbl: np.ndarray, l3: float, over_ns: float, timer_ns: float, now: int, measure: bool) -> int:
        hit = self._touch(s, cpu, st, pages, lines, now)
        lat = np.where(hit, l3, lat_tbl[nid])
        total = float(lat.sum()) + over_ns * len(lat)
        if measure:
            self._record(st, lat + timer_ns)
        ns: int = s.counters.busy(cpu, "pmbench [user]", int(total) + 1, USER_INSNS * len(lat))
        return ns

    @staticmethod
    def _record(st: dict[str, Any], lat_ns: np.ndarray) -> None:
        """Timed accesses: the log2 histogram (pmbench's 2^(k, k+1) ns rows) and the sum."""
        b = np.minimum(np.frexp(np.maximum(lat_ns, 1.0))[1] - 1, NBUCKETS - 1)  # floor(log2)
        st["hist"] += np.bincount(b, minlength=NBUCKETS)
        st["lat_sum_ns"] += float(lat_ns.sum())
        st["accesses"] += len(lat_ns)

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        n = st["accesses"] or 1
        out: dict[str, float] = {
            "pmbench.latency_us": round(st["lat_sum_ns"] / n / 1e3, 6),  # net average page latency
            "pmbench.accesses": float(st["accesses"]),
            "pmbench.throughput": round(st["accesses"] / p["duration"], 1),  # accesses/s, all threads
        }
        for k, c in enumerate(st["hist"]):
            if c:
                out[f"pmbench.hist.2^({k},{k + 1})ns"] = float(c)
        share = numa_balancing.scan_share(system)
        out["autonuma.scan_share_pct"] = 100 * share  # unrounded: it is small and A/B changes are computed from it
        for k, v in system.numa_stats.items():
            out[f"autonuma.{k}"] = float(v)
        return out


register(Pmbench())
