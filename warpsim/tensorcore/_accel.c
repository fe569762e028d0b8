/* Optional compiled kernel for the mma engine (warpsim.tensorcore.accel).
 *
 * The same arithmetic as the NumPy reference path (numerics.dot_steps / engine.truncated_dot_add,
 * the lowered fp8 sequence, the integer forms), one warp at a time, from register words to D's
 * register words.  Built on first use with the system C compiler; never required.  Compile
 * without fast-math and without FP contraction: every operation below is an exact or IEEE
 * correctly rounded one, and the result must equal the NumPy path bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ZEXP (-1000000) /* exponent of a zero (or non-finite) factor: sums stay far below */
#define MAXE 1024       /* elements per operand of one warp (M*K, K*N, M*N) */
#define NN 8            /* N of every mma.sync shape this kernel runs */

/* GCC/Clang vector extensions: one vector holds the N = 8 outputs of a row of D */
typedef double v8d __attribute__((vector_size(64)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef int64_t v8l __attribute__((vector_size(64)));

#if defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__AVX2__)
static inline v8i vmax8(v8i x, v8i y) { return (v8i)_mm256_max_epi32((__m256i)x, (__m256i)y); }
#else
static inline v8i vmax8(v8i x, v8i y) { v8i m = x > y; return (x & m) | (y & ~m); }
#endif
/* whether any / every lane is non-zero */
#if defined(__AVX512F__)
static inline int v8l_any(v8l x) { return _mm512_test_epi64_mask((__m512i)x, (__m512i)x) != 0; }
static inline int v8l_all(v8l x) { return _mm512_test_epi64_mask((__m512i)x, (__m512i)x) == 0xFF; }
#else
static inline int v8l_any(v8l x) { int r = 0; for (int n = 0; n < 8; n++) r |= x[n] != 0; return r; }
static inline int v8l_all(v8l x) { int r = 1; for (int n = 0; n < 8; n++) r &= x[n] != 0; return r; }
#endif
/* 2**e per lane, -1022 <= e <= 1023 */
static inline v8d vpow2(v8i e) { return (v8d)(__builtin_convertvector(e + 1023, v8l) << 52); }

typedef struct {
    const void *base;       /* register words, 32- or 64-bit */
    int64_t s_reg, s_lane, s_warp; /* strides in words */
    const int32_t *reg, *lane, *shift; /* per element, engine order */
    int32_t nelem;
    int32_t mask;
    int32_t kind;           /* 0: table, 1: IEEE-like bit decode, 2: f32 bits, 3: tf32 bits, 4: int */
    int32_t ebits, mbits, bias, inf_nan; /* kind 1; inf_nan: 1 IEEE Inf/NaN, 2 e4m3 NaN only */
    int32_t is_signed, bits; /* kind 4 */
    const double *table;
    int32_t emin;
    int32_t nregs, epr;     /* words per lane; slots per word */
    const int32_t *slot;    /* per element: (lane * nregs + reg) * epr + slot, or NULL */
} operand_t;

typedef struct {
    int32_t M, N, K;
    int32_t ngroups;
    const int32_t *gstart, *gk;
    int32_t first_c, emin_c, emin_out, F, e_zero;
    int32_t out;       /* 0: f32, 1: f16 */
    int32_t rounding;  /* 0: rn, 1: rz */
    int32_t frac_bits; /* -1: none */
    int32_t final_add; /* lowered fp8: D = RN_out(C + steps from zero) */
    int32_t satfinite; /* integer forms */
} model_t;

typedef struct {
    void *base;
    int64_t s_reg, s_lane, s_warp;
    const int32_t *reg, *lane, *shift;
    int32_t nregs;
    int32_t out; /* 0: f32 words, 1: f16 halves, 2: s32 */
} dest_t;

static inline double pow2(int e) { /* 2**e, -1022 <= e <= 1023 */
    union { uint64_t u; double d; } x;
    x.u = (uint64_t)(e + 1023) << 52;
    return x.d;
}

static inline uint64_t dbits(double d) { union { double d; uint64_t u; } x; x.d = d; return x.u; }
static inline double bitsd(uint64_t u) { union { uint64_t u; double d; } x; x.u = u; return x.d; }
static inline float bitsf(uint32_t u) { union { uint32_t u; float f; } x; x.u = u; return x.f; }
static inline uint32_t fbits(float f) { union { float f; uint32_t u; } x; x.f = f; return x.u; }

static inline int expo(double x, int emin) { /* floor(log2|x|) clamped; x non-zero finite normal double */
    int e = (int)((dbits(x) >> 52) & 0x7FF) - 1023;
    return e < emin ? emin : e;
}

static inline uint64_t word_at(const operand_t *o, int64_t w, int i) {
    int64_t off = o->reg[i] * o->s_reg + o->lane[i] * o->s_lane + w * o->s_warp;
    return ((const uint32_t *)o->base)[off];
}

static double decode(const operand_t *o, uint32_t code) {
    switch (o->kind) {
    case 0:
        return o->table[code];
    case 1: {
        int m = o->mbits, eb = o->ebits;
        uint32_t sign = (code >> (m + eb)) & 1, ef = (code >> m) & ((1u << eb) - 1), mf = code & ((1u << m) - 1);
        double v;
        if (o->inf_nan == 1 && ef == (1u << eb) - 1)
            v = mf ? NAN : INFINITY;
        else if (o->inf_nan == 2 && ef == (1u << eb) - 1 && mf == (1u << m) - 1)
            v = NAN;
        else if (ef == 0)
            v = (double)mf * pow2(1 - o->bias - m);
        else
            v = bitsd(((uint64_t)(ef - o->bias + 1023) << 52) | ((uint64_t)mf << (52 - m)));
        return sign ? -v : v;
    }
    case 2:
        return (double)bitsf(code);
    case 3:
        return (double)bitsf(code & 0xFFFFE000u);
    default: {
        int64_t v = code;
        if (o->is_signed && (code >> (o->bits - 1)) & 1) v -= (int64_t)1 << o->bits;
        return (double)v;
    }
    }
}

/* decode one operand of warp w: values (non-finite kept in raw, zeroed in val), exponents */
static int load(const operand_t *o, int64_t w, double *raw, double *val, int32_t *ex) {
    int nonfinite = 0;
    for (int i = 0; i < o->nelem; i++) {
        uint32_t code = (uint32_t)(word_at(o, w, i) >> o->shift[i]) & (uint32_t)o->mask;
        double v = decode(o, code);
        raw[i] = v;
        if (!isfinite(v)) { nonfinite = 1; v = 0.0; }
        val[i] = v;
        if (ex) ex[i] = v == 0.0 ? ZEXP : expo(v, o->emin);
    }
    return nonfinite;
}

/* the words of warp w, (lane, reg) order: in place when the layout has them so, else copied */
static const uint32_t *warp_words(const operand_t *o, int64_t w, uint32_t *buf) {
    const uint32_t *base = (const uint32_t *)o->base;
    if (o->s_reg == 1 && o->s_lane == o->nregs) return base + w * o->s_warp;
    for (int l = 0; l < 32; l++)
        for (int r = 0; r < o->nregs; r++)
            buf[l * o->nregs + r] = base[r * o->s_reg + l * o->s_lane + w * o->s_warp];
    return buf;
}

/* val (non-finite -> 0) and ex (clamped exponents; zero and non-finite -> ZEXP; may be NULL)
 * of n raw values; returns whether any is non-finite */
static int classify(const double *raw, double *val, int32_t *ex, int n, int emin) {
    int nonfinite = 0;
    for (int i = 0; i < n; i++) {
        uint64_t u = dbits(raw[i]);
        int e = (int)((u >> 52) & 0x7FF) - 1023;
        int nf = e == 1024, z = (u << 1) == 0;
        nonfinite |= nf;
        val[i] = nf ? 0.0 : raw[i];
        if (ex) ex[i] = (nf | z) ? ZEXP : (e < emin ? emin : e);
    }
    return nonfinite;
}

/* the code of element i */
#define CODE_AT(i) ((words[slot[i] / epr] >> ((slot[i] % epr) * sw)) & mask)

/* one operand of warp w in engine order: raw values (non-finite kept), val (non-finite -> 0),
 * ex (clamped exponents; zero and non-finite -> ZEXP; may be NULL); returns whether any value
 * is non-finite.  One pass per element: gather its code, decode, classify. */
static int load_fast(const operand_t *o, int64_t w, uint32_t *buf, double *raw, double *val, int32_t *ex) {
    const uint32_t *words = warp_words(o, w, buf);
    const int epr = o->epr, sw = 32 / epr, n = o->nelem, emin = o->emin;
    const uint32_t mask = (uint32_t)o->mask;
    const int32_t *slot = o->slot;
    if (o->kind == 1 && o->ebits == 5 && o->mbits == 10) {
        const uint16_t *h = (const uint16_t *)words;
        int i = 0;
#if defined(__F16C__) && defined(__AVX__)
        for (; i + 8 <= n; i += 8) { /* the hardware conversion: exact, subnormals and Inf included */
            const int32_t *sl = slot + i;
            __m128i x = _mm_set_epi16((short)h[sl[7]], (short)h[sl[6]], (short)h[sl[5]], (short)h[sl[4]],
                                      (short)h[sl[3]], (short)h[sl[2]], (short)h[sl[1]], (short)h[sl[0]]);
            __m256 f = _mm256_cvtph_ps(x);
            _mm256_storeu_pd(raw + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
            _mm256_storeu_pd(raw + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
        }
#endif
        for (; i < n; i++) {
            uint32_t code = h[slot[i]], em = code & 0x7FFFu, sign = (code & 0x8000u) << 16;
            float f = bitsf(em << 13) * 0x1p112f;
            uint32_t u = em >= 0x7C00u ? (0x7F800000u | (em << 13)) : fbits(f);
            raw[i] = (double)bitsf(u | sign);
        }
    } else if (o->kind == 1 && o->ebits == 8 && o->mbits == 7) {
        const uint16_t *h = (const uint16_t *)words;
        for (int i = 0; i < n; i++) raw[i] = (double)bitsf((uint32_t)h[slot[i]] << 16);
    } else if (o->kind == 0 && sw == 8) {
        const uint8_t *b8 = (const uint8_t *)words;
        for (int i = 0; i < n; i++) raw[i] = o->table[b8[slot[i]] & mask];
    } else if (o->kind == 2) {
        for (int i = 0; i < n; i++) raw[i] = (double)bitsf(words[slot[i]]);
    } else if (o->kind == 3) {
        for (int i = 0; i < n; i++) raw[i] = (double)bitsf(words[slot[i]] & 0xFFFFE000u);
    } else if (o->kind == 4 && sw == 8 && o->bits == 8) {
        const uint8_t *b8 = (const uint8_t *)words;
        for (int i = 0; i < n; i++)
            raw[i] = o->is_signed ? (double)(int8_t)b8[slot[i]] : (double)b8[slot[i]];
    } else if (o->kind == 4) {
        const int up = 32 - o->bits;
        for (int i = 0; i < n; i++) {
            uint32_t code = CODE_AT(i);
            raw[i] = o->is_signed ? (double)((int32_t)(code << up) >> up) : (double)code;
        }
    } else {
        for (int i = 0; i < n; i++) raw[i] = decode(o, CODE_AT(i));
    }
    if (!val) return 0;
    return classify(raw, val, ex, n, emin);
}


/* an operand of warp w in engine order: raw, val (NULL: raw only), ex (may be NULL) */
static int load_any(const operand_t *o, int64_t w, double *raw, double *val, int32_t *ex) {
    if (!o->slot) {
        double tmp[MAXE];
        return load(o, w, raw, val ? val : tmp, ex);
    }
    uint32_t buf[256];
    return load_fast(o, w, buf, raw, val, ex);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define HAVE_PERM 1
/* A fixed permutation of 16- or 32-bit units, run as two-register permutes (vpermt2w/d) instead
 * of gathers: output chunk c (64 bytes) is the OR, over the 128-byte source blocks it reads, of
 * a masked permute of that block. */
typedef struct {
    int32_t chunk, blk;
    uint64_t mask;
    uint16_t idx[32]; /* 64 bytes: 16 dword, 32 word or 64 byte indices */
} pstep_t;

typedef struct {
    int32_t nsteps, ub; /* unit bytes: 1, 2 or 4 */
    pstep_t *steps;
} perm_t;

/* out unit u (0 <= u < nout) takes source unit src[u] (-1: zero); false if steps would overflow */
static int perm_build(perm_t *p, const int32_t *src, int nout, int ub, pstep_t *mem, int maxsteps) {
    const int CH = 64 / ub;
    int ns = 0;
    p->ub = ub;
    p->steps = mem;
    for (int c = 0; c * CH < nout; c++) {
        int first = ns;
        for (int u = c * CH; u < nout && u < (c + 1) * CH; u++) {
            if (src[u] < 0) continue;
            int blk = src[u] / (2 * CH), t;
            for (t = first; t < ns && p->steps[t].blk != blk; t++) {}
            if (t == ns) {
                if (ns == maxsteps) return 0;
                memset(&p->steps[ns], 0, sizeof(pstep_t));
                p->steps[ns].chunk = c;
                p->steps[ns].blk = blk;
                ns++;
            }
            p->steps[t].mask |= 1ull << (u - c * CH);
            const int j = u - c * CH, x = src[u] % (2 * CH);
            if (ub == 4) p->steps[t].idx[2 * j] = (uint16_t)x;
            else if (ub == 2) p->steps[t].idx[j] = (uint16_t)x;
            else ((uint8_t *)p->steps[t].idx)[j] = (uint8_t)x;
        }
        if (ns == first) { /* nothing read: a zero chunk */
            if (ns == maxsteps) return 0;
            memset(&p->steps[ns], 0, sizeof(pstep_t));
            p->steps[ns].chunk = c;
            ns++;
        }
    }
    p->nsteps = ns;
    return 1;
}

/* split: the source was just written by 32-byte stores; read it so (a 64-byte load over two
 * pending stores is not forwarded and waits for them) */
static inline __m512i load64(const char *s, int split) {
    if (!split) return _mm512_loadu_si512((const void *)s);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)s)),
                              _mm256_loadu_si256((const __m256i *)(s + 32)), 1);
}

static inline __attribute__((always_inline)) void perm_apply_(const perm_t *p, const void *src, void *dst, const int split) {
    const char *s = (const char *)src;
    char *d = (char *)dst;
    __m512i r = _mm512_setzero_si512();
    int cur = p->steps[0].chunk;
    for (int t = 0; t < p->nsteps; t++) {
        const pstep_t *st = &p->steps[t];
        if (st->chunk != cur) {
            _mm512_storeu_si512((void *)(d + 64 * cur), r);
            r = _mm512_setzero_si512();
            cur = st->chunk;
        }
        const __m512i lo = load64(s + 128 * st->blk, split);
        const __m512i hi = load64(s + 128 * st->blk + 64, split);
        const __m512i idx = _mm512_loadu_si512((const void *)st->idx);
        const __m512i x = p->ub == 4 ? _mm512_maskz_permutex2var_epi32((__mmask16)st->mask, lo, idx, hi)
                        : p->ub == 2 ? _mm512_maskz_permutex2var_epi16((__mmask32)st->mask, lo, idx, hi)
#ifdef __AVX512VBMI__
                        : _mm512_maskz_permutex2var_epi8((__mmask64)st->mask, lo, idx, hi);
#else
                        : _mm512_setzero_si512(); /* not built: perm_operand refuses bytes */
#endif
        r = _mm512_or_si512(r, x);
    }
    _mm512_storeu_si512((void *)(d + 64 * cur), r);
}

static void perm_apply(const perm_t *p, const void *src, void *dst) { perm_apply_(p, src, dst, 0); }
static void perm_apply_split(const perm_t *p, const void *src, void *dst) { perm_apply_(p, src, dst, 1); }

/* a permutation for operand o's codes into engine order, for the kinds decoded below from a
 * contiguous array (f16, bf16, f32, tf32); false where it does not apply */
static int perm_operand(const operand_t *o, perm_t *p, pstep_t *mem, int maxsteps) {
    if (!o->slot || o->nregs > 8 || o->emin < -126) return 0; /* load_perm's exponents: binary32 fields */
    int f16 = o->kind == 1 && o->ebits == 5 && o->mbits == 10, bf16 = o->kind == 1 && o->ebits == 8 && o->mbits == 7;
    int bytes = 0; /* 8-bit codes through the table */
#ifdef __AVX512VBMI__
    bytes = o->epr == 4 && o->kind == 0 && o->table;
#endif
    if (!((o->epr == 2 && (f16 || bf16)) || (o->epr == 1 && (o->kind == 2 || o->kind == 3)) || bytes)) return 0;
    if (o->nelem % (64 / (4 / o->epr))) return 0;
    for (int i = 0; i < o->nelem; i++)
        if (o->slot[i] < 0 || o->slot[i] >= 32 * o->nregs * o->epr) return 0;
    return perm_build(p, o->slot, o->nelem, 4 / o->epr, mem, maxsteps);
}

/* operand o of warp w through its permutation: raw, val, ex as load_fast */
/* store 8 decoded values, their clamped exponents (zero and non-finite: ZEXP) where ex is not
 * NULL; returns the lanes that are non-finite */
static inline __mmask8 put8(double *raw, __m512d x, int32_t *ex, int emin) {
    _mm512_storeu_pd(raw, x);
    const __m512i u = _mm512_castpd_si512(x);
    const __m512i e = _mm512_and_si512(_mm512_srli_epi64(u, 52), _mm512_set1_epi64(0x7FF));
    const __mmask8 nf = _mm512_cmpeq_epi64_mask(e, _mm512_set1_epi64(0x7FF));
    if (ex) {
        const __m512i u2 = _mm512_slli_epi64(u, 1);
        const __mmask8 z = _mm512_testn_epi64_mask(u2, u2);
        __m512i ee = _mm512_max_epi64(_mm512_sub_epi64(e, _mm512_set1_epi64(1023)), _mm512_set1_epi64(emin));
        ee = _mm512_mask_mov_epi64(ee, nf | z, _mm512_set1_epi64(ZEXP));
        _mm256_storeu_si256((__m256i *)ex, _mm512_cvtepi64_epi32(ee));
    }
    return nf;
}

static void f32_to_f64(const float *s, double *d, int n) {
    for (int i = 0; i < n; i++) d[i] = s[i];
}

/* r32 (may be NULL): the values as binary32 instead; *ok32 (with r32): whether r32 was written
 * and every non-zero value's exponent is within [-50, 50] (products exact binary32 normals);
 * raw is then written only where some value is non-finite or not within that range (the caller
 * converts r32 where it needs raw else: f32_to_f64) */
static int load_perm(const operand_t *o, const perm_t *p, int64_t w, uint32_t *buf, double *raw, double *val,
                     int32_t *ex, float *r32, int *ok32) {
    const uint32_t *words = warp_words(o, w, buf);
    uint32_t units[MAXE + 32] __attribute__((aligned(64)));
    perm_apply(p, words, units);
    const int n = o->nelem, emin = o->emin;
    __mmask8 nfm = 0;
    int f32 = 0;
    __mmask16 wide = 0;
    /* 16 binary32 values: raw, and the exponents from the binary32 fields (16 lanes at once; a
     * binary32 subnormal's exponent is below every emin here, -126 and up, as its field's -127) */
#define PUT16(i, f) do { \
        if (!r32) { \
            _mm512_storeu_pd(raw + (i), _mm512_cvtps_pd(_mm512_castps512_ps256(f))); \
            _mm512_storeu_pd(raw + (i) + 8, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)))); \
        } \
        const __m512i u_ = _mm512_castps_si512(f); \
        const __m512i ef_ = _mm512_and_si512(_mm512_srli_epi32(u_, 23), _mm512_set1_epi32(0xFF)); \
        const __mmask16 nf_ = _mm512_cmpeq_epi32_mask(ef_, _mm512_set1_epi32(0xFF)); \
        nfm |= nf_ != 0; \
        if (r32) { \
            _mm512_storeu_ps(r32 + (i), f); \
            wide |= _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(ef_, _mm512_set1_epi32(77)), _mm512_set1_epi32(100)) \
                    & _mm512_test_epi32_mask(u_, _mm512_set1_epi32(0x7FFFFFFF)); \
            f32 = 1; \
        } \
        if (ex) { \
            const __m512i u2_ = _mm512_slli_epi32(u_, 1); \
            const __mmask16 z_ = _mm512_testn_epi32_mask(u2_, u2_); \
            const __m512i e_ = _mm512_max_epi32(_mm512_sub_epi32(ef_, _mm512_set1_epi32(127)), _mm512_set1_epi32(emin)); \
            _mm512_storeu_si512((void *)(ex + (i)), _mm512_mask_mov_epi32(e_, nf_ | z_, _mm512_set1_epi32(ZEXP))); \
        } \
    } while (0)
    const int e4m3 = o->kind == 0 && o->ebits == 4 && o->mbits == 3, e5m2 = o->kind == 0 && o->ebits == 5 && o->mbits == 2;
    if (o->epr == 4 && (o->mask & 0xFF) == 0xFF && (e4m3 || e5m2)) {
        /* fp8 as f16 bits, exact: e5m2 is f16's high byte; e4m3's exponent and fraction move
         * down one bit (the value times 2**-8: bias 7 against 15), its NaN (S.1111.111) apart */
        const uint8_t *b8 = (const uint8_t *)units;
        for (int i = 0; i < n; i += 16) {
            const __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b8 + i)));
            __m512 f;
            if (e5m2) {
                f = _mm512_cvtph_ps(_mm256_slli_epi16(x, 8));
            } else {
                const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x80)), 8),
                                                  _mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x7F)), 7));
                f = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
                const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(x, _mm256_set1_epi16(0x7F)),
                                                              _mm256_set1_epi16(0x7F));
                f = _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(NAN));
            }
            PUT16(i, f);
        }
    } else if (o->epr == 4) { /* 8-bit codes: the table, eight lookups per gather */
        const uint8_t *b8 = (const uint8_t *)units;
        const __m512i m = _mm512_set1_epi32(o->mask & 0xFF);
        for (int i = 0; i < n; i += 16) {
            const __m512i x = _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b8 + i))), m);
            nfm |= put8(raw + i, _mm512_i32gather_pd(_mm512_castsi512_si256(x), o->table, 8), ex ? ex + i : NULL, emin);
            nfm |= put8(raw + i + 8, _mm512_i32gather_pd(_mm512_extracti64x4_epi64(x, 1), o->table, 8),
                        ex ? ex + i + 8 : NULL, emin);
        }
    } else if (o->epr == 2) {
        const uint16_t *h = (const uint16_t *)units;
        if (o->ebits == 5) { /* f16: the hardware conversion, exact (subnormals, Inf, NaN) */
            for (int i = 0; i < n; i += 16) {
                const __m512 f = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i)));
                PUT16(i, f);
            }
        } else { /* bf16: the high half of an f32 */
            for (int i = 0; i < n; i += 16) {
                const __m512i x = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i))), 16);
                const __m512 f = _mm512_castsi512_ps(x);
                PUT16(i, f);
            }
        }
    } else {
        const __m512i m = _mm512_set1_epi32(o->kind == 3 ? (int)0xFFFFE000u : -1);
        for (int i = 0; i < n; i += 16) {
            const __m512 f = _mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512((const void *)(units + i)), m));
            PUT16(i, f);
        }
    }
