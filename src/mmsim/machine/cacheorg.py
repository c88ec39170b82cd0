"""Cache organisation of the preset CPUs (issue 17): inclusion policy and perf event map.

Per machine: how its last-level cache relates to the private L2 (the
inclusion policy), and which hardware events perf's generic
``cache-references`` / ``cache-misses`` name on that CPU. Sources in
docs/sources-caches.md (section and row given per entry).
"""

from __future__ import annotations

from dataclasses import dataclass

INCLUSIVE = "inclusive"  # every line in an L2 is also in the LLC; an LLC eviction back-invalidates the L2 copy
VICTIM = "victim"  # non-inclusive: the LLC is filled by L2 evictions; fills from memory go to the L2 only
MEMORY_SIDE = "memory-side"  # the last level caches memory, not the cores: every memory read goes through it
LLC_POLICIES = (INCLUSIVE, VICTIM, MEMORY_SIDE)

INTEL_LLC = "intel-llc"  # 0x4f2e / 0x412e LONGEST_LAT_CACHE.REFERENCE / .MISS: demand requests to the LLC
AMD_L2 = "amd-l2"  # 0xff60 / 0x0964: all L2 requests (prefetches included) / demand L2 misses
KNL_L2 = "knl-l2"  # 0x4f2e / 0x412e on KNL/KNM = L2_REQUESTS.REFERENCE / .MISS: the tile L2
PERF_MAPS = (INTEL_LLC, AMD_L2, KNL_L2)


@dataclass(frozen=True)
class CacheOrg:
    llc: str  # one of LLC_POLICIES
    perf: str  # one of PERF_MAPS
    source: str
    # rep stosb page clears read the line for ownership (and so are followed by the L2 streamer): AMD
    # Zen below an LLC-size threshold ("rep stos elides cache-line allocation when the region exceeds"
    # ~32 MB on Milan, docs/sources-caches.md 0.4); False: Intel fast strings, an invalidation per whole
    # line and no read (SDM Vol. 3A 8.2.4)
    clear_rfo: bool = False
    # an ascending stream continues into the next 4 KiB page without a new start-up. False on Intel
    # ("prefetched cache lines must be in the same 4K page", Opt. manual 2.3.5.4). AMD's L2 prefetcher
    # limits are not documented (docs/sources-caches.md 'Not found'); True is an inference from
    # 9890ecab6ad9's own explanation ("jumps around across 4KB page boundaries in a pattern that is hard
    # or impossible for the prefetcher to predict"), so the Genoa counter-case is not independent of it
    stream_across_pages: bool = False
    # cycles per PAUSE in a spin loop: "about 10 cycles" before Skylake, "as many as 140 cycles" on Skylake
    # microarchitecture (Intel Optimization Reference Manual, 'Pause Latency in Skylake Microarchitecture')
    pause_cycles: float = 10.0
    # LLC replacement within a set: "lru" (Smith's formula) or "random" (each fill into the set evicts a
    # random way: a line survives d bytes with e^(-d / capacity)); 7-cpu.com measures Sandy Bridge's
    # LLC as pseudo-LRU and Ivy Bridge's as "random replacement policy" (docs/sources-caches.md 1a).
    # "random" is for sensitivity runs (benchmarks/clear_order_replacement.py); no preset uses it.
    replacement: str = "lru"


# Instructions per iteration of a kernel spin loop (cpu_relax() = PAUSE, the load of the lock word or MCS
# node, its test and the branch: atomic_cond_read_acquire / smp_cond_load_relaxed). estimate, plausible 3-5
SPIN_LOOP_INSNS = 4
# The profile symbols the lock models charge spinning to (locks/spinlock.py, locks/rwsem.py); the ticket
# lock's spin is inlined in _raw_spin_lock, which also carries its uncontended acquire (one locked RMW);
# _raw_spin_lock_irq: the sleeping locks' wait_lock (locks/rwsem.py, session 27)
LINE_SPIN_FUNCS = ("native_queued_spin_lock_slowpath", "_raw_spin_lock", "_raw_spin_lock_irq")
# Of all the spin symbols, those above are the spinlock waiters', whose loads poll the lock's cache line as
# its registered spinners: each write to the line costs each of them a miss and a stall until its re-read
# (docs/locks.md, session 27)
SPIN_FUNCS = LINE_SPIN_FUNCS + ("rwsem_optimistic_spin", "mutex_spin_on_owner")
SKYLAKE_PAUSE = 140.0  # Opt. manual: Skylake PAUSE "as many as 140 cycles"


