"""Approximate instructions: ex2 lg2 rcp rsqrt sqrt sin cos tanh ``.approx``, div.approx/.full.

These run on the GPU's special-function unit, whose tables are not public.  The model here is
the *correctly rounded* value of the mathematical function (computed in float64, rounded once
to the destination format), with the special values of the PTX ISA (``ex2(-Inf) = +0``,
``lg2(0) = -Inf``, ``rcp(-0) = -Inf``, ``rsqrt`` of a negative number NaN, ...), ``.ftz``
flushing subnormal inputs and results, and the canonical NaN of the format.  It is **not** the
hardware's bit pattern: its measured distance from the H100, in ulps of the destination format,
is in ``MEASURED_ULPS`` and ``MAX_ABS_ERROR`` (and docs/ptx-arith.md); every OpSpec here has
``exact=False``.  sin/cos beyond |x| = 100 pi: the H100's range reduction is not reproduced
(results may differ completely).

Keys: opcodes that exist only in approximate form (``ex2``, ``lg2``, ``rsqrt``, ``sin``,
``cos``, ``tanh``) are plain; the approximate variants of opcodes with exact forms are keyed
``rcp.approx``, ``sqrt.approx``, ``div.approx``, ``div.full``.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError

from warpsim.ptx.bits import reg
from warpsim.ptx.ops.floating import NAN64_INVALID, lanes
from warpsim.ptx.fp import F32, F64, FORMATS, decode, flush, round_to
from warpsim.ptx.optable import OpSpec


def _ex2(x):
    return np.exp2(x)


def _lg2(x):
    return np.log2(x)


def _rcp(x):
    return 1.0 / x


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _sqrt(x):
    return np.sqrt(x)


_INV_2PI_F32 = float(np.float32(1 / (2 * np.pi)))


def _turns(x):
    """The angle in turns as the H100 reduces it: x * (1/2pi) rounded to f32, its fraction
    kept to 28 bits (a fit to the hardware: huge arguments give sin 0 / cos 1, tiny ones 0)."""
    t = (x * _INV_2PI_F32).astype(np.float32).astype(np.float64)
    frac = t - np.rint(t)
    return np.round(frac * 2.0**28) / 2.0**28


def _sin(x):
    return np.sin(2 * np.pi * _turns(x))


def _cos(x):
    return np.cos(2 * np.pi * _turns(x))


_FUNCS = {"ex2": _ex2, "lg2": _lg2, "rcp": _rcp, "rsqrt": _rsqrt, "sqrt": _sqrt,
          "sin": _sin, "cos": _cos, "tanh": np.tanh}

#: Functions whose H100 results fit truncation (round toward zero) better than rounding to
#: nearest: ex2.approx.f16 (2**-24.0156 gives 0, 2**0.00072 gives 1.0).
_TRUNCATED = {("ex2", "f16")}


def model(name: str, srcs, *, type, ftz=None):
    """Correctly rounded ``name`` of one operand of format ``type`` (f16, bf16, f32, f64)."""
    f = FORMATS[type]
    b = reg(srcs[0], f.bits)
    if f is F64 and ftz:
        return _hi_word(name, b)
    if ftz:
        b = flush(b, f)
    x = decode(b, f)
    with np.errstate(all="ignore"):
        y = _FUNCS[name](x)
    if f is F64:  # a NaN operand passes quietened; invalid operands give the f64 default NaN
        out = np.where(np.isnan(y), np.uint64(NAN64_INVALID), np.asarray(y, np.float64).view(np.uint64))
        return np.where(np.isnan(x), b | np.uint64(1 << 51), out)
    return round_to(y, f, "rz" if (name, type) in _TRUNCATED else "rn", ftz=bool(ftz))


def _hi_word(name, b):
    """rcp/rsqrt.approx.ftz.f64: the special-function unit reads only the upper 32 bits of
    the operand and writes only the upper 32 bits of the result (the low word is zero).
    Model: the function of the operand (Inf/NaN decided by its upper word alone, so
    0x7FF0000000000001 reads as +Inf), rounded to nearest on the upper word; subnormal
    operands and results flush to zero; NaN -> 0x7FFFFFFF00000000."""
    hi = (b >> np.uint64(32)) << np.uint64(32)
    special = (hi & np.uint64(0x7FF0000000000000)) == np.uint64(0x7FF0000000000000)
    x = flush(np.where(special, hi, b), F64).view(np.float64)  # Inf/NaN read from the high word
    with np.errstate(all="ignore"):
        y = _FUNCS[name](x)
    out = _round_hi(y)
    return np.where(np.isnan(y), np.uint64(0x7FFFFFFF00000000), out)


def _round_hi(y):
    """float64 values rounded to nearest (ties even) at bit 32 of the pattern; subnormal
    results -> zero of their sign; overflow -> Inf."""
    u = np.asarray(y, np.float64).view(np.uint64)
    sign = u & np.uint64(1 << 63)
    mag = u & np.uint64((1 << 63) - 1)
    inf_or_nan = mag >= np.uint64(0x7FF0000000000000)
    rounded = (mag + np.uint64(0x7FFFFFFF) + ((mag >> np.uint64(32)) & np.uint64(1))) \
        & np.uint64(0xFFFFFFFF00000000)
    rounded = np.where(inf_or_nan, mag, rounded)
    rounded = np.where(rounded < np.uint64(0x0010000000000000), np.uint64(0), rounded)
    return rounded | sign


def _unary(name):
    return lanes(lambda srcs, *, type, ftz=None, **_: model(name, srcs, type=type, ftz=ftz))


def _div_approx(srcs, *, type, ftz=None, **_):
    """a * (1/b).  .ftz: the reciprocal (correctly rounded model) flushed when subnormal,
    then the product; without .ftz, a/b rounded (the compiler scales subnormal operands).
    Either way |b| > 2**126 gives a zero of the product's sign (NaN for an infinite a), as
    the ISA states."""
    f = F32
    a, b = (reg(s, 32) for s in srcs)
    if ftz:
        a, b = flush(a, f), flush(b, f)
    xa, xb = decode(a, f), decode(b, f)
    with np.errstate(all="ignore"):
        if ftz:
            y = xa * decode(round_to(1.0 / xb, f, "rn", ftz=True), f)
        else:
            y = np.where(np.abs(xb) > 2.0**126, xa * np.copysign(0.0, xb), xa / xb)
    return round_to(y, f, "rn", ftz=bool(ftz))


def _div_full(srcs, *, type, ftz=None, **_):
    f = F32
    a, b = (reg(s, 32) for s in srcs)
    if ftz:
        a, b = flush(a, f), flush(b, f)
    with np.errstate(all="ignore"):
        y = decode(a, f) / decode(b, f)
    return round_to(y, f, "rn", ftz=bool(ftz))


def _check_f32_only(op):
    def check(typ, mods):
        if typ != "f32":
            raise PtxError(f"{op}.approx is defined on .f32 only, not .{typ}")
    return check


def _check_ex2(typ, mods):
    if typ in ("bf16", "bf16x2") and not mods.get("ftz"):
        raise PtxError(f"ex2.approx.{typ} needs .ftz")
    if typ in ("f16", "f16x2") and mods.get("ftz"):
        raise PtxError(f"ex2.approx.{typ} takes no .ftz")


def _check_tanh(typ, mods):
    if mods.get("ftz"):
        raise PtxError("tanh.approx takes no .ftz")


def _check_f64(op, ftz_required):
    def check(typ, mods):
        if typ == "f64" and ftz_required and not mods.get("ftz"):
            raise PtxError(f"{op}.approx.f64 needs .ftz")
    return check


#: Distance of the model from the H100 (hold-out run, seed 12: 8,192 sampled words per form,
#: all 65,536 patterns for the 16-bit forms): form -> (max ulps of the destination format,
#: fraction of words equal).  ulps are ordered-bit-pattern distances; where the hardware's
#: error is absolute (sin, cos, lg2 near 1) the ulp count is large and ``MAX_ABS_ERROR``
#: states the absolute bound.  The .ftz.f64 forms produce 20-bit results: 2**32 ulps of
#: f64 are one ulp of their upper word.
MEASURED_ULPS = {
    "div.approx.f32": (2, 0.819), "div.approx.ftz.f32": (2, 0.931),
    "div.full.f32": (2, 0.827), "div.full.ftz.f32": (2, 0.835),
    "ex2.approx.f32": (2, 0.957), "ex2.approx.ftz.f32": (2, 0.956),
    "lg2.approx.f32": (23947836, 0.714), "lg2.approx.ftz.f32": (23947836, 0.737),
    "rcp.approx.f32": (1, 0.901), "rcp.approx.ftz.f32": (1, 0.908),
    "rsqrt.approx.f32": (1, 0.849), "rsqrt.approx.ftz.f32": (1, 0.867),
    "sqrt.approx.f32": (1, 0.895), "sqrt.approx.ftz.f32": (1, 0.910),
    "sin.approx.f32": (1686974770, 0.667), "sin.approx.ftz.f32": (1686974770, 0.657),
    "cos.approx.f32": (2130706432, 0.719), "cos.approx.ftz.f32": (2130706432, 0.727),
    "tanh.approx.f32": (119, 0.944),
    "tanh.approx.f16": (1, 0.775), "tanh.approx.f16x2": (1, 0.601),
    "tanh.approx.bf16": (1, 0.968), "tanh.approx.bf16x2": (1, 0.937),
    "ex2.approx.f16": (1, 0.906), "ex2.approx.f16x2": (1, 0.820),
    "ex2.approx.ftz.bf16": (1, 0.947), "ex2.approx.ftz.bf16x2": (1, 0.896),
    "rcp.approx.ftz.f64": (2 << 32, 0.766), "rsqrt.approx.ftz.f64": (1 << 32, 0.807),
    "rsqrt.approx.f64": (1, 0.716),
}

#: Absolute error bounds measured where ulps mislead: (form, |x| range) -> max |hw - model|.
MAX_ABS_ERROR = {
    ("sin.approx.f32", "|x| <= pi"): 3.3e-7, ("sin.approx.f32", "pi < |x| <= 100 pi"): 1.7e-5,
    ("cos.approx.f32", "|x| <= pi"): 3.3e-7, ("cos.approx.f32", "pi < |x| <= 100 pi"): 2.4e-5,
    ("lg2.approx.f32", "0.5 <= x <= 2"): 1.8e-7, ("lg2.approx.f32", "all x"): 1.6e-5,
}

_APPROX = {"approx": ("approx",)}
_FTZ = {"ftz": ("ftz",)}
_H = ("f16", "f16x2", "bf16", "bf16x2")


def _spec(op, types, fn, nsrc=1, check=None, doc=""):
    return OpSpec(op, types, fn, nsrc, modifiers={**_APPROX, **_FTZ}, required=("approx",),
                  check=check, exact=False, doc=doc)


OPS: dict[str, OpSpec] = {
    "ex2": _spec("ex2", ("f32",) + _H, _unary("ex2"), check=_check_ex2, doc="2**a"),
    "lg2": _spec("lg2", ("f32",), _unary("lg2"), doc="log2(a)"),
    "rsqrt": _spec("rsqrt", ("f32", "f64"), _unary("rsqrt"), check=_check_f64("rsqrt", False),
                   doc="1/sqrt(a)"),
    "sin": _spec("sin", ("f32",), _unary("sin"), doc="sin(a)"),
    "cos": _spec("cos", ("f32",), _unary("cos"), doc="cos(a)"),
    "tanh": _spec("tanh", ("f32",) + _H, _unary("tanh"), check=_check_tanh, doc="tanh(a)"),
    "rcp.approx": OpSpec("rcp", ("f32", "f64"), _unary("rcp"), 1, modifiers=_FTZ,
                         check=_check_f64("rcp", True), exact=False, doc="1/a"),
    "sqrt.approx": OpSpec("sqrt", ("f32",), _unary("sqrt"), 1, modifiers=_FTZ,
                          check=_check_f32_only("sqrt"), exact=False, doc="sqrt(a)"),
    "div.approx": OpSpec("div", ("f32",), _div_approx, 2, modifiers=_FTZ, exact=False,
                         doc="a * (1/b), modelled as a/b rounded"),
    "div.full": OpSpec("div", ("f32",), _div_full, 2, modifiers=_FTZ, exact=False,
                       doc="full-range approximate a/b, modelled as a/b rounded"),
}
