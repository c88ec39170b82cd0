"""Shell completion: ``mmsim completion SHELL`` prints typer's script; bash, sourced, completes commands and
the registries' names through the ``_MMSIM_COMPLETE`` hook (issue 21)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mmsim.cli import main

Cap = pytest.CaptureFixture[str]


@pytest.mark.parametrize(("shell", "needle"), [
    ("bash", "complete -o default -F _mmsim_completion mmsim"),
    ("zsh", "compdef _mmsim_completion mmsim"),
    ("fish", "complete --command mmsim --no-files"),
])
def test_completion_prints_the_script(capsys: Cap, shell: str, needle: str) -> None:
    assert main(["completion", shell]) == 0
    out = capsys.readouterr().out
    assert needle in out and f"_MMSIM_COMPLETE=complete_{shell}" in out


def test_completion_unknown_shell_is_one_line(capsys: Cap) -> None:
    assert main(["completion", "tcsh"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in err


def _bash_complete(tmp_path: Path, words: list[str]) -> list[str]:
    """Source `mmsim completion bash` in bash, complete the last of ``words`` as bash would (COMP_WORDS,
    COMP_CWORD), and return COMPREPLY; ``mmsim`` on PATH is this interpreter's ``-m mmsim``."""
    exe = tmp_path / "mmsim"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mmsim "$@"\n')
    exe.chmod(0o755)
    script = subprocess.run([str(exe), "completion", "bash"], capture_output=True, text=True, check=True).stdout
    words_q = " ".join(f"'{w}'" for w in words)
    prog = (f"{script}\nCOMP_WORDS=({words_q}); COMP_CWORD={len(words) - 1}; _mmsim_completion mmsim\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n')
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, env=env, check=True, timeout=60)
    return [ln for ln in out.stdout.splitlines() if ln]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completes_commands_and_names(tmp_path: Path) -> None:
    assert _bash_complete(tmp_path, ["mmsim", "comp"]) == ["compare", "completion"]
    assert _bash_complete(tmp_path, ["mmsim", "run", "lock"]) == ["lockstress", "locktorture"]
    assert _bash_complete(tmp_path, ["mmsim", "run", "lockstress", "--machine", "sgi"]) == ["sgi-uv2000-512"]
    assert _bash_complete(tmp_path, ["mmsim", "run", "lockstress", "-k", "v6.6+362"]) == ["v6.6+362d37a106dd"]
    assert _bash_complete(tmp_path, ["mmsim", "kernels", "diff", "v6."]) == ["v6.6", "v6.7", "v6.12", "v6.15"]
