"""Machine presets for the cache validation (``mmsim validate --suite caches``, issue 17).

* ``genoa-9654-2s``: 2 x AMD EPYC 9654 (Genoa, Zen 4), the machine class of
  9890ecab6ad9's counter-case (the series ran on an EPYC 9J14, 2 x 96 cores,
  the same 12-CCD die: docs/sources-caches.md 4). Each socket has 12 CCDs of
  8 cores; each CCD's 32 MiB L3 is a separate LLC.

Same derivation rules as :mod:`mmsim.machine.presets`; nothing here is fitted
to the counter-case.
"""

from __future__ import annotations

from mmsim.machine.model import CacheLevel, Machine
from mmsim.machine.presets import (
    LINE,
    RULE_BW,
    dram_node,
    make_sockets,
    ns,
    peak_gbs,
    rule_cost,
    slit,
    uniform_distances,
)

AMD_9654 = "AMD EPYC 9654 product page (96 cores, 192 threads, base 2.4 GHz, 384 MB L3, 12 x DDR5-4800)"
TOMS_GENOA = "Tom's Hardware, 'New Zen 5 128-core EPYC CPU wields 512MB of L3 cache' (EPYC 9654: 384 MB L3)"
ISSCC_ZEN4 = "AMD ISSCC 2023 Zen 4 slide (ITmedia copy): 32 MB L3 per CCD shared by its 8 cores"
ARORA_9J14 = ("Ankur Arora, v8 7/7 folio_zero_user (2025-10-27): EPYC 9J14 L1d 16K/thread, L2 512K/thread, "
              "L3 2 MB/thread")


def genoa_9654_2s() -> Machine:
    """2 x EPYC 9654 (Genoa): 192 cores, 384 CPUs, 12 LLCs (CCDs) of 32 MiB per socket."""
    ghz = 2.4  # AMD product page, EPYC 9654: base 2.4 GHz
    l2 = ns(14, ghz)  # estimate: Zen 4 L2 ~14 cycles (Zen 3 12, the doubled L2 adds ~2); plausible 12-16
    l3 = ns(50, ghz)  # inference: chipsandcheese Genoa-X (2023-07-17): Milan-X L3 50 cycles, Zen 4 ~ the same
    local = 110.0  # estimate: no Genoa DRAM latency found (docs/sources-caches.md 'Not found'); 100-130 ns
    remote = 190.0  # estimate: local + ~80 ns for the socket-to-socket Infinity Fabric hop; 160-220 ns
    peak = peak_gbs(12, 4800)  # AMD product page: 12 channels DDR5-4800 per socket
    caches = (
        CacheLevel("L1d", 32, 8, LINE, 2, ns(5, ghz)),  # Zen 4 L1d 32 KiB 8-way (secondary); 5 cycles: estimate
        CacheLevel("L2", 1024, 8, LINE, 2, l2),  # Zen 4: 1 MiB 8-way per core (secondary; = 512K/thread)
        CacheLevel("L3", 32 * 1024, 16, LINE, 16, l3),  # 32 MiB per CCD, 8 cores x 2 threads; 16-way: estimate
    )
    nodes = tuple(dram_node(i, 384, local, peak, i, remote) for i in range(2))  # estimate: 12 x 32 GiB, NPS1
    return Machine(
        name="genoa-9654-2s",
        description="2 x AMD EPYC 9654 (Genoa, 96C/192T, 12 CCDs x 32 MiB L3 each), 384 CPUs, DDR5-4800",
        freq_ghz=ghz,
        sockets=make_sockets(2, 96, 2),  # AMD product page: 96 cores, 192 threads
        caches=caches,
        nodes=nodes,
        distances=uniform_distances(2, slit(local, remote)),
        cost=rule_cost(
            # estimate: a hand-off inside a CCD goes through its L3 (~2 L3 hits); plausible 20-60 ns
            ghz, l2, socket_ns=2 * l3, hop_ns=remote - local, local_ns=local,
            idle_exit_us=1,  # estimate: acpi_idle C2 on Zen reports ~1 us; plausible 0.4-20 us
            sources={},
        ),
        sources={
            "freq_ghz": AMD_9654,
            "sockets": AMD_9654,
            "caches": f"{ISSCC_ZEN4}; {TOMS_GENOA}; {ARORA_9J14}; L2/L3 latency estimates",
            "nodes.memory_gib": "estimate: 384 GiB per socket (12 x 32 GiB), NPS1 (one node per socket)",
            "nodes.latency_ns": "estimate: 110 ns (no Genoa measurement found), plausible 100-130 ns",
            "nodes.remote_latency_ns": "estimate: 190 ns, plausible 160-220 ns",
            "nodes.bandwidth": f"{AMD_9654}; {RULE_BW}",
            "distances": "estimate: latency ratio 190 / 110",
        },
    )
