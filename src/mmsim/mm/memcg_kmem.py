"""Kernel memory charged to the task's memory cgroup: ``__GFP_ACCOUNT`` pages and slab objects
(mm/memcontrol.c, mm/memcontrol-v1.c; torvalds/linux as stored, v6.12-v6.18 text).

Since Vladimir Davydov's "af_unix: charge buffers to kmemcg" (linux-mm 2016-05-23, [PATCH 8/8] of the
kmemcg series; merged for v4.8 by its thread's dates, the commit id not checked in the store), a
unix socket allocates with ``sk->sk_allocation = GFP_KERNEL_ACCOUNT`` (net/unix/af_unix.c
``unix_create1``), so every skb of a stream socket charges its memcg three times: the ``struct
sk_buff`` and the linear head (``kmem_cache_alloc_node`` / ``kmalloc_reserve`` with ``__GFP_ACCOUNT``:
``__memcg_slab_post_alloc_hook``) and each fragment page (``__alloc_pages`` → ``__memcg_kmem_charge_page``).
The consuming CPU uncharges them (``__memcg_slab_free_hook``, ``__memcg_kmem_uncharge_page``).

What the kernel does, and what this module charges:

* a page charge, ``obj_cgroup_charge_pages(objcg, gfp, nr)``: ``try_charge_memcg`` takes ``nr`` pages
  from this CPU's ``memcg_stock`` when it holds them (``consume_stock``), else charges a batch of
  ``max(MEMCG_CHARGE_BATCH, nr)`` to ``memcg->memory`` (``page_counter_try_charge``: an atomic add on
  the usage of every level from the memcg up to the root) and keeps the rest in the stock; then
  ``memcg1_account_kmem`` (**cgroup v1 only**): ``page_counter_charge(&memcg->kmem, nr)``, an atomic
  on every level of the kmem counters, *not* batched; and ``mod_memcg_state(MEMCG_KMEM)`` (per CPU).
* a page uncharge, ``obj_cgroup_uncharge_pages``: ``memcg1_account_kmem(-nr)`` (v1: an atomic per
  level), then ``refill_stock``: the pages go to this CPU's stock, and a stock above
  ``MEMCG_CHARGE_BATCH`` is drained (``drain_stock``: ``page_counter_uncharge`` on every level).
* an object charge, ``obj_cgroup_charge(objcg, gfp, size)``: from this CPU's byte stock
  (``consume_obj_stock``) when it holds ``size`` bytes, else whole pages by ``obj_cgroup_charge_pages``
  and the remainder of the last page to the byte stock (``refill_obj_stock``).
* an object uncharge: ``refill_obj_stock(objcg, size, true)``: bytes to this CPU's byte stock; whole
  pages above ``PAGE_SIZE`` go back by ``obj_cgroup_uncharge_pages``.

Each level's ``page_counter`` usage sits on its own cache line (``CACHELINE_PADDING`` in struct
page_counter), an :class:`AtomicCounter` here, so a charge on one CPU and an uncharge on another move
each level's line between them. One memcg, one objcg: the stocks always hold it.

Page tables (policy ``pgtable_account``, 3e79ec7 "arch: x86: charge page tables to kmemcg", v4.8): x86's
``pte_alloc_one``, ``pmd_alloc_one`` and ``pud_alloc_one`` allocate a user mm's tables with
``GFP_KERNEL_ACCOUNT``, so each new table is a page charge (:func:`charge_pgtable`) and each freed one an
uncharge (:func:`uncharge_pgtable`). Simplifications: the uncharge is made by the unmapping CPU when the
table leaves the page tables (the kernel's comes at the page's free, after the TLB flush or the RCU
batch). The page stock and the page counters are also mm/lru_anon.py's, for the user pages it charges
(the kernel has one ``memcg_stock`` per CPU and one ``page_counter`` per level for both).

Policy ``memcg_kmem``: ``off`` (the tasks are in the root memcg, which ``current_obj_cgroup`` does not
charge), ``v2`` or ``v1`` (the cgroup version: only v1 has the unbatched kmem counters); policy
``memcg_levels``: page counters from the task's memcg up to the root. ``mmsim validate`` reads both for
the host from ``/proc/self/cgroup`` (:func:`mmsim.native.sysinfo.memcg`).
"""

from __future__ import annotations

from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.rwsem import AtomicCounter

