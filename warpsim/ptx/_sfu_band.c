/* AVX-512 band kernels of the compiled SFU path (warpsim/ptx/sfu_accel.py).
 *
 * A random per-lane table read costs about as much as a whole add.f32 on a wide CPU (a 16-lane
 * gather is ~20 cycles even from L1, more from a table of megabytes), so these kernels read no
 * table for most lanes.  Each function's words are modelled per interpolation segment of the
 * key by a quadratic whose coefficients sit in registers (fetched by permutes, not gathers):
 *
 *     V = c0q + round(X (c1 + X c2)),  word = base + (V >> F),  X = the key's low bits,
 *
 * V in units of 2**-F word (u32; f32 arithmetic inside the rounding).  A lane is *certain* when
 * V's fraction is farther than the segment's threshold from a word boundary; the thresholds are
 * derived by evaluating this very arithmetic on every key of the table (warpsim_sfu_band_eval),
 * so a certain lane is exact by construction.  An uncertain lane (about 15% of them for ex2)
 * reads one bit per key -- the word is one away from the model's, towards the fraction's side --
 * in a short second loop; rare lanes (zeros, subnormals, Inf/NaN, range limits) go to the exact
 * scalar path of _sfu.c.  The threshold rides in the low 8 bits of c2 (masked off before use).
 */
#include "_sfu.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#define BBLK 1024   /* lanes per block: the lists stay in L1 */
#define IOTA _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* A Band's per-segment tables in registers (16 entries per register). */
typedef struct {
    __m512 c1[8], c2[8];
    __m512i c0q[8];
    __m512i base;
} Regs;

INL void regs_load(Regs *R, const Band *B, int nseg) {
#if defined(__AVX512VBMI__)
    if (nseg == 128) {   /* byte planes: register 2b + h holds byte b of entries 64h..64h+63 */
        for (int q = 0; q < 8; q++) {
            R->c1[q] = _mm512_castsi512_ps(_mm512_loadu_si512(B->pl[0][q >> 1] + 64 * (q & 1)));
            R->c2[q] = _mm512_castsi512_ps(_mm512_loadu_si512(B->pl[1][q >> 1] + 64 * (q & 1)));
            R->c0q[q] = _mm512_loadu_si512(B->pl[2][q >> 1] + 64 * (q & 1));
        }
        R->base = _mm512_set1_epi32((int)B->base);
        return;
    }
#endif
    for (int q = 0; q < nseg / 16; q++) {
        R->c1[q] = _mm512_loadu_ps(B->c1 + 16 * q);
        R->c2[q] = _mm512_loadu_ps(B->c2 + 16 * q);
        R->c0q[q] = _mm512_loadu_si512(B->c0q + 16 * q);
    }
    R->base = _mm512_set1_epi32((int)B->base);
}

/* t[s] for per-lane segments s < nseg (nseg: 16, 32, 64 or 128, a constant after inlining) */
INL __m512i tperm(const __m512i *t, int nseg, __m512i s) {
#if defined(__AVX512VBMI__)
    if (nseg == 128) {   /* four byte permutes over 128-byte planes, each filling one byte of every lane */
        __m512i r = _mm512_shuffle_epi8(s, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8,
                                                                                12, 12, 12, 12)));
        r = _mm512_mask2_permutex2var_epi8(t[0], r, (__mmask64)0x1111111111111111ull, t[1]);
        r = _mm512_mask2_permutex2var_epi8(t[2], r, (__mmask64)0x2222222222222222ull, t[3]);
        r = _mm512_mask2_permutex2var_epi8(t[4], r, (__mmask64)0x4444444444444444ull, t[5]);
        return _mm512_mask2_permutex2var_epi8(t[6], r, (__mmask64)0x8888888888888888ull, t[7]);
    }
