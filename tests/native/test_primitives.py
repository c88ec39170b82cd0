"""validate --suite primitives: level 0 through the model's own cache, memory and lock code."""

from __future__ import annotations

import pytest
from scipy.special import gammaincc

from mmsim.machine import get_machine
from mmsim.native import primitives as pr

SEEDS = ["xeon-e5-2699v3-2s", "sgi-uv2000-512", "westmere-ex-4s", "cascadelake-optane-2s",
         "icelake-6338-2s", "xeon-phi-7295"]
ROBOT = ["skylake-8170-2s", "cooperlake-8380h-4s"]  # issue 22


def _survives(d_bytes: float, cap_kib: int, ways: int) -> float:
    """Smith's set-associative survival at reuse distance ``d_bytes`` (machine/hierarchy.py)."""
    return float(gammaincc(ways, d_bytes / (cap_kib * 1024) * ways))


def test_chase_plateaus_come_from_the_cache_and_memory_model() -> None:
    m = get_machine("tiny")  # L1d 32 KiB 4 ns, L2 256 KiB 8-way 12 ns, L3 1 MiB 16-way 40 ns, DRAM 100 ns
    assert pr.simulated_chase_ns(m, 16 << 10) == 4.0
    # every sub-page's distance on the 2nd pass is the n - 1 other sub-pages of the chain
    assert pr.simulated_chase_ns(m, 128 << 10) == 12.0  # the L2 is exact LRU below its size
    p3 = _survives(127 * 4096, 1024, 16)  # 512 KiB: past the L2; 16 ways keep 99.2% in the LLC
    assert pr.simulated_chase_ns(m, 512 << 10) == pytest.approx(40 * p3 + 100 * (1 - p3), abs=0.05)
    assert pr.simulated_chase_ns(m, 2 << 20) == pytest.approx(100.0, abs=0.1)  # 2x the LLC
    assert pr.simulated_chase_ns(m, 2 << 20, cpu=2, node=0) == pytest.approx(200.0, abs=0.2)  # socket 1


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
    # The one known miss (docs/machines.md, session 25): westmere-ex-4s's cross-socket hand-off by the shared
    # rule (51 + 62 ns) against SOSP'13's one-hop figure on 8 sockets (136 ns), outside the +-15 %.
    assert bad == [("westmere-ex-4s", "c2c.remote", -16.7)]
    assert set(rows[0]) >= {"suite", "machine", "quantity", "simulated", "reference", "source", "error_pct", "ok"}
    pub = [r for r in rows if r["reference_kind"] == "published"]
    assert {r["machine"] for r in pub} == {"xeon-e5-2699v3-2s", "westmere-ex-4s", "cascadelake-optane-2s",
                                           "icelake-6338-2s", *ROBOT}


@pytest.mark.parametrize(("flags", "variant"), [
    ("fpu sse2 rep_good nopl erms fsrm", "erms"),  # ERMS wins over REP_GOOD (alternative_call_2's order)
    ("fpu sse2 rep_good nopl", "rep"),  # this VM's flags: rep stosq
    ("fpu sse2 nopl", "orig"),
    ("", "orig"),
])
def test_the_clear_page_variant_is_the_kernels_choice(flags: str, variant: str) -> None:
    from mmsim.native import microbench as mb

    assert mb.kernel_clear_variant(f"processor\t: 0\nflags\t\t: {flags}\n") == variant


@pytest.mark.parametrize("variant", ["erms", "rep", "orig"])
def test_mb_clear_zeroes_every_page_and_times_each_pass(variant: str) -> None:
    """mb clear: one sample per pass, each a positive CPU time per page; an unknown variant is refused."""
    import subprocess

    from mmsim.native import microbench as mb

    exe = mb.helper()
    if exe is None:
        pytest.skip("no C compiler")
    r = subprocess.run([str(exe), "clear", str(1 << 20), "3", variant], capture_output=True, text=True)
    vals = [float(x) for x in r.stdout.split()]
    assert r.returncode == 0 and len(vals) == 3 and min(vals) > 0
    assert subprocess.run([str(exe), "clear", str(1 << 20), "3", "movnti"], capture_output=True).returncode == 2
