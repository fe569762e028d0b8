"""mma / matmul execution: arch="exact" against the independent reference in tests/reference.py,
integer and b1 forms against explicit integer arithmetic, block scaling against the PTX
selector rules, and the matmul / input-validation contract."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import reference as R
from warpsim.tensorcore import packing as P
from warpsim.errors import PtxError
from warpsim.tensorcore.execute import matmul, mma, resolve, resolve_target
from warpsim.facts.isa import ARCHS, iter_instructions

ALL = list(iter_instructions(None))
FLOAT = [i for i in ALL if i.dtype != "s32" and not i.block_scale]
INTEGER = [i for i in ALL if i.dtype == "s32" and not i.bitop]
BITS = [i for i in ALL if i.bitop]
SCALED = [i for i in ALL if i.block_scale]
ids = lambda xs: [str(x) for x in xs]  # noqa: E731

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def seed_of(*parts) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def word_dtype(ins, op):
    return np.uint64 if ins.register_bits(op) == 64 else np.uint32


def shape_of(ins, op):
    return P.matrix_shape(ins, op)


def random_words(rng, ins, op, batch):
    if ins.register_bits(op) == 64:
        return rng.integers(0, 2**64, size=batch + (32, ins.regs[op]), dtype=np.uint64, endpoint=False)
    return rng.integers(0, 2**32, size=batch + (32, ins.regs[op]), dtype=np.uint64).astype(np.uint32)


# --------------------------------------------------------------------------------------------
# Float element codes from bit fields (written here, not taken from warpsim.facts.formats)
# --------------------------------------------------------------------------------------------

#: (ebits, mbits, bias, has_inf, nan: 'ieee' | 'e4m3' | None)
FIELDS = {
    "f64": (11, 52, 1023, True, "ieee"), "f32": (8, 23, 127, True, "ieee"),
    "tf32": (8, 23, 127, True, "ieee"), "f16": (5, 10, 15, True, "ieee"),
    "bf16": (8, 7, 127, True, "ieee"), "e4m3": (4, 3, 7, False, "e4m3"),
    "e5m2": (5, 2, 15, True, "ieee"), "e3m2": (3, 2, 3, False, None),
    "e2m3": (2, 3, 1, False, None), "e2m1": (2, 1, 1, False, None),
}


def make_codes(sign, efield, frac, t):
    eb, mb = FIELDS[t][:2]
    s = np.asarray(sign, np.uint64) << np.uint64(eb + mb)
    return s | (np.asarray(efield, np.uint64) << np.uint64(mb)) | np.asarray(frac, np.uint64)


def max_normal_field(t):
    eb, mb, bias, has_inf, nan = FIELDS[t]
    return (1 << eb) - 2 if nan == "ieee" else (1 << eb) - 1


def rand_frac(rng, t, shape):
    mb = FIELDS[t][1]
    f = rng.integers(0, 2**mb, size=shape, dtype=np.uint64)
    if t == "tf32":  # tf32: the low 13 bits of the f32 word are ignored; fill them with junk
        f = f | rng.integers(0, 2**13, size=shape, dtype=np.uint64)
    return f


def codes_in_range(rng, t, shape, lo, hi):
    """Random sign and fraction; exponent field uniform in [lo, hi] (clipped to normal or 0)."""
    eb, mb, bias, has_inf, nan = FIELDS[t]
    hi = min(hi, max_normal_field(t))
    lo = max(lo, 0)
    e = rng.integers(lo, hi, size=shape, endpoint=True).astype(np.uint64)
    f = rand_frac(rng, t, shape)
    if nan == "e4m3":  # S.1111.111 is NaN: keep these finite
        f = np.where((e == max_normal_field(t)) & ((f & 7) == 7), f & ~np.uint64(1), f)
    return make_codes(rng.integers(0, 2, size=shape), e, f, t)


def special_codes(t):
    """(+0, -0, max finite, -max, min subnormal, -min subnormal, [+Inf, -Inf], [NaNs])."""
    eb, mb, bias, has_inf, nan = FIELDS[t]
    sign = 1 << (eb + mb)
    top = (1 << eb) - 1
    if nan == "e4m3":
        maxf = (top << mb) | ((1 << mb) - 2)
    elif nan == "ieee":
        maxf = ((top - 1) << mb) | ((1 << mb) - 1)
    else:
        maxf = (top << mb) | ((1 << mb) - 1)
    out = [0, sign, maxf, sign | maxf, 1, sign | 1]
    if has_inf:
        out += [top << mb, sign | (top << mb)]
    if nan == "ieee":
        out += [(top << mb) | 1, sign | (top << mb) | (1 << (mb - 1)), (top << mb) | ((1 << mb) - 1)]
    elif nan == "e4m3":
        out += [(top << mb) | 7, sign | (top << mb) | 7]
    return out


def gen_codes(rng, ins, op, dist, batch):
    """Element code matrices (batch + matrix shape) of operand ``op`` for one distribution."""
    t = ins.type_of(op)
    shape = batch + shape_of(ins, op)
    bias = FIELDS[t][2]
    if dist == "normal":
        return codes_in_range(rng, t, shape, bias - 3, bias + 3)
    if dist == "subnormal":  # A and C mostly subnormal, B around 1: results near the bottom
        if op == "b":
            return codes_in_range(rng, t, shape, bias - 2, bias + 2)
        x = codes_in_range(rng, t, shape, 0, 2)
        return np.where(rng.random(shape) < 0.5, x & ~(np.uint64((1 << FIELDS[t][0]) - 1) << np.uint64(FIELDS[t][1])), x)
    if dist == "large":  # near max finite: sums overflow narrow D types
        return codes_in_range(rng, t, shape, max_normal_field(t) - 2, max_normal_field(t))
    if dist == "zeros":  # signs of exact zero: A is +-0 (one sign per row), B >= +0, C +-0
        sbit = np.uint64(1 << (FIELDS[t][0] + FIELDS[t][1]))
        if op == "a":
            return np.broadcast_to(rng.integers(0, 2, size=shape[:-1] + (1,)).astype(np.uint64) * sbit,
                                   shape).copy()
        if op == "b":
            x = codes_in_range(rng, t, shape, bias - 1, bias + 1) & ~sbit
            return np.where(rng.random(shape) < 0.5, np.uint64(0), x)
        return rng.integers(0, 2, size=shape).astype(np.uint64) * sbit
    if dist == "specials":
        base = codes_in_range(rng, t, shape, bias - 3, bias + 3)
        sp = np.array(special_codes(t), dtype=np.uint64)
        p = 0.04 if op != "c" else 0.15
        pick = sp[rng.integers(0, sp.size, size=shape)]
        return np.where(rng.random(shape) < p, pick, base)
    raise AssertionError(dist)


def cancel_codes(rng, ins, batch):
    """A, B, C codes whose exact dot products cancel to zero with nonzero addends: A's columns
    come in equal pairs, B's rows in pairs (x, -x), C is +-0."""
    a = gen_codes(rng, ins, "a", "normal", batch)
    b = gen_codes(rng, ins, "b", "normal", batch)
    tb = ins.btype
    a[..., 1::2] = a[..., 0::2]
    b[..., 1::2, :] = b[..., 0::2, :] ^ np.uint64(1 << (FIELDS[tb][0] + FIELDS[tb][1]))
    c = gen_codes(rng, ins, "c", "zeros", batch)
    return a, b, c


