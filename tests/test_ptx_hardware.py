"""warpsim against words an H100 produced for the warp-level PTX cases (docs/validation.md).

The fixture holds the first warps of every case of the hardware run: inputs, output register
words, shared and global memory after the body.  The simulator must reproduce every word.
"""

from pathlib import Path

import numpy as np
import pytest

from warpsim.validation import warp_ptx as V
from warpsim.validation.warp_cases import CASES

DATA = Path(__file__).parent / "data" / "h100_ptx_warp.npz"
FIXTURE = V.load(DATA) if DATA.exists() else {}
BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize("name", sorted(FIXTURE))
def test_case_matches_h100(name):
    r = FIXTURE[name]
    case = BY_NAME[name]
    rep = V.compare({name: r})[name]
    assert rep["words"] == r["in"].shape[0] * 32 * len(case.outputs)
    assert (rep["word_mismatches"], rep["smem_mismatches"], rep["gmem_mismatches"]) == (0, 0, 0), rep["first"]


def test_fixture_covers_the_families():
    fams = {BY_NAME[n].family for n in FIXTURE}
    assert {"mov", "logic", "warpops", "control", "ldst", "matrix", "e2e"} <= fams


def test_a_wrong_word_is_caught():
    name = "e2e_int4_dequant_lop3_mma"
    r = {k: v.copy() for k, v in FIXTURE[name].items()}
    r["out"][0, 5, 0] ^= np.uint64(1)
    assert V.compare({name: r})[name]["word_mismatches"] == 1


def test_ptx_module_assembles_if_ptxas_present(tmp_path):
    import shutil
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH")
    assert V.build(tmp_path).stat().st_size > 0
