"""The process that runs one native workload: ``python -m mmsim.native.worker SPEC OUT [WATCH_FD]``.

It runs in its own session (process group) so the parent can always kill
and reap it and everything it forked; under ``perf stat`` when perf is
available. It dies with the ``mmsim native`` process: PR_SET_PDEATHSIG on
the parent's direct child (perf, or this worker), and a watcher process
(:func:`watch_parent`) that reads ``WATCH_FD``, a pipe whose write end only
that process holds: at EOF (the parent is gone, however it died) it SIGKILLs
the whole process group, perf, this worker and the forked tasks included.
It snapshots /proc/vmstat and getrusage around the workload only (not the
interpreter start-up) and writes one JSON object to ``OUT``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from typing import Any

from mmsim.native import sysinfo
from mmsim.native.workloads import get_native, resolve_native_params


def _rusage() -> dict[str, float]:
    s = resource.getrusage(resource.RUSAGE_SELF)  # all threads of this process
    c = resource.getrusage(resource.RUSAGE_CHILDREN)  # forked tasks, once reaped
    return {
        "user_seconds": s.ru_utime + c.ru_utime,
        "system_seconds": s.ru_stime + c.ru_stime,
        "minor_faults": s.ru_minflt + c.ru_minflt,
        "major_faults": s.ru_majflt + c.ru_majflt,
        "voluntary_ctx_switches": s.ru_nvcsw + c.ru_nvcsw,
        "involuntary_ctx_switches": s.ru_nivcsw + c.ru_nivcsw,
    }


WARM_PASSES = 4  # at most; each pass maps, touches and frees the run's footprint
WARM_SETTLED = 1.15  # a pass less than 15% cheaper than the one before: the first-touch cost is gone


def warm(nbytes: int, thp: str | None, hugetlb: bool) -> dict[str, list[float]]:
    """Warm ``nbytes`` on each CPU this process may run on (:func:`warm_passes` pinned to it, in turn);
    returns each CPU's passes (thread CPU seconds), keyed by CPU number.

    Freed pages go to the freeing CPU's per-CPU lists first (``free_unref_page``
    -> ``free_unref_page_commit``; order-9 blocks too, ``pcp_allowed_order``,
    v5.13+), and a task on another CPU allocates from its own lists and the
    buddy lists, i.e. from other, possibly unbacked, memory. Measured here
    (issue 15, 2026-12-01, quiet host, 1 GiB THP, thread CPU time of a
    forked task's faults): warmed on CPU 0, a task on CPU 0 took 0.057-0.063
    s, one on CPU 1 0.48-1.62 s; a warm-up pass costs 0.054-0.065 s once
    settled. So every CPU warms the whole footprint.
    """
    allowed = sorted(os.sched_getaffinity(0))
    out: dict[str, list[float]] = {}
    try:
        for cpu in allowed:
            os.sched_setaffinity(0, {cpu})
            out[str(cpu)] = warm_passes(nbytes, thp, hugetlb)
    finally:
        os.sched_setaffinity(0, set(allowed))
    return out


def warm_passes(nbytes: int, thp: str | None, hugetlb: bool) -> list[float]:
    """Touch ``nbytes`` (one store per 4 KiB) and free them, just before the measured run, until a
    pass is no longer much cheaper than the one before (``WARM_SETTLED`` x it is at least the one before;
    at most :data:`WARM_PASSES` passes);
    returns each pass's thread CPU seconds.

    On this VM the hypervisor takes back guest memory that stays free for a
    moment (measured here: a 1 GiB THP pass costs 0.06 s warm, 1.4 s after
    3 s asleep, 2.9 s after 10 s), and the next fault on it waits for the
    hypervisor. Memory touched and freed a moment ago is still backed, so
    the run measures the guest kernel.
    The warm-up uses the run's own page size: THP blocks freed by a THP
    mapping are the ones the next THP faults get back, and surplus hugetlb
    pages go back to the buddy allocator the next mapping's reservation
    takes them from. One pass is not always enough (issue 15, measured here,
    2026-12-01, 1 GiB of surplus hugetlb pages, thread CPU time of the
    faults: 2,920 ms, then 77 ms, then 51-53 ms per pass; the freed blocks
    are not all the ones the next allocations take), so it repeats until the
    cost settles.
    """
    from mmsim.native import tasks

    times: list[float] = []
    for _ in range(WARM_PASSES):
        t0 = time.thread_time()
        m = tasks.map_anon(nbytes, thp, hugetlb=hugetlb)
        tasks.touch_pages(m)
        m.close()
        times.append(time.thread_time() - t0)
        if len(times) > 1 and WARM_SETTLED * times[-1] >= times[-2]:
            break
    return times


def run_body(spec: dict[str, Any]) -> dict[str, Any]:
    w = get_native(spec["workload"])
    params = resolve_native_params(w, spec["params"])
    thp = spec.get("thp")
    warm_s: dict[str, list[float]] = {}
    if spec.get("warm"):
        pages = w.hugetlb_pages(params)
        warm_s = warm(pages * sysinfo.HPAGE_BYTES if pages else w.footprint(params), thp, bool(pages))
    r0, v0, t0 = _rusage(), sysinfo.read_vmstat(), time.perf_counter()
    metrics = w.body(params, thp)
    wall = time.perf_counter() - t0
    r1, v1 = _rusage(), sysinfo.read_vmstat()
    rusage = {k: round(r1[k] - r0[k], 6) for k in r0}
    if w.name.startswith("vm-scalability/"):  # LKP's vm-scalability.time.* (from /usr/bin/time)
        metrics["vm-scalability.time.user_time"] = rusage["user_seconds"]
        metrics["vm-scalability.time.system_time"] = rusage["system_seconds"]
    return {"metrics": metrics, "rusage": rusage, "vmstat": sysinfo.vmstat_delta(v0, v1), "wall_seconds": wall,
            "warm_seconds": {c: [round(x, 4) for x in v] for c, v in warm_s.items()}}


def watch_parent(fd: int) -> None:
    """Fork a watcher that SIGKILLs this process group when the pipe ``fd`` reaches EOF (its only writer,
    the ``mmsim native`` process, is gone).

    A process, not a thread: it needs no GIL (the worker's main thread may sit
    in a long C loop) and outlives the worker itself, which PR_SET_PDEATHSIG
    may kill first, so the worker's forked tasks (and their children) die too.
    After a normal run the parent kills the group, this watcher with it.
    """
    if os.fork() != 0:
        os.close(fd)
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):  # never hold the parent's stderr pipe open
            os.dup2(null, std)
        while True:
            try:
                if not os.read(fd, 4096):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def main(argv: list[str]) -> int:
    spec_text, out, *watch = argv
    if watch:
        watch_parent(int(watch[0]))
    result = run_body(json.loads(spec_text))
    with open(out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
