"""``mbarrier``: init, arrive (and .expect_tx, .noComplete, arrive_drop), expect_tx, complete_tx,
test_wait / try_wait (state or .parity), pending_count, inval.

The phase machine lives in the barrier's shared-memory word (:mod:`warpsim.ptx.mbarrier_state`).
Addresses: ``.shared::cta`` offsets, ``.shared::cluster`` addresses (a remote CTA's barrier:
arrive / expect_tx / complete_tx only, with the sink ``_`` as result), or generic addresses.

Waiting: ``test_wait`` and ``try_wait`` return at once with the barrier's true state (a
``try_wait`` time hint changes nothing).  Both stop the run loop (like ``bar.sync``); a launcher
parks a warp whose wait failed until some barrier completes a phase, so a spin loop costs one
pass per phase, and reports a deadlock when every warp waits for a phase nobody can complete.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.cluster import block
from warpsim.ptx.memory import SHARED_WINDOW
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Sink

__all__ = ["OPS", "barrier_rows"]

_SEM = {"release", "relaxed", "acquire"}
_SCOPE = {"cta", "cluster"}
_SPACE = {"shared": "cta", "shared::cta": "cta", "shared::cluster": "cluster"}


def _parse(ins, allowed: set, sems: set):
    space, flags = None, set()
    for w in ins.words:
        if w in _SPACE:
            if space is not None:
                raise PtxError(f"{ins.text}: two state spaces")
            space = _SPACE[w]
        elif w in sems or w in _SCOPE or w in allowed:
            flags.add(w)
        elif w == "b64":
            continue
        else:
            raise PtxError(f"{ins.text}: qualifier .{w} is not supported for {ins.key}")
    if "b64" not in ins.words:
        raise PtxError(f"{ins.text}: {ins.key} needs .b64")
    return space, flags


def barrier_rows(ctx, addr, mask, space, where: str):
    """(rows, offsets, lane mask) of the active lanes' barrier addresses (lane order)."""
    blk = block(ctx, where)
    a = np.asarray(addr, np.uint64)
    if space is None:  # generic: the shared window
        inside = a >= np.uint64(SHARED_WINDOW)
        act = np.ones(a.shape, bool) if mask is None else mask
        if (act & ~inside).any():
            i = tuple(np.argwhere(act & ~inside)[0])
            raise PtxError(f"{where}: generic address {int(a[i]):#x} is not in shared memory; an mbarrier "
                           "lives in .shared").at(address=int(a[i]))
        a = np.where(inside, a - np.uint64(SHARED_WINDOW), np.uint64(0))
    m = np.ones(a.shape, bool) if mask is None else np.asarray(mask, bool)
    rows, offs = blk.resolve(ctx, a, where, cluster=True, mask=m)
    return blk, rows[m], offs[m], m


def _ops_of(ins, dec, nres: int):
    """Readers: (result writer or None, address reader, remaining operand readers)."""
    ops = list(ins.operands)
    res = None
    if nres:
        if not ops:
            raise PtxError(f"{ins.text}: missing operands")
        res = ops.pop(0)
    if not ops:
        raise PtxError(f"{ins.text}: missing the [address] operand")
    return res, dec.address(ops[0]), ops[1:]


def _compile_init(ins, dec):
    space, _ = _parse(ins, set(), set())
    if space == "cluster":
        raise PtxError(f"{ins.text}: mbarrier.init takes a .shared::cta address")
    _, raddr, rest = _ops_of(ins, dec, 0)
    if len(rest) != 1:
        raise PtxError(f"{ins.text}: mbarrier.init takes [addr], count")
    rcount = dec.reader(rest[0], "b32")
    where = dec.where

    def run(ctx, mask):
        blk, rows, offs, m = barrier_rows(ctx, raddr(ctx), mask, space, where)
        cnt = np.broadcast_to(np.asarray(rcount(ctx)), ctx.shape)[m]
        blk.mbar.init(rows, offs, cnt.astype(np.int64), where)
    return run


def _compile_inval(ins, dec):
    space, _ = _parse(ins, set(), set())
    _, raddr, rest = _ops_of(ins, dec, 0)
    if rest:
        raise PtxError(f"{ins.text}: mbarrier.inval takes [addr]")
    where = dec.where

    def run(ctx, mask):
        blk, rows, offs, m = barrier_rows(ctx, raddr(ctx), mask, space, where)
        blk.mbar.inval(rows, offs, where)
    return run


