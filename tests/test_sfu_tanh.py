"""MUFU.TANH as its datapath (warpsim.ptx.sfu_tanh) and the AVX-512 kernel of tanh.approx.f32
(_sfu_tanh.c) against the measured table: every key, both signs, the ignored low bits, the
specials; the truncated squarer against its bit-level definition; the portable build (no
AVX-512) keeps the compact-table path.  WARPSIM_SFU_EXHAUSTIVE=1 also runs the NumPy datapath
on every key (a few seconds)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warpsim.ptx import sfu, sfu_accel, sfu_tanh

EXHAUSTIVE = bool(os.environ.get("WARPSIM_SFU_EXHAUSTIVE"))
FORM = "tanh.approx.f32"


def _model():
    if not sfu_accel.available():
        pytest.skip(f"compiled SFU path unavailable: {sfu_accel.reason}")
    m = sfu_accel.compact("tanh").tanh
    if m is None:
        pytest.skip("the tanh kernel needs AVX-512 F/DQ/VBMI/VNNI")
    return m


@pytest.fixture(scope="module")
def coef():
    return sfu_tanh.derive()


def _table_words() -> tuple[np.ndarray, np.ndarray]:
    xs = sfu_tanh.key_inputs()
    return xs, sfu.table("tanh")[: xs.size]


def test_kernel_every_key_both_signs_and_ignored_bits():
    """Every one of the 6,684,672 keys through the compiled form: +x, -x, and x with random
    values in the low significand bits the unit ignores (the shift of its binade)."""
    _model()
    xs, w = _table_words()
    assert np.array_equal(sfu_accel.run(FORM, xs), w)
    assert np.array_equal(sfu_accel.run(FORM, xs | np.uint32(0x80000000)), w | np.uint32(0x80000000))
    d = sfu.table("tanh")[-(sfu.TANH_E1 - sfu.TANH_E0 + 3):]
    sh = d[(xs >> np.uint32(23)) - np.uint32(sfu.TANH_E0 - 1)] >> np.uint32(27)
    junk = np.random.default_rng(3).integers(0, 1 << 6, xs.size, dtype=np.uint32) & ((np.uint32(1) << sh) - np.uint32(1))
    assert np.array_equal(sfu_accel.run(FORM, xs | junk), w)


def test_kernel_specials_and_lengths():
    """Zeros, subnormals, the 2**-8 and 8 edges, Inf, NaN payloads, every exponent; every
    length 0..40 (the masked tail) and a 0-d operand, against NumPy."""
    _model()
    sp = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x3B7FFFFF, 0x3B800000, 0xBB800000, 0xBB7FFFFF, 0x40FFFFFF,
                   0x41000000, 0xC1000000, 0xC0FFFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00000,
                   0x7FFFFFFF, 0x3F800000, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32)
    rng = np.random.default_rng(7)
    e = np.arange(512, dtype=np.uint32) << np.uint32(23)
    m = np.concatenate([[0, 1, 0x7FFFFF, 0x400000], rng.integers(0, 1 << 23, 28)]).astype(np.uint32)
    w = np.concatenate([sp, (e[:, None] | m[None, :]).reshape(-1)])
    assert np.array_equal(sfu_accel.run(FORM, w), sfu.tanh(w))
    for n in range(41):
        assert np.array_equal(sfu_accel.run(FORM, w[:n]), sfu.tanh(w[:n])), n
    y = sfu_accel.run(FORM, np.uint32(0x3F000000))
    assert y.shape == () and int(y) == int(sfu.tanh(np.uint32(0x3F000000)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=70))
def test_kernel_random_words(words):
    _model()
    w = np.array(words, np.uint32)
    assert np.array_equal(sfu_accel.run(FORM, w), sfu.tanh(w))


def _folded_squarer(x: int) -> int:
    """X*X less every partial product of weight below 2**19 in the folded squarer array:
    pairs 2 x_i x_j 2**(i+j) (i < j) and squares x_i 2**(2i), bit by bit."""
    b = [(x >> i) & 1 for i in range(17)]
    total = sum(b[i] << (2 * i) for i in range(17) if 2 * i >= 19)
    return total + sum((b[i] & b[j]) << (i + j + 1) for i in range(17) for j in range(i + 1, 17) if i + j + 1 >= 19)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 17) - 1))
def test_truncated_square_is_the_truncated_squarer(x):
    assert int(sfu.truncated_square(np.array([x]))[0]) << 18 == _folded_squarer(x)
    assert _folded_squarer(x) <= x * x < _folded_squarer(x) + (1 << 23)


def test_datapath_constants(coef):
    """51 segments of integers (C1 >= 0 >= C2: an increasing, concave tanh); the 1.0 segment."""
    n = sfu_tanh.key_inputs().size >> sfu_tanh.SEG
    assert n == 51
    assert (coef["c1"][:n] > 0).all() and (coef["c2"][:n] < 0).all() and (coef["c0"][:n] >= 1 << 23).all()
    assert coef["c0"][n] == 1 << 23 and coef["c1"][n] == coef["c2"][n] == 0


def test_numpy_datapath_equals_the_table(coef):
    """The datapath in NumPy (no compiled code) gives the measured word: a sample of keys in CI
    (every 61st and every segment's first and last ones), every key with WARPSIM_SFU_EXHAUSTIVE."""
    xs, w = _table_words()
    if not EXHAUSTIVE:
        L = 1 << sfu_tanh.SEG
        edges = np.concatenate([np.arange(0, xs.size, L), np.arange(L - 1, xs.size, L)])
        pick = np.union1d(np.arange(0, xs.size, 61), edges)
        xs, w = xs[pick], w[pick]
    assert np.array_equal(sfu_tanh.evaluate(coef, xs), w)
    assert np.array_equal(sfu_tanh.evaluate(coef, xs | np.uint32(0x80000000)), w | np.uint32(0x80000000))


def test_portable_build_keeps_the_table_path(tmp_path):
    """Compiled without AVX-512 (-mno-avx512f): no tanh kernel, the compact table answers, the
    same words (a fresh process and cache: the library is chosen once)."""
    if not sfu_accel.available() or sys.platform != "linux" or os.uname().machine not in ("x86_64", "amd64"):
        pytest.skip("x86-64 compiled path only")
    code = ("import numpy as np\nfrom warpsim.ptx import sfu, sfu_accel as a\n"
            "assert a.available(), a.reason\n"
            "assert not a.library().warpsim_sfu_tanh_available() and a.compact('tanh').tanh is None\n"
            "w = np.random.default_rng(1).integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)\n"
            "w[:3] = [0x3F000000, 0x41000000, 0x3B800000]\n"
            "print('same', np.array_equal(a.run('tanh.approx.f32', w), sfu.tanh(w)))\n")
    cc = os.environ.get("CC", "cc")
    env = {**os.environ, "CC": f"{cc} -mno-avx512f", "WARPSIM_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=os.getcwd(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "same True", r.stdout
