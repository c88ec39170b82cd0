"""Host CPU time per engine event, per workload: the figures behind ``WALL_US_PER_EVENT`` in
``mmsim.experiments.guard`` (the resource guard's wall-time estimate).

Each case runs twice in this process and the second run is timed (``ru_utime + ru_stime``), so the lazy imports
of a first run (``WALL_FIXED_S``) are not in the figure. Run it on a quiet host; the full list (the
sgi-uv2000-512 thp_memscale arm included) takes ~4 minutes here.

    .venv/bin/python benchmarks/guard_wall_per_event.py [--quick]
"""

from __future__ import annotations

import argparse
import resource

from mmsim.experiments.run import RunSpec, run

Case = tuple[str, str, dict[str, str], dict[str, str], str]
QUICK: list[Case] = [
    ("tiny", "will-it-scale/page_fault1", {"nr_task": "3", "memsize": "4m"}, {"thp": "never"}, "v4.14"),
    ("tiny", "will-it-scale/page_fault2", {"nr_task": "3", "memsize": "4m"}, {}, "v4.14"),
    ("tiny", "will-it-scale/page_fault3", {"nr_task": "3", "memsize": "4m"}, {}, "v4.14"),
    ("tiny", "will-it-scale/malloc1", {"nr_task": "3"}, {}, "v4.14"),
    ("tiny", "lmbench/bw_unix", {"pairs": "2", "bytes": "8m", "msg": "1m"}, {}, "v4.14"),
    ("tiny", "vm-scalability/anon-w-seq", {"nr_task": "4", "size": "96m"}, {"thp": "never"}, "v4.14"),
    ("tiny", "vm-scalability/anon-w-seq-mt", {"nr_task": "4", "size": "96m"}, {"thp": "never"}, "v4.14"),
    ("tiny", "vm-scalability/anon-r-seq", {"nr_task": "3", "size": "12m"}, {}, "v4.14"),
    ("tiny", "vm-scalability/anon-cow-seq", {"nr_task": "3", "size": "6m"}, {"thp": "never"}, "v4.14"),
    ("tiny", "vm-scalability/shm-pread-seq", {"nr_task": "4", "size": "32m"}, {}, "v4.14"),
    ("tiny", "thp_memscale", {"threads": "3", "bytes": "6m"}, {"thp": "never"}, "v4.14"),
]
FULL: list[Case] = QUICK + [
    ("tiny", "will-it-scale/page_fault1", {"nr_task": "4", "memsize": "16m", "loops": "4"}, {"thp": "never"},
     "v4.14"),
    ("icelake-6338-2s", "will-it-scale/page_fault1", {"nr_task": "16", "memsize": "8m"}, {"thp": "never"}, "v4.14"),
    ("icelake-6338-2s", "will-it-scale/page_fault2", {"nr_task": "16", "memsize": "8m"}, {}, "v4.14"),
    ("icelake-6338-2s", "will-it-scale/page_fault3", {"nr_task": "16", "memsize": "8m"}, {}, "v4.14"),
    ("tiny", "will-it-scale/malloc1", {"nr_task": "3", "loops": "2000"}, {}, "v6.6"),
    ("tiny", "lmbench/bw_unix", {"pairs": "1", "bytes": "2m", "msg": "32k"}, {}, "v4.14"),
    ("icelake-6338-2s", "lmbench/bw_unix", {"pairs": "16", "bytes": "16m", "msg": "1m"}, {}, "v4.14"),
    ("xeon-phi-7295", "vm-scalability/anon-w-rand", {"size": "128m"}, {}, "v4.14"),
    ("xeon-phi-7295", "vm-scalability/anon-w-seq", {"size": "128m"}, {}, "v4.14"),
    ("tiny", "vm-scalability/anon-r-seq", {"nr_task": "3", "size": "128m"}, {}, "v4.14"),
    ("tiny", "vm-scalability/anon-cow-seq", {"nr_task": "3", "size": "64m"}, {"thp": "never"}, "v4.14"),
    ("tiny", "thp_memscale", {"threads": "3", "bytes": "64m"}, {}, "v4.14"),
    ("sgi-uv2000-512", "thp_memscale", {"threads": "512", "bytes": "512m"}, {}, "v3.12"),
]


def _cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the tiny cases only (~1 minute)")
    cases = QUICK if ap.parse_args().quick else FULL
    run(RunSpec("lockstress", "tiny", "v4.14", params={"tasks": "2", "iterations": "10"}), guard=False)
    print(f"{'machine':16s} {'workload':30s} {'params':44s} {'events':>9s} {'cpu s':>8s} {'us/event':>8s}")
    for m, w, p, pol, k in cases:
        t0 = _cpu()
        r = run(RunSpec(w, m, k, policies=pol, params=p), guard=False)
        c = _cpu() - t0
        ev = r.sim["events"]
        ps = ",".join(f"{a}={b}" for a, b in {**p, **pol}.items())
        print(f"{m:16s} {w:30s} {ps:44s} {ev:9d} {c:8.3f} {c / ev * 1e6:8.1f}", flush=True)


if __name__ == "__main__":
    main()
