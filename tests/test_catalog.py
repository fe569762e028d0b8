"""warpsim.instructions / `warpsim list`: filters against the decoder and the form table."""

from __future__ import annotations

import json

import pytest

import warpsim
from warpsim.tools import catalog
from warpsim.tools.cli import main
from warpsim.errors import PtxError, WarpsimError


def test_filters_agree_with_decode():
    allx = warpsim.instructions()
    assert len(allx) == len(set(allx)) > 150
    k64 = warpsim.instructions(shape="m16n8k64", form="dense")
    assert {i.form for i in k64} == {"mxf4", "mxf4nvf4", "int4"} and all(i.shape == (16, 8, 64) for i in k64)
    assert warpsim.instructions(shape=(16, 8, 64), form="dense") == k64
    e2m1 = warpsim.instructions(type="e2m1", arch="sm_120a")
    assert e2m1 and all("e2m1" in (i.atype, i.btype) for i in e2m1)
    # every listed sm_89 instruction decodes there; every one left out does not
    on89 = set(warpsim.instructions(arch="sm_89"))
    for i in allx:
        assert (i in on89) == ("sm_89" in warpsim.legal_archs(i)), i.text
    nvf4 = warpsim.instructions(kind="mxf4nvf4", form="dense")
    assert {(i.scale_vec, i.stype) for i in nvf4} == {(2, "ue8m0"), (4, "ue4m3"), (4, "ue8m0")}
    assert all(i.kind is None for i in warpsim.instructions(kind="none"))
    # the short form each one lists decodes to the same instruction
    for i in nvf4:
        assert warpsim.decode(i.text.removeprefix("mma.sync.aligned."), None) == i


def test_sparse_forms_are_listed_and_filtered_as_decode_reports_them():
    sparse = warpsim.instructions(form="sparse")
    assert sparse and all(i.sparse for i in sparse)
    assert set(sparse) | set(warpsim.instructions(form="dense")) == set(warpsim.instructions())
    text = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
    form = warpsim.decode(text, None).form
    assert form == "sp-f16" and warpsim.decode(text, None) in warpsim.instructions(form=form)
    for i in warpsim.instructions(form="sparse", arch="sm_90"):
        assert "sm_90" in warpsim.legal_archs(i) and warpsim.decode(i.text, None) == i
    assert {i.form for i in warpsim.instructions(form="sparse", arch="sm_80")} == {
        "sp-f16", "sp-bf16", "sp-tf32", "sp-int8", "sp-int4"}


def test_type_groups():
    fp8 = warpsim.instructions(type="fp8")
    assert set(fp8) == set(warpsim.instructions(type="e4m3")) | set(warpsim.instructions(type="e5m2"))
    assert {i.form for i in warpsim.instructions(type="int4")} >= {"int4", "sp-int4"}


def test_bad_filters():
    with pytest.raises(PtxError, match="m16n8k16"):
        warpsim.instructions(shape="m16n8k12")
    with pytest.raises(PtxError, match="known"):
        warpsim.instructions(type="f8")
    with pytest.raises(PtxError, match="mxf4nvf4"):
        warpsim.instructions(kind="mxf9")
    with pytest.raises(PtxError, match="sm_90"):
        warpsim.instructions(arch="sm_91")


def test_ptx_version_filter_follows_decode():
    """An instruction is listed at .version V exactly when decode accepts it there (some target)."""
    new = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0"
    at90 = {i.text for i in warpsim.instructions(ptx_version="9.0", form="dense")}
    at91 = {i.text for i in warpsim.instructions(ptx_version="9.1", form="dense")}
    assert at91 - at90 == {new}
    assert at91 == {i.text for i in warpsim.instructions(ptx_version="9.5", form="dense")}
    assert len(at91) == len(warpsim.instructions(form="dense"))
    for i in warpsim.instructions(kind="mxf4nvf4", form="dense"):
        v = catalog.min_ptx_version(i)
        assert v == ("9.1" if i.text == new else "9.0")
        assert warpsim.legal_archs(i, v) and (v == "9.0" or not warpsim.legal_archs(i, "9.0"))
    with pytest.raises(PtxError, match="not modelled"):
        warpsim.instructions(ptx_version="8.7")
    with pytest.raises((PtxError, TypeError), match="version"):
        warpsim.instructions(ptx_version="eight")


def test_cli_list(capsys):
    assert main(["list", "--shape", "m16n8k64", "--kind", "mxf4nvf4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "3 instructions"
    assert out[0].startswith("m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 ")
    assert main(["list", "--shape", "m16n8k64", "--kind", "mxf4nvf4", "--ptx-version", "9.0"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 instructions"
    assert main(["list", "--ptx-version", "8.7"]) == 2
    assert "not modelled" in capsys.readouterr().err
    assert main(["list", "--type", "b1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["types"]["a"] == "b1" for r in rows)
    assert {r["bitop"] for r in rows} == {"xor", "and"} and rows[0]["registers"]["a"] >= 1
    assert main(["list", "--shape", "m16n8k9"]) == 2
    assert "no mma.sync instruction has shape" in capsys.readouterr().err


def test_decode_takes_the_short_form():
    full = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    for short in ("m16n8k16.row.col.f32.f16.f16.f32", ".m16n8k16.row.col.f32.f16.f16.f32",
                  "sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                  "kind::f8f6f4.m16n8k32.row.col.f32.e4m3.e2m1.f32"):
        ins = warpsim.decode(short, None)
        assert ins.text.startswith("mma.sync.aligned.m")
    assert warpsim.decode("m16n8k16.row.col.f32.f16.f16.f32") == warpsim.decode(full)
    assert warpsim.decode("m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, "
                          "{%r4,%r5}, {%f4,%f5,%f6,%f7};", None).regs["a"] == 4
    assert warpsim.legal_archs("m16n8k16.row.col.f32.f16.f16.f32") == warpsim.legal_archs(full)
    with pytest.raises(PtxError):
        warpsim.decode("foo.m16n8k16", None)
