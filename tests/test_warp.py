"""warpsim.kernel.warp.Warp: register file, load/store, and mma.sync text execution."""

from __future__ import annotations

import numpy as np
import pytest

import warpsim
from warpsim.errors import PtxError, ShapeError, WarpsimError
from warpsim.tensorcore.execute import matmul, mma
from warpsim.kernel.warp import RegisterError, Warp

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F16H = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
F64 = "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64"
S8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
QP = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
MX = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0"
NV4 = ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"
       ".f32.e2m1.e2m1.f32.ue4m3")


def names(prefix, start, count):
    return [f"%{prefix}{i}" for i in range(start, start + count)]


def braces(regs):
    return "{" + ", ".join(regs) + "}"


def operand_names(ins, op, start=0):
    """Conventional register names for operand op: %fd for f64, %f for f32 C/D, %r otherwise."""
    n = ins.regs[op]
    if ins.type_of(op) == "f64":
        return names("fd", start, n)
    if op in "cd" and ins.type_of(op) == "f32":
        return names("f", start, n)
    return names("r", start, n)


def values(ins, op, rng, batch=()):
    """Random values exactly representable in the operand's type."""
    shape = batch + warpsim.tensorcore.packing.matrix_shape(ins, op)
    t = ins.type_of(op)
    if t in ("s8", "s32"):
        return rng.integers(-100, 100, shape).astype(np.int64)
    if t in ("e2m1",):
        return rng.choice([-3.0, -1.5, -0.5, 0.0, 0.5, 1.0, 2.0, 6.0], shape)
    return rng.integers(-8, 9, shape) * 0.25


def setup(w, ins, rng, batch=()):
    """Load random A, B, C; return (A, B, C, regs by operand)."""
    regs = {"a": operand_names(ins, "a", 0), "b": operand_names(ins, "b", 20),
            "c": operand_names(ins, "c", 40)}
    mats = {op: values(ins, op, rng, batch) for op in "abc"}
    for op in "abc":
        w.load(ins, op, mats[op], regs[op])
    return mats["a"], mats["b"], mats["c"], regs


def text(ins_text, d, a, b, c, *extra):
    ops = [braces(d), braces(a), braces(b), braces(c), *extra]
    return f"{ins_text} {', '.join(ops)};"


# --------------------------------------------------------------------------------------------
# Registers
# --------------------------------------------------------------------------------------------


def test_widths_from_names_and_declare():
    w = Warp()
    w["%r0"] = 1
    w["%f1"] = 2
    w["%rd2"] = 3
    w["%fd3"] = 4
    w["%h4"] = 5
    w["%rs5"] = 6
    w["%p6"] = True
    assert w.registers == {"%r0": 32, "%f1": 32, "%rd2": 64, "%fd3": 64, "%h4": 16, "%rs5": 16,
                           "%p6": 1}
    assert [w[n].dtype for n in ("%r0", "%rd2", "%h4", "%p6")] == \
        [np.uint32, np.uint64, np.uint16, np.bool_]
    assert w["%r0"].shape == (32,)
    with pytest.raises(RegisterError, match="no known width"):
        w["%acc0"] = 1
    w.declare("%acc0", 32)
    w["%acc0"] = 7
    w.write("scale", 3, bits=16)
    assert w.registers["%acc0"] == 32 and w["scale"].dtype == np.uint16
    w.declare("%acc0", 32)  # same width again: fine
    with pytest.raises(RegisterError, match="32-bit"):
        w.declare("%acc0", 64)
    with pytest.raises(RegisterError, match="32-bit"):
        w.declare("%r9", 64)  # prefix fixes the width
    with pytest.raises(RegisterError):
        w.write("%rd1", 0, bits=32)
    with pytest.raises(ValueError, match="one of"):
        w.declare("x", 12)
    with pytest.raises(RegisterError, match="bad register name"):
        w["1abc"] = 0
    assert "%r0" in w and "%r1" not in w and len(w) == 9
    r = repr(w)
    assert "auto" in r and "batch=()" in r and "%rd2: b64" in r and "%p6: pred" in r


