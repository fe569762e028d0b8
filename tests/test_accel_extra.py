"""The compiled kernel's f64 and block-scaled forms (warpsim.tensorcore.accel_extra) give the
NumPy engine's D words bit for bit: every f64 shape and rounding mode, every block-scaled kind,
scale type and selector, dense and sparse; random register bits, normal values, integers that
cancel exactly, subnormals, Inf, NaN payloads and -0; warp-first, batch-last, broadcast and
strided words.  Skips where no C compiler is available.

WARPSIM_ACCEL_EXAMPLES=N runs N warps per case (default 4 in CI); WARPSIM_ACCEL_PORTABLE=1 also
builds the library without AVX-512 (in a subprocess) and runs the f64 cases on it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from warpsim.tensorcore import accel, accel_extra
from warpsim.tensorcore.execute import mma, numpy_words_kernel, resolve, words_kernel

from test_accel import same_words_under_ftz

needs = pytest.mark.skipif(not accel.available(), reason=f"compiled kernel unavailable: {accel.reason}")

WARPS = int(os.environ.get("WARPSIM_ACCEL_EXAMPLES", "0")) or 4
F64 = [f"mma.sync.aligned.{s}.row.col{r}.f64.f64.f64.f64"
       for s in ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16") for r in ("", ".rz", ".rm", ".rp")]
F64_DISTS = ("bits", "normal", "special", "int", "tiny")


def _f64_words(rng, ins, n, dist):
    """Register words (n, 32, regs) uint64 of A, B, C for one distribution of binary64 values."""
    out = []
    for op in "abc":
        sh = (n, 32, ins.regs[op])
        if dist == "bits":
            w = rng.integers(0, 2 ** 64, sh, dtype=np.uint64)
        elif dist == "normal":
            w = rng.standard_normal(sh).view(np.uint64)
        elif dist == "int":  # small integers: exact cancellations, zeros of both signs
            w = (rng.integers(-3, 4, sh) * rng.choice([1.0, -1.0], sh)).view(np.uint64)
        elif dist == "tiny":  # subnormal and near-underflow products, huge B: both ends
            v = (rng.choice([1.0, -1.0, 0.5, 3.0, -0.0], sh) * 2.0 ** rng.integers(-1074, -1000, sh)
                 if op != "b" else rng.choice([1.0, -1.0, 2.0 ** -30, 2.0 ** 60, 2.0 ** 1000], sh))
            w = v.view(np.uint64)
        else:  # "special": Inf, zeros, NaNs with random payloads and signs, subnormals, any binade
            with np.errstate(over="ignore"):
                v = rng.standard_normal(sh) * 2.0 ** rng.integers(-1074, 1024, sh)
            pick = rng.integers(0, 12, sh)
            v = np.select([pick == 0, pick == 1, pick == 2, pick == 3], [np.inf, -np.inf, -0.0, 0.0], v)
            w = v.view(np.uint64).copy()
            nan = pick == 4
            w[nan] = (rng.integers(0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, nan.sum(), dtype=np.uint64)
                      | (rng.integers(0, 2, nan.sum(), dtype=np.uint64) << np.uint64(63)))
            sub = pick == 5
            w[sub] = rng.integers(1, 2 ** 52, sub.sum(), dtype=np.uint64)
        out.append(np.ascontiguousarray(w))
    return out


def _reference(ins, arch, words):
    k = numpy_words_kernel(ins, arch)
    with np.errstate(all="ignore"):
        return k(*(np.ascontiguousarray(w.transpose(2, 1, 0)) for w in words)).transpose(2, 1, 0)


@needs
@pytest.mark.parametrize("text", F64)
def test_f64_compiled_equals_numpy(text):
    ins = resolve(text, "sm_90")
    assert accel_extra.supports(ins, "sm_90")
    rng = np.random.default_rng(sum(map(ord, text)))
    for dist in F64_DISTS:
        words = _f64_words(rng, ins, WARPS, dist)
        keep = [w.copy() for w in words]
        want = _reference(ins, "sm_90", words)
        got = mma(ins, *words, arch="sm_90")  # warp-first words: the permute path
        bad = np.argwhere(got != want)
        assert not bad.size, f"{dist}: {len(bad)} words differ, first at {tuple(bad[0])}: " \
                             f"{int(got[tuple(bad[0])]):#x} != {int(want[tuple(bad[0])]):#x}"
        assert all((x == y).all() for x, y in zip(words, keep))  # inputs untouched
        bl = words_kernel(ins, "sm_90")(*(w.transpose(2, 1, 0) for w in words))  # batch-last: gathers
        assert (bl.transpose(2, 1, 0) == want).all(), dist


@needs
def test_f64_broadcast_and_strides():
    """Broadcast batch dimensions (zero strides) and reversed views give the same words."""
    ins = resolve("mma.sync.aligned.m16n8k8.row.col.rm.f64.f64.f64.f64", "sm_90")
    rng = np.random.default_rng(5)
    a, b, c = _f64_words(rng, ins, 5, "special")
    got = mma(ins, a[:1], b[::-1], c[:2, None], arch="sm_90")
    full = [np.ascontiguousarray(np.broadcast_to(x, (2, 5, 32, x.shape[-1])).reshape(10, 32, -1))
            for x in (a[:1], b[::-1], c[:2, None])]
    assert got.shape == (2, 5, 32, 4)
    assert (got.reshape(10, 32, 4) == _reference(ins, "sm_90", full)).all()


def test_f64_known_values():
    """Hand-checked words: a NaN from B wins (quieted), then C's, then A's; Inf - Inf gives
    0xFFF8...; RM turns an exact cancellation into -0; RZ stops short of Inf."""
    ins = resolve("mma.sync.aligned.m8n8k4.row.col.rm.f64.f64.f64.f64", "sm_90")

    def run(text, a, b, c):
        i = resolve(text, "sm_90")
        w = [np.full((1, 32, i.regs[op]), np.float64(x).view(np.uint64), np.uint64) for op, x in zip("abc", (a, b, c))]
        return int(mma(i, *w, arch="sm_90")[0, 0, 0])

    snan_b = np.uint64(0x7FF0000000000123).view(np.float64)
    assert run(ins.text, 1.0, snan_b, 1.0) == 0x7FF8000000000123
    assert run(ins.text, np.inf, 1.0, -np.inf) == 0xFFF8000000000000
    assert run(ins.text, 1.0, 1.0, -4.0) == np.float64(-0.0).view(np.uint64)  # 4 * (1 * 1) - 4
    rz = "mma.sync.aligned.m8n8k4.row.col.rz.f64.f64.f64.f64"
    assert run(rz, 2.0 ** 1000, 2.0 ** 23, 0.0) == np.float64(np.finfo(np.float64).max).view(np.uint64)


@pytest.mark.skipif("WARPSIM_ACCEL_PORTABLE" not in os.environ, reason="opt-in: builds the library again")
def test_portable_build(tmp_path):
    """The plain C path (no AVX-512: scalar fma, no permutes, generic vectors) gives the same
    words: this file's other tests, in a fresh process on a library built with -mno-avx512f."""
    env = {**os.environ, "CC": "cc -mno-avx512f", "WARPSIM_CACHE_DIR": str(tmp_path)}
    env.pop("WARPSIM_ACCEL_PORTABLE")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", __file__],
                         env=env, cwd=os.getcwd(), capture_output=True, text=True)
    assert out.returncode == 0 and " passed" in out.stdout and "skipped" not in out.stdout.replace(
        "1 skipped", ""), out.stdout[-3000:]
    so = [str(p) for p in tmp_path.glob("*.so")]
    dis = subprocess.run(["objdump", "-d", *so], capture_output=True, text=True).stdout
    assert so and "zmm" not in dis  # no AVX-512 instruction in the library


