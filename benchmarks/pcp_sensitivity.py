"""What-if analysis of `mmsim reproduce pcp-free-high`: which cost, changed by
how much, would bring the parent's zone->lock spin share into its band.

Not a speed benchmark and not part of the model: each variant changes one
quantity *in this process only* (the model's own constants stay as they are)
and runs both arms. The variants:

* ``model``: the model as committed.
* ``handoff-2x``: every lock cache line transfer (a contended qspinlock
  hand-off included) costs twice the machine's figure; ``handoff-<F>x``
  scales it by any F. The struct page lines are not scaled.
* ``copy-1.6x`` / ``copy-2.4x``: user copies run 1.6 / 2.4 times faster
  (16 / 24 L1D fill buffers instead of 10 in the copy rate); ``copy-<F>x``.
* ``cs+N``: every critical section under ``zone->lock`` costs N ns more, a
  fixed cost per acquisition that the patched arm's larger drains amortise.

Usage: python benchmarks/pcp_sensitivity.py [--json] [VARIANT ...]
       python benchmarks/pcp_sensitivity.py --breakdown [--json]
       python benchmarks/pcp_sensitivity.py --lines [--json]
(no variant: model, handoff-2x, copy-1.6x, copy-2.4x, cs+200 ... cs+800)
Prints, per variant: both arms' spin shares, their ratio, the bandwidth
change, the zone->lock hold per acquisition and how many of the experiment's
six band checks pass. ``--breakdown`` instead counts, in the model as it is,
the blocks freed to the buddy lists, their merge depth and the ``free_area``
list operations after another CPU's. ``--lines`` counts every line the allocator
charges, per zone->lock acquisition, by the function charging it and by who took
the line last, with its ns (session 11). Results: docs/pcp-free-high.md.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import Any
from unittest import mock

import mmsim.net.skbuff as skbuff
from mmsim.experiments.reproduce import EXPERIMENTS, _load
from mmsim.experiments.run import run
from mmsim.machine.model import COPY_MLP
from mmsim.mm.page_alloc import PageAllocator

ZONE_CS = {"free_pcppages_bulk", "rmqueue_bulk", "__rmqueue", "free_one_page"}


def _copy_rate(factor: float) -> Any:
    """The skb copies ``factor`` x faster: ``round(COPY_MLP x factor)`` lines in flight instead of the
    machine's ``copy_mlp`` (10 on the presets, COPY_MLP)."""
    orig = skbuff.copy_ns
    mlp = round(COPY_MLP * factor)

    def copy_ns(system: Any, cpu: int, nbytes: int, latency_ns: float) -> int:
        return orig(system, cpu, nbytes, latency_ns * system.machine.cost.copy_mlp / mlp)

    return mock.patch.object(skbuff, "copy_ns", copy_ns)


def _cs_extra(ns: int) -> Any:
    orig = PageAllocator._charge_cs

    def charge(self: PageAllocator, cpu: int, func: str, pns: int, ins: int) -> int:
        return orig(self, cpu, func, pns + (ns if func in ZONE_CS else 0), ins)

    return mock.patch.object(PageAllocator, "_charge_cs", charge)


@contextmanager
def _handoff(factor: float) -> Iterator[None]:
    """Every lock cache line's transfers scaled by ``factor``: the LineCosts tables lock lines read
    (mmsim.locks.base.line_costs) are built from a copy of the machine with its line-transfer figures
    scaled; the struct page lines (Machine.xfer_ns of the machine itself) are untouched."""
    import dataclasses

    import mmsim.locks.base as lbase

    orig = lbase.line_costs
    made: dict[int, Any] = {}
    names = ("line_xfer_smt_ns", "line_xfer_socket_ns", "line_xfer_remote_ns", "line_hit_socket_ns",
             "line_hit_remote_ns")

    def scaled(machine: Any) -> Any:
        if id(machine) not in made:
            cost = dataclasses.replace(machine.cost, **{n: factor * getattr(machine.cost, n) for n in names})
            made[id(machine)] = (machine, orig(dataclasses.replace(machine, cost=cost)))
        return made[id(machine)][1]

    with mock.patch.object(lbase, "line_costs", scaled):
        yield


DEFAULT = ["model", "handoff-2x", "copy-1.6x", "copy-2.4x", "cs+200", "cs+300", "cs+400", "cs+500", "cs+600",
           "cs+800"]
FORMS = "model, handoff-<F>x, copy-<F>x or cs+<N> (F a factor > 0, N whole ns >= 0)"


