/* usemem's access loop for `mmsim native vm-scalability/anon-*` (see native/usemem.py).
 *
 * vm-scalability's usemem.c is built with `gcc -O` (its Makefile and the comment at the top of usemem.c), and
 * do_rw_once() touches one 8-byte word per iteration through do_access(), an out-of-line function with a
 * volatile pointer, re-reading the option globals every iteration (at -O without -fstrict-aliasing the
 * volatile store may alias them). This file reproduces that loop's structure -- the same globals, the same
 * tests in the same order, do_access() out of line -- so that the host runs the instruction stream usemem
 * runs, not a vectorised fill. It is compiled with -O like usemem (cbuild.compiled(..., ("-O", ...))) and
 * loaded with ctypes into the worker's task processes. -fvisibility=hidden keeps the globals and do_access()
 * local to this object: addressed PC-relative and called directly, as in usemem's own (non-PIC) executable,
 * and never interposed by a like-named symbol of the Python process (a global "step" was).
 *
 * Differences from usemem, none inside the per-word loop: runtime_exceeded() compares CLOCK_MONOTONIC with
 * a deadline the caller sets (usemem: gettimeofday seconds since start_time > runtime_secs); the random
 * index uses lrand48_r as usemem's os_random_long does, seeded by the caller. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

unsigned long step = sizeof(unsigned long); /* usemem -j (default: one word) */
int opt_randomise;                          /* usemem -R */
unsigned long opt_delay;                    /* usemem -e (never set by the vm-scalability cases run here) */
double deadline_monotonic;                  /* 0: no runtime limit */
static struct drand48_data rand_data;

EXPORT void usemem_set(int randomise, long seed, double deadline) {
    opt_randomise = randomise;
    srand48_r(seed, &rand_data);
    deadline_monotonic = deadline;
}

static int runtime_exceeded(void) {
    struct timespec t;
    if (deadline_monotonic == 0) return 0;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9 > deadline_monotonic;
}

static long os_random_long(unsigned long max) {
    long val;
    lrand48_r(&rand_data, &val);
    return (unsigned long)((double)max * val / (RAND_MAX + 1.0));
}

unsigned long do_access(unsigned long *p, unsigned long idx, int read) {
    volatile unsigned long *vp = p;
    if (read) return vp[idx];
    vp[idx] = idx;
    return 0;
}

/* usemem.c delay(): spin on the clock for opt_delay ns, touching the word (never called here: opt_delay = 0). */
static void delay(unsigned long ns, unsigned long *p, unsigned long idx, int read) {
    struct timespec a, b;
    clock_gettime(CLOCK_REALTIME, &a);
    do {
        do_access(p, idx, read);
        clock_gettime(CLOCK_REALTIME, &b);
    } while ((unsigned long)((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec)) < ns);
}

#define PFN_OF(addr) ((addr) >> 12)

/* usemem.c do_rw_once (the per-word loop, test for test): bytes read or written. */
__attribute__((noinline)) static unsigned long do_rw_once(unsigned long *p, unsigned long bytes, int read, int *rep) {
    unsigned long i, m = bytes / sizeof(*p), rw_bytes = 0, prev_addr = 0, addr;
    for (i = 0; i < m; i += step / sizeof(*p)) {
        unsigned long idx = i;
        if (opt_randomise) idx = os_random_long(m - 1);
        if (rep && *rep && !read && !opt_randomise && p[idx] != idx) {
            fprintf(stderr, "Data wrong at offset 0x%lx\n", idx * sizeof(*p));
            exit(1);
        }
        do_access(p, idx, read);
        rw_bytes += sizeof(*p);
        addr = (unsigned long)(p + idx);
        if (opt_delay && PFN_OF(addr) != PFN_OF(prev_addr)) {
            delay(opt_delay, p, idx, read);
            prev_addr = addr;
        }
        if (!(i & 0xffff) && runtime_exceeded()) break;
    }
    return rw_bytes;
}

/* usemem.c do_unit's call for its first (and, without -r, only) repetition: do_rw_once(.., &rep) with rep = 0. */
EXPORT unsigned long usemem_rw_once(unsigned long *p, unsigned long bytes, int read) {
    int rep = 0;
    return do_rw_once(p, bytes, read, &rep);
}

/* Timing (this thread's CPU time) of the same loop over a small buffer that stays in L1d: ns per word (calibrate). */
EXPORT double usemem_cached_ns_per_word(unsigned long *p, unsigned long bytes, int read, long reps) {
    struct timespec a, b;
    double saved = deadline_monotonic;
    deadline_monotonic = 0;
    usemem_rw_once(p, bytes, read); /* fault in, warm */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (long r = 0; r < reps; r++) usemem_rw_once(p, bytes, read);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    deadline_monotonic = saved;
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ((double)reps * (bytes / sizeof(*p)));
}
