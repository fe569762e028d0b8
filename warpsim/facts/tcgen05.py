"""Blackwell ``tcgen05`` facts as data: kinds, shapes, descriptors, Tensor Memory, ld/st shapes.

Sources, per table: [ISA] PTX ISA 9.x section "TensorCore 5th Generation Family Instructions"
(tcgen05); [CuTe] CUTLASS ``include/cute/arch/mma_sm100_desc.hpp`` (``UMMA::InstrDescriptor``,
``InstrDescriptorBlockScaled``, ``SmemDescriptor``) and ``copy_traits_sm100.hpp``; [ptxas] the
verdicts of ptxas 13.5 stored in ``tests/data/ptxas_truth_tcgen05.jsonl.gz``.  No Blackwell
hardware has checked any of this.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

# --------------------------------------------------------------------------------------------
# Targets  [ptxas 13.5]
# --------------------------------------------------------------------------------------------

#: Targets on which ptxas 13.5 accepts tcgen05 (the arch- and family-specific sm_10x/sm_11x
#: ones); sm_100, sm_103, sm_110 (no suffix), sm_90a and sm_12x are refused.
TARGETS = ("sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_107a", "sm_107f", "sm_110a",
           "sm_110f")

# --------------------------------------------------------------------------------------------
# Kinds  [ISA "Instruction descriptor", "Matrix shape" tables; CuTe enums]
# --------------------------------------------------------------------------------------------

F8F6F4 = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")


@dataclass(frozen=True)
class Kind:
    """One ``.kind`` of tcgen05.mma: dense K, operand and D types, their idesc codes."""

    name: str
    k: int  # dense K of one instruction (sparse: 2k)
    types: Mapping[str, int]  # A/B element type -> idesc code (bits 9:7 for A, 12:10 for B)
    dtypes: tuple[str, ...]
    block_scale: bool = False
    #: block-scaled kinds: legal (block size, scale type) pairs
    scales: tuple[tuple[int, str], ...] = ()
    sparse: bool = True
    mn_major: tuple[str, ...] = ()  # types that may be MN-major (transpose bit 1)


KINDS: Mapping[str, Kind] = MappingProxyType({k.name: k for k in (
    Kind("f16", 16, MappingProxyType({"f16": 0, "bf16": 1}), ("f16", "f32"),
         mn_major=("f16", "bf16")),
    Kind("tf32", 8, MappingProxyType({"tf32": 2}), ("f32",), mn_major=("tf32",)),
    Kind("f8f6f4", 32, MappingProxyType({"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}),
         ("f16", "f32"), mn_major=("e4m3", "e5m2")),
    Kind("i8", 32, MappingProxyType({"u8": 0, "s8": 1}), ("s32",), mn_major=("u8", "s8")),
    Kind("mxf8f6f4", 32, MappingProxyType({"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}),
         ("f32",), True, ((32, "ue8m0"),), mn_major=("e4m3", "e5m2")),
    Kind("mxf4", 64, MappingProxyType({"e2m1": 1}), ("f32",), True, ((32, "ue8m0"),)),
    Kind("mxf4nvf4", 64, MappingProxyType({"e2m1": 1}), ("f32",), True,
         ((32, "ue8m0"), (16, "ue8m0"), (16, "ue4m3"))),
)})

#: D type -> idesc code (bits 5:4, non-block-scaled kinds)  [CuTe CFormat]
D_CODES: Mapping[str, int] = MappingProxyType({"f16": 0, "f32": 1, "s32": 2})
#: scale type -> idesc bit 23 (block-scaled kinds)  [CuTe ScaleFormat]
SCALE_CODES: Mapping[str, int] = MappingProxyType({"ue4m3": 0, "ue8m0": 1})
#: ``.scale_vec::NX`` spelling of each (kind, block size)  [ISA]
SCALE_VEC_ALIAS: Mapping[tuple[str, int], str] = MappingProxyType({
    ("mxf8f6f4", 32): "scale_vec::1X", ("mxf4", 32): "scale_vec::2X",
    ("mxf4nvf4", 32): "scale_vec::2X", ("mxf4nvf4", 16): "scale_vec::4X"})


def shape_error(kind: str, cta_group: int, ws: bool, m: int, n: int) -> str | None:
    """Why (M, N) is not a legal shape of the kind, or None.  [ISA "Matrix shape" table]"""
    kd = KINDS[kind]
    if ws:
        if cta_group != 1 or kd.block_scale:
            return ".ws exists only for cta_group::1 and the non-block-scaled kinds"
        if m not in (32, 64, 128) or n not in (64, 128, 256):
            return ".ws needs M in {32, 64, 128} and N in {64, 128, 256}"
        return None
    ms = ((128,) if kd.block_scale else (64, 128)) if cta_group == 1 else (128, 256)
    if m not in ms:
        return f"M must be one of {ms} for kind::{kind} with cta_group::{cta_group}"
    step = 8 if cta_group == 1 else 16
    lo = step
    if kind == "i8":
        ok = (n in (8, 16, 24) and cta_group == 1) or (n % (16 if cta_group == 1 else 32) == 0)
        if not (lo <= n <= 256 and ok):
            return "N for kind::i8 is 8, 16, 24, then multiples of 16 (cta_group::2: of 32) to 256"
        return None
    if not (lo <= n <= 256 and n % step == 0):
        return f"N must be a multiple of {step} from {lo} to 256"
    return None


# --------------------------------------------------------------------------------------------
# Instruction descriptor (32 bits)  [ISA "Instruction descriptor"; CuTe InstrDescriptor*]
# --------------------------------------------------------------------------------------------

#: (field, low bit, width) of the descriptor of kinds f16 / tf32 / f8f6f4 / i8.
IDESC_FIELDS = (
    ("sparse_id2", 0, 2), ("sparse", 2, 1), ("saturate", 3, 1), ("dtype", 4, 2),
    ("atype", 7, 3), ("btype", 10, 3), ("negate_a", 13, 1), ("negate_b", 14, 1),
    ("a_major", 15, 1), ("b_major", 16, 1), ("n_dim", 17, 6), ("m_dim", 24, 5),
    ("max_shift", 30, 2),
)
#: The same for kinds mxf8f6f4 / mxf4 / mxf4nvf4.  ``m_dim`` is M >> 4 at bits 28:24 as in
#: CuTe (the ISA writes M >> 7 at 28:27: the same bits for the only legal M, 128 and 256).
IDESC_FIELDS_BLOCK = (
    ("sparse_id2", 0, 2), ("sparse", 2, 1), ("b_scale_id", 4, 2), ("atype", 7, 3),
    ("btype", 10, 3), ("negate_a", 13, 1), ("negate_b", 14, 1), ("a_major", 15, 1),
    ("b_major", 16, 1), ("n_dim", 17, 6), ("scale_type", 23, 1), ("m_dim", 24, 5),
    ("a_scale_id", 29, 2), ("k96", 31, 1),
)
#: Bits that must be zero (reserved) in each variant.
IDESC_RESERVED = 1 << 6 | 1 << 23 | 1 << 29
IDESC_RESERVED_BLOCK = 1 << 3 | 1 << 6
#: max_shift code -> shift (.ws B-buffer reuse)
MAX_SHIFT = (0, 8, 16, 32)

# --------------------------------------------------------------------------------------------
# Shared-memory matrix descriptor, sm_100 (64 bits)  [ISA "Shared memory descriptor"; CuTe]
# --------------------------------------------------------------------------------------------

SMEM_DESC_FIELDS = (
    ("start", 0, 14), ("lbo", 16, 14), ("sbo", 32, 14), ("version", 46, 2),
    ("base_offset", 49, 3), ("lbo_mode", 52, 1), ("layout", 61, 3),
)
#: The fixed value of bits 47:46 on sm_100 (CuTe ``version_ = 1``).
SMEM_DESC_VERSION = 1
#: The only operands the absolute-LBO mode (bit 52 = 1: LBO holds the address of the second K
#: chunk of a 48-byte K tile) may describe.  [ISA "Restrictions on the Leading Dimension
#: Absolute Address Stride": 128B swizzle with 16B atomicity only, K-major only (transpose bits
#: 0), matrix base offset 0.  CuTe uses it only in SM103 mma_unpack (K96 mxf4*)]
ABS_LBO_ONLY: Mapping[str, object] = MappingProxyType({"layout": "128B", "major": "K",
                                                       "base_offset": 0})
#: layout field -> swizzle name (3, 5, 7 are invalid)
SMEM_LAYOUTS: Mapping[int, str] = MappingProxyType({
    0: "none", 1: "128B_base32B", 2: "128B", 4: "64B", 6: "32B"})
#: swizzle name -> bytes of one swizzle row (the repeat of the XOR pattern)
SWIZZLE_BYTES: Mapping[str, int] = MappingProxyType({
    "none": 16, "32B": 32, "64B": 64, "128B": 128, "128B_base32B": 128})
#: The 64-bit zero-column mask descriptor of ``tcgen05.mma.ws``: (name, low bit, width)
#: [ISA "Zero-Column Mask Descriptor", Table 45].  start0..3 / first0..3 are per sub-mask (M=128:
#: one sub-mask over N columns; M=64: two of N/2; M=32: four of N/4); ``nonzero`` 0 gives an
#: all-zero mask; the two spans are run lengths - 1; ``shift`` offsets the B columns used.
ZCM_DESC_FIELDS = (
    ("start0", 0, 8), ("start1", 8, 8), ("start2", 16, 8), ("start3", 24, 8),
    ("first0", 32, 1), ("first1", 33, 1), ("first2", 34, 1), ("first3", 35, 1),
    ("nonzero", 39, 1), ("skip_span", 40, 8), ("use_span", 48, 8), ("shift", 56, 6),
)

# --------------------------------------------------------------------------------------------
# Tensor Memory  [ISA "Tensor Memory"]
# --------------------------------------------------------------------------------------------

TMEM_LANES = 128
TMEM_COLUMNS = 512
#: legal column counts of tcgen05.alloc / dealloc
ALLOC_COLUMNS = (32, 64, 128, 256, 512)
#: lanes a warp reaches with tcgen05.ld/st: warp (warp id % 4) owns lanes 32w .. 32w + 31
LANES_PER_WARP = 32


@dataclass(frozen=True)
class LdStShape:
    """A tcgen05.ld/st shape: TMEM lanes touched, bits per lane per repetition, registers."""

    name: str
    lanes: int  # TMEM lanes (rows) one .x1 touches
    bits: int  # bits per lane of one .x1
    regs: int  # 32-bit registers per thread of one .x1
    max_num: int  # largest .num (.x128 for 32x32b)


LDST_SHAPES: Mapping[str, LdStShape] = MappingProxyType({s.name: s for s in (
    LdStShape("32x32b", 32, 32, 1, 128),
    LdStShape("16x64b", 16, 64, 1, 128),
    LdStShape("16x128b", 16, 128, 2, 64),
    LdStShape("16x256b", 16, 256, 4, 32),
    LdStShape("16x32bx2", 16, 32, 1, 128),
)})
LDST_NUMS = (1, 2, 4, 8, 16, 32, 64, 128)

#: tcgen05.cp shapes: (lanes, bits per lane) and their multicast qualifiers  [ISA tcgen05.cp]
CP_SHAPES: Mapping[str, tuple[int, int, tuple[str, ...]]] = MappingProxyType({
    "128x256b": (128, 256, ("",)),
    "4x256b": (4, 256, ("",)),
    "128x128b": (128, 128, ("",)),
    "64x128b": (64, 128, (".warpx2::02_13", ".warpx2::01_23")),
    "32x128b": (32, 128, (".warpx4",)),
})
CP_DECOMPRESS = ("", ".b8x16.b6x16_p32", ".b8x16.b4x16_p64")

# --------------------------------------------------------------------------------------------
# Sub-byte A of kind::f8f6f4 / mxf8f6f4 in Tensor Memory: the code's place in its 8-bit holder
# --------------------------------------------------------------------------------------------

#: Low bit of a 6-/4-bit code inside its 8-bit Tensor Memory holder, as ``tcgen05.cp ...
#: .b8x16.b6x16_p32 / .b4x16_p64`` writes it and as ``tcgen05.mma`` reads A from Tensor Memory
#: (one element per byte, four per 32-bit cell: ISA "Packing format used for matrix A by
#: .kind::mxf8f6f4 in Tensor Memory").  [CUTLASS 7107b05
#: ``examples/python/CuTeDSL/experimental/primitives/tcgen05/cp_narrow_a_to_tmem_mma.py``: "FP4
#: UTCCP holder byte 00xxxx00 (payload bits [5:2]); FP6 0xxxxxx0 (payload bits [6:1])"; its
#: on-device check (all-ones mxf8f6f4 128x128x128, A copied by tcgen05.cp and read by the mma)
#: confirms only that cp and mma agree.  fp6 there is e3m2; e2m3 shares the .b6x16_p32 copy.]
#: [INF] the mma ignores the holder's other bits.  The 8-bit types sit in the whole byte.
TMEM_HOLDER_SHIFT: Mapping[int, int] = MappingProxyType({4: 2, 6: 1, 8: 0})

# --------------------------------------------------------------------------------------------
# Block-scale factors in Tensor Memory  [CuTe ``UMMA::tmem_sf_frg`` (mma_traits_sm100_frag.hpp):
# TmemAllocMode ScaleFactorDuplicated4by1 / ScaleFactorDuplicated2by2; CUTLASS 7107b05
# ``examples/python/CuTeDSL/experimental/primitives/tcgen05/2cta_mma_blockscale_m128.py``]
# --------------------------------------------------------------------------------------------

#: Data-path layout of the scale factors, by rows of D each CTA holds: 128 (cta_group::1 M=128,
#: cta_group::2 M=256) is "4x1": every lane quarter works on all N columns; 64 (cta_group::2
#: M=128) is "2x2": quarters 0-1 work on columns n < N/2, quarters 2-3 on n >= N/2 (D layout B).
SF_DATAPATH: Mapping[int, str] = MappingProxyType({128: "4x1", 64: "2x2"})


def scale_factor_cells(operand: str, datapath: str, idx, vec: int, scale_id: int, quarter: int,
                       n: int | None = None):
    """(lane, column, byte) offsets from the scale-factor address of the ``vec`` scale factors
    of each row (operand 'A': a row of the CTA's M rows) or column (operand 'B': a column n of
    B, 0 <= n < N), each (len(idx), vec), as TMEM lane quarter ``quarter`` reads them.

    A (both data paths) and B in "4x1": row/column r at lane r % 32 + 32 q, column r // 32,
    byte scale_id + j.  B in "2x2": column n of the half h = n // (N/2) that quarter q works
    on (q // 2 == h) at lane n' % 32 + 32 q, column n' // 32 with n' = n - h N/2.
    [CuTe tmem_sf_frg atoms: SFA and 4x1 SFB (((32, MN/32), 4), (VS, NSF)) : (((1, 512), 32),
    (0, 128)); 2x2 SFB (((32, MN/64), 2, 2), (VS, NSF)) : (((1, 512), 64, 32), (0, 128)) with
    MN = N, in CuTe's virtual TMEM addressing (lane = v % 128, byte column = v // 128).  The
    DSL example builds exactly these images for M=128 N=256 (SFA: each CTA its 64 rows, two
    K blocks per 16-byte lane slot, by tcgen05.cp.32x128b.warpx4, the mma at address + 2 k;
    SFB: two 128-column atoms by one tcgen05.cp.64x128b.warpx2::01_23).  ISA: scale factors
    are duplicated to the lane partitions.  INF: each quarter reads its own copy; N/2 not a
    multiple of 32 follows the same formula.]"""
    import numpy as np

    from warpsim.errors import ShapeError

    r = np.asarray(idx)[:, None] + 0 * np.arange(vec)[None, :]
    j = np.arange(vec)[None, :] + 0 * r
    if operand == "B" and datapath == "2x2":
        half = n // 2
        if np.any(r // half != quarter // 2):
            raise ShapeError(f"2x2 data path: lane quarter {quarter} reads scale factors of "
                             f"B columns {half * (quarter // 2)}..{half * (quarter // 2) + half - 1}")
        r = r - half * (quarter // 2)
    return r % 32 + 32 * quarter, r // 32, scale_id + j

# --------------------------------------------------------------------------------------------
# Sparse tcgen05.mma.sp: metadata in Tensor Memory  [ISA "Sparse Matrices"; CuTe tmem_e_frg;
# JAX Mosaic GPU tcgen05.mma sparse path and its tests]
# --------------------------------------------------------------------------------------------

#: Metadata nibble values the ISA calls meaningful (idx0 in bits 1:0, idx1 in bits 3:2; stored
#: element/pair 0 goes to position idx0, 1 to idx1); the rest are undefined behaviour.  The ISA's
#: 2:4 and 4:8 lists hold seven values (0b0110 too); tf32 (1:2) two.
SPARSE_NIBBLES: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "2:4": (0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE), "1:2": (0x4, 0xE), "4:8": (0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE)})


@dataclass(frozen=True)
class SparseMeta:
    """How one kind's metadata nibbles sit in a Tensor Memory cell.

    'pair' (16-bit and tf32 A): one 32-bit column per instruction, two instructions' metadata in
    a column pair, the selector picking the column; the nibble of row m, chunk c sits in bits
    ``4 (c % 4) + 16 ((m // 8) % 2)`` of lane ``m % 8 + 8 (c // 4)`` of its 16-row group.
    'row' (8-bit and 4-bit A): two columns per instruction, selector 0; row m's 16-lane group
    holds it at lane ``m % 16``, nibble c at column ``c // 8``, bits ``4 (c % 8)``.
    Which lanes a 16-row group occupies is the data-path layout's: :data:`SPARSE_META_LAYOUTS`."""

    granularity: str  # '2:4', '1:2' or '4:8'
    chunk: int  # logical elements per nibble
    layout: str  # 'pair' or 'row'
    selectors: tuple[int, ...]


#: [CuTe tmem_e_frg (M=128: TF32 128x16 and FP16 128x32 atoms ((8,2,8),(K/2,2)):((1,K*64,16),
#: (128,8)), 8-bit 128x64 and F4 128x128 atoms (128,K):(1,128), 1/2/0.5 metadata bits per
#: logical element) and its mma_unpack (selector = metadata column & 1, the address's column
#: made even); JAX Mosaic GPU agrees: tcgen05.mma sparse path (selector = k step % 2 for
#: 16-bit A, column pairs) and test_mma_sparse's SMEM image copied by tcgen05.cp.128x128b.
#: noheat61/triton (a tl.dot_sparse port, DOT_SPARSE_INTERNALS.md section 10) read the same
#: cells from the ISA's Figures 263/267 and ran them bit-exact on a Jetson Thor (sm_110); it
#: found that an odd metadata column faults (misaligned address): the selector picks the half
#: of a 64-bit granule.  ISA: selector must be 0 for i8/f8f6f4, assumed 0 for the block-scaled
#: kinds.]
#: [INF] what selectors 2 and 3 do for f16/tf32 (no source uses them: CuTe masks the selector
#: to bit 0, Mosaic and the Triton port use k % 2): refused.
SPARSE_META: Mapping[str, SparseMeta] = MappingProxyType({
    "f16": SparseMeta("2:4", 4, "pair", (0, 1)),
    "tf32": SparseMeta("1:2", 2, "pair", (0, 1)),
    "f8f6f4": SparseMeta("2:4", 4, "row", (0,)),
    "i8": SparseMeta("2:4", 4, "row", (0,)),
    "mxf8f6f4": SparseMeta("2:4", 4, "row", (0,)),
    "mxf4": SparseMeta("4:8", 8, "row", (0,)),
    "mxf4nvf4": SparseMeta("4:8", 8, "row", (0,)),
})


@dataclass(frozen=True)
class SparseMetaLayout:
    """Where the metadata of one CTA's ``rows`` rows of A sit for one data-path layout (ISA
    "Data Path Layout Organization"): 16-row group g of A at lanes ``group_stride * g`` + the
    cell rule of :class:`SparseMeta`, repeated ``copies`` times ``rows`` lanes apart (each
    copy read by the data-path lanes that compute its share of N).  ``source`` names where the
    layout is stated; ``confidence`` is 'source', 'third-party hardware' or 'INF'."""

    layout: str  # the ISA's layout letter
    rows: int
    group_stride: int
    copies: int
    kinds: tuple[str, ...]  # kinds the layout is stated for
    source: str
    confidence: str


_NOT_BLOCK = ("f16", "tf32", "f8f6f4", "i8")
#: (rows per CTA, cta_group, .ws) -> layout.  Layout C (cta_group::2 M=128 sparse: 4x1, half the
#: data path, ISA table) is absent: refused (docs/blackwell.md lists the sources checked).
SPARSE_META_LAYOUTS: Mapping[tuple[int, int, bool], SparseMetaLayout] = MappingProxyType({
    # M=128 cta_group::1 (layout D)
    (128, 1, False): SparseMetaLayout(
        "D", 128, 16, 1, tuple(SPARSE_META),
        "CuTe tmem_e_frg; JAX Mosaic GPU; noheat61/triton ran it on an sm_110", "source"),
    # M=256 cta_group::2 (layout A): each CTA its own 128 rows as layout D
    (128, 2, False): SparseMetaLayout(
        "A", 128, 16, 1, tuple(SPARSE_META), "as layout D per CTA, from JAX Mosaic GPU's "
        "collective sparse test", "INF"),
    # .ws M=128 (layout D)
    (128, 1, True): SparseMetaLayout("D", 128, 16, 1, _NOT_BLOCK, "CuTe tmem_e_frg_ws M=128",
                                     "source"),
    # M=64 cta_group::1 (layout F, half the data path: rows 16g..16g+15 in lanes 32g..32g+15,
    # +16 with lane alignment 16) [noheat61/triton: ISA Figures 264 (f16: the ISA swaps the
    # captions of 262 and 264) and 266 read as the M=128 cell rule over layout F's lanes;
    # kind::f16 (f16, bf16) and kind::f8f6f4 (e4m3, e5m2) at M=64 bit-exact on a Jetson Thor,
    # sm_110; tf32 and i8 by the same figures, not run there]
    (64, 1, False): SparseMetaLayout(
        "F", 64, 32, 1, _NOT_BLOCK, "noheat61/triton: ISA Figures 262/264/266 read, kind::f16 and "
        "f8f6f4 run on an sm_110", "third-party hardware"),
    # .ws M=64 / M=32 (layouts E, G): the M=128 rule over rows 0..M-1, duplicated every M lanes
    # [CuTe tmem_e_frg_ws: TF32/FP16 atoms ((8,2,M/16),(K/2,2),128/M):((1,..,16),(128,8),M),
    # 8-bit (M,(64,128/M)):(1,(128,M))]; [INF] copy g read by the lanes computing D's g-th part of N
    (64, 1, True): SparseMetaLayout("E", 64, 16, 2, _NOT_BLOCK, "CuTe tmem_e_frg_ws M=64", "source"),
    (32, 1, True): SparseMetaLayout("G", 32, 16, 4, _NOT_BLOCK, "CuTe tmem_e_frg_ws M=32", "source"),
})


def sparse_meta_cells(kind: str, rows: int, chunks: int, selector: int = 0, *,
                      group_stride: int = 16, copy: int = 0):
    """(lane, column, bit) offsets of the nibble of every (row, chunk) of A, each (rows, chunks):
    the :data:`SPARSE_META` cell rule with 16-row groups ``group_stride`` lanes apart, shifted by
    ``copy * rows`` lanes (the copies of the .ws layouts)."""
    import numpy as np

    sm = SPARSE_META[kind]
    m = np.arange(rows)[:, None] + 0 * np.arange(chunks)[None, :]
    c = np.arange(chunks)[None, :] + 0 * m
    base = group_stride * (m // 16) + copy * rows
    if sm.layout == "pair":
        return (base + m % 8 + 8 * (c // 4), selector + 0 * m,
                4 * (c % 4) + 16 * ((m // 8) % 2))
    return base + m % 16, c // 8, 4 * (c % 8)
