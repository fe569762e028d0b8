"""Integer arithmetic: add sub mul mad div rem abs neg min max sad dp4a dp2a, bit-exact.

Every function works on unsigned register words of the type's width (uint16/32/64, or uint32
for the packed ``.s16x2``/``.u16x2`` types) and wraps modulo 2**width unless ``.sat`` asks for
saturation.  Values of 16 and 32 bits are computed exactly in int64/uint64; 64-bit products
use 32-bit limbs.  Division by zero and the one overflowing quotient (MIN / -1) give what the
H100 gives (see ``_div``), verified word for word.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError

from warpsim.ptx.bits import INT, UINT, halves, pack, reg, signed, value, wrap
from warpsim.ptx.optable import OpSpec

S_TYPES = ("s16", "s32", "s64")
U_TYPES = ("u16", "u32", "u64")
INT_TYPES = ("s16", "u16", "s32", "u32", "s64", "u64")
_M32 = np.uint64(0xFFFFFFFF)


def _srcs(srcs, typ):
    bits = INT[typ][0]
    return [reg(s, bits) for s in srcs]


def _mul_full_u64(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) 64-bit halves of the 128-bit product of two uint64 arrays."""
    a0, a1 = a & _M32, a >> np.uint64(32)
    b0, b1 = b & _M32, b >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & _M32) + (p10 & _M32)
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    lo = (mid << np.uint64(32)) | (p00 & _M32)
    return lo, hi


def _product(a, b, typ):
    """(low, high) n-bit halves of the 2n-bit product of two n-bit words, as uint64 arrays."""
    bits, sg = INT[typ]
    if bits == 64:
        ua, ub = a.astype(np.uint64), b.astype(np.uint64)
        lo, hi = _mul_full_u64(ua, ub)
        if sg:  # signed high half: subtract the other operand where one is negative
            hi = hi - np.where(ua >> np.uint64(63) == 1, ub, np.uint64(0)) \
                - np.where(ub >> np.uint64(63) == 1, ua, np.uint64(0))
        return lo, hi
    va, vb = value(a, typ), value(b, typ)
    p = (va.astype(np.uint64) * vb.astype(np.uint64)) if not sg else (va * vb).astype(np.uint64)
    m = np.uint64((1 << bits) - 1)
    return p & m, (p >> np.uint64(bits)) & m if not sg else \
        ((va * vb) >> bits).astype(np.uint64) & m


