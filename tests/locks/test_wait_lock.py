"""The rwsem's ``wait_lock`` (docs/locks.md, session 27) on ``tiny``: a sleeper's section (queueing itself),
a waker's (the store to each woken waiter's ``waiter.task`` and, before 133e89ef5ef3, its wake-up's IPI), FIFO
order and spinning, and the wake-up at its place in the section. Costs: the count's line at home CPU 0; HITM
50 ns in a socket (CPUs 0-1, 2-3), 200 across; a woken sleeper runs 7000 ns after its wake-up
(wakeup_ns + ctx_switch_ns); the reschedule IPI is set to 300 ns here; L: a locked RMW on a line the CPU owns."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_rwsem import Log, _spawn

from conftest import Rig
from mmsim.locks.rwsem import RwSem, RwsemPolicy


def _sem(r: Rig, inside: bool) -> RwSem:
    r.sched.wake_ipi_ns = 300
    return RwSem(r.ctx, "sem", home_cpu=0, policy=RwsemPolicy(wait_lock=True, wake_in_wait_lock=inside))


@pytest.mark.parametrize("inside", [True, False])
def test_a_sleeper_queues_in_a_section_and_is_woken_at_its_place_in_the_wakers(
        make_rig: Callable[[], Rig], inside: bool) -> None:
    r = make_rig()
    sem = _sem(r, inside)
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
    _spawn(r, sem, log, 2, "r1", 1, False, 1000, 100)
    r.engine.run()
    L = sem.line.local_ns
    # r1 at 100 (CPU 1): its failed RMW 0 -> 1, 50 ns (the line free at 150); its wait_lock RMW queues behind
    # it to 150 and finds the line its own; the lock is free: the section 150 .. 150 + L (an empty list: only
    # the count's adjustment); it sleeps at 150 + L.
    # w1 at 10,000 (CPU 0): up_write's RMW 1 -> 0, 50 ns (free at 10,050); rwsem_wake's wait_lock RMW queues
    # to 10,050; its section: the store to r1's waiter (0 -> 1, 50), r1's IPI (300) inside the section or
    # after the unlock, the count's adjustment (L). r1 is woken there and runs 7000 ns later.
    wake = 10_050 + 50 + (300 if inside else L + 300)
    assert log == [("w1", "in", 0), ("w1", "out", 10_000), ("r1", "in", wake + 7000),
                   ("r1", "out", wake + 8000)]
    st = r.ctx.stats["&sem->wait_lock"]
    assert (st.acquisitions, st.contentions, st.wait_ns_total) == (2, 0, 0)
    assert st.hold_ns_total == L + (50 + L + (300 if inside else 0))
    assert r.counters.prof_ns[1]["_raw_spin_lock_irq"] == 50  # r1's RMW queued for the line
    assert r.counters.prof_ns[0]["_raw_spin_lock_irq"] == 50  # w1's, behind its own up_write
    assert r.counters.prof_ns[0]["rwsem_wake"] == 50 + L
    assert r.counters.prof_ns[0]["smp_send_reschedule"] == 300
    assert sem.stat.wait_ns_total == wake - 100  # r1's wait: from its down_read to its wake-up
    # without the wait_lock (before session 27): r1 woken by up_write at 10,000, its IPI after it
    r0 = make_rig()
    r0.sched.wake_ipi_ns = 300
    sem0 = RwSem(r0.ctx, "sem", home_cpu=0, policy=RwsemPolicy())
    log0: Log = []
    _spawn(r0, sem0, log0, 1, "w1", 0, True, 10_000, 0)
    _spawn(r0, sem0, log0, 2, "r1", 1, False, 1000, 100)
    r0.engine.run()
    assert log0[2] == ("r1", "in", 10_000 + 7000) and "&sem->wait_lock" not in r0.ctx.stats


def test_a_sleeper_arriving_during_a_wakers_section_spins_until_it_ends(make_rig: Callable[[], Rig]) -> None:
    """FIFO: a reader that must queue while a waker holds wait_lock spins on the line until the waker's
    unlock, then takes it over (one HITM from the waker's CPU)."""
    r = make_rig()
    sem = _sem(r, True)
    log: Log = []
    _spawn(r, sem, log, 1, "w1", 0, True, 10_000, 0)
    _spawn(r, sem, log, 2, "r1", 1, False, 1000, 100)
    _spawn(r, sem, log, 3, "w2", 1, True, 1000, 200)  # queued behind r1: v3.x wakes r1 only
    _spawn(r, sem, log, 4, "r3", 2, False, 1000, 10_060)
    r.engine.run()
    # r3 at 10,060 finds w2 queued: it must sleep; its wait_lock RMW lands while w1's section (from 10,050)
    # holds the lock, so it spins until w1's unlock plus the hand-off 0 -> 2 (200)
    L = sem.line.local_ns
    w1_end = 10_050 + 50 + 300 + L
    assert r.counters.prof_ns[2]["_raw_spin_lock_irq"] == w1_end + 200 - 10_060
    assert log[2] == ("r1", "in", 10_050 + 50 + 300 + 7000)  # woken inside w1's section, after its IPI
    # six sections: three sleepers queueing (r1, w2, r3) and three wakers (w1 waking r1, r1's up_read waking
    # w2, w2's up_write waking r3); only r3's waited
    st = r.ctx.stats["&sem->wait_lock"]
    assert (st.acquisitions, st.contentions, st.wait_ns_total) == (6, 1, w1_end + 200 - 10_060)
