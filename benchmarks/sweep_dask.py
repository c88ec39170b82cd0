"""Target: a 100-point sweep of 1-second runs on 2 local Dask workers takes <= 60% of the serial time.

The Dask time includes starting the local cluster (2 single-threaded worker
processes) and shutting it down: the whole ``--executor dask --workers 2``
command as a user runs it, minus interpreter start-up. Points are lockstress
(8 tasks on ``tiny``) with distinct ``think_ns``, iterations calibrated to
``--seconds`` per run. Prints a table (or ``--json``); asserts nothing.

    .venv/bin/python benchmarks/sweep_dask.py [--points 100] [--seconds 1.0] [--workers 2] [--json]
"""

from __future__ import annotations

import argparse
import json

from sweep_common import BASE, calibrate, host, same_metrics, timed_sweep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=1.0, help="host wall time of one run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    iters = calibrate(a.seconds)
    params = {**BASE, "iterations": str(iters), "think_ns": ",".join(str(500 + 10 * i) for i in range(a.points))}
    t_serial, s1, busy1 = timed_sweep(params, "serial", None)
    t_dask, s2, busy2 = timed_sweep(params, "dask", a.workers)
    per_task = (t_dask - t_serial / a.workers) / (a.points / a.workers)
    out = {
        "benchmark": "sweep_dask", "points": a.points, "iterations": iters, "workers": a.workers,
        "serial_s": round(t_serial, 2), "dask_s": round(t_dask, 2), "ratio": round(t_dask / t_serial, 3),
        "overhead_per_task_s": round(per_task, 3),
        "serial_busy": round(busy1 / t_serial, 3), "dask_busy": round(busy2 / (t_dask * a.workers), 3),
        "run_s_serial": round(busy1 / a.points, 3), "run_s_dask": round(busy2 / a.points, 3),
        "identical_metrics": same_metrics(s1, s2), "host": host(),
    }
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v}")


if __name__ == "__main__":
    main()
