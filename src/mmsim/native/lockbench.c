/* mmsim validate --suite locks: two pinned threads contending for one spinlock (native/locks.py).
 *   lockbench ticket|mcs CPU_A CPU_B SAMPLES ITERS HOLD_NS THINK_NS
 * prints, per sample, "ns-per-acquisition cpu-share": wall time / (2 x ITERS), and the CPU time both
 * threads got / (2 x wall) (well below 1: the host's other load preempted them, and a preempted lock
 * holder or waiter stalls the other). Each thread loops ITERS times: THINK_NS of private work, lock,
 * HOLD_NS of work in the critical section, unlock; the work is an empty loop calibrated at start
 * (fastest of 20 runs of 1 ms), so no clock call sits in the timed path.
 * ticket: the x86 ticket lock of v2.6.25..v4.1 (xadd a ticket, spin reading head, head++ to unlock).
 * mcs: an MCS queue lock (xchg the tail, spin on the own node, hand over by writing the next node),
 * the queueing of qspinlock's slowpath without its pending-bit shortcut. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long samples, iters, hold_ns, think_ns;
static int cpus[2], use_mcs;
static double *out;
static pthread_barrier_t bar;

static _Alignas(64) volatile uint32_t ticket_next;
static _Alignas(64) volatile uint32_t ticket_head_pad[16];
#define ticket_head ticket_head_pad[0]

struct node { _Alignas(64) struct node *volatile next; volatile int locked; };
static _Alignas(64) struct node *volatile tail;
static struct node nodes[2];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double loops_per_ns;

static void spin_loops(long n) {
    for (volatile long i = 0; i < n; i++) { }
}

static void calibrate(void) {
    long n = 100000;
    double best = 0;
    for (int r = 0; r < 20; r++) {
        uint64_t t0 = now_ns();
        spin_loops(n);
        double rate = (double)n / (double)(now_ns() - t0);
        if (rate > best) best = rate;
    }
    loops_per_ns = best;
}

static void busy(long ns) {
    if (ns > 0) spin_loops((long)(ns * loops_per_ns));
}

static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double *share;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) { perror("sched_setaffinity"); exit(3); }
}

static void lock(int me) {
    if (!use_mcs) {
        uint32_t t = __atomic_fetch_add(&ticket_next, 1, __ATOMIC_ACQUIRE);
        while (__atomic_load_n(&ticket_head, __ATOMIC_ACQUIRE) != t) __builtin_ia32_pause();
        return;
    }
    struct node *n = &nodes[me];
    n->next = NULL;
    n->locked = 0;
    struct node *prev = __atomic_exchange_n(&tail, n, __ATOMIC_ACQ_REL);
    if (prev) {
        __atomic_store_n(&prev->next, n, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&n->locked, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
    }
}

static void unlock(int me) {
    if (!use_mcs) {
        __atomic_store_n(&ticket_head, ticket_head + 1, __ATOMIC_RELEASE);
        return;
    }
    struct node *n = &nodes[me];
    struct node *next = __atomic_load_n(&n->next, __ATOMIC_ACQUIRE);
    if (!next) {
        struct node *expect = n;
        if (__atomic_compare_exchange_n(&tail, &expect, NULL, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) return;
        while (!(next = __atomic_load_n(&n->next, __ATOMIC_ACQUIRE))) __builtin_ia32_pause();
    }
    __atomic_store_n(&next->locked, 1, __ATOMIC_RELEASE);
}

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    pin(cpus[me]);
    for (long s = 0; s < samples; s++) {
        pthread_barrier_wait(&bar);
        uint64_t t0 = now_ns(), c0 = cpu_ns();
        for (long i = 0; i < iters; i++) {
            busy(think_ns);
            lock(me);
            busy(hold_ns);
            unlock(me);
        }
        pthread_barrier_wait(&bar);
        if (me == 0) {
            uint64_t wall = now_ns() - t0;
            out[s] = (double)wall / (2.0 * (double)iters);
            share[s] = (double)(cpu_ns() - c0) / (2.0 * (double)wall);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) { fprintf(stderr, "usage: lockbench ticket|mcs A B SAMPLES ITERS HOLD_NS THINK_NS\n"); return 2; }
    use_mcs = !strcmp(argv[1], "mcs");
    cpus[0] = atoi(argv[2]);
    cpus[1] = atoi(argv[3]);
    samples = atol(argv[4]);
    iters = atol(argv[5]);
    hold_ns = atol(argv[6]);
    think_ns = atol(argv[7]);
    if (samples < 1 || iters < 1) return 2;
    out = calloc((size_t)samples, sizeof *out);
    share = calloc((size_t)samples, sizeof *share);
    calibrate();
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (long s = 0; s < samples; s++) printf("%.2f %.3f\n", out[s], share[s]);
    return 0;
}
