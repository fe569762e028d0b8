"""The fast engine against the slow model reference (tests/model_reference.py), every model.

For each architecture model (sm_70 ... sm_120a) and a representative set of the dense
floating-point forms legal there (every input type family, both D types, each shape, the
m8n8k4 .f16 quad-pair forms, .kind::f8f6f4 type pairs and every .block_scale kind),
``warpsim.mma(..., arch=target)`` runs warps of random and adversarial inputs and every D word
is compared with the reference's.  The input families (per warp, from fixed seeds):

normal     exponents near the bias
spread     exponents spread over +-20 binades: truncation to F bits below the largest matters
wide       exponents anywhere in the type's range, subnormals included (bf16/tf32: 2**+-127)
zeros      +-0, subnormals and the smallest normals; C +-0 or tiny: e_zero decides E
cancel     half the products negate the other half (some perturbed by an ulp); C +-0 or small
overflow   largest exponents, C near its type's largest finite value: Inf, NaN, RZ clamping
specials   normal values with ~6% +-0, +-Inf, NaN, +-max, +-min subnormal
bits       uniformly random bit patterns
zerorows   A rows all +-0 (others tiny), B large, C tiny or +-0: no product decides E
saturate   the largest magnitudes, all positive (bf16/tf32: 2**20..2**30), C 0 or the largest
           finite: the widest exact sums (int32 bounds), RZ clamping, overflow
tiny       products near D's smallest normal, C +-0 or subnormal: subnormal results
coarse     two significant bits, exponents within +-6: sums land on rounding ties and boundaries

Each case compares the words of the whole batch and of every warp run alone (the engine
chooses some paths per batch).
"""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import model_reference as MR
from tests import reference as R
from warpsim import instructions, mma
from warpsim.tensorcore.execute import resolve
from warpsim.tensorcore.packing import matrix_shape, pack_bits, unpack_bits

MODEL_ARCHS = ("sm_70", "sm_75", "sm_80", "sm_89", "sm_90", "sm_100a", "sm_120a")
FAMILIES = ("normal", "spread", "wide", "zeros", "cancel", "overflow", "specials", "bits",
            "coarse", "zerorows", "saturate", "tiny")

# --------------------------------------------------------------------------------------------
# Which forms: one per arithmetic (layouts collapsed), thinned where type pairs abound
# --------------------------------------------------------------------------------------------


def _key(ins):
    return (ins.shape, ins.atype, ins.btype, ins.ctype, ins.dtype, ins.kind, ins.stype,
            ins.scale_vec)


