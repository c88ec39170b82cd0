"""Parameter sweeps: the cartesian grid of machines × kernels × ``-p`` value lists × seeds.

``-p nr_task=1,2,4,8`` gives a list; a parameter given once is fixed. Every
point is one :class:`RunSpec` per seed, run through
:func:`mmsim.experiments.executors.run_many` — so the executor is a choice
of where, not of what (same metrics on any executor), and points already in
the results store are not run again (a killed sweep resumes).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mmsim.errors import UserError
from mmsim.experiments import guard, stats
from mmsim.experiments.executors import Progress, parse_kernel, run_many
from mmsim.experiments.run import RunSpec
from mmsim.results.store import Store, flat_metrics

if TYPE_CHECKING:
    import pandas as pd


def parse_grid(params: dict[str, str]) -> dict[str, list[str]]:
    """``{"nr_task": "1,2,4"}`` → ``{"nr_task": ["1", "2", "4"]}``; empty items are an error, and so is a value
    given twice (``-p nr_task=1,1``: the same point twice, run and shown twice before)."""
    grid = {}
    for k, v in params.items():
        items = [x.strip() for x in v.split(",")]
        if any(not x for x in items):
            raise UserError(f"-p {k}", v, "a value or a comma-separated list of values, e.g. 1,2,4")
        _distinct(f"-p {k}", v, items)
        grid[k] = items
    return grid


def _distinct(option: str, given: str, values: list[str]) -> None:
    """A sweep axis lists each value once."""
    seen: set[str] = set()
    for x in values:
        if x in seen:
            raise UserError(option, given, f"distinct values ({x[:40]!r} is given twice; each point runs once)")
        seen.add(x)


@dataclass
class Point:
    machine: str
    kernel: str  # resolved label
    params: dict[str, Any]  # all resolved params of the first run
    swept: dict[str, str]  # the grid's values for this point, as given
    seeds: list[int]
    runs: list[dict[str, float]]  # flat metrics per seed
    benchmark: list[str]

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for name in sorted(set().union(*self.runs)):
            s = stats.summarize([r.get(name, 0.0) for r in self.runs])
            out[name] = {"mean": s.mean, "stddev": s.stddev, "pct_stddev": s.pct_stddev, "n": s.n}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "kernel": self.kernel,
            "params": self.params,
            "swept": self.swept,
            "seeds": self.seeds,
            "summary": self.summary(),
            "runs": [{"seed": s, "metrics": m} for s, m in zip(self.seeds, self.runs, strict=True)],
        }


@dataclass
class Sweep:
    workload: str
    grid: dict[str, list[str]]
    kernels: list[str]
    machines: list[str]
    runs: int
    points: list[Point]
    executed: int
    executor: str

    def to_frame(self) -> pd.DataFrame:
        """One row per point and seed: machine, kernel, the swept parameters (``param.NAME``), seed
        and every flat metric of that run."""
        import pandas as pd

        rows = []
        for p in self.points:
            for seed, m in zip(p.seeds, p.runs, strict=True):
                rows.append({"machine": p.machine, "kernel": p.kernel,
                             **{f"param.{k}": v for k, v in p.params.items()}, "seed": seed, **m})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        bench = sorted({m for p in self.points for m in p.benchmark})
        return {
            "kind": "sweep",
            "workload": self.workload,
            "grid": self.grid,
            "kernels": self.kernels,
            "machines": self.machines,
            "runs": self.runs,
            "runs_total": len(self.points) * self.runs,
            "executed": self.executed,
            "executor": self.executor,
            "benchmark_metrics": bench,
            "points": [p.to_dict() for p in self.points],
        }


def sweep(
    workload: str,
    params: dict[str, str],
    kernels: list[str] | None = None,
    machines: list[str] | None = None,
    policies: dict[str, str] | None = None,
    runs: int = 1,
    seed: int = 0,
    executor: str = "process",
    workers: int | None = None,
    scheduler: str | None = None,
    store: Store | None = None,
    fresh: bool = False,
    progress: Progress | None = None,
    noise: bool = False,
) -> Sweep:
    if runs < 1:
        raise UserError("-r/--runs", runs, "an integer >= 1")
    grid = parse_grid(params)
    kernels = list(kernels or ["v3.13"])
    machines = list(machines or ["tiny"])
    _distinct("--kernel", " ".join(kernels), kernels)
    _distinct("--machine", " ".join(machines), machines)
    # the whole grid (points x repeats) against the limits before a single spec is built
    guard.check_grid(guard.grid_size(machines, kernels, *grid.values(), runs), f"sweep {workload}")
    names = list(grid)
    combos = list(itertools.product(machines, kernels, itertools.product(*(grid[n] for n in names))))
    specs = []
    for m, k, values in combos:
        base, patches = parse_kernel(k)
        for i in range(runs):
            point = dict(zip(names, values, strict=True))
            specs.append(RunSpec(workload, m, base, patches, dict(policies or {}), point, seed + i, noise=noise))
    results, executed = run_many(specs, executor, workers, scheduler, store, fresh, progress, f"sweep {workload}")
    points = []
    for j, (_m, _k, values) in enumerate(combos):
        rs = results[j * runs:(j + 1) * runs]
        points.append(Point(rs[0]["machine"], rs[0]["kernel"], rs[0]["params"], dict(zip(names, values, strict=True)),
                            [r["seed"] for r in rs], [flat_metrics(r) for r in rs], sorted(rs[0]["metrics"])))
    return Sweep(workload, grid, kernels, machines, runs, points, executed, executor)
