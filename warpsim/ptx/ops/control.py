"""Control instructions: branches, exit/ret, warp and CTA barriers, memory fences.

Branch targets and reconvergence points are resolved by :class:`~warpsim.ptx.program.Program`;
the run loop (:func:`warpsim.ptx.machine.run`) does the masking.  ``bar.sync`` /
``barrier.sync`` / ``bar.arrive`` stop the run loop after the instruction (status 'barrier'),
so that a launcher can run the other warps of the CTA and resume; a lone warp resumes at once.
Fences and ``membar`` order memory between threads; one warp run in program order needs
nothing from them, so they are decoded and checked, then do nothing.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import DivergenceError, PtxError, first_lanes
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Reg


def _nothing(ctx, mask):
    return None


def _words_ok(ins, allowed: set, what: str) -> None:
    bad = [w for w in ins.words if w not in allowed]
    if bad:
        raise PtxError(f"{ins.text}: qualifier .{bad[0]} is not supported for {what}")


def _compile_bra(ins, dec):
    _words_ok(ins, {"uni"}, "bra")
    ins.uniform = "uni" in ins.words
    if len(ins.operands) != 1 or not isinstance(ins.operands[0], Reg):
        raise PtxError(f"{ins.text}: bra takes one label operand")
    ins.info["label"] = ins.operands[0].name
    return _nothing


def _compile_exit(ins, dec):
    _words_ok(ins, {"uni"}, ins.key)
    if ins.operands:
        raise PtxError(f"{ins.text}: {ins.key} takes no operands")
    return _nothing


def _membermask(ins, dec, op):
    return dec.reader(op, "b32")


def _compile_warp_sync(ins, dec):
    _words_ok(ins, set(), "bar.warp.sync")
    if len(ins.operands) != 1:
        raise PtxError(f"{ins.text}: bar.warp.sync takes one operand (membermask)")
    rm = _membermask(ins, dec, ins.operands[0])

    def run(ctx, mask):
        check_membermask(ins, ctx, mask, rm(ctx))
    return run


_LANE_BITS = (np.uint32(1) << np.arange(32, dtype=np.uint32))


def check_membermask(ins, ctx, mask, mm, groups: bool = False) -> np.ndarray:
    """Per-lane membership (*batch, 32) of ``mm``; errors when an executing lane is not in its
    membermask, or a lane named by the membermask does not execute the instruction.

    ``groups``: lanes may give different membermasks that split the warp into groups (what
    cooperative groups' tiled partitions do with shfl.sync): every lane named by a lane's mask
    must execute with that same mask; returns the executing lanes."""
    from warpsim.ptx.machine import lanes_text
    mm = np.broadcast_to(np.asarray(mm, np.uint32), ctx.shape)
    act = np.ones(ctx.shape, bool) if mask is None else mask
    # every executing lane must give the same membermask; take the first executing lane's
    first = np.take_along_axis(mm, np.argmax(act, axis=-1)[..., None], axis=-1)
    differ = act & (mm != first)
    if differ.any() and groups:
        own = act & ((mm & _LANE_BITS) == 0)
        if own.any():
            raise DivergenceError(f"{ins.text}: {lanes_text(own)} execute it but are not in their "
                                  "membermask").at(**first_lanes(own))
        # lane l's group: the lanes its mask names; each must execute with the same mask
        named = ((mm[..., :, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)  # [l, j]
        bad = act & np.any(named & ~(act[..., None, :] & (mm[..., None, :] == mm[..., :, None])), axis=-1)
        if bad.any():
            raise DivergenceError(f"{ins.text}: the membermasks of {lanes_text(bad)} name lanes that do "
                                  "not execute it with the same membermask").at(**first_lanes(bad))
        return act
    if differ.any():
        raise DivergenceError(f"{ins.text}: membermask differs between executing lanes "
                              f"({lanes_text(differ)})").at(**first_lanes(differ))
    mem = (first & _LANE_BITS) != 0
    out = act & ~mem
    if out.any():
        raise DivergenceError(f"{ins.text}: {lanes_text(out)} execute it but are not in the "
                              "membermask").at(**first_lanes(out))
    missing = mem & ~act & act.any(axis=-1, keepdims=True)
    if missing.any():
        raise DivergenceError(f"{ins.text}: membermask names {lanes_text(missing)}, which do not "
                              "execute it here (divergent); warpsim runs converged code only"
                              ).at(**first_lanes(missing))
    return mem


def _compile_barrier(ins, dec):
    words = list(ins.words)
    op = "sync"
    for w in ("sync", "arrive"):
        if w in words:
            op = w
            words.remove(w)
            break
    else:
        raise PtxError(f"{ins.text}: supported barriers are bar.sync, bar.arrive, barrier.sync "
                       "and barrier.arrive")
    aligned = ins.key == "bar"
    if "aligned" in words:
        aligned = True
        words.remove("aligned")
    if words:
        raise PtxError(f"{ins.text}: qualifier .{words[0]} is not supported for {ins.key}.{op}")
    if not 1 <= len(ins.operands) <= 2:
        raise PtxError(f"{ins.text}: {ins.key}.{op} takes a barrier id and an optional thread count")
    if op == "arrive" and len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: {ins.key}.arrive needs a thread count")
    ins.aligned = aligned
    rid = dec.reader(ins.operands[0], "u32")
    rcount = dec.reader(ins.operands[1], "u32") if len(ins.operands) == 2 else None
    ins.info.update(op=op, id=rid, count=rcount)

    def run(ctx, mask):
        bid = np.asarray(rid(ctx))
        if (bid > 15).any():
            raise PtxError(f"{ins.text}: barrier id must be 0..15")
        if rcount is not None:
            c = np.asarray(rcount(ctx))
            if ((c % 32) != 0).any() or (c == 0).any():
                raise PtxError(f"{ins.text}: thread count must be a non-zero multiple of 32")
    return run


def _compile_fence(ins, dec):
    known = {"cta", "gl", "sys", "gpu", "cluster", "sc", "acq_rel", "acquire", "release",
             "proxy", "async", "alias", "tensormap", "generic", "mbarrier_init", "shared::cta",
             "shared::cluster", "global", "op_restrict", "sync_restrict::shared::cta",
             "sync_restrict::shared::cluster", "async::generic", "tensormap::generic",
             "to_proxy::from_proxy"}
    _words_ok(ins, known, ins.key)
    if "tensormap::generic" in ins.words and ins.operands:
        if len(ins.operands) != 2:
            raise PtxError(f"{ins.text}: fence.proxy.tensormap::generic takes [addr], 128")
        return _nothing
    if ins.operands:
        raise PtxError(f"{ins.text}: {ins.key} takes no operands")
    if ins.key == "fence" and "proxy" in ins.words and "async" in ins.words \
            and "global" not in ins.words:
        where = dec.where

        def proxy_async(ctx, mask):  # the async proxy now sees the CTA's shared memory
            if "shared" not in ctx.spaces:
                return
            from warpsim.ptx.cluster import block
            blk = block(ctx, where)
            rows = blk.rows(ctx)
            act = np.ones(ctx.shape, bool) if mask is None else mask
            blk.fence(rows[act.any(axis=-1)])
        return proxy_async
    return _nothing


def _compile_nop(ins, dec):
    return _nothing


OPS: dict[str, OpSpec] = {
    "bra": OpSpec("bra", (), None, 0, ndst=0, kind="branch", compile=_compile_bra,
                  doc="branch to a label; .uni asserts the branch is uniform"),
    "ret": OpSpec("ret", (), None, 0, ndst=0, kind="exit", compile=_compile_exit,
                  doc="return: in a kernel body the lanes finish"),
    "exit": OpSpec("exit", (), None, 0, ndst=0, kind="exit", compile=_compile_exit,
                   doc="the lanes finish"),
    "bar.warp.sync": OpSpec("bar.warp.sync", (), None, 1, ndst=0, compile=_compile_warp_sync,
                            doc="warp barrier: every lane of the membermask must execute it"),
    "bar": OpSpec("bar", (), None, 2, ndst=0, kind="barrier", compile=_compile_barrier,
                  doc="CTA barrier (bar.sync is .aligned); the run loop stops after it"),
    "barrier": OpSpec("barrier", (), None, 2, ndst=0, kind="barrier", compile=_compile_barrier,
                      doc="CTA barrier; .aligned optional"),
    "membar": OpSpec("membar", (), None, 0, ndst=0, compile=_compile_fence,
                     doc="memory barrier: no effect on one warp run in order"),
    "fence": OpSpec("fence", (), None, 0, ndst=0, compile=_compile_fence,
                    doc="memory fence: no effect on one warp run in order"),
}
