"""mm/user_loops.py through memory.user_access on tiny (1.0 GHz, no SMT sibling running)."""

from __future__ import annotations

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.mm import memory
from mmsim.mm.mmap import MmStruct
from mmsim.mm.system import System
from mmsim.mm.user_loops import USEMEM_LOOP, USEMEM_RANDOM_LOOP


def test_loop_figures_are_the_native_measurement() -> None:
    assert USEMEM_LOOP == (3.3, 29.0)
    assert USEMEM_RANDOM_LOOP == (11.0, 67.0)


def test_a_cached_page_costs_the_loop_only() -> None:
    # a page just cleared is in the cache: 512 words x 3.3 cycles at 1 GHz = 1689.6 ns -> int + 1
    s = System(get_machine("tiny"), resolve("v6.7"), seed=0)
    t = Task(1, "t", cpu=0, mm=MmStruct(s, home_cpu=0))
    key = ("P", 1, 7)
    memory.clear_user_highpage(t, s, 0, key)
    ns = memory.user_access(t, s, 0, key, 1, 0, 1, True, USEMEM_LOOP, "usemem [user]")
    assert ns == 1690
    assert s.counters.profile_total()["usemem [user]"].insns == 512 * 29
