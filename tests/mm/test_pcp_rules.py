"""The PCP sizing rules of the "mm: PCP high auto-tuning" series (mm/pcp.py), exactly, per patch."""

from __future__ import annotations

from types import SimpleNamespace

from mmsim.kernels import resolve
from mmsim.mm.pcp import PCPF_FREE_HIGH_BATCH, Pcp, PcpRules

SERIES = ("ca71fe1ad922", "94a3bfe4073c", "362d37a106dd", "52166607ecc9", "c0a242394cb9", "90b41691b988",
          "51a755c56dc0", "57c0419c5f0e", "6ccdcb6d3a74")


def _rules(n: int) -> PcpRules:
    return PcpRules(resolve("v6.6", list(SERIES[:n])).get)


def _pcp(high: int = 652, batch: int = 63, high_max: int = 0, flags: int = 0) -> Pcp:
    return Pcp(3, high, batch, flags, high_max)


ZONE = SimpleNamespace(below_high=False)


def test_free_factor_doubles_and_52166607ecc9_stops_it_at_5() -> None:
    # v6.6: batch << free_factor while it is below high - batch; high 100000 leaves room to 63 << 10
    r, p = _rules(0), _pcp(high=100_000)
    sizes = [r.nr_pcp_free(p, 63, 100_000, False) for _ in range(8)]
    assert sizes == [63 << k for k in range(8)]
    r, p = _rules(4), _pcp(high=100_000)
    sizes = [r.nr_pcp_free(p, 63, 100_000, False) for _ in range(8)]
    assert sizes == [63 << k for k in range(6)] + [63 << 5] * 2 and p.free_factor == 5


def test_alloc_factor_doubles_refills_and_a_free_halves_it() -> None:
    r = _rules(5)
    p = _pcp(high=652)
    # max_nr_alloc = max(high - count - batch, batch) = 589: 63, 126, 252, 504, then capped at 589
    assert [r.nr_pcp_alloc(p, ZONE, 0) for _ in range(5)] == [63, 126, 252, 504, 589]
    assert p.alloc_factor == 4  # 1008 > 589: no further doubling
    r.commit(p, ZONE, 0)
    assert p.alloc_factor == 2
    assert r.nr_pcp_alloc(p, ZONE, 3) == 63 >> 3  # high orders: the base batch >> order
    assert _rules(3).nr_pcp_alloc(_pcp(), ZONE, 0) == 63  # before c0a242394cb9


def test_auto_tuning_raises_high_on_refill_up_to_high_max() -> None:
    r = _rules(7)
    p = _pcp(high=652, high_max=1000)
    assert r.nr_pcp_alloc(p, ZONE, 0) == 63 and p.high == 652 + 63
    assert r.nr_pcp_alloc(p, ZONE, 0) == 126 and p.high == 652 + 63 + 126
    r.nr_pcp_alloc(p, ZONE, 0)
    assert p.high == 1000  # min(high + batch, high_max)
    # the framework alone (90b41691b988) never moves high
    f = _rules(6)
    q = _pcp(high=652, high_max=1000)
    f.nr_pcp_alloc(q, ZONE, 0)
    assert q.high == 652


def test_free_high_drains_at_most_batch_shl_5_and_lowers_high() -> None:
    r = _rules(7)
    p = _pcp(high=5000, high_max=8000, flags=PCPF_FREE_HIGH_BATCH)
    p.high = 7000
    p.count = 3000
    p.free_factor = 1
    p.flags |= 0x01  # PCPF_PREV_FREE_HIGH_ORDER: a high-order free came just before
    n, free_high = r.commit(p, ZONE, 3)
    assert free_high and n == 63 << 5  # min(count, batch << CONFIG_PCP_BATCH_SCALE_MAX)
    assert p.high == max(7000 - (63 << 5), 5000)
    # v6.6 drains the whole PCP
    q = _pcp(flags=PCPF_FREE_HIGH_BATCH)
    q.count, q.free_factor, q.flags = 3000, 1, q.flags | 0x01
    assert _rules(3).commit(q, ZONE, 3) == (3000, True)


def test_free_count_replaces_free_factor() -> None:
    r = _rules(9)
    p = _pcp(flags=PCPF_FREE_HIGH_BATCH)
    assert not r.free_factor_on and r.free_count_on
    for _ in range(7):  # order-3 frees: free_count += 8 each, free_high needs free_count >= batch (63)
        _, fh = r.commit(p, ZONE, 3)
        p.count += 8
    assert p.free_count == 56 and not fh
    r.on_alloc(p)
    assert p.free_count == 28  # an allocation halves it


def test_below_high_stops_the_raise_and_lowers_high_on_free() -> None:
    r = _rules(8)
    z = SimpleNamespace(below_high=True)
    p = _pcp(high=652, high_max=1000)
    r.nr_pcp_alloc(p, z, 0)
    assert p.high == 652
    p.high, p.count = 900, 700
    assert r.nr_pcp_high(p, z, 63, False) == 700  # max(count, high_min): drain nothing yet
    assert p.high == 900 - 63


def _frees_until_free_high(r: PcpRules, p: Pcp) -> int:
    """Order-3 frees (the first sets PCPF_PREV_FREE_HIGH_ORDER) until one triggers free_high; free_count
    before it."""
    while True:
        before = p.free_count
        _, fh = r.commit(p, ZONE, 3)
        p.count += 8
        if fh:
            return before
        assert p.free_count < 63 << 5 or before == p.free_count  # free_count stops at batch << 5


def test_c544a952ba61_raises_the_free_high_threshold_by_half_high_min() -> None:
    """free_unref_page_commit: free_high when free_count >= batch (6ccdcb6d3a74), or >= batch + high_min / 2
    (c544a952ba61), checked before this free adds its 8 pages."""
    assert resolve("v6.12").get("pcp_free_high_threshold") == "batch"
    assert resolve("v6.15").get("pcp_free_high_threshold") == "batch+high_min/2"
    old = PcpRules(resolve("v6.6", list(SERIES)).get)
    new = PcpRules(resolve("v6.6", [*SERIES, "c544a952ba61"]).get)
    assert _frees_until_free_high(old, _pcp(high=652, high_max=6520)) == 64  # 8 frees of 8: 64 >= 63
    # high_min 652: 63 + 326 = 389; 48 frees reach 384, the 49th sees 392
    assert _frees_until_free_high(new, _pcp(high=652, high_max=6520)) == 392
    # high_min 5523 (this VM's Normal zone): 63 + 2761 = 2824 > 63 << 5 = 2016, where free_count stops growing
    p = _pcp(high=5523, high_max=53248)
    for _ in range(1000):
        _, fh = new.commit(p, ZONE, 3)
        p.count = min(p.count + 8, 5000)
        assert not fh
    assert p.free_count == 2016
