"""Run-to-run variation from its mechanism (``--noise``), drawn from the run's seed; see docs/noise.md.

Three sources, applied around the workload's set-up (:func:`apply`), never to the outputs:

* **start skew**: each task spawned at set-up is delayed by an exponential draw with mean the
  machine's ``wakeup_ns`` (estimate: plausible mean 0.5-5 x ``wakeup_ns``, wake-up latency tails);
* **timer tick**: the local APIC timer interrupt every ``1/HZ`` on each CPU, at a per-CPU phase drawn
  uniformly over the period (``tick_sched_timer`` → ``scheduler_tick``; v6.6 kernel/time/tick-sched.c);
* **device IRQs**: other interrupts, a Poisson process per CPU.

An interrupt takes the CPU from whatever the task there was doing — user code, a page clear, a
critical section — so the task's busy interval that the interrupt lands in grows by the interrupt's
duration. This is done by wrapping the task's generator (the engine's protocol: a task yields the ns
it keeps its CPU busy, :mod:`mmsim.engine.core`); the engine and the lock models are not changed.
The time is charged to the CPU's profile (``__sysvec_apic_timer_interrupt``, ``common_interrupt``)
and so to task-clock, as perf counts it. Idle CPUs take no ticks (NOHZ idle).

Numbers (Documentation/trace/osnoise-tracer.rst, torvalds/linux): 1002-1016 IRQs per CPU per second
of runtime in its example, i.e. HZ = 1000 local-timer ticks plus 2-16 others (median 6.5); its
``irq_noise: local_timer`` samples last 1845 ns and 2848 ns. A tick here lasts uniformly 1845-2848
ns (two samples: an estimate of the range); a device IRQ as long as a tick (estimate, plausible
1-10 µs).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmsim.mm.system import System

#: The sources :func:`apply` models (``RunResult.noise``, part of the results-store key).
SOURCES = "start-skew,timer-tick,device-irq"

HZ = 1000  # osnoise example: ~1000 local-timer IRQs per CPU-second (CONFIG_HZ=1000)
TICK_NS = (1845, 2848)  # osnoise irq_noise local_timer durations (two samples): uniform between them
DEVICE_IRQ_PER_S = 6.5  # osnoise example: 1002-1016 IRQs/s per CPU minus the 1000 ticks, median
TICK_SYMBOL, IRQ_SYMBOL = "__sysvec_apic_timer_interrupt", "common_interrupt"
_BATCH = 4096  # random numbers drawn at a time


class Interrupts:
    """Per-CPU timer ticks and device IRQs: :meth:`extra` is the interrupt time inside a busy interval."""

    def __init__(self, system: System) -> None:
        ncpus = system.machine.ncpus
        self.engine = system.engine
        self.counters = system.counters
        self.rng = system.engine.rng.stream("noise:irq")
        self.period = 1_000_000_000 // HZ
        self.phase = [int(x) for x in self.rng.integers(0, self.period, ncpus)]
        self.mean_gap = 1e9 / DEVICE_IRQ_PER_S
        self.next_irq = [int(x) for x in self.rng.exponential(self.mean_gap, ncpus)]

        self._u: list[float] = []
        self._z: list[float] = []
        lo, hi = TICK_NS
        self.mean, self.sd = (lo + hi) / 2, (hi - lo) / 12 ** 0.5

    def _uniform(self) -> float:
        if not self._u:
            self._u = self.rng.random(_BATCH).tolist()
        return self._u.pop()

    def _duration(self) -> int:
        return TICK_NS[0] + int(self._uniform() * (TICK_NS[1] - TICK_NS[0]))

    def _durations(self, k: int) -> int:
        """The total of ``k`` interrupt durations: drawn one by one up to 16, else the normal
        approximation of their sum (mean k·μ, sd √k·σ), so a long busy interval costs one draw."""
        if k <= 16:
            return sum(self._duration() for _ in range(k))
        if not self._z:
            self._z = self.rng.standard_normal(_BATCH).tolist()
        z: float = self._z.pop()
        total: int = max(0, round(k * self.mean + k ** 0.5 * self.sd * z))
        return total

    def extra(self, cpu: int, ns: int) -> int:
        """Interrupt ns that land in ``[now, now + ns)`` on ``cpu``, charged to its profile."""
        t0 = self.engine.now
        t1 = t0 + ns
        ph, p = self.phase[cpu], self.period
        ticks = (t1 - ph) // p - (t0 - ph) // p
        add = 0
        if ticks > 0:
            tick_ns = self._durations(ticks)
            self.counters.busy(cpu, TICK_SYMBOL, tick_ns)
            add += tick_ns
        if t1 >= self.next_irq[cpu]:
            irq_ns = 0
            nxt = self.next_irq[cpu]
            while nxt <= t1:
                if nxt >= t0:
                    irq_ns += self._duration()
                nxt += max(1, int(self.rng.exponential(self.mean_gap)))
            self.next_irq[cpu] = nxt
            if irq_ns:
                self.counters.busy(cpu, IRQ_SYMBOL, irq_ns)
                add += irq_ns
        return add


def interrupted(task: Any, gen: Generator[Any, Any, None], irqs: Interrupts) -> Generator[Any, Any, None]:
    """``gen`` with each busy interval (an int yield) grown by the interrupts that land in it."""
    send: Any = None
    while True:
        try:
            y = gen.send(send)
        except StopIteration:
            return
        if type(y) is int and y > 0:
            y += irqs.extra(task.cpu, y)
        send = yield y


def apply(system: System) -> Callable[[], None]:
    """Install the noise sources on ``system`` before the workload's set-up; returns the function to
    call after set-up (tasks spawned later keep the interrupts, without a start skew)."""
    sched = system.sched
    spawn = sched.spawn
    rng = system.engine.rng.stream("noise:start-skew")
    mean = float(system.machine.cost.wakeup_ns)
    irqs = Interrupts(system)
    skew = [True]

    def noisy(task: Any, gen: Any, delay: int = 0) -> None:
        d = delay + round(rng.exponential(mean)) if skew[0] else delay
        spawn(task, interrupted(task, gen, irqs), d)

    sched.spawn = noisy  # type: ignore[method-assign]

    def after_setup() -> None:
        skew[0] = False

    return after_setup
