"""Machines to and from plain dicts and YAML files.

The dict form mirrors the dataclasses field for field (see docs/machines.md),
so ``dict_to_machine(machine_to_dict(m)) == m`` and the sources round-trip
too. Every problem in a user's file becomes one :class:`UserError` naming the
field path (``machine.yaml: nodes[1].memory_gib``) and what is allowed,
before anything runs. The schema is pydantic's (:mod:`mmsim.machine.schema`);
its errors are translated into this project's one-line messages.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mmsim import inputs
from mmsim.errors import UserError
from mmsim.machine import schema
from mmsim.machine.model import CacheLevel, CostModel, Machine, MemoryType, NumaNode, Socket

TOP_KEYS_HINT = schema.TOP_KEYS_HINT
MISSING = schema.MISSING
RANGES = schema.RANGES


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
    if cost["anon_folio_ns"] is None:  # not separated (the presets): left out, so their files do not change
        del cost["anon_folio_ns"]
    cost["sources"] = dict(m.cost.sources)
    return {
        "name": m.name,
        "description": m.description,
        "freq_ghz": m.freq_ghz,
        "sockets": [_plain(s) for s in m.sockets],
        # effective_kib only where measured (calibrate on a guest), so the presets' files do not change
        "caches": [{k: v for k, v in _plain(c).items() if not (k == "effective_kib" and v is None)} for c in m.caches],
        "nodes": [_plain(n) for n in m.nodes],
        "distances": [list(r) for r in m.distances],
        "cost": cost,
        "sources": dict(m.sources),
    }


# -- validation -----------------------------------------------------------------
# The schema (keys, types, ranges) is pydantic's (mmsim.machine.schema.MachineSpec); what needs the
# whole machine (the SLIT shape, the dataclasses' own checks, cache sharing) is checked here.

# arch/x86/Kconfig: NR_CPUS_RANGE_END, the largest NR_CPUS an x86-64 kernel builds with (MAXSMP,
# CPUMASK_OFFSTACK). Also keeps a typo in cores from allocating per-CPU state for millions of CPUs.
MAX_CPUS = 8192


def _fail(where: str, path: str, value: object, allowed: str) -> UserError:
    return UserError(f"{where}: {path}" if path else where, value, allowed)


def _distances(where: str, v: list[list[int]], n: int) -> tuple[tuple[int, ...], ...]:
    shape = f"a {n}x{n} list of integer rows, one row per node"
    if len(v) != n:
        raise _fail(where, "distances", v, shape)
    for i, row in enumerate(v):
        if len(row) != n:
            raise _fail(where, f"distances[{i}]", row, shape)
        for j, d in enumerate(row):
            if not (d == 10 if i == j else 10 < d < 255):
                want = "10 (SLIT local distance)" if i == j else "an integer from 11 to 254 (SLIT remote distance)"
                raise _fail(where, f"distances[{i}][{j}]", d, want)
    return tuple(tuple(r) for r in v)


_CLASS_PATH = re.compile(r"^(\w+)\.(\w+(?:\[\d+\])*(?:\.\w+)?)\s*(.*)$")


def _build(where: str, path: str, cls: Callable[..., Any], kwargs: dict[str, Any], raw: Any = None) -> Any:
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
        raise _fail(where, full, _lookup(kwargs if raw is None else raw, sub), allowed or msg) from None


def _lookup(d: Any, path: str) -> Any:
    """The value at ``sockets[1].id``-style ``path`` in ``d``, or the placeholder '<see message>'."""
    cur = d
    for name, idx in re.findall(r"(\w+)|\[(\d+)\]", path):
        try:
            cur = cur[name] if name else cur[int(idx)]
        except (KeyError, IndexError, TypeError):
            return "<see message>"
    return cur


def dict_to_machine(d: Any, where: str = "machine") -> Machine:
    """Validate a plain dict (e.g. parsed YAML) with :class:`~mmsim.machine.schema.MachineSpec` and build
    the Machine it describes; the first problem is one UserError naming the field path."""
    if not isinstance(d, dict):
        raise UserError(where, f"a {type(d).__name__}", TOP_KEYS_HINT)
    try:
        spec = schema.MachineSpec.model_validate(d)
    except ValidationError as e:
        raise schema.to_user_error(e, where) from None
    raw = {k: d[k] for k in ("sockets", "caches", "nodes")}
    parts: dict[str, list[Any]] = {}
    classes = {"sockets": Socket, "caches": CacheLevel, "nodes": NumaNode}
    for key, cls in classes.items():
        parts[key] = []
        for i, item in enumerate(getattr(spec, key)):
            kw = item.model_dump()
            if key == "nodes":
                kw["mem_type"] = MemoryType(kw["mem_type"])
            parts[key].append(_build(where, f"{key}[{i}]", cls, kw, raw[key][i]))
    ncpus = sum(s.cores * s.threads_per_core for s in parts["sockets"])
    if ncpus > MAX_CPUS:  # before the Machine, which tabulates every CPU
        raise _fail(where, "sockets", f"{ncpus} CPUs", f"at most {MAX_CPUS} CPUs in all (x86-64 NR_CPUS_RANGE_END)")
    distances = _distances(where, spec.distances, len(parts["nodes"]))
    cost = _build(where, "cost", CostModel, spec.cost.model_dump())
    kwargs = {"name": spec.name, "description": spec.description, "freq_ghz": spec.freq_ghz, **parts,
              "distances": distances, "cost": cost, "sources": dict(spec.sources)}
    m: Machine = _build(where, "", Machine, kwargs, raw=d)
    _check_sharing(where, m)
    return m


def _check_sharing(where: str, m: Machine) -> None:
    """The three cache levels, each once; a cache shared by at most every CPU: checks the model cannot do
    per part."""
    names = [c.name for c in m.caches]
    if sorted(names) != ["L1d", "L2", "L3"]:  # machine/hierarchy.py models exactly these three levels
        raise _fail(where, "caches", ", ".join(names) or "none", "one entry each for L1d, L2 and L3")
    for i, cache in enumerate(m.caches):
        if cache.shared_by > m.ncpus:
            raise _fail(where, f"caches[{i}].shared_by", cache.shared_by, f"at most the {m.ncpus} CPUs of the machine")


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
