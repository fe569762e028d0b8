"""Approximate instructions: ex2 lg2 rcp rsqrt sqrt sin cos tanh ``.approx``, div.approx/.full.

These run on the GPU's special-function unit (MUFU).  On sm_90 they are modelled **bit-exactly**
from measured tables (:mod:`warpsim.ptx.sfu`), wrapped in the instruction sequences ptxas emits
around MUFU (read from the SASS; docs/ptx-arith.md):

* ``ex2.approx.f32``: ``x < -126`` -> ``MUFU.EX2(x * 0.5)`` squared (FMUL), so results may be
  subnormal; ``.ftz``: bare MUFU.EX2.
* ``lg2.approx.f32``: ``|x| < 2**-126`` -> ``MUFU.LG2(x * 2**24) - 24``; ``rsqrt``/``sqrt``:
  ``|x| < 2**-126`` -> operand times 2**24, result times 2**12 / 2**-12.
* ``rcp.approx.f32``: operand and result scaled by 2**24 (``|x| < 2**-126``) or 0.25
  (``|x| > 2**126``): ``s * MUFU.RCP(x * s)``.
* ``div.approx.f32``: ``a * MUFU.RCP(b)``, both operands times 2**24 when ``|b| < 2**-126``;
  ``div.full.f32`` also both times 0.25 when ``|b| > 2**126``; the ``.ftz`` forms use FMUL.FTZ.
* ``.f16``/``.bf16`` ex2 and tanh: MUFU.EX2/TANH.F16/BF16, ``x2`` forms one per half.
* ``rcp.approx.ftz.f64``/``rsqrt.approx.ftz.f64``: MUFU.RCP64H/RSQ64H (high words only);
  ``rsqrt.approx.f64``: RSQ64H and one DFMA correction step (subnormals scaled by 2**54; 0, Inf,
  NaN and negative operands take ptxas's slow path).

* ``sin/cos.approx(.ftz).f32``: ``FMUL.RZ`` by ``f32(1/2pi)`` (the angle in turns), then
  MUFU.SIN/COS (the ``.ftz`` forms compile alike); ``tanh.approx.f32``: bare MUFU.TANH.

``MEASURED_ULPS`` is 0 for every form, each proved equal to the hardware (docs/validation.md:
exhaustive over all 2**32 f32 inputs for the unary f32 forms, all 65,536 / 2**32 words for the
16-bit / x2 forms, all high words for the .ftz.f64 forms; sampled for div and
rsqrt.approx.f64).  :func:`model` (the correctly rounded function) is kept for forms no
measured table covers.

Keys: opcodes that exist only in approximate form (``ex2``, ``lg2``, ``rsqrt``, ``sin``,
``cos``, ``tanh``) are plain; the approximate variants of opcodes with exact forms are keyed
``rcp.approx``, ``sqrt.approx``, ``div.approx``, ``div.full``.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError

from warpsim.ptx import sfu, sfu_accel
from warpsim.ptx.bits import reg
from warpsim.ptx.fp import F64, FORMATS, decode, flush, round_to
from warpsim.ptx.ops.floating import NAN64_INVALID, lanes
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

def model(name: str, srcs, *, type, ftz=None):
    """Correctly rounded ``name`` of one operand of format ``type`` (f16, bf16, f32, f64): the
    documented-distance model for forms no measured table covers (every sm_90 form has one)."""
    f = FORMATS[type]
    b = reg(srcs[0], f.bits)
    if ftz:
        b = flush(b, f)
    x = decode(b, f)
    with np.errstate(all="ignore"):
        y = _FUNCS[name](x)
    if f is F64:  # a NaN operand passes quietened; invalid operands give the f64 default NaN
        out = np.where(np.isnan(y), np.uint64(NAN64_INVALID), np.asarray(y, np.float64).view(np.uint64))
        return np.where(np.isnan(x), b | np.uint64(1 << 51), out)
    return round_to(y, f, "rn", ftz=bool(ftz))


# ---------------------------------------------------------------------------------------------
# The ptxas sequences around MUFU, in exact f32/f64 arithmetic
# ---------------------------------------------------------------------------------------------

_U32 = np.uint32
_MIN_NORMAL = np.float32(2.0**-126)
_BIG = np.float32(2.0**126)


def _f(b):
    return np.asarray(b, _U32).view(np.float32)


def _ftz(x):
    sub = (x & _U32(0x7F800000)) == 0
    return np.where(sub, x & _U32(0x80000000), x) if sub.any() else x


def _fmul(a, b, ftz=False):
    """FMUL(.FTZ) on f32 bit patterns: IEEE round to nearest, canonical NaN.  ``ftz``: subnormal
    operands read as zero, and tininess is judged after rounding to 24 bits with an unbounded
    exponent: a product that rounds so to a magnitude below 2**-126 gives zero of its sign, one
    that rounds up to 2**-126 gives 2**-126."""
    a, b = np.asarray(a, _U32), np.asarray(b, _U32)
    with np.errstate(all="ignore"):
        if ftz:
            p = _f(_ftz(a)).astype(np.float64) * _f(_ftz(b))      # exact
            y = p.astype(np.float32)
            tiny = np.abs(p) < 2.0**-126
            if tiny.any():
                r = (p * 2.0**64).astype(np.float32)                 # 24 bits, exponent unbounded
                up = np.abs(r) >= np.float32(2.0**-62)
                y = np.where(tiny, np.copysign(np.where(up, np.float32(2.0**-126), np.float32(0)), p), y)
            y = np.asarray(y, np.float32).view(_U32)
        else:
            y = (_f(a) * _f(b)).view(_U32)
    nan = np.isnan(y.view(np.float32))
    return np.where(nan, _U32(0x7FFFFFFF), y) if nan.any() else y


def _const(v):
    return _U32(np.float32(v).view(_U32))


def _fadd(a, c):
    with np.errstate(all="ignore"):
        y = (_f(a) + np.float32(c)).view(_U32)
    return np.where(np.isnan(_f(y)), _U32(0x7FFFFFFF), y)


def _ex2_f32(b, ftz):
    y = sfu.ex2(b)
    if ftz:
        return y
    # FSETP.GEU x, -126 fails: MUFU.EX2 of x/2, squared (FMUL), so results can be subnormal
    half = _const(0.5)
    return sfu.patch(y, b, _f(b) < np.float32(-126),
                     lambda v: (lambda r: _fmul(r, r))(sfu.ex2(_fmul(v, half))))


def _scaled(fn, b, up, down=None, add=None):
    """``fn`` with subnormal operands (|x| < 2**-126, FSETP.GEU) times ``up`` first and the result
    times ``down`` (or plus ``add``) after."""
    def small(v):
        r = fn(_fmul(v, _const(up)))
        return _fmul(r, _const(down)) if down is not None else _fadd(r, add)
    return sfu.patch(fn(b), b, (np.asarray(b, _U32) & _U32(0x7F800000)) == 0, small)


def _rcp_f32(b, ftz):
    y = sfu.rcp(b)
    if ftz:
        return y
    ax = np.abs(_f(b))

    def scaled(v):   # s * MUFU.RCP(x * s): s = 2**24 (|x| < 2**-126) or 0.25 (|x| > 2**126)
        s = np.where(np.abs(_f(v)) > _BIG, _const(0.25), _const(2.0**24))
        return _fmul(s, sfu.rcp(_fmul(v, s)))
    return sfu.patch(y, b, (ax < _MIN_NORMAL) | (ax > _BIG), scaled)


_INV_2PI = _const(1 / (2 * np.pi))                              # 0x3E22F983


def _turns_rz(a):
    """``FMUL.RZ a, 1/2pi`` for MUFU.SIN/COS: the exact product's f64 bits truncated to 24
    significant bits, then narrowed exactly; in the f32 subnormal range the result may differ
    from FMUL.RZ in its low bits, which the unit ignores (it reads such angles as 0)."""
    with np.errstate(all="ignore"):
        p = _f(a).astype(np.float64) * np.float64(_f(_INV_2PI))
        return (p.view(np.uint64) & np.uint64(0xFFFFFFFFE0000000)).view(np.float64).astype(np.float32).view(_U32)


def _trig_f32(fn):
    """sin/cos.approx(.ftz).f32: FMUL.RZ by 1/2pi (turns), then MUFU.SIN/COS (the .ftz forms
    compile to the same SASS; the unit reads subnormal angles as 0 either way)."""
    return lambda b, ftz: fn(_turns_rz(b))


_F32_UNARY = {
    "sin": _trig_f32(sfu.sin),
    "cos": _trig_f32(sfu.cos),
    "tanh": lambda b, ftz: sfu.tanh(b),
    "ex2": _ex2_f32,
    "lg2": lambda b, ftz: sfu.lg2(b) if ftz else _scaled(sfu.lg2, b, 2.0**24, add=-24.0),
    "rcp": _rcp_f32,
    "rsqrt": lambda b, ftz: sfu.rsq(b) if ftz else _scaled(sfu.rsq, b, 2.0**24, 2.0**12),
    "sqrt": lambda b, ftz: sfu.sqrt(b) if ftz else _scaled(sfu.sqrt, b, 2.0**24, 2.0**-12),
}

_HALF = {("ex2", "f16"): "ex2_f16", ("ex2", "bf16"): "ex2_bf16", ("tanh", "f16"): "tanh_f16",
         ("tanh", "bf16"): "tanh_bf16"}


def _ro_sum(x, y):
    """x + y rounded to odd (binary64), branch-free: the TwoSum error decides whether the RN sum
    moves one ulp toward the exact value (only when it is inexact and even)."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    need = (err != 0) & ((s.view(np.int64) & 1) == 0)
    step = ((err > 0) == (s > 0)).astype(np.int64) * 2 - 1       # +-1 ulp toward err
    return (s.view(np.int64) + need * step).view(np.float64)


