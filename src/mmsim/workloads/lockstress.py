"""lockstress: N tasks hammer one lock — the smallest contended-lock model,
for tests, the engine benchmark and exploring lock implementations.

Each task, pinned to its own CPU, loops ``iterations`` times: ``think_ns``
of private work, acquire the lock, ``hold_ns`` of critical section, release.
``lock`` picks the primitive: ``spinlock`` (ticket or queued per the
kernel's ``spinlock``/``spinlock_lockstress`` policies), ``mutex``
(``mutex_osq``, ``mutex_handoff``), ``rwsem-read``, ``rwsem-write`` (the
``rwsem_*`` policies), or ``atomic`` (one atomic add on a shared line, no
critical section).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.locks.rwsem import AtomicCounter, Mutex, RwSem
from mmsim.locks.spinlock import Spinlock
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, register


class LockStress:
    name = "lockstress"
    description = "N tasks on N CPUs contend for one lock; acquisitions/s and wait per acquisition"
    params = {
        "tasks": ParamInfo(4, "number of tasks, one per CPU from CPU 0", parse_int(1), "an integer >= 1"),
        "iterations": ParamInfo(1000, "acquisitions per task", parse_int(1), "an integer >= 1"),
        "think_ns": ParamInfo(1000, "private work between acquisitions (ns)", parse_int(0), "an integer >= 0"),
        "hold_ns": ParamInfo(200, "critical section length (ns)", parse_int(0), "an integer >= 0"),
        "writers": ParamInfo(0, "with lock=rwsem-read: tasks 0..writers-1 take the write side",
                             parse_int(0), "an integer >= 0"),
        "lock": ParamInfo("spinlock", "lock primitive",
                          parse_choice("spinlock", "mutex", "rwsem-read", "rwsem-write", "atomic"),
                          "spinlock, mutex, rwsem-read, rwsem-write, atomic"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"lockstress {p['lock']} x{p['tasks']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        if p["tasks"] > system.machine.ncpus:
            raise UserError("-p tasks", p["tasks"], f"at most {system.machine.ncpus} on {system.machine.name}")
        ctx = system.locks
        kind = p["lock"]
        if kind == "spinlock":
            lock: Any = Spinlock(ctx, "lockstress", system.spin_kind_for("lockstress"))
        elif kind == "mutex":
            lock = Mutex(ctx, "lockstress", spin_on_owner=True, mpolicy=system.mutex_policy())
        elif kind == "atomic":
            lock = AtomicCounter(ctx, "lockstress")
        else:
            lock = RwSem(ctx, "lockstress", policy=system.rwsem_policy())
        for i in range(p["tasks"]):
            t = Task(i, f"lockstress/{i}", cpu=i)
            system.sched.spawn(t, self._body(system, t, lock, p))

    def _body(self, system: Any, t: Task, lock: Any, p: dict[str, Any]) -> Generator[Any, Any, None]:
        c = system.counters
        kind = p["lock"]
        think, hold, cpu = p["think_ns"], p["hold_ns"], t.cpu
        if kind == "spinlock":
            acq, rel = lock.acquire, lock.release
        elif kind == "mutex":
            acq, rel = lock.lock, lock.unlock
        elif kind == "atomic":
            acq = rel = lock.add  # unused: the loop below calls add()
        elif kind == "rwsem-read" and t.tid >= p["writers"]:
            acq, rel = lock.down_read, lock.up_read
        else:  # rwsem-write, or one of the first ``writers`` tasks of rwsem-read
            acq, rel = lock.down_write, lock.up_write
        for _ in range(p["iterations"]):
            if think:
                yield c.busy(cpu, "think", think)
            if kind == "atomic":
                yield lock.add(t, "atomic_add")
                continue
            yield acq(t)
            if hold:
                yield c.busy(cpu, "critical_section", hold)
            r = rel(t)
            if r:
                yield r

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        total = p["tasks"] * p["iterations"]
        secs = system.engine.now / 1e9
        st = system.locks.stats["lockstress"]
        return {
            "lockstress.acquisitions_per_second": total / secs if secs else 0.0,
            "lockstress.mean_wait_ns": st.wait_ns_total / total,
            "lockstress.elapsed_seconds": secs,
        }


register(LockStress())
