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

    def pmd_lockptr(self, pmd_slot: int) -> Spinlock:
        if not self.pmd_split:
            return self.mm.page_table_lock  # type: ignore[no-any-return]
        pud = pmd_slot >> (PUD_SHIFT - PMD_SHIFT)
        lk = self._pmd_locks.get(pud)
        if lk is None:
            s = self.mm.system
            lk = self._pmd_locks[pud] = Spinlock(s.locks, "ptlock_ptr(pmd page)", s.spin_kind, self.mm.home_cpu)
        return lk

    def pte_lockptr(self, pmd_slot: int) -> Spinlock:
        if not self.pte_split:
            return self.mm.page_table_lock  # type: ignore[no-any-return]
        lk = self._pte_locks.get(pmd_slot)
        if lk is None:
            s = self.mm.system
            lk = self._pte_locks[pmd_slot] = Spinlock(s.locks, "ptlock_ptr(pte page)", s.spin_kind, self.mm.home_cpu)
        return lk

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
