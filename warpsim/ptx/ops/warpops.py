"""Warp-level exchange: ``shfl.sync``, ``vote.sync``, ``redux.sync``, ``match.sync``,
``activemask``.

Each lane reads other lanes of its own warp: arrays ``(*batch, 32)`` are gathered along the
last axis.  warpsim runs converged code: every lane named by the membermask must execute the
instruction together (else an error naming the lanes), and a lane reading from a lane that is
not executing is an error (the PTX ISA leaves the value undefined).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import DivergenceError, PtxError, first_lanes
from warpsim.ptx.ops.control import check_membermask
from warpsim.ptx.machine import lanes_text
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Pipe

_LANE = np.arange(32, dtype=np.int64)
_BITS = (np.uint32(1) << np.arange(32, dtype=np.uint32))


def _ballot(p: np.ndarray) -> np.ndarray:
    """(*batch, 32) bool -> (*batch, 1) uint32 with bit i = p[..., i]."""
    return np.bitwise_or.reduce(np.where(p, _BITS, np.uint32(0)), axis=-1, keepdims=True)


def shfl_source(mode: str, b: np.ndarray, c: np.ndarray):
    """(source lane j, in-range flag) of every lane for shfl mode, lane offset b and c."""
    lane = _LANE
    bval = (b & 0x1F).astype(np.int64)
    cval = (c & 0x1F).astype(np.int64)
    seg = ((c >> 8) & 0x1F).astype(np.int64)
    max_lane = (lane & seg) | (cval & ~seg)
    min_lane = lane & seg
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        ok = j <= max_lane
    else:  # idx
        j = min_lane | (bval & ~seg)
        ok = j <= max_lane
    j = np.where(ok, j, lane)
    return j, ok


def _split_dst(ins, dec, op, second_type: str):
    if isinstance(op, Pipe):
        if len(op.items) != 2:
            raise PtxError(f"{ins.text}: bad destination")
        return dec.writer(op.items[0], None if second_type is None else "b32"), \
            dec.writer(op.items[1], "pred")
    return dec.writer(op, "b32"), None


def _compile_shfl(ins, dec):
    words = list(ins.words)
    if len(words) != 2 or words[0] not in ("up", "down", "bfly", "idx") or words[1] != "b32":
        raise PtxError(f"{ins.text}: expected shfl.sync.{{up,down,bfly,idx}}.b32")
    mode = words[0]
    ops = ins.operands
    if len(ops) != 5:
        raise PtxError(f"{ins.text}: shfl.sync takes d[|p], a, b, c, membermask")
    wd, wp = _split_dst(ins, dec, ops[0], "b32")
    ra, rb, rc, rm = (dec.reader(o, "b32") for o in ops[1:])
    full = isinstance(ops[4], Imm) and ops[4].kind == "int" and ops[4].value & 0xFFFFFFFF == 0xFFFFFFFF
    const = None
    if isinstance(ops[2], Imm) and isinstance(ops[3], Imm) and ops[2].kind == ops[3].kind == "int":
        j0, ok0 = shfl_source(mode, np.full(32, ops[2].value & 0xFFFFFFFF, np.int64),
                              np.full(32, ops[3].value & 0xFFFFFFFF, np.int64))
        const = (j0, ok0)  # source lanes fixed at decode

    def run(ctx, mask):
        if const is not None and full and mask is None:
            a = ra(ctx)
            if wd is not None:
                wd(ctx, np.broadcast_to(a, ctx.shape)[..., const[0]], None)
            if wp is not None:
                wp(ctx, np.broadcast_to(const[1], ctx.shape), None)
            return
        if full and mask is None:
            mem = None  # the whole warp executes with the full membermask: nothing to check
        else:
            mm = rm(ctx)
            mem = check_membermask(ins, ctx, mask, mm, groups=True)
        a = np.broadcast_to(ra(ctx), ctx.shape)
        j, ok = shfl_source(mode, np.broadcast_to(rb(ctx), ctx.shape),
                            np.broadcast_to(rc(ctx), ctx.shape))
        act = np.ones(ctx.shape, bool) if mask is None else mask
        if mem is not None:  # a source lane outside the reading lane's membermask: undefined
            outside = act & ok & (((np.broadcast_to(mm, ctx.shape).astype(np.uint32) >> j.astype(np.uint32)) & 1) == 0)
            if outside.any():
                raise DivergenceError(f"{ins.text}: {lanes_text(outside)} read from lanes outside their "
                                      "membermask (undefined in PTX)").at(**first_lanes(outside))
        if mask is not None:
            src_active = np.take_along_axis(act & mem, j, axis=-1)
            bad = act & ~src_active
            if bad.any():
                raise DivergenceError(f"{ins.text}: {lanes_text(bad)} read from lanes that do not "
                                      "execute the shuffle (undefined in PTX)").at(**first_lanes(bad))
        d = np.take_along_axis(a, j, axis=-1)
        if wd is not None:
            wd(ctx, d, mask)
        if wp is not None:
            wp(ctx, ok, mask)
    return run


def _compile_vote(ins, dec):
    words = list(ins.words)
    if len(words) != 2 or (words[0], words[1]) not in (("all", "pred"), ("any", "pred"),
                                                      ("uni", "pred"), ("ballot", "b32")):
        raise PtxError(f"{ins.text}: expected vote.sync.{{all,any,uni}}.pred or "
                       "vote.sync.ballot.b32")
    mode = words[0]
    ops = ins.operands
    if len(ops) != 3:
        raise PtxError(f"{ins.text}: vote.sync takes d, {{!}}a, membermask")
    wd = dec.writer(ops[0], words[1])
    ra = dec.reader(ops[1], "pred")
    rm = dec.reader(ops[2], "b32")

    def run(ctx, mask):
        mem = check_membermask(ins, ctx, mask, rm(ctx))
        a = np.broadcast_to(ra(ctx), ctx.shape)
        sel = mem if mask is None else (mem & mask)
        if mode == "ballot":
            r = np.broadcast_to(_ballot(a & sel), ctx.shape)
        elif mode == "all":
            r = np.broadcast_to(np.all(a | ~sel, axis=-1, keepdims=True), ctx.shape)
        elif mode == "any":
            r = np.broadcast_to(np.any(a & sel, axis=-1, keepdims=True), ctx.shape)
        else:
            r = np.broadcast_to(np.all(a | ~sel, axis=-1, keepdims=True)
                                | ~np.any(a & sel, axis=-1, keepdims=True), ctx.shape)
        wd(ctx, r, mask)
    return run


_REDUX = {"add": ("u32", "s32"), "min": ("u32", "s32"), "max": ("u32", "s32"),
          "and": ("b32",), "or": ("b32",), "xor": ("b32",)}


#: Targets whose ptxas (13.0) takes redux.sync on .f32 (min/max with .abs and .NaN), from
#: tests/data/ptxas_real_truth.json.gz; the other targets (sm_80 ... sm_90a, sm_120) refuse it.
REDUX_F32_TARGETS = ("sm_100a",)


def _compile_redux_f32(ins, dec, words):
    op = words[0]
    mods = set(words[1:-1])
    if op not in ("min", "max") or not mods <= {"abs", "NaN"} or len(mods) != len(words) - 2:
        raise PtxError(f"{ins.text}: expected redux.sync.{{min,max}}{{.abs}}{{.NaN}}.f32")
    if dec.arch not in REDUX_F32_TARGETS:
        raise PtxError(f"{ins.text}: redux.sync on .f32 needs {', '.join(REDUX_F32_TARGETS)} "
                       f"(ptxas refuses it on {dec.arch})")
    if len(ins.operands) != 3:
        raise PtxError(f"{ins.text}: redux.sync takes d, a, membermask")
    from warpsim.ptx.ops.floating import _minmax
    wd = dec.writer(ins.operands[0], "f32")
    ra = dec.reader(ins.operands[1], "f32")
    rm = dec.reader(ins.operands[2], "b32")
    nan = "NaN" in mods

    def run(ctx, mask):
        mem = check_membermask(ins, ctx, mask, rm(ctx))
        sel = mem if mask is None else (mem & mask)
        a = np.broadcast_to(np.asarray(ra(ctx), np.uint32), ctx.shape)
        if "abs" in mods:
            a = a & np.uint32(0x7FFFFFFF)
        # lanes outside the group take a member's value (min/max of x with x is x)
        first = np.take_along_axis(a, np.argmax(sel, axis=-1)[..., None], axis=-1)
        v = np.where(sel, a, first)
        while v.shape[-1] > 1:  # pairwise: min/max (NaN rules included) is associative
            h = v.shape[-1] // 2
            v = _minmax([v[..., :h], v[..., h:]], type="f32", nan=nan, is_max=op == "max")
        wd(ctx, np.broadcast_to(v.astype(np.uint32), ctx.shape), mask)
    return run


def _compile_redux(ins, dec):
    words = list(ins.words)
    if words and words[-1] == "f32":
        return _compile_redux_f32(ins, dec, words)
    if len(words) != 2 or words[0] not in _REDUX or words[1] not in _REDUX[words[0]]:
        raise PtxError(f"{ins.text}: expected redux.sync.{{add,min,max}}.{{u32,s32}} or "
                       "redux.sync.{and,or,xor}.b32 or redux.sync.{min,max}{.abs}{.NaN}.f32")
    op, t = words
    if len(ins.operands) != 3:
        raise PtxError(f"{ins.text}: redux.sync takes d, a, membermask")
    wd = dec.writer(ins.operands[0], t)
    ra = dec.reader(ins.operands[1], t)
    rm = dec.reader(ins.operands[2], "b32")

    def run(ctx, mask):
        mem = check_membermask(ins, ctx, mask, rm(ctx))
        sel = mem if mask is None else (mem & mask)
        a = np.broadcast_to(ra(ctx), ctx.shape)
        if op == "add":
            r = np.where(sel, a, 0).astype(np.uint64).sum(axis=-1, keepdims=True) & 0xFFFFFFFF
            r = r.astype(np.uint32)
        elif op in ("min", "max"):
            v = a.view(np.int32) if t == "s32" else a
            info = np.iinfo(v.dtype)
            fill = info.max if op == "min" else info.min
            f = np.min if op == "min" else np.max
            r = f(np.where(sel, v, fill), axis=-1, keepdims=True).astype(v.dtype).view(np.uint32)
        else:
            u = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            ident = np.uint32(0xFFFFFFFF) if op == "and" else np.uint32(0)
            r = u.reduce(np.where(sel, a, ident), axis=-1, keepdims=True)
        wd(ctx, np.broadcast_to(r, ctx.shape), mask)
    return run


def _compile_match(ins, dec):
    words = list(ins.words)
    if len(words) != 2 or words[0] not in ("any", "all") or words[1] not in ("b32", "b64"):
        raise PtxError(f"{ins.text}: expected match.sync.{{any,all}}.{{b32,b64}}")
    mode, t = words
    ops = ins.operands
    if len(ops) != 3:
        raise PtxError(f"{ins.text}: match.sync takes d[|p], a, membermask")
    if isinstance(ops[0], Pipe):
        if mode != "all":
            raise PtxError(f"{ins.text}: only match.sync.all has a predicate destination")
        wd, wp = dec.writer(ops[0].items[0], "b32"), dec.writer(ops[0].items[1], "pred")
    else:
        wd, wp = dec.writer(ops[0], "b32"), None
    ra = dec.reader(ops[1], t)
    rm = dec.reader(ops[2], "b32")

    def run(ctx, mask):
        mem = check_membermask(ins, ctx, mask, rm(ctx))
        sel = mem if mask is None else (mem & mask)
        a = np.broadcast_to(ra(ctx), ctx.shape)
        eq = (a[..., :, None] == a[..., None, :]) & sel[..., None, :]  # [lane, other]
        same = np.bitwise_or.reduce(np.where(eq, _BITS, np.uint32(0)), axis=-1)
        if mode == "any":
            wd(ctx, same, mask)
            return
        mm = _ballot(sel)
        alleq = np.all(same == mm, axis=-1, keepdims=True)
        wd(ctx, np.broadcast_to(np.where(alleq, mm, np.uint32(0)), ctx.shape), mask)
        if wp is not None:
            wp(ctx, np.broadcast_to(alleq, ctx.shape), mask)
    return run


def _match_spelled(mode: str):
    """compile for the ISA's spelling ``match.any.sync.b32`` / ``match.all.sync.b64`` (what
    nvcc writes for __match_any_sync), the same instruction as ``match.sync.any.b32``."""
    def compile(ins, dec):
        ins.words = [mode] + list(ins.words)
        return _compile_match(ins, dec)
    return compile


def _compile_activemask(ins, dec):
    if ins.words != ["b32"] or len(ins.operands) != 1:
        raise PtxError(f"{ins.text}: expected activemask.b32 d")
    wd = dec.writer(ins.operands[0], "b32")

    def run(ctx, mask):
        act = np.ones(ctx.shape, bool) if mask is None else mask
        wd(ctx, np.broadcast_to(_ballot(act), ctx.shape), mask)
    return run


OPS: dict[str, OpSpec] = {
    "shfl.sync": OpSpec("shfl.sync", ("b32",), None, 4, compile=_compile_shfl,
                        doc="exchange a register across lanes: up/down/bfly/idx, clamp and "
                            "segment mask in c, optional in-range predicate"),
    "vote.sync": OpSpec("vote.sync", ("pred", "b32"), None, 2, compile=_compile_vote,
                        doc="all/any/uni over the membermask lanes; ballot"),
    "redux.sync": OpSpec("redux.sync", ("u32", "s32", "b32", "f32"), None, 2, compile=_compile_redux,
                         min_sm=80, doc="add/min/max/and/or/xor reduction over the membermask; "
                                        "min/max{.abs}{.NaN}.f32 on sm_100a"),
    "match.sync": OpSpec("match.sync", ("b32", "b64"), None, 2, compile=_compile_match, min_sm=70,
                         doc="lanes holding the same value (any), or all equal (all)"),
    "match.any.sync": OpSpec("match.any.sync", ("b32", "b64"), None, 2, compile=_match_spelled("any"),
                             min_sm=70, doc="match.sync.any as the ISA spells it"),
    "match.all.sync": OpSpec("match.all.sync", ("b32", "b64"), None, 2, compile=_match_spelled("all"),
                             min_sm=70, doc="match.sync.all as the ISA spells it"),
    "activemask": OpSpec("activemask", ("b32",), None, 0, compile=_compile_activemask,
                         doc="the mask of lanes executing it"),
}
