"""The mma decoder against the ptxas truth table, plus unit tests of its messages and parsing."""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pytest

from warpsim.decoder import decode, legal_archs, split_operands
from warpsim.errors import PtxError
from warpsim.isa import ARCHS, PRIMARY_ARCHS, Instruction, iter_instructions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import ptxas_truth  # noqa: E402

NO_SEMANTICS = "defines no semantics"


@pytest.fixture(scope="module")
def table():
    return ptxas_truth.read_table(ptxas_truth.DEFAULT_OUT)


def _verdict(s):
    """(set of targets the decoder accepts, error message or None) for one string."""
    try:
        decode(s, None)
        msg = None
    except PtxError as e:
        msg = str(e)
    return set(legal_archs(s)), msg


# --------------------------------------------------------------------------------------------
# Agreement with the stored ptxas table
# --------------------------------------------------------------------------------------------


def test_table_size_and_targets(table):
    meta, rows = table
    assert len(rows) >= 5000
    assert set(PRIMARY_ARCHS) - {"sm_70"} <= set(meta["targets"])
    assert "sm_70" in meta["targets"]
    assert len({r["s"] for r in rows}) == len(rows)
    assert sum(bool(r["ok"]) for r in rows) > 500  # not all rejected by a broken harness


def _known_divergence(s: str, msg: str | None) -> bool:
    """ptxas reads .bf16x2 before/among the types as a type; with kind::f8f6f4 e2m1 operands some
    such strings assemble (84 labels).  The decoder rejects .bf16x2 there: it is stricter."""
    return "kind::f8f6f4" in s and "e2m1" in s and bool(msg) and ".bf16x2 before" in msg \
        or bool(msg) and ".bf16x2 inside" in msg and "kind::f8f6f4" in s


def test_decoder_agrees_with_ptxas_on_every_row(table):
    meta, rows = table
    bad = []
    known = 0
    for r in rows:
        if ptxas_truth._sparse(r["s"]):  # labelled without e, f here; see ptxas_truth_sparse
            continue
        legal, msg = _verdict(r["s"])
        for t in meta["targets"]:
            accepted = t in r["ok"]
            if accepted and t not in legal and _known_divergence(r["s"], msg):
                known += 1
                continue
            if accepted and t not in legal and not (msg and NO_SEMANTICS in msg):
                bad.append((r["s"], t, "ptxas accepts, decoder says", msg or "illegal arch"))
            if not accepted and t in legal:
                bad.append((r["s"], t, "ptxas rejects", r["err"][t]))
    assert not bad, f"{len(bad)} disagreements, first: {bad[:5]}"
    assert known <= 84


def test_undocumented_but_assembled_rows_say_no_semantics(table):
    meta, rows = table
    seen = 0
    for r in rows:
        if r["cat"] not in ("undocumented", "kind-on-fp8") or not r["ok"]:
            continue
        for t in r["ok"]:
            try:
                decode(r["s"], t)
            except PtxError as e:
                if "defines no semantics" in str(e):
                    seen += 1
                    continue
            # kind::f8f6f4 at m16n8k32 is the documented f8f6f4 form, legal where assembled.
            assert r["s"].count("kind::f8f6f4") and "m16n8k32" in r["s"], (r["s"], t)
    assert seen > 100


def test_every_canonical_form_is_in_the_table_and_accepted(table):
    meta, rows = table
    ok = {r["s"]: set(r["ok"]) for r in rows}
    for instr in iter_instructions():
        assert instr.text in ok, instr.text
        assert ok[instr.text] == {t for t in meta["targets"]
                                  if t in legal_archs(instr)}, instr.text


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_live_ptxas_recheck_of_a_sample(table):
    meta, rows = table
    rng = random.Random()
    sample = rng.sample([r for r in rows if not ptxas_truth._sparse(r["s"])], 120)
    targets = rng.sample([t for t in meta["targets"] if t in PRIMARY_ARCHS], 3)
    for t in targets:
        got = ptxas_truth.label_target(t, [r["s"] for r in sample])
        for r in sample:
            assert got[r["s"]][0] == (t in r["ok"]), (r["s"], t, got[r["s"]])


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


