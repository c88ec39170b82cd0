/* mmsim validate --suite locks: two pinned threads contending for one spinlock (native/locks.py).
 *   lockbench ticket|queued|pingpong|owned-ticket|owned-queued CPU_A CPU_B SAMPLES ITERS HOLD_NS THINK_NS
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
 * behind it (with two threads the queue is only entered in a race).
 * An optional 8th argument "trace" adds, per sample, how the lock went round (docs/locks.md; the rows do not
 * use it): each thread records per acquisition its place in the total order (its ticket; for qspinlock a
 * sequence number the holder bumps in the lock word's line, as a critical section touches its data), the
 * path (fast-path cmpxchg / pending / queue) and how many pause loops it spun; "tracet" also the TSC at
 * lock entry and at acquisition (two rdtsc per acquisition: perturbs 0/0). Extra columns per sample:
 * hand-offs (owner changes) per acquisition, fast-path share, pending share, queue share, the longest run
 * of one thread, pause loops per acquisition; tracet adds ns per hand-off, the longest wait (ns) and that
 * wait's ns per pause loop over the mean; "traceo" orders by one TSC read after each unlock instead of the
 * ticket / sequence number (no write to the lock's line, ~one rdtsc of think time) (far above 1: the waiting vCPU was not running); last, the line
 * transfer measured by a short ping-pong just before the sample.
 * An 8th argument "xfer" runs the plain loop (no tracing) and adds only that last column, the transfer just
 * before each sample: a VM's vCPUs move between nearer and farther physical cores within one run, and
 * locks.py compares each sample with the model at the transfer it had.
 * owned-ticket|owned-queued: thread A alone takes and releases the lock ITERS times (HOLD_NS and THINK_NS
 * as above; B only meets it at the barriers): the lock's line stays Modified in A's cache, so ns per
 * acquisition (printed as wall / ITERS) is the core's own cost of the unlock store and the locked RMW on an
 * owned line, which locks/base.py's HOST_LOCAL_RMW_NS takes for this host. */
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
static _Alignas(64) struct {
    union { volatile uint32_t val; struct { volatile uint8_t locked, pending; } b;
            struct { volatile uint16_t locked_pending, tail; } h; } w;
    volatile uint32_t seq;  /* trace only: bumped by the holder, in the lock word's line */
} qline;
#define q (qline.w)
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
enum { P_FAST, P_PENDING, P_QUEUE, P_TICKET_NOWAIT, P_TICKET_WAIT };
#define PAUSE() do { __builtin_ia32_pause(); ++*pauses; } while (0)