#endif
    if (nseg <= 16) return _mm512_permutexvar_epi32(s, t[0]);
    __m512i r = _mm512_permutex2var_epi32(t[0], s, t[1]);
    if (nseg <= 32) return r;
    __mmask16 b5 = _mm512_test_epi32_mask(s, _mm512_set1_epi32(32));
    r = _mm512_mask_blend_epi32(b5, r, _mm512_permutex2var_epi32(t[2], s, t[3]));
    if (nseg <= 64) return r;
    __m512i r2 = _mm512_mask_blend_epi32(b5, _mm512_permutex2var_epi32(t[4], s, t[5]),
                                         _mm512_permutex2var_epi32(t[6], s, t[7]));
    return _mm512_mask_blend_epi32(_mm512_test_epi32_mask(s, _mm512_set1_epi32(64)), r, r2);
}

INL __m512 tpermf(const __m512 *t, int nseg, __m512i s) {
    return _mm512_castsi512_ps(tperm((const __m512i *)t, nseg, s));
}

/* The model word of key (s, j) (s: segment, j: low bits); *up: V's fraction >= 1/2, *unc: the
 * lanes within the segment's threshold of a word boundary; *v: V (for the derivation). */
INL __m512i band_word(const Regs *R, int nseg, __m512i s, __m512i j, __mmask16 *up, __mmask16 *unc, __m512i *v) {
    __m512 X = _mm512_cvtepi32_ps(j);
    __m512i c2m = _mm512_castps_si512(tpermf(R->c2, nseg, s));
    __m512 c2 = _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(0xFF), c2m));
    __m512 p = _mm512_mul_ps(X, _mm512_fmadd_ps(X, c2, tpermf(R->c1, nseg, s)));
    __m512i V = _mm512_add_epi32(tperm(R->c0q, nseg, s), _mm512_cvtps_epi32(p));
    __m512i d = _mm512_sub_epi32(_mm512_and_si512(V, _mm512_set1_epi32((1 << BAND_F) - 1)),
                                 _mm512_set1_epi32(1 << (BAND_F - 1)));
    *up = _mm512_testn_epi32_mask(d, _mm512_set1_epi32((int)SIGN));
    *unc = _mm512_cmpge_epi32_mask(_mm512_abs_epi32(d), _mm512_and_si512(c2m, _mm512_set1_epi32(0xFF)));
    *v = V;
    return _mm512_add_epi32(R->base, _mm512_srli_epi32(V, BAND_F));
}

/* Per block, the lanes that need a second look: e = lane index (low 16 bits), bit 31 = rare (the
 * scalar path), bit 30 = up; and the key of each.  Full-vector stores of compressed registers
 * (compress-to-memory is slow on some CPUs), so the lists have 16 words of slack. */
#define LIST_ADD(le, lk, nl, i, key, up, unc, rare)                                             \
    do {                                                                                       \
        __m512i e_ = _mm512_mask_or_epi32(_mm512_add_epi32(_mm512_set1_epi32(i), IOTA), up,     \
                                          _mm512_add_epi32(_mm512_set1_epi32(i), IOTA),         \
                                          _mm512_set1_epi32(0x40000000));                      \
        e_ = _mm512_mask_or_epi32(e_, rare, e_, _mm512_set1_epi32((int)0x80000000u));           \
        __mmask16 l_ = (unc) | (rare);                                                         \
        _mm512_storeu_si512((le) + (nl), _mm512_maskz_compress_epi32(l_, e_));                 \
        _mm512_storeu_si512((lk) + (nl), _mm512_maskz_compress_epi32(l_, key));                \
        (nl) += __builtin_popcount(l_);                                                        \
    } while (0)

/* The listed lanes of a block: an uncertain lane's word moves one towards its side where its
 * key's bit is set; rare lanes are moved to rl (their count returned).  No calls here or in the
 * vector pass: around a call the compiler would keep the tables in memory. */
