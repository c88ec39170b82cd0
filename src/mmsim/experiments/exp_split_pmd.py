"""split-pmd-ptl: seeds/001, split PMD page table locks on a 512-core SGI UV 2000."""

from __future__ import annotations

from mmsim.experiments.reproduce import Check, Experiment, change_pct_ci95, register
from mmsim.experiments.run import RunResult, RunSpec

# seeds/001's perf stat of the v3.12 arm
PUB_INSNS_V312 = 53855178678230
PUB_CYCLES_V312 = 1306612476049478


def _ptl_wait_share(r: RunResult) -> float:
    """Share of CPU time spent waiting for the PMD-level page table lock(s)."""
    return r.lock_wait_share("&mm->page_table_lock") + r.lock_wait_share("ptlock_ptr(pmd page)")


def _eval_split_pmd(res: dict[str, RunResult]) -> tuple[list[Check], list[str]]:
    a, b = res["v3.12"], res["v3.13"]
    ta = a.metrics["thp_memscale.elapsed_seconds"]
    tb = b.metrics["thp_memscale.elapsed_seconds"]
    sa, sb = _ptl_wait_share(a), _ptl_wait_share(b)
    ca, cb = a.perf["context-switches"], b.perf["context-switches"]
    # the fast mode's 95% half-widths of the two elapsed times (None for an exact arm), and the ratio's: that of
    # the change from v3.13 to v3.12, as a fraction (independent arms, relative errors in quadrature)
    ea, eb = a.sim.get("elapsed_ci95_seconds"), b.sim.get("elapsed_ci95_seconds")
    er = change_pct_ci95(tb, eb, ta, ea)
    er = None if er is None else er / 100.0
    checks = [
        Check("speedup", 1075.909782795 / 29.694499652, ta / tb, (18.0, 72.0), "v3.12 elapsed / v3.13 elapsed",
              ci95=er),
        Check("ptl_wait_share.v3.12", None, sa, (0.5, 1.0), "most cycles wait for the PMD lock on v3.12"),
        Check("ptl_wait_share.v3.13", None, sb, (0.0, 0.1 * sa), "collapses to under a tenth of v3.12's"),
        Check(
            "context_switch_drop",
            1491589 / 127507,
            ca / cb if cb else float("inf"),
            (5.0, float("inf")),
            "v3.12 / v3.13 context switches: an extra target, not one of the bands that decide PASS",
            kind="target",
        ),
        Check("elapsed_seconds.v3.12", 1075.909782795, ta, None, ci95=ea),
        Check("elapsed_seconds.v3.13", 29.694499652, tb, None, ci95=eb),
        Check("context_switches.v3.12", 1491589, ca, None),
        Check("context_switches.v3.13", 127507, cb, None),
        Check("page_faults.v3.12", 400822, a.perf["page-faults"], None),
        Check("page_faults.v3.13", 302080, b.perf["page-faults"], None),
        # The rest of each arm's perf stat (seeds/001): where the absolute gap is. No band: shown so that
        # a user sees which counter the model misses and by how much (docs/locks.md, session 12).
        Check("instructions.v3.12", PUB_INSNS_V312, a.perf["instructions"], None),
        Check("instructions.v3.13", 2686490067197, b.perf["instructions"], None),
        Check("cycles.v3.12", PUB_CYCLES_V312, a.perf["cycles"], None),
        Check("cycles.v3.13", 18925875973975, b.perf["cycles"], None),
        Check("task_clock_seconds.v3.12", 568668.865944994, a.perf["task-clock"] / 1000, None),
        Check("task_clock_seconds.v3.13", 15836.198490485, b.perf["task-clock"] / 1000, None),
    ]
    notes = [
        f"v3.12: {100 * sa:.1f}% of CPU time waiting for &mm->page_table_lock "
        f"({a.locks['&mm->page_table_lock']['contentions']:,} contentions); top symbol {a.profile[0]['symbol']}"
        f" {a.profile[0]['percent']:.1f}%",
        f"v3.13: {100 * sb:.2f}% waiting for page-table locks: split ptlock_ptr(pmd page) "
        f"{100 * b.lock_wait_share('ptlock_ptr(pmd page)'):.2f}%, &mm->page_table_lock (__pmd_alloc only) "
        f"{100 * b.lock_wait_share('&mm->page_table_lock'):.2f}% "
        f"({b.locks['&mm->page_table_lock']['contentions']:,} contentions); top symbol "
        f"{b.profile[0]['symbol']} {b.profile[0]['percent']:.1f}%",
    ]
    ln = a.locks["&mm->page_table_lock"].get("line")
    if ln:  # the line the v3.12 convoy is on, as perf c2c would show it (docs/locks.md, session 26)
        w = ln["writes"]
        notes.append(
            f"v3.12: its cache line (mm_struct's, with mmap_sem's count): {w:,} writes; "
            f"{100 * ln['queued'] / w:.1f}% queued behind earlier writes and their re-read storms, "
            f"{ln['queue_wait_ns_avg'] / 1e3:,.1f} µs on average; {100 * ln['storms'] / w:.1f}% set off a storm "
            f"({ln['spinners_per_storm']:.0f} spinners on average, each stalled "
            f"{ln.get('reread_stall_ns_avg', 0.0) / 1e3:,.2f} µs until its re-read: IPC {a.perf['ipc']:.3f}, "
            f"published {PUB_INSNS_V312 / PUB_CYCLES_V312:.3f}); {100 * ln['window_local'] / w:.1f}% completed "
            f"in the writer's own window")
    for arm, r in (("v3.12", a), ("v3.13", b)):
        mc = r.locks.get("mm->mmap_cache")
        if mc and mc.get("acquisitions"):  # find_vma's shared cache before v3.15 (docs/locks.md, session 31)
            n = mc["acquisitions"]
            notes.append(
                f"{arm}: mm->mmap_cache (find_vma, mm_struct's first line): {n:,} lookups, "
                f"{100 * mc.get('misses', 0) / n:.1f}% missed and stored, "
                f"{100 * mc['contentions'] / n:.1f}% waited for the line "
                f"({mc['wait_ns_total'] / max(1, mc['contentions']):,.0f} ns on average)")
    return checks, notes


_SPLIT_PARAMS = {"threads": "512", "bytes": "512m"}

register(
    Experiment(
        "split-pmd-ptl",
        "split PMD page table lock (e009bb30c8df): thp_memscale -c 512 -b 512m, THP on, SGI UV 2000",
        "seeds/001 (Kirill A. Shutemov, Alex Thorlton, linux-mm 2013-10-04)",
        {
            "v3.12": RunSpec("thp_memscale", "sgi-uv2000-512", "v3.12", params=_SPLIT_PARAMS),
            "v3.13": RunSpec("thp_memscale", "sgi-uv2000-512", "v3.13", params=_SPLIT_PARAMS),
        },
        _eval_split_pmd,
    )
)
