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
* ``page_fault_ns`` = 4 KiB fault time - 4 KiB at ``core_clear_gbs`` - the
  path costs the model charges besides (handle_mm_fault, do_anonymous_page,
  rmqueue_pcplist).
* ``line_xfer_*_ns``: half a cache-line ping-pong round trip between a CPU pair.
* ``ctx_switch_ns``: half a futex ping-pong round trip on one CPU.
* ``wakeup_ns``: half a futex ping-pong round trip across two CPUs, minus
  ``ctx_switch_ns``.
* ``nodes[].read_bw_gbs / write_bw_gbs``: one streaming process per CPU, summed
  (one node per socket; on multi-node hosts every node gets the socket-0 value).
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
from mmsim.machine.model import CostModel, Machine
from mmsim.mm.costs import path
from mmsim.native import microbench as mb
from mmsim.native import safety, tasks

MEASURED = "native measurement: mmsim calibrate "
WARMUP_BYTES = 256 << 20
# Paths the model charges on a 4 KiB anonymous fault besides page_fault_ns and the clear (mm/memory.py).
FAULT_PATHS = ("handle_mm_fault", "do_anonymous_page", "rmqueue_pcplist")
BUSY_LOAD_PER_CPU = 0.5  # a load average above this per CPU means other work competed for the CPUs
MIN_NS = 1.0  # CostModel fields must be positive; a residual at or below zero is reported and floored


