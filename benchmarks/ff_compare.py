"""Fast mode against --exact, arm by arm, for one reproduce experiment (issue 20's fidelity table).

Runs every arm of the experiment serially in this process, first in fast mode, then event by
event, and prints each arm's CPU seconds, events and skipped faults, then every check of the
experiment in both modes. CPU time is ``time.process_time`` (the table in docs/performance.md was
taken on a shared VM: compare the columns with each other, not with other tables).

    python benchmarks/ff_compare.py vma-lock-shared-fault
    python benchmarks/ff_compare.py devzero-thp-align --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from mmsim.experiments import reproduce as R
    from mmsim.experiments.run import run

    for mod in R._MODULES:
        importlib.import_module(f"mmsim.experiments.{mod}")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", help=f"one of: {', '.join(sorted(R.EXPERIMENTS))}")
    ap.add_argument("--modes", default="fast,exact", help="comma-separated: fast, exact (default both)")
    ap.add_argument("--json", metavar="FILE", help="also write the checks of each mode to FILE")
    a = ap.parse_args(argv)
    if a.experiment not in R.EXPERIMENTS:
        print(f"ff_compare: experiment: {a.experiment!r}; allowed: {', '.join(sorted(R.EXPERIMENTS))}",
              file=sys.stderr)
        return 2
    modes = a.modes.split(",")
    if any(m not in ("fast", "exact") for m in modes):
        print(f"ff_compare: --modes: {a.modes!r}; allowed: fast, exact (comma-separated)", file=sys.stderr)
        return 2
    exp = R.EXPERIMENTS[a.experiment]
    out: dict[str, dict[str, float | None]] = {}
    for mode in modes:
        res = {}
        cpu0 = time.process_time()
        for arm, spec in exp.arms.items():
            t = time.process_time()
            res[arm] = run(dataclasses.replace(spec, exact=(mode == "exact")))
            print(f"{mode} {arm}: {time.process_time() - t:.1f} s CPU, events {res[arm].sim.get('events'):,}, "
                  f"faults skipped {res[arm].sim.get('ff_skipped_ops', 0):,}", flush=True)
        checks, _ = exp.evaluate(res)
        out[mode] = {c.metric: c.simulated for c in checks}
        print(f"{mode}: {time.process_time() - cpu0:.1f} s CPU in all", flush=True)
    for metric in out[modes[0]]:
        print(f"  {metric}: " + "  ".join(f"{m} {out[m][metric]}" for m in modes))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
