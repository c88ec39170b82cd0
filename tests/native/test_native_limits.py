"""Limits of native runs' parameters (they start host processes for real)."""

from __future__ import annotations

import pytest


def test_native_usemem_nr_task_is_capped() -> None:
    """A native vm-scalability case forks nr_task host processes: at most 1024, as the other native workloads
    (session 31's fuzzing round: nr_task=100000 tried to start them all)."""
    from mmsim.native.workloads import NATIVE_MAX_TASKS, parse_native_nr_task

    assert parse_native_nr_task("1024") == "1024" and parse_native_nr_task("50%") == "50%"
    for bad in ("1025", "100000", "0", "abc"):
        with pytest.raises(ValueError):
            parse_native_nr_task(bad)
    assert NATIVE_MAX_TASKS == 1024
