"""The engine's fast paths agree with its general ones.

truncated_dot_add takes shortcuts that must not change a bit: float32 products for narrow
operands (f16, fp8...) summed as int32; float32 products of row/column-scaled bf16 and tf32
operands (``short``); exponents read from a table of each value's top 16 bits; round toward
zero to f32 by masking.  Each is compared with the float64 path on the same inputs, on values
built to sit at the edges (exponent spreads at the rescaling limit, zeros, subnormals, huge C).
The general path itself is held to the H100 (tests/test_validation.py) and to the model's own
statement of the arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from warpsim.tensorcore import engine
from warpsim.facts import formats

HYP = settings(max_examples=60, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])

F, E_ZERO = 25, -133  # the sm_90 model's alignment, f32 D


def _step(a, b, c, *, emin, short=False, out="f32"):
    rounding = "rz" if out == "f32" else "rn"
    e_zero = E_ZERO if out == "f32" else -21
    return engine.truncated_dot_add(a, b, c, emin_a=emin, emin_b=emin, emin_c=-126, F=F,
                                    e_zero=e_zero, out=out, rounding=rounding, short=short)


def _values(draw, fmt, shape, lo, hi):
    """Values of ``fmt`` with exponents in [lo, hi], some zeros of either sign."""
    n = int(np.prod(shape))
    exps = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    sig = draw(st.lists(st.integers(0, 255), min_size=n, max_size=n))
    kind = draw(st.lists(st.sampled_from("vvvvvvz-"), min_size=n, max_size=n))
    x = np.array([(1 + s / 256) * 2.0**e for s, e in zip(sig, exps)])
    x = np.where(np.array(kind) == "z", 0.0, x)
    x = np.where(np.array(kind) == "-", -x, x)
    x = np.where(np.array(sig) % 3 == 0, -x, x)
    return formats.decode(formats.encode(x, fmt), fmt).reshape(shape)


@st.composite
def short_case(draw):
    fmt = draw(st.sampled_from(["bf16", "tf32"]))
    k, m, nn, w = 8, 4, 3, draw(st.integers(1, 3))
    lo = draw(st.integers(-130, 0))
    hi = lo + draw(st.sampled_from([10, 60, 70, 75, 76, 80, 120, 250]))
    a = _values(draw, fmt, (k, m, w), lo, min(hi, 127))
    b = _values(draw, fmt, (k, nn, w), lo, min(hi, 127))
    c = _values(draw, "f32", (m, nn, w), lo - 30, min(hi + 30, 127))
    return a, b, c


@HYP
@given(short_case())
def test_short_products_equal_float64_products(case):
    """bf16/tf32 products formed in float32 after row/column scaling (where the model's
    surviving terms stay exact) give the float64 path's words, across the rescaling limit."""
    a, b, c = case
    with np.errstate(all="ignore"):
        ref = _step(a, b, c, emin=-126)
        got = _step(a, b, c, emin=-126, short=True)
    np.testing.assert_array_equal(got.view(np.uint64), ref.view(np.uint64))


def test_short_path_is_taken_and_refused_at_its_limit():
    """Row max 2**35 (or 2**40) meets column max 2**40 while the terms' maximum exponent is 0:
    E - (ra + rb) is -75 (scaled path) or -80 (float64 path); both exact."""
    seen = []
    orig = engine._truncated_sum

    def spy(p, *args, off=None, **kw):
        seen.append(off is not None)
        return orig(p, *args, off=off, **kw)

    for big, scaled in ((35, True), (40, False)):
        a = np.zeros((3, 1, 1))
        b = np.zeros((3, 1, 1))
        a[:, 0, 0] = [2.0**big, 2.0**-40, 2.0**-10 * (1 + 2**-7)]
        b[:, 0, 0] = [2.0**-90, 2.0**40, -(2.0**-15) * (1 + 2**-7)]
        c = np.full((1, 1, 1), 2.0**-20)
        seen.clear()
        engine._truncated_sum = spy
        try:
            got = _step(a, b, c, emin=-126, short=True)
        finally:
            engine._truncated_sum = orig
        assert seen == [scaled]
        # the model, term by term: E = 0, quantum 2**-25
        q = 2.0**-25
        terms = [math.trunc(x * y / q) * q for x, y in zip(a[:, 0, 0], b[:, 0, 0])]
        exact = sum(terms) + math.trunc(c[0, 0, 0] / q) * q
        rz = np.float32(exact)  # then toward zero (exact > 0)
        if float(rz) > exact:
            rz = np.nextafter(rz, np.float32(0))
        assert got[0, 0, 0] == float(rz)


