"""CPUs that run tasks: per-CPU run queues, sleeping and waking, preemption
points, context switches counted.

The model of ``kernel/sched/core.c`` is deliberately small: each CPU runs one
task at a time; a task that sleeps (``schedule()`` from a sleeping lock) gives
its CPU to the next task on the CPU's run queue; a woken task runs after
``wakeup_ns`` if its CPU is idle, or waits on the run queue. A task that
*spins* keeps its CPU (spinning is busy time). Preemption only happens at
explicit preemption points (``cond_resched()``, return to user space), where
a task with ``need_resched`` set switches out — exactly the points a
non-preemptible (CONFIG_PREEMPT_NONE / VOLUNTARY) server kernel has.

Context switches are counted for the task switched *out* (as perf's
``context-switches`` software event does, in ``perf_event_task_sched_out``).

*Time sharing* (:meth:`Scheduler.enable_time_sharing`, used by a workload that
places more tasks than CPUs) follows v6.6 ``kernel/sched/fair.c`` (EEVDF):
``sysctl_sched_base_slice`` = 0.75 ms × ``get_update_sysctl_factor()``, the
factor ``1 + ilog2(min(ncpus, 8))`` (``SCHED_TUNABLESCALING_LOG``, the
default). A task runs its slice; ``update_deadline`` then calls
``resched_curr`` when ``nr_running > 1`` and the task switches out at its next
preemption point. A task woken onto a busy CPU (``check_preempt_wakeup``) does
not preempt before the current task has used its slice: v6.6's
``RUN_TO_PARITY`` feature protects the current task's slice. Simplifications,
stated: the slice ends exactly, not at the next tick (HZ granularity); the
``RUN_TO_PARITY`` early exit at 0-lag and nice weights are not modelled (all
tasks nice 0, so ``calc_delta_fair`` is the identity); the run queue is FIFO,
which for equal-weight tasks that each run one slice is EEVDF's pick order.
Kworkers (:meth:`Scheduler.run_kernel_work`) still ask for the CPU at once.
Without time sharing nothing of this applies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from mmsim.engine.core import PARK, Engine, Task
from mmsim.metrics.counters import CONTEXT_SWITCHES, Counters

#: v6.6 kernel/sched/fair.c: ``normalized_sysctl_sched_base_slice = 750000ULL``.
BASE_SLICE_NS = 750_000


def sched_base_slice_ns(ncpus: int) -> int:
    """v6.6 ``sysctl_sched_base_slice``: 0.75 ms × (1 + ilog2(min(ncpus, 8)))
    (``get_update_sysctl_factor``, ``SCHED_TUNABLESCALING_LOG``)."""
    return BASE_SLICE_NS * (1 + (min(max(ncpus, 1), 8).bit_length() - 1))


class Cpu:
    __slots__ = ("id", "current", "runqueue", "need_resched", "idle_since", "idle_ns",
                 "exec_start", "slice_armed")

    def __init__(self, cpu_id: int) -> None:
        self.id = cpu_id
        self.current: Task | None = None
        self.runqueue: deque[Task] = deque()
        self.need_resched = False
        self.idle_since = 0
        self.idle_ns = 0
        self.exec_start = 0  # when ``current`` was switched in (time sharing)
        self.slice_armed = -1  # exec_start of the slice whose end is already queued


class Scheduler:
    """Per-CPU run queues on top of an :class:`Engine`.

    ``ctx_switch_ns`` is charged (as ``__schedule``) to the task switched in;
    ``wakeup_ns`` is the latency from ``try_to_wake_up`` until an idle CPU
    runs the woken task (IPI, idle exit); ``wake_ipi_ns`` is what sending that
    IPI costs the waker (``ttwu_queue_wakelist`` → ``smp_send_reschedule``,
    kernel/sched/core.c v6.6: an idle target gets the IPI; a busy one is only
    queued on), charged when the waker names its CPU.
    """

    def __init__(
        self,
        engine: Engine,
        ncpus: int,
        counters: Counters,
        ctx_switch_ns: int,
        wakeup_ns: int,
        wake_ipi_ns: int = 0,
    ) -> None:
        self.engine = engine
        self.cpus = [Cpu(i) for i in range(ncpus)]
        self.counters = counters
        self.ctx_switch_ns = ctx_switch_ns
        self.wakeup_ns = wakeup_ns
        self.wake_ipi_ns = wake_ipi_ns  # the waker's cost of the IPI to an idle CPU (CostModel.wake_ipi_ns)
        self.slice_ns = 0  # 0: no time sharing (every waiting task asks for the CPU at once)
        engine.on_exit(self._exit)

    def enable_time_sharing(self) -> None:
        """More tasks than CPUs: time-share each CPU in v6.6 slices (module docstring)."""
        self.slice_ns = sched_base_slice_ns(len(self.cpus))

    def _want_cpu(self, cpu: Cpu, task: Task) -> None:
        """``task`` waits on busy ``cpu``: ask the current task to reschedule, at once
        or (time sharing, a user task) when the current task's slice ends."""
        if not self.slice_ns or task.tid < 0:
            cpu.need_resched = True
            return
        end = cpu.exec_start + self.slice_ns
        if self.engine.now >= end:
            cpu.need_resched = True
        elif cpu.slice_armed != cpu.exec_start:
            cpu.slice_armed = cpu.exec_start
            self.engine.call_at(end, self._slice_end, (cpu, cpu.exec_start))

    def _slice_end(self, arg: tuple[Cpu, int]) -> None:
        """``update_deadline``: the slice is used up; ``resched_curr`` if others wait."""
        cpu, start = arg
        if cpu.exec_start == start and cpu.current is not None and cpu.runqueue:
            cpu.need_resched = True

    # -- task lifetime ----------------------------------------------------
    def spawn(self, task: Task, gen: Generator[Any, Any, None], delay: int = 0) -> None:
        """Make ``task`` runnable on ``task.cpu`` after ``delay`` ns."""
        task.gen = gen
        task.state = "sleeping"
        if delay:
            self.engine.call_at(self.engine.now + delay, self._enqueue, task)
        else:
            self._enqueue(task)

    def _enqueue(self, task: Task) -> None:
        cpu = self.cpus[task.cpu]
        task.state = "runnable"
        if task.started_at < 0:
            task.started_at = self.engine.now
        if cpu.current is None:
            cpu.idle_ns += self.engine.now - cpu.idle_since
            cpu.current = task
            cpu.exec_start = self.engine.now
            self.engine.wake(task, 0)
        else:
            cpu.runqueue.append(task)
            self._want_cpu(cpu, task)

    def _exit(self, task: Task) -> None:
        cpu = self.cpus[task.cpu]
        if cpu.current is task:
            self._switch_to_next(cpu)

    def _switch_to_next(self, cpu: Cpu) -> None:
        cpu.current = None
        cpu.need_resched = False
        if cpu.runqueue:
            nxt = cpu.runqueue.popleft()
            cpu.current = nxt
            nxt.state = "running"
            cost = self.counters.busy(cpu.id, "__schedule", self.ctx_switch_ns)
            if not self.slice_ns:
                cpu.need_resched = bool(cpu.runqueue)
            else:
                cpu.exec_start = self.engine.now + cost  # the slice starts when nxt runs
                kworker = any(t.tid < 0 for t in cpu.runqueue)
                if kworker:
                    cpu.need_resched = True
                elif cpu.runqueue:
                    self._want_cpu(cpu, cpu.runqueue[0])
            self.engine.wake(nxt, cost, nxt.data.pop("wake_value", None))
        else:
            cpu.idle_since = self.engine.now

    # -- sleeping and waking (used by sleeping locks) ------------------------
    def sleep(self, task: Task) -> Any:
        """``schedule()`` from TASK_UNINTERRUPTIBLE: give up the CPU. Yield the result."""
        cpu = self.cpus[task.cpu]
        task.state = "sleeping"
        self.counters.perf[cpu.id][CONTEXT_SWITCHES] += 1
        if cpu.current is task:
            self._switch_to_next(cpu)
        return PARK

    def wake_up(self, task: Task, value: Any = None, waker_cpu: int = -1) -> int:
        """``wake_up_process``: make a sleeping task run again on its CPU. With ``waker_cpu`` (the CPU of
        the task that wakes it), waking onto another, idle CPU charges that CPU the reschedule IPI
        (``wake_ipi_ns``, as ``smp_send_reschedule``); returns those ns, for the waker to spend."""
        cpu = self.cpus[task.cpu]
        task.state = "runnable"
        ipi = 0
        if cpu.current is None:
            cpu.idle_ns += self.engine.now - cpu.idle_since
            cpu.current = task
            task.state = "running"
            cost = self.wakeup_ns + self.counters.busy(cpu.id, "__schedule", self.ctx_switch_ns)
            cpu.exec_start = self.engine.now + cost
            self.engine.wake(task, cost, value)
            if self.wake_ipi_ns and 0 <= waker_cpu != task.cpu:
                ipi = self.counters.busy(waker_cpu, "smp_send_reschedule", self.wake_ipi_ns)
        else:
            task.data["wake_value"] = value
            cpu.runqueue.append(task)
            self._want_cpu(cpu, task)
        return ipi

    # -- preemption ----------------------------------------------------------
    def cond_resched(self, task: Task) -> Generator[Any, Any, None]:
        """A preemption point: if another task wants this CPU, switch to it.

        Use as ``if sched.cpus[t.cpu].need_resched: yield from sched.cond_resched(t)``
        so the common case costs one attribute test.
        """
        cpu = self.cpus[task.cpu]
        if not cpu.runqueue:
            cpu.need_resched = False
            return
        self.counters.perf[cpu.id][CONTEXT_SWITCHES] += 1
        task.state = "runnable"
        cpu.runqueue.append(task)
        self._switch_to_next(cpu)
        yield PARK

    def user_return(self, task: Task) -> Generator[Any, Any, None]:
        """Return to user space from a syscall or a fault: a preemption point in every preemption model
        (v3.x ``arch/x86/kernel/entry_64.S`` ``sysret_careful`` / ``retint_careful``: ``bt
        $TIF_NEED_RESCHED`` then ``schedule``; v5.8+ ``exit_to_user_mode_loop``). Use as ``if
        sched.cpus[t.cpu].need_resched: yield from sched.user_return(t)``."""
        if self.cpus[task.cpu].need_resched:
            yield from self.cond_resched(task)

    def run_kernel_work(self, cpu_id: int, func: str, ns: int) -> None:
        """Queue a short kernel-thread work item (a kworker) on ``cpu_id``.

        The kworker runs for ``ns`` in ``func``. If the CPU is idle it runs at
        once; otherwise the current task is asked to reschedule and the kworker
        runs at that task's next preemption point.
        """
        kw = Task(-1 - cpu_id, f"kworker/{cpu_id}", cpu=cpu_id)
        counters = self.counters

        def body() -> Generator[Any, Any, None]:
            yield counters.busy(cpu_id, func, ns)

        kw.gen = body()
        self._enqueue(kw)

    def periodic(self, period_ns: int, fn: Callable[[int], None], until: Callable[[], bool]) -> None:
        """Call ``fn(now)`` every ``period_ns`` while ``until()`` is False."""

        def tick(_: Any) -> None:
            if until():
                return
            fn(self.engine.now)
            self.engine.call_at(self.engine.now + period_ns, tick)

        self.engine.call_at(self.engine.now + period_ns, tick)
