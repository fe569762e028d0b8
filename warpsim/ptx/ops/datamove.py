"""Data movement: ``mov`` (incl. vector pack/unpack, special registers, symbol addresses),
``ld``/``st`` in every state space, ``cvta``, and ``cp.async`` with its groups.

Memory comes from the :class:`~warpsim.ptx.machine.Context`'s state spaces
(:mod:`warpsim.ptx.memory`).  A generic address (no state space given) selects the space whose
generic window holds it (``.shared``, ``.local``), else global memory.  ``cp.async`` copies at
issue time (the copy is complete before any later instruction, a legal order), so
``commit_group``/``wait_group``/``wait_all`` only count groups.
"""

from __future__ import annotations

import sys

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.memory import (
    CONST_WINDOW, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, FlatMemory, GlobalMemory, TrackedGlobal)
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Reg, Vec
from warpsim.facts.types import DTYPES, TYPE_BITS

_SPACES = {"shared": "shared", "shared::cta": "shared", "shared::cluster": "shared::cluster",
           "global": "global", "local": "local",
           "param": "param", "param::entry": "param", "param::func": "param", "const": "const"}
_IGNORED_LDST = frozenset({
    "weak", "volatile", "relaxed", "acquire", "release", "mmio", "cta", "gpu", "sys", "cluster",
    "ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "unified", "L1::evict_normal",
    "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate",
    "L2::evict_first", "L2::evict_last", "L2::evict_normal", "L2::cache_hint", "L2::64B",
    "L2::128B", "L2::256B"})
_LDST_TYPES = ("b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
               "f32", "f64")
_MOV_TYPES = ("pred", "b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64", "f32", "f64")


#: memory classes whose ``units`` fast path ld/st take (exactly these: a wrapper or a subclass,
#: such as the sanitizer's, goes the checked way)
_PLAIN = frozenset({FlatMemory, GlobalMemory})
#: ... and for loads (ld, cp.async's source) also a spread launch's tracked global memory,
#: whose loads are GlobalMemory's (it tracks stores only)
_PLAIN_LOADS = _PLAIN | {TrackedGlobal}
_GLOBAL_LOADS = frozenset({GlobalMemory, TrackedGlobal})
_LITTLE = sys.byteorder == "little"


# --------------------------------------------------------------------------------------------
# memory access by state space
# --------------------------------------------------------------------------------------------
def _window(ctx, name: str) -> int:
    sp = ctx.spaces.get(name)
    if sp is not None and sp.window is not None:
        return sp.window
    return {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW,
            "const": CONST_WINDOW}.get(name, 0)


def _generic_parts(ctx, addr, mask):
    """[(space, space-address, lane mask)] for generic addresses."""
    parts = []
    rest = np.ones(addr.shape, bool) if mask is None else mask
    for name in ("shared", "local", "shared::cluster", "param", "const"):
        sp = ctx.spaces.get(name) if name != "shared::cluster" or "shared" not in ctx.spaces \
            else ctx.space(name)
        if sp is None or sp.window is None:
            continue
        base = np.uint64(sp.window)
        size = getattr(sp, "size", 0)
        inside = (addr >= base) & (addr < base + np.uint64(size)) & rest
        if inside.any():
            parts.append((sp, addr - base, inside))
            rest = rest & ~inside
    if rest.any():
        parts.append((ctx.space("global", "generic address"), addr, None if mask is None and len(parts) == 0 else rest))
    return parts


def load(ctx, space: str | None, addr, nbytes: int, mask, where: str, align: int | None = None):
    """(*batch, 32, nbytes) uint8 read at ``addr`` in ``space`` (None: generic)."""
    if space is not None:
        return ctx.space(space, where).load(addr, nbytes, mask, where, align)
    parts = _generic_parts(ctx, addr, mask)
    if len(parts) == 1:
        sp, a, m = parts[0]
        return sp.load(a, nbytes, m, where, align)
    out = np.zeros(addr.shape + (nbytes,), np.uint8)
    for sp, a, m in parts:
        got = sp.load(a, nbytes, m, where, align)
        out[m] = got[m]
    return out


