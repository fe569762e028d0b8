// 2:4 structured-sparse f16 GEMM: D[M,N] = A[M,K] * B[N,K]^T with A stored compressed
// (M x K/2 values) and its per-lane metadata words loaded from global memory, multiplied by
// mma.sp::ordered_metadata.m16n8k32 (selector 0).  A CTA of 2 warps covers a 16 x 16 tile.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(64)
sparse_mma(const __half* __restrict__ Ac, const uint32_t* __restrict__ meta, const __half* __restrict__ B,
           float* __restrict__ D, int M, int N, int K) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int mt = blockIdx.y, m0 = mt * 16, n0 = (blockIdx.x * 2 + warp) * 8;
  const int Kc = K / 2;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int kt = 0; kt < K / 32; ++kt) {
    const int kc = kt * 16;
    uint32_t a[4], b[4];
    a[0] = *reinterpret_cast<const uint32_t*>(&Ac[(size_t)(m0 + g) * Kc + kc + 2 * t]);
    a[1] = *reinterpret_cast<const uint32_t*>(&Ac[(size_t)(m0 + g + 8) * Kc + kc + 2 * t]);
    a[2] = *reinterpret_cast<const uint32_t*>(&Ac[(size_t)(m0 + g) * Kc + kc + 2 * t + 8]);
    a[3] = *reinterpret_cast<const uint32_t*>(&Ac[(size_t)(m0 + g + 8) * Kc + kc + 2 * t + 8]);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      b[i] = *reinterpret_cast<const uint32_t*>(&B[(size_t)(n0 + g) * K + kt * 32 + 2 * t + 8 * i]);
    uint32_t e = meta[((size_t)mt * (K / 32) + kt) * 32 + lane];
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  }
  int r = m0 + g, c = n0 + t * 2;
  *reinterpret_cast<float2*>(&D[(size_t)r * N + c]) = make_float2(acc[0], acc[1]);
  *reinterpret_cast<float2*>(&D[(size_t)(r + 8) * N + c]) = make_float2(acc[2], acc[3]);
}
