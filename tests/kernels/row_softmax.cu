// Softmax-like row statistics, one warp per row: the row maximum by a butterfly shuffle,
// centred values, a sum of squares by shfl.down + broadcast, and y = (x - max) / (1 + sum).
// Also counts positive inputs (ballot + redux + red.global) and builds a 16-bucket histogram
// of the inputs' bits in shared memory with shared atomics, merged into global memory.
#include "common.cuh"

#define ROWS_PER_CTA 4

extern "C" __global__ void __launch_bounds__(128)
row_softmax(const float* __restrict__ X, float* __restrict__ Y, float* __restrict__ stats,
            unsigned* __restrict__ hist, unsigned* __restrict__ positives, int* __restrict__ gmax, int cols) {
  __shared__ unsigned h[16];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x < 16) h[threadIdx.x] = 0;
  __syncthreads();
  const int row = blockIdx.x * ROWS_PER_CTA + warp;
  const float* x = X + (size_t)row * cols;
  float m = -INFINITY;
  unsigned pos = 0;
  for (int c = lane; c < cols; c += 32) {
    float v = x[c];
    m = fmaxf(m, v);
    pos += __popc(__ballot_sync(0xffffffffu, v > 0.f)) * (lane == 0);
    atomicAdd(&h[(__float_as_uint(v) >> 19) & 15], 1u);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
  for (int c = lane; c < cols; c += 32) {
    float d = x[c] - m;
    s = fmaf(d, d, s);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  s = __shfl_sync(0xffffffffu, s, 0);
  const float denom = 1.f + s;
  for (int c = lane; c < cols; c += 32) Y[(size_t)row * cols + c] = (x[c] - m) / denom;
  if (lane == 0) {
    stats[row * 2] = m;
    stats[row * 2 + 1] = s;
  }
  unsigned total = __reduce_add_sync(0xffffffffu, pos);
  if (lane == 0) {
    atomicAdd(positives, total);
    atomicMax(gmax, __float_as_int(m));
  }
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&hist[threadIdx.x], h[threadIdx.x]);
}
