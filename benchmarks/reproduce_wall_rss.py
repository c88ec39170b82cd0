"""Wall time, CPU time, peak RSS and events of `mmsim reproduce`, fast vs exact.

Usage:
  python benchmarks/reproduce_wall_rss.py [ID ...] [--workers N] [--json]
      the fast (default) mode of the named experiments (default: all), on a pool of N processes
  python benchmarks/reproduce_wall_rss.py [ID ...] --compare [--workers N] [--json]
      also the --exact mode, and per banded check: exact, fast, difference (the +-2% constraint);
      --out FILE also writes the JSON
  python benchmarks/reproduce_wall_rss.py --thp-off [--bytes 512m] [--threads 72] [--compare] [--json]
      the 72-thread THP-off thp_memscale arm on xeon-e5-2699v3-2s (issue 20's ~9.0 M-fault case)

Runs in a fresh interpreter so the RSS is the reproduction's own (RUSAGE_CHILDREN covers the pool's
workers). CPU seconds are this process's and its workers' user+system time: on a shared host the
wall time depends on the other jobs, the CPU time much less.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any


def _usage() -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of this process and its finished children."""
    me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime, max(me.ru_maxrss, ch.ru_maxrss) / 1024


def _opt(name: str, default: str | None = None) -> str | None:
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def _reproduce(ids: list[str], exact: bool, workers: int | None) -> dict[str, Any]:
    from mmsim.experiments.reproduce import reproduce

    c0, _ = _usage()
    t0 = time.perf_counter()
    outs = reproduce(ids or None, exact=exact, workers=workers)
    wall = time.perf_counter() - t0
    c1, rss = _usage()
    exps = {}
    for o in outs:
        exps[o.id] = {
            "ok": o.ok,
            "events": sum(int(r.sim["events"]) for r in o.arms.values()),
            "arm_seconds": round(sum(r.sim["wall_seconds"] for r in o.arms.values()), 2),
            "page_faults": sum(int(r.perf["page-faults"]) for r in o.arms.values()),
            "skipped_faults": sum(int(r.sim.get("ff_skipped_ops", 0)) for r in o.arms.values()),
            "checks": {c.metric: (c.simulated, c.kind if c.band else "info", c.ci95) for c in o.checks},
            "arms": {a: {"wall_seconds": r.sim["wall_seconds"], "events": int(r.sim["events"]),
                         "page_faults": int(r.perf["page-faults"]),
                         "skipped_faults": int(r.sim.get("ff_skipped_ops", 0))} for a, r in o.arms.items()},
        }
    return {"mode": "exact" if exact else "fast", "wall_seconds": round(wall, 2), "cpu_seconds": round(c1 - c0, 2),
            "max_rss_mib": round(rss, 1), "experiments": exps}


def _thp_off(exact: bool) -> dict[str, Any]:
    from mmsim.experiments.run import RunSpec, run

    spec = RunSpec("thp_memscale", "xeon-e5-2699v3-2s", "v3.12", policies={"thp": "never"},
                   params={"threads": _opt("--threads", "72") or "72", "bytes": _opt("--bytes", "512m") or "512m"},
                   exact=exact)
    c0, _ = _usage()
    t0 = time.perf_counter()
    r = run(spec, guard=False)
    wall = time.perf_counter() - t0
    c1, rss = _usage()
    locks = {k: r.lock_wait_share(k) for k in sorted(r.locks) if r.locks[k]["wait_ns_total"]}
    return {
        "mode": "exact" if exact else "fast", "wall_seconds": round(wall, 2), "cpu_seconds": round(c1 - c0, 2),
        "max_rss_mib": round(rss, 1), "events": r.sim["events"], "page_faults": r.perf["page-faults"],
        "cpu_us_per_fault": round(1e6 * (c1 - c0) / r.perf["page-faults"], 2),
        "elapsed_seconds": r.metrics["thp_memscale.elapsed_seconds"],
        "elapsed_ci95_seconds": r.sim.get("elapsed_ci95_seconds"),
        "skipped_faults": r.sim.get("ff_skipped_ops", 0),
        "task_clock_ms": r.perf["task-clock"], "context_switches": r.perf["context-switches"],
        "cache_misses": r.perf["cache-misses"], "instructions": r.perf["instructions"],
        "lock_wait_share": locks,
    }


def _diff(a: float, b: float) -> str:
    if a == b:
        return "0"
    return f"{100 * (b - a) / a:+.2f}%" if a else "n/a"


def main() -> None:
    as_json = "--json" in sys.argv
    compare = "--compare" in sys.argv
    w = _opt("--workers")
    workers = int(w) if w else None
    if "--thp-off" in sys.argv:
        runs = [_thp_off(False)] + ([_thp_off(True)] if compare else [])
        if as_json:
            print(json.dumps(runs))
            return
        for r in runs:
            print(json.dumps(r))
        if compare:
            f, e = runs
            for k in ("elapsed_seconds", "task_clock_ms", "page_faults", "context_switches", "cache_misses",
                      "instructions"):
                print(f"{k:>40}: exact {e[k]:.6g}  fast {f[k]:.6g}  {_diff(e[k], f[k])}")
            for k in e["lock_wait_share"]:
                a, b = e["lock_wait_share"][k], f["lock_wait_share"].get(k, 0.0)
                print(f"{'wait share ' + k:>40}: exact {a:.6g}  fast {b:.6g}  {_diff(a, b)}")
        return
    skip = {"--workers", "--out"}
    ids = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and sys.argv[i - 1] not in skip]
    runs = [_reproduce(ids, False, workers)] + ([_reproduce(ids, True, workers)] if compare else [])
    out = _opt("--out")
    if out:  # the same numbers as --json, kept beside the text
        with open(out, "w") as f:
            json.dump(runs, f)
    if as_json:
        print(json.dumps(runs))
        return
    for r in runs:
        print(f"{r['mode']}: wall {r['wall_seconds']} s, CPU {r['cpu_seconds']} s, peak RSS {r['max_rss_mib']} MiB")
        for k, e in r["experiments"].items():
            print(f"  {k:>14}: arms {e['arm_seconds']} s, events {e['events']:,}, faults {e['page_faults']:,} "
                  f"(skipped {e['skipped_faults']:,}), in band: {e['ok']}")
            for a, d in e["arms"].items():
                print(f"  {'':>14}  arm {a}: {d['wall_seconds']:.1f} s, events {d['events']:,}, "
                      f"faults {d['page_faults']:,} (skipped {d['skipped_faults']:,})")
    if compare:
        f, x = runs
        print("agreement per check (fast vs exact; banded and target checks, then the rest):")
        for banded in (True, False):
            for k, e in x["experiments"].items():
                for m, (v, kind, _) in e["checks"].items():
                    if (kind != "info") != banded:
                        continue
                    fv, _, ci = f["experiments"][k]["checks"][m]
                    ci_s = f" (fast's 95% CI +-{ci:.4g}: {'in' if abs(fv - v) <= ci else 'OUT'})" if ci else ""
                    print(f"  {k:>14} {m:>32} [{kind}]: exact {v:.6g}  fast {fv:.6g}  {_diff(v, fv)}{ci_s}")


if __name__ == "__main__":
    main()
