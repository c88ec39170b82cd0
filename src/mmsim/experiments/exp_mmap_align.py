"""Issue 22, part A: THP alignment of mappings (docs/mmap-align.md; bands set there before the runs).

``mmap-thp-align``: d4148aeab412 ("mm, mmap: limit THP alignment of anonymous mappings to PMD-aligned
sizes", v6.12) on will-it-scale malloc1, 224 processes, 4 x Platinum 8380H: per_process_ops +3888.9%
(robot report 202411072132.a8d2cf0f-oliver.sang@intel.com). Before it, efa7df3e3bb5 aligned glibc's
128 MiB + 4 KiB mapping to 2 MiB, so the chunk-header store faulted in (and cleared) a THP every
iteration; after it the mapping is unaligned, the store takes a 4 KiB page, and munmap's
``lru_lock`` traffic is what is left.

``devzero-thp-align``: 849d5cff4d48 ("/dev/zero: try to align PMD_SIZE for private mapping") on
vm-scalability anon-w-seq-mt, 224 threads, same machine: throughput +4.0%
(robot report 202509281337.d1edd7ab-lkp@intel.com).
"""

from __future__ import annotations

from mmsim.experiments.reproduce import Check, Experiment, register
from mmsim.experiments.run import RunResult, RunSpec

MACHINE = "cooperlake-8380h-4s"
GHZ = 2.9  # the preset's clock (cycles -> ns of the lock wait shares)
MALLOC1 = "will-it-scale/malloc1"
PPO = "will-it-scale.per_process_ops"
USEMEM_MT = "vm-scalability/anon-w-seq-mt"
TPUT = "vm-scalability.throughput"
LRU = "&lruvec->lru_lock"


def _change(a: float, b: float) -> float:
    return 100.0 * (b - a) / a if a else 0.0


def _share(r: RunResult, symbol: str) -> float:
    tot = r.perf.get("cycles", 0.0)
    cyc = sum(p["cycles"] for p in r.profile if p["symbol"] == symbol)
    return 100.0 * cyc / tot if tot else 0.0


def _lock_wait_share(r: RunResult, name: str) -> float:
    tot = r.perf.get("cycles", 0.0)
    w = r.locks.get(name, {}).get("wait_ns_total", 0)
    return 100.0 * w * GHZ / tot if tot else 0.0


def _per_iter(r: RunResult, key: str) -> float:
    n = r.params.get("nr_task", 1), r.params.get("warmup", 0), r.params.get("loops", 1)
    iters = int(n[0]) * (int(n[1]) + int(n[2]))
    return r.vmstat.get(key, 0) / iters if iters else 0.0


def _top(r: RunResult, k: int = 4) -> str:
    return ", ".join(f"{p['symbol']} {p['percent']:.1f}%" for p in r.profile[:k])


def _eval_malloc1(res: dict[str, RunResult]) -> tuple[list[Check], list[str]]:
    a, b = res["d4148aeab412^"], res["d4148aeab412"]
    pa, pb = a.metrics[PPO], b.metrics[PPO]
    ta, tb = _per_iter(a, "thp_fault_alloc"), _per_iter(b, "thp_fault_alloc")
    ca, cb = _share(a, "clear_page_erms"), _share(b, "clear_page_erms")
    la, lb = _lock_wait_share(a, LRU), _lock_wait_share(b, LRU)
    checks = [
        Check("per_process_ops_change_pct", 3888.9, _change(pa, pb), (1894.0, 7878.0),
              "factor 2 of the published ratio 39.889 (docs/mmap-align.md)"),
        Check("per_process_ops.d4148aeab412^", 351.67, pa, None, "published base 351.67"),
        Check("per_process_ops.d4148aeab412", 14027.0, pb, None, "published patched 14027 +- 22%"),
        Check("thp_faults_per_iteration.d4148aeab412^", 1.0, ta, (1.0, 1.0),
              "every header store faults a THP (thp_fault_alloc / workload ~ 301 over the 300 s run)"),
        Check("thp_faults_per_iteration.d4148aeab412", 0.0, tb, (0.0, 0.0), "thp_fault_alloc -100%"),
        Check("clear_page_erms_pct.d4148aeab412^", 89.46, ca, None, "perf-profile children, base"),
        Check("clear_page_erms_pct.d4148aeab412", 0.20, cb, None, "perf-profile children, patched"),
        Check("lru_lock_wait_pct.d4148aeab412", 36.44 + 36.80, lb, (36.6, 100.0),
              "spinning on lruvec->lru_lock (lru_add_drain + __page_cache_release), factor 2", kind="target"),
        Check("lru_lock_wait_pct.d4148aeab412^", None, la, None),
    ]
    notes = [
        f"THP faults per malloc/free: {ta:.2f} -> {tb:.2f}; clear_page_erms {ca:.1f}% -> {cb:.1f}% of cycles; "
        f"lru_lock spinning {la:.1f}% -> {lb:.1f}%.",
        f"profile d4148aeab412^: {_top(a)}",
        f"profile d4148aeab412: {_top(b)}",
        "Each task runs warmup + loops malloc/free pairs (will-it-scale runs 300 s); the LRU/memcg model "
        "(mm/lru_anon.py) and its line-transfer counts are estimates (docs/mmap-align.md).",
    ]
    return checks, notes


