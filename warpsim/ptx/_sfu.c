/* Optional compiled path for the bit-exact MUFU forms of sm_90 (warpsim/ptx/sfu_accel.py).
 *
 * The NumPy code (warpsim/ptx/sfu.py, warpsim/ptx/ops/approx.py) is the reference; each form
 * here is the same per-lane arithmetic in one pass (specials, .ftz, the table lookup, the
 * rescaling and the ptxas sequence around MUFU).  Built by warpsim.tensorcore.accel's builder
 * with -ffp-contract=off and no fast-math: every float operation is one IEEE operation.
 *
 * Tables are compact: per segment of 2**S keys a linear model in integers,
 * word = base + ((slope * j) >> 24) + code, with a 2- or 4-bit code per key; segments whose
 * codes would not fit keep their words (dense).  Derived from the measured tables on first
 * use (warpsim_sfu_stats / warpsim_sfu_fill) and checked against them key for key by the tests.
 */
#include "_sfu.h"
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

/* ---- f32 arithmetic of the ptxas sequences (canonical NaN) ---- */
INL uint32_t canon(uint32_t y) { return ((y & ~SIGN) > INF) ? NANF : y; }
INL uint32_t fmul(uint32_t a, uint32_t b) { return canon(U(F(a) * F(b))); }
INL uint32_t fadd(uint32_t a, float c) { return canon(U(F(a) + c)); }

/* FMUL.FTZ: subnormal operands read as zero; tininess after rounding to 24 bits with an
 * unbounded exponent (as approx._fmul). */
INL uint32_t fmul_ftz(uint32_t a, uint32_t b) {
    if (!(a & INF)) a &= SIGN;
    if (!(b & INF)) b &= SIGN;
    double p = (double)F(a) * (double)F(b);
    uint32_t y = U((float)p);
    uint32_t r = U((float)(p * 0x1p64)) & ~SIGN;
    uint32_t tiny = (r >= U(0x1p-62f) ? U(0x1p-126f) : 0u) | (uint32_t)(UD(p) >> 32 & SIGN);
    return canon(fabs(p) < 0x1p-126 ? tiny : y);
}
INL uint32_t fmulx(uint32_t a, uint32_t b, int ftz) { return ftz ? fmul_ftz(a, b) : fmul(a, b); }

/* ---- MUFU ---- */
static inline uint32_t mufu_rcp(const Tab *T, uint32_t b) {
    uint32_t E = (b >> 23) & 255u, s = b & SIGN;
    if (__builtin_expect(E == 0, 0)) return s | INF;
    if (__builtin_expect(E == 255, 0)) return (b & MANT) ? NANF : s;
    uint32_t t = look(T, b & MANT);
    if (__builtin_expect(E >= (t >> 23) + 127u, 0)) return s;
    return (t + ((127u - E) << 23)) | s;
}

static inline uint32_t mufu_ex2(const Tab *T, uint32_t b) {
    uint32_t E = (b >> 23) & 255u, s = b & SIGN;
    if (__builtin_expect(E == 0, 0)) return 0x3F800000u;
    if (__builtin_expect(E == 255, 0)) return (b & MANT) ? NANF : (s ? 0u : INF);
    float a = F(b & ~SIGN);
    if (a > 256.0f) a = 256.0f;
    uint32_t q = (uint32_t)floorf(a * 8388608.0f);
    uint32_t n = q >> 23;
    uint32_t t = look(T, (q & MANT) | (s >> 8));
    int32_t fe = (int32_t)(t >> 23) + (s ? -(int32_t)n : (int32_t)n);
    if (__builtin_expect(fe <= 0, 0)) return 0u;
    if (__builtin_expect(fe >= 255, 0)) return INF;
    return s ? t - (n << 23) : t + (n << 23);
}

