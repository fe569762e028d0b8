"""The 128-byte tensor map (``CUtensorMap``) as the CUDA driver writes it, as data.

The format is not documented; it was measured by sweeping ``cuTensorMapEncodeTiled``'s
parameters on an H100/H200 (driver 580, CUDA 13.0; fixture ``tests/data/h100/tensormap_sweep``,
docs/validation.md) and reads (little-endian; unused bytes zero):

=========  =================================================================================
bytes      content
=========  =================================================================================
0-7        global address
8-11       flags: bits 6:4 rank-1; 10:7 element type (:data:`STORED_TYPE`); 12:11 interleave;
           14:13 swizzle; 15 OOB NaN fill; 16 tf32 (set for the tf32 types); 18:17 L2 promotion
12-27      global strides of dims 1..4, ``stride >> 4``, low 32 bits each
28-31      bits 35:32 of each ``stride >> 4``, one nibble per stride (stride of dim 1 lowest)
32-51      global dims - 1, u32 each
52-54      element strides - 1, 3 bits per dim (dim 0 lowest)
55-59      box dims - 1, one byte each
64-67      bytes of one box as the driver counts them: prod(floor(box / elementStride)) * element
           size (the hardware loads ceil(box / elementStride) elements per dim, and the whole box
           in dim 0, so the count is short when a stride does not divide its box)
72-75      shared-memory pattern size: 16 (no swizzle), 256/512/1024 (32B/64B/128B)
=========  =================================================================================

Im2col maps (``cuTensorMapEncodeIm2col``, measured on an H100 with driver 580.159.04, fixture
``tests/data/h100_im2col.npz``): flag bit 0 set; byte 55 channels per pixel - 1; bytes 56-59
the bounding-box corners, the lower ones in bits 15:0 and the upper ones in bits 31:16, each
corner a signed field of 16 / (rank - 2) bits (16 bits for rank 3, 8 for rank 4, 5 for rank 5),
W first; bits 9:0 of bytes 60-61 pixels per column - 1; bytes 64-67 ``pixels * channels *
element size``.  Everything else as in tile mode.

Dims, strides and boxes beyond the rank are zero.  :func:`encode` writes these bytes,
:func:`decode` reads them back (checking the derived words), :func:`check` applies the
driver's parameter rules (each illegal value a :class:`~warpsim.errors.TensorMapError` naming
the parameter).  ``tensormap.replace`` writes the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from warpsim.errors import TensorMapError

__all__ = ["DATA_TYPES", "STORED_TYPE", "SWIZZLE_SPAN", "TensorMapFields", "encode", "decode", "check",
           "data_type", "box_bytes", "FLOAT_TYPES", "PTX_ELEMTYPE", "CORNER_BITS"]

#: CUtensorMapDataType -> (name, bytes per element).  13-15 (packed sub-byte) are sm_100+.
DATA_TYPES: Mapping[int, tuple[str, int]] = MappingProxyType({
    0: ("u8", 1), 1: ("u16", 2), 2: ("u32", 4), 3: ("s32", 4), 4: ("u64", 8), 5: ("s64", 8),
    6: ("f16", 2), 7: ("f32", 4), 8: ("f64", 8), 9: ("bf16", 2), 10: ("f32_ftz", 4), 11: ("tf32", 4),
    12: ("tf32_ftz", 4)})
_BY_NAME = {v[0]: k for k, v in DATA_TYPES.items()}
_BY_NAME.update({"float16": 6, "half": 6, "float32": 7, "float": 7, "float64": 8, "bfloat16": 9,
                 "uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5})
#: driver type -> (4-bit element-type field, tf32 bit): the PTX ``tensormap.replace`` elemtype
#: codes (u8 0 ... f32 7, f32.ftz 8, f64 9, bf16 10), with the tf32 types stored as f32/f32.ftz
#: plus bit 16.
STORED_TYPE: Mapping[int, tuple[int, int]] = MappingProxyType({
    0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (3, 0), 4: (4, 0), 5: (5, 0), 6: (6, 0), 7: (7, 0), 8: (9, 0),
    9: (10, 0), 10: (8, 0), 11: (7, 1), 12: (8, 1)})
_FROM_STORED = {v: k for k, v in STORED_TYPE.items()}
#: PTX ``tensormap.replace ... elemtype`` value -> driver type.
PTX_ELEMTYPE: Mapping[int, int] = MappingProxyType({0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 10,
                                                    9: 8, 10: 9, 11: 11, 12: 12})
FLOAT_TYPES = frozenset({6, 7, 8, 9, 10, 11, 12})
#: swizzle code -> span in bytes (0: none)
SWIZZLE_SPAN: Mapping[int, int] = MappingProxyType({0: 0, 1: 32, 2: 64, 3: 128})
_PATTERN = {0: 16, 1: 256, 2: 512, 3: 1024}
_SWIZZLE_NAMES = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def data_type(dtype) -> int:
    """The CUtensorMapDataType code of ``dtype``: a code, a name ('f16', 'bf16', 'u8', ...), or
    a NumPy dtype (float16, float32, float64, uint8 ..., ml_dtypes bfloat16)."""
    if isinstance(dtype, bool):
        raise TensorMapError("dtype", dtype, "is not a data type")
    if isinstance(dtype, int):
        if dtype not in DATA_TYPES:
            raise TensorMapError("dtype", dtype, "is not a CUtensorMapDataType warpsim knows (0..12)")
        return dtype
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        import numpy as np
        try:
            name = np.dtype(dtype).name
        except TypeError:
            hint = (": the first argument is the element type; pass the array as tensor="
                    if isinstance(dtype, (np.ndarray, list, tuple)) else "")
            raise TensorMapError("dtype", dtype, "is not a data type" + hint) from None
    code = _BY_NAME.get(str(name).lower())
    if code is None:
        raise TensorMapError("dtype", dtype, f"is not a tensor-map element type ({', '.join(_BY_NAME)})")
    return code


def box_bytes(box, es, esz: int) -> int:
    """Bytes of one box as the driver records them: prod(floor(box_d / elementStride_d)) *
    element size (measured: box 32 with stride 3 counts 10 rows)."""
    n = esz
    for b, e in zip(box, es):
        n *= b // e
    return n


@dataclass(frozen=True)
class TensorMapFields:
    """The parameters of ``cuTensorMapEncodeTiled`` (strides in bytes, for dims 1..rank-1;
    interleave 0 none / 1 16B / 2 32B; swizzle 0 none / 1 32B / 2 64B / 3 128B; l2 0..3 none /
    64B / 128B / 256B; fill 0 zero / 1 NaN-request-zero-FMA)."""

    dtype: int
    rank: int
    address: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int = 0
    swizzle: int = 0
    l2_promotion: int = 0
    fill: int = 0
    #: im2col mode (``cuTensorMapEncodeIm2col``): ``box`` is then (channels per pixel,),
    #: ``lower``/``upper`` the bounding-box corners (W, H, D: rank - 2 each), ``pixels`` the
    #: pixels per column
    im2col: bool = False
    lower: tuple[int, ...] = ()
    upper: tuple[int, ...] = ()
    pixels: int = 0

    @property
    def elem_bytes(self) -> int:
        return DATA_TYPES[self.dtype][1]

    @property
    def box_bytes(self) -> int:
        if self.im2col:
            return self.pixels * self.box[0] * self.elem_bytes
        return box_bytes(self.box, self.element_strides, self.elem_bytes)

    @property
    def dtype_name(self) -> str:
        return DATA_TYPES[self.dtype][0]


def check(f: TensorMapFields) -> None:
    """The driver's rules on the parameters (CUDA_ERROR_INVALID_VALUE cases measured on the
    H100's driver); raises :class:`TensorMapError` naming the first bad parameter."""
    if f.dtype not in DATA_TYPES:
        raise TensorMapError("dtype", f.dtype, "is not a CUtensorMapDataType (0..12 on sm_90)")
    inter = f.interleave
    if inter not in (0, 1, 2):
        raise TensorMapError("interleave", inter, "must be 0 (none), 1 (16B) or 2 (32B)")
    lo = 3 if inter else 1
    if not lo <= f.rank <= 5:
        raise TensorMapError("rank", f.rank, f"must be {lo}..5" + (" with interleave" if inter else ""))
    if f.swizzle not in SWIZZLE_SPAN:
        raise TensorMapError("swizzle", f.swizzle, "must be 0 (none), 1 (32B), 2 (64B) or 3 (128B) on sm_90")
    if f.l2_promotion not in (0, 1, 2, 3):
        raise TensorMapError("l2_promotion", f.l2_promotion, "must be 0..3 (none, 64B, 128B, 256B)")
    if f.fill not in (0, 1):
        raise TensorMapError("oob_fill", f.fill, "must be 0 (zeros) or 1 (NaN request zero FMA)")
    if f.fill == 1 and f.dtype not in FLOAT_TYPES:
        raise TensorMapError("oob_fill", f.fill, f"NaN fill needs a floating-point type, not {f.dtype_name}")
    align = 32 if inter == 2 else 16
    if not isinstance(f.address, int) or f.address < 0 or f.address % align:
        raise TensorMapError("global_address", f.address, f"must be {align}-byte aligned")
    if f.im2col:
        _check_im2col(f)
    for name, vals, n in (("global_dim", f.dims, f.rank), ("global_stride", f.strides, f.rank - 1),
                          ("box_dim", f.box, 1 if f.im2col else f.rank),
                          ("element_stride", f.element_strides, f.rank)):
        if len(vals) != n:
            raise TensorMapError(name, tuple(vals), f"needs {n} values for rank {f.rank}")
    for i, d in enumerate(f.dims):
        if not 1 <= d <= 1 << 32:
            raise TensorMapError(f"global_dim[{i}]", d, "must be 1..2^32")
    smul = 32 if inter == 2 else 16
    for i, s in enumerate(f.strides):
        if s % smul or not 0 < s < 1 << 40:
            raise TensorMapError(f"global_stride[{i}]", s, f"must be a multiple of {smul} below 2^40")
    for i, b in enumerate(f.box):
        if not 1 <= b <= 256:
            raise TensorMapError("channels_per_pixel" if f.im2col else f"box_dim[{i}]", b, "must be 1..256")
    for i, e in enumerate(f.element_strides):
        if not 1 <= e <= 8:
            raise TensorMapError(f"element_stride[{i}]", e, "must be 1..8")
    inner = f.box[0] * f.elem_bytes
    b0 = "channels_per_pixel" if f.im2col else "box_dim[0]"
    if inter and not f.im2col and inner % 16:  # the driver refuses 8 bytes with 16B interleave (H200,
        # 2026-11-26); other extents not tried: refused here as without interleave
        raise TensorMapError(b0, f.box[0], f"times {f.elem_bytes} bytes must be a multiple of 16")
    if inter == 0:
        if inner % 16:
            raise TensorMapError(b0, f.box[0], f"times {f.elem_bytes} bytes must be a multiple of 16")
        span = SWIZZLE_SPAN[f.swizzle]
        if span and inner > span:
            raise TensorMapError(b0, f.box[0], f"is {inner} bytes, more than the {span}-byte swizzle span")


