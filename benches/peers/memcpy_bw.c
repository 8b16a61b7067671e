/* Measured memory bandwidth: memcpy of a buffer far larger than any cache, on one thread
 * and on all threads (each copies its own contiguous slice), median of 11 timed copies
 * after 2 warm-up copies. The limit W5 (a bandwidth-bound workload) should be read against.
 * Build: gcc -O2 -march=native -fopenmp memcpy_bw.c -o memcpy_bw && ./memcpy_bw
 * Prints `name value unit` lines. GB/s counts the bytes COPIED (10^9 per second); the
 * memory system moves at least twice that (read the source, write the destination).   */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)512 << 20) /* 512 MiB per buffer: 1 GiB in all, well past L3 */
#define WARMUP 2
#define TIMED 11

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds for copying BYTES from src to dst with nt threads. */
static double copy_seconds(char *dst, const char *src, int nt) {
    double t[TIMED];
    for (int rep = 0; rep < WARMUP + TIMED; rep++) {
        double t0 = now();
#pragma omp parallel num_threads(nt)
        {
            size_t n = omp_get_num_threads(), i = omp_get_thread_num();
            size_t chunk = BYTES / n, start = i * chunk;
            memcpy(dst + start, src + start, i + 1 == n ? BYTES - start : chunk);
        }
        if (rep >= WARMUP) t[rep - WARMUP] = now() - t0;
    }
    qsort(t, TIMED, sizeof t[0], cmp);
    return t[TIMED / 2];
}

int main(void) {
    char *src = malloc(BYTES), *dst = malloc(BYTES);
    if (!src || !dst) {
        fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n", BYTES);
        return 1;
    }
    /* touch every page first, so the timed copies measure memory, not page faults */
    memset(src, 1, BYTES);
    memset(dst, 0, BYTES);
    int maxt = omp_get_max_threads();
    printf("memcpy_gbs_1thread %.1f GB/s\n", BYTES / copy_seconds(dst, src, 1) / 1e9);
    if (maxt > 1) printf("memcpy_gbs_%dthreads %.1f GB/s\n", maxt, BYTES / copy_seconds(dst, src, maxt) / 1e9);
    volatile char sink = dst[BYTES - 1];
    (void)sink;
    free(src);
    free(dst);
    return 0;
}
