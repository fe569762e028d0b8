"""The compiled SFU path (warpsim.ptx.sfu_accel) equals the NumPy reference bit for bit.

CI: every compact table against the measured table on every key, and every form on a
stratified sample (every sign and exponent, mantissa edges, NaN payloads, subnormals, the
rescaling thresholds; every 16-bit pattern).  WARPSIM_SFU_EXHAUSTIVE=1: every f32 pattern for
every unary f32 form (and the bare MUFU functions), 2**26 operand pairs per div form and 2**26
f64 patterns per f64 form (hours on one core; python -m warpsim.validation.sfu_fast runs the
same on many)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warpsim.ptx import sfu, sfu_accel
from warpsim.validation.alu_compare import all_ops, decode

needs = pytest.mark.skipif(not sfu_accel.available(), reason=f"compiled SFU path unavailable: {sfu_accel.reason}")
OPS = all_ops()
EXHAUSTIVE = bool(os.environ.get("WARPSIM_SFU_EXHAUSTIVE"))
UNARY_F32 = [f for f in sfu_accel.FORMS if f.endswith(".f32") and not f.startswith("div")]
DIV = [f for f in sfu_accel.FORMS if f.startswith("div")]


def both(form: str, *srcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(compiled, NumPy reference) answers of ``form``."""
    spec, typ, mods = decode(form, OPS)
    y = spec.fn(list(srcs), type=typ, **mods)
    with sfu_accel.disabled(), np.errstate(all="ignore"):
        r = spec.fn(list(srcs), type=typ, **mods)
    return y, r


def assert_same(form, y, r, srcs):
    assert y.dtype == r.dtype and y.shape == r.shape, form
    bad = np.flatnonzero(y.reshape(-1) != r.reshape(-1))
    assert bad.size == 0, (form, bad.size, [hex(int(s.reshape(-1)[bad[0]])) for s in srcs],
                           hex(int(y.reshape(-1)[bad[0]])), hex(int(r.reshape(-1)[bad[0]])))


def stratified_f32(rng) -> np.ndarray:
    """Every sign and exponent field with 40 mantissas (0, 1, all ones, its neighbours,
    random), NaN payloads, the thresholds the ptxas sequences test (+-126, +-64, 2**+-126)."""
    se = np.arange(512, dtype=np.uint32) << np.uint32(23)
    mant = np.concatenate([np.array([0, 1, 2, 0x400000, 0x7FFFFE, 0x7FFFFF], np.uint32),
                           rng.integers(0, 1 << 23, 34, dtype=np.uint32)])
    w = (se[:, None] | mant[None, :]).reshape(-1)
    edges = np.array([-126.0, -126.00001, -125.99999, 64.0, -64.0, 63.99999, 2.0**-126, 2.0**126,
                      -(2.0**126), 3.0e38, 1.0, -1.0, 0.5, 0.75], np.float32).view(np.uint32)
    return np.concatenate([w, edges, rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)])


@needs
@pytest.mark.parametrize("name", ["rcp", "rsq", "sqrt", "ex2", "lg2", "tanh", "sin", "rcp64h", "rsq64h"])
def test_compact_tables_hold_every_measured_word(name):
    c = sfu_accel.compact(name)
    t = sfu.table(name)
    if name == "tanh":
        t = t[:-(sfu.TANH_E1 - sfu.TANH_E0 + 3)]
    assert c.n == t.size and np.array_equal(c.expand(), t)
    assert c.nbytes < t.nbytes // 3                     # what makes the lookups cache-friendly
    if c.corr is not None:                               # corrections: 2-bit codes, 3 = "not so"
        codes = (c.corr[:, None] >> (2 * np.arange(16, dtype=np.uint32))) & np.uint32(3)
        assert (codes.reshape(-1)[:c.n] < 3).mean() > 0.99
    if c.band is not None:                               # the AVX-512 band model: every key's word
        assert np.array_equal(c.band.words(), t[: c.band.n])


@needs
@pytest.mark.parametrize("form", ["rcp.approx.ftz.f64", "rsqrt.approx.ftz.f64", "rsqrt.approx.f64"])
def test_f64_forms_every_key(form):
    """Every key of MUFU.RCP64H / RSQ64H (20 mantissa bits of the high word; both exponent
    parities) through the compiled form, random low words, against the NumPy reference."""
    rng = np.random.default_rng(12)
    m = np.arange(1 << 20, dtype=np.uint64)
    hi = np.concatenate([m | np.uint64(1023 << 20), m | np.uint64(1024 << 20), m | np.uint64(1 << 20)])
    w = (hi << np.uint64(32)) | rng.integers(0, 1 << 32, hi.size, dtype=np.uint64)
    y, r = both(form, w)
    assert_same(form, y, r, [w])


