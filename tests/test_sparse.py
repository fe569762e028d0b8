"""Sparse mma.sp / mma.sp::ordered_metadata: decoding, layouts, metadata, execution, H100 words.

The layout and metadata facts are restated here from their sources (the PTX ISA fragment
formulas, CUTLASS's SM120 sparse traits, the H100 probe) without calling the code under test.
"""

from __future__ import annotations

import gzip
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import warpsim
from warpsim.tensorcore import sparse
from warpsim.errors import PtxError, ShapeError
from warpsim.tensorcore.sparse import MetadataError

DATA = Path(__file__).parent / "data"
SM90 = list(sparse.iter_sparse_instructions("sm_90"))
ALL = list(sparse.iter_sparse_instructions())


def one(text: str, arch: str = "sm_90"):
    return warpsim.decode(text, arch)


F16K32 = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
S8K32 = "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"

# --------------------------------------------------------------------------------------------
# Forms and selectors
# --------------------------------------------------------------------------------------------


def test_sm90_has_44_forms_in_both_spellings():
    assert len(SM90) == 88
    assert {i.sparse for i in SM90} == {"sp", "sp::ordered_metadata"}
    assert len({i.text.split(".", 2)[2] for i in SM90}) == 44


def test_kind_forms_only_ordered_and_only_sm120():
    kinds = [i for i in ALL if i.kind]
    assert kinds and all(i.sparse == "sp::ordered_metadata" for i in kinds)
    assert {i.kind for i in kinds} == {"f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4"}
    with pytest.raises(PtxError, match="requires .sp::ordered_metadata"):
        one("mma.sp.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e4m3.f32", "sm_120a")
    with pytest.raises(PtxError, match="sm_120a"):
        one("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32")


#: The PTX ISA's sparsity-selector sets ("Sparse matrix storage"), restated.
def isa_selectors(ins) -> set[int]:
    t, k = ins.atype, ins.k
    if (t in ("f16", "bf16") and k == 16) or (t == "tf32" and k == 8):
        return {0, 1, 2, 3}
    if (t in ("f16", "bf16") and k == 32) or (t == "tf32" and k == 16) or \
            (t in ("s8", "u8") and k == 32) or (t in ("s4", "u4") and k == 64):
        return {0, 1}
    return {0}


@pytest.mark.parametrize("ins", ALL[::3], ids=str)
def test_selectors_follow_the_isa(ins):
    assert set(sparse.legal_selectors(ins)) == isa_selectors(ins)
    arch = next(a for a in ("sm_90", "sm_120a") if a in warpsim.legal_archs(ins))
    regs = ins.regs
    ops = ", ".join("{" + ", ".join(f"%r{10 * j + i}" for i in range(regs[o])) + "}"
                    for j, o in enumerate("dabc"))
    for f in range(4):
        text = f"{ins.text} {ops}, %r99, {f}" + (", %r98, {0, 0}, %r97, {0, 0}" if ins.block_scale else "") + ";"
        if f in isa_selectors(ins):
            assert warpsim.decode(text, arch) == warpsim.decode(ins.text, arch)
        else:
            with pytest.raises(PtxError, match=f"selector {f} is undefined"):
                warpsim.decode(text, arch)


def test_selector_that_faults_the_h100_says_so():
    with pytest.raises(PtxError, match="illegal-instruction"):
        sparse.check_selector(one("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"), 2)