def _compile_arrive(ins, dec):
    drop = ins.key == "mbarrier.arrive_drop"
    space, flags = _parse(ins, {"expect_tx", "noComplete"}, {"release", "relaxed"})
    expect = "expect_tx" in flags
    no_complete = "noComplete" in flags
    res, raddr, rest = _ops_of(ins, dec, 1)
    if space == "cluster" and not isinstance(res, Sink):
        raise PtxError(f"{ins.text}: a .shared::cluster arrive returns no state: its result must be the sink _")
    if expect and len(rest) != 1:
        raise PtxError(f"{ins.text}: {ins.key}.expect_tx takes state, [addr], txCount")
    if no_complete and len(rest) != 1:
        raise PtxError(f"{ins.text}: {ins.key}.noComplete takes state, [addr], count")
    if len(rest) > 1:
        raise PtxError(f"{ins.text}: {ins.key} takes state, [addr] and an optional count")
    rarg = dec.reader(rest[0], "b32") if rest else None
    wres = dec.writer(res, "b64")
    where = dec.where
    name = ins.key + (".expect_tx" if expect else "")

    def run(ctx, mask):
        blk, rows, offs, m = barrier_rows(ctx, raddr(ctx), mask, space, where)
        arg = None if rarg is None else np.broadcast_to(np.asarray(rarg(ctx)), ctx.shape)[m].astype(np.int64)
        count = 1 if expect or arg is None else arg
        if not expect and arg is not None and ((arg < 1) | (arg > (1 << 20) - 1)).any():
            raise PtxError(f"{where}: arrive count must be 1..{(1 << 20) - 1}")
        if blk.defer and blk.landed:  # (sanitizer) what this warp observed goes with its arrival
            own = np.broadcast_to(blk.rows(ctx)[..., None], ctx.shape)[m]
            blk.release(own, rows, offs, getattr(ctx, "launch_info", (None,))[0])
        st = blk.mbar.update(rows, offs, arrive=count, expect=arg if expect else 0,
                             drop=count if drop else 0, no_complete=no_complete, where=where, what=name)
        if wres is not None:
            out = np.zeros(ctx.shape, np.uint64)
            out[m] = st
            wres(ctx, out, mask)
    return run


def _compile_tx(ins, dec):
    space, _ = _parse(ins, set(), {"relaxed"})
    _, raddr, rest = _ops_of(ins, dec, 0)
    if len(rest) != 1:
        raise PtxError(f"{ins.text}: {ins.key} takes [addr], txCount")
    rtx = dec.reader(rest[0], "b32")
    where = dec.where
    complete = ins.key == "mbarrier.complete_tx"

    def run(ctx, mask):
        blk, rows, offs, m = barrier_rows(ctx, raddr(ctx), mask, space, where)
        n = np.broadcast_to(np.asarray(rtx(ctx)), ctx.shape)[m].astype(np.int64)
        if complete:
            blk.mbar.update(rows, offs, complete=n, where=where, what=ins.key)
        else:
            blk.mbar.update(rows, offs, expect=n, where=where, what=ins.key)
    return run


def _compile_wait(ins, dec):
    space, flags = _parse(ins, {"parity"}, {"acquire", "relaxed"})
    if space == "cluster":
        raise PtxError(f"{ins.text}: {ins.key} takes a .shared::cta address (waits are local)")
    parity = "parity" in flags
    res, raddr, rest = _ops_of(ins, dec, 1)
    hint = ins.key == "mbarrier.try_wait"
    if not 1 <= len(rest) <= (2 if hint else 1):
        raise PtxError(f"{ins.text}: {ins.key} takes waitComplete, [addr], "
                       f"{'phaseParity' if parity else 'state'}" + (" {, suspendTimeHint}" if hint else ""))
    rarg = dec.reader(rest[0], "b32" if parity else "b64")
    if len(rest) == 2:
        dec.reader(rest[1], "b32")  # the time hint: checked, no effect
    wres = dec.writer(res, "pred")
    where = dec.where
    ins.info.update(op="mbarrier")

    def run(ctx, mask):
        blk, rows, offs, m = barrier_rows(ctx, raddr(ctx), mask, space, where)
        cur = blk.mbar.parity(rows, offs, where, ins.key)
        a = np.broadcast_to(np.asarray(rarg(ctx)), ctx.shape)[m]
        want = (a.astype(np.int64) & 1) if parity else (a.astype(np.uint64) >> np.uint64(63)).astype(np.int64)
        ok = cur != want
        if blk.defer and ok.any():  # copies in flight (sanitizer): the observed phase's data lands
            blk.observe(rows[ok], offs[ok], want[ok], getattr(ctx, "launch_info", (None,))[0])
        out = np.zeros(ctx.shape, bool)
        out[m] = ok
        if wres is not None:
            wres(ctx, out, mask)
        seen = getattr(blk, "on_phase_observed", None)  # tcgen05: mma results now complete
        if seen is not None and ok.any():
            seen(rows[ok], offs[ok], want[ok])
        ctx.mbar_wait = (bool(ok.all()), rows[~ok], offs[~ok], blk, ins)
    return run


