"""Immediates in mma A/B/C vectors: the words ptxas materialises (SASS, ptxas 13.0) and what an
H100 computes with them (tests/data/h100_mma_vector_immediates.npz, warpsim.validation.immediates),
in Warp.execute and Warp.run alike; ptxas's verdicts on the candidate spellings."""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.tensorcore.decode import decode, split_operands
from warpsim.errors import PtxError
from warpsim.validation import immediates as harness
from warpsim.tensorcore.immediates import c_literal_rule, vector_word

DATA = Path(__file__).parent / "data"
F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"


def _double_bits(text: str) -> int:
    return struct.unpack("<Q", struct.pack("<d", float(text)))[0]


# --------------------------------------------------------------------------------------------
# The H100's D words (631 of the 1,820 statements of the run, warp 0, lanes 0-7)
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def h100():
    f = np.load(DATA / "h100_mma_vector_immediates.npz")
    inputs = harness._inputs(int(f["n_cases"]), int(f["seed"]))[:, 0]
    assert zlib.crc32(inputs.tobytes()) == int(f["inputs_crc32"]), \
        "the input generator changed: regenerate the fixture (python -m warpsim.validation.immediates)"
    return f, inputs


@pytest.mark.parametrize("how", ["execute", "run"])
def test_h100_words_reproduced(h100, how):
    f, inputs = h100
    bad = []
    for stmt, case, want in zip(f["stmt"], f["case"], f["d"]):
        stmt = str(stmt)
        nd = len(harness._vector_regs(stmt)[0])
        got = harness.simulate(stmt, inputs[case][None], how)[0, :8, :nd]
        if harness._decl_type(harness._vector_regs(stmt)[0][0]) in ("b32", "f32"):
            want = want & np.uint64(0xFFFFFFFF)
        if not np.array_equal(got, want[:, :nd]):
            bad.append(stmt)
    assert not bad, f"{len(bad)} statements differ from the H100, first: {bad[:3]}"
    assert len(f["stmt"]) > 600


def test_fixture_covers_the_special_rules(h100):
    f, _ = h100
    stmts = [str(s) for s in f["stmt"]]
    assert any("e4m3" in s and "1.1" in s.split("}, {")[-1] for s in stmts)  # fadd rounding
    assert any(".s8." in s and "0f3F800001" in s.split("}, {")[-1] for s in stmts)  # int native
    assert any(F64 in s for s in stmts)


# --------------------------------------------------------------------------------------------
# SASS: the constants ptxas materialises, per target
# --------------------------------------------------------------------------------------------

def _probe_words(row):
    """(literal text, 32-bit halves warpsim builds, raw bits of the literal) per literal."""
    instr = decode(row["stmt"], row["target"])
    _, groups = split_operands(row["stmt"])
    out = []
    for op, g in zip("abc", groups[1:4]):
        rule = c_literal_rule(instr) if op == "c" else "bits"
        bits = instr.register_bits(op)
        for x in g:
            if isinstance(x, str):
                continue
            w = vector_word(x, bits, rule)
            halves = [w & 0xFFFFFFFF, w >> 32] if bits == 64 else [w]
            out.append((getattr(x, "text", str(x)), halves))
    return out


def test_sass_constants_are_warpsim_words():
    rows = json.loads((DATA / "mma_vector_immediates_sass.json").read_text())
    assert len(rows) >= 20
    for row in rows:
        consts = set(row["constants"])
        for text, halves in _probe_words(row):
            for h in halves:
                # a zero word is RZ (no constant); any other word must be materialised
                assert h == 0 or h in consts, (row["target"], row["stmt"], text, hex(h))


def test_sass_rules_restated():
    """The rules, restated from the probes: low word of a double in a 32-bit register; a
    rounded f32 in a lowered fp8 C; 0 for float literals in a natively run integer C."""
    rows = {(r["target"], r["stmt"]): r for r in
            json.loads((DATA / "mma_vector_immediates_sass.json").read_text())}
    by = {}
    for (t, s), r in rows.items():
        by.setdefault((t, s.split()[0]), []).append(set(r["constants"]))
    low = _double_bits("1.1") & 0xFFFFFFFF
    fp8 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"
    assert low in by[("sm_90", F16)][0]
    assert 0x3F8CCCCD in by[("sm_90", fp8)][0] and low not in by[("sm_90", fp8)][0]
    assert low in by[("sm_89", fp8)][0] and 0x3F8CCCCD not in by[("sm_89", fp8)][0]
    s4 = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"
    assert 0x3F800001 not in by[("sm_80", s4)][0] and 0x3F800001 in by[("sm_90", s4)][0]


# --------------------------------------------------------------------------------------------
# Behaviour through the public API
# --------------------------------------------------------------------------------------------

