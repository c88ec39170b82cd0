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


def lkp_table(d: dict[str, Any], show_all: bool = False) -> str:
    """The LKP compare table of a ``Comparison.to_dict()``: benchmark metrics always, the rest when significant.

    LKP's columns are 10 characters wide; they widen here when a value (a
    byte count, a cycle count) or a %change does not fit, so they stay aligned.
    """
    a, b = d["arms"][0]["kernel"], d["arms"][1]["kernel"]
    rows = [m for m in d["metrics"] if m["benchmark"] or m["significant"] or show_all]
    w = max([10] + [len(_val(m[k]["mean"])) for m in rows for k in ("a", "b")])
    cw = max([10] + [len(_pct(m["pct_change"])) for m in rows])  # the %change column
    pad, cpad = w - 10, cw - 10
    lines = [f"{a:>{16 + pad}} {b:>{27 + pad + cpad}}", "-" * (16 + pad) + " " + "-" * (27 + pad + cpad),
             f"{'%stddev':>{16 + pad}} {'%change':>{11 + cpad}} {'%stddev':>{15 + pad}}",
             " " * (15 + pad) + "\\" + " " * (10 + cpad) + "|" + " " * (16 + pad) + "\\"]
    for m in rows:
        left = f"{_val(m['a']['mean']):>{w}}{_sd(m['a']['pct_stddev'])}"
        right = f"{_val(m['b']['mean']):>{w}}{_sd(m['b']['pct_stddev'])}"
        lines.append(f"{left} {_pct(m['pct_change']):>{cw}} {right}  {m['metric']}")
    return "\n".join(lines)


def compare_doc(d: dict[str, Any], show_all: bool = False) -> Doc:
    arms = d["arms"]
    params = " ".join(f"{k}={v}" for k, v in d["params"].items())
    head = [
        f"compare {d['workload']} on {d['machine']} ({params})",
        f"  A: {arms[0]['kernel']}   B: {arms[1]['kernel']}   {d['runs']} run(s) per arm, seeds {d['seeds']}"
        f"   ({d['executed']} run now, {2 * d['runs'] - d['executed']} from the results store)",
    ]
    tests = Table(["metric", "A mean", "B mean", "%change", "LKP gap", "Welch p", "better", "verdict"],
                  align="lrrrrrll", title="significance (benchmark metrics; both tests must agree)")
    for m in d["metrics"]:
        if m["benchmark"]:
            tests.rows.append([m["metric"], fmt_num(m["a"]["mean"]), fmt_num(m["b"]["mean"]), _pct(m["pct_change"]),
                               "yes" if m["lkp_changed"] else "no", f"{m['welch_p']:.3g}", m["direction"] or "-",
                               m["verdict"] or "-"])
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