def _err(text, arch="sm_90"):
    with pytest.raises(PtxError) as ei:
        decode(text, arch)
    return str(ei.value)


def test_wrong_shape_names_shape_and_legal_shapes():
    msg = _err("mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32")
    assert ".m16n8k16" in msg and ".tf32" in msg and ".m16n8k4, .m16n8k8" in msg


def test_min_arch_message():
    msg = _err("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_75")
    assert "requires sm_80 or later; target is sm_75" in msg
    msg = _err("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.and.popc", "sm_75")
    assert ".and.popc requires sm_80" in msg
    msg = _err("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0")
    assert "sm_120a" in msg and "target is sm_90" in msg


def test_type_messages_name_the_qualifier():
    assert ".f16" in _err("mma.sync.aligned.m16n8k16.row.col.f32.bf16.f16.f32")
    msg = _err("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32")
    assert "ctype .f32" in msg and "legal ctypes: .f16" in msg
    assert ".satfinite" in _err("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.bf16.bf16.f32")
    assert ".xor.popc" in _err("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.xor.popc")
    assert ".foo" in _err("mma.sync.aligned.m16n8k16.row.col.foo.f32.bf16.bf16.f32")
    assert "did you mean .satfinite" in _err(
        "mma.sync.aligned.m16n8k32.row.col.satfinit.s32.s8.s8.s32")


