"""Sampling with fast-forward for steady-state phases (SMARTS-style).

Workloads whose threads repeat one operation many times (thp_memscale: one
page fault per page of a buffer) spend most of their host time in a steady
state. :class:`FastForward` alternates *detailed windows*, simulated event by
event, with *skips*:

1. **Wait** until every thread is spawned and every live one is inside its
   steady region (past ``warm`` and before its last ``tail`` operations of
   it, so start-up and the hand-over between phases are simulated in detail).
2. **Window**: from one poll to the first poll after ``window_ops``
   operations in total (and at least ``min_thread_ops`` per thread), snapshot
   every counter at both ends (perf, vmstat, cycle profile, lock_stat). The
   window is cut into ``BATCHES`` batches of equal operation counts for the
   confidence interval.
3. **Steady?** A window is used only if its mean time per operation agrees with the previous window's
   (the last one measured, whenever it was): within :data:`STEADY_TOL`, or within the two windows'
   combined 95% half-width. Otherwise it becomes the reference and the next window starts
   at once. So a transient the ``warm`` operations do not cover (a lock convoy forming as the last
   threads join, session 22: on tiny the node check runs at 2.2x its steady rate for its first ~2 ms) is
   simulated in detail instead of being extrapolated.
4. **Skip** ``F = skip_ratio x W`` of simulated time, capped so that every
   thread keeps ``tail`` operations of its region for detailed simulation:
   thread *i* is advanced by ``n_i = round(rate_i x F)`` operations (its own
   rate in the window; the workload applies the state change, e.g. marks the
   pages mapped, at the thread's next poll), the counters of its CPU by
   ``n_i / d_i x`` their window delta (``d_i``: its operations in the window,
   so its page faults stay exact), every other counter (lock_stat, CPUs
   without a thread) by ``r x`` its window delta with
   ``r = sum(n_i) / sum(d_i)``, and ``F`` is added to the run's elapsed time.

All threads skip the same simulated time together, so the contention they
see (lock queues, shared lines) is the window's. Nothing in the engine's
time is shifted: time-stamped model state (lock hand-offs, bandwidth
windows, cache clocks) stays consistent, and the run is simply shorter by
the skipped operations. The arithmetic is deterministic: the same seed
gives byte-identical results.

**CI.** The windows are one contiguous stretch of engine time (a skip does not move the clock), and a
contended run's rate has long-range dependence (docs/performance.md, session 32: the order in which the
threads meet at a shared line keeps a pattern for milliseconds), so the skips' errors are correlated. Per
group of skips (one skip ratio and one kind of region), :func:`lrd_rel_se` estimates the relative
standard error of the mean of its windows' rates by the variance-time method, and the group's 95%
half-width is ``t(n-1) x`` that ``x`` its skipped time; where the skipped operations change no state (the
region says so, :meth:`FastForward.register`), plus the windows' trend (:func:`trend_rel`: how far their rate
moved between the earlier and the later half) ``x`` its skipped time, added linearly, since the process then
stays at its windows' age and what its rate does after the last window is never seen (session 37: the
512-thread node-check convoys drift on past their windows; a skip that applies its state change, such as a
fault region's mapped pages, lets the next window follow a trend the state carries); never less than the
skips' own half-widths in quadrature (each window's batch noise ``h``, or its drift from the window before,
step 3), and with fewer than :data:`LRD_MIN` windows those half-widths, each at least :data:`STEADY_TOL` of its
skip, summed linearly. Groups (a skip ratio and a kind of region) add in quadrature. Reported as
``elapsed_ci95_seconds`` (half-width) next to the elapsed time. Until session 32 the skips were added in
quadrature as independent, which understated the error 2-5x.

``--exact`` (``RunSpec.exact``) turns this off: every operation is an event.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from typing import Any

from mmsim.locks.base import window_close, window_lines, window_open
from mmsim.metrics.counters import TASK_CLOCK, Counters, LockStat, distinct_lines

BATCHES = 8
# Two consecutive windows whose mean time per operation differs by at most this (relative) are taken as one
# steady state (or by their combined 95% half-width, if larger). Host time only, not a model constant: it is
# issue 20's fidelity target (fast within +-2% of --exact); tighter costs more windows, looser risks a trend.
STEADY_TOL = 0.02
# Student-t 0.975 quantiles for 1..30 degrees of freedom (any table); the normal 1.960 beyond
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    """The Student-t distribution's 0.975 quantile with ``df`` degrees of freedom."""
    return _T975[df - 1] if df <= len(_T975) else 1.960


T975_7 = t975(BATCHES - 1)


