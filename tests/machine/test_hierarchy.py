"""The cache hierarchy (machine/hierarchy.py) on ``tiny``.

tiny: L2 256 KiB 8-way per core (shared by SMT siblings), L3 1 MiB 16-way per
socket; CPUs 0, 1 (cores of socket 0) and 4, 5 (their siblings); 2, 3, 6, 7 on
socket 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaincc

from mmsim.machine import get_machine
from mmsim.machine.cacheorg import AMD_L2, INCLUSIVE, INTEL_LLC, SPIN_LOOP_INSNS, VICTIM, CacheOrg, spin_instructions
from mmsim.machine.hierarchy import STREAM_START, TABLE_PER_CAP, CacheHierarchy, survival
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES, Counters
from mmsim.mm.memory import huge_page_order

KIB = 1024


def _h(llc: str = INCLUSIVE, perf: str = INTEL_LLC) -> CacheHierarchy:
    m = get_machine("tiny")
    return CacheHierarchy(m, Counters(m.ncpus), CacheOrg(llc, perf, "test"))


def _refs(h: CacheHierarchy, cpu: int = 0) -> tuple[int, int]:
    p = h.counters.perf[cpu]
    return p[CACHE_REFERENCES], p[CACHE_MISSES]


def test_instances_l2_per_core_llc_per_socket() -> None:
    h = _h()
    assert h.l2.of_cpu[0] is h.l2.of_cpu[4] and h.l2.of_cpu[0] is not h.l2.of_cpu[1]
    assert h.llc.of_cpu[0] is h.llc.of_cpu[1] is h.llc.of_cpu[5] and h.llc.of_cpu[2] is not h.llc.of_cpu[0]
    assert len(h.l2.caches) == 4 and len(h.llc.caches) == 2


def test_survival_is_smiths_poisson_formula() -> None:
    t = survival(16)
    assert t[0] == 1.0 and t[-1] == 0.0
    assert list(survival(8, hashed=False)[[0, TABLE_PER_CAP - 1, TABLE_PER_CAP]]) == [1.0, 1.0, 0.0]
    for x in (0.25, 0.5, 1.0, 1.5):
        assert t[int(x * TABLE_PER_CAP)] == pytest.approx(gammaincc(16, 16 * x), abs=1e-6)
    # direct-mapped: e^-x
    assert survival(1)[TABLE_PER_CAP] == pytest.approx(np.exp(-1.0), abs=1e-6)


def _exact_lru_hit_ratio(sets: int, ways: int, nlines: int, seed: int) -> float:
    """Steady-state hit ratio of a cyclic sweep over ``nlines`` randomly placed lines in an exact
    set-associative LRU cache (two sweeps, the second counted)."""
    rng = np.random.default_rng(seed)
    where = rng.integers(0, sets, nlines)
    lru: list[list[int]] = [[] for _ in range(sets)]
    hits = 0
    for sweep in range(2):
        for line in range(nlines):
            s = lru[where[line]]
            if line in s:
                s.remove(line)
                hits += sweep
            elif len(s) == ways:
                s.pop()
            s.insert(0, line)
    return hits / nlines


@pytest.mark.parametrize("fill", [0.5, 0.9, 1.0, 1.2, 1.6])
def test_smith_matches_exact_set_associative_lru(fill: float) -> None:
    sets, ways = 128, 8
    n = int(fill * sets * ways)
    exact = np.mean([_exact_lru_hit_ratio(sets, ways, n, seed) for seed in range(4)])
    d = (n - 1) / (sets * ways)  # other distinct lines since a line's last use, in capacities
    assert survival(ways)[int(d * TABLE_PER_CAP)] == pytest.approx(exact, abs=0.03)


def test_clear_then_pass_sequential_vs_target_last() -> None:
    """A 2 MiB clear then a user pass 0..511 (no other traffic): target-last leaves the first
    sub-pages in the L2 (the last 64 cleared = 256 KiB, distance 2k sub-pages < L2)."""
    res = {}
    for pol in ("sequential", "target-last"):
        h = _h()
        h.fill(0, "p", 512, huge_page_order(pol, 0), 100_000, 0)
        mem, dur = h.access(0, "p", 512, np.arange(512), 10.0, 100.0, 100_000)
        res[pol] = (mem, h.found[0], dur)
    assert res["sequential"][0] > 511.0  # 511-sub-page distance for all: 2 MiB > 1 MiB of L3
    assert res["target-last"][0] < 400.0
    # sub-page 0 was cleared last and is touched first: distance 0, an L2 hit
    assert res["target-last"][2][0] == pytest.approx(10.0)
    assert res["sequential"][2][0] == pytest.approx(100.0, abs=0.1)  # 2 L3 capacities: P(hit) < 1e-3


def test_inclusion_back_invalidation() -> None:
    """CPU 0 touches a page; CPU 1 (other core, same LLC) streams 8 MiB; CPU 0's L2 copy is gone
    under an inclusive LLC (back-invalidated), kept under a non-inclusive one."""
    out = {}
    for pol in (INCLUSIVE, VICTIM):
        h = _h(pol)
        h.fill(0, "a", 1, np.array([0]), 10, 0)
        for i in range(2048):  # 2048 x 4 KiB = 8 MiB, 8 x the LLC
            h.fill(1, ("b", i), 1, np.array([0]), 10, 10 + 10 * i)
        mem, _ = h.access(0, "a", 1, np.array([0]), 10.0, 100.0, 30_000)
        out[pol] = mem
    assert out[INCLUSIVE] == 1.0  # from memory
    assert out[VICTIM] == 0.0  # an L2 hit


def test_associativity_conflict_at_half_the_llc() -> None:
    """Reuse at 512 KiB of other data (half the 16-way LLC, twice the L2): a fully associative
    LRU would always hit; 16 ways keep P(Poisson(8) <= 15) of the lines, the rest come from memory.
    The address-indexed L2 is exact LRU: just under its size everything stays, just over nothing."""
    h = _h()
    h.fill(0, "a", 1, np.array([0]), 10, 0)
    h.fill(0, "b", 128, np.arange(128), 100, 10)  # 128 x 4 KiB = 512 KiB
    h.found = [0.0, 0.0, 0.0]
    h.access(0, "a", 1, np.array([0]), 10.0, 100.0, 1000)
    assert h.found[0] == 0.0
    assert h.found[1] == pytest.approx(gammaincc(16, 8.0), abs=2e-3)
    for other, l2_hits in ((63, 1.0), (64, 0.0)):  # 63 or 64 other sub-pages vs 64 in the L2
        h = _h()
        h.fill(0, "a", 1, np.array([0]), 10, 0)
        h.fill(0, "b", other, np.arange(other), 100, 10)
        h.found = [0.0, 0.0, 0.0]
        h.access(0, "a", 1, np.array([0]), 10.0, 100.0, 1000)
        assert h.found[0] == pytest.approx(l2_hits, abs=1e-5)
        assert h.found[0] + h.found[1] == pytest.approx(1.0, abs=1e-5)


def test_prefetched_stream_counts() -> None:
    """A user pass over 4 new sub-pages (in no cache): the streamer covers all but the first
    STREAM_START lines of each. Intel, memory-bound (LLC-only prefetch): every line's demand
    request references the LLC, STREAM_START miss; core-bound: prefetches land in the L2, only
    the STREAM_START demand misses reach the LLC. AMD: all L2 requests incl. prefetches."""
    h = _h()
    h.access(0, "n", 4, np.arange(4), 10.0, 100.0, 0)
    assert _refs(h) == (4 * 64, 4 * STREAM_START)
    h = _h()
    h.access(0, "n", 4, np.arange(4), 100.0, 10.0, 0)
    assert _refs(h) == (4 * STREAM_START, 4 * STREAM_START)
    h = _h(VICTIM, AMD_L2)
    h.access(0, "n", 4, np.arange(4), 10.0, 100.0, 0)
    assert _refs(h) == (4 * 64 + 4 * (64 - STREAM_START), 4 * STREAM_START)
    # a pointer chase: no stream, every line a demand miss
    h = _h()
    h.access(0, "n", 4, np.arange(4), 10.0, 100.0, 0, streamed=False)
    assert _refs(h) == (4 * 64, 4 * 64)


def test_clear_counts_every_line_an_ownership_request() -> None:
    h = _h()
    h.fill(0, "p", 512, huge_page_order("sequential", 0), 1000, 0)
    assert _refs(h) == (512 * 64, 512 * 64)


def test_freed_frame_keeps_its_cache_state() -> None:
    """A frame cleared on CPU 0, freed, reallocated: still in socket 0's LLC (CPU 1 finds it there,
    not in its own L2); on socket 1 it is cold; a clear of it on CPU 1 hits."""
    h = _h()
    h.bind("old", 100, 0)
    h.fill(0, "old", 1, np.array([0]), 10, 0)
    h.on_free(0, 100, 0)
    assert h.resident(0, 100, 0, 20) == (1.0, 0.0)
    assert h.resident(1, 100, 0, 20) == (0.0, 1.0)
    assert h.on_alloc(2, 100, 0, 20) == 0.0
    h.bind("new", 100, 0)
    h.fill(1, "new", 1, np.array([0]), 10, 20)
    assert _refs(h, 1) == (64, 0)  # write hits in the LLC


def test_spin_loops_retire_instructions() -> None:
    """One loop iteration (SPIN_LOOP_INSNS) per PAUSE: 10 cycles before Skylake, 140 from it."""
    assert spin_instructions("xeon-e5-2699v3-2s", 1000.0) == 1000 // 10 * SPIN_LOOP_INSNS
    assert spin_instructions("cascadelake-optane-2s", 1400.0) == 10 * SPIN_LOOP_INSNS


def test_a_spin_loop_retires_nothing_while_its_load_misses() -> None:
    """docs/locks.md, session 27: one iteration per miss, and one per PAUSE of the time not stalled."""
    # 1000 cycles of spinning, 3 misses stalling 700 of them: 3 + 300 / 10 iterations
    assert spin_instructions("xeon-e5-2699v3-2s", 1000.0, 3, 700.0) == (3 + 30) * SPIN_LOOP_INSNS
    # stall beyond the spin time (a rounding of the expected re-read time): no negative loop time
    assert spin_instructions("xeon-e5-2699v3-2s", 1000.0, 2, 1200.0) == 2 * SPIN_LOOP_INSNS


def test_random_replacement_survival_is_exponential() -> None:
    """Random replacement: each fill into the set evicts the line with probability 1/W, so it survives
    x capacities of other data with e^-x, whatever the ways."""
    t = survival(20, random=True)
    assert t[TABLE_PER_CAP] == pytest.approx(np.exp(-1.0), abs=1e-6)
    assert t[TABLE_PER_CAP // 2] == pytest.approx(np.exp(-0.5), abs=1e-6)


def test_a_split_or_merged_block_keeps_its_pages_state() -> None:
    """An order-3 block stamped whole, then handed out split: each page's stamp comes from the block it
    was last stamped in; a merged block above MIXED_ORDER is not looked up page by page."""
    h = _h()
    h.touch(0, 8, 3, 8 * 4096, 0)  # CPU 0 writes the 8 pages of block 8..15
    assert h.on_alloc(1, 9, 0, 10) == 1.0  # one page of it, on the same LLC: cached
    assert h.resident(1, 8, 2, 10) == (0.0, 1.0)  # pages 8..11 split off it: in the LLC
    assert h.resident(1, 0, 3, 10) == (0.0, 0.0)  # its buddy 0..7: never touched
    assert h.resident(1, 0, 4, 10) == (0.0, 0.0)  # merged to order 4 (> MIXED_ORDER): counted cold
    assert h.on_alloc(2, 9, 0, 10) == 0.0  # socket 1: not cached there
