// TMA im2col loads (sm_90a), run on the GPU and in warpsim byte for byte
// (warpsim/validation/hopper_im2col_device.py; tests/test_hopper_im2col.py).
// Build: build.sh beside this file (nvcc -ptx, then ptxas to a cubin).
#include <cuda.h>
#include <stdint.h>

#define DEV __device__ __forceinline__
DEV uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// bounded wait (test_wait: never suspends): 0 on timeout, so a wrong byte count shows as a flag
DEV int mbar_wait(uint32_t bar, uint32_t parity) {
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t ok;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    if (ok) return 1;
  }
  return 0;
}

#define SMEM_BYTES 32768

// One im2col load: coords c[0..rank-1] (c, w, [h, [d,]] n), offsets o[0..rank-3] (w, h, d).
// The smem image (first ncopy bytes; 0xDEADBEEF where the TMA wrote nothing) goes to out;
// flag[0] = 1 when the barrier completed with nbytes expected; word[0] = the barrier's final word.
extern "C" __global__ void im2col_load(const __grid_constant__ CUtensorMap tmap, const int* c,
                                       const unsigned short* o, int rank, unsigned nbytes, unsigned ncopy,
                                       unsigned char* out, int* flag, unsigned long long* word) {
  __shared__ alignas(1024) unsigned char buf[SMEM_BYTES];
  __shared__ alignas(8) uint64_t bar;
  for (unsigned i = threadIdx.x; i < ncopy / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(buf)[i] = 0xDEADBEEFu;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  uint32_t dst = saddr(buf), b = saddr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(nbytes)
                 : "memory");
    unsigned short o0 = o[0], o1 = o[1], o2 = o[2];
    if (rank == 3)
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4}], [%5], {%6};"
          ::"r"(dst), "l"(&tmap), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(b), "h"(o0) : "memory");
    else if (rank == 4)
      asm volatile(
          "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
          ::"r"(dst), "l"(&tmap), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(b), "h"(o0), "h"(o1) : "memory");
    else
      asm volatile(
          "cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4, %5, %6}], [%7], {%8, %9, %10};"
          ::"r"(dst), "l"(&tmap), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(b), "h"(o0), "h"(o1),
            "h"(o2) : "memory");
  }
  int ok = mbar_wait(b, 0);
  __syncthreads();
  if (threadIdx.x == 0) {
    flag[0] = ok;
    word[0] = *reinterpret_cast<volatile unsigned long long*>(&bar);
  }
  for (unsigned i = threadIdx.x; i < ncopy / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(out)[i] = reinterpret_cast<uint32_t*>(buf)[i];
}

// One tile-mode load (rank 3 or 4; interleaved maps), as im2col_load otherwise.
extern "C" __global__ void tile_load(const __grid_constant__ CUtensorMap tmap, const int* c, int rank,
                                     unsigned nbytes, unsigned ncopy, unsigned char* out, int* flag,
                                     unsigned long long* word) {
  __shared__ alignas(1024) unsigned char buf[SMEM_BYTES];
  __shared__ alignas(8) uint64_t bar;
  for (unsigned i = threadIdx.x; i < ncopy / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(buf)[i] = 0xDEADBEEFu;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  uint32_t dst = saddr(buf), b = saddr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(nbytes)
                 : "memory");
    if (rank == 3)
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
          ::"r"(dst), "l"(&tmap), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(b) : "memory");
    else
      asm volatile(
          "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
          ::"r"(dst), "l"(&tmap), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(b) : "memory");
  }
  int ok = mbar_wait(b, 0);
  __syncthreads();
  if (threadIdx.x == 0) {
    flag[0] = ok;
    word[0] = *reinterpret_cast<volatile unsigned long long*>(&bar);
  }
  for (unsigned i = threadIdx.x; i < ncopy / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(out)[i] = reinterpret_cast<uint32_t*>(buf)[i];
}