def test_unknown_register_lists_similar_names():
    w = Warp()
    with pytest.raises(RegisterError, match="no registers"):
        w["%r0"]
    for i in range(4):
        w[f"%f{i}"] = 0
    with pytest.raises(KeyError) as e:
        w["%f7"]
    assert isinstance(e.value, ValueError) and isinstance(e.value, WarpsimError)
    assert "%f7" in str(e.value) and "%f0" in str(e.value)
    assert not str(e.value).startswith("'")  # not KeyError's quoted repr


def test_write_read_broadcast_and_range():
    w = Warp(batch=(2, 3))
    assert w.batch == (2, 3) and w.shape == (2, 3, 32)
    w["%r0"] = 5
    assert w["%r0"].shape == (2, 3, 32) and (w["%r0"] == 5).all()
    lanes = np.arange(32)
    w["%r1"] = lanes
    assert (w["%r1"] == lanes).all()
    full = np.arange(2 * 3 * 32).reshape(2, 3, 32)
    w.write("%rd0", full)
    assert np.array_equal(w.read("%rd0"), full) and w["%rd0"].dtype == np.uint64
    w["%r2"] = -1  # two's complement
    assert (w["%r2"] == 0xFFFFFFFF).all()
    w["%rd1"] = 2**64 - 1
    w["%rd2"] = [2**64 - 1] * 16 + [-1] * 16  # object array of big ints
    assert (w["%rd2"] == np.uint64(2**64 - 1)).all()
    w["%h0"] = 0xFFFF
    with pytest.raises(ShapeError, match="16-bit"):
        w["%h0"] = 0x10000
    with pytest.raises(ShapeError):
        w["%r3"] = 2**32
    with pytest.raises(ShapeError):
        w["%r3"] = -(2**31) - 1
    with pytest.raises(ShapeError, match="0 or 1"):
        w["%p0"] = 2
    with pytest.raises(ShapeError, match="broadcast"):
        w["%r3"] = np.zeros(31, np.uint32)
    with pytest.raises(ShapeError, match="broadcast"):
        w["%r3"] = np.zeros((4, 2, 3, 32), np.uint32)
    with pytest.raises(TypeError, match="write_float"):
        w["%f0"] = 1.5
    with pytest.raises(TypeError):
        w["%r3"] = True
    assert "%r3" not in w  # failed writes create nothing


def test_no_aliasing():
    w = Warp(batch=2)
    src = np.arange(64, dtype=np.uint32).reshape(2, 32)
    keep = src.copy()
    w["%r0"] = src
    src[:] = 99
    assert np.array_equal(w["%r0"], keep)
    out = w["%r0"]
    out[:] = 7
    assert np.array_equal(w["%r0"], keep)
    f = np.linspace(0, 1, 32, dtype=np.float32)
    w.write_float("%f0", f)
    f[:] = 5
    assert w.read_float("%f0")[0, 1] != 5
    A = np.ones((16, 16))
    w.load(F16, "a", A, names("r", 10, 4))
    A[:] = 3
    assert (w.store(F16, "a", names("r", 10, 4)) == 1).all()


def test_float_views_bit_exact():
    w = Warp()
    bits = np.arange(32, dtype=np.uint32) | np.uint32(0x7F800001)  # signalling NaNs with payloads
    w["%f0"] = bits
    assert np.array_equal(w.read_float("%f0").view(np.uint32), bits)
    w.write_float("%f1", w.read_float("%f0"))
    assert np.array_equal(w["%f1"], bits)
    d = np.array([np.float64(-0.0), np.inf, 1e-310] * 10 + [1.0, 2.0])
    w.write_float("%fd0", d)
    assert np.array_equal(w["%fd0"], d.view(np.uint64))
    w.write_float("%f2", 1 / 3)  # rounded to float32
    assert (w.read_float("%f2") == np.float32(1 / 3)).all()
    w.write_float("%h0", 0.5)
    assert (w["%h0"] == 0x3800).all()
    w["%p0"] = 1
    with pytest.raises(RegisterError, match="float"):
        w.read_float("%p0")


# --------------------------------------------------------------------------------------------
# load / store
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("instr", [F16, F16H, BF16, F64, S8, QP])
@pytest.mark.parametrize("op", "abcd")
def test_load_store_round_trip(instr, op):
    rng = np.random.default_rng(1)
    w = Warp(batch=(3,))
    ins = warpsim.decode(instr, "sm_90")
    regs = operand_names(ins, op)
    M = values(ins, op, rng, (3,))
    w.load(instr, op, M, regs)
    words = warpsim.pack(ins, op, M)
    assert np.array_equal(np.stack([w[n] for n in regs], -1), words)
    assert np.array_equal(w.store(instr, op, regs), M)
    assert np.array_equal(w.store(ins, op, braces(regs)), M)  # Instruction and '{...}' forms


