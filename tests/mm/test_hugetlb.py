"""hugetlbfs on ``tiny``: pool accounting, reservations, the fault's locks per
policy, fork + COW, PMD sharing, and pool failures (ENOMEM / SIGBUS)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.kernels import resolve
from mmsim.locks.rwsem import Mutex
from mmsim.machine import get_machine
from mmsim.mm import hugetlb, memory
from mmsim.mm.hugetlb import I_MMAP_CLASS, IMmapRwsem
from mmsim.mm.mmap import MmStruct, Vma
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT
from mmsim.mm.system import System

H = 2 << 20
GIB = 1 << 30
ZONE_PAGES = GIB // 4096  # one tiny node


def _system(kernel: str, nr: int, over: int = 0) -> System:
    s = System(get_machine("tiny"), resolve(kernel), 0)
    s.set_hugetlb_pool(nr, over)
    return s


def _run(s: System, body: Callable[[Task], Generator[Any, Any, None]], cpu: int = 0, mm: MmStruct | None = None
         ) -> Task:
    t = Task(1, "t", cpu=cpu, mm=mm or MmStruct(s, home_cpu=cpu))
    s.sched.spawn(t, body(t))
    s.engine.run()
    assert t.state == "done"
    return t


def _touch(t: Task, vma: Vma, npages: int, write: bool = True) -> Generator[Any, Any, list[str]]:
    kinds = []
    for i in range(npages):
        kinds.append((yield from memory.handle_mm_fault(t, t.mm, vma, vma.start + i * H, write=write)))
    return kinds


def _pool(s: System) -> dict[str, int]:
    return s.hugetlb.counters()


def test_reserve_fault_unmap_from_the_free_pool() -> None:
    s = _system("v5.6", 4)
    seen: dict[str, Any] = {}

    def body(t: Task) -> Generator[Any, Any, None]:
        vma = yield from t.mm.do_mmap(t, 3 * H - 5, hugetlb=True)  # rounded up to 3 huge pages
        seen["map"] = _pool(s)
        seen["kinds"] = yield from _touch(t, vma, 2)
        seen["fault"] = _pool(s)
        seen["usage"] = s.hugetlb.usage(t.mm).stat.acquisitions
        yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma)
        seen["vmas"] = list(t.mm.vmas)

    _run(s, body)
    assert seen["map"] == {"HugePages_Total": 4, "HugePages_Free": 4, "HugePages_Rsvd": 3, "HugePages_Surp": 0}
    assert seen["kinds"] == ["hugetlb", "hugetlb"]
    assert seen["fault"] == {"HugePages_Total": 4, "HugePages_Free": 2, "HugePages_Rsvd": 1, "HugePages_Surp": 0}
    assert seen["usage"] == 2
    assert _pool(s) == {"HugePages_Total": 4, "HugePages_Free": 4, "HugePages_Rsvd": 0, "HugePages_Surp": 0}
    assert seen["vmas"] == []
    assert s.hugetlb.free_node == [2, 2]


def test_overcommit_gathers_surplus_pages_and_returns_them_to_the_buddy_allocator() -> None:
    s = _system("v5.6", 1, over=3)
    free0 = [z.free_pages for z in s.page_alloc.zones]
    seen: dict[str, Any] = {}

    def body(t: Task) -> Generator[Any, Any, None]:
        vma = yield from t.mm.do_mmap(t, 3 * H, hugetlb=True)
        seen["map"] = _pool(s)
        yield from _touch(t, vma, 3)
        seen["fault"] = _pool(s)
        yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma)

    _run(s, body)
    assert seen["map"] == {"HugePages_Total": 3, "HugePages_Free": 3, "HugePages_Rsvd": 3, "HugePages_Surp": 2}
    assert seen["fault"] == {"HugePages_Total": 3, "HugePages_Free": 0, "HugePages_Rsvd": 0, "HugePages_Surp": 2}
    assert _pool(s) == {"HugePages_Total": 1, "HugePages_Free": 1, "HugePages_Rsvd": 0, "HugePages_Surp": 0}
    # Two order-9 blocks went out and came back; the PMD table page stays allocated (order 0, from a PCP batch).
    after = [z.free_pages for z in s.page_alloc.zones]
    assert after[1] == free0[1]
    assert free0[0] - after[0] == 1 + sum(s.page_alloc.pcp[0])
    # the blocks went back onto the buddy free lists, not just into the count
    assert all(s.page_alloc.buddy_free_pages(z) == z.free_pages for z in s.page_alloc.zones)
    assert s.hugetlb.buddy_pfns == [[], []]


def test_unfaulted_private_reservations_are_returned_at_unmap() -> None:
    s = _system("v5.6", 2, over=2)

    def body(t: Task) -> Generator[Any, Any, None]:
        vma = yield from t.mm.do_mmap(t, 4 * H, hugetlb=True)
        yield from _touch(t, vma, 1)
        yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma)

    _run(s, body)
    assert _pool(s) == {"HugePages_Total": 2, "HugePages_Free": 2, "HugePages_Rsvd": 0, "HugePages_Surp": 0}


def test_mmap_larger_than_pool_and_overcommit_fails_with_enomem() -> None:
    s = _system("v5.6", 1, over=1)

    def body(t: Task) -> Generator[Any, Any, None]:
        yield from t.mm.do_mmap(t, 3 * H, hugetlb=True)

    with pytest.raises(UserError) as e:
        _run(s, body)
    assert "ENOMEM" in str(e.value) and "hugetlb_reserve_pages" in str(e.value)
    assert e.value.field == "nr_hugepages/nr_overcommit_hugepages" and e.value.value == "1/1"
    assert _pool(s) == {"HugePages_Total": 1, "HugePages_Free": 1, "HugePages_Rsvd": 0, "HugePages_Surp": 0}


def _fork_cow(kernel: str, nr: int, over: int, nchildren: int = 1, npages: int = 2) -> tuple[System, list[str]]:
    """A parent populates a private MAP_HUGETLB mapping, forks, the children write it."""
    s = _system(kernel, nr, over)
    kinds: list[str] = []
    parent = Task(1, "parent", cpu=0, mm=MmStruct(s, home_cpu=0))

    def child(t: Task, vma: Vma) -> Generator[Any, Any, None]:
        kinds.extend((yield from _touch(t, vma, npages)))
        yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma, exiting=True)

    def body(t: Task) -> Generator[Any, Any, None]:
        vma = yield from t.mm.do_mmap(t, npages * H, hugetlb=True)
        kinds.extend((yield from _touch(t, vma, npages)))
        for i in range(nchildren):
            mm = MmStruct(s, home_cpu=i + 1)
            cvma = Vma(vma.start, vma.end, hugetlb=True)
            mm.vmas.append(cvma)
            yield from hugetlb.dup_hugetlb_vma(t, t.mm, mm, vma, cvma)
            c = Task(10 + i, f"child{i}", cpu=i + 1, mm=mm)
            s.sched.spawn(c, child(c, cvma))
        yield 10_000_000  # the children run and exit
        yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma, exiting=True)

    s.sched.spawn(parent, body(parent))
    s.engine.run()
    return s, kinds


def test_fork_cow_copies_without_reservation_and_accounting_returns_to_the_pool() -> None:
    s, kinds = _fork_cow("c0d0381ade79", 2, over=4, nchildren=2)
    assert kinds == ["hugetlb", "hugetlb"] + ["hugetlb-cow"] * 4
    assert _pool(s) == {"HugePages_Total": 2, "HugePages_Free": 2, "HugePages_Rsvd": 0, "HugePages_Surp": 0}
    assert s.page_mapcount == {}
    # two children's copies came from surplus pages: 4 buddy allocations + prep_new_huge_page
    assert s.counters.profile_total()["prep_new_huge_page"].insns == 4 * 5000
    assert s.counters.profile_total()["update_and_free_page"].insns == 4 * 5000


def test_cow_without_a_free_or_surplus_page_is_sigbus() -> None:
    with pytest.raises(UserError) as e:
        _fork_cow("c0d0381ade79", 2, over=0)
    assert "SIGBUS" in str(e.value) and "hugetlb_cow" in str(e.value)


def _lock_trace(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record i_mmap_rwsem and fault-mutex operations in the order they happen."""
    log: list[str] = []
    for cls, names in ((IMmapRwsem, ("down_read", "up_read", "down_write", "up_write")),
                       (Mutex, ("lock", "unlock"))):
        for n in names:
            orig = getattr(cls, n)

            def wrapped(self: Any, task: Task, _o: Any = orig, _n: str = n) -> Any:
                if self.name in (I_MMAP_CLASS, "hugetlb_fault_mutex_table"):
                    log.append(f"{'i_mmap' if self.name == I_MMAP_CLASS else 'mutex'}.{_n}")
                return _o(self, task)

            monkeypatch.setattr(cls, n, wrapped)
    return log


