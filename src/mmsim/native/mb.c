/* mmsim calibrate microbenchmarks (see microbench.py). One mode per run, one sample per output line.
 *   mb c2c CPU_A CPU_B SAMPLES ROUNDS   ns per one-way hand-off of a CAS-ed cache line (round trip / 2)
 *   mb futex CPU_A CPU_B SAMPLES ROUNDS ns per one-way futex hand-off (wake + the woken side running)
 *   mb chase BYTES SAMPLES LOADS        ns per dependent load, random cyclic chain over BYTES
 *   mb pmbench MAP SET SECONDS READPCT  pmbench's uniform pattern, one thread: accesses/s and mean timed ns
 *   mb xcopy CPU_A CPU_B SAMPLES ROUNDS ns per 64-byte line of a 64 KiB rep-movsb copy on CPU_B of lines
 *                                       CPU_A has just written (the AF_UNIX skb copy: copy_user_enhanced_fast_string)
 *   mb clear BYTES SAMPLES VARIANT      CPU ns per 4 KiB page of the kernel's clear_page (VARIANT erms: rep stosb,
 *                                       rep: rep stosq, orig: 8 movq per line) over a populated BYTES buffer
 *   mb wakecost CPU_A CPU_B SAMPLES ROUNDS  ns the waker on CPU_B spends in FUTEX_WAKE of a task asleep on idle
 *                                       CPU_A, minus a FUTEX_WAKE that finds no waiter (median of ROUNDS per sample)
 *   mb wakelat CPU_A CPU_B SAMPLES ROUNDS   ns from the FUTEX_WAKE call on CPU_B until the task asleep on idle
 *                                       CPU_A runs again in user space (median of ROUNDS per sample)
 * The c2c method is nviennot/core-to-core-latency's (compare-exchange ping-pong between pinned threads). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long samples, rounds;
static int cpus[2];
static _Alignas(64) volatile int line[16];
static _Alignas(64) int fword[16];
static double *out;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) { perror("sched_setaffinity"); exit(3); }
}

static void *c2c_thread(void *arg) {
    int me = (int)(intptr_t)arg;
    pin(cpus[me]);
    for (long s = 0; s < samples; s++) {
        uint64_t t0 = now_ns();
        for (long r = 0; r < rounds; r++) {
            int want = me, next = 1 - me;
            while (!__sync_bool_compare_and_swap(&line[0], want, next)) { }
        }
        if (me == 0) out[s] = (double)(now_ns() - t0) / rounds / 2.0;
    }
    return NULL;
}

static long futex(int *addr, int op, int val) { return syscall(SYS_futex, addr, op, val, NULL, NULL, 0); }

static void *futex_thread(void *arg) {
    int me = (int)(intptr_t)arg;
    pin(cpus[me]);
    for (long s = 0; s < samples; s++) {
        uint64_t t0 = now_ns();
        for (long r = 0; r < rounds; r++) {
            while (__atomic_load_n(&fword[0], __ATOMIC_ACQUIRE) != me) futex(&fword[0], FUTEX_WAIT_PRIVATE, 1 - me);
            __atomic_store_n(&fword[0], 1 - me, __ATOMIC_RELEASE);
            futex(&fword[0], FUTEX_WAKE_PRIVATE, 1);
        }
        if (me == 0) out[s] = (double)(now_ns() - t0) / rounds / 2.0;
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The waker's own cost of waking a task whose CPU is idle (ttwu + the reschedule IPI: on a VM a VM exit):
 * thread 0 (CPU_A) sleeps on fword[1]; thread 1 (CPU_B) lets it settle 20 us, times FUTEX_WAKE, waits for the
 * ack, then times a FUTEX_WAKE on a word nobody waits on. Per sample: median(wake) - median(empty wake). */
