"""clear-order's nr_task sweep with the LLC's replacement policy as a sensitivity (issue 17).

Usage: python benchmarks/clear_order_replacement.py [lru|random] [NR_TASK ...]

Runs vm-scalability/anon-w-seq on xeon-e5-2699v3-2s, v4.13 vs v4.14, THP always, default size, with
machine/cacheorg.py's entry for the machine given ``replacement`` (lru: Smith's formula, the preset;
random: e^(-d / capacity), 7-cpu.com's reading of Ivy Bridge's LLC). Prints one line per nr_task.
"""

from __future__ import annotations

import dataclasses
import sys

from mmsim.experiments.run import RunSpec, run
from mmsim.machine import cacheorg

MACHINE = "xeon-e5-2699v3-2s"


def main() -> None:
    policy = sys.argv[1] if len(sys.argv) > 1 else "lru"
    if policy not in ("lru", "random"):
        print(f"replacement: invalid value {policy!r}; allowed: lru, random", file=sys.stderr)
        raise SystemExit(2)
    cacheorg.CACHE_ORG[MACHINE] = dataclasses.replace(cacheorg.CACHE_ORG[MACHINE], replacement=policy)
    for nt in sys.argv[2:] or ["4", "18", "36", "54", "72"]:
        tput = {}
        rate = {}
        for k in ("v4.13", "v4.14"):
            r = run(RunSpec("vm-scalability/anon-w-seq", MACHINE, k, params={"nr_task": nt},
                            policies={"thp": "always"}))
            tput[k] = r.metrics["vm-scalability.throughput"]
            rate[k] = r.perf["cache-misses"] / max(1.0, r.perf["cache-references"])
        ch = 100.0 * (tput["v4.14"] - tput["v4.13"]) / tput["v4.13"]
        print(f"{policy} nr_task={nt}: throughput {ch:+.1f}%, LLC miss rate "
              f"{100 * rate['v4.13']:.1f}% -> {100 * rate['v4.14']:.1f}%", flush=True)


if __name__ == "__main__":
    main()