#undef PUT16
    if (ok32) *ok32 = f32 && !wide;
    if (f32 && (nfm || wide)) f32_to_f64(r32, raw, n); /* the binary64 path will read raw */
    if (!val) return 0;
    /* val only where a value is non-finite (else the caller reads raw) */
    if (nfm) classify(raw, val, NULL, n, emin);
    return nfm != 0;
}

/* D's words from codes (engine order), where D's words of a warp are contiguous: false else */
static int perm_dest(const dest_t *d, int nelem, perm_t *p, pstep_t *mem, int maxsteps) {
    if (!(d->s_reg == 1 && d->s_lane == d->nregs) || d->nregs > 8 || (d->out != 0 && d->out != 1)) return 0;
    const int epr = d->out == 1 ? 2 : 1, nout = 32 * d->nregs * epr;
    int32_t src[32 * 8 * 2];
    for (int u = 0; u < nout; u++) src[u] = -1;
    for (int i = 0; i < nelem; i++) {
        if (d->shift[i] % 16 || d->shift[i] / 16 >= epr || (epr == 1 && d->shift[i])) return 0;
        int u = (d->lane[i] * d->nregs + d->reg[i]) * epr + d->shift[i] / 16;
        if (u < 0 || u >= nout || src[u] >= 0) return 0;
        src[u] = i;
    }
    if (epr == 1) /* store() leaves words without an element as they are: every word must have one */
        for (int u = 0; u < nout; u++)
            if (src[u] < 0) return 0;
    return perm_build(p, src, nout, 4 / epr, mem, maxsteps);
}
#endif

