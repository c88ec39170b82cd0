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
    """``lock_vma_under_rcu``'s checks (v6.4..v6.7) on a VMA it found, by policy ``vma_lock``."""
    pol = s.policy("vma_lock")
    if pol == "off":
        return False
    anon = vma_is_anonymous(vma)
    if pol == "anon" and not anon:
        return False  # "Only anonymous vmas are supported for now"
    return not (anon and not vma.anon_vma)


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
