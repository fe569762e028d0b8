"""The arithmetic engine: exact-value building blocks that the per-architecture models compose.

All routines work on arrays holding *exact* element values (every mma input type fits float64
exactly; narrow types also float32).  :func:`fma_chain`, :func:`exact_dot_add` and
:func:`round_to` take matrices (..., M, K) for A, (..., K, N) for B and (..., M, N) for C/D,
broadcasting over leading batch dimensions; the fused step takes batch-last arrays (see
"The fused dot-product step" below: A (K, M, n), B (K, N, n), C/D (M, N, n)).

- :func:`truncated_dot_add`: one step of a tensor core's fused dot-product-add: exact products,
  alignment to the largest exponent with truncation to ``F`` fraction bits, an exact sum, one
  final rounding.  Parameters come from :mod:`warpsim.tensorcore.numerics`.
- :func:`fma_chain`: d = c; d = fma(a_k, b_k, d) for k in order, IEEE binary64 in the
  instruction's rounding mode, with the NaN payloads the H100 propagates.
- :func:`exact_dot_add`: the mathematical reference: exact sum, one rounding (to nearest even;
  f64 also directed), IEEE special values.
- :func:`round_to`: rounding of exact float64 values to f32 / f16 with RN, RZ or a truncated
  fraction width.
"""

from __future__ import annotations

import math
import sys

import numpy as np

_LITTLE = sys.byteorder == "little"
#: Exponent of a zero operand (float64 values, int16): sums of two stay far below any real sum.
ZERO_EXP = -10000

# --------------------------------------------------------------------------------------------
# Rounding exact float64 values to narrower formats
# --------------------------------------------------------------------------------------------

_OUT = {
    # name: (numpy dtype, max finite, 2**(emax+1), fraction bits)
    "f32": (np.float32, float(np.finfo(np.float32).max), 2.0**128, 23),
    "f16": (np.float16, 65504.0, 2.0**16, 10),
}


def round_to(x: np.ndarray, out: str, rounding: str, frac_bits: int | None = None) -> np.ndarray:
    """Round exact float64 values to format ``out`` ('f32' | 'f16'); returns float64 values.

    ``rounding``: 'rn' (nearest even) or 'rz' (toward zero).  Under 'rz' a magnitude at or
    above 2**(emax+1) still becomes Inf (the tensor-core behaviour); below it, it clamps to the
    largest finite value.  ``frac_bits`` further truncates the fraction (toward zero).
    NaN and Inf pass through.
    """
    dt, maxf, big, fb = _OUT[out]
    if rounding == "rz" and out == "f32" and frac_bits is None:
        return _rz_f32(x)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(dt)
        if rounding == "rz":
            ax = np.abs(x)
            over = np.abs(r.astype(np.float64)) > ax
            if over.any():
                r = np.where(over, np.nextafter(r, dt(0)), r)
            r = np.where(ax >= big, np.copysign(dt(np.inf), x).astype(dt), r)
        elif rounding != "rn":
            raise ValueError(f"unknown rounding {rounding!r}")
        if frac_bits is not None and frac_bits < fb:
            ui = {np.float32: np.uint32, np.float16: np.uint16}[dt]
            bits = r.view(ui)
            mask = ui(~((1 << (fb - frac_bits)) - 1) & ((1 << (8 * np.dtype(ui).itemsize)) - 1))
            finite = np.isfinite(r)
            r = np.where(finite, (bits & mask).view(dt), r)
    return r.astype(np.float64)


def _rz_f32(x: np.ndarray) -> np.ndarray:
    """Round float64 values toward zero to binary32 (Inf from 2**128 up); float64 result.

    Normal binary32 range: clear the 29 low fraction bits of the binary64 pattern.  Values below
    2**-126 (binary32 subnormals) take the general path.
    """
    ax = np.abs(x)
    r = (x.view(np.uint64) & np.uint64(0xFFFFFFFFE0000000)).view(np.float64)
    r = np.where(ax >= 2.0**128, np.copysign(np.inf, x), r)
    tiny = (ax < 2.0**-126) & (x != 0)
    if tiny.any():
        with np.errstate(over="ignore", invalid="ignore"):
            t = x.astype(np.float32)
            t = np.where(np.abs(t.astype(np.float64)) > ax, np.nextafter(t, np.float32(0)), t)
        r = np.where(tiny, t.astype(np.float64), r)
    return np.where(np.isnan(x), x, r)