@needs
@pytest.mark.parametrize("form", UNARY_F32)
def test_unary_f32_forms_equal_numpy(form):
    rng = np.random.default_rng(abs(hash(form)) % 2**32)
    w = stratified_f32(rng)
    y, r = both(form, w)
    assert_same(form, y, r, [w])
    v = w[:4096].reshape(-1, 32)[:, ::-1]                # strided 2-d registers
    y, r = both(form, v)
    assert_same(form, y, r, [v])
    y, r = both(form, w[7])                              # one 0-d word
    assert_same(form, y, r, [w[7]])


@needs
@pytest.mark.parametrize("form", DIV)
def test_div_forms_equal_numpy(form):
    rng = np.random.default_rng(7)
    w = stratified_f32(rng)
    # quotients near 2**-126, where FMUL.FTZ and FMUL part
    bn = (rng.uniform(1, 2, 20000) * 2.0 ** rng.integers(-100, 100, 20000)).astype(np.float32)
    an = (bn.astype(np.float64) * 2.0**-126 * (1 + rng.uniform(-2e-7, 2e-7, bn.size))
          * rng.choice([-1, 1], bn.size)).astype(np.float32)
    a = np.concatenate([w, rng.permutation(w), np.full(w.size, 0x3F800000, np.uint32), an.view(np.uint32)])
    b = np.concatenate([rng.permutation(w), w, w, bn.view(np.uint32)])
    y, r = both(form, a, b)
    assert_same(form, y, r, [a, b])


@needs
@pytest.mark.parametrize("form", [f for f in sfu_accel.FORMS if "16" in f])
def test_16_bit_forms_equal_numpy(form):
    h = np.arange(1 << 16, dtype=np.uint32)
    if form.endswith("x2"):
        w = (h | (np.random.default_rng(3).permutation(h) << np.uint32(16))).astype(np.uint32)
    else:
        w = h.astype(np.uint16)
    y, r = both(form, w)
    assert_same(form, y, r, [w])


@needs
@pytest.mark.parametrize("form", [f for f in sfu_accel.FORMS if f.endswith(".f64")])
def test_f64_forms_equal_numpy(form):
    rng = np.random.default_rng(11)
    hi = ((np.arange(4096, dtype=np.uint64) << np.uint64(20))[:, None]
          | rng.integers(0, 1 << 20, (1, 8), dtype=np.uint64)).reshape(-1)
    lo = rng.integers(0, 1 << 32, hi.size, dtype=np.uint64)
    w = np.concatenate([(hi << np.uint64(32)) | lo, hi << np.uint64(32),
                        rng.integers(0, 1 << 63, 20000, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
                        np.abs(rng.standard_normal(20000)).view(np.uint64)])
    y, r = both(form, w)
    assert_same(form, y, r, [w])


@needs
@pytest.mark.parametrize("name", list(sfu_accel.MUFU))
def test_bare_mufu_functions_equal_sfu(name):
    w = stratified_f32(np.random.default_rng(5))
    with np.errstate(all="ignore"):
        assert np.array_equal(sfu_accel.mufu(name, w), getattr(sfu, name)(w))


def test_turned_off_or_unbuildable(tmp_path):
    """WARPSIM_ACCEL=0, or a compiler that fails: the forms run on NumPy, same answers."""
    code = ("import numpy as np\nfrom warpsim.ptx import sfu_accel as a\n"
            "from warpsim.validation.alu_compare import all_ops, decode\n"
            "s, t, m = decode('rcp.approx.ftz.f32', all_ops())\n"
            "y = s.fn([np.array([0x40000000, 0x3F800000], np.uint32)], type=t, **m)\n"
            "print(a.available(), [hex(int(v)) for v in y], a.reason)")
    for env in ({"WARPSIM_ACCEL": "0"}, {"CC": "false", "WARPSIM_CACHE_DIR": str(tmp_path)}):
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, cwd=os.getcwd(),
                             capture_output=True, text=True, check=True).stdout
        assert out.startswith("False ['0x3f000000', '0x3f800000']"), out
        assert ("WARPSIM_ACCEL" in out) if "WARPSIM_ACCEL" in env else ("not built" in out)


