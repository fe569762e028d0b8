"""Floating-point arithmetic: add sub mul fma mad div rcp sqrt abs neg min max, bit-exact.

Types f32, f64, f16, f16x2, bf16, bf16x2 (packed types: the two 16-bit lanes independently).
Rounding modes ``.rn .rz .rm .rp``; ``.ftz`` flushes subnormal inputs and results to a zero of
the same sign; ``.sat`` clamps to [0, 1] (NaN -> +0); ``.relu`` (f16/bf16 fma) clamps negative
results to +0.  Results are computed on exact float64 carriers (:mod:`warpsim.ptx.fp`) and
rounded once.

NaN results, as the H100 writes them (verified word for word): f32 -> 0x7FFFFFFF, f16 and
bf16 -> 0x7FFF whatever the inputs (abs and neg included); f64 propagates an input NaN
quietened (b first, then c, then a; abs/neg keep its sign) and creates 0xFFF8000000000000
for invalid operations.  ``.ftz`` flushes a result that is tiny after rounding to the
format's precision with an unbounded exponent (IEEE "tininess after rounding"): 2**-14 *
(1 - 2**-11) from mul.ftz.f16 is flushed although ties-to-even would round it up to the
smallest normal.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from warpsim.tensorcore import engine
from warpsim.errors import PtxError

from warpsim.ptx.bits import halves, pack, reg
from warpsim._util.chunks import chunked
from warpsim.ptx.fp import (
    F64, FORMATS, RNDS, decode, flush, is_nan, ro_div, ro_sqrt, ro_sum, round_to, values)
from warpsim.ptx.optable import OpSpec

FTYPES = ("f32", "f64", "f16", "f16x2", "bf16", "bf16x2")
_QUIET64 = np.uint64(1 << 51)


def lanes(fn):
    """Apply a scalar-format semantics to x2 types lane by lane (low lane = bits 15:0)."""

    def run(srcs, *, type, **mods):
        if type.endswith("x2"):
            parts = [halves(reg(s, 32)) for s in srcs]
            lo = fn([p[0] for p in parts], type=type[:-2], **mods)
            hi = fn([p[1] for p in parts], type=type[:-2], **mods)
            return pack(lo, hi)
        return fn(srcs, type=type, **mods)

    return run


# ---------------------------------------------------------------------------------------------
# binary64
# ---------------------------------------------------------------------------------------------


def _directed(q: np.ndarray, sign: np.ndarray, rnd: str) -> np.ndarray:
    """Move a round-to-nearest binary64 result ``q`` to mode ``rnd`` given sign(true - q)."""
    if rnd == "rz":
        step = (sign != 0) & (np.sign(q) != sign)
        return np.where(step, np.nextafter(q, 0.0), q)
    if rnd == "rm":
        return np.where(sign < 0, np.nextafter(q, -np.inf), q)
    if rnd == "rp":
        return np.where(sign > 0, np.nextafter(q, np.inf), q)
    return q


def _slow(fn, mask, rnd, *arrays):
    """Exact rational evaluation of the few elements that the fast path cannot bound."""
    idx = np.nonzero(mask)
    vals = [engine._round_fraction(fn(*(Fraction(float(a[idx][i])) for a in arrays)), rnd)
            for i in range(len(idx[0]))]
    return idx, np.array(vals, np.float64)


def _div64(a: np.ndarray, b: np.ndarray, rnd: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        q = a / b
        if rnd == "rn":
            return q
        ok = np.isfinite(a) & np.isfinite(b) & (a != 0) & (b != 0)
        ma, ea = np.frexp(np.where(ok, a, 1.0))
        mb, eb = np.frexp(np.where(ok, b, 1.0))
        qs = ma / mb
        p, e = _two_prod(qs, mb)
        sign = np.sign((ma - p) - e) * np.sign(mb)
        r = _directed(q, np.where(ok, sign, 0), rnd)
        aq = np.abs(q)
        hard = ok & ((aq < 2.0 ** -1021) | (aq > 2.0 ** 1022))
    if hard.any():
        r = r.copy()
        idx, vals = _slow(lambda x, y: x / y, hard, rnd, a, b)
        r[idx] = vals
    return r


def _two_prod(a, b):
    from warpsim.ptx.fp import two_prod

    return two_prod(a, b)


def _sqrt64(a: np.ndarray, rnd: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        s = np.sqrt(a)
        if rnd == "rn":
            return s
        ok = np.isfinite(a) & (a > 0)
        m, e = np.frexp(np.where(ok, a, 1.0))
        odd = (e & 1) == 1
        m = np.where(odd, m * 2.0, m)
        ss = np.sqrt(m)
        p, er = _two_prod(ss, ss)
        sign = np.sign((m - p) - er)
        return _directed(s, np.where(ok, sign, 0), rnd)


def _f64(kind, x, rnd):
    a = x[0]
    if rnd == "rn" and kind in _NATIVE_OPS["f64"]:  # IEEE binary64 in NumPy itself
        return {"add": lambda: a + x[1], "sub": lambda: a - x[1], "mul": lambda: a * x[1],
                "div": lambda: a / x[1], "rcp": lambda: 1.0 / a, "sqrt": lambda: np.sqrt(a)}[kind]()
    if kind == "add":
        return engine.fma(a, np.ones_like(a), x[1], rnd)
    if kind == "sub":
        return engine.fma(a, np.ones_like(a), -x[1], rnd)
    if kind == "mul":
        return engine.fma(a, x[1], np.full_like(a, 0.0 if rnd == "rm" else -0.0), rnd)
    if kind == "fma":
        return engine.fma(a, x[1], x[2], rnd)
    if kind == "div":
        return _div64(a, x[1], rnd)
    if kind == "rcp":
        return _div64(np.ones_like(a), a, rnd)
    if kind == "sqrt":
        return _sqrt64(a, rnd)
    raise AssertionError(kind)


#: The NaN that f64 operations create from non-NaN operands (Inf - Inf, 0 * Inf, sqrt(-1)).
NAN64_INVALID = 0xFFF8000000000000

#: Which operand's NaN an f64 operation propagates first (operand indices), as the H100 does:
#: b before a for two operands; b, then c, then a for fma/mad (the DFMA order a*b + c);
#: div (a subroutine on the GPU) prefers a.
_NAN_ORDER = {1: (0,), 2: (1, 0), 3: (1, 2, 0)}


def _nan64(bits: list[np.ndarray], default=NAN64_INVALID, order=None) -> np.ndarray:
    """The NaN an f64 operation writes: a NaN operand, quietened, in the hardware's order of
    preference, else ``default``."""
    out = np.full(np.broadcast_shapes(*(b.shape for b in bits)), np.uint64(default))
    for i in reversed(order or _NAN_ORDER[len(bits)]):
        b = bits[i]
        out = np.where(is_nan(b, F64), b | _QUIET64, out)
    return out


# ---------------------------------------------------------------------------------------------
# The arithmetic pipeline
# ---------------------------------------------------------------------------------------------


def _sum_carrier(p, q, f, rnd):
    """A float64 carrier of p + q that rounds to ``f`` like the exact sum.

    The plain binary64 sum s already does, except where s sits exactly on a rounding boundary
    of ``f`` (a midpoint for .rn, a representable value for the directed modes) or near its
    subnormal range; only those elements get the round-to-odd sum."""
    s = p + q
    low = s.view(np.uint64) & np.uint64((1 << (52 - f.mbits)) - 1)
    edge = np.uint64(1 << (51 - f.mbits)) if rnd == "rn" else np.uint64(0)
    risky = (low == edge) | (np.abs(s) < 2 * f.min_normal)
    if risky.any():
        idx = np.nonzero(risky)
        pb, qb = np.broadcast_arrays(p, q)
        s = s.copy()
        s[idx] = ro_sum(pb[idx], qb[idx])
    return s


def _carrier(kind, x, f=None, rnd="rn"):
    """The float64 carrier (exact, rounded to odd, or proven equivalent) of one operation on
    f16/bf16/f32 values."""
    with np.errstate(all="ignore"):
        if kind == "add":
            return _sum_carrier(x[0], x[1], f, rnd)
        if kind == "sub":
            return _sum_carrier(x[0], -x[1], f, rnd)
        if kind == "mul":
            return x[0] * x[1]
        if kind == "fma":
            return _sum_carrier(x[0] * x[1], x[2], f, rnd)
        if kind == "div":
            return ro_div(x[0], x[1])
        if kind == "rcp":
            return ro_div(np.ones_like(x[0]), x[0])
        if kind == "sqrt":
            return ro_sqrt(x[0])
    raise AssertionError(kind)


def _finish(out, f, *, ftz=None, sat=None, relu=None):
    """Apply the result flush, .sat and .relu to result bits of format f."""
    if ftz:
        out = flush(out, f)
    if sat:
        v = decode(out, f)
        one = f.dtype(f.one)
        out = np.where(np.isnan(v) | (v <= 0), f.dtype(0), np.where(v >= 1.0, one, out))
    if relu:
        v = decode(out, f)
        out = np.where(~np.isnan(v) & (v <= 0), f.dtype(0), out)  # -0 -> +0 too
    return out.astype(f.dtype)


def arith(kind, srcs, *, type, rnd=None, ftz=None, sat=None, relu=None, **_):
    """One IEEE operation ``kind`` on scalar-format words (f32, f64, f16, bf16).

    ``.ftz``: subnormal inputs read as zeros of their sign; a result tiny after rounding
    becomes a zero of its sign (:func:`warpsim.ptx.fp.round_to`).
    """
    f = FORMATS[type]
    rnd = rnd or "rn"
    b = [reg(s, f.bits) for s in srcs]
    if rnd == "rn" and not ftz and f.name in _NATIVE_DT and kind in _NATIVE_OPS[f.name]:
        return _finish(_native(kind, b, f), f, sat=sat, relu=relu)
    if ftz:
        b = [flush(s, f) for s in b]
    x = [decode(s, f) for s in b]
    if f is F64:
        with np.errstate(all="ignore"):
            r = _f64(kind, x, rnd)
        out = np.asarray(r, np.float64).view(np.uint64)
        nan = np.isnan(r)
        if nan.any():
            out = np.where(nan, _nan64(b, order=(0, 1) if kind == "div" else None), out)
        return _finish(out, f, sat=sat)
    r = _carrier(kind, x, f, rnd)
    if rnd == "rm" and kind in ("add", "sub", "fma"):
        # an exact zero sum is -0 when rounding down, unless both addends are +0
        with np.errstate(invalid="ignore"):
            p = x[0] * x[1] if kind == "fma" else x[0]
        q = x[2] if kind == "fma" else (-x[1] if kind == "sub" else x[1])
        pos = (p == 0) & ~np.signbit(p) & (q == 0) & ~np.signbit(q)
        r = np.where((r == 0) & ~pos, -0.0, r)
    out = round_to(r, f, rnd, ftz=bool(ftz))
    return _finish(out, f, sat=sat, relu=relu)


#: Operations where NumPy's own float32/float16 arithmetic is the correctly rounded (RN) result:
#: IEEE for float32; float16 is computed in float32 and rounded once more, which is exact
#: for + - * / sqrt since 24 >= 2 * 11 + 2.
_NATIVE_OPS = {"f32": ("add", "sub", "mul", "div", "rcp", "sqrt"),
               "f16": ("add", "sub", "mul", "div", "rcp", "sqrt"),
               "f64": ("add", "sub", "mul", "div", "rcp", "sqrt")}
_NATIVE_DT = {"f32": np.float32, "f16": np.float16}


def _native(kind, b, f):
    dt = _NATIVE_DT[f.name]
    x = [v.view(dt) for v in b]
    if kind == "add":
        r = x[0] + x[1]
    elif kind == "sub":
        r = x[0] - x[1]
    elif kind == "mul":
        r = x[0] * x[1]
    elif kind == "div":
        r = x[0] / x[1]
    elif kind == "rcp":
        r = dt(1) / x[0]
    else:
        r = np.sqrt(x[0])
    out = r.view(f.dtype)
    nan = np.isnan(r)
    return np.where(nan, f.dtype(f.nan), out) if nan.any() else out


def _op(kind):
    def run(srcs, **k):
        with np.errstate(all="ignore"):
            return arith(kind, srcs, **k)
    return lanes(run)


# ---------------------------------------------------------------------------------------------
# Fast paths: round-to-nearest f16/f16x2 and f32 with no .ftz/.sat/.relu, bound at decode
# ---------------------------------------------------------------------------------------------
#
# They compute what arith computes, in fewer array passes: the halves of a whole f16x2
# register array are decoded in one cast (as (..., 64) uint16: the innermost axis stays long),
# the result is rounded by one float64 -> float16 cast (NumPy's is correctly rounded, ties to
# even, overflow to Inf), and NaN results become the canonical NaN.
#
# The float64 result is a valid carrier without any round-to-odd step.  Sums and products of
# two f16 values are exact in float64 (at most 41 and 22 significant bits).  For a*b + c: p = a*b
# is exact, with its bits in [e_p - 21, e_p], and c's in [e_c - 10, e_c], e_c - 10 >= -24; the
# sum is inexact only if those spans lie more than 53 bits apart.  If p is the lower part,
# |p| < 2**(e_c - 30): the exact and the float64 sums lie within a quarter of an f16 ulp of c,
# an f16 value, and both round to c.  If c is the lower part, e_p >= 29 > 15: both overflow
# to Inf.  So rounding the float64 sum to f16 gives the correctly rounded a*b + c.

_U16, _U32 = np.dtype(np.uint16), np.dtype(np.uint32)
_NAN32 = np.uint32(0x7FFFFFFF).view(np.float32)


_IMMEDIATES: dict = {}  # f16x2 immediate word -> its (64,) float64 halves, read-only


def _halves64(w) -> np.ndarray:
    """f16x2 words -> float64 values of their halves, (..., 64) with the low half first (an
    immediate: (64,), the pair repeated, shared: not to be written)."""
    if w.__class__ is not np.ndarray:
        key = int(w)
        x = _IMMEDIATES.get(key)
        if x is None:
            if len(_IMMEDIATES) > 4096:
                _IMMEDIATES.clear()
            x = np.tile(np.array([w], np.uint32).view(np.float16).astype(np.float64), 32)
            x.flags.writeable = False
            _IMMEDIATES[key] = x
        return x
    if not w.flags.c_contiguous:
        w = np.ascontiguousarray(w)
    return w.view(np.float16).astype(np.float64)


def _bf16_values(w) -> np.ndarray:
    """bf16 or bf16x2 words -> float64 values ((..., 64) for x2 words, low half first; an x2
    immediate: (64,), the pair repeated)."""
    if w.dtype == np.uint16:
        return (np.asarray(w).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    imm = w.__class__ is not np.ndarray
    w = np.full(32, w) if imm else w
    x = np.empty(w.shape + (2,), np.uint32)
    np.left_shift(w, np.uint32(16), out=x[..., 0])
    np.bitwise_and(w, np.uint32(0xFFFF0000), out=x[..., 1])
    return x.view(np.float32).astype(np.float64).reshape(w.shape[:-1] + (-1,))


def _bf16_round(r: np.ndarray) -> np.ndarray:
    """float64 carriers -> bf16 bits, ties to even: rounded to odd at 24 bits (a float32),
    then to nearest on the bit pattern (24 >= 8 + 2: one correct rounding).  NaN: garbage."""
    f = r.astype(np.float32)
    u = f.view(np.uint32)
    inexact = f.astype(np.float64) != r
    if inexact.any():  # truncate, then set the last bit
        down = inexact & (np.abs(f.astype(np.float64)) > np.abs(r))
        u = (u - down.astype(np.uint32)) | inexact.astype(np.uint32)
    u = u + ((u >> np.uint32(16)) & np.uint32(1))
    u += np.uint32(0x7FFF)
    return (u >> np.uint32(16)).astype(np.uint16)


_MIDBF_MASK = np.uint64((1 << 45) - 1)  # float64 bits below a bf16 normal's last place, and
_MIDBF = np.uint64(1 << 44)  # the pattern of an exact midpoint between two bf16 values


def _fast_half(kind: str, fmt: str, packed: bool, generic):
    """add/sub/mul/fma.rn on f16, bf16 and their x2 forms (see the notes above)."""
    dt = _U32 if packed else _U16
    if fmt == "f16":
        read = _halves64 if packed else (lambda w: np.asarray(w).view(np.float16).astype(np.float64))
    else:
        read = _bf16_values

    def f(*srcs):
        for w in srcs:
            if w.dtype is not dt:
                return generic(*srcs)
        x = [read(w) for w in srcs]
        # in place where the shapes allow (fresh large arrays cost page faults), and ufunc
        # calls rather than a*b + c (NumPy's temporary-elision check costs milliseconds here)
        nd = max(v.ndim for v in x)  # register arrays share one shape; immediates are smaller
        r = x[0] if srcs[0].__class__ is np.ndarray and x[0].ndim == nd else None  # a fresh copy
        if kind == "add":
            r = np.add(x[0], x[1], out=r)
        elif kind == "sub":
            r = np.subtract(x[0], x[1], out=r)
        else:
            r = np.multiply(x[0], x[1], out=r)
            if kind == "fma" and fmt == "f16":  # a valid carrier: see above
                r = np.add(r, x[2], out=r if r.__class__ is np.ndarray and r.ndim == nd else None)
            elif kind == "fma":
                r = _bf16_fma_carrier(r, x[2])
        if fmt == "f16":
            out = r.astype(np.float16).view(np.uint16)
        else:
            out = _bf16_round(r)
        nan = np.isnan(r)
        if nan.any():
            out = np.where(nan, np.uint16(0x7FFF), out)
        return out.view(np.uint32) if packed else out
    return chunked(f)


def _bf16_fma_carrier(p, c):
    """A float64 carrier of p + c (p an exact product of two bf16 values, c a bf16 value): the
    plain sum, except where it is exactly a bf16 midpoint (p a midpoint, c beyond float64's
    reach below it, or an exact tie): there the sum rounded to odd."""
    s = np.add(p, c)
    risky = (np.asarray(s).view(np.uint64) & _MIDBF_MASK) == _MIDBF
    if risky.any():
        idx = np.nonzero(risky)
        pb, cb = np.broadcast_arrays(p, c)
        s = np.array(s)
        s[idx] = ro_sum(pb[idx], cb[idx])
    return s


_EXP32, _SIGN32, _MAG32 = np.uint32(0x7F800000), np.uint32(0x80000000), np.uint32(0x7FFFFFFF)


def _flush32(w):
    """.ftz on f32 words: subnormals -> a zero of their sign."""
    return np.where((w & _EXP32) == 0, w & _SIGN32, w)


def _fast_f32(kind: str, generic, ftz: bool = False):
    """add/sub/mul/fma.rn.f32 (NumPy's float32 arithmetic is IEEE; fma: the exact product in
    float64 and the sum's carrier).  ``ftz``: inputs flushed; results with a magnitude in
    (0, 2**-126], where the tiny-after-rounding rule needs the exact value, are left to the
    general path (the whole call, rarely)."""
    def f(*srcs):
        for w in srcs:
            if w.dtype is not _U32:
                return generic(*srcs)
        x = [_flush32(w) for w in srcs] if ftz else srcs
        if kind == "fma":
            v = [np.asarray(w).view(np.float32).astype(np.float64) for w in x]
            r = _sum_carrier(v[0] * v[1], v[2], FORMATS["f32"], "rn").astype(np.float32)
        else:
            a, b = np.asarray(x[0]).view(np.float32), np.asarray(x[1]).view(np.float32)
            r = np.add(a, b) if kind == "add" else (np.subtract(a, b) if kind == "sub"
                                                    else np.multiply(a, b))
        u = np.asarray(r).view(np.uint32)
        if ftz and (((u & _MAG32) - np.uint32(1)) < np.uint32(0x00800000)).any():
            return generic(*srcs)
        nan = np.isnan(r)
        if nan.any():
            return np.where(nan, _NAN32, r).view(np.uint32)
        return u
    return chunked(f) if kind == "fma" else f  # float64 temporaries: in cache-sized slices


def _specialize(kind: str):
    """OpSpec.specialize for add/sub/mul/fma: the fast paths above where they apply."""
    def specialize(type, mods, nsrc, generic):
        if mods.get("rnd") not in (None, "rn") or mods.get("sat") or mods.get("relu"):
            return None
        if mods.get("ftz"):
            return _fast_f32(kind, generic, ftz=True) if type == "f32" else None
        if type in ("f16", "f16x2", "bf16", "bf16x2"):
            return _fast_half(kind, type[:-2] if type.endswith("x2") else type, type.endswith("x2"),
                              generic)
        if type == "f32":
            return _fast_f32(kind, generic)
        return None
    return specialize


# ---------------------------------------------------------------------------------------------
# Legality (what ptxas accepts, checked against ptxas for sm_90)
# ---------------------------------------------------------------------------------------------


def _reject(cond, msg):
    if cond:
        raise PtxError(msg)


def _check_basic(op, rnd_required=False):
    def check(typ, mods):
        rnd, ftz, sat, relu = (mods.get(k) for k in ("rnd", "ftz", "sat", "relu"))
        _reject(rnd_required and rnd is None and typ in ("f32", "f64"),
                f"{op}.{typ} needs a rounding modifier (.rn, .rz, .rm, .rp)")
        if typ == "f64":
            _reject(ftz or sat or relu, f"{op}.f64 takes no .ftz, .sat or .relu")
        if typ in ("f16", "f16x2", "bf16", "bf16x2"):
            _reject(rnd not in (None, "rn"), f"{op}.{typ} supports only .rn rounding")
        if typ in ("bf16", "bf16x2"):
            _reject(ftz or sat, f"{op}.{typ} takes no .ftz or .sat")
        _reject(relu and (op != "fma" or typ in ("f32", "f64")),
                f".relu is legal on fma.f16/f16x2/bf16/bf16x2 only, not {op}.{typ}")
        _reject(relu and sat, ".relu and .sat exclude each other")
        _reject(op == "fma" and rnd is None, f"fma.{typ} needs a rounding modifier")
    return check


def _check_f32_f64(op):
    def check(typ, mods):
        _reject(mods.get("rnd") is None, f"{op}.{typ} needs a rounding modifier (.rn, .rz, .rm, .rp)")
        if op == "rcp" and typ == "f64" and mods.get("ftz"):
            raise PtxError("rcp.{rnd}.ftz.f64: ptxas accepts it but the PTX ISA does not define "
                           ".ftz there and it was not measured on hardware; not supported")
        _reject(typ == "f64" and mods.get("ftz"), f"{op}.f64 takes no .ftz")
        _reject(typ == "f64" and mods.get("sat"), f"{op}.f64 takes no .sat")
    return check


# ---------------------------------------------------------------------------------------------
# abs, neg, min, max
# ---------------------------------------------------------------------------------------------


def _abs_neg(srcs, *, type, ftz=None, neg=False, **_):
    f = FORMATS[type]
    b = reg(srcs[0], f.bits)
    if ftz:
        b = flush(b, f)
    s = f.dtype(f.sign)
    out = b ^ s if neg else b & f.dtype(f.sign - 1)
    if f is F64:  # a NaN passes quietened, its sign unchanged
        out = np.where(is_nan(b, f), b | _QUIET64, out)
    else:  # the canonical NaN
        out = np.where(is_nan(b, f), f.dtype(f.nan), out)
    return out.astype(f.dtype)


def _minmax(srcs, *, type, ftz=None, nan=None, xorsign=None, abs=None, is_max=False, **_):
    if len(srcs) == 3:  # min/max.f32 d, a, b, c (sm_100+, PTX 8.8): the two-input form applied twice
        kw = dict(type=type, ftz=ftz, nan=nan, is_max=is_max)
        return _minmax([_minmax(srcs[:2], **kw), srcs[2]], **kw)
    f = FORMATS[type]
    a, b = (reg(s, f.bits) for s in srcs)
    if type == "f32" and not (ftz or nan or xorsign or abs):
        # NumPy's fmax/fmin give the result unless both are NaN (the canonical NaN here) or
        # the two are zeros of opposite signs (-0 < +0 here): then the general path below
        va, vb = a.view(np.float32), b.view(np.float32)
        m = np.fmax(va, vb) if is_max else np.fmin(va, vb)
        if not (np.isnan(m).any() or ((va == vb) & (a != b)).any()):
            return m.view(np.uint32)
    if ftz:
        a, b = flush(a, f), flush(b, f)
    sgn = f.dtype(f.sign)
    xs = (a ^ b) & sgn
    if abs:
        a, b = a & ~sgn, b & ~sgn
    va, vb = values(a, f), values(b, f)
    na, nb = np.isnan(va), np.isnan(vb)
    # order with -0 < +0: compare values, break zero ties by the sign bit
    if is_max:
        take_a = (va > vb) | ((va == vb) & ((a & sgn) == 0))
    else:
        take_a = (va < vb) | ((va == vb) & ((a & sgn) != 0))
    out = np.where(take_a, a, b)
    out = np.where(na & ~nb, b, np.where(nb & ~na, a, out))
    resnan = (na & nb) | ((na | nb) & bool(nan))
    if xorsign:
        out = (out & ~sgn) | xs
    out = np.where(resnan, f.dtype(f.nan), out)
    if f is F64:
        out = np.where(na & nb, _nan64([a, b]), out)
    if ftz:
        out = flush(out, f)
    return out.astype(f.dtype)


def _check_minmax(typ, mods):
    _reject(bool(mods.get("xorsign")) != bool(mods.get("abs")), ".xorsign and .abs go together")
    if typ == "f64":
        _reject(any(mods.get(k) for k in ("ftz", "nan", "xorsign", "abs")),
                "min/max.f64 takes no .ftz, .NaN or .xorsign.abs")
    if typ in ("bf16", "bf16x2"):
        _reject(mods.get("ftz"), f".ftz is not legal on .{typ}")


#: three-input min/max: f32 only (.ftz, .NaN; no .xorsign.abs), from sm_100 (ptxas 13.5:
#: "Feature 'max.f32 with 3 input operands' requires .target sm_100 or higher", PTX ISA 8.8)
MINMAX3_MIN_SM = 100


def check_minmax3(typ, mods, arch) -> None:
    """ptxas's rules for ``min``/``max`` with three sources (the ALU decoder calls it)."""
    from warpsim.facts.isa import ARCHS
    _reject(typ != "f32", f"min/max with three sources is .f32 only, not .{typ}")
    _reject(bool(mods.get("xorsign") or mods.get("abs")), "three-input min/max takes no .xorsign.abs")
    a = ARCHS.get(arch or "")
    _reject(a is not None and a.sm < MINMAX3_MIN_SM,
            f"min/max.f32 with three sources needs sm_100 or higher (the target is {arch})")


def _check_absneg(typ, mods):
    _reject(mods.get("ftz") and typ in ("f64", "bf16", "bf16x2"), f".ftz is not legal on .{typ}")



# --- bit-level classification and sign copy (PTX ISA semantics: pure bit operations; ptxas
# 13.0 lowers both to LOP3/ISETP on sm_90, so NaN payloads pass through copysign untouched) --
_BITS = {"f32": (32, np.uint32, 0x7F800000), "f64": (64, np.uint64, 0x7FF0000000000000)}
TESTP_OPS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")


def _testp(srcs, *, type, op):
    """testp.op: the class test of each bit pattern.  ``.normal`` is "finite and not subnormal":
    the H100 calls +-0 normal (f32 and f64, tools/smallops_device.py), not the ISA's reading."""
    w, ut, em = _BITS[type]
    mag = reg(srcs[0], w) & ut((1 << (w - 1)) - 1)  # |a| as bits
    e = mag & ut(em)
    if op == "finite":
        return e != ut(em)
    if op == "infinite":
        return mag == ut(em)
    if op == "number":
        return mag <= ut(em)
    if op == "notanumber":
        return mag > ut(em)
    if op == "normal":  # zeros included, as the H100 answers
        return (e != ut(em)) & ((e != 0) | (mag == 0))
    return (e == 0) & (mag != 0)  # subnormal


def _testp_sig(t, mods):
    return ("pred",), (t,)


def _copysign(srcs, *, type):
    """copysign d, a, b: the sign bit of a, every other bit of b (NaNs included)."""
    w, ut, _ = _BITS[type]
    sign = ut(1 << (w - 1))
    return ((reg(srcs[0], w) & sign) | (reg(srcs[1], w) & ~sign)).astype(ut)


_RND = {"rnd": RNDS}
_FTZ = {"ftz": ("ftz",)}
_SAT = {"sat": ("sat",)}

OPS: dict[str, OpSpec] = {
    "add": OpSpec("add", FTYPES, _op("add"), 2, modifiers={**_RND, **_FTZ, **_SAT},
                  specialize=_specialize("add"), check=_check_basic("add"), doc="a + b, one rounding"),
    "sub": OpSpec("sub", FTYPES, _op("sub"), 2, modifiers={**_RND, **_FTZ, **_SAT},
                  specialize=_specialize("sub"), check=_check_basic("sub"), doc="a - b, one rounding"),
    "mul": OpSpec("mul", FTYPES, _op("mul"), 2, modifiers={**_RND, **_FTZ, **_SAT},
                  specialize=_specialize("mul"), check=_check_basic("mul"), doc="a * b, one rounding"),
    "fma": OpSpec("fma", FTYPES, _op("fma"), 3,
                  modifiers={**_RND, **_FTZ, **_SAT, "relu": ("relu",)}, required=("rnd",),
                  specialize=_specialize("fma"),
                  check=_check_basic("fma", True), doc="a * b + c, one rounding"),
    "mad": OpSpec("mad", ("f32", "f64"), _op("fma"), 3, modifiers={**_RND, **_FTZ, **_SAT},
                  specialize=_specialize("fma"), required=("rnd",), check=_check_f32_f64("mad"),
                  doc="a * b + c, one rounding (same as fma)"),
    "div": OpSpec("div", ("f32", "f64"), _op("div"), 2, modifiers={**_RND, **_FTZ},
                  required=("rnd",), check=_check_f32_f64("div"),
                  doc="a / b correctly rounded (div.approx/.full: see approx)"),
    "rcp": OpSpec("rcp", ("f32", "f64"), _op("rcp"), 1, modifiers={**_RND, **_FTZ},
                  required=("rnd",), check=_check_f32_f64("rcp"), doc="1 / a correctly rounded"),
    "sqrt": OpSpec("sqrt", ("f32", "f64"), _op("sqrt"), 1, modifiers={**_RND, **_FTZ},
                   required=("rnd",), check=_check_f32_f64("sqrt"), doc="sqrt(a) correctly rounded"),
    "abs": OpSpec("abs", FTYPES, lanes(_abs_neg), 1, modifiers=_FTZ, check=_check_absneg,
                  doc="|a| (sign bit cleared)"),
    "neg": OpSpec("neg", FTYPES, lanes(lambda s, **k: _abs_neg(s, neg=True, **k)), 1,
                  modifiers=_FTZ, check=_check_absneg, doc="-a (sign bit flipped)"),
    "min": OpSpec("min", FTYPES, lanes(_minmax), (2, 3),
                  modifiers={**_FTZ, "nan": ("NaN",), "xorsign": ("xorsign",), "abs": ("abs",)},
                  check=_check_minmax, doc="IEEE minNum (-0 < +0); .NaN: minimum; .xorsign.abs; `min.f32 d, a, b, c` "
                      "(sm_100+): the two-input form twice"),
    "max": OpSpec("max", FTYPES, lanes(lambda s, **k: _minmax(s, is_max=True, **k)), (2, 3),
                  modifiers={**_FTZ, "nan": ("NaN",), "xorsign": ("xorsign",), "abs": ("abs",)},
                  check=_check_minmax, doc="IEEE maxNum (-0 < +0); .NaN: maximum; .xorsign.abs; `max.f32 d, a, b, c` "
                      "(sm_100+): the two-input form twice"),
    "testp": OpSpec("testp", ("f32", "f64"), _testp, 1, modifiers={"op": TESTP_OPS},
                    required=("op",), signature=_testp_sig, min_sm=20, min_ptx=(2, 0),
                    doc="p = class test of a (.finite .infinite .number .notanumber .normal "
                        ".subnormal; zeros count as normal, as on the H100)"),
    "copysign": OpSpec("copysign", ("f32", "f64"), _copysign, 2, min_sm=20, min_ptx=(2, 0),
                       doc="d = sign bit of a, other bits of b (NaN bits kept)"),
}
