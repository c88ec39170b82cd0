"""User-facing errors. The CLI turns a :class:`UserError` into one line on
stderr and exit code 2; the library raises it for anything a user typed
(CLI args, ``-p``/``--set`` values, YAML files) before any simulation runs.
A :class:`RunFailure` (the environment failed a run that was valid: worker
processes killed, a cluster lost) is one line and exit code 1."""

from __future__ import annotations

from collections.abc import Iterable


class UserError(ValueError):
    """Bad input. ``field`` names what was wrong, ``allowed`` what would be accepted."""

    def __init__(self, field: str, value: object, allowed: str | Iterable[str]) -> None:
        if not isinstance(allowed, str):
            allowed = ", ".join(str(a) for a in allowed)
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: invalid value {_short_repr(value)}; allowed: {allowed}")


MAX_VALUE_CHARS = 80  # an error quotes at most this much of a value (a whole file's text is never echoed)


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a self-referencing structure; an int too large to print
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


class RunFailure(RuntimeError):
    """A valid run could not complete because of its environment (not a bug, not bad input)."""


class SimulationError(RuntimeError):
    """An inconsistency inside the model (a bug, not a user error). Raised by the engine
    (``mmsim.engine.core`` re-exports it) and the models."""