/* round a finite exact value to the step's output format */
static double round_out(double v, int out, int rounding, int frac_bits) {
    double av = fabs(v);
    if (out == 0) {
        double r;
        if (rounding == 1) {
            if (av >= 0x1p128) return copysign(INFINITY, v);
            if (av < 0x1p-126)
                r = trunc(v * 0x1p149) * 0x1p-149;
            else
                r = bitsd(dbits(v) & 0xFFFFFFFFE0000000ull);
        } else {
            r = (double)(float)v;
        }
        if (frac_bits >= 0 && frac_bits < 23 && isfinite(r)) {
            uint32_t mask = ~((1u << (23 - frac_bits)) - 1);
            r = (double)bitsf(fbits((float)r) & mask);
        }
        return r;
    }
    /* f16, round to nearest even (the engine's only f16 rounding) */
    if (isnan(v)) return v;
    if (av >= 65520.0) return copysign(INFINITY, v);
    if (av == 0.0) return v;
    int e = (int)((dbits(av) >> 52) & 0x7FF) - 1023;
    if (e < -14) e = -14;
    double q = pow2(e - 10);
    return rint(v / q) * q;
}

static uint32_t encode(double v, int out) {
    if (out == 0) return isnan(v) ? 0x7FFFFFFFu : fbits((float)v);
    if (isnan(v)) return 0x7FFFu;
    uint32_t sign = signbit(v) ? 0x8000u : 0;
    double av = fabs(v);
    if (isinf(av)) return sign | 0x7C00u;
    if (av == 0.0) return sign;
    int e = (int)((dbits(av) >> 52) & 0x7FF) - 1023;
    if (e < -14) return sign | (uint32_t)(av * 0x1p24);
    return sign | ((uint32_t)(e + 15) << 10) | (uint32_t)((av * pow2(-e) - 1.0) * 1024.0);
}

