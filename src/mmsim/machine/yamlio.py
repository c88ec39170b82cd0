"""Machines to and from plain dicts and YAML files.

The dict form mirrors the dataclasses field for field (see docs/machines.md),
so ``dict_to_machine(machine_to_dict(m)) == m`` and the sources round-trip
too. Every problem in a user's file becomes one :class:`UserError` naming the
field path (``machine.yaml: nodes[1].memory_gib``) and what is allowed,
before anything runs. Checks are hand-written rather than pydantic so the
messages name the dataclass fields exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from mmsim import inputs
from mmsim.errors import UserError
from mmsim.machine.model import SMT_THREAD_SPEED, CacheLevel, CostModel, Machine, MemoryType, NumaNode, Socket

TOP_KEYS_HINT = (
    "a YAML mapping with keys name, description, freq_ghz, sockets, caches, nodes, distances, cost"
)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()

_UNITS = {"_gib": " (GiB)", "_ns": " (ns)", "_gbs": " (GB/s)", "_ghz": " (GHz)", "_kib": " (KiB)"}


def _unit(key: str) -> str:
    return next((u for suffix, u in _UNITS.items() if key.endswith(suffix)), "")


# -- to dict --------------------------------------------------------------------


def _plain(obj: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        v = getattr(obj, f.name)
        out[f.name] = v.value if isinstance(v, MemoryType) else v
    return out


def machine_to_dict(m: Machine) -> dict[str, Any]:
    """A plain dict (str, int, float, list, dict only) that round-trips to ``m``."""
    cost = _plain(m.cost)
    cost["sources"] = dict(m.cost.sources)
    return {
        "name": m.name,
        "description": m.description,
        "freq_ghz": m.freq_ghz,
        "sockets": [_plain(s) for s in m.sockets],
        "caches": [_plain(c) for c in m.caches],
        "nodes": [_plain(n) for n in m.nodes],
        "distances": [list(r) for r in m.distances],
        "cost": cost,
        "sources": dict(m.sources),
    }


# -- validation -----------------------------------------------------------------

# Physical ranges by unit suffix: every *_ns, *_ghz, *_gbs, *_gib and *_kib field of the machine and its
# cost model (whatever the cost fields are called). Generous bounds around real hardware, meant to catch
# typos and hostile values (1e39 ns), not to judge a plausible machine.
RANGES: dict[str, tuple[float, float, str]] = {
    "_ns": (0.1, 1e7, "a number from 0.1 to 10000000 (ns: 0.1 ns to 10 ms)"),
    "_ghz": (0.1, 10.0, "a number from 0.1 to 10 (GHz)"),
    "_gbs": (0.01, 10_000.0, "a number from 0.01 to 10000 (GB/s)"),
    "_gib": (1 / 1024, 65_536.0, "a number from 0.0009765625 to 65536 (GiB: 1 MiB to 64 TiB)"),
}
MAX_PLAIN = 1e12  # any other number (ratios such as smt_thread_speed): finite and convertible to float
# arch/x86/Kconfig NODES_SHIFT max 10: MAX_NUMNODES = 1024 (ids of nodes and sockets)
MAX_NODES = 1024
# integer fields: (lo, hi); SMT: at most 4 threads per core on x86 (Xeon Phi); a cache is at most 64 GiB
_INT_RANGES: dict[str, tuple[int, int | None]] = {
    "cores": (1, 8192), "threads_per_core": (1, 4), "size_kib": (1, 64 << 20), "ways": (1, 65_536),
    "line_bytes": (16, 4096), "shared_by": (1, 8192),
}


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


Check = Callable[[Any, str], Any]


class _Checker:
    """Type checks with the file name and field path in every error."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, value: object, allowed: str) -> UserError:
        field = f"{self.where}: {path}" if path else self.where
        return UserError(field, value, allowed)

    def pos_int(self, v: Any, path: str) -> int:
        lo, hi = _INT_RANGES.get(_leaf(path), (1, None))
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            allowed = f"an integer from {lo} to {hi}" if hi is not None else "a positive integer"
            raise self.fail(path, v, allowed + _unit(path))
        return v

    def index(self, v: Any, path: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < MAX_NODES:
            raise self.fail(path, v, f"an integer from 0 to {MAX_NODES - 1} (x86-64 MAX_NUMNODES)")
        return v

    def pos_num(self, v: Any, path: str) -> float:
        """A finite number > 0, within its unit's physical range (:data:`RANGES`); compared before any
        float conversion, so a 400-digit integer is an error, not an OverflowError."""
        rng = next((r for suffix, r in RANGES.items() if _leaf(path).endswith(suffix)), None)
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) and (isinstance(v, int) or math.isfinite(v))
        if rng is not None:
            if not ok or not rng[0] <= v <= rng[1]:
                raise self.fail(path, v, rng[2])
        elif not ok or not 0 < v <= MAX_PLAIN:
            raise self.fail(path, v, f"a number > 0 and at most {MAX_PLAIN:g}" + _unit(path))
        return float(v)

    def text(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or (path == "name" and not v):
            raise self.fail(path, v, "a non-empty string" if path == "name" else "a string")
        return v

    def mem_type(self, v: Any, path: str) -> MemoryType:
        if not isinstance(v, str) or v not in {t.value for t in MemoryType}:  # a list is not hashable
            raise self.fail(path, v, ", ".join(t.value for t in MemoryType))
        return MemoryType(v)

    def cache_name(self, v: Any, path: str) -> str:
        if v not in ("L1d", "L2", "L3"):
            raise self.fail(path, v, "L1d, L2, L3")
        return str(v)

    def sources(self, v: Any, path: str) -> dict[str, str]:
        ok = isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
        if not ok:
            raise self.fail(path, v, "a mapping of field name -> source text (strings)")
        return dict(v)

    def mapping(
        self, v: Any, path: str, spec: Mapping[str, Check], optional: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Check a mapping against ``spec``; keys in ``optional`` may be absent (default given)."""
        if not isinstance(v, dict):
            raise self.fail(path, v, "a mapping with keys " + ", ".join(spec))
        prefix = f"{path}." if path else ""
        for key in v:
            if key not in spec:  # the key only, never its value: a wrong file's content stays unprinted
                where = path or "the top level"
                raise self.fail(f"{prefix}{inputs.quote_key(key)}", "unknown key",
                                f"keys of {where}: " + ", ".join(spec))
        out: dict[str, Any] = {}
        for key, check in spec.items():
            if key in v:
                out[key] = check(v[key], f"{prefix}{key}")
            elif key in optional:
                out[key] = optional[key]
            else:
                raise self.fail(f"{prefix}{key}", MISSING, "a required key: " + _describe(key))
        return out

    def items(self, v: Any, path: str, what: str) -> list[Any]:
        if not isinstance(v, list) or not v:
            raise self.fail(path, v, f"a non-empty list of {what}")
        return v

    def distances(self, v: Any, path: str, n: int) -> tuple[tuple[int, ...], ...]:
        shape = f"a {n}x{n} list of integer rows, one row per node"
        if not isinstance(v, list) or len(v) != n:
            raise self.fail(path, v, shape)
        rows = []
        for i, row in enumerate(v):
            if not isinstance(row, list) or len(row) != n:
                raise self.fail(f"{path}[{i}]", row, shape)
            for j, d in enumerate(row):
                ok = isinstance(d, int) and not isinstance(d, bool) and (d == 10 if i == j else 10 < d < 255)
                if not ok:
                    want = "10 (SLIT local distance)" if i == j else "an integer from 11 to 254 (SLIT remote distance)"
                    raise self.fail(f"{path}[{i}][{j}]", d, want)
            rows.append(tuple(row))
        return tuple(rows)


def _describe(key: str) -> str:
    if key in ("sockets", "caches", "nodes"):
        return f"a non-empty list of {key}"
    if key == "cost":
        return "a mapping of CostModel fields"
    if key == "distances":
        return "the SLIT matrix, one row per node"
    return "see docs/machines.md" + (f"; a number{_unit(key)}" if _unit(key) else "")


def _part_specs(c: _Checker) -> dict[str, dict[str, Check]]:
    num, pint, idx = c.pos_num, c.pos_int, c.index
    return {
        "sockets": {"id": idx, "cores": pint, "threads_per_core": pint, "node": idx},
        "caches": {
            "name": c.cache_name, "size_kib": pint, "ways": pint, "line_bytes": pint,
            "shared_by": pint, "latency_ns": num,
        },
        "nodes": {
            "id": idx, "memory_gib": num, "mem_type": c.mem_type, "latency_ns": num,
            "read_bw_gbs": num, "write_bw_gbs": num, "socket": idx, "remote_latency_ns": num,
        },
        "cost": {
            **{f.name: num for f in dataclasses.fields(CostModel) if f.name != "sources"},
            "sources": c.sources,
        },
    }


_CLASS_PATH = re.compile(r"^(\w+)\.(\w+(?:\[\d+\])*(?:\.\w+)?)\s*(.*)$")


def _build(c: _Checker, path: str, cls: Callable[..., Any], kwargs: dict[str, Any], raw: Any = None) -> Any:
    """Construct a dataclass; its ``ValueError`` becomes a UserError at ``path.field``.

    ``raw`` is the user's mapping, to quote the offending value (default ``kwargs``).
    """
    try:
        return cls(**kwargs)
    except ValueError as e:
        msg = str(e)
        m = _CLASS_PATH.match(msg)
        sub = m.group(2) if m else ""
        allowed = re.sub(r"^must (be )?", "", m.group(3)) if m else msg
        full = f"{path}.{sub}" if path and sub else (sub or path)
        raise c.fail(full, _lookup(kwargs if raw is None else raw, sub), allowed or msg) from None


def _lookup(d: Any, path: str) -> Any:
    """The value at ``sockets[1].id``-style ``path`` in ``d``, or the placeholder '<see message>'."""
    cur = d
    for name, idx in re.findall(r"(\w+)|\[(\d+)\]", path):
        try:
            cur = cur[name] if name else cur[int(idx)]
        except (KeyError, IndexError, TypeError):
            return "<see message>"
    return cur


def _items(c: _Checker, v: Any, path: str, what: str) -> list[Any]:
    return c.items(v, path, what)


_PART_KEYS = ("sockets", "caches", "nodes")


def dict_to_machine(d: Any, where: str = "machine") -> Machine:
    """Validate a plain dict (e.g. parsed YAML) and build the Machine it describes."""
    c = _Checker(where)
    specs = _part_specs(c)
    lists: dict[str, Check] = {k: functools.partial(_items, c, what=k) for k in _PART_KEYS}
    top: dict[str, Check] = {
        "name": c.text, "description": c.text, "freq_ghz": c.pos_num, **lists,
        "distances": lambda v, p: v,  # checked below, once the node count is known
        "cost": lambda v, p: c.mapping(v, p, specs["cost"], {"sources": {}, "smt_thread_speed": SMT_THREAD_SPEED,
                                                             "line_hit_socket_ns": None, "line_hit_remote_ns": None}),
        "sources": c.sources,
    }
    t = c.mapping(d, "", top, {"description": "", "sources": {}})
    parts: dict[str, list[Any]] = {}
    classes = {"sockets": Socket, "caches": CacheLevel, "nodes": NumaNode}
    for key, cls in classes.items():
        parts[key] = []
        for i, item in enumerate(t[key]):
            p = f"{key}[{i}]"
            optional = {"remote_latency_ns": None} if key == "nodes" else {}  # older files: derived from SLIT
            parts[key].append(_build(c, p, cls, c.mapping(item, p, specs[key], optional)))
    ncpus = sum(s.cores * s.threads_per_core for s in parts["sockets"])
    if ncpus > MAX_CPUS:  # before the Machine, which tabulates every CPU
        raise c.fail("sockets", f"{ncpus} CPUs", f"at most {MAX_CPUS} CPUs in all (x86-64 NR_CPUS_RANGE_END)")
    distances = c.distances(t["distances"], "distances", len(parts["nodes"]))
    cost = _build(c, "cost", CostModel, t["cost"])
    kwargs = {**t, **parts, "distances": distances, "cost": cost}
    m: Machine = _build(c, "", Machine, kwargs, raw=d)
    _check_sharing(c, m)
    return m


# arch/x86/Kconfig: NR_CPUS_RANGE_END, the largest NR_CPUS an x86-64 kernel builds with (MAXSMP,
# CPUMASK_OFFSTACK). Also keeps a typo in cores from allocating per-CPU state for millions of CPUs.
MAX_CPUS = 8192


def _check_sharing(c: _Checker, m: Machine) -> None:
    """A cache can be shared by at most every CPU; checks the model cannot do per part."""
    for i, cache in enumerate(m.caches):
        if cache.shared_by > m.ncpus:
            allowed = f"at most the {m.ncpus} CPUs of the machine"
            raise c.fail(f"caches[{i}].shared_by", cache.shared_by, allowed)


# -- files ---------------------------------------------------------------------


class _Row(list):  # type: ignore[type-arg]
    """A list written in YAML flow style: one distance row per line."""


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written in YAML flow style: one socket/cache/node per line."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Row, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))


def dump_machine(m: Machine) -> str:
    """The YAML text of ``m`` (compact: one socket, cache, node or distance row per line)."""
    d = machine_to_dict(m)
    for key in ("sockets", "caches", "nodes"):
        d[key] = [_Flow(x) for x in d[key]]
    d["distances"] = [_Row(r) for r in d["distances"]]
    header = f"# mmsim machine {m.name!r}: see docs/machines.md for the fields\n"
    return header + yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=100000, allow_unicode=True)


def save_machine(m: Machine, path: str | Path) -> None:
    Path(path).write_text(dump_machine(m), encoding="utf-8")


def load_machine(path: str | Path) -> Machine:
    """Load and validate a machine YAML file (read within :mod:`mmsim.inputs`' limits); any problem is one
    UserError line."""
    where = str(path)
    d = inputs.load_yaml(path, where, "a machine YAML file", TOP_KEYS_HINT)
    if not isinstance(d, dict):
        raise UserError(where, f"a YAML {type(d).__name__}", TOP_KEYS_HINT)
    return dict_to_machine(d, where)
