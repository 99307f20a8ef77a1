/* STREAM-style triad bandwidth probe: a[i] = b[i] + s * c[i] over arrays far larger than
 * the caches, OpenMP threads as asked. Prints the best of several runs in GB/s, counting
 * 3 arrays x 8 bytes per element as STREAM does (write-allocate traffic not counted). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : (size_t)40 << 20; /* 40M doubles = 320 MB */
    int reps = 10;
    omp_set_num_threads(threads);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) { fprintf(stderr, "out of memory\n"); return 1; }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) { a[i] = 0.0; b[i] = 1.0; c[i] = 2.0; }
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        t = omp_get_wtime() - t;
        if (t < best) best = t;
    }
    double check = 0;
    for (size_t i = 0; i < n; i += 4096) check += a[i];
    printf("%.3f\n", 3.0 * 8.0 * (double)n / best / 1e9);
    fprintf(stderr, "triad threads=%d n=%zu best=%.4fs check=%g\n", threads, n, best, check);
    return 0;
}
