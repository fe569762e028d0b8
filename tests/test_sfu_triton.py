"""Triton's fused softmax and layer norm, as Triton 3.6 compiles them for sm_90a, run through
``Module.launch`` against the words the GPU wrote (tests/data/sm90_triton_sfu.npz, from
``python -m warpsim.validation.sfu_triton`` on an H200; 16 of its 64 rows kept)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import warpsim

DATA = Path(__file__).parent / "data" / "sm90_triton_sfu.npz"


def _load():
    z = np.load(DATA)
    return z, json.loads(bytes(z["meta"]).decode())


def _module(ptx: str) -> warpsim.Module:
    """The kernel as Triton wrote it (its cross-warp reductions shuffle registers that a
    predicated shared load left unwritten in other lanes; those values never reach the stored
    results, and the sanitizer follows each shuffled lane, so it reports nothing)."""
    return warpsim.Module(ptx)


def test_triton_softmax_matches_the_gpu_byte_for_byte():
    """ex2.approx.f32 (tl.exp) and div.full.f32 (num / den) on every element."""
    z, meta = _load()
    k = meta["softmax"]
    x = z["x"]
    rows, cols = x.shape
    assert "ex2.approx.f32" in k["ptx"] and "div.full.f32" in k["ptx"]
    out = _module(k["ptx"]).launch(
        k["name"], grid=rows, block=32 * k["num_warps"], shared_bytes=k["shared"],
        args=[np.zeros_like(x), x, np.int32(cols), np.int32(cols), np.int32(cols),
              np.zeros(1, np.uint8), np.zeros(1, np.uint8)])[0]
    assert out.tobytes() == z["softmax"].tobytes()


def test_triton_layernorm_matches_the_gpu_byte_for_byte():
    z, meta = _load()
    k = meta["layernorm"]
    x = z["x"]
    rows, cols = x.shape
    out = _module(k["ptx"]).launch(
        k["name"], grid=rows, block=32 * k["num_warps"], shared_bytes=k["shared"],
        args=[x, np.zeros_like(x), z["w"], z["b"], np.int32(cols), np.int32(cols),
              np.float32(meta["eps"]), np.zeros(1, np.uint8), np.zeros(1, np.uint8)])[1]
    assert out.tobytes() == z["layernorm"].tobytes()
