// A FlashAttention-3-style warp-specialised attention forward kernel (sm_90a), written for
// warpsim's validation (not derived from the FA3 sources).
//
// One CTA = 3 warpgroups (384 threads) and 128 query rows:
//   warpgroup 0, the producer: setmaxnreg.dec to 40 registers; one elected thread loads Q (two
//     64x64 boxes) and then the K and V tiles (64x64 each) of every KV block with TMA
//     (cp.async.bulk.tensor.2d, maps passed as __grid_constant__ CUtensorMap, 128B swizzle) into
//     a STAGES-deep shared-memory ring: per stage a K-full, a V-full and an empty mbarrier
//     (arrive.expect_tx on the full ones; the producer waits the empty one with try_wait.parity).
//   warpgroups 1 and 2, the consumers (64 query rows each): setmaxnreg.inc to 232; per KV block
//     S = Q K^T (4 x wgmma m64n64k16 f32.f16.f16, both operands from shared memory, K-major),
//     online softmax in registers (row max over the quad with shfl.bfly, ex2.approx.ftz), P
//     converted to f16 registers in place (the accumulator fragment is the A fragment), then
//     O += P V (4 x wgmma with A from registers, V MN-major: imm-trans-b = 1), and one arrive per
//     thread on the stage's empty barrier.  At the end O / l is written as f16 with st.global.
//
// Shapes: head dim 64, seqlen_q a multiple of 128, seqlen_k a multiple of 64 (Q, K, V, O row-major
// [seqlen, 64] f16).  Arithmetic on floats uses explicit-rounding intrinsics so that ptxas has no
// mul/add pair it may contract into an FMA: the PTX says exactly what the GPU computes.
//
// Planted bugs (for the sanitizer's tests), chosen with -D:
//   FA3_PLANT_NO_WAIT_K: the consumers skip the wait on the K-full barrier (wgmma reads K from
//     shared memory that TMA may not have written yet).
//   FA3_PLANT_SETMAXNREG: only warps 0 and 1 of the producer warpgroup run setmaxnreg.dec.
//
// Rebuild: python tools/real_corpus.py cuda (nvcc 13.0, -arch=sm_90a -lineinfo; the planted twins too).
#include <cuda.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define DEV __device__ __forceinline__

namespace fa3 {

constexpr int D = 64;         // head dim
constexpr int BM = 64;        // query rows per consumer warpgroup
constexpr int BN = 64;        // KV rows per block
constexpr int STAGES = 2;     // depth of the K/V ring
constexpr int TILE = BN * D * 2;  // bytes of one 64x64 f16 tile (8 KiB)

struct Smem {                 // at a 1024-byte aligned base (128B swizzle atoms)
  uint8_t q[2][TILE];
  uint8_t k[STAGES][TILE];
  uint8_t v[STAGES][TILE];
  uint64_t q_full;
  uint64_t k_full[STAGES];
  uint64_t v_full[STAGES];
  uint64_t empty[STAGES];
};

DEV uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

DEV void mbar_init(uint64_t* b, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(b)), "r"(count) : "memory");
}
DEV void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
DEV void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(b)) : "memory");
}
DEV void mbar_wait(uint64_t* b, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(saddr(b)), "r"(parity) : "memory");
  } while (!done);
}
DEV void tma_load(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               ::"r"(saddr(dst)), "l"(map), "r"(x), "r"(y), "r"(saddr(bar)) : "memory");
}

// sm_90 shared-memory matrix descriptor, 128B swizzle (mode 1 in bits 63:62), base offset 0.
DEV uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32)
         | (1ull << 62);
}

DEV void fence_regs(float (&r)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
DEV void fence_regs(uint32_t (&r)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

#define R32(x) "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]), \
  "+f"(x[7]), "+f"(x[8]), "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]), "+f"(x[13]), "+f"(x[14]), \
  "+f"(x[15]), "+f"(x[16]), "+f"(x[17]), "+f"(x[18]), "+f"(x[19]), "+f"(x[20]), "+f"(x[21]), \
  "+f"(x[22]), "+f"(x[23]), "+f"(x[24]), "+f"(x[25]), "+f"(x[26]), "+f"(x[27]), "+f"(x[28]), \
  "+f"(x[29]), "+f"(x[30]), "+f"(x[31])
#define D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

// D(64x64 f32) (+)= A(smem desc) * B(smem desc), both K-major.
DEV void wgmma_ss(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " D32 ", %32, %33, p, 1, 1, 0, 0;\n}"
               : R32(d) : "l"(a), "l"(b), "r"(accumulate));
}
// D(64x64 f32) += A(registers, 4 x f16x2) * B(smem desc, MN-major: imm-trans-b = 1).
DEV void wgmma_rs(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " D32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;"
               : R32(d) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b));
}
DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
DEV void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

DEV float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
DEV float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffff, v, 2));
}
DEV float quad_sum(float v) {
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffff, v, 1));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffff, v, 2));
}
DEV uint32_t pack_f16(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

}  // namespace fa3

using namespace fa3;

