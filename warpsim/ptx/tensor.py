"""``mma.sync`` inside the interpreter: fragments gathered from registers, computed by
:func:`warpsim.execute.mma` (the validated tensor-core models), D scattered back.

``mma`` is warp-synchronous: a warp runs it with all 32 lanes or none.  Sparse ``mma.sp``
plugs in through :data:`SPARSE`: a function ``(ins, dec) -> exec`` set by the module that
implements it (until then ``mma.sp`` is a PtxError).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import blockscale
from ..errors import PtxError
from ..execute import mma, resolve
from .optable import OpSpec
from .parser import Imm, Reg, Vec

#: Hook for ``mma.sp`` / ``mma.sp::ordered_metadata``: ``SPARSE(ins, dec) -> exec(ctx, mask)``.
SPARSE: Callable | None = None

_DT = {32: np.uint32, 64: np.uint64}


def _compile_mma(ins, dec):
    if any(w.startswith("sp") for w in ins.words):
        if SPARSE is None:
            raise PtxError(f"{ins.text}: sparse mma.sp is not supported yet")
        return SPARSE(ins, dec)
    mi = resolve(ins.opcode, dec.arch)
    ins.info["mma"] = mi
    want = 8 if mi.block_scale else 4
    ops = ins.operands
    if len(ops) != want:
        raise PtxError(f"{mi.text} takes {want} operands; got {len(ops)} in '{ins.text}'")
    groups = {}
    for op, o in zip("dabc", ops):
        n = mi.regs[op]
        if not isinstance(o, Vec):
            raise PtxError(f"operand {op.upper()} of {mi.text} must be a {{...}} vector of {n} "
                           f"registers")
        if len(o.items) != n:
            raise PtxError(f"operand {op.upper()} of {mi.text} needs {n} "
                           f"{mi.register_bits(op)}-bit registers per lane, got {len(o.items)}")
        groups[op] = o.items
    t = {32: "b32", 64: "b64"}
    dnames = [x.name for x in groups["d"] if isinstance(x, Reg)]
    if len(set(dnames)) != len(dnames):
        raise PtxError(f"operand D of {mi.text} names a register more than once")
    readers = {op: [dec.reader(x, t[mi.register_bits(op)]) for x in groups[op]] for op in "abc"}
    writers = [dec.writer(x, t[mi.register_bits("d")]) for x in groups["d"]]
    kw_const = {}
    scale_readers = {}
    if mi.block_scale:
        for side, data, sel in (("a", ops[4], ops[5]), ("b", ops[6], ops[7])):
            if not isinstance(sel, Vec) or len(sel.items) != 2 or \
                    not all(isinstance(x, Imm) and x.kind == "int" for x in sel.items):
                raise PtxError(f"operand {{byte-id-{side}, thread-id-{side}}} of {mi.text} must "
                               "be a vector of two immediates")
            kw_const[f"byte_id_{side}"], kw_const[f"thread_id_{side}"] = (int(x.value) for x in sel.items)
            scale_readers[side] = dec.reader(data, "b32")
        blockscale.check_selectors(mi, kw_const["byte_id_a"], kw_const["thread_id_a"],
                                   kw_const["byte_id_b"], kw_const["thread_id_b"])
    arch = dec.arch
    dt = _DT[mi.register_bits("d")]
    from ..execute import CHUNK, _compute
    from ..packing import pack_bits, unpack_bits

    def run(ctx, mask):
        words = {op: np.stack([np.broadcast_to(r(ctx), ctx.shape) for r in rs], axis=-1)
                 for op, rs in readers.items()}
        nwarps = int(np.prod(ctx.batch, dtype=np.int64))
        if not scale_readers and nwarps <= CHUNK:
            # registers are already words of the right width: skip re-validation and chunking
            with np.errstate(all="ignore"):
                codes = [unpack_bits(mi, op, words[op]) for op in "abc"]
                d = pack_bits(mi, "d", _compute(mi, arch, *codes))
        else:
            kw = dict(kw_const)
            for side, r in scale_readers.items():
                kw[f"scale_{side}"] = np.broadcast_to(r(ctx), ctx.shape)
            d = mma(mi, words["a"], words["b"], words["c"], arch=arch, **kw)
        d = np.broadcast_to(d, ctx.shape + d.shape[-1:])
        for i, w in enumerate(writers):
            if w is not None:
                w(ctx, np.ascontiguousarray(d[..., i], dtype=dt), mask)
    return run


OPS: dict[str, OpSpec] = {
    "mma": OpSpec("mma", (), None, 3, compile=_compile_mma, aligned=True,
                  doc="warp-level matrix multiply-accumulate (every dense mma.sync form)"),
}