def test_library_builds_where_a_compiler_is():
    """Where a C compiler is on PATH (and the accelerator is not turned off), the library builds:
    a C error must fail here, not skip every comparison above."""
    import shutil

    if os.environ.get("WARPSIM_ACCEL", "1").strip().lower() in ("0", "off", "no", "false"):
        pytest.skip("turned off by WARPSIM_ACCEL")
    cc = os.environ.get("CC", "cc").split()[0]
    if not shutil.which(cc):
        pytest.skip(f"no C compiler ({cc})")
    assert accel.available(), accel.reason


# --------------------------------------------------------------------------------------------
# Block scaling, dense and sparse
# --------------------------------------------------------------------------------------------

def _block_forms():
    import warpsim
    from warpsim.facts.isa import SELECTORS
    from warpsim.tensorcore import sparse

    dense = [i.text for i in warpsim.instructions() if i.block_scale and i.text.startswith("mma.sync")]
    sp = sorted({i.text for i in sparse.iter_sparse_instructions("sm_120a") if i.block_scale})
    out = []
    for text in dense + sp:
        ins = resolve(text, "sm_120a")
        if "WARPSIM_ACCEL_EXAMPLES" not in os.environ and ins.kind == "mxf8f6f4" \
                and ins.atype != ins.btype and (ins.atype, ins.btype) != ("e4m3", "e2m1"):
            continue  # CI: the diagonal type pairs and one mixed pair; every other kind whole
        out.append(text)
    return out, SELECTORS