extern "C" __global__ void __launch_bounds__(384, 1)
fa3_fwd(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
        const __grid_constant__ CUtensorMap tmV, __half* __restrict__ O, int seqlen_k, float scale_log2) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x;
  const int wg = tid / 128;
  const int m0 = blockIdx.x * 2 * BM;
  const int nblocks = seqlen_k / BN;

  if (tid == 0) {
    mbar_init(&sm.q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&sm.k_full[s], 1);
      mbar_init(&sm.v_full[s], 1);
      mbar_init(&sm.empty[s], 256);  // every consumer thread arrives
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // ---------------- producer ----------------
#ifdef FA3_PLANT_SETMAXNREG
    if (tid < 64)
#endif
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
    if (tid < 32) {
      uint32_t leader;
      asm volatile("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(leader));
      if (leader) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(&tmK) : "memory");
        mbar_expect_tx(&sm.q_full, 2 * TILE);
        tma_load(sm.q[0], &tmQ, 0, m0, &sm.q_full);
        tma_load(sm.q[1], &tmQ, 0, m0 + BM, &sm.q_full);
        for (int j = 0; j < nblocks; ++j) {
          const int s = j % STAGES;
          mbar_wait(&sm.empty[s], ((j / STAGES) & 1) ^ 1);  // a fresh barrier's "previous" phase passes
          mbar_expect_tx(&sm.k_full[s], TILE);
          tma_load(sm.k[s], &tmK, 0, j * BN, &sm.k_full[s]);
          mbar_expect_tx(&sm.v_full[s], TILE);
          tma_load(sm.v[s], &tmV, 0, j * BN, &sm.v_full[s]);
        }
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
  const int c = wg - 1;        // which 64 query rows
  const int t = tid % 128;     // thread in the warpgroup
  const int warp = t / 32, lane = t % 32;
  float o[32], s[32];
  uint32_t p[16];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  mbar_wait(&sm.q_full, 0);
  const uint32_t qa = saddr(sm.q[c]);
  for (int j = 0; j < nblocks; ++j) {
    const int st = j % STAGES;
    const uint32_t ph = (j / STAGES) & 1;
#ifndef FA3_PLANT_NO_WAIT_K
    mbar_wait(&sm.k_full[st], ph);
#endif
    // S = Q K^T: K-major A and B, 128B swizzle, SBO = 8 rows x 128 B; +32 B per k16 step
    const uint32_t ka = saddr(sm.k[st]);
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) wgmma_ss(s, desc(qa + 32 * kk, 16, 1024), desc(ka + 32 * kk, 16, 1024), kk);
    wgmma_commit();
    wgmma_wait0();
    fence_regs(s);

    // online softmax; this thread holds rows r0 = 16 warp + lane/4 (s[4i], s[4i+1]) and
    // r0 + 8 (s[4i+2], s[4i+3]), columns 8i + 2 (lane % 4) + {0, 1}
    float scale_o[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 8; ++i) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m_run[h], __fmul_rn(mx, scale_log2));
      scale_o[h] = ex2(__fsub_rn(m_run[h], m_new));
      m_run[h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * i + 2 * h + e];
          x = ex2(__fmaf_rn(x, scale_log2, -m_new));
          sum = __fadd_rn(sum, x);
        }
      }
      l_run[h] = __fadd_rn(__fmul_rn(l_run[h], scale_o[h]), sum);  // quad-partial sums, reduced at the end
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      o[4 * i] = __fmul_rn(o[4 * i], scale_o[0]);
      o[4 * i + 1] = __fmul_rn(o[4 * i + 1], scale_o[0]);
      o[4 * i + 2] = __fmul_rn(o[4 * i + 2], scale_o[1]);
      o[4 * i + 3] = __fmul_rn(o[4 * i + 3], scale_o[1]);
    }
    // P (f16) in the A-fragment layout: k16 step kk takes accumulator columns 16 kk .. 16 kk + 15
#pragma unroll
    for (int i = 0; i < 16; ++i) p[i] = pack_f16(s[2 * i], s[2 * i + 1]);

    mbar_wait(&sm.v_full[st], ph);
    // O += P V: V tile [kv][d] row-major = MN-major B; 128B swizzle: SBO = 8 kv rows x 128 B,
    // +16 kv rows (2048 B) per k16 step
    const uint32_t va = saddr(sm.v[st]);
    fence_regs(o);
    fence_regs(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_rs(o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], desc(va + 2048 * kk, 8192, 1024));
    wgmma_commit();
    wgmma_wait0();
    fence_regs(o);
    mbar_arrive(&sm.empty[st]);
  }

  // O / l, written as f16 (each thread: 2 rows x 16 columns)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float inv = __frcp_rn(quad_sum(l_run[h]));
    const int row = m0 + c * BM + 16 * warp + lane / 4 + 8 * h;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int col = 8 * i + 2 * (lane % 4);
      *reinterpret_cast<__half2*>(&O[row * D + col]) =
          __floats2half2_rn(__fmul_rn(o[4 * i + 2 * h], inv), __fmul_rn(o[4 * i + 2 * h + 1], inv));
    }
  }
}
