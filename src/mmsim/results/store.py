"""The results store: every run in one embedded DuckDB file.

Two tables:

``runs``
    one row per (spec, seed): ``run_id`` (``<spec_hash>-<seed>``, the
    primary key), ``spec_hash``, ``seed``, ``workload``, ``machine``,
    ``kernel`` (the resolved label, e.g. ``v3.12+e009bb30c8df``), ``params``
    / ``policies`` / ``spec`` (JSON text), ``mmsim_version``, ``created``
    (UTC), ``wall_seconds`` and ``result`` (the full ``RunResult.to_dict()``
    as JSON, so a stored run can stand in for a new one).
``metrics``
    one row per (run_id, name): every number of the run flattened by
    :func:`flat_metrics` (benchmark metric, perf-stat, proc-vmstat,
    perf-profile, lock_stat, sim). ``lock_stat.CLASS.wait-share%`` is the class's
    total wait time over task-clock: waits spent asleep are not CPU time, so
    for sleeping locks it can exceed 100 %.

The default file is ``$MMSIM_RESULTS`` if set, else
``$XDG_DATA_HOME/mmsim/results.duckdb`` (``~/.local/share/mmsim/...``);
every command takes ``--store PATH``.

Concurrency: DuckDB lets one process open a file for writing at a time, so
every access holds an exclusive ``flock`` on ``<file>.lock`` for the length
of one short transaction. Writers therefore queue instead of failing, each
batch of runs is inserted in one transaction (all or nothing), and the
primary keys make a second insert of the same run a no-op: concurrent
writers lose nothing and duplicate nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

ENV = "MMSIM_RESULTS"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    spec_hash VARCHAR NOT NULL,
    seed BIGINT NOT NULL,
    workload VARCHAR NOT NULL,
    machine VARCHAR NOT NULL,
    kernel VARCHAR NOT NULL,
    params VARCHAR NOT NULL,
    policies VARCHAR NOT NULL,
    spec VARCHAR NOT NULL,
    mmsim_version VARCHAR NOT NULL,
    created TIMESTAMP NOT NULL,
    wall_seconds DOUBLE,
    result VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    value DOUBLE,
    PRIMARY KEY (run_id, name)
);
"""


_RUN_COLUMNS = ["run_id", "spec_hash", "seed", "workload", "machine", "kernel", "params", "policies", "spec",
                "mmsim_version", "created", "wall_seconds", "result"]


def default_path() -> Path:
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "mmsim" / "results.duckdb"


def run_id(spec_hash: str, seed: int) -> str:
    return f"{spec_hash}-{seed}"


