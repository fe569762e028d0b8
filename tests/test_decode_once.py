"""Decode once: text becomes an Instruction at the public boundary, and nothing below decodes it
again (issue 18).  The decoder's text entry point is counted while the layers run."""

from __future__ import annotations

import numpy as np
import pytest

import warpsim
from warpsim.tensorcore import decode as decoder
from warpsim.tensorcore import execute

DENSE = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
SPARSE = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
SCALED = ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X"
          ".f32.e2m1.e2m1.f32.ue8m0")


@pytest.fixture
def count(monkeypatch):
    calls = []
    real = decoder._decode_any

    def counting(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(decoder, "_decode_any", counting)
    execute._resolve_text.cache_clear()  # a cached decode would hide one made below the API
    return calls


@pytest.mark.parametrize("text,arch", [(DENSE, "sm_90"), (DENSE, "sm_80"), (DENSE, "exact"),
                                       (DENSE, "auto"), (SCALED, "sm_120a")])
def test_mma_on_an_instruction_never_decodes(text, arch, count):
    ins = warpsim.decode(text, arch=None)
    rng = np.random.default_rng(0)
    A = rng.standard_normal(ins.matrix_shape("a"))
    B = rng.standard_normal(ins.matrix_shape("b"))
    C = rng.standard_normal(ins.matrix_shape("c"))
    kw = {}
    if ins.block_scale:
        kw = dict(scale_A=np.ones((16, 2)), scale_B=np.ones((2, 8)))
    count.clear()
    a, b, c = (warpsim.pack(ins, op, M) for op, M in zip("abc", (A, B, C)))
    warpsim.layout(ins, "a")
    D = warpsim.matmul(ins, A, B, C, arch=arch, **kw)
    if not ins.block_scale:
        warpsim.mma(ins, a, b, c, arch=arch)
    warpsim.unpack(ins, "d", warpsim.pack(ins, "d", D))
    assert count == []


def test_sparse_helpers_on_an_instruction_never_decode(count):
    from warpsim.tensorcore import sparse

    ins = warpsim.decode(SPARSE, "sm_90")
    A = np.random.default_rng(1).standard_normal((16, 32))
    A.reshape(16, 8, 4)[..., 1:3] = 0
    count.clear()
    values, meta = sparse.compress(ins, A)
    sparse.metadata_layout(ins)
    sparse.check_selector(ins, 0)
    sparse.expand(ins, values, meta)
    assert count == []


def test_text_is_decoded_once_per_call(count):
    warpsim.decode(DENSE, "sm_89")
    assert len(count) == 1


def test_an_instruction_is_still_checked_against_the_target():
    ins = warpsim.decode(SCALED, arch=None)
    with pytest.raises(warpsim.PtxError, match="sm_90"):
        warpsim.matmul(ins, np.ones((16, 64)), np.ones((64, 8)), np.zeros((16, 8)), arch="sm_90",
                       scale_A=np.ones((16, 2)), scale_B=np.ones((2, 8)))
    assert warpsim.decode(ins, "sm_120a") is ins  # checked, returned as given
    assert warpsim.legal_archs(ins) == warpsim.legal_archs(SCALED)


def test_a_hand_built_instruction_is_checked_by_decoding_its_text():
    import dataclasses

    ins = dataclasses.replace(warpsim.decode(DENSE, None), reqs=None, versions=None)
    assert warpsim.legal_archs(ins) == warpsim.legal_archs(DENSE)
    with pytest.raises(warpsim.PtxError):
        warpsim.decode(ins, "sm_75")
