"""warpsim.tensorcore.gemm: tiling, padding and the accumulator chain, against a hand-written tile loop
(bit for bit) and, for arch='exact', against an independent exact reference (fractions)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warpsim
from warpsim.tools.cli import main
from warpsim.errors import ShapeError

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -3, -6])


def tile_loop(ins, A, B, C, arch, SA=None, SB=None):
    """The obvious per-tile loop: pad, then for every output tile chain matmul over k-tiles."""
    ins = warpsim.decode(ins, None)
    tm, tn, tk = ins.shape
    M, K = A.shape
    N = B.shape[1]
    P = lambda x, r, c, f=0.0: np.pad(x, ((0, r - x.shape[0]), (0, c - x.shape[1])), constant_values=f)  # noqa: E731
    Mp, Np, Kp = -(-M // tm) * tm, -(-N // tn) * tn, max(1, -(-K // tk)) * tk
    A, B, C = P(A, Mp, Kp), P(B, Kp, Np), P(C, Mp, Np)
    D = np.zeros((Mp, Np))
    for i in range(0, Mp, tm):
        for j in range(0, Np, tn):
            acc = C[i:i + tm, j:j + tn]
            for k in range(0, Kp, tk):
                kw = {}
                if SA is not None:
                    v = ins.scale_vec
                    b = tk // v
                    sa = P(SA, Mp, Kp // b, 1.0)
                    sb = P(SB, Kp // b, Np, 1.0)
                    kw = dict(scale_A=sa[i:i + tm, k // b:k // b + v], scale_B=sb[k // b:k // b + v, j:j + tn])
                a, bb = A[i:i + tm, k:k + tk], B[k:k + tk, j:j + tn]
                if ins.quadpair:  # one product per warp: the tile in product 0, zeros elsewhere
                    z = lambda x: np.concatenate([x[None], np.zeros((3,) + x.shape)])  # noqa: E731
                    acc = warpsim.matmul(ins, z(a), z(bb), z(acc), arch=arch)[0]
                else:
                    acc = warpsim.matmul(ins, a, bb, acc, arch=arch, **kw)
            D[i:i + tm, j:j + tn] = acc
    return D[:M, :N]


@pytest.mark.parametrize("ins,arch,mnk", [
    (F16, "sm_90", (37, 19, 45)),
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "sm_80", (16, 24, 40)),
    ("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", "sm_90", (20, 9, 17)),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_89", (16, 8, 70)),
    ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "sm_70", (17, 10, 9)),
    ("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", "sm_90", (18, 8, 20)),
])
def test_bit_identical_to_a_tile_loop(ins, arch, mnk):
    M, N, K = mnk
    rng = np.random.default_rng(M * N * K)
    A, B, C = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((M, N))
    keep = [x.copy() for x in (A, B, C)]
    D = warpsim.gemm(A, B, C, instr=ins, arch=arch)
    want = tile_loop(ins, A, B, C, arch)
    assert D.shape == (M, N)
    assert np.array_equal(D.view(np.uint64), want.view(np.uint64))
    assert all(np.array_equal(x, y) for x, y in zip((A, B, C), keep))  # inputs untouched


def test_block_scaled_matches_tile_loop_and_scales():
    ins = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
    rng = np.random.default_rng(7)
    M, N, K = 20, 11, 100  # 16-element scale blocks; K pads to 128
    A, B = rng.choice(E2M1, (M, K)), rng.choice(E2M1, (K, N))
    SA, SB = rng.choice([0.5, 1, 2, 1.5], (M, 7)), rng.choice([0.25, 1, 3], (7, N))
    C = rng.standard_normal((M, N))
    D = warpsim.gemm(A, B, C, instr=ins, scale_A=SA, scale_B=SB)  # auto: sm_120a
    assert np.array_equal(D, tile_loop(ins, A, B, C, "sm_120a", SA, SB))
    # exact: small integers times powers of two, so float64 einsum is exact here
    Dx = warpsim.gemm(A, B, 0 * C, instr=ins, arch="exact", scale_A=SA, scale_B=SB)
    ref = (A * np.repeat(SA, 16, 1)[:, :K]) @ (B * np.repeat(SB, 16, 0)[:K])
    assert np.array_equal(Dx, ref)
    with pytest.raises(ShapeError, match="20 x 7"):
        warpsim.gemm(A, B, C, instr=ins)
    with pytest.raises(ShapeError, match="scale_A must be 20 x 7"):
        warpsim.gemm(A, B, C, instr=ins, scale_A=SA[:, :6], scale_B=SB)


def _round_f32(x: Fraction) -> Fraction:
    """Round a rational to the nearest float32 (ties to even), restated from IEEE 754."""
    if x == 0:
        return x
    e = abs(x.numerator).bit_length() - abs(x.denominator).bit_length()
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    q = Fraction(2) ** max(e - 23, -149)
    return round(x / q) * q  # Fraction.__round__ rounds half to even


def test_exact_against_fractions():
    # arch='exact': each tile rounds once to f32 and feeds the next k-tile, in increasing order
    rng = np.random.default_rng(11)
    M, N, K = 18, 10, 40
    A = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-8, 9, (M, K))).astype(np.float16).astype(np.float64)
    B = rng.standard_normal((K, N)).astype(np.float16).astype(np.float64)
    C = rng.standard_normal((M, N)).astype(np.float32).astype(np.float64)
    D = warpsim.gemm(A, B, C, instr=F16, arch="exact")
    for i in range(M):
        for j in range(N):
            acc = Fraction(C[i, j])
            for k0 in range(0, K, 16):
                acc = _round_f32(acc + sum(Fraction(A[i, k]) * Fraction(B[k, j]) for k in range(k0, min(K, k0 + 16))))
            assert D[i, j] == float(acc), (i, j)


def test_integers_exact_with_wrap():
    ins = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    rng = np.random.default_rng(5)
    A, B = rng.integers(-128, 128, (33, 70)), rng.integers(-128, 128, (70, 17))
    C = rng.integers(-(2 ** 31), 2 ** 31, (33, 17))
    D = warpsim.gemm(A, B, C, instr=ins)
    want = ((A @ B + C + 2 ** 31) % 2 ** 32) - 2 ** 31
    assert D.dtype == np.int64 and np.array_equal(D, want)


def test_errors():
    A, B = np.ones((16, 16)), np.ones((16, 8))
    with pytest.raises(ShapeError, match="inner dimensions"):
        warpsim.gemm(A, np.ones((15, 8)), instr=F16)
    with pytest.raises(ShapeError, match="C must be 16 x 8"):
        warpsim.gemm(A, B, np.ones((8, 16)), instr=F16)
    with pytest.raises(ShapeError, match="same type"):
        warpsim.gemm(np.ones((8, 4)), np.ones((4, 8)), instr="mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f16")
    with pytest.raises(ShapeError, match="no .block_scale"):
        warpsim.gemm(A, B, instr=F16, scale_A=np.ones((16, 1)))
    with pytest.raises(warpsim.FormatError):
        warpsim.gemm(A * 1e6, B, instr=F16, strict=True)  # 1e6 overflows f16


def test_cli(tmp_path, capsys):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((20, 30)), rng.standard_normal((30, 12))
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    out = tmp_path / "d.npy"
    assert main(["gemm", "m16n8k16.row.col.f32.f16.f16.f32", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                 "--out", str(out)]) == 0
    assert np.array_equal(np.load(out), warpsim.gemm(A, B, instr=F16))
    msg = capsys.readouterr().out
    assert "20 x 12" in msg and "sm_90" in msg and "2 x 2 output tiles" in msg
    assert main(["gemm", "m16n8k16.row.col.f32.f16.f16.f32", str(tmp_path / "a.npy"), str(tmp_path / "a.npy"),
                 "--out", str(out)]) == 2
    assert "inner dimensions" in capsys.readouterr().err


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40), st.integers(1, 20), st.integers(1, 70), st.integers(0, 2**32 - 1))
def test_gemm_integer_shapes(M, N, K, seed):
    # any ragged shape: padding and the k-chain give the exact wrapped integer product
    rng = np.random.default_rng(seed)
    A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    C = rng.integers(-(2 ** 31), 2 ** 31, (M, N))
    D = warpsim.gemm(A, B, C, instr="mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
    assert np.array_equal(D, ((A @ B + C + 2 ** 31) % 2 ** 32) - 2 ** 31)


def test_strict_names_the_users_matrix_index_and_stats_count_conversions():
    from warpsim.errors import FormatError

    A = np.ones((20, 16))
    A[17, 3] = 1e6
    with pytest.raises(FormatError, match=r"A\[17, 3\] = 1000000.0 cannot be used as .f16") as ei:
        warpsim.gemm(A, np.ones((16, 8)), instr=F16, strict=True)
    assert ei.value.index == (17, 3) and ei.value.value == 1e6
    B = np.full((16, 8), 1 + 2.0 ** -12)  # rounds to 1 in f16
    D, stats = warpsim.gemm(A, B, instr=F16, return_stats=True)
    assert stats["A"] == {"rounded": 0, "saturated": 0, "overflowed": 1, "nan": 0}
    assert stats["B"]["rounded"] == 128 and stats["C"] == dict.fromkeys(stats["C"], 0)
    assert np.array_equal(D, warpsim.gemm(A, B, instr=F16))
    i8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    _, s8 = warpsim.gemm(np.full((16, 32), 300), np.ones((32, 8), int), instr=i8, return_stats=True)
    assert s8["A"]["saturated"] == 16 * 32
