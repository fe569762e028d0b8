"""Bulk and tensor copies (the tensor memory accelerator): ``cp.async.bulk`` (global <-> shared,
shared::cta -> shared::cluster, ``.multicast::cluster``), ``cp.async.bulk.tensor`` 1D-5D tile
loads and stores, ``cp.reduce.async.bulk(.tensor)``, ``cp.async.bulk.commit_group`` /
``wait_group(.read)``, ``cp.async.bulk.prefetch(.tensor)``, ``prefetch(.tensormap)``,
``tensormap.replace`` and ``tensormap.cp_fenceproxy``.

Copies run when issued, each by every active lane that executes the instruction, and signal
their mbarrier (``complete_tx`` of the bytes written, in each destination CTA) at once; groups
only count.  Tile-mode semantics (measured on the H100/H200, tests/data/hopper_async_h200.npz):

* the map is read from its generic address (a ``__grid_constant__`` parameter, global or
  shared memory) in the format of :mod:`warpsim.facts.tensormap`;
* box element ``i`` of dimension ``d`` is tensor coordinate ``c_d + i * elementStride_d``,
  ``ceil(box_d / elementStride_d)`` of them (dimension 0: the whole box, its element stride
  is not applied); in bounds iff ``0 <= x_d < dim_d`` for every d;
* loads write the box densely into shared memory (dimension 0 fastest), each byte at the
  swizzled address of ``dst + offset`` (:func:`warpsim.facts.swizzle.swizzle`); out-of-bounds
  elements read zero, or with the NaN fill the 16-bit pattern 0x7FF7 repeated;
* stores and reductions write only the in-bounds elements, dimension 0 by 16-byte chunks (the
  H200 writes a chunk that starts inside the tensor whole, past dim 0's end within the row);
  a store box starting at a negative coordinate faults on the hardware (an error here);
* the innermost start coordinate times the element size must be a multiple of 16 bytes (the
  hardware raises an illegal-instruction fault otherwise; an error here);
* interleaved maps (16B/32B) move whole chunks in their own walk (:func:`interleave_coords`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from warpsim.errors import PtxError
from warpsim.facts import tensormap as fmt
from warpsim.facts.swizzle import swizzle as _swizzle
from warpsim.ptx.cluster import RANK_SHIFT, block
from warpsim.ptx.ops.datamove import load as _gload
from warpsim.ptx.memory import PARAM_WINDOW
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Addr, Imm, Vec

__all__ = ["OPS", "tile_coords", "im2col_coords", "gather4_coords", "interleave_coords", "NAN_FILL",
           "INTERLEAVE_CHUNK"]

#: What the NaN fill writes, per 16 bits (measured on the H100).
NAN_FILL = 0x7FF7
_SWZ_NAMES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
_IGNORED = {"L2::cache_hint", "level::cache_hint"}


# --------------------------------------------------------------------------------------------
# operand helpers
# --------------------------------------------------------------------------------------------
def _active(ctx, mask):
    m = np.ones(ctx.shape, bool) if mask is None else np.asarray(mask, bool)
    return m


def _shared_rows(ctx, a, m, where, *, cluster):
    """(rows, offsets) of shared addresses (shared::cta offsets or shared::cluster addresses)
    at the active lanes."""
    blk = block(ctx, where)
    rows, offs = blk.resolve(ctx, np.asarray(a, np.uint64), where, cluster=cluster, mask=m)
    return blk, rows[m], offs[m]


def _map_address(dec, op):
    """ctx -> generic address of a tensor-map operand (a register, or a parameter name)."""
    if isinstance(op, Addr) and op.base in dec.symbols:
        space, off = dec.symbols[op.base]
        base = {"param": PARAM_WINDOW}.get(space, 0)
        c = np.uint64(base + off + op.offset)
        return lambda ctx: np.broadcast_to(c, ctx.shape)
    return dec.address(op)


def _read_maps(ctx, addr, m, where):
    """Decoded tensor maps at the generic addresses of the active lanes (lane order)."""
    raw = _gload(ctx, None, np.asarray(addr, np.uint64), 128, m, where, 64)
    out = []
    for r in raw[m]:
        try:
            out.append(fmt.decode(r.tobytes(), strict=False))
        except PtxError as e:
            raise PtxError(f"{where}: the tensor map is not valid: {e}") from None
    return out


# --------------------------------------------------------------------------------------------
# tile mode
# --------------------------------------------------------------------------------------------
def tile_coords(f: fmt.TensorMapFields, coords, chunks: bool = False):
    """(global byte offsets from the map's address, in-bounds mask, elements per dim) of the
    box at ``coords``, in shared-memory order (dimension 0 fastest).  ``chunks``: bounds in
    dimension 0 by 16-byte chunks, as stores write (a chunk that starts inside the tensor is
    written whole: measured on the H200)."""
    n = [f.box[0]] + [-(-b // e) for b, e in zip(f.box[1:], f.element_strides[1:])]
    es = [1] + list(f.element_strides[1:])
    grids = np.meshgrid(*[np.arange(k, dtype=np.int64) for k in reversed(n)], indexing="ij")
    grids = list(reversed(grids))  # grids[d]: index along dim d, dim 0 fastest in C order
    inb = np.ones(grids[0].shape, bool)
    off = np.zeros(grids[0].shape, np.int64)
    strides = [f.elem_bytes] + list(f.strides)
    for d in range(f.rank):
        x = int(coords[d]) + grids[d] * es[d]
        if d == 0 and chunks:
            inb &= (x >= 0) & ((x * f.elem_bytes) // 16 * 16 < f.dims[0] * f.elem_bytes)
        else:
            inb &= (x >= 0) & (x < f.dims[d])
        off += x * strides[d]
    return off.reshape(-1), inb.reshape(-1), n


def im2col_coords(f: fmt.TensorMapFields, coords, offsets):
    """(global byte offsets from the map's address, in-bounds mask, None) of an im2col load at
    ``coords`` (c, w[, h[, d]], n) with the instruction's ``offsets`` (w[, h[, d]]), in
    shared-memory order: ``pixels`` pixels of ``channels`` elements each (channel fastest).

    The pixels follow a counter over the bounding box (measured on the H100): W steps by its
    element stride from the start coordinate; past ``dim - 1 + upper`` it wraps to ``lower`` and
    H steps (then D, then N, by its element stride too, unbounded); each pixel reads position +
    offset, the offset unsigned and cut to the corners' width (16 / (rank - 2) bits: rank 4
    reads 32768 as 0 and 65535 as 255).  Channels ``c .. c + channels - 1``; anything outside
    the tensor is filled.  A start outside the bounding box faults (checked by the caller)."""
    n_sp = f.rank - 2
    npx, cpp = f.pixels, f.box[0]
    carry = np.arange(npx, dtype=np.int64)
    pos = []
    for s in range(n_sp):  # W, H, D: the first run from the start, then whole lattice rows
        d = s + 1
        es = f.element_strides[d]
        lo, hi = f.lower[s], f.dims[d] - 1 + f.upper[s]
        start = int(coords[d])
        first = max(1, (hi - start) // es + 1)
        length = (hi - lo) // es + 1
        j = carry - first
        p = np.where(carry < first, start + carry * es, lo + (j % length) * es)
        carry = np.where(carry < first, 0, 1 + j // length)
        pos.append(p + (int(offsets[s]) & ((1 << fmt.CORNER_BITS[f.rank]) - 1)))
    pos.append(int(coords[f.rank - 1]) + carry * f.element_strides[f.rank - 1])  # N
    ch = int(coords[0]) + np.arange(cpp, dtype=np.int64)
    inb = ((ch >= 0) & (ch < f.dims[0]))[None, :] & np.ones((npx, 1), bool)
    off = ch[None, :] * f.elem_bytes
    for k, p in enumerate(pos):
        d = k + 1
        inb &= ((p >= 0) & (p < f.dims[d]))[:, None]
        off = off + (p * f.strides[d - 1])[:, None]
    return off.reshape(-1), inb.reshape(-1), None


def gather4_coords(f: fmt.TensorMapFields, coords, chunks: bool = False):
    """(global byte offsets, in-bounds mask, None) of ``.tile::gather4`` / ``.tile::scatter4``
    (sm_100, from the PTX ISA and CUTLASS/Triton usage, not compared with a GPU): 2D maps whose
    box is one row; ``coords`` = (column, row0, row1, row2, row3); the four rows of ``box[0]``
    elements from the column land one after another in shared memory (swizzled as a 4-row box)."""
    col = int(coords[0]) + np.arange(f.box[0], dtype=np.int64)
    rows = np.array([int(c) for c in coords[1:5]], np.int64)
    if chunks:
        cin = (col >= 0) & ((col * f.elem_bytes) // 16 * 16 < f.dims[0] * f.elem_bytes)
    else:
        cin = (col >= 0) & (col < f.dims[0])
    inb = ((rows >= 0) & (rows < f.dims[1]))[:, None] & cin[None, :]
    off = rows[:, None] * f.strides[0] + col[None, :] * f.elem_bytes
    return off.reshape(-1), inb.reshape(-1), None


#: Bytes per interleave chunk (map field interleave 1 / 2).
INTERLEAVE_CHUNK = {1: 16, 2: 32}


def interleave_coords(f: fmt.TensorMapFields, coords):
    """(global byte offsets, in-bounds mask, None) of a tile load through an interleaved map
    (16B/32B interleave, rank 3 or 4), in shared-memory order, one entry per interleave chunk.

    What the H100/H200 do (fitted to 24 loads through 11 maps, tests/data/h100_im2col.npz and
    tests/data/h200_interleave.npz): dimension 0 counts whole chunks (16/32 bytes): its
    coordinate ``x0 = c0 + i * elementStride_0`` (``ceil(box[0] / elementStride_0)`` of them) is at
    byte ``x0 * chunk``; dimension ``rank - 2`` is not walked (only its start coordinate counts,
    bounds-checked); every other dimension d >= 1 is walked ``ceil(box[d] / elementStride_d)``
    times by its element stride; in bounds iff ``0 <= x_d < dim_d`` for every d.  Chunks land
    densely in that order (dimension 0 fastest)."""
    chunk = INTERLEAVE_CHUNK[f.interleave]
    es = f.element_strides
    n = [-(-f.box[d] // es[d]) if d != f.rank - 2 else 1 for d in range(f.rank)]
    grids = list(reversed(np.meshgrid(*[np.arange(k, dtype=np.int64) for k in reversed(n)], indexing="ij")))
    off = np.zeros(grids[0].shape, np.int64)
    inb = np.ones(off.shape, bool)
    for d in range(f.rank):
        x = int(coords[d]) + grids[d] * es[d]
        inb &= (x >= 0) & (x < f.dims[d])
        off = off + x * (chunk if d == 0 else f.strides[d - 1])
    return off.reshape(-1), inb.reshape(-1), n


def _check_interleave(f: fmt.TensorMapFields, coords, where) -> None:
    """Interleaved copies outside what was measured on the H100/H200 are refused."""
    if f.im2col:
        raise PtxError(f"{where}: im2col copies through interleaved tensor maps (interleave) are not modelled")
    if f.rank not in (3, 4):
        raise PtxError(f"{where}: interleaved copies of rank {f.rank} are not modelled (rank 3 and 4 were "
                       "measured)")
    if int(coords[0]) < 0:
        raise PtxError(f"{where}: an interleaved copy starting at {int(coords[0])} in dimension 0 is not "
                       "modelled (only starts >= 0 were measured)")


def _unit(f: fmt.TensorMapFields) -> int:
    """Bytes per box entry: the element, or the interleave chunk."""
    return INTERLEAVE_CHUNK[f.interleave] if f.interleave and not f.im2col else f.elem_bytes


def _check_im2col_start(f: fmt.TensorMapFields, coords, where) -> None:
    """An im2col start outside the bounding box faults on the H100 (illegal instruction)."""
    for s in range(f.rank - 2):
        lo, hi = f.lower[s], f.dims[s + 1] - 1 + f.upper[s]
        c = int(coords[s + 1])
        if not lo <= c <= hi:
            raise PtxError(f"{where}: im2col start coordinate {c} in dimension {s + 1} is outside the bounding box "
                           f"{lo}..{hi} (the H100 faults: illegal instruction)")


def _check_tile(f: fmt.TensorMapFields, coords, where, store: bool):
    if f.interleave:
        _check_interleave(f, coords, where)
    if (int(coords[0]) * f.elem_bytes) % 16:
        raise PtxError(f"{where}: box start {int(coords[0])} in dimension 0 is {int(coords[0]) * f.elem_bytes} bytes, "
                       "not a multiple of 16 (the H100 faults: illegal instruction)")
    if store and any(int(c) < 0 for c in coords[:f.rank]):
        raise PtxError(f"{where}: a tensor store box starting at a negative coordinate {tuple(coords[:f.rank])} "
                       "(the H100 faults: illegal instruction)")


def _smem_bytes(f: fmt.TensorMapFields, dst: int, nelem: int):
    """Physical shared offsets of each byte of a box of ``nelem`` elements stored from ``dst``."""
    lin = dst + np.arange(nelem * _unit(f), dtype=np.int64)
    return _swizzle(lin, _SWZ_NAMES[f.swizzle])


def _gmem(ctx, where):
    g = ctx.space("global", where)
    return getattr(g, "inner", g), g


def _gstore(ctx, logged, row: int, addr, data, unit: int, where: str) -> None:
    """Store ``data`` ((n, unit) bytes) at ``addr`` for the CTA of batch row ``row``; through
    the sanitizer's recorder (when there is one) as that CTA's access."""
    if not hasattr(logged, "inner"):
        logged.store(addr, data, None, where, unit)
        return
    nb = int(np.prod(ctx.batch, dtype=np.int64))
    local = row - getattr(ctx, "cta_base", 0)
    A = np.zeros((nb, addr.size), np.uint64)
    A[local] = addr
    M = np.zeros((nb, addr.size), bool)
    M[local] = True
    D = np.zeros((nb,) + data.shape, np.uint8)
    D[local] = data
    logged.store(A, D, M, where, unit)


def _tile_load_data(ctx, f, coords, where, offsets=None, four=False):
    if four:
        off, inb, n = gather4_coords(f, coords)
    elif offsets is not None:
        off, inb, n = im2col_coords(f, coords, offsets)
    else:
        off, inb, n = (interleave_coords if f.interleave else tile_coords)(f, coords)
    esz = _unit(f)
    gm, _ = _gmem(ctx, where)
    data = np.zeros((off.size, esz), np.uint8)
    if f.fill:
        data[...] = np.frombuffer(np.full(esz // 2 or 1, NAN_FILL, np.uint16).tobytes(), np.uint8)[:esz]
    addr = np.uint64(f.address) + off[inb].astype(np.uint64)
    if inb.any():
        data[inb] = gm.load(addr, esz, None, where, esz)
    return data.reshape(-1), off.size, addr


def _bytes_of(addr, n: int) -> np.ndarray:
    """Every byte of ``n``-byte items at ``addr`` (uint64), flattened."""
    return (np.asarray(addr, np.uint64).reshape(-1, 1) + np.arange(n, dtype=np.uint64)).reshape(-1)


# --------------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------------
_RED_DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
           "u32": np.uint32, "s32": np.int32, "u64": np.uint64, "s64": np.int64, "b32": np.uint32,
           "b64": np.uint64, "u16": np.uint16}
_CANON_NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF, "bf16": 0x7FFF, "f64": 0x7FFFFFFFFFFFFFFF}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _reduce(op: str, t: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Element-wise ``old op new`` on raw bytes (n, size) -> bytes; float add rounds to nearest,
    keeps subnormals, gives the canonical NaN (measured, H100)."""
    dt = np.dtype(_RED_DT[t])
    a, b = old.reshape(-1).view(dt), new.reshape(-1).view(dt)
    with np.errstate(all="ignore"):
        if op == "add":
            if t in _CANON_NAN:
                r = (a.astype(np.float64) + b.astype(np.float64)).astype(dt) if t != "f64" else a + b
                bits = r.view(_UINT[dt.itemsize]).copy()
                bits[np.isnan(r.astype(np.float64))] = _CANON_NAN[t]
                return bits.view(np.uint8)
            r = a + b
        elif op == "min":
            r = np.minimum(a, b)
        elif op == "max":
            r = np.maximum(a, b)
        elif op == "and":
            r = a & b
        elif op == "or":
            r = a | b
        elif op == "xor":
            r = a ^ b
        elif op == "inc":
            r = np.where(a >= b, 0, a + 1).astype(dt)
        elif op == "dec":
            r = np.where((a == 0) | (a > b), b, a - 1).astype(dt)
        else:  # pragma: no cover - rejected when decoded
            raise PtxError(f"reduction .{op} is not supported")
    return np.ascontiguousarray(r.astype(dt)).view(np.uint8)


def _red_words(ins, words):
    op = next((w for w in words if w in ("add", "min", "max", "and", "or", "xor", "inc", "dec")), None)
    t = next((w for w in words if w in _RED_DT), None)
    if op is None or t is None:
        raise PtxError(f"{ins.text}: cp.reduce.async.bulk needs a reduction (.add, .min, ...) and a type")
    if t in ("f16", "bf16") and "noftz" not in words and op == "add":
        raise PtxError(f"{ins.text}: .add.{t} requires .noftz")
    return op, t


# --------------------------------------------------------------------------------------------
# cp.async.bulk.tensor / cp.reduce.async.bulk.tensor
# --------------------------------------------------------------------------------------------
def _compile_tensor(ins, dec):
    words = list(ins.words)
    reduce_ = ins.key == "cp.reduce.async.bulk.tensor"
    if not words or words[0] not in ("1d", "2d", "3d", "4d", "5d"):
        raise PtxError(f"{ins.text}: {ins.key} needs a dimension .1d ... .5d")
    rank = int(words.pop(0)[0])
    pair = "cta_group::2" in words  # may come before the state spaces (ptxas takes either order)
    words = [w for w in words if w not in ("cta_group::1", "cta_group::2")]
    store = len(words) >= 2 and words[0] == "global"
    if store:
        if words[1] != "shared::cta":
            raise PtxError(f"{ins.text}: tensor stores copy .global.shared::cta")
        words = words[2:]
    else:
        if len(words) < 2 or words[0] not in ("shared::cluster", "shared::cta") or words[1] != "global":
            raise PtxError(f"{ins.text}: tensor loads copy .shared::cluster.global (or .shared::cta.global)")
        words = words[2:]
    op = None
    if reduce_:
        op = next((w for w in words if w in ("add", "min", "max", "and", "or", "xor", "inc", "dec")), None)
        if op is None:
            raise PtxError(f"{ins.text}: cp.reduce.async.bulk.tensor needs a reduction")
    multicast = "multicast::cluster" in words
    if pair and store:
        raise PtxError(f"{ins.text}: .cta_group::2 is for tensor loads")
    for w in words:
        if w in ("tile", "mbarrier::complete_tx::bytes", "bulk_group", "multicast::cluster", "cta_group::1",
                 "cta_group::2",
                 "add", "min", "max", "and", "or", "xor", "inc", "dec") or w in _IGNORED:
            continue
        if w == "im2col" and not store and not reduce_:
            continue
        if (w == "tile::gather4" and not store) or (w == "tile::scatter4" and store and not reduce_):
            if rank != 2:
                raise PtxError(f"{ins.text}: .{w} takes a 2d tensor")
            if dec.arch.startswith("sm_90"):
                raise PtxError(f"{ins.text}: .{w} needs sm_100 or later (got {dec.arch})")
            continue
        if w.startswith("im2col") or w.startswith("tile::"):
            raise PtxError(f"{ins.text}: .{w} mode is not supported (tile and, for loads, im2col only)")
        raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {ins.key}")
    ops = list(ins.operands)
    if store:
        if len(ops) < 2:
            raise PtxError(f"{ins.text}: {ins.key} takes [tensorMap, {{coords}}], [srcMem]")
        mapop, srcop = ops[0], ops[1]
    else:
        if len(ops) < 3:
            raise PtxError(f"{ins.text}: {ins.key} takes [dstMem], [tensorMap, {{coords}}], [mbar]")
        srcop, mapop, barop = ops[0], ops[1], ops[2]
    if not isinstance(mapop, Addr) or not isinstance(getattr(mapop, "vec", None), Vec):
        raise PtxError(f"{ins.text}: the tensor operand must be [tensorMap, {{c0, ...}}]")
    coords = mapop.vec.items
    four = "tile::gather4" in words or "tile::scatter4" in words
    if len(coords) != (5 if four else rank):
        raise PtxError(f"{ins.text}: .{rank}d takes {5 if four else rank} coordinates"
                       + (" (column, then four rows)" if four else "") + f", got {len(coords)}")
    rcoords = [dec.reader(c, "b32") for c in coords]
    rmap = _map_address(dec, Addr(mapop.base, mapop.offset, mapop.text))
    rmem = dec.address(srcop)
    rbar = None if store else dec.address(barop)
    im2col = "im2col" in words
    roffs = None
    if im2col:
        if rank < 3:
            raise PtxError(f"{ins.text}: im2col mode needs a 3d, 4d or 5d tensor")
        if len(ops) < 4 or not isinstance(ops[3], Vec) or len(ops[3].items) != rank - 2:
            raise PtxError(f"{ins.text}: .im2col takes {{{', '.join(['off'] * (rank - 2))}}} ({rank - 2} 16-bit "
                           "im2col offsets) after [mbar]")
        roffs = [dec.reader(x, "b16") for x in ops[3].items]
        ops = ops[:3] + ops[4:]
    rmask = dec.reader(ops[3], "b16") if multicast and len(ops) > 3 else None
    if multicast and rmask is None:
        raise PtxError(f"{ins.text}: .multicast::cluster takes a ctaMask operand")
    where = dec.where

    def run(ctx, mask):
        m = _active(ctx, mask)
        maps = _read_maps(ctx, rmap(ctx), m, where)
        cs = np.stack([np.broadcast_to(np.asarray(r(ctx)).astype(np.uint32).view(np.int32), ctx.shape)[m]
                       for r in rcoords], 1)
        blk, rows, offs = _shared_rows(ctx, rmem(ctx), m, where, cluster=not store)
        if not store:
            braw = rbar(ctx)
            _, brows, boffs = _shared_rows(ctx, braw, m, where, cluster=True)
            # warpsim's shared::cta offsets carry no cluster rank: with .cta_group::2 such an
            # offset names the even CTA of the pair, as CUTLASS's peer-bit mask (bit 24 cleared)
            # makes it on hardware  [INF; CuTe SM100_TMA_2SM_LOAD]
            bplain = (np.broadcast_to(np.asarray(braw, np.uint64), ctx.shape)[m] >> np.uint64(RANK_SHIFT)) == 0
            cmask = None if rmask is None else np.broadcast_to(np.asarray(rmask(ctx)), ctx.shape)[m]
        os_ = None if roffs is None else np.stack(
            [np.broadcast_to(np.asarray(r(ctx)).astype(np.uint16), ctx.shape)[m].astype(np.int64) for r in roffs], 1)
        for k, f in enumerate(maps):
            if f.rank != rank:
                raise PtxError(f"{where}: a .{rank}d copy through a rank-{f.rank} tensor map")
            if f.im2col != (roffs is not None):
                raise PtxError(f"{where}: a {'.im2col' if roffs is not None else 'tile'} copy through "
                               f"{'an im2col' if f.im2col else 'a tile'} tensor map")
            if f.interleave and (store or four):
                raise PtxError(f"{where}: {'gather4/scatter4 copies' if four else 'stores and reductions'} through "
                               f"interleaved tensor maps (interleave {INTERLEAVE_CHUNK.get(f.interleave)}B) are "
                               "not modelled")
            _check_tile(f, cs[k], where, store and not four)
            if f.im2col:
                _check_im2col_start(f, cs[k], where)
            if four and f.box[1] != 1:
                raise PtxError(f"{where}: gather4/scatter4 need a tensor map whose box has 1 row (box {f.box})")
            if store:
                _tile_store(ctx, blk, f, cs[k], int(rows[k]), int(offs[k]), where, op, reduce_, four)
                continue
            data, nelem, gaddr = _tile_load_data(ctx, f, cs[k], where, None if os_ is None else os_[k], four)
            dst = int(offs[k])
            if dst % 128:
                raise PtxError(f"{where}: tensor-copy destination shared address {dst:#x} is not 128-byte aligned")
            phys = _smem_bytes(f, dst, nelem)
            if phys.max() >= blk.smem.size:
                raise PtxError(f"{where}: the box ({nelem * _unit(f)} bytes at shared {dst:#x}) overflows "
                               f"the CTA's {blk.smem.size} bytes of shared memory")
            targets = [int(rows[k])]
            if cmask is not None:
                base = int(rows[k]) - int(rows[k]) % blk.size
                targets = [base + r for r in range(blk.size) if int(cmask[k]) >> r & 1]
            gbytes = _bytes_of(gaddr, _unit(f)) if blk.defer else None
            for tr in targets:
                brow = tr - int(rows[k]) + int(brows[k])
                if pair:  # [ISA] .cta_group::2: the barrier at the mbar offset in the CTA of the
                    # target's pair that has the parity (cluster rank bit 0) of the CTA holding mbar
                    base = tr - tr % blk.size
                    odd = 0 if bplain[k] else (int(brows[k]) - base) & 1
                    brow = base + (((tr - base) & ~1) | odd)
                blk.async_load(tr, phys, data, (brow, int(boffs[k])), where, complete=len(data), gbytes=gbytes)
    return run


def _tile_store(ctx, blk, f, coords, row, src, where, op, reduce_, four=False):
    off, inb, n = (gather4_coords if four else tile_coords)(f, coords, chunks=True)
    esz = f.elem_bytes
    phys = _smem_bytes(f, src, off.size)
    if phys.max() >= blk.smem.size:
        raise PtxError(f"{where}: the box overflows the CTA's shared memory")
    blk.check_async_read(np.full(phys.shape, row), phys, where)
    data = blk.data[row, phys].reshape(-1, esz)[inb]
    if not inb.any():
        return
    gm, logged = _gmem(ctx, where)
    addr = np.uint64(f.address) + off[inb].astype(np.uint64)
    if reduce_:
        t = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f32_ftz": "f32", "tf32": "f32", "tf32_ftz": "f32",
             "f64": "f64", "u32": "u32", "s32": "s32", "u64": "u64", "s64": "s64", "u16": "u16"}.get(f.dtype_name)
        if t is None:
            raise PtxError(f"{where}: no .{op} reduction on {f.dtype_name} tensors")
        old = gm.load(addr, esz, None, where, esz)
        data = _reduce(op, t, old, data).reshape(-1, esz)
    _gstore(ctx, logged, row, addr, data, esz, where)
    if blk.defer:
        blk.async_store(ctx, row, phys, _bytes_of(addr, esz), where)


