"""``wgmma`` (sm_90a warpgroup MMA) in the interpreter: fence, mma_async, commit_group, wait_group.

A warpgroup is 4 consecutive warps of a CTA (warps 4g..4g+3).  ``wgmma.mma_async`` is a
rendezvous: each warp stops there (the run loop's barrier class, a barrier id of its own per
warpgroup, 128 threads) and when the fourth warp of the group arrives the product is computed
for the whole group at once -- A (from the four warps' registers or a descriptor) and B read
from shared memory at that moment, as the hardware reads them once every warp has issued --
and each warp's D registers receive its 16 rows.  Values are exact whenever they are looked at,
so completing at issue gives every race-free program the hardware's results.

Async contract (PTX ISA 9.7.15.4-9.7.15.7), checked per warp: the accumulator (and A) registers
of a wgmma are in flight from its issue until a ``wgmma.wait_group`` retires its commit group;
an ordinary instruction that reads or writes one of them before then raises
:class:`WgmmaHazardError` (sanitizer finding ``wgmma-async``), as do a wgmma issued without a
``wgmma.fence`` after ordinary code touched its registers (or before the warp's first wgmma) and
a store, by any warp of the CTA, to shared-memory bytes an in-flight wgmma reads.
"""

from __future__ import annotations

import weakref
from collections import deque

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Reg, Vec
from warpsim.tensorcore import wgmma as W
from warpsim.tensorcore.desc import operand_addresses

__all__ = ["OPS", "WgmmaHazardError", "WARPGROUP_BARRIER"]

#: Barrier ids of the warpgroup rendezvous: WARPGROUP_BARRIER + warpgroup index (far above 15).
WARPGROUP_BARRIER = 1 << 20


class WgmmaHazardError(PtxError):
    """A breach of wgmma's asynchronous contract: an in-flight accumulator read or written, or
    a missing ``wgmma.fence``.  ``register``: the register concerned."""

    finding_kind = "wgmma-async"
    register: str | None = None


class _Watched(dict):
    """A warp's register file that guards the registers of in-flight wgmmas: ``pending``
    name -> instruction (ordinary reads and writes raise); ``touched`` collects the names that
    ordinary code accessed since the warp's last ``wgmma.fence``."""

    __slots__ = ("pending", "touched")

    def __init__(self, regs):
        super().__init__(regs)
        self.pending: dict = {}
        self.touched: set = set()

    def _check(self, name, how):
        if name in self.pending:
            e = WgmmaHazardError(f"register {name} {how} while the wgmma that accumulates into it "
                                 f"({self.pending[name]}) is in flight: wait for it with "
                                 "wgmma.commit_group and wgmma.wait_group first")
            e.register = name
            raise e
        self.touched.add(name)

    def get(self, name, default=None):
        self._check(name, "is read")
        return dict.get(self, name, default)

    def __setitem__(self, name, value):
        self._check(name, "is written")
        dict.__setitem__(self, name, value)


class _WarpState:
    __slots__ = ("fenced", "uncommitted", "tokens", "groups")

    def __init__(self):
        self.fenced = False
        self.uncommitted: list = []  # registers of the wgmmas not yet committed
        self.tokens: list = []  # their shared-memory reads (_Inflight tokens)
        self.groups: deque = deque()  # committed groups (names, tokens), oldest first