INL int list_fix(const uint32_t *le, const uint32_t *lk, int nl, const Band *B, uint32_t *y, uint32_t *rl) {
    const uint32_t *bits = B->bits;
    int nr = 0;
    for (int q = 0; q < nl; q++) {
        uint32_t e = le[q], i = e & 0xFFFFu, k = lk[q];
        if (__builtin_expect(e >> 31, 0)) {
            rl[nr++] = i;
            continue;
        }
        uint32_t c = (bits[k >> 5] >> (k & 31u)) & 1u;
        y[i] += (e & 0x40000000u) ? c : 0u - c;
    }
    return nr;
}

INL __mmask16 live_mask(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u); }

/* ex2's operand, 16 lanes: |x| as fixed point with 23 fraction bits, truncated (q); the key of
 * the table's positive half (kk: f, or ~f for x < 0); rare: 0, subnormal, |x| >= 64 (Inf, NaN,
 * and every range limit). */
typedef struct { __m512i q, neg, k, kk; __mmask16 rare; } Ex2Key;

INL Ex2Key ex2_key(__m512i b, __mmask16 live) {
    Ex2Key e;
    __m512i ab = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    e.rare = _mm512_mask_cmpge_epu32_mask(live, _mm512_sub_epi32(ab, _mm512_set1_epi32(0x00800000)),
                                          _mm512_set1_epi32(0x42000000));
    e.q = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(ab), _mm512_set1_ps(8388608.0f)));
    e.neg = _mm512_srai_epi32(b, 31);
    e.k = _mm512_and_si512(e.q, _mm512_set1_epi32((int)MANT));
    e.kk = _mm512_and_si512(_mm512_xor_si512(e.q, e.neg), _mm512_set1_epi32((int)MANT));
    return e;
}

/* The word from the table word t of kk: 2**(n + f) = t + n << 23; 2**-(n + f) = t(~f) - (n + 1) << 23,
 * and 2**-n exactly at f = 0 (*z: those lanes). */
INL __m512i ex2_word(const Ex2Key *e, __m512i t, __mmask16 *z) {
    *z = _mm512_test_epi32_mask(e->neg, e->neg) & _mm512_testn_epi32_mask(e->k, e->k);
    __m512i sh = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_srli_epi32(e->q, 23), e->neg), 23);
    t = _mm512_mask_mov_epi32(t, *z, _mm512_set1_epi32(0x3F800000 + 0x00800000));
    return _mm512_add_epi32(t, _mm512_sub_epi32(_mm512_xor_si512(sh, e->neg), e->neg));
}

/* ex2.approx(.ftz).f32 (MUFU.EX2 and ptxas's sequence) on one block of m <= BBLK lanes: |x| as
 * fixed point with 23 fraction bits, truncated; 2**f from the band model of the table's positive
 * half (64 segments of 2**17 keys, the unit's own), 2**-f = 2**(1 - f) / 2 with 1 - f read as ~f
 * (as _sfu.c's fast path).  Returns the number of rare lanes listed in rl. */
__attribute__((noinline)) static int block_ex2(const Band *B, const uint32_t *a, uint32_t *y, int m_, uint32_t *rl) {
    Regs R;
    regs_load(&R, B, 64);
    uint32_t le[BBLK + 16], lk[BBLK + 16];
    int nl = 0;
    for (int i = 0; i < m_; i += 16) {
        __mmask16 live = live_mask(m_ - i), up, unc, z;
        __m512i b = live == 0xFFFF ? _mm512_loadu_si512(a + i) : _mm512_maskz_loadu_epi32(live, a + i), v;
        Ex2Key e = ex2_key(b, live);
        __mmask16 rare = e.rare;
        __m512i kk = e.kk;
        __m512i t = band_word(&R, 64, _mm512_srli_epi32(kk, 17), _mm512_and_si512(kk, _mm512_set1_epi32(0x1FFFF)),
                              &up, &unc, &v);
        __m512i yv = ex2_word(&e, t, &z);
        if (live == 0xFFFF) _mm512_storeu_si512(y + i, yv); else _mm512_mask_storeu_epi32(y + i, live, yv);
        LIST_ADD(le, lk, nl, i, kk, up, unc & live & (__mmask16)~z, rare);
    }
    return list_fix(le, lk, nl, B, y, rl);
}