def _forms(arch):
    seen, out = set(), []
    for ins in instructions(arch=arch):
        if ins.dtype not in ("f32", "f16") or ins.sparse or ins.atype == "f64":
            continue
        if _key(ins) in seen:
            continue
        seen.add(_key(ins))
        out.append(resolve(ins, arch))
    # fp8 / f6 / f4 type pairs (4 or 25 per shape, x 2 D types): every pair once per shape,
    # the D type alternating, so that across m16n8k16 and m16n8k32 each (pair, D type) occurs;
    # .kind::mxf8f6f4 (25 pairs): those with an fp8 or an identical pair, and e2m1 x e3m2
    dense8 = [i for i in out if i.atype not in ("f16", "bf16", "tf32") and not i.block_scale]
    keep = set()
    for shape in sorted({i.shape for i in dense8}):
        group = [i for i in dense8 if i.shape == shape]
        pairs = sorted({(i.kind or "", i.atype, i.btype) for i in group})
        keep |= {(shape, p, ("f32", "f16")[(n + shape[2] // 16) % 2]) for n, p in enumerate(pairs)}
    out = [i for i in out if i not in dense8
           or (i.shape, (i.kind or "", i.atype, i.btype), i.dtype) in keep]
    out = [i for i in out if i.kind != "mxf8f6f4" or i.atype == i.btype
           or "e4m3" in (i.atype, i.btype) or (i.atype, i.btype) == ("e2m1", "e3m2")]
    return out


CASES = [(arch, ins) for arch in MODEL_ARCHS for ins in _forms(arch)]


def _id(case):
    arch, ins = case
    t = ins.text.replace("mma.sync.aligned.", "").replace(".row.col", "").replace("block_scale.", "")
    return f"{arch}:{t}"


# --------------------------------------------------------------------------------------------
# Element codes from bit fields
# --------------------------------------------------------------------------------------------

#: (ebits, mbits, bias, specials: 'ieee' | 'e4m3' | None); tf32 is held in an f32 word
FIELDS = {"f32": (8, 23, 127, "ieee"), "tf32": (8, 23, 127, "ieee"), "f16": (5, 10, 15, "ieee"),
          "bf16": (8, 7, 127, "ieee"), "e4m3": (4, 3, 7, "e4m3"), "e5m2": (5, 2, 15, "ieee"),
          "e3m2": (3, 2, 3, None), "e2m3": (2, 3, 1, None), "e2m1": (2, 1, 1, None)}


def _top_field(t):
    """Largest exponent field of finite values."""
    eb, mb, bias, sp = FIELDS[t]
    return (1 << eb) - 1 - (sp == "ieee")


def _make(t, sign, field, mant):
    eb, mb, bias, sp = FIELDS[t]
    mant = mant & ((1 << mb) - 1)
    if sp == "e4m3":  # S.1111.111 is NaN: keep finite
        mant = np.where((field == (1 << eb) - 1) & (mant == 7), 6, mant)
    u = np.uint64
    return (sign.astype(u) << (eb + mb)) | (field.astype(u) << mb) | mant.astype(u)


def _specials(t):
    """Special-ish codes of type t: +-0, +-max, +-min subnormal, and +-Inf / NaN where they exist."""
    eb, mb, bias, sp = FIELDS[t]
    s = 1 << (eb + mb)
    top = _top_field(t)
    mx = (top << mb) | ((1 << mb) - 1) - (sp == "e4m3")
    out = [0, s, mx, s | mx, 1, s | 1]
    if sp == "ieee":
        inf = ((1 << eb) - 1) << mb
        out += [inf, s | inf, inf | 1, inf | (1 << (mb - 1)), s | inf | 3]
    elif sp == "e4m3":
        out += [0x7F, 0xFF]
    return np.array(out, dtype=np.uint64)


def gen_codes(rng, ins, role, shape, family):
    """Element codes for operand ``role`` ('a', 'b' or 'c') of ``ins``, of one family."""
    t = ins.type_of(role)
    eb, mb, bias, sp = FIELDS[t]
    top = _top_field(t)
    sign = rng.integers(0, 2, size=shape)
    mant = rng.integers(0, 1 << mb, size=shape, dtype=np.uint64)
    if t == "tf32":  # the low 13 bits are not part of the value: random
        mant = mant | rng.integers(0, 1 << 13, size=shape, dtype=np.uint64)

    def fields(lo, hi):  # exponent fields in [lo, hi], clamped into the finite range
        lo = min(max(lo, 0), top)
        return rng.integers(lo, min(max(hi, lo), top), size=shape, endpoint=True)

    if family == "bits":
        return rng.integers(0, 1 << (1 + eb + mb), size=shape, dtype=np.uint64)
    if family == "normal":
        return _make(t, sign, fields(bias - 3, bias + 3), mant)
    if family == "spread":
        return _make(t, sign, fields(bias - 20, bias + 20), mant)
    if family == "wide":
        code = _make(t, sign, fields(0, top), mant)
        return np.where(rng.random(shape) < 0.1, sign.astype(np.uint64) << (eb + mb), code)
    if family == "zeros":
        u = rng.random(shape)
        field = np.where(u < 0.85, 0, 1)
        code = _make(t, sign, field, mant)
        return np.where(u < 0.5, sign.astype(np.uint64) << (eb + mb), code)
    if family == "overflow":
        if role == "c":
            return _make(t, sign, np.full(shape, top), mant)
        return _make(t, np.zeros(shape, int) if role == "a" else sign, fields(top - 2, top), mant)
    if family == "specials":
        code = _make(t, sign, fields(bias - 3, bias + 3), mant)
        sp_codes = _specials(t)
        pick = sp_codes[rng.integers(0, len(sp_codes), size=shape)]
        return np.where(rng.random(shape) < 0.06, pick, code)
    if family == "zerorows":
        if role == "a":
            code = _make(t, sign, fields(0, 1), mant)
            rows = rng.random(shape[:-1] + (1,)) < 0.7
            return np.where(rows, sign.astype(np.uint64) << (eb + mb), code)
        if role == "b":
            return _make(t, sign, fields(top - 8, top), mant)
        code = _make(t, sign, fields(0, 2), mant)
        return np.where(rng.random(shape) < 0.3, sign.astype(np.uint64) << (eb + mb), code)
    if family == "saturate":  # largest magnitudes, all positive: the widest exact sums
        plus = np.zeros(shape, int)
        if role == "c":  # 0 or the largest finite: a positive sum then clamps (RZ) or overflows
            code = _make(t, plus, np.full(shape, top), np.full(shape, (1 << mb) - 1, np.uint64))
            return np.where(rng.random(shape) < 0.5, 0, code)
        hi = (top - 1, top) if t in ("f16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1") else (
            bias + 20, bias + 30)  # bf16 / tf32: products 2**40 .. 2**60, below f32's range
        return _make(t, plus, fields(*hi), mant | np.uint64((1 << mb) - 2))
    if family == "tiny":  # products near D's smallest normal: subnormal results
        if role == "c":
            code = _make(t, sign, fields(0, 1), mant)
            return np.where(rng.random(shape) < 0.5, sign.astype(np.uint64) << (eb + mb), code)
        target = (-127 if ins.dtype == "f32" else -20) // 2 + bias
        return _make(t, sign, fields(target - 4, target + 4), mant)
    if family == "coarse":
        mant = mant & ~np.uint64((1 << max(mb - 2, 0)) - 1)
        shift = 12 if role == "c" else 0
        return _make(t, sign, fields(bias - 6 + shift, bias + 6 + shift), mant)
    if family == "cancel":
        if role == "c":
            code = _make(t, sign, fields(bias - 8, bias - 2), mant)
            return np.where(rng.random(shape) < 0.6, sign.astype(np.uint64) << (eb + mb), code)
        return _make(t, sign, fields(bias - 6, bias + 6), mant)
    raise AssertionError(family)


def _cancel(rng, ins, A, B):
    """Make the products of k and its partner k ^ bit opposite (a quarter perturbed)."""
    K = A.shape[-1]
    bit = rng.choice([b for b in (1, 2, 4, 8, 16, 32) if b < K and (not ins.block_scale or b < 16)])
    k = np.arange(K)
    lo = k[(k & bit) == 0]
    A[..., lo ^ bit] = A[..., lo]
    eb, mb = FIELDS[ins.btype][:2]
    B[..., lo ^ bit, :] = B[..., lo, :] ^ np.uint64(1 << (eb + mb))
    nudge = rng.random(A[..., lo].shape) < 0.25 / K
    A[..., lo] ^= nudge.astype(np.uint64)  # one ulp (or one tf32 ignored bit)
    return A, B


def operands(rng, ins, families):
    """Register words a, b, c for one warp per family."""
    ops = {}
    for op in "abc":
        shape = matrix_shape(ins, op)
        ops[op] = np.stack([gen_codes(rng, ins, op, shape, f) for f in families])
    for w, f in enumerate(families):
        if f == "cancel":
            ops["a"][w], ops["b"][w] = _cancel(rng, ins, ops["a"][w], ops["b"][w])
        if f == "zeros" and rng.random() < 0.5:  # some rows with no non-zero product at all
            rows = rng.random(ops["a"][w].shape[:-1]) < 0.5
            ops["a"][w][rows] &= np.uint64(1 << (FIELDS[ins.atype][0] + FIELDS[ins.atype][1]))
    return tuple(pack_bits(ins, op, ops[op].astype(np.uint32)) for op in "abc")


def scale_words(rng, ins, families):
    """Metadata words for block scaling: scales spread around 1, some extreme, some NaN."""
    shape = (len(families), 32, 4)
    if ins.stype == "ue8m0":
        byts = rng.integers(127 - 20, 127 + 20, size=shape, endpoint=True)
        big = np.array([f == "overflow" for f in families])[:, None, None]
        byts = np.where(big, rng.integers(230, 254, size=shape, endpoint=True), byts)
        odd = rng.choice([0, 1, 2, 253, 254, 0xFF], size=shape)
    else:
        byts = rng.integers(0x08, 0x7E, size=shape, endpoint=True)
        odd = rng.choice([0x00, 0x01, 0x07, 0x7E, 0x7F, 0xFF, 0x80], size=shape)
    byts = np.where(rng.random(shape) < 0.03, odd, byts).astype(np.uint32)
    return (byts[..., 0] | byts[..., 1] << 8 | byts[..., 2] << 16 | byts[..., 3] << 24).astype(np.uint32)


def _selectors(ins, rng):
    bytes_ = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}[ins.scale_vec]
    return (int(rng.choice(bytes_)), int(rng.integers(0, 2)), int(rng.choice(bytes_)),
            int(rng.integers(0, 4)))


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------


def check(ins, arch, a, b, c, sa=None, sb=None, sel=(0, 0, 0, 0)):
    """Run warpsim and the reference; assert every D word equal, naming the first mismatch."""
    scales, kw, how = None, {}, "the batch"
    if ins.block_scale:
        kw = dict(scale_a=sa, scale_b=sb, byte_id_a=sel[0], thread_id_a=sel[1],
                  byte_id_b=sel[2], thread_id_b=sel[3])
        scales = (R.scale_a_matrix(ins, sa, sel[0], sel[1]), R.scale_b_matrix(ins, sb, sel[2], sel[3]))
    want = MR.model_mma(ins, arch, a, b, c, scales)
    got = mma(ins, a, b, c, arch=arch, **kw)
    if np.array_equal(got, want) and a.ndim == 3 and len(a) > 1:
        # warp by warp too: the engine picks some paths (shortcut rounding, int32 sums, scale
        # clamping) for a whole batch, so a warp alone may take a path the batch did not
        got = np.concatenate([
            mma(ins, a[w : w + 1], b[w : w + 1], c[w : w + 1], arch=arch,
                **{k: (v[w : w + 1] if k.startswith("scale") else v) for k, v in kw.items()})
            for w in range(len(a))])
        how = "warps run one at a time"
    if np.array_equal(got, want):
        return got.size
    gd, wd = unpack_bits(ins, "d", got), unpack_bits(ins, "d", want)
    idx = tuple(int(i[0]) for i in np.nonzero(gd != wd))
    A, B, C = (unpack_bits(ins, op, x) for op, x in zip("abc", (a, b, c)))
    lead, (m, n) = idx[:-2], idx[-2:]
    msg = [f"{arch} {ins.text} ({how}): {(gd != wd).sum()} D elements differ; first at {idx}",
           f"  expected {int(wd[idx]):#x}, got {int(gd[idx]):#x}",
           f"  A row   {[hex(int(x)) for x in A[lead][m]]}",
           f"  B col   {[hex(int(x)) for x in B[lead][:, n]]}",
           f"  C       {int(C[idx]):#x}"]
    if scales is not None:
        msg.append(f"  scale A row {[hex(int(x)) for x in scales[0][lead][m]]}, "
                   f"scale B col {[hex(int(x)) for x in scales[1][lead][:, n]]}")
    raise AssertionError("\n".join(msg))


def _seed(*parts):
    return zlib.crc32("|".join(map(str, parts)).encode())


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_engine_matches_model_reference(case):
    arch, ins = case
    rng = np.random.default_rng(_seed(arch, ins.text))
    a, b, c = operands(rng, ins, FAMILIES)
    if ins.block_scale:
        sa, sb = scale_words(rng, ins, FAMILIES), scale_words(rng, ins, FAMILIES)
        check(ins, arch, a, b, c, sa, sb, _selectors(ins, rng))
    else:
        check(ins, arch, a, b, c)


@pytest.mark.parametrize("arch, text, want", [
    ("sm_80", "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32",
     {"nan": 0x7FFFFFFF, "+inf": 0x7F800000, "-inf": 0xFF800000, "max": 0x7F7FFFFF}),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
     {"nan": 0x7FFF, "+inf": 0x7C00, "-inf": 0xFC00}),
])
def test_families_reach_the_edges(arch, text, want):
    """The input families do produce what they are for: canonical NaN, both Infs, the RZ clamp
    to the largest finite, +0, subnormal results, and D values spread over many binades."""
    ins = resolve(text, arch)
    a, b, c = operands(np.random.default_rng(_seed(arch, ins.text)), ins, FAMILIES)
    d = unpack_bits(ins, "d", mma(ins, a, b, c, arch=arch)).astype(np.int64)
    for name, code in want.items():
        assert (d == code).any(), name
    mb, _, _, _, _, eb, neg0 = MR.OUT[ins.dtype]
    field = (d >> mb) & ((1 << eb) - 1)
    assert (d == 0).any() and ((field == 0) & (d != 0) & (d != neg0)).any()  # +0, subnormals
    assert len(np.unique(field)) > 40 if ins.dtype == "f32" else len(np.unique(field)) > 20


def test_case_list_covers_every_model_and_family():
    """The representative set really spans every model, input family, D type and kind."""
    by_arch = {a: [i for x, i in CASES if x == a] for a in MODEL_ARCHS}
    for arch, forms in by_arch.items():
        assert {i.dtype for i in forms} == {"f32", "f16"}, arch
        assert any(i.quadpair for i in forms), arch
    assert {i.atype for i in by_arch["sm_80"]} == {"f16", "bf16", "tf32"}
    assert {(i.atype, i.btype) for i in by_arch["sm_89"] if i.atype in ("e4m3", "e5m2")} == {
        (x, y) for x in ("e4m3", "e5m2") for y in ("e4m3", "e5m2")}
    kinds = {i.kind for i in by_arch["sm_120a"]}
    assert kinds == {None, "f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4"}
    assert {i.stype for i in by_arch["sm_120a"] if i.kind == "mxf4nvf4"} == {"ue8m0", "ue4m3"}
    assert {i.k for _, i in CASES} >= {4, 8, 16, 32, 64}


# --------------------------------------------------------------------------------------------
# Hand-built edge cases (the rules the model states, one at a time)
# --------------------------------------------------------------------------------------------


def _words(ins, A, B, C):
    return tuple(pack_bits(ins, op, np.asarray(x, np.uint64).astype(np.uint32))
                 for op, x in zip("abc", (A, B, C)))


def _d_codes(ins, arch, A, B, C):
    a, b, c = _words(ins, A, B, C)
    check(ins, arch, a, b, c)
    return unpack_bits(ins, "d", mma(ins, a, b, c, arch=arch))


F16_32 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F16_16 = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"


def _tile(ins, a, b, c):
    return (np.full(matrix_shape(ins, "a"), a, np.uint64),
            np.full(matrix_shape(ins, "b"), b, np.uint64),
            np.full(matrix_shape(ins, "c"), c, np.uint64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_zero_terms_take_e_zero(arch):
    """bf16, f32 D: 2**-70 * 2**-70 - 2**-80 * 2**-80 (+ 14 products 2**-200 that cancel)
    with C = +0.  The zero C counts at e_zero_f32 (-132, -133), above the largest product
    (-140), so the 2**-160 product is truncated away and D is exactly 2**-140; were E the
    largest product's exponent, D would be 2**-140 - 2**-160 rounded toward zero:
    2**-140 - 2**-149.  With a zero product instead of the 2**-200 ones, the same."""
    ins = resolve("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", arch)
    A, B, C = _tile(ins, 0x0D80, 0x0D80, 0)  # 2**-100 * 2**-100
    A[:, 1::2] = 0x8D80  # ... with alternating signs
    A[:, 0], B[0, :] = 0x1C80, 0x1C80  # 2**-70
    A[:, 1], B[1, :] = 0x9780, 0x1780  # -2**-80, 2**-80
    assert (_d_codes(ins, arch, A, B, C) == 0x200).all()  # 2**-140 = 2**9 * 2**-149
    A[:, 2] = 0
    assert (_d_codes(ins, arch, A, B, C) == 0x200).all()


def test_rz_overflow_to_inf_from_2_128():
    """f32 D: a sum at or above 2**128 is +Inf; just below, toward zero, the largest finite."""
    ins = resolve("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", "sm_80")
    A, B, C = _tile(ins, 0, 0, 0x7F7FFFFF)  # products zero, C = max finite
    A[0, 0], B[0, 0] = 0x7F00, 0x3F80  # 2**127 * 1 in row 0
    d = _d_codes(ins, "sm_80", A, B, C)
    assert d[0, 0] == 0x7F800000 and d[1, 0] == 0x7F7FFFFF


def test_fused_zero_is_positive_but_lowered_m8n8k4_keeps_ieee_signs():
    """A fused step's zero result is +0; the sm_80 m8n8k4 .f16 FFMA sequence keeps -0."""
    ins = resolve(F16_16, "sm_80")
    A, B, C = _tile(ins, 0x8000, 0x0000, 0x8000)
    assert (_d_codes(ins, "sm_80", A, B, C) == 0).all()
    qp = resolve("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16", "sm_80")
    A, B, C = _tile(qp, 0x8000, 0x0000, 0x8000)
    assert (_d_codes(qp, "sm_80", A, B, C) == 0x8000).all()
    assert (_d_codes(qp, "sm_70", A, B, C) == 0).all()  # native on sm_70: fused, +0


def test_steps_chain_and_an_overflowed_step_stays_inf():
    """sm_80 f16 m16n8k16 fuses 8 products per step: 8 * 65504 overflows the first step to
    +Inf (round to nearest), which the second step's -8 * 65504 cannot cancel; a -Inf in the
    second step then makes NaN.  sm_90 fuses all 16: the products cancel to C exactly."""
    text = F16_16
    A, B, C = _tile(resolve(text, "sm_80"), 0x7BFF, 0x3C00, 0x3C00)  # 65504 * 1, C = 1
    A[:, 8:] = 0xFBFF  # -65504
    assert (_d_codes(resolve(text, "sm_80"), "sm_80", A, B, C) == 0x7C00).all()
    assert (_d_codes(resolve(text, "sm_90"), "sm_90", A, B, C) == 0x3C00).all()
    A[:, 15] = 0xFC00  # -Inf in the second step
    assert (_d_codes(resolve(text, "sm_80"), "sm_80", A, B, C) == 0x7FFF).all()  # canonical NaN


@pytest.mark.parametrize("arch, want", [
    ("sm_89", (0x3F800000, 0x40000000)),  # F = 13 and 13 fraction bits kept
    ("sm_90", (0x3F800200, 0x40000204)),  # lowered: HMMA from +0, then an IEEE add of C
    ("sm_120a", (0x3F800200, 0x40000204)),  # native, F = 25
])
def test_fp8_alignment_and_fraction_width(arch, want):
    """e4m3 1 * 1 plus C: C = 2**-14 is below sm_89's 13 bits under the product's exponent
    (truncated away); C = 1 + 2**-13 + 2**-20 keeps 2**-13 there, and the f32 D 2 + 2**-13
    keeps only 13 fraction bits (2.0).  F = 25 keeps all of it."""
    ins = resolve("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", arch)
    A, B, C = _tile(ins, 0, 0, 0x38800000)  # C = 2**-14
    A[:, 0], B[0, :] = 0x38, 0x38  # 1.0 * 1.0
    assert (_d_codes(ins, arch, A, B, C) == want[0]).all()
    C[:] = 0x3F800408  # 1 + 2**-13 + 2**-20
    assert (_d_codes(ins, arch, A, B, C) == want[1]).all()


def test_block_group_terms_sit_at_their_scale_exponent():
    """mxf4, scales 1.0: a group of 16 whose products 1 - 1 cancel still counts at the scales'
    exponent 0, so C = 2**-30 + 2**-40 is truncated to a multiple of 2**(0 - block_F) = 2**-35:
    D = 2**-30.  With every product of the group zero it counts at block_e_zero: D = C."""
    ins = resolve("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X"
                  ".f32.e2m1.e2m1.f32.ue8m0", "sm_120a")
    A, B, C = _tile(ins, 0, 0, 0x30802000)  # C = 2**-30 + 2**-40
    A[:, 0], A[:, 1], B[0:2, :] = 0x2, 0xA, 0x2  # 1 * 1 + (-1) * 1
    ones = np.full((32,), 0x7F7F7F7F, np.uint32)  # ue8m0 127: 2**0 in every byte
    a, b, c = _words(ins, A, B, C)
    check(ins, "sm_120a", a, b, c, ones, ones)
    d = unpack_bits(ins, "d", mma(ins, a, b, c, arch="sm_120a", scale_a=ones, scale_b=ones))
    assert (d == 0x30800000).all()
    A[:, :2] = 0
    a, b, c = _words(ins, A, B, C)
    check(ins, "sm_120a", a, b, c, ones, ones)
    d = unpack_bits(ins, "d", mma(ins, a, b, c, arch="sm_120a", scale_a=ones, scale_b=ones))
    assert (d == 0x30802000).all()


# --------------------------------------------------------------------------------------------
# Property tests: hypothesis draws the input distribution, numpy the elements
# --------------------------------------------------------------------------------------------

HYP_CASES = [
    ("sm_70", "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f16"),
    ("sm_75", "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16"),
    ("sm_80", "mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f16"),
    ("sm_80", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("sm_89", "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32"),
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16"),
    ("sm_100a", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("sm_120a", "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32"),
    ("sm_120a", "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"
                ".f32.e2m1.e2m1.f32.ue4m3"),
]


def _mix_codes(rng, t, shape, center, spread, p_zero, p_special):
    eb, mb, bias, sp = FIELDS[t]
    top = _top_field(t)
    sign = rng.integers(0, 2, size=shape)
    field = np.clip(bias + center + rng.integers(-spread, spread, size=shape, endpoint=True), 0, top)
    code = _make(t, sign, field, rng.integers(0, 1 << 23, size=shape, dtype=np.uint64)
                 if t == "tf32" else rng.integers(0, 1 << mb, size=shape, dtype=np.uint64))
    u = rng.random(shape)
    code = np.where(u < p_zero, sign.astype(np.uint64) << (eb + mb), code)
    sp_codes = _specials(t)
    return np.where(u > 1 - p_special, sp_codes[rng.integers(0, len(sp_codes), size=shape)], code)


@settings(max_examples=12, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(HYP_CASES), seed=st.integers(0, 2**32 - 1),
       center=st.tuples(*[st.integers(-30, 30)] * 3), spread=st.tuples(*[st.integers(0, 40)] * 3),
       p_zero=st.sampled_from([0.0, 0.3, 0.9, 1.0]), p_special=st.sampled_from([0.0, 0.0, 0.02, 0.2]))
def test_hypothesis_engine_matches_model_reference(case, seed, center, spread, p_zero, p_special):
    arch, text = case
    ins = resolve(text, arch)
    rng = np.random.default_rng(seed)
    codes = [_mix_codes(rng, ins.type_of(op), (2,) + matrix_shape(ins, op), center[i], spread[i],
                        p_zero if op != "c" else p_zero / 2, p_special)
             for i, op in enumerate("abc")]
    a, b, c = (pack_bits(ins, op, x.astype(np.uint32)) for op, x in zip("abc", codes))
    if ins.block_scale:
        fams = ("normal", "overflow")
        check(ins, arch, a, b, c, scale_words(rng, ins, fams), scale_words(rng, ins, fams),
              _selectors(ins, rng))
    else:
        check(ins, arch, a, b, c)


# --------------------------------------------------------------------------------------------
# The reference's own pieces against tests/reference.py (decoding and IEEE rounding)
# --------------------------------------------------------------------------------------------


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(code=st.integers(0, 2**32 - 1), t=st.sampled_from(["f32", "tf32"]))
def test_reference_f32_decoding_matches_reference_py(code, t):
    v, w = MR.value(code, t), R.decode(code, t)
    assert v[0] == {"fin": "fin", "inf": "inf", "nan": "nan"}[w.kind]
    if v[0] == "fin":
        assert v[1] == w.sign and Fraction(v[2]) * Fraction(2) ** v[3] == w.mag
        assert v[2] == 0 or 2 ** v[4] <= w.mag < 2 ** (v[4] + 1)


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(s=st.integers(0, 1), N=st.integers(1, 2**60), q=st.integers(-220, 150),
       t=st.sampled_from(["f32", "f16"]), mode=st.sampled_from(["rn", "rz"]))
def test_reference_rounding_matches_reference_py(s, N, q, t, mode):
    """round_code agrees with tests/reference.py's IEEE rounding, except that toward zero a
    magnitude from 2**(emax+1) up is Inf (the tensor-core rule) instead of the largest finite."""
    x = Fraction(N) * Fraction(2) ** q
    emax = MR.OUT[t][2]
    got = MR.round_code(s, N, q, t, mode)
    if mode == "rz" and x >= 2 ** (emax + 1):
        assert got == MR.inf_code(s, t)
    else:
        assert got == R.encode_exact(R.Val("fin", s, x), t, mode)


def test_first_narrow_mma_in_a_process_raises_no_warning():
    import subprocess
    import sys

    code = ("import numpy as np, warpsim; z = np.zeros((32, 4), np.uint32); "
            "warpsim.mma('mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32', z, z[:, :2], z, "
            "arch='sm_90')")
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]
