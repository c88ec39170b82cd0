"""The ``mmsim`` command: a thin shell over the library.

Each command parses its options, calls one library function and hands the
result to :mod:`mmsim.report`. Library modules are imported inside the
commands, so ``mmsim --help`` stays fast and the library never imports this.

Errors: a :class:`~mmsim.errors.UserError` from the library, or a usage error
from click/typer, becomes one line on stderr (``mmsim: error: ...``) and exit
code 2, never a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from mmsim import cli_completion, cli_native, cli_workflow
from mmsim.cli_completion import complete_kernel, complete_machine, complete_workload
from mmsim.errors import RunFailure, UserError
from mmsim.report import jsonout
from mmsim.report.tables import Doc, Table, render

app = typer.Typer(
    name="mmsim",
    help="Simulate Linux kernel memory-management performance on many-core NUMA machines.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
machine_app = typer.Typer(help="Inspect one machine preset or YAML file.", no_args_is_help=True)
app.add_typer(machine_app, name="machine")
cli_native.register(app)  # mmsim native / calibrate / validate
cli_workflow.register(app)  # mmsim compare / sweep / bisect / results / plot / report
cli_completion.register(app)  # mmsim completion bash|zsh|fish

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


# -- output ------------------------------------------------------------------------


def _emit(doc: Doc) -> None:
    """Print a report: rich tables on a terminal, plain aligned text otherwise."""
    if not sys.stdout.isatty():
        sys.stdout.write(render(doc))
        return
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(highlight=False)
    for i, block in enumerate(doc):
        if i:
            console.print()
        if isinstance(block, Table):
            rt = RichTable(title=block.title or None, title_justify="left")
            for h, a in zip(block.headers, block.align, strict=True):
                rt.add_column(h, justify="right" if a == "r" else "left")
            for row in block.rows:
                rt.add_row(*row)
            console.print(rt)
        else:
            console.print(block, markup=False)


def _emit_json(data: object) -> None:
    sys.stdout.write(jsonout.dumps(data) + "\n")


def parse_assignments(option: str, values: Sequence[str] | None) -> dict[str, str]:
    """``["a=1", "b=x"]`` → ``{"a": "1", "b": "x"}``; anything else is a UserError naming ``option``."""
    out: dict[str, str] = {}
    for v in values or ():
        key, eq, val = v.partition("=")
        key = key.strip()
        if not eq or not key:
            raise UserError(option, v, "NAME=VALUE")
        out[key] = val.strip()
    return out


# -- catalogues --------------------------------------------------------------------


@app.command("machines")
def machines_cmd() -> None:
    """List the machine presets."""
    from mmsim.machine import get_machine, list_machines
    from mmsim.report.text import machines_table

    _emit([machines_table((name, get_machine(name)) for name, _ in list_machines())])


@machine_app.command("show")
def machine_show(
    name: Annotated[str, typer.Argument(help="Preset name or path to a machine YAML file.",
                                        autocompletion=complete_machine)],
    json_out: JsonOpt = False,
) -> None:
    """Show a machine: CPUs, sockets, NUMA nodes, caches, cost model and sources."""
    from mmsim.machine import get_machine, machine_to_dict
    from mmsim.report.text import format_machine

    m = get_machine(name)
    if json_out:
        # exactly the machine file's schema, so that the output is a machine file again
        # (`mmsim machine show X --json > m.json && mmsim machine show m.json`); CPUs = sockets x cores x threads
        _emit_json(machine_to_dict(m))
    else:
        _emit(format_machine(m))


kernels_app = typer.Typer(help="List the kernels and patches; show one kernel; diff two.",
                          invoke_without_command=True)
app.add_typer(kernels_app, name="kernels")
KernelArg = Annotated[str, typer.Argument(help="Kernel: a name, BASE+PATCH+... or a kernel YAML file.",
                                          autocompletion=complete_kernel)]


@kernels_app.callback()
def kernels_cmd(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """List the kernels (named policy sets) and the patches (named deltas); fits 100 columns."""
    if ctx.invoked_subcommand is not None:
        return
    from mmsim.kernels import list_kernels, list_patches
    from mmsim.report.catalogue import kernels_doc

    if json_out:
        _emit_json({"kernels": [{"name": k.name, "base": k.base, "patches": list(k.patches),
                                 "description": k.description, "policies": k.policies} for k in list_kernels()],
                    "patches": [{"commit": p.commit, "subject": p.subject, "version": p.version,
                                 "changes": p.changes} for p in list_patches()]})
        return
    _emit(kernels_doc(list_kernels(), list_patches()))


def _kernel_info(text: str) -> tuple[Any, str, list[Any]]:
    """(resolved kernel, description, its patches as Patch objects) of a kernel as users write it."""
    from mmsim.kernels.catalog import KERNELS, Patch, lookup_patch, resolve_kernel, split_kernel

    k = resolve_kernel(text)
    base, extra = split_kernel(text)
    desc = KERNELS[base].description if base in KERNELS else ""
    pats = [lookup_patch(x) for x in extra]
    by_id = {p.commit: p for p in pats}
    from mmsim.kernels.catalog import PATCHES

    return k, desc, [PATCHES.get(c) or by_id.get(c) or Patch(c, "", {}) for c in k.patches]


@kernels_app.command("show")
def kernels_show_cmd(kernel: KernelArg, json_out: JsonOpt = False) -> None:
    """One kernel: its patches and every policy, with the patch that set it."""
    from mmsim.kernels.catalog import KERNELS, PATCHES
    from mmsim.report.catalogue import kernel_doc, policy_source

    k, desc, pats = _kernel_info(kernel)
    src = policy_source(k.policies, KERNELS["v3.12"].policies, k.patches, {**PATCHES, **{p.commit: p for p in pats}})
    if json_out:
        _emit_json({"kernel": k.name, "description": desc, "patches": [p.commit for p in pats],
                    "policies": k.policies, "set_by": src})
        return
    _emit(kernel_doc(k.name, desc, k.policies, src, pats))


@kernels_app.command("diff")
def kernels_diff_cmd(a: KernelArg, b: KernelArg, json_out: JsonOpt = False) -> None:
    """What separates kernel B from kernel A: the policies that differ and the commits behind them."""
    from mmsim.report.catalogue import diff_doc

    ka, _, pa = _kernel_info(a)
    kb, _, pb = _kernel_info(b)
    only_a = [p for p in pa if p.commit not in kb.patches]
    only_b = [p for p in pb if p.commit not in ka.patches]
    if json_out:
        _emit_json({"a": ka.name, "b": kb.name,
                    "policies": {n: [ka.policies.get(n), kb.policies.get(n)]
                                 for n in dict.fromkeys([*ka.policies, *kb.policies])
                                 if ka.policies.get(n) != kb.policies.get(n)},
                    "only_a": [p.commit for p in only_a], "only_b": [p.commit for p in only_b]})
        return
    _emit(diff_doc(ka.name, kb.name, ka.policies, kb.policies, only_a, only_b))


@app.command("policies")
def policies_cmd(json_out: JsonOpt = False) -> None:
    """Every kernel policy: its type, allowed values or range (the kernel's bounds) and kernel source."""
    from mmsim.kernels.catalog import KERNELS, POLICIES
    from mmsim.report.catalogue import policies_doc, policies_json

    defaults = KERNELS["v3.12"].policies
    if json_out:
        _emit_json(policies_json(POLICIES.values(), defaults))
        return
    _emit(policies_doc(POLICIES.values(), defaults))


workloads_app = typer.Typer(help="List the workloads; show one workload's -p parameters.",
                            invoke_without_command=True)
app.add_typer(workloads_app, name="workloads")


@workloads_app.callback()
def workloads_cmd(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """List the workloads and their -p parameter names (fits 100 columns); --json: every parameter in full."""
    if ctx.invoked_subcommand is not None:
        return
    from mmsim.report.catalogue import workloads_doc, workloads_json
    from mmsim.workloads import list_workloads

    if json_out:
        _emit_json(workloads_json(list_workloads()))
        return
    _emit(workloads_doc(list_workloads()))


@workloads_app.command("show")
def workloads_show_cmd(
    workload: Annotated[str, typer.Argument(help="Workload name (see `mmsim workloads`).",
                                            autocompletion=complete_workload)],
    json_out: JsonOpt = False,
) -> None:
    """One workload: each -p parameter with its default, allowed values and help."""
    from mmsim.report.catalogue import workload_show_doc, workloads_json
    from mmsim.workloads import get_workload

    w = get_workload(workload)
    if json_out:
        _emit_json(workloads_json([w])[0])
        return
    _emit(workload_show_doc(w))


# -- running -----------------------------------------------------------------------

ExactOpt = Annotated[
    bool,
    typer.Option("--exact", help="Every operation an event: no fast-forward of steady states (slower)."),
]


@app.command("run")
def run_cmd(
    workload: Annotated[str, typer.Argument(help="Workload name (see `mmsim workloads`).",
                                            autocompletion=complete_workload)],
    machine: Annotated[
        str | None, typer.Option("--machine", "-m", help="Preset name or machine YAML file.",
                                 autocompletion=complete_machine)
    ] = None,
    kernel: Annotated[str | None, typer.Option(
        "--kernel", "-k", help="Kernel: a name, BASE+PATCH+... or a kernel YAML file.",
        autocompletion=complete_kernel)] = None,
    patch: Annotated[list[str] | None, typer.Option(
        "--patch", help="Apply a patch (commit id or patch YAML file) on top of the kernel (repeatable).")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a kernel policy: policy=value (repeatable).")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Workload parameter: name=value (repeatable).")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="Run seed (-r N: seeds seed..seed+N-1).")] = None,
    repeat: Annotated[int, typer.Option("--repeat", "-r", min=1,
                                        help="perf stat -r: N runs, mean and ( +- x% ).")] = 1,
    csv_sep: Annotated[str | None, typer.Option(
        "--field-separator", "-x", help="perf stat -x SEP: print only perf's CSV, fields split by SEP.")] = None,
    perf_json: Annotated[bool, typer.Option("--json-output", "-j", help="perf stat -j: perf's JSON lines only.")]
    = False,
    noise: Annotated[bool | None, typer.Option(
        "--noise/--no-noise", help="Run-to-run variation from modelled sources (task start skew, timer ticks, "
        "device IRQs: docs/noise.md), seeded per run; default: on with -r N > 1, as perf stat -r is for "
        "spread.")] = None,
    store: cli_workflow.StoreOpt = None,
    no_store: cli_workflow.NoStoreOpt = False,
    progress: cli_workflow.ProgressOpt = None,
    max_events: cli_workflow.MaxEventsOpt = None,
    max_memory: cli_workflow.MaxMemoryOpt = None,
    force: cli_workflow.ForceOpt = False,
    exact: ExactOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run one workload on one machine under one kernel; print perf stat, the benchmark's metrics,
    the profile and lock_stat. The run is kept in the results store unless --no-store.

    Examples: mmsim run lockstress -m tiny -x,   |   mmsim run will-it-scale/page_fault1 --set pcp_batch=127
    """
    from mmsim.experiments.run import RunSpec
    from mmsim.kernels.catalog import split_kernel

    if csv_sep is not None and (not csv_sep or perf_json or json_out):
        raise UserError("-x", csv_sep, "a non-empty separator, without -j or --json")
    if perf_json and json_out:
        raise UserError("-j", "with --json", "one of -j (perf's JSON lines) and --json (mmsim's JSON)")
    kwargs: dict[str, Any] = {
        "workload": workload,
        "patches": tuple(patch or ()),
        "policies": parse_assignments("--set", set_),
        "params": parse_assignments("-p/--param", param),
    }
    if kernel is not None:  # BASE+PATCH+...: the base, and the patches before any --patch
        base, extra = split_kernel(kernel)
        kwargs["kernel"], kwargs["patches"] = base, (*extra, *kwargs["patches"])
    if noise or (noise is None and repeat > 1):
        kwargs["noise"] = True
    # Only what the user gave: RunSpec owns the defaults.
    for key, value in (("machine", machine), ("seed", seed)):
        if value is not None:
            kwargs[key] = value
    if exact:
        kwargs["exact"] = True

    from mmsim.cli_progress import ProgressView
    from mmsim.experiments.run import run_repeated
    from mmsim.report import perfstat
    from mmsim.report.text import command_line, format_run

    spec = RunSpec(**kwargs)
    view = ProgressView(f"run {workload}", progress)
    with cli_workflow.guard_limits(max_events, max_memory, force), view:
        cli_workflow.check_repeats(repeat, spec.seed, f"run {workload}", "-r/--repeat")
        results = run_repeated(spec, repeat, cli_workflow._store(store, no_store), view.hook)
    dicts = [r.to_dict() for r in results]
    if csv_sep is not None:
        sys.stdout.write(perfstat.csv(dicts, csv_sep))
    elif perf_json:
        sys.stdout.write(perfstat.json_lines(dicts))
    elif json_out:
        _emit_json(dicts[0] if repeat == 1 else dicts)
    else:
        sys.stdout.write(perfstat.text(dicts, command_line(dicts[0])))
        _emit(format_run(dicts, perf_block=False))


@app.command("reproduce")
def reproduce_cmd(
    ids: Annotated[
        list[str] | None, typer.Argument(help="Experiment ids (default: all).", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Run seed.")] = 0,
    store: cli_workflow.StoreOpt = None,
    no_store: cli_workflow.NoStoreOpt = False,
    progress: cli_workflow.ProgressOpt = None,
    max_events: cli_workflow.MaxEventsOpt = None,
    max_memory: cli_workflow.MaxMemoryOpt = None,
    force: cli_workflow.ForceOpt = False,
    exact: ExactOpt = False,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Processes for the arms (default: the CPUs; 1 = serial).")
    ] = None,
    noise: cli_workflow.NoiseOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run both arms of the seed experiments: published vs simulated vs band. Every arm's run is
    kept in the results store unless --no-store. With --noise (and --seed N for another draw) every
    arm has the modelled timer ticks, device IRQs and start skew: whether a result depends on a
    noiseless run's lock-step.

    Exits 0 when the experiments ran, also when a result lands outside its
    band: that is reported in the verdict (and as "ok": false in JSON), not
    hidden behind an exit code.
    """
    from mmsim.cli_progress import ProgressView
    from mmsim.experiments.reproduce import reproduce
    from mmsim.report.text import format_outcomes

    view = ProgressView("reproduce", progress)
    extra: dict[str, Any] = {"exact": True} if exact else {}
    if noise:
        extra["noise"] = True
    if workers is not None:
        extra["workers"] = workers
    with cli_workflow.guard_limits(max_events, max_memory, force), view:
        cli_workflow.check_seeds(seed, 1, "--seed", seed, "one seed")
        cli_workflow.check_workers(workers)
        st = cli_workflow._store(store, no_store)
        if st is not None:
            st.count()  # a bad --store fails before anything runs
        results = reproduce(ids or None, seed, st, view.hook, **extra)
    outcomes = [o.to_dict() for o in results]
    if json_out:
        _emit_json(outcomes)
        return
    for d, o in zip(outcomes, results, strict=True):
        d.setdefault("notes", list(getattr(o, "notes", None) or ()))
    _emit(format_outcomes(outcomes))


# -- entry point ---------------------------------------------------------------------


MAX_TOKEN_CHARS = 120  # a usage error quotes at most this much of one word (click echoes a value whole)


def _clip(message: str) -> str:
    """``message`` with each word longer than :data:`MAX_TOKEN_CHARS` cut (``mmsim completion <5000 x>``)."""
    return " ".join(w if len(w) <= MAX_TOKEN_CHARS else w[: MAX_TOKEN_CHARS - 3] + "..." for w in message.split())


def _fail(message: str, code: int = 2) -> int:
    try:
        sys.stderr.write("mmsim: error: " + " ".join(message.split()) + "\n")
        sys.stderr.flush()
    except OSError:  # stderr closed or full (2>/dev/full): the exit code still tells
        _to_devnull(sys.stderr)
    return code


class _ClosedStream(io.TextIOBase):
    """Stands in for a standard stream whose descriptor was closed at start (``mmsim machines >&-``):
    Python then sets ``sys.stdout`` to None. Writing fails like write(2) on a closed descriptor."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def isatty(self) -> bool:
        return False


# write(2) errors of stdout/stderr themselves: closed (EBADF), full (ENOSPC, EDQUOT), device error (EIO)
_STREAM_ERRNOS = (errno.EBADF, errno.ENOSPC, errno.EDQUOT, errno.EIO)


def _to_devnull(stream: Any) -> None:
    """Point a failed standard stream's descriptor at /dev/null so that the interpreter's final flush of
    what is still buffered does not fail again (and print "Exception ignored")."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    if fd in (1, 2):
        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit code.

    A closed or full stdout ends the command with one line on stderr and exit code 1, as ``cat`` does;
    with stderr closed or full, bad input still exits 2 (the message is lost).
    """
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # for the life of the process
    if sys.stdout is None:
        sys.stdout = _ClosedStream()
    try:
        rv = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # `mmsim ... | head`: the reader left. Point stdout at /dev/null so the
        # interpreter's final flush does not complain, and exit as SIGPIPE would.
        _to_devnull(sys.stdout)
        return 141
    except OSError as e:
        if e.errno not in _STREAM_ERRNOS or e.filename is not None:
            raise
        _to_devnull(sys.stdout)
        return _fail(f"write error: {e.strerror}", 1)
    return rv


def _flow(paragraph: str) -> str:
    """One help paragraph as one line for the terminal to wrap, unless its lines are laid out on purpose
    (click's ``\\b`` marker, an indented line, a list item)."""
    lines = paragraph.split("\n")
    if paragraph.startswith("\b") or any(ln[:1].isspace() or ln.lstrip().startswith(("- ", "* ")) for ln in lines[1:]):
        return paragraph
    return " ".join(paragraph.split())


def _short_helps(group: Any) -> None:
    """A command list shows each command's first paragraph as one line, and a command's help flows each
    paragraph as one: rich markup mode keeps a docstring's line breaks inside a paragraph, which broke the
    list's descriptions and the later paragraphs of ``--help`` mid-sentence."""
    for sub in getattr(group, "commands", {}).values():
        if sub.short_help is None and sub.help:
            sub.short_help = " ".join(sub.help.split("\n\n", 1)[0].split())
        if sub.help:
            sub.help = "\n\n".join(_flow(p) for p in sub.help.strip().split("\n\n"))
        _short_helps(sub)


def _main(argv: Sequence[str] | None) -> int:
    command = typer.main.get_command(app)
    _short_helps(command)
    args = list(sys.argv[1:] if argv is None else argv) or ["--help"]
    try:
        rv = command.main(args=args, prog_name="mmsim", standalone_mode=False)
    except UserError as e:
        return _fail(str(e))
    except RunFailure as e:
        return _fail(str(e), 1)
    except typer.TyperException as e:
        # typer >= 0.29 vendors click: every usage error (bad option, missing
        # argument, bad value) derives from the public TyperException.
        return _fail(_clip(e.format_message()) or "COMMAND: missing; allowed: one of the commands listed above")
    except typer.Abort:
        return _fail("aborted", 130)
    return rv if isinstance(rv, int) else 0
