"""Per-architecture numerics facts: which targets share a lowering, model lookup, sources."""

import numpy as np
import pytest

from warpsim import PtxError
from warpsim.tensorcore.execute import mma, resolve
from warpsim.tensorcore.numerics import MODELS, model_for
from warpsim.validation.inputs import make_inputs

M8N8K4 = ["mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32",
          "mma.sync.aligned.m8n8k4.col.row.f16.f16.f16.f16",
          "mma.sync.aligned.m8n8k4.row.row.f32.f16.f16.f16"]


@pytest.mark.parametrize("text", M8N8K4)
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_100a", "sm_120a"])
def test_m8n8k4_f16_is_the_same_ffma_sequence_from_sm_80_on(text, arch):
    # ptxas emits the same FMUL/FFMA/FADD sequence on these targets as on sm_90 (SASS, read
    # with docs/sass/sass_expr.py), so the results must be identical word for word.
    ins = resolve(text, "sm_90")
    for dist in ("normal", "narrow", "special", "tiny"):
        x = make_inputs(ins, dist, 8, 11)
        want = mma(text, x["a"], x["b"], x["c"], arch="sm_90")
        np.testing.assert_array_equal(mma(text, x["a"], x["b"], x["c"], arch=arch), want)


def test_sm_75_m8n8k4_runs_on_the_tensor_core_not_the_ffma_sequence():
    text = M8N8K4[0]
    x = make_inputs(resolve(text, "sm_90"), "narrow", 16, 3)
    assert not np.array_equal(mma(text, x["a"], x["b"], x["c"], arch="sm_75"),
                              mma(text, x["a"], x["b"], x["c"], arch="sm_90"))


@pytest.mark.parametrize("text", [
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
    "mma.sync.aligned.m16n8k16.row.col.f16.e5m2.e5m2.f16",
    "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32",
])
def test_sm_100a_fp8_is_lowered_as_on_sm_90(text):
    ins = resolve(text, "sm_100a")
    plain = text.replace(".kind::f8f6f4", "")
    for dist in ("normal", "wide", "special"):
        x = make_inputs(ins, dist, 8, 5)
        want = mma(plain, x["a"], x["b"], x["c"], arch="sm_90")
        np.testing.assert_array_equal(mma(text, x["a"], x["b"], x["c"], arch="sm_100a"), want)


def test_sm_120a_fp8_is_native_and_differs_from_the_lowering():
    text = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    x = make_inputs(resolve(text, "sm_90"), "narrow", 16, 9)
    assert not np.array_equal(mma(text, x["a"], x["b"], x["c"], arch="sm_120a"),
                              mma(text, x["a"], x["b"], x["c"], arch="sm_90"))


def test_every_target_maps_to_a_model_that_names_its_source():
    from warpsim.facts.isa import ARCHS

    for name in ARCHS:
        m = model_for(name)
        assert m.source and m.verified and m.name in MODELS
    assert model_for("sm_86") is MODELS["sm_80"] and model_for("sm_121a") is MODELS["sm_120a"]
    assert "hardware here" in MODELS["sm_90"].verified


def test_unknown_architecture_lists_the_known_ones():
    with pytest.raises(PtxError, match=r"unknown architecture 'sm_95'.*sm_90a.*exact"):
        model_for("sm_95")
