"""Misplaced-page migration after a NUMA hinting fault (mm/migrate.c, v5.4).

``migrate_misplaced_page(page, vma, node)``: ``numamigrate_isolate_page``
refuses when the target node is short of memory (``migrate_balanced_pgdat``:
some zone must stay above its high watermark after taking the pages) and
otherwise isolates the page from its LRU; ``migrate_pages(MIGRATE_ASYNC,
MR_NUMA_MISPLACED)`` then allocates the new page on the target node
(``alloc_misplaced_dst_page``), unmaps the old one (``try_to_unmap``:
rmap walk, PTE → migration entry, TLB flush), copies 4 KiB
(``migrate_page_copy`` through ``memory.copy_pages``: the source read from
the LLC when still cached, else from memory, the destination written; the
traffic is charged to the target node's bandwidth), and re-establishes the PTE
(``remove_migration_ptes``). Counted: ``pgmigrate_success`` and
``numa_pages_migrated``.

Watermarks are the page allocator's (``__setup_per_zone_wmarks``). The
source page is not handed back to the buddy allocator (the model does not
track which pfn backs a PTE), so a migration costs the target node one page
and leaves the source's free count unchanged.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.metrics.events import VmEvent
from mmsim.mm import memory
from mmsim.mm.pgtable import numa_arrays

PGMIGRATE_SUCCESS = int(VmEvent.PGMIGRATE_SUCCESS)
NUMA_PAGES_MIGRATED = int(VmEvent.NUMA_PAGES_MIGRATED)
PAGE_SIZE = 4096

# (cycles, instructions): isolate_lru_page, migrate_pages bookkeeping, try_to_unmap (rmap walk of an
# anon page mapped once, set a migration entry), remove_migration_ptes, putback. estimate
MIGRATE_PATH = (3000, 2500)


def high_wmark_pages(system: Any, node: int) -> int:
    """The high watermark of ``node``'s zone in pages (``__setup_per_zone_wmarks``, mm/page_alloc.py)."""
    return int(system.page_alloc.zones[node].wmark_high)


def migrate_balanced_pgdat(system: Any, node: int, nr_pages: int) -> bool:
    """``migrate_balanced_pgdat``: the target keeps its high watermark after ``nr_pages``."""
    z = system.page_alloc.zones[node]
    return bool(z.free_pages - nr_pages > high_wmark_pages(system, node))


def migrate_misplaced_page(
    task: Task, mm: Any, addr: int, src_node: int, target: int
) -> Generator[Any, Any, bool]:
    """Migrate the 4 KiB page at ``addr`` from ``src_node`` to ``target``; True on success."""
    s = mm.system
    cpu = task.cpu
    if not migrate_balanced_pgdat(s, target, 1):
        s.numa_stats["numa_migrate_failed"] += 1
        return False
    got = yield from s.page_alloc.alloc_pages(task, target, 0)
    pfn = addr >> memory.PAGE_SHIFT
    # The LLC key of the page's contents (do_anonymous_page's): the copy reads it (a hit if still cached)
    # and leaves the new copy cached under the same key.
    key = ("P", id(mm), pfn)
    ns = int(MIGRATE_PATH[0] / s.machine.freq_ghz)
    yield s.counters.busy(cpu, "migrate_pages", ns, MIGRATE_PATH[1])
    yield memory.copy_pages(task, s, got, key, key, 1, memory._range(0, 1), "migrate_page_copy")
    slot = addr >> 21
    nid, _prot, _last, _scan = numa_arrays(mm.pgtables, slot)
    nid[(addr >> memory.PAGE_SHIFT) & 511] = got
    v = s.counters.vm[cpu]
    v[PGMIGRATE_SUCCESS] += 1
    v[NUMA_PAGES_MIGRATED] += 1
    return True
