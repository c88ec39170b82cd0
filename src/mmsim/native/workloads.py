"""The native workload registry: the simulator's workload names and
parameter names, executed for real on the host kernel.

This registry does not import the simulated workloads (they may not exist in
a given build); it reuses only :class:`~mmsim.workloads.base.ParamInfo` so
``-p`` parsing and errors behave the same in both modes.

* ``vm-scalability/anon-*``: vm-scalability's ``usemem`` (case-anon-w-seq:
  ``usemem -n N SIZE``; case-anon-w-rand adds ``--random``; case-anon-r-seq
  ``--readonly``; case-anon-cow-seq ``--prealloc --prefault``). Each of
  ``nr_task`` processes maps ``size / nr_task`` bytes and stores (or loads)
  every 8-byte word with usemem's own ``do_rw_once`` loop (native/usemem.c,
  built with ``-O`` as usemem is); each reports its bytes (usemem's accounting, see
  :func:`_usemem`) over the time since usemem started as KB/s (KB = 1024 B),
  and ``vm-scalability.throughput`` is their sum, as LKP sums usemem's lines.
  The sequential cases time the loop in 64 MiB blocks (``usemem_rw_blocks``):
  ``vm-scalability.throughput.best_round`` sums each task's fastest block
  rate in the same units, ``mmsim validate``'s reference (native/validate.py).
* ``vm-scalability/anon-w-seq-hugetlb``: the same with MAP_HUGETLB
  (``usemem -U``) from a pool sized for the run (case-hugetlb sizes
  ``nr_hugepages``).
* ``will-it-scale/page_fault1``: each task, bound to a CPU, loops
  mmap(128 MiB), one store per 4 KiB page, munmap; ops = pages touched;
  ``per_process_ops`` (``per_thread_ops`` in threads mode) is the mean
  per-task ops/s and ``workload`` their sum.
* ``lmbench/bw_unix``: per pair, a writer process sends ``bytes`` per
  iteration in ``msg``-byte writes (lmbench XFER / XFERSIZE) into an AF_UNIX
  stream socketpair, the reader reads them; bandwidth in MB/s with MB = 2^20
  (lmbench bench.h), all pairs together.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmsim.errors import UserError
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, resolve_params
from mmsim.workloads.thp_memscale import parse_bytes as parse_decimal_bytes
from mmsim.workloads.vm_scalability import memparse as parse_size
from mmsim.workloads.vm_scalability import parse_nr_task

HPAGE = 2 << 20
PF1_MEMSIZE = 128 << 20  # will-it-scale tests/page_fault1.c MEMSIZE
XFERSIZE = 64 << 10  # lmbench src/bench.h XFERSIZE
XFER = 10 << 20  # lmbench src/bw_unix.c XFER
MB = 1 << 20  # lmbench src/bench.h MB



# will-it-scale's shared parameters and its two metrics (per-task mean rate, and their sum as "workload").
WIS_TASK_PARAMS = {
    "nr_task": ParamInfo(1, "tasks, each bound to a CPU", parse_int(1, 1024), "an integer 1..1024"),
    "mode": ParamInfo("processes", "processes (own mm each) or threads (one mm)",
                      parse_choice("processes", "threads"), "processes, threads"),
}


BEST_ROUND = ".best_round"  # suffix of the per-task metric taken over each task's fastest round


def _wis_metrics(res: list[dict[str, Any]], mode: str) -> dict[str, float]:
    """will-it-scale's metrics (each task's ops over its run's wall time, averaged over the tasks), and the
    same from each task's fastest timed round (``best_round``: ops / seconds of that round):
    ``will-it-scale.per_process_ops.best_round``, the reference ``mmsim validate`` compares (native/validate.py:
    why)."""
    rates = [r["ops"] / r["seconds"] for r in res]
    per = "per_thread_ops" if mode == "threads" else "per_process_ops"
    out = {f"will-it-scale.{per}": sum(rates) / len(rates), "will-it-scale.workload": sum(rates)}
    best = [r["best_round"] for r in res if r.get("best_round")]
    if len(best) == len(res):
        out[f"will-it-scale.{per}{BEST_ROUND}"] = sum(best) / len(best)
    return out


def _timed_rounds(one_round: Callable[[], None], per: int, loops: int, seconds: float) -> dict[str, float]:
    """Run ``one_round`` (``per`` ops each) at least ``loops`` times and ``seconds`` long; the task's ops, wall
    seconds and its fastest round's rate (``best_round``, :func:`_wis_metrics`)."""
    ops = rounds = 0
    best = 0.0
    t0 = t = time.perf_counter()
    while True:
        one_round()
        ops += per
        rounds += 1
        now = time.perf_counter()
        best = max(best, per / (now - t))
        t = now
        if rounds >= loops and now - t0 >= seconds:
            return {"ops": ops, "seconds": now - t0, "best_round": best}


