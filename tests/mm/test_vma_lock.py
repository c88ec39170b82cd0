"""The per-VMA lock on ``tiny``: lock_vma_under_rcu's abort, VM_FAULT_RETRY and success, per kernel
(counted as the kernel's CONFIG_PER_VMA_LOCK_STATS events), and shmem's page cache across mappings."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.kernels import resolve
from mmsim.machine.model import Machine
from mmsim.metrics.events import VmEvent
from mmsim.mm import memory
from mmsim.mm.lru_anon import PAGEVEC_SIZE, state
from mmsim.mm.mmap import MmStruct
from mmsim.mm.shmem import ShmemInode, shmem_file_setup
from mmsim.mm.system import System

PAGE = 4096
EVENTS = (VmEvent.VMA_LOCK_ABORT, VmEvent.VMA_LOCK_RETRY, VmEvent.VMA_LOCK_SUCCESS)


def _system(tiny: Machine, kernel: str, **over: str) -> System:
    return System(tiny, resolve(kernel, overrides={"thp": "never", **over}), 0)


def _faults(s: System, mm: MmStruct, npages: int, write: bool, cpu: int = 0, file: ShmemInode | None = None,
            shared: bool = True, rounds: int = 1) -> None:
    """One task on ``cpu``: map ``npages`` (anonymous, or of ``file``) and fault each page in order,
    ``rounds`` times with a munmap between (a new mapping each round)."""
    from mmsim.mm.munmap import do_munmap

    t = Task(cpu, f"t{cpu}", cpu=cpu, mm=mm)

    def body() -> Generator[Any, Any, None]:
        for _ in range(rounds):
            if file is None:
                vma = yield from mm.do_mmap(t, npages * PAGE)
            else:
                vma = yield from mm.do_mmap(t, npages * PAGE, anon=False, shared=shared, file=file)
            bits = mm.pgtables.pte_bitmap
            for addr in range(vma.start, vma.end, PAGE):
                if not bits(addr >> 21)[(addr >> 12) & 511]:
                    yield from memory.handle_mm_fault(t, mm, vma, addr, write)
            if rounds > 1:
                yield from do_munmap(t, mm, vma, [cpu])

    s.sched.spawn(t, body())
    s.engine.run()


def _counts(s: System) -> tuple[int, int, int]:
    v = s.counters.vm_total()
    a, r, ok = (v[e] for e in EVENTS)
    return a, r, ok


@pytest.mark.parametrize(("kernel", "expect"), [
    ("v5.4", (0, 0, 0)),  # no per-VMA lock: every fault under mmap_lock
    ("v6.6", (1, 0, 7)),  # the first write has no anon_vma yet: abort; then all under the VMA lock
])
def test_anonymous_write_faults(tiny: Machine, kernel: str, expect: tuple[int, int, int]) -> None:
    s = _system(tiny, kernel)
    _faults(s, MmStruct(s, 0), 8, write=True)
    assert _counts(s) == expect
    assert s.counters.vm_total()[VmEvent.PGFAULT] == 8


def test_anonymous_read_faults_never_get_the_vma_lock(tiny: Machine) -> None:
    """Read faults map the zero page without anon_vma_prepare: lock_vma_under_rcu aborts every one."""
    s = _system(tiny, "v6.6")
    _faults(s, MmStruct(s, 0), 8, write=False)
    assert _counts(s) == (8, 0, 0)


@pytest.mark.parametrize(("kernel", "patches", "expect"), [
    ("v5.4", (), (0, 0, 0)),
    ("v6.6", ("vma_lock=anon",), (8, 0, 0)),  # v6.4: file VMAs are not taken at all
    ("v6.6", (), (0, 8, 0)),  # v6.6: taken, then do_shared_fault retries under mmap_lock
    ("v6.6+164b06f238b9+4ed4379881aa", (), (0, 0, 8)),  # v6.7: handled under the VMA lock
])
def test_shared_file_write_faults(tiny: Machine, kernel: str, patches: tuple[str, ...],
                                  expect: tuple[int, int, int]) -> None:
    from mmsim.kernels.catalog import resolve_kernel

    over = dict(p.split("=") for p in patches)
    s = System(tiny, resolve_kernel(kernel, overrides={"thp": "never", **over}), 0)
    inode = shmem_file_setup(s, 0, 8 * PAGE)
    _faults(s, MmStruct(s, 0), 8, write=True, file=inode)
    assert _counts(s) == expect
    assert sorted(inode.pages) == list(range(8)) and inode.stats["alloced"] == 8


@pytest.mark.parametrize(("kernel", "expect"), [
    ("v6.6", (0, 3, 0)),  # every COW fault retries at do_cow_fault's start
    # 4de8c93a4751: the first COW fault of each new mapping retries (vmf_anon_prepare), the rest do not
    ("v6.6+164b06f238b9+4ed4379881aa+4de8c93a4751", (0, 1, 2)),
])
def test_private_file_cow_faults(tiny: Machine, kernel: str, expect: tuple[int, int, int]) -> None:
    from mmsim.kernels.catalog import resolve_kernel

    s = System(tiny, resolve_kernel(kernel, overrides={"thp": "never"}), 0)
    inode = shmem_file_setup(s, 0, 3 * PAGE)
    _faults(s, MmStruct(s, 0), 3, write=True, file=inode, shared=False)
    assert _counts(s) == expect


def test_cow_mapping_again_needs_a_new_anon_vma(tiny: Machine) -> None:
    from mmsim.kernels.catalog import resolve_kernel

    s = System(tiny, resolve_kernel("v6.6+164b06f238b9+4ed4379881aa+4de8c93a4751", overrides={"thp": "never"}), 0)
    inode = shmem_file_setup(s, 0, 3 * PAGE)
    _faults(s, MmStruct(s, 0), 3, write=True, file=inode, shared=False, rounds=2)
    assert _counts(s) == (0, 2, 4)  # one retry per mapping
    assert inode.stats["alloced"] == 3  # the file pages were allocated once


@pytest.mark.parametrize(("kernel", "over", "first", "second"), [
    # holes: fault-around maps nothing, do_read_fault retries; then shmem_fault under mmap_lock
    ("v6.6", {}, (0, 32, 0), (0, 0, 1)),
    # 12214eba1992: ->fault under the VMA lock too
    ("v6.6+164b06f238b9+4ed4379881aa+4de8c93a4751+12214eba1992", {}, (0, 0, 32), (0, 0, 1)),
    # before f5617ffeb450 the retry is at do_read_fault's start, fault-around included
    ("v6.6", {"vma_lock_fault_around": "off"}, (0, 32, 0), (0, 1, 0)),
])
def test_shmem_read_faults_and_fault_around(tiny: Machine, kernel: str, over: dict[str, str],
                                            first: tuple[int, int, int], second: tuple[int, int, int]) -> None:
    """A shmem fault populates the page cache once; a second mapping (another process) finds it:
    fault-around maps each 16-page window (aligned on the virtual address, clipped to the VMA) in one
    fault and allocates nothing. ``second``: the counts per window."""
    from mmsim.kernels.catalog import resolve_kernel

    s = System(tiny, resolve_kernel(kernel, overrides={"thp": "never", **over}), 0)
    inode = shmem_file_setup(s, 0, 32 * PAGE)
    _faults(s, MmStruct(s, 0), 32, write=False, file=inode)
    assert _counts(s) == first
    assert inode.stats["alloced"] == 32
    v0 = s.counters.vm_total()
    mm = MmStruct(s, 1)
    _faults(s, mm, 32, write=False, file=inode, cpu=1)
    v1 = s.counters.vm_total()
    start = mm.vmas[0].start
    windows = len({a >> 16 for a in range(start, start + 32 * PAGE, PAGE)})
    assert windows == (2 if start % (16 * PAGE) == 0 else 3)
    a, r, ok = (v1[e] - v0[e] for e in EVENTS)
    assert (a, r, ok) == tuple(windows * x for x in second)
    assert v1[VmEvent.PGFAULT] - v0[VmEvent.PGFAULT] == windows
    assert inode.stats["alloced"] == 32 and len(inode.pages) == 32
    # the second process allocated only its page tables (a PMD and a PTE table page)
    assert v1[VmEvent.PGALLOC_NORMAL] - v0[VmEvent.PGALLOC_NORMAL] == 2


def test_lru_add_batches(tiny: Machine) -> None:
    """folio_add_lru: per-CPU batches of 15, moved under the node's lru_lock once per batch."""
    s = _system(tiny, "v6.6")
    inode = shmem_file_setup(s, 0, 40 * PAGE)
    _faults(s, MmStruct(s, 0), 40, write=True, file=inode)
    st = state(s)
    assert st is not None
    assert st.nr_lru == [2 * PAGEVEC_SIZE, 0] and len(st.batches[0]) == 40 - 2 * PAGEVEC_SIZE
    assert s.locks.stats["&lruvec->lru_lock"].acquisitions == 2


