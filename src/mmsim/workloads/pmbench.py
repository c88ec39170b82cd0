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

``sampling=page`` (patterns uniform, normal, pareto) replaces the
per-access draws by per-page ones: between two points where the kernel can
change the PTEs (a NUMA scan, the end), the number of accesses each page of
the set receives is multinomial with the pattern's exact page
probabilities (:meth:`PatternGen.probs`), and the kernel entries are the
pages touched at least once while not present or protnone, at the first of
their accesses, in position order: the same faults as access by access, at
a cost proportional to the pages, not the accesses. Its LLC model is the
same byte-clock rule under independent references: an access to a line of
page i hits with ``1 - (1 - p_i/64)^W``, W the LLC's capacity in lines
(divided among the threads sharing it); kernel traffic does not shorten W
there, and the accesses between two faults are charged at the previous
chunk's average time per access (the chunk's total is exact). The
latency histogram and averages come from the same mix.

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
from mmsim.mm.mempolicy import make_policy, set_vma_policy
from mmsim.mm.mmap import MmStruct
from mmsim.mm.mprotect import mem_latency_ns
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT, dense_numa
from mmsim.sched import numa_balancing
from mmsim.workloads import libc
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, register
from mmsim.workloads.pmbench_pattern import (
    irwin_hall_cdf,
    normal_ih_shape,
    parse_binding,
    parse_mib,
    parse_window,
    parse_window_start,
)

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
# normal_ih: 12 LCG steps and 12 integer modulos (a 32-bit div, ~26 cycles latency on Skylake: Agner Fog),
# partly overlapped, ~150 (estimate, plausible 100-300).
PATTERN_CYC = {"linear": 5, "uniform": 10, "normal": 60, "normal_ih": 150, "pareto": 80}
WARMUP_RUNS = {"linear": 1, "uniform": 4, "normal": 1, "normal_ih": 1, "pareto": 8}  # pattern.c get_warmup_run, x n
NBUCKETS = 40
# sampling=page: a chunk is drawn again at least every 200 ms of simulated time, so that its per-access time
# estimate follows the page mix (migrations, memhog exits). A modelling choice, not a measured value.
CHUNK_MAX_NS = 200_000_000
TICK_NS = 4_000_000  # HZ = 250 (the v5.4 x86 defconfig): several threads see each other's PTE changes per tick
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
        if self.pattern == "normal_ih":
            m, _sd, shift = normal_ih_shape(n)
            out = np.empty(0, dtype=np.int64)
            while len(out) < k:  # pattern.c normal_ih_get_number: retry above n_user
                y = self.rng.integers(0, max(1, m), (k, 12)).sum(axis=1) // 12 + shift
                out = np.concatenate([out, y[(y >= 0) & (y <= n - 1)]])
            return np.asarray(out[:k], dtype=np.int64)
        if self.pattern == "pareto":
            a = self.shape
            u = self.rng.random(k)
            u[u == 0] = 1.0
            val = (1.0 - u * (1.0 - (1.0 / n) ** a)) ** (-1.0 / a)
            return np.asarray(np.minimum(val.astype(np.int64) - 1, n - 1), dtype=np.int64)
        return self._linear(k)

    def probs(self) -> np.ndarray:
        """The probability of each page per access: exactly the distribution :meth:`draw`
        samples (uniform, normal with pmbench's integer standard deviation, truncation and
        out-of-range rule, bounded Pareto then ``int(val) - 1``). Linear has none (it is a
        deterministic sequence)."""
        n = self.n
        k = np.arange(n + 1, dtype=np.float64)
        if self.pattern == "uniform":
            return np.full(n, 1.0 / n)
        if self.pattern == "normal":
            sd = int(self.shape)
            c = n // 2
            pr = np.zeros(n)
            if sd <= 0:
                pr[c] = 1.0
                return pr
            # y = N(0, sd) + c; page int(y) for 0 <= y < n (y >= 0: truncation is the floor), else c
            z = (k - c) / (sd * math.sqrt(2.0))
            cdf = 0.5 * (1.0 + np.fromiter((math.erf(x) for x in z.tolist()), dtype=np.float64, count=len(z)))
            pr = np.diff(cdf)
            pr[c] += cdf[0] + (1.0 - cdf[n])
            return np.asarray(pr / pr.sum(), dtype=np.float64)
        if self.pattern == "normal_ih":
            # floor(S / 12) + shift, S the sum of 12 draws uniform on 0..m-1: S is Irwin-Hall on m (less 6
            # for the floors on average); page j takes S in [12 (j - shift), 12 (j - shift) + 12); draws
            # above n - 1 are retried (renormalised)
            m, _sd, shift = normal_ih_shape(n)
            edges = (12.0 * (k - shift) + 6.0) / max(1, m)
            pr = np.diff(irwin_hall_cdf(edges))
            return np.asarray(pr / pr.sum(), dtype=np.float64)
        if self.pattern == "pareto":
            a = self.shape
            cnorm = 1.0 - (1.0 / n) ** a
            # val = (1 - u cnorm)^(-1/a) in [1, n]: P(val <= v) = (1 - v^-a) / cnorm; page = int(val) - 1
            v = np.minimum(k + 1.0, float(n))
            cdf = (1.0 - v ** (-a)) / cnorm
            pr = np.diff(cdf)
            return np.asarray(np.maximum(pr, 0.0) / np.maximum(pr, 0.0).sum(), dtype=np.float64)
        raise ValueError("linear has no page probabilities")

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
        "mapsize": ParamInfo(256, "-m: map size in MiB (or 13824m, 14g)", parse_mib(1), "MiB >= 1, e.g. 256 or 13824m"),
        "setsize": ParamInfo(128, "-s: working-set size in MiB (<= mapsize)", parse_mib(1),
                             "MiB >= 1, e.g. 128 or 13824m"),
        "pattern": ParamInfo("uniform", "-p: page access pattern (normal_ih: mean of 12 uniform draws)",
                             parse_choice("linear", "uniform", "normal", "normal_ih", "pareto"),
                             "linear, uniform, normal, normal_ih, pareto"),
        "shape": ParamInfo(1.00001, "-e: linear stride, normal stdev (pages), pareto index", parse_shape,
                           "a number > 0"),
        "read_pct": ParamInfo(50, "-r: read percentage (0 = write only, 100 = read only)", parse_int(0, 100),
                              "an integer 0..100"),
        "ratio": ParamInfo(-1, "-r under LKP's name; when given it overrides read_pct", parse_int(0, 100),
                           "an integer 0..100"),
        "jobs": ParamInfo(1, "-j: worker threads", parse_int(1), "an integer >= 1"),
        "duration": ParamInfo(5.0, "DURATION in seconds (pmbench requires it; mmsim default 5)", parse_duration,
                              "seconds, > 0 and <= 3600"),
        "delay": ParamInfo(0, "-d: busy-wait cycles between accesses", parse_int(0), "an integer >= 0"),
        "cold": ParamInfo(0, "-c: 1 = no warm-up", parse_int(0, 1), "0 or 1"),
        "initialize": ParamInfo(0, "-i: 1 = write every page of the map once before the threads start",
                                parse_int(0, 1), "0 or 1"),
        "sampling": ParamInfo("access", "mmsim: 'access' draws every access; 'page' draws each page's access "
                              "count between kernel events (not for linear)", parse_choice("access", "page"),
                              "access, page"),
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
        # LKP tests/pmbench (see workloads/pmbench_lkp.py): any of these selects the multi-process window model
        "processes": ParamInfo(1, "LKP nr_processes: pmbench processes, each with its own map", parse_int(1, 4096),
                               "an integer 1..4096"),
        "cpu_node_bind": ParamInfo("none", "LKP cpu_node_bind: 'even' runs process i (1..n) under numactl "
                                   "--cpunodebind=i % nr_node (all nodes; a CPU-less node: numactl exits 1)",
                                   parse_binding, "none, even, or even%LIST (e.g. even%0-1: LKP's even-list)"),
        "eatmem": ParamInfo(0, "LKP eatmem_size: MiB (or 47g) mlocked and prefaulted on eatmem_node first",
                            parse_mib(0), "MiB >= 0, e.g. 47g"),
        "eatmem_node": ParamInfo(0, "LKP eatmem mem_node_bind: the node eatmem binds to", parse_int(0, 1023),
                                 "a node id"),
        "window_start": ParamInfo(-1.0, "multi-process model: the simulated window starts here, s into the run "
                                  "(-1: duration / 2, LKP perf-profile's delay)", parse_window_start,
                                  "seconds >= 0, or -1"),
        "window": ParamInfo(10.0, "multi-process model: window length in s (LKP perf-profile's duration; -1: "
                            "one whole scan pass of each process at its steady state)", parse_window,
                            "seconds, > 0 and <= 3600, or -1"),
    }

    @staticmethod
    def lkp_mode(p: dict[str, Any]) -> bool:
        """The multi-process window model (workloads/pmbench_lkp.py) runs this configuration."""
        return bool(p["processes"] > 1 or p["cpu_node_bind"] != "none" or p["eatmem"])

    @staticmethod
    def lkp_mapsize(p: dict[str, Any]) -> None:
        """LKP tests/pmbench: ``[ -z "$mapsize" ] && mapsize="$setsize"``. In the multi-process model a map
        left at pmbench's default (256 MiB) under a larger set is the set's size (pmbench would refuse it)."""
        if Pmbench.lkp_mode(p) and p["mapsize"] == 256 and p["setsize"] > 256:
            p["mapsize"] = p["setsize"]

    @staticmethod
    def read_pct(p: dict[str, Any]) -> int:
        return int(p["ratio"] if p["ratio"] >= 0 else p["read_pct"])

    def command(self, p: dict[str, Any]) -> str:
        if self.lkp_mode(p):
            p = dict(p)
            self.lkp_mapsize(p)
            one = (f"pmbench -s{p['setsize']} -m{p['mapsize']} -p{p['pattern']} -j{p['jobs']}"
                   f"{' -c' if p['cold'] else ''}{' -i' if p['initialize'] else ''} -r{self.read_pct(p)} "
                   f"{p['duration']:g}")
            bind = {"none": "", "even": "numactl --cpunodebind=$((i % nr_node)) -- "}.get(
                p["cpu_node_bind"], f"numactl --cpunodebind=<{p['cpu_node_bind']}[i % n]> -- ")
            eat = (f"numactl --membind={p['eatmem_node']} usemem {p['eatmem']}m --mlock --prefault & "
                   if p["eatmem"] else "")
            return f"{eat}for i in 1..{p['processes']}: {bind}{one} &"
        cmd = (f"pmbench -m {p['mapsize']} -s {p['setsize']} -p {p['pattern']} -e {p['shape']:g} "
               f"-r {self.read_pct(p)} -j {p['jobs']} -d {p['delay']}{' -c' if p['cold'] else ''}"
               f"{' -i' if p['initialize'] else ''} {p['duration']:g}")
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
        self.lkp_mapsize(p)
        if p["setsize"] > p["mapsize"]:
            raise UserError("-p setsize", p["setsize"], f"at most mapsize ({p['mapsize']} MiB)")
        if self.lkp_mode(p):
            from mmsim.workloads.pmbench_lkp import LkpRun

            LkpRun(system, p, self.read_pct(p)).setup()
            return
        if p["basecpu"] >= m.ncpus:
            raise UserError("-p basecpu", p["basecpu"], f"an integer from 0 to {m.ncpus - 1} on {m.name}")
        if p["basecpu"] + p["jobs"] > m.ncpus:
            raise UserError("-p jobs", p["jobs"], f"at most {m.ncpus - p['basecpu']} on {m.name} (one CPU each)")
        if p["sampling"] == "page" and p["pattern"] == "linear":
            raise UserError("-p sampling", "page", "access with pattern=linear (a sequence, not a distribution)")
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
        if p["initialize"]:
            yield from self._initialize(system, main, vma)
        st["dense"] = dense
        st["page0"] = (vma.start >> 12) - first * 512  # index of the map's first page in the dense arrays
        # LLC stamps of the set's lines (0 = never referenced; else byte clock + 1), allocated lazily by the OS
        st["stamps"] = np.zeros(npages * LINES_PER_PAGE, dtype=np.float32)
        st["scratch"] = np.zeros(npages * LINES_PER_PAGE, dtype=np.int32)  # duplicate detection in a batch
        tasks = []
        for i in range(p["jobs"]):
            yield from libc.pthread_create(system, main)  # glibc: the stack's mmap, fault, mprotect; clone
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

    def _initialize(self, s: Any, t: Task, vma: Any) -> Generator[Any, Any, None]:
        """``-i``: the main thread writes every page of the map in order, before
        the jobs start (a write fault per page, then the page's store stream)."""
        for addr in range(vma.start, vma.end, PAGE):
            yield from memory.handle_mm_fault(t, t.mm, vma, addr, True)
            if numa_balancing.enabled(s) and numa_balancing.task_tick_numa(s, t, t.mm):
                yield from numa_balancing.task_numa_work(t, t.mm)

    def _thread(self, s: Any, t: Task, vma: Any, p: dict[str, Any], npages: int, i: int) -> Generator[Any, Any, None]:
        st = s.workload_state
        gen = PatternGen(p["pattern"], npages, p["shape"], s.engine.rng.stream(f"pmbench/{i}"))
        rng = s.engine.rng.stream(f"pmbench/{i}/rw")
        acc = self._accesses_paged if p["sampling"] == "page" else self._accesses
        if not p["cold"]:
            yield from acc(s, t, vma, p, gen, rng, WARMUP_RUNS[p["pattern"]] * npages, None, False)
        end = s.engine.now + int(p["duration"] * 1e9)
        yield from acc(s, t, vma, p, gen, rng, -1, end, True)
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
        wr_frac = 1.0 - self.read_pct(p) / 100.0
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

    def _accesses_paged(self, s: Any, t: Task, vma: Any, p: dict[str, Any], gen: PatternGen,
                        rng: np.random.Generator, count: int, end: int | None,
                        measure: bool) -> Generator[Any, Any, None]:
        """``count`` accesses (or until ``end`` ns), sampled per page: see the module docstring.

        One chunk runs from now to the next point where the kernel can change
        the PTEs behind the thread's back (the next possible ``task_numa_work``,
        the end, at most :data:`CHUNK_MAX_NS`; with several threads one tick).
        Its ``k`` accesses are split over the pages by a multinomial draw with
        the pattern's page probabilities, the writes among each page's accesses
        by a binomial. A page that needs the kernel (not present, a hinting PTE
        or PMD, the zero page written) faults at its first access (the first of
        ``c`` uniform positions, ``1 - U^(1/c)``), a zero page mapped by a read
        fault once more at its first write; the faults run in position order
        through ``handle_mm_fault``, the accesses between them as user time."""
        st = s.workload_state
        m = s.machine
        mm = t.mm
        dense = st["dense"]
        page0 = st["page0"]
        cpu = t.cpu
        ghz = m.freq_ghz
        over_ns = (RDTSCP_PAIR_CYC + HISTO_LOOP_CYC + PATTERN_CYC[p["pattern"]] + p["delay"]) / ghz
        timer_ns = RDTSCP_PAIR_CYC / 2 / ghz
        l3 = m.caches[-1].latency_ns
        nnodes = len(m.nodes)
        lat_tbl = np.array([mem_latency_ns(s, cpu, n) for n in range(nnodes)] + [l3])
        wr_frac = 1.0 - self.read_pct(p) / 100.0
        numa_on = numa_balancing.enabled(s)
        pr = st.setdefault("probs", {}).get(p["pattern"])
        if pr is None:
            pr = st["probs"][p["pattern"]] = gen.probs()
        npg = len(pr)
        # LLC hit probability of an access to page i (independent references; the byte-clock rule of
        # machine/llc.py): its line was referenced within the last W line-sized accesses of the threads
        # sharing this LLC, W = capacity / 64 / sharers: 1 - (1 - p_i / 64)^W.
        c = s.cache.of_cpu(cpu)
        sharers = sum(1 for i in range(p["jobs"]) if s.cache.of_cpu(p["basecpu"] + i) is c)
        w_lines = c.capacity / LINE / max(1, sharers)
        lq = np.log1p(-pr / LINES_PER_PAGE)
        runs = st.setdefault("paged_accesses", {})  # accesses drawn so far per thread (warm-up included)
        st.setdefault("paged_credit", {})
        gidx = np.arange(npg, dtype=np.int64) + page0
        chunk_max = CHUNK_MAX_NS if p["jobs"] == 1 else TICK_NS
        new_lat = float(lat_tbl[:nnodes].mean())  # memory latency of newly faulted pages, a running mean
        est = over_ns + new_lat
        nnew = 0
        done = 0
        while (count < 0 or done < count) and (end is None or s.engine.now < end):
            now = s.engine.now
            horizon = now + chunk_max
            if end is not None:
                horizon = min(horizon, end)
            if numa_on:
                horizon = min(horizon, max(numa_balancing.next_tick_ns(s, t, mm), now + TICK_NS))
            # a cold cache holds only what was referenced since the start: W is at most the accesses so far
            # (taken at the middle of the chunk)
            k0 = max(1, int((horizon - now) / est))
            if count >= 0:
                k0 = min(k0, count - done)
            hitp = -np.expm1(min(w_lines, runs.get(t.tid, 0) + k0 / 2) * lq)
            # ns per access expected at the pages' current state (a page not yet present, or the zero page
            # while there are writes: at the average latency of the pages faulted in so far)
            nid_all = dense.nid[gidx]
            lat_pg = np.where(dense.present[gidx] & ((nid_all >= 0) | (wr_frac == 0)), lat_tbl[nid_all], new_lat)
            est = over_ns + float(pr @ (hitp * l3 + (1.0 - hitp) * lat_pg))
            k = max(1, int((horizon - now) / est))
            if count >= 0:
                k = min(k, count - done)
            cnt = rng.multinomial(k, pr)
            ti = np.flatnonzero(cnt)
            tc = cnt[ti]
            gt = gidx[ti]
            wr = rng.binomial(tc, wr_frac)
            pres = dense.present[gt]
            need = ~pres | dense.protnone[gt] | (pres & (dense.nid[gt] < 0) & (wr > 0))
            hp = mm.pgtables.huge_protnone
            if hp:
                need |= np.isin((gt >> 9) + dense.first_slot, list(hp))
            ni = np.flatnonzero(need)
            nc, nw = tc[ni], wr[ni]
            zero_w = pres[ni] & (dense.nid[gt[ni]] < 0) & ~dense.protnone[gt[ni]]
            # first access: position and type (a zero page present already faults at its first write)
            first_w = np.where(zero_w, True, rng.random(len(ni)) * nc < nw)
            pos = np.where(zero_w, 1.0 - rng.random(len(ni)) ** (1.0 / np.maximum(nw, 1)),
                           1.0 - rng.random(len(ni)) ** (1.0 / nc))
            # a read fault on a new page may map the zero page: its first write (the first of the
            # remaining writes, uniform after the first access) faults again if so
            sec = np.flatnonzero(~pres[ni] & ~first_w & (nw > 0))
            pos2 = pos[sec] + (1.0 - pos[sec]) * (1.0 - rng.random(len(sec)) ** (1.0 / nw[sec]))
            ev_pos = np.concatenate([pos, pos2]) * k
            ev_g = np.concatenate([gt[ni], gt[ni][sec]])
            ev_w = np.concatenate([first_w, np.ones(len(sec), dtype=bool)])
            order = np.argsort(ev_pos, kind="stable")
            seg_charged = 0.0  # user time charged for the accesses between faults (at the estimate)
            at = 0.0  # accesses accounted for so far
            nfault = 0
            pending = 0
            tick_due = False
            present, protnone, nid = dense.present, dense.protnone, dense.nid
            first_slot = dense.first_slot
            offs = (rng.integers(0, LINES_PER_PAGE, len(order)) * LINE).tolist()
            for x, gj, wj, off in zip(ev_pos[order].tolist(), ev_g[order].tolist(), ev_w[order].tolist(), offs,
                                      strict=True):
                if present[gj] and not protnone[gj] and not (wj and nid[gj] < 0) and not (
                        hp and (gj >> 9) + first_slot in hp):
                    continue  # the first fault of this chunk already mapped it for writing
                seg = x - at if x > at else 0.0
                seg_ns = seg * est
                tnow = s.engine.now + pending
                c.advance(tnow)
                c.add_stream(tnow, seg * LINE, int(seg_ns))
                pending += s.counters.busy(cpu, "pmbench [user]", int(seg_ns) + 1, int(USER_INSNS * seg))
                seg_charged += seg_ns
                at += seg + 1.0
                addr = vma.start + (gj - page0) * PAGE + off
                t0 = s.engine.now + pending
                yield from memory.handle_mm_fault(t, mm, vma, addr, wj, pre_ns=pending)
                pending = 0
                self._mark_huge(mm, dense, addr)
                hp = mm.pgtables.huge_protnone
                nj = int(nid[gj])
                acc = float(lat_tbl[nj])  # the access itself, after the fault: a miss
                pending += s.counters.busy(cpu, "pmbench [user]", int(acc + over_ns) + 1, USER_INSNS)
                if measure:
                    self._record_one(st, s.engine.now - t0 + acc + timer_ns)
                if nj >= 0:
                    nnew += 1
                    new_lat += (acc - new_lat) / nnew
                nfault += 1
                if numa_on and numa_balancing.task_tick_numa(s, t, mm):
                    tick_due = True  # the kernel may change PTEs now: the rest of the chunk waits for it
                    break
            c.advance(s.engine.now + pending)
            c.add_stream(s.engine.now + pending, nfault * LINE, 0)  # the lines of the faulting accesses
            # the chunk ran up to here when a scan became due (the rest is drawn again after it)
            k_run = int(at) if tick_due else k
            rest = k_run - at if not tick_due else 0.0
            # the accesses that did not fault, at their pages' final state, hits by the IRM probability
            bulk_total = max(0, k_run - nfault)
            hits = rng.binomial(tc, hitp[ti])
            nid_t = dense.nid[gt].astype(np.int64)
            scale = bulk_total / k
            miss_by_node = np.rint(np.bincount(np.where(nid_t < 0, nnodes, nid_t), weights=(tc - hits) * scale,
                                               minlength=nnodes + 1)).astype(np.int64)
            miss_by_node[nnodes] = 0  # the zero page (read faults): always cached
            nmiss = int(miss_by_node.sum())
            nhit = max(0, bulk_total - nmiss)
            total_ns = float(miss_by_node @ lat_tbl) + nhit * l3 + over_ns * bulk_total
            # charged so far at the estimate: the rest of the chunk's exact total; an overcharge (estimate
            # too high) is taken off the next chunks, so the run's user time is the sum of its accesses
            final_ns = total_ns - seg_charged - st["paged_credit"].get(t.tid, 0.0)
            st["paged_credit"][t.tid] = max(0.0, -final_ns)
            final_ns = max(0.0, final_ns)
            tnow = s.engine.now + pending
            c.advance(tnow)
            c.add_stream(tnow, rest * LINE, int(final_ns))
            pending += s.counters.busy(cpu, "pmbench [user]", int(final_ns) + 1, int(USER_INSNS * rest))
            perf = s.counters.perf[cpu]
            perf[CACHE_REFERENCES] += k_run
            perf[CACHE_MISSES] += nmiss + nfault
            if measure and bulk_total:
                self._record_counts(st, np.append(lat_tbl[:nnodes], l3) + timer_ns,
                                    np.append(miss_by_node[:nnodes], nhit))
            done += k_run
            runs[t.tid] = runs.get(t.tid, 0) + k_run
            if pending:
                yield pending
                pending = 0
            if numa_on and (tick_due or numa_balancing.task_tick_numa(s, t, mm)):
                yield from numa_balancing.task_numa_work(t, mm)

    @staticmethod
    def _record_counts(st: dict[str, Any], lat_ns: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`_record` for ``counts[i]`` accesses of latency ``lat_ns[i]``."""
        b = np.minimum(np.frexp(np.maximum(lat_ns, 1.0))[1] - 1, NBUCKETS - 1)
        st["hist"] += np.bincount(b, weights=counts, minlength=NBUCKETS).astype(np.int64)
        st["lat_sum_ns"] += float(lat_ns @ counts)
        st["accesses"] += int(counts.sum())

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
        if self.lkp_mode(p):
            from mmsim.workloads.pmbench_lkp import run_metrics

            return run_metrics(system, p)
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
