// bf16 GEMM on shapes that are not multiples of the tile: C[M,N] (bf16) = relu?(A[M,K] B[K,N])
// with A and B row-major bf16.  A CTA of 4 warps computes a 32 x 32 tile; each k16 step the
// tiles are staged in shared memory with bounds guards (zero outside; A by cp.async with
// zero-fill, so K must be a multiple of 8), A read by ldmatrix.x4
// and B (row-major, so k-major) by ldmatrix.x4.trans.  Stores are guarded per element; the
// result is packed with cvt.rn(.relu).bf16x2.f32.
#include <cuda_bf16.h>
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128)
bf16_guarded(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
             __nv_bfloat16* __restrict__ C, int M, int N, int K, int relu) {
  __shared__ __align__(16) __nv_bfloat16 sA[32][16 + 8];  // padded rows: 48 bytes
  __shared__ __align__(16) __nv_bfloat16 sB[16][32 + 8];  // 80 bytes
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int bm = blockIdx.y * 32, bn = blockIdx.x * 32;
  const int wm = (warp / 2) * 16, wn = (warp % 2) * 16;
  const __nv_bfloat16 zero = __float2bfloat16(0.f);
  float acc[2][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    if (tid < 64) {  // A: 32 rows x 2 chunks of 8, cp.async with zero-fill past M and K (K % 8 == 0)
      int r = tid / 2, c = (tid % 2) * 8;
      bool ok = bm + r < M && k0 + c < K;
      const __nv_bfloat16* src = ok ? A + (size_t)(bm + r) * K + k0 + c : A;
      cp_async_16_zfill(smem_addr(&sA[r][c]), src, ok);
    }
    cp_async_commit();
    for (int i = tid; i < 32 * 16; i += 128) {
      int kr = i / 32, n = i % 32;
      sB[kr][n] = (k0 + kr < K && bn + n < N) ? B[(size_t)(k0 + kr) * N + bn + n] : zero;
    }
    cp_async_wait<0>();
    __syncthreads();
    uint32_t a[4], b[4];
    ldsm_x4(a, smem_addr(&sA[wm + lane % 16][(lane / 16) * 8]));
    // matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
    ldsm_x4_trans(b, smem_addr(&sB[(lane % 8) + ((lane / 8) % 2) * 8][wn + (lane / 16) * 8]));
    mma_bf16_16816(acc[0], a, b[0], b[1]);
    mma_bf16_16816(acc[1], a, b[2], b[3]);
    __syncthreads();
  }
  const int g = lane / 4, t = lane % 4;
  for (int ni = 0; ni < 2; ++ni)
    for (int h = 0; h < 2; ++h) {
      int r = bm + wm + g + h * 8, c = bn + wn + ni * 8 + t * 2;
      __nv_bfloat162 v = relu ? __hmax2(__floats2bfloat162_rn(acc[ni][2 * h], acc[ni][2 * h + 1]),
                                        __bfloat162bfloat162(zero))
                              : __floats2bfloat162_rn(acc[ni][2 * h], acc[ni][2 * h + 1]);
      if (r < M && c < N) C[(size_t)r * N + c] = v.x;
      if (r < M && c + 1 < N) C[(size_t)r * N + c + 1] = v.y;
    }
}
