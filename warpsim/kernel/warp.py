"""A warp's register file that runs ``mma.sync`` PTX text.

:class:`Warp` holds one register file per lane for a batch of warps: every register is an array
``(*batch, 32)`` (warps, lanes) of its unsigned width dtype.  Matrices go in and out through the
fragment layouts (:meth:`Warp.load` / :meth:`Warp.store`); :meth:`Warp.execute` parses
instruction text, checks the operand registers against the decoded instruction, and runs
:func:`warpsim.tensorcore.execute.mma` on the gathered words.

Register names and widths
-------------------------
PTX-style names carry their width: ``%r<N>`` and ``%f<N>`` 32-bit, ``%rd<N>`` and ``%fd<N>``
64-bit, ``%h<N>`` and ``%rs<N>`` 16-bit, ``%p<N>`` a 1-bit predicate.  Any other identifier
(``%acc0``, ``scale``) needs its width given once, by :meth:`Warp.declare` or ``bits=`` on its
first write.  Widths are 1, 8, 16, 32 or 64 bits; words are uint8/uint16/uint32/uint64 and
predicates bool.

Operand checking in :meth:`Warp.execute`
----------------------------------------
PTX registers are typed, but what mma.sync consumes is bits; warpsim does not know how a
register was declared beyond its width.  So an operand register is accepted when its *width*
matches the instruction's register width (64 bits for ``.f64`` operands, 32 otherwise) and the
vector's mixture is one ptxas takes: a ``%r`` register may hold ``.f32`` C/D elements, ``%f``
registers may hold s8/b1/fp8 words, but a vector of ``%f`` registers only is refused for
f16/bf16/tf32 A/B and f16/s32 C/D, as ptxas refuses it.  Everything else is checked: the
operand list as ptxas reads it (:func:`warpsim.tensorcore.decode.check_operands`), that every register
read exists, no register twice in D, and the block-scale selectors.  The sink ``_`` in D
discards that register's result.
Immediates may stand in A/B/C beside registers, or alone, where ptxas takes them; each becomes
the word ptxas materialises for it (:mod:`warpsim.tensorcore.immediates`): the literal's own bits,
not converted to the element type, kept to the register width.  An integer is its two's
complement (``-1`` -> ``0xFFFFFFFF``); an ``0f`` literal its 32 bits (zero-extended in a 64-bit
vector); an ``0d`` or decimal literal its binary64 bits, so in a 32-bit register the LOW word
of the double (``1.5`` -> ``0``, ``1.1`` -> ``0x9999999A``), as the H100 runs it.  Two
exceptions in C follow how ptxas compiles the form: in the f32 C of an fp8 form it lowers to
f16 MMA plus FADD (sm_90) a double rounds to binary32, and in the C of an integer form run by
the native IMMA/BMMA a float literal becomes 0.  A ``0f`` literal in a 64-bit vector of
immediates only is refused: ptxas fills the high word from whatever follows the literal in its
memory.
Scale data is a 32-bit register (braced or not) or an f32 hex-float immediate.
Selectors are immediates or 16-bit registers; a register selector is read lane by lane and
must hold one legal value in all lanes of a warp (warps of a batch may differ).

Semantics: all sources (A, B, C, scale data, guard predicate) are read before D is written, so D
may alias C.  Several instructions in one :meth:`Warp.execute` call run in order.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from typing import Iterable, Sequence

import numpy as np

from warpsim.tensorcore import blockscale
from warpsim.facts import formats
from warpsim.tensorcore.decode import SINK, check_operands, split_operands
from warpsim.errors import PtxError, RegisterError, ShapeError, WarpsimError
from warpsim.tensorcore.execute import mma, resolve
from warpsim.facts.isa import Instruction
from warpsim._util.arrays import as_array
from warpsim.tensorcore.packing import pack, unpack
from warpsim.tensorcore.immediates import c_literal_rule, vector_word

__all__ = ["RegisterError", "Warp"]

#: Width in bits of the PTX register name prefixes warpsim recognises (``%<prefix><N>``).
PREFIX_BITS = {"r": 32, "f": 32, "rd": 64, "fd": 64, "h": 16, "rs": 16, "p": 1}
WIDTHS = (1, 8, 16, 32, 64)
#: Default instruction budget of :meth:`Warp.run`: an infinite loop stops with an error.
MAX_STEPS = 1_000_000

_PREFIX_RE = re.compile(r"%(rd|rs|fd|r|f|h|p)(\d+)")
_NAME_RE = re.compile(r"%?[A-Za-z_$][\w$]*")
_DTYPES = {1: np.dtype(np.bool_), 8: np.dtype(np.uint8), 16: np.dtype(np.uint16),
           32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
_FLOATS = {16: np.dtype(np.float16), 32: np.dtype(np.float32), 64: np.dtype(np.float64)}
_OPERANDS = ("a", "b", "c", "d")


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _memory_bytes() -> int | None:
    """Physical memory of this machine in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _batch_shape(batch: object) -> tuple[int, ...]:
    """``batch`` (an int, a tuple/list of ints or a 1-D integer array) as a shape, checked
    before any allocation.

    Rejected: bools, floats, strings, negative sizes, and batches so large that a single 32-bit
    register (4 bytes x 32 lanes x warps) could not fit in this machine's memory.
    """
    dims = (batch,) if _is_int(batch) else batch
    if isinstance(dims, np.ndarray) and dims.ndim == 1 and dims.dtype.kind in "iu":
        dims = dims.tolist()
    if not isinstance(dims, (tuple, list)) or not all(_is_int(b) for b in dims):
        raise TypeError(f"batch must be an int or a tuple of ints (Python or NumPy; not bool, "
                        f"float or str), got {batch!r}")
    shape = tuple(int(b) for b in dims)
    if any(b < 0 for b in shape):
        raise ShapeError(f"batch dimensions must be non-negative, got {shape}")
    warps = math.prod(shape)
    need = warps * 32 * 4
    mem = _memory_bytes()
    if warps >= 1 << 62 or (mem is not None and need > mem):
        have = f"; this machine has {mem / 2**30:.3g} GiB" if mem is not None else ""
        raise ShapeError(f"batch {shape} is {warps} warps: one 32-bit register would need "
                         f"{need / 2**30:.4g} GiB (4 bytes x 32 lanes x {warps} warps){have}")
    return shape


