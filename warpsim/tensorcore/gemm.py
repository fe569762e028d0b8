"""A whole matrix product through one ``mma.sync`` instruction, tile by tile.

:func:`gemm` computes ``D = A @ B + C`` for an M x K by K x N product the way a tiled GPU kernel
does with the instruction: the matrices are cut into the instruction's m x k, k x n and m x n
tiles (zero-padded at ragged edges), and for each k-tile in increasing order every output tile
runs the instruction once, its D becoming the C of the next k-tile (the accumulator chain of a
CUTLASS-style mainloop).  Each k-step is one batched :func:`warpsim.mma` call over all output
tiles, so the cost is K/k calls, not one call per tile.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from warpsim.tensorcore import blockscale
from warpsim.facts import formats
from warpsim.errors import FormatError, PtxError, ShapeError
from warpsim.tensorcore.execute import mma, resolve_target
from warpsim.facts.isa import Instruction
from warpsim.tensorcore.packing import pack, unpack

__all__ = ["gemm", "tiles"]


def _matrix(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ShapeError(f"{name} must be a 2-D matrix, got shape {arr.shape}")
    if arr.dtype.kind not in "iufb":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    return arr


def _pad(x: np.ndarray, rows: int, cols: int, fill: float = 0) -> np.ndarray:
    if x.shape == (rows, cols):
        return x
    out = np.full((rows, cols), fill, dtype=np.result_type(x.dtype, np.asarray(fill).dtype))
    out[: x.shape[0], : x.shape[1]] = x
    return out


def tiles(x: np.ndarray, tr: int, tc: int) -> np.ndarray:
    """(R*tr, C*tc) -> (R, C, tr, tc): the tr x tc tiles of a padded matrix (a view)."""
    R, C = x.shape[0] // tr, x.shape[1] // tc
    return x.reshape(R, tr, C, tc).swapaxes(1, 2)


def gemm(
    A: object,
    B: object,
    C: object = None,
    *,
    instr: str | Instruction,
    arch: str = "auto",
    scale_A: object = None,
    scale_B: object = None,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
    return_stats: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict]:
    """D = A @ B + C through ``instr``, tiled as a GPU kernel tiles it; returns D (M x N).

    A (M, K), B (K, N), C (M, N) or None (zeros): values, rounded to the instruction's element
    types as :func:`warpsim.pack` rounds them (``strict=True``: refuse any value that would be
    rounded or saturated: a :class:`~warpsim.errors.FormatError` naming the matrix and its
    ``[row, col]``).  ``return_stats=True``: also return, per matrix, how many of its values
    the conversion changed (``{'A': {'rounded': n, 'saturated': n, 'overflowed': n, 'nan': n},
    'B': ..., 'C': ...}``, see :func:`warpsim.facts.formats.conversion_counts`).  Ragged edges are padded with zeros.  Accumulation runs over the
    k-tiles in increasing order, each tile's D (in D's type) being the next tile's C, so D and C
    must have the same type.  ``arch`` as for :func:`warpsim.mma` ('auto', a target, 'exact').

    Block-scaled forms take scale_A (M, ceil(K / b)) and scale_B (ceil(K / b), N), b = k / V
    the scale block (32 for mxf8f6f4 and mxf4, 16 for mxf4nvf4 with scale_vec::4X): scale_A[i, j]
    scales A[i, j*b:(j+1)*b].  ``progress(done, total)`` is called after each k-step.  m8n8k4
    .f16 (four products per warp) packs four output tiles into each warp.  Returns float64 (int64
    for .s32 results).
    """
    ins, arch = resolve_target(instr, arch)
    if ins.sparse:
        raise PtxError(f"gemm runs dense mma.sync instructions; {ins.text} is sparse (for mma.sp, "
                       "warpsim.matmul takes a structurally sparse A one tile at a time)")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable progress(done, total) or None, got {progress!r}")
    if ins.dtype != ins.ctype:
        raise ShapeError(f"gemm chains each tile's D into the next tile's C, so D and C must have the "
                         f"same type; {ins.text} has D .{ins.dtype} and C .{ins.ctype}")
    A, B = _matrix(A, "A"), _matrix(B, "B")
    M, K = A.shape
    if B.shape[0] != K:
        raise ShapeError(f"A is {M} x {K} but B is {B.shape[0]} x {B.shape[1]}: the inner dimensions differ")
    N = B.shape[1]
    if C is None:
        C = np.zeros((M, N), dtype=np.int64 if ins.ctype == "s32" else np.float64)
    C = _matrix(C, "C")
    if C.shape != (M, N):
        raise ShapeError(f"C must be {M} x {N} (A rows x B columns), got {C.shape[0]} x {C.shape[1]}")
    stats = {}
    for name, X, ty in (("A", A, ins.atype), ("B", B, ins.btype), ("C", C, ins.ctype)):
        if strict:
            try:
                formats.encode(X, ty, strict=True)
            except FormatError as e:
                i, j = e.index
                raise FormatError(f"{name}[{i}, {j}] = {e.value} cannot be used as .{ty}: "
                                  f"{e.why}").at(index=(i, j), value=e.value, why=e.why) from None
        if return_stats:
            stats[name] = formats.conversion_counts(X, ty)
    if 0 in (M, N):
        D = np.zeros((M, N), dtype=np.int64 if ins.dtype == "s32" else np.float64)
        return (D, stats) if return_stats else D
    tm, tn, tk = ins.shape
    Mt, Nt, Kt = -(-M // tm), -(-N // tn), max(1, -(-K // tk))

    At = tiles(_pad(A, Mt * tm, Kt * tk), tm, tk)  # (Mt, Kt, tm, tk)
    Bt = tiles(_pad(B, Kt * tk, Nt * tn), tk, tn)  # (Kt, Nt, tk, tn)
    Ct = tiles(_pad(C, Mt * tm, Nt * tn), tm, tn)  # (Mt, Nt, tm, tn)
    sa = sb = None
    if ins.block_scale:
        sa, sb = _scales(ins, scale_A, scale_B, M, N, K, Mt, Nt, Kt)  # (Mt, Kt, 32), (Kt, Nt, 32)
    elif scale_A is not None or scale_B is not None:
        raise ShapeError(f"{ins.text} has no .block_scale; scale_A/scale_B must be None")
    if ins.quadpair:
        D = _gemm_quadpair(ins, arch, At, Bt, Ct, strict, progress)
    else:
        # Pack every tile once: a (Mt, Kt, 32, ra), b (Kt, Nt, 32, rb), c (Mt, Nt, 32, rc); each
        # k-step broadcasts its A column and B row of tiles over the (Mt, Nt) grid of outputs.
        a = pack(ins, "a", At, strict=strict)
        b = pack(ins, "b", Bt, strict=strict)
        c = pack(ins, "c", Ct, strict=strict)
        for kt in range(Kt):
            kw = {}
            if sa is not None:
                kw = dict(scale_a=sa[:, kt, None], scale_b=sb[kt][None])
            c = mma(ins, a[:, kt, None], b[kt][None], c, arch=arch, **kw)
            if progress is not None:
                progress(kt + 1, Kt)
        D = unpack(ins, "d", c)  # (Mt, Nt, tm, tn)
    D = D.swapaxes(1, 2).reshape(Mt * tm, Nt * tn)
    D = np.ascontiguousarray(D[:M, :N])
    return (D, stats) if return_stats else D


def _gemm_quadpair(ins: Instruction, arch: str, At, Bt, Ct, strict: bool, progress) -> np.ndarray:
    """m8n8k4 .f16: four output tiles per warp (one per quad-pair product)."""
    Mt, Kt, tm, tk = At.shape
    Nt, tn = Bt.shape[1], Bt.shape[3]
    n = Mt * Nt
    warps = -(-n // 4)

    def per_warp(x: np.ndarray) -> np.ndarray:  # (n, r, c) -> (warps, 4, r, c), zero tiles appended
        x = np.concatenate([x, np.zeros((4 * warps - n,) + x.shape[1:], x.dtype)])
        return x.reshape((warps, 4) + x.shape[1:])

    c = pack(ins, "c", per_warp(Ct.reshape(n, tm, tn)), strict=strict)
    grid = (Mt, Nt)
    for kt in range(Kt):
        a = np.broadcast_to(At[:, kt, None], grid + (tm, tk)).reshape(n, tm, tk)
        b = np.broadcast_to(Bt[kt][None], grid + (tk, tn)).reshape(n, tk, tn)
        c = mma(ins, pack(ins, "a", per_warp(a), strict=strict), pack(ins, "b", per_warp(b), strict=strict),
                c, arch=arch)
        if progress is not None:
            progress(kt + 1, Kt)
    return unpack(ins, "d", c).reshape(4 * warps, tm, tn)[:n].reshape(Mt, Nt, tm, tn)


def _scales(ins: Instruction, scale_A, scale_B, M, N, K, Mt, Nt, Kt):
    """Scale metadata words per tile: sa (Mt, Kt, 32), sb (Kt, Nt, 32) (selectors 0)."""
    tm, tn, tk = ins.shape
    v = ins.scale_vec
    blk = tk // v
    nb = -(-K // blk)
    if scale_A is None or scale_B is None:
        raise ShapeError(f"{ins.text} needs scale_A ({M} x {nb}) and scale_B ({nb} x {N}): one scale "
                         f"per {blk} elements of K")
    SA, SB = _matrix(scale_A, "scale_A"), _matrix(scale_B, "scale_B")
    if SA.shape != (M, nb) or SB.shape != (nb, N):
        raise ShapeError(f"scale_A must be {M} x {nb} and scale_B {nb} x {N} (one scale per {blk} "
                         f"elements of K); got {SA.shape} and {SB.shape}")
    # padding: scale 1 (the padded A and B elements are zero anyway)
    SA = tiles(_pad(SA.astype(np.float64), Mt * tm, Kt * v, 1.0), tm, v)  # (Mt, Kt, tm, v)
    SB = tiles(_pad(SB.astype(np.float64), Kt * v, Nt * tn, 1.0), v, tn)  # (Kt, Nt, v, tn)
    ca = formats.encode(SA, ins.stype)
    cb = formats.encode(SB, ins.stype)
    return (blockscale.scatter_scales(ins, ca, "scale_a"), blockscale.scatter_scales(ins, cb, "scale_b"))
