// f64 GEMM with DMMA: D = alpha * A[M,K] B[K,N] + beta * C, all row-major f64.  Each warp
// owns an 8 x 8 tile and steps K by 4 with mma.m8n8k4.f64; the epilogue uses fma.rn.f64.
// A CTA of 4 warps covers 16 x 16.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128)
dmma_f64(const double* __restrict__ A, const double* __restrict__ B, const double* __restrict__ C,
         double* __restrict__ D, double alpha, double beta, int M, int N, int K) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * 16 + (warp / 2) * 8, n0 = blockIdx.x * 16 + (warp % 2) * 8;
  double d0 = 0.0, d1 = 0.0;
  for (int k0 = 0; k0 < K; k0 += 4) {
    double a = A[(size_t)(m0 + g) * K + k0 + t];
    double b = B[(size_t)(k0 + t) * N + n0 + g];
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(d0), "+d"(d1) : "d"(a), "d"(b));
  }
  size_t i = (size_t)(m0 + g) * N + n0 + 2 * t;
  D[i] = fma(alpha, d0, beta * C[i]);
  D[i + 1] = fma(alpha, d1, beta * C[i + 1]);
}
