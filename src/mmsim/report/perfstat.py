"""``perf stat`` output of simulated runs: text, ``-x SEP`` (CSV) and ``-j`` (JSON lines), with ``-r N``.

The layout is perf's own (tools/perf/util/stat-display.c and stat-shadow.c,
perf 6.x): counts in 18 columns (``%'18.2f`` for task-clock, which has a
fractional scale, ``%'18.0f`` otherwise), the unit in 4 (``msec`` or blank),
the event name in 32, the shadow metric after `` # `` padded to 38, and with
``-r N`` the mean of the N runs and ``( +- x% )``, the standard error of the
mean relative to it (``stddev_stats``: sqrt(variance / n)). Software-event
rates scale as ``convert_unit_double`` does (``/sec``, ``K/sec``, ``M/sec``,
``G/sec``, each step above 1000).

A hardware event the model does not count for a workload (its total is 0
while cycles are not) prints ``<not supported>``, as perf does for an event
the PMU lacks. perf's ``seconds user`` / ``seconds sys`` lines are left out:
the model does not split task time into user and system time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

COUNTS_LEN = 18
EVNAME_LEN = 32
METRIC_LEN = 38
UNIT_WIDTH = 4  # len("msec"), the widest unit of the default events
NOT_SUPPORTED = "<not supported>"

EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults",
          "cycles", "instructions", "cache-references", "cache-misses")
HARDWARE = ("instructions", "cache-references", "cache-misses")  # <not supported> when the model counts none


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _noise_pct(xs: Sequence[float]) -> float:
    """perf's ``rel_stddev_stats(stddev_stats(...), avg)``: the standard error of the mean, % of the mean."""
    n = len(xs)
    if n < 2:
        return 0.0
    avg = _mean(xs)
    var = sum((x - avg) ** 2 for x in xs) / (n - 1)
    return 100.0 * math.sqrt(var / n) / avg if avg else 0.0


def _unit_rate(value: float) -> tuple[float, str]:
    """``convert_unit_double``: K, M, G each when the value exceeds 1000."""
    unit = ""
    for u in ("K", "M", "G"):
        if value > 1000.0:
            value /= 1000.0
            unit = u
    return value, f"{unit}/sec"


class _Counter:
    """One event's mean over the runs, its noise and its shadow metric (fmt, value, unit)."""

    def __init__(self, name: str, values: list[float], avg: Mapping[str, float]) -> None:
        self.name = name
        self.values = values
        self.avg = _mean(values)
        self.noise = _noise_pct(values)
        self.unit = "msec" if name == "task-clock" else ""
        self.supported = not (name in HARDWARE and self.avg == 0 and avg.get("cycles", 0) > 0)
        self.run_ns = round(avg.get("task-clock", 0.0) * 1e6) if self.supported else 0
        self.metric = self._metric(avg) if self.supported else None

    def _metric(self, avg: Mapping[str, float]) -> tuple[str, float, str] | None:
        task_ns = avg.get("task-clock", 0.0) * 1e6
        elapsed_ns = avg.get("seconds-time-elapsed", 0.0) * 1e9
        n = self.name
        if n == "task-clock":
            return ("%8.3f", task_ns / elapsed_ns, "CPUs utilized") if elapsed_ns else None
        if n == "cycles":
            return ("%8.3f", self.avg / task_ns, "GHz") if task_ns else None
        if n == "instructions":
            cyc = avg.get("cycles", 0.0)
            return ("%7.2f ", self.avg / cyc, "insn per cycle") if cyc else None
        if n == "cache-misses":
            refs = avg.get("cache-references", 0.0)
            return ("%7.2f%%", 100.0 * self.avg / refs, "of all cache refs") if refs else None
        if task_ns:  # software events and cache-references: a rate over task-clock
            v, unit = _unit_rate(1e9 * self.avg / task_ns)
            return ("%8.3f", v, unit)
        return None

    @property
    def fractional(self) -> bool:
        return self.name == "task-clock"  # evsel->scale 1e-6 (ns -> msec)


def _counters(runs: Sequence[Mapping[str, Any]]) -> list[_Counter]:
    perfs = [r.get("perf") or {} for r in runs]
    names = [e for e in EVENTS if any(e in p for p in perfs)]
    avg = {k: _mean([float(p.get(k, 0.0)) for p in perfs]) for k in (*EVENTS, "seconds-time-elapsed")}
    return [_Counter(e, [float(p.get(e, 0.0)) for p in perfs], avg) for e in names]


