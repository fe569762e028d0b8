/* AVX-512 kernel of tanh.approx.f32 (MUFU.TANH) for the compiled SFU path (sfu_accel.py): the
 * unit's own datapath, exact on every key, no table read.
 *
 * The unit reads 17..21 significand bits per binade of |x| in [2**-8, 8) (warpsim/ptx/sfu.py);
 * the 6,684,672 keys of the 11 binades fall into 51 segments of 2**17 keys.  Per segment, with
 * X the key's low 17 bits, the measured word is, in units U of the lowest output binade of the
 * input binade (benchmarks/results/sfu-tanh.txt, benchmarks/sfu_tanh_fit.py):
 *
 *     N = C0 + floor((C1 X + 2 C2 S) / 2**17),   S = H*H - h0 + 2 Q,  H = X >> 9,  h0 = H & 1,
 *     Q = sum over m = 2..8 of bit (18 - m) of X times (X & 511) >> m,
 *
 * with integers C0, C1, C2 per segment: an interpolating quadratic whose square term comes from
 * a truncated squarer (2**18 S is X*X without the partial products of weight below 2**19).  N
 * converts to f32 toward zero (a result in the upper output binade drops its last bit: the
 * fixed-point answer truncated into f32) and the exponent is rebased.  The coefficients
 * (derived from the measured table on first use, sfu_tanh.py) sit in registers and are
 * fetched by permutes; |x| < 2**-8 (x itself), |x| >= 8 (+-1) and NaN are done in the vector
 * code too, so no lane leaves it.
 */
#include "_sfu.h"

/* The model (mirrored by sfu_tanh_band.TanhModelC). */
typedef struct {
    int32_t c0[64], c1[64], c2[64];   /* per segment of 2**17 keys (51 used); c2 doubled */
    int32_t dir[16];    /* per exponent field E & 15 (E in 118..130): key offset | shift << 27 */
    int32_t adj[16];    /* per exponent field: the exponent rebase of the converted integer */
} TanhModel;

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#define TINL static inline __attribute__((always_inline))

typedef struct {
    __m512i c0[4], c1[4], c2[4], dir, adj;
} TRegs;

TINL void tregs_load(TRegs *R, const TanhModel *B) {
    for (int q = 0; q < 4; q++) {
        R->c0[q] = _mm512_loadu_si512(B->c0 + 16 * q);
        R->c1[q] = _mm512_loadu_si512(B->c1 + 16 * q);
        R->c2[q] = _mm512_loadu_si512(B->c2 + 16 * q);
    }
    R->dir = _mm512_loadu_si512(B->dir);
    R->adj = _mm512_loadu_si512(B->adj);
}

/* t[s] for 64 entries: two 32-entry permutes and a blend on bit 5 of s */
TINL __m512i tp64(const __m512i *t, __m512i s, __mmask16 b5) {
    return _mm512_mask_blend_epi32(b5, _mm512_permutex2var_epi32(t[0], s, t[1]),
                                   _mm512_permutex2var_epi32(t[2], s, t[3]));
}

/* Sixteen operands b: their answers. */
TINL __m512i tanh16(const TRegs *R, __m512i b) {
    const __m512i ABS = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i ab = _mm512_and_si512(b, ABS);
    /* the key: binade directory by E & 15 (fields 118..130 distinct; |x| >= 8 reads a segment
     * whose answer is 1.0; below 119 any, replaced below) */
    __m512i Ec = _mm512_min_epu32(_mm512_srli_epi32(ab, 23), _mm512_set1_epi32(130));
    __m512i dir = _mm512_permutexvar_epi32(Ec, R->dir);
    __m512i k = _mm512_add_epi32(_mm512_and_si512(dir, _mm512_set1_epi32(0x7FFFFFF)),
                                 _mm512_srlv_epi32(_mm512_and_si512(ab, _mm512_set1_epi32(0x7FFFFF)),
                                                   _mm512_srli_epi32(dir, 27)));
    __m512i s = _mm512_srli_epi32(k, 17);
    __mmask16 b5 = _mm512_test_epi32_mask(s, _mm512_set1_epi32(32));
    __m512i X = _mm512_and_si512(k, _mm512_set1_epi32(0x1FFFF));
    /* the truncated square S = H*H - h0 + 2 Q (_sfu.h) */
    __m512i S = sfu_trunc_square(X);
    /* C1 X + C2 S in 64 bits (even and odd lanes), >> 17 */
    __m512i c1 = tp64(R->c1, s, b5), c2 = tp64(R->c2, s, b5);
    __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(c1, X), _mm512_mul_epi32(c2, S));
    __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(c1, 32), _mm512_srli_epi64(X, 32)),
                                  _mm512_mul_epi32(_mm512_srli_epi64(c2, 32), _mm512_srli_epi64(S, 32)));
    __m512i q = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srai_epi64(pe, 17),
                                        _mm512_slli_epi64(_mm512_srai_epi64(po, 17), 32));
    __m512i N = _mm512_add_epi32(q, tp64(R->c0, s, b5));
    __m512i w = _mm512_add_epi32(_mm512_castps_si512(_mm512_cvt_roundepi32_ps(N, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)),
                                 _mm512_permutexvar_epi32(Ec, R->adj));
    /* the sign; |x| < 2**-8: x; NaN: the canonical NaN */
    w = _mm512_ternarylogic_epi32(w, b, ABS, 0xF4);   /* w | (b & ~ABS) */
    w = _mm512_mask_mov_epi32(w, _mm512_cmple_epu32_mask(ab, _mm512_set1_epi32(0x3B7FFFFF)), b);
    return _mm512_mask_mov_epi32(w, _mm512_cmpgt_epu32_mask(ab, _mm512_set1_epi32(0x7F800000)), ABS);
}

/* tanh.approx.f32 on n lanes: 0 (-1 without AVX-512, below). */
int warpsim_sfu_tanh(const TanhModel *T, const uint32_t *a, uint32_t *y, int64_t n) {
    TRegs R;
    tregs_load(&R, T);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512(y + i, tanh16(&R, _mm512_loadu_si512(a + i)));
    if (i < n) {
        __mmask16 live = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_epi32(y + i, live, tanh16(&R, _mm512_maskz_loadu_epi32(live, a + i)));
    }
    return 0;
}

int warpsim_sfu_tanh_available(void) { return 1; }

#else   /* no AVX-512: _sfu.c's fast path serves tanh */

int warpsim_sfu_tanh(const TanhModel *T, const uint32_t *a, uint32_t *y, int64_t n) {
    (void)T; (void)a; (void)y; (void)n;
    return -1;
}

int warpsim_sfu_tanh_available(void) { return 0; }

#endif
