"""The machine file's schema as pydantic models (strict: no coercion, unknown keys refused).

:func:`mmsim.machine.yamlio.dict_to_machine` validates a user's dict with :class:`MachineSpec`, then
builds the dataclasses of :mod:`mmsim.machine.model` from it; the checks that need more than one
field (the SLIT matrix's shape against the node count, CPU ids, cache sharing) stay there. A
:class:`pydantic.ValidationError` becomes one :class:`~mmsim.errors.UserError` line through
:func:`to_user_error`: the field path (``nodes[1].memory_gib``), the value, and the allowed values
in this project's words (the ranges of :data:`RANGES` and :data:`INT_RANGES`), not pydantic's.

Bounds: generous physical ranges around real hardware by unit suffix, meant to catch typos and
hostile values (1e39 ns), not to judge a plausible machine.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from mmsim import inputs
from mmsim.errors import UserError
from mmsim.machine.model import COPY_MLP, ISSUE_WIDTH, SMT_THREAD_SPEED, WAKE_IPI_NS, CostModel, MemoryType

assert {t.value for t in MemoryType} == {"DRAM", "PMEM"}, "NodeSpec.mem_type lists MemoryType's values"

# Physical ranges by unit suffix: every *_ns, *_ghz, *_gbs, *_gib field of the machine and its cost model.
RANGES: dict[str, tuple[float, float, str]] = {
    "_ns": (0.1, 1e7, "a number from 0.1 to 10000000 (ns: 0.1 ns to 10 ms)"),
    "_ghz": (0.1, 10.0, "a number from 0.1 to 10 (GHz)"),
    "_gbs": (0.01, 10_000.0, "a number from 0.01 to 10000 (GB/s)"),
    "_gib": (1 / 1024, 65_536.0, "a number from 0.0009765625 to 65536 (GiB: 1 MiB to 64 TiB)"),
}
MAX_PLAIN = 1e12  # any other number (ratios such as smt_thread_speed): finite, > 0
# arch/x86/Kconfig NODES_SHIFT max 10: MAX_NUMNODES = 1024 (ids of nodes and sockets)
MAX_NODES = 1024
# integer fields: (lo, hi); SMT: at most 4 threads per core on x86 (Xeon Phi); a cache is at most 64 GiB
INT_RANGES: dict[str, tuple[int, int]] = {
    "cores": (1, 8192), "threads_per_core": (1, 4), "size_kib": (1, 64 << 20), "ways": (1, 65_536),
    "line_bytes": (16, 4096), "shared_by": (1, 8192),
}
_UNITS = {"_gib": " (GiB)", "_ns": " (ns)", "_gbs": " (GB/s)", "_ghz": " (GHz)", "_kib": " (KiB)"}
TOP_KEYS_HINT = "a YAML mapping with keys name, description, freq_ghz, sockets, caches, nodes, distances, cost"


def unit(key: str) -> str:
    return next((u for suffix, u in _UNITS.items() if key.endswith(suffix)), "")


def _range(suffix: str) -> Any:
    lo, hi, _ = RANGES[suffix]
    return Field(ge=lo, le=hi, allow_inf_nan=False)


def _irange(key: str) -> Any:
    lo, hi = INT_RANGES[key]
    return Field(ge=lo, le=hi)


Ns = Annotated[float, _range("_ns")]
GHz = Annotated[float, _range("_ghz")]
GBs = Annotated[float, _range("_gbs")]
GiB = Annotated[float, _range("_gib")]
Plain = Annotated[float, Field(gt=0, le=MAX_PLAIN, allow_inf_nan=False)]
# ns fields that may be 0 (a cost that is absent on some machines: wake_ipi_ns on bare metal)
ZERO_NS_FIELDS = ("wake_ipi_ns",)
ZERO_NS_HINT = "a number from 0 to 10000000 (ns: 0 to 10 ms)"
ZeroNs = Annotated[float, Field(ge=0, le=1e7, allow_inf_nan=False)]
Index = Annotated[int, Field(ge=0, lt=MAX_NODES)]
Cores = Annotated[int, _irange("cores")]
Threads = Annotated[int, _irange("threads_per_core")]
SizeKiB = Annotated[int, _irange("size_kib")]
Ways = Annotated[int, _irange("ways")]
LineBytes = Annotated[int, _irange("line_bytes")]
SharedBy = Annotated[int, _irange("shared_by")]


def _num(key: str) -> Any:
    """The pydantic type of number field ``key``: its unit's range, or finite and in (0, MAX_PLAIN]."""
    return {"_ns": Ns, "_ghz": GHz, "_gbs": GBs, "_gib": GiB}.get(
        next((suffix for suffix in RANGES if key.endswith(suffix)), ""), Plain)
