"""Decode parsed PTX once into executable instructions, and find where branches reconverge.

:class:`Program` is a parsed and decoded body: a list of :class:`Instr`, each holding its
``exec(ctx, mask)`` closure (operands resolved to register names, immediates already encoded,
qualifiers already read), its control class and, for branches, the target and the
reconvergence point (the immediate post-dominator of the branch's basic block).  A Program is
independent of register contents and memory, so it runs again on new inputs without
re-parsing.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

import ml_dtypes
import numpy as np

from warpsim.errors import PtxError, TargetError, WarpsimError
from warpsim.tensorcore.immediates import c_literal_rule, vector_word
from warpsim.ptx import registry
from warpsim.ptx.machine import SPECIAL_REGISTERS
from warpsim.ptx.optable import OpSpec, decode_qualifiers
from warpsim.ptx.parser import Addr, Body, Imm, Pipe, Reg, Sink, Statement, Vec, parse_body
from warpsim.ptx.widths import check_operand_widths
from warpsim.facts.types import DTYPES, SIGNED, TYPE_BITS, extend

__all__ = ["Decoder", "Instr", "Program", "compile_body", "encode_immediate"]

_KIND = {"op": 0, "branch": 1, "exit": 2, "barrier": 3}
_FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}
_SPECIALS = frozenset(SPECIAL_REGISTERS)


class Instr:
    """One decoded instruction (see the module docstring)."""

    __slots__ = ("text", "opcode", "line", "key", "spec", "words", "type", "mods", "operands", "guard",
                 "kind", "aligned", "exec", "target", "rpc", "uniform", "info", "loc", "group")

    def __init__(self, stmt: Statement, key: str, spec: OpSpec, words: list[str]) -> None:
        self.text = stmt.text
        self.opcode = stmt.opcode
        self.line = stmt.line
        self.loc = stmt.loc  # source frames of the statement (see Statement.loc)
        self.key = key
        self.spec = spec
        self.words = list(words)
        self.type = None
        self.mods: dict = {}
        self.operands = stmt.operands
        self.guard = stmt.guard
        self.kind = _KIND[spec.kind]
        self.aligned = spec.aligned
        self.exec: Callable = None  # type: ignore[assignment]
        self.target = -1
        self.rpc = -1
        self.uniform = False
        self.info: dict = {}
        #: (count, exec) when this instruction heads a run of ``count`` instructions that one
        #: ``exec(ctx, mask)`` runs together (see :func:`fuse_runs`); None otherwise
        self.group: tuple | None = None

    def __repr__(self) -> str:
        return f"Instr({self.text!r}, line={self.line})"


def encode_immediate(imm: Imm, t: str | None, where: str) -> np.generic:
    """The bits of immediate ``imm`` as an operand of PTX type ``t`` (a NumPy scalar)."""
    if t is None:
        t = "b64" if imm.kind in ("int", "f64") else "b32"
    if t == "pred":
        if imm.kind == "int" and imm.value in (0, 1):  # mov.pred %p, 0 (nvcc writes it)
            return np.bool_(imm.value)
        raise PtxError(f"{where}: immediate {imm.text} where a predicate is needed")
    w = TYPE_BITS[t]
    dt = DTYPES[w]
    if t in _FLOATS:
        ft = _FLOATS[t]
        if imm.kind == "f32":
            val = np.array(imm.value, np.uint32).view(np.float32)
        elif imm.kind == "f64":
            val = np.array(imm.value, np.uint64).view(np.float64)
        else:
            val = np.float64(imm.value)
        with np.errstate(all="ignore"):
            bits_ = np.asarray(val).astype(ft).view(dt)
        return dt.type(bits_)
    if imm.kind == "float":
        raise PtxError(f"{where}: floating-point literal {imm.text} for a .{t} operand")
    v = int(imm.value)
    if imm.kind == "f32" and w < 32 or imm.kind == "f64" and w < 64:
        raise PtxError(f"{where}: {imm.text} does not fit a .{t} operand")
    if not -(1 << (w - 1)) <= v < (1 << w) and not (w == 64 and v < (1 << 64)):
        raise PtxError(f"{where}: immediate {imm.text} does not fit a {w}-bit .{t} operand")
    return dt.type(v & ((1 << w) - 1))


class Decoder:
    """Turns operand trees into closures over a :class:`~warpsim.ptx.machine.Context`.

    ``reg_width(name)``: the declared width of a register, or None if unknown (then it is
    checked when the instruction runs).  ``symbols``: variable name -> (space, address).
    ``labels``: label -> instruction index.
    """

    def __init__(self, arch: str, reg_width: Callable[[str], int | None],
                 symbols: dict | None = None, labels: dict | None = None,
                 version: tuple[int, int] | None = None) -> None:
        self.arch = arch
        self.version = version
        self.reg_width = reg_width
        self.symbols = symbols or {}
        self.labels = labels or {}
        self.where = ""

    # -- sources ---------------------------------------------------------------------------
    def reader(self, op, t: str | None, *, relaxed: bool = False,
               lenient: bool = False, narrow: bool = False) -> Callable:
        """A function ctx -> array (or NumPy scalar) holding operand ``op`` as type ``t``.

        ``relaxed``: a wider register is truncated to ``t``; ``lenient``: registers are
        returned as stored, whatever their width (``t`` only encodes immediates); with
        ``narrow`` a register wider than ``t`` is still refused (as ptxas does)."""
        where = self.where
        if lenient and isinstance(op, Reg) and op.name not in _SPECIALS \
                and op.name not in self.symbols and op.name not in self.labels:
            if op.name.startswith("%") and "." in op.name:
                raise PtxError(f"{where}: special register {op.name} is not supported")
            declared = self.reg_width(op.name) if narrow else None
            if t is not None and declared is not None and declared > TYPE_BITS[t] > 1:
                # ptxas: "Arguments mismatch" (only ld/st/cvt take a wider register)
                raise PtxError(f"{where}: {op.name} is a {declared}-bit register; this .{t} operand "
                               f"takes {TYPE_BITS[t]} bits")
            return _make_reader(op.name, None, op.neg, False, where)
        if isinstance(op, Imm):
            c = encode_immediate(op, t, where)
            return lambda ctx: c
        if isinstance(op, Reg):
            name = op.name
            if name == "%is_explicit_cluster":
                if t != "pred":
                    raise PtxError(f"{where}: %is_explicit_cluster is a predicate")
                return lambda ctx: ctx.specials[name] != 0
            if name in _SPECIALS:
                if t is not None and TYPE_BITS[t] != 32 and not relaxed:
                    raise PtxError(f"{where}: special register {name} is 32-bit; .{t} operand")
                if t is not None and TYPE_BITS[t] == 64:
                    return lambda ctx: ctx.specials[name].astype(np.uint64)
                return lambda ctx: ctx.specials[name]
            if name.startswith("%") and "." in name or name in ("%clock", "%clock64", "%globaltimer", "%smid"):
                raise PtxError(f"{where}: special register {name} is not supported; known: "
                               + ", ".join(SPECIAL_REGISTERS))
            if name in self.symbols:
                space, addr = self.symbols[name]
                w = TYPE_BITS[t] if t else 64
                c = DTYPES[max(w, 8)].type(addr)
                return lambda ctx: c
            if name in self.labels:
                raise PtxError(f"{where}: label {name} used as a data operand")
            want = TYPE_BITS[t] if t is not None else None
            declared = self.reg_width(name)
            if want is not None and declared is not None and declared != want and \
                    not (relaxed and declared > want):
                raise PtxError(f"{where}: {name} is a {declared}-bit register; this .{t} operand "
                               f"needs {want} bits")
            neg = op.neg
            dt = DTYPES[want] if want is not None else None
            return _make_reader(name, dt, neg, relaxed, where, declared)
        if isinstance(op, Addr):
            raise PtxError(f"{where}: address {op.text} where a value is expected")
        if isinstance(op, Vec):
            raise PtxError(f"{where}: vector operand where a single value is expected")
        raise PtxError(f"{where}: operand {op!r} cannot be read")

    def mma_vector_item(self, mi, role: str, op) -> Callable:
        """A reader for one item of operand ``role`` ('a', 'b', 'c') of mma instruction ``mi``:
        a register, or an immediate encoded as ptxas does
        (:func:`warpsim.tensorcore.immediates.vector_word`)."""
        bits = mi.register_bits(role)
        if isinstance(op, Imm):
            c = DTYPES[bits].type(vector_word(op, bits, c_literal_rule(mi) if role == "c" else "bits"))
            return lambda ctx: c
        return self.reader(op, f"b{bits}")

    def check_mma_operands(self, mi, ops, text: str) -> None:
        """The operand list of mma instruction ``mi`` as ptxas types it: the same checks as
        :meth:`warpsim.Warp.execute` (:func:`warpsim.tensorcore.decode.check_operands`)."""
        from warpsim.tensorcore.decode import SINK, _immediate, check_operands

        def conv(o):
            if isinstance(o, Vec):
                return [conv(x) for x in o.items]
            if isinstance(o, Reg):
                return o.name
            if isinstance(o, Imm):
                return _immediate(o.text)
            if isinstance(o, Sink):
                return SINK
            return getattr(o, "text", str(o))
        try:
            check_operands(mi, [conv(o) for o in ops], text)
        except PtxError as e:
            raise PtxError(f"{self.where}: {e}") from None

    def address(self, op) -> Callable:
        """ctx -> uint64 (*batch, 32) byte addresses of an ``[addr]`` operand."""
        where = self.where
        if not isinstance(op, Addr):
            raise PtxError(f"{where}: expected an address [..], got {getattr(op, 'text', op)!r}")
        off = op.offset
        if op.base is None or op.base in self.symbols:
            c = np.uint64(((self.symbols[op.base][1] if op.base else 0) + off) & (2 ** 64 - 1))
            return _constant_address(c)
        r = self.reader(Reg(op.base), None)
        o = np.uint64(off & (2 ** 64 - 1))
        name = op.base

        def addr(ctx):
            a = r(ctx)
            if a.dtype == np.bool_:
                raise PtxError(f"{where}: predicate {name} used as an address")
            if a.dtype != np.uint64:
                if a.dtype != np.uint32:
                    raise PtxError(f"{where}: address register {name} is {a.dtype.itemsize * 8}-bit;"
                                   " addresses are 32- or 64-bit")
                a = a.astype(np.uint64)
            return a + o if off else a
        return addr

    # -- destinations ----------------------------------------------------------------------
    def writer(self, op, t: str | None, *, relaxed: bool = False,
               lenient: bool = False) -> Callable | None:
        """A function (ctx, value, mask) -> None storing into operand ``op`` (None for ``_``).

        ``relaxed``: a register wider than ``t`` takes the value zero- or sign-extended (by
        ``t``'s signedness); ``lenient``: the width is checked when the value is written."""
        where = self.where
        if isinstance(op, Sink):
            return None
        if not isinstance(op, Reg) or op.neg:
            raise PtxError(f"{where}: destination must be a register, got "
                           f"{getattr(op, 'text', None) or op}")
        name = op.name
        if name in _SPECIALS or name in self.symbols or name in self.labels:
            raise PtxError(f"{where}: {name} cannot be written")
        want = TYPE_BITS[t] if t is not None else None
        declared = self.reg_width(name)
        if not lenient and want is not None and declared is not None and declared != want and \
                not (relaxed and declared > want):
            raise PtxError(f"{where}: {name} is a {declared}-bit register; this .{t} destination "
                           f"needs {want} bits")
        signed = t in SIGNED
        return _make_writer(name, declared, signed, where, relaxed or not lenient)

    def flat(self, ops) -> list:
        """Operands with ``a|b`` pipes expanded."""
        out = []
        for o in ops:
            out.extend(o.items if isinstance(o, Pipe) else (o,))
        return out


def _constant_address(c: np.uint64) -> Callable:
    """ctx -> ``c`` in every lane: one read-only broadcast per batch shape, made once."""
    made: dict = {}

    def addr(ctx):
        v = made.get(ctx.shape)
        if v is None:
            v = made[ctx.shape] = np.broadcast_to(c, ctx.shape)
        return v
    return addr


def _make_reader(name: str, dt, neg: bool, relaxed: bool, where: str,
                 declared: int | None = None) -> Callable:
    def read(ctx):
        a = ctx.regs.get(name)
        if a is None:
            if ctx.unwritten_reads_zero:  # a kernel launch without the sanitizer: reads 0
                w = declared or (1 if dt == np.bool_ else dt.itemsize * 8 if dt is not None else 32)
                a = ctx.regs[name] = np.zeros(ctx.shape, DTYPES[w])
            else:
                from warpsim.errors import RegisterError
                raise RegisterError(f"register {name} has not been written")
        if dt is not None and a.dtype != dt:
            if relaxed and a.dtype != np.bool_ and a.dtype.itemsize * 8 > dt.itemsize * 8 and dt != np.bool_:
                a = a.astype(dt)
            else:
                w = 1 if a.dtype == np.bool_ else a.dtype.itemsize * 8
                want = 1 if dt == np.bool_ else dt.itemsize * 8
                raise PtxError(f"{where}: {name} is a {w}-bit register; the operand needs {want} bits")
        if neg:
            if a.dtype != np.bool_:
                raise PtxError(f"{where}: !{name} needs a predicate register")
            return ~a
        return a
    return read


def _make_writer(name: str, declared: int | None, signed: bool, where: str,
                 widen: bool = True) -> Callable:
    dt0 = DTYPES[declared] if declared is not None else None
    ndarray = np.ndarray

    def write(ctx, v, mask):
        if mask is None and v.__class__ is ndarray and v.dtype is dt0 and v.shape == ctx.shape:
            ctx.regs[name] = v  # the common case: a whole register of the declared width
            return
        regs = ctx.regs
        v = np.asarray(v)
        old = regs.get(name)
        w = declared
        if w is None:
            if old is None:
                from warpsim.errors import RegisterError
                raise RegisterError(f"register {name} is not declared: declare it with .reg (or "
                                    "Warp.declare), or use a %r/%rd/%f/%fd/%h/%rs/%p name")
            w = 1 if old.dtype == np.bool_ else old.dtype.itemsize * 8
        dt = DTYPES[w]
        if v.dtype != dt:
            vw = 1 if v.dtype == np.bool_ else v.dtype.itemsize * 8
            if v.dtype.kind in "iu" and vw == w:
                v = v.view(dt) if v.ndim else v.astype(dt)
            elif v.dtype.kind in "iu" and 1 < vw < w and widen:
                v = extend(v.astype(DTYPES[vw]), w, signed)
            else:
                raise PtxError(f"{where}: cannot write a {vw}-bit result to {w}-bit register {name}")
        if v.shape != ctx.shape:
            v = np.full(ctx.shape, v, dt) if v.ndim == 0 else np.array(np.broadcast_to(v, ctx.shape))
        if mask is None:
            regs[name] = v
        else:
            if old is None:
                old = np.zeros(ctx.shape, dt)
            elif old.dtype != dt:
                raise PtxError(f"{where}: {name} is a {old.dtype.itemsize * 8}-bit register")
            regs[name] = np.where(mask, v, old)
    return write


# --------------------------------------------------------------------------------------------
# Generic ALU instructions: OpSpec.fn on whole register arrays
# --------------------------------------------------------------------------------------------


def _counts(n) -> tuple[int, ...]:
    return (n,) if isinstance(n, int) else tuple(n)


def default_signature(spec: OpSpec, t: str | None, ndst: int, nsrc: int):
    if t is None:
        return (None,) * ndst, (None,) * nsrc
    if "." in t:
        d, s = t.split(".", 1)
        return (d,) * ndst, (s,) * nsrc
    return (t,) * ndst, (t,) * nsrc


def compile_alu(ins: Instr, dec: Decoder) -> Callable:
    """exec for an OpSpec with ``fn``: one destination slot (``d`` or ``p|q``), then sources.

    With ``spec.signature`` every operand is checked against its type's width.  Without one,
    registers reach ``fn`` as stored (``fn`` reads the width it needs) and immediates are encoded
    in the instruction's type (two-type ``'d.s'``: destinations ``d``, sources ``s``).
    """
    spec = ins.spec
    ops = list(ins.operands)
    nslots = 0 if spec.ndst == 0 else 1
    dsts = dec.flat(ops[:nslots])
    srcs = ops[nslots:]
    allowed = set(_counts(spec.nsrc))
    if ins.mods.get("boolop"):
        allowed |= {n + 1 for n in allowed}  # setp/set with .and/.or/.xor take a predicate c
    if ins.key == "cvt" and ins.type and "." in ins.type:
        d, a = ins.type.split(".", 1)
        if d.endswith("x2") and not a.endswith("x2"):
            allowed = {2}  # cvt.rn.f16x2.f32 d, a, b: two scalars packed
    if len(srcs) not in allowed:
        raise PtxError(f"{ins.text}: {spec.opcode} takes {' or '.join(map(str, sorted(allowed)))}"
                       f" source operands, got {len(srcs)}")
    if len(srcs) == 3 and ins.key in ("min", "max"):
        from warpsim.ptx.ops.floating import check_minmax3
        check_minmax3(ins.type, ins.mods, dec.arch)
    if nslots and not dsts:
        raise PtxError(f"{ins.text}: missing destination")
    maxd = max(_counts(spec.ndst)) if spec.ndst else 0
    if len(dsts) > max(maxd, 1):
        raise PtxError(f"{ins.text}: {spec.opcode} has at most {maxd} destination(s)")
    lenient = spec.signature is None
    if spec.signature is not None:
        dts, sts = spec.signature(ins.type, ins.mods)
        dts = tuple(dts) + (dts[-1],) * (len(dsts) - len(dts)) if dts else (None,) * len(dsts)
        sts = tuple(sts) + (sts[-1],) * (len(srcs) - len(sts)) if sts else (None,) * len(srcs)
    else:
        dts, sts = default_signature(spec, ins.type, len(dsts), len(srcs))
    relaxed = spec.relaxed or ins.key == "cvt"
    if lenient:
        narrow = ins.key in _SAME_WIDTH and ins.mods.get("mode") in (None, "lo", "hi") \
            and "wide" not in ins.opcode
        readers = [dec.reader(o, t, lenient=True, narrow=narrow) for o, t in zip(srcs, sts)]
        writers = [dec.writer(o, t, relaxed=relaxed, lenient=True) for o, t in zip(dsts, dts)]
    else:
        readers = [dec.reader(o, t, relaxed=relaxed) for o, t in zip(srcs, sts)]
        writers = [dec.writer(o, t, relaxed=relaxed) for o, t in zip(dsts, dts)]
    fn = spec.fn
    kw = dict(ins.mods)
    kw["type"] = ins.type
    nw = len(writers)
    if nw == 1 and writers[0] is not None and spec.specialize is not None:
        run = _specialized(spec, ins, kw, readers, writers[0])
        if run is not None:
            return run

    if nw == 1 and writers[0] is not None:
        w0 = writers[0]

        def run1(ctx, mask):
            out = fn([r(ctx) for r in readers], **kw)
            if isinstance(out, tuple):
                out = out[0]
            w0(ctx, out, mask)
        return run1

    def run(ctx, mask):
        out = fn([r(ctx) for r in readers], **kw)
        if not isinstance(out, tuple):
            out = (out,)
        if len(out) < nw:
            raise PtxError(f"{ins.text}: {spec.opcode} produces {len(out)} result(s), "
                           f"{nw} destinations given")
        for w, v in zip(writers, out):
            if w is not None:
                w(ctx, v, mask)
    return run


def _specialized(spec: OpSpec, ins: Instr, kw: dict, readers: list, w0: Callable) -> Callable | None:
    """exec through ``spec.specialize``'s function bound to this instruction's qualifiers
    (None if the family has no fast path for them)."""
    fn = spec.fn

    def generic(*srcs):
        out = fn(list(srcs), **kw)
        return out[0] if isinstance(out, tuple) else out

    f = spec.specialize(ins.type, ins.mods, len(readers), generic)
    if f is None:
        return None
    if len(readers) == 1:
        r0, = readers

        def run1(ctx, mask):
            w0(ctx, f(r0(ctx)), mask)
        return run1
    if len(readers) == 2:
        r0, r1 = readers

        def run2(ctx, mask):
            w0(ctx, f(r0(ctx), r1(ctx)), mask)
        return run2
    if len(readers) == 3:
        r0, r1, r2 = readers

        def run3(ctx, mask):
            w0(ctx, f(r0(ctx), r1(ctx), r2(ctx)), mask)
        return run3

    def run(ctx, mask):
        w0(ctx, f(*[r(ctx) for r in readers]), mask)
    return run


# --------------------------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------------------------


class Site(str):
    """Where a statement stands, as error messages quote it ('line 12: add.u32 ...'), with its
    PTX ``line`` (None if unknown) and ``text`` as attributes for the code that reads them."""

    line: int | None
    text: str

    @classmethod
    def of(cls, stmt: Statement) -> "Site":
        site = cls(f"line {stmt.line}: {stmt.text}" if stmt.line else stmt.text)
        site.line, site.text = stmt.line or None, stmt.text
        return site

    @classmethod
    def of_instr(cls, ins: "Instr") -> "Site":
        site = cls(f"line {ins.line}: {ins.text}" if ins.line else ins.text)
        site.line, site.text = ins.line or None, ins.text
        return site


def decode_statement(stmt: Statement, dec: Decoder) -> Instr:
    """The executable :class:`Instr` of ``stmt``; errors quote a long statement shortened."""
    try:
        return _decode_statement(stmt, dec)
    except WarpsimError as e:
        if e.instruction is None:
            e.at(instruction=stmt.text, line=stmt.line or None)
        raise


_SM_RE = re.compile(r"sm_(\d+)")


def _check_floor(spec: OpSpec, key: str, dec: Decoder) -> None:
    """Refuse an instruction older than its first target (``spec.min_sm``) or PTX ISA version
    (``spec.min_ptx``, checked where the module's ``.version`` is known), as ptxas does."""
    m = _SM_RE.match(dec.arch or "")
    sm = int(m.group(1)) if m else None
    if sm is not None and sm < spec.min_sm:
        err = TargetError(f"{dec.where}: {key} needs sm_{spec.min_sm} or newer; the target is "
                          f"{dec.arch} (ptxas: not supported on .target)")
    elif dec.version is not None and tuple(dec.version) < tuple(spec.min_ptx):
        err = TargetError(f"{dec.where}: {key} needs PTX ISA {spec.min_ptx[0]}.{spec.min_ptx[1]}; "
                          f"the module is .version {dec.version[0]}.{dec.version[1]} "
                          f"(ptxas: requires a newer .version)")
    else:
        return
    err.opcode, err.arch, err.min_sm = key, dec.arch, spec.min_sm
    err.version, err.min_ptx = (tuple(dec.version) if dec.version else None), tuple(spec.min_ptx)
    raise err


def _decode_statement(stmt: Statement, dec: Decoder) -> Instr:
    key, specs, words = registry.lookup(stmt.opcode)
    if stmt.error:
        raise PtxError(stmt.error).at(instruction=stmt.text, line=stmt.line or None)
    dec.where = Site.of(stmt)
    for sp in specs[:1] if len(specs) == 1 else ():
        _check_floor(sp, key, dec)
    if len(specs) == 1 and specs[0].compile is not None:
        ins = Instr(stmt, key, specs[0], words)
        check_operand_widths(ins, dec.reg_width, dec.where)
        ins.exec = specs[0].compile(ins, dec)
        return ins
    spec = specs[0]
    if len(specs) > 1:  # the row whose types hold the written type
        spec = next((sp for sp in specs if any(w in sp.types for w in words)
                     or len(words) >= 2 and ".".join(words[-2:]) in sp.types), specs[0])
        if not any(w in spec.types for w in words) and not (
                len(words) >= 2 and ".".join(words[-2:]) in spec.types):
            types = sorted({t for sp in specs for t in sp.types})
            raise PtxError(f"'{stmt.text}': {key} needs a type, one of "
                           f"{', '.join('.' + t for t in types)}")
    if len(specs) > 1:
        _check_floor(spec, key, dec)
    ins = Instr(stmt, key, spec, words)
    try:
        ins.type, ins.mods = decode_qualifiers(spec, words, stmt.text)
    except PtxError as e:
        raise e.at(instruction=stmt.text, line=stmt.line or None) from None
    check_operand_widths(ins, dec.reg_width, dec.where)
    ins.exec = compile_alu(ins, dec)
    return ins


def _layout_vars(body: Body, space: str, base: int = 0) -> tuple[dict, int]:
    """Addresses of the body's variables of ``space`` from ``base``; returns (symbols, bytes
    used after ``base``)."""
    out, end = {}, base
    for d in body.vars.values():
        if d.space != space:
            continue
        end = (end + d.align - 1) // d.align * d.align
        out[d.name] = (space, end)
        end += d.nbytes
    return out, end - base


class Program:
    """A decoded body: instructions, labels, variables and reconvergence points."""

    def __init__(self, body: Body, arch: str = "sm_90",
                 reg_width: Callable[[str], int | None] | None = None,
                 symbols: dict | None = None, shared_base: int = 0, contract: bool = False,
                 version: tuple[int, int] | None = None) -> None:
        """``symbols``: names defined outside the body (a module's variables, kernel
        parameters): name -> (state space, address).  ``contract``: fuse the mul + add/sub
        pairs ptxas contracts into one FMA (:mod:`warpsim.ptx.contract`; listed in
        ``contractions``); False runs every instruction as written.  The body's own
        ``.shared`` variables are placed from ``shared_base`` (after a module's), its
        ``.local`` ones from 0; ``version``: the module's ``.version`` (instructions newer than
        it are refused; None: not checked);
        ``shared_bytes``/``local_bytes`` are the ends of those layouts."""
        self.body = body
        self.arch = arch
        shared, self.shared_bytes = _layout_vars(body, "shared", shared_base)
        self.shared_bytes += shared_base
        local, self.local_bytes = _layout_vars(body, "local")
        self.symbols = {**(symbols or {}), **shared, **local}

        def width(name: str) -> int | None:
            t = body.reg_type(name)
            if t is not None:
                return 128 if t == "b128" else TYPE_BITS[t]
            m = _RANGE_NAME_RE.fullmatch(name)
            if m and m.group(1) in body.reg_ranges and name not in body.regs:
                n = body.reg_ranges[m.group(1)][1]
                raise PtxError(f"register {name} is outside its declaration "
                               f"{m.group(1)}<{n}> ({m.group(1)}0 to {m.group(1)}{n - 1})")
            if reg_width is not None:
                return reg_width(name)
            return prefix_width(name)

        dec = Decoder(arch, width, self.symbols, body.labels, version)
        self.instrs: list[Instr] = [decode_statement(s, dec) for s in body.statements]
        n = len(self.instrs)
        for i, ins in enumerate(self.instrs):
            if ins.kind == 1:
                lab = ins.info.get("label")
                if lab not in body.labels:
                    _check_scoped_label(body, ins, lab)
                    raise PtxError(f"line {ins.line}: {ins.text}: unknown label {lab}")
                _check_label_scope(body, ins, lab, i)
                ins.target = body.labels[lab]
        _reconvergence(self.instrs, n)
        self.contractions: list = []
        if contract:
            from warpsim.ptx.contract import apply
            apply(self, dec, where=Site.of_instr)
        fuse_runs(self.instrs, body.labels.values())  # after contraction: runs of what will run

    def __len__(self) -> int:
        return len(self.instrs)


#: Families whose every source operand has the instruction type's width (a wider register
#: is refused there, as ptxas does; ld/st/cvt and .wide forms take other widths).
_SAME_WIDTH = frozenset({"add", "sub", "mul", "mad", "min", "max", "and", "or", "xor", "not", "neg",
                         "abs"})

_RANGE_NAME_RE = re.compile(r"(.*?)(\d+)")


def _reconvergence(instrs: list[Instr], n: int) -> None:
    """Set ``rpc`` of every conditional branch: the first instruction of the immediate
    post-dominator of its basic block (n = the end of the program)."""
    if not any(i.kind == 1 and i.guard is not None for i in instrs):
        return
    leaders = {0}
    for pc, ins in enumerate(instrs):
        if ins.kind in (1, 2):
            leaders.add(pc + 1)
        if ins.kind == 1:
            leaders.add(ins.target)
    leaders = sorted(x for x in leaders if x <= n)
    if leaders[-1] != n:
        leaders.append(n)
    block_of = {}
    starts = leaders[:-1]
    for b, s in enumerate(starts):
        for pc in range(s, leaders[b + 1]):
            block_of[pc] = b
    EXIT = len(starts)
    succ: list[set] = []
    for b, s in enumerate(starts):
        last = leaders[b + 1] - 1
        ins = instrs[last]
        nxt = block_of.get(last + 1, EXIT)
        out = set()
        if ins.kind == 1:
            out.add(block_of.get(ins.target, EXIT))
            if ins.guard is not None:
                out.add(nxt)
        elif ins.kind == 2:
            out.add(EXIT)
            if ins.guard is not None:
                out.add(nxt)
        else:
            out.add(nxt)
        succ.append(out)
    nb = EXIT + 1
    allb = frozenset(range(nb))
    pdom = [allb] * EXIT + [frozenset({EXIT})]
    changed = True
    while changed:
        changed = False
        for b in range(EXIT - 1, -1, -1):
            inter = None
            for s in succ[b]:
                inter = pdom[s] if inter is None else inter & pdom[s]
            new = frozenset({b}) | (inter or frozenset())
            if new != pdom[b]:
                pdom[b] = new
                changed = True
    for pc, ins in enumerate(instrs):
        if ins.kind == 1 and ins.guard is not None:
            b = block_of[pc]
            strict = pdom[b] - {b}
            ip = next((d for d in strict if pdom[d] == strict), EXIT)
            ins.rpc = n if ip == EXIT else starts[ip]


def fuse_runs(instrs: list[Instr], targets) -> None:
    """Mark runs of consecutive instructions that can run as one (:attr:`Instr.group`):
    today dense ``mma`` of one form with no guard, none reading what an earlier one of the run
    writes (:func:`warpsim.ptx.ops.mma.fuse`).  A run never spans a branch target (``targets``:
    label positions), so control enters it only at its head.  The machine takes a group only
    when no per-instruction hook watches the run; copies of the instructions for the
    sanitizer or a trace drop their groups (their ``exec`` is wrapped one by one)."""
    from warpsim.ptx.ops.mma import fusable, fuse

    starts = set(targets)
    n = len(instrs)
    i = 0
    while i < n:
        f = fusable(instrs[i])
        if f is None:
            i += 1
            continue
        written = set(f.writes)
        j = i + 1
        while j < n and j not in starts:
            g = fusable(instrs[j])
            if g is None or g.key != f.key or written.intersection(g.reads):
                break
            written.update(g.writes)
            j += 1
        if j - i > 1:
            instrs[i].group = (j - i, fuse(instrs[i:j]))
        i = j


_PREFIX_RE = re.compile(r"%(rd|rs|fd|r|f|h|p)(\d+)")
_PREFIX_BITS = {"r": 32, "f": 32, "rd": 64, "fd": 64, "h": 16, "rs": 16, "p": 1}


def prefix_width(name: str) -> int | None:
    """Width implied by the conventional register names (%r, %rd, %f, %fd, %h, %rs, %p)."""
    m = _PREFIX_RE.fullmatch(name)
    return _PREFIX_BITS[m.group(1)] if m else None


def _check_label_scope(body: Body, ins, lab: str, i: int) -> None:
    """A branch reaches only labels of its own ``{ }`` scope or an enclosing one (ptxas:
    "Unknown symbol" for a label inside a scope the branch is not in)."""
    where = body.label_scopes.get(lab)
    if where is None or not body.statement_scopes:
        return
    lscope, lline = where
    if not body.encloses(lscope, body.statement_scopes[i]):
        raise PtxError(f"line {ins.line}: {ins.text}: label {lab} (line {lline}) is inside a "
                       "{ } scope this branch is not in; a label is visible only within its "
                       "scope (ptxas: unknown symbol)").at(instruction=ins.text, line=ins.line)


def _check_scoped_label(body: Body, ins, lab: str) -> None:
    """A kernel's nested scopes are renamed apart before parsing (``lab`` inside a scope
    becomes ``lab$l<k>``): a branch from outside names the bare label."""
    for name, (_, lline) in body.label_scopes.items():
        if name.startswith(lab + "$l") and name[len(lab) + 2:].isdigit():
            raise PtxError(f"line {ins.line}: {ins.text}: label {lab} (line {lline}) is inside a "
                           "{ } scope this branch is not in; a label is visible only within its "
                           "scope (ptxas: unknown symbol)").at(instruction=ins.text, line=ins.line)


@lru_cache(maxsize=256)
def compile_body(text: str, arch: str = "sm_90") -> Program:
    """Parse and decode ``text`` once (cached by text and target)."""
    return Program(parse_body(text), arch)