def test_load_broadcasts_over_batch_and_quadpair_axis():
    rng = np.random.default_rng(2)
    w = Warp(batch=(2, 3))
    ins = warpsim.decode(QP)
    A = values(ins, "a", rng)  # (4, 8, 4): one matrix per quad-pair product
    assert A.shape == (4, 8, 4)
    w.load(QP, "a", A, names("r", 0, 2))
    got = w.store(QP, "a", names("r", 0, 2))
    assert got.shape == (2, 3, 4, 8, 4) and (got == A).all()
    with pytest.raises(ShapeError, match="batch"):
        w.load(QP, "a", np.zeros((5, 4, 8, 4)), names("r", 0, 2))


def test_load_store_errors():
    w = Warp()
    with pytest.raises(PtxError, match="needs 4 32-bit registers per lane, got 3"):
        w.load(F16, "a", np.zeros((16, 16)), names("r", 0, 3))
    with pytest.raises(PtxError, match="64-bit"):
        w.load(F64, "c", np.zeros((16, 8)), names("f", 0, 4))
    with pytest.raises(PtxError, match="32-bit"):
        w.load(F16, "a", np.zeros((16, 16)), ["%r0", "%r1", "%h2", "%r3"])
    with pytest.raises(PtxError, match="more than once"):
        w.load(F16, "a", np.zeros((16, 16)), ["%r0", "%r1", "%r0", "%r3"])
    with pytest.raises(RegisterError, match="declare"):
        w.load(F16, "a", np.zeros((16, 16)), ["%r0", "%r1", "%x2", "%r3"])
    with pytest.raises(ShapeError):
        w.load(F16, "a", np.zeros((16, 8)), names("r", 0, 4))
    with pytest.raises(ValueError, match="operand"):
        w.load(F16, "e", np.zeros((16, 16)), names("r", 0, 4))
    with pytest.raises(RegisterError, match="not been written"):
        w.store(F16, "a", names("r", 0, 4))
    with pytest.raises(PtxError, match="requires"):  # legality follows the warp's arch
        Warp("sm_75").load(BF16, "a", np.zeros((16, 16)), names("r", 0, 4))
    assert len(w) == 0


# --------------------------------------------------------------------------------------------
# execute
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("instr", [F16, F16H, BF16, F64, S8, QP])
def test_execute_matches_mma_and_matmul(instr):
    rng = np.random.default_rng(3)
    batch = (2,)
    w = Warp("sm_90", batch)
    ins = warpsim.decode(instr, "sm_90")
    A, B, C, regs = setup(w, ins, rng, batch)
    dregs = operand_names(ins, "d", 60)
    if dregs[0].startswith("%r"):
        dregs = names("r", 60, ins.regs["d"])
    words = {op: np.stack([w[n] for n in regs[op]], -1) for op in "abc"}
    out = w.execute(text(instr, dregs, regs["a"], regs["b"], regs["c"]))
    assert out == (ins,)
    D = np.stack([w[n] for n in dregs], -1)
    assert np.array_equal(D, mma(instr, words["a"], words["b"], words["c"], arch="sm_90"))
    assert np.array_equal(w.store(instr, "d", dregs), matmul(instr, A, B, C, arch="sm_90"))
    for op in "abc":  # sources unchanged
        assert np.array_equal(np.stack([w[n] for n in regs[op]], -1), words[op])


def test_d_aliases_c_and_chained_statements():
    rng = np.random.default_rng(4)
    w = Warp()
    ins = warpsim.decode(F16)
    A, B, C, regs = setup(w, ins, rng)
    acc = regs["c"]
    step = text(F16, acc, regs["a"], regs["b"], acc)
    # two statements: ';'-separated on one line, then a newline-separated one spanning lines
    prog = step + " " + step + "\n" + step.replace(", {", ",\n    {") + "  // comment\n"
    assert len(w.execute(prog)) == 3
    want = C
    for _ in range(3):
        want = matmul(F16, A, B, want)
    assert np.array_equal(w.store(F16, "c", acc), want)


