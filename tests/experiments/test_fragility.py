"""reproduce --json: per-check fragile flags come from the committed sensitivity table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsim.experiments import reproduce as rp


def test_fragility_reads_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = tmp_path / "sensitivity.json"
    t.write_text(json.dumps({"x": {"flips": {"a": ["m:cost.wakeup_ns x0.5"], "b": [], "c": ["m:k x1.5"]}}}))
    monkeypatch.setattr(rp, "SENSITIVITY", t)
    rp._sensitivity.cache_clear()
    try:
        assert rp.fragility("x", rp.Check("a", None, 1.0, (0.0, 2.0))) == {
            "fragile": True, "fragile_constants": ["m:cost.wakeup_ns x0.5"]}
        assert rp.fragility("x", rp.Check("b", None, 1.0, (0.0, 2.0)))["fragile"] is False
        out = rp.fragility("x", rp.Check("c", None, 5.0, (0.0, 2.0)))  # outside its band already
        assert out == {"fragile": None, "fragile_constants": ["m:k x1.5"]}
        assert rp.fragility("y", rp.Check("a", None, 1.0, (0.0, 2.0)))["fragile"] is None  # not swept
        assert rp.fragility("x", rp.Check("a", None, 1.0, None))["fragile"] is None  # informational
    finally:
        rp._sensitivity.cache_clear()
