"""Input coercion with warpsim's errors: array-likes to arrays, integers to register words."""

from __future__ import annotations

import numpy as np

from warpsim.errors import ShapeError


def as_array(x: object, what: str) -> np.ndarray:
    """``np.asarray(x)``, with warpsim's ShapeError naming ``what`` for ragged nested lists."""
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except ValueError:
        pass
    try:  # what NumPy refused: nested sequences of unequal lengths read as objects
        ragged = np.asarray(x, dtype=object).ndim >= 1
    except ValueError:
        ragged = True
    if ragged:
        raise ShapeError(f"{what} must be a rectangular array: got nested sequences of unequal "
                         "lengths") from None
    raise ShapeError(f"{what} cannot be read as an array") from None


def as_uint(x: object, what: str, limit_bits: int, dtype: np.dtype) -> np.ndarray:
    """``x`` as a new-or-unchanged array of ``dtype`` after checking 0 <= x < 2**limit_bits.

    64-bit values (``.f64`` registers) need 64-bit integers: a narrower integer dtype cannot hold
    them, so it is a TypeError rather than words silently read with their upper half zero.
    """
    arr = as_array(x, what)
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in flat):
            raise TypeError(f"{what} must be integers, got an object array holding non-integers")
        lo = min(flat, default=0)
        hi = max(flat, default=0)
        if lo < 0 or hi >= (1 << limit_bits):
            raise ShapeError(f"{what} must lie in [0, 2**{limit_bits}), got values in [{lo}, {hi}]")
        return np.array(flat, dtype=dtype).reshape(arr.shape)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{what} must have an integer dtype, got {arr.dtype}")
    if limit_bits == 64 and arr.dtype.itemsize < 8:
        raise TypeError(f"{what} are 64-bit: they need a 64-bit integer dtype (uint64), not "
                        f"{arr.dtype}, which cannot hold them")
    # Unsigned inputs no wider than the limit cannot be out of range: skip the scans.
    if arr.size and not (arr.dtype.kind == "u" and arr.dtype.itemsize * 8 <= limit_bits):
        lo = arr.min()
        hi = arr.max()
        if (arr.dtype.kind == "i" and lo < 0) or int(hi) >= (1 << limit_bits):
            raise ShapeError(
                f"{what} must lie in [0, 2**{limit_bits}), got values in [{int(lo)}, {int(hi)}]"
            )
    return arr.astype(dtype, copy=False)


# --------------------------------------------------------------------------------------------
# Bits
# --------------------------------------------------------------------------------------------
