/* Level 2 on the host (issue 22, session 12): munmap of a populated MAP_SHARED shmem mapping, per page.
 *
 * For each size (MiB): a memfd of that size is filled once (the page cache), then R rounds of, each timed
 * around munmap alone (thread CPU time, ns per page; the minimum and the median over the rounds):
 *   dirty   mmap(MAP_SHARED) + MADV_POPULATE_WRITE: every PTE present, dirty and young (page_fault3's state
 *           at munmap: zap_pte_range's set_page_dirty, delayed rmap and force flush per PTE table);
 *   clean   mmap(MAP_SHARED) + MADV_POPULATE_READ: present, young, clean (no delayed rmap, no force flush;
 *           the rmap at once, the pages released at tlb_finish_mmu);
 *   zero    mmap(MAP_PRIVATE|MAP_ANONYMOUS) + MADV_POPULATE_READ: the zero page mapped (the PTE walk and
 *           clear, no struct page work: vm_normal_page is NULL);
 *   none    mmap(MAP_SHARED), untouched (the fixed part: detach, free_pgd_range, tlb_finish_mmu).
 * With "loop SECONDS" instead of a round count: dirty rounds for that long, for `perf record` (timed only
 * in total).
 *
 *   cc -O2 -o /tmp/smu benchmarks/native/shmem_munmap.c && /tmp/smu CPU ROUNDS 4 16 64 128
 *   /tmp/smu CPU loop 20 128     # perf record -g -e cpu-clock -- /tmp/smu 1 loop 20 128
 * Results: docs/fault-front-half.md "Session 12".
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double tnow(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { DIRTY, CLEAN, ZERO, NONE, NMODES };
static const char *names[NMODES] = {"dirty", "clean", "zero", "none"};

static double one(int fd, size_t sz, int mode) {
    int anon = mode == ZERO;
    char *p = mmap(0, sz, PROT_READ | PROT_WRITE, anon ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED,
                   anon ? -1 : fd, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    if (mode == DIRTY && madvise(p, sz, MADV_POPULATE_WRITE)) { perror("madvise"); exit(1); }
    if ((mode == CLEAN || mode == ZERO) && madvise(p, sz, MADV_POPULATE_READ)) { perror("madvise"); exit(1); }
    double t0 = tnow(CLOCK_THREAD_CPUTIME_ID);
    munmap(p, sz);
    return tnow(CLOCK_THREAD_CPUTIME_ID) - t0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CPU ROUNDS|loop SECONDS MIB [MIB ...]\n", argv[0]);
        return 2;
    }
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(atoi(argv[1]), &s);
    sched_setaffinity(0, sizeof s, &s);
    int loop = !strcmp(argv[2], "loop");
    int k0 = loop ? 4 : 3;
    int R = loop ? 0 : atoi(argv[2]);
    for (int k = k0; k < argc; k++) {
        size_t sz = (size_t)atoi(argv[k]) << 20, n = sz / 4096;
        int fd = memfd_create("smu", 0);
        if (fd < 0 || ftruncate(fd, (off_t)sz)) return 1;
        char *p = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        for (size_t i = 0; i < n; i++) p[i * 4096] = 1;
        munmap(p, sz);
        if (loop) {
            double end = tnow(CLOCK_MONOTONIC) + atof(argv[3]) * 1e9, tot = 0;
            long c = 0;
            while (tnow(CLOCK_MONOTONIC) < end) {
                tot += one(fd, sz, DIRTY);
                c++;
            }
            printf("%4zu MiB: %ld dirty munmaps, %.1f ns/page on average\n", sz >> 20, c, tot / c / n);
            close(fd);
            continue;
        }
        double *v[NMODES];
        for (int m = 0; m < NMODES; m++) v[m] = malloc(R * sizeof(double));
        for (int r = 0; r < R; r++)
            for (int m = 0; m < NMODES; m++) v[m][r] = one(fd, sz, m) / n;
        printf("%4zu MiB (%zu pages), munmap ns/page, min / median / max of %d:", sz >> 20, n, R);
        for (int m = 0; m < NMODES; m++) {
            qsort(v[m], R, sizeof(double), cmp);
            printf("  %s %.1f / %.1f / %.1f", names[m], v[m][0], v[m][R / 2], v[m][R - 1]);
            free(v[m]);
        }
        printf("\n");
        close(fd);
    }
    return 0;
}
