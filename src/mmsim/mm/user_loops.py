"""Cost of the benchmarks' user-space access loops when the data is cached.

Each loop is ``(cycles, instructions)`` per 8-byte word, the ``loop`` argument of
:func:`mmsim.mm.memory.user_access`: the time a word costs when its line is in the
cache. Misses are charged on top by the memory model, never folded in here.

usemem (vm-scalability) is built with ``gcc -O``. Its ``do_rw_once`` calls the
out-of-line ``do_access`` once per word and re-reads the option globals
(``opt_randomise``, ``*rep``, ``opt_delay``, ``step``) every iteration. Counted
from the ``-O`` object code of native/usemem.c, which keeps that loop test for
test (gcc 12.2, x86-64), one iteration is 29 instructions for a store and 28
for a load, with 3 taken branches (call, ret, the ``opt_delay`` test).

The loop is front-end bound, not load/store bound: a cached word costs its fused uops over the
core's issue width (``CostModel.issue_width``). Counted for Intel's fusion rules (cmp/test + jcc fuse
unless the cmp has both a memory operand and an immediate; call, and the read-modify-write ``addq``
to the stack, are 2 each), one store iteration is 26 fused uops, so 6.5 cycles on a 4-wide core
(Haswell to Cascade Lake), 5.2 on Ice Lake (5), 13 on Knights Mill (2). An x86 core retires at most
one or two taken branches per cycle, so the 3 taken branches mean at least 1.5-3 cycles anywhere.

Checked natively on the calibration host with :func:`mmsim.native.usemem.cached_ns_per_word`: the
same loop over 16 KiB that stay in L1d, minimum of 15 samples of this thread's CPU time. On the
2-vCPU AMD EPYC VM at 2.596 GHz (2026-12-01; 48 KiB L1d and 1 MiB L2 per core, i.e. Zen 5, which
dispatches 8 macro-ops per cycle) that is 1.255 ns per word for stores and 1.266 ns for loads,
3.3 cycles, against 26 / 8 = 3.25. ``mmsim calibrate`` records the host's effective width as
26 / measured cycles. The ``--random`` loop (an ``lrand48_r`` draw and a floating-point scale per
word) measured 4.24 ns, i.e. 11.0 cycles. It is bound by latency more than by width, so it is kept
as measured cycles (plausible 11-25 on the presets).

Measured on memory that is not in L1d (session 9, :mod:`mmsim.native.userloop`: the same pass on fresh
memory with every word and with one word per 4 KiB page, thread CPU time, min of 5): per word 1.43 ns after a
4 KiB write fault, 1.32 after a zero-page read fault, 1.37 in a THP whose clear ended up to 2 MiB of stores
earlier, 1.41 on populated memory from DRAM (a TLB miss and a new page for the streamer every 512 words),
against 1.34-1.43 in L1d. At this loop's pace (64 bytes per 8 words, ~5 GB/s) the misses overlap with it, as
:func:`mmsim.mm.memory.user_access` charges them (max of the loop and the bandwidth share).

Until session 7 the figure was an estimate of 7 cycles and 25 instructions for every machine, and
the native side stored with numpy (about 0.2 ns per word), so neither side was usemem.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class UserLoop(NamedTuple):
    """A front-end-bound loop: ``uops`` fused uops and ``instructions`` per 8-byte word."""

    uops: float
    instructions: float


# usemem do_rw_once, sequential, store (the load path is one uop shorter): counted, see above.
USEMEM_LOOP = UserLoop(26.0, 29.0)
USEMEM_LOOP_UOPS = USEMEM_LOOP.uops
# usemem do_rw_once --random: native measurement 11.0 cycles; instructions estimate: the loop's 29 plus
# lrand48_r (~30, glibc drand48-iter.c) and os_random_long's scale (~8): ~67, plausible 55-80.
USEMEM_RANDOM_LOOP = (11.0, 67.0)


def loop_cost(machine: Any, loop: tuple[float, float]) -> tuple[float, float]:
    """(cycles, instructions) per word on ``machine``: a :class:`UserLoop` costs its uops over the
    core's ``issue_width``; a plain (cycles, instructions) pair is taken as it is."""
    if isinstance(loop, UserLoop):
        return loop.uops / float(machine.cost.issue_width), loop.instructions
    return float(loop[0]), float(loop[1])


# -- getrusage's split of a fault taken from user mode (tick-based cputime accounting) -------------------------
# Kernel time of each page fault that getrusage reports as user time: with CONFIG_TICK_CPU_ACCOUNTING (the
# default without nohz_full; kernel/sched/cputime.c account_process_tick) a tick is charged to user or system by
# the mode it interrupts, and cputime_adjust() only scales the two to the precise total. A tick that falls in
# the exception's return path runs with interrupts disabled (irqentry_exit_to_user_mode) and is taken at the
# first user instruction after IRET, so it counts as user; so does the retried access (its TLB refill).
# Native measurement on the calibration host (AMD EPYC KVM guest, kernel 6.18, HZ=250, 2026-12-02, quiet host,
# ``python -m mmsim.native.userloop``: usemem's loop with step 4096, one word per page, i.e. the faults alone;
# thread CPU time and getrusage(RUSAGE_THREAD) over 4 passes, twice): zero-page read faults, 879-884 ns each,
# 13.9-15.8% reported as user (122-140 ns; 128 and 147 ticks); 4 KiB write faults, 1,780-1,912 ns each,
# 5.5-7.4% (106-132 ns; 28 and 35 ticks): a share per fault that does not grow with the fault's length. Pooled
# over the 10.5 Mi faults: 129 ns = 335 cycles at 2.596 GHz. Other machines: the same cycles, estimate,
# plausible 100-400 cycles (the return path with interrupts off, longer with entry mitigations). It moves time
# from system to user in the report only: the time itself is charged where it is spent (page_fault_ns).
FAULT_USER_CYCLES = 335.0


def fault_user_ns(machine: Any, faults: int | float | np.integer[Any]) -> float:
    """ns of ``faults`` user-mode page faults that getrusage reports as user time (:data:`FAULT_USER_CYCLES`)."""
    return float(faults) * FAULT_USER_CYCLES / float(machine.freq_ghz)
