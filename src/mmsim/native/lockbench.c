/* mmsim validate --suite locks: two pinned threads contending for one spinlock (native/locks.py).
 *   lockbench ticket|queued|pingpong CPU_A CPU_B SAMPLES ITERS HOLD_NS THINK_NS
 * prints, per sample, "ns-per-acquisition cpu-share": wall time / (2 x ITERS), and the CPU time both
 * threads got / (2 x wall), each thread's read from its own thread CPU clock. A share well below 1 means the host's other load preempted a thread during
 * the sample, and a preempted lock holder or waiter stalls the other: such a sample says nothing about
 * the lock (locks.py keeps only samples with share >= 0.9, so short samples on a loaded host still give
 * clean ones). Each thread loops ITERS times: THINK_NS of private work, lock, HOLD_NS of work in the
 * critical section, unlock. The work is a busy wait on the TSC, as the kernel's udelay() (delay_tsc)
 * does, so it lasts the same whatever the clock frequency or the SMT sibling does; the TSC rate is
 * measured against CLOCK_MONOTONIC at start. Samples start and end at a spin barrier (both threads
 * running: a futex barrier would let one thread run alone while the other is being woken).
 * ticket: the x86 ticket lock of v2.6.25..v4.1, head and tail in one word as v3.12's arch_spinlock_t
 * (xadd a ticket, spin reading head, head++ to unlock).
 * queued: qspinlock (v4.2+), one word of locked byte, pending byte and MCS tail as
 * kernel/locking/qspinlock.c: the fast-path cmpxchg, the pending bit for the first waiter, the MCS queue
 * behind it (with two threads the queue is only entered in a race). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long samples, iters, hold_ns, think_ns;
static int cpus[2], use_q;
static double *out;

/* v3.12 arch_spinlock_t: head and tail tickets in one 32-bit word (x86 little endian: head low) */
static _Alignas(64) union { volatile uint32_t head_tail; struct { volatile uint16_t head, tail; } t; } ticket;

/* v4.2+ qspinlock: locked byte, pending byte, tail (CPU + 1) in one 32-bit word; per-CPU MCS nodes */
#define Q_LOCKED 0x1u
#define Q_PENDING 0x100u
#define Q_LOCKED_PENDING 0xffffu
#define Q_TAIL_SHIFT 16
static _Alignas(64) union { volatile uint32_t val; struct { volatile uint8_t locked, pending; } b;
                            struct { volatile uint16_t locked_pending, tail; } h; } q;
struct node { _Alignas(64) struct node *volatile next; volatile int locked; };
static struct node nodes[2];
static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double tsc_per_ns;

static inline uint64_t tsc(void) { return __builtin_ia32_rdtsc(); }

static void calibrate(void) {
    uint64_t t0 = now_ns(), c0 = tsc();
    while (now_ns() - t0 < 20000000u) { }
    tsc_per_ns = (double)(tsc() - c0) / (double)(now_ns() - t0);
}

static void busy(long ns) {
    if (ns <= 0) return;
    uint64_t end = tsc() + (uint64_t)((double)ns * tsc_per_ns);
    while (tsc() < end) { }
}

static _Alignas(64) volatile long barrier_count;

static void spin_barrier(long *round) {
    /* both threads arrive: count reaches 2 x round */
    long goal = 2 * ++*round;
    __atomic_fetch_add(&barrier_count, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&barrier_count, __ATOMIC_ACQUIRE) < goal) __builtin_ia32_pause();
}

static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);  /* exact for the calling thread (a process clock
                                                    sees the other thread's time only at its ticks) */
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double *share;
static volatile uint64_t thread_cpu[2], thread_t0[2], thread_t1[2];

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) { perror("sched_setaffinity"); exit(3); }
}

