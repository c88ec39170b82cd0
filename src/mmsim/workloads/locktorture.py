"""locktorture: the kernel's lock torture module, ``torture_type=spin_lock`` writers.

Read: ``kernel/locking/locktorture.c`` of v5.4 (KevinRSX/w4118-s21-linux-v5.4 at
0fe991b07745, a v5.4 tree). The published numbers this workload is checked
against (``mmsim validate --suite locks``) were taken on v5.10-rc7; the writer
loop and ``torture_spin_lock_write_delay`` read here are the ones of that
period. Each of ``nwriters`` writer kthreads loops until the test stops::

    if ((torture_random(&rand) & 0xfffff) == 0)      # 1 in 2^20: ignored
            schedule_timeout_uninterruptible(1);
    spin_lock(&torture_spinlock);
    lock_is_write_held = 1;                           # + WARN_ON_ONCE reads of both flags
    lwsp->n_lock_acquired++;
    torture_spin_lock_write_delay(&rand);             # three torture_random() calls;
                                                      # mdelay(100) w.p. 1/(n * 2000 * 100),
                                                      # udelay(2)   w.p. 1/(n * 2 * 2)
    lock_is_write_held = 0;
    spin_unlock(&torture_spinlock);
    stutter_wait("lock_torture_writer");

What the model keeps, and why:

* **Shared lines.** In v5.4 ``rand`` is ``static DEFINE_TORTURE_RANDOM(rand)``
  inside ``lock_torture_writer``: one state for every writer, and
  ``torture_random`` is a plain read-modify-write of it (``trs_count++``,
  ``trs_state = ...``). Each iteration does one RMW of that line outside the
  lock and three inside. c0e1472d8078 ("locktorture: Use private
  random-number generators", v5.7) dropped the ``static``: from v5.7 each
  writer's state is on its own kthread stack, a line no other CPU touches
  (policy ``locktorture_rand``: ``shared`` before v5.7, ``private`` from it;
  the published v5.10-rc7 curve ran with ``private``, as read in the v5.10
  tree freak07/Kirisakura_Raviole at 71e9b9de1103).
  ``lock_is_write_held`` / ``lock_is_read_held`` are adjacent static bools
  (taken to share one line): written by every holder. ``lwsa`` is a
  ``kmalloc_array`` of 16-byte ``struct lock_stress_stats``: four writers per
  64-byte line. Every access to a line last written by another CPU pays the
  transfer from that CPU (:class:`~mmsim.locks.base.CacheLine`, HITM by
  distance), queued behind the line's other users. The first three accesses
  of the critical section are independent, so their misses overlap
  (memory-level parallelism): the section waits for the slowest. The stores
  are paid before the unlock store can become visible (x86 stores become
  visible in program order), so they lengthen the hold.
* **The lock.** ``torture_spinlock`` is an ordinary spinlock: the kernel's
  implementation (qspinlock on every kernel from v4.2).
* **The section's own instructions**: the three 64-bit divisions of
  ``torture_spin_lock_write_delay`` (``SECTION_CYCLES``, at the machine's
  clock), after the ``rand`` line has arrived.
* **SMT.** Core-bound time (the divisions, ``LOOP_NS``) of a writer whose SMT
  sibling CPU also runs a writer goes at the machine's ``smt_thread_speed``,
  the rule ``mm.memory.smt_speed`` applies to core-bound code (the sibling is
  mostly PAUSE-spinning: the pessimistic end). Line transfers are not slowed.
* **udelay(2)** with probability ``1/(4n)``: drawn per iteration from the
  run's RNG, 2000 ns of busy time under the lock.
* **mdelay(100)** with probability ``p = 1/(n x 200,000)``: too rare to draw in
  a window of milliseconds, and too long to simulate (100 ms). It is folded in
  by renewal-reward: each occurrence holds the lock 100 ms while every other
  writer waits, so on average it adds ``p x 100 ms = 0.5 us / n`` of wall time
  per operation. ``locktorture.writes_per_second`` includes it;
  ``locktorture.active_writes_per_second`` is the simulated window alone.
* **Ignored**, each with its reason: ``schedule_timeout_uninterruptible`` (one
  iteration in 2^20); ``torture_preempt_schedule`` (``1/(n x 20,000)``,
  no other task to run); ``stutter_wait`` (``stutter=5``: the test runs and
  pauses in equal turns, which scales every thread count alike, so ratios
  between thread counts are unchanged); the loop's own instructions
  (``LOOP_NS``, an estimate).
* **Placement.** The writers are unbound kthreads. On an idle machine the
  scheduler's fork balancing (``find_idlest_group`` through every sched
  domain, NUMA included when the SLIT distance is within RECLAIM_DISTANCE)
  spreads new tasks over the sockets first, then over the cores of each,
  then onto SMT siblings; writer ``i`` runs on socket ``i mod S``. A
  decision from the scheduler's rules, not a measurement.
  ``shuffle_interval`` moves tasks off one rotating idle CPU; not modelled.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.locks.base import CacheLine
from mmsim.locks.spinlock import Spinlock
from mmsim.workloads.base import ParamInfo, parse_int, register

SHORT_DELAY_NS = 2000  # locktorture.c: shortdelay_us = 2 (udelay)
LONG_DELAY_NS = 100_000_000  # locktorture.c: longdelay_ms = 100 (mdelay)
LONG_ODDS = 2000 * 100  # locktorture.c: 1 in (nrealwriters_stress * 2000 * longdelay_ms)
SHORT_ODDS = 2 * 2  # locktorture.c: 1 in (nrealwriters_stress * 2 * shortdelay_us)
STATS_PER_LINE = 4  # struct lock_stress_stats = 2 longs = 16 B; 64 B lines
# estimate: the loop's own instructions (stutter_wait and torture_must_stop checks, the flag reads,
# the loop head's torture_random and its mask) at ~1 IPC: ~30 instructions; plausible 5-30 ns
LOOP_NS = 10
# The three `torture_random(trsp) % (cxt.nrealwriters_stress * ...)` of torture_spin_lock_write_delay,
# under the lock: run-time unsigned long divisors, so three 64-bit DIVs. Agner Fog, "Instruction tables"
# (Haswell): DIV r64 latency 32-96 cycles, reciprocal throughput 21-74; torture_random's dividends are
# 32-bit (the fast end). The dividends are ready within a few cycles of each other and the divider
# takes one per 21 cycles; the section retires after the last. Estimate: 32 + 2 x 21 = 74 cycles,
# plausible 74-288.
DIV_LATENCY_CYCLES = 32
DIV_THROUGHPUT_CYCLES = 21
SECTION_DIVS = 3
SECTION_CYCLES = DIV_LATENCY_CYCLES + (SECTION_DIVS - 1) * DIV_THROUGHPUT_CYCLES


def spread_cpu(machine: Any, i: int) -> int:
    """The CPU of the ``i``-th task the fork balancer places on an idle machine:
    round-robin over sockets, then cores within a socket, then SMT siblings."""
    nsock = len(machine.sockets)
    per = machine.sockets[0].cores
    k = i // nsock
    core = (i % nsock) * per + k % per
    return int((k // per) * machine.ncores + core)


def core_ns(machine: Any, cpu: int, placed: set[int]) -> tuple[int, int]:
    """(loop head, section divisions) core-bound ns of the writer on ``cpu``: at the machine's clock,
    slowed to ``smt_thread_speed`` when a writer sits on an SMT sibling of ``cpu`` (``placed``)."""
    speed: float = machine.cost.smt_thread_speed if any(s in placed for s in machine.smt_siblings(cpu)) else 1.0
    return round(LOOP_NS / speed), round(SECTION_CYCLES / machine.freq_ghz / speed)


class LockTorture:
    name = "locktorture"
    description = "locktorture spin_lock writers (kernel/locking/locktorture.c); writes per second"
    params = {
        "nwriters": ParamInfo(4, "nwriters_stress: writer kthreads, spread over sockets then cores",
                              parse_int(1), "an integer >= 1"),
        "duration_us": ParamInfo(10_000, "simulated test length in microseconds", parse_int(100, 10_000_000),
                                 "an integer from 100 to 10000000"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"modprobe locktorture torture_type=spin_lock nwriters_stress={p['nwriters']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        n = p["nwriters"]
        if n > m.ncpus:
            raise UserError("-p nwriters", n, f"at most {m.ncpus} on {m.name} (one CPU per writer)")
        ctx = system.locks
        lock = Spinlock(ctx, "torture_spinlock", system.spin_kind)
        # locktorture_rand: one static state every writer updates, or each writer's own (c0e1472d8078, v5.7):
        # a line only its writer's CPU touches, so every access hits that CPU's L1
        shared = system.policy("locktorture_rand") == "shared"
        rand = CacheLine(m, spread_cpu(m, 0))
        flags = CacheLine(m, spread_cpu(m, 0))
        stats = [CacheLine(m, spread_cpu(m, j * STATS_PER_LINE)) for j in range(-(-n // STATS_PER_LINE))]
        end = p["duration_us"] * 1000
        system.workload_state = {"ops": [0] * n, "end": end, "udelays": 0}
        # the udelay(2) coin of every iteration, at odds 1/(n * SHORT_ODDS), drawn in bulk per writer
        rng = system.engine.rng.stream("locktorture")
        placed = {spread_cpu(m, i) for i in range(n)}
        for i in range(n):
            cpu = spread_cpu(m, i)
            t = Task(i, f"lock_torture_writer/{i}", cpu=cpu)
            system.sched.spawn(t, self._writer(system, t, i, lock, rand if shared else CacheLine(m, cpu), flags,
                                               stats[i // STATS_PER_LINE],
                                               rng, n, end, core_ns(m, cpu, placed)))

    def _writer(self, system: Any, t: Task, i: int, lock: Spinlock, rand: CacheLine, flags: CacheLine,
                stats: CacheLine, rng: Any, n: int, end: int,
                core_ns: tuple[int, int]) -> Generator[Any, Any, None]:
        c = system.counters
        eng = system.engine
        cpu = t.cpu
        st = system.workload_state
        odds = n * SHORT_ODDS
        coins: Any = iter(())
        loop_ns, div_ns = core_ns
        while eng.now < end:
            # torture_random(&rand) of the loop head; the loop's own instructions
            yield c.busy(cpu, "torture_random", rand.rmw(cpu, eng.now) + loop_ns)
            yield lock.acquire(t)
            # The critical section's first accesses are independent of one another: the
            # lock_is_write_held store (and the WARN_ON_ONCE loads of that line), the load of
            # lwsp->n_lock_acquired, and the load of rand.trs_state by torture_random. After the
            # locked RMW of the acquire retires, an out-of-order core issues their misses together
            # (memory-level parallelism: a ~100-instruction section fits in Haswell's 192-entry ROB;
            # 10 L1D fill buffers; Optimization Reference Manual), so the section waits for the
            # slowest of the three transfers, not their sum. The second and third torture_random
            # calls then hit the rand line in L1, unless another writer's loop-head call took it.
            now = eng.now
            d = max(flags.rmw(cpu, now), stats.rmw(cpu, now), rand.rmw(cpu, now))
            if d:
                yield c.busy(cpu, "torture_spin_lock_write_delay", d)
            for _ in range(2):
                d = rand.rmw(cpu, eng.now)
                if d:
                    yield c.busy(cpu, "torture_random", d)
            yield c.busy(cpu, "torture_spin_lock_write_delay", div_ns)  # the three 64-bit divisions
            try:
                coin = next(coins)
            except StopIteration:
                coins = iter((rng.integers(0, odds, size=4096) == 0).tolist())
                coin = next(coins)
            if coin:
                yield c.busy(cpu, "__udelay", SHORT_DELAY_NS)
            d = flags.rmw(cpu, eng.now)  # lock_is_write_held = 0
            if d:
                yield c.busy(cpu, "torture_spin_lock_write_delay", d)
            if eng.now <= end:  # the operations completed within the test's length
                st["ops"][i] += 1
                st["udelays"] += coin
            r = lock.release(t)
            if r:
                yield r

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        ops = sum(st["ops"])
        secs = st["end"] / 1e9
        active = ops / secs
        n = p["nwriters"]
        # renewal-reward: mdelay(100) adds p x 100 ms of wall time per operation (module docstring)
        per_op_s = 1.0 / active + (LONG_DELAY_NS / (n * LONG_ODDS)) / 1e9 if active else 0.0
        return {
            "locktorture.writes_per_second": 1.0 / per_op_s if per_op_s else 0.0,
            "locktorture.active_writes_per_second": active,
            "locktorture.writes": float(ops),
            "locktorture.udelay_share": st["udelays"] / ops if ops else 0.0,
        }


register(LockTorture())