static _Alignas(64) int wack[16];
static _Alignas(64) volatile uint64_t woke_at;
static int wake_latency;  /* wakelat: per round, the sleeper's return from FUTEX_WAIT - the wake call */
static void *wakecost_thread(void *arg) {
    int me = (int)(intptr_t)arg;
    pin(cpus[me]);
    long total = samples * rounds;
    if (me == 0) {
        for (long i = 0; i < total; i++) {
            while (__atomic_load_n(&fword[1], __ATOMIC_ACQUIRE) == 0) futex(&fword[1], FUTEX_WAIT_PRIVATE, 0);
            woke_at = now_ns();
            __atomic_store_n(&fword[1], 0, __ATOMIC_RELAXED);
            __atomic_add_fetch(&wack[0], 1, __ATOMIC_RELEASE);
        }
        return NULL;
    }
    double *w = calloc(rounds, sizeof *w), *e = calloc(rounds, sizeof *e);
    for (long s = 0; s < samples; s++) {
        for (long r = 0; r < rounds; r++) {
            int a0 = __atomic_load_n(&wack[0], __ATOMIC_ACQUIRE);
            uint64_t t = now_ns();
            while (now_ns() - t < 20000) { }  /* the sleeper is asleep and its CPU idle */
            __atomic_store_n(&fword[1], 1, __ATOMIC_RELEASE);
            t = now_ns();
            futex(&fword[1], FUTEX_WAKE_PRIVATE, 1);
            w[r] = (double)(now_ns() - t);
            while (__atomic_load_n(&wack[0], __ATOMIC_ACQUIRE) == a0) { }
            if (wake_latency) w[r] = (double)(woke_at - t);
            t = now_ns();
            futex(&wack[8], FUTEX_WAKE_PRIVATE, 1);
            e[r] = (double)(now_ns() - t);
        }
        qsort(w, rounds, sizeof *w, cmp_double);
        qsort(e, rounds, sizeof *e, cmp_double);
        out[s] = wake_latency ? w[rounds / 2] : w[rounds / 2] - e[rounds / 2];
    }
    free(w);
    free(e);
    return NULL;
}

#define XCOPY_BYTES (64 * 1024)
static _Alignas(4096) unsigned char xsrc[XCOPY_BYTES], xdst[XCOPY_BYTES];
static _Alignas(64) volatile int xturn;

static void *xcopy_thread(void *arg) {
    int me = (int)(intptr_t)arg;
    pin(cpus[me]);
    for (long s = 0; s < samples; s++) {
        uint64_t spent = 0;
        for (long r = 0; r < rounds; r++) {
            while (xturn != me) { }
            if (me == 0) {  /* the writer: modify every line of the source */
                for (size_t i = 0; i < XCOPY_BYTES; i += 64) ((volatile unsigned char *)xsrc)[i] = (unsigned char)r;
            } else {  /* the reader: copy it as copy_user_enhanced_fast_string does, timed */
                void *d = xdst, *src = xsrc;
                size_t n = XCOPY_BYTES;
                uint64_t t0 = now_ns();
                __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
                spent += now_ns() - t0;
            }
            __atomic_store_n(&xturn, 1 - me, __ATOMIC_RELEASE);
        }
        if (me == 1) out[s] = (double)spent / rounds / (XCOPY_BYTES / 64);
    }
    return NULL;
}

static int pair(void *(*fn)(void *)) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, fn, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}

static int chase(size_t bytes, long loads) {
    size_t n = bytes / 64, align = 2u << 20;
    char *buf;
    if (posix_memalign((void **)&buf, align, bytes + align)) return 4;
    madvise(buf, bytes, MADV_HUGEPAGE);
    size_t *perm = malloc(n * sizeof *perm);
    for (size_t i = 0; i < n; i++) perm[i] = i;
    srand(12345);
    for (size_t i = n - 1; i > 0; i--) {  /* Fisher-Yates: one random cycle through every line */
        size_t j = ((size_t)rand() * ((size_t)RAND_MAX + 1) + (size_t)rand()) % (i + 1);
        size_t x = perm[i]; perm[i] = perm[j]; perm[j] = x;
    }
    for (size_t i = 0; i < n; i++) *(void **)(buf + perm[i] * 64) = buf + perm[(i + 1) % n] * 64;
    void **p = (void **)(buf + perm[0] * 64);
    for (size_t i = 0; i < n; i++) p = (void **)*p;  /* warm: fault in, fill the caches */
    for (long s = 0; s < samples; s++) {
        uint64_t t0 = now_ns();
        for (long i = 0; i < loads; i++) p = (void **)*p;
        out[s] = (double)(now_ns() - t0) / loads;
    }
    if (p == NULL) puts("");  /* keep the chain live */
    free(perm);
    free(buf);
    return 0;
}

