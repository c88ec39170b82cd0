"""What-if analysis of `mmsim reproduce autonuma-scan` (issue 18): how the
scan-share change and the absolute share move with the quantities the
sources do not fix.

Not part of the model: each variant changes one thing *in this process only*
and runs the normal-mode pair (v5.4 page-first, v5.5 protnone-first) of the
LKP pmbench-dcpmm job. Variants:

* ``model``: the experiment as committed (PMEM 2 x 128 GB per socket).
* ``pmem-1x128`` .. ``pmem-6x128``, ``pmem-4x256``: other Optane capacities per socket
  (presets_numa.with_pmem): the hot-added node's memmap comes out of the same socket's DRAM.
* ``bind-cpu-nodes``: LKP's ``even%0-1`` (the reading where only the CPU nodes are counted: 8 processes run).
* ``window-200`` / ``window-800``: the window (one pass) starts at 200 s / 800 s, not 450 s.
* ``window-60``: a 60 s window instead of one pass.
* ``pattern-0.5x`` / ``pattern-2x``: normal_ih's generator cost (an estimate, 150 cycles).
* ``mlp-0.5x`` / ``mlp-2x``: the overlap of struct page misses in change_pte_range (STRUCT_PAGE_MLP, 5).
* ``checks-0.5x`` / ``checks-2x``: the page checks after vm_normal_page (SCAN_PAGE_CHECKS, an estimate).

Usage: python benchmarks/autonuma_scan_sweep.py [VARIANT ...]   (no variant: all)
Prints a markdown table (docs/autonuma-scan.md).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from mmsim.experiments.exp_autonuma_scan import PARAMS, POLICIES
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.machine.presets_numa import with_pmem
from mmsim.mm import mprotect
from mmsim.mm.system import System
from mmsim.workloads import pmbench
from mmsim.workloads.base import get_workload, resolve_params

VARIANTS = ["model", "pmem-1x128", "pmem-4x128", "pmem-6x128", "pmem-4x256", "bind-cpu-nodes", "window-200",
            "window-800", "window-60", "pattern-0.5x", "pattern-2x", "mlp-0.5x", "mlp-2x", "checks-0.5x", "checks-2x"]


def arm(machine: Any, kernel: str, params: dict[str, str]) -> dict[str, float]:
    w = get_workload("pmbench")
    p = resolve_params(w, params)
    s = System(machine, resolve(kernel, overrides=dict(POLICIES)), seed=0)
    w.setup(s, p)
    s.engine.run()
    return w.metrics(s, p)


def variant(name: str) -> tuple[str, dict[str, float], dict[str, float]]:
    machine = get_machine("cascadelake-optane-2s")
    params = dict(PARAMS)
    saved = (dict(pmbench.PATTERN_CYC), mprotect.STRUCT_PAGE_MLP, mprotect.SCAN_PAGE_CHECKS)
    try:
        if name.startswith("pmem-"):
            k, gb = name[5:].split("x")
            machine = with_pmem(int(k), int(gb))
        elif name == "bind-cpu-nodes":
            params["cpu_node_bind"] = "even%0-1"
        elif name == "window-60":
            params["window"] = "60"
        elif name.startswith("window-"):
            params["window_start"] = name[7:]
        elif name.startswith("pattern-"):
            pmbench.PATTERN_CYC["normal_ih"] = int(150 * float(name[8:-1]))
        elif name.startswith("mlp-"):
            mprotect.STRUCT_PAGE_MLP = 5 * float(name[4:-1])  # type: ignore[assignment]
        elif name.startswith("checks-"):
            f = float(name[7:-1])
            mprotect.SCAN_PAGE_CHECKS = (int(25 * f), int(35 * f))
        elif name != "model":
            raise SystemExit(f"unknown variant {name}")
        a = arm(machine, "v5.4", params)
        b = arm(machine, "v5.5", params)
    finally:
        pmbench.PATTERN_CYC.clear()
        pmbench.PATTERN_CYC.update(saved[0])
        mprotect.STRUCT_PAGE_MLP, mprotect.SCAN_PAGE_CHECKS = saved[1], saved[2]
    return name, a, b


def main() -> None:
    names = sys.argv[1:] or VARIANTS
    print("| variant | started | pages DRAM / PMEM | protnone at scan | scan share v5.4 → v5.5 | change | "
          "throughput (M acc/s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in names:
        t0 = time.perf_counter()
        _, a, b = variant(n)
        sa, sb = a["autonuma.scan_share_pct"], b["autonuma.scan_share_pct"]
        dram = a["pmbench.pages_node0"] + a["pmbench.pages_node1"]
        pm = a["pmbench.pages_node2"] + a["pmbench.pages_node3"]
        f = 100 * a["autonuma.scan_protnone_skipped"] / max(1.0, a["autonuma.scan_ptes_present"])
        print(f"| {n} | {a['pmbench.processes_started']:.0f} | {dram / 2**18:.1f} / {pm / 2**18:.1f} GiB | {f:.1f}% | "
              f"{sa:.3f}% → {sb:.3f}% | {100 * (sb - sa) / sa:+.1f}% | {a['pmbench.throughput.aps'] / 1e6:.1f} |"
              f"  <!-- {time.perf_counter() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
