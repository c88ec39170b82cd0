"""Machine presets for issue 22 (the kernel test robot machines of the fault front half).

* ``skylake-8170-2s``: "104 threads 2 sockets (Skylake) with 192G memory" (lkp-skl-fpga01, the
  4ed4379881aa page_fault3 report). The report gives no CPU model; 2 x Xeon Platinum 8170
  (26 cores, 52 threads each) is the issue's reading, and the only 26-core Skylake-SP Platinum part
  that gives 104 threads in two sockets.
* ``cooperlake-8380h-4s``: "224 threads 4 sockets Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz
  (Cooper Lake) with 192G memory" (lkp-cpl-4sp2: the d4148aeab412, 12214eba1992 and 849d5cff4d48
  reports).

Both follow the derivation rules of :mod:`mmsim.machine.presets` (one cost model per machine from
public facts). Measurements on the same die family are used where they exist; a different SKU's
measurement is then the ``validate --suite primitives`` reference, so that row is an independent
cross-check rather than the constant read back.
"""

from __future__ import annotations

from mmsim.machine.model import CacheLevel, Machine
from mmsim.machine.presets import (
    LINE,
    NVIENNOT,
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

# FD.io CSIT report, "Calibration Data - Skylake" (FDio/csit docs): Intel MLC 3.5 on a SUT of the Xeon
# Skylake testbeds, 2 x Xeon Platinum 8180 (28 cores, the XCC die the 8170 also uses; lscpu in FDio/csit
# docs/lab/testbeds_sm_skx_hw_bios_cfg.md).
CSIT_SKX = "FD.io CSIT 'Calibration Data - Skylake', Intel MLC 3.5 on 2 x Xeon Platinum 8180 (Skylake-SP XCC)"
# FD.io CSIT report, "Calibration Data - Cascadelake": MLC 3.7 on a 2-socket, 24-core Cascade Lake SUT.
CSIT_CLX = "FD.io CSIT 'Calibration Data - Cascadelake', Intel MLC 3.7 on 2 x 24-core Cascade Lake (2.3 GHz)"
# KU Leuven Genius thin nodes: 2 x Xeon Gold 6140 (Skylake-SP, 18 cores), 192 GiB (genius_hardware.rst).
GENIUS_SKX = "hpcleuven/VscDocumentation genius/skylake_mlc.txt: Intel MLC 3.10 on 2 x Xeon Gold 6140 (Skylake-SP)"
LKP_SKL = "4ed4379881aa robot report (lkp-skl-fpga01): '104 threads 2 sockets (Skylake) with 192G memory'"
LKP_CPL = (
    "d4148aeab412 robot report (lkp-cpl-4sp2): '224 threads 4 sockets Intel(R) Xeon(R) Platinum 8380H "
    "CPU @ 2.90GHz (Cooper Lake) with 192G memory'"
)
COOPER_UPI = (
    "AnandTech, 'Intel Launches Cooper Lake' (2020-06-18): Socket P+, 4P/8P only; ServeTheHome's launch "
    "article (copy at bestbuycpu.com): 6 UPI links per CPU, DDR4-3200 at 1 DIMM per channel on top SKUs"
)
SKX_CSTATES = 10  # intel_idle.c skx_cstates (SKYLAKE_X, also Cascade/Cooper Lake model 85): C1E exit 10 us


def skylake_8170_2s() -> Machine:
    """2 x Xeon Platinum 8170 (Skylake-SP), 104 CPUs, 192 GiB: the 4ed4379881aa page_fault3 robot machine."""
    ghz = 2.1  # Intel ARK, Xeon Platinum 8170: base 2.10 GHz
    l2 = ns(14, ghz)  # Opt. manual, Skylake server: L2 14 cycles
    l3 = ns(55, ghz)  # estimate: ~55 cycles on the Skylake-SP mesh (as cascadelake-optane-2s); 18-28 ns
    local, remote = 81.4, 131.1  # CSIT_SKX: MLC --latency_matrix 81.4 / 131.1 ns (node 0)
    peak = peak_gbs(6, 2666)  # Intel ARK, Platinum 8170: 6 channels DDR4-2666
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # Opt. manual, Skylake: 32 KiB 8-way, 4 cycles
        CacheLevel("L2", 1024, 16, LINE, 2, l2),  # Opt. manual, Skylake server: 1 MiB 16-way per core
        CacheLevel("L3", 36608, 11, LINE, 52, l3),  # ARK: 35.75 MB; Skylake-SP LLC 11-way, 52 threads
    )
    # LKP report: 192G in all; estimate: split evenly, 96 GiB per socket (6 channels x 16 GiB)
    nodes = tuple(dram_node(i, 96, local, peak, i, remote) for i in range(2))
    return Machine(
        name="skylake-8170-2s",
        description="2 x Xeon Platinum 8170 (Skylake-SP, 26C/52T, 35.75 MiB LLC each), 104 CPUs, 192 GiB DDR4-2666",
        freq_ghz=ghz,
        sockets=make_sockets(2, 26, 2),  # Intel ARK, Platinum 8170: 26 cores, 52 threads
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(2, slit(local, remote)),  # MLC latency ratio 131.1 / 81.4 -> 16
        cost=sourced(
            rule_cost(ghz, l2, socket_ns=2 * l3, hop_ns=remote - local, local_ns=local,
                      idle_exit_us=SKX_CSTATES, sources={}),
            # no Skylake-SP SMT figure found; Cascade Lake is the same core
            line_xfer_smt_ns=(7.6, f"inference: {NVIENNOT}, Platinum 8275CL (Cascade Lake, same core) SMT "
                              "siblings 7.6 ns; plausible 6-9 ns (Gold 6242: 7.4)"),
            # docs/machines.md: hand-offs use CAS ping-pong figures (MLC's HITM is a load-to-use latency,
            # 10-25% off the CAS figure); no Skylake-SP CAS figure was found, Cascade Lake is the same core,
            # mesh and XCC die (24 of 28 cores on the 8275CL, 26 on the 8170)
            line_xfer_socket_ns=(47.0, f"inference: {NVIENNOT}, Platinum 8275CL (Cascade Lake) same socket 47 ns; "
                                 f"plausible 45-56 ns ({CSIT_SKX}: L2->L2 HITM 53.7; {GENIUS_SKX}: 49.9)"),
            line_xfer_remote_ns=(134.0, f"inference: {NVIENNOT}, Platinum 8275CL cross socket 134 ns; plausible "
                                 f"110-140 ns ({CSIT_SKX}: remote HITM 113.9; {GENIUS_SKX}: 114.0)"),
        ),
        sources={
            "freq_ghz": ark("Xeon Platinum 8170"),
            "sockets": f"{ark('Xeon Platinum 8170')}; {LKP_SKL} (CPU model not in the report: issue 22's reading)",
            "caches": f"{ark('Xeon Platinum 8170')}; {OPT_MANUAL}; L3 latency estimate",
            "nodes.memory_gib": f"{LKP_SKL}; estimate: 96 GiB per socket",
            "nodes.latency_ns": f"{CSIT_SKX} (local 81.4 ns; Gold 6140 measures 90.2)",
            "nodes.remote_latency_ns": f"{CSIT_SKX} (remote 131.1 ns; Gold 6140 measures 144.3)",
            "nodes.bandwidth": f"{ark('Xeon Platinum 8170')} (6 x DDR4-2666); {RULE_BW}",
            "distances": f"estimate: latency ratio 131.1 / 81.4 from {CSIT_SKX}",
        },
    )