@pytest.mark.parametrize("kernel,reads", [("c0d0381ade79^", 0), ("c0d0381ade79", 6), ("c0d0381ade79+fix", 0)])
def test_private_fault_lock_order_and_counts_per_policy(monkeypatch: pytest.MonkeyPatch, kernel: str,
                                                        reads: int) -> None:
    log = _lock_trace(monkeypatch)
    s, kinds = _fork_cow(kernel, 2, over=4, nchildren=2)
    st = s.locks.stats[I_MMAP_CLASS]
    assert st.extra["read_acquisitions"] == reads == log.count("i_mmap.down_read") == log.count("i_mmap.up_read")
    # writers: mmap link 1, fork links 2, three exits x (unmap + unlink) 6
    assert st.acquisitions - reads == 9 == log.count("i_mmap.down_write")
    assert log.count("mutex.lock") == len(kinds) == 6
    faults = [e for e in log if not e.endswith("_write")]
    if reads:
        # i_mmap_rwsem (read) is taken before the fault mutex and released after it, in every fault
        readers = mutexes = 0
        for e in faults:
            readers += {"i_mmap.down_read": 1, "i_mmap.up_read": -1}.get(e, 0)
            mutexes += {"mutex.lock": 1, "mutex.unlock": -1}.get(e, 0)
            assert readers >= mutexes >= 0
        assert readers == mutexes == 0
    else:
        assert set(faults) == {"mutex.lock", "mutex.unlock"}


