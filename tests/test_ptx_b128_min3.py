"""Issue 19's last forms: .b128 registers (ld/st/mov.b128), three-input min/max.f32, the mov of
a one-element vector (refused by name), and the whole real corpus against ptxas 13.5."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import warpsim
from warpsim.errors import PtxError

DATA = Path(__file__).parent / "data"

B128 = """.version 8.3
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u64 q)
{
 .reg .b128 %q<3>; .reg .b64 %rd<8>; .reg .b32 %r<4>;
 ld.param.u64 %rd1, [p]; ld.param.u64 %rd2, [q];
 mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 16; add.s64 %rd1, %rd1, %rd3; add.s64 %rd2, %rd2, %rd3;
 ld.global.b128 %q1, [%rd1];
 mov.b128 {%rd4, %rd5}, %q1;
 add.s64 %rd4, %rd4, 1;
 mov.b128 %q2, {%rd5, %rd4};
 mov.b128 %q0, %q2;
 st.global.b128 [%rd2], %q0;
 BODY
 ret;
}"""


def test_b128_load_mov_pack_unpack_store():
    """ld.b128 moves 16 bytes (the low 8 to the low half), mov.b128 packs {lo, hi}."""
    x = np.arange(64, dtype=np.uint64) * 0x0101010101010101
    for check in (False, True):
        out = warpsim.Module(B128.replace("BODY", "")).launch(
            "k", grid=1, block=32, args=[x, np.zeros(64, np.uint64)], check=check)[1]
        assert (out[0::2] == x[1::2]).all() and (out[1::2] == x[0::2] + 1).all()


def test_b128_shared_and_generic():
    body = (".shared .align 16 .b8 s[512];\n mov.u64 %rd6, s; add.s64 %rd6, %rd6, %rd3;\n"
            " st.shared.b128 [%rd6], %q1;\n ld.b128 %q2, [%rd2];\n ld.shared.b128 %q0, [%rd6];\n"
            " st.global.b128 [%rd2], %q0;")
    x = np.arange(64, dtype=np.uint64)
    out = warpsim.Module(B128.replace("BODY", body)).launch("k", grid=1, block=32,
                                                              args=[x, np.zeros(64, np.uint64)])[1]
    assert (out == x).all()


@pytest.mark.parametrize("bad, why", [
    ("add.s64 %rd1, %q1, 1;", "128-bit register"),
    ("ld.global.v2.b128 {%q1, %q2}, [%rd1];", "no vector forms"),
    ("mov.b128 %q1, %rd1;", ".reg .b128 register"),
    ("ld.global.b128 %rd1, [%rd1];", ".reg .b128 register"),
    ("mov.b128 {%rd1, %rd2}, {%rd3, %rd4};", ".b128 register on one side"),
])
def test_b128_misuse_is_refused(bad, why):
    with pytest.raises(PtxError, match=re.escape(why)):
        warpsim.Module(B128.replace("BODY", bad)).program("k")


def _min3(op: str, a, b, c, arch="sm_100a"):
    w = warpsim.Warp(arch=arch)
    for r, v in (("%f2", a), ("%f3", b), ("%f4", c)):
        w.write("%f2" if r == "%f2" else r, np.asarray(v, np.uint32))
    w.run(f".reg .f32 %f<6>; {op} %f1, %f2, %f3, %f4; "
          f"{op.split('.')[0]}{'.ftz' if '.ftz' in op else ''}{'.NaN' if '.NaN' in op else ''}.f32 %f5, %f2, %f3; "
          f"{op.split('.')[0]}{'.ftz' if '.ftz' in op else ''}{'.NaN' if '.NaN' in op else ''}.f32 %f5, %f5, %f4;")
    return w.read("%f1"), w.read("%f5")


SPECIAL = [0x7FC00000, 0xFFC00001, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001,
           0x80000001, 0x3F800000, 0xBF800000, 0x7F7FFFFF]


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["min.f32", "max.f32", "min.NaN.f32", "max.ftz.f32", "min.ftz.NaN.f32"]),
       st.lists(st.one_of(st.sampled_from(SPECIAL), st.integers(0, 2**32 - 1)), min_size=96, max_size=96))
def test_three_input_min_max_is_the_two_input_form_twice(op, words):
    """The PTX ISA's min/max.f32 d, a, b, c (FMNMX3 on sm_100): min(min(a, b), c), with .NaN
    and .ftz as in the two-input form (NaN ignored unless .NaN; -0 < +0)."""
    a, b, c = (np.array(words[k::3], np.uint32) for k in range(3))
    three, twice = _min3(op, a, b, c)
    assert (three == twice).all()


def test_three_input_min_max_targets_and_types():
    ok = ".reg .f32 %f<5>; max.NaN.ftz.f32 %f1, %f2, %f3, %f4;"
    warpsim.Warp(arch="sm_100a").compile(ok)
    warpsim.Warp(arch="sm_120").compile(ok)
    with pytest.raises(PtxError, match="sm_100"):
        warpsim.Warp(arch="sm_90").compile(ok)
    for bad, why in (("max.s32 %r1, %r2, %r3, %r4;", "takes 2 source"),
                     ("min.f16x2 %r1, %r2, %r3, %r4;", ".f32 only"),
                     ("min.xorsign.abs.f32 %f1, %f2, %f3, %f4;", "no .xorsign")):
        with pytest.raises(PtxError, match=re.escape(why)):
            warpsim.Warp(arch="sm_100a").compile(".reg .f32 %f<5>; .reg .b32 %r<5>; " + bad)


def test_mov_of_a_one_element_vector_is_refused_by_name():
    """ptxas accepts mov.b32 d, {a} but reads {a} as a pack of bytes with the other elements
    undefined (SASS: PRMT of a's low byte with zero; mov.b64 d, {a}: a's low 16 bits and an
    undefined high word): warpsim refuses it, naming what the GPU does."""
    with pytest.raises(PtxError, match="one byte"):
        warpsim.Warp().compile(".reg .b32 %r<3>; mov.b32 %r1, {%r2};")


def test_real_corpus_decodes_where_ptxas_13_5_accepts():
    """Every module of tests/data/real at its own .target: ptxas 13.5's verdict
    (tests/data/ptxas_real_corpus.json, tools/ptx_real_legality.py --corpus) and warpsim's
    decoding of every kernel agree; device malloc is refused by name."""
    import os
    T = json.loads((DATA / "ptxas_real_corpus.json").read_text())
    assert "13.5" in T["ptxas"] and len(T["modules"]) >= 29
    full = bool(os.environ.get("WARPSIM_FULL"))
    for rel, v in T["modules"].items():
        p = DATA / "real" / rel
        assert v["ok"], rel
        if not full and rel not in ("triton/layernorm_sm_90a.ptx", "cuda/coop_groups_sm_90.ptx"):
            continue   # the rest with WARPSIM_FULL=1 (about 10 s)
        text = gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()
        m = warpsim.Module(text)
        for name in m.kernels:
            try:
                m.program(name, arch=v["arch"])
            except PtxError as e:
                assert "malloc" in str(e), (rel, name, e)
