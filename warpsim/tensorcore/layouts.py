"""Fragment layouts of ``mma.sync`` operands as data.

Which lane holds which matrix element, and where inside that lane's registers its bit code sits.

How the rules are written
-------------------------
Every documented fragment layout is a *bit concatenation*: a lane's index ``l`` (5 bits) and the
index ``i`` of an element inside the lane's fragment (``log2(elements_per_lane)`` bits) are cut
into named bit fields, and the matrix row and column are each the concatenation, low bits first,
of some of those fields.  One rule is therefore two short strings (row fields, column fields);
the fields are

=======  ==============================================================================
``t``    lane bits 1:0 (PTX ``threadID_in_group``)
``g``    lane bits 4:2 (PTX ``groupID``)
``l0``   lane bit 0, ``l1`` lane bit 1
``h``    lane bit 4 (m8n8k4 .f16: "high group", lanes 16-31)
``i``    all element bits; ``i0``, ``i1``, ``i2`` single element bits
``p``    element bits below ``log2(elements_per_register)``: the position in a register
``j``    the element bits above ``p``: the register index; ``j0`` its lowest bit, ``jh`` the rest
=======  ==============================================================================

A field whose bits are beyond the fragment's element count is empty, which is how one rule covers
every shape and element width of a family (``m8n8k16``'s single A register, for example, has no
``j0`` bit, so its rows are just ``g``).  The element width enters only through
``elements_per_register`` (``Instruction.elements_per_register``: 32 / storage bits, or 1 for
``.f64`` in its 64-bit register).  Restated from the PTX ISA "Matrix Fragments for mma.mXnYkZ"
sections:

* m16n8kK and m8n8kK, A: row = ``g`` (+8 for odd registers when M = 16); column = position in the
  register, then ``t`` (which k-chunk of the block), then the register pair index (which block of
  4 * elements_per_register k).  B: row (k) = position, ``t``, register index; column = ``g``.
  C/D: row = ``g`` (+8 for elements 2 and 3); column = 2 * ``t`` + (i & 1).
* m8n8k4 with .f16 (Volta "quad pairs"): the warp runs four independent 8x8x4 products; product
  ``(lane >> 2) % 4`` is computed by lanes 4p..4p+3 (low group) and 16+4p..16+4p+3 (high group).
  Coordinates are inside the product.  With ``t = lane % 4`` and ``h = lane >= 16``:
  A .row: row = t + 4h, col = i.  A .col: row = i + 4h, col = t.
  B .row: row = t, col = i + 4h.  B .col: row = i, col = t + 4h.
  C/D .f16: row = t + 4h, col = i.
  C/D .f32: row = (lane & 1) + (i & 2) + 4h, col = (i & 4) + (lane & 2) + (i & 1).

Where the PTX text and this table disagree: the m16n8k256 A formula prints the column as
``threadID_in_group * 32 + i`` for ``i < 64``; read literally that is not a bijection (rows g+8
would never reach columns 0..31), while the m16n8k128 section and the figures use ``i & 0x1F``,
which is what the rule above gives.

Register packing: element ``i`` of a lane sits in register ``i // elements_per_register`` at bit
``(i % elements_per_register) * storage_bits`` plus the container offset: under
``.kind::f8f6f4`` / ``.kind::mxf8f6f4`` every A/B element has its own byte, ``.e3m2``/``.e2m3``
in bits 5:0 (offset 0) and ``.e2m1`` in bits 5:2 (offset 2).

All tables are computed once per (Instruction, operand) and cached; the arrays returned are
read-only for good: they are backed by immutable bytes, so ``setflags(write=True)`` fails on
them and on their ``.base`` (copy one with ``np.array`` to modify it).
"""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType
from typing import Mapping

import numpy as np

from warpsim._util.frozen import readonly
from warpsim.errors import PtxError, ShapeError
from warpsim.facts.isa import TYPE_BITS, Instruction
from warpsim.tensorcore.decode import as_instruction

__all__ = [
    "OPERANDS", "LAYOUT_RULES", "check_operand", "code_bits", "container_offset",
    "elements_of", "layout", "locate", "product_of_lane", "products", "register_map",
]

OPERANDS = ("a", "b", "c", "d")

