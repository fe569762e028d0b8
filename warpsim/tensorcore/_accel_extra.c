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
static inline double pow2(int e) { return bitsd((uint64_t)(e + 1023) << 52); } /* -1022 <= e <= 1023 */

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
static int offsets(const xop_t *o, int32_t *off) { /* false if one does not fit int32 */
    for (int i = 0; i < o->nelem; i++) {
        const int64_t x = o->reg[i] * o->s_reg + o->lane[i] * o->s_lane;
        if (x != (int32_t)x) return 0;
        off[i] = (int32_t)x;
    }
    return 1;
}

#ifdef F64_DIRECT
/* whether operand o's words of one warp are contiguous, (lane, reg) order */
static int contiguous(const xop_t *o) { return o->s_reg == 1 && o->s_lane == o->nelem / 32 && o->nelem % 32 == 0; }
#endif

/* A (K x M elements, k-major), B (K x 8), C and D (M x 8): 64-bit register words */
int warpsim_f64_mma(const xop_t *A, const xop_t *B, const xop_t *C, const xop_t *D, int32_t M, int32_t K,
                    int32_t rounding, int64_t nwarps) {
    if (M > 16 || K > 16 || A->nelem != M * K || B->nelem != K * 8 || C->nelem != M * 8 || D->nelem != M * 8)
        return -1;
    double a[256] __attribute__((aligned(64))), b[128] __attribute__((aligned(64))), d[128] __attribute__((aligned(64)));
    int32_t oa[256], ob[128], oc[128], od[128];
    {   /* A in m-major order: a[m * K + k] */
        int32_t t[256];
        if (!offsets(A, t)) return -1;
        for (int k = 0; k < K; k++)
            for (int m = 0; m < M; m++) oa[m * K + k] = t[k * M + m];
    }
    if (!offsets(B, ob) || !offsets(C, oc) || !offsets(D, od)) return -1;
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

typedef double bv8d __attribute__((vector_size(64)));
typedef int64_t bv8l __attribute__((vector_size(64)));

static inline bv8d ld8d(const double *p) { bv8d v; memcpy(&v, p, sizeof v); return v; }
static inline bv8l ld8l(const int64_t *p) { bv8l v; memcpy(&v, p, sizeof v); return v; }
static inline bv8d pow2v(bv8l e) { return (bv8d)((e + 1023) << 52); } /* -1022 <= e <= 1023 */
#if defined(__AVX512F__)
static inline bv8l vmaxl(bv8l x, bv8l y) { return (bv8l)_mm512_max_epi64((__m512i)x, (__m512i)y); }
#else
static inline bv8l vmaxl(bv8l x, bv8l y) { const bv8l m = x > y; return (x & m) | (y & ~m); }
#endif
static inline bv8l vsel(bv8l m, bv8l x, bv8l y) { return (x & m) | (y & ~m); }
static inline bv8l trunc8(bv8d x) { return __builtin_convertvector(x, bv8l); } /* |x| < 2**63 */

/* exponent of each lane of a finite row (clamped at emin); zero lanes take `zero` */
static inline bv8l exps8(bv8d x, int emin, int64_t zero) {
    const bv8l u = (bv8l)x;
    const bv8l e = vmaxl(((u >> 52) & 0x7FF) - 1023, (bv8l){0} + emin);
    return vsel((u & 0x7FFFFFFFFFFFFFFFll) == 0, (bv8l){0} + zero, e);
}

/* Contiguous warp words ((lane, reg) order, as mma passes them): element i sits in word off[i]
 * at bits shift[i].  If every used word's epr slots (bits sh0 + j * sw) hold the elements that go
 * to out[dst[q] + j], j = 0..epr-1, in that order (dst(i): element i's place in out), fill
 * dst (-1: a word nothing reads) and return epr; else 0.  Then a warp's codes decode word by word,
 * without gathers. */
static int word_plan(const xop_t *o, const int32_t *off, const int32_t *dsti, int32_t *dst, int *sh0, int *sw) {
    if (o->s_reg != 1 || o->s_lane < 1 || o->s_lane > 8) return 0;
    const int nwords = 32 * (int)o->s_lane;
    if (o->nelem % nwords) return 0;
    const int epr = o->nelem / nwords, w = 32 / epr;
    if (epr < 1 || 32 % epr) return 0;
    const int s0 = o->shift[0] % w;
    int count[256];
    for (int q = 0; q < nwords; q++) dst[q] = -1, count[q] = 0;
    for (int i = 0; i < o->nelem; i++) {
        const int q = off[i], j = (o->shift[i] - s0) / w;
        if (q < 0 || q >= nwords || o->shift[i] % w != s0 || j < 0 || j >= epr) return 0;
        if (count[q]++ == 0) dst[q] = dsti[i] - j;
        else if (dst[q] != dsti[i] - j) return 0;
    }
    for (int q = 0; q < nwords; q++)
        if (count[q] != 0 && count[q] != epr) return 0;
    *sh0 = s0;
    *sw = w;
    return epr;
}

/* decode one warp's words by a word plan: out[dst[q] + j] = tab[(word q >> (sh0 + j sw)) & mask] */
static void word_decode(const uint32_t *words, int nwords, const int32_t *dst, int epr, int sh0, int sw,
                        uint32_t mask, const double *tab, double *out) {
#if defined(__AVX512F__)
    if (epr == 8 && mask == 0xF) { /* 4-bit codes: the 16-entry table in two registers */
        const __m512d lo = _mm512_loadu_pd(tab), hi = _mm512_loadu_pd(tab + 8);
        const __m512i sh = _mm512_add_epi64(_mm512_set1_epi64(sh0), _mm512_set_epi64(28, 24, 20, 16, 12, 8, 4, 0));
        const __m512i m4 = _mm512_set1_epi64(0xF);
        for (int q = 0; q < nwords; q++) {
            if (dst[q] < 0) continue;
            const __m512i idx = _mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64(words[q]), sh), m4);
            _mm512_storeu_pd(out + dst[q], _mm512_permutex2var_pd(lo, idx, hi));
        }
        return;
    }