# --------------------------------------------------------------------------------------------
# non-tensor bulk copies
# --------------------------------------------------------------------------------------------
def _compile_bulk(ins, dec):
    words = list(ins.words)
    reduce_ = ins.key == "cp.reduce.async.bulk"
    if len(words) < 2:
        raise PtxError(f"{ins.text}: {ins.key} needs .dst.src state spaces")
    dst, src = words[0], words[1]
    rest = words[2:]
    kinds = {("shared::cluster", "global"), ("shared::cta", "global"), ("shared::cluster", "shared::cta"),
             ("global", "shared::cta")}
    if (dst, src) not in kinds:
        raise PtxError(f"{ins.text}: {ins.key} copies .shared::cluster.global, .shared::cta.global, "
                       ".shared::cluster.shared::cta or .global.shared::cta")
    multicast = "multicast::cluster" in rest
    op = t = None
    if reduce_:
        op, t = _red_words(ins, rest)
    for w in rest:
        if w in ("mbarrier::complete_tx::bytes", "bulk_group", "multicast::cluster", "noftz", op, t) \
                or w in _IGNORED:
            continue
        raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {ins.key}")
    ops = list(ins.operands)
    to_smem = dst != "global"
    if len(ops) < (4 if to_smem else 3):
        raise PtxError(f"{ins.text}: {ins.key} takes [dst], [src], size" + (", [mbar]" if to_smem else ""))
    rdst, rsrc = dec.address(ops[0]), dec.address(ops[1])
    rsize = dec.reader(ops[2], "b32")
    rbar = dec.address(ops[3]) if to_smem else None
    rmask = dec.reader(ops[4], "b16") if multicast else None
    where = dec.where

    def run(ctx, mask):
        m = _active(ctx, mask)
        size = np.broadcast_to(np.asarray(rsize(ctx)), ctx.shape)[m].astype(np.int64)
        if (size % 16).any():
            raise PtxError(f"{where}: bulk copy size {int(size[size % 16 != 0][0])} is not a multiple of 16")
        da, sa = np.asarray(rdst(ctx), np.uint64), np.asarray(rsrc(ctx), np.uint64)
        for name, a in (("destination", da[m]), ("source", sa[m])):
            if (a % np.uint64(16)).any():
                raise PtxError(f"{where}: bulk copy {name} address {int(a[a % np.uint64(16) != 0][0]):#x} "
                               "is not 16-byte aligned")
        blk = block(ctx, where)
        gm, logged = _gmem(ctx, where)
        if src == "global":
            sdat = [gm.load(np.array([int(a)], np.uint64), int(n), None, where, 1)[0] for a, n in zip(sa[m], size)]
        else:
            _, srows, soffs = _shared_rows(ctx, sa, m, where, cluster=False)
            sdat = []
            for r, o, n in zip(srows, soffs, size):
                idx = np.arange(int(o), int(o) + int(n))
                if idx[-1] >= blk.smem.size:
                    raise PtxError(f"{where}: bulk copy source overflows shared memory")
                blk.check_async_read(np.full(idx.shape, r), idx, where)
                sdat.append(blk.data[r, idx].copy())
        if not to_smem:
            own = np.broadcast_to(blk.rows(ctx)[..., None], ctx.shape)[m]
            for a, d, r, so in zip(da[m], sdat, own, soffs):
                addr = np.array([int(a)], np.uint64)
                if reduce_:
                    old = gm.load(addr, d.size, None, where, 1)[0]
                    d = _reduce(op, t, old, d)
                _gstore(ctx, logged, int(r), addr, d[None], 1, where)
                if blk.defer:
                    blk.async_store(ctx, int(r), np.arange(int(so), int(so) + d.size), _bytes_of(addr, d.size), where)
            return
        _, drows, doffs = _shared_rows(ctx, da, m, where, cluster=True)
        _, brows, boffs = _shared_rows(ctx, rbar(ctx), m, where, cluster=True)
        own = np.broadcast_to(blk.rows(ctx)[..., None], ctx.shape)[m]
        cm = None if rmask is None else np.broadcast_to(np.asarray(rmask(ctx)), ctx.shape)[m]
        for k, d in enumerate(sdat):
            targets = [(int(drows[k]), int(brows[k]))]
            if cm is not None:
                base = int(own[k]) - int(own[k]) % blk.size
                targets = [(base + r, base + r) for r in range(blk.size) if int(cm[k]) >> r & 1]
            for tr, br in targets:
                idx = np.arange(int(doffs[k]), int(doffs[k]) + d.size)
                if idx[-1] >= blk.smem.size:
                    raise PtxError(f"{where}: bulk copy destination overflows shared memory")
                red = (lambda old, d=d: _reduce(op, t, old, d)) if reduce_ else None
                gb = _bytes_of(np.array([int(sa[m][k])]), d.size) if blk.defer and src == "global" else None
                blk.async_load(tr, idx, d, (br, int(boffs[k])), where, complete=d.size, reduce=red, gbytes=gb)
    return run