def store(ctx, space: str | None, addr, data, mask, where: str, align: int | None = None) -> None:
    if space is not None:
        ctx.space(space, where).store(addr, data, mask, where, align)
        return
    for sp, a, m in _generic_parts(ctx, addr, mask):
        sp.store(a, data, m, where, align)


def _ldst_words(ins, kind: str, arch: str | None = None):
    """Parse ld/st qualifiers: (space or None, vector length, type)."""
    space, vec, t = None, 1, None
    for w in ins.words:
        if w in _SPACES:
            if space is not None:
                raise PtxError(f"{ins.text}: two state spaces")
            space = _SPACES[w]
        elif w in ("v2", "v4", "v8"):
            vec = int(w[1])
        elif w in _LDST_TYPES:
            if t is not None:
                raise PtxError(f"{ins.text}: two types")
            t = w
        elif w == "b128":  # one 128-bit register, moved as its two 64-bit halves
            if t is not None:
                raise PtxError(f"{ins.text}: two types")
            t = w
        elif w in _IGNORED_LDST or w.startswith("L2::") or w.startswith("L1::"):
            continue
        else:
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {kind}")
    if t is None:
        raise PtxError(f"{ins.text}: {kind} needs a type (.b32, .u16, .f32, ...)")
    if t == "b128":
        if vec != 1:
            raise PtxError(f"{ins.text}: .b128 has no vector forms")
        return space, 1, t
    if vec == 8:
        from warpsim.facts.isa import ARCHS
        a = ARCHS.get(arch or "")
        if a is not None and a.sm < 100 or space != "global" or TYPE_BITS[t] != 32:
            raise PtxError(f"{ins.text}: .v8 (256-bit access) needs sm_100+, .global and a "
                           "32-bit type")
    if vec * TYPE_BITS[t] > 256 or vec * TYPE_BITS[t] == 256 and TYPE_BITS[t] != 32:
        raise PtxError(f"{ins.text}: vector of {vec} x {TYPE_BITS[t]} bits is too wide")
    return space, vec, t


def _items(op, vec: int, ins, what: str):
    if vec == 1:
        if isinstance(op, Vec):  # ptxas reads a one-element vector {%r} as the register itself
            if len(op.items) != 1:
                raise PtxError(f"{ins.text}: {what} is a vector but the instruction has no .v2/.v4")
            return [op.items[0]]
        return [op]
    if not isinstance(op, Vec) or len(op.items) != vec:
        raise PtxError(f"{ins.text}: {what} must be a vector of {vec} elements {{...}}")
    return list(op.items)


def halves128(op, ins, dec) -> list:
    """The two 64-bit halves (low, high) of a .b128 register operand."""
    if isinstance(op, Vec) and len(op.items) == 1:
        op = op.items[0]
    if not isinstance(op, Reg) or op.neg or dec.reg_width(op.name) != 128:
        raise PtxError(f"{ins.text}: a .b128 operand must be a .reg .b128 register")
    return [Reg(op.name + "$lo"), Reg(op.name + "$hi")]


