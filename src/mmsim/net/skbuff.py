"""sk_buffs (net/core/skbuff.c, net/core/sock.c), at the depth AF_UNIX needs.

An skb is a ``struct sk_buff`` from the ``skbuff_head_cache`` slab cache, a
linear head from a slab cache too (``kmalloc_reserve``: the head plus
``skb_shared_info``, cache-line aligned, from ``skbuff_small_head`` if it fits
in ``SKB_SMALL_HEAD_CACHE_SIZE`` (v6.3+), else from the kmalloc cache of that
size: a 3776-byte head is exactly 4096 B, ``kmalloc-4k``) and page fragments
from the page allocator; the slab caches are :mod:`mmsim.mm.slub`'s. The
allocating CPU takes all three; ``consume_skb`` frees them on the consuming
CPU. A unix socket allocates with ``GFP_KERNEL_ACCOUNT``, so each of the three
is charged to the task's memcg and uncharged where it is freed
(:mod:`mmsim.mm.memcg_kmem`; policy ``memcg_kmem``). ``alloc_skb_with_frags`` (v6.2+,
09c2c90705bb) takes the largest order <= the requested one that the
remaining data fills — ``while (order && PAGE_ALIGN(data_len) < (PAGE_SIZE
<< order)) order--`` — so a 32768-byte fragment is one order-3 page and
28672 bytes are an order-2, an order-1 and an order-0 page. The pages are
GFP_KERNEL: MIGRATE_UNMOVABLE.

Copies whose far side is another core's cache (the reader's copy out of
lines the writer just wrote; the writer's copy into a fragment the reader
freed while its lines were still cached) run at the rate Little's law gives
for the lines a streaming copy keeps in flight (``CostModel.copy_mlp``) and
the line transfer between the two CPUs (:meth:`Machine.xfer_ns`). On the
presets ``copy_mlp`` is the L1D fill buffers (10), the rule they use for a
core's clear bandwidth (``FILL_BUFFERS`` x 64 B / latency); ``mmsim
calibrate`` measures it on the host as the line transfer over the ns per
line of a 64 KiB ``rep movsb`` copy of lines another CPU just wrote
(native/mb.c ``xcopy``).

A copy into a *cold* fragment (its lines in no cache) is a store stream from
a cached source (the writer's user buffer, in its own L2) to DRAM: it runs
as ``copy_page`` with a cached source does in :func:`mmsim.mm.memory.copy_pages`,
a write stream at the node's shared write bandwidth capped at one core's
(``core_clear_gbs``, :meth:`MemoryBandwidth.write_ns`), not at DRAM latency
over ``copy_mlp``: ``copy_mlp`` is measured between two cores' caches and
says nothing about a stream to DRAM (docs/validation.md, session 17: on this
host it measured 16-40 lines in flight with the vCPU placement, which moved
the simulated cold copy 2.5x while the native cold copy stayed at ~9 ns per
line).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES
from mmsim.mm import memcg_kmem
from mmsim.mm.buddy import MIGRATE_UNMOVABLE
from mmsim.mm.costs import path
from mmsim.mm.page_alloc import PAGE_SIZE
from mmsim.mm.slub import SLAB_HWCACHE_ALIGN, KmemCache, Slab, kmalloc_size_roundup

LINE = 64  # SMP_CACHE_BYTES on x86-64
# include/linux/skbuff.h on x86-64, v6.6: sizeof(struct skb_shared_info) with MAX_SKB_FRAGS 17 is 320 B
# (already a multiple of SMP_CACHE_BYTES); SKB_MAX_HEAD(0) = SKB_WITH_OVERHEAD(PAGE_SIZE) = 4096 - 320.
SHINFO_SIZE = 320
SKB_MAX_HEAD0 = PAGE_SIZE - SHINFO_SIZE
# sizeof(struct sk_buff) on x86-64, v6.6 (pahole): 232 B; skbuff_head_cache (SLAB_HWCACHE_ALIGN) and
# SKB_TRUESIZE's SKB_DATA_ALIGN both round it to 256.
SKB_STRUCT_OBJECT = 232
SKB_STRUCT_SIZE = 256
# SKB_SMALL_HEAD_CACHE_SIZE (bf9f1baa279f): SKB_HEAD_ALIGN(MAX_TCP_HEADER). With x86-64 distribution
# configs MAX_TCP_HEADER = L1_CACHE_ALIGN(128 + MAX_HEADER) = L1_CACHE_ALIGN(128 + 176) = 320, so
# 320 + 320 = 640 B (not a power of two: no extra line).
SKB_SMALL_HEAD_CACHE_SIZE = 640
# mm/memcontrol.c obj_full_size(): an accounted object is charged its slab size plus the obj_cgroup pointer
OBJCG_PTR = 8


def skb_data_align(n: int) -> int:
    """``SKB_DATA_ALIGN``: up to a multiple of SMP_CACHE_BYTES."""
    return -(-n // LINE) * LINE


class Skb:
    __slots__ = ("len", "head_len", "frags", "truesize", "consumed", "writer_cpu", "skb_slab", "head_slab",
                 "head_charge")

    def __init__(
        self, head_len: int, length: int, frags: list[tuple[int, int, bool]], truesize: int, writer_cpu: int,
        skb_slab: Slab | None = None, head_slab: Slab | None = None,
    ) -> None:
        self.head_len = head_len
        self.len = length
        self.frags = frags  # (pfn, order, hot when allocated)
        self.truesize = truesize
        self.consumed = 0
        self.writer_cpu = writer_cpu
        self.skb_slab = skb_slab  # the slab the struct sk_buff came from
        self.head_slab = head_slab  # the slab of the linear head
        self.head_charge = 0  # bytes the head charged to the memcg (obj_full_size), 0 when not accounted


def skbuff_head_cache(system: Any) -> KmemCache:
    """``skb_init``: ``skbuff_head_cache`` of ``sizeof(struct sk_buff)``, SLAB_HWCACHE_ALIGN."""
    c: KmemCache = system.slab.kmem_cache_create("skbuff_head_cache", SKB_STRUCT_OBJECT, SLAB_HWCACHE_ALIGN)
    return c


def kmalloc_reserve_cache(system: Any, size: int) -> KmemCache:
    """``kmalloc_reserve`` (v6.6): the cache a head of ``size`` bytes comes from.
    ``SKB_HEAD_ALIGN(size)`` (head + shared info, each cache-line aligned) from
    ``skbuff_small_head`` if it fits there (bf9f1baa279f), else the kmalloc cache
    of ``kmalloc_size_roundup`` of it."""
    obj = skb_data_align(size) + SHINFO_SIZE
    if obj <= SKB_SMALL_HEAD_CACHE_SIZE and system.policy("skb_small_head") == "on":
        c: KmemCache = system.slab.kmem_cache_create("skbuff_small_head", SKB_SMALL_HEAD_CACHE_SIZE,
                                                     SLAB_HWCACHE_ALIGN)
        return c
    k: KmemCache = system.slab.kmalloc_slab(kmalloc_size_roundup(obj))
    return k


def alloc_skb_with_frags(
    task: Task, system: Any, header_len: int, data_len: int, order: int, pending: int,
) -> Generator[Any, Any, tuple[Skb, int]]:
    """``alloc_skb_with_frags`` (v6.6). Returns the skb and busy ns not yet yielded."""
    pa = system.page_alloc
    slub = system.slab
    node = system.machine.cpu_node(task.cpu)
    ns, ins = path("alloc_skb_with_frags", system.machine.freq_ghz)
    pending += system.counters.busy(task.cpu, "alloc_skb_with_frags", ns, ins)
    # __alloc_skb: kmem_cache_alloc_node(skbuff_head_cache), then kmalloc_reserve of the head
    skb_slab, pending = yield from slub.slab_alloc_node(task, skbuff_head_cache(system), pending)
    pending += memcg_kmem.charge_object(task, system, SKB_STRUCT_SIZE + OBJCG_PTR)  # __GFP_ACCOUNT (af_unix)
    head_cache = kmalloc_reserve_cache(system, header_len)
    head_slab, pending = yield from slub.slab_alloc_node(task, head_cache, pending)
    head_charge = head_cache.size + OBJCG_PTR
    pending += memcg_kmem.charge_object(task, system, head_charge)
    frags: list[tuple[int, int, bool]] = []
    truesize = SKB_STRUCT_SIZE + head_cache.object_size  # SKB_TRUESIZE(SKB_WITH_OVERHEAD(ksize))
    left = data_len
    while left:
        while order and -(-left // PAGE_SIZE) * PAGE_SIZE < PAGE_SIZE << order:
            order -= 1
        pfn, pending = yield from pa.alloc_pages_pfn(task, node, order, MIGRATE_UNMOVABLE, pending)
        frags.append((pfn, order, pa.last_alloc_hot))
        pending += memcg_kmem.charge_page(task, system, order)  # __alloc_pages: __memcg_kmem_charge_page
        chunk = min(left, PAGE_SIZE << order)
        truesize += PAGE_SIZE << order
        left -= chunk
    skb = Skb(header_len, header_len + data_len, frags, truesize, task.cpu, skb_slab, head_slab)
    skb.head_charge = head_charge
    return skb, pending


def copy_ns(system: Any, cpu: int, nbytes: int, latency_ns: float) -> int:
    """A copy of ``nbytes`` whose far side has ``latency_ns`` per line: Little's
    law on the ``copy_mlp`` lines in flight."""
    return int(nbytes / LINE * latency_ns / system.machine.cost.copy_mlp) + 1


def skb_copy_from_iter(task: Task, system: Any, skb: Skb, peer_cpu: int, func: str) -> int:
    """``skb_copy_datagram_from_iter``: the writer fills the head and the frags.
    A hot fragment's lines come from the reader's cache (it read them last); a
    cold one is a store stream to its node's DRAM; the user buffer is in the writer's own L2. Charges
    and returns the ns; counts LLC references (every skb line misses L2) and
    misses (the lines of cold fragments)."""
    m = system.machine
    cpu = task.cpu
    c = system.counters
    hot_lat = m.xfer_ns(peer_cpu, cpu, modified=False) or m.cost.line_xfer_smt_ns  # read, not written, by the peer
    left = skb.len - skb.head_len
    ns = copy_ns(system, cpu, skb.head_len, hot_lat) if skb.head_len else 0
    cold_lines = 0
    now = system.engine.now
    for pfn, order, hot in skb.frags:
        b = min(PAGE_SIZE << order, left)  # the data in this fragment
        left -= b
        system.cache.touch(cpu, pfn, order, b, now)
        if hot:
            ns += copy_ns(system, cpu, b, hot_lat)
        else:  # a store stream to DRAM, sharing the node's write bandwidth (module docstring)
            node = system.page_alloc.page_node(pfn)
            ns += system.bandwidth.write_ns(node, b, m.cost.core_clear_gbs, now + ns)
            cold_lines += b // LINE
    p = c.perf[cpu]
    p[CACHE_REFERENCES] += skb.len // LINE
    p[CACHE_MISSES] += cold_lines
    charged: int = c.busy(cpu, func, ns, skb.len // 8)
    return charged


def skb_copy_to_iter(task: Task, system: Any, skb: Skb, nbytes: int, func: str) -> int:
    """``skb_copy_datagram_iter``: the reader copies ``nbytes`` the writer just
    wrote (lines modified in the writer's cache) into its own user buffer."""
    m = system.machine
    cpu = task.cpu
    lat = m.xfer_ns(skb.writer_cpu, cpu, modified=True) or m.cost.line_xfer_smt_ns
    now = system.engine.now
    left = skb.len - skb.head_len
    same_llc = system.cache.of_cpu(cpu) is system.cache.of_cpu(skb.writer_cpu)
    for pfn, order, _ in skb.frags:  # the reader pulls the fragments' lines into its caches
        b = min(PAGE_SIZE << order, left)
        left -= b
        system.cache.touch(cpu, pfn, order, b, now, reread=same_llc)
    system.counters.perf[cpu][CACHE_REFERENCES] += nbytes // LINE
    charged: int = system.counters.busy(cpu, func, copy_ns(system, cpu, nbytes, lat), nbytes // 8)
    return charged


def skb_release_data(task: Task, system: Any, skb: Skb, pending: int) -> Generator[Any, Any, int]:
    """``consume_skb`` → ``skb_release_data``: ``put_page`` of every fragment on
    the consuming CPU, i.e. ``free_unref_page`` of each compound page, in frag
    order, then ``skb_free_head`` (``kfree`` or ``kmem_cache_free`` of the small
    head). Returns busy ns not yet yielded."""
    pa = system.page_alloc
    for pfn, order, _ in skb.frags:
        pending += memcg_kmem.uncharge_page(task, system, order)  # free_pages_prepare
        pending = yield from pa.free_pages(task, pfn, order, pending)
    skb.frags = []
    if skb.head_slab is not None:
        pending += memcg_kmem.uncharge_object(task, system, skb.head_charge)  # __memcg_slab_free_hook
        pending = yield from system.slab.slab_free(task, skb.head_slab, pending)
        skb.head_slab = None
    return pending


def kfree_skbmem(task: Task, system: Any, skb: Skb, pending: int) -> Generator[Any, Any, int]:
    """``kfree_skbmem``: ``kmem_cache_free(skbuff_head_cache, skb)`` on the consuming CPU."""
    if skb.skb_slab is not None:
        pending += memcg_kmem.uncharge_object(task, system, SKB_STRUCT_SIZE + OBJCG_PTR)
        pending = yield from system.slab.slab_free(task, skb.skb_slab, pending)
        skb.skb_slab = None
    return pending
