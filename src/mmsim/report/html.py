"""A self-contained HTML page for a compare, sweep, bisect, run or reproduce result.

A single run's page gives what ran (workload command, machine, kernel, seed, noise), the workload
parameters, the policies that differ from the base kernel's (all of them folded below), perf stat,
the metrics/profile/lock_stat tables of ``mmsim run`` and the profile as a plot. A compare's page ends
with the mmtests layout and the robot's email (:mod:`mmsim.report.robot`).

One file, no external resources: the CSS is inline and the plots are inline
SVG (:mod:`mmsim.report.plots`), so the page opens anywhere, offline, and
can be mailed. The text tables are the same as the terminal's
(:mod:`mmsim.report.lkp`). A few lines of inline script fill in a summary
(``#summary``: number of tables and plots, hidden: it is for the test, not the
reader) once the page has loaded — the headless-browser test reads it back to
prove the page renders.
"""

from __future__ import annotations

import html
from typing import Any

from mmsim.errors import UserError
from mmsim.report.tables import Doc, Table, fmt_band, fmt_num

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: .25em .6em; } td.r { text-align: right; }
th { background: #eee; } .verdict { font-weight: bold; } .bad { color: #b00; } .good { color: #070; }
.plot svg { max-width: 100%; height: auto; } .mech { font-family: monospace; font-size: .85em; }
#summary { display: none; }
"""

_JS = """
document.addEventListener("DOMContentLoaded", function () {
  var s = document.getElementById("summary");
  s.textContent = "rendered: " + document.querySelectorAll("table").length + " tables, "
    + document.querySelectorAll(".plot svg").length + " plots";
  s.dataset.rendered = "ok";
});
"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _table(t: Table) -> str:
    rows = ["<table>"]
    if t.title:
        rows.append(f"<caption>{_e(t.title)}</caption>")
    rows.append("<tr>" + "".join(f"<th>{_e(h)}</th>" for h in t.headers) + "</tr>")
    for r in t.rows:
        rows.append("<tr>" + "".join(f'<td class="{a}">{_e(c)}</td>' for c, a in zip(r, t.align, strict=True))
                    + "</tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _doc(doc: Doc) -> str:
    return "\n".join(_table(b) if isinstance(b, Table) else f"<pre>{_e(b)}</pre>" for b in doc)


def _plot(fig_fn: Any, *args: Any) -> str:
    from mmsim.report import plots

    try:
        fig = fig_fn(*args)
    except (UserError, KeyError, IndexError, ValueError) as e:  # a plot that does not apply to this data
        return f"<p>(plot not available: {_e(e)})</p>"
    return f'<div class="plot">{plots.to_svg(fig)}</div>'


def _verdicts(lines: list[str], bad: bool) -> str:
    cls = "verdict bad" if bad else "verdict"
    return "\n".join(f'<p class="{cls}">{_e(v)}</p>' for v in lines)


def _compare(d: dict[str, Any]) -> tuple[str, str]:
    from mmsim.report import lkp, plots, robot

    a, b = d["arms"][0]["kernel"], d["arms"][1]["kernel"]
    title = f"compare {d['workload']} on {d['machine']}: {a} vs {b}"
    body = [_verdicts(lkp.verdict_lines(d), d.get("regression", False)),
            "<h2>%stddev / %change (LKP layout)</h2>", f"<pre>{_e(lkp.lkp_table(d))}</pre>",
            _doc([x for x in lkp.compare_doc(d) if isinstance(x, Table)])]
    mech = lkp.mechanism_lines(d)
    if mech:
        body.append("<h2>Mechanism</h2>" + "".join(f'<p class="mech">{_e(m)}</p>' for m in mech))
    body += ["<h2>Cycle profile</h2>", _plot(plots.profile, d),
             "<h2>Lock-wait breakdown</h2>", _plot(plots.lock_waits, d),
             "<h2>All metrics</h2>", f"<pre>{_e(lkp.lkp_table(d, show_all=True))}</pre>",
             "<h2>mmtests layout</h2>", f"<pre>{_e(robot.mmtests_table(d))}</pre>",
             "<h2>The kernel test robot's email</h2>", f"<pre>{_e(robot.robot_emails(d))}</pre>"]
    return title, "\n".join(body)


def _sweep(d: dict[str, Any]) -> str:
    from mmsim.report import lkp, plots

    body = [_doc(lkp.sweep_doc(d))]
    for m in d["benchmark_metrics"]:
        body += [f"<h2>Scaling: {_e(m)}</h2>", _plot(plots.scaling, d, m)]
    body += ["<h2>Lock-wait breakdown</h2>", _plot(plots.lock_waits, d)]
    return "\n".join(body)


def _bisect(d: dict[str, Any]) -> str:
    from mmsim.report import lkp

    body = []
    if d.get("first_bad"):
        fb = d["first_bad"]
        body.append(f'<p class="verdict bad">first bad commit: {_e(fb["commit"])} ("{_e(fb["subject"])}")</p>')
    body.append(f"<p>{_e(d['summary'])}</p>")
    body.append(_doc([x for x in lkp.bisect_doc({**d, "compare": None}) if isinstance(x, Table)]))
    series = Table(["#", "commit", "subject"], align="lll", title="series")
    for i, p in enumerate(d["series"]):
        series.rows.append([str(i + 1), p["commit"], p["subject"]])
    body.append(_table(series))
    if d.get("compare"):
        _, cbody = _compare(d["compare"])
        body += ["<h2>Compare: the last good step vs the first bad one</h2>", cbody]
    return "\n".join(body)


def _run(d: dict[str, Any]) -> str:
    """A single ``mmsim run``: what ran (parameters, seed, machine, the policies that differ from the base
    kernel's), then perf stat, the benchmark's metrics, profile, SLUB statistics and lock_stat, and the
    profile as a plot."""
    from mmsim.report import perfstat, plots
    from mmsim.report.robot import _machine_line
    from mmsim.report.text import command_line, format_run

    what = Table(["field", "value"], align="ll", title="what ran")
    what.rows = [["workload", str(d["workload"])], ["command", command_line(d)], ["machine", str(d["machine"])],
                 ["test machine", _machine_line(str(d["machine"]))], ["kernel", str(d["kernel"])],
                 ["seed", str(d.get("seed", ""))], ["mode", str(d.get("mode", "sim"))],
                 ["noise", str(d.get("noise") or "off")]]
    params = Table(["parameter", "value"], align="ll", title="workload parameters (-p; defaults included)")
    params.rows = [[k, str(v)] for k, v in (d.get("params") or {}).items()]
    body = [_table(what), _table(params), _policies(d), "<h2>perf stat</h2>",
            f"<pre>{_e(perfstat.text([d], command_line(d)).strip(chr(10)))}</pre>",
            "<h2>Metrics, profile and locks</h2>", _doc(format_run(d, perf_block=False))]
    if d.get("profile"):
        body += ["<h2>Cycle profile</h2>",
                 _plot(plots.arm_profiles, {"id": f"{d['workload']} on {d['machine']}",
                                            "arms": {str(d["kernel"]): {"profile": d["profile"]}}})]
    return "\n".join(body)


def _policies(d: dict[str, Any]) -> str:
    """The run's policies that differ from its base kernel's (the patches and --set), then all of them."""
    from mmsim.kernels.catalog import KERNELS, split_kernel

    pol: dict[str, str] = {str(k): str(v) for k, v in (d.get("policies") or {}).items()}
    try:
        base = split_kernel(str(d["kernel"]))[0]
    except Exception:  # a saved run of a kernel this mmsim does not know: no diff, the policies only
        base = ""
    ref = KERNELS[base].policies if base in KERNELS else {}
    diff = Table(["policy", f"base {base}" if base else "base", "this run"], align="lll",
                 title="policies that differ from the base kernel (patches and --set)")
    diff.rows = [[k, ref.get(k, "-"), v] for k, v in pol.items() if ref and ref.get(k) != v]
    full = Table(["policy", "value"], align="ll", title=f"all {len(pol)} policies")
    full.rows = [[k, v] for k, v in pol.items()]
    first = _table(diff) if diff.rows else f"<p>policies: those of {_e(base or d['kernel'])}, unchanged</p>"
    return f"{first}\n<details><summary>all policies</summary>\n{_table(full)}\n</details>"


def _reproduce(outcomes: list[dict[str, Any]]) -> str:
    from mmsim.report import plots

    body = []
    ok = sum(1 for o in outcomes if o.get("ok"))
    body.append(f'<p class="verdict">{ok} of {len(outcomes)} experiment(s) within their bands</p>')
    for o in outcomes:
        cls = "good" if o.get("ok") else "bad"
        body.append(f'<h2>{_e(o["id"])}: <span class="{cls}">{"PASS" if o.get("ok") else "FAIL"}</span></h2>')
        body.append(f"<p>{_e(o.get('title', ''))}</p>")
        t = Table(["metric", "published", "simulated", "band", "verdict", "note"], align="lrrrll")
        for c in o.get("checks", []):
            verdict = "info" if c.get("ok") is None else ("PASS" if c["ok"] else "FAIL")
            t.rows.append([c["metric"], fmt_num(c.get("published")), fmt_num(c.get("simulated")),
                           fmt_band(c.get("band")) if c.get("band") else "-", verdict, c.get("note", "")])
        body.append(_table(t))
        body += [f'<p class="mech">{_e(n)}</p>' for n in o.get("notes", [])]
        arms = Table(["arm", "kernel", "machine", "metrics"], align="llll", title="arms")
        for name, a in o.get("arms", {}).items():
            arms.rows.append([name, str(a.get("kernel", "")), str(a.get("machine", "")),
                              ", ".join(f"{k} {fmt_num(v)}" for k, v in a.get("metrics", {}).items())])
        if arms.rows:
            body.append(_table(arms))
            body.append(_plot(plots.arm_profiles, o))
    return "\n".join(body)


def report(data: Any) -> str:
    """The HTML page for a ``to_dict()`` (compare, sweep, bisect, run) or a reproduce ``--json`` list."""
    if isinstance(data, list) and all(isinstance(o, dict) and "checks" in o for o in data):
        title, body = "mmsim reproduce: published vs simulated", _reproduce(data)
    elif isinstance(data, dict) and data.get("kind") == "compare":
        title, body = _compare(data)
    elif isinstance(data, dict) and data.get("kind") == "sweep":
        title, body = f"sweep {data['workload']}", _sweep(data)
    elif isinstance(data, dict) and data.get("kind") == "bisect":
        title, body = f"bisect {data['workload']} on {data['machine']}: {data['metric']}", _bisect(data)
    elif isinstance(data, dict) and "kind" not in data and "perf" in data and "sim" in data:
        title, body = f"run {data['workload']} on {data['machine']}: {data['kernel']}", _run(data)
    else:
        raise UserError("INPUT", type(data).__name__,
                        "the --json output of mmsim compare, sweep, bisect, run or reproduce")
    from mmsim import __version__

    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n<h1>{_e(title)}</h1>\n"
            f'<p id="summary">(not rendered)</p>\n{body}\n'
            f"<p><small>mmsim {_e(__version__)}</small></p>\n<script>{_JS}</script>\n</body></html>\n")

