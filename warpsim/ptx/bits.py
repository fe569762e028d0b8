"""Register bit patterns <-> integer values, shared by the ALU families.

PTX integer types as data: ``INT[type] = (bits, signed)``.  Registers are unsigned NumPy arrays
of the type's width (``UINT[bits]``); arithmetic is done on int64/uint64 views and wrapped back.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError

#: Unsigned storage dtype of a register width.
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

#: Integer and bit types: (width, signed).
INT = {
    "u8": (8, False), "s8": (8, True), "b8": (8, False),
    "u16": (16, False), "s16": (16, True), "b16": (16, False),
    "u32": (32, False), "s32": (32, True), "b32": (32, False),
    "u64": (64, False), "s64": (64, True), "b64": (64, False),
}

#: Register width of every type name the ALU families use.
WIDTH = {**{k: v[0] for k, v in INT.items()},
         "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f16x2": 32, "bf16x2": 32,
         "u16x2": 32, "s16x2": 32, "tf32": 32, "e4m3x2": 16, "e5m2x2": 16, "e2m1x2": 8,
         "e2m3x2": 16, "e3m2x2": 16, "ue8m0x2": 16, "pred": 1}


def reg(x, width: int) -> np.ndarray:
    """A source operand as an unsigned array of ``width`` bits (wider words are truncated,
    as PTX does for a sub-word type read from a wider register)."""
    a = np.asarray(x)
    if a.dtype.kind == "b":
        return a.astype(UINT[width])
    if a.dtype.kind not in "ui":
        raise PtxError(f"register words must be integer arrays, got dtype {a.dtype}")
    return a.astype(np.uint64).astype(UINT[width]) if a.dtype != UINT[width] else a


def signed(u: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned bit patterns of ``bits`` bits -> int64 values (two's complement)."""
    v = np.asarray(u).astype(np.uint64)
    if bits == 64:
        return v.view(np.int64)
    v = v & np.uint64((1 << bits) - 1)
    s = v.astype(np.int64)
    return np.where(s >= (1 << (bits - 1)), s - (1 << bits), s)


def value(u: np.ndarray, typ: str) -> np.ndarray:
    """Register words of integer type ``typ`` -> int64 (u64: uint64) values."""
    bits, sg = INT[typ]
    if sg:
        return signed(u, bits)
    v = np.asarray(u).astype(np.uint64)
    return v if bits == 64 else (v & np.uint64((1 << bits) - 1)).astype(np.int64)


def wrap(v, bits: int) -> np.ndarray:
    """Integers (int64/uint64, any sign) -> their low ``bits`` bits as UINT[bits]."""
    a = np.asarray(v)
    u = a if a.dtype == np.uint64 else a.astype(np.int64).astype(np.uint64)
    return u.astype(UINT[bits])


def halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """32-bit words -> (low, high) 16-bit halves."""
    x = np.asarray(x).astype(np.uint32)
    return (x & np.uint32(0xFFFF)).astype(np.uint16), (x >> np.uint32(16)).astype(np.uint16)


def pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Two 16-bit halves -> 32-bit words (``lo`` in bits 15:0)."""
    return (np.asarray(lo).astype(np.uint32) & np.uint32(0xFFFF)) | \
        (np.asarray(hi).astype(np.uint32) << np.uint32(16))


def per_half(fn):
    """Lift a function of 16-bit operands to 32-bit words holding two 16-bit lanes."""

    def lifted(*words):
        parts = [halves(w) for w in words]
        lo = fn(*(p[0] for p in parts))
        hi = fn(*(p[1] for p in parts))
        return pack(lo, hi)

    return lifted


def no_check(typ, mods) -> None:
    return None
