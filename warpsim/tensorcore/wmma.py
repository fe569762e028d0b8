"""wmma fragments and arithmetic: measured layouts, and the mma.sync models that compute them.

The PTX ISA leaves the wmma fragment layout unspecified.  :data:`LAYOUT_FILE` holds it as
measured on an H200 (sm_90, Hopper: the H100's chip generation) with
:mod:`warpsim.validation.wmma_probe`: for every fragment (operand, shape, type) which row-major
element of the tile each (lane, register, element slot) holds.  What the measurement showed:

- the map does not depend on ``.row``/``.col`` (the layout only changes the addresses) nor on
  the stride (omitted, it is the tile's leading dimension);
- loads copy bits verbatim (no canonicalisation, tf32's low bits kept), and ``wmma.store.d``
  writes exactly the elements ``wmma.load.c`` reads, from the same slots;
- f16 A/B fragments hold some elements twice or four times (m16n16k16 A and B: registers 4-7
  repeat 0-3; m8n32k16 A and m32n8k16 B: registers 2-7 repeat 0-1); ``wmma.mma`` reads only the
  first copy (register order): changing a repeat changes nothing (:data:`READS_FIRST_COPY`).

:data:`MEASURED_ON` names the targets the maps were measured on; :data:`ASSUMED_FOR` the targets
that use them unmeasured (sm_80 and later, whose mma.sync fragments the maps extend);
sm_70-sm_75 are refused (Volta's quad-pair fragments differ).

Numerics: ``wmma.mma`` is computed as the ``mma.sync`` instruction with the same types (and
``.satfinite``/rounding/bit operation) tiled over the wmma shape (:func:`mma_for`), through
:func:`warpsim.tensorcore.execute._compute` and the target's model.  Mixed f16/f32 accumulators
convert as the H200 does (checked word for word, docs/validation.md): an f16 C for an f32 D is
widened exactly; an f32 C for an f16 D runs the f32-accumulating form and rounds D to f16.
``m16n16k8 .tf32`` is not one m16n8k8 step: the H200's words are those of two chained
``m16n8k4`` steps (k 0-3, then k 4-7 with the first step's f32 result as C); one m16n8k8 step
differs in about 23% of the words.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS
from warpsim.facts.wmma import ELEMENT_BITS, FRAGMENTS, SHAPES, Fragment, MmaGeom

LAYOUT_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "wmma_layouts.npz")
MEASURED_ON = ("sm_90",)
READS_FIRST_COPY = True


def assumed_for(arch: str) -> bool:
    """Whether ``arch`` runs wmma with the measured maps (sm_80 and later)."""
    a = ARCHS.get(arch)
    return a is not None and a.sm >= 80


def check_target(arch: str | None, where: str) -> None:
    if arch in (None, "exact", "auto") or assumed_for(arch):
        return
    raise PtxError(f"{where}: wmma fragment layouts are measured on {', '.join(MEASURED_ON)} and "
                   f"used for sm_80 and later; {arch} (Volta/Turing fragments) is not modelled")


@functools.lru_cache(maxsize=None)
def _maps() -> dict:
    with np.load(LAYOUT_FILE) as z:
        return {k: z[k].astype(np.int64) for k in z.files}


def fragment_map(f: Fragment) -> np.ndarray:
    """(32, nregs, elems_per_reg) row-major element index of the tile each slot holds."""
    return _maps()[f"{f.frag}_{f.shape}_{f.type}"]


@functools.lru_cache(maxsize=None)
def first_copy(frag: str, shape: str, type_: str) -> np.ndarray:
    """For each row-major tile element, the flat slot (lane*nregs*per + reg*per + slot) that the
    mma reads: the first copy in register order, then lane order."""
    f = FRAGMENTS[(frag, shape, type_)]
    m = fragment_map(f)
    lanes, nregs, per = m.shape
    order = np.arange(lanes * nregs * per).reshape(lanes, nregs, per)
    key = (np.arange(nregs)[None, :, None] * lanes + np.arange(lanes)[:, None, None]) * per \
        + np.arange(per)[None, None, :]
    r, c = f.rows_cols
    best = np.full(r * c, np.iinfo(np.int64).max)
    np.minimum.at(best, m.reshape(-1), key.reshape(-1))
    # key -> flat slot
    inv = np.empty(lanes * nregs * per, np.int64)
    inv[key.reshape(-1)] = order.reshape(-1)
    return inv[best]


def element_offsets(f: Fragment, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of every (lane, reg, slot) of the fragment: two (32, nregs, per) arrays."""
    _, c = f.rows_cols
    m = fragment_map(f)
    return m // c, m % c


