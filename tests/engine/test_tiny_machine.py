"""The ``tiny`` fixture: the preset (when importable) equals the spec built in conftest."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import build_tiny, preset_tiny
from mmsim.machine.model import Machine


def test_preset_tiny_equals_spec() -> None:
    preset = preset_tiny()
    if preset is None:
        pytest.skip("mmsim.machine.get_machine is not importable yet")
    # Descriptions are prose; everything the model computes with must be equal.
    assert dataclasses.replace(preset, description="") == dataclasses.replace(build_tiny(), description="")


def test_tiny_topology(tiny: Machine) -> None:
    assert tiny.ncpus == 8 and tiny.ncores == 4 and tiny.freq_ghz == 1.0
    # CPU c -> socket ((c % 4) // 2): 0,1,4,5 on socket 0; 2,3,6,7 on socket 1.
    assert [tiny.cpu_socket(c) for c in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert [tiny.cpu_node(c) for c in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert tiny.node_cpus(0) == [0, 1, 4, 5] and tiny.node_cpus(1) == [2, 3, 6, 7]


@pytest.mark.parametrize(
    ("src", "dst", "ns"),
    [
        (0, 0, 0.0),  # same CPU: no transfer
        (0, 4, 10.0),  # SMT siblings (core 0)
        (2, 6, 10.0),  # SMT siblings (core 2)
        (0, 1, 50.0),  # cores 0 and 1, socket 0
        (5, 0, 50.0),  # core 1 and core 0, socket 0
        (0, 2, 200.0),  # socket 0 -> socket 1: 200 × SLIT 20 / nearest remote 20
        (6, 1, 200.0),
    ],
)
def test_tiny_xfer(tiny: Machine, src: int, dst: int, ns: float) -> None:
    assert tiny.xfer_ns(src, dst) == ns
