"""thp_memscale v3.12 vs v3.13 over the thread count (issue 16's thread sweep, docs/locks.md).

Each point is ``run(RunSpec("thp_memscale", MACHINE, KERNEL, params={"threads": N, "bytes": BYTES}))``,
the run ``mmsim sweep thp_memscale -m MACHINE -k v3.12 -k v3.13 -p threads=... -p bytes=512m`` makes,
on a process pool (one seed). Printed per machine, as a Markdown table:

* elapsed seconds of each arm and their ratio (the speed-up);
* "PMD-lock wait %": time waited for ``&mm->page_table_lock`` (v3.12) or the split ``ptlock_ptr(pmd page)``
  locks (v3.13), over task-clock;
* "mmap_sem wait %" on v3.13: time waited for ``&mm->mmap_sem`` (asleep or spinning) over task-clock;
* context switches of each arm.

    python benchmarks/thp_memscale_thread_sweep.py                      # both machines, 2 workers
    python benchmarks/thp_memscale_thread_sweep.py --machine xeon-e5-2699v3-2s --threads 8,72 --bytes 64m
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from mmsim.experiments.run import RunSpec, run

POINTS = {
    "sgi-uv2000-512": (16, 32, 64, 128, 256, 512),
    "xeon-e5-2699v3-2s": (8, 16, 32, 48, 72),
}
PMD_LOCK = {"v3.12": "&mm->page_table_lock", "v3.13": "ptlock_ptr(pmd page)"}


def _point(arg: tuple[str, str, int, str]) -> dict[str, Any]:
    machine, kernel, threads, nbytes = arg
    t0 = time.monotonic()
    r = run(RunSpec("thp_memscale", machine, kernel, params={"threads": str(threads), "bytes": nbytes}),
            guard=False)
    clock_ns = r.perf["task-clock"] * 1e6  # perf's task-clock is in ms

    def wait(name: str) -> float:
        lk = r.locks.get(name) or {}
        return 100.0 * lk.get("wait_ns_total", 0) / clock_ns if clock_ns else 0.0

    return {"machine": machine, "kernel": kernel, "threads": threads,
            "elapsed": r.metrics["thp_memscale.elapsed_seconds"], "pmd_wait": wait(PMD_LOCK[kernel]),
            "mmap_wait": wait("&mm->mmap_sem"), "cs": r.perf["context-switches"], "wall": time.monotonic() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", action="append", help="machine (repeatable; default: the two of the issue)")
    ap.add_argument("--threads", help="comma-separated thread counts (default: the machine's list)")
    ap.add_argument("--bytes", default="512m", help="bytes per thread (default 512m)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    machines = a.machine or list(POINTS)
    jobs = [(m, k, n, a.bytes) for m in machines
            for n in ([int(x) for x in a.threads.split(",")] if a.threads else POINTS[m])
            for k in ("v3.12", "v3.13")]
    jobs.sort(key=lambda j: -j[2])  # the longest first
    with ProcessPoolExecutor(a.workers) as ex:
        res = {(r["machine"], r["kernel"], r["threads"]): r for r in ex.map(_point, jobs)}
    for m in machines:
        print(f"\n{m} (thp_memscale -p bytes={a.bytes}, seed 0)\n")
        print("| threads | v3.12 s | v3.13 s | speed-up | v3.12 PMD-lock wait % | v3.13 PMD-lock wait % "
              "| v3.13 mmap_sem wait % | context switches v3.12 / v3.13 | host s |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sorted({t for (mm, _, t) in res if mm == m}):
            x, y = res[(m, "v3.12", n)], res[(m, "v3.13", n)]
            print(f"| {n} | {x['elapsed']:.3f} | {y['elapsed']:.3f} | {x['elapsed'] / y['elapsed']:.2f}x "
                  f"| {x['pmd_wait']:.1f} | {y['pmd_wait']:.3f} | {y['mmap_wait']:.2f} "
                  f"| {x['cs']:,} / {y['cs']:,} | {x['wall']:.0f} / {y['wall']:.0f} |")


if __name__ == "__main__":
    main()
