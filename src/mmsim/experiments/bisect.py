"""Bisect a change in one metric to the first patch of an ordered series, as the robot does.

The series is a base kernel plus patches in merge order, given either as
``--good K1 --bad K2`` (the patches K2 has and K1 lacks, in K2's order:
``--bad v3.12+e1f56c89b040+e009bb30c8df`` or a release such as ``v3.13``)
or as a YAML file::

    base: v3.12            # a catalogued kernel or a kernel YAML file
    patches:               # merge order
      - e1f56c89b040
      - e009bb30c8df

Step *i* is the base plus the first *i* patches. Both ends are measured, the
change between them must reach ``threshold_pct`` (else there is nothing to
bisect, reported as such), then a binary search classifies each midpoint:
*bad* when its mean has moved from the good mean, in the bad direction, by
at least ``threshold_pct``; *good* otherwise.

Stability rule: every measured step runs ``runs`` seeds; if its %stddev
exceeds ``max_stddev_pct`` or its spread (max − min) exceeds
``max_spread_pct`` of the mean, ``runs`` more seeds are added, up to
``max_runs``. A step still unstable after that is classified all the same
and flagged ``unstable`` in the report, which then says the answer is not
trustworthy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmsim.errors import UserError
from mmsim.experiments import guard, stats
from mmsim.experiments.executors import Progress, parse_kernel, run_many, with_seeds
from mmsim.experiments.run import RunSpec
from mmsim.results.store import Store, flat_metrics


@dataclass(frozen=True)
class Series:
    base: str  # kernel name or YAML path, with its own patches folded in
    base_patches: tuple[str, ...]
    patches: tuple[str, ...]  # the series, in order: commit ids, or patch YAML files (user patches)

    def kernel(self, i: int) -> tuple[str, tuple[str, ...]]:
        return self.base, self.base_patches + self.patches[:i]

    def spec(self, i: int) -> str:
        """The kernel after ``i`` patches as ``BASE+PATCH+...`` to resolve (patch files by their path)."""
        from mmsim.kernels.catalog import is_file

        return "+".join((self.base,) + tuple(p if p.endswith((".yaml", ".yml")) or is_file(p) else p[:12]
                                             for p in self.base_patches + self.patches[:i]))

    def label(self, i: int) -> str:
        """The kernel after ``i`` patches for display: ``BASE+ID+...`` (12-character ids)."""
        from mmsim.kernels.catalog import lookup_patch

        return "+".join((self.base,) + tuple(lookup_patch(p).commit[:12] for p in self.base_patches + self.patches[:i]))


def load_series(path: str | Path) -> Series:
    from mmsim import inputs

    p = Path(path)
    data: Any = inputs.load_yaml(p, f"--series {p.name}", "a series YAML file", "a YAML mapping with base and patches")
    if not isinstance(data, dict) or set(data) - {"base", "patches", "description"}:
        extra = sorted(map(str, set(data) - {"base", "patches", "description"})) if isinstance(data, dict) else []
        raise UserError(f"{p.name}", f"unknown key {inputs.quote_key(extra[0])!r}" if extra else type(data).__name__,
                        "a YAML mapping with keys base, patches (and description)")
    patches = data.get("patches")
    if not isinstance(patches, list) or not patches:
        raise UserError(f"{p.name}: patches", patches, "a non-empty list of patch commit ids")
    base, bp = parse_kernel(str(data.get("base", "")))
    return Series(base, bp, tuple(_full_id(str(x), p.name) for x in patches))


def _full_id(pid: str, where: str) -> str:
    """A catalogued patch's full commit id; a patch YAML file stays as given (it is read when resolved)."""
    from mmsim.kernels.catalog import PATCHES, is_file, lookup_patch

    if pid.endswith((".yaml", ".yml")) or is_file(pid):
        lookup_patch(pid)  # bad files fail here, before anything runs
        return pid

    match = [c for c in PATCHES if c.startswith(pid) and len(pid) >= 7]
    if len(match) != 1:
        raise UserError(f"{where}: patch", pid, sorted(PATCHES))
    return match[0]


