"""Dense .block_scale mma (mxf8f6f4, mxf4, mxf4nvf4 on sm_120a) on the batch-last path gives
the D words of the matrix path it replaced (unpack -> gather scales -> compute -> pack), for every
form, random legal selectors, random register and scale bits, normal values, wide ranges, special
values, and across a chunk boundary.  WARPSIM_BLOCKSCALE_EXAMPLES=N: N warps per case (CI: 12)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import warpsim
from warpsim.facts import formats
from warpsim.facts.isa import SELECTORS
from warpsim.tensorcore import accel_extra, blockscale
from warpsim.tensorcore.execute import CHUNK, _compute, block_scale_kernel, mma, resolve
from warpsim.tensorcore.packing import pack, pack_bits, unpack_bits

FORMS = [i.text for i in warpsim.instructions() if i.block_scale and not i.sparse]
WARPS = int(os.environ.get("WARPSIM_BLOCKSCALE_EXAMPLES", "0")) or 12
FULL = "WARPSIM_BLOCKSCALE_EXAMPLES" in os.environ
FIRST: dict = {}
for _f in FORMS:
    _i = resolve(_f, "sm_120a")
    FIRST.setdefault((_i.kind, _i.scale_vec, _i.stype), _f)


def _reference(ins, arch, a, b, c, sa, sb, sel):
    codes = [unpack_bits(ins, op, w) for op, w in zip("abc", (a, b, c))]
    ga = blockscale.gather_scales(ins, sa, "scale_a", sel[0], sel[1])
    gb = blockscale.gather_scales(ins, sb, "scale_b", sel[2], sel[3])
    with np.errstate(all="ignore"):
        return pack_bits(ins, "d", _compute(ins, arch, *codes, ga, gb))


def _operands(rng, ins, n, dist):
    if dist == "bits":
        return [rng.integers(0, 2 ** 32, (n, 32, ins.regs[op]), dtype=np.uint64).astype(np.uint32)
                for op in "abc"]
    out = []
    for op in "abc":
        t = ins.type_of(op)
        f = formats.get_format(t)
        shape = (n,) + ins.matrix_shape(op)
        v = rng.standard_normal(shape) * (2.0 ** rng.integers(-8, 8, shape) if dist == "wide" else 1)
        if dist == "special":
            pick = rng.integers(0, 12, shape)
            v = np.where(pick == 0, -0.0, np.where(pick == 1, 0.0, v))
            if f.has_nan:
                v = np.where(pick == 2, np.nan, v)
            if f.has_inf:
                v = np.where(pick == 3, np.inf, np.where(pick == 4, -np.inf, v))
        if dist == "wide" and op == "c":
            v = v * 2.0 ** rng.integers(-140, 127, shape)
        if not f.has_inf:
            v = np.clip(v, -float(f.max_finite), float(f.max_finite))
        with np.errstate(all="ignore"):
            out.append(pack(ins, op, v))
    return out


def _scales(rng, ins, n, dist):
    if dist in ("bits", "special"):  # every code, NaN scales included
        return [rng.integers(0, 2 ** 32, (n, 32), dtype=np.uint64).astype(np.uint32) for _ in "ab"]
    lo, hi = (0x30, 0x48) if ins.stype == "ue4m3" else (110, 140)
    return [rng.integers(lo, hi, (n, 32)).astype(np.uint32) * np.uint32(0x01010101) for _ in "ab"]


@pytest.mark.parametrize("form", FORMS)
def test_batch_last_equals_matrix_path(form, monkeypatch):
    ins = resolve(form, "sm_120a")
    rng = np.random.default_rng(abs(hash(form)) % 2 ** 32)
    bytes_ok, ta_ok, tb_ok = SELECTORS[ins.scale_vec]
    for dist in ("bits", "normal", "wide", "special"):
        # across a chunk boundary: once per kind and scale vector in CI, always by hand
        boundary = dist == "normal" and (FULL or form == FIRST[(ins.kind, ins.scale_vec, ins.stype)])
        n = CHUNK + 5 if boundary else WARPS
        sel = (int(rng.choice(bytes_ok)), int(rng.choice(ta_ok)), int(rng.choice(bytes_ok)), int(rng.choice(tb_ok)))
        a, b, c = _operands(rng, ins, n, dist)
        sa, sb = _scales(rng, ins, n, dist)
        keep = [x.copy() for x in (a, b, c, sa, sb)]
        calls = block_scale_kernel.cache_info()
        kw = dict(arch="sm_120a", scale_a=sa, scale_b=sb, byte_id_a=sel[0], thread_id_a=sel[1],
                  byte_id_b=sel[2], thread_id_b=sel[3])
        compiled = mma(ins, a, b, c, **kw)  # the compiled kernel where it is built
        with monkeypatch.context() as mp:  # the NumPy batch-last path
            mp.setattr(accel_extra, "supports", lambda *x: False)
            got = mma(ins, a, b, c, **kw)
        now = block_scale_kernel.cache_info()
        assert now.hits + now.misses == calls.hits + calls.misses + 1  # the batch-last path ran
        want = _reference(ins, "sm_120a", a, b, c, sa, sb, sel)
        assert (compiled == want).all(), dist
        bad = np.argwhere(got != want)
        assert not bad.size, f"{dist} {sel}: {len(bad)} words differ, first at {tuple(bad[0])}: " \
                             f"{int(got[tuple(bad[0])]):#x} != {int(want[tuple(bad[0])]):#x}"
        assert all((x == y).all() for x, y in zip((a, b, c, sa, sb), keep))  # inputs untouched


def test_broadcast_scales():
    """One set of scale words broadcast over a batch of operands (and the reverse)."""
    ins = resolve(FORMS[0], "sm_120a")
    rng = np.random.default_rng(5)
    a, b, c = _operands(rng, ins, 6, "normal")
    sa, sb = _scales(rng, ins, 1, "normal")
    got = mma(ins, a, b, c, arch="sm_120a", scale_a=sa[0], scale_b=sb[0])
    want = _reference(ins, "sm_120a", a, b, c, np.broadcast_to(sa, (6, 32)), np.broadcast_to(sb, (6, 32)),
                      (0, 0, 0, 0))
    assert (got == want).all()
