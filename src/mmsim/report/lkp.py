"""Text reports in the kernel test robot's layout: the compare table, sweep and bisect summaries.

The compare table is LKP's::

             v3.12                       v3.13
    ---------------- ---------------------------
             %stddev     %change         %stddev
                 \\          |                \\
        1075 ±  2%     -97.2%      29.69 ±  1%  thp_memscale.elapsed_seconds

``± N%`` is left out when the spread rounds to 0 %, as LKP does. The
functions take the ``to_dict()`` of a comparison, sweep or bisect, so the
same text can be printed from a saved ``--json`` file.
"""

from __future__ import annotations

from typing import Any

from mmsim.report.tables import Doc, Table, fmt_num


def _val(x: float) -> str:
    ax = abs(x)
    if ax >= 1e5 or (ax >= 100 and x == int(x)):
        return f"{x:.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    return f"{x:.4g}"


def _sd(pct: float) -> str:
    return f" ± {pct:2.0f}%" if round(pct) >= 1 else "      "


def _pct(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.1f}%"


def _columns(m: dict[str, Any]) -> list[dict[str, Any]]:
    """A metric row's kernels after the base: ``columns`` (three or more kernels) or B alone."""
    cols: list[dict[str, Any]] = m.get("columns") or [
        {"b": m["b"], "pct_change": m["pct_change"], "significant": m["significant"], "verdict": m.get("verdict")}]
    return cols


def lkp_table(d: dict[str, Any], show_all: bool = False) -> str:
    """The LKP compare table of a ``Comparison.to_dict()``: the base, then a %change and %stddev
    column per other kernel; benchmark metrics always, the rest when significant in any column.

    LKP's columns are 10 characters wide; they widen here when a value (a
    byte count, a cycle count) or a %change does not fit, so they stay aligned.
    """
    names = [a["kernel"] for a in d["arms"]]
    rows = [m for m in d["metrics"] if m["benchmark"] or show_all or any(c["significant"] for c in _columns(m))]
    w = max([10] + [len(_val(m["a"]["mean"])) for m in rows]
            + [len(_val(c["b"]["mean"])) for m in rows for c in _columns(m)])
    cw = max([10] + [len(_pct(c["pct_change"])) for m in rows for c in _columns(m)])  # the %change columns
    pad, cpad = w - 10, cw - 10
    more = names[1:]
    lines = [f"{names[0]:>{16 + pad}}" + "".join(f" {k:>{27 + pad + cpad}}" for k in more),
             "-" * (16 + pad) + "".join(" " + "-" * (27 + pad + cpad) for _ in more),
             f"{'%stddev':>{16 + pad}}" + "".join(f" {'%change':>{11 + cpad}} {'%stddev':>{15 + pad}}" for _ in more),
             " " * (15 + pad) + "\\" + ("" + " " * (10 + cpad) + "|" + " " * (16 + pad) + "\\") * len(more)]
    for m in rows:
        line = f"{_val(m['a']['mean']):>{w}}{_sd(m['a']['pct_stddev'])}"
        for c in _columns(m):
            line += f" {_pct(c['pct_change']):>{cw}} {_val(c['b']['mean']):>{w}}{_sd(c['b']['pct_stddev'])}"
        lines.append(f"{line}  {m['metric']}")
    return "\n".join(lines)


def compare_doc(d: dict[str, Any], show_all: bool = False) -> Doc:
    arms = d["arms"]
    params = " ".join(f"{k}={v}" for k, v in d["params"].items())
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    kernels = "   ".join(f"{letters[i] if i < 26 else i}: {a['kernel']}" for i, a in enumerate(arms))
    head = [
        f"compare {d['workload']} on {d['machine']} ({params})",
        f"  {kernels}   {d['runs']} run(s) per arm, seeds {d['seeds']}"
        f"   ({d['executed']} run now, {len(arms) * d['runs'] - d['executed']} from the results store)",
    ]
    many = len(arms) > 2
    tests = Table(["metric"] + (["kernel"] if many else []) + ["A mean", "mean" if many else "B mean", "%change",
                                                               "LKP gap", "Welch p", "better", "verdict"],
                  align=("ll" if many else "l") + "rrrrrll",
                  title="significance (benchmark metrics; both tests must agree)")
    for m in d["metrics"]:
        if not m["benchmark"]:
            continue
        for i, c in enumerate(m.get("columns") or [m]):
            tests.rows.append([m["metric"]] + ([letters[i + 1] if i < 25 else str(i + 1)] if many else [])
                              + [fmt_num(m["a"]["mean"]), fmt_num(c["b"]["mean"]), _pct(c["pct_change"]),
                                 "yes" if c["lkp_changed"] else "no", f"{c['welch_p']:.3g}", c["direction"] or "-",
                                 c["verdict"] or "-"])
    doc: Doc = ["\n".join(head), lkp_table(d, show_all), tests, "\n".join(verdict_lines(d))]
    mech = mechanism_lines(d)
    if mech:
        doc.append("\n".join(mech))
    return doc


