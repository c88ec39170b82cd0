"""The kernel-test-robot workflow commands: compare, sweep, bisect, results, plot, report.

Registered on the main app by :func:`register`; each command parses options,
calls one library function (:mod:`mmsim.experiments.compare`, ``sweep``,
``bisect``, :mod:`mmsim.results`, :mod:`mmsim.report.plots`,
:mod:`mmsim.report.html`) and prints through the main CLI's ``_emit``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmsim.cli_completion import complete_kernel, complete_machine, complete_workload
from mmsim.errors import UserError

if TYPE_CHECKING:
    from mmsim.experiments.executors import Progress
    from mmsim.results.store import Store

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
MachineOpt = Annotated[str, typer.Option("--machine", "-m", help="Preset name or machine YAML file.",
                                         autocompletion=complete_machine)]
ParamOpt = Annotated[list[str] | None, typer.Option("--param", "-p", help="Workload parameter: name=value.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override a kernel policy in every arm: policy=value.")]
RunsOpt = Annotated[int, typer.Option("--runs", "-r", help="Runs per kernel (seeds seed, seed+1, ...).")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="First seed.")]
ExecOpt = Annotated[str, typer.Option("--executor", help="serial, process (local pool) or dask.")]
WorkersOpt = Annotated[int | None, typer.Option("--workers", help="Worker processes (default: the usable CPUs).")]
SchedOpt = Annotated[
    str | None, typer.Option("--scheduler", help="Dask scheduler address tcp://HOST:PORT (with --executor dask).")
]
StoreOpt = Annotated[
    str | None, typer.Option("--store", help="Results store file (default: $MMSIM_RESULTS or "
                             "~/.local/share/mmsim/results.duckdb).")
]
NoStoreOpt = Annotated[bool, typer.Option("--no-store", help="Do not read or write the results store.")]
FreshOpt = Annotated[bool, typer.Option("--fresh", help="Re-run even the runs found in the store (and replace them).")]
ProgressOpt = Annotated[bool | None, typer.Option(
    "--progress/--no-progress",
    help="Progress on stderr: a bar with ETA (default on a terminal; else one line per run).")]
MaxEventsOpt = Annotated[str | None, typer.Option(
    "--max-events", help="Refuse a run estimated above N simulated events (default 2e8 or $MMSIM_MAX_EVENTS).")]
MaxMemoryOpt = Annotated[str | None, typer.Option(
    "--max-memory", help="Refuse a run estimated above SIZE of host memory (default 8g or $MMSIM_MAX_MEMORY).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Run even beyond --max-events / --max-memory.")]
NoiseOpt = Annotated[bool, typer.Option(
    "--noise", help="Run-to-run variation from modelled sources (task start skew, timer ticks, device IRQs: "
    "docs/noise.md), seeded per run.")]


def guard_limits(max_events: str | None, max_memory: str | None, force: bool) -> AbstractContextManager[Any]:
    """The resource guard's limits from the command's options, for the length of the command."""
    from mmsim.experiments import guard

    for option, v in (("--max-events", max_events), ("--max-memory", max_memory)):
        if v is not None and not (v.isascii() and v.isprintable() and len(v) <= 40):  # int() takes any digits
            raise UserError(option, v, "ASCII, e.g. 2e8 (--max-events) or 8g (--max-memory)")
    return guard.override(max_events, max_memory, force)


def _store(path: str | None, no_store: bool) -> Store | None:
    from mmsim.results.store import Store

    if no_store:
        return None
    st = Store(path)
    check_store_path(st.path, field="--store" if path or not os.environ.get("MMSIM_RESULTS") else "$MMSIM_RESULTS")
    return st


def _name_max(directory: Path) -> int:
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _stat_or_none(path: Path, bad: Callable[[str], UserError]) -> os.stat_result | None:
    """``os.stat(path)``, None when nothing is there; a NUL byte or any other stat error (ENAMETOOLONG, ENOTDIR:
    a file used as a directory, ELOOP, EACCES) is ``bad(why)`` raised."""
    if "\x00" in str(path):
        raise bad("without NUL bytes")
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise bad(e.strerror or type(e).__name__) from None


def check_store_path(path: Path, write: bool = True, field: str = "--store") -> None:
    """A results store path that can be used, checked before anything runs and creating nothing: an existing
    regular file or (``write``) a new one whose nearest existing directory is writable and whose names fit the
    file system, the lock file's (PATH.lock) included. Before, a name too long was a traceback, and a store
    under a regular file or with a name too long for its lock file failed only once the first run had been
    simulated."""
    text = str(path)

    def bad(why: str) -> UserError:
        return UserError(field, text, f"a results file path ({why})")

    st = _stat_or_none(path, bad)
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise UserError(field, text, "a regular file (a DuckDB results file), not "
                            + ("a directory" if stat.S_ISDIR(st.st_mode) else "a device or special file"))
        return
    if not write:
        return  # reading a store that does not exist: no runs
    names = [path.name + ".lock", path.name]
    parent = path.parent
    while True:  # the directories the store will create, up to the nearest existing one
        try:
            pst = os.stat(parent)
            break
        except FileNotFoundError:
            if parent == parent.parent:
                raise bad("no existing directory above it") from None
            names.append(parent.name)
            parent = parent.parent
        except OSError as e:
            raise bad(e.strerror or type(e).__name__) from None
    if not stat.S_ISDIR(pst.st_mode):
        raise bad(f"{parent} is not a directory")
    most = _name_max(parent)
    if any(len(os.fsencode(n)) > most for n in names):
        raise bad(f"File name too long: at most {most} bytes per name, {most - 5} for the file itself "
                  "(its lock file adds .lock)")
    if not os.access(parent, os.W_OK):  # as Store.check() words it for an existing store
        raise UserError(field, text, f"a results file in a writable place ({parent} is read-only: results "
                        "can be listed and exported, not added)")


def check_output(path: Path, option: str = "--output") -> None:
    """A file a command writes (PATH.tmp, then renamed to PATH), checked before any work and creating nothing:
    new or a regular file, in an existing writable directory, its name (with .tmp) fitting the file system.
    Before, a directory, a name too long or a missing directory was a traceback after the work was done."""
    text = str(path)

    def bad(why: str) -> UserError:
        return UserError(option, text, f"a writable file path ({why})")

    st = _stat_or_none(path, bad)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise bad("it is a directory" if stat.S_ISDIR(st.st_mode) else "it is not a regular file")
    parent = path.parent
    try:
        pst = os.stat(parent)
    except OSError as e:
        raise bad(f"directory {parent}: {e.strerror or type(e).__name__}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise bad(f"{parent} is not a directory")
    most = _name_max(parent)
    if len(os.fsencode(path.name + ".tmp")) > most:
        raise bad(f"File name too long: a name of at most {most - 4} bytes (it is written as NAME.tmp first)")
    if not os.access(parent, os.W_OK):
        raise bad(f"directory {parent} is not writable")


@contextmanager
def _writing(path: Path, option: str = "--output") -> Iterator[None]:
    """An OSError on ``path`` or its PATH.tmp that :func:`check_output` could not foresee (``/proc/x.html``
    looks writable to root) is one line, and the temporary file is removed."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield
    except OSError as e:
        if e.filename is None or str(e.filename) not in (str(path), str(tmp)):
            raise
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise UserError(option, str(path), f"a writable file path ({e.strerror or type(e).__name__})") from None


