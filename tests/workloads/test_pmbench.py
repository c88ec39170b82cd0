"""pmbench: pattern generators (pattern.c), parameters, and short runs on ``tiny``."""

from __future__ import annotations

import numpy as np
import pytest

from mmsim.errors import UserError
from mmsim.experiments.run import RunSpec, run
from mmsim.machine.model import Machine
from mmsim.workloads.pmbench import PatternGen


def test_linear_pattern_is_pmbench_sequence() -> None:
    """pattern.c: size 10, stride 3 -> 0 3 6 9 1 4 7 2 5 8 0 3 ..."""
    g = PatternGen("linear", 10, 3.0, np.random.default_rng(0))
    assert g.draw(12).tolist() == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8, 0, 3]
    assert g.draw(3).tolist() == [6, 9, 1]


@pytest.mark.parametrize("pattern,shape", [("uniform", 1.0), ("normal", 100.0), ("pareto", 1.161)])
def test_random_patterns_stay_in_the_set(pattern: str, shape: float) -> None:
    g = PatternGen(pattern, 1000, shape, np.random.default_rng(1))
    x = g.draw(100_000)
    assert x.min() >= 0 and x.max() < 1000
    if pattern == "normal":
        assert abs(x.mean() - 500) < 2 and abs(x.std() - 100) < 2
    if pattern == "pareto":
        # alpha 1.161 is pmbench(1)'s "80-20" example: the first 20% of pages take most accesses
        assert (x < 200).mean() > 0.75


def _spec(**p: str) -> RunSpec:
    params = {"mapsize": "8", "setsize": "8", "duration": "0.05", "pattern": "normal", "shape": "300", **p}
    return RunSpec("pmbench", "tiny", "v5.4", params=params, policies={"thp": "never"})


def test_setsize_above_mapsize_is_a_user_error(use_tiny_preset: Machine) -> None:
    with pytest.raises(UserError) as e:
        run(_spec(setsize="16"))
    assert e.value.field == "-p setsize"


def test_bad_mempolicy_nodes_are_user_errors(use_tiny_preset: Machine) -> None:
    with pytest.raises(UserError) as e:
        run(_spec(mempolicy="bind", nodes="5"))
    assert e.value.field == "-p nodes"
    with pytest.raises(UserError) as e:
        run(_spec(mempolicy="interleave", mpol_flags="numa_balancing", nodes="0,1"))
    assert e.value.field == "-p mpol_flags"


def test_short_run_reports_latency_and_histogram(use_tiny_preset: Machine) -> None:
    r = run(_spec(read_pct="80"))
    m = r.metrics
    assert m["pmbench.accesses"] > 10_000
    hist = sum(v for k, v in m.items() if k.startswith("pmbench.hist."))
    assert hist == m["pmbench.accesses"]
    assert 0.04 < m["pmbench.latency_us"] < 1.0  # between an LLC hit (40 ns) and the faults' cost
    assert r.vmstat["numa_hint_faults"] == 0 and m["autonuma.scans"] == 0  # numa_balancing=0 (default)
    assert r.command.startswith("pmbench -m 8 -s 8 -p normal -e 300 -r 80 -j 1")


def test_interleave_places_pages_on_both_nodes(use_tiny_preset: Machine) -> None:
    r = run(_spec(mempolicy="interleave", nodes="0,1", read_pct="0", pattern="linear", shape="1", cold="1"))
    a = r.metrics
    assert a["pmbench.accesses"] > 2048  # the linear pass covers all 2048 pages
    assert r.command.startswith("numactl --interleave=0,1 pmbench")


def test_numa_balancing_run_scans_and_takes_hinting_faults(use_tiny_preset: Machine) -> None:
    """0.3 s on tiny with a 100 ms scan delay and period: scans mark the set; accesses then fault."""
    spec = RunSpec("pmbench", "tiny", "v5.4",
                   params={"mapsize": "4", "setsize": "4", "duration": "0.3", "pattern": "uniform", "read_pct": "0",
                           "jobs": "2"},
                   policies={"numa_balancing": "1", "thp": "never", "numa_balancing_scan_delay_ms": "100",
                             "numa_balancing_scan_period_min_ms": "100"})
    r = run(spec)
    m, vm = r.metrics, r.vmstat
    assert m["autonuma.scans"] >= 1
    assert vm["numa_pte_updates"] >= 1024  # the 4 MiB set is 1024 pages, all written during warm-up
    assert 0 < vm["numa_hint_faults"] <= vm["numa_pte_updates"]
    assert vm["numa_hint_faults_local"] <= vm["numa_hint_faults"]
    assert m["autonuma.scan_share_pct"] > 0
    symbols = {p["symbol"] for p in r.profile}
    assert {"change_pte_range", "do_numa_page"} <= symbols
    assert run(spec).to_dict() | {"sim": None} == r.to_dict() | {"sim": None}  # deterministic


