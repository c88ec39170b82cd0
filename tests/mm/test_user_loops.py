"""mm/user_loops.py through memory.user_access on tiny (1.0 GHz, no SMT sibling running)."""

from __future__ import annotations

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.mm import memory
from mmsim.mm.mmap import MmStruct
from mmsim.mm.system import System
from mmsim.mm.user_loops import USEMEM_LOOP, USEMEM_RANDOM_LOOP, UserLoop, loop_cost


def test_loop_cycles_follow_the_issue_width() -> None:
    assert USEMEM_LOOP == UserLoop(26.0, 29.0)
    assert loop_cost(get_machine("tiny"), USEMEM_LOOP) == (6.5, 29.0)  # default 4-wide
    assert loop_cost(get_machine("xeon-phi-7295"), USEMEM_LOOP) == (13.0, 29.0)  # 2-wide (Sodani et al.)
    assert loop_cost(get_machine("icelake-6338-2s"), USEMEM_LOOP) == (5.2, 29.0)
    assert loop_cost(get_machine("tiny"), USEMEM_RANDOM_LOOP) == (11.0, 67.0)  # measured cycles, as they are


def test_a_cached_page_costs_the_loop_only() -> None:
    # a page just cleared is in the cache: 512 words x 26 uops / 4 per cycle at 1 GHz = 3328 ns -> int + 1
    s = System(get_machine("tiny"), resolve("v6.7"), seed=0)
    t = Task(1, "t", cpu=0, mm=MmStruct(s, home_cpu=0))
    key = ("P", 1, 7)
    memory.clear_user_highpage(t, s, 0, key)
    ns = memory.user_access(t, s, 0, key, 1, 0, 1, True, USEMEM_LOOP, "usemem [user]")
    assert ns == 3329
    assert s.counters.profile_total()["usemem [user]"].insns == 512 * 29