def test_d_partially_aliases_a():
    """D overlapping A must still read the old A (all sources are read before D is written)."""
    rng = np.random.default_rng(5)
    w = Warp()
    ins = warpsim.decode(S8)
    A, B, C, regs = setup(w, ins, rng)
    dregs = regs["a"]  # s8 A and s32 D both use 4 32-bit registers
    w.execute(text(S8, dregs, regs["a"], regs["b"], regs["c"]))
    assert np.array_equal(w.store(S8, "d", dregs), matmul(S8, A, B, C))


def test_batch_of_warps_independent():
    rng = np.random.default_rng(6)
    w = Warp("sm_80", (2, 2))
    ins = warpsim.decode(BF16, "sm_80")
    A, B, C, regs = setup(w, ins, rng, (2, 2))
    d = names("f", 10, 4)
    w.execute(text(BF16, d, regs["a"], regs["b"], regs["c"]))
    D = w.store(BF16, "d", d)
    for i in range(2):
        for j in range(2):
            assert np.array_equal(D[i, j], matmul(BF16, A[i, j], B[i, j], C[i, j], arch="sm_80"))


def test_f32_operands_in_r_registers_and_exact_arch():
    rng = np.random.default_rng(7)
    w = Warp("exact")
    ins = warpsim.decode(F16)
    A, B, C, regs = setup(w, ins, rng)
    c_r = names("r", 80, 4)
    w.load(F16, "c", C, c_r)
    w.execute(text(F16, names("r", 90, 4), regs["a"], regs["b"], c_r))
    assert np.array_equal(w.store(F16, "d", names("r", 90, 4)), matmul(F16, A, B, C, arch="exact"))


def test_guard_predicate():
    rng = np.random.default_rng(8)
    w = Warp(batch=2)
    ins = warpsim.decode(F16)
    A, B, C, regs = setup(w, ins, rng, (2,))
    w["%p0"] = np.array([[1] * 32, [0] * 32])
    d = names("f", 20, 4)
    w.execute("@%p0 " + text(F16, d, regs["a"], regs["b"], regs["c"]))
    D = w.store(F16, "d", d)
    assert np.array_equal(D[0], matmul(F16, A[0], B[0], C[0])) and (D[1] == 0).all()
    w.execute("@!%p0 " + text(F16, d, regs["a"], regs["b"], regs["c"]))
    assert np.array_equal(w.store(F16, "d", d), matmul(F16, A, B, C))
    w["%p1"] = np.arange(32) % 2
    with pytest.raises(PtxError, match="differs between lanes"):
        w.execute("@%p1 " + text(F16, d, regs["a"], regs["b"], regs["c"]))


def test_execute_errors():
    rng = np.random.default_rng(9)
    w = Warp()
    ins = warpsim.decode(F16)
    A, B, C, regs = setup(w, ins, rng)
    a, b, c = regs["a"], regs["b"], regs["c"]
    d = names("f", 30, 4)
    w.declare("%wide", 64)
    w["%wide"] = 0

    def bad(exc, pattern, *ops):
        with pytest.raises(exc, match=pattern):
            w.execute(f"{F16} {', '.join(ops)};")

    bad(RegisterError, r"%r9 \(operand A.*similar", braces(d), braces(a[:3] + ["%r9"]), braces(b), braces(c))
    bad(RegisterError, r"operand C", braces(d), braces(a), braces(b), braces(c[:3] + ["%f99"]))
    bad(PtxError, r"operand B .*needs 2 32-bit registers per lane, got 3", braces(d), braces(a),
        braces(b + ["%r0"]), braces(c))
    bad(PtxError, r"operand D .*needs 4", braces(d[:3]), braces(a), braces(b), braces(c))
    bad(PtxError, r"operand A .*32-bit.*%wide is 64-bit", braces(d), braces(a[:3] + ["%wide"]),
        braces(b), braces(c))
    bad(PtxError, r"operand D .*%rd0 is 64-bit", braces(d[:3] + ["%rd0"]), braces(a), braces(b), braces(c))
    bad(PtxError, r"more than once", braces(d[:3] + d[:1]), braces(a), braces(b), braces(c))
    bad(PtxError, r"takes 4 operands", braces(d), braces(a), braces(b))
    bad(PtxError, r"operand C .*vector", braces(d), braces(a), braces(b), "%f0")
    bad(RegisterError, r"no known width", braces(d[:3] + ["%acc"]), braces(a), braces(b), braces(c))
    with pytest.raises(PtxError, match="requires"):
        Warp("sm_75").execute(text(BF16, d, a, b, c))
    with pytest.raises(PtxError, match="unsupported instruction 'tex'"):
        w.execute("tex.1d.v4.f32.s32 {%f0, %f1, %f2, %f3}, [tx, {%r0}];")
    # f64 operands need 64-bit registers
    w.load(F64, "a", np.zeros((16, 8)), names("fd", 0, 4))
    w.load(F64, "b", np.zeros((8, 8)), names("fd", 4, 2))
    with pytest.raises(PtxError, match=r"operand C .*64-bit.*%f40 is 32-bit"):
        w.execute(text(F64, names("fd", 8, 4), names("fd", 0, 4), names("fd", 4, 2), c))
    assert not any(n in w for n in d + ["%fd8"])  # nothing written by failed statements