def _c_words(text_c: str, arch: str = "sm_90", form: str = F16) -> list[int]:
    """D of lane 0 with A = B = 0 and %r60 = 0x10: D = C (s32 and finite f32 C pass unchanged)."""
    w = warpsim.Warp(arch)
    instr = decode(form, arch)
    for op, base in (("a", 20), ("b", 40)):
        for j in range(instr.regs[op]):
            w.write(f"%r{base + j}", 0)
    w.write("%r60", 0x10)
    d = ", ".join(f"%r{j}" for j in range(instr.regs["d"]))
    a = ", ".join(f"%r{20 + j}" for j in range(instr.regs["a"]))
    b = ", ".join(f"%r{40 + j}" for j in range(instr.regs["b"]))
    w.execute(f"{form} {{{d}}}, {{{a}}}, {{{b}}}, {{{text_c}}}")
    return [int(w.read(f"%r{j}")[0]) for j in range(instr.regs["d"])]


def test_double_literal_keeps_its_low_word_in_f32_c():
    got = _c_words("%r60, 0f3FC00000, 1.1, -0.0")
    assert got == [0x10, 0x3FC00000, _double_bits("1.1") & 0xFFFFFFFF, 0]
    assert _c_words("0d3FF199999999999A, 0d3FF199999999999A, %r60, %r60")[:2] == [0x9999999A] * 2
    # beside .f32 registers too (the old model rounded 1.1 to 0x3F8CCCCD)
    assert _c_words("%r60, 1.1, 0.3, 123.456")[1:] == [0x9999999A, 0x33333333, 0x1A9FBE77]


def test_integer_c_natively_run_zeroes_float_literals():
    s8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32"
    w = warpsim.Warp("sm_90")
    for j in range(4):
        w.write(f"%r{20 + j}", 0)
    w.write("%r40", 0), w.write("%r41", 0), w.write("%r60", 5), w.write("%r63", 9)
    w.execute(f"{s8} {{%r0, %r1, %r2, %r3}}, {{%r20, %r21, %r22, %r23}}, {{%r40, %r41}}, "
              "{%r60, 0f3F800001, 1.1, %r63}")
    assert [int(w.read(f"%r{j}")[0]) for j in range(4)] == [5, 0, 0, 9]
    # where ptxas lowers the form (s4 on sm_90: IADD3 of C) the bits survive
    s4 = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"
    w.execute(f"{s4} {{%r0, %r1, %r2, %r3}}, {{%r20, %r21, %r22, %r23}}, {{%r40, %r41}}, "
              "{%r60, 0f3F800001, 1.1, %r63}")
    assert [int(w.read(f"%r{j}")[0]) for j in range(4)] == [5, 0x3F800001, 0x9999999A, 9]


def test_lowered_fp8_c_rounds_double_literals():
    fp8 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"
    for arch, want in (("sm_90", 0x3F8CCCCD), ("sm_89", 0x9999999A), ("sm_120", 0x9999999A)):
        w = warpsim.Warp(arch)
        for j in range(4):
            w.write(f"%r{20 + j}", 0)
        w.write("%r40", 0), w.write("%r41", 0), w.write("%f60", 0)
        w.write("%f61", want), w.write("%f62", 0x3F800001)
        body = f"{fp8} {{%f0, %f1, %f2, %f3}}, {{%r20, %r21, %r22, %r23}}, {{%r40, %r41}}, "
        w.execute(body + "{%f60, 1.1, 0f3F800001, %f60}")
        got = [w.read(f"%f{j}") for j in range(4)]
        w.execute(body + "{%f60, %f61, %f62, %f60}")  # the words spelled as registers
        assert all(np.array_equal(g, w.read(f"%f{j}")) for j, g in enumerate(got)), arch


def test_integers_wrap_to_the_register_width():
    w = warpsim.Warp("sm_90")
    w.write("%fd20", 0), w.write("%fd40", 0)
    w.execute(f"{F64} {{%fd0, %fd1}}, {{%fd20}}, {{%fd40}}, {{-2, 0x7FF8000000000001}}")
    assert int(w.read("%fd0")[0]) == (1 << 64) - 2
    assert int(w.read("%fd1")[0]) & 0x7FF8000000000000 == 0x7FF8000000000000  # a NaN
    assert _c_words("%r60, 0x1FFFFFFFF, -0x80000001, 017",
                    form="mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32") == \
        [0x10, 0xFFFFFFFF, 0x7FFFFFFF, 0o17]


def test_f32_literal_in_64_bit_literal_vector_refused_and_zero_extended_beside_register():
    w = warpsim.Warp("sm_90")
    w.write("%fd20", 0), w.write("%fd40", 0), w.write("%rd60", 7)
    with pytest.raises(PtxError, match="high word"):
        w.execute(f"{F64} {{%fd0, %fd1}}, {{%fd20}}, {{%fd40}}, {{0f3F800000, 0f3F800000}}")
    with pytest.raises(PtxError, match="high word"):
        w.run(f".reg .f64 %fd<100>;\n{F64} {{%fd0, %fd1}}, {{%fd20}}, {{%fd40}}, {{0f3F800000, 1.5}};")
    w.execute(f"{F64} {{%fd0, %fd1}}, {{%fd20}}, {{%fd40}}, {{%rd60, 0f3F800001}}")
    assert int(w.read("%fd1")[0]) == 0x3F800001