def _fma(a, b, c):
    """RN(a*b + c) in binary64 (DFMA) for operands whose pieces neither overflow nor underflow:
    Dekker's exact product, TwoSum, round-to-odd of the tail (Boldo & Melquiond)."""
    from warpsim.tensorcore.engine import two_prod

    p, e = two_prod(a, b)
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)
    return s + _ro_sum(t, e)


def _rsqrt_f64(b):
    """rsqrt.approx.f64: y0 = RSQ64H(x); e = 1 - x*y0*y0; y = y0 + (0.5 + 0.375 e)(y0 e)
    (DMUL/DFMA, round to nearest); positive subnormals scaled by 2**54 and the result by 2**27;
    ptxas's slow path for the rest: +-0 -> +-Inf, NaN -> quietened, negative -> default NaN,
    +Inf -> +0.  Evaluated on x scaled by an even power of two into [1, 4) (every step is
    exact under that scaling, and the FMAs stay far from the exponent limits, so the
    error-free transformations in :func:`_fma` are exact)."""
    b = np.asarray(b, np.uint64)
    hi = (b >> np.uint64(32)).astype(_U32)
    fast = (hi - _U32(0x00100000)) < _U32(0x7FE00000)
    sub = (hi < _U32(0x00100000)) & (b != np.uint64(0))
    with np.errstate(all="ignore"):
        xs = b.view(np.float64)
        if sub.any() or not fast.all():
            xs = np.where(sub, xs * 2.0**54, np.where(fast, xs, 2.0))
        u = xs.view(np.uint64)
        e2 = ((u >> np.uint64(52)) & np.uint64(2047)).astype(np.int64) - 1023
        p = e2 & 1
        x = ((u & np.uint64(0x800FFFFFFFFFFFFF)) | ((1023 + p).astype(np.uint64) << np.uint64(52))).view(np.float64)
        y0 = sfu.rsq64h(x.view(np.uint64)).view(np.float64)
        # e = DFMA(x, -y0*y0, 1): x*y0*y0 = p + err exactly (Dekker; y0*y0 is exact, 42 bits) and
        # 1 - p is exact (Sterbenz: p is within 2**-18 of 1), so one rounding gives the DFMA
        from warpsim.tensorcore.engine import two_prod

        pr, err = two_prod(x, y0 * y0)
        e = (1.0 - pr) - err
        c = _fma(e, np.full_like(e, 0.375), np.full_like(e, 0.5))
        y = _fma(c, y0 * e, y0)
        shift = (-(e2 - p) >> 1) + np.where(sub, 27, 0) if sub.any() else -(e2 - p) >> 1
        y = (y.view(np.int64) + (shift << 52)).view(np.uint64)   # y in (0.5, 1]: exact rescaling
    if fast.all():
        return y
    sign = b & np.uint64(1 << 63)
    x0 = b.view(np.float64)
    slow = np.where(b << np.uint64(1) == 0, sign | np.uint64(0x7FF0000000000000),
                    np.where(np.isnan(x0), b | np.uint64(1 << 51),
                             np.where(sign != 0, np.uint64(NAN64_INVALID),
                                      np.where(np.isinf(x0), np.uint64(0), y))))
    return np.where(fast, y, slow)


