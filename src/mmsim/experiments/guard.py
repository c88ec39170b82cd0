"""Resource guard: estimate a spec's simulated events and host memory before it
runs, and refuse one beyond the limits (a one-line :class:`UserError`, exit 2)
instead of running for hours or swapping.

The estimate is a cheap model per workload from its parameters, never a
trial run:

* **work units** -- what the workload does that costs engine events: page
  faults (bytes / page size, 2 MiB when THP or hugetlb maps the memory),
  messages (lmbench), lock acquisitions (lockstress), access batches and
  NUMA-balancing scan passes (pmbench);
* **events** = units x events per unit, the per-workload ratio measured on
  small runs (``EVENTS_PER_UNIT``; the measurement is repeated by
  ``tests/hardening/test_guard.py``, which asserts the estimate stays within
  a factor of the actual ``sim.events``);
* **memory** = the interpreter with mmsim and numpy loaded (``BASE_RSS``)
  + per simulated CPU (``PER_CPU_BYTES``) + the page-table state the model keeps (a 512-entry
  present bitmap per 2 MiB PTE table, plus four 512-entry NUMA arrays per
  table with NUMA balancing or a dense pmbench map, see
  :mod:`mmsim.mm.pgtable`) + per-workload arrays (pmbench's LLC stamps and
  scratch, 8 bytes per 64-byte line of the working set; the owner lists of
  will-it-scale, one Python int per live page).

Limits (defaults sized for a 24 GiB, 2-core host shared with other jobs):
``--max-events`` / ``$MMSIM_MAX_EVENTS`` (default 2e8: at the 8-29 us per event
measured on the reproduce runs, 0.5-1.6 h), ``--max-memory`` /
``$MMSIM_MAX_MEMORY`` (default 8g: a third of the host, so a two-worker sweep
still fits), ``--force`` / ``MMSIM_FORCE=1`` to run anyway.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mmsim.errors import UserError

PAGE = 4096
HPAGE = 2 << 20
PTRS_PER_PTE = 512

DEFAULT_MAX_EVENTS = 200_000_000
DEFAULT_MAX_MEMORY = 8 << 30
ENV_EVENTS, ENV_MEMORY, ENV_FORCE = "MMSIM_MAX_EVENTS", "MMSIM_MAX_MEMORY", "MMSIM_FORCE"

# Interpreter + numpy + mmsim, and per simulated CPU (counters, scheduler, PCP lists, LLC state; the
# tasks on it): from the reproduce runs' ru_maxrss on this host, 36 MiB for lmbench/bw_unix on the
# 128-CPU icelake-6338-2s and 110 MiB for thp_memscale on the 1024-CPU sgi-uv2000-512: (110 - 36) MiB
# over (1024 - 128) CPUs = 85 KiB per CPU, 25 MiB of the 36 left for the base.
BASE_RSS = 25 << 20
PER_CPU_BYTES = 85 << 10
# One PTE table's present bitmap: numpy bool[512] (512 B data + ~112 B array header) and its dict slot.
PTE_TABLE_BYTES = 512 + 112 + 100
# NUMA state per PTE table (pgtable.numa_arrays): int16 nid, bool protnone, int16 last cpu, float64 scan time.
NUMA_TABLE_BYTES = PTRS_PER_PTE * (2 + 1 + 2 + 8) + 4 * 112
# pmbench: float32 LLC stamp + int32 scratch per 64-byte line of the working set (pmbench.py _main).
PMBENCH_LINE_BYTES = 8
# page_alloc owner lists (will-it-scale frees by owner): one boxed int (28 B) + its list slot (8 B) per page.
OWNED_PAGE_BYTES = 36

# Engine events per work unit, measured: sim.events / units of small runs
# (tests/hardening/test_guard.py repeats the measurement on other sizes).
# Two ratios per workload: per first unit (a 4 KiB page fault, a message, a
# lock acquisition, an access batch) and per second unit (a 2 MiB fault; for
# pmbench a NUMA hinting fault, for anon-r-seq a task). 4 KiB ratios: on tiny,
# v3.13, equal on xeon-e5-2699v3-2s v4.14 (estimate/actual 0.99-1.0). 2 MiB
# ratios: on xeon-e5-2699v3-2s, v4.14, 1-4 GiB runs; at the published scale a
# THP fault costs fewer (15-25 on the reproduce runs: a per-run share is
# amortised), on tiny far more (400-960: its slow clear spans many timer
# ticks), but tiny's 2 GiB bounds those runs to ~1e6 events.
EVENTS_PER_UNIT: dict[str, tuple[float, float]] = {
    "thp_memscale": (6.1, 39.2),
    "vm-scalability/anon-w-seq": (6.1, 36.5),
    "vm-scalability/anon-w-rand": (6.1, 113.8),
    # reads map the zero page (a huge zero page with THP: 2 faults per 2 MiB measured); the read loop's
    # events do not grow with the size: 2,580-2,620 per task on tiny and xeon-e5 for 1-64 MiB per task
    "vm-scalability/anon-r-seq": (5.0, 2600.0),
    "vm-scalability/anon-cow-seq": (7.7, 137.1),  # 4 KiB: 7.4 (tiny) and 7.7 (xeon-e5) measured
    "vm-scalability/anon-w-seq-hugetlb": (22.6, 22.6),
    "vm-scalability/anon-cow-seq-hugetlb": (23.1, 23.1),
    "will-it-scale/page_fault1": (6.2, 64.5),
    "pmbench": (0.06, 1.0),  # 0.046 and 0.083 measured (every access counted as an LLC hit); 1 per hinting fault
    "lmbench/bw_unix": (20.0, 20.0),  # 29.6 (64 KiB msgs) and 13.0 (16 KiB) measured
    "lockstress": (4.0, 4.0),  # 3.0 (spinlock) and 4.0 (mutex) measured
}
SECOND_UNIT = {"pmbench": "NUMA hinting faults", "vm-scalability/anon-r-seq": "tasks"}
# a workload added without a measurement: the largest ratios
DEFAULT_EVENTS_PER_UNIT = (max(k[0] for k in EVENTS_PER_UNIT.values()), max(k[1] for k in EVENTS_PER_UNIT.values()))


@dataclass(frozen=True)
class Estimate:
    events: int
    memory: int  # bytes, peak RSS of the simulating process
    basis: str  # the units the events come from, for the message
    wall_seconds: float = 0.0  # host time (mmsim.experiments.walltime)


@dataclass(frozen=True)
class Limits:
    max_events: int
    max_memory: int
    force: bool = False


_override: Limits | None = None


def parse_count(option: str, v: str) -> int:
    try:
        n = int(float(v)) if any(c in v.lower() for c in ".e") else int(v, 0)
    except (ValueError, OverflowError):  # OverflowError: 1e400 is an infinite float
        raise UserError(option, v, "a positive integer like 200000000 or 2e8") from None
    if n < 1:
        raise UserError(option, v, "a positive integer like 200000000 or 2e8")
    return n


def parse_bytes(option: str, v: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    s = v.strip().lower().removesuffix("b").removesuffix("i")
    mult = units.get(s[-1:], 1)
    try:
        n = int(float(s[:-1] if s[-1:] in units else s) * mult)
    except (ValueError, OverflowError):  # OverflowError: 1e400 is an infinite float
        raise UserError(option, v, "a size like 8g, 512m (k/m/g/t = 2^10..2^40)") from None
    if n < 1:
        raise UserError(option, v, "a size like 8g, 512m (k/m/g/t = 2^10..2^40)")
    return n


def limits() -> Limits:
    """The limits in force: the command's options if given (:func:`override`), else the environment, else defaults."""
    if _override is not None:
        return _override
    ev = os.environ.get(ENV_EVENTS)
    mem = os.environ.get(ENV_MEMORY)
    return Limits(
        parse_count(f"${ENV_EVENTS}", ev) if ev else DEFAULT_MAX_EVENTS,
        parse_bytes(f"${ENV_MEMORY}", mem) if mem else DEFAULT_MAX_MEMORY,
        os.environ.get(ENV_FORCE, "") not in ("", "0"),
    )


