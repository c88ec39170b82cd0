"""perf stat's text, -x CSV, -j JSON lines and -r N noise, against perf's own layout (stat-display.c)."""

from __future__ import annotations

import json
import math
from typing import Any

from mmsim.report import perfstat


def _run(task_ms: float = 2.0, elapsed: float = 0.001, cycles: int = 4_000_000, insns: int = 0,
         refs: int = 0, misses: int = 0, cs: int = 3) -> dict[str, Any]:
    return {"perf": {"task-clock": task_ms, "context-switches": cs, "cpu-migrations": 0, "page-faults": 2_500,
                     "cycles": cycles, "instructions": insns, "cache-references": refs, "cache-misses": misses,
                     "seconds-time-elapsed": elapsed}}


def test_text_is_perfs_layout_with_not_supported() -> None:
    out = perfstat.text([_run()], "lockstress spinlock x2")
    lines = out.split("\n")
    assert lines[:3] == ["", " Performance counter stats for 'lockstress spinlock x2':", ""]
    assert lines[3] == "              2.00 msec task-clock                       #    2.000 CPUs utilized             "
    # 3 / 2 ms = 1500/s -> K/sec (convert_unit_double steps above 1000)
    assert lines[4] == "                 3      context-switches                 #    1.500 K/sec                     "
    assert lines[6] == "             2,500      page-faults                      #    1.250 M/sec                     "
    assert lines[8] == "   <not supported>      instructions                                                          "
    assert out.endswith("\n\n       0.001000000 seconds time elapsed\n\n")


def test_repeat_prints_mean_and_standard_error_of_the_mean() -> None:
    runs = [_run(cs=c, elapsed=e) for c, e in ((2, 0.0010), (3, 0.0011), (4, 0.0012))]
    lines = perfstat.text(runs, "x").split("\n")
    assert lines[1] == " Performance counter stats for 'x' (3 runs):"
    # mean 3, sample stddev 1, / sqrt(3) = 0.577 -> 19.25 %
    assert lines[4] == ("                 3      context-switches                 #    1.500 K/sec"
                        "                       ( +- 19.25% )")
    assert "( +-" not in lines[3]  # identical task-clock: no noise printed (perf: if (pct))
    sd = math.sqrt(((0.0010 - 0.0011) ** 2 + (0.0012 - 0.0011) ** 2) / 2 / 3)
    assert lines[-3] == f"         0.0011000 +- {sd:.7f} seconds time elapsed  ( +-  5.25% )"  # " %17.*f"


def test_csv_fields() -> None:
    rows = perfstat.csv([_run()], ",").splitlines()
    assert rows[0] == "2.00,msec,task-clock,2000000,100.00,2.000,CPUs utilized"
    assert rows[1] == "3,,context-switches,2000000,100.00,1.500,K/sec"
    assert rows[5] == "<not supported>,,instructions,0,100.00,,"
    assert perfstat.csv([_run(), _run()], ";").splitlines()[1] == "3;;context-switches;0.00%;2000000;100.00;1.500;K/sec"


def test_json_lines() -> None:
    lines = perfstat.json_lines([_run(insns=2_000_000)]).splitlines()
    assert lines[0] == ('{"counter-value" : "2.000000", "unit" : "msec", "event" : "task-clock", '
                        '"event-runtime" : 2000000, "pcnt-running" : 100.00, "metric-value" : "2.000000", '
                        '"metric-unit" : "CPUs utilized"}')
    d = [json.loads(x) for x in lines]
    assert [x["event"] for x in d] == list(perfstat.EVENTS)
    assert d[5]["metric-unit"] == "insn per cycle" and d[5]["metric-value"] == "0.500000"
    assert d[6]["counter-value"] == "<not supported>" and "metric-value" not in d[6]
