"""PTX ISA versions (9.0 .. 9.5), the 4X/ue8m0 mxf4nvf4 form, new targets, operand lists as
people write them, and the regressions of issue 13 items 4, 6 (immediates) and 7."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

import warpsim
from warpsim.tools import ptxas as ptxas_mod
from warpsim.tensorcore.decode import SINK, Imm, decode, legal_archs, split_operands
from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS, LATEST_PTX, PTX_VERSIONS
from warpsim.tensorcore.numerics import model_for

NV4_UE8M0 = ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32"
             ".e2m1.e2m1.f32.ue8m0")
F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


# --------------------------------------------------------------------------------------------
# Versions and targets
# --------------------------------------------------------------------------------------------


def test_4x_ue8m0_needs_ptx_9_1():
    assert decode(NV4_UE8M0, "sm_120a").scale_vec == 4
    assert decode(NV4_UE8M0, "sm_120a", ptx_version="9.1").stype == "ue8m0"
    with pytest.raises(PtxError, match=r"needs \.version 9\.1 or later \(CUDA 13\.1\)"):
        decode(NV4_UE8M0, "sm_120a", ptx_version="9.0")
    assert legal_archs(NV4_UE8M0, "9.0") == []
    assert "sm_120a" in legal_archs(NV4_UE8M0)


def test_sm_107_targets():
    for t in ("sm_107", "sm_107a", "sm_107f"):
        assert t in ARCHS and ARCHS[t].since == (9, 4)
        assert model_for(t).name == "sm_100a" and "sm_103a" in ARCHS[t].model_source
    assert decode(F16, "sm_107a", ptx_version=(9, 4)).arch == "sm_107a"
    with pytest.raises(PtxError, match=r"target sm_107a needs \.version 9\.4 .*CUDA 13\.4"):
        decode(F16, "sm_107a", ptx_version=9.3)
    fp8 = "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32"
    assert set(legal_archs(fp8)) >= {"sm_103a", "sm_107a"}
    # ptxas 13.5 lets the tcgen05 kind .kind::ti16 through on sm_107a's fp8 forms: rejected
    with pytest.raises(PtxError, match="kind::ti16"):
        decode(fp8.replace("f8f6f4", "ti16"), "sm_107a")


def test_ptx_version_argument():
    assert LATEST_PTX == (9, 5) and PTX_VERSIONS[(9, 5)] == (13, 5)
    for v in ("9.0", 9.0, (9, 0), "9.5", None):
        decode(F16, "sm_90", ptx_version=v)
    for v in ("8.7", "9.6", "nine", (9,), (9, 1, 0)):
        with pytest.raises((PtxError, TypeError), match="version"):
            decode(F16, "sm_90", ptx_version=v)
    with pytest.raises(TypeError):
        decode(F16, "sm_90", ptx_version=True)


# --------------------------------------------------------------------------------------------
# The 4X/ue8m0 form: layouts, packing, numerics on the sm_120a model
# --------------------------------------------------------------------------------------------


def test_4x_ue8m0_scale_layouts():
    la = warpsim.layout(NV4_UE8M0, "scale_a", thread_id=1)
    lb = warpsim.layout(NV4_UE8M0, "scale_b", thread_id=3)
    assert la.shape == (16, 4, 2) and lb.shape == (4, 8, 2)
    m = np.arange(16)
    # row m of scale_A: lane 4*(m % 8) + 2*thread-id + m // 8, chunk j in byte j (byte-id 0)
    assert (la[:, :, 0] == (4 * (m % 8) + 2 + m // 8)[:, None]).all()
    assert (la[:, :, 1] == np.arange(4)[None, :]).all()
    assert (lb[:, :, 0] == (4 * np.arange(8) + 3)[None, :]).all()
    assert (lb[:, :, 1] == np.arange(4)[:, None]).all()
    with pytest.raises(PtxError, match="byte-id"):
        warpsim.layout(NV4_UE8M0, "scale_a", byte_id=2)


def _e2m1_values():
    mags = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    return np.array(mags + [-x for x in mags[1:]])


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def _round_rz_f32(v: Fraction) -> float:
    """Round toward zero to float32 (subnormals kept; overflow to the largest finite)."""
    if v == 0:
        return 0.0
    sign, a = (-1 if v < 0 else 1), abs(v)
    e = max(_floor_log2(a), -126)
    q = Fraction(2) ** (e - 23)
    m = a // q  # truncation
    r = m * q
    big = Fraction(2 - Fraction(1, 2 ** 23)) * Fraction(2) ** 127
    return sign * float(min(r, big))


def _ref_block_model(A, B, C, SA, SB, F=35, e_zero=-139):
    """The sm_120a model of mxf4/mxf4nvf4 restated from its source (MMA-Sim, RTX PRO 6000):
    exact 16-element group sums, each times its two scales; every group term is aligned at its
    scale exponent (e_sa + e_sb; e_zero when all its products are zero), C at its own exponent
    (f32 subnormals at -126; e_zero when zero); all are truncated to multiples of
    2**(E - F), E the largest exponent, added exactly and rounded toward zero to f32."""
    M, K = A.shape
    N = B.shape[1]
    G = K // 16
    D = np.zeros((M, N))
    for m in range(M):
        for n in range(N):
            terms, exps = [], []
            for g in range(G):
                ks = range(16 * g, 16 * g + 16)
                prods = [Fraction(A[m, k]) * Fraction(B[k, n]) for k in ks]
                s = Fraction(SA[m, g]) * Fraction(SB[g, n])
                terms.append(sum(prods) * s)
                all_zero = all(p == 0 for p in prods)
                exps.append(e_zero if all_zero else _floor_log2(Fraction(SA[m, g]))
                            + _floor_log2(Fraction(SB[g, n])))
            c = Fraction(float(C[m, n]))
            ec = e_zero if c == 0 else max(_floor_log2(abs(c)), -126)
            E = max(exps + [ec])
            unit = Fraction(2) ** (E - F)

            def trunc(x):
                q = abs(x) // unit
                return (q if x >= 0 else -q) * unit

            total = sum(trunc(t) for t in terms) + trunc(c)
            D[m, n] = _round_rz_f32(total) + 0.0
    return D


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_4x_ue8m0_numerics_on_sm_120a_against_block_model(seed):
    rng = np.random.default_rng(seed)
    vals = _e2m1_values()
    A = rng.choice(vals, (16, 64))
    B = rng.choice(vals, (64, 8))
    A[rng.random(A.shape) < 0.2] = 0
    B[:, 3] = 0  # whole zero groups in column 3
    # scales 2**e over a wide range: alignment truncation and RZ both matter
    SA = np.ldexp(1.0, rng.integers(-30, 31, (16, 4)))
    SB = np.ldexp(1.0, rng.integers(-30, 31, (4, 8)))
    C = (rng.standard_normal((16, 8)) * np.ldexp(1.0, rng.integers(-40, 40, (16, 8))))
    C = C.astype(np.float32).astype(np.float64)
    C[0, 0] = 0.0
    got = warpsim.matmul(NV4_UE8M0, A, B, C, arch="sm_120a", scale_A=SA, scale_B=SB)
    want = _ref_block_model(A, B, C, SA, SB)
    assert np.array_equal(got.view(np.int64), want.view(np.int64)), np.argwhere(got != want)[:5]
    # and the exact mode agrees with exact arithmetic rounded once (to nearest) where the sum
    # fits in f32
    exact = warpsim.matmul(NV4_UE8M0, A, B, C, arch="exact", scale_A=SA, scale_B=SB)
    assert np.isfinite(exact).all()


def test_4x_ue8m0_runs_in_a_warp_with_register_selectors():
    rng = np.random.default_rng(5)
    w = warpsim.Warp("sm_120a", batch=(3,))
    vals = _e2m1_values()
    A = rng.choice(vals, (3, 16, 64))
    B = rng.choice(vals, (3, 64, 8))
    C = rng.choice(vals, (3, 16, 8))
    SA = np.ldexp(1.0, rng.integers(-3, 4, (3, 16, 4)))
    SB = np.ldexp(1.0, rng.integers(-3, 4, (3, 4, 8)))
    a, b = [f"%r{i}" for i in range(4)], [f"%r{i}" for i in range(4, 6)]
    c, d = [f"%f{i}" for i in range(4)], [f"%f{i}" for i in range(10, 14)]
    w.load(NV4_UE8M0, "a", A, a)
    w.load(NV4_UE8M0, "b", B, b)
    w.load(NV4_UE8M0, "c", C, c)
    # warp 1 keeps its scale_B values where thread-id-b = 2 picks them, the others at 1
    tid_b = np.array([1, 2, 1])  # per warp: the register selector differs between warps
    w.load_scales(NV4_UE8M0, "scale_a", SA, "%r20")
    SB2 = SB * 2.0
    w.load_scales(NV4_UE8M0, "scale_b", SB, "%r21", thread_id=1)
    w.load_scales(NV4_UE8M0, "scale_b", SB2, "%r21", thread_id=2)
    w.write("%rs1", np.broadcast_to(tid_b[:, None], (3, 32)).astype(np.uint16))
    w.write("%rs0", np.zeros((3, 32), np.uint16))
    w.execute(f"{NV4_UE8M0}{{{', '.join(d[:3])}, _}},\n {{{','.join(a)}}}, {{{','.join(b)}}}, "
              f"{{{', '.join(c)}}}, {{%r20}}, {{%rs0, 0}}, %r21, {{0, %rs1}};")
    picked = np.where((tid_b == 2)[:, None, None], SB2, SB)  # warp 1 reads thread 2's bytes
    want = warpsim.matmul(NV4_UE8M0, A, B, C, arch="sm_120a", scale_A=SA, scale_B=picked)
    assert not np.array_equal(want[1], warpsim.matmul(NV4_UE8M0, A[1], B[1], C[1], arch="sm_120a",
                                                      scale_A=SA[1], scale_B=SB[1]))
    got = w.store(NV4_UE8M0, "d", d[:3] + ["%f13"]) if "%f13" in w else None
    assert got is None  # the sink wrote nothing
    w.write("%f13", np.zeros((3, 32), np.uint32))
    got = w.store(NV4_UE8M0, "d", d)
    lay = warpsim.layout(NV4_UE8M0, "d")  # (lane, register) -> (row, col); f32: one a register
    mask = np.ones((16, 8), bool)
    mask[lay[:, 3, 0], lay[:, 3, 1]] = False  # register 3 went to the sink
    assert np.array_equal(got[:, mask], want[:, mask])
    assert (got[:, ~mask] == 0).all()
    # a selector register that differs between lanes, or holds an illegal value, is refused
    w.write("%rs2", (np.arange(32) % 2).astype(np.uint16))
    with pytest.raises(PtxError, match="differs between lanes"):
        w.execute(f"{NV4_UE8M0} {{{', '.join(d)}}}, {{{','.join(a)}}}, {{{','.join(b)}}}, "
                  f"{{{', '.join(c)}}}, %r20, {{0, %rs2}}, %r21, {{0, 0}};")
    w.write("%rs3", np.full((3, 32), 2, np.uint16))
    with pytest.raises(PtxError, match="thread-id-a = 2"):
        w.execute(f"{NV4_UE8M0} {{{', '.join(d)}}}, {{{','.join(a)}}}, {{{','.join(b)}}}, "
                  f"{{{', '.join(c)}}}, %r20, {{0, %rs3}}, %r21, {{0, 0}};")


# --------------------------------------------------------------------------------------------
# Operand lists (the labelled variants are checked in test_decoder against the table)
# --------------------------------------------------------------------------------------------


def test_operand_tokens():
    op, g = split_operands(f"{F16}{{%f0,%f1}},\n\t{{ 0., 0f3F800000 , 1.5e3, -1, 0x10U, 017, "
                           "0b101, ~0, - 2 }, _, {_, %r1}")
    assert op == F16
    v = g[1]
    assert [type(x) for x in v[:3]] == [Imm, Imm, Imm]
    assert (v[0].kind, v[1].bits, v[2].value) == ("dec", 0x3F800000, 1500.0)
    assert v[3:] == [-1, 16, 15, 5, -1, -2]
    assert g[2] == SINK and g[3] == [SINK, "%r1"]
    for bad in ("{08}", "{0b2}", "{0f3F80}", "{0.0f}", "{1e}", "{0x0u}", "{-0f3F800000}",
                "{% r1}", "{%r 1}", "{1.5.2}", "{%r1} {%r2}", ",{%r1}", "{%r1},", "{{%r1}}"):
        with pytest.raises(PtxError):
            split_operands(f"{F16} {bad}")


def test_immediate_of_5000_digits_gets_warpsims_message():  # issue 13 item 6
    for lit in ("9" * 5000, "0x" + "F" * 5000, "-" + "1" * 5000):
        with pytest.raises(PtxError, match="does not fit in 64 bits|longer than"):
            split_operands(f"{F16} {{%f0}}, {{{lit}}}")
    with pytest.raises(PtxError, match="does not fit in 64 bits"):
        split_operands(f"{F16} {{%f0}}, {{0x1FFFFFFFFFFFFFFFF}}")


def test_long_operand_lists_are_refused_early_in_linear_time():  # issue 13 item 7
    for n in (65, 10_000, 40_000, 400_000):
        text = f"{F16} " + ", ".join(["%r1"] * n)
        t0 = time.perf_counter()
        with pytest.raises(PtxError, match=f"{n} entries"):
            decode(text)
        assert time.perf_counter() - t0 < 0.5
    text = f"{F16} {{" + ", ".join(["%r1"] * 60) + "}"
    with pytest.raises(PtxError, match="takes 4 operands"):
        decode(text)


@pytest.mark.parametrize("shape", ["m١٦n8k16", "m１６n8k16", "m16n８k16", "m016n8k16",
                                   "m16n08k16", "m16n8k016", "m16n8k1６"])
def test_unicode_digits_and_leading_zeros_in_shapes_are_rejected(shape):  # issue 13 item 4
    # ptxas 13.5: "Unexpected non-ASCII character" / "Unknown modifier '.m016n8k16'"
    with pytest.raises(PtxError, match="qualifier"):
        decode(f"mma.sync.aligned.{shape}.row.col.f32.f16.f16.f32")


def test_operand_lists_from_real_kernels():
    # the shapes of operand lists in widely used kernels: no space before '{', float zeros in
    # C, register selectors, braced scale data, line breaks, a sink in D
    decode(F16 + "{%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, "
           "{%f8, 0., %f9, 0f00000000};")
    decode(NV4_UE8M0 + " {%f0, %f1, %f2, %f3},\n {%r0, %r1, %r2, %r3},\n {%r4, %r5},\n"
           " {%f4, %f5, %f6, %f7}, {%r14}, {%rs0, %rs1}, {%r15}, {%rs2, %rs3};", "sm_120a")
    decode("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {_, %fd1}, {%fd2}, {%fd3}, "
           "{%fd4, 0d0000000000000000};", "sm_90")
    for bad, msg in ((F16 + " {0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f8, %f9, "
                      "%f10, %f11}", "operand D"),
                     (F16 + " {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f8, 0, "
                      "%f10, %f11}", "integer immediate"),
                     (F16 + " {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, _}, {%r4, %r5}, {%f8, %f9, "
                      "%f10, %f11}", "sink"),
                     (F16 + " {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %rd3}, {%r4, %r5}, {%f8, %f9,"
                      " %f10, %f11}", "64-bit")):
        with pytest.raises(PtxError, match=msg):
            decode(bad)


def test_warp_reads_c_immediates_and_writes_no_sink():
    rng = np.random.default_rng(3)
    w = warpsim.Warp("sm_90")
    A = rng.integers(-3, 4, (16, 16)).astype(float)
    B = rng.integers(-3, 4, (16, 8)).astype(float)
    w.load(F16, "a", A, [f"%r{i}" for i in range(4)])
    w.load(F16, "b", B, ["%r4", "%r5"])
    w.load(F16, "c", np.zeros((16, 8)), ["%f8", "%f9"] + ["%f10", "%f11"])
    w.execute(F16 + "{%f0,%f1,%f2,%f3},{%r0,%r1,%r2,%r3},{%r4,%r5},{%f8, 0., %f9, 0f00000000}")
    got = w.store(F16, "d", ["%f0", "%f1", "%f2", "%f3"])
    assert np.array_equal(got, A @ B)
    w.load(F16, "c", np.full((16, 8), 1.5), ["%f8", "%f9", "%f10", "%f11"])
    w.execute(F16 + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%f8, 0f3FC00000, 1.5, "
              "15e-1}")
    # ptxas keeps a decimal literal's binary64 bits: in a 32-bit register the low word, which
    # is 0 for 1.5 (0x3FF8000000000000), while 0f3FC00000 is 1.5 itself (H100, docs/validation.md)
    for name, word in (("%f20", 0x3FC00000), ("%f21", 0x3FC00000), ("%f22", 0), ("%f23", 0)):
        w.write(name, word)
    want_c = w.store(F16, "c", ["%f20", "%f21", "%f22", "%f23"])
    assert np.array_equal(w.store(F16, "d", ["%f0", "%f1", "%f2", "%f3"]), A @ B + want_c)
    # a decimal float in A: the low word of 0.5's double, 0, as if %r3 held zero
    w.execute(F16 + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,0.5}, {%r4,%r5}, {%f8,%f8,%f8,%f8}")
    got = w.read("%f0")
    w.write("%r9", 0)
    w.execute(F16 + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r9}, {%r4,%r5}, {%f8,%f8,%f8,%f8}")
    assert np.array_equal(got, w.read("%f0"))


# --------------------------------------------------------------------------------------------
# A live ptxas (skipped without one)
# --------------------------------------------------------------------------------------------

PTXAS = ptxas_mod.find_ptxas()
live = pytest.mark.skipif(PTXAS is None, reason="no ptxas on PATH or in the nvidia-cuda-nvcc "
                          "wheel")


@live
def test_live_ptxas_agrees_on_version_dependent_forms():
    v = PTXAS.max_ptx
    full = NV4_UE8M0 + (" {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f4, %f5, "
                        "%f6, %f7}, {%r14}, {%rs0, %rs1}, %r15, {0, 0};")
    for ver in sorted({(9, 0), v}):
        msgs = ptxas_mod.assemble(PTXAS, full, "sm_120a", ver)
        mine = "sm_120a" in legal_archs(full, ver) if ver in PTX_VERSIONS else None
        if mine is not None:
            assert (not msgs) == mine, (ver, msgs)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def test_cli_ptx_version(capsys):
    from warpsim.tools.cli import main

    assert main(["decode", NV4_UE8M0, "--arch", "sm_120a", "--ptx-version", "9.1"]) == 0
    assert "scale_vec::4X" in capsys.readouterr().out
    assert main(["decode", NV4_UE8M0, "--arch", "sm_120a", "--ptx-version", "9.0"]) == 2
    err = capsys.readouterr().err
    assert "needs .version 9.1 or later (CUDA 13.1)" in err and err.count("\n") == 1


@live
def test_cli_shows_the_live_ptxas_verdict(capsys):
    from warpsim.tools.cli import main

    assert main(["decode", NV4_UE8M0, "--arch", "sm_120a", "--ptx-version", "9.0",
                 "--ptxas"]) == 2
    out = capsys.readouterr().out
    assert "warpsim (.version 9.0, .target sm_120a): rejects" in out
    assert f"{PTXAS.name} (.version 9.0, .target sm_120a): rejects" in out and "9.1" in out
    assert main(["decode", F16 + "{%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, "
                 "{%f8, 0., %f9, 0.}", "--ptxas"]) == 0
    out = capsys.readouterr().out
    assert out.count(": accepts") == 2


# --------------------------------------------------------------------------------------------
# The truth-table format
# --------------------------------------------------------------------------------------------


def test_truth_table_round_trip(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import ptxas_truth as pt

    px = ptxas_mod.Ptxas("ptxas", (13, 5), "Build cuda_13.5")
    lab = pt.Labeller(px, (9, 1))
    t = pt.Table()
    t.add(lab, ["sm_90", "sm_120a"], {"sm_90": {"x": (False, "no"), "y": (True, "")},
                                      "sm_120a": {"x": (True, ""), "y": (False, "bad")}},
          {"x": "cat1", "y": "cat2"})
    t.add(lab, ["sm_80"], {"sm_80": {"x": (False, "old")}}, {"x": "cat1"})  # a new target
    path = tmp_path / "t.jsonl.gz"
    t.write(path)
    u = pt.Table.read(path)
    assert u.targets("13.5@9.1") == ["sm_90", "sm_120a", "sm_80"]
    x, y = u.rows["x"], u.rows["y"]
    assert u.ok(x, "13.5@9.1") == {"sm_120a"} and u.ok(y, "13.5@9.1") == {"sm_90"}
    assert u.labelled(x, "13.5@9.1") == {"sm_90", "sm_120a", "sm_80"}
    assert u.labelled(y, "13.5@9.1") == {"sm_90", "sm_120a"}  # sm_80 never labelled y
    assert u.err(x, "13.5@9.1", "sm_80") == "old" and u.err(y, "13.5@9.1", "sm_120a") == "bad"
    assert (x["cat"], u.ok(x, "13.0@9.0")) == ("cat1", None)


def test_vectors_of_immediates_only_follow_ptxas():
    s32 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%r0, %r1, %r2, %r3}, "
    a4 = "{%r4, %r5, %r6, %r7}, "
    decode(s32 + a4 + "{%r8, %r9}, {0, 0, -1, 0x10};")
    with pytest.raises(PtxError, match="only immediates"):
        decode(s32 + a4 + "{%r8, %r9}, {0., 0., 0., 0.};")
    decode(s32 + a4 + "{0f00000000, 0f3F800000}, {%r8, %r9, %r10, %r11};")  # ptxas takes 0f
    decode(F16 + " {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {0f00000000, "
           "0f00000000, 0f00000000, 0f00000000};")
    with pytest.raises(PtxError, match="only immediates"):
        decode(F16 + " {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {0, 0, 0, 0};")
    with pytest.raises(PtxError, match="only immediates"):
        decode(F16 + " {%f0, %f1, %f2, %f3}, {0f0, 0f0, 0f0, 0f0}, {%r4, %r5}, {%f8, %f9, %f10, "
               "%f11};".replace("0f0", "0f00000000"))
