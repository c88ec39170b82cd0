"""NUMA memory policies (mm/mempolicy.c, v5.4; MPOL_F_NUMA_BALANCING v5.12).

A policy is ``default`` (allocate on the faulting CPU's node, then the
zonelist), ``bind`` (only the given nodes: the first in the faulting node's
zonelist order that has free pages), ``interleave`` (page ``i`` of the VMA on
``nodes[i % n]``, ``offset_il_node``) or ``preferred`` (the given node first,
then the zonelist). Policies attach to a VMA (``mbind``); no policy is the
default one.

NUMA balancing only scans VMAs whose policy has ``MPOL_F_MOF``
(``vma_policy_mof``): the default policy (``preferred_node_policy`` carries
``MPOL_F_MOF | MPOL_F_MORON``) and, since v5.12, ``bind`` with
``MPOL_F_NUMA_BALANCING``. ``mpol_misplaced`` decides where a page that took
a hinting fault belongs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mmsim.engine.core import PARK
from mmsim.errors import UserError
from mmsim.mm.costs import path
from mmsim.mm.pgtable import PMD_HUGE, PMD_SHIFT

PAGE_SHIFT = 12
NUMA_NO_NODE = -1


class Mode(StrEnum):
    DEFAULT = "default"
    BIND = "bind"
    INTERLEAVE = "interleave"
    PREFERRED = "preferred"


@dataclass(frozen=True)
class MemPolicy:
    mode: Mode
    nodes: tuple[int, ...] = ()
    numa_balancing: bool = False  # MPOL_F_NUMA_BALANCING (bind only, v5.12+)

    @property
    def mof(self) -> bool:
        """``MPOL_F_MOF``: migrate on fault (NUMA balancing applies)."""
        return self.mode is Mode.DEFAULT or (self.mode is Mode.BIND and self.numa_balancing)

    @property
    def moron(self) -> bool:
        """``MPOL_F_MORON``: migrate towards the node of the referencing CPU."""
        return self.mof


DEFAULT_POLICY = MemPolicy(Mode.DEFAULT)


def make_policy(machine: Any, mode: str, nodes: str, flags: str = "") -> MemPolicy:
    """Validate a policy given as strings (``numactl`` style node list ``"0,2"``)."""
    allowed_modes = [m.value for m in Mode]
    if mode not in allowed_modes:
        raise UserError("-p mempolicy", mode, allowed_modes)
    nn = len(machine.nodes)
    ids: list[int] = []
    for part in [p for p in str(nodes).split(",") if p.strip()]:
        p = part.strip()
        if not p.isdigit() or int(p) >= nn:
            raise UserError("-p nodes", nodes, f"comma-separated node ids 0..{nn - 1} of {machine.name}")
        if int(p) not in ids:
            ids.append(int(p))
    m = Mode(mode)
    if m is Mode.DEFAULT and ids:
        raise UserError("-p nodes", nodes, "empty with mempolicy=default")
    if m is Mode.PREFERRED and len(ids) != 1:
        raise UserError("-p nodes", nodes, "exactly one node with mempolicy=preferred")
    if m in (Mode.BIND, Mode.INTERLEAVE) and not ids:
        raise UserError("-p nodes", nodes, f"at least one node with mempolicy={mode}")
    if flags not in ("", "none", "numa_balancing"):
        raise UserError("-p mpol_flags", flags, "none, numa_balancing")
    nb = flags == "numa_balancing"
    if nb and m is not Mode.BIND:
        # set_mempolicy(2): MPOL_F_NUMA_BALANCING is only valid with MPOL_BIND (v5.12).
        raise UserError("-p mpol_flags", flags, "numa_balancing only with mempolicy=bind")
    return MemPolicy(m, tuple(ids), nb)


def set_vma_policy(system: Any, vma: Any, pol: MemPolicy) -> None:
    """``mbind(2)`` on the whole VMA."""
    system.mempolicies[id(vma)] = pol


def get_vma_policy(system: Any, vma: Any) -> MemPolicy:
    pol: MemPolicy = system.mempolicies.get(id(vma), DEFAULT_POLICY)
    return pol


def alloc_node(system: Any, vma: Any, addr: int, cpu: int) -> int:
    """The node ``alloc_pages_vma`` starts from for a page at ``addr``
    (``policy_node`` / ``interleave_nid``); the allocator falls back along that
    node's zonelist when it is full (``bind`` picks among its nodes here)."""
    home: int = system.machine.cpu_node(cpu)
    pol: MemPolicy | None = system.mempolicies.get(id(vma)) if system.mempolicies else None
    if pol is None or pol.mode is Mode.DEFAULT:
        return home
    if pol.mode is Mode.PREFERRED:
        return pol.nodes[0]
    if pol.mode is Mode.INTERLEAVE:
        return pol.nodes[((int(addr) - int(vma.start)) >> PAGE_SHIFT) % len(pol.nodes)]
    pa = system.page_alloc
    for n in pa.zonelist[home]:
        if n in pol.nodes and pa.zones[n].free_pages > 0:
            return int(n)
    return pol.nodes[0]


