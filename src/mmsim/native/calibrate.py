"""``mmsim calibrate``: measure this host's cost model and write a machine YAML.

Topology, caches and memory sizes come from :func:`mmsim.machine.host.detect_host`
(/sys); the cost model and node bandwidths are replaced by the
microbenchmarks of :mod:`mmsim.native.microbench`, each field's source naming
the benchmark, the raw measurement and the date. What cannot be measured on
this host (SMT hand-off without SMT siblings, remote hand-off with one socket,
memory latency) keeps its estimate, still marked ``estimate``.

How measurements become model fields (the simulator charges a 4 KiB fault as
``page_fault_ns`` + path costs of mm/costs.py + a 4 KiB clear at
``core_clear_gbs``; a wake-up as ``wakeup_ns`` + ``ctx_switch_ns``):

* ``core_clear_gbs`` = 2 MiB / (THP fault time): clear_huge_page dominates a
  THP fault; without THP, one core's streaming store bandwidth (numpy fill).
* ``page_fault_ns`` = 4 KiB *read* fault time (the zero page: no allocation,
  no clear, no folio) - the path costs the model charges on it besides
  (handle_mm_fault, lock_vma_under_rcu, do_anonymous_page/zero). Until issue 15's
  read-fault fix it came from the write fault, so a read fault was charged
  the write fault's folio work.
* ``anon_folio_ns`` = 4 KiB *write* fault time - ``page_fault_ns`` - 4 KiB at
  ``core_clear_gbs`` - the write path costs (handle_mm_fault,
  lock_vma_under_rcu, do_anonymous_page, rmqueue_pcplist): the new folio's
  work the path estimates do not cover (memcg charge, struct page
  preparation, anon rmap, LRU add; mm/memory.py ``anon_folio``).
  Without a read fault, ``page_fault_ns`` comes from the write fault as
  before and ``anon_folio_ns`` stays unset. A residual at or below zero is
  not a cost: the estimate is kept (or the field left unset) and the note
  says so.
* ``line_xfer_*_ns``: median of half a CAS ping-pong round trip between a CPU
  pair of that kind (SMT siblings, two cores of one socket, two sockets).
* ``copy_mlp``: the in-socket ``line_xfer`` / the ns per line of a 64 KiB
  ``rep movsb`` copy (``copy_user_enhanced_fast_string``) of lines the other
  CPU has just written, measured right after the hand-off on the same pair:
  the lines a streaming copy keeps in flight (Little's law), which the AF_UNIX
  skb copies charge (net/skbuff.py ``copy_ns``).
* ``ctx_switch_ns``: median of half a futex ping-pong round trip on one CPU.
* ``wakeup_ns``: the same across two CPUs minus ``ctx_switch_ns``, kept only
  when the difference is larger than the two measurements' spreads. When the
  ping-pong cannot be used (its two sides overlap on a fast vCPU pair, so its
  waits return at once: medians of 100-200 ns seen in session 17), the time
  from ``FUTEX_WAKE`` until a task asleep 20 µs on the other, idle CPU runs
  (native/mb.c ``wakelat``) minus ``ctx_switch_ns``.
* ``wake_ipi_ns``: the median time the waker spends in a ``FUTEX_WAKE`` of a task asleep
  on the other, idle CPU minus a ``FUTEX_WAKE`` that finds no waiter (native/mb.c
  ``wakecost``), minus the wake path the model already charges its callers
  (``try_to_wake_up``: mm/costs.py ``sock_def_readable``, 800 cycles): the reschedule
  IPI, a VM exit on a guest (engine/cpu.py ``wake_up``). Kept at its estimate (0)
  when the residual is not above the spread.
* ``caches[].latency_ns`` / ``nodes[].latency_ns``: pointer chase over half of
  the L1d and the L2, and over 8 x the LLC (at least 256 MiB) for DRAM; the L3's
  from the sweep below, on its measured plateau (``primitives.llc_chase_bytes``).
* ``caches[L3].effective_kib``: the L3 capacity this host's cores get, the knee of a
  pointer chase swept from the L2's size to the reported L3's (:func:`l3_knee`;
  docs/native.md, session 31). Written only below the reported size.
* ``nodes[].read_bw_gbs / write_bw_gbs``: one streaming process per CPU, summed
  (one node per socket; on multi-node hosts every node gets the socket-0 value).

Every measured field's source names the benchmark, its median and its
interquartile range. A measurement that failed (no C compiler, no such CPU
pair) or was too noisy (IQR above half the median) keeps the estimate; the
source says so and so does a note (printed on stderr by the CLI).

When the file being written already holds a calibration of this same host
(:func:`same_host`: the model name, CPU and socket layout and cache sizes
/sys gives), a field whose measurement fails or is too noisy this time keeps
that file's *measurement* instead of the preset estimate, with its original
source and date, prefixed ``previous measurement kept (why)``. A host's own
earlier measurement is nearer to it than an estimate for another machine
(session 10: a failed L3 chase fell back to 21 ns where three measured runs
gave 125-153 ns). Fields the previous file had as estimates stay estimates.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mmsim.machine import yamlio
from mmsim.machine.host import config_path, detect_host, model_to_host_cpus
from mmsim.machine.model import CacheLevel, CostModel, Machine
from mmsim.mm.costs import path
from mmsim.native import microbench as mb
from mmsim.native import safety, sysinfo, tasks

MEASURED = "native measurement: mmsim calibrate "
PREVIOUS = "previous measurement kept "  # + "(why now): " + that measurement's own source
WARMUP_BYTES = 256 << 20
# Paths the model charges on a 4 KiB anonymous write fault besides page_fault_ns, the clear and
# anon_folio_ns (mm/memory.py, mm/vma_lock.py: the host's kernel takes the per-VMA lock, v6.4+).
FAULT_PATHS = ("handle_mm_fault", "lock_vma_under_rcu", "do_anonymous_page", "rmqueue_pcplist")
# ... and on a 4 KiB zero-page read fault besides page_fault_ns.
READ_FAULT_PATHS = ("handle_mm_fault", "lock_vma_under_rcu", "do_anonymous_page/zero")
BUSY_LOAD_PER_CPU = 0.5  # a load average above this per CPU means other work competed for the CPUs
DRAM_CHASE_MIN = 256 << 20  # bytes: DRAM pointer chase at least this, and 8 x the LLC
# The L3 sweep (docs/native.md, session 31): fewer loads per size than the plateau chases (~4 s for the sweep)
SWEEP_SAMPLES = 11
SWEEP_LOADS = 300_000


def measure(log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run every microbenchmark; raw numbers (ns, GB/s) keyed by name, C ones as median/IQR dicts."""
    safety.check_memory("calibrate", max(WARMUP_BYTES, DRAM_CHASE_MIN))
    out: dict[str, Any] = {"loadavg_before": _loadavg()}
    # First touch of memory the hypervisor has not backed (or has taken back: free page reporting)
    # costs extra: warm it once with each page size the fault benchmarks use.
    for thp in ("never", "always"):
        m = tasks.map_anon(WARMUP_BYTES, thp)
        tasks.touch_pages(m)
        m.close()
    host_cpus = [c for c in model_to_host_cpus() if c >= 0]
    allowed = os.sched_getaffinity(0)
    cpus = [c for c in host_cpus if c in allowed]
    machine = detect_host()
    s0 = machine.sockets[0]
    out["topology"] = {"sockets": len(machine.sockets), "cores_per_socket": s0.cores,
                       "threads_per_core": s0.threads_per_core, "host_cpus": host_cpus}
    log("page faults")
    out["passes"] = {"fault_4k_ns": mb.fault_4k_passes(), "fault_4k_read_ns": mb.fault_4k_read_passes(),
                     "fault_thp_ns": mb.fault_thp_passes()}
    log("memory bandwidth")
    out["core_bw_gbs"] = mb.bandwidth_gbs()
    out["all_cpu_bw_gbs"] = mb.all_cpu_bandwidth_gbs(len(cpus))
    out["helper"] = str(mb.helper() or "")
    if not out["helper"]:
        log("no working C compiler (cc): cache-line, futex and latency benchmarks skipped, estimates kept")
    out["pairs"] = {}
    for kind, (a, b) in _pairs(machine, host_cpus).items():
        if a in allowed and b in allowed:
            log(f"cache-line hand-off {kind} (CPU {a} <-> {b})")
            st = mb.line_handoff_ns(a, b)
            xc = mb.xcopy_line_ns(a, b)  # right after the hand-off: the vCPUs' placement can change
            out["pairs"][kind] = {"cpus": [a, b], "line_xfer_ns": st.as_dict() if st else None,
                                  "xcopy_line_ns": xc.as_dict() if xc else None}
    c0 = cpus[0]
    log("futex context switch and wake-up")
    st = mb.futex_handoff_ns(c0, c0)
    out["ctx_switch_ns"] = st.as_dict() if st else None
    other = next((c for c in cpus if c != c0), None)
    st = mb.futex_handoff_ns(c0, other) if other is not None else None
    out["futex_wake_ns"] = st.as_dict() if st else None
    st = mb.wake_cost_ns(other, c0) if other is not None else None  # the sleeper on ``other``, the waker on c0
    out["wake_cost_ns"] = st.as_dict() if st else None
    st = mb.wake_latency_ns(other, c0) if other is not None else None
    out["wake_latency_ns"] = st.as_dict() if st else None
    log("pointer-chase latency per cache level and DRAM")
    out["chase_ns"] = {}
    for name, nbytes in _chase_sizes(machine).items():
        if name == "L3":
            continue  # from the sweep below (build_machine picks the point on the measured plateau)
        st = mb.chase_ns(nbytes)
        out["chase_ns"][name] = {"bytes": nbytes, **(st.as_dict() if st else {})} if st else None
    log("the L3 this host's cores get: pointer chase from the L2's size to the L3's")
    out["l3_sweep"] = []
    for nbytes in l3_sweep_sizes(machine):
        st = mb.chase_ns(nbytes, SWEEP_SAMPLES, SWEEP_LOADS)
        out["l3_sweep"].append({"bytes": nbytes, **(st.as_dict() if st else {})} if st else None)
    log("usemem's loop with its data cached (issue width)")
    out["passes"]["usemem_word_ns"] = usemem_word_passes()
    for k, v in out["passes"].items():  # each figure is its fastest pass; the passes show the spread
        out[k] = min(v) if v else None
    out["loadavg_after"] = _loadavg()
    return out


