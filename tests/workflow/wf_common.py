"""Shared constants of the workflow tests (a plain module: tests/ has no packages)."""

from __future__ import annotations

# Small, fast lockstress points on `tiny` (a few ms each). The queued spinlock
# patch (a33fda35e3a7) changes them several-fold: a real, mechanism-driven change.
SMALL = {"tasks": "8", "iterations": "50", "think_ns": "100"}
SMALL_P = [x for k, v in SMALL.items() for x in ("-p", f"{k}={v}")]
QSPIN = "a33fda35e3a7"
QSPIN_SUBJECT = "locking/qspinlock: Introduce a simple generic 4-byte queued spinlock"
