"""/proc/vmstat names: only what the kernel prints goes under ``vmstat`` / ``proc-vmstat.``; the model's own
counters go under ``counters`` / ``mmsim.`` (issue 21)."""

from __future__ import annotations

import pytest

from mmsim.experiments.run import RunSpec, run
from mmsim.metrics.events import PROC_VMSTAT, VmEvent
from mmsim.results.store import flat_metrics

# vmstat_text entries of mm/vmstat.c (torvalds/linux at 00c010e130e5) for the items the model produces
KERNEL_NAMES = {"pgalloc_normal", "pgfree", "pgfault", "pgmajfault", "thp_fault_alloc", "thp_fault_fallback",
                "htlb_buddy_alloc_success", "numa_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
                "numa_pages_migrated", "pgmigrate_success",
                # CONFIG_PER_VMA_LOCK_STATS (v6.4, 52f238653e45)
                "vma_lock_success", "vma_lock_abort", "vma_lock_retry", "vma_lock_miss",
                # CONFIG_TRANSPARENT_HUGEPAGE (v4.5+), issue 15's THP COW split
                "thp_split_pmd"}


def test_proc_vmstat_members_are_exactly_the_kernel_names() -> None:
    assert {e.vmstat_name for e in PROC_VMSTAT} == KERNEL_NAMES
    model_only = {e.vmstat_name for e in VmEvent} - KERNEL_NAMES
    assert {"pcp_refill", "pcp_drain", "pcp_drain_pages", "pcp_free_high", "cow_fault", "slab_new",
            "cpu_partial_drain"} <= model_only


@pytest.mark.usefixtures("use_tiny_preset")
def test_a_run_splits_vmstat_from_model_counters() -> None:
    r = run(RunSpec("lmbench/bw_unix", "tiny", "v6.6",
                    params={"pairs": "1", "bytes": "1m", "warmup": "1", "repetitions": "1"}))
    assert set(r.vmstat) == KERNEL_NAMES
    assert set(r.counters) == {e.vmstat_name for e in VmEvent} - KERNEL_NAMES
    assert r.counters["pcp_refill"] > 0 and r.counters["slab_new"] > 0
    d = r.to_dict()
    flat = flat_metrics(d)
    assert {k.removeprefix("proc-vmstat.") for k in flat if k.startswith("proc-vmstat.")} == KERNEL_NAMES
    assert flat["mmsim.pcp_refill"] == r.counters["pcp_refill"]
    assert "proc-vmstat.pcp_refill" not in flat and "proc-vmstat.slab_new" not in flat
    assert list(d).index("counters") == list(d).index("sim") + 1
