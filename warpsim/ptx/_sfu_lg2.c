/* MUFU.LG2 (lg2.approx(.ftz).f32) without a per-lane table read for most lanes; compiled into
 * the SFU library with _sfu.c (warpsim/ptx/sfu_accel.py).
 *
 * The unit's result is trunc24(e + p): e the operand's exponent (x >= 1) or exponent + 1
 * (x < 1), p the table word of the key k = up:M (up = x >= 1; sfu.py), trunc24 truncation to
 * an f32 toward zero.  Any p in the word's truncation cell ([t, t + ulp) for x >= 1, (t - ulp, t]
 * for x < 1) gives the same result for every e.  Model (128 segments of 2**17 keys: the
 * interpolator's 64 per half): in units of 2**-31 (Z units),
 *     zm = c0 + floor(Xc * (c1 + c2 * Xc))      (f32 FMA, then a multiply; Xc = low 17 bits - 2**16,
 *                                                 evaluated scaled by powers of two: lg2_zm)
 * and a band B per segment such that every key's cell meets [zm - B, zm + B] (derived over
 * every key from this same arithmetic: lg2_zm).  Where the result words of the two ends agree
 * the lane's word is that word (exact by construction); otherwise ("uncertain") the table word
 * is w0 + code - 1, w0 the e = 0 word of zm, with the key's 2-bit code (3: not so -> the exact
 * scalar path, as are zeros, subnormals, Inf/NaN and x = 2**n, n >= 0).
 *
 * The model table: int32 c0[128], f32 c1[128] * 2**7, f32 c2[128] * 2**14 whose low 7 bits hold B
 * (part of c2 as used).  Segment index = up << 6 | M >> 17. */
#include "_sfu.h"

typedef struct {
    int32_t c0[128];
    float c1[128];
    float c2[128];
} Lg2Model;

static inline float lg2_f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline uint32_t lg2_u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

/* int32 -> f32 rounded toward zero (exact via double, then 24 significant bits kept) */
static inline float lg2_cvt_rz(int32_t v) {
    double d = (double)v;
    uint64_t u;
    memcpy(&u, &d, 8);
    u &= 0xFFFFFFFFE0000000ull;
    memcpy(&d, &u, 8);
    return (float)d;
}

/* The model of key k (24 bits: up << 23 | M) in Z units, and its segment's band.  xs = Xc * 2**-7
 * (exact: the kernel builds it from the key's bits), so c1, c2 are held times 2**7, 2**14; c2's
 * low 7 bits (the band) stay in it (the band is derived with them). */
static inline int32_t lg2_zm(const Lg2Model *C, uint32_t k, int32_t *band) {
    uint32_t s = k >> 17;
    float xs = (float)((int32_t)(k & 0x1FFFFu) - 0x10000) * 0x1p-7f;
    *band = (int32_t)(lg2_u(C->c2[s]) & 127u);
    float f = fmaf(C->c2[s], xs, C->c1[s]) * xs;
    return C->c0[s] + (int32_t)floorf(f);
}

/* The result word trunc24(e + z * 2**-31) for a cell end z (Z units) and exponent e, up = x >= 1:
 * for e != 0 the truncations nest (z's f32 grid is finer than that of e + z * 2**-31, same
 * direction), so it is trunc24 of e + floor (x >= 1) or ceil (x < 1) of z / 256 in 2**-23 units;
 * the kernel computes the same as one FMA rounded toward zero of trunc24(z) * 2**-31 + e. */
static inline uint32_t lg2_word(int32_t z, int32_t e, int up) {
    if (e == 0) return lg2_u(lg2_cvt_rz(z) * 0x1p-31f);
    int32_t q = up ? (z >> 8) : (int32_t)(((int64_t)z + 255) >> 8);
    return lg2_u(lg2_cvt_rz(e * 8388608 + q) * 0x1p-23f);
}

/* Derivation over every key of t (2**24 measured words): per segment the band (out_band[128],
 * Z units; hi key 0 = x = 2**n excluded) and per key table word - w0 (out_d, for the codes).
 * Returns 0, or -1 when a cell end would leave int32. */