static void store(const dest_t *d, int64_t w, const uint32_t *codes, int nelem) {
    if (d->s_reg == 1 && d->s_lane == d->nregs && d->out != 1) { /* one element per word, in place */
        uint32_t *dst = (uint32_t *)d->base + w * d->s_warp;
        for (int i = 0; i < nelem; i++) dst[d->lane[i] * d->nregs + d->reg[i]] = codes[i];
        return;
    }
    uint32_t words[32 * 8];
    int nw = 32 * d->nregs;
    memset(words, 0, sizeof(uint32_t) * nw);
    for (int i = 0; i < nelem; i++)
        words[d->lane[i] * d->nregs + d->reg[i]] |= codes[i] << d->shift[i];
    for (int l = 0; l < 32; l++)
        for (int r = 0; r < d->nregs; r++)
            ((uint32_t *)d->base)[r * d->s_reg + l * d->s_lane + w * d->s_warp] = words[l * d->nregs + r];
}

/* x + y rounded to binary64 by round-to-odd (engine.round_odd_sum) */
static double round_odd_sum(double x, double y) {
    double s = x + y, bb = s - x;
    double err = (x - (s - bb)) + (y - bb);
    if (err != 0 && (dbits(s) & 1) == 0 && isfinite(s))
        s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
    return s;
}

/* one fused step of row m: the common exponent E (in: C's) and the sum of the terms truncated
 * to multiples of 2**(E - F); k = contig ? k0 + j : ks[j] */
static inline __attribute__((always_inline)) void group_core(
    const double *restrict a, const double *restrict b, const int32_t *restrict ea, const int32_t *restrict eb,
    const int32_t *restrict ks, int k0, const int nk, const int contig, const int M, const int m, const int F,
    v8d accv, v8i *Eio, v8l *sumout) {
#define KK(j) (contig ? k0 + (j) : ks[j])
    v8i E = *Eio, E1 = E;
    int j = 0;
    for (; j + 1 < nk; j += 2) { /* two chains: the maxima and sums do not wait on each other */
        v8i e0, e1;
        memcpy(&e0, eb + KK(j) * NN, sizeof e0);
        memcpy(&e1, eb + KK(j + 1) * NN, sizeof e1);
        E = vmax8(e0 + ea[KK(j) * M + m], E);
        E1 = vmax8(e1 + ea[KK(j + 1) * M + m], E1);
    }
    if (j < nk) {
        v8i e0;
        memcpy(&e0, eb + KK(j) * NN, sizeof e0);
        E = vmax8(e0 + ea[KK(j) * M + m], E);
    }
    E = vmax8(E, E1);
    /* each term truncated toward zero to a multiple of 2**(E - F): exact products
     * and scalings in binary64, |term| < 2**(F + 2): the int64 conversion truncates */
    const v8d sc = vpow2(F - E);
    v8l sum = __builtin_convertvector(accv * sc, v8l), sum1 = {0};
    for (j = 0; j + 1 < nk; j += 2) {
        v8d b0, b1;
        memcpy(&b0, b + KK(j) * NN, sizeof b0);
        memcpy(&b1, b + KK(j + 1) * NN, sizeof b1);
        sum += __builtin_convertvector(a[KK(j) * M + m] * b0 * sc, v8l);
        sum1 += __builtin_convertvector(a[KK(j + 1) * M + m] * b1 * sc, v8l);
    }
    if (j < nk) {
        v8d b0;
        memcpy(&b0, b + KK(j) * NN, sizeof b0);
        sum += __builtin_convertvector(a[KK(j) * M + m] * b0 * sc, v8l);
    }
    *Eio = E;
    *sumout = sum + sum1;
#undef KK
}

#if defined(HAVE_PERM) && defined(__AVX512DQ__) && defined(__AVX512VL__) && defined(__F16C__)
#define HAVE_FASTROW 1
/* Warps whose A, B and C are all finite: every step in vector registers, its rounding by the
 * hardware conversions (binary32 toward zero by embedded rounding; f16 to nearest even as
 * binary32 round-to-odd, then vcvtps2ph), the same values as round_out.  Needs the MXCSR
 * default (no flush-to-zero): warpsim_float_mma sets it. */

/* x rounded toward zero to binary32 bits, fraction cut to fmask, Inf from 2**128 up, +0 for -0 */
static inline __m256i f32_rz_bits(__m512d x, __m256i fmask) {
    const __m256 f = _mm512_cvt_roundpd_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256i r = _mm256_and_si256(_mm256_castps_si256(f), fmask);
    /* |x| >= 2**128: Inf (the conversion stops at the largest finite value) */
    const __mmask8 ovf = _mm512_cmp_pd_mask(_mm512_abs_pd(x), _mm512_set1_pd(0x1p128), _CMP_GE_OQ);
    r = _mm256_mask_mov_epi32(r, ovf, _mm256_or_si256(_mm256_and_si256(r, _mm256_set1_epi32((int)0x80000000u)),
                                                      _mm256_set1_epi32(0x7F800000)));
    /* -0 -> +0 */
    return _mm256_maskz_mov_epi32(_mm256_cmpneq_epi32_mask(r, _mm256_set1_epi32((int)0x80000000u)), r);
}

/* x (within binary32's range, not below its normal range by more than f16 can see) to f16 bits,
 * to nearest even: round-to-odd at 24 bits keeps the decision of the final rounding to 11 */