#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
#define HAVE_DATAPATH 1
/* N of the datapath for 17-bit keys X of segments s < 64: with X = H 2**9 + L,
 * floor((lo + C1 X + C2 S) / 2**17) = (C1 H + ((lo + C1 L + C2 S) >> 9)) >> 8, all in 32 bits. */
INL __m512i dp_word(const __m512i *c0hi, const __m512i *c1, const __m512i *c2lo, __m512i s, __m512i X) {
    __m512i C1 = tperm(c1, 64, s), cl = tperm(c2lo, 64, s);
    __m512i S = sfu_trunc_square(X);
    __m512i B = _mm512_add_epi32(_mm512_add_epi32(_mm512_and_si512(cl, _mm512_set1_epi32(0x1FFFF)),
                                                  _mm512_mullo_epi32(C1, _mm512_and_si512(X, _mm512_set1_epi32(511)))),
                                 _mm512_mullo_epi32(_mm512_srai_epi32(cl, 17), S));
    __m512i A = _mm512_mullo_epi32(C1, _mm512_srli_epi32(X, 9));
    return _mm512_add_epi32(tperm(c0hi, 64, s), _mm512_srai_epi32(_mm512_add_epi32(A, _mm512_srai_epi32(B, 9)), 8));
}

/* ex2 through the datapath: block_ex2's arithmetic with the word from dp_word (no per-key data,
 * no uncertain lanes); rare lanes listed in rl (count returned). */
__attribute__((noinline)) static int block_ex2dp(const Datapath *D, const uint32_t *a, uint32_t *y, int m_,
                                                 uint32_t *rl) {
    __m512i c0hi[4], c1[4], c2lo[4];
    for (int q = 0; q < 4; q++) {
        c0hi[q] = _mm512_loadu_si512(D->c0hi + 16 * q);
        c1[q] = _mm512_loadu_si512(D->c1 + 16 * q);
        c2lo[q] = _mm512_loadu_si512(D->c2lo + 16 * q);
    }
    int nr = 0;
    for (int i = 0; i < m_; i += 16) {
        __mmask16 live = live_mask(m_ - i), z;
        __m512i b = live == 0xFFFF ? _mm512_loadu_si512(a + i) : _mm512_maskz_loadu_epi32(live, a + i);
        Ex2Key e = ex2_key(b, live);
        __mmask16 rare = e.rare;
        __m512i t = dp_word(c0hi, c1, c2lo, _mm512_srli_epi32(e.kk, 17), _mm512_and_si512(e.kk, _mm512_set1_epi32(0x1FFFF)));
        __m512i yv = ex2_word(&e, t, &z);
        if (live == 0xFFFF) _mm512_storeu_si512(y + i, yv); else _mm512_mask_storeu_epi32(y + i, live, yv);
        if (__builtin_expect(rare != 0, 0)) {
            _mm512_storeu_si512(rl + nr, _mm512_maskz_compress_epi32(rare, _mm512_add_epi32(_mm512_set1_epi32(i), IOTA)));
            nr += __builtin_popcount(rare);
        }
    }
    return nr;
}
#endif

/* rsqrt.approx.f64's DFMA step on the operand b itself after w, the word of RSQ64H(b) (already
 * scaled by 2**(-(e2 - p) / 2)): every value of ptxas's sequence (which steps on the reduced
 * operand and rescales at the end) times an exact power of two, so the same bits while they stay
 * normal (block_hi64 sends exponent fields >= 2040 to the scalar path). */
INL uint64_t rsq_step(uint64_t b, uint32_t w) {
    double x = D(b), r0 = D((uint64_t)w << 32);
    double e = fma(-x, r0 * r0, 1.0), c = fma(e, 0.375, 0.5);
    return UD(fma(c, r0 * e, r0));
}

