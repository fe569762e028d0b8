"""Every PTX element format that ``mma.sync`` reads or writes, decoded and encoded exactly.

A :class:`Format` describes one element type (``'f16'``, ``'e4m3'``, ``'s8'``, ...).  The
functions below move between *bit patterns* (non-negative integers below ``2**fmt.bits``, held
in ``fmt.storage_dtype``) and *values* (float64 for float formats, int64 for integer ones):

* :func:`decode` -- bits to values, exact (float64 holds every listed float format exactly;
  subnormals are kept).
* :func:`encode` -- values to bits, round-to-nearest-even, with the overflow rule of the format
  (IEEE overflow to Inf where the format has Inf, saturation to the largest finite value where
  it has not, like PTX ``cvt ... .satfinite``).  ``strict=True`` refuses any inexact value.
* :func:`decompose` -- bits to (sign, exponent, integer significand).
* :func:`is_nan`, :func:`is_inf`.

Implementation notes
--------------------
Decoding of the 16-bit-or-narrower formats goes through a lookup table built once per format
from numpy / ml_dtypes (``ue4m3`` reuses the e4m3 table on its low 7 bits).

Encoding does *not* use ml_dtypes' casts: in ml_dtypes 0.6 a float64 -> bfloat16/float8 cast
rounds twice (through float32), e4m3fn overflow and Inf give NaN instead of saturating, fp6/fp4
turn NaN into -0, and e8m0 rounds ties upward and maps 0 and out-of-range values to NaN.  A
single exact generic rounding routine (scale by a power of two, ``np.rint``, scale back) serves
every float format instead; it is checked exhaustively against brute force in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import ml_dtypes
import numpy as np

from warpsim.errors import FormatError

__all__ = [
    "Format",
    "FORMATS",
    "get_format",
    "decode",
    "encode",
    "decompose",
    "is_nan",
    "is_inf",
]


# --------------------------------------------------------------------------------------------
# The format table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """One PTX element type.  See the module docstring; fields mirror the PTX encoding."""

    name: str
    bits: int
    kind: str  # 'float' | 'int' | 'uint' | 'bits'
    exp_bits: int = 0
    man_bits: int = 0
    bias: int = 0
    signed: bool = True
    has_inf: bool = False
    has_nan: bool = False
    emin: int = 0
    max_finite: float = 0.0
    min_subnormal: float = 0.0
    storage_dtype: np.dtype = np.dtype(np.uint8)
    canonical_nan: int | None = None

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def min_value(self) -> float:
        """The most negative finite value (0 for unsigned formats)."""
        if self.kind == "float":
            return -self.max_finite if self.signed else 0.0
        if self.kind == "int":
            return float(-(1 << (self.bits - 1)))
        return 0.0


def _storage(bits: int) -> np.dtype:
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if bits <= np.dtype(dt).itemsize * 8:
            return np.dtype(dt)
    raise AssertionError(bits)


def _float(name, bits, e, m, *, signed=True, inf=True, nan=True, nan_code=None, maxf=None):
    bias = (1 << (e - 1)) - 1
    emin = 1 - bias
    if maxf is None:  # IEEE-like: top exponent code reserved for Inf/NaN
        maxf = math.ldexp(2.0 - 2.0 ** -m, (1 << e) - 2 - bias)
    if nan_code is None and nan:
        nan_code = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    return Format(
        name=name, bits=bits, kind="float", exp_bits=e, man_bits=m, bias=bias, signed=signed,
        has_inf=inf, has_nan=nan, emin=emin, max_finite=float(maxf),
        min_subnormal=math.ldexp(1.0, emin - m), storage_dtype=_storage(bits),
        canonical_nan=nan_code,
    )


def _int(name, bits, kind):
    if kind == "int":
        mx = (1 << (bits - 1)) - 1
    else:
        mx = (1 << bits) - 1
    return Format(
        name=name, bits=bits, kind=kind, signed=(kind == "int"), max_finite=float(mx),
        min_subnormal=1.0, storage_dtype=_storage(bits),
    )


_ALL = (
    _float("f64", 64, 11, 52),
    _float("f32", 32, 8, 23),
    # tf32: the f32 container, 10 explicit fraction bits (low 13 bits of the pattern ignored).
    Format(name="tf32", bits=32, kind="float", exp_bits=8, man_bits=10, bias=127, signed=True,
           has_inf=True, has_nan=True, emin=-126, max_finite=math.ldexp(2.0 - 2.0 ** -10, 127),
           min_subnormal=2.0 ** -136, storage_dtype=np.dtype(np.uint32),
           canonical_nan=0x7FFFE000),
    _float("f16", 16, 5, 10),
    _float("bf16", 16, 8, 7),
    _float("e4m3", 8, 4, 3, inf=False, maxf=448.0),
    _float("e5m2", 8, 5, 2),
    _float("e3m2", 6, 3, 2, inf=False, nan=False, maxf=28.0),
    _float("e2m3", 6, 2, 3, inf=False, nan=False, maxf=7.5),
    _float("e2m1", 4, 2, 1, inf=False, nan=False, maxf=6.0),
    # ue8m0: pure exponent, value 2**(code-127), no zero, no subnormals, 0xFF is NaN.
    Format(name="ue8m0", bits=8, kind="float", exp_bits=8, man_bits=0, bias=127, signed=False,
           has_inf=False, has_nan=True, emin=-127, max_finite=2.0 ** 127,
           min_subnormal=2.0 ** -127, storage_dtype=np.dtype(np.uint8), canonical_nan=0xFF),
    # ue4m3: e4m3 without its sign bit, held in a byte (decode ignores bit 7).
    Format(name="ue4m3", bits=8, kind="float", exp_bits=4, man_bits=3, bias=7, signed=False,
           has_inf=False, has_nan=True, emin=-6, max_finite=448.0, min_subnormal=2.0 ** -9,
           storage_dtype=np.dtype(np.uint8), canonical_nan=0x7F),
    _int("s32", 32, "int"),
    _int("s8", 8, "int"),
    _int("u8", 8, "uint"),
    _int("s4", 4, "int"),
    _int("u4", 4, "uint"),
    _int("b1", 1, "bits"),
)

#: Every element format, by PTX type name (without the dot).
FORMATS: Mapping[str, Format] = MappingProxyType({f.name: f for f in _ALL})


def get_format(name) -> Format:
    """The :class:`Format` called ``name`` (a Format is returned unchanged)."""
    if isinstance(name, Format):
        return name
    if isinstance(name, str):
        key = name[1:] if name.startswith(".") else name
        if key in FORMATS:
            return FORMATS[key]
    raise FormatError(
        f"unknown element format {name!r}; valid formats: {', '.join(FORMATS)}"
    )


# --------------------------------------------------------------------------------------------
# Bit-pattern input validation
# --------------------------------------------------------------------------------------------


def _show(v) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)


def _first_bad(mask: np.ndarray) -> tuple:
    flat = int(np.flatnonzero(mask.ravel())[0])
    return np.unravel_index(flat, mask.shape) if mask.ndim else ()


def _bad_bits(fmt: Format, arr: np.ndarray, mask: np.ndarray, why: str) -> FormatError:
    idx = _first_bad(mask)
    val = arr[idx] if arr.ndim else arr[()]
    where = f" at index {tuple(int(i) for i in idx)}" if arr.ndim else ""
    return FormatError(
        f"invalid {fmt.name} bit pattern {_show(val)}{where}: {why} "
        f"(expected an integer in [0, 2**{fmt.bits}))"
    )


def _as_bits(bits, fmt: Format) -> np.ndarray:
    """Validate ``bits`` and return a fresh uint64 array of the same shape."""
    arr = np.asarray(bits)
    limit = 1 << fmt.bits
    k = arr.dtype.kind
    if k == "b":
        return arr.astype(np.uint64)
    if k in "iu":
        if k == "i":
            neg = arr < 0
            if neg.any():
                raise _bad_bits(fmt, arr, neg, "negative")
        if fmt.bits < 64:
            big = arr.astype(np.uint64) >= np.uint64(limit)
            if big.any():
                raise _bad_bits(fmt, arr, big, "too large")
        return arr.astype(np.uint64)
    if k == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            raise _bad_bits(fmt, arr, bad, "not an integer")
        neg = arr < 0
        if neg.any():
            raise _bad_bits(fmt, arr, neg, "negative")
        big = arr >= float(limit)
        if big.any():
            raise _bad_bits(fmt, arr, big, "too large")
        return arr.astype(np.uint64)
    if k == "O":
        # Python ints too large for int64 (or mixed): check element-wise via object compares.
        try:
            isint = np.vectorize(lambda v: isinstance(v, (int, np.integer))
                                 and not isinstance(v, bool), otypes=[bool])(arr)
        except Exception:  # pragma: no cover - exotic objects
            isint = np.zeros(arr.shape, bool)
        if not isint.all():
            raise _bad_bits(fmt, arr, ~isint, "not an integer")
        neg = (arr < 0).astype(bool)
        if neg.any():
            raise _bad_bits(fmt, arr, neg, "negative")
        big = (arr >= limit).astype(bool)
        if big.any():
            raise _bad_bits(fmt, arr, big, "too large")
        return arr.astype(np.uint64)
    raise FormatError(
        f"invalid {fmt.name} bit patterns: array of dtype {arr.dtype} "
        f"(first value {arr.ravel()[0] if arr.size else None!r}); expected integers"
    )


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------

_ML = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
    "ue8m0": ml_dtypes.float8_e8m0fnu,
}
_TABLES: dict[str, np.ndarray] = {}


def _table(fmt: Format) -> np.ndarray:
    """float64 value of every code of a float format of at most 16 bits (read-only)."""
    t = _TABLES.get(fmt.name)
    if t is None:
        if fmt.name == "ue4m3":
            t = _table(FORMATS["e4m3"])[np.arange(256) & 0x7F]
        else:
            dt = np.dtype(_ML[fmt.name])
            codes = np.arange(1 << fmt.bits, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
            with np.errstate(invalid="ignore"):
                t = codes.view(dt).astype(np.float64)
        t = np.ascontiguousarray(t)
        t.flags.writeable = False
        _TABLES[fmt.name] = t
    return t


def conversion_counts(values, fmt) -> dict[str, int]:
    """How many of ``values`` encoding to ``fmt`` changes (round to nearest even, as
    :func:`encode` does): ``rounded`` (a different representable value), ``saturated`` (clamped
    to the largest finite value or an integer bound: formats without infinity), ``overflowed``
    (a finite value that became infinite), ``nan`` (a finite value that became NaN)."""
    f = get_format(fmt)
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        back = decode(encode(x, f), f).astype(np.float64)
    finite = np.isfinite(x)
    overflowed = finite & np.isinf(back)
    nan = finite & np.isnan(back)
    if f.kind in ("int", "uint"):  # integers round half to even, then clamp
        saturated = finite & (back != np.rint(x))
        rounded = finite & ~saturated & (back != x)
    else:
        big = np.abs(x) > f.max_finite
        saturated = finite & big & np.isfinite(back)
        rounded = finite & ~big & (back != x)
    return {"rounded": int(rounded.sum()), "saturated": int(saturated.sum()),
            "overflowed": int(overflowed.sum()), "nan": int(nan.sum())}


def decode(bits, fmt) -> np.ndarray:
    """Bit patterns -> values: float64 (float formats, exact) or int64 (integer formats)."""
    fmt = get_format(fmt)
    b = _as_bits(bits, fmt)
    with np.errstate(invalid="ignore"):  # NaN payload casts warn on some platforms
        return _decode(b, fmt)


def _decode(b: np.ndarray, fmt: Format) -> np.ndarray:
    if fmt.kind != "float":
        v = b.astype(np.int64)
        if fmt.kind == "int":
            half = 1 << (fmt.bits - 1)
            v = np.where(v >= half, v - (1 << fmt.bits), v)
        return np.asarray(v, dtype=np.int64)
    if fmt.name == "f64":
        return b.view(np.float64).copy()
    return decode_codes(b.astype(np.uint32) if fmt.bits == 32 else b, fmt)


def decode_codes(codes: np.ndarray, fmt, dtype=np.float64) -> np.ndarray:
    """Trusted element codes (unsigned integers of the format's width, as unpacked from
    registers) -> float values of ``dtype`` (float32 only for formats whose values it holds
    exactly).  No validation: for the engine's inner path."""
    fmt = get_format(fmt)
    name = fmt.name
    with np.errstate(invalid="ignore"):  # signalling NaNs warn when cast
        if name == "f32":
            return codes.view(np.float32).astype(dtype)
        if name == "tf32":
            return (codes & np.uint32(0xFFFFE000)).view(np.float32).astype(dtype)
        if name == "f64":
            return codes.view(np.float64)
    if dtype == np.float32:  # a float32 table: one gather (numpy's f16 -> f32 cast is slower)
        key = fmt.name + "/f32"
        t = _TABLES.get(key)
        if t is None:
            with np.errstate(invalid="ignore"):  # the NaN entries
                t = _table(fmt).astype(np.float32)
            t.flags.writeable = False
            _TABLES[key] = t
        return np.take(t, codes)
    return np.take(_table(fmt), codes)


