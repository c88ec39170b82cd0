"""Invariants of random small simulations (issue #9, part 2).

Hypothesis draws a workload with small parameters, a kernel, a machine
(tiny, or tiny with a different LLC) and a seed; every run must conserve
pages, keep lock statistics and counters consistent, and keep CPU time
within what the CPUs could have run.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmsim.kernels import KERNELS, resolve
from mmsim.machine import get_machine
from mmsim.metrics.events import PerfEvent, VmEvent
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params

# (workload, strategy of small -p values): everything runs in well under a second on tiny.
WORKLOADS: dict[str, Any] = {
    "thp_memscale": st.fixed_dictionaries({
        "threads": st.integers(1, 8).map(str),
        "bytes": st.sampled_from(["100k", "3m", "5m"]),
        "mode": st.sampled_from(["threads", "processes"]),
        "verify": st.sampled_from(["page", "none"]),
    }),
    "lockstress": st.fixed_dictionaries({
        "tasks": st.integers(1, 8).map(str),
        "iterations": st.integers(1, 200).map(str),
        "lock": st.sampled_from(["spinlock", "mutex", "rwsem-read", "rwsem-write"]),
    }),
    "vm-scalability/anon-w-seq": st.fixed_dictionaries({
        "nr_task": st.integers(1, 8).map(str), "size": st.sampled_from(["8m", "24m"])}),
    "vm-scalability/anon-r-seq": st.fixed_dictionaries({
        "nr_task": st.integers(1, 8).map(str), "size": st.sampled_from(["8m", "24m"])}),
    "vm-scalability/anon-cow-seq": st.fixed_dictionaries({
        "nr_task": st.integers(1, 4).map(str), "size": st.sampled_from(["8m", "20m"])}),
    "vm-scalability/anon-w-rand": st.fixed_dictionaries({
        "nr_task": st.integers(1, 4).map(str), "size": st.just("4m")}),
    "will-it-scale/page_fault1": st.fixed_dictionaries({
        "nr_task": st.integers(1, 8).map(str), "memsize": st.just("4194304"),
        "mode": st.sampled_from(["processes", "threads"])}),
    "lmbench/bw_unix": st.fixed_dictionaries({
        "pairs": st.integers(1, 8).map(str), "bytes": st.just("1048576"), "repetitions": st.just("1")}),
}


def _simulate(workload: str, params: dict[str, str], kernel: str, seed: int) -> System:
    w = get_workload(workload)
    p = resolve_params(w, params)
    s = System(get_machine("tiny"), resolve(kernel), seed)
    w.setup(s, p)
    s.engine.run()
    return s


def check_invariants(s: System) -> None:
    from mmsim.metrics.sampling import sim_now

    c = s.counters
    now = sim_now(s)  # the simulated time, a fast-forward's skipped time included
    assert now >= 0
    # non-negative counters everywhere
    for per_cpu in c.perf:
        assert all(v >= 0 for v in per_cpu)
    for per_cpu in c.vm:
        assert all(v >= 0 for v in per_cpu)
    for prof in c.prof_ns:
        assert all(v >= 0 for v in prof.values())
    # a CPU cannot have been busy for longer than the run lasted
    for cpu, per_cpu in enumerate(c.perf):
        assert per_cpu[PerfEvent.TASK_CLOCK] <= now, f"cpu {cpu} busy {per_cpu[PerfEvent.TASK_CLOCK]} > {now}"
    # the profile is the task clock, function by function
    assert sum(sum(p.values()) for p in c.prof_ns) == sum(p[PerfEvent.TASK_CLOCK] for p in c.perf)
    # counters that count the same thing agree
    perf, vm = c.perf_total(), c.vm_total()
    assert perf[PerfEvent.PAGE_FAULTS] == vm[VmEvent.PGFAULT]
    assert vm[VmEvent.THP_FAULT_ALLOC] <= vm[VmEvent.PGFAULT] + vm[VmEvent.COW_FAULT]
    assert perf[PerfEvent.CACHE_MISSES] <= perf[PerfEvent.CACHE_REFERENCES]
    # lock statistics
    for name, ls in s.locks.stats.items():
        assert 0 <= ls.contentions <= ls.acquisitions, name
        assert 0 <= ls.wait_ns_max <= ls.wait_ns_total, name
        assert 0 <= ls.hold_ns_max <= ls.hold_ns_total, name
    # page conservation: free (buddy + PCP) + allocated - freed = managed, per zone lists consistent
    pa = s.page_alloc
    in_use = vm[VmEvent.PGALLOC_NORMAL] - vm[VmEvent.PGFREE]
    assert in_use >= 0
    assert pa.free_pages_count() + in_use == sum(z.managed_pages for z in pa.zones)
    assert all(pa.buddy_free_pages(z) == z.free_pages for z in pa.zones)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    workload=st.sampled_from(sorted(WORKLOADS)),
    kernel=st.sampled_from(sorted(KERNELS)),
    seed=st.integers(0, 2**31),
)
def test_random_small_simulations_keep_invariants(data: Any, workload: str, kernel: str, seed: int) -> None:
    params = data.draw(WORKLOADS[workload])
    s = _simulate(workload, params, kernel, seed)
    check_invariants(s)


FIXED: dict[str, dict[str, str]] = {
    "thp_memscale": {"threads": "8", "bytes": "5m", "mode": "threads"},
    "lockstress": {"tasks": "8", "iterations": "100"},
    "vm-scalability/anon-w-seq": {"nr_task": "8", "size": "24m"},
    "vm-scalability/anon-r-seq": {"nr_task": "8", "size": "24m"},
    "vm-scalability/anon-cow-seq": {"nr_task": "4", "size": "20m"},
    "vm-scalability/anon-w-rand": {"nr_task": "4", "size": "4m"},
    "will-it-scale/page_fault1": {"nr_task": "8", "memsize": "4194304"},
    "lmbench/bw_unix": {"pairs": "4", "bytes": "1048576", "repetitions": "1"},
}


@pytest.mark.parametrize("kernel", ["v3.12", "v4.14", "v6.6"])
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_each_workload_at_full_concurrency_keeps_invariants(workload: str, kernel: str) -> None:
    check_invariants(_simulate(workload, FIXED[workload], kernel, 0))


def test_the_checks_can_fail() -> None:
    s = _simulate("vm-scalability/anon-w-seq", FIXED["vm-scalability/anon-w-seq"], "v6.6", 0)
    s.page_alloc.zones[0].free_pages += 1  # a leaked page
    with pytest.raises(AssertionError):
        check_invariants(s)