/* kernel/locking/qspinlock.c queued_spin_lock_slowpath (v4.16+), native, one node per thread */
static void q_slowpath(int me, uint32_t val) {
    if (val == Q_PENDING) {  /* pending -> locked hand-over in progress: wait for it, at most
                                _Q_PENDING_LOOPS (1 << 9 on x86, arch/x86/include/asm/qspinlock.h) reads,
                                as atomic_cond_read_relaxed (cpu_relax between reads) */
        int cnt = 1 << 9;
        while ((val = __atomic_load_n(&q.val, __ATOMIC_RELAXED)) == Q_PENDING && cnt--) __builtin_ia32_pause();
    }
    if (!(val & ~Q_LOCKED)) {
        /* queued_fetch_set_pending_acquire */
        val = __atomic_fetch_or(&q.val, Q_PENDING, __ATOMIC_ACQUIRE);
        if (!(val & ~Q_LOCKED)) {
            while (__atomic_load_n(&q.b.locked, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
            __atomic_store_n(&q.h.locked_pending, Q_LOCKED, __ATOMIC_RELAXED);  /* clear_pending_set_locked */
            return;
        }
        if (!(val & Q_PENDING)) __atomic_fetch_and(&q.val, ~Q_PENDING, __ATOMIC_RELAXED);
    }
    struct node *n = &nodes[me];
    n->next = NULL;
    n->locked = 0;
    uint32_t mytail = (uint32_t)(me + 1) << Q_TAIL_SHIFT;
    /* xchg_tail */
    uint32_t old = (uint32_t)__atomic_exchange_n(&q.h.tail, (uint16_t)(me + 1), __ATOMIC_RELEASE) << Q_TAIL_SHIFT;
    if (old) {
        struct node *prev = &nodes[(old >> Q_TAIL_SHIFT) - 1];
        __atomic_store_n(&prev->next, n, __ATOMIC_RELAXED);
        while (!__atomic_load_n(&n->locked, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
    }
    /* queue head: wait for the owner and the pending waiter to go away */
    while ((val = __atomic_load_n(&q.val, __ATOMIC_ACQUIRE)) & Q_LOCKED_PENDING) __builtin_ia32_pause();
    if ((val & ~Q_LOCKED_PENDING) == mytail &&
        __atomic_compare_exchange_n(&q.val, &val, Q_LOCKED, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;  /* nobody queued behind */
    __atomic_store_n(&q.b.locked, 1, __ATOMIC_RELAXED);  /* set_locked */
    struct node *next;
    while (!(next = __atomic_load_n(&n->next, __ATOMIC_RELAXED))) __builtin_ia32_pause();
    __atomic_store_n(&next->locked, 1, __ATOMIC_RELEASE);  /* arch_mcs_spin_unlock_contended */
}

static void lock(int me) {
    if (!use_q) {  /* arch_spin_lock: xadd the tail ticket, spin reading head */
        uint32_t old = __atomic_fetch_add(&ticket.head_tail, 1u << 16, __ATOMIC_ACQUIRE);
        uint16_t mine = (uint16_t)(old >> 16);
        while (__atomic_load_n(&ticket.t.head, __ATOMIC_ACQUIRE) != mine) __builtin_ia32_pause();
        return;
    }
    uint32_t val = 0;  /* queued_spin_lock: cmpxchg 0 -> locked, else the slowpath */
    if (__atomic_compare_exchange_n(&q.val, &val, Q_LOCKED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    q_slowpath(me, val);
}

static void unlock(int me) {
    (void)me;
    if (!use_q)  /* arch_spin_unlock: head++ (an unlocked add on x86) */
        __atomic_store_n(&ticket.t.head, (uint16_t)(ticket.t.head + 1), __ATOMIC_RELEASE);
    else  /* queued_spin_unlock: smp_store_release(&lock->locked, 0) */
        __atomic_store_n(&q.b.locked, 0, __ATOMIC_RELEASE);
}

/* pingpong: the line's one-way transfer now, as mmsim calibrate measures line_xfer_socket_ns (CAS
 * ping-pong, half a round trip), so that the row can be simulated with the transfer the host gives at
 * the time of the run (a VM's two vCPUs may sit on nearer or farther physical cores from one run to the
 * next) */
static _Alignas(64) volatile long ball;

static void pingpong(int me, long n) {
    for (long i = 0; i < n; i++) {
        long want = 2 * i + me, next = want + 1;
        while (!__atomic_compare_exchange_n(&ball, &want, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            want = 2 * i + me;  /* no pause: nviennot/core-to-core-latency's loop, as mb.c c2c */
        }
    }
}

static int use_pingpong;

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    long round = 0;
    pin(cpus[me]);
    for (long s = 0; s < samples; s++) {
        spin_barrier(&round);
        uint64_t t0 = now_ns(), c0 = cpu_ns();
        if (use_pingpong) {
            if (me == 0) ball = 0;
            spin_barrier(&round);
            t0 = now_ns();
            c0 = cpu_ns();
            pingpong(me, iters);
        } else for (long i = 0; i < iters; i++) {
            busy(think_ns);
            lock(me);
            busy(hold_ns);
            unlock(me);
        }
        thread_t1[me] = now_ns();
        thread_t0[me] = t0;
        thread_cpu[me] = cpu_ns() - c0;
        spin_barrier(&round);
        if (me == 0) {  /* from the first thread's start to the last one's end: share <= 1 */
            uint64_t t0min = thread_t0[0] < thread_t0[1] ? thread_t0[0] : thread_t0[1];
            uint64_t wall = (thread_t1[0] > thread_t1[1] ? thread_t1[0] : thread_t1[1]) - t0min;
            out[s] = (double)wall / (2.0 * (double)iters);
            share[s] = (double)(thread_cpu[0] + thread_cpu[1]) / (2.0 * (double)wall);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) { fprintf(stderr, "usage: lockbench ticket|queued|pingpong A B SAMPLES ITERS HOLD_NS THINK_NS\n"); return 2; }
    use_q = !strcmp(argv[1], "queued");
    use_pingpong = !strcmp(argv[1], "pingpong");
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
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (long s = 0; s < samples; s++) printf("%.2f %.3f\n", out[s], share[s]);
    return 0;
}
