"""The f64 and b1 forms on the register-words (batch-last) path give the same D words as the
matrix path they replaced (unpack -> compute -> pack), for every form, rounding mode and
input distribution, across a chunk boundary of the batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import warpsim
from warpsim.tensorcore.execute import CHUNK, _compute, batch_last_form, mma, resolve
from warpsim.tensorcore.packing import pack_bits, unpack_bits

FORMS = [i.text for i in warpsim.instructions() if i.atype in ("b1", "f64")]
WARPS = CHUNK + 44  # two chunks, the second partial


def _reference(ins, a, b, c, arch="sm_90"):
    codes = [unpack_bits(ins, op, w) for op, w in zip("abc", (a, b, c))]
    with np.errstate(all="ignore"):
        return pack_bits(ins, "d", _compute(ins, arch, *codes))


def _f64_words(rng, shape, dist):
    if dist == "normal":
        v = rng.standard_normal(shape)
    elif dist == "wide":  # exponents over the whole range: overflow, underflow, subnormal sums
        v = rng.standard_normal(shape) * 2.0 ** rng.integers(-1074, 1000, shape)
    elif dist == "cancel":  # large terms that cancel, small ones left
        v = rng.choice([1e300, -1e300, 1.0, -1.0, 2.0 ** -1060, 0.0, -0.0], shape)
    elif dist == "special":  # NaN payloads, infinities, zeros among normal values
        v = rng.standard_normal(shape)
        pick = rng.integers(0, 8, shape)
        v = np.where(pick == 0, np.inf, np.where(pick == 1, -np.inf, np.where(pick == 2, -0.0, v)))
        w = v.view(np.uint64).copy()
        nan = pick == 3
        w[nan] = np.uint64(0x7FF0000000000000) | rng.integers(1, 2 ** 51, int(nan.sum())).astype(np.uint64) \
            | (rng.integers(0, 2, int(nan.sum())).astype(np.uint64) << np.uint64(63))
        return w
    else:  # any bit pattern
        return rng.integers(0, 2 ** 63, shape, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, shape).astype(np.uint64)
    return v.view(np.uint64)


@pytest.mark.parametrize("form", FORMS)
def test_words_path_equals_matrix_path(form):
    ins = resolve(form, "sm_90")
    assert batch_last_form(ins)
    rng = np.random.default_rng(abs(hash(form)) % 2 ** 32)
    dists = ["normal", "wide", "cancel", "special", "bits"] if ins.atype == "f64" else ["bits", "dense", "sparse"]
    if ins.atype == "f64" and ("m16n8k8." not in form or ".r" in form.split("f64")[0][-4:]):
        dists = ["wide", "special"]  # the other f64 shapes and rounding modes: the hard cases
    for dist in dists:
        # two chunks (the second partial) where cheap; f64's exact FMA chain is slow in both paths
        warps = WARPS if ins.atype == "b1" or (dist == "normal") else 12
        shapes = {op: (warps, 32, ins.regs[op]) for op in "abc"}
        if ins.atype == "f64":
            a, b, c = (_f64_words(rng, shapes[op], dist) for op in "abc")
        else:
            p = {"bits": 0.5, "dense": 0.95, "sparse": 0.05}[dist]
            a, b = ((rng.random(shapes[op] + (32,)) < p) for op in "ab")
            a, b = (np.packbits(x, axis=-1, bitorder="little").view(np.uint32)[..., 0] for x in (a, b))
            c = rng.integers(-2 ** 31, 2 ** 31, shapes["c"]).astype(np.int64).astype(np.uint32)
            c[:8] = np.uint32(0x7FFFFF00)  # near the wrap
        a0, b0, c0 = a.copy(), b.copy(), c.copy()
        got = mma(ins, a, b, c, arch="sm_90")
        want = _reference(ins, a, b, c)
        bad = np.argwhere(got != want)
        assert not bad.size, f"{dist}: {len(bad)} words differ, first at {tuple(bad[0])}: " \
                             f"{int(got[tuple(bad[0])]):#x} != {int(want[tuple(bad[0])]):#x}"
        assert (a == a0).all() and (b == b0).all() and (c == c0).all()  # inputs untouched


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([f for f in FORMS if ".b1." in f]), st.integers(0, 2 ** 32 - 1), st.integers(1, 5))
def test_popcount_path_property(form, seed, warps):
    ins = resolve(form, "sm_90")
    rng = np.random.default_rng(seed)
    a, b, c = (rng.integers(0, 2 ** 32, (warps, 32, ins.regs[op]), dtype=np.uint64).astype(np.uint32)
               for op in "abc")
    assert (mma(ins, a, b, c, arch="sm_90") == _reference(ins, a, b, c)).all()


def test_small_batches_on_the_words_path():
    """A few warps (the PTX machine's usual batch) on both forms."""
    for form in ("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64",
                 "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc"):
        ins = resolve(form, "sm_90")
        rng = np.random.default_rng(7)
        words = [_f64_words(rng, (3, 32, ins.regs[op]), "normal") if ins.atype == "f64" else
                 rng.integers(0, 2 ** 32, (3, 32, ins.regs[op]), dtype=np.uint64).astype(np.uint32)
                 for op in "abc"]
        assert (mma(ins, *words, arch="sm_90") == _reference(ins, *words)).all()