def usemem_word_passes(samples: int = 15) -> list[float]:
    """usemem's do_rw_once store loop over 16 KiB in L1d (native/usemem.c, gcc -O): ns per word of this
    thread's CPU time, per sample (calibrate takes the minimum: preemption cannot make a sample shorter).
    Empty without a C compiler."""
    from mmsim.native import usemem

    try:
        return [usemem.cached_ns_per_word(False, reps=5000) for _ in range(samples)]
    except usemem.NoCompiler:
        return []


def _passes(raw: dict[str, Any], key: str, unit: str = "ns") -> str:
    """How ``raw[key]`` was taken: its passes' spread (:func:`microbench.spread_note`), if recorded."""
    ps = (raw.get("passes") or {}).get(key)
    return f", {mb.spread_note(ps, unit)}" if ps else ""


def _chase_sizes(m: Machine) -> dict[str, int]:
    """Working-set sizes whose chase sits on each level's plateau (``native/primitives.py chase_sizes``: half
    of each private level, the LLC's plateau rule), and DRAM: 8 x the reported L3, at least 256 MiB."""
    from mmsim.native.primitives import chase_sizes

    sizes = chase_sizes(m)
    sizes["DRAM"] = max(DRAM_CHASE_MIN, 8 * m.cache("L3").size_kib * 1024)
    return sizes