def measure(log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run every microbenchmark; raw numbers (ns, GB/s) keyed by name."""
    safety.check_memory("calibrate", WARMUP_BYTES)
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
    log("page faults")
    out["fault_4k_ns"] = mb.fault_4k_ns()
    out["fault_thp_ns"] = mb.fault_thp_ns()
    log("memory bandwidth")
    out["core_bw_gbs"] = mb.bandwidth_gbs()
    out["all_cpu_bw_gbs"] = mb.all_cpu_bandwidth_gbs(len(cpus))
    out["pairs"] = {}
    machine = detect_host()
    for kind, (a, b) in _pairs(machine, host_cpus).items():
        if a in allowed and b in allowed:
            log(f"cache-line transfer {kind} (CPU {a} <-> {b})")
            out["pairs"][kind] = {"cpus": [a, b], "line_xfer_ns": mb.line_transfer_ns(a, b)}
    c0 = cpus[0]
    log("futex context switch and wake-up")
    out["ctx_switch_ns"] = mb.futex_round_trip_ns(c0, c0)
    other = next((c for c in cpus if c != c0), None)
    out["futex_wake_ns"] = mb.futex_round_trip_ns(c0, other) if other is not None else None
    out["loadavg_after"] = _loadavg()
    return out


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


def build_machine(raw: dict[str, Any], base: Machine | None = None) -> tuple[Machine, list[str]]:
    """The detected host with the measured cost model; notes on every floored or kept estimate."""
    m = base or detect_host()
    today = datetime.date.today().isoformat()
    notes: list[str] = []
    src: dict[str, str] = dict(m.cost.sources)  # fields not measured here keep their source
    cost = dict((f.name, getattr(m.cost, f.name)) for f in dataclasses.fields(CostModel) if f.name != "sources")

    def meas(what: str) -> str:
        return f"{MEASURED}{what} ({today})"

    thp = raw.get("fault_thp_ns")
    if thp:
        cost["core_clear_gbs"] = round((2 << 20) / thp, 3)
        src["core_clear_gbs"] = meas(f"2 MiB / THP fault time ({thp:,.0f} ns per fault, clear_huge_page)")
    else:
        cost["core_clear_gbs"] = round(raw["core_bw_gbs"]["write"], 3)
        src["core_clear_gbs"] = meas("one core's streaming store bandwidth (no THP fault could be measured)")
        notes.append("no THP fault measured: core_clear_gbs from user-space store bandwidth")
    clear_ns = 4096 / cost["core_clear_gbs"]
    paths_ns = sum(path(p, m.freq_ghz)[0] for p in FAULT_PATHS)
    pf = raw["fault_4k_ns"] - clear_ns - paths_ns
    if pf < MIN_NS:
        notes.append(f"page_fault_ns residual {pf:.0f} ns <= 0: floored to {MIN_NS} ns")
    cost["page_fault_ns"] = round(max(pf, MIN_NS), 2)
    src["page_fault_ns"] = meas(
        f"4 KiB fault {raw['fault_4k_ns']:,.0f} ns - 4 KiB clear {clear_ns:,.0f} ns - paths {paths_ns} ns "
        f"({', '.join(FAULT_PATHS)})"
    )
    pairs = raw.get("pairs", {})
    for kind in ("smt", "socket", "remote"):
        field = f"line_xfer_{kind}_ns"
        if kind in pairs:
            v = pairs[kind]["line_xfer_ns"]
            a, b = pairs[kind]["cpus"]
            if v < MIN_NS:
                notes.append(f"{field} measured {v:.1f} ns (noise): floored to {MIN_NS} ns")
            cost[field] = round(max(v, MIN_NS), 2)
            src[field] = meas(f"cache-line ping-pong CPU {a} <-> {b}, half round trip minus loop overhead")
        else:
            notes.append(f"{field}: no such CPU pair on this host; estimate kept")
            src[field] = m.cost.sources.get(field, "estimate")
    if "socket" in pairs and "remote" not in pairs:  # keep the estimated interconnect hop on top
        cost["line_xfer_remote_ns"] = round(cost["line_xfer_socket_ns"] + m.cost.line_xfer_remote_ns
                                            - m.cost.line_xfer_socket_ns, 2)
        src["line_xfer_remote_ns"] = "measured in-socket hand-off + estimated hop; " + src["line_xfer_remote_ns"]
    cost["ctx_switch_ns"] = round(max(raw["ctx_switch_ns"], MIN_NS), 2)
    src["ctx_switch_ns"] = meas("futex ping-pong on one CPU, half round trip minus the futex syscalls")
    if raw.get("futex_wake_ns") is not None:
        wk = raw["futex_wake_ns"] - cost["ctx_switch_ns"]
        if wk < MIN_NS:
            notes.append(f"wakeup_ns residual {wk:.0f} ns <= 0: floored to {MIN_NS} ns")
        cost["wakeup_ns"] = round(max(wk, MIN_NS), 2)
        src["wakeup_ns"] = meas(f"futex ping-pong across CPUs, half round trip {raw['futex_wake_ns']:,.0f} ns "
                                "minus ctx_switch_ns")
    else:
        notes.append("wakeup_ns: one CPU only; estimate kept")
        src["wakeup_ns"] = m.cost.sources.get("wakeup_ns", "estimate")
    load = max(raw.get("loadavg_before", 0.0), raw.get("loadavg_after", 0.0))
    if load > BUSY_LOAD_PER_CPU * m.ncpus:
        notes.append(f"host busy while measuring (load average {load:.1f} on {m.ncpus} CPUs): the minima "
                     "may still include other users' time; calibrate again on a quiet host")
    bw = raw["all_cpu_bw_gbs"]
    nodes = tuple(dataclasses.replace(n, read_bw_gbs=round(bw["read"], 2), write_bw_gbs=round(bw["write"], 2))
                  for n in m.nodes)
    sources = dict(m.sources)
    sources["nodes.bandwidth"] = meas(f"one streaming process per CPU, summed (read {bw['read']:.1f}, "
                                      f"write {bw['write']:.1f} GB/s)")
    core = raw["core_bw_gbs"]
    sources["calibrate.core_bandwidth"] = meas(
        f"one core: read {core['read']:.2f}, write {core['write']:.2f}, copy {core['copy']:.2f} GB/s")
    out = dataclasses.replace(
        m, description=m.description.replace("detected from /sys", "calibrated by mmsim calibrate"),
        nodes=nodes, cost=CostModel(**cost, sources=src), sources=sources,
    )
    return out, notes


def _check_writable(target: Path) -> None:
    """Fail before measuring when the YAML could not be written."""
    from mmsim.errors import UserError

    if target.is_dir():
        raise UserError("--out", str(target), "a file path (it is a directory)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError("--out", str(target), f"a path whose directory can be created ({e.strerror})") from None
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError("--out", str(target), "a writable file path")


def calibrate(out: str | Path | None = None, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure, build and save; returns the path, the raw measurements and the notes."""
    target = Path(out) if out is not None else config_path()
    _check_writable(target)
    with safety.terminate_as_exception():
        raw = measure(log)
    machine, notes = build_machine(raw)
    target.parent.mkdir(parents=True, exist_ok=True)
    yamlio.save_machine(machine, target)
    return {"path": str(target), "measurements": raw, "cost": yamlio.machine_to_dict(machine)["cost"],
            "nodes": yamlio.machine_to_dict(machine)["nodes"], "notes": notes}
