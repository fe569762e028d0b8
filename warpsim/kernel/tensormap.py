"""Host-side tensor maps: ``warpsim.tensor_map(...)`` writes the 128 bytes ``cuTensorMapEncodeTiled``
writes (format: :mod:`warpsim.facts.tensormap`), and :meth:`TensorMap.from_bytes` reads 128
bytes a GPU program made and binds them to the array they describe.

A :class:`TensorMap` passed to :meth:`warpsim.Module.launch` (for a ``__grid_constant__``
``CUtensorMap`` parameter) places its tensor in simulated global memory, writes that address
into the map's address field, and returns the tensor's contents after the kernel among the
outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from warpsim.errors import TensorMapError
from warpsim.facts import tensormap as fmt

__all__ = ["TensorMap", "tensor_map", "tensor_map_im2col"]

_ENUMS = {
    "interleave": {"none": 0, "16B": 1, "32B": 2},
    "swizzle": {"none": 0, "32B": 1, "64B": 2, "128B": 3},
    "l2_promotion": {"none": 0, "64B": 1, "128B": 2, "256B": 3},
    "oob_fill": {"none": 0, "zero": 0, "nan": 1, "nan_request_zero_fma": 1},
}


def _enum(name: str, v) -> int:
    if isinstance(v, str):
        key = v.strip()
        table = _ENUMS[name]
        for k, code in table.items():
            if key.lower() == k.lower() or key.upper().endswith("_" + k.upper()):
                return code
        raise TensorMapError(name, v, f"is not one of {', '.join(table)}")
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TensorMapError(name, v, "must be an int code or a name")
    return int(v)


def _ints(name: str, v) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in v)
    except TypeError:
        raise TensorMapError(name, v, "must be a sequence of integers") from None
    for x, y in zip(out, v):
        if isinstance(y, (bool, float)) or x != y:
            raise TensorMapError(name, tuple(v), "must hold integers")
    return out


@dataclass(frozen=True, eq=False)
class TensorMap:
    """A CUtensorMap: its 128 ``raw`` bytes, their ``fields``, and (optionally) the ``tensor``
    (a NumPy array) its address stands for; ``offset``: bytes from the tensor's start to the
    address in the map."""

    raw: bytes
    fields: fmt.TensorMapFields
    tensor: np.ndarray | None = None
    offset: int = 0

    @classmethod
    def from_bytes(cls, raw, tensor: np.ndarray | None = None, device_base: int | None = None,
                   strict: bool = False) -> "TensorMap":
        """The map in ``raw`` (128 bytes: ``bytes`` or a uint8 array, as a GPU program or the
        driver wrote it).  ``tensor``: the launch array it describes (its address field, a device
        pointer, is replaced by the array's simulated address at launch); ``device_base``: the
        device pointer of ``tensor``'s first byte, when the map's address is inside the array.
        ``strict``: check the derived words (box bytes, pattern size; ``tensormap.replace``
        leaves them zero)."""
        b = np.ascontiguousarray(raw).view(np.uint8).tobytes() if isinstance(raw, np.ndarray) else bytes(raw)
        f = fmt.decode(b, strict=strict)
        off = 0 if device_base is None else f.address - int(device_base)
        if tensor is not None:
            if not isinstance(tensor, np.ndarray):
                raise TensorMapError("tensor", type(tensor).__name__, "must be a NumPy array")
            if off < 0 or off > tensor.nbytes:
                raise TensorMapError("global_address", f.address, f"is outside the tensor starting at {device_base:#x}")
        return cls(b, f, tensor, off)

    def param_bytes(self, buffer_address: int | None = None) -> bytes:
        """The bytes passed as the kernel parameter (address field = ``buffer_address`` +
        offset when given)."""
        if buffer_address is None:
            return self.raw
        a = int(buffer_address) + self.offset
        return a.to_bytes(8, "little") + self.raw[8:]

    def with_tensor(self, tensor: np.ndarray) -> "TensorMap":
        return replace(self, tensor=tensor)

    def __repr__(self) -> str:
        f = self.fields
        return (f"TensorMap({f.dtype_name}, dims={f.dims}, strides={f.strides}, box={f.box}, "
                f"element_strides={f.element_strides}, swizzle={f.swizzle}, fill={f.fill})")


def tensor_map(dtype, dims: Sequence[int], strides: Sequence[int] | None = None, box: Sequence[int] = (),
               element_strides: Sequence[int] | None = None, interleave="none", swizzle="none",
               l2_promotion="none", oob_fill="none", *, tensor: np.ndarray | None = None,
               address: int | None = None) -> TensorMap:
    """A tensor map as ``cuTensorMapEncodeTiled(map, dtype, len(dims), address, dims, strides,
    box, element_strides, interleave, swizzle, l2_promotion, oob_fill)`` writes it.

    ``dims``/``box``/``element_strides``: innermost first; ``strides``: bytes between
    consecutive indices of dims 1..rank-1 (default: packed, from ``dims``); ``dtype``: a
    CUtensorMapDataType code, a name ('f16', 'bf16', 'u8', ...) or a NumPy dtype;
    ``interleave``/``swizzle``/``l2_promotion``/``oob_fill``: the enum codes or names
    ('128B', 'nan').  ``tensor``: the array the map describes (its launch address is written
    at launch; default dims/dtype checks only); ``address``: the address field to write
    (default 0x7f0000000000, any 16-byte aligned value).  Illegal parameters raise
    :class:`~warpsim.errors.TensorMapError` naming the parameter and value.
    """
    code, dims, strides = _geometry(dtype, dims, strides)
    rank = len(dims)
    f = fmt.TensorMapFields(code, rank, 0x7F0000000000 if address is None else int(address), dims,
                            _ints("global_stride", strides), _ints("box_dim", box),
                            _ints("element_stride", element_strides if element_strides is not None else (1,) * rank),
                            _enum("interleave", interleave), _enum("swizzle", swizzle),
                            _enum("l2_promotion", l2_promotion), _enum("oob_fill", oob_fill))
    return _finish(f, tensor)


def _geometry(dtype, dims, strides) -> tuple[int, list[int], Sequence[int]]:
    """The data-type code, the checked dims and the byte strides of dims 1.. (packed from
    ``dims`` when ``strides`` is None)."""
    code = fmt.data_type(dtype)
    dims = _ints("global_dim", dims)
    if strides is None:
        acc, st = dims[0] * fmt.DATA_TYPES[code][1] if dims else 0, []
        for d in dims[1:]:
            st.append(acc)
            acc *= d
        strides = st
    return code, dims, strides


def tensor_map_im2col(dtype, dims: Sequence[int], strides: Sequence[int] | None = None,
                      lower: Sequence[int] = (), upper: Sequence[int] = (), channels_per_pixel: int = 0,
                      pixels_per_column: int = 0, element_strides: Sequence[int] | None = None,
                      interleave="none", swizzle="none", l2_promotion="none", oob_fill="none", *,
                      tensor: np.ndarray | None = None, address: int | None = None) -> TensorMap:
    """An im2col tensor map as ``cuTensorMapEncodeIm2col(map, dtype, len(dims), address, dims,
    strides, lower, upper, channels_per_pixel, pixels_per_column, element_strides, interleave,
    swizzle, l2_promotion, oob_fill)`` writes it (the same 128 bytes as the H100's driver on a
    52-case sweep).  ``dims``: (C, W, N), (C, W, H, N) or (C, W, H, D, N); ``lower``/``upper``:
    the pixel bounding box's corners for W, H, D (the upper one relative to dim - 1); the rest as
    :func:`tensor_map`.  Loaded by ``cp.async.bulk.tensor.Nd...im2col`` with the im2col offsets."""
    code, dims, strides = _geometry(dtype, dims, strides)
    rank = len(dims)
    f = fmt.TensorMapFields(code, rank, 0x7F0000000000 if address is None else int(address), dims,
                            _ints("global_stride", strides), (int(channels_per_pixel),),
                            _ints("element_stride", element_strides if element_strides is not None else (1,) * rank),
                            _enum("interleave", interleave), _enum("swizzle", swizzle),
                            _enum("l2_promotion", l2_promotion), _enum("oob_fill", oob_fill), True,
                            _ints("pixel_box_lower_corner", lower), _ints("pixel_box_upper_corner", upper),
                            int(pixels_per_column))
    return _finish(f, tensor)


def _finish(f: fmt.TensorMapFields, tensor) -> TensorMap:
    dims, rank, esz = f.dims, f.rank, f.elem_bytes
    raw = fmt.encode(f)
    if tensor is not None:
        if not isinstance(tensor, np.ndarray):
            raise TensorMapError("tensor", type(tensor).__name__, "must be a NumPy array")
        span = (dims[0] * esz if rank else 0) + sum((d - 1) * s for d, s in zip(dims[1:], f.strides))
        if tensor.nbytes < span:
            raise TensorMapError("tensor", tensor.shape, f"holds {tensor.nbytes} bytes; the map spans {span}")
    return TensorMap(raw, f, tensor, 0)
