"""CacheLine / AtomicCounter: a contended line is a serial resource."""

from __future__ import annotations

from collections.abc import Callable

from conftest import Rig
from mmsim.engine.core import Task
from mmsim.locks.base import CacheLine
from mmsim.locks.rwsem import AtomicCounter, RwSem
from mmsim.locks.spinlock import Spinlock, SpinlockKind
from mmsim.machine.model import Machine


def test_three_cpus_rmw_at_the_same_instant(tiny: Machine) -> None:
    line = CacheLine(tiny, owner=0)
    # All at t=0, in this order; each waits for the previous, then pays the transfer
    # from the previous owner: 0→2 200; 2→4 200 (socket 1 → 0); 4→1 50 (same socket).
    assert line.rmw(2, 0) == 200
    assert line.rmw(4, 0) == 400
    assert line.rmw(1, 0) == 450
    assert (line.free_at, line.owner, line.transfers) == (450, 1, 3)
    # The owner again, later: no transfer.
    assert line.rmw(1, 450) == 0
    assert line.transfers == 3


def test_atomic_counter_stats(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    ctr = AtomicCounter(r.ctx, "mm->rss_stat", home_cpu=0)
    ds = [ctr.add(Task(i, "t", cpu=cpu), "add_mm_counter") for i, cpu in enumerate([2, 4, 1])]
    assert ds == [200, 400, 450]
    st = ctr.stat
    assert st.kind == "atomic"
    # Two of three queued for the line: for 200 and 400 ns.
    assert (st.acquisitions, st.contentions, st.wait_ns_total) == (3, 2, 600)
    assert r.counters.prof_ns[2]["add_mm_counter"] == 200
    assert r.counters.prof_ns[4]["add_mm_counter"] == 400
    assert r.counters.prof_ns[1]["add_mm_counter"] == 450


def test_atomic_counter_wait_max(make_rig: Callable[[], Rig]) -> None:
    r = make_rig()
    ctr = AtomicCounter(r.ctx, "ctr", home_cpu=0)
    for i, cpu in enumerate([2, 4, 1]):
        ctr.add(Task(i, "t", cpu=cpu), "f")
    assert ctr.stat.wait_ns_max == 400


def test_false_sharing_spinners_slow_an_unrelated_atomic(make_rig: Callable[[], Rig]) -> None:
    """A ticket spinlock and an rwsem count on one line (as in struct mm_struct):
    a write to the count sets off the spinners' re-read storm."""
    r = make_rig()
    line = CacheLine(r.ctx.machine, owner=0)
    lk = Spinlock(r.ctx, "ptl", SpinlockKind.TICKET, line=line)
    sem = RwSem(r.ctx, "sem", line=line)
    holder, spinner = Task(1, "h", cpu=0), Task(2, "s", cpu=2)
    assert lk.acquire(holder) == 0  # line on CPU 0 already
    lk.acquire(spinner)  # xadd: 0→2 200; then CPU 2 spins on the line
    assert line.free_at == 200 and line.nspin == 1
    # A reader on CPU 1 at t=0: waits for the line until 200, 2→1 200 → 400; the
    # spinner re-reads it from CPU 1 after its PAUSE (tiny: 10 cycles at 1 GHz, P / 2 = 5 ns
    # for one spinner, session 35) (HITM 200): the line is busy until 605.
    assert sem.down_read(Task(3, "r", cpu=1)) == 400
    assert line.free_at == 605
    # A second reader (CPU 5, SMT sibling of 1): waits until 605; the line is Shared and
    # its forwarder is the last reader, CPU 2 (HIT 200) → 805; CPU 2 re-reads (5 + 200): free at 1010.
    assert sem.down_read(Task(4, "r2", cpu=5)) == 805
    assert line.free_at == 1010
    assert sem.stat.extra["line_wait_ns"] == 200 + 605
