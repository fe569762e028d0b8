"""cvt: conversions between every integer and float type, and the packed conversions.

Scalar forms ``cvt{.rnd}{.ftz}{.sat}{.relu}{.satfinite}.dtype.atype`` (type key
``'dtype.atype'``):

* int -> int: sign- or zero-extension / truncation; ``.sat`` clamps to the destination range.
* float -> int: ``.rni .rzi .rmi .rpi`` (nearest even, toward zero, down, up) then a clamp to
  the destination range (always, as the H100 does); NaN -> 0.
* int -> float, float -> float: ``.rn .rz .rm .rp`` (IEEE, computed on exact or round-to-odd
  float64 carriers); same-type ``.rni``... round to an integral value; ``.sat`` clamps to
  [0, 1] (NaN -> +0); ``.relu`` negative -> +0; ``.satfinite`` overflow and Inf -> +-MAX.

Packed forms (the first source goes to the *upper* half, unlike ``mov``):
``cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`` (d[31:16] = cvt(a)),
``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.{f32,f16x2}`` (d[15:8] from a / a[31:16]),
``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}``, ``cvt.{rna,rn,rz}{.satfinite}{.relu}.tf32.f32``.

NaN results (H100, verified word for word): see ``_NAN`` notes in the functions.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from warpsim.facts import formats
from warpsim.errors import PtxError

from warpsim.ptx.bits import INT, UINT, halves, pack, reg, value, wrap
from warpsim.ptx.fp import BF16, F16, F32, F64, FORMATS, decode, flush, round_to, to_odd
from warpsim.ptx.optable import OpSpec

INTS = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64")
FLOATS = ("f16", "bf16", "f32", "f64")
IRND = ("rni", "rzi", "rmi", "rpi")
FRND = ("rn", "rz", "rm", "rp")
_INTEGRAL = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def _range(t):
    bits, sg = INT[t]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if sg else (0, (1 << bits) - 1)


# ---------------------------------------------------------------------------------------------
# integer sources
# ---------------------------------------------------------------------------------------------


def _int_to_int(a, d, at, sat):
    v = value(reg(a, 64 if INT[at][0] == 64 else 32), at) if INT[at][0] > 16 else \
        value(reg(a, 16), at)
    bits = INT[d][0]
    if sat:
        lo, hi = _range(d)
        if v.dtype == np.uint64:
            v = np.minimum(v, np.uint64(hi)) if hi < 2**64 else v
            return wrap(v, max(bits, 16))
        v = np.clip(v, lo, hi) if hi < 2**63 else np.maximum(v, lo)
    out = wrap(v, 64 if bits == 64 else max(bits, 16))
    if bits == 8:  # the register is 16 bits: sign- or zero-extend the byte
        b = out.astype(np.uint16) & np.uint16(0xFF)
        out = np.where((b >= 0x80) & (d == "s8"), b | np.uint16(0xFF00), b) if d == "s8" else b
    return out.astype(UINT[max(bits, 16)])


def _int_carrier(v: np.ndarray):
    """int64/uint64 values -> (float64 rounded to nearest, sign of the error, odd carrier)."""
    q = v.astype(np.float64)
    if v.dtype == np.uint64:
        big = q >= 2.0**64
        qi = np.where(big, np.uint64(0), q.astype(np.uint64))
        sign = np.where(big, -1, np.where(v > qi, 1, np.where(v < qi, -1, 0)))
    else:
        big = q >= 2.0**63
        qi = np.where(big, np.int64(0), q.astype(np.int64))
        sign = np.where(big, -1, np.sign(v - qi))  # v - qi is exact (|v - qi| < 2**11)
    return q, sign, to_odd(q, sign)


def _int_to_float(a, d, at, rnd, sat):
    v = value(reg(a, INT[at][0] if INT[at][0] > 8 else 16), at)
    f = FORMATS[d]
    q, sign, odd = _int_carrier(v)
    if f is F64:
        from warpsim.ptx.ops.floating import _directed

        out = _directed(q, sign, rnd).view(np.uint64)
    else:
        out = round_to(odd, f, rnd)
    return _sat01(out, f) if sat else out


def _sat01(out, f):
    v = decode(out, f)
    return np.where(np.isnan(v) | (v <= 0), f.dtype(0), np.where(v >= 1, f.dtype(f.one), out)).astype(f.dtype)


# ---------------------------------------------------------------------------------------------
# float sources
# ---------------------------------------------------------------------------------------------


def _float_to_int(a, d, at, rnd, ftz):
    f = FORMATS[at]
    b = reg(a, f.bits)
    if ftz:
        b = flush(b, f)
    x = _INTEGRAL[rnd](decode(b, f))
    lo, hi = _range(d)
    nan = np.isnan(x)
    bits = INT[d][0]
    # NaN -> 0, except from f64 or into 64 bits: the pattern 1 << (n-1) (the H100's F2I)
    nan_val = float(-(2.0 ** (bits - 1)) if lo < 0 else 2.0 ** (bits - 1)) \
        if (f is F64 or bits == 64) else 0.0
    x = np.where(nan, nan_val, x)
    if bits == 64:
        if lo == 0:
            out = np.where(x >= 2.0**64, np.uint64(hi), np.where(x <= 0, np.uint64(0),
                           np.clip(x, 0, 2.0**64 - 2048).astype(np.uint64)))
            out = np.where(nan, np.uint64(1 << 63), out)
        else:
            out = np.where(x >= 2.0**63, np.int64(hi), np.where(x <= -(2.0**63), np.int64(lo),
                           np.clip(x, -(2.0**63), 2.0**63 - 1024).astype(np.int64))).astype(np.uint64)
        return out.astype(np.uint64)
    v = np.clip(x, lo, hi).astype(np.int64)
    if lo == 0:  # the unsigned NaN pattern 1 << (n-1) lies inside the range
        v = np.where(nan, int(nan_val), v)
    return _int_to_int(wrap(v, 64), d, "s64", None)


def _f32_to_half_fast(b: np.ndarray, fd, rnd) -> np.ndarray:
    """cvt.{rn,rz}.{f16,bf16}.f32 on non-NaN words without other modifiers."""
    if fd is F16:
        r = b.view(np.float32).astype(np.float16)  # correctly rounded (ties to even)
        if rnd == "rz":
            r64, x = r.astype(np.float32), b.view(np.float32)
            move = np.abs(r64) > np.abs(x)
            if move.any():
                r = np.where(move, np.nextafter(r, np.float16(0)), r)
        return r.view(np.uint16)
    u = b.astype(np.uint32)
    if rnd == "rn":
        u = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return (u >> np.uint32(16)).astype(np.uint16)


def _float_to_float(a, d, at, rnd, ftz, sat, relu, satfinite):
    fa, fd = FORMATS[at], FORMATS[d]
    if fa is F32 and fd in (F16, BF16) and rnd in ("rn", "rz") and not (ftz or sat or relu or satfinite):
        b = reg(a, 32)
        nan = ((b & np.uint32(0x7F800000)) == np.uint32(0x7F800000)) & ((b & np.uint32(0x7FFFFF)) != 0)
        out = _f32_to_half_fast(b, fd, rnd)
        return np.where(nan, fd.dtype(fd.nan), out) if nan.any() else out
    b0 = reg(a, fa.bits)
    b = b0
    if ftz and fa is F32 and fd is not F16:  # .ftz has no effect on cvt.f16.f32
        b = flush(b, fa)
    x = decode(b, fa)
    nan = np.isnan(x)
    plain = fa is fd and fa in (F32, F64) and not (rnd or ftz or sat)  # a move
    if rnd in _INTEGRAL:
        x = _INTEGRAL[rnd](x)
        rnd = "rn"
    if satfinite:
        x = np.where(nan, x, np.clip(x, -fd.max_finite, fd.max_finite))
    if fd is F64:
        out = np.asarray(x, np.float64).view(np.uint64)
    else:
        out = round_to(x, fd, rnd or "rn", ftz=bool(ftz) and fd is F32)
    out = np.where(nan, b0 if plain else _nan_convert(b0, fa, fd, ftz), out)
    if sat:
        out = _sat01(out, fd)
    if relu:
        v = decode(out, fd)
        out = np.where(~np.isnan(v) & (v <= 0), fd.dtype(0), out)
    return out.astype(fd.dtype)


def _nan_convert(b, fa, fd, ftz):
    """The NaN a float conversion writes for a NaN source (H100):

    * from f64 to a narrower format and from f16/bf16/f32 to f64: the sign and the top
      payload bits carry over, quietened (the payload is truncated or zero-extended);
      ``cvt.ftz.f64.f32`` widens the f32 canonical NaN instead;
    * bf16 -> f32 without .ftz: the bits move unchanged (a shift; a signalling NaN stays
      signalling); plain ``cvt.f32.f32``/``cvt.f64.f64`` are moves too;
    * otherwise the destination's canonical NaN.
    """
    b = b.astype(np.uint64)
    if fd is F64 and fa is F32 and ftz:
        return np.full(b.shape, np.uint64(0x7FFFFFFFE0000000))
    if fa is BF16 and fd is F32 and not ftz:
        return (b << np.uint64(16)).astype(np.uint32)
    if fa is F64 or fd is F64:
        sign = (b >> np.uint64(fa.bits - 1)) & np.uint64(1)
        mant = b & np.uint64((1 << fa.mbits) - 1)
        mant = mant >> np.uint64(fa.mbits - fd.mbits) if fa.mbits > fd.mbits else \
            mant << np.uint64(fd.mbits - fa.mbits)
        quiet = np.uint64(1 << (fd.mbits - 1))
        out = (sign << np.uint64(fd.bits - 1)) | np.uint64(fd.expmask) | quiet | mant
        return out.astype(fd.dtype)
    return np.full(b.shape, fd.dtype(fd.nan))


# ---------------------------------------------------------------------------------------------
# packed forms
# ---------------------------------------------------------------------------------------------

_F8 = {"e4m3x2": "e4m3", "e5m2x2": "e5m2"}


_ML8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def _to_f8(x: np.ndarray, name: str, relu) -> np.ndarray:
    """f16/bf16/f32 values (exact in float32) -> fp8 codes, round to nearest even,
    saturating (satfinite; clamping first gives the same result since MAX is representable).
    The float32 -> fp8 cast of ml_dtypes rounds once, correctly (checked on the H100's words)."""
    fmt = formats.FORMATS[name]
    nan = np.isnan(x)
    y = np.clip(np.where(nan, 0.0, x), -fmt.max_finite, fmt.max_finite)
    if relu:
        y = np.where(y <= 0, 0.0, y)
    code = y.astype(np.float32).astype(_ML8[name]).view(np.uint8).astype(np.uint16)
    return np.where(nan, np.uint16(fmt.canonical_nan), code)


def _from_f8(codes: np.ndarray, name: str, relu) -> np.ndarray:
    x = formats.decode(codes.astype(np.uint8), name)
    out = round_to(x, F16, "rn")
    if relu:
        out = np.where(~np.isnan(x) & (x <= 0), np.uint16(0), out)
    return out.astype(np.uint16)


#: The sm_100 packed narrow formats: name -> (element format, bits per element, shift of the
#: upper element).  Destinations: e2m1x2 a .b8 (d[7:4] from a), e2m3x2/e3m2x2 a .b16 with
#: the elements in bits 13:8 and 5:0.
_NARROW = {"e2m1x2": ("e2m1", 4, 4), "e2m3x2": ("e2m3", 6, 8), "e3m2x2": ("e3m2", 6, 8)}


def _to_narrow(x: np.ndarray, name: str, relu) -> np.ndarray:
    """float64 -> fp4/fp6 codes, nearest even, .satfinite (these formats have no NaN/Inf:
    NaN -> +MAX, |x| > MAX -> +-MAX); .relu: negative values (and -0) -> +0."""
    fmt = formats.FORMATS[name]
    nan = np.isnan(x)
    y = np.where(nan, fmt.max_finite, np.clip(np.where(nan, 0.0, x), -fmt.max_finite, fmt.max_finite))
    if relu:
        y = np.where(y <= 0, 0.0, y)
    return formats.encode(y, fmt).astype(np.uint16)


def _from_narrow(codes: np.ndarray, name: str, relu) -> np.ndarray:
    x = formats.decode(codes.astype(np.uint8), name)
    out = round_to(x, F16, "rn")
    if relu:
        out = np.where(x <= 0, np.uint16(0), out)
    return out.astype(np.uint16)


def _ue8m0(x: np.ndarray, rnd: str, satfinite) -> np.ndarray:
    """float64 -> ue8m0 codes (2**(code-127)), rounding |x| toward zero (.rz) or up (.rp).
    The sign is ignored; NaN -> 0xFF; values below the smallest power stay 0x00; overflow and
    Inf -> 0xFF, or 0xFE (2**127) with .satfinite."""
    a = np.abs(np.where(np.isnan(x), 1.0, x))
    m, e2 = np.frexp(np.where((a == 0) | np.isinf(a), 1.0, a))
    e = e2.astype(np.int64) - 1  # 2**e <= a < 2**(e+1)
    if rnd == "rp":
        e = e + (m != 0.5)
    code = np.clip(e + 127, 0, 255)
    code = np.where(a == 0, 0, code)
    code = np.where(np.isinf(a), 255, code)
    if satfinite:
        code = np.minimum(code, 254)
    return np.where(np.isnan(x), 255, code).astype(np.uint16)


def _from_ue8m0(codes: np.ndarray) -> np.ndarray:
    """ue8m0 codes -> bf16 patterns: 2**(code-127) exactly (code 0 is the bf16 subnormal
    0x0040), 0xFF -> NaN 0x7FFF."""
    c = codes.astype(np.uint16)
    return np.where(c == 255, np.uint16(0x7FFF), np.where(c == 0, np.uint16(0x0040), c << np.uint16(7)))


def _tf32(a, rnd, relu, satfinite):
    b = reg(a, 32)
    nan = ((b & np.uint32(0x7F800000)) == np.uint32(0x7F800000)) & ((b & np.uint32(0x7FFFFF)) != 0)
    sign = b & np.uint32(0x80000000)
    mag = b & np.uint32(0x7FFFFFFF)
    if rnd == "rna":  # NaN payloads are truncated, never rounded
        mag = np.where(nan, mag, mag + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    elif rnd == "rn":
        mag = (mag + np.uint32(0xFFF) + ((mag >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    else:
        mag = mag & np.uint32(0xFFFFE000)
    inf = mag >= np.uint32(0x7F800000)
    if rnd == "rna":
        # .rna is bit arithmetic on the H100, NaN and Inf included; .satfinite then
        # steps any all-ones exponent result down by one tf32 ulp (Inf -> MAX, NaN payloads
        # likewise)
        if satfinite:
            mag = np.where(inf, mag - np.uint32(0x2000), mag)
        return mag | sign
    mag = np.where(inf, np.uint32(0x7F800000), mag)
    out = mag | sign
    if relu:
        out = np.where(sign != 0, np.uint32(0), out)
    return np.where(nan, np.uint32(0x7FFFE000), out)  # .rn/.rz: canonical NaN, low bits clear


def _pair(srcs, fn, d_bits, two: bool):
    """Apply fn to (a, b) or to the halves of a packed a; first source -> upper half."""
    if len(srcs) != (2 if two else 1):
        raise PtxError(f"this cvt takes {2 if two else 1} source operand(s), got {len(srcs)}")
    if two:
        hi, lo = fn(srcs[0]), fn(srcs[1])
    else:
        l16, h16 = halves(reg(srcs[0], 32))
        hi, lo = fn(h16), fn(l16)
    if d_bits == 32:
        return pack(lo, hi)
    return ((hi.astype(np.uint16) << np.uint16(8)) | (lo.astype(np.uint16) & np.uint16(0xFF))).astype(np.uint16)


def _source_values(s, a):
    f = FORMATS["f32" if a == "f32" else a[:-2]]
    return decode(reg(s, f.bits), f)


def _packed(srcs, d, a, rnd, relu, satfinite):
    if a in _NARROW:
        name, w, sh = _NARROW[a]
        r = reg(srcs[0], 8 if w == 4 else 16).astype(np.uint16)
        m = np.uint16((1 << w) - 1)
        return pack(_from_narrow(r & m, name, relu), _from_narrow((r >> np.uint16(sh)) & m, name, relu))
    if len(srcs) != NSRC.get(f"{d}.{a}", 1):
        raise PtxError(f"cvt.{d}.{a} takes {NSRC.get(f'{d}.{a}', 1)} source operand(s), got {len(srcs)}")
    if d in _NARROW:
        name, w, sh = _NARROW[d]
        if len(srcs) == 2:
            hi, lo = (_to_narrow(_source_values(s, a), name, relu) for s in srcs)
        else:
            l16, h16 = halves(reg(srcs[0], 32))
            hi, lo = (_to_narrow(_source_values(h, a), name, relu) for h in (h16, l16))
        out = (hi << np.uint16(sh)) | lo
        return out.astype(np.uint8) if w == 4 else out
    if d == "ue8m0x2":
        if len(srcs) == 2:
            hi, lo = (_ue8m0(_source_values(s, a), rnd, satfinite) for s in srcs)
        else:
            l16, h16 = halves(reg(srcs[0], 32))
            hi, lo = (_ue8m0(_source_values(h, a), rnd, satfinite) for h in (h16, l16))
        return ((hi << np.uint16(8)) | lo).astype(np.uint16)
    if a == "ue8m0x2":
        r = reg(srcs[0], 16)
        return pack(_from_ue8m0(r & np.uint16(0xFF)), _from_ue8m0(r >> np.uint16(8)))
    if a in _F8:
        lo8 = reg(srcs[0], 16) & np.uint16(0xFF)
        hi8 = reg(srcs[0], 16) >> np.uint16(8)
        return pack(_from_f8(lo8, _F8[a], relu), _from_f8(hi8, _F8[a], relu))
    if d in ("f16x2", "bf16x2"):
        fd = FORMATS[d[:-2]]
        return _pair(srcs, lambda s: _float_to_float(s, fd.name, "f32", rnd, None, None, relu,
                                                     satfinite), 32, True)
    if d in _F8:
        src = FORMATS["f32" if a == "f32" else a[:-2]]
        return _pair(srcs, lambda s: _to_f8(decode(reg(s, src.bits), src), _F8[d], relu), 16,
                     a == "f32")
    raise AssertionError((d, a))


# ---------------------------------------------------------------------------------------------
# dispatch and legality
# ---------------------------------------------------------------------------------------------


def _cvt(srcs, *, type, **mods):
    with np.errstate(all="ignore"):
        return _convert(srcs, type=type, **mods)


def _convert(srcs, *, type, rnd=None, ftz=None, sat=None, relu=None, satfinite=None, **_):
    d, a = type.split(".")
    if d == "tf32":
        return _tf32(srcs[0], rnd, relu, satfinite)
    if d.endswith("x2") or a.endswith("x2"):
        return _packed(srcs, d, a, rnd, relu, satfinite)
    if d in INT and a in INT:
        return _int_to_int(srcs[0], d, a, sat)
    if d in INT:
        return _float_to_int(srcs[0], d, a, rnd, ftz)
    if a in INT:
        return _int_to_float(srcs[0], d, a, rnd, sat)
    return _float_to_float(srcs[0], d, a, rnd, ftz, sat, relu, satfinite)


def _contains(a, d):
    la, ha = _range(a)
    ld, hd = _range(d)
    return ld <= la and ha <= hd


def _bad(typ, mods, why):
    given = ".".join(v for v in mods.values() if v)
    raise PtxError(f"cvt{'.' + given if given else ''}.{typ}: {why}")


def check(typ, mods):
    """Reject what ptxas (sm_90) rejects; the rules are checked against ptxas in the tests."""
    d, a = typ.split(".")
    rnd, ftz, sat, relu, sf = (mods.get(k) for k in ("rnd", "ftz", "sat", "relu", "satfinite"))
    if d == "tf32":
        if rnd not in ("rna", "rn", "rz"):
            _bad(typ, mods, "needs .rna, .rn or .rz")
        if ftz or sat or (relu and rnd == "rna") or (sf and rnd != "rna"):
            _bad(typ, mods, "modifier not accepted (sm_90: .rna{.satfinite}, .rn/.rz{.relu})")
        return
    if d.endswith("x2") or a.endswith("x2"):
        if ftz or sat:
            _bad(typ, mods, ".ftz/.sat are not legal on packed conversions")
        if d in ("f16x2", "bf16x2") and a == "f32":
            if rnd not in ("rn", "rz"):
                _bad(typ, mods, "needs .rn or .rz")
            return
        if d in _F8 or d in _NARROW:
            if rnd != "rn" or not sf:
                _bad(typ, mods, "needs .rn.satfinite")
            return
        if d == "ue8m0x2":
            if rnd not in ("rz", "rp") or relu:
                _bad(typ, mods, "needs .rz or .rp (.satfinite optional, no .relu)")
            return
        if a == "ue8m0x2" and (relu or sf):
            _bad(typ, mods, "cvt.rn.bf16x2.ue8m0x2 takes no .relu or .satfinite")
        if rnd != "rn" or sf:
            _bad(typ, mods, "needs .rn (no .satfinite)")
        return
    if relu or sf:
        if not (d in ("f16", "bf16") and a == "f32" and rnd in ("rn", "rz") and not ftz and not sat):
            _bad(typ, mods, ".relu/.satfinite apply to cvt.{rn,rz}.{f16,bf16}.f32 only")
    if d in INT and a in INT:
        if rnd or ftz:
            _bad(typ, mods, "integer conversions take no rounding or .ftz")
        if sat and _contains(a, d):
            _bad(typ, mods, ".sat is pointless: the source range fits the destination")
        return
    if "bf16" in (d, a) and (d in ("u8", "s8") or a in ("u8", "s8")):
        _bad(typ, mods, "no conversion between bf16 and 8-bit integers")
    if ftz and a != "f32" and not (d == "f32" and a in FLOATS):
        _bad(typ, mods, ".ftz applies to .f32 sources and float-to-f32 conversions")
    if d in INT:
        if rnd not in IRND:
            _bad(typ, mods, "needs an integer rounding (.rni .rzi .rmi .rpi)")
        if sat and a == "bf16":
            _bad(typ, mods, ".sat is not legal with .bf16")
        return
    if a in INT:
        if rnd not in FRND:
            _bad(typ, mods, "needs a rounding (.rn .rz .rm .rp)")
        if sat and d == "bf16":
            _bad(typ, mods, ".sat is not legal with .bf16")
        return
    # float -> float
    fa, fd = FORMATS[a], FORMATS[d]
    if a == d:
        if rnd in FRND or (d == "bf16" and sat) or (ftz and d != "f32"):
            _bad(typ, mods, "same-type cvt takes .rni/.rzi/.rmi/.rpi, .sat (and .ftz on f32)")
        return
    if rnd in IRND:
        _bad(typ, mods, "integer rounding needs the same source and destination type")
    if "bf16" in (d, a):
        if sat:
            _bad(typ, mods, ".sat is not legal with .bf16")
        if rnd is None and d == "bf16" and a != "f16":
            _bad(typ, mods, "needs a rounding (.rn .rz .rm .rp)")
        return
    widening = fd.bits > fa.bits
    if widening and rnd:
        _bad(typ, mods, "a widening conversion takes no rounding")
    if not widening and rnd is None:
        _bad(typ, mods, "a narrowing conversion needs a rounding (.rn .rz .rm .rp)")
    if ftz and a == "f64" and d == "f16":
        _bad(typ, mods, ".ftz applies to .f32 sources and results")


#: Source operands of the two-source packs (``cvt.rn.f16x2.f32 d, a, b``); every other cvt
#: type pair takes one.
NSRC = {t: 2 for t in ("f16x2.f32", "bf16x2.f32", "e4m3x2.f32", "e5m2x2.f32", "e2m1x2.f32",
                       "e2m3x2.f32", "e3m2x2.f32", "ue8m0x2.f32")}

_PAIRS = tuple(f"{d}.{a}" for d in INTS + FLOATS for a in INTS + FLOATS)
_PACKED = ("f16x2.f32", "bf16x2.f32", "e4m3x2.f32", "e5m2x2.f32", "e4m3x2.f16x2",
           "e5m2x2.f16x2", "f16x2.e4m3x2", "f16x2.e5m2x2", "tf32.f32")
_PACKED_SM100 = ("e4m3x2.bf16x2", "e5m2x2.bf16x2",
                 "e2m1x2.f32", "e2m3x2.f32", "e3m2x2.f32",
                 "e2m1x2.f16x2", "e2m3x2.f16x2", "e3m2x2.f16x2",
                 "e2m1x2.bf16x2", "e2m3x2.bf16x2", "e3m2x2.bf16x2",
                 "f16x2.e2m1x2", "f16x2.e2m3x2", "f16x2.e3m2x2",
                 "ue8m0x2.f32", "ue8m0x2.bf16x2", "bf16x2.ue8m0x2")

#: Type pairs that need a newer target than sm_90 (the interpreter enforces it): the sm_100
#: family's fp4/fp6/ue8m0 packs (from f16x2/bf16x2 sources: PTX 9.1).  Their semantics
#: follow the PTX ISA; they are NOT validated on hardware (the H100 has none of them).
MIN_SM = {t: 100 for t in _PACKED_SM100}

#: PTX ISA versions of those packs: fp4/fp6/fp8 from f16x2/bf16x2 sources came with PTX 9.1
#: (ptxas 13.0 already accepts e2m1x2.f16x2 at PTX 8.8); the rest need PTX 8.6.
MIN_PTX = {t: (9, 1) for t in ("e4m3x2.bf16x2", "e5m2x2.bf16x2", "e2m1x2.bf16x2", "e2m3x2.f16x2",
                               "e2m3x2.bf16x2", "e3m2x2.f16x2", "e3m2x2.bf16x2")}
MIN_PTX.update({t: (8, 6) for t in _PACKED_SM100 if t not in MIN_PTX})
MIN_PTX["e2m1x2.f16x2"] = (8, 8)

# ---------------------------------------------------------------------------------------------
# fast paths bound at decode (OpSpec.specialize)
# ---------------------------------------------------------------------------------------------

_U32 = np.dtype(np.uint32)


def _shape(*xs):
    for x in xs:
        if x.__class__ is np.ndarray:
            return x.shape
    return ()


def _pack_f32_pair(a, b, fd, rnd):
    """cvt.{rn,rz}.{f16x2,bf16x2}.f32 d, a, b on f32 words: (b, a) rounded side by side, one
    cast or one integer rounding for both halves (a -> bits 31:16); NaN -> canonical."""
    x = np.empty(_shape(a, b) + (2,), np.uint32)
    x[..., 0] = b
    x[..., 1] = a
    nan = (x & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if fd is F16:
        h = _f32_to_half_fast(x, F16, rnd)
    else:  # bf16: the upper half, rounded on the bit pattern
        if rnd == "rn":
            x += np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1))
        h = (x >> np.uint32(16)).astype(np.uint16)
    if nan.any():
        h = np.where(nan, np.uint16(0x7FFF), h)
    return np.ascontiguousarray(h).view(np.uint32)[..., 0]


def _specialize(type, mods, nsrc, generic):
    """cvt.{rn,rz}.{f16x2,bf16x2}.f32 without .relu/.satfinite: :func:`_pack_f32_pair`."""
    if type not in ("f16x2.f32", "bf16x2.f32") or nsrc != 2 or mods.get("rnd") not in ("rn", "rz") \
            or mods.get("relu") or mods.get("satfinite"):
        return None
    fd, rnd = FORMATS[type[:-6]], mods["rnd"]

    def f(a, b):
        if a.dtype is not _U32 or b.dtype is not _U32:
            return generic(a, b)
        return _pack_f32_pair(a, b, fd, rnd)
    return f


OPS: dict[str, OpSpec] = {
    "cvt": OpSpec("cvt", _PAIRS + _PACKED + _PACKED_SM100, _cvt, 1,
                  modifiers={"rnd": IRND + FRND + ("rna",), "ftz": ("ftz",), "sat": ("sat",),
                             "relu": ("relu",), "satfinite": ("satfinite",)},
                  check=check, specialize=_specialize,
                  doc="convert; type 'dtype.atype'; packed f16x2/bf16x2/e4m3x2/e5m2x2 forms "
                      "take two f32 sources, the first into the upper half"),
}
