"""Shared fixtures: the ``tiny`` machine and small builders of engine/lock contexts.

``tiny``: 2 sockets × 2 cores × 2 threads = 8 CPUs at 1.0 GHz (1 ns = 1 cycle).
CPU numbering is Linux-Intel style: CPU ``c`` is core ``c % 4``, SMT thread
``c // 4``; cores 0, 1 are on socket 0 (node 0) and cores 2, 3 on socket 1
(node 1). So CPUs 0, 1, 4, 5 are socket 0 and 2, 3, 6, 7 socket 1, and the SMT
siblings are ``c`` and ``c + 4``. Line transfers: SMT sibling 10 ns, same
socket 50 ns, other socket 200 ns (× distance 20 / nearest remote 20 = 1).

The fixture prefers the preset (``mmsim.machine.get_machine("tiny")``) and
falls back to an identical machine built here while the preset is missing;
``tests/engine/test_tiny_machine.py`` checks the two are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mmsim.engine.core import Engine
from mmsim.engine.cpu import Scheduler
from mmsim.locks.base import LockContext
from mmsim.machine.model import CacheLevel, CostModel, Machine, MemoryType, NumaNode, Socket
from mmsim.metrics.counters import Counters

if TYPE_CHECKING:
    from mmsim.experiments.reproduce import Outcome


def build_tiny() -> Machine:
    """The ``tiny`` preset's spec, built from the model dataclasses."""
    return Machine(
        name="tiny",
        description="test machine: 2 sockets x 2 cores x 2 threads = 8 CPUs at 1 GHz (1 ns = 1 cycle)",
        freq_ghz=1.0,
        sockets=tuple(Socket(id=i, cores=2, threads_per_core=2, node=i) for i in range(2)),
        caches=(
            CacheLevel("L1d", 32, 8, 64, 2, 4.0),
            CacheLevel("L2", 256, 8, 64, 2, 12.0),
            CacheLevel("L3", 1024, 16, 64, 4, 40.0),
        ),
        nodes=tuple(NumaNode(i, 1.0, MemoryType.DRAM, 100.0, 20.0, 10.0, i) for i in range(2)),
        distances=((10, 20), (20, 10)),
        cost=CostModel(
            line_xfer_smt_ns=10.0,
            line_xfer_socket_ns=50.0,
            line_xfer_remote_ns=200.0,
            core_clear_gbs=10.0,
            ctx_switch_ns=2000.0,
            wakeup_ns=5000.0,
            page_fault_ns=1000.0,
            smt_thread_speed=0.5,
        ),
    )


def preset_tiny() -> Machine | None:
    """``get_machine("tiny")`` if the preset module is importable, else None."""
    try:
        from mmsim.machine import get_machine
    except ImportError:
        return None
    return get_machine("tiny")


@pytest.fixture
def tiny() -> Machine:
    return preset_tiny() or build_tiny()


@pytest.fixture
def use_tiny_preset(monkeypatch: pytest.MonkeyPatch, tiny: Machine) -> Machine:
    """Make ``mmsim.experiments.run.run`` find ``tiny`` even while the preset
    registry is missing (it looks the machine up as ``mmsim.machine.get_machine``)."""
    import mmsim.machine

    if not hasattr(mmsim.machine, "get_machine"):

        def get_machine(name: str) -> Machine:
            assert name == "tiny", name
            return tiny

        monkeypatch.setattr(mmsim.machine, "get_machine", get_machine, raising=False)
    return tiny


@dataclass
class Rig:
    """An engine + counters + scheduler + lock context on one machine."""

    engine: Engine
    counters: Counters
    sched: Scheduler
    ctx: LockContext


@pytest.fixture
def make_rig(tiny: Machine) -> Callable[[], Rig]:
    def make() -> Rig:
        engine = Engine(0)
        counters = Counters(tiny.ncpus)
        c = tiny.cost
        sched = Scheduler(engine, tiny.ncpus, counters, int(c.ctx_switch_ns), int(c.wakeup_ns))
        return Rig(engine, counters, sched, LockContext(engine, tiny, counters, sched))

    return make


@pytest.fixture(autouse=True)
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own results store (``$MMSIM_RESULTS`` in tmp_path): ``run`` and ``reproduce``
    store their runs, and a test must never write to the user's store."""
    p = tmp_path / "results.duckdb"
    monkeypatch.setenv("MMSIM_RESULTS", str(p))
    return p


_OUTCOMES: dict[str, Outcome] = {}


def reproduce_once(exp_id: str, reproduce: Callable[[list[str]], list[Outcome]] | None = None) -> Outcome:
    """``reproduce([exp_id])`` at full published scale, computed once per test session: the slow tests of
    tests/experiments and the README's ``mmsim reproduce ID`` lines (tests/docs/test_readme.py) share it,
    so CI's slow step simulates each experiment once instead of twice (a run depends only on its spec and
    seed). Only for full-scale callers: a test that patches the presets must call ``reproduce`` itself.
    ``reproduce``: the function to compute it with (a caller that has patched the module's own passes the
    original)."""
    if exp_id not in _OUTCOMES:
        if reproduce is None:
            from mmsim.experiments import reproduce as rp

            reproduce = rp.reproduce
        (_OUTCOMES[exp_id],) = reproduce([exp_id])
    return _OUTCOMES[exp_id]


def remember(outcomes: list[Outcome]) -> None:
    """Outcomes of a full-scale ``reproduce`` of several experiments (seed 0, the default mode), kept for
    :func:`reproduce_once`: the README's ``mmsim reproduce`` (all of them) runs first in CI's slow step, and
    its ``mmsim reproduce ID`` lines and tests/experiments' slow tests then reuse its runs."""
    for o in outcomes:
        _OUTCOMES.setdefault(o.id, o)


def cli_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of ``mmsim ARGV``, which must exit 2 (and print no progress line before it): the
    bad-input contract of docs/reliability.md."""
    from mmsim.cli import main

    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("mmsim: error: "), (code, err[:500])
    return err