def _compile_pending(ins, dec):
    if ins.words != ["b64"]:
        raise PtxError(f"{ins.text}: expected mbarrier.pending_count.b64 count, state")
    if len(ins.operands) != 2:
        raise PtxError(f"{ins.text}: mbarrier.pending_count takes count, state")
    rs = dec.reader(ins.operands[1], "b64")
    wd = dec.writer(ins.operands[0], "b32")

    def run(ctx, mask):
        s = np.asarray(rs(ctx), np.uint64)
        pend = ((-((s >> np.uint64(43)).astype(np.int64) & 0xFFFFF)) & 0xFFFFF).astype(np.uint32)
        wd(ctx, pend, mask)
    return run


def _compile_cp_async_arrive(ins, dec):
    """cp.async.mbarrier.arrive{.noinc}: arrive once the thread's earlier cp.async copies are
    done (they are, at issue); without .noinc the pending count is raised by one first, so the
    net effect on the phase is nothing."""
    space, flags = _parse(ins, {"noinc"}, set())
    _, raddr, rest = _ops_of(ins, dec, 0)
    if rest:
        raise PtxError(f"{ins.text}: cp.async.mbarrier.arrive takes [addr]")
    noinc = "noinc" in flags
    where = dec.where

    def run(ctx, mask):
        blk, rows, offs, m = barrier_rows(ctx, raddr(ctx), mask, space, where)
        if noinc:
            blk.mbar.update(rows, offs, arrive=1, where=where, what=ins.key)
        else:
            blk.mbar.parity(rows, offs, where, ins.key)  # must be a live barrier; +1 then -1
    return run


def _spec(key, compile, doc, kind="op"):
    return OpSpec(key, (), None, 0, ndst=0, compile=compile, doc=doc, kind=kind)


OPS: dict[str, OpSpec] = {
    "mbarrier.init": _spec("mbarrier.init", _compile_init, "initialise an mbarrier: phase 0, count arrivals"),
    "mbarrier.inval": _spec("mbarrier.inval", _compile_inval, "invalidate an mbarrier"),
    "mbarrier.arrive": _spec("mbarrier.arrive", _compile_arrive,
                             "arrive (count; .expect_tx bytes first; .noComplete); returns the state"),
    "mbarrier.arrive_drop": _spec("mbarrier.arrive_drop", _compile_arrive,
                                  "arrive and lower the expected count of later phases"),
    "mbarrier.expect_tx": _spec("mbarrier.expect_tx", _compile_tx, "expect more transaction bytes"),
    "mbarrier.complete_tx": _spec("mbarrier.complete_tx", _compile_tx, "transaction bytes landed"),
    "mbarrier.test_wait": _spec("mbarrier.test_wait", _compile_wait,
                                "has the phase of state (or of .parity) completed", kind="barrier"),
    "mbarrier.try_wait": _spec("mbarrier.try_wait", _compile_wait,
                               "test_wait that may suspend; a failed wait parks the warp", kind="barrier"),
    "cp.async.mbarrier.arrive": _spec("cp.async.mbarrier.arrive", _compile_cp_async_arrive,
                                      "arrive when the thread's cp.async copies complete (.noinc: counted in init)"),
    "mbarrier.pending_count": _spec("mbarrier.pending_count", _compile_pending,
                                    "pending arrivals recorded in a .noComplete arrive's state"),
}