def _exact(name, srcs, type, ftz):
    """The bit-exact sm_90 semantics of ``name.approx`` on one operand (None where the
    form is not reproduced exactly)."""
    if type == "f32" and name in _F32_UNARY:
        return _F32_UNARY[name](reg(srcs[0], 32), bool(ftz))
    if (name, type) in _HALF:
        return sfu.half(_HALF[name, type], reg(srcs[0], 16))
    if type == "f64":
        b = reg(srcs[0], 64)
        if ftz:
            return (sfu.rcp64h if name == "rcp" else sfu.rsq64h)(b)
        if name == "rsqrt":
            return _rsqrt_f64(b)
    return None


_BITS = {"f32": 32, "f64": 64, "f16": 16, "bf16": 16, "f16x2": 32, "bf16x2": 32}


def _unary(name):
    def fn(srcs, *, type, ftz=None, **_):
        y = _exact(name, srcs, type, ftz)
        return model(name, srcs, type=type, ftz=ftz) if y is None else y
    numpy = lanes(fn)

    def run(srcs, *, type, ftz=None, **mods):
        form = f"{name}.approx{'.ftz' if ftz else ''}.{type}"
        if form in sfu_accel.FORMS:   # the compiled path (same bits), where it is built
            y = sfu_accel.run(form, reg(srcs[0], _BITS[type]))
            if y is not None:
                return y
        return numpy(srcs, type=type, ftz=ftz, **mods)
    return run