static inline uint32_t mufu_lg2(const Tab *T, uint32_t b) {
    uint32_t E = (b >> 23) & 255u, s = b & SIGN;
    if (__builtin_expect(E == 0, 0)) return 0xFF800000u;
    if (__builtin_expect(E == 255, 0)) return ((b & MANT) || s) ? NANF : INF;
    if (__builtin_expect(s != 0, 0)) return NANF;
    uint32_t E1 = E + 1u, up = (E1 >> 7) & 1u;
    uint32_t v = look(T, (b & MANT) | (up << 23));
    int32_t e = (int32_t)E1 - 127 - (int32_t)up;
    double d = (double)F(v) + (double)e;
    return U((float)D(UD(d) & 0xFFFFFFFFE0000000ull));
}

static inline uint32_t mufu_rs(const Tab *T, uint32_t b, int rsq) {
    uint32_t E = (b >> 23) & 255u, s = b & SIGN;
    if (__builtin_expect(E == 0, 0)) return rsq ? (s | INF) : s;
    if (__builtin_expect(E == 255, 0)) return ((b & MANT) || s) ? NANF : (rsq ? 0u : INF);
    if (__builtin_expect(s != 0, 0)) return NANF;
    uint32_t p = ~E & 1u;
    uint32_t t = look(T, (p << 23) | (b & MANT));
    uint32_t h = (uint32_t)(((int32_t)E - (127 + (int32_t)p)) >> 1) << 23;
    return rsq ? t - h : t + h;
}

static inline uint32_t mufu_sin(const Tab *T, uint32_t t, int cosine) {
    if (__builtin_expect((t & ~SIGN) >= INF, 0)) return NANF;
    float a = fminf(F(t & ~SIGN), 16777216.0f);
    int64_t k = (int64_t)((a - floorf(a)) * 33554432.0f);
    uint32_t sg = t & SIGN;
    if (cosine) { k = (k + (1 << 23)) & ((1 << 25) - 1); sg = 0; }
    return look(T, (uint32_t)(k & ((1 << 24) - 1))) ^ ((((uint32_t)(k >> 24)) << 31) ^ sg);
}

INL uint32_t turns_rz(uint32_t b) {   /* FMUL.RZ by f32(1/2pi), as approx._turns_rz */
    double p = (double)F(b) * (double)F(0x3E22F983u);
    return U((float)D(UD(p) & 0xFFFFFFFFE0000000ull));
}

static inline uint32_t mufu_tanh(const Tab *T, uint32_t b) {
    uint32_t a = b & ~SIGN;
    if (__builtin_expect(a <= 0x3B7FFFFFu, 0)) return b;
    if (__builtin_expect(a > INF, 0)) return NANF;
    uint32_t E = a >> 23;
    E = (E < 118u ? 118u : E > 130u ? 130u : E) - 118u;
    uint32_t w = T->aux[E];
    return look(T, (w & 0x7FFFFFFu) + ((a & MANT) >> (w >> 27))) | (b & SIGN);
}

/* MUFU.RCP64H / RSQ64H on the high word (sfu.rcp64h / sfu.rsq64h, with _hi64_full's cases) */
static inline uint32_t hi_clamp(uint32_t t, int32_t shift, uint32_t s) {
    int32_t f = (int32_t)((t >> 20) & 2047u) + shift;
    uint32_t y = f <= 0 ? 0u : f >= 2047 ? 0x7FF00000u : ((t & 0xFFFFFu) | ((uint32_t)f << 20));
    return y | s;
}

static inline uint32_t mufu_rcp64h(const Tab *T, uint32_t h) {
    uint32_t E = (h >> 20) & 2047u, M = h & 0xFFFFFu, s = h & SIGN;
    if (__builtin_expect(E - 1u < 2044u, 1)) return (look(T, M) + ((1023u - E) << 20)) | s;
    if (E == 0) return s | 0x7FF00000u;
    if (E == 2047) return M ? NANF : s;
    return hi_clamp(look(T, M), -((int32_t)E - 1023), s);
}

