"""What ``mmsim report`` and ``mmsim plot`` accept: the kind of a saved result, and its shape.

A saved ``--json`` result is one of five kinds: ``compare``, ``sweep`` and
``bisect`` carry ``"kind"``; a ``run`` is recognised by its keys, and
``reproduce`` is a list of experiment outcomes. :func:`kind_of` names what a
file holds, :func:`check` refuses a kind the command does not take ("INPUT: a
sweep result; mmsim plot profile takes compare results") and validates the
fields the renderers read (pydantic models; other keys are allowed), so a
hand-edited or truncated result is one error line naming the field, not a
``KeyError``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mmsim.errors import UserError

KINDS = ("compare", "sweep", "bisect", "run", "reproduce")
_RUN_KEYS = {"workload", "machine", "kernel", "params", "seed", "metrics", "perf", "sim"}


class _M(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class Stat(_M):
    mean: float
    stddev: float


class Arm(_M):
    kernel: str


class MetricRow(_M):
    metric: str
    a: Stat
    b: Stat


class Compare(_M):
    workload: str
    machine: str
    params: dict[str, Any]
    arms: list[Arm]
    verdicts: list[str]
    metrics: list[MetricRow]


class Point(_M):
    kernel: str
    machine: str
    swept: dict[str, str]
    summary: dict[str, Stat]


class Sweep(_M):
    workload: str
    grid: dict[str, list[str]]
    machines: list[str]
    benchmark_metrics: list[str]
    points: list[Point]


class Step(_M):
    step: int
    kernel: str
    npatches: int
    mean: float
    runs: int
    state: str


class Patch(_M):
    commit: str
    subject: str


class Bisect(_M):
    workload: str
    machine: str
    metric: str
    steps: list[Step]
    series: list[Patch]
    first_bad: Patch | None = None
    summary: str
    compare: Compare | None = None


class Run(_M):
    workload: str
    machine: str
    kernel: str
    params: dict[str, Any]
    metrics: dict[str, float]
    perf: dict[str, Any]
    sim: dict[str, Any]


class Check(_M):
    metric: str


class Outcome(_M):
    id: str
    title: str = ""
    checks: list[Check]
    arms: dict[str, dict[str, Any]] = {}


class Reproduce(_M):
    outcomes: list[Outcome]


_MODELS: dict[str, type[_M]] = {"compare": Compare, "sweep": Sweep, "bisect": Bisect, "run": Run,
                                "reproduce": Reproduce}


def kind_of(data: Any) -> str:
    """One of :data:`KINDS`, or a description of what ``data`` is instead (starting "not")."""
    if isinstance(data, dict):
        k = data.get("kind")
        if k in ("compare", "sweep", "bisect"):
            return str(k)
        if k is None and _RUN_KEYS <= set(data):
            return "run"
        if isinstance(k, str):
            from mmsim.inputs import quote_key

            return f"not an mmsim result (a JSON object of kind {quote_key(k)!r})"
        return "not an mmsim result (a JSON object without a kind)"
    if isinstance(data, list) and data and all(isinstance(o, dict) and "checks" in o for o in data):
        return "reproduce"
    if isinstance(data, list):
        return "not an mmsim result (a JSON list)" if data else "not an mmsim result (an empty JSON list)"
    return f"not an mmsim result (a JSON {type(data).__name__})"


def check(data: Any, command: str, takes: tuple[str, ...]) -> str:
    """The kind of ``data`` if ``command`` takes it and its fields are right; else a UserError."""
    kind = kind_of(data)
    got = kind if kind.startswith("not ") else f"a {kind} result"
    if kind not in takes:
        raise UserError("INPUT", got, f"`mmsim {command}` takes {'/'.join(takes)} results (see docs/cli.md)")
    try:
        _MODELS[kind].model_validate({"outcomes": data} if kind == "reproduce" else data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = [str(x) for x in err["loc"]][1 if kind == "reproduce" else 0:]
        path = "".join(f"[{x}]" if x.isdigit() else f".{x}" for x in loc).lstrip(".") or "the top level"
        missing = err["type"] == "missing"
        raise UserError(f"INPUT: {kind} result: {path}", "<missing>" if missing else _short(err.get("input")),
                        f"{'a required field' if missing else err['msg'].lower()} "
                        f"(the --json output of mmsim {kind})") from None
    return kind


def _short(v: Any) -> Any:
    """A field's value for the message, or just its type when it is a container."""
    return f"a {type(v).__name__}" if isinstance(v, (dict, list)) else v
