"""Run many specs: serial, on a local process pool, or on a Dask cluster, through the store.

:func:`run_many` is what compare, sweep and bisect call. It validates every
spec first (nothing runs on bad input), keys each one by the hash of its
canonical inputs and its seed, takes the runs already in the results store,
runs only the rest on the chosen executor and records each result in the
store as it arrives, so a sweep killed half-way resumes where it stopped.

Executors only decide *where* ``run(spec)`` is called; a run depends on
nothing but its spec and seed, so every executor gives the same metrics
(only ``sim.wall_seconds``, the host's time, differs):

``serial``
    in this process, in order.
``process`` (default)
    ``concurrent.futures.ProcessPoolExecutor`` with ``workers`` processes
    (default: the CPUs this process may use). A worker that dies (SIGKILL,
    the OOM killer) breaks the pool: the unfinished runs go to a new pool, up
    to ``POOL_RESTARTS`` times. Workers exit when the sweep process dies.
``dask``
    ``distributed.Client``: on an existing cluster (``scheduler``, e.g.
    ``tcp://host:8786``; its workers need mmsim installed) or on a
    ``LocalCluster`` of ``workers`` single-threaded worker processes. The
    scheduler re-runs the tasks of a worker that dies on the others (a task
    whose workers die ``distributed.scheduler.allowed-failures`` times, 3 by
    default, fails the sweep with ``KilledWorker``); a local cluster's nannies
    restart dead workers.

Tested in ``tests/hardening/``: identical results on every executor and in
fresh processes, sweeps killed with SIGKILL and re-run, concurrent sweeps on
one store, workers killed mid-sweep.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from mmsim.errors import RunFailure, UserError
from mmsim.experiments import guard
from mmsim.experiments.run import NOISE_SOURCES, RunSpec, run
from mmsim.results.store import Store, StoredRun, spec_hash, spill

EXECUTORS = ("serial", "process", "dask")
# Finished runs are written to the store every this many seconds: one DuckDB
# transaction costs ~30-100 ms, too much per run for a sweep of short runs;
# a hard kill loses at most the runs finished in the last interval.
FLUSH_SECONDS = 2.0
FLUSH_ENV = "MMSIM_FLUSH_SECONDS"  # overrides FLUSH_SECONDS: a shorter loss window for more transactions
SCHEDULER_TIMEOUT = "10s"  # connecting to --scheduler: then a UserError naming the address
# How often a process-pool worker checks that the sweep process that started it is alive: an orphan
# exits within this time instead of computing (and holding memory) for nobody.
ORPHAN_POLL_SECONDS = 0.5
# A broken process pool (a worker died) is replaced this often before the sweep gives up.
POOL_RESTARTS = 3

log = logging.getLogger(__name__)

Progress = Callable[[int, int, dict[str, Any]], None]  # (done, total, last result)


def parse_kernel(text: str) -> tuple[str, tuple[str, ...]]:
    """``v3.12+e009bb30c8df+e1f56c89b040`` → (``v3.12``, patches): :func:`mmsim.kernels.catalog.split_kernel`."""
    from mmsim.kernels.catalog import split_kernel

    return split_kernel(text)


# Modules that cannot change a run's result: the workflow around it, reports, the CLI.
_NOT_MODEL = ("cli", "api", "progress", "report/", "results/",
              "experiments/compare", "experiments/sweep", "experiments/bisect",
              "experiments/stats", "experiments/executors", "experiments/reproduce", "experiments/exp_", "native/")


@functools.cache
def model_fingerprint() -> str:
    """SHA-256 (16 hex digits) of the model's source: every ``.py`` under ``mmsim/`` except the
    workflow, report and CLI modules. Part of every run's key, so a stored run is reused only by
    the same model code — not just the same version number, which stays put during development."""
    import mmsim

    root = Path(mmsim.__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if rel.startswith(_NOT_MODEL):
            continue
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def canonical(spec: RunSpec, wall_limit: bool = True) -> dict[str, Any]:
    """A spec's inputs as the model sees them, validated: resolved params and policies, file contents hashed.

    Raises :class:`UserError` for anything the user typed wrong, before any run. ``wall_limit=False``: the
    guard's CPU-time limit does not apply (``reproduce``'s own arms; events and memory are still checked).
    """
    return checked(spec, wall_limit)[0]


def checked(spec: RunSpec, wall_limit: bool = True) -> tuple[dict[str, Any], guard.Estimate]:
    """:func:`canonical` and the guard's estimate of the run (its ``wall`` counts towards a command's total)."""
    import mmsim
    import mmsim.machine as _machine
    from mmsim.kernels.catalog import resolve_kernel as resolve
    from mmsim.mm.system import System
    from mmsim.workloads.base import get_workload, resolve_params

    if spec.seed < 0:
        raise UserError("--seed", spec.seed, "an integer >= 0")
    w = get_workload(spec.workload)
    params = resolve_params(w, spec.params)
    m = _machine.get_machine(spec.machine)
    k = resolve(spec.kernel, list(spec.patches), spec.policies)
    est = guard.check(w.name, params, m, k.policies, spec.exact, wall_limit)  # before the store or any run
    # the checks a workload makes at set-up (tasks vs CPUs, sizes vs memory, the hugetlb pool), on a fresh
    # System where no event runs (~10 ms): a bad point fails the whole sweep before any point runs or is stored
    w.setup(System(m, k, spec.seed), dict(params))
    out: dict[str, Any] = {
        "workload": w.name,
        "machine": m.name,
        # the resolved machine's full content, not its name: `-m host` is whatever host.yaml says now
        # (mmsim calibrate rewrites it); a YAML file counts by what it defines, not by its bytes
        "machine_content": machine_content(m),
        "kernel": k.name,
        "patches": list(k.patches),
        "policies": dict(sorted(k.policies.items())),
        "params": {p: params[p] for p in sorted(params)},
        **({"noise": NOISE_SOURCES} if getattr(spec, "noise", False) else {}),  # noise-free keys unchanged
        "mmsim_version": mmsim.__version__,
        "model": model_fingerprint(),
    }
    if spec.exact:  # event by event: a different result from the default fast-forward (metrics/sampling.py)
        out["exact"] = True
    from mmsim.kernels.catalog import is_file

    if is_file(spec.kernel):
        out["kernel_file"] = hashlib.sha256(Path(spec.kernel).read_bytes()).hexdigest()[:16]
    return out, est


def machine_content(m: Any) -> str:
    """SHA-256 (16 hex digits) of every field of a resolved Machine (topology, caches, nodes, cost model)."""
    import dataclasses
    import json

    blob = json.dumps(dataclasses.asdict(m), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _work(spec: RunSpec) -> dict[str, Any]:
    """The task every executor runs. A UserError (e.g. too many threads for the machine) comes back
    as data: its custom constructor does not survive pickling between processes."""
    try:
        return run(spec, guard=False).to_dict()  # canonical() checked the limits in the parent
    except UserError as e:
        return {"__user_error__": [e.field, repr(e.value), e.allowed]}


def _unwrap(res: dict[str, Any]) -> dict[str, Any]:
    err = res.get("__user_error__")
    if err:
        raise UserError(err[0], err[1], err[2])
    return res


def execute(
    specs: Sequence[RunSpec],
    executor: str = "process",
    workers: int | None = None,
    scheduler: str | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(index, result dict)`` for every spec, in completion order."""
    check_executor(executor, workers, scheduler)
    if not specs:
        return
    if executor == "serial" or (executor == "process" and (workers == 1 or len(specs) == 1)):
        for i, s in enumerate(specs):
            yield i, _unwrap(_work(s))
    elif executor == "process":
        yield from _process(specs, workers or _ncpus())
    else:
        yield from _dask(specs, workers, scheduler)


