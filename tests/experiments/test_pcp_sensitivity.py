"""benchmarks/pcp_sensitivity.py: its variants parse strictly and leave the model as they found it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import mmsim.locks.base as lbase
import mmsim.net.skbuff as skbuff
from mmsim.mm.page_alloc import PageAllocator

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pcp_sensitivity.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pcp_sensitivity", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_variant_names_parse_strictly() -> None:
    s = _script()
    for ok in ("model", "cs+0", "cs+450", "handoff-2x", "handoff-0.5x", "copy-1.6x"):
        assert s.variant(ok) is not None, ok
    for bad in ("", "nope", "cs+", "cs+-3", "cs+1.5", "copy-x", "copy-0x", "copy-infx", "copy-nanx", "copy-0.01x",
                "handoff-2"):
        assert s.variant(bad) is None, bad


def test_variants_change_only_inside_and_restore_the_model() -> None:
    s = _script()
    charge, costs, copy = PageAllocator._charge_cs, lbase.line_costs, skbuff.copy_ns
    for name in ("cs+300", "handoff-3x", "copy-2.4x"):
        make = s.variant(name)
        with make():
            changed = (PageAllocator._charge_cs is not charge, lbase.line_costs is not costs,
                       skbuff.copy_ns is not copy)
            assert sum(changed) == 1, (name, changed)
        assert PageAllocator._charge_cs is charge and lbase.line_costs is costs and skbuff.copy_ns is copy


def test_copy_variant_puts_its_lines_in_flight_whatever_the_machine_has() -> None:
    """copy-2.4x: 24 lines in flight, i.e. the 100 ns per line of a 64-line copy at 10 becomes 41.67."""
    from types import SimpleNamespace

    s = _script()
    sysm = SimpleNamespace(machine=SimpleNamespace(cost=SimpleNamespace(copy_mlp=10.0)))
    assert skbuff.copy_ns(sysm, 0, 64 * 64, 1000.0) == 6401  # 64 lines x 1000 ns / 10, + 1
    with s.variant("copy-2.4x")():
        assert skbuff.copy_ns(sysm, 0, 64 * 64, 1000.0) == int(64 * 1000.0 / 24) + 1


def test_lines_counts_without_changing_a_cost(tiny: Any) -> None:
    """--lines: the same ns as the model, split by function and distance; the methods restored."""
    from mmsim.kernels import resolve
    from mmsim.mm.buddy import MIGRATE_MOVABLE
    from mmsim.mm.system import System

    s = _script()
    pa = System(tiny, resolve("v6.6"), 0).page_alloc
    z = pa.zones[0]
    line, lines_op = PageAllocator._line, PageAllocator._lines_op
    acc: dict[tuple[str, str], list[float]] = {}
    with s._lines(acc):
        pa._cs = 0.0
        pa._rmqueue_smallest(z, 1, 0, MIGRATE_MOVABLE)  # splits the order-10 block at pfn 0
        cs = pa._cs
    assert PageAllocator._line is line and PageAllocator._lines_op is lines_op
    assert sum(ns for _, ns in acc.values()) == cs
    # struct pages: the block and its 10 split halves, no table remembers them
    assert acc[("_rmqueue_smallest", "no table")][0] == 11
    assert sum(n for (site, _), (n, _) in acc.items() if site == "zone:_rmqueue_smallest") == pa.zone_lines