class _Inflight:
    """Shared-memory bytes that in-flight wgmmas read, per CTA of the batch (a count per byte),
    and a guard on the space's stores: writing such a byte before the wgmma's wait_group is a
    ``wgmma-async`` finding.  While any wgmma is in flight the space's fast whole-warp path
    (``units``) is switched off, so every store passes the check."""

    def __init__(self, space):
        inner = getattr(space, "inner", space)
        self.size = int(inner.size)
        self.chunks = (self.size + 15) // 16  # counted per 16-byte chunk: wgmma reads whole chunks
        self.busy = np.zeros(int(np.prod(inner.data.shape[:-1], dtype=np.int64)) * self.chunks, np.int32)
        self.tokens: dict = {}
        self.next = 0
        store, units = space.store, getattr(space, "units", None)

        def guarded_store(addr, data, mask, where="", align=None):
            if self.tokens:
                self.check(addr, np.asarray(data).shape[-1], mask, where)
            return store(addr, data, mask, where, align)

        def guarded_units(addr, width, where=""):
            return None if self.tokens else units(addr, width, where)
        space.store = guarded_store
        if units is not None:
            space.units = guarded_units

    def add(self, idx: list, text: str) -> int:
        """Count the bytes of each operand's index array (each touched once per array, so a
        retire undoes exactly what an add did)."""
        t = self.next
        self.next += 1
        for i in idx:
            self.busy[i] += 1
        self.tokens[t] = (idx, text)
        return t

    def retire(self, t: int) -> None:
        got = self.tokens.pop(t, None)
        if got is not None:
            for i in got[0]:
                self.busy[i] -= 1

    def check(self, addr, nbytes, mask, where):
        a = np.asarray(addr).astype(np.int64)
        lead = np.arange(a.size // a.shape[-1], dtype=np.int64).reshape(a.shape[:-1] + (1,)) * self.chunks
        byte = a[..., None] + np.arange(nbytes)
        ok = (byte >= 0) & (byte < self.size)
        idx = lead[..., None] + (byte >> 4)
        hit = np.zeros(idx.shape, bool)
        hit[ok] = self.busy[idx[ok]] > 0
        if mask is not None:
            hit &= np.asarray(mask)[..., None]
        if hit.any():
            i = tuple(int(x) for x in np.argwhere(hit)[0])
            byte = int(a[i[:-1]]) + i[-1]
            text = next(iter(self.tokens.values()))[1]
            e = WgmmaHazardError(f"{where}: stores to shared-memory byte {byte:#x} while a wgmma that "
                                 f"reads it ({text}) is in flight: wait for it (wgmma.wait_group) first")
            e.at(address=byte, space="shared", lanes=(i[-2],), warp=i[:-2])
            raise e


def _state(ctx) -> tuple[_WarpState, _Watched]:
    st = getattr(ctx, "wgmma_state", None)
    if st is None:
        st = ctx.wgmma_state = _WarpState()
        if not isinstance(ctx.regs, _Watched):
            ctx.regs = _Watched(ctx.regs)
    return st, ctx.regs


def _where(ctx, text):
    info = getattr(ctx, "launch_info", None)
    if info is None:
        raise PtxError(f"{text}: wgmma runs on a warpgroup of 4 warps; run the kernel with "
                       "warpsim.launch / Module.launch (a CTA of at least 128 threads), not Warp.run")
    w = int(info[0])
    nthreads = int(np.asarray(ctx.specials["%ntid.x"]).ravel()[0]) * \
        int(np.asarray(ctx.specials["%ntid.y"]).ravel()[0]) * int(np.asarray(ctx.specials["%ntid.z"]).ravel()[0])
    if nthreads < 128 * (w // 4 + 1):
        raise PtxError(f"{text}: wgmma outside a full warpgroup: warp {w} belongs to warpgroup "
                       f"{w // 4} (warps {4 * (w // 4)}..{4 * (w // 4) + 3}, threads "
                       f"{128 * (w // 4)}..{128 * (w // 4) + 127}), but the CTA has {nthreads} threads")
    return w


def _simple(kind):
    def compile_(ins, dec):
        words = [w for w in ins.words]
        if words != ["sync", "aligned"]:
            raise PtxError(f"{ins.text}: write wgmma.{kind}.sync.aligned")
        if kind == "wait_group":
            if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm) or ins.operands[0].kind != "int":
                raise PtxError(f"{ins.text}: wgmma.wait_group takes one integer constant N")
            n = int(ins.operands[0].value)
            if n < 0:
                raise PtxError(f"{ins.text}: N must be >= 0")
        elif ins.operands:
            raise PtxError(f"{ins.text}: wgmma.{kind} takes no operands")

        def run(ctx, mask):
            _where(ctx, ins.text)
            st, regs = _state(ctx)
            if kind == "fence":
                st.fenced = True
                regs.touched.clear()
            elif kind == "commit_group":
                st.groups.append((st.uncommitted, st.tokens))
                st.uncommitted, st.tokens = [], []
            else:
                inflight = _INFLIGHT.get(ctx.spaces.get("shared"))
                while len(st.groups) > n:
                    names, tokens = st.groups.popleft()
                    for name in names:
                        regs.pending.pop(name, None)
                    if inflight is not None:
                        for t in tokens:  # the first warp of the group to wait retires them
                            inflight.retire(t)
        return run
    return compile_


class _Group:
    """The warpgroup rendezvous of one wgmma.mma_async: each warp's context as it arrives."""

    __slots__ = ("arrived",)

    def __init__(self):
        self.arrived: dict = {}


_RENDEZVOUS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_INFLIGHT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _names(op, what, text):
    if not isinstance(op, Vec):
        raise PtxError(f"{text}: operand {what} must be a {{...}} vector of registers")
    out = []
    for x in op.items:
        if not isinstance(x, Reg) or x.neg:
            raise PtxError(f"{text}: operand {what} must hold registers, got {x!r}")
        out.append(x.name)
    return out


def _group_of(op):
    if isinstance(op, Vec):
        return [_group_of(x) for x in op.items]
    if isinstance(op, Imm) and op.kind == "int":
        return int(op.value)
    if isinstance(op, Reg):
        return ("!" if op.neg else "") + op.name
    return getattr(op, "text", str(op))


def _compile_mma_async(ins, dec):
    if dec.arch not in ("sm_90a",):
        raise PtxError(f"{ins.text}: wgmma needs the sm_90a target; launch with arch='sm_90a' "
                       f"(got {dec.arch})")
    wi = W.decode_wgmma(ins.opcode, "sm_90a")
    wi = W.check_operands(wi, [_group_of(o) for o in ins.operands])
    ops = list(ins.operands)
    names = wi.operand_names(wi.a_desc)
    d_names = _names(ops[0], "D", ins.text)
    if len(set(d_names)) != len(d_names):
        raise PtxError(f"{ins.text}: operand D names a register more than once")
    a_names = None if wi.a_desc else _names(ops[1], "A", ins.text)
    a_desc = dec.reader(ops[1], "b64") if wi.a_desc else None
    b_desc = dec.reader(ops[2], "b64")
    extra = dict(zip(names[3:], ops[3:]))
    sp_meta = dec.reader(extra["sp-meta"], "b32") if wi.sparse else None
    sp_sel = int(extra["sp-sel"].value) if wi.sparse else None
    sd = extra["scale-d"]
    scale_d = (lambda ctx, v=bool(sd.value): v) if isinstance(sd, Imm) else dec.reader(sd, "pred")
    imm = {k: int(v.value) for k, v in extra.items() if k.startswith("imm-")}
    scale_a, scale_b = imm.get("imm-scale-a", 1), imm.get("imm-scale-b", 1)
    where = dec.where
    trans_a, trans_b = imm.get("imm-trans-a", 0), imm.get("imm-trans-b", 0)
    ebits = {"a": W.TYPE_BITS[wi.atype], "b": W.TYPE_BITS[wi.btype]}
    watch = tuple(d_names) + tuple(a_names or ())
    ins.aligned = True
    ins.info.update(op="wgmma", count=lambda ctx: np.uint32(128))

    def bid(ctx):
        return np.uint32(WARPGROUP_BARRIER + _where(ctx, ins.text) // 4)
    ins.info["id"] = bid

    def run(ctx, mask):
        w = _where(ctx, ins.text)
        st, regs = _state(ctx)
        missing = [n for n in watch if n in regs.touched]
        if not st.fenced or missing:
            e = WgmmaHazardError(
                f"{ins.text}: no wgmma.fence " + ("before this warp's first wgmma" if not st.fenced else
                                                   f"after ordinary code accessed {missing[0]}")
                + " (wgmma.fence.sync.aligned must order register accesses before a wgmma)")
            e.register = missing[0] if missing else None
            raise e
        for n in watch:
            if n in regs.pending and regs.pending[n] != ins.opcode:
                e = WgmmaHazardError(f"{ins.text}: register {n} belongs to an in-flight wgmma of "
                                     f"another shape ({regs.pending[n]}); wait for it first")
                e.register = n
                raise e
        space = ctx.space("shared", ins.text)
        grp = _RENDEZVOUS.setdefault(space, {}).setdefault(w // 4, _Group())
        grp.arrived[w % 4] = ctx
        if len(grp.arrived) < 4:
            return
        ctxs = [grp.arrived[i] for i in range(4)]
        grp.arrived.clear()
        read = _execute(wi, ctxs, space, d_names, a_names, a_desc, b_desc, scale_d, scale_a, scale_b,
                        trans_a, trans_b, ebits, ins.text, sp_meta, sp_sel)
        blk = getattr(ctx, "block", None)
        if blk is not None and blk.checking:  # the async proxy reads: fenced, no copy in flight
            blk.check_async_chunks(ctx, read, where, [_where(c, ins.text) for c in ctxs])
        inflight = _INFLIGHT.get(space)
        if inflight is None:
            inflight = _INFLIGHT[space] = _Inflight(space)
        token = inflight.add(read, ins.text)
        for c in ctxs:
            s, r = _state(c)
            for n in watch:
                r.pending[n] = ins.opcode
            s.uncommitted.extend(watch)
            s.tokens.append(token)
    return run


def _uniform_desc(ctxs, reader, what, text):
    vals = [np.asarray(reader(c), dtype=np.uint64) for c in ctxs]
    v0 = np.broadcast_to(vals[0], ctxs[0].shape)
    for v in vals:
        vb = np.broadcast_to(v, ctxs[0].shape)
        if not (vb == v0[..., :1]).all():
            raise PtxError(f"{text}: descriptor {what} differs between the threads of a warpgroup "
                           "(it must be uniform)")
    return v0[..., 0]  # (nb,)


def _words(ctx, names, text, unread: bool = False):
    """The 32-bit words of registers ``names`` (nb, 32, n).  A register no instruction wrote
    reads 0 where the instruction does not use its value (``unread``: scale-d false) or in an
    unchecked launch (``ctx.unwritten_reads_zero``); otherwise it is an error."""
    out = []
    for n in names:
        a = dict.get(ctx.regs, n)
        if a is None and (unread or ctx.unwritten_reads_zero):
            a = np.zeros(ctx.shape, np.uint32)
        if a is None:
            raise PtxError(f"{text}: register {n} has not been written")
        a = np.asarray(a)
        if a.dtype.itemsize != 4:
            raise PtxError(f"{text}: {n} is a {a.dtype.itemsize * 8}-bit register; wgmma "
                           "operands are 32-bit")
        out.append(np.broadcast_to(a.view(np.uint32) if a.dtype != np.uint32 else a, ctx.shape))
    return np.stack(out, axis=-1)  # (nb, 32, nregs)


def _smem_codes(space, addr, bits, nb):
    """Element codes at byte addresses addr (nb, rows, cols) of each CTA's shared memory."""
    data = space.data.reshape(nb, -1)
    nbytes = max(bits // 8, 1)
    b = np.arange(nb)[:, None, None]
    code = np.zeros(addr.shape, np.uint32)
    for j in range(nbytes):
        code |= data[b, addr + j].astype(np.uint32) << np.uint32(8 * j)
    return code


def _execute(wi, ctxs, space, d_names, a_names, a_desc, b_desc, scale_d, scale_a, scale_b,
             trans_a, trans_b, ebits, text, sp_meta=None, sp_sel=None):
    nb = ctxs[0].shape[0] if len(ctxs[0].shape) > 1 else 1
    shape = ctxs[0].shape
    size = int(getattr(space, "size"))
    k, n = wi.k, wi.n
    # B (k x n): descriptor rows are N, its k the K of the instruction
    bd = _uniform_desc(ctxs, b_desc, "B", text)
    if wi.btype == "b1":
        baddr = operand_addresses(bd, rows=n, k=32, elem_bits=8, major="K", operand="b", smem_bytes=size)
        bbytes = _smem_codes(space, baddr, 8, nb)  # (nb, n, 32 bytes)
        B = np.unpackbits(bbytes.astype(np.uint8)[..., None], axis=-1, bitorder="little").reshape(nb, n, 256)
        B = B.transpose(0, 2, 1).astype(np.int64)
    else:
        baddr = operand_addresses(bd, rows=n, k=k, elem_bits=ebits["b"], major="MN" if trans_b else "K",
                                  operand="b", smem_bytes=size)
        B = _decode(wi, "b", _smem_codes(space, baddr, ebits["b"], nb)).transpose(0, 2, 1)
    wa = W.half(wi) if wi.sparse else wi  # a sparse form's A is the compressed 64 x K/2
    ka = wa.k
    if a_desc is not None:
        ad = _uniform_desc(ctxs, a_desc, "A", text)
        if wi.atype == "b1":
            aaddr = operand_addresses(ad, rows=64, k=32, elem_bits=8, major="K", operand="a", smem_bytes=size)
            ab = _smem_codes(space, aaddr, 8, nb)
            A = np.unpackbits(ab.astype(np.uint8)[..., None], axis=-1, bitorder="little").reshape(nb, 64, 256)
            A = A.astype(np.int64)
        else:
            aaddr = operand_addresses(ad, rows=64, k=ka, elem_bits=ebits["a"], major="MN" if trans_a else "K",
                                      operand="a", smem_bytes=size)
            A = _decode(wi, "a", _smem_codes(space, aaddr, ebits["a"], nb))
    else:
        regs = np.concatenate([_words(c, a_names, text) for c in ctxs], axis=-2)  # (nb, 128, 4)
        A = _decode(wi, "a", W.unpack_codes(wa, "a", regs))
    cols = None
    if wi.sparse:
        meta = np.concatenate([np.broadcast_to(np.asarray(sp_meta(c)).astype(np.uint32), shape)
                               for c in ctxs], axis=-1)  # (nb, 128)
        cols = W.sparse_columns(wi, meta, sp_sel)
    sd = np.stack([np.broadcast_to(np.asarray(scale_d(c), bool), shape) for c in ctxs], -2)
    if not (sd == sd[..., :1, :1]).all():
        raise PtxError(f"{text}: scale-d differs between the threads of the warpgroup")
    sd = sd[..., 0, 0].reshape(nb)
    dregs = np.concatenate([_words(c, d_names, text, unread=not sd.any()) for c in ctxs],
                           axis=-2)  # (nb, 128, nd)
    C = _decode(wi, "d", W.unpack_codes(wi, "d", dregs))
    D = W.compute(wi, A, B, C, arch="sm_90a", scale_a=scale_a, scale_b=scale_b, scale_d=sd, cols=cols)
    lead = (np.arange(nb, dtype=np.int64) * ((size + 15) // 16))[:, None, None]
    read = [(lead + (ad >> 4)).reshape(-1) for ad in ([baddr] + ([aaddr] if a_desc is not None else []))]
    codes = W.encode_d(wi, D) if wi.dtype != "s32" else (D.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    words = W.pack_codes(wi, "d", codes).reshape(shape[:-1] + (128, len(d_names)))
    for i, c in enumerate(ctxs):
        part = words[..., 32 * i:32 * i + 32, :]
        for r, name in enumerate(d_names):
            old = dict.get(c.regs, name)
            v = np.ascontiguousarray(part[..., r])
            if old is not None and old.dtype != np.uint32:
                v = v.view(old.dtype)
            dict.__setitem__(c.regs, name, v)
    return read


def _decode(wi, op, codes):
    from warpsim.facts import formats
    t = wi.type_of(op)
    if t == "s32":
        return codes.astype(np.int64) - ((codes.astype(np.int64) >> 31) << 32)
    return formats.decode(codes.astype(formats.get_format(t).storage_dtype), t)


OPS: dict[str, OpSpec] = {
    "wgmma.mma_async": OpSpec("wgmma.mma_async", (), None, 3, kind="barrier", aligned=True,
                              compile=_compile_mma_async,
                              doc="warpgroup matrix multiply-accumulate (sm_90a): a rendezvous of the "
                                  "4 warps of a warpgroup"),
    "wgmma.fence": OpSpec("wgmma.fence", (), None, 0, ndst=0, aligned=True, compile=_simple("fence"),
                          doc="orders register accesses before wgmma.mma_async"),
    "wgmma.commit_group": OpSpec("wgmma.commit_group", (), None, 0, ndst=0, aligned=True,
                                 compile=_simple("commit_group"),
                                 doc="closes the warp's uncommitted wgmmas into a group"),
    "wgmma.wait_group": OpSpec("wgmma.wait_group", (), None, 1, ndst=0, aligned=True,
                               compile=_simple("wait_group"),
                               doc="waits until at most N wgmma groups are in flight"),
}
