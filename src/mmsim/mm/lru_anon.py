"""Anonymous folios on the LRU and their memcg charge (mm/swap.c, mm/memcontrol.c, v6.12).

What malloc1's munmap contends on after d4148aeab412 (the robot profile: ``folio_lruvec_lock_irqsave``
under ``lru_add_drain`` 36.4% and under ``folios_put_refs`` → ``__page_cache_release`` 36.8% of cycles):

* fault: ``folio_add_lru_vma`` → ``folio_add_lru``: the folio goes on this CPU's ``cpu_fbatches.lru_add``
  batch (no lock); a full batch, or any large folio (``folio_test_large``), is moved at once by
  ``folio_batch_move_lru``: ``lruvec->lru_lock`` (irqsave), ``lru_add_fn`` per folio.
* munmap: ``vms_clear_ptes`` → ``lru_add_drain`` moves this CPU's batch the same way; ``tlb_finish_mmu``
  → ``free_pages_and_swap_cache`` → ``folios_put_refs`` → ``__page_cache_release``: per folio
  ``folio_lruvec_relock_irqsave`` (relocking only when the lruvec changes) and ``lruvec_del_folio``;
  then ``__mem_cgroup_uncharge_folios`` → ``uncharge_batch`` → ``page_counter_uncharge`` (an atomic on
  each level's ``memory.usage``, shared by every CPU charging to that memcg).
* charge: ``mem_cgroup_charge`` → ``try_charge``: a 4 KiB page comes from this CPU's stock, refilled
  ``MEMCG_CHARGE_BATCH`` (64) pages at a time with one ``page_counter_try_charge``; a THP (512 pages
  > 64) charges the page counters directly.

All tasks are in one memcg (LKP runs the test in one cgroup), so there is one lruvec per node, each
with its own ``lru_lock``. Each lock holder also pulls the lruvec's list head and LRU size lines (and,
on delete, the neighbouring folio's ``lru`` link) from the previous holder.

Enabled per System by the workloads that need it (``enable``): the seed workloads were validated
before this model existed and keep their numbers. A tmpfs file (mm/shmem.py) enables it: its
page-cache folios take the same batches and ``lru_lock`` (not recorded for munmap: they stay cached).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.rwsem import AtomicCounter
from mmsim.locks.spinlock import Spinlock
from mmsim.mm import memcg_kmem

PAGEVEC_SIZE = 15  # include/linux/pagevec.h (v6.6)
MEMCG_CHARGE_BATCH = 64  # include/linux/memcontrol.h
LRU_LOCK_CLASS = "&lruvec->lru_lock"
# (cycles, instructions), estimates from the C bodies named:
LRU_ADD_FN = (60, 60)  # lru_add_fn per folio: folio_set_lru, lruvec_add_folio, update_lru_size
LRU_DEL_FN = (60, 60)  # __page_cache_release per folio: lruvec_del_folio, __folio_clear_lru_flags
UNCHARGE_BATCH = (200, 200)  # __mem_cgroup_uncharge_folios + uncharge_batch bookkeeping, memcg_check_events
CHARGE = (150, 150)  # mem_cgroup_charge: get_mem_cgroup_from_mm, consume_stock, commit_charge
# estimate: lines of lruvec state a holder pulls from the previous one (list head, lru_zone_size;
# a delete also the neighbour folio's lru link); plausible 1-4
ADD_LINES, DEL_LINES = 2, 3
# mm/swap.c (v6.7) folio_activate_fn per folio under lru_lock: lruvec_del_folio, folio_set_active,
# lruvec_add_folio, __count_vm_events(PGACTIVATE), __count_memcg_events: the delete and add bodies above
# plus ~30 for the events. estimate (plausible 100-250)
ACTIVATE_FN = (150, 150)
# folio_activate outside the lock: the folio_test_* checks, folio_get (an atomic on the held struct page
# line), local_lock, folio_batch_add; and folios_put's reference drop after the move. estimate (plausible 20-80)
ACTIVATE_ADD = (40, 30)


class AnonLru:
    """Per-node ``lruvec->lru_lock`` and per-CPU ``lru_add`` batches, and the memcg page counters."""

    def __init__(self, s: Any) -> None:
        m = s.machine
        first = {}
        for c in range(m.ncpus - 1, -1, -1):
            first[m.cpu_node(c)] = c
        self.locks = [Spinlock(s.locks, LRU_LOCK_CLASS, s.spin_kind, first.get(n, 0)) for n in range(len(m.nodes))]
        self.batches: list[list[int]] = [[] for _ in range(m.ncpus)]
        self.activate: list[list[int]] = [[] for _ in range(m.ncpus)]  # cpu_fbatches.activate (nodes)
        self.nr_activated = 0
        # One memcg_stock per CPU and one page_counter per level serve user and kmem charges alike
        # (mm/memcontrol.c try_charge_memcg): mm/memcg_kmem.py's, whose policies (memcg_kmem, memcg_levels)
        # say which memcg the tasks are in. In the root memcg (memcg_kmem=off) try_charge returns before
        # any page counter: no levels.
        k = memcg_kmem.state(s)
        self.counters: list[AtomicCounter] = k.memory if k is not None else []
        self.stock: list[int] = k.stock if k is not None else [0] * m.ncpus  # pages of each CPU's stock
        self.nr_lru = [0] * len(m.nodes)
        self.folios: dict[tuple[int, int], list[int]] = {}  # (id(mm), PMD slot) -> nodes of its LRU folios


def enable(s: Any) -> AnonLru:
    st: AnonLru | None = getattr(s, "anon_lru", None)
    if st is None:
        st = AnonLru(s)
        s.anon_lru = st
    return st


def state(s: Any) -> AnonLru | None:
    st: AnonLru | None = getattr(s, "anon_lru", None)
    return st


def _cyc(s: Any, c: tuple[int, int], n: int = 1) -> tuple[int, int]:
    return int(c[0] * n / s.machine.freq_ghz), c[1] * n


def _locked(task: Task, s: Any, lk: Spinlock, n: int, per: tuple[int, int], lines: int, func: str
            ) -> Generator[Any, Any, None]:
    """``lru_lock`` held for ``n`` folios: the body, plus the lruvec lines pulled from the last holder."""
    prev = lk.last_cpu
    yield lk.acquire(task)
    cpu = task.cpu
    pull = int(lines * s.machine.xfer_ns(prev, cpu, modified=True)) if 0 <= prev != cpu else 0
    ns, ins = _cyc(s, per, n)
    yield s.counters.busy(cpu, func, ns + pull, ins)
    lk.release(task)


def folio_batch_move_lru(task: Task, s: Any, st: AnonLru) -> Generator[Any, Any, None]:
    """mm/swap.c ``folio_batch_move_lru(fbatch, lru_add_fn)``, relocking when the node changes."""
    b = st.batches[task.cpu]
    for node, n in _node_runs(b):
        yield from _locked(task, s, st.locks[node], n, LRU_ADD_FN, ADD_LINES, "folio_batch_move_lru")
        st.nr_lru[node] += n
    b.clear()


def _node_runs(b: list[int]) -> list[tuple[int, int]]:
    """The batch's folios as runs of one node, in order: (node, folios); ``folio_batch_move_lru`` relocks
    ``lru_lock`` at each change of lruvec."""
    runs: list[tuple[int, int]] = []
    for node in b:
        if runs and runs[-1][0] == node:
            runs[-1] = (node, runs[-1][1] + 1)
        else:
            runs.append((node, 1))
    return runs


def folio_add_lru(task: Task, s: Any, node: int, large: bool) -> Generator[Any, Any, None]:
    """mm/swap.c ``folio_add_lru`` (no-op unless :func:`enable` was called for this System)."""
    st = state(s)
    if st is None:
        return
    b = st.batches[task.cpu]
    b.append(node)
    if large or len(b) >= PAGEVEC_SIZE:
        yield from folio_batch_move_lru(task, s, st)


def lru_add_drain(task: Task, s: Any) -> Generator[Any, Any, None]:
    """mm/swap.c ``lru_add_drain`` → ``lru_add_drain_cpu``: move this CPU's ``lru_add`` batch, then
    (``folio_activate_drain``) its ``activate`` batch."""
    st = state(s)
    if st is not None and st.batches[task.cpu]:
        yield from folio_batch_move_lru(task, s, st)
    if st is not None and st.activate[task.cpu]:
        yield from _move_activate(task, s, st)


def _move_activate(task: Task, s: Any, st: AnonLru) -> Generator[Any, Any, None]:
    """``folio_batch_move_lru(fbatch, folio_activate_fn)`` on this CPU's ``activate`` batch, relocking
    ``lru_lock`` when the node changes (the folios stay on the LRU: no size change)."""
    b = st.activate[task.cpu]
    for node, n in _node_runs(b):
        yield from _locked(task, s, st.locks[node], n, ACTIVATE_FN, DEL_LINES, "folio_activate_fn")
    b.clear()


def folio_activate(task: Task, s: Any, nodes: list[int]) -> Generator[Any, Any, None]:
    """mm/swap.c ``folio_activate`` (v6.7) of order-0 folios on ``nodes`` that are on the LRU, inactive
    and evictable: each goes on this CPU's ``activate`` batch; a full batch (``PAGEVEC_SIZE``) is moved at
    once. Counts ``pgactivate``. Nothing unless :func:`enable` was called."""
    st = state(s)
    if st is None or not nodes:
        return
    b = st.activate[task.cpu]
    ns, ins = _cyc(s, ACTIVATE_ADD, len(nodes))
    yield s.counters.busy(task.cpu, "folio_activate", ns, ins)
    st.nr_activated += len(nodes)
    for node in nodes:
        b.append(node)
        if len(b) >= PAGEVEC_SIZE:
            yield from _move_activate(task, s, st)


def release_folios(task: Task, s: Any, nodes: list[int]) -> Generator[Any, Any, None]:
    """``folios_put_refs`` → ``__page_cache_release`` for folios on ``nodes`` (in unmap order), then
    ``__mem_cgroup_uncharge_folios``: one ``page_counter_uncharge`` per memcg level."""
    st = state(s)
    if st is None or not nodes:
        return
    i = 0
    while i < len(nodes):
        node = nodes[i]
        j = i
        while j < len(nodes) and nodes[j] == node:
            j += 1
        yield from _locked(task, s, st.locks[node], j - i, LRU_DEL_FN, DEL_LINES, "__page_cache_release")
        st.nr_lru[node] -= j - i
        i = j
    ns, ins = _cyc(s, UNCHARGE_BATCH)
    yield s.counters.busy(task.cpu, "__mem_cgroup_uncharge_folios", ns, ins)
    for ctr in st.counters:
        yield ctr.add(task, "page_counter_cancel")


def mem_cgroup_charge(task: Task, s: Any, nr_pages: int) -> Generator[Any, Any, None]:
    """``mem_cgroup_charge`` → ``try_charge``: from this CPU's stock, or ``page_counter_try_charge``
    on every level (a batch of 64 pages refills the stock; a larger folio is charged as it is)."""
    st = state(s)
    if st is None:
        return
    ns, ins = _cyc(s, CHARGE)
    yield s.counters.busy(task.cpu, "mem_cgroup_charge", ns, ins)
    if nr_pages <= st.stock[task.cpu]:
        st.stock[task.cpu] -= nr_pages
        return
    if nr_pages < MEMCG_CHARGE_BATCH:
        st.stock[task.cpu] += MEMCG_CHARGE_BATCH - nr_pages
    for ctr in st.counters:
        yield ctr.add(task, "page_counter_try_charge")


def new_anon_folio(task: Task, s: Any, node: int, nr_pages: int, where: tuple[int, int]
                   ) -> Generator[Any, Any, None]:
    """A new anonymous folio of ``nr_pages`` on ``node`` (``do_anonymous_page`` /
    ``__do_huge_pmd_anonymous_page``): its memcg charge and ``folio_add_lru_vma``. Nothing unless
    :func:`enable` was called for this System. ``where``: (id(mm), PMD slot), for the unmap."""
    st = state(s)
    if st is None:
        return
    st.folios.setdefault(where, []).append(node)
    yield from mem_cgroup_charge(task, s, nr_pages)
    yield from folio_add_lru(task, s, node, nr_pages > 1)


def skip_new_folios(s: Any, cpu: int, nodes: list[int], nr_pages: int = 1) -> None:
    """The state :func:`mem_cgroup_charge` and :func:`folio_add_lru` leave after new folios of
    ``nr_pages`` on ``nodes`` were added on ``cpu``, without their time (a fast-forward skip,
    mmsim.metrics.sampling: the costs were extrapolated): the CPU's memcg stock, its ``lru_add``
    batch and the LRU sizes its drains add."""
    st = state(s)
    if st is None:
        return
    b = st.batches[cpu]
    for node in nodes:
        if nr_pages <= st.stock[cpu]:
            st.stock[cpu] -= nr_pages
        elif nr_pages < MEMCG_CHARGE_BATCH:
            st.stock[cpu] += MEMCG_CHARGE_BATCH - nr_pages
        b.append(node)
        if nr_pages > 1 or len(b) >= PAGEVEC_SIZE:
            for n in b:
                st.nr_lru[n] += 1
            b.clear()
