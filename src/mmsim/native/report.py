"""Text reports for ``mmsim native``, ``mmsim calibrate`` and ``mmsim validate``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmsim.report.tables import Doc, Table, fmt_num
from mmsim.report.text import metrics_table, perf_stat_block

# The vmstat events that show the fault paths (mm/vmstat.c vmstat_text); others are in --json.
VMSTAT_SHOWN = (
    "pgfault", "pgmajfault", "pgalloc_normal", "pgfree", "thp_fault_alloc", "thp_fault_fallback",
    "htlb_buddy_alloc_success", "compact_stall", "numa_hit", "numa_miss", "pgactivate",
)


def format_native(d: Mapping[str, Any]) -> Doc:
    doc: Doc = []
    if d.get("perf"):
        doc.append(perf_stat_block(d))
    else:
        doc.append(f"{d.get('command', '')}: perf stat not available (software events not counted)")
    doc.append(metrics_table(d.get("metrics") or {}))
    vm = d.get("vmstat") or {}
    t = Table(["event", "delta"], title="/proc/vmstat deltas (system-wide):")
    t.rows = [[k, fmt_num(vm[k])] for k in VMSTAT_SHOWN if k in vm]
    doc.append(t)
    ru = d.get("rusage") or {}
    doc.append(Table(["getrusage", "value"], [[k, fmt_num(v)] for k, v in ru.items()], title="getrusage:"))
    host = d.get("host") or {}
    pol = d.get("policies") or {}
    doc.append("host: " + ", ".join(f"{k}={v}" for k, v in {**pol, **host}.items()))
    doc += [f"note: {n}" for n in d.get("notes") or ()]
    return doc


def format_calibrate(r: Mapping[str, Any]) -> Doc:
    cost = dict(r.get("cost") or {})
    sources = cost.pop("sources", {})
    t = Table(["field", "value", "source"], align="lrl", title=f"Calibrated host written to {r.get('path')}:")
    t.rows = [[k, fmt_num(v), str(sources.get(k, ""))] for k, v in cost.items()]
    for n in r.get("nodes") or ():
        t.rows.append([f"nodes[{n['id']}].read_bw_gbs", fmt_num(n["read_bw_gbs"]), "all CPUs streaming"])
        t.rows.append([f"nodes[{n['id']}].write_bw_gbs", fmt_num(n["write_bw_gbs"]), "all CPUs streaming"])
    doc: Doc = [t]
    doc += [f"note: {n}" for n in r.get("notes") or ()]
    return doc


def _times(r: Mapping[str, Any], key: str) -> str:
    """'native/simulated' seconds of one vm-scalability.time.* metric, or '-'."""
    n, s = (r.get(side) or {} for side in ("native_times", "simulated_times"))
    name = f"vm-scalability.time.{key}"
    if name not in n and name not in s:
        return "-"
    return f"{fmt_num(n.get(name))}/{fmt_num(s.get(name))}"


def format_primitives(rows: Sequence[Mapping[str, Any]]) -> Doc:
    """The level-0 table of ``mmsim validate --suite primitives``."""
    t = Table(["machine", "quantity", "simulated", "reference", "error %", "ok", "reference kind", "source"],
              align="llrrrlll", title="Validation level 0: machine primitives (ns; bw GB/s)")
    for r in rows:
        t.rows.append([str(r["machine"]), str(r["quantity"]), fmt_num(r["simulated"]), fmt_num(r["reference"]),
                       f"{r['error_pct']:+.1f}", "ok" if r["ok"] else "NO", str(r["reference_kind"]),
                       str(r["source"])[:90]])
    bad = sum(1 for r in rows if not r["ok"])
    return [t, f"{len(rows)} rows, {bad} outside tolerance (latency/c2c +-15%, bandwidth +-20%)"]


def format_validate(rows: Sequence[Mapping[str, Any]]) -> Doc:
    prim = [r for r in rows if r.get("suite") == "primitives"]
    rows = [r for r in rows if r.get("suite") != "primitives"]
    if prim and not rows:
        return format_primitives(prim)
    if not rows:
        return ["no validation cases"]
    head: Doc = format_primitives(prim) if prim else []
    t = Table(["case", "metric", "native", "median", "run rate", "simulated", "error %", "given file %", "cpu share",
               "sys s n/s", "user s n/s", "note"], align="llrrrrrrrrrl",
              title=f"Validation on machine {rows[0].get('machine')} (kernel {rows[0].get('kernel')}):")
    for r in rows:
        err = r.get("error_pct")
        share = r.get("native_cpu_share")
        t.rows.append([str(r["case"]), str(r["metric"]).split(".", 1)[-1], fmt_num(r.get("native")),
                       fmt_num(r.get("native_median")),
                       "-" if r.get("native_run_rate") is None else fmt_num(r.get("native_run_rate")),
                       fmt_num(r.get("simulated")),
                       "-" if err is None else f"{err:+.1f}",
                       "-" if not r.get("calibrated_before_case") or r.get("error_pct_calibrated") is None
                       else f"{r['error_pct_calibrated']:+.1f}",
                       "-" if share is None else f"{100 * share:.0f}%", _times(r, "system_time"),
                       _times(r, "user_time"), str(r.get("note", ""))])
    return [*head, t, "\n".join([
        "native: the fastest of the native runs (noise on a shared VM only adds time); median: of all of them.",
        "  will-it-scale cases: each task's fastest ~40 ms round, averaged over the tasks (as calibrate's fault",
        "  passes); run rate: the will-it-scale metric itself (the whole run), fastest run.",
        "simulated / error %: on the host calibrated again right before the case (--calibrate-each, the default",
        "  on the calibrated host: this VM's speed moves within minutes); given file %: the same case simulated",
        "  on the --machine file as given. A case whose two tasks talk across CPUs (bw_unix) is simulated at",
        "  its fastest run's own vCPU placement, probed right before that run (the note says which).",
        "cpu share: CPU time the fastest native run got / (wall x CPUs it could use); well below 100% means",
        "  other users of the host held the CPUs and the native result is low for that reason.",
        "sys s / user s: the fastest native run's system and user seconds (getrusage) / the simulation's: the",
        "  kernel side and the benchmark's own loop, apart.",
    ])]


def format_locks(rows: list[dict[str, Any]]) -> Doc:
    """``mmsim validate --suite locks`` (:mod:`mmsim.native.locks`): one row per native or model row."""
    t = Table(["machine", "quantity", "simulated", "reference", "error %", "ok", "source / note"],
              align="llrrrll", title="Lock validation (level 1):")
    for r in rows:
        err = r.get("error_pct")
        ok = r.get("ok")
        t.rows.append([str(r["machine"]), str(r["quantity"]), fmt_num(r["simulated"]),
                       "-" if r.get("reference") is None else fmt_num(r["reference"]),
                       "-" if err is None else f"{err:+.1f}", "-" if ok is None else ("ok" if ok else "FAIL"),
                       str(r["source"]) + (f"; {r['note']}" if r.get("note") else "")])
    return [t]
