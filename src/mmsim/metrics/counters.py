"""Per-CPU counters: perf events, vmstat events and a per-function cycle profile.

Hot paths index plain Python lists (``c.perf[cpu][PF]``) — an order of
magnitude cheaper than attribute or Enum lookups — and everything is summed
only at report time, like the kernel's per-CPU ``vm_event_states``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from mmsim.metrics.events import N_PERF, N_VM, PerfEvent, VmEvent

# Plain int aliases for hot paths (IntEnum attribute access is slow).
TASK_CLOCK = int(PerfEvent.TASK_CLOCK)
CONTEXT_SWITCHES = int(PerfEvent.CONTEXT_SWITCHES)
CPU_MIGRATIONS = int(PerfEvent.CPU_MIGRATIONS)
PAGE_FAULTS = int(PerfEvent.PAGE_FAULTS)
INSTRUCTIONS = int(PerfEvent.INSTRUCTIONS)
CACHE_REFERENCES = int(PerfEvent.CACHE_REFERENCES)
CACHE_MISSES = int(PerfEvent.CACHE_MISSES)


@dataclass
class ProfileEntry:
    ns: int = 0
    insns: int = 0


class Counters:
    """All counters of one run, one slot per CPU.

    ``busy(cpu, func, ns, insns)`` is the single place CPU time is accounted:
    it adds to the CPU's task-clock, its profile line for ``func`` and its
    instruction count. ``cycles`` are derived from ns and the clock at report
    time so the profile stays in integer ns.
    """

    def __init__(self, ncpus: int) -> None:
        self.ncpus = ncpus
        self.perf: list[list[int]] = [[0] * N_PERF for _ in range(ncpus)]
        self.vm: list[list[int]] = [[0] * N_VM for _ in range(ncpus)]
        self.prof_ns: list[dict[str, int]] = [{} for _ in range(ncpus)]
        self.prof_insns: list[dict[str, int]] = [{} for _ in range(ncpus)]

    def busy(self, cpu: int, func: str, ns: int, insns: int = 0) -> int:
        """Charge ``ns`` of CPU time in ``func`` to ``cpu``; returns ``ns``."""
        # The hot path of every model (~20 calls per simulated page fault): the profile line exists
        # after its first charge, so add to it in place (no dict.get call); the values are the same.
        p = self.perf[cpu]
        p[TASK_CLOCK] += ns
        d = self.prof_ns[cpu]
        try:
            d[func] += ns
        except KeyError:
            d[func] = 0 + ns
        if insns:
            p[INSTRUCTIONS] += insns
            d = self.prof_insns[cpu]
            try:
                d[func] += insns
            except KeyError:
                d[func] = 0 + insns
        return ns

    # -- report-time sums ---------------------------------------------------
    def perf_total(self) -> dict[PerfEvent, int]:
        return {e: sum(p[e] for p in self.perf) for e in PerfEvent}

    def vm_total(self) -> dict[VmEvent, int]:
        return {e: sum(v[e] for v in self.vm) for e in VmEvent}

    def profile_total(self) -> dict[str, ProfileEntry]:
        out: dict[str, ProfileEntry] = {}
        for cpu in range(self.ncpus):
            for f, ns in self.prof_ns[cpu].items():
                out.setdefault(f, ProfileEntry()).ns += ns
            for f, n in self.prof_insns[cpu].items():
                out.setdefault(f, ProfileEntry()).insns += n
        return out


@dataclass
class LockStat:
    """Counters of one lock class, as in /proc/lock_stat (CONFIG_LOCK_STAT,
    kernel/locking/lockdep.c ``lock_contended``/``lock_acquired``/``lock_release``).

    ``acquisitions``/``hold_ns_*`` count every acquisition; ``contentions`` and
    ``wait_ns_*`` the contended ones (lockdep records a wait time only for an
    acquisition that contended). ``con_bounces``/``acq_bounces``: contentions /
    acquisitions on a CPU other than the lock's last acquirer (``lock->cpu``).
    A rwsem also records each side in ``read`` / ``write`` (``/proc/lock_stat``'s
    ``-R`` and ``-W`` lines); the top level then holds both sides together.
    """

    name: str
    kind: str
    acquisitions: int = 0
    contentions: int = 0
    wait_ns_total: int = 0
    wait_ns_max: int = 0
    hold_ns_total: int = 0
    hold_ns_max: int = 0
    instances: int = 1
    extra: dict[str, int] = field(default_factory=dict)
    wait_ns_min: int = 0
    hold_ns_min: int = 0
    con_bounces: int = 0
    acq_bounces: int = 0
    read: LockStat | None = None  # rwsem read side (its own counts)
    write: LockStat | None = None  # rwsem write side
    _nwait: int = 0
    _nhold: int = 0
    # The cache lines of the class's instances (locks.base.CacheLine; a line may be shared with other
    # classes, e.g. mm_struct's): their write counters are reported by line_dict(), not copied.
    lines: list[Any] = field(default_factory=list, repr=False, compare=False)

    # -- recording (hot paths: plain attribute arithmetic) --------------------
    def note_acquire(self, cpu: int, last_cpu: int) -> None:
        self.acquisitions += 1
        if last_cpu >= 0 and cpu != last_cpu:
            self.acq_bounces += 1

    def note_contention(self, cpu: int, last_cpu: int) -> None:
        self.contentions += 1
        if last_cpu >= 0 and cpu != last_cpu:
            self.con_bounces += 1

    def note_wait(self, ns: int) -> None:
        self.wait_ns_total += ns
        if ns > self.wait_ns_max:
            self.wait_ns_max = ns
        if self._nwait == 0 or ns < self.wait_ns_min:
            self.wait_ns_min = ns
        self._nwait += 1

    def note_hold(self, ns: int) -> None:
        self.hold_ns_total += ns
        if ns > self.hold_ns_max:
            self.hold_ns_max = ns
        if self._nhold == 0 or ns < self.hold_ns_min:
            self.hold_ns_min = ns
        self._nhold += 1

    def merge(self, other: LockStat) -> None:
        if other._nwait and (self._nwait == 0 or other.wait_ns_min < self.wait_ns_min):
            self.wait_ns_min = other.wait_ns_min
        if other._nhold and (self._nhold == 0 or other.hold_ns_min < self.hold_ns_min):
            self.hold_ns_min = other.hold_ns_min
        self._nwait += other._nwait
        self._nhold += other._nhold
        self.acquisitions += other.acquisitions
        self.contentions += other.contentions
        self.con_bounces += other.con_bounces
        self.acq_bounces += other.acq_bounces
        self.wait_ns_total += other.wait_ns_total
        self.wait_ns_max = max(self.wait_ns_max, other.wait_ns_max)
        self.hold_ns_total += other.hold_ns_total
        self.hold_ns_max = max(self.hold_ns_max, other.hold_ns_max)
        self.instances += other.instances
        for k, v in other.extra.items():
            self.extra[k] = self.extra.get(k, 0) + v
        for side in ("read", "write"):
            o = getattr(other, side)
            if o is not None:
                if getattr(self, side) is None:
                    setattr(self, side, LockStat(self.name, self.kind, instances=0))
                getattr(self, side).merge(o)

    def columns(self) -> dict[str, int | float]:
        """/proc/lock_stat's columns of this side (times in ns, avg as float)."""
        return {
            "con-bounces": self.con_bounces,
            "contentions": self.contentions,
            "waittime-min": self.wait_ns_min,
            "waittime-max": self.wait_ns_max,
            "waittime-total": self.wait_ns_total,
            "waittime-avg": self.wait_ns_total / self._nwait if self._nwait else 0.0,
            "acq-bounces": self.acq_bounces,
            "acquisitions": self.acquisitions,
            "holdtime-min": self.hold_ns_min,
            "holdtime-max": self.hold_ns_max,
            "holdtime-total": self.hold_ns_total,
            "holdtime-avg": self.hold_ns_total / self._nhold if self._nhold else 0.0,
        }

    def line_dict(self) -> dict[str, float]:
        """What the writes to the class's cache lines met, summed over its instances' distinct lines (a line
        it shares with other classes counts their writes too): ``writes`` in all; ``window_local`` completed
        in the writer's own window; ``queued`` waited for the line behind earlier writes and their re-read
        storms, ``queue_wait_ns_avg`` on average; ``storms`` set off a re-read storm, with
        ``spinners_per_storm`` spinners on average, each of whom then waited ``reread_stall_ns_avg`` for its
        re-read (docs/locks.md, session 27); ``transfers`` took the line from another cache. In fast mode
        extrapolated with the lock statistics. {} if nothing wrote them."""
        w = wl = q = qw = st = sp = tr = 0
        ss = 0.0
        for ln in distinct_lines({self.name: self}):
            w += ln.writes
            wl += ln.wlocal
            q += ln.qwrites
            qw += ln.qwait
            st += ln.storms
            sp += ln.sspin
            ss += ln.sstall
            tr += ln.transfers
        if not w + wl:
            return {}
        return {"writes": w + wl, "window_local": wl, "queued": q,
                "queue_wait_ns_avg": round(qw / q, 1) if q else 0.0, "storms": st,
                "spinners_per_storm": round(sp / st, 2) if st else 0.0,
                "reread_stall_ns_avg": round(ss / sp, 1) if sp else 0.0, "transfers": tr}

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "kind": self.kind,
            "instances": self.instances,
            "acquisitions": self.acquisitions,
            "contentions": self.contentions,
            "wait_ns_total": self.wait_ns_total,
            "wait_ns_max": self.wait_ns_max,
            "hold_ns_total": self.hold_ns_total,
            "hold_ns_max": self.hold_ns_max,
            **self.extra,
        }
        line = self.line_dict()
        if line:
            d["line"] = line
        if self.read is None or self.write is None:
            d["lock_stat"] = self.columns()
        else:
            d["lock_stat"] = {"W": self.write.columns(), "R": self.read.columns()}
        return d


def distinct_lines(locks: dict[str, LockStat]) -> list[Any]:
    """The distinct cache lines of the lock classes (a line may carry several classes), in a fixed order."""
    # CacheLine keeps object identity for hashing: dict.fromkeys drops repeats and keeps the first order
    return list(dict.fromkeys(itertools.chain.from_iterable(locks[name].lines for name in sorted(locks))))


def line_spin_misses(locks: dict[str, LockStat]) -> tuple[int, float]:
    """(misses, stall ns) of the spinners on the lock classes' cache lines over the run: each write that set
    off a re-read storm cost each spinner one miss and a stall until its re-read (``CacheLine.sstall``)."""
    lines = distinct_lines(locks)
    return sum(ln.sspin for ln in lines), sum(ln.sstall for ln in lines)