static inline uint32_t mufu_rsq64h(const Tab *T, uint32_t h) {
    uint32_t E = (h >> 20) & 2047u, M = h & 0xFFFFFu, s = h & SIGN;
    if (__builtin_expect(E == 0, 0)) return s | 0x7FF00000u;
    if (__builtin_expect(E == 2047, 0)) return (M || s) ? NANF : 0u;
    if (__builtin_expect(s != 0, 0)) return NANF;
    uint32_t p = ~E & 1u;
    uint32_t t = look(T, (p << 20) | M);
    return t - ((uint32_t)(((int32_t)E - (1023 + (int32_t)p)) >> 1) << 20);
}

/* rsqrt.approx.f64: RSQ64H and one DFMA step, as approx._rsqrt_f64 */
static inline uint64_t rsqrt_f64(const Tab *T, uint64_t b) {
    uint32_t hi = (uint32_t)(b >> 32);
    int fast = (uint32_t)(hi - 0x00100000u) < 0x7FE00000u;
    int sub = hi < 0x00100000u && b != 0;
    if (__builtin_expect(!fast && !sub, 0)) {
        uint64_t sign = b & 0x8000000000000000ull;
        double x0 = D(b);
        if ((b << 1) == 0) return sign | 0x7FF0000000000000ull;
        if (isnan(x0)) return b | (1ull << 51);
        if (sign) return 0xFFF8000000000000ull;
        return 0;   /* +Inf */
    }
    double xs = sub ? D(b) * 0x1p54 : D(b);
    uint64_t u = UD(xs);
    int64_t e2 = (int64_t)((u >> 52) & 2047u) - 1023, p = e2 & 1;
    double x = D((u & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(1023 + p) << 52));
    double y0 = D((uint64_t)mufu_rsq64h(T, (uint32_t)(UD(x) >> 32)) << 32);
    double e = fma(-x, y0 * y0, 1.0);
    double c = fma(e, 0.375, 0.5);
    double y = fma(c, y0 * e, y0);
    int64_t shift = ((-(e2 - p)) >> 1) + (sub ? 27 : 0);
    return (uint64_t)((int64_t)UD(y) + (int64_t)((uint64_t)shift << 52));
}


static inline uint32_t f32_form(int form, const Tab *T, uint32_t b) {
    switch (form) {
    case EX2_FTZ: case MUFU_EX2: return mufu_ex2(T, b);
    case EX2:
        if (__builtin_expect(F(b) < -126.0f, 0)) {
            uint32_t r = mufu_ex2(T, fmul(b, 0x3F000000u));
            return fmul(r, r);
        }
        return mufu_ex2(T, b);
    case LG2_FTZ: case MUFU_LG2: return mufu_lg2(T, b);
    case LG2:
        if (__builtin_expect((b & INF) == 0, 0)) return fadd(mufu_lg2(T, fmul(b, 0x4B800000u)), -24.0f);
        return mufu_lg2(T, b);
    case RCP_FTZ: case MUFU_RCP: return mufu_rcp(T, b);
    case RCP: {
        float ax = fabsf(F(b));
        if (__builtin_expect(ax < 0x1p-126f || ax > 0x1p126f, 0)) {
            uint32_t s = ax > 0x1p126f ? 0x3E800000u : 0x4B800000u;
            return fmul(s, mufu_rcp(T, fmul(b, s)));
        }
        return mufu_rcp(T, b);
    }
    case RSQ_FTZ: case MUFU_RSQ: return mufu_rs(T, b, 1);
    case RSQ:
        if (__builtin_expect((b & INF) == 0, 0)) return fmul(mufu_rs(T, fmul(b, 0x4B800000u), 1), 0x45800000u);
        return mufu_rs(T, b, 1);
    case SQRT_FTZ: case MUFU_SQRT: return mufu_rs(T, b, 0);
    case SQRT:
        if (__builtin_expect((b & INF) == 0, 0)) return fmul(mufu_rs(T, fmul(b, 0x4B800000u), 0), 0x39800000u);
        return mufu_rs(T, b, 0);
    case SIN: return mufu_sin(T, turns_rz(b), 0);
    case COS: return mufu_sin(T, turns_rz(b), 1);
    case MUFU_SIN: return mufu_sin(T, b, 0);
    case MUFU_COS: return mufu_sin(T, b, 1);
    case TANH: return mufu_tanh(T, b);
    }
    return 0;
}

