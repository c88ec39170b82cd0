"""Host detection: this machine, fake /sys trees, fallbacks and the calibrated file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmsim.machine import Machine, get_machine, save_machine
from mmsim.machine import host as hostmod
from mmsim.machine.host import detect_host, model_to_host_cpus, parse_cpulist


def test_detect_this_host() -> None:
    m = detect_host()
    assert isinstance(m, Machine) and m.name == "host"
    assert m.ncpus >= 1
    order = [c for c in model_to_host_cpus() if c >= 0]
    assert len(model_to_host_cpus()) == m.ncpus and len(order) == len(set(order))
    assert any(v.startswith("native measurement") for v in m.sources.values())


def test_parse_cpulist() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == [] and parse_cpulist(None) == []


def put(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def fake_sys(root: Path, *, adjacent_siblings: bool, nodes: bool = True, pmem: bool = False) -> None:
    """2 packages x 2 cores x 2 threads; siblings adjacent (AMD/VM style) or ncores apart (Intel)."""
    cpu = "sys/devices/system/cpu"
    put(root, f"{cpu}/online", "0-7")
    for c in range(8):
        if adjacent_siblings:
            pkg, core, sib = c // 4, (c // 2) % 2, f"{c - c % 2}-{c - c % 2 + 1}"
        else:
            pkg, core, sib = (c % 4) // 2, c % 2, f"{c % 4},{c % 4 + 4}"
        put(root, f"{cpu}/cpu{c}/topology/physical_package_id", str(pkg))
        put(root, f"{cpu}/cpu{c}/topology/core_id", str(core))
        put(root, f"{cpu}/cpu{c}/topology/thread_siblings_list", sib)
    l3_sharers = "0-3" if adjacent_siblings else "0-1,4-5"
    indexes = [
        (1, "Data", "32K", 8, "0-1"),
        (1, "Instruction", "32K", 8, "0-1"),
        (2, "Unified", "1024K", 16, "0-1"),
        (3, "Unified", "4M", 16, l3_sharers),
    ]
    for i, (level, kind, size, ways, shared) in enumerate(indexes):
        d = f"{cpu}/cpu0/cache/index{i}"
        put(root, f"{d}/level", str(level))
        put(root, f"{d}/type", kind)
        put(root, f"{d}/size", size)
        put(root, f"{d}/ways_of_associativity", str(ways))
        put(root, f"{d}/coherency_line_size", "64")
        put(root, f"{d}/shared_cpu_list", shared)
    put(root, f"{cpu}/cpu0/cpufreq/base_frequency", "2100000")
    if nodes:
        node = "sys/devices/system/node"
        lists = ["0-3", "4-7"] if adjacent_siblings else ["0-1,4-5", "2-3,6-7"]
        # sparse sysfs ids (0 and 2) must be renumbered
        ids = [0, 2] + ([3] if pmem else [])
        rows = {0: "10 21 17", 2: "21 10 28", 3: "17 28 10"} if pmem else {0: "10 21", 2: "21 10"}
        for k, nid in enumerate(ids):
            put(root, f"{node}/node{nid}/cpulist", lists[k] if k < 2 else "")
            put(root, f"{node}/node{nid}/meminfo", f"Node {nid} MemTotal:       {(k + 1) * 1048576} kB")
            put(root, f"{node}/node{nid}/distance", rows[nid])
    put(root, "proc/cpuinfo", "model name\t: Fake CPU @ 9.99GHz\ncpu MHz\t\t: 1234.0")


@pytest.mark.parametrize("adjacent", [True, False])
def test_fake_two_socket_host(tmp_path: Path, adjacent: bool) -> None:
    fake_sys(tmp_path, adjacent_siblings=adjacent)
    m = detect_host(tmp_path)
    assert (len(m.sockets), m.sockets[0].cores, m.sockets[0].threads_per_core) == (2, 2, 2)
    assert m.freq_ghz == 2.1  # cpufreq base_frequency wins over /proc/cpuinfo
    assert [n.memory_gib for n in m.nodes] == [1.0, 2.0]
    assert m.distances == ((10, 21), (21, 10))
    assert m.cache("L3").size_kib == 4096 and m.cache("L3").shared_by == 4
    assert m.cache("L2").size_kib == 1024
    # model CPU order is Linux-Intel: siblings ncores apart
    order = model_to_host_cpus(tmp_path)
    assert order == ([0, 2, 4, 6, 1, 3, 5, 7] if adjacent else [0, 1, 2, 3, 4, 5, 6, 7])
    assert "Fake CPU" in m.description


def test_fake_host_with_cpuless_node(tmp_path: Path) -> None:
    fake_sys(tmp_path, adjacent_siblings=True, pmem=True)
    m = detect_host(tmp_path)
    assert len(m.nodes) == 3 and m.node_cpus(2) == []
    assert m.nodes[2].socket == 0  # nearest CPU node is node 0 (distance 17)
    assert m.distances[2] == (17, 28, 10)


def test_missing_files_fall_back(tmp_path: Path) -> None:
    put(tmp_path, "proc/meminfo", "MemTotal:        2097152 kB")
    m = detect_host(tmp_path)  # no /sys at all, no cpuinfo
    assert len(m.sockets) == 1 and len(m.nodes) == 1
    assert m.nodes[0].memory_gib == 2.0
    assert m.freq_ghz == hostmod.DEFAULT_GHZ
    assert m.sources["freq_ghz"].startswith("estimate")
    assert m.sources["caches.L3"].startswith("estimate")


def test_no_node_dir_uses_proc_meminfo(tmp_path: Path) -> None:
    fake_sys(tmp_path, adjacent_siblings=False, nodes=False)
    put(tmp_path, "proc/meminfo", "MemTotal:        4194304 kB")
    m = detect_host(tmp_path)
    assert len(m.sockets) == 2 and len(m.nodes) == 1 and m.nodes[0].memory_gib == 4.0
    assert all(s.node == 0 for s in m.sockets)


def test_calibrated_file_replaces_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert hostmod.config_path() == tmp_path / "mmsim" / "host.yaml"
    assert hostmod.host_machine().name == "host"
    path = tmp_path / "mmsim" / "host.yaml"
    path.parent.mkdir()
    save_machine(get_machine("tiny"), path)
    assert hostmod.host_machine() == get_machine("tiny")
