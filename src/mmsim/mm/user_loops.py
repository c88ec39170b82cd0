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

The cycles are a native measurement on the calibration host:
:func:`mmsim.native.usemem.cached_ns_per_word`, the same loop over 16 KiB that
stay in L1d, minimum of 15 samples of this thread's CPU time. On the 2-vCPU AMD
EPYC VM at 2.596 GHz (2026-12-01) that is 1.255 ns per word for stores and
1.266 ns for loads, i.e. 3.3 cycles. The ``--random`` loop (an ``lrand48_r``
draw and a floating-point scale per word) is 4.24 ns, i.e. 11.0 cycles.

The loop is front-end bound, not load/store bound, so the figure depends on the
core. An x86 core retires at most about one taken branch per cycle, so 3 taken
branches mean at least 3 cycles anywhere. A 4-wide Intel core (Haswell to
Cascade Lake) needs about 29/4, i.e. 6-7 cycles, to issue the 29 instructions
(about 25 fused uops). mmsim has no per-machine front-end width, so the presets
use the measured figure too. Plausible range for the presets: 3.3-7 cycles.
Until session 7 the figure was an estimate of 7 cycles and 25 instructions,
and the native side stored with numpy (about 0.2 ns per word), so neither side
was usemem.
"""

from __future__ import annotations

# usemem do_rw_once, sequential, store or load: native measurement (see above); 29 instructions counted.
USEMEM_LOOP = (3.3, 29.0)
# usemem do_rw_once --random: native measurement 11.0 cycles; instructions estimate: the loop's 29 plus
# lrand48_r (~30, glibc drand48-iter.c) and os_random_long's scale (~8): ~67, plausible 55-80.
USEMEM_RANDOM_LOOP = (11.0, 67.0)
