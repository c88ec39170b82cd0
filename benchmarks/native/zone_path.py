"""The zone->lock path per page on this host, natively and in the model (docs/validation-paths.md, session 30).

One process repeats page_fault1's round (``zone_path.c``: mmap SIZE of anonymous memory, a write per 4 KiB
page, munmap) at two PCP sizes, set with ``vm.percpu_pagelist_high_fraction`` (mm/page_alloc.c
``zone_highsize()``; a set fraction also fixes ``high_min = high_max``, so auto-tuning is off):

* **A** (fraction 100000): ``pcp->high`` falls to its floor, 4 x batch (252 pages at batch 63). A round of
  more than ~high pages takes most of its pages through ``rmqueue_bulk`` and gives them back through
  ``free_pcppages_bulk``, batch by batch, under ``zone->lock``.
* **B** (fraction 8): ``pcp->high`` above the round's pages: after the first round every page comes from and
  goes back to the PCP list; no zone->lock.

A - B per page is what the zone->lock round trip (allocation and free, the lock itself, the buddy's
split and merge) costs per page of the round. The same two runs in the model
(``will-it-scale/page_fault1``, ``nr_task=1``, ``memsize=SIZE``, the host's policies with
``pcp_high_min = pcp_high_max`` as /proc/zoneinfo shows them in each setting), on a machine file
(``--machine``; default: ``mmsim calibrate`` into a temporary file first). What else differs between A and
B natively, and so sits in the difference: B's PCP list is as long as the round (its list_del touches
neighbours further apart); the pages of A come back from the buddy in a different order.

Needs root (the sysctl) and a C compiler; restores the sysctl on exit. Prints a table, or ``--json``.

    sudo .venv/bin/python benchmarks/native/zone_path.py [--sizes 2,16] [--pairs 3] [--cpu 1]
    .venv/bin/python benchmarks/native/zone_path.py --model-only --machine host.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

SYSCTL = Path("/proc/sys/vm/percpu_pagelist_high_fraction")
CONFIGS = {"A": 100000, "B": 8}  # fraction: high at its floor (4 x batch) / high above the round
WORK_MIB = 6400  # MiB written per timed run (rounds = WORK_MIB / size)


def pcp_of(cpu: int) -> dict[str, int]:
    """high / batch of ``cpu``'s pageset in the first zone that has pagesets with a high above 0."""
    text = Path("/proc/zoneinfo").read_text()
    for zone in text.split("\nNode "):
        m = re.search(rf"cpu: {cpu}\s+count:\s+(\d+)\s+high:\s+(\d+)\s+batch:\s+(\d+)", zone)
        if m and int(m.group(2)) > 0 and "zone   Normal" in zone:
            return {"count": int(m.group(1)), "high": int(m.group(2)), "batch": int(m.group(3))}
    raise SystemExit("zone_path: /proc/zoneinfo shows no Normal-zone pageset for CPU " + str(cpu))