def variant(name: str) -> Callable[[], Any] | None:
    """The context manager factory for a variant name, or None if it does not parse."""
    try:
        if name == "model":
            return nullcontext
        if name.startswith("cs+"):
            ns = int(name[3:])
            return partial(_cs_extra, ns) if ns >= 0 else None
        for prefix, make in (("handoff-", _handoff), ("copy-", _copy_rate)):
            if name.startswith(prefix) and name.endswith("x"):
                f = float(name[len(prefix):-1])
                if not 0 < f < math.inf or (make is _copy_rate and round(COPY_MLP * f) < 1):
                    return None
                return partial(make, f)
    except ValueError:
        return None
    return None


def measure(name: str) -> dict[str, Any]:
    _load()
    e = EXPERIMENTS["pcp-free-high"]
    make = variant(name)
    assert make is not None
    with make():
        res = {arm: run(spec) for arm, spec in e.arms.items()}
    checks, _ = e.evaluate(res)
    by = {c.metric: c.simulated for c in checks}
    banded = [c for c in checks if c.band is not None]
    hold = {arm: r.locks["&zone->lock"]["hold_ns_total"] / r.locks["&zone->lock"]["acquisitions"]
            for arm, r in res.items()}
    sp, ss = by["zone_lock_spin_share.parent"], by["zone_lock_spin_share.patched"]
    return {
        "variant": name,
        "spin_parent": round(sp, 4),
        "spin_patched": round(ss, 4),
        "ratio": round(ss / sp, 3) if sp else None,
        "bandwidth_change_pct": round(by["bandwidth_change_pct"], 1),
        "hold_ns_parent": round(hold["parent"]),
        "hold_ns_patched": round(hold["patched"]),
        "checks_in_band": f"{sum(bool(c.ok) for c in banded)}/{len(banded)}",
    }


@contextmanager
def _count(st: Counter[str]) -> Iterator[None]:
    """Count, without changing any cost: blocks freed to the buddy lists and
    their merge levels, and list operations on a ``free_area`` another CPU
    wrote last (each charged its free_area lines, FA_OP; the struct page lines are charged apart)."""
    area_op, free_one = PageAllocator._area_op, PageAllocator._free_one_page

    def area(self: PageAllocator, z: Any, cpu: int, lines: tuple[int, ...], write: bool = True) -> float:
        st["free_area ops"] += 1
        st["free_area ops after another CPU"] += any(z.area_lines[ln] >> 1 != cpu for ln in lines)
        ns: float = area_op(self, z, cpu, lines, write)
        return ns

    def free(self: PageAllocator, z: Any, cpu: int, pfn: int, order: int, stamp: int, mt: int = -1) -> int:
        levels: int = free_one(self, z, cpu, pfn, order, stamp, mt)
        st["blocks freed to buddy"] += 1
        st[f"blocks merging {levels} levels" if levels < 3 else "blocks merging 3+ levels"] += 1
        return levels

    with mock.patch.object(PageAllocator, "_area_op", area), \
            mock.patch.object(PageAllocator, "_free_one_page", free):
        yield


def breakdown() -> dict[str, dict[str, int]]:
    """Where the zone-lock time goes in each arm of the model as it is."""
    _load()
    out = {}
    for arm, spec in EXPERIMENTS["pcp-free-high"].arms.items():
        st: Counter[str] = Counter()
        with _count(st):
            r = run(spec)
        st["zone->lock acquisitions"] = r.locks["&zone->lock"]["acquisitions"]
        out[arm] = dict(sorted(st.items()))
    return out


def _distance(self: PageAllocator, owner: int, cpu: int, dirty: int) -> str:
    if owner == cpu:
        return "own"
    m = self.system.machine
    where = "socket" if m.cpu_socket(owner) == m.cpu_socket(cpu) else "remote"
    return f"{where} {'HITM' if dirty else 'HIT'}"


