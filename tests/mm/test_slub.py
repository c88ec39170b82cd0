"""SLUB (mm/slub.c, v6.6): cache geometry, and exact slab/object counts and page
conservation for scripted alloc/free sequences on ``tiny``.

kmalloc-4k on tiny (8 CPUs): ``min_objects = 4 * (fls(8) + 1) = 20``, capped by the
8 objects an order-3 slab holds, so order 3 and 8 objects; ``min_partial`` =
ilog2(4096) / 2 = 6; ``cpu_partial`` 6 objects → ``cpu_partial_slabs`` =
DIV_ROUND_UP(12, 8) = 2. CPUs 0 and 1 are both on node 0.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.machine.model import Machine
from mmsim.mm.page_alloc import PAGE_SIZE
from mmsim.mm.slub import (
    FREED,
    FULL,
    ON_CPU,
    ON_CPU_PARTIAL,
    ON_NODE_PARTIAL,
    SLAB_EVENTS,
    KmemCache,
    Slab,
    calculate_order,
    kmalloc_cache_name,
    kmalloc_size_roundup,
)
from mmsim.mm.system import System
from mmsim.net.skbuff import SKB_MAX_HEAD0, kmalloc_reserve_cache, skbuff_head_cache

WRITER, READER = 1, 0


def _system(m: Machine, kernel: str = "v6.6") -> tuple[System, KmemCache]:
    s = System(m, resolve(kernel), 0)
    return s, s.slab.kmalloc_slab(4096)


def _run(s: System, cpu: int, body: Any) -> None:
    t = Task(cpu, f"t{cpu}", cpu=cpu)
    s.sched.spawn(t, body(t))
    s.engine.run()


def _alloc(s: System, k: KmemCache, cpu: int, n: int) -> list[Slab]:
    out: list[Slab] = []

    def body(t: Task) -> Generator[Any, Any, None]:
        for _ in range(n):
            slab, pending = yield from s.slab.slab_alloc_node(t, k, 0)
            out.append(slab)
            if pending:
                yield pending

    _run(s, cpu, body)
    return out


def _free(s: System, cpu: int, objs: list[Slab]) -> None:
    def body(t: Task) -> Generator[Any, Any, None]:
        for slab in objs:
            pending = yield from s.slab.slab_free(t, slab, 0)
            if pending:
                yield pending

    _run(s, cpu, body)


def _stats(s: System) -> dict[str, int]:
    v = s.counters.vm_total()
    return {e.vmstat_name: v[e] for e in SLAB_EVENTS if v[e]}


def _conserved(s: System) -> None:
    pa = s.page_alloc
    assert pa.free_pages_count() + s.slab.slab_pages() == sum(z.managed_pages for z in pa.zones)


def test_geometry_on_icelake() -> None:
    s, k4 = _system(get_machine("icelake-6338-2s"))
    # 128 CPUs: min_objects 4 * (fls(128) + 1) = 36, capped at 8 by slub_max_order 3
    assert k4.geometry() == {"object_size": 4096, "slab_size": 4096, "order": 3, "objs_per_slab": 8,
                             "min_partial": 6, "cpu_partial": 6, "cpu_partial_slabs": 2}
    # struct sk_buff (232 B) cache-line aligned to 256: 36 objects need 9216 B, order 2
    assert skbuff_head_cache(s).geometry() == {
        "object_size": 232, "slab_size": 256, "order": 2, "objs_per_slab": 64, "min_partial": 5,
        "cpu_partial": 52, "cpu_partial_slabs": 2}
    small = kmalloc_reserve_cache(s, 320)
    assert (small.name, small.size, small.order, small.objects, small.cpu_partial_slabs) == (
        "skbuff_small_head", 640, 3, 51, 3)
    # the 3776-byte head of a full AF_UNIX skb: 3776 + 320 = 4096 -> kmalloc-4k
    assert kmalloc_reserve_cache(s, SKB_MAX_HEAD0) is k4


def test_kmalloc_sizes() -> None:
    assert [kmalloc_size_roundup(n) for n in (1, 8, 9, 65, 97, 129, 193, 640, 4096, 8192)] == [
        8, 8, 16, 96, 128, 192, 256, 1024, 4096, 8192]
    assert kmalloc_cache_name(4096) == "kmalloc-4k" and kmalloc_cache_name(96) == "kmalloc-96"
    with pytest.raises(ValueError):
        kmalloc_size_roundup(8193)
    assert calculate_order(4096, 8) == 3 and calculate_order(256, 8) == 1 and calculate_order(64, 1) == 0


def test_short_heads_are_kmalloc_before_v6_3(tiny: Machine) -> None:
    s, _ = _system(tiny, "v3.13")
    assert kmalloc_reserve_cache(s, 320).name == "kmalloc-1k"


def test_same_cpu_frees_take_the_fast_path(tiny: Machine) -> None:
    s, k = _system(tiny)
    objs = _alloc(s, k, WRITER, 3)
    assert len({id(o) for o in objs}) == 1 and objs[0].where == ON_CPU
    _free(s, WRITER, objs)
    _alloc(s, k, WRITER, 3)
    assert _stats(s) == {"slab_alloc_slowpath": 1, "slab_new": 1, "slab_alloc_fastpath": 5,
                         "slab_free_fastpath": 3}
    assert s.slab.objects_in_use(k) == 3 and k.cpu[WRITER].freelist == 5
    assert s.counters.vm_total()[0] == 8  # pgalloc_normal: one order-3 slab
    _conserved(s)


def test_remote_frees_into_the_frozen_cpu_slab_are_taken_back(tiny: Machine) -> None:
    s, k = _system(tiny)
    objs = _alloc(s, k, WRITER, 8)
    _free(s, READER, objs)  # the writer's CPU slab is frozen: cmpxchg only, no list, no lock
    slab = objs[0]
    assert slab.inuse == 0 and slab.frozen and k.cpu[READER].partial == []
    _alloc(s, k, WRITER, 1)  # c->freelist empty: get_freelist takes the 8 remote frees
    assert _stats(s) == {"slab_alloc_slowpath": 2, "slab_new": 1, "slab_alloc_fastpath": 7,
                         "slab_free_slowpath": 8, "slab_free_frozen": 8}
    assert slab.inuse == 8 and k.cpu[WRITER].freelist == 7 and s.slab.objects_in_use(k) == 1
    assert s.locks.stats["&n->list_lock"].acquisitions == 0
    _conserved(s)


def _full_slabs(s: System, k: KmemCache, n: int) -> list[list[Slab]]:
    """``n`` full slabs (unfrozen, on no list) and a current one with one object out."""
    objs = _alloc(s, k, WRITER, 8 * n + 1)
    return [objs[8 * i:8 * i + 8] for i in range(n)]


def test_remote_free_to_cpu_partial_then_unfreeze(tiny: Machine) -> None:
    s, k = _system(tiny)
    a, b, c = _full_slabs(s, k, 3)
    assert all(x[0].where == FULL and not x[0].frozen for x in (a, b, c))
    _free(s, READER, [a[0], b[0]])  # each full slab is frozen onto the reader's partial list
    assert k.cpu[READER].partial == [a[0], b[0]] and a[0].where == ON_CPU_PARTIAL
    _free(s, READER, [c[0]])  # the list holds cpu_partial_slabs (2): it goes to the node first
    n = k.node[0]
    assert k.cpu[READER].partial == [c[0]]
    assert n.partial == [b[0], a[0]] and b[0].where == ON_NODE_PARTIAL and not b[0].frozen
    assert _stats(s) == {"slab_alloc_slowpath": 4, "slab_new": 4, "slab_alloc_fastpath": 21,
                         "slab_free_slowpath": 3, "cpu_partial_free": 3, "cpu_partial_drain": 1,
                         "slab_free_add_partial": 2}
    assert s.locks.stats["&n->list_lock"].acquisitions == 1
    # the rest of b: it empties on the node list, which keeps it (nr_partial 2 < min_partial 6)
    _free(s, READER, b[1:])
    assert b[0].inuse == 0 and n.partial == [b[0], a[0]]
    assert s.locks.stats["&n->list_lock"].acquisitions == 2 and "slab_discard" not in _stats(s)
    assert s.slab.objects_in_use(k) == 8 * 3 + 1 - 10
    _conserved(s)


def test_get_partial_node_when_the_cpu_slab_is_full(tiny: Machine) -> None:
    s, k = _system(tiny)
    a, b, c = _full_slabs(s, k, 3)
    _free(s, READER, [a[0], b[0], c[0], a[1]])  # node list: b (1 free), a (2 free); reader: c
    d = _alloc(s, k, WRITER, 8)  # 7 left in the CPU slab d, then it is full
    assert d[-1] is not d[0] and d[0].where == FULL
    # get_partial_node took b's freelist (1 object) and put a on the writer's partial list
    assert d[-1] is b[0] and b[0].where == ON_CPU and k.cpu[WRITER].partial == [a[0]]
    assert k.node[0].partial == [] and a[0].frozen
    st = _stats(s)
    assert st["slab_alloc_from_partial"] == 1 and st["cpu_partial_node"] == 1 and st["slab_new"] == 4
    _alloc(s, k, WRITER, 1)  # b is empty again: the CPU partial list gives a
    assert _stats(s)["cpu_partial_alloc"] == 1 and k.cpu[WRITER].slab is a[0]
    _alloc(s, k, WRITER, 2)  # a had 2 free: then nothing partial anywhere, new_slab
    assert _stats(s)["slab_new"] == 5
    _conserved(s)


def test_discard_when_the_node_keeps_min_partial(tiny: Machine) -> None:
    s, k = _system(tiny)
    full = _full_slabs(s, k, 9)
    _free(s, READER, [x[0] for x in full])  # 4 drains of 2: 8 slabs on the node list, 1 on the CPU
    n = k.node[0]
    assert n.nr_partial == 8 and k.cpu[READER].partial == [full[8][0]]
    free_before = s.page_alloc.free_pages_count()
    first = n.partial[0]
    victim = next(x for x in full if x[0] is first)
    _free(s, READER, victim[1:])  # the last free empties it: nr_partial 8 >= 6 -> discard_slab
    assert first.where == FREED and n.nr_partial == 7
    st = _stats(s)
    assert st["slab_discard"] == 1 and st["cpu_partial_drain"] == 4
    assert s.page_alloc.free_pages_count() == free_before + 8  # order 3 back to the reader's PCP
    assert s.page_alloc.pcps[READER][0].count == 8
    assert s.slab.slab_pages() == 8 * 9
    _conserved(s)


def test_double_free_is_caught(tiny: Machine) -> None:
    s, k = _system(tiny)
    objs = _alloc(s, k, WRITER, 1)
    _free(s, READER, objs)
    with pytest.raises(RuntimeError, match="double free"):
        _free(s, READER, objs * 8)


def test_slab_pages_are_unmovable_and_sized(tiny: Machine) -> None:
    s, k = _system(tiny)
    objs = _alloc(s, k, WRITER, 1)
    z = s.page_alloc.zone_of(objs[0].pfn)
    assert z.pageblock_mt(objs[0].pfn) == 0  # MIGRATE_UNMOVABLE
    assert s.slab.slab_pages() * PAGE_SIZE == 8 * 4096


def test_concurrent_alloc_free_keeps_counts_and_pages(tiny: Machine) -> None:
    """Six CPUs on both nodes allocate and free each other's objects, interleaved by the
    engine (lock waits included); every object is freed in the end."""
    import random

    s, k = _system(tiny)
    pool: list[Slab] = []
    rng = random.Random(5)
    plans = {cpu: [rng.random() < 0.55 for _ in range(400)] for cpu in (0, 1, 2, 3, 4, 5)}

    def body(t: Task) -> Generator[Any, Any, None]:
        for alloc in plans[t.cpu]:
            if alloc or not pool:
                slab, pending = yield from s.slab.slab_alloc_node(t, k, 0)
                pool.append(slab)
            else:
                pending = yield from s.slab.slab_free(t, pool.pop(rng.randrange(len(pool))), 0)
            yield pending + 1

    for cpu in plans:
        t = Task(cpu, f"t{cpu}", cpu=cpu)
        s.sched.spawn(t, body(t))
    s.engine.run()
    assert s.slab.objects_in_use(k) == len(pool) > 0
    _conserved(s)
    _free(s, 3, pool)
    assert s.slab.objects_in_use(k) == 0
    st = _stats(s)
    assert st["slab_discard"] > 0 and st["cpu_partial_drain"] > 0 and s.locks.stats["&n->list_lock"].acquisitions
    assert sum(sl.inuse for sl in k.slabs.values()) == sum(c.freelist for c in k.cpu if c.slab is not None)
    _conserved(s)
