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

/* The same first repetition in blocks of `blk` bytes, each timed with CLOCK_MONOTONIC around its do_rw_once
 * (session 13: validate's reference is each task's fastest block, like calibrate's fastest pass; native/
 * validate.py). *best_s gets the fastest whole block's seconds (0 if none finished); a block cut short by the
 * runtime limit ends the loop, as usemem's own loop ends, and is not timed. The tail (bytes % blk) runs untimed.
 * Bytes accessed. */
EXPORT unsigned long usemem_rw_blocks(unsigned long *p, unsigned long bytes, int read, unsigned long blk,
                                      double *best_s) {
    int rep = 0;
    unsigned long done = 0, off, n;
    double best = 0, s;
    struct timespec a, b;
    for (off = 0; off + blk <= bytes; off += blk) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        n = do_rw_once(p + off / sizeof(*p), blk, read, &rep);
        clock_gettime(CLOCK_MONOTONIC, &b);
        done += n;
        if (n < blk) {
            *best_s = best;
            return done;
        }
        s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
        if (best == 0 || s < best) best = s;
    }
    if (off < bytes) done += do_rw_once(p + off / sizeof(*p), bytes - off, read, &rep);
    *best_s = best;
    return done;
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

/* ---- Session 9: what the loop costs per word and per 4 KiB page on memory that is not in L1d ------------------
 * (native/userloop.py drives these; docs/validation.md "Level 0/3: usemem's user loop on uncached memory").
 * The loop is the same do_rw_once as above; only the calls around it differ. Cycles are TSC ticks (constant_tsc):
 * wall time, so an interrupt or a preemption inside a page inflates that page only; callers take medians. */
#include <stdint.h>

static inline uint64_t tsc_fenced(void) {
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}

/* TSC ticks per ns, against CLOCK_MONOTONIC over ~20 ms of spinning. */
EXPORT double usemem_tsc_per_ns(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t t0 = tsc_fenced();
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 2e7);
    uint64_t t1 = tsc_fenced();
    return (double)(t1 - t0) / ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
}

/* This thread's CPU time (ns) of one do_rw_once pass over [p, p + bytes): the whole cost, faults included. */
EXPORT double usemem_pass_cpu_ns(unsigned long *p, unsigned long bytes, int read) {
    struct timespec a, b;
    double saved = deadline_monotonic;
    deadline_monotonic = 0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    usemem_rw_once(p, bytes, read);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    deadline_monotonic = saved;
    return (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
}

/* Write every line of [p, p + bytes) back and out of the caches (clflushopt would do; clflush is everywhere). */
EXPORT void usemem_flush(unsigned char *p, unsigned long bytes) {
    for (unsigned long o = 0; o < bytes; o += 64) __asm__ volatile("clflush (%0)" ::"r"(p + o) : "memory");
    __asm__ volatile("mfence" ::: "memory");
}

#include <unistd.h>
#include <sys/syscall.h>

/* What the loop costs after a kernel entry, page by page: for page i, ticks of [0] the entry (mode 0: the first
 * word of page i of p, which faults if unmapped; mode 1: a getppid() system call, then the first word; mode 2:
 * the first word of p's page i, then the loop runs over page i of q instead), [1] the loop over words 1..63 of
 * the target page, [2] over words 64..511. The target is p's page i (modes 0, 1) or q's (mode 2, q mapped).
 * Mode 1 enters the kernel only on pages i with i % every == 0 (the others: the first word alone). */
EXPORT void usemem_page_probe(unsigned long *p, unsigned long *q, unsigned long bytes, int read, int mode,
                              unsigned long every, uint64_t *out) {
    unsigned long pages = bytes >> 12;
    int rep = 0;
    double saved = deadline_monotonic;
    deadline_monotonic = 0;
    for (unsigned long i = 0; i < pages; i++) {
        unsigned long *a = p + (i << 9), *t = mode == 2 ? q + (i << 9) : a;
        uint64_t t0 = tsc_fenced();
        if (mode == 1 && i % every == 0) syscall(SYS_getppid);
        do_rw_once(a, sizeof(*a), read, &rep);
        uint64_t t1 = tsc_fenced();
        do_rw_once(t + 1, 63 * sizeof(*t), read, &rep);
        uint64_t t2 = tsc_fenced();
        do_rw_once(t + 64, 448 * sizeof(*t), read, &rep);
        uint64_t t3 = tsc_fenced();
        out[3 * i] = t1 - t0;
        out[3 * i + 1] = t2 - t1;
        out[3 * i + 2] = t3 - t2;
    }
    deadline_monotonic = saved;
}

/* usemem -j: the loop's stride in bytes (step = 4096 touches one word per 4 KiB page: the faults alone). */
EXPORT void usemem_set_step(unsigned long bytes) { step = bytes; }