# The fewest windows whose correlation :func:`lrd_rel_se` can fit: blocks of 1 and of 2 windows, each at least
# three blocks. A smaller group of skips is taken as fully correlated (FastForward.ci95_ns_since).
LRD_MIN = 6


def lrd_rel_se(rates: list[float]) -> float:
    """The relative standard error of the mean of ``rates``, a contiguous series that may have long-range
    dependence (the variance-time method: Beran, *Statistics for Long-Memory Processes*, 1994, ch. 4). The
    variance of the means of blocks of 1, 2, 4, ... consecutive values (while at least three blocks remain),
    relative to the mean squared, is fitted against the block size on log-log axes; the slope, clamped to
    [-1, 0] (-1: independent values, the usual s^2 / n; 0: one regime throughout, no averaging), carries the
    fit to a block of all ``n``. Needs :data:`LRD_MIN` values (two block sizes to fit); 0.0 for a constant
    series."""
    n = len(rates)
    mu = sum(rates, 0.0) / n
    pts: list[tuple[float, float]] = []
    m = 1
    while n // m >= 3:
        k = n // m
        b = [sum(rates[i * m:(i + 1) * m], 0.0) / m for i in range(k)]
        bm = sum(b, 0.0) / k
        v = sum(((x - bm) ** 2 for x in b), 0.0) / (k - 1) / (mu * mu)
        if v <= 0.0:
            break
        pts.append((math.log(m), math.log(v)))
        m *= 2
    if len(pts) < 2:
        return 0.0
    xm = sum((x for x, _ in pts), 0.0) / len(pts)
    ym = sum((y for _, y in pts), 0.0) / len(pts)
    slope = sum(((x - xm) * (y - ym) for x, y in pts), 0.0) / sum(((x - xm) ** 2 for x, _ in pts), 0.0)
    slope = min(0.0, max(-1.0, slope))
    return math.sqrt(math.exp(ym + slope * (math.log(n) - xm)))


def trend_rel(rates: list[float]) -> float:
    """How far a contiguous series of window rates moved while it was watched: ``|m2 / m1 - 1|``, the means of
    its later and earlier halves (the middle value of an odd count in the later half). A skip moves no engine
    time, so whatever the rate does after the last window is never simulated; the fast mode's CI takes this as a
    bias bound on the skipped time and adds it linearly to the variance-time half-width (docs/performance.md,
    session 37). 0.0 for fewer than two values."""
    n = len(rates)
    if n < 2:
        return 0.0
    h = n // 2
    m1 = sum(rates[:h], 0.0) / h
    m2 = sum(rates[h:], 0.0) / (n - h)
    return abs(m2 / m1 - 1.0) if m1 > 0 else 0.0


WAIT, WINDOW, SKIPPING = range(3)


def sim_now(system: Any) -> int:
    """Simulated time with the fast-forward's skipped time added: every thread skips the same time
    together, so a workload's spans and elapsed time measured with it include the skips."""
    ff = system.fast_forward
    return int(system.engine.now + (ff.skipped_ns if ff is not None else 0))


# The additive counters of a lock class (and of each side of an rwsem's): lock_stat's totals, bounces and the
# counts its averages divide by (maxima and minima are left alone). Not ``instances``: lock objects come with
# the structures that embed them, and a functional skip makes those (a skipped page table's ptlock:
# PageTables.table_ctor_lock), so scaling the window's new instances counted them twice
LOCK_COUNTS = ("acquisitions", "contentions", "wait_ns_total", "hold_ns_total", "con_bounces",
               "acq_bounces", "_nwait", "_nhold")
_lock_counts = operator.attrgetter(*LOCK_COUNTS)
_LockSnap = tuple[tuple[int, ...], dict[str, int], tuple[int, ...] | None, tuple[int, ...] | None]


def _lock_tuple(s: LockStat) -> _LockSnap:
    return (_lock_counts(s), dict(s.extra), None if s.read is None else _lock_counts(s.read),
            None if s.write is None else _lock_counts(s.write))


def _scale_counts(s: LockStat, v0: tuple[int, ...] | None, r: float) -> None:
    """``s``'s additive counters += ``r`` x their change since ``v0`` (None: since zero)."""
    for f, x0, x in zip(LOCK_COUNTS, v0 or (0,) * len(LOCK_COUNTS), _lock_counts(s), strict=True):
        if x != x0:
            setattr(s, f, x + _scaled(x - x0, r))


# The additive counters of a lock's cache line (locks.base.CacheLine: what its writes met)
LINE_COUNTS = ("writes", "wlocal", "qwrites", "qwait", "storms", "sspin", "transfers", "sstall")
_line_counts = operator.attrgetter(*LINE_COUNTS)


