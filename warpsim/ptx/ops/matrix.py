"""Warp-wide matrix moves: ``ldmatrix``, ``stmatrix``, ``movmatrix``.

``ldmatrix .m8n8 .b16``: lane 8j+i holds the address of row i (16 bytes, 16-byte aligned) of
matrix j; lane L = 4g+t receives in register j the pair M_j[g][2t] (low half), M_j[g][2t+1]
(high half), or with ``.trans`` M_j[2t][g], M_j[2t+1][g].  ``stmatrix`` is its inverse.
``movmatrix .m8n8.trans.b16`` transposes the 8x8 fragment held one pair per lane.

sm_100+ forms (``a``/``f`` targets; not checked on hardware by warpsim, derived from CuTe's
copy atoms and third-party measurements, see docs/ptx.md): ``ldmatrix .m16n16 .x1/.x2 .trans
.b8`` (lanes 16m..16m+15 address the 16 rows of matrix m; register 2m+h byte e of lane 4g+t =
row 4t+e, column g+8h), its packed sources ``.b8x16.b6x16_p32``/``.b8x16.b4x16_p64`` (16 6- or
4-bit elements per row unpacked one per byte), ``ldmatrix .m8n16`` with those sources (register
j of lane 4g+t = bytes 4t..4t+3 of row g of matrix j), and ``stmatrix .m16n8 .trans .b8``
(register j byte e of lane 4g+t goes to row 2t+(e&1), column g+8(e>>1) of matrix j).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS
from warpsim.ptx.ops.datamove import load, store
from warpsim.ptx.memory import FlatMemory
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Vec

_L = np.arange(32)
_G, _T = _L // 4, _L % 4
# stmatrix .trans: memory row r, column c holds M[c][r], which lane 4c + r//2 has in half r%2
_TRANS_LANE = 4 * np.arange(8)[None, :] + np.arange(8)[:, None] // 2  # [r][c]
_TRANS_HALF = np.broadcast_to(np.arange(8)[:, None] % 2, (8, 8))


# .m8n8 fast path (all lanes active, plain shared memory): a row of 16 bytes is one complex128
# item (copied, never computed on), gathered in (matrix, *batch, row) order, so that register j
# of lane 4g+t is word t of row g of matrix j: element [j, ..., 4g + t] of the rows viewed as
# uint32.  .trans exchanges each 8x8 block of 16-bit elements.

def _rows_index(ctx, space, addr, n, where, store=False):
    """(items view, (n, *batch, 8) row index) or None where the general path must run."""
    sp = ctx.spaces.get(space)
    if sp.__class__ is not FlatMemory or store and sp.readonly:
        return None
    got = sp.units(addr, 16, where)
    if got is None:
        return None
    view, idx = got
    b = idx.ndim - 1  # batch dimensions: (*batch, 8n) -> (n, *batch, 8)
    idx = idx.reshape(idx.shape[:-1] + (n, 8))
    return view, (np.ascontiguousarray(idx.transpose((b,) + tuple(range(b)) + (b + 1,))) if b else idx)


def _rows_fast(ctx, space, addr, n, where):
    """The n matrices' rows: one (n, *batch, 8) gather."""
    got = _rows_index(ctx, space, addr, n, where)
    if got is None:
        return None
    view, idx = got
    return view[idx]


def _ld_trans(rows: np.ndarray) -> np.ndarray:
    """(n, ..., 8) rows -> (n, ..., 32) words of ldmatrix .trans: (M[2t][g], M[2t+1][g])."""
    h = rows.view(np.uint16).reshape(rows.shape + (8,))  # [j, ..., r, c]
    return np.ascontiguousarray(h.swapaxes(-1, -2)).view(np.uint32).reshape(rows.shape[:-1] + (32,))


