"""Sensitivity of the seed results to the unsourced estimates of their machine.

For each `mmsim reproduce` experiment, every cost constant of its machine
whose source is labelled ``estimate`` or ``inference`` (CostModel fields,
the DRAM nodes' idle latency and sustained bandwidth, the LLC latency) is scaled by 0.5 and by 1.5,
one at a time, *in this process only* (the committed presets are not
changed), and both arms run again. A banded check that leaves its band
under such a change is *fragile*, and the constant that flips it is named.

Usage: python benchmarks/primitives_sensitivity.py [--json] [--write-table] [--factors 0.5,1.5] [EXPERIMENT ...]
(no experiment: all five). The markdown table goes to docs/validation.md;
``--write-table`` also writes src/mmsim/experiments/sensitivity.json, the
committed table `mmsim reproduce --json` reads its per-check ``fragile``
flags from (nothing is re-simulated at reproduce time). It takes about
2 x (number of estimates) x the experiment's reproduce time.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any
from unittest import mock

from mmsim.experiments import reproduce as rp
from mmsim.machine import presets
from mmsim.machine.model import Machine


def estimates(m: Machine) -> list[str]:
    """Names of the perturbable constants of ``m`` whose source is an estimate or an inference."""
    def unsourced(text: str) -> bool:
        t = text.lower()
        return "estimate" in t or "inference" in t or "assumed" in t

    # a clean-line cost equal to its modified-line one follows that field (see scaled); only an
    # independently set one (Ice Lake's MLC-ratio inference) is a constant of its own
    derived = {f for f in ("line_hit_socket_ns", "line_hit_remote_ns") if m.cost.sources.get(f, "").startswith(
        ("no clean-line figure", "not measured", "estimate: no clean-line figure"))}
    out = [f"cost.{f}" for f, s in m.cost.sources.items() if unsourced(s) and f not in derived]
    if unsourced(m.sources.get("nodes.latency_ns", "")):
        out.append("nodes.latency_ns")
    if "estimate" in m.sources.get("caches", "").lower():
        out.append("caches.L3.latency_ns")
    if unsourced(m.sources.get("nodes.bandwidth", "")):
        out.append("nodes.bandwidth")
    return sorted(out)


def scaled(m: Machine, what: str, factor: float) -> Machine:
    """``m`` with one constant scaled (hit costs follow their modified-line field when derived)."""
    if what.startswith("cost."):
        f = what[5:]
        v = getattr(m.cost, f) * factor
        if f == "smt_thread_speed":
            v = min(v, 1.0)
        kw: dict[str, Any] = {f: v}
        for hit, hitm in (("line_hit_socket_ns", "line_xfer_socket_ns"), ("line_hit_remote_ns", "line_xfer_remote_ns")):
            if hitm == f and getattr(m.cost, hit) == getattr(m.cost, hitm):
                kw[hit] = v
        return dataclasses.replace(m, cost=dataclasses.replace(m.cost, **kw))
    if what == "nodes.latency_ns":
        nodes = tuple(dataclasses.replace(n, latency_ns=n.latency_ns * factor,
                                          remote_latency_ns=(n.remote_latency_ns or n.latency_ns) * factor)
                      if n.mem_type.value == "DRAM" else n for n in m.nodes)
        return dataclasses.replace(m, nodes=nodes)
    if what == "nodes.bandwidth":
        nodes = tuple(dataclasses.replace(n, read_bw_gbs=n.read_bw_gbs * factor, write_bw_gbs=n.write_bw_gbs * factor)
                      if n.mem_type.value == "DRAM" else n for n in m.nodes)
        return dataclasses.replace(m, nodes=nodes)
    if what == "caches.L3.latency_ns":
        caches = tuple(dataclasses.replace(c, latency_ns=c.latency_ns * factor) if c.name == "L3" else c
                       for c in m.caches)
        return dataclasses.replace(m, caches=caches)
    raise ValueError(what)


def banded(outcome: Any) -> dict[str, tuple[float, bool]]:
    return {c.metric: (c.simulated, bool(c.ok)) for c in outcome.checks if c.kind == "band" and c.band is not None}


def sweep(exp_id: str, factors: tuple[float, ...]) -> list[dict[str, Any]]:
    rp._load()
    e = rp.EXPERIMENTS[exp_id]
    machines = sorted({spec.machine for spec in e.arms.values()})
    base = banded(rp.reproduce([exp_id])[0])
    rows: list[dict[str, Any]] = [{"experiment": exp_id, "constant": "(model)", "factor": 1.0,
                                   "checks": {k: v[0] for k, v in base.items()},
                                   "flipped": []}]
    for name in machines:
        m0 = presets.PRESETS[name]()
        for what in estimates(m0):
            for f in factors:
                m = scaled(m0, what, f)
                with mock.patch.dict(presets.PRESETS, {name: lambda m=m: m}):
                    got = banded(rp.reproduce([exp_id])[0])
                flipped = [k for k, (_, ok) in got.items() if ok != base[k][1]]
                rows.append({"experiment": exp_id, "constant": f"{name}:{what}", "factor": f,
                             "checks": {k: v[0] for k, v in got.items()}, "flipped": flipped})
                print(f"{exp_id} {name}:{what} x{f}: " + ", ".join(f"{k}={v[0]:.4g}" for k, v in got.items())
                      + (f"  FLIPS {flipped}" if flipped else ""), file=sys.stderr, flush=True)
    return rows


TABLE = Path(__file__).resolve().parent.parent / "src" / "mmsim" / "experiments" / "sensitivity.json"


def table(rows: list[dict[str, Any]], factors: tuple[float, ...]) -> dict[str, Any]:
    """{experiment: {"swept": [...], "factors": [...], "flips": {metric: ["machine:constant x0.5", ...]}}}."""
    out: dict[str, Any] = {}
    for r in rows:
        e = out.setdefault(r["experiment"], {"factors": list(factors), "swept": [], "flips": {}})
        if r["constant"] == "(model)":
            for k in r["checks"]:
                e["flips"].setdefault(k, [])
            continue
        if r["constant"] not in e["swept"]:
            e["swept"].append(r["constant"])
        for k in r["flipped"]:
            e["flips"].setdefault(k, []).append(f"{r['constant']} x{r['factor']}")
    return out


def main(argv: list[str]) -> None:
    as_json = "--json" in argv
    write = "--write-table" in argv
    factors = (0.5, 1.5)
    args = [a for a in argv if a not in ("--json", "--write-table")]
    if "--factors" in args:
        i = args.index("--factors")
        factors = tuple(float(x) for x in args[i + 1].split(","))
        del args[i:i + 2]
    rp._load()
    ids = args or list(rp.EXPERIMENTS)
    rows = [r for e in ids for r in sweep(e, factors)]
    if write:
        old = json.loads(TABLE.read_text()) if TABLE.is_file() else {}
        TABLE.write_text(json.dumps({**old, **table(rows, factors)}, indent=1, sort_keys=True) + "\n")
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    print("| experiment | constant | factor | banded results | leaves / enters its band |")
    print("|---|---|---:|---|---|")
    for r in rows:
        vals = ", ".join(f"{k} {v:.4g}" for k, v in r["checks"].items())
        print(f"| {r['experiment']} | {r['constant']} | {r['factor']} | {vals} | {', '.join(r['flipped']) or '-'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
