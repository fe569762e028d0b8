// Kernels with one planted bug each, switched off by the `fixed` argument (1 = correct).
// tests/test_sanitizer.py launches each both ways: the bug must be reported, the fixed
// run must be clean.
#include "../common.cuh"

// warp 0 reads what warp 1 writes with no barrier between (shared-memory race)
extern "C" __global__ void race_shared(const int* in, int* out, int fixed) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = in[t];  // BUG(race)
  if (fixed) __syncthreads();
  out[t] = s[(t + 32) % 64];
}

// every CTA writes the same 32 outputs (global-memory race between CTAs)
extern "C" __global__ void race_global(const float* in, float* out, int fixed) {
  int i = threadIdx.x;
  int o = fixed ? blockIdx.x * blockDim.x + i : i;
  out[o] = in[blockIdx.x * blockDim.x + i] * 2.f;  // BUG(race)
}

// off-by-one bound: thread n reads and writes one element past the end
extern "C" __global__ void oob(const float* in, float* out, int n, int fixed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lim = fixed ? n : n + 1;
  if (i < lim) out[i] = in[i] + 1.f;  // BUG(out-of-bounds)
}

// ldmatrix rows 8 bytes off their 16-byte alignment
extern "C" __global__ void ldsm_misaligned(const __half* in, unsigned* out, int fixed) {
  __shared__ __align__(16) __half s[8 * 16];
  int t = threadIdx.x;
  for (int i = t; i < 128; i += 32) s[i] = in[i];
  __syncwarp();
  int off = fixed ? 0 : 4;
  unsigned r;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r) : "r"(smem_addr(&s[(t % 8) * 16 + off])));  // BUG(misaligned)
  out[t] = r;
}

// mma.sync reached by half a warp
extern "C" __global__ void divergent_mma(const unsigned* a, float* d, int fixed) {
  int lane = threadIdx.x;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t A[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  if (fixed || lane < 16) mma_f16_16816(acc, A, a[128 + lane], a[160 + lane]);  // BUG(divergent-sync)
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = acc[i];
}

// lane 31 reads a shared word nobody wrote
extern "C" __global__ void uninit_shared(float* out, int fixed) {
  __shared__ float s[33];
  int t = threadIdx.x;
  s[t] = t * 1.5f;
  if (fixed && t == 0) s[32] = 0.f;
  __syncwarp();
  out[t] = s[t + 1];  // BUG(uninitialised)
}

// the two warps wait at different named barriers, each expecting both warps
extern "C" __global__ void deadlock(float* out, int fixed) {
  int w = threadIdx.x / 32;
  if (w == 0 || fixed) asm volatile("bar.sync 1, 64;\n" ::: "memory");  // BUG(deadlock)
  else asm volatile("bar.sync 2, 64;\n" ::: "memory");
  out[threadIdx.x] = w;
}

// 2:4 sparse mma whose metadata comes from memory (the test plants an undefined nibble)
extern "C" __global__ void sparse_meta(const uint32_t* a, const uint32_t* meta, float* d) {
  int lane = threadIdx.x;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t e = meta[lane];
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[lane]), "r"(a[32 + lane]), "r"(a[64 + lane]), "r"(a[96 + lane]), "r"(a[128 + lane]),
        "r"(a[160 + lane]), "r"(a[192 + lane]), "r"(a[224 + lane]), "r"(e));  // BUG(sparse-metadata)
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = acc[i];
}