@contextmanager
def _lines(acc: dict[tuple[str, str], list[float]]) -> Iterator[None]:
    """Count, without changing any cost, every line the allocator charges: by the function that
    charges it (``zone:`` for zone->free_area / vm_stat lines) and by who took the line last
    (this CPU by the level still holding it, another core of the socket, the other socket, or no
    table: memory, or the L2 where the streamer covers it), with the ns charged."""
    line, lines_op, tails = PageAllocator._line, PageAllocator._lines_op, PageAllocator._tails

    def add(site: str, cls: str, n: int, ns: float) -> None:
        a = acc.setdefault((site, cls), [0, 0.0])
        a[0] += n
        a[1] += ns

    def own(ns: float, lat2: float) -> str:
        return "own L1" if ns == 0 else ("own L2" if ns == lat2 else "own farther")

    def line_(self: PageAllocator, z: Any, pfn: int, cpu: int, write: bool) -> float:
        st = z.page_owner.get(pfn, -1)
        ns: float = line(self, z, pfn, cpu, write)
        cls = "no table" if st < 0 else _distance(self, st >> 1, cpu, st & 1)
        add(sys._getframe(1).f_code.co_name, own(ns, self._lat2) if cls == "own" else cls, 1, ns)
        return ns

    def lines_op_(self: PageAllocator, al: list[int], cpu: int, lns: tuple[int, ...], write: bool,
                  at: Any = None, node: int = 0, sh: Any = None) -> float:
        f = sys._getframe(1)
        site = "zone:" + (f.f_back.f_code.co_name if f.f_code.co_name == "_area_op" and f.f_back else
                          f.f_code.co_name)
        total = 0.0
        for ln in lns:
            st = al[ln]
            shared = sh is not None and cpu in sh[ln]
            ns: float = lines_op(self, al, cpu, (ln,), write, at, node, sh)
            cls = "own" if shared and not write else _distance(self, st >> 1, cpu, st & 1)
            add(site, own(ns, -1.0) if cls == "own" else cls, 1, ns)
            total += ns
        return total

    def tails_(self: PageAllocator, z: Any, pfn: int, order: int, cpu: int) -> float:
        owner = z.tail_owner.get(pfn << 4 | order, z.home)
        ns: float = tails(self, z, pfn, order, cpu)
        add("tails:" + sys._getframe(1).f_code.co_name, _distance(self, owner, cpu, 1), (1 << order) - 1, ns)
        return ns

    with mock.patch.object(PageAllocator, "_line", line_), mock.patch.object(PageAllocator, "_lines_op", lines_op_), \
            mock.patch.object(PageAllocator, "_tails", tails_):
        yield


UNDER_LOCK = {"_free_pcppages_bulk", "_free_one_page", "_rmqueue_smallest", "zone:_free_one_page",
              "zone:_rmqueue_smallest", "zone:_mod_free_pages", "zone:_find_fallback"}


def lines() -> dict[str, Any]:
    """Per zone->lock acquisition, each arm: the lines charged by function and distance, and the
    sum of those charged under the lock."""
    _load()
    out: dict[str, Any] = {}
    for arm, spec in EXPERIMENTS["pcp-free-high"].arms.items():
        acc: dict[tuple[str, str], list[float]] = {}
        with _lines(acc):
            r = run(spec)
        acq = r.locks["&zone->lock"]["acquisitions"]
        rows = [{"site": s, "from": c, "lines_per_acq": round(n / acq, 3), "ns_per_acq": round(ns / acq, 1)}
                for (s, c), (n, ns) in sorted(acc.items(), key=lambda kv: -kv[1][1])]
        under = sum(ns for (s, _), (_, ns) in acc.items() if s in UNDER_LOCK) / acq
        out[arm] = {"acquisitions": acq, "hold_ns": round(r.locks["&zone->lock"]["hold_ns_total"] / acq, 1),
                    "line_ns_under_lock": round(under, 1), "rows": rows}
    return out


def main() -> None:
    if "--lines" in sys.argv:
        res = lines()
        if "--json" in sys.argv:
            print(json.dumps(res))
            return
        for arm, d in res.items():
            print(f"{arm}: {d['acquisitions']:,} acquisitions, hold {d['hold_ns']} ns, lines under the lock "
                  f"{d['line_ns_under_lock']} ns per acquisition")
            for row in d["rows"]:
                print(f"  {row['site']:>28} {row['from']:>12} {row['lines_per_acq']:>9} {row['ns_per_acq']:>9}")
        return
    if "--breakdown" in sys.argv:
        b = breakdown()
        if "--json" in sys.argv:
            print(json.dumps(b))
            return
        keys = list(next(iter(b.values())))
        print(f"{'':>34}" + "".join(f"{arm:>12}" for arm in b))
        for k in keys:
            print(f"{k:>34}" + "".join(f"{b[arm][k]:>12,}" for arm in b))
        return
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or DEFAULT
    bad = [n for n in names if variant(n) is None]
    if bad:
        print(f"pcp_sensitivity: variant {bad[0]!r} not understood; allowed: {FORMS}", file=sys.stderr)
        sys.exit(2)
    rows = [measure(n) for n in names]
    if "--json" in sys.argv:
        print(json.dumps(rows))
        return
    cols = list(rows[0])
    print("  ".join(f"{c:>20}" for c in cols))
    for r in rows:
        print("  ".join(f"{r[c]!s:>20}" for c in cols))


if __name__ == "__main__":
    main()
