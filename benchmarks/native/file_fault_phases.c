/* Level 2 on the host (issues 15/22): the phases of will-it-scale page_fault3's round, timed apart.
 *
 * For each size (MiB) on the command line: a memfd of that size is filled once (the page cache), then
 * R rounds of
 *   - mmap(MAP_SHARED), one store per page (the shared write fault + the user store), munmap;
 *   - mmap(MAP_SHARED), madvise(MADV_POPULATE_WRITE) (the same fault path in the kernel, without the
 *     exception and without a user store), munmap;
 *   - mmap(MAP_SHARED) and one store per page in a shuffled page order (the same faults; no sequential
 *     stream of struct page, PTE or xarray lines), munmap.
 * Each phase: thread CPU time per page, the minimum over the rounds (other work only adds time).
 *
 *   cc -O2 -o /tmp/ffp benchmarks/native/file_fault_phases.c && /tmp/ffp CPU ROUNDS 4 128 [4 128]
 * Results: docs/validation.md "Level 2, session 11".
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double tnow(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void upd(double *best, double v) { if (v < *best) *best = v; }

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CPU ROUNDS MIB [MIB ...]\n", argv[0]);
        return 2;
    }
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(atoi(argv[1]), &s);
    sched_setaffinity(0, sizeof s, &s);
    int R = atoi(argv[2]);
    for (int k = 3; k < argc; k++) {
        size_t sz = (size_t)atoi(argv[k]) << 20, n = sz / 4096;
        size_t *perm = malloc(n * sizeof *perm);
        for (size_t i = 0; i < n; i++) perm[i] = i;
        srand(1);
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)rand() % (i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int fd = memfd_create("ffp", 0);
        if (fd < 0 || ftruncate(fd, (off_t)sz)) return 1;
        char *p = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        for (size_t i = 0; i < n; i++) p[i * 4096] = 1;
        munmap(p, sz);
        double b[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
        for (int r = 0; r < R; r++) {
            for (int mode = 0; mode < 3; mode++) {
                p = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                double t0 = tnow();
                if (mode == 0)
                    for (size_t i = 0; i < n; i++) ((volatile char *)p)[i * 4096] = 1;
                else if (mode == 1) {
                    if (madvise(p, sz, MADV_POPULATE_WRITE)) { perror("madvise"); return 1; }
                } else
                    for (size_t i = 0; i < n; i++) ((volatile char *)p)[perm[i] * 4096] = 1;
                double t1 = tnow();
                munmap(p, sz);
                double t2 = tnow();
                upd(&b[2 * mode], (t1 - t0) / n);
                upd(&b[2 * mode + 1], (t2 - t1) / n);
            }
        }
        printf("%4zu MiB: store faults %5.0f + munmap %4.0f | MADV_POPULATE_WRITE %5.0f + munmap %4.0f | "
               "shuffled store faults %5.0f + munmap %4.0f ns/page (min of %d)\n",
               sz >> 20, b[0], b[1], b[2], b[3], b[4], b[5], R);
        close(fd);
        free(perm);
    }
    return 0;
}
