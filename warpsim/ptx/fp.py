"""Floating-point bit patterns: decoding, exact rounding in every IEEE mode, flushing.

The ALU works on float64 *carriers*: every f16, bf16 and f32 value is exact in float64, the
product of two of them is exact, and a sum, quotient or square root is computed rounded to
odd at 53 bits (exact where representable, else the neighbour with an odd last bit).  Rounding
such a carrier once more to a format of at most 24 significant bits, in any IEEE mode, gives
the correctly rounded result of the exact operation (53 >= 24 + 2), subnormals included.
binary64 results use exact error terms instead (:mod:`warpsim.tensorcore.engine`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from warpsim.tensorcore.engine import two_prod  # Dekker's exact product, shared with the mma engine
from warpsim.ptx.bits import UINT


@dataclass(frozen=True)
class FFormat:
    """An IEEE binary format: width, exponent and fraction bits, its canonical NaN on NVIDIA."""

    name: str
    bits: int
    ebits: int
    mbits: int
    nan: int  # the canonical NaN the ALU writes

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def max_finite(self) -> float:
        return math.ldexp(2.0 - 2.0 ** -self.mbits, self.bias)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def dtype(self):
        return UINT[self.bits]

    @property
    def sign(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def expmask(self) -> int:
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def one(self) -> int:
        return self.bias << self.mbits


F16 = FFormat("f16", 16, 5, 10, 0x7FFF)
BF16 = FFormat("bf16", 16, 8, 7, 0x7FFF)
F32 = FFormat("f32", 32, 8, 23, 0x7FFFFFFF)
F64 = FFormat("f64", 64, 11, 52, 0x7FFFFFFFFFFFFFFF)
FORMATS = {f.name: f for f in (F16, BF16, F32, F64)}
RNDS = ("rn", "rz", "rm", "rp")


def u64(x) -> np.ndarray:
    return np.asarray(x).astype(np.uint64)


def is_nan(b: np.ndarray, f: FFormat) -> np.ndarray:
    b = u64(b)
    return ((b & np.uint64(f.expmask)) == np.uint64(f.expmask)) & \
        ((b & np.uint64((1 << f.mbits) - 1)) != 0)


def is_sub(b: np.ndarray, f: FFormat) -> np.ndarray:
    """Subnormal (non-zero with a zero exponent field)."""
    b = u64(b)
    return ((b & np.uint64(f.expmask)) == 0) & ((b & np.uint64((1 << f.mbits) - 1)) != 0)


def flush(b: np.ndarray, f: FFormat) -> np.ndarray:
    """Subnormals -> zero of the same sign (``.ftz`` on an input or result)."""
    b = np.asarray(b)
    return np.where(is_sub(b, f), b & f.dtype(f.sign), b).astype(f.dtype)


def decode(b: np.ndarray, f: FFormat) -> np.ndarray:
    """Bit patterns -> float64 values (exact; NaN payloads are not kept)."""
    b = np.asarray(b).astype(f.dtype)
    with np.errstate(invalid="ignore"):
        if f is F64:
            return b.view(np.float64).copy()
        if f is F32:
            return b.view(np.float32).astype(np.float64)
        if f is F16:
            return b.view(np.float16).astype(np.float64)
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def values(b: np.ndarray, f: FFormat) -> np.ndarray:
    """Bit patterns -> values in a NumPy float type that holds them exactly, without copying
    where it can (float16/float32/float64 views; bf16 widened to float32).  For comparisons."""
    b = np.asarray(b).astype(f.dtype, copy=False)
    if f is BF16:
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return b.view({16: np.float16, 32: np.float32, 64: np.float64}[f.bits])


def round_to(x: np.ndarray, f: FFormat, rnd: str = "rn", ftz: bool = False) -> np.ndarray:
    """Round float64 carriers (exact, or rounded to odd at 53 bits) to format ``f``.

    ``rnd``: 'rn' (ties to even), 'rz', 'rm', 'rp'.  Overflow follows IEEE: to Inf, or to the
    largest finite value where the mode rounds toward zero.  NaN -> the canonical NaN.
    ``ftz``: a result that is tiny *after rounding* (rounded to the format's precision with an
    unbounded exponent, it is below the smallest normal) becomes a zero of its sign, the
    H100's rule.  Returns bit patterns (dtype of the format).

    f32/f16: NumPy's float64 -> float32/float16 casts round to nearest even correctly
    (subnormals, overflow included); a directed mode then moves the result one step where it
    lies on the wrong side of the carrier.  bf16: the carrier is first rounded to odd at 24 bits
    (a float32), then rounded on its bit pattern.
    """
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)
    if f is F64:
        return np.where(nan, np.uint64(f.nan), x.view(np.uint64))
    with np.errstate(over="ignore", invalid="ignore"):
        out = _round_bf16(x, rnd) if f is BF16 else _round_native(x, f, rnd)
        if ftz:
            tiny = (np.abs(x) < f.min_normal) & (x != 0)
            if tiny.any():  # round again, scaled into the normal range: tiny after rounding?
                k = 2.0**24 if f is F16 else 2.0**64
                scaled = _round_bf16(x * k, rnd) if f is BF16 else _round_native(x * k, f, rnd)
                after = np.abs(decode(scaled, f)) < f.min_normal * k
                zero = np.where(np.signbit(x), f.dtype(f.sign), f.dtype(0))
                out = np.where(tiny & after, zero, out)
    if nan.any():
        out = np.where(nan, f.dtype(f.nan), out)
    return out.astype(f.dtype, copy=False)


_NATIVE = {"f32": np.float32, "f16": np.float16}


def _round_native(x: np.ndarray, f: FFormat, rnd: str) -> np.ndarray:
    dt = _NATIVE[f.name]
    r = x.astype(dt)
    if rnd != "rn":
        r64 = r.astype(np.float64)
        if rnd == "rz":
            move, to = np.abs(r64) > np.abs(x), 0.0
        elif rnd == "rm":
            move, to = r64 > x, -np.inf
        else:
            move, to = r64 < x, np.inf
        if move.any():
            r = np.where(move, np.nextafter(r, dt(to)), r)
    return r.view(f.dtype)


def _round_bf16(x: np.ndarray, rnd: str) -> np.ndarray:
    r = x.astype(np.float32)
    r64 = r.astype(np.float64)
    u = r.view(np.uint32)
    inexact = (r64 != x) & np.isfinite(x)
    if inexact.any():  # round to odd at 24 bits: truncate, then set the last bit
        down = inexact & (np.abs(r64) > np.abs(x))
        u = np.where(down, u - np.uint32(1), u) | inexact.astype(np.uint32)
    sign = u & np.uint32(0x80000000)
    mag = u & np.uint32(0x7FFFFFFF)
    neg = sign != 0
    if rnd == "rn":
        mag = mag + np.uint32(0x7FFF) + ((mag >> np.uint32(16)) & np.uint32(1))
    elif rnd == "rm":
        mag = mag + np.where(neg, np.uint32(0xFFFF), np.uint32(0))
    elif rnd == "rp":
        mag = mag + np.where(neg, np.uint32(0), np.uint32(0xFFFF))
    mag = np.minimum(mag, np.uint32(0x7F800000)) if rnd != "rz" else mag
    return ((sign | mag) >> np.uint32(16)).astype(np.uint16)


def encode_exact(r: np.ndarray, f: FFormat) -> np.ndarray:
    """float64 values representable in ``f`` (or +-Inf) -> bit patterns."""
    with np.errstate(over="ignore", invalid="ignore"):
        if f is F64:
            return np.asarray(r, np.float64).view(np.uint64)
        if f is F32:
            return np.asarray(r).astype(np.float32).view(np.uint32)
        if f is F16:
            return np.asarray(r).astype(np.float16).view(np.uint16)
        return (np.asarray(r).astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


# ---------------------------------------------------------------------------------------------
# Round-to-odd carriers
# ---------------------------------------------------------------------------------------------

def to_odd(q: np.ndarray, err_sign: np.ndarray) -> np.ndarray:
    """A binary64 rounding ``q`` of a value whose error sign (true - q) is ``err_sign``,
    moved to the rounded-to-odd result."""
    q = np.asarray(q, np.float64)
    bits = q.view(np.int64)
    need = (err_sign != 0) & ((bits & 1) == 0) & np.isfinite(q)
    if need.any():
        # one step on the magnitude's bit pattern: away from zero where the error has the
        # sign of q, toward zero otherwise (q is never 0 when the error is not)
        step = np.where((err_sign > 0) == (q > 0), 1, -1) * need
        q = (bits + step).view(np.float64)
    return q


def ro_sum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y rounded to odd (binary64); exact zero sums follow IEEE RN signs."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    return to_odd(s, np.where(np.isfinite(err), np.sign(err), 0))


def ro_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b rounded to odd, for operands of at most 24 significant bits in the f32 range."""
    q = a / b
    ok = np.isfinite(q) & (q != 0)
    qs = np.where(ok, q, 1.0)
    bs = np.where(ok, b, 1.0)
    as_ = np.where(ok, a, 1.0)
    p, e = two_prod(qs, bs)
    res = (as_ - p) - e  # exact: a - p is exact (Sterbenz), e is tiny
    return to_odd(q, np.where(ok, np.sign(res) * np.sign(bs), 0))


def ro_sqrt(a: np.ndarray) -> np.ndarray:
    """sqrt(a) rounded to odd, for a of at most 24 significant bits in the f32 range."""
    with np.errstate(invalid="ignore"):
        s = np.sqrt(a)
    ok = np.isfinite(s) & (s > 0)
    ss = np.where(ok, s, 1.0)
    p, e = two_prod(ss, ss)
    res = (np.where(ok, a, 1.0) - p) - e
    return to_odd(s, np.where(ok, np.sign(res), 0))