static inline __m128i f16_rn_bits(__m512d x) {
    const __m256 f = _mm512_cvt_roundpd_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_cvtps_pd(f), x, _CMP_NEQ_UQ);
    const __m256i b = _mm256_mask_or_epi32(_mm256_castps_si256(f), inexact, _mm256_castps_si256(f), _mm256_set1_epi32(1));
    return _mm256_cvtps_ph(_mm256_castsi256_ps(b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}


/* The steps of every row of a warp in phases (the common exponents of all rows, then their sums,
 * then their roundings), so that the rows' dependency chains overlap; operands as group_core's.
 * Writes the D codes of each row and returns a bit mask of the rows not done (a step's result
 * non-finite before another step or the final add: the caller runs the general code on them). */
static inline __attribute__((always_inline)) v8i e_max(
    const int32_t *restrict ea, const int32_t *restrict eb, const int32_t *restrict ks, const int k0,
    const int nk, const int contig, const int M, const int m, v8i E) {
#define KK(j) (contig ? k0 + (j) : ks[j])
    v8i E1 = E;
    int j = 0;
    for (; j + 1 < nk; j += 2) {
        v8i e0, e1;
        memcpy(&e0, eb + KK(j) * NN, sizeof e0);
        memcpy(&e1, eb + KK(j + 1) * NN, sizeof e1);
        E = vmax8(e0 + ea[KK(j) * M + m], E);
        E1 = vmax8(e1 + ea[KK(j + 1) * M + m], E1);
    }
    if (j < nk) {
        v8i e0;
        memcpy(&e0, eb + KK(j) * NN, sizeof e0);
        E = vmax8(e0 + ea[KK(j) * M + m], E);
    }
    return vmax8(E, E1);
#undef KK
}

static inline __attribute__((always_inline)) v8l sum_terms(
    const double *restrict a, const double *restrict b, const int32_t *restrict ks, const int k0, const int nk,
    const int contig, const int M, const int m, const v8d sc, v8l sum) {
#define KK(j) (contig ? k0 + (j) : ks[j])
    v8l sum1 = {0};
    int j = 0;
    for (; j + 1 < nk; j += 2) {
        v8d b0, b1;
        memcpy(&b0, b + KK(j) * NN, sizeof b0);
        memcpy(&b1, b + KK(j + 1) * NN, sizeof b1);
        sum += __builtin_convertvector(a[KK(j) * M + m] * b0 * sc, v8l);
        sum1 += __builtin_convertvector(a[KK(j + 1) * M + m] * b1 * sc, v8l);
    }
    if (j < nk) {
        v8d b0;
        memcpy(&b0, b + KK(j) * NN, sizeof b0);
        sum += __builtin_convertvector(a[KK(j) * M + m] * b0 * sc, v8l);
    }
    return sum + sum1;
#undef KK
}

#define MAXM 16
static inline __attribute__((always_inline)) uint32_t warp_fast(
    const double *restrict av, const double *restrict bv, const int32_t *restrict ea, const int32_t *restrict eb,
    const double *restrict craw, const model_t *p, const int32_t *gk, const int *gcontig, const int M,
    const int SK, const int SM, const __m256i fmask, uint32_t *restrict codes, const int OUT, const int FINAL) {
    v8d acc[MAXM];
    v8i E[MAXM];
    v8l sum[MAXM];
    __m256i bits32[MAXM];
    __m128i bits16[MAXM];
    uint32_t bad = 0;
    for (int m = 0; m < M; m++) {
        if (p->first_c) memcpy(&acc[m], craw + m * NN, sizeof acc[m]);
        else acc[m] = (v8d){0};
    }
    int ecmin = p->first_c ? p->emin_c : p->emin_out;
    const int ng = p->ngroups, F = p->F;
    for (int g = 0; g < ng; g++) {
        const int32_t *ks = gk + p->gstart[g];
        const int nk = p->gstart[g + 1] - p->gstart[g], k0 = ks[0], ct = gcontig[g];
        for (int m = 0; m < M; m++) { /* C's exponent (clamped at ecmin; zero: e_zero), at least e_zero */
            const v8l u = (v8l)acc[m];
            const v8l ef = (u >> 52) & 0x7FF;
            const v8l zero = (u & 0x7FFFFFFFFFFFFFFFll) == 0;
            acc[m] = (v8d)(u & ~zero);
            v8i e = __builtin_convertvector(ef, v8i) - 1023;
            e = vmax8(vmax8(e, (v8i){0} + ecmin), (v8i){0} + p->e_zero);
            const v8i zi = __builtin_convertvector(zero, v8i);
            e = (e & ~zi) | (((v8i){0} + p->e_zero) & zi);
            if (ct && nk == 16) e = e_max(ea, eb, ks, k0, 16, 1, SK, m * SM, e);
            else if (ct && nk == 8) e = e_max(ea, eb, ks, k0, 8, 1, SK, m * SM, e);
            else if (ct) e = e_max(ea, eb, ks, k0, nk, 1, SK, m * SM, e);
            else if (nk == 16) e = e_max(ea, eb, ks, 0, 16, 0, SK, m * SM, e);
            else e = e_max(ea, eb, ks, 0, nk, 0, SK, m * SM, e);
            E[m] = e;
        }
        for (int m = 0; m < M; m++) {
            const v8d sh = vpow2(F - E[m]);
            const v8l s0 = __builtin_convertvector(acc[m] * sh, v8l);
            if (ct && nk == 16) sum[m] = sum_terms(av, bv, ks, k0, 16, 1, SK, m * SM, sh, s0);
            else if (ct && nk == 8) sum[m] = sum_terms(av, bv, ks, k0, 8, 1, SK, m * SM, sh, s0);
            else if (ct) sum[m] = sum_terms(av, bv, ks, k0, nk, 1, SK, m * SM, sh, s0);
            else if (nk == 16) sum[m] = sum_terms(av, bv, ks, 0, 16, 0, SK, m * SM, sh, s0);
            else sum[m] = sum_terms(av, bv, ks, 0, nk, 0, SK, m * SM, sh, s0);
        }
        const int more = g + 1 < ng || FINAL;
        for (int m = 0; m < M; m++) {
            const __m512d val = (__m512d)(__builtin_convertvector(sum[m], v8d) * vpow2(E[m] - F));
            if (OUT == 0) {
                bits32[m] = f32_rz_bits(val, fmask);
                if (more && _mm256_cmpeq_epi32_mask(_mm256_and_si256(bits32[m], _mm256_set1_epi32(0x7F800000)),
                                                    _mm256_set1_epi32(0x7F800000)))
                    bad |= 1u << m;
                acc[m] = (v8d)_mm512_cvtps_pd(_mm256_castsi256_ps(bits32[m]));
            } else {
                __m128i h = f16_rn_bits(val);
                h = _mm_andnot_si128(_mm_cmpeq_epi16(h, _mm_set1_epi16((short)0x8000)), h); /* -0 -> +0 */
                if (more && _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7C00)),
                                                              _mm_set1_epi16(0x7C00))))
                    bad |= 1u << m;
                bits16[m] = h;
                acc[m] = (v8d)_mm512_cvtps_pd(_mm256_cvtph_ps(h));
            }
        }
        ecmin = p->emin_out;
    }
    for (int m = 0; m < M; m++) {
        if (FINAL) { /* round_odd_sum(acc, C), then the output format, to nearest */
            v8d y;
            memcpy(&y, craw + m * NN, sizeof y);
            const v8d x = acc[m];
            const v8d s = x + y, bb = s - x;
            const v8d err = (x - (s - bb)) + (y - bb);
            const v8l u = (v8l)s;
            const v8l fin = ((u >> 52) & 0x7FF) != 0x7FF;
            const v8l bump = (err != 0) & ((u & 1) == 0) & fin;
            const v8l away = (err > 0) == (s > 0);
            const __m512d r = (__m512d)(v8d)(u + (bump & ((away & 1) | (~away & -1))));
            if (OUT == 0) bits32[m] = _mm256_castps_si256(_mm512_cvtpd_ps(r));
            else bits16[m] = f16_rn_bits(r);
        }
        if (OUT == 0) _mm256_storeu_si256((__m256i *)(codes + m * NN), bits32[m]);
        else _mm256_storeu_si256((__m256i *)(codes + m * NN), _mm256_cvtepu16_epi32(bits16[m]));
    }
    return bad;
}


/* warp_fast with the products in binary32, two k per 16-lane vector (lanes 8h + n: k = k0 + 2j + h,
 * column n): a and b binary32 with |exponent| <= 50 (load_perm's ok32), so a * b is an exact
 * binary32 normal; times 2**min(F - E, 127) it is exact or below 1 (a term of 0 either way; the
 * clamp only acts where E < -102, where every product is 0); each term below 2**(F + 2) <= 2**27,
 * so the 16 per lane of a step of up to 32 k sum exactly in int32.  A in (m, k) order, steps over
 * contiguous k (k0 = gstart[g]); C's term in binary64 as before. */
static const int32_t PAIR_IDX[8][16] __attribute__((aligned(64))) = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5}, {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9}, {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13}, {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

static inline __attribute__((always_inline)) v8i e_max32(const int32_t *restrict er, const int32_t *restrict eb,
                                                         const int nk, v8i e) {
    __m512i E0 = _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)e), (__m256i)e, 1), E1 = E0;
    for (int h = 0; h < nk; h += 16) {
        const int w = nk - h < 16 ? nk - h : 16;
        const __m512i R = _mm512_maskz_loadu_epi32((__mmask16)((1u << w) - 1), er + h);
        for (int j = 0; j < w / 2; j++) {
            const __m512i x = _mm512_add_epi32(_mm512_permutexvar_epi32(_mm512_load_si512((const void *)PAIR_IDX[j]), R),
                                               _mm512_loadu_si512((const void *)(eb + (h + 2 * j) * NN)));
            if (j & 1) E1 = _mm512_max_epi32(E1, x);
            else E0 = _mm512_max_epi32(E0, x);
        }
    }
    E0 = _mm512_max_epi32(E0, E1);
    return (v8i)_mm256_max_epi32(_mm512_castsi512_si256(E0), _mm512_extracti64x4_epi64(E0, 1));
}

static inline __attribute__((always_inline)) v8l sum32(const float *restrict ar, const float *restrict br,
                                                       const int nk, const __m512 sc) {
    __m512i s0 = _mm512_setzero_si512(), s1 = s0;
    for (int h = 0; h < nk; h += 16) {
        const int w = nk - h < 16 ? nk - h : 16;
        const __m512 R = _mm512_maskz_loadu_ps((__mmask16)((1u << w) - 1), ar + h);
        for (int j = 0; j < w / 2; j++) {
            const __m512 x = _mm512_mul_ps(_mm512_mul_ps(_mm512_permutexvar_ps(_mm512_load_si512((const void *)PAIR_IDX[j]), R),
                                                         _mm512_loadu_ps(br + (h + 2 * j) * NN)), sc);
            const __m512i t = _mm512_cvttps_epi32(x);
            if (j & 1) s1 = _mm512_add_epi32(s1, t);
            else s0 = _mm512_add_epi32(s0, t);
        }
    }
    const __m512i s = _mm512_add_epi32(s0, s1);
    return (v8l)_mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(s)),
                                 _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(s, 1)));
}

/* 2**e per lane, -1022 <= e <= 1023 (one sign extension) */
static inline v8d vpow2q(v8i e) { return (v8d)_mm512_slli_epi64(_mm512_cvtepi32_epi64((__m256i)(e + 1023)), 52); }

