"""Host microbenchmarks for ``mmsim calibrate``. None of them is a validation
workload: they touch one byte per page (not every word), stream over memory
that is already faulted in, chase pointers, or bounce one cache line / one
futex between two pinned threads (the last three in C: native/mb.c).

The host is shared, so each benchmark is timed so that other users' work
does not count: single-CPU work (faults, streaming) by the thread's own CPU
time (CLOCK_THREAD_CPUTIME_ID: user + system time of this thread, not the
time it waited preempted), minimum over a few repetitions; the C benchmarks,
two of which need both CPUs at once, by the median of many samples with the
interquartile range as the spread (a partner preempted for a time slice
spoils a few samples, not the median).
"""

from __future__ import annotations

import mmap
import os
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmsim.cbuild import compiled
from mmsim.native import sysinfo, tasks

REPEATS = 3  # bandwidth passes (each streams 128 MiB or more)
FAULT_REPEATS = 7  # fault passes: 64 MiB each, cheap, and the first ones may meet unbacked (VM) memory


def best(f: Callable[[], float], repeats: int = REPEATS) -> float:
    return min(f() for _ in range(repeats))


# -- page faults -------------------------------------------------------------------------


def _fault_4k(nbytes: int, touch: Callable[[Any], Any]) -> list[float]:
    """Mean time per 4 KiB page of ``touch`` over a fresh THP-off anonymous mapping of ``nbytes``, one value
    per pass (:data:`FAULT_REPEATS`); calibrate takes the fastest and reports the spread."""

    def once() -> float:
        m = tasks.map_anon(nbytes, "never")
        t0 = time.thread_time_ns()
        touch(m)
        dt = time.thread_time_ns() - t0
        m.close()
        return dt / (nbytes // tasks.PAGE)

    return [once() for _ in range(FAULT_REPEATS)]


def fault_4k_passes(nbytes: int = 64 << 20) -> list[float]:
    """Mean time of one 4 KiB anonymous write fault (do_anonymous_page: alloc + clear + set_pte), per pass."""
    return _fault_4k(nbytes, tasks.touch_pages)


def fault_4k_read_passes(nbytes: int = 64 << 20) -> list[float]:
    """Mean time of one 4 KiB anonymous read fault (do_anonymous_page's read branch: the shared zero
    page mapped, no allocation, no clear, no folio): one byte loaded per page of an untouched mapping,
    per pass."""
    return _fault_4k(nbytes, tasks.read_pages)


def fault_thp_passes(nbytes: int = 64 << 20) -> list[float]:
    """Mean time of one 2 MiB THP fault (do_huge_pmd_anonymous_page: mostly clear_huge_page), per pass.

    Counted with thp_fault_alloc; a pass with fewer THP faults than half its huge pages (THP off or no
    huge page free) is left out, so the list is empty when none could be measured.
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

    return [v for v in (once() for _ in range(FAULT_REPEATS)) if v != float("inf")]


def spread_note(values: list[float], unit: str = "ns") -> str:
    """``min of N passes (median M, max X unit)``: how a fastest-of-N figure was taken, and its spread."""
    a = sorted(values)

    def f(x: float) -> str:
        return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"

    return f"min of {len(a)} passes (median {f(statistics.median(a))}, max {f(a[-1])} {unit})"


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


# -- C microbenchmarks: cache-line hand-off, futex hand-off, pointer chase ----------------
#
# A Python loop costs ~50-100 ns per iteration, more than the ~20-130 ns a cache line takes to move,
# so a Python ping-pong cannot resolve a line transfer: subtracting the loop overhead (measured
# alone) from the round trip leaves the difference of two noisy numbers each larger than the effect,
# and the overheads do not even add the same way (in the ping-pong each side's loop overlaps the
# other's wait). That is how the old calibrate measured -25.5 ns for line_xfer_socket_ns and wrote
# 1 ns. These run in C (native/mb.c, compiled with the host's cc on first use), in many samples,
# and are summarised by their median and interquartile range.

MB_SOURCE = Path(__file__).with_name("mb.c")
# Other users' work only ever adds time to a sample, so the undisturbed mechanism is the lower half of
# the distribution: a measurement is usable when that half is tight, (median - p10) / median <= this.
MAX_LOW_SPREAD = 0.25


@dataclass(frozen=True)
class Stat:
    """A robust summary of repeated samples (ns): median, quartiles, relative spread."""

    median: float
    p10: float
    p25: float
    p75: float
    samples: int
    fastest: float = 0.0  # the smallest sample

    @property
    def spread(self) -> float:
        """Interquartile range / median."""
        return (self.p75 - self.p25) / self.median if self.median > 0 else float("inf")

    @property
    def low_spread(self) -> float:
        """(median - p10) / median: the spread of the undisturbed lower half."""
        return (self.median - self.p10) / self.median if self.median > 0 else float("inf")

    @property
    def usable(self) -> bool:
        return self.samples >= 5 and self.median > 0 and self.low_spread <= MAX_LOW_SPREAD

    def as_dict(self) -> dict[str, float | int]:
        return {"median": round(self.median, 2), "p10": round(self.p10, 2), "p25": round(self.p25, 2),
                "p75": round(self.p75, 2), "spread_pct": round(100 * self.spread, 1),
                "low_spread_pct": round(100 * self.low_spread, 1), "samples": self.samples}


def stat(values: list[float]) -> Stat:
    a = np.asarray(values, dtype=float)
    p10, p25, med, p75 = np.percentile(a, [10, 25, 50, 75])
    return Stat(float(med), float(p10), float(p25), float(p75), len(values), float(a.min()))


def helper() -> Path | None:
    """The compiled native/mb.c (cached per source hash), or None when no C compiler works."""
    return compiled(MB_SOURCE, "mb")


def _run(args: list[str], timeout: float = 120.0) -> Stat | None:
    exe = helper()
    if exe is None:
        return None
    try:
        r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    try:
        vals = [float(x) for x in r.stdout.split()]
    except ValueError:
        return None
    return stat(vals) if vals else None


def line_handoff_ns(cpu_a: int, cpu_b: int, samples: int = 31, rounds: int = 2000) -> Stat | None:
    """A modified cache line changing hands between ``cpu_a`` and ``cpu_b``: half a CAS ping-pong
    round trip (nviennot/core-to-core-latency's method), per sample of ``rounds`` round trips."""
    return _run(["c2c", str(cpu_a), str(cpu_b), str(samples), str(rounds)])


def xcopy_line_ns(cpu_a: int, cpu_b: int, samples: int = 31, rounds: int = 200) -> Stat | None:
    """ns per 64-byte line of a 64 KiB ``rep movsb`` copy on ``cpu_b`` of lines ``cpu_a`` has just written
    (the AF_UNIX reader's ``copy_user_enhanced_fast_string`` of the writer's skb), per sample of ``rounds``."""
    return _run(["xcopy", str(cpu_a), str(cpu_b), str(samples), str(rounds)])


def wake_cost_ns(cpu_a: int, cpu_b: int, samples: int = 11, rounds: int = 41) -> Stat | None:
    """ns the waker on ``cpu_b`` spends waking a task asleep on idle ``cpu_a`` (``FUTEX_WAKE``: ``try_to_wake_up``
    and the reschedule IPI), beyond a ``FUTEX_WAKE`` that finds no waiter; per sample, the median of ``rounds``."""
    return _run(["wakecost", str(cpu_a), str(cpu_b), str(samples), str(rounds)])


def wake_latency_ns(cpu_a: int, cpu_b: int, samples: int = 11, rounds: int = 41) -> Stat | None:
    """ns from ``FUTEX_WAKE`` on ``cpu_b`` until the task asleep on idle ``cpu_a`` runs again in user space (the
    model's ``wakeup_ns`` + ``ctx_switch_ns``); per sample, the median of ``rounds``."""
    return _run(["wakelat", str(cpu_a), str(cpu_b), str(samples), str(rounds)])


def kernel_clear_variant(cpuinfo: str | None = None) -> str:
    """The ``clear_page`` the host kernel patches in (``arch/x86/include/asm/page_64.h``, ``clear_page()``'s
    ``alternative_call_2``: ERMS over REP_GOOD over the plain loop) from ``/proc/cpuinfo``'s flags:
    ``erms`` (``rep stosb``), ``rep`` (``rep stosq``) or ``orig`` (8 ``movq`` per line)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    m = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    flags = set(m.group(1).split()) if m else set()
    return "erms" if "erms" in flags else "rep" if "rep_good" in flags else "orig"


def clear_page_gbs(nbytes: int = 1 << 30, passes: int = 5) -> tuple[float, Stat, str] | None:
    """One CPU running the host kernel's ``clear_page`` (:func:`kernel_clear_variant`) 4 KiB at a time over a
    populated ``nbytes`` buffer (native/mb.c ``clear``): the fastest pass's GB/s, every pass's ns per page,
    the variant; None without a C compiler."""
    variant = kernel_clear_variant()
    st = _run(["clear", str(nbytes), str(passes), variant], timeout=300.0)
    if st is None or st.fastest <= 0:
        return None
    return 4096 / st.fastest, st, variant


def futex_handoff_ns(cpu_a: int, cpu_b: int, samples: int = 31, rounds: int = 200) -> Stat | None:
    """Half a futex ping-pong round trip: on one CPU a context switch (futex_wait -> schedule), on
    two CPUs a wake-up (futex_wake -> try_to_wake_up) of a task sleeping on an idle CPU. Both
    include the futex_wait/futex_wake syscalls themselves."""
    return _run(["futex", str(cpu_a), str(cpu_b), str(samples), str(rounds)])


def pmbench_rate(map_bytes: int, set_bytes: int, seconds: float, read_pct: int) -> float | None:
    """Accesses per second of pmbench's uniform pattern with one thread (native/mb.c), or None."""
    exe = helper()
    if exe is None:
        return None
    try:
        r = subprocess.run([str(exe), "pmbench", str(map_bytes), str(set_bytes), str(seconds), str(read_pct)],
                           capture_output=True, text=True, timeout=seconds + 120)
        return float(r.stdout.split()[0]) if r.returncode == 0 and r.stdout.split() else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def chase_ns(nbytes: int, samples: int = 21, loads: int = 500_000) -> Stat | None:
    """Latency of one dependent load in a random cyclic chain over ``nbytes`` (THP-backed where
    the kernel allows, so the DRAM figure is not mostly page walks)."""
    return _run(["chase", str(nbytes), str(samples), str(loads)], timeout=300.0)