def _malloc1(kernel: str) -> RunSpec:
    return RunSpec(MALLOC1, MACHINE, kernel, params={"nr_task": "224", "mode": "processes", "warmup": "2",
                                                     "loops": "100"}, policies={"thp": "always"})


# The stores to memory: usemem's loop and the clears of new pages, both priced by the node's write bandwidth
WRITE_SYMBOLS = ("usemem [user]", "clear_page_erms")


def _write_bound_line(a: RunResult, band_lo: float) -> str:
    """How much the alignment can gain, from the parent's profile: the commit turns a mapping's unaligned
    head of 4 KiB faults into part of a THP, which removes fault overhead but writes the same bytes. If
    every cycle outside the memory writes went away the run would be ``1 / (1 - other)`` faster."""
    write = sum(float(p["percent"]) for p in a.profile if p["symbol"] in WRITE_SYMBOLS)
    other = max(0.0, 100.0 - write)
    most = 100.0 * (100.0 / max(1e-9, 100.0 - other) - 1.0) if other < 100.0 else float("inf")
    verdict = (f"below the band's +{band_lo:g}%: the run is bound by the write bandwidth, not the faults"
               if most < band_lo else "the band is reachable under this bound")
    return (f"write bound: {write:.1f}% of 849d5cff4d48^'s cycles are the stores and clears (node write "
            f"bandwidth shared by the node's threads), {other:.2f}% everything else; removing all of that "
            f"would gain at most {most:+.2f}%, {verdict}")


def _eval_devzero(res: dict[str, RunResult]) -> tuple[list[Check], list[str]]:
    a, b = res["849d5cff4d48^"], res["849d5cff4d48"]
    ta, tb = a.metrics[TPUT], b.metrics[TPUT]
    fa, fb = a.metrics["vm-scalability.time.minor_page_faults"], b.metrics["vm-scalability.time.minor_page_faults"]
    ha, hb = a.metrics["proc-vmstat.thp_fault_alloc"], b.metrics["proc-vmstat.thp_fault_alloc"]
    checks = [
        Check("throughput_change_pct", 4.0, _change(ta, tb), (1.0, 7.0), "+-3 points (docs/mmap-align.md)"),
        Check("minor_page_faults_change_pct", -53.8, _change(fa, fb), None, "the 4 KiB faults at unaligned heads"),
        Check("thp_fault_alloc_change_pct", -3.5, _change(ha, hb), None),
        Check("throughput.849d5cff4d48^", 83567389.0, ta, None, "KB/s, sum over threads"),
        Check("throughput.849d5cff4d48", 86902230.0, tb, None, "KB/s, sum over threads"),
    ]
    notes = [
        f"minor faults {fa:.0f} -> {fb:.0f}, THP faults {ha:.0f} -> {hb:.0f} (one case run: each of 224 threads "
        "maps and writes MemTotal / 2 / 224 once)",
        _write_bound_line(a, checks[0].band[0] if checks[0].band else 0.0),
        f"profile 849d5cff4d48^: {_top(a)}",
        f"profile 849d5cff4d48: {_top(b)}",
    ]
    return checks, notes


def _usemem(kernel: str) -> RunSpec:
    return RunSpec(USEMEM_MT, MACHINE, kernel, params={"nr_task": "224"}, policies={"thp": "always"})


register(
    Experiment(
        "mmap-thp-align",
        "THP alignment only for PMD-multiple anonymous mappings (d4148aeab412): will-it-scale malloc1, "
        "224 processes, 4 x Platinum 8380H",
        "kernel test robot, 202411072132.a8d2cf0f-oliver.sang@intel.com (7 Nov 2024)",
        {"d4148aeab412^": _malloc1("d4148aeab412^"), "d4148aeab412": _malloc1("d4148aeab412")},
        _eval_malloc1,
    )
)
register(
    Experiment(
        "devzero-thp-align",
        "PMD alignment of private /dev/zero mappings (849d5cff4d48): vm-scalability anon-w-seq-mt, 224 threads, "
        "4 x Platinum 8380H",
        "kernel test robot, 202509281337.d1edd7ab-lkp@intel.com (28 Sep 2025)",
        {"849d5cff4d48^": _usemem("849d5cff4d48^"), "849d5cff4d48": _usemem("849d5cff4d48")},
        _eval_devzero,
    )
)
