/* zone_path.c: one process, pinned, repeats page_fault1's round (mmap SIZE_MIB of anonymous memory,
 * MADV_NOHUGEPAGE, write one byte per 4 KiB page, munmap) and prints the per-page time of its rounds
 * (ns, CLOCK_MONOTONIC): min, 10th percentile, median. zone_path.py runs it at two PCP sizes
 * (vm.percpu_pagelist_high_fraction) to measure the zone->lock path per page (docs/validation-paths.md,
 * session 30).
 *
 *   cc -O2 -o zone_path zone_path.c && ./zone_path SIZE_MIB ROUNDS [CPU]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s SIZE_MIB ROUNDS [CPU]\n", argv[0]);
		return 2;
	}
	long size = atol(argv[1]) << 20;
	int rounds = atoi(argv[2]);
	if (size <= 0 || rounds <= 0) {
		fprintf(stderr, "SIZE_MIB and ROUNDS: integers >= 1\n");
		return 2;
	}
	if (argc > 3) {
		cpu_set_t s;
		CPU_ZERO(&s);
		CPU_SET(atoi(argv[3]), &s);
		if (sched_setaffinity(0, sizeof(s), &s)) {
			perror("sched_setaffinity");
			return 1;
		}
	}
	double *v = malloc(rounds * sizeof(double));
	long pages = size / 4096;
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ns();
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		madvise(p, size, MADV_NOHUGEPAGE);
		for (long i = 0; i < size; i += 4096)
			p[i] = 1;
		munmap(p, size);
		v[r] = (now_ns() - t0) / pages;
	}
	qsort(v, rounds, sizeof(double), cmp);
	printf("%.1f %.1f %.1f\n", v[0], v[rounds / 10], v[rounds / 2]);
	return 0;
}
