"""``wmma.load.{a,b,c}``, ``wmma.mma``, ``wmma.store.d``: warp-level matrix fragments.

Every shape and type of the PTX ISA (f16, bf16, tf32, f64, s8/u8, s4/u4, b1; :mod:`warpsim.facts.wmma`).
A load reads the tile at ``p`` (``.row``: element (r, c) at ``p + (r*stride + c)`` elements;
``.col``: ``p + (c*stride + r)``; stride omitted: the tile's leading dimension; sub-byte elements
little-end first in each byte) into the registers that the measured fragment map
(:mod:`warpsim.tensorcore.wmma`) assigns; a store is its inverse; ``wmma.mma`` gathers the tiles
from the fragments and computes them with the mma.sync models.

Checked before anything runs (a ``PtxError`` naming the line): the qualifiers (legality per
ptxas 13.0/13.5: ``tests/data/ptxas_truth_wmma.jsonl.gz``), the target, the number of
registers of each fragment, and, across the function, that the fragment an mma reads was loaded
with the same layout, shape and type (a ``.col`` load feeding a ``.row`` mma is an error).
At run time every element access is checked as ``ld``/``st`` are (bounds, alignment to the
element's size).  CUDA's contract for ``load_matrix_sync`` (256-bit aligned base, stride a
multiple of 16 bytes) is not enforced: the H200 loads an s8 tile with an 8-byte stride
correctly (the probe's m8n32k16 .col A).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS
from warpsim.facts.wmma import ELEMENT_BITS, FRAGMENTS, MMA_GEOMS, SHAPES, Fragment, MmaGeom
from warpsim.ptx.ops.datamove import load, store
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Vec
from warpsim.tensorcore import wmma as W

_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared"}
_LAYOUTS = ("row", "col")


class WmmaError(PtxError):
    """A wmma statement warpsim refuses; ``reason`` says which rule (a short tag)."""

    def __init__(self, msg: str, reason: str = "") -> None:
        super().__init__(msg)
        self.reason = reason


def _sm(arch: str | None) -> int | None:
    a = ARCHS.get(arch) if arch else None
    return a.sm if a is not None else None


def _need(since: str, arch: str | None, what: str, where: str) -> None:
    sm = _sm(arch)
    if sm is not None and sm < int(since[3:]):
        raise WmmaError(f"{where}: {what} requires {since} or later; the kernel runs {arch}", "target")


def parse_ldst(kind: str, words: list[str], where: str) -> tuple[Fragment, str, str | None]:
    """(fragment, layout, state space) of ``wmma.load.<frag>...`` / ``wmma.store.d...`` words.

    After the operand letter the qualifiers may come in any order (ptxas 13.x accepts
    ``.aligned.sync``, ``.m16n16k16.row``, ``.f16.global``); each kind at most once."""
    w = list(words)
    want = ("a", "b", "c") if kind == "load" else ("d",)
    if not w or w[0] not in want:
        raise WmmaError(f"{where}: wmma.{kind} needs .{' / .'.join(want)} first", "syntax")
    frag = "c" if w[0] in ("c", "d") else w[0]
    got: dict[str, str] = {}
    for tok in w[1:]:
        kindof = ("sync" if tok == "sync" else "aligned" if tok == "aligned" else
                  "layout" if tok in _LAYOUTS else "shape" if tok in SHAPES else
                  "space" if tok in _SPACES else "type" if tok in ELEMENT_BITS else None)
        if kindof is None:
            raise WmmaError(f"{where}: qualifier .{tok} is not legal for wmma.{kind} (state spaces: "
                            ".global, .shared, .shared::cta)", "space" if "::" in tok or tok in
                            ("local", "param", "const") else "syntax")
        if kindof in got:
            raise WmmaError(f"{where}: two {kindof} qualifiers (.{got[kindof]}, .{tok})", "syntax")
        got[kindof] = tok
    for need in ("sync", "aligned", "layout", "shape", "type"):
        if need not in got:
            raise WmmaError(f"{where}: wmma.{kind}.{w[0]} needs a .{need if need in ('sync', 'aligned') else need} "
                            "qualifier", "syntax")
    layout, shape, t = got["layout"], got["shape"], got["type"]
    space = _SPACES.get(got.get("space", ""))
    f = FRAGMENTS.get((frag, shape, t))
    if f is None:
        legal = sorted(ft for (fr, s, ft) in FRAGMENTS if fr == frag and s == shape)
        raise WmmaError(f"{where}: .{t} is not a type of the {frag.upper()} fragment of .{shape} "
                        f"(legal: {', '.join('.' + x for x in legal)})", "type")
    if layout not in f.layouts:
        raise WmmaError(f"{where}: .{shape} .{t} {frag.upper()} fragments are .{f.layouts[0]} only",
                        "layout")
    return f, layout, space


def parse_mma(words: list[str], where: str) -> tuple[MmaGeom, str, str, str | None, str | None, bool]:
    """(geometry, alayout, blayout, bit op, rounding, satfinite) of ``wmma.mma`` words."""
    w = list(words)
    op = None
    if w[:1] in (["xor"], ["and"]) and w[1:2] == ["popc"]:
        op, w = w[0], w[2:]
    if w[:2] != ["sync", "aligned"]:
        raise WmmaError(f"{where}: wmma.mma needs .sync.aligned", "syntax")
    w = w[2:]
    if len(w) < 3 or w[0] not in _LAYOUTS or w[1] not in _LAYOUTS or w[2] not in SHAPES:
        raise WmmaError(f"{where}: expected wmma.mma.sync.aligned.<alayout>.<blayout>.<shape>...", "syntax")
    al, bl, shape = w[0], w[1], w[2]
    w = w[3:]
    rnd = sat = None
    if w and w[0] in ("rn", "rz", "rm", "rp"):
        rnd, w = w[0], w[1:]
    if w and w[-1] in ("rn", "rz", "rm", "rp") and rnd is None:
        rnd, w = w[-1], w[:-1]
    if "satfinite" in w:
        sat = True
        w = [x for x in w if x != "satfinite"]
    if len(w) >= 2 and w[-2:] in (["xor", "popc"], ["and", "popc"]) and op is None:
        op, w = w[-2], w[:-2]
    if len(w) == 2:
        d, c = w
        cands = [g for g in MMA_GEOMS if g.shape == shape and g.atype == "f16" and g.dtype == d
                 and g.ctype == c]
    elif len(w) == 4:
        d, a, b, c = w
        cands = [g for g in MMA_GEOMS if g.shape == shape and g.atype != "f16"
                 and (g.dtype, g.atype, g.btype, g.ctype) == (d, a, b, c)]
    else:
        cands = []
    if not cands:
        raise WmmaError(f"{where}: no wmma.mma .{shape} form has types .{'.'.join(w)}", "type")
    g = cands[0]
    if (al, bl) not in g.layouts:
        raise WmmaError(f"{where}: .{shape} wmma.mma is .row.col only", "layout")
    if sat and not g.satfinite:
        raise WmmaError(f"{where}: .satfinite is not legal on this wmma.mma form", "satfinite")
    if rnd and not g.rnd:
        raise WmmaError(f"{where}: rounding .{rnd} is legal on the .f64 wmma.mma only", "rounding")
    if g.ops and op is None:
        raise WmmaError(f"{where}: .b1 wmma.mma needs .xor.popc or .and.popc", "bitop")
    if op and not g.ops:
        raise WmmaError(f"{where}: .{op}.popc is legal on the .b1 wmma.mma only", "bitop")
    return g, al, bl, op, rnd, bool(sat)


def _regs_of(op, n: int, role: str, where: str, form: str) -> list:
    if not isinstance(op, Vec):
        raise WmmaError(f"{where}: operand {role} of {form} must be a {{...}} vector of {n} "
                        "registers", "fragment-size")
    if len(op.items) != n:
        raise WmmaError(f"{where}: the {role} fragment of {form} has {n} registers per lane; "
                        f"{len(op.items)} given", "fragment-size")
    return list(op.items)


def _frag_table(dec) -> dict:
    t = getattr(dec, "wmma_fragments", None)
    if t is None:
        t = dec.wmma_fragments = {}
    return t


def _note(dec, items, role: str, desc: tuple, where: str, kind: str) -> None:
    """Record which load/mma uses a fragment's first register; loads and mmas that meet on one
    register must agree on (layout, shape, type)."""
    name = getattr(items[0], "name", None)
    if name is None:
        return
    table = _frag_table(dec)
    for other_kind, other_desc, other_where in table.get((role, name), ()):
        if other_kind != kind and other_desc != desc:
            def say(d):
                return f".{d[0]} .{d[1]} .{d[2]}"
            raise WmmaError(
                f"{where}: the {role.upper()} fragment {name} is {kind}ed as {say(desc)} but "
                f"{other_kind}ed as {say(other_desc)} at {other_where}; the layout, shape and "
                "type of a wmma.load must match the wmma.mma that reads it", "layout-mismatch")
    table.setdefault((role, name), []).append((kind, desc, where))


def _stride(ops, dec, f: Fragment, layout: str, where: str):
    if len(ops) == 3:
        s = ops[2]
        if isinstance(s, Imm):
            v = int(s.value)
            return lambda ctx: np.int64(v)
        r = dec.reader(s, "b32")
        return lambda ctx: np.asarray(r(ctx)).astype(np.int64)
    r, c = f.rows_cols
    v = c if layout == "row" else r
    return lambda ctx: np.int64(v)


def _bit_offsets(f: Fragment, layout: str, stride) -> np.ndarray:
    """(..., 32, nregs, per) bit offsets of every slot's element from the base address."""
    rows, cols = W.element_offsets(f, layout)
    stride = np.asarray(stride, np.int64)[..., None, None]
    el = rows * stride + cols if layout == "row" else cols * stride + rows
    return el * ELEMENT_BITS[f.type]


