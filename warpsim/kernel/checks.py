"""The sanitizer's checks during one launch (``check=True``): one :class:`Recorder` per run.

Every instruction of the run's program is wrapped (instance-level: the program is a fresh
copy) so that the recorder knows the instruction, its lanes and its operands; the memory
spaces are wrapped by :class:`_Recording` s that see every access.  What is tracked:

- **accesses** per barrier interval (byte, CTA, warp, lane, instruction instance, warp-sync
  epoch): races between warps, between lanes of one warp, and between CTAs;
- **initialisation**: an origin per register lane and per shared/local byte: 0 initialised,
  -1 never written, k > 0 computed from never-written state first read by instruction site
  k - 1.  Results take the largest origin of their sources (cross-lane instructions: of every
  active lane); a global store or a branch/predicate with origin != 0 is a finding;
- **provenance** of addresses: a register computed (mov/add/sub/mad/cvta/cvt) from a static
  variable's address carries that variable's tag; an access through it must stay inside it;
- **cp.async in flight**: copies are held back until the issuing warp's
  ``cp.async.wait_group``/``wait_all`` (or its end), their destination bytes marked in flight.
"""

from __future__ import annotations

import numpy as np

from warpsim.kernel.sanitizer import Finding, tid_of, unravel

__all__ = ["Recorder"]

#: Instructions whose results mix lanes (a result lane depends on other lanes' sources).
_CROSS = ("shfl", "vote", "match", "redux", "mma", "wmma", "ldmatrix", "stmatrix", "movmatrix",
          "wgmma", "tcgen05", "activemask")
#: Warp synchronisations: they order the memory accesses of the lanes they name (as does every
#: ``.sync`` instruction: each lane waits there until the warp's others arrive).
_WSYNC = ("bar.warp.sync", "shfl", "vote", "match", "redux")
#: Instructions whose result is an address computed from their sources' addresses.
_PROV = {"mov", "add", "sub", "mad", "cvta", "cvt"}
_MAX_FINDINGS = 100_000
#: Race-log actors of accesses to another CTA's shared memory: _REMOTE * (CTA row + 1) + warp.
_REMOTE = 1 << 16


def _flat(op):
    from warpsim.ptx.parser import Pipe, Reg, Vec

    if isinstance(op, (Vec, Pipe)):
        out = []
        for x in op.items:
            out += _flat(x)
        return out
    return [op.name] if isinstance(op, Reg) else []


def _o(sh, name, val):
    """Origin of register ``name`` (never written -> ``val``, the reading site)."""
    v = sh.get(name, -1)
    if isinstance(v, int):
        return val if v < 0 else v
    if (v < 0).any():
        return np.where(v < 0, np.int32(val), v)
    return v


def _shfl_lanes(ins, ops):
    """For ``shfl.sync`` with a register source: (its name, a function giving the source lane
    of every lane from the context's b and c operands), else None."""
    from warpsim.ptx.ops.warpops import shfl_source
    from warpsim.ptx.parser import Imm, Reg

    mode = next((w for w in ins.opcode.split(".") if w in ("up", "down", "bfly", "idx")), None)
    if mode is None or len(ops) != 5 or not isinstance(ops[1], Reg):
        return None

    def value(op):
        if isinstance(op, Imm):
            return lambda ctx: np.int64(int(op.value) & 0xFFFFFFFF)
        if isinstance(op, Reg):
            return lambda ctx: ctx.regs[op.name].astype(np.int64) if op.name in ctx.regs else np.int64(0)
        return None

    vb, vc = value(ops[2]), value(ops[3])
    if vb is None or vc is None:
        return None

    def lanes(ctx):
        b = np.broadcast_to(vb(ctx), ctx.shape)
        c = np.broadcast_to(vc(ctx), ctx.shape)
        return shfl_source(mode, b, c)[0]
    return ops[1].name, lanes


