"""Page tables and their locks (PGD→PUD→PMD→PTE), as ranges and arrays.

Only what decides locking and faulting is kept: for every 1 GiB PUD slot
whether its PMD table exists, for every 2 MiB PMD slot whether it is none, a
huge mapping, or points to a PTE table, and for PTE tables a bitmap of
present PTEs (numpy, created on first 4 KiB fault in that 2 MiB). Never an
object per page.

Locks follow ``include/linux/mm.h``:

* ``pte_lockptr()``: with USE_SPLIT_PTE_PTLOCKS the PTE table page's
  ``ptl``, one per 2 MiB (policy ``pte_ptl=split``); else
  ``mm->page_table_lock``.
* ``pmd_lockptr()``: with USE_SPLIT_PMD_PTLOCKS (e009bb30c8df, v3.13) the
  PMD table page's ``ptl``, one per 1 GiB (policy ``pmd_ptl=split``); else
  ``mm->page_table_lock``.
* ``__pte_alloc``/``__pmd_alloc`` populate under ``mm->page_table_lock``
  (v3.12/v3.13).

NUMA balancing state (kept only when NUMA balancing is on, or for a range a
workload registers with ``dense_numa``): per PTE table, numpy arrays of the
page's node (``page_to_nid``), whether the PTE is a NUMA hinting PTE
(``pte_protnone``, set by ``change_pte_range``), the node of the CPU that
last faulted on it (``page_cpupid_last``, as a CPU number) and the time it
was made protnone (the tiering mode's ``folio_xchg_access_time``); for huge
PMDs a set of protnone slots. These are struct page / PTE bits, stored per
PTE because the pages modelled are private to one mm.

lock_stat classes: ``&mm->page_table_lock``, ``ptlock_ptr(pmd page)``,
``ptlock_ptr(pte page)`` (split locks of one level share a class, as lockdep
would report them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mmsim.locks.base import CacheLine
from mmsim.locks.spinlock import Spinlock

PMD_SHIFT = 21
PUD_SHIFT = 30
PTRS_PER_PTE = 512

PMD_NONE, PMD_HUGE, PMD_TABLE = 0, 1, 2


class PageTables:
    def __init__(self, mm: Any) -> None:
        self.mm = mm
        sysm = mm.system
        self.pmd_split = sysm.policy("pmd_ptl") == "split"
        self.pte_split = sysm.policy("pte_ptl") == "split"
        self.pud_present: set[int] = set()  # PUD slots whose PMD table exists
        self.pmd: dict[int, int] = {}  # PMD slot -> PMD_HUGE / PMD_TABLE
        self.ptes: dict[int, np.ndarray] = {}  # PMD slot -> present bitmap (512,)
        self._pmd_locks: dict[int, Spinlock] = {}
        self._pte_locks: dict[int, Spinlock] = {}
        self._huge_pte_lines: dict[int, CacheLine] = {}
        self.nr_pte_tables = 0
        self.nr_pmd_tables = 0
        # Mapping state beyond present/absent, as sets of slots / page numbers:
        self.zero_huge: set[int] = set()  # PMD maps the huge zero page (read fault, use_zero_page=1)
        self.wp_huge: set[int] = set()  # huge PMD write-protected after fork (COW pending)
        self.zero_ptes: set[int] = set()  # PTE maps the zero page
        self.wp_ptes: set[int] = set()  # PTE write-protected after fork
        self.shared: dict[Any, Any] = {}  # slot or ("P", pfn) -> LLC key of the inherited page
        self.huge_node: dict[int, int] = {}  # PMD slot -> NUMA node of its huge page
        # NUMA balancing (see the module docstring): PMD slot -> arrays (512,)
        self.track_numa = sysm.policy("numa_balancing") != "0"
        self.pte_nid: dict[int, np.ndarray] = {}  # int16, -1: no page
        self.protnone: dict[int, np.ndarray] = {}  # bool
        self.last_cpu: dict[int, np.ndarray] = {}  # int16, -1: cpupid unset
        self.scan_ms: dict[int, np.ndarray] = {}  # float64, ms when made protnone
        self.huge_protnone: set[int] = set()
        self.dense: list[DenseNuma] = []

    def pmd_lockptr(self, pmd_slot: int) -> Spinlock:
        if not self.pmd_split:
            return self.mm.page_table_lock  # type: ignore[no-any-return]
        pud = pmd_slot >> (PUD_SHIFT - PMD_SHIFT)
        lk = self._pmd_locks.get(pud)
        if lk is None:
            s = self.mm.system
            lk = self._pmd_locks[pud] = Spinlock(s.locks, "ptlock_ptr(pmd page)", s.spin_kind_for("ptlock"),
                                                   self.mm.home_cpu)
        return lk

    def pte_lockptr(self, pmd_slot: int) -> Spinlock:
        if not self.pte_split:
            return self.mm.page_table_lock  # type: ignore[no-any-return]
        lk = self._pte_locks.get(pmd_slot)
        if lk is None:
            s = self.mm.system
            lk = self._pte_locks[pmd_slot] = Spinlock(s.locks, "ptlock_ptr(pte page)", s.spin_kind_for("ptlock"),
                                                      self.mm.home_cpu)
        return lk

    def table_ctor_lock(self, pmd_slot: int | None = None, pud: int | None = None) -> None:
        """The split lock of a page table made functionally (a fast-forward skip): ``ptlock_init()`` as
        ``pgtable_pte_page_ctor()`` runs it when ``pte_alloc_one()`` allocates the PTE table of
        ``pmd_slot``, or ``pgtable_pmd_page_ctor()`` for the PMD table of ``pud`` (include/linux/mm.h,
        v3.13+). The detailed path creates each lock object at its first use, which follows the table's
        allocation at once; a skipped table has no first use, so without this lock_stat's instance counts
        depended on where the skips fell (issue 20: 83,929 ptlocks fast against 17,651 exact on the
        72 x 512m arm)."""
        if pmd_slot is not None:
            self.pte_lockptr(pmd_slot)
        if pud is not None:
            self.pmd_lockptr(pud << (PUD_SHIFT - PMD_SHIFT))

    def pmd_huge_pte_line(self, pmd_slot: int) -> CacheLine:
        """Where ``pgtable_trans_huge_deposit`` links the deposited PTE table:
        ``mm->pmd_huge_pte`` (one line in mm_struct) before e009bb30c8df, the
        PMD table page's ``pmd_huge_pte`` after it."""
        key = (pmd_slot >> (PUD_SHIFT - PMD_SHIFT)) if self.pmd_split else -1
        ln = self._huge_pte_lines.get(key)
        if ln is None:
            ln = self._huge_pte_lines[key] = CacheLine(self.mm.system.machine, self.mm.home_cpu)
        return ln

    def pte_bitmap(self, pmd_slot: int) -> np.ndarray:
        b = self.ptes.get(pmd_slot)
        if b is None:
            b = self.ptes[pmd_slot] = np.zeros(PTRS_PER_PTE, dtype=bool)
        return b


