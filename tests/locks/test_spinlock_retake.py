"""Re-takes ahead of a request in flight (session 11), on ``tiny``: two CPUs of one socket
(0 and 1: HITM and HIT 50 ns), a locked RMW on an owned line 18 ns (18 cycles at 1 GHz,
``locks.base.LOCAL_RMW_CYCLES``), hold 0.

A waiter's RMW that takes the line from its owner is in flight for the transfer (50 ns); the
owner's own RMWs meanwhile complete locally, one after another (18 ns each), and push the
request back (cache lock). With think 0 the releaser comes straight back and takes the lock
again while the other CPU's RMW is in flight; with think 100 (> the transfer) it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from conftest import Rig
from mmsim.engine.core import Task
from mmsim.locks.spinlock import Spinlock, SpinlockKind


def _loop(r: Rig, kind: SpinlockKind, think: int, iters: int = 6) -> tuple[Spinlock, list[tuple[int, int]]]:
    """CPUs 0 and 1 each take the lock ``iters`` times (hold 0, ``think`` after each release), both
    starting at t=0, CPU 0 first. Returns the lock and the (time, cpu) of every grant, in order."""
    lk = Spinlock(r.ctx, "lk", kind, home_cpu=0)
    grants: list[tuple[int, int]] = []

    def body(t: Task) -> Generator[Any, Any, None]:
        for _ in range(iters):
            yield lk.acquire(t)
            grants.append((r.engine.now, t.cpu))
            lk.release(t)
            if think:
                yield r.counters.busy(t.cpu, "think", think)

    for i in (0, 1):
        t = Task(i, f"t{i}", cpu=i)
        r.engine.start(t, body(t))
    r.engine.run()
    return lk, grants


def test_ticket_think0_releaser_retakes_while_the_xadd_is_in_flight(make_rig: Callable[[], Rig]) -> None:
    lk, g = _loop(make_rig(), SpinlockKind.TICKET, think=0)
    # t=0: CPU 0 takes the lock on its own line (0 ns); CPU 1's xadd takes the line from CPU 0:
    #   in flight until 50. CPU 0 releases (local store) and its xadd, on the line it still owns,
    #   takes the next ticket ahead of CPU 1's: 18 ns each, at 0 -> 18, 18 -> 36, 36 -> 54 (the
    #   last pushes CPU 1's arrival from 50 to 54). At 54 CPU 1's xadd has its ticket: CPU 0's
    #   release takes the line back (HITM 50) and CPU 1's re-read comes from CPU 0 (50): 154.
    #   From there the releaser's own xadd (right after its unlock store, before the waiter's
    #   re-read has left) is always ahead of nothing: strict alternation, 75 ns per hand-off (the
    #   unlock's RFO from the two readers, mean 25, then the re-read, 50). CPU 0 is done after
    #   its 6th grant (379); CPU 1's last 3 find the lock free on its own line (no request in
    #   flight: 0 ns).
    assert g == [(0, 0), (18, 0), (36, 0), (54, 0), (154, 1), (229, 0), (304, 1), (379, 0),
                 (454, 1), (454, 1), (454, 1), (454, 1)]
    st = lk.stat
    assert (st.acquisitions, st.acq_bounces, st.contentions) == (12, 5, 5)
    assert st.extra["retakes_ahead_of_inflight"] == 3


def test_queued_think0_fast_path_retakes_before_pending_lands(make_rig: Callable[[], Rig]) -> None:
    lk, g = _loop(make_rig(), SpinlockKind.QUEUED, think=0)
    # t=0: CPU 0 takes the word (0 ns); CPU 1's fast-path cmpxchg finds it locked and sets
    #   pending on the line it brought (one RMW), in flight until 50: CPU 0 re-takes by the fast
    #   path at 0 -> 18 -> 36 -> 54 (arrival pushed to 54), as the ticket lock does.
    # 54: CPU 0's unlock takes the line from CPU 1 (50), CPU 1's re-read (50): its
    #   clear_pending_set_locked at 154, from the readers {1, 0} (mean 25): CPU 1 holds at 179.
    #   CPU 0's fast-path cmpxchg at 54 found 0,1,0 (a hand-over under way): it waits it out,
    #   and at 154 makes its "trylock || pending" cmpxchg, queued behind CPU 1's store (179),
    #   from CPU 1 (50): in flight until 229. CPU 1 meanwhile re-takes by the fast path at
    #   179 -> 197 -> 215 -> 233 (arrival pushed to 233). 233: CPU 1's unlock hands to CPU 0
    #   pending: RFO 50 + re-read 50 (333) + store 25 = 358; CPU 1's cmpxchg at 233 waits out
    #   that hand-over, and at 333 its pending cmpxchg queues behind CPU 0's store (358) and
    #   takes the line from CPU 0: in flight until 408. CPU 0 re-takes once (358 -> 376) and is
    #   done; CPU 1's pending lands on a free lock at 408, and its last grant is on its own line
    #   with nothing in flight (0 ns).
    assert g == [(0, 0), (18, 0), (36, 0), (54, 0), (179, 1), (197, 1), (215, 1), (233, 1),
                 (358, 0), (376, 0), (408, 1), (408, 1)]
    st = lk.stat
    # CPU 1's last pending cmpxchg found the lock free when it landed: no contention after all
    assert (st.acquisitions, st.acq_bounces, st.contentions) == (12, 3, 2)
    assert st.extra["retakes_ahead_of_inflight"] == 7
    assert st.extra["landed_on_free_lock"] == 1
    assert st.wait_ns_total == (179 - 0) + (358 - 54)  # CPU 1 from its issue at 0, CPU 0 from 54
    assert st.extra["pending_rmws"] == 2  # the two waits out a hand-over, each then an RMW
    assert st.extra["lock_word_stores"] == 2  # the two pending -> locked hand-overs


@pytest.mark.parametrize("kind", [SpinlockKind.TICKET, SpinlockKind.QUEUED])
def test_think_longer_than_the_transfer_alternates(make_rig: Callable[[], Rig], kind: SpinlockKind) -> None:
    lk, g = _loop(make_rig(), kind, think=100)
    # t=0: CPU 0 takes the lock; CPU 1's RMW is in flight until 50. CPU 0's release at 0 finds
    #   it in flight: the lock is free until it lands. CPU 0 thinks until 100; at 50 CPU 1's
    #   RMW finds the lock free: CPU 1 holds (its RMW took 50 ns) and releases. Each later acquire takes
    #   the line from the other CPU (50), which has released and is thinking: every acquisition
    #   a hand-off, 150 ns apart per CPU.
    assert g == [(0, 0), (50, 1), (150, 0), (200, 1), (300, 0), (350, 1), (450, 0), (500, 1),
                 (600, 0), (650, 1), (750, 0), (800, 1)]
    st = lk.stat
    # Every RMW found the lock free when it landed: no contention, no wait (lock_stat counts a
    # contention only when the trylock fails); 6 of them were issued while the other CPU held it.
    assert (st.acquisitions, st.acq_bounces, st.contentions, st.wait_ns_total) == (12, 11, 0, 0)
    assert st.extra["landed_on_free_lock"] == 6
    assert "retakes_ahead_of_inflight" not in st.extra