def series_from_kernels(good: str, bad: str) -> Series:
    """The patches ``bad`` has and ``good`` lacks, in ``bad``'s order; ``good`` must be contained in ``bad``."""
    from mmsim.kernels.catalog import is_file, lookup_patch, resolve

    gb, gp = parse_kernel(good)
    bb, bp = parse_kernel(bad)
    g = resolve(gb, list(gp))
    b = resolve(bb, list(bp))
    missing = [c for c in g.patches if c not in b.patches]
    if missing:
        raise UserError("--bad", bad, f"a kernel containing every patch of --good {good} (lacks {missing[0][:12]})")
    # user patches by the file they came from, so that every step can resolve them again
    files = {lookup_patch(x).commit: x for x in (*gp, *bp) if x.endswith((".yaml", ".yml")) or is_file(x)}
    series = tuple(files.get(c, c) for c in b.patches if c not in g.patches)
    if not series:
        raise UserError("--bad", bad, f"a kernel with patches that --good {good} lacks")
    return Series(gb, tuple(_full_id(x, "--good") for x in gp), series)


@dataclass
class Step:
    index: int  # patches applied
    kernel: str
    values: list[float]
    state: str = ""  # good / bad (+ " (unstable)")
    stable: bool = True

    @property
    def summary(self) -> stats.Summary:
        return stats.summarize(self.values)


@dataclass
class Bisection:
    workload: str
    machine: str
    metric: str
    threshold_pct: float
    series: Series
    steps: list[Step]
    first_bad: int | None  # index into series.patches
    summary: str
    compare: dict[str, Any] | None = field(default=None)
    executed: int = 0

    def to_dict(self) -> dict[str, Any]:
        from mmsim.kernels.catalog import lookup_patch

        fb = None
        if self.first_bad is not None:
            p = lookup_patch(self.series.patches[self.first_bad])
            fb = {"commit": p.commit, "subject": p.subject, "index": self.first_bad}
        return {
            "kind": "bisect",
            "workload": self.workload,
            "machine": self.machine,
            "metric": self.metric,
            "threshold_pct": self.threshold_pct,
            "base": self.series.label(0),
            "series": [{"commit": p.commit, "subject": p.subject}
                       for p in (lookup_patch(c) for c in self.series.patches)],
            "npatches": len(self.series.patches),
            "steps": [{"step": n + 1, "index": s.index, "kernel": s.kernel, "npatches": s.index,
                       "mean": s.summary.mean, "pct_stddev": s.summary.pct_stddev, "runs": len(s.values),
                       "values": s.values, "state": s.state, "stable": s.stable} for n, s in enumerate(self.steps)],
            "first_bad": fb,
            "summary": self.summary,
            "executed": self.executed,
            "compare": self.compare,
        }


