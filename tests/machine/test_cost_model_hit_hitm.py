"""CostModel: clean (HIT) vs modified (HITM) line costs, remote DRAM latency on the node."""

from __future__ import annotations

import dataclasses

import pytest

from mmsim.machine import dict_to_machine, get_machine, machine_to_dict


def test_icelake_distinguishes_clean_and_modified_lines() -> None:
    m = get_machine("icelake-6338-2s")
    assert m.xfer_ns(0, 1, modified=True) == 51.1  # KCORES Platinum 8358, same socket
    assert m.xfer_ns(0, 32, modified=True) == 110.9  # cross socket
    assert m.xfer_ns(0, 64, modified=True) == 8.1  # SMT sibling
    assert m.xfer_ns(0, 1, modified=False) == pytest.approx(51.1 * 60.1 / 64.2, abs=0.01)
    assert m.xfer_ns(0, 32, modified=False) < m.xfer_ns(0, 32)
    assert m.xfer_ns(0, 64, modified=False) == 8.1  # siblings share L1d/L2: one figure
    assert m.xfer_ns(5, 5, modified=False) == 0.0


def test_unknown_clean_cost_defaults_to_the_modified_one_and_says_so() -> None:
    m = get_machine("cascadelake-optane-2s")
    assert m.cost.line_hit_socket_ns == m.cost.line_xfer_socket_ns == 47.0
    assert m.cost.sources["line_hit_socket_ns"].startswith("no clean-line figure")


def test_remote_dram_latency_is_the_nodes_not_slit() -> None:
    m = get_machine("cascadelake-optane-2s")
    assert m.mem_latency_ns(0, 0) == 81.0
    assert m.mem_latency_ns(0, 1) == 140.4  # MLC on Gold 6240; SLIT 21 would say 170.1
    assert m.mem_latency_ns(24, 0) == 140.4  # CPU 24: socket 1 (48 is CPU 0's SMT sibling)
    assert m.mem_latency_ns(48, 0) == 81.0
    assert m.mem_latency_ns(0, 3) == pytest.approx(305.0 * 28 / 17)  # PMEM: SLIT-derived
    uv = get_machine("sgi-uv2000-512")
    near, far = uv.mem_latency_ns(8, 0), uv.mem_latency_ns(16 * 8, 0)  # other blade socket, other IRU
    assert far / near == pytest.approx(uv.distances[16][0] / uv.distances[1][0])


def test_old_yaml_without_the_new_fields_still_loads() -> None:
    m = get_machine("icelake-6338-2s")
    d = machine_to_dict(m)
    assert dict_to_machine(d) == m  # round trip with the new fields
    del d["cost"]["line_hit_socket_ns"], d["cost"]["line_hit_remote_ns"]
    for n in d["nodes"]:
        del n["remote_latency_ns"]
    old = dict_to_machine(d)
    assert old.cost.line_hit_socket_ns == old.cost.line_xfer_socket_ns
    assert old.nodes[0].remote_latency_ns == pytest.approx(89.2 * 16 / 10)  # from SLIT
    with pytest.raises(ValueError, match="remote_latency_ns"):
        dataclasses.replace(m.nodes[0], remote_latency_ns=-1.0)