def _mx(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return np.maximum(a, b)


def _put(store, name, val, mask, default=-1):
    if mask is None:
        store[name] = val
        return
    old = store.get(name, default)
    if isinstance(val, int) and isinstance(old, int) and val == old:
        return
    store[name] = np.where(mask, np.int32(val) if isinstance(val, int) else val,
                           np.int32(old) if isinstance(old, int) else old).astype(np.int32)


def _any_set(o, mask) -> bool:
    if isinstance(o, int):
        return o != 0 and (mask is None or bool(np.asarray(mask).any()))
    o = o != 0
    if mask is not None:
        o = o & mask
    return bool(o.any())


class _Recording:
    """Forwards to an address space, telling the :class:`Recorder` about each access."""

    def __init__(self, inner, rec: "Recorder", name: str) -> None:
        self.inner = inner
        self._rec = rec
        self._name = name
        data = getattr(inner, "data", None)
        self._own = None
        # paged local memory keeps its origins in its own pages (only those touched)
        self._paged = name == "local" and hasattr(inner, "track_origins")
        if self._paged:
            inner.track_origins()
        elif name == "local" and data is not None:
            self._own = np.full(data.shape, -1, np.int32)  # origin per byte (see module doc)

    @property
    def shadow(self):
        """Origin per byte of this space (shared: the rows of the running context in the
        recorder's per-batch array, which async copies and other CTAs' writes also update)."""
        if self._name == "shared":
            return self._rec.shared_rows(self.inner.data.shape)[0]
        return self._own

    @property
    def inflight(self):
        """Shared bytes a cp.async in flight writes (its site + 1), else 0."""
        if self._name == "shared":
            return self._rec.shared_rows(self.inner.data.shape)[1]
        return None

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def atomic_log(self, addr, nbytes, mask) -> None:
        """An atomic through this space (warpsim.ptx.ops.atomic): another CTA's shared memory
        is logged for the race check (atomics race with plain accesses only)."""
        if self._name == "shared::cluster":
            self._rec.dsmem_log(self, addr, nbytes, mask, True)

    def _index(self, addr, nbytes, mask):
        """Index tuple of the bytes an access touches in ``shadow`` (masked lanes at 0)."""
        sh = self.shadow if self.shadow is not None else self.inflight
        off = addr.astype(np.int64)
        if mask is not None:
            off = np.where(mask, off, 0)
        idx = np.clip(off[..., None] + np.arange(nbytes), 0, sh.shape[-1] - 1)
        nb = addr.shape[0]
        b = np.arange(nb).reshape((nb,) + (1,) * (idx.ndim - 1))
        if sh.ndim == 3:  # per lane (local memory)
            lane = np.arange(addr.shape[1]).reshape((1, -1, 1))
            return b, lane, idx
        return b, idx

    def _cluster_index(self, addr, nbytes, mask):
        rows, off = self.inner.blk.resolve(self.inner.ctx, np.asarray(addr, np.uint64), "", cluster=True, mask=mask)
        if mask is not None:
            rows, off = np.where(mask, rows, 0), np.where(mask, off, 0)
        sh = self._rec.sh_shadow
        return rows[..., None], np.clip(off[..., None] + np.arange(nbytes), 0, sh.shape[-1] - 1)

    def load(self, addr, nbytes, mask, where="", align=None):
        rec = self._rec
        out = self.inner.load(addr, nbytes, mask, where, align)
        if rec.blk is not None and (rec.blk.copies or rec.blk.landed):
            rec.bulk_access(self, addr, nbytes, mask, False)
        if self._name == "shared::cluster":
            rec.dsmem_log(self, addr, nbytes, mask, False)
            if rec.sh_shadow is not None:
                o = rec.sh_shadow[self._cluster_index(addr, nbytes, mask)]
                o = np.where(o < 0, np.int32(rec.cur_site + 1), o)
                rec.cur_load = o if mask is None else np.where(mask[..., None], o, 0)
            return out
        rec.bounds(self._name, addr, nbytes, mask)
        if self._paged or self.shadow is not None:
            ix = None if self._paged else self._index(addr, nbytes, mask)
            o = self.inner.origins(addr, nbytes, mask) if self._paged else self.shadow[ix]
            if (o < 0).any():
                o = np.where(o < 0, np.int32(rec.cur_site + 1), o)
            if mask is not None:
                o = np.where(mask[..., None], o, 0)
            rec.cur_load = o if rec.cur_load is None or rec.cur_load.shape != o.shape \
                else np.maximum(rec.cur_load, o)
            if rec.inflight_sites and self.inflight is not None:
                rec.check_inflight(self, ix, mask)
        if self._name == "global" and rec.cur_async:
            rec.async_src.append((addr, nbytes, mask))
        if self._name in rec.logs:
            rec.log(self._name, addr, nbytes, mask, False)
        return out

    def store(self, addr, data, mask, where="", align=None):
        rec = self._rec
        nbytes = data.shape[-1]
        if rec.blk is not None and (rec.blk.copies or rec.blk.landed):
            rec.bulk_access(self, addr, nbytes, mask, True)
        if self._name == "shared" and rec.cur_async:  # held back until the wait
            self.inner._offsets(addr, nbytes, mask, where, align)  # bounds and alignment now
            rec.hold(self, addr, data, mask, where)
            return
        self.inner.store(addr, data, mask, where, align)
        if self._name == "shared::cluster":  # another CTA's shared memory (DSMEM)
            rec.dsmem_log(self, addr, nbytes, mask, True)
            if rec.sh_shadow is not None:
                ix = self._cluster_index(addr, nbytes, mask)
                o = np.broadcast_to(rec.store_origin(addr.shape, nbytes), addr.shape + (nbytes,))
                m = np.ones(addr.shape, bool) if mask is None else mask
                rec.sh_shadow[tuple(np.broadcast_to(i, o.shape)[m] for i in ix)] = o[m]
            return
        rec.bounds(self._name, addr, nbytes, mask)
        o = rec.store_origin(addr.shape, nbytes)
        if self._paged:
            self.inner.set_origins(addr, nbytes, mask, o)
        elif self.shadow is not None:
            ix = self._index(addr, nbytes, mask)
            val = np.broadcast_to(o, addr.shape + (nbytes,)) if not isinstance(o, int) else o
            if mask is None:
                self.shadow[ix] = val
            else:
                m = np.broadcast_to(mask[..., None], addr.shape + (nbytes,))
                sel = tuple(np.broadcast_to(i, m.shape)[m] for i in ix)
                self.shadow[sel] = val[m] if not isinstance(val, int) else val
        elif self._name == "global":
            if not isinstance(o, int) or o:
                rec.uninit_store(addr, nbytes, mask, o)
            if rec.inflight_sites:
                rec.check_source_write(addr, nbytes, mask)
        if self._name in rec.logs:
            rec.log(self._name, addr, nbytes, mask, True)


class Recorder:
    """The checks of one run (see the module docstring); ``findings`` after the run."""

    def __init__(self, kernel: str, launch, enabled: bool) -> None:
        self.kernel, self.launch, self.enabled = kernel, launch, enabled
        self.findings: list[Finding] = []
        self.actor = 0
        self.row_base = 0  # the running context's first CTA row in the batch (clusters run apart)
        self.sites: list = []  # site id -> Instr
        self._site_ids: dict = {}
        self.logs: dict[str, list] = {"shared": [], "global": []}
        self.cross: list[np.ndarray] = []
        self.batch: list = []
        self.start = 0
        self._seen: set = set()
        self._seen_of: dict = {}  # index of a barrier-divergence finding -> its _seen key
        self._agg: dict = {}  # (kind, key...) -> index of the aggregated finding
        self.seq = 0
        self.wsync: dict = {}
        self.cur_site = 0
        self.cur_k = 1
        self.cur_load = None
        self.cur_store = 0
        self.cur_tag = 0
        self.cur_async = False
        self.cur_atomic = False
        self.async_src: list = []
        self.pending: dict = {}  # actor -> {"open": [...], "groups": [[...], ...]}
        self.inflight_sites = 0  # copies in flight
        self._src_bytes = None
        self.vars: list = [None]  # tag -> (space, lo, hi, name)
        self.sh_shadow = None  # origin per shared byte of the batch's CTAs, (rows, bytes)
        self.sh_inflight = None  # cp.async in flight per shared byte (site + 1), (rows, bytes)
        self.tags: dict = {}
        self.blk = None  # the batch's Block (bulk/tensor copies in flight, DSMEM)
        self.dsmem_atomics: list = []  # (rows, offsets, nbytes, actor, site) of remote atomics

    # -- instrumentation ---------------------------------------------------------------------
    def wrap(self, space, name: str):
        return _Recording(space, self, name) if self.enabled else space

    def site(self, ins) -> int:
        k = self._site_ids.get(id(ins))
        if k is None:
            k = self._site_ids[id(ins)] = len(self.sites)
            self.sites.append(ins)
        return k

    def attach(self, prog) -> None:
        """Wrap the instructions of ``prog`` (a launch's _Prog with a fresh program)."""
        P = prog.program
        self.program = P
        body = P.body
        for name, (space, addr) in P.symbols.items():
            size = None
            d = body.vars.get(name)
            if d is not None and space == "shared":
                size = d.nbytes
            elif space in ("const", "global"):
                v = self.launch.module.parsed.variables.get(name)
                size = v.nbytes if v is not None else None
            if space == "shared" and d is None:  # .extern .shared: the dynamic region
                size = max(0, prog.shared_bytes - addr)
            if size:
                self.tags[name] = len(self.vars)
                self.vars.append((space, addr, addr + size, name))
        self._vlo = np.array([0] + [v[1] for v in self.vars[1:]], np.int64)
        self._vhi = np.array([1 << 62] + [v[2] for v in self.vars[1:]], np.int64)
        self._vsp = np.array([""] + [v[0] for v in self.vars[1:]])
        from warpsim.ptx.usage import used_registers
        self._regs = set(used_registers(body))  # declared and named by an instruction
        for ins in P.instrs:
            if ins.kind in (0, 3):
                ins.exec = self._wrap(ins)

    def _wrap(self, ins):
        from warpsim.ptx.parser import Addr, Imm

        inner = ins.exec
        site = self.site(ins)
        val = site + 1
        key, opc = ins.key, ins.opcode
        ops = ins.operands or ()
        nd = min(ins.spec.ndst, 1)  # setp's two destinations are one p|q operand
        if nd == 0 and ops and not isinstance(ops[0], (Addr, Imm)) and not opc.startswith(("bar.", "barrier.")) \
                and ins.kind != 1 and not opc.startswith(("st.", "red.", "stmatrix")):
            nd = 1  # families that declare no destination but write their first operand (mbarrier.try_wait p, ...)
        regs = self._regs
        dst = [n for op in ops[:nd] for n in _flat(op) if n in regs]
        srcs = [n for op in ops[nd:] if not isinstance(op, Addr) for n in _flat(op)]
        data = [n for n in srcs if n in regs]
        src_tags = [self.tags[n] for n in srcs if n in self.tags]
        bases = [op.base for op in ops if isinstance(op, Addr) and op.base is not None]
        abase = [b for b in bases if b in regs]
        atag = max([self.tags[b] for b in bases if b in self.tags], default=0)
        cross = opc.startswith(_CROSS)
        shfl = _shfl_lanes(ins, ops) if key == "shfl.sync" else None
        wsync = opc.startswith(_WSYNC) or ".sync." in opc + "."  # every lane waits for the others
        prov = key in _PROV and not any(isinstance(op, Addr) for op in ops)
        is_async, is_atomic = key == "cp.async", key in ("atom", "red")
        commit = key == "cp.async.commit_group"
        waitn = None
        if key == "cp.async.wait_group":
            waitn = int(ops[0].value)
        elif key == "cp.async.wait_all":
            waitn = 0

        def run(ctx, mask):
            d = ctx.__dict__
            sh = d.get("shadow")
            if sh is None:
                sh = d["shadow"] = {}
                d["prov"] = {}
                self._hook_context(ctx)
            pv = d["prov"]
            self.seq += 1
            self.cur_k = ctx.shape[0]
            self.cur_site = site
            self.cur_load = None
            items = [_o(sh, n, val) for n in data]
            self.cur_store = items
            aor = 0
            for b in abase:
                aor = _mx(aor, _o(sh, b, val))
            if _any_set(aor, mask):
                self.uninit_use(site, aor, mask, "the address of this access")
            tag = atag
            for b in abase:
                tag = _mx(tag, pv.get(b, 0))
            self.cur_tag = tag
            self.cur_async, self.cur_atomic = is_async, is_atomic
            if is_async:
                self.async_src = []
            moved = None
            if shfl is not None and dst:  # each lane's result comes from one source lane
                j = shfl[1](ctx)
                a_o = np.broadcast_to(np.asarray(_o(sh, shfl[0], val), np.int32), ctx.shape)
                moved = _mx(np.take_along_axis(a_o, j, axis=-1), aor)
                for n in data:
                    if n != shfl[0]:
                        moved = _mx(moved, items[data.index(n)])
            try:
                inner(ctx, mask)
            finally:
                self.cur_async = self.cur_atomic = False
            if dst and moved is not None:
                for n in dst:
                    _put(sh, n, moved, mask)
                for n in dst:
                    pv.pop(n, None)
            elif dst:
                acc = aor
                for x in items:
                    acc = _mx(acc, x)
                ld = self.cur_load
                if ld is not None and (cross or ld.shape[-2] != 32):
                    acc = _mx(acc, ld.max(axis=(-2, -1)).reshape(-1, 1).astype(np.int32))
                    ld = None
                if cross and not isinstance(acc, int):
                    m = acc if mask is None else np.where(mask, acc, 0)
                    acc = np.broadcast_to(m.max(axis=-1, keepdims=True), m.shape)
                if ld is not None and len(dst) and ld.shape[-1] % len(dst) == 0:
                    w = ld.shape[-1] // len(dst)
                    for k, n in enumerate(dst):
                        _put(sh, n, _mx(acc, ld[..., k * w:(k + 1) * w].max(-1)), mask)
                else:
                    if ld is not None:
                        acc = _mx(acc, ld.max(-1))
                    for n in dst:
                        _put(sh, n, acc, mask)
                if prov:
                    t = 0
                    for n in srcs:
                        t = _mx(t, self.tags[n]) if n in self.tags else _mx(t, pv.get(n, 0))
                    for n in dst:
                        if isinstance(t, int) and t == 0 and n not in pv:
                            continue
                        _put(pv, n, t, mask, 0)
                else:
                    for n in dst:
                        pv.pop(n, None)
            if wsync:
                self.wsync[self.actor] = self.wsync.get(self.actor, 0) + 1
            if commit:
                self.commit()
            elif waitn is not None:
                if key == "cp.async.wait_all":
                    self.commit()
                self.wait(waitn)
        return run

    def store_origin(self, shape, nbytes):
        """Origin of each stored byte (an int, or an array broadcastable to shape + (nbytes,))."""
        items = list(self.cur_store)
        if self.cur_atomic and self.cur_load is not None and self.cur_load.shape[:-1] == tuple(shape):
            items.append(self.cur_load.max(-1))
        if not items:
            return 0
        if all(isinstance(x, int) for x in items):
            return max(items)
        arrs = [np.broadcast_to(np.asarray(x, np.int32), (self.cur_k, 32)) for x in items]
        if tuple(shape) != arrs[0].shape:  # row-address stores (stmatrix): whole warp
            m = np.max([a.max(-1) for a in arrs], axis=0)
            return m.reshape(-1, 1, 1)
        if nbytes % len(arrs) == 0:
            w = nbytes // len(arrs)
            return np.repeat(np.stack(arrs, -1), w, axis=-1)
        return np.max(arrs, axis=0)[..., None]

    def on_instruction(self, ctx, state, ins, pc) -> bool:
        """Machine hook: a guard predicate (branch or predicated instruction) must not depend
        on uninitialised state."""
        if ins.guard is not None:
            sh = ctx.__dict__.get("shadow")
            if sh is not None:
                self.cur_k = ctx.shape[0]
                site = self.site(ins)
                o = _o(sh, ins.guard[0], site + 1)
                mask = state.stack[-1].mask if state.stack else None
                if _any_set(o, mask):
                    self.uninit_use(site, o, mask, f"the predicate {ins.guard[0]} deciding it")
        return False

    # -- findings helpers ---------------------------------------------------------------------
    def _add(self, key, make, lanes, nbytes=0) -> None:
        """Aggregate into one finding per ``key`` (lanes and bytes merged)."""
        i = self._agg.get(key)
        if i is None:
            if len(self.findings) >= _MAX_FINDINGS:
                return
            self._agg[key] = len(self.findings)
            self.findings.append(make())
            i = self._agg[key]
        f = self.findings[i]
        import dataclasses
        new_lanes = tuple(sorted(set(f.lanes or ()) | set(lanes))) if lanes is not None else f.lanes
        self.findings[i] = dataclasses.replace(f, lanes=new_lanes, nbytes=(f.nbytes or 0) + nbytes)

    def _actor(self, a: int) -> str:
        """``warp 3``, or for an access from another CTA of the cluster ``CTA (1, 0, 0) warp 3``."""
        if a < _REMOTE:
            return f"warp {a}"
        return f"CTA {tuple(int(x) for x in self.batch[a // _REMOTE - 1])} warp {a % _REMOTE}"

    def _row_cta(self, b) -> tuple:
        return tuple(int(x) for x in self.batch[int(b) + self.row_base])

    def _where(self, site) -> str:
        ins = self.sites[site]
        return f"line {ins.line}: {ins.text}"

    def uninit_use(self, site, o, mask, what: str) -> None:
        o = np.broadcast_to(o, (self.cur_k, 32)) if isinstance(o, int) else np.broadcast_to(o, (self.cur_k, 32))
        bad = o != 0 if mask is None else (o != 0) & mask
        for b in np.flatnonzero(bad.any(axis=-1)):
            lanes = tuple(int(x) for x in np.flatnonzero(bad[b]))
            origin = int(o[b][bad[b]].max()) - 1
            cta = self._row_cta(b)
            ins, first = self.sites[site], self.sites[origin]
            self._add(("uninit-use", site, origin, cta, self.actor),
                      lambda: Finding("uninitialised", self.kernel, first.text, first.line, cta,
                                      self.actor, lanes, None,
                                      f"{what} ({self._where(site)}) depends on uninitialised state "
                                      f"first read by {self._where(origin)}"), lanes)

    def uninit_store(self, addr, nbytes, mask, o) -> None:
        o = np.broadcast_to(o, addr.shape + (nbytes,)) if isinstance(o, int) else o
        lane_o = o.max(-1)
        bad = lane_o != 0 if mask is None else (lane_o != 0) & mask
        site = self.cur_site
        for b in np.flatnonzero(bad.any(axis=-1)):
            lanes = np.flatnonzero(bad[b])
            origin = int(lane_o[b][lanes].max()) - 1
            cta = self._row_cta(b)
            first = self.sites[origin]
            a0 = int(addr[b, lanes[0]])
            nb = int((o[b][lanes] != 0).sum())
            arg = self._argument(a0)
            tid = tid_of(self.launch, self.actor, int(lanes[0]))
            self._add(("uninit-store", site, origin, cta, self.actor),
                      lambda: Finding("uninitialised", self.kernel, first.text, first.line, cta,
                                      self.actor, tuple(int(x) for x in lanes), a0,
                                      f"stored to global memory{arg} by {self._where(site)} "
                                      f"(thread tid={tid}): the value depends on uninitialised "
                                      f"state first read by {self._where(origin)}"),
                      tuple(int(x) for x in lanes), nb)

    def _argument(self, addr: int) -> str:
        for i, base in getattr(self.launch, "buffer_addresses", {}).items():
            a = self.launch.args[i]
            a = getattr(a, "tensor", a)  # a TensorMap: the array it describes
            if a is not None and base <= addr < base + a.nbytes:
                return f" (output argument {i}, element byte {addr - base})"
        return ""

    def bounds(self, space, addr, nbytes, mask) -> None:
        """An access through an address computed from a static variable must stay inside it."""
        tag = self.cur_tag
        if isinstance(tag, int) and tag == 0:
            return
        if not isinstance(tag, int) and np.shape(tag) != addr.shape:
            return  # not one address per lane (bulk copies): no per-lane provenance
        t = np.broadcast_to(np.asarray(tag), addr.shape)
        a = addr.astype(np.int64)
        bad = (t > 0) & (self._vsp[t] == space) & ((a < self._vlo[t]) | (a + nbytes > self._vhi[t]))
        if mask is not None:
            bad &= mask
        if not bad.any():
            return
        site = self.cur_site
        for b in np.flatnonzero(bad.any(axis=-1)):
            lanes = np.flatnonzero(bad[b])
            l0 = int(lanes[0])
            sp, lo, hi, name = self.vars[int(t[b, l0])]
            cta = self._row_cta(b)
            ins = self.sites[site]
            off = int(a[b, l0])
            self._add(("bounds", site, cta, self.actor),
                      lambda: Finding("out-of-bounds", self.kernel, ins.text, ins.line, cta, self.actor,
                                      (l0,), off,
                                      f"lane {l0} (thread tid={tid_of(self.launch, self.actor, l0)}) "
                                      f"accesses {nbytes} bytes at {sp} address {off:#x}, outside the "
                                      f"variable {name} its address is computed from ({sp} "
                                      f"{lo:#x}-{hi:#x}){' (an overrun into the next variable)' if off >= hi else ''}"),
                      tuple(int(x) for x in lanes), nbytes * len(lanes))

    # -- cp.async -----------------------------------------------------------------------------
    def hold(self, space, addr, data, mask, where) -> None:
        ent = (space, addr.copy(), data.copy(), None if mask is None else mask.copy(), where,
               self.cur_site, self.actor, list(self.async_src), self.seq, self.row_base)
        p = self.pending.setdefault((self.actor, self.row_base), {"open": [], "groups": []})
        p["open"].append(ent)
        ix = space._index(addr, data.shape[-1], mask)
        if mask is None:
            space.inflight[ix] = self.cur_site + 1
        else:
            m = np.broadcast_to(mask[..., None], addr.shape + (data.shape[-1],))
            space.inflight[tuple(np.broadcast_to(i, m.shape)[m] for i in ix)] = self.cur_site + 1
        self.inflight_sites += 1
        self._src_bytes = None

    def commit(self) -> None:
        p = self.pending.get((self.actor, self.row_base))
        if p and p["open"]:
            p["groups"].append(p["open"])
            p["open"] = []

    def wait(self, n: int) -> None:
        p = self.pending.get((self.actor, self.row_base))
        if not p:
            return
        groups = p["groups"]
        done, p["groups"] = (groups[:len(groups) - n], groups[len(groups) - n:]) if n else (groups, [])
        for g in done:
            for ent in g:
                self._land(ent)

    def _land(self, ent) -> None:
        space, addr, data, mask, where, site, actor, _, seq, row = ent
        old = self.cur_site, self.seq, self.actor, self.row_base
        self.row_base = row
        space.inner.store(addr, data, mask, where)
        nbytes = data.shape[-1]
        ix = space._index(addr, nbytes, mask)
        if mask is None:
            space.shadow[ix] = 0
            space.inflight[ix] = 0
        else:
            m = np.broadcast_to(mask[..., None], addr.shape + (nbytes,))
            sel = tuple(np.broadcast_to(i, m.shape)[m] for i in ix)
            space.shadow[sel] = 0
            space.inflight[sel] = 0
        self.inflight_sites -= 1
        self._src_bytes = None
        if self.blk is not None:  # not a generic-proxy write for the fence.proxy.async check (see _land_fenced)
            _land_fenced(self.blk, row, ix, mask, addr.shape + (nbytes,))
        self.cur_site, self.seq, self.actor = site, seq, actor
        self.log("shared", addr, nbytes, mask, True)
        self.cur_site, self.seq, self.actor, self.row_base = old

    def land_all(self) -> None:
        for actor, p in self.pending.items():
            for g in p["groups"] + [p["open"]]:
                for ent in g:
                    self._land(ent)
        self.pending = {}

    def check_inflight(self, space, ix, mask) -> None:
        hit = space.inflight[ix].max(-1)
        bad = hit > 0 if mask is None else (hit > 0) & mask
        if not bad.any():
            return
        site = self.cur_site
        ins = self.sites[site]
        for b in np.flatnonzero(bad.any(axis=-1)):
            lanes = np.flatnonzero(bad[b])
            issuer = self.sites[int(hit[b][lanes].max()) - 1]
            cta = self._row_cta(b)
            self._add(("async-read", site, cta, self.actor),
                      lambda: Finding("async-copy", self.kernel, ins.text, ins.line, cta, self.actor,
                                      tuple(int(x) for x in lanes), None,
                                      f"reads shared memory that a cp.async still in flight writes "
                                      f"({self._where(self.site(issuer))}); wait for it with "
                                      f"cp.async.wait_group/wait_all (and a barrier) first: the read "
                                      f"sees the old bytes"), tuple(int(x) for x in lanes))

    def check_source_write(self, addr, nbytes, mask) -> None:
        if self._src_bytes is None:
            parts = []
            for p in self.pending.values():
                for g in p["groups"] + [p["open"]]:
                    for ent in g:
                        for a, n, m in ent[7]:
                            sel = a if m is None else a[m]
                            parts.append((sel.reshape(-1, 1) + np.arange(n, dtype=np.uint64)).reshape(-1))
            self._src_bytes = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
        if not self._src_bytes.size:
            return
        by = addr[..., None] + np.arange(nbytes, dtype=np.uint64)
        hit = np.isin(by, self._src_bytes).any(-1)
        if mask is not None:
            hit &= mask
        if not hit.any():
            return
        site = self.cur_site
        ins = self.sites[site]
        for b in np.flatnonzero(hit.any(axis=-1)):
            lanes = tuple(int(x) for x in np.flatnonzero(hit[b]))
            cta = self._row_cta(b)
            self._add(("async-src", site, cta, self.actor),
                      lambda: Finding("async-copy", self.kernel, ins.text, ins.line, cta, self.actor, lanes,
                                      int(addr[b, lanes[0]]),
                                      "writes global memory that a cp.async still in flight reads"), lanes)

    # -- races ----------------------------------------------------------------------------------
    def log(self, name, addr, nbytes, mask, write) -> None:
        if self.cur_atomic:
            return  # atomics do not race
        shape = addr.shape  # (batch, lanes); ldmatrix passes only its row-address lanes
        act = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
        n = shape[-1] if len(shape) else 1
        b, lane = np.nonzero(act.reshape(-1, n))
        a = addr.reshape(-1, n)[b, lane]
        if n != 32:  # not one address per lane (ldmatrix rows, bulk copies): kept as -(row + 1),
            lane = -lane - 1  # out of the intra-warp check
        b = b + self.row_base  # the context's first CTA row (CTAs of a cluster run separately)
        self.logs[name].append((b.astype(np.int64), lane.astype(np.int64), a.astype(np.uint64),
                                int(nbytes), self.actor, bool(write), self.cur_site, self.seq,
                                self.wsync.get(self.actor, 0)))

    def begin_batch(self, start: int, batch) -> None:
        self.start, self.batch = start, batch
        self.sh_shadow = self.sh_inflight = None
        self.blk = None

    # -- bulk/tensor copies in flight (warpsim.ptx.cluster.Block) ---------------------------
    def _issued(self, row, offs) -> None:
        """A bulk/tensor load was issued into (row, offs): its bytes count as initialised."""
        if self.sh_shadow is not None:
            self.sh_shadow[row, offs] = 0

    def bulk_hazard(self, message: str, row: int, address: int) -> None:
        """The Block's report hook: an ``async-copy`` finding at the running instruction."""
        site = self.cur_site
        ins = self.sites[site]
        cta = tuple(int(x) for x in self.batch[row]) if 0 <= row < len(self.batch) else self._row_cta(0)
        self._add(("async-bulk", site, cta, self.actor),
                  lambda: Finding("async-copy", self.kernel, ins.text, ins.line, cta, self.actor, None,
                                  address, message), None)

    def bulk_access(self, space, addr, nbytes, mask, write) -> None:
        """An ordinary access (through the recording ``space``) while bulk/tensor copies are in
        flight."""
        blk, name = self.blk, space._name
        where = self._where(self.cur_site)
        if name == "global":
            a = np.asarray(addr, np.uint64)
            m = np.ones(a.shape, bool) if mask is None else np.broadcast_to(mask, a.shape)
            for row in list(blk._globals()):
                b = row - self.row_base
                if not 0 <= b < a.shape[0]:
                    continue
                sel = a[b][m[b]]
                if sel.size:
                    blk._global_overlap((sel[:, None] + np.arange(nbytes, dtype=np.uint64)).reshape(-1), write,
                                        where, row)
            return
        if blk.pend is None or name not in ("shared", "shared::cluster"):
            return
        a = np.asarray(addr)
        m = np.ones(a.shape, bool) if mask is None else np.broadcast_to(mask, a.shape)
        if name == "shared":
            rows = np.broadcast_to((self.row_base + np.arange(a.shape[0])).reshape((-1,) + (1,) * (a.ndim - 1)),
                                   a.shape)
            offs = a.astype(np.int64)
        else:
            rows, offs = space.inner.blk.resolve(space.inner.ctx, a.astype(np.uint64), where, cluster=True, mask=m)
        r, o = rows[m], offs[m]
        if not r.size:
            return
        o = np.clip(o[:, None] + np.arange(nbytes), 0, blk.data.shape[1] - 1)
        r = np.broadcast_to(r[:, None], o.shape)
        blk.check_generic(r, o, write, where)
        if name == "shared":  # (another CTA's bytes: the DSMEM race check orders those)
            blk.check_seen(r, o, self.actor, write, where)

    def dsmem_log(self, space, addr, nbytes, mask, write) -> None:
        """Log a shared::cluster access for the race check, at the CTA that owns the bytes; an
        access to another CTA's memory counts as its own actor (its CTA and warp), so that it
        races with the owner's warps unless a cluster barrier (or mbarrier) orders them.
        Atomics go to their own log: they race with plain accesses, not with atomics."""
        atomic = self.cur_atomic
        inner = space.inner
        a = np.asarray(addr, np.uint64)
        m = np.ones(a.shape, bool) if mask is None else np.broadcast_to(mask, a.shape)
        rows, offs = inner.blk.resolve(inner.ctx, a, "", cluster=True, mask=m)
        own = np.broadcast_to(inner.blk.rows(inner.ctx).reshape((-1,) + (1,) * (a.ndim - 1)), a.shape)
        b, lane = np.nonzero(m.reshape(-1, a.shape[-1]))
        rows, offs, own = (x.reshape(-1, a.shape[-1])[b, lane] for x in (rows, offs, own))
        actor = np.where(rows == own, self.actor, _REMOTE * (own + 1) + self.actor)
        if a.shape[-1] != 32:
            lane = -lane - 1
        for act in np.unique(actor):
            k = actor == act
            if atomic:
                if act >= _REMOTE:
                    self.dsmem_atomics.append((rows[k].astype(np.int64), offs[k].astype(np.int64), int(nbytes),
                                               int(act), self.cur_site))
                continue
            self.logs["shared"].append((rows[k].astype(np.int64), lane[k].astype(np.int64),
                                        offs[k].astype(np.uint64), int(nbytes), int(act), bool(write),
                                        self.cur_site, self.seq, self.wsync.get(self.actor, 0)))

    def shared_rows(self, shape):
        """(shadow, in-flight) views of the running context's rows (``shape``: its shared
        memory's), the per-batch arrays made on first use."""
        size = shape[-1]
        if self.sh_shadow is None or self.sh_shadow.shape[-1] != size:
            self.sh_shadow = np.full((max(len(self.batch), shape[0]), size), -1, np.int32)
            self.sh_inflight = np.zeros(self.sh_shadow.shape, np.int32)
        r0 = self.row_base if shape[0] < self.sh_shadow.shape[0] else 0
        return self.sh_shadow[r0:r0 + shape[0]], self.sh_inflight[r0:r0 + shape[0]]

    def _hook_context(self, ctx) -> None:
        """First instruction of a context: async-proxy writes (TMA/bulk copies into this
        batch's shared memory) initialise bytes; other CTAs' shared memory is recorded too."""
        blk = getattr(ctx, "block", None)
        if blk is not None and not getattr(blk, "_checks_hooked", False):
            orig = blk.async_wrote

            def async_wrote(rows, offs, orig=orig):
                orig(rows, offs)
                if self.sh_shadow is not None:
                    self.sh_shadow[rows, offs] = 0
            blk.async_wrote = async_wrote
            blk.async_issued = self._issued
            blk._checks_hooked = True
            blk.defer = True  # bulk/tensor loads land when a wait observes them
            write = blk.mbar._write

            def mbar_write(bi, wi, words, write=write):  # an mbarrier's word is initialised state
                write(bi, wi, words)
                if self.sh_shadow is not None:
                    self.sh_shadow[np.asarray(bi)[:, None], (np.asarray(wi) * 8)[:, None] + np.arange(8)] = 0
            blk.mbar._write = mbar_write
            blk.report = self.bulk_hazard
            self.blk = blk
            self.shared_rows(blk.data.shape)
        if blk is not None and getattr(blk, "size", 1) > 1 and "shared::cluster" not in ctx.spaces:
            from warpsim.ptx.cluster import ClusterShared
            ctx.spaces["shared::cluster"] = _Recording(ClusterShared(blk, ctx), self, "shared::cluster")

    def _rows(self, entries):
        cols = [[] for _ in range(8)]
        for b, lane, a, n, actor, write, site, seq, ep in entries:
            k = np.arange(n, dtype=np.uint64)
            m = b.size * n
            cols[0].append(np.repeat(b, n))
            cols[1].append((a[:, None] + k).reshape(-1))
            cols[2].append(np.full(m, actor, np.int64))
            cols[3].append(np.full(m, write))
            cols[4].append(np.full(m, site, np.int64))
            cols[5].append(np.repeat(lane, n))
            cols[6].append(np.full(m, seq, np.int64))
            cols[7].append(np.full(m, ep, np.int64))
        return [np.concatenate(c) for c in cols]

    def barrier(self, bid=None, arrived=None, warps=None) -> None:
        """End of a barrier interval: check conflicts, clear the interval's log (and, given
        the arrivals, check that the warps completed the barrier from one place)."""
        if not self.enabled:
            return
        if self.blk is not None:  # landed copies: a wait's own interval end keeps them per warp
            if self.blk.observed and arrived is None:
                self.blk.observed = False
            else:
                self.blk.order()
        if arrived is not None:
            self._barrier_divergence(bid, arrived, warps)
        for name in ("shared", "global"):
            entries = self.logs[name]
            if not entries:
                continue
            b, byte, actor, write, site, lane, seq, ep = self._rows(entries)
            if name == "shared" and self.dsmem_atomics:
                self._atomic_conflicts(b, byte, actor, write, site, lane)
            self._conflicts(name, b, byte, actor, write, site, lane)
            self._intra_warp(name, b, byte, actor, write, site, lane, seq, ep)
            if name == "global":
                cta = b + self.start
                first = _first_of_each(byte, cta, write)
                self.cross.append(np.stack([byte[first], cta[first].astype(np.uint64),
                                            write[first].astype(np.uint64),
                                            site[first].astype(np.uint64)], 1))
            self.logs[name] = []
        self.dsmem_atomics = []

    def _atomic_conflicts(self, b, byte, actor, write, site, lane) -> None:
        """Remote (DSMEM) atomics against the interval's plain shared accesses of other actors."""
        for rows, offs, n, act, asite in self.dsmem_atomics:
            keys = (rows[:, None] << 32) + (offs[:, None] + np.arange(n))
            plain = (b.astype(np.int64) << 32) + byte.astype(np.int64)
            hit = np.isin(plain, keys.reshape(-1)) & (actor != act)
            if not hit.any():
                continue
            j = int(np.flatnonzero(hit)[0])
            cta = tuple(int(x) for x in self.batch[int(b[j])])
            key = ("race", "shared", asite, int(site[j]), cta)
            ins = self.sites[asite]
            msg = (f"shared-memory race between barriers: {self._actor(act)} atomically updates "
                   f"({self._where(asite)}) and {self._actor(int(actor[j]))} lane {_ln(lane[j])} "
                   f"{'writes' if write[j] else 'reads'} ({self._where(int(site[j]))}) byte {int(byte[j]):#x} "
                   "(distributed shared memory: order the CTAs' accesses with barrier.cluster arrive/wait or "
                   "an mbarrier)")
            w0, a0 = act % _REMOTE, int(byte[j])
            self._add(key, lambda: Finding("race", self.kernel, ins.text, ins.line, cta, w0, None, a0, msg), None, 1)

    def _barrier_divergence(self, key, arrived, warps) -> None:
        if any(c is not None for _, c, _ in arrived):
            return  # named barriers with a thread count: producer/consumer patterns
        group, bid = key if isinstance(key, tuple) else (None, key)

        def wid(i):  # the warp's index in its CTA (scheduler entries: [ctx, state, status, ..., warp])
            return warps[i][6] if len(warps[i]) > 6 else i

        def same(e):
            return group is None or len(e) <= 4 or e[4] == group
        at = sorted({wid(i) for i, _, _ in arrived})
        exited = [wid(i) for i, e in enumerate(warps) if e[2] == "exited" and same(e)]
        places = sorted({(ins.line, ins.text) for _, _, ins in arrived})
        rows = warps[arrived[0][0]][7] if len(warps[arrived[0][0]]) > 7 else self.batch
        if not exited and len(places) == 1:
            return
        ins = arrived[0][2]
        key = ("barrier", bid, tuple(places), tuple(exited))
        if key in self._seen:
            return
        self._seen.add(key)
        by_place = "; ".join(f"warps {sorted({wid(w) for w, _, i in arrived if (i.line, i.text) == p})} at "
                             f"line {p[0]}: {p[1]}" for p in places)
        msg = (f"barrier {bid} completed by warps at different places: {by_place}"
               + (f"; warps {exited} exited without reaching it" if exited else "")
               + " (every thread of the CTA must reach the same barrier)")
        for c in rows:
            self._seen_of[len(self.findings)] = key
            self.findings.append(Finding("barrier-divergence", self.kernel, ins.text, ins.line,
                                         tuple(int(x) for x in c), at[0], None, None, msg))

    def _conflicts(self, name, b, byte, actor, write, site, lane) -> None:
        order = _order(b, byte, actor)
        b, byte, actor, write, site, lane = (x[order] for x in (b, byte, actor, write, site, lane))
        new = np.r_[True, (b[1:] != b[:-1]) | (byte[1:] != byte[:-1])]
        for lo, wr, other in _races(new, actor, write):
            cta = tuple(int(x) for x in self.batch[int(b[lo])])
            key = ("race", name, int(site[wr]), int(site[other]), cta)
            if key not in self._agg:
                kind2 = "write" if write[other] else "read"
                ins = self.sites[int(site[wr])]
                msg = (f"{name}-memory race between barriers: {self._actor(int(actor[wr]))} lane {_ln(lane[wr])} "
                       f"writes ({self._where(int(site[wr]))}) and {self._actor(int(actor[other]))} lane "
                       f"{_ln(lane[other])} {kind2}s ({self._where(int(site[other]))}) byte {int(byte[lo]):#x}")
                if int(actor[wr]) >= _REMOTE or int(actor[other]) >= _REMOTE:
                    msg += (" (distributed shared memory: order the CTAs' accesses with barrier.cluster "
                            "arrive/wait or an mbarrier)")
                w0, l0, a0 = int(actor[wr]) % _REMOTE, _ln(lane[wr]), int(byte[lo])
                self._add(key, lambda: Finding("race", self.kernel, ins.text, ins.line, cta, w0, (l0,),
                                               a0, msg), (_ln(lane[wr]),), 1)
            else:
                self._add(key, None, (_ln(lane[wr]),), 1)

    def _intra_warp(self, name, b, byte, actor, write, site, lane, seq, ep) -> None:
        """Two lanes of one warp, same bytes, different instructions, no warp sync between."""
        per_lane = lane >= 0
        if not (write & per_lane).any():
            return
        b, byte, actor, write, site, lane, seq, ep = (x[per_lane] for x in (b, byte, actor, write, site, lane, seq, ep))
        order = np.lexsort((lane, ep, actor, byte, b))
        b, byte, actor, write, site, lane, seq, ep = (x[order] for x in (b, byte, actor, write, site, lane, seq, ep))
        brk = np.r_[True, (b[1:] != b[:-1]) | (byte[1:] != byte[:-1]) | (actor[1:] != actor[:-1])
                    | (ep[1:] != ep[:-1])]
        starts = np.flatnonzero(brk)
        ends = np.r_[starts[1:], len(b)]
        writes = np.r_[0, np.cumsum(write, dtype=np.int64)]
        cand = np.flatnonzero((lane[starts] != lane[ends - 1]) & (writes[ends] > writes[starts]))
        for g in cand:
            rows = range(starts[g], ends[g])
            hit = None
            for wr in rows:
                if not write[wr]:
                    continue
                for o in rows:
                    if lane[o] != lane[wr] and seq[o] != seq[wr]:
                        hit = (wr, o)
                        break
                if hit:
                    break
            if hit is None:
                continue
            wr, o = hit
            cta = tuple(int(x) for x in self.batch[int(b[wr])])
            key = ("warp-race", name, int(site[wr]), int(site[o]), cta, int(actor[wr]))
            kind2 = "write" if write[o] else "read"
            ins = self.sites[int(site[wr])]
            w0, l0, l1, a0 = int(actor[wr]) % _REMOTE, int(lane[wr]), int(lane[o]), int(byte[wr])
            msg = (f"{name}-memory race within warp {w0}: lane {l0} writes ({self._where(int(site[wr]))}) "
                   f"and lane {l1} {kind2}s ({self._where(int(site[o]))}) byte {a0:#x} with no "
                   f"__syncwarp (bar.warp.sync) between them: lanes of a warp are not ordered")
            self._add(key, lambda: Finding("race", self.kernel, ins.text, ins.line, cta, w0, (l0,), a0, msg),
                      (l0,), 1)

    def end_batch(self) -> None:
        self.land_all()
        self.barrier()

    def finish(self) -> None:
        """Cross-CTA conflicts on global memory over the whole launch."""
        if not self.enabled or not self.cross:
            return
        rows = np.concatenate(self.cross)
        rows = rows[_order(np.zeros(len(rows), np.uint64), rows[:, 0], rows[:, 1])]
        byte, cta, write, site = rows.T
        new = np.r_[True, byte[1:] != byte[:-1]]
        for lo, wr, other in _races(new, cta, write.astype(bool)):
            c1, c2 = (self._cta(int(cta[wr])), self._cta(int(cta[other])))
            key = ("cta-race", int(site[wr]), int(site[other]))
            if key not in self._agg:
                ins = self.sites[int(site[wr])]
                msg = (f"global-memory race between CTAs: CTA {c1} writes ({self._where(int(site[wr]))}) "
                       f"and CTA {c2} {'writes' if write[other] else 'reads'} "
                       f"({self._where(int(site[other]))}) byte {int(byte[lo]):#x}; CTAs are not ordered")
                a0 = int(byte[lo])
                self._add(key, lambda: Finding("race", self.kernel, ins.text, ins.line, c1, None, None,
                                               a0, msg), None, 1)
            else:
                self._add(key, None, None, 1)

    # -- a launch spread over processes (warpsim.kernel.executor) -----------------------------
    def part(self) -> dict:
        """What this run of a part of the grid found, for :meth:`merge` in the parent: its
        findings with their aggregation keys, its cross-CTA global access log, and its site
        ids as positions in the program's instructions."""
        pos = {id(ins): i for i, ins in enumerate(self.program.instrs)}
        return {"findings": list(self.findings), "keys": {i: k for k, i in self._agg.items()},
                "seen": dict(self._seen_of), "sites": [pos[id(s)] for s in self.sites],
                "cross": np.concatenate(self.cross) if self.cross else np.zeros((0, 4), np.uint64)}

    def merge(self, part: dict) -> None:
        """Add a part's findings (parts in CTA order) as one run would have aggregated them:
        same keys, lanes and bytes merged; its cross-CTA log joins this launch's (site ids
        mapped onto this recorder's), for :meth:`finish`."""
        import dataclasses

        mine = {id(s): k for k, s in enumerate(self.sites)}
        m = np.array([mine.get(id(self.program.instrs[i]), None) for i in part["sites"]] or [0])
        if any(x is None for x in m.tolist()):
            m = np.array([self.site(self.program.instrs[i]) for i in part["sites"]] or [0])
        m = m.astype(np.int64)
        seen_before = set(self._seen)
        for i, f in enumerate(part["findings"]):
            key = part["keys"].get(i)
            if key is None:  # barrier divergence: reported for the first batch that shows it
                sk = part["seen"].get(i)
                if sk in seen_before:
                    continue
                self._seen.add(sk)
                self._seen_of[len(self.findings)] = sk
                self.findings.append(f)
                continue
            key = _remap_key(key, m)
            j = self._agg.get(key)
            if j is None:
                if len(self.findings) >= _MAX_FINDINGS:
                    continue
                self._agg[key] = len(self.findings)
                self.findings.append(f)
                continue
            g = self.findings[j]
            lanes = tuple(sorted(set(g.lanes or ()) | set(f.lanes))) if f.lanes is not None else g.lanes
            self.findings[j] = dataclasses.replace(g, lanes=lanes, nbytes=(g.nbytes or 0) + (f.nbytes or 0))
        cross = part["cross"]
        if len(cross):
            cross = cross.copy()
            cross[:, 3] = m[cross[:, 3].astype(np.int64)].astype(np.uint64)
            self.cross.append(cross)

    def _cta(self, linear: int) -> tuple:
        return tuple(int(x) for x in unravel(linear, self.launch.grid))


#: Positions of site ids in the aggregation keys of each kind (see :meth:`Recorder.merge`).
_KEY_SITES = {"uninit-use": (1, 2), "uninit-store": (1, 2), "bounds": (1,), "async-read": (1,), "async-bulk": (1,),
              "async-src": (1,), "race": (2, 3), "warp-race": (2, 3), "cta-race": (1, 2)}


def _land_fenced(blk, row: int, ix, mask, shape) -> None:
    """cp.async (non-bulk) bytes landing at the index ``ix`` (batch element, byte) of rows from
    ``row``: the async proxy's image follows them.  The PTX ISA counts cp.async writes in the
    generic proxy (a wgmma reading them needs fence.proxy.async), but CuTe's sm_90 tutorial
    (cp.async then wgmma, no proxy fence) relies on them being visible: not reported."""
    b, idx = np.broadcast_arrays(*ix)
    if mask is not None:
        m = np.broadcast_to(np.asarray(mask)[..., None], shape)
        b, idx = b[m], idx[m]
    rows = row + b.reshape(-1)
    blk.fenced[rows, idx.reshape(-1)] = blk.data[rows, idx.reshape(-1)]


def _remap_key(key: tuple, m: np.ndarray) -> tuple:
    """``key`` with its site ids mapped through ``m`` (part site -> this recorder's)."""
    at = _KEY_SITES.get(key[0], ())
    return tuple(int(m[x]) if i in at else x for i, x in enumerate(key))


def _ln(x) -> int:
    """The lane (or row-address lane) of a logged access (rows not per lane are -(row + 1))."""
    x = int(x)
    return x if x >= 0 else -x - 1


def _packed(cols, widths):
    """One uint64 key per row from non-negative integer columns (most significant first) of
    the given bit widths, or None when they do not fit in 64 bits."""
    if sum(widths) > 64:
        return None
    key = np.zeros(len(cols[0]), np.uint64)
    for c, w in zip(cols, widths):
        key = (key << np.uint64(w)) | c.astype(np.uint64)
    return key


def _bits(x: np.ndarray) -> int:
    return int(x.max()).bit_length() if x.size else 0


def _order(b, byte, actor):
    """Stable order of rows by (b, byte, actor): one sort of a packed key where it fits."""
    if b.size:
        off = byte - byte.min()
        key = _packed((b, off, actor), (_bits(b), _bits(off), _bits(actor)))
        if key is not None:
            return np.argsort(key, kind="stable")
    return np.lexsort((actor, byte, b))


def _first_of_each(byte, cta, write):
    """Index of the first row of each distinct (byte, cta, write), in sorted key order."""
    w = write.astype(np.uint8)
    if byte.size:
        off = byte - byte.min()
        key = _packed((off, cta, w), (_bits(off), _bits(cta), 1))
        if key is not None:
            return np.unique(key, return_index=True)[1]
    order = np.lexsort((w, cta, byte))
    k = np.stack([byte[order], cta[order].astype(np.uint64), w[order].astype(np.uint64)], 1)
    return order[np.r_[True, (k[1:] != k[:-1]).any(1)]]


def _races(new, actor, write):
    """(first row, a writing row, a row of another actor) of each group of sorted access rows
    (``new`` marks a group's first row; rows are sorted by actor within a group) that more
    than one actor touched and one wrote."""
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(new)]
    writes = np.r_[0, np.cumsum(write, dtype=np.int64)]
    anyw = writes[ends] > writes[starts]
    for g in np.flatnonzero((actor[starts] != actor[ends - 1]) & anyw):
        rows = range(starts[g], ends[g])
        wr = next(i for i in rows if write[i])
        yield starts[g], wr, next(i for i in rows if actor[i] != actor[wr])
