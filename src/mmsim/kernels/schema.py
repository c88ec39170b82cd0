"""Kernel and patch YAML files as pydantic models (unknown keys refused; values type-checked).

:func:`mmsim.kernels.catalog.load_kernel_yaml` and ``load_patch_yaml`` read the file within
:mod:`mmsim.inputs`' limits, validate it here and then check what needs the catalogue (the base
kernel, patch ids, each policy's value against its kernel bounds). A ValidationError becomes one
UserError line (:func:`to_user_error`): the file and field, the value as written, what is allowed.

YAML 1.1 reads bare ``on``/``off`` as booleans, ``127`` as an int and ``0.5`` as a float; a policy
value or a patch id may be any of those and is taken as the text the user wrote (``on``, ``127``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmsim import inputs
from mmsim.errors import UserError

Scalar = str | bool | int | float


def as_text(v: Scalar) -> str:
    """A YAML scalar as the policy text: booleans are ``on``/``off``."""
    return {True: "on", False: "off"}[v] if isinstance(v, bool) else str(v)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class KernelFile(_Strict):
    """A user kernel: a catalogued ``base``, ``patches`` on top, ``policies`` overriding."""

    name: str | None = None  # default: the file's stem
    base: str = ""  # required: checked against the catalogue, which names the allowed values
    patches: list[str | int] | None = None
    policies: dict[str, Scalar] | None = None
    description: str = ""


class PatchFile(_Strict):
    """A user patch: ``commit`` (default: the file's stem), ``subject``, ``changes`` (policy: value)."""

    commit: str | int | None = None
    subject: str | None = None
    changes: dict[str, Scalar] = Field(min_length=1)
    version: str | int | float | None = None


ALLOWED = {
    "name": "a string", "base": "a catalogued kernel name", "patches": "a list of patch commit ids",
    "policies": "a mapping policy: value", "description": "a string", "commit": "a commit id (a string)",
    "subject": "a string", "changes": "a non-empty mapping policy: value", "version": "a version (a string)",
}


def to_user_error(e: ValidationError, where: str, model: type[BaseModel], raw: dict[Any, Any]) -> UserError:
    """The first problem of ``e`` (an unknown key first) as one UserError line on ``where: FIELD``."""
    errors = e.errors(include_url=False)
    err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    key = err["loc"][0] if err["loc"] else ""
    name = inputs.quote_key(key)
    if err["type"] == "extra_forbidden":
        return UserError(f"{where}: {name}", "unknown key", ", ".join(model.model_fields))
    value = raw.get(key) if isinstance(key, str) else None
    if err["type"] == "missing":
        return UserError(f"{where}: {name}", "<missing>", "a required key: " + ALLOWED.get(str(key), "see docs"))
    return UserError(f"{where}: {name}", value, ALLOWED.get(str(key), "see docs/guide.md"))
