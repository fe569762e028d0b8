// Hopper asynchronous-copy kernels (mbarrier, TMA, bulk copies, clusters) run on the H100 and in
// warpsim byte for byte (warpsim/validation/hopper_async.py; tests/test_hopper_async.py).
// Build: nvcc -ptx -gencode=arch=compute_90a,code=sm_90a (see build.sh beside this file).
#include <cuda.h>
#include <stdint.h>

#define DEV __device__ __forceinline__

DEV uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

DEV void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
DEV void mbar_expect_arrive(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
DEV void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// bounded wait: returns 0 on timeout (so a wrong byte count shows as a flag, not a hang)
DEV int mbar_wait(uint32_t bar, uint32_t parity) {
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t ok;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    if (ok) return 1;
  }
  return 0;
}
DEV void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

DEV void tma_load(int rank, uint32_t dst, const void* map, const int* c, uint32_t bar) {
  switch (rank) {
    case 1:
      asm volatile(
          "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
          ::"r"(dst), "l"(map), "r"(c[0]), "r"(bar) : "memory");
      break;
    case 2:
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
          ::"r"(dst), "l"(map), "r"(c[0]), "r"(c[1]), "r"(bar) : "memory");
      break;
    case 3:
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
          ::"r"(dst), "l"(map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(bar) : "memory");
      break;
    case 4:
      asm volatile(
          "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
          ::"r"(dst), "l"(map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(bar) : "memory");
      break;
    default:
      asm volatile(
          "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
          ::"r"(dst), "l"(map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(bar) : "memory");
  }
}

#define SMEM_BYTES 32768

// One box per CTA: coords[5 * blockIdx.x ...]; the smem image (first `ncopy` bytes, marker
// 0xDEADBEEF where TMA wrote nothing) goes to out[ncopy * blockIdx.x ...]; flag[blockIdx.x] = 1
// when the barrier completed with `nbytes` expected.
extern "C" __global__ void tma_load_box(const __grid_constant__ CUtensorMap tmap, const int* coords, int rank,
                                        unsigned nbytes, unsigned ncopy, unsigned char* out, int* flag) {
  __shared__ alignas(1024) unsigned char buf[SMEM_BYTES];
  __shared__ alignas(8) uint64_t bar;
  for (unsigned i = threadIdx.x; i < ncopy / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(buf)[i] = 0xDEADBEEFu;
  if (threadIdx.x == 0) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tmap) : "memory");
    mbar_init(saddr(&bar), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  fence_async_smem();
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_expect_arrive(saddr(&bar), nbytes);
    tma_load(rank, saddr(buf), &tmap, coords + 5 * blockIdx.x, saddr(&bar));
  }
  int ok = mbar_wait(saddr(&bar), 0);
  if (threadIdx.x == 0) flag[blockIdx.x] = ok;
  for (unsigned i = threadIdx.x; i < ncopy / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(out + (size_t)ncopy * blockIdx.x)[i] = reinterpret_cast<uint32_t*>(buf)[i];
}

// Write the box at coords from src (nbytes, the smem image) into the map's tensor: mode 0 a TMA
// store, mode 1 a TMA reduce-add (f32 maps).
extern "C" __global__ void tma_store_box(const __grid_constant__ CUtensorMap tmap, int c0, int c1, int mode,
                                         unsigned nbytes, const unsigned char* src) {
  __shared__ alignas(1024) unsigned char buf[SMEM_BYTES];
  for (unsigned i = threadIdx.x; i < nbytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(buf)[i] = reinterpret_cast<const uint32_t*>(src)[i];
  fence_async_smem();
  __syncthreads();
  if (threadIdx.x == 0) {
    if (mode == 0)
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                   ::"l"(&tmap), "r"(c0), "r"(c1), "r"(saddr(buf)) : "memory");
    else
      asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];"
                   ::"l"(&tmap), "r"(c0), "r"(c1), "r"(saddr(buf)) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

// Non-tensor bulk copies: src[src_off, +size) -> smem (mbarrier) -> dst[dst_off, +size) (bulk
// group), then a bulk reduce-add of the same smem bytes (as f32) into acc[0, +size).
extern "C" __global__ void bulk_copy(const unsigned char* src, unsigned char* dst, float* acc, int src_off,
                                     int dst_off, int size, int* flag) {
  __shared__ alignas(128) unsigned char buf[8192];
  __shared__ alignas(8) uint64_t bar;
  if (threadIdx.x == 0) {
    mbar_init(saddr(&bar), 1);
    fence_async_smem();
    mbar_expect_arrive(saddr(&bar), size);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(saddr(buf)), "l"(src + src_off), "r"(size), "r"(saddr(&bar)) : "memory");
  }
  __syncthreads();
  int ok = mbar_wait(saddr(&bar), 0);
  if (threadIdx.x == 0) {
    flag[0] = ok;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(dst + dst_off), "r"(saddr(buf)), "r"(size) : "memory");
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                 ::"l"(acc), "r"(saddr(buf)), "r"(size) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

// Producer/consumer ping-pong: warp 0 (one elected lane) streams ntiles tiles of 256 u32 through
// a 2-stage ring of full/empty mbarriers; warps 1 and 2 consume halves of each tile.
extern "C" __global__ void __launch_bounds__(96, 1)
    pingpong(const uint32_t* in, uint32_t* out, int ntiles) {
  __shared__ alignas(128) uint32_t ring[2][256];
  __shared__ alignas(8) uint64_t full[2], empty[2];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(saddr(&full[s]), 1);
      mbar_init(saddr(&empty[s]), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    uint32_t leader;
    asm volatile("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(leader));
    if (leader) {
      for (int t = 0; t < ntiles; ++t) {
        int s = t & 1, ph = (t >> 1) & 1;
        mbar_wait(saddr(&empty[s]), ph ^ 1);
        mbar_expect_arrive(saddr(&full[s]), 1024);
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 1024, [%2];"
                     ::"r"(saddr(ring[s])), "l"(in + 256 * t), "r"(saddr(&full[s])) : "memory");
      }
    }
  } else {
    int half = warp - 1;
    for (int t = 0; t < ntiles; ++t) {
      int s = t & 1, ph = (t >> 1) & 1;
      mbar_wait(saddr(&full[s]), ph);
      for (int i = lane; i < 128; i += 32) {
        uint32_t v = ring[s][half * 128 + i];
        out[256 * t + half * 128 + i] = v * 3u + (uint32_t)t;
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(saddr(&empty[s]));
    }
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Cluster of 4: identity registers, DSMEM reads/writes/reductions, a remote mbarrier arrive,
// elect.sync leaders.  out: 32 u32 per CTA.
extern "C" __global__ void __cluster_dims__(4, 1, 1) cluster_dsmem(uint32_t* out) {
  __shared__ alignas(16) uint32_t arr[64];
  __shared__ alignas(16) uint32_t inbox[4];
  __shared__ uint32_t counter;
  __shared__ alignas(8) uint64_t bar;
  uint32_t rank, nrank, cid, cctaid, ncid, expl, cnctaid;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nrank));
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(cid));
  asm("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(cctaid));
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(ncid));
  asm("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(cnctaid));
  asm("{\n .reg .pred p;\n mov.pred p, %%is_explicit_cluster;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(expl));
  for (int i = threadIdx.x; i < 64; i += blockDim.x) arr[i] = rank * 1000 + i + cid * 100000;
  if (threadIdx.x < 4) inbox[threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    counter = 0;
    mbar_init(saddr(&bar), nrank);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  uint32_t nb = (rank + 1) % nrank, got, owner;
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(saddr(&arr[threadIdx.x % 64])), "r"(nb));
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(got) : "r"(remote) : "memory");
  asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(owner) : "r"(remote));
  if (threadIdx.x == 0) {
    uint32_t rin, rc, rb;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rin) : "r"(saddr(&inbox[rank])), "r"(nb));
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(rin), "r"(rank + 10 * cid + 1) : "memory");
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rc) : "r"(saddr(&counter)), "r"(0));
    asm volatile("red.shared::cluster.add.u32 [%0], %1;" ::"r"(rc), "r"(rank + 1) : "memory");
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(saddr(&bar)), "r"(0));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(rb) : "memory");
  }
  int ok = 1;
  if (rank == 0) ok = mbar_wait(saddr(&bar), 0);
  asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
  uint32_t lead_full, lead_odd = 99, is_lead;
  asm volatile("{\n .reg .pred p;\n elect.sync %0|p, 0xffffffff;\n selp.u32 %1, 1, 0, p;\n}" : "=r"(lead_full), "=r"(is_lead));
  if (threadIdx.x & 1) asm volatile("{\n .reg .pred q;\n elect.sync %0|q, 0xaaaaaaaa;\n}" : "=r"(lead_odd));
  if (threadIdx.x == 0) {
    uint32_t* o = out + 32 * (blockIdx.x);
    o[0] = rank; o[1] = nrank; o[2] = cid; o[3] = cctaid; o[4] = ncid; o[5] = expl; o[6] = cnctaid;
    o[7] = got; o[8] = owner; o[9] = counter; o[10] = ok;
    for (int i = 0; i < 4; ++i) o[11 + i] = inbox[i];
    o[15] = lead_full; o[16] = is_lead;
  }
  if (threadIdx.x == 5) out[32 * blockIdx.x + 17] = got;
  if (threadIdx.x == 1) out[32 * blockIdx.x + 18] = lead_odd;
  if (threadIdx.x == 3) out[32 * blockIdx.x + 19] = lead_odd;
  asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}

