// Tiled f16 GEMM, f32 accumulate: C[M,N] = A[M,K] * B[N,K]^T (both K-contiguous).
// A CTA of 4 warps computes a 64x64 tile; K advances 32 at a time through a two-stage
// cp.async pipeline into an XOR-swizzled shared layout read back with ldmatrix.x4.
#include "common.cuh"

#define BM 64
#define BN 64
#define BK 32
// a 64-byte row of BK halves holds 4 chunks of 16 bytes; chunk c of row r is stored at
// chunk c ^ ((r >> 1) & 3) so that the 8 rows read by one ldmatrix hit different banks
__device__ __forceinline__ int swz(int row, int chunk) { return row * 4 + (chunk ^ ((row >> 1) & 3)); }

extern "C" __global__ void __launch_bounds__(128)
gemm_f16_f32(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C,
             int M, int N, int K) {
  __shared__ __align__(128) uint4 sA[2][BM * 4];
  __shared__ __align__(128) uint4 sB[2][BN * 4];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto load_stage = [&](int stage, int k0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int idx = tid + i * 128, row = idx / 4, ch = idx % 4;
      cp_async_16(smem_addr(&sA[stage][swz(row, ch)]), A + (size_t)(bm + row) * K + k0 + ch * 8);
      cp_async_16(smem_addr(&sB[stage][swz(row, ch)]), B + (size_t)(bn + row) * K + k0 + ch * 8);
    }
    cp_async_commit();
  };

  const int ktiles = K / BK;
  load_stage(0, 0);
  for (int kt = 0; kt < ktiles; ++kt) {
    if (kt + 1 < ktiles) {
      load_stage((kt + 1) & 1, (kt + 1) * BK);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int st = kt & 1;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        int row = wm + mi * 16 + (lane % 16);
        ldsm_x4(a[mi], smem_addr(&sA[st][swz(row, kk * 2 + lane / 16)]));
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        int row = wn + nj * 16 + (lane % 8) + (lane / 16) * 8;
        ldsm_x4(b[nj], smem_addr(&sB[st][swz(row, kk * 2 + (lane / 8) % 2)]));
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mma_f16_16816(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
    }
    __syncthreads();
  }
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      int r = bm + wm + mi * 16 + g, c = bn + wn + ni * 8 + t * 2;
      *reinterpret_cast<float2*>(&C[(size_t)r * N + c]) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(&C[(size_t)(r + 8) * N + c]) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}
