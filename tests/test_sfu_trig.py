"""The AVX-512 kernels of MUFU.SIN/COS (warpsim/ptx/_sfu_trig.c, models from warpsim/ptx/_sfu_trig.py):
the unit's datapath and the register model with 2-bit codes each equal the measured table on every
key, and the PTX forms equal the NumPy reference.  Builds without AVX-512, or without VBMI/VNNI:
tests/test_sfu_accel.py::test_portable_build_and_caller_flush_to_zero (every unary form)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from warpsim.ptx import _sfu_trig, sfu, sfu_accel
from warpsim.validation.alu_compare import all_ops, decode

needs = pytest.mark.skipif(not sfu_accel.available(), reason=f"compiled SFU path unavailable: {sfu_accel.reason}")


def _lib():
    lib = sfu_accel.library()
    if not lib.warpsim_sfu_trig_available():
        pytest.skip("this build has no AVX-512 trig kernel")
    p = ctypes.c_void_p
    lib.warpsim_sfu_trig.argtypes = [ctypes.c_int, ctypes.c_int, p, p, p, ctypes.c_int64]
    return lib


@pytest.fixture(scope="module")
def models():
    """{kernel: (turns, cosine, words) -> the kernel's words}: the one sfu_accel uses, and the
    register model with its 2-bit codes (which builds without VBMI/VNNI run)."""
    lib = _lib()
    out = {}
    c = sfu_accel.compact("sin")
    out["datapath" if c.trig.datapath else "codes"] = c.trig
    if "codes" not in out:
        out["codes"] = _sfu_trig.Model(lib, sfu.table("sin"), codes=True)

    def run(m):
        def f(turns, cosine, w):
            y = np.empty_like(w)
            assert lib.warpsim_sfu_trig(turns, cosine, m.ptr, w.ctypes.data, y.ctypes.data, w.size) == 0
            return y
        return f
    return {k: run(m) for k, m in out.items()}, out


@needs
@pytest.mark.parametrize("kernel", ["datapath", "codes"])
def test_every_key(models, kernel):
    """Every 25-bit fixed-point angle k through each kernel (bare MUFU.SIN/COS on t = +-k 2**-25,
    exact in f32 for k < 2**24; cos reads k + 2**23, so keys >= 2**24 too): the measured word, or
    its negation on the second half turn."""
    runs, _ = models
    if kernel not in runs:
        pytest.skip("this build has no datapath kernel (AVX-512 VBMI + VNNI)")
    run = runs[kernel]
    S = sfu.table("sin")
    k = np.arange(1 << 24, dtype=np.uint32)
    t = (k.astype(np.float32) * np.float32(2.0**-25)).view(np.uint32)
    sign = np.uint32(0x80000000)
    assert np.array_equal(run(0, 0, t), S)
    assert np.array_equal(run(0, 0, t | sign), S ^ sign)
    kc = k + np.uint32(1 << 23)
    want = S[kc & np.uint32((1 << 24) - 1)] ^ ((kc >> np.uint32(24)) << np.uint32(31))
    assert np.array_equal(run(0, 1, t), want)
    assert np.array_equal(run(0, 1, t | sign), want)


@needs
def test_models(models):
    """The datapath (where built) fits every segment but 0, which reads its 2**17 words; the
    register model leaves few keys to the dense table (code -2), all in segment 0, and most of
    its codes are 0."""
    _, m = models
    if "datapath" in m:
        d = m["datapath"]
        assert d.datapath and d.codes is None and d.dense0.size == 1 << 17
        assert (np.frombuffer(d.m.c1x, np.int32)[1:] >> 24).tolist() == [
            int((sfu.table("sin")[s << 17:(s + 1) << 17] >> np.uint32(23)).min()) - 150 for s in range(1, 64)]
    c = m["codes"]
    assert not c.datapath
    sh = (30 - 2 * np.arange(16, dtype=np.uint32)).astype(np.uint32)
    code = ((c.codes[:, None] >> sh) & np.uint32(3)).reshape(-1)
    assert code.size == 1 << 23
    assert c.nrare == int((code == 2).sum()) < 20000
    assert np.flatnonzero(code == 2).max() < c.small.size <= 1 << 17
    assert (code == 0).mean() > 0.85


@needs
@pytest.mark.parametrize("form", ["sin.approx.f32", "cos.approx.ftz.f32"])
def test_ptx_forms_equal_numpy(form):
    """The PTX forms (FMUL.RZ by 1/2pi first) on normal angles (as the benchmark's), multiples of
    quarter turns and their neighbours, huge, tiny, subnormal, Inf and NaN."""
    _lib()
    rng = np.random.default_rng(21)
    q = np.float32(np.pi / 2) * np.arange(-64, 65, dtype=np.float32)
    x = np.concatenate([(rng.standard_normal(40000) * 4).astype(np.float32), q, np.nextafter(q, np.float32(9)),
                        np.nextafter(q, np.float32(-9)), np.float32([1e30, -3e38, 1e-30, 1e-44, -1e-45, 0, -0.0])])
    w = np.concatenate([x.view(np.uint32), np.uint32([0x7F800000, 0xFF800000, 0x7FC00000, 0xFF812345]),
                        rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)])
    spec, typ, mods = decode(form, all_ops())
    y = spec.fn([w], type=typ, **mods)
    with sfu_accel.disabled(), np.errstate(all="ignore"):
        r = spec.fn([w], type=typ, **mods)
    assert y.dtype == r.dtype and np.array_equal(y, r), np.flatnonzero(y != r)[:5]
