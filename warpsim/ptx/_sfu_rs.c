/* AVX-512 band kernels of MUFU.RCP, MUFU.RSQ and MUFU.SQRT (and the forms built on them:
 * rcp/rsqrt/sqrt.approx(.ftz).f32, div.approx/div.full(.ftz).f32), compiled into the library of
 * _sfu.c (warpsim/ptx/sfu_accel.py: RsBand derives the tables).
 *
 * Each measured table (2**23 keys for rcp: the fraction; 2**24 for rsq/sqrt: the exponent's
 * parity and the fraction) is read as 128 segments -- the unit's own interpolation segments,
 * 2**16 keys for rcp, 2**17 for rsq/sqrt -- and per segment a quadratic in the key's centred
 * low bits X gives the word in 24.8 fixed point, relative to the binade's first word W0:
 *
 *     tot = base[s] + round(X * (c1[s] + X * c2[s]))      (f32 FMA and multiply; c1, c2 x 256)
 *     word = W0 + (tot >> 8)
 *
 * The coefficients are fetched by in-register byte permutes (one masked vpermi2b per byte of a
 * coefficient covers all 128 segments), never by gathers.  A lane is certain when the fraction
 * byte fr = tot & 255 is farther than the segment's threshold th from a word boundary,
 * min(fr, 256 - fr) > th; th is derived on first use from every key of the table with this same
 * arithmetic (warpsim_sfu_rs_eval), so certain lanes are exact by construction.  Uncertain lanes
 * (4-12% of keys) read one bit of their key (the word is the model's or one off, towards the
 * side of the fraction) in a short second loop; rare lanes (zeros, subnormals, Inf/NaN, range
 * limits, ptxas rescaling cases, FMUL.FTZ's tiny products) go to warpsim_sfu (_sfu.c), which
 * handles every case.
 *
 * Without AVX-512 (F, BW, DQ, VBMI), warpsim_sfu_rs is warpsim_sfu and warpsim_sfu_rs_simd answers 0.
 */
#include "_sfu.h"

typedef struct {
    const uint8_t *planes;  /* 12 x 128 bytes: byte j of base, c1, c2 for each segment (below) */
    const uint32_t *bits;   /* one bit per table key: the word is floor(model) +- 1, towards the
                               side of the fraction (>= 1/2: one more), where the lane is uncertain */
    int32_t L;              /* key bits per segment (16: rcp, 17: rsq/sqrt) */
} RsTab;

/* Per segment: base = the model at X = 0 in 24.8 fixed point relative to W0 (u32); c1, c2 = 256 x
 * the linear and quadratic coefficients (f32), the low byte of c2 holding the segment's band
 * threshold plus one, th + 1 (masked off in the model). */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VBMI__)
#include <immintrin.h>

#define RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define BLK 1024
#define I32(v) _mm512_set1_epi32((int)(v))

typedef struct { __m512i p[12][2]; } Regs;

INL void regs_load(Regs *G, const RsTab *R) {
    for (int q = 0; q < 12; q++) {
        G->p[q][0] = _mm512_loadu_si512(R->planes + 128 * q);
        G->p[q][1] = _mm512_loadu_si512(R->planes + 128 * q + 64);
    }
}

/* Coefficient c of each lane's segment: byte j from plane 4c + j by a 128-entry byte permute
 * (vpermi2b) that writes only byte j of each lane, the other bytes keeping the segment index */
INL __m512i fetch(const Regs *G, int c, __m512i rep) {
    __m512i v = rep;
    for (int j = 0; j < 4; j++)
        v = _mm512_mask2_permutex2var_epi8(G->p[4 * c + j][0], v, (__mmask64)(0x1111111111111111ull << j),
                                           G->p[4 * c + j][1]);
    return v;
}

/* tot (24.8 fixed point, relative to W0) of the table keys tk, given as tkh = tk ^ 2**(L-1) (the
 * callers fold the flip into their key's logic): X = tk's low L bits - 2**(L-1) is then tkh's
 * low L bits read signed, converted as X 2**(32-L) (the coefficients carry the scale).
 * *certain: the fraction byte's distance to a word boundary, |fr as a signed byte|, is above the
 * segment's threshold (c2's low byte holds th + 1: a saturating byte subtract leaves 0). */
INL __m512i model(const Regs *G, int L, __m512i tkh, __mmask16 *certain) {
    const __m512i rep4 = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0x00000000);
    __m512i rep = _mm512_shuffle_epi8(_mm512_srli_epi32(tkh, (unsigned)L), rep4);   /* s in every byte */
    __m512 X = _mm512_cvtepi32_ps(_mm512_slli_epi32(tkh, (unsigned)(32 - L)));
    __m512i base = fetch(G, 0, rep);
    __m512 c1 = _mm512_castsi512_ps(fetch(G, 1, rep));
    __m512i c2q = fetch(G, 2, rep);
    __m512 c2 = _mm512_castsi512_ps(_mm512_and_si512(c2q, I32(0xFFFFFF00u)));
    __m512 P = _mm512_mul_round_ps(_mm512_fmadd_round_ps(X, c2, c1, RN), X, RN);
    __m512i tot = _mm512_add_epi32(base, _mm512_cvt_roundps_epi32(P, RN));
    *certain = _mm512_testn_epi32_mask(_mm512_subs_epu8(c2q, _mm512_abs_epi8(tot)), I32(0xFF));
    return tot;
}