@contextlib.contextmanager
def override(max_events: str | None, max_memory: str | None, force: bool) -> Iterator[Limits]:
    """Limits from a command's ``--max-events``/``--max-memory``/``--force`` for the length of the command."""
    global _override
    base = limits()
    new = Limits(
        parse_count("--max-events", max_events) if max_events is not None else base.max_events,
        parse_bytes("--max-memory", max_memory) if max_memory is not None else base.max_memory,
        force or base.force,
    )
    old, _override = _override, new
    try:
        yield new
    finally:
        _override = old


def _faults(nbytes: int, huge: bool) -> tuple[int, int]:
    """(4 KiB faults, 2 MiB faults) to populate ``nbytes``."""
    return (0, -(-nbytes // HPAGE)) if huge else (-(-nbytes // PAGE), 0)


def _slots(nbytes: int) -> int:
    return -(-nbytes // HPAGE)


def _work(w: str, p: dict[str, Any], machine: Any, policies: dict[str, str]) -> tuple[int, int, str, int]:
    """(4 KiB units, 2 MiB faults, what the units are, bytes of model state) for workload ``w`` with resolved
    params ``p``."""
    thp = policies.get("thp") == "always"
    numa = policies.get("numa_balancing", "0") != "0"
    mem_total = int(sum(n.memory_gib for n in machine.nodes) * (1 << 30))
    small = huge_n = 0
    tables = 0  # 2 MiB slots with a 4 KiB PTE table at peak
    extra = 0
    what = "page faults"
    if w == "thp_memscale":
        huge = p["mapping"] == "hugetlb" or thp
        s, h = _faults(p["bytes"], huge)
        small, huge_n = p["threads"] * (s + 1), p["threads"] * h  # +1: the thread's stack
        tables = 0 if huge else p["threads"] * _slots(p["bytes"])
    elif w.startswith("vm-scalability/"):
        from mmsim.workloads.vm_scalability import resolve_nr_task

        nr = max(1, resolve_nr_task(str(p["nr_task"]), machine.ncpus))
        hugetlb, cow = w.endswith("-hugetlb"), "-cow-" in w
        total = p["size"] or mem_total // 2
        per = total // (nr + 1 if hugetlb and cow else nr)
        copies = nr + 1 if cow else nr
        huge = hugetlb or thp
        s, h = _faults(per, huge)
        small, huge_n = copies * s, copies * h
        tables = 0 if huge else copies * _slots(per)
        if "-r-" in w:  # zero-page read faults (huge zero page: two per 2 MiB), then the tasks
            small, huge_n, what = copies * (s + 2 * h), copies, "zero-page faults"
    elif w == "will-it-scale/page_fault1":
        s, h = _faults(p["memsize"], thp)
        small, huge_n = p["nr_task"] * p["loops"] * s, p["nr_task"] * p["loops"] * h
        tables = 0 if thp else p["nr_task"] * _slots(p["memsize"])
        extra = p["nr_task"] * (s + h) * OWNED_PAGE_BYTES
    elif w == "pmbench":
        from mmsim.workloads.pmbench import BATCH, WARMUP_RUNS

        npages = (p["setsize"] << 20) // PAGE
        # timed accesses: at most one per LLC hit latency (the fastest access there is) plus the -d delay
        llc_ns = max(1.0, float(machine.cache("L3").latency_ns))
        timed = p["duration"] * 1e9 / (llc_ns + p["delay"] / machine.freq_ghz)
        warm = 0 if p["cold"] else WARMUP_RUNS[p["pattern"]] * npages
        batches = p["jobs"] * (timed + warm) / BATCH
        # NUMA balancing: task_numa_work makes the set's pages hinting faults once per scan period
        # (numa_balancing_scan_period_min_ms, default 1000) per thread: second units, 1 event each assumed
        period_s = int(policies.get("numa_balancing_scan_period_min_ms", "1000")) / 1000 or 1.0
        passes = int(p["duration"] / period_s)
        huge_n = p["jobs"] * npages * passes if numa else 0
        small = int(batches + npages)
        if p.get("initialize"):
            # -i: a write fault per page of the map, ~5.5 events each (measured: 1,453,813 events for 262,663
            # faults, a 1 GiB linear fill on cascadelake-optane-2s) = 5.5 / 0.06 first units
            small += int((p["mapsize"] << 20) // PAGE * 5.5 / EVENTS_PER_UNIT["pmbench"][0])
        tables = _slots(p["mapsize"] << 20)
        extra = npages * (PAGE // 64) * PMBENCH_LINE_BYTES + tables * NUMA_TABLE_BYTES
        what = "access batches and page faults"
    elif w == "lmbench/bw_unix":
        small = p["pairs"] * (p["warmup"] + p["repetitions"]) * -(-p["bytes"] // p["msg"])
        what = "messages"
    elif w == "lockstress":
        small = p["tasks"] * p["iterations"]
        what = "lock acquisitions"
    else:  # a workload without a model
        small = 1
        what = "runs (no model for this workload)"
    memory = tables * (PTE_TABLE_BYTES + (NUMA_TABLE_BYTES if numa else 0)) + extra
    return int(small), int(huge_n), what, int(memory)


def estimate(
    workload: str, params: dict[str, Any], machine: Any, policies: dict[str, str], exact: bool = False
) -> Estimate:
    """Events, peak host memory and host wall time of one run, from its resolved parameters (cheap: no
    System is built). The events are those of event-by-event (``exact``) simulation."""
    from mmsim.experiments.walltime import estimate_wall_seconds

    small, huge, what, mem = _work(workload, params, machine, policies)
    ks, kh = EVENTS_PER_UNIT.get(workload, DEFAULT_EVENTS_PER_UNIT)
    second = SECOND_UNIT.get(workload, "2 MiB faults")
    basis = f"{small:,} {what} x {ks:g} events" + (f" + {huge:,} {second} x {kh:g}" if huge else "")
    wall = estimate_wall_seconds(workload, small * ks, huge * kh, exact)
    return Estimate(int(small * ks + huge * kh), BASE_RSS + PER_CPU_BYTES * machine.ncpus + mem, basis, wall)


def _fmt_bytes(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def check(
    workload: str, params: dict[str, Any], machine: Any, policies: dict[str, str], exact: bool = False
) -> Estimate:
    """Refuse (UserError) a run whose estimate exceeds the limits in force, unless forced. The wall-time
    limit (:data:`mmsim.experiments.walltime.MAX_WALL_SECONDS`) does not apply to ``exact`` runs: asking
    for event by event is asking for the time it takes."""
    from mmsim.experiments import walltime

    est = estimate(workload, params, machine, policies, exact)
    lim = limits()
    if lim.force:
        return est
    if est.events > lim.max_events:
        raise UserError(
            "estimated events", f"{est.events:.3g} ({est.basis})",
            f"at most {lim.max_events:.3g} (--max-events N or ${ENV_EVENTS}; --force to run anyway)")
    if est.memory > lim.max_memory:
        raise UserError(
            "estimated memory", _fmt_bytes(est.memory),
            f"at most {_fmt_bytes(lim.max_memory)} (--max-memory SIZE or ${ENV_MEMORY}; --force to run anyway)")
    if not exact and est.wall_seconds > walltime.MAX_WALL_SECONDS:
        raise UserError(
            "estimated wall time", f"{walltime.format_seconds(est.wall_seconds)} ({est.basis})",
            f"at most {walltime.format_seconds(walltime.MAX_WALL_SECONDS)} (--force to run anyway; "
            "--exact runs event by event on purpose, without this limit)")
    return est
