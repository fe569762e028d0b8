"""The sm_90 shared-memory matrix descriptor of ``wgmma``: 64 bits -> byte addresses.

Bit fields (PTX ISA 9.7.15.5.1.2.2; CuTe ``GmmaDescriptor``), every address field in units of
16 bytes over the 18-bit ``shared::cta`` window:

    13:0   start address >> 4        29:16  leading-dimension byte offset (LBO) >> 4
    45:32  stride-dimension byte offset (SBO) >> 4
    51:49  base offset (swizzled modes)   63:62  layout: 0 none, 1 128B, 2 64B, 3 32B swizzle
    15:14, 31:30, 48:46, 61:52  reserved (0)

An operand tile of ``rows`` (M for A, N for B) by ``k`` elements is read from these linear
(pre-swizzle) byte addresses (the canonical layouts, CuTe ``make_gmma_desc``), esz the element
size in bytes, T = 16/esz, S the swizzle span:

    K-major, none:      start + (mn%8)*16 + (mn/8)*SBO + (kb%16) + (kb/16)*LBO      (kb = k*esz)
    K-major, swizzled:  start + (mn%8)*S  + (mn/8)*SBO + kb%S + (kb/S)*LBO   (kb/S > 0 only for a
                        sparse B (64 bytes of K) under 32B swizzle)
    MN-major, none:     start + (mn%T)*esz + (mn/T)*SBO + (k%8)*16 + (k/8)*LBO
    MN-major, swizzled: start + (mn%(S/esz))*esz + (mn/(S/esz))*LBO + (k%8)*S + (k/8)*SBO

and the swizzle (:mod:`warpsim.facts.swizzle`) is applied to the absolute address, so a
descriptor advanced along K by adding bytes to its start field addresses what the libraries
expect.  The base offset shifts the swizzle's line phase: the 16-byte chunk is XORed with
((address >> 7) - base offset) mod S/16 (measured on the H200 for 32B/64B/128B with aligned
and unaligned starts; ignored without a swizzle).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.swizzle import DESCRIPTOR_CODES, mode, swizzle

__all__ = ["Descriptor", "DescriptorError", "encode", "decode_descriptor", "linear_addresses",
           "operand_addresses", "SMEM_WINDOW"]

#: Bytes the 14-bit (x16) address fields can name: the shared::cta window of sm_90.
SMEM_WINDOW = 1 << 18
_RESERVED = (0x3 << 14) | (0x3 << 30) | (0x7 << 46) | (0x3FF << 52)
_CODE = {v: k for k, v in DESCRIPTOR_CODES.items()}


class DescriptorError(PtxError):
    """A malformed or unusable wgmma shared-memory descriptor.  ``operand`` ('a' or 'b'),
    ``field`` (the descriptor field at fault: 'start', 'lbo', 'sbo', 'base_offset', 'swizzle',
    'reserved', 'address') and ``value`` (its value) say what is wrong."""

    operand: str | None = None
    field: str | None = None
    value: int | None = None


def _err(msg: str, operand, field: str, value) -> DescriptorError:
    e = DescriptorError(msg)
    e.operand, e.field, e.value = operand, field, None if value is None else int(value)
    return e


def _of(operand) -> str:
    return f" of operand {operand.upper()}" if operand else ""


@dataclass(frozen=True)
class Descriptor:
    """Decoded descriptor fields, in bytes: ``start``, ``lbo``, ``sbo``; ``base_offset`` (3 bits)
    and ``swizzle`` ('none', '32B', '64B', '128B')."""

    start: int
    lbo: int
    sbo: int
    base_offset: int = 0
    swizzle: str = "none"

    @property
    def word(self) -> int:
        """The 64-bit descriptor."""
        return encode(self.start, self.lbo, self.sbo, self.swizzle, self.base_offset)


def encode(start: int, lbo: int, sbo: int, swizzle: "str | int" = "none", base_offset: int = 0) -> int:
    """The 64-bit descriptor of these byte values (start, LBO, SBO multiples of 16 below 2**18)."""
    for name, v in (("start", start), ("lbo", lbo), ("sbo", sbo)):
        if not 0 <= int(v) < SMEM_WINDOW or int(v) % 16:
            raise _err(f"descriptor {name} = {int(v):#x} must be a multiple of 16 below "
                       f"{SMEM_WINDOW:#x}", None, name, v)
    if not 0 <= base_offset < 8:
        raise _err(f"descriptor base offset {base_offset} must be 0..7", None, "base_offset", base_offset)
    code = _CODE[mode(swizzle).name]
    return ((int(start) >> 4) | ((int(lbo) >> 4) << 16) | ((int(sbo) >> 4) << 32)
            | (int(base_offset) << 49) | (code << 62))


def decode_descriptor(word, operand: str | None = None) -> Descriptor:
    """Fields of one 64-bit descriptor (a Python or NumPy integer)."""
    w = int(word)
    if not 0 <= w < 1 << 64:
        raise _err(f"descriptor {w:#x} is not a 64-bit value", operand, "word", None)
    if w & _RESERVED:
        raise _err(f"descriptor{_of(operand)} {w:#018x} sets reserved bits {w & _RESERVED:#x} "
                   "(15:14, 31:30, 48:46 and 61:52 are 0 on sm_90)", operand, "reserved", w & _RESERVED)
    return Descriptor(start=(w & 0x3FFF) << 4, lbo=((w >> 16) & 0x3FFF) << 4,
                      sbo=((w >> 32) & 0x3FFF) << 4, base_offset=(w >> 49) & 7,
                      swizzle=DESCRIPTOR_CODES[(w >> 62) & 3])


def linear_addresses(start, lbo, sbo, swz: str, *, rows: int, k: int, elem_bits: int,
                     major: str) -> np.ndarray:
    """Linear (pre-swizzle) byte address of each element of a rows x k operand tile:
    array (..., rows, k) for start/lbo/sbo arrays of shape (...).  Elements narrower than a byte
    (b1) are addressed per byte: k counts bytes then."""
    esz = max(elem_bits // 8, 1)
    sm = mode(swz)
    mn = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    st, lb, sb = (np.asarray(x, np.int64)[..., None, None] for x in (start, lbo, sbo))
    if major == "K":
        kb = kk * esz
        if not sm.bits:
            return st + (mn % 8) * 16 + (mn // 8) * sb + (kb % 16) + (kb // 16) * lb
        return st + (mn % 8) * sm.span + (mn // 8) * sb + kb % sm.span + (kb // sm.span) * lb
    if major != "MN":
        raise PtxError(f"major must be 'K' or 'MN', got {major!r}")
    if not sm.bits:
        t = 16 // esz
        return st + (mn % t) * esz + (mn // t) * sb + (kk % 8) * 16 + (kk // 8) * lb
    per = sm.span // esz
    return st + (mn % per) * esz + (mn // per) * lb + (kk % 8) * sm.span + (kk // 8) * sb


def operand_addresses(words, *, rows: int, k: int, elem_bits: int, major: str = "K",
                      operand: str | None = None, smem_bytes: int | None = None) -> np.ndarray:
    """Physical shared-memory byte address of each element of the rows x k tile that the
    descriptor(s) ``words`` (any shape (...), 64-bit integers) describe: (..., rows, k) int64
    (for b1, k counts bytes).  Raises :class:`DescriptorError` for reserved bits or (given
    ``smem_bytes``) an element outside shared memory."""
    w = np.asarray(words).astype(np.uint64)
    bad = (w & np.uint64(_RESERVED)) != 0
    if bad.any():
        decode_descriptor(int(w[bad].ravel()[0]), operand)  # raises, naming the bits
    start = (w & np.uint64(0x3FFF)).astype(np.int64) << 4
    lbo = ((w >> np.uint64(16)) & np.uint64(0x3FFF)).astype(np.int64) << 4
    sbo = ((w >> np.uint64(32)) & np.uint64(0x3FFF)).astype(np.int64) << 4
    base = ((w >> np.uint64(49)) & np.uint64(7)).astype(np.int64)
    codes = np.unique((w >> np.uint64(62)).astype(np.int64))
    if codes.size != 1:
        raise _err(f"descriptors{_of(operand)} of one instruction use different swizzle modes "
                   f"({', '.join(DESCRIPTOR_CODES[int(c)] for c in codes)})", operand, "swizzle", None)
    swz = DESCRIPTOR_CODES[int(codes[0])]
    phys = swizzle(linear_addresses(start, lbo, sbo, swz, rows=rows, k=k, elem_bits=elem_bits,
                                    major=major), swz, base[..., None, None])
    if smem_bytes is not None:
        esz = max(elem_bits // 8, 1)
        over = phys + esz > smem_bytes
        if over.any():
            i = np.unravel_index(int(np.argmax(over)), over.shape)
            d = decode_descriptor(int(w[i[:-2]]) if w.ndim else int(w), operand)
            raise _err(f"descriptor{_of(operand)} (start {d.start:#x}, LBO {d.lbo:#x}, SBO {d.sbo:#x}, "
                       f"{swz} swizzle) reaches shared-memory byte {int(phys[i]):#x} (row {i[-2]}, "
                       f"k {i[-1]}), outside the {smem_bytes:#x} bytes of this CTA's shared memory",
                       operand, "address", int(phys[i]))
    return phys