def test_two_tasks_fault_one_hole(tiny: Machine) -> None:
    """Two processes fault one hole at the same time: both allocate, one inserts it into i_pages, the
    other loses the race (-EEXIST: frees its page, looks again), finds the folio locked and waits on the
    folio lock (folio_wait_bit_common) until the first unlocks it; both map the same page."""
    s = _system(tiny, "v6.6")
    inode = shmem_file_setup(s, 0, PAGE)
    mms = [MmStruct(s, c) for c in (0, 1)]
    tasks = []
    for c, mm in zip((0, 1), mms, strict=True):
        t = Task(c, f"t{c}", cpu=c, mm=mm)
        tasks.append(t)

        def body(t: Task = t, mm: MmStruct = mm) -> Generator[Any, Any, None]:
            warm = yield from mm.do_mmap(t, 2 * PAGE)
            yield from memory.handle_mm_fault(t, mm, warm, warm.start, True)  # fills this CPU's PCP list
            vma = yield from mm.do_mmap(t, PAGE, anon=False, shared=True, file=inode)
            yield 100_000 - s.engine.now  # both fault at t = 100 us
            yield from memory.handle_mm_fault(t, mm, vma, vma.start, True)

        s.sched.spawn(t, body())
    s.engine.run()
    assert (inode.stats["alloced"], inode.stats["add_races"], inode.stats["lock_waits"]) == (1, 1, 1)
    assert all(mm.pgtables.pte_bitmap(mm.vmas[0].start >> 21)[(mm.vmas[0].start >> 12) & 511] for mm in mms)
    assert not inode.locked
