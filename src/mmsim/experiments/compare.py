"""A/B compare over repeated runs, the kernel test robot's way.

``compare(...)`` runs one workload on one machine under two kernels, ``runs``
times each with seeds ``seed, seed + 1, ...`` (the same seeds in both arms),
flattens every number of every run (benchmark metric, perf-stat, proc-vmstat,
perf-profile, lock_stat; :func:`mmsim.results.store.flat_metrics`), and for
each metric gives both arms' mean and %stddev, the %change, LKP's range-gap
rule and Welch's t-test (:mod:`mmsim.experiments.stats`). The verdict names
the patches that separate the arms, like the robot's
``FYI, we noticed a -33.4% regression of vm-scalability.throughput due to commit: ...``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mmsim.errors import UserError
from mmsim.experiments import stats
from mmsim.experiments.executors import Progress, canonical, parse_kernel, run_many, with_seeds
from mmsim.experiments.run import RunSpec
from mmsim.results.store import Store, flat_metrics

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Arm:
    label: str  # as the user typed it
    kernel: str  # resolved label
    patches: tuple[str, ...]  # every patch in the kernel (release patches included)
    policies: dict[str, str]
    values: dict[str, list[float]]  # metric -> one value per run
    results: list[dict[str, Any]] = field(repr=False, default_factory=list)


@dataclass
class Row:
    metric: str
    change: stats.Change
    benchmark: bool  # one of the workload's own metrics

    def to_dict(self, a: list[float], b: list[float]) -> dict[str, Any]:
        c = self.change
        return {
            "metric": self.metric,
            "benchmark": self.benchmark,
            "a": _summary(c.a, a),
            "b": _summary(c.b, b),
            "pct_change": _finite(c.pct_change),
            "lkp_changed": c.lkp,
            "welch_p": c.welch_p,
            "significant": c.significant,
            "direction": {1: "higher", -1: "lower", 0: None}[c.direction],
            "verdict": c.verdict or None,
        }


def _summary(s: stats.Summary, values: list[float]) -> dict[str, Any]:
    return {"n": s.n, "mean": s.mean, "stddev": s.stddev, "pct_stddev": s.pct_stddev, "min": s.min, "max": s.max,
            "values": values}


def _finite(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None  # strict JSON: no NaN/Infinity


@dataclass
class Comparison:
    workload: str
    machine: str
    params: dict[str, Any]
    runs: int
    seeds: list[int]
    a: Arm
    b: Arm
    rows: list[Row]
    culprit: str  # "commit abc ("subject")", "2 patches: ...", "policy x=a→b", or ""
    executed: int = 0

    @property
    def verdicts(self) -> list[str]:
        """One robot-style line per significant benchmark metric, or one 'no change' line."""
        out = []
        # the first line is the robot's headline (stats.kpi_rank: throughput first)
        for r in sorted(self.rows, key=lambda r: stats.kpi_rank(r.metric)):
            if not r.benchmark:
                continue
            c = r.change
            if c.verdict in ("regression", "improvement"):
                kind = c.verdict
            elif c.verdict == "change":
                kind = "change"
            else:
                continue
            out.append(f"noticed a {c.pct_change:+.1f}% {kind} of {r.metric}"
                       + (f" due to {self.culprit}" if self.culprit else ""))
        if not out:
            bench = [r for r in self.rows if r.benchmark]
            what = ", ".join(f"{r.metric} {r.change.pct_change:+.1f}%" for r in bench) or "no benchmark metric"
            out.append(f"no significant change ({what}) between {self.a.kernel} and {self.b.kernel}")
        return out

    @property
    def regression(self) -> bool:
        return any(r.benchmark and r.change.verdict == "regression" for r in self.rows)

    def to_frame(self) -> pd.DataFrame:
        """One row per metric: each arm's mean and %stddev (``KERNEL mean``, ``KERNEL %stddev``), the
        %change, LKP's rule, Welch's p, significance and the verdict."""
        import pandas as pd

        rows = []
        for r in self.rows:
            c = r.change
            rows.append({"metric": r.metric, "benchmark": r.benchmark,
                         f"{self.a.label} mean": c.a.mean, f"{self.a.label} %stddev": c.a.pct_stddev,
                         f"{self.b.label} mean": c.b.mean, f"{self.b.label} %stddev": c.b.pct_stddev,
                         "%change": _finite(c.pct_change), "lkp_changed": c.lkp, "welch_p": c.welch_p,
                         "significant": c.significant, "verdict": c.verdict or None})
        return pd.DataFrame(rows)

    def runs_frame(self) -> pd.DataFrame:
        """Every run of both arms: :func:`mmsim.experiments.run.frame` plus an ``arm`` column."""
        from mmsim.experiments.run import frame

        df = frame(self.a.results + self.b.results)
        df.insert(0, "arm", [self.a.label] * len(self.a.results) + [self.b.label] * len(self.b.results))
        return df

    def row(self, metric: str) -> Row:
        for r in self.rows:
            if r.metric == metric:
                return r
        raise KeyError(metric)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "compare",
            "workload": self.workload,
            "machine": self.machine,
            "params": self.params,
            "runs": self.runs,
            "seeds": self.seeds,
            "arms": [_arm_dict(self.a), _arm_dict(self.b)],
            "culprit": self.culprit,
            "verdicts": self.verdicts,
            "regression": self.regression,
            "executed": self.executed,
            "metrics": [r.to_dict(self.a.values[r.metric], self.b.values[r.metric]) for r in self.rows],
        }


def _arm_dict(a: Arm) -> dict[str, Any]:
    return {"label": a.label, "kernel": a.kernel, "patches": list(a.patches), "policies": a.policies}


def culprit(a_patches: tuple[str, ...], b_patches: tuple[str, ...], a_pol: dict[str, str],
            b_pol: dict[str, str]) -> str:
    """What separates arm B from arm A, in the robot's words."""
    from mmsim.kernels.catalog import PATCHES

    def describe(c: str) -> str:
        p = PATCHES.get(c)
        return f'commit {c[:12]} ("{p.subject}")' if p else f"commit {c[:12]}"

    added = [c for c in b_patches if c not in a_patches]
    removed = [c for c in a_patches if c not in b_patches]
    if len(added) == 1 and not removed:
        return describe(added[0])
    if added and not removed:
        return f"{len(added)} patches: " + "; ".join(describe(c) for c in added)
    if removed and not added:
        return "reverting " + "; ".join(describe(c) for c in removed)
    diff = [f"{k}={a_pol.get(k)}→{b_pol.get(k)}" for k in sorted(set(a_pol) | set(b_pol))
            if a_pol.get(k) != b_pol.get(k)]
    return ("policy " + ", ".join(diff)) if diff else ""


