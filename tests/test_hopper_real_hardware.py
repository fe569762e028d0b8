"""Real Hopper-era kernels against the bytes an H100 wrote (tests/data/h100_hopper_real.npz, made
with tools/hopper_real_device.py; docs/validation.md): the suite's FlashAttention-3-style
warp-specialised kernel (tests/data/real/cuda/fa3_ws.cu: a producer warpgroup with
setmaxnreg.dec and TMA into an mbarrier ring, two consumer warpgroups with setmaxnreg.inc, wgmma
S = Q K^T, online softmax with ex2.approx, P from registers in O += P V) and CuTe's tutorial
GEMMs (sgemm_1, sgemm_2, sgemm_sm80, wgmma_sm90, wgmma_tma_sm90), each on random and on
integer-exact inputs; tensor maps are the bytes the driver encoded on the GPU machine.  A sample
runs in CI; WARPSIM_REAL_ALL=1 runs all 20.  The FA3 kernel's planted twins: a consumer that
skips the K-full wait, and a setmaxnreg run by 2 of the producer's 4 warps."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.validation.launch_device import simulate

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data" / "h100_hopper_real.npz"
CUDA = Path(__file__).parent / "data" / "real" / "cuda"
#: run in CI (about 4 s): the FA3 kernel and each tensor-core CuTe kernel (the f32 sgemm_1/2 run
#: with WARPSIM_REAL_ALL=1)
SAMPLE = {"fa3_rand", "sgemm_sm80_tn_int", "wgmma_sm90_nt_rand", "wgmma_tma_sm90_tn_rand"}


def _ptx(src: str) -> str:
    p = ROOT / src
    return gzip.decompress(p.read_bytes()).decode() if src.endswith(".gz") else p.read_text()


@pytest.fixture(scope="module")
def fixture():
    return np.load(DATA)


def _cases():
    cs = json.loads(str(np.load(DATA)["cases"][0]))
    every = os.environ.get("WARPSIM_REAL_ALL") == "1"
    return [pytest.param(i, c, id=c["name"]) for i, c in enumerate(cs) if every or c["name"] in SAMPLE]


@pytest.mark.parametrize("index,case", _cases())
def test_real_kernel_matches_the_h100_byte_for_byte(fixture, index, case):
    inputs = {k[3:]: fixture[k] for k in fixture.files if k.startswith("in/")}
    # the FA3 kernel with the sanitizer on: no finding, and the same bytes
    got = simulate(case, _ptx(case["ptx"]), inputs, fixture, f"{index}/", check=case["name"] == "fa3_rand")
    for key in case["out"]:
        want = fixture[f"gpu/{index}/{key}"]
        assert np.array_equal(np.ascontiguousarray(got[key]).view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def test_driver_tensor_maps_equal_warpsims(fixture):
    """The maps the driver encoded for the FA3 and CuTe TMA launches are warpsim.tensor_map's bytes."""
    cs = json.loads(str(fixture["cases"][0]))
    n = 0
    for i, c in enumerate(cs):
        for j, a in enumerate(c["args"]):
            if "tmap" in a:
                e = a["enc"]
                mine = warpsim.tensor_map(e["dtype"], e["dims"], e["strides"], e["box"], swizzle=e["swizzle"],
                                          address=int(fixture[f"{i}/addr/{a['tmap']}"][0]))
                assert mine.raw == fixture[f"{i}/map{j}"].tobytes(), (c["name"], j)
                n += 1
    assert n == 14  # 3 per FA3 launch, 2 per CuTe TMA launch


def _fa3_case(fixture):
    return json.loads(str(fixture["cases"][0]))[0]


def _planted(fixture, variant):
    case = _fa3_case(fixture)
    inputs = {k[3:]: fixture[k] for k in fixture.files if k.startswith("in/fa3_rand")}
    ptx = gzip.decompress((CUDA / f"fa3_ws_{variant}_sm_90a.ptx.gz").read_bytes()).decode()
    with pytest.raises(warpsim.SanitizerError) as e:
        simulate(case, ptx, inputs, check=True)
    return e.value.findings


def test_fa3_consumer_reading_k_before_its_barrier_is_found(fixture):
    """The consumers' wgmma reads the K tile that TMA writes without waiting on the K-full
    mbarrier: an async-copy finding at the wgmma (S = Q K^T), naming the TMA copy."""
    f = _planted(fixture, "NO_WAIT_K")
    assert {x.kind for x in f} == {"async-copy"}
    assert all("wgmma.mma_async" in x.instruction and "f16.f16" in x.instruction for x in f)
    assert all(x.warp >= 4 for x in f)  # consumers only (warps 4..11)
    assert "cp.async.bulk.tensor" in f[0].message and "mbarrier" in f[0].message
    assert f[0].source.startswith("fa3_ws.cu:")


def test_fa3_setmaxnreg_in_half_a_warpgroup_is_found(fixture):
    f = _planted(fixture, "SETMAXNREG")
    assert f[0].kind == "divergent-sync" and f[0].instruction == "setmaxnreg.dec.sync.aligned.u32 40"
    assert "warps [0, 1] of warpgroup 0" in f[0].message and "warps [2, 3] did not run it" in f[0].message
    assert f[0].source.startswith("fa3_ws.cu:")