def _bits_name(bits: int) -> str:
    return "pred" if bits == 1 else f"b{bits}"


class Warp:
    """Register files of a batch of warps (32 lanes each) that execute ``mma.sync`` text.

    ``Warp(arch="auto", batch=())``: ``arch`` is a target name (its legality and numerics
    model), ``"exact"`` (forms legal on any target, one exact rounding) or ``"auto"`` (each
    instruction on its :func:`warpsim.tensorcore.decode.default_arch`: sm_90 where legal, sm_120a for
    block scaling); ``batch`` is a shape (an int or a tuple of ints) of independent warps.  A
    batch too large for this machine's memory is refused here, with the size it would need, not
    at the first write.
    """

    def __init__(self, arch: str = "auto", batch: int | Sequence[int] = ()) -> None:
        if not isinstance(arch, str):
            raise TypeError(f"arch must be a target name such as 'sm_90', got {type(arch).__name__}")
        if arch not in ("exact", "auto"):
            from warpsim.tensorcore.numerics import model_for
            model_for(arch)  # unknown names -> PtxError listing the known ones
        shape = _batch_shape(batch)
        self._arch = arch
        self._batch = shape
        self._regs: dict[str, np.ndarray] = {}
        self._declared: dict[str, int] = {}

    # ---- properties ------------------------------------------------------------------------
    @property
    def arch(self) -> str:
        return self._arch

    @property
    def batch(self) -> tuple[int, ...]:
        return self._batch

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of every register array: (*batch, 32)."""
        return self._batch + (32,)

    @property
    def registers(self) -> dict[str, int]:
        """The registers written so far, in creation order: {name: width in bits} (a copy)."""
        return {n: self._width_of_existing(n) for n in self._regs}

    def __contains__(self, name: object) -> bool:
        return name in self._regs

    def __len__(self) -> int:
        return len(self._regs)

    def __iter__(self):
        return iter(list(self._regs))

    def __repr__(self) -> str:
        regs = ", ".join(f"{n}: {_bits_name(b)}" for n, b in self.registers.items())
        pending = [n for n in self._declared if n not in self._regs]
        extra = f", declared={pending}" if pending else ""
        return f"Warp(arch={self._arch!r}, batch={self._batch}, registers={{{regs}}}{extra})"

    # ---- names and widths ------------------------------------------------------------------
    def _width_of_existing(self, name: str) -> int:
        arr = self._regs[name]
        return 1 if arr.dtype == np.bool_ else arr.dtype.itemsize * 8

    @staticmethod
    def _check_name(name: object) -> str:
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise RegisterError(
                f"bad register name {name!r}: expected a PTX identifier such as '%r0', '%fd3' "
                "or '%acc0'")
        return name

    def _known_width(self, name: str) -> int | None:
        """The width ``name`` has (existing, declared or by prefix), or None if unknown."""
        if name in self._regs:
            return self._width_of_existing(name)
        if name in self._declared:
            return self._declared[name]
        m = _PREFIX_RE.fullmatch(name)
        return PREFIX_BITS[m.group(1)] if m else None

    def _width(self, name: str, bits: int | None = None) -> int:
        """Width of ``name`` for a write; ``bits`` declares it (must agree with a known width)."""
        self._check_name(name)
        known = self._known_width(name)
        if bits is not None:
            bits = self._check_bits(bits)
            if known is not None and known != bits:
                raise RegisterError(f"register {name} is {known}-bit; cannot use it as {bits}-bit")
            return bits
        if known is None:
            raise RegisterError(
                f"register {name} has no known width: names %r<N>/%f<N> are 32-bit, %rd<N>/%fd<N> "
                f"64-bit, %h<N>/%rs<N> 16-bit, %p<N> predicates; declare others with "
                f"warp.declare({name!r}, bits) or pass bits= on the first write")
        return known

    @staticmethod
    def _check_bits(bits: object) -> int:
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or int(bits) not in WIDTHS:
            raise ValueError(f"register width must be one of {WIDTHS} bits, got {bits!r}")
        return int(bits)

    def declare(self, name: str, bits: int) -> None:
        """Give register ``name`` a width (1, 8, 16, 32 or 64 bits) before its first write."""
        self._check_name(name)
        bits = self._check_bits(bits)
        known = self._known_width(name)
        if known is not None and known != bits:
            raise RegisterError(f"register {name} is already {known}-bit; cannot declare it {bits}-bit")
        self._declared[name] = bits

    def _missing(self, name: str, what: str = "") -> RegisterError:
        close = difflib.get_close_matches(name, list(self._regs), n=5, cutoff=0.5)
        where = f" ({what})" if what else ""
        if close:
            hint = "; similar registers: " + ", ".join(close)
        elif self._regs:
            names = list(self._regs)
            hint = "; registers: " + ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
        else:
            hint = "; no registers have been written yet"
        return RegisterError(f"register {name}{where} has not been written{hint}")

    # ---- raw reads and writes --------------------------------------------------------------
    def _get(self, name: str, what: str = "") -> np.ndarray:
        if not isinstance(name, str):
            raise RegisterError(f"register names are strings, got {name!r}")
        try:
            return self._regs[name]
        except KeyError:
            raise self._missing(name, what) from None

    def read(self, name: str) -> np.ndarray:
        """A copy of register ``name``: (*batch, 32) of its unsigned dtype (bool for predicates)."""
        return self._get(name).copy()

    __getitem__ = read

    def _words(self, value: object, bits: int, name: str) -> np.ndarray:
        """``value`` as a new (*batch, 32) array of the width's dtype, range-checked."""
        # Python lists go through exact ints: NumPy would turn [2**64 - 1, -1] into float64.
        arr = np.array(value, dtype=object) if isinstance(value, (list, tuple)) else np.asarray(value)
        dt = _DTYPES[bits]
        if arr.dtype == object:
            flat = arr.ravel().tolist()
            if any(isinstance(v, (list, tuple, np.ndarray)) for v in flat):
                raise ShapeError(f"values for {name} must be a rectangular array: got nested "
                                 "sequences of unequal lengths")
            if not all(isinstance(v, (int, np.integer, bool, np.bool_)) for v in flat):
                raise TypeError(f"values for {name} must be integers (use write_float for floats)")
            ints = [int(v) for v in flat]
            self._check_range(min(ints, default=0), max(ints, default=0), bits, name)
            mask = (1 << bits) - 1
            arr = np.array([v & mask for v in ints], dtype=dt).reshape(arr.shape)
        elif arr.dtype.kind == "b":
            if bits != 1:
                raise TypeError(f"boolean values only fit predicate registers; {name} is {bits}-bit")
        elif arr.dtype.kind in "iu":
            if arr.size:
                self._check_range(int(arr.min()), int(arr.max()), bits, name)
            arr = (arr != 0) if bits == 1 else arr.astype(dt, copy=False)  # negatives wrap
        elif arr.dtype.kind in "fc":
            raise TypeError(f"values for {name} have dtype {arr.dtype}: registers take integer "
                            "bit patterns; use warp.write_float for floating-point values")
        else:
            raise TypeError(f"values for {name} must be integers, got dtype {arr.dtype}")
        try:
            out = np.broadcast_to(arr, self.shape)
        except ValueError:
            raise ShapeError(f"value of shape {arr.shape} for {name} does not broadcast to the "
                             f"register shape {self.shape} (*batch, lanes)") from None
        return np.array(out, dtype=dt, copy=True)

    @staticmethod
    def _check_range(lo: int, hi: int, bits: int, name: str) -> None:
        low = 0 if bits == 1 else -(1 << (bits - 1))
        if lo < low or hi >= (1 << bits):
            rng = "0 or 1" if bits == 1 else f"[{low}, 2**{bits})"
            raise ShapeError(f"values for {bits}-bit register {name} must lie in {rng}; "
                             f"got values in [{lo}, {hi}]")

    def write(self, name: str, value: object, *, bits: int | None = None) -> None:
        """Set register ``name`` (created if new) to ``value`` broadcast to (*batch, 32).

        Values are integer bit patterns in ``[-2**(bits-1), 2**bits)`` (negatives are stored as
        two's complement; predicates take 0/1 or bools).  The value is copied.
        """
        w = self._width(name, bits)
        self._put(name, self._words(value, w, name), w)

    __setitem__ = write

    def _put(self, name: str, words: np.ndarray, bits: int) -> None:
        assert words.shape == self.shape and words.dtype == _DTYPES[bits]
        self._regs[name] = words

    def read_float(self, name: str) -> np.ndarray:
        """Register bits viewed as float16/float32/float64 (by width; bit-exact, NaNs kept)."""
        arr = self._get(name)
        bits = self._width_of_existing(name)
        if bits not in _FLOATS:
            raise RegisterError(f"register {name} is {bits}-bit: no float view (16, 32 or 64 bits)")
        return arr.view(_FLOATS[bits]).copy()

    def write_float(self, name: str, values: object, *, bits: int | None = None) -> None:
        """Store floating-point ``values`` as the bits of a 16/32/64-bit register.

        Values already of the register's float dtype are stored bit-exactly (NaN payloads
        kept); others are converted with NumPy's cast (round to nearest even).
        """
        w = self._width(name, bits)
        if w not in _FLOATS:
            raise RegisterError(f"register {name} is {w}-bit: write_float needs 16, 32 or 64 bits")
        ft = _FLOATS[w]
        arr = as_array(values, f"values for {name}")
        if arr.dtype != ft:
            if arr.dtype.kind not in "fiub":
                raise TypeError(f"write_float needs real numbers for {name}, got dtype {arr.dtype}")
            arr = arr.astype(ft)
        try:
            out = np.broadcast_to(arr, self.shape)
        except ValueError:
            raise ShapeError(f"value of shape {arr.shape} for {name} does not broadcast to the "
                             f"register shape {self.shape} (*batch, lanes)") from None
        self._put(name, np.array(out, copy=True).view(_DTYPES[w]), w)

    # ---- matrices --------------------------------------------------------------------------
    def _instr(self, instr: str | Instruction) -> Instruction:
        return resolve(instr, self._arch)

    @staticmethod
    def _operand(operand: object) -> str:
        op = operand.lower() if isinstance(operand, str) else operand
        if op not in _OPERANDS:
            raise ValueError(f"operand must be one of 'a', 'b', 'c', 'd', got {operand!r}")
        return op

    @staticmethod
    def _names(regs: object) -> list[str]:
        if isinstance(regs, str):
            inner = regs.strip()
            if inner.startswith("{") and inner.endswith("}"):
                inner = inner[1:-1]
            return [t.strip() for t in inner.split(",")]
        if isinstance(regs, Iterable):
            return list(regs)
        raise TypeError(f"regs must be a list of register names or a '{{...}}' string, got {regs!r}")

    def _fragment_names(self, ins: Instruction, op: str, regs: object, *, writing: bool,
                        label: str | None = None) -> list[str]:
        """Check a register list for operand ``op``: count, names, widths (and existence)."""
        names = self._names(regs)
        label = label or f"operand {op.upper()}"
        want = ins.regs[op]
        rbits = ins.register_bits(op)
        if len(names) != want:
            raise PtxError(f"{label} of {ins.text} needs {want} {rbits}-bit registers per lane, "
                           f"got {len(names)}: {{{', '.join(map(str, names))}}}")
        for n in names:
            if not isinstance(n, str) or not (_NAME_RE.fullmatch(n) or writing and n == SINK):
                raise PtxError(f"{label} of {ins.text} must list registers, got {n!r}")
        if writing:
            names_ = names
            names = [n for n in names if n != SINK]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise PtxError(f"{label} of {ins.text} names register(s) {', '.join(dup)} more "
                               "than once; each destination register must be distinct")
        for n in names:
            if writing:
                w = self._known_width(n)
                if w is None:
                    self._width(n)  # raises the 'no known width' RegisterError
            else:
                if n not in self._regs:
                    raise self._missing(n, f"{label} of {ins.text}")
                w = self._width_of_existing(n)
            if w != rbits:
                raise PtxError(
                    f"{label} of {ins.text} needs {rbits}-bit registers "
                    f"({'%fd<N> or %rd<N> for .f64' if rbits == 64 else '%r<N> or %f<N>'}); "
                    f"{n} is {w}-bit")
        return names_ if writing else names

    def _gather(self, names: Sequence[str]) -> np.ndarray:
        return np.stack([self._regs[n] for n in names], axis=-1)  # (*batch, 32, n): a copy

    def load(self, instr: str | Instruction, operand: str, matrix: object, regs: object, *,
             strict: bool = False) -> None:
        """Pack ``matrix`` (values; ``(..., rows, cols)``, m8n8k4 .f16: ``(..., 4, rows, cols)``)
        into the registers ``regs`` (one name per fragment register) of every warp.

        Leading dimensions of ``matrix`` broadcast against the warp batch.  Values the element
        type cannot hold are rounded (``strict=True``: rejected), as :func:`warpsim.pack` does.
        """
        ins = self._instr(instr)
        op = self._operand(operand)
        names = self._fragment_names(ins, op, regs, writing=True)
        words = pack(ins, op, matrix, strict=strict)
        try:
            words = np.broadcast_to(words, self._batch + words.shape[-2:])
        except ValueError:
            raise ShapeError(f"batch dimensions {words.shape[:-2]} of the matrix do not broadcast "
                             f"to the warp batch {self._batch}") from None
        for i, n in enumerate(names):
            self._put(n, np.array(words[..., i], copy=True), ins.register_bits(op))

    def store(self, instr: str | Instruction, operand: str, regs: object) -> np.ndarray:
        """The matrix held in registers ``regs`` as operand ``operand`` (:func:`warpsim.unpack`):
        ``(*batch, rows, cols)`` float64 (int64 for integer types)."""
        ins = self._instr(instr)
        op = self._operand(operand)
        names = self._fragment_names(ins, op, regs, writing=False)
        return unpack(ins, op, self._gather(names))

    def load_sparse(self, instr: str | Instruction, matrix: object, regs: object, meta_reg: str, *,
                    selector: int = 0, strict: bool = False) -> None:
        """Compress a structurally sparse logical A (``(..., M, K)`` values) for ``mma.sp``: the
        kept values go to the A registers ``regs``, the metadata words to the 32-bit register
        ``meta_reg`` (lanes the selector does not choose hold 0).  See :func:`warpsim.tensorcore.sparse.compress`.
        """
        from warpsim.tensorcore.sparse import compress

        ins = self._instr(instr)
        if not ins.sparse:
            raise PtxError(f"{ins.text} is not a sparse mma.sp instruction")
        q = formats.decode(formats.encode(matrix, ins.atype, strict=strict), ins.atype)
        values, words = compress(ins, q, selector=selector)
        if self._width(meta_reg) != 32:
            raise PtxError(f"sparsity metadata needs a 32-bit register; {meta_reg} is "
                           f"{self._width(meta_reg)}-bit")
        self.load(ins, "a", values, regs, strict=strict)
        try:
            words = np.broadcast_to(words, self.shape)
        except ValueError:
            raise ShapeError(f"batch dimensions {words.shape[:-1]} of the matrix do not broadcast "
                             f"to the warp batch {self._batch}") from None
        self._put(meta_reg, np.ascontiguousarray(words, dtype=np.uint32), 32)

    def load_scales(self, instr: str | Instruction, operand: str, values: object, reg: str, *,
                    byte_id: int = 0, thread_id: int = 0) -> None:
        """Write block-scale metadata into 32-bit register ``reg``.

        ``operand``: 'scale_a' (``values`` of shape (..., M, V)) or 'scale_b' ((..., V, N)),
        scale values in the instruction's ``.stype`` (powers of two for .ue8m0).  Only the
        lanes and bytes that ``{byte_id, thread_id}`` selects are replaced; the rest of the
        register keeps its bits (zero if new), so several scale sets can share one register.
        """
        ins = self._instr(instr)
        if not ins.block_scale:
            raise PtxError(f"{ins.text} has no .block_scale, so no {operand} metadata")
        if operand not in ("scale_a", "scale_b"):
            raise ValueError(f"operand must be 'scale_a' or 'scale_b', got {operand!r}")
        w = self._width(reg)
        if w != 32:
            raise PtxError(f"scale metadata needs a 32-bit register; {reg} is {w}-bit")
        v = ins.scale_vec
        want = (ins.m, v) if operand == "scale_a" else (v, ins.n)
        codes = formats.encode(values, ins.stype)
        if codes.ndim < 2 or codes.shape[-2:] != want:
            raise ShapeError(f"{operand} values for {ins.text} must have shape (..., "
                             f"{want[0]}, {want[1]}); got {np.shape(values)}")
        words = blockscale.scatter_scales(ins, codes, operand, byte_id, thread_id)
        mask = blockscale.scatter_scales(ins, np.full(want, 0xFF), operand, byte_id, thread_id)
        try:
            words = np.broadcast_to(words, self.shape)
        except ValueError:
            raise ShapeError(f"batch dimensions {codes.shape[:-2]} of the scales do not broadcast "
                             f"to the warp batch {self._batch}") from None
        old = self._regs.get(reg)
        new = words.copy() if old is None else (old & ~mask) | words
        self._put(reg, np.ascontiguousarray(new, dtype=np.uint32), 32)

    # ---- execution -------------------------------------------------------------------------
    def execute(self, text: str) -> tuple:
        """Run PTX instructions given as text, in order, on the registers; return them decoded.

        Statements are separated by ';' or newlines (a line that does not start with an opcode
        or a guard continues the previous statement); ``//`` comments are ignored.  Any
        instruction warpsim supports runs (see docs/ptx.md): ``mma.sync`` returns its
        :class:`~warpsim.facts.isa.Instruction`, others their decoded
        :class:`~warpsim.ptx.program.Instr`.  A guard ``@%p`` / ``@!%p`` masks lanes; lanes
        where it is false keep their destination registers (new ones start at zero there).
        ``mma.sync`` is warp-collective: its guard must be uniform within each warp.  Control
        flow (labels, ``bra``, ``ret``) and declarations need :meth:`run`.

        ``mma.sync`` forms: ``[@[!]%p] mma.sync... {d}, {a}, {b}, {c}`` or the block-scale form
        ``..., {c}, scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b,
        thread-id-b}`` (see the module docstring for the operand forms accepted); sparse
        ``mma.sp`` takes ``e, f`` (metadata register, selector immediate) after ``{c}``.
        """
        if not isinstance(text, str):
            raise TypeError(f"execute takes PTX text, got {type(text).__name__}")
        out = []
        for s in _statements(text):
            body = s[s.index(" ") + 1:].lstrip() if s.startswith("@") and " " in s else s
            if body.startswith("mma"):
                out.append(self._execute_one(s))
            else:
                out.append(self._execute_ptx(s))
        return tuple(out)

    # ---- the PTX machine -------------------------------------------------------------------
    def _context(self):
        from warpsim.ptx.machine import Context
        ctx = getattr(self, "_ctx", None)
        if ctx is None or ctx.regs is not self._regs:
            ctx = Context(self._regs, self._batch, self._arch)
            self._ctx = ctx
        return ctx

    def _execute_ptx(self, stmt: str):
        from warpsim.ptx.machine import _check_aligned
        from warpsim.ptx.parser import parse_statement
        from warpsim.ptx.program import Decoder, decode_statement

        st = parse_statement(stmt)
        dec = Decoder(self._arch, self._known_width)
        ins = decode_statement(st, dec)
        if ins.kind != 0:
            raise PtxError(f"{ins.text}: control flow ({ins.key}) needs Warp.run, which runs a "
                           "body with labels and reconvergence")
        ctx = self._context()
        mask = None
        if ins.guard is not None:
            g = self._get(ins.guard[0], "guard predicate")
            if g.dtype != np.bool_:
                raise PtxError(f"guard {ins.guard[0]} must be a predicate (1-bit) register")
            mask = ~g if ins.guard[1] else g
            if mask.all():
                mask = None
            elif ins.aligned:
                _check_aligned(ins, mask)
        if mask is None or mask.any():
            try:
                with np.errstate(all="ignore"):  # as in Warp.run: Inf and NaN are results
                    ins.exec(ctx, mask)
            except WarpsimError as e:
                from warpsim.ptx.machine import locate
                raise locate(e, ins) from None
        ctx.executed += 1
        return ins

    def compile(self, text: str):
        """Parse and decode a PTX body once for this warp's target: a reusable
        :class:`~warpsim.ptx.program.Program` for :meth:`run` (cached by text)."""
        from warpsim.ptx.program import compile_body
        if not isinstance(text, str):
            raise TypeError(f"compile takes PTX text (a str), got {type(text).__name__}")
        return compile_body(text, self._arch)

    def run(self, ptx, *, shared: object = None, global_memory: object = None,
            specials: dict | None = None, max_steps: int = MAX_STEPS) -> int:
        """Run a PTX body (text or :meth:`compile`'s Program) with control flow; return the
        number of instructions executed.

        The body may declare registers (``.reg .b32 %r<8>;``), ``.shared``/``.local``
        variables, labels, comments and ``.pragma``/debug directives; registers already in the
        warp are visible to it and it leaves its registers in the warp.  Every warp of the
        batch runs the same code with its own lanes: divergent branches, reconvergence at the
        immediate post-dominator, per-lane loop trip counts, ``ret``/``exit``.

        ``shared``: the shared memory (one copy per warp): None (zeros, sized for the body's
        ``.shared`` variables, or the previous run's), an integer byte count, a NumPy array
        (its bytes; leading dimensions equal to the batch give each warp its own contents), or
        a :class:`~warpsim.ptx.memory.FlatMemory`.  It stays in :attr:`shared` afterwards.
        ``global_memory``: a :class:`~warpsim.ptx.memory.GlobalMemory` for ``.global`` and
        generic accesses.  ``specials``: special registers (``'%tid.x'`` ...) to override.
        A bar.sync in a lone warp's CTA completes at once.

        ``max_steps``: the instruction budget of the whole run (barriers included; default
        :data:`MAX_STEPS`, one million, a few seconds of a simple loop on one warp): a body that
        has not finished within it, such as an infinite loop, stops with a WarpsimError naming
        the budget and the last instruction.
        """
        from warpsim.ptx.machine import Context, WarpState, run as run_program
        from warpsim.ptx.memory import LOCAL_WINDOW, PagedMemory
        from warpsim.ptx.program import Program

        if isinstance(max_steps, (bool, np.bool_)) or not isinstance(max_steps, (int, np.integer)):
            raise TypeError(f"max_steps must be a positive integer, got {max_steps!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps}")
        prog = ptx if isinstance(ptx, Program) else self.compile(ptx)
        if prog.arch != self._arch:
            raise PtxError(f"program was compiled for {prog.arch}; this warp runs {self._arch}")
        spaces = {"shared": self._shared_memory(shared, prog.shared_bytes)}
        if prog.local_bytes:
            spaces["local"] = PagedMemory("local", prog.local_bytes, self._batch, window=LOCAL_WINDOW)
        if global_memory is not None:
            spaces["global"] = global_memory
        ctx = Context(self._regs, self._batch, self._arch, spaces, specials)
        state = WarpState.start(len(prog))
        while True:  # a barrier stops run_program; the budget spans all of the run
            run_program(prog, ctx, state, max_steps=int(max_steps) - ctx.executed)
            if state.status != "barrier":
                break
        return ctx.executed

    def explain_packing(self, instr: str | Instruction, operand: str, regs: object,
                        matrix: object, **kw):
        """The packing doctor on registers a routine wrote: do ``regs`` (names, one per fragment
        register) hold ``matrix`` in the layout operand ``operand`` of ``instr`` expects?
        Returns :func:`warpsim.explain_packing`'s report (``.ok``, ``str(report)``)."""
        from warpsim.tensorcore.doctor import explain_packing
        ins = self._instr(instr)
        op = self._operand(operand)
        names = self._fragment_names(ins, op, regs, writing=False)
        words = self._gather(names).reshape((-1, 32, len(names)))
        return explain_packing(ins, op, words, matrix, **kw)

    @property
    def shared(self):
        """The shared memory of the last :meth:`run` (a FlatMemory: ``.read(dtype)``,
        ``.fill(array)``), or None."""
        return getattr(self, "_shared", None)

    def _shared_memory(self, shared, need: int):
        from warpsim.ptx.memory import MAX_SHARED_BYTES, SHARED_WINDOW, FlatMemory

        if isinstance(shared, (int, np.integer)) and not isinstance(shared, (bool, np.bool_)) \
                and not 0 <= shared <= MAX_SHARED_BYTES:
            raise ShapeError(f"shared must be a byte count from 0 to {MAX_SHARED_BYTES} (the most "
                             f"shared memory a CTA can have), got {shared}")
        if need > MAX_SHARED_BYTES:
            raise ShapeError(f"the body declares {need} bytes of .shared variables; a CTA has at most "
                             f"{MAX_SHARED_BYTES}")
        if isinstance(shared, FlatMemory):
            if shared.size < need:
                raise ShapeError(f"shared memory of {shared.size} bytes is smaller than the "
                                 f"{need} bytes the body declares")
            self._shared = shared
            return shared
        if shared is None:
            old = getattr(self, "_shared", None)
            if old is not None and old.size >= need and old.batch == self._batch:
                return old
            mem = FlatMemory("shared", need, self._batch, window=SHARED_WINDOW)
        elif isinstance(shared, (int, np.integer)) and not isinstance(shared, bool):
            mem = FlatMemory("shared", max(int(shared), need), self._batch, window=SHARED_WINDOW)
        else:
            arr = np.asarray(shared)
            if arr.dtype == object or arr.dtype.kind not in "biuf":
                raise TypeError(f"shared must be a numeric NumPy array, a byte count or a "
                                f"FlatMemory; got {type(shared).__name__}")
            nb = len(self._batch)
            per_warp = nb and arr.ndim > nb and arr.shape[:nb] == self._batch
            raw_n = (arr[(0,) * nb].nbytes if per_warp else arr.nbytes)
            if raw_n > MAX_SHARED_BYTES:
                raise ShapeError(f"shared holds {raw_n} bytes per warp; a CTA has at most {MAX_SHARED_BYTES}")
            mem = FlatMemory("shared", max(raw_n, need), self._batch, window=SHARED_WINDOW)
            mem.fill(arr, per_warp=bool(per_warp))
        self._shared = mem
        return mem

    def _execute_one(self, stmt: str) -> Instruction:
        guard = None
        s = stmt
        if s.startswith("@"):
            m = re.match(r"@\s*(!?)\s*(%?[A-Za-z_$][\w$]*)\s+", s)
            if not m:
                raise PtxError(f"bad guard predicate in '{stmt}'")
            guard = (m.group(2), bool(m.group(1)))
            s = s[m.end():]
        opcode, groups = split_operands(s)
        ins = resolve(opcode, self._arch)
        check_operands(ins, groups, stmt)  # the operand list as ptxas reads it
        sparse_kw = {}
        if ins.sparse:  # operands e (metadata register) and f (selector) follow c
            sparse_kw = self._sparse_operands(ins, groups, stmt)
            groups = groups[:4] + groups[6:]
        dn = self._fragment_names(ins, "d", groups[0], writing=True)
        a, b, c = (self._source(ins, op, g) for op, g in zip("abc", groups[1:4]))
        kw, sel = {}, None
        if ins.block_scale:
            kw, sel = self._scale_operands(ins, groups[4:])
        active = None
        if guard is not None:
            active = self._guard(*guard)
        # Every source was read above, before D is written (D may alias C or any other source).
        d = self._mma(ins, a, b, c, {**kw, **sparse_kw}, sel)
        rbits = ins.register_bits("d")
        dt = _DTYPES[rbits]
        for i, n in enumerate(dn):
            if n == SINK:  # the sink: the result is discarded
                continue
            new = np.array(d[..., i], dtype=dt, copy=True)
            if active is not None:
                old = self._regs.get(n, np.zeros(self.shape, dt))
                new = np.where(active[..., None], new, old)
            self._put(n, new, rbits)
        return ins

    def _guard(self, name: str, negate: bool) -> np.ndarray:
        p = self._get(name, "guard predicate")
        if p.dtype != np.bool_:
            raise PtxError(f"guard {name} must be a predicate (1-bit) register; it is "
                           f"{self._width_of_existing(name)}-bit")
        if p.size and not (p == p[..., :1]).all():
            raise PtxError(f"guard {name} differs between lanes of a warp: mma.sync.aligned must "
                           "be executed by all 32 lanes or none")
        active = p[..., 0] if p.size else np.zeros(self._batch, bool)
        return ~active if negate else active

    def _sparse_operands(self, ins: Instruction, groups: list, stmt: str) -> dict:
        """metadata= and selector= of ``mma.sp`` from operands e and f.  ``check_operands`` has
        already checked their form (e one register, f a legal selector immediate); what it
        cannot see is the declared width of e."""
        e, f = groups[4], groups[5]
        if isinstance(e, list) and len(e) == 1:  # {%e}, as CUTLASS's SM120 sparse atoms write it
            e = e[0]
        words = self._get(e, "operand e (sparsity metadata)")
        w = self._width_of_existing(e)
        if w != 32:
            raise PtxError(f"operand e (sparsity metadata) of {ins.text} needs a 32-bit register; "
                           f"{e} is {w}-bit")
        return {"metadata": words.copy(), "selector": f}

    def _source(self, ins: Instruction, op: str, items: list) -> np.ndarray:
        """Words (*batch, 32, n) of source operand ``op``: registers, or immediates encoded as
        ptxas encodes them (:func:`warpsim.tensorcore.immediates.vector_word`: the literal's own
        bits, kept to the register's width)."""
        for r in items:
            if isinstance(r, str):
                self._check_source_reg(ins, op, r)
        rbits = ins.register_bits(op)
        dt = _DTYPES[rbits]
        rule = c_literal_rule(ins) if op == "c" else "bits"
        cols = [self._regs[x] if isinstance(x, str)
                else np.full(self.shape, vector_word(x, rbits, rule), dt) for x in items]
        return np.stack(cols, axis=-1)

    def _check_source_reg(self, ins: Instruction, op: str, n: str) -> None:
        label = f"operand {op.upper()}"
        if n not in self._regs:
            raise self._missing(n, f"{label} of {ins.text}")
        w = self._width_of_existing(n)
        if w != ins.register_bits(op):
            raise PtxError(f"{label} of {ins.text} needs {ins.register_bits(op)}-bit registers; "
                           f"{n} is {w}-bit")

    def _mma(self, ins: Instruction, a, b, c, kw: dict, sel) -> np.ndarray:
        """Run mma over the batch; with register selectors, once per distinct selector set."""
        if sel is None:
            d = mma(ins, a, b, c, arch=self._arch, **kw)
            return np.broadcast_to(d, self._batch + d.shape[-2:])
        out = None
        flat = sel.reshape(-1, 4)
        for combo in np.unique(flat, axis=0):  # at most 4 x 2 x 4 x 2 selector sets
            mask = (sel == combo).all(axis=-1)
            sub = {k: (v[mask] if isinstance(v, np.ndarray) and v.shape[:len(self._batch)]
                       == self._batch else v) for k, v in kw.items()}
            sub.update(byte_id_a=int(combo[0]), thread_id_a=int(combo[1]),
                       byte_id_b=int(combo[2]), thread_id_b=int(combo[3]))
            d = mma(ins, a[mask], b[mask], c[mask], arch=self._arch, **sub)
            if out is None:
                out = np.zeros(self._batch + d.shape[-2:], d.dtype)
            out[mask] = d
        return out

    def _scale_operands(self, ins: Instruction, groups: list) -> tuple[dict, np.ndarray | None]:
        """Scale words and selectors.  Register selectors are read lane by lane: every lane of
        a warp must hold the same legal value (warps may differ); returns (kwargs, per-warp
        selectors (*batch, 4) or None when all are immediates)."""
        kw = {}
        sels: list = []
        for side, data, sel in (("a", groups[0], groups[1]), ("b", groups[2], groups[3])):
            dname = f"scale-{side}-data"
            sname = f"{{byte-id-{side}, thread-id-{side}}}"
            if isinstance(data, list):  # a braced one-register vector (checked by the decoder)
                data = data[0]
            if isinstance(data, str):
                words = self._get(data, f"operand {dname}")
                w = self._width_of_existing(data)
                if w != 32:
                    raise PtxError(f"operand {dname} of {ins.text} needs a 32-bit register; "
                                   f"{data} is {w}-bit")
                words = np.broadcast_to(words, self.shape).copy()
            else:  # an f32 hex-float immediate: its bits
                words = np.full(self.shape, data.bits, np.uint32)
            kw[f"scale_{side}"] = words
            for part, x in zip(("byte-id", "thread-id"), sel):
                if isinstance(x, int):
                    sels.append(np.full(self._batch, x, np.int64))
                    continue
                v = self._get(x, f"operand {sname}")
                if self._width_of_existing(x) != 16:
                    raise PtxError(f"operand {sname} of {ins.text}: {part}-{side} register {x} "
                                   f"is {self._width_of_existing(x)}-bit; selector registers are "
                                   "16-bit")
                v = np.broadcast_to(v, self.shape).astype(np.int64)
                lanes = np.nonzero((v != v[..., :1]).any(axis=tuple(range(v.ndim - 1))))[0]
                if lanes.size:
                    raise PtxError(f"operand {sname} of {ins.text}: {part}-{side} register {x} "
                                   f"differs between lanes of a warp (lanes {lanes[:4].tolist()} "
                                   "differ from lane 0); a selector must be uniform in a warp")
                sels.append(v[..., 0])
        sel = np.stack(sels, axis=-1)  # (*batch, 4): byte-a, thread-a, byte-b, thread-b
        for combo in np.unique(sel.reshape(-1, 4), axis=0):
            ba, ta, bb, tb = map(int, combo)
            # one side at a time (0 is legal for every selector) so the error names its operand
            for side, args in (("a", (ba, ta, 0, 0)), ("b", (0, 0, bb, tb))):
                try:
                    blockscale.check_selectors(ins, *args)
                except PtxError as e:
                    raise PtxError(f"operand {{byte-id-{side}, thread-id-{side}}} of {ins.text}: "
                                   f"{e}") from None
        if all(isinstance(x, int) for x in (*groups[1], *groups[3])):
            c = sel.reshape(-1, 4)[0] if sel.size else np.zeros(4, np.int64)
            kw.update(byte_id_a=int(c[0]), thread_id_a=int(c[1]), byte_id_b=int(c[2]),
                      thread_id_b=int(c[3]))
            return kw, None
        return kw, sel


def _statements(text: str) -> list[str]:
    """Split PTX text into statements at ';' and at lines that start a new instruction."""
    lines = [ln.split("//", 1)[0] for ln in text.splitlines()]
    out: list[str] = []
    for chunk in "\n".join(lines).split(";"):
        cur: list[str] = []
        for ln in chunk.split("\n"):
            s = ln.strip()
            if not s:
                continue
            if cur and (s.startswith("@") or re.match(r"[A-Za-z_][\w]*\.", s) or s.startswith("mma")):
                out.append(" ".join(cur))
                cur = []
            cur.append(s)
        if cur:
            out.append(" ".join(cur))
    return out