#: (family, operand, variant) -> (row fields, column fields).  ``variant`` is the operand's
#: .row/.col layout (quad-pair A/B), its element type (quad-pair C/D), or '' (one rule for all).
LAYOUT_RULES: Mapping[tuple[str, str, str], tuple[str, str]] = MappingProxyType(
    {
        ("warp", "a", ""): ("g j0", "p t jh"),
        ("warp", "b", ""): ("p t j", "g"),
        ("warp", "c", ""): ("g i1", "i0 t"),
        ("quadpair", "a", "row"): ("t h", "i"),
        ("quadpair", "a", "col"): ("i h", "t"),
        ("quadpair", "b", "row"): ("t", "i h"),
        ("quadpair", "b", "col"): ("i", "t h"),
        ("quadpair", "c", "f16"): ("t h", "i"),
        ("quadpair", "c", "f32"): ("l0 i1 h", "i0 l1 i2"),
    }
)

# field name -> (source, lo bit, hi bit (exclusive)), bounds as functions of
# (pb = log2(elements per register), nb = log2(elements per lane)); element fields are clipped to nb.
_FIELDS = {
    "t": ("lane", lambda pb, nb: (0, 2)),
    "g": ("lane", lambda pb, nb: (2, 5)),
    "l0": ("lane", lambda pb, nb: (0, 1)),
    "l1": ("lane", lambda pb, nb: (1, 2)),
    "h": ("lane", lambda pb, nb: (4, 5)),
    "i": ("elem", lambda pb, nb: (0, nb)),
    "i0": ("elem", lambda pb, nb: (0, 1)),
    "i1": ("elem", lambda pb, nb: (1, 2)),
    "i2": ("elem", lambda pb, nb: (2, 3)),
    "p": ("elem", lambda pb, nb: (0, pb)),
    "j": ("elem", lambda pb, nb: (pb, nb)),
    "j0": ("elem", lambda pb, nb: (pb, pb + 1)),
    "jh": ("elem", lambda pb, nb: (pb + 1, nb)),
}

#: Lane bits that select the product in a quad-pair instruction (lane bits 3:2).
_PRODUCT_BITS = (2, 4)

#: Bit offset of the element code inside its byte container under the f8f6f4 kinds.
_CONTAINER_OFFSET = MappingProxyType({"e2m1": 2, "e3m2": 0, "e2m3": 0, "e4m3": 0, "e5m2": 0})


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def check_operand(operand: object) -> str:
    """The operand name, lower-cased, if it is one of 'a', 'b', 'c', 'd'; else PtxError."""
    if isinstance(operand, str) and operand.lower() in OPERANDS:
        return operand.lower()
    raise PtxError(f"unknown operand {operand!r}: expected one of {', '.join(map(repr, OPERANDS))}")


def _args(instr: object, operand: object) -> tuple[Instruction, str]:
    return as_instruction(instr), check_operand(operand)


def code_bits(instr: Instruction | str, operand: str) -> int:
    """Width in bits of one element's code (6 for .e3m2 even inside its 8-bit container)."""
    instr, operand = _args(instr, operand)
    return TYPE_BITS[instr.type_of(operand)]


def container_offset(instr: Instruction | str, operand: str) -> int:
    """Bit offset of the code inside its storage slot (2 for .e2m1 under the f8f6f4 kinds)."""
    instr, operand = _args(instr, operand)
    if operand in "ab" and instr.kind in ("f8f6f4", "mxf8f6f4"):
        return _CONTAINER_OFFSET[instr.type_of(operand)]
    return 0


def products(instr: Instruction | str) -> int:
    """Independent products the warp computes: 4 for m8n8k4 .f16, else 1."""
    return 4 if as_instruction(instr).quadpair else 1


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def _rule_key(instr: Instruction, operand: str) -> tuple[str, str, str]:
    op = "c" if operand == "d" else operand
    if not instr.quadpair:
        return ("warp", op, "")
    if op == "a":
        return ("quadpair", "a", instr.alayout)
    if op == "b":
        return ("quadpair", "b", instr.blayout)
    return ("quadpair", "c", instr.type_of(operand))


def _log2(x: int) -> int:
    b = int(x).bit_length() - 1
    if x <= 0 or (1 << b) != x:
        raise AssertionError(f"{x} is not a power of two")
    return b





