"""wgmma decode: legality against ptxas verdicts, registers, layouts, matrix level."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.errors import PtxError, ShapeError
from warpsim.facts.wgmma import FORMS, N_FLOAT, N_INT
from warpsim.tensorcore import wgmma as W

TRUTH = Path(__file__).parent / "data" / "ptxas_truth_wgmma.jsonl.gz"


def _rows():
    with gzip.open(TRUTH, "rt") as fh:
        return [json.loads(line) for line in fh]


def test_decode_agrees_with_ptxas_on_every_label():
    rows = _rows()
    n = 0
    for r in rows:
        for key, (ok, msg) in r["labels"].items():
            target = key.split("/")[1]
            try:
                W.decode_wgmma(r["text"], target)
                mine = True
            except PtxError:
                mine = False
            assert mine == ok, (key, r["text"][:120], msg)
            n += 1
    assert n > 35000 and sum(r["labels"]["13.5@9.5/sm_90a"][0] for r in rows) > 2000


def test_shapes_and_registers():
    assert N_FLOAT == tuple(range(8, 257, 8)) and 40 not in N_INT and 48 in N_INT
    i = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16")
    assert i.regs == {"a": 4, "d": 64} and i.k == 16
    i = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n24k32.satfinite.s32.u8.s8")
    assert i.satfinite and i.regs["d"] == 12
    assert W.decode_wgmma("wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e5m2").sparse


@pytest.mark.parametrize("text, words", [
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "sm_90a"),
    ("wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", "N = 40"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f16.bf16.bf16", "no wgmma form"),
    ("wgmma.mma_async.sync.aligned.m64n8k32.f32.f16.f16", "K must be 16"),
    ("wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc", "and.popc"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.satfinite.f32.f16.f16", "satfinite"),
])
def test_rejections_name_the_problem(text, words):
    arch = "sm_90" if words == "sm_90a" else "sm_90a"
    with pytest.raises(PtxError, match=words):
        W.decode_wgmma(text, arch)


def test_operand_checks():
    d = "{" + ", ".join(f"%f{i}" for i in range(4)) + "}"
    base = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d
    assert W.decode_wgmma(base + ", %rd1, %rd2, p, 1, -1, 1, 0;").a_desc is True
    assert W.decode_wgmma(base + ", {%r1, %r2, %r3, %r4}, %rd2, p, 1, 1, 1;").a_desc is False
    with pytest.raises(PtxError, match="imm-scale-a"):
        W.decode_wgmma(base + ", %rd1, %rd2, p, 2, 1, 0, 0;")
    with pytest.raises(PtxError, match="imm-trans-b"):
        W.decode_wgmma(base + ", %rd1, %rd2, p, 1, 1, 0, 3;")
    with pytest.raises(PtxError, match="takes 7 operands"):
        W.decode_wgmma(base + ", {%r1, %r2, %r3, %r4}, %rd2, p, 1, 1, 0, 0;")
    with pytest.raises(PtxError, match="scale-d"):
        W.decode_wgmma(base + ", %rd1, %rd2, %r5, 1, 1, 0, 0;")


@pytest.mark.parametrize("atype,k", [("f16", 16), ("tf32", 8), ("e4m3", 32), ("s8", 32), ("b1", 256)])
def test_a_layout_is_a_bijection_per_warp(atype, k):
    dt = {"f16": "f32", "tf32": "f32", "e4m3": "f32", "s8": "s32", "b1": "s32"}[atype]
    tail = ".and.popc" if atype == "b1" else ""
    i = W.decode_wgmma(f"wgmma.mma_async.sync.aligned.m64n8k{k}.{dt}.{atype}.{atype}{tail}")
    pos = W.layout(i, "a").reshape(-1, 2)
    assert len({tuple(p) for p in pos}) == 64 * k
    assert pos[:, 1].max() == k - 1
    # warp w holds rows 16w..16w+15 only
    rows = W.layout(i, "a")[..., 0]
    assert all(set(np.unique(rows[32 * w:32 * w + 32])) == set(range(16 * w, 16 * w + 16)) for w in range(4))


def test_d_layout_restated():
    i = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n24k16.f32.f16.f16")
    L = W.layout(i, "d")
    for thread in (0, 5, 37, 127):
        w, g, t = thread // 32, (thread % 32) // 4, thread % 4
        for e in range(12):
            assert tuple(L[thread, e]) == (16 * w + g + 8 * ((e >> 1) & 1), 8 * (e >> 2) + 2 * t + (e & 1))


@pytest.mark.parametrize("text", [
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
    "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16",
    "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32",
])
def test_equals_chain_of_mma_sync_tiles(text):
    """f16/bf16/tf32: one wgmma = its m16n8 mma.sync tiles (sm_90 model) bit for bit."""
    i = W.decode_wgmma(text)
    rng = np.random.default_rng(1)
    A = rng.standard_normal((64, i.k)) * 2.0 ** rng.integers(-8, 8, (64, i.k))
    B = rng.standard_normal((i.k, i.n))
    C = rng.standard_normal((64, i.n)) * 100
    D = W.matmul(i, A, B, C)
    lay = "row.col"
    mi = warpsim.decode(f"mma.sync.aligned.m16n8k{i.k}.{lay}.{i.dtype}.{i.atype}.{i.btype}.{i.dtype}", arch="sm_90")
    At = A.reshape(4, 16, i.k)[:, None]
    Bt = B.reshape(i.k, i.n // 8, 8).transpose(1, 0, 2)[None]
    Ct = C.reshape(4, 16, i.n // 8, 8).transpose(0, 2, 1, 3)
    D2 = warpsim.matmul(mi, np.broadcast_to(At, (4, i.n // 8, 16, i.k)),
                        np.broadcast_to(Bt, (4, i.n // 8, i.k, 8)), Ct, arch="sm_90")
    assert np.array_equal(D, D2.transpose(0, 2, 1, 3).reshape(64, i.n))


def test_pack_unpack_round_trip_and_bad_shapes():
    i = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.u8")
    rng = np.random.default_rng(2)
    A = rng.integers(-128, 128, (64, 32))
    assert np.array_equal(W.unpack(i, "a", W.pack(i, "a", A)), A)
    C = rng.integers(-2**31, 2**31, (64, 16))
    assert np.array_equal(W.unpack(i, "d", W.pack(i, "c", C)), C)
    with pytest.raises(ShapeError):
        W.matmul(i, A[:32], rng.integers(0, 255, (32, 16)))


def test_integer_satfinite_and_fp8_bottleneck():
    i = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.s8")
    A = np.full((64, 32), 127)
    B = np.full((32, 8), 127)
    C = np.full((64, 8), 2**31 - 10)
    assert (W.matmul(i, A, B, C) == 2**31 - 1).all()
    j = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8")
    assert (W.matmul(j, A, B, C) < 0).all()  # wraps
    f = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3")
    A = np.zeros((64, 32))
    A[:, 0] = 1.0
    B = np.zeros((32, 8))
    B[0] = 1.0
    C = np.full((64, 8), 2.0 ** -14)  # below 13 fraction bits of 1.0: truncated away
    assert (W.matmul(f, A, B, C) == 1.0).all()
    assert (W.matmul(f, A, B, C, arch="exact") == 1.0 + 2.0 ** -14).all()


def test_top_level_matmul_and_layout_take_wgmma_text():
    t = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
    rng = np.random.default_rng(3)
    A, B, C = rng.standard_normal((64, 16)), rng.standard_normal((16, 128)), rng.standard_normal((64, 128))
    assert np.array_equal(warpsim.matmul(t, A, B, C), W.matmul(t, A, B, C))
    assert warpsim.layout(t, "d").shape == (128, 64, 2)


def test_renderings():
    from warpsim.tools.render_wgmma import render_swizzle, render_wgmma
    s = render_swizzle("128B").splitlines()
    assert s[2].split()[2:] == ["9", "8", "11", "10", "13", "12", "15", "14"]
    t = render_wgmma("wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16", "d").splitlines()
    assert t[2].split()[1:3] == ["T0:0.0", "T0:0.1"] and "T127" in t[-1]


@pytest.mark.parametrize("text", [
    "wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.f16.f16",
    "wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32",
    "wgmma.mma_async.sp.sync.aligned.m64n16k64.s32.s8.u8",
    "wgmma.mma_async.sp.sync.aligned.m64n16k64.f16.e4m3.e5m2",
])
def test_sparse_matmul_on_exact_inputs(text):
    i = W.decode_wgmma(text)
    rng = np.random.default_rng(5)
    cs = 2 if i.atype == "tf32" else 4
    A = rng.integers(1, 4, (64, i.k)).astype(float)
    keep = np.argsort(rng.random((64, i.k // cs, cs)), -1)[..., :cs // 2]
    mask = np.zeros((64, i.k // cs, cs), bool)
    np.put_along_axis(mask, keep, True, -1)
    A = A * mask.reshape(64, i.k)
    B = rng.integers(0, 4, (i.k, 16)).astype(float)
    C = rng.integers(-5, 5, (64, 16)).astype(float)
    assert np.array_equal(W.matmul(i, A, B, C), A @ B + C)
    v, words = W.compress(i, A)
    cols = W.sparse_columns(i, words, 0)
    assert v.shape == (64, i.k // 2) and np.array_equal(np.take_along_axis(A, cols, -1), v)


def test_sparse_selector_legality():
    d = "{" + ", ".join(f"%f{j}" for j in range(4)) + "}"
    t = "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 " + d + ", %rd1, %rd2, %r20, SEL, p, 1, 1, 0, 0;"
    W.decode_wgmma(t.replace("SEL", "1"))
    with pytest.raises(PtxError, match="sp-sel"):
        W.decode_wgmma(t.replace("SEL", "2"))
    t = "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.s8 {%r1, %r2, %r3, %r4}, %rd1, %rd2, %r20, 1, p;"
    with pytest.raises(PtxError, match="sp-sel"):
        W.decode_wgmma(t)