// Cluster of 2: rank 0 multicasts one 2-D box to both CTAs (mask 0b11); each dumps its smem.
extern "C" __global__ void __cluster_dims__(2, 1, 1)
    tma_multicast(const __grid_constant__ CUtensorMap tmap, int c0, int c1, unsigned nbytes, unsigned char* out,
                  int* flag) {
  __shared__ alignas(1024) unsigned char buf[8192];
  __shared__ alignas(8) uint64_t bar;
  uint32_t rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) {
    mbar_init(saddr(&bar), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    mbar_expect_arrive(saddr(&bar), nbytes);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (threadIdx.x == 0 && rank == 0) {
    uint16_t mask = 3;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;"
        ::"r"(saddr(buf)), "l"(&tmap), "r"(c0), "r"(c1), "r"(saddr(&bar)), "h"(mask) : "memory");
  }
  int ok = mbar_wait(saddr(&bar), 0);
  if (threadIdx.x == 0) flag[blockIdx.x] = ok;
  for (unsigned i = threadIdx.x; i < nbytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(out + (size_t)nbytes * blockIdx.x)[i] = reinterpret_cast<uint32_t*>(buf)[i];
  asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}

// A tensor map written by tensormap.replace from 128 zero bytes (rank 3): v = {addr_lo, addr_hi,
// dims[3], strides[2] (bytes), box[3], es[3], elemtype, interleave, swizzle, fill}; out: 128 bytes.
extern "C" __global__ void tmap_replace(const uint32_t* v, unsigned char* out) {
  __shared__ alignas(128) unsigned char m[128];
  if (threadIdx.x < 32) reinterpret_cast<uint32_t*>(m)[threadIdx.x] = 0;
  __syncwarp();
  if (threadIdx.x == 0) {
    uint32_t a = saddr(m);
    uint64_t ga = ((uint64_t)v[1] << 32) | v[0];
    asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(a), "l"(ga) : "memory");
    asm volatile("tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], 2;" ::"r"(a) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(a), "r"(v[2]) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %1;" ::"r"(a), "r"(v[3]) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 2, %1;" ::"r"(a), "r"(v[4]) : "memory");
    asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" ::"r"(a), "l"((uint64_t)v[5]) : "memory");
    asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 1, %1;" ::"r"(a), "l"((uint64_t)v[6]) : "memory");
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(a), "r"(v[7]) : "memory");
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, %1;" ::"r"(a), "r"(v[8]) : "memory");
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 2, %1;" ::"r"(a), "r"(v[9]) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(a), "r"(v[10]) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, %1;" ::"r"(a), "r"(v[11]) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 2, %1;" ::"r"(a), "r"(v[12]) : "memory");
    asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 6;" ::"r"(a) : "memory");
    asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;" ::"r"(a) : "memory");
    asm volatile("tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%0], 1;" ::"r"(a) : "memory");
  }
  __syncwarp();
  if (threadIdx.x < 32) reinterpret_cast<uint32_t*>(out)[threadIdx.x] = reinterpret_cast<uint32_t*>(m)[threadIdx.x];
}

