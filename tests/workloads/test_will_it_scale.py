"""will-it-scale page_fault1 on ``tiny``: ops, faults, and every page back after munmap."""

from __future__ import annotations

import pytest

from mmsim.experiments.run import RunSpec, run
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.metrics.events import VmEvent
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params


@pytest.mark.usefixtures("use_tiny_preset")
@pytest.mark.parametrize("mode", ["processes", "threads"])
def test_page_fault1_metrics(mode: str) -> None:
    r = run(RunSpec("will-it-scale/page_fault1", "tiny", "v6.6", policies={"thp": "never"},
                    params={"nr_task": "2", "mode": mode, "memsize": "4m", "loops": "2"}))
    per = "per_thread_ops" if mode == "threads" else "per_process_ops"
    assert set(r.metrics) == {f"will-it-scale.{per}", "will-it-scale.workload"}
    assert r.metrics[f"will-it-scale.{per}"] > 0
    assert r.metrics["will-it-scale.workload"] == pytest.approx(2 * r.metrics[f"will-it-scale.{per}"], rel=0.2)
    # every page written faults once (THP off): 2 tasks x 2 loops x 1024 pages
    assert r.vmstat["pgfault"] == 2 * 2 * 1024 and r.vmstat["thp_fault_alloc"] == 0
    assert r.command == f"page_fault1_{mode} -t 2"


@pytest.mark.parametrize("mode", ["processes", "threads"])
@pytest.mark.parametrize("thp", ["always", "never"])
@pytest.mark.parametrize("kernel", ["v3.13", "v6.6"])
def test_munmap_gives_every_page_back(mode: str, thp: str, kernel: str) -> None:
    w = get_workload("will-it-scale/page_fault1")
    p = resolve_params(w, {"nr_task": "3", "mode": mode, "memsize": "6m", "loops": "2"})
    s = System(get_machine("tiny"), resolve(kernel, overrides={"thp": thp}), 0)
    w.setup(s, p)
    s.engine.run()
    pa = s.page_alloc
    v = s.counters.vm_total()
    in_use = v[VmEvent.PGALLOC_NORMAL] - v[VmEvent.PGFREE]
    # conservation: free (buddy + PCPs) + in use = total
    assert pa.free_pages_count() + in_use == sum(z.managed_pages for z in pa.zones)
    assert all(pa.buddy_free_pages(z) == z.free_pages for z in pa.zones)
    # what is still in use is exactly the PMD tables (one per PUD per mm, plus the
    # ones threads racing on an empty PUD allocated and lost)
    assert all(key[1] == "pud" for key in pa.owned)
    assert in_use == sum(len(v) for v in pa.owned.values()) >= (1 if mode == "threads" else 3)
    if thp == "always":
        assert v[VmEvent.THP_FAULT_ALLOC] > 0