def test_initialize_writes_the_whole_map_and_untouched_pages_stay_protnone(use_tiny_preset: Machine) -> None:
    """-i: every page of the 8 MiB map is written once (2048 faults) although the normal set is 1 MiB; the
    scanner marks them all, the pages outside the set are never touched again, so on the next pass they are
    still protnone: page-first reads their struct pages, protnone-first (a818f5363a0e) does not."""
    params = {"mapsize": "8", "setsize": "1", "duration": "0.35", "pattern": "normal", "shape": "20",
              "initialize": "1", "cold": "1", "read_pct": "80"}
    pol = {"numa_balancing": "1", "thp": "never", "numa_balancing_scan_delay_ms": "100",
           "numa_balancing_scan_period_min_ms": "100"}
    out = {}
    for check in ("page-first", "protnone-first"):
        r = run(RunSpec("pmbench", "tiny", "v5.4", params=params, policies=pol | {"numa_scan_check": check}))
        out[check] = r.metrics
        assert r.command.startswith("pmbench -m 8 -s 1 -p normal -e 20 -r 80 -j 1 -d 0 -c -i ")
        assert r.perf["page-faults"] >= 2048  # the whole map, not only the set's 256 pages
    a, b = out["page-first"], out["protnone-first"]
    assert a["autonuma.scans"] >= 2
    skipped = a["autonuma.scan_protnone_skipped"]
    assert 1792 <= skipped <= 2048  # second pass: the 1792 pages outside the set, and the set's cold edges
    assert a["autonuma.scan_struct_page_refs"] == a["autonuma.scan_ptes_present"]  # page-first: every page
    assert b["autonuma.scan_struct_page_refs"] == b["autonuma.scan_ptes_present"] - b["autonuma.scan_protnone_skipped"]
    assert b["autonuma.scan_share_pct"] < a["autonuma.scan_share_pct"]


@pytest.mark.parametrize(
    "args,field",
    [
        (["-p", "pattern=zipf"], "-p pattern"),
        (["-p", "read_pct=101"], "-p read_pct"),
        (["-p", "shape=0"], "-p shape"),
        (["--set", "numa_balancing=4"], "--set.numa_balancing"),
        (["--set", "numa_scan_check=random"], "--set.numa_scan_check"),
    ],
)
def test_cli_bad_values_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], field: str) -> None:
    from mmsim.cli import main

    code = main(["run", "pmbench", "--machine", "tiny", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and field in err


def test_tiering_promotes_pages_from_optane_once_dram_is_free() -> None:
    """Huang Ying's promotion test shape: memhog fills DRAM, pmbench lands on Optane, memhog is killed;
    numa_balancing=2 then promotes the pages pmbench touches (DRAM has ample free space: no threshold)."""
    spec = RunSpec("pmbench", "cascadelake-optane-2s", "v6.6",
                   params={"mapsize": "16", "setsize": "16", "duration": "0.3", "pattern": "normal", "shape": "341",
                           "read_pct": "80", "memhog": "100", "memhog_exit": "0.1"},
                   policies={"numa_balancing": "2", "thp": "never", "numa_balancing_scan_delay_ms": "200"})
    r = run(spec)
    m, vm = r.metrics, r.vmstat
    assert r.command.startswith("timeout 0.1 numactl -m <DRAM nodes> memhog 100% & pmbench")
    assert m["autonuma.pgpromote_success"] > 0
    assert m["autonuma.pgpromote_success"] == vm["numa_pages_migrated"] == vm["pgmigrate_success"]
    assert vm["numa_hint_faults_local"] == 0  # every hinting fault was on an Optane page (DRAM is not scanned)
    assert m["autonuma.numa_migrate_failed"] == 0
