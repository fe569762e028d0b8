"""Atomic read-modify-write: ``atom`` (returns the old value) and ``red`` (does not).

Operations ``.add .min .max .and .or .xor .inc .dec .exch .cas`` on ``.global``, ``.shared``
or generic addresses; memory-order (``.relaxed .acquire .release .acq_rel .sc``) and scope
(``.cta .gpu .sys .cluster``) qualifiers are accepted and need nothing more here, since the
simulator runs one instruction at a time.

Order.  Lanes of one instruction that update the same bytes are applied one after another,
in a fixed order: by batch element (CTA of the launch batch), then by lane, ascending; each
sees the value the previous one left, so ``atom`` returns exactly what a sequential
execution in that order returns.  (The hardware picks some order; integer ``add``/``min``/
``max``/``and``/``or``/``xor``/``inc``-free reductions end in the same memory value for every
order, floating-point sums and the returned old values may not.)

Numerics: integer operations wrap; ``add.f32`` rounds to nearest even and flushes subnormal
inputs and results to zero (as the PTX ISA states for atomic f32 add); ``add.f64`` rounds to
nearest even; ``add.noftz.f16/.bf16`` (and x2) round to nearest even without flushing.  The
floating-point sums come from the bit-exact ALU (:mod:`warpsim.ptx.ops.floating`).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.optable import OpSpec
from warpsim.facts.types import DTYPES, TYPE_BITS

_TYPES = {
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "f16x2", "bf16", "bf16x2"),
    "min": ("u32", "s32", "u64", "s64"),
    "max": ("u32", "s32", "u64", "s64"),
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
    "inc": ("u32",), "dec": ("u32",),
    "exch": ("b32", "b64"),
    "cas": ("b16", "b32", "b64"),
}
_SEM = frozenset({"relaxed", "acquire", "release", "acq_rel", "sc", "weak", "volatile"})
_SCOPE = frozenset({"cta", "gpu", "sys", "cluster"})
_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared", "shared::cluster": "shared::cluster"}
_SIGNED = {32: np.int32, 64: np.int64}


def _float_add(t: str):
    from warpsim.ptx.ops.floating import OPS as FLOAT_OPS

    fn = FLOAT_OPS["add"].fn  # the bit-exact add.rn (x2 types lane by lane)
    ftz = "ftz" if t == "f32" else None

    def add(old, b):
        return fn([old, b], type=t, rnd="rn", ftz=ftz)
    return add


def _combine(op: str, t: str):
    """(old, b[, c]) -> new value, on register words of the type's width."""
    w = TYPE_BITS[t]
    dt = DTYPES[w]
    if op == "add":
        if t[0] == "f" or t.startswith("bf"):
            return _float_add(t)
        return lambda old, b: (old + b).astype(dt)
    if op in ("min", "max"):
        f = np.minimum if op == "min" else np.maximum
        if t[0] == "s":
            sd = _SIGNED[w]
            return lambda old, b: f(old.view(sd), np.asarray(b, dt).view(sd)).view(dt)
        return lambda old, b: f(old, b).astype(dt)
    if op == "and":
        return lambda old, b: old & b
    if op == "or":
        return lambda old, b: old | b
    if op == "xor":
        return lambda old, b: old ^ b
    if op == "inc":
        return lambda old, b: np.where(old >= b, dt.type(0), old + dt.type(1)).astype(dt)
    if op == "dec":
        return lambda old, b: np.where((old == 0) | (old > b), b, old - dt.type(1)).astype(dt)
    if op == "exch":
        return lambda old, b: np.broadcast_to(np.asarray(b, dt), old.shape)
    if op == "cas":
        return lambda old, b, c: np.where(old == b, c, old).astype(dt)
    raise PtxError(f"unknown atomic operation .{op}")  # pragma: no cover


