// wmma GEMMs through CUDA's nvcuda::wmma API, as user code writes them (issue 19 item 2).
// D = A * B + C, one warp per output tile, 4 warps per CTA laid out 2 x 2 over tiles.
// A is M x K, B is K x N, C and D are M x N row-major; LA/LB pick the memory layout of A/B.
// Regenerate: nvcc -arch=sm_90 -ptx wmma_gemm.cu -o wmma_gemm.ptx
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;

template <int TM, int TN, int TK, typename TA, typename TB, typename TC, typename LA, typename LB>
__device__ void gemm_tile(const TA *A, const TB *B, const TC *C, TC *D, int M, int N, int K) {
    int warp = threadIdx.x / 32;
    int tm = (blockIdx.y * 2 + warp / 2) * TM;
    int tn = (blockIdx.x * 2 + warp % 2) * TN;
    if (tm >= M || tn >= N) return;
    wmma::fragment<wmma::matrix_a, TM, TN, TK, TA, LA> a;
    wmma::fragment<wmma::matrix_b, TM, TN, TK, TB, LB> b;
    wmma::fragment<wmma::accumulator, TM, TN, TK, TC> acc;
    wmma::load_matrix_sync(acc, C + tm * N + tn, N, wmma::mem_row_major);
    for (int k = 0; k < K; k += TK) {
        if (std::is_same<LA, wmma::row_major>::value)
            wmma::load_matrix_sync(a, A + tm * K + k, K);
        else
            wmma::load_matrix_sync(a, A + k * M + tm, M);
        if (std::is_same<LB, wmma::row_major>::value)
            wmma::load_matrix_sync(b, B + k * N + tn, N);
        else
            wmma::load_matrix_sync(b, B + tn * K + k, K);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(D + tm * N + tn, acc, N, wmma::mem_row_major);
}

extern "C" __global__ void wmma_f16_f32(const half *A, const half *B, const float *C, float *D, int M, int N, int K) {
    gemm_tile<16, 16, 16, half, half, float, wmma::row_major, wmma::col_major>(A, B, C, D, M, N, K);
}
extern "C" __global__ void wmma_f16_f16(const half *A, const half *B, const half *C, half *D, int M, int N, int K) {
    gemm_tile<32, 8, 16, half, half, half, wmma::col_major, wmma::row_major>(A, B, C, D, M, N, K);
}
extern "C" __global__ void wmma_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B, const float *C, float *D, int M, int N, int K) {
    gemm_tile<8, 32, 16, __nv_bfloat16, __nv_bfloat16, float, wmma::row_major, wmma::row_major>(A, B, C, D, M, N, K);
}
extern "C" __global__ void wmma_s8(const signed char *A, const signed char *B, const int *C, int *D, int M, int N, int K) {
    gemm_tile<16, 16, 16, signed char, signed char, int, wmma::row_major, wmma::col_major>(A, B, C, D, M, N, K);
}
extern "C" __global__ void wmma_f64(const double *A, const double *B, const double *C, double *D, int M, int N, int K) {
    gemm_tile<8, 8, 4, double, double, double, wmma::row_major, wmma::col_major>(A, B, C, D, M, N, K);
}
// tf32: the fragments are loaded from f32 memory and rounded to tf32 element by element
extern "C" __global__ void wmma_tf32(const float *A, const float *B, const float *C, float *D, int M, int N, int K) {
    int warp = threadIdx.x / 32;
    int tm = (blockIdx.y * 2 + warp / 2) * 16, tn = (blockIdx.x * 2 + warp % 2) * 16;
    if (tm >= M || tn >= N) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::load_matrix_sync(acc, C + tm * N + tn, N, wmma::mem_row_major);
    for (int k = 0; k < K; k += 8) {
        wmma::load_matrix_sync(a, A + tm * K + k, K);
        wmma::load_matrix_sync(b, B + tn * K + k, K);
        for (int i = 0; i < a.num_elements; i++) a.x[i] = wmma::__float_to_tf32(a.x[i]);
        for (int i = 0; i < b.num_elements; i++) b.x[i] = wmma::__float_to_tf32(b.x[i]);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(D + tm * N + tn, acc, N, wmma::mem_row_major);
}
