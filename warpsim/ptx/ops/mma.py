"""``mma.sync`` inside the interpreter: fragments gathered from registers, computed by
:func:`warpsim.tensorcore.execute.mma` (the validated tensor-core models), D scattered back.

``mma`` is warp-synchronous: a warp runs it with all 32 lanes or none.  Sparse ``mma.sp``
(``d, a, b, c, e, f``) runs through :func:`warpsim.tensorcore.execute.mma` with ``metadata=`` and
``selector=``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from warpsim.tensorcore import blockscale
from warpsim._util import allocator
from warpsim.errors import PtxError, WarpsimError
from warpsim.facts.sparse import check_selector
from warpsim.tensorcore.execute import CHUNK, mma, resolve
from warpsim.ptx.machine import locate
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Reg, Vec

_DT = {32: np.uint32, 64: np.uint64}


def _compile_mma(ins, dec):
    mi = resolve(ins.opcode, dec.arch)
    ins.info["mma"] = mi
    sparse = bool(mi.sparse)
    ops = list(ins.operands)
    sparse_e = sparse_f = None
    if sparse:  # d, a, b, c, e (metadata register), f (selector constant), then block scales
        if len(ops) < 6:
            raise PtxError(f"{mi.text} takes {{d}}, {{a}}, {{b}}, {{c}}, e, f (e: metadata "
                           f"register, f: sparsity selector); got {len(ops)} in '{ins.text}'")
        e, f = ops[4], ops[5]
        if isinstance(e, Vec) and len(e.items) == 1:  # {%e}: CUTLASS's SM120 sparse atoms (ptxas takes it)
            e = e.items[0]
        if not isinstance(f, Imm) or f.kind != "int":
            raise PtxError(f"operand f (sparsity selector) of {mi.text} must be an integer constant")
        sparse_f = check_selector(mi, int(f.value))
        sparse_e = dec.reader(e, "b32")
        ops = ops[:4] + ops[6:]
    want = 8 if mi.block_scale else 4
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
    dec.check_mma_operands(mi, list(ins.operands), ins.text)  # as Warp.execute checks them
    readers = {op: [dec.mma_vector_item(mi, op, x) for x in groups[op]] for op in "abc"}
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
    arch = mi.arch if dec.arch == "auto" else dec.arch  # 'auto': the target decode chose
    dt = _DT[mi.register_bits("d")]
    from warpsim.tensorcore.execute import CHUNK, _compute, batch_last_form, words_kernel
    fast = batch_last_form(mi) and arch != "exact" and not scale_readers and not sparse
    kernel = words_kernel(mi, arch) if fast else None
    from warpsim.tensorcore.packing import pack_bits, unpack_bits
    if fast:  # what fuse() needs to run this instruction with its neighbours in one call
        ins.info["mma_fuse"] = _Fusable(
            (mi, arch), kernel, (readers["a"], readers["b"], readers["c"]), writers, dt,
            tuple(_DT[mi.register_bits(op)] for op in "abc"),
            tuple(x.name for x in groups["a"] + groups["b"] + groups["c"] if isinstance(x, Reg)),
            tuple(dnames))

    def run(ctx, mask):
        nwarps = int(np.prod(ctx.batch, dtype=np.int64))
        if fast:
            # per chunk of warps, batch-last words (nregs, 32, chunk) from the (batch..., 32)
            # register arrays, and D straight back into (n, 32) arrays
            regs = [[_flat(r(ctx), ctx.shape, nwarps) for r in rs]
                    for rs in (readers["a"], readers["b"], readers["c"])]
            d = [np.empty((nwarps, 32), dt) for _ in writers]
            for s in range(0, nwarps, CHUNK):
                out = kernel(*(np.stack([x[s:s + CHUNK].T for x in rr]) for rr in regs))
                for i, di in enumerate(d):
                    di[s:s + CHUNK] = out[i].T
            for w, di in zip(writers, d):
                if w is not None:
                    w(ctx, di.reshape(ctx.shape), mask)
            return
        words = {op: np.stack([np.broadcast_to(r(ctx), ctx.shape) for r in rs], axis=-1)
                 for op, rs in readers.items()}
        if sparse:
            kw = dict(kw_const)
            for side, r in scale_readers.items():
                kw[f"scale_{side}"] = np.broadcast_to(r(ctx), ctx.shape)
            d = mma(mi, words["a"], words["b"], words["c"], arch=arch, **kw,
                    metadata=np.broadcast_to(sparse_e(ctx), ctx.shape), selector=sparse_f)
        elif not scale_readers and nwarps <= CHUNK:
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


class _Fusable(NamedTuple):
    key: tuple  # (instruction form, arch): members of one group share it
    kernel: Callable
    readers: tuple  # per operand a, b, c: one reader per register
    writers: list
    dtype: type  # D's register words
    wdtypes: tuple  # A's, B's and C's register words
    reads: tuple  # registers read (A, B, C)
    writes: tuple  # registers written (D)


def fusable(ins) -> "_Fusable | None":
    """What :func:`fuse` needs of ``ins``: a dense batch-last ``mma`` with no guard, else None."""
    if ins.guard is not None or ins.kind != 0:
        return None
    return ins.info.get("mma_fuse")


def fuse(members: list) -> Callable:
    """One ``exec(ctx, mask)`` for consecutive ``mma`` instructions (:func:`fusable`, one form,
    none reading a register an earlier one writes): their fragments are gathered into one
    batch of ``len(members)`` times the warps and computed by one engine call, as if they ran
    one after the other (each warp's tile is computed alone, so the bits are the same).  If a
    read fails (a register never written, in the Warp API), the members run one by one, so
    the error names the instruction that made it."""
    fs = [fusable(ins) for ins in members]
    f0 = fs[0]
    m = len(fs)
    kernel, dt = f0.kernel, f0.dtype
    # per operand, per register of the fragment: the member readers, in member order
    cols = [[[f.readers[k][i] for f in fs] for i in range(len(f0.readers[k]))] for k in range(3)]
    execs = [ins.exec for ins in members]
    nd = len(f0.writers)

    def run(ctx, mask):
        nwarps = int(np.prod(ctx.batch, dtype=np.int64))
        shape = ctx.shape
        n = m * nwarps
        try:
            words = []
            for k, per_reg in enumerate(cols):
                vals = [[r(ctx) for r in rs] for rs in per_reg]
                buf = np.empty((len(per_reg), n, 32), f0.wdtypes[k])
                for i, vs in enumerate(vals):
                    for j, v in enumerate(vs):
                        buf[i, j * nwarps:(j + 1) * nwarps] = _flat(v, shape, nwarps)
                words.append(buf)
        except WarpsimError:
            for ins, ex in zip(members, execs):  # one by one: the failing one raises, located
                try:
                    ex(ctx, mask)
                except WarpsimError as e:
                    raise locate(e, ins) from None
            return
        allocator.for_batch(n)
        d = np.empty((nd, n, 32), dt)
        for s in range(0, n, CHUNK):
            out = kernel(*(w[:, s:s + CHUNK].transpose(0, 2, 1) for w in words))
            d[:, s:s + CHUNK] = out.transpose(0, 2, 1)
        for j, f in enumerate(fs):
            for i, w in enumerate(f.writers):
                if w is not None:
                    w(ctx, d[i, j * nwarps:(j + 1) * nwarps].reshape(shape), mask)
    return run


def _flat(v, shape, nwarps: int) -> np.ndarray:
    """A register value as (warps, 32): a reshape when it has the full shape (the usual case;
    np.broadcast_to costs several microseconds per call), else a broadcast."""
    if isinstance(v, np.ndarray) and v.shape == shape:
        return v.reshape(nwarps, 32)
    return np.broadcast_to(v, shape).reshape(nwarps, 32)


OPS: dict[str, OpSpec] = {
    "mma": OpSpec("mma", (), None, 3, compile=_compile_mma, aligned=True,
                  doc="warp-level matrix multiply-accumulate (every dense mma.sync form)"),
}
