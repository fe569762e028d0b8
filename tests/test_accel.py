"""The optional compiled mma kernel (warpsim.tensorcore.accel) gives the NumPy engine's D words
bit for bit: every form and target it runs, random register bits, normal values, wide exponent
ranges, cancellation, overflow and underflow, special values; both register layouts; every f16
and bf16 code.  Skips where no C compiler is available.

WARPSIM_ACCEL_EXAMPLES=N runs N warps per form and distribution (default 24 in CI)."""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import warpsim
from warpsim.facts import formats
from warpsim.tensorcore import accel
from warpsim.tensorcore.execute import _compute, mma, numpy_words_kernel, resolve, words_kernel
from warpsim.tensorcore.packing import pack, pack_bits, unpack_bits

needs = pytest.mark.skipif(not accel.available(), reason=f"compiled kernel unavailable: {accel.reason}")

WARPS = int(os.environ.get("WARPSIM_ACCEL_EXAMPLES", "0")) or 24
FULL = "WARPSIM_ACCEL_EXAMPLES" in os.environ  # every form on every target; CI: a sample
ARCHS = ("sm_70", "sm_75", "sm_80", "sm_89", "sm_90", "sm_100a", "sm_120a")


def _cases():
    out = []
    for i in warpsim.instructions():
        if not i.text.startswith("mma.sync"):
            continue
        for arch in ARCHS:
            try:
                ins = resolve(i.text, arch)
            except Exception:  # noqa: BLE001 - not legal on that target
                continue
            if accel.supports(ins, arch):
                out.append((ins.text, arch))
    if FULL:
        return out
    # CI: every target's model on the m16n8k16 f16 and m16n8k32 e4m3 forms (f32 and f16 D:
    # native and lowered sequences), and each other (A type, B type, D type, K) on the first
    # target that has it
    seen, pick = set(), []
    for text, arch in out:
        ins = resolve(text, arch)
        key = (ins.atype, ins.btype, ins.dtype, ins.k)
        every = key in (("f16", "f16", "f32", 16), ("f16", "f16", "f16", 16), ("e4m3", "e4m3", "f32", 32),
                        ("e4m3", "e4m3", "f16", 32))
        if every or key not in seen:
            seen.add(key)
            pick.append((text, arch))
    return pick


CASES = _cases()


def _reference(ins, arch, a, b, c):
    """D words (n, 32, regs) from the NumPy engine alone."""
    with np.errstate(all="ignore"):
        if ins.dtype == "s32":
            codes = [unpack_bits(ins, op, w) for op, w in zip("abc", (a, b, c))]
            return pack_bits(ins, "d", _compute(ins, arch, *codes))
        k = numpy_words_kernel(ins, arch)
        return k(*(np.ascontiguousarray(w.transpose(2, 1, 0)) for w in (a, b, c))).transpose(2, 1, 0)


def _values(rng, t, shape, dist):
    f = formats.get_format(t)
    if f.kind in ("int", "uint"):
        lo, hi = int(f.min_value), int(f.max_finite) if f.kind != "uint" else (1 << f.bits) - 1
        v = rng.integers(lo, hi + 1, shape)
        if dist == "extreme":
            v = rng.choice([lo, hi, 0, -1 if lo < 0 else 1], shape)
        return v
    big = float(f.max_finite)
    if dist == "normal":
        v = rng.standard_normal(shape)
    elif dist == "wide":  # every binade: underflow to subnormals, overflow to Inf in D
        e = rng.integers(int(np.log2(f.min_subnormal)) - 1, int(np.log2(big)) + 1, shape)
        v = rng.choice([-1.0, 1.0], shape) * rng.uniform(1, 2, shape) * 2.0 ** e
    elif dist == "cancel":  # big terms that cancel, small ones left; exact zeros
        v = rng.choice([big / 2, -big / 2, 1.0, -1.0, 2.0 ** -10, 0.0, -0.0], shape)
    else:  # "special": NaN, Inf, zeros of both signs among normal values
        v = rng.standard_normal(shape)
        pick = rng.integers(0, 10, shape)
        v = np.where(pick == 0, np.inf, np.where(pick == 1, -np.inf, np.where(pick == 2, -0.0, v)))
        v = np.where(pick == 3, np.nan if f.has_nan else 0.0, v)
    with np.errstate(all="ignore"):
        return v if f.has_inf else np.clip(v, -big, big)


