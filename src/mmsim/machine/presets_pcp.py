"""Machine presets added for the page-allocator issue (19): the Sapphire Rapids
server of upstream 52166607ecc9's zone->lock timings.

The commit message names no SKU ("Sapphire Rapids Server"); the preset is a
2-socket Xeon Platinum 8480+, the top 56-core part, as a stand-in. Every
constant names its source or says ``estimate`` with a plausible range, as in
:mod:`mmsim.machine.presets`, whose shared derivation rules it reuses.
"""

from __future__ import annotations

from mmsim.machine.model import CacheLevel, Machine
from mmsim.machine.presets import (
    INTEL_IDLE,
    KCORES,
    LINE,
    OPT_MANUAL,
    RULE_BW,
    ark,
    dram_node,
    make_sockets,
    ns,
    peak_gbs,
    rule_cost,
    slit,
    sourced,
    uniform_distances,
)

SPR = "Xeon Platinum 8480+"


def sapphirerapids_8480_2s() -> Machine:
    """2 x Xeon Platinum 8480+ (Sapphire Rapids), 224 CPUs: validate --suite paths."""
    ghz = 2.0  # Intel ARK, Xeon Platinum 8480+: base 2.00 GHz
    l2 = ns(16, ghz)  # estimate: ~16 cycles for the 2 MiB Golden Cove server L2 (plausible 14-18)
    l3 = ns(60, ghz)  # estimate: ~60 cycles on the larger SPR mesh (plausible 55-80)
    local = 110.0  # estimate: DDR5-4800 idle latency, ~20 ns above Ice Lake-SP's 89.2 (plausible 95-125)
    remote = 175.0  # estimate: local + a UPI 2.0 round trip as on Ice Lake-SP (142.7 - 89.2) (plausible 150-200)
    peak = peak_gbs(8, 4800)  # Intel ARK, Platinum 8480+: 8 channels DDR5-4800
    caches = (
        CacheLevel("L1d", 48, 12, LINE, 2, ns(5, ghz)),  # Opt. manual, Golden Cove: 48 KiB 12-way, 5 cycles
        CacheLevel("L2", 2048, 16, LINE, 2, l2),  # Opt. manual, Golden Cove server: 2 MiB 16-way per core
        CacheLevel("L3", 105 * 1024, 15, LINE, 112, l3),  # ARK: 105 MB; 1.875 MB 15-way slices
    )
    nodes = tuple(dram_node(i, 256, local, peak, i, remote) for i in range(2))  # estimate: 8 x 32 GiB per socket
    return Machine(
        name="sapphirerapids-8480-2s",
        description="2 x Xeon Platinum 8480+ (Sapphire Rapids, 56C/112T, 105 MiB LLC each), 224 CPUs, DDR5-4800",
        freq_ghz=ghz,
        sockets=make_sockets(2, 56, 2),  # Intel ARK, Platinum 8480+: 56 cores, 112 threads
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(2, slit(local, remote)),  # estimate: latency ratio 175 / 110 -> 16
        cost=sourced(
            rule_cost(
                ghz, l2, socket_ns=2 * l3, hop_ns=remote - local, local_ns=local,
                idle_exit_us=2,  # intel_idle.c spr_cstates (SAPPHIRERAPIDS_X): C1E exit_latency 2 us
                sources={"line_xfer_smt_ns": "estimate: SMT siblings share L1d/L2, about one L2 hit; "
                         "plausible 5-10 ns (Ice Lake-SP measures 8.1 ns)"},
            ),
            # KCORES, Xeon w9-3475X (Sapphire Rapids, 36 cores, 1 socket): median 55.3 ns
            line_xfer_socket_ns=(55.3, f"{KCORES}: Xeon w9-3475X (Sapphire Rapids) same socket"),
            line_xfer_remote_ns=(round(55.3 + remote - local, 2),
                                 "estimate: 55.3 ns + the remote - local DRAM latency (the presets' rule); "
                                 "no SPR cross-socket figure found, plausible 110-140 ns"),
        ),
        sources={
            "freq_ghz": ark(SPR),
            "sockets": ark(SPR) + "; stand-in for 52166607ecc9's unnamed 'Sapphire Rapids Server'",
            "caches": f"{ark(SPR)}; {OPT_MANUAL}; L2/L3 latency estimates",
            "nodes.memory_gib": "estimate: 256 GiB per socket (8 channels x 32 GiB)",
            "nodes.latency_ns": "estimate: DDR5-4800, plausible 95-125 ns",
            "nodes.remote_latency_ns": "estimate: local + the Ice Lake-SP UPI round trip, plausible 150-200 ns",
            "nodes.bandwidth": f"{ark(SPR)} (8 x DDR5-4800); {RULE_BW}",
            "distances": "estimate: latency ratio 175 / 110",
            "idle": INTEL_IDLE,
        },
    )
