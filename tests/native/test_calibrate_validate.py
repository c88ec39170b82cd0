"""calibrate -> machine YAML the ``host`` preset reads; validate -> one row per case."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

import mmsim.native.validate as val
from mmsim.cli import main
from mmsim.machine import yamlio
from mmsim.machine.host import detect_host, host_machine
from mmsim.native.calibrate import build_machine, calibrate


def _st(median: float, low: float = 0.95) -> dict[str, float]:
    """A microbench.Stat dict: tight (p10 = 95% of the median) unless ``low`` says otherwise."""
    return {"median": median, "p10": median * low, "p25": median * 0.98, "p75": median * 1.02,
            "spread_pct": 4.0, "low_spread_pct": round(100 * (1 - low), 1), "samples": 31}


RAW: dict[str, Any] = {
    "fault_4k_ns": 1500.0,
    "fault_thp_ns": 204800.0,  # 2 MiB in 204.8 us = 10.24 GB/s
    "core_bw_gbs": {"read": 12.0, "write": 8.0, "copy": 14.0},
    "all_cpu_bw_gbs": {"read": 30.0, "write": 18.0},
    "pairs": {"socket": {"cpus": [0, 1], "line_xfer_ns": _st(80.0)}},
    "ctx_switch_ns": _st(1000.0),
    "futex_wake_ns": _st(6000.0),
}


def test_sources_give_each_fastest_of_n_figure_its_spread() -> None:
    passes = {"fault_4k_ns": [1500.0, 1700.0, 2400.0], "fault_4k_read_ns": [700.0, 760.0, 900.0],
              "fault_thp_ns": [204800.0, 230000.0], "usemem_word_ns": [1.64, 1.9, 2.2]}
    raw = {**RAW, **{k: min(v) for k, v in passes.items()}, "passes": passes}
    m, _ = build_machine(raw, detect_host())
    src = m.cost.sources
    assert "min of 2 passes (median 217,400, max 230,000 ns)" in src["core_clear_gbs"]
    assert "min of 3 passes (median 1.9, max 2.2 ns)" in src["issue_width"]
    assert "min of 3 passes (median 760, max 900 ns)" in src["page_fault_ns"]
    assert "min of 3 passes (median 1,700, max 2,400 ns)" in src["anon_folio_ns"]


def test_build_machine_derives_each_field_from_its_measurement() -> None:
    m, notes = build_machine(RAW, detect_host())
    c = m.cost
    assert c.core_clear_gbs == pytest.approx(10.24, abs=1e-3)
    assert c.line_xfer_socket_ns == 80.0
    assert c.ctx_switch_ns == 1000.0
    assert c.wakeup_ns == 5000.0  # the model adds ctx_switch_ns on top of wakeup_ns
    assert c.page_fault_ns < 1500.0 - 4096 / 10.24  # clear and path costs taken out
    assert m.nodes[0].read_bw_gbs == 30.0 and m.nodes[0].write_bw_gbs == 18.0
    for f in ("core_clear_gbs", "page_fault_ns", "line_xfer_socket_ns", "ctx_switch_ns", "wakeup_ns"):
        assert c.sources[f].startswith("native measurement: mmsim calibrate"), f
    assert any("line_xfer_smt_ns" in n for n in notes) == (m.sockets[0].threads_per_core == 1)
    assert yamlio.dict_to_machine(yamlio.machine_to_dict(m)) == m


def test_read_fault_gives_page_fault_ns_and_the_write_remainder_anon_folio_ns() -> None:
    from mmsim.mm.costs import path
    from mmsim.native.calibrate import FAULT_PATHS, READ_FAULT_PATHS

    base = detect_host()
    ghz = base.freq_ghz
    rpaths = sum(path(p, ghz)[0] for p in READ_FAULT_PATHS)
    wpaths = sum(path(p, ghz)[0] for p in FAULT_PATHS)
    m, notes = build_machine({**RAW, "fault_4k_read_ns": 700.0}, base)
    assert m.cost.page_fault_ns == round(700.0 - rpaths, 2)
    assert m.cost.anon_folio_ns == round(1500.0 - 400.0 - wpaths - (700.0 - rpaths), 2)  # clear: 4096 / 10.24
    assert m.cost.sources["page_fault_ns"].startswith("native measurement: mmsim calibrate 4 KiB read fault")
    assert m.cost.sources["anon_folio_ns"].startswith("native measurement: mmsim calibrate 4 KiB write fault")
    assert yamlio.dict_to_machine(yamlio.machine_to_dict(m)) == m
    # a read fault dearer than the write fault's residual: no negative folio cost, the field stays unset
    m, notes = build_machine({**RAW, "fault_4k_read_ns": 1400.0}, base)
    assert m.cost.anon_folio_ns is None and any(n.startswith("anon_folio_ns: write-fault remainder") for n in notes)
    # no read fault: page_fault_ns from the write fault, as before
    m, notes = build_machine(RAW, base)
    assert m.cost.anon_folio_ns is None and "page_fault_ns: no read fault measured: taken from the write fault" in notes


def test_residual_at_or_below_zero_keeps_the_estimate_and_says_so() -> None:
    base = detect_host()
    m, notes = build_machine({**RAW, "fault_4k_ns": 100.0}, base)
    assert m.cost.page_fault_ns == base.cost.page_fault_ns  # no floor value
    assert any(n.startswith("page_fault_ns: residual") for n in notes)
    assert m.cost.sources["page_fault_ns"].startswith("estimate kept")


def test_noisy_or_negative_wakeup_keeps_the_estimate() -> None:
    base = detect_host()
    m, notes = build_machine({**RAW, "futex_wake_ns": _st(6000.0, low=0.5)}, base)  # lower half too wide
    assert m.cost.wakeup_ns == base.cost.wakeup_ns and any(n.startswith("wakeup_ns:") for n in notes)
    m, notes = build_machine({**RAW, "futex_wake_ns": _st(900.0)}, base)  # cross-CPU below one-CPU
    assert m.cost.wakeup_ns == base.cost.wakeup_ns and m.cost.sources["wakeup_ns"].startswith("estimate kept")


def test_a_ping_pong_that_did_not_sleep_falls_back_to_the_measured_wake_latency() -> None:
    """Session 17: on a fast vCPU pair the cross-CPU ping-pong measured 180 ns (its waits returned at once);
    the wake-up of a task asleep on the idle CPU (native/mb.c wakelat) minus ctx_switch_ns is used instead."""
    base = detect_host()
    raw = {**RAW, "futex_wake_ns": _st(180.0), "wake_latency_ns": _st(8000.0)}
    m, notes = build_machine(raw, base)
    assert m.cost.wakeup_ns == 7000.0  # 8000 - the one-CPU 1000
    assert "the ping-pong could not be used: cross-CPU hand-off 180 ns" in m.cost.sources["wakeup_ns"]
    assert not any(n.startswith("wakeup_ns:") for n in notes)
    m, notes = build_machine({**RAW, "futex_wake_ns": _st(180.0), "wake_latency_ns": _st(8000.0, low=0.4)}, base)
    assert m.cost.wakeup_ns == base.cost.wakeup_ns and any(n.startswith("wakeup_ns:") for n in notes)  # noisy too
    m, _ = build_machine({**RAW, "wake_latency_ns": _st(9000.0)}, base)  # the ping-pong slept: it is kept
    assert m.cost.wakeup_ns == 5000.0


def test_failed_line_measurement_keeps_the_estimate() -> None:
    base = detect_host()
    m, notes = build_machine({**RAW, "pairs": {"socket": {"cpus": [0, 1], "line_xfer_ns": None}}}, base)
    assert m.cost.line_xfer_socket_ns == base.cost.line_xfer_socket_ns
    assert any(n.startswith("line_xfer_socket_ns: measurement failed") for n in notes)


def test_chase_latencies_replace_estimates_only_in_order() -> None:
    chase = {"L1d": {"bytes": 1, **_st(1.0)}, "L2": {"bytes": 1, **_st(4.0)}, "L3": {"bytes": 1, **_st(300.0)},
             "DRAM": {"bytes": 1 << 28, **_st(150.0)}}
    base = detect_host()
    m, notes = build_machine({**RAW, "chase_ns": chase}, base)
    lat = {c.name: c.latency_ns for c in m.caches}
    assert lat["L1d"] == 1.0 and lat["L2"] == 4.0
    assert lat["L3"] == base.cache("L3").latency_ns  # slower than DRAM: not an L3 plateau, estimate kept
    assert m.nodes[0].latency_ns == 150.0
    assert any(n.startswith("caches L3 latency_ns") for n in notes)


def test_calibrate_writes_the_file_the_host_preset_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    r = calibrate()
    path = tmp_path / "mmsim" / "host.yaml"
    assert r["path"] == str(path) and path.is_file()
    m = host_machine()
    assert "calibrated by mmsim calibrate" in m.description
    # a field measured on every host (THP fault or store bandwidth; never kept as an estimate for noise,
    # which a loaded host can make the futex and chase figures)
    assert m.cost.sources["core_clear_gbs"].startswith("native measurement")
    assert r["measurements"]["fault_4k_ns"] > 0


def test_closest_kernel() -> None:
    from mmsim.kernels.catalog import KERNELS

    assert val.closest_kernel("4.13.0") == "v4.13"
    assert val.closest_kernel("3.13.5-generic") == "v3.13"
    assert val.closest_kernel("2.6.32") == "v3.12"  # older than every catalogued kernel: the oldest
    k = val.closest_kernel("6.18.44-fc")
    v = tuple(int(x) for x in k[1:].split("."))
    releases = [n for n in KERNELS if re.fullmatch(r"v\d+(\.\d+)*", n)]  # not the commit-named kernels
    newer = [n for n in releases if v < tuple(int(x) for x in n[1:].split(".")) <= (6, 18)]
    assert v <= (6, 18) and newer == []


def test_validation_set_is_the_issue_list() -> None:
    cs = val.cases()
    names = [c.name for c in cs]
    assert len(names) == len(set(names)) == 14
    w = {(c.workload, c.params.get("nr_task"), c.thp) for c in cs}
    for n in ("1", "2"):
        assert ("vm-scalability/anon-w-seq", n, "never") in w
        assert ("vm-scalability/anon-w-seq", n, "always") in w
    assert ("vm-scalability/anon-r-seq", "1", "never") in w
    assert ("vm-scalability/anon-cow-seq", "2", "always") in w
    assert ("will-it-scale/page_fault1", "2", "never") in w
    assert ("will-it-scale/page_fault2", "2", "never") in w and ("will-it-scale/page_fault3", "2", "never") in w
    assert ("will-it-scale/malloc1", "2", "never") in w  # issue 22
    assert any(c.workload == "lmbench/bw_unix" and c.params == {"pairs": "1"} for c in cs)
    assert any(c.workload == "pmbench" and c.params["pattern"] == "uniform" and c.params["jobs"] == "1" for c in cs)
    assert any(c.workload == "thp_memscale" and c.params["threads"] == "2" and c.thp == "always" for c in cs)


ALL_CASES = val.cases


def _small_cases(size: str = "16m", seconds: float = 0.05) -> list[val.Case]:
    keep = ("anon-w-seq 4K nr_task=1", "bw_unix pairs=1")
    return [c for c in ALL_CASES(size, seconds) if c.name in keep]


def test_validate_rows_for_missing_simulations(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmsim.workloads.base as wb

    wb._load_builtin()
    for c in _small_cases():
        monkeypatch.delitem(wb.WORKLOADS, c.workload, raising=False)
    monkeypatch.setattr(val, "cases", lambda size, seconds: _small_cases())
    rows = val.validate("tiny", repeats=1)
    assert [r["case"] for r in rows] == ["anon-w-seq 4K nr_task=1", "bw_unix pairs=1"]
    for r in rows:
        assert r["native"] > 0
        assert r["native_cpu_share"] > 0  # rusage over wall clock of the same runs
        assert r["simulated"] is None and r["error_pct"] is None
        assert "not simulated in this build" in r["note"]


def test_validate_error_pct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(val, "cases", lambda size, seconds: _small_cases()[:1])
    monkeypatch.setattr(val, "_native", lambda c, repeats: val.Side(200.0, "", {}, [200.0], 0.9))
    monkeypatch.setattr(val, "_simulate", lambda c, machine, kernel: val.Side(150.0))
    (row,) = val.validate("tiny")
    assert row["error_pct"] == -25.0
    assert row["native_cpu_share"] == 0.9


def test_validate_cli_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(val, "cases", lambda size, seconds: _small_cases(size, seconds))
    code = main(["validate", "--suite", "native", "--machine", "tiny", "--size", "16m", "--seconds", "0.05",
                 "--repeats", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [sorted({"case", "native", "simulated", "error_pct"} & set(r)) for r in out] == \
        [["case", "error_pct", "native", "simulated"]] * 2
    assert all(r["suite"] == "native" and r["ok"] == (abs(r["error_pct"]) <= 25.0) for r in out)


def test_validate_bad_machine_fails_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--machine", "no-such-machine"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_calibrate_cli_json_and_the_file_loads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sub" / "host.yaml"
    assert main(["calibrate", "--out", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["path"] == str(out)
    assert {"fault_4k_ns", "fault_thp_ns", "core_bw_gbs", "all_cpu_bw_gbs", "ctx_switch_ns"} <= set(d["measurements"])
    assert main(["machine", "show", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"]["page_fault_ns"] == d["cost"]["page_fault_ns"]


def test_calibrate_to_a_directory_fails_before_measuring(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["calibrate", "--out", str(tmp_path)]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "--out" in err


def test_validate_progress_lines(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal: one line per case start and end, numbered against the suite's total."""
    monkeypatch.setattr(val, "cases", lambda size, seconds: _small_cases(size, seconds))
    names = [c.name for c in _small_cases("16m", 0.05)]
    code = main(["validate", "--suite", "native", "--machine", "tiny", "--size", "16m", "--seconds", "0.05",
                 "--repeats", "1", "--json"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("mmsim: validate native: ")]
    assert code == 0 and len(names) == 2
    assert [ln.split(": ", 2)[2].rsplit(" done in", 1)[0] for ln in err] == [
        f"[0/2] {names[0]} ...", f"[1/2] {names[0]}", f"[1/2] {names[1]} ...", f"[2/2] {names[1]}"]
    assert main(["validate", "--suite", "native", "--machine", "tiny", "--size", "16m", "--seconds", "0.05",
                 "--repeats", "1", "--json", "--no-progress"]) == 0
    assert "mmsim: validate native:" not in capsys.readouterr().err


def test_lock_suite_progress_events(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsim.native import locks
    from mmsim.progress import ProgressEvent, Steps

    monkeypatch.setattr(locks, "locktorture_run", lambda n: (1e6 * min(n, 36), ""))  # no simulation: the events only
    seen: list[ProgressEvent] = []
    locks.validate_locks("tiny", native=False, progress=seen.append)
    n = len(locks.CNA_STOCK)
    assert [(e.phase, e.done, e.total) for e in seen] == [
        x for i in range(n) for x in (("start", i, n), ("end", i + 1, n))]
    assert [e.arm for e in seen[::2]] == [f"locktorture {w} writers on haswell-ex-4s" for w in locks.CNA_STOCK]
    assert {e.experiment for e in seen} == {"validate locks"}
    seen.clear()
    locks.curve_rows(lambda s: None, Steps(seen.append, "curves", 2))
    assert [(e.phase, e.done, e.arm) for e in seen] == [
        ("start", 0, "ticket curve on westmere-ex-4s"), ("end", 1, "ticket curve on westmere-ex-4s"),
        ("start", 1, "queued curve on westmere-ex-4s"), ("end", 2, "queued curve on westmere-ex-4s")]


@pytest.mark.parametrize(("metric", "values", "best"), [
    ("vm-scalability.throughput", [3.0, 1.0, 5.0, 2.0, 4.0], 5.0),  # a rate: the highest
    ("thp_memscale.elapsed_seconds", [3.0, 1.0, 5.0, 2.0, 4.0], 1.0),  # a time: the lowest
])
def test_native_reference_is_the_fastest_run_with_the_median_beside_it(
        monkeypatch: pytest.MonkeyPatch, metric: str, values: list[float], best: float) -> None:
    """Noise on the shared VM only adds time (native/validate.py), so the fastest run is the reference."""
    runs = iter(values)

    def fake_run(spec: Any) -> dict[str, Any]:
        v = next(runs)
        return {"metrics": {metric: v}, "vmstat": {"thp_fault_alloc": 1},
                "rusage": {"user_seconds": v, "system_seconds": 0.0}, "sim": {"wall_seconds": 2 * v}}

    monkeypatch.setattr(val, "run_native", fake_run)
    c = val.Case("x", "vm-scalability/anon-w-seq", {"nr_task": "1"}, "never", metric)
    side = val._native(c, len(values))
    assert (side.value, side.median, side.runs) == (best, 3.0, values)
    assert side.cpu_share == pytest.approx(0.5)  # the fastest run's own share


def test_copy_mlp_is_the_hand_off_over_the_copied_line() -> None:
    """Little's law on the pair measured back to back: 80 ns hand-off, 2.5 ns per copied line -> 32 in flight."""
    raw = {**RAW, "pairs": {"socket": {"cpus": [0, 1], "line_xfer_ns": _st(80.0), "xcopy_line_ns": _st(2.5)}}}
    m, _ = build_machine(raw, detect_host())
    assert m.cost.copy_mlp == 32.0
    assert "rep-movsb copy on CPU 1 of lines CPU 0 just wrote" in m.cost.sources["copy_mlp"]
    slow = {**RAW, "pairs": {"socket": {"cpus": [0, 1], "line_xfer_ns": _st(80.0), "xcopy_line_ns": _st(90.0)}}}
    m2, notes = build_machine(slow, detect_host())
    assert m2.cost.copy_mlp == 10.0 and any(n.startswith("copy_mlp: a copied line") for n in notes)
    m3, notes = build_machine(RAW, detect_host())  # no copy measured: the estimate, said so
    assert m3.cost.copy_mlp == 10.0 and any(n.startswith("copy_mlp: copy or hand-off") for n in notes)


def _calibrated(tmp_path: Path, raw: dict[str, Any]) -> tuple[Path, Any]:
    """A calibration of this host from ``raw``, saved where the next calibrate would write."""
    m, _ = build_machine(raw, detect_host())
    path = tmp_path / "h.yaml"
    yamlio.save_machine(m, path)
    return path, m


def test_a_failed_measurement_keeps_the_previous_calibrations_measurement(tmp_path: Path) -> None:
    from mmsim.native.calibrate import previous_calibration

    chase = {"L3": {"bytes": 1 << 20, **_st(130.0)}, "DRAM": {"bytes": 1 << 28, **_st(400.0)}}
    path, first = _calibrated(tmp_path, {**RAW, "chase_ns": chase, "futex_wake_ns": _st(9000.0)})
    assert first.cache("L3").latency_ns == 130.0 and first.cost.wakeup_ns == 8000.0
    host = detect_host()
    prev = previous_calibration(path, host)
    assert prev is not None
    # now the L3 chase, the DRAM chase and the wake-up fail or are too noisy
    failed = {**RAW, "chase_ns": {"L3": None, "DRAM": None}, "futex_wake_ns": _st(6000.0, low=0.5)}
    m, notes = build_machine(failed, host, prev)
    assert m.cache("L3").latency_ns == 130.0 and m.nodes[0].latency_ns == 400.0 and m.cost.wakeup_ns == 8000.0
    assert m.sources["caches.L3.latency_ns"].startswith("previous measurement kept (pointer chase failed")
    assert "native measurement: mmsim calibrate pointer chase over 1024 KiB" in m.sources["caches.L3.latency_ns"]
    assert m.cost.sources["wakeup_ns"].startswith("previous measurement kept (cross-CPU futex hand-off too noisy")
    assert any(n.startswith("wakeup_ns:") and "previous calibration's measurement 8000.0 kept" in n for n in notes)
    # kept again by a third run: one prefix, the original measurement's source after it
    path2 = tmp_path / "h2.yaml"
    yamlio.save_machine(m, path2)
    m3, _ = build_machine(failed, host, previous_calibration(path2, host))
    assert m3.cost.wakeup_ns == 8000.0 and m3.cost.sources["wakeup_ns"].count("previous measurement kept") == 1
    # without a previous file: the estimates, as before
    m0, _ = build_machine(failed, host)
    assert m0.cache("L3").latency_ns == host.cache("L3").latency_ns and m0.cost.wakeup_ns == host.cost.wakeup_ns


def test_a_previous_file_of_another_machine_or_with_estimates_is_not_used(tmp_path: Path) -> None:
    from mmsim.machine.presets import get_machine
    from mmsim.native.calibrate import previous_calibration

    other = tmp_path / "other.yaml"
    yamlio.save_machine(get_machine("tiny"), other)
    assert previous_calibration(other, detect_host()) is None
    assert previous_calibration(tmp_path / "missing.yaml", detect_host()) is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("cost: [", encoding="utf-8")
    assert previous_calibration(bad, detect_host()) is None
    # a previous calibration whose wake-up was itself an estimate: the estimate stays
    path, first = _calibrated(tmp_path, {**RAW, "futex_wake_ns": _st(6000.0, low=0.5)})
    assert first.cost.sources["wakeup_ns"].startswith("estimate kept")
    m, _ = build_machine({**RAW, "futex_wake_ns": _st(6000.0, low=0.5)}, detect_host(),
                         previous_calibration(path, detect_host()))
    assert m.cost.wakeup_ns == detect_host().cost.wakeup_ns
    assert m.cost.sources["wakeup_ns"].startswith("estimate kept")


def test_will_it_scale_metrics_from_each_tasks_fastest_round() -> None:
    from mmsim.native.workloads import _wis_metrics

    res = [{"ops": 100, "seconds": 2.0, "best_round": 80.0}, {"ops": 60, "seconds": 2.0, "best_round": 40.0}]
    m = _wis_metrics(res, "processes")
    assert m == {"will-it-scale.per_process_ops": 40.0, "will-it-scale.workload": 80.0,
                 "will-it-scale.per_process_ops.best_round": 60.0}
    assert "will-it-scale.per_thread_ops.best_round" in _wis_metrics(res, "threads")
    assert "will-it-scale.per_process_ops.best_round" not in _wis_metrics([{"ops": 1, "seconds": 1.0}], "processes")


def test_will_it_scale_cases_take_the_best_round_and_report_the_run_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    wis = [c for c in val.cases() if c.workload.startswith("will-it-scale/")]
    assert [c.name.split()[0] for c in wis] == ["page_fault1", "page_fault2", "page_fault3", "malloc1"]
    assert all(c.best_round and c.reference_metric == c.metric + ".best_round" for c in wis)
    seq = [c for c in val.cases() if c.workload.startswith("vm-scalability/")]  # usemem: fastest 64 MiB block
    assert len(seq) == 7 and all(c.best_round for c in seq) and "w-rand" not in str([c.workload for c in seq])
    assert not any(c.best_round for c in val.cases() if c not in wis and c not in seq)
    (c,) = [c for c in wis if c.name.startswith("page_fault3")]
    runs = [{"metrics": {c.metric: r, c.metric + ".best_round": b}, "vmstat": {},
             "sim": {"wall_seconds": 1.0}, "rusage": {"user_seconds": 1.0, "system_seconds": 1.0}}
            for r, b in ((500.0, 650.0), (520.0, 640.0), (480.0, 700.0))]
    it = iter(runs)
    monkeypatch.setattr(val, "run_native", lambda spec: next(it))
    side = val._native(c, 3)
    assert side.value == 700.0 and side.runs == [650.0, 640.0, 700.0] and side.median == 650.0
    assert side.run_rate == 520.0 and side.run_median == 500.0


def test_validate_calibrates_again_before_each_case_on_a_calibration_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On a calibration YAML, each case is preceded by a calibration into a fresh copy of that file and
    judged on it; the given file's simulation is reported beside it. A preset is never re-calibrated."""
    import mmsim.native.calibrate as cal
    from mmsim.machine import get_machine, yamlio

    given = tmp_path / "h.yaml"
    yamlio.save_machine(get_machine("tiny"), given)
    calls: list[Path] = []

    def fake_calibrate(out: Path) -> dict[str, str]:
        assert Path(out).read_text() == given.read_text()  # a copy of the given file, then measured into
        calls.append(Path(out))
        if Path(out).name == "host-case1.yaml":  # this calibration found a 512 KiB L3 share (session 31)
            t = get_machine("tiny")
            yamlio.save_machine(dataclasses.replace(t, caches=tuple(
                dataclasses.replace(c, effective_kib=512) if c.name == "L3" else c for c in t.caches)), out)
        return {"path": str(out)}

    monkeypatch.setattr(cal, "calibrate", fake_calibrate)
    monkeypatch.setattr(val, "cases", lambda size, seconds: _small_cases())
    monkeypatch.setattr(val, "_native", lambda c, repeats: val.Side(200.0, "", {}, [200.0], 0.9))
    monkeypatch.setattr(val, "_simulate",
                        lambda c, machine, kernel: val.Side(240.0 if "case" in str(machine) else 150.0))
    rows = val.validate(str(given))
    assert [p.name for p in calls] == ["host-case0.yaml", "host-case1.yaml"]
    for r in rows:
        assert r["calibrated_before_case"] is True
        assert (r["simulated"], r["error_pct"], r["ok"]) == (240.0, 20.0, True)
        assert (r["simulated_calibrated"], r["error_pct_calibrated"]) == (150.0, -25.0)
    assert [r["l3_effective_kib"] for r in rows] == [None, 512]
    assert "L3 share at the calibration before the case: 512 KiB" in rows[1]["note"]
    assert "L3 share" not in rows[0]["note"]
    calls.clear()
    (r, _) = val.validate(str(given), calibrate_each=False)
    assert calls == [] and r["calibrated_before_case"] is False and r["error_pct"] == -25.0
    (r, _) = val.validate("tiny")
    assert calls == [] and r["calibrated_before_case"] is False


def test_validate_suite_is_repeatable_and_comma_separated(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--suite a,b and --suite a --suite b run both suites, once each; an unknown name exits 2 naming it."""
    import mmsim.mm.validate_paths as vp
    import mmsim.native.primitives as prim

    ran: list[str] = []

    def fake(name: str) -> Any:
        def f(*a: Any, **k: Any) -> list[dict[str, Any]]:
            ran.append(name)
            return []
        return f

    monkeypatch.setattr(prim, "validate_primitives", fake("primitives"))
    monkeypatch.setattr(vp, "validate_paths", fake("paths"))
    for argv in (["--suite", "primitives,paths"], ["--suite", "paths", "--suite", "primitives"],
                 ["--suite", "primitives, paths,primitives"]):
        ran.clear()
        assert main(["validate", *argv, "--machine", "tiny", "--json", "--no-progress"]) == 0
        assert ran == ["primitives", "paths"]
    capsys.readouterr()
    ran.clear()
    assert main(["validate", "--suite", "primitives,bogus", "--machine", "tiny", "--json"]) == 2
    err = capsys.readouterr().err
    assert ran == [] and "--suite" in err and "bogus" in err and "caches" in err and err.count("\n") == 1


def test_wake_ipi_is_the_wakers_cost_beyond_the_wake_path() -> None:
    """The waker's FUTEX_WAKE of a sleeper on an idle CPU beyond an empty one (native/mb.c wakecost), minus
    the try_to_wake_up path the model charges (800 cycles at the host's clock)."""
    m0, _ = build_machine(RAW, detect_host())
    ttwu = 800 / m0.freq_ghz
    m, _ = build_machine({**RAW, "wake_cost_ns": _st(3000.0)}, detect_host())
    assert m.cost.wake_ipi_ns == pytest.approx(3000.0 - ttwu, abs=0.01)
    assert "FUTEX_WAKE of a task asleep on the other, idle CPU" in m.cost.sources["wake_ipi_ns"]
    assert m0.cost.wake_ipi_ns == 0.0  # not measured: the bare-metal estimate, said so
    low, notes = build_machine({**RAW, "wake_cost_ns": _st(ttwu * 1.01)}, detect_host())
    assert low.cost.wake_ipi_ns == 0.0 and any(n.startswith("wake_ipi_ns: waker's wake-up cost") for n in notes)
    assert yamlio.dict_to_machine(yamlio.machine_to_dict(m)) == m


def test_the_reference_run_is_simulated_at_its_own_placement(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A placement case probes the CPU pair before each run; the fastest run's probe replaces the fields that
    follow the placement in a copy of the calibration (native/validate.py at_placement)."""
    from mmsim.machine import get_machine

    probes = iter([{"line_xfer_ns": 120.0, "xcopy_line_ns": 5.0}, {"line_xfer_ns": 40.0, "xcopy_line_ns": 2.5,
                   "futex_wake_ns": 6000.0, "wake_cost_ns": 3000.0}, {"line_xfer_ns": 120.0}])
    monkeypatch.setattr(val, "probe_placement", lambda: next(probes))
    runs = iter([3000.0, 4000.0, 3500.0])
    monkeypatch.setattr(val, "run_native", lambda spec: {"metrics": {"bw": next(runs)}, "vmstat": {},
                        "rusage": {"user_seconds": 1.0, "system_seconds": 0.0}, "sim": {"wall_seconds": 1.0}})
    c = val.Case("bw_unix pairs=1", "lmbench/bw_unix", {"pairs": "1"}, "never", "bw", placement=True)
    side = val._native(c, 3)
    assert side.value == 4000.0 and side.placement == {"line_xfer_ns": 40.0, "xcopy_line_ns": 2.5,
                                                       "futex_wake_ns": 6000.0, "wake_cost_ns": 3000.0}
    assert len(side.placements) == 3
    base = tmp_path / "h.yaml"
    yamlio.save_machine(get_machine("tiny"), base)  # 1 GHz, ctx_switch_ns 2000
    out = val.at_placement(str(base), side.placement, tmp_path / "p.yaml")
    assert out is not None
    c2 = yamlio.load_machine(out).cost
    assert (c2.line_xfer_socket_ns, c2.line_hit_socket_ns, c2.copy_mlp) == (40.0, 40.0, 16.0)
    assert (c2.wakeup_ns, c2.wake_ipi_ns) == (4000.0, 2200.0)  # 6000 - 2000; 3000 - 800 cycles at 1 GHz
    assert "placement probe" in c2.sources["line_xfer_socket_ns"]
    assert val.at_placement(str(base), {"xcopy_line_ns": 2.0}, tmp_path / "q.yaml") is None  # no hand-off
    assert val.at_placement("tiny", side.placement, tmp_path / "r.yaml") is None  # a preset: not a file
    assert val._placement_note(side, val.Side(5000.0), out) == (
        "simulated at the reference run's placement (line_xfer 40.0 ns, xcopy_line 2.5 ns, futex_wake 6,000.0 ns, "
        "wake_cost 3,000.0 ns); at the calibration before the case: 5,000")
