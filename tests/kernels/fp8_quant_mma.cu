// Quantise f32 activations to e4m3 and weights to e5m2 on the fly (cvt.rn.satfinite
// .e4m3x2/.e5m2x2.f32 through cuda_fp8.h), pack four bytes per register, and multiply with
// mma.m16n8k32.e4m3.e5m2 (f32 accumulate).  Also writes the quantised A so the conversion
// itself is compared.  A CTA of 2 warps covers a 16 x 16 tile of D.
#include <cuda_fp8.h>
#include "common.cuh"

__device__ __forceinline__ uint32_t quant4_e4m3(const float* p, float s) {
  __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(p[0] * s, p[1] * s), __NV_SATFINITE, __NV_E4M3);
  __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(p[2] * s, p[3] * s), __NV_SATFINITE, __NV_E4M3);
  return (uint32_t)lo | ((uint32_t)hi << 16);
}
__device__ __forceinline__ uint32_t quant4_e5m2(float x0, float x1, float x2, float x3, float s) {
  __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(x0 * s, x1 * s), __NV_SATFINITE, __NV_E5M2);
  __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(x2 * s, x3 * s), __NV_SATFINITE, __NV_E5M2);
  return (uint32_t)lo | ((uint32_t)hi << 16);
}

// A: M x K row-major f32; B: K x N row-major f32; D: M x N f32; Aq: M x K e4m3 bytes
extern "C" __global__ void __launch_bounds__(64)
fp8_quant_mma(const float* __restrict__ A, const float* __restrict__ B, float scale_a, float scale_b,
              float inv_scale, float* __restrict__ D, uint8_t* __restrict__ Aq, int M, int N, int K) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * 16, n0 = (blockIdx.x * 2 + warp) * 8;
  const bool write_q = blockIdx.x == 0 && warp == 0;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += 32) {
    uint32_t a[4], b[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int r = m0 + g + (i & 1) * 8, c = k0 + t * 4 + (i >> 1) * 16;
      a[i] = quant4_e4m3(&A[(size_t)r * K + c], scale_a);
      if (write_q) *reinterpret_cast<uint32_t*>(&Aq[(size_t)r * K + c]) = a[i];
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int k = k0 + t * 4 + i * 16, n = n0 + g;
      b[i] = quant4_e5m2(B[(size_t)k * N + n], B[(size_t)(k + 1) * N + n], B[(size_t)(k + 2) * N + n],
                         B[(size_t)(k + 3) * N + n], scale_b);
    }
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  int r = m0 + g, c = n0 + t * 2;
  D[(size_t)r * N + c] = acc[0] * inv_scale;
  D[(size_t)r * N + c + 1] = acc[1] * inv_scale;
  D[(size_t)(r + 8) * N + c] = acc[2] * inv_scale;
  D[(size_t)(r + 8) * N + c + 1] = acc[3] * inv_scale;
}
