"""The special-function unit (warpsim.ptx.sfu) and the .approx forms built on it, bit-exact:
against stored hardware answers, special operands, properties the hardware has, lazy tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warpsim.ptx.ops import approx
from warpsim.ptx import sfu
from warpsim.validation.alu_compare import all_ops, decode

SAMPLES = Path(__file__).parent / "data" / "sm90_sfu_samples.npz"
OPS = all_ops()
SETTINGS = settings(max_examples=60, deadline=None)
NAN = 0x7FFFFFFF


def run(text: str, *srcs):
    spec, typ, mods = decode(text, OPS)
    return spec.fn([np.asarray(s) for s in srcs], type=typ, **mods)


def f32(*v) -> np.ndarray:
    return np.array(v, np.float32).view(np.uint32)


def bits(*v) -> np.ndarray:
    return np.array(v, np.uint32)


# ---------------------------------------------------------------------------------------------
# Against the GPU's stored answers (128 mantissas x every sign and exponent, special operands)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op,form", [("ex2", "ex2.approx.ftz.f32"), ("lg2", "lg2.approx.ftz.f32"),
                                     ("rcp", "rcp.approx.ftz.f32"), ("rsq", "rsqrt.approx.ftz.f32"),
                                     ("sqrt", "sqrt.approx.ftz.f32")])
def test_mufu_f32_equals_stored_hardware_answers(op, form):
    z = np.load(SAMPLES)
    w, hw = z["words"], z[op]
    assert w.size > 65000 and np.unique(w >> np.uint32(23)).size == 512  # every sign/exponent
    assert np.array_equal(getattr(sfu, op)(w), hw)
    assert np.array_equal(run(form, w), hw)
    v, h = w[:65536].reshape(-1, 32)[:, ::-1], hw[:65536].reshape(-1, 32)[:, ::-1]
    assert np.array_equal(run(form, v), h)  # strided 2-d registers


@pytest.mark.parametrize("op,form", [("rcp64", "rcp.approx.ftz.f64"), ("rsq64", "rsqrt.approx.ftz.f64")])
def test_mufu_f64_high_word_equals_stored_hardware_answers(op, form):
    z = np.load(SAMPLES)
    hi = z["f64_hi"].astype(np.uint64) << np.uint64(32)
    for lo in (0, 0xDEADBEEF):
        assert np.array_equal(run(form, hi | np.uint64(lo)), z[f"{op}_lo{lo:x}"])


TRIG = Path(__file__).parent / "data" / "sm90_sfu_trig_samples.npz"


def test_sin_cos_tanh_equal_stored_hardware_answers():
    """MUFU.TANH on 6,000 inputs of the binades it tabulates (both signs); MUFU.SIN/COS at
    8,000 angles each (t = k * 2**-25 turn, first quarter and slices up to t = 0.5)."""
    z = np.load(TRIG)
    assert np.array_equal(sfu.tanh(z["tanh_x"]), z["tanh_y"])
    assert np.array_equal(run("tanh.approx.f32", z["tanh_x"]), z["tanh_y"])
    assert np.array_equal(sfu.sin(z["sin_t"]), z["sin_y"]) and np.array_equal(sfu.cos(z["cos_t"]), z["cos_y"])
    neg = np.uint32(0x80000000)
    assert np.array_equal(sfu.sin(z["sin_t"] | neg), z["sin_y"] ^ neg)   # odd
    assert np.array_equal(sfu.cos(z["cos_t"] | neg), z["cos_y"])         # even


def test_sin_cos_read_the_turns_as_25_bit_fixed_point():
    t = np.arange(0x3D000000, 0x3D000000 + 4096, dtype=np.uint32)   # 2**-5 <= t: 28 fraction bits
    k = (t.view(np.float32).astype(np.float64) * 2.0**25).astype(np.int64)
    y = sfu.sin(t)
    assert np.array_equal(y[1:] != y[:-1], k[1:] != k[:-1])          # changes exactly with the key
    one = np.float32(1.0)
    f = (np.arange(1, 2048, dtype=np.float32) * np.float32(2.0**-11))
    for fn in (sfu.sin, sfu.cos):                                     # period: one turn
        assert np.array_equal(fn(f.view(np.uint32)), fn((f + one).view(np.uint32)))
        assert np.array_equal(fn(f.view(np.uint32)), fn((f + np.float32(2.0**12)).view(np.uint32)))


def test_sin_cos_tanh_special_operands():
    inf, ninf, z, nz = 0x7F800000, 0xFF800000, 0, 0x80000000
    x = bits(inf, ninf, z, nz, 0x00000001, 0x80000001, *NANS)
    for ftz in ("", ".ftz"):
        assert run(f"sin.approx{ftz}.f32", x).tolist() == [NAN, NAN, z, nz, z, nz] + [NAN] * 5
        assert run(f"cos.approx{ftz}.f32", x).tolist() == [NAN, NAN] + [0x3F800000] * 4 + [NAN] * 5
    assert run("tanh.approx.f32", x).tolist() == [0x3F800000, 0xBF800000, z, nz, 1, 0x80000001] + [NAN] * 5
    # an angle below 2**-25 turn reads as 0; 2**23 turns and beyond are whole turns
    assert run("sin.approx.f32", f32(1e-8, -1e-8, 2.0**30 * np.pi)).tolist() == [z, nz, z]
    assert run("cos.approx.f32", f32(1e-8, 2.0**30)).tolist() == [0x3F800000, 0x3F800000]
    # tanh: |x| < 2**-8 gives x, |x| >= 8 gives +-1
    assert run("tanh.approx.f32", f32(2.0**-8 * 0.999, -8.0, 1e30)).tolist() == [
        int(f32(2.0**-8 * 0.999)[0]), 0xBF800000, 0x3F800000]


@given(st.integers(0, (1 << 31) - 1))
@SETTINGS
def test_sin_odd_cos_even_tanh_odd(w):
    x, nx = bits(w), bits(w | 0x80000000)
    if w >= 0x7F800000:        # Inf and NaN: NaN (sin, cos), +-1 or NaN (tanh), in the special test
        return
    assert run("sin.approx.f32", nx)[0] == run("sin.approx.f32", x)[0] ^ 0x80000000
    assert run("cos.approx.f32", nx)[0] == run("cos.approx.f32", x)[0]
    y = run("tanh.approx.f32", x)[0]
    assert run("tanh.approx.f32", nx)[0] == y ^ 0x80000000 and y <= 0x3F800000


def _fast_vs_reference():
    """Each fast path and the table-rescaling formula it shortcuts (every lane the slow way)."""
    ex = lambda s: np.full_like(s, 0x3F800000)  # noqa: E731
    return {
        "rcp": (sfu.rcp, sfu._rcp_full),
        "rsq": (sfu.rsq, lambda b: sfu._rsq_sqrt_full(b, "rsq", -1, lambda s: s | sfu._INF, sfu._U32(0))),
        "sqrt": (sfu.sqrt, lambda b: sfu._rsq_sqrt_full(b, "sqrt", 1, lambda s: s, sfu._INF)),
        "ex2": (sfu.ex2, sfu._ex2_full), "lg2": (sfu.lg2, sfu._lg2_full),
        "tanh": (sfu.tanh, sfu._tanh_full),
    }, ex


@pytest.mark.parametrize("name", ["rcp", "rsq", "sqrt", "ex2", "lg2", "tanh"])
def test_fast_paths_equal_the_table_formulas(name):
    """A strided 2**20-word sample of all 32-bit patterns here; every pattern with
    WARPSIM_SFU_EXHAUSTIVE=1 (minutes per function)."""
    import os

    fast, full = _fast_vs_reference()[0][name]
    every = os.environ.get("WARPSIM_SFU_EXHAUSTIVE")
    step, chunk = (1, 1 << 22) if every else (4093, 1 << 20)
    for start in range(0, 1 << 32 if every else 1, chunk * step):
        b = (np.arange(chunk, dtype=np.uint64) * step + start).astype(np.uint32)
        with np.errstate(all="ignore"):
            assert np.array_equal(fast(b), full(b)), name


def test_tables_come_with_their_provenance():
    m = sfu.meta()
    assert m["device"]["name"].startswith("NVIDIA H") and m["device"]["driver"] >= 13000
    assert "sfu_collect" in m["harness"]
    meta = json.loads(bytes(np.load(SAMPLES)["meta"]).decode())
    assert meta["device"] == m["device"]


# ---------------------------------------------------------------------------------------------
# Special operands: NaN payloads, infinities, zeros, subnormals with and without .ftz
# ---------------------------------------------------------------------------------------------

NANS = bits(0x7F800001, 0x7FC00000, 0xFFFFFFFF, 0x7FA5A5A5, 0xFF812345)
F32_FORMS = [f"{op}.approx{ftz}.f32" for op in ("ex2", "lg2", "rcp", "rsqrt", "sqrt") for ftz in ("", ".ftz")]


@pytest.mark.parametrize("form", F32_FORMS)
def test_every_nan_payload_gives_the_canonical_nan(form):
    assert (run(form, NANS) == NAN).all()


@pytest.mark.parametrize("form", ["div.full.f32", "div.full.ftz.f32", "div.approx.f32", "div.approx.ftz.f32"])
def test_div_nan_operands_give_the_canonical_nan(form):
    one = f32(1.0, 1.0, 1.0, 1.0, 1.0)
    assert (run(form, NANS, one) == NAN).all() and (run(form, one, NANS) == NAN).all()


def test_infinities_and_zeros():
    inf, ninf, z, nz = 0x7F800000, 0xFF800000, 0, 0x80000000
    x = bits(inf, ninf, z, nz)
    for ftz in ("", ".ftz"):
        assert run(f"ex2.approx{ftz}.f32", x).tolist() == [inf, 0, 0x3F800000, 0x3F800000]
        assert run(f"lg2.approx{ftz}.f32", x).tolist() == [inf, NAN, ninf, ninf]
        assert run(f"rcp.approx{ftz}.f32", x).tolist() == [z, nz, inf, ninf]
        assert run(f"rsqrt.approx{ftz}.f32", x).tolist() == [z, NAN, inf, ninf]
        assert run(f"sqrt.approx{ftz}.f32", x).tolist() == [inf, NAN, z, nz]
        assert run(f"rsqrt.approx{ftz}.f32", f32(-1.0, -1e-30)).tolist() == [NAN, NAN]
    # rsqrt.approx.f64 (ptxas's slow path): +-0 -> +-Inf, negative -> default NaN, +Inf -> +0
    d = np.array([0.0, -0.0, -4.0, np.inf], np.float64).view(np.uint64)
    assert [hex(v) for v in run("rsqrt.approx.f64", d)] == [
        "0x7ff0000000000000", "0xfff0000000000000", "0xfff8000000000000", "0x0"]
    assert run("rsqrt.approx.f64", np.array([0x7FF4000000000001], np.uint64))[0] == 0x7FFC000000000001


def test_subnormals_with_and_without_ftz():
    # without .ftz ptxas rescales around MUFU, so subnormal operands and results survive
    assert run("ex2.approx.f32", f32(-140.0))[0] == 0x00000200          # 2**-140
    assert run("ex2.approx.ftz.f32", f32(-140.0))[0] == 0
    assert run("ex2.approx.f32", bits(0x00000001))[0] == 0x3F800000      # ex2(subnormal) = 1
    assert run("rcp.approx.f32", bits(0x00400000))[0] == 0x7F000000      # 1 / 2**-127
    assert run("rcp.approx.ftz.f32", bits(0x00400000))[0] == 0x7F800000
    assert run("rcp.approx.f32", f32(2.0**127))[0] == 0x00400000         # subnormal result
    assert run("rcp.approx.ftz.f32", f32(2.0**127))[0] == 0
    assert run("rsqrt.approx.f32", bits(0x00200000))[0] == f32(2.0**64)[0]
    assert run("rsqrt.approx.ftz.f32", bits(0x00200000))[0] == 0x7F800000
    assert run("sqrt.approx.f32", bits(0x00200000))[0] == f32(2.0**-64)[0]
    assert run("sqrt.approx.ftz.f32", bits(0x80200000))[0] == 0x80000000
    assert run("lg2.approx.f32", bits(0x00000200))[0] == f32(-140.0)[0]
    assert run("lg2.approx.ftz.f32", bits(0x00000200))[0] == 0xFF800000
    a, b = f32(1.0), f32(2.0**127)
    assert run("div.full.f32", a, b)[0] == 0x00400000                    # 2**-127 via 0.25 scaling
    assert run("div.full.ftz.f32", a, b)[0] == 0
    assert run("div.approx.f32", a, b)[0] == 0                           # |b| > 2**126: zero
    assert run("div.approx.f32", f32(2.0**-140), bits(0x00000400))[0] == f32(0.5)[0]  # both x 2**24


def test_ftz_multiply_judges_tininess_after_rounding():
    """FMUL.FTZ in div.*.ftz: the exact product rounded to 24 bits with an unbounded exponent
    decides: just below 2**-126 after that rounding -> zero of its sign; rounded up to 2**-126
    -> 2**-126 (words the random sweeps found on the H100 and the H200)."""
    assert run("div.full.ftz.f32", bits(0x3FE17F7D), bits(0xFEE17F7E))[0] == 0x80000000
    assert run("div.full.f32", bits(0x3FE17F7D), bits(0xFEE17F7E))[0] == 0x80800000
    assert run("div.full.ftz.f32", bits(0x06209C20), bits(0x45209C20))[0] == 0x00800000
    assert run("div.approx.ftz.f32", bits(0x8112A53B), bits(0xC012A53B))[0] == 0x00800000


# ---------------------------------------------------------------------------------------------
# Properties of the hardware (shown by the exhaustive runs) that the model must keep
# ---------------------------------------------------------------------------------------------

normal = st.integers(1, 254).flatmap(
    lambda e: st.integers(0, (1 << 23) - 1).map(lambda m: (e << 23) | m))


@SETTINGS
@given(normal, st.integers(-60, 60))
def test_rcp_rsq_sqrt_are_scale_equivariant(w, k2):
    """MUFU.RCP/RSQ/SQRT read only the significand (and exponent parity): scaling the operand by
    4**k scales the answer by 4**-k (4**k, 2**k) exactly, away from the range limits."""
    e = (w >> 23) - 127
    if not (-120 < e + 2 * k2 < 120 and -120 < e < 120):
        return
    x = bits(w)
    y = bits(w + (2 * k2 << 23))
    for fn, s in ((sfu.rcp, -2), (sfu.rsq, -1), (sfu.sqrt, 1)):
        assert int(fn(y)[0]) == int(fn(x)[0]) + ((s * k2) << 23)


@SETTINGS
@given(st.floats(-150, 128, width=32), st.floats(-150, 128, width=32))
def test_ex2_is_monotone(a, b):
    a, b = min(a, b), max(a, b)
    ya, yb = run("ex2.approx.f32", f32(a, b)).view(np.float32)
    assert ya <= yb


@SETTINGS
@given(st.floats(2.0**-149, 2.0**127, width=32), st.floats(2.0**-149, 2.0**127, width=32))
def test_lg2_and_rsqrt_are_monotone(a, b):
    a, b = min(a, b), max(a, b)
    la, lb = run("lg2.approx.f32", f32(a, b)).view(np.float32)
    ra, rb = run("rsqrt.approx.f32", f32(a, b)).view(np.float32)
    qa, qb = run("rcp.approx.f32", f32(a, b)).view(np.float32)
    assert la <= lb and ra >= rb and qa >= qb


@SETTINGS
@given(st.integers(0, (1 << 32) - 1))
def test_x2_forms_are_two_scalar_lookups(w):
    for x2, one in (("ex2.approx.f16x2", "ex2.approx.f16"), ("ex2.approx.ftz.bf16x2", "ex2.approx.ftz.bf16"),
                    ("tanh.approx.f16x2", "tanh.approx.f16"), ("tanh.approx.bf16x2", "tanh.approx.bf16")):
        y = int(run(x2, bits(w))[0])
        lo = int(run(one, np.array([w & 0xFFFF], np.uint16))[0])
        hi = int(run(one, np.array([w >> 16], np.uint16))[0])
        assert y == lo | (hi << 16)


def test_half_tables_known_values():
    assert run("ex2.approx.f16", np.array([0x0000, 0x3C00, 0xFC00], np.uint16)).tolist() == [0x3C00, 0x4000, 0]
    assert run("tanh.approx.bf16", np.array([0x0000, 0x8000, 0x7F80], np.uint16)).tolist() == [0, 0x8000, 0x3F80]


def test_inputs_are_not_modified():
    x = f32(-140.0, 1e-40, 3.0, np.nan)
    keep = x.copy()
    for form in F32_FORMS:
        run(form, x)
    run("div.full.f32", x, x[::-1].copy())
    assert np.array_equal(x, keep)


def test_exact_forms_have_zero_measured_distance():
    for form in approx.EXACT_FORMS:
        assert approx.MEASURED_ULPS[form] == (0, 1.0)
        spec, _, _ = decode(form, OPS)
        assert spec.exact, form
    for form in ("sin.approx.f32", "cos.approx.ftz.f32", "tanh.approx.f32"):
        assert form in approx.EXACT_FORMS and decode(form, OPS)[0].exact


# ---------------------------------------------------------------------------------------------
# Tables: lazy, small, decoded exactly
# ---------------------------------------------------------------------------------------------


def test_tables_load_lazily_and_import_is_cheap():
    """Importing the .approx family decodes no table and compiles nothing (the compiled path,
    warpsim.ptx.sfu_accel, builds on first use), and sfu's own import time is < 50 ms."""
    code = ("import warpsim.ptx.ops.approx, warpsim.ptx.sfu as s, warpsim.ptx.sfu_accel as a; "
            "print(len(s._cache), len(a._tabs), a._tried)")
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                       check=True, cwd=Path(__file__).parent.parent)
    assert r.stdout.split() == ["0", "0", "False"]
    line = [ln for ln in r.stderr.splitlines() if ln.rstrip().endswith("warpsim.ptx.sfu")][0]
    assert int(line.split("|")[0].split(":")[1]) < 50_000  # self time, microseconds


def test_table_decoding():
    path = Path(sfu.__file__).parent.parent / "data" / "sfu_sm90.npz"
    assert path.stat().st_size < 3 << 20
    t = sfu.table("rcp")
    assert t.dtype == np.uint32 and t.size == 1 << 23 and not t.flags.writeable
    assert t[0] == 0x3F800000 and (np.diff(t.astype(np.int64)) <= 0).all()  # 1/x decreasing
    assert sfu.table("rsq").size == sfu.table("sqrt").size == sfu.table("lg2").size == 1 << 24
    assert sfu.table("ex2").size == 1 << 24 and sfu.table("ex2_f16").dtype == np.uint16
    assert sfu.table("rcp") is t