def regs_to_codes(f: Fragment, words: np.ndarray) -> np.ndarray:
    """Register words (..., 32, nregs) -> the tile's element codes (..., rows, cols)."""
    w = ELEMENT_BITS[f.type]
    per = f.elems_per_reg
    words = words.astype(np.uint64)
    if per == 1:
        slots = words[..., None]
    else:
        sh = (np.arange(per, dtype=np.uint64) * np.uint64(w))
        slots = (words[..., None] >> sh) & np.uint64((1 << w) - 1)
    flat = slots.reshape(slots.shape[:-3] + (-1,))
    r, c = f.rows_cols
    return flat[..., first_copy(f.frag, f.shape, f.type)].reshape(flat.shape[:-1] + (r, c))


def codes_to_regs(f: Fragment, codes: np.ndarray) -> np.ndarray:
    """A tile's codes (..., rows, cols) -> register words (..., 32, nregs) (every copy filled)."""
    w = ELEMENT_BITS[f.type]
    m = fragment_map(f)  # (32, nregs, per)
    flat = codes.reshape(codes.shape[:-2] + (-1,)).astype(np.uint64)
    slots = flat[..., m]  # (..., 32, nregs, per)
    if f.elems_per_reg > 1:
        sh = np.arange(f.elems_per_reg, dtype=np.uint64) * np.uint64(w)
        slots = (slots << sh).sum(axis=-1, dtype=np.uint64)
    else:
        slots = slots[..., 0]
    return slots.astype(np.uint64 if f.reg_bits == 64 else np.uint32)


def mma_for(g: MmaGeom, op: str | None, rounding: str | None, satfinite: bool, arch: str):
    """The mma.sync instruction whose tiles compute this wmma.mma, and its (m, n) tile."""
    from warpsim.tensorcore.execute import resolve

    if g.atype in ("f16",):
        d = "f16" if g.dtype == "f16" and g.ctype == "f16" else "f32"
        text, mn = f"mma.sync.aligned.m16n8k16.row.col.{d}.f16.f16.{d}", (16, 8)
    elif g.atype == "bf16":
        text, mn = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", (16, 8)
    elif g.atype == "tf32":  # measured: two k=4 steps, the first's f32 D the second's C
        text, mn = "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", (16, 8)
    elif g.atype == "f64":
        rnd = f".{rounding}" if rounding and rounding != "rn" else ""
        text, mn = f"mma.sync.aligned.m8n8k4.row.col{rnd}.f64.f64.f64.f64", (8, 8)
    elif g.atype in ("s8", "u8"):
        sat = ".satfinite" if satfinite else ""
        text, mn = f"mma.sync.aligned.m16n8k16.row.col{sat}.s32.{g.atype}.{g.btype}.s32", (16, 8)
    elif g.atype in ("s4", "u4"):
        sat = ".satfinite" if satfinite else ""
        text, mn = f"mma.sync.aligned.m8n8k32.row.col{sat}.s32.{g.atype}.{g.btype}.s32", (8, 8)
    else:
        text, mn = f"mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.{op}.popc", (8, 8)
    return resolve(text, None if arch in ("auto", "exact", None) else arch), mn


def compute(g: MmaGeom, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, op: str | None = None,
            rounding: str | None = None, satfinite: bool = False, arch: str = "sm_90") -> np.ndarray:
    """D codes (..., M, N) of ``wmma.mma`` from A (..., M, K), B (..., K, N), C (..., M, N) codes."""
    from warpsim.tensorcore.execute import _compute

    mi, (tm, tn) = mma_for(g, op, rounding, satfinite, arch)
    M, N, K = SHAPES[g.shape]
    batch = a.shape[:-2]
    if g.ctype != mi.ctype:  # f16 C into the f32-accumulating form: widen exactly
        c = np.asarray(c, np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    Mp = -(-M // tm) * tm
    if Mp != M:  # m8n32k16 on a 16-row form: rows are independent, pad with zeros
        a = np.concatenate([a, np.zeros(batch + (Mp - M, K), a.dtype)], axis=-2)
        c = np.concatenate([c, np.zeros(batch + (Mp - M, N), c.dtype)], axis=-2)
    tk = mi.shape[2]
    parts = []
    with np.errstate(all="ignore"):
        for i in range(0, Mp, tm):
            row = []
            for j in range(0, N, tn):
                d = c[..., i:i + tm, j:j + tn]
                for k in range(0, K, tk):
                    d = _compute(mi, arch, a[..., i:i + tm, k:k + tk], b[..., k:k + tk, j:j + tn], d)
                row.append(d)
            parts.append(np.concatenate(row, axis=-1))
    d = np.concatenate(parts, axis=-2)[..., :M, :]
    if g.dtype != mi.dtype:  # f32 D of the f32 form rounded to the wmma's f16 D
        with np.errstate(all="ignore"):
            v = d.view(np.float32).astype(np.float16)
        d = v.view(np.uint16)
    return d