uint32_t warpsim_sfu_one(int form, const Tab *T, uint32_t b) { return f32_form(form, T, b); }

uint64_t warpsim_sfu_one64(int form, const Tab *T, uint64_t b) {
    if (form == RCP64H) return (uint64_t)mufu_rcp64h(T, (uint32_t)(b >> 32)) << 32;
    if (form == RSQ64H) return (uint64_t)mufu_rsq64h(T, (uint32_t)(b >> 32)) << 32;
    return rsqrt_f64(T, b);
}

static inline uint32_t div_form(const Tab *T, uint32_t a, uint32_t b, int full, int ftz) {
    float ab = fabsf(F(b));
    int big = full && ab > 0x1p126f, small = !ftz && ab < 0x1p-126f;
    if (__builtin_expect(big || small, 0)) {
        uint32_t s = big ? 0x3E800000u : 0x4B800000u;
        b = fmulx(b, s, ftz);
        a = fmulx(a, s, ftz);
    }
    return fmulx(mufu_rcp(T, b), a, ftz);
}

/* ---- The vectorisable fast paths ----
 * Each fast_* is branch-free (the compiler turns it into SIMD code with gathers) and exact on
 * the lanes it does not flag; flagged lanes -- zeros, subnormals, Inf/NaN, results near the
 * range limits, the ptxas rescaling cases, dense table segments -- are recomputed by the scalar
 * functions above, which handle every case. */
INL uint32_t look_v(const Tab *t, uint32_t k, uint32_t *rare) {
    uint32_t S = (uint32_t)t->S, R = (uint32_t)t->R;
    uint32_t s = k >> S, j = k & ((1u << S) - 1u);
    uint64_t e = t->seg[s];
    uint32_t base = (uint32_t)e;
    int32_t m = (int32_t)(uint32_t)(e >> 32);
    uint32_t code = (t->res[(k * R) >> 5] >> ((k * R) & 31u)) & ((1u << R) - 1u);
    *rare |= m == INT32_MIN;
    return base + (uint32_t)((int32_t)((uint32_t)m * j) >> FRAC) + code;
}

INL uint32_t corr(const Tab *t, uint32_t k) { return (t->corr[k >> 4] >> ((k & 15u) * 2u)) & 3u; }

/* MUFU.EX2 on [0, 1): one quadratic in the key's low 17 bits per segment of 2**17 keys (the
 * unit's own 64 segments; coefficients T->aux as float64 [c0, c1, c2, 0] per segment, fitted to
 * the measured words at first use), floored: within one word of the table on every key, the rest
 * is the 2-bit code (warpsim_sfu_ex2_model).  k: 23-bit fraction key of a non-negative operand. */
INL uint32_t ex2_model(const double *C, uint32_t k) {
    int32_t i = (int32_t)(k >> 17) << 2;                       /* indexed: vectorised gathers */
    double X = (double)(int32_t)(k & 0x1FFFFu);
    return 0x3F800000u + (uint32_t)(int32_t)(C[i] + X * (C[i + 1] + X * C[i + 2]));
}