def test_fault_mutex_is_shared_by_every_process_for_the_same_index() -> None:
    s = _system("c0d0381ade79", 0, over=0)
    inode = s.hugetlb.new_inode(0)
    assert s.hugetlb.fault_mutex(inode, 3) is s.hugetlb.fault_mutex(inode, 3)
    assert s.hugetlb.fault_mutex(inode, 3) is not s.hugetlb.fault_mutex(inode, 4)
    assert s.hugetlb.table_size == 64  # roundup_pow_of_two(8 * 8 CPUs)


def _shared_pair(kernel: str) -> tuple[System, list[MmStruct]]:
    """Two processes map the same 1 GiB of a hugetlbfs file MAP_SHARED (PUD aligned: shareable)."""
    s = _system(kernel, 512)
    inode = s.hugetlb.new_inode(0, anon=False)
    mms: list[MmStruct] = []

    def proc(t: Task, delay: int) -> Generator[Any, Any, None]:
        yield delay
        t.mm.free_top = (t.mm.free_top >> 30) << 30
        vma = yield from t.mm.do_mmap(t, GIB, hugetlb=True, shared=True, file=inode)
        assert vma.start % GIB == 0 and hugetlb.vma_shareable(vma, vma.start)
        yield from _touch(t, vma, 2)

    for i, d in enumerate((0, 5_000_000)):
        t = Task(i + 1, f"p{i}", cpu=i, mm=MmStruct(s, home_cpu=i))
        mms.append(t.mm)
        s.sched.spawn(t, proc(t, d))
    s.engine.run()
    return s, mms