@needs
@pytest.mark.skipif(not EXHAUSTIVE, reason="WARPSIM_SFU_EXHAUSTIVE=1: every f32 pattern (long)")
@pytest.mark.parametrize("form", __import__("warpsim.validation.sfu_fast", fromlist=["forms"]).forms())
def test_exhaustive(form):
    from warpsim.validation.sfu_fast import check

    assert check(form, 0, 1) == 0


@needs
def test_ex2_fast_path_every_key():
    """The compiled ex2 fast pass (per-segment quadratic of the positive half, the negative half
    read through the ones' complement of the fraction, 2-bit codes) against the measured table
    on every one of its 2**24 keys, through operands +-(1 + k * 2**-23)."""
    t = sfu.table("ex2")
    k = np.arange(1 << 23, dtype=np.uint32)
    x = np.uint32(0x3F800000) | k
    c = sfu_accel.compact("ex2")
    if c.dp is not None:                                 # the unit's datapath (AVX-512 VBMI + VNNI)
        assert np.array_equal(c.dp.words(), t[: 1 << 23])
    elif c.band is not None:                             # the AVX-512 band model
        assert np.array_equal(c.band.words(), t[: 1 << 23])
    else:                                                # the portable fast pass: 2-bit codes
        codes = (c.corr[:, None] >> (2 * np.arange(16, dtype=np.uint32))) & np.uint32(3)
        assert (codes.reshape(-1)[: 1 << 23] < 3).all()  # no key leaves the fast pass
    for form in ("ex2.approx.ftz.f32", "ex2.approx.f32"):
        assert np.array_equal(sfu_accel.run(form, x), t[: 1 << 23] + np.uint32(1 << 23))
        assert np.array_equal(sfu_accel.run(form, x | np.uint32(0x80000000)), t[1 << 23:] - np.uint32(1 << 23))


@needs
def test_lg2_datapath_every_key():
    """The compiled lg2 kernel (_sfu_lg2.c: the unit's interpolator, P * 2**36 = floor((C0 + C1 X
    + C2 S) / 4), C0..C2 found at first use) against the NumPy reference on every one of the
    2**24 keys, at the exponents where the result keeps every bit of the table word (x in
    [0.5, 2)) and where it keeps fewer (x = 2**+-1 times 1.M; 2**+-100 with
    WARPSIM_SFU_EXHAUSTIVE)."""
    c = sfu_accel.compact("lg2")
    if not sfu_accel.library().warpsim_sfu_lg2_available():
        pytest.skip("no AVX-512 VBMI/VNNI: lg2 runs the portable fast pass")
    assert c.aux.size == 9 * 128 // 4                               # the nine byte planes: no per-key data
    k = np.arange(1 << 23, dtype=np.uint32)
    for e in (127, 126, 128, 125) + ((227, 27) if EXHAUSTIVE else ()):
        x = (np.uint32(e) << np.uint32(23)) | k
        r = sfu.lg2(x)
        for form in ("lg2.approx.ftz.f32", "lg2.approx.f32")[:2 if e in (127, 126) else 1]:
            y = sfu_accel.run(form, x)
            assert np.array_equal(y, r), (form, e, hex(int(x[np.flatnonzero(y != r)[0]])))
    assert np.array_equal(sfu_accel.mufu("lg2", x), r)


