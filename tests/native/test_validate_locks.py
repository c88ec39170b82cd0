"""validate --suite locks: the model's curves and the row verdicts (no native run here)."""

from __future__ import annotations

from mmsim.native.locks import _row, curve_rows, simulated
from mmsim.native.report import format_locks


def test_ticket_collapses_queued_does_not() -> None:
    """westmere-ex-4s, hold 1 µs, think 10 µs: both scale linearly to the lock's
    capacity (~10 threads: 1 / (1 µs + hand-off) ≈ 0.9 M/s); past it the ticket
    lock's hand-off grows with the waiters (the re-read storm) and throughput
    falls, the queued lock's stays at its peak."""
    rows = {r["quantity"]: r["simulated"] for r in curve_rows(lambda s: None)}
    assert rows["ticket collapse point (threads at peak)"] == 10.0
    assert rows["queued collapse point (threads at peak)"] == 10.0
    assert rows["ticket 1 threads acq/s"] == rows["queued 1 threads acq/s"] == 90909.09  # 1 / 11 µs
    assert rows["ticket 40 threads acq/s"] < 0.2 * rows["ticket 10 threads acq/s"]
    assert rows["queued 40 threads acq/s"] > 0.98 * rows["queued 10 threads acq/s"]


def test_two_thread_handoff_on_tiny() -> None:
    """tiny, CPUs 0 and 1 (same socket, 50 ns), no think, no hold: every acquisition
    is a hand-off, three transfers of the lock line one after another: the
    releaser's unlock store takes the line back (50), the waiter re-reads it (50),
    and the releaser's next xadd / set-pending takes it again (50) before the new
    holder's unlock can: 150 ns per acquisition, ticket and queued alike (with one
    waiter a queued lock is its pending bit: no MCS node)."""
    for lock in ("ticket", "queued"):
        d = simulated("tiny", lock, 2, 0, 0, 1000)
        assert abs(d["ns_per_acq"] - 150.0) < 0.2, (lock, d)


def test_row_verdicts() -> None:
    assert _row("m", "q", 130.0, 100.0, "s", "native", share=0.95)["ok"] is True
    r = _row("m", "q", 130.0, 100.0, "s", "native", share=0.5)
    assert r["ok"] is False and "host busy" in r["note"]
    assert _row("m", "q", 131.0, 100.0, "s", "native", share=1.0)["ok"] is False
    assert _row("m", "q", 1.0, None, "model only", "none")["ok"] is None
    assert "Lock validation" in str(format_locks([r])[0].title)