static inline __attribute__((always_inline)) uint32_t warp_fast32(
    const float *restrict a32, const float *restrict b32, const int32_t *restrict ea, const int32_t *restrict eb,
    const double *restrict craw, const int32_t *restrict ec, const model_t *p, const int M, const int K,
    const __m256i fmask, uint32_t *restrict codes, const int OUT, const int FINAL, const int ONE) {
    /* ONE: one step from C (ec: C's clamped exponents, ZEXP for zero, as load_perm gives them) */
    v8d acc[MAXM];
    v8i E[MAXM];
    v8l sum[MAXM];
    __m256i bits32[MAXM];
    __m128i bits16[MAXM];
    uint32_t bad = 0;
    for (int m = 0; m < M; m++) {
        if (p->first_c) memcpy(&acc[m], craw + m * NN, sizeof acc[m]);
        else acc[m] = (v8d){0};
    }
    int ecmin = p->first_c ? p->emin_c : p->emin_out;
    const int ng = ONE ? 1 : p->ngroups, F = p->F;
    for (int g = 0; g < ng; g++) {
        const int k0 = p->gstart[g], nk = p->gstart[g + 1] - k0;
        for (int m = 0; m < M; m++) {
            if (ONE) {
                v8i e;
                memcpy(&e, ec + m * NN, sizeof e);
                e = vmax8(e, (v8i){0} + p->e_zero);
                const int32_t *er = ea + m * K + k0, *ebr = eb + k0 * NN;
                if (nk == 16) E[m] = e_max32(er, ebr, 16, e);
                else if (nk == 8) E[m] = e_max32(er, ebr, 8, e);
                else E[m] = e_max32(er, ebr, nk, e);
                continue;
            }
            const v8l u = (v8l)acc[m];
            const v8l ef = (u >> 52) & 0x7FF;
            const v8l zero = (u & 0x7FFFFFFFFFFFFFFFll) == 0;
            acc[m] = (v8d)(u & ~zero);
            v8i e = __builtin_convertvector(ef, v8i) - 1023;
            e = vmax8(vmax8(e, (v8i){0} + ecmin), (v8i){0} + p->e_zero);
            const v8i zi = __builtin_convertvector(zero, v8i);
            e = (e & ~zi) | (((v8i){0} + p->e_zero) & zi);
            const int32_t *er = ea + m * K + k0, *ebr = eb + k0 * NN;
            if (nk == 16) E[m] = e_max32(er, ebr, 16, e);
            else if (nk == 8) E[m] = e_max32(er, ebr, 8, e);
            else E[m] = e_max32(er, ebr, nk, e);
        }
        for (int m = 0; m < M; m++) {
            v8i s = (v8i){0} + F - E[m];
            s = (v8i)_mm256_min_epi32((__m256i)s, _mm256_set1_epi32(127));
            const __m256i sc8 = _mm256_slli_epi32((__m256i)(s + 127), 23);
            const __m512 sc = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(sc8), sc8, 1));
            const float *ar = a32 + m * K + k0, *br = b32 + k0 * NN;
            v8l t;
            if (nk == 16) t = sum32(ar, br, 16, sc);
            else if (nk == 8) t = sum32(ar, br, 8, sc);
            else t = sum32(ar, br, nk, sc);
            sum[m] = t + __builtin_convertvector(acc[m] * vpow2q(F - E[m]), v8l);
        }
        const int more = g + 1 < ng || FINAL;
        for (int m = 0; m < M; m++) {
            const __m512d val = (__m512d)(__builtin_convertvector(sum[m], v8d) * vpow2q(E[m] - F));
            if (OUT == 0) {
                bits32[m] = f32_rz_bits(val, fmask);
                if (more && _mm256_cmpeq_epi32_mask(_mm256_and_si256(bits32[m], _mm256_set1_epi32(0x7F800000)),
                                                    _mm256_set1_epi32(0x7F800000)))
                    bad |= 1u << m;
                if (more) acc[m] = (v8d)_mm512_cvtps_pd(_mm256_castsi256_ps(bits32[m]));
            } else {
                __m128i h = f16_rn_bits(val);
                h = _mm_andnot_si128(_mm_cmpeq_epi16(h, _mm_set1_epi16((short)0x8000)), h); /* -0 -> +0 */
                if (more && _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7C00)),
                                                              _mm_set1_epi16(0x7C00))))
                    bad |= 1u << m;
                bits16[m] = h;
                if (more) acc[m] = (v8d)_mm512_cvtps_pd(_mm256_cvtph_ps(h));
            }
        }
        ecmin = p->emin_out;
    }
    for (int m = 0; m < M; m++) {
        if (FINAL) { /* round_odd_sum(acc, C), then the output format, to nearest */
            v8d y;
            memcpy(&y, craw + m * NN, sizeof y);
            const v8d x = acc[m];
            const v8d s = x + y, bb = s - x;
            const v8d err = (x - (s - bb)) + (y - bb);
            const v8l u = (v8l)s;
            const v8l fin = ((u >> 52) & 0x7FF) != 0x7FF;
            const v8l bump = (err != 0) & ((u & 1) == 0) & fin;
            const v8l away = (err > 0) == (s > 0);
            const __m512d r = (__m512d)(v8d)(u + (bump & ((away & 1) | (~away & -1))));
            if (OUT == 0) bits32[m] = _mm256_castps_si256(_mm512_cvtpd_ps(r));
            else bits16[m] = f16_rn_bits(r);
        }
        if (OUT == 0) _mm256_storeu_si256((__m256i *)(codes + m * NN), bits32[m]);
        else _mm256_storeu_si256((__m256i *)(codes + m * NN), _mm256_cvtepu16_epi32(bits16[m]));
    }
    return bad;
}
#endif

