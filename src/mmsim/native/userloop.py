"""What usemem's user loop costs natively on memory that is not in L1d, and how getrusage splits a fault.

``python -m mmsim.native.userloop [MiB] [REPS]`` prints both tables (docs/validation.md, "Level 0/3:
usemem's user loop on uncached memory (session 9)"). Everything runs usemem's own ``do_rw_once``
(native/usemem.c, built ``-O``) in this thread; times are this thread's CPU time (``CLOCK_THREAD_CPUTIME_ID``),
minimum of ``REPS`` passes, so preemption does not count.

:func:`loop_cost` separates the loop from the faults by running the same pass twice on fresh memory: with
``step`` 8 (every word: faults and loop) and with ``step`` 4096 (one word per 4 KiB page: the faults alone,
as usemem ``-j 4096`` would). The difference over the pages is what the other 511 words of each page cost.

:func:`fault_user_share` runs the faults alone (``step`` 4096) and reads getrusage(RUSAGE_THREAD) around
them: the share of their time that tick-based accounting reports as user time (mm/user_loops.py,
``FAULT_USER_CYCLES``).
"""

from __future__ import annotations

import ctypes
import mmap
import resource
import sys
from typing import NamedTuple

import numpy as np

from mmsim.native import usemem

HPAGE = 2 << 20
MAP_HUGETLB = 0x40000  # include/uapi/asm-generic/mman-common.h
PAGE = 4096
WORD = 8
STATES = ("4k-write-fault", "zero-read-fault", "thp-write-fault", "populated-uncached", "populated-clflushed",
          "populated-cached")
HUGETLB = "hugetlb-write-fault"  # MAP_HUGETLB: needs free or surplus 2 MiB pages (vm.nr_overcommit_hugepages)


def _lib() -> ctypes.CDLL:
    d = usemem.lib()
    d.usemem_pass_cpu_ns.restype = ctypes.c_double
    d.usemem_pass_cpu_ns.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int]
    d.usemem_set_step.argtypes = [ctypes.c_ulong]
    d.usemem_flush.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    d.usemem_set(0, 1, 0.0)
    return d


class Region:
    """An anonymous private mapping of ``nbytes`` starting on a 2 MiB boundary (THP-eligible when ``huge``)."""

    def __init__(self, nbytes: int, huge: bool = False, read_only: bool = False, populate: bool = False,
                 hugetlb: bool = False) -> None:
        prot = mmap.PROT_READ | (0 if read_only else mmap.PROT_WRITE)
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (mmap.MAP_POPULATE if populate else 0)
        if hugetlb:  # hugetlb mappings are 2 MiB aligned by the kernel
            self.m = mmap.mmap(-1, nbytes, flags=flags | MAP_HUGETLB, prot=prot)
            view = np.frombuffer(self.m, dtype=np.uint8)
            self.addr = int(view.ctypes.data)
            del view
            return
        self.m = mmap.mmap(-1, nbytes + HPAGE, flags=flags, prot=prot)
        self.m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
        view = np.frombuffer(self.m, dtype=np.uint8)
        self.addr = (int(view.ctypes.data) + HPAGE - 1) & ~(HPAGE - 1)
        del view

    def close(self) -> None:
        self.m.close()


def _warm(nbytes: int) -> None:
    """Touch and free ``nbytes`` just before a fresh-memory pass: memory freed a moment ago is still backed
    by the hypervisor (native/worker.py ``warm_passes``), so the faults measure the guest kernel."""
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
    m.close()