# --------------------------------------------------------------------------------------------
# groups, prefetches, tensormap maintenance
# --------------------------------------------------------------------------------------------
def _compile_group(ins, dec):
    words = set(ins.words)
    if ins.key == "cp.async.bulk.commit_group":
        if words or ins.operands:
            raise PtxError(f"{ins.text}: cp.async.bulk.commit_group takes no qualifiers or operands")
    else:
        if words - {"read"}:
            raise PtxError(f"{ins.text}: qualifier .{sorted(words - {'read'})[0]} is not supported")
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise PtxError(f"{ins.text}: cp.async.bulk.wait_group takes one integer constant")
    commit = ins.key == "cp.async.bulk.commit_group"
    n = 0 if commit else int(ins.operands[0].value)
    read = "read" in words

    def run(ctx, mask):
        blk = getattr(ctx, "block", None)
        if blk is None or not blk.defer:
            return
        if commit:
            blk.bulk_commit(ctx)
        else:
            blk.bulk_wait(ctx, n, read)
    return run


def _compile_prefetch(ins, dec):
    for w in ins.words:
        if w not in ("tensormap", "global", "local", "L1", "L2", "const", "param", "L2::evict_last",
                     "L2::evict_normal", "L2::cache_hint", "shared::cta", "shared::cluster") \
                and not w.startswith("L2::"):
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {ins.key}")
    if not ins.operands or not isinstance(ins.operands[0], Addr):
        raise PtxError(f"{ins.text}: {ins.key} takes [address]")
    return lambda ctx, mask: None