def is_nan(bits, fmt) -> np.ndarray:
    """Whether each pattern encodes NaN (always False for formats without NaN)."""
    fmt = get_format(fmt)
    b = _as_bits(bits, fmt)
    if not fmt.has_nan:
        return np.zeros(b.shape, dtype=bool)
    return np.isnan(decode(b, fmt))


def is_inf(bits, fmt) -> np.ndarray:
    """Whether each pattern encodes +-Inf (always False for formats without Inf)."""
    fmt = get_format(fmt)
    b = _as_bits(bits, fmt)
    if not fmt.has_inf:
        return np.zeros(b.shape, dtype=bool)
    return np.isinf(decode(b, fmt))


def decompose(bits, fmt) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sign, exponent, significand) int64 arrays with

    ``value = (-1)**sign * significand * 2**(exponent - man_bits)``,
    ``exponent = max(floor(log2|value|), emin)`` (subnormals and zero keep ``emin``) and the
    significand an integer including the hidden bit of normal numbers.  Integer formats give
    exponent 0 and significand ``|value|``.  Meaningless for NaN and Inf.
    """
    fmt = get_format(fmt)
    b = _as_bits(bits, fmt)
    if fmt.kind != "float":
        v = decode(b, fmt)
        return (v < 0).astype(np.int64), np.zeros(v.shape, np.int64), np.abs(v)
    if fmt.name == "ue4m3":
        b = b & np.uint64(0x7F)
    stored_man = 23 if fmt.name == "tf32" else fmt.man_bits
    if fmt.signed:
        sign = ((b >> np.uint64(fmt.bits - 1)) & np.uint64(1)).astype(np.int64)
    else:
        sign = np.zeros(b.shape, np.int64)
    efield = ((b >> np.uint64(stored_man)) & np.uint64((1 << fmt.exp_bits) - 1)).astype(np.int64)
    mfield = (b & np.uint64((1 << stored_man) - 1)).astype(np.int64)
    if fmt.name == "tf32":
        mfield = mfield >> 13
    if fmt.name == "ue8m0":
        return sign, efield - fmt.bias, np.ones(b.shape, np.int64)
    normal = efield > 0
    exponent = np.where(normal, efield - fmt.bias, fmt.emin)
    significand = np.where(normal, mfield | (1 << fmt.man_bits), mfield)
    return sign, exponent.astype(np.int64), significand.astype(np.int64)


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def _index_str(shape, mask) -> tuple[tuple, str]:
    idx = _first_bad(mask)
    return idx, (str(tuple(int(i) for i in idx)) if shape else "()")


def _fail(fmt: Format, orig: np.ndarray, mask: np.ndarray, why: str) -> FormatError:
    idx, s = _index_str(orig.shape, mask)
    val = orig[idx] if orig.ndim else orig[()]
    return FormatError(f"cannot encode {_show(val)} (index {s}) as {fmt.name}: {why}").at(
        index=tuple(int(i) for i in idx), value=val, why=why)


def _ints_to_f64_odd(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int64/uint64 -> (float64 rounded to odd, exact mask).

    Rounding to odd to 53 bits, then RNE to at most 51 bits, equals one direct RNE rounding,
    so integer inputs are rounded once even for the 24-bit formats.
    """
    neg = x < 0 if x.dtype.kind == "i" else np.zeros(x.shape, bool)
    u = x.astype(np.uint64)
    a = np.where(neg, ~u + np.uint64(1), u)  # |x| (INT64_MIN -> 2**63, fine as uint64)
    res = a.astype(np.float64)
    exact = np.ones(x.shape, bool)
    big = a >= np.uint64(1 << 53)
    if big.any():
        ab = a[big]
        _, e = np.frexp(ab.astype(np.float64))  # bit length, possibly one too many
        e = e.astype(np.int64)
        e = e - (ab < (np.uint64(1) << (e - 1).astype(np.uint64)))
        shift = (e - 53).astype(np.uint64)
        t = ab >> shift
        sticky = (ab & ((np.uint64(1) << shift) - np.uint64(1))) != 0
        t = t | sticky.astype(np.uint64)
        res[big] = np.ldexp(t.astype(np.float64), shift.astype(np.int64))
        exact[big] = ~sticky
    return np.where(neg, -res, res), exact