MAX_SEED = (1 << 63) - 1  # the results store keeps a run's seed as a BIGINT
MAX_WORKERS = 8192  # no host has more CPUs (machine/yamlio.py MAX_CPUS, x86-64 NR_CPUS_RANGE_END)


def check_seeds(seed: int, n: int, runs_option: str, runs: int, what: str) -> None:
    """The ``n`` seeds seed .. seed+n-1 a command may run fit the store's 64-bit seed column (``runs``: the
    value of ``runs_option``, which sets ``n``; ``what`` says so). Before, --seed 2^63 ran, then failed as a
    "damaged" store (exit 1), the run lost."""
    if not 0 <= seed <= MAX_SEED:
        raise UserError("--seed", seed, "an integer from 0 to 2^63-1")
    if seed + n - 1 <= MAX_SEED:
        return
    if n - 1 <= MAX_SEED:  # a smaller --seed would do
        raise UserError("--seed", seed, f"an integer from 0 to {MAX_SEED - n + 1} ({what}, each at most 2^63-1)")
    raise UserError(runs_option, runs, f"at most 2^63 ({what}, each at most 2^63-1)")


def check_workers(workers: int | None) -> None:
    """``--workers`` within what a host can run: at most :data:`MAX_WORKERS`, and (unless --force) as many
    worker processes as the --max-memory limit holds at the guard's :data:`~mmsim.experiments.guard.BASE_RSS`
    each. Before, --workers 10^40 went to the process pool or a Dask LocalCluster as it was."""
    from mmsim.experiments import guard

    if workers is None or workers < 1:
        return  # < 1: the executor's own check names it
    lim = guard.limits()
    most = MAX_WORKERS if lim.force else max(1, min(MAX_WORKERS, lim.max_memory // guard.BASE_RSS))
    if workers > most:
        why = ("" if lim.force else f"each worker process takes at least {guard.BASE_RSS >> 20} MiB, within "
               f"--max-memory SIZE or ${guard.ENV_MEMORY}; --force to allow up to {MAX_WORKERS}")
        raise UserError("--workers", workers, f"an integer from 1 to {most}" + (f" ({why})" if why else ""))


def check_repeats(runs: int, seed: int, what: str, runs_option: str) -> None:
    """``run -r N``: the N results held in memory within --max-memory (as sweep and compare check their
    grids), before N specs are built, and their seeds. Before, -r 99999999999 hung building the specs."""
    from mmsim.experiments import guard

    if runs < 1:
        raise UserError(runs_option, runs, "an integer >= 1")
    if runs > 1:
        guard.check_grid(runs, what)
    check_seeds(seed, runs, runs_option, runs, f"-r {runs} runs seeds --seed .. --seed+{runs - 1}")


def _progress(enabled: bool | None, label: str, hold_first_batch: bool = False,
              ) -> tuple[AbstractContextManager[Any], Progress | None]:
    """Progress on stderr (:class:`mmsim.cli_progress.ProgressView`: a rich bar with ETA on a
    terminal, one line per run otherwise, nothing with --no-progress) and the executors' callback."""
    from mmsim.cli_progress import ProgressView
    from mmsim.progress import from_counts

    view = ProgressView(label, enabled, hold_first_batch)
    return view, from_counts(view.hook, label)


def _emit(doc: Any) -> None:
    from mmsim.cli import _emit as emit

    emit(doc)


def _emit_json(data: object) -> None:
    from mmsim.cli import _emit_json as emit

    emit(data)


def _assign(option: str, values: list[str] | None) -> dict[str, str]:
    from mmsim.cli import parse_assignments

    return parse_assignments(option, values)


def _load_json(path: Path) -> Any:
    from mmsim import inputs

    return inputs.load_json(path, f"INPUT {path}", "a JSON file",
                            "the --json output of mmsim compare, sweep, bisect or reproduce")


def register(app: typer.Typer) -> None:
    """Add the workflow commands to the main ``mmsim`` app."""
    app.command("compare")(compare_cmd)
    app.command("sweep")(sweep_cmd)
    app.command("bisect")(bisect_cmd)
    results_app = typer.Typer(help="The results store: list, export, import.", no_args_is_help=True)
    results_app.command("list")(results_list_cmd)
    results_app.command("export")(results_export_cmd)
    results_app.command("path")(results_path_cmd)
    results_app.command("import")(results_import_cmd)
    app.add_typer(results_app, name="results")
    app.command("plot")(plot_cmd)
    app.command("report")(report_cmd)


COMPARE_FORMATS = ("lkp", "robot", "mmtests")


def compare_cmd(
    workload: Annotated[str, typer.Argument(help="Workload name.", autocompletion=complete_workload)],
    kernel: Annotated[list[str], typer.Option(
        "--kernel", "-k", help="The base kernel, then each kernel to compare with it (2 or more; BASE+PATCH+...).",
        autocompletion=complete_kernel)],
    machine: MachineOpt = "tiny",
    param: ParamOpt = None,
    set_: SetOpt = None,
    runs: RunsOpt = 3,
    seed: SeedOpt = 0,
    executor: ExecOpt = "process",
    workers: WorkersOpt = None,
    scheduler: SchedOpt = None,
    store: StoreOpt = None,
    no_store: NoStoreOpt = False,
    fresh: FreshOpt = False,
    show_all: Annotated[bool, typer.Option("--all", help="Show every metric, not only significant changes.")] = False,
    fmt: Annotated[str, typer.Option(
        "--format", help="Text layout: lkp (the %stddev/%change table and tests), robot (the kernel test "
        "robot's email per kernel), mmtests (compare-kernels' Amean/Hmean/Stddev/CoeffVar rows).")] = "lkp",
    noise: NoiseOpt = False,
    progress: ProgressOpt = None,
    max_events: MaxEventsOpt = None,
    max_memory: MaxMemoryOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Compare kernels over repeated runs, LKP-style: the base, then a %change / %stddev column per
    other kernel; significance and the robot's verdict for each against the base.

    Examples: mmsim compare lockstress -k v3.12 -k v3.13 -k v4.14 --machine tiny -r 3   |
    mmsim compare lockstress -k v3.12 -k v3.12+a33fda35e3a7 -r 3 --format robot
    """
    from mmsim.experiments.compare import compare
    from mmsim.report.lkp import compare_doc

    if fmt not in COMPARE_FORMATS:
        raise UserError("--format", fmt, ", ".join(COMPARE_FORMATS))
    params, policies = _assign("-p/--param", param), _assign("--set", set_)
    bar, cb = _progress(progress, f"compare {workload}")
    with guard_limits(max_events, max_memory, force), bar:
        check_seeds(seed, max(runs, 1), "-r/--runs", runs, f"-r {runs} runs seeds --seed .. --seed+{runs - 1}")
        check_workers(workers)
        c = compare(workload, list(kernel), machine, params, policies, runs, seed, executor, workers, scheduler,
                    _store(store, no_store), fresh, cb, noise)
    d = c.to_dict()
    if json_out:
        _emit_json(d)
    elif fmt == "robot":
        from mmsim.report.robot import robot_emails

        _emit([robot_emails(d)])
    elif fmt == "mmtests":
        from mmsim.report.robot import mmtests_table

        _emit([mmtests_table(d, show_all)])
    else:
        _emit(compare_doc(d, show_all))


def sweep_cmd(
    workload: Annotated[str, typer.Argument(help="Workload name.", autocompletion=complete_workload)],
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="name=v1,v2,... (a list is swept).")] = None,
    kernel: Annotated[list[str] | None, typer.Option("--kernel", "-k", help="Kernel (repeatable).")] = None,
    machine: Annotated[list[str] | None, typer.Option("--machine", "-m", help="Machine (repeatable).")] = None,
    set_: SetOpt = None,
    runs: Annotated[int, typer.Option("--runs", "-r", help="Runs per point (seeds seed, seed+1, ...).")] = 1,
    seed: SeedOpt = 0,
    executor: ExecOpt = "process",
    workers: WorkersOpt = None,
    scheduler: SchedOpt = None,
    store: StoreOpt = None,
    no_store: NoStoreOpt = False,
    fresh: FreshOpt = False,
    metric: Annotated[str | None, typer.Option("--metric", help="Show this metric (default: the benchmark's).")] = None,
    noise: NoiseOpt = False,
    progress: ProgressOpt = None,
    max_events: MaxEventsOpt = None,
    max_memory: MaxMemoryOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Sweep the cartesian grid machines × kernels × -p lists; points already in the store are not re-run."""
    from mmsim.experiments.sweep import sweep
    from mmsim.report.lkp import sweep_doc

    params, policies = _assign("-p/--param", param), _assign("--set", set_)
    bar, cb = _progress(progress, f"sweep {workload}", hold_first_batch=bool(metric))  # --metric is checked then
    with guard_limits(max_events, max_memory, force), bar:
        check_seeds(seed, max(runs, 1), "-r/--runs", runs, f"-r {runs} runs seeds --seed .. --seed+{runs - 1}")
        check_workers(workers)
        s = sweep(workload, params, kernel, machine, policies, runs, seed, executor, workers, scheduler,
                  _store(store, no_store), fresh, cb, noise)
        d = s.to_dict()
        if metric and not any(metric in p["summary"] for p in d["points"]):  # held progress lines stay unsaid
            raise UserError("--metric", metric, sorted(d["points"][0]["summary"]))
    if json_out:
        _emit_json(d)
    else:
        _emit(sweep_doc(d, metric))


def bisect_cmd(
    workload: Annotated[str, typer.Argument(help="Workload name.", autocompletion=complete_workload)],
    good: Annotated[str | None, typer.Option("--good", help="Good kernel (BASE+PATCH+... allowed).")] = None,
    bad: Annotated[str | None, typer.Option("--bad", help="Bad kernel: --good plus the series.")] = None,
    series: Annotated[
        Path | None, typer.Option("--series", help="YAML series file (base, patches) instead of --good/--bad.")
    ] = None,
    metric: Annotated[
        str | None, typer.Option("--metric", help="Metric to bisect (default: the headline KPI, e.g. throughput).")
    ] = None,
    threshold: Annotated[float, typer.Option("--threshold", help="Change (%) that makes a step bad.")] = 5.0,
    machine: MachineOpt = "tiny",
    param: ParamOpt = None,
    runs: RunsOpt = 3,
    max_runs: Annotated[int | None, typer.Option("--max-runs", help="Runs per step when unstable (3 × -r).")] = None,
    max_stddev: Annotated[float, typer.Option("--max-stddev", help="Stability: %stddev bound.")] = 5.0,
    max_spread: Annotated[float, typer.Option("--max-spread", help="Stability: (max-min)/mean bound, %.")] = 10.0,
    seed: SeedOpt = 0,
    executor: ExecOpt = "process",
    workers: WorkersOpt = None,
    scheduler: SchedOpt = None,
    store: StoreOpt = None,
    no_store: NoStoreOpt = False,
    noise: NoiseOpt = False,
    progress: ProgressOpt = None,
    max_events: MaxEventsOpt = None,
    max_memory: MaxMemoryOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Find the first patch of an ordered series that moves METRIC by --threshold %."""
    from mmsim.experiments.bisect import bisect, load_series, series_from_kernels
    from mmsim.report.lkp import bisect_doc

    if series is not None:
        if good or bad:
            raise UserError("--series", str(series), "either --series or --good/--bad, not both")
        ser = load_series(series)
    elif good and bad:
        ser = series_from_kernels(good, bad)
    else:
        raise UserError("--good/--bad", f"{good}/{bad}", "both --good and --bad, or --series FILE")
    bar, cb = _progress(progress, f"bisect {workload}", hold_first_batch=True)  # --metric is checked then
    with guard_limits(max_events, max_memory, force), bar:
        n = max(1, runs, max_runs or 3 * runs)  # as bisect() resolves --max-runs
        check_seeds(seed, n, "--max-runs" if max_runs else "-r/--runs", max_runs or runs,
                    f"a step runs up to {n} seeds from --seed: --max-runs, default 3 x -r")
        check_workers(workers)
        b = bisect(workload, ser, metric, threshold, machine, _assign("-p/--param", param), runs, max_runs,
                   max_stddev, max_spread, seed, executor, workers, scheduler, _store(store, no_store), cb, noise)
    d = b.to_dict()
    if json_out:
        _emit_json(d)
    else:
        _emit(bisect_doc(d))


_Filter = Annotated[str | None, typer.Option(help="Keep only this value.")]


def results_list_cmd(
    workload: _Filter = None,
    machine: _Filter = None,
    kernel: _Filter = None,
    metric: Annotated[str | None, typer.Option(help="Show metrics whose name contains this.")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many runs (newest).")] = 50,
    store: StoreOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the stored runs (filtered), with one metric's value per run when --metric is given."""
    from mmsim.report.tables import Table, fmt_num
    from mmsim.results.store import Store

    if limit < 1:
        raise UserError("--limit", limit, "an integer >= 1")
    st = Store(store)
    check_store_path(st.path, write=False)
    filters: dict[str, Any] = {"workload": workload, "machine": machine, "kernel": kernel}
    if metric:
        df = st.metrics(metric=metric, **filters)
        cols = ["run_id", "workload", "machine", "kernel", "params", "seed", "metric", "value"]
    else:
        df = st.runs(**filters)
        cols = ["run_id", "workload", "machine", "kernel", "params", "seed", "mmsim_version", "created"]
    df = df.tail(limit) if not df.empty else df
    if json_out:
        _emit_json([{c: (str(r[c]) if c == "created" else r[c]) for c in cols} for r in df.to_dict("records")]
                   if not df.empty else [])
        return
    t = Table(cols, align="llllllll" if not metric else "lllllrlr",
              title=f"{st.path}: {st.count()} run(s) stored; showing {len(df)}")
    for r in df.to_dict("records") if not df.empty else []:
        t.rows.append([fmt_num(r[c]) if c in ("value",) else str(r[c]) for c in cols])
    _emit([t])


def results_export_cmd(
    output: Annotated[Path, typer.Argument(help="Output file: .csv or .parquet.")],
    workload: _Filter = None,
    machine: _Filter = None,
    kernel: _Filter = None,
    metric: Annotated[str | None, typer.Option(help="Keep metrics whose name contains this.")] = None,
    long: Annotated[bool, typer.Option("--long", help="One row per run and metric (default: a column per metric).")]
    = False,
    store: StoreOpt = None,
) -> None:
    """Export the stored runs and their metrics to CSV or Parquet."""
    import mmsim.results
    from mmsim.results.store import Store

    if output.suffix in (".csv", ".parquet") or not output.name:  # else the library's error names the suffixes
        check_output(output)  # '' is '.', a directory: was a traceback (an empty name has no NAME.tmp)
    check_store_path(Store(store).path, write=False)
    with _writing(output):
        n = mmsim.results.export(output, store, metric=metric, wide=not long, workload=workload, machine=machine,
                                 kernel=kernel)
    _emit([f"wrote {n} row(s) to {output}"])


def results_path_cmd(store: StoreOpt = None) -> None:
    """Print the results store's path."""
    from mmsim.results.store import Store

    _emit([str(Store(store).path)])


def results_import_cmd(
    file: Annotated[Path, typer.Argument(help="Side file of unsaved runs named by a sweep whose store failed.")],
    store: StoreOpt = None,
) -> None:
    """Load the runs a failed store write saved to a side file (.jsonl) into the store."""
    from mmsim import inputs
    from mmsim.results.store import Store, load_spilled

    what = "a side file of unsaved runs"
    try:
        mode = os.stat(file).st_mode
    except OSError:
        mode = None  # load_spilled names the cause
    if mode is not None and not stat.S_ISREG(mode):  # /dev/zero, a FIFO: read_text() would never return
        raise UserError("FILE", str(file), f"{what} (a regular file, not {inputs.kind_of(mode)})")
    try:
        runs = load_spilled(file)
    except (UnicodeDecodeError, RecursionError):
        raise UserError("FILE", str(file), f"{what}: JSON lines in UTF-8, as mmsim writes them") from None
    st = Store(store)
    check_store_path(st.path)
    st.check(len(runs))
    added = st.add(runs)
    _emit([f"imported {added} new run(s) from {file} into {st.path} ({len(runs) - added} already stored)"])


PLOTS = ("scaling", "profile", "locks")
PLOT_TAKES = {"scaling": ("sweep",), "profile": ("compare",), "locks": ("compare", "sweep")}
REPORT_TAKES = ("compare", "sweep", "bisect", "run", "reproduce")


@contextmanager
def _rendering(kind: str) -> Iterator[None]:
    """Backstop behind :func:`mmsim.report.schema.check`: a field the schema does not model, missing or of
    the wrong type in a hand-edited result, is still one error line."""
    try:
        yield
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        if isinstance(e, UserError):
            raise
        raise UserError(f"INPUT: {kind} result", f"{type(e).__name__} {str(e)[:60]}",
                        f"the unedited --json output of mmsim {kind}") from None


def plot_cmd(
    kind: Annotated[str, typer.Argument(help="scaling (sweep), profile (compare) or locks (compare or sweep).")],
    input_: Annotated[Path, typer.Argument(metavar="INPUT", help="--json output of mmsim sweep / compare.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Image file: .png or .svg.")],
    metric: Annotated[str | None, typer.Option("--metric", help="scaling: the y metric (default: benchmark's).")]
    = None,
    x: Annotated[str | None, typer.Option("--x", help="scaling: the swept parameter on the x axis.")] = None,
) -> None:
    """Draw a plot from a saved compare or sweep (--json) to PNG or SVG."""
    from mmsim.report import schema

    if kind not in PLOTS:
        raise UserError("KIND", kind, PLOTS)
    data = _load_json(input_)  # before matplotlib is imported: a bad input fails fast
    got = schema.check(data, f"plot {kind}", PLOT_TAKES[kind])
    from mmsim.report import plots

    plots.check_output(output)
    check_output(output)
    with _rendering(got):
        if kind == "scaling":
            fig = plots.scaling(data, metric, x)
        elif kind == "profile":
            fig = plots.profile(data)
        else:
            fig = plots.lock_waits(data)
    with _writing(output):
        plots.save(fig, output)
    _emit([f"wrote {output}"])


def report_cmd(
    input_: Annotated[
        Path, typer.Argument(metavar="INPUT", help="--json output of compare/sweep/bisect/run/reproduce.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")],
) -> None:
    """Write a self-contained HTML report (tables, plots, mechanism lines) of a saved result."""
    from mmsim.report import html

    if output.suffix not in (".html", ".htm"):
        raise UserError("--output", str(output), "a file name ending in .html")
    check_output(output)
    from mmsim.report import schema

    data = _load_json(input_)
    got = schema.check(data, "report", REPORT_TAKES)
    with _rendering(got):
        page = html.report(data)
    tmp = output.with_name(output.name + ".tmp")
    with _writing(output):
        tmp.write_text(page)
        tmp.replace(output)
    _emit([f"wrote {output} ({len(page):,} bytes)"])
