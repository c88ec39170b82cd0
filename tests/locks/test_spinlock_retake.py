"""Re-takes ahead of a request in flight (session 11), on ``tiny``: two CPUs of one socket
(0 and 1: HITM and HIT 50 ns), a locked RMW on an owned line 18 ns (18 cycles at 1 GHz,
``locks.base.LOCAL_RMW_CYCLES``), hold 0.

A waiter's RMW that takes the line from its owner is in flight for the transfer (50 ns); until
its request reaches the owner (half-way, 25 ns: ``locks.base.SNOOP_SHARE``, session 25) the
owner's own RMWs complete locally, one after another (18 ns each), and push the request back
(cache lock). With think 0 the releaser comes straight back and takes the lock
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
    #   its request reaches CPU 0 at 25 (half the 50 ns round trip: locks.base.SNOOP_SHARE), its
    #   RMW completes at 50. CPU 0 releases (local store) and its xadd, on the line it still owns,
    #   takes the next ticket ahead of CPU 1's: 18 ns each, 0 -> 18 and 18 -> 36 (the second
    #   overruns the snoop by 11: the cache lock pushes it to 36 and CPU 1's RMW to 61).
    # 36: CPU 0's unlock store comes after the snoop: it queues behind CPU 1's RMW (61) and takes the
    #   line back (HITM 50: 111); CPU 1's re-read from CPU 0 (50), sent at the end of the PAUSE the
    #   invalidation found it in (tiny: 10 ns, 5 on average for one spinner; session 35): CPU 1 holds at
    #   166. CPU 0's xadd, issued at 36, is in the storm's window (its first re-read request reaches CPU 0
    #   at 141) but waits for its own unlock store to complete (locked RMWs drain the store buffer): 111 + 18.
    # From there strict alternation, 80 ns per hand-off (the unlock's RFO from the two readers, mean 25,
    #   then the PAUSE's 5 and the re-read, 50). CPU 0 is done after its 6th grant (566); CPU 1's last 2
    #   find the lock free on its own line (no request in flight: 0 ns).
    assert g == [(0, 0), (18, 0), (36, 0), (166, 1), (246, 0), (326, 1), (406, 0), (486, 1), (566, 0), (646, 1),
                 (646, 1), (646, 1)]
    st = lk.stat
    assert (st.acquisitions, st.acq_bounces, st.contentions) == (12, 7, 7)
    assert st.extra["retakes_ahead_of_inflight"] == 2


def test_queued_think0_fast_path_retakes_before_pending_lands(make_rig: Callable[[], Rig]) -> None:
    lk, g = _loop(make_rig(), SpinlockKind.QUEUED, think=0)
    # t=0: CPU 0 takes the word (0 ns); CPU 1's fast-path cmpxchg finds it locked and sets pending
    #   on the line it brought (one RMW): its request reaches CPU 0 at 25, the RMW lands at 50. CPU 0
    #   re-takes by the fast path at 0 -> 18 -> 36 (the second pushes the snoop to 36, the landing
    #   to 61), as the ticket lock does.
    # 36: CPU 0's unlock queues behind CPU 1's RMW (61), RFO 50 (111), CPU 1's re-read (50, after the 5 ns of
    #   PAUSE it is in on average, session 35): CPU 1 holds at 166; its clear_pending_set_locked, from the
    #   readers {1, 0} (mean 25), is a plain store it does not wait for (session 29), done at 191. CPU 0's
    #   fast-path cmpxchg at 36 (in the storm's window, after its unlock store: 129) found a hand-over under
    #   way: it waits it out, and at 166 makes its "trylock || pending" cmpxchg, queued behind CPU 1's store
    #   (191), from CPU 1: snoop at 216, landing at 241.
    # CPU 1 releases at 166, but its unlock store becomes visible only after its grant store (stores in
    #   program order): at 191; its next cmpxchg, made at 166, drains the store buffer first, so it is
    #   issued at 191 too. CPU 0's RMW is still in flight there: CPU 1 re-takes at 191 -> 209 -> 227 (the
    #   last overruns the snoop by 11: snoop 227, landing 252). 227: CPU 1's unlock queues behind the
    #   landing (252), RFO 50 + PAUSE 5 + re-read 50: CPU 0 holds at 357 (its store to 382). CPU 1's cmpxchg
    #   at 227 waits out that hand-over and at 357 makes its pending cmpxchg behind CPU 0's store (382), from
    #   CPU 0: snoop 407, landing 432. CPU 0's unlock (at 357) waits for its store (382), its cmpxchg with it:
    #   re-takes 382 -> 400 -> 418 (snoop and landing pushed by 11 to 418 / 443), and it is done; its unlock
    #   at 418 queues behind the landing (443): RFO 50 + PAUSE 5 + re-read 50: CPU 1 holds at 548, and its
    #   store, from its own copy, costs nothing; its last two grants are on its own line (0 ns).
    assert g == [(0, 0), (18, 0), (36, 0), (166, 1), (209, 1), (227, 1), (357, 0), (400, 0), (418, 0), (548, 1),
                 (548, 1), (548, 1)]
    st = lk.stat
    assert (st.acquisitions, st.acq_bounces, st.contentions) == (12, 3, 3)
    assert st.extra["retakes_ahead_of_inflight"] == 6
    assert st.extra["unlocks_behind_grant_stores"] == 2  # CPU 1's at 166, CPU 0's at 357
    assert "landed_on_free_lock" not in st.extra
    assert st.wait_ns_total == (166 - 0) + (357 - 36) + (548 - 227)  # CPU 1 from 0, CPU 0 from 36, CPU 1 from 227
    assert st.extra["pending_rmws"] == 2  # the two waits out a hand-over, each then an RMW
    assert st.extra["lock_word_stores"] == 3  # the three pending -> locked hand-overs


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