def cooperlake_8380h_4s() -> Machine:
    """4 x Xeon Platinum 8380H (Cooper Lake), 224 CPUs, 192 GiB: lkp-cpl-4sp2 of the malloc1/shm robot reports."""
    ghz = 2.9  # Intel ARK, Xeon Platinum 8380H: base 2.90 GHz (the report: 'CPU @ 2.90GHz')
    l2 = ns(14, ghz)  # Opt. manual, Skylake server core (Cooper Lake keeps it): L2 14 cycles
    l3 = ns(55, ghz)  # estimate: ~55 cycles on the mesh, as Skylake-SP / Cascade Lake; 18-28 ns
    # inference: no Cooper Lake MLC run found; the Cascade Lake die it derives from, CSIT_CLX:
    # local 81.2, remote 130.2 ns. Every socket pair has a direct UPI link in 4S (6 links per CPU,
    # COOPER_UPI), so all remote sockets are one hop. Plausible 78-90 ns local, 125-150 ns remote.
    local, remote = 81.2, 130.2
    peak = peak_gbs(6, 3200)  # Intel ARK, Platinum 8380H: 6 channels; DDR4-3200 at 1 DPC (COOPER_UPI)
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(4, ghz)),  # Opt. manual, Skylake: 32 KiB 8-way, 4 cycles
        CacheLevel("L2", 1024, 16, LINE, 2, l2),  # Opt. manual, Skylake server: 1 MiB 16-way per core
        CacheLevel("L3", 39424, 11, LINE, 56, l3),  # ARK: 38.5 MB; 11-way as Skylake-SP, 56 threads
    )
    # LKP report: 192G in all; estimate: 48 GiB per socket (6 x 8 GiB, 1 DPC)
    nodes = tuple(dram_node(i, 48, local, peak, i, remote) for i in range(4))
    return Machine(
        name="cooperlake-8380h-4s",
        description="4 x Xeon Platinum 8380H (Cooper Lake, 28C/56T, 38.5 MiB LLC each), 224 CPUs, 192 GiB",
        freq_ghz=ghz,
        sockets=make_sockets(4, 28, 2),  # Intel ARK, Platinum 8380H: 28 cores, 56 threads
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(4, slit(local, remote)),  # fully connected 4S; 130.2 / 81.2 -> 16
        cost=sourced(
            rule_cost(ghz, l2, socket_ns=2 * l3, hop_ns=remote - local, local_ns=local,
                      idle_exit_us=SKX_CSTATES, sources={}),
            line_xfer_smt_ns=(7.6, f"inference: {NVIENNOT}, Platinum 8275CL (Cascade Lake) SMT siblings 7.6 ns; "
                              "plausible 6-9 ns"),
            line_xfer_socket_ns=(47.0, f"inference: {NVIENNOT}, Platinum 8275CL (Cascade Lake, 24 cores) same "
                                 f"socket 47 ns; plausible 45-56 ns ({CSIT_CLX}: L2->L2 HITM 55.6 ns)"),
            line_xfer_remote_ns=(134.0, f"inference: {NVIENNOT}, Platinum 8275CL cross socket 134 ns; plausible "
                                 f"114-140 ns ({CSIT_CLX}: remote HITM 115.6 ns)"),
        ),
        sources={
            "freq_ghz": ark("Xeon Platinum 8380H"),
            "sockets": f"{ark('Xeon Platinum 8380H')}; {LKP_CPL}",
            "caches": f"{ark('Xeon Platinum 8380H')}; {OPT_MANUAL}; L3 latency estimate",
            "nodes.memory_gib": f"{LKP_CPL}; estimate: 48 GiB per socket",
            "nodes.latency_ns": f"inference: {CSIT_CLX} (local 81.2 ns); plausible 78-90 ns",
            "nodes.remote_latency_ns": f"inference: {CSIT_CLX} (remote 130.2 ns); plausible 125-150 ns",
            "nodes.bandwidth": f"{ark('Xeon Platinum 8380H')} (6 channels); DDR4-3200 per {COOPER_UPI}; {RULE_BW}",
            "distances": f"estimate: one UPI hop between any two sockets ({COOPER_UPI}); ratio 130.2 / 81.2",
            "interconnect": COOPER_UPI,
        },
    )
