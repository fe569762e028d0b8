"""Register words <-> matrices, vectorized over any number of leading batch dimensions.

``unpack_bits`` / ``pack_bits`` move raw element codes between a warp's registers
(``(..., 32, nregs)``: lane, register) and the operand matrix (``(..., rows, cols)``; for
m8n8k4 .f16 ``(..., 4, rows, cols)``, one matrix per product).  ``unpack`` / ``pack`` add the
element format (``warpsim.facts.formats``).  The fragment layout and the packing rule come from
:mod:`warpsim.tensorcore.layouts`; here they are turned, once per (instruction, operand), into flat gather
indices and shift counts, so every call is one gather plus one shift/mask (unpack) or one gather,
one shift and one OR-reduction (pack).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from warpsim.errors import ShapeError
from warpsim.facts.isa import Instruction
from warpsim.tensorcore.layouts import (
    _args, _layout, _register_map, code_bits, product_of_lane)
from warpsim._util.arrays import as_array, as_uint
from warpsim._util.frozen import readonly

__all__ = ["as_array", "as_uint", "code_dtype", "matrix_shape", "pack", "pack_bits", "register_dtype", "unpack",
           "unpack_bits"]


@dataclass(frozen=True)
class _Tables:
    nregs: int
    epr: int
    reg_dtype: np.dtype
    code_dtype: np.dtype
    mask: int
    matrix_shape: tuple[int, ...]  # (rows, cols) or (4, rows, cols)
    # unpack: for each matrix position (C order), the flat word index lane*nregs+reg and the shift
    src_word: np.ndarray
    src_shift: np.ndarray
    # pack: for each (position in register, lane, register), the flat matrix position and shift
    dst_pos: np.ndarray
    dst_shift: np.ndarray


def _smallest_uint(bits: int) -> np.dtype:
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if bits <= np.iinfo(dt).bits:
            return np.dtype(dt)
    raise AssertionError(bits)


@lru_cache(maxsize=None)
def _tables(instr: Instruction, operand: str) -> _Tables:
    rows, cols = instr.matrix_shape(operand)
    nprod = 4 if instr.quadpair else 1
    epl = instr.elements_per_lane(operand)
    epr = instr.elements_per_register(operand)
    nregs = instr.regs[operand]
    lay = _layout(instr, operand)
    regmap = _register_map(instr, operand)
    width = code_bits(instr, operand)
    reg_dtype = np.dtype(np.uint64) if instr.register_bits(operand) == 64 else np.dtype(np.uint32)

    lane = np.arange(32, dtype=np.int64)[:, None]
    pos = (product_of_lane(instr)[:, None] * rows + lay[..., 0]) * cols + lay[..., 1]  # (32, epl)
    word = lane * nregs + regmap[..., 0]
    shift = regmap[..., 1]

    n = nprod * rows * cols
    src_word = np.empty(n, dtype=np.intp)
    src_shift = np.empty(n, dtype=np.int64)
    src_word[pos.ravel()] = word.ravel()
    src_shift[pos.ravel()] = shift.ravel()

    # (32, epl) -> (epr, 32, nregs): element i = reg * epr + position
    perm = lambda a: a.reshape(32, nregs, epr).transpose(2, 0, 1).ravel()  # noqa: E731

    return _Tables(
        nregs=nregs,
        epr=epr,
        reg_dtype=reg_dtype,
        code_dtype=_smallest_uint(width),
        mask=(1 << width) - 1,
        matrix_shape=((nprod,) if nprod > 1 else ()) + (rows, cols),
        src_word=readonly(src_word),
        src_shift=readonly(src_shift.astype(reg_dtype)),
        dst_pos=readonly(perm(pos).astype(np.intp)),
        dst_shift=readonly(perm(shift).astype(reg_dtype).reshape(epr, 32 * nregs)),
    )


_LITTLE = sys.byteorder == "little"


@dataclass(frozen=True)
class BatchLastCodec:
    """Moves element codes between batch-last register words (nregs, 32, n) and the engine's
    batch-last element order: A as (K, M, n), B as (K, N, n), C and D as (M, N, n).
    Inputs are trusted (no checks).  Not for m8n8k4 .f16 (four products per warp)."""

    shape: tuple[int, ...]
    nregs: int
    epr: int
    reg_dtype: np.dtype
    code_dtype: np.dtype
    mask: int
    row: np.ndarray  # per element: reg * 32 + lane
    slot: np.ndarray  # per element: which slot of its register
    width: int  # bits per slot when codes fill their slots, else 0 (shift and mask instead)
    shift: np.ndarray
    scatter_index: np.ndarray  # (epr, nregs * 32): element filling each slot of each word

    def gather(self, words: np.ndarray) -> np.ndarray:
        """Words (nregs, 32, n) -> codes in batch-last element order."""
        n = words.shape[-1]
        flat = np.ascontiguousarray(words).reshape(self.nregs * 32, n)
        if self.epr == 1 and self.width:
            codes = flat[self.row]
        elif self.width in (8, 16) and _LITTLE:  # elements fill their slots: a narrower view
            dt = np.uint8 if self.width == 8 else np.uint16
            codes = flat.view(dt).reshape(self.nregs * 32, n, self.epr)[self.row, :, self.slot]
        else:
            codes = flat[self.row] >> self.shift[:, None]
            codes &= self.reg_dtype.type(self.mask)
        return codes.astype(self.code_dtype, copy=False).reshape(self.shape + (n,))

    def scatter(self, codes: np.ndarray) -> np.ndarray:
        """Codes in batch-last element order -> words (nregs, 32, n); codes must fit."""
        n = codes.shape[-1]
        flat = codes.reshape(-1, n)
        if self.epr == 1:
            words = flat.astype(self.reg_dtype, copy=False)[self.scatter_index[0]]
        else:
            step = self.reg_dtype.itemsize * 8 // self.epr
            words = flat[self.scatter_index[0]].astype(self.reg_dtype)
            for s in range(1, self.epr):
                words |= flat[self.scatter_index[s]].astype(self.reg_dtype) << self.reg_dtype.type(s * step)
        return words.reshape(self.nregs, 32, n)


@lru_cache(maxsize=None)
def batch_last_codec(instr: Instruction, operand: str) -> BatchLastCodec:
    """The :class:`BatchLastCodec` of one operand of a decoded instruction."""
    t = _tables(instr, operand)
    rows, cols = t.matrix_shape
    order = np.arange(rows * cols).reshape(rows, cols)
    shape = (rows, cols)
    if operand == "a":  # A is kept k-major: (K, M, n)
        order, shape = order.T, (cols, rows)
    order = order.ravel()
    lane, reg = np.divmod(t.src_word[order], t.nregs)
    row = reg * 32 + lane
    shift = t.src_shift[order].astype(np.int64)
    bits = t.reg_dtype.itemsize * 8
    width = bits // t.epr if t.mask == (1 << (bits // t.epr)) - 1 else 0
    slot = shift // (bits // t.epr)
    scatter = np.zeros((t.epr, t.nregs * 32), np.intp)
    scatter[slot, row] = np.arange(order.size)
    return BatchLastCodec(shape, t.nregs, t.epr, t.reg_dtype, t.code_dtype, t.mask, readonly(row),
                          readonly(slot), width, readonly(shift.astype(t.reg_dtype)),
                          readonly(scatter))


def matrix_shape(instr: Instruction | str, operand: str) -> tuple[int, ...]:
    """Trailing shape of the matrix side: (rows, cols), or (4, rows, cols) for m8n8k4 .f16."""
    return _tables(*_args(instr, operand)).matrix_shape


def register_dtype(instr: Instruction | str, operand: str) -> np.dtype:
    """uint64 for .f64 operands, else uint32."""
    return _tables(*_args(instr, operand)).reg_dtype


def code_dtype(instr: Instruction | str, operand: str) -> np.dtype:
    """The smallest unsigned dtype holding one element code of the operand."""
    return _tables(*_args(instr, operand)).code_dtype


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------








def unpack_bits(instr: Instruction | str, operand: str, regs: object) -> np.ndarray:
    """Register words ``(..., 32, nregs)`` -> element codes ``(..., rows, cols)``.

    For m8n8k4 .f16 the result is ``(..., 4, rows, cols)`` (one matrix per product).  Words are
    uint32 (uint64 for .f64 operands); any integer array-like within range is accepted.  Codes come
    back in the smallest unsigned dtype holding the code width (:func:`code_dtype`); container
    padding bits are dropped.
    """
    instr, operand = _args(instr, operand)
    t = _tables(instr, operand)
    arr = as_array(regs, f"{operand!r} register words")
    if arr.ndim < 2 or arr.shape[-2:] != (32, t.nregs):
        raise ShapeError(
            f"{instr} operand {operand!r}: expected register words of shape (..., 32, {t.nregs}) "
            f"(lanes, registers), got {arr.shape}"
        )
    words = as_uint(arr, f"{operand!r} register words", t.reg_dtype.itemsize * 8, t.reg_dtype)
    batch = words.shape[:-2]
    flat = words.reshape(batch + (32 * t.nregs,))
    vals = np.take(flat, t.src_word, axis=-1)
    vals >>= t.src_shift
    vals &= t.reg_dtype.type(t.mask)
    return vals.astype(t.code_dtype, copy=False).reshape(batch + t.matrix_shape)


def pack_bits(instr: Instruction | str, operand: str, codes: object) -> np.ndarray:
    """Element codes ``(..., rows, cols)`` (``(..., 4, rows, cols)`` for m8n8k4 .f16) -> words.

    Returns ``(..., 32, nregs)`` uint32 (uint64 for .f64 operands) with all padding bits zero.
    Codes must be raw bit patterns: integers in ``[0, 2**code_bits)``.
    """
    instr, operand = _args(instr, operand)
    t = _tables(instr, operand)
    arr = as_array(codes, f"{operand!r} element codes")
    nd = len(t.matrix_shape)
    if arr.ndim < nd or arr.shape[arr.ndim - nd:] != t.matrix_shape:
        raise ShapeError(
            f"{instr} operand {operand!r}: expected codes of shape (..., "
            f"{', '.join(map(str, t.matrix_shape))}), got {arr.shape}"
        )
    width = code_bits(instr, operand)
    c = as_uint(arr, f"{operand!r} element codes", width, t.reg_dtype)
    batch = c.shape[: c.ndim - nd]
    flat = c.reshape(batch + (int(np.prod(t.matrix_shape)),))
    frag = np.take(flat, t.dst_pos, axis=-1)  # a new array: safe to shift in place
    frag = frag.reshape(batch + (t.epr, 32 * t.nregs))
    frag <<= t.dst_shift
    # OR the epr slots of each word together: log2(epr) halvings (the element bits are disjoint).
    while frag.shape[-2] > 1:
        half = frag.shape[-2] // 2
        frag = frag[..., :half, :] | frag[..., half:, :]
    return frag.reshape(batch + (32, t.nregs))


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def pack(instr: Instruction | str, operand: str, matrix: object, *, strict: bool = False) -> np.ndarray:
    """Values ``(..., rows, cols)`` -> register words: ``formats.encode`` then :func:`pack_bits`.

    Values are rounded to the element type, to nearest with ties to even.  Beyond the largest
    finite value, types with infinities (f64, f32, tf32, f16, bf16, e5m2) overflow to +-Inf
    (IEEE); types without (e4m3, e3m2, e2m3, e2m1, ue4m3, ue8m0) saturate to +-max finite, as
    ``cvt.rn.satfinite`` does (PTX converts to these types only with ``.satfinite``).  Values
    that merely round down to the largest finite value (e4m3 449..464 -> 448) are rounded, not
    saturated.  Integer types round and clamp.  ``strict=True`` raises
    :class:`~warpsim.errors.FormatError` for any value that would change (rounded, saturated,
    overflowed or clamped), naming it.
    """
    from warpsim.facts import formats

    instr, operand = _args(instr, operand)
    t = _tables(instr, operand)
    arr = as_array(matrix, f"the {operand!r} matrix")
    nd = len(t.matrix_shape)
    if arr.ndim < nd or arr.shape[arr.ndim - nd:] != t.matrix_shape:
        raise ShapeError(
            f"{instr} operand {operand!r}: expected a matrix of shape (..., "
            f"{', '.join(map(str, t.matrix_shape))}), got {arr.shape}"
        )
    codes = formats.encode(arr, instr.type_of(operand), strict=strict)
    return pack_bits(instr, operand, codes)


def unpack(instr: Instruction | str, operand: str, regs: object) -> np.ndarray:
    """Register words -> values: :func:`unpack_bits` then ``formats.decode``.

    float64 for floating-point types, int64 for integer types (as ``formats.decode`` returns).
    """
    from warpsim.facts import formats

    instr, operand = _args(instr, operand)
    return formats.decode(unpack_bits(instr, operand, regs), instr.type_of(operand))
