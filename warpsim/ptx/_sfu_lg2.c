/* MUFU.LG2 (lg2.approx(.ftz).f32) through the unit's own interpolator (AVX-512 VBMI + VNNI);
 * compiled into the SFU library with _sfu.c (warpsim/ptx/sfu_accel.py, one dispatch line there).
 *
 * The unit computes P(m), m = 1.M, with 36 fraction bits and returns trunc24(e + P) (sfu.py);
 * its tables hold trunc24(P) (x >= 1) and trunc24(P - 1) (x < 1), i.e. two functions P of the
 * 23-bit M.  Each is, on every key of 63 of its 64 segments of 2**17 keys and of the 64th but the
 * keys next to x = 1 (x >= 1: M < 2**10; x < 1: M >= 2**23 - 2**12), the multifunction
 * interpolator that ex2/rcp/rsq/sqrt use (benchmarks/results/sfu-datapath.txt):
 *     P * 2**36 = floor((C0 + C1 X + C2 S) / 4),   X = M's low 17 bits, S their truncated square,
 * with integers C0 (38 bits), C1 (16), C2 (11; negative): sfu_accel._lg2_datapath finds them
 * at first use, and the tests compare every key.  Then trunc24(e + P) for both halves is
 * trunc24(e + t) with t = trunc24(P) or trunc24(P - 1), the table word, formed exactly in 32-bit
 * lanes (one add rounded toward zero: the truncations nest).  The missed keys, zeros,
 * subnormals, Inf and NaN take the exact scalar path.
 *
 * The model (sfu_accel): nine byte planes of 128 segments (index up << 6 | M >> 17): C0 >> 7 as
 * four planes, C1 << 14 | C2 (14-bit two's complement) as four, C0 & 127 as one. */
#include "_sfu.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VBMI__) && \
    defined(__AVX512VNNI__)
/* 128-entry lookup of a 32-bit word from four byte planes (2 registers each: lo in registers,
 * hi read from memory) by the segment index held in every byte of its lane */
static inline __attribute__((always_inline)) __m512i lg2_look4(const __m512i *lo, const uint8_t *pl, __m512i idx) {
    __m512i r = _mm512_mask2_permutex2var_epi8(lo[0], idx, (__mmask64)0x1111111111111111ull,
                                               _mm512_loadu_si512(pl + 64));
    r = _mm512_mask2_permutex2var_epi8(lo[1], r, (__mmask64)0x2222222222222222ull, _mm512_loadu_si512(pl + 192));
    r = _mm512_mask2_permutex2var_epi8(lo[2], r, (__mmask64)0x4444444444444444ull, _mm512_loadu_si512(pl + 320));
    return _mm512_mask2_permutex2var_epi8(lo[3], r, (__mmask64)0x8888888888888888ull, _mm512_loadu_si512(pl + 448));
}

/* One block of n <= 1024 lanes: y gets every lane's word but those listed in rare (block-local
 * indices; the count is returned). */