def bisect(
    workload: str,
    series: Series,
    metric: str | None = None,
    threshold_pct: float = 5.0,
    machine: str = "tiny",
    params: dict[str, str] | None = None,
    runs: int = 3,
    max_runs: int | None = None,
    max_stddev_pct: float = 5.0,
    max_spread_pct: float = 10.0,
    seed: int = 0,
    executor: str = "process",
    workers: int | None = None,
    scheduler: str | None = None,
    store: Store | None = None,
    progress: Progress | None = None,
    noise: bool = False,
) -> Bisection:
    if runs < 1:
        raise UserError("-r/--runs", runs, "an integer >= 1")
    if not (math.isfinite(threshold_pct) and threshold_pct > 0):  # nan compares False: a +0.0% step was "bad"
        raise UserError("--threshold", threshold_pct, "a finite percentage > 0")
    for option, bound in (("--max-stddev", max_stddev_pct), ("--max-spread", max_spread_pct)):
        if not (math.isfinite(bound) and bound >= 0):
            raise UserError(option, bound, "a finite percentage >= 0")
    if max_runs is not None and max_runs < 1:
        raise UserError("--max-runs", max_runs, "an integer >= 1 (default 3 x --runs)")
    max_runs = max(max_runs or 3 * runs, runs)
    # the most runs it can take (both ends, then a binary search), before any spec is built
    guard.check_grid(max_runs * (2 + (len(series.patches)).bit_length()), f"bisect {workload}")
    executed = 0

    def specs_for(i: int, seeds: range) -> list[RunSpec]:
        base, patches = series.kernel(i)
        spec = RunSpec(workload, machine, base, patches, {}, dict(params or {}), seed, noise=noise)
        return with_seeds(spec, len(seeds), seeds.start)

    # a bisection that finds a culprit runs -r runs at both ends and at each of the ~log2(N) steps between:
    # together within the CPU-time limit of one run, from the dearer end's estimate (before anything runs)
    from mmsim.experiments.executors import checked

    ends = [checked(specs_for(i, range(seed, seed + 1))[0])[1].wall for i in (0, len(series.patches))]
    guard.check_total([max(ends)], f"bisect {workload}", runs * (2 + (len(series.patches) - 1).bit_length()))
    order: list[Step] = []
    machine_name = [machine]

    def measure(i: int) -> Step:
        nonlocal executed, metric
        n = runs
        rs: list[dict[str, Any]] = []
        while True:
            # only the seeds not measured yet: a step that grows keeps its earlier runs
            more, ran = run_many(specs_for(i, range(seed + len(rs), seed + n)), executor, workers, scheduler, store,
                                 progress=progress, what=f"bisect {workload}")
            rs += more
            executed += ran
            if metric is None:
                metric = stats.primary_kpi(rs[0]["metrics"])
            flats = [flat_metrics(r) for r in rs]
            if metric not in flats[0]:
                raise UserError("--metric", metric, sorted(flats[0]))
            st = Step(i, rs[0]["kernel"], [f[metric] for f in flats])
            machine_name[0] = rs[0]["machine"]
            s = st.summary
            spread = 100.0 * (s.max - s.min) / abs(s.mean) if s.mean else 0.0
            st.stable = s.pct_stddev <= max_stddev_pct and spread <= max_spread_pct
            if st.stable or n >= max_runs:
                break
            n = min(n + runs, max_runs)
        order.append(st)
        return st

    n = len(series.patches)
    good, bad = measure(0), measure(n)
    assert metric is not None
    total = stats.pct_change(good.summary.mean, bad.summary.mean)
    good.state, bad.state = "good", "bad"

    def is_bad(st: Step) -> bool:
        moved = stats.pct_change(good.summary.mean, st.summary.mean)
        return (moved > 0) == (total > 0) and abs(moved) >= threshold_pct

    first_bad: int | None = None
    if abs(total) < threshold_pct:
        summary = (f"nothing to bisect: {metric} moves {total:+.1f}% from {good.kernel} to {bad.kernel}, "
                   f"under the {threshold_pct}% threshold")
    else:
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            st = measure(mid)
            if is_bad(st):
                st.state, hi = "bad", mid
            else:
                st.state, lo = "good", mid
        first_bad = hi - 1
        summary = (f"{metric} {total:+.1f}% from good to bad; first bad commit is patch {hi} of {n}, "
                   f"found in {len(order)} measured steps")
    unstable = [s for s in order if not s.stable]
    for s in unstable:
        s.state += " (unstable)"
    if unstable:
        summary += (f"; WARNING: {len(unstable)} step(s) stayed above the stability bounds "
                    f"(%stddev <= {max_stddev_pct}%, spread <= {max_spread_pct}%) after {max_runs} runs")
    comp = None
    if first_bad is not None:
        from mmsim.experiments.compare import compare

        c = compare(workload, [series.spec(first_bad), series.spec(first_bad + 1)], machine, params, None,
                    runs, seed, executor, workers, scheduler, store, progress=progress, noise=noise)
        executed += c.executed
        comp = c.to_dict()
    return Bisection(workload, machine_name[0], metric, threshold_pct, series, order, first_bad, summary, comp,
                     executed)