int warpsim_float_mma(const operand_t *A, const operand_t *B, const operand_t *C, const dest_t *D,
                      const model_t *p, int64_t nwarps) {
    const int M = p->M, K = p->K;
    if (p->N != NN || M * K > MAXE || K * NN > MAXE || M * NN > MAXE) return -1;
    if (p->ngroups > 64) return -1;
    for (const operand_t *o = A; o; o = o == A ? B : (o == B ? C : NULL))
        if (o->slot && o->nregs > 8) return -1; /* warp_words' buffer */
    double araw[MAXE], a[MAXE], craw[MAXE], c[MAXE];
    double b[MAXE] __attribute__((aligned(64))), braw[MAXE] __attribute__((aligned(64)));
    int32_t ea[MAXE], eb[MAXE];
    uint32_t codes[MAXE + 64] __attribute__((aligned(64)));
#ifdef HAVE_PERM
    enum { MAXSTEPS = 256 }; /* 72 KiB: below malloc's mmap threshold (no fresh pages per call) */
    pstep_t (*mem)[MAXSTEPS] = malloc(sizeof(pstep_t) * 4 * MAXSTEPS);
    if (!mem) return -2;
    perm_t pa, pb, pc, pd;
    int use_a = perm_operand(A, &pa, mem[0], MAXSTEPS), use_b = perm_operand(B, &pb, mem[1], MAXSTEPS);
    const int use_c = perm_operand(C, &pc, mem[2], MAXSTEPS), use_d = perm_dest(D, M * NN, &pd, mem[3], MAXSTEPS);
    uint32_t wbuf[256];
    uint16_t codes16[MAXE + 64] __attribute__((aligned(64)));
    memset(codes16, 0, sizeof codes16);
#endif
    memset(codes, 0, sizeof codes);
    const int32_t *gk = p->gk; /* k of each step's terms, in order */
    int tr = 0;                /* A's elements in (m, k) order */
#ifdef HAVE_PERM
    /* A's elements in (m, k) order (a row's k contiguous: sK = 1, sM = K; else k-major, sK = M,
     * sM = 1), and, where the steps run over k in an order other than 0..K-1 (the lowered fp8
     * sequence), A's and B's elements in the steps' order: both by the permutes, planned once
     * per call, so that every step reads a contiguous run of k */
    int32_t gk_id[MAXE], slot_t[MAXE], slot_b[MAXE], kord[MAXE];
    int reorder = p->gstart[p->ngroups] == K && K <= MAXE;
    if (reorder) {
        uint8_t seen[MAXE] = {0};
        int identity = 1;
        for (int j = 0; j < K && reorder; j++) {
            const int k = p->gk[j];
            reorder = k >= 0 && k < K && !seen[k];
            if (reorder) seen[k] = 1;
            identity &= k == j;
        }
        reorder &= !identity;
    }
    for (int j = 0; j < K; j++) {
        gk_id[j] = j;
        kord[j] = reorder ? p->gk[j] : j;
    }
    if (use_a && use_b && pa.nsteps <= MAXSTEPS / 2 && pb.nsteps <= MAXSTEPS / 2
        && (reorder || p->gstart[p->ngroups] == K)) {
        operand_t A2 = *A, B2 = *B;
        perm_t pa2, pb2;
        for (int m = 0; m < M; m++)
            for (int j = 0; j < K; j++) slot_t[m * K + j] = A->slot[kord[j] * M + m];
        A2.slot = slot_t;
        int ok = perm_operand(&A2, &pa2, mem[0] + MAXSTEPS / 2, MAXSTEPS / 2);
        if (ok && reorder) {
            for (int j = 0; j < K; j++)
                for (int n = 0; n < NN; n++) slot_b[j * NN + n] = B->slot[kord[j] * NN + n];
            B2.slot = slot_b;
            ok = perm_operand(&B2, &pb2, mem[1] + MAXSTEPS / 2, MAXSTEPS / 2);
        }
        if (ok) {
            pa = pa2;
            tr = 1;
            if (reorder) {
                pb = pb2;
                gk = gk_id;
            }
        }
    }
#endif
    const int sK = tr ? 1 : M, sM = tr ? K : 1; /* a[k * sK + m * sM] */
    int use32 = 0, one = 0; /* warp_fast32 for warps whose A and B load_perm finds narrow */
    int32_t ec[MAXE];
#ifdef HAVE_PERM
    float a32[MAXE] __attribute__((aligned(64))), b32[MAXE] __attribute__((aligned(64)));
#endif
#ifdef HAVE_FASTROW
    use32 = tr && M <= MAXM && p->F <= 25 && p->gstart[p->ngroups] == K;
    for (int j = 0; j < K && use32; j++) use32 = gk[j] == j;
    /* one step from C, no final add: C's exponents from load_perm, 16 at a time */
    one = use32 && use_c && p->ngroups == 1 && p->first_c && !p->final_add && p->emin_c >= -126;
    for (int g = 0; g < p->ngroups && use32; g++) {
        const int nk = p->gstart[g + 1] - p->gstart[g];
        use32 = nk > 0 && nk % 2 == 0 && nk <= 32;
    }
#endif
    int gcontig[64];
    const int fb = p->frac_bits < 0 || p->frac_bits > 23 ? 23 : p->frac_bits;
    const int64_t rz_mask = (int64_t)~((1ull << (52 - fb)) - 1);
#ifdef HAVE_FASTROW
    const __m256i fmask = _mm256_set1_epi32((int)~((1u << (23 - fb)) - 1));
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(0x1F80); /* round to nearest, no flush-to-zero or denormals-are-zero, whatever the caller set */
#endif
    for (int g = 0; g < p->ngroups; g++) {
        gcontig[g] = 1;
        for (int j = p->gstart[g]; j < p->gstart[g + 1]; j++)
            gcontig[g] &= gk[j] == gk[p->gstart[g]] + (j - p->gstart[g]);
    }
    for (int64_t w = 0; w < nwarps; w++) {
        int nf, nfa, nfb, ok32 = 0;
#ifdef HAVE_PERM
        if (w + 2 < nwarps) /* the words of the warp after next, where a warp's words are contiguous */
            for (const operand_t *o = A; o; o = o == A ? B : (o == B ? C : NULL))
                if (o->s_reg == 1 && o->s_lane == o->nregs)
                    for (int off = 0; off < 32 * o->nregs; off += 16)
                        __builtin_prefetch((const uint32_t *)o->base + (w + 2) * o->s_warp + off);
        if (w + 2 < nwarps && use_d)
            for (int off = 0; off < 32 * D->nregs; off += 16)
                __builtin_prefetch((uint32_t *)D->base + (w + 2) * D->s_warp + off, 1);
#endif
#ifdef HAVE_PERM
        /* a[k * M + m], b[k * N + n], c[m * N + n]; load_perm writes val only where non-finite */
        int oka = 0, okb = 0;
        nfa = use_a ? load_perm(A, &pa, w, wbuf, araw, a, ea, use32 ? a32 : NULL, &oka) : load_any(A, w, araw, a, ea);
        nfb = use_b ? load_perm(B, &pb, w, wbuf, braw, b, eb, use32 ? b32 : NULL, &okb) : load_any(B, w, braw, b, eb);
        nf = nfa | nfb | (use_c ? load_perm(C, &pc, w, wbuf, craw, c, one ? ec : NULL, NULL, NULL)
                                : load_any(C, w, craw, c, NULL));
        ok32 = use32 && oka && okb;
        const double *av = use_a && !nfa ? araw : a, *bv = use_b && !nfb ? braw : b;
#else
        nfa = load_any(A, w, araw, a, ea);
        nfb = load_any(B, w, braw, b, eb);
        nf = nfa | nfb | load_any(C, w, craw, c, NULL);
        const double *av = a, *bv = b;
#endif
        uint32_t todo = ~0u;
        int tried = 0;
#ifdef HAVE_FASTROW
        if (!nf && ok32) {
            tried = 1;
#define WARP_FAST32(MM) (p->out == 0 \
                ? (p->final_add ? warp_fast32(a32, b32, ea, eb, craw, ec, p, MM, K, fmask, codes, 0, 1, 0) \
                                : warp_fast32(a32, b32, ea, eb, craw, ec, p, MM, K, fmask, codes, 0, 0, 0)) \
                : (p->final_add ? warp_fast32(a32, b32, ea, eb, craw, ec, p, MM, K, fmask, codes, 1, 1, 0) \
                                : warp_fast32(a32, b32, ea, eb, craw, ec, p, MM, K, fmask, codes, 1, 0, 0)))
            if (one && M == 16)
                todo = p->out == 0 ? warp_fast32(a32, b32, ea, eb, craw, ec, p, 16, K, fmask, codes, 0, 0, 1)
                                   : warp_fast32(a32, b32, ea, eb, craw, ec, p, 16, K, fmask, codes, 1, 0, 1);
            else
                todo = M == 16 ? WARP_FAST32(16) : WARP_FAST32(M);
#undef WARP_FAST32
        }
#endif
#ifdef HAVE_PERM
        if (todo && use32) { /* the binary64 values where load_perm left them out */
            if (oka && !nfa) f32_to_f64(a32, araw, M * K);
            if (okb && !nfb) f32_to_f64(b32, braw, K * NN);
        }
#endif
#ifdef HAVE_FASTROW
        if (!tried && !nf && M <= MAXM) {
#define WARP_FAST(MM, SKK, SMM) (p->out == 0 \
                ? (p->final_add ? warp_fast(av, bv, ea, eb, craw, p, gk, gcontig, MM, SKK, SMM, fmask, codes, 0, 1) \
                                : warp_fast(av, bv, ea, eb, craw, p, gk, gcontig, MM, SKK, SMM, fmask, codes, 0, 0)) \
                : (p->final_add ? warp_fast(av, bv, ea, eb, craw, p, gk, gcontig, MM, SKK, SMM, fmask, codes, 1, 1) \
                                : warp_fast(av, bv, ea, eb, craw, p, gk, gcontig, MM, SKK, SMM, fmask, codes, 1, 0)))
            todo = M == 16 ? (sK == 1 ? WARP_FAST(16, 1, K) : WARP_FAST(16, 16, 1)) : WARP_FAST(M, sK, sM);
#undef WARP_FAST
        }