#: im2col corner range per rank: signed fields of 16 / (rank - 2) bits (measured)
CORNER_BITS: Mapping[int, int] = MappingProxyType({3: 16, 4: 8, 5: 5})


def _check_im2col(f: TensorMapFields) -> None:
    """The driver's im2col rules (measured): rank 3..5, corners in range, a non-empty bounding
    box in every spatial dimension, 1..1024 pixels per column."""
    if f.rank not in CORNER_BITS:
        raise TensorMapError("rank", f.rank, "must be 3..5 for an im2col map")
    n = f.rank - 2
    bits = CORNER_BITS[f.rank]
    for name, v in (("pixel_box_lower_corner", f.lower), ("pixel_box_upper_corner", f.upper)):
        if len(v) != n:
            raise TensorMapError(name, tuple(v), f"needs {n} values for rank {f.rank}")
        for i, x in enumerate(v):
            if not -(1 << (bits - 1)) <= x < 1 << (bits - 1):
                raise TensorMapError(f"{name}[{i}]", x, f"must be {-(1 << (bits - 1))}..{(1 << (bits - 1)) - 1} "
                                     f"for rank {f.rank}")
    for i in range(n):
        if f.lower[i] > f.dims[i + 1] - 1 + f.upper[i]:
            raise TensorMapError(f"pixel_box_upper_corner[{i}]", f.upper[i],
                                 f"leaves an empty bounding box (lower {f.lower[i]} > dim {f.dims[i + 1]} - 1 "
                                 f"+ upper {f.upper[i]})")
    if not 1 <= f.pixels <= 1024:
        raise TensorMapError("pixels_per_column", f.pixels, "must be 1..1024")