/* The f64 forms on the high word (MUFU.RCP64H / RSQ64H: 128 segments of the 20-bit mantissa,
 * the two binades of RSQ64H's key [p, M] side by side) on one block of m <= BBLK u64 lanes, 16 at a
 * time: the high words gathered into one register, the band model, the word back into the high
 * half (the low word is zero).  rsqrt.approx.f64 then takes ptxas's DFMA step (rsq_step) in two
 * halves of 8 doubles; an uncertain lane whose word moves takes the step again in
 * scalar code (the list keeps its model word).  Returns the number of lanes listed in rl. */
INL int block_hi64(int form, const Band *B, const uint64_t *a, uint64_t *y, int m_, uint32_t *rl) {
    Regs R;
    regs_load(&R, B, 128);
    const __m512i ODD = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i LO = _mm512_setr_epi32(0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7);
    const __m512i HI = _mm512_setr_epi32(0, 8, 0, 9, 0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15);
    const __m512i M20 = _mm512_set1_epi32(0xFFFFF), E11 = _mm512_set1_epi32(2047);
    const int rsq = form != RCP64H, full = form == RSQRT_F64;
    uint32_t le[BBLK + 16], lk[BBLK + 16], lt[BBLK + 16];
    int nl = 0;
    for (int i = 0; i < m_; i += 16) {
        __mmask16 live = live_mask(m_ - i);
        __m512i b0 = _mm512_maskz_loadu_epi64((__mmask8)live, a + i);
        __m512i b1 = _mm512_maskz_loadu_epi64((__mmask8)(live >> 8), a + i + 8);
        __m512i h = _mm512_permutex2var_epi32(b0, ODD, b1);
        __m512i E = _mm512_and_si512(_mm512_srli_epi32(h, 20), E11), M = _mm512_and_si512(h, M20);
        __mmask16 rare, up, unc;
        __m512i key, v, t;
        if (!rsq) {          /* exponent field 0, >= 2045 (results near the range limits), Inf, NaN */
            rare = _mm512_mask_cmpge_epu32_mask(live, _mm512_sub_epi32(E, _mm512_set1_epi32(1)),
                                                _mm512_set1_epi32(2044));
            key = M;
            t = band_word(&R, 128, _mm512_srli_epi32(key, 13), _mm512_and_si512(key, _mm512_set1_epi32(0x1FFF)),
                          &up, &unc, &v);
            t = _mm512_or_si512(_mm512_add_epi32(t, _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(1023), E), 20)),
                                _mm512_and_si512(h, _mm512_set1_epi32((int)SIGN)));
        } else {
            if (full)        /* not a positive normal below 2**1017 (y0**2 must stay normal) */
                rare = _mm512_mask_cmpge_epu32_mask(live, _mm512_sub_epi32(h, _mm512_set1_epi32(0x00100000)),
                                                    _mm512_set1_epi32(0x7F700000));
            else             /* exponent field 0 or 2047, negative */
                rare = _mm512_mask_cmpge_epu32_mask(live, _mm512_sub_epi32(E, _mm512_set1_epi32(1)),
                                                    _mm512_set1_epi32(2046))
                     | _mm512_mask_cmpge_epu32_mask(live, h, _mm512_set1_epi32((int)SIGN));
            __m512i p = _mm512_andnot_si512(E, _mm512_set1_epi32(1));
            key = _mm512_or_si512(_mm512_slli_epi32(p, 20), M);
            t = band_word(&R, 128, _mm512_srli_epi32(key, 14), _mm512_and_si512(key, _mm512_set1_epi32(0x3FFF)),
                          &up, &unc, &v);
            __m512i sh = _mm512_srai_epi32(_mm512_sub_epi32(E, _mm512_add_epi32(p, _mm512_set1_epi32(1023))), 1);
            t = _mm512_sub_epi32(t, _mm512_slli_epi32(sh, 20));
        }
        __m512i y0 = _mm512_maskz_permutexvar_epi32(0xAAAA, LO, t), y1 = _mm512_maskz_permutexvar_epi32(0xAAAA, HI, t);
        if (full) {          /* y = y0 + y0 e (1/2 + 3/8 e), e = 1 - b y0**2, y0 = RSQ64H(b) (rsq_step) */
            if (__builtin_expect((unc & live) | rare, 0))
                _mm512_storeu_si512(lt + nl, _mm512_maskz_compress_epi32((unc & live) | rare, t));
            __m512d x0 = _mm512_castsi512_pd(b0), x1 = _mm512_castsi512_pd(b1);
            __m512d r0 = _mm512_castsi512_pd(y0), r1 = _mm512_castsi512_pd(y1);
            __m512d e0 = _mm512_fnmadd_pd(x0, _mm512_mul_pd(r0, r0), _mm512_set1_pd(1.0));
            __m512d e1 = _mm512_fnmadd_pd(x1, _mm512_mul_pd(r1, r1), _mm512_set1_pd(1.0));
            __m512d c0 = _mm512_fmadd_pd(e0, _mm512_set1_pd(0.375), _mm512_set1_pd(0.5));
            __m512d c1 = _mm512_fmadd_pd(e1, _mm512_set1_pd(0.375), _mm512_set1_pd(0.5));
            y0 = _mm512_castpd_si512(_mm512_fmadd_pd(c0, _mm512_mul_pd(r0, e0), r0));
            y1 = _mm512_castpd_si512(_mm512_fmadd_pd(c1, _mm512_mul_pd(r1, e1), r1));
        }
        _mm512_mask_storeu_epi64(y + i, (__mmask8)live, y0);
        _mm512_mask_storeu_epi64(y + i + 8, (__mmask8)(live >> 8), y1);
        if (__builtin_expect((unc & live) | rare, 0)) LIST_ADD(le, lk, nl, i, key, up, unc & live, rare);
    }
    const uint32_t *bits = B->bits;
    int nr = 0;
    for (int q = 0; q < nl; q++) {
        uint32_t e = le[q], i = e & 0xFFFFu, k = lk[q];
        if (__builtin_expect(e >> 31, 0)) {
            rl[nr++] = i;
            continue;
        }
        uint64_t c = (bits[k >> 5] >> (k & 31u)) & 1u;
        if (!full) y[i] += ((e & 0x40000000u) ? c : 0u - c) << 32;
        else if (c) y[i] = rsq_step(a[i], lt[q] + ((e & 0x40000000u) ? 1u : ~0u));
    }
    return nr;
}

