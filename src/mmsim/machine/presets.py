"""Machine presets: one plain factory per machine (gem5 stdlib style).

Every numeric constant carries a comment naming its public source, and the
same source strings are stored in ``Machine.sources`` / ``CostModel.sources``
so ``mmsim machine show`` can print them. Where no public number exists the
comment says ``estimate:`` and how the number was derived.

A few derivation rules are shared by every real machine so that no preset is
tuned on its own (one cost model per machine, from public facts):

* sustained DRAM bandwidth = ``READ_SUSTAIN`` / ``WRITE_SUSTAIN`` x the
  theoretical peak (channels x MT/s x 8 bytes);
* a modified-line hand-off between two cores of one socket costs about two
  L3 hits, unless a direct measurement exists (Levinthal's Nehalem guide
  gives ~75 cycles for a line modified in another core against ~40 for an
  L3 hit);
* a hand-off to the nearest other socket adds the interconnect round trip,
  i.e. the remote-minus-local DRAM latency;
* SMT siblings share L1d/L2, so their hand-off costs about one L2 hit;
* one core clears pages at ``FILL_BUFFERS`` x 64 B per local DRAM latency
  (Little's law on the L1D fill buffers);
* context switch and page-fault bookkeeping are fixed cycle counts, so they
  scale with the core clock; wake-up latency = a context switch plus the
  exit latency of the shallowest idle state the kernel's intel_idle driver
  offers beyond C1 polling (C1E, or C1 where there is no C1E);
* SLIT distances come from a published table where one exists, else from
  the latency ratio (SLIT is defined as relative latency x 10).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from pathlib import Path

from mmsim.errors import UserError
from mmsim.machine import host as _host
from mmsim.machine import yamlio
from mmsim.machine.model import SMT_SOURCE, CacheLevel, CostModel, Machine, MemoryType, NumaNode, Socket

# --- public sources (printed by `mmsim machine show`) -----------------------
MOLKA_HSW = (
    "Molka, Hackenberg, Schoene, Nagel: 'Cache Coherence Protocol and Memory Performance of the "
    "Intel Haswell-EP Architecture', ICPP 2015 (2x Xeon E5-2680 v3, source-snoop mode)"
)
LEVINTHAL = (
    "D. Levinthal: 'Performance Analysis Guide for Intel Core i7 Processor and Intel Xeon 5500 "
    "processors', Intel, 2009 (L1 4, L2 10, L3 ~40 cycles; line modified in another core ~75 cycles)"
)
MCCALPIN_BDW = (
    "J. McCalpin, Intel forum thread 'Core-to-Core Communication Latency in Skylake/Kaby Lake': "
    "Intel MLC L2-to-L2 modified intervention 40.3-42.3 ns within one Xeon E5-2660 v4 (Broadwell-EP)"
)
SOSP13_WSMEX = (
    "David, Guerraoui, Trigonakis: 'Everything You Always Wanted to Know About Synchronization but Were "
    "Afraid to Ask', SOSP 2013, Table 2 as quoted by a survey (8 x Xeon E7-8867L, Westmere-EX 10C, 2.13 GHz): "
    "modified line loaded by another core, same die 109 cycles (51 ns), one hop 289 (136 ns); "
    "docs/sources-contended-atomics.md"
)
INTEL_MLC_E7 = (
    "Intel Developer Zone blog 'Memory Latencies on Intel Xeon Processor E5-4600 and E7-4800 "
    "product families' (2014-01-28): Intel MLC on 4x E7-4800, local 135 ns, remote 194-202 ns"
)
IZRAELEVITZ = (
    "Izraelevitz et al.: 'Basic Performance Measurements of the Intel Optane DC Persistent Memory "
    "Module', arXiv:1903.05714, 2019 (DRAM ~81 ns, Optane random read ~305 ns; per DIMM "
    "~6.6 GB/s read, ~2.3 GB/s write)"
)
HUANG_SLIT = (
    "numactl -H and ACPI SLIT of a 2-socket, 96-CPU Cascade Lake + Optane DCPMM system in Huang Ying, "
    "'[PATCH -V3 1/2] NUMA balancing: fix NUMA topology for systems with CPU-less nodes', LKML 2022-02-14"
)
INTEL_IDLE = "Linux drivers/idle/intel_idle.c exit_latency tables"
OPT_MANUAL = "Intel 64 and IA-32 Architectures Optimization Reference Manual"
SODANI_KNL = (
    "Sodani et al.: 'Knights Landing: Second-Generation Intel Xeon Phi Product', IEEE Micro 36(2), 2016 "
    "(tile = 2 cores sharing a 1 MiB 16-way L2; MCDRAM cache mode is direct-mapped, 64 B lines)"
)
SGI_UV2000 = (
    "SGI UV 2000 System User Guide (007-5832): blade = 2 Xeon E5-4600 sockets + one UV Hub (HARP) "
    "ASIC over QPI; 8 blades per 10U IRU; NUMAlink 6; up to 512 cores per rack"
)
NL6_BW = "SGI UV 2000 specifications: NUMAlink 6, 6.7 GB/s per link per direction"
LKP_KNM = "seed 004 LKP report: '288 threads Intel(R) Xeon Phi(TM) CPU 7295 @ 1.50GHz with 80G memory'"
LI_DING_SHEN = "Li, Ding, Shen: 'Quantifying the Cost of Context Switch', ExpCS 2007"
# Core-to-core figures: half the median round trip of a compare-and-swap ping-pong between two pinned
# threads (the cost of a contended atomic changing hands: a modified line, HITM).
NVIENNOT = "nviennot/core-to-core-latency README (CAS ping-pong, round trip / 2, median)"
KCORES = "KCORES/core-to-core-latency-plus results CSVs (CAS ping-pong, medians)"
MLC_ICX = "Intel MLC 3.10 on 2 x Xeon Platinum 8360Y, hpcleuven/VscDocumentation icelake_mlc.txt"
MLC_CLX = "Intel MLC on 2 x Xeon Gold 6240, hpcleuven/VscDocumentation cascadelake_mlc.txt"


def ark(processor: str) -> str:
    return f"Intel ARK product specification, {processor}"


# --- derivation rules shared by every real machine ---------------------------
# estimate: STREAM-like read kernels on Xeon servers reach roughly 70-80% of
# the channel peak; KNL/KNM DDR STREAM ~90 GB/s of 115.2 GB/s peak agrees.
READ_SUSTAIN = 0.75
# estimate: store streams pay bus turnaround and write-back; about two thirds
# of the sustained read bandwidth.
WRITE_SUSTAIN = 0.5
# Optimization Reference Manual: 10 L1D fill buffers (Nehalem to Haswell);
# estimate: assumed unchanged for the later cores modelled here.
FILL_BUFFERS = 10
# estimate: direct cost of a switch is a few microseconds at 2-3 GHz
# (Li, Ding, Shen, ExpCS 2007); kept in cycles so it scales with the clock.
CTX_SWITCH_CYCLES = 6000
# estimate: exception entry/exit (several hundred cycles, more with PTI) plus
# handle_mm_fault bookkeeping (VMA lookup, page-table walk, rmap/memcg
# accounting) without locks, allocation or clearing, ~1500 cycles.
PAGE_FAULT_CYCLES = 1500
LINE = 64  # bytes; every x86 core modelled here (Optimization Reference Manual)

RULE_SMT = "estimate: SMT siblings share L1d/L2; a hand-off costs about one L2 hit"
RULE_SOCKET = (
    "estimate: ~2 L3 hits (Levinthal's Nehalem ratio 75/40 cycles); agrees with McCalpin's "
    "40-42 ns MLC measurement on Broadwell-EP"
)
RULE_REMOTE = "estimate: in-socket hand-off + interconnect round trip (remote - local DRAM latency)"
RULE_CLEAR = "estimate: Little's law, 10 L1D fill buffers x 64 B / local DRAM latency"
RULE_CTX = f"estimate: {CTX_SWITCH_CYCLES} cycles at the base clock ({LI_DING_SHEN}: a few us)"
RULE_WAKE = f"estimate: a context switch + exit latency of C1E (C1 if none) from {INTEL_IDLE}"
RULE_FAULT = f"estimate: {PAGE_FAULT_CYCLES} cycles at the base clock (exception entry/exit + bookkeeping)"
RULE_BW = f"estimate: peak x {READ_SUSTAIN} (read) / x {WRITE_SUSTAIN} (write), peak = channels x MT/s x 8 B"


def sourced(cost: CostModel, **fields: tuple[float, str]) -> CostModel:
    """``cost`` with some fields replaced by sourced figures: ``name=(value, source)``."""
    src = dict(cost.sources)
    vals: dict[str, float | None] = {}
    for name, (v, why) in fields.items():
        vals[name] = v
        src[name] = why
    for hit, hitm in (("line_hit_socket_ns", "line_xfer_socket_ns"), ("line_hit_remote_ns", "line_xfer_remote_ns")):
        if hit not in fields and getattr(cost, hit) == getattr(cost, hitm):
            vals[hit] = None  # derived from the modified-line figure: derive it again from the new one
    return dataclasses.replace(cost, **vals, sources=src)  # type: ignore[arg-type]


def ns(cycles: float, ghz: float) -> float:
    """Cycles at ``ghz`` in nanoseconds, rounded for readable YAML."""
    return round(cycles / ghz, 2)


def peak_gbs(channels: int, mts: int) -> float:
    return channels * mts * 8 / 1000


def dram_node(
    node: int, gib: float, latency_ns: float, peak: float, socket: int, remote_ns: float | None = None
) -> NumaNode:
    """A DRAM node; ``remote_ns`` = idle latency from the nearest other socket (None: from SLIT)."""
    return NumaNode(
        id=node,
        memory_gib=gib,
        mem_type=MemoryType.DRAM,
        latency_ns=latency_ns,
        read_bw_gbs=round(peak * READ_SUSTAIN, 2),
        write_bw_gbs=round(peak * WRITE_SUSTAIN, 2),
        socket=socket,
        remote_latency_ns=remote_ns,
    )


def make_sockets(n: int, cores: int, threads: int) -> tuple[Socket, ...]:
    """``n`` identical sockets, socket ``i`` local to DRAM node ``i``."""
    return tuple(Socket(id=i, cores=cores, threads_per_core=threads, node=i) for i in range(n))


def slit(local_ns: float, remote_ns: float) -> int:
    """SLIT distance from a latency ratio (ACPI defines SLIT as relative latency x 10)."""
    return round(10 * remote_ns / local_ns)


def uniform_distances(n: int, remote: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(10 if i == j else remote for j in range(n)) for i in range(n))


def rule_cost(
    ghz: float, l2_ns: float, socket_ns: float, hop_ns: float, local_ns: float, idle_exit_us: float,
    sources: dict[str, str],
) -> CostModel:
    """A CostModel from the shared derivation rules (see module docstring)."""
    ctx = ns(CTX_SWITCH_CYCLES, ghz)
    return CostModel(
        line_xfer_smt_ns=l2_ns,
        line_xfer_socket_ns=socket_ns,
        line_xfer_remote_ns=round(socket_ns + hop_ns, 2),
        core_clear_gbs=round(FILL_BUFFERS * LINE / local_ns, 2),
        ctx_switch_ns=ctx,
        wakeup_ns=round(ctx + idle_exit_us * 1000, 2),
        page_fault_ns=ns(PAGE_FAULT_CYCLES, ghz),
        sources={
            "line_xfer_smt_ns": RULE_SMT,
            "line_xfer_socket_ns": RULE_SOCKET,
            "line_xfer_remote_ns": RULE_REMOTE,
            "core_clear_gbs": RULE_CLEAR,
            "ctx_switch_ns": RULE_CTX,
            "wakeup_ns": RULE_WAKE,
            "page_fault_ns": RULE_FAULT,
            "smt_thread_speed": SMT_SOURCE,
            **sources,
        },
    )


# --- presets -------------------------------------------------------------------


def xeon_e5_2699v3_2s() -> Machine:
    """2 x Xeon E5-2699 v3 (Haswell-EP), 72 CPUs: seed 000 (clear target sub-page last)."""
    ghz = 2.3  # Intel ARK, Xeon E5-2699 v3: base 2.30 GHz
    l2 = ns(12, ghz)  # Molka et al. ICPP 2015: L2 4.8 ns at 2.5 GHz = 12 cycles
    l3 = 21.0  # Molka et al. ICPP 2015: L3 ~21 ns (E5-2680 v3)
    local, remote = 96.0, 146.0  # Molka et al. ICPP 2015: local ~96 ns, remote ~146 ns
    peak = 68.0  # Intel ARK, E5-2699 v3: 4 x DDR4-2133, max memory bandwidth 68 GB/s
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # ARK/Opt. manual: 32 KiB 8-way; 4 cycles (Molka)
        CacheLevel("L2", 256, 8, LINE, 2, l2),  # Opt. manual: 256 KiB 8-way per core
        CacheLevel("L3", 45 * 1024, 20, LINE, 36, l3),  # ARK: 45 MB; Haswell-EP LLC is 20-way
    )
    nodes = tuple(
        # estimate: 64 GiB per socket (the seed thread gives no size; 4 channels x 16 GiB)
        dram_node(i, 64, local, peak, i, remote)  # Molka et al.: remote ~146 ns
        for i in range(2)
    )
    return Machine(
        name="xeon-e5-2699v3-2s",
        description="2 x Xeon E5-2699 v3 (Haswell-EP, 18C/36T, 45 MiB LLC each), 72 CPUs, DDR4-2133",
        freq_ghz=ghz,
        sockets=make_sockets(2, 18, 2),  # Intel ARK, E5-2699 v3: 18 cores, 36 threads
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(2, slit(local, remote)),  # estimate: 146/96 ratio -> 15
        cost=rule_cost(
            # inference: no Haswell-EP core-to-core figure found; the 18-core Broadwell-EP E5-2695 v4
            # (same two-ring die layout, next process step) measures 44 ns; plausible range 40-50 ns
            ghz, l2, socket_ns=44.0, hop_ns=remote - local, local_ns=local,
            idle_exit_us=10,  # intel_idle.c hsw_cstates (HASWELL_X): C1E exit_latency 10 us
            sources={
                "line_xfer_socket_ns": (
                    f"inference: {NVIENNOT}, Xeon E5-2695 v4 (Broadwell-EP, 18 cores) 44 ns; plausible "
                    f"40-50 ns ({MCCALPIN_BDW}; 2 x Molka's 21 ns L3 = 42)"),
                "line_xfer_remote_ns": (
                    f"{RULE_REMOTE} (44 + 146 - 96 ns, {MOLKA_HSW}); estimate, plausible 90-140 ns "
                    "(Cascade Lake / Ice Lake measure 106-136 ns cross-socket)"),
            },
        ),
        sources={
            "freq_ghz": ark("Xeon E5-2699 v3"),
            "sockets": ark("Xeon E5-2699 v3") + "; seed 000: 2 sockets, 36 cores, 72 threads",
            "caches": f"{ark('Xeon E5-2699 v3')}; {OPT_MANUAL}; latencies {MOLKA_HSW}",
            "nodes.memory_gib": "estimate: 64 GiB per socket (not stated in seed 000)",
            "nodes.latency_ns": MOLKA_HSW,
            "nodes.bandwidth": f"{ark('Xeon E5-2699 v3')} (68 GB/s peak); {RULE_BW}",
            "distances": f"estimate: latency ratio 146/96 from {MOLKA_HSW}",
        },
    )


# SGI UV 2000 SLIT derivation (estimates; SGI publishes no latency table).
UV_LOCAL_NS = 85.0  # estimate: Sandy Bridge-EP local DRAM, between Nehalem-EP and Haswell-EP (Molka)
UV_QPI_NS = 50.0  # estimate: one QPI round trip = Haswell-EP remote - local (Molka ICPP 2015)
UV_HUB_NS = 100.0  # estimate: source + destination UV Hub ASICs and one NUMAlink 6 link, round trip
UV_ROUTER_NS = 100.0  # estimate: one further NUMAlink 6 hop between IRUs, round trip
UV_SOCKETS_PER_BLADE = 2  # SGI UV 2000 System User Guide: 2 sockets + 1 Hub per blade
UV_SOCKETS_PER_IRU = 16  # SGI UV 2000 System User Guide: 8 blades per IRU


def uv2000_distance(a: int, b: int) -> int:
    """SLIT between UV 2000 sockets ``a`` and ``b`` from the latency model above."""
    if a == b:
        return 10
    if a // UV_SOCKETS_PER_BLADE == b // UV_SOCKETS_PER_BLADE:
        return slit(UV_LOCAL_NS, UV_LOCAL_NS + UV_QPI_NS)  # same blade, direct QPI: 16
    lat = UV_LOCAL_NS + 2 * UV_QPI_NS + UV_HUB_NS  # QPI to own hub, NL6, QPI from remote hub
    if a // UV_SOCKETS_PER_IRU != b // UV_SOCKETS_PER_IRU:
        lat += UV_ROUTER_NS  # another IRU: one more NUMAlink hop
    return slit(UV_LOCAL_NS, lat)  # same IRU: 34, other IRU: 45


def sgi_uv2000_512() -> Machine:
    """SGI UV 2000, 64 x Xeon E5-4640 (Sandy Bridge-EP), 1024 CPUs: seed 001 (split PMD ptl)."""
    ghz = 2.4  # Intel ARK, Xeon E5-4640: base 2.40 GHz
    l2 = ns(12, ghz)  # Opt. manual, Sandy Bridge: L2 12 cycles
    # estimate: ~40 cycles on the 8-core server ring (client Sandy Bridge ~26-31 cycles, 7-cpu.com)
    l3 = ns(40, ghz)
    peak = 51.2  # Intel ARK, E5-4640: 4 x DDR3-1600, max memory bandwidth 51.2 GB/s
    n = 64  # 4 IRUs x 8 blades x 2 sockets = one rack of 512 cores (SGI UV 2000 User Guide)
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # Opt. manual, Sandy Bridge: 32 KiB 8-way, 4 cycles
        CacheLevel("L2", 256, 8, LINE, 2, l2),  # Opt. manual: 256 KiB 8-way per core
        CacheLevel("L3", 20 * 1024, 20, LINE, 16, l3),  # ARK: 20 MB; Sandy Bridge-EP LLC 20-way
    )
    nodes = tuple(dram_node(i, 64, UV_LOCAL_NS, peak, i) for i in range(n))  # 64 GiB/node: given config
    distances = tuple(tuple(uv2000_distance(a, b) for b in range(n)) for a in range(n))
    return Machine(
        name="sgi-uv2000-512",
        description=(
            "SGI UV 2000, 64 x Xeon E5-4640 (Sandy Bridge-EP, 8C/16T, 20 MiB LLC), 1024 CPUs, "
            "64 nodes, NUMAlink 6"
        ),
        freq_ghz=ghz,
        sockets=make_sockets(n, 8, 2),  # Intel ARK, E5-4640: 8 cores, 16 threads
        caches=caches,
        nodes=nodes,
        distances=distances,
        cost=rule_cost(
            ghz, l2, socket_ns=2 * l3, hop_ns=UV_QPI_NS, local_ns=UV_LOCAL_NS,
            idle_exit_us=10,  # intel_idle.c snb_cstates (SANDYBRIDGE_X): C1E exit_latency 10 us
            sources={
                "line_xfer_socket_ns": f"{RULE_SOCKET}; no Sandy Bridge-EP figure found, plausible 30-50 ns",
                "line_xfer_remote_ns": (
                    f"{RULE_REMOTE}: same-blade QPI hop (estimate 50 ns, Haswell-EP value from "
                    f"{MOLKA_HSW}); farther blades scale by SLIT; plausible 80-130 ns same blade"
                ),
            },
        ),
        sources={
            "freq_ghz": ark("Xeon E5-4640"),
            "sockets": f"{ark('Xeon E5-4640')}; {SGI_UV2000}",
            "caches": f"{ark('Xeon E5-4640')}; {OPT_MANUAL}; L3 latency estimate",
            "nodes.memory_gib": "configuration: 64 GiB per node (one node per socket)",
            "nodes.latency_ns": "estimate: Sandy Bridge-EP local DRAM ~85 ns",
            "nodes.bandwidth": f"{ark('Xeon E5-4640')} (51.2 GB/s peak); {RULE_BW}",
            "distances": (
                "estimate: SLIT = 10 x latency / local, local 85 ns; same blade +50 ns (QPI), "
                "other blade +200 ns (2 QPI legs + Hub/NUMAlink), other IRU +100 ns more"
            ),
            "interconnect": f"{SGI_UV2000}; {NL6_BW}",
        },
    )


def westmere_ex_4s() -> Machine:
    """4 x Xeon E7-4870 (Westmere-EX), 80 CPUs, 128 GiB: the split-PMD-lock series."""
    ghz = 2.4  # Intel ARK, Xeon E7-4870: base 2.40 GHz
    l2 = ns(10, ghz)  # Levinthal (Nehalem core): L2 10 cycles
    l3 = ns(40, ghz)  # Levinthal: unshared L3 hit ~40 cycles (estimate for the EX ring)
    local, remote = 135.0, 197.0  # Intel MLC blog on E7-4800: local 135 ns, remote 194-202 (mean 197)
    peak = peak_gbs(4, 1066)  # ARK: 4 memory channels; estimate: DDR3-1066 in 4-socket configs
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # Levinthal: 32 KiB 8-way, 4 cycles
        CacheLevel("L2", 256, 8, LINE, 2, l2),  # Levinthal: 256 KiB 8-way per core
        CacheLevel("L3", 30 * 1024, 24, LINE, 20, l3),  # ARK: 30 MB; Westmere-EX LLC 24-way
    )
    nodes = tuple(dram_node(i, 32, local, peak, i, remote) for i in range(4))  # 128 GiB total (design brief)
    # SOSP'13 Table 2 (same Westmere-EX die): same die 109 cycles at 2.13 GHz = 51 ns, taken in ns (the ring's
    # clock is not the core's; docs/machines.md, session 25). Was Levinthal's Nehalem-EP 75 cycles.
    socket_xfer = round(109 / 2.13, 1)
    return Machine(
        name="westmere-ex-4s",
        description="4 x Xeon E7-4870 (Westmere-EX, 10C/20T, 30 MiB LLC each), 80 CPUs, 128 GiB",
        freq_ghz=ghz,
        sockets=make_sockets(4, 10, 2),  # Intel ARK, E7-4870: 10 cores, 20 threads
        caches=caches,
        nodes=nodes,
        # Intel MLC blog: three QPI links make the 4 sockets fully connected, all remote equal
        distances=uniform_distances(4, slit(local, remote)),  # 197/135 -> 15
        cost=rule_cost(
            ghz, l2, socket_ns=socket_xfer, hop_ns=remote - local, local_ns=local,
            idle_exit_us=10,  # intel_idle.c nehalem_cstates (WESTMERE_EX): C1E exit_latency 10 us
            sources={
                "line_xfer_socket_ns": f"{SOSP13_WSMEX}; plausible 45-54 ns (the cycles at 2.4 GHz; mctop diassrv8)",
                "line_xfer_remote_ns": (
                    f"{RULE_REMOTE}; {INTEL_MLC_E7}; plausible 100-140 ns (SOSP'13's one hop on 8 sockets, 136 ns, "
                    "is the validate check: 8-socket snoops wait for 2-hop responses)"
                ),
            },
        ),
        sources={
            "freq_ghz": ark("Xeon E7-4870"),
            "sockets": ark("Xeon E7-4870"),
            "caches": f"{ark('Xeon E7-4870')}; {LEVINTHAL}",
            "nodes.memory_gib": "design brief: 128 GiB, one node per socket",
            "nodes.latency_ns": INTEL_MLC_E7,
            "nodes.bandwidth": f"{ark('Xeon E7-4870')}: 4 channels; estimate DDR3-1066; {RULE_BW}",
            "distances": f"estimate: latency ratio 197/135 from {INTEL_MLC_E7}",
        },
    )


def cascadelake_optane_2s() -> Machine:
    """2 x Xeon Platinum 8260 with Optane DC PMEM as CPU-less nodes 2, 3: seed 002."""
    ghz = 2.4  # Intel ARK, Xeon Platinum 8260: base 2.40 GHz
    l2 = ns(14, ghz)  # Opt. manual, Skylake server: L2 14 cycles
    l3 = ns(55, ghz)  # estimate: ~55 cycles on the Skylake-SP mesh
    local = 81.0  # Izraelevitz et al. 2019: DRAM ~81 ns (MLC on Gold 6240: 80.8 ns)
    remote = 140.4  # Intel MLC, 2 x Gold 6240 (VscDocumentation cascadelake_mlc.txt): remote 140.4 ns
    hop = 50.0  # estimate: UPI round trip, Haswell-EP QPI value (Molka ICPP 2015: 146 - 96)
    peak = peak_gbs(6, 2933)  # Intel ARK, Platinum 8260: 6 channels DDR4-2933
    dram_gib = 64136 / 1024  # Huang Ying's numactl -H: node 0 size 64136 MB
    pmem_gib = 253952 / 1024  # Huang Ying's numactl -H: node 2 size 253952 MB
    pmem_dimms = 2  # estimate: 248 GiB per socket = two 128 GB modules
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # Opt. manual, Skylake: 32 KiB 8-way, 4 cycles
        CacheLevel("L2", 1024, 16, LINE, 2, l2),  # Opt. manual, Skylake server: 1 MiB 16-way
        CacheLevel("L3", 36608, 11, LINE, 48, l3),  # ARK: 35.75 MB; Skylake-SP LLC 11-way
    )
    dram = [dram_node(i, dram_gib, local, peak, i, remote) for i in range(2)]
    pmem = [
        NumaNode(
            id=2 + s,
            memory_gib=pmem_gib,
            mem_type=MemoryType.PMEM,
            latency_ns=305.0,  # Izraelevitz et al. 2019: Optane random read ~305 ns
            read_bw_gbs=round(pmem_dimms * 6.6, 2),  # Izraelevitz et al.: ~6.6 GB/s read per DIMM
            write_bw_gbs=round(pmem_dimms * 2.3, 2),  # Izraelevitz et al.: ~2.3 GB/s write per DIMM
            socket=s,  # Huang Ying: DRAM and PMEM DIMMs share each socket's memory controllers
        )
        for s in range(2)
    ]
    return Machine(
        name="cascadelake-optane-2s",
        description=(
            "2 x Xeon Platinum 8260 (Cascade Lake, 24C/48T, 35.75 MiB LLC), 96 CPUs; "
            "DRAM nodes 0-1, Optane DC PMEM nodes 2-3 (no CPUs)"
        ),
        freq_ghz=ghz,
        sockets=make_sockets(2, 24, 2),  # Intel ARK, Platinum 8260: 24 cores, 48 threads
        caches=caches,
        nodes=tuple(dram + pmem),
        distances=(  # Huang Ying's ACPI SLIT (LKML 2022-02-14)
            (10, 21, 17, 28),
            (21, 10, 28, 17),
            (17, 28, 10, 28),
            (28, 17, 28, 10),
        ),
        cost=sourced(
            rule_cost(
                ghz, l2, socket_ns=2 * l3, hop_ns=hop, local_ns=local,
                idle_exit_us=10,  # intel_idle.c skx_cstates (SKYLAKE_X): C1E exit_latency 10 us
                sources={"line_xfer_smt_ns": f"{RULE_SMT}; plausible 5-10 ns (Ice Lake-SP measures 8.1 ns)"},
            ),
            # nviennot README, Platinum 8275CL (24-core Cascade Lake, as the 8260L): 47 ns same socket, 134 cross
            line_xfer_socket_ns=(47.0, f"{NVIENNOT}: Xeon Platinum 8275CL (Cascade Lake, 24 cores) same socket"),
            line_xfer_remote_ns=(134.0, f"{NVIENNOT}: Xeon Platinum 8275CL cross socket (Gold 6242: 48 / 136 ns)"),
        ),
        sources={
            "freq_ghz": ark("Xeon Platinum 8260"),
            "sockets": f"{ark('Xeon Platinum 8260')}; {HUANG_SLIT}",
            "caches": f"{ark('Xeon Platinum 8260')}; {OPT_MANUAL}; L3 latency estimate",
            "nodes.memory_gib": HUANG_SLIT,
            "nodes.latency_ns": f"{IZRAELEVITZ}; PMEM remote from SLIT",
            "nodes.remote_latency_ns": f"DRAM: {MLC_CLX} (remote 140.4 ns); PMEM: SLIT-scaled (no measurement)",
            "nodes.bandwidth": (
                f"DRAM: {ark('Xeon Platinum 8260')}, {RULE_BW}; PMEM: {IZRAELEVITZ} x 2 DIMMs "
                "per socket (estimate from the 248 GiB node size)"
            ),
            "distances": HUANG_SLIT,
        },
    )


def icelake_6338_2s() -> Machine:
    """2 x Xeon Gold 6338 (Ice Lake-SP), 128 CPUs: seed 003 (PCP free_high)."""
    ghz = 2.0  # Intel ARK, Xeon Gold 6338: base 2.00 GHz
    l2 = ns(14, ghz)  # estimate: ~14 cycles for the 1.25 MiB Sunny Cove server L2
    l3 = ns(55, ghz)  # estimate: ~55 cycles on the mesh, as for Skylake-SP
    local = 89.2  # Intel MLC 3.10, 2 x Platinum 8360Y (Ice Lake-SP, DDR4-3200): idle local 89.2 ns
    remote = 142.7  # same MLC run: idle remote 142.7 ns
    peak = peak_gbs(8, 3200)  # Intel ARK, Gold 6338: 8 channels DDR4-3200
    caches = (
        CacheLevel("L1d", 48, 12, LINE, 2, ns(5, ghz)),  # Opt. manual, Sunny Cove: 48 KiB 12-way, 5 cycles
        CacheLevel("L2", 1280, 20, LINE, 2, l2),  # Ice Lake-SP: 1.25 MiB 20-way per core
        CacheLevel("L3", 48 * 1024, 12, LINE, 64, l3),  # ARK: 48 MB; Ice Lake-SP LLC 12-way
    )
    nodes = tuple(dram_node(i, 128, local, peak, i, remote) for i in range(2))  # estimate: 256 GiB, 16 x 16 GiB
    return Machine(
        name="icelake-6338-2s",
        description="2 x Xeon Gold 6338 (Ice Lake-SP, 32C/64T, 48 MiB LLC each), 128 CPUs, DDR4-3200",
        freq_ghz=ghz,
        sockets=make_sockets(2, 32, 2),  # Intel ARK, Gold 6338: 32 cores, 64 threads
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(2, slit(local, remote)),  # MLC latency ratio 142.7 / 89.2 -> 16
        cost=sourced(
            rule_cost(
                ghz, l2, socket_ns=2 * l3, hop_ns=remote - local, local_ns=local,
                idle_exit_us=4,  # intel_idle.c icx_cstates (ICELAKE_X): C1E exit_latency 4 us
                sources={},
            ),
            # KCORES, Platinum 8358 (32 cores, as the Gold 6338): medians 51.1 same socket, 110.9 cross
            line_xfer_smt_ns=(8.1, f"{NVIENNOT}: Xeon Platinum 8375C (Ice Lake-SP) SMT siblings 8.1 ns"),
            line_xfer_socket_ns=(51.1, f"{KCORES}: Xeon Platinum 8358 (Ice Lake-SP, 32 cores) same socket"),
            line_xfer_remote_ns=(110.9, f"{KCORES}: Xeon Platinum 8358 cross socket (8375C: 108 ns)"),
            # inference: MLC's clean/modified ratio (HIT 60.1 / HITM 64.2 ns, local) applied to the CAS
            # figures; plausible range: 45-51 ns local, 100-111 ns remote
            line_hit_socket_ns=(round(51.1 * 60.1 / 64.2, 2), f"inference: 51.1 ns x {MLC_ICX} L2->L2 HIT/HITM "
                                "60.1/64.2; plausible 45-51 ns"),
            line_hit_remote_ns=(round(110.9 * 60.1 / 64.2, 2), "estimate: 110.9 ns x the local HIT/HITM ratio "
                                "60.1/64.2 (MLC gives no remote HIT); plausible 95-111 ns"),
            issue_width=(5.0, f"{OPT_MANUAL}: Sunny Cove allocates 5 uops per cycle"),
        ),
        sources={
            "freq_ghz": ark("Xeon Gold 6338"),
            "sockets": ark("Xeon Gold 6338") + "; seed 003: 2 sockets, 128 logical CPUs",
            "caches": f"{ark('Xeon Gold 6338')}; {OPT_MANUAL}; L2/L3 latency estimates",
            "nodes.memory_gib": "estimate: 128 GiB per socket (8 channels x 16 GiB)",
            "nodes.latency_ns": MLC_ICX + " (local 89.2 ns)",
            "nodes.remote_latency_ns": MLC_ICX + " (remote 142.7 ns)",
            "nodes.bandwidth": f"{ark('Xeon Gold 6338')} (8 x DDR4-3200); {RULE_BW}",
            "distances": f"estimate: latency ratio 142.7 / 89.2 from {MLC_ICX}",
        },
    )


def xeon_phi_7295() -> Machine:
    """Xeon Phi 7295 (Knights Mill), 288 CPUs, 80 GiB, quadrant/cache mode: seed 004.

    KNM has no L3. In cache mode the 16 GiB MCDRAM is a memory-side,
    direct-mapped cache in front of DDR4 shared by all 288 CPUs; the model
    requires an "L3", so the MCDRAM cache is modelled as that L3.
    """
    ghz = 1.5  # Intel ARK, Xeon Phi 7295: base 1.50 GHz
    l2 = ns(17, ghz)  # estimate: ~17 cycles for the tile's 1 MiB L2
    mcdram_hit = 150.0  # estimate: MCDRAM idle latency is a little above DDR's on KNL (~150 ns)
    local = 170.0  # estimate: MCDRAM tag miss then DDR4 (~130 ns on KNL flat mode) + tag check
    peak = peak_gbs(6, 2400)  # Intel ARK, Xeon Phi 7295: 6 channels DDR4-2400 (115.2 GB/s)
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 4, ns(4, ghz)),  # Sodani et al. 2016: 32 KiB 8-way; estimate 4 cycles
        CacheLevel("L2", 1024, 16, LINE, 8, l2),  # Sodani et al. 2016: 1 MiB 16-way per 2-core tile
        CacheLevel("L3", 16 * 1024 * 1024, 1, LINE, 288, mcdram_hit),  # ARK: 16 GB MCDRAM; direct-mapped
    )
    return Machine(
        name="xeon-phi-7295",
        description=(
            "Xeon Phi 7295 (Knights Mill, 72C x 4T), 288 CPUs, 80 GiB, cache mode: "
            "'L3' = 16 GiB MCDRAM cache"
        ),
        freq_ghz=ghz,
        sockets=make_sockets(1, 72, 4),  # Intel ARK, Xeon Phi 7295: 72 cores, 288 threads
        caches=caches,
        nodes=(dram_node(0, 80, local, peak, 0),),  # LKP report: 'with 80G memory'
        distances=((10,),),  # one node in quadrant/cache mode
        cost=sourced(rule_cost(
            ghz, l2,
            # estimate: requester -> distributed tag directory -> owner tile over the mesh,
            # about one DDR-latency worth of mesh crossings
            socket_ns=120.0,
            hop_ns=0.0,  # one socket: the remote cost is never used
            local_ns=local,
            idle_exit_us=1,  # intel_idle.c knl_cstates (XEON_PHI_KNM): no C1E, C1 exit_latency 1 us
            sources={
                "line_xfer_socket_ns": (
                    "estimate: mesh round trips via the distributed tag directory; no KNL/KNM core-to-core "
                    "figure found, plausible 80-200 ns"),
                "line_xfer_smt_ns": f"{RULE_SMT} (17 cycles); plausible 5-15 ns",
                "line_xfer_remote_ns": "single socket: unused (set equal to line_xfer_socket_ns)",
                # Marr et al. measured 2-way Hyper-Threading on a big core; a KNM core runs 4 threads on a
                # 2-wide issue (Sodani et al.), so the figure is carried over, not measured (session 12)
                "smt_thread_speed": (
                    f"estimate: {SMT_SOURCE}, a 2-way figure carried over to KNM's 4-way SMT; plausible 0.25 "
                    "(four threads sharing a 2-wide issue that one thread's loop saturates) to 0.65"),
            },
        ), issue_width=(2.0, f"{SODANI_KNL}: the core decodes, allocates and retires 2 per cycle")),
        sources={
            "freq_ghz": ark("Xeon Phi 7295"),
            "sockets": f"{ark('Xeon Phi 7295')}; {LKP_KNM}",
            "caches": f"{ark('Xeon Phi 7295')}; {SODANI_KNL}; MCDRAM cache modelled as L3; latency estimates",
            "nodes.memory_gib": LKP_KNM,
            "nodes.latency_ns": "estimate: KNL DDR4 ~130 ns + MCDRAM tag check in cache mode",
            "nodes.bandwidth": f"{ark('Xeon Phi 7295')} (6 x DDR4-2400, 115.2 GB/s); {RULE_BW}",
            "distances": "single node (quadrant cluster mode, cache memory mode)",
        },
    )


def tiny() -> Machine:
    """2 sockets x 2 cores x 2 threads at 1 GHz: round numbers for exact unit tests."""
    src = "round numbers for exact unit tests"
    return Machine(
        name="tiny",
        description="test machine: 2 sockets x 2 cores x 2 threads = 8 CPUs at 1 GHz (1 ns = 1 cycle)",
        freq_ghz=1.0,  # round numbers for exact unit tests
        sockets=make_sockets(2, 2, 2),  # round numbers for exact unit tests
        caches=(
            CacheLevel("L1d", 32, 8, LINE, 2, 4.0),  # round numbers for exact unit tests
            CacheLevel("L2", 256, 8, LINE, 2, 12.0),  # round numbers for exact unit tests
            CacheLevel("L3", 1024, 16, LINE, 4, 40.0),  # round numbers for exact unit tests
        ),
        nodes=tuple(
            NumaNode(i, 1.0, MemoryType.DRAM, 100.0, 20.0, 10.0, i)  # round numbers for exact unit tests
            for i in range(2)
        ),
        distances=((10, 20), (20, 10)),  # round numbers for exact unit tests
        cost=CostModel(
            # round numbers for exact unit tests (every value in this CostModel)
            line_xfer_smt_ns=10.0,
            line_xfer_socket_ns=50.0,
            line_xfer_remote_ns=200.0,
            core_clear_gbs=10.0,
            ctx_switch_ns=2000.0,
            wakeup_ns=5000.0,
            page_fault_ns=1000.0,
            smt_thread_speed=0.5,
            sources={f: src for f in (
                "line_xfer_smt_ns", "line_xfer_socket_ns", "line_xfer_remote_ns", "core_clear_gbs",
                "ctx_switch_ns", "wakeup_ns", "page_fault_ns", "smt_thread_speed",
            )},
        ),
        sources={"all": src},
    )


def host() -> Machine:
    """This machine: a calibrated ``host.yaml`` if one exists, else detected from /sys."""
    return _host.host_machine()


PRESETS: dict[str, Callable[[], Machine]] = {
    "xeon-e5-2699v3-2s": functools.cache(xeon_e5_2699v3_2s),
    "sgi-uv2000-512": functools.cache(sgi_uv2000_512),
    "westmere-ex-4s": functools.cache(westmere_ex_4s),
    "cascadelake-optane-2s": functools.cache(cascadelake_optane_2s),
    "icelake-6338-2s": functools.cache(icelake_6338_2s),
    "xeon-phi-7295": functools.cache(xeon_phi_7295),
    "host": functools.cache(host),
    "tiny": functools.cache(tiny),
}
# Presets in their own modules (imported late: they use this module's helpers)
from mmsim.machine import presets_locks as _presets_locks  # noqa: E402

PRESETS["haswell-ex-4s"] = functools.cache(_presets_locks.haswell_ex_4s)
from mmsim.machine import presets_caches as _presets_caches  # noqa: E402

PRESETS["genoa-9654-2s"] = functools.cache(_presets_caches.genoa_9654_2s)
from mmsim.machine import presets_mmap as _presets_mmap  # noqa: E402

PRESETS["skylake-8170-2s"] = functools.cache(_presets_mmap.skylake_8170_2s)
PRESETS["cooperlake-8380h-4s"] = functools.cache(_presets_mmap.cooperlake_8380h_4s)
from mmsim.machine import presets_pcp as _presets_pcp  # noqa: E402

PRESETS["sapphirerapids-8480-2s"] = functools.cache(_presets_pcp.sapphirerapids_8480_2s)
from mmsim.machine import presets_numa as _presets_numa  # noqa: E402

PRESETS["tiny-pmem"] = functools.cache(_presets_numa.tiny_pmem)

_DESCRIPTIONS = {
    "xeon-e5-2699v3-2s": "2 x Xeon E5-2699 v3 (Haswell-EP), 72 CPUs, 45 MiB LLC per socket",
    "sgi-uv2000-512": "SGI UV 2000, 64 x Xeon E5-4640 (Sandy Bridge-EP), 1024 CPUs, 64 nodes, NUMAlink 6",
    "westmere-ex-4s": "4 x Xeon E7-4870 (Westmere-EX), 80 CPUs, 128 GiB",
    "cascadelake-optane-2s": "2 x Xeon Platinum 8260 (Cascade Lake), 96 CPUs, + Optane DC PMEM nodes",
    "icelake-6338-2s": "2 x Xeon Gold 6338 (Ice Lake-SP), 128 CPUs, 48 MiB LLC per socket",
    "xeon-phi-7295": "Xeon Phi 7295 (Knights Mill), 288 CPUs, 80 GiB, MCDRAM cache mode",
    "skylake-8170-2s": "2 x Xeon Platinum 8170 (Skylake-SP), 104 CPUs, 192 GiB: robot lkp-skl-fpga01 (issue 22)",
    "cooperlake-8380h-4s": "4 x Xeon Platinum 8380H (Cooper Lake), 224 CPUs, 192 GiB: robot lkp-cpl-4sp2 (issue 22)",
    "host": "this machine, detected from /sys (or a calibrated ~/.config/mmsim/host.yaml)",
    "tiny-pmem": "test machine: tiny + a CPU-less 2 GiB slow-memory node per socket",
    "tiny": "8-CPU test machine with round numbers",
    "haswell-ex-4s": "4 x Xeon E7-8895 v3 (Haswell-EX), 144 CPUs: the CNA series' locktorture machine",
    "genoa-9654-2s": "2 x AMD EPYC 9654 (Genoa), 384 CPUs, 12 CCDs x 32 MiB L3 per socket",
    "sapphirerapids-8480-2s": "2 x Xeon Platinum 8480+ (Sapphire Rapids), 224 CPUs: 52166607ecc9 (issue 19)",
}


def list_machines() -> list[tuple[str, str]]:
    """(name, one-line description) of every preset, without building any."""
    return [(name, _DESCRIPTIONS[name]) for name in PRESETS]


def get_machine(name_or_path: str) -> Machine:
    """A preset by name, or a machine YAML file by path."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]()
    if name_or_path.endswith((".yaml", ".yml")) or os.path.exists(name_or_path):
        return yamlio.load_machine(Path(name_or_path))
    allowed = ", ".join(sorted(PRESETS)) + ", or a path to a machine YAML file"
    raise UserError("machine", name_or_path, allowed)