def verdict_lines(d: dict[str, Any]) -> list[str]:
    """The robot's headline for the first KPI, then one line naming the other significant benchmark metrics."""
    v = d["verdicts"]
    if not v:
        return []
    if len(d["arms"]) > 2:  # one headline (or "no change") per kernel against the base
        return [("FYI, we " + x) if x.startswith("noticed") else x for x in v]
    out = [("FYI, we " + v[0]) if v[0].startswith("noticed") else v[0]]
    others = [m for m in d["metrics"] if m["benchmark"] and m["verdict"] and f" {m['metric']} " not in f"{v[0]} "]
    if others:
        out.append("also significant: " + ", ".join(f"{m['metric']} {_pct(m['pct_change'])}" for m in others))
    return out


def mechanism_lines(d: dict[str, Any], top: int = 4, min_pp: float = 0.1) -> list[str]:
    """Where the time went: the lock-wait and profile lines that moved most (by at least ``min_pp`` points)."""
    rows = [m for m in d["metrics"] if m["significant"] and abs(m["b"]["mean"] - m["a"]["mean"]) >= min_pp]
    locks = sorted((m for m in rows if m["metric"].endswith(".wait-share%")),
                   key=lambda m: -abs(m["b"]["mean"] - m["a"]["mean"]))[:top]
    prof = sorted((m for m in rows if m["metric"].startswith("perf-profile.")),
                  key=lambda m: -abs(m["b"]["mean"] - m["a"]["mean"]))[:top]
    out = []
    for m in locks:
        name = m["metric"][len("lock_stat."):-len(".wait-share%")]
        # wait time over task-clock: sleeping waits count too, so this can pass 100 %
        out.append(f"mechanism: waiting for {name}: {m['a']['mean']:.2f}% -> {m['b']['mean']:.2f}% of task-clock")
    for m in prof:
        sym = m["metric"].split("cycles-pp.", 1)[-1]
        out.append(f"mechanism: {m['a']['mean']:.2f}% -> {m['b']['mean']:.2f}% of cycles in {sym}")
    return out


def sweep_doc(d: dict[str, Any], metric: str | None = None) -> Doc:
    """One row per (machine, kernel, params) point: each benchmark metric's mean ± %stddev over the runs."""
    pts = d["points"]
    metrics = [metric] if metric else d["benchmark_metrics"]
    t = Table(["machine", "kernel", "params"] + [m for m in metrics] + ["runs"], align="lll" + "r" * len(metrics) + "r",
              title=f"sweep {d['workload']}: {len(pts)} point(s), {d['runs_total']} run(s) "
                    f"({d['executed']} run now, {d['runs_total'] - d['executed']} from the results store)")
    for p in pts:
        cells = []
        for m in metrics:
            s = p["summary"].get(m)
            cells.append("-" if s is None else f"{fmt_num(s['mean'])}{_sd(s['pct_stddev']).rstrip()}")
        t.rows.append([p["machine"], p["kernel"], " ".join(f"{k}={v}" for k, v in p["swept"].items())]
                      + cells + [str(len(p["seeds"]))])
    return [t]


def bisect_doc(d: dict[str, Any]) -> Doc:
    t = Table(["step", "kernel", "patches", d["metric"], "%stddev", "runs", "state"], align="rllrrrl",
              title=f"bisect {d['workload']} on {d['machine']}: {d['metric']}, threshold {d['threshold_pct']}%")
    for s in d["steps"]:
        t.rows.append([str(s["step"]), s["kernel"], str(s["npatches"]), fmt_num(s["mean"]),
                       f"{s['pct_stddev']:.1f}%", str(s["runs"]), s["state"]])
    doc: Doc = [t]
    if d.get("first_bad"):
        fb = d["first_bad"]
        doc.append(f"first bad commit: {fb['commit']} (\"{fb['subject']}\")  [{fb['index'] + 1} of {d['npatches']}]")
    doc.append(d["summary"])
    if d.get("compare"):
        doc += compare_doc(d["compare"])
    return doc
