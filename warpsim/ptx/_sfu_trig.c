/* AVX-512 kernel of MUFU.SIN / MUFU.COS for the compiled SFU path (warpsim/ptx/sfu_accel.py,
 * the model derived in warpsim/ptx/_sfu_trig.py).
 *
 * The unit reads the angle in turns as a 25-bit fixed-point fraction k; the answer over the
 * first half turn is S[k] (second half: -S), and S[k] = S[2**24 - 1 - k], so one quarter of
 * 2**23 keys q holds every word.  Two kernels, per segment of 2**17 keys (the unit's 64):
 *  - with VBMI + VNNI, the unit's own datapath (trig_dp): N = floor((C0 + C1 X + C2 S) / 2**17)
 *    in units of the segment's lowest binade's ulp, S the truncated square of the key's low 17
 *    bits X, the word the f32 truncation of N; segment 0 (words down to 2**-37) from its words;
 *  - else a register model, one f32 FMA rounded toward zero: RZ(c0 + p), p = d0 + Xc (d1 + Xc d2),
 *    Xc = X - 2**16; segment 0 relative: RZ(X c0 + X (X d2)), c0 the unit's slope.  It is within
 *    one word of S[q] on all but a few thousand keys of segment 0; a 2-bit code per key (2 MB;
 *    one 32-bit gather per 16 lanes) gives word = model + code (-1..1), and code -2 sends the
 *    lane to a dense table of the first keys (a masked gather, rare lanes).
 * Coefficients sit in registers (permutes, no gathers).
 * Inf/NaN angles give 0x7FFFFFFF.  Every key is checked by the tests against the measured table.
 */
#include "_sfu.h"   /* sfu_trunc_square */

typedef struct {
    float c0[64], d0[64], d1[64], d2[64];  /* per segment */
    const uint32_t *codes;                  /* 2-bit codes word - model (-2: not so), 16 keys a word,
                                               top bits first */
    const uint32_t *small;                  /* words of keys q < nsmall (every code -2 key) */
    int64_t nsmall;
    /* the unit's datapath (dp = 1; AVX-512 VBMI + VNNI): per segment s >= 1, in units u of the
     * ulp of its lowest binade, N = c0hi + floor((lo + C1 X + C2 S) / 2**17), S the truncated
     * square of X, word = the f32 bits of RZ(N) + (log2 u << 23); c1x = C1 | log2 u << 24,
     * c2lo = lo | C2 << 17; segment 0 from dense0 (its 2**17 words) */
    int32_t c0hi[64], c1x[64], c2lo[64];
    const uint32_t *dense0;
    int32_t dp;
} Trig;

#if defined(__AVX512F__)
#include <immintrin.h>

#define TINL static inline __attribute__((always_inline))

typedef struct {
    __m512 c0[4], d0[4], d1[4], d2[4];
    __m512i c0hi[4], c1x[4], c2lo[4];
} TRegs;

TINL void trig_regs(TRegs *R, const Trig *M) {
    for (int i = 0; i < 4; i++) {
        R->c0[i] = _mm512_loadu_ps(M->c0 + 16 * i);
        R->d0[i] = _mm512_loadu_ps(M->d0 + 16 * i);
        R->d1[i] = _mm512_loadu_ps(M->d1 + 16 * i);
        R->d2[i] = _mm512_loadu_ps(M->d2 + 16 * i);
        R->c0hi[i] = _mm512_loadu_si512(M->c0hi + 16 * i);
        R->c1x[i] = _mm512_loadu_si512(M->c1x + 16 * i);
        R->c2lo[i] = _mm512_loadu_si512(M->c2lo + 16 * i);
    }
}

/* t[s] for segments s < 64 (b5: the lanes with s >= 32) */
TINL __m512 perm64(const __m512 *t, __m512i s, __mmask16 b5) {
    return _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(t[0], s, t[1]),
                                _mm512_permutex2var_ps(t[2], s, t[3]));
}

/* The model's f32 bits at quarter keys q < 2**23: RZ(M c0 + p), p = d0 + Xc (d1 + Xc d2), one
 * FMA rounded toward zero; segment 0: M = Xc = X, else M = 1, Xc = X - 2**16. */