def _words(rng, ins, n, dist):
    if dist == "bits":
        return [rng.integers(0, 2 ** 32, (n, 32, ins.regs[op]), dtype=np.uint64).astype(np.uint32)
                for op in "abc"]
    out = []
    for op in "abc":
        v = _values(rng, ins.type_of(op), (n,) + ins.matrix_shape(op), dist)
        with np.errstate(all="ignore"):
            out.append(pack(ins, op, v))
    return out


@needs
@pytest.mark.parametrize("text,arch", CASES)
def test_compiled_equals_numpy(text, arch):
    ins = resolve(text, arch)
    rng = np.random.default_rng(abs(hash((text, arch))) % 2 ** 32)
    dists = ["bits", "normal", "extreme"] if ins.dtype == "s32" else ["bits", "normal", "wide", "cancel", "special"]
    for dist in dists:
        a, b, c = _words(rng, ins, WARPS, dist)
        keep = [x.copy() for x in (a, b, c)]
        want = _reference(ins, arch, a, b, c)
        got = mma(ins, a, b, c, arch=arch)  # warp-first words, all warps in one call
        bad = np.argwhere(got != want)
        assert not bad.size, f"{dist}: {len(bad)} words differ, first at {tuple(bad[0])}: " \
                             f"{int(got[tuple(bad[0])]):#x} != {int(want[tuple(bad[0])]):#x}"
        assert all((x == y).all() for x, y in zip((a, b, c), keep))  # inputs untouched
        if ins.dtype != "s32":  # batch-last words, as the PTX machine passes them
            bl = words_kernel(ins, arch)(*(w.transpose(2, 1, 0) for w in (a, b, c)))
            assert (bl.transpose(2, 1, 0) == want).all(), dist


@needs
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_every_16bit_code(t):
    """Each of the 65,536 codes of A meets random B and C: decoding (subnormals, Inf, NaN
    payloads) and the arithmetic on it agree."""
    text = f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32"
    ins = resolve(text, "sm_90")
    rng = np.random.default_rng(7)
    codes = np.arange(1 << 16, dtype=np.uint32)
    per = ins.regs["a"] * 32 * 2
    a = (codes[0::2] | (codes[1::2] << 16)).reshape(-1, 32, ins.regs["a"])  # 256 warps
    n = a.shape[0]
    assert n * per == 1 << 16
    b = pack(ins, "b", rng.standard_normal((n,) + ins.matrix_shape("b")))
    c = pack(ins, "c", rng.standard_normal((n,) + ins.matrix_shape("c")))
    assert (mma(ins, a, b, c, arch="sm_90") == _reference(ins, "sm_90", a, b, c)).all()


@needs
def test_broadcast_and_strides():
    """Broadcast batch dimensions (zero strides) and non-contiguous views give the same words."""
    ins = resolve("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90")
    rng = np.random.default_rng(3)
    a = pack(ins, "a", rng.standard_normal((1, 16, 16)))
    b = pack(ins, "b", rng.standard_normal((5, 16, 8)))
    c = pack(ins, "c", rng.standard_normal((2, 1, 16, 8)))
    got = mma(ins, a, b[::-1], c, arch="sm_90")
    ab, bb, cb = (np.ascontiguousarray(np.broadcast_to(x, (2, 5, 32, x.shape[-1])).reshape(10, 32, -1))
                  for x in (a, b[::-1], c))
    assert got.shape == (2, 5, 32, 4)
    assert (got.reshape(10, 32, 4) == _reference(ins, "sm_90", ab, bb, cb)).all()


def test_turned_off_or_unbuildable(tmp_path):
    """WARPSIM_ACCEL=0, or a compiler that fails: everything stays on NumPy, with the reason
    (the library is looked up once per process, so each case runs in a fresh one)."""
    import subprocess
    import sys

    code = ("import numpy as np, warpsim.tensorcore.accel as a\n"
            "from warpsim.tensorcore.execute import mma\n"
            "t = 'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32'\n"
            "w = [np.full((2, 32, r), x, np.uint32) for r, x in ((4, 0x3C003C00), (2, 0x3C003C00), (4, 0x3F800000))]\n"
            "d = mma(t, *w, arch='sm_90')\n"
            "print(a.available(), hex(int(d[0, 0, 0])), a.reason)")
    for env in ({"WARPSIM_ACCEL": "0"}, {"CC": "false", "WARPSIM_CACHE_DIR": str(tmp_path)}):
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, cwd=os.getcwd(),
                             capture_output=True, text=True, check=True).stdout
        # A, B all 1.0 (f16), C 1.0 (f32): D = 16 + 1 = 17.0, 0x41880000
        assert out.startswith("False 0x41880000"), out
        assert ("WARPSIM_ACCEL" in out) if "WARPSIM_ACCEL" in env else ("not built" in out)


