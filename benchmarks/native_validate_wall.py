"""Wall time of ``mmsim validate`` (target: at most 3 minutes), per case and in total.

Usage: .venv/bin/python benchmarks/native_validate_wall.py [--machine NAME|FILE] [--json]

Prints, for each validation case, the wall seconds of its native runs plus
its simulation, and the total. Asserts nothing: results go to
docs/performance.md with the date and machine.
"""

from __future__ import annotations

import argparse
import json
import time

from mmsim.native.validate import validate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", default="host")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    marks: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    rows = validate(args.machine, log=lambda name: marks.append((name, time.perf_counter())))
    total = time.perf_counter() - t0
    ends = [t for _, t in marks[1:]] + [t0 + total]
    per_case = {name: round(end - start, 2) for (name, start), end in zip(marks, ends, strict=True)}
    simulated = sum(1 for r in rows if r["simulated"] is not None)
    if args.json:
        print(json.dumps({"total_seconds": round(total, 2), "cases": per_case, "simulated_cases": simulated}))
        return
    for name, s in per_case.items():
        print(f"{name:34s} {s:8.2f} s")
    print(f"{'total':34s} {total:8.2f} s  ({simulated} of {len(rows)} cases simulated in this build)")


if __name__ == "__main__":
    main()