class DenseNuma:
    """Flat NUMA/presence arrays over ``nslots`` consecutive PMD slots from
    ``first_slot``, whose per-slot views are the page tables' own arrays, so a
    workload can test a batch of accesses vectorised while the kernel code
    works per PTE table."""

    __slots__ = ("first_slot", "nslots", "present", "nid", "protnone", "last_cpu", "scan_ms")

    def __init__(self, pt: PageTables, first_slot: int, nslots: int) -> None:
        n = nslots * PTRS_PER_PTE
        self.first_slot = first_slot
        self.nslots = nslots
        self.present = np.zeros(n, dtype=bool)
        self.nid = np.full(n, -1, dtype=np.int16)
        self.protnone = np.zeros(n, dtype=bool)
        self.last_cpu = np.full(n, -1, dtype=np.int16)
        self.scan_ms = np.zeros(n, dtype=np.float64)
        for k in range(nslots):
            sl = slice(k * PTRS_PER_PTE, (k + 1) * PTRS_PER_PTE)
            slot = first_slot + k
            pt.ptes[slot] = self.present[sl]
            pt.pte_nid[slot] = self.nid[sl]
            pt.protnone[slot] = self.protnone[sl]
            pt.last_cpu[slot] = self.last_cpu[sl]
            pt.scan_ms[slot] = self.scan_ms[sl]


def dense_numa(pt: PageTables, first_slot: int, nslots: int) -> DenseNuma:
    """Register a dense range (see :class:`DenseNuma`); its slots must have no state yet."""
    for k in range(nslots):
        if first_slot + k in pt.ptes or first_slot + k in pt.pmd:
            raise ValueError(f"PMD slot {first_slot + k} already has page-table state")
    d = DenseNuma(pt, first_slot, nslots)
    pt.dense.append(d)
    return d


def numa_arrays(pt: PageTables, slot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(nid, protnone, last_cpu, scan_ms) of PTE table ``slot``, created on first use."""
    a = pt.pte_nid.get(slot)
    if a is None:
        a = pt.pte_nid[slot] = np.full(PTRS_PER_PTE, -1, dtype=np.int16)
        pt.protnone[slot] = np.zeros(PTRS_PER_PTE, dtype=bool)
        pt.last_cpu[slot] = np.full(PTRS_PER_PTE, -1, dtype=np.int16)
        pt.scan_ms[slot] = np.zeros(PTRS_PER_PTE, dtype=np.float64)
    return a, pt.protnone[slot], pt.last_cpu[slot], pt.scan_ms[slot]


def note_pte_node(pt: PageTables, slot: int, idx: int, node: int) -> None:
    """``set_pte_at`` of a new page on ``node``: remember its node when NUMA state is kept."""
    if pt.track_numa or slot in pt.pte_nid:
        nid, prot, last, _ = numa_arrays(pt, slot)
        nid[idx] = node
        prot[idx] = False
        last[idx] = -1
