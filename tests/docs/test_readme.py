"""README.md's command block, run line by line as written, scaled down to the ``tiny`` machine.

Each line is split at ``;`` and ``&&`` and its ``# comment`` dropped; every command must be ``mmsim ARGS
[> FILE]`` and exit 0. The fast suite runs them on ``tiny``: ``--machine X`` becomes ``--machine tiny``
and the parameters that scale with the machine (task counts, sizes) are cut to a size ``tiny`` holds,
so the line is still the same command with the same options. ``reproduce`` (published scale, minutes),
``native`` and ``calibrate``/``validate`` (they measure this host) run as written with the slow tests.
``./bin/test`` (the suite itself) is the one line not run.
The guide's blocks are run by tests/workflow/test_guide.py.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SH = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
SLOW = ("reproduce", "native", "calibrate", "validate")
# -p NAME=VALUE cut for tiny (8 CPUs, 2 GiB): task counts to 2, sizes to 16 MiB
TINY = {"threads": "2", "nr_task": "2", "tasks": "2", "pairs": "2", "bytes": "16m", "size": "16m"}


def commands() -> list[str]:
    """Every command of every ``sh`` block, ``./bin/mmsim`` spelled ``mmsim``; ``./bin/test`` (this
    test suite itself) is left out."""
    out = []
    for block in SH.findall(README.read_text()):
        for line in block.splitlines():
            line = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            out += [c.strip() for c in re.split(r";|&&", line) if c.strip()]
    out = [re.sub(r"^\./bin/mmsim\b", "mmsim", c) for c in out]
    return [c for c in out if c != "./bin/test"]


def tiny(argv: list[str]) -> list[str]:
    out = []
    it = iter(argv)
    for a in it:
        if a in ("--machine", "-m"):
            next(it)
            out += [a, "tiny"]
        elif a in ("-p", "--param"):
            name, _, value = next(it).partition("=")
            if name in TINY:
                value = ",".join(v for v in value.split(",") if v.isdigit() and int(v) <= 2) or TINY[name]
            out += [a, f"{name}={value}"]
        else:
            out.append(a)
    return out


def run(line: str, cwd: Path, scale: bool) -> None:
    from mmsim.cli import main

    argv = shlex.split(line)
    assert argv and argv[0] == "mmsim", f"README line is not an mmsim command: {line!r}"
    target = None
    if len(argv) > 2 and argv[-2] == ">":
        argv, target = argv[:-2], argv[-1]
    args = tiny(argv[1:]) if scale else argv[1:]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(args + (["--no-progress"] if args[0] in ("run", "compare", "sweep", "bisect") else []))
    assert code == 0, f"{line}: exit {code} (ran as: mmsim {' '.join(args)})"
    if target:
        (cwd / target).write_text(buf.getvalue())


def test_readme_has_the_commands() -> None:
    cmds = commands()
    assert len(cmds) >= 30
    assert not [c for c in cmds if "[" in c or "…" in c], "placeholders fail when pasted"
    assert "../shared" not in README.read_text(), "a clone has no ../shared"


def test_readme_commands_run_at_tiny_scale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MMSIM_RESULTS", str(tmp_path / "results.duckdb"))
    ran = 0
    for c in commands():
        if shlex.split(c)[1] in SLOW:
            continue
        run(c, tmp_path, scale=True)
        ran += 1
    assert ran >= 20
    for f in ("m.json", "compare.json", "sweep.json", "s.png", "c.html"):
        assert (tmp_path / f).stat().st_size > 100, f


@pytest.mark.slow
def test_readme_slow_commands_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MMSIM_RESULTS", str(tmp_path / "results.duckdb"))
    # `mmsim reproduce ID` goes through the CLI as written (options, output, exit code); the experiment's
    # simulation is the session's one run of it (conftest.reproduce_once, shared with tests/experiments'
    # slow tests), so CI does not simulate it twice. Those shared runs are not put into this test's store.
    # The README's first line, `mmsim reproduce` (all), runs them all once on the pool and its outcomes are
    # kept (conftest.remember) for the `reproduce ID` lines and the experiments' slow tests.
    import mmsim.experiments.reproduce as rp
    from conftest import remember, reproduce_once

    real = rp.reproduce

    def shared(ids: list[str] | None = None, seed: int = 0, store: Any = None, progress: Any = None,
               exact: bool = False, workers: int | None = None) -> list[Any]:
        if ids and len(ids) == 1 and seed == 0 and not exact:
            return [reproduce_once(ids[0], real)]
        out = real(ids, seed, store, progress, exact, workers)
        if seed == 0 and not exact:
            remember(out)
        return out

    monkeypatch.setattr(rp, "reproduce", shared)
    for c in commands():
        if shlex.split(c)[1] in SLOW:
            run(c, tmp_path, scale=shlex.split(c)[1] == "native")  # native: this host, a small size
