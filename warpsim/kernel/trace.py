"""The register tracer: values of chosen registers of chosen threads after each instruction,
typed as the registers are declared (floats as floats, predicates as 0/1, bit types in hex),
with the CUDA source location of the instruction when the PTX has ``.loc``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warpsim.errors import WarpsimError

__all__ = ["Trace", "TraceRecord", "format_value", "TraceError"]


class TraceError(WarpsimError):
    """A tracer option names a thread outside the launch, an unknown register or PTX lines
    without instructions.  ``option``: which one ('threads', 'regs', 'lines')."""

    option: str | None = None


_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def format_value(v, t: str | None) -> str:
    """One register value (an int, or bool for predicates) as its declared type ``t`` shows
    it: floats as floats with their bits, predicates as 0/1, other types in hex."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    v = int(v)
    if t in _FLOAT:
        ft = _FLOAT[t]
        bits = np.dtype(ft).itemsize * 8
        x = np.array(v & ((1 << bits) - 1), f"u{bits // 8}").view(ft)
        return f"{float(x)!r} ({v:#x})"
    if t == "bf16":
        import ml_dtypes
        x = np.array(v & 0xFFFF, np.uint16).view(ml_dtypes.bfloat16)
        return f"{float(x)!r} ({v:#x})"
    if t is not None and t[0] in "su":
        bits = int(t[1:])
        if t[0] == "s" and v >> (bits - 1) & 1:
            v -= 1 << bits
        return str(v)
    return f"{v:#x}"


@dataclass(frozen=True)
class TraceRecord:
    """Register values of one thread after one executed instruction (``types``: the declared
    type of each register; ``source``: the CUDA source location, or None)."""

    step: int
    line: int
    text: str
    cta: tuple
    tid: tuple
    values: dict
    types: dict = field(default_factory=dict)
    source: str | None = None

    def __str__(self) -> str:
        vals = "  ".join(f"{k}={format_value(v, self.types.get(k))}" for k, v in self.values.items())
        src = f"  [{self.source}]" if self.source else ""
        return (f"#{self.step:<5} line {self.line:<4} ctaid={self.cta} tid={self.tid}  {self.text}{src}"
                f"\n        {vals}")


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
    A thread outside the grid or block, a register the kernel does not declare, or a line
    range without instructions is a :class:`TraceError` naming it.
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
            if any(a >= b for a, b in zip(c, launch.grid)):
                raise _err(f"trace thread ctaid={c} is outside the grid {launch.grid}", "threads")
            if any(a >= b for a, b in zip(t, launch.block)):
                raise _err(f"trace thread tid={t} is outside the block {launch.block}", "threads")
            lin = t[0] + t[1] * bx + t[2] * bx * by
            sel.setdefault(c, []).append((lin // 32, lin % 32, t))
        body = program.body
        types = {}
        for r in self.regs or ():
            t = body.reg_type(r)
            if t is None:
                raise _err(f"trace register {r} is not declared by the kernel", "regs")
            types[r] = t
        self.records = []
        lo, hi = self.lines if self.lines is not None else (0, 1 << 60)
        if lo > hi or not any(lo <= ins.line <= hi for ins in program.instrs):
            raise _err(f"trace lines {lo}-{hi} hold no instruction of the kernel", "lines")
        smap = getattr(program, "source", None)
        for ins in program.instrs:
            if ins.kind not in (0, 3) or not lo <= ins.line <= hi:
                continue
            names = list(self.regs) if self.regs else _dests(ins)
            if not names:
                continue
            tys = {n: types.get(n) or body.reg_type(n) for n in names}
            src = smap.describe(ins.loc) if smap is not None else None
            ins.exec = self._wrap(ins, ins.exec, names, sel, tys, src)

    def _wrap(self, ins, inner, names, sel, tys, src):
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
                        r = dict.get(ctx.regs, n)  # not a program read (wgmma watches those)
                        if r is not None:
                            v = r[b, lane]
                            vals[n] = bool(v) if r.dtype == np.bool_ else int(v)
                    self.records.append(TraceRecord(len(self.records), ins.line, ins.text,
                                                    tuple(int(x) for x in cta), tid, vals,
                                                    {n: tys.get(n) for n in vals}, src))
        return run


def _err(msg: str, option: str) -> TraceError:
    e = TraceError(msg)
    e.option = option
    return e


def _dests(ins) -> list:
    from warpsim.ptx.parser import Pipe, Reg, Vec

    if ins.spec.ndst == 0 or not ins.operands:
        return []
    op = ins.operands[0]
    items = op.items if isinstance(op, (Vec, Pipe)) else (op,)
    return [x.name for x in items if isinstance(x, Reg)]
