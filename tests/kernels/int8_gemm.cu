// W8A8-style int8 GEMM, one warp per 16 x 8 tile: activations quantised on the fly with
// cvt.rni.sat.s8.f32 and packed with prmt, mma.m16n8k32.s8.s8.s32, then a dequantising
// epilogue to f16 written through stmatrix into shared memory and copied out with 16-byte
// vector accesses; movmatrix transposes one fragment (written out as register words).
#include "common.cuh"

__device__ __forceinline__ uint32_t q8(float x) {
  uint32_t r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ uint32_t pack4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  uint32_t lo, hi, r;
  asm("prmt.b32 %0, %1, %2, 0x0040;" : "=r"(lo) : "r"(a), "r"(b));  // bytes a0, b0
  asm("prmt.b32 %0, %1, %2, 0x0040;" : "=r"(hi) : "r"(c), "r"(d));
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(r) : "r"(lo), "r"(hi));
  return r;
}

// A: M x K f32 (row-major), a_inv: per-row 1/scale; Bq: N x K s8; a_s, b_s: dequant scales
extern "C" __global__ void __launch_bounds__(32)
int8_gemm(const float* __restrict__ A, const float* __restrict__ a_inv, const float* __restrict__ a_s,
          const int8_t* __restrict__ Bq, const float* __restrict__ b_s, int* __restrict__ D32,
          __half* __restrict__ Dh, uint32_t* __restrict__ Dt, int M, int N, int K) {
  __shared__ __align__(16) __half tile[16 * 8];
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
  int acc[4] = {0, 0, 0, 0};
  const float inv0 = a_inv[m0 + g], inv1 = a_inv[m0 + g + 8];
  for (int k0 = 0; k0 < K; k0 += 32) {
    uint32_t a[4], b[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int r = m0 + g + (i & 1) * 8, c = k0 + 4 * t + (i >> 1) * 16;
      float inv = (i & 1) ? inv1 : inv0;
      const float* p = A + (size_t)r * K + c;
      a[i] = pack4(q8(p[0] * inv), q8(p[1] * inv), q8(p[2] * inv), q8(p[3] * inv));
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      b[i] = *reinterpret_cast<const uint32_t*>(Bq + (size_t)(n0 + g) * K + k0 + 4 * t + 16 * i);
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  const int c = n0 + 2 * t;
  D32[(size_t)(m0 + g) * N + c] = acc[0];
  D32[(size_t)(m0 + g) * N + c + 1] = acc[1];
  D32[(size_t)(m0 + g + 8) * N + c] = acc[2];
  D32[(size_t)(m0 + g + 8) * N + c + 1] = acc[3];
  const float s0 = a_s[m0 + g], s1 = a_s[m0 + g + 8], bs0 = b_s[c], bs1 = b_s[c + 1];
  __half2 h0 = __floats2half2_rn(acc[0] * s0 * bs0, acc[1] * s0 * bs1);
  __half2 h1 = __floats2half2_rn(acc[2] * s1 * bs0, acc[3] * s1 * bs1);
  uint32_t r0 = *reinterpret_cast<uint32_t*>(&h0), r1 = *reinterpret_cast<uint32_t*>(&h1);
  uint32_t addr = smem_addr(&tile[(lane % 16) * 8]);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1));
  uint32_t rt;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(rt) : "r"(r0));
  Dt[((size_t)blockIdx.y * gridDim.x + blockIdx.x) * 32 + lane] = rt;
  __syncwarp();
  if (lane < 16) {
    uint4 row;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(row.x), "=r"(row.y), "=r"(row.z), "=r"(row.w) : "r"(smem_addr(&tile[lane * 8])));
    *reinterpret_cast<uint4*>(Dh + (size_t)(m0 + lane) * N + n0) = row;
  }
}
