"""The curated Python API behind ``mmsim.__all__``: what the CLI does, as functions.

>>> import mmsim
>>> r = mmsim.run(mmsim.RunSpec("lockstress", params={"tasks": "2"}), store=False)  # doctest: +SKIP
>>> c = mmsim.compare("lockstress", ["v3.12", "v4.14"], runs=3)  # doctest: +SKIP
>>> c.to_frame()  # one row per metric  # doctest: +SKIP

Like the CLI, every function records its runs in the results store
(``store=True``: ``$MMSIM_RESULTS`` or ``~/.local/share/mmsim/results.duckdb``;
a path: that file; ``False``: none), and :mod:`mmsim.results` reads them back
as DataFrames. ``progress`` takes a :data:`mmsim.progress.ProgressHook`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmsim.experiments.run import RunResult, RunSpec
from mmsim.kernels.catalog import ResolvedKernel, resolve_kernel
from mmsim.machine import get_machine

if TYPE_CHECKING:
    from mmsim.experiments.bisect import Bisection
    from mmsim.experiments.compare import Comparison
    from mmsim.experiments.reproduce import Outcome
    from mmsim.experiments.sweep import Sweep
    from mmsim.progress import ProgressHook
    from mmsim.results.store import Store

__all__ = ["ResolvedKernel", "RunResult", "RunSpec", "bisect", "compare", "get_machine", "reproduce",
           "resolve_kernel", "run", "sweep"]


def _store(store: Any) -> Store | None:
    from mmsim.results.store import Store

    if store is False or store is None:
        return None
    if store is True:
        return Store()
    if isinstance(store, Store):
        return store
    return Store(str(store))


def run(spec: RunSpec | str, runs: int = 1, store: Any = True, progress: ProgressHook | None = None,
        **fields: Any) -> RunResult | list[RunResult]:
    """One run (``mmsim run``), or ``runs`` of them with seeds seed..seed+runs-1 (``-r``).

    ``spec`` is a :class:`RunSpec` or a workload name with ``fields`` (``machine``, ``kernel``
    as ``BASE+PATCH+...``, ``patches``, ``policies``, ``params``, ``seed``)."""
    from mmsim.experiments.run import run_repeated

    s = spec if isinstance(spec, RunSpec) else RunSpec(spec, **fields)
    out = run_repeated(s, runs, _store(store), progress)
    return out[0] if runs == 1 else out


def compare(workload: str, kernels: list[str], machine: str = "tiny", params: dict[str, str] | None = None,
            policies: dict[str, str] | None = None, runs: int = 3, seed: int = 0, executor: str = "serial",
            workers: int | None = None, store: Any = True, fresh: bool = False,
            progress: ProgressHook | None = None, noise: bool = False) -> Comparison:
    """``mmsim compare``: the kernels (the first is the base) over ``runs`` seeds each; ``noise``:
    run-to-run variation from modelled sources (start skew, timer ticks, device IRQs:
    :mod:`mmsim.experiments.noise`)."""
    from mmsim.experiments.compare import compare as _compare
    from mmsim.progress import from_counts

    return _compare(workload, list(kernels), machine, params, policies, runs, seed, executor, workers, None,
                    _store(store), fresh, from_counts(progress, f"compare {workload}"), noise)


def sweep(workload: str, params: dict[str, str], kernels: list[str] | None = None,
          machines: list[str] | None = None, policies: dict[str, str] | None = None, runs: int = 1, seed: int = 0,
          executor: str = "serial", workers: int | None = None, store: Any = True, fresh: bool = False,
          progress: ProgressHook | None = None, noise: bool = False) -> Sweep:
    """``mmsim sweep``: the grid machines x kernels x ``params`` lists (``{"tasks": "1,2,4"}``); points
    already in the store are not run again."""
    from mmsim.experiments.sweep import sweep as _sweep
    from mmsim.progress import from_counts

    return _sweep(workload, params, kernels, machines, policies, runs, seed, executor, workers, None,
                  _store(store), fresh, from_counts(progress, f"sweep {workload}"), noise)


def bisect(workload: str, good: str | None = None, bad: str | None = None, series: str | Path | None = None,
           metric: str | None = None, threshold_pct: float = 5.0, machine: str = "tiny",
           params: dict[str, str] | None = None, runs: int = 3, seed: int = 0, executor: str = "serial",
           store: Any = True, progress: ProgressHook | None = None, noise: bool = False) -> Bisection:
    """``mmsim bisect``: ``good`` and ``bad`` kernels, or a ``series`` YAML file."""
    from mmsim.errors import UserError
    from mmsim.experiments.bisect import bisect as _bisect
    from mmsim.experiments.bisect import load_series, series_from_kernels
    from mmsim.progress import from_counts

    if series is not None:
        ser = load_series(series)
    elif good and bad:
        ser = series_from_kernels(good, bad)
    else:
        raise UserError("good/bad", f"{good}/{bad}", "both good and bad, or series")
    return _bisect(workload, ser, metric, threshold_pct, machine, params, runs, None, 5.0, 10.0, seed, executor,
                   None, None, _store(store), from_counts(progress, f"bisect {workload}"), noise)


def reproduce(ids: list[str] | None = None, seed: int = 0, store: Any = True,
              progress: ProgressHook | None = None, noise: bool = False) -> list[Outcome]:
    """``mmsim reproduce``: the seed experiments at published scale (minutes each); ``noise``: with the
    modelled run-to-run variation (``--noise``)."""
    from mmsim.experiments.reproduce import reproduce as _reproduce

    return _reproduce(ids, seed, _store(store), progress, noise=noise)