@needs
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(CASES), st.integers(0, 2 ** 32 - 1), st.integers(1, 6),
       st.sampled_from(["bits", "normal", "wide", "cancel", "special"]))
def test_compiled_equals_numpy_property(case, seed, warps, dist):
    text, arch = case
    ins = resolve(text, arch)
    if ins.dtype == "s32" and dist not in ("bits", "normal"):
        dist = "extreme"
    a, b, c = _words(np.random.default_rng(seed), ins, warps, dist)
    assert (mma(ins, a, b, c, arch=arch) == _reference(ins, arch, a, b, c)).all()


@needs
@pytest.mark.parametrize("t", ["e4m3", "e5m2"])
def test_every_fp8_code(t):
    """Each of the 256 codes of A (NaN, Inf, subnormals, both zeros) meets random B and C, on the
    native (sm_89) and lowered (sm_90) sequences, f32 and f16 D: the fp8 decoder and the steps
    agree with the NumPy engine."""
    rng = np.random.default_rng(11)
    for arch in ("sm_89", "sm_90"):
        for d in ("f32", "f16"):
            ins = resolve(f"mma.sync.aligned.m16n8k32.row.col.{d}.{t}.{t}.{d}", arch)
            per = ins.regs["a"] * 32 * 4  # codes per warp (4 per register)
            codes = np.concatenate([rng.permutation(256) for _ in range(per // 256 * 4)]).astype(np.uint32)
            q = codes.reshape(-1, 4)
            a = (q[:, 0] | (q[:, 1] << 8) | (q[:, 2] << 16) | (q[:, 3] << 24)).reshape(-1, 32, ins.regs["a"])
            n = a.shape[0]
            b = pack(ins, "b", rng.standard_normal((n,) + ins.matrix_shape("b")))
            c = pack(ins, "c", rng.standard_normal((n,) + ins.matrix_shape("c")))
            assert (mma(ins, a, b, c, arch=arch) == _reference(ins, arch, a, b, c)).all(), (arch, d)


# the kernel built without AVX-512: the plain C path of CPUs without it (GCC/Clang on x86-64)
PORTABLE = [("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90"),
            ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "sm_90"),
            ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "sm_80"),
            ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_90"),
            ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "sm_90"),
            ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_89"),
            ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_90"),
            ("mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e4m3.f16", "sm_90"),
            ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "sm_90")]


