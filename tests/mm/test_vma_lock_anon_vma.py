"""Session 13: the first fault of a fresh anonymous mapping under the per-VMA lock, per kernel (policy
``vma_lock_anon_vma``): v6.4..v6.9 abort to mmap_lock (``lock_vma_under_rcu``'s anon_vma check), a373baed5a9d
retries from ``vmf_anon_prepare``, 737019cf6ac5 (v6.10) ``mmap_read_trylock``s around ``__anon_vma_prepare`` and
completes under the VMA lock, unless the trylock fails (a writer holds mmap_lock, or waiters are queued)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels.catalog import resolve_kernel
from mmsim.machine.model import Machine
from mmsim.metrics.events import VmEvent
from mmsim.mm import memory
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.system import System

PAGE = 4096
HPAGE = 2 << 20
EVENTS = (VmEvent.VMA_LOCK_ABORT, VmEvent.VMA_LOCK_RETRY, VmEvent.VMA_LOCK_SUCCESS)
CHECK, RETRY, TRYLOCK = "v6.6", "v6.6+a373baed5a9d", "v6.6+a373baed5a9d+737019cf6ac5"


def _system(tiny: Machine, kernel: str, **over: str) -> System:
    return System(tiny, resolve_kernel(kernel, overrides={"thp": "never", **over}), 0)


def _counts(s: System) -> tuple[int, int, int]:
    v = s.counters.vm_total()
    a, r, ok = (v[e] for e in EVENTS)
    return a, r, ok


def _write_faults(s: System, mm: MmStruct, addrs: list[int], vma: Vma, delay: int = 0, cpu: int = 0) -> None:
    t = Task(cpu, f"t{cpu}", cpu=cpu, mm=mm)

    def body() -> Generator[Any, Any, None]:
        if delay:
            yield delay
        for addr in addrs:
            yield from memory.handle_mm_fault(t, mm, vma, addr, True)

    s.sched.spawn(t, body())


def _fresh_vma(mm: MmStruct, npages: int) -> Vma:
    """A fresh anonymous mapping linked without an event (as if mmap had returned): no anon_vma."""
    start = mm.get_unmapped_area(npages * PAGE)
    vma = Vma(start, start + npages * PAGE)
    mm.vmas.append(vma)
    return vma


def test_kernels_by_release() -> None:
    from mmsim.kernels import resolve

    assert resolve("v6.7").get("vma_lock_anon_vma") == "check"
    for k in ("d4148aeab412^", "d4148aeab412", "849d5cff4d48^", "849d5cff4d48"):  # v6.11 / v6.12 policies
        assert resolve(k).get("vma_lock_anon_vma") == "trylock", k
    assert resolve_kernel(RETRY).get("vma_lock_anon_vma") == "retry"


@pytest.mark.parametrize(("kernel", "expect"), [
    (CHECK, (1, 0, 7)),  # the first write finds no anon_vma: lock_vma_under_rcu aborts, mmap_lock
    (RETRY, (0, 1, 7)),  # taken; vmf_anon_prepare retries under mmap_lock
    (TRYLOCK, (0, 0, 8)),  # mmap_read_trylock, __anon_vma_prepare, the fault under the VMA lock
    ("849d5cff4d48^", (0, 0, 8)),
])
def test_first_write_fault_of_a_fresh_anonymous_mapping(tiny: Machine, kernel: str,
                                                         expect: tuple[int, int, int]) -> None:
    s = _system(tiny, kernel)
    mm = MmStruct(s, 0)
    vma = _fresh_vma(mm, 8)
    _write_faults(s, mm, list(range(vma.start, vma.end, PAGE)), vma)
    s.engine.run()
    assert _counts(s) == expect
    assert vma.anon_vma
    sem = mm.mmap_sem
    # one read acquisition of mmap_lock in every kernel: the abort's, the retry's or the trylock's
    assert sem.stat.extra["read_acquisitions"] == 1
    assert sem.readers == 0 and sem.writer is None


@pytest.mark.parametrize(("kernel", "over", "expect"), [
    (CHECK, {"thp_anon_align": "pmd-if-multiple"}, (1, 0, 1)),
    ("849d5cff4d48^", {}, (0, 0, 2)),
])
def test_first_thp_fault_runs_under_the_vma_lock_from_v6_10(tiny: Machine, kernel: str, over: dict[str, str],
                                                           expect: tuple[int, int, int]) -> None:
    """do_huge_pmd_anonymous_page's vmf_anon_prepare: from v6.10 the 2 MiB clear of a fresh mapping's first
    fault is under its VMA lock, not under mmap_lock."""
    s = System(tiny, resolve_kernel(kernel, overrides={"thp": "always", **over}), 0)
    mm = MmStruct(s, 0)
    t = Task(0, "t0", cpu=0, mm=mm)

    def body() -> Generator[Any, Any, None]:
        vma = yield from mm.mmap_pgoff(t, 2 * HPAGE)
        assert vma.start % HPAGE == 0
        for addr in (vma.start, vma.start + HPAGE):
            kind = yield from memory.handle_mm_fault(t, mm, vma, addr, True)
            assert kind == "thp"

    s.sched.spawn(t, body())
    s.engine.run()
    assert _counts(s) == expect
    assert s.counters.vm_total()[VmEvent.THP_FAULT_ALLOC] == 2


def _writer(s: System, mm: MmStruct, hold_ns: int, cpu: int = 1) -> None:
    """Another thread of the mm holding mmap_lock for write (an mmap, say) from t=0 for ``hold_ns``."""
    w = Task(cpu, f"w{cpu}", cpu=cpu, mm=mm)

    def body() -> Generator[Any, Any, None]:
        yield mm.mmap_sem.down_write(w)
        yield hold_ns
        yield mm.mmap_sem.up_write(w)

    s.sched.spawn(w, body())


@pytest.mark.parametrize(("kernel", "writer", "expect"), [
    (TRYLOCK, False, (0, 0, 4)),
    (TRYLOCK, True, (0, 1, 3)),  # the trylock fails: VM_FAULT_RETRY, the fault waits for mmap_lock
    (RETRY, False, (0, 1, 3)),  # a373baed5a9d alone: the retry whether or not mmap_lock is free
    (CHECK, True, (1, 0, 3)),
])
def test_trylock_fails_while_mmap_lock_is_held_for_write(tiny: Machine, kernel: str, writer: bool,
                                                        expect: tuple[int, int, int]) -> None:
    s = _system(tiny, kernel)
    mm = MmStruct(s, 0)
    vma = _fresh_vma(mm, 4)
    if writer:
        _writer(s, mm, 50_000)
    _write_faults(s, mm, list(range(vma.start, vma.end, PAGE)), vma, delay=1_000)
    s.engine.run()
    assert _counts(s) == expect
    held = mm.mmap_sem.stat.extra["read_acquisitions"]
    assert held == 1  # the trylock's, or (its failure, the retry) the mmap_lock fault's
    if writer:
        # the retried fault waited for the writer: its read acquisition was contended
        assert mm.mmap_sem.stat.extra["read_contentions"] == 1


def test_trylock_succeeds_beside_other_readers(tiny: Machine) -> None:
    """Readers holding mmap_lock (another thread's fault under it, a zap) do not fail the trylock."""
    s = _system(tiny, TRYLOCK)
    mm = MmStruct(s, 0)
    vma = _fresh_vma(mm, 2)
    r = Task(1, "r1", cpu=1, mm=mm)

    def reader() -> Generator[Any, Any, None]:
        yield mm.mmap_sem.down_read(r)
        yield 50_000
        yield mm.mmap_sem.up_read(r)

    s.sched.spawn(r, reader())
    _write_faults(s, mm, [vma.start, vma.start + PAGE], vma, delay=1_000)
    s.engine.run()
    assert _counts(s) == (0, 0, 2)
    assert mm.mmap_sem.stat.extra["read_contentions"] == 0


COW_BASE = "v6.6+164b06f238b9+4ed4379881aa+4de8c93a4751"


@pytest.mark.parametrize(("kernel", "expect"), [
    (COW_BASE, (0, 1, 2)),
    (COW_BASE + "+a373baed5a9d+737019cf6ac5", (0, 0, 3)),
])
def test_cow_fault_of_a_private_file_mapping_takes_the_trylock_from_v6_10(
        tiny: Machine, kernel: str, expect: tuple[int, int, int]) -> None:
    """do_cow_fault's vmf_anon_prepare (4de8c93a4751): the first COW fault of a mapping retried before v6.10."""
    from mmsim.mm.shmem import shmem_file_setup

    s = _system(tiny, kernel)
    inode = shmem_file_setup(s, 0, 3 * PAGE)
    mm = MmStruct(s, 0)
    t = Task(0, "t0", cpu=0, mm=mm)

    def body() -> Generator[Any, Any, None]:
        vma = yield from mm.do_mmap(t, 3 * PAGE, anon=False, shared=False, file=inode)
        for addr in range(vma.start, vma.end, PAGE):
            yield from memory.handle_mm_fault(t, mm, vma, addr, True)

    s.sched.spawn(t, body())
    s.engine.run()
    assert _counts(s) == expect


def test_trylock_fails_while_a_writer_waits_behind_readers(tiny: Machine) -> None:
    """RWSEM_READ_FAILED_MASK includes RWSEM_FLAG_WAITERS: with a reader holding mmap_lock and a writer
    asleep behind it (its spin on the reader-owned sem timed out after at most 25 us), the trylock fails
    although no writer holds the lock."""
    s = _system(tiny, TRYLOCK)
    mm = MmStruct(s, 0)
    vma = _fresh_vma(mm, 2)
    r, w = Task(1, "r1", cpu=1, mm=mm), Task(2, "w2", cpu=2, mm=mm)

    def reader() -> Generator[Any, Any, None]:
        yield mm.mmap_sem.down_read(r)
        yield 200_000
        yield mm.mmap_sem.up_read(r)

    def writer() -> Generator[Any, Any, None]:
        yield 100
        yield mm.mmap_sem.down_write(w)
        yield 1_000
        yield mm.mmap_sem.up_write(w)

    s.sched.spawn(r, reader())
    s.sched.spawn(w, writer())
    _write_faults(s, mm, [vma.start, vma.start + PAGE], vma, delay=60_000)
    s.engine.run()
    assert _counts(s) == (0, 1, 1)


def test_a_write_after_a_zero_page_read_prepares_the_anon_vma_on_every_kernel(tiny: Machine) -> None:
    """wp_page_copy's anon_vma_prepare (v3.x do_wp_page already had it): on v6.6 the read fault aborts to
    mmap_lock (no anon_vma), the write that replaces the zero page prepares it there, and the next write
    fault is taken under the VMA lock."""
    s = _system(tiny, CHECK)
    mm = MmStruct(s, 0)
    vma = _fresh_vma(mm, 2)
    t = Task(0, "t0", cpu=0, mm=mm)

    def body() -> Generator[Any, Any, None]:
        yield from memory.handle_mm_fault(t, mm, vma, vma.start, False)  # zero page: abort
        yield from memory.handle_mm_fault(t, mm, vma, vma.start, True)  # wp_page_copy: abort, then prepared
        yield from memory.handle_mm_fault(t, mm, vma, vma.start + PAGE, True)  # under the VMA lock

    s.sched.spawn(t, body())
    s.engine.run()
    assert vma.anon_vma
    assert _counts(s) == (2, 0, 1)
