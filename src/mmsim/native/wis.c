/* will-it-scale's malloc1 loop for `mmsim native will-it-scale/malloc1` (see native/usemem.py, wis_malloc1).
 *
 * will-it-scale tests/malloc1.c runs, in C, `void *addr = malloc(SIZE); assert(addr != NULL); free(addr);
 * (*iterations)++;` as fast as it can. This runs the same pair `n` times through the process's own glibc;
 * the pointer goes through a volatile sink so that the compiler keeps the malloc/free pair (gcc -O2 deletes
 * an unused malloc/free pair outright). Built -O2 like will-it-scale (its Makefile's CFLAGS). */
#include <stdlib.h>

void *volatile wis_sink;

__attribute__((visibility("default"))) long wis_malloc1(unsigned long size, long n) {
    for (long i = 0; i < n; i++) {
        void *addr = malloc(size);
        if (addr == NULL) return -1;
        wis_sink = addr;
        free(addr);
    }
    return n;
}
