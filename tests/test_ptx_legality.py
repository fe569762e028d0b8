"""The interpreter's decoder accepts exactly the forms ptxas 13.0 accepts for sm_90, on the
stored verdicts of tools/ptx_interp_legality.py (no ptxas needed)."""

import json
from pathlib import Path

from warpsim.errors import PtxError
from warpsim.ptx.parser import parse_body
from warpsim.ptx.program import Program

TRUTH = json.loads((Path(__file__).parent / "data" / "ptxas_interp_truth.json").read_text())


def test_decoder_agrees_with_ptxas():
    wrong = []
    for f in TRUTH["forms"]:
        try:
            Program(parse_body(TRUTH["decl"] + f["ptx"]), "sm_90")
            ok = True
        except PtxError:
            ok = False
        if ok != f["ok"]:
            wrong.append((f["ptx"], f["ok"], f["msg"]))
    assert len(TRUTH["forms"]) > 500 and not wrong, wrong[:10]
    assert 0 < sum(f["ok"] for f in TRUTH["forms"]) < len(TRUTH["forms"])  # both verdicts present