INL uint32_t fast_f32(int form, const Tab *T, uint32_t b, uint32_t *rare) {
    uint32_t E = (b >> 23) & 255u, s = b & SIGN, M = b & MANT, a = b & ~SIGN;
    switch (form) {
    case EX2_FTZ: case EX2: case MUFU_EX2: {
        *rare |= (a - 0x00800000u) >= 0x42000000u;            /* 0, subnormal, |x| >= 64 */
        float fa = F(a) < 64.0f ? F(a) : 0.0f;                 /* flagged lanes: any in-range key */
        uint32_t q = (uint32_t)(int32_t)(fa * 8388608.0f);
        uint32_t mask = (uint32_t)((int32_t)b >> 31), sh = (q >> 23) << 23;
        /* 2**-f = 2**(1 - f) / 2 with 1 - f read as the ones' complement of f (the table's
         * negative half is its positive half at ~k, halved, for every k but 0: 2**0 = 1) */
        uint32_t k = q & MANT, kk = (k ^ mask) & MANT;
        uint32_t c = corr(T, kk);
        *rare |= c == 3u;
        uint32_t t = ex2_model((const double *)T->aux, kk) + c - 1u - (mask & 0x00800000u);
        uint32_t z = mask & (0u - (uint32_t)(k == 0u));         /* -(0 + 0): 1.0 */
        t = (t & ~z) | (0x3F800000u & z);                      /* the table word */
        return t + ((sh ^ mask) - mask);
    }
    case LG2_FTZ: case LG2: case MUFU_LG2: {
        *rare |= (a - 0x00800000u) >= 0x7F000000u;            /* 0, subnormal, Inf, NaN */
        uint32_t E1 = E + 1u, up = (E1 >> 7) & 1u;
        uint32_t v = look_v(T, M | (up << 23), rare);
        int32_t e = (int32_t)E1 - 127 - (int32_t)up;
        double d = (double)F(v) + (double)e;
        uint32_t y = U((float)D(UD(d) & 0xFFFFFFFFE0000000ull));
        return s ? NANF : y;
    }
    case RCP_FTZ: case RCP: case MUFU_RCP: {           /* the IEEE quotient plus its correction */
        *rare |= (a - 0x00800000u) >= 0x7E000000u;            /* exponent field 0 or >= 253 */
        uint32_t c = corr(T, M);
        *rare |= c == 3u;
        return U(1.0f / F(b)) + c - 1u;
    }
    case RSQ_FTZ: case RSQ: case MUFU_RSQ: case SQRT_FTZ: case SQRT: case MUFU_SQRT: {
        *rare |= (a - 0x00800000u) >= 0x7F000000u;            /* 0, subnormal, Inf, NaN */
        uint32_t c = corr(T, b & 0xFFFFFFu);
        *rare |= c == 3u;
        int rsq = form == RSQ_FTZ || form == RSQ || form == MUFU_RSQ;
        float r = sqrtf(F(a));
        return s ? NANF : U(rsq ? 1.0f / r : r) + c - 1u;
    }
    case SIN: case COS: case MUFU_SIN: case MUFU_COS: {
        uint32_t t = (form == SIN || form == COS) ? turns_rz(b) : b;
        float ta = F(t & ~SIGN);
        float fa = ta < 16777216.0f ? ta : 16777216.0f;
        uint32_t k = (uint32_t)(int32_t)((fa - floorf(fa)) * 33554432.0f);
        uint32_t sg = t & SIGN;
        if (form == COS || form == MUFU_COS) { k = (k + (1u << 23)) & ((1u << 25) - 1u); sg = 0; }
        uint32_t y = look_v(T, k & ((1u << 24) - 1u), rare) ^ (((k >> 24) << 31) ^ sg);
        return (t & ~SIGN) >= INF ? NANF : y;
    }
    case TANH: {
        uint32_t Ec = E < 118u ? 118u : E > 130u ? 130u : E;
        uint32_t w = T->aux[Ec - 118u];
        uint32_t y = look_v(T, (w & 0x7FFFFFFu) + (M >> (w >> 27)), rare) | s;
        y = a <= 0x3B7FFFFFu ? b : y;
        return a > INF ? NANF : y;
    }
    }
    return 0;
}

INL uint32_t fast_div(const Tab *T, uint32_t a, uint32_t b, int ftz, uint32_t *rare) {
    uint32_t E = (b >> 23) & 255u;
    *rare |= (E - 1u) >= 252u;                                  /* 0, subnormal, >= 2**126, Inf, NaN */
    uint32_t c = corr(T, b & MANT);
    *rare |= c == 3u;
    uint32_t r = U(1.0f / F(b)) + c - 1u;                      /* MUFU.RCP(b) */
    float pf = F(r) * F(a);
    uint32_t p = U(pf);
    if (ftz)   /* FMUL.FTZ = FMUL unless a is subnormal or the product reaches 2**-126 or below */
        *rare |= (((a & ~SIGN) - 1u) < 0x007FFFFFu) | (fabsf(pf) <= 0x1p-126f && pf != 0.0f);
    return canon(p);
}

