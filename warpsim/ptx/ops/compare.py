"""Comparison and selection: setp, set, selp, slct.

Comparisons as data (``_CMP``): the ordered float comparisons are False when an operand is
NaN, the unordered ``*u`` ones True; ``num``/``nan`` test for NaN; integers compare signed or
unsigned by type (``lo ls hi hs`` are the unsigned spellings), bit types only ``eq``/``ne``.
``.ftz`` reads subnormal float operands as zeros.  An optional ``.and/.or/.xor`` combines the
result with a predicate operand ``c``.

``setp`` returns the pair ``(p, q)`` always: for scalar types ``q`` is the combination of the
*negated* comparison with ``c`` (written only by the ``p|q`` form); for f16x2/bf16x2 ``p`` is
the low lane's result and ``q`` the high lane's.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError

from warpsim.ptx.bits import INT, halves, pack, reg, value
from warpsim.ptx.fp import FORMATS, decode, flush, values
from warpsim.ptx.optable import OpSpec

_ORDERED = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}
_UNSIGNED_ALIAS = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
FLOAT_CMP = tuple(_ORDERED) + ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
INT_CMP = tuple(_ORDERED) + tuple(_UNSIGNED_ALIAS)
BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
INT_TYPES = ("b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64")
FLOAT_TYPES = ("f32", "f64", "f16", "bf16")
PACKED = ("f16x2", "bf16x2")


def float_compare(cmp: str, a: np.ndarray, b: np.ndarray, typ: str, ftz=None) -> np.ndarray:
    """Compare float words of format ``typ`` (f16/bf16/f32/f64)."""
    f = FORMATS[typ]
    a, b = reg(a, f.bits), reg(b, f.bits)
    if ftz:
        a, b = flush(a, f), flush(b, f)
    x, y = values(a, f), values(b, f)
    unordered = np.isnan(x) | np.isnan(y)
    if cmp == "num":
        return ~unordered
    if cmp == "nan":
        return unordered
    if cmp in _ORDERED:
        return _ORDERED[cmp](x, y) & ~unordered
    return _ORDERED[cmp[:-1]](x, y) | unordered


def int_compare(cmp: str, a: np.ndarray, b: np.ndarray, typ: str) -> np.ndarray:
    bits = INT[typ][0]
    va, vb = value(reg(a, bits), typ), value(reg(b, bits), typ)
    return _ORDERED[_UNSIGNED_ALIAS.get(cmp, cmp)](va, vb)


def _lanes_compare(cmp, a, b, typ, ftz):
    """(low, high) results of a packed comparison, or (t, t) for scalar types."""
    if typ in PACKED:
        (al, ah), (bl, bh) = halves(reg(a, 32)), halves(reg(b, 32))
        base = typ[:-2]
        return float_compare(cmp, al, bl, base, ftz), float_compare(cmp, ah, bh, base, ftz)
    if typ in FLOAT_TYPES:
        t = float_compare(cmp, a, b, typ, ftz)
    else:
        t = int_compare(cmp, a, b, typ)
    return t, t


def _combine(t, boolop, c):
    return t if boolop is None else BOOL[boolop](t, np.asarray(c, bool))


def _setp(srcs, *, type, cmp, boolop=None, ftz=None, **_):
    a, b = srcs[0], srcs[1]
    c = srcs[2] if len(srcs) > 2 else None
    lo, hi = _lanes_compare(cmp, a, b, type, ftz)
    if type in PACKED:
        return _combine(lo, boolop, c), _combine(hi, boolop, c)
    return _combine(lo, boolop, c), _combine(~lo, boolop, c)


def _check_cmp(typ, mods):
    cmp, ftz = mods.get("cmp"), mods.get("ftz")
    base = typ.split(".")[-1]
    if base in FLOAT_TYPES + PACKED:
        if cmp not in FLOAT_CMP:
            raise PtxError(f"comparison .{cmp} is not defined on .{base}")
        if ftz and base not in ("f32", "f16", "f16x2"):
            raise PtxError(f".ftz is not legal on .{base} comparisons")
        return
    if ftz:
        raise PtxError(f".ftz is not legal on .{base} comparisons")
    if typ.startswith("b") and cmp not in ("eq", "ne"):
        raise PtxError(f"bit-size type .{base} compares with .eq/.ne only, not .{cmp}")
    if base.startswith("s") and cmp in _UNSIGNED_ALIAS:
        raise PtxError(f".{cmp} is an unsigned comparison; not legal on .{base}")
    if cmp not in INT_CMP:
        raise PtxError(f"comparison .{cmp} is not defined on integer type .{base}")


_TRUE = {"u32": 0xFFFFFFFF, "s32": 0xFFFFFFFF, "f32": 0x3F800000, "u16": 0xFFFF, "s16": 0xFFFF,
         "f16": 0x3C00, "bf16": 0x3F80}
_DWIDTH = {"u32": 32, "s32": 32, "f32": 32, "u16": 16, "s16": 16, "f16": 16, "bf16": 16}


def _set(srcs, *, type, cmp, boolop=None, ftz=None, **_):
    dtype, stype = type.split(".")
    a, b = srcs[0], srcs[1]
    c = srcs[2] if len(srcs) > 2 else None
    lo, hi = _lanes_compare(cmp, a, b, stype, ftz)
    lo, hi = _combine(lo, boolop, c), _combine(hi, boolop, c)
    if stype in PACKED:
        one = {"f16x2": 0x3C00, "bf16x2": 0x3F80}.get(dtype, 0xFFFF)
        return pack(np.where(lo, np.uint16(one), np.uint16(0)), np.where(hi, np.uint16(one), np.uint16(0)))
    w = _DWIDTH[dtype]
    dt = {16: np.uint16, 32: np.uint32}[w]
    return np.where(lo, dt(_TRUE[dtype]), dt(0))


_SET_TYPES = tuple(f"{d}.{s}" for d in ("u32", "s32", "f32") for s in INT_TYPES + ("f32", "f64")) \
    + tuple(f"{d}.{s}" for d in ("u16", "s16", "u32", "s32") for s in ("f16", "bf16")) \
    + tuple(f"{d}.{s}" for s in INT_TYPES + ("f16", "f32", "f64") for d in ("f16", "bf16")) \
    + ("f16x2.f16x2", "u32.f16x2", "s32.f16x2", "bf16x2.bf16x2", "u32.bf16x2", "s32.bf16x2")


def _check_set(typ, mods):
    d, s = typ.split(".")
    _check_cmp(s, mods)
    if d in ("f16", "bf16") and mods.get("ftz") and d == "bf16":
        raise PtxError(".ftz is not legal on set.bf16")


def _selp(srcs, *, type, **_):
    w = INT[type][0] if type in INT else {"f32": 32, "f64": 64}[type]
    a, b = reg(srcs[0], w), reg(srcs[1], w)
    return np.where(np.asarray(srcs[2], bool), a, b)


def _slct(srcs, *, type, ftz=None, **_):
    dtype, ctype = type.split(".")
    w = INT[dtype][0] if dtype in INT else {"f32": 32, "f64": 64}[dtype]
    a, b = reg(srcs[0], w), reg(srcs[1], w)
    if ctype == "s32":
        ge = value(reg(srcs[2], 32), "s32") >= 0
    else:
        c = reg(srcs[2], 32)
        if ftz:
            c = flush(c, FORMATS["f32"])
        ge = decode(c, FORMATS["f32"]) >= 0  # NaN -> False (b); -0 >= 0
    return np.where(ge, a, b)


def _check_slct(typ, mods):
    if mods.get("ftz") and not typ.endswith(".f32"):
        raise PtxError(".ftz applies to slct with an .f32 selector only")


# --- fast paths bound at decode (OpSpec.specialize) -------------------------------------------
_UDT = {16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
_SDT = {16: np.int16, 32: np.int32, 64: np.int64}
_FDT = {"f32": np.float32, "f64": np.float64}


def _spec_setp(type, mods, nsrc, generic):
    """setp writing p only, without .boolop/.ftz, on integer types and f32/f64: one NumPy
    comparison on the words viewed as the type (ordered float comparisons are False on NaN in
    NumPy too, except ne; the unordered ones add the NaN test)."""
    cmp = mods.get("cmp")
    if mods.get("boolop") or mods.get("ftz") or nsrc != 2:
        return None
    if type in INT:
        bits, sg = INT[type]
        dt, view = _UDT[bits], (_SDT[bits] if sg else None)
        op = _ORDERED[_UNSIGNED_ALIAS.get(cmp, cmp)]
    elif type in _FDT and cmp in _ORDERED and cmp != "ne":
        dt, view, op = _UDT[32 if type == "f32" else 64], _FDT[type], _ORDERED[cmp]
    else:
        return None

    def f(a, b):
        if a.dtype is not dt or b.dtype is not dt:
            return generic(a, b)
        if view is not None:
            a, b = a.view(view), b.view(view)
        return op(a, b)
    return f


def _spec_selp(type, mods, nsrc, generic):
    """selp on words of the type's width and a predicate: one np.where."""
    w = INT[type][0] if type in INT else {"f32": 32, "f64": 64}[type]
    dt = _UDT.get(w)
    if dt is None:
        return None
    boolean = np.dtype(np.bool_)

    def f(a, b, c):
        if a.dtype is dt and b.dtype is dt and c.dtype is boolean:
            return np.where(c, a, b)
        return generic(a, b, c)
    return f