static inline __attribute__((always_inline)) int q_slowpath(int me, uint32_t val, unsigned *pauses) {
    if (val == Q_PENDING) {  /* pending -> locked hand-over in progress: wait for it, at most
                                _Q_PENDING_LOOPS (1 << 9 on x86, arch/x86/include/asm/qspinlock.h) reads,
                                as atomic_cond_read_relaxed (cpu_relax between reads) */
        int cnt = 1 << 9;
        while ((val = __atomic_load_n(&q.val, __ATOMIC_RELAXED)) == Q_PENDING && cnt--) PAUSE();
    }
    if (!(val & ~Q_LOCKED)) {
        /* queued_fetch_set_pending_acquire */
        val = __atomic_fetch_or(&q.val, Q_PENDING, __ATOMIC_ACQUIRE);
        if (!(val & ~Q_LOCKED)) {
            while (__atomic_load_n(&q.b.locked, __ATOMIC_ACQUIRE)) PAUSE();
            __atomic_store_n(&q.h.locked_pending, Q_LOCKED, __ATOMIC_RELAXED);  /* clear_pending_set_locked */
            return P_PENDING;
        }
        if (!(val & Q_PENDING)) __atomic_fetch_and(&q.val, ~Q_PENDING, __ATOMIC_RELAXED);
    }
    struct node *n = &nodes[me];
    n->next = NULL;
    n->locked = 0;
    /* queued_spin_trylock: "we touched a (possibly) cold cacheline in the per-cpu queue node; attempt the
       trylock once more" (v4.16+ qspinlock.c, before xchg_tail) */
    uint32_t zero = 0;
    if (!__atomic_load_n(&q.val, __ATOMIC_RELAXED) &&
        __atomic_compare_exchange_n(&q.val, &zero, Q_LOCKED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return P_QUEUE;
    uint32_t mytail = (uint32_t)(me + 1) << Q_TAIL_SHIFT;
    /* xchg_tail */
    uint32_t old = (uint32_t)__atomic_exchange_n(&q.h.tail, (uint16_t)(me + 1), __ATOMIC_RELEASE) << Q_TAIL_SHIFT;
    if (old) {
        struct node *prev = &nodes[(old >> Q_TAIL_SHIFT) - 1];
        __atomic_store_n(&prev->next, n, __ATOMIC_RELAXED);
        while (!__atomic_load_n(&n->locked, __ATOMIC_ACQUIRE)) PAUSE();
    }
    /* queue head: wait for the owner and the pending waiter to go away */
    while ((val = __atomic_load_n(&q.val, __ATOMIC_ACQUIRE)) & Q_LOCKED_PENDING) PAUSE();
    if ((val & ~Q_LOCKED_PENDING) == mytail &&
        __atomic_compare_exchange_n(&q.val, &val, Q_LOCKED, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return P_QUEUE;  /* nobody queued behind */
    __atomic_store_n(&q.b.locked, 1, __ATOMIC_RELAXED);  /* set_locked */
    struct node *next;
    while (!(next = __atomic_load_n(&n->next, __ATOMIC_RELAXED))) PAUSE();
    __atomic_store_n(&next->locked, 1, __ATOMIC_RELEASE);  /* arch_mcs_spin_unlock_contended */
    return P_QUEUE;
}

static inline __attribute__((always_inline)) int lock_impl(int me, unsigned *pauses, uint32_t *order) {
    if (!use_q) {  /* arch_spin_lock: xadd the tail ticket, spin reading head */
        uint32_t old = __atomic_fetch_add(&ticket.head_tail, 1u << 16, __ATOMIC_ACQUIRE);
        uint16_t mine = (uint16_t)(old >> 16);
        *order = mine;
        if (__atomic_load_n(&ticket.t.head, __ATOMIC_ACQUIRE) == mine) return P_TICKET_NOWAIT;
        while (__atomic_load_n(&ticket.t.head, __ATOMIC_ACQUIRE) != mine) PAUSE();
        return P_TICKET_WAIT;
    }
    uint32_t val = 0;  /* queued_spin_lock: cmpxchg 0 -> locked, else the slowpath */
    int path = P_FAST;
    if (!__atomic_compare_exchange_n(&q.val, &val, Q_LOCKED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        path = q_slowpath(me, val, pauses);
    return path;
}

static void lock(int me) {
    unsigned p = 0;
    uint32_t o;
    (void)lock_impl(me, &p, &o);
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

static int use_pingpong, use_owned;

/* trace mode: per thread and acquisition, its place in the total order, path, pause loops, TSC at lock entry
 * and at acquisition (tracet only) */
static int trace, trace_tsc, trace_order_tsc, xfer;
static uint32_t seq0;
struct rec { uint32_t order, pauses; uint8_t path; uint64_t t_in, t_acq; };
static struct rec *recs[2];
static double (*tcols)[9], *pp_ns;
#define PP_TRACE 200

static void traced(int me) {
    struct rec *r = recs[me];
    for (long i = 0; i < iters; i++) {
        unsigned p = 0;
        uint32_t o = 0;
        busy(think_ns);
        uint64_t t_in = trace_tsc ? tsc() : 0;
        int path = lock_impl(me, &p, &o);
        uint64_t t_acq = trace_tsc ? tsc() : 0;
        if (use_q && !trace_order_tsc) { o = qline.seq; qline.seq = o + 1; }
        busy(hold_ns);
        unlock(me);
        if (trace_order_tsc) t_acq = tsc();  /* traceo: the order of the releases, by TSC */
        r[i] = (struct rec){o, p, (uint8_t)path, t_in, t_acq};
    }
}

static void analyse(long s) {
    long n = 2 * iters, handoffs = 0, run = 0, maxrun = 0, fast = 0, pend = 0, queue = 0;
    double pauses = 0, maxwait = 0, maxwait_pp = 0, pp_sum = 0;
    long pp_n = 0;
    signed char *owner = malloc((size_t)n);
    memset(owner, -1, (size_t)n);
    if (trace_order_tsc)  /* merge the two threads' release times (each thread's are increasing) */
        for (long i = 0, a = 0, b = 0; i < n; i++)
            owner[i] = (signed char)(b >= iters || (a < iters && recs[0][a].t_acq < recs[1][b].t_acq) ? (a++, 0) : (b++, 1));
    for (int t = 0; t < 2; t++)
        for (long i = 0; i < iters; i++) {
            struct rec *r = &recs[t][i];
            uint32_t rel = use_q ? r->order - seq0 : (uint16_t)(r->order - seq0);
            if (!trace_order_tsc && rel < (uint32_t)n) owner[rel] = (signed char)t;
            fast += r->path == P_FAST || r->path == P_TICKET_NOWAIT;
            pend += r->path == P_PENDING;
            queue += r->path == P_QUEUE;
            pauses += r->pauses;
            if (trace_tsc && !trace_order_tsc && r->pauses) {
                double w = (double)(r->t_acq - r->t_in) / tsc_per_ns, pp = w / r->pauses;
                pp_sum += pp;
                pp_n++;
                if (w > maxwait) { maxwait = w; maxwait_pp = pp; }
            }
        }
    for (long i = 0; i < n; i++) {
        if (i && owner[i] != owner[i - 1]) { handoffs++; run = 0; }
        if (++run > maxrun) maxrun = run;
    }
    free(owner);
    double *c = tcols[s];
    c[0] = (double)handoffs / (double)n;
    c[1] = (double)fast / (double)n;
    c[2] = (double)pend / (double)n;
    c[3] = (double)queue / (double)n;
    c[4] = (double)maxrun;
    c[5] = pauses / (double)n;
    c[6] = handoffs ? out[s] * (double)n / (double)handoffs : 0;  /* ns per hand-off */
    c[7] = maxwait;
    c[8] = pp_n ? maxwait_pp / (pp_sum / (double)pp_n) : 0;  /* longest wait's ns/pause over the mean */
}

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    long round = 0;
    pin(cpus[me]);
    for (long s = 0; s < samples; s++) {
        spin_barrier(&round);
        if (trace || xfer) {  /* the line transfer right now (the vCPUs' placement can change within a run) */
            if (me == 0) { seq0 = use_q ? qline.seq : ticket.t.tail; ball = 0; }  /* nobody holds the lock */
            spin_barrier(&round);
            uint64_t p0 = now_ns();
            pingpong(me, PP_TRACE);
            if (me == 0) pp_ns[s] = (double)(now_ns() - p0) / (2.0 * PP_TRACE);
            spin_barrier(&round);
        }
        uint64_t t0 = now_ns(), c0 = cpu_ns();
        if (use_pingpong) {
            if (me == 0) ball = 0;
            spin_barrier(&round);
            t0 = now_ns();
            c0 = cpu_ns();
            pingpong(me, iters);
        } else if (use_owned) {
            if (me == 0)
                for (long i = 0; i < iters; i++) {
                    busy(think_ns);
                    lock(me);
                    busy(hold_ns);
                    unlock(me);
                }
        } else if (trace) {
            traced(me);
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
            out[s] = (double)wall / ((use_owned ? 1.0 : 2.0) * (double)iters);
            share[s] = use_owned ? (double)thread_cpu[0] / (double)wall  /* A alone did the work */
                                 : (double)(thread_cpu[0] + thread_cpu[1]) / (2.0 * (double)wall);
            if (trace) analyse(s);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) { fprintf(stderr, "usage: lockbench [owned-]ticket|[owned-]queued|pingpong A B SAMPLES ITERS HOLD_NS THINK_NS [trace|tracet|traceo|xfer]\n"); return 2; }
    use_owned = !strncmp(argv[1], "owned-", 6);
    use_q = !strcmp(argv[1] + (use_owned ? 6 : 0), "queued");
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
    if (argc > 8 && !strncmp(argv[8], "trace", 5)) {
        trace = 1;
        trace_tsc = !strcmp(argv[8], "tracet");
        trace_order_tsc = !strcmp(argv[8], "traceo");
        for (int i = 0; i < 2; i++) recs[i] = calloc((size_t)iters, sizeof(struct rec));
        tcols = calloc((size_t)samples, sizeof *tcols);
        pp_ns = calloc((size_t)samples, sizeof *pp_ns);
    } else if (argc > 8 && !strcmp(argv[8], "xfer")) {
        xfer = 1;
        pp_ns = calloc((size_t)samples, sizeof *pp_ns);
    }
    calibrate();
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (long s = 0; s < samples; s++) {
        printf("%.2f %.3f", out[s], share[s]);
        if (trace)
            for (int c = 0; c < 9; c++) printf(" %.4g", tcols[s][c]);
        if (trace || xfer) printf(" %.4g", pp_ns[s]);
        printf("\n");
    }
    return 0;
}
