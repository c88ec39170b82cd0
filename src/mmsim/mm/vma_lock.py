"""The per-VMA lock in the x86 fault path (v6.4+): ``lock_vma_under_rcu``
(mm/memory.c), ``vma_start_read`` / ``vma_end_read`` (include/linux/mm.h) and
``do_user_addr_fault``'s VMA-lock-first attempt (arch/x86/mm/fault.c).

``do_user_addr_fault`` (v6.4, 0bff0aaea03e) first calls
``lock_vma_under_rcu``: a maple-tree walk under RCU and ``vma_start_read``,
a ``down_read_trylock`` of ``vma->vm_lock->lock`` (its own cache line: the
vma_lock is a separate slab object in v6.4..v6.7). If that gives no VMA the
fault counts ``VMA_LOCK_ABORT`` and goes to ``lock_mm_and_find_vma``
(mmap_lock for read). Otherwise ``handle_mm_fault`` runs with
``FAULT_FLAG_VMA_LOCK``; a path that cannot run under the VMA lock drops it
and returns ``VM_FAULT_RETRY`` (``VMA_LOCK_RETRY``), and the whole fault is
redone under mmap_lock. A fault finished under the VMA lock counts
``VMA_LOCK_SUCCESS``.

Which VMAs ``lock_vma_under_rcu`` takes, by policy ``vma_lock``:

* ``off`` (before v6.4): none, every fault under mmap_lock;
* ``anon`` (v6.4, 50ee32537206): anonymous VMAs only (``vma_is_anonymous``:
  no ``vm_ops``, so not hugetlb nor shmem) *with* an ``anon_vma``
  ("find_mergeable_anon_vma uses adjacent vmas which are not locked"): the
  first fault of a fresh anonymous mapping, and every read fault of one never
  written, go to mmap_lock;
* ``file`` (v6.6, 350f6bbca1de): file-backed VMAs too; the anon_vma check
  stays for anonymous ones. What then retries is decided in the fault paths:
  hugetlb_fault always (its "TODO: Handle faults under the VMA lock"),
  do_read_fault / do_cow_fault / do_shared_fault by the ``vma_lock_*``
  policies (mm/memory_file.py).

Whether an anonymous VMA without an ``anon_vma`` is taken, by policy ``vma_lock_anon_vma``:

* ``check`` (v6.4..v6.9): ``lock_vma_under_rcu`` refuses it ("find_mergeable_anon_vma uses adjacent
  vmas which are not locked"), as above;
* ``retry`` (a373baed5a9d, "mm: delay the check for a NULL anon_vma"): the check is gone from
  ``lock_vma_under_rcu``; ``do_anonymous_page`` and ``do_huge_pmd_anonymous_page`` call
  :func:`vmf_anon_prepare`, which under the VMA lock returns VM_FAULT_RETRY;
* ``trylock`` (737019cf6ac5, "mm: optimise vmf_anon_prepare() for VMAs without an anon_vma", both v6.10):
  ``vmf_anon_prepare`` takes ``mmap_read_trylock`` around ``__anon_vma_prepare`` and the fault goes on
  under the VMA lock; VM_FAULT_RETRY only when the trylock fails. The code read: the patches as posted
  (linux-mm, 2024-04-26) and ``__vmf_anon_prepare`` in a v6.15+ mm/memory.c (store id 7895225), which is
  737019cf6ac5's body (2a058ab3286d only moved the ``vma_end_read`` into the ``vmf_anon_prepare`` wrapper).

Not modelled: ``vma_start_write`` by mmap/munmap/mprotect of the same VMA
(``vm_lock_seq == mm_lock_seq`` makes ``vma_start_read`` fail) and a VMA
detached between the walk and the lock (``VMA_LOCK_MISS``): the workloads
modelled never fault on a VMA another task is changing.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.rwsem import RwSem
from mmsim.metrics.events import VmEvent
from mmsim.mm.costs import path

VMA_LOCK_SUCCESS = int(VmEvent.VMA_LOCK_SUCCESS)
VMA_LOCK_ABORT = int(VmEvent.VMA_LOCK_ABORT)
VMA_LOCK_RETRY = int(VmEvent.VMA_LOCK_RETRY)
RETRY = "retry"  # VM_FAULT_RETRY from a path under the VMA lock
VM_LOCK_CLASS = "&vma->vm_lock->lock"


def vma_is_anonymous(vma: Any) -> bool:
    """include/linux/mm.h ``vma_is_anonymous``: ``!vma->vm_ops`` (hugetlb and shmem VMAs have vm_ops)."""
    return bool(vma.anon) and not vma.hugetlb


def vm_lock(s: Any, vma: Any, cpu: int) -> RwSem:
    """``vma->vm_lock``: allocated with the VMA (``vma_lock_alloc``), on the line of the CPU that mapped it."""
    lk = vma.vm_lock
    if lk is None:
        lk = vma.vm_lock = RwSem(s.locks, VM_LOCK_CLASS, cpu, policy=s.rwsem_policy())
    assert isinstance(lk, RwSem)
    return lk


def usable(s: Any, vma: Any) -> bool:
    """``lock_vma_under_rcu``'s checks on a VMA it found, by policies ``vma_lock`` and ``vma_lock_anon_vma``
    (the anon_vma check of v6.4..v6.9; gone with a373baed5a9d, v6.10)."""
    pol = s.policy("vma_lock")
    if pol == "off":
        return False
    anon = vma_is_anonymous(vma)
    if pol == "anon" and not anon:
        return False  # "Only anonymous vmas are supported for now"
    if s.policy("vma_lock_anon_vma") != "check":
        return True
    return not (anon and not vma.anon_vma)


def mmap_read_trylock(task: Task, mm: Any) -> Generator[Any, Any, bool]:
    """include/linux/mmap_lock.h ``mmap_read_trylock`` → ``down_read_trylock`` → ``__down_read_trylock``
    (kernel/locking/rwsem.c, v5.3+): ``atomic_long_read(&sem->count)`` (:meth:`RwSem.trylock_load`), then,
    unless ``RWSEM_READ_FAILED_MASK`` is set (a writer holds it, waiters are queued, a hand-off is pending:
    the model's ``down_read`` fast-path test), the ``try_cmpxchg`` of the reader bias (:meth:`RwSem.down_read`,
    its fast path). Returns True with ``mmap_lock`` held for read."""
    sem = mm.mmap_sem
    yield sem.trylock_load(task)
    if sem.writer is not None or sem.waitq or sem.handoff:
        return False
    d = sem.down_read(task)
    assert isinstance(d, int)  # the fast path: nothing can block it now
    yield d
    return True


def vmf_anon_prepare(task: Task, mm: Any, vma: Any, vma_locked: bool) -> Generator[Any, Any, bool]:
    """mm/internal.h ``vmf_anon_prepare`` → mm/memory.c ``__vmf_anon_prepare`` (164b06f238b9, v6.7; the
    trylock from 737019cf6ac5, v6.10) before an anonymous page is mapped. Nothing if the VMA has an
    ``anon_vma``; under mmap_lock, ``__anon_vma_prepare``; under the VMA lock (``FAULT_FLAG_VMA_LOCK``),
    by policy ``vma_lock_anon_vma``: ``retry`` (and ``check``) return False (VM_FAULT_RETRY; the caller's
    ``vma_end_read`` and the retry are in :func:`fault_under_vma_lock`), ``trylock`` takes
    :func:`mmap_read_trylock`, prepares and ``mmap_read_unlock``s, or returns False if the trylock failed.
    Returns True when the fault may go on."""
    if vma.anon_vma:
        return True
    s = mm.system
    if not vma_locked:
        yield _memory.anon_vma_prepare(task, s, vma)
        return True
    if s.policy("vma_lock_anon_vma") != "trylock":
        return False
    ok = yield from mmap_read_trylock(task, mm)
    if not ok:
        return False
    yield _memory.anon_vma_prepare(task, s, vma) + mm.mmap_sem.up_read(task)
    return True


def lock_vma_under_rcu(task: Task, mm: Any, vma: Any) -> Generator[Any, Any, bool]:
    """Walk the maple tree, ``vma_start_read`` (``down_read_trylock`` of vm_lock), the checks.
    Returns True with the VMA read-locked, or False (``VMA_LOCK_ABORT`` counted)."""
    s = mm.system
    cpu = task.cpu
    ns, ins = path("lock_vma_under_rcu", s.machine.freq_ghz)
    if s.policy("vma_lock") != "off" and (s.policy("vma_lock") == "file" or vma_is_anonymous(vma)):
        lk = vm_lock(s, vma, mm.home_cpu)
        if lk.writer is None and not lk.waitq:  # down_read_trylock succeeds
            d = lk.down_read(task)
            assert isinstance(d, int)
            if usable(s, vma):
                yield d + s.counters.busy(cpu, "lock_vma_under_rcu", ns, ins)
                return True
            # inval_end_read: the anon_vma check failed after the lock was taken
            yield d + s.counters.busy(cpu, "lock_vma_under_rcu", ns, ins) + lk.up_read(task)
            s.counters.vm[cpu][VMA_LOCK_ABORT] += 1
            return False
    yield s.counters.busy(cpu, "lock_vma_under_rcu", ns, ins)
    s.counters.vm[cpu][VMA_LOCK_ABORT] += 1
    return False


def vma_end_read(task: Task, vma: Any) -> int:
    """``vma_end_read``: ``up_read(&vma->vm_lock->lock)`` (an atomic on its line). Returns ns."""
    lk = vma.vm_lock
    assert isinstance(lk, RwSem)
    return lk.up_read(task)


def fault_under_vma_lock(task: Task, mm: Any, vma: Any, addr: int, write: bool) -> Generator[Any, Any, str | None]:
    """``do_user_addr_fault``'s per-VMA-lock attempt. Returns the fault kind when it finished under
    the VMA lock, or None when the fault is to be (re)done under mmap_lock (abort or retry)."""
    s = mm.system
    ok = yield from lock_vma_under_rcu(task, mm, vma)
    if not ok:
        return None
    kind = yield from _memory.__handle_mm_fault(task, mm, vma, addr, write, True)
    # the bail-out (or the end of handle_mm_fault) drops the VMA lock
    d = vma_end_read(task, vma)
    if kind == RETRY:
        s.counters.vm[task.cpu][VMA_LOCK_RETRY] += 1
        yield d
        return None
    s.counters.vm[task.cpu][VMA_LOCK_SUCCESS] += 1
    yield d
    return kind


# at the end (memory -> memory_file imports RETRY from here); bound once, not imported per fault
from mmsim.mm import memory as _memory  # noqa: E402
