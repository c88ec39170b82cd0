"""hugetlbfs pages (mm/hugetlb.c), at the depth thp_memscale's hugetlb mode needs.

Pools: per-node free huge pages (``nr_hugepages``) under ``hugetlb_lock``.
``hugetlb_fault`` serialises faults on the same page: before 8382d914ebf7
(v3.15) with the single global ``hugetlb_instantiation_mutex``, after it
with ``hugetlb_fault_mutex_table`` hashed by (mapping, index). The new page
is dequeued under ``hugetlb_lock`` (``dequeue_huge_page_node``), cleared
(``clear_huge_page``) and mapped under ``huge_pte_lock`` — which is
``mm->page_table_lock`` before the split PMD lock series and the split PMD
lock after it (``huge_pte_lockptr``, v3.13).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.locks.rwsem import Mutex
from mmsim.locks.spinlock import Spinlock
from mmsim.metrics.events import VmEvent
from mmsim.mm.costs import path
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT

HPAGE_SIZE = 2 << 20
HTLB_ALLOC = int(VmEvent.HTLB_BUDDY_ALLOC_SUCCESS)


class HugetlbPool:
    def __init__(self, system: Any, nr_hugepages: int) -> None:
        m = system.machine
        self.system = system
        self.lock = Spinlock(system.locks, "hugetlb_lock", system.spin_kind, 0)
        # Spread over nodes like hugetlb_hstate_alloc_pages (round-robin over N_MEMORY).
        n = len(m.nodes)
        self.free = [nr_hugepages // n + (1 if i < nr_hugepages % n else 0) for i in range(n)]
        cap = [int(node.memory_gib * 1024) // 2 for node in m.nodes]
        for i, (f, c) in enumerate(zip(self.free, cap, strict=True)):
            if f > c:
                raise UserError(
                    "nr_hugepages", nr_hugepages, f"at most {sum(cap)} on this machine (node {i} holds {c})"
                )
        self.nr_hugepages = nr_hugepages
        self.single_mutex = Mutex(system.locks, "hugetlb_instantiation_mutex", 0, spin_on_owner=True)
        self.fault_mutexes: dict[int, Mutex] = {}
        self.table_size = 8 * (1 << (m.ncpus - 1).bit_length())  # num_fault_mutexes = 8 * roundup_pow_of_two(ncpus)

    def reserve(self, npages: int) -> None:
        if npages > sum(self.free):
            raise UserError("nr_hugepages", self.nr_hugepages,
                            f">= {npages} huge pages for this mapping (pool has {sum(self.free)} free)")

    def fault_mutex(self, key: int) -> Mutex:
        if self.system.policy("hugetlb_fault_lock") == "instantiation-mutex":
            return self.single_mutex
        h = key % self.table_size
        mx = self.fault_mutexes.get(h)
        if mx is None:
            mx = self.fault_mutexes[h] = Mutex(self.system.locks, "hugetlb_fault_mutex_table", 0, spin_on_owner=True)
        return mx

    def dequeue(self, task: Task, node: int) -> Generator[Any, Any, int]:
        s = self.system
        yield self.lock.acquire(task)
        ns, ins = path("dequeue_huge_page_node", s.machine.freq_ghz)
        yield s.counters.busy(task.cpu, "dequeue_huge_page_node", ns, ins)
        order = s.page_alloc.zonelist[node]
        got = next((n for n in order if self.free[n] > 0), -1)
        if got < 0:
            self.lock.release(task)
            raise MemoryError("hugetlb pool exhausted (SIGBUS in the real kernel)")
        self.free[got] -= 1
        self.lock.release(task)
        return got


def hugetlb_fault(task: Task, mm: Any, vma: Any, addr: int) -> Generator[Any, Any, str]:
    """mm/hugetlb.c ``hugetlb_fault`` → ``hugetlb_no_page`` for a first touch."""
    s = mm.system
    pool: HugetlbPool = s.hugetlb
    slot = addr >> PMD_SHIFT
    mx = pool.fault_mutex(id(vma) * 131 + slot)
    yield mx.lock(task)
    pt = mm.pgtables
    if pt.pmd.get(slot) == PMD_HUGE:
        yield mx.unlock(task)
        return "none"
    node = yield from pool.dequeue(task, s.machine.cpu_node(task.cpu))
    from mmsim.mm.memory import clear_user_pages

    yield from clear_user_pages(task, s, node, HPAGE_SIZE, "clear_page_erms")
    ns, ins = path("hugetlb_no_page", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "hugetlb_no_page", ns, ins)
    lk = pt.pmd_lockptr(slot)  # huge_pte_lockptr
    yield lk.acquire(task)
    pt.pmd[slot] = PMD_HUGE
    yield mm.rss_stat.add(task, "hugetlb_no_page")
    lk.release(task)
    s.counters.vm[task.cpu][HTLB_ALLOC] += 1
    yield mx.unlock(task)
    return "hugetlb"