def _rule_axes(key: tuple[str, str, str], pb: int, nb: int, epl: int, lane_value) -> list:
    """Per axis (row, column) of layout rule ``key``: its (32, epl) coordinate, its width in bits
    and the element-bit masks of its element fields, in order.  ``lane_value(name, lo, hi)``
    gives lane field ``name`` (lane bits lo:hi) as a (32, 1) array; element fields are clipped
    to ``nb``, and dropped when that leaves them empty."""
    elem = np.arange(epl, dtype=np.int64)[None, :]
    axes = []
    for axis_fields in LAYOUT_RULES[key]:
        value = np.zeros((32, epl), dtype=np.int64)
        shift = 0
        masks = []
        for name in axis_fields.split():
            source, bounds = _FIELDS[name]
            lo, hi = bounds(pb, nb)
            if source == "elem":
                hi = min(hi, nb)
                if hi <= lo:
                    continue
                masks.append(((1 << (hi - lo)) - 1) << lo)
                v = (elem >> lo) & ((1 << (hi - lo)) - 1)
            else:
                v = lane_value(name, lo, hi)
            value = value + (v << shift)
            shift += hi - lo
        axes.append((value, shift, masks))
    return axes


@lru_cache(maxsize=None)
def _layout(instr: Instruction, operand: str) -> np.ndarray:
    rows, cols = instr.matrix_shape(operand)
    epl = instr.elements_per_lane(operand)
    epr = instr.elements_per_register(operand)
    pb, nb = _log2(epr), _log2(epl)
    lane = np.arange(32, dtype=np.int64)[:, None]
    key = _rule_key(instr, operand)
    used_elem = 0
    coords = []
    axes = _rule_axes(key, pb, nb, epl, lambda name, lo, hi: (lane >> lo) & ((1 << (hi - lo)) - 1))
    for (value, shift, masks), extent in zip(axes, (rows, cols)):
        for field_mask in masks:
            if used_elem & field_mask:
                raise AssertionError(f"rule {key}: element bits used twice")
            used_elem |= field_mask
        if (1 << shift) != extent:
            raise AssertionError(f"rule {key} spans {1 << shift} of {extent} for {instr}")
        coords.append(value)
    if used_elem != (1 << nb) - 1:
        raise AssertionError(f"rule {key}: not every element bit is used for {instr}")
    out = np.stack(coords, axis=-1)
    # Bijection onto the matrix (per product for quad pairs): checked once per table.
    flat = product_of_lane(instr)[:, None] * rows * cols + out[..., 0] * cols + out[..., 1]
    if np.unique(flat).size != flat.size:
        raise AssertionError(f"layout rule {key} is not a bijection for {instr}")
    return readonly(out)


@lru_cache(maxsize=None)
def _product_of_lane(quadpair: bool) -> np.ndarray:
    lane = np.arange(32, dtype=np.int64)
    lo, hi = _PRODUCT_BITS
    p = (lane >> lo) & ((1 << (hi - lo)) - 1) if quadpair else np.zeros(32, dtype=np.int64)
    return readonly(p)


def product_of_lane(instr: Instruction | str) -> np.ndarray:
    """int64 (32,): the product each lane works on ((lane >> 2) % 4 for m8n8k4 .f16, else 0)."""
    return _product_of_lane(as_instruction(instr).quadpair)


@lru_cache(maxsize=None)
def _register_map(instr: Instruction, operand: str) -> np.ndarray:
    epl = instr.elements_per_lane(operand)
    epr = instr.elements_per_register(operand)
    i = np.arange(epl, dtype=np.int64)
    reg = i // epr
    lo = (i % epr) * instr.storage_bits(operand) + container_offset(instr, operand)
    out = np.broadcast_to(np.stack([reg, lo], axis=-1), (32, epl, 2)).copy()
    return readonly(out)


