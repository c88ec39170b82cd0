"""--noise's interrupt sources (experiments/noise.py): ticks every 1/HZ at a per-CPU phase, device IRQs as a
Poisson process, each interrupt's time added to the busy interval it lands in and charged to the profile."""

from __future__ import annotations

from types import SimpleNamespace

from mmsim.engine.core import Engine
from mmsim.experiments import noise
from mmsim.experiments.run import RunSpec, run
from mmsim.metrics.counters import Counters

LO, HI = noise.TICK_NS


def _irqs(seed: int = 0, ncpus: int = 2) -> noise.Interrupts:
    system = SimpleNamespace(machine=SimpleNamespace(ncpus=ncpus), engine=Engine(seed), counters=Counters(ncpus))
    return noise.Interrupts(system)  # type: ignore[arg-type]


def test_ticks_land_at_the_cpus_phase_every_millisecond() -> None:
    irqs = _irqs()
    irqs.phase[0], irqs.next_irq[0] = 500_000, 10**15  # a tick at 0.5 ms, 1.5 ms, ...; no device IRQ
    assert irqs.period == 1_000_000  # HZ = 1000
    assert irqs.extra(0, 400_000) == 0  # [0, 0.4 ms): no tick
    one = irqs.extra(0, 600_000)  # [0, 0.6 ms): the tick at 0.5 ms
    assert LO <= one <= HI
    three = irqs.extra(0, 3_000_000)  # 0.5, 1.5 and 2.5 ms
    assert 3 * LO <= three <= 3 * HI
    many = irqs.extra(0, 40_000_000)  # 40 ticks: their sum by the normal approximation
    assert 40 * LO <= many <= 40 * HI
    assert irqs.counters.prof_ns[0] == {noise.TICK_SYMBOL: one + three + many}
    assert irqs.counters.perf[0][0] == one + three + many  # task-clock includes interrupt time, as perf's does
    assert irqs.counters.prof_ns[1] == {}


def test_device_irq_is_counted_once_and_the_next_one_drawn() -> None:
    irqs = _irqs()
    irqs.phase[0], irqs.next_irq[0] = 999_999, 100
    t = irqs.extra(0, 200)
    assert LO <= t <= HI and irqs.next_irq[0] > 200
    assert irqs.counters.prof_ns[0] == {noise.IRQ_SYMBOL: t}


def test_phases_are_per_cpu_and_per_seed() -> None:
    a, b, c = _irqs(0, 8), _irqs(0, 8), _irqs(1, 8)
    assert a.phase == b.phase and a.phase != c.phase and len(set(a.phase)) == 8
    assert all(0 <= p < a.period for p in a.phase)


def test_a_noisy_run_keeps_its_invariants_and_repeats() -> None:
    spec = RunSpec("thp_memscale", "tiny", "v3.12", params={"threads": "4", "bytes": "8m"}, noise=True)
    r, again = run(spec), run(spec)
    assert r.to_dict() | {"sim": {}} == again.to_dict() | {"sim": {}}
    prof = {p["symbol"]: p for p in r.profile}
    assert noise.TICK_SYMBOL in prof and r.noise == "start-skew,timer-tick,device-irq"
    other = run(RunSpec(**{**spec.__dict__, "seed": 1}))
    assert other.metrics != r.metrics
