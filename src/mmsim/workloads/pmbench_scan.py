"""The NUMA-balancing scanner's steady state at the start of a pmbench window.

``task_numa_work`` (kernel/sched/fair.c, v5.4) hands ``change_prot_numa``
ranges of ``scan_size_mb`` (256 MB = 65,536 pages) from ``mm->numa_scan_offset``;
a range with at least one PTE update ends the scan, a range without one lets
it go on, up to 8 ranges (``virtpages``). A scan runs every
``numa_scan_period``; running off the map ends a pass (``numa_scan_seq++``),
and the first hinting fault of the next pass runs ``task_numa_placement`` →
``update_task_scan_period``: with all faults private (one worker thread per
map) the period grows by 3 slots (+30%) per pass, and doubles when a
migration failed (v5.4: ``numa_faults_locality[2]``), clamped to
``task_scan_min`` / ``task_scan_max`` (100 ms and 60 s / 54 windows = 1,111 ms
for a 13.5 GiB map). With no hinting fault at all (the tiering mode on a map
wholly in DRAM) the period stays at ``task_scan_min``.

:func:`schedule` follows that from the first scan (``scan_delay`` = 1 s)
pass by pass, with the per-page access rates of the pattern: a range is
taken to have updates when the chance that one of its eligible pages was
touched since the previous pass is over one half. :func:`init_steady_state`
then sets a process's scanner (period, offset, sequence, next scan) and its
PTEs as they are at ``t0``: an eligible page (every present page in the
normal mode, since pmbench's two threads make ``mm_users`` 2; only the
slow-tier pages in the tiering mode) is protnone when it was not touched
since the scan that covered it, with probability ``exp(-λ_i · age)``.
In the tiering mode the placement is taken as converged: the hottest pages
of a process that has pages on both tiers are the ones in DRAM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mmsim.mm import migrate as mmigrate
from mmsim.mm.mprotect import mem_latency_ns
from mmsim.sched import numa_balancing as nb

PAGE_SHIFT = 12


@dataclass
class Schedule:
    period_ms: int  # numa_scan_period at t0
    period_max_ms: int
    passes: int  # completed passes before t0
    pass_start_s: float  # when the current pass began
    scans_per_pass: int
    range_scan: np.ndarray  # scan index (within a pass) of each range
    history: list[tuple[float, int]]  # (pass start s, period ms)


def range_layout(hot: np.ndarray) -> tuple[np.ndarray, int]:
    """Scan index of each range in one pass: a scan ends at a range with
    updates or after 8 ranges (``virtpages = pages * 8``)."""
    out = np.zeros(len(hot), dtype=np.int64)
    k = cnt = 0
    for r, h in enumerate(hot.tolist()):
        out[r] = k
        cnt += 1
        if h or cnt == 8:
            k += 1
            cnt = 0
    return out, k + (1 if cnt else 0)


def schedule(s: Any, mm: Any, lam: np.ndarray, eligible: np.ndarray, fails: bool, t0_s: float,
             range_pages: int) -> Schedule:
    """The scan period and pass layout from the first scan to ``t0_s`` (see the module docstring).
    ``lam``: accesses per second to each page of the map; ``eligible``: pages the scanner makes protnone."""
    pmin = nb.task_scan_min(s, mm)
    pmax = nb.task_scan_max(s, mm)
    delay_s = int(s.policy("numa_balancing_scan_delay_ms")) / 1000
    nr = -(-len(lam) // range_pages)
    pad = nr * range_pages - len(lam)
    lam_r = np.pad(lam * eligible, (0, pad)).reshape(nr, range_pages).sum(axis=1)
    p = pmin
    t = delay_s
    hot = lam_r > 0  # the first pass after -i: every present PTE is still to be updated
    hot |= np.pad(eligible, (0, pad)).reshape(nr, range_pages).any(axis=1)
    passes = 0
    history: list[tuple[float, int]] = []
    any_faults = bool(lam_r.sum() > 0)
    while True:
        layout, nscans = range_layout(hot)
        tp = nscans * p / 1000
        history.append((t, p))
        if t + tp > t0_s or passes > 100_000:
            return Schedule(p, pmax, passes, t, nscans, layout, history)
        t += tp
        passes += 1
        if any_faults:
            if fails:
                p = min(pmax, p << 1)
            else:
                p = min(max(p + 3 * -(-p // nb.NUMA_PERIOD_SLOTS), pmin), pmax)
        hot = -np.expm1(-lam_r * tp) > 0.5


def access_ns(s: Any, cpu: int, probs: np.ndarray, nid: np.ndarray, over_ns: float) -> float:
    """Mean time of one pmbench access (loop overhead + memory latency of the page's node)."""
    m = s.machine
    lat = np.array([mem_latency_ns(s, cpu, n) for n in range(len(m.nodes))])
    return float(over_ns + probs @ lat[np.maximum(nid, 0)])


def init_steady_state(s: Any, t: Any, mm: Any, pr: dict[str, Any], run: Any, t0_s: float) -> None:
    """Set the scanner and PTE state of process ``pr`` (worker ``t``) as at ``t0_s``."""
    m = s.machine
    dense = pr["dense"]
    n = run.mappages
    sl = slice(pr["page0"], pr["page0"] + n)
    nid = dense.nid[sl]
    here = m.cpu_node(t.cpu)
    tiering = nb.tiering(s)
    if tiering:
        converge_tiers(nid, run.probs, here)
    top = s.numa_toptier[np.maximum(nid, 0)]
    eligible = (nid >= 0) & ~top if tiering else nid >= 0
    wl = run.wl
    over_ns = (wl.RDTSCP_PAIR_CYC + wl.HISTO_LOOP_CYC + wl.PATTERN_CYC[run.p["pattern"]] + run.p["delay"]) \
        / m.freq_ghz
    rate_s = 1e9 / access_ns(s, t.cpu, run.probs, nid, over_ns)
    lam = rate_s * run.probs
    z = s.page_alloc.zones[here]
    remote = eligible & (nid != here)
    fails = bool(remote.any()) and z.free_pages <= mmigrate.high_wmark_pages(s, here)
    range_pages = int(s.policy("numa_balancing_scan_size_mb")) << (20 - PAGE_SHIFT)
    sch = schedule(s, mm, lam, eligible, fails, t0_s, range_pages)
    p_s = sch.period_ms / 1000
    e = t0_s - sch.pass_start_s
    k0 = min(int(e / p_s), sch.scans_per_pass - 1)
    tp = sch.scans_per_pass * p_s
    rs = sch.range_scan
    age_r = np.where(rs < k0, e - rs * p_s, e + tp - rs * p_s)
    age = np.repeat(age_r, range_pages)[:n]
    rng = s.engine.rng.stream(f"pmbench.{pr['id']}/state")
    untouched = rng.random(n) < np.exp(-lam * age)
    prot = dense.protnone[sl]
    prot[:] = eligible & untouched
    dense.scan_ms[sl] = np.where(prot, -age * 1000.0, 0.0)
    dense.last_cpu[sl] = t.cpu
    # the scanner's fields (sim time 0 = t0)
    nt: nb.NumaTask = t.data["numa"]
    st: nb.NumaMm = s.numa_mm[id(mm)]
    nt.scan_period_ms = sch.period_ms
    nt.scan_period_max_ms = sch.period_max_ms
    st.scan_seq = nt.scan_seq = sch.passes
    first_range = int(np.searchsorted(rs, k0))
    st.scan_offset = pr["vma"].start + (first_range * range_pages << PAGE_SHIFT)
    nxt = max(1, int(((k0 + 1) * p_s - e) * 1e9))
    st.next_scan_ns = nxt
    nt.node_stamp_ns = nxt - sch.period_ms * 1_000_000 or -1
    pr["schedule"] = sch
    pr["protnone_t0_pct"] = 100.0 * float(prot.sum()) / max(1, int((nid >= 0).sum()))


def converge_tiers(nid: np.ndarray, probs: np.ndarray, here: int) -> None:
    """Tiering steady state: of a process's pages, the ``D`` it holds in DRAM
    (node ``here``) are its ``D`` most accessed; the rest keep the slow-tier nodes
    they had, in the same numbers."""
    on = nid == here
    d = int(on.sum())
    if d == 0 or d == int((nid >= 0).sum()):
        return
    others = nid[~on & (nid >= 0)].copy()
    order = np.argsort(-probs, kind="stable")
    valid = order[nid[order] >= 0]
    nid[valid[:d]] = here
    nid[valid[d:]] = np.sort(others)


def scan_period_table(s: Any, sch: Schedule, t0_s: float) -> list[tuple[float, int]]:
    """(pass start, period) pairs up to ``t0_s`` (for the docs)."""
    return [(round(a, 1), b) for a, b in sch.history if a <= t0_s]
