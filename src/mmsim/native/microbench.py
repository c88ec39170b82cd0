"""Host microbenchmarks for ``mmsim calibrate``. None of them is a validation
workload: they touch one byte per page (not every word), stream over memory
that is already faulted in, or bounce one cache line / one futex between
two pinned processes.

The host is shared, so each benchmark is timed so that other users' work
does not count: single-CPU work (faults, streaming) by the thread's own CPU
time (CLOCK_THREAD_CPUTIME_ID: user + system time of this thread, not the
time it waited preempted), minimum over a few repetitions; two-CPU
ping-pongs, which need both CPUs at once, by the median of the individual
round trips (a partner preempted for a time slice spoils a few rounds, not
the median). Where Python's own overhead is part of a loop, it is measured
with the same loop minus the mechanism and subtracted.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import time
from collections.abc import Callable

import numpy as np

from mmsim.native import sysinfo, tasks

REPEATS = 3  # bandwidth passes (each streams 128 MiB or more)
FAULT_REPEATS = 7  # fault passes: 64 MiB each, cheap, and the first ones may meet unbacked (VM) memory
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}  # arch/x86/entry/syscalls/syscall_64.tbl; asm-generic/unistd.h
FUTEX_WAIT, FUTEX_WAKE = 0, 1  # include/uapi/linux/futex.h (shared futexes: no FUTEX_PRIVATE_FLAG)


def best(f: Callable[[], float], repeats: int = REPEATS) -> float:
    return min(f() for _ in range(repeats))


# -- page faults -------------------------------------------------------------------------


def fault_4k_ns(nbytes: int = 64 << 20) -> float:
    """Mean time of one 4 KiB anonymous write fault (do_anonymous_page: alloc + clear + set_pte)."""

    def once() -> float:
        m = tasks.map_anon(nbytes, "never")
        t0 = time.thread_time_ns()
        tasks.touch_pages(m)
        dt = time.thread_time_ns() - t0
        m.close()
        return dt / (nbytes // tasks.PAGE)

    return best(once, FAULT_REPEATS)


def fault_thp_ns(nbytes: int = 64 << 20) -> float | None:
    """Mean time of one 2 MiB THP fault (do_huge_pmd_anonymous_page: mostly clear_huge_page).

    Counted with thp_fault_alloc; None when no THP fault happened (THP off or
    no huge page free).
    """

    def once() -> float:
        m = tasks.map_anon(nbytes, "always")
        v0 = sysinfo.read_vmstat().get("thp_fault_alloc", 0)
        t0 = time.thread_time_ns()
        tasks.touch_pages(m, sysinfo.HPAGE_BYTES)
        dt = time.thread_time_ns() - t0
        faults = sysinfo.read_vmstat().get("thp_fault_alloc", 0) - v0
        m.close()
        return dt / faults if faults >= nbytes // sysinfo.HPAGE_BYTES // 2 else float("inf")

    v = best(once, FAULT_REPEATS)
    return None if v == float("inf") else v


# -- memory bandwidth -----------------------------------------------------------------------


def _prefaulted(nbytes: int) -> tuple[mmap.mmap, tasks.Words]:
    m = tasks.map_anon(nbytes, None)
    a = tasks.words(m)
    a.fill(1)
    return m, a


def bandwidth_gbs(nbytes: int = 128 << 20) -> dict[str, float]:
    """One core's read, write (fill) and copy bandwidth over memory larger than the LLC, GB/s."""
    m1, a = _prefaulted(nbytes)
    m2, b = _prefaulted(nbytes)
    out = _stream(a, b, nbytes)
    del a, b  # drop the buffer exports before munmap
    m1.close()
    m2.close()
    return out


def _stream(a: tasks.Words, b: tasks.Words, nbytes: int) -> dict[str, float]:
    def timed(op: Callable[[], object], moved: int) -> float:
        def once() -> float:
            t0 = time.thread_time_ns()
            op()
            return (time.thread_time_ns() - t0) / moved  # CPU ns per byte

        return 1.0 / best(once)  # bytes per ns = GB/s

    return {
        "read": timed(lambda: np.bitwise_xor.reduce(a), nbytes),
        "write": timed(lambda: a.fill(7), nbytes),
        "copy": timed(lambda: np.copyto(b, a), 2 * nbytes),
    }


def all_cpu_bandwidth_gbs(ncpus: int, nbytes: int = 64 << 20) -> dict[str, float]:
    """Read and write bandwidth with one process per CPU streaming at once (sum), GB/s."""

    def task(i: int) -> dict[str, float]:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[i % len(os.sched_getaffinity(0))]})
        r = bandwidth_gbs(nbytes)
        return {"read": r["read"], "write": r["write"]}

    res = tasks.run_tasks(ncpus, task)
    return {k: sum(r[k] for r in res) for k in ("read", "write")}


