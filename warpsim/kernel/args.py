"""Kernel arguments -> the bytes of each ``.param``, the way a CUDA launch marshals them.

NumPy arrays become global buffers passed by pointer (the parameter must be 64 bits wide);
``None`` is a null pointer; NumPy scalars and Python numbers become scalar parameters of the
declared type, as C passes them: an N-bit integer parameter takes any value of the signed or the
unsigned N-bit range, [-2^(N-1), 2^N), stored in two's complement (nvcc declares a C ``int`` as
``.u32``), and anything outside is an error, never wrapped; ``bytes``, ``bytearray`` or a NumPy structured scalar (``np.void``) of
exactly the declared size fill an ``.align``-ed ``.b8`` array parameter (a struct passed by
value).  The same code marshals for the simulator (simulated addresses) and for the GPU
harness (device pointers), so both see the same parameter bytes.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.module import SCALAR_BYTES, Function, Param

__all__ = ["is_buffer", "marshal", "scalar_bytes"]

_FLOAT_DT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def is_buffer(arg: Any) -> bool:
    """True for arguments that become global buffers (ndarrays of at least one dimension)."""
    return isinstance(arg, np.ndarray) and arg.ndim >= 1


def scalar_bytes(p: Param, value: Any, where: str) -> bytes:
    """The little-endian bytes of scalar ``value`` as parameter ``p``'s declared type."""
    size = SCALAR_BYTES[p.type]
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if p.type in _FLOAT_DT:
        if not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{where}: expected a number for .{p.type}, got {type(value).__name__}")
        return np.array(value, dtype=_FLOAT_DT[p.type]).tobytes()
    if isinstance(value, (float, np.floating)):
        raise TypeError(f"{where}: a floating-point value {value!r} for integer parameter .{p.type}; "
                        "pass an integer (or np.float32(x).view(np.uint32) for raw bits)")
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: expected an integer for .{p.type}, got {type(value).__name__}")
    v = int(value)
    bits = 8 * size
    # as C passes them: an int into a .u32 parameter (nvcc declares int as .u32), an unsigned
    # into .s32: any value of the signed or the unsigned range, stored in two's complement
    lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    if not lo <= v <= hi:
        raise PtxError(f"{where}: value {v} does not fit .{p.type} (range {lo}..{hi})")
    return (v & ((1 << bits) - 1)).to_bytes(size, "little")


def marshal(fn: Function, args: Sequence[Any], pointer: Callable[[int, np.ndarray], int]) -> list[bytes]:
    """The bytes of each parameter of ``fn`` for ``args``; ``pointer(i, array)`` gives the
    address of argument i's buffer."""
    if len(args) != len(fn.params):
        sig = ", ".join(f"{p.describe()} {p.name}" for p in fn.params)
        raise TypeError(f"{fn.name} takes {len(fn.params)} arguments ({sig}), got {len(args)}")
    out = []
    for i, (p, a) in enumerate(zip(fn.params, args)):
        where = f"argument {i} ({p.name} {p.describe()}) of {fn.name}"
        if a is None:  # NULL, as C passes a null pointer
            if p.is_array or p.type not in ("u64", "b64", "s64"):
                raise TypeError(f"{where}: None (a null pointer) needs a 64-bit parameter, not {p.describe()}")
            out.append(bytes(8))
        elif is_buffer(a):
            if p.is_array or p.type not in ("u64", "b64", "s64"):
                raise TypeError(f"{where}: an array is passed by pointer, which needs a 64-bit "
                                f"parameter, not {p.describe()}")
            out.append(int(pointer(i, a)).to_bytes(8, "little"))
        elif p.is_array:
            if isinstance(a, np.void):
                raw = a.tobytes()
            elif isinstance(a, (bytes, bytearray, memoryview)):
                raw = bytes(a)
            else:
                raise TypeError(f"{where}: a byte-array parameter takes bytes or a NumPy "
                                f"structured scalar of {p.nbytes} bytes, got {type(a).__name__}")
            if len(raw) != p.nbytes:
                raise PtxError(f"{where}: {len(raw)} bytes given, the parameter holds {p.nbytes}")
            out.append(raw)
        else:
            out.append(scalar_bytes(p, a, where))
    return out