def div_factors(a, b, *, full: bool, ftz: bool):
    """The two operands of the final FMUL of ``div.approx``/``div.full`` (f32 bit patterns):
    ``(MUFU.RCP(b'), a')`` with ``a', b'`` the operands as ptxas scales them (times 2**24 when
    |b| < 2**-126, without .ftz; times 0.25 when |b| > 2**126, div.full only; FMUL.FTZ in the
    .ftz forms).  The quotient is ``FMUL(.FTZ)`` of the two; a contracted ``div + add`` is one
    FFMA of them (:mod:`warpsim.ptx.contract`)."""
    a, b = np.broadcast_arrays(reg(a, 32), reg(b, 32))
    ab = np.abs(_f(b))
    big = (ab > _BIG) if full else np.zeros(ab.shape, bool)
    small = (ab < _MIN_NORMAL) if not ftz else np.zeros(ab.shape, bool)
    if big.any() or small.any():
        s = np.where(big, _const(0.25), _const(2.0**24))
        lanes = big | small
        b = np.where(lanes, _fmul(b, s, ftz), b)
        a = np.where(lanes, _fmul(a, s, ftz), a)
    return _mufu_rcp(b), a


def _mufu_rcp(b):
    y = sfu_accel.mufu("rcp", b)
    return sfu.rcp(b) if y is None else y


def rcp_factors(b):
    """The two operands of the final FMUL of ``rcp.approx.f32`` (no .ftz): ``(s, MUFU.RCP(x *
    s))`` with ``s`` 2**24 (|x| < 2**-126), 0.25 (|x| > 2**126) or 1 (FSEL); the reciprocal is
    their FMUL, and a contracted ``rcp + add`` one FFMA of them."""
    b = reg(b, 32)
    ax = np.abs(_f(b))
    s = np.where(ax > _BIG, _const(0.25), np.where(ax < _MIN_NORMAL, _const(2.0**24), _const(1.0)))
    return s, _mufu_rcp(_fmul(b, s))


def _div_compiled(form, srcs):
    if form in sfu_accel.FORMS:
        return sfu_accel.run(form, reg(srcs[0], 32), reg(srcs[1], 32))
    return None


