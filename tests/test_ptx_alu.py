"""ALU families (warpsim.ptx.ops.integer/floating/convert/compare/approx) against independent
references: exact rational arithmetic with an IEEE rounding written here from the standard's
rules, Python integers, and the committed H100 words (tests/data/h100_alu.npz)."""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from warpsim.errors import PtxError
from warpsim.ptx.ops import approx
from warpsim.validation.alu_cases import Case, inputs
from warpsim.validation.alu_compare import (
    all_ops, check_fixture, decode, evaluate, ulp_distance)

FIXTURE = Path(__file__).parent / "data" / "h100_alu.npz"
FMT = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}
BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
SETTINGS = settings(max_examples=40, deadline=None)


# ---------------------------------------------------------------------------------------------
# An independent reference: bit patterns <-> exact rationals, IEEE rounding by the rules
# ---------------------------------------------------------------------------------------------


def to_frac(bits: int, fmt: str):
    """Pattern -> Fraction, or 'nan', '+inf', '-inf'; zeros as (Fraction(0), sign)."""
    e, m = FMT[fmt]
    n = BITS[fmt]
    sign = bits >> (n - 1)
    ef = (bits >> m) & ((1 << e) - 1)
    mf = bits & ((1 << m) - 1)
    bias = (1 << (e - 1)) - 1
    if ef == (1 << e) - 1:
        return "nan" if mf else ("-inf" if sign else "+inf")
    v = Fraction(mf, 1 << m) * Fraction(2) ** (1 - bias) if ef == 0 else \
        (1 + Fraction(mf, 1 << m)) * Fraction(2) ** (ef - bias)
    return -v if sign else v


def from_value(v, fmt: str, neg_zero=False) -> int:
    """An exactly representable value (Fraction or +-inf) -> pattern."""
    n = BITS[fmt]
    if v == 0:
        return (1 << (n - 1)) if neg_zero else 0
    f = float(v)
    if fmt == "f64":
        return struct.unpack("<Q", struct.pack("<d", f))[0]
    if fmt == "f32":
        return struct.unpack("<I", struct.pack("<f", f))[0]
    if fmt == "f16":
        return int(np.array(f, np.float16).view(np.uint16))
    return int(np.array(f, np.float32).view(np.uint32)) >> 16


def ref_round(q: Fraction, fmt: str, mode: str):
    """Round an exact non-zero rational to ``fmt`` in IEEE mode ``mode`` (unbounded exponent
    range above: overflow per the standard's table)."""
    e, m = FMT[fmt]
    bias = (1 << (e - 1)) - 1
    emin, emax = 1 - bias, bias
    neg = q < 0
    a = -q if neg else q
    ex = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** ex > a:
        ex -= 1
    ex = max(ex, emin)
    quantum = Fraction(2) ** (ex - m)
    n = a / quantum
    fl = n.numerator // n.denominator
    rem = n - fl
    if mode == "rn":
        up = rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1)
    elif mode == "rz":
        up = False
    elif mode == "rm":
        up = neg and rem > 0
    else:
        up = (not neg) and rem > 0
    r = (fl + up) * quantum
    maxf = (2 - Fraction(1, 1 << m)) * Fraction(2) ** emax
    if r > maxf:
        to_max = mode == "rz" or (mode == "rm" and not neg) or (mode == "rp" and neg)
        r = maxf if to_max else math.inf
    return -r if neg else r


def ref_pattern(q: Fraction, fmt: str, mode: str) -> int:
    r = ref_round(q, fmt, mode)
    return from_value(r, fmt, neg_zero=(r == 0 and q < 0))


def finite_words(fmt, n=24):
    """Arrays of finite patterns of ``fmt`` (NaN/Inf patterns replaced by a small normal)."""
    e, m = FMT[fmt]
    bits = BITS[fmt]
    dt = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]

    def fix(a):
        exp = (a.astype(np.uint64) >> np.uint64(m)) & np.uint64((1 << e) - 1)
        return np.where(exp == (1 << e) - 1, dt(1 << m), a).astype(dt)

    return arrays(dt, n).map(fix)


# ---------------------------------------------------------------------------------------------
# Floating point
# ---------------------------------------------------------------------------------------------

