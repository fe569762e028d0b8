// Marlin-style weight-only int4 GEMM: C[M,N] (f16) = A[M,K] (f16) * dequant(Bq)[K,N].
// Each 32-bit word of Bq holds the 8 int4 weights one lane needs for a k16 x n16 block, in
// fragment order, so that two lop3 + one sub/fma per half2 turn it into mma B fragments
// (the 0x6400 exponent trick: 1024 + q is exact in f16).  Weights are unsigned with a zero
// point of 8 and a per-column f16 scale.  A is staged in dynamic shared memory with cp.async.
#include "common.cuh"

template <int LUT>
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c), "n"(LUT));
  return r;
}

// q's nibbles 0 and 4 -> lo half2, nibbles 1 and 5 -> hi half2, both as (value - 8)
__device__ __forceinline__ void dequant_pair(uint32_t q, __half2& lo, __half2& hi) {
  constexpr int AND_OR = (0xf0 & 0xcc) | 0xaa;  // (a & b) | c
  uint32_t l = lop3<AND_OR>(q, 0x000f000fu, 0x64006400u);  // 1024 + v
  uint32_t h = lop3<AND_OR>(q, 0x00f000f0u, 0x64006400u);  // 1024 + 16 v
  const uint32_t sub = 0x64086408u;  // 1032
  const uint32_t mul = 0x2c002c00u;  // 1/16
  const uint32_t add = 0xd480d480u;  // -72
  lo = __hsub2(*reinterpret_cast<__half2*>(&l), *reinterpret_cast<const __half2*>(&sub));
  hi = __hfma2(*reinterpret_cast<__half2*>(&h), *reinterpret_cast<const __half2*>(&mul),
               *reinterpret_cast<const __half2*>(&add));
}

__device__ __forceinline__ uint32_t as_u32(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }

extern "C" __global__ void __launch_bounds__(128)
marlin_w4a16(const __half* __restrict__ A, const int* __restrict__ Bq, const __half* __restrict__ scales,
             __half* __restrict__ C, int M, int N, int K, int* counter) {
  extern __shared__ __align__(16) uint4 sA[];  // M x K halves, row-major
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int chunks = M * K / 8;
  for (int i = tid; i < chunks; i += blockDim.x)
    cp_async_16(smem_addr(&sA[i]), reinterpret_cast<const uint4*>(A) + i);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int n16 = blockIdx.x * 4 + warp;  // this warp's 16 output columns
  const int g = lane / 4, t = lane % 4;
  const __half2 s0 = __half2half2(scales[n16 * 16 + g]);
  const __half2 s1 = __half2half2(scales[n16 * 16 + 8 + g]);
  const int mtiles = M / 16;
  float acc[4][2][4] = {};
  for (int kt = 0; kt < K / 16; ++kt) {
    uint32_t q = static_cast<uint32_t>(__ldg(&Bq[((size_t)kt * (N / 16) + n16) * 32 + lane]));
    __half2 b00, b01, b10, b11;
    dequant_pair(q, b00, b01);
    dequant_pair(q >> 8, b10, b11);
    uint32_t b[2][2] = {{as_u32(__hmul2(b00, s0)), as_u32(__hmul2(b01, s0))},
                        {as_u32(__hmul2(b10, s1)), as_u32(__hmul2(b11, s1))}};
    for (int mi = 0; mi < mtiles && mi < 4; ++mi) {
      uint32_t a[4];
      int row = mi * 16 + (lane % 16), col = kt * 16 + (lane / 16) * 8;
      ldsm_x4(a, smem_addr(reinterpret_cast<const __half*>(sA) + row * K + col));
      mma_f16_16816(acc[mi][0], a, b[0][0], b[0][1]);
      mma_f16_16816(acc[mi][1], a, b[1][0], b[1][1]);
    }
  }
  for (int mi = 0; mi < mtiles && mi < 4; ++mi)
    for (int ni = 0; ni < 2; ++ni) {
      int r = mi * 16 + g, c = n16 * 16 + ni * 8 + t * 2;
      *reinterpret_cast<__half2*>(&C[(size_t)r * N + c]) = __floats2half2_rn(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<__half2*>(&C[(size_t)(r + 8) * N + c]) = __floats2half2_rn(acc[mi][ni][2], acc[mi][ni][3]);
    }
  __syncthreads();
  if (tid == 0) {
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
    asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(counter), "r"(1) : "memory");
  }
}