def _compile_load(ins, dec):
    where = dec.where
    f, layout, space = parse_ldst("load", ins.words, where)
    _need(f.since, dec.arch, f"wmma.load .{f.shape} .{f.type}", where)
    W.check_target(dec.arch, where)
    ops = list(ins.operands)
    if len(ops) not in (2, 3):
        raise WmmaError(f"{where}: wmma.load takes {{r...}}, [p] and an optional stride", "syntax")
    items = _regs_of(ops[0], f.nregs, "destination", where, f"wmma.load.{f.frag} .{f.shape} .{f.type}")
    _note(dec, items, f.frag, (layout, f.shape, f.type), where, "load")
    t = "b64" if f.reg_bits == 64 else "b32"
    writers = [dec.writer(x, t) for x in items]
    raddr = dec.address(ops[1])
    rstride = _stride(ops, dec, f, layout, where)
    w = ELEMENT_BITS[f.type]
    per = f.elems_per_reg
    dt = np.uint64 if f.reg_bits == 64 else np.uint32

    def run(ctx, mask):
        addr = np.broadcast_to(raddr(ctx), ctx.shape).astype(np.uint64)
        stride = rstride(ctx)
        bits = _bit_offsets(f, layout, stride)  # (..., 32, nregs, per) or (32, nregs, per)
        for r in range(f.nregs):
            word = np.zeros(ctx.shape, dt)
            for e in range(per):
                off = np.broadcast_to(bits[..., r, e], ctx.shape)
                a = addr + (off // 8).astype(np.uint64)
                if w >= 8:
                    raw = load(ctx, space, a, w // 8, mask, where, w // 8)
                    v = np.ascontiguousarray(raw).view({1: np.uint8, 2: np.uint16, 4: np.uint32,
                                                        8: np.uint64}[w // 8])[..., 0].astype(dt)
                else:
                    raw = load(ctx, space, a, 1, mask, where, 1)[..., 0]
                    v = ((raw >> (off % 8).astype(np.uint8)) & ((1 << w) - 1)).astype(dt)
                word |= v << dt(e * w)
            writers[r](ctx, word, mask)
    return run


def _compile_store(ins, dec):
    where = dec.where
    f, layout, space = parse_ldst("store", ins.words, where)
    _need(f.since, dec.arch, f"wmma.store .{f.shape} .{f.type}", where)
    W.check_target(dec.arch, where)
    ops = list(ins.operands)
    if len(ops) not in (2, 3):
        raise WmmaError(f"{where}: wmma.store takes [p], {{r...}} and an optional stride", "syntax")
    items = _regs_of(ops[1], f.nregs, "source", where, f"wmma.store.d .{f.shape} .{f.type}")
    t = "b64" if f.reg_bits == 64 else "b32"
    readers = [dec.reader(x, t) for x in items]
    raddr = dec.address(ops[0])
    rstride = _stride(ops, dec, f, layout, where)
    w = ELEMENT_BITS[f.type]
    per = f.elems_per_reg
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[w // 8]

    def run(ctx, mask):
        addr = np.broadcast_to(raddr(ctx), ctx.shape).astype(np.uint64)
        stride = rstride(ctx)
        bits = _bit_offsets(f, layout, stride)
        for r in range(f.nregs):
            word = np.broadcast_to(readers[r](ctx), ctx.shape).astype(np.uint64)
            for e in range(per):
                off = np.broadcast_to(bits[..., r, e], ctx.shape)
                v = ((word >> np.uint64(e * w)) & np.uint64((1 << w) - 1)).astype(ut)
                data = np.ascontiguousarray(v)[..., None].view(np.uint8)
                store(ctx, space, addr + (off // 8).astype(np.uint64), data, mask, where, w // 8)
    return run


def _compile_mma(ins, dec):
    where = dec.where
    g, al, bl, op, rnd, sat = parse_mma(ins.words, where)
    _need(g.since, dec.arch, f"wmma.mma .{g.shape} .{g.atype}", where)
    if op == "and":
        _need("sm_80", dec.arch, "wmma.mma .and.popc", where)
    W.check_target(dec.arch, where)
    ops = list(ins.operands)
    if len(ops) != 4:
        raise WmmaError(f"{where}: wmma.mma takes d, a, b, c", "syntax")
    frags = {"d": FRAGMENTS[("c", g.shape, g.dtype)], "a": FRAGMENTS[("a", g.shape, g.atype)],
             "b": FRAGMENTS[("b", g.shape, g.btype)], "c": FRAGMENTS[("c", g.shape, g.ctype)]}
    form = f"wmma.mma .{g.shape} .{g.dtype}.{g.atype}.{g.btype}.{g.ctype}"
    items = {k: _regs_of(o, frags[k].nregs, k.upper(), where, form) for k, o in zip("dabc", ops)}
    _note(dec, items["a"], "a", (al, g.shape, g.atype), where, "mma")
    _note(dec, items["b"], "b", (bl, g.shape, g.btype), where, "mma")
    arch = dec.arch if dec.arch not in (None, "auto") else "sm_90"  # 'exact' passes through
    W.mma_for(g, op, rnd, sat, arch)  # the target has the mma.sync form (else a PtxError here)
    t = {k: ("b64" if frags[k].reg_bits == 64 else "b32") for k in "dabc"}
    readers = {k: [dec.reader(x, t[k]) for x in items[k]] for k in "abc"}
    writers = [dec.writer(x, t["d"]) for x in items["d"]]

    def run(ctx, mask):
        codes = {}
        for k in "abc":
            words = np.stack([np.broadcast_to(r(ctx), ctx.shape) for r in readers[k]], axis=-1)
            codes[k] = W.regs_to_codes(frags[k], words.reshape(ctx.shape[:-1] + (32, -1)))
        d = W.compute(g, codes["a"], codes["b"], codes["c"], op=op, rounding=rnd, satfinite=sat,
                      arch=arch)
        regs = W.codes_to_regs(frags["d"], d)
        for i, wr in enumerate(writers):
            wr(ctx, np.ascontiguousarray(regs[..., i]), mask)
    return run


OPS: dict[str, OpSpec] = {
    "wmma.load": OpSpec("wmma.load", (), None, 1, compile=_compile_load, aligned=True, min_sm=70,
                        doc="load a matrix tile into a warp's wmma fragment"),
    "wmma.store": OpSpec("wmma.store", (), None, 2, ndst=0, compile=_compile_store, aligned=True,
                         min_sm=70, doc="store a wmma accumulator fragment as a matrix tile"),
    "wmma.mma": OpSpec("wmma.mma", (), None, 3, compile=_compile_mma, aligned=True, min_sm=70,
                       doc="warp-level matrix multiply-accumulate on wmma fragments"),
}