TINL __m512i trig_model(const TRegs *R, __m512i q) {
    __m512i s = _mm512_srli_epi32(q, 17), X = _mm512_and_si512(q, _mm512_set1_epi32(0x1FFFF));
    __mmask16 b5 = _mm512_test_epi32_mask(s, _mm512_set1_epi32(32)), nz = _mm512_test_epi32_mask(s, s);
    __m512 Xc = _mm512_cvtepi32_ps(_mm512_mask_sub_epi32(X, nz, X, _mm512_set1_epi32(0x10000)));
    __m512 p = _mm512_fmadd_ps(Xc, _mm512_fmadd_ps(Xc, perm64(R->d2, s, b5), perm64(R->d1, s, b5)),
                               perm64(R->d0, s, b5));
    __m512 M = _mm512_mask_mov_ps(Xc, nz, _mm512_set1_ps(1.0f));
    return _mm512_castps_si512(_mm512_fmadd_round_ps(M, perm64(R->c0, s, b5), p,
                                                     _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
}

#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
#define TRIG_DP 1
TINL __m512i perm64i(const __m512i *t, __m512i s, __mmask16 b5) {
    return _mm512_mask_blend_epi32(b5, _mm512_permutex2var_epi32(t[0], s, t[1]),
                                   _mm512_permutex2var_epi32(t[2], s, t[3]));
}

/* The datapath's word at quarter keys q < 2**23: with X = X2 2**12 + X1 2**6 + X0 every product
 * fits 31 bits (C1 < 2**24: the finer units of the low segments), floor(T / 2**17) in three
 * steps of 6, 6 and 5 bits; segment 0 from its dense words (a masked gather, rare lanes). */
TINL __m512i trig_dp(const TRegs *R, const uint32_t *dense0, __m512i q) {
    __m512i s = _mm512_srli_epi32(q, 17), X = _mm512_and_si512(q, _mm512_set1_epi32(0x1FFFF));
    __mmask16 b5 = _mm512_test_epi32_mask(s, _mm512_set1_epi32(32));
    __m512i c1x = perm64i(R->c1x, s, b5), cl = perm64i(R->c2lo, s, b5);
    __m512i C1 = _mm512_and_si512(c1x, _mm512_set1_epi32(0xFFFFFF)), M6 = _mm512_set1_epi32(63);
    __m512i t = _mm512_add_epi32(_mm512_add_epi32(_mm512_and_si512(cl, _mm512_set1_epi32(0x1FFFF)),
                                                  _mm512_mullo_epi32(_mm512_srai_epi32(cl, 17), sfu_trunc_square(X))),
                                 _mm512_mullo_epi32(C1, _mm512_and_si512(X, M6)));
    t = _mm512_add_epi32(_mm512_mullo_epi32(C1, _mm512_and_si512(_mm512_srli_epi32(X, 6), M6)),
                         _mm512_srai_epi32(t, 6));
    t = _mm512_add_epi32(_mm512_mullo_epi32(C1, _mm512_srli_epi32(X, 12)), _mm512_srai_epi32(t, 6));
    __m512i N = _mm512_add_epi32(perm64i(R->c0hi, s, b5), _mm512_srai_epi32(t, 5));
    __m512 f = _mm512_cvt_roundepi32_ps(N, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512i w = _mm512_add_epi32(_mm512_castps_si512(f), _mm512_slli_epi32(_mm512_srai_epi32(c1x, 24), 23));
    __mmask16 z0 = _mm512_testn_epi32_mask(s, s);
    if (z0) w = _mm512_mask_i32gather_epi32(w, z0, q, (const void *)dense0, 4);
    return w;
}
#endif

/* 16 lanes (live: those of them to read and write). */
TINL void trig16(int turns, int cosine, int dp, const TRegs *Rp, const Trig *M, const uint32_t *a, uint32_t *y,
                 __mmask16 live) {
    const uint32_t *codes = M->codes, *small = M->small;
    const __m512i ABS = _mm512_set1_epi32(0x7FFFFFFF), SGN = _mm512_set1_epi32((int)0x80000000u);
    const __m512i HALF = _mm512_set1_epi32((1 << 24) - 1);
    __m512i t = _mm512_maskz_loadu_epi32(live, a);
    if (turns)   /* FMUL.RZ by f32(1/2pi) */
        t = _mm512_castps_si512(_mm512_mul_round_ps(_mm512_castsi512_ps(t),
                                                    _mm512_castsi512_ps(_mm512_set1_epi32(0x3E22F983)),
                                                    _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
    __m512i at = _mm512_and_si512(t, ABS);
    /* k = frac(|t|) as 25-bit fixed point, truncated (exact: |t| >= 2**23 is an integer, 0;
     * Inf/NaN lanes give some key in range and are replaced at the end) */
#ifdef __AVX512DQ__
    __m512 fr = _mm512_reduce_ps(_mm512_castsi512_ps(at), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
#else
    __m512 fr = _mm512_sub_ps(_mm512_castsi512_ps(at),
                              _mm512_roundscale_ps(_mm512_castsi512_ps(at), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
#endif
    __m512i k = _mm512_cvttps_epi32(_mm512_mul_ps(fr, _mm512_set1_ps(33554432.0f)));
    if (cosine) k = _mm512_add_epi32(k, _mm512_set1_epi32(1 << 23));
    /* the sign: bit 24 of k (the second half turn), xor the angle's for sin */
    __m512i sg = cosine ? _mm512_and_si512(_mm512_slli_epi32(k, 7), SGN)
                        : _mm512_ternarylogic_epi32(t, _mm512_slli_epi32(k, 7), SGN, 0x28);   /* (A ^ B) & C */
    __m512i j = _mm512_and_si512(k, HALF);
    __m512i q = _mm512_min_epu32(j, _mm512_xor_si512(j, HALF));    /* S[j] = S[2**24 - 1 - j] */
    __m512i yv;
#ifdef TRIG_DP
    if (dp) {
        yv = trig_dp(Rp, M->dense0, q);
    } else
#endif
    {
        (void)dp;
        __m512i w = trig_model(Rp, q);
        /* the key's 2-bit two's-complement code, from the top of its word down */
        __m512i cw = _mm512_i32gather_epi32(_mm512_srli_epi32(q, 4), (const void *)codes, 4);
        __m512i sh = _mm512_and_si512(_mm512_add_epi32(q, q), _mm512_set1_epi32(30));
        __m512i c = _mm512_srai_epi32(_mm512_sllv_epi32(cw, sh), 30);
        yv = _mm512_add_epi32(w, c);
        __mmask16 m2 = _mm512_cmpeq_epi32_mask(c, _mm512_set1_epi32(-2)) & live;
        if (__builtin_expect(m2 != 0, 0)) yv = _mm512_mask_i32gather_epi32(yv, m2, q, (const void *)small, 4);
    }
    yv = _mm512_xor_si512(yv, sg);
    yv = _mm512_mask_mov_epi32(yv, _mm512_cmpge_epu32_mask(at, _mm512_set1_epi32(0x7F800000)), ABS);
    _mm512_mask_storeu_epi32(y, live, yv);
}

TINL void trig_run(int turns, int cosine, int dp, const Trig *M, const uint32_t *a, uint32_t *y, int64_t n) {
    TRegs R;
    trig_regs(&R, M);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) trig16(turns, cosine, dp, &R, M, a + i, y + i, (__mmask16)0xFFFF);
    if (i < n) trig16(turns, cosine, dp, &R, M, a + i, y + i, (__mmask16)((1u << (n - i)) - 1u));
}

/* sin (cosine = 0) or cos of n f32 words a; turns: the ptx forms (FMUL.RZ by 1/2pi first), else
 * the bare MUFU functions.  0: done; -1: no kernel here (the caller takes its own path). */
int warpsim_sfu_trig(int turns, int cosine, const void *model, const uint32_t *a, uint32_t *y, int64_t n) {
    const Trig *M = model;
#ifdef TRIG_DP
    if (M->dp) {
        if (turns) {
            if (cosine) trig_run(1, 1, 1, M, a, y, n); else trig_run(1, 0, 1, M, a, y, n);
        } else {
            if (cosine) trig_run(0, 1, 1, M, a, y, n); else trig_run(0, 0, 1, M, a, y, n);
        }
        return 0;
    }
#endif
    if (turns) {
        if (cosine) trig_run(1, 1, 0, M, a, y, n); else trig_run(1, 0, 0, M, a, y, n);
    } else {
        if (cosine) trig_run(0, 1, 0, M, a, y, n); else trig_run(0, 0, 0, M, a, y, n);
    }
    return 0;
}

/* The model's word at every quarter key q < 2**23 (the codes' derivation; with dp, the
 * datapath's words, which the derivation compares with the table). */
int warpsim_sfu_trig_model(const void *model, uint32_t *out) {
    const Trig *M = model;
    TRegs R;
    trig_regs(&R, M);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int32_t q0 = 0; q0 < (1 << 23); q0 += 16) {
        __m512i q = _mm512_add_epi32(_mm512_set1_epi32(q0), iota);
#ifdef TRIG_DP
        if (M->dp) {
            _mm512_storeu_si512(out + q0, trig_dp(&R, M->dense0, q));
            continue;
        }
#endif
        _mm512_storeu_si512(out + q0, trig_model(&R, q));
    }
    return 0;
}

/* 2: the datapath kernel and the code kernel; 1: the code kernel (AVX-512 without VBMI/VNNI). */
#ifdef TRIG_DP
int warpsim_sfu_trig_available(void) { return 2; }
#else
int warpsim_sfu_trig_available(void) { return 1; }
#endif

#else   /* no AVX-512: _sfu.c's fast path serves every lane */

int warpsim_sfu_trig(int turns, int cosine, const void *model, const uint32_t *a, uint32_t *y, int64_t n) {
    (void)turns; (void)cosine; (void)model; (void)a; (void)y; (void)n;
    return -1;
}

int warpsim_sfu_trig_model(const void *model, uint32_t *out) {
    (void)model; (void)out;
    return -1;
}

int warpsim_sfu_trig_available(void) { return 0; }

#endif