def spec_hash(spec: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the canonical JSON of a run's inputs, seed excluded."""
    blob = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def flat_metrics(result: dict[str, Any]) -> dict[str, float]:
    """Every number of a ``RunResult.to_dict()`` under LKP-style names.

    ``sim.wall_seconds`` is left out: it is the host's time, the only value
    that differs between two runs of the same spec and seed.
    """
    out: dict[str, float] = {k: float(v) for k, v in result["metrics"].items()}
    perf = result["perf"]
    for k, v in perf.items():
        out[f"perf-stat.{k}"] = float(v)
    if perf.get("cycles"):
        out["perf-stat.instructions-per-cycle"] = perf["instructions"] / perf["cycles"]
    if perf.get("cache-references"):
        out["perf-stat.cache-miss-rate%"] = 100.0 * perf["cache-misses"] / perf["cache-references"]
    for k, v in result["vmstat"].items():
        out[f"proc-vmstat.{k}"] = float(v)
    for line in result["profile"]:
        out[f"perf-profile.self.cycles-pp.{line['symbol']}"] = float(line["percent"])
    task_ns = perf.get("task-clock", 0.0) * 1e6
    for name, st in result["locks"].items():
        for field in ("acquisitions", "contentions", "wait_ns_total", "wait_ns_max", "hold_ns_total"):
            if field in st:
                out[f"lock_stat.{name}.{field}"] = float(st[field])
        if task_ns:
            out[f"lock_stat.{name}.wait-share%"] = 100.0 * st.get("wait_ns_total", 0) / task_ns
    for k in ("events", "simulated_seconds"):
        if k in result.get("sim", {}):
            out[f"sim.{k}"] = float(result["sim"][k])
    return out


@dataclass(frozen=True)
class StoredRun:
    """What the executors hand the store: the run's key and its result."""

    spec_hash: str
    spec: dict[str, Any]
    seed: int
    result: dict[str, Any]


class Store:
    """One DuckDB results file. Every method opens, works and closes under the file lock."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path else default_path()

    @contextlib.contextmanager
    def _connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        import duckdb

        from mmsim.errors import UserError

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lockf = open(str(self.path) + ".lock", "a")  # closed by the with below, after the transaction
        except OSError as e:
            raise UserError("--store", str(self.path), f"a writable file path ({e.strerror})") from None
        with lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            try:
                try:
                    con = duckdb.connect(str(self.path))
                except duckdb.Error as e:
                    raise UserError("--store", str(self.path), f"a DuckDB results file ({e})") from None
                try:
                    con.execute(_SCHEMA)
                    yield con
                finally:
                    con.close()
            finally:
                fcntl.flock(lockf, fcntl.LOCK_UN)

    def add(self, runs: Iterable[StoredRun], replace: bool = False) -> int:
        """Insert runs in one transaction; returns how many were new. ``replace`` overwrites existing ones."""
        import pandas as pd

        from mmsim import __version__

        rows: list[tuple[Any, ...]] = []
        mrows: list[tuple[str, str, float]] = []
        now = datetime.now(UTC).replace(tzinfo=None)
        for r in runs:
            rid = run_id(r.spec_hash, r.seed)
            res = r.result
            rows.append((rid, r.spec_hash, r.seed, res["workload"], res["machine"], res["kernel"],
                         json.dumps(res["params"], sort_keys=True), json.dumps(res["policies"], sort_keys=True),
                         json.dumps(r.spec, sort_keys=True), __version__, now,
                         res.get("sim", {}).get("wall_seconds"), json.dumps(res)))
            mrows.extend((rid, k, v) for k, v in flat_metrics(res).items())
        if not rows:
            return 0
        with self._connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                ids = [r[0] for r in rows]
                if replace:
                    con.execute("DELETE FROM metrics WHERE list_contains(?, run_id)", [ids])
                    con.execute("DELETE FROM runs WHERE list_contains(?, run_id)", [ids])
                before = _count(con)
                # bulk inserts from DataFrames: executemany is one statement per row (~0.3 s per run)
                con.register("new_runs", pd.DataFrame(rows, columns=_RUN_COLUMNS))
                con.register("new_metrics", pd.DataFrame(mrows, columns=["run_id", "name", "value"]))
                con.execute("INSERT INTO runs SELECT * FROM new_runs ON CONFLICT DO NOTHING")
                con.execute("INSERT INTO metrics SELECT * FROM new_metrics ON CONFLICT DO NOTHING")
                added = _count(con) - before
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return added

    def get(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
        """Stored results for (spec_hash, seed) keys; missing keys are absent from the answer."""
        ids = {run_id(h, s): (h, s) for h, s in keys}
        if not ids or not self.path.exists():
            return {}
        with self._connect() as con:
            rows = con.execute("SELECT run_id, result FROM runs WHERE list_contains(?, run_id)",
                               [list(ids)]).fetchall()
        return {ids[rid]: json.loads(res) for rid, res in rows}

    def runs(self, **filters: Any) -> pd.DataFrame:
        """The runs table (without the raw result), filtered by column = value (a list means any of)."""
        where, args = _where(filters)
        sql = ("SELECT run_id, spec_hash, seed, workload, machine, kernel, params, policies, spec, "
               f"mmsim_version, created, wall_seconds FROM runs{where} ORDER BY created, run_id")
        return self._df(sql, args)

    def metrics(self, metric: str | None = None, wide: bool = False, **filters: Any) -> pd.DataFrame:
        """Runs joined with their metrics: long (one row per run and metric) or ``wide`` (a column per metric).

        ``metric`` keeps only metric names containing that text.
        """
        where, args = _where(filters, prefix="r.")
        if metric:
            where += (" AND " if where else " WHERE ") + "contains(m.name, ?)"
            args.append(metric)
        sql = ("SELECT r.run_id, r.workload, r.machine, r.kernel, r.params, r.seed, r.mmsim_version, "
               f"r.created, m.name AS metric, m.value FROM runs r JOIN metrics m USING (run_id){where} "
               "ORDER BY r.created, r.run_id, m.name")
        df = self._df(sql, args)
        if not wide or df.empty:
            return df
        keys = ["run_id", "workload", "machine", "kernel", "params", "seed", "mmsim_version", "created"]
        out = df.pivot_table(index=keys, columns="metric", values="value", aggfunc="first").reset_index()
        out.columns.name = None
        return out

    def _df(self, sql: str, args: list[Any]) -> pd.DataFrame:
        import pandas as pd

        if not self.path.exists():
            return pd.DataFrame()
        with self._connect() as con:
            return con.execute(sql, args).df()

    def count(self) -> int:
        if not self.path.exists():
            return 0
        with self._connect() as con:
            return _count(con)


_FILTER_COLUMNS = {"workload", "machine", "kernel", "seed", "spec_hash", "mmsim_version", "run_id"}


def _where(filters: dict[str, Any], prefix: str = "") -> tuple[str, list[Any]]:
    from mmsim.errors import UserError

    clauses, args = [], []
    for col, val in filters.items():
        if val is None:
            continue
        if col not in _FILTER_COLUMNS:
            raise UserError("results filter", col, sorted(_FILTER_COLUMNS))
        if isinstance(val, list | tuple | set):
            clauses.append(f"list_contains(?, {prefix}{col})")
            args.append(list(val))
        else:
            clauses.append(f"{prefix}{col} = ?")
            args.append(val)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _count(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT count(*) FROM runs").fetchone()
    return int(row[0]) if row else 0