class _Snapshot:
    """Every additive counter of a run at one moment."""

    __slots__ = ("perf", "vm", "prof_ns", "prof_insns", "locks", "lines_gen")

    def __init__(self, c: Counters, locks: dict[str, LockStat]) -> None:
        self.perf = [list(p) for p in c.perf]
        self.vm = [list(v) for v in c.vm]
        self.prof_ns = [dict(d) for d in c.prof_ns]
        self.prof_insns = [dict(d) for d in c.prof_insns]
        self.locks = {k: _lock_tuple(s) for k, s in locks.items()}
        # the lock classes' lines: each saves its counters at its first write from now on (CacheLine.write)
        self.lines_gen = window_open()


def _scaled(delta: int, r: float) -> int:
    return round(delta * r)


def extrapolate(
    c: Counters, locks: dict[str, LockStat], a: _Snapshot, r: float, r_cpu: dict[int, float] | None = None,
    exact_vm: frozenset[int] = frozenset(),
) -> None:
    """Add ``r x`` (now - ``a``) to every additive counter (maxima are left alone);
    a CPU in ``r_cpu`` has its own factor (its thread's skipped / window operations).
    vm counters in ``exact_vm`` are left alone: the workload's functional skip counts them
    exactly (thp_memscale's pgalloc, so that allocated + free pages stay the managed pages)."""
    r0 = r
    for cpu in range(c.ncpus):
        r = r_cpu.get(cpu, r0) if r_cpu else r0
        p, p0 = c.perf[cpu], a.perf[cpu]
        for j in range(len(p)):
            if p[j] != p0[j] and j != TASK_CLOCK:
                p[j] += _scaled(p[j] - p0[j], r)
        v, v0 = c.vm[cpu], a.vm[cpu]
        for j in range(len(v)):
            if v[j] != v0[j] and j not in exact_vm:
                v[j] += _scaled(v[j] - v0[j], r)
        added_ns = 0
        for d, d0 in ((c.prof_ns[cpu], a.prof_ns[cpu]), (c.prof_insns[cpu], a.prof_insns[cpu])):
            for f in sorted(d):
                dv = d[f] - d0.get(f, 0)
                if dv:
                    inc = _scaled(dv, r)
                    d[f] += inc
                    if d is c.prof_ns[cpu]:
                        added_ns += inc
        # the task clock is the profile summed (Counters.busy charges both): add what the profile
        # got, rounded entry by entry, so the two stay equal to the nanosecond
        p[TASK_CLOCK] += added_ns
    r = r0
    for name in sorted(locks):
        s = locks[name]
        counts, extra, rd, wr = a.locks.get(name, (None, {}, None, None))
        _scale_counts(s, counts, r)
        for side, side0 in ((s.read, rd), (s.write, wr)):
            if side is not None:
                _scale_counts(side, side0, r)
        for k in sorted(s.extra):
            s.extra[k] += _scaled(s.extra[k] - extra.get(k, 0), r)
    # the lock classes' cache lines written in the window, like lock_stat (a line created during the window
    # starts from zero: its counters were all zero at its first write); a line no lock class has is left alone
    moved = window_lines(a.lines_gen)
    classes = set(distinct_lines(locks)) if moved else set()
    for ln in moved:
        if ln not in classes:
            continue
        l0 = ln._v0
        now = _line_counts(ln)
        if now == l0:
            continue
        for f, x0, x in zip(LINE_COUNTS, l0, now, strict=True):
            if x != x0:
                setattr(ln, f, x + ((x - x0) * r if f == "sstall" else _scaled(x - x0, r)))