/* pmbench (pmbench.c main_bm_thread, access.c histogram_access, pattern.c uniform, rdtsc.h), -j1, warm-up on,
 * the default rdtscp timestamp. Per access, as pmbench does it: the page from the uniform pattern (Knuth LCG
 * >> 33, % pages), a 10-bit word offset (another LCG >> 21), a read/write roll against RATIO scaled to 1024,
 * then the access timed alone -- rdtscp, one 4-byte movl load or store, rdtscp -- converted to ns with a
 * division by the TSC kHz, and recorded in a per-thread log2/16 histogram. pmbench calls each step through a
 * function pointer (pattern->get_next, p->get_offset, access->exercise, access->record, tsops->timestamp);
 * so does this port. rdtscp waits for earlier instructions to execute, so a read's miss is timed whole and
 * the next access cannot start under it. The warm-up is the pattern's own (uniform: 4 x pages accesses,
 * untimed and unrecorded); the clock for the run's end is read every 10,000 accesses, as pmbench does.
 * Output: accesses per second; the mean timed latency in ns (pmbench's "page latency" before its
 * pattern-overhead subtraction); the median timed latency from the histogram (256 ns and up: its log2/16
 * bin's middle; below 256 ns: 128); accesses per second of this thread's CPU time (preemption excluded). */
typedef struct { uint64_t state; size_t n; } pm_uniform;
static uint32_t pm_lcg(uint64_t *s) { *s = *s * 6364136223846793005ull + 1442695040888963407ull; return *s >> 33; }
static __attribute__((noinline)) size_t pm_uniform_next(void *c) { pm_uniform *u = c; return pm_lcg(&u->state) % u->n; }
static __attribute__((noinline)) uint32_t pm_offset_random(uint64_t *s) { return pm_lcg(s) >> 21; }
static __attribute__((noinline)) uint32_t pm_roll_dice(uint64_t *s) { return pm_lcg(s); }
static __attribute__((noinline)) uint64_t pm_rdtscp(void) {
    uint64_t a, d;
    __asm__ volatile("rdtscp" : "=a"(a), "=d"(d) : : "rcx");
    return a | (d << 32);
}
static volatile uint32_t pm_freq_khz;
static uint64_t (*pm_timestamp)(void) = pm_rdtscp;
static __attribute__((noinline)) uint32_t pm_measure_read(uint32_t *ptr) {
    uint32_t sink;
    uint64_t t0 = pm_timestamp();
    __asm__ volatile("movl %1, %0" : "=r"(sink) : "m"(*ptr) : "memory");
    uint64_t t1 = pm_timestamp();
    return (uint32_t)((t1 - t0) * 1000000ull / pm_freq_khz);
}
static __attribute__((noinline)) uint32_t pm_measure_write(uint32_t *ptr) {
    uint32_t v = (uint32_t)(uintptr_t)ptr;
    uint64_t t0 = pm_timestamp();
    __asm__ volatile("movl %1, %0" : "=m"(*ptr) : "r"(v) : "memory");
    uint64_t t1 = pm_timestamp();
    return (uint32_t)((t1 - t0) * 1000000ull / pm_freq_khz);
}
static __attribute__((noinline)) uint32_t pm_exercise(uint32_t *ptr, int is_write) {
    return is_write ? pm_measure_write(ptr) : pm_measure_read(ptr);
}
static uint64_t pm_histo[2][16][16];
static __attribute__((noinline)) void pm_record(uint32_t ns, int is_write) {
    uint64_t *c;
    if (ns < 256) c = &pm_histo[is_write][0][0];
    else {
        uint32_t index = (31 - __builtin_clz(ns)) - 7;
        if (index < 16) c = &pm_histo[is_write][index][(~(1u << (index + 7)) & ns) >> (index + 3)];
        else if (index >= 23) c = &pm_histo[is_write][0][15];
        else c = &pm_histo[is_write][0][8 + index - 16];
    }
    (*c)++;
}
static size_t (*pm_get_next)(void *) = pm_uniform_next;
static uint32_t (*pm_get_offset)(uint64_t *) = pm_offset_random;
static uint32_t (*pm_access)(uint32_t *, int) = pm_exercise;
static void (*pm_rec)(uint32_t, int) = pm_record;