def _st_trans(words: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_ld_trans`: (n, ..., 32) words -> (n, ..., 32) row words."""
    h = words.view(np.uint16).reshape(words.shape[:-1] + (8, 8))  # [j, ..., g, 2t + h]
    return np.ascontiguousarray(h.swapaxes(-1, -2)).view(np.uint32).reshape(words.shape)


def _space(words, ins):
    sp = None
    for w in list(words):
        if w in ("shared", "shared::cta"):
            sp = "shared"
            words.remove(w)
    return sp


def _num(words, ins, allowed):
    for w in list(words):
        if w in ("x1", "x2", "x4"):
            words.remove(w)
            n = int(w[1])
            if n not in allowed:
                raise PtxError(f"{ins.text}: .{w} is not legal for this shape")
            return n
    raise PtxError(f"{ins.text}: needs .x1, .x2 or .x4")


def _take(words, token):
    if token in words:
        words.remove(token)
        return True
    return False


def _need_sm100(ins, dec):
    if dec.arch in (None, "exact", "auto"):  # any target ("auto" picks one that has the form)
        return
    a = ARCHS.get(dec.arch)
    if a is None or a.sm < 100 or a.suffix not in ("a", "f"):
        raise PtxError(f"{ins.text}: this form requires sm_100a/sm_110a/sm_120a (or an f "
                       f"target); the warp runs {dec.arch}")


def _regs(ins, dec, op, n, write):
    if not isinstance(op, Vec) or len(op.items) != n:
        raise PtxError(f"{ins.text}: needs a vector of {n} 32-bit registers {{...}}")
    if write:
        return [dec.writer(x, "b32") for x in op.items]
    return [dec.reader(x, "b32") for x in op.items]


def _unpack_row(raw16: np.ndarray, src: str) -> np.ndarray:
    """(..., 16) bytes of a source row -> (..., 16) bytes, one element per byte."""
    if src == "b8":
        return raw16
    w = 6 if src == "b6x16_p32" else 4
    bitsv = np.unpackbits(raw16, axis=-1, bitorder="little")  # (..., 128)
    el = bitsv[..., :16 * w].reshape(raw16.shape[:-1] + (16, w))
    return np.packbits(el, axis=-1, bitorder="little")[..., 0]


def _matrix_words(ins):
    """(remaining qualifiers, state space, .trans) of ldmatrix/stmatrix; .sync, .aligned and
    .ss are optional and taken off."""
    words = list(ins.words)
    _take(words, "sync")
    _take(words, "aligned")
    space = _space(words, ins)
    trans = _take(words, "trans")
    _take(words, "ss")
    return words, space, trans


def _compile_ldmatrix(ins, dec):
    words, space, trans = _matrix_words(ins)
    where = dec.where
    if _take(words, "m8n8"):
        n = _num(words, ins, (1, 2, 4))
        if words != ["b16"]:
            raise PtxError(f"{ins.text}: ldmatrix.m8n8 takes .b16 (got {'.'.join(words)})")
        regs = _regs(ins, dec, ins.operands[0], n, True)
        raddr = dec.address(ins.operands[1])
        rows = 8 * n

        def run(ctx, mask):
            addr = raddr(ctx)
            addr = (addr if addr.shape == ctx.shape else np.broadcast_to(addr, ctx.shape))[..., :rows]
            if mask is None:
                got = _rows_fast(ctx, space, addr, n, where)
                if got is not None:  # n times (*batch, 8) rows of 16 bytes
                    words = _ld_trans(got) if trans else got.view(np.uint32)  # all n at once
                    for part, wr in zip(words, regs):
                        wr(ctx, part, None)
                    return
            m = None if mask is None else mask[..., :rows]
            raw = load(ctx, space, addr, 16, m, where, 16)  # (..., rows, 16): row r from lane r
            if trans:
                h16 = raw.view(np.uint16)  # (..., 32 rows, 8)
                for j, wr in enumerate(regs):
                    lo = h16[..., 8 * j + 2 * _T, _G].astype(np.uint32)
                    hi = h16[..., 8 * j + 2 * _T + 1, _G].astype(np.uint32)
                    wr(ctx, lo | (hi << np.uint32(16)), mask)
            else:
                w32 = raw.view(np.uint32)  # (..., 32 rows, 4)
                for j, wr in enumerate(regs):
                    wr(ctx, w32[..., 8 * j + _G, _T], mask)
        return run
    if _take(words, "m16n16"):
        _need_sm100(ins, dec)
        n = _num(words, ins, (1, 2))
        if not trans:
            raise PtxError(f"{ins.text}: ldmatrix.m16n16 requires .trans")
        src = _src_format(words, ins, allow_b8=True)
        regs = _regs(ins, dec, ins.operands[0], 2 * n, True)
        raddr = dec.address(ins.operands[1])
        rowmask = _L < 16 * n

        def run16(ctx, mask):
            m = rowmask if mask is None else (mask & rowmask)
            raw = _unpack_row(load(ctx, space, raddr(ctx), 16, np.broadcast_to(m, ctx.shape),
                                   where, 16), src)
            for mi in range(n):
                for h in range(2):
                    out = np.zeros(ctx.shape, np.uint32)
                    for e in range(4):
                        b = raw[..., 16 * mi + 4 * _T + e, _G + 8 * h].astype(np.uint32)
                        out |= b << np.uint32(8 * e)
                    regs[2 * mi + h](ctx, out, mask)
        return run16
    if _take(words, "m8n16"):
        _need_sm100(ins, dec)
        n = _num(words, ins, (1, 2, 4))
        if trans:
            raise PtxError(f"{ins.text}: ldmatrix.m8n16 has no .trans")
        src = _src_format(words, ins, allow_b8=False)
        regs = _regs(ins, dec, ins.operands[0], n, True)
        raddr = dec.address(ins.operands[1])
        rowmask = _L < 8 * n

        def run816(ctx, mask):
            m = rowmask if mask is None else (mask & rowmask)
            raw = _unpack_row(load(ctx, space, raddr(ctx), 16, np.broadcast_to(m, ctx.shape),
                                   where, 16), src)
            w32 = np.ascontiguousarray(raw).view(np.uint32)
            for j, wr in enumerate(regs):
                wr(ctx, w32[..., 8 * j + _G, _T], mask)
        return run816
    raise PtxError(f"{ins.text}: ldmatrix needs a shape .m8n8 (or .m16n16/.m8n16 on sm_100+)")


def _src_format(words, ins, allow_b8):
    if words == ["b8"] and allow_b8:
        return "b8"
    if len(words) == 2 and words[0] == "b8x16" and words[1] in ("b6x16_p32", "b4x16_p64"):
        return words[1]
    raise PtxError(f"{ins.text}: unsupported element format .{'.'.join(words)}")


def _compile_stmatrix(ins, dec):
    words, space, trans = _matrix_words(ins)
    where = dec.where
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: stmatrix takes [p], {{r...}}")
    if _take(words, "m8n8"):
        n = _num(words, ins, (1, 2, 4))
        if words != ["b16"]:
            raise PtxError(f"{ins.text}: stmatrix.m8n8 takes .b16")
        srcs = _regs(ins, dec, ins.operands[1], n, False)
        raddr = dec.address(ins.operands[0])

        def run(ctx, mask):
            if mask is None:
                addr = raddr(ctx)
                addr = (addr if addr.shape == ctx.shape else np.broadcast_to(addr, ctx.shape))[..., :8 * n]
                got = _rows_index(ctx, space, addr, n, where, store=True)
                if got is not None:
                    view, idx = got
                    words = np.empty((n,) + ctx.shape, np.uint32)
                    for j, r in enumerate(srcs):
                        words[j] = r(ctx)
                    view[idx] = (_st_trans(words) if trans else words).view(np.complex128)
                    return
            rows = np.zeros(ctx.shape + (4,), np.uint32)  # row data by the lane that addresses it
            for j, r in enumerate(srcs):
                v = np.broadcast_to(r(ctx), ctx.shape)
                if trans:
                    h = v[..., None].view(np.uint16)  # (..., 32, 2): lane 4g+t: M[g][2t], M[g][2t+1]
                    row16 = h[..., _TRANS_LANE, _TRANS_HALF]  # (..., 8, 8)
                    rows[..., 8 * j:8 * j + 8, :] = np.ascontiguousarray(row16.astype(np.uint16)).view(np.uint32)
                else:
                    rows[..., 8 * j:8 * j + 8, :] = v.reshape(v.shape[:-1] + (8, 4))
            k = 8 * n
            addr = np.broadcast_to(raddr(ctx), ctx.shape)[..., :k]
            store(ctx, space, addr, rows[..., :k, :].view(np.uint8), None if mask is None else mask[..., :k],
                  where, 16)
        return run
    if _take(words, "m16n8"):
        _need_sm100(ins, dec)
        n = _num(words, ins, (1, 2, 4))
        if not trans or words != ["b8"]:
            raise PtxError(f"{ins.text}: stmatrix.m16n8 requires .trans.b8")
        srcs = _regs(ins, dec, ins.operands[1], n, False)
        raddr = dec.address(ins.operands[0])
        rowmask = _L < 8 * n

        def run168(ctx, mask):
            rows = np.zeros(ctx.shape + (16,), np.uint8)
            for j, r in enumerate(srcs):
                v = np.ascontiguousarray(np.broadcast_to(r(ctx), ctx.shape))
                b = v[..., None].view(np.uint8)  # (..., 32, 4)
                for e in range(4):
                    rows[..., 8 * j + 2 * _T + (e & 1), _G + 8 * (e >> 1)] = b[..., e]
            m = rowmask if mask is None else (mask & rowmask)
            store(ctx, space, raddr(ctx), rows, np.broadcast_to(m, ctx.shape), where, 16)
        return run168
    raise PtxError(f"{ins.text}: stmatrix needs a shape .m8n8 (or .m16n8 on sm_100+)")


def _compile_movmatrix(ins, dec):
    words = list(ins.words)
    _take(words, "sync")
    _take(words, "aligned")
    if words != ["m8n8", "trans", "b16"]:
        raise PtxError(f"{ins.text}: expected movmatrix.sync.aligned.m8n8.trans.b16")
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: movmatrix takes d, a")
    d, a = ins.operands
    if isinstance(d, Vec):
        d = d.items[0] if len(d.items) == 1 else d
    if isinstance(a, Vec):
        a = a.items[0] if len(a.items) == 1 else a
    wd = dec.writer(d, "b32")
    ra = dec.reader(a, "b32")
    lanes_lo = 4 * (2 * _T) + _G // 2
    lanes_hi = 4 * (2 * _T + 1) + _G // 2
    half = _G % 2

    def run(ctx, mask):
        v = np.ascontiguousarray(np.broadcast_to(ra(ctx), ctx.shape))
        h = v[..., None].view(np.uint16)  # (..., 32, 2)
        lo = h[..., lanes_lo, half].astype(np.uint32)
        hi = h[..., lanes_hi, half].astype(np.uint32)
        wd(ctx, lo | (hi << np.uint32(16)), mask)
    return run


OPS: dict[str, OpSpec] = {
    "ldmatrix": OpSpec("ldmatrix", ("b16", "b8"), None, 1, compile=_compile_ldmatrix, aligned=True,
                       min_sm=75, min_ptx=(6, 5), doc="load 8x8 (16x16 b8, 8x16 b8x16) matrices from shared memory "
                                      "into fragments"),
    "stmatrix": OpSpec("stmatrix", ("b16", "b8"), None, 2, ndst=0, compile=_compile_stmatrix,
                       aligned=True, min_sm=90, min_ptx=(7, 8), doc="store fragments as 8x8 (16x8 b8) matrices"),
    "movmatrix": OpSpec("movmatrix", ("b16",), None, 1, compile=_compile_movmatrix, aligned=True,
                        min_sm=75, min_ptx=(7, 8), doc="transpose an 8x8 b16 fragment across the warp"),
}
