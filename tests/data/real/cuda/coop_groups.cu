// Cooperative groups, warp intrinsics and integer corners nvcc lowers to less common PTX
// (match.any/all.sync, redux.sync, __int128 carry chains, mul24, funnel shifts, popc/ffs).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void cg_reduce(const int *in, int *out, unsigned *masks) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(block);
    int gid = block.group_index().x * block.size() + block.thread_rank();
    int v = in[gid];
    int s32 = cg::reduce(warp, v, cg::plus<int>());
    int m8 = cg::reduce(tile8, v, cg::greater<int>());
    int sh = warp.shfl_down(v, 3);
    unsigned any = __match_any_sync(0xffffffffu, v & 7);
    int pred;
    unsigned all = __match_all_sync(0xffffffffu, v & 1, &pred);
    unsigned ballot = warp.ballot(v > 0);
    block.sync();
    out[gid * 4 + 0] = s32;
    out[gid * 4 + 1] = m8;
    out[gid * 4 + 2] = sh;
    out[gid * 4 + 3] = (int)ballot;
    masks[gid * 2 + 0] = any;
    masks[gid * 2 + 1] = all ^ (unsigned)pred;
}

extern "C" __global__ void int_corners(const unsigned long long *a, const unsigned long long *b,
                                       unsigned long long *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned __int128 x = (unsigned __int128)a[i] * b[i] + a[i];
    unsigned __int128 y = x + ((unsigned __int128)b[i] << 64);
    unsigned __int128 z = y - ((unsigned __int128)a[i] << 32);
    out[i * 6 + 0] = (unsigned long long)z;
    out[i * 6 + 1] = (unsigned long long)(z >> 64);
    out[i * 6 + 2] = (unsigned long long)__umul24((unsigned)a[i], (unsigned)b[i]);
    out[i * 6 + 3] = (unsigned long long)(long long)__mul24((int)a[i], (int)b[i]);
    out[i * 6 + 4] = __funnelshift_l((unsigned)a[i], (unsigned)b[i], (unsigned)(a[i] >> 40));
    out[i * 6 + 5] = (unsigned long long)(__popcll(a[i]) + __ffsll((long long)b[i]) * 100 + __clzll(a[i] ^ b[i]) * 10000);
}
