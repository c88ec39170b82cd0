"""What glibc does in the kernel on a benchmark's behalf: ``pthread_create`` with default attributes.

glibc 2.17 (nptl/allocatestack.c ``allocate_stack``, nptl/pthread_create.c ``create_thread``; the order
below holds until 2.27, which maps the stack PROT_NONE and mprotects the usable part instead — the same
three mmap_sem sections):

1. ``mmap`` of the default stack (RLIMIT_STACK, 8 MiB) plus its guard page, read-write (mmap_sem write);
2. the thread descriptor (``struct pthread``, TLS_TCB_AT_TP: at the top of the mapping) and
   ``_dl_allocate_tls``'s static TLS block below it are written: the caller's first write to the stack's
   top page, an anonymous page fault (mmap_sem read);
3. "Create or resize the guard area if necessary": ``mprotect (mem, guardsize, PROT_NONE)`` of the lowest
   page (``_STACK_GROWS_DOWN``), a VMA split (mmap_sem write);
4. ``clone`` (CLONE_VM | ...): ``copy_process`` and ``wake_up_new_task``.

The costs of 3 and 4 are native measurements (mm/costs.py ``mprotect_fixup``, ``copy_process``;
benchmarks/native/pthread_create_parts.c); 1 and 2 are the model's mmap and fault paths. Not modelled:
glibc's stack cache (a benchmark creates each thread once), the descriptor's few stores (tens of cycles),
and the new thread's own first stack page below the descriptor (whether its frames fit in the rest of the
top page is not known).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.mm import memory
from mmsim.mm.costs import path
from mmsim.mm.page_alloc import PAGE_SIZE

STACK_SIZE = 8 << 20  # glibc default thread stack = RLIMIT_STACK (8 MiB), mapped with its guard page
GUARD_SIZE = PAGE_SIZE  # glibc's default guardsize: one page (pthread_attr_init)


def allocate_stack(main: Task) -> Generator[Any, Any, Any]:
    """Steps 1-3: the new thread's stack, mapped, its top page written, its guard split off. Returns the
    stack's VMA (without the guard)."""
    mm = main.mm
    vma = yield from mm.do_mmap(main, STACK_SIZE + GUARD_SIZE, name="stack")
    yield from memory.handle_mm_fault(main, mm, vma, vma.end - PAGE_SIZE)
    yield from mm.mprotect_none_low(main, vma, GUARD_SIZE)
    return vma


def pthread_create(system: Any, main: Task) -> Generator[Any, Any, None]:
    """Steps 1-4 as the calling thread pays them; the caller then spawns the new task."""
    yield from allocate_stack(main)
    ns, ins = path("copy_process", system.machine.freq_ghz)
    yield system.counters.busy(main.cpu, "copy_process", ns, ins)
