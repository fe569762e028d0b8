// A wmma GEMM in the style of the CUDA samples' simpleTensorCoreGEMM: one warp per 16x16 tile
// of C, f16 inputs, f32 accumulate, C = alpha * A @ B + beta * C (A row-major, B col-major).
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_gemm(const half *a, const half *b, float *c, int M, int N, int K,
                                     float alpha, float beta) {
    int warpM = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    int warpN = blockIdx.y * blockDim.y + threadIdx.y;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b_frag;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_frag;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c_frag;
    wmma::fill_fragment(acc_frag, 0.0f);
    for (int k = 0; k < K; k += 16) {
        int aRow = warpM * 16, bCol = warpN * 16;
        if (aRow < M && bCol < N) {
            wmma::load_matrix_sync(a_frag, a + aRow * K + k, K);
            wmma::load_matrix_sync(b_frag, b + bCol * K + k, K);
            wmma::mma_sync(acc_frag, a_frag, b_frag, acc_frag);
        }
    }
    int cRow = warpM * 16, cCol = warpN * 16;
    if (cRow < M && cCol < N) {
        wmma::load_matrix_sync(c_frag, c + cRow * N + cCol, N, wmma::mem_row_major);
        for (int i = 0; i < c_frag.num_elements; i++)
            c_frag.x[i] = alpha * acc_frag.x[i] + beta * c_frag.x[i];
        wmma::store_matrix_sync(c + cRow * N + cCol, c_frag, N, wmma::mem_row_major);
    }
}