int warpsim_sfu_lg2_derive(const uint32_t *t, const void *model, int32_t *out_band, int32_t *out_d) {
    const Lg2Model *C = (const Lg2Model *)model;
    for (int s = 0; s < 128; s++) out_band[s] = 0;
    for (uint32_t k = 0; k < (1u << 24); k++) {
        int32_t b_;
        int32_t zm = lg2_zm(C, k, &b_);
        int up = (int)(k >> 23);
        uint32_t w = t[k];
        float tf = lg2_f(w);
        /* the cell in Z units: hi [L, U), lo (L, U] */
        float nx = lg2_f((w & 0x7FFFFFFFu) + 1u);    /* next magnitude */
        double a = (double)tf * 0x1p31, b = (double)(up ? nx : -nx) * 0x1p31;
        double L = up ? a : b, U = up ? b : a;
        double B1, B2;
        if (up) {
            B1 = floor((double)zm - U) + 1;             /* zm - B < U */
            B2 = ceil(L - (double)zm);                  /* zm + B >= L */
        } else {
            B1 = ceil((double)zm - U);                  /* zm - B <= U */
            B2 = floor(L - (double)zm) + 1;             /* zm + B > L */
        }
        double B = B1 > B2 ? B1 : B2;
        if (B < 0) B = 0;
        if (k != (1u << 23) && B > out_band[k >> 17]) out_band[k >> 17] = B > 1e9 ? 1000000000 : (int32_t)B;
        out_d[k] = (int32_t)(w - lg2_word(zm, 0, up));
    }
    for (uint32_t k = 0; k < (1u << 24); k++) {   /* the ends stay in int32 */
        int32_t bb;
        int64_t zm = lg2_zm(C, k, &bb);
        int64_t B = out_band[k >> 17];
        if (zm - B < INT32_MIN || zm + B > INT32_MAX) return -1;
    }
    return 0;
}

/* Every key's fast-pass outcome with the stored band (for the tests): 1 where certain, its word
 * at exponent e in out (e = 1 for x >= 1, -1 for x < 1). */
void warpsim_sfu_lg2_certain(const void *model, int32_t e_hi, int32_t e_lo, uint8_t *cert, uint32_t *out) {
    const Lg2Model *C = (const Lg2Model *)model;
    for (uint32_t k = 0; k < (1u << 24); k++) {
        int32_t B;
        int32_t zm = lg2_zm(C, k, &B);
        int up = (int)(k >> 23);
        int32_t e = up ? e_hi : e_lo;
        uint32_t wl = lg2_word(zm - B, e, up), wh = lg2_word(zm + B, e, up);
        cert[k] = wl == wh && k != (1u << 23);
        out[k] = wl;
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#include <immintrin.h>

#define LG2_RZ (_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#define LG2_RD (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)

#ifdef __AVX512VBMI__
/* 128-entry lookup of 32-bit words by a 7-bit segment index held in every byte of its lane:
 * four byte permutes (VPERMI2B), plane p (byte p of each word, 2 registers) into bytes p */
typedef struct { __m512i lo[4]; const __m512i *hi; } Lg2Tab;
static inline void lg2_tab(Lg2Tab *t, const uint8_t *planes) {
    for (int p = 0; p < 4; p++) t->lo[p] = _mm512_loadu_si512(planes + 128 * p);
    t->hi = (const __m512i *)(planes + 64);
}
static inline __m512i lg2_look(const Lg2Tab *t, __m512i idx) {
    __m512i r = _mm512_mask2_permutex2var_epi8(t->lo[0], idx, (__mmask64)0x1111111111111111ull,
                                               _mm512_loadu_si512(t->hi + 0));
    r = _mm512_mask2_permutex2var_epi8(t->lo[1], r, (__mmask64)0x2222222222222222ull, _mm512_loadu_si512(t->hi + 2));
    r = _mm512_mask2_permutex2var_epi8(t->lo[2], r, (__mmask64)0x4444444444444444ull, _mm512_loadu_si512(t->hi + 4));
    return _mm512_mask2_permutex2var_epi8(t->lo[3], r, (__mmask64)0x8888888888888888ull, _mm512_loadu_si512(t->hi + 6));
}
#define LG2_IDX(s) _mm512_shuffle_epi8(s, _mm512_set1_epi32(0x00000000) + _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0))
#else
/* 128-entry lookup of 32-bit words (8 registers of 16): idx bits 0..4 within a pair of
 * registers, bit 5 picks the pair within a half, bit 6 the half */
typedef struct { __m512i r[8]; } Lg2Tab;
static inline void lg2_tab(Lg2Tab *t, const int32_t *w) {
    for (int j = 0; j < 8; j++) t->r[j] = _mm512_loadu_si512(w + 16 * j);
}
static inline __m512i lg2_look(const Lg2Tab *t, __m512i idx) {
    __mmask16 b5 = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(32)), b6 = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(64));
    __m512i r0 = _mm512_permutex2var_epi32(t->r[0], idx, t->r[1]);
    __m512i r1 = _mm512_permutex2var_epi32(t->r[2], idx, t->r[3]);
    __m512i r2 = _mm512_permutex2var_epi32(t->r[4], idx, t->r[5]);
    __m512i r3 = _mm512_permutex2var_epi32(t->r[6], idx, t->r[7]);
    return _mm512_mask_blend_epi32(b6, _mm512_mask_blend_epi32(b5, r0, r1), _mm512_mask_blend_epi32(b5, r2, r3));
}
#define LG2_IDX(s) (s)
#endif

