// CUDA's half-precision math (inline asm in cuda_fp16.hpp/cuda_bf16.hpp), device printf and assert.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cassert>

extern "C" __global__ void half_math(const __half *x, const __nv_bfloat16 *y, __half *out, __nv_bfloat16 *outb, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half h = x[i];
    __half2 h2 = __halves2half2(h, __hneg(h));
    __half2 e2 = h2exp(h2);
    out[i * 6 + 0] = hexp(h);
    out[i * 6 + 1] = __low2half(e2);
    out[i * 6 + 2] = __high2half(e2);
    out[i * 6 + 3] = hlog(__habs(h) + __float2half(1.0f));
    out[i * 6 + 4] = hsqrt(__habs(h));
    out[i * 6 + 5] = htanh_approx(h);
    __nv_bfloat16 b = y[i];
    outb[i * 3 + 0] = hexp(b);
    outb[i * 3 + 1] = hrcp(b);
    outb[i * 3 + 2] = __hfma(b, b, b);
}

extern "C" __global__ void hello(const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && (i % 3) == 0)
        printf("thread %d (cta %d) x=%f %e %g |%5d|%-5d|%05.1f| %x %X %o %c %s %lld %u\n",
               i, (int)blockIdx.x, x[i], x[i], (double)x[i], i, -i, (double)x[i], 255 + i, 255 + i, 8 + i,
               'A' + i % 26, (i & 1) ? "odd" : "even", -1234567890123LL * i, (unsigned)(-i));
}

extern "C" __global__ void checked(const int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(x[i] >= 0);
}
