"""The page allocator (mm/page_alloc.c), at the depth the fault paths need.

Per node one zone (ZONE_NORMAL) with ``zone->lock`` and a free-page count;
per CPU a per-cpu page list (PCP) for order-0 pages with ``count``, ``batch``
and ``high`` as ``zone_batchsize()``/``pageset_set_batch()`` compute them
(v3.x: batch = rounddown_pow_of_two(1.5 * min(managed/1024, 128) / 4) - 1,
high = 6 * batch). Order-0 allocations take a page from the PCP and refill it
with ``rmqueue_bulk`` under ``zone->lock`` when empty; higher orders go to the
buddy lists under ``zone->lock`` directly (``buffered_rmqueue``, v3.x).
Placement is the local node first, then the other nodes by SLIT distance
(the zonelist order of ``build_zonelists``). Free pages are counts, never
per-page objects.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.spinlock import Spinlock
from mmsim.metrics.counters import Counters
from mmsim.metrics.events import VmEvent
from mmsim.mm.costs import path

PGALLOC = int(VmEvent.PGALLOC_NORMAL)
PAGE_SIZE = 4096


def zone_batchsize(managed_pages: int) -> int:
    """mm/page_alloc.c ``zone_batchsize()`` (v3.12, CONFIG_MMU)."""
    batch = managed_pages // 1024
    if batch * PAGE_SIZE > 512 * 1024:
        batch = (512 * 1024) // PAGE_SIZE
    batch //= 4
    if batch < 1:
        batch = 1
    b = batch + batch // 2
    return (1 << (b.bit_length() - 1)) - 1


class Zone:
    __slots__ = ("node", "free_pages", "managed_pages", "lock", "batch", "high")

    def __init__(self, node: int, pages: int, lock: Spinlock) -> None:
        self.node = node
        self.managed_pages = pages
        self.free_pages = pages
        self.lock = lock
        self.batch = max(1, zone_batchsize(pages))  # pageset_set_batch: max(1UL, batch)
        self.high = 6 * self.batch


class PageAllocator:
    """Zones, PCPs and the zonelist order of every node."""

    def __init__(self, system: Any) -> None:
        m = system.machine
        self.system = system
        self.counters: Counters = system.counters
        self.zones = [
            Zone(n.id, int(n.memory_gib * (1 << 30)) // PAGE_SIZE,
                 Spinlock(system.locks, "&zone->lock", system.spin_kind, home_cpu=self._node_cpu(m, n.id)))
            for n in m.nodes
        ]
        nn = len(m.nodes)
        self.zonelist = [sorted(range(nn), key=lambda j: (m.distances[i][j], j)) for i in range(nn)]
        self.pcp = [[0] * len(m.nodes) for _ in range(m.ncpus)]  # pcp[cpu][node] = count
        self._freq = m.freq_ghz

    @staticmethod
    def _node_cpu(m: Any, node: int) -> int:
        cpus = [c for c in range(m.ncores) if m.cpu_node(c) == node]
        return cpus[0] if cpus else 0

    def _pick(self, node: int, npages: int) -> Zone:
        for n in self.zonelist[node]:
            z = self.zones[n]
            if z.free_pages >= npages:
                return z
        raise MemoryError(f"out of memory: no node has {npages} free pages")

    def pcp_alloc_fast(self, task: Task, node: int) -> tuple[int, int] | None:
        """Order-0 allocation served from this CPU's PCP without any lock:
        ``(node, ns)`` charged but not yielded, or None if a refill is needed."""
        z = self._pick(node, 1)
        pcp = self.pcp[task.cpu]
        if pcp[z.node] == 0:
            return None
        pcp[z.node] -= 1
        self.counters.vm[task.cpu][PGALLOC] += 1
        ns, ins = path("rmqueue_pcplist", self._freq)
        return z.node, self.counters.busy(task.cpu, "get_page_from_freelist", ns, ins)

    def alloc_pages(self, task: Task, node: int, order: int) -> Generator[Any, Any, int]:
        """``alloc_pages_node(node, gfp, order)``; returns the node the pages came from."""
        cpu = task.cpu
        c = self.counters
        npages = 1 << order
        z = self._pick(node, npages)
        c.vm[cpu][PGALLOC] += npages
        if order == 0:
            pcp = self.pcp[cpu]
            ns, ins = path("rmqueue_pcplist", self._freq)
            yield c.busy(cpu, "get_page_from_freelist", ns, ins)
            if pcp[z.node] == 0:
                # rmqueue_bulk: refill `batch` pages under zone->lock
                n = min(z.batch, z.free_pages)
                yield z.lock.acquire(task)
                ns, ins = path("__rmqueue", self._freq)
                yield c.busy(cpu, "rmqueue_bulk", ns * n, ins * n)
                z.lock.release(task)
                z.free_pages -= n
                pcp[z.node] += n
            pcp[z.node] -= 1
            return z.node
        yield z.lock.acquire(task)
        ns, ins = path("__rmqueue", self._freq)
        yield c.busy(cpu, "__rmqueue", ns, ins)
        z.lock.release(task)
        z.free_pages -= npages
        return z.node

    def free_pages_count(self) -> int:
        """Free pages in the buddy lists plus those sitting on PCPs."""
        return sum(z.free_pages for z in self.zones) + sum(sum(p) for p in self.pcp)
