"""The L3 a guest's cores get (docs/native.md, session 31): ``CacheLevel.effective_kib``, measured by
``calibrate``'s sweep, used by the cache model; the kernel's cacheinfo rules keep the reported size."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from mmsim.errors import UserError
from mmsim.machine import get_machine, yamlio
from mmsim.machine.hierarchy import CacheHierarchy
from mmsim.machine.host import detect_host
from mmsim.machine.model import CacheLevel, Machine
from mmsim.metrics.counters import Counters
from mmsim.mm.page_alloc import pcp_data_cache_bytes
from mmsim.native import calibrate as cal
from mmsim.native.primitives import chase_sizes, llc_chase_bytes, simulated_chase_ns

MIB = 1 << 20


def _st(median: float, low: float = 0.95) -> dict[str, float]:
    return {"median": median, "p10": median * low, "p25": median * 0.98, "p75": median * 1.02,
            "spread_pct": 4.0, "low_spread_pct": round(100 * (1 - low), 1), "samples": 11}


def _host(l2_kib: int = 1024, l3_kib: int = 32768) -> Machine:
    """The detected host with fixed cache sizes (the test does not depend on the machine it runs on)."""
    m = detect_host()
    sizes = {"L1d": 32, "L2": l2_kib, "L3": l3_kib}
    return dataclasses.replace(m, caches=tuple(dataclasses.replace(c, size_kib=sizes[c.name]) for c in m.caches))


def _sweep(m: Machine, medians: list[float]) -> list[dict[str, Any]]:
    sizes = cal.l3_sweep_sizes(m)
    assert len(sizes) == len(medians)
    return [{"bytes": n, **_st(v)} for n, v in zip(sizes, medians, strict=True)]


# session 30/31's shape on this VM: an L3 plateau to ~2.8 MiB, then DRAM
MEDIANS = [12.6, 15.0, 15.7, 18.7, 119.4, 121.6, 138.0, 147.4, 154.2, 151.8, 151.3]
RAW_BASE: dict[str, Any] = {
    "fault_4k_ns": 1500.0, "fault_thp_ns": 204800.0,
    "core_bw_gbs": {"read": 12.0, "write": 8.0, "copy": 14.0}, "all_cpu_bw_gbs": {"read": 30.0, "write": 18.0},
    "pairs": {}, "ctx_switch_ns": _st(1000.0), "futex_wake_ns": _st(6000.0),
}


def test_cache_level_effective_must_fit_the_reported_size() -> None:
    c = CacheLevel("L3", 32768, 16, 64, 2, 15.0, effective_kib=2896)
    assert c.capacity_kib == 2896 and CacheLevel("L3", 32768, 16, 64, 2, 15.0).capacity_kib == 32768
    with pytest.raises(ValueError, match="effective_kib must be at most size_kib"):
        CacheLevel("L3", 1024, 16, 64, 2, 15.0, effective_kib=2048)
    with pytest.raises(ValueError, match="effective_kib must be a positive number"):
        CacheLevel("L3", 1024, 16, 64, 2, 15.0, effective_kib=0)


def test_yaml_round_trip_and_presets_unchanged(tmp_path: Path) -> None:
    m = _host()
    m2 = dataclasses.replace(m, caches=tuple(
        dataclasses.replace(c, effective_kib=2896) if c.name == "L3" else c for c in m.caches))
    p = tmp_path / "h.yaml"
    yamlio.save_machine(m2, p)
    back = yamlio.load_machine(p)
    assert back.cache("L3").effective_kib == 2896 and back.cache("L2").effective_kib is None
    # a preset's file has no effective_kib key at all
    assert "effective_kib" not in yamlio.dump_machine(get_machine("icelake-6338-2s"))
    # bad values: one error naming the field
    d = yamlio.machine_to_dict(m2)
    d["caches"][2]["effective_kib"] = 65536
    with pytest.raises(UserError, match="effective_kib"):
        yamlio.dict_to_machine(d, "h.yaml")


def test_the_cache_model_uses_the_effective_size_and_the_kernel_the_reported_one() -> None:
    m = _host()
    m2 = dataclasses.replace(m, caches=tuple(
        dataclasses.replace(c, effective_kib=4096) if c.name == "L3" else c for c in m.caches))
    assert CacheHierarchy(m2, Counters(m2.ncpus)).llc.capacity == 4 * MIB
    assert CacheHierarchy(m, Counters(m.ncpus)).llc.capacity == 32 * MIB
    # the kernel's PCPF_FREE_HIGH_BATCH rule reads cacheinfo (/sys): unchanged
    assert pcp_data_cache_bytes(m2, "llc") == pcp_data_cache_bytes(m, "llc") and m2.llc_share_bytes() == \
        m.llc_share_bytes()
    # a chase over 8 MiB hits the 32 MiB LLC and misses the 4 MiB one
    assert simulated_chase_ns(m, 8 * MIB) < 0.5 * simulated_chase_ns(m2, 8 * MIB)


def test_llc_chase_rule() -> None:
    # every preset: a quarter of its LLC, as before
    for name in ("xeon-e5-2699v3-2s", "icelake-6338-2s", "sgi-uv2000-512", "westmere-ex-4s"):
        m = get_machine(name)
        assert llc_chase_bytes(m) == m.cache("L3").size_kib * 1024 // 4
    # tiny (1 MiB L3, 256 KiB L2): 512 KiB, outside its L2 (the old quarter, 256 KiB, was the L2's size)
    assert llc_chase_bytes(get_machine("tiny")) == 512 << 10
    # a measured 2.8 MiB share with a 1 MiB L2: 2 MiB; a 1.4 MiB one: all of it
    for eff, want in ((2896, 2 * MIB), (1448, 1448 << 10)):
        m = _host()
        m = dataclasses.replace(m, caches=tuple(
            dataclasses.replace(c, effective_kib=eff) if c.name == "L3" else c for c in m.caches))
        assert llc_chase_bytes(m) == want and chase_sizes(m)["L3"] == want
        assert chase_sizes(m)["DRAM"] == 256 * MIB  # 8 x the reported 32 MiB


def test_sweep_sizes_from_the_l2_to_the_l3_in_sqrt2_steps() -> None:
    sizes = cal.l3_sweep_sizes(_host())
    assert [round(n / MIB, 3) for n in sizes] == [1.0, 1.414, 2.0, 2.828, 4.0, 5.656, 8.0, 11.312, 16.0, 22.625, 32.0]
    assert all(n % 4096 == 0 for n in sizes)


def test_knee_is_the_last_size_below_the_midpoint() -> None:
    m = _host()
    eff, how = cal.l3_knee(_sweep(m, MEDIANS), _st(150.0))
    assert eff == cal.l3_sweep_sizes(m)[3]  # 2.83 MiB: 18.7 ns fits, 4 MiB's 119.4 does not (midpoint 81.3)
    assert "fits below 81.3 ns, the midpoint of the plateau 12.6 and DRAM 150.0" in how
    # a size that fits after one that does not is not counted (the run from the start breaks)
    eff2, _ = cal.l3_knee(_sweep(m, [12.6, 15.0, 120.0, 18.7] + MEDIANS[4:]), _st(150.0))
    assert eff2 == cal.l3_sweep_sizes(m)[1]
    # nothing fits: the first size is DRAM-like
    none, why = cal.l3_knee(_sweep(m, [150.0] * 11), _st(150.0))
    assert none is None and "no sweep size is faster than DRAM" in why
    # a failed point or a failed DRAM chase: not measured
    bad = _sweep(m, MEDIANS)
    bad[5] = None  # type: ignore[call-overload]
    assert cal.l3_knee(bad, _st(150.0))[0] is None
    assert cal.l3_knee(_sweep(m, MEDIANS), None)[0] is None


def test_build_machine_writes_the_effective_l3_and_reads_its_latency_on_the_plateau() -> None:
    base = _host()
    raw = {**RAW_BASE, "chase_ns": {"L1d": {"bytes": 16 << 10, **_st(1.2)}, "L2": {"bytes": 512 << 10, **_st(4.0)},
                                    "DRAM": {"bytes": 256 * MIB, **_st(150.0)}},
           "l3_sweep": _sweep(base, MEDIANS)}
    m, notes = cal.build_machine(raw, base)
    assert not any("effective_kib" in n for n in notes)
    l3 = m.cache("L3")
    assert l3.size_kib == 32768 and l3.effective_kib == 2896  # 2.83 MiB = 2,965,504 B
    assert l3.latency_ns == 15.7  # the 2 MiB point: max(2 x L2, C / 4), within C
    assert m.sources["caches.L3.effective_kib"].startswith(cal.MEASURED + "2896 KiB, the largest size that fits")
    assert "over 2048 KiB" in m.sources["caches.L3.latency_ns"]
    assert m.nodes[0].latency_ns == 150.0
    # all of the reported L3 fits: no effective size, the latency from the quarter of the L3 (8 MiB)
    flat = [12.6, 15.0, 15.7, 16.0, 16.5, 17.0, 17.4, 18.0, 19.0, 20.0, 21.0]
    m2, _ = cal.build_machine({**raw, "l3_sweep": _sweep(base, flat)}, base)
    assert m2.cache("L3").effective_kib is None and m2.cache("L3").latency_ns == 17.4
    assert "the whole reported L3 fits" in m2.sources["caches.L3.effective_kib"]
    # nothing fits: a note, the reported size, the estimate's latency
    m3, notes3 = cal.build_machine({**raw, "l3_sweep": _sweep(base, [150.0] * 11)}, base)
    assert m3.cache("L3").effective_kib is None and m3.cache("L3").latency_ns == base.cache("L3").latency_ns
    assert any(n.startswith("caches L3 effective_kib: not measured (no sweep size is faster than DRAM")
               for n in notes3)


def test_a_failed_sweep_keeps_the_previous_calibrations_capacity(tmp_path: Path) -> None:
    from mmsim.native.calibrate import previous_calibration

    base = _host()
    raw = {**RAW_BASE, "chase_ns": {"DRAM": {"bytes": 256 * MIB, **_st(150.0)}}, "l3_sweep": _sweep(base, MEDIANS)}
    first, _ = cal.build_machine(raw, base)
    path = tmp_path / "h.yaml"
    yamlio.save_machine(first, path)
    prev = previous_calibration(path, base)
    assert prev is not None and prev.cache("L3").effective_kib == 2896
    m, notes = cal.build_machine({**raw, "l3_sweep": _sweep(base, [150.0] * 11)}, base, prev)
    assert m.cache("L3").effective_kib == 2896 and m.cache("L3").latency_ns == 15.7  # both from the first run
    assert m.sources["caches.L3.effective_kib"].startswith("previous measurement kept (L3 sweep: no sweep size")
    assert any("the previous calibration's measurement 2896 KiB kept" in n for n in notes)

