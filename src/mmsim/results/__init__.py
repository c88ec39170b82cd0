"""The results store as a Python API: every recorded run as a pandas DataFrame.

>>> import mmsim.results
>>> df = mmsim.results.metrics(workload="thp_memscale", wide=True)  # doctest: +SKIP

``runs(...)`` is the runs table (one row per run: spec, spec hash, seed,
mmsim version, time); ``metrics(...)`` joins runs with their metrics, long
(one row per run and metric) or ``wide`` (a column per metric). Filters are
column = value (a list means any of): ``workload``, ``machine``, ``kernel``,
``seed``, ``spec_hash``, ``mmsim_version``, ``run_id``. ``path`` defaults to
:func:`default_path` (``$MMSIM_RESULTS`` or
``~/.local/share/mmsim/results.duckdb``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmsim.results.store import ENV, Store, StoredRun, default_path, flat_metrics, spec_hash

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ENV", "Store", "StoredRun", "columns", "default_path", "export", "flat_metrics", "metrics", "runs",
           "spec_hash"]


def columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its JSON ``params`` and ``policies`` cells spread into typed ``param.NAME`` /
    ``policy.NAME`` columns (the JSON columns stay, for round trips)."""
    import json

    import pandas as pd

    if df.empty:
        return df
    parts = [df]
    for col, prefix in (("params", "param."), ("policies", "policy.")):
        if col in df:
            parts.append(pd.DataFrame([{f"{prefix}{k}": v for k, v in json.loads(x or "{}").items()}
                                       for x in df[col]], index=df.index))
    return pd.concat(parts, axis=1)


def runs(path: str | Path | None = None, expand: bool = True, **filters: Any) -> pd.DataFrame:
    """The runs table as a DataFrame (empty when the store does not exist yet); ``expand``: parameters
    and policies as ``param.*`` / ``policy.*`` columns too (:func:`columns`)."""
    df = Store(path).runs(**filters)
    return columns(df) if expand else df


def metrics(path: str | Path | None = None, metric: str | None = None, wide: bool = False, expand: bool = True,
            **filters: Any) -> pd.DataFrame:
    """Runs joined with their metrics; ``metric`` keeps names containing that text; ``expand`` as
    :func:`runs`."""
    df = Store(path).metrics(metric=metric, wide=wide, **filters)
    return columns(df) if expand else df


def export(out: str | Path, path: str | Path | None = None, metric: str | None = None, wide: bool = True,
           **filters: Any) -> int:
    """Write the (filtered) metrics to ``out``: ``.csv`` or ``.parquet``. Returns the number of rows."""
    from mmsim.errors import UserError

    out = Path(out)
    if out.suffix not in (".csv", ".parquet"):
        raise UserError("--output", str(out), "a file name ending in .csv or .parquet")
    df = metrics(path, metric=metric, wide=wide, expand=False, **filters)
    tmp = out.with_name(out.name + ".tmp")
    if out.suffix == ".csv":
        df.to_csv(tmp, index=False)
    else:
        df.to_parquet(tmp, index=False)
    tmp.replace(out)  # a reader never sees a half-written file
    return len(df)
