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

Failures: :meth:`Store.check` (called before any run) opens the store,
checks it is a regular file in a writable place, reads every row of both
tables (DuckDB verifies each block's checksum; a truncated file fails here)
and checks the free space (:data:`NEW_STORE_BYTES` for a new file plus
:data:`PER_RUN_BYTES` per run to come). Any DuckDB or OS error is a
one-line :class:`StoreError` naming the file and the cause (exit 1); a
path that cannot be a store is a UserError (exit 2). A store that cannot be
written (read-only file or filesystem) is still read: without the lock,
opened read-only. Runs that could not be written go to a side file
(:func:`spill`, JSON lines) that :func:`load_spilled` / ``mmsim results
import`` loads.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmsim.errors import RunFailure, UserError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

ENV = "MMSIM_RESULTS"

# Free space a sweep needs before it starts: a new DuckDB file is 1,323,008 bytes with the schema and its
# first runs (measured, DuckDB 1.5, 1-32 lockstress runs); each run then adds ~5.3 KB (200 lockstress runs:
# +1.05 MB; result JSON 3.3 KB, pmbench 6.6 KB), counted 3x for the write-ahead log copy and larger results
# (an estimate), plus one 256 KiB block of headroom for a checkpoint.
NEW_STORE_BYTES = 1_323_008
PER_RUN_BYTES = 16 << 10
HEADROOM_BYTES = 256 << 10


class StoreError(RunFailure):
    """The store is damaged or cannot be written (disk full, I/O error): one line naming the file and cause."""

    def __init__(self, message: str, cause: str = "") -> None:
        super().__init__(message)
        self.cause = cause or message

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
    for k, v in result["vmstat"].items():  # /proc/vmstat items only (metrics.events.PROC_VMSTAT)
        out[f"proc-vmstat.{k}"] = float(v)
    for k, v in (result.get("counters") or {}).items():  # model-only counters: no kernel prints these
        out[f"mmsim.{k}"] = float(v)
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
        if path is not None and not str(path):  # --store '' wrote to the default store
            raise UserError("--store", "", "a results file path (omit --store for the default store)")
        self.path = Path(path).expanduser() if path else default_path()

    def _fail(self, what: str, e: BaseException) -> StoreError:
        cause = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())
        return StoreError(f"results store {self.path}: {what} ({cause})", f"{what}: {cause}")

    def _check_path(self) -> None:
        """UserError unless the path can be a store file (a regular file, or absent)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        except OSError as e:
            raise UserError("--store", str(self.path), f"a results file path ({e.strerror})") from None
        if not stat.S_ISREG(st.st_mode):
            raise UserError("--store", str(self.path), "a regular file (a DuckDB results file), not "
                            + ("a directory" if stat.S_ISDIR(st.st_mode) else "a device or special file"))

    def writable(self) -> bool:
        """The store can be written here: an existing file we may write, or a directory we may create it in."""
        if self.path.exists():
            return os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)
        parent = self.path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        return os.access(parent, os.W_OK)

    @contextlib.contextmanager
    def _connect(self, write: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection under the file lock. ``write=False``: a read; when the store cannot be written (a
        read-only file or filesystem) it is opened read-only without the lock (nobody can be writing it)."""
        import duckdb

        self._check_path()
        if not write and self.path.exists() and not self.writable():
            with self._open(read_only=True) as con:
                yield con
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lockf = open(str(self.path) + ".lock", "a")  # closed by the with below, after the transaction
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
                raise self._fail("cannot write", e) from None
            raise UserError("--store", str(self.path), f"a writable file path ({e.strerror})") from None
        with lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            try:
                with self._open(read_only=False) as con:
                    try:
                        con.execute(_SCHEMA)
                    except duckdb.Error as e:
                        raise self._fail("damaged or not writable", e) from None
                    yield con
            finally:
                fcntl.flock(lockf, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _open(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        import duckdb

        try:
            con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as e:  # not a DuckDB file at all (or its header is gone): the wrong --store
            raise UserError("--store", str(self.path), f"a DuckDB results file ({' '.join(str(e).split())})"
                            ) from None
        try:
            try:
                yield con
            except duckdb.Error as e:  # raised in the caller's block: reading a damaged file, a failed write
                raise self._fail("damaged" if _is_damage(e) else "cannot write", e) from None
        finally:
            with contextlib.suppress(duckdb.Error):
                con.close()

    def check(self, new_runs: int = 0) -> None:
        """Before any run: the store opens (created if new), both tables read back whole, and there is room
        for ``new_runs`` more runs. A StoreError or UserError (one line) otherwise; nothing is changed."""
        self._check_path()
        if not self.writable():
            raise UserError("--store", str(self.path), "a results file in a writable place (read-only: "
                            "results can be listed and exported, not added)")
        self.check_space(new_runs)
        with self._connect() as con:
            _read_all(con)

    def check_space(self, new_runs: int) -> None:
        """StoreError when the filesystem holding the store has less free space than the runs need."""
        new = not self.path.exists()
        need = (NEW_STORE_BYTES if new else 0) + new_runs * PER_RUN_BYTES + HEADROOM_BYTES
        parent = self.path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        try:
            vfs = os.statvfs(parent)
        except OSError as e:
            raise self._fail("cannot check free space", e) from None
        free = vfs.f_bavail * vfs.f_frsize
        if free < need:
            what = ("a new store" + (f" and {new_runs} run(s)" if new_runs else "")) if new else f"{new_runs} run(s)"
            raise StoreError(f"results store {self.path}: not enough free space ({free:,} bytes free on "
                             f"{parent}; {what}: about {need:,} bytes)")

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
                import duckdb

                with contextlib.suppress(duckdb.Error):  # the failed statement may have ended the transaction
                    con.execute("ROLLBACK")
                raise  # the real cause (e.g. No space left on device), not the rollback's
        return added

    def get(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
        """Stored results for (spec_hash, seed) keys; missing keys are absent from the answer."""
        ids = {run_id(h, s): (h, s) for h, s in keys}
        if not ids or not self.path.exists():
            return {}
        with self._connect(write=False) as con:
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
        with self._connect(write=False) as con:
            _read_all(con)  # a damaged store is an error, not a partial answer
            return con.execute(sql, args).df()

    def count(self) -> int:
        if not self.path.exists():
            return 0
        with self._connect(write=False) as con:
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


def _is_damage(e: BaseException) -> bool:
    text = str(e).lower()
    return not any(w in text for w in ("no space left", "disk quota", "read-only", "permission denied"))


def _read_all(con: duckdb.DuckDBPyConnection) -> None:
    """Read every column of every row of both tables: DuckDB checks each block it reads (a truncated or
    overwritten file fails here), so damage shows before runs, not at the first write."""
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if not {"runs", "metrics"} <= tables:
        raise StoreError("not an mmsim results store: no runs/metrics tables")
    cols = ", ".join(f"count({c})" for c in _RUN_COLUMNS)
    con.execute(f"SELECT {cols}, sum(length(result)), sum(length(spec)) FROM runs").fetchall()
    con.execute("SELECT count(run_id), count(name), sum(value) FROM metrics").fetchall()


# -- runs that could not be stored ------------------------------------------------------------------------------

SPILL_ENV = "MMSIM_SPILL_DIR"


def _spill_dirs(store: Path) -> list[Path]:
    """Where a side file may go, in order: next to the store, ``$MMSIM_SPILL_DIR``, the state dir, the temp dir."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    dirs = [store.parent]
    if os.environ.get(SPILL_ENV):
        dirs.insert(0, Path(os.environ[SPILL_ENV]))
    return [*dirs, Path(state) / "mmsim" / "unsaved", Path(tempfile.gettempdir())]


def spill(runs: list[StoredRun], store: Path, into: Path | None = None) -> Path:
    """Append ``runs`` (one JSON object per line, fsync'd) to a side file; returns its path. ``into``: the side
    file already in use. Tries each of :func:`_spill_dirs` until one takes the whole batch; OSError if none."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    targets = [into] if into is not None else [d / f"{store.name}.unsaved-{stamp}-{os.getpid()}.jsonl"
                                               for d in _spill_dirs(store)]
    text = "".join(json.dumps({"spec_hash": r.spec_hash, "spec": r.spec, "seed": r.seed, "result": r.result},
                              sort_keys=True) + "\n" for r in runs)
    last: OSError | None = None
    for t in targets:
        try:
            t.parent.mkdir(parents=True, exist_ok=True)
            existed = t.exists()
            size = t.stat().st_size if existed else 0
            with open(t, "a") as f:
                try:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                except OSError:
                    f.truncate(size)  # no half line: the file stays loadable
                    if not existed:
                        t.unlink()
                    raise
            return t
        except OSError as e:
            last = e
    if into is not None:  # the side file in use filled up: start another elsewhere
        return spill(runs, store)
    raise last or OSError("no place for a side file")


def load_spilled(path: Path) -> list[StoredRun]:
    """The runs of a side file written by :func:`spill`; a UserError naming the line for anything else."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise UserError("FILE", str(path), f"a readable side file of unsaved runs ({e.strerror})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            r = StoredRun(str(d["spec_hash"]), dict(d["spec"]), int(d["seed"]), dict(d["result"]))
            if not all(isinstance(r.result.get(k), str) for k in ("workload", "machine", "kernel")):
                raise ValueError("no workload/machine/kernel")  # the columns add() needs
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{path}:{n}", "not a stored run",
                            "lines written by mmsim when the results store failed (spec_hash, spec, seed, "
                            "result)") from None
        out.append(r)
    return out