#endif
    for (int q = 0; q < nwords; q++) {
        if (dst[q] < 0) continue;
        const uint32_t x = words[q];
        double *o = out + dst[q];
        for (int j = 0; j < epr; j++) o[j] = tab[(x >> (sh0 + j * sw)) & mask];
    }
}

int warpsim_block_mma(const xop_t *A, const xop_t *B, const xop_t *C, const xop_t *D, const xop_t *SA,
                      const xop_t *SB, const xop_t *E, const bsmodel_t *p, int64_t nwarps) {
    const int M = p->M, K = p->K, KC = p->KC, V = p->V;
    if (M > 16 || M % 8 || K > 128 || KC > 128 || V < 1 || V > 4 || KC % V || K % V || (KC / V) % 8 || K % 8 ||
        (p->grouped && KC % 16) ||
        A->nelem != M * KC || B->nelem != K * 8 || C->nelem != M * 8 || D->nelem != M * 8)
        return -1;
    int32_t oa[2048], ob[1024], oc[128], od[128];
    if (!offsets(A, oa) || !offsets(B, ob) || !offsets(C, oc) || !offsets(D, od)) return -1;
    const int chunk = KC / V, bchunk = K / V, F = p->F;
    const int kept = p->cs == 8 ? 4 : 2, nchunks = KC / kept;
    /* word plans: A into m-major order, B into n-major order (then transposed) */
    int32_t dsti[2048], qa[256], qb[256];
    int sha = 0, swa = 0, shb = 0, swb = 0;
    for (int k = 0; k < KC; k++)
        for (int m = 0; m < M; m++) dsti[k * M + m] = m * KC + k;
    const int epa = word_plan(A, oa, dsti, qa, &sha, &swa);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < 8; n++) dsti[k * 8 + n] = n * K + k;
    const int epb = word_plan(B, ob, dsti, qb, &shb, &swb);
    double bt[1024];
    /* a[m * KC + k] (m-major), b[k * 8 + n]; finite values (non-finite -> 0) and raw ones */
    double a[2048], araw[2048], b[1024] __attribute__((aligned(64))), braw[1024], c[128] __attribute__((aligned(64))),
        craw[128];
    double sav[64], sbv[32], sfa[64], sfb[32] __attribute__((aligned(64)));
    int64_t esa[64], esb[32] __attribute__((aligned(64)));
    /* mxf8f6f4: scaled values and their exponents (zero: BS_ZEXP) */
    double as[2048], bs[1024] __attribute__((aligned(64)));
    int64_t ea2[2048], eb2[1024] __attribute__((aligned(64)));
    uint8_t cols[2048], bnz[128];
    uint16_t amask[128], bmask[64];
    uint8_t bzero[128], azero[16];
    unsigned bzall = 0;
    if (!p->meta)
        for (int m = 0; m < M; m++)
            for (int k = 0; k < KC; k++) cols[m * KC + k] = (uint8_t)k;
    const fenv_saved_t env = set_env(0); /* IEEE default: subnormal C and binary32 results kept */
    for (int64_t w = 0; w < nwarps; w++) {
        const uint32_t *pa = (const uint32_t *)A->base + w * A->s_warp, *pb = (const uint32_t *)B->base + w * B->s_warp;
        const uint32_t *pc = (const uint32_t *)C->base + w * C->s_warp;
        const uint32_t *psa = (const uint32_t *)SA->base + w * SA->s_warp, *psb = (const uint32_t *)SB->base + w * SB->s_warp;
        uint32_t *pd = (uint32_t *)D->base + w * D->s_warp;
        int nonfinite = 0;
        if (epa) {
            word_decode(pa, 32 * (int)A->s_lane, qa, epa, sha, swa, p->mask_a, p->ta, a);
        } else {
            for (int k = 0; k < KC; k++)
                for (int m = 0; m < M; m++) {
                    const int i = k * M + m;
                    a[m * KC + k] = p->ta[code32(pa, oa[i], A->shift[i], p->mask_a)];
                }
        }
        if (epb) {
            word_decode(pb, 32 * (int)B->s_lane, qb, epb, shb, swb, p->mask_b, p->tb, bt);
            for (int k = 0; k < K; k++)
                for (int n = 0; n < 8; n++) b[k * 8 + n] = bt[n * K + k];
        } else {
            for (int i = 0; i < K * 8; i++) b[i] = p->tb[code32(pb, ob[i], B->shift[i], p->mask_b)];
        }
        int nf_ab = 0;
        {   /* non-finite operands: keep the raw values for the specials, compute on zeros */
            int nf = 0;
            for (int i = 0; i < M * KC; i++) nf |= !isfinite(a[i]);
            for (int i = 0; i < K * 8; i++) nf |= !isfinite(b[i]);
            if (nf) {
                nonfinite = nf_ab = 1;
                memcpy(araw, a, sizeof(double) * M * KC);
                memcpy(braw, b, sizeof(double) * K * 8);
                for (int i = 0; i < M * KC; i++) a[i] = isfinite(a[i]) ? a[i] : 0.0;
                for (int i = 0; i < K * 8; i++) b[i] = isfinite(b[i]) ? b[i] : 0.0;
            }
        }
        for (int i = 0; i < M * 8; i++) {
            const uint32_t u = pc[oc[i]];
            float f;
            memcpy(&f, &u, 4);
            craw[i] = f;
            c[i] = isfinite(f) ? (double)f : 0.0;
            nonfinite |= !isfinite(f);
        }
        for (int i = 0; i < V * M; i++) {
            const double v = p->ts[(psa[p->sa_lane[i] * SA->s_lane] >> p->sa_shift[i]) & 0xFF];
            sav[i] = v;
            sfa[i] = isfinite(v) ? v : 0.0;
            nonfinite |= !isfinite(v);
            esa[i] = sfa[i] == 0 ? BS_ZEXP : ex_clamp(v, p->emin_s);
        }
        for (int i = 0; i < V * 8; i++) {
            const double v = p->ts[(psb[p->sb_lane[i] * SB->s_lane] >> p->sb_shift[i]) & 0xFF];
            sbv[i] = v;
            sfb[i] = isfinite(v) ? v : 0.0;
            nonfinite |= !isfinite(v);
            esb[i] = sfb[i] == 0 ? BS_ZEXP : ex_clamp(v, p->emin_s);
        }
        if (nonfinite && !nf_ab) { /* specials from C or the scales: the raw values are the values */
            memcpy(araw, a, sizeof(double) * M * KC);
            memcpy(braw, b, sizeof(double) * K * 8);
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
        if (p->grouped && p->meta) {
            for (int k = 0; k < K; k++) {
                unsigned mk = 0;
                for (int n = 0; n < 8; n++) mk |= (unsigned)(b[k * 8 + n] != 0) << n;
                bnz[k] = (uint8_t)mk;
            }
        } else if (p->grouped) { /* bit k % 16 of each group's mask: a non-zero element */
            memset(amask, 0, sizeof amask);
            memset(bmask, 0, sizeof bmask);
            for (int k = 0; k < KC; k++)
                for (int m = 0; m < M; m++) amask[(k >> 4) * M + m] |= (uint16_t)((a[m * KC + k] != 0) << (k & 15));
            for (int k = 0; k < K; k++)
                for (int n = 0; n < 8; n++) bmask[(k >> 4) * 8 + n] |= (uint16_t)((b[k * 8 + n] != 0) << (k & 15));
        } else {
            /* every factor scaled by its power-of-two scale: exact; exponents clamped, then
             * scaled (a NaN scale, whose outputs are special, counts as 2**-1 as in NumPy) */
            int64_t sea[64] __attribute__((aligned(64))), seb[32] __attribute__((aligned(64)));
            for (int i = 0; i < V * M; i++) sea[i] = sfa[i] == 0 ? -1 : ex_clamp(sfa[i], -1022);
            for (int i = 0; i < V * 8; i++) seb[i] = sfb[i] == 0 ? -1 : ex_clamp(sfb[i], -1022);
            const bv8l zexp = (bv8l){0} + BS_ZEXP;
            for (int m = 0; m < M; m++)
                for (int k0 = 0; k0 < KC; k0 += 8) { /* 8 k of one scale block */
                    const int i = m * KC + k0;
                    const bv8d x = ld8d(a + i);
                    const bv8l se = (bv8l){0} + sea[(k0 / chunk) * M + m];
                    const bv8l e = exps8(x, p->emin_a, BS_ZEXP);
                    const bv8d xs = x * pow2v(se);
                    const bv8l es = vsel(e == zexp, zexp, e + se);
                    memcpy(as + i, &xs, sizeof xs);
                    memcpy(ea2 + i, &es, sizeof es);
                }
            /* which B rows have zeros (8-bit masks over n), which A columns */
            bzall = 0;
            for (int k = 0; k < K; k++) {
                unsigned mk = 0;
                for (int n = 0; n < 8; n++) mk |= (unsigned)(b[k * 8 + n] == 0) << n;
                bzero[k] = (uint8_t)mk;
                bzall |= mk;
            }
            for (int m = 0; m < M; m++) {
                azero[m] = 0;
                for (int k = 0; k < KC; k++) azero[m] |= a[m * KC + k] == 0;
            }
            for (int k = 0; k < K; k++) {
                const bv8d y = ld8d(b + 8 * k);
                const bv8l se = ld8l(seb + (k / bchunk) * 8);
                const bv8l e = exps8(y, p->emin_b, BS_ZEXP);
                const bv8d ys = y * pow2v(se);
                const bv8l es = vsel(e == zexp, zexp, e + se);
                memcpy(bs + 8 * k, &ys, sizeof ys);
                memcpy(eb2 + 8 * k, &es, sizeof es);
            }
        }
        for (int m = 0; m < M; m++) {
            const uint8_t *cl = cols + m * KC;
            const bv8d cv = ld8d(c + 8 * m);
            bv8l Ev = exps8(cv, -126, p->e_zero);
            bv8l sum = {0};
            if (p->grouped) {
                /* groups of 16: exact sums times both scales, aligned at the scale exponents
                 * (e_zero where every product is zero or a scale is) */
                bv8d terms[8];
                const int G = KC / 16;
                for (int g = 0; g < G; g++) {
                    bv8d s0 = {0}, s1 = {0};
                    unsigned nz = 0;
                    if (!p->meta) { /* dense: rows in order; non-zero products from bit masks */
                        for (int k = 16 * g; k < 16 * g + 16; k += 2) {
                            s0 += a[m * KC + k] * ld8d(b + 8 * k);
                            s1 += a[m * KC + k + 1] * ld8d(b + 8 * (k + 1));
                        }
                        const unsigned am = amask[g * M + m];
                        for (int n = 0; n < 8; n++) nz |= (unsigned)((am & bmask[g * 8 + n]) != 0) << n;
                    } else {
                        for (int k = 16 * g; k < 16 * g + 16; k += 2) {
                            const int k0 = cl[k], k1 = cl[k + 1];
                            const double x0 = a[m * KC + k], x1 = a[m * KC + k + 1];
                            s0 += x0 * ld8d(b + 8 * k0);
                            s1 += x1 * ld8d(b + 8 * k1);
                            nz |= (bnz[k0] & -(unsigned)(x0 != 0)) | (bnz[k1] & -(unsigned)(x1 != 0));
                        }
                    }
                    const int v = (16 * g) / chunk;
                    const bv8d scale = sfa[v * M + m] * ld8d(sfb + 8 * v);
                    terms[g] = (s0 + s1) * scale;
                    bv8l eg = esa[v * M + m] + ld8l(esb + 8 * v);
                    const bv8l lane = {1, 2, 4, 8, 16, 32, 64, 128};
                    const bv8l zero = ((lane & (int64_t)nz) == 0) | (scale == 0);
                    Ev = vmaxl(Ev, vsel(zero, (bv8l){0} + p->e_zero, eg));
                }
                const bv8d sc = pow2v(F - Ev);
                for (int g = 0; g < G; g++) sum += trunc8(terms[g] * sc);
            } else {
                /* one fused step over every k: products at e_a + e_b (scales included), zero
                 * products at e_zero */
                /* zero products (a factor's exponent BS_ZEXP) stay far below; any of them
                 * brings in e_zero */
                bv8l t0 = (bv8l){0} + 2 * BS_ZEXP, t1 = t0;
                unsigned zn = 0;
                int k = 0;
                for (; k + 1 < KC; k += 2) {
                    t0 = vmaxl(t0, ea2[m * KC + k] + ld8l(eb2 + 8 * cl[k]));
                    t1 = vmaxl(t1, ea2[m * KC + k + 1] + ld8l(eb2 + 8 * cl[k + 1]));
                }
                if (k < KC) t0 = vmaxl(t0, ea2[m * KC + k] + ld8l(eb2 + 8 * cl[k]));
                if (p->meta) {
                    for (k = 0; k < KC; k++) zn |= bzero[cl[k]] | -(unsigned)(ea2[m * KC + k] == BS_ZEXP);
                } else {
                    zn = bzall | -(unsigned)(azero[m] != 0);
                }
                const bv8l lane = {1, 2, 4, 8, 16, 32, 64, 128};
                Ev = vmaxl(Ev, vmaxl(t0, t1));
                Ev = vsel((lane & (int64_t)zn) != 0, vmaxl(Ev, (bv8l){0} + p->e_zero), Ev);
                const bv8d sc = pow2v(F - Ev);
                bv8l s1 = {0};
                for (k = 0; k + 1 < KC; k += 2) {
                    sum += trunc8((as[m * KC + k] * ld8d(bs + 8 * cl[k])) * sc);
                    s1 += trunc8((as[m * KC + k + 1] * ld8d(bs + 8 * cl[k + 1])) * sc);
                }
                if (k < KC) sum += trunc8((as[m * KC + k] * ld8d(bs + 8 * cl[k])) * sc);
                sum += s1;
            }
            sum += trunc8(cv * pow2v(F - Ev));
            const bv8d valv = __builtin_convertvector(sum, bv8d) * pow2v(Ev - F);
            double val[8];
            memcpy(val, &valv, sizeof val);
            if (nonfinite) { /* NaN and Inf: special_values(a * sa, b * sb, c) */
                for (int n = 0; n < 8; n++) {
                    const double c0 = craw[m * 8 + n];
                    int nan = c0 != c0, pos = c0 == INFINITY, neg = c0 == -INFINITY;
                    for (int k = 0; k < KC; k++) {
                        const int kb = cl[k];
                        const double x = araw[m * KC + k] * sav[(k / chunk) * M + m];
                        const double y = braw[kb * 8 + n] * sbv[(kb / bchunk) * 8 + n];
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
            const bv8l au = (bv8l)ld8d(val) & 0x7FFFFFFFFFFFFFFFll;
            const bv8l normal = ((au >= 0x3810000000000000ll) & (au < 0x47F0000000000000ll)) | (au == 0);
            int all = 1;
            for (int n = 0; n < 8; n++) all &= normal[n] != 0;
            if (all) { /* binary32's normal range or zero: toward zero clears the low 29 bits */
                typedef float bv8f __attribute__((vector_size(32)));
                typedef uint32_t bv8u __attribute__((vector_size(32)));
                const bv8u bits = (bv8u)__builtin_convertvector((bv8d)((bv8l)ld8d(val) & (int64_t)0xFFFFFFFFE0000000ull) + 0.0, bv8f);
                for (int n = 0; n < 8; n++) pd[od[m * 8 + n]] = bits[n];
            } else {
                for (int n = 0; n < 8; n++) pd[od[m * 8 + n]] = rz_f32_bits(val[n]);
            }
        }
    }
    restore_env(env);
    return 0;
}

/* mma.sp metadata: whether every nibble the selector reads (lane * 8 + nibble, `nidx` of them)
 * of each of n warps (words w * s_warp + lane * s_lane) is one of the `valid` values (bit v) */
int warpsim_meta_ok(const uint32_t *words, int64_t s_warp, int64_t s_lane, int64_t n, const int32_t *idx,
                    int32_t nidx, uint32_t valid) {
    for (int64_t w = 0; w < n; w++) {
        const uint32_t *p = words + w * s_warp;
        for (int i = 0; i < nidx; i++) {
            const int g = idx[i];
            if (!((valid >> ((p[(g >> 3) * s_lane] >> (4 * (g & 7))) & 0xF)) & 1)) return 0;
        }
    }
    return 1;
}