def native(binary: Path, sizes: list[int], pairs: int, cpu: int) -> dict[str, Any]:
    old = SYSCTL.read_text().strip()
    out: dict[str, Any] = {}
    try:
        for size in sizes:
            rounds = max(20, WORK_MIB // size)
            rows: dict[str, list[list[float]]] = {k: [] for k in CONFIGS}
            highs: dict[str, int] = {}
            for _ in range(pairs):
                for name, frac in CONFIGS.items():
                    SYSCTL.write_text(str(frac))
                    cmd = [str(binary), str(size), str(max(5, rounds // 4)), str(cpu)]
                    subprocess.run(cmd, check=True, capture_output=True)  # warm: the PCP fills to its size
                    highs[name] = pcp_of(cpu)["high"]
                    r = subprocess.run(cmd[:2] + [str(rounds), str(cpu)], check=True, capture_output=True, text=True)
                    rows[name].append([float(x) for x in r.stdout.split()])
            out[str(size)] = {
                name: {"high": highs[name], "min": min(v[0] for v in vals),
                       "p10": statistics.median(v[1] for v in vals), "median": statistics.median(v[2] for v in vals),
                       "pairs": vals}
                for name, vals in rows.items()}
    finally:
        SYSCTL.write_text(old)
    return out


def model(machine: str, sizes: list[int], highs: dict[str, int]) -> dict[str, Any]:
    from mmsim.kernels.catalog import resolve_kernel
    from mmsim.machine import get_machine
    from mmsim.mm.system import System
    from mmsim.native.validate import closest_kernel, host_policies
    from mmsim.workloads.base import get_workload, resolve_params

    w = get_workload("will-it-scale/page_fault1")
    kernel = closest_kernel()
    out: dict[str, Any] = {"kernel": kernel}
    for size in sizes:
        res: dict[str, Any] = {}
        for name, frac in CONFIGS.items():
            pol = {**host_policies(), "thp": "never", "percpu_pagelist_high_fraction": str(frac),
                   "pcp_high_min": str(highs[name]), "pcp_high_max": str(highs[name])}
            system = System(get_machine(machine), resolve_kernel(kernel, (), pol), 0, exact=True)
            p = resolve_params(w, {"nr_task": "1", "mode": "processes", "memsize": f"{size}m", "loops": "8"})
            w.setup(system, p)
            system.engine.run()
            m = w.metrics(system, p)
            st = system.page_alloc.cs_stats
            res[name] = {"ns_per_page": 1e9 / m["will-it-scale.per_process_ops"],
                         "sections": {f: {"count": n, "avg_ns": t / n if n else 0.0} for f, (n, t) in st.items()}}
        out[str(size)] = res
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2,16", help="round sizes in MiB, comma-separated (default 2,16)")
    ap.add_argument("--pairs", type=int, default=3, help="A/B pairs per size, alternated (default 3)")
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1, help="CPU to pin to (default: the last)")
    ap.add_argument("--machine", help="machine file or preset for the model (default: calibrate into a temp file)")
    ap.add_argument("--model-only", action="store_true", help="no native run: highs 4 x batch and 79872")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
        if any(s < 1 for s in sizes):
            raise ValueError
    except ValueError:
        print(f"zone_path: --sizes: MiB as integers >= 1, comma-separated (got {a.sizes!r})", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="zone_path."))
    try:
        nat: dict[str, Any] = {}
        if not a.model_only:
            if os.geteuid() != 0:
                print("zone_path: needs root (it sets vm.percpu_pagelist_high_fraction); or --model-only",
                      file=sys.stderr)
                return 2
            cc = shutil.which("cc") or shutil.which("gcc")
            if cc is None:
                print("zone_path: needs a C compiler (cc or gcc); or --model-only", file=sys.stderr)
                return 2
            binary = tmp / "zone_path"
            subprocess.run([cc, "-O2", "-o", str(binary), str(HERE / "zone_path.c")], check=True)
            nat = native(binary, sizes, a.pairs, a.cpu)
        machine = a.machine
        if machine is None:
            machine = str(tmp / "host.yaml")
            subprocess.run([sys.executable, "-m", "mmsim", "calibrate", "--out", machine], check=True,
                           capture_output=True)
        first = nat[str(sizes[0])] if nat else None
        highs = {k: v["high"] for k, v in first.items()} if first else {"A": 4 * 63, "B": 79872}
        sim = model(machine, sizes, highs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps({"native": nat, "model": sim, "highs": highs}, indent=1))
        return 0
    where = a.machine or "calibrated host"
    print(f"zone->lock path per page: native (CPU {a.cpu}) and model ({sim['kernel']}, {where})")
    print(f"{'MiB':>4} {'cfg':>3} {'high':>6} {'native p10':>10} {'native med':>10} {'model':>8}")
    for size in sizes:
        for name in CONFIGS:
            n = nat.get(str(size), {}).get(name, {})
            print(f"{size:>4} {name:>3} {highs[name]:>6} {n.get('p10', float('nan')):>10.1f} "
                  f"{n.get('median', float('nan')):>10.1f} {sim[str(size)][name]['ns_per_page']:>8.1f}")
        dm = sim[str(size)]["A"]["ns_per_page"] - sim[str(size)]["B"]["ns_per_page"]
        line = f"{size:>4} A-B {'':>6}"
        if nat:
            dp = nat[str(size)]["A"]["p10"] - nat[str(size)]["B"]["p10"]
            dd = nat[str(size)]["A"]["median"] - nat[str(size)]["B"]["median"]
            line += f" {dp:>10.1f} {dd:>10.1f} {dm:>8.1f}   model vs native median {100 * (dm - dd) / dd:+.0f} %"
        else:
            line += f" {'':>10} {'':>10} {dm:>8.1f}"
        print(line)
        for f, s in sim[str(size)]["A"]["sections"].items():
            print(f"      model A {f}: {s['count']} sections, {s['avg_ns']:.0f} ns each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