/* A form's blocks, then each block's rare lanes by the exact scalar path. */
#define BLOCKS_BAND(BLOCKFN)                                                                   \
    do {                                                                                       \
        uint32_t rl[BBLK];                                                                     \
        for (int64_t i0 = 0; i0 < n; i0 += BBLK) {                                             \
            int m_ = (int)(n - i0 < BBLK ? n - i0 : BBLK);                                     \
            int nr = BLOCKFN(T->band, a + i0, y + i0, m_, rl);                                 \
            for (int q = 0; q < nr; q++) y[i0 + rl[q]] = warpsim_sfu_one(form, T, a[i0 + rl[q]]); \
        }                                                                                      \
    } while (0)

int warpsim_sfu_band(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n) {
    switch (form) {
#ifdef HAVE_DATAPATH
    case EX2_FTZ: case EX2:
        if (T->dp) {
            uint32_t rl[BBLK + 16];
            for (int64_t i0 = 0; i0 < n; i0 += BBLK) {
                int m_ = (int)(n - i0 < BBLK ? n - i0 : BBLK);
                int nr = block_ex2dp(T->dp, a + i0, y + i0, m_, rl);
                for (int q = 0; q < nr; q++) y[i0 + rl[q]] = warpsim_sfu_one(form, T, a[i0 + rl[q]]);
            }
            return 0;
        }
        BLOCKS_BAND(block_ex2); return 0;
#else
    case EX2_FTZ: case EX2: BLOCKS_BAND(block_ex2); return 0;
#endif
    }
    return -1;
}