def encode(f: TensorMapFields, *, checked: bool = True) -> bytes:
    """The 128 bytes the driver writes for ``f`` (checked by :func:`check` first)."""
    if checked:
        check(f)
    b = bytearray(128)
    b[0:8] = (f.address & (2**64 - 1)).to_bytes(8, "little")
    code, tf32 = STORED_TYPE[f.dtype]
    flags = ((f.rank - 1) << 4) | (code << 7) | (f.interleave << 11) | (f.swizzle << 13) | (f.fill << 15) \
        | (tf32 << 16) | (f.l2_promotion << 17)
    b[8:12] = flags.to_bytes(4, "little")
    hi = 0
    for i, s in enumerate(f.strides):
        v = s >> 4
        b[12 + 4 * i:16 + 4 * i] = (v & 0xFFFFFFFF).to_bytes(4, "little")
        hi |= ((v >> 32) & 0xF) << (4 * i)
    b[28:32] = hi.to_bytes(4, "little")
    for i, d in enumerate(f.dims):
        b[32 + 4 * i:36 + 4 * i] = (d - 1).to_bytes(4, "little")
    es = 0
    for i, e in enumerate(f.element_strides):
        es |= (e - 1) << (3 * i)
    b[52:55] = es.to_bytes(3, "little")
    if f.im2col:
        b[8] |= 1
        b[55] = f.box[0] - 1
        bits = CORNER_BITS[f.rank]
        m = (1 << bits) - 1
        lo = sum((x & m) << (bits * i) for i, x in enumerate(f.lower))
        hi = sum((x & m) << (bits * i) for i, x in enumerate(f.upper))
        b[56:60] = (lo | hi << 16).to_bytes(4, "little")
        b[60:62] = (f.pixels - 1).to_bytes(2, "little")
    else:
        for i, x in enumerate(f.box):
            b[55 + i] = x - 1
    b[64:68] = (f.box_bytes & 0xFFFFFFFF).to_bytes(4, "little")  # (a u32; boxes past 4 GiB are moot)
    b[72:76] = _PATTERN[f.swizzle].to_bytes(4, "little")
    return bytes(b)