int warpsim_sfu_rs_simd(void) { return 1; }

/* tot of every key 0..n-1, n a multiple of 16 (the band's derivation reads the kernels' arithmetic) */
void warpsim_sfu_rs_eval(const RsTab *R, int64_t n, uint32_t *out) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __mmask16 c;
    Regs G;
    regs_load(&G, R);
    for (int64_t k = 0; k + 16 <= n; k += 16)
        _mm512_storeu_si512(out + k, model(&G, R->L, _mm512_xor_si512(_mm512_add_epi32(I32(k), iota), I32(1u << (R->L - 1))), &c));
}

enum { K_RCP, K_RSQ, K_SQRT, K_DIV, K_DIV_FTZ };

/* One block of m <= BLK lanes: y; the uncertain lanes in list (count *nu), the rare ones in rl
 * (count *nr); tb: each lane's model (its fraction's side); for div, MUFU.RCP(b) in r. */
INL void block(int kind, const Regs *G, const uint32_t *a, const uint32_t *b, uint32_t *y, uint32_t *tb,
               uint32_t *r, int64_t m, uint32_t *list, int64_t *nu, uint32_t *rl, int64_t *nr) {
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t cu = 0, cr = 0;
    for (int64_t i = 0; i < m; i += 16, idx = _mm512_add_epi32(idx, I32(16))) {
        __mmask16 live = m - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (m - i)) - 1u);
        __m512i x = _mm512_maskz_loadu_epi32(live, (kind >= K_DIV ? b : a) + i), out, tot;
        __mmask16 certain, rare;
        if (kind == K_RSQ || kind == K_SQRT) {
            /* key (p << 23) | M, p = the exponent field's low bit inverted; X's top bit flipped */
            __m512i tkh = _mm512_ternarylogic_epi32(x, I32(0x810000), I32(0xFFFFFF), 0x28);  /* (x ^ B) & C */
            tot = model(G, 17, tkh, &certain);
            /* rsq: W0 - ((E - 127) >> 1 << 23) = ((380 - E) >> 1) << 23; sqrt: W0 + ... = ((E + 127) >> 1) << 23 */
            __m512i w0 = kind == K_RSQ ? _mm512_sub_epi32(I32((380u << 23) + 0x7FFFFFu), x) : _mm512_add_epi32(x, I32(127u << 23));
            w0 = _mm512_slli_epi32(_mm512_srli_epi32(w0, 24), 23);
            out = _mm512_add_epi32(_mm512_srli_epi32(tot, 8), w0);
            __mmask16 neg = _mm512_movepi32_mask(x);
            out = _mm512_mask_mov_epi32(out, neg, I32(0x7FFFFFFF));
            /* zero, subnormal, Inf, NaN (either sign): (E + 1) mod 256 < 2 */
            rare = _mm512_testn_epi32_mask(_mm512_add_epi32(x, I32(0x00800000)), I32(0x7F000000));
            certain |= neg;
        } else {
            tot = model(G, 16, _mm512_ternarylogic_epi32(x, I32(0x8000), I32(0x7FFFFF), 0x28), &certain);
            /* W0 + (tot >> 8) + ((127 - E) << 23) + the sign of x = (tot >> 8) + (W0 + (127 << 23)) - (x & 0xFF800000) */
            __m512i w = _mm512_add_epi32(_mm512_srli_epi32(tot, 8),
                                         _mm512_sub_epi32(I32(0x3F000000u + (127u << 23)), _mm512_and_si512(x, I32(0xFF800000u))));
            /* exponent field 0 or >= 253: (E + 3) mod 256 < 4 */
            rare = _mm512_testn_epi32_mask(_mm512_add_epi32(x, I32(3u << 23)), I32(0x7E000000));
            if (kind == K_RCP) {
                out = w;
            } else {   /* MUFU.RCP(b) times a (FMUL; canonical NaN) */
                _mm512_storeu_si512(r + i, w);
                __m512i av = _mm512_maskz_loadu_epi32(live, a + i);
                __m512 p = _mm512_mul_ps(_mm512_castsi512_ps(w), _mm512_castsi512_ps(av));
                out = _mm512_mask_mov_epi32(_mm512_castps_si512(p), _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q),
                                            I32(0x7FFFFFFF));
                if (kind == K_DIV_FTZ)   /* FMUL.FTZ: a subnormal, or a product at or below 2**-126 */
                    rare |= _mm512_fpclass_ps_mask(_mm512_castsi512_ps(av), 0x20)
                          | _mm512_cmplt_epu32_mask(_mm512_sub_epi32(_mm512_and_si512(out, I32(0x7FFFFFFFu)), I32(1)),
                                                    I32(0x00800000));
            }
        }
        _mm512_mask_storeu_epi32(y + i, live, out);
        _mm512_storeu_si512(tb + i, tot);
        rare &= live;
        __mmask16 unc = (__mmask16)~(certain | rare) & live;
        _mm512_storeu_si512(list + cu, _mm512_maskz_compress_epi32(unc, idx));
        cu += __builtin_popcount((unsigned)unc);
        if (__builtin_expect(rare != 0, 0)) {
            _mm512_storeu_si512(rl + cr, _mm512_maskz_compress_epi32(rare, idx));
            cr += __builtin_popcount((unsigned)rare);
        }
    }
    *nu = cu;
    *nr = cr;
}