@pytest.mark.parametrize("lit", ["1e400", "4.9e-324", "2.2250738585072012e-308", "1e-400"])
def test_decimal_out_of_range_refused_like_ptxas(lit):
    with pytest.raises(PtxError, match="constant overflow"):
        decode(f"{F16} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, "
               f"{{%f8, {lit}, %f9, %f10}}", "sm_90")


@pytest.mark.parametrize("lit", ["2.2250738585072014e-308", "1.7976931348623158e308", "0.0e-400"])
def test_decimal_at_the_edge_accepted(lit):
    decode(f"{F16} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, "
           f"{{%f8, {lit}, %f9, %f10}}", "sm_90")


def test_execute_and_run_agree_on_refusals():
    body = (f"{F16} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, "
            "{%f8, 1, %f9, %f10}")
    w = warpsim.Warp("sm_90")
    for r in ("%r0", "%r1", "%r2", "%r3", "%r4", "%r5"):
        w.write(r, 0)
    for r in ("%f8", "%f9", "%f10"):
        w.write(r, 0)
    with pytest.raises(PtxError, match="integer immediate") as e1:
        w.execute(body)
    with pytest.raises(PtxError, match="integer immediate") as e2:
        w.run(body + ";")
    assert "operand C" in str(e1.value) and "operand C" in str(e2.value)


# --------------------------------------------------------------------------------------------
# ptxas's verdicts on the 4,042 candidate spellings (sm_90)
# --------------------------------------------------------------------------------------------

def test_labels_fixture_shape():
    t = json.loads(gzip.open(DATA / "ptxas_mma_vector_immediates.json.gz", "rt").read())
    assert t["target"] == "sm_90" and "13.0" in t["ptxas"]
    assert len(t["rows"]) > 4000
    accepted = [r for r in t["rows"] if r["error"] is None]
    assert 1500 < len(accepted) < len(t["rows"])


def _divergence(stmt: str, role: str, msg: str) -> str | None:
    """The documented class of a decode/ptxas difference (docs/design.md), or None."""
    if "does not fit in 64 bits" in msg:
        return "integer over 64 bits"  # ptxas takes some and mangles them
    if "high word" in msg:
        return "0f in a 64-bit literal vector"  # ptxas fills the high word from its memory
    _, groups = split_operands(stmt)
    items = groups["dabc".index(role)]
    kinds = {("F" if x.startswith("%f") else "B") if isinstance(x, str) else
             ("int" if isinstance(x, int) else "f32" if x.kind == "f32" else "f64") for x in items}
    if "f32" in kinds and ({"F", "f64"} & kinds):
        return "0f mixed with .f32 registers or doubles"  # ptxas's verdict depends on the order
    return None


def test_decode_agrees_with_ptxas_on_vector_spellings():
    t = json.loads(gzip.open(DATA / "ptxas_mma_vector_immediates.json.gz", "rt").read())
    classes: dict = {}
    bad = []
    for r in t["rows"]:
        try:
            decode(r["stmt"], "sm_90")
            msg = None
        except PtxError as e:
            msg = str(e)
        if (msg is None) == (r["error"] is None):
            continue
        why = _divergence(r["stmt"], r["role"], msg or r["error"])
        if why is None:
            bad.append((r["stmt"], r["error"], msg))
        classes[why] = classes.get(why, 0) + 1
    assert not bad, f"{len(bad)} unexplained, first: {bad[:3]}"
    assert classes.get("0f mixed with .f32 registers or doubles", 0) <= 60
    assert sum(classes.values()) < len(t["rows"]) // 20


def test_f32_register_only_vectors_follow_ptxas():
    """ptxas refuses a vector of .f32 registers only for f16 B (arguments mismatch) and takes
    one for s8 A, or one %f among %r registers."""
    s8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32"
    with pytest.raises(PtxError, match="only .f32 registers"):
        decode(f"{F16} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%f4, %f5}}, "
               "{%f8, %f9, %f10, %f11}", "sm_90")
    with pytest.raises(PtxError, match="only .f32 registers"):
        decode(f"{s8} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, "
               "{%r8, %r9, %r10, %r11}", "sm_90")  # s32 D
    decode(f"{F16} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %f5}}, "
           "{%f8, %f9, %f10, %f11}", "sm_90")
    decode(f"{s8} {{%r0, %r1, %r2, %r3}}, {{%f0, %f1, %f2, %f3}}, {{%r4, %r5}}, "
           "{%r8, %r9, %r10, %r11}", "sm_90")