def test_failed_statement_stops_program_after_earlier_ones():
    rng = np.random.default_rng(10)
    w = Warp()
    ins = warpsim.decode(F16)
    A, B, C, regs = setup(w, ins, rng)
    good = text(F16, names("f", 30, 4), regs["a"], regs["b"], regs["c"])
    with pytest.raises(RegisterError):
        w.execute(good + "\n" + text(F16, names("f", 60, 4), regs["a"], regs["b"], names("f", 50, 4)))
    assert "%f30" in w and "%f60" not in w


# --------------------------------------------------------------------------------------------
# Block scaling (sm_120a)
# --------------------------------------------------------------------------------------------


def _pow2(rng, shape):
    return 2.0 ** rng.integers(-3, 4, shape)


@pytest.mark.parametrize("sel_a,sel_b", [((0, 0), (0, 0)), ((1, 1), (3, 2)), ((3, 0), (2, 3))])
def test_block_scale_mxf8f6f4(sel_a, sel_b):
    rng = np.random.default_rng(11)
    w = Warp("sm_120a", batch=2)
    ins = warpsim.decode(MX, "sm_120a")
    A, B, C, regs = setup(w, ins, rng, (2,))
    SA, SB = _pow2(rng, (2, 16, 1)), _pow2(rng, (2, 1, 8))
    # other scale sets sharing the register must not disturb the selected one
    w["%r100"] = 0x7F7F7F7F
    w.load_scales(MX, "scale_a", SA, "%r100", byte_id=sel_a[0], thread_id=sel_a[1])
    w.load_scales(MX, "scale_b", SB, "%r101", byte_id=sel_b[0], thread_id=sel_b[1])
    d = names("f", 10, 4)
    prog = text(MX, d, regs["a"], regs["b"], regs["c"], "%r100", "{%d, %d}" % sel_a,
                "%r101", "{%d, %d}" % sel_b)
    w.execute(prog)
    want = matmul(MX, A, B, C, arch="sm_120a", scale_A=SA, scale_B=SB)
    assert np.array_equal(w.store(MX, "d", d), want)
    # the same words through warpsim.mma
    words = {op: np.stack([w[n] for n in regs[op]], -1) for op in "abc"}
    direct = mma(MX, words["a"], words["b"], words["c"], arch="sm_120a", scale_a=w["%r100"],
                 scale_b=w["%r101"], byte_id_a=sel_a[0], thread_id_a=sel_a[1],
                 byte_id_b=sel_b[0], thread_id_b=sel_b[1])
    assert np.array_equal(np.stack([w[n] for n in d], -1), direct)


