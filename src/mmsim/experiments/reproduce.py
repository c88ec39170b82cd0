"""The seed experiments: both arms at full published scale, published vs
simulated vs band, a verdict per metric, and the mechanism lines.

Each experiment names its source thread (``../shared/seeds``), the machine,
the workload and its parameters, and two arms that differ only by the
kernel change under test. Bands come from DESIGN.md; a result outside its
band is reported as it is (``ok: false``), never adjusted.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmsim.errors import UserError
from mmsim.experiments.run import RunResult, RunSpec, record, run

if TYPE_CHECKING:
    from mmsim.progress import ProgressHook
    from mmsim.results.store import Store


@dataclass
class Check:
    metric: str
    published: float | None
    simulated: float
    band: tuple[float, float] | None  # inclusive; None = informational
    note: str = ""
    # "band": DESIGN.md's result band, decides the experiment's ok;
    # "target": an issue's extra target, verdict shown but not part of the band.
    kind: str = "band"
    # fast mode's 95% half-width of ``simulated`` (mmsim.metrics.sampling), where its arms were sampled
    ci95: float | None = None

    @property
    def ok(self) -> bool | None:
        if self.band is None:
            return None
        lo, hi = self.band
        return lo <= self.simulated <= hi

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "published": self.published,
            "simulated": self.simulated,
            "band": _band_json(self.band),
            "ok": self.ok,
            "kind": self.kind if self.band else "info",
            "note": self.note,
            **({"ci95": self.ci95} if self.ci95 is not None else {}),
        }


def change_pct_ci95(a: float, ca: float | None, b: float, cb: float | None) -> float | None:
    """The 95% half-width of ``100 (b / a - 1)`` from the half-widths of ``a`` and ``b`` (independent
    arms: relative errors in quadrature, to first order); None when neither arm has one."""
    if (ca is None and cb is None) or not a or not b:
        return None
    return 100.0 * (b / a) * math.hypot((ca or 0.0) / a, (cb or 0.0) / b)


def _band_json(band: tuple[float, float] | None) -> list[float | None] | None:
    """[lo, hi] with an open end as null (strict JSON has no Infinity)."""
    if band is None:
        return None
    return [b if abs(b) != float("inf") else None for b in band]


SENSITIVITY = Path(__file__).with_name("sensitivity.json")  # written by benchmarks/primitives_sensitivity.py


@functools.cache
def _sensitivity() -> dict[str, Any]:
    try:
        d: dict[str, Any] = json.loads(SENSITIVITY.read_text(encoding="utf-8"))
        return d
    except (OSError, ValueError):
        return {}


def fragility(exp_id: str, c: Check) -> dict[str, Any]:
    """From the committed sensitivity table (nothing is simulated here): ``fragile`` = an in-band
    result leaves its band when one unsourced estimate is scaled by 0.5 or 1.5, with the constants
    that do it in ``fragile_constants``; for a result outside its band, ``fragile`` is None and
    ``fragile_constants`` lists the changes that would bring it in. None also when not swept."""
    e = _sensitivity().get(exp_id)
    if c.kind != "band" or c.band is None or e is None or c.metric not in e.get("flips", {}):
        return {"fragile": None, "fragile_constants": []}
    flips = list(e["flips"][c.metric])
    return {"fragile": bool(flips) if c.ok else None, "fragile_constants": flips}


@dataclass
class Outcome:
    id: str
    title: str
    checks: list[Check]
    arms: dict[str, RunResult]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.ok is not None and c.kind == "band")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "published": {c.metric: c.published for c in self.checks},
            "simulated": {c.metric: c.simulated for c in self.checks},
            "bands": {c.metric: _band_json(c.band) or "informational" for c in self.checks},
            "ok": self.ok,
            "checks": [{**c.to_dict(), **fragility(self.id, c)} for c in self.checks],
            "arms": {k: _arm_summary(r) for k, r in self.arms.items()},
            "notes": self.notes,
        }


def _arm_summary(r: RunResult) -> dict[str, Any]:
    return {
        "kernel": r.kernel,
        "machine": r.machine,
        "params": r.params,
        "metrics": r.metrics,
        "perf": r.perf,
        "profile": r.profile[:5],
        "sim": r.sim,
        **({"noise": r.noise, "seed": r.seed} if r.noise else {}),  # reproduce --noise: which draw
    }


@dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    source: str
    arms: dict[str, RunSpec]
    evaluate: Callable[[dict[str, RunResult]], tuple[list[Check], list[str]]]


# One module per experiment under mmsim.experiments; each calls register().
_MODULES = ("exp_split_pmd", "exp_clear_order", "exp_pcp_free_high", "exp_hugetlb_rwsem", "exp_autonuma_scan",
            "exp_mmap_align", "exp_vma_lock",  # issue 22
            "exp_pcp_series")  # issue 19

EXPERIMENTS: dict[str, Experiment] = {}


def register(e: Experiment) -> Experiment:
    if e.id in EXPERIMENTS:
        raise ValueError(f"experiment {e.id!r} registered twice")
    EXPERIMENTS[e.id] = e
    return e


def _load() -> None:
    import importlib

    for m in _MODULES:
        importlib.import_module(f"mmsim.experiments.{m}")


def reproduce(
    ids: list[str] | None = None,
    seed: int = 0,
    store: Store | None = None,
    progress: ProgressHook | None = None,
    exact: bool = False,
    workers: int | None = None,
    noise: bool = False,
) -> list[Outcome]:
    """Run every arm of each named experiment (all when ``ids`` is empty); each arm's run is put
    into ``store`` when given, and ``progress`` hears each arm's start and end.

    The arms of all experiments go to one process pool (``workers``
    processes, default: the CPUs this process may use; 1 = in this process,
    in order), longest first. A run depends only on its spec and seed, so the
    results are the same on any number of workers. ``exact``: every operation
    an event (no fast-forward, :mod:`mmsim.metrics.sampling`). ``noise``: every arm with the modelled
    run-to-run variation (timer ticks, device interrupts, start skew: docs/noise.md), drawn from ``seed``;
    without it a run is free of them, and a run of identical threads can lock into a periodic order that
    real machines' interrupts break (docs/performance.md, session 32). On a pool, an
    arm "starts" when a worker is free for it (the pool takes the queue in
    order).
    """
    from mmsim.experiments import executors
    from mmsim.progress import ProgressEvent

    _load()
    names = list(ids) if ids else list(EXPERIMENTS)
    for n in names:
        if n not in EXPERIMENTS:
            raise UserError("experiment", n, sorted(EXPERIMENTS))
    jobs: list[tuple[str, str, RunSpec]] = []
    for n in names:
        for arm, spec in EXPERIMENTS[n].arms.items():
            jobs.append((n, arm, RunSpec(**{**spec.__dict__, "seed": seed, "exact": exact, "noise": noise})))
    # validate and apply the guard to every arm before any runs
    canon = [executors.canonical(spec, wall_limit=False) for _, _, spec in jobs]  # fixed arms (guard.check)
    # an arm whose canonical spec another arm already has (pcp-free-high's patched arm is pcp-series' p3) runs
    # once: a run depends only on its spec and seed, so the copy is the same result
    first: dict[str, int] = {}
    same = [first.setdefault(json.dumps(c, sort_keys=True), j) for j, c in enumerate(canon)]
    unique = [j for j in range(len(jobs)) if same[j] == j]
    weights = [arm_weight(jobs[j][0], jobs[j][1]) for j in range(len(jobs))]
    # longest first (the pool's makespan); the order of the results does not depend on it
    order = sorted(unique, key=lambda j: (-weights[j], j))
    total = len(jobs)
    work_total = sum(weights[j] for j in unique)
    done = 0
    work_done = 0.0

    def started(j: int) -> None:
        if progress:
            progress(ProgressEvent(f"reproduce {jobs[j][0]}", jobs[j][1], "start", done, total,
                                   work_done=work_done, work_total=work_total))

    def ended(j: int, r: RunResult) -> None:
        nonlocal done, work_done
        work_done += weights[j]
        for k in range(len(jobs)):
            if same[k] != j:
                continue
            if k != j:
                results[k] = r
            record(store, [(jobs[k][2], r.to_dict())], [canon[k]])
            done += 1
            if progress:
                progress(ProgressEvent(f"reproduce {jobs[k][0]}", jobs[k][1], "end", done, total,
                                       float(r.sim["wall_seconds"]), work_done=work_done, work_total=work_total))

    results: dict[int, RunResult] = {}
    n_workers = min(workers if workers is not None else executors._ncpus(), len(order))
    if n_workers <= 1:
        for j in order:
            started(j)
            results[j] = run(jobs[j][2], guard=False)
            ended(j, results[j])
    else:
        for j in order[:n_workers]:
            started(j)
        queued = iter(order[n_workers:])
        specs = [jobs[j][2] for j in order]
        for k, d in executors.execute(specs, "process", workers=n_workers):
            j = order[k]
            results[j] = RunResult(**d)
            ended(j, results[j])
            nxt = next(queued, None)
            if nxt is not None:
                started(nxt)
    out = []
    j = 0
    for n in names:
        e = EXPERIMENTS[n]
        res = {}
        for arm in e.arms:
            res[arm] = results[j]
            j += 1
        checks, notes = e.evaluate(res)
        out.append(Outcome(e.id, e.title, checks, res, notes))
    return out


# Host seconds of each arm, only to order the pool's queue (longest first) and for the progress ETA: the
# arms' own wall times in `mmsim reproduce --json --no-store` on this 2-core VM (2026-12-04 18:03-18:09 UTC,
# fresh and quiet, 2 workers; 5 min 14 s in all). Only the ratios matter; they were last taken in session 21,
# before the node check's stall was removed, and the ETA then said 29 s with 3 min left. An arm not listed
# weighs its experiment's entry in _WEIGHTS, else 10.
_ARM_WEIGHTS = {
    "split-pmd-ptl": {"v3.12": 130.2, "v3.13": 120.0},
    "clear-order": {"v4.13": 11.0, "v4.14": 11.5, "v4.13/4": 0.94, "v4.14/4": 0.90},
    "pcp-free-high": {"parent": 5.1, "patched": 4.8},
    "hugetlb-rwsem": {"c0d0381ade79^": 7.4, "c0d0381ade79": 7.7, "c0d0381ade79+fix": 7.7},
    "autonuma-scan": {"v5.4": 6.0, "v5.5": 5.6, "v5.4.tiering": 4.9, "v5.5.tiering": 4.7},
    "mmap-thp-align": {"d4148aeab412^": 6.7, "d4148aeab412": 6.4},
    "devzero-thp-align": {"849d5cff4d48^": 16.7, "849d5cff4d48": 10.4},
    "vma-lock-shared-fault": {"parent": 121.4, "patched": 15.8, "parent/processes": 21.5,
                              "patched/processes": 20.2},
    "vma-lock-read-fault": {"parent": 21.5, "patched": 14.3},
    "pcp-series": {"base": 5.1, "p1": 5.0, "p3": 4.8, "p5": 4.5, "p7": 4.7, "p9": 4.6},
}
_WEIGHTS = {exp: max(arms.values()) for exp, arms in _ARM_WEIGHTS.items()}


def arm_weight(exp: str, arm: str) -> float:
    """The relative host time of one arm (:data:`_ARM_WEIGHTS`)."""
    return _ARM_WEIGHTS.get(exp, {}).get(arm, _WEIGHTS.get(exp, 10.0))