def compare(
    workload: str,
    kernels: list[str],
    machine: str = "tiny",
    params: dict[str, str] | None = None,
    policies: dict[str, str] | None = None,
    runs: int = 3,
    seed: int = 0,
    executor: str = "process",
    workers: int | None = None,
    scheduler: str | None = None,
    store: Store | None = None,
    fresh: bool = False,
    progress: Progress | None = None,
) -> Comparison:
    if len(kernels) != 2:
        raise UserError("--kernel", " ".join(kernels) or "(none)", "exactly two kernels: --kernel A --kernel B")
    if runs < 1:
        raise UserError("-r/--runs", runs, "an integer >= 1")
    specs: list[RunSpec] = []
    arm_specs = []
    for k in kernels:
        base, patches = parse_kernel(k)
        spec = RunSpec(workload, machine, base, patches, dict(policies or {}), dict(params or {}), seed)
        arm_specs.append(spec)
        specs += with_seeds(spec, runs, seed)
    canon = [canonical(s) for s in arm_specs]
    results, executed = run_many(specs, executor, workers, scheduler, store, fresh, progress)
    from mmsim.kernels.catalog import resolve

    arms = []
    for i, (label, spec) in enumerate(zip(kernels, arm_specs, strict=True)):
        rk = resolve(spec.kernel, list(spec.patches), spec.policies)
        rs = results[i * runs:(i + 1) * runs]
        flats = [flat_metrics(r) for r in rs]
        names = sorted(set().union(*flats))
        values = {n: [f.get(n, 0.0) for f in flats] for n in names}
        arms.append(Arm(label, rk.name, rk.patches, dict(rk.policies), values, rs))
    a, b = arms
    bench = set(results[0]["metrics"])
    rows = []
    for name in sorted(set(a.values) | set(b.values), key=lambda n: (n not in bench, n)):
        a.values.setdefault(name, [0.0] * runs)
        b.values.setdefault(name, [0.0] * runs)
        perf = name in bench or name.startswith("perf-stat.")  # LKP's perf_metric?: the 1.01 ratio floor
        rows.append(Row(name, stats.change(a.values[name], b.values[name], name, perf), name in bench))
    return Comparison(workload, canon[0]["machine"], canon[0]["params"], runs, [seed + i for i in range(runs)],
                      a, b, rows, culprit(a.patches, b.patches, a.policies, b.policies), executed)
