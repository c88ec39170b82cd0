"""Ticket vs queued spinlocks on ``tiny``: exact grant times and lock_stat.

Transfers on tiny: SMT sibling 10 ns, same socket 50 ns, other socket 200 ns.
CPUs 0,1,4,5 are socket 0; 2,3,6,7 socket 1; siblings are c and c+4.

Ticket hand-off = xfer(releaser, next) + ½ · Σ_{other waiters w} xfer(home, w);
queued hand-off = xfer(releaser, next).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from conftest import Rig
from mmsim.engine.core import PARK, Task
from mmsim.locks.spinlock import Spinlock, SpinlockKind

H = 1000  # hold time (ns)


def _contend(
    r: Rig, kind: SpinlockKind, cpus: list[int], hold: int = H, home: int = 0
) -> tuple[Spinlock, dict[int, int], dict[int, int]]:
    """Tasks on ``cpus`` all call spin_lock() at t=0 (in list order); each holds
    ``hold`` ns. Returns the lock, grant time and release time by CPU."""
    lk = Spinlock(r.ctx, "lk", kind, home_cpu=home)
    granted: dict[int, int] = {}
    released: dict[int, int] = {}

    def body(t: Task) -> Generator[Any, Any, None]:
        yield lk.acquire(t)
        granted[t.cpu] = r.engine.now
        yield r.counters.busy(t.cpu, "critical_section", hold)
        released[t.cpu] = r.engine.now
        assert lk.release(t) == 0

    for i, cpu in enumerate(cpus):
        t = Task(i, f"t{i}", cpu=cpu)
        r.engine.start(t, body(t))
    r.engine.run()
    return lk, granted, released


def test_ticket_grant_times(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk, granted, released = _contend(r, SpinlockKind.TICKET, [0, 2, 6, 1])
    # Arrivals at t=0, each an xadd (RMW) on the lock line (home CPU 0); a ticket
    # waiter then spins on the line, so every later write also pays the re-read
    # storm of the spinners (sum of xfer(home, spinner)):
    #   CPU 0: owner 0 → 0 ns, lock free: granted at 0.            line free at 0
    #   CPU 2: 0→2 200; spinners {2}: 200.                          line free at 200
    #   CPU 6: starts 200, 2→6 10 + storm 200; spinners {2,6}: 400. line free at 410
    #   CPU 1: starts 410, 6→1 200 + storm 400; spinners +50: 450.  line free at 1010
    # Release by 0 at H=1000: line busy until 1010 (+10). Next = CPU 2, others {6, 1}:
    #   h = 10 + xfer(0,2)=200 + (200+50)/2 = 335 → 1335; line free at 1010+200+250 = 1460.
    # Release by 2 at 2335 (line free): next = CPU 6, others {1}: 10 + 50/2 = 35 → 2370.
    # Release by 6 at 3370: next = CPU 1, no others: xfer(6,1) = 200 → 3570.
    assert granted == {0: 0, 2: 1335, 6: 2370, 1: 3570}
    assert released[1] == 4570
    st = lk.stat
    assert (st.acquisitions, st.contentions) == (4, 3)
    assert st.wait_ns_total == 1335 + 2370 + 3570  # all waited from t=0
    assert st.wait_ns_max == 3570
    assert (st.hold_ns_total, st.hold_ns_max) == (4 * H, H)
    assert st.kind == "spinlock(ticket)"
    # Spinning is charged on grant to the waiter's CPU under _raw_spin_lock.
    assert r.counters.prof_ns[2]["_raw_spin_lock"] == 1335
    assert r.counters.prof_ns[6]["_raw_spin_lock"] == 2370
    assert r.counters.prof_ns[1]["_raw_spin_lock"] == 3570
    assert lk.holder is None
    assert (lk.line.nspin, lk.line.spin_sum, lk.line.owner) == (0, 0.0, 1)


def test_queued_grant_times(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk, granted, _ = _contend(r, SpinlockKind.QUEUED, [0, 2, 6, 1])
    # Hand-offs: 0→2 200, 2→6 10, 6→1 200; nothing depends on the other waiters.
    assert granted == {0: 0, 2: H + 200, 6: 2 * H + 210, 1: 3 * H + 410}
    st = lk.stat
    assert (st.acquisitions, st.contentions) == (4, 3)
    assert st.wait_ns_total == 6 * H + 820  # (H+200) + (2H+210) + (3H+410)
    assert st.wait_ns_max == 3 * H + 410
    assert (st.hold_ns_total, st.hold_ns_max) == (4 * H, H)
    assert st.kind == "spinlock(queued)"
    assert r.counters.prof_ns[2]["native_queued_spin_lock_slowpath"] == H + 200
    assert "_raw_spin_lock" not in r.counters.prof_ns[2]


@pytest.mark.parametrize("nwait", [1, 2, 3, 4])
def test_ticket_collapse_vs_queued(make_rig: Callable[[], Rig], nwait: int) -> None:
    """First hand-off with ``nwait`` waiters, all on socket 1 (CPUs 2, 3, 6, 7),
    holder on CPU 0, lock homed on CPU 0 (every re-read costs 200 ns). The hold
    (10 µs) outlasts the arrival storm (at most 1550 ns), so the line is free
    at the release and the hand-off is only the transfer plus the re-reads:
    ticket: 200 + (nwait-1)·200/2 = 200 + 100·(nwait-1): 200, 300, 400, 500;
    queued: 200 whatever nwait."""
    hold = 10_000
    cpus = [0] + [2, 3, 6, 7][:nwait]
    _, g_ticket, _ = _contend(make_rig(), SpinlockKind.TICKET, cpus, hold)
    _, g_queued, _ = _contend(make_rig(), SpinlockKind.QUEUED, cpus, hold)
    assert g_ticket[2] - hold == 200 + 100 * (nwait - 1)
    assert g_queued[2] - hold == 200


def test_uncontended_acquire_pays_the_line_transfer(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk = Spinlock(r.ctx, "lk", SpinlockKind.QUEUED, home_cpu=0)
    t = Task(1, "t", cpu=2)
    log: list[tuple[int, int]] = []

    def body() -> Generator[Any, Any, None]:
        for _ in range(2):
            d = lk.acquire(t)
            yield d
            log.append((d, r.engine.now))
            yield 100
            lk.release(t)

    r.engine.start(t, body())
    r.engine.run()
    # First: line on home CPU 0 → CPU 2: 200 ns; second: line already on CPU 2: 0.
    assert log == [(200, 200), (0, 300)]
    assert (lk.stat.acquisitions, lk.stat.contentions, lk.stat.wait_ns_total) == (2, 0, 0)
    assert lk.stat.hold_ns_total == 200  # 200..300 and 300..400
    assert r.counters.prof_ns[2]["_raw_spin_lock"] == 200


def test_release_by_non_holder_raises(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    lk = Spinlock(r.ctx, "lk", SpinlockKind.TICKET)
    a, b = Task(1, "a", cpu=0), Task(2, "b", cpu=1)
    with pytest.raises(RuntimeError, match="released by"):
        lk.release(a)  # not held at all
    assert lk.acquire(a) == 0
    assert lk.acquire(b) is PARK
    with pytest.raises(RuntimeError, match="lk: released by"):
        lk.release(b)


def test_lock_class_shares_one_stat(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    a = Spinlock(r.ctx, "ptl", SpinlockKind.QUEUED)
    b = Spinlock(r.ctx, "ptl", SpinlockKind.QUEUED)
    assert a.stat is b.stat and a.stat.instances == 2
    assert r.ctx.stats["ptl"].to_dict()["instances"] == 2
