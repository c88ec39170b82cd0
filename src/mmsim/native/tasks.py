"""Building blocks the native workloads run inside the worker process:
mappings with the requested page policy, touching one byte per page with
numpy, and N tasks (processes or threads) started together.

Where the benchmark's own per-word loop matters (usemem), the workload runs
that loop in C (native/usemem.py), not numpy's vectorised one.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

PAGE = mmap.PAGESIZE
MAP_HUGETLB = 0x40000  # include/uapi/asm-generic/mman-common.h (Python 3.11's mmap module lacks it)
MADV_POPULATE_WRITE = 23  # include/uapi/asm-generic/mman-common.h (Linux 5.14; not in Python 3.11's mmap)

Words = npt.NDArray[np.uint64]


def map_anon(nbytes: int, thp: str | None, *, hugetlb: bool = False, readonly: bool = False) -> mmap.mmap:
    """An anonymous private mapping (usemem's mmap of /dev/zero MAP_PRIVATE is the same anon VMA).

    ``thp`` emulates the system-wide THP policy for a program that does not
    madvise: ``always`` -> MADV_HUGEPAGE, ``madvise``/``never`` ->
    MADV_NOHUGEPAGE, ``None`` -> leave the host's policy alone.
    """
    prot = mmap.PROT_READ | (0 if readonly else mmap.PROT_WRITE)
    flags = mmap.MAP_PRIVATE | (MAP_HUGETLB if hugetlb else 0)
    m = mmap.mmap(-1, nbytes, flags=flags, prot=prot)
    if not hugetlb and thp is not None:
        m.madvise(mmap.MADV_HUGEPAGE if thp == "always" else mmap.MADV_NOHUGEPAGE)
    return m


def words(m: mmap.mmap) -> Words:
    return np.frombuffer(m, dtype=np.uint64)


def populate_write(m: mmap.mmap) -> None:
    """MAP_POPULATE of a private writable mapping: the kernel write-faults every
    page (``__mm_populate``) with no user stores. MADV_POPULATE_WRITE (Linux
    5.14, include/uapi/asm-generic/mman-common.h) does the same after mmap;
    older kernels get one user store per page instead."""
    try:
        m.madvise(MADV_POPULATE_WRITE)
    except OSError:
        touch_pages(m)


def touch_pages(m: mmap.mmap, stride: int = PAGE) -> None:
    """One byte stored per ``stride`` bytes (will-it-scale's ``c[i] = 0`` loop)."""
    b = np.frombuffer(m, dtype=np.uint8)
    b[::stride] = 0
    del b


def read_pages(m: mmap.mmap, stride: int = PAGE) -> int:
    """One byte loaded per ``stride`` bytes (a read fault per untouched page); returns their maximum."""
    b = np.frombuffer(m, dtype=np.uint8)
    v = int(b[::stride].max())
    del b
    return v


def close(m: mmap.mmap, *views: Any) -> None:
    """munmap; numpy views must be dropped first or mmap refuses (exported buffer)."""
    del views
    m.close()


def run_tasks(n: int, body: Callable[[int], dict[str, float]], mode: str = "processes") -> list[dict[str, float]]:
    """Start ``n`` tasks together (processes via fork, or threads), return each one's result.

    Processes wait on a pipe until all are forked, then run ``body(i)`` and
    send its result back; the caller reaps every child before returning, also
    on error (a child that fails exits 1 and its error is re-raised here).
    """
    if mode == "threads":
        return _run_threads(n, body)
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    pids: list[int] = []
    ok = False
    try:
        for i in range(n):
            pid = os.fork()
            if pid == 0:  # child: never returns
                _child(i, body, go_r, go_w, res_r, res_w)
            pids.append(pid)
        os.close(go_r)
        os.close(res_w)
        os.write(go_w, b"g" * n)  # release them all at once
        with os.fdopen(res_r, "r") as f:
            lines = f.read().splitlines()
        ok = True
    finally:
        try:
            os.close(go_w)
        except OSError:
            pass
        for pid in pids:
            if not ok:  # interrupted or failed: do not let the children run on
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    out: list[dict[str, Any]] = [json.loads(x) for x in lines]
    errors = [r["error"] for r in out if "error" in r]
    if errors or len(out) != n:
        raise RuntimeError(f"native task failed: {errors[0] if errors else f'{len(out)} of {n} tasks reported'}")
    return [r for _, r in sorted((r.pop("task"), r) for r in out)]


def _child(i: int, body: Callable[[int], dict[str, float]], go_r: int, go_w: int, res_r: int, res_w: int) -> None:
    code = 0
    try:
        os.close(go_w)
        os.close(res_r)
        os.read(go_r, 1)
        try:
            res: dict[str, Any] = {"task": i, **body(i)}
        except Exception as e:  # reported to the parent, which raises it
            res, code = {"task": i, "error": f"{type(e).__name__}: {e}"}, 1
        os.write(res_w, (json.dumps(res) + "\n").encode())
    finally:
        os._exit(code)


def _run_threads(n: int, body: Callable[[int], dict[str, float]]) -> list[dict[str, float]]:
    start = threading.Barrier(n)
    out: list[dict[str, float] | BaseException] = [RuntimeError("not run")] * n

    def target(i: int) -> None:
        try:
            start.wait()
            out[i] = body(i)
        except BaseException as e:
            out[i] = e

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = []
    for r in out:
        if isinstance(r, BaseException):
            raise RuntimeError(f"native task failed: {type(r).__name__}: {r}")
        results.append(r)
    return results