def check_executor(executor: str, workers: int | None, scheduler: str | None) -> None:
    """UserError for an unknown executor, a worker count < 1 or a scheduler without Dask."""
    if executor not in EXECUTORS:
        raise UserError("--executor", executor, EXECUTORS)
    if workers is not None and workers < 1:
        raise UserError("--workers", workers, "an integer >= 1")
    if scheduler is not None and executor != "dask":
        raise UserError("--scheduler", scheduler, "only with --executor dask")
    if scheduler is not None:  # also "": an empty address is an error, not a local cluster
        from mmsim.inputs import check_scheduler

        check_scheduler(scheduler)


def _ncpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _process(specs: Sequence[RunSpec], workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Run on a process pool; when a worker dies (SIGKILL, the OOM killer) the pool breaks, and the runs
    it had not finished go to a new pool, up to ``POOL_RESTARTS`` times (like Dask's allowed-failures):
    a spec that keeps killing its worker ends the sweep instead of looping forever."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    todo = dict(enumerate(specs))
    for attempt in range(POOL_RESTARTS + 1):
        if attempt:
            log.warning("mmsim: a worker process died; re-running %d unfinished runs on a new pool (%d/%d)",
                        len(todo), attempt, POOL_RESTARTS)
        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), initializer=_exit_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            futs = {pool.submit(_work, s): i for i, s in todo.items()}
            try:
                for f in as_completed(futs):  # after a break every future completes: keep what finished
                    if isinstance(f.exception(), BrokenProcessPool):
                        continue
                    i = futs[f]
                    del todo[i]
                    yield i, _unwrap(f.result())
            finally:
                for f in futs:
                    f.cancel()
        if not todo:
            return
    raise RunFailure(f"worker processes died {POOL_RESTARTS + 1} times (killed by a signal, e.g. the OOM "
                       f"killer?); {len(todo)} runs unfinished, the finished ones are stored: re-run to resume")


def _exit_with_parent(parent: int) -> None:
    """Process-pool worker initializer: exit as soon as the sweep process is gone.

    When the sweep process is killed (``kill -9``, the OOM killer) its pool workers are orphaned and,
    blocked on a call queue whose pipe their siblings keep open, would otherwise sleep forever. A daemon
    thread polls ``os.getppid()`` (it changes when the parent dies) and ends the worker, even mid-run:
    nobody is left to receive or store its result.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="mmsim-orphan-watch", daemon=True).start()


def _dask(specs: Sequence[RunSpec], workers: int | None, scheduler: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    from distributed import Client, KilledWorker, LocalCluster, as_completed

    if scheduler:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
        except OSError as e:
            raise UserError("--scheduler", scheduler, f"a reachable Dask scheduler ({e})") from None
        cluster = None
    else:
        cluster = LocalCluster(n_workers=workers or _ncpus(), threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.CRITICAL)
        client = Client(cluster)
    try:
        futs = client.map(_work, list(specs), pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        # on this client's loop: by default as_completed follows the process's *default* client, which is
        # another one when the caller has its own Client (dask/distributed#4357): results then come back
        # on the wrong event loop ("... is bound to a different event loop") or not at all
        for f in as_completed(futs, loop=client.loop):
            try:
                res = f.result()
            except KilledWorker as e:  # the scheduler gave up on a task whose workers kept dying
                raise RunFailure(f"Dask workers died running a sweep point ({e}); the finished points are "
                                 "stored: re-run to resume") from None
            yield index[f.key], _unwrap(res)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


class _Writer:
    """Records finished runs in the store in batches: a background thread writes
    whatever has arrived every ``FLUSH_SECONDS``, ``close()`` writes the rest. So
    a hard kill loses at most the last ``FLUSH_SECONDS`` of finished runs, and
    a sweep of short runs does not pay one transaction per run.

    When a write fails (disk full, I/O error, damage), no computed run is
    dropped: that batch and every later one go to a side file
    (:func:`mmsim.results.store.spill`), and ``close()`` ends the sweep with
    one line naming the cause and the file for ``mmsim results import``."""

    def __init__(self, store: Store | None, replace: bool) -> None:
        self.store, self.replace = store, replace
        self.pending: list[StoredRun] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.failed: BaseException | None = None  # the store write that failed
        self.side: Path | None = None  # where the runs went instead
        self.spilled = 0

    def put(self, run: StoredRun) -> None:
        if self.store is None:
            return
        with self.lock:
            self.pending.append(run)
        if self.thread is None:
            # started at the first result, when the process pool has already forked its
            # workers: a fork never copies this thread mid-write (or its locks)
            self.thread = threading.Thread(target=self._loop, name="mmsim-store-writer", daemon=True)
            self.thread.start()

    def flush(self) -> None:
        with self.lock:
            if not self.pending or self.store is None:
                return
            if self.failed is None:
                try:
                    self.store.add(self.pending, replace=self.replace)  # all or nothing
                    self.pending = []
                    return
                except Exception as e:  # whatever the cause, the runs must not be lost
                    self.failed = e
            self.side = spill(self.pending, self.store.path, self.side)  # OSError: nowhere left to put them
            self.spilled += len(self.pending)
            self.pending = []

    def _loop(self) -> None:
        interval = flush_seconds()
        while not self.stop.wait(interval):
            try:
                self.flush()
            except Exception:  # the runs stay pending; close() retries and raises
                return

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.flush()
        if self.failed is not None and self.store is not None:
            from mmsim.results.store import StoreError

            e = self.failed
            cause = e.cause if isinstance(e, StoreError) else " ".join(str(e).split()) or type(e).__name__
            raise StoreError(f"results store {self.store.path}: write failed ({cause}); the {self.spilled} "
                             f"computed run(s) not stored are in {self.side}: load them with "
                             f"mmsim results import {self.side} --store {self.store.path}")


def flush_seconds() -> float:
    """``$MMSIM_FLUSH_SECONDS`` if set (a number of seconds > 0), else ``FLUSH_SECONDS``."""
    text = os.environ.get(FLUSH_ENV)
    if text is None:
        return FLUSH_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise UserError(FLUSH_ENV, text, "a number of seconds > 0")
    return value


def run_many(
    specs: Sequence[RunSpec],
    executor: str = "process",
    workers: int | None = None,
    scheduler: str | None = None,
    store: Store | None = None,
    fresh: bool = False,
    progress: Progress | None = None,
    what: str = "the command",
) -> tuple[list[dict[str, Any]], int]:
    """Results (``RunResult.to_dict()``) for ``specs``, in order; and how many were actually run.

    Runs found in ``store`` (same canonical inputs and seed) are reused unless
    ``fresh``; new results are recorded as they arrive (a background writer
    every ``FLUSH_SECONDS``, and always before returning or unwinding). The runs
    to execute must fit the guard's CPU-time limit together (``what`` names them).
    """
    checks = [checked(s) for s in specs]  # validates everything before anything runs
    canon = [c for c, _ in checks]
    check_executor(executor, workers, scheduler)

    def check_wall(todo: Sequence[int]) -> None:
        """The runs to execute, together, within the CPU-time limit of one run (``--exact`` runs are exempt)."""
        guard.check_total([checks[i][1].wall for i in todo if not specs[i].exact], what)

    if store is None or fresh or not store.path.exists():  # every run executes: checked before a store is made
        check_wall(range(len(specs)))
    if store is not None:
        flush_seconds()  # and the writer's interval
        # before any run: it opens (writable, every row readable) and has room; StoreError / UserError
        store.check(0 if store.path.exists() else len(specs))
    keys = [(spec_hash(c), s.seed) for c, s in zip(canon, specs, strict=True)]
    results: list[dict[str, Any] | None] = [None] * len(specs)
    if store is not None and not fresh:
        found = store.get(keys)
        for i, k in enumerate(keys):
            results[i] = found.get(k)
    todo = [i for i, r in enumerate(results) if r is None]
    check_wall(todo)  # only those not found in the store (a resumed sweep)
    if store is not None:
        store.check_space(len(todo))  # room for the runs to come
    done = len(specs) - len(todo)
    if progress:
        progress(done, len(specs), {})
    writer = _Writer(store, fresh)
    try:
        for j, res in execute([specs[i] for i in todo], executor, workers, scheduler):
            i = todo[j]
            results[i] = res
            writer.put(StoredRun(keys[i][0], canon[i], specs[i].seed, res))
            done += 1
            if progress:
                progress(done, len(specs), res)
    except BaseException:
        with contextlib.suppress(Exception):  # every finished run is kept (stored or spilled); the first
            writer.close()  # error (Ctrl-C, a failed run) is the one reported
        if writer.failed is not None:
            log.warning("mmsim: results store %s: write failed; %d computed run(s) are in %s (mmsim results "
                        "import)", store.path if store else "", writer.spilled, writer.side)
        raise
    writer.close()  # StoreError naming the side file when the store failed
    return [r for r in results if r is not None], len(todo)


def with_seeds(spec: RunSpec, runs: int, seed0: int = 0) -> list[RunSpec]:
    """``runs`` copies of ``spec`` with distinct seeds seed0, seed0 + 1, ..."""
    return [replace(spec, seed=seed0 + i) for i in range(runs)]


def spec_dict(spec: RunSpec) -> dict[str, Any]:
    d = asdict(spec)
    d["patches"] = list(spec.patches)
    return d
