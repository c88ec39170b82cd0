"""The seed experiments: both arms at full published scale, published vs
simulated vs band, a verdict per metric, and the mechanism lines.

Each experiment names its source thread (``../shared/seeds``), the machine,
the workload and its parameters, and two arms that differ only by the
kernel change under test. Bands come from DESIGN.md; a result outside its
band is reported as it is (``ok: false``), never adjusted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mmsim.errors import UserError
from mmsim.experiments.run import RunResult, RunSpec, run


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
        }


def _band_json(band: tuple[float, float] | None) -> list[float | None] | None:
    """[lo, hi] with an open end as null (strict JSON has no Infinity)."""
    if band is None:
        return None
    return [b if abs(b) != float("inf") else None for b in band]


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
            "checks": [c.to_dict() for c in self.checks],
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
    }


@dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    source: str
    arms: dict[str, RunSpec]
    evaluate: Callable[[dict[str, RunResult]], tuple[list[Check], list[str]]]


def _ptl_wait_share(r: RunResult) -> float:
    """Share of CPU time spent waiting for the PMD-level page table lock(s)."""
    return r.lock_wait_share("&mm->page_table_lock") + r.lock_wait_share("ptlock_ptr(pmd page)")


def _eval_split_pmd(res: dict[str, RunResult]) -> tuple[list[Check], list[str]]:
    a, b = res["v3.12"], res["v3.13"]
    ta = a.metrics["thp_memscale.elapsed_seconds"]
    tb = b.metrics["thp_memscale.elapsed_seconds"]
    sa, sb = _ptl_wait_share(a), _ptl_wait_share(b)
    ca, cb = a.perf["context-switches"], b.perf["context-switches"]
    checks = [
        Check("speedup", 1075.909782795 / 29.694499652, ta / tb, (18.0, 72.0), "v3.12 elapsed / v3.13 elapsed"),
        Check("ptl_wait_share.v3.12", None, sa, (0.5, 1.0), "most cycles wait for the PMD lock on v3.12"),
        Check("ptl_wait_share.v3.13", None, sb, (0.0, 0.1 * sa), "collapses to under a tenth of v3.12's"),
        Check("context_switch_drop", 1491589 / 127507, ca / cb if cb else float("inf"), (5.0, float("inf")),
              "issue #2 target (not in the DESIGN.md band): v3.12 / v3.13 context switches", kind="target"),
        Check("elapsed_seconds.v3.12", 1075.909782795, ta, None),
        Check("elapsed_seconds.v3.13", 29.694499652, tb, None),
        Check("context_switches.v3.12", 1491589, ca, None),
        Check("context_switches.v3.13", 127507, cb, None),
        Check("page_faults.v3.12", 400822, a.perf["page-faults"], None),
        Check("page_faults.v3.13", 302080, b.perf["page-faults"], None),
    ]
    notes = [
        f"v3.12: {100 * sa:.1f}% of CPU time waiting for &mm->page_table_lock "
        f"({a.locks['&mm->page_table_lock']['contentions']:,} contentions); top symbol {a.profile[0]['symbol']}"
        f" {a.profile[0]['percent']:.1f}%",
        f"v3.13: {100 * sb:.2f}% waiting for PMD locks (split: ptlock_ptr(pmd page)); top symbol "
        f"{b.profile[0]['symbol']} {b.profile[0]['percent']:.1f}%",
    ]
    return checks, notes


_SPLIT_PARAMS = {"threads": "512", "bytes": "512m"}

EXPERIMENTS: dict[str, Experiment] = {
    e.id: e
    for e in (
        Experiment(
            "split-pmd-ptl",
            "split PMD page table lock (e009bb30c8df): thp_memscale -c 512 -b 512m, THP on, SGI UV 2000",
            "seeds/001 (Kirill A. Shutemov, Alex Thorlton, linux-mm 2013-10-04)",
            {
                "v3.12": RunSpec("thp_memscale", "sgi-uv2000-512", "v3.12", params=_SPLIT_PARAMS),
                "v3.13": RunSpec("thp_memscale", "sgi-uv2000-512", "v3.13", params=_SPLIT_PARAMS),
            },
            _eval_split_pmd,
        ),
    )
}


def reproduce(ids: list[str] | None = None, seed: int = 0) -> list[Outcome]:
    """Run both arms of each named experiment (all when ``ids`` is empty)."""
    names = list(ids) if ids else list(EXPERIMENTS)
    for n in names:
        if n not in EXPERIMENTS:
            raise UserError("experiment", n, sorted(EXPERIMENTS))
    out = []
    for n in names:
        e = EXPERIMENTS[n]
        res = {arm: run(RunSpec(**{**spec.__dict__, "seed": seed})) for arm, spec in e.arms.items()}
        checks, notes = e.evaluate(res)
        out.append(Outcome(e.id, e.title, checks, res, notes))
    return out