def _compile_bulk_prefetch(ins, dec):
    if not ins.operands or not isinstance(ins.operands[0], Addr):
        raise PtxError(f"{ins.text}: {ins.key} takes [address] operands")
    return lambda ctx, mask: None


_FIELDS = ("global_address", "rank", "box_dim", "global_dim", "global_stride", "element_stride", "elemtype",
           "interleave_layout", "swizzle_mode", "fill_mode")


def replace_field(raw: bytearray, field: str, ordinal: int | None, value: int, where: str = "") -> None:
    """Write one tensor-map field into 128 bytes ``raw`` as ``tensormap.replace`` does (the
    derived words, box bytes and pattern size, are left as they are)."""
    def put(o, n, v):
        raw[o:o + n] = int(v).to_bytes(n, "little")

    def get(o, n):
        return int.from_bytes(raw[o:o + n], "little")

    def flags(lo, width, v):
        w = get(8, 4)
        w = (w & ~(((1 << width) - 1) << lo)) | ((int(v) & ((1 << width) - 1)) << lo)
        put(8, 4, w)

    if ordinal is not None and not 0 <= ordinal <= 4:
        raise PtxError(f"{where}: ordinal {ordinal} is outside 0..4")
    if field == "global_address":
        put(0, 8, value)
    elif field == "rank":
        flags(4, 3, value)
    elif field == "box_dim":
        raw[55 + ordinal] = (value - 1) & 0xFF
    elif field == "global_dim":
        put(32 + 4 * ordinal, 4, (value - 1) & 0xFFFFFFFF)
    elif field == "global_stride":
        if ordinal > 3:
            raise PtxError(f"{where}: global_stride ordinal {ordinal} is outside 0..3")
        v = int(value) >> 4
        put(12 + 4 * ordinal, 4, v & 0xFFFFFFFF)
        hi = get(28, 4)
        hi = (hi & ~(0xF << (4 * ordinal))) | (((v >> 32) & 0xF) << (4 * ordinal))
        put(28, 4, hi)
    elif field == "element_stride":
        es = get(52, 3)
        es = (es & ~(7 << (3 * ordinal))) | (((value - 1) & 7) << (3 * ordinal))
        put(52, 3, es)
    elif field == "elemtype":
        drv = fmt.PTX_ELEMTYPE.get(int(value))
        if drv is None:
            raise PtxError(f"{where}: elemtype {value} is not supported on sm_90")
        code, tf32 = fmt.STORED_TYPE[drv]
        flags(7, 4, code)
        flags(16, 1, tf32)
    elif field == "interleave_layout":
        flags(11, 2, value)
    elif field == "swizzle_mode":
        if value > 3:
            raise PtxError(f"{where}: swizzle_mode {value} is not supported on sm_90")
        flags(13, 2, value)
    elif field == "fill_mode":
        flags(15, 1, value)
    else:  # pragma: no cover - rejected when decoded
        raise PtxError(f"{where}: unknown tensormap field {field}")