BLOCK, _SEL = _block_forms()
BLOCK_DISTS = ("bits", "finite", "cancel", "extreme")


def _block_inputs(rng, ins, n, dist):
    from warpsim.facts import formats
    from warpsim.tensorcore import sparse
    from warpsim.tensorcore.packing import pack

    if dist == "bits":  # every code: NaN and Inf operands, NaN scales, NaN / Inf / subnormal C
        words = [rng.integers(0, 2 ** 32, (n, 32, ins.regs[op]), dtype=np.uint64).astype(np.uint32) for op in "abc"]
        scales = [rng.integers(0, 2 ** 32, (n, 32), dtype=np.uint64).astype(np.uint32) for _ in "ab"]
    else:
        words = []
        for op in "ab":
            t = formats._table(formats.get_format(ins.type_of(op)))
            fin = t[np.isfinite(t)]
            if dist == "cancel":  # largest, one and smallest magnitudes and zeros: exact cancellation
                fin = np.unique(np.concatenate([fin[np.abs(fin) == np.abs(fin).max()], [1.0, -1.0, 0.0, -0.0],
                                                fin[np.abs(fin) == np.abs(fin[fin != 0]).min()]]))
            words.append(pack(ins, op, rng.choice(fin, (n,) + ins.matrix_shape(op))))
        shape = (n,) + ins.matrix_shape("c")
        with np.errstate(over="ignore"):
            cv = rng.standard_normal(shape) * 2.0 ** rng.integers(-150, 129, shape)
        if dist == "cancel":
            cv = rng.choice([0.0, -0.0, 1.0, -1.0, 2.0 ** 40, -2.0 ** 40], shape)
        with np.errstate(over="ignore"):
            words.append(pack(ins, "c", cv.astype(np.float32)))
        if ins.stype == "ue4m3":  # finite scales (zero, subnormal, normal); "extreme": the ends
            lo, hi = (0x00, 0x7F) if dist != "extreme" else (0x70, 0x7F)
        else:
            lo, hi = (110, 145) if dist != "extreme" else (0, 255)
        codes = rng.integers(lo, hi, (2, n, 32, 4)) if dist != "extreme" else rng.choice([lo, lo + 1, hi - 1], (2, n, 32, 4))
        scales = list((codes.astype(np.uint32) << (8 * np.arange(4, dtype=np.uint32))).sum(-1).astype(np.uint32))
    kw = {}
    if ins.sparse:
        nib = rng.choice(sparse.valid_nibbles(ins), (n, 32, 8))
        kw = dict(metadata=(nib.astype(np.uint32) << (4 * np.arange(8, dtype=np.uint32))).sum(-1).astype(np.uint32),
                  selector=0)
    sel = _SEL[ins.scale_vec]
    kw.update(scale_a=scales[0], scale_b=scales[1], byte_id_a=int(rng.choice(sel[0])),
              thread_id_a=int(rng.choice(sel[1])), byte_id_b=int(rng.choice(sel[0])),
              thread_id_b=int(rng.choice(sel[2])))
    return words, kw


@needs
@pytest.mark.parametrize("text", BLOCK)
def test_block_scaled_compiled_equals_numpy(text, monkeypatch):
    ins = resolve(text, "sm_120a")
    assert accel_extra.supports(ins, "sm_120a")
    rng = np.random.default_rng(sum(map(ord, text)))
    for dist in BLOCK_DISTS:
        words, kw = _block_inputs(rng, ins, WARPS, dist)
        keep = [w.copy() for w in words]
        got = mma(ins, *words, arch="sm_120a", **kw)
        with monkeypatch.context() as mp:  # the NumPy engine alone
            mp.setattr(accel_extra, "supports", lambda *a: False)
            want = mma(ins, *words, arch="sm_120a", **kw)
        bad = np.argwhere(got != want)
        assert not bad.size, f"{dist}: {len(bad)} words differ, first at {tuple(bad[0])}: " \
                             f"{int(got[tuple(bad[0])]):#x} != {int(want[tuple(bad[0])]):#x}"
        assert all((x == y).all() for x, y in zip(words, keep))


