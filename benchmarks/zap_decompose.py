"""Level 2 (issue 22, session 12): the model's munmap of a populated ``MAP_SHARED`` tmpfs mapping, per page,
by component. Not a speed benchmark.

Runs will-it-scale page_fault3 (``mode=threads``, one task, the experiment's kernel arms) on a machine and
records, around each round's ``vm_munmap``, the simulated time from entry to return and the busy profile
(ns per symbol) the munmapping CPU was charged inside it. ``--ipi-cpus N`` hands the zap the experiment's
``mm_cpumask`` of N CPUs (its TLB flushes then pay N - 1 IPI round trips each) while one task runs, so the
zap is measured without lock waits.

    .venv/bin/python benchmarks/zap_decompose.py -m skylake-8170-2s --ipi-cpus 16 [--memsize 128m] [--json]
    .venv/bin/python benchmarks/zap_decompose.py -m /tmp/h.yaml --memsize 4m

Results: docs/fault-front-half.md, "Session 12".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Generator
from typing import Any

from mmsim.experiments.run import RunSpec, run
from mmsim.metrics.sampling import sim_now
from mmsim.mm import munmap as munmap_mod
from mmsim.mm.zap import zap_stats


def measure(machine: str, memsize: str, ipi_cpus: int, kernel: str, patches: tuple[str, ...],
            warmup: int, exact: bool, nr_task: int = 1) -> dict[str, Any]:
    """One page_fault3 task; per round of its munmap: ns, pages and the munmapping CPU's profile delta."""
    rounds: list[dict[str, Any]] = []
    real = munmap_mod.vm_munmap

    def wrapped(task: Any, mm: Any, vma: Any, cpus: list[int]) -> Generator[Any, Any, None]:
        s = mm.system
        prof = s.counters.prof_ns[task.cpu]
        before = dict(prof)
        z0 = dict(zap_stats(s))
        pages = sum(int(b.sum()) for k, b in mm.pgtables.ptes.items()
                    if vma.start >> 21 <= k <= (vma.end - 1) >> 21)
        t0 = sim_now(s)
        yield from real(task, mm, vma, list(range(ipi_cpus)) if ipi_cpus > 1 else cpus)
        delta = {k: v - before.get(k, 0) for k, v in prof.items() if v != before.get(k, 0)}
        rounds.append({"ns": sim_now(s) - t0, "pages": pages, "profile": delta,
                       "zap": {k: v - z0.get(k, 0) for k, v in zap_stats(s).items()}})

    munmap_mod.vm_munmap = wrapped
    try:
        params = {"nr_task": str(nr_task), "mode": "threads", "memsize": memsize, "warmup": str(warmup), "loops": "1"}
        res = run(RunSpec("will-it-scale/page_fault3", machine, kernel, patches=patches, params=params,
                          exact=exact))
    finally:
        munmap_mod.vm_munmap = real
    return {"machine": machine, "memsize": memsize, "ipi_cpus": ipi_cpus, "nr_task": nr_task, "rounds": rounds,
            "per_thread_ops": res.metrics.get("will-it-scale.per_thread_ops"),
            "mmap_lock_read": res.locks.get("&mm->mmap_lock", {}).get("lock_stat", {}).get("R", {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--machine", default="skylake-8170-2s")
    ap.add_argument("--memsize", default="128m")
    ap.add_argument("--ipi-cpus", type=int, default=1)
    ap.add_argument("-k", "--kernel", default="v6.6")
    ap.add_argument("--patches", default="164b06f238b9,4ed4379881aa")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--nr-task", type=int, default=1,
                    help="tasks (threads of one mm); with more than one, the counted round's munmaps are averaged "
                         "(their time then includes waits inside the zap)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = measure(a.machine, a.memsize, a.ipi_cpus, a.kernel, tuple(p for p in a.patches.split(",") if p),
                a.warmup, a.exact, a.nr_task)
    if a.json:
        print(json.dumps(r, indent=1))
        return
    print(f"{r['machine']}, memsize {r['memsize']}, mm_cpumask {r['ipi_cpus']} CPUs, {r['nr_task']} task(s)")
    rounds = r["rounds"]
    if a.nr_task > 1:  # the counted round: each task's last munmap, averaged
        last = rounds[-a.nr_task:]
        avg: dict[str, float] = {}
        for rd in last:
            for k, v in rd["profile"].items():
                avg[k] = avg.get(k, 0) + v / len(last)
        rounds = [{"ns": sum(rd["ns"] for rd in last) / len(last), "pages": last[0]["pages"], "profile": avg,
                   "zap": last[0]["zap"]}]
    for i, rd in enumerate(rounds):
        n = max(1, rd["pages"])
        print(f"round {i + 1}: {rd['pages']} pages, munmap {rd['ns'] / 1e6:.3f} ms = {rd['ns'] / n:.1f} ns/page")
        for sym, ns in sorted(rd["profile"].items(), key=lambda kv: -kv[1]):
            print(f"    {sym:42s} {ns / n:8.2f} ns/page  ({ns / 1e3:10.1f} us)")
        print("    counts:", {k: v for k, v in rd["zap"].items() if v})
    rl = r["mmap_lock_read"]
    print(f"mmap_lock read holds (the zaps under the downgraded lock): {rl.get('acquisitions')} in the run, "
          f"holdtime-avg {float(rl.get('holdtime-avg', 0) or 0) / 1e6:.3f} ms; per_thread_ops {r['per_thread_ops']}")


if __name__ == "__main__":
    main()