def l3_sweep_sizes(m: Machine) -> list[int]:
    """The L3 sweep's working sets: from the L2's size up to the reported L3 size, in steps of sqrt(2),
    whole 4 KiB pages (docs/native.md, session 31)."""
    lo, hi = m.cache("L2").size_kib * 1024, m.cache("L3").size_kib * 1024
    out: list[int] = []
    k = 0
    while True:
        n = min(hi, int(lo * 2 ** (k / 2)) // 4096 * 4096)
        out.append(n)
        if n >= hi:
            return out
        k += 1


def l3_knee(sweep: list[Any], dram: Any) -> tuple[int | None, str]:
    """The effective L3 capacity from the sweep (bytes), or None, and how it was found: a size *fits* when its
    median is below the midpoint between the sweep's lowest median (the L3 plateau) and the DRAM chase's
    median; the capacity is the largest size of the unbroken run of fitting sizes from the first one (a lower
    bound: the knee lies below the next size)."""
    pts = [p for p in sweep if _usable(p)]
    if not _usable(dram) or not pts or len(pts) != len(sweep):
        return None, "a chase of the sweep or the DRAM chase failed or was too noisy"
    plateau = min(p["median"] for p in pts)
    mid = (plateau + dram["median"]) / 2
    if plateau >= dram["median"]:
        return None, f"no sweep size is faster than DRAM ({dram['median']:.1f} ns)"
    eff = None
    for p in pts:
        if p["median"] >= mid:
            break
        eff = p["bytes"]
    curve = ", ".join(f"{p['bytes'] / (1 << 20):.2f} MiB {p['median']:.1f}" for p in pts)
    how = (f"pointer chase (median ns per load, {SWEEP_SAMPLES} x {SWEEP_LOADS:,} loads): {curve}; fits below "
           f"{mid:.1f} ns, the midpoint of the plateau {plateau:.1f} and DRAM {dram['median']:.1f}")
    if eff is None:
        return None, f"the first size does not fit: {how}"
    return eff, how


def _usable(d: Any) -> bool:
    """A C measurement dict that exists, is positive, and whose lower half is tight (microbench.Stat)."""
    return bool(d) and d.get("median", 0) > 0 and d.get("low_spread_pct", 1e9) <= 100 * mb.MAX_LOW_SPREAD \
        and d.get("samples", 0) >= 5


def _desc(d: dict[str, Any]) -> str:
    return (f"median {d['median']:,.1f} ns, p10 {d['p10']:,.1f}, IQR {d['p25']:,.1f}-{d['p75']:,.1f} ns "
            f"over {d['samples']} samples")


def _loadavg() -> float:
    """1-minute load average (/proc/loadavg), to tell whether other work shared the CPUs."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def _pairs(m: Machine, host: list[int]) -> dict[str, tuple[int, int]]:
    """Host CPU pairs for each hand-off kind the model distinguishes (model CPU numbering)."""
    cps, ncores = m.sockets[0].cores, m.ncores
    pairs: dict[str, tuple[int, int]] = {}
    if m.sockets[0].threads_per_core > 1:
        pairs["smt"] = (host[0], host[ncores])
    if cps > 1:
        pairs["socket"] = (host[0], host[1])
    if len(m.sockets) > 1:
        pairs["remote"] = (host[0], host[cps])
    return {k: v for k, v in pairs.items() if v[0] >= 0 and v[1] >= 0}


def _copy_mlp(pairs: dict[str, Any], cost: dict[str, Any], src: dict[str, str],
              keep: Callable[[str, str], None], meas: Callable[[str], str]) -> None:
    """``copy_mlp`` = the in-socket line transfer / the ns per line of a copy of lines the other CPU just
    wrote, both measured back to back on one pair (Little's law: lines in flight = latency x rate)."""
    p = pairs.get("socket") or pairs.get("smt")
    x: Any = p.get("xcopy_line_ns") if p else None
    d: Any = p.get("line_xfer_ns") if p else None
    if p is None:
        keep("copy_mlp", "no CPU pair on this host")
    elif not (_usable(x) and _usable(d)):
        keep("copy_mlp", "copy or hand-off measurement failed or too noisy")
    elif d["median"] / x["median"] < 1.0:
        keep("copy_mlp", f"a copied line ({x['median']:.2f} ns) costs more than a hand-off ({d['median']:.2f} ns)")
    else:
        a, b = p["cpus"]
        cost["copy_mlp"] = round(d["median"] / x["median"], 2)
        src["copy_mlp"] = meas(f"64 KiB rep-movsb copy on CPU {b} of lines CPU {a} just wrote: {_desc(x)} per line; "
                               f"the hand-off measured just before ({d['median']:.1f} ns) / that = lines in flight")


def ttwu_path_ns(ghz: float) -> float:
    """The ``try_to_wake_up`` path the model charges a waker (mm/costs.py ``sock_def_readable``), in ns at
    ``ghz``: what ``wake_ipi_ns`` leaves out of a measured wake-up cost."""
    from mmsim.mm.costs import PATH_CYCLES

    return PATH_CYCLES["sock_def_readable"][0] / ghz


def _wake_ipi(d: Any, ghz: float, cost: dict[str, Any], src: dict[str, str],
              keep: Callable[[str, str], None], meas: Callable[[str], str]) -> None:
    """``wake_ipi_ns`` = the waker's extra time in a wake-up of a task on an idle CPU (native/mb.c ``wakecost``)
    minus the ``try_to_wake_up`` path the model charges the callers (module docstring)."""
    ttwu = ttwu_path_ns(ghz)
    if d is None:
        keep("wake_ipi_ns", "one CPU only or measurement failed")
    elif not _usable(d):
        keep("wake_ipi_ns", f"wake-up cost too noisy ({_desc(d)})")
    elif d["median"] - ttwu <= d["median"] - d["p10"]:
        keep("wake_ipi_ns", f"waker's wake-up cost {d['median']:,.0f} ns is not above the wake path "
             f"({ttwu:,.0f} ns) by more than its spread")
    else:
        cost["wake_ipi_ns"] = round(d["median"] - ttwu, 2)
        src["wake_ipi_ns"] = meas(f"FUTEX_WAKE of a task asleep on the other, idle CPU minus an empty FUTEX_WAKE, "
                                  f"waker's time: {_desc(d)}; minus the try_to_wake_up path the model charges "
                                  f"({ttwu:,.0f} ns)")


def same_host(prev: Machine, host: Machine) -> bool:
    """``prev`` (a machine file) is a calibration of ``host`` (:func:`detect_host`): same CPU model and CPU
    count (the description), same socket layout, same cache levels and sizes."""
    def sig(x: Machine) -> tuple[Any, ...]:
        desc = x.description.replace("calibrated by mmsim calibrate", "detected from /sys")
        return (desc, x.sockets, tuple((c.name, c.size_kib, c.ways, c.shared_by) for c in x.caches))
    return sig(prev) == sig(host)


def previous_calibration(target: Path, host: Machine) -> Machine | None:
    """The calibration already at ``target`` when it is one of this host (else None: a missing, unreadable
    or other machine's file is simply not used)."""
    from mmsim.errors import UserError

    if not target.is_file():
        return None
    try:
        prev = yamlio.load_machine(target)
    except (UserError, OSError):
        return None
    return prev if same_host(prev, host) else None


def _measured(source: str) -> bool:
    """A source string that records a native measurement (this run's, or one kept from a previous run)."""
    return source.startswith(MEASURED) or (source.startswith(PREVIOUS) and MEASURED in source)


def _kept_source(why: str, source: str) -> str:
    """``source`` (a previous file's measured source) as kept now; one prefix, not a chain of them."""
    return f"{PREVIOUS}({why}): " + source[source.index(MEASURED):]


def build_machine(raw: dict[str, Any], base: Machine | None = None,
                  previous: Machine | None = None) -> tuple[Machine, list[str]]:
    """The detected host with the measured cost model; notes on every floored or kept estimate.

    ``previous``: an earlier calibration of this host (:func:`previous_calibration`); a field not measured
    usably now keeps its measurement from there, where it has one, instead of the estimate."""
    m = base or detect_host()
    prev_cost = previous.cost if previous is not None else None
    today = datetime.date.today().isoformat()
    notes: list[str] = []
    src: dict[str, str] = dict(m.cost.sources)  # fields not measured here keep their source
    cost = dict((f.name, getattr(m.cost, f.name)) for f in dataclasses.fields(CostModel) if f.name != "sources")

    def meas(what: str) -> str:
        return f"{MEASURED}{what} ({today})"

    def _keep_previous(field: str, why: str) -> bool:
        """Keep ``previous``'s measurement of ``field`` (True), if it has one."""
        old = prev_cost.sources.get(field, "") if prev_cost is not None else ""
        if prev_cost is None or not _measured(old):
            return False
        cost[field] = getattr(prev_cost, field)
        src[field] = _kept_source(why, old)
        notes.append(f"{field}: {why}; the previous calibration's measurement {cost[field]} kept")
        return True

    thp = raw.get("fault_thp_ns")
    if thp:
        cost["core_clear_gbs"] = round((2 << 20) / thp, 3)
        src["core_clear_gbs"] = meas(f"2 MiB / THP fault time ({thp:,.0f} ns per fault, clear_huge_page"
                                     f"{_passes(raw, 'fault_thp_ns')})")
    else:
        cost["core_clear_gbs"] = round(raw["core_bw_gbs"]["write"], 3)
        src["core_clear_gbs"] = meas("one core's streaming store bandwidth (no THP fault could be measured)")
        notes.append("no THP fault measured: core_clear_gbs from user-space store bandwidth")
    word_ns = raw.get("usemem_word_ns")
    if word_ns:
        from mmsim.mm.user_loops import USEMEM_LOOP_UOPS

        cycles = word_ns * m.freq_ghz
        cost["issue_width"] = round(USEMEM_LOOP_UOPS / cycles, 2)
        how = _passes(raw, "usemem_word_ns") or ", min of 15"
        src["issue_width"] = meas(f"usemem's do_rw_once store loop ({USEMEM_LOOP_UOPS:g} fused uops, "
                                  f"mm/user_loops.py) over 16 KiB in L1d: {word_ns:.3f} ns = {cycles:.2f} "
                                  f"cycles per word{how}; effective width = uops / cycles")
    else:
        notes.append(f"issue_width: usemem's loop not measured (no C compiler): estimate {cost['issue_width']} kept")
    clear_ns = 4096 / cost["core_clear_gbs"]
    paths_ns = sum(path(p, m.freq_ghz)[0] for p in FAULT_PATHS)
    rpaths_ns = sum(path(p, m.freq_ghz)[0] for p in READ_FAULT_PATHS)
    write_ns, read_ns = raw["fault_4k_ns"], raw.get("fault_4k_read_ns")
    pf_read = read_ns - rpaths_ns if read_ns else 0.0
    pf = write_ns - clear_ns - paths_ns
    if pf_read > 0:
        cost["page_fault_ns"] = round(pf_read, 2)
        src["page_fault_ns"] = meas(f"4 KiB read fault (zero page) {read_ns:,.0f} ns"
                                    f"{_passes(raw, 'fault_4k_read_ns')} - paths {rpaths_ns} ns "
                                    f"({', '.join(READ_FAULT_PATHS)})")
        extra = pf - pf_read
        if extra > 0:
            cost["anon_folio_ns"] = round(extra, 2)
            src["anon_folio_ns"] = meas(
                f"4 KiB write fault {write_ns:,.0f} ns{_passes(raw, 'fault_4k_ns')} - page_fault_ns "
                f"{pf_read:,.0f} ns - 4 KiB clear "
                f"{clear_ns:,.0f} ns - paths {paths_ns} ns ({', '.join(FAULT_PATHS)})")
        else:
            cost["anon_folio_ns"] = None
            notes.append(f"anon_folio_ns: write-fault remainder {extra:.0f} ns <= 0: not charged")
    elif pf > 0:
        if read_ns:
            notes.append(f"page_fault_ns: read-fault residual {pf_read:.0f} ns <= 0: taken from the write fault")
        else:
            notes.append("page_fault_ns: no read fault measured: taken from the write fault")
        cost["page_fault_ns"] = round(pf, 2)
        src["page_fault_ns"] = meas(
            f"4 KiB fault {raw['fault_4k_ns']:,.0f} ns - 4 KiB clear {clear_ns:,.0f} ns - paths {paths_ns} ns "
            f"({', '.join(FAULT_PATHS)})"
        )
    else:
        why = (f"residual {pf:.0f} ns <= 0 (4 KiB fault {raw['fault_4k_ns']:,.0f} ns is less than the clear and "
               "path costs)")
        if not _keep_previous("page_fault_ns", why):
            notes.append(f"page_fault_ns: {why}: estimate {cost['page_fault_ns']} ns kept")
            src["page_fault_ns"] = "estimate kept (measured residual <= 0); " + src.get("page_fault_ns", "")

    def keep(field: str, why: str) -> None:
        if _keep_previous(field, why):
            return
        notes.append(f"{field}: {why}; estimate {cost[field]} kept")
        src[field] = f"estimate kept ({why}); " + m.cost.sources.get(field, "estimate")

    pairs = raw.get("pairs", {})
    for kind in ("smt", "socket", "remote"):
        field = f"line_xfer_{kind}_ns"
        d: Any = pairs[kind].get("line_xfer_ns") if kind in pairs else None
        if kind == "remote" and "remote" not in pairs and "socket" in pairs:
            continue  # one socket: set below from the in-socket hand-off (never used on this host)
        if kind not in pairs:
            keep(field, "no such CPU pair on this host")
        elif not _usable(d):
            keep(field, "measurement failed or too noisy" + (f" ({_desc(d)})" if d else ""))
        else:
            a, b = pairs[kind]["cpus"]
            cost[field] = round(d["median"], 2)
            src[field] = meas(f"CAS ping-pong CPU {a} <-> {b}, half round trip: {_desc(d)}")
    if _measured(src["line_xfer_socket_ns"]) and "remote" not in pairs:
        # keep the estimated interconnect hop on top of the measured in-socket hand-off
        hop = m.cost.line_xfer_remote_ns - m.cost.line_xfer_socket_ns
        cost["line_xfer_remote_ns"] = round(cost["line_xfer_socket_ns"] + hop, 2)
        src["line_xfer_remote_ns"] = (f"one socket, so never used here: measured in-socket hand-off + estimated "
                                      f"{hop:.0f} ns hop; {m.cost.sources.get('line_xfer_remote_ns', '')}")
    _copy_mlp(pairs, cost, src, keep, meas)
    for hit, hitm in (("line_hit_socket_ns", "line_xfer_socket_ns"), ("line_hit_remote_ns", "line_xfer_remote_ns")):
        cost[hit] = cost[hitm]
        src[hit] = f"not measured (needs a third core to hold the clean copy): equal to {hitm}"
    ctx: Any = raw.get("ctx_switch_ns")
    if _usable(ctx):
        cost["ctx_switch_ns"] = round(ctx["median"], 2)
        src["ctx_switch_ns"] = meas(f"futex ping-pong on one CPU, half round trip incl. the syscalls: {_desc(ctx)}")
    else:
        keep("ctx_switch_ns", "futex measurement failed or too noisy")
    wake: Any = raw.get("futex_wake_ns")
    why = ""
    if wake is None:
        why = "one CPU only or measurement failed"
    elif not (_usable(wake) and _usable(ctx)):
        why = f"cross-CPU futex hand-off too noisy ({_desc(wake)})"
    else:
        wk = wake["median"] - ctx["median"]
        noise = (wake["median"] - wake["p10"]) + (ctx["median"] - ctx["p10"])
        if wk > noise:
            cost["wakeup_ns"] = round(wk, 2)
            src["wakeup_ns"] = meas(f"futex ping-pong across CPUs, half round trip ({_desc(wake)}) minus "
                                    f"ctx_switch_ns ({ctx['median']:,.1f} ns)")
        else:
            why = (f"cross-CPU hand-off {wake['median']:,.0f} ns minus one-CPU {ctx['median']:,.0f} ns "
                   f"= {wk:,.0f} ns is within the spreads ({noise:,.0f} ns)")
    lat: Any = raw.get("wake_latency_ns")
    if why and _usable(lat) and _usable(ctx) and lat["median"] - ctx["median"] > lat["median"] - lat["p10"]:
        # the ping-pong did not sleep (its two sides overlapped: a wait that finds the word already changed
        # returns at once), so take the wake-up of a task that has surely been asleep (native/mb.c wakelat)
        cost["wakeup_ns"] = round(lat["median"] - ctx["median"], 2)
        src["wakeup_ns"] = meas(f"FUTEX_WAKE until the task asleep on the other, idle CPU runs ({_desc(lat)}) minus "
                                f"ctx_switch_ns ({ctx['median']:,.1f} ns); the ping-pong could not be used: {why}")
    elif why:
        keep("wakeup_ns", why)
    _wake_ipi(raw.get("wake_cost_ns"), m.freq_ghz, cost, src, keep, meas)
    sources = dict(m.sources)
    chase = dict(raw.get("chase_ns") or {})
    eff = _effective_l3(m, raw, chase, notes, meas, sources, previous)
    caches = _measured_caches(m, chase, notes, meas, sources, previous)
    if eff is not None:
        caches = tuple(dataclasses.replace(c, effective_kib=eff >> 10) if c.name == "L3" else c for c in caches)
    load = max(raw.get("loadavg_before", 0.0), raw.get("loadavg_after", 0.0))
    if load > BUSY_LOAD_PER_CPU * m.ncpus:
        notes.append(f"host busy while measuring (load average {load:.1f} on {m.ncpus} CPUs): the minima "
                     "may still include other users' time; calibrate again on a quiet host")
        if (ag := sysinfo.autogroup_note()) is not None:
            notes.append(ag)
    bw = raw["all_cpu_bw_gbs"]
    dram: Any = (raw.get("chase_ns") or {}).get("DRAM")
    below = [x.latency_ns for x, c in zip(caches, m.caches, strict=True) if x.latency_ns != c.latency_ns]
    dram_ok = _usable(dram) and all(dram["median"] > b for b in below)  # above every measured level
    nodes = tuple(dataclasses.replace(
        n, read_bw_gbs=round(bw["read"], 2), write_bw_gbs=round(bw["write"], 2),
        latency_ns=round(dram["median"], 2) if dram_ok else n.latency_ns, remote_latency_ns=None,
    ) for n in m.nodes)
    prev_dram = previous.sources.get("nodes.latency_ns", "") if previous is not None else ""
    if dram_ok:
        sources["nodes.latency_ns"] = meas(f"pointer chase over {dram['bytes'] >> 20} MiB: {_desc(dram)}")
    elif previous is not None and _measured(prev_dram):
        why = "DRAM pointer chase failed, noisy or not above the LLC"
        nodes = tuple(dataclasses.replace(n, latency_ns=p.latency_ns)
                      for n, p in zip(nodes, previous.nodes, strict=True))
        sources["nodes.latency_ns"] = _kept_source(why, prev_dram)
        notes.append(f"nodes.latency_ns: {why}; the previous calibration's measurement "
                     f"{previous.nodes[0].latency_ns} ns kept")
    else:
        notes.append(f"nodes.latency_ns: DRAM pointer chase failed, noisy or not above the LLC; estimate "
                     f"{m.nodes[0].latency_ns} ns kept")
    sources["nodes.bandwidth"] = meas(f"one streaming process per CPU, summed (read {bw['read']:.1f}, "
                                      f"write {bw['write']:.1f} GB/s)")
    core = raw["core_bw_gbs"]
    sources["calibrate.core_bandwidth"] = meas(
        f"one core: read {core['read']:.2f}, write {core['write']:.2f}, copy {core['copy']:.2f} GB/s")
    out = dataclasses.replace(
        m, description=m.description.replace("detected from /sys", "calibrated by mmsim calibrate"),
        nodes=nodes, caches=caches, cost=CostModel(**cost, sources=src), sources=sources,
    )
    return out, notes


def _effective_l3(m: Machine, raw: dict[str, Any], chase: dict[str, Any], notes: list[str],
                  meas: Callable[[str], str], sources: dict[str, str], previous: Machine | None = None) -> int | None:
    """From ``raw["l3_sweep"]`` (when measured): the L3 capacity the cores get (bytes, when below the reported
    size; else None), and the sweep point on its plateau as ``chase["L3"]`` (``primitives.llc_plateau_bytes`` for
    that capacity: always a sweep size). When the sweep gives no capacity, the ``previous``
    calibration's, where it measured one (its L3 latency, kept with it by :func:`_measured_caches`, was read
    on that capacity's plateau)."""
    from mmsim.native.primitives import llc_plateau_bytes

    sweep = raw.get("l3_sweep")
    if sweep is None:  # an older raw record: its L3 chase, if any, stands as measured
        return None
    l3 = m.cache("L3")
    eff, how = l3_knee(sweep, chase.get("DRAM"))
    if eff is None:
        chase["L3"] = None
        old = previous.sources.get("caches.L3.effective_kib", "") if previous is not None else ""
        pe = previous.cache("L3").effective_kib if previous is not None else None
        if pe is not None and _measured(old):
            sources["caches.L3.effective_kib"] = _kept_source(f"L3 sweep: {how}", old)
            notes.append(f"caches L3 effective_kib: not measured ({how}); the previous calibration's "
                         f"measurement {pe} KiB kept")
            return pe << 10
        notes.append(f"caches L3 effective_kib: not measured ({how}); the reported {l3.size_kib} KiB used")
        return None
    at = llc_plateau_bytes(m.cache("L2").capacity_kib * 1024, min(eff >> 10, l3.size_kib) * 1024)
    chase["L3"] = max((p for p in sweep if p and p["bytes"] <= at), key=lambda p: p["bytes"], default=None)
    if eff >= l3.size_kib * 1024:
        sources["caches.L3.effective_kib"] = meas(f"the whole reported L3 fits: {how}")
        return None
    sources["caches.L3.effective_kib"] = meas(f"{eff >> 10} KiB, the largest size that fits: {how}")
    return eff


def _measured_caches(m: Machine, chase: dict[str, Any], notes: list[str], meas: Callable[[str], str],
                     sources: dict[str, str], previous: Machine | None = None) -> tuple[CacheLevel, ...]:
    """Cache levels with their pointer-chase latencies, where measured, positive and increasing
    (each level above the one before and below the next measured one, DRAM included); else the
    ``previous`` calibration's measurement of that level, where it has one; else the estimate."""
    out = []
    prev = 0.0
    names = [c.name for c in m.caches] + ["DRAM"]
    for i, c in enumerate(m.caches):
        d: Any = chase.get(c.name)
        above = [chase[n]["median"] for n in names[i + 1:] if _usable(chase.get(n))]
        if _usable(d) and d["median"] > prev and all(d["median"] < x for x in above):
            out.append(dataclasses.replace(c, latency_ns=round(d["median"], 2)))
            sources[f"caches.{c.name}.latency_ns"] = meas(f"pointer chase over {d['bytes'] >> 10} KiB: {_desc(d)}")
        else:
            why = "failed or too noisy" if not _usable(d) else f"{d['median']} ns is out of order with its neighbours"
            key = f"caches.{c.name}.latency_ns"
            old = previous.sources.get(key, "") if previous is not None else ""
            if previous is not None and _measured(old):
                lat = previous.cache(c.name).latency_ns
                out.append(dataclasses.replace(c, latency_ns=lat))
                sources[key] = _kept_source(f"pointer chase {why}", old)
                notes.append(f"caches {c.name} latency_ns: pointer chase {why}; the previous calibration's "
                             f"measurement {lat} ns kept")
            else:
                notes.append(f"caches {c.name} latency_ns: pointer chase {why}; estimate {c.latency_ns} ns kept")
                out.append(c)
        prev = out[-1].latency_ns
    return tuple(out)


def _check_writable(target: Path) -> None:
    """Fail before measuring when the YAML could not be written: a directory, a device or FIFO (a FIFO blocked
    the write after the measurements), a name too long or a stat error (a traceback before), a directory
    that cannot be created or written."""
    import stat

    from mmsim.errors import UserError

    def bad(why: str) -> UserError:
        return UserError("--out", str(target), f"a writable file path ({why})")

    if "\x00" in str(target):
        raise bad("without NUL bytes")
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise bad(e.strerror or type(e).__name__) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UserError("--out", str(target), "a file path (it is a directory)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise bad("a regular file, not a device or FIFO")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError("--out", str(target), f"a path whose directory can be created ({e.strerror})") from None
    try:
        most = os.pathconf(target.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        most = 255
    if len(os.fsencode(target.name)) > most:
        raise bad(f"File name too long: at most {most} bytes")
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError("--out", str(target), "a writable file path")


def calibrate(out: str | Path | None = None, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure, build and save; returns the path, the raw measurements and the notes."""
    target = Path(out) if out is not None else config_path()
    _check_writable(target)
    with safety.terminate_as_exception():
        raw = measure(log)
    host = detect_host()
    machine, notes = build_machine(raw, host, previous_calibration(target, host))
    try:  # what _check_writable could not foresee (/proc/x.yaml looks writable to root): one line
        target.parent.mkdir(parents=True, exist_ok=True)
        yamlio.save_machine(machine, target)
    except OSError as e:
        from mmsim.errors import UserError

        raise UserError("--out", str(target), f"a writable file path ({e.strerror or type(e).__name__}; "
                        "nothing was saved)") from None
    return {"path": str(target), "measurements": raw, "cost": yamlio.machine_to_dict(machine)["cost"],
            "nodes": yamlio.machine_to_dict(machine)["nodes"], "notes": notes}
