"""Presets: every machine builds, has the published counts, and names its sources."""

from __future__ import annotations

import dataclasses

import pytest

from mmsim.errors import UserError
from mmsim.machine import (
    PRESETS,
    CostModel,
    Machine,
    MemoryType,
    get_machine,
    list_machines,
    save_machine,
)
from mmsim.machine.presets import uv2000_distance

NAMES = [
    "xeon-e5-2699v3-2s",
    "sgi-uv2000-512",
    "westmere-ex-4s",
    "cascadelake-optane-2s",
    "icelake-6338-2s",
    "sapphirerapids-8480-2s",
    "xeon-phi-7295",
    "skylake-8170-2s",
    "cooperlake-8380h-4s",
    "host",
    "tiny",
    "haswell-ex-4s",
    "tiny-pmem",
]
COST_FIELDS = [f.name for f in dataclasses.fields(CostModel) if f.name != "sources"]


def test_registry_has_exactly_the_listed_presets() -> None:
    assert sorted(PRESETS) == sorted(NAMES)
    assert [n for n, _ in list_machines()] == list(PRESETS)
    assert all(desc for _, desc in list_machines())


@pytest.mark.parametrize("name", NAMES)
def test_preset_builds_once(name: str) -> None:
    m = get_machine(name)
    assert isinstance(m, Machine)
    assert get_machine(name) is m  # built once
    assert m.ncpus == len(m.sockets) * m.sockets[0].cores * m.sockets[0].threads_per_core
    for cpu in (0, m.ncpus - 1):
        assert 0 <= m.cpu_node(cpu) < len(m.nodes)
    assert m.cache("L3").shared_by <= m.ncpus


@pytest.mark.parametrize(
    ("name", "cpus", "sockets", "nodes", "ghz", "l3_kib"),
    [
        ("xeon-e5-2699v3-2s", 72, 2, 2, 2.3, 45 * 1024),
        ("sgi-uv2000-512", 1024, 64, 64, 2.4, 20 * 1024),
        ("westmere-ex-4s", 80, 4, 4, 2.4, 30 * 1024),
        ("cascadelake-optane-2s", 96, 2, 4, 2.4, 36608),
        ("icelake-6338-2s", 128, 2, 2, 2.0, 48 * 1024),
        ("xeon-phi-7295", 288, 1, 1, 1.5, 16 * 1024 * 1024),
        ("skylake-8170-2s", 104, 2, 2, 2.1, 36608),  # "104 threads 2 sockets (Skylake) with 192G memory"
        ("cooperlake-8380h-4s", 224, 4, 4, 2.9, 39424),  # "224 threads 4 sockets ... 8380H ... 192G"
        ("tiny", 8, 2, 2, 1.0, 1024),
    ],
)
def test_published_counts(name: str, cpus: int, sockets: int, nodes: int, ghz: float, l3_kib: int) -> None:
    m = get_machine(name)
    assert (m.ncpus, len(m.sockets), len(m.nodes), m.freq_ghz) == (cpus, sockets, nodes, ghz)
    assert m.cache("L3").size_kib == l3_kib


def test_l3_sharing_and_sizes() -> None:
    assert get_machine("xeon-e5-2699v3-2s").cache("L3").shared_by == 36
    assert get_machine("xeon-e5-2699v3-2s").cache("L3").ways == 20
    assert get_machine("icelake-6338-2s").cache("L2").size_kib == 1280
    assert get_machine("icelake-6338-2s").cache("L1d").size_kib == 48
    phi = get_machine("xeon-phi-7295")
    assert phi.cache("L2").shared_by == 8  # a 2-core tile
    assert phi.cache("L3").shared_by == 288  # MCDRAM memory-side cache
    assert phi.nodes[0].memory_gib == 80
    assert sum(n.memory_gib for n in get_machine("westmere-ex-4s").nodes) == 128
    assert all(n.memory_gib == 64 for n in get_machine("sgi-uv2000-512").nodes)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "host"])
def test_every_cost_and_part_has_a_source(name: str) -> None:
    m = get_machine(name)
    assert set(COST_FIELDS) <= set(m.cost.sources)
    assert all(m.cost.sources[f] for f in COST_FIELDS)
    assert m.sources


