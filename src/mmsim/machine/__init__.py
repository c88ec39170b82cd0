"""Machines: topology, caches, NUMA nodes, cost model, presets and YAML files."""

from __future__ import annotations

from mmsim.machine.host import detect_host
from mmsim.machine.model import CacheLevel, CostModel, Machine, MemoryType, NumaNode, Socket
from mmsim.machine.presets import PRESETS, get_machine, list_machines
from mmsim.machine.yamlio import dict_to_machine, dump_machine, load_machine, machine_to_dict, save_machine

__all__ = [
    "PRESETS",
    "CacheLevel",
    "CostModel",
    "Machine",
    "MemoryType",
    "NumaNode",
    "Socket",
    "detect_host",
    "dict_to_machine",
    "dump_machine",
    "get_machine",
    "list_machines",
    "load_machine",
    "machine_to_dict",
    "save_machine",
]