def mpol_misplaced(system: Any, vma: Any, addr: int, cpu: int, page_nid: int) -> tuple[int, bool]:
    """``mpol_misplaced`` (v5.4): ``(target node or NUMA_NO_NODE, moron)``.
    With ``moron`` the caller still has to pass ``should_numa_migrate_memory``
    (the target is then the referencing CPU's node)."""
    pol = get_vma_policy(system, vma)
    if not pol.mof:
        return NUMA_NO_NODE, False
    this_nid: int = system.machine.cpu_node(cpu)
    if pol.mode is Mode.BIND and this_nid not in pol.nodes:
        # v5.12 MPOL_BIND with MPOL_F_MORON: only migrate among the bound nodes.
        return NUMA_NO_NODE, False
    return this_nid, True


def get_mempolicy_addr_node(task: Any, mm: Any, addr: int, vma: Any = None) -> Any:
    """``get_mempolicy(&node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR)`` of a populated page: the node of
    the page at ``addr`` (a generator; returns nothing the workloads use). v3.12 / v3.13 mm/mempolicy.c
    ``do_get_mempolicy``: ``down_read(&mm->mmap_sem)``, ``find_vma``, then ``lookup_node`` →
    ``get_user_pages`` of one page → ``__get_user_pages`` (its ``cond_resched()``, then) →
    ``follow_page_mask`` (mm/memory.c): a huge PMD under ``pmd_lockptr()`` (``mm->page_table_lock`` before
    the split PMD lock, e009bb30c8df; the PMD table's own lock after it) for ``follow_trans_huge_pmd``, a
    4 KiB page under its PTE table's split lock;
    ``page_to_nid``, ``put_page``, ``up_read``. The page's own lines (``get_page_foll``, ``put_page``) are
    the calling thread's: their cost is in the path lengths (mm/costs.py, a native measurement of the whole
    call). The model's lines that other CPUs write: ``mmap_sem``'s count and the page-table lock, and before
    v3.15 ``mm->mmap_cache`` (``vma``: the VMA the call finds), which ``do_get_mempolicy``'s
    ``find_vma_intersection`` and ``__get_user_pages``' ``find_extend_vma`` both look up
    (:class:`mmsim.mm.mmap.MmapCache`; docs/locks.md, session 31).
    (thp_memscale's node check, docs/locks.md session 21.)"""
    s = mm.system
    c = s.counters
    cpu = task.cpu
    ghz = s.machine.freq_ghz
    slot = addr >> PMD_SHIFT
    huge = mm.pgtables.pmd.get(slot) == PMD_HUGE
    ns, ins = path("get_mempolicy" if huge else "get_mempolicy/pte", ghz)
    d = mm.mmap_sem.down_read(task)
    if d is PARK:
        yield d
        d = 0
    mc = mm.mmap_cache
    if mc is not None:  # do_get_mempolicy's find_vma_intersection
        d += mc.find_vma(cpu, vma)
    # the call's own path before the page-table lock (half of it: entry, find_vma, the GUP set-up)
    yield d + c.busy(cpu, "do_get_mempolicy", ns // 2, ins // 2)
    if mc is not None:  # __get_user_pages' find_extend_vma (an event of its own only when its load waits)
        d = mc.find_vma(cpu, vma)
        if d:
            yield d
    # __get_user_pages' cond_resched() before follow_page_mask (3.13.0 mm/memory.c), mmap_sem held for read:
    # a task woken onto this CPU switches in here (docs/locks.md, session 22)
    if s.sched.cpus[cpu].need_resched:
        yield from s.sched.cond_resched(task)
    lk = mm.pgtables.pmd_lockptr(slot) if huge else mm.pgtables.pte_lockptr(slot)
    d = lk.acquire(task)
    if d is PARK:
        yield d
        d = 0
    # the lock's ns and the section under it in one yield, as for mmap_sem above: the same times (busy is
    # accounting only, and the lock is held either way until release below), one event fewer per call
    lns, lins = path("follow_trans_huge_pmd" if huge else "follow_page_pte", ghz)
    yield d + c.busy(cpu, "follow_trans_huge_pmd" if huge else "follow_page_mask", lns, lins)
    lk.release(task)
    yield c.busy(cpu, "do_get_mempolicy", ns - ns // 2, ins - ins // 2)
    yield mm.mmap_sem.up_read(task)