def _compile_replace(ins, dec):
    words = list(ins.words)
    if not words or words[0] != "tile":
        raise PtxError(f"{ins.text}: tensormap.replace takes .tile")
    if len(words) < 2 or words[1] not in _FIELDS:
        raise PtxError(f"{ins.text}: tensormap.replace field must be one of {', '.join(_FIELDS)}")
    field = words[1]
    space = None
    for w in words[2:]:
        if w in ("global", "shared::cta"):
            space = "shared" if w == "shared::cta" else "global"
        elif w not in ("b1024", "b32", "b64"):
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for tensormap.replace")
    ordered = field in ("box_dim", "global_dim", "global_stride", "element_stride")
    ops = list(ins.operands)
    if len(ops) != (3 if ordered else 2):
        raise PtxError(f"{ins.text}: tensormap.replace.tile.{field} takes [addr], " + ("ord, " if ordered else "")
                       + "value")
    if ordered and not isinstance(ops[1], Imm):
        raise PtxError(f"{ins.text}: the ordinal must be an integer constant")
    ordinal = int(ops[1].value) if ordered else None
    rval = dec.reader(ops[-1], "b64" if "b64" in words else "b32")
    raddr = dec.address(ops[0])
    where = dec.where

    def run(ctx, mask):
        m = _active(ctx, mask)
        a = np.asarray(raddr(ctx), np.uint64)
        raw = _gload(ctx, space, a, 128, m, where, 64)
        vals = np.broadcast_to(np.asarray(rval(ctx)), ctx.shape)
        out = raw.copy()
        for idx in np.argwhere(m):
            idx = tuple(idx)
            b = bytearray(raw[idx].tobytes())
            replace_field(b, field, ordinal, int(vals[idx]), where)
            out[idx] = np.frombuffer(bytes(b), np.uint8)
        from warpsim.ptx.ops.datamove import store
        store(ctx, space, a, out, m, where, 64)
    return run