def layout(instr: Instruction | str, operand: str, *, byte_id: int = 0,
           thread_id: int = 0, selector: int = 0) -> np.ndarray:
    """int64 (32, elements_per_lane, 2): (row, col) of each lane's fragment element.

    For 'b' the pair is (k, n).  For m8n8k4 .f16 the coordinates are inside the lane's own 8x8x4
    product (see :func:`product_of_lane`).  The array is cached and read-only.

    For the block-scale metadata of ``.block_scale`` forms, operand 'scale_a' / 'scale_b' gives
    the other direction, (lane, byte) feeding each scale element under the selectors
    ``byte_id`` and ``thread_id``: shape (M, V, 2) for scale_a (row, chunk) and (V, N, 2) for
    scale_b (chunk, column); see :func:`warpsim.tensorcore.blockscale.scale_layout`.  The selectors are
    integers (Python or NumPy, not bool or float); other operands take none (PtxError if one is
    given a value other than 0).

    For sparse ``mma.sp``, 'a' is the compressed M x K/2 matrix and operand 'e' gives the
    metadata map under sparsity selector ``selector``: shape (32, 8, 2), the (row, chunk) of A
    that nibble j of each lane's word describes, (-1, -1) where ignored; see
    :func:`warpsim.tensorcore.sparse.metadata_layout`.
    """
    from warpsim.tensorcore.blockscale import scale_layout
    from warpsim.tensorcore.blockscale import selector as as_selector

    if isinstance(operand, str) and operand.lower() == "e":
        from warpsim.tensorcore.sparse import metadata_layout

        ins = as_instruction(instr)
        if not ins.sparse:
            raise PtxError(f"{ins.text} is not sparse, so it has no metadata operand 'e'; its "
                           "operands are 'a', 'b', 'c', 'd'")
        return metadata_layout(ins, selector)

    if isinstance(operand, str) and operand.lower() in ("scale_a", "scale_b"):
        return scale_layout(as_instruction(instr), operand.lower(), byte_id, thread_id)
    if as_selector(byte_id, "byte_id") or as_selector(thread_id, "thread_id"):
        raise PtxError(f"byte_id / thread_id select block-scale metadata: operand {operand!r} "
                       "takes none (use them with operand 'scale_a' or 'scale_b')")
    return _layout(*_args(instr, operand))


def register_map(instr: Instruction | str, operand: str) -> np.ndarray:
    """int64 (32, elements_per_lane, 2): (register index, low bit) of each fragment element.

    The low bit includes the container offset (2 for .e2m1 under the f8f6f4 kinds).  The element
    occupies bits ``lo .. lo + code_bits - 1`` of that register.  Cached and read-only.
    """
    return _register_map(*_args(instr, operand))


# --------------------------------------------------------------------------------------------
# Look-ups for people
# --------------------------------------------------------------------------------------------


def _index(value: object, name: str, extent: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    v = int(value)
    if not 0 <= v < extent:
        raise ShapeError(f"{name} {v} is out of range: expected 0 <= {name} < {extent}")
    return v


def locate(instr: Instruction | str, operand: str, row: int, col: int) -> list[tuple[int, int, int, int, int]]:
    """Who holds element (row, col): a list of ``(lane, element, register, lo_bit, hi_bit)``.

    ``hi_bit`` is inclusive (``lo_bit + code_bits - 1``).  The list has one entry, except for
    m8n8k4 .f16, where (row, col) names a position inside an 8x8x4 product and the list has one
    entry per product (four, ordered by product index 0..3), since every product has its own
    copy of that position.  For 'b', ``row`` is k and ``col`` is n.
    """
    instr, operand = _args(instr, operand)
    rows, cols = instr.matrix_shape(operand)
    r = _index(row, "row", rows)
    c = _index(col, "col", cols)
    lay = _layout(instr, operand)
    regmap = _register_map(instr, operand)
    width = code_bits(instr, operand)
    lanes, elems = np.nonzero((lay[..., 0] == r) & (lay[..., 1] == c))
    order = np.argsort(product_of_lane(instr)[lanes], kind="stable")
    out = []
    for ln, el in zip(lanes[order].tolist(), elems[order].tolist()):
        reg, lo = regmap[ln, el].tolist()
        out.append((ln, el, reg, lo, lo + width - 1))
    return out


def elements_of(instr: Instruction | str, operand: str, lane: int, register: int) -> list[tuple[int, int, int, int, int]]:
    """What register ``register`` of lane ``lane`` holds: a list of ``(element, row, col, lo, hi)``.

    ``hi`` is inclusive.  Coordinates are inside the lane's product for m8n8k4 .f16.
    """
    instr, operand = _args(instr, operand)
    ln = _index(lane, "lane", 32)
    rg = _index(register, "register", instr.regs[operand])
    lay = _layout(instr, operand)
    regmap = _register_map(instr, operand)
    width = code_bits(instr, operand)
    out = []
    for el in np.nonzero(regmap[ln, :, 0] == rg)[0].tolist():
        r, c = lay[ln, el].tolist()
        lo = int(regmap[ln, el, 1])
        out.append((el, r, c, lo, lo + width - 1))
    return out
