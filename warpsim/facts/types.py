"""PTX data types as data: register width, signedness and float kind of every type name."""

from __future__ import annotations

import re

import numpy as np

from warpsim.errors import PtxError

#: Width in bits of the register that holds a value of each PTX type (packed x2/x4 types count
#: their whole container).  ``pred`` is a 1-bit predicate.
TYPE_BITS: dict[str, int] = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "tf32": 32,
    "f16x2": 32, "bf16x2": 32, "u16x2": 32, "s16x2": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
    "e4m3x2": 16, "e5m2x2": 16, "e2m3x2": 16, "e3m2x2": 16, "ue8m0x2": 16, "e2m1x2": 8,
    "e4m3x4": 32, "e5m2x4": 32, "e2m3x4": 32, "e3m2x4": 32, "e2m1x4": 16, "s2f6x2": 16,
}
SIGNED = frozenset({"s8", "s16", "s32", "s64"})
FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}

#: NumPy dtype of a register of each width.
DTYPES = {1: np.dtype(np.bool_), 8: np.dtype(np.uint8), 16: np.dtype(np.uint16),
          32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
SIGNED_DTYPES = {8: np.dtype(np.int8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
                 64: np.dtype(np.int64)}


def bits(t: str) -> int:
    """Register width of PTX type ``t`` (``'f16x2'`` -> 32); PtxError for unknown names."""
    try:
        return TYPE_BITS[t]
    except KeyError:
        raise PtxError(f"unknown PTX type .{t}") from None


def dtype(t: str) -> np.dtype:
    return DTYPES[bits(t)]


def width_of(arr: np.ndarray) -> int:
    """Register width of a register array (bool -> 1)."""
    return 1 if arr.dtype == np.bool_ else arr.dtype.itemsize * 8


def extend(value: np.ndarray, to_bits: int, signed: bool) -> np.ndarray:
    """Zero- or sign-extend unsigned words to a wider register width."""
    w = value.dtype.itemsize * 8
    if signed:
        return value.view(SIGNED_DTYPES[w]).astype(SIGNED_DTYPES[to_bits]).view(DTYPES[to_bits])
    return value.astype(DTYPES[to_bits])


#: Register-name prefixes of the naming convention nvcc and the PTX ISA examples use.
_REG_TYPES = (("rd", ("b", 64)), ("fd", ("f", 64)), ("rs", ("b", 16)), ("r", ("b", 32)),
              ("f", ("f", 32)), ("h", ("b", 16)), ("p", ("p", 1)))
_CONV_RE = re.compile(r"%(rd|fd|rs|r|f|h|p)[0-9]+")


def reg_type(name: str) -> tuple[str, int] | None:
    """(kind, bits) of a register named by the PTX convention (%r, %f, %rd, %fd, %h, %rs, %p
    followed by digits), None for any other name (its declaration is not visible here)."""
    m = _CONV_RE.fullmatch(name)
    return dict(_REG_TYPES)[m.group(1)] if m else None
