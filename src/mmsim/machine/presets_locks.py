"""Machine presets for the lock-level validation (``mmsim validate --suite locks``).

* ``haswell-ex-4s``: the Oracle X5-4 of the CNA series' locktorture numbers
  (Alex Kogan, "[PATCH v13 0/6] Add NUMA-awareness to qspinlock", LKML
  2021-01: "four Intel Xeon E7-8895 v3 @ 2.60GHz sockets with 18
  hyperthreaded cores each").

Same derivation rules as :mod:`mmsim.machine.presets`; no constant here is
fitted to the locktorture curve.
"""

from __future__ import annotations

from mmsim.machine.model import CacheLevel, Machine
from mmsim.machine.presets import (
    INTEL_MLC_E7,
    LINE,
    MCCALPIN_BDW,
    MOLKA_HSW,
    NVIENNOT,
    OPT_MANUAL,
    RULE_BW,
    dram_node,
    make_sockets,
    ns,
    peak_gbs,
    rule_cost,
    slit,
    uniform_distances,
)

CNA_V13 = (
    "Alex Kogan, '[PATCH v13 0/6] Add NUMA-awareness to qspinlock', LKML 2021-01 (Oracle X5-4: "
    "4 x Xeon E7-8895 v3 @ 2.60GHz, 18 hyperthreaded cores each; locktorture on v5.10-rc7)"
)


def haswell_ex_4s() -> Machine:
    """4 x Xeon E7-8895 v3 (Haswell-EX), 144 CPUs: the CNA series' locktorture machine."""
    ghz = 2.6  # CNA v13 cover letter: E7-8895 v3 @ 2.60GHz
    l2 = ns(12, ghz)  # Molka et al. ICPP 2015 (Haswell core): L2 12 cycles
    l3 = 21.0  # estimate: Molka's Haswell-EP L3 ~21 ns; the EX die has the same ring design; plausible 18-30 ns
    # estimate: Haswell-EP local DRAM (Molka ~96 ns) + the Jordan Creek scalable memory buffer of the
    # Brickland platform; plausible 110-140 ns. Remote: + the E7 QPI round trip (Intel MLC on E7-4800:
    # remote - local = 197 - 135 = 62 ns), fully connected by three QPI links per socket.
    local = 120.0
    remote = local + 62.0
    peak = peak_gbs(4, 1600)  # estimate: 4 SMI2 channels per socket at DDR4-1600 (Brickland, lockstep off)
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # Opt. manual: 32 KiB 8-way; 4 cycles (Molka)
        CacheLevel("L2", 256, 8, LINE, 2, l2),  # Opt. manual: 256 KiB 8-way per core
        CacheLevel("L3", 45 * 1024, 20, LINE, 36, l3),  # E7-8890 v3 class: 45 MB, 20-way (as Haswell-EP)
    )
    nodes = tuple(dram_node(i, 256, local, peak, i, remote) for i in range(4))  # estimate: 1 TiB in all
    return Machine(
        name="haswell-ex-4s",
        description="4 x Xeon E7-8895 v3 (Haswell-EX, 18C/36T, 45 MiB LLC each), 144 CPUs (Oracle X5-4)",
        freq_ghz=ghz,
        sockets=make_sockets(4, 18, 2),  # CNA v13: 4 sockets x 18 hyperthreaded cores
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(4, slit(local, remote)),  # three QPI links: all remote sockets one hop
        cost=rule_cost(
            # inference, as for Haswell-EP (xeon-e5-2699v3-2s): the 18-core Broadwell-EP measures 44 ns
            # core to core; plausible 40-50 ns
            ghz, l2, socket_ns=44.0, hop_ns=remote - local, local_ns=local,
            idle_exit_us=10,  # intel_idle.c hsw_cstates: C1E exit_latency 10 us
            sources={
                "line_xfer_socket_ns": (
                    f"inference: {NVIENNOT}, Xeon E5-2695 v4 (Broadwell-EP, 18 cores) 44 ns; plausible "
                    f"40-50 ns ({MCCALPIN_BDW})"),
                "line_xfer_remote_ns": (
                    f"estimate: 44 ns + the E7 QPI round trip 62 ns ({INTEL_MLC_E7}: 197 - 135 ns); "
                    "plausible 90-140 ns"),
            },
        ),
        sources={
            "freq_ghz": CNA_V13,
            "sockets": CNA_V13,
            "caches": f"{OPT_MANUAL}; latencies {MOLKA_HSW} (Haswell core)",
            "nodes.memory_gib": "estimate: 256 GiB per socket (not stated in the source)",
            "nodes.latency_ns": (f"estimate: {MOLKA_HSW} local 96 ns + memory buffer, 120 ns (110-140); "
                                 f"remote + 62 ns ({INTEL_MLC_E7})"),
            "nodes.bandwidth": f"estimate: 4 channels of DDR4-1600 per socket; {RULE_BW}",
            "distances": f"estimate: latency ratio {remote:.0f}/{local:.0f}",
        },
    )