def decode(raw, *, strict: bool = True) -> TensorMapFields:
    """The fields of 128 tensor-map bytes (as :func:`encode` writes them).  ``strict``: the
    derived words (box bytes, pattern size) must agree with the fields."""
    raw = bytes(raw)
    if len(raw) != 128:
        raise TensorMapError("tensor_map", len(raw), "must be 128 bytes")
    w = lambda o, n=4: int.from_bytes(raw[o:o + n], "little")  # noqa: E731
    flags = w(8)
    rank = ((flags >> 4) & 7) + 1
    code, tf32 = (flags >> 7) & 0xF, (flags >> 16) & 1
    dtype = _FROM_STORED.get((code, tf32))
    if dtype is None:
        raise TensorMapError("elemtype", code, "is not an element type of the tensor-map format")
    hi = w(28)
    strides = tuple((((hi >> (4 * i)) & 0xF) << 32 | w(12 + 4 * i)) << 4 for i in range(rank - 1))
    dims = tuple(w(32 + 4 * i) + 1 for i in range(rank))
    es_bits = w(52, 3)
    es = tuple(((es_bits >> (3 * i)) & 7) + 1 for i in range(rank))
    im2col = bool(flags & 1)
    lower = upper = ()
    pixels = 0
    if im2col and rank in CORNER_BITS:
        box = (raw[55] + 1,)
        bits = CORNER_BITS[rank]
        word = w(56)

        def sx(v):
            v &= (1 << bits) - 1
            return v - (1 << bits) if v >> (bits - 1) else v
        lower = tuple(sx(word >> (bits * i)) for i in range(rank - 2))
        upper = tuple(sx(word >> (16 + bits * i)) for i in range(rank - 2))
        pixels = (w(60, 2) & 0x3FF) + 1
    else:
        box = tuple(raw[55 + i] + 1 for i in range(rank))
    f = TensorMapFields(dtype, rank, w(0, 8), dims, strides, box, es, (flags >> 11) & 3, (flags >> 13) & 3,
                        (flags >> 17) & 3, (flags >> 15) & 1, im2col, lower, upper, pixels)
    if rank > 5:
        raise TensorMapError("rank", rank, "must be 1..5")
    if strict:
        if w(64) != f.box_bytes & 0xFFFFFFFF:
            raise TensorMapError("box_bytes", w(64), f"disagrees with the box ({f.box_bytes} bytes)")
        if w(72) != _PATTERN[f.swizzle]:
            raise TensorMapError("pattern_bytes", w(72), f"disagrees with swizzle code {f.swizzle}")
    return f