@st.composite
def narrow_case(draw):
    k, m, nn, w = 16, 2, 3, draw(st.integers(1, 4))
    codes = st.integers(0, 0xFFFF).filter(lambda x: (x & 0x7C00) != 0x7C00)  # finite f16
    a = np.array(draw(st.lists(codes, min_size=k * m * w, max_size=k * m * w)), np.uint16)
    b = np.array(draw(st.lists(codes, min_size=k * nn * w, max_size=k * nn * w)), np.uint16)
    cmode = draw(st.sampled_from(["zero", "small", "normal", "huge"]))
    c = _values(draw, "f32", (m, nn, w), *{"zero": (0, 0), "small": (-126, -100),
                                           "normal": (-20, 20), "huge": (120, 127)}[cmode])
    if cmode == "zero":
        c = np.zeros_like(c)
    out = draw(st.sampled_from(["f32", "f16"]))
    a = formats.decode(a, "f16").reshape(k, m, w)
    b = formats.decode(b, "f16").reshape(k, nn, w)
    return a, b, c, out


@HYP
@given(narrow_case())
def test_float32_int32_path_equals_float64_path(case):
    """f16 operands as float32 (products in float32, terms summed as int32, exponents as int8)
    give the float64 path's words, D f32 (RZ, masked) and f16 (RN)."""
    a, b, c, out = case
    with np.errstate(all="ignore"):
        ref = _step(a, b, c, emin=-14, out=out)
        got = _step(a.astype(np.float32), b.astype(np.float32), c, emin=-14, out=out)
    np.testing.assert_array_equal(got.view(np.uint64), ref.view(np.uint64))


def _exponent_reference(x: np.ndarray, emin: int) -> np.ndarray:
    out = []
    for v in x.ravel().tolist():
        out.append(-10**9 if v == 0 else max(math.frexp(v)[1] - 1, emin))
    return np.array(out).reshape(x.shape)


@pytest.mark.parametrize("fmt,emin", [("f16", -14), ("e4m3", -6), ("e2m1", 0)])
def test_exponent_table_for_every_narrow_code(fmt, emin):
    bits = formats.get_format(fmt).bits
    x = formats.decode(np.arange(1 << bits), fmt)
    x = x[np.isfinite(x)].astype(np.float32)
    got = engine.exponents(x, emin).astype(np.int64)
    ref = _exponent_reference(x.astype(np.float64), emin)
    zero = x == 0
    assert (got[zero] == engine.ZERO_EXP8).all()
    np.testing.assert_array_equal(got[~zero], ref[~zero])


def test_exponent_table_for_float64_values():
    rng = np.random.default_rng(7)
    x = np.ldexp(rng.uniform(1, 2, 4000) * rng.choice([-1, 1], 4000), rng.integers(-300, 300, 4000))
    x[::17] = 0.0
    x[::19] = -0.0
    for emin in (-126, -14, -1022):
        got = engine.exponents(x, emin).astype(np.int64)
        ref = _exponent_reference(x, emin)
        zero = x == 0
        assert (got[zero] == engine.ZERO_EXP).all()
        np.testing.assert_array_equal(got[~zero], ref[~zero])
        # a non-contiguous view reads the same exponents
        np.testing.assert_array_equal(engine.exponents(x[::3], emin), engine.exponents(x.copy()[::3].copy(), emin))


@pytest.mark.parametrize("cval", [2.0**-110 * (1 + 2**-20), -(2.0**-60) * 1.5, 2.0**-30, 0.0])
def test_all_zero_products_leave_a_tiny_c_untouched(cval):
    """A row of zeros makes every product of its outputs zero: the int8 exponent sum then has
    no real term, and E must be C's own exponent however small C is (f32 D, exact)."""
    rng = np.random.default_rng(3)
    a = formats.decode(formats.encode(rng.standard_normal((16, 2, 3)), "f16"), "f16")
    a[:, 0, :] = 0.0  # row 0: all products zero
    a[::2, 0, 1] = -0.0
    b = formats.decode(formats.encode(rng.standard_normal((16, 2, 3)), "f16"), "f16")
    c = np.full((2, 2, 3), cval)
    for dt in (np.float32, np.float64):
        got = _step(a.astype(dt), b.astype(dt), c, emin=-14)
        np.testing.assert_array_equal(got[0], np.full((2, 3), cval))


def test_fma_chain_leaves_its_inputs_alone_for_one_warp():
    """One warp's batch-last transpose can be a view of the input: the f64 chain quiets NaNs in
    its accumulator in place, which must not reach the caller's C (or a read-only view)."""
    a = np.ones((8, 4))
    b = np.ones((4, 8))
    c = np.full((8, 8), np.nan)
    c.view(np.uint64)[0, 0] = 0x7FF0000000000001  # a signalling NaN: the chain quiets it
    before = c.copy()
    d = engine.fma_chain(a, b, c)
    np.testing.assert_array_equal(c.view(np.uint64), before.view(np.uint64))
    assert int(d.view(np.uint64)[0, 0]) == 0x7FF8000000000001
    ro = np.broadcast_to(c, (1, 8, 8))  # read-only
    np.testing.assert_array_equal(engine.fma_chain(a, b, ro)[0].view(np.uint64), d.view(np.uint64))
