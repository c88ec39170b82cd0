"""Text reports: golden values on hand-made result dicts (no simulation)."""

from __future__ import annotations

from typing import Any

import pytest

from mmsim.report.jsonout import dumps
from mmsim.report.tables import Table, fmt_band, fmt_num, render, render_table
from mmsim.report.text import (
    command_line,
    format_outcomes,
    format_run,
    locks_table,
    perf_stat_block,
    profile_block,
    sim_line,
)


def _run() -> dict[str, Any]:
    return {
        "workload": "thp_memscale",
        "machine": "sgi-uv2000-512",
        "kernel": "v3.12",
        "params": {"threads": 512, "bytes": "512m"},
        "seed": 0,
        "metrics": {"thp_memscale.elapsed_seconds": 1075.9},
        "perf": {
            "task-clock": 2000.0,  # ms
            "context-switches": 1000,
            "cpu-migrations": 0,
            "page-faults": 300,
            "cycles": 4_000_000_000,
            "instructions": 2_000_000_000,
            "cache-references": 1000,
            "cache-misses": 334,
            "seconds-time-elapsed": 0.5,
        },
        "vmstat": {"pgfault": 300},
        "profile": [
            {"symbol": f"f{i}", "cycles": 100 - i, "percent": 20.0 - i, "instructions": 0} for i in range(12)
        ],
        "locks": {
            "mmap_lock": {"kind": "rwsem", "acquisitions": 10, "contentions": 1,
                          "wait_ns_total": 5_000, "wait_ns_max": 900, "hold_ns_total": 1_000_000},
            "page_table_lock": {"kind": "spinlock(ticket)", "acquisitions": 1_000_000, "contentions": 900_000,
                                "wait_ns_total": 123_456_789, "wait_ns_max": 45_600, "hold_ns_total": 2_000},
        },
        "sim": {"events": 1_000_000, "wall_seconds": 2.0, "simulated_seconds": 0.5},
    }


def test_fmt_num() -> None:
    assert fmt_num(1234567) == "1,234,567"
    assert fmt_num(29.7) == "29.7"
    assert fmt_num(1075.94) == "1075.9"
    assert fmt_num(123456.7) == "123,457"
    assert fmt_num(0.5634) == "0.5634"
    assert fmt_num(None) == "-"
    assert fmt_num(True) == "true"
    assert fmt_num("x") == "x"
    assert fmt_band([18, 72]) == "[18, 72]"
    assert fmt_band("at least halves") == "at least halves"


def test_render_table_aligns_columns() -> None:
    t = Table(["name", "n"], [["a", "1"], ["bbb", "22"]], title="T:")
    assert render_table(t) == "T:\n  name   n\n  ----  --\n  a      1\n  bbb   22"
    assert render([t, "x"]) == render_table(t) + "\n\nx\n"
    with pytest.raises(ValueError, match="align"):
        Table(["a", "b"], align="l")


def test_perf_stat_block_derives_perf_comments() -> None:
    lines = perf_stat_block(_run()).splitlines()
    assert lines[0] == " Performance counter stats for 'thp_memscale threads=512 bytes=512m':"
    # perf's columns: counts %'18, unit %-4, event %-32, " # " metric padded to 38
    assert lines[2] == "          2,000.00 msec task-clock                       #    4.000 CPUs utilized             "
    assert lines[3] == "             1,000      context-switches                 #  500.000 /sec                      "
    assert lines[6] == "     4,000,000,000      cycles                           #    2.000 GHz                       "
    assert lines[7] == "     2,000,000,000      instructions                     #    0.50  insn per cycle            "
    assert lines[8] == "             1,000      cache-references                 #  500.000 /sec                      "
    assert lines[9] == "               334      cache-misses                     #   33.40% of all cache refs         "
    assert lines[-1] == "       0.500000000 seconds time elapsed"


def test_command_line_prefers_workload_command() -> None:
    assert command_line({**_run(), "command": "thp_memscale -c 512 -b 512m"}) == "thp_memscale -c 512 -b 512m"


def test_profile_block_is_top_ten() -> None:
    lines = profile_block(_run()["profile"]).splitlines()
    assert lines[0] == "# Top 10 of 12 functions by cycles"
    assert lines[2] == "   20.00%  f0"
    assert len(lines) == 12


def test_locks_table_most_wait_first_in_microseconds() -> None:
    t = locks_table(_run()["locks"])
    assert [r[0] for r in t.rows] == ["page_table_lock", "mmap_lock"]
    assert t.rows[0][2:] == ["1,000,000", "900,000", "123,456.8", "45.6", "2.0"]


def test_sim_line() -> None:
    expected = "sim: 1,000,000 events in 2.00 s wall (500,000 events/s); 0.5 s simulated"
    assert sim_line(_run()["sim"]) == expected


def test_format_run_has_every_section() -> None:
    text = render(format_run(_run()))
    for needle in ("Performance counter stats", "thp_memscale.elapsed_seconds", "1075.9",
                   "f9", "Lock statistics", "sim: "):
        assert needle in text
    assert "f10" not in text


def test_format_outcomes_reports_failures_and_notes() -> None:
    outcome = {
        "id": "split-pmd-ptl",
        "title": "split PMD lock",
        "ok": False,
        "published": {"speedup": 36.2},
        "simulated": {"speedup": 80.0},
        "bands": {"speedup": [18, 72]},
        "checks": [
            {"metric": "speedup", "published": 36.2, "simulated": 80.0, "band": [18, 72], "ok": False,
             "note": ""},
            {"metric": "ctx drop", "published": 11.6, "simulated": 9.0, "band": ">= 5", "ok": True,
             "note": "x"},
        ],
        "arms": {"v3.12": {"elapsed_seconds": 1000.0, "series": [1, 2]}},
        "notes": ["page_table_lock wait share 93% -> 1%"],
    }
    text = render(format_outcomes([outcome]))
    assert "== split-pmd-ptl: split PMD lock  [FAIL]" in text
    assert "  speedup        36.2         80  [18, 72]  FAIL" in text
    assert "ctx drop" in text and "PASS" in text
    assert "Mechanism:\n  page_table_lock wait share 93% -> 1%" in text
    assert "arm v3.12: elapsed_seconds=1000.0" in text and "series" not in text
    assert text.endswith("0 of 1 experiments within their published bands.\n")


def test_json_is_indented_and_ordered() -> None:
    assert dumps({"b": 1, "a": [1]}) == '{\n  "b": 1,\n  "a": [\n    1\n  ]\n}'