_CHILD = ("import ctypes, ctypes.util, sys, numpy as np\n"
          "sys.path.insert(0, 'tests')\n"
          "import test_sfu_accel as t\n"
          "from warpsim.ptx import sfu_accel\n"
          "assert sfu_accel.available(), sfu_accel.reason\n"
          "print('bands', sfu_accel.bands_available(), 'datapath', sfu_accel.datapath_available())\n"
          "if {ftz}:\n"
          "    libm = ctypes.CDLL(ctypes.util.find_library('m'))\n"
          "    env = ctypes.create_string_buffer(32)\n"
          "    assert libm.fegetenv(env) == 0\n"       # x86-64 fenv_t: MXCSR at byte 28; FTZ and DAZ on
          "    ftz = ctypes.create_string_buffer(env.raw[:28] + (0x1F80 | 0x8040).to_bytes(4, 'little'), 32)\n"
          "    assert libm.fesetenv(ftz) == 0\n"
          "    assert np.float32(1e-40) * np.float32(1.0) == 0.0\n"
          "for f in t.UNARY_F32:\n"
          "    y = t.sfu_accel.run(f, t.stratified_f32(np.random.default_rng(3)))\n"
          "    x = np.arange(1 << 23, dtype=np.uint32) | np.uint32(0x3F800000)\n"   # every ex2 key, both signs
          "    ys = [t.sfu_accel.run(f, x), t.sfu_accel.run(f, x | np.uint32(0x80000000))] if f.startswith('ex2') else []\n"
          "    if {ftz}:\n"
          "        assert np.float32(1e-40) * np.float32(1.0) == 0.0, 'the caller mode was not restored'\n"
          "        libm.fesetenv(env)\n"
          "    with sfu_accel.disabled(), np.errstate(all='ignore'):\n"
          "        r = t.sfu_accel.run(f, t.stratified_f32(np.random.default_rng(3)))\n"
          "        assert r is None\n"
          "        s, ty, m = t.decode(f, t.OPS)\n"
          "        r = s.fn([t.stratified_f32(np.random.default_rng(3))], type=ty, **m)\n"
          "        rs = [s.fn([x], type=ty, **m), s.fn([x | np.uint32(0x80000000)], type=ty, **m)] if f.startswith('ex2') else ys\n"
          "    assert np.array_equal(y, r), f\n"
          "    assert all(np.array_equal(a, b) for a, b in zip(ys, rs)), f\n"
          "    if {ftz}:\n"
          "        libm.fesetenv(ftz)\n"
          "w = t.stratified_f32(np.random.default_rng(4)); v = w[::-1].copy()\n"
          "for f in t.DIV:\n"   # the div forms (rcp's band kernels) in the same mode
          "    if {ftz}:\n"
          "        libm.fesetenv(ftz)\n"
          "    y = t.sfu_accel.run(f, w, v)\n"
          "    if {ftz}:\n"
          "        assert np.float32(1e-40) * np.float32(1.0) == 0.0, 'the caller mode was not restored'\n"
          "        libm.fesetenv(env)\n"
          "    with sfu_accel.disabled(), np.errstate(all='ignore'):\n"
          "        s, ty, m = t.decode(f, t.OPS)\n"
          "        assert np.array_equal(y, s.fn([w, v], type=ty, **m)), f\n"
          "for f in ('rcp.approx.ftz.f64', 'rsqrt.approx.ftz.f64', 'rsqrt.approx.f64'):\n"
          "    t.test_f64_forms_every_key(f)\n"
          "print('same words')\n")