def parse_seconds(v: str) -> float:
    x = float(v)
    if not 0 <= x <= 600:
        raise ValueError
    return x


Body = Callable[[dict[str, Any], "str | None"], dict[str, float]]


@dataclass(frozen=True)
class NativeWorkload:
    name: str
    description: str
    params: dict[str, ParamInfo]
    body: Body  # (params, thp policy or None) -> metrics; runs in the worker process
    footprint: Callable[[dict[str, Any]], int]  # peak bytes of anonymous memory
    command: Callable[[dict[str, Any]], str]
    hugetlb_pages: Callable[[dict[str, Any]], int] = field(default=lambda p: 0)
    native_only: tuple[str, ...] = ()  # params the simulated workload does not take


NATIVE: dict[str, NativeWorkload] = {}


def register(w: NativeWorkload) -> NativeWorkload:
    NATIVE[w.name] = w
    return w


def get_native(name: str) -> NativeWorkload:
    w = NATIVE.get(name)
    if w is None:
        raise UserError("workload", name, sorted(NATIVE))
    return w


def resolve_native_params(w: NativeWorkload, given: dict[str, str]) -> dict[str, Any]:
    """The simulator's ``resolve_params``: same defaults, parsing and errors."""
    return resolve_params(w, given)  # type: ignore[arg-type]


# -- vm-scalability usemem ---------------------------------------------------------