class FastForward:
    """The sampling controller of one run (see the module docstring).

    A thread calls :meth:`register` once with its steady region's size in
    operations, then :meth:`poll` before each operation of the region with
    that operation's index; a non-zero return is the number of operations it
    must skip at once (apply the state change, move on). :meth:`leave` when
    it is past its region, :meth:`exit` when it ends.

    A skip needs the whole population in steady state: all ``nthreads``
    registered and every thread that has not exited inside its region, past
    its first ``warm`` and before its last ``tail`` operations. A window
    during which any thread leaves that state is discarded.
    """

    def __init__(
        self,
        now: Callable[[], int],
        counters: Counters,
        locks: dict[str, LockStat],
        nthreads: int,
        *,
        window_ops: int,
        skip_ratio: float,
        warm: int,
        tail: int,
        min_thread_ops: int = 4,
        exact_vm: frozenset[int] = frozenset(),
        same_ops: bool = False,
    ) -> None:
        self._now = now
        window_close()  # a window another run left open lists nothing more
        self.same_ops = same_ops
        self.exact_vm = exact_vm
        self.counters = counters
        self.locks = locks
        self.n = nthreads
        self.window_ops = window_ops
        self.skip_ratio = skip_ratio
        self.warm = warm
        self.tail = tail
        self.min_thread_ops = min_thread_ops
        self.lo: dict[int, int] = {}
        self.hi: dict[int, int] = {}
        self.pos: dict[int, int] = {}
        self.cpu: dict[int, int] = {}
        self.ratio: dict[int, float] = {}  # a region's own skip ratio (register), else skip_ratio
        self.steady: set[int] = set()  # threads inside [warm, hi - tail] of their region
        self.gone: set[int] = set()
        self.blocking = nthreads  # threads neither steady nor gone
        self.state = WAIT
        self.sum_pos = 0
        self.pending: dict[int, int] = {}
        # window bookkeeping
        self._t0 = 0
        self._snap: _Snapshot | None = None
        self._pos0: dict[int, int] = {}
        self._sum0 = 0
        self._batch_marks: list[int] = []
        # results
        self.skipped_ns = 0
        self.skipped_ops = 0
        self.detailed_window_ops = 0
        self.cycles = 0
        self.windows_discarded = 0
        self.windows_unsteady = 0  # windows that did not agree with the one before (step 3)
        self._ref: tuple[float, float] | None = None  # (ns per operation, its relative 95% half-width)
        # threads whose current region changes no state when it is skipped (register's ``stateless``)
        self.stateless: set[int] = set()
        # per skip: (engine time, its group: the skip ratio, the window's ns per operation, the skipped ns, the
        # skip's own 95% half-width in ns, whether a region in it changes no state: the group's other half)
        self._skips: list[tuple[int, float, float, int, float, bool]] = []

    def register(self, i: int, nops: int, cpu: int, start: int = 0, skip_ratio: float | None = None,
                 stateless: bool = False) -> None:
        """Thread ``i`` (alone on ``cpu``) has a steady region of ``nops`` operations, numbered from
        ``start``. A thread with several regions (will-it-scale's rounds) registers each one after
        :meth:`leave` of the last, with ``start`` past the last one's end: positions only grow.
        ``skip_ratio``: this region's own (a skip uses the smallest of the steady threads' regions).
        ``stateless``: a skipped operation of this region changes no state (thp_memscale's node check), so the
        process does not age through its skips and the CI adds its windows' trend (:func:`trend_rel`)."""
        old = self.pos.get(i, 0)
        assert start >= old, "a thread's positions only grow"
        self.lo[i] = start
        self.hi[i] = start + nops
        self.pos[i] = start
        self.sum_pos += start - old
        self.cpu[i] = cpu
        self.ratio[i] = self.skip_ratio if skip_ratio is None else skip_ratio
        if stateless:
            self.stateless.add(i)
        else:
            self.stateless.discard(i)

    def _unsteady(self, i: int) -> None:
        if i in self.steady:
            self.steady.discard(i)
            self.blocking += 1
            if self.state == WINDOW:
                self.state = WAIT
                self.windows_discarded += 1

    def leave(self, i: int) -> None:
        """Thread ``i`` is past its steady region."""
        self._unsteady(i)

    def exit(self, i: int) -> None:
        """Thread ``i`` has ended: it no longer takes part."""
        self._unsteady(i)
        if i not in self.gone:
            self.gone.add(i)
            self.blocking -= 1

    def poll(self, i: int, pos: int) -> int:
        """Thread ``i`` is about to do operation ``pos`` of its region."""
        old = self.pos[i]
        self.pos[i] = pos
        self.sum_pos += pos - old
        if self.state == SKIPPING:
            n = self.pending.pop(i, 0)
            if n:
                self.pos[i] = pos + n
                self.sum_pos += n
            if not self.pending:
                self.state = WAIT
            return n
        if self.lo[i] + self.warm <= pos <= self.hi[i] - self.tail:
            if i not in self.steady:
                self.steady.add(i)
                self.blocking -= 1
        else:
            self._unsteady(i)
        st = self.state
        if st == WAIT:
            if self.blocking == 0 and len(self.hi) == self.n:
                self._start_window()
            return 0
        if st == WINDOW:
            done = self.sum_pos - self._sum0
            marks = self._batch_marks
            if len(marks) < BATCHES and done * BATCHES >= self.window_ops * len(marks):
                marks.append(self._now())
            if done >= self.window_ops and len(marks) == BATCHES:
                if min(self.pos[j] - self._pos0[j] for j in self.steady) >= self.min_thread_ops:
                    self._end_window()
        return 0

    def _start_window(self) -> None:
        self.state = WINDOW
        self._t0 = self._now()
        self._snap = _Snapshot(self.counters, self.locks)
        self._pos0 = {j: self.pos[j] for j in self.steady}
        self._sum0 = self.sum_pos
        self._batch_marks = [self._t0]

    def _end_window(self) -> None:
        t1 = self._now()
        w = t1 - self._t0
        marks = self._batch_marks + [t1]
        d = {j: self.pos[j] - self._pos0[j] for j in sorted(self.steady)}
        total = sum(d.values())
        self.state = WAIT
        if w <= 0 or total <= 0:
            return
        # batch means of the time per operation (equal operation counts per batch, roughly)
        durs = [b - a for a, b in itertools.pairwise(marks)]
        mean = sum(durs, 0.0) / len(durs)
        var = sum(((x - mean) ** 2 for x in durs), 0.0) / (len(durs) - 1)
        h = T975_7 * math.sqrt(var / len(durs)) / mean if mean > 0 else 0.0
        per_op, ref = w / total, self._ref
        self._ref = (per_op, h)
        if ref is None or (drift := abs(per_op / ref[0] - 1.0)) > max(STEADY_TOL, math.hypot(h, ref[1])):
            self.windows_unsteady += 1
            self._start_window()  # this window is the reference; the next one starts now
            return
        # the skip's relative uncertainty: the window's own batch noise, or the drift between the two
        # windows, whichever is larger (a deterministic steady state has almost no batch noise)
        h = max(h, drift)
        ratio = min(self.ratio.get(j, self.skip_ratio) for j in d)
        f = ratio * w
        # same_ops: every thread at the window's mean rate, so that their relative positions are kept
        per = total / len(d)
        for j, dj in d.items():
            room = self.hi[j] - self.tail - self.pos[j]
            f = min(f, room * w / (per if self.same_ops else dj))
        if f < w:  # not worth a skip (a thread is near its tail): go on in detail
            return
        n = {j: round((per if self.same_ops else dj) * f / w) for j, dj in d.items()}
        skipped = sum(n.values())
        r = skipped / total
        assert self._snap is not None
        # per CPU, its thread's own factor: its skipped operations are counted exactly
        extrapolate(self.counters, self.locks, self._snap, r, {self.cpu[j]: n[j] / d[j] for j in d if d[j]},
                    self.exact_vm)
        fns = round(f)
        self.skipped_ns += fns
        self.skipped_ops += skipped
        self.detailed_window_ops += total
        self.cycles += 1
        self._skips.append((t1, ratio, per_op, fns, h * fns, any(j in self.stateless for j in d)))
        self.pending = {j: k for j, k in n.items() if k}
        if self.pending:
            self.state = SKIPPING

    @property
    def ci95_ns(self) -> float:
        """95% half-width of the elapsed time's sampling error, in ns (the module docstring's **CI**)."""
        return self.ci95_ns_since(-1)

    def ci95_ns_since(self, t: int) -> float:
        """The same half-width over the skips made at engine time ``t`` or later (a counted stretch)."""
        groups: dict[tuple[float, bool], list[tuple[float, int, float]]] = {}
        for at, g, per_op, fns, hw, still in self._skips:
            if at >= t:
                groups.setdefault((g, still), []).append((per_op, fns, hw))
        var = 0.0
        for key in sorted(groups):
            sk = groups[key]
            quad = math.sqrt(sum((hw * hw for _, _, hw in sk), 0.0))
            if len(sk) < LRD_MIN:
                # too few windows to see their correlation: fully correlated, each at least the drift the steady
                # test accepts (a window whose batches are all alike has h = 0)
                half = sum((max(hw, STEADY_TOL * f) for _, f, hw in sk), 0.0)
            else:
                rates = [p for p, _, _ in sk]
                rel = t975(len(sk) - 1) * lrd_rel_se(rates)
                if key[1]:  # the process stays at its windows' age through these skips (session 37)
                    rel += trend_rel(rates)
                half = max(quad, rel * sum((f for _, f, _ in sk), 0.0))
            var += half * half
        return math.sqrt(var)

    def report(self) -> dict[str, Any]:
        return {
            "ff_cycles": self.cycles,
            "ff_skipped_ops": self.skipped_ops,
            "ff_window_ops": self.detailed_window_ops,
            "ff_windows_discarded": self.windows_discarded,
            "ff_windows_unsteady": self.windows_unsteady,
            "ff_skipped_seconds": self.skipped_ns / 1e9,
            "elapsed_ci95_seconds": round(self.ci95_ns / 1e9, 9),
        }