@needs
@pytest.mark.parametrize("variant", ["portable", "band", "caller_ftz"])
def test_portable_build_and_caller_flush_to_zero(variant, tmp_path):
    """In a fresh process, every unary f32 form (a stratified sample; every ex2 key of both signs)
    and every RCP64H/RSQ64H key of the f64 forms give the NumPy reference's words: on a library
    built without AVX-512 (no band kernels: the portable fast passes), on one built without
    VBMI and VNNI (the band kernels, no datapath kernel, 128-segment tables by dword permutes),
    and on the default library called with flush-to-zero and denormals-are-zero set (the
    kernels pin round-to-nearest without them, and restore the mode)."""
    if variant == "caller_ftz" and (sys.platform != "linux" or os.uname().machine != "x86_64"):
        pytest.skip("glibc fenv_t layout of x86-64")
    if variant == "band" and not sfu_accel.bands_available():
        pytest.skip("no AVX-512 here")
    env = dict(os.environ)
    if variant == "portable":
        env.update(CC="cc -mno-avx512f", WARPSIM_CACHE_DIR=str(tmp_path))
    if variant == "band":
        env.update(CC="cc -mno-avx512vbmi -mno-avx512vnni", WARPSIM_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _CHILD.format(ftz=variant == "caller_ftz")], env=env, cwd=os.getcwd(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[-1] == "same words", r.stdout
    if variant == "portable":
        assert r.stdout.startswith("bands False"), r.stdout
    if variant == "band":
        assert r.stdout.startswith("bands True datapath False"), r.stdout


def _rs_band_built() -> bool:
    return sfu_accel.available() and bool(sfu_accel.library().warpsim_sfu_rs_simd())   # with the ex2 bands


@needs
@pytest.mark.skipif(not _rs_band_built(), reason="the AVX-512 band kernels of rcp/rsq/sqrt are not built here")
@pytest.mark.parametrize("name", ["rcp", "rsq", "sqrt"])
def test_rs_band_every_key(name):
    """The band kernels of rcp/rsq/sqrt (_sfu_rs.c: a quadratic per interpolation segment, its
    certainty band, one bit per uncertain key) against the measured table on every key: the bare
    MUFU function and the f32 forms on operands 1 + k 2**-23 (and 2 + k 2**-22: the second half
    of rsq/sqrt), negated, and the div forms with a = +-1 (the quotient is the word)."""
    t = sfu.table(name)
    band = sfu_accel.compact(name).rs
    assert np.array_equal(band.words(), t)             # the derivation: model + bits = table
    assert 0.01 < band.uncertain < 0.15                 # the share of keys read through their bit
    k = np.arange(1 << 23, dtype=np.uint32)
    x = np.uint32(0x3F800000) | k
    sign = np.uint32(0x80000000)
    if name != "rcp":                                   # key p << 23 | M, p = the exponent field's low bit, inverted
        x = np.concatenate([x, np.uint32(0x40000000) | k])
    assert np.array_equal(sfu_accel.mufu(name, x), t)
    if name == "rcp":
        assert np.array_equal(sfu_accel.mufu(name, x | sign), t | sign)
        for form in ("rcp.approx.ftz.f32", "rcp.approx.f32"):
            assert np.array_equal(sfu_accel.run(form, x), t)
        for form in DIV:
            one = np.full(x.size, 0x3F800000, np.uint32)
            assert np.array_equal(sfu_accel.run(form, one, x), t)
            assert np.array_equal(sfu_accel.run(form, one | sign, x), t | sign)
    else:
        assert (sfu_accel.mufu(name, x | sign) == np.uint32(0x7FFFFFFF)).all()
        op = "rsqrt" if name == "rsq" else "sqrt"
        for form in (f"{op}.approx.ftz.f32", f"{op}.approx.f32"):
            assert np.array_equal(sfu_accel.run(form, x), t)


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@needs
def test_the_kernels_this_cpu_can_run_are_the_ones_used():
    """Where the CPU has AVX-512 with VBMI and VNNI, ex2, lg2, sin/cos and tanh.f32 run on the
    unit's datapath and rcp/rsqrt/sqrt/div and the f64 forms on band kernels (a kernel lost from
    the build would otherwise fall back silently: every other test would still pass)."""
    flags = _cpu_flags()
    k = sfu_accel.kernels()
    assert set(k) == {"ex2", "lg2", "rcp rsqrt sqrt div", "sin cos", "tanh.f32", "f64", "16-bit"}
    if {"avx512f", "avx512bw", "avx512dq", "avx512vbmi", "avx512_vnni"} <= flags:
        assert k == {"ex2": "datapath", "lg2": "datapath", "rcp rsqrt sqrt div": "band", "sin cos": "datapath",
                     "tanh.f32": "datapath", "f64": "band", "16-bit": "tables"}, k
        assert sfu_accel.compact("ex2").dp is not None and sfu_accel.compact("rcp64h").band is not None
    elif "avx512f" not in flags and flags:
        assert set(k.values()) <= {"compact tables", "tables"}, k


@settings(max_examples=4, deadline=None)
@given(st.integers(1 << 16, 1 << 18), st.integers(-(1 << 12), 1 << 12), st.integers(0, 1 << 40))
def test_fit_datapath_recovers_a_datapath(c1, c2, c0):
    """Words made by the datapath itself are fitted by constants that give every one of them
    back; the inputs are left as they were."""
    X = np.arange(1 << 17, dtype=np.int64)
    N = (c0 + c1 * X + c2 * sfu.truncated_square(X)) >> 17
    before = N.copy()
    C0, C1, C2 = sfu.fit_datapath(N, N, 17)
    assert np.array_equal((C0 + C1 * X + C2 * sfu.truncated_square(X)) >> 17, N)
    assert np.array_equal(N, before)


def test_model_constructors_refuse_bad_input():
    w = np.zeros(1 << 17, np.int64)
    with pytest.raises(ValueError, match="one length"):
        sfu.fit_datapath(w, w[:-1], 17)
    with pytest.raises(ValueError, match="integer"):
        sfu.fit_datapath(w.astype(np.float64), w.astype(np.float64), 17)
    if sfu_accel.bands_available():
        with pytest.raises(ValueError, match="nseg"):
            sfu_accel.Band(np.zeros(3 << 17, np.uint32), 3, 17)
        with pytest.raises(ValueError, match="nseg"):
            sfu_accel.Band(np.zeros(1000, np.uint32), 64, 17)
    with pytest.raises(ValueError, match="64 segments"):
        sfu_accel.Datapath(np.zeros(1000, np.uint32), 0x3F800000)