DISTS = ["bits", "normal", "subnormal", "large", "specials", "zeros", "cancel"]


def operands(rng, ins, dist, batch=(2,)):
    if dist == "bits":
        return tuple(random_words(rng, ins, op, batch) for op in "abc")
    if dist == "cancel":
        codes = cancel_codes(rng, ins, batch)
    else:
        codes = tuple(gen_codes(rng, ins, op, dist, batch) for op in "abc")
    return tuple(P.pack_bits(ins, op, c.astype(word_dtype(ins, op))) for op, c in zip("abc", codes))


def assert_words_equal(ins, got, want, a, b, c):
    got = np.asarray(got)
    assert got.dtype == word_dtype(ins, "d"), got.dtype
    assert got.shape == want.shape, (got.shape, want.shape)
    if np.array_equal(got, want):
        return
    g, w = P.unpack_bits(ins, "d", got), P.unpack_bits(ins, "d", want)
    idx = tuple(int(i) for i in np.argwhere(g != w)[0])
    n_bad = int((g != w).sum())
    A, B, C = (P.unpack_bits(ins, op, x) for op, x in zip("abc", (a, b, c)))
    m, n = idx[-2], idx[-1]
    lead = idx[:-2]
    raise AssertionError(
        f"{ins}: {n_bad} D elements differ; first at {idx}: got {int(g[idx]):#x}, want "
        f"{int(w[idx]):#x}\n  A row {[hex(int(x)) for x in A[lead + (m,)]]}\n  B col "
        f"{[hex(int(x)) for x in B[lead + (slice(None), n)]]}\n  C {int(C[idx]):#x}")


# --------------------------------------------------------------------------------------------
# Floats: every non-block-scaled float instruction, several input distributions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("ins", FLOAT, ids=ids(FLOAT))
def test_exact_float_matches_reference(ins, dist):
    rng = np.random.default_rng(seed_of(ins, dist))
    a, b, c = operands(rng, ins, dist)
    copies = [x.copy() for x in (a, b, c)]
    got = mma(ins, a, b, c, arch="exact")
    for x, y in zip((a, b, c), copies):
        np.testing.assert_array_equal(x, y)
    assert_words_equal(ins, got, R.ref_mma(ins, a, b, c), a, b, c)


F64 = [i for i in FLOAT if i.dtype == "f64"]


@pytest.mark.parametrize("ins", F64, ids=ids(F64))
def test_exact_f64_nan_is_canonical(ins):
    rng = np.random.default_rng(seed_of(ins, "specials"))
    a, b, c = operands(rng, ins, "specials")
    want = R.ref_mma(ins, a, b, c)
    assert (want == np.uint64(R.CANON_NAN["f64"])).any()
    assert_words_equal(ins, mma(ins, a, b, c, arch="exact"), want, a, b, c)