@needs
@pytest.mark.skipif(not platform.machine().lower() in ("x86_64", "amd64"), reason="x86-64 flag")
def test_portable_path(tmp_path):
    """The kernel compiled with -mno-avx512f (so without the permute, register-step and fp8
    decoder paths) gives the NumPy engine's words: random bits, normal, every binade,
    cancellation and special values (a fresh process: the library is chosen once)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "sys.path.insert(0, 'tests')\n"
            "import test_accel as t\n"
            "from warpsim.tensorcore import accel\n"
            "from warpsim.tensorcore.execute import mma, resolve\n"
            "assert accel.available(), accel.reason\n"
            "rng = np.random.default_rng(5)\n"
            "for text, arch in t.PORTABLE:\n"
            "    ins = resolve(text, arch)\n"
            "    for dist in ('bits', 'normal', 'wide', 'cancel', 'special'):\n"
            "        if ins.dtype == 's32' and dist not in ('bits', 'normal'): dist = 'extreme'\n"
            "        a, b, c = t._words(rng, ins, 6, dist)\n"
            "        ok = (mma(ins, a, b, c, arch=arch) == t._reference(ins, arch, a, b, c)).all()\n"
            "        assert ok, (text, arch, dist)\n"
            "print('same words', accel.library()._name)\n")
    cc = os.environ.get("CC", "cc")
    env = {**os.environ, "CC": f"{cc} -mno-avx512f", "WARPSIM_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=os.getcwd(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("same words") and str(tmp_path) in r.stdout, r.stdout


NARROW = [("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "sm_90"),
          ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_90"),
          ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_80"),
          ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90"),
          ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "sm_80"),
          ("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16", "sm_90")]


@needs
@settings(max_examples=40, deadline=None)
@example(NARROW[0], 1, -48, -49, 2, -140, 0.2).via("the scale clamp's edge: products near 2**-100, C tiny")
@example(NARROW[1], 2, 40, 45, 3, 127, 0.1).via("binary32 overflow to Inf from C near its largest")
@given(st.sampled_from(NARROW), st.integers(0, 2 ** 32 - 1), st.integers(-60, 60), st.integers(-60, 60),
       st.integers(0, 12), st.integers(-150, 127), st.floats(0, 0.5))
def test_binary32_products_boundary(case, seed, ea, eb, spread, ec, zeros):
    """The binary32 product path (A's and B's exponents within [-50, 50]) against the NumPy
    engine around its bounds: A and B exponents near +-50 (some warps in, some out), C from
    binary32 subnormals to near its largest (steps' common exponent from C; the scale clamp
    where all products are zero; sums overflowing binary32), zeros in A and B."""
    text, arch = case
    ins = resolve(text, arch)
    rng = np.random.default_rng(seed)
    n = 4
    vals = []
    for op, e0 in (("a", ea), ("b", eb), ("c", ec)):
        f = formats.get_format(ins.type_of(op))
        shape = (n,) + ins.matrix_shape(op)
        e = np.clip(e0 + rng.integers(-spread, spread + 1, shape), -160, 127)
        v = rng.choice([-1.0, 1.0], shape) * rng.uniform(1, 2, shape) * 2.0 ** e
        if op != "c":
            v = np.where(rng.random(shape) < zeros, 0.0, v)
        elif rng.random() < 0.3:
            v = np.zeros(shape)
        with np.errstate(all="ignore"):
            vals.append(pack(ins, op, np.clip(v, -float(f.max_finite), float(f.max_finite))))
    a, b, c = vals
    assert (mma(ins, a, b, c, arch=arch) == _reference(ins, arch, a, b, c)).all()


@needs
@pytest.mark.skipif(not platform.machine().lower() in ("x86_64", "amd64"), reason="x86-64 MXCSR")
def test_flush_to_zero_caller():
    """A caller that leaves flush-to-zero and denormals-are-zero on (as libraries built with
    -ffast-math do) gets the same words: the kernel sets the IEEE default for itself and puts
    the caller's mode back (MXCSR set through glibc's fesetenv; a fresh process)."""
    same_words_under_ftz(
        "test_accel",
        "rng = np.random.default_rng(9)\n"
        "cases = []\n"
        "for text, arch in t.PORTABLE[:8]:\n"
        "    ins = resolve(text, arch)\n"
        "    for dist in ('wide', 'cancel', 'bits'):\n"
        "        a, b, c = t._words(rng, ins, 8, dist)\n"
        "        cases.append((ins, arch, a, b, c, t._reference(ins, arch, a, b, c)))\n",
        "bad = [(i.text, arch) for i, arch, a, b, c, want in cases if not (mma(i, a, b, c, arch=arch) == want).all()]\n")


def same_words_under_ftz(module: str, cases: str, bad: str) -> None:
    """In a fresh process: run ``cases`` (code with ``t`` = test module ``module``, ``mma`` and
    ``resolve``), switch flush-to-zero and denormals-are-zero on through glibc's fesetenv, run
    ``bad`` (code that sets ``bad`` to the cases whose words differ), put the mode back; assert
    no case differed and the caller's mode was still on after the kernels."""
    import subprocess
    import sys

    code = ("import ctypes, ctypes.util, sys, numpy as np\n"
            "sys.path.insert(0, 'tests')\n"
            f"import {module} as t\n"
            "from warpsim.tensorcore.execute import mma, resolve\n"
            "libm = ctypes.CDLL(ctypes.util.find_library('m'))\n"
            + cases +
            "env = ctypes.create_string_buffer(32)\n"
            "assert libm.fegetenv(env) == 0\n"
            "ftz = ctypes.create_string_buffer(env.raw[:28] + (0x1F80 | 0x8040).to_bytes(4, 'little'), 32)\n"
            "assert libm.fesetenv(ftz) == 0\n"  # x86-64 fenv_t: MXCSR at byte 28; FTZ and DAZ on
            "assert np.float32(1e-40) * np.float32(1.0) == 0.0  # FTZ/DAZ in effect\n"
            + bad +
            "still = np.float32(1e-40) * np.float32(1.0) == 0.0\n"
            "libm.fesetenv(env)\n"
            "assert not bad, bad\n"
            "assert still, 'the caller mode was not restored'\n"
            "print('same words')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=os.getcwd(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("same words"), r.stdout