@needs
def test_block_scaled_broadcast_and_strides(monkeypatch):
    """Shared scale words (broadcast), reversed views: the same words as contiguous copies."""
    ins = resolve("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
                  "sm_120a")
    rng = np.random.default_rng(11)
    (a, b, c), kw = _block_inputs(rng, ins, 6, "finite")
    kw["scale_a"] = kw["scale_a"][:1]
    got = mma(ins, a[::-1], b, c[::2, None], arch="sm_120a", **kw)
    assert got.shape == (3, 6, 32, 4)
    with monkeypatch.context() as mp:
        mp.setattr(accel_extra, "supports", lambda *a: False)
        want = mma(ins, np.ascontiguousarray(a[::-1]), b, np.ascontiguousarray(c[::2, None]), arch="sm_120a", **kw)
    assert (got == want).all()


@needs
def test_sparse_metadata_check():
    """The compiled metadata check agrees with sparse.check_metadata on every sparse form class
    and selector (valid words, and words with one undefined nibble somewhere), and mma raises
    the same MetadataError as before."""
    from warpsim.tensorcore import sparse

    texts = {}
    for i in sparse.iter_sparse_instructions():
        texts.setdefault((repr(sparse.metadata_class(i)), sparse.chunk_size(i), i.sparse, i.block_scale), i.text)
    rng = np.random.default_rng(2)
    for text in texts.values():
        ins = resolve(text, None)
        for sel in sparse.legal_selectors(ins):
            nib = rng.choice(sparse.valid_nibbles(ins), (6, 32, 8)).astype(np.uint32)
            good = (nib << (4 * np.arange(8, dtype=np.uint32))).sum(-1).astype(np.uint32)
            assert accel_extra.metadata_ok(ins, good, sel)
            sparse.check_metadata(ins, good, sel)
            bad_values = [v for v in range(16) if v not in sparse.valid_nibbles(ins)]
            lay = sparse.metadata_layout(ins, sel)
            for lane, j in list(zip(*np.nonzero(lay[..., 0] >= 0)))[::37] + list(zip(*np.nonzero(lay[..., 0] < 0)))[:3]:
                w = good.copy()
                w[4, lane] = (w[4, lane] & ~np.uint32(0xF << (4 * j))) | np.uint32(bad_values[0] << (4 * j))
                used = lay[lane, j, 0] >= 0
                assert accel_extra.metadata_ok(ins, w, sel) == (not used)
                if used:
                    with pytest.raises(sparse.MetadataError) as e1:
                        sparse.check_metadata(ins, w, sel)
                    assert str(e1.value).startswith("invalid sparsity metadata")
                    zeros = [np.zeros((6, 32, ins.regs[op]), np.uint64 if ins.register_bits(op) == 64 else np.uint32)
                             for op in "abc"]
                    kw = {}
                    if ins.block_scale:
                        kw = dict(scale_a=np.zeros((6, 32), np.uint32), scale_b=np.zeros((6, 32), np.uint32))
                    with pytest.raises(sparse.MetadataError) as e2:
                        mma(ins, *zeros, metadata=w, selector=sel, **kw)
                    assert str(e2.value) == str(e1.value)


@needs
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 MXCSR")
def test_flush_to_zero_caller():
    """A caller with flush-to-zero and denormals-are-zero on (MXCSR through glibc's fesetenv,
    in a fresh process) gets the same f64 and block-scaled words (subnormal operands, C and
    results) and its mode back."""
    same_words_under_ftz(
        "test_accel_extra",
        "rng = np.random.default_rng(4)\n"
        "cases = []\n"
        "for text in t.F64[:4] + t.F64[-4:]:\n"
        "    ins = resolve(text, 'sm_90')\n"
        "    for dist in ('special', 'tiny'):\n"
        "        w = t._f64_words(rng, ins, 4, dist)\n"
        "        cases.append((ins, w, {}, t._reference(ins, 'sm_90', w)))\n"
        "for text in t.BLOCK[:3] + t.BLOCK[-2:]:\n"
        "    ins = resolve(text, 'sm_120a')\n"
        "    for dist in ('finite', 'extreme'):\n"
        "        w, kw = t._block_inputs(rng, ins, 4, dist)\n"
        "        cases.append((ins, w, kw, mma(ins, *w, arch='sm_120a', **kw)))\n",
        "bad = [i.text for i, w, kw, want in cases\n"
        "       if not (mma(i, *w, arch=i.arch or ('sm_90' if i.atype == 'f64' else 'sm_120a'), **kw) == want).all()]\n")