def test_distributions_reach_the_cases_they_target():
    """The generated inputs really produce subnormal, infinite, NaN, -0 and +0-by-cancellation D."""
    seen = set()
    for text in ("m16n8k16.row.col.f16.f16.f16.f16", "m16n8k8.row.col.f32.tf32.tf32.f32",
                 "m16n8k8.row.col.f32.bf16.bf16.f32", "m8n8k4.row.col.f64.f64.f64.f64"):
        ins = resolve("mma.sync.aligned." + text, "exact")
        for dist in DISTS:
            rng = np.random.default_rng(seed_of(ins, dist))
            d = P.unpack_bits(ins, "d", R.ref_mma(ins, *operands(rng, ins, dist)))
            eb, mb = FIELDS[ins.dtype][:2]
            d = d.astype(np.uint64).ravel()
            mag = d & np.uint64((1 << (eb + mb)) - 1)
            neg = (d >> np.uint64(eb + mb)) & np.uint64(1)
            e = mag >> np.uint64(mb)
            if ((e == 0) & (mag != 0)).any():
                seen.add(("subnormal", ins.dtype))
            if (mag == np.uint64(((1 << eb) - 1) << mb)).any():
                seen.add(("inf", ins.dtype))
            if (d == np.uint64(R.CANON_NAN[ins.dtype])).any():
                seen.add(("nan", ins.dtype))
            if ((mag == 0) & (neg == 1)).any():
                seen.add(("-0", ins.dtype))
            if dist == "cancel" and ((d == 0)).all():
                seen.add(("cancel", ins.dtype))
    for what in ("subnormal", "inf", "nan", "-0", "cancel"):
        for dt in ("f16", "f32", "f64"):
            assert (what, dt) in seen, (what, dt)


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
@pytest.mark.parametrize("shape", ["m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"])
def test_exact_f64_directed_rounding(shape, mode):
    ins = resolve(f"mma.sync.aligned.{shape}.row.col.{mode}.f64.f64.f64.f64", "exact")
    assert ins.rounding == mode
    rng = np.random.default_rng(seed_of(shape, mode))
    a, b, c = operands(rng, ins, "normal")
    assert_words_equal(ins, mma(ins, a, b, c, arch="exact"), R.ref_mma(ins, a, b, c), a, b, c)


@pytest.mark.parametrize("shape", ["m8n8k4", "m16n8k16"])
def test_exact_f64_rn_modifier_is_the_default(shape):
    rng = np.random.default_rng(seed_of(shape, "rn"))
    ins = resolve(f"mma.sync.aligned.{shape}.row.col.rn.f64.f64.f64.f64", "exact")
    a, b, c = operands(rng, ins, "normal")
    got = mma(ins, a, b, c, arch="exact")
    assert_words_equal(ins, got, R.ref_mma(ins, a, b, c), a, b, c)
    np.testing.assert_array_equal(got, mma(f"mma.sync.aligned.{shape}.row.col.f64.f64.f64.f64",
                                           a, b, c, arch="exact"))