PAGE_SIZE = 4096
MEMCG_CHARGE_BATCH = 64  # include/linux/memcontrol.h (v6.12)
# (cycles, instructions), estimates from the C bodies named (v6.12), each plausible 0.5-2x:
# __memcg_kmem_charge_page: current_obj_cgroup, obj_cgroup_tryget, obj_cgroup_charge_pages' fast path
# (obj_cgroup_memcg, consume_stock under local_lock), mod_memcg_state, page->memcg_data
KMEM_CHARGE_PAGE = (120, 100)
# __memcg_kmem_uncharge_page: page_objcg, obj_cgroup_uncharge_pages (mod_memcg_state, refill_stock under
# local_lock), page->memcg_data = 0, obj_cgroup_put
KMEM_UNCHARGE_PAGE = (100, 90)
# __memcg_slab_post_alloc_hook for one object: current_obj_cgroup, the slab's obj_exts vector,
# obj_cgroup_charge (consume_obj_stock), obj_cgroup_get, mod_objcg_state(NR_SLAB_UNRECLAIMABLE_B)
SLAB_CHARGE_OBJ = (110, 100)
# __memcg_slab_free_hook for one object: obj_exts lookup, refill_obj_stock, mod_objcg_state, obj_cgroup_put
SLAB_UNCHARGE_OBJ = (90, 80)


class MemcgKmem:
    """One memcg's page counters and every CPU's charge stocks."""

    __slots__ = ("version", "memory", "kmem", "stock", "obj_stock", "charges", "uncharges", "pgtables",
                 "pgtable_charges")

    def __init__(self, s: Any, version: str, levels: int) -> None:
        self.version = version
        self.memory = [AtomicCounter(s.locks, "memcg->memory.usage", 0) for _ in range(levels)]
        self.kmem = [AtomicCounter(s.locks, "memcg->kmem.usage", 0) for _ in range(levels)] if version == "v1" else []
        ncpus = s.machine.ncpus
        self.stock = [0] * ncpus  # memcg_stock_pcp.nr_pages
        self.obj_stock = [0] * ncpus  # obj_stock_pcp.nr_bytes
        self.charges = 0  # page counter batches charged (memory) and drained
        self.uncharges = 0
        self.pgtables = s.policy("pgtable_account") == "on"
        self.pgtable_charges = 0  # page tables charged, minus those uncharged


def state(s: Any) -> MemcgKmem | None:
    """The system's kmem accounting, made on first use; None when policy ``memcg_kmem`` is off."""
    st: MemcgKmem | None = getattr(s, "memcg_kmem", None)
    if st is None:
        version = s.policy("memcg_kmem")
        if version == "off":
            return None
        st = MemcgKmem(s, version, int(s.policy("memcg_levels")))
        s.memcg_kmem = st
    return st


def _busy(task: Task, s: Any, func: str, c: tuple[int, int]) -> int:
    ns: int = s.counters.busy(task.cpu, func, int(c[0] / s.machine.freq_ghz), c[1])
    return ns


def _charge_pages(task: Task, s: Any, st: MemcgKmem, nr: int, func: str) -> int:
    """``obj_cgroup_charge_pages``: ``try_charge_memcg`` (stock, else a batch on every level), then the
    v1 kmem counters."""
    cpu = task.cpu
    ns = 0
    if st.stock[cpu] >= nr:
        st.stock[cpu] -= nr
    else:
        batch = max(MEMCG_CHARGE_BATCH, nr)
        for ctr in st.memory:
            ns += ctr.add(task, "page_counter_try_charge")
        st.stock[cpu] += batch - nr
        st.charges += 1
    for ctr in st.kmem:  # memcg1_account_kmem
        ns += ctr.add(task, "page_counter_charge")
    return ns


def _uncharge_pages(task: Task, s: Any, st: MemcgKmem, nr: int) -> int:
    """``obj_cgroup_uncharge_pages``: the v1 kmem counters, then ``refill_stock`` (draining a stock above
    ``MEMCG_CHARGE_BATCH`` on every level)."""
    cpu = task.cpu
    ns = 0
    for ctr in st.kmem:  # memcg1_account_kmem(memcg, -nr)
        ns += ctr.add(task, "page_counter_uncharge")
    st.stock[cpu] += nr
    if st.stock[cpu] > MEMCG_CHARGE_BATCH:  # drain_stock
        for ctr in st.memory:
            ns += ctr.add(task, "page_counter_uncharge")
        st.stock[cpu] = 0
        st.uncharges += 1
    return ns