OPS = all_ops()


def run(text: str, *srcs):
    spec, typ, mods = decode(text, OPS)
    return spec.fn(list(srcs), type=typ, **mods)


def near_words(fmt, n=24):
    """Patterns with exponents within a few binades of 1 and short significands: sums that
    cancel, land on rounding boundaries and tie (the cases round-to-odd carriers exist for)."""
    e, m = FMT[fmt]
    bias = (1 << (e - 1)) - 1
    dt = {16: np.uint16, 32: np.uint32, 64: np.uint64}[BITS[fmt]]

    def build(t):
        sign, ex, man, keep = t
        man = man & ~((1 << max(m - keep, 0)) - 1)
        return (sign << (BITS[fmt] - 1)) | ((bias + ex) << m) | man

    one = st.tuples(st.integers(0, 1), st.integers(-3, 3), st.integers(0, (1 << m) - 1),
                    st.integers(1, m))
    return st.lists(one.map(build), min_size=n, max_size=n).map(lambda v: np.array(v, dt))


@SETTINGS
@given(st.sampled_from(["f32", "f16", "bf16"]), st.sampled_from(["rn", "rz", "rm", "rp"]),
       st.data())
def test_sums_on_rounding_boundaries(fmt, mode, data):
    if fmt != "f32" and mode != "rn":
        mode = "rn"  # f16/bf16 arithmetic has .rn only
    a, b, c = (data.draw(near_words(fmt)) for _ in range(3))
    add = run(f"add.{mode}.{fmt}", a, b)
    fma = run(f"fma.{mode}.{fmt}", a, b, c)
    for i in range(len(a)):
        x, y, z = (to_frac(int(v[i]), fmt) for v in (a, b, c))
        if x + y != 0:
            assert int(add[i]) == ref_pattern(x + y, fmt, mode)
        if x * y + z != 0:
            assert int(fma[i]) == ref_pattern(x * y + z, fmt, mode)