static int32_t lg2_block(const uint8_t *pl, const uint32_t *x, uint32_t *y, int32_t n, int32_t *rare) {
    __m512i P0[4], P1[4], P2;
    for (int p = 0; p < 4; p++) {
        P0[p] = _mm512_loadu_si512(pl + 128 * p);
        P1[p] = _mm512_loadu_si512(pl + 512 + 128 * p);
    }
    P2 = _mm512_loadu_si512(pl + 1024);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int32_t nr = 0;
    for (int32_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512i b = _mm512_maskz_loadu_epi32(live, x + i);
        __m512 xf = _mm512_castsi512_ps(b);
        __mmask16 up = _mm512_cmp_ps_mask(xf, one, _CMP_GE_OQ);
        __m512i s = _mm512_and_si512(_mm512_srli_epi32(b, 17), _mm512_set1_epi32(63));
        s = _mm512_mask_or_epi32(s, up, s, _mm512_set1_epi32(64));
        /* the keys next to x = 1 that the interpolator misses: M < 2**10 (x >= 1), M >= 2**23 - 2**12
         * (x < 1), tested as (M + 2**12) mod 2**23 < 5 * 2**10 (also a few keys on the other side) */
        __mmask16 miss = _mm512_cmplt_epu32_mask(_mm512_and_si512(_mm512_add_epi32(b, _mm512_set1_epi32(4096)),
                                                                   _mm512_set1_epi32(0x7FFFFF)),
                                                  _mm512_set1_epi32(5120));
        __m512i si = _mm512_shuffle_epi8(s, _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0));
        __m512i c0h = lg2_look4(P0, pl, si);
        __m512i cb = lg2_look4(P1, pl + 512, si);
        __m512i c0l = _mm512_and_si512(_mm512_permutex2var_epi8(P2, si, _mm512_loadu_si512(pl + 1088)),
                                       _mm512_set1_epi32(0xFF));
        __m512i C1 = _mm512_srli_epi32(cb, 14), C2 = _mm512_srai_epi32(_mm512_slli_epi32(cb, 18), 18);
        __m512i X = _mm512_and_si512(b, _mm512_set1_epi32(0x1FFFF));
        __m512i S = sfu_trunc_square(X);
        /* C0 + C1 X + C2 S = 2**7 A + T, X = H 2**9 + L: A = C0 >> 7 + 4 C1 H, T = C0 & 127 + C1 L + C2 S */
        __m512i A = _mm512_add_epi32(c0h, _mm512_slli_epi32(_mm512_mullo_epi32(C1, _mm512_srli_epi32(X, 9)), 2));
        __m512i T = _mm512_add_epi32(c0l, _mm512_mullo_epi32(C1, _mm512_and_si512(X, _mm512_set1_epi32(511))));
        T = _mm512_add_epi32(T, _mm512_mullo_epi32(C2, S));
        /* the table word t: trunc24 of N * 2**-36 (x >= 1) or of -(2**36 - N) * 2**-36 (x < 1),
         * N = floor((2**7 A + T) / 4) = 32 A + (T >> 2): the magnitude 32 A' + t2' exactly where it
         * is below 2**31, else (A' + (t2' >> 5)) * 2**5 (the truncation drops those bits anyway) */
        __mmask16 lo = (__mmask16)~up;
        __m512i t2 = _mm512_srai_epi32(T, 2);
        __m512i Ap = _mm512_mask_sub_epi32(A, lo, _mm512_set1_epi32((int)0x80000000u), A);
        t2 = _mm512_mask_sub_epi32(t2, lo, _mm512_setzero_si512(), t2);
        __mmask16 big = _mm512_cmpge_epu32_mask(Ap, _mm512_set1_epi32(1 << 24));
        __m512i v = _mm512_mask_blend_epi32(big, _mm512_add_epi32(_mm512_slli_epi32(Ap, 5), t2),
                                            _mm512_add_epi32(Ap, _mm512_srai_epi32(t2, 5)));
        __m512 t = _mm512_mul_ps(_mm512_cvt_roundepu32_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC),
                                 _mm512_mask_blend_ps(big, _mm512_set1_ps(0x1p-36f), _mm512_set1_ps(0x1p-31f)));
        t = _mm512_castsi512_ps(_mm512_mask_or_epi32(_mm512_castps_si512(t), lo, _mm512_castps_si512(t),
                                                     _mm512_set1_epi32((int)0x80000000u)));
        /* the word: trunc24(e + t), e = E - 127 (x >= 1) or E - 126 (x < 1) */
        __m512 ge = _mm512_getexp_ps(xf);
        __m512i w = _mm512_castps_si512(_mm512_add_round_ps(_mm512_mask_add_ps(ge, lo, ge, one), t,
                                                            _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
        /* negative normal -> NaN; 0, subnormal, Inf, NaN, -0 and the missed keys next to x = 1: rare */
        __mmask16 odd = _mm512_fpclass_ps_mask(xf, 0xBF);
        __mmask16 neg = _mm512_fpclass_ps_mask(xf, 0x40) & (__mmask16)~odd;
        odd = (odd | (miss & (__mmask16)~neg)) & live;
        w = _mm512_mask_mov_epi32(w, neg, _mm512_set1_epi32(0x7FFFFFFF));
        if (live == 0xFFFF) _mm512_storeu_si512(y + i, w); else _mm512_mask_storeu_epi32(y + i, live, w);
        if (odd) {
            __m512i idx = _mm512_add_epi32(iota, _mm512_set1_epi32(i));
            _mm512_storeu_si512(rare + nr, _mm512_maskz_compress_epi32(odd, idx));
            nr += __builtin_popcount(odd);
        }
    }
    return nr;
}

int warpsim_sfu_lg2(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n) {
    if (!T->aux) return -1;
    int32_t r[1024 + 16];
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        int32_t m_ = n - i0 < 1024 ? (int32_t)(n - i0) : 1024;
        int32_t nr = lg2_block((const uint8_t *)T->aux, a + i0, y + i0, m_, r);
        for (int32_t j = 0; j < nr; j++) y[i0 + r[j]] = warpsim_sfu_one(form, T, a[i0 + r[j]]);
    }
    return 0;
}

int warpsim_sfu_lg2_available(void) { return 1; }

#else   /* no AVX-512 VBMI/VNNI: _sfu.c's fast pass serves every lane */

int warpsim_sfu_lg2(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n) {
    (void)form; (void)T; (void)a; (void)y; (void)n;
    return -1;
}

int warpsim_sfu_lg2_available(void) { return 0; }

#endif
