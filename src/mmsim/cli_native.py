"""``mmsim native``, ``mmsim calibrate`` and ``mmsim validate``: the host kernel side.

Registered on the main app by :func:`register` (one line in cli.py). The
library lives in :mod:`mmsim.native`; nothing is imported until a command runs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _progress(msg: str) -> None:
    sys.stderr.write(f"mmsim: {msg}\n")
    sys.stderr.flush()


def native_cmd(
    workload: Annotated[
        str | None, typer.Argument(help="Workload name (vm-scalability/anon-w-seq, ...).")] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Workload parameter: name=value (repeatable).")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="thp=always|madvise|never, applied per mapping with madvise.")
    ] = None,
    warm: Annotated[
        bool, typer.Option("--warm", help="Touch and free the run's memory just before it (VM free page reporting).")
    ] = False,
    perf: Annotated[bool, typer.Option(
        "--perf/--no-perf", help="Count perf stat software events (default). Each fault then runs perf's hooks: "
        "-8 to -10% on page_fault3 here; validate measures without.")] = True,
    restore: Annotated[bool, typer.Option(
        "--restore", help="Only undo what a killed native run left (sysctls, workers, temp dirs), and say what.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a workload for real on this host's kernel: metrics, vmstat deltas, getrusage, perf stat."""
    from mmsim.cli import _emit, _emit_json, parse_assignments
    from mmsim.errors import UserError
    from mmsim.native.report import format_native
    from mmsim.native.runner import NativeSpec, recover, run_native
    from mmsim.native.safety import Skip

    if restore:
        if workload is not None:
            raise UserError("--restore", workload, "no workload with --restore (it only recovers)")
        lines = recover(log=lambda line: None)
        if json_out:
            _emit_json({"restored": lines})
        else:
            _emit([*lines] if lines else ["nothing to restore: no killed native run left changes behind"])
        return
    if workload is None:
        raise UserError("WORKLOAD", "", "a workload name (mmsim workloads), or --restore")
    spec = NativeSpec(workload, parse_assignments("-p/--param", param), parse_assignments("--set", set_), warm,
                      perf=perf)
    try:
        d: dict[str, Any] = run_native(spec)
    except Skip as e:
        if json_out:
            _emit_json({"workload": workload, "mode": "native", "skipped": str(e)})
        else:
            _emit([f"{workload}: skipped: {e}"])
        return
    if json_out:
        _emit_json(d)
    else:
        _emit(format_native(d))


