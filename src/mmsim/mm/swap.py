"""LRU addition through per-CPU folio batches (mm/swap.c, v6.6).

``folio_add_lru`` puts a new folio on this CPU's ``cpu_fbatches.lru_add``
batch (a ``folio_batch`` of ``PAGEVEC_SIZE`` = 15 folios, no lock). When the
batch is full (``folio_batch_add`` returns 0) ``folio_batch_move_lru`` moves
them all: for each folio ``folio_lruvec_relock_irqsave`` (taking
``lruvec->lru_lock`` only when the lruvec changes, so once per node run) and
``lruvec_add_folio``. Without memcg (or all in the root memcg) the lruvec
is the node's: one ``lru_lock`` per node.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.spinlock import Spinlock
from mmsim.mm.costs import path

PAGEVEC_SIZE = 15  # include/linux/pagevec.h (v6.6)
LRU_LOCK_CLASS = "&lruvec->lru_lock"


class LruState:
    """The per-CPU ``lru_add`` batches and each node's ``lruvec->lru_lock``."""

    def __init__(self, s: Any) -> None:
        m = s.machine
        self.locks = [Spinlock(s.locks, LRU_LOCK_CLASS, s.spin_kind, _node_cpu(m, n)) for n in range(len(m.nodes))]
        self.batches: list[list[int]] = [[] for _ in range(m.ncpus)]  # the folios' nodes
        self.nr_lru = [0] * len(m.nodes)  # folios on each node's LRU lists


def _node_cpu(m: Any, node: int) -> int:
    for c in range(m.ncpus):
        if m.cpu_node(c) == node:
            return c
    return 0


def lru_state(s: Any) -> LruState:
    st: LruState | None = getattr(s, "lru_state", None)
    if st is None:
        st = LruState(s)
        s.lru_state = st
    return st


def folio_add_lru(task: Task, s: Any, node: int) -> Generator[Any, Any, None]:
    """``folio_add_lru``: add to this CPU's batch; move the batch when it is full."""
    st = lru_state(s)
    b = st.batches[task.cpu]
    b.append(node)
    ns, ins = path("folio_add_lru", s.machine.freq_ghz)
    yield s.counters.busy(task.cpu, "folio_add_lru", ns, ins)
    if len(b) >= PAGEVEC_SIZE:
        yield from folio_batch_move_lru(task, s, st)


def folio_batch_move_lru(task: Task, s: Any, st: LruState) -> Generator[Any, Any, None]:
    """``folio_batch_move_lru(fbatch, lru_add_fn)``: each folio onto its node's LRU under
    ``lru_lock`` (irqsave), relocking only when the node changes."""
    b = st.batches[task.cpu]
    ns, ins = path("lru_add_fn", s.machine.freq_ghz)
    i = 0
    while i < len(b):
        node = b[i]
        j = i
        while j < len(b) and b[j] == node:
            j += 1
        lk = st.locks[node]
        yield lk.acquire(task)
        yield s.counters.busy(task.cpu, "folio_batch_move_lru", ns * (j - i), ins * (j - i))
        st.nr_lru[node] += j - i
        lk.release(task)
        i = j
    b.clear()
