/* More of the optional compiled mma kernel (warpsim.tensorcore.accel), built into the same
 * library as _accel.c: the f64 forms (an FMA chain) and the block-scaled forms (dense and
 * sparse).  The same arithmetic as the NumPy reference (engine.fma_chain_batch_last,
 * numerics._block_scaled, sparse.compute), one warp at a time, register words in, D's words out.
 * No fast-math, no FP contraction: every operation is exact or an IEEE correctly rounded one.
 */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__)
#include <immintrin.h>
#define HAVE_MXCSR 1
#endif

/* register words of one operand: element i of warp w is the word
 * base[reg[i] * s_reg + lane[i] * s_lane + w * s_warp] (64- or 32-bit), bits shift[i].. */
typedef struct {
    const void *base;
    int64_t s_reg, s_lane, s_warp; /* strides in words */
    const int32_t *reg, *lane, *shift; /* per element (shift: NULL for whole words) */
    int32_t nelem;
} xop_t;

static inline uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static inline double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* ------------------------------------------------------------------------------------------
 * f64: d = c (NaN quieted); d = fma(a_k, b_k, d) for k in order, in the instruction's rounding
 * mode; a NaN result takes B's NaN (quieted), else the accumulator's, else A's (quieted), else
 * 0xFFF8000000000000 (what the H100's DMMA does; engine.fma_chain_batch_last).
 * ------------------------------------------------------------------------------------------ */

#define QUIET 0x0008000000000000ull
#define DNAN 0xFFF8000000000000ull

static inline uint64_t word64(const xop_t *o, int64_t w, int i) {
    return ((const uint64_t *)o->base)[o->reg[i] * o->s_reg + o->lane[i] * o->s_lane + w * o->s_warp];
}

/* the NaN of one step, given that fma(x, y, acc) is NaN */
static inline double nan_of(double x, double y, double acc) {
    if (y != y) return bitsd(dbits(y) | QUIET);
    if (acc != acc) return acc;
    if (x != x) return bitsd(dbits(x) | QUIET);
    return bitsd(DNAN);
}

#if defined(__AVX512F__)
#define F64_DIRECT 1
/* A fixed permutation of 64-bit units run as two-register permutes (vpermt2pd): output chunk
 * `chunk` (8 units) gets, under `mask`, units idx of the 16-unit source block `blk`. */
typedef struct {
    int32_t chunk, blk;
    int64_t mask;
    int64_t idx[8];
} p64_t;

/* steps for out[u] = in[src[u]] (0 <= u < nout, nout a multiple of 8); -1 if over maxst */
static int p64_build(const int32_t *src, int nout, p64_t *st, int maxst) {
    int ns = 0;
    for (int c = 0; c < nout / 8; c++) {
        const int first = ns;
        for (int j = 0; j < 8; j++) {
            const int blk = src[8 * c + j] / 16;
            int t = first;
            while (t < ns && st[t].blk != blk) t++;
            if (t == ns) {
                if (ns == maxst) return -1;
                memset(&st[ns], 0, sizeof st[ns]);
                st[ns].chunk = c;
                st[ns].blk = blk;
                ns++;
            }
            st[t].mask |= 1 << j;
            st[t].idx[j] = src[8 * c + j] % 16;
        }
    }
    return ns;
}

static inline void p64_apply(const p64_t *st, int ns, const double *in, double *out) {
    __m512d r = _mm512_setzero_pd();
    int cur = st[0].chunk;
    for (int t = 0; t < ns; t++) {
        if (st[t].chunk != cur) {
            _mm512_storeu_pd(out + 8 * cur, r);
            cur = st[t].chunk;
        }
        const __m512d x = _mm512_permutex2var_pd(_mm512_loadu_pd(in + 16 * st[t].blk),
                                                 _mm512_loadu_si512((const void *)st[t].idx),
                                                 _mm512_loadu_pd(in + 16 * st[t].blk + 8));
        r = _mm512_mask_mov_pd(r, (__mmask8)st[t].mask, x);
    }
    _mm512_storeu_pd(out + 8 * cur, r);
}

/* one warp: b (K x 8) and c (M x 8) already in engine order; pa, oa: A's words and offsets.
 * All M rows at once, k outermost.  A NaN, once made, stays to the end of its chain: only
 * where D has one is the row run again step by step, for the NaN each step passes on. */
static inline __attribute__((always_inline)) void f64_warp_(
    const double *a, const double *b, double *d, const int32_t *rowpos, const int M, const int K) {
    __m512d acc[16];
    for (int m = 0; m < M; m++) acc[m] = _mm512_loadu_pd(d + 8 * rowpos[m]);
    for (int k = 0; k < K; k++) {
        const __m512d bk = _mm512_loadu_pd(b + 8 * k);
        for (int m = 0; m < M; m++)
            acc[m] = _mm512_fmadd_pd(_mm512_set1_pd(a[m * K + k]), bk, acc[m]);
    }
    for (int m = 0; m < M; m++) {
        const __m512d r = acc[m];
        if (__builtin_expect(_mm512_cmp_pd_mask(r, r, _CMP_UNORD_Q) != 0, 0)) {
            double *d8 = d + 8 * rowpos[m];
            for (int n = 0; n < 8; n++) {
                uint64_t u = dbits(d8[n]);
                if ((u & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) d8[n] = bitsd(u | QUIET);
            }
            for (int k = 0; k < K; k++) {
                const double x = a[m * K + k];
                for (int n = 0; n < 8; n++) {
                    const double y = fma(x, b[8 * k + n], d8[n]);
                    d8[n] = y == y ? y : nan_of(x, b[8 * k + n], d8[n]);
                }
            }
        } else {
            _mm512_storeu_pd(d + 8 * rowpos[m], r);
        }
    }
}

static void f64_warp(const double *a, const double *b, double *d, const int32_t *rp, int M, int K) {
    if (M == 16 && K == 8) f64_warp_(a, b, d, rp, 16, 8);
    else if (M == 16 && K == 16) f64_warp_(a, b, d, rp, 16, 16);
    else if (M == 16 && K == 4) f64_warp_(a, b, d, rp, 16, 4);
    else if (M == 8 && K == 4) f64_warp_(a, b, d, rp, 8, 4);
    else f64_warp_(a, b, d, rp, M, K);
}
#endif

static void f64_rows(const double *a, const double *b, double *d, int M, int K) {
    for (int m = 0; m < M; m++) {
        double acc[8];
        memcpy(acc, d + m * 8, sizeof acc);
        for (int k = 0; k < K; k++) {
            const double x = a[m * K + k];
            for (int n = 0; n < 8; n++) {
                const double r = fma(x, b[k * 8 + n], acc[n]);
                acc[n] = r == r ? r : nan_of(x, b[k * 8 + n], acc[n]);
            }
        }
        memcpy(d + m * 8, acc, sizeof acc);
    }
}

/* The floating-point environment of the FMAs: rounding (0 rn, 1 rz, 2 rm, 3 rp), subnormals
 * kept (no flush-to-zero, no denormals-are-zero).  Returns the state to restore. */
typedef struct { unsigned csr; int round; } fenv_saved_t;

static fenv_saved_t set_env(int rounding) {
    fenv_saved_t s;
    static const int modes[4] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};
    s.round = fegetround();
    fesetround(modes[rounding & 3]);
#ifdef HAVE_MXCSR
    s.csr = _mm_getcsr();
    _mm_setcsr(s.csr & ~0x8040u); /* FTZ (bit 15) and DAZ (bit 6) off */
#else
    s.csr = 0;
#endif
    return s;
}

static void restore_env(fenv_saved_t s) {
#ifdef HAVE_MXCSR
    _mm_setcsr(s.csr);
#endif
    fesetround(s.round);
}

/* per-element word offsets within a warp, for this call's strides */
static void offsets(const xop_t *o, int32_t *off) {
    for (int i = 0; i < o->nelem; i++) off[i] = (int32_t)(o->reg[i] * o->s_reg + o->lane[i] * o->s_lane);
}

/* whether operand o's words of one warp are contiguous, (lane, reg) order */
static int contiguous(const xop_t *o) { return o->s_reg == 1 && o->s_lane == o->nelem / 32 && o->nelem % 32 == 0; }

/* A (K x M elements, k-major), B (K x 8), C and D (M x 8): 64-bit register words */
int warpsim_f64_mma(const xop_t *A, const xop_t *B, const xop_t *C, const xop_t *D, int32_t M, int32_t K,
                    int32_t rounding, int64_t nwarps) {
    if (M > 16 || K > 16 || A->nelem != M * K || B->nelem != K * 8 || C->nelem != M * 8 || D->nelem != M * 8)
        return -1;
    for (const xop_t *o = A; o; o = o == A ? B : o == B ? C : o == C ? D : NULL)
        if (llabs(o->s_reg) > (1 << 20) || llabs(o->s_lane) > (1 << 20)) return -1; /* int32 offsets */
    double a[256] __attribute__((aligned(64))), b[128] __attribute__((aligned(64))), d[128] __attribute__((aligned(64)));
    int32_t oa[256], ob[128], oc[128], od[128];
    {   /* A in m-major order: a[m * K + k] */
        int32_t t[256];
        offsets(A, t);
        for (int k = 0; k < K; k++)
            for (int m = 0; m < M; m++) oa[m * K + k] = t[k * M + m];
    }
    offsets(B, ob);
    offsets(C, oc);
    offsets(D, od);
#ifdef F64_DIRECT
    /* contiguous warps: A, C in and D out through permutes, B's rows gathered.  Row m of C / D
     * sits at row rowpos[m] of the buffer d: in order, or rows m and m + 8 side by side, which
     * ever needs fewer permute steps */
    p64_t pa_[128], pc[128], pdd[128];
    int32_t rowpos[16], inv[128], ocb[128], odb[128];
    const int na = contiguous(A) ? p64_build(oa, M * K, pa_, 128) : -1;
    int nc = -1, nd = -1;
    for (int i = 0; i < M; i++) rowpos[i] = i;
    if (contiguous(C) && contiguous(D)) {
        int best = 1 << 30;
        for (int layout = 0; layout < 1 + (M == 16); layout++) {
            int32_t rp[16];
            for (int m = 0; m < M; m++) rp[m] = layout ? (m % 8) * 2 + m / 8 : m;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < 8; n++) {
                    ocb[rp[m] * 8 + n] = oc[m * 8 + n];
                    odb[rp[m] * 8 + n] = od[m * 8 + n];
                }
            for (int i = 0; i < M * 8; i++) inv[odb[i]] = i;
            const int c1 = p64_build(ocb, M * 8, pc, 128), d1 = p64_build(inv, M * 8, pdd, 128);
            if (c1 > 0 && d1 > 0 && c1 + d1 < best) {
                best = c1 + d1;
                memcpy(rowpos, rp, sizeof rp);
            }
        }
        if (best < (1 << 30)) {
            for (int m = 0; m < M; m++)
                for (int n = 0; n < 8; n++) {
                    ocb[rowpos[m] * 8 + n] = oc[m * 8 + n];
                    odb[rowpos[m] * 8 + n] = od[m * 8 + n];
                }
            for (int i = 0; i < M * 8; i++) inv[odb[i]] = i;
            nc = p64_build(ocb, M * 8, pc, 128);
            nd = p64_build(inv, M * 8, pdd, 128);
        } else {
            for (int i = 0; i < M; i++) rowpos[i] = i;
        }
    }
#endif
    const fenv_saved_t env = set_env(rounding);
    for (int64_t w = 0; w < nwarps; w++) {
        const uint64_t *pa = (const uint64_t *)A->base + w * A->s_warp, *pbw = (const uint64_t *)B->base + w * B->s_warp;
        const uint64_t *pcw = (const uint64_t *)C->base + w * C->s_warp;
        uint64_t *pdw = (uint64_t *)D->base + w * D->s_warp;
#ifdef F64_DIRECT
        if (w + 2 < nwarps) /* the hardware prefetcher does not see these strided blocks in time */
            for (const xop_t *o = A; o; o = o == A ? B : o == B ? C : NULL)
                if (contiguous(o))
                    for (int l = 0; l < o->nelem * 8; l += 64)
                        _mm_prefetch((const char *)((const uint64_t *)o->base + (w + 2) * o->s_warp) + l, _MM_HINT_T0);
        if (na > 0) p64_apply(pa_, na, (const double *)pa, a);
        else for (int i = 0; i < M * K; i++) a[i] = bitsd(pa[oa[i]]);
        for (int k = 0; k < K; k++)
            _mm512_store_pd(b + 8 * k, _mm512_i32gather_pd(_mm256_loadu_si256((const __m256i *)(ob + 8 * k)),
                                                           (const void *)pbw, 8));
        if (nc > 0) p64_apply(pc, nc, (const double *)pcw, d);
        else
            for (int m = 0; m < M; m++)
                for (int n = 0; n < 8; n++) d[rowpos[m] * 8 + n] = bitsd(pcw[oc[m * 8 + n]]);
        f64_warp(a, b, d, rowpos, M, K);
        if (nd > 0) p64_apply(pdd, nd, d, (double *)pdw);
        else
            for (int m = 0; m < M; m++)
                for (int n = 0; n < 8; n++) pdw[od[m * 8 + n]] = dbits(d[rowpos[m] * 8 + n]);
        continue;
#endif
        for (int i = 0; i < M * K; i++) a[i] = bitsd(pa[oa[i]]);
        for (int i = 0; i < K * 8; i++) b[i] = bitsd(pbw[ob[i]]);
        for (int i = 0; i < M * 8; i++) {
            uint64_t u = pcw[oc[i]];
            if ((u & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) u |= QUIET;
            d[i] = bitsd(u);
        }
        f64_rows(a, b, d, M, K);
        for (int i = 0; i < M * 8; i++) pdw[od[i]] = dbits(d[i]);
    }
    restore_env(env);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Block scaling (.kind::mxf8f6f4 / mxf4 / mxf4nvf4), dense and sparse: numerics._block_scaled
 * on each D row; for mma.sp the compressed A row against the B rows its metadata selects, the
 * dense instruction of half the K (sparse.compute).
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    int32_t M, K, KC, V;     /* K: B's rows; KC: A's k (K, or K / 2 for mma.sp) */
    int32_t grouped;         /* 0: mxf8f6f4 (one fused step); 1: mxf4 / mxf4nvf4 (groups of 16) */
    int32_t F, e_zero;       /* alignment of the step (block_F, block_e_zero when grouped) */
    int32_t emin_a, emin_b, emin_s; /* exponent clamps of A, B and scale values */
    uint32_t mask_a, mask_b;
    const double *ta, *tb, *ts; /* code -> value: A, B (2**bits entries), scales (256) */
    const int32_t *sa_lane, *sa_shift; /* (V, M): lane and bit shift of scale_A[m, v] */
    const int32_t *sb_lane, *sb_shift; /* (V, 8) */
    const int32_t *meta;     /* mma.sp: (M, KC / kept) lane * 8 + nibble of each chunk; NULL dense */
    int32_t cs;              /* mma.sp: logical elements per chunk (4, or 8 for the 4:8 pairs) */
} bsmodel_t;

#define BS_ZEXP (-1000000)

static inline int ex_clamp(double x, int emin) { /* floor(log2|x|) clamped at emin; x finite non-zero */
    const int e = (int)((dbits(x) >> 52) & 0x7FF) - 1023;
    return e < emin ? emin : e;
}

/* binary64 -> binary32 toward zero, Inf from 2**128 up (engine._rz_f32); the f32 bits,
 * NaN canonical */
static inline uint32_t rz_f32_bits(double x) {
    float f;
    if (x != x) return 0x7FFFFFFFu;
    const double ax = fabs(x);
    if (ax >= 0x1p128) {
        f = x > 0 ? INFINITY : -INFINITY;
    } else if (ax >= 0x1p-126 || ax == 0) {
        f = (float)bitsd(dbits(x) & 0xFFFFFFFFE0000000ull);
    } else {
        const double t = trunc(ax * 0x1p149) * 0x1p-149; /* whole binary32 subnormal steps */
        f = (float)(x < 0 ? -t : t);
    }
    f = f + 0.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline uint32_t code32(const uint32_t *p, int32_t off, int32_t shift, uint32_t mask) {
    return (p[off] >> shift) & mask;
}

int warpsim_block_mma(const xop_t *A, const xop_t *B, const xop_t *C, const xop_t *D, const xop_t *SA,
                      const xop_t *SB, const xop_t *E, const bsmodel_t *p, int64_t nwarps) {
    const int M = p->M, K = p->K, KC = p->KC, V = p->V;
    if (M > 16 || K > 128 || KC > 128 || V < 1 || V > 4 || KC % V || (p->grouped && KC % 16) ||
        A->nelem != M * KC || B->nelem != K * 8 || C->nelem != M * 8 || D->nelem != M * 8)
        return -1;
    static const int32_t none = 0;
    (void)none;
    int32_t oa[2048], ob[1024], oc[128], od[128];
    offsets(A, oa);
    offsets(B, ob);
    offsets(C, oc);
    offsets(D, od);
    const int chunk = KC / V;
    const int kept = p->cs == 8 ? 4 : 2, nchunks = KC / kept;
    double a[2048], b[1024] __attribute__((aligned(64))), c[128], sav[64], sbv[32];
    int32_t ea[2048], eb[1024], esa[64], esb[32];
    uint8_t cols[2048];
    for (int64_t w = 0; w < nwarps; w++) {
        const uint32_t *pa = (const uint32_t *)A->base + w * A->s_warp, *pb = (const uint32_t *)B->base + w * B->s_warp;
        const uint32_t *pc = (const uint32_t *)C->base + w * C->s_warp;
        const uint32_t *psa = (const uint32_t *)SA->base + w * SA->s_warp, *psb = (const uint32_t *)SB->base + w * SB->s_warp;
        uint32_t *pd = (uint32_t *)D->base + w * D->s_warp;
        int nonfinite = 0;
        for (int i = 0; i < M * KC; i++) {
            const double v = p->ta[code32(pa, oa[i], A->shift[i], p->mask_a)];
            a[i] = v;
            nonfinite |= !isfinite(v);
            ea[i] = v == 0 || !isfinite(v) ? BS_ZEXP : ex_clamp(v, p->emin_a);
        }
        for (int i = 0; i < K * 8; i++) {
            const double v = p->tb[code32(pb, ob[i], B->shift[i], p->mask_b)];
            b[i] = v;
            nonfinite |= !isfinite(v);
            eb[i] = v == 0 || !isfinite(v) ? BS_ZEXP : ex_clamp(v, p->emin_b);
        }
        for (int i = 0; i < M * 8; i++) {
            uint32_t u = pc[oc[i]];
            float f;
            memcpy(&f, &u, 4);
            c[i] = f;
            nonfinite |= !isfinite(c[i]);
        }
        for (int i = 0; i < V * M; i++) {
            const double v = p->ts[(psa[p->sa_lane[i] * SA->s_lane] >> p->sa_shift[i]) & 0xFF];
            sav[i] = v;
            nonfinite |= !isfinite(v);
            esa[i] = v == 0 || !isfinite(v) ? BS_ZEXP : ex_clamp(v, p->emin_s);
        }
        for (int i = 0; i < V * 8; i++) {
            const double v = p->ts[(psb[p->sb_lane[i] * SB->s_lane] >> p->sb_shift[i]) & 0xFF];
            sbv[i] = v;
            nonfinite |= !isfinite(v);
            esb[i] = v == 0 || !isfinite(v) ? BS_ZEXP : ex_clamp(v, p->emin_s);
        }
        if (p->meta) { /* the logical B row of each compressed A element */
            const uint32_t *pe = (const uint32_t *)E->base + w * E->s_warp;
            for (int m = 0; m < M; m++)
                for (int ch = 0; ch < nchunks; ch++) {
                    const int g = p->meta[m * nchunks + ch];
                    const uint32_t nib = (pe[(g >> 3) * E->s_lane] >> (4 * (g & 7))) & 0xF, i0 = nib & 3, i1 = nib >> 2;
                    uint8_t *cc = cols + m * KC + ch * kept;
                    if (kept == 2) {
                        cc[0] = (uint8_t)(ch * 4 + i0);
                        cc[1] = (uint8_t)(ch * 4 + i1);
                    } else {
                        cc[0] = (uint8_t)(ch * 8 + 2 * i0);
                        cc[1] = (uint8_t)(ch * 8 + 2 * i0 + 1);
                        cc[2] = (uint8_t)(ch * 8 + 2 * i1);
                        cc[3] = (uint8_t)(ch * 8 + 2 * i1 + 1);
                    }
                }
        }
        for (int m = 0; m < M; m++) {
            double val[8];
            for (int n = 0; n < 8; n++) {
                /* C's exponent (a zero C counts as e_zero) */
                const double cv = isfinite(c[m * 8 + n]) ? c[m * 8 + n] : 0.0;
                int E0 = cv == 0 ? p->e_zero : ex_clamp(cv, -126);
                double s = 0;
                if (!p->grouped) {
                    /* one step: products a 2**sa_e * b 2**sb_e, zero products at e_zero */
                    int emax = BS_ZEXP;
                    for (int k = 0; k < KC; k++) {
                        const int v = k / chunk, kb = p->meta ? cols[m * KC + k] : k;
                        const int e1 = ea[k * M + m], e2 = eb[kb * 8 + n];
                        const int sae = isfinite(sav[v * M + m]) ? ex_clamp(sav[v * M + m], -1022) : -1;
                        const int sbe = isfinite(sbv[v * 8 + n]) ? ex_clamp(sbv[v * 8 + n], -1022) : -1;
                        const int e = (e1 == BS_ZEXP || e2 == BS_ZEXP) ? p->e_zero : e1 + e2 + sae + sbe;
                        if (e > emax) emax = e;
                    }
                    if (emax > E0) E0 = emax;
                    const double sc = ldexp(1.0, p->F - E0);
                    for (int k = 0; k < KC; k++) {
                        const int v = k / chunk, kb = p->meta ? cols[m * KC + k] : k;
                        const double x = isfinite(a[k * M + m]) ? a[k * M + m] : 0.0, y = isfinite(b[kb * 8 + n]) ? b[kb * 8 + n] : 0.0;
                        const int sae = isfinite(sav[v * M + m]) ? ex_clamp(sav[v * M + m], -1022) : -1;
                        const int sbe = isfinite(sbv[v * 8 + n]) ? ex_clamp(sbv[v * 8 + n], -1022) : -1;
                        s += trunc(ldexp(x, sae) * ldexp(y, sbe) * sc);
                    }
                } else {
                    /* groups of 16: exact sums, times both scales, aligned at the scale exponents */
                    double terms[8];
                    int es[8], emax = BS_ZEXP;
                    const int G = KC / 16;
                    for (int g = 0; g < G; g++) {
                        double sum = 0;
                        int nz = 0;
                        for (int k = 16 * g; k < 16 * g + 16; k++) {
                            const int kb = p->meta ? cols[m * KC + k] : k;
                            const double x = isfinite(a[k * M + m]) ? a[k * M + m] : 0.0, y = isfinite(b[kb * 8 + n]) ? b[kb * 8 + n] : 0.0;
                            sum += x * y;
                            nz |= x != 0 && y != 0;
                        }
                        const int v = (16 * g) / chunk;
                        const double s1 = isfinite(sav[v * M + m]) ? sav[v * M + m] : 0.0, s2 = isfinite(sbv[v * 8 + n]) ? sbv[v * 8 + n] : 0.0;
                        const double scale = s1 * s2;
                        terms[g] = sum * scale;
                        es[g] = (!nz || scale == 0) ? p->e_zero : esa[v * M + m] + esb[v * 8 + n];
                        if (es[g] > emax) emax = es[g];
                    }
                    if (emax > E0) E0 = emax;
                    const double sc = ldexp(1.0, p->F - E0);
                    for (int g = 0; g < G; g++) s += trunc(terms[g] * sc);
                }
                s += 0.0;
                s += trunc(cv * ldexp(1.0, p->F - E0));
                val[n] = s * ldexp(1.0, E0 - p->F);
            }
            if (nonfinite) { /* NaN and Inf: special_values(a * sa, b * sb, c) */
                for (int n = 0; n < 8; n++) {
                    const double c0 = c[m * 8 + n];
                    int nan = c0 != c0, pos = c0 == INFINITY, neg = c0 == -INFINITY;
                    for (int k = 0; k < KC; k++) {
                        const int v = k / chunk, kb = p->meta ? cols[m * KC + k] : k;
                        const double x = a[k * M + m] * sav[v * M + m], y = b[kb * 8 + n] * sbv[v * 8 + n];
                        if (x != x || y != y || (isinf(x) && y == 0) || (x == 0 && isinf(y))) nan = 1;
                        else if (isinf(x) || isinf(y)) {
                            if (signbit(x) != signbit(y)) neg = 1; else pos = 1;
                        }
                    }
                    nan |= pos && neg;
                    if (nan) val[n] = NAN;
                    else if (pos) val[n] = INFINITY;
                    else if (neg) val[n] = -INFINITY;
                }
            }
            for (int n = 0; n < 8; n++) pd[od[m * 8 + n]] = rz_f32_bits(val[n]);
        }
    }
    return 0;
}
