"""PCP refill/drain counts for scripted alloc/free sequences, under each
free_high policy, on ``tiny`` (and variants with the cache sizes that turn
PCPF_FREE_HIGH_BATCH on)."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.metrics.events import VmEvent
from mmsim.mm.page_alloc import MIGRATE_MOVABLE, PCPF_FREE_HIGH_BATCH, pcp_data_cache_bytes
from mmsim.mm.system import System

PARENT = ("ca71fe1ad922", "94a3bfe4073c")


def _system(m: Machine, kernel: str, patches: tuple[str, ...] = (), **over: str) -> System:
    return System(m, resolve(kernel, list(patches), over or None), 0)


def _run(s: System, cpu: int, body: Any) -> None:
    t = Task(cpu, f"t{cpu}", cpu=cpu)
    s.sched.spawn(t, body(t))
    s.engine.run()


def _alloc(s: System, cpu: int, order: int, n: int) -> list[int]:
    pfns: list[int] = []

    def body(t: Task) -> Generator[Any, Any, None]:
        for _ in range(n):
            pfn, pending = yield from s.page_alloc.alloc_pages_pfn(t, 0, order, MIGRATE_MOVABLE)
            pfns.append(pfn)
            if pending:
                yield pending

    _run(s, cpu, body)
    return pfns


def _free(s: System, cpu: int, blocks: list[tuple[int, int]]) -> None:
    def body(t: Task) -> Generator[Any, Any, None]:
        for pfn, order in blocks:
            pending = yield from s.page_alloc.free_pages(t, pfn, order)
            if pending:
                yield pending

    _run(s, cpu, body)


def _vm(s: System) -> dict[str, int]:
    v = s.counters.vm_total()
    return {e.vmstat_name: v[e] for e in (VmEvent.PCP_REFILL, VmEvent.PCP_DRAIN, VmEvent.PCP_DRAIN_PAGES,
                                          VmEvent.PCP_FREE_HIGH)}


def _big_llc(tiny: Machine) -> Machine:
    """tiny with a 4 MiB L3 per socket: a 1 MiB slice (256 pages) per CPU."""
    caches = tuple(dataclasses.replace(c, size_kib=4096) if c.name == "L3" else c for c in tiny.caches)
    return dataclasses.replace(tiny, name="tiny-4m-llc", caches=caches)


def _assert_conserved(s: System) -> None:
    pa = s.page_alloc
    v = s.counters.vm_total()
    in_use = v[VmEvent.PGALLOC_NORMAL] - v[VmEvent.PGFREE]
    assert pa.free_pages_count() + in_use == sum(z.managed_pages for z in pa.zones)
    assert all(pa.buddy_free_pages(z) == z.free_pages for z in pa.zones)


@pytest.mark.parametrize(
    ("kernel", "patches"),
    [("v6.6", ()), ("v6.6", PARENT), ("v6.6", (*PARENT, "362d37a106dd"))],
)
def test_order3_free_burst_on_tiny(tiny: Machine, kernel: str, patches: tuple[str, ...]) -> None:
    """CPU 0 allocates 40 order-3 blocks, CPU 1 frees them (the bw_unix pattern).
    tiny's LLC slice (64 pages) is not > 3 × batch (189), so PCPF_FREE_HIGH_BATCH
    stays off and the patched kernel behaves like its parent here."""
    s = _system(tiny, kernel, patches)
    pa = s.page_alloc
    assert not pa.pcps[1][0].flags & PCPF_FREE_HIGH_BATCH
    pfns = _alloc(s, 0, 3, 40)
    # rmqueue_pcplist: refills of max(63 >> 3, 2) = 7 blocks: 6 refills for 40 blocks, 2 left.
    assert _vm(s)["pcp_refill"] == 6
    assert pa.pcps[0][0].count == 2 * 8
    _free(s, 1, [(p, 3) for p in pfns])
    # Frees 1-31 fill CPU 1's PCP to 248 pages (< high 252). Free 32 → 256: a normal
    # drain of nr_pcp_free = batch 63 → 8 blocks (64 pages), free_factor 1. Free 33:
    # free_high (free_factor > 0, and the previous free was high-order) → drain all 200.
    # Frees 34-40: free_high each → 7 drains of 8 pages.
    assert _vm(s) == {"pcp_refill": 6, "pcp_drain": 9, "pcp_drain_pages": 320, "pcp_free_high": 8}
    assert pa.pcps[1][0].count == 0
    _assert_conserved(s)


def test_free_high_batch_keeps_batch_pages(tiny: Machine) -> None:
    """Same burst with a big LLC: the flag is on, free_high waits for count >= batch."""
    s = _system(_big_llc(tiny), "v6.6", (*PARENT, "362d37a106dd"))
    pa = s.page_alloc
    assert pa.pcps[1][0].flags & PCPF_FREE_HIGH_BATCH  # 256 pages > 3 × 63
    pfns = _alloc(s, 0, 3, 40)
    _free(s, 1, [(p, 3) for p in pfns])
    # Free 32: normal drain of 64 pages (free_factor 1). Free 33: count 200 >= 63 → free_high,
    # drain all. Frees 34-40 leave 8 .. 56 pages, all < batch 63: no drain.
    assert _vm(s) == {"pcp_refill": 6, "pcp_drain": 2, "pcp_drain_pages": 264, "pcp_free_high": 1}
    assert pa.pcps[1][0].count == 56
    _assert_conserved(s)


def test_prev_free_high_order_rule(tiny: Machine) -> None:
    """ca71fe1ad922: an order-0 free between two high-order frees stops free_high;
    f26b3fa04611 alone drains on every high-order free once free_factor is set."""
    counts = {}
    for name, patches in (("v6.6", ()), ("parent", PARENT)):
        s = _system(tiny, "v6.6", patches)
        big = _alloc(s, 0, 3, 32)
        small = _alloc(s, 0, 0, 8)
        # 32 order-3 frees: the 32nd reaches high (256 >= 252) → normal drain, free_factor 1.
        _free(s, 1, [(p, 3) for p in big])
        # then 8 × (an order-0 free, an order-3 free)
        more = _alloc(s, 0, 3, 8)
        _free(s, 1, [b for pair in zip([(p, 0) for p in small], [(p, 3) for p in more], strict=True) for b in pair])
        counts[name] = _vm(s)["pcp_free_high"]
        _assert_conserved(s)
    # v6.6: each of the 8 order-3 frees after an order-0 free is a free_high drain;
    # with ca71fe1ad922 none is (the previous free was order 0).
    assert counts == {"v6.6": 8, "parent": 0}


def test_order0_only_pcp_before_v5_14(tiny: Machine) -> None:
    """v3.13: only order 0 on the PCP, drains of `batch` pages when count reaches high."""
    s = _system(tiny, "v3.13")
    pa = s.page_alloc
    pfns = _alloc(s, 0, 0, 200)
    assert _vm(s)["pcp_refill"] == 7  # ceil(200 / 31)
    blocks3 = _alloc(s, 0, 3, 2)  # order 3 straight from the buddy lists, under zone->lock
    assert _vm(s)["pcp_refill"] == 7
    _free(s, 1, [(p, 0) for p in pfns] + [(p, 3) for p in blocks3])
    # Free 186 reaches high (6 × 31): one drain of batch = 31 pages (no free_factor before
    # v5.14) → 155; frees 187-200 end at 169, below high again. The order-3 blocks go
    # straight back to the buddy lists.
    assert _vm(s) == {"pcp_refill": 7, "pcp_drain": 1, "pcp_drain_pages": 31, "pcp_free_high": 0}
    assert pa.pcps[1][0].count == 200 - 31
    _assert_conserved(s)


@pytest.mark.parametrize(
    ("l2_kib", "gib", "flags"),
    [
        # tiny: v1 = 16 + 128 + 256 KiB = 100 pages, llc = 64 pages; batch 63: both off
        (256, 1.0, {"v1": False, "llc": False}),
        # 512 MiB nodes → batch 31 (cap 1 MiB: 128 pages /4 = 32 → 31): v1 100 > 124? no; llc 64 > 93? no
        (256, 0.5, {"v1": False, "llc": False}),
        # a 2 MiB L2 per 2 CPUs: v1 = 16 + 1024 + 256 KiB = 324 pages > 4 × 31; llc still 64 ≤ 93
        (2048, 0.5, {"v1": True, "llc": False}),
    ],
)
def test_free_high_batch_rules(tiny: Machine, l2_kib: int, gib: float, flags: dict[str, bool]) -> None:
    caches = tuple(
        dataclasses.replace(c, size_kib=l2_kib) if c.name == "L2" else c for c in tiny.caches
    ) if l2_kib != 256 else tiny.caches
    nodes = tuple(dataclasses.replace(n, memory_gib=gib) for n in tiny.nodes)
    m = dataclasses.replace(tiny, name="tiny-var", caches=caches, nodes=nodes)
    for rule, on in flags.items():
        s = _system(m, "v6.6", (), pcp_free_high_batch=rule)
        mult = 4 if rule == "v1" else 3
        assert (pcp_data_cache_bytes(m, rule) >> 12 > mult * s.page_alloc.zones[0].batch) is on
        assert bool(s.page_alloc.pcps[0][0].flags & PCPF_FREE_HIGH_BATCH) is on


def test_icelake_flags_both_rules() -> None:
    from mmsim.machine import get_machine

    m = get_machine("icelake-6338-2s")
    # merged: 48 MiB / 64 CPUs = 768 KiB = 192 pages > 189; v1: 24 + 640 + 768 KiB = 358 pages > 252
    assert pcp_data_cache_bytes(m, "llc") >> 12 == 192
    assert pcp_data_cache_bytes(m, "v1") >> 12 == 358
    for rule in ("v1", "llc"):
        s = System(m, resolve("v6.6", overrides={"pcp_free_high_batch": rule}), 0)
        assert all(p.flags & PCPF_FREE_HIGH_BATCH for row in s.page_alloc.pcps for p in row)