def round_odd_sum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y rounded to float64 with round-to-odd (exact when representable).

    Rounding to odd in binary64 followed by round-to-nearest to a format of at most 51
    fraction bits equals a single correct rounding of the exact sum.
    """
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)  # TwoSum: x + y == s + err exactly
    need = (err != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    if need.any():
        s = np.where(need, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


# --------------------------------------------------------------------------------------------
# The fused dot-product step, on batch-last arrays
# --------------------------------------------------------------------------------------------
#
# The step functions below take the batch as the *last* axis: a (K, M, n), b (K, N, n),
# c (M, N, n), where n is the flattened batch of warps.  Every large operation is then an
# elementwise NumPy loop over n contiguous values (the (K, M, N, n) product tensor included),
# and sums and maxima over k run over the first axis; :func:`to_batch_last` and
# :func:`from_batch_last` convert from and to the matrix layout (..., M, K).


def to_batch_last(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, dtype=np.float64,
                  batch: tuple | None = None):
    """New arrays holding a (..., M, K), b (..., K, N), c (..., M, N) as (K, M, n), (K, N, n) and
    (M, N, n) with the broadcast batch flattened last (c may be None); also returns the batch
    shape (``batch``: broadcast to that one).  a and b become ``dtype`` (float32 for narrow
    operands), c float64."""
    m, k = a.shape[-2:]
    nn = b.shape[-1]
    if batch is None:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2],
                                    () if c is None else np.shape(c)[:-2])
    n = int(np.prod(batch, dtype=np.int64))
    a = np.broadcast_to(a, batch + (m, k)).reshape(n, m, k)
    b = np.broadcast_to(b, batch + (k, nn)).reshape(n, k, nn)
    if c is not None:  # always fresh arrays (a one-warp transpose may be a view of the input)
        c = np.broadcast_to(c, batch + (m, nn)).reshape(n, m, nn)
        c = np.array(c.transpose(1, 2, 0), dtype=np.float64, order="C")
    return (np.array(a.transpose(2, 1, 0), dtype=dtype, order="C"),
            np.array(b.transpose(1, 2, 0), dtype=dtype, order="C"), c, batch)


def from_batch_last(d: np.ndarray, batch: tuple) -> np.ndarray:
    """(M, N, n) -> (*batch, M, N)."""
    return np.moveaxis(d, -1, 0).reshape(batch + d.shape[:2])


def exponents(x: np.ndarray, emin: int, zero: int | None = None) -> np.ndarray:
    """max(floor(log2|x|), emin) for non-zero finite x; a large negative sentinel for zeros
    (or ``zero``).

    x holds decoded element values: normal numbers or zero, so the exponent is read from a
    table of the top 16 bits of each value.  float64 x: int16, zeros :data:`ZERO_EXP`.
    float32 x holds narrow operands (:data:`warpsim.tensorcore.numerics.NARROW`: |x| >= 2**-24 or zero,
    below 2**16): int8, zeros :data:`ZERO_EXP8`.
    """
    return np.take(_exp_table(emin, 8 if x.dtype == np.float32 else 11, zero), _top16(x))


def _top16(x: np.ndarray) -> np.ndarray:
    """The 16 most significant bits of each float32/float64 value."""
    w = x.dtype.itemsize // 2
    if _LITTLE and x.flags.c_contiguous and x.ndim:
        return x.view(np.uint16)[..., w - 1::w]
    return x.view(np.uint32 if w == 2 else np.uint64) >> (16 if w == 2 else np.uint64(48))


#: Exponent of a zero narrow operand (float32 values, int8): sums of two stay below -40, every
#: real sum above.
ZERO_EXP8 = -60
_EXP_TABLES: dict[tuple, np.ndarray] = {}


def _exp_table(emin: int, ebits: int, zero: int | None = None) -> np.ndarray:
    """Clamped exponent for every top-16-bit pattern (sign, ``ebits`` exponent bits, the rest
    fraction) of float32 (ebits 8: int8) or float64 (ebits 11: int16) values; zeros take
    ``zero`` (default: the sentinel)."""
    t = _EXP_TABLES.get((emin, ebits, zero))
    if t is None:
        top = np.arange(1 << 16, dtype=np.int32)
        fb = 15 - ebits
        bias = (1 << (ebits - 1)) - 1
        e = np.maximum(((top >> fb) & ((1 << ebits) - 1)) - bias, emin)
        if ebits == 8:
            z = ZERO_EXP8 if zero is None else zero
            t = np.where((top & 0x7FFF) == 0, z, np.clip(e, -30, 30)).astype(np.int8)
        else:
            t = np.where((top & 0x7FFF) == 0, ZERO_EXP if zero is None else zero, e).astype(np.int16)
        t.flags.writeable = False
        _EXP_TABLES[(emin, ebits, zero)] = t
    return t


def _per_row(b: np.ndarray) -> np.ndarray:
    """B as (K, 1, N, n), or unchanged when it already has a row axis: (K, M, N, n)."""
    return b[:, None] if b.ndim == 3 else b


def special_values(a: np.ndarray, b: np.ndarray, c: np.ndarray | None):
    """Resolve NaN/Inf for round(c + sum a*b) on batch-last arrays a (K, M, n), b (K, N, n)
    or, one B per row of A (sparse mma), (K, M, N, n), and c (M, N, n).

    Returns (special, value): a boolean mask (M, N, n) of outputs decided by special values
    and their value (NaN, +Inf or -Inf); ``value`` is None when every input is finite.
    Products with a NaN factor or Inf * 0 are NaN; an Inf sum of opposite signs is NaN.
    """
    fa, fb = np.isfinite(a), np.isfinite(b)
    if fa.all() and fb.all() and (c is None or np.isfinite(c).all()):
        return None, None
    ai, bi = np.isinf(a)[:, :, None], _per_row(np.isinf(b))
    an, bn = np.isnan(a)[:, :, None], _per_row(np.isnan(b))
    az, bz = (a == 0)[:, :, None], _per_row(b == 0)
    sign = np.signbit(a)[:, :, None] ^ _per_row(np.signbit(b))
    pnan = an | bn | (ai & bz) | (az & bi)
    pinf = (ai | bi) & ~pnan
    pos = (pinf & ~sign).any(0)
    neg = (pinf & sign).any(0)
    nan = pnan.any(0)
    if c is not None:
        nan = nan | np.isnan(c)
        pos = pos | (np.isposinf(c))
        neg = neg | (np.isneginf(c))
    nan = nan | (pos & neg)
    special = nan | pos | neg
    value = np.where(nan, np.nan, np.where(pos, np.inf, -np.inf))
    return special, value


def truncated_dot_add(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    *,
    emin_a: int,
    emin_b: int,
    emin_c: int,
    F: int,
    e_zero: int,
    out: str,
    rounding: str,
    frac_bits: int | None = None,
    exp_a: np.ndarray | None = None,
    exp_b: np.ndarray | None = None,
    short: bool = False,
    eb: np.ndarray | None = None,
) -> np.ndarray:
    """One fused step: round(c + sum_k a[k,m] * b[k,n]) with the tensor-core alignment rule.

    Batch-last arrays: a (K, M, n), b (K, N, n) or one B per row of A (K, M, N, n), c (M, N, n),
    finite (specials are resolved by the caller with :func:`special_values`).  Every product keeps its exact significand and
    the unnormalised exponent e_a + e_b (each factor's exponent clamped at its format's
    ``emin``); zero products count as exponent ``e_zero``.  With E the largest exponent among
    the terms (c included), each term is truncated toward zero to a multiple of 2**(E - F);
    the truncated terms are summed exactly and the sum is rounded once to ``out`` with
    ``rounding``; a zero result is +0.
    float32 a and b: narrow operands (at most 11 significant bits within f16's range), whose
    products are exact in float32.  ``exp_a`` / ``exp_b`` (shaped like a / b), optional: extra
    power-of-two exponents of each factor (block scaling), added after the emin clamp.
    ``short``: float64 a and b hold values of at most 12 significant bits (bf16, tf32) over a
    wide exponent range; the products are then formed in float32 after scaling each row of A
    and column of B by its largest power of two, wherever that keeps every product that can
    survive truncation exact (otherwise in float64).
    ``eb``: B's exponents as :func:`exponents` gives them, when the caller has them.
    """
    ea = exponents(a, emin_a)
    if eb is None:
        eb = exponents(b, emin_b)
    if exp_a is not None:
        ea += exp_a.astype(np.int16)
        eb += exp_b.astype(np.int16)
        a = np.ldexp(a, exp_a)
        b = np.ldexp(b, exp_b)
    terms = ea[:, :, None] + _per_row(eb)  # (K, M, N, n); a zero factor leaves it below `zero`
    zero = -40 if terms.dtype == np.int8 else -5000
    if emin_a + emin_b < e_zero or emin_c < e_zero or exp_a is not None:
        # a zero product's exponent e_zero can exceed every real term's
        if not -128 <= e_zero < zero:
            terms = terms.astype(np.int16)
        terms[terms < zero] = e_zero
    emax = terms.max(axis=0)
    ec = exponents(c, emin_c, e_zero)
    if zero == -40 and int(ec.min()) < zero:
        # an int8 maximum below -40 means every product is zero: no exponent at all, which
        # matters where c's exponent is below that too
        emax = np.where(emax < zero, np.int16(ZERO_EXP), emax.astype(np.int16))
    E = np.maximum(emax, ec)
    off = None
    if short and exp_a is None and a.dtype == np.float64 and E.size:
        # |a / 2**ra| < 2 and |b / 2**rb| < 2.  A product that survives truncation is at least
        # 2**(E - F); scaled, at least 2**(E - F - ra - rb).  Where that is >= 2**-100 for every
        # output, both of its factors are normal float32 numbers and the product is exact; the
        # products that underflow or round lie far below the quantum and truncate to 0.
        ra = np.maximum(ea.max(axis=0), -1000).astype(np.int32)  # (M, n); zero rows clamp
        rb = np.maximum(eb.max(axis=0), -1000).astype(np.int32)  # (N, n) or (M, N, n)
        off = ra[:, None] + (rb if b.ndim == 4 else rb[None])
        if int((E - off).min()) - F >= -100:
            with np.errstate(under="ignore"):
                a = (a * pow2(-ra)).astype(np.float32)
                b = (b * pow2(-rb)).astype(np.float32)
        else:
            off = None
    p = a[:, :, None] * _per_row(b)
    return _truncated_sum(p, E, c, F=F, out=out, rounding=rounding, frac_bits=frac_bits, off=off)


def pow2(x: np.ndarray, dtype=np.float64) -> np.ndarray:
    """2.0**x for integer x within the normal exponent range of ``dtype`` (float64: -1022..1023,
    float32: -126..127), built from the exponent bits (np.ldexp is several times slower)."""
    if dtype == np.float32:
        return ((x.astype(np.int32) + 127) << 23).view(np.float32)
    return ((x.astype(np.int64) + 1023) << 52).view(np.float64)


def truncated_sum(p, emax, c, *, emin_c, F, e_zero, out, rounding, frac_bits=None):
    """Align terms p (T, M, N, n) and c (M, N, n) to E = max(emax, exponent(c)), truncate
    each to a multiple of 2**(E - F), add exactly, round once.  ``emax`` (M, N, n) is the
    largest term exponent per output (zero terms already counted as ``e_zero``).  ``p`` may be
    overwritten.
    """
    return _truncated_sum(p, align_exponent(emax, c, emin_c, e_zero), c, F=F, out=out,
                          rounding=rounding, frac_bits=frac_bits)


def align_exponent(emax, c, emin_c, e_zero) -> np.ndarray:
    """E = max(emax, exponent of c) per output (int16); a zero c counts as ``e_zero``."""
    return np.maximum(emax, exponents(c, emin_c, e_zero))


def _truncated_sum(p, E, c, *, F, out, rounding, frac_bits, off=None):
    """:func:`truncated_sum` from the alignment exponent E; ``off`` (M, N, n): p holds the
    products divided by 2**off."""
    E = E.astype(np.int32)
    sh = F - E
    lo, hi = (int(E.min()), int(E.max())) if E.size else (0, 0)
    if p.dtype == np.float32:
        # terms are below 2**(F+2) after scaling; when every product is zero E may be tiny, and
        # any finite scale does: clamp so that float32 cannot overflow
        shp = sh if off is None else sh + off
        ok = off is None and F - hi >= -126 and F - lo <= 100
        scale = ((shp if ok else np.clip(shp, -126, 100)) + 127 << 23).view(np.float32)
    if p.dtype == np.float32 and p.shape[0] << (F + 2) <= 1 << 31:
        # float -> int conversion truncates toward zero, and the int32 sum cannot overflow
        q = np.empty(p.shape, np.int32)
        np.multiply(p, scale, out=q, casting="unsafe")
        s = np.add.reduce(q, axis=0, dtype=np.int32).astype(np.float64)  # never -0
    else:
        if p.dtype == np.float32:
            p *= scale
            s = np.add.reduce(np.trunc(p, out=p), axis=0, dtype=np.float64)
        else:
            p *= pow2(sh)
            s = np.add.reduce(np.trunc(p, out=p), axis=0)
        s += 0.0  # -0 -> +0
    e64 = E.astype(np.int64)
    s += np.trunc(c * (F + 1023 - e64 << 52).view(np.float64))
    val = s * (e64 + (1023 - F) << 52).view(np.float64)  # exact: |s| < 2**53
    # a zero result, exact or by underflow, is +0 whatever the signs (verified on the H100)
    if out == "f32" and rounding == "rz" and frac_bits is None:
        # |val| < (T + 1) * 2**(E + 2), and 2**(E - F) <= |val| unless val is 0: where that
        # stays inside binary32's normal range, rounding toward zero clears the low 29 bits
        if hi + 2 + (p.shape[0] + 1).bit_length() <= 128 and lo - F >= -126:
            return (val.view(np.uint64) & np.uint64(0xFFFFFFFFE0000000)).view(np.float64)
    return round_to(val, out, rounding, frac_bits) + 0.0


def finite_or_zero(x: np.ndarray) -> np.ndarray:
    """x with NaN/Inf replaced by 0 (so that arithmetic on the finite path stays finite)."""
    return np.where(np.isfinite(x), x, 0.0)


# --------------------------------------------------------------------------------------------
# Exact binary64 FMA and the f64 FMA chain
# --------------------------------------------------------------------------------------------

_SPLIT = 134217729.0  # 2**27 + 1


def two_prod(a: np.ndarray, b: np.ndarray):
    """a*b == p + e exactly (Dekker), valid without overflow/underflow of the pieces."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _round_fraction(exact, rounding: str) -> float:
    """A Fraction rounded to binary64 with 'rn', 'rz', 'rm' or 'rp' (overflow per IEEE)."""
    try:
        r = float(exact)  # Fraction -> float is correctly rounded (RN-even)
    except OverflowError:
        r = math.inf if exact > 0 else -math.inf
    if rounding == "rn" or exact == 0:
        return r
    from fractions import Fraction

    if math.isinf(r):
        big = float(np.finfo(np.float64).max)
        toward_zero = rounding == "rz" or (rounding == "rm") == (r > 0)
        return math.copysign(big, r) if toward_zero else r
    diff = exact - Fraction(r)  # sign of the rounding error
    if rounding == "rz" and diff != 0 and (diff > 0) != (r > 0 or (r == 0 and exact > 0)):
        return float(np.nextafter(r, 0.0)) if r != 0 else r
    if rounding == "rm" and diff < 0:
        return float(np.nextafter(r, -math.inf))
    if rounding == "rp" and diff > 0:
        return float(np.nextafter(r, math.inf))
    return r


def _fma_exact_slow(a: float, b: float, c: float, rounding: str = "rn") -> float:
    """Correctly rounded a*b + c for one element, by exact rational arithmetic."""
    from fractions import Fraction

    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c
    if not math.isfinite(c):
        return c  # a finite exact product never overflows inside an FMA
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        if a != 0 and b != 0:
            return -0.0 if rounding == "rm" else 0.0  # an exact cancellation
        pz = math.copysign(0.0, a) * math.copysign(1.0, b)
        return _zero_sum(pz, c, rounding)
    return _round_fraction(exact, rounding)


def _zero_sum(x: float, y: float, rounding: str) -> float:
    """x + y for two signed zeros (or a zero and any y) under IEEE rounding ``rounding``."""
    if x == 0 and y == 0:
        if math.copysign(1, x) == math.copysign(1, y):
            return x
        return -0.0 if rounding == "rm" else 0.0
    return x + y


def _two_sum(x, y):
    s = x + y
    bb = s - x
    return s, (x - (s - bb)) + (y - bb)


def _residual_sign(terms: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact sign of the sum of float64 ``terms`` (error-free distillation).

    Returns (sign, sure): sign in {-1, 0, 1}; ``sure`` False where the distilled expansion is
    not clearly dominated by its top term (the caller then uses exact arithmetic).
    """
    t = list(terms)
    n = len(t)
    for _ in range(n - 1):
        for i in range(n - 1):
            t[i + 1], t[i] = _two_sum(t[i], t[i + 1])
    top = t[-1]
    rest = sum(np.abs(x) for x in t[:-1])
    sign = np.sign(top)
    sure = (np.abs(top) > rest * (1 + 2.0**-50)) | ((top == 0) & (rest == 0))
    return sign, sure


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, rounding: str = "rn") -> np.ndarray:
    """Correctly rounded binary64 fused multiply-add, elementwise.

    ``rounding``: 'rn' (nearest even), 'rz', 'rm' or 'rp' (IEEE directed modes).  Fast path:
    Dekker's exact product and round-to-odd summation for RN, then the exact sign of the
    rounding error for directed modes; elements whose magnitudes make the error-free
    transformations inexact fall back to exact rational arithmetic.
    """
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                  np.asarray(c, np.float64))
    with np.errstate(all="ignore"):
        p, e = two_prod(a, b)
        # exact a*b + c = p + e + c.  s + t = p + c exactly (TwoSum)
        s = p + c
        bb = s - p
        t = (p - (s - bb)) + (c - bb)
        # v = RO(t + e); result = RN(s + v) (round-to-odd emulation of FMA)
        v = round_odd_sum(t, e)
        r = s + v
        _, ea = np.frexp(a)
        _, eb = np.frexp(b)
        _, ec = np.frexp(c)
        ep = ea + eb
        risky = (
            ~np.isfinite(r) | ~np.isfinite(p)
            | (ep < -1020 + 110) | (ep > 1000) | (ea > 995) | (eb > 995)
            | ((c != 0) & ((ec < -1020 + 110) | (ec > 1000)))
            | ((a != 0) & (b != 0) & (np.abs(r) < 2.0**-960))
        )
        if rounding != "rn":
            sign, sure = _residual_sign([p, e, c, -r])
            risky |= ~sure
            if rounding == "rz":
                step = sign * np.sign(r) < 0
                r = np.where(step, np.nextafter(r, 0.0), r)
            elif rounding == "rm":
                r = np.where(sign < 0, np.nextafter(r, -np.inf), r)
            elif rounding == "rp":
                r = np.where(sign > 0, np.nextafter(r, np.inf), r)
            else:
                raise ValueError(f"unknown rounding {rounding!r}")
            if rounding == "rm":  # exact cancellation and (+0) + (-0) give -0 toward -Inf
                r = np.where((r == 0) & (sign == 0) & ~((p == 0) & (c == 0) & ~np.signbit(p) & ~np.signbit(c)),
                             -0.0, r)
        zprod = (a == 0) | (b == 0)
        if zprod.any():
            pz = a * b
            zz = np.where((c == 0) & (np.signbit(pz) != np.signbit(c)),
                          -0.0 if rounding == "rm" else 0.0, pz + c)
            r = np.where(zprod, zz, r)
    finite_in = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    risky &= finite_in & (a != 0) & (b != 0)
    if risky.any():
        idx = np.nonzero(risky)
        r = r.copy()
        r[idx] = [_fma_exact_slow(x, y, z, rounding) for x, y, z in zip(a[idx], b[idx], c[idx])]
    nonfinite = ~finite_in
    if nonfinite.any():
        with np.errstate(all="ignore"):
            # finite a, b with infinite c: the exact product is finite, so the result is c
            special = np.where(np.isfinite(a) & np.isfinite(b), c, a * b + c)
        r = np.where(nonfinite, special, r)
    return r


_QUIET = np.uint64(1 << 51)
#: The NaN that binary64 tensor-core FMAs produce from invalid operations (Inf - Inf, 0 * Inf).
DEFAULT_NAN_F64 = np.uint64(0xFFF8000000000000)


def fma_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, rounding: str = "rn") -> np.ndarray:
    """d = c; d = fma(a[..., :, k], b[..., k, :], d) for k = 0..K-1 (binary64, ``rounding``).

    NaN results carry payloads the way the H100's DMMA does (verified on hardware): at each
    step a NaN operand propagates, quieted, with priority B, then the accumulator, then A; a NaN
    created by an invalid operation is 0xFFF8000000000000.
    """
    c = np.asarray(c, np.float64)
    c = np.broadcast_to(c, np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
                        + (a.shape[-2], b.shape[-1]))
    a, b, d, batch = to_batch_last(np.asarray(a, np.float64), np.asarray(b, np.float64), c)
    return from_batch_last(fma_chain_batch_last(a, b, d, rounding), batch)


def fma_chain_batch_last(a: np.ndarray, b: np.ndarray, d: np.ndarray, rounding: str = "rn") -> np.ndarray:
    """:func:`fma_chain` on batch-last arrays a (K, M, n), b (K, N, n), c (M, N, n) (float64);
    returns D (M, N, n).  ``d`` (C) may be overwritten."""
    dn = np.isnan(d)
    if dn.any():
        d[dn] = (d[dn].view(np.uint64) | _QUIET).view(np.float64)
    for k in range(a.shape[0]):  # K <= 16: a loop over k, vectorized over M x N x batch
        ak, bk = a[k][:, None], b[k][None]  # batch-last: (M, 1, n), (1, N, n)
        new = fma(ak, bk, d, rounding)
        nan = np.isnan(new)
        if nan.any():
            ab, bb = np.broadcast_arrays(ak, bk, d)[:2]
            bits = np.where(np.isnan(bb), bb.view(np.uint64) | _QUIET,
                   np.where(np.isnan(d), d.view(np.uint64),
                   np.where(np.isnan(ab), ab.view(np.uint64) | _QUIET, DEFAULT_NAN_F64)))
            new = np.where(nan, bits.view(np.float64), new)
        d = new
    return d


# --------------------------------------------------------------------------------------------
# Exact reference
# --------------------------------------------------------------------------------------------


def _distilled_round(terms: np.ndarray, out: str, rounding: str, slack=0.0):
    """Round the exact sum of float64 ``terms`` (..., n), vectorized; returns (value, sure).

    The terms are sorted by magnitude and distilled with error-free TwoSum passes; where the
    remainder below the top term is provably under half the gap to the next binary64 on its
    side, the top term is the sum
    rounded to nearest binary64 and the remainder's dominant term gives the sign of the
    rounding error.  From those: binary64 in any rounding mode, or (for narrower outputs) the
    round-to-odd binary64 value, which rounds to f32/f16 exactly once.  ``sure`` is False
    where the proof fails (the caller falls back to exact rational arithmetic).  ``slack``
    (broadcastable to the output) bounds how far the terms may be from the exact addends.
    """
    order = np.argsort(np.abs(terms), axis=-1)
    t = np.take_along_axis(terms, order, axis=-1).copy()
    n = t.shape[-1]
    with np.errstate(all="ignore"):
        for _ in range(3):
            for i in range(n - 1):
                x, y = t[..., i], t[..., i + 1]
                sm = x + y
                bb = sm - x
                t[..., i] = (x - (sm - bb)) + (y - bb)
                t[..., i + 1] = sm
        top = t[..., -1]
        rest = t[..., :-1]
        mag = np.abs(rest)
        bound = mag.sum(axis=-1)
        big = np.take_along_axis(rest, np.argmax(mag, axis=-1)[..., None], axis=-1)[..., 0]
        sign = np.sign(big)
        # top is the nearest binary64 to the sum when the remainder is under half the gap to
        # the neighbour on the remainder's side (the gap below a power of two is half as wide)
        gap = np.spacing(np.abs(top))
        pow2 = (top.view(np.int64) & ((1 << 52) - 1)) == 0
        gap = np.where(pow2 & (sign * np.sign(top) < 0), gap / 2, gap)
        sure = (np.isfinite(top) & (bound + slack < gap / 2)
                & ((np.abs(big) > (bound - np.abs(big) + slack) * (1 + 2.0**-40))
                   | ((bound == 0) & (slack == 0))))
        sure &= (top != 0) | (bound == 0)
        exact_zero = (top == 0) & (bound == 0) & (slack == 0)
        r = top
        if out != "f64":  # round to odd: a single later rounding to f32/f16 is then exact
            step = (sign != 0) & ((r.view(np.int64) & 1) == 0)
            r = np.where(step, np.nextafter(r, sign * np.inf), r)
        elif rounding == "rz":
            r = np.where(sign * np.sign(r) < 0, np.nextafter(r, 0.0), r)
        elif rounding == "rm":
            r = np.where(sign < 0, np.nextafter(r, -np.inf), r)
        elif rounding == "rp":
            r = np.where(sign > 0, np.nextafter(r, np.inf), r)
    return r, sure, exact_zero


def exact_dot_add(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: str,
                  rounding: str = "rn") -> np.ndarray:
    """round(c + sum_k a*b) with the sum computed exactly; IEEE special values.

    ``out`` is 'f64', 'f32' or 'f16'; ``rounding`` 'rn' (nearest even) or, for f64 only, the
    directed modes 'rz', 'rm', 'rp' of the f64 mma forms.  The products are exact binary64
    numbers (f64 factors split exactly by Dekker's method); their exact sum is rounded by
    vectorized error-free distillation (:func:`_distilled_round`).  The rare elements whose
    rounding it cannot prove (exact ties, magnitudes at the edges of binary64) are summed
    exactly one by one (``math.fsum``, or rational arithmetic).
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    shape = np.broadcast_shapes(a.shape[:-1] + (b.shape[-1],), c.shape)
    aT, bT, cT, batch = to_batch_last(a, b, c)
    special, sval = special_values(aT, bT, cT)
    if special is not None:
        special, sval = from_batch_last(special, batch), from_batch_last(sval, batch)
    af, bf, cf = finite_or_zero(a), finite_or_zero(b), finite_or_zero(c)
    cb = np.broadcast_to(cf, shape)
    with np.errstate(all="ignore"):
        prod = af[..., :, None, :] * np.swapaxes(bf, -1, -2)[..., None, :, :]
        prod = np.broadcast_to(prod, shape + prod.shape[-1:])
        if out == "f64":
            # exact products of the mantissas (in [0.5, 1): Dekker's split is always exact),
            # every term of an output scaled by the same power of two 2**-E so that the largest
            # is near 1; terms that underflow in that scale, or results that land in the
            # subnormal or overflow range, are left to the exact fallback
            ma, ea = np.frexp(af)
            mb, eb = np.frexp(bf)
            mc, ec = np.frexp(cb)
            p, e = two_prod(ma[..., :, None, :], np.swapaxes(mb, -1, -2)[..., None, :, :])
            ep = ea[..., :, None, :] + np.swapaxes(eb, -1, -2)[..., None, :, :]
            ep = np.broadcast_to(np.where(p == 0, -100000, ep), prod.shape)
            E = np.maximum(ep.max(axis=-1), np.where(cb == 0, -100000, ec))
            E = np.where(E < -50000, 0, E)
            sh = ep - E[..., None]
            ps, es = np.ldexp(np.broadcast_to(p, prod.shape), sh), np.ldexp(np.broadcast_to(e, prod.shape), sh)
            cs = np.ldexp(mc, ec - E)
            # a term scaled into the subnormal range is rounded there: off by < 2**-1074 each
            tiny = 2.0**-1022
            inexact = ((np.abs(ps) < tiny) & (np.broadcast_to(p, prod.shape) != 0)).sum(axis=-1) + (
                (np.abs(es) < tiny) & (np.broadcast_to(e, prod.shape) != 0)).sum(axis=-1) + (
                (np.abs(cs) < tiny) & (cb != 0))
            slack = inexact * 2.0**-1074
            terms = np.concatenate([ps, es, cs[..., None]], axis=-1)
        else:
            terms = np.concatenate([prod, cb[..., None]], axis=-1)
            slack = 0.0
        unsafe = np.zeros(shape, bool)
    res, sure, exact_zero = _distilled_round(terms, out, rounding, slack)
    if out == "f64":
        scaled_exp = np.frexp(res)[1] + E  # |sum| lies in [2**(scaled_exp - 2), 2**scaled_exp]
        with np.errstate(all="ignore"):
            res = np.ldexp(res, E)
            # far beyond the largest binary64 (|sum| >= 2**1025): the rounding is decided
            huge = scaled_exp >= 1027
            big = np.finfo(np.float64).max
            pos = res > 0
            away = {"rn": np.ones_like(pos), "rz": np.zeros_like(pos), "rm": ~pos, "rp": pos}[rounding]
            res = np.where(huge, np.where(away, np.copysign(np.inf, res), np.copysign(big, res)), res)
        # elsewhere the scaled rounding is exact only while the result stays normal and finite
        unsafe = unsafe | (~huge & (~np.isfinite(res) | ((np.abs(res) < 2.0**-1021) & ~exact_zero)
                                    | (np.abs(res) >= 2.0**1023)))
    todo = ~sure | unsafe
    if todo.any():
        res = res.copy()
        exact_zero = exact_zero.copy()
        idx = np.nonzero(todo)
        if out == "f64":
            from fractions import Fraction

            arows = np.broadcast_to(af[..., :, None, :], prod.shape)[idx]
            bcols = np.broadcast_to(np.swapaxes(bf, -1, -2)[..., None, :, :], prod.shape)[idx]
            for j, (ar, bc, cv) in enumerate(zip(arows, bcols, cb[idx])):
                tot = Fraction(cv) + sum(Fraction(x) * Fraction(y) for x, y in zip(ar, bc))
                at = tuple(i[j] for i in idx)
                res[at] = _round_fraction(tot, rounding) if tot != 0 else 0.0
                exact_zero[at] = tot == 0
        else:
            for j, row in enumerate(terms[idx]):
                r = math.fsum(row)
                if r != 0 and math.isfinite(r):
                    rest = math.fsum(np.append(row, -r))
                    if rest != 0 and (np.float64(r).view(np.int64) & 1) == 0:
                        r = float(np.nextafter(r, math.copysign(math.inf, rest)))
                at = tuple(i[j] for i in idx)
                res[at] = r
                exact_zero[at] = r == 0  # fsum rounds correctly: 0 only for an exact zero here
    # signed zeros (IEEE): an exact zero sum is -0 when every addend is -0; toward -Inf also
    # when the zero addends have mixed signs or non-zero addends cancel exactly.  (A non-zero
    # sum that underflows keeps its sign from the rounding.)
    zero = (res == 0) & exact_zero
    if zero.any():
        pzero = prod == 0
        negz = np.signbit(prod) & pzero
        allzero = pzero.all(axis=-1) & (cb == 0)
        allneg = negz.all(axis=-1) & np.signbit(cb) & (cb == 0)
        anyneg = negz.any(axis=-1) | (np.signbit(cb) & (cb == 0))
        neg = allneg | ((rounding == "rm") & (anyneg | ~allzero))
        res = np.where(zero, np.where(neg, -0.0, 0.0), res)
    if out != "f64":
        res = round_to(res, out, "rn")
    return res if special is None else np.where(special, sval, res)