def test_exact_known_values():
    """A few hand-checked results: one rounding of the exact sum, not a chain of roundings."""
    ins = resolve("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "exact")
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    C = np.zeros((16, 8))
    # column 0: 1 + 2**-24 + 2**-24 = 1 + 2**-23 exactly (a chain of f32 roundings gives 1)
    A[0, :3] = [1.0, 2.0**-12, 2.0**-12]
    B[:3, 0] = [1.0, 2.0**-12, 2.0**-12]
    # column 1: 2**30 - 2**30 + 2**-20: cancellation leaves the small term exactly
    A[1, :3] = [2.0**15, -(2.0**15), 2.0**-10]
    B[:3, 1] = [2.0**15, 2.0**15, 2.0**-10]
    # column 2: 1 + 2**-24 (half an ulp of 1) + 2**-48 (breaks the tie -> rounds up)
    A[2, :3] = [1.0, 2.0**-12, 2.0**-24]
    B[:3, 2] = [1.0, 2.0**-12, 2.0**-24]
    D = matmul(ins, A, B, C, arch="exact")
    assert D[0, 0] == 1.0 + 2.0**-23
    assert D[1, 1] == 2.0**-20
    assert D[2, 2] == 1.0 + 2.0**-23
    A[2, 2] = 0.0
    assert matmul(ins, A, B, C, arch="exact")[2, 2] == 1.0  # exact tie -> even


def test_exact_f64_extreme_ranges():
    """Products outside binary64's range still sum exactly (no intermediate overflow/underflow)."""
    ins = resolve("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", "exact")
    A, B, C = np.zeros((8, 4)), np.zeros((4, 8)), np.zeros((8, 8))
    A[0, :2], B[:2, 0], C[0, 0] = [2.0**1000, -(2.0**1000)], [2.0**1000, 2.0**1000], 1.0
    A[1, :3], B[:3, 1] = [2.0**-600] * 3, [2.0**-475] * 3  # 3 * 2**-1075 -> 2 * 2**-1074
    A[2, :4], B[:4, 2], C[2, 2] = [2.0**1023] * 2 + [-(2.0**1023)] * 2, [4.0] * 4, 5.0
    A[3, :2], B[:2, 3] = [2.0**-1074] * 2, [0.5, 0.5]  # two half-ulps: exactly 2**-1074
    A[4, :2], B[:2, 4] = [2.0**1023, 2.0**1023], [2.0, -1.0]  # 2**1024 - 2**1023: finite
    A[5, :2], B[:2, 5] = [2.0**1023, 2.0**1023], [2.0, 2.0]  # overflows to +Inf
    D = matmul(ins, A, B, C, arch="exact")
    assert D.diagonal().tolist() == [1.0, 2 * 2.0**-1074, 5.0, 2.0**-1074, 2.0**1023, np.inf, 0.0, 0.0]
    tf = resolve("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "exact")
    A, B, C = np.zeros((16, 8)), np.zeros((8, 8)), np.zeros((16, 8))
    A[0, :2], B[:2, 0], C[0, 0] = [2.0**127, -(2.0**127)], [2.0**127, 2.0**127], 3.0
    A[1, :3], B[:3, 1] = [2.0**-126] * 3, [2.0**-24] * 3  # 1.5 * 2**-149 -> 2**-148
    D = matmul(tf, A, B, C, arch="exact")
    assert D[0, 0] == 3.0 and D[1, 1] == 2.0**-148


def test_large_batch_is_chunked_consistently(monkeypatch):
    from warpsim.tensorcore import execute

    ins = resolve(F16, "exact")
    rng = np.random.default_rng(11)
    a, b, c = operands(rng, ins, "normal", (8,))
    whole = mma(ins, a, b, c, arch="exact")
    monkeypatch.setattr(execute, "CHUNK", 3)  # 8 warps in chunks of 3, 3, 2
    np.testing.assert_array_equal(mma(ins, a, b, c, arch="exact"), whole)
    np.testing.assert_array_equal(whole, R.ref_mma(ins, a, b, c))
    assert mma(ins, a[:0], b[:0], c[:0], arch="exact").shape == (0, 32, 4)


# --------------------------------------------------------------------------------------------
# Integers and b1
# --------------------------------------------------------------------------------------------

INT_BITS = {"s8": 8, "u8": 8, "s4": 4, "u4": 4}


def int_values(codes, t):
    bits = INT_BITS[t]
    v = codes.astype(np.int64)
    if t.startswith("s"):
        v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    return v


def int_case(rng, ins, batch):
    """A, B codes and C (batch >= 3): warp 0 has the largest products and C just below
    INT32_MAX, warp 1 the most negative products (when a side is signed) and C just above
    INT32_MIN, the rest random values with C near either end: both wrap and clamp matter."""
    ta, tb = ins.atype, ins.btype
    ba, bb = INT_BITS[ta], INT_BITS[tb]
    a = rng.integers(0, 2 ** ba, size=batch + shape_of(ins, "a"), dtype=np.uint64)
    b = rng.integers(0, 2 ** bb, size=batch + shape_of(ins, "b"), dtype=np.uint64)
    smin_a, smin_b = 1 << (ba - 1), 1 << (bb - 1)  # codes of the signed minimum
    umax_a, umax_b = (1 << ba) - 1, (1 << bb) - 1  # codes of the unsigned maximum
    smax_a, smax_b = smin_a - 1, smin_b - 1
    sa, sb = ta[0] == "s", tb[0] == "s"
    a[0], b[0] = {(True, True): (smin_a, smin_b), (True, False): (smax_a, umax_b),
                  (False, True): (umax_a, smax_b), (False, False): (umax_a, umax_b)}[sa, sb]
    if ta[0] == "s":
        a[1], b[1] = smin_a, (smax_b if tb[0] == "s" else umax_b)
    elif tb[0] == "s":
        a[1], b[1] = umax_a, smin_b
    big = ins.k * 2 ** (ba + bb - 2)  # a fraction of the largest |row . column|
    slack = rng.integers(0, big, size=batch + (ins.m, ins.n))
    cval = np.where(rng.random(batch + (ins.m, ins.n)) < 0.5, INT32_MAX - slack, INT32_MIN + slack)
    cval[0] = INT32_MAX - slack[0]
    cval[1] = INT32_MIN + slack[1]
    c = (cval.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
    return a, b, c


@pytest.mark.parametrize("ins", INTEGER, ids=ids(INTEGER))
def test_integer(ins):
    rng = np.random.default_rng(seed_of(ins))
    batch = (3,)
    a, b, c = int_case(rng, ins, batch)
    wa, wb, wc = (P.pack_bits(ins, op, x.astype(np.uint32)) for op, x in zip("abc", (a, b, c)))
    got = mma(ins, wa, wb, wc, arch="exact")
    exact = int_values(a, ins.atype) @ int_values(b, ins.btype)
    cv = c.astype(np.int64)
    cv = np.where(cv >= 1 << 31, cv - (1 << 32), cv)
    exact = exact + cv
    # the inputs really overflow int32 (in both directions where a side is signed)
    assert (exact > INT32_MAX).any()
    assert (exact < INT32_MIN).any() or (ins.atype[0] == ins.btype[0] == "u")
    want = np.clip(exact, INT32_MIN, INT32_MAX) if ins.satfinite else exact
    want_codes = (want & 0xFFFFFFFF).astype(np.uint32)
    np.testing.assert_array_equal(P.unpack_bits(ins, "d", got), want_codes, err_msg=str(ins))
    # and against the slow reference, and every arch gives the same integer result
    np.testing.assert_array_equal(got, R.ref_mma(ins, wa, wb, wc))
    for arch in ("sm_80", "sm_90", "sm_120a"):
        np.testing.assert_array_equal(mma(ins, wa, wb, wc, arch=arch), got, err_msg=arch)


@pytest.mark.parametrize("ins", BITS, ids=ids(BITS))
def test_b1_popc(ins):
    rng = np.random.default_rng(seed_of(ins))
    a = random_words(rng, ins, "a", (2,))
    b = random_words(rng, ins, "b", (2,))
    c = random_words(rng, ins, "c", (2,))
    c[0] = 0xFFFFFFFF - 3  # -4: small counts wrap past zero ...
    c[1, :16] = 0x7FFFFFF0  # ... and past INT32_MAX (no .satfinite for b1: wraps)
    got = mma(ins, a, b, c, arch="exact")
    # explicit bitwise count, straight from the bits of the matrices
    A = P.unpack_bits(ins, "a", a).astype(np.int64)
    B = P.unpack_bits(ins, "b", b).astype(np.int64)
    C = P.unpack_bits(ins, "c", c).astype(np.int64)
    want = np.zeros(C.shape, np.int64)
    for w in range(2):
        for m in range(ins.m):
            for n in range(ins.n):
                row = "".join(str(int(x)) for x in A[w, m])
                col = "".join(str(int(x)) for x in B[w, :, n])
                x, y = int(row, 2), int(col, 2)
                cnt = bin(x ^ y if ins.bitop == "xor" else x & y).count("1")
                want[w, m, n] = (C[w, m, n] + cnt) & 0xFFFFFFFF
    np.testing.assert_array_equal(P.unpack_bits(ins, "d", got), want.astype(np.uint32))
    np.testing.assert_array_equal(got, R.ref_mma(ins, a, b, c))
    assert (want[1] < 0x80000000).any()  # wrapped around


# --------------------------------------------------------------------------------------------
# Block scaling
# --------------------------------------------------------------------------------------------


def selector_values(v):
    """Every legal (byte-id-a, thread-id-a, byte-id-b, thread-id-b)."""
    if v == 1:
        return list(itertools.product(range(4), range(2), range(4), range(4)))
    if v == 2:
        return list(itertools.product((0, 2), range(2), (0, 2), range(4)))
    return list(itertools.product((0,), range(2), (0,), range(4)))


def covering_selectors(v):
    """A few selector tuples that together use every legal (byte-id, thread-id) pair of A and of B."""
    bytes_ = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}[v]
    pa = list(itertools.product(bytes_, range(2)))
    pb = list(itertools.product(bytes_, range(4)))
    n = max(len(pa), len(pb))
    return [pa[i % len(pa)] + pb[i % len(pb)] for i in range(n)]


def scale_words(rng, ins, batch):
    """Metadata words with a different scale in every byte of every lane."""
    shape = batch + (32, 4)
    if ins.stype == "ue8m0":
        byts = rng.integers(127 - 12, 127 + 12, size=shape, endpoint=True)
        byts = np.where(rng.random(shape) < 0.02, 0xFF, byts)  # NaN scales
        byts = np.where(rng.random(shape) < 0.02, rng.choice([0, 1, 254], size=shape), byts)
    else:
        byts = rng.integers(0x20, 0x50, size=shape)  # ue4m3 2**-3 .. 2**2.9
        byts = np.where(rng.random(shape) < 0.02, rng.choice([0x7F, 0x00, 0x01, 0x7E], size=shape), byts)
    byts = byts.astype(np.uint32)
    return (byts[..., 0] | byts[..., 1] << 8 | byts[..., 2] << 16 | byts[..., 3] << 24).astype(np.uint32)


def scaled_case(rng, ins, batch, dist):
    if dist == "bits":
        a, b, c = (random_words(rng, ins, op, batch) for op in "abc")
    else:
        a, b, c = (P.pack_bits(ins, op, gen_codes(rng, ins, op, dist, batch).astype(np.uint32))
                   for op in "abc")
    return a, b, c, scale_words(rng, ins, batch), scale_words(rng, ins, batch)


def check_scaled(ins, a, b, c, sa, sb, sel):
    bya, tia, byb, tib = sel
    got = mma(ins, a, b, c, arch="exact", scale_a=sa, scale_b=sb, byte_id_a=bya, thread_id_a=tia,
              byte_id_b=byb, thread_id_b=tib)
    SA = R.scale_a_matrix(ins, sa, bya, tia)
    SB = R.scale_b_matrix(ins, sb, byb, tib)
    want = R.ref_mma(ins, a, b, c, scales=(SA, SB))
    assert_words_equal(ins, got, want, a, b, c)


@pytest.mark.parametrize("dist", ["normal", "bits", "specials"])
@pytest.mark.parametrize("ins", SCALED, ids=ids(SCALED))
def test_block_scale_exact(ins, dist):
    rng = np.random.default_rng(seed_of(ins, dist))
    sels = selector_values(ins.scale_vec)
    pick = [sels[i] for i in rng.choice(len(sels), size=min(3, len(sels)), replace=False)]
    for sel in pick:
        a, b, c, sa, sb = scaled_case(rng, ins, (1,), dist)
        check_scaled(ins, a, b, c, sa, sb, sel)


@pytest.mark.parametrize("ins", [i for i in SCALED if i.kind != "mxf8f6f4" or
                                 (i.atype, i.btype) == ("e2m1", "e4m3")],
                         ids=ids([i for i in SCALED if i.kind != "mxf8f6f4" or
                                  (i.atype, i.btype) == ("e2m1", "e4m3")]))
def test_block_scale_every_selector(ins):
    rng = np.random.default_rng(seed_of(ins, "sel"))
    a, b, c, sa, sb = scaled_case(rng, ins, (1,), "normal")
    # scale_words puts a different value in every byte of every lane, so a wrong pick shows
    sels = covering_selectors(ins.scale_vec)
    legal = selector_values(ins.scale_vec)
    assert set(sels) <= set(legal)
    assert {s[:2] for s in sels} == {s[:2] for s in legal}
    assert {s[2:] for s in sels} == {s[2:] for s in legal}
    for sel in sels:
        check_scaled(ins, a, b, c, sa, sb, sel)


@pytest.mark.parametrize("ins", SCALED, ids=ids(SCALED))
def test_block_scale_scales_are_applied_per_chunk(ins):
    """Power-of-two scales act exactly: one nonzero scale byte at a time moves one chunk."""
    V, K = ins.scale_vec, ins.k
    A = np.zeros((ins.m, K))
    B = np.zeros((K, ins.n))
    A[3, :] = 1.0
    B[:, 5] = 1.0
    one = 1.0
    for j in range(V):
        sA = np.full((ins.m, V), one)
        sB = np.full((V, ins.n), one)
        sA[3, j] = 4.0
        sB[j, 5] = 2.0
        D = matmul(ins, A, B, np.zeros((ins.m, ins.n)), arch="exact", scale_A=sA, scale_B=sB)
        chunk = K // V
        assert D[3, 5] == (K - chunk) + chunk * 8.0, (j, D[3, 5])
        assert np.count_nonzero(D) == 1


@pytest.mark.parametrize("ins", SCALED, ids=ids(SCALED))
def test_block_scale_undefined_selectors_raise(ins):
    rng = np.random.default_rng(0)
    a, b, c, sa, sb = scaled_case(rng, ins, (), "normal")
    legal = selector_values(ins.scale_vec)
    bad = []
    for pos, vals in enumerate([range(-1, 6), range(-1, 4), range(-1, 6), range(-1, 6)]):
        for v in vals:
            sel = [0, 0, 0, 0]
            sel[pos] = v
            if tuple(sel) not in legal:
                bad.append(tuple(sel))
    assert len(bad) >= 10
    for sel in bad:
        with pytest.raises(PtxError) as ei:
            mma(ins, a, b, c, arch="exact", scale_a=sa, scale_b=sb, byte_id_a=sel[0],
                thread_id_a=sel[1], byte_id_b=sel[2], thread_id_b=sel[3])
        assert "id" in str(ei.value)


def test_non_block_scale_rejects_selectors():
    ins = FLOAT[0]
    rng = np.random.default_rng(0)
    a, b, c = operands(rng, ins, "normal", ())
    with pytest.raises(PtxError):
        mma(ins, a, b, c, arch="exact", byte_id_a=1)
    with pytest.raises(PtxError):
        mma(ins, a, b, c, arch="exact", thread_id_b=2)


# --------------------------------------------------------------------------------------------
# matmul, broadcasting, inputs untouched
# --------------------------------------------------------------------------------------------


def sample_instructions():
    want = []
    seen = set()
    for i in ALL:
        key = (i.form, i.shape, i.dtype, i.ctype, i.scale_vec, i.bitop)
        if key not in seen and (i.form not in ("f8f6f4", "mxf8f6f4") or i.atype == i.btype):
            seen.add(key)
            want.append(i)
    return want


SAMPLE = sample_instructions()


def random_values(rng, ins, op, batch):
    t = ins.type_of(op)
    shape = batch + shape_of(ins, op)
    if t in INT_BITS:
        lo = -(1 << (INT_BITS[t] - 1)) if t[0] == "s" else 0
        return rng.integers(lo, lo + (1 << INT_BITS[t]), size=shape)
    if t == "s32":
        return rng.integers(-1000, 1000, size=shape)
    if t == "b1":
        return rng.integers(0, 2, size=shape)
    codes = gen_codes(rng, ins, op, "normal", batch)
    return P.unpack(ins, op, P.pack_bits(ins, op, codes.astype(word_dtype(ins, op))))


def scale_values(rng, ins, batch):
    V = ins.scale_vec
    sa = 2.0 ** rng.integers(-4, 5, size=batch + (ins.m, V))
    sb = 2.0 ** rng.integers(-4, 5, size=batch + (V, ins.n))
    if ins.stype == "ue4m3":
        sa = sa * rng.choice([1.0, 1.25, 1.5, 1.875], size=sa.shape)
        sb = sb * rng.choice([1.0, 1.125, 1.75], size=sb.shape)
    return sa, sb


def seed_scale_words(ins, codes, operand):
    """Metadata words for byte-id 0 / thread-id 0 from the seed's rules (not blockscale.py)."""
    codes = np.asarray(codes, np.uint32)
    words = np.zeros(codes.shape[:-2] + (32,), np.uint32)
    for j in range(ins.scale_vec):
        if operand == "a":
            for row in range(ins.m):
                words[..., 4 * (row % 8) + row // 8] |= codes[..., row, j] << np.uint32(8 * j)
        else:
            for col in range(ins.n):
                words[..., 4 * col] |= codes[..., j, col] << np.uint32(8 * j)
    return words


def scale_codes(values, stype):
    """ue8m0: log2; ue4m3: exponent/mantissa fields (values chosen exactly representable)."""
    v = np.asarray(values, np.float64)
    e = np.floor(np.log2(v)).astype(np.int64)
    if stype == "ue8m0":
        return (e + 127).astype(np.uint32)
    m = np.rint((v / 2.0**e - 1) * 8).astype(np.int64)
    return (((e + 7) << 3) | m).astype(np.uint32)


@pytest.mark.parametrize("ins", SAMPLE, ids=ids(SAMPLE))
def test_matmul_is_pack_mma_unpack(ins):
    rng = np.random.default_rng(seed_of(ins, "matmul"))
    batch = (2,)
    A, B, C = (random_values(rng, ins, op, batch) for op in "abc")
    kw, kwm = {}, {}
    if ins.block_scale:
        sA, sB = scale_values(rng, ins, batch)
        kw = dict(scale_A=sA, scale_B=sB)
        kwm = dict(scale_a=seed_scale_words(ins, scale_codes(sA, ins.stype), "a"),
                   scale_b=seed_scale_words(ins, scale_codes(sB, ins.stype), "b"))
    copies = [np.array(x, copy=True) for x in (A, B, C, *kw.values())]
    D = matmul(ins, A, B, C, arch="exact", **kw)
    for x, y in zip((A, B, C, *kw.values()), copies):
        np.testing.assert_array_equal(x, y)
    words = mma(ins, P.pack(ins, "a", A), P.pack(ins, "b", B), P.pack(ins, "c", C), arch="exact", **kwm)
    np.testing.assert_array_equal(D, P.unpack(ins, "d", words))
    assert D.shape == batch + shape_of(ins, "d")
    assert D.dtype == (np.int64 if ins.dtype == "s32" else np.float64)
    # and the words against the reference
    a, b, c = (P.pack(ins, op, x) for op, x in zip("abc", (A, B, C)))
    scales = None
    if ins.block_scale:
        scales = (R.scale_a_matrix(ins, kwm["scale_a"], 0, 0), R.scale_b_matrix(ins, kwm["scale_b"], 0, 0))
    np.testing.assert_array_equal(words, R.ref_mma(ins, a, b, c, scales=scales))


@pytest.mark.parametrize("ins", SAMPLE, ids=ids(SAMPLE))
def test_mma_batch_broadcasting(ins):
    rng = np.random.default_rng(seed_of(ins, "bcast"))
    a = random_words(rng, ins, "a", (3, 1))
    b = random_words(rng, ins, "b", (1, 4))
    c = random_words(rng, ins, "c", ())
    kw = {}
    if ins.block_scale:
        kw = dict(scale_a=scale_words(rng, ins, (3, 1)), scale_b=scale_words(rng, ins, (4,)))
    copies = [x.copy() for x in (a, b, c, *kw.values())]
    d = mma(ins, a, b, c, arch="exact", **kw)
    for x, y in zip((a, b, c, *kw.values()), copies):
        np.testing.assert_array_equal(x, y)
    assert d.shape == (3, 4, 32, ins.regs["d"])
    for i in range(3):
        for j in range(4):
            one = {}
            if kw:
                one = dict(scale_a=kw["scale_a"][i, 0], scale_b=kw["scale_b"][j])
            np.testing.assert_array_equal(d[i, j], mma(ins, a[i, 0], b[0, j], c, arch="exact", **one))


def test_matmul_batch_broadcasting():
    ins = resolve("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "exact")
    rng = np.random.default_rng(5)
    A = random_values(rng, ins, "a", (3, 1))
    B = random_values(rng, ins, "b", (1, 4))
    C = random_values(rng, ins, "c", ())
    D = matmul(ins, A, B, C, arch="exact")
    assert D.shape == (3, 4, 16, 8)
    for i in range(3):
        for j in range(4):
            np.testing.assert_array_equal(D[i, j], matmul(ins, A[i, 0], B[0, j], C, arch="exact"))


def test_matmul_quadpair_shapes():
    ins = resolve("mma.sync.aligned.m8n8k4.row.row.f32.f16.f16.f32", "exact")
    rng = np.random.default_rng(6)
    A = random_values(rng, ins, "a", ())
    B = random_values(rng, ins, "b", ())
    C = random_values(rng, ins, "c", ())
    assert A.shape == (4, 8, 4)
    D = matmul(ins, A, B, C, arch="exact")
    assert D.shape == (4, 8, 8)
    want = R.ref_mma(ins, P.pack(ins, "a", A), P.pack(ins, "b", B), P.pack(ins, "c", C))
    np.testing.assert_array_equal(D, P.unpack(ins, "d", want))


def test_mma_accepts_lists_and_signed_dtypes():
    ins = resolve("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "exact")
    rng = np.random.default_rng(7)
    a, b, c = operands(rng, ins, "normal", ())
    want = mma(ins, a, b, c, arch="exact")
    np.testing.assert_array_equal(mma(ins, a.tolist(), b.astype(np.int64), c, arch="exact"), want)
    np.testing.assert_array_equal(mma(ins.text, a, b, c, arch="exact"), want)


# --------------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------------

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MXF4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"


def f16_words():
    ins = resolve(F16, "exact")
    rng = np.random.default_rng(8)
    return ins, operands(rng, ins, "normal", ())


def test_bad_lane_count():
    ins, (a, b, c) = f16_words()
    with pytest.raises(ValueError, match=r"32"):
        mma(ins, a[:31], b, c, arch="exact")
    with pytest.raises(ValueError, match=r"\(\.\.\., 32, 2\)"):
        mma(ins, a, b[:16], c, arch="exact")


def test_bad_register_count():
    ins, (a, b, c) = f16_words()
    with pytest.raises(ValueError, match=r"operand a.*\(\.\.\., 32, 4\)"):
        mma(ins, a[:, :3], b, c, arch="exact")
    with pytest.raises(ValueError, match=r"operand c"):
        mma(ins, a, b, np.zeros((32, 5), np.uint32), arch="exact")
    with pytest.raises(ValueError):
        mma(ins, a[0], b, c, arch="exact")  # 1-D


def test_float_dtype_rejected():
    ins, (a, b, c) = f16_words()
    with pytest.raises(TypeError, match="integer"):
        mma(ins, a.astype(np.float64), b, c, arch="exact")
    with pytest.raises(TypeError, match="integer"):
        mma(ins, a, b, c.astype(np.float32), arch="exact")


def test_negative_and_too_wide_words_rejected():
    ins, (a, b, c) = f16_words()
    neg = a.astype(np.int64)
    neg[3, 1] = -1
    with pytest.raises(ValueError, match="non-negative|\\[0"):
        mma(ins, neg, b, c, arch="exact")
    wide = c.astype(np.int64)
    wide[0, 0] = 1 << 32
    with pytest.raises(ValueError, match="2\\*\\*32"):
        mma(ins, a, b, wide, arch="exact")
    with pytest.raises(ValueError):
        mma(ins, a.tolist()[:0] + [[-1] * 4] + a.tolist()[1:], b, c, arch="exact")


def test_non_broadcasting_batches():
    ins, (a, b, c) = f16_words()
    with pytest.raises(ValueError, match="broadcast") as ei:
        mma(ins, np.stack([a, a]), np.stack([b, b, b]), c, arch="exact")
    assert "(2, 32, 4)" in str(ei.value) and "(3, 32, 2)" in str(ei.value)


def test_unknown_arch_lists_known():
    ins, (a, b, c) = f16_words()
    with pytest.raises(ValueError) as ei:
        mma(ins, a, b, c, arch="sm_91")
    msg = str(ei.value)
    assert "sm_91" in msg and "sm_90" in msg and "sm_120a" in msg
    with pytest.raises(ValueError) as ei:
        matmul(ins, np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8)), arch="exacto")
    assert "sm_80" in str(ei.value)


def test_scale_operands_required_and_only_for_block_scale():
    ins = resolve(MXF4, "exact")
    rng = np.random.default_rng(9)
    a, b, c, sa, sb = scaled_case(rng, ins, (), "normal")
    with pytest.raises(ValueError, match="scale_a"):
        mma(ins, a, b, c, arch="exact")
    with pytest.raises(ValueError, match="scale"):
        mma(ins, a, b, c, arch="exact", scale_a=sa)
    with pytest.raises(ValueError, match="scale"):
        matmul(ins, np.zeros((16, 64)), np.zeros((64, 8)), np.zeros((16, 8)), arch="exact")
    with pytest.raises(ValueError, match="scale"):  # wrong scale matrix shape
        matmul(ins, np.zeros((16, 64)), np.zeros((64, 8)), np.zeros((16, 8)), arch="exact",
               scale_A=np.ones((16, 1)), scale_B=np.ones((2, 8)))
    with pytest.raises(ValueError, match="32"):
        mma(ins, a, b, c, arch="exact", scale_a=sa[:16], scale_b=sb)
    with pytest.raises(TypeError):
        mma(ins, a, b, c, arch="exact", scale_a=sa.astype(float), scale_b=sb)
    fins, (fa, fb, fc) = f16_words()
    with pytest.raises(ValueError, match="block_scale"):
        mma(fins, fa, fb, fc, arch="exact", scale_a=sa, scale_b=sb)
    with pytest.raises(ValueError, match="block_scale"):
        mma(fins, fa, fb, fc, arch="exact", scale_b=sb)


def test_bad_instruction_argument():
    ins, (a, b, c) = f16_words()
    with pytest.raises(TypeError):
        mma(42, a, b, c, arch="exact")
    with pytest.raises(PtxError):
        mma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16", a, b, c, arch="exact")


def test_arch_names_all_run():
    ins, (a, b, c) = f16_words()
    for name in ARCHS:
        if ARCHS[name].sm >= 80:
            assert mma(ins, a, b, c, arch=name).shape == (32, 4)


# --------------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------------

HALF = [i for i in FLOAT if i.atype in ("f16", "bf16")]


R_SPECIAL = {t: special_codes(t) for t in ("f16", "bf16", "f32")}


@st.composite
def half_case(draw):
    ins = draw(st.sampled_from(HALF))
    def codes(op, bits):
        shape = shape_of(ins, op)
        n = int(np.prod(shape))
        # any code, the specials (+-0, +-Inf, NaNs, max, min subnormal) and, for f16, codes with
        # small exponents (exponent bits 10-13 cleared) so that cancellation and subnormals occur
        elem = st.one_of(st.integers(0, 2**bits - 1),
                         st.sampled_from(R_SPECIAL[ins.type_of(op)]),
                         st.integers(0, 2**bits - 1).map(lambda x: x & ~(0x3C00 if bits == 16 else 0)))
        return np.array(draw(st.lists(elem, min_size=n, max_size=n)), np.uint64).reshape(shape)
    a = codes("a", 16)
    b = codes("b", 16)
    cb = 32 if ins.ctype == "f32" else 16
    c = codes("c", cb)
    return ins, a, b, c


@HYP
@given(half_case())
def test_hypothesis_half_exact_matches_reference(case):
    ins, A, B, C = case
    a, b, c = (P.pack_bits(ins, op, x.astype(np.uint32)) for op, x in zip("abc", (A, B, C)))
    assert_words_equal(ins, mma(ins, a, b, c, arch="exact"), R.ref_mma(ins, a, b, c), a, b, c)


@HYP
@given(half_case(), st.randoms(use_true_random=False))
def test_hypothesis_exact_invariant_under_k_permutation(case, rnd):
    ins, A, B, C = case
    k = A.shape[-1]
    perm = list(range(k))
    rnd.shuffle(perm)
    a, b, c = (P.pack_bits(ins, op, x.astype(np.uint32)) for op, x in zip("abc", (A, B, C)))
    pa = P.pack_bits(ins, "a", A[..., perm].astype(np.uint32))
    pb = P.pack_bits(ins, "b", B[..., perm, :].astype(np.uint32))
    np.testing.assert_array_equal(mma(ins, a, b, c, arch="exact"), mma(ins, pa, pb, c, arch="exact"))


def test_resolve_target_names_the_target_auto_picked():
    f16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    assert resolve_target(f16, "auto")[1] == "sm_90"
    assert resolve_target(f16, "sm_80")[1] == "sm_80"
    assert resolve_target(f16, "exact")[1] == "exact"
    ins, target = resolve_target(SCALED[0].text, "auto")
    assert target == ins.arch and target.startswith("sm_12")