_SEL_TYPES = INT_TYPES + ("f32", "f64")
_BOOLMODS = {"cmp": FLOAT_CMP + tuple(_UNSIGNED_ALIAS), "boolop": tuple(BOOL), "ftz": ("ftz",)}

OPS: dict[str, OpSpec] = {
    "setp": OpSpec("setp", INT_TYPES + FLOAT_TYPES + PACKED, _setp, 2, ndst=2,
                   modifiers=_BOOLMODS, required=("cmp",), check=_check_cmp,
                   specialize=_spec_setp,
                   doc="p = (a cmp b) [boolop c]; returns (p, q); a third source c with .boolop"),
    "set": OpSpec("set", _SET_TYPES, _set, 2, modifiers=_BOOLMODS, required=("cmp",),
                  check=_check_set,
                  doc="d = all ones / 1.0 if (a cmp b) [boolop c] else 0; type 'dtype.stype'"),
    "selp": OpSpec("selp", _SEL_TYPES, _selp, 3, specialize=_spec_selp,
                   doc="d = c ? a : b (c a predicate)"),
    "slct": OpSpec("slct", tuple(f"{d}.{c}" for d in _SEL_TYPES for c in ("s32", "f32")), _slct,
                   3, modifiers={"ftz": ("ftz",)}, check=_check_slct,
                   doc="d = (c >= 0) ? a : b; an f32 NaN selects b"),
}