def _elapsed(runs: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float((r.get("perf") or {}).get("seconds-time-elapsed", 0.0)) for r in runs]


def _precision(sd: float) -> int:
    """``get_precision`` + 2; a zero spread (identical runs) keeps perf's nanosecond 9 digits."""
    if sd <= 0:
        return 9
    return (0 if sd > 1 else round(math.ceil(-math.log10(sd)))) + 2


def text(runs: Sequence[Mapping[str, Any]], command: str) -> str:
    """``perf stat [-r N] -- COMMAND`` as perf prints it to stderr (here: the returned string)."""
    nruns = len(runs)
    out = ["", f" Performance counter stats for '{command}'" + (f" ({nruns} runs)" if nruns > 1 else "") + ":", ""]
    for c in _counters(runs):
        if not c.supported:
            line = f"{NOT_SUPPORTED:>{COUNTS_LEN}} "
        elif c.fractional:
            line = f"{c.avg:{COUNTS_LEN},.2f} "
        else:
            line = f"{c.avg:{COUNTS_LEN},.0f} "
        line += f"{c.unit:<{UNIT_WIDTH}} {c.name:<{EVNAME_LEN}}"
        if c.metric is None:
            line += " " * METRIC_LEN
        else:
            fmt, v, unit = c.metric
            head = " # " + fmt % v
            line += head + " " + unit.ljust(METRIC_LEN - len(head) - 1)
        if nruns > 1 and c.noise:
            line += f"  ( +-{c.noise:6.2f}% )"
        out.append(line)
    el = _elapsed(runs)
    avg = _mean(el)
    out.append("")
    if nruns == 1:
        out.append(f" {avg:17.9f} seconds time elapsed")
    else:
        n = len(el)
        sd = math.sqrt(sum((x - avg) ** 2 for x in el) / (n - 1) / n)
        p = _precision(sd)
        line = f" {avg:17.{p}f} +- {sd:.{p}f} seconds time elapsed"
        pct = 100.0 * sd / avg if avg else 0.0
        if pct:
            line += f"  ( +-{pct:6.2f}% )"
        out.append(line)
    out += ["", ""]
    return "\n".join(out)


def _csv_metric(fmt: str, v: float) -> str:
    """``print_metric_csv``: the formatted value, leading spaces and anything after the number dropped."""
    s = (fmt % v).lstrip()
    end = 0
    while end < len(s) and (s[end].isdigit() or s[end] == "."):
        end += 1
    return s[:end]


def csv(runs: Sequence[Mapping[str, Any]], sep: str = ",") -> str:
    """``perf stat -x SEP``: value, unit, event, [variance%,] run time, % running, metric value, metric unit."""
    nruns = len(runs)
    lines = []
    for c in _counters(runs):
        if not c.supported:
            f = [NOT_SUPPORTED]
        else:
            f = [f"{c.avg:.2f}" if c.fractional else f"{c.avg:.0f}"]
        f += [c.unit, c.name]
        if nruns > 1:
            f.append(f"{c.noise:.2f}%")
        f += [str(c.run_ns), "100.00"]
        if c.metric is None:
            f += ["", ""]
        else:
            fmt, v, unit = c.metric
            f += [_csv_metric(fmt, v), unit.strip()]
        lines.append(sep.join(f))
    return "\n".join(lines) + "\n"


def json_lines(runs: Sequence[Mapping[str, Any]]) -> str:
    """``perf stat -j``: one JSON object per event, keys in perf 6.x's order and number formats
    (``"counter-value" : "%f"``, ``"pcnt-running" : %.2f``, ``"variance" : %.2f`` with ``-r``)."""
    nruns = len(runs)
    lines = []
    for c in _counters(runs):
        f = [f'"counter-value" : {json.dumps(f"{c.avg:f}" if c.supported else NOT_SUPPORTED)}',
             f'"unit" : {json.dumps(c.unit)}', f'"event" : {json.dumps(c.name)}']
        if nruns > 1:
            f.append(f'"variance" : {c.noise:.2f}')
        f += [f'"event-runtime" : {c.run_ns}', '"pcnt-running" : 100.00']
        if c.metric is not None:
            _, v, unit = c.metric
            f += [f'"metric-value" : "{v:f}"', f'"metric-unit" : {json.dumps(unit.strip())}']
        lines.append("{" + ", ".join(f) + "}")
    return "\n".join(lines) + "\n"
