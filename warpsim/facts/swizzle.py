"""Shared-memory swizzle modes as data, and the address function they apply (vectorised).

The tensor-memory accelerator (TMA), ``wgmma`` shared-memory descriptors and Blackwell
``tcgen05`` descriptors share one family of swizzles.  Shared memory is seen as 128-byte lines
of eight 16-byte chunks; a swizzle of span S (32, 64 or 128 bytes) XORs the chunk index
(address bits 4..6) with the line index (address bits 7..9) modulo S/16:

    phys = addr ^ (((addr >> 7) & (S/16 - 1)) << 4)

so the pattern repeats every 8·S bytes (256, 512, 1024).  The XOR uses the absolute
shared-memory address (``shared::cta`` offset), which is what makes the libraries' habit of
advancing a descriptor along K by adding bytes to its start address correct.  Sources: PTX ISA
9.x "Tensor swizzling modes" (5.5.7) and the wgmma canonical layouts (9.7.15.5.1.2); CuTe
``Swizzle<B, 4, 3>``; checked against the H100 (docs/validation.md).

``MODES`` holds each mode's span, bits and repeat; :func:`swizzle` applies one to an array of
addresses, :func:`unswizzle` inverts it (the XOR is an involution), :func:`atom` gives the byte
image of one repeat (which logical byte lands where).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

from warpsim.errors import PtxError

__all__ = ["MODES", "SwizzleMode", "mode", "swizzle", "unswizzle", "atom", "DESCRIPTOR_CODES"]


@dataclass(frozen=True)
class SwizzleMode:
    """One swizzle mode: ``span`` bytes per swizzled row (16 for none), ``bits`` = log2 of the
    chunk count XORed (0 for none), ``repeat`` = bytes after which the pattern repeats."""

    name: str
    span: int
    bits: int

    @property
    def repeat(self) -> int:
        return 8 * self.span if self.bits else 16

    @property
    def chunk_mask(self) -> int:
        return (1 << self.bits) - 1


MODES: Mapping[str, SwizzleMode] = MappingProxyType({
    "none": SwizzleMode("none", 16, 0),
    "32B": SwizzleMode("32B", 32, 1),
    "64B": SwizzleMode("64B", 64, 2),
    "128B": SwizzleMode("128B", 128, 3),
})

#: The 2-bit layout field of the sm_90 wgmma shared-memory descriptor (bits 63:62).
DESCRIPTOR_CODES: Mapping[int, str] = MappingProxyType({0: "none", 1: "128B", 2: "64B", 3: "32B"})

_ALIASES = {"interleave": "none", "0": "none", None: "none", 32: "32B", 64: "64B", 128: "128B",
            0: "none", "swizzle_32b": "32B", "swizzle_64b": "64B", "swizzle_128b": "128B"}


def mode(m: "str | int | SwizzleMode | None") -> SwizzleMode:
    """The :class:`SwizzleMode` named ``m``: 'none', '32B', '64B', '128B' (or 32/64/128 bytes,
    'interleave', 'SWIZZLE_128B' spellings)."""
    if isinstance(m, SwizzleMode):
        return m
    key = m
    if isinstance(m, str):
        key = m.strip()
        low = key.lower()
        key = _ALIASES.get(low, _ALIASES.get(key, key))
        if isinstance(key, str) and key.upper().endswith("B") and key[:-1].isdigit():
            key = key[:-1] + "B"
    elif isinstance(m, (int, np.integer)) and not isinstance(m, bool):
        key = _ALIASES.get(int(m), m)
    got = MODES.get(key) if isinstance(key, str) else None
    if got is None:
        raise PtxError(f"unknown swizzle mode {m!r}; known: {', '.join(MODES)}")
    return got


def swizzle(addr, m: "str | int | SwizzleMode | None", base_offset=0) -> np.ndarray:
    """Physical shared-memory byte address of each (absolute, linear) address in ``addr`` under
    swizzle mode ``m``; any integer array shape, returned as int64.

    ``base_offset`` (0..7, scalar or broadcastable array): the wgmma descriptor's base-offset
    field, the pattern's line phase: the chunk is XORed with ``((addr >> 7) - base_offset)``
    modulo S/16 (measured on the H200: docs/validation.md; the PTX ISA sets it to
    ``(start >> 7) & 7`` for a pattern that does not start on its repeat boundary)."""
    sm = mode(m)
    a = np.asarray(addr, dtype=np.int64)
    if not sm.bits:
        return a.copy()
    line = a >> 7
    if np.any(base_offset):
        line = line - np.asarray(base_offset, dtype=np.int64)
    return a ^ ((line & sm.chunk_mask) << 4)


def unswizzle(addr, m: "str | int | SwizzleMode | None", base_offset=0) -> np.ndarray:
    """Inverse of :func:`swizzle` (the same XOR: bits 7..9 are left unchanged by it)."""
    return swizzle(addr, m, base_offset)


def atom(m: "str | int | SwizzleMode | None", rows: int = 8, elem_bytes: int = 1) -> np.ndarray:
    """A picture of one swizzle atom: ``rows`` rows of ``span`` bytes stored back to back from a
    pattern boundary (the canonical K-major atom).  Returns a (rows, span/elem_bytes) array
    whose entry [r, j] is the logical element (numbered row-major) that the swizzle stores in
    physical slot j of row r."""
    sm = mode(m)
    if elem_bytes not in (1, 2, 4, 8, 16):
        raise PtxError(f"elem_bytes must be 1, 2, 4, 8 or 16, got {elem_bytes}")
    width = sm.span if sm.bits else 16
    lin = np.arange(rows * width, dtype=np.int64)  # row r of the atom at byte r * width
    phys = swizzle(lin, sm)
    out = np.empty(rows * width, dtype=np.int64)
    out[phys] = lin
    out = out[::elem_bytes] // elem_bytes
    out.flags.writeable = False
    return out.reshape(rows, width // elem_bytes)
