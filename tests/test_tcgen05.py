"""tcgen05.mma at matrix level: descriptors, checks, matmul, integer kind."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import warpsim
from warpsim.tensorcore import tcgen05 as T
from warpsim.errors import PtxError, ShapeError
from warpsim.facts.tcgen05 import KINDS, shape_error


def _legal_forms():
    out = []
    for kind, kd in KINDS.items():
        for t in kd.types:
            for d in kd.dtypes:
                scales = kd.scales or ((None, None),)
                for block, s in scales:
                    out.append((kind, t, d, block, s))
    return out


FORMS = _legal_forms()


# --- instruction descriptor -----------------------------------------------------------------

def test_idesc_known_words():
    """Hand-assembled from the field table of CuTe's UMMA::InstrDescriptor (mma_sm100_desc.hpp):
    bf16 x bf16 -> f32, M128 N256: D code 1 at bit 4, A/B code 1 at bits 7 and 10, N>>3 = 32 at
    bit 17, M>>4 = 8 at bit 24."""
    assert T.make("f16", "m128n256", dtype="f32", atype="bf16").idesc == 0x08400490
    # e4m3 x e5m2 -> f16, M64 N8, B MN-major, negate A
    i = T.make("f8f6f4", "m64n8", dtype="f16", atype="e4m3", btype="e5m2", b_major="mn",
               negate_a=True)
    assert i.idesc == (1 << 10) | (1 << 13) | (1 << 16) | (1 << 17) | (4 << 24)
    # block-scaled: mxf4nvf4 e2m1, block16 ue4m3 (scale bit 23 = 0), M128 N128, scale ids
    b = T.make("mxf4nvf4", "m128n128", dtype="f32", atype="e2m1", stype="ue4m3", block=16,
               a_scale_id=2, b_scale_id=3)
    assert b.idesc == (3 << 4) | (1 << 7) | (1 << 10) | (16 << 17) | (8 << 24) | (2 << 29)
    assert b.scale_vec == 4 and b.k == 64


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(FORMS), st.integers(0, 1), st.sampled_from([8, 16, 64, 128, 256]),
       st.booleans(), st.booleans())
def test_idesc_round_trip(form, mi, n, neg, mn):
    kind, t, d, block, s = form
    m = (64, 128)[mi] if not KINDS[kind].block_scale else 128
    kd = KINDS[kind]
    fields = {}
    if kind != "i8":
        fields["negate_b"] = neg
    if mn and t in kd.mn_major:
        fields["a_major"] = "mn"
    ins = T.make(kind, (m, n), dtype=d, atype=t, stype=s, block=block, **fields)
    back = T.from_idesc(ins.opcode, ins.idesc)
    assert back == ins
    assert back.idesc == ins.idesc


def test_idesc_rejects():
    op = "tcgen05.mma.cta_group::1.kind::f16"
    good = T.make("f16", "m128n64", dtype="f32", atype="f16").idesc
    with pytest.raises(PtxError, match="reserved"):
        T.from_idesc(op, good | 1 << 23)
    with pytest.raises(PtxError, match="type code"):
        T.from_idesc(op, good | 5 << 7)
    with pytest.raises(PtxError, match="sparse"):
        T.from_idesc(op, good | 1 << 2)
    with pytest.raises(PtxError, match="M must be"):
        T.from_idesc(op, (good & ~(0x1F << 24)) | 16 << 24)  # M256 needs cta_group::2
    assert T.from_idesc("tcgen05.mma.cta_group::2.kind::f16", (good & ~(0x1F << 24)) | 16 << 24).m == 256


def test_shapes():
    assert shape_error("f16", 1, False, 64, 8) is None
    assert shape_error("f16", 1, False, 64, 12)
    assert shape_error("f16", 2, False, 256, 8)  # cta_group::2 steps by 16
    assert shape_error("f16", 2, False, 256, 16) is None
    assert shape_error("i8", 1, False, 128, 24) is None
    assert shape_error("i8", 1, False, 128, 40)
    assert shape_error("mxf8f6f4", 1, False, 64, 64)  # block-scaled: M128 only
    assert shape_error("f16", 1, True, 32, 64) is None  # .ws
    assert shape_error("f16", 1, True, 32, 72)
    assert shape_error("mxf4", 1, True, 128, 64)


def test_make_rejects():
    with pytest.raises(PtxError, match="K-major"):
        T.make("f8f6f4", "m64n8", dtype="f32", atype="e2m1", a_major="mn")
    with pytest.raises(PtxError, match="D of type"):
        T.make("tf32", "m64n8", dtype="f16", atype="tf32")
    with pytest.raises(PtxError, match="scales"):
        T.make("mxf4", "m128n8", dtype="f32", atype="e2m1", block=16)
    with pytest.raises(PtxError, match="K = 16"):
        T.make("f16", "m64n8k32", dtype="f32", atype="f16")
    with pytest.raises(PtxError, match="unknown"):
        T.make("f64", "m64n8", dtype="f32", atype="f16")


def test_parse_opcode():
    p = T.parse_opcode("tcgen05.mma.sp.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X")
    assert p == dict(kind="mxf4nvf4", cta_group=2, sparse=True, ws=False, block=16)
    with pytest.raises(PtxError, match="block_scale"):
        T.parse_opcode("tcgen05.mma.cta_group::1.kind::mxf4")
    with pytest.raises(PtxError, match="not legal"):
        T.parse_opcode("tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::4X")


# --- shared-memory descriptor ---------------------------------------------------------------

def test_smem_descriptor():
    d = T.SmemDescriptor(start=0x400, lbo=16, sbo=1024, layout="128B")
    w = d.encode()
    assert w == (0x40) | (1 << 16) | (64 << 32) | (1 << 46) | (2 << 61)
    assert T.decode_smem_desc(w) == d
    with pytest.raises(PtxError, match="47:46"):
        T.decode_smem_desc(w & ~(1 << 46))  # a sm_90-style descriptor
    with pytest.raises(PtxError, match="swizzle code"):
        T.decode_smem_desc(w & ~(7 << 61) | 3 << 61)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1),
       st.sampled_from(["none", "32B", "64B", "128B", "128B_base32B"]), st.integers(0, 7),
       st.integers(0, 1))
def test_smem_descriptor_round_trip(s, lbo, sbo, layout, base, mode):
    d = T.SmemDescriptor(s << 4, lbo << 4, sbo << 4, layout, base, mode)
    assert T.decode_smem_desc(d.encode()) == d


# --- matrix level ---------------------------------------------------------------------------

def test_matmul_through_warpsim_matmul():
    rng = np.random.default_rng(0)
    A, B, C = rng.standard_normal((2, 64, 16)), rng.standard_normal((16, 24)), rng.standard_normal((64, 24))
    d1 = warpsim.matmul("tcgen05.mma.cta_group::1.kind::f16", A, B, C, shape="m64n24k16",
                        dtype="f32", atype="f16")
    ins = T.make("f16", "m64n24", dtype="f32", atype="f16")
    d2 = warpsim.matmul("tcgen05.mma.cta_group::1.kind::f16", A, B, C, idesc=ins.idesc)
    d3 = T.matmul(ins, A, B, C)
    assert d1.shape == (2, 64, 24)
    assert np.array_equal(d1, d2) and np.array_equal(d1, d3)
    ref = A.astype(np.float16).astype(np.float64) @ B.astype(np.float16).astype(np.float64) + C.astype(np.float32)
    assert np.abs(d1 - ref).max() < 1e-5
    with pytest.raises(PtxError, match="instruction descriptor"):
        warpsim.matmul("tcgen05.mma.cta_group::1.kind::f16", A, B, C)
    with pytest.raises(ShapeError):
        T.matmul(ins, A[..., :8], B, C)
    with pytest.raises(PtxError, match="no model"):
        T.matmul(ins, A, B, C, arch="sm_90a")


def test_enable_input_d_negate_and_scale_input_d():
    rng = np.random.default_rng(1)
    ins = T.make("tf32", "m64n8", dtype="f32", atype="tf32")
    A, B = rng.integers(-4, 5, (64, 8)).astype(float), rng.integers(-4, 5, (8, 8)).astype(float)
    C = rng.integers(-64, 65, (64, 8)).astype(float)
    assert np.array_equal(T.matmul(ins, A, B, None), A @ B)
    assert np.array_equal(T.matmul(ins, A, B, C, enable_input_d=False), A @ B)
    assert np.array_equal(T.matmul(ins, A, B, C, scale_input_d=3), A @ B + C / 8)
    neg = T.with_fields(ins, negate_a=True)
    assert np.array_equal(T.matmul(neg, A, B, C), -(A @ B) + C)


def test_i8_kind_wraps_and_saturates():
    ins = T.make("i8", "m64n8", dtype="s32", atype="s8", btype="u8")
    A = np.full((64, 32), 127)
    B = np.full((32, 8), 255)
    C = np.full((64, 8), 2**31 - 10)
    d = T.matmul(ins, A, B, C)
    exact = 2**31 - 10 + 32 * 127 * 255
    assert (d == exact - 2**32).all()
    sat = T.with_fields(ins, saturate=True)
    assert (T.matmul(sat, A, B, C) == 2**31 - 1).all()


def test_block_scaled_matmul():
    rng = np.random.default_rng(2)
    ins = T.make("mxf4nvf4", "m128n16", dtype="f32", atype="e2m1", stype="ue8m0", block=16)
    A = rng.choice([0, 0.5, 1, 1.5, 2, 3, 4, 6, -1, -6], (128, 64))
    B = rng.choice([0, 0.5, 1, 1.5, 2, 3, 4, 6, -2], (64, 16))
    sA = 2.0 ** rng.integers(-3, 4, (128, 4))
    sB = 2.0 ** rng.integers(-3, 4, (4, 16))
    d = T.matmul(ins, A, B, np.zeros((128, 16)), scale_A=sA, scale_B=sB)
    ref = (A * np.repeat(sA, 16, 1)) @ (B * np.repeat(sB, 16, 0))
    assert np.array_equal(d, ref)  # small exact values: the model is exact here


def test_exact_arch_and_inputs_not_mutated():
    rng = np.random.default_rng(3)
    ins = T.make("f16", "m64n8", dtype="f16", atype="f16")
    A, B, C = rng.standard_normal((64, 16)), rng.standard_normal((16, 8)), rng.standard_normal((64, 8))
    keep = A.copy(), B.copy(), C.copy()
    e = T.matmul(ins, A, B, C, arch="exact")
    h = T.matmul(ins, A, B, C, arch="sm_100a")
    assert np.abs(e - h).max() <= np.abs(e).max() * 2**-9
    assert all(np.array_equal(x, y) for x, y in zip(keep, (A, B, C)))


def test_sparse_matrix_level():
    rng = np.random.default_rng(4)
    ins = T.make("f16", "m64n8", dtype="f32", atype="f16", sparse=True)
    assert ins.k == 32
    A = rng.integers(-3, 4, (64, 32)).astype(float)
    A.reshape(64, 8, 4)[..., 2:] = 0  # 2:4 structure
    B = rng.integers(-3, 4, (32, 8)).astype(float)
    assert np.array_equal(T.matmul(ins, A, B), A @ B)
    with pytest.raises(ShapeError, match="non-zero"):
        T.matmul(ins, np.ones((64, 32)), B)


def test_unknown_field_is_named():
    with pytest.raises(PtxError, match="no field 'bogus'"):
        T.make("f16", "m128n64k16", dtype="f32", atype="f16", bogus=1)
    A, B = np.zeros((128, 16), np.float32), np.zeros((16, 64), np.float32)
    with pytest.raises(PtxError, match="no field 'bogus'"):
        T.matmul("tcgen05.mma.cta_group::1.kind::f16", A, B, shape="m128n64k16", dtype="f32",
                 atype="f16", bogus=1)