def test_operand_errors():
    base = "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1}, {%r2,%r3}, {%f4,%f5,%f6,%f7}"
    with pytest.raises(PtxError, match="takes 6 operands"):
        one(base + ";")
    with pytest.raises(PtxError, match="operand e"):
        one(base + ", 5, 0;")
    with pytest.raises(PtxError, match="operand f"):
        one(base + ", %r9, %r8;")
    with pytest.raises(PtxError, match=r"unknown qualifier \.sp::foo"):
        one("mma.sp::foo.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    with pytest.raises(PtxError, match="not legal as atype of mma.sp"):
        one("mma.sp.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64")


# --------------------------------------------------------------------------------------------
# Layouts, restated from the PTX ISA "Matrix fragments for mma.sp" sections
# --------------------------------------------------------------------------------------------


def ptx_a(ins, lane: int, i: int) -> tuple[int, int]:
    """(row, logical chunk) of compressed element a_i: PTX row formula and column range."""
    g, t = lane >> 2, lane & 3
    a, k = ins.atype, ins.k
    if a in ("f16", "bf16"):
        row = g + 8 * ((i >> 1) & 1)
        return row, t + 4 * (i >> 2)  # range 4t..4t+3 (+16 for a4..a7): chunks of 4
    if a == "tf32":
        row = g + 8 * (i & 1)
        return row, t + 4 * (i >> 1)  # range 2t..2t+1 (+8 for a2, a3): chunks of 2
    if a in ("s8", "u8", "e4m3", "e5m2") or ins.kind in ("f8f6f4", "mxf8f6f4"):
        row = g + 8 * ((i >> 2) & 1)
        return row, 2 * t + ((i & 3) >> 1) + 8 * (i >> 3)  # range 8t..8t+7 (+32): two chunks
    row = g + 8 * ((i >> 3) & 1)  # 4-bit: range 16t..16t+15 (+64 from a16): two chunks of 8
    return row, 2 * t + ((i & 7) >> 2) + 8 * (i >> 4)


def ptx_b(ins, lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    bits = 8 if ins.kind in ("f8f6f4", "mxf8f6f4") else ins.storage_bits("b")
    if bits == 16:
        return 2 * t + (i & 1) + 8 * (i >> 1), g
    if bits == 32:
        return t + 4 * i, g
    if bits == 8:
        return 4 * t + (i & 3) + 16 * (i >> 2), g
    return 8 * t + (i & 7) + 32 * (i >> 3), g


KEPT = {4: 2, 2: 1, 8: 4}  # chunk size -> kept elements


@pytest.mark.parametrize("ins", [i for i in ALL if i.sparse == "sp::ordered_metadata"][::2], ids=str)
def test_a_and_b_fragments_match_the_ptx_formulas(ins):
    la, lb = warpsim.layout(ins, "a"), warpsim.layout(ins, "b")
    cs = sparse.chunk_size(ins)
    assert la.shape == (32, ins.m * ins.k // 2 // 32, 2)
    for lane in range(32):
        for i in range(la.shape[1]):
            r, c = la[lane, i]
            assert (int(r), int(c) // KEPT[cs]) == ptx_a(ins, lane, i), (lane, i)
        for i in range(lb.shape[1]):
            assert tuple(int(x) for x in lb[lane, i]) == ptx_b(ins, lane, i), (lane, i)


def test_c_d_are_the_dense_m16n8_layout():
    for ins in SM90[::5]:
        lay = warpsim.layout(ins, "d")
        for lane in range(32):
            for i in range(4):
                assert tuple(lay[lane, i]) == ((lane >> 2) + 8 * (i >> 1), 2 * (lane & 3) + (i & 1))


# Metadata maps as the H100 shows them (probe runs, docs/validation.md), restated.
def hw_map(ins, f: int) -> dict[tuple[int, int], tuple[int, int]]:
    """{(lane, nibble): (row, chunk)} for selector f."""
    a, k = ins.atype, ins.k
    out = {}
    for g in range(8):
        for j in range(8):
            if (a in ("f16", "bf16") and k == 16) or (a == "tf32" and k == 8):
                out[(4 * g + f, j)] = (g + 8 * (j // 4), j % 4)
            elif (a in ("f16", "bf16") and k == 32) or (a == "tf32" and k == 16):
                for h in range(2):
                    out[(4 * g + 2 * f + h, j)] = (g + 8 * (j // 4), j % 4 + 4 * h)
            elif (a in ("s8", "u8") and k == 32) or (a in ("s4", "u4") and k == 64):
                for h in range(2):
                    out[(4 * g + 2 * f + h, j)] = (g + 8 * h, j)
            else:
                for t in range(4):
                    out[(4 * g + t, j)] = (g + 8 * (t & 1), j + 8 * (t >> 1))
    return out


@pytest.mark.parametrize("ins", [i for i in ALL if i.sparse == "sp::ordered_metadata"][::2], ids=str)
def test_metadata_map(ins):
    for f in isa_selectors(ins):
        lay = warpsim.layout(ins, "e", selector=f)
        want = hw_map(ins, f)
        got = {(ln, j): tuple(int(x) for x in lay[ln, j]) for ln in range(32) for j in range(8)
               if lay[ln, j, 0] >= 0}
        assert got == want


def cute(shape, stride, coord):
    """Evaluate a CuTe layout (nested shape/stride) at a flat coordinate (colexicographic)."""
    def flat(x):
        return [y for z in x for y in flat(z)] if isinstance(x, tuple) else [x]
    out = 0
    for s, d in zip(flat(shape), flat(stride)):
        out += (coord % s) * d
        coord //= s
    return out


# CUTLASS include/cute/atom/mma_traits_sm120_sparse.hpp (16x8x64 and 16x8x128 atoms).
CUTE = {
    64: dict(A=(((4, 8), (8, 2, 2)), ((128, 1), (16, 8, 512))), B=(((4, 8), (4, 4)), ((32, 1), (8, 128))),
             E=(((2, 2, 8), 32), ((8, 512, 1), 16))),
    128: dict(A=(((4, 8), (16, 2, 2)), ((256, 1), (16, 8, 1024))), B=(((4, 8), (8, 4)), ((64, 1), (8, 256))),
              E=(((2, 2, 8), 64), ((8, 1024, 1), 16))),
}


@pytest.mark.parametrize("text", [
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e2m3.f32.ue8m0",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
])
def test_sm120_layouts_match_cutlass_sparse_traits(text):
    ins = one(text, "sm_120a")
    m, n, k = ins.shape
    c = CUTE[k]
    (sa, da), (sb, db), (se, de) = c["A"], c["B"], c["E"]
    nva = m * k // 32
    own = {}  # (lane, row) -> logical k the lane owns (A is M x K, index m + 16 k)
    for lane in range(32):
        for v in range(nva):
            idx = cute(sa, da, lane + 32 * v)
            own.setdefault((lane, idx % m), set()).add(idx // m)
    cs = sparse.chunk_size(ins)
    la = warpsim.layout(ins, "a")
    for lane in range(32):
        for i in range(la.shape[1]):
            r, col = (int(x) for x in la[lane, i])
            chunk = col // KEPT[cs]
            assert set(range(chunk * cs, chunk * cs + cs)) <= own[(lane, r)]
    lb = warpsim.layout(ins, "b")
    for lane in range(32):
        for v in range(lb.shape[1]):
            idx = cute(sb, db, lane + 32 * v)  # B is N x K: index n + 8 k
            assert tuple(int(x) for x in lb[lane, v]) == (idx // n, idx % n)
    le = warpsim.layout(ins, "e")
    per = k // 2 // 8 * 2 // 2  # logical k per nibble = chunk size
    for lane in range(32):
        ks = [cute(se, de, lane + 32 * v) for v in range(k // 2)]
        rows = {x % m for x in ks}
        assert len(rows) == 1
        for j in range(8):
            r, ch = (int(x) for x in le[lane, j])
            assert r in rows and set(range(ch * cs, ch * cs + cs)) <= {x // m for x in ks}
    assert per  # (keeps the arithmetic above honest about chunk sizes)


# --------------------------------------------------------------------------------------------
# Compress / expand
# --------------------------------------------------------------------------------------------


def random_sparse(ins, rng, batch=()):
    m, _, k = ins.shape
    cs = sparse.chunk_size(ins)
    unit = 2 if cs == 8 else 1
    slots = cs // unit
    keep = rng.permuted(np.tile(np.arange(slots) < slots // 2, batch + (m, k // cs, 1)), axis=-1)
    keep &= rng.random(keep.shape) < 0.9  # some chunks keep fewer
    mask = np.repeat(keep, unit, axis=-1).reshape(batch + (m, k))
    vals = rng.integers(1, 4, size=mask.shape) * rng.choice([-1, 1], size=mask.shape)
    if ins.atype in ("u8", "u4"):
        vals = np.abs(vals)
    return np.where(mask, vals, 0).astype(np.float64)


FAMILIES = [one(F16K32), one("mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"),
            one(S8K32), one("mma.sp.sync.aligned.m16n8k128.row.col.s32.s4.u4.s32"),
            one("mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16")]


@settings(max_examples=40, deadline=None)
@given(fam=st.sampled_from(range(len(FAMILIES))), seed=st.integers(0, 2**31), data=st.data())
def test_compress_expand_round_trip(fam, seed, data):
    ins = FAMILIES[fam]
    f = data.draw(st.sampled_from(sparse.legal_selectors(ins)))
    A = random_sparse(ins, np.random.default_rng(seed), (2,))
    vals, meta = sparse.compress(ins, A, selector=f)
    assert vals.shape == (2, ins.m, ins.k // 2) and meta.shape == (2, 32) and meta.dtype == np.uint32
    np.testing.assert_array_equal(sparse.expand(ins, vals, meta, selector=f), A)
    sparse.check_metadata(ins, meta, f)  # canonical (sorted) metadata is valid for both spellings
    # unselected lanes are zero and are ignored
    used = (warpsim.layout(ins, "e", selector=f)[..., 0] >= 0).any(-1)
    assert (meta[:, ~used] == 0).all()
    noisy = np.where(used, meta, np.uint32(0xFFFFFFFF))
    np.testing.assert_array_equal(sparse.expand(ins, vals, noisy, selector=f), A)


def test_compress_rejects_a_dense_chunk():
    ins = one(F16K32)
    A = np.zeros((16, 32))
    A[5, 8:11] = 1
    with pytest.raises(ShapeError, match="row 5, columns 8..11"):
        sparse.compress(ins, A)
    ins4 = FAMILIES[3]
    A = np.zeros((16, 128))
    A[2, [0, 2, 4]] = 1  # three non-zero pairs in one chunk of 8
    with pytest.raises(ShapeError, match="4:8 pairwise"):
        sparse.compress(ins4, A)


@pytest.mark.parametrize("text,bad,why", [
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 0x6, "unsorted"),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 0x5, "equal"),
    ("mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 0x8, "tf32"),
])
def test_invalid_metadata_names_lane_nibble_value(text, bad, why):
    ins = one(text)
    meta = np.full(32, 0x44444444, np.uint32)
    meta[9] = 0x44444444 & ~(0xF << 12) | (bad << 12)  # lane 9 = 4*2 + 1: selector 1 reads it
    z = np.zeros((32, ins.regs["a"]), np.uint32)
    c = np.zeros((32, ins.regs["c"]), np.uint32)
    with pytest.raises(MetadataError) as ei:
        warpsim.mma(ins, z, np.zeros((32, ins.regs["b"]), np.uint32), c, metadata=meta, selector=1)
    msg = str(ei.value)
    assert "lane 9" in msg and "nibble 3" in msg and f"0x{bad:X}" in msg
    # selector 0 does not read lane 9
    warpsim.mma(ins, z, np.zeros((32, ins.regs["b"]), np.uint32), c, metadata=meta, selector=0)


# --------------------------------------------------------------------------------------------
# Execution against independent references
# --------------------------------------------------------------------------------------------


def reference_logical_a(ins, f, vals, meta):
    """Logical A from compressed values and metadata, from the restated map and nibble rule."""
    m, _, k = ins.shape
    cs = sparse.chunk_size(ins)
    A = np.zeros(vals.shape[:-1] + (k,))
    for (lane, j), (r, ch) in hw_map(ins, f).items():
        if ch * cs >= k:
            continue
        nib = (meta[..., lane].astype(np.int64) >> (4 * j)) & 0xF
        i0, i1 = nib & 3, nib >> 2
        kept = vals[..., r, ch * KEPT[cs]:(ch + 1) * KEPT[cs]]
        for w in range(vals.shape[0]):
            if cs == 4:
                pos = [i0[w], i1[w]]
            elif cs == 2:
                pos = [i0[w] // 2]
            else:
                pos = [2 * i0[w], 2 * i0[w] + 1, 2 * i1[w], 2 * i1[w] + 1]
            for s, p in enumerate(pos):
                A[w, r, ch * cs + p] += kept[w, s]
    return A


@pytest.mark.parametrize("text", [
    "mma.sp.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32",
    "mma.sp.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.s32.u4.s4.s32",
])
def test_integer_mma_matches_reference(text):
    ins = one(text)
    rng = np.random.default_rng(7)
    for f in sparse.legal_selectors(ins):
        from warpsim.validation import sparse as vs
        from warpsim.validation.inputs import make_inputs

        x = make_inputs(ins, "uniform-bits", 3, 11)
        meta = vs.metadata_words(ins, f, "uniform-bits", 3, 11 + f)
        d = warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=meta, selector=f)
        A = reference_logical_a(ins, f, warpsim.unpack(ins, "a", x["a"]), meta)
        B, C = warpsim.unpack(ins, "b", x["b"]), warpsim.unpack(ins, "c", x["c"])
        ref = np.einsum("wmk,wkn->wmn", A.astype(np.int64), B.astype(np.int64)) + C
        ref = np.clip(ref, -2**31, 2**31 - 1) if ins.satfinite else (ref + 2**31) % 2**32 - 2**31
        np.testing.assert_array_equal(warpsim.unpack(ins, "d", d), ref)
        assert rng is not None


@pytest.mark.parametrize("text", [F16K32, "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",
                                  "mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"])
def test_exact_float_mma_matches_fraction_reference(text):
    from warpsim.validation import sparse as vs
    from warpsim.validation.inputs import make_inputs

    ins = one(text)
    x = make_inputs(ins, "normal", 1, 3)
    meta = vs.metadata_words(ins, 1, "normal", 1, 3)
    d = warpsim.unpack(ins, "d", warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=meta, selector=1,
                                             arch="exact"))
    A = reference_logical_a(ins, 1, warpsim.unpack(ins, "a", x["a"]), meta)[0]
    B, C = warpsim.unpack(ins, "b", x["b"])[0], warpsim.unpack(ins, "c", x["c"])[0]
    d = d[0]
    for r in range(16):
        for c in range(8):
            s = sum((Fraction(float(A[r, k])) * Fraction(float(B[k, c])) for k in range(ins.k)),
                    Fraction(float(C[r, c])))
            assert d[r, c] == rn32(s), (r, c)


def rn32(s: Fraction) -> float:
    """s rounded to binary32, to nearest, ties to even (from the exact rational)."""
    f = np.float32(float(s))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    best = min(cands, key=lambda x: (abs(Fraction(float(x)) - s), int(np.float32(x).view(np.uint32)) & 1))
    return float(best)


def test_matmul_logical_and_compressed_agree_and_are_exact_on_small_integers():
    ins = one(F16K32)
    rng = np.random.default_rng(3)
    A = random_sparse(ins, rng, (2,))
    B = rng.integers(-3, 4, size=(32, 8)).astype(float)
    C = rng.integers(-3, 4, size=(16, 8)).astype(float)
    np.testing.assert_array_equal(warpsim.matmul(ins, A, B, C), A @ B + C)
    vals, meta = sparse.compress(ins, A, selector=1)
    np.testing.assert_array_equal(warpsim.matmul(ins, vals, B, C, metadata=meta, selector=1), A @ B + C)
    with pytest.raises(ShapeError):
        warpsim.matmul(ins, np.ones((16, 32)), B, C)  # not 2:4 sparse


def test_dropped_positions_do_not_meet_inf_in_b():
    """The H100 multiplies only kept elements: an Inf in a B row no kept element selects does
    not turn D into NaN (a dense product with explicit zeros would: 0 * Inf)."""
    ins = one("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    A = np.zeros((16, 16))
    A[:, 0::4] = 1.0
    A[:, 1::4] = 2.0
    B = np.ones((16, 8))
    B[2, :] = np.inf  # column 2 of every chunk is dropped
    D = warpsim.matmul(ins, A, B, np.zeros((16, 8)))
    assert np.isfinite(D).all() and (D == 12).all()


def test_half_k_dense_equivalence_on_sm90_numerics():
    """Per row, the sparse result is the dense half-K instruction on the kept elements and the
    B rows they select (what the H100 showed); checked through the public dense API."""
    ins = one(F16K32)
    dense = one("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    from warpsim.validation import sparse as vs
    from warpsim.validation.inputs import make_inputs

    x = make_inputs(ins, "wide", 2, 5)
    meta = vs.metadata_words(ins, 0, "wide", 2, 5)
    d = warpsim.unpack(ins, "d", warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=meta, selector=0))
    vals = warpsim.unpack(ins, "a", x["a"])
    cols = sparse.pattern(ins, meta, 0)
    B, C = warpsim.unpack(ins, "b", x["b"]), warpsim.unpack(ins, "c", x["c"])
    for r in (0, 7, 8, 15):
        Bg = np.take_along_axis(B, cols[:, r, :, None], axis=1)  # (w, 16, 8)
        Ar = np.broadcast_to(vals[:, r:r + 1, :], (2, 16, 16))
        Cr = np.broadcast_to(C[:, r:r + 1, :], (2, 16, 8))
        dd = warpsim.matmul(dense, Ar, Bg, Cr)
        np.testing.assert_array_equal(dd[:, 0], d[:, r])


def test_sm120_kind_forms_equal_dense_half_k_on_gathered_rows():
    ins = one("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32", "sm_120a")
    dense = one("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32", "sm_120a")
    rng = np.random.default_rng(2)
    vals = rng.choice([0.5, 1, 1.5, 2, 3, -4, 6], size=(16, 32))
    A = sparse.expand(ins, vals, sparse.compress(ins, np.where(np.arange(64) % 4 < 2, 1.0, 0.0)[None, :]
                                                 .repeat(16, 0))[1])
    B = rng.choice([0.25, -0.5, 1, 2, 3.5, 7, -28], size=(64, 8))
    C = rng.normal(size=(16, 8)) * 2**20
    D = warpsim.matmul(ins, A, B, C, arch="sm_120a")
    cols = np.where(np.arange(64) % 4 < 2)[0]
    np.testing.assert_array_equal(D, warpsim.matmul(dense, vals, B[cols], C, arch="sm_120a"))


# --------------------------------------------------------------------------------------------
# Warp, doctor, render, CLI
# --------------------------------------------------------------------------------------------


def test_warp_executes_sparse_ptx():
    ins = one(F16K32)
    rng = np.random.default_rng(5)
    A = random_sparse(ins, rng)
    B = rng.integers(-3, 4, size=(32, 8)).astype(float)
    C = rng.integers(-3, 4, size=(16, 8)).astype(float)
    w = warpsim.Warp("sm_90")
    w.load_sparse(ins, A, ["%r0", "%r1", "%r2", "%r3"], "%r9", selector=1)
    w.load(ins, "b", B, ["%r4", "%r5", "%r6", "%r7"])
    w.load(ins, "c", C, ["%f4", "%f5", "%f6", "%f7"])
    w.execute(f"{F16K32} {{%f0,%f1,%f2,%f3}}, {{%r0,%r1,%r2,%r3}}, {{%r4,%r5,%r6,%r7}}, "
              "{%f4,%f5,%f6,%f7}, %r9, 1;")
    np.testing.assert_array_equal(w.store(ins, "d", ["%f0", "%f1", "%f2", "%f3"]), A @ B + C)
    with pytest.raises(MetadataError, match="lane 0"):  # selector 0 reads lanes 0, 1: zeros
        w.execute(f"{F16K32} {{%f0,%f1,%f2,%f3}}, {{%r0,%r1,%r2,%r3}}, {{%r4,%r5,%r6,%r7}}, "
                  "{%f4,%f5,%f6,%f7}, %r9, 0;")
    with pytest.raises(PtxError, match="operand e"):
        w.execute(f"{F16K32} {{%f0,%f1,%f2,%f3}}, {{%r0,%r1,%r2,%r3}}, {{%r4,%r5,%r6,%r7}}, "
                  "{%f4,%f5,%f6,%f7}, 7, 0;")


def test_doctor_names_wrong_selector_and_swapped_pair():
    ins = one(S8K32)
    A = random_sparse(ins, np.random.default_rng(9))
    _, meta = sparse.compress(ins, A, selector=1)
    assert sparse.explain_metadata(ins, meta, A, selector=1).ok
    rep = sparse.explain_metadata(ins, meta, A, selector=0)
    assert not rep.ok and "selector 1" in rep.cause and "lane" in str(rep)
    m = meta.astype(np.int64)
    swapped = ((m & 0x33333333) << 2) | ((m >> 2) & 0x33333333)
    rep = sparse.explain_metadata(ins, swapped, A, selector=1)
    assert "wrong order" in rep.cause


def test_render_and_cli_for_metadata(tmp_path):
    import subprocess
    import sys

    text = warpsim.render_layout(F16K32, "e", selector=1)
    assert "T2:nib0" in text and "T3:nib4" in text and "T0:" not in text
    out = subprocess.run([sys.executable, "-m", "warpsim", "layout", F16K32, "--operand", "e",
                          "--selector", "1", "--lane", "3"], capture_output=True, text=True)
    assert out.returncode == 0 and "E[0][4] is nib0 of lane 3" in out.stdout
    svg = tmp_path / "e.svg"
    out = subprocess.run([sys.executable, "-m", "warpsim", "layout", F16K32, "--operand", "e",
                          "--out", str(svg)], capture_output=True, text=True)
    assert out.returncode == 0 and "<svg" in svg.read_text() and ">nib7<" in svg.read_text()


# --------------------------------------------------------------------------------------------
# Hardware words and ptxas
# --------------------------------------------------------------------------------------------


def test_h100_sparse_fixture_is_bit_exact():
    from warpsim.validation import sparse as vs

    rep = vs.check(DATA / "h100_sparse", None, log=lambda *a: None)
    s = rep["summary"]
    assert s["runs"] == 832 and s["words"] > 150_000
    assert s["mismatches"] == 0, [r for r in rep["rows"] if r["mismatches"]][:3]
    dists = {r["dist"] for r in rep["rows"]}
    assert {"probe", "garbage", "special", "uniform-bits"} <= dists


TRUTH = DATA / "ptxas_truth_sparse.jsonl.gz"


@pytest.mark.skipif(not TRUTH.exists(), reason="sparse ptxas table not generated")
def test_decoder_agrees_with_ptxas_on_sparse_table():
    with gzip.open(TRUTH, "rt") as fh:
        meta = json.loads(fh.readline())["meta"]
        rows = [json.loads(ln) for ln in fh]
    assert len(rows) > 2000
    bad = []
    for r in rows:
        legal = set(warpsim.legal_archs(r["s"]))
        for t in meta["targets"]:
            if (t in r["ok"]) != (t in legal):
                bad.append((r["s"], t, r["err"].get(t)))
        for t, sels in r.get("sel", {}).items():
            ins = warpsim.decode(r["s"], t)
            ptxas_only = set(sels) - set(sparse.legal_selectors(ins))
            # ptxas 13.0 accepts selectors 2, 3 for m16n8k32 .f16 (the H100 faults on them)
            if ptxas_only and not (ins.k == 32 and ins.atype == "f16" and ptxas_only <= {2, 3}):
                bad.append((r["s"], t, f"selectors {sorted(ptxas_only)}"))
            assert set(sparse.legal_selectors(ins)) <= set(sels)
    assert not bad, f"{len(bad)} disagreements, first: {bad[:5]}"


# --------------------------------------------------------------------------------------------
# The validation harness (no GPU)
# --------------------------------------------------------------------------------------------


def test_sparse_kernel_source_passes_metadata_and_selector():
    from warpsim.validation import sparse as vs

    ins = one(F16K32)
    src = vs.sparse_kernel_source(ins, 1)
    n = sum(ins.regs[o] for o in "dabc")
    assert f", %{n}, 1;" in src and "E[gid]" in src and vs.sparse_kernel_name(ins, 1) in src
    assert len(vs.runs("sm_90")) == 152


def test_harness_round_trip_with_a_simulated_gpu(tmp_path):
    from warpsim.validation import sparse as vs

    def gpu(ins, f, x):
        return warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=x["e"], selector=f)

    def wrong_lanes(ins, f, x):  # a GPU that reads the other selector's lanes
        g = (f + 1) % len(sparse.legal_selectors(ins))
        lay = warpsim.layout(ins, "e", selector=f)
        e = np.where((lay[..., 0] >= 0).any(-1), x["e"], 0x44444444).astype(np.uint32)
        return warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=e, selector=g)

    only = ["mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32"]
    vs.collect("sm_90", tmp_path / "ok", only=only, warps=2, runner=gpu, log=lambda *a: None)
    rep = vs.check(tmp_path / "ok", tmp_path / "ok", log=lambda *a: None)
    assert rep["summary"]["runs"] == 8 and rep["summary"]["mismatches"] == 0
    assert (tmp_path / "ok" / "report_sparse.md").exists()
    vs.collect("sm_90", tmp_path / "bad", only=only, warps=2, runner=wrong_lanes, log=lambda *a: None)
    rep = vs.check(tmp_path / "bad", None, log=lambda *a: None)
    assert rep["summary"]["mismatches"] > 0


def test_probe_analysis_recovers_the_map():
    from warpsim.validation import sparse as vs

    ins = one("mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32")
    x = vs.make_inputs(ins, 1, "probe", vs.warps_for(ins, "probe", None), 1)
    d = warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=x["e"], selector=1)
    r = vs.analyse_probe(ins, 1, d, x["e"])
    assert r["hits_ok"] and r["model_agrees"]
    want = hw_map(ins, 1)
    for (row, c), (lane, j) in r["map"].items():
        assert want[(lane, j)] == (row, c)  # tf32: one kept element per chunk
    assert len(r["map"]) >= 120


@pytest.mark.parametrize("text,dense_text,v", [
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
     "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", 2),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e2m1.f32.ue8m0",
     "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e2m1.f32.ue8m0", 1),
])
def test_sm120_block_scaled_sparse_equals_dense_half_k(text, dense_text, v):
    """Scale chunks of the logical K are whole chunks of the compressed K: with the same scale
    values, the sparse result is the dense half-K result on the kept columns."""
    ins, dense = one(text, "sm_120a"), one(dense_text, "sm_120a")
    rng = np.random.default_rng(4)
    m, n, k = ins.shape
    cs = sparse.chunk_size(ins)
    keep = np.zeros(k, bool)
    for c in range(k // cs):  # keep the 2nd and 4th pair / element of every chunk
        sub = [1, 3] if cs == 4 else [2, 3, 6, 7]
        keep[c * cs + np.array(sub)] = True
    vals = rng.choice([0.5, 1, 1.5, 2, 3, -4, 6, -0.5], size=(m, k // 2))
    A = np.zeros((m, k))
    A[:, keep] = vals
    B = rng.choice([0.5, -1, 2, 3, -6, 1.5], size=(k, n))
    C = rng.normal(size=(m, n))
    SA = 2.0 ** rng.integers(-3, 4, size=(m, v))
    SB = 2.0 ** rng.integers(-3, 4, size=(v, n))
    D = warpsim.matmul(ins, A, B, C, arch="sm_120a", scale_A=SA, scale_B=SB)
    Dd = warpsim.matmul(dense, vals, B[keep], C, arch="sm_120a", scale_A=SA, scale_B=SB)
    np.testing.assert_array_equal(D, Dd)


def test_every_sparse_instruction_runs_on_every_model():
    from warpsim.validation import sparse as vs
    from warpsim.validation.inputs import make_inputs

    for ins in ALL[::2]:
        legal = warpsim.legal_archs(ins)
        x = make_inputs(ins, "normal" if ins.atype[0] in "fbte" else "uniform-bits", 1, 1)
        e = vs.metadata_words(ins, 0, "normal", 1, 1)
        kw = {}
        if ins.block_scale:
            kw = dict(scale_a=np.full((1, 32), 0x3F3F3F3F if ins.stype == "ue4m3" else 0x7F7F7F7F, np.uint32))
            kw["scale_b"] = kw["scale_a"]
        for arch in ("exact", "sm_80", "sm_89", "sm_90", "sm_100a", "sm_120a"):
            if arch != "exact" and arch not in legal:
                continue
            d = warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=e, selector=0, arch=arch, **kw)
            assert d.shape == (1, 32, ins.regs["d"])


@pytest.mark.skipif(not TRUTH.exists() or __import__("shutil").which("ptxas") is None,
                    reason="ptxas not on PATH")
def test_live_ptxas_recheck_of_a_sparse_sample():
    import random
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import ptxas_truth

    with gzip.open(TRUTH, "rt") as fh:
        meta = json.loads(fh.readline())["meta"]
        rows = [json.loads(ln) for ln in fh]
    from warpsim.tools.ptxas import find_ptxas

    px = find_ptxas(__import__("shutil").which("ptxas"))
    if px is None or px.cuda != (13, 0):
        pytest.skip("the sparse table was labelled by ptxas 13.0 at .version 9.0")
    lab = ptxas_truth.Labeller(px, (9, 0))
    # a fixed sample: an unseeded one failed once in ~20 runs under load although the whole
    # table agrees with ptxas 13.0 on all 14 targets (rechecked 2026-11-23)
    rng = random.Random(20261123)
    sample = rng.sample(rows, 60)
    for t in rng.sample(meta["targets"], 2):
        got = ptxas_truth.label_target(lab, t, [r["s"] for r in sample])
        for r in sample:
            assert got[r["s"]][0] == (t in r["ok"]), (r["s"], t, got[r["s"]])
