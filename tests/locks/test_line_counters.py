"""What a lock's cache line reports (``CacheLine``'s write counters, ``LockStat.line_dict``, the ``mmsim run``
table and split-pmd-ptl's mechanism line): a scripted sequence on ``tiny`` (HITM 50 ns in a socket, 200 ns
across), every count derived by hand from the module docstring of ``locks/base.py``."""

from __future__ import annotations

from typing import Any

import pytest

from mmsim.locks.base import CacheLine
from mmsim.machine import get_machine
from mmsim.machine.cacheorg import spin_instructions
from mmsim.metrics.counters import LockStat, line_spin_misses
from mmsim.report.text import lock_lines_table


def _scripted() -> CacheLine:
    line = CacheLine(get_machine("tiny"), owner=0)
    assert line.write(1, 0)[0] == 50  # HITM 0 -> 1 in flight: the snoop reaches CPU 0 at 25, lands at 50
    assert line.write(0, 10)[0] == 0  # the old owner's store before the snoop: local (window)
    assert line.write(2, 20)[0] == 30 + 200  # queued 30 ns behind the write in flight, then HITM 1 -> 2
    line.add_spinner(3)
    line.add_spinner(0)
    assert line.write(2, 300)[0] == 0  # its own line; two spinners: a storm (first re-read (50 + 200) / 2)
    assert line.write(2, 301)[0] == 0  # the storm's writer before the first re-read reaches it (300 + 62)
    return line


def test_cacheline_counts_what_each_write_met() -> None:
    ln = _scripted()
    assert (ln.writes, ln.wlocal, ln.qwrites, ln.qwait, ln.storms, ln.sspin, ln.transfers) == (3, 2, 1, 30, 1, 2, 2)


def test_lockstat_line_dict_sums_distinct_lines_and_the_table_shows_them() -> None:
    ln = _scripted()
    st = LockStat("l", "spinlock(ticket)", lines=[ln, ln])  # two instances on one line: counted once
    d = st.line_dict()
    # the storm's spinners (CPUs 3 and 0, one per socket) each stall from the invalidation (the writer owned
    # the line: no transfer) to their re-read: the first re-read (50 + 200) / 2 = 125, sent when the first of
    # the two ends its PAUSE (tiny: 10 ns, P / 3 = 3.33; session 35), then half the one socket-to-socket
    # forward (200 / 2): 228.33 ns each (docs/locks.md, session 27)
    stall = 125 + 10 / 3 + 100
    assert ln.sstall == pytest.approx(2 * stall, rel=1e-12)
    assert d == {"writes": 5, "window_local": 2, "queued": 1, "queue_wait_ns_avg": 30.0, "storms": 1,
                 "spinners_per_storm": 2.0, "reread_stall_ns_avg": round(stall, 1), "transfers": 2}  # one decimal
    assert st.to_dict()["line"] == d
    assert LockStat("unused", "atomic").line_dict() == {}
    t = lock_lines_table({"l": st.to_dict(), "unused": LockStat("unused", "atomic").to_dict()})
    # 228.33 ns of stall per spinner (with the PAUSE, session 35)
    assert t.rows == [["l", "5", "40.0", "20.0", "0.030", "20.0", "2.0", "0.228", "2"]]


def test_spinlock_waiters_retire_instructions_per_miss_and_unstalled_pause(monkeypatch: Any) -> None:
    """perf's instructions for the ticket-lock spin symbol come from its line's misses and stall
    (docs/locks.md, session 27): exactly spin_instructions(..., misses, stall), fewer than at the pause rate."""
    import mmsim.experiments.run as run_mod

    seen: dict[str, Any] = {}
    orig = run_mod._result

    def spy(spec: Any, system: Any, *a: Any) -> Any:
        seen["system"] = system
        return orig(spec, system, *a)

    monkeypatch.setattr(run_mod, "_result", spy)
    r = run_mod.run(run_mod.RunSpec("lockstress", "tiny", "v3.12", exact=True,
                                    params={"tasks": "4", "think_ns": "0", "hold_ns": "50", "iterations": "300"}))
    system = seen["system"]
    misses, stall = line_spin_misses(system.locks.stats)
    assert misses > 0 and stall > 0
    e = system.counters.profile_total()["_raw_spin_lock"]
    f = system.machine.freq_ghz
    entry = next(p for p in r.profile if p["symbol"] == "_raw_spin_lock")
    assert entry["instructions"] == spin_instructions("tiny", e.ns * f, misses, stall * f)
    assert entry["instructions"] < spin_instructions("tiny", e.ns * f)