// The raw 64-bit mbarrier word after a sequence of operations (out[0..15]), and wait results.
extern "C" __global__ void mbar_words(uint64_t* out) {
  __shared__ alignas(8) uint64_t bar;
  if (threadIdx.x != 0) return;
  uint32_t b = saddr(&bar);
  uint64_t st;
  uint32_t ok;
  int k = 0;
  bar = 0;
  mbar_init(b, 3);                                                     out[k++] = bar;  // 0
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(b) : "memory");
  out[k++] = bar; out[k++] = st;                                                        // 1, 2
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], 100;" ::"r"(b) : "memory");
  out[k++] = bar;                                                                       // 3
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 40;" ::"r"(b) : "memory");
  out[k++] = bar;                                                                       // 4
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], 2;" : "=l"(st) : "r"(b) : "memory");
  out[k++] = bar; out[k++] = st;                                                        // 5, 6
  asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok) : "r"(b) : "memory");
  out[k++] = ok;                                                                        // 7
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 60;" ::"r"(b) : "memory");
  out[k++] = bar;                                                                       // 8
  asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok) : "r"(b) : "memory");
  out[k++] = ok;                                                                        // 9
  asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(b) : "memory");
  out[k++] = bar; out[k++] = st;                                                        // 10, 11
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 16;" ::"r"(b) : "memory");
  out[k++] = bar;                                                                       // 12 (tx negative)
  uint32_t pc;
  asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 %0, [%1], 1;" : "=l"(st) : "r"(b) : "memory");
  asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(pc) : "l"(st));
  out[k++] = bar; out[k++] = pc;                                                        // 13, 14
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], 16;" : "=l"(st) : "r"(b) : "memory");
  out[k++] = bar; out[k++] = st;                                                        // 15, 16
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(b) : "memory");
  out[k++] = bar;                                                                       // 17
}
