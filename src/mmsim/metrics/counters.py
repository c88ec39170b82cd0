"""Per-CPU counters: perf events, vmstat events and a per-function cycle profile.

Hot paths index plain Python lists (``c.perf[cpu][PF]``) — an order of
magnitude cheaper than attribute or Enum lookups — and everything is summed
only at report time, like the kernel's per-CPU ``vm_event_states``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
        p = self.perf[cpu]
        p[TASK_CLOCK] += ns
        d = self.prof_ns[cpu]
        d[func] = d.get(func, 0) + ns
        if insns:
            p[INSTRUCTIONS] += insns
            di = self.prof_insns[cpu]
            di[func] = di.get(func, 0) + insns
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
    """Counters of one lock class, as in /proc/lock_stat (CONFIG_LOCK_STAT)."""

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

    def merge(self, other: LockStat) -> None:
        self.acquisitions += other.acquisitions
        self.contentions += other.contentions
        self.wait_ns_total += other.wait_ns_total
        self.wait_ns_max = max(self.wait_ns_max, other.wait_ns_max)
        self.hold_ns_total += other.hold_ns_total
        self.hold_ns_max = max(self.hold_ns_max, other.hold_ns_max)
        self.instances += other.instances
        for k, v in other.extra.items():
            self.extra[k] = self.extra.get(k, 0) + v

    def to_dict(self) -> dict[str, object]:
        return {
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
