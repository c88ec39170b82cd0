"""CLI tests: each test gets its own results store (``$MMSIM_RESULTS`` in tmp_path)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = tmp_path / "results.duckdb"
    monkeypatch.setenv("MMSIM_RESULTS", str(p))
    return p
