"""Triton's sm_90a kernels as Triton 3.8 compiles them (wgmma): the matmul with f16 and e4m3
inputs and the tutorial's fused attention (wgmma, ex2.approx, div.full), against the bytes an H200
wrote (tests/data/h200_triton_sm90a.npz, made with tools/hopper_triton_device.py;
docs/validation.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import warpsim

DATA = Path(__file__).parent / "data" / "h200_triton_sm90a.npz"
_TYPES = {"u32": np.uint32, "u64": np.uint64, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize("index,out", [(0, 2), (1, 2), (2, 4)],
                         ids=["matmul-f16", "matmul-e4m3", "attention"])
def test_triton_sm90a_kernel_matches_the_gpu_byte_for_byte(index, out):
    z = np.load(DATA)
    L = json.loads(str(z["launches"]))[index]
    ptx = gzip.decompress(z[f"ptx_{L['name']}"].tobytes()).decode()
    assert "wgmma.mma_async" in ptx
    args = []
    for a in L["args"]:
        if "array" in a:
            args.append(z[f"in_{a['array']}"].copy())
        elif "null" in a:
            args.append(None)
        else:
            (t, v), = a.items()
            args.append(_TYPES[t](v))
    outs = warpsim.Module(ptx).launch(L["kernel"], tuple(L["grid"]), L["block"], args,
                                      L["shared"], arch="sm_90a", check=False)
    k = sum(isinstance(a, np.ndarray) for a in args[:out])  # its place among the outputs
    got = np.ascontiguousarray(outs[k]).view(np.uint8).reshape(-1)
    want = z[f"gpu_{index}_{out}"].view(np.uint8).reshape(-1)
    assert got.size == want.size and np.array_equal(got, want)
