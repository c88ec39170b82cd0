/* mmsim calibrate microbenchmarks (see microbench.py). One mode per run, one sample per output line.
 *   mb c2c CPU_A CPU_B SAMPLES ROUNDS   ns per one-way hand-off of a CAS-ed cache line (round trip / 2)
 *   mb futex CPU_A CPU_B SAMPLES ROUNDS ns per one-way futex hand-off (wake + the woken side running)
 *   mb chase BYTES SAMPLES LOADS        ns per dependent load, random cyclic chain over BYTES
 *   mb pmbench MAP SET SECONDS READPCT  pmbench's uniform pattern, one thread: accesses/s (one line)
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

/* pmbench (pattern.c / pmbench.c) uniform, -j1, warm-up on: every page of the SET is touched first;
 * then each access is one 4-byte load or store (READPCT% loads) at a random offset of a uniformly
 * random page of the set; the clock is read every 10,000 accesses. */
static int pmbench(size_t map, size_t set, double seconds, int readpct) {
    size_t pages = set / 4096;
    char *buf = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || pages == 0) return 4;
    for (size_t i = 0; i < pages; i++) buf[i * 4096] = 1;
    uint64_t x = 88172645463325252ull, n = 0, sum = 0;
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), t0 = now_ns(), t;
    do {
        for (int k = 0; k < 10000; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;  /* xorshift64 */
            volatile uint32_t *w = (volatile uint32_t *)(buf + (x % pages) * 4096 + ((x >> 40) % 1024) * 4);
            if ((int)((x >> 20) % 100) < readpct) sum += *w; else *w = (uint32_t)x;
        }
        n += 10000;
        t = now_ns();
    } while (t < end);
    printf("%.1f\n", n / ((t - t0) / 1e9));
    if (sum == 42) fputs("", stderr);
    munmap(buf, map);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: mb c2c|futex A B SAMPLES ROUNDS | chase BYTES SAMPLES LOADS\n"); return 2; }
    int rc;
    if (!strcmp(argv[1], "pmbench")) {
        if (argc < 6) return 2;
        return pmbench((size_t)atoll(argv[2]), (size_t)atoll(argv[3]), atof(argv[4]), atoi(argv[5]));
    }
    if (!strcmp(argv[1], "chase")) {
        samples = atol(argv[3]);
        out = calloc(samples, sizeof *out);
        rc = chase((size_t)atoll(argv[2]), atol(argv[4]));
    } else {
        if (argc < 6) return 2;
        cpus[0] = atoi(argv[2]); cpus[1] = atoi(argv[3]);
        samples = atol(argv[4]); rounds = atol(argv[5]);
        out = calloc(samples, sizeof *out);
        rc = pair(!strcmp(argv[1], "c2c") ? c2c_thread : futex_thread);
    }
    for (long s = 0; s < samples && rc == 0; s++) printf("%.3f\n", out[s]);
    return rc;
}
