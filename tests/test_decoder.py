"""The mma decoder against the ptxas truth table, plus unit tests of its messages and parsing."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

from warpsim.tensorcore.decode import decode, legal_archs, split_operands
from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS, PRIMARY_ARCHS, Instruction, iter_instructions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import ptxas_truth  # noqa: E402

from warpsim.tools.ptxas import find_ptxas  # noqa: E402
from warpsim.tools.ptxas import is_sparse as _sparse  # noqa: E402

PTXAS = find_ptxas()

NO_SEMANTICS = "defines no semantics"


@pytest.fixture(scope="module")
def table():
    return ptxas_truth.read_table(ptxas_truth.DEFAULT_OUT)


def _version(key: str) -> tuple[int, int]:
    """'13.5@9.1' -> (9, 1): the .version a label set was assembled at."""
    a, b = key.split("@")[1].split(".")
    return int(a), int(b)


_VERDICTS: dict = {}


def _verdict(s, version=None):
    """(set of targets the decoder accepts, error message or None) for one string."""
    key = (s, version)
    if key not in _VERDICTS:
        try:
            decode(s, None, version)
            msg = None
        except PtxError as e:
            msg = str(e)
        _VERDICTS[key] = (set(legal_archs(s, version)), msg)
    return _VERDICTS[key]


# --------------------------------------------------------------------------------------------
# Agreement with the stored ptxas table
# --------------------------------------------------------------------------------------------

#: Register names the corpus modules declare (tools/ptxas_truth.py, warpsim.tools.ptxas.DECLARATIONS).
_DECLARED = re.compile(r"%(r|f|fd|rd)[0-9]{1,2}|%(h|rs)[0-9]|%p[0-3]")
_NAME = re.compile(r"(?<![\w$%.:])([%$]?[A-Za-z_$%][\w$]*)")


def _undeclared(s: str) -> bool:
    """The operand list names a register the corpus module does not declare (ptxas: 'Illegal
    expression'); decode sees no declarations and accepts any PTX identifier."""
    if " " not in s and "{" not in s:
        return False
    ops = s[len(split_operands(s)[0]):]
    return any(not _DECLARED.fullmatch(n) and n != "_" for n in _NAME.findall(ops))


def _known_divergence(s: str, t: str, key: str, accepted: bool, msg: str | None,
                      err: str | None) -> str | None:
    """Why decode and ptxas differ on (s, t) under label set ``key``, or None if unexplained.
    Every reason is documented in docs/design.md ("Where decode and ptxas differ")."""
    if accepted and msg and NO_SEMANTICS in msg:
        return "undocumented form"  # ptxas assembles it, the PTX ISA gives it no meaning
    if not accepted and err and ("Illegal expression" in err or "Arguments mismatch" in err) \
            and _undeclared(s):
        return "undeclared register"
    if accepted and msg and "ptxas assembles some" in msg:
        return "multi-register scale data"
    if accepted and key.startswith("13.0@") and msg and ".bf16x2" in msg:
        return "ptxas 13.0 .bf16x2"  # ptxas 13.0 let a stray .bf16x2 through; 13.5 does not
    if accepted and msg and "kind::ti16" in msg:
        return "tcgen05 kind"
    if accepted and msg and "high word is not defined" in msg:
        return "0f in a 64-bit literal vector"  # ptxas fills the high word from its memory
    return None


def test_table_size_and_targets(table):
    assert "13.0@9.0" in table.labels
    assert len(table.rows) >= 20000
    t130 = table.targets("13.0@9.0")
    assert set(PRIMARY_ARCHS) <= set(t130) and "sm_107a" not in t130
    assert sum(1 for r in table.rows.values() if table.ok(r, "13.0@9.0")) > 500
    if "13.5@9.5" in table.labels:
        t135 = table.targets("13.5@9.5")
        assert {"sm_107", "sm_107a", "sm_107f"} <= set(t135) <= set(ARCHS)
        assert all("13.5@9.5" in r for r in table.rows.values())
        assert {"operands", "shape-spelling"} <= {r["cat"] for r in table.rows.values()}


def test_decoder_agrees_with_ptxas_on_every_label_set(table):
    bad = []
    reasons: dict = {}
    for key in table.labels:
        version = _version(key)
        for s, r in table.rows.items():
            if _sparse(s):  # labelled without e, f here; tests/data/ptxas_truth_sparse covers them
                continue
            ok = table.ok(r, key)
            if ok is None:
                continue
            legal, msg = _verdict(s, version)
            for t in table.labelled(r, key):
                if (t in ok) == (t in legal):
                    continue
                why = _known_divergence(s, t, key, t in ok, msg, table.err(r, key, t))
                if why is None:
                    bad.append((key, s, t, "ptxas accepts" if t in ok else "ptxas rejects",
                                msg or table.err(r, key, t)))
                else:
                    reasons[why] = reasons.get(why, 0) + 1
    assert not bad, f"{len(bad)} disagreements, first: {bad[:5]}"
    assert set(reasons) <= {"undocumented form", "undeclared register",
                            "multi-register scale data", "ptxas 13.0 .bf16x2", "tcgen05 kind",
                            "0f in a 64-bit literal vector"}


def test_undocumented_but_assembled_rows_say_no_semantics(table):
    seen = 0
    for r in table.rows.values():
        ok = table.ok(r, "13.0@9.0")
        if r["cat"] not in ("undocumented", "kind-on-fp8") or not ok:
            continue
        for t in ok:
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
    key = "13.5@9.5" if "13.5@9.5" in table.labels else "13.0@9.0"
    targets = set(table.targets(key))
    for instr in iter_instructions():
        if key == "13.0@9.0" and instr.stype == "ue8m0" and instr.scale_vec == 4:
            continue  # PTX ISA 9.1
        r = table.rows.get(instr.text)
        assert r is not None, instr.text
        assert table.ok(r, key) == targets & set(legal_archs(instr, _version(key))), instr.text


@pytest.mark.skipif(PTXAS is None, reason="no ptxas on PATH or in the nvidia-cuda-nvcc wheel")
def test_live_ptxas_recheck_of_a_sample(table):
    """The found ptxas, at its newest .version, labels a random sample as the table says."""
    key = f"{PTXAS.cuda[0]}.{PTXAS.cuda[1]}@{PTXAS.max_ptx[0]}.{PTXAS.max_ptx[1]}"
    if key not in table.labels:
        pytest.skip(f"the table has no labels of {key}")
    rng = random.Random()
    rows = [r for r in table.rows.values() if key in r and not _sparse(r["s"])]
    sample = rng.sample(rows, 120)
    targets = rng.sample([t for t in table.targets(key) if t in PRIMARY_ARCHS], 3)
    lab = ptxas_truth.Labeller(PTXAS, PTXAS.max_ptx)
    for t in targets:
        got = ptxas_truth.label_target(lab, t, [r["s"] for r in sample])
        for r in sample:
            if got[r["s"]][0] != (t in table.ok(r, key)):
                # once seen under a loaded parallel run: ask again with the form alone in its module
                got[r["s"]] = ptxas_truth.label_target(lab, t, [r["s"]])[r["s"]]
            assert got[r["s"]][0] == (t in table.ok(r, key)), (r["s"], t, got[r["s"]])


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
    with pytest.raises(PtxError) as ei:  # legal from PTX ISA 9.1 (CUDA 13.1)
        decode(base.format(".scale_vec::4X", "ue8m0"), "sm_120a", ptx_version="9.0")
    msg = str(ei.value)
    assert ".scale_vec::4X" in msg and ".ue8m0" in msg and ".version 9.1" in msg
    assert ".scale_vec::1X" in _err(base.format(".scale_vec::1X", "ue8m0"), "sm_120a")
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
    with pytest.raises(PtxError, match="operand B"):
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
