"""--format json of decode, layout and check-packing; layout refuses an --out suffix it cannot
write; the packing-doctor text on the command line."""

from __future__ import annotations

import json

import numpy as np

import warpsim
from warpsim.tools.cli import main

F16 = "m16n8k16.row.col.f32.f16.f16.f32"
MX = "m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_decode_json(capsys):
    assert main(["decode", MX, "--format", "json"]) == 0
    d = _json(capsys)
    ins = warpsim.decode(MX, None)
    assert d["instruction"] == ins.text and d["types"]["scale"] == "ue4m3" and d["scale_vec"] == 4
    assert d["registers"] == dict(ins.regs) and "sm_120a" in d["archs"]
    a = d["operands"]["a"]
    assert a["code_bits"] == 4 and a["elements_per_register"] == 8 and a["element_bits"][1] == [4, 7]
    assert main(["decode", "m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32", "--format", "json"]) == 0
    d = _json(capsys)
    assert d["operands"]["a"]["element_bits"][0] == [2, 5] and d["operands"]["b"]["element_bits"][0] == [0, 5]


def test_layout_json_matches_layout_tables(capsys):
    assert main(["layout", F16, "--operand", "b", "--format", "json"]) == 0
    d = _json(capsys)
    lay = warpsim.layout(F16, "b")
    assert d["rows"] == 16 and d["cols"] == 8 and len(d["elements"]) == 128
    for e in d["elements"]:
        assert tuple(lay[e["lane"], e["element"]]) == (e["row"], e["col"])
        assert e["register"] == e["element"] // 2 and e["lo_bit"] == 16 * (e["element"] % 2)
    assert main(["layout", F16, "--operand", "a", "--lane", "5", "--register", "1", "--format", "json"]) == 0
    d = _json(capsys)
    assert d["query"] and [(e["row"], e["col"]) for e in d["elements"]] == [(9, 2), (9, 3)]
    assert main(["layout", MX, "--operand", "scale_a", "--format", "json"]) == 0
    d = _json(capsys)
    assert d["type"] == "ue4m3" and d["cols"] == 4 and "byte" in d["elements"][0]


def test_layout_out_suffix(tmp_path, capsys):
    assert main(["layout", F16, "--operand", "a", "--out", str(tmp_path / "a.png")]) == 2
    assert "cannot tell the format from .png" in capsys.readouterr().err
    assert not (tmp_path / "a.png").exists()
    assert main(["layout", F16, "--operand", "a", "--out", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["operand"] == "a"


def test_check_packing_json(tmp_path, capsys):
    A = np.arange(256.0).reshape(16, 16)
    np.save(tmp_path / "m.npy", A)
    np.save(tmp_path / "r.npy", warpsim.pack(F16, "a", A.T))
    assert main(["check-packing", F16, "--operand", "a", str(tmp_path / "r.npy"), str(tmp_path / "m.npy"),
                 "--format", "json", "--show", "2"]) == 1
    d = _json(capsys)
    assert not d["ok"] and d["mismatches"] == 240 and d["cause_tags"] == ["transposed"]
    assert len(d["fields_wrong"]) == 2 and d["fields_wrong"][0]["found"] == [[0, 1, 0]]
    assert d["fields_wrong"][0]["text"].startswith("lane 0 register 0 bits 16-31 holds A[1][0]")