CVW = "Cornell Virtual Workshop, 'Last Level Cache' (docs/sources-caches.md 1a)"
ANANDTECH_SKX = "AnandTech 11550 p. 4 'I Keep My Cache Private' (docs/sources-caches.md 1a)"
PERF_INTEL = "arch/x86/events/intel/core.c intel_perfmon_event_map (docs/sources-caches.md 3)"

CACHE_ORG: dict[str, CacheOrg] = {
    "xeon-e5-2699v3-2s": CacheOrg(INCLUSIVE, INTEL_LLC,
                                  f"Haswell-EP L3 inclusive: {ANANDTECH_SKX}, {CVW}; {PERF_INTEL}"),
    "sgi-uv2000-512": CacheOrg(INCLUSIVE, INTEL_LLC, f"pre-Skylake Xeon L3 inclusive: {CVW}; {PERF_INTEL}"),
    "westmere-ex-4s": CacheOrg(INCLUSIVE, INTEL_LLC, f"pre-Skylake Xeon L3 inclusive: {CVW}; {PERF_INTEL}"),
    "cascadelake-optane-2s": CacheOrg(VICTIM, INTEL_LLC, f"Skylake-SP L3 non-inclusive: {ANANDTECH_SKX}, {CVW}",
                                      pause_cycles=SKYLAKE_PAUSE),
    "icelake-6338-2s": CacheOrg(VICTIM, INTEL_LLC, "inference: Ice Lake-SP keeps Skylake-SP's non-inclusive L3 "
                                "(no primary source found, docs/sources-caches.md 'Not found'); PAUSE: "
                                "estimate, Skylake's 140 cycles kept, plausible 40-140",
                                pause_cycles=SKYLAKE_PAUSE),
    "skylake-8170-2s": CacheOrg(VICTIM, INTEL_LLC, f"Skylake-SP L3 non-inclusive: {ANANDTECH_SKX}, {CVW}",
                                pause_cycles=SKYLAKE_PAUSE),
    "cooperlake-8380h-4s": CacheOrg(VICTIM, INTEL_LLC, "inference: Cooper Lake keeps the Skylake-SP core and "
                                    f"mesh with its non-inclusive L3 ({ANANDTECH_SKX})", pause_cycles=SKYLAKE_PAUSE),
    "sapphirerapids-8480-2s": CacheOrg(VICTIM, INTEL_LLC, "inference: Sapphire Rapids keeps the non-inclusive "
                                       f"L3 of Skylake-SP ({ANANDTECH_SKX}); PAUSE: Skylake's figure, estimate",
                                       pause_cycles=SKYLAKE_PAUSE),
    "xeon-phi-7295": CacheOrg(MEMORY_SIDE, KNL_L2, "NERSC 'Cori KNL Processor Modes': MCDRAM cache mode is "
                              "direct-mapped, memory-side; knightslanding/cache.json: 0x2e = L2_REQUESTS"),
    "genoa-9654-2s": CacheOrg(VICTIM, AMD_L2, "Zen L3 is a victim cache of L2 evictions (weak, "
                              "docs/sources-caches.md 1a); amd/core.c amd_f17h_perfmon_event_map",
                              clear_rfo=True, stream_across_pages=True,
                              pause_cycles=64.0),  # estimate: Zen PAUSE ~64 cycles, plausible 10-140
    "tiny": CacheOrg(INCLUSIVE, INTEL_LLC, "test machine"),
}
# machines without an entry (host, YAML files): estimate, the Intel server default before Skylake-SP
DEFAULT_ORG = CacheOrg(INCLUSIVE, INTEL_LLC, "estimate: no entry for this machine; inclusive, Intel perf map")


def cache_org(machine_name: str) -> CacheOrg:
    return CACHE_ORG.get(machine_name, DEFAULT_ORG)


def spin_instructions(machine_name: str, spin_cycles: float, misses: float = 0.0, stall_cycles: float = 0.0) -> int:
    """Instructions a spin loop retires in ``spin_cycles``: one loop iteration per PAUSE while its load hits,
    and one per miss of its load, whose ``stall_cycles`` (all misses together) retire nothing: the loop's
    test and branch wait for the load (docs/locks.md, session 27)."""
    running = max(0.0, spin_cycles - stall_cycles)
    return int((misses + running / cache_org(machine_name).pause_cycles) * SPIN_LOOP_INSNS)
