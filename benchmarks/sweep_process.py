"""Target: ``mmsim sweep`` over 12 points with the process executor is >= 1.7x faster than serial on 2 cores.

Each point is lockstress (8 tasks on ``tiny``) with a distinct ``think_ns``;
iterations are calibrated so one run takes ``--seconds`` of host time. Both
sweeps go through a fresh results store, as the CLI does; the metrics of the
two are checked to be identical. Prints a table (or ``--json``); asserts
nothing about speed.

    .venv/bin/python benchmarks/sweep_process.py [--points 12] [--seconds 1.0] [--workers 2] [--json]
"""

from __future__ import annotations

import argparse
import json

from sweep_common import BASE, calibrate, host, same_metrics, timed_sweep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=1.0, help="host wall time of one run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    iters = calibrate(a.seconds)
    params = {**BASE, "iterations": str(iters), "think_ns": ",".join(str(500 + 10 * i) for i in range(a.points))}
    t_serial, s1, busy1 = timed_sweep(params, "serial", None)
    t_proc, s2, busy2 = timed_sweep(params, "process", a.workers)
    out = {
        "benchmark": "sweep_process", "points": a.points, "iterations": iters, "workers": a.workers,
        "serial_s": round(t_serial, 2), "process_s": round(t_proc, 2), "speedup": round(t_serial / t_proc, 2),
        "serial_busy": round(busy1 / t_serial, 3), "process_busy": round(busy2 / (t_proc * a.workers), 3),
        "identical_metrics": same_metrics(s1, s2), "host": host(),
    }
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")


if __name__ == "__main__":
    main()
