"""wgmma against the GPU (an H200, sm_90; docs/validation.md): the simulator's D words equal the
GPU's, word for word.

The fixtures (tests/data/h200_wgmma.npz, dense; h200_wgmma_sparse.npz, the 72 sparse runs) hold
every run of the suite (warpsim.validation.wgmma:
case, input seed and kind, scale-d, the GPU's SHA-256 digest of its D words) and the GPU's words
of 88 of them (every 7th run with at most 32 D registers per thread, and the address probes).
CI re-simulates those 88; ``WARPSIM_FULL=1`` re-simulates all 929 against the digests.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from warpsim.validation.wgmma import (PROBE_CASE, Case, Run, _digest, _run_inputs,
                                      probe_addresses, simulate)

DATA = Path(__file__).parent / "data"


def _load(name):
    z = np.load(DATA / name)
    specs = json.loads(str(z["specs"]))
    return specs, {int(k[1:]): z[k] for k in z.files if k.startswith("w")}


SPECS, WORDS = _load("h200_wgmma.npz")
SPARSE_SPECS, SPARSE_WORDS = _load("h200_wgmma_sparse.npz")


def _run(spec) -> Run:
    return Run(Case(**spec["case"]), spec["seed"], spec["kind"], spec["scale_d"], spec["group"])


def test_fixture_covers_the_suite():
    assert len(SPECS) == 929 and len(WORDS) == 88
    fams = {Case(**s["case"]).ins.family for j, s in enumerate(SPECS) if j in WORDS}
    assert fams == {"f16", "bf16", "tf32", "fp8", "int", "b1"}
    assert {s["kind"] for j, s in enumerate(SPECS) if j in WORDS} >= {"random", "exact", "special", "probe"}


@pytest.mark.parametrize("j", sorted(WORDS))
def test_words_equal_the_gpu(j):
    r = _run(SPECS[j])
    d = simulate(r.case, _run_inputs(r))
    assert np.array_equal(d, WORDS[j]), f"run {j}: {r.case.name} {r.kind}: {(d != WORDS[j]).sum()} words differ"


def test_probes_show_the_base_offset_rule():
    """Probes with a base offset: B's element (n, k) came from the address the rule gives."""
    probes = [j for j, s in enumerate(SPECS) if s["kind"] == "probe" and j in WORDS]
    assert len(probes) >= 9
    for j in probes:
        want = probe_addresses(WORDS[j])
        got = probe_addresses(simulate(PROBE_CASE, _run_inputs(_run(SPECS[j]))))
        assert np.array_equal(got, want)


@pytest.mark.parametrize("j", sorted(SPARSE_WORDS))
def test_sparse_words_equal_the_gpu(j):
    r = _run(SPARSE_SPECS[j])
    d = simulate(r.case, _run_inputs(r))
    assert np.array_equal(d, SPARSE_WORDS[j]), f"sparse run {j}: {r.case.name} {r.kind}"


def test_sparse_fixture_covers_every_family():
    assert len(SPARSE_SPECS) == 72
    assert {Case(**s["case"]).ins.family for s in SPARSE_SPECS} == {"f16", "bf16", "tf32", "fp8", "int"}
    assert {Case(**s["case"]).sel for s in SPARSE_SPECS} == {0, 1}


@pytest.mark.skipif(not os.environ.get("WARPSIM_FULL"), reason="set WARPSIM_FULL=1 (about 3 minutes)")
def test_every_run_matches_the_gpu_digest():
    bad = []
    for name, specs in (("dense", SPECS), ("sparse", SPARSE_SPECS)):
        for j, s in enumerate(specs):
            r = _run(s)
            if _digest(simulate(r.case, _run_inputs(r))) != s["gpu"]:
                bad.append((name, j))
    assert not bad, f"{len(bad)} runs differ: {bad[:20]}"