def _sat(v: np.ndarray, bits: int) -> np.ndarray:
    return np.clip(v, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _addsub(srcs, *, type, sat=None, neg=False):
    if type in ("s16x2", "u16x2"):
        a, b = (reg(s, 32) for s in srcs)
        (al, ah), (bl, bh) = halves(a), halves(b)
        f = (lambda x, y: x - y) if neg else (lambda x, y: x + y)
        lo = f(al.astype(np.int64), bl.astype(np.int64))
        hi = f(ah.astype(np.int64), bh.astype(np.int64))
        return pack(lo.astype(np.uint64).astype(np.uint16), hi.astype(np.uint64).astype(np.uint16))
    a, b = _srcs(srcs, type)
    bits = INT[type][0]
    if sat:
        va, vb = value(a, type), value(b, type)
        return wrap(_sat(va - vb if neg else va + vb, bits), bits)
    return a - b if neg else a + b  # unsigned arrays of the width wrap modulo 2**bits


def _add(srcs, *, type, sat=None, **_):
    return _addsub(srcs, type=type, sat=sat)


def _sub(srcs, *, type, sat=None, **_):
    return _addsub(srcs, type=type, sat=sat, neg=True)


def _check_sat_s32(typ, mods):
    if mods.get("sat") and typ != "s32":
        raise PtxError(f".sat applies to .s32 only, not .{typ}")


def _wide_type(typ):
    bits, sg = INT[typ]
    return ("s" if sg else "u") + str(2 * bits)


def _mul(srcs, *, type, mode, **_):
    a, b = _srcs(srcs, type)
    bits = INT[type][0]
    if mode == "wide":
        v = value(a, type) * value(b, type)  # |v| < 2**63 for 32-bit operands... unsigned below
        if not INT[type][1]:
            v = value(a, type).astype(np.uint64) * value(b, type).astype(np.uint64)
        return wrap(v, 2 * bits)
    if mode == "lo":
        return a * b  # wraps modulo 2**bits, the same bits for signed and unsigned
    lo, hi = _product(a, b, type)
    return wrap(hi, bits)


def _check_wide(typ, mods):
    if mods.get("mode") == "wide" and INT[typ][0] == 64:
        raise PtxError(".wide applies to 16- and 32-bit types, not .{typ}")


def _mad(srcs, *, type, mode, sat=None, **_):
    a, b, c = srcs
    bits, sg = INT[type]
    a, b = reg(a, bits), reg(b, bits)
    if mode == "wide":
        w = 2 * bits
        c = reg(c, w)
        prod = _mul([a, b], type=type, mode="wide")
        return wrap(prod.astype(np.uint64) + c.astype(np.uint64), w)
    c = reg(c, bits)
    if mode == "lo":
        return a * b + c
    lo, hi = _product(a, b, type)
    part = lo if mode == "lo" else hi
    if sat:  # mad.hi.sat.s32: saturating add of c to the signed high half
        return wrap(_sat(signed(part, 32) + value(c, type), 32), 32)
    return wrap(part + c.astype(np.uint64), bits)


def _check_mad(typ, mods):
    _check_wide(typ, mods)
    if mods.get("sat") and not (typ == "s32" and mods.get("mode") == "hi"):
        raise PtxError(".sat applies to mad.hi.s32 only")


def _div(srcs, *, type, rem=False, **_):
    """Quotient truncated toward zero / remainder with the dividend's sign.

    Division by zero (H100): quotient and remainder all ones (-1 signed).
    MIN / -1: quotient MIN (wraps), remainder 0.
    """
    a, b = _srcs(srcs, type)
    bits, sg = INT[type]
    zero = b == 0
    if sg:
        va, vb = value(a, type), value(b, type)
        vb1 = np.where(zero | (vb == -1), 1, vb)
        if bits == 64:  # avoid MIN // -1 overflow: handle -1 separately
            q = np.where(vb == -1, (np.uint64(0) - va.view(np.uint64)).view(np.int64), 0)
        else:
            q = np.where(vb == -1, -va, 0)
        qt = np.where((va < 0) != (vb1 < 0), -(np.abs(va) // np.abs(vb1)), np.abs(va) // np.abs(vb1)) \
            if bits < 64 else _sdiv64(va, vb1)
        q = np.where(vb == -1, q, qt)
        r = va - q * np.where(vb == -1, -1, vb1) if bits < 64 else \
            (va.view(np.uint64) - q.view(np.uint64) * np.where(vb == -1, np.int64(-1), vb1).view(np.uint64)).view(np.int64)
        q = np.where(zero, -1, q)
        r = np.where(zero, -1, r)
    else:
        va, vb = value(a, type), value(b, type)
        vb1 = np.where(zero, 1, vb).astype(va.dtype)
        q = va // vb1
        r = va - q * vb1
        q = np.where(zero, np.array(-1).astype(np.int64).astype(va.dtype) if bits < 64 else
                     np.uint64(2**64 - 1), q)
        r = np.where(zero, np.uint64(2**64 - 1) if bits == 64 else -1, r)
    return wrap(r if rem else q, bits)


def _sdiv64(va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    """Truncating signed 64-bit division (no operand is MIN with -1; vb != 0)."""
    ua = np.where(va < 0, np.uint64(0) - va.view(np.uint64), va.view(np.uint64))
    ub = np.where(vb < 0, np.uint64(0) - vb.view(np.uint64), vb.view(np.uint64))
    q = ua // ub
    return np.where((va < 0) != (vb < 0), np.uint64(0) - q, q).view(np.int64)


def _rem(srcs, *, type, **_):
    return _div(srcs, type=type, rem=True)


def _abs(srcs, *, type, **_):
    (a,) = _srcs(srcs, type)
    bits = INT[type][0]
    v = value(a, type)
    return wrap(np.where(v < 0, np.uint64(0) - v.astype(np.uint64), v.astype(np.uint64)), bits)


def _neg(srcs, *, type, **_):
    (a,) = _srcs(srcs, type)
    return wrap(np.uint64(0) - a.astype(np.uint64), INT[type][0])


def _minmax(srcs, *, type, relu=None, is_max=False):
    pick = np.maximum if is_max else np.minimum
    if type in ("s16x2", "u16x2"):
        a, b = (reg(s, 32) for s in srcs)
        t = "s16" if type == "s16x2" else "u16"
        (al, ah), (bl, bh) = halves(a), halves(b)
        lo, hi = pick(value(al, t), value(bl, t)), pick(value(ah, t), value(bh, t))
        if relu:
            lo, hi = np.maximum(lo, 0), np.maximum(hi, 0)
        return pack(wrap(lo, 16), wrap(hi, 16))
    a, b = _srcs(srcs, type)
    v = pick(value(a, type), value(b, type))
    if relu:
        v = np.maximum(v, 0)
    return wrap(v, INT[type][0])


def _min(srcs, *, type, relu=None, **_):
    return _minmax(srcs, type=type, relu=relu)


def _max(srcs, *, type, relu=None, **_):
    return _minmax(srcs, type=type, relu=relu, is_max=True)


def _check_relu(typ, mods):
    if mods.get("relu") and typ not in ("s32", "s16x2"):
        raise PtxError(f".relu applies to .s32 and .s16x2 only, not .{typ}")


def _sad(srcs, *, type, **_):
    a, b, c = _srcs(srcs, type)
    bits, sg = INT[type]
    va, vb = value(a, type), value(b, type)
    if bits == 64:
        ua, ub = a.astype(np.uint64), b.astype(np.uint64)
        lt = va < vb
        d = np.where(lt, ub - ua, ua - ub)
    else:
        d = np.abs(va - vb).astype(np.uint64)
    return wrap(d + c.astype(np.uint64), bits)


def _bytes(x: np.ndarray, sg: bool) -> np.ndarray:
    """32-bit words -> (..., 4) int32 array of their bytes, byte 0 first (little-endian)."""
    x = np.ascontiguousarray(np.asarray(x, np.uint32).astype("<u4", copy=False))
    b = x.view(np.int8 if sg else np.uint8).reshape(x.shape + (4,))
    return b.astype(np.int32)


def _dp4a(srcs, *, type, **_):
    at, bt = type.split(".")
    a, b, c = (reg(s, 32) for s in srcs)
    a, b, c = np.broadcast_arrays(a, b, c)
    acc = (_bytes(a, at == "s32") * _bytes(b, bt == "s32")).sum(axis=-1, dtype=np.int64)
    return (acc.astype(np.uint32) + c).astype(np.uint32)  # wraps modulo 2**32


def _dp2a(srcs, *, type, mode, **_):
    at, bt = type.split(".")
    a, b, c = (reg(s, 32) for s in srcs)
    al, ah = halves(a)
    ha = [signed(al, 16), signed(ah, 16)] if at == "s32" else [al.astype(np.int64), ah.astype(np.int64)]
    pb = _bytes(b, bt == "s32")
    sel = (pb[..., 0], pb[..., 1]) if mode == "lo" else (pb[..., 2], pb[..., 3])
    acc = ha[0] * sel[0] + ha[1] * sel[1]
    cv = signed(c, 32) if "s32" in (at, bt) else c.astype(np.int64)
    return wrap(acc + cv, 32)


_DP_TYPES = ("u32.u32", "u32.s32", "s32.u32", "s32.s32")

# ---------------------------------------------------------------------------------------------
# Fast paths bound at decode (OpSpec.specialize): operands already of the type's width wrap by
# themselves in NumPy's unsigned arithmetic; others take the generic path.
# ---------------------------------------------------------------------------------------------

_SIGNED_VIEW = {16: np.int16, 32: np.int32, 64: np.int64}


def _spec_wrapping(op):
    """specialize for add/sub (no .sat), mul.lo and mad.lo on scalar integer types."""
    def specialize(type, mods, nsrc, generic):
        if op in ("mul", "mad") and mods.get("mode") == "wide" and type in INT and not mods.get("sat"):
            return _wide(op, type, generic)
        if type not in INT or mods.get("sat") or op in ("mul", "mad") and mods.get("mode") != "lo":
            return None
        dt = np.dtype(UINT[INT[type][0]])
        if op == "add":
            def f(a, b):
                return a + b if a.dtype is dt and b.dtype is dt else generic(a, b)
        elif op == "sub":
            def f(a, b):
                return a - b if a.dtype is dt and b.dtype is dt else generic(a, b)
        elif op == "mul":
            def f(a, b):
                return a * b if a.dtype is dt and b.dtype is dt else generic(a, b)
        else:
            def f(a, b, c):
                if a.dtype is dt and b.dtype is dt and c.dtype is dt:
                    p = a * b
                    return np.add(p, c, out=p) if p.__class__ is np.ndarray and p.shape == np.shape(c) \
                        else p + c
                return generic(a, b, c)
        return f
    return specialize


def _wide(op, type, generic):
    """mul.wide / mad.wide on 16- and 32-bit words: the product in the doubled width is exact
    (signed operands through signed views), and adding c there wraps as PTX does."""
    bits, sg = INT[type]
    if bits not in (16, 32):
        return None
    dt, wdt = np.dtype(UINT[bits]), np.dtype(UINT[2 * bits])
    st, wst = _SIGNED_VIEW[bits], _SIGNED_VIEW[2 * bits]

    if sg:
        def prod(a, b):
            return (a.view(st).astype(wst) * b.view(st).astype(wst)).view(wdt)
    else:
        def prod(a, b):
            return a.astype(wdt) * b.astype(wdt)
    if op == "mul":
        def f(a, b):
            return prod(a, b) if a.dtype is dt and b.dtype is dt else generic(a, b)
    else:
        def f(a, b, c):
            if a.dtype is dt and b.dtype is dt and c.dtype is wdt:
                return prod(a, b) + c
            return generic(a, b, c)
    return f


def _spec_minmax(is_max):
    def specialize(type, mods, nsrc, generic):
        if type not in INT or mods.get("relu"):
            return None
        bits, sg = INT[type]
        dt = np.dtype(UINT[bits])
        pick = np.maximum if is_max else np.minimum
        if not sg:
            def f(a, b):
                return pick(a, b) if a.dtype is dt and b.dtype is dt else generic(a, b)
        else:
            st = _SIGNED_VIEW[bits]

            def f(a, b):
                if a.dtype is dt and b.dtype is dt:
                    return np.asarray(pick(a.view(st), b.view(st))).view(dt)
                return generic(a, b)
        return f
    return specialize


OPS: dict[str, OpSpec] = {
    "add": OpSpec("add", INT_TYPES + ("s16x2", "u16x2"), _add, 2, modifiers={"sat": ("sat",)},
                  check=_check_sat_s32, specialize=_spec_wrapping("add"),
                  doc="a + b modulo 2**n; .sat: s32 saturating"),
    "sub": OpSpec("sub", INT_TYPES, _sub, 2, modifiers={"sat": ("sat",)},
                  check=_check_sat_s32, specialize=_spec_wrapping("sub"),
                  doc="a - b modulo 2**n; .sat: s32 saturating"),
    "mul": OpSpec("mul", INT_TYPES, _mul, 2, modifiers={"mode": ("lo", "hi", "wide")},
                  required=("mode",), check=_check_wide, specialize=_spec_wrapping("mul"),
                  doc=".lo/.hi: low/high half of the 2n-bit product; .wide: the 2n-bit product"),
    "mad": OpSpec("mad", INT_TYPES, _mad, 3, modifiers={"mode": ("lo", "hi", "wide"), "sat": ("sat",)},
                  required=("mode",), check=_check_mad, specialize=_spec_wrapping("mad"),
                  doc="(a*b).lo/.hi + c modulo 2**n; .wide: 2n-bit a*b + c; .hi.sat.s32 saturates"),
    "div": OpSpec("div", INT_TYPES, _div, 2, doc="truncating quotient; x/0 = all ones"),
    "rem": OpSpec("rem", INT_TYPES, _rem, 2, doc="remainder with the dividend's sign; x%0 = all ones"),
    "abs": OpSpec("abs", S_TYPES, _abs, 1, doc="|a|; abs(MIN) = MIN"),
    "neg": OpSpec("neg", S_TYPES, _neg, 1, doc="-a modulo 2**n"),
    "min": OpSpec("min", INT_TYPES + ("s16x2", "u16x2"), _min, 2, modifiers={"relu": ("relu",)},
                  check=_check_relu, specialize=_spec_minmax(False),
                  doc="minimum; .relu (s32, s16x2): then max with 0"),
    "max": OpSpec("max", INT_TYPES + ("s16x2", "u16x2"), _max, 2, modifiers={"relu": ("relu",)},
                  check=_check_relu, specialize=_spec_minmax(True),
                  doc="maximum; .relu (s32, s16x2): then max with 0"),
    "sad": OpSpec("sad", INT_TYPES, _sad, 3, doc="c + |a - b| modulo 2**n"),
    "dp4a": OpSpec("dp4a", _DP_TYPES, _dp4a, 3, min_sm=61, min_ptx=(5, 0),
                   doc="c + sum of the four byte products of a and b"),
    "dp2a": OpSpec("dp2a", _DP_TYPES, _dp2a, 3, modifiers={"mode": ("lo", "hi")},
                   required=("mode",), min_sm=61, min_ptx=(5, 0),
                   doc="c + the two 16-bit halves of a times bytes 0,1 (.lo) or 2,3 (.hi) of b"),
}