def test_unknown_arch_lists_known_names():
    msg = _err("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "sm_99")
    assert "sm_99" in msg and all(name in msg for name in ARCHS)


def test_undocumented_and_sparse_messages():
    for s in ("mma.sync.aligned.m8n8k4.row.col.f32.bf16.bf16.f32",
              "mma.sync.aligned.m8n8k4.row.col.f32.tf32.tf32.f32",
              "mma.sync.aligned.m8n8k32.row.col.s32.s4.u4.s32.xor.popc",
              "mma.sync.aligned.m16n8k16.row.col.kind::mxf4.f32.e4m3.e4m3.f32"):
        msg = _err(s, "sm_120a")
        assert "ptxas assembles" in msg and NO_SEMANTICS in msg
    assert "requires .sp::ordered_metadata" in _err(
        "mma.sp.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32", "sm_120a")


def test_block_scale_messages():
    base = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale{}.f32.e2m1.e2m1.f32.{}"
    assert "scale_vec" in _err(base.format("", "ue8m0"), "sm_120a")
    msg = _err(base.format(".scale_vec::4X", "ue8m0"), "sm_120a")
    assert ".scale_vec::4X" in msg and ".ue8m0" in msg
    assert "requires .block_scale" in _err(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.f32.e2m1.e2m1.f32.ue8m0", "sm_120a")
    assert "stype" in _err(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.ue8m0.e2m1.e2m1.f32",
        "sm_120a")


# --------------------------------------------------------------------------------------------
# Qualifier order, defaults, junk
# --------------------------------------------------------------------------------------------


def test_qualifier_order_is_free_except_positional_parts():
    ref = decode("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32", "sm_120a")
    for s in ("mma.kind::f8f6f4.sync.aligned.m16n8k32.row.col.f32.e2m1.e3m2.f32",
              "mma.aligned.sync.row.m16n8k32.col.f32.e2m1.e3m2.f32.kind::f8f6f4",
              "mma.f32.e2m1.e3m2.f32.sync.aligned.m16n8k32.row.col.kind::f8f6f4",
              "mma.sync.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32"):
        assert decode(s, "sm_120a") == ref
    # types are positional: swapping atype/btype changes the instruction
    assert decode("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32",
                  "sm_120a").atype == "e3m2"
    # layouts are positional: the first is A's
    i = decode("mma.sync.aligned.m8n8k4.col.f16.f16.f16.f16.row", "sm_80")
    assert (i.alayout, i.blayout) == ("col", "row")
    assert "before .popc" in _err("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.popc.xor")
    assert "repeated" in _err("mma.sync.aligned.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
    i = decode("mma.sync.aligned.m16n8k32.row.col.satfinite.satfinite.s32.s8.u8.s32")
    assert i.satfinite and i.btype == "u8"


def test_scale_vec_defaults_and_rounding():
    i = decode("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e2m1.f32"
               ".ue8m0", "sm_120a")
    assert (i.scale_vec, i.stype, i.form) == (1, "ue8m0", "mxf8f6f4")
    i = decode("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
               "sm_120a")
    assert i.scale_vec == 2
    assert decode("mma.sync.aligned.m16n8k8.row.col.rz.f64.f64.f64.f64").rounding == "rz"
    assert decode("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64").rounding is None
    assert ".rn" in _err("mma.sync.aligned.m16n8k8.row.col.rn.f32.tf32.tf32.f32")


def test_junk_qualifiers_are_ignored_like_ptxas():
    ref = decode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    for junk in (".acc::f32", ".acc::f16", ".bf16x2"):
        assert decode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" + junk) == ref
    assert "sm_80" in _err("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32.bf16x2", "sm_75")


# --------------------------------------------------------------------------------------------
# API details
# --------------------------------------------------------------------------------------------


def test_instruction_fields_and_arch():
    i = decode("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_86")
    assert (i.form, i.arch, i.shape) == ("bf16", "sm_86", (16, 8, 16))
    assert decode(i, "sm_90") is i
    with pytest.raises(PtxError):
        decode(i, "sm_75")
    assert decode("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32"
                  ".ue8m0", None).arch is None
    with pytest.raises(PtxError, match="ctype .f64"):
        decode("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f64", None)


def test_legal_archs():
    assert legal_archs("mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f16") == list(ARCHS)
    assert legal_archs("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1"
                       ".f32.ue8m0") == ["sm_120a", "sm_120f", "sm_121a", "sm_121f"]
    assert "sm_100a" in legal_archs(
        "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e5m2.f32")
    assert "sm_100a" not in legal_archs(
        "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e2m1.f32")
    assert legal_archs("mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32") == []


def test_split_operands():
    op, groups = split_operands(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0 "
        "{%f0, %f1, %f2, %f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%f4,%f5,%f6,%f7}, %r10, {0, 1}, "
        "%r11, {2, 3};")
    assert op.endswith(".ue8m0")
    assert groups == [["%f0", "%f1", "%f2", "%f3"], ["%r0", "%r1", "%r2", "%r3"], ["%r4", "%r5"],
                      ["%f4", "%f5", "%f6", "%f7"], "%r10", [0, 1], "%r11", [2, 3]]
    assert split_operands("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")[1] == []
    for bad in ("mma.x {%r0, %r1", "mma.x {%r0}, , %r1;", "mma.x %r0 %r1;", "mma.x {%r0},;"):
        with pytest.raises(PtxError):
            split_operands(bad)


def test_decode_checks_operand_counts():
    s = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    i = decode(s + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%f4,%f5,%f6,%f7};")
    assert i == decode(s)
    with pytest.raises(PtxError, match="operand b"):
        decode(s + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4}, {%f4,%f5,%f6,%f7};")


@pytest.mark.parametrize("text,regs", [
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", (4, 2, 2, 2)),
    ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", (2, 2, 8, 8)),
    ("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", (1, 1, 2, 2)),
    ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", (4, 2, 4, 4)),
    ("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc", (1, 1, 2, 2)),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32", (4, 2, 4, 4)),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
     (4, 2, 4, 4)),
])
def test_regs_for_representative_forms(text, regs):
    i = decode(text, "sm_120a")
    assert isinstance(i, Instruction)
    assert tuple(i.regs[o] for o in "abcd") == regs