def _compile_ld(ins, dec):
    space, vec, t = _ldst_words(ins, "ld", dec.arch)
    ops = ins.operands
    if len(ops) not in (2, 3):
        raise PtxError(f"{ins.text}: ld takes d, [a] (and an optional cache policy)")
    items = _items(ops[0], vec, ins, "the destination")
    if t == "b128":
        items, vec, t = halves128(ops[0], ins, dec), 2, "b64"
    w = TYPE_BITS[t]
    dsts = [dec.writer(o, t, relaxed=True) for o in items]
    raddr = dec.address(ops[1])
    nbytes = w // 8
    total = nbytes * vec
    dt = DTYPES[w]
    where = dec.where

    fast = space is not None and total in FlatMemory._WIDE

    def run(ctx, mask):
        addr = raddr(ctx)
        if fast and mask is None:
            sp = ctx.spaces.get(space)
            got = sp.units(addr, total, where) if sp.__class__ in _PLAIN_LOADS else None
            if got is not None:  # all lanes, plain memory: one gather of whole accesses
                view, idx = got
                v = view[idx]
                if vec == 1:
                    dsts[0](ctx, v, None)
                    return
                v = v.view(dt).reshape(v.shape + (vec,))
                for k, wr in enumerate(dsts):
                    if wr is not None:
                        wr(ctx, np.ascontiguousarray(v[..., k]), None)
                return
        raw = load(ctx, space, addr, total, mask, where)
        words = raw.view(dt) if w > 8 else raw
        for k, wr in enumerate(dsts):
            if wr is not None:
                wr(ctx, words[..., k], mask)
    return run


def _compile_st(ins, dec):
    space, vec, t = _ldst_words(ins, "st", dec.arch)
    if space == "const":
        raise PtxError(f"{ins.text}: cannot store to .const")
    ops = ins.operands
    if len(ops) not in (2, 3):
        raise PtxError(f"{ins.text}: st takes [a], b (and an optional cache policy)")
    items = _items(ops[1], vec, ins, "the source")
    if t == "b128":
        items, vec, t = halves128(ops[1], ins, dec), 2, "b64"
    w = TYPE_BITS[t]
    raddr = dec.address(ops[0])
    srcs = [dec.reader(o, t, relaxed=True) for o in items]
    dt = DTYPES[w]
    total = w // 8 * vec
    where = dec.where

    fast = space is not None and total in FlatMemory._WIDE

    def run(ctx, mask):
        addr = raddr(ctx)
        if fast and mask is None:
            sp = ctx.spaces.get(space)
            got = sp.units(addr, total, where) if sp.__class__ in _PLAIN and not sp.readonly \
                else None
            if got is not None:  # all lanes, plain memory: one scatter of whole accesses
                view, idx = got
                if vec == 1:
                    view[idx] = np.asarray(srcs[0](ctx), dt)
                else:
                    vals = np.empty(ctx.shape + (vec,), dt)
                    for k, r in enumerate(srcs):
                        vals[..., k] = r(ctx)
                    view[idx] = vals.view(view.dtype)[..., 0]
                return
        vals = np.stack([np.broadcast_to(np.asarray(r(ctx), dt), ctx.shape) for r in srcs], axis=-1)
        raw = np.ascontiguousarray(vals).view(np.uint8).reshape(ctx.shape + (total,))
        store(ctx, space, addr, raw, mask, where)
    return run


# --------------------------------------------------------------------------------------------
# mov
# --------------------------------------------------------------------------------------------
def _part_bits(t: str, n: int) -> int | None:
    """Bits of each of the ``n`` elements a mov packs into (or unpacks from) a ``.t`` value;
    None where that is not a legal mov (only .bN splits into 2 or 4 parts of 8 bits or more)."""
    w = TYPE_BITS[t]
    if n not in (2, 4) or w % n or w // n < 8 or not t.startswith("b"):
        return None
    return w // n


