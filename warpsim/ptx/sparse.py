"""``mma.sp`` / ``mma.sp::ordered_metadata`` inside the interpreter: registers gathered,
computed by :func:`warpsim.execute.mma` with the metadata register and selector, D scattered."""

from __future__ import annotations

import numpy as np

from ..errors import PtxError
from ..execute import mma, resolve
from . import tensor
from .parser import Imm, Reg, Vec


def _compile_sparse(ins, dec):
    mi = resolve(ins.opcode, dec.arch)
    ops = ins.operands
    if len(ops) != 6:
        raise PtxError(f"{mi.text} takes d, a, b, c, metadata, selector; got {len(ops)} operands in '{ins.text}'")
    groups = {}
    for op, o in zip("dabc", ops):
        n = mi.regs[op]
        if not isinstance(o, Vec) or len(o.items) != n:
            raise PtxError(f"operand {op.upper()} of {mi.text} must be a {{...}} vector of {n} registers")
        groups[op] = o.items
    sel = ops[5]
    if not isinstance(sel, Imm) or sel.kind != "int":
        raise PtxError(f"the sparsity selector of {mi.text} must be an integer constant")
    t = {32: "b32", 64: "b64"}
    readers = {op: [dec.reader(x, t[mi.register_bits(op)]) for x in groups[op]] for op in "abc"}
    writers = [dec.writer(x, t[mi.register_bits("d")]) for x in groups["d"]]
    rmeta = dec.reader(ops[4], "b32")
    selector = int(sel.value)
    arch = dec.arch
    dt = np.uint64 if mi.register_bits("d") == 64 else np.uint32

    def run(ctx, mask):
        words = {op: np.stack([np.broadcast_to(r(ctx), ctx.shape) for r in rs], axis=-1)
                 for op, rs in readers.items()}
        e = np.broadcast_to(rmeta(ctx), ctx.shape)
        d = mma(mi, words["a"], words["b"], words["c"], arch=arch, metadata=e, selector=selector)
        for i, w in enumerate(writers):
            if w is not None:
                w(ctx, np.ascontiguousarray(d[..., i], dtype=dt), mask)
    return run


tensor.SPARSE = _compile_sparse
OPS: dict = {}
