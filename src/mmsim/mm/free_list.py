"""One buddy free list, ``zone->free_area[order].free_list[migratetype]``
(include/linux/mmzone.h, v6.6), and the ``struct page`` line state the
allocator charges for (mm/page_alloc.c).

**FreeList.** A doubly linked list of free blocks by pfn, as the kernel's
``struct list_head buddy_list``: ``first`` is ``list_first_entry`` (where
``add_to_free_list`` inserts and ``__rmqueue_smallest`` takes), ``last`` is
where ``add_to_free_list_tail`` inserts. Each entry is ``[prev, next,
stamp]`` with ``NIL`` (-1) for the list head in ``struct zone``; so
``list_del`` knows the two neighbours whose ``struct page`` it writes. One
entry per free block, as before: never one per page.

A ``dict``-like reading interface (``keys``, ``items``, ``[pfn]``, ``in``,
``len``, assignment = head insert) keeps the callers and tests that only
look at the contents simple; iteration is from ``first`` to ``last``.
"""

from __future__ import annotations

from collections.abc import Iterator

NIL = -1  # the list head (in struct zone), not a struct page


class FreeList:
    __slots__ = ("nodes", "first", "last")

    def __init__(self) -> None:
        self.nodes: dict[int, list[int]] = {}  # pfn -> [prev, next, stamp]
        self.first = NIL
        self.last = NIL

    # -- list_add / list_add_tail / list_del -------------------------------------
    def add(self, pfn: int, stamp: int) -> int:
        """``add_to_free_list``: insert at the head; returns the old first entry (NIL if empty),
        whose ``prev`` the kernel writes."""
        old = self.first
        self.nodes[pfn] = [NIL, old, stamp]
        if old == NIL:
            self.last = pfn
        else:
            self.nodes[old][0] = pfn
        self.first = pfn
        return old

    def add_tail(self, pfn: int, stamp: int) -> int:
        """``add_to_free_list_tail``: returns the old last entry (NIL if empty), whose ``next`` is written."""
        old = self.last
        self.nodes[pfn] = [old, NIL, stamp]
        if old == NIL:
            self.first = pfn
        else:
            self.nodes[old][1] = pfn
        self.last = pfn
        return old

    def remove(self, pfn: int) -> tuple[int, int, int]:
        """``list_del``: returns ``(stamp, prev, next)``; prev/next are NIL where the neighbour is the head."""
        prev, nxt, stamp = self.nodes.pop(pfn)
        if prev == NIL:
            self.first = nxt
        else:
            self.nodes[prev][1] = nxt
        if nxt == NIL:
            self.last = prev
        else:
            self.nodes[nxt][0] = prev
        return stamp, prev, nxt

    def pop_first(self) -> tuple[int, int, int]:
        """``list_first_entry`` + ``del_page_from_free_list``: ``(pfn, stamp, next)``."""
        pfn = self.first
        stamp, _, nxt = self.remove(pfn)
        return pfn, stamp, nxt

    # -- reading -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __bool__(self) -> bool:
        return self.first != NIL

    def __contains__(self, pfn: object) -> bool:
        return pfn in self.nodes

    def __iter__(self) -> Iterator[int]:
        p = self.first
        while p != NIL:
            yield p
            p = self.nodes[p][1]

    def keys(self) -> list[int]:
        return list(self)

    def items(self) -> list[tuple[int, int]]:
        return [(p, self.nodes[p][2]) for p in self]

    def __getitem__(self, pfn: int) -> int:
        return self.nodes[pfn][2]

    def __setitem__(self, pfn: int, stamp: int) -> None:
        if pfn in self.nodes:
            self.nodes[pfn][2] = stamp
        else:
            self.add(pfn, stamp)

    def pop(self, pfn: int) -> int:
        return self.remove(pfn)[0]

    def __repr__(self) -> str:
        return f"FreeList({dict(self.items())!r})"
