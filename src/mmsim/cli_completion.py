"""Shell completion: ``mmsim completion bash|zsh|fish`` prints the script, and the value completers.

The scripts are typer's own (the protocol its completion hook in ``click``'s ``main`` answers through
``_MMSIM_COMPLETE``); ``mmsim --install-completion`` / ``--show-completion`` are typer's options for the
shell it detects. This command names the shell instead, so that a script can be made for another one
(``mmsim completion zsh > ~/.zfunc/_mmsim``). Completers list the registries' names: they import only
the registries, never build a machine or run anything.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def _starting(names: list[str], incomplete: str) -> list[str]:
    return [n for n in names if n.startswith(incomplete)]


def complete_workload(incomplete: str) -> list[str]:
    from mmsim.workloads import list_workloads

    return _starting([w.name for w in list_workloads()], incomplete)


def complete_machine(incomplete: str) -> list[str]:
    from mmsim.machine import list_machines

    return _starting([name for name, _ in list_machines()], incomplete)


def complete_kernel(incomplete: str) -> list[str]:
    """Kernel names; after ``BASE+`` the patch ids (``v6.6+362d37a106dd``)."""
    from mmsim.kernels import list_kernels, list_patches

    base, plus, rest = incomplete.rpartition("+")
    if plus:
        return [f"{base}+{p.commit}" for p in list_patches() if p.commit.startswith(rest)]
    return _starting([k.name for k in list_kernels()], incomplete)


def completion_script(shell: str) -> str:
    """The completion script of ``shell`` for the ``mmsim`` command (typer's template)."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="mmsim", complete_var="_MMSIM_COMPLETE", shell=shell)


def register(app: typer.Typer) -> None:
    @app.command("completion")
    def completion_cmd(
        shell: Annotated[Shell, typer.Argument(help="The shell: bash, zsh or fish.", show_default=False)],
    ) -> None:
        """Print the shell completion script for SHELL.

        Examples: eval "$(mmsim completion bash)"   |   mmsim completion fish > ~/.config/fish/completions/mmsim.fish
        """
        sys.stdout.write(completion_script(shell.value) + "\n")
