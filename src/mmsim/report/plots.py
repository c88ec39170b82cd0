"""Plots with matplotlib, from the ``to_dict()`` of a sweep or a comparison.

``scaling``: a metric against a swept parameter, one line per
(machine, kernel[, other swept params]), error bars = standard deviation
over the seeds. ``profile``: the cycle profile's top symbols, arm A against
arm B (``arm_profiles``: the arms of a reproduce experiment).
``lock_waits``: each lock class's wait time as a share of task-clock
(sleeping waits included, so the stack can pass 100 %), per arm (compare)
or per point (sweep).

Figures are built with :class:`matplotlib.figure.Figure` directly (no
pyplot, no global state, no display needed).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from mmsim.errors import UserError

FORMATS = (".png", ".svg")


def check_output(path: Path) -> None:
    if path.suffix not in FORMATS:
        raise UserError("--output", str(path), "a file name ending in .png or .svg")


def _kind(data: Any, *kinds: str) -> str:
    k = data.get("kind") if isinstance(data, dict) else None
    if k not in kinds:
        raise UserError("INPUT", k or type(data).__name__, [f"the --json output of mmsim {x}" for x in kinds])
    return str(k)


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def scaling(data: dict[str, Any], metric: str | None = None, x: str | None = None) -> Figure:
    _kind(data, "sweep")
    grid: dict[str, list[str]] = data["grid"]
    swept = [k for k, v in grid.items() if len(v) > 1]
    x = x or (swept[0] if swept else next(iter(grid), None))
    if x is None or x not in grid:
        raise UserError("--x", x, sorted(grid) or ["a swept -p parameter"])
    metric = metric or data["benchmark_metrics"][0]
    if not any(metric in p["summary"] for p in data["points"]):
        raise UserError("--metric", metric, sorted(data["points"][0]["summary"]))
    numeric = all(_num(v) is not None for v in grid[x])
    series: dict[str, list[tuple[float, float, float]]] = {}
    for p in data["points"]:
        others = " ".join(f"{k}={v}" for k, v in p["swept"].items() if k != x and len(grid[k]) > 1)
        label = " ".join(s for s in (p["kernel"], p["machine"] if len(data["machines"]) > 1 else "", others) if s)
        xv = p["swept"][x]
        pos = _num(xv) if numeric else float(grid[x].index(xv))
        s = p["summary"].get(metric)
        if s is not None and pos is not None:
            series.setdefault(label, []).append((pos, s["mean"], s["stddev"]))
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for label, pts in series.items():
        pts.sort()
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                    label=label)
    if not numeric:
        ax.set_xticks(range(len(grid[x])), grid[x])
    ax.set_xlabel(x)
    ax.set_ylabel(metric)
    machines = ", ".join(data["machines"])
    ax.set_title(f"{data['workload']} on {machines}: {metric} vs {x} (mean ± stddev, {data['runs']} run(s))",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _metric_means(data: dict[str, Any], prefix: str, suffix: str = "") -> dict[str, tuple[float, float, float, float]]:
    out = {}
    for m in data["metrics"]:
        name = m["metric"]
        if name.startswith(prefix) and name.endswith(suffix):
            key = name[len(prefix):len(name) - len(suffix)]
            out[key] = (m["a"]["mean"], m["a"]["stddev"], m["b"]["mean"], m["b"]["stddev"])
    return out


def profile(data: dict[str, Any], top: int = 12) -> Figure:
    _kind(data, "compare")
    prof = _metric_means(data, "perf-profile.self.cycles-pp.")
    syms = sorted(prof, key=lambda s: -max(prof[s][0], prof[s][2]))[:top][::-1]
    fig = Figure(figsize=(7, 0.4 * len(syms) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    a, b = (arm["kernel"] for arm in data["arms"])
    ys = range(len(syms))
    ax.barh([y + 0.2 for y in ys], [prof[s][0] for s in syms], 0.4, xerr=[prof[s][1] for s in syms], label=a)
    ax.barh([y - 0.2 for y in ys], [prof[s][2] for s in syms], 0.4, xerr=[prof[s][3] for s in syms], label=b)
    ax.set_yticks(list(ys), syms, fontsize=8)
    ax.set_xlabel("% of cycles (perf-profile.self)")
    ax.set_title(f"{data['workload']} on {data['machine']}: cycle profile", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def arm_profiles(outcome: dict[str, Any], top: int = 10) -> Figure:
    """A reproduce experiment's arms side by side: % of cycles of the top profile symbols."""
    arms: dict[str, dict[str, float]] = {
        name: {line["symbol"]: line["percent"] for line in arm.get("profile", [])}
        for name, arm in outcome["arms"].items()
    }
    if not any(arms.values()):
        raise UserError("INPUT", outcome.get("id"), "a reproduce outcome with per-arm profiles")
    syms = sorted({s for p in arms.values() for s in p}, key=lambda s: -max(p.get(s, 0.0) for p in arms.values()))
    syms = syms[:top][::-1]
    fig = Figure(figsize=(7, 0.4 * len(syms) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    h = 0.8 / len(arms)
    for k, (name, prof) in enumerate(arms.items()):
        ax.barh([y + (k - (len(arms) - 1) / 2) * h for y in range(len(syms))], [prof.get(s, 0.0) for s in syms], h,
                label=name)
    ax.set_yticks(range(len(syms)), syms, fontsize=8)
    ax.set_xlabel("% of cycles")
    ax.set_title(f"{outcome['id']}: cycle profile per arm", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def lock_waits(data: dict[str, Any]) -> Figure:
    kind = _kind(data, "compare", "sweep")
    bars: list[tuple[str, dict[str, float]]] = []
    if kind == "compare":
        w = _metric_means(data, "lock_stat.", ".wait-share%")
        bars = [(data["arms"][0]["kernel"], {k: v[0] for k, v in w.items()}),
                (data["arms"][1]["kernel"], {k: v[2] for k, v in w.items()})]
    else:
        for p in data["points"]:
            label = " ".join([p["kernel"]] + [f"{k}={v}" for k, v in p["swept"].items()])
            bars.append((label, {n[len("lock_stat."):-len(".wait-share%")]: s["mean"]
                                 for n, s in p["summary"].items()
                                 if n.startswith("lock_stat.") and n.endswith(".wait-share%")}))
    classes = sorted({c for _, d in bars for c, v in d.items() if v > 0})
    fig = Figure(figsize=(max(5.0, 0.6 * len(bars) + 3), 4.5), layout="constrained")
    ax = fig.add_subplot()
    bottom = [0.0] * len(bars)
    for c in classes:
        vals = [d.get(c, 0.0) for _, d in bars]
        ax.bar(range(len(bars)), vals, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=30 if len(bars) > 2 else 0, ha="right"
                  if len(bars) > 2 else "center", fontsize=7)
    ax.set_ylabel("lock wait time, % of task-clock (sleeping waits included)")
    ax.set_title(f"{data['workload']}: lock-wait breakdown", fontsize=9)
    if classes:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no lock waits", transform=ax.transAxes, ha="center")
    return fig


def save(fig: Figure, path: Path) -> None:
    """Write atomically: a reader never sees half an image."""
    check_output(path)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format=path.suffix[1:], dpi=120)
    tmp.replace(path)


def to_svg(fig: Figure) -> str:
    """The figure as inline SVG text, for the HTML report."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    return re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)  # RDF boilerplate, no content
