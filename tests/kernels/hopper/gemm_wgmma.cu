// Tiled f16 GEMM through wgmma (sm_90a), f32 accumulate: C[M,N] = A[M,K] * B[N,K]^T, both
// K-contiguous -- the problem of ../gemm_f16.cu, for the same 64x64 CTA tiles.  One warpgroup
// per CTA; K advances 64 at a time: each k-tile of A and B (64 rows x 128 bytes) is copied into
// shared memory in the canonical K-major 128B-swizzled layout (chunk c of row r at c ^ (r % 8)),
// then four m64n64k16 wgmmas read it through descriptors whose start address advances 32 bytes
// per step inside the swizzle atom, as CUTLASS does.
#include <cuda_fp16.h>
#include <stdint.h>

#define BM 64
#define BN 64
#define BK 64

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// K-major, 128B swizzle: LBO 16 (unused), SBO 1024 (8 rows x 128 B), layout code 1 (bits 63:62)
__device__ __forceinline__ uint64_t desc128(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 0, 0;\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(da), "l"(db));
}

extern "C" __global__ void __launch_bounds__(128)
gemm_wgmma_f16(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C,
               int M, int N, int K) {
  __shared__ __align__(1024) uint4 sA[BM * 8];
  __shared__ __align__(1024) uint4 sB[BN * 8];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int idx = tid + i * 128, row = idx / 8, ch = idx % 8;
      sA[row * 8 + (ch ^ (row % 8))] = *reinterpret_cast<const uint4*>(A + (size_t)(bm + row) * K + k0 + ch * 8);
      sB[row * 8 + (ch ^ (row % 8))] = *reinterpret_cast<const uint4*>(B + (size_t)(bn + row) * K + k0 + ch * 8);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    const uint32_t a0 = smem_u32(sA), b0 = smem_u32(sB);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_m64n64k16(d, desc128(a0 + 32 * kk), desc128(b0 + 32 * kk));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    int r = bm + 16 * warp + g, c = bn + 8 * j + 2 * t;
    *reinterpret_cast<float2*>(&C[(size_t)r * N + c]) = make_float2(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<float2*>(&C[(size_t)(r + 8) * N + c]) = make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
}