def _compile_mov(ins, dec):
    words = ins.words
    if len(words) != 1 or words[0] not in _MOV_TYPES:
        if words and words[0] in ("f16", "bf16", "f16x2", "bf16x2"):
            raise PtxError(f"{ins.text}: mov has no .{words[0]} type; use .b16/.b32")
        if words == ["b128"]:
            return _compile_mov128(ins, dec)
        raise PtxError(f"{ins.text}: mov needs one type of {', '.join('.' + x for x in _MOV_TYPES)}")
    t = words[0]
    ins.type = t
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: mov takes two operands")
    d, a = ins.operands
    if any(isinstance(x, Vec) and len(x.items) == 1 for x in (d, a)):
        # ptxas accepts it, but the H100 gives mov.b32 %r7, {%r2} = %r2 & 0xff (a pack of one
        # byte; measured, docs/validation.md): not the register copy it looks like
        raise PtxError(f"{ins.text}: mov with a one-element vector {{..}} is not supported (ptxas packs "
                       "it as one byte: on the H100 mov.b32 d, {a} gives a & 0xff); write the register "
                       "without braces")
    w = TYPE_BITS[t]
    if isinstance(a, Vec):  # pack: first element -> lowest bits
        n = len(a.items)
        ew = _part_bits(t, n)
        if ew is None:
            raise PtxError(f"{ins.text}: pack {{...}} of {n} elements into .{t} is not a legal mov")
        et = f"b{ew}"
        readers = [dec.reader(x, et) for x in a.items]
        wd = dec.writer(d, t)
        ut = DTYPES[w].type

        edt = DTYPES[ew]
        shape_ok = _LITTLE

        def pack(ctx, mask):
            vals = [r(ctx) for r in readers]
            if shape_ok and all(v.__class__ is np.ndarray and v.dtype == edt
                                and v.shape == ctx.shape for v in vals):
                # the parts side by side are the packed word's bytes (little-endian)
                out = np.empty(ctx.shape + (n,), edt)
                for k, v in enumerate(vals):
                    out[..., k] = v
                wd(ctx, out.view(ut).reshape(ctx.shape), mask)
                return
            out = None
            for k, v in enumerate(vals):
                v = np.asarray(v).astype(ut) << ut(k * ew)
                out = v if out is None else (out | v)
            wd(ctx, out, mask)
        return pack
    if isinstance(d, Vec):  # unpack
        n = len(d.items)
        ew = _part_bits(t, n)
        if ew is None:
            raise PtxError(f"{ins.text}: unpack of .{t} into {n} elements is not a legal mov")
        et = f"b{ew}"
        writers = [dec.writer(x, et) for x in d.items]
        ra = dec.reader(a, t)
        edt = DTYPES[ew]
        src_dt = DTYPES[w]
        emask = src_dt.type((1 << ew) - 1)

        def unpack(ctx, mask):
            v = np.asarray(ra(ctx))
            if _LITTLE and v.shape == ctx.shape and v.dtype == src_dt and v.flags.c_contiguous:
                # element k: bits k*ew and up (little-endian)
                parts = v.view(edt).reshape(ctx.shape + (n,))
                for k, wr in enumerate(writers):
                    if wr is not None:
                        wr(ctx, np.ascontiguousarray(parts[..., k]), mask)
                return
            for k, wr in enumerate(writers):
                if wr is not None:
                    wr(ctx, ((v >> src_dt.type(k * ew)) & emask).astype(edt), mask)
        return unpack
    if t == "pred" and isinstance(a, Imm) and a.kind == "int":  # mov.pred %p, 0/1 (nvcc writes it)
        wd = dec.writer(d, t)
        c = np.bool_(a.value != 0)

        def mov_pred(ctx, mask):
            wd(ctx, np.broadcast_to(c, ctx.shape), mask)
        return mov_pred
    ra = dec.reader(a, t)
    wd = dec.writer(d, t)

    def mov(ctx, mask):
        wd(ctx, ra(ctx), mask)
    return mov


def _compile_mov128(ins, dec):
    """mov.b128 d, a: a .b128 register from a .b128 register or a pair {lo, hi} of 64-bit
    registers, or a .b128 register into such a pair (PTX 8.3+)."""
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: mov takes two operands")
    ins.type = "b128"
    d, a = ins.operands

    def pair(op):
        if isinstance(op, Vec) and len(op.items) == 2:
            return list(op.items)
        return halves128(op, ins, dec)
    srcs = [dec.reader(x, "b64") for x in pair(a)]
    dsts = [dec.writer(x, "b64") for x in pair(d)]
    if isinstance(a, Vec) and isinstance(d, Vec) and len(a.items) == 2:
        raise PtxError(f"{ins.text}: mov.b128 needs a .b128 register on one side")

    def mov128(ctx, mask):
        lo, hi = srcs[0](ctx), srcs[1](ctx)
        for w, v in zip(dsts, (lo, hi)):
            if w is not None:
                w(ctx, v, mask)
    return mov128


