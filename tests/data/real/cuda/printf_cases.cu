// Device printf / assert corner cases for the tests (not for the GPU: some are errors on purpose).
#include <cstdio>
#include <cassert>

extern "C" __global__ void fmt_bad(int v) { printf("value %y\n", v); }

extern "C" __global__ void str_arg(const char *s) { printf("[%s] [%8.3s] [%-6s|] [%p]\n", s, s, s, s); }

extern "C" __global__ void divergent(const int *x) {
    int t = threadIdx.x;
    if (t & 1) printf("odd %d\n", t);
    else printf("even %d then %d\n", t, t * 10);
    if (t >= 2) assert(x[t] == 0);
}

extern "C" __global__ void widths(long long a, unsigned short b, signed char c, double d, int n) {
    printf("%hhd %hu %lld %llx %*d|%-*.*f|%.0f %5.2e %G %a\n", c, b, a, a, n, (int)c, n, 2, d, d, d, d, d);
}

extern "C" __global__ void uses_malloc(int n) {
    int *p = (int *)malloc(n * sizeof(int));
    p[0] = n;
    printf("%d\n", p[0]);
    free(p);
}

// One feature per call: how the GPU's printf reads each conversion's argument.
extern "C" __global__ void probe(long long a, unsigned short b, signed char c, double d, int n, int i, const char *s) {
    printf("A %hhd %hu|\n", c, b);
    printf("B %d %hu|\n", i, b);
    printf("C %llx|\n", a);
    printf("D %d %llx|\n", i, a);
    printf("E %*d|\n", n, i);
    printf("F %.*f|\n", n, d);
    printf("G %-*.*f|\n", n, 2, d);
    printf("H %lld %d|\n", a, i);
    printf("I %c%c%c|\n", 'x', 'y', 'z');
    printf("J %5.2e %G %a|\n", d, d, d);
    printf("K %hd %hhu %d|\n", (short)-2, (unsigned char)200, i);
    printf("L %s %p|\n", s, s);
    printf("M %x %lx %ld %lu|\n", i, a, a, a);
    printf("N %d %f %d|\n", i, d, n);
    printf("O %i %o %#x %+d % d|\n", i, i, i, i, i);
}
