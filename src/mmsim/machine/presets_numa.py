"""Machine presets of the NUMA-balancing / tiering work (issue 18).

``tiny-pmem``: ``tiny`` with a CPU-less slow-memory node per socket, as
Optane DC PMEM onlined as kmem appears (``cascadelake-optane-2s`` at test
scale), for unit tests of the CPU-less-node paths (numactl --cpunodebind to a
node without CPUs, demotion, the memmap of a hot-added node).

:func:`with_pmem` gives ``cascadelake-optane-2s`` with another Optane
capacity per socket: the capacity of lkp-csl-2sp3 is not in the sources
(docs/autonuma-scan.md shows the result across the module sizes Optane DC
PMEM 100 came in: 128, 256, 512 GB).
"""

from __future__ import annotations

import dataclasses

from mmsim.machine.model import Machine, MemoryType, NumaNode
from mmsim.machine.presets import cascadelake_optane_2s, tiny

SRC = "round numbers for exact unit tests"
# Optane DC PMEM 100: usable capacity per module (Intel product brief: 128, 256, 512 GB modules; the 128 GB module
# shows as 124 GiB, Huang Ying's numactl -H: 253952 MB for two)
MODULE_GIB = {128: 253952 / 1024 / 2, 256: 2 * 253952 / 1024 / 2, 512: 4 * 253952 / 1024 / 2}


def tiny_pmem() -> Machine:
    """``tiny`` (2 sockets x 2 cores x 2 threads, 1 GiB DRAM per socket) with a 2 GiB CPU-less node per socket."""
    base = tiny()
    pmem = tuple(NumaNode(2 + s, 2.0, MemoryType.PMEM, 300.0, 5.0, 2.0, s) for s in range(2))  # SRC
    return dataclasses.replace(
        base,
        name="tiny-pmem",
        description="test machine: tiny + a CPU-less 2 GiB slow-memory node per socket (nodes 2, 3)",
        nodes=base.nodes + pmem,
        distances=((10, 20, 15, 25), (20, 10, 25, 15), (15, 25, 10, 25), (25, 15, 25, 10)),  # SRC
        sources={"all": SRC},
    )


def with_pmem(modules: int, module_gb: int) -> Machine:
    """``cascadelake-optane-2s`` with ``modules`` Optane modules of ``module_gb`` per socket."""
    base = cascadelake_optane_2s()
    gib = modules * MODULE_GIB[module_gb]
    nodes = tuple(
        dataclasses.replace(n, memory_gib=gib, read_bw_gbs=round(modules * 6.6, 2),  # Izraelevitz et al., per DIMM
                            write_bw_gbs=round(modules * 2.3, 2))
        if n.mem_type is MemoryType.PMEM else n
        for n in base.nodes
    )
    return dataclasses.replace(base, name=f"cascadelake-optane-2s-pmem{modules}x{module_gb}", nodes=nodes)