# --------------------------------------------------------------------------------------------
# cvta
# --------------------------------------------------------------------------------------------
def _compile_cvta(ins, dec):
    words = list(ins.words)
    to = False
    if words and words[0] == "to":
        to = True
        words = words[1:]
    if len(words) != 2 or words[0] not in _SPACES or words[1] not in ("u32", "u64"):
        raise PtxError(f"{ins.text}: expected cvta[.to].space.u64")
    if words[1] == "u32":
        raise PtxError(f"{ins.text}: cvta.u32 needs .address_size 32; warpsim runs 64-bit "
                       "addresses (use .u64 and cvt.u32.u64)")
    space = _SPACES[words[0]]
    t = words[1]
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: cvta takes two operands")
    ra = dec.reader(ins.operands[1], t)
    wd = dec.writer(ins.operands[0], t)
    dt = DTYPES[TYPE_BITS[t]]

    def run(ctx, mask):
        a = np.asarray(ra(ctx)).astype(np.uint64)
        base = np.uint64(_window(ctx, space))
        r = a - base if to else a + base
        wd(ctx, r.astype(dt), mask)
    return run


# --------------------------------------------------------------------------------------------
# cp.async
# --------------------------------------------------------------------------------------------
def _compile_cp_async(ins, dec):
    words = list(ins.words)
    if not words or words[0] not in ("ca", "cg"):
        raise PtxError(f"{ins.text}: cp.async needs .ca or .cg (bulk and tensor copies are not "
                       "supported)")
    cop = words.pop(0)
    if len(words) < 2 or words[0] not in ("shared", "shared::cta") or words[1] != "global":
        raise PtxError(f"{ins.text}: cp.async copies .shared{{::cta}}.global")
    for w in words[2:]:
        if not (w.startswith("L2::") or w == "level::cache_hint"):
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for cp.async")
    ops = list(ins.operands)
    if len(ops) < 3:
        raise PtxError(f"{ins.text}: cp.async takes [dst], [src], cp-size{{, src-size | ignore-src}}")
    rdst = dec.address(ops[0])
    rsrc = dec.address(ops[1])
    size_op = ops[2]
    if not isinstance(size_op, Imm) or size_op.kind != "int" or size_op.value not in (4, 8, 16):
        raise PtxError(f"{ins.text}: cp-size must be the constant 4, 8 or 16")
    cp = int(size_op.value)
    if cop == "cg" and cp != 16:
        raise PtxError(f"{ins.text}: cp.async.cg copies 16 bytes only")
    rsize = rignore = None
    extra = ops[3:]
    if "L2::cache_hint" in words and extra:
        extra = extra[:-1]  # the cache-policy operand
    if len(extra) > 1:
        raise PtxError(f"{ins.text}: too many operands")
    if extra:
        e = extra[0]
        if isinstance(e, Reg) and dec.reg_width(e.name) == 1 or isinstance(e, Reg) and e.neg:
            rignore = dec.reader(e, "pred")
        else:
            rsize = dec.reader(e, "u32")
    where = dec.where
    ins.info["cp_size"] = cp

    def run(ctx, mask):
        dst = rdst(ctx)
        src = rsrc(ctx)
        if mask is None:  # every lane copies all cp bytes: one gather and one scatter if it can
            if rignore is not None:
                whole = not np.any(rignore(ctx))
            else:
                whole = rsize is None or bool(np.all(rsize(ctx) == cp))
            g, sh = ctx.spaces.get("global"), ctx.spaces.get("shared")
            if whole and g.__class__ in _GLOBAL_LOADS and sh.__class__ is FlatMemory:
                got = g.units(src, cp, where)
                put = sh.units(dst, cp, where) if got is not None else None
                if put is not None:  # all lanes, whole aligned copies within one buffer
                    put[0][put[1]] = got[0][got[1]]
                    return
        n = None
        if rignore is not None:
            ign = np.broadcast_to(rignore(ctx), ctx.shape)
            n = np.where(ign, 0, cp).astype(np.int64)
        elif rsize is not None:
            n = np.broadcast_to(np.asarray(rsize(ctx)).astype(np.int64), ctx.shape)
            act = n if mask is None else np.where(mask, n, 0)
            if (act > cp).any():
                raise PtxError(f"{where}: src-size {int(act.max())} exceeds cp-size {cp}")
        if n is None or (n == cp).all():
            data = load(ctx, "global", src, cp, mask, where)
        else:
            # bytes below src-size come from global memory, the rest are zero
            data = np.zeros(ctx.shape + (cp,), np.uint8)
            if (src & np.uint64(cp - 1) != 0)[mask if mask is not None else ...].any():
                ctx.space("global", where)._check_align(src, mask, cp, cp, where)
            for k in range(cp):
                m = n > k if mask is None else (mask & (n > k))
                if m.any():
                    b = load(ctx, "global", src + np.uint64(k), 1, m, where)
                    data[..., k] = np.where(m, b[..., 0], 0)
        store(ctx, "shared", dst, data, mask, where)
    return run


