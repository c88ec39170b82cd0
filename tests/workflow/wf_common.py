"""Shared constants of the workflow tests (a plain module: tests/ has no packages)."""

from __future__ import annotations

# Small, fast lockstress points (a few ms each), on `tiny` unless a test needs the queued spinlock patch
# (a33fda35e3a7) to matter: then on QMACHINE. Since session 23 a ticket lock's re-read storm on an
# inclusive L3 (tiny's) is served per socket, so on tiny's 2 sockets the patch changes little (−5.8 %);
# on Ice Lake-SP's non-inclusive L3 the 8 tasks' re-reads are core-to-core forwards one after another,
# and the patch gives +65 %: a real, mechanism-driven change.
SMALL = {"tasks": "8", "iterations": "50", "think_ns": "100"}
SMALL_P = [x for k, v in SMALL.items() for x in ("-p", f"{k}={v}")]
QMACHINE = "icelake-6338-2s"
QMACHINE_P = ["-m", QMACHINE]
QSPIN = "a33fda35e3a7"
QSPIN_SUBJECT = "locking/qspinlock: Introduce a simple generic 4-byte queued spinlock"
