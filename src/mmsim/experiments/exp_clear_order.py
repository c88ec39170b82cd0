"""clear-order: seeds/000, clear the target sub-page of a huge page last.

c79b57e462b5 ("mm: hugetlb: clear target sub-page last when clearing huge
page", v4.14) on a 2 x Xeon E5-2699 v3 with vm-scalability anon-w-seq, 72
processes, THP always: throughput +28.3%, LLC miss rate 33.4% -> 31.7%, IPC
0.56 -> 0.74, user time -7.9%. Kirill Shutemov asked about 4 processes,
where the LLC is not the bottleneck; the experiment runs that pair too.
Both arms run the full published scale: MemTotal / 2 = 64 GiB written by
72 processes (0.89 GiB each).
"""

from __future__ import annotations

from mmsim.experiments.reproduce import Check, Experiment, register
from mmsim.experiments.run import RunResult, RunSpec

MACHINE = "xeon-e5-2699v3-2s"
WORKLOAD = "vm-scalability/anon-w-seq"
TPUT = "vm-scalability.throughput"


def _miss_rate(r: RunResult) -> float:
    refs = r.perf["cache-references"]
    return r.perf["cache-misses"] / refs if refs else 0.0


def _ipc(r: RunResult) -> float:
    return r.perf["instructions"] / r.perf["cycles"] if r.perf["cycles"] else 0.0


def _change(a: float, b: float) -> float:
    return 100.0 * (b - a) / a if a else 0.0


def _eval(res: dict[str, RunResult]) -> tuple[list[Check], list[str]]:
    a, b = res["v4.13"], res["v4.14"]
    a4, b4 = res["v4.13/4"], res["v4.14/4"]
    ta, tb = a.metrics[TPUT], b.metrics[TPUT]
    ma, mb = _miss_rate(a), _miss_rate(b)
    ia, ib = _ipc(a), _ipc(b)
    ua, ub = a.metrics["vm-scalability.time.user_time"], b.metrics["vm-scalability.time.user_time"]
    c4 = _change(a4.metrics[TPUT], b4.metrics[TPUT])
    ra4, rb4 = a4.perf["cache-references"], b4.perf["cache-references"]
    checks = [
        Check("throughput_change_pct", 28.3, _change(ta, tb), (15.0, 45.0), "v4.14 vs v4.13, 72 processes"),
        Check("llc_miss_rate.v4.13", 0.334, ma, (0.234, 0.434),
              "perf cache-misses / cache-references (LONGEST_LAT_CACHE on Haswell-EP), +-10 points"),
        Check("llc_miss_rate.v4.14", 0.317, mb, (0.217, 0.417), "+-10 points of the published rate"),
        Check("llc_miss_rate_drop_pct_points", 33.4 - 31.7, 100 * (ma - mb), (0.0, float("inf")),
              "LLC miss rate must go down"),
        Check("ipc.v4.13", 0.56, ia, (0.56 * 0.7, 0.56 * 1.3), "+-30%"),
        Check("ipc.v4.14", 0.74, ib, (0.74 * 0.7, 0.74 * 1.3), "+-30%"),
        Check("ipc_change_pct", _change(0.56, 0.74), _change(ia, ib), (0.0, float("inf")), "IPC must go up"),
        Check("throughput_change_pct.4_processes", None, c4, (-5.0, 5.0),
              "issue #3 target: near neutral when the LLC is not contended", kind="target"),
        Check("cache_references_change_pct.4_processes", None, _change(ra4, rb4), (float("-inf"), -1.0),
              "the arms must differ in cache behaviour: target-last leaves the first sub-pages the user "
              "loop touches in the L2, so fewer requests reach the LLC", kind="target"),
        Check("user_time_change_pct", -7.9, _change(ua, ub), None),
        Check("throughput.v4.13", None, ta, None, "KB/s, sum over processes"),
        Check("throughput.v4.14", None, tb, None, "KB/s, sum over processes"),
    ]
    notes = [
        f"{MACHINE}: 45 MiB LLC per socket shared by 36 threads = 1.25 MiB per process; a 2 MiB clear "
        f"overflows it. LLC miss rate {100 * ma:.1f}% -> {100 * mb:.1f}%, IPC {ia:.2f} -> {ib:.2f}.",
        "profile v4.13: " + ", ".join(f"{p['symbol']} {p['percent']:.1f}%" for p in a.profile[:2])
        + "; v4.14: " + ", ".join(f"{p['symbol']} {p['percent']:.1f}%" for p in b.profile[:2]),
        f"4 processes (2 per socket: 22.5 MiB of LLC each; a steady-state window of 2 GiB per process instead "
        f"of the case script's 16 GiB): throughput change {c4:+.1f}%.",
        "Caches: machine/hierarchy.py (private L2, inclusive LLC, L2 streamer, perf's LONGEST_LAT_CACHE "
        "counting); docs/clear-order.md.",
    ]
    return checks, notes


def _spec(kernel: str, nr_task: str, **extra: str) -> RunSpec:
    return RunSpec(WORKLOAD, MACHINE, kernel, params={"nr_task": nr_task, **extra}, policies={"thp": "always"})


register(
    Experiment(
        "clear-order",
        "clear target sub-page last (c79b57e462b5): vm-scalability anon-w-seq, 72 processes, 2 x Xeon E5-2699 v3",
        "seeds/000 (Huang Ying, linux-mm 2017-08-07)",
        {
            "v4.13": _spec("v4.13", "72"),
            "v4.14": _spec("v4.14", "72"),
            "v4.13/4": _spec("v4.13", "4", size="8g"),
            "v4.14/4": _spec("v4.14", "4", size="8g"),
        },
        _eval,
    )
)
