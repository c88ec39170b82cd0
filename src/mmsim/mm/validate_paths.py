"""``mmsim validate --suite paths``: level 2 of the validation pyramid, the
model's ``zone->lock`` sections timed on their own (docs/validation-paths.md),
and (issue 22, session 12) its munmap of a populated ``MAP_SHARED`` tmpfs
mapping per page (docs/fault-front-half.md, "Session 12").

The source is upstream 52166607ecc9 ("mm: restrict the pcp batch scale factor
to avoid too long latency", v6.7): ftrace ``function_graph`` averages of the
code under ``zone->lock`` in ``free_pcppages_bulk`` and ``rmqueue_bulk``,
under will-it-scale ``page_fault1``, with PCP high = 2 × batch, free batch
scaling off and the batch hard-coded. The model runs the same (v6.6 with
those settings, THP off, one task: the configuration and its reasons are in
the doc) and reports the average time it charged inside each section:
path instructions plus the line transfers made under the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mmsim.report.tables import Doc, Table, fmt_num

TOLERANCE_PCT = 30.0  # issue 19: batch 63 within +-30 %, and the 2047 / 63 ratio within +-30 %
SOURCE = "52166607ecc9 commit message (ftrace function_graph, will-it-scale page_fault1)"
BATCHES = (63, 2047)
# machine preset -> the commit's server; (batch, section) -> published average, us
PUBLISHED: dict[str, tuple[str, dict[tuple[int, str], float]]] = {
    "icelake-6338-2s": ("Ice Lake Server", {(63, "free"): 2.21, (63, "alloc"): 2.02,
                                            (2047, "free"): 56.54, (2047, "alloc"): 39.28}),
    "sapphirerapids-8480-2s": ("Sapphire Rapids Server", {(63, "free"): 2.33, (63, "alloc"): 2.67,
                                                          (2047, "free"): 59.39, (2047, "alloc"): 45.22}),
    "cascadelake-optane-2s": ("Cascade Lake Server", {(63, "free"): 3.29, (63, "alloc"): 3.53,
                                                      (2047, "free"): 86.64, (2047, "alloc"): 71.14}),
}
SECTION = {"free": "free_pcppages_bulk", "alloc": "rmqueue_bulk"}
PARAMS = {"nr_task": "1", "mode": "processes", "memsize": "128m", "loops": "2"}


def section_times(machine: str, batch: int, params: dict[str, str] | None = None) -> dict[str, float]:
    """The model's average ``free_pcppages_bulk`` / ``rmqueue_bulk`` section in µs, and their counts."""
    from mmsim.kernels.catalog import resolve_kernel
    from mmsim.machine import get_machine
    from mmsim.mm.system import System
    from mmsim.workloads.base import get_workload, resolve_params

    w = get_workload("will-it-scale/page_fault1")
    policies = {"pcp_high": "2xbatch", "pcp_free_factor": "off", "pcp_batch": str(batch), "thp": "never"}
    system = System(get_machine(machine), resolve_kernel("v6.6", (), policies), 0, exact=True)
    w.setup(system, resolve_params(w, {**PARAMS, **(params or {})}))
    system.engine.run()
    st = system.page_alloc.cs_stats
    out: dict[str, float] = {}
    for side, func in SECTION.items():
        n, total = st.get(func, [0, 0])
        out[side] = total / n / 1000 if n else 0.0
        out[f"{side}_sections"] = n
    return out


# Issue 22, session 12: the zap of page_fault3's 128 MiB MAP_SHARED tmpfs mapping, in CPU cycles per page, on
# the kernel test robot's lkp-skl-fpga01 (report 202311151610.43a1e565-oliver.sang@intel.com, patched arm
# 4ed4379881aa, v6.6-based, page_fault3 16 threads): perf-profile children __vm_munmap 4.58% less
# flush_tlb_mm_range 0.34% (its IPIs to the other 15 threads' CPUs; one task here has none) of the cycles,
# perf-stat.ps.cpu-cycles 4.482e10/s over will-it-scale.workload 7,336,336 ops/s = 6,109 cycles per op,
# one op per page. Cycles, not ns: the comparison leaves out the clock (the robot's busy CPUs ran at
# 6,109 cycles / 2.181 us per op = 2.8 GHz, the preset's freq_ghz is the 2.1 GHz base clock).
ZAP_SOURCE = ("robot report 202311151610.43a1e565 (perf-profile __vm_munmap 4.58% - flush_tlb_mm_range 0.34% "
              "of 6,109 cycles per op)")
ZAP_PUBLISHED: dict[str, float] = {"skylake-8170-2s": (4.58 - 0.34) / 100 * 4.482e10 / 7336336}
ZAP_KERNEL = ("v6.6", ("164b06f238b9", "4ed4379881aa"))  # the report's patched arm
ZAP_EXCLUDED = ("flush_tlb_mm_range",)


