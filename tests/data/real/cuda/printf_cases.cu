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