INL uint32_t fast_rcp64h(const Tab *T, uint32_t h, uint32_t *rare) {
    uint32_t E = (h >> 20) & 2047u;
    *rare |= (E - 1u) >= 2044u;
    return (look_v(T, h & 0xFFFFFu, rare) + ((1023u - E) << 20)) | (h & SIGN);
}

INL uint32_t fast_rsq64h(const Tab *T, uint32_t h, uint32_t *rare) {
    uint32_t E = (h >> 20) & 2047u, p = ~E & 1u;
    *rare |= ((E - 1u) >= 2046u) | (h >= SIGN);
    uint32_t t = look_v(T, (p << 20) | (h & 0xFFFFFu), rare);
    return t - ((uint32_t)(((int32_t)E - (1023 + (int32_t)p)) >> 1) << 20);
}

INL uint64_t fast_rsqrt_f64(const Tab *T, uint64_t b, uint32_t *rare) {
    uint32_t hi = (uint32_t)(b >> 32);
    *rare |= (uint32_t)(hi - 0x00100000u) >= 0x7FE00000u;     /* not a positive normal finite */
    int64_t e2 = (int64_t)((b >> 52) & 2047u) - 1023, p = e2 & 1;
    double x = D((b & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(1023 + p) << 52));
    double y0 = D((uint64_t)fast_rsq64h(T, (uint32_t)(UD(x) >> 32), rare) << 32);
    double e = fma(-x, y0 * y0, 1.0);
    double c = fma(e, 0.375, 0.5);
    double y = fma(c, y0 * e, y0);
    int64_t shift = (-(e2 - p)) >> 1;
    return (uint64_t)((int64_t)UD(y) + (int64_t)((uint64_t)shift << 52));
}

#define BLK 1024
/* The fast pass over one block (one function per form, for the vectoriser): y and flags. */
#define FAST(name, TY, EXPR)                                                                   \
    static uint32_t name(const Tab *restrict T, const TY *restrict a, const TY *restrict b,     \
                         TY *restrict y, uint8_t *restrict fl, int64_t m) {                    \
        (void)b;                                                                               \
        uint32_t any = 0;                                                                      \
        for (int64_t i = 0; i < m; i++) {                                                      \
            uint32_t r = 0;                                                                    \
            y[i] = (EXPR);                                                                     \
            fl[i] = (uint8_t)r;                                                                \
            any |= r;                                                                          \
        }                                                                                      \
        return any;                                                                            \
    }
#define F32(f) FAST(fast_##f, uint32_t, fast_f32(f, T, a[i], &r))
F32(EX2_FTZ) F32(EX2) F32(LG2_FTZ) F32(LG2) F32(RCP_FTZ) F32(RCP) F32(RSQ_FTZ) F32(RSQ) F32(SQRT_FTZ)
F32(SQRT) F32(SIN) F32(COS) F32(TANH) F32(MUFU_SIN) F32(MUFU_COS)
FAST(fast_div0, uint32_t, fast_div(T, a[i], b[i], 0, &r))
FAST(fast_div1, uint32_t, fast_div(T, a[i], b[i], 1, &r))
FAST(fast_RCP64H, uint64_t, (uint64_t)fast_rcp64h(T, (uint32_t)(a[i] >> 32), &r) << 32)
FAST(fast_RSQ64H, uint64_t, (uint64_t)fast_rsq64h(T, (uint32_t)(a[i] >> 32), &r) << 32)
FAST(fast_RSQRT_F64, uint64_t, fast_rsqrt_f64(T, a[i], &r))