# -- cache-line transfer -------------------------------------------------------------------


def _spin_pingpong(m: mmap.mmap, me: int, rounds: int, stamps: list[int] | None = None) -> None:
    """Wait for the line to say it is our turn, then hand it over (a store to the shared line).

    ``stamps`` (the initiator's) gets the clock at the start of every round.
    """
    other = 1 - me
    clock = time.perf_counter_ns
    for _ in range(rounds):
        if stamps is not None:
            stamps.append(clock())
        while m[0] != me:
            pass
        m[0] = other


def _median_step(stamps: list[int]) -> float:
    return float(np.median(np.diff(np.asarray(stamps, dtype=np.int64))))


def line_transfer_ns(cpu_a: int, cpu_b: int, rounds: int = 20000) -> float:
    """One modified cache line moving between ``cpu_a`` and ``cpu_b``: half the median round trip.

    A round trip is two transfers plus two loop bodies; the same loop run by
    one process alone (the line never leaves its cache), timed the same way,
    is the loop overhead and is subtracted.
    """
    m = mmap.mmap(-1, mmap.PAGESIZE)
    stamps: list[int] = []
    old = os.sched_getaffinity(0)
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, {cpu_b})
            _spin_pingpong(m, 1, rounds)
        finally:
            os._exit(0)
    try:
        os.sched_setaffinity(0, {cpu_a})
        _spin_pingpong(m, 0, rounds, stamps)
        while m[0] != 0:
            pass
        stamps.append(time.perf_counter_ns())
    finally:
        os.waitpid(pid, 0)
        os.sched_setaffinity(0, old)
        m.close()
    rt = _median_step(stamps)

    alone: list[int] = []
    m = mmap.mmap(-1, mmap.PAGESIZE)
    clock = time.perf_counter_ns
    for _ in range(rounds):  # the same body, both turns taken by this process
        alone.append(clock())
        while m[0] != 0:
            pass
        m[0] = 1
        while m[0] != 1:
            pass
        m[0] = 0
    alone.append(clock())
    m.close()
    return (rt - _median_step(alone)) / 2


# -- futex wake-up and context switch -------------------------------------------------------


class _Futex:
    """A shared futex word in an anonymous MAP_SHARED page, driven with syscall(SYS_futex)."""

    def __init__(self) -> None:
        nr = SYS_FUTEX.get(platform.machine())
        if nr is None:
            raise OSError(f"futex syscall number unknown on {platform.machine()}")
        self.nr = nr
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.m = mmap.mmap(-1, mmap.PAGESIZE)  # MAP_SHARED: both processes see the word
        self.word = ctypes.c_int.from_buffer(self.m)
        self.addr = ctypes.addressof(self.word)

    def wait(self, val: int) -> None:
        self.libc.syscall(self.nr, ctypes.c_void_p(self.addr), FUTEX_WAIT, val, None, None, 0)

    def wake(self) -> None:
        self.libc.syscall(self.nr, ctypes.c_void_p(self.addr), FUTEX_WAKE, 1, None, None, 0)

    def pingpong(self, me: int, rounds: int, stamps: list[int] | None = None) -> None:
        other = 1 - me
        clock = time.perf_counter_ns
        for _ in range(rounds):
            if stamps is not None:
                stamps.append(clock())
            while self.word.value != me:
                self.wait(other)  # sleeps only while the word still says "other's turn"
            self.word.value = other
            self.wake()


def futex_round_trip_ns(cpu_a: int, cpu_b: int, rounds: int = 5000) -> float:
    """Half the median futex ping-pong round trip between two pinned processes, minus the syscalls' own cost.

    On the same CPU each hand-off is a context switch (futex_wait -> schedule);
    on two CPUs it is a wake-up (futex_wake -> try_to_wake_up) of a task
    sleeping on an otherwise idle CPU.
    """
    f = _Futex()
    stamps: list[int] = []
    old = os.sched_getaffinity(0)
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, {cpu_b})
            f.pingpong(1, rounds)
        finally:
            os._exit(0)
    try:
        os.sched_setaffinity(0, {cpu_a})
        f.pingpong(0, rounds, stamps)
        while f.word.value != 0:
            f.wait(1)
        stamps.append(time.perf_counter_ns())
    finally:
        os.waitpid(pid, 0)
        os.sched_setaffinity(0, old)
    rt = _median_step(stamps)

    g = _Futex()  # word 0: a wait for 1 returns at once (EAGAIN); a wake finds no waiter
    alone: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(rounds):
        alone.append(clock())
        g.wait(1)
        g.word.value = 0
        g.wake()
    alone.append(clock())
    return max(0.0, (rt - 2 * _median_step(alone)) / 2)