def _pass(d: ctypes.CDLL, state: str, nbytes: int, step: int) -> tuple[float, float, float]:
    """One pass in ``state``: (thread CPU ns, getrusage user s, system s)."""
    read = state == "zero-read-fault"
    cached = state == "populated-cached"
    n = 512 << 10 if cached else nbytes
    populated = state.startswith("populated")
    if not populated and not read:  # zero-page reads allocate nothing (but page tables)
        _warm(nbytes + HPAGE)
    if state == HUGETLB:
        r0 = Region(nbytes, hugetlb=True)  # warm: surplus pages freed a moment ago are still backed
        d.usemem_set_step(PAGE)
        d.usemem_pass_cpu_ns(r0.addr, nbytes, 0)
        r0.close()
    r = Region(n, huge=state == "thp-write-fault", read_only=read, populate=populated, hugetlb=state == HUGETLB)
    try:
        if populated:
            d.usemem_set_step(WORD)
            d.usemem_pass_cpu_ns(r.addr, n, 0)  # maps every page (a populated private page is not yet written)
            if state == "populated-clflushed":
                d.usemem_flush(r.addr, n)
        d.usemem_set_step(step)
        u0 = resource.getrusage(resource.RUSAGE_THREAD)
        t = sum(d.usemem_pass_cpu_ns(r.addr, n, int(read)) for _ in range(nbytes // n))  # cached: 512 KiB, L2
        u1 = resource.getrusage(resource.RUSAGE_THREAD)
    finally:
        d.usemem_set_step(WORD)
        r.close()
    return t, u1.ru_utime - u0.ru_utime, u1.ru_stime - u0.ru_stime


class LoopCost(NamedTuple):
    pass_ns: float  # per 4 KiB page: faults and the loop over all 512 words
    faults_ns: float  # per 4 KiB page: step 4096, the faults and one word
    loop_ns: float  # per 4 KiB page: the other 511 words (pass_ns - faults_ns)

    @property
    def ns_per_word(self) -> float:
        return self.loop_ns / (PAGE // WORD - 1)


def loop_cost(state: str, nbytes: int = 256 << 20, reps: int = 5) -> LoopCost:
    """The loop's cost per 4 KiB page in ``state`` (one of :data:`STATES`, or :data:`HUGETLB`): minima of
    ``reps`` passes each."""
    d = _lib()
    full = min(_pass(d, state, nbytes, WORD)[0] for _ in range(reps))
    faults = min(_pass(d, state, nbytes, PAGE)[0] for _ in range(reps))
    pages = nbytes // PAGE
    return LoopCost(full / pages, faults / pages, (full - faults) / pages)


class FaultShare(NamedTuple):
    ns_per_fault: float
    user_share: float  # of the faults' CPU time, as getrusage reports it
    user_ticks: float  # the user time in ticks (HZ=250: 4 ms each): its sampling error is about its square root


def fault_user_share(kind: str, nbytes: int, reps: int = 4, hz: int = 250) -> FaultShare:
    """Faults alone (``step`` 4096) over ``nbytes`` of fresh memory, ``reps`` passes summed: ``kind`` is
    ``zero-read-fault`` or ``4k-write-fault``."""
    d = _lib()
    runs = [_pass(d, kind, nbytes, PAGE) for _ in range(reps)]
    cpu = sum(r[0] for r in runs) / 1e9
    user = sum(r[1] for r in runs)
    sys_ = sum(r[2] for r in runs)
    return FaultShare(cpu * 1e9 / (reps * nbytes // PAGE), user / max(user + sys_, 1e-12), user * hz)


def corun_slowdown(reps: int = 7) -> tuple[float, float]:
    """ns per word of the loop over 16 KiB in L1d (:func:`mmsim.native.usemem.cached_ns_per_word`) on CPU 0,
    alone and while a forked process runs the same loop on CPU 1: minima of ``reps`` samples each,
    alternated. Two vCPUs that share a physical core (or its power budget) slow each other."""
    import os
    import signal
    import time

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise RuntimeError("needs two CPUs")
    alone: list[float] = []
    corun: list[float] = []
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpus[0]})
    try:
        for _ in range(reps):
            alone.append(usemem.cached_ns_per_word(reps=5000))
            pid = os.fork()
            if pid == 0:  # the co-runner: the same loop on the other CPU until killed
                os.sched_setaffinity(0, {cpus[1]})
                while True:
                    usemem.cached_ns_per_word(reps=5000)
            try:
                time.sleep(0.05)
                corun.append(usemem.cached_ns_per_word(reps=5000))
            finally:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    finally:
        os.sched_setaffinity(0, old)
    return min(alone), min(corun)


def main(argv: list[str]) -> int:
    mib = int(argv[0]) if argv else 256
    reps = int(argv[1]) if len(argv) > 1 else 5
    nbytes = mib << 20
    print(f"usemem do_rw_once, {mib} MiB, thread CPU time, min of {reps} passes; per 4 KiB page:")
    print(f"{'state':22s} {'pass ns':>9s} {'faults ns':>10s} {'loop ns':>8s} {'ns/word':>8s}")
    for st in (*STATES, HUGETLB):
        try:
            c = loop_cost(st, nbytes, reps)
        except OSError as e:  # MAP_HUGETLB without huge pages: ENOMEM
            print(f"{st:22s} not run: {e}")
            continue
        print(f"{st:22s} {c.pass_ns:9.0f} {c.faults_ns:10.0f} {c.loop_ns:8.0f} {c.ns_per_word:8.3f}")
    print("getrusage's split of the faults alone (step 4096), 4 passes summed:")
    for kind, size in (("zero-read-fault", 4096 << 20), ("4k-write-fault", 1024 << 20)):
        f = fault_user_share(kind, size)
        print(f"{kind:22s} {f.ns_per_fault:7.0f} ns per fault, {100 * f.user_share:5.1f}% reported as user "
              f"({f.ns_per_fault * f.user_share:.0f} ns; {f.user_ticks:.0f} ticks)")
    alone, corun = corun_slowdown()
    print(f"loop in L1d on one CPU: {alone:.3f} ns/word alone, {corun:.3f} while the other CPU runs it "
          f"({alone / corun:.2f}x speed)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
