"""The launch sanitizer and tracer: findings, memory-access recording, register tracing.

A :class:`Finding` names the kernel, the instruction and its PTX line, the CTA, the warp
(index within the CTA), lanes and the address.  :meth:`warpsim.Module.launch` raises
:class:`SanitizerError` (a :class:`~warpsim.errors.WarpsimError`) holding every finding and
the outputs of the launch.  Kinds:

``out-of-bounds`` / ``misaligned``  an access outside every buffer / variable, or not aligned to
    its width (ldmatrix rows: 16 bytes); execution stops there.
``divergent-sync``  a ``.sync.aligned`` instruction (mma, ldmatrix, bar.sync, shfl.sync with a
    full mask, ...) reached by part of a warp, or a membermask naming lanes that do not run it.
``race``  two warps of a CTA access the same bytes of shared or global memory between two
    barriers, at least one of them writing (atomics excepted); or two CTAs the same global
    bytes, at least one writing.
``uninitialised``  a value never written (register lanes, shared or local memory) reaches an
    output: the launch runs twice, with uninitialised state filled with 0x00 and with 0xA5
    bytes; output bytes that differ are reported with the store that wrote them.
``sparse-metadata``  an ``mma.sp`` metadata nibble the ISA leaves undefined.
``deadlock``  warps wait at a barrier that the others never reach.
``error``  any other error that stopped execution (e.g. a register read before any write).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from warpsim.errors import DeviceAssertError, DivergenceError, MemoryAccessError, WarpsimError, quote

__all__ = ["Finding", "SanitizerError", "Trace", "TraceRecord"]


@dataclass(frozen=True)
class Finding:
    """One problem found by the sanitizer (see the module docstring for the kinds)."""

    kind: str
    kernel: str
    instruction: str | None
    line: int | None
    cta: tuple | None
    warp: int | None
    lanes: tuple | None
    address: int | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.cta is not None:
            where.append(f"CTA {self.cta}")
        if self.warp is not None:
            where.append(f"warp {self.warp}")
        if self.lanes:
            where.append("lane" + ("s " if len(self.lanes) > 1 else " ") + ", ".join(map(str, self.lanes)))
        if self.address is not None:
            where.append(f"address {self.address:#x}")
        text = quote(self.instruction or "")
        ins = f"line {self.line}: {text}" if self.line else text
        return f"[{self.kind}] {self.kernel}: {ins} ({', '.join(where)}): {self.message}"


class SanitizerError(WarpsimError):
    """A launch found problems: ``findings`` (list of :class:`Finding`), ``outputs`` (the
    launch's outputs where it ran to the end, else None), ``error`` (the error that stopped the
    launch, or None), ``stdout``/``printf`` (the kernel's device printf before it stopped)."""

    error = None
    stdout = ""
    printf: list = []

    def __init__(self, kernel: str, findings: list, outputs=None) -> None:
        self.kernel = kernel
        self.findings = list(findings)
        self.outputs = outputs
        head = f"{kernel}: {len(self.findings)} sanitizer finding(s)"
        super().__init__(head + ":\n" + "\n".join(f"  {f}" for f in self.findings[:20])
                         + ("\n  ..." if len(self.findings) > 20 else ""))


# ------------------------------------------------------------------------------------------
# errors raised while running -> findings
# ------------------------------------------------------------------------------------------
def _kind(e: Exception) -> str:
    from warpsim.errors import MetadataError

    if isinstance(e, MemoryAccessError):
        return {"misaligned": "misaligned", "outside": "out-of-bounds"}.get(e.reason, "error")
    if isinstance(e, DivergenceError):
        return "divergent-sync"
    if isinstance(e, MetadataError):
        return "sparse-metadata"
    if isinstance(e, DeviceAssertError):
        return "assert"
    return "error"


def unravel(linear, dims) -> tuple:
    """(x, y, z) of a linear thread or CTA index (int or array) in a block or grid ``dims``
    (x fastest)."""
    dx, dy, _ = dims
    return (linear % dx, (linear // dx) % dy, linear // (dx * dy))


def tid_of(launch, warp: int, lane: int) -> tuple:
    return unravel(warp * 32 + lane, launch.block)


def finding_from_error(e: Exception, launch, batch, warp: int, rec) -> SanitizerError:
    """Wrap an error raised by warp ``warp`` of CTA batch ``batch`` as a SanitizerError (the
    error's location attributes say which instruction, lanes and address)."""
    msg = str(e)
    lanes = getattr(e, "lanes", None) or None
    b = getattr(e, "warp", None)  # the warp's index in the batch = its CTA's
    cta = tuple(int(x) for x in batch[min(b[0], len(batch) - 1) if b else 0])
    if b:  # the interpreter numbers warps within the CTA batch; say which CTA and warp it was
        msg = msg.replace(f"of warp {b[0]}", f"of warp {warp} of CTA {cta}")
    extra = f" [thread ctaid={cta} tid={tid_of(launch, warp, lanes[0])}]" if lanes else ""
    f = Finding(_kind(e), launch.fn.name, getattr(e, "instruction", None), getattr(e, "line", None),
                cta, warp, lanes, getattr(e, "address", None), f"{type(e).__name__}: {msg}{extra}")
    err = SanitizerError(launch.fn.name, [f], None)
    err.__cause__ = e
    err.error = e  # the error itself (a raise ... from None clears __cause__)
    return err


# ------------------------------------------------------------------------------------------
# memory-access recording (races, uninitialised outputs)
# ------------------------------------------------------------------------------------------
class _Recording:
    """Forwards to an address space and logs its accesses for the :class:`Recorder`."""

    def __init__(self, inner, rec: "Recorder", name: str) -> None:
        self.inner = inner
        self._rec = rec
        self._name = name

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def load(self, addr, nbytes, mask, where="", align=None):
        out = self.inner.load(addr, nbytes, mask, where, align)
        self._rec.log(self._name, addr, nbytes, mask, where, False)
        return out

    def store(self, addr, data, mask, where="", align=None):
        self.inner.store(addr, data, mask, where, align)
        self._rec.log(self._name, addr, data.shape[-1], mask, where, True)


class Recorder:
    """Collects accesses per barrier interval and turns conflicts into findings."""

    MAX_FINDINGS = 20

    def __init__(self, kernel: str, launch, enabled: bool) -> None:
        self.kernel, self.launch, self.enabled = kernel, launch, enabled
        self.findings: list[Finding] = []
        self.actor = 0
        self.sites: list[str] = []
        self._site_index: dict[str, int] = {}
        self.logs: dict[str, list] = {"shared": [], "global": []}
        self.cross: list[np.ndarray] = []  # per batch: unique (byte, cta, write, site) of global accesses
        self.stores: list[np.ndarray] = []  # global stores: (byte, site, cta, warp, lane)
        self.batch: list = []
        self.start = 0
        self._seen: set = set()
        self.keys: list = []  # per intra-CTA race finding, its key in _seen (parts merge on it)

    def wrap(self, space, name: str):
        return _Recording(space, self, name) if self.enabled else space

    def log(self, name, addr, nbytes, mask, where, write) -> None:
        shape = addr.shape  # (batch, lanes); ldmatrix passes only its row-address lanes
        act = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
        n = shape[-1] if len(shape) else 1
        b, lane = np.nonzero(act.reshape(-1, n))
        a = addr.reshape(-1, n)[b, lane]
        site = self._site_index.get(where)
        if site is None:
            site = self._site_index[where] = len(self.sites)
            self.sites.append(where)
        self.logs[name].append((b.astype(np.int64), lane.astype(np.int64), a.astype(np.uint64),
                                int(nbytes), self.actor, bool(write), site))

    def begin_batch(self, start: int, batch) -> None:
        self.start, self.batch = start, batch

    def _rows(self, entries):
        cols = [[] for _ in range(6)]
        for b, lane, a, n, actor, write, site in entries:
            k = np.arange(n, dtype=np.uint64)
            cols[0].append(np.repeat(b, n))
            cols[1].append((a[:, None] + k).reshape(-1))
            cols[2].append(np.full(b.size * n, actor, np.int64))
            cols[3].append(np.full(b.size * n, write))
            cols[4].append(np.full(b.size * n, site, np.int64))
            cols[5].append(np.repeat(lane, n))
        return [np.concatenate(c) for c in cols]

    def barrier(self) -> None:
        """End of a barrier interval: check intra-CTA conflicts, clear the interval's log."""
        if not self.enabled:
            return
        for name in ("shared", "global"):
            entries = self.logs[name]
            if not entries:
                continue
            b, byte, actor, write, site, lane = self._rows(entries)
            self._conflicts(name, b, byte, actor, write, site, lane)
            if name == "global":
                cta = b + self.start
                first = _first_of_each(byte, cta, write)
                self.cross.append(np.stack([byte[first], cta[first].astype(np.uint64),
                                            write[first].astype(np.uint64),
                                            site[first].astype(np.uint64)], 1))
                w = write
                self.stores.append(np.stack([byte[w], site[w].astype(np.uint64), cta[w].astype(np.uint64),
                                             actor[w].astype(np.uint64), lane[w].astype(np.uint64)], 1))
            self.logs[name] = []

    def _conflicts(self, name, b, byte, actor, write, site, lane) -> None:
        order = _order(b, byte, actor)
        b, byte, actor, write, site, lane = (x[order] for x in (b, byte, actor, write, site, lane))
        new = np.r_[True, (b[1:] != b[:-1]) | (byte[1:] != byte[:-1])]
        for lo, wr, other in _races(new, actor, write):
            if len(self.findings) >= self.MAX_FINDINGS:
                return
            key = (name, int(site[wr]), int(site[other]), int(b[lo]))
            if key in self._seen:
                continue
            self._seen.add(key)
            self.keys.append(key)
            cta = tuple(int(x) for x in self.batch[int(b[lo])])
            kind2 = "write" if write[other] else "read"
            msg = (f"{name}-memory race between barriers: warp {int(actor[wr])} lane {int(lane[wr])} "
                   f"writes ({self.sites[site[wr]]}) and warp {int(actor[other])} lane "
                   f"{int(lane[other])} {kind2}s ({self.sites[site[other]]}) byte {int(byte[lo]):#x}")
            ln, tx = _split_site(self.sites[site[wr]])
            self.findings.append(Finding("race", self.kernel, tx, ln, cta, int(actor[wr]),
                                         (int(lane[wr]),), int(byte[lo]), msg))

    def end_batch(self) -> None:
        self.barrier()

    def finish(self) -> None:
        """Cross-CTA conflicts on global memory over the whole launch."""
        if not self.enabled or not self.cross:
            return
        rows = np.concatenate(self.cross)
        rows = rows[_order(np.zeros(len(rows), np.uint64), rows[:, 0], rows[:, 1])]
        byte, cta, write, site = rows.T
        new = np.r_[True, byte[1:] != byte[:-1]]
        seen = set()
        for lo, wr, other in _races(new, cta, write.astype(bool)):
            if len(self.findings) >= self.MAX_FINDINGS:
                return
            key = (int(site[wr]), int(site[other]))
            if key in seen:
                continue
            seen.add(key)
            c1, c2 = (self._cta(int(cta[wr])), self._cta(int(cta[other])))
            msg = (f"global-memory race between CTAs: CTA {c1} writes ({self.sites[site[wr]]}) and CTA "
                   f"{c2} {'writes' if write[other] else 'reads'} ({self.sites[site[other]]}) "
                   f"byte {int(byte[lo]):#x}; CTAs are not ordered")
            ln, tx = _split_site(self.sites[site[wr]])
            self.findings.append(Finding("race", self.kernel, tx, ln, c1, None, None, int(byte[lo]), msg))

    def _cta(self, linear: int) -> tuple:
        return unravel(linear, self.launch.grid)

    def uninitialised(self, outs_a, outs_b, launch, first=None) -> list[Finding]:
        """Findings for output bytes that differ between the two poisoned runs; ``first``:
        the first instruction whose result depended on uninitialised state (from
        :class:`Digests`), named by the finding when known."""
        from warpsim.kernel.args import is_buffer
        from warpsim.ptx.memory import GLOBAL_BASE

        found = []
        stores = np.concatenate(self.stores) if self.stores else np.zeros((0, 5), np.uint64)
        # buffer addresses are the same in both runs: recompute them as the allocator does
        k = 0
        for i, a in enumerate(launch.args):
            if not is_buffer(a):
                continue
            x = np.ascontiguousarray(outs_a[k]).reshape(-1).view(np.uint8)
            y = np.ascontiguousarray(outs_b[k]).reshape(-1).view(np.uint8)
            k += 1
            diff = np.flatnonzero(x != y)
            if not diff.size:
                continue
            base = launch.buffer_addresses[i] if hasattr(launch, "buffer_addresses") else GLOBAL_BASE
            addr = np.uint64(base) + diff.astype(np.uint64)
            hit = np.flatnonzero(stores[:, 0] == addr[0]) if stores.size else np.zeros(0, int)
            if hit.size:
                r = stores[hit[-1]]
                ln, tx = _split_site(self.sites[int(r[1])])
                cta, warp, lane = self._cta(int(r[2])), int(r[3]), int(r[4])
                first_addr = int(r[0])
            else:
                ln = tx = None
                cta = warp = lane = None
                first_addr = int(addr[0])
            msg = (f"{diff.size} byte(s) of output argument {i} depend on uninitialised state (they "
                   f"differ between runs with registers/shared/local memory filled with 0x00 and "
                   f"0xA5), first at element byte {int(diff[0])}"
                   + (f", written by line {ln}: {tx} (CTA {cta}, warp {warp}, thread "
                      f"tid={tid_of(launch, warp, lane)})" if tx else ""))
            lanes = None if lane is None else (lane,)
            if first is not None:  # name the instruction whose result first depended on it
                ins, w, c, ls = first
                msg += (f"; the first result to depend on uninitialised state is line {ins.line}: "
                        f"{ins.text} (CTA {c}, warp {w}, lanes {', '.join(map(str, ls))})")
                tx, ln, cta, warp, lanes = ins.text, ins.line, c, w, ls
            found.append(Finding("uninitialised", self.kernel, tx, ln, cta, warp, lanes, first_addr, msg))
        return found


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
    """Index of the first row of each distinct (byte, cta, write), in sorted key order (as
    ``np.unique(..., axis=0, return_index=True)``, without its row-wise sort)."""
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


def _split_site(where: str):
    m = re.match(r"line (\d+): (.*)", where)
    return (int(m.group(1)), m.group(2)) if m else (None, where)


# ------------------------------------------------------------------------------------------
# where uninitialised state first changes a result
# ------------------------------------------------------------------------------------------
class Digests:
    """Per executed instruction, a per-lane fingerprint of the registers it wrote.

    The first poisoned run keeps them; the second compares its own against them as it goes.
    Only the poison differs between the runs, so the first instruction whose fingerprint
    differs is the first whose result depends on uninitialised state: the instruction that
    read it (or used a value computed from it)."""

    LIMIT = 4_000_000  # lane fingerprints kept (32 MB); later instructions are not compared

    def __init__(self, reference: "Digests | None" = None) -> None:
        self.steps: list = []
        self.reference = reference
        self.k = 0
        self.kept = 0
        self.first = None  # (instruction, warp, CTA, lanes) of the first difference

    def attach(self, program) -> None:
        for idx, ins in enumerate(program.instrs):
            if ins.kind not in (0, 3):
                continue
            names = _dests(ins)
            if names:
                ins.exec = self._wrap(idx, ins, ins.exec, names)

    def _wrap(self, idx, ins, inner, names):
        mult = np.uint64(0x9E3779B97F4A7C15)

        def run(ctx, mask):
            inner(ctx, mask)
            if self.first is not None or self.kept > self.LIMIT:
                return
            h = None
            for n in names:
                r = ctx.regs.get(n)
                if r is None:
                    continue
                v = r.astype(np.uint64)
                h = v if h is None else h * mult + v
            if h is None:
                return
            if mask is not None:
                h = np.where(mask, h, np.uint64(0))
            w, batch = ctx.launch_info
            if self.reference is None:
                self.steps.append((idx, w, h))
                self.kept += h.size
                return
            ref = self.reference.steps
            if self.k >= len(ref):
                self.kept = self.LIMIT + 1  # past what the first run kept
                return
            ridx, rw, rh = ref[self.k]
            self.k += 1
            if ridx != idx or rw != w or rh.shape != h.shape:
                diff = np.ones(h.shape, bool)  # control flow itself differs
            else:
                diff = rh != h
            if diff.any():
                b = int(np.argwhere(diff)[0][0])
                lanes = tuple(int(x) for x in np.flatnonzero(diff[b]))
                self.first = (ins, w, tuple(int(x) for x in batch[b]), lanes)
        return run


# ------------------------------------------------------------------------------------------
# tracer
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceRecord:
    """Register values of one thread after one executed instruction."""

    step: int
    line: int
    text: str
    cta: tuple
    tid: tuple
    values: dict

    def __str__(self) -> str:
        vals = "  ".join(f"{k}={_fmt(v)}" for k, v in self.values.items())
        return f"#{self.step:<5} line {self.line:<4} ctaid={self.cta} tid={self.tid}  {self.text}\n        {vals}"


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(int(v))
    return f"{v:#x}"


def _dim(v) -> tuple:
    if isinstance(v, (int, np.integer)):
        return (int(v), 0, 0)
    v = tuple(int(x) for x in v)
    return v + (0,) * (3 - len(v))


@dataclass
class Trace:
    """What to trace in a launch, and (after it) what was seen.

    ``threads``: (ctaid, tid) pairs, each an int or a tuple (default: thread (0, 0) only);
    ``regs``: register names (default: the registers each instruction writes); ``lines``:
    (first, last) PTX line range (default: all).  After the launch, ``records`` holds one
    :class:`TraceRecord` per selected thread and executed instruction (up to ``limit``).
    """

    threads: list | None = None
    regs: list | None = None
    lines: tuple | None = None
    limit: int = 100_000
    records: list = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(r) for r in self.records)

    def _attach(self, program, launch) -> None:
        threads = self.threads if self.threads is not None else [(0, 0)]
        sel: dict = {}
        bx, by, _ = launch.block
        for cta, tid in threads:
            c, t = _dim(cta), _dim(tid)
            lin = t[0] + t[1] * bx + t[2] * bx * by
            if lin >= launch.nthreads:
                raise WarpsimError(f"trace thread tid={t} is outside the block {launch.block}")
            sel.setdefault(c, []).append((lin // 32, lin % 32, t))
        self.records = []
        lo, hi = self.lines if self.lines is not None else (0, 1 << 60)
        for ins in program.instrs:
            if ins.kind not in (0, 3) or not lo <= ins.line <= hi:
                continue
            names = list(self.regs) if self.regs else _dests(ins)
            if not names:
                continue
            ins.exec = self._wrap(ins, ins.exec, names, sel)

    def _wrap(self, ins, inner, names, sel):
        def run(ctx, mask):
            inner(ctx, mask)
            if len(self.records) >= self.limit:
                return
            w, batch = ctx.launch_info
            for b, cta in enumerate(batch):
                for warp, lane, tid in sel.get(tuple(int(x) for x in cta), ()):
                    if warp != w or (mask is not None and not mask[b, lane]):
                        continue
                    vals = {}
                    for n in names:
                        r = ctx.regs.get(n)
                        if r is not None:
                            v = r[b, lane]
                            vals[n] = bool(v) if r.dtype == np.bool_ else int(v)
                    self.records.append(TraceRecord(len(self.records), ins.line, ins.text,
                                                    tuple(int(x) for x in cta), tid, vals))
        return run


def _dests(ins) -> list:
    from warpsim.ptx.parser import Pipe, Reg, Vec

    if ins.spec.ndst == 0 or not ins.operands:
        return []
    op = ins.operands[0]
    items = op.items if isinstance(op, (Vec, Pipe)) else (op,)
    return [x.name for x in items if isinstance(x, Reg)]