/* one specialised copy per form (the form a constant inside) */
__attribute__((noinline)) static int block_rcp64h(const Band *B, const uint64_t *a, uint64_t *y, int m_, uint32_t *rl) {
    return block_hi64(RCP64H, B, a, y, m_, rl);
}
__attribute__((noinline)) static int block_rsq64h(const Band *B, const uint64_t *a, uint64_t *y, int m_, uint32_t *rl) {
    return block_hi64(RSQ64H, B, a, y, m_, rl);
}
__attribute__((noinline)) static int block_rsqrt64(const Band *B, const uint64_t *a, uint64_t *y, int m_, uint32_t *rl) {
    return block_hi64(RSQRT_F64, B, a, y, m_, rl);
}

int warpsim_sfu_band64(int form, const Tab *T, const uint64_t *a, uint64_t *y, int64_t n) {
    if (form != RCP64H && form != RSQ64H && form != RSQRT_F64) return -1;
    uint32_t rl[BBLK];
    for (int64_t i0 = 0; i0 < n; i0 += BBLK) {
        int m_ = (int)(n - i0 < BBLK ? n - i0 : BBLK);
        int nr = form == RCP64H ? block_rcp64h(T->band, a + i0, y + i0, m_, rl)
               : form == RSQ64H ? block_rsq64h(T->band, a + i0, y + i0, m_, rl)
               : block_rsqrt64(T->band, a + i0, y + i0, m_, rl);
        for (int q = 0; q < nr; q++) y[i0 + rl[q]] = warpsim_sfu_one64(form, T, a[i0 + rl[q]]);
    }
    return 0;
}

/* The band model on every key k < nkeys of a table (a multiple of 16): V, for the derivation of
 * the thresholds and bits in sfu_accel. */
int warpsim_sfu_band_eval(const Band *B, int64_t nkeys, uint32_t *vout) {
    Regs R;
    int nseg = B->nseg;
    regs_load(&R, B, nseg);
    const __m512i jm = _mm512_set1_epi32((int)((1u << B->xbits) - 1u));
    const __m128i xb = _mm_cvtsi32_si128(B->xbits);
    for (int64_t k0 = 0; k0 < nkeys; k0 += 16) {
        __m512i k = _mm512_add_epi32(_mm512_set1_epi32((int)k0), IOTA);
        __m512i s = _mm512_srl_epi32(k, xb), j = _mm512_and_si512(k, jm), v;
        __mmask16 up, unc;
        if (nseg <= 16) band_word(&R, 16, s, j, &up, &unc, &v);
        else if (nseg <= 32) band_word(&R, 32, s, j, &up, &unc, &v);
        else if (nseg <= 64) band_word(&R, 64, s, j, &up, &unc, &v);
        else band_word(&R, 128, s, j, &up, &unc, &v);
        _mm512_storeu_si512(vout + k0, v);
    }
    return 0;
}

int warpsim_sfu_band_available(void) { return 1; }

#ifdef HAVE_DATAPATH
int warpsim_sfu_datapath_available(void) { return 1; }
#else
int warpsim_sfu_datapath_available(void) { return 0; }
#endif

#else   /* no AVX-512: the fast paths of _sfu.c serve every lane */

int warpsim_sfu_band(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n) {
    (void)form; (void)T; (void)a; (void)y; (void)n;
    return -1;
}

int warpsim_sfu_band64(int form, const Tab *T, const uint64_t *a, uint64_t *y, int64_t n) {
    (void)form; (void)T; (void)a; (void)y; (void)n;
    return -1;
}

int warpsim_sfu_band_eval(const Band *B, int64_t nkeys, uint32_t *vout) {
    (void)B; (void)nkeys; (void)vout;
    return -1;
}

int warpsim_sfu_band_available(void) { return 0; }

int warpsim_sfu_datapath_available(void) { return 0; }

#endif
