"""Tests of warpsim.facts.formats: exhaustive tables, RNE against independent references, rules."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from warpsim.errors import FormatError
from warpsim.facts.formats import (
    FORMATS, Format, decode, decompose, encode, get_format, is_inf, is_nan)
from warpsim.facts.isa import TYPE_BITS

SMALL_FLOATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "ue8m0", "ue4m3"]
HALF_FLOATS = ["f16", "bf16"]
INTS = ["s32", "s8", "u8", "s4", "u4", "b1"]
EXHAUSTIVE = HALF_FLOATS + SMALL_FLOATS + ["s8", "u8", "s4", "u4", "b1"]


# --------------------------------------------------------------------------------------------
# An independent decoder written from the PTX encoding facts (not from the Format fields)
# --------------------------------------------------------------------------------------------

SPEC = {  # name: (exp bits, fraction bits, bias, signed, IEEE-like Inf/NaN, NaN codes w/o sign)
    "f16": (5, 10, 15, True, True, None),
    "bf16": (8, 7, 127, True, True, None),
    "e4m3": (4, 3, 7, True, False, {0x7F}),
    "e5m2": (5, 2, 15, True, True, None),
    "e3m2": (3, 2, 3, True, False, set()),
    "e2m3": (2, 3, 1, True, False, set()),
    "e2m1": (2, 1, 1, True, False, set()),
}


def ref_decode(code: int, name: str) -> float:
    if name == "ue8m0":
        return math.nan if code == 0xFF else 2.0 ** (code - 127)
    if name == "ue4m3":
        return ref_decode(code & 0x7F, "e4m3")
    e, m, bias, signed, ieee, nans = SPEC[name]
    width = 1 + e + m
    s = (code >> (width - 1)) & 1
    ef = (code >> m) & ((1 << e) - 1)
    mf = code & ((1 << m) - 1)
    sign = -1.0 if s else 1.0
    if ieee and ef == (1 << e) - 1:
        return sign * math.inf if mf == 0 else math.nan
    if nans and (code & ((1 << (width - 1)) - 1)) in nans:
        return math.nan
    if ef == 0:
        return sign * mf * 2.0 ** (1 - bias - m)
    return sign * (1 + mf / 2 ** m) * 2.0 ** (ef - bias)


def same(a, b) -> bool:
    """Equal as floats, NaN equal to NaN, and -0.0 distinct from +0.0."""
    with np.errstate(invalid="ignore"):  # a signalling NaN widened raises 'invalid' on x86
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    eq = (a == b) & (np.signbit(a) == np.signbit(b))
    return bool(np.all(both_nan | eq))


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


def test_every_isa_type_has_a_format_with_the_isa_width():
    assert set(FORMATS) == set(TYPE_BITS)
    for name, bits in TYPE_BITS.items():
        f = get_format(name)
        assert f.name == name and f.bits == bits
        want = {64: np.uint64, 32: np.uint32, 16: np.uint16}.get(bits, np.uint8)
        assert f.storage_dtype == np.dtype(want)


@pytest.mark.parametrize(
    "name,emin,maxf,minsub,cnan",
    [
        ("f64", -1022, np.finfo(np.float64).max, 2.0 ** -1074, 0x7FFFFFFFFFFFFFFF),
        ("f32", -126, float(np.finfo(np.float32).max), 2.0 ** -149, 0x7FFFFFFF),
        ("tf32", -126, (2 - 2 ** -10) * 2.0 ** 127, 2.0 ** -136, 0x7FFFE000),
        ("f16", -14, 65504.0, 2.0 ** -24, 0x7FFF),
        ("bf16", -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 2.0 ** -133, 0x7FFF),
        ("e4m3", -6, 448.0, 2.0 ** -9, 0x7F),
        ("e5m2", -14, 57344.0, 2.0 ** -16, 0x7F),
        ("e3m2", -2, 28.0, 2.0 ** -4, None),
        ("e2m3", 0, 7.5, 0.125, None),
        ("e2m1", 0, 6.0, 0.5, None),
        ("ue8m0", -127, 2.0 ** 127, 2.0 ** -127, 0xFF),
        ("ue4m3", -6, 448.0, 2.0 ** -9, 0x7F),
    ],
)
def test_float_format_fields(name, emin, maxf, minsub, cnan):
    f = get_format(name)
    assert (f.kind, f.emin, f.max_finite, f.min_subnormal, f.canonical_nan) == (
        "float", emin, maxf, minsub, cnan)
    assert f.has_inf == (name in ("f64", "f32", "tf32", "f16", "bf16", "e5m2"))
    assert f.has_nan == (name not in ("e3m2", "e2m3", "e2m1"))
    assert f.signed == (not name.startswith("ue"))
    if cnan is not None:
        assert np.isnan(decode(cnan, f))


def test_int_format_fields():
    assert [get_format(n).kind for n in INTS] == ["int", "int", "uint", "int", "uint", "bits"]
    assert get_format("s4").max_finite == 7 and get_format("u4").max_finite == 15
    assert get_format("s32").storage_dtype == np.uint32


def test_get_format_errors_name_the_bad_name_and_list_valid_ones():
    with pytest.raises(FormatError) as ei:
        get_format("f8")
    msg = str(ei.value)
    assert "'f8'" in msg and "e4m3" in msg and "ue8m0" in msg
    assert isinstance(ei.value, ValueError)
    f = get_format("e2m1")
    assert get_format(f) is f and get_format(".e2m1") is f


# --------------------------------------------------------------------------------------------
# Exhaustive decode / encode
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HALF_FLOATS + SMALL_FLOATS)
def test_decode_matches_independent_formula_for_every_code(name):
    f = get_format(name)
    codes = np.arange(1 << f.bits)
    got = decode(codes, name)
    assert got.dtype == np.float64 and got.shape == codes.shape
    want = np.array([ref_decode(int(c), name) for c in codes])
    assert same(got, want)


@pytest.mark.parametrize("name", EXHAUSTIVE)
def test_round_trip_every_code(name):
    f = get_format(name)
    codes = np.arange(1 << f.bits, dtype=np.int64)
    vals = decode(codes, name)
    back = encode(vals, name)
    assert back.dtype == f.storage_dtype
    expect = codes.copy()
    if name == "ue4m3":
        expect = codes & 0x7F  # bit 7 is ignored by decode
    if f.kind == "float" and f.has_nan:
        expect = np.where(np.isnan(vals), f.canonical_nan, expect)
    assert np.array_equal(back.astype(np.int64), expect)
    # strict encode accepts every decoded (non-NaN) value
    assert np.array_equal(encode(vals, name, strict=True).astype(np.int64), expect)


def test_nan_codes():
    assert np.flatnonzero(is_nan(np.arange(256), "e4m3")).tolist() == [0x7F, 0xFF]
    assert np.flatnonzero(is_nan(np.arange(256), "e5m2")).tolist() == [0x7D, 0x7E, 0x7F,
                                                                       0xFD, 0xFE, 0xFF]
    assert np.flatnonzero(is_nan(np.arange(256), "ue8m0")).tolist() == [0xFF]
    assert np.flatnonzero(is_nan(np.arange(256), "ue4m3")).tolist() == [0x7F, 0xFF]
    for n in ("e3m2", "e2m3", "e2m1") + tuple(INTS):
        f = get_format(n)
        assert not is_nan(np.arange(1 << min(f.bits, 8)), n).any()
    assert np.flatnonzero(is_inf(np.arange(256), "e5m2")).tolist() == [0x7C, 0xFC]
    assert not is_inf(np.arange(256), "e4m3").any()
    assert is_inf([0x7F800000, 0xFF800000, 0x7F801FFF], "tf32").all()
    assert is_nan([0x7F802000, 0x7FC00000], "tf32").all()
    assert is_inf(0xFFF0000000000000, "f64") and is_nan(2 ** 64 - 1, "f64")


def test_ml_dtypes_decoding_agrees_for_every_code():
    types = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
             "e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn,
             "e2m1": ml_dtypes.float4_e2m1fn, "ue8m0": ml_dtypes.float8_e8m0fnu}
    for name, t in types.items():
        codes = np.arange(1 << get_format(name).bits, dtype=np.uint8)
        assert same(decode(codes, name), codes.view(t).astype(np.float64)), name


# --------------------------------------------------------------------------------------------
# Rounding against independent references
# --------------------------------------------------------------------------------------------


def brute_nearest(x: float, name: str) -> float:
    """RNE by searching the decoded code table; overflow by the IEEE/saturation rules."""
    f = get_format(name)
    codes = np.arange(1 << f.bits)
    if name == "ue4m3":
        codes = codes[:0x80]
    vals = np.array([ref_decode(int(c), name) for c in codes])
    keep = np.isfinite(vals) & ~np.signbit(vals)
    pos, pcodes = vals[keep], codes[keep]
    if f.has_inf:  # the first value past max_finite (an 'even' code) stands for Inf
        pos = np.append(pos, 2.0 ** (math.floor(math.log2(f.max_finite)) + 1))
        pcodes = np.append(pcodes, 0)
    a = abs(x)
    if name == "ue8m0":
        pcodes = np.array([int(c) for c in codes if c != 0xFF])
        pos = 2.0 ** (pcodes - 127.0)
    if math.isinf(a):
        r = math.inf if f.has_inf else f.max_finite
    else:
        d = np.abs(pos - a)
        best = np.flatnonzero(d == d.min())
        if len(best) > 1:
            best = [i for i in best if pcodes[i] % 2 == 0]
        r = float(pos[best[0]])
        if f.has_inf and r > f.max_finite:
            r = math.inf
    return -r if (x < 0 or (x == 0 and math.copysign(1, x) < 0)) and f.signed else r


def finite_around(name):
    f = get_format(name)
    hi = f.max_finite * (2.5 if f.has_inf else 1.5)
    return st.one_of(
        st.floats(-hi, hi, allow_nan=False),
        st.floats(-8 * f.min_subnormal, 8 * f.min_subnormal, allow_nan=False),
        # exact midpoints and near-midpoints between adjacent codes
        st.tuples(st.integers(0, (1 << f.bits) - 2), st.sampled_from([-1, 0, 1])).map(
            lambda t: _midpoint(name, *t)),
    )


def _midpoint(name, code, nudge):
    a, b = decode(code, name), decode(code + 1, name)
    if not (np.isfinite(a) and np.isfinite(b)):
        return float(a) if np.isfinite(a) else 0.0
    m = (float(a) + float(b)) / 2
    for _ in range(abs(nudge)):
        m = np.nextafter(m, math.inf if nudge > 0 else -math.inf)
    return float(m)


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_encode_is_rne_against_brute_force(name):
    f = get_format(name)

    @settings(max_examples=150, deadline=None)
    @given(finite_around(name))
    def check(x):
        if not f.signed and (x < 0 or math.copysign(1, x) < 0):
            x = -x
        got = decode(encode(x, name), name)
        assert same(got, brute_nearest(x, name)), (x, float(got))

    check()


def test_brute_force_reference_itself():
    # sanity of the reference: known answers, so a broken reference cannot agree silently
    assert brute_nearest(2.5, "e2m1") == 2.0 and brute_nearest(3.5, "e2m1") == 4.0
    assert brute_nearest(0.25, "e2m1") == 0.0 and brute_nearest(0.26, "e2m1") == 0.5
    assert brute_nearest(61440.0, "e5m2") == math.inf
    assert brute_nearest(61439.0, "e5m2") == 57344.0
    assert brute_nearest(3.0, "ue8m0") == 2.0 and brute_nearest(0.75, "ue8m0") == 0.5
    assert brute_nearest(1e9, "e4m3") == 448.0


def fraction_rne(x: float, name: str) -> float:
    """Exact RNE to a binary format with Fractions (round() on a Fraction ties to even)."""
    f = get_format(name)
    if x == 0 or math.isinf(x):
        return x
    a = Fraction(abs(x))
    e = max(math.floor(math.log2(abs(x))), f.emin)
    # fix possible log2 inexactness
    while Fraction(2) ** e > a and e > f.emin:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = Fraction(2) ** (e - f.man_bits)
    r = round(a / q) * q
    v = math.inf if r > Fraction(f.max_finite) else float(r)
    return math.copysign(v, x)


@pytest.mark.parametrize("name", ["f16", "bf16", "tf32", "f32"])
def test_encode_is_rne_against_fractions(name):
    f = get_format(name)

    @settings(max_examples=200, deadline=None)
    @given(st.one_of(st.floats(allow_nan=False, width=64),
                     st.floats(-2 * f.max_finite, 2 * f.max_finite),
                     st.floats(-64 * f.min_subnormal, 64 * f.min_subnormal),
                     st.integers(0, 2 ** 16 - 2 if f.bits == 16 else 2 ** 32 - 1).map(
                         lambda c: _midpoint(name, c, 0) if f.bits == 16 else
                         float(decode(c, name)) * (1 + 2.0 ** -11)).filter(
                             lambda v: not math.isnan(v))))
    def check(x):
        got = decode(encode(x, name), name)
        assert same(got, fraction_rne(x, name)), (x, float(got))

    check()


def test_double_rounding_is_avoided():
    # 1 + 2**-8 + 2**-40 is above the bf16 midpoint; via float32 it would become a tie -> 1.0
    assert decode(encode(1 + 2.0 ** -8 + 2.0 ** -40, "bf16"), "bf16") == 1 + 2.0 ** -7
    assert decode(encode(1 + 2.0 ** -4 + 2.0 ** -40, "e4m3"), "e4m3") == 1.125
    assert decode(encode(1 + 2.0 ** -11 + 2.0 ** -40, "tf32"), "tf32") == 1 + 2.0 ** -10
    # integer input, rounded once: 2**60 + 2**36 + 1 is above the f32 midpoint
    assert decode(encode(np.int64(2 ** 60 + 2 ** 36 + 1), "f32"), "f32") == 2.0 ** 60 + 2.0 ** 37
    assert decode(encode(np.int64(2 ** 60 + 2 ** 36), "f32"), "f32") == 2.0 ** 60


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False))
def test_f16_bf16_match_single_rounding_casts_from_float32(x):
    # numpy float32->float16 and ml_dtypes float32->bfloat16 round once, correctly
    v = np.float32(x)
    with np.errstate(over="ignore"):
        want = int(np.array(v).astype(np.float16).view(np.uint16))
    assert int(encode(v, "f16")) == want
    assert int(encode(v, "bf16")) == int(np.array(v).astype(ml_dtypes.bfloat16).view(np.uint16))


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False))
def test_f32_matches_numpy_cast(x):
    with np.errstate(over="ignore"):
        want = np.array(x).astype(np.float32).view(np.uint32)
    assert int(encode(x, "f32")) == int(want)


# --------------------------------------------------------------------------------------------
# Hypothesis round trips for the wide formats
# --------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_f32_round_trip(code):
    v = decode(code, "f32")
    want = 0x7FFFFFFF if np.isnan(v) else code
    assert int(encode(v, "f32")) == want
    assert same(v, np.uint32(code).view(np.float32))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_tf32_round_trip_clears_low_bits(code):
    v = decode(code, "tf32")
    assert same(v, decode(code & 0xFFFFE000, "f32"))
    want = 0x7FFFE000 if np.isnan(v) else code & 0xFFFFE000
    assert int(encode(v, "tf32")) == want
    if not np.isnan(v):
        assert int(encode(v, "tf32", strict=True)) == want


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 64 - 1))
def test_f64_round_trip(code):
    v = decode(code, "f64")
    want = 0x7FFFFFFFFFFFFFFF if np.isnan(v) else code
    assert int(encode(v, "f64")) == want


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2 ** 31), 2 ** 31 - 1))
def test_s32_round_trip(v):
    code = int(encode(v, "s32"))
    assert code == v % 2 ** 32
    assert int(decode(code, "s32")) == v
    assert int(encode(float(v), "s32", strict=True)) == code


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(HALF_FLOATS + SMALL_FLOATS + ["f32", "tf32", "f64"]), st.data())
def test_decompose_reconstructs_value(name, data):
    f = get_format(name)
    code = data.draw(st.integers(0, (1 << f.bits) - 1))
    v = float(decode(code, name))
    if not math.isfinite(v):
        return
    s, e, m = (int(t) for t in decompose(code, name))
    assert Fraction(-1 if s else 1) * m * Fraction(2) ** (e - f.man_bits) == Fraction(v)
    assert s == (1 if math.copysign(1, v) < 0 else 0)
    assert e >= f.emin
    if v != 0 and abs(v) >= 2.0 ** f.emin:
        assert e == math.frexp(abs(v))[1] - 1  # exact; floor(log2(v)) rounds just below powers of 2
        assert (1 << f.man_bits) <= m < (2 << f.man_bits)
    else:
        assert e == f.emin and m < (1 << f.man_bits) or name == "ue8m0"


def test_decompose_examples():
    s, e, m = decompose([0x3C00, 0x0001, 0x0000, 0x8400], "f16")
    assert s.tolist() == [0, 0, 0, 1] and e.tolist() == [0, -14, -14, -14]
    assert m.tolist() == [1024, 1, 0, 1024]
    assert [t.tolist() for t in decompose([0, 127, 254], "ue8m0")] == [
        [0, 0, 0], [-127, 0, 127], [1, 1, 1]]
    assert [int(t) for t in decompose(0x3F801FFF, "tf32")] == [0, 0, 1024]
    assert [int(t) for t in decompose(0xFE, "ue4m3")] == [0, 8, 14]


# --------------------------------------------------------------------------------------------
# Overflow, saturation, NaN, unsigned and integer rules
# --------------------------------------------------------------------------------------------


def enc(x, name, **kw):
    return encode(np.array(x, dtype=np.float64), name, **kw).astype(np.int64).tolist()


def test_ieee_overflow_to_inf():
    assert enc([65504, 65519.99, 65520, 1e300, np.inf, -65520], "f16") == [
        0x7BFF, 0x7BFF, 0x7C00, 0x7C00, 0x7C00, 0xFC00]
    assert enc([57344, 61439, 61440, -np.inf], "e5m2") == [0x7B, 0x7B, 0x7C, 0xFC]
    bmax = get_format("bf16").max_finite
    assert enc([bmax, bmax + 2.0 ** 119, -bmax * 2], "bf16") == [0x7F7F, 0x7F80, 0xFF80]
    tmax = get_format("tf32").max_finite
    assert enc([tmax + 2.0 ** 116, np.inf], "tf32") == [0x7F800000, 0x7F800000]
    assert enc([tmax + 2.0 ** 115], "tf32") == [0x7F7FE000]


@pytest.mark.parametrize("name,mx", [("e4m3", 448), ("e3m2", 28), ("e2m3", 7.5), ("e2m1", 6)])
def test_saturation_without_inf(name, mx):
    f = get_format(name)
    maxcode = int(encode(mx, name))
    neg = 1 << (f.bits - 1)
    assert enc([mx * 1.01, mx * 4, 1e300, np.inf], name) == [maxcode] * 4
    assert enc([-mx * 1.01, -np.inf], name) == [maxcode | neg] * 2
    assert decode(maxcode, name) == mx


def test_e4m3_saturates_where_ml_dtypes_gives_nan():
    assert enc([464, 465, 480, 1000], "e4m3") == [0x7E] * 4
    assert enc([np.nan, -np.nan], "e4m3") == [0x7F, 0x7F]


def test_nan_to_canonical_nan():
    for name in ("f64", "f32", "tf32", "f16", "bf16", "e4m3", "e5m2", "ue8m0", "ue4m3"):
        f = get_format(name)
        assert int(encode(np.nan, name)) == f.canonical_nan
        assert int(encode(-np.nan, name)) == f.canonical_nan
        assert int(encode(np.nan, name, strict=True)) == f.canonical_nan
    payload = np.array([0xFFF8000000000123], dtype=np.uint64).view(np.float64)
    assert int(encode(payload, "f32")[0]) == 0x7FFFFFFF


@pytest.mark.parametrize("name", ["e3m2", "e2m3", "e2m1", "s32", "s8", "u8", "s4", "u4", "b1"])
def test_nan_into_format_without_nan_raises(name):
    with pytest.raises(FormatError, match=name):
        encode([1.0, np.nan], name)


def test_subnormals_and_signed_zero():
    assert enc([2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.5, -2.0 ** -26], "f16") == [
        1, 0, 1, 0x8000]
    assert enc([-0.0, 0.0], "e4m3") == [0x80, 0]
    assert enc([2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -10], "e4m3") == [1, 0, 2]
    assert enc([2.0 ** -149, 2.0 ** -150, 2.0 ** -150 * 1.01], "f32") == [1, 0, 1]
    assert enc([2.0 ** -136, 2.0 ** -137], "tf32") == [0x2000, 0]
    assert math.copysign(1, float(decode(0x8000, "f16"))) == -1


def test_unsigned_float_formats():
    assert enc([0.0, -0.0, 448, 500, np.inf], "ue4m3") == [0, 0, 0x7E, 0x7E, 0x7E]
    assert enc([1.0, 2.0 ** -127, 2.0 ** 127, 0.0, -0.0, 2.0 ** -140, 2.0 ** 128, np.inf],
               "ue8m0") == [127, 0, 254, 0, 0, 0, 254, 254]
    # ties go to the even code: 1.5 between 1 (127) and 2 (128); 3 between 2 (128) and 4 (129)
    assert enc([1.5, 3.0, 0.75, 6.0, 1.49, 3.01], "ue8m0") == [128, 128, 126, 130, 127, 129]
    for name in ("ue8m0", "ue4m3"):
        with pytest.raises(FormatError, match=name):
            encode([1.0, -1.0], name)
        with pytest.raises(FormatError, match="-inf"):
            encode(-np.inf, name)
    assert decode(0x80 | 0x38, "ue4m3") == 1.0  # top bit ignored


def test_integer_rounding_and_clamping():
    assert enc([0.5, 1.5, 2.5, -0.5, -1.5, 126.6, 200, -200], "s8") == [
        0, 2, 2, 0, 0xFE, 127, 127, 0x80]
    assert enc([-1, 255.4, 255.5, 300], "u8") == [0, 255, 255, 255]
    assert enc([-8, 7, 9, -9, -1], "s4") == [8, 7, 7, 8, 15]
    assert enc([0.4, 0.6, 1.5, -3, 16], "u4") == [0, 1, 2, 0, 15]
    assert enc([0, 1, 0.5, 1.5, -2, 5], "b1") == [0, 1, 0, 1, 0, 1]
    assert enc([2.0 ** 31, -(2.0 ** 31) - 1, 1e300, -np.inf], "s32") == [
        0x7FFFFFFF, 0x80000000, 0x7FFFFFFF, 0x80000000]
    # integer arrays take the integer path (no float detour)
    big = np.array([2 ** 62, -(2 ** 62), 2 ** 31 - 1], dtype=np.int64)
    assert encode(big, "s32").tolist() == [0x7FFFFFFF, 0x80000000, 0x7FFFFFFF]
    assert decode([8, 15, 7], "s4").tolist() == [-8, -1, 7]
    assert decode([0x80000000], "s32").dtype == np.int64
    assert decode([1, 0], "b1").tolist() == [1, 0]


# --------------------------------------------------------------------------------------------
# strict mode
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,values,bad_index,bad_value",
    [
        ("f16", [1.0, 2.0, 1 + 2.0 ** -11], 2, "1.00048828125"),
        ("f16", [[1.0, 70000.0]], (0, 1), "70000.0"),
        ("e4m3", [1.0, np.inf], 1, "inf"),
        ("e4m3", [500.0], 0, "500.0"),
        ("e2m1", [0.0, 6.0, 2.5], 2, "2.5"),
        ("ue8m0", [1.0, 0.0], 1, "0.0"),
        ("ue8m0", [3.0], 0, "3.0"),
        ("bf16", [1 + 2.0 ** -8], 0, "1.00390625"),
        ("tf32", [1 + 2.0 ** -12], 0, "1.000244140625"),
        ("f32", [0.1], 0, "0.1"),
        ("s8", [1, 128], 1, "128"),
        ("s8", [1.5], 0, "1.5"),
        ("u4", [-1.0], 0, "-1.0"),
        ("b1", [2], 0, "2"),
    ],
)
def test_strict_errors_name_value_and_index(name, values, bad_index, bad_value):
    with pytest.raises(FormatError) as ei:
        encode(values, name, strict=True)
    msg = str(ei.value)
    assert name in msg and bad_value in msg
    idx = bad_index if isinstance(bad_index, tuple) else (bad_index,)
    assert str(idx) in msg
    encode(values, name)  # non-strict accepts the same input


def test_strict_accepts_exact_values_and_inf():
    assert enc([np.inf, -np.inf, 65504, -0.0], "f16", strict=True) == [
        0x7C00, 0xFC00, 0x7BFF, 0x8000]
    assert int(encode(np.int64(2 ** 60), "f32", strict=True)) == int(encode(2.0 ** 60, "f32"))
    with pytest.raises(FormatError):
        encode(np.int64(2 ** 60 + 1), "f32", strict=True)
    with pytest.raises(FormatError):
        encode(np.int64(2 ** 53 + 1), "f64", strict=True)
    with pytest.raises(FormatError):
        encode(np.nan, "e2m1", strict=True)


# --------------------------------------------------------------------------------------------
# Bad bits, shapes, no mutation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,bits,text",
    [
        ("f16", [1, 65536], "65536"),
        ("e2m1", [16], "16"),
        ("e3m2", [0, 64], "64"),
        ("b1", [2], "2"),
        ("s8", [-1], "-1"),
        ("f32", [2 ** 32], "4294967296"),
        ("f16", np.array([1.0, 2.5]), "2.5"),
        ("f16", np.array([np.nan]), "nan"),
        ("u4", -3, "-3"),
        ("f64", [2 ** 64], "18446744073709551616"),
    ],
)
def test_bad_bits_raise(name, bits, text):
    with pytest.raises(FormatError) as ei:
        decode(bits, name)
    assert name in str(ei.value) and text in str(ei.value)
    for fn in (is_nan, is_inf, decompose):
        with pytest.raises(FormatError):
            fn(bits, name)


def test_non_numeric_bits_raise():
    with pytest.raises(FormatError, match="f16"):
        decode(["a"], "f16")
    with pytest.raises(FormatError):
        encode(["a"], "f16")


def test_integral_float_bits_and_big_python_ints_accepted():
    assert decode(np.array([15360.0]), "f16").tolist() == [1.0]
    assert same(decode([2 ** 63, 2 ** 64 - 1], "f64"), [-0.0, np.nan])
    assert decode(np.array([True, False]), "b1").tolist() == [1, 0]


@pytest.mark.parametrize("name", ["f64", "f32", "tf32", "f16", "e4m3", "e2m1", "ue8m0", "s4"])
def test_shapes_preserved(name):
    f = get_format(name)
    x = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) % (1 << min(f.bits, 4))
    assert decode(x, name).shape == (2, 3, 4)
    assert is_nan(x, name).shape == (2, 3, 4) and is_inf(x, name).shape == (2, 3, 4)
    assert all(t.shape == (2, 3, 4) for t in decompose(x, name))
    assert encode(decode(x, name), name).shape == (2, 3, 4)
    assert decode(3, name).shape == ()
    assert encode(1.0, name).shape == ()
    assert encode(1.0, name).dtype == f.storage_dtype
    assert decode(np.zeros((0, 5), np.uint8), name).shape == (0, 5)


def test_inputs_not_mutated():
    vals = np.array([[1.5, -np.inf], [np.nan, 1e9]])
    vals_copy = vals.copy()
    bits = np.array([[0x7F, 0x80], [0xFF, 0x01]], dtype=np.uint8)
    bits_copy = bits.copy()
    for name in ("e4m3", "e5m2", "f16", "bf16", "f32", "tf32", "f64"):
        encode(vals, name)
        encode(vals, name, strict=False)
        decode(bits, name)
        decompose(bits, name)
    encode(np.abs(vals[0:1, 0:1]), "ue8m0")
    decode(bits, "ue4m3")
    assert np.array_equal(vals, vals_copy, equal_nan=True)
    assert np.array_equal(bits, bits_copy)
    ivals = np.array([300, -300, 5], dtype=np.int64)
    icopy = ivals.copy()
    encode(ivals, "s8")
    encode(ivals, "f16")
    assert np.array_equal(ivals, icopy)


def test_decode_result_is_writable_and_independent():
    # the lookup table must not leak out
    v = decode([0x3C00], "f16")
    v[0] = 5.0
    assert decode([0x3C00], "f16")[0] == 1.0
    b = np.array([0x3FF0000000000000], dtype=np.uint64)
    d = decode(b, "f64")
    d[0] = 2.0
    assert b[0] == 0x3FF0000000000000


def test_format_is_frozen():
    f = get_format("f16")
    with pytest.raises(Exception):
        f.bits = 8  # type: ignore[misc]
    assert isinstance(f, Format) and hash(f) == hash(get_format("f16"))
