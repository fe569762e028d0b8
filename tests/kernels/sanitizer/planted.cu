// More kernels with one planted bug each (issue 25), switched off by `fixed` (1 = correct).
// The line each finding must name carries a BUG(kind) comment; tests/test_debugging.py
// launches each both ways, and docs/launch.md compares warpsim with compute-sanitizer on them.
// Built with nvcc -ptx -lineinfo (tests/kernels/build.sh).
#include "../common.cuh"

// a static __shared__ array overrun into the next variable
extern "C" __global__ void shared_overrun(const float* in, float* out, int fixed) {
  __shared__ float a[32];
  __shared__ float b[32];
  int t = threadIdx.x;
  b[t] = 2.f * in[t];
  a[fixed ? t : t + 1] = in[t];  // BUG(out-of-bounds)
  __syncthreads();
  out[t] = a[t] + b[t];
}

// a __constant__ table read past its end (into the next __constant__ variable)
__constant__ float c_lo[4] = {1.f, 2.f, 3.f, 4.f};
__constant__ float c_hi[4] = {5.f, 6.f, 7.f, 8.f};
extern "C" __global__ void const_overrun(float* out, int fixed) {
  int t = threadIdx.x;
  out[t] = c_lo[fixed ? t % 4 : t % 8] + c_hi[t % 4];  // BUG(out-of-bounds)
}

// a __device__ array written past its end
__device__ float g_first[32];
__device__ float g_second[32];
extern "C" __global__ void global_var_overrun(const float* in, float* out, int fixed) {
  int t = threadIdx.x;
  g_second[t] = 0.f;
  g_first[fixed ? t : t + 1] = in[t];  // BUG(out-of-bounds)
  __syncthreads();
  out[t] = g_first[t] + g_second[t];
}

// legacy warp-synchronous exchange: lane t reads what lane t+1 wrote, no __syncwarp
extern "C" __global__ void warp_race(const int* in, int* out, int fixed) {
  __shared__ int s[32];
  int t = threadIdx.x;
  s[t] = in[t];  // BUG(race)
  if (fixed) __syncwarp();
  out[t] = s[(t + 1) % 32];
}

// shared memory filled by cp.async read before cp.async.wait_all
extern "C" __global__ void cp_async_early_read(const float4* in, float4* out, int fixed) {
  __shared__ __align__(16) float4 s[32];
  int t = threadIdx.x;
  cp_async_16(smem_addr(&s[t]), &in[t]);
  cp_async_commit();
  if (fixed) cp_async_wait<0>();
  __syncwarp();
  out[t] = s[(t + 1) % 32];  // BUG(async-copy)
  cp_async_wait<0>();
}

// the source of an in-flight cp.async overwritten before the wait
extern "C" __global__ void cp_async_source_write(float4* buf, float4* out, int fixed) {
  __shared__ __align__(16) float4 s[32];
  int t = threadIdx.x;
  cp_async_16(smem_addr(&s[t]), &buf[t]);
  cp_async_commit();
  if (fixed) cp_async_wait<0>();
  buf[t] = make_float4(0.f, 0.f, 0.f, 0.f);  // BUG(async-copy)
  cp_async_wait<0>();
  __syncwarp();
  out[t] = s[t];
}

// an uninitialised float whose value rounding absorbs: 1e30 + garbage == 1e30 for most fills
extern "C" __global__ void uninit_absorbed(float* out, int fixed) {
  __shared__ float s[33];
  int t = threadIdx.x;
  s[t] = 0.5f * t;
  if (fixed && t == 0) s[32] = 0.f;
  __syncwarp();
  out[t] = 1e30f + s[t + 1];  // BUG(uninitialised)
}

// a branch decided by an uninitialised shared word
extern "C" __global__ void uninit_branch(int* out, int fixed) {
  __shared__ int s[33];
  int t = threadIdx.x;
  s[t] = t & 1;
  if (fixed && t == 0) s[32] = 0;
  __syncwarp();
  if (s[t + 1]) atomicAdd(out + t, 7);  // BUG(uninitialised)
}

// __syncthreads() reached by warp 0 only (warp 1 skips it and exits)
extern "C" __global__ void barrier_divergence(const float* in, float* out, int fixed) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  if (fixed || t < 32) __syncthreads();  // BUG(barrier-divergence)
  out[t] = s[63 - t];
}
