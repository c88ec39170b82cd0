"""Machine YAML: exact round trips, and one-line UserErrors naming the field."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from mmsim.errors import UserError
from mmsim.machine import PRESETS, dict_to_machine, get_machine, load_machine, machine_to_dict, save_machine


@pytest.mark.parametrize("name", list(PRESETS))
def test_round_trip_every_preset(name: str, tmp_path: Path) -> None:
    m = get_machine(name)
    d = machine_to_dict(m)
    assert dict_to_machine(d) == m
    path = tmp_path / f"{name}.yaml"
    save_machine(m, path)
    back = load_machine(path)
    assert back == m
    assert back.sources == m.sources and back.cost.sources == m.cost.sources
    assert machine_to_dict(back) == d
    assert yaml.safe_load(path.read_text()) == d  # plain YAML, no python tags


def test_dict_is_plain() -> None:
    d = machine_to_dict(get_machine("cascadelake-optane-2s"))
    assert d["nodes"][2]["mem_type"] == "PMEM"
    assert isinstance(d["distances"][0], list)


def tiny_dict() -> dict[str, Any]:
    return copy.deepcopy(machine_to_dict(get_machine("tiny")))


def write(tmp_path: Path, d: Any) -> Path:
    path = tmp_path / "machine.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def error_for(tmp_path: Path, d: Any) -> UserError:
    with pytest.raises(UserError) as e:
        load_machine(write(tmp_path, d))
    assert "\n" not in str(e.value)
    return e.value


def test_unknown_key(tmp_path: Path) -> None:
    d = tiny_dict()
    d["nodes"][1]["memroy_gib"] = 4
    e = error_for(tmp_path, d)
    assert e.field.endswith("machine.yaml: nodes[1].memroy_gib")
    assert "memory_gib" in e.allowed


def test_unknown_top_level_key(tmp_path: Path) -> None:
    d = tiny_dict()
    d["frequency"] = 3
    assert error_for(tmp_path, d).field.endswith("machine.yaml: frequency")


def test_negative_size(tmp_path: Path) -> None:
    d = tiny_dict()
    d["caches"][0]["size_kib"] = -32
    e = error_for(tmp_path, d)
    assert e.field.endswith("caches[0].size_kib") and e.value == -32
    assert e.allowed == "an integer from 1 to 67108864 (KiB)"


def test_negative_memory(tmp_path: Path) -> None:
    d = tiny_dict()
    d["nodes"][1]["memory_gib"] = -1
    assert error_for(tmp_path, d).field.endswith("machine.yaml: nodes[1].memory_gib")


def test_non_square_distances(tmp_path: Path) -> None:
    d = tiny_dict()
    d["distances"] = [[10, 20], [20]]
    e = error_for(tmp_path, d)
    assert e.field.endswith("distances[1]") and "2x2" in e.allowed
    d["distances"] = [[10, 20, 30], [20, 10, 30]]
    assert error_for(tmp_path, d).field.endswith("distances[0]")
    d["distances"] = [[10, 20]]
    assert error_for(tmp_path, d).field.endswith("distances")


def test_bad_slit_values(tmp_path: Path) -> None:
    d = tiny_dict()
    d["distances"] = [[12, 20], [20, 10]]
    assert error_for(tmp_path, d).field.endswith("distances[0][0]")
    d["distances"] = [[10, 10], [20, 10]]
    assert error_for(tmp_path, d).field.endswith("distances[0][1]")


def test_malformed_yaml(tmp_path: Path) -> None:
    path = tmp_path / "machine.yaml"
    path.write_text("name: tiny\nsockets: [\n  - {id: 0\n")
    with pytest.raises(UserError) as e:
        load_machine(path)
    assert e.value.field == str(path)
    assert "a YAML mapping" in e.value.allowed
    assert "\n" not in str(e.value)


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "machine.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(UserError) as e:
        load_machine(path)
    assert "a YAML mapping" in e.value.allowed


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        load_machine(tmp_path / "nope.yaml")
    assert e.value.field.endswith("nope.yaml")


def test_missing_key(tmp_path: Path) -> None:
    d = tiny_dict()
    del d["cost"]["wakeup_ns"]
    e = error_for(tmp_path, d)
    assert e.field.endswith("cost.wakeup_ns") and "required" in e.allowed


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("caches", 1, "ways"), "eight", "caches[1].ways"),
        (("caches", 1, "ways"), True, "caches[1].ways"),
        (("caches", 1, "ways"), 8.5, "caches[1].ways"),
        (("caches", 2, "name"), "L4", "caches[2].name"),
        (("nodes", 0, "mem_type"), "HBM", "nodes[0].mem_type"),
        (("nodes", 0, "latency_ns"), float("nan"), "nodes[0].latency_ns"),
        (("cost", "ctx_switch_ns"), 0, "cost.ctx_switch_ns"),
        (("freq_ghz",), "fast", "freq_ghz"),
        (("sockets",), [], "sockets"),
        (("name",), "", "name"),
        (("sources",), ["x"], "sources"),
    ],
)
def test_wrong_types(tmp_path: Path, path: tuple[Any, ...], value: Any, field: str) -> None:
    d = tiny_dict()
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert error_for(tmp_path, d).field.endswith(f"machine.yaml: {field}")


def test_dataclass_errors_become_user_errors(tmp_path: Path) -> None:
    d = tiny_dict()
    d["sockets"][1]["id"] = 5  # Machine: socket ids must be their index
    e = error_for(tmp_path, d)
    assert e.field.endswith("sockets[1].id") and e.value == 5
    d = tiny_dict()
    d["sockets"][1]["cores"] = 3  # Machine: sockets must be identical
    assert error_for(tmp_path, d).field.endswith("machine.yaml: sockets")
    d = tiny_dict()
    d["caches"][0]["line_bytes"] = 48  # CacheLevel: power of two
    assert error_for(tmp_path, d).field.endswith("caches[0].line_bytes")
    d = tiny_dict()
    d["caches"] = d["caches"][:2]  # no L3
    assert error_for(tmp_path, d).field.endswith("machine.yaml: caches")
    d = tiny_dict()
    d["nodes"][1]["socket"] = 7
    assert error_for(tmp_path, d).field.endswith("nodes[1].socket")
    d = tiny_dict()
    d["caches"][2]["shared_by"] = 9  # more CPUs than the machine has
    assert error_for(tmp_path, d).field.endswith("caches[2].shared_by")


def test_optional_keys(tmp_path: Path) -> None:
    d = tiny_dict()
    del d["description"], d["sources"], d["cost"]["sources"]
    m = load_machine(write(tmp_path, d))
    assert m == dataclasses.replace(get_machine("tiny"), description="")
    assert m.sources == {} and m.cost.sources == {}