def calibrate_cmd(
    out: Annotated[
        str | None,
        typer.Option("--out", "-o", help="Machine YAML to write (default: $XDG_CONFIG_HOME/mmsim/host.yaml)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Measure this host's cost model on microbenchmarks and write a machine YAML (--machine FILE).

    A failed or noisy measurement keeps the --out file's earlier one (same host), else the estimate.

    Example: mmsim calibrate --out h.yaml && mmsim validate --suite native --machine h.yaml"""
    from mmsim.cli import _emit, _emit_json
    from mmsim.native.calibrate import calibrate
    from mmsim.native.report import format_calibrate

    r = calibrate(out, log=_progress)
    for n in r.get("notes") or ():  # every kept estimate and noisy measurement, also with --json
        _progress(f"note: {n}")
    if json_out:
        _emit_json(r)
    else:
        _emit(format_calibrate(r))


def validate_cmd(
    machine: Annotated[
        str, typer.Option("--machine", "-m", help="Machine preset or YAML file (default: the calibrated host).")
    ] = "host",
    size: Annotated[str, typer.Option("--size", help="Total bytes of the vm-scalability cases.")] = "1g",
    seconds: Annotated[float, typer.Option("--seconds", min=0.05, help="page_fault1: minimum native seconds.")] = 1.0,
    repeats: Annotated[int | None, typer.Option(
        "--repeats", min=1, help="Native runs per case (default 5; the fastest is the reference, the median is "
        "reported too).")] = None,
    suite: Annotated[
        list[str] | None, typer.Option("--suite", help="Repeatable or comma-separated: "
                          "primitives (level 0: machine primitives), locks (level 1: lock "
                          "models vs native lock contention), paths (level 2: zone->lock sections vs "
                          "52166607ecc9's ftrace times, on their own presets), native (workloads on this host's "
                          "kernel), caches (the cache hierarchy: chase plateaus, the seed's perf counts, the Genoa "
                          "counter-case; not part of all), or all (the default).")
    ] = None,
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress", help="Progress on stderr: a rich bar with ETA per suite (default on a "
        "terminal; else one line per case).")] = None,
    calibrate_each: Annotated[bool, typer.Option(
        "--calibrate-each/--no-calibrate-each", help="native suite on the calibrated host (host or a "
        "calibration YAML): calibrate again right before each case and judge the case on that, the given "
        "file's result shown beside it (this VM's speed moves within minutes; docs/validation.md). "
        "No effect on a preset.")] = True,
    json_out: JsonOpt = False,
) -> None:
    """Validation suites: machine primitives against published and native measurements (level 0), and
    the workload cases natively and in simulation; simulated, reference and error per row.

    Examples: mmsim validate --suite primitives --json; mmsim calibrate --out h.yaml && mmsim validate
    --suite native --machine h.yaml (each case re-calibrated first; --no-calibrate-each for one calibration)."""
    from mmsim.cli import _emit, _emit_json
    from mmsim.errors import UserError
    from mmsim.native.report import format_validate
    from mmsim.native.validate import NATIVE_REPEATS, validate
    from mmsim.workloads.vm_scalability import memparse as parse_size

    try:
        parse_size(size)
    except ValueError:
        raise UserError("--size", size, "a size like 256m, 1g (k/m/g = 2^10/2^20/2^30)") from None
    if not 0.05 <= seconds <= 3600:  # click's min= lets nan and inf through
        raise UserError("--seconds", seconds, "seconds from 0.05 to 3600")
    suites = {"primitives", "locks", "paths", "native", "caches", "all"}
    chosen = {x.strip() for v in (suite or ["all"]) for x in v.split(",")}
    for x in sorted(chosen):
        if x not in suites:
            raise UserError("--suite", x, ", ".join(sorted(suites)))

    def want(name: str) -> bool:
        return name in chosen or ("all" in chosen and name != "caches")
    from mmsim.machine import get_machine

    get_machine(machine)  # a bad --machine fails before anything runs
    from mmsim.cli_progress import ProgressView

    rows: list[dict[str, Any]] = []
    lock_rows: list[dict[str, Any]] = []
    view = ProgressView("validate", progress)
    with view:
        if want("primitives"):
            from mmsim.native.primitives import validate_primitives

            _progress("suite primitives")
            rows += validate_primitives(machine, log=_progress, progress=view.hook)
        if want("native"):
            _progress("suite native")
            rows += validate(machine, size=size, seconds=seconds, repeats=repeats or NATIVE_REPEATS,
                             log=_progress, progress=view.hook, calibrate_each=calibrate_each)
        if want("locks"):
            from mmsim.native.locks import validate_locks

            _progress("suite locks")
            lock_rows = validate_locks(machine, log=_progress, progress=view.hook)
        path_rows: list[dict[str, Any]] = []
        if want("paths"):
            from mmsim.mm.validate_paths import validate_paths

            _progress("suite paths")
            path_rows = validate_paths(log=_progress)
        cache_rows: list[dict[str, Any]] = []
        if want("caches"):
            from mmsim.native.caches import validate_caches

            _progress("suite caches")
            cache_rows = validate_caches(machine, log=_progress)
    if json_out:
        _emit_json(rows + lock_rows + path_rows + cache_rows)
    else:
        from mmsim.mm.validate_paths import format_paths
        from mmsim.native.caches import format_caches
        from mmsim.native.report import format_locks

        _emit((format_validate(rows) if rows else []) + (format_locks(lock_rows) if lock_rows else [])
              + (format_paths(path_rows) if path_rows else []) + (format_caches(cache_rows) if cache_rows else []))


def _abort_on_sigterm(f: Callable[..., None]) -> Callable[..., None]:
    """SIGTERM/SIGHUP (raised as safety.Interrupted once cleanup ran) exit like Ctrl-C: code 130."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from mmsim.native.safety import Interrupted

        try:
            f(*args, **kwargs)
        except Interrupted:
            raise typer.Abort() from None

    return wrapper


def register(app: typer.Typer) -> None:
    panel = "Host kernel (native mode)"
    app.command("native", rich_help_panel=panel)(_abort_on_sigterm(native_cmd))
    app.command("calibrate", rich_help_panel=panel)(_abort_on_sigterm(calibrate_cmd))
    app.command("validate", rich_help_panel=panel)(_abort_on_sigterm(validate_cmd))