def zap_cycles(machine: str, memsize: int = 128 << 20, rounds: int = 4) -> dict[str, Any]:
    """The model's ``vm_munmap`` of a populated ``MAP_SHARED`` tmpfs mapping of ``memsize`` (page_fault3's
    round: mmap, a write fault per page, munmap; one task on CPU 0), its last round timed on its own: the
    munmapping CPU's busy time by profile symbol over that call, per page, and in cycles per page without
    :data:`ZAP_EXCLUDED`. The first three rounds fill the page cache and reference and activate its folios
    (mm/zap.py), as will-it-scale's warm-up does."""
    from mmsim.engine.core import Task
    from mmsim.kernels.catalog import resolve_kernel
    from mmsim.machine import get_machine
    from mmsim.mm import memory
    from mmsim.mm.mmap import MmStruct
    from mmsim.mm.munmap import vm_munmap
    from mmsim.mm.shmem import shmem_file_setup
    from mmsim.mm.system import System

    s = System(get_machine(machine), resolve_kernel(*ZAP_KERNEL), 0, exact=True)
    mm = MmStruct(s, home_cpu=0)
    t = Task(0, "page_fault3", cpu=0, mm=mm)
    inode = shmem_file_setup(s, 0, memsize)
    prof = s.counters.prof_ns[0]
    last: dict[str, int] = {}

    def body() -> Any:
        for r in range(rounds):
            vma = yield from mm.do_mmap(t, memsize, anon=False, shared=True, file=inode)
            for addr in range(vma.start, vma.end, 4096):
                yield from memory.handle_mm_fault(t, mm, vma, addr, write=True)
            before = dict(prof)
            yield from vm_munmap(t, mm, vma, [0])
            if r == rounds - 1:
                last.update({k: v - before.get(k, 0) for k, v in prof.items() if v != before.get(k, 0)})

    s.sched.spawn(t, body())
    s.engine.run()
    pages = memsize >> 12
    per_page = {k: v / pages for k, v in sorted(last.items(), key=lambda kv: -kv[1])}
    kept = sum(v for k, v in per_page.items() if k not in ZAP_EXCLUDED)
    return {"ns_per_page": per_page, "total_ns_per_page": sum(per_page.values()),
            "cycles_per_page": kept * s.machine.freq_ghz}


def _row(machine: str, quantity: str, sim: float, ref: float | None, note: str = "",
         source: str = SOURCE) -> dict[str, Any]:
    err = None if ref is None or ref == 0 else round(100.0 * (sim - ref) / ref, 1)
    ok = None if err is None else abs(err) <= TOLERANCE_PCT
    return {"suite": "paths", "machine": machine, "quantity": quantity, "simulated": round(sim, 3),
            "reference": None if ref is None else round(ref, 3), "source": source, "error_pct": err,
            "tolerance_pct": TOLERANCE_PCT if ok is not None else None, "ok": ok, "note": note}


def validate_paths(machines: tuple[str, ...] = (*PUBLISHED, *ZAP_PUBLISHED),
                   log: Callable[[str], None] = lambda s: None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for m in (m for m in machines if m in PUBLISHED):
        server, pub = PUBLISHED[m]
        sim: dict[int, dict[str, float]] = {}
        for b in BATCHES:
            log(f"paths: {m} page_fault1 batch {b}")
            sim[b] = section_times(m, b)
        for side, func in SECTION.items():
            lo, hi = sim[63], sim[2047]
            note = f"vs {server}; {int(lo[side + '_sections']):,} sections"
            rows.append(_row(m, f"{func} batch 63, us", lo[side], pub[(63, side)], note))
            rows.append(_row(m, f"{func} batch 2047, us", hi[side], None,
                             f"published {pub[(2047, side)]} us (no verdict: see the ratio)"))
            ratio = hi[side] / lo[side] if lo[side] else 0.0
            rows.append(_row(m, f"{func} 2047 / 63", ratio, pub[(2047, side)] / pub[(63, side)], f"vs {server}"))
    for m in (m for m in machines if m in ZAP_PUBLISHED):
        ref = ZAP_PUBLISHED[m]
        log(f"paths: {m} munmap of a populated 128 MiB MAP_SHARED tmpfs mapping")
        z = zap_cycles(m)
        rows.append(_row(m, "munmap, MAP_SHARED tmpfs 128 MiB, cycles/page", z["cycles_per_page"], ref,
                         f"vs lkp-skl-fpga01 (v6.6, 4ed4379881aa); without {', '.join(ZAP_EXCLUDED)}; model "
                         f"{z['total_ns_per_page']:.1f} ns/page at the preset's clock", ZAP_SOURCE))
    return rows


def format_paths(rows: list[dict[str, Any]]) -> Doc:
    t = Table(["machine", "quantity", "simulated", "reference", "error %", "ok", "note"],
              align="llrrrll", title="Kernel-path validation (level 2): zone->lock sections vs 52166607ecc9, "
                                     "the shared-file munmap vs the robot's profile")
    for r in rows:
        err, ok = r.get("error_pct"), r.get("ok")
        t.rows.append([str(r["machine"]), str(r["quantity"]), fmt_num(r["simulated"]),
                       "-" if r.get("reference") is None else fmt_num(r["reference"]),
                       "-" if err is None else f"{err:+.1f}", "-" if ok is None else ("ok" if ok else "FAIL"),
                       str(r.get("note", ""))])
    return [t]