def nr_tasks(v: str) -> int:
    """``nr_task`` resolved against the CPUs this process may run on."""
    if str(v).endswith("%"):
        return max(1, len(os.sched_getaffinity(0)) * int(str(v)[:-1]) // 100)
    return int(v)


NATIVE_MAX_TASKS = 1024  # host processes one native case may start (the other native workloads' cap)


def parse_native_nr_task(v: str) -> str:
    """:func:`parse_nr_task`, at most :data:`NATIVE_MAX_TASKS` host processes (a percentage is resolved against
    this host's CPUs): the native run forks them for real."""
    s = parse_nr_task(v)
    if nr_tasks(s) > NATIVE_MAX_TASKS:
        raise ValueError
    return s


NR_TASK = ParamInfo("1", "usemem -n: number of processes, or a percentage of the CPUs like 50%",
                    parse_native_nr_task, f"an integer 1..{NATIVE_MAX_TASKS} or a percentage like 50% "
                    f"(at most {NATIVE_MAX_TASKS} processes)")
SIZE = ParamInfo(parse_size("256m"), "total bytes over all tasks, each gets size / nr_task "
                 "(k/m/g = 2^10/2^20/2^30)", parse_size, "a size like 256m, 1g, 4096")
RUNTIME = ParamInfo(300, "usemem -T: seconds before usemem stops early (LKP's runtime)", parse_int(1),
                    "an integer >= 1")


def _per_task(p: dict[str, Any], hugetlb: bool = False, cow: bool = False) -> int:
    """usemem's size argument: size / nr_task (anon-cow-seq-hugetlb: / (nr_task + 1), as its case script)."""
    div = nr_tasks(p["nr_task"]) + (1 if hugetlb and cow else 0)
    per = max(8, int(p["size"]) // div) // 8 * 8
    return -(-per // HPAGE) * HPAGE if hugetlb else per


def _is_hugetlb(op: str) -> bool:
    return op.endswith("hugetlb")


def _is_cow(op: str) -> bool:
    return op.startswith("cow")


def _footprint(op: str) -> Callable[[dict[str, Any]], int]:
    """Peak anonymous memory: the cow parent's mapping plus one private copy per task."""
    extra = 1 if _is_cow(op) else 0
    return lambda p: _per_task(p, _is_hugetlb(op), _is_cow(op)) * (nr_tasks(p["nr_task"]) + extra)


def _hugetlb_pages(op: str) -> Callable[[dict[str, Any]], int]:
    if not _is_hugetlb(op):
        return lambda p: 0
    return lambda p: _footprint(op)(p) // HPAGE


def parse_auto_int(v: str) -> str | int:
    s = str(v).strip()
    if s == "auto":
        return s
    if not s.isdigit():
        raise ValueError
    return int(s)


def overcommit_pages(p: dict[str, Any]) -> int:
    """``nr_overcommit_hugepages``; auto = setup_hugetlb's unit_size / Hugepagesize + nr_task + 1."""
    v = p["nr_overcommit_hugepages"]
    return int(p["size"]) // HPAGE + nr_tasks(p["nr_task"]) + 1 if v == "auto" else int(v)


HUGETLB_PARAMS = {
    "nr_hugepages": ParamInfo(0, "vm.nr_hugepages: natively the persistent pool is grown to at least this "
                              "(never shrunk); the case script leaves it at 0", parse_int(0), "an integer >= 0"),
    "nr_overcommit_hugepages": ParamInfo(
        "auto", "vm.nr_overcommit_hugepages (surplus pages); auto = size / 2 MiB + nr_task + 1 as setup_hugetlb",
        parse_auto_int, "auto or an integer >= 0"),
}


def _usemem(op: str) -> Body:
    """usemem.c as vm-scalability runs it: ``main`` takes ``start_time``; with
    ``--prealloc --prefault`` it maps and populates the region and sets
    ``done_bytes = bytes / 8``; it forks the tasks, which wait for "GO";
    each (``do_unit``) maps its own region and counts ``rw_bytes = bytes / 8``
    for it (the prealloc'd region counts 0), then ``do_rw_once`` adds the bytes
    it reads or writes, stopping after ``-T`` seconds; ``output_statistics``
    prints ``(unit_bytes * 10^6 >> 10) / delta_us`` KB/s with ``delta_us``
    from ``start_time``. The ``bytes / 8`` terms are usemem's own accounting."""

    def body(p: dict[str, Any], thp: str | None) -> dict[str, float]:
        from mmsim.native import tasks, usemem
        from mmsim.native.safety import Skip

        try:
            usemem.lib()  # built (and loaded) before the fork, so every task has it
        except usemem.NoCompiler as e:
            raise Skip(str(e)) from None
        n = nr_tasks(p["nr_task"])
        hugetlb = _is_hugetlb(op)
        nbytes = _per_task(p, hugetlb, _is_cow(op))
        start = time.perf_counter()  # gettimeofday(&start_time); CLOCK_MONOTONIC is shared across fork
        deadline = start + p["runtime"]
        pre = None
        done_bytes = 0
        if _is_cow(op):  # --prealloc --prefault: one populated mapping, COW-shared by the forked tasks
            pre = tasks.map_anon(nbytes, thp, hugetlb=hugetlb)
            tasks.populate_write(pre)
            done_bytes = nbytes // 8

        def task(i: int) -> dict[str, float]:
            m = pre if pre is not None else tasks.map_anon(nbytes, thp, hugetlb=hugetlb, readonly=op == "r-seq")
            rw_bytes = 0 if pre is not None else nbytes // 8
            if op == "w-rand":
                rw_bytes += usemem.rw_once(m, False, deadline, i + 1)
                best = 0.0
            else:  # sequential: timed in blocks, each task's fastest is validate's reference (module docstring)
                done, bps = usemem.rw_blocks(m, op == "r-seq", deadline)
                rw_bytes += done
                best = bps * 9 / 8 / 1024  # usemem's KB/s: unit_bytes count each region's bytes / 8 again
            delta_us = (time.perf_counter() - start) * 1e6
            return {"unit_bytes": done_bytes + rw_bytes, "delta_us": delta_us, "best_round": best}

        try:
            res = tasks.run_tasks(n, task)
        finally:
            if pre is not None:
                pre.close()
        elapsed = time.perf_counter() - start
        kbs = [r["unit_bytes"] * 1e6 / 1024 / r["delta_us"] for r in res]
        best = [r["best_round"] for r in res]
        blocks = {f"vm-scalability.throughput{BEST_ROUND}": sum(best)} if best and all(best) else {}
        return {
            **blocks,
            "vm-scalability.throughput": sum(kbs),
            "vm-scalability.median": statistics.median(kbs),
            "vm-scalability.workload": sum(r["unit_bytes"] for r in res),
            "vm-scalability.time.elapsed_time": elapsed,
            "vm-scalability.nr_task": float(n),
        }

    return body


def _usemem_cmd(op: str, flags: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: (f"usemem -n {nr_tasks(p['nr_task'])} -T {p['runtime']}{flags} "
                      f"{_per_task(p, _is_hugetlb(op), _is_cow(op))}")


_USEMEM = {
    "anon-w-seq": ("w-seq", "", "each process writes its own anonymous mapping, sequentially"),
    "anon-w-rand": ("w-rand", " --random", "each process writes random words of its own anonymous mapping"),
    "anon-r-seq": ("r-seq", " --readonly", "each process reads its untouched anonymous mapping (zero page)"),
    "anon-cow-seq": ("cow", " --prealloc --prefault", "forked processes write a prefaulted parent mapping (COW)"),
    "anon-w-seq-hugetlb": ("hugetlb", " -O -U", "anon-w-seq on MAP_HUGETLB mappings (usemem -O -U)"),
    "anon-cow-seq-hugetlb": ("cow-hugetlb", " --prealloc --prefault -O -U",
                             "anon-cow-seq on a MAP_HUGETLB mapping (hugetlb COW)"),
}

for _case, (_op, _flags, _desc) in _USEMEM.items():
    register(NativeWorkload(
        name=f"vm-scalability/{_case}",
        description=f"usemem{_flags}: {_desc}; KB/s summed over tasks",
        params={"nr_task": NR_TASK, "size": SIZE, "runtime": RUNTIME, **(HUGETLB_PARAMS if _is_hugetlb(_op) else {})},
        body=_usemem(_op),
        footprint=_footprint(_op),
        command=_usemem_cmd(_op, _flags),
        hugetlb_pages=_hugetlb_pages(_op),
    ))


# -- will-it-scale page_fault1 -------------------------------------------------------------


def parse_lm_bytes(v: str) -> int:
    """lmbench's (and the simulator's) sizes: k/m/g = 2^10/2^20/2^30."""
    return parse_size(v)


def _cpu_for(i: int) -> int:
    """Task ``i``'s CPU: the allowed CPUs in order, wrapping (will-it-scale and LKP bind each task)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[i % len(cpus)]


def _page_fault1(p: dict[str, Any], thp: str | None) -> dict[str, float]:
    """Each task, bound to its CPU, loops mmap(memsize) / one store per page / munmap:
    at least ``loops`` rounds and at least ``seconds`` (will-it-scale runs for a
    time, the simulator for ``loops`` rounds; rates are per second either way)."""
    from mmsim.native import tasks

    seconds, memsize, loops = p["seconds"], p["memsize"], p["loops"]

    def task(i: int) -> dict[str, float]:
        os.sched_setaffinity(0, {_cpu_for(i)})  # this task (thread) only

        def one_round() -> None:
            m = tasks.map_anon(memsize, thp)
            tasks.touch_pages(m)
            m.close()

        return _timed_rounds(one_round, -(-memsize // tasks.PAGE), loops, seconds)

    res = tasks.run_tasks(p["nr_task"], task, p["mode"])
    return _wis_metrics(res, p["mode"])


register(NativeWorkload(
    name="will-it-scale/page_fault1",
    description="tasks loop mmap(128 MiB), store one byte per page, munmap; ops = page faults per second",
    params={
        **WIS_TASK_PARAMS,
        "memsize": ParamInfo(PF1_MEMSIZE, "bytes mapped per round (MEMSIZE = 128m)", parse_lm_bytes,
                             "a size like 128m"),
        "loops": ParamInfo(1, "at least this many mmap/write/munmap rounds per task", parse_int(1),
                           "an integer >= 1"),
        "seconds": ParamInfo(2.0, "native only: and at least this long (0: loops only)", parse_seconds,
                             "0..600 seconds"),
    },
    body=_page_fault1,
    footprint=lambda p: int(p["memsize"]) * int(p["nr_task"]),
    command=lambda p: f"page_fault1_{p['mode']} -t {p['nr_task']} (>= {p['loops']} rounds, >= {p['seconds']} s)",
    native_only=("seconds",),
))


# -- will-it-scale malloc1 (issue 22) --------------------------------------------------------

# malloc/free pairs per timed round: 4,000 pairs are ~40 ms on the calibration host (~10 us a pair), the
# length of one page_fault1/2/3 round over 128 MiB and of calibrate's 64 MiB fault passes
MALLOC1_ROUND = 4000


def _malloc1(p: dict[str, Any], thp: str | None) -> dict[str, float]:
    """will-it-scale tests/malloc1.c through the host's own glibc: each task, bound to its CPU, loops
    ``addr = malloc(size); free(addr);`` in C (native/wis.c, 100 pairs per call): glibc mmaps size + a
    page and writes the chunk header, free munmaps it. At least ``loops`` pairs and ``seconds``.
    ``thp`` cannot be emulated per mapping here (glibc does not madvise): the host's THP setting
    applies. (Until session 7 the loop ran in Python through ctypes: 11.0 us of CPU per pair on the
    calibration host against 9.0 us for the C loop.)"""
    from mmsim.native import tasks, usemem
    from mmsim.native.safety import Skip

    try:
        lib = usemem.wis_lib()
    except usemem.NoCompiler as e:
        raise Skip(str(e)) from None
    seconds, size, loops = p["seconds"], p["size"], p["loops"]

    def task(i: int) -> dict[str, float]:
        os.sched_setaffinity(0, {_cpu_for(i)})
        ops = done = 0
        best = 0.0
        t0 = t = time.perf_counter()
        while True:
            if lib.wis_malloc1(size, 100) < 0:
                raise MemoryError(f"malloc({size}) failed")
            ops += 100
            now = time.perf_counter()
            if ops - done >= MALLOC1_ROUND:  # a timed round as long as a 128 MiB page_fault round
                best = max(best, (ops - done) / (now - t))
                done, t = ops, now
            dt = now - t0
            if ops >= loops and dt >= seconds:
                return {"ops": ops, "seconds": dt, "best_round": best}

    res = tasks.run_tasks(p["nr_task"], task, p["mode"])
    return _wis_metrics(res, p["mode"])


register(NativeWorkload(
    name="will-it-scale/malloc1",
    description="tasks loop malloc(128 MiB) / free through the host's glibc; ops = pairs per second",
    params={
        **WIS_TASK_PARAMS,
        "size": ParamInfo(128 << 20, "bytes per malloc (malloc1.c: 128UL*1024*1024)", parse_lm_bytes,
                          "a size like 128m"),
        "loops": ParamInfo(20, "at least this many malloc/free pairs per task", parse_int(1), "an integer >= 1"),
        "warmup": ParamInfo(2, "simulated only (the native loop runs for seconds)", parse_int(0), "an integer >= 0"),
        "seconds": ParamInfo(2.0, "native only: and at least this long (0: loops only)", parse_seconds,
                             "0..600 seconds"),
    },
    body=_malloc1,
    footprint=lambda p: (int(p["size"]) + (2 << 20)) * int(p["nr_task"]),
    command=lambda p: f"malloc1_{p['mode']} -t {p['nr_task']} (>= {p['loops']} pairs, >= {p['seconds']} s)",
    native_only=("seconds",),
))


# -- will-it-scale page_fault2 / page_fault3 (issue 22) ------------------------------------


def _file_fault(shared: bool) -> Body:
    """tests/page_fault2.c / page_fault3.c: each task makes its own shmem file of ``memsize`` (a memfd:
    the same shmem inode a file on tmpfs ``/tmp`` is), then loops mmap (MAP_PRIVATE / MAP_SHARED) / one
    store per page / munmap. ``warmup`` rounds (the first fills the page cache) are not timed."""

    def body(p: dict[str, Any], thp: str | None) -> dict[str, float]:
        import mmap

        from mmsim.native import tasks

        seconds, memsize, loops, warmup = p["seconds"], p["memsize"], p["loops"], p["warmup"]
        flags = mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE

        def task(i: int) -> dict[str, float]:
            os.sched_setaffinity(0, {_cpu_for(i)})
            fd = os.memfd_create(f"willitscale.{i}")
            try:
                os.ftruncate(fd, memsize)

                def one_round() -> None:
                    m = mmap.mmap(fd, memsize, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    tasks.touch_pages(m)
                    m.close()

                for _ in range(warmup):
                    one_round()
                return _timed_rounds(one_round, -(-memsize // tasks.PAGE), loops, seconds)
            finally:
                os.close(fd)

        res = tasks.run_tasks(p["nr_task"], task, p["mode"])
        return _wis_metrics(res, p["mode"])

    return body


def _file_fault_footprint(shared: bool) -> Callable[[dict[str, Any]], int]:
    """The shmem files stay in memory for the whole run; page_fault2's private copies come on top."""
    return lambda p: int(p["memsize"]) * int(p["nr_task"]) * (1 if shared else 2)


def _file_fault_command(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: f"{name}_{p['mode']} -t {p['nr_task']} (>= {p['loops']} rounds, >= {p['seconds']} s)"


for _n, _shared in (("page_fault2", False), ("page_fault3", True)):
    register(NativeWorkload(
        name=f"will-it-scale/{_n}",
        description=f"tasks loop mmap({'MAP_SHARED' if _shared else 'MAP_PRIVATE'}) of their own 128 MiB shmem "
                    "file, store one byte per page, munmap; ops = page faults per second",
        params={
            "nr_task": ParamInfo(1, "tasks, each bound to a CPU", parse_int(1, 1024), "an integer 1..1024"),
            "mode": ParamInfo("processes", "processes (own mm each) or threads (one mm)",
                              parse_choice("processes", "threads"), "processes, threads"),
            "memsize": ParamInfo(PF1_MEMSIZE, "bytes mapped per round (MEMSIZE = 128m)", parse_lm_bytes,
                                 "a size like 128m"),
            "loops": ParamInfo(1, "at least this many counted rounds per task", parse_int(1), "an integer >= 1"),
            "warmup": ParamInfo(1, "rounds per task before counting (the first fills the page cache)",
                                parse_int(0), "an integer >= 0"),
            "seconds": ParamInfo(2.0, "native only: and at least this long (0: loops only)", parse_seconds,
                                 "0..600 seconds"),
            "sample": ParamInfo("auto", "simulation only (fast mode's sampling of threads on mmap_lock): "
                                "ignored on the host", parse_choice("auto", "phases"), "auto, phases"),
        },
        body=_file_fault(_shared),
        footprint=_file_fault_footprint(_shared),
        command=_file_fault_command(_n),
        native_only=("seconds",),
    ))


# -- lmbench bw_unix -----------------------------------------------------------------------


def _bw_unix(p: dict[str, Any], thp: str | None) -> dict[str, float]:
    """lmbench3 bw_unix.c: per pair, the reader writes the byte count to a control pipe,
    the forked writer sends that many bytes in ``msg``-byte writes over an AF_UNIX
    stream socketpair, the reader reads them ``msg`` at a time. ``warmup``
    iterations are untimed, then ``repetitions`` are timed together; bandwidth =
    pairs x repetitions x bytes / the median pair's timed duration, in MB (2^20)
    per second, as the simulated bw_unix reports it."""
    from mmsim.native import tasks

    msg, nbytes = p["msg"], -(-p["bytes"] // p["msg"]) * p["msg"]  # bw_unix.c rounds up to whole writes

    def pair(i: int) -> dict[str, float]:
        rd, wr = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ctl_r, ctl_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # writer: for each count read from the control pipe, send that many bytes
            code = 0
            try:
                os.sched_setaffinity(0, {_cpu_for(2 * i + 1)})
                rd.close()
                os.close(ctl_w)
                out = memoryview(b"\x01" * msg)  # touched buffer, as lmbench's touch(buf, XFERSIZE)
                while len(c := os.read(ctl_r, 8)) == 8:
                    todo = int.from_bytes(c, "little")
                    while todo > 0:
                        todo -= wr.send(out[: min(msg, todo)])
            except OSError:
                pass
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        wr.close()
        os.close(ctl_r)
        os.sched_setaffinity(0, {_cpu_for(2 * i)})
        buf = bytearray(msg)
        start = 0.0
        try:
            for it in range(p["warmup"] + p["repetitions"]):
                if it == p["warmup"]:
                    start = time.perf_counter()
                os.write(ctl_w, nbytes.to_bytes(8, "little"))
                done = 0
                while done < nbytes:
                    n = rd.recv_into(buf, msg)
                    if n <= 0:
                        raise RuntimeError("bw_unix writer went away")
                    done += n
            elapsed = time.perf_counter() - start
        finally:
            os.close(ctl_w)
            rd.close()
            os.waitpid(pid, 0)
        return {"seconds": elapsed}

    res = tasks.run_tasks(p["pairs"], pair)
    d = statistics.median(r["seconds"] for r in res)  # the timed iterations of the median pair
    bw = p["pairs"] * p["repetitions"] * nbytes / d / MB
    return {"lmbench3.AF_UNIX.sock.stream.bandwidth.MB/sec": bw, "bw_unix.timed_seconds": d}


register(NativeWorkload(
    name="lmbench/bw_unix",
    description="lmbench3 bw_unix: P process pairs stream over AF_UNIX sockets; aggregate MB/sec",
    params={
        "pairs": ParamInfo(1, "-P: parallelism (reader/writer process pairs)", parse_int(1, 256), "an integer 1..256"),
        "msg": ParamInfo(XFERSIZE, "-m: bytes per write()/read() (XFERSIZE = 64k)", parse_lm_bytes,
                         "a size like 64k"),
        "bytes": ParamInfo(XFER, "-M: bytes per iteration (XFER = 10m)", parse_lm_bytes, "a size like 10m"),
        "warmup": ParamInfo(1, "untimed iterations per pair", parse_int(0), "an integer >= 0"),
        "repetitions": ParamInfo(3, "timed iterations per pair (lmbench -N)", parse_int(1), "an integer >= 1"),
    },
    body=_bw_unix,
    footprint=lambda p: 4 * int(p["msg"]) * int(p["pairs"]),
    command=lambda p: f"bw_unix -P {p['pairs']} -m {p['msg']} -M {p['bytes']}",
))


# -- thp_memscale ----------------------------------------------------------------------------

GLIBC_MALLOC_HEADER = 16  # glibc: an mmapped chunk carries a 2 * SIZE_SZ header (malloc/malloc.c sysmalloc)




def _thp_memscale(p: dict[str, Any], thp: str | None) -> dict[str, float]:
    from mmsim.native import tasks

    n, nbytes, base = p["threads"], p["bytes"], p["basecpu"]
    hugetlb = p["mapping"] == "hugetlb"
    size = -(-nbytes // HPAGE) * HPAGE if hugetlb else nbytes + GLIBC_MALLOC_HEADER

    def task(i: int) -> dict[str, float]:
        os.sched_setaffinity(0, {base + i})  # runon(basecpu + id): the calling thread only
        m = tasks.map_anon(size, thp, hugetlb=hugetlb)  # malloc above the mmap threshold = an anon mmap
        a = tasks.words(m)
        a.fill(1)  # the whole buffer written once, sequentially
        del a
        m.close()
        return {}

    t0 = time.perf_counter()
    tasks.run_tasks(n, task, p["mode"])
    return {"thp_memscale.elapsed_seconds": time.perf_counter() - t0}


def _thp_memscale_footprint(p: dict[str, Any]) -> int:
    """Bytes of all buffers; also checks that each thread has its CPU (runon fails otherwise)."""
    n = int(p["threads"]) * (-(-int(p["bytes"]) // HPAGE) * HPAGE if p["mapping"] == "hugetlb" else int(p["bytes"]))
    allowed = os.sched_getaffinity(0)
    need = set(range(p["basecpu"], p["basecpu"] + p["threads"]))
    if not need <= allowed:
        raise UserError("-p threads", p["threads"],
                        f"CPUs basecpu..basecpu+threads-1 must exist here (allowed CPUs: {sorted(allowed)})")
    nodes = sorted(int(d.name[4:]) for d in Path("/sys/devices/system/node").glob("node[0-9]*")) or [0]
    if p["basemem"] not in nodes:
        raise UserError("-p basemem", p["basemem"], f"a memory node of this host: {', '.join(map(str, nodes))}")
    return n


register(NativeWorkload(
    name="thp_memscale",
    description="threads each malloc and write their own buffer (SGI thp_memscale); elapsed seconds",
    params={
        "threads": ParamInfo(2, "-c: number of threads (or processes)", parse_int(1), "an integer >= 1"),
        "bytes": ParamInfo(parse_decimal_bytes("64m"), "-b: bytes per thread (k/m/g = 10^3/10^6/10^9)",
                           parse_decimal_bytes, "a size like 512m, 2g, 4096"),
        "mode": ParamInfo("threads", "threads share one mm; processes have their own",
                          parse_choice("threads", "processes"), "threads, processes"),
        "mapping": ParamInfo("thp", "thp: malloc with THP per --set thp; hugetlb: MAP_HUGETLB",
                             parse_choice("thp", "hugetlb"), "thp, hugetlb"),
        "basecpu": ParamInfo(0, "-C: first CPU; thread i runs on basecpu + i", parse_int(0), "an integer >= 0"),
        # -m: as in the simulated workload (mmsim.workloads.thp_memscale's docstring), the first memory node;
        # memory is placed by first touch on each pinned thread's node, so it is shown, not acted on
        "basemem": ParamInfo(0, "-m: first memory node (shown in the command; memory is placed by first touch)",
                             parse_int(0), "an integer >= 0"),
        # The simulated workload's node check (verify=page: get_mempolicy per 4 KiB page, docs/locks.md session
        # 21) needs a C loop: through ctypes a call costs ~2.5 us on the calibration host against ~0.45 us from
        # C (benchmarks/native/get_mempolicy_cost.c), so it is not run natively; validate's case sets none on
        # both sides.
        "verify": ParamInfo("none", "the node check after the write: not run natively (none only)",
                            parse_choice("none"), "none (the get_mempolicy check is simulated only)"),
    },
    body=_thp_memscale,
    footprint=_thp_memscale_footprint,
    command=lambda p: (f"{'thp_memscale_hugetlbfs' if p['mapping'] == 'hugetlb' else 'thp_memscale'} "
                       f"-C {p['basecpu']} -m {p['basemem']} -c {p['threads']} -b {p['bytes']}"),
    hugetlb_pages=lambda p: (-(-int(p["bytes"]) // HPAGE) * int(p["threads"])) if p["mapping"] == "hugetlb" else 0,
))


# -- pmbench (uniform, one thread) -------------------------------------------------------------


def _pmbench(p: dict[str, Any], thp: str | None) -> dict[str, float]:
    from mmsim.native import microbench as mb

    if p["setsize"] > p["mapsize"]:
        raise UserError("-p setsize", p["setsize"], f"at most mapsize ({p['mapsize']} MiB)")
    rate = mb.pmbench_rate(p["mapsize"] << 20, p["setsize"] << 20, p["duration"], p["read_pct"])
    if rate is None:
        from mmsim.native.safety import Skip

        raise Skip("pmbench needs the C helper (native/mb.c) and no working C compiler was found")
    return {"pmbench.throughput": round(rate, 1)}


def _pmbench_duration(v: str) -> float:
    x = float(v)
    if not 0 < x <= 3600:
        raise ValueError
    return x


def _only_default(workload: str, names: tuple[str, ...]) -> dict[str, ParamInfo]:
    """The simulated workload's parameters that the native port does not implement: each is taken (so one
    command line serves both modes) at its simulated default only; any other value is a one-line error."""
    from mmsim.workloads.base import get_workload

    sim = get_workload(workload).params
    out = {}
    for name in names:
        info = sim[name]

        def parse(v: str, info: ParamInfo = info) -> Any:
            x = info.parse(v)
            if x != info.default:
                raise ValueError(v)
            return x

        out[name] = ParamInfo(info.default, f"{info.help} (natively only the default)", parse,
                              f"{info.default!r} (the native port implements only the default)")
    return out


register(NativeWorkload(
    name="pmbench",
    description="pmbench's uniform pattern with one thread, ported to C (native/mb.c): accesses per second",
    params={
        "mapsize": ParamInfo(256, "-m: map size in MiB", parse_int(1, 1 << 16), "an integer MiB 1..65536"),
        "setsize": ParamInfo(128, "-s: working-set size in MiB (<= mapsize)", parse_int(1, 1 << 16),
                             "an integer MiB 1..65536"),
        "pattern": ParamInfo("uniform", "-p: page access pattern (natively only uniform)", parse_choice("uniform"),
                             "uniform"),
        "jobs": ParamInfo(1, "-j: worker threads (natively only 1)", parse_int(1, 1), "1"),
        "read_pct": ParamInfo(50, "-r: read percentage", parse_int(0, 100), "an integer 0..100"),
        "duration": ParamInfo(5.0, "DURATION in seconds", _pmbench_duration, "seconds, 0 < s <= 3600"),
        **_only_default("pmbench", ("shape", "delay", "cold", "initialize", "sampling", "mempolicy", "nodes",
                                    "mpol_flags", "basecpu", "memhog", "memhog_exit", "ratio", "processes",
                                    "cpu_node_bind", "eatmem", "eatmem_node", "window_start", "window")),
    },
    body=_pmbench,
    footprint=lambda p: int(p["mapsize"]) << 20,
    command=lambda p: f"pmbench -m {p['mapsize']} -s {p['setsize']} -p {p['pattern']} -j 1 -r {p['read_pct']} "
                      f"{p['duration']:g}",
))