@SETTINGS
@given(finite_words("f32"), finite_words("f32"), finite_words("f32"),
       st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_f32_add_mul_fma_match_exact_rounding(a, b, c, mode):
    add = run(f"add.{mode}.f32", a, b)
    mul = run(f"mul.{mode}.f32", a, b)
    fma = run(f"fma.{mode}.f32", a, b, c)
    for i in range(len(a)):
        x, y, z = (to_frac(int(v[i]), "f32") for v in (a, b, c))
        s = x + y
        if s != 0:
            assert int(add[i]) == ref_pattern(s, "f32", mode)
        elif x != 0 or y != 0 or (int(a[i]) >> 31) != (int(b[i]) >> 31):
            assert int(add[i]) == (0x80000000 if mode == "rm" else 0)
        p = x * y
        if p != 0:
            assert int(mul[i]) == ref_pattern(p, "f32", mode)
        else:
            assert int(mul[i]) == ((int(a[i]) ^ int(b[i])) & 0x80000000)
        t = x * y + z
        if t != 0:
            assert int(fma[i]) == ref_pattern(t, "f32", mode)


@SETTINGS
@given(finite_words("f32"), finite_words("f32"), st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_f32_div_sqrt_match_exact_rounding(a, b, mode):
    div = run(f"div.{mode}.f32", a, b)
    sq = run(f"sqrt.{mode}.f32", a & np.uint32(0x7FFFFFFF))
    for i in range(len(a)):
        x, y = to_frac(int(a[i]), "f32"), to_frac(int(b[i]), "f32")
        if y != 0 and x != 0:
            assert int(div[i]) == ref_pattern(x / y, "f32", mode)
        r = to_frac(int(sq[i]), "f32")
        ax = abs(x)
        if ax == 0:
            continue
        # sqrt: r is the rounding of sqrt(|x|) iff the neighbours bracket it correctly
        up = to_frac(int(sq[i]) + 1, "f32")
        dn = to_frac(int(sq[i]) - 1, "f32")
        if mode in ("rz", "rm"):
            assert r * r <= ax < up * up
        elif mode == "rp":
            assert dn * dn < ax <= r * r
        else:
            assert ((dn + r) / 2) ** 2 < ax < ((r + up) / 2) ** 2


@SETTINGS
@given(st.sampled_from(["f16", "bf16"]), st.data())
def test_half_add_mul_fma_match_exact_rounding(fmt, data):
    a, b, c = (data.draw(finite_words(fmt)) for _ in range(3))
    add = run(f"add.rn.{fmt}", a, b)
    mul = run(f"mul.rn.{fmt}", a, b)
    fma = run(f"fma.rn.{fmt}", a, b, c)
    for i in range(len(a)):
        x, y, z = (to_frac(int(v[i]), fmt) for v in (a, b, c))
        for got, exact in ((add, x + y), (mul, x * y), (fma, x * y + z)):
            if exact != 0:
                assert int(got[i]) == ref_pattern(exact, fmt, "rn")


@SETTINGS
@given(finite_words("f64", 12), finite_words("f64", 12), finite_words("f64", 12),
       st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_f64_matches_exact_rounding(a, b, c, mode):
    add = run(f"add.{mode}.f64", a, b)
    mul = run(f"mul.{mode}.f64", a, b)
    fma = run(f"fma.{mode}.f64", a, b, c)
    div = run(f"div.{mode}.f64", a, b)
    for i in range(len(a)):
        x, y, z = (to_frac(int(v[i]), "f64") for v in (a, b, c))
        for got, exact in ((add, x + y), (mul, x * y), (fma, x * y + z)):
            if exact != 0:
                assert int(got[i]) == ref_pattern(exact, "f64", mode)
        if x != 0 and y != 0:
            assert int(div[i]) == ref_pattern(x / y, "f64", mode)


def test_ftz_flushes_inputs_and_tiny_results():
    tiny = np.array([0x00000001], np.uint32)  # smallest subnormal
    assert int(run("add.rn.ftz.f32", tiny, tiny)[0]) == 0
    assert int(run("add.rn.f32", tiny, tiny)[0]) == 2
    # 2**-14 * (1 - 2**-11) in f16 rounds to 2**-14 but is tiny after rounding with an
    # unbounded exponent: .ftz flushes it (H100)
    assert int(run("mul.rn.ftz.f16", np.array([0x0400], np.uint16), np.array([0x3BFF], np.uint16))[0]) == 0
    assert int(run("mul.rn.f16", np.array([0x0400], np.uint16), np.array([0x3BFF], np.uint16))[0]) == 0x0400


def test_sat_relu_and_nan_words():
    one, two, m1 = (np.array([v], np.uint32) for v in (0x3F800000, 0x40000000, 0xBF800000))
    nan = np.array([0x7FC00001], np.uint32)
    assert int(run("add.sat.f32", one, two)[0]) == 0x3F800000
    assert int(run("add.sat.f32", m1, m1)[0]) == 0
    assert int(run("add.sat.f32", nan, one)[0]) == 0
    assert int(run("add.f32", nan, one)[0]) == 0x7FFFFFFF  # canonical NaN
    h = np.array([0xBC00], np.uint16)  # -1.0 f16
    assert int(run("fma.rn.relu.f16", h, h.copy() ^ np.uint16(0x8000), np.array([0], np.uint16))[0]) == 0
    # f64 propagates a NaN operand, quietened, b before a
    a = np.array([0x7FF0000000000001], np.uint64)
    b = np.array([0xFFF0000000000002], np.uint64)
    assert int(run("add.rn.f64", a, b)[0]) == 0xFFF8000000000002
    inf = np.array([0x7FF0000000000000], np.uint64)
    assert int(run("sub.rn.f64", inf, inf)[0]) == 0xFFF8000000000000


@SETTINGS
@given(finite_words("f32"), finite_words("f32"))
def test_min_max_follow_the_isa_pseudocode(a, b):
    mn = run("min.f32", a, b)
    mx = run("max.NaN.xorsign.abs.f32", a, b)
    for i in range(len(a)):
        x, y = to_frac(int(a[i]), "f32"), to_frac(int(b[i]), "f32")
        sx, sy = int(a[i]) >> 31, int(b[i]) >> 31
        if x != y:
            assert int(mn[i]) == (int(a[i]) if x < y else int(b[i]))
        else:  # -0 < +0
            assert int(mn[i]) == (int(a[i]) if sx >= sy else int(b[i]))
        ax, ay = abs(x), abs(y)
        want = max(ax, ay)
        assert to_frac(int(mx[i]) & 0x7FFFFFFF, "f32") == want
        assert int(mx[i]) >> 31 == sx ^ sy


# ---------------------------------------------------------------------------------------------
# Integers
# ---------------------------------------------------------------------------------------------


def _ints(bits):
    dt = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    return arrays(dt, 16)


def _sv(u, bits, signed):
    u = int(u)
    return u - (1 << bits) if signed and u >> (bits - 1) else u


@SETTINGS
@given(st.sampled_from([16, 32, 64]), st.booleans(), st.data())
def test_integer_mul_mad_div_rem_sad(bits, signed, data):
    t = ("s" if signed else "u") + str(bits)
    a, b, c = (data.draw(_ints(bits)) for _ in range(3))
    mask = (1 << bits) - 1
    lo, hi = run(f"mul.lo.{t}", a, b), run(f"mul.hi.{t}", a, b)
    madhi = run(f"mad.hi.{t}", a, b, c)
    q, r = run(f"div.{t}", a, b), run(f"rem.{t}", a, b)
    sad = run(f"sad.{t}", a, b, c)
    for i in range(len(a)):
        x, y, z = (_sv(v[i], bits, signed) for v in (a, b, c))
        p = x * y
        assert int(lo[i]) == p & mask
        assert int(hi[i]) == (p >> bits) & mask
        assert int(madhi[i]) == ((p >> bits) + z) & mask
        assert int(sad[i]) == (abs(x - y) + z) & mask
        if y == 0:
            assert int(q[i]) == mask and int(r[i]) == mask  # H100: all ones
        else:
            qt = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            assert int(q[i]) == qt & mask
            assert int(r[i]) == (x - qt * y) & mask
    if bits < 64:
        wide = run(f"mul.wide.{t}", a, b)
        for i in range(len(a)):
            x, y = _sv(a[i], bits, signed), _sv(b[i], bits, signed)
            assert int(wide[i]) == (x * y) & ((1 << 2 * bits) - 1)


@SETTINGS
@given(_ints(32), _ints(32), _ints(32))
def test_dp4a_dp2a_and_saturation(a, b, c):
    d4 = run("dp4a.s32.u32", a, b, c)
    d2 = run("dp2a.hi.u32.s32", a, b, c)
    sat = run("add.sat.s32", a, b)
    for i in range(len(a)):
        x, y, z = int(a[i]), int(b[i]), _sv(c[i], 32, True)
        sb = [((x >> 8 * k) & 255) - (256 if (x >> 8 * k) & 128 else 0) for k in range(4)]
        ub = [(y >> 8 * k) & 255 for k in range(4)]
        assert int(d4[i]) == (sum(p * q for p, q in zip(sb, ub)) + z) & 0xFFFFFFFF
        ah = [x & 0xFFFF, x >> 16]
        yb = [((y >> 8 * k) & 255) - (256 if (y >> 8 * k) & 128 else 0) for k in (2, 3)]
        assert int(d2[i]) == (ah[0] * yb[0] + ah[1] * yb[1] + z) & 0xFFFFFFFF
        s = _sv(a[i], 32, True) + _sv(b[i], 32, True)
        assert _sv(sat[i], 32, True) == max(-(2**31), min(2**31 - 1, s))


# ---------------------------------------------------------------------------------------------
# Conversions and comparisons
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(arrays(np.uint64, 16), st.sampled_from(["rn", "rz", "rm", "rp"]),
       st.sampled_from(["f16", "f32", "f64"]), st.booleans())
def test_cvt_int_to_float_rounds_exactly(a, mode, fmt, signed):
    t = "s64" if signed else "u64"
    got = run(f"cvt.{mode}.{fmt}.{t}", a)
    for i in range(len(a)):
        v = _sv(a[i], 64, signed)
        if v:
            assert int(got[i]) == ref_pattern(Fraction(v), fmt, mode)


@SETTINGS
@given(finite_words("f32"), st.sampled_from(["rni", "rzi", "rmi", "rpi"]),
       st.sampled_from(["s8", "u16", "s32", "u64"]))
def test_cvt_float_to_int_rounds_and_clamps(a, mode, t):
    got = run(f"cvt.{mode}.{t}.f32", a)
    bits = int(t[1:])
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t[0] == "s" else (0, (1 << bits) - 1)
    for i in range(len(a)):
        x = to_frac(int(a[i]), "f32")
        fl = math.floor(x)
        v = {"rzi": math.trunc(x), "rmi": fl, "rpi": math.ceil(x),
             "rni": fl + (1 if x - fl > Fraction(1, 2) or (x - fl == Fraction(1, 2) and fl % 2) else 0)}[mode]
        v = max(lo, min(hi, v))
        reg = 16 if bits == 8 else bits
        assert int(got[i]) == v & ((1 << reg) - 1)


def test_cvt_pack_puts_the_first_source_in_the_upper_half():
    a, b = np.array([0x3F800000], np.uint32), np.array([0x40000000], np.uint32)  # 1.0, 2.0
    assert int(run("cvt.rn.f16x2.f32", a, b)[0]) == 0x3C004000
    assert int(run("cvt.rn.bf16x2.f32", a, b)[0]) == 0x3F804000
    assert int(run("cvt.rn.satfinite.e4m3x2.f32", a, b)[0]) == 0x3840
    big = np.array([0x7F800000], np.uint32)  # +Inf saturates
    assert int(run("cvt.rn.satfinite.e4m3x2.f32", big, big)[0]) == 0x7E7E
    assert int(run("cvt.rn.satfinite.e5m2x2.f32", big, big)[0]) == 0x7B7B
    assert int(run("cvt.rn.f16x2.e4m3x2", np.array([0x3840], np.uint16))[0]) == 0x3C004000


@SETTINGS
@given(arrays(np.uint32, 32))
def test_cvt_tf32_rna_rounds_half_away(a):
    a = np.where((a & np.uint32(0x7F800000)) == np.uint32(0x7F800000), a & np.uint32(0x3FFFFFFF), a)
    got = run("cvt.rna.tf32.f32", a)
    for i in range(len(a)):
        x = to_frac(int(a[i]), "f32")
        q = abs(x)
        if q == 0:
            continue
        ex = q.numerator.bit_length() - q.denominator.bit_length()
        if Fraction(2) ** ex > q:
            ex -= 1
        quantum = Fraction(2) ** (max(ex, -126) - 10)
        n = q / quantum
        r = math.floor(n + Fraction(1, 2)) * quantum  # ties away from zero
        want = from_value(r if r <= (2 - Fraction(1, 1024)) * 2**127 else math.inf, "f32")
        assert int(got[i]) == want | (int(a[i]) & 0x80000000)


@SETTINGS
@given(finite_words("f32"), finite_words("f32"), arrays(np.bool_, 24))
def test_setp_ordered_unordered_and_combining(a, b, c):
    a = np.where(np.arange(24) % 5 == 0, np.uint32(0x7FC00000), a)  # some NaNs
    nanab = [(int(x) & 0x7FFFFFFF) > 0x7F800000 for x in a]
    p, q = run("setp.ltu.and.f32", a, b, c)
    pn = run("setp.num.f32", a, b)[0]
    for i in range(24):
        un = nanab[i]
        t = un or to_frac(int(a[i]), "f32") < to_frac(int(b[i]), "f32")
        assert bool(p[i]) == (t and bool(c[i]))
        assert bool(q[i]) == ((not t) and bool(c[i]))
        assert bool(pn[i]) == (not un)


def test_bad_forms_raise_ptxerror():
    for text in ("add.ftz.f64", "fma.f32", "mul.wide.s64", "add.sat.u32", "cvt.f32.f32.rn",
                 "cvt.rn.f16.s8.sat.bogus", "min.xorsign.f32", "setp.lo.s32", "cvt.ftz.u8.f16",
                 "rcp.approx.f64", "ex2.approx.bf16"):
        with pytest.raises(PtxError):
            decode(text, OPS)


def test_inputs_are_not_modified():
    a = np.array([0x3F800000, 0x7F800001], np.uint32)
    keep = a.copy()
    run("add.rn.ftz.sat.f32", a, a)
    run("cvt.rn.f16x2.f32", a, a)
    run("setp.lt.f32", a, a)
    assert np.array_equal(a, keep)


def test_shapes_broadcast_and_batch():
    a = np.arange(4 * 32, dtype=np.uint32).reshape(4, 32) * np.uint32(0x01010101)
    out = run("add.rz.f32", a, np.uint32(0x3F800000))
    assert out.shape == (4, 32) and out.dtype == np.uint32
    out = run("cvt.rn.f16x2.f32", a, a)
    assert out.shape == (4, 32)


# ---------------------------------------------------------------------------------------------
# Against the H100
# ---------------------------------------------------------------------------------------------


def test_h100_fixture_words_match_and_legality_equals_ptxas():
    bad, meta = check_fixture(FIXTURE)
    assert len(meta["cases"]) >= 1400
    assert bad == {}, f"forms disagreeing with the H100: {bad}"
    for c in meta["cases"]:
        decode(c["text"], OPS)  # every form ptxas accepts decodes
    for text in meta["rejected"]:
        with pytest.raises(PtxError):
            decode(text, OPS)


def test_h100_fixture_approx_within_measured_bounds():
    z = np.load(FIXTURE)
    import json

    meta = json.loads(bytes(z["meta"]).decode())
    for i, cj in enumerate(meta["cases"]):
        spec, _, _ = decode(cj["text"], OPS)
        if spec.exact:
            continue
        c = Case(cj["text"], tuple(cj["dsts"]), tuple(cj["srcs"]), cj["pq"])
        x = inputs(c, meta["n_words"], meta["seed"])
        idx = np.linspace(0, len(x) - 1, meta["rows"]).astype(np.int64)
        sim = evaluate(c, np.ascontiguousarray(x[idx]), OPS)[0]
        d = ulp_distance(z["words"][i, :, 0], sim, c.dsts[0])
        assert (d >= 0).all(), f"{c.text}: NaN where the H100 has none"
        assert d.max() <= approx.MEASURED_ULPS[c.text][0], c.text


def test_sm100_packs_follow_the_isa():
    f = lambda *v: np.array(v, np.float32).view(np.uint32)  # noqa: E731
    # d[7:4] from a; |x| > 6 saturates; NaN -> +MAX (fp4/fp6 have no NaN)
    assert int(run("cvt.rn.satfinite.e2m1x2.f32", f(1.0), f(-6.5))[0]) == 0x2F
    assert int(run("cvt.rn.satfinite.e2m3x2.f32", f(1.0), f(np.nan))[0]) == 0x081F
    assert int(run("cvt.rn.satfinite.relu.e3m2x2.f32", f(-1.0), f(3.0))[0]) == 0x0012
    assert int(run("cvt.rn.f16x2.e2m1x2", np.array([0x2F], np.uint8))[0]) == 0x3C00C600
    assert int(run("cvt.rz.ue8m0x2.f32", f(3.0), f(1e-40))[0]) == 0x8000
    assert int(run("cvt.rp.satfinite.ue8m0x2.f32", f(3.0), f(np.inf))[0]) == 0x81FE
    assert int(run("cvt.rn.bf16x2.ue8m0x2", np.array([0x7F00], np.uint16))[0]) == 0x3F800040


@pytest.mark.skipif(__import__("shutil").which("ptxas") is None, reason="needs ptxas")
def test_sm100_pack_legality_matches_ptxas():
    from warpsim.ptx.ops.convert import MIN_PTX
    from warpsim.validation.alu import prune
    from warpsim.validation.alu_cases import sm100_convert_cases

    cases = [c for c in sm100_convert_cases()
             if MIN_PTX.get(".".join(c.text.split(".")[-2:]), (0, 0)) < (9, 0)]
    ok, rejected = prune(cases, arch="sm_100a", version="8.8")
    assert len(ok) >= 20
    for c in ok:
        decode(c.text, OPS)
    for text in rejected:
        with pytest.raises(PtxError):
            decode(text, OPS)
