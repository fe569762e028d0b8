/* Shared by the C files of the compiled SFU path (_sfu.c, _sfu_band.c and the per-function
 * band kernels): the compact table's C view, the form numbers, the scalar exact path. */
#ifndef WARPSIM_SFU_H
#define WARPSIM_SFU_H
#if defined(__GNUC__) && !defined(__clang__)
/* gathers: GCC's AMD tuning deems them unprofitable; FP exceptions are not observed here (the
 * values do not depend on it), which lets selects of float work be vectorised */
#pragma GCC optimize("vect-cost-model=unlimited", "no-trapping-math")
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#define SIGN 0x80000000u
#define INF 0x7F800000u
#define MANT 0x007FFFFFu
#define NANF 0x7FFFFFFFu
#define FRAC 12                  /* slope fraction bits; |slope| < 2**(31 - FRAC - S) */

#define INL static inline __attribute__((always_inline))

typedef struct Band Band;
typedef struct Datapath Datapath;

typedef struct {
    const uint64_t *seg;    /* per segment: base word (of a dense segment: its offset in dense) in
                               the low half, the slope (2**-FRAC words per key; INT32_MIN: dense)
                               in the high half -- one gather fetches both */
    const uint32_t *res;    /* R-bit codes, from the low bits of each word up */
    const uint32_t *dense;  /* words of the dense segments */
    const uint32_t *aux;    /* tanh: the 13-word binade directory; 16-bit forms: the u16 table */
    const uint32_t *corr;   /* rcp/rsq/sqrt: 2-bit codes c per key, table = IEEE op + c - 1 (3: not so) */
    int32_t S, R;
    const Band *band;       /* the AVX-512 band model of this table, or NULL (_sfu_band.c) */
    const Datapath *dp;     /* the unit's own datapath for this table, or NULL (_sfu_band.c) */
} Tab;

INL float F(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
INL uint32_t U(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
INL double D(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
INL uint64_t UD(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }

static inline uint32_t look(const Tab *t, uint32_t k) {
    uint32_t s = k >> t->S, j = k & ((1u << t->S) - 1u);
    uint64_t e = t->seg[s];
    uint32_t base = (uint32_t)e;
    int32_t m = (int32_t)(uint32_t)(e >> 32);
    if (__builtin_expect(m == INT32_MIN, 0)) return t->dense[base + j];
    uint32_t R = (uint32_t)t->R;
    uint32_t code = (t->res[(k * R) >> 5] >> ((k * R) & 31u)) & ((1u << R) - 1u);
    return base + (uint32_t)((m * (int32_t)j) >> FRAC) + code;
}

enum {
    EX2_FTZ, EX2, LG2_FTZ, LG2, RCP_FTZ, RCP, RSQ_FTZ, RSQ, SQRT_FTZ, SQRT, SIN, COS, TANH,
    DIV_APPROX, DIV_APPROX_FTZ, DIV_FULL, DIV_FULL_FTZ, HALF16, HALF16X2, RCP64H, RSQ64H, RSQRT_F64,
    MUFU_EX2, MUFU_LG2, MUFU_RCP, MUFU_RSQ, MUFU_SQRT, MUFU_SIN, MUFU_COS
};

/* The band model of a table (_sfu_band.c): per segment of the key (at most 128) the quadratic
 * V = c0q + round(X (c1 + X c2)) in units of 2**-F word, word = base + (V >> F); the low 8 bits
 * of c2 hold the segment's certainty threshold (masked off in the arithmetic); one bit per key
 * says whether an uncertain key's word is one away from the model's. */
#define BAND_F 8
struct Band {
    float c1[128], c2[128];
    uint32_t c0q[128];
    uint32_t base;
    int32_t F, nseg, xbits;   /* F: BAND_F */
    const uint32_t *bits;
    uint8_t pl[3][4][128];    /* c1, c2, c0q as byte planes (128 segments: byte permutes) */
};

/* The unit's quadratic interpolator (_sfu_band.c), reconstructed from the measured words: per
 * segment of 2**17 keys, N = c0hi + floor((lo + C1 X + C2 S) / 2**17) with X the key's low 17
 * bits, S their truncated square (the squarer's partial products below 2**19 dropped), C1 and
 * C2 integers, lo the 17 fraction bits of the constant; c2lo = lo | C2 << 17. */
struct Datapath {
    int32_t c0hi[64], c1[64], c2lo[64];
};

#if defined(__AVX512F__) && defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
#include <immintrin.h>
/* multishift control bytes: per dword the bit offsets of its four byte fields (+32: odd dword) */
#define SFU_MS(a, b, c, d) ((long long)(a) | (long long)(b) << 8 | (long long)(c) << 16 | (long long)(d) << 24 | \
                        (long long)((a) + 32) << 32 | (long long)((b) + 32) << 40 | (long long)((c) + 32) << 48 | \
                        (long long)((d) + 32) << 56)

/* S, the truncated square of the 17-bit X: H*H - h0 + 2 Q with H = X >> 9, h0 = H & 1 and Q the
 * seven products of bit 18-m of X and (X & 511) >> m (m = 2..8), by byte fields (multishift)
 * and two 4-way byte dot products. */
INL __m512i sfu_trunc_square(__m512i X) {
    __m512i H = _mm512_srli_epi32(X, 9);
    __m512i A1 = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(SFU_MS(2, 3, 4, 5)), X),
                                  _mm512_set1_epi32(0x0F1F3F7F));
    __m512i B1 = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(SFU_MS(15, 14, 13, 12)), X),
                                  _mm512_set1_epi32(0x02020202));
    __m512i A2 = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(SFU_MS(6, 7, 8, 9)), X),
                                  _mm512_set1_epi32(0x01010307));
    __m512i B2 = _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(SFU_MS(11, 10, 9, 0)), X),
                                           _mm512_set1_epi32(0x00020202), _mm512_set1_epi32((int)0xFF000000u),
                                           0xEA);   /* (a & b) | c */
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_mullo_epi32(H, H), A1, B1), A2, B2);
}

#endif

/* The exact scalar path of one f32 form (every case; _sfu.c). */
uint32_t warpsim_sfu_one(int form, const Tab *T, uint32_t b);
/* The same for the f64 forms (RCP64H, RSQ64H, RSQRT_F64; _sfu.c). */
uint64_t warpsim_sfu_one64(int form, const Tab *T, uint64_t b);
/* The band kernels: 0 when form ran on n lanes, -1 when it has no band kernel here (_sfu_band.c). */
int warpsim_sfu_band(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n);
int warpsim_sfu_band64(int form, const Tab *T, const uint64_t *a, uint64_t *y, int64_t n);
/* lg2.approx(.ftz).f32 through the unit's interpolator (_sfu_lg2.c; T->aux: its nine byte planes):
 * 0 when it ran on n lanes, -1 when it is not built here (no AVX-512 VBMI/VNNI) or T has none. */
int warpsim_sfu_lg2(int form, const Tab *T, const uint32_t *a, uint32_t *y, int64_t n);
/* One form over n lanes (_sfu.c; the entry the rcp/rsq/sqrt kernels hand their rare lanes back to). */
int warpsim_sfu(int form, const void *av, const void *bv, void *yv, int64_t n, const Tab *Tp);
/* sin/cos (_sfu_trig.c): 0 when it ran, -1 without its AVX-512 kernel. */
int warpsim_sfu_trig(int turns, int cosine, const void *model, const uint32_t *a, uint32_t *y, int64_t n);

#endif
