"""Address spaces: ``mm_struct``, VMAs and mmap (mm/mmap.c).

``MmStruct`` holds ``mmap_sem`` (``mmap_lock`` since v5.8; an rwsem),
``page_table_lock`` (a spinlock), the RSS counters (``mm->rss_stat``,
atomics on a shared line) and the page tables. VMAs are ranges placed
top-down from ``mmap_base`` by ``arch_get_unmapped_area_topdown`` — so a
``malloc(512 MB)`` mapping starts wherever the previous one ended, not on a
2 MiB boundary, which decides how many of its faults can be huge.

Issue 22 adds the v6.8+ placement as the kernel computes it (``MmStruct.mmap_pgoff``):
``__get_unmapped_area`` → ``thp_get_unmapped_area_vmflags`` (policy ``thp_anon_align``; /dev/zero:
``get_unmapped_area_zero``, policy ``dev_zero_align``) → ``unmapped_area_topdown`` over the gaps
between the mm's VMAs, so a hole an munmap left is found again.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.base import CacheLine
from mmsim.locks.rwsem import AtomicCounter, RwSem
from mmsim.locks.spinlock import Spinlock
from mmsim.mm.costs import path
from mmsim.mm.pgtable import PageTables

# lock_stat class of mm's rwsem by policy mmap_lock_name (renamed by da1c55f1b272, v5.8)
MMAP_LOCK_CLASS = {"mmap_sem": "&mm->mmap_sem", "mmap_lock": "&mm->mmap_lock"}

PAGE_SIZE = 4096
PMD_SIZE = 2 << 20
# x86-64 TASK_SIZE (47-bit user space) less the stack gap: mmap_base of a process
# with an 8 MiB stack rlimit, randomisation off (arch/x86/mm/mmap.c mmap_base()).
MMAP_BASE = (1 << 47) - (1 << 12) - (128 << 20)


@dataclass
class Vma:
    start: int
    end: int
    anon: bool = True
    hugetlb: bool = False
    thp_advised: bool = False  # MADV_HUGEPAGE
    shared: bool = False
    name: str = ""
    # hugetlb VMAs (mm/hugetlb.py): the hugetlbfs inode (vma->vm_file), the offset in huge pages
    # (vma->vm_pgoff >> huge_page_order) and vma->vm_private_data (a private mapping's reserve map)
    file: Any = None
    pgoff: int = 0
    private_data: Any = None
    # the per-VMA lock (mm/vma_lock.py, v6.4+): vma->vm_lock (made on first use) and whether
    # vma->anon_vma is set (anon_vma_prepare on the first anonymous or COW page)
    vm_lock: Any = None
    anon_vma: bool = False
    # PROT_NONE (no VM_READ | VM_WRITE | VM_EXEC): a thread stack's guard page (mprotect_none_low)
    prot_none: bool = False

    @property
    def size(self) -> int:
        return self.end - self.start


class MmapCache:
    """``mm->mmap_cache`` (v2.4 .. v3.14; per-thread vmacache from 615d6e8756c8, v3.15): the last VMA
    ``find_vma`` found, one per mm, on ``struct mm_struct``'s first cache line. v3.13 ``mm/mmap.c find_vma``:
    ``vma = ACCESS_ONCE(mm->mmap_cache)``; if it does not cover the address, the rb-tree walk and
    ``mm->mmap_cache = vma``. Reported with the locks as ``mm->mmap_cache`` (kind ``atomic``):
    ``acquisitions`` = lookups, ``contentions`` = lookups whose load waited for the line (its wait in the
    wait columns), ``extra["misses"]`` = lookups that stored (docs/locks.md, session 31)."""

    def __init__(self, ctx: Any, home_cpu: int) -> None:
        self.line = CacheLine(ctx.machine, home_cpu)
        self.engine = ctx.engine
        self.counters = ctx.counters
        self.stat = ctx.stat("mm->mmap_cache", "atomic")
        self.stat.lines.append(self.line)
        self.stat.extra.setdefault("misses", 0)
        self.vma: Any = None

    def find_vma(self, cpu: int, vma: Any) -> int:
        """One ``find_vma`` by ``cpu`` that finds ``vma``: ns its load of ``mm->mmap_cache`` waits (a transfer
        when another CPU wrote the line since this CPU's copy), charged to ``cpu`` as ``find_vma`` (a stalled
        load is CPU time: docs/locks.md, session 33); on a miss, the store of ``vma`` (a plain store: it
        retires from the store buffer, so it costs this CPU nothing, but it takes the line)."""
        now = self.engine.now
        d = self.line.read(cpu, now)
        st = self.stat
        st.acquisitions += 1
        if d:
            st.contentions += 1
            st.note_wait(d)
            self.counters.busy(cpu, "find_vma", d)
        if self.vma is not vma:
            self.vma = vma
            st.extra["misses"] += 1
            self.line.write(cpu, now)
        return d


class MmStruct:
    """One address space, shared by the threads of a process."""

    def __init__(self, system: Any, home_cpu: int) -> None:
        self.system = system
        self.home_cpu = home_cpu
        locks = system.locks
        # struct mm_struct (v3.12 .. v4.x): `int map_count; spinlock_t page_table_lock;
        # struct rw_semaphore mmap_sem;` are adjacent, so the lock word and mmap_sem.count
        # share one 64-byte line.
        self.line = CacheLine(system.machine, home_cpu)
        self.mmap_sem = RwSem(locks, MMAP_LOCK_CLASS[system.policy("mmap_lock_name")], home_cpu,
                              line=self.line, policy=system.rwsem_policy())
        ptl_kind = system.spin_kind_for("page_table_lock")
        self.page_table_lock = Spinlock(locks, "&mm->page_table_lock", ptl_kind, home_cpu, line=self.line)
        self.rss_stat = AtomicCounter(locks, "mm->rss_stat", home_cpu)
        # v3.13 struct mm_struct: `atomic_long_t nr_ptes; int map_count; spinlock_t
        # page_table_lock; struct rw_semaphore mmap_sem;`: nr_ptes is on the same line.
        self.nr_ptes = (AtomicCounter(locks, "mm->nr_ptes", home_cpu, line=self.line)
                        if system.flag("nr_ptes_atomic") else None)
        # find_vma's one-entry cache shared by the mm's threads before v3.15 (policy vma_cache): mm_struct's
        # first line (v3.13 include/linux/mm_types.h: mmap, mm_rb, mmap_cache at offset 16, ...)
        self.mmap_cache = (MmapCache(locks, home_cpu)
                           if system.policy("vma_cache") == "mm" else None)
        self.vmas: list[Vma] = []
        self.free_top = MMAP_BASE
        self.pgtables = PageTables(self)

    def find_vma(self, addr: int) -> Vma | None:
        for v in self.vmas:
            if v.start <= addr < v.end:
                return v
        return None

    def get_unmapped_area(self, length: int, align: int = PAGE_SIZE) -> int:
        """Top-down placement below the lowest mapping (no holes are reused)."""
        start = (self.free_top - length) & ~(align - 1)
        self.free_top = start
        return start

    def unmapped_area_topdown(self, length: int, high: int = MMAP_BASE) -> int:
        """mm/mmap.c ``unmapped_area_topdown`` (v6.12) with ``align_mask`` 0 (x86-64 anonymous and
        /dev/zero mappings): the top of the highest gap below ``high`` (``mmap_base``) between the
        mm's VMAs that holds ``length`` bytes; -1 (``-ENOMEM``) if none."""
        gap_end = high
        for v in sorted(self.vmas, key=lambda v: v.start, reverse=True):
            if v.start >= gap_end:
                continue
            if v.end <= gap_end and gap_end - v.end >= length:
                return gap_end - length
            gap_end = min(gap_end, v.start)
        return gap_end - length if gap_end >= length else -1

    def thp_get_unmapped_area(self, length: int, pgoff: int = 0) -> int:
        """mm/huge_memory.c ``thp_get_unmapped_area_vmflags`` → ``__thp_get_unmapped_area`` (v6.12,
        no address hint, MMF_TOPDOWN set): look for ``len + PMD_SIZE``, then move the start up to the
        next PMD boundary (``off_sub``), or, when the padded area already starts on one, to the top of
        it (``ret + size``, 85b9f46e8ea4); a mapping shorter than PMD_SIZE past its aligned offset is
        placed as ``mm_get_unmapped_area`` would."""
        off = pgoff * PAGE_SIZE
        off_end = off + length
        off_align = -(-off // PMD_SIZE) * PMD_SIZE  # round_up(off, size)
        if off_end <= off_align or off_end - off_align < PMD_SIZE:
            return self.unmapped_area_topdown(length)
        ret = self.unmapped_area_topdown(length + PMD_SIZE)
        if ret < 0:  # "The failure might be due to length padding": retry without it
            return self.unmapped_area_topdown(length)
        off_sub = (off - ret) & (PMD_SIZE - 1)
        if not off_sub:
            return ret + PMD_SIZE
        return ret + off_sub

    def placement(self, length: int, kind: str = "anon") -> int:
        """mm/mmap.c ``__get_unmapped_area`` (v6.12) for a hint-less private mapping of ``length``
        (page-aligned) bytes: ``kind`` "anon" (MAP_ANONYMOUS: no get_area; THP-aligned per policy
        ``thp_anon_align``) or "devzero" (drivers/char/mem.c ``get_unmapped_area_zero``, MAP_PRIVATE:
        ``thp_get_unmapped_area`` with policy ``dev_zero_align=thp``, else ``mm_get_unmapped_area``)."""
        s = self.system
        if kind == "anon":
            pol = s.policy("thp_anon_align")
            # IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE): the build option, not the sysfs "enabled" setting
            thp = pol == "pmd-if-large" or (pol == "pmd-if-multiple" and length % PMD_SIZE == 0)
        elif kind == "devzero":
            thp = s.policy("dev_zero_align") == "thp"
        else:
            raise ValueError(f"placement kind {kind!r}: anon or devzero")
        return self.thp_get_unmapped_area(length) if thp else self.unmapped_area_topdown(length)

    def mmap_pgoff(self, task: Task, length: int, kind: str = "anon", **flags: Any) -> Generator[Any, Any, Vma]:
        """``vm_mmap_pgoff`` as v6.8+ places a private anonymous (or /dev/zero) mapping: take
        mmap_lock for write, ``__get_unmapped_area`` (:meth:`placement`), link the VMA. A /dev/zero
        MAP_PRIVATE mapping is anonymous after ``mmap_zero`` (``vma_set_anonymous``)."""
        length = (length + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)
        yield self.mmap_sem.down_write(task)
        start = self.placement(length, kind)
        if start < 0:
            raise RuntimeError(f"mmap of {length} bytes: no gap below mmap_base (ENOMEM)")
        vma = Vma(start, start + length, **flags)
        self.vmas.append(vma)
        ns, ins = path("do_mmap_pgoff", self.system.machine.freq_ghz)
        yield self.system.counters.busy(task.cpu, "do_mmap_pgoff", ns, ins)
        yield self.mmap_sem.up_write(task)
        return vma

    def mprotect_none_low(self, task: Task, vma: Vma, length: int) -> Generator[Any, Any, Vma]:
        """``mprotect(vma->vm_start, length, PROT_NONE)`` of a private anonymous VMA's lowest
        ``length`` bytes, as glibc's ``allocate_stack`` makes a thread stack's guard page
        (mm/mprotect.c v3.13 ``sys_mprotect`` → ``mprotect_fixup`` → ``split_vma``): take mmap_sem
        for write, split off the guard VMA (nothing is mapped there: the stack grows down from its
        top), release. Returns the guard VMA; ``vma`` keeps the rest."""
        length = (length + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)
        if not 0 < length < vma.size:
            raise ValueError(f"mprotect of {length} bytes of a {vma.size}-byte VMA: must leave some of it")
        yield self.mmap_sem.down_write(task)
        guard = Vma(vma.start, vma.start + length, name=f"{vma.name} guard" if vma.name else "guard",
                    prot_none=True)
        vma.start += length
        self.vmas.append(guard)
        ns, ins = path("mprotect_fixup", self.system.machine.freq_ghz)
        yield self.system.counters.busy(task.cpu, "mprotect_fixup", ns, ins)
        yield self.mmap_sem.up_write(task)
        return guard

    def do_mmap(self, task: Task, length: int, **flags: Any) -> Generator[Any, Any, Vma]:
        """``vm_mmap_pgoff``: take mmap_sem for write, place and link the VMA.
        A hugetlb VMA (``hugetlb=True``, length rounded up to 2 MiB) reserves
        its huge pages (``hugetlbfs_file_mmap``, mm/hugetlb.py); ``file`` names
        an existing hugetlbfs inode, else MAP_HUGETLB makes a new one."""
        huge = bool(flags.get("hugetlb"))
        gran = (2 << 20) if huge else PAGE_SIZE
        length = (length + gran - 1) & ~(gran - 1)
        align = gran
        yield self.mmap_sem.down_write(task)
        start = self.get_unmapped_area(length, align)
        vma = Vma(start, start + length, **flags)
        if huge:
            from mmsim.mm.hugetlb import hugetlbfs_file_mmap

            yield from hugetlbfs_file_mmap(task, self, vma)
        elif getattr(vma.file, "is_shmem", False):
            from mmsim.mm.shmem import shmem_mmap

            yield from shmem_mmap(task, self, vma)
        self.vmas.append(vma)
        ns, ins = path("do_mmap_pgoff", self.system.machine.freq_ghz)
        yield self.system.counters.busy(task.cpu, "do_mmap_pgoff", ns, ins)
        yield self.mmap_sem.up_write(task)
        return vma