def test_block_scale_nvf4_and_immediate_scale_data():
    rng = np.random.default_rng(12)
    w = Warp("sm_120a")
    ins = warpsim.decode(NV4, "sm_120a")
    A, B, C, regs = setup(w, ins, rng)
    SA = rng.choice([0.5, 1.0, 1.5, 2.0], (16, 4))
    SB = rng.choice([0.25, 1.0, 3.0], (4, 8))
    w.load_scales(NV4, "scale_a", SA, "%r100")
    w.load_scales(NV4, "scale_b", SB, "%r101", thread_id=1)
    d = names("f", 10, 4)
    w.execute(text(NV4, d, regs["a"], regs["b"], regs["c"], "%r100", "{0, 0}", "%r101", "{0, 1}"))
    want = matmul(NV4, A, B, C, arch="sm_120a", scale_A=SA, scale_B=SB)
    assert np.array_equal(w.store(NV4, "d", d), want)
    # immediate scale data: 0x38 is ue4m3 1.0 in every byte
    w.execute(text(NV4, d, regs["a"], regs["b"], regs["c"], "0f38383838", "{0, 0}", "0f38383838",
                   "{0, 2}"))
    ones_a, ones_b = np.ones((16, 4)), np.ones((4, 8))
    assert np.array_equal(w.store(NV4, "d", d),
                          matmul(NV4, A, B, C, arch="sm_120a", scale_A=ones_a, scale_B=ones_b))


def test_block_scale_errors():
    rng = np.random.default_rng(13)
    w = Warp("sm_120a")
    ins = warpsim.decode(MX, "sm_120a")
    A, B, C, regs = setup(w, ins, rng)
    w["%r100"] = 0x7F7F7F7F
    w["%rd9"] = 0
    d = names("f", 10, 4)

    def run(*extra):
        w.execute(text(MX, d, regs["a"], regs["b"], regs["c"], *extra))

    with pytest.raises(PtxError, match=r"\{byte-id-a, thread-id-a\}.*thread-id-a = 2"):
        run("%r100", "{0, 2}", "%r100", "{0, 0}")
    with pytest.raises(PtxError, match=r"\{byte-id-b, thread-id-b\}.*byte-id-b = 4"):
        run("%r100", "{0, 0}", "%r100", "{4, 0}")
    with pytest.raises(PtxError, match="selector registers are 16-bit"):
        run("%r100", "{%r1, 0}", "%r100", "{0, 0}")
    with pytest.raises(PtxError, match="scale-b-data .*32-bit"):
        run("%r100", "{0, 0}", "%rd9", "{0, 0}")
    with pytest.raises(RegisterError, match="scale-a-data"):
        run("%r77", "{0, 0}", "%r100", "{0, 0}")
    with pytest.raises(PtxError, match="takes 8 operands"):
        run("%r100", "{0, 0}")
    with pytest.raises(PtxError, match="no .block_scale"):
        w.load_scales(F16, "scale_a", np.ones((16, 1)), "%r5")
    with pytest.raises(ShapeError, match=r"\(\.\.\., 16, 1\)"):
        w.load_scales(MX, "scale_a", np.ones((16, 2)), "%r5")
    with pytest.raises(PtxError, match="byte-id-a"):
        w.load_scales(MX, "scale_a", np.ones((16, 1)), "%r5", byte_id=4)
    assert "%f10" not in w


def test_default_arch_runs_block_scaled_forms():
    # Warp() takes arch="auto": each instruction runs on its default target (sm_120a for block
    # scaling), as `warpsim run` and golden() do; an explicit sm_90 refuses with the targets named.
    ins = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
    rng = np.random.default_rng(3)
    A, B, C = rng.integers(-6, 7, (16, 64)) / 2, rng.integers(-6, 7, (64, 8)) / 2, rng.standard_normal((16, 8))
    text = (ins + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%f4,%f5,%f6,%f7}, "
            "%r6, {0, 0}, %r7, {0, 0};")
    w = warpsim.Warp()
    w.load(ins, "a", A, regs=["%r0", "%r1", "%r2", "%r3"])
    w.load(ins, "b", B, regs=["%r4", "%r5"])
    w.load(ins, "c", C, regs=["%f4", "%f5", "%f6", "%f7"])
    w.write("%r6", 0x7F7F7F7F)  # ue8m0 127: scale 1
    w.write("%r7", 0x7F7F7F7F)
    w.execute(text)
    D = w.store(ins, "d", regs=["%f0", "%f1", "%f2", "%f3"])
    ones = np.ones((16, 2)), np.ones((2, 8))
    assert np.array_equal(D, warpsim.matmul(ins, A, B, C, arch="sm_120a", scale_A=ones[0], scale_B=ones[1]))
    w90 = warpsim.Warp(arch="sm_90")
    with pytest.raises(warpsim.PtxError, match="sm_120a"):
        w90.execute(text)