def _div_approx(srcs, *, type, ftz=None, **_):
    """div.approx: ``a * MUFU.RCP(b)``; without .ftz both operands times 2**24 first when
    |b| < 2**-126 (FMUL, subnormal results kept); .ftz: FMUL.FTZ."""
    y = _div_compiled(f"div.approx{'.ftz' if ftz else ''}.{type}", srcs)
    if y is not None:
        return y
    return _fmul(*div_factors(*srcs, full=False, ftz=bool(ftz)), ftz=bool(ftz))


def _div_full(srcs, *, type, ftz=None, **_):
    """div.full: as div.approx, and both operands times 0.25 first when |b| > 2**126
    (FMUL.FTZ in the .ftz form)."""
    y = _div_compiled(f"div.full{'.ftz' if ftz else ''}.{type}", srcs)
    if y is not None:
        return y
    return _fmul(*div_factors(*srcs, full=True, ftz=bool(ftz)), ftz=bool(ftz))


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


#: Distance of the model from the H100 per form: (max ulps of the destination format, fraction
#: of words equal): 0 ulps (1.0) for every form, each reproduced bit-exactly from the measured
#: MUFU tables (``EXACT_FORMS``; proof runs in docs/validation.md).
EXACT_FORMS = (
    "ex2.approx.f32", "ex2.approx.ftz.f32", "lg2.approx.f32", "lg2.approx.ftz.f32",
    "rcp.approx.f32", "rcp.approx.ftz.f32", "rsqrt.approx.f32", "rsqrt.approx.ftz.f32",
    "sqrt.approx.f32", "sqrt.approx.ftz.f32", "div.approx.f32", "div.approx.ftz.f32",
    "div.full.f32", "div.full.ftz.f32",
    "ex2.approx.f16", "ex2.approx.f16x2", "ex2.approx.ftz.bf16", "ex2.approx.ftz.bf16x2",
    "tanh.approx.f16", "tanh.approx.f16x2", "tanh.approx.bf16", "tanh.approx.bf16x2",
    "rcp.approx.ftz.f64", "rsqrt.approx.ftz.f64", "rsqrt.approx.f64",
    "sin.approx.f32", "sin.approx.ftz.f32", "cos.approx.f32", "cos.approx.ftz.f32", "tanh.approx.f32",
)
MEASURED_ULPS = {form: (0, 1.0) for form in EXACT_FORMS}

#: Absolute error bounds measured where ulps mislead (none left: every form is exact on sm_90).
MAX_ABS_ERROR: dict = {}

_APPROX = {"approx": ("approx",)}
_FTZ = {"ftz": ("ftz",)}
_H = ("f16", "f16x2", "bf16", "bf16x2")


def _spec(op, types, fn, nsrc=1, check=None, doc="", exact=True):
    return OpSpec(op, types, fn, nsrc, modifiers={**_APPROX, **_FTZ}, required=("approx",),
                  check=check, exact=exact, doc=doc)


OPS: dict[str, OpSpec] = {
    "ex2": _spec("ex2", ("f32",) + _H, _unary("ex2"), check=_check_ex2, doc="2**a"),
    "lg2": _spec("lg2", ("f32",), _unary("lg2"), doc="log2(a)"),
    "rsqrt": _spec("rsqrt", ("f32", "f64"), _unary("rsqrt"), check=_check_f64("rsqrt", False),
                   doc="1/sqrt(a)"),
    "sin": _spec("sin", ("f32",), _unary("sin"), doc="sin(a)"),
    "cos": _spec("cos", ("f32",), _unary("cos"), doc="cos(a)"),
    "tanh": _spec("tanh", ("f32",) + _H, _unary("tanh"), check=_check_tanh, doc="tanh(a)"),
    "rcp.approx": OpSpec("rcp", ("f32", "f64"), _unary("rcp"), 1, modifiers=_FTZ,
                         check=_check_f64("rcp", True), doc="1/a"),
    "sqrt.approx": OpSpec("sqrt", ("f32",), _unary("sqrt"), 1, modifiers=_FTZ,
                          check=_check_f32_only("sqrt"), doc="sqrt(a)"),
    "div.approx": OpSpec("div", ("f32",), _div_approx, 2, modifiers=_FTZ,
                         doc="a * MUFU.RCP(b) (operands scaled for subnormal b)"),
    "div.full": OpSpec("div", ("f32",), _div_full, 2, modifiers=_FTZ,
                       doc="a * MUFU.RCP(b), operands scaled for huge or subnormal b"),
}