def test_host_sources_mark_estimates() -> None:
    m = get_machine("host")
    assert all(m.cost.sources[f].startswith("uncalibrated host; estimate") for f in COST_FIELDS)


def test_tiny_exact_values() -> None:
    m = get_machine("tiny")
    # CPU c is core c % 4, SMT thread c // 4; cores 0-1 on socket 0, 2-3 on socket 1.
    assert m.xfer_ns(0, 0) == 0.0
    assert m.xfer_ns(0, 4) == 10.0  # SMT sibling
    assert m.xfer_ns(0, 1) == 50.0  # same socket
    assert m.xfer_ns(0, 5) == 50.0  # other core's sibling, same socket
    assert m.xfer_ns(0, 2) == 200.0  # other socket
    assert m.xfer_ns(6, 1) == 200.0
    assert [m.cpu_node(c) for c in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert m.llc_share_bytes() == 1024 * 1024 // 4
    assert m.distances == ((10, 20), (20, 10))
    assert (m.nodes[0].latency_ns, m.nodes[0].read_bw_gbs, m.nodes[0].write_bw_gbs) == (100.0, 20.0, 10.0)
    c = m.cost
    assert (c.core_clear_gbs, c.ctx_switch_ns, c.wakeup_ns, c.page_fault_ns) == (10.0, 2000.0, 5000.0, 1000.0)


def test_uv2000_distances_follow_blades_and_irus() -> None:
    m = get_machine("sgi-uv2000-512")
    d = m.distances
    assert all(d[i][i] == 10 for i in range(64))
    assert all(d[i][j] == d[j][i] for i in range(64) for j in range(64))
    same_blade, same_iru, other_iru = d[0][1], d[0][2], d[0][16]
    assert 10 < same_blade < same_iru < other_iru
    assert d[14][15] == same_blade and d[2][15] == same_iru and d[15][16] == other_iru
    assert uv2000_distance(63, 62) == same_blade
    # hand-offs scale with SLIT: farther blades cost more than the same-blade QPI hop
    assert m.xfer_ns(0, 8) == m.cost.line_xfer_remote_ns  # CPU 8 = socket 1, same blade
    assert m.xfer_ns(0, 16) == pytest.approx(m.cost.line_xfer_remote_ns * same_iru / same_blade)
    assert m.xfer_ns(0, 16 * 8) > m.xfer_ns(0, 16)


def test_cascadelake_pmem_nodes() -> None:
    m = get_machine("cascadelake-optane-2s")
    assert [n.mem_type for n in m.nodes] == [MemoryType.DRAM] * 2 + [MemoryType.PMEM] * 2
    assert [n.socket for n in m.nodes] == [0, 1, 0, 1]
    assert m.node_cpus(2) == [] and m.node_cpus(3) == []
    assert len(m.node_cpus(0)) == 48
    pmem, dram = m.nodes[2], m.nodes[0]
    assert pmem.latency_ns > 3 * dram.latency_ns
    assert pmem.write_bw_gbs < pmem.read_bw_gbs < dram.read_bw_gbs
    assert m.distances[0] == (10, 21, 17, 28)


def test_get_machine_unknown_name() -> None:
    with pytest.raises(UserError) as e:
        get_machine("no-such-box")
    assert e.value.field == "machine"
    assert "tiny" in e.value.allowed and "or a path to a machine YAML file" in e.value.allowed
    assert "\n" not in str(e.value)


def test_get_machine_from_yaml_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "box.yaml"
    save_machine(get_machine("tiny"), path)
    assert get_machine(str(path)) == get_machine("tiny")
    with pytest.raises(UserError):
        get_machine(str(tmp_path / "missing.yml"))


@pytest.mark.parametrize("name", ["skylake-8170-2s", "cooperlake-8380h-4s"])
def test_robot_machines_have_192g_and_uniform_one_hop_distances(name: str) -> None:
    m = get_machine(name)
    assert sum(n.memory_gib for n in m.nodes) == 192  # the robot reports: "with 192G memory"
    n = len(m.nodes)
    assert m.distances == tuple(tuple(10 if i == j else 16 for j in range(n)) for i in range(n))
    assert m.cache("L3").shared_by == m.ncpus // n