def _compile_commit(ins, dec):
    if ins.words or ins.operands:
        raise PtxError(f"{ins.text}: cp.async.commit_group takes no qualifiers or operands")

    def run(ctx, mask):
        ctx.async_groups += 1
    return run


def _compile_wait(ins, dec):
    if ins.words:
        raise PtxError(f"{ins.text}: unexpected qualifier .{ins.words[0]}")
    if ins.key == "cp.async.wait_group":
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise PtxError(f"{ins.text}: cp.async.wait_group takes one integer constant")
    elif ins.operands:
        raise PtxError(f"{ins.text}: cp.async.wait_all takes no operands")
    return lambda ctx, mask: None


OPS: dict[str, OpSpec] = {
    "mov": OpSpec("mov", _MOV_TYPES, None, 1, compile=_compile_mov,
                  doc="copy; vector pack/unpack {..} (first element lowest); special registers; "
                      "variable addresses"),
    "ld": OpSpec("ld", _LDST_TYPES, None, 1, compile=_compile_ld, relaxed=True,
                 doc="load from .shared/.global/.local/.param/.const or a generic address; .v2/.v4"),
    "st": OpSpec("st", _LDST_TYPES, None, 2, ndst=0, compile=_compile_st, relaxed=True,
                 doc="store to .shared/.global/.local or a generic address; .v2/.v4"),
    "cvta": OpSpec("cvta", ("u32", "u64"), None, 1, compile=_compile_cvta,
                   doc="convert between a state-space address and a generic address"),
    "cp.async": OpSpec("cp.async", (), None, 3, ndst=0, compile=_compile_cp_async,
                       doc="copy 4/8/16 bytes global -> shared (zero-fill by src-size or ignore-src)"),
    "cp.async.commit_group": OpSpec("cp.async.commit_group", (), None, 0, ndst=0,
                                    compile=_compile_commit, doc="close a group of cp.async"),
    "cp.async.wait_group": OpSpec("cp.async.wait_group", (), None, 1, ndst=0,
                                  compile=_compile_wait, doc="wait for groups (copies complete at issue)"),
    "cp.async.wait_all": OpSpec("cp.async.wait_all", (), None, 0, ndst=0, compile=_compile_wait,
                                doc="wait for every group"),
}