static void run(int kind, int form, const RsTab *R, const uint32_t *a, const uint32_t *b, uint32_t *y, int64_t n,
                const Tab *T) {
    uint32_t list[BLK + 16], rl[BLK + 16], ba[BLK], bb[BLK], by[BLK], r[BLK], tb[BLK];   /* nu + nr <= BLK */
    const uint32_t *bits = R->bits;
    Regs G;
    regs_load(&G, R);
    for (int64_t i0 = 0; i0 < n; i0 += BLK) {
        int64_t m = n - i0 < BLK ? n - i0 : BLK, nu, nr;
        const uint32_t *ab = a + i0, *bb0 = b ? b + i0 : 0;
        uint32_t *yb = y + i0;
        block(kind, &G, ab, bb0, yb, tb, r, m, list, &nu, rl, &nr);
        for (int64_t q = 0; q < nu; q++) {   /* uncertain lanes: the key's bit, towards the fraction's side */
            uint32_t i = list[q], x = kind >= K_DIV ? bb0[i] : ab[i];
            uint32_t k = kind == K_RSQ || kind == K_SQRT ? (x ^ 0x800000u) & 0xFFFFFFu : x & 0x7FFFFFu;
            uint32_t c = (bits[k >> 5] >> (k & 31u)) & 1u;
            if (!c) continue;
            uint32_t d = (tb[i] & 0x80u) ? 1u : 0xFFFFFFFFu;
            if (kind < K_DIV) { yb[i] += d; continue; }
            float rf, af, pf;
            uint32_t rw = r[i] + d, aw = ab[i], pw;
            memcpy(&rf, &rw, 4);
            memcpy(&af, &aw, 4);
            pf = rf * af;
            memcpy(&pw, &pf, 4);
            if ((pw & 0x7FFFFFFFu) > 0x7F800000u) pw = 0x7FFFFFFFu;
            if (kind == K_DIV_FTZ && ((pw & 0x7FFFFFFFu) - 1u < 0x00800000u)) { rl[nr++] = i; continue; }
            yb[i] = pw;
        }
        if (!nr) continue;   /* rare lanes: the exact path of _sfu.c */
        for (int64_t j = 0; j < nr; j++) ba[j] = ab[rl[j]];
        if (b)
            for (int64_t j = 0; j < nr; j++) bb[j] = bb0[rl[j]];
        warpsim_sfu(form, ba, b ? bb : 0, by, nr, T);
        for (int64_t j = 0; j < nr; j++) yb[rl[j]] = by[j];
    }
}

static int rs_run(int form, const void *av, const void *bv, void *yv, int64_t n, const Tab *T, const RsTab *R) {
    const uint32_t *a = av, *b = bv;
    uint32_t *y = yv;
    switch (form) {
    case RCP_FTZ: case RCP: case MUFU_RCP: run(K_RCP, form, R, a, 0, y, n, T); return 0;
    case RSQ_FTZ: case RSQ: case MUFU_RSQ: run(K_RSQ, form, R, a, 0, y, n, T); return 0;
    case SQRT_FTZ: case SQRT: case MUFU_SQRT: run(K_SQRT, form, R, a, 0, y, n, T); return 0;
    case DIV_APPROX: case DIV_FULL: run(K_DIV, form, R, a, b, y, n, T); return 0;
    case DIV_APPROX_FTZ: case DIV_FULL_FTZ: run(K_DIV_FTZ, form, R, a, b, y, n, T); return 0;
    }
    return warpsim_sfu(form, av, bv, yv, n, T);
}

/* form (an rcp, rsq, sqrt or div number of _sfu.h) over n lanes, as warpsim_sfu(form, ..., T) and
 * in the same floating-point mode (round to nearest, no FTZ/DAZ; the caller's restored) */
int warpsim_sfu_rs(int form, const void *av, const void *bv, void *yv, int64_t n, const Tab *T, const RsTab *R) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(0x1F80);
    int r = rs_run(form, av, bv, yv, n, T, R);
    _mm_setcsr(csr);
    return r;
}

#else   /* no AVX-512 (F, BW, DQ, VBMI): the portable path of _sfu.c */

int warpsim_sfu_rs_simd(void) { return 0; }

void warpsim_sfu_rs_eval(const RsTab *R, int64_t n, uint32_t *out) { (void)R; (void)n; (void)out; }

int warpsim_sfu_rs(int form, const void *av, const void *bv, void *yv, int64_t n, const Tab *T, const RsTab *R) {
    (void)R;
    return warpsim_sfu(form, av, bv, yv, n, T);
}
#endif
