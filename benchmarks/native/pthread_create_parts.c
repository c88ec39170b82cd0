/* The parts of glibc's pthread_create as the calling thread pays them (nptl/allocatestack.c
 * allocate_stack + create_thread), each timed alone by the caller's thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID), minimum over ROUNDS x N, the timer's own cost removed:
 *   syscall   getppid(): syscall entry/exit
 *   mmap      mmap of an 8 MiB + 4 KiB private anonymous stack (glibc's default: RLIMIT_STACK + guard)
 *   mprotect  mprotect(PROT_NONE) of its lowest page on a fresh mapping: the guard, a VMA split
 *   touch     the first write to the mapping's top page (struct pthread): one anonymous fault
 *   clone     pthread_create with a caller-given stack (no allocate_stack mmap): clone + copy_process
 *             + wake_up_new_task, as the parent sees it
 *   fork      fork() of this small process (a few MiB mapped: the binary, libc, the stacks above), as the
 *             parent sees it: copy_process with dup_mmap; the child exits at once and is reaped untimed
 * Build: gcc -O2 -pthread pthread_create_parts.c -o pcp && ./pcp */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define N 256
#define ROUNDS 5
#define STACK ((8UL << 20) + 4096)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *idle(void *a) { return a; }

int main(void) {
    static char *maps[N];
    double best[6] = {1e18, 1e18, 1e18, 1e18, 1e18, 1e18}, tmr = 1e18;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) { double a = now(), b = now(); if (b - a < tmr) tmr = b - a; }
        for (int i = 0; i < N; i++) {
            double a = now(); syscall(SYS_getppid); double b = now();
            if (b - a < best[0]) best[0] = b - a;
        }
        for (int i = 0; i < N; i++) {
            double a = now();
            maps[i] = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
            double b = now();
            if (maps[i] == MAP_FAILED) { perror("mmap"); return 1; }
            if (b - a < best[1]) best[1] = b - a;
        }
        for (int i = 0; i < N; i++) {
            double a = now(); int rc = mprotect(maps[i], 4096, PROT_NONE); double b = now();
            if (rc) { perror("mprotect"); return 1; }
            if (b - a < best[2]) best[2] = b - a;
        }
        for (int i = 0; i < N; i++) {
            volatile char *top = maps[i] + STACK - 64;
            double a = now(); *top = 1; double b = now();
            if (b - a < best[3]) best[3] = b - a;
        }
        for (int i = 0; i < N; i++) {
            pthread_attr_t at; pthread_t t;
            pthread_attr_init(&at);
            pthread_attr_setstack(&at, maps[i] + 4096, STACK - 4096);
            double a = now(); int rc = pthread_create(&t, &at, idle, NULL); double b = now();
            if (rc) { fprintf(stderr, "pthread_create %d\n", rc); return 1; }
            if (b - a < best[4]) best[4] = b - a;
            pthread_join(t, NULL);
            pthread_attr_destroy(&at);
        }
        for (int i = 0; i < N; i++) munmap(maps[i], STACK);
        for (int i = 0; i < N / 4; i++) {
            double a = now(); pid_t pid = fork(); if (pid == 0) _exit(0); double b = now();
            if (pid < 0) { perror("fork"); return 1; }
            waitpid(pid, NULL, 0);
            if (b - a < best[5]) best[5] = b - a;
        }
    }
    const char *name[6] = {"syscall", "mmap", "mprotect", "touch", "clone", "fork"};
    printf("timer %.0f ns\n", tmr);
    for (int k = 0; k < 6; k++) printf("%-8s %6.0f ns (min of %d, timer removed)\n", name[k], best[k] - tmr, k == 5 ? ROUNDS * N / 4 : ROUNDS * N);
    return 0;
}
