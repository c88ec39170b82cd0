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


def test_fault_user_share_is_335_cycles_per_fault() -> None:
    from mmsim.mm.user_loops import FAULT_USER_CYCLES, fault_user_ns

    assert FAULT_USER_CYCLES == 335.0  # native measurement, see mm/user_loops.py
    assert fault_user_ns(get_machine("tiny"), 1000) == 335_000.0  # 1.0 GHz
    assert fault_user_ns(get_machine("xeon-e5-2699v3-2s"), 23) == 23 * 335.0 / 2.3


def _usemem_run(case: str) -> tuple[dict[str, float], int, int]:
    """``case`` on tiny (1.0 GHz: profile cycles = ns), 8 MiB in 4 KiB pages, v6.7: (metrics, the loop's
    ns, page faults)."""
    from mmsim.experiments.run import RunSpec, run

    r = run(RunSpec(f"vm-scalability/{case}", "tiny", "v6.7", policies={"thp": "never"},
                    params={"nr_task": "1", "size": "8m"}))
    loop = next(int(p["cycles"]) for p in r.profile if p["symbol"] == "usemem [user]")
    return r.metrics, loop, int(r.vmstat["pgfault"])


def test_user_time_is_the_loop_plus_each_user_faults_tick_share() -> None:
    m, loop, faults = _usemem_run("anon-r-seq")
    assert faults == 2048  # 8 MiB of zero-page read faults
    assert round(m["vm-scalability.time.user_time"] * 1e9) == loop + faults * 335


def test_populate_faults_are_not_user_mode_faults() -> None:
    # anon-cow-seq: the parent's MAP_POPULATE faults (GUP, no exception) count no user share; the
    # child's COW write faults do
    m, loop, faults = _usemem_run("anon-cow-seq")
    populate = 2048
    assert faults == 2 * populate
    assert round(m["vm-scalability.time.user_time"] * 1e9) == loop + (faults - populate) * 335