/* y = FASTFN over each block; the flagged lanes again by SLOW (scalar, every case) */
#define BLOCKS(FASTFN, SLOW)                                                                   \
    for (int64_t i0 = 0; i0 < n; i0 += BLK) {                                                  \
        int64_t m_ = n - i0 < BLK ? n - i0 : BLK;                                              \
        uint8_t fl[BLK];                                                                       \
        if (FASTFN(T, a + i0, bv ? b + i0 : 0, y + i0, fl, m_))                                \
            for (int64_t i = i0; i < i0 + m_; i++)                                             \
                if (fl[i - i0]) y[i] = (SLOW);                                                 \
    }
#define LOOP(expr) for (int64_t i = 0; i < n; i++) y[i] = (expr)

static int sfu_run(int form, const void *av, const void *bv, void *yv, int64_t n, const Tab *Tp) {
    const Tab T_ = *Tp, *T = &T_;   /* a local copy: the stores to y cannot alias it */
    switch (form) {
    case DIV_APPROX: case DIV_APPROX_FTZ: case DIV_FULL: case DIV_FULL_FTZ: {
        const uint32_t *restrict a = av, *restrict b = bv;
        uint32_t *restrict y = yv;
        switch (form) {
        case DIV_APPROX: BLOCKS(fast_div0, div_form(T, a[i], b[i], 0, 0)) break;
        case DIV_APPROX_FTZ: BLOCKS(fast_div1, div_form(T, a[i], b[i], 0, 1)) break;
        case DIV_FULL: BLOCKS(fast_div0, div_form(T, a[i], b[i], 1, 0)) break;
        default: BLOCKS(fast_div1, div_form(T, a[i], b[i], 1, 1)) break;
        }
        return 0;
    }
    case HALF16: {
        const uint16_t *restrict a = av, *h = (const uint16_t *)T->aux;
        uint16_t *restrict y = yv;
        LOOP(h[a[i]]);
        return 0;
    }
    case HALF16X2: {
        const uint32_t *restrict a = av;
        const uint16_t *h = (const uint16_t *)T->aux;
        uint32_t *restrict y = yv;
        LOOP((uint32_t)h[a[i] & 0xFFFFu] | ((uint32_t)h[a[i] >> 16] << 16));
        return 0;
    }
    case RCP64H: case RSQ64H: case RSQRT_F64: {
        const uint64_t *restrict a = av, *b = 0;
        uint64_t *restrict y = yv;
        if (T->band && warpsim_sfu_band64(form, T, a, y, n) == 0) return 0;
        if (form == RCP64H)
            BLOCKS(fast_RCP64H, (uint64_t)mufu_rcp64h(T, (uint32_t)(a[i] >> 32)) << 32)
        else if (form == RSQ64H)
            BLOCKS(fast_RSQ64H, (uint64_t)mufu_rsq64h(T, (uint32_t)(a[i] >> 32)) << 32)
        else
            BLOCKS(fast_RSQRT_F64, rsqrt_f64(T, a[i]))
        return 0;
    }
    }
    if (form < EX2_FTZ || form > MUFU_COS) return -1;
    /* the bare MUFU functions are the .ftz forms (one kernel each) */
    form = form == MUFU_EX2 ? EX2_FTZ : form == MUFU_LG2 ? LG2_FTZ : form == MUFU_RCP ? RCP_FTZ
         : form == MUFU_RSQ ? RSQ_FTZ : form == MUFU_SQRT ? SQRT_FTZ : form;
    const uint32_t *restrict a = av, *b = 0;
    uint32_t *restrict y = yv;
    if ((form == LG2_FTZ || form == LG2) && warpsim_sfu_lg2(form, T, a, y, n) == 0) return 0;   /* _sfu_lg2.c */
    if ((T->band || T->dp) && warpsim_sfu_band(form, T, a, y, n) == 0) return 0;
    if ((form == SIN || form == COS || form == MUFU_SIN || form == MUFU_COS) && T->aux  /* _sfu_trig.c */
        && warpsim_sfu_trig(form == SIN || form == COS, form == COS || form == MUFU_COS, T->aux, a, y, n) == 0)
        return 0;
    switch (form) {   /* one loop per form: the switches inside fold away */
#define CASE(f) case f: BLOCKS(fast_##f, f32_form(f, T, a[i])) return 0;
    CASE(EX2_FTZ) CASE(EX2) CASE(LG2_FTZ) CASE(LG2) CASE(RCP_FTZ) CASE(RCP) CASE(RSQ_FTZ) CASE(RSQ)
    CASE(SQRT_FTZ) CASE(SQRT) CASE(SIN) CASE(COS) CASE(TANH) CASE(MUFU_SIN) CASE(MUFU_COS)
#undef CASE
    }
    return -1;
}

