"""Workload protocol, typed parameters and the registry.

A workload is a small class registered by name: it declares its parameters
(with the benchmark's own option letters in the help), spawns tasks on a
:class:`~mmsim.mm.system.System`, and reports its benchmark's own metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mmsim.errors import UserError


@dataclass(frozen=True)
class ParamInfo:
    default: Any
    help: str
    parse: Callable[[str], Any]
    allowed: str  # human description of allowed values, for errors


def parse_int(lo: int = 0, hi: int | None = None) -> Callable[[str], int]:
    def f(v: str) -> int:
        try:
            n = int(str(v), 0)
        except ValueError:
            raise ValueError from None
        if n < lo or (hi is not None and n > hi):
            raise ValueError
        return n

    return f


def parse_choice(*choices: str) -> Callable[[str], str]:
    def f(v: str) -> str:
        if str(v) not in choices:
            raise ValueError
        return str(v)

    return f


class Workload(Protocol):
    name: str
    description: str
    params: dict[str, ParamInfo]

    def command(self, p: dict[str, Any]) -> str: ...

    def setup(self, system: Any, p: dict[str, Any]) -> None: ...

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]: ...


WORKLOADS: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    WORKLOADS[w.name] = w
    return w


def get_workload(name: str) -> Workload:
    _load_builtin()
    w = WORKLOADS.get(name)
    if w is None:
        raise UserError("workload", name, sorted(WORKLOADS))
    return w


def list_workloads() -> list[Workload]:
    _load_builtin()
    return list(WORKLOADS.values())


def resolve_params(w: Workload, given: dict[str, str]) -> dict[str, Any]:
    """Defaults overlaid with the user's ``-p`` values, each parsed and checked."""
    out: dict[str, Any] = {k: v.default for k, v in w.params.items()}
    for k, v in given.items():
        info = w.params.get(k)
        if info is None:  # the name as typed, cut like a value (-p <5000 characters>=1)
            name = k if len(k) <= MAX_NAME_CHARS else k[: MAX_NAME_CHARS - 3] + "..."
            raise UserError(f"-p {name}", v, f"parameters of {w.name}: " + ", ".join(sorted(w.params)))
        out[k] = parse_param(f"-p {k}", info, v)
    return out


MAX_PARAM = (1 << 63) - 1  # the benchmarks read their options into a C long (strtol, atol)
MAX_PARAM_CHARS = 200
MAX_NAME_CHARS = 80  # an unknown -p name is quoted at most this long, as errors.MAX_VALUE_CHARS cuts values


def parse_param(field: str, info: ParamInfo, v: str) -> Any:
    """One ``-p`` value: ASCII only (``int()`` would take Arabic-Indic digits), parsed by the parameter's own
    parser, then finite (no inf/nan, which ``1e400`` becomes) and within a C long."""
    if not isinstance(v, str) or not v.isascii() or not v.isprintable() or len(v) > MAX_PARAM_CHARS:
        raise UserError(field, v, f"{info.allowed} (printable ASCII, at most {MAX_PARAM_CHARS} characters)")
    try:
        x = info.parse(v)
    except (ValueError, TypeError, OverflowError):
        raise UserError(field, v, info.allowed) from None
    if isinstance(x, float) and not math.isfinite(x):
        raise UserError(field, v, f"{info.allowed}, finite")
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > MAX_PARAM:
        raise UserError(field, v, f"{info.allowed}, at most 2^63-1")
    if isinstance(x, str) and x.isdigit() and int(x) > MAX_PARAM:  # a count kept as text (nr_task: 8 or 50%)
        raise UserError(field, v, f"{info.allowed}, at most 2^63-1")
    return x


def _load_builtin() -> None:
    from mmsim.workloads import (  # noqa: F401  (registration)
        lmbench,
        lockstress,
        locktorture,
        pmbench,
        thp_memscale,
        vm_scalability,
        vm_scalability_shm,
        will_it_scale,
    )
