"""validate --suite primitives: level 0 through the model's own cache, memory and lock code."""

from __future__ import annotations

import pytest

from mmsim.machine import get_machine
from mmsim.native import primitives as pr

SEEDS = ["xeon-e5-2699v3-2s", "sgi-uv2000-512", "westmere-ex-4s", "cascadelake-optane-2s",
         "icelake-6338-2s", "xeon-phi-7295"]
ROBOT = ["skylake-8170-2s", "cooperlake-8380h-4s"]  # issue 22


def test_chase_plateaus_come_from_the_cache_and_memory_model() -> None:
    m = get_machine("tiny")  # L1d 32 KiB 4 ns, L2 256 KiB 12 ns, L3 1 MiB 40 ns, DRAM 100 ns, remote 200
    assert pr.simulated_chase_ns(m, 16 << 10) == 4.0
    assert pr.simulated_chase_ns(m, 128 << 10) == 12.0
    assert pr.simulated_chase_ns(m, 512 << 10) == 40.0  # fits the LLC: every sub-page hits on the 2nd pass
    assert pr.simulated_chase_ns(m, 2 << 20) == 100.0  # 2x the LLC: every sub-page misses
    assert pr.simulated_chase_ns(m, 2 << 20, cpu=2, node=0) == 200.0  # CPU 2 is on socket 1


def test_c2c_goes_through_the_lock_cache_line() -> None:
    m = get_machine("tiny")
    assert pr.simulated_c2c_ns(m, 0, 4) == 10.0  # SMT siblings
    assert pr.simulated_c2c_ns(m, 0, 1) == 50.0
    assert pr.simulated_c2c_ns(m, 0, 2) == 200.0


def test_one_core_stream_runs_at_the_core_clear_bandwidth() -> None:
    m = get_machine("tiny")  # core 10 GB/s, node write 10 GB/s
    assert pr.simulated_bw_gbs(m, 1) == pytest.approx(10.0, rel=1e-6)


def test_suite_covers_the_eight_presets_and_every_row_is_within_tolerance() -> None:
    rows = pr.validate_primitives(None)
    assert {r["machine"] for r in rows} == set(SEEDS + ROBOT)
    assert len(rows) >= 20
    bad = [(r["machine"], r["quantity"], r["error_pct"]) for r in rows if not r["ok"]]
    assert bad == []
    assert set(rows[0]) >= {"suite", "machine", "quantity", "simulated", "reference", "source", "error_pct", "ok"}
    pub = [r for r in rows if r["reference_kind"] == "published"]
    assert {r["machine"] for r in pub} == {"xeon-e5-2699v3-2s", "westmere-ex-4s", "cascadelake-optane-2s",
                                           "icelake-6338-2s", *ROBOT}
