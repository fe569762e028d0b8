"""The AVX-512 kernel of MUFU.SIN/COS (warpsim/ptx/_sfu_trig.c, model from warpsim/ptx/_sfu_trig.py)
equals the measured table on every key, and the NumPy reference on the PTX forms; a build without
AVX-512 keeps _sfu.c's path with the same words."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from warpsim.ptx import sfu, sfu_accel
from warpsim.validation.alu_compare import all_ops, decode

needs = pytest.mark.skipif(not sfu_accel.available(), reason=f"compiled SFU path unavailable: {sfu_accel.reason}")


def _kernel():
    lib = sfu_accel.library()
    if not lib.warpsim_sfu_trig_available():
        pytest.skip("this build has no AVX-512 trig kernel")
    c = sfu_accel.compact("sin")
    assert getattr(c, "trig", None) is not None
    return c.trig


@needs
def test_every_key():
    """Every 25-bit fixed-point angle k through the kernel (bare MUFU.SIN/COS on t = +-k 2**-25,
    exact in f32 for k < 2**24; k >= 2**24 is the same lane arithmetic with the sign bit set by
    the key, as the cos lanes show): the measured word, or its negation on the second half turn."""
    _kernel()
    S = sfu.table("sin")
    k = np.arange(1 << 24, dtype=np.uint32)
    t = (k.astype(np.float32) * np.float32(2.0**-25)).view(np.uint32)
    sign = np.uint32(0x80000000)
    assert np.array_equal(sfu_accel.mufu("sin", t), S)
    assert np.array_equal(sfu_accel.mufu("sin", t | sign), S ^ sign)
    kc = k + np.uint32(1 << 23)                                  # cos: a quarter turn on
    want = S[kc & np.uint32((1 << 24) - 1)] ^ ((kc >> np.uint32(24)) << np.uint32(31))
    assert np.array_equal(sfu_accel.mufu("cos", t), want)
    assert np.array_equal(sfu_accel.mufu("cos", t | sign), want)


@needs
def test_model_is_mostly_within_one_word():
    """The register model leaves few keys to the dense table (code -2), all in segment 0; every
    other code is -1..1 and most are 0."""
    m = _kernel()
    sh = (30 - 2 * np.arange(16, dtype=np.uint32)).astype(np.uint32)
    code = ((m.codes[:, None] >> sh) & np.uint32(3)).reshape(-1)
    assert code.size == 1 << 23
    assert m.nrare == int((code == 2).sum()) < 20000
    assert np.flatnonzero(code == 2).max() < m.small.size <= 1 << 17
    assert (code == 0).mean() > 0.85


@needs
@pytest.mark.parametrize("form", ["sin.approx.f32", "cos.approx.ftz.f32"])
def test_ptx_forms_equal_numpy(form):
    """The PTX forms (FMUL.RZ by 1/2pi first) on normal angles (as the benchmark's), multiples of
    quarter turns and their neighbours, huge, tiny, subnormal, Inf and NaN."""
    _kernel()
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


@needs
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 flag")
def test_portable_build(tmp_path):
    """Built with -mno-avx512f: no trig kernel, _sfu.c's fast path gives the NumPy words."""
    code = ("import numpy as np\n"
            "from warpsim.ptx import sfu, sfu_accel as a\n"
            "assert a.available(), a.reason\n"
            "assert a.library().warpsim_sfu_trig_available() == 0\n"
            "rng = np.random.default_rng(3)\n"
            "w = np.concatenate([(rng.standard_normal(4000) * 4).astype(np.float32).view(np.uint32),\n"
            "                    rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)])\n"
            "for f in ('sin', 'cos'):\n"
            "    assert np.array_equal(a.mufu(f, w), getattr(sfu, f)(w)), f\n"
            "print('same words', a.library()._name)\n")
    cc = os.environ.get("CC", "cc")
    env = {**os.environ, "CC": f"{cc} -mno-avx512f", "WARPSIM_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=os.getcwd(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("same words") and str(tmp_path) in r.stdout, r.stdout