#endif
        for (int m = 0; m < M; m++) {
            if (!((todo >> m) & 1)) continue;
            double acc[NN];
            for (int n = 0; n < NN; n++) acc[n] = p->first_c ? craw[m * NN + n] : 0.0;
            int ecmin = p->first_c ? p->emin_c : p->emin_out;
            for (int g = 0; g < p->ngroups; g++) {
                const int32_t *ks = gk + p->gstart[g];
                const int nk = p->gstart[g + 1] - p->gstart[g];
                int special[NN] = {0};
                double sval[NN];
                int anysp;
                {
                    v8d av;
                    memcpy(&av, acc, sizeof av);
                    anysp = v8l_any((((v8l)av >> 52) & 0x7FF) == 0x7FF);
                }
                if (nf || anysp) {
                    for (int n = 0; n < NN; n++) {
                        double x0 = acc[n];
                        int nan = isnan(x0), pos = x0 == INFINITY, neg = x0 == -INFINITY;
                        for (int j = 0; j < nk; j++) {
                            /* all-finite operands: their raw values are the values */
                            double x = (nf ? araw : av)[ks[j] * sK + m * sM], y = (nf ? braw : bv)[ks[j] * NN + n];
                            int pn = isnan(x) || isnan(y) || (isinf(x) && y == 0) || (x == 0 && isinf(y));
                            if (pn) nan = 1;
                            else if (isinf(x) || isinf(y)) {
                                if (signbit(x) != signbit(y)) neg = 1; else pos = 1;
                            }
                        }
                        nan |= pos && neg;
                        special[n] = nan || pos || neg;
                        sval[n] = nan ? NAN : (pos ? INFINITY : -INFINITY);
                    }
                }
                v8d accv;
                memcpy(&accv, acc, sizeof accv);
                /* C's exponent per lane (clamped at ecmin; a zero C, or a non-finite one, whose
                 * output is special anyway, counts as e_zero), at least e_zero */
                const v8l u = (v8l)accv;
                const v8l ef = (u >> 52) & 0x7FF;
                const v8l zero = ((u & 0x7FFFFFFFFFFFFFFFll) == 0) | (ef == 0x7FF);
                accv = (v8d)(u & ~zero);
                v8i E = __builtin_convertvector(ef, v8i) - 1023;
                E = vmax8(vmax8(E, (v8i){0} + ecmin), (v8i){0} + p->e_zero);
                const v8i zi = __builtin_convertvector(zero, v8i);
                E = (E & ~zi) | (((v8i){0} + p->e_zero) & zi);
                v8l sum;
                if (ks[nk - 1] - ks[0] == nk - 1 && gcontig[g]) { /* k0 .. k0 + nk - 1: unrolled */
                    const int k0 = ks[0];
                    if (nk == 16) group_core(av, bv, ea, eb, ks, k0, 16, 1, sK, m * sM, p->F, accv, &E, &sum);
                    else if (nk == 8) group_core(av, bv, ea, eb, ks, k0, 8, 1, sK, m * sM, p->F, accv, &E, &sum);
                    else group_core(av, bv, ea, eb, ks, k0, nk, 1, sK, m * sM, p->F, accv, &E, &sum);
                } else if (nk == 16) { /* k = ks[j]: unrolled */
                    group_core(av, bv, ea, eb, ks, 0, 16, 0, sK, m * sM, p->F, accv, &E, &sum);
                } else {
                    group_core(av, bv, ea, eb, ks, 0, nk, 0, sK, m * sM, p->F, accv, &E, &sum);
                }
                const v8d val = __builtin_convertvector(sum, v8d) * vpow2(E - p->F);
                if (p->out == 0 && p->rounding == 1) {
                    /* binary32 normal range (or zero): toward zero clears the low 29 bits, and
                     * frac_bits < 23 bits of the fraction kept clears 23 - frac_bits more */
                    const v8l u = (v8l)val & 0x7FFFFFFFFFFFFFFFll;
                    const v8l ok = ((u >= 0x3810000000000000ll) & (u < 0x47F0000000000000ll)) | (u == 0);
                    if (v8l_all(ok) && !(nf || anysp)) {
                        const v8d r = (v8d)((v8l)val & rz_mask) + 0.0;
                        memcpy(acc, &r, sizeof r);
                        ecmin = p->emin_out;
                        continue;
                    }
                }
                if (p->out == 1 && !(nf || anysp)) {
                    /* f16, to nearest even: x / quantum rounded by the 1.5 * 2**52 trick
                     * (|x| < 2**12), Inf from 65520 up */
                    const v8l u = (v8l)val;
                    v8i e = __builtin_convertvector((u >> 52) & 0x7FF, v8i) - 1023;
                    e = vmax8(e, (v8i){0} - 14);
                    const v8d x = val * vpow2(10 - e);
                    const v8d r = ((x + 0x1.8p52) - 0x1.8p52) * vpow2(e - 10) + 0.0;
                    const v8l big = (u & 0x7FFFFFFFFFFFFFFFll) >= 0x40EFFE0000000000ll; /* 65520 */
                    const v8l inf = (u & (int64_t)0x8000000000000000ull) | 0x7FF0000000000000ll;
                    const v8d rr = (v8d)(((v8l)r & ~big) | (inf & big));
                    memcpy(acc, &rr, sizeof rr);
                    ecmin = p->emin_out;
                    continue;
                }
                for (int n = 0; n < NN; n++) {
                    double r = round_out(val[n], p->out, p->rounding, p->frac_bits) + 0.0;
                    acc[n] = special[n] ? sval[n] : r;
                }
                ecmin = p->emin_out;
            }
            if (!p->final_add && p->out == 1) { /* f16 D: the bits of exact f16 values */
                v8d v;
                memcpy(&v, acc, sizeof v);
                const v8l u = (v8l)v;
                const v8l sign = (u >> 48) & 0x8000;
                const v8l au = u & 0x7FFFFFFFFFFFFFFFll;
                const v8l e = ((au >> 52) & 0x7FF) - 1023;
                const v8l normal = ((e + 15) << 10) | ((au >> 42) & 0x3FF);
                const v8l sub = __builtin_convertvector((v8d)au * 0x1p24, v8l);
                const v8l is_sub = e < -14, is_inf = au == 0x7FF0000000000000ll, is_nan = au > 0x7FF0000000000000ll;
                v8l c = (normal & ~is_sub) | (sub & is_sub);
                c = (c & ~is_inf) | (0x7C00 & is_inf);
                c = (c | sign) & ~is_nan;
                c |= 0x7FFF & is_nan;
                const v8i bits = __builtin_convertvector(c, v8i);
                memcpy(codes + m * NN, &bits, sizeof bits);
                continue;
            }
            if (!p->final_add && p->out == 0) { /* f32 D: exact conversion, canonical NaN */
                v8d v;
                memcpy(&v, acc, sizeof v);
                typedef float v8f __attribute__((vector_size(32)));
                const v8f f = __builtin_convertvector(v, v8f);
                const v8i nan = __builtin_convertvector(v != v, v8i);
                const v8i bits = ((v8i)f & ~nan) | (0x7FFFFFFF & nan);
                memcpy(codes + m * NN, &bits, sizeof bits);
                continue;
            }
            if (p->final_add && p->out == 0) { /* round_odd_sum(acc, C), then binary32 (RN) */
                v8d x, y;
                memcpy(&x, acc, sizeof x);
                memcpy(&y, craw + m * NN, sizeof y);
                const v8d s = x + y, bb = s - x;
                const v8d err = (x - (s - bb)) + (y - bb);
                const v8l u = (v8l)s;
                const v8l fin = ((u >> 52) & 0x7FF) != 0x7FF;
                const v8l bump = (err != 0) & ((u & 1) == 0) & fin;
                /* nextafter toward err's sign: one step in magnitude, away from zero where s and
                 * err agree in sign (s is not zero: x == -y leaves no error) */
                const v8l away = (err > 0) == (s > 0);
                const v8d r = (v8d)(u + (bump & ((away & 1) | (~away & -1))));
                typedef float v8f __attribute__((vector_size(32)));
                const v8f f = __builtin_convertvector(r, v8f);
                const v8i nan = __builtin_convertvector(r != r, v8i);
                const v8i bits = ((v8i)f & ~nan) | (0x7FFFFFFF & nan);
                memcpy(codes + m * NN, &bits, sizeof bits);
                continue;
            }
            for (int n = 0; n < NN; n++) {
                double v = acc[n];
                if (p->final_add) {
                    double s = round_odd_sum(v, craw[m * NN + n]);
                    v = p->out == 0 ? (double)(float)s : round_out(s, 1, 0, -1);
                }
                codes[m * NN + n] = encode(v, p->out);
            }
        }
#ifdef HAVE_PERM
        if (use_d) {
            uint32_t *dst = (uint32_t *)D->base + w * D->s_warp;
            if (D->out == 1) {
                for (int i = 0; i < M * NN; i += 16)
                    _mm256_storeu_si256((__m256i *)(codes16 + i),
                                        _mm512_cvtepi32_epi16(_mm512_loadu_si512((const void *)(codes + i))));
                perm_apply_split(&pd, codes16, dst);
            } else {
                perm_apply_split(&pd, codes, dst);
            }
            continue;
        }
#endif
        store(D, w, codes, M * NN);
    }
#ifdef HAVE_FASTROW
    _mm_setcsr(csr);
#endif
#ifdef HAVE_PERM
    free(mem);
#endif
    return 0;
}

int warpsim_int_mma(const operand_t *A, const operand_t *B, const operand_t *C, const dest_t *D,
                    const model_t *p, int64_t nwarps) {
    const int M = p->M, K = p->K;
    if (p->N != NN || M * K > MAXE || K * NN > MAXE || M * NN > MAXE) return -1;
    for (const operand_t *o = A; o; o = o == A ? B : (o == B ? C : NULL))
        if (o->slot && o->nregs > 8) return -1; /* warp_words' buffer */
    double a[MAXE], c[MAXE];
    double b[MAXE] __attribute__((aligned(64)));
    uint32_t codes[MAXE];
    for (int64_t w = 0; w < nwarps; w++) {
        /* integer values in binary64: products below 2**16, K <= 128, so every sum is exact */
        load_any(A, w, a, NULL, NULL);
        load_any(B, w, b, NULL, NULL);
        load_any(C, w, c, NULL, NULL);
        for (int m = 0; m < M; m++) {
            v8d s0, s1 = {0};
            memcpy(&s0, c + m * NN, sizeof s0);
            int k = 0;
            for (; k + 1 < K; k += 2) {
                v8d b0, b1;
                memcpy(&b0, b + k * NN, sizeof b0);
                memcpy(&b1, b + (k + 1) * NN, sizeof b1);
                s0 += a[k * M + m] * b0;
                s1 += a[(k + 1) * M + m] * b1;
            }
            if (k < K) {
                v8d b0;
                memcpy(&b0, b + k * NN, sizeof b0);
                s0 += a[k * M + m] * b0;
            }
            const v8l d = __builtin_convertvector(s0 + s1, v8l);
            for (int n = 0; n < NN; n++) {
                int64_t x = d[n];
                if (p->satfinite) x = x > 2147483647LL ? 2147483647LL : (x < -2147483648LL ? -2147483648LL : x);
                codes[m * NN + n] = (uint32_t)(x & 0xFFFFFFFF);
            }
        }
        store(D, w, codes, M * NN);
    }
    return 0;
}
