"""Clusters and warp-specialisation helpers: ``barrier.cluster.arrive/wait``, ``mapa``,
``getctarank``, ``elect.sync``, ``setmaxnreg``, ``griddepcontrol``.

The CTAs of a cluster run together (see :meth:`warpsim.Module.launch`, ``cluster=``);
``barrier.cluster`` stops the run loop like ``bar.sync`` and the launcher releases it when every
non-exited warp of every CTA of the cluster has arrived.  ``mapa`` addresses follow
:mod:`warpsim.ptx.cluster` (rank + 1 in bits 27:24).  ``elect.sync`` elects the lowest lane of
the membermask (what the H100 does; lanes outside the mask may not execute it).
``setmaxnreg`` checks its operand (24..256, a multiple of 8) and changes nothing (PTX
registers are virtual); each warp logs the ones it ran (``ctx.setmaxnreg_log``) and a launch
checks at the CTA's end that the 4 warps of each warpgroup ran the same setmaxnreg
instructions in the same order (the ISA's ``.aligned``: warpgroup-uniform; a
:class:`SetmaxnregError` otherwise).  ``griddepcontrol`` does nothing (grids run one after
another).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.cluster import RANK_SHIFT, block
from warpsim.ptx.ops.control import check_membermask
from warpsim.ptx.memory import SHARED_WINDOW
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Pipe, Sink

__all__ = ["OPS", "SetmaxnregError", "setmaxnreg_divergence"]


class SetmaxnregError(PtxError):
    """``setmaxnreg`` not run by all 4 warps of a warpgroup alike (the ISA requires the same
    instruction from every thread of the warpgroup); ``line``: the instruction concerned,
    ``warpgroup``, ``ran`` (the warps that ran it), ``instead`` (warp -> the line of the
    setmaxnreg it ran in its place, None: none), ``cta_row`` (the CTA's place in the batch)."""

    finding_kind = "divergent-sync"
    warpgroup: int | None = None
    ran: tuple = ()
    instead: dict | None = None
    cta_row: int = 0


def setmaxnreg_divergence(logs: dict) -> SetmaxnregError | None:
    """``logs``: warp index in the CTA -> its context's ``setmaxnreg_log`` (a list of
    (instruction, CTA rows that ran it)), for every warp of one CTA batch.  The first
    warpgroup (and CTA row) whose 4 warps did not run the same setmaxnreg sequence, as an error
    naming the instruction, else None."""
    groups: dict = {}
    for w, log in logs.items():
        groups.setdefault(w // 4, {})[w] = log
    for g, members in sorted(groups.items()):
        if not any(members.values()) or len(members) < 4:
            continue  # no setmaxnreg, or an incomplete warpgroup (blockDim not a multiple of 128)
        nrows = max((r.size for log in members.values() for _, r in log), default=1)
        for row in range(nrows):
            seqs = {w: [ins for ins, r in log if r[min(row, r.size - 1)]] for w, log in members.items()}
            ref = max(seqs.values(), key=len)
            for i, ins in enumerate(ref):
                ran = sorted(w for w, q in seqs.items() if len(q) > i and q[i] is ins)
                if len(ran) == len(seqs):
                    continue
                others = sorted(set(seqs) - set(ran))
                alt = {w: seqs[w][i] for w in others if len(seqs[w]) > i}
                missing = [w for w in others if w not in alt]
                how = "; ".join([f"warp {w} ran line {alt[w].line}: {alt[w].text} instead" for w in alt]
                                + ([f"warps {missing} did not run it"] if missing else []))
                e = SetmaxnregError(
                    f"setmaxnreg is not warpgroup-uniform: warps {ran} of warpgroup {g} ran it (setmaxnreg "
                    f"number {i + 1} of theirs) but {how}; every thread of the warpgroup must execute "
                    "the same setmaxnreg (.sync.aligned)")
                e.at(instruction=ins.text, line=ins.line, warp=(ran[0],))
                e.warpgroup, e.ran, e.cta_row = g, tuple(ran), row
                e.instead = {w: (alt[w].line if w in alt else None) for w in others}
                return e
    return None


def _compile_barrier_cluster(ins, dec):
    op = ins.key.rsplit(".", 1)[1]
    allowed = {"arrive": {"release", "relaxed", "aligned"}, "wait": {"acquire", "aligned"}}[op]
    for w in ins.words:
        if w not in allowed:
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for barrier.cluster.{op}")
    if ins.operands:
        raise PtxError(f"{ins.text}: barrier.cluster.{op} takes no operands")
    ins.aligned = "aligned" in ins.words
    ins.info.update(op=f"cluster_{op}")
    return lambda ctx, mask: None


def _space_words(ins, types):
    space, t = None, None
    for w in ins.words:
        if w == "shared::cluster":
            space = w
        elif w in types:
            t = w
        else:
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {ins.key}")
    if t is None:
        raise PtxError(f"{ins.text}: {ins.key} needs a type ({', '.join('.' + x for x in types)})")
    return space, t


def _compile_mapa(ins, dec):
    space, t = _space_words(ins, ("u32", "u64"))
    if len(ins.operands) != 3:
        raise PtxError(f"{ins.text}: mapa takes d, a, rank")
    ra = dec.reader(ins.operands[1], t)
    rr = dec.reader(ins.operands[2], "b32")
    wd = dec.writer(ins.operands[0], t)
    dt = np.uint32 if t == "u32" else np.uint64
    where = dec.where

    def run(ctx, mask):
        blk = block(ctx, where)
        a = np.asarray(ra(ctx)).astype(np.uint64)
        if space is None:  # generic
            a = a - np.uint64(SHARED_WINDOW)
        r = np.broadcast_to(np.asarray(rr(ctx)).astype(np.int64), ctx.shape)
        act = np.ones(ctx.shape, bool) if mask is None else mask
        if ((r >= blk.size) & act).any():
            raise PtxError(f"{where}: mapa rank {int(r[act & (r >= blk.size)][0])} is outside the cluster of "
                           f"{blk.size} CTAs")
        off = a & np.uint64((1 << RANK_SHIFT) - 1)
        out = off | ((r.astype(np.uint64) + np.uint64(1)) << np.uint64(RANK_SHIFT))
        if space is None:
            out = out + np.uint64(SHARED_WINDOW)
        wd(ctx, out.astype(dt), mask)
    return run


def _compile_getctarank(ins, dec):
    space, t = _space_words(ins, ("u32", "u64"))
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: getctarank takes d, a")
    ra = dec.reader(ins.operands[1], t)
    wd = dec.writer(ins.operands[0], "b32")

    def run(ctx, mask):
        a = np.asarray(ra(ctx)).astype(np.uint64)
        if space is None:
            a = a - np.uint64(SHARED_WINDOW)
        rank = (a >> np.uint64(RANK_SHIFT)).astype(np.int64) - 1
        own = np.asarray(ctx.specials["%cluster_ctarank"]).astype(np.int64)
        wd(ctx, np.where(rank < 0, own, rank).astype(np.uint32), mask)
    return run


def _compile_elect(ins, dec):
    if ins.words:
        raise PtxError(f"{ins.text}: expected elect.sync d|p, membermask")
    ops = list(ins.operands)
    if len(ops) != 2 or not isinstance(ops[0], Pipe) or len(ops[0].items) != 2:
        raise PtxError(f"{ins.text}: elect.sync takes d|p, membermask")
    d, p = ops[0].items
    if isinstance(p, Sink):
        raise PtxError(f"{ins.text}: elect.sync needs a predicate destination (ptxas: 'Predicate output "
                       "expected')")
    wd = dec.writer(d, "b32")
    wp = dec.writer(p, "pred")
    rm = dec.reader(ops[1], "b32")

    def run(ctx, mask):
        mem = check_membermask(ins, ctx, mask, rm(ctx))
        act = mem if mask is None else (mem & mask)
        leader = np.argmax(act, axis=-1)  # lowest active lane of the mask
        lanes = np.arange(32)
        if wd is not None:
            wd(ctx, np.broadcast_to(leader[..., None], ctx.shape).astype(np.uint32), mask)
        wp(ctx, (lanes == leader[..., None]) & act, mask)
    return run


def _compile_setmaxnreg(ins, dec):
    words = set(ins.words)
    kind = words & {"inc", "dec"}
    if len(kind) != 1 or words - {"inc", "dec", "sync", "aligned", "u32"} or "u32" not in words:
        raise PtxError(f"{ins.text}: expected setmaxnreg.{{inc|dec}}.sync.aligned.u32 N")
    if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
        raise PtxError(f"{ins.text}: setmaxnreg takes one integer constant")
    n = int(ins.operands[0].value)
    if not 24 <= n <= 256 or n % 8:
        raise PtxError(f"{ins.text}: setmaxnreg register count {n} must be a multiple of 8 in 24..256")
    ins.aligned = True

    def run(ctx, mask):
        rows = np.ones(ctx.shape[:-1] or (1,), bool) if mask is None else \
            np.asarray(mask).reshape(-1, ctx.shape[-1]).any(-1)
        log = getattr(ctx, "setmaxnreg_log", None)
        if log is None:
            log = ctx.setmaxnreg_log = []
        log.append((ins, rows.reshape(-1)))
    return run


def _compile_griddep(ins, dec):
    if ins.words not in (["launch_dependents"], ["wait"]) or ins.operands:
        raise PtxError(f"{ins.text}: expected griddepcontrol.launch_dependents or griddepcontrol.wait")
    return lambda ctx, mask: None


def _spec(key, compile, doc, kind="op", aligned=False):
    return OpSpec(key, (), None, 0, ndst=0, compile=compile, doc=doc, kind=kind, aligned=aligned)


OPS: dict[str, OpSpec] = {
    "barrier.cluster.arrive": _spec("barrier.cluster.arrive", _compile_barrier_cluster,
                                    "arrive at the cluster barrier (every thread of every CTA)", kind="barrier"),
    "barrier.cluster.wait": _spec("barrier.cluster.wait", _compile_barrier_cluster,
                                  "wait until the whole cluster arrived", kind="barrier"),
    "mapa": _spec("mapa", _compile_mapa, "the address of the same shared variable in another CTA of the cluster"),
    "getctarank": _spec("getctarank", _compile_getctarank, "the cluster rank of the CTA owning an address"),
    "elect.sync": _spec("elect.sync", _compile_elect, "elect one lane (the lowest) of the membermask"),
    "setmaxnreg": _spec("setmaxnreg", _compile_setmaxnreg,
                        "warpgroup register budget (checked, no effect)", aligned=True),
    "griddepcontrol": _spec("griddepcontrol", _compile_griddep, "programmatic dependent launch: no effect"),
}
