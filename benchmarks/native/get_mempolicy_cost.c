/* get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) per 4 KiB page of a populated buffer, as the calling thread
 * pays it (CLOCK_THREAD_CPUTIME_ID), one thread, nothing contended:
 *   syscall  getppid(): syscall entry/exit
 *   thp      one call per 4 KiB address of a 64 MiB MADV_HUGEPAGE buffer (THP-mapped: follow_page_mask's
 *            huge-PMD path)
 *   4k       the same on a MADV_NOHUGEPAGE buffer (the PTE path)
 * Per call: the loop's total / calls, minimum over ROUNDS. Build: gcc -O2 get_mempolicy_cost.c -o gmc */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SIZE (64UL << 20)
#define ROUNDS 7
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static char *buffer(int advice) {
    char *p = mmap(NULL, SIZE + (2UL << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    p = (char *)(((unsigned long)p + (2UL << 20) - 1) & ~((2UL << 20) - 1));
    if (madvise(p, SIZE, advice)) { perror("madvise"); exit(1); }
    memset(p, 1, SIZE);
    return p;
}

static double per_call(char *p) {
    double best = 1e18;
    for (int r = 0; r < ROUNDS; r++) {
        double a = now();
        for (unsigned long off = 0; off < SIZE; off += 4096) {
            int node = -1;
            if (syscall(SYS_get_mempolicy, &node, NULL, 0, p + off, MPOL_F_NODE | MPOL_F_ADDR)) {
                perror("get_mempolicy"); exit(1);
            }
        }
        double b = now();
        if ((b - a) / (SIZE / 4096) < best) best = (b - a) / (SIZE / 4096);
    }
    return best;
}

int main(void) {
    double sc = 1e18;
    for (int r = 0; r < ROUNDS; r++) {
        double a = now();
        for (int i = 0; i < 16384; i++) syscall(SYS_getppid);
        double b = now();
        if ((b - a) / 16384 < sc) sc = (b - a) / 16384;
    }
    char *thp = buffer(MADV_HUGEPAGE), *small = buffer(MADV_NOHUGEPAGE);
    printf("syscall %.1f ns\nthp %.1f ns per call\n4k %.1f ns per call\n", sc, per_call(thp), per_call(small));
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "AnonHugePages", 13)) fputs(line, stdout);
    return 0;
}