def _as_values(values, fmt: Format, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    """(original array, float64 view-or-copy of it).  Never mutates ``values``."""
    orig = np.asarray(values)
    k = orig.dtype.kind
    if k == "f":
        return orig, orig.astype(np.float64)
    if k == "b":
        return orig, orig.astype(np.float64)
    if k in "iu":
        x, exact = _ints_to_f64_odd(orig)
        if fmt.name == "f64":
            x = orig.astype(np.float64)  # a single correctly rounded conversion
        if strict and fmt.kind == "float" and not exact.all():
            raise _fail(fmt, orig, ~exact, "not exactly representable")
        return orig, x
    if k == "O":
        missing = np.equal(orig, None)  # np.float64(None) would be a silent NaN
        if np.any(missing):
            raise _fail(fmt, orig, np.asarray(missing, bool), "None is not a number")
        try:
            return orig, orig.astype(np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise FormatError(f"cannot encode values of type object as {fmt.name}: {e}") from None
    raise FormatError(
        f"cannot encode values of dtype {orig.dtype} as {fmt.name} "
        f"(first value {orig.ravel()[0] if orig.size else None!r}); expected real numbers"
    )


def _encode_ints(orig, x, fmt: Format, strict: bool) -> np.ndarray:
    nan = np.isnan(x)
    if nan.any():
        raise _fail(fmt, orig, nan, "NaN has no integer encoding")
    lo = -(1 << (fmt.bits - 1)) if fmt.kind == "int" else 0
    hi = (1 << (fmt.bits - 1)) - 1 if fmt.kind == "int" else (1 << fmt.bits) - 1
    if orig.dtype.kind in "iu":
        if strict:
            bad = (orig < lo) | (orig > hi)
            if bad.any():
                raise _fail(fmt, orig, bad, f"outside [{lo}, {hi}]")
        v = np.clip(orig, max(lo, np.iinfo(orig.dtype).min), min(hi, np.iinfo(orig.dtype).max))
        v = v.astype(np.int64)
    else:
        r = np.rint(x)
        if strict:
            bad = r != x
            if bad.any():
                raise _fail(fmt, orig, bad, "not an integer")
            bad = (x < lo) | (x > hi)
            if bad.any():
                raise _fail(fmt, orig, bad, f"outside [{lo}, {hi}]")
        v = np.clip(r, lo, hi).astype(np.int64)
    mask = (1 << fmt.bits) - 1
    return (v & mask).astype(fmt.storage_dtype)


def _round_float(a: np.ndarray, fmt: Format) -> np.ndarray:
    """|x| (finite, >= 0) -> nearest value with man_bits fraction bits and exponent >= emin,
    ties to even, exponent unbounded above (IEEE rounding before the overflow check)."""
    _, e2 = np.frexp(a)  # a = m * 2**e2, m in [0.5, 1)
    e = np.maximum(e2.astype(np.int64) - 1, fmt.emin)  # zero: e2 = 0 -> emin
    q = e - fmt.man_bits
    n = np.rint(np.ldexp(a, -q))  # exact scaling (power of two, no under/overflow here)
    return np.ldexp(n, q)


def _value_to_code(r: np.ndarray, fmt: Format) -> np.ndarray:
    """Representable magnitudes (finite, <= max_finite) -> exponent/mantissa code (no sign)."""
    _, e2 = np.frexp(r)
    e = np.maximum(e2.astype(np.int64) - 1, fmt.emin)
    n = np.ldexp(r, -(e - fmt.man_bits)).astype(np.int64)  # significand, < 2**(man+1)
    hidden = 1 << fmt.man_bits
    normal = n >= hidden
    efield = np.where(normal, e + fmt.bias, 0)
    mfield = np.where(normal, n - hidden, n)
    return (efield << fmt.man_bits) | mfield


def _encode_ue8m0(orig, x, fmt: Format, strict: bool) -> np.ndarray:
    a = np.abs(x)  # negatives already rejected; -0.0 -> 0
    nan = np.isnan(a)
    safe = np.where(nan | (a == 0) | np.isinf(a), 1.0, a)
    m, e2 = np.frexp(safe)  # safe = m * 2**e2, m in [0.5, 1): floor(log2) = e2 - 1
    lo = e2.astype(np.int64) - 1  # 2**lo <= a < 2**(lo+1)
    frac = m * 2.0  # in [1, 2)
    up = frac > 1.5
    tie = frac == 1.5
    code_lo = lo + 127
    up = up | (tie & (code_lo % 2 == 1))  # tie: go to the even code
    exp = np.where(up, lo + 1, lo)
    exp = np.where(a == 0, -127, exp)
    exp = np.where(np.isinf(a), 128, exp)
    if strict:
        bad = ~nan & ((frac != 1.0) | (a == 0) | np.isinf(a) | (lo < -127) | (lo > 127))
        if bad.any():
            raise _fail(fmt, orig, bad, "not a power of two in [2**-127, 2**127]")
    exp = np.clip(exp, -127, 127)  # below range -> 2**-127 (no zero); above -> saturate
    code = exp + 127
    code = np.where(nan, 0xFF, code)
    return code.astype(np.uint8)


def encode(values, fmt, *, strict: bool = False) -> np.ndarray:
    """Values -> bit patterns of ``fmt`` (dtype ``fmt.storage_dtype``), round-to-nearest-even.

    Overflow: +-Inf where the format has Inf (IEEE rule), else saturation to +-max_finite (Inf
    input saturates too).  NaN -> ``canonical_nan``; NaN into a format without NaN, negative
    values into unsigned float formats and NaN into integer formats raise :class:`FormatError`.
    Integer formats round half to even then clamp.  ``strict=True`` raises on any value that
    would be rounded, clamped, saturated or overflowed.
    """
    fmt = get_format(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        return _encode(values, fmt, strict)


def _encode(values, fmt: Format, strict: bool) -> np.ndarray:
    orig, x = _as_values(values, fmt, strict)
    if fmt.kind != "float":
        return _encode_ints(orig, x, fmt, strict)

    nan = np.isnan(x)
    if nan.any() and not fmt.has_nan:
        raise _fail(fmt, orig, nan, "the format has no NaN")
    neg = np.signbit(x) & ~nan
    if not fmt.signed:
        bad = neg & (x != 0)
        if bad.any():
            raise _fail(fmt, orig, bad, "negative value in an unsigned format")
        neg = np.zeros(x.shape, bool)
    if fmt.name == "ue8m0":
        return _encode_ue8m0(orig, x, fmt, strict)

    a = np.abs(np.where(nan, 0.0, x))
    inf_in = np.isinf(a)
    finite_a = np.where(inf_in, 0.0, a)
    r = _round_float(finite_a, fmt)
    over = ~inf_in & (r > fmt.max_finite)
    if strict:
        bad = ~nan & ~inf_in & (r != finite_a)
        if fmt.has_inf:
            bad = bad | over
        else:
            bad = bad | over | inf_in
        if bad.any():
            which = _first_bad(bad)
            v = x[which] if x.ndim else x[()]
            why = "not exactly representable"
            if np.isinf(v) or abs(v) > fmt.max_finite:
                r1 = _round_float(np.array([min(abs(float(v)), 2.0 * fmt.max_finite)]), fmt)[0]
                if np.isfinite(v) and r1 <= fmt.max_finite:
                    why = f"not exactly representable (rounds to the largest finite value {fmt.max_finite:g})"
                else:
                    why = (f"out of range: beyond the largest finite value {fmt.max_finite:g}; would "
                           + ("overflow to Inf" if fmt.has_inf else "saturate"))
            raise _fail(fmt, orig, bad, why)
    r = np.where(over | inf_in, fmt.max_finite, r)
    code = _value_to_code(r, fmt)
    if fmt.has_inf:
        inf_code = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
        code = np.where(over | inf_in, inf_code, code)
    if fmt.name == "tf32":
        code = code << 13
    if fmt.signed:
        code = code | (neg.astype(np.int64) << (fmt.bits - 1)) if fmt.bits < 64 else code
    code = code.astype(np.uint64)
    if fmt.signed and fmt.bits == 64:
        code = code | (neg.astype(np.uint64) << np.uint64(63))
    if fmt.canonical_nan is not None:
        code = np.where(nan, np.uint64(fmt.canonical_nan), code)
    return code.astype(fmt.storage_dtype)