def charge_page(task: Task, s: Any, order: int) -> int:
    """``__memcg_kmem_charge_page`` of a new ``__GFP_ACCOUNT`` page of ``order``; returns its ns (0 when
    the tasks are in the root memcg)."""
    st = state(s)
    if st is None:
        return 0
    return _busy(task, s, "__memcg_kmem_charge_page", KMEM_CHARGE_PAGE) + \
        _charge_pages(task, s, st, 1 << order, "__memcg_kmem_charge_page")


def uncharge_page(task: Task, s: Any, order: int) -> int:
    """``__memcg_kmem_uncharge_page`` when an accounted page of ``order`` is freed; returns its ns."""
    st = state(s)
    if st is None:
        return 0
    return _busy(task, s, "__memcg_kmem_uncharge_page", KMEM_UNCHARGE_PAGE) + _uncharge_pages(task, s, st, 1 << order)


def charge_object(task: Task, s: Any, size: int) -> int:
    """``__memcg_slab_post_alloc_hook`` for one ``__GFP_ACCOUNT`` object of ``size`` bytes
    (``obj_full_size``): ``obj_cgroup_charge``. Returns its ns."""
    st = state(s)
    if st is None:
        return 0
    cpu = task.cpu
    ns = _busy(task, s, "__memcg_slab_post_alloc_hook", SLAB_CHARGE_OBJ)
    if st.obj_stock[cpu] >= size:  # consume_obj_stock
        st.obj_stock[cpu] -= size
        return ns
    nr_pages, nr_bytes = size // PAGE_SIZE, size % PAGE_SIZE
    if nr_bytes:
        nr_pages += 1
    ns += _charge_pages(task, s, st, nr_pages, "__memcg_slab_post_alloc_hook")
    if nr_bytes:  # refill_obj_stock(objcg, PAGE_SIZE - nr_bytes, false)
        st.obj_stock[cpu] += PAGE_SIZE - nr_bytes
    return ns


def uncharge_object(task: Task, s: Any, size: int) -> int:
    """``__memcg_slab_free_hook`` for one accounted object: ``refill_obj_stock(objcg, size, true)``,
    returning whole pages above ``PAGE_SIZE`` of stock. Returns its ns."""
    st = state(s)
    if st is None:
        return 0
    cpu = task.cpu
    ns = _busy(task, s, "__memcg_slab_free_hook", SLAB_UNCHARGE_OBJ)
    st.obj_stock[cpu] += size
    if st.obj_stock[cpu] > PAGE_SIZE:
        nr_pages = st.obj_stock[cpu] // PAGE_SIZE
        st.obj_stock[cpu] %= PAGE_SIZE
        ns += _uncharge_pages(task, s, st, nr_pages)
    return ns


def charge_pgtable(task: Task, s: Any) -> int:
    """A new user page table (``pte_alloc_one`` / ``pmd_alloc_one`` / ``pud_alloc_one``) with policy
    ``pgtable_account`` on: its ``__memcg_kmem_charge_page``. Returns its ns (0 when not charged)."""
    st = state(s)
    if st is None or not st.pgtables:
        return 0
    st.pgtable_charges += 1
    return charge_page(task, s, 0)


def uncharge_pgtable(task: Task, s: Any) -> int:
    """A user page table freed (``free_pgtables`` / ``zap_deposited_table`` → ``pte_free``): its
    ``__memcg_kmem_uncharge_page``. Returns its ns."""
    st = state(s)
    if st is None or not st.pgtables:
        return 0
    st.pgtable_charges -= 1
    return uncharge_page(task, s, 0)


def skip_pgtables(s: Any, cpu: int, n: int) -> None:
    """The state ``n`` page-table charges on ``cpu`` leave, without their time (a fast-forward skip's or a
    set-up's functional part): the CPU's page stock, as :func:`mmsim.mm.lru_anon.skip_new_folios` keeps
    its own."""
    st = state(s)
    if st is None or not st.pgtables or n <= 0:
        return
    st.pgtable_charges += n
    short = n - st.stock[cpu]
    if short <= 0:
        st.stock[cpu] -= n
        return
    refills = -(-short // MEMCG_CHARGE_BATCH)  # one batch of 64 each time the stock runs out
    st.stock[cpu] = refills * MEMCG_CHARGE_BATCH - short
    st.charges += refills