static uint32_t tsc_khz(void) { /* rdtsc ticks over 100 ms of CLOCK_MONOTONIC (pmbench's init_base_freq sleeps too) */
    uint64_t t0 = now_ns(), c0 = pm_rdtscp();
    struct timespec d = {0, 100000000};
    nanosleep(&d, NULL);
    uint64_t t1 = now_ns(), c1 = pm_rdtscp();
    return (uint32_t)((c1 - c0) * 1000000ull / (t1 - t0));
}

static int pmbench(size_t map, size_t set, double seconds, int readpct) {
    size_t pages = set / 4096;
    char *buf = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || pages == 0) return 4;
    pm_freq_khz = tsc_khz();
    pm_uniform ctx = {1 + 2, pages};   /* thread 1: random_seed = thread_num, uniform adds 2 */
    uint64_t off_state = 1 + 7, act_state = 1 + 50;
    int rat_scaled = readpct * 1024 / 100;
    for (size_t i = 0; i < 4 * pages; i++) {  /* uniform_get_warmup_run: 4 n */
        uint32_t *a = (uint32_t *)(buf + (pm_get_next(&ctx) << 12));
        a += pm_get_offset(&off_state);
        int w = (pm_roll_dice(&act_state) % 1024) < (uint32_t)rat_scaled ? 0 : 1;
        pm_access(a, w);
    }
    memset(pm_histo, 0, sizeof pm_histo);
    uint64_t n = 0, lat_sum = 0;
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    uint64_t done = (uint64_t)(seconds * pm_freq_khz * 1000.0), start = pm_timestamp(), now;
    done += start;
    while ((now = pm_timestamp()) < done) {
        for (int i = 0; i < 10000; i++) {
            uint32_t *a = (uint32_t *)(buf + (pm_get_next(&ctx) << 12));
            a += pm_get_offset(&off_state);
            int w = (pm_roll_dice(&act_state) % 1024) < (uint32_t)rat_scaled ? 0 : 1;
            uint32_t ns = pm_access(a, w);
            pm_rec(ns, w);
            lat_sum += ns;
        }
        n += 10000;
    }
    now = pm_timestamp();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    /* the median timed latency from the histogram (robust to preemption, which inflates the mean) */
    uint64_t cum = 0, half = n / 2;
    double median = 0;
    for (int b = 0; b < 16 && median == 0; b++)
        for (int h = 0; h < 16; h++) {
            uint64_t k = pm_histo[0][b][h] + pm_histo[1][b][h];
            if (b == 0 && h > 0) continue; /* bucket 0: hex[0] < 256 ns, hex[8..15] >= 2^23 ns */
            if ((cum += k) >= half) { median = b == 0 ? 128.0 : (double)(1u << (b + 7)) * (1.0 + (h + 0.5) / 16); break; }
        }
    double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    printf("%.1f %.2f %.1f %.1f\n", n / ((double)(now - start) / (pm_freq_khz * 1000.0)), (double)lat_sum / n,
           median, n / cpu);
    munmap(buf, map);
    return 0;
}