/* One form over n lanes: a (and b for div) in, y out; 0 on success, -1 for an unknown form.  The
 * float arithmetic runs in round-to-nearest without flush-to-zero or denormals-are-zero,
 * whatever the caller's mode (restored on return). */
int warpsim_sfu(int form, const void *av, const void *bv, void *yv, int64_t n, const Tab *Tp) {
#if defined(__SSE__) || defined(__x86_64__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(0x1F80);
    int r = sfu_run(form, av, bv, yv, n, Tp);
    _mm_setcsr(csr);
    return r;
#else
    return sfu_run(form, av, bv, yv, n, Tp);
#endif
}

/* table - ex2_model per key of the ex2 table's positive half (2**23 keys), for the correction codes. */
void warpsim_sfu_ex2_model(const uint32_t *t, const double *C, int32_t *out) {
    for (int64_t k = 0; k < ((int64_t)1 << 23); k++) out[k] = (int32_t)(t[k] - ex2_model(C, (uint32_t)k));
}

/* Every key's word from the compact table (the tests compare it with the measured table). */
void warpsim_sfu_expand(const Tab *T, int64_t n, uint32_t *out) {
    for (int64_t k = 0; k < n; k++) out[k] = look(T, (uint32_t)k);
}

/* Per segment of 2**S words of t (n words; the last segment padded with its last word): the
 * least-squares slope in 2**-24 units, and the least and greatest residual word - model. */
void warpsim_sfu_stats(const uint32_t *t, int64_t n, int S, int64_t *out) {
    int64_t L = (int64_t)1 << S, nseg = (n + L - 1) >> S;
    for (int64_t s = 0; s < nseg; s++) {
        double sw = 0, swj = 0, jm = (L - 1) / 2.0, sjj = 0;
        for (int64_t j = 0; j < L; j++) {
            int64_t k = s * L + j;
            double w = (double)t[k < n ? k : n - 1];
            sw += w;
            swj += w * (j - jm);
            sjj += (j - jm) * (j - jm);
        }
        double slope = swj / sjj * (double)((int64_t)1 << FRAC);
        int64_t m = (fabs(slope) < (double)((int64_t)1 << (31 - S))) ? (int64_t)llround(slope) : 0;
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int64_t j = 0; j < L; j++) {
            int64_t k = s * L + j;
            int64_t r = (int64_t)t[k < n ? k : n - 1] - ((m * j) >> FRAC);
            if (r < lo) lo = r;
            if (r > hi) hi = r;
        }
        out[3 * s] = m;
        out[3 * s + 1] = lo;
        out[3 * s + 2] = hi;
    }
}

/* The codes of the modelled segments and the words of the dense ones (seg, slope as in Tab). */
void warpsim_sfu_fill(const uint32_t *t, int64_t n, int S, int R, const uint32_t *seg, const int32_t *slope,
                      uint32_t *res, uint32_t *dense) {
    int64_t L = (int64_t)1 << S, nseg = (n + L - 1) >> S;
    for (int64_t s = 0; s < nseg; s++) {
        uint32_t base = seg[s];
        int32_t m = slope[s];
        for (int64_t j = 0; j < L; j++) {
            int64_t k = s * L + j;
            uint32_t w = t[k < n ? k : n - 1];
            if (m == INT32_MIN) { dense[base + j] = w; continue; }
            uint32_t code = w - base - (uint32_t)((m * (int32_t)j) >> FRAC);
            res[(k * R) >> 5] |= code << ((k * R) & 31);
        }
    }
}
