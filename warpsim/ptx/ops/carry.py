"""Extended-precision integer arithmetic: the carry chains (``add.cc``, ``addc``, ``sub.cc``,
``subc``, ``mad.cc``, ``madc``) and the 24-bit multiplies (``mul24``, ``mad24``).

The carry flag ``CC.CF`` is one bit per lane, shared by every chain and by the 32- and 64-bit
forms (``%%cc`` in the machine's registers; no PTX name can reach it).  Every form is one
addition with carry out, as the hardware does it: ``add.cc`` a + b, ``addc`` a + b + CF,
``sub.cc`` a + ~b + 1, ``subc`` a + ~b + CF, ``mad.cc`` (a*b).lo/hi + c, ``madc`` ... + c + CF.
After a subtraction CF is therefore "no borrow" (the PTX ISA's borrow is 1 - CF): a pure
sub.cc/subc chain computes the big-number difference, and mixed chains (``add.cc`` then
``subc``) give what the H100 gives (measured, docs/validation.md).
Reading the flag before any ``.cc`` instruction wrote it is an error.  Legality as ptxas 13.0
gives it: ``.u32 .s32 .u64 .s64`` (and ``.u16`` for ``addc``/``subc``/``madc`` without ``.cc``), no ``.sat``; ``mul24``/``mad24`` on ``.u32 .s32``,
``.sat`` only with ``mad24.hi.s32``.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.ops.integer import _product
from warpsim.ptx.optable import OpSpec
from warpsim.facts.types import TYPE_BITS

CC = "%%cc"  # the carry flag's slot in ctx.regs (bool per lane)
_TYPES = ("u32", "s32", "u64", "s64")
_UT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _words(ins, allowed_modes: tuple[str, ...], kind: str):
    """(mode or None, cc written, type) of the qualifier words after the key."""
    mode, cc, t = None, False, None
    for w in ins.words:
        if w in allowed_modes and mode is None:
            mode = w
        elif w == "cc" and not cc:
            cc = True
        elif (w in _TYPES or w == "u16" and kind in ("addc", "subc", "madc")) and t is None:
            t = w  # ptxas 13.0 takes .u16 on addc/subc/madc without .cc (ptxas_real_truth)
        elif w == "sat":
            raise PtxError(f"{ins.text}: .sat cannot be combined with a carry chain ({kind})")
        else:
            raise PtxError(f"{ins.text}: qualifier .{w} is not legal for {kind} "
                           f"(types {', '.join('.' + x for x in _TYPES)}"
                           + (f"; {'/'.join('.' + m for m in allowed_modes)}" if allowed_modes else "") + ")")
    if t is None:
        raise PtxError(f"{ins.text}: {kind} needs a type, one of {', '.join('.' + x for x in _TYPES)}")
    if allowed_modes and mode is None:
        raise PtxError(f"{ins.text}: {kind} needs .lo or .hi")
    if t == "u16" and cc:
        raise PtxError(f"{ins.text}: .cc is not legal on .u16 (16-bit forms take a carry in only)")
    return mode, cc, t


def _carry_in(ctx, ins) -> np.ndarray:
    cf = ctx.regs.get(CC)
    if cf is None:
        raise PtxError(f"{ins.text}: reads the carry flag CC.CF, which no add.cc/sub.cc/mad.cc "
                       "instruction has written")
    return cf


def _write_carry(ctx, cf: np.ndarray, mask) -> None:
    cf = np.broadcast_to(cf, ctx.shape)
    if mask is None:
        ctx.regs[CC] = np.array(cf, bool)
    else:
        old = ctx.regs.get(CC)
        ctx.regs[CC] = np.where(mask, cf, False if old is None else old)


def _chain(kind: str, sub: bool, carry_in: bool, key_cc: bool, mad: bool):
    """compile for one chain opcode."""
    def compile(ins, dec):
        modes = ("lo", "hi") if mad else ()
        mode, cc, t = _words(ins, modes, kind)
        cc = cc or key_cc
        if mad and mode is None and key_cc:
            raise PtxError(f"{ins.text}: {kind} needs .lo or .hi")
        w = TYPE_BITS[t]
        ut = _UT[w]
        nsrc = 3 if mad else 2
        ops = ins.operands
        if len(ops) != nsrc + 1:
            raise PtxError(f"{ins.text}: {kind} takes d, {'a, b, c' if mad else 'a, b'}")
        wd = dec.writer(ops[0], t)
        rs = [dec.reader(o, t) for o in ops[1:]]

        def run(ctx, mask):
            vals = [np.broadcast_to(np.asarray(r(ctx), ut), ctx.shape) for r in rs]
            if mad:
                lo, hi = _product(vals[0], vals[1], t)
                x = (lo if mode == "lo" else hi).astype(ut)
                y = vals[2]
            else:
                x, y = vals
            # one carry bit, as the hardware keeps it: sub is x + ~y + 1 (sub.cc) or x + ~y + CF
            # (subc), so after a subtraction CF = 1 means "no borrow" (measured on the H100:
            # add.cc then subc subtracts 1 - CF, docs/validation.md)
            if carry_in:
                cin = _carry_in(ctx, ins).astype(ut)
            else:
                cin = ut(1) if sub else ut(0)
            if sub:
                y = ~y
            s = x + y
            d = s + cin
            cout = (s < x) | (d < s)
            wd(ctx, d, mask)
            if cc:
                _write_carry(ctx, cout, mask)
        return run
    return compile


def _mul24(mad: bool):
    def compile(ins, dec):
        mode, sat, t = None, False, None
        for w in ins.words:
            if w in ("lo", "hi") and mode is None:
                mode = w
            elif w == "sat" and mad and not sat:
                sat = True
            elif w in ("u32", "s32") and t is None:
                t = w
            else:
                raise PtxError(f"{ins.text}: qualifier .{w} is not legal for {ins.key} "
                               "(.lo/.hi, types .u32 .s32" + (", .sat with .hi.s32)" if mad else ")"))
        if mode is None or t is None:
            raise PtxError(f"{ins.text}: {ins.key} needs .lo or .hi and a type, .u32 or .s32")
        if sat and not (mode == "hi" and t == "s32"):
            raise PtxError(f"{ins.text}: .sat applies to mad24.hi.s32 only")
        n = 3 if mad else 2
        if len(ins.operands) != n + 1:
            raise PtxError(f"{ins.text}: {ins.key} takes d, a, b" + (", c" if mad else ""))
        wd = dec.writer(ins.operands[0], t)
        rs = [dec.reader(o, t) for o in ins.operands[1:]]
        signed = t == "s32"

        def run(ctx, mask):
            a, b = (np.asarray(r(ctx), np.uint32).astype(np.int64) & 0xFFFFFF for r in rs[:2])
            if signed:  # the low 24 bits, sign-extended from bit 23
                a = np.where(a & 0x800000, a - (1 << 24), a)
                b = np.where(b & 0x800000, b - (1 << 24), b)
            p = a * b  # exact: |p| < 2**47
            part = p if mode == "lo" else p >> 16  # .hi: bits 47..16 of the 48-bit product
            if mad:
                c = np.asarray(rs[2](ctx), np.uint32)
                if sat:
                    v = (part & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64) \
                        + c.view(np.int32).astype(np.int64)
                    d = np.clip(v, -(1 << 31), (1 << 31) - 1).astype(np.int64)
                else:
                    d = part + c.astype(np.int64)
            else:
                d = part
            wd(ctx, np.broadcast_to((d & 0xFFFFFFFF).astype(np.uint32), ctx.shape), mask)
        return run
    return compile


OPS: dict[str, OpSpec] = {
    "add.cc": OpSpec("add.cc", _TYPES, None, 2, compile=_chain("add.cc", False, False, True, False),
                     doc="a + b modulo 2**n, carry out to CC.CF"),
    "addc": OpSpec("addc", _TYPES, None, 2, compile=_chain("addc", False, True, False, False),
                   doc="a + b + CC.CF; .cc: carry out to CC.CF"),
    "sub.cc": OpSpec("sub.cc", _TYPES, None, 2, compile=_chain("sub.cc", True, False, True, False),
                     doc="a - b modulo 2**n, borrow out to CC.CF"),
    "subc": OpSpec("subc", _TYPES, None, 2, compile=_chain("subc", True, True, False, False),
                   doc="a - (b + CC.CF); .cc: borrow out to CC.CF"),
    "mad.lo.cc": OpSpec("mad.lo.cc", _TYPES, None, 3, compile=None, doc="(a*b).lo + c, carry out to CC.CF"),
    "mad.hi.cc": OpSpec("mad.hi.cc", _TYPES, None, 3, compile=None, doc="(a*b).hi + c, carry out to CC.CF"),
    "madc": OpSpec("madc", _TYPES, None, 3, compile=_chain("madc", False, True, False, True),
                   doc="(a*b).lo/.hi + c + CC.CF; .cc: carry out to CC.CF"),
    "mul24": OpSpec("mul24", ("u32", "s32"), None, 2, compile=_mul24(False),
                    doc="product of the low 24 bits (sign-extended for .s32): .lo bits 31..0, .hi bits 47..16"),
    "mad24": OpSpec("mad24", ("u32", "s32"), None, 3, compile=_mul24(True),
                    doc="mul24.lo/.hi + c modulo 2**32; .hi.sat.s32 saturates"),
}


def _mad_cc(mode: str):
    inner = _chain("mad.cc", False, False, True, True)

    def compile(ins, dec):
        ins.words = [mode] + list(ins.words)
        return inner(ins, dec)
    return compile


OPS["mad.lo.cc"] = OpSpec("mad.lo.cc", _TYPES, None, 3, compile=_mad_cc("lo"), doc="(a*b).lo + c, carry out to CC.CF")
OPS["mad.hi.cc"] = OpSpec("mad.hi.cc", _TYPES, None, 3, compile=_mad_cc("hi"), doc="(a*b).hi + c, carry out to CC.CF")
