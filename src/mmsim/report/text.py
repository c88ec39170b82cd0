"""Text reports in the formats kernel people already read.

* :func:`format_run` — ``perf stat`` counters (:mod:`mmsim.report.perfstat`), the benchmark's own metrics,
  the top of a ``perf report`` cycle profile, a ``/proc/lock_stat``-like table
  and one line about the simulation itself.
* :func:`format_outcomes` — ``mmsim reproduce``: published vs simulated vs
  band, a verdict per metric, and the mechanism notes.
* :func:`format_machine` and the catalogue tables behind ``mmsim machines``,
  ``kernels`` and ``workloads``.

Everything here takes plain data (``RunResult.to_dict()``, ``Outcome.to_dict()``)
or the frozen machine dataclasses, and returns a :data:`~mmsim.report.tables.Doc`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mmsim.machine.model import Machine
from mmsim.report.tables import Doc, Table, fmt_band, fmt_int, fmt_num

#: Profile lines shown by ``mmsim run`` (perf report shows all; the top tells the story).
PROFILE_TOP = 10
#: Lock classes shown by ``mmsim run``, most wait time first.
LOCKS_TOP = 12

# -- mmsim run -----------------------------------------------------------------


def command_line(run: Mapping[str, Any]) -> str:
    """The benchmark invocation shown in the perf-stat header.

    Uses ``run["command"]`` when the workload provides its real command line,
    otherwise the workload name followed by its parameters.
    """
    cmd = run.get("command")
    if cmd:
        return str(cmd)
    params = run.get("params") or {}
    return " ".join([str(run.get("workload", "?")), *(f"{k}={v}" for k, v in params.items())])


def perf_stat_block(run: Mapping[str, Any]) -> str:
    """``perf stat`` output of one run, as perf prints it (:func:`mmsim.report.perfstat.text`),
    without the blank lines around it (a Doc block)."""
    from mmsim.report import perfstat

    return perfstat.text([run], command_line(run)).strip("\n")


def metrics_table(metrics: Mapping[str, float], runs: Sequence[Mapping[str, float]] = ()) -> Table:
    """The benchmark's metrics; over ``runs`` (``-r N``): the mean and LKP's %stddev."""
    if len(runs) < 2:
        t = Table(["metric", "value"], title="Benchmark metrics:")
        t.rows = [[k, fmt_num(v)] for k, v in metrics.items()]
        return t
    from mmsim.experiments.stats import summarize

    t = Table(["metric", "mean", "%stddev"], title=f"Benchmark metrics (mean of {len(runs)} runs):")
    for k in metrics:
        s = summarize([float(r.get(k, 0.0)) for r in runs])
        t.rows.append([k, fmt_num(s.mean), f"{s.pct_stddev:.2f}%"])
    return t


def profile_block(profile: Sequence[Mapping[str, Any]], top: int = PROFILE_TOP) -> str:
    """The head of ``perf report --sort symbol``: overhead and symbol."""
    lines = [f"# Top {min(top, len(profile))} of {len(profile)} functions by cycles", "# Overhead  Symbol"]
    lines += [f"  {float(p['percent']):6.2f}%  {p['symbol']}" for p in profile[:top]]
    return "\n".join(lines)


def slab_stats_table(counters: Mapping[str, int]) -> Table:
    """SLUB statistics (CONFIG_SLUB_STATS items, summed over caches; model counters ``mmsim.slab_*``,
    ``mmsim.cpu_partial_*``): the non-zero ones."""
    t = Table(["item", "count"], title="SLUB statistics (all caches):")
    t.rows = [[k, fmt_int(v)] for k, v in counters.items() if v and k.startswith(("slab_", "cpu_partial_"))]
    return t


def locks_table(locks: Mapping[str, Mapping[str, Any]], top: int = LOCKS_TOP) -> Table:
    """``/proc/lock_stat``: one row per lock class that was taken, most total wait first."""
    t = Table(
        ["class", "kind", "acquisitions", "contentions", "wait total µs", "wait max µs", "hold total µs"],
        align="llrrrrr",
        title="Lock statistics (lock_stat):",
    )
    used = [(name, s) for name, s in locks.items() if s.get("acquisitions", 0)]
    order = sorted(used, key=lambda kv: (-int(kv[1].get("wait_ns_total", 0)), kv[0]))
    for name, s in order[:top]:
        t.rows.append([
            name,
            str(s.get("kind", "")),
            fmt_int(s.get("acquisitions", 0)),
            fmt_int(s.get("contentions", 0)),
            f"{s.get('wait_ns_total', 0) / 1e3:,.1f}",
            f"{s.get('wait_ns_max', 0) / 1e3:,.1f}",
            f"{s.get('hold_ns_total', 0) / 1e3:,.1f}",
        ])
    return t


LOCK_STAT_COLUMNS = ("con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total", "waittime-avg",
                     "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total", "holdtime-avg")


def lock_stat_table(locks: Mapping[str, Mapping[str, Any]], top: int = LOCKS_TOP) -> Table:
    """``/proc/lock_stat``'s own columns (times in µs, as lock_stat prints them); an rwsem
    has a ``-W`` (write) and a ``-R`` (read) line, as there."""
    t = Table(["class", *LOCK_STAT_COLUMNS], align="l" + "r" * len(LOCK_STAT_COLUMNS),
              title="lock_stat (columns of /proc/lock_stat, times in µs):")
    used = [(name, s) for name, s in locks.items() if s.get("acquisitions", 0) and s.get("lock_stat")]
    order = sorted(used, key=lambda kv: (-int(kv[1].get("wait_ns_total", 0)), kv[0]))
    for name, s in order[:top]:
        ls = s["lock_stat"]
        sides = [(f"{name}-W", ls["W"]), (f"{name}-R", ls["R"])] if "W" in ls else [(name, ls)]
        for label, c in sides:
            t.rows.append([label] + [
                f"{c[k] / 1e3:,.2f}" if k.startswith(("waittime", "holdtime")) else fmt_int(c[k])
                for k in LOCK_STAT_COLUMNS])
    return t


def lock_lines_table(locks: Mapping[str, Mapping[str, Any]], top: int = LOCKS_TOP) -> Table:
    """The cache lines under the locks, as ``perf c2c`` looks at a contended line: what each write met
    (``LockStat.line_dict``), most total queueing first. A line that several classes share (mm_struct's)
    shows under each of them with the same counts."""
    t = Table(["class", "writes", "in window %", "queued %", "queue wait avg µs", "storms %", "spinners/storm",
               "re-read stall avg µs", "transfers"], align="lrrrrrrrr",
              title="Lock cache lines (a line shared by classes counts under each):")
    used = [(name, s["line"]) for name, s in locks.items() if s.get("line")]
    order = sorted(used, key=lambda kv: (-kv[1]["queued"] * kv[1]["queue_wait_ns_avg"], kv[0]))
    for name, ln in order[:top]:
        w = ln["writes"] or 1
        t.rows.append([
            name, fmt_int(ln["writes"]), f"{100 * ln['window_local'] / w:.1f}", f"{100 * ln['queued'] / w:.1f}",
            f"{ln['queue_wait_ns_avg'] / 1e3:,.3f}", f"{100 * ln['storms'] / w:.1f}", f"{ln['spinners_per_storm']:.1f}",
            f"{ln.get('reread_stall_ns_avg', 0.0) / 1e3:,.3f}", fmt_int(ln["transfers"]),
        ])
    return t


def sim_line(sim: Mapping[str, Any]) -> str:
    events = int(sim.get("events", 0))
    wall = float(sim.get("wall_seconds", 0.0))
    rate = f" ({events / wall:,.0f} events/s)" if wall > 0 else ""
    simulated = float(sim.get("simulated_seconds", 0.0))
    return f"sim: {events:,} events in {wall:.2f} s wall{rate}; {simulated:.6g} s simulated"


def format_run(runs: Mapping[str, Any] | Sequence[Mapping[str, Any]], perf_block: bool = True) -> Doc:
    """The ``mmsim run`` report from ``RunResult.to_dict()`` (or the list of ``-r N``): perf stat
    (unless ``perf_block`` is False: the CLI prints it raw, blank lines and all), the benchmark's
    metrics, and of the first run the profile, SLUB statistics, lock_stat and the simulation line."""
    rs: list[Mapping[str, Any]] = [runs] if isinstance(runs, Mapping) else list(runs)
    run = rs[0]
    doc: Doc = []
    if perf_block:
        from mmsim.report import perfstat

        doc.append(perfstat.text(rs, command_line(run)).strip("\n"))
    if run.get("metrics"):
        doc.append(metrics_table(run["metrics"], [r.get("metrics") or {} for r in rs]))
    if run.get("profile"):
        doc.append(profile_block(run["profile"]))
    slab = slab_stats_table(run.get("counters") or {})
    if slab.rows:
        doc.append(slab)
    if any(s.get("acquisitions", 0) for s in (run.get("locks") or {}).values()):
        doc.append(locks_table(run["locks"]))
        ls = lock_stat_table(run["locks"])
        if ls.rows:
            doc.append(ls)
        ll = lock_lines_table(run["locks"])
        if ll.rows:
            doc.append(ll)
    doc.append(sim_line(run.get("sim") or {}) + (f" (run 1 of {len(rs)})" if len(rs) > 1 else ""))
    return doc


# -- mmsim reproduce -------------------------------------------------------------


def verdict(ok: bool | None, kind: str = "band") -> str:
    """PASS/FAIL for a banded check; ``met``/``missed`` for an extra target (which does not decide the
    experiment's PASS); ``info`` for a value shown without a band."""
    if ok is None:
        return "info"
    if kind == "target":
        return "met" if ok else "missed"
    return "PASS" if ok else "FAIL"


def outcome_table(o: Mapping[str, Any]) -> Table:
    checks: list[Mapping[str, Any]] = list(o.get("checks") or [])
    with_notes = any(c.get("note") for c in checks)
    headers = ["metric", "published", "simulated", "band", "verdict"] + (["note"] if with_notes else [])
    t = Table(headers, align="lrrrl" + ("l" if with_notes else ""))
    for c in checks:
        row = [
            str(c.get("metric", "")),
            fmt_num(c.get("published")),
            fmt_num(c.get("simulated")) + (f" ± {fmt_num(c['ci95'])}" if c.get("ci95") is not None else ""),
            fmt_band(c.get("band")),
            verdict(c.get("ok"), str(c.get("kind") or "band")),
        ]
        t.rows.append(row + ([str(c.get("note") or "")] if with_notes else []))
    return t


def _arm_lines(arms: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per arm: its scalar fields and its benchmark metrics."""
    lines = []
    for name, summary in arms.items():
        items = [(k, v) for k, v in summary.items() if isinstance(v, (int, float, str))]
        items += list((summary.get("metrics") or {}).items())
        lines.append(f"  arm {name}: " + ", ".join(f"{k}={fmt_num(v)}" for k, v in items))
    return lines


def format_outcome(o: Mapping[str, Any]) -> Doc:
    head = f"== {o.get('id')}: {o.get('title', '')}  [{verdict(bool(o.get('ok')))}]"
    # ok is the verdict over banded checks only; informational rows never fail it.
    doc: Doc = [head, outcome_table(o)]
    notes = [str(n) for n in (o.get("notes") or [])]
    if notes:
        doc.append("Mechanism:\n" + "\n".join(f"  {n}" for n in notes))
    if o.get("arms"):
        doc.append("\n".join(_arm_lines(o["arms"])))
    return doc


def format_outcomes(outcomes: Iterable[Mapping[str, Any]]) -> Doc:
    """All experiments, then one summary line (results outside a band are reported, not hidden)."""
    doc: Doc = []
    outs = list(outcomes)
    for o in outs:
        doc += format_outcome(o)
    n_ok = sum(1 for o in outs if o.get("ok"))
    doc.append(f"{n_ok} of {len(outs)} experiments within their published bands.")
    return doc


# -- catalogues ------------------------------------------------------------------


def machines_table(machines: Iterable[tuple[str, Machine]]) -> Table:
    t = Table(["name", "CPUs", "sockets", "nodes", "description"], align="lrrrl")
    for name, m in machines:
        t.rows.append([name, str(m.ncpus), str(len(m.sockets)), str(len(m.nodes)), m.description])
    return t


def _kv(d: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def kernels_table(kernels: Iterable[Any]) -> Table:
    """Objects with ``name, base, patches, description``."""
    t = Table(["kernel", "base", "patches", "description"], align="llll", title="Kernels:")
    for k in kernels:
        t.rows.append([k.name, k.base or "-", " ".join(k.patches) or "-", k.description])
    return t


def policies_table(kernels: Sequence[Any]) -> Table:
    """Policy × kernel matrix: which choice each kernel makes (``--set`` overrides one)."""
    names = list(dict.fromkeys(p for k in kernels for p in k.policies))
    t = Table(["policy", *(k.name for k in kernels)], align="l" * (len(kernels) + 1), title="Policies:")
    t.rows = [[p, *(str(k.policies.get(p, "-")) for k in kernels)] for p in names]
    return t


def patches_table(patches: Iterable[Any]) -> Table:
    """Objects with ``commit, subject, changes``."""
    t = Table(["commit", "subject", "changes"], align="lll", title="Patches:")
    t.rows = [[p.commit, p.subject, _kv(p.changes)] for p in patches]
    return t


# -- mmsim machine show ----------------------------------------------------------


def _topology(m: Machine) -> str:
    s = m.sockets[0]
    lines = [
        f"{m.name}: {m.description}",
        f"  CPUs      {m.ncpus} = {len(m.sockets)} sockets × {s.cores} cores × {s.threads_per_core} threads"
        f" at {m.freq_ghz:g} GHz",
        f"  nodes     {len(m.nodes)} NUMA nodes, "
        f"{sum(n.memory_gib for n in m.nodes):,.0f} GiB in total",
    ]
    return "\n".join(lines)


def _nodes_table(m: Machine) -> Table:
    t = Table(
        ["node", "socket", "memory GiB", "type", "latency ns", "remote ns", "read GB/s", "write GB/s", "CPUs"],
        align="rrrlrrrrr",
        title="NUMA nodes:",
    )
    for n in m.nodes:
        ncpus = len(m.node_cpus(n.id))
        t.rows.append([
            str(n.id), str(n.socket), fmt_num(n.memory_gib), n.mem_type.value,
            fmt_num(n.latency_ns), fmt_num(n.remote_latency_ns), fmt_num(n.read_bw_gbs), fmt_num(n.write_bw_gbs),
            str(ncpus),
        ])
    return t


def _distances(m: Machine) -> str:
    """The SLIT matrix when it fits on a screen, else its distinct values."""
    if len(m.nodes) <= 8:
        rows = ["  " + " ".join(f"{d:3d}" for d in r) for r in m.distances]
        return "Node distances (SLIT):\n" + "\n".join(rows)
    values = sorted({d for r in m.distances for d in r})
    return "Node distances (SLIT): values " + ", ".join(map(str, values))


def _caches_table(m: Machine) -> Table:
    t = Table(["level", "size KiB", "ways", "line B", "shared by CPUs", "latency ns"], title="Caches:")
    t.rows = [
        [c.name, fmt_num(c.size_kib) + (f" (effective {fmt_num(c.effective_kib)})" if c.effective_kib else ""),
         str(c.ways), str(c.line_bytes), str(c.shared_by), fmt_num(c.latency_ns)]
        for c in m.caches
    ]
    return t


def _cost_table(m: Machine) -> Table:
    c = m.cost
    t = Table(["cost", "value", "source"], align="lrl", title="Cost model:")
    for name in (
        "line_xfer_smt_ns", "line_xfer_socket_ns", "line_xfer_remote_ns", "line_hit_socket_ns",
        "line_hit_remote_ns", "core_clear_gbs", "ctx_switch_ns", "wakeup_ns", "page_fault_ns",
    ):
        t.rows.append([name, fmt_num(getattr(c, name)), c.sources.get(name, "")])
    if c.anon_folio_ns is not None:  # issue 15: measured by mmsim calibrate only
        t.rows.append(["anon_folio_ns", fmt_num(c.anon_folio_ns), c.sources.get("anon_folio_ns", "")])
    return t


def format_machine(m: Machine) -> Doc:
    doc: Doc = [_topology(m), _nodes_table(m), _distances(m), _caches_table(m), _cost_table(m)]
    if m.sources:
        doc.append("Sources:\n" + "\n".join(f"  {k}: {v}" for k, v in m.sources.items()))
    return doc