Sources = dict[str, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SocketSpec(_Strict):
    id: Index
    cores: Cores
    threads_per_core: Threads
    node: Index


class CacheSpec(_Strict):
    name: Literal["L1d", "L2", "L3"]
    size_kib: SizeKiB
    ways: Ways
    line_bytes: LineBytes
    shared_by: SharedBy
    latency_ns: Ns
    effective_kib: SizeKiB | None = None  # the capacity the cores get (calibrate, a guest's L3); <= size_kib


class NodeSpec(_Strict):
    id: Index
    memory_gib: GiB
    mem_type: Literal["DRAM", "PMEM"]  # MemoryType's values
    latency_ns: Ns
    read_bw_gbs: GBs
    write_bw_gbs: GBs
    socket: Index
    remote_latency_ns: Ns | None = None  # older files: derived from the SLIT


def _cost_fields() -> dict[str, Any]:
    out: dict[str, Any] = {}
    defaults = {"smt_thread_speed": SMT_THREAD_SPEED, "line_hit_socket_ns": None, "line_hit_remote_ns": None,
                "issue_width": ISSUE_WIDTH, "anon_folio_ns": None,
                "copy_mlp": COPY_MLP, "wake_ipi_ns": WAKE_IPI_NS}
    for f in dataclasses.fields(CostModel):
        if f.name == "sources":
            continue
        t = ZeroNs if f.name in ZERO_NS_FIELDS else _num(f.name)
        if f.name in defaults:
            out[f.name] = (t | None if defaults[f.name] is None else t, defaults[f.name])
        else:
            out[f.name] = (t, ...)
    out["sources"] = (Sources, {})
    return out


#: Every CostModel field by its unit's range; ``sources`` and the fields with defaults may be left out.
CostSpec: type[BaseModel] = create_model("CostSpec", __base__=_Strict, **_cost_fields())


if TYPE_CHECKING:  # mypy cannot see a model made by create_model
    _CostSpecT = BaseModel
else:
    _CostSpecT = CostSpec


class MachineSpec(_Strict):
    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    freq_ghz: GHz
    sockets: Annotated[list[SocketSpec], Field(min_length=1)]
    caches: Annotated[list[CacheSpec], Field(min_length=1)]
    nodes: Annotated[list[NodeSpec], Field(min_length=1)]
    distances: list[list[int]]  # the shape (nodes x nodes) and SLIT values: checked by yamlio
    cost: _CostSpecT
    sources: Sources = {}


_PARTS: dict[str, type[BaseModel]] = {"sockets": SocketSpec, "caches": CacheSpec, "nodes": NodeSpec,
                                      "cost": CostSpec}


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def loc_path(loc: tuple[int | str, ...]) -> str:
    """``("nodes", 1, "memory_gib")`` → ``nodes[1].memory_gib``; a key that is not a field name is not echoed."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + inputs.quote_key(part)
    return out


def _describe(key: str) -> str:
    if key in ("sockets", "caches", "nodes"):
        return f"a non-empty list of {key}"
    if key == "cost":
        return "a mapping of CostModel fields"
    if key == "distances":
        return "the SLIT matrix, one row per node"
    return "see docs/machines.md" + (f"; a number{unit(key)}" if unit(key) else "")


def allowed(loc: tuple[int | str, ...]) -> str:
    """What field ``loc`` takes, in the words of docs/machines.md."""
    names = [p for p in loc if isinstance(p, str)]
    leaf = names[-1] if names else ""
    if not names:
        return TOP_KEYS_HINT
    if leaf in ("sockets", "caches", "nodes") and isinstance(loc[-1], str):
        return f"a non-empty list of {leaf}"
    if (leaf in _PARTS and isinstance(loc[-1], int)) or (leaf == "cost" and len(loc) == 1):
        return "a mapping with keys " + ", ".join(_PARTS[leaf].model_fields)
    if "sources" in names:
        return "a mapping of field name -> source text (strings)"
    if leaf == "name" and len(loc) == 1:
        return "a non-empty string"
    if leaf == "description":
        return "a string"
    if leaf == "name":
        return "L1d, L2, L3"
    if leaf == "mem_type":
        return ", ".join(t.value for t in MemoryType)
    if leaf in ("id", "node", "socket"):
        return f"an integer from 0 to {MAX_NODES - 1} (x86-64 MAX_NUMNODES)"
    if leaf in INT_RANGES:
        lo, hi = INT_RANGES[leaf]
        return f"an integer from {lo} to {hi}" + unit(leaf)
    if leaf == "distances":
        return "a list of integer rows, one row per node (the SLIT matrix)"
    if leaf in ZERO_NS_FIELDS:
        return ZERO_NS_HINT
    rng = next((r for suffix, r in RANGES.items() if leaf.endswith(suffix)), None)
    if rng is not None:
        return rng[2]
    return f"a number > 0 and at most {MAX_PLAIN:g}" + unit(leaf)


def to_user_error(e: ValidationError, where: str) -> UserError:
    """The first problem of ``e`` as one UserError line: an unknown key first (a typo is also a missing key),
    then the first other error in field order."""
    errors = e.errors(include_url=False)
    err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = tuple(err["loc"])
    # a union (remote_latency_ns: number or null) reports each member; the number's error is the one to name
    loc = tuple(p for p in loc if not (isinstance(p, str) and p in ("float", "none", "function-after[]")))
    path = loc_path(loc)
    field = f"{where}: {path}" if path else where
    if err["type"] == "extra_forbidden":
        parent = loc[:-1]
        names = [p for p in parent if isinstance(p, str)]
        model = _PARTS.get(names[-1], MachineSpec) if names else MachineSpec
        return UserError(field, "unknown key", f"keys of {loc_path(parent) or 'the top level'}: "
                         + ", ".join(model.model_fields))
    if err["type"] == "missing":
        leaf = next((p for p in reversed(loc) if isinstance(p, str)), "")
        return UserError(field, MISSING, "a required key: " + _describe(leaf))
    value = err.get("input")
    if isinstance(value, (dict, list)) and err["type"] not in ("too_short", "list_type"):
        value = f"a {type(value).__name__}"
    return UserError(field, value, allowed(loc))
