"""Cross-check warpsim's tcgen05.mma numerics against MMA-Sim 2.1.1's Blackwell models.

MMA-Sim's ``TCGen05MMA`` and ``TCGen05MMABlockScale`` (``mmasim.nv_ptx``) are the only published
bit-accurate models of tcgen05 arithmetic; no Blackwell GPU is available here.  Both sides get
the same bit patterns (the input families of ``tests/test_mmasim_crosscheck.py``: normal, wide,
cancel, sparse, specials, overflow) and results are compared as bit patterns (two NaNs are
equal whatever their payload).  Every (kind, D, A, B, scale) type combination MMA-Sim lists is
run at a small shape with every family; every (M, N) shape it lists is run once (one type
combination per kind; the arithmetic of an element does not depend on M or N, which these check).
Set ``WARPSIM_TCGEN05_FULL=1`` for every shape with every type combination and more tiles.
Skipped where mmasim (and torch) are not installed.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

pytest.importorskip("mmasim")
torch = pytest.importorskip("torch")
from mmasim.nv_ptx import TCGen05MMA, TCGen05MMABlockScale  # noqa: E402
from mmasim.nv_ptx import isa_tcgen05mma as sim_isa  # noqa: E402

from tests import test_mmasim_crosscheck as X  # noqa: E402
from warpsim.tensorcore import tcgen05 as T  # noqa: E402

FULL = os.environ.get("WARPSIM_TCGEN05_FULL", "") not in ("", "0")
TILES = 8 if FULL else 3


def _parse(name: str) -> T.Tcgen05Mma:
    """A warpsim Tcgen05Mma for an MMA-Sim shape_and_type string."""
    q = name.split(".")
    shape, kind = q[0], q[1].removeprefix("kind::")
    if kind in ("mxf8f6f4", "mxf4", "mxf4nvf4"):
        block, d, a, b, s = q[2:]
        return T.make(kind, shape, dtype=d, atype=a, btype=b, stype=s, block=int(block[5:]))
    d, a, b = q[2:5]
    return T.make(kind, shape, dtype=d, atype=a, btype=b)


def _sim_names() -> tuple[list[str], list[str]]:
    return (list(sim_isa.tcgen05mma_shape_and_type["Blackwell"]),
            list(sim_isa.tcgen05mma_block_scale_shape_and_type["Blackwell"]))


def _types_key(name: str) -> str:
    return name.split(".", 1)[1]


def _cases() -> list[str]:
    """One small shape per type combination, plus every shape once per kind."""
    dense, bs = _sim_names()
    names = dense + bs
    if FULL:
        return names
    small = {_types_key(nm): None for nm in names}
    out = []
    for nm in names:  # the smallest shape of each type combination
        key = _types_key(nm)
        if small[key] is None and nm.startswith(("m64n8k", "m128n8k")):
            small[key] = nm
            out.append(nm)
    per_kind_shapes = {}
    for nm in names:  # every shape once: the first type combination of each kind
        kind = nm.split(".")[1]
        first = per_kind_shapes.setdefault(kind, _types_key(nm))
        if _types_key(nm) == first and nm not in out:
            out.append(nm)
    return out


def run_mmasim(name: str, ins: T.Tcgen05Mma, x) -> np.ndarray:
    packed = ins.kind in ("mxf4", "mxf4nvf4")
    A = X._to_torch(x.a, ins.atype, packed)
    B = X._to_torch(np.swapaxes(x.b, -1, -2), ins.btype, packed)
    C = X._to_torch(x.c, ins.dtype)
    M, N = ins.m, ins.n
    av = A[..., :, None, :].expand(*A.shape[:-2], M, N, A.shape[-1])
    bv = B[..., None, :, :].expand(*B.shape[:-2], M, N, B.shape[-1])
    if ins.block_scale:
        op = TCGen05MMABlockScale("Blackwell", name)
        SA = X._to_torch(x.sa, ins.stype)
        SB = X._to_torch(np.swapaxes(x.sb, -1, -2), ins.stype)
        sav = SA[..., :, None, :].expand(SA.shape[0], M, N, SA.shape[-1])
        sbv = SB[..., None, :, :].expand(SB.shape[0], M, N, SB.shape[-1])
        d = op.dpa(av, bv, C, sav, sbv)
    else:
        d = TCGen05MMA("Blackwell", name).dpa(av, bv, C)
    return X._from_torch(d, ins.dtype)


FAMILIES = X.FAMILIES + ("integer",)


def gen_integer(ins: T.Tcgen05Mma, n: int, seed: int):
    """Integer-exact inputs: small integers (within each type's exact range) whose products
    and sums are exact in f32, so every model must return the exact sum."""
    rng = np.random.default_rng(seed)
    m, nn, k = ins.shape

    def ints(t, shape):
        top = {"e2m1": 3, "e2m3": 7, "e3m2": 7, "e4m3": 15, "e5m2": 7}.get(t, 31)
        return X.encode(rng.integers(-top, top + 1, shape), t)

    x = X.Inputs(ints(ins.atype, (n, m, k)), ints(ins.btype, (n, k, nn)),
                 X.encode(rng.integers(-1000, 1001, (n, m, nn)), ins.dtype))
    if ins.block_scale:  # scales 2**-2 .. 2**2
        v = ins.scale_vec
        x.sa = X.encode(2.0 ** rng.integers(-2, 3, (n, m, v)), ins.stype)
        x.sb = X.encode(2.0 ** rng.integers(-2, 3, (n, v, nn)), ins.stype)
    return x


def crosscheck(name: str, families=FAMILIES, tiles: int = TILES) -> tuple[int, list[str]]:
    ins = _parse(name)
    compared, bad = 0, []
    for fam in families:
        seed = zlib.crc32(f"tcgen05|{name}|{fam}".encode())
        if fam == "integer":
            x = gen_integer(ins, tiles, seed)
        else:
            x = X.gen_inputs(ins, fam, tiles, seed=seed)
        ws = T.compute_codes(ins, x.a, x.b, x.c, arch="sm_100a", sa=x.sa, sb=x.sb)
        sim = run_mmasim(name, ins, x)
        assert ws.shape == sim.shape
        nan = X.nan_mask(ws, ins.dtype) & X.nan_mask(sim, ins.dtype)
        diff = (ws != sim) & ~nan
        compared += ws.size
        for idx in list(zip(*np.nonzero(diff)))[:2]:
            bad.append(f"[{fam}] {X.mismatch_kind(ws[idx], sim[idx], ins.dtype)}\n"
                       + X.describe(ins, x, idx, ws[idx], sim[idx]))
        if diff.any():
            bad.append(f"[{fam}] {int(diff.sum())} of {ws.size} differ")
    return compared, bad


CASES = _cases()


def test_cases_cover_every_kind_and_type_combination():
    dense, bs = _sim_names()
    kinds = {n.split(".")[1] for n in CASES}
    assert kinds == {"kind::tf32", "kind::f16", "kind::f8f6f4", "kind::mxf8f6f4", "kind::mxf4",
                     "kind::mxf4nvf4"}
    assert {_types_key(n) for n in CASES} == {_types_key(n) for n in dense + bs}
    shapes = {(n.split(".")[1], n.split(".")[0]) for n in CASES}
    assert shapes == {(n.split(".")[1], n.split(".")[0]) for n in dense + bs}


@pytest.mark.parametrize("name", CASES)
def test_agrees_with_mmasim(name):
    small = name.startswith(("m64n8k", "m128n8k"))
    fams = FAMILIES if (small or FULL) else ("specials",)
    compared, bad = crosscheck(name, fams, TILES if small or FULL else 1)
    assert compared > 0
    assert not bad, f"{name}: " + "\n".join(bad[:6])


def test_integer_inputs_give_the_exact_sum():
    """The integer family is exact: warpsim's model equals the exact computation there."""
    for name in ("m64n8k16.kind::f16.f32.f16.f16", "m64n8k32.kind::f8f6f4.f16.e2m1.e3m2",
                 "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"):
        ins = _parse(name)
        x = gen_integer(ins, 2, 7)
        got = T.compute_codes(ins, x.a, x.b, x.c, arch="sm_100a", sa=x.sa, sb=x.sb)
        want = T.compute_codes(ins, x.a, x.b, x.c, arch="exact", sa=x.sa, sb=x.sb)
        assert np.array_equal(got, want)


def test_fp8_is_native_not_the_mma_sync_sequence():
    """tcgen05 kind::f8f6f4 is one fused step: it differs from mma.sync's two-step fp8
    sequence on sm_100a for some inputs (so the test above would catch the wrong model)."""
    import warpsim
    ins = T.make("f8f6f4", "m64n8k32", dtype="f32", atype="e4m3")
    mins = warpsim.decode("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", arch="sm_100a")
    x = X.gen_inputs(ins, "wide", 4, seed=3)
    ws = T.compute_codes(ins, x.a, x.b, x.c, arch="sm_100a")
    sync = np.concatenate([X.run_warpsim(mins, "sm_100a", X.Inputs(x.a[:, r:r + 16], x.b,
                                                                     x.c[:, r:r + 16]))
                           for r in range(0, 64, 16)], axis=1)
    assert (ws != sync).any()