/* arch/x86/lib/clear_page_64.S (v6.x): clear_page_erms = rep stosb of 4096 bytes; clear_page_rep = rep stosq
 * of 512 quadwords; clear_page_orig = 8 movq of zero per 64-byte line (the kernel's loop is unrolled the same
 * way). The kernel picks one with alternative_call_2 (asm/page_64.h) by X86_FEATURE_ERMS, then REP_GOOD. */
static void clear_erms(void *p) { unsigned long c = 4096; __asm__ volatile("rep stosb" : "+D"(p), "+c"(c) : "a"(0) : "memory"); }
static void clear_rep(void *p) { unsigned long c = 512; __asm__ volatile("rep stosq" : "+D"(p), "+c"(c) : "a"(0) : "memory"); }
static void clear_orig(void *p) {
    for (char *l = p, *e = l + 4096; l < e; l += 64)
        __asm__ volatile("movq %1, 0(%0)\n\tmovq %1, 8(%0)\n\tmovq %1, 16(%0)\n\tmovq %1, 24(%0)\n\t"
                         "movq %1, 32(%0)\n\tmovq %1, 40(%0)\n\tmovq %1, 48(%0)\n\tmovq %1, 56(%0)"
                         : : "r"(l), "r"(0L) : "memory");
}

static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One sample = one pass of page clears over the whole populated buffer, in this thread's CPU time (time
 * preempted does not count), as ns per 4 KiB page. THP is refused (MADV_NOHUGEPAGE): 4 KiB pages, like the
 * kernel's per-subpage clears, and no huge-page zeroing on the first touch. */
static int clear(size_t bytes, const char *variant) {
    void (*fn)(void *) = !strcmp(variant, "erms") ? clear_erms : !strcmp(variant, "rep") ? clear_rep
                       : !strcmp(variant, "orig") ? clear_orig : NULL;
    if (fn == NULL || bytes < 4096) return 2;
    bytes &= ~(size_t)4095;
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return 4;
    madvise(buf, bytes, MADV_NOHUGEPAGE);
    memset(buf, 1, bytes);  /* populate: every page present before the first timed pass */
    for (long s = 0; s < samples; s++) {
        uint64_t t0 = cpu_ns();
        for (size_t o = 0; o < bytes; o += 4096) fn(buf + o);
        out[s] = (double)(cpu_ns() - t0) / (double)(bytes / 4096);
    }
    int rc = 0;
    for (size_t i = 0; i < bytes / 8 && samples > 0; i++)  /* every byte cleared, or the pass did not count */
        if (((uint64_t *)buf)[i]) { rc = 5; break; }
    munmap(buf, bytes);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: mb c2c|futex A B SAMPLES ROUNDS | chase BYTES SAMPLES LOADS\n"); return 2; }
    int rc;
    if (!strcmp(argv[1], "pmbench")) {
        if (argc < 6) return 2;
        return pmbench((size_t)atoll(argv[2]), (size_t)atoll(argv[3]), atof(argv[4]), atoi(argv[5]));
    }
    if (!strcmp(argv[1], "clear")) {
        samples = atol(argv[3]);
        out = calloc(samples, sizeof *out);
        rc = clear((size_t)atoll(argv[2]), argv[4]);
    } else if (!strcmp(argv[1], "chase")) {
        samples = atol(argv[3]);
        out = calloc(samples, sizeof *out);
        rc = chase((size_t)atoll(argv[2]), atol(argv[4]));
    } else {
        if (argc < 6) return 2;
        cpus[0] = atoi(argv[2]); cpus[1] = atoi(argv[3]);
        samples = atol(argv[4]); rounds = atol(argv[5]);
        out = calloc(samples, sizeof *out);
        rc = pair(!strcmp(argv[1], "c2c") ? c2c_thread : !strcmp(argv[1], "xcopy") ? xcopy_thread
                  : !strcmp(argv[1], "wakecost") || (wake_latency = !strcmp(argv[1], "wakelat")) ? wakecost_thread
                  : futex_thread);
    }
    for (long s = 0; s < samples && rc == 0; s++) printf("%.3f\n", out[s]);
    return rc;
}