@pytest.mark.parametrize("kernel", ["c0d0381ade79^", "c0d0381ade79", "c0d0381ade79+fix"])
def test_shared_mapping_shares_pmd_page_and_page_cache(kernel: str) -> None:
    s, (a, b) = _shared_pair(kernel)
    # the second process found the first's PMD page (huge_pmd_share) and its pages: no new table, no allocation
    assert a.pgtables.nr_pmd_tables == 1 and b.pgtables.nr_pmd_tables == 0
    # one reservation of the file's 512 pages (the second mapping finds them reserved), two consumed
    assert s.hugetlb.counters() == {"HugePages_Total": 512, "HugePages_Free": 510, "HugePages_Rsvd": 510,
                                    "HugePages_Surp": 0}
    st = s.locks.stats[I_MMAP_CLASS]
    reads = st.extra["read_acquisitions"]
    never = kernel == "c0d0381ade79^"
    # before c0d0381ade79 huge_pmd_share takes it for write itself (once per process); after it every fault
    # on a shareable VMA reads it (if-shareable too: the mapping is shareable): 2 faults per process
    assert reads == (0 if never else 4)
    assert st.acquisitions - reads == 2 + (2 if never else 0)  # vma_link x2 (+ huge_pmd_share x2)
    for m in (a, b):
        base = m.vmas[0].start >> PMD_SHIFT
        assert [m.pgtables.pmd.get(base + i) for i in range(3)] == [PMD_HUGE, PMD_HUGE, None]


def test_shared_anonymous_mapping_survives_fork_and_is_freed_with_its_last_mapping() -> None:
    s = _system("c0d0381ade79+fix", 3)
    seen: dict[str, Any] = {}

    def body(t: Task) -> Generator[Any, Any, None]:
        vma = yield from t.mm.do_mmap(t, 3 * H, hugetlb=True, shared=True)  # MAP_SHARED | MAP_HUGETLB
        seen["kinds"] = yield from _touch(t, vma, 2)
        mm = MmStruct(s, home_cpu=1)
        cvma = Vma(vma.start, vma.end, hugetlb=True, shared=True)
        mm.vmas.append(cvma)
        yield from hugetlb.dup_hugetlb_vma(t, t.mm, mm, vma, cvma)
        # shared: no write protection, the child maps the same page cache pages
        seen["child_wp"] = set(mm.pgtables.wp_huge)
        seen["mapcount"] = sorted(s.page_mapcount.values())
        yield from hugetlb.unmap_hugetlb_vma(t, t.mm, vma)
        seen["after_parent"] = _pool(s)
        yield from hugetlb.unmap_hugetlb_vma(t, mm, cvma, exiting=True)

    _run(s, body)
    assert seen["kinds"] == ["hugetlb", "hugetlb"]
    assert seen["child_wp"] == set() and seen["mapcount"] == [2, 2]
    # the inode lives on in the child: its pages and the third page's reservation stay
    assert seen["after_parent"] == {"HugePages_Total": 3, "HugePages_Free": 1, "HugePages_Rsvd": 1,
                                    "HugePages_Surp": 0}
    assert _pool(s) == {"HugePages_Total": 3, "HugePages_Free": 3, "HugePages_Rsvd": 0, "HugePages_Surp": 0}
    assert s.page_mapcount == {}


@pytest.mark.parametrize("kernel,same", [("v4.18", False), ("v5.6", True)])
def test_private_fault_mutex_key_by_policy(kernel: str, same: bool) -> None:
    # 1b426bac66e6 (v5.2): private mappings key off (mapping, idx) like shared ones
    s = _system(kernel, 0)
    pool = s.hugetlb
    inode = pool.new_inode(0)
    a, b = MmStruct(s, home_cpu=0), MmStruct(s, home_cpu=1)
    ma, mb = pool.fault_mutex(inode, 5, a, 10 * H), pool.fault_mutex(inode, 5, b, 10 * H)
    assert (ma is mb) is same
    assert pool.fault_mutex(inode, 5, a, 10 * H) is ma