def _parse(ins):
    space, op, t, noftz = None, None, None, False
    for w in ins.words:
        if w in _SEM or w in _SCOPE or w.startswith("L2::"):
            continue
        if w in _SPACES:
            if space is not None:
                raise PtxError(f"{ins.text}: two state spaces")
            space = _SPACES[w]
        elif w in _TYPES and op is None:
            op = w
        elif w == "noftz":
            noftz = True
        elif w in ("v2", "v4", "v8"):
            raise PtxError(f"{ins.text}: vector atomics (.{w}) are not supported")
        elif w in ("b128",):
            raise PtxError(f"{ins.text}: 128-bit atomics are not supported")
        elif t is None and w in TYPE_BITS:
            t = w
        elif w in ("local", "const", "param"):
            raise PtxError(f"{ins.text}: atomics work on .global or .shared memory, not .{w}")
        else:
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {ins.key}")
    if op is None:
        raise PtxError(f"{ins.text}: {ins.key} needs an operation "
                       f"({', '.join('.' + o for o in _TYPES)})")
    if t is None:
        raise PtxError(f"{ins.text}: {ins.key} needs a type")
    if t not in _TYPES[op]:
        raise PtxError(f"{ins.text}: .{op} takes {', '.join('.' + x for x in _TYPES[op])}, not .{t}")
    half = t in ("f16", "f16x2", "bf16", "bf16x2")
    if half and not noftz:
        raise PtxError(f"{ins.text}: {ins.key}.add.{t} requires .noftz")
    if noftz and not half:
        raise PtxError(f"{ins.text}: .noftz applies to .f16/.bf16 add only")
    return space, op, t


def _ranks(keys: np.ndarray) -> np.ndarray:
    """Position of each entry among the earlier entries with the same key (0, 1, ...)."""
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    sorted_inv = inv[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_inv)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order)) - first
    return rank


def _rmw(ctx, space, addr, mask, t, fn, srcs, where):
    """Apply ``fn`` at ``addr`` lane after lane (see the module docstring); returns old values."""
    from warpsim.ptx.ops.datamove import _generic_parts

    w = TYPE_BITS[t]
    dt = DTYPES[w]
    nbytes = w // 8
    old_all = np.zeros(ctx.shape, dt)
    if space is not None:
        parts = [(ctx.space(space, where), addr, mask)]
    else:
        parts = _generic_parts(ctx, addr, mask)
    srcs = [np.broadcast_to(np.asarray(s, dt), ctx.shape) for s in srcs]
    for sp, a, m in parts:
        log = getattr(sp, "atomic_log", None)  # the sanitizer: remote (DSMEM) atomics race with plain accesses
        if log is not None:
            log(a, nbytes, m)
        sp = getattr(sp, "inner", sp)  # bypass access recorders: atomics do not race with atomics
        act = np.ones(ctx.shape, bool) if m is None else np.asarray(m)
        idx = np.flatnonzero(act)
        if not len(idx):
            continue
        per_copy = getattr(sp, "per", "all") == "warp"
        copy = (np.arange(act.size) // 32) if per_copy else np.zeros(act.size, np.int64)
        keys = np.stack([copy[idx].astype(np.uint64), a.reshape(-1)[idx].astype(np.uint64)], axis=1)
        rank = _ranks(keys)
        for r in range(int(rank.max()) + 1):
            mr = np.zeros(act.size, bool)
            mr[idx[rank == r]] = True
            mr = mr.reshape(ctx.shape)
            old = sp.load(a, nbytes, mr, where, nbytes).view(dt)[..., 0]
            new = np.asarray(fn(old, *srcs), dt)
            sp.store(a, np.ascontiguousarray(new).reshape(ctx.shape + (1,)).view(np.uint8)
                     .reshape(ctx.shape + (nbytes,)), mr, where, nbytes)
            old_all = np.where(mr, old, old_all)
    return old_all


def _compile(ins, dec):
    space, op, t = _parse(ins)
    ops = list(ins.operands)
    nsrc = 2 if op == "cas" else 1
    is_atom = ins.key == "atom"
    want = (1 if is_atom else 0) + 1 + nsrc
    if ins.words and any(w.startswith("L2::cache_hint") for w in ins.words):
        want += 1
    if len(ops) != want:
        form = ("d, [a], b, c" if op == "cas" else "d, [a], b") if is_atom else "[a], b"
        raise PtxError(f"{ins.text}: {ins.key}.{op} takes {form}")
    wr = dec.writer(ops[0], t) if is_atom else None
    k = 1 if is_atom else 0
    raddr = dec.address(ops[k])
    readers = [dec.reader(o, t) for o in ops[k + 1:k + 1 + nsrc]]
    fn = _combine(op, t)
    where = dec.where

    def run(ctx, mask):
        old = _rmw(ctx, space, raddr(ctx), mask, t, fn, [r(ctx) for r in readers], where)
        if wr is not None:
            wr(ctx, old, mask)
    return run


_DOC = ("atomic read-modify-write on .global/.shared/generic memory; conflicting lanes in "
        "(CTA, lane) order")
OPS: dict[str, OpSpec] = {
    "atom": OpSpec("atom", (), None, 2, compile=_compile, doc=_DOC + "; returns the old value"),
    "red": OpSpec("red", (), None, 2, ndst=0, compile=_compile, doc=_DOC),
}