/* The fast pass over one block of n <= 1024 lanes (x: f32 words, ftz form): y gets every lane's
 * word except those listed in rare (block-local indices; the count is returned), which the
 * caller computes with the exact scalar function.  codes: 2 bits per key (sfu_accel).  The
 * model: Lg2Model, then (VBMI) its three tables as byte planes, 128 bytes each. */
/* The fast pass over one block of n <= 1024 lanes (x: f32 words, ftz form): y gets every lane's
 * word except those listed in rare (block-local indices; the count is returned), which the
 * caller computes with the exact scalar function.  codes: 2 bits per key (sfu_accel).  The
 * model: Lg2Model, then (VBMI) its three tables as byte planes, 128 bytes each. */
static int32_t warpsim_sfu_lg2_pass(const void *model, const uint32_t *codes, const uint32_t *x, uint32_t *y,
                             int32_t n, int32_t *rare) {
    const Lg2Model *C = (const Lg2Model *)model;
    Lg2Tab T0, T1, T2;
#ifdef __AVX512VBMI__
    const uint8_t *planes = (const uint8_t *)(C + 1);
    lg2_tab(&T0, planes), lg2_tab(&T1, planes + 512), lg2_tab(&T2, planes + 1024);
#else
    lg2_tab(&T0, C->c0), lg2_tab(&T1, (const int32_t *)C->c1), lg2_tab(&T2, (const int32_t *)C->c2);
#endif
    int32_t unc[1024 + 16], zmv[1024 + 16], bv[1024 + 16];
    int32_t nu = 0, nr = 0;
    const __m512 s31 = _mm512_set1_ps(0x1p-31f), one = _mm512_set1_ps(1.0f);
    for (int32_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512i idx = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                       _mm512_set1_epi32(i));
        __m512i b = _mm512_maskz_loadu_epi32(live, x + i);
        __m512 xf = _mm512_castsi512_ps(b);
        __mmask16 up = _mm512_cmp_ps_mask(xf, one, _CMP_GE_OQ);
        /* e = exponent (x >= 1) or exponent + 1 (x < 1) */
        __m512 ge = _mm512_getexp_ps(xf);
        __m512 ef = _mm512_mask_add_ps(ge, (__mmask16)~up, ge, one);
        __m512i s = _mm512_and_si512(_mm512_srli_epi32(b, 17), _mm512_set1_epi32(63));
        s = _mm512_mask_or_epi32(s, up, s, _mm512_set1_epi32(64));
        __m512i si = LG2_IDX(s);
        __m512i c0 = lg2_look(&T0, si);
        __m512 c1 = _mm512_castsi512_ps(lg2_look(&T1, si));
        __m512i c2b = lg2_look(&T2, si);
        /* xs = (low 17 bits - 2**16) * 2**-7: 2**16 + X * 2**-7 as f32 bits, less 2**16 + 2**9 */
        __m512 xs = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_ternarylogic_epi32(b, _mm512_set1_epi32(0x1FFFF),
                                                                                _mm512_set1_epi32(0x47800000), 0xEA)),
                                  _mm512_set1_ps(65536.0f + 512.0f));
        __m512i band = _mm512_and_si512(c2b, _mm512_set1_epi32(127));
        __m512 f = _mm512_mul_ps(_mm512_fmadd_ps(_mm512_castsi512_ps(c2b), xs, c1), xs);
        __m512i zm = _mm512_add_epi32(c0, _mm512_cvt_roundps_epi32(f, LG2_RD));
        /* the words of the band's ends: trunc24(e + trunc24(z) * 2**-31) */
        __m512 wl = _mm512_fmadd_round_ps(_mm512_cvt_roundepi32_ps(_mm512_sub_epi32(zm, band), LG2_RZ), s31, ef, LG2_RZ);
        __m512 wh = _mm512_fmadd_round_ps(_mm512_cvt_roundepi32_ps(_mm512_add_epi32(zm, band), LG2_RZ), s31, ef, LG2_RZ);
        /* negative normal -> NaN; 0, subnormal, Inf, NaN, -0, x = 2**n (n >= 0): rare */
        __mmask16 odd = _mm512_fpclass_ps_mask(xf, 0xBF) & live;
        __mmask16 neg = _mm512_fpclass_ps_mask(xf, 0x40) & (__mmask16)~odd;
        odd |= _mm512_mask_testn_epi32_mask(up & live, b, _mm512_set1_epi32(0x7FFFFF));
        __mmask16 unc_m = _mm512_mask_cmp_ps_mask(live & (__mmask16)~(neg | odd), wl, wh, _CMP_NEQ_UQ);
        _mm512_mask_storeu_epi32(y + i, live, _mm512_mask_mov_epi32(_mm512_castps_si512(wl), neg,
                                                                     _mm512_set1_epi32(0x7FFFFFFF)));
        if (odd) {
            _mm512_storeu_si512(rare + nr, _mm512_maskz_compress_epi32(odd, idx));
            nr += __builtin_popcount(odd);
        }
        _mm512_storeu_si512(unc + nu, _mm512_maskz_compress_epi32(unc_m, idx));
        _mm512_storeu_si512(zmv + nu, _mm512_maskz_compress_epi32(unc_m, zm));
        _mm512_storeu_si512(bv + nu, _mm512_maskz_compress_epi32(unc_m, b));
        nu += __builtin_popcount(unc_m);
    }
    /* the uncertain lanes: the table word t = w0 + code - 1 (w0 the e = 0 word of zm), then
     * trunc24(e + t); code 3 -> rare */
    for (int32_t j = 0; j < nu; j += 16) {
        __mmask16 live = nu - j >= 16 ? 0xFFFF : (__mmask16)((1u << (nu - j)) - 1u);
        __m512i zm = _mm512_maskz_loadu_epi32(live, zmv + j);
        __m512i b = _mm512_maskz_loadu_epi32(live, bv + j);
        __m512 xf = _mm512_castsi512_ps(b);
        __mmask16 up = _mm512_cmp_ps_mask(xf, one, _CMP_GE_OQ);
        __m512 ge = _mm512_getexp_ps(xf);
        __m512 ef = _mm512_mask_add_ps(ge, (__mmask16)~up, ge, one);
        __m512i k = _mm512_mask_or_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFF)), up,
                                         _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32(1 << 23));
        __m512i cw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, _mm512_srli_epi32(k, 4),
                                                 (const void *)codes, 4);
        __m512i code = _mm512_and_si512(_mm512_srlv_epi32(cw, _mm512_slli_epi32(_mm512_and_si512(k, _mm512_set1_epi32(15)), 1)),
                                        _mm512_set1_epi32(3));
        __m512i w0 = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvt_roundepi32_ps(zm, LG2_RZ), s31));
        __m512i t = _mm512_sub_epi32(_mm512_add_epi32(w0, code), _mm512_set1_epi32(1));
        __m512 w = _mm512_add_round_ps(ef, _mm512_castsi512_ps(t), LG2_RZ);
        __mmask16 bad = _mm512_mask_cmpeq_epi32_mask(live, code, _mm512_set1_epi32(3));
        _mm512_storeu_si512(zmv + j, _mm512_castps_si512(w));
        if (bad) {
            _mm512_storeu_si512(rare + nr, _mm512_maskz_compress_epi32(bad, _mm512_maskz_loadu_epi32(live, unc + j)));
            nr += __builtin_popcount(bad);
        }
    }
    for (int32_t j = 0; j < nu; j++) y[unc[j]] = (uint32_t)zmv[j];
    return nr;
}

int warpsim_sfu_lg2(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n) {
    if (!T->aux || !T->corr) return -1;
    int32_t r[1024 + 16];
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        int32_t m_ = n - i0 < 1024 ? (int32_t)(n - i0) : 1024;
        int32_t nr = warpsim_sfu_lg2_pass(T->aux, T->corr, a + i0, y + i0, m_, r);
        for (int32_t j = 0; j < nr; j++) y[i0 + r[j]] = warpsim_sfu_one(form, T, a[i0 + r[j]]);
    }
    return 0;
}

int warpsim_sfu_lg2_available(void) { return 1; }
#else
int warpsim_sfu_lg2(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n) {
    (void)form; (void)T; (void)a; (void)y; (void)n;
    return -1;
}

int warpsim_sfu_lg2_available(void) { return 0; }
#endif
