"""A/B compare over repeated runs, the kernel test robot's way.

``compare(...)`` runs one workload on one machine under two or more kernels
(LKP-style: the first is the base, each other one is compared with it), ``runs``
times each with seeds ``seed, seed + 1, ...`` (the same seeds in every arm),
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
from mmsim.experiments import guard, stats
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
class Column:
    """A third, fourth, ... kernel of an LKP-style compare: its arm, its rows against the base (arm A)
    and what separates it from the base."""

    arm: Arm
    rows: list[Row]
    culprit: str


@dataclass
class Comparison:
    workload: str
    machine: str
    params: dict[str, Any]
    runs: int
    seeds: list[int]
    a: Arm  # the base
    b: Arm
    rows: list[Row]  # B against A
    culprit: str  # "commit abc ("subject")", "2 patches: ...", "policy x=a→b", or ""
    executed: int = 0
    more: list[Column] = field(default_factory=list)  # kernels 3..N, each against A

    @property
    def arms(self) -> list[Arm]:
        return [self.a, self.b, *(c.arm for c in self.more)]

    @property
    def columns(self) -> list[Column]:
        """Every kernel after the base, with its rows against the base: B first."""
        return [Column(self.b, self.rows, self.culprit), *self.more]

    @property
    def verdicts(self) -> list[str]:
        """One robot-style line per significant benchmark metric of each kernel against the base, or
        one 'no change' line per kernel."""
        return [v for col in self.columns for v in self._verdicts(col)]

    def _verdicts(self, col: Column) -> list[str]:
        out = []
        # the first line is the robot's headline (stats.kpi_rank: throughput first)
        for r in sorted(col.rows, key=lambda r: stats.kpi_rank(r.metric)):
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
                       + (f" due to {col.culprit}" if col.culprit else ""))
        if not out:
            bench = [r for r in col.rows if r.benchmark]
            what = ", ".join(f"{r.metric} {r.change.pct_change:+.1f}%" for r in bench) or "no benchmark metric"
            out.append(f"no significant change ({what}) between {self.a.kernel} and {col.arm.kernel}")
        return out

    @property
    def regression(self) -> bool:
        return any(r.benchmark and r.change.verdict == "regression" for col in self.columns for r in col.rows)

    def to_frame(self) -> pd.DataFrame:
        """One row per metric: each arm's mean and %stddev (``KERNEL mean``, ``KERNEL %stddev``), the
        %change, LKP's rule, Welch's p, significance and the verdict."""
        import pandas as pd

        rows = []
        for i, r in enumerate(self.rows):
            c = r.change
            row: dict[str, Any] = {"metric": r.metric, "benchmark": r.benchmark,
                                   f"{self.a.label} mean": c.a.mean, f"{self.a.label} %stddev": c.a.pct_stddev}
            for col in self.columns:
                cc = col.rows[i].change
                lab = col.arm.label
                row.update({f"{lab} mean": cc.b.mean, f"{lab} %stddev": cc.b.pct_stddev,
                            f"{lab} %change": _finite(cc.pct_change), f"{lab} welch_p": cc.welch_p,
                            f"{lab} significant": cc.significant, f"{lab} verdict": cc.verdict or None})
            rows.append(row)
        return pd.DataFrame(rows)

    def runs_frame(self) -> pd.DataFrame:
        """Every run of both arms: :func:`mmsim.experiments.run.frame` plus an ``arm`` column."""
        from mmsim.experiments.run import frame

        df = frame([r for a in self.arms for r in a.results])
        df.insert(0, "arm", [a.label for a in self.arms for _ in a.results])
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
            "arms": [_arm_dict(a) for a in self.arms],
            "culprit": self.culprit,
            "verdicts": self.verdicts,
            "regression": self.regression,
            "executed": self.executed,
            "metrics": [self._metric_dict(i, r) for i, r in enumerate(self.rows)],
            "culprits": [col.culprit for col in self.columns],
        }

    def _metric_dict(self, i: int, r: Row) -> dict[str, Any]:
        """A metric's row: ``a``/``b`` and the tests of B against A, and with three or more kernels
        ``columns``: every kernel after the base against it (B included)."""
        d = r.to_dict(self.a.values[r.metric], self.b.values[r.metric])
        if self.more:
            d["columns"] = [{"kernel": col.arm.kernel, **col.rows[i].to_dict(self.a.values[r.metric],
                                                                              col.arm.values[r.metric])}
                            for col in self.columns]
            for c in d["columns"]:
                c.pop("a")
                c.pop("metric")
                c.pop("benchmark")
        return d


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
    noise: bool = False,
) -> Comparison:
    if len(kernels) < 2:
        raise UserError("--kernel", " ".join(kernels) or "(none)",
                        "two or more kernels: -k BASE -k K2 [-k K3 ...] (each compared with the base)")
    if runs < 1:
        raise UserError("-r/--runs", runs, "an integer >= 1")
    guard.check_grid(len(kernels) * runs, f"compare {workload}")  # before any spec is built
    specs: list[RunSpec] = []
    arm_specs = []
    for k in kernels:
        base, patches = parse_kernel(k)
        spec = RunSpec(workload, machine, base, patches, dict(policies or {}), dict(params or {}), seed, noise=noise)
        arm_specs.append(spec)
        specs += with_seeds(spec, runs, seed)
    canon = [canonical(s) for s in arm_specs]
    results, executed = run_many(specs, executor, workers, scheduler, store, fresh, progress, f"compare {workload}")
    from mmsim.kernels.catalog import resolve

    arms = []
    for i, (label, spec) in enumerate(zip(kernels, arm_specs, strict=True)):
        rk = resolve(spec.kernel, list(spec.patches), spec.policies)
        rs = results[i * runs:(i + 1) * runs]
        flats = [flat_metrics(r) for r in rs]
        names = sorted(set().union(*flats))
        values = {n: [f.get(n, 0.0) for f in flats] for n in names}
        arms.append(Arm(label, rk.name, rk.patches, dict(rk.policies), values, rs))
    a = arms[0]
    bench = set(results[0]["metrics"])
    names = sorted(set().union(*(x.values for x in arms)), key=lambda n: (n not in bench, n))
    for x in arms:
        for name in names:
            x.values.setdefault(name, [0.0] * runs)
    cols = []
    for x in arms[1:]:
        rows = []
        for name in names:
            perf = name in bench or name.startswith("perf-stat.")  # LKP's perf_metric?: the 1.01 ratio floor
            rows.append(Row(name, stats.change(a.values[name], x.values[name], name, perf), name in bench))
        cols.append(Column(x, rows, culprit(a.patches, x.patches, a.policies, x.policies)))
    return Comparison(workload, canon[0]["machine"], canon[0]["params"], runs, [seed + i for i in range(runs)],
                      a, cols[0].arm, cols[0].rows, cols[0].culprit, executed, cols[1:])