def _compile_cp_fenceproxy(ins, dec):
    ops = list(ins.operands)
    if len(ops) != 3 or not isinstance(ops[2], Imm) or int(ops[2].value) != 128:
        raise PtxError(f"{ins.text}: tensormap.cp_fenceproxy takes [dst], [src], 128")
    rd, rs = dec.address(ops[0]), dec.address(ops[1])
    where = dec.where

    def run(ctx, mask):
        from warpsim.ptx.ops.datamove import store
        m = _active(ctx, mask)
        data = _gload(ctx, "shared", np.asarray(rs(ctx), np.uint64), 128, m, where, 64)
        store(ctx, "global", np.asarray(rd(ctx), np.uint64), data, m, where, 64)
    return run


def _spec(key, compile, doc, aligned=False):
    return OpSpec(key, (), None, 0, ndst=0, compile=compile, doc=doc, aligned=aligned)


OPS: dict[str, OpSpec] = {
    "cp.async.bulk": _spec("cp.async.bulk", _compile_bulk,
                           "bulk copy global/shared::cta -> shared::cluster (mbarrier complete_tx), "
                           "shared::cta -> global (bulk group); .multicast::cluster"),
    "cp.reduce.async.bulk": _spec("cp.reduce.async.bulk", _compile_bulk, "bulk reduction (add, min, max, ...)"),
    "cp.async.bulk.tensor": _spec("cp.async.bulk.tensor", _compile_tensor,
                                  "TMA tile load (OOB fill, swizzle, multicast) or store (clipped), 1D-5D"),
    "cp.reduce.async.bulk.tensor": _spec("cp.reduce.async.bulk.tensor", _compile_tensor,
                                         "TMA tile reduction into global memory"),
    "cp.async.bulk.commit_group": _spec("cp.async.bulk.commit_group", _compile_group,
                                        "close a bulk async-group (copies complete at issue)"),
    "cp.async.bulk.wait_group": _spec("cp.async.bulk.wait_group", _compile_group,
                                      "wait for bulk async-groups (.read: their source reads)"),
    "cp.async.bulk.prefetch": _spec("cp.async.bulk.prefetch", _compile_bulk_prefetch, "L2 prefetch: no effect"),
    "prefetch": _spec("prefetch", _compile_prefetch, "prefetch (.tensormap, .L1/.L2): no effect"),
    "prefetchu": _spec("prefetchu", _compile_prefetch, "prefetch: no effect"),
    "tensormap.replace": _spec("tensormap.replace", _compile_replace,
                               "write one field of a 128-byte tensor map in global or shared memory"),
    "tensormap.cp_fenceproxy": _spec("tensormap.cp_fenceproxy", _compile_cp_fenceproxy,
                                     "copy a tensor map shared -> global and release it to the tensormap proxy",
                                     aligned=True),
}
