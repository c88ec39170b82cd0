"""Wall time and peak host RSS of `mmsim reproduce ID` (default split-pmd-ptl).

Usage: python benchmarks/reproduce_wall_rss.py [ID] [--json]
Runs in a fresh interpreter so the RSS is the reproduction's own.
"""

from __future__ import annotations

import json
import resource
import sys
import time


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    exp = args[0] if args else "split-pmd-ptl"
    from mmsim.experiments.reproduce import reproduce

    t0 = time.perf_counter()
    (o,) = reproduce([exp])
    wall = time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    events = sum(r.sim["events"] for r in o.arms.values())
    out = {"experiment": exp, "wall_seconds": round(wall, 2), "max_rss_mib": round(rss_mib, 1),
           "events": events, "events_per_second": round(events / wall), "ok": o.ok}
    if "--json" in sys.argv:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")


if __name__ == "__main__":
    main()
