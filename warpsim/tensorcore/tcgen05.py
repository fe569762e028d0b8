"""``tcgen05.mma`` at matrix level: the instruction, its 32-bit instruction descriptor, the
sm_100 shared-memory descriptor, and the numerics (bit-exact with MMA-Sim 2.1.1's Blackwell
``TCGen05MMA`` / ``TCGen05MMABlockScale`` models).

One ``tcgen05.mma`` computes D (M x N, in Tensor Memory) = A (M x K) . B (K x N) [+ D], with the
shape and element types given by the instruction descriptor (``idesc``) rather than by the
opcode, which names only ``.cta_group`` and ``.kind``.  :class:`Tcgen05Mma` holds both halves;
:func:`make`, :func:`parse` and :func:`from_idesc` build one, :func:`compute_codes` runs it on
element codes and :func:`matmul` on matrices.

Numerics ([HW-pub] MMA-Sim 2.1.1, ``nv_ptx/sim.py``; published as validated on a B200): the
float kinds (f16, tf32, f8f6f4) are one truncated fused dot product over the whole K (32 bytes of
A per row: K16 f16, K8 tf32, K32 fp8/fp6/fp4), F = 25 fraction bits, RZ to f32 or RNE to f16,
e_zero -133 (f32 D) / -21 (f16 D); unlike ``mma.sync`` on sm_100a, fp8 is native (no two-step
f16 sequence).  mxf8f6f4 adds the two scale exponents to each product's (F 25); mxf4 and
mxf4nvf4 sum groups of 16 products exactly and align the scaled group sums with F 35, e_zero
-139.  kind::i8 is exact integer arithmetic, wrapping or saturating ([ISA]).  Not modelled by
MMA-Sim and assumed element-for-element identical: ``.ws``, ``cta_group::2``, sparse forms,
``scale-input-d`` (C scaled exactly by 2**-s first) [INF].
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields as _dc_fields, replace
from types import MappingProxyType
from typing import Mapping

import numpy as np

from warpsim.facts import formats
from warpsim.tensorcore import engine, numerics
from warpsim.errors import MetadataError, PtxError, ShapeError
from warpsim.facts.isa import ARCHS
from warpsim.facts.tcgen05 import (
    D_CODES, IDESC_FIELDS, IDESC_FIELDS_BLOCK, IDESC_RESERVED, IDESC_RESERVED_BLOCK, KINDS,
    MAX_SHIFT, SCALE_CODES, SCALE_VEC_ALIAS, SMEM_DESC_FIELDS, SMEM_DESC_VERSION,
    SMEM_LAYOUTS, SPARSE_META, SPARSE_NIBBLES, TARGETS, ZCM_DESC_FIELDS, shape_error)

# --------------------------------------------------------------------------------------------
# Numerics table: one row per (model, kind)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindNumerics:
    """How one tcgen05 kind computes on one architecture model.

    ``method``: 'fdpa' (one truncated fused dot product per ``step_bytes`` of each A row),
    'scaled-fdpa' (mxf8f6f4: scale exponents join the product exponents), 'group-fdpa' (mxf4*:
    exact sums of ``group`` products, scaled, then aligned with ``block_F``), 'integer'.
    """

    kind: str
    method: str
    source: str
    F: int = 25
    step_bytes: int = 32
    e_zero_f32: int = -133
    e_zero_f16: int = -21
    group: int = 16
    block_F: int = 35
    block_e_zero: int = -139


_MMASIM = "[HW-pub] MMA-Sim 2.1.1 TCGen05MMA (Blackwell, B200)"
_MMASIM_BS = "[HW-pub] MMA-Sim 2.1.1 TCGen05MMABlockScale (Blackwell, B200)"

#: tcgen05 numerics per architecture model (``isa.ARCHS[arch].model``) and kind.
TCGEN05_NUMERICS: Mapping[str, Mapping[str, KindNumerics]] = MappingProxyType({
    "sm_100a": MappingProxyType({r.kind: r for r in (
        KindNumerics("f16", "fdpa", _MMASIM),
        KindNumerics("tf32", "fdpa", _MMASIM),
        KindNumerics("f8f6f4", "fdpa", _MMASIM),
        KindNumerics("i8", "integer", "[ISA] exact s32 arithmetic, wrap or .satfinite (idesc bit 3)"),
        KindNumerics("mxf8f6f4", "scaled-fdpa", _MMASIM_BS),
        KindNumerics("mxf4", "group-fdpa", _MMASIM_BS),
        KindNumerics("mxf4nvf4", "group-fdpa", _MMASIM_BS),
    )}),
})

_ELEM_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "e2m3": 1, "e3m2": 1,
               "e2m1": 1, "s8": 1, "u8": 1}  # in the shared-memory container (fp6/fp4: a byte)


def numerics_for(arch: str, kind: str) -> KindNumerics:
    """The numerics row simulating ``kind`` on target ``arch``; PtxError off Blackwell."""
    a = ARCHS.get(arch)
    if a is None or a.model not in TCGEN05_NUMERICS:
        raise PtxError(f"tcgen05.mma has no model on {arch!r}; targets: {', '.join(TARGETS)}")
    return TCGEN05_NUMERICS[a.model][kind]


# --------------------------------------------------------------------------------------------
# The instruction
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tcgen05Mma:
    """A tcgen05.mma: opcode qualifiers plus what its instruction descriptor says."""

    kind: str
    m: int
    n: int
    dtype: str
    atype: str
    btype: str
    cta_group: int = 1
    stype: str | None = None  # block-scaled kinds: scale type
    block: int | None = None  # block-scaled kinds: elements per scale (16 or 32)
    sparse: bool = False
    ws: bool = False
    a_major: str = "k"  # 'k' or 'mn' (the transpose bits)
    b_major: str = "k"
    negate_a: bool = False
    negate_b: bool = False
    saturate: bool = False  # kind::i8
    max_shift: int = 0  # .ws
    sparse_id2: int = 0
    a_scale_id: int = 0
    b_scale_id: int = 0
    k96: bool = False  # mxf4* K96 (sm_103a)

    # --- duck-typing for warpsim.numerics / blockscale ---
    form = "tcgen05"
    quadpair = False
    bitop = None
    rounding = None

    @property
    def k(self) -> int:
        base = 96 if self.k96 else KINDS[self.kind].k
        return base * (2 if self.sparse else 1)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def ctype(self) -> str:
        return self.dtype

    @property
    def block_scale(self) -> bool:
        return KINDS[self.kind].block_scale

    @property
    def satfinite(self) -> bool:
        return self.saturate

    @property
    def scale_vec(self) -> int:
        """Scale values per row of A (column of B) in one instruction: the dense count for the
        sparse forms too (``.scale_vec::NX``: N columns of scale_A, ISA), each scale covering
        ``block`` stored elements, 2 * block logical ones [JAX Mosaic GPU sparse block-scaled
        tests: one ue8m0 scale per 64 logical k of sparse mxf8f6f4]."""
        return self.k // (2 if self.sparse else 1) // self.block if self.block else 0

    def type_of(self, op: str) -> str:
        return {"a": self.atype, "b": self.btype, "c": self.dtype, "d": self.dtype}[op]

    @property
    def opcode(self) -> str:
        """The PTX opcode (without operands)."""
        # .ws before .sp: ptxas 13.5 refuses tcgen05.mma.sp.ws (tests/data/ptxas_truth_tcgen05)
        s = "tcgen05.mma" + (".ws" if self.ws else "") + (".sp" if self.sparse else "")
        s += f".cta_group::{self.cta_group}.kind::{self.kind}"
        if self.block_scale:
            s += f".block_scale.block{self.block}"
        return s

    @property
    def text(self) -> str:
        """Opcode plus shape and types, as MMA-Sim names a tcgen05 form."""
        return f"{self.opcode} m{self.m}n{self.n}k{self.k} {self.dtype}.{self.atype}.{self.btype}" + (
            f".{self.stype}" if self.stype else "")

    @property
    def idesc(self) -> int:
        """The 32-bit instruction descriptor."""
        kd = KINDS[self.kind]
        v = dict(sparse_id2=self.sparse_id2, sparse=int(self.sparse), atype=kd.types[self.atype],
                 btype=kd.types[self.btype], negate_a=int(self.negate_a),
                 negate_b=int(self.negate_b), a_major=int(self.a_major == "mn"),
                 b_major=int(self.b_major == "mn"), n_dim=self.n >> 3, m_dim=self.m >> 4)
        if kd.block_scale:
            v.update(b_scale_id=self.b_scale_id, a_scale_id=self.a_scale_id,
                     scale_type=SCALE_CODES[self.stype], k96=int(self.k96))
            fields = IDESC_FIELDS_BLOCK
        else:
            v.update(saturate=int(self.saturate), dtype=D_CODES[self.dtype],
                     max_shift=MAX_SHIFT.index(self.max_shift))
            fields = IDESC_FIELDS
        out = 0
        for name, lo, w in fields:
            out |= (v.get(name, 0) & ((1 << w) - 1)) << lo
        return out


def check(ins: Tcgen05Mma) -> Tcgen05Mma:
    """Raise PtxError naming what is illegal in ``ins`` (kind, types, shape, majors, bits)."""
    kd = KINDS.get(ins.kind)
    if kd is None:
        raise PtxError(f"unknown tcgen05.mma kind {ins.kind!r}; kinds: {', '.join(KINDS)}")
    for op, t in (("A", ins.atype), ("B", ins.btype)):
        if t not in kd.types:
            raise PtxError(f"kind::{ins.kind} takes {op} of type {', '.join(kd.types)}; got {t!r}")
    if ins.dtype not in kd.dtypes:
        raise PtxError(f"kind::{ins.kind} has D of type {', '.join(kd.dtypes)}; got {ins.dtype!r}")
    if ins.cta_group not in (1, 2):
        raise PtxError(f"cta_group must be 1 or 2; got {ins.cta_group}")
    why = shape_error(ins.kind, ins.cta_group, ins.ws, ins.m, ins.n)
    if why:
        raise PtxError(f"tcgen05.mma m{ins.m}n{ins.n}: {why}")
    if kd.block_scale:
        if (ins.block, ins.stype) not in kd.scales:
            legal = ", ".join(f"block{b} {s}" for b, s in kd.scales)
            raise PtxError(f"kind::{ins.kind} scales: {legal}; got block{ins.block} {ins.stype}")
    elif ins.block is not None or ins.stype is not None:
        raise PtxError(f"kind::{ins.kind} takes no block scale")
    for op, major, t in (("A", ins.a_major, ins.atype), ("B", ins.b_major, ins.btype)):
        if major not in ("k", "mn"):
            raise PtxError(f"{op} major must be 'k' or 'mn'; got {major!r}")
        if major == "mn" and t not in kd.mn_major:
            raise PtxError(f"{op} of type {t} must be K-major (MN-major: {', '.join(kd.mn_major) or 'none'})")
    if ins.saturate and ins.kind != "i8":
        raise PtxError("the saturate bit is for kind::i8 only")
    if (ins.negate_a or ins.negate_b) and ins.kind == "i8":
        raise PtxError("negation is for the floating-point kinds only")
    if ins.k96 and ins.kind not in ("mxf4", "mxf4nvf4"):
        raise PtxError("K96 is for kind::mxf4 / mxf4nvf4 only")
    if ins.max_shift and not ins.ws:
        raise PtxError("max_shift is for tcgen05.mma.ws only")
    return ins


_INS_FIELDS = frozenset(f.name for f in _dc_fields(Tcgen05Mma))


def make(kind: str, shape: str | tuple[int, int, int] | tuple[int, int], *, dtype: str,
         atype: str, btype: str | None = None, stype: str | None = None,
         block: int | None = None, cta_group: int = 1, **fields) -> Tcgen05Mma:
    """A checked :class:`Tcgen05Mma` from kind, shape ('m128n256k16', (M, N, K) or (M, N)) and
    types (``btype`` defaults to ``atype``; block-scaled kinds default to block 32 / ue8m0)."""
    if isinstance(shape, str):
        mt = re.fullmatch(r"m(\d+)n(\d+)(?:k(\d+))?", shape)
        if not mt:
            raise PtxError(f"shape must look like 'm128n256k16'; got {shape!r}")
        dims = tuple(int(x) for x in mt.groups() if x is not None)
    else:
        dims = tuple(int(x) for x in shape)
    if kind not in KINDS:
        raise PtxError(f"unknown tcgen05.mma kind {kind!r}; kinds: {', '.join(KINDS)}")
    unknown = sorted(set(fields) - _INS_FIELDS)
    if unknown:
        raise PtxError(f"tcgen05 instruction has no field {unknown[0]!r}; fields: "
                       f"{', '.join(sorted(_INS_FIELDS))}")
    if KINDS[kind].block_scale:
        block = 32 if block is None else block
        stype = "ue8m0" if stype is None else stype
    ins = Tcgen05Mma(kind, dims[0], dims[1], dtype, atype, btype or atype, cta_group, stype,
                     block, **fields)
    check(ins)
    if len(dims) == 3 and dims[2] != ins.k:
        raise PtxError(f"kind::{kind} has K = {ins.k} here; got k{dims[2]}")
    return ins


_OPCODE = re.compile(
    r"tcgen05\.mma(?P<sp>\.sp)?(?P<ws>\.ws)?(?P<sp2>\.sp)?\.cta_group::(?P<cg>[12])\.kind::(?P<kind>\w+)"
    r"(?P<bs>\.block_scale(?:\.(?P<vec>scale_vec::[124]X|block16|block32))?)?"
    r"(?P<rest>(?:\.[\w:]+)*)$")


def parse_opcode(text: str) -> dict:
    """Fields fixed by a tcgen05.mma opcode: kind, cta_group, sparse, ws, block (or None)."""
    t = text.strip().split()[0] if text.strip() else text
    mt = _OPCODE.fullmatch(t)
    if not mt:
        raise PtxError(f"not a tcgen05.mma opcode: {text!r}")
    kind = mt["kind"]
    if kind not in KINDS:
        raise PtxError(f"unknown tcgen05.mma kind {kind!r}; kinds: {', '.join(KINDS)}")
    kd = KINDS[kind]
    if kd.block_scale != bool(mt["bs"]):
        raise PtxError(f"kind::{kind} {'needs' if kd.block_scale else 'takes no'} .block_scale")
    block = None
    vec = mt["vec"]
    if vec and vec.startswith("block"):
        block = int(vec[5:])
    elif vec:
        block = next((b for (k, b), a in SCALE_VEC_ALIAS.items() if k == kind and a == vec), None)
        if block is None:
            raise PtxError(f".{vec} is not legal with kind::{kind}")
    return dict(kind=kind, cta_group=int(mt["cg"]), sparse=bool(mt["sp"] or mt["sp2"]), ws=bool(mt["ws"]),
                block=block)


def _field(word: int, fields, name: str) -> int:
    for f, lo, w in fields:
        if f == name:
            return (word >> lo) & ((1 << w) - 1)
    raise KeyError(name)


def from_idesc(opcode: str, idesc: int) -> Tcgen05Mma:
    """Decode a 32-bit instruction descriptor for the given opcode (kind, cta_group, ...)."""
    op = parse_opcode(opcode)
    kind = op["kind"]
    kd = KINDS[kind]
    idesc = int(idesc)
    if not 0 <= idesc < 1 << 32:
        raise PtxError(f"idesc must be a 32-bit value; got {idesc:#x}")
    fields = IDESC_FIELDS_BLOCK if kd.block_scale else IDESC_FIELDS
    reserved = IDESC_RESERVED_BLOCK if kd.block_scale else IDESC_RESERVED
    if idesc & reserved:
        raise PtxError(f"idesc {idesc:#010x} sets reserved bits {idesc & reserved:#x}")
    g = {f: _field(idesc, fields, f) for f, _, _ in fields}
    names = {v: t for t, v in kd.types.items()}
    for op_, f in (("A", "atype"), ("B", "btype")):
        if g[f] not in names:
            raise PtxError(f"idesc {op_} type code {g[f]} is not legal for kind::{kind}")
    if bool(g["sparse"]) != op["sparse"]:
        raise PtxError("idesc sparse bit (2) must match the opcode's .sp")
    kw = dict(sparse=op["sparse"], ws=op["ws"], a_major="mn" if g["a_major"] else "k",
              b_major="mn" if g["b_major"] else "k", negate_a=bool(g["negate_a"]),
              negate_b=bool(g["negate_b"]), sparse_id2=g["sparse_id2"])
    if kd.block_scale:
        stype = "ue8m0" if g["scale_type"] else "ue4m3"
        block = op["block"] or (16 if stype == "ue4m3" else 32)
        kw.update(a_scale_id=g["a_scale_id"], b_scale_id=g["b_scale_id"], k96=bool(g["k96"]))
        dtype = "f32"
    else:
        inv = {v: t for t, v in D_CODES.items()}
        if g["dtype"] not in inv:
            raise PtxError(f"idesc D type code {g['dtype']} is not legal")
        dtype, stype, block = inv[g["dtype"]], None, None
        kw.update(saturate=bool(g["saturate"]), max_shift=MAX_SHIFT[g["max_shift"]])
    ins = Tcgen05Mma(kind, g["m_dim"] << 4, g["n_dim"] << 3, dtype, names[g["atype"]],
                     names[g["btype"]], op["cta_group"], stype, block, **kw)
    return check(ins)


# --------------------------------------------------------------------------------------------
# sm_100 shared-memory descriptor
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmemDescriptor:
    """The fields of a 64-bit sm_100 shared-memory matrix descriptor (byte values)."""

    start: int  # byte address (multiple of 16)
    lbo: int  # leading-dimension byte offset (or, lbo_mode 1, an absolute address)
    sbo: int  # stride-dimension byte offset
    layout: str = "none"  # swizzle: none, 32B, 64B, 128B, 128B_base32B
    base_offset: int = 0
    lbo_mode: int = 0

    def encode(self) -> int:
        """The 64-bit descriptor word."""
        codes = {v: k for k, v in SMEM_LAYOUTS.items()}
        if self.layout not in codes:
            raise PtxError(f"swizzle layout must be one of {', '.join(codes)}; got {self.layout!r}")
        for name in ("start", "lbo", "sbo"):
            v = getattr(self, name)
            if v % 16 or not 0 <= v >> 4 < 1 << 14:
                raise PtxError(f"descriptor {name} {v:#x} must be a multiple of 16 below 2**18")
        v = dict(start=self.start >> 4, lbo=self.lbo >> 4, sbo=self.sbo >> 4,
                 version=SMEM_DESC_VERSION, base_offset=self.base_offset, lbo_mode=self.lbo_mode,
                 layout=codes[self.layout])
        out = 0
        for name, lo, w in SMEM_DESC_FIELDS:
            out |= (v[name] & ((1 << w) - 1)) << lo
        return out


def decode_smem_desc(desc: int) -> SmemDescriptor:
    """Fields of a 64-bit sm_100 descriptor; PtxError for a wrong version or swizzle code."""
    desc = int(desc) & (1 << 64) - 1
    g = {n: (desc >> lo) & ((1 << w) - 1) for n, lo, w in SMEM_DESC_FIELDS}
    if g["version"] != SMEM_DESC_VERSION:
        raise PtxError(f"sm_100 shared-memory descriptor {desc:#018x}: bits 47:46 must be "
                       f"{SMEM_DESC_VERSION} (a sm_90 wgmma descriptor?)")
    if g["layout"] not in SMEM_LAYOUTS:
        raise PtxError(f"descriptor {desc:#018x}: swizzle code {g['layout']} is invalid")
    return SmemDescriptor(g["start"] << 4, g["lbo"] << 4, g["sbo"] << 4, SMEM_LAYOUTS[g["layout"]],
                          g["base_offset"], g["lbo_mode"])


def zcm_fields(desc: int) -> dict[str, int]:
    """The fields of a 64-bit zero-column mask descriptor (facts.tcgen05.ZCM_DESC_FIELDS)."""
    desc = int(desc) & (1 << 64) - 1
    return {k: (desc >> lo) & ((1 << w) - 1) for k, lo, w in ZCM_DESC_FIELDS}


def zero_columns(desc: int, m: int, n: int) -> np.ndarray:
    """(n,) bool: the columns of D whose B column a ``tcgen05.mma.ws`` with zero-column mask
    descriptor ``desc`` and D of M rows reads as zeros.

    128/M sub-masks, sub-mask i over D columns [i*N*M/128, (i+1)*N*M/128); each alternates runs
    of skip+1 zeroed columns and use+1 used columns, starting with a zeroed run when ``first_i``
    is 1, after skipping ``start_i`` columns of that pattern [ISA "Zero-Column Mask Descriptor":
    its Examples 2-4; CUTLASS cute/arch/mma_sm100_desc.hpp ``MaskAndShiftB`` (skip span: "columns
    where 0 value is used", use span: "where B matrix data is used", first span 1: "start with
    where B is skipped") and ``make_column_zero_mask`` (skip span = the padding run of a conv
    row); the ISA's field table swaps the two span descriptions, the examples and CUTLASS
    agree].  PtxError: a start count not inside the first run (the ISA's "LSBs that must be
    skipped" continues into the next run; a third-party simulator says the hardware saturates;
    every source's example stays inside the first run)."""
    g = zcm_fields(desc)
    if m not in (32, 64, 128):
        raise PtxError(f"zero-column mask for M={m}: M must be 32, 64 or 128")
    if not g["nonzero"]:
        return np.zeros(n, bool)
    subs = 128 // m
    w = n // subs
    zero, use = g["skip_span"] + 1, g["use_span"] + 1
    out = []
    for i in range(subs):
        first, start = g[f"first{i}"], g[f"start{i}"]
        if start >= (zero if first else use):
            raise PtxError(f"zero-column mask descriptor {int(desc) & (1 << 64) - 1:#018x}: start "
                           f"count {start} of sub-mask {i} is not inside its first run of "
                           f"{zero if first else use} columns (not modelled: the sources disagree)")
        pos = (np.arange(w) + start) % (zero + use)
        out.append(pos < zero if first else pos >= use)
    return np.concatenate(out)


def zcm_shift(desc: int, m: int, max_shift: int) -> int:
    """The column shift of a zero-column mask descriptor: D column n of a ``.ws`` mma reads B
    column n + shift [ISA "Zero-Column Mask Descriptor", Example 4: "B Matrix with columns from
    2 to 129 will be used" for N=128, shift 2; CUTLASS make_column_zero_mask: shift = the filter
    tap of a 3-tap conv row, its mask in output columns], whatever the non-zero-mask bit.
    PtxError past the ISA's maximum (16 for M=32, 32 otherwise) or past the instruction
    descriptor's maximum shift for B reuse (``max_shift``: 0, 8, 16, 32) [INF: a shift beyond the
    B columns the descriptor says the B buffer holds is not described]."""
    shift = zcm_fields(desc)["shift"]
    lim = 16 if m == 32 else 32
    if shift > lim:
        raise PtxError(f"zero-column mask column shift {shift} > {lim}, the ISA's maximum for M={m}")
    if shift > max_shift:
        raise PtxError(f"zero-column mask column shift {shift} > the instruction descriptor's "
                       f"maximum shift {max_shift} (bits 31:30) is not modelled")
    return shift


# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------

_CANON_NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}


def _encode_d(ins: Tcgen05Mma, d: np.ndarray) -> np.ndarray:
    if ins.dtype == "s32":
        return (d.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    dt, ut = (np.float32, np.uint32) if ins.dtype == "f32" else (np.float16, np.uint16)
    with np.errstate(all="ignore"):
        codes = d.astype(dt).view(ut)
    return np.where(np.isnan(d), ut(_CANON_NAN[ins.dtype]), codes)


def compute_values(ins: Tcgen05Mma, A, B, C, arch: str, SA=None, SB=None) -> np.ndarray:
    """D values (float64; int64 for s32) from exact A (..., M, K), B (..., K, N), C (..., M, N)
    values (C already scaled; zeros where enable-input-d is false), on target ``arch``
    ('exact': one rounding of the exact result)."""
    if ins.negate_a:
        A = -A
    if ins.negate_b:
        B = -B
    if ins.kind == "i8":
        d = C.astype(np.int64) + np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.int64)
        if ins.saturate:
            return np.clip(d, -(1 << 31), (1 << 31) - 1)
        return ((d + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    if arch == "exact":
        if ins.block_scale:
            from warpsim.tensorcore.blockscale import expand
            sa, sb = expand(ins, SA, SB)
            A, B = A * sa, B * sb
        return engine.exact_dot_add(A, B, C, ins.dtype, "rn")
    row = numerics_for(arch, ins.kind)
    if ins.block_scale:
        return numerics.compute_block_scaled(ins, A, B, C, SA, SB, row)
    out = ins.dtype
    a, b, c, batch = engine.to_batch_last(A, B, C, numerics.operand_dtype(ins))
    # one step fuses 32 bytes of (compressed) A per row: sparse forms the whole logical K
    L = row.step_bytes // _ELEM_BYTES[ins.atype] * (2 if ins.sparse else 1)
    k = A.shape[-1]
    d = numerics.dot_steps(
        a, b, c, groups=[slice(s, min(s + L, k)) for s in range(0, k, L)],
        emin_a=numerics.EMIN[ins.atype], emin_b=numerics.EMIN[ins.btype],
        emin_c=numerics.EMIN[out], emin_out=numerics.EMIN[out], F=row.F,
        e_zero=row.e_zero_f32 if out == "f32" else row.e_zero_f16, out=out,
        rounding="rz" if out == "f32" else "rn",
        short=ins.atype in numerics.SHORT and ins.btype in numerics.SHORT)
    return engine.from_batch_last(d, batch)


def compute_codes(ins: Tcgen05Mma, a, b, c, *, arch: str = "sm_100a", sa=None, sb=None,
                  enable_input_d: bool = True, scale_input_d: int = 0) -> np.ndarray:
    """D codes from element codes: a (..., M, K), b (..., K, N), c (..., M, N) (D's type),
    block scales sa (..., M, V), sb (..., V, N).  fp6/fp4 codes in the low bits."""
    A = formats.decode(np.asarray(a), ins.atype)
    B = formats.decode(np.asarray(b), ins.btype)
    C = _input_d(ins, formats.decode(np.asarray(c), ins.dtype), enable_input_d, scale_input_d)
    SA = SB = None
    if ins.block_scale:
        SA, SB = formats.decode(np.asarray(sa), ins.stype), formats.decode(np.asarray(sb), ins.stype)
    return _encode_d(ins, compute_values(ins, A, B, C, arch, SA, SB))


def _input_d(ins: Tcgen05Mma, C: np.ndarray, enable: bool, shift: int) -> np.ndarray:
    if not enable:
        return np.zeros(C.shape, np.int64 if ins.dtype == "s32" else np.float64)
    if shift:
        if ins.kind not in ("f16", "tf32") or not 0 <= shift <= 15:
            raise PtxError("scale-input-d is 0..15 and for kind::f16 / kind::tf32 only")
        return np.ldexp(C, -shift)
    return C


def resolve(instr: str | Tcgen05Mma, *, shape=None, dtype=None, atype=None, btype=None,
            stype=None, idesc=None, **fields) -> Tcgen05Mma:
    """A :class:`Tcgen05Mma` from an instance, or an opcode plus either ``idesc`` or a shape
    and types."""
    if isinstance(instr, Tcgen05Mma):
        return instr
    if idesc is not None:
        if shape is not None or dtype is not None or atype is not None:
            raise PtxError("give either idesc or shape and types, not both")
        return from_idesc(instr, idesc)
    op = parse_opcode(instr)
    if shape is None or dtype is None or atype is None:
        raise PtxError(f"{instr}: the shape and types live in the instruction descriptor; "
                       "pass idesc=..., or shape=, dtype=, atype= (btype=, stype=)")
    return make(op["kind"], shape, dtype=dtype, atype=atype, btype=btype, stype=stype,
                block=op["block"], cta_group=op["cta_group"], sparse=op["sparse"], ws=op["ws"],
                **fields)


def matmul(instr: str | Tcgen05Mma, A, B, C=None, *, arch: str = "sm_100a", scale_A=None,
           scale_B=None, enable_input_d: bool | None = None, scale_input_d: int = 0,
           zero_column_mask: int | None = None, **form) -> np.ndarray:
    """D = A @ B (+ C) as one tcgen05.mma computes it.

    ``instr``: a :class:`Tcgen05Mma` or an opcode such as ``'tcgen05.mma.cta_group::1.kind::f16'``
    with ``idesc=`` or ``shape='m128n256k16', dtype='f32', atype='f16'`` (``btype``, ``stype``
    and descriptor fields such as ``negate_a`` as keywords).  A (..., M, K), B (..., K, N),
    C (..., M, N) values are rounded to their types (nearest even); C None means
    enable-input-d false.  Block-scaled kinds take scale_A (..., M, V) and scale_B (..., V, N)
    values.  ``.ws`` forms take ``zero_column_mask`` (the 64-bit descriptor): B is then
    (..., K, N + column shift) and read as :func:`ws_b_operand` says.  Returns D values
    (float64; int64 for s32)."""
    ins = resolve(instr, **form)
    if arch == "auto":
        arch = "sm_100a"
    if arch != "exact":
        numerics_for(arch, ins.kind)
    m, n, k = ins.shape
    A, B = np.asarray(A), np.asarray(B)
    if zero_column_mask is not None:
        B = ws_b_operand(ins, B, zero_column_mask)
    if A.shape[-2:] != (m, k) or B.shape[-2:] != (k, n):
        raise ShapeError(f"{ins.text}: A must be (..., {m}, {k}) and B (..., {k}, {n}); got "
                         f"{A.shape} and {B.shape}")
    if ins.sparse:  # A as its logical matrix: 2 of every 4 (tf32: 1 of every 2) may be non-zero
        a_codes, nib = compress(ins, formats.encode(A, ins.atype))
    if enable_input_d is None:
        enable_input_d = C is not None
    if C is None:
        C = np.zeros((m, n))
    C = np.asarray(C)
    if C.shape[-2:] != (m, n):
        raise ShapeError(f"{ins.text}: C must be (..., {m}, {n}); got {C.shape}")
    kw = {}
    if ins.block_scale:
        v = ins.scale_vec
        if scale_A is None or scale_B is None:
            raise ShapeError(f"{ins.text} needs scale_A (..., {m}, {v}) and scale_B (..., {v}, {n})")
        kw = dict(sa=formats.encode(scale_A, ins.stype), sb=formats.encode(scale_B, ins.stype))
        if kw["sa"].shape[-2:] != (m, v) or kw["sb"].shape[-2:] != (v, n):
            raise ShapeError(f"scale_A must be (..., {m}, {v}) and scale_B (..., {v}, {n})")
    if ins.sparse:
        d = compute_sparse_codes(ins, a_codes, formats.encode(B, ins.btype), formats.encode(C, ins.dtype),
                                 nib, arch=arch, enable_input_d=enable_input_d,
                                 scale_input_d=scale_input_d, **kw)
    else:
        d = compute_codes(ins, formats.encode(A, ins.atype), formats.encode(B, ins.btype),
                          formats.encode(C, ins.dtype), arch=arch, enable_input_d=enable_input_d,
                          scale_input_d=scale_input_d, **kw)
    return formats.decode(d, ins.dtype)


def with_fields(ins: Tcgen05Mma, **changes) -> Tcgen05Mma:
    """A checked copy of ``ins`` with some fields changed."""
    return check(replace(ins, **changes))


# --------------------------------------------------------------------------------------------
# Sparse forms: compressed A plus per-chunk metadata nibbles
# --------------------------------------------------------------------------------------------


def sparse_positions(ins: Tcgen05Mma, nibbles) -> np.ndarray:
    """int64 (..., M, K/2): the logical k of every stored element of A, from the metadata
    nibbles (..., M, chunks) (idx0 in bits 1:0 places stored element -- 4:8: pair -- 0, idx1
    in bits 3:2 element 1; tf32 counts 16-bit halves).  MetadataError names the first nibble
    the ISA leaves undefined (row, chunk, value)."""
    sm = SPARSE_META[ins.kind]
    nib = np.asarray(nibbles, np.int64)
    ok = np.isin(nib, SPARSE_NIBBLES[sm.granularity])
    if not ok.all():
        *batch, r, ch = (int(x) for x in np.argwhere(~ok)[0])
        v = int(nib[tuple(np.argwhere(~ok)[0])])
        err = MetadataError(
            f"invalid sparsity metadata for {ins.opcode}: row {r}, chunk {ch} (k {ch * sm.chunk}.."
            f"{ch * sm.chunk + sm.chunk - 1}) has nibble 0x{v:X}; defined values "
            + ", ".join(f"0x{x:X}" for x in SPARSE_NIBBLES[sm.granularity])
            + " (the hardware result is undefined otherwise)")
        err.row, err.chunk, err.value = r, ch, v
        raise err
    i0, i1 = nib & 3, nib >> 2
    if sm.chunk == 2:
        pos = (i0 >> 1)[..., None]
    elif sm.chunk == 8:
        pos = np.stack([2 * i0, 2 * i0 + 1, 2 * i1, 2 * i1 + 1], -1)
    else:
        pos = np.stack([i0, i1], -1)
    pos = pos + (np.arange(nib.shape[-1]) * sm.chunk)[:, None]
    return pos.reshape(pos.shape[:-2] + (-1,))


def compress(ins: Tcgen05Mma, a) -> tuple[np.ndarray, np.ndarray]:
    """Logical A codes (..., M, K) -> (stored codes (..., M, K/2), nibbles (..., M, chunks)):
    the non-zero elements (4:8: pairs) of each chunk, filled up with the lowest zero positions,
    indices increasing.  ShapeError names a chunk with too many non-zeros."""
    sm = SPARSE_META[ins.kind]
    a = np.asarray(a)
    nz = formats.decode(a, ins.atype) != 0
    g = sm.chunk
    ch = nz.reshape(nz.shape[:-1] + (-1, g))
    if g == 8:
        ch = ch[..., 0::2] | ch[..., 1::2]
    keep = 1 if g == 2 else 2
    cnt = ch.sum(-1)
    if (cnt > keep).any():
        *_, r, c = (int(x) for x in np.argwhere(cnt > keep)[0])
        raise ShapeError(f"{ins.text}: sparse A must be {sm.granularity} structured; row {r}, "
                         f"k {c * g}..{c * g + g - 1} holds too many non-zero values")
    units = ch.shape[-1]  # 4 slots (pairs for 4:8) or 2 (tf32)
    rank = np.where(ch, 0, 1) * units + np.arange(units)
    idx = np.sort(np.argsort(rank, axis=-1, kind="stable")[..., :keep], axis=-1)
    if g == 2:
        nib = np.where(idx[..., 0] == 0, 0x4, 0xE)
        cols = idx
    else:
        nib = idx[..., 0] | idx[..., 1] << 2
        cols = np.stack([2 * idx[..., 0], 2 * idx[..., 0] + 1, 2 * idx[..., 1],
                         2 * idx[..., 1] + 1], -1) if g == 8 else idx
    cols = cols + (np.arange(cols.shape[-2]) * g)[:, None]
    cols = cols.reshape(cols.shape[:-2] + (-1,))
    return np.take_along_axis(a, cols, axis=-1), nib.astype(np.int64)


def sparse_meta_cells(ins: Tcgen05Mma) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lane, column, bit) of every metadata nibble of the sparse form ``ins`` in Tensor Memory,
    relative to the metadata address, each int64 (copies, rows per CTA, chunks): layout D
    (M=128; M=256 cta_group::2, each CTA its own 128 rows at the same address), F (M=64: 16-row
    groups 32 lanes apart), .ws M=64 / 32 (128/M copies M lanes apart, copy g serving D's g-th
    part of N [INF]); the selector (idesc bits 1:0) picks the column of a pair for f16 / tf32.
    Data and sources: facts.tcgen05 SPARSE_META, SPARSE_META_LAYOUTS.  PtxError where no
    source gives the layout (cta_group::2 M=128, the ISA's layout C) or the selector (2, 3)."""
    from warpsim.facts.tcgen05 import SPARSE_META_LAYOUTS
    from warpsim.facts.tcgen05 import sparse_meta_cells as cells

    if not ins.sparse:
        raise PtxError(f"{ins.text} is not a sparse form")
    sm = SPARSE_META[ins.kind]
    rows = ins.m // ins.cta_group
    lay = SPARSE_META_LAYOUTS.get((rows, ins.cta_group, bool(ins.ws)))
    if lay is None or ins.kind not in lay.kinds:
        raise PtxError(f"sparse tcgen05.mma with M={ins.m}, cta_group::{ins.cta_group}"
                       f"{' .ws' if ins.ws else ''}: its metadata layout is not modelled (cta_group::2 "
                       "M=128 uses the ISA's layout C, drawn only in its Figures 209/210; CuTe's 2SM "
                       "atom gives D the dense layout B instead, and no source runs it)")
    if ins.sparse_id2 not in sm.selectors:
        raise PtxError(f"sparsity selector {ins.sparse_id2} with kind::{ins.kind}: "
                       f"{', '.join(map(str, sm.selectors))} modelled (ISA: 0 for i8/f8f6f4; CuTe, "
                       "Mosaic GPU and the Triton port use 0/1 for f16/tf32; no source uses 2-3)")
    chunks = ins.k // sm.chunk
    out = [cells(ins.kind, rows, chunks, ins.sparse_id2, group_stride=lay.group_stride, copy=g)
           for g in range(lay.copies)]
    return tuple(np.stack([o[i] for o in out]).astype(np.int64) for i in range(3))


def ws_b_operand(ins: Tcgen05Mma, b, desc: int) -> np.ndarray:
    """B (..., K, N + shift) as a ``.ws`` mma with zero-column mask descriptor ``desc`` reads it:
    (..., K, N), D column j taking B column j + shift, masked columns +0 (code 0: B given as
    codes or values).  See :func:`zero_columns` and :func:`zcm_shift`."""
    if not ins.ws:
        raise PtxError(f"{ins.text}: the zero-column mask descriptor is for tcgen05.mma.ws only")
    b = np.asarray(b)
    shift = zcm_shift(desc, ins.m, ins.max_shift)
    if b.shape[-1] < ins.n + shift:
        raise ShapeError(f"{ins.text}: B needs N + shift = {ins.n + shift} columns; got {b.shape[-1]}")
    out = b[..., :, shift:shift + ins.n].copy()
    out[..., :, zero_columns(desc, ins.m, ins.n)] = 0
    return out


def compute_sparse_codes(ins: Tcgen05Mma, a, b, c, nibbles, *, arch: str = "sm_100a", sa=None,
                         sb=None, enable_input_d: bool = True, scale_input_d: int = 0) -> np.ndarray:
    """D codes of a sparse tcgen05.mma from the stored A codes (M, K/2), B (K, N), C (M, N)
    codes and the metadata nibbles (M, chunks).

    Each row of D is the dense form of half the K on the stored row of A and the B rows its
    metadata selects: positions not stored take no part (an Inf or NaN in such a B row does not
    reach D) [INF: as warpsim's mma.sp model, which an H100 confirms for sm_90; no source says
    how tcgen05 does it].  Block scales: the dense form's scale vectors."""
    if not ins.sparse:
        raise PtxError(f"{ins.text} is not a sparse form")
    dense = replace(ins, sparse=False, sparse_id2=0)
    cols = sparse_positions(ins, nibbles)
    a = np.asarray(a)
    b = np.asarray(b)
    m, n, _ = ins.shape
    if a.shape[-2:] != (m, ins.k // 2) or b.shape[-2:] != (ins.k, n):
        raise ShapeError(f"{ins.text}: stored A must be ({m}, {ins.k // 2}) and B ({ins.k}, {n}); "
                         f"got {a.shape} and {b.shape}")
    bg = np.take_along_axis(b[None, :, :], cols[:, :, None], axis=1)  # (M, K/2, N)
    c = np.asarray(c)
    kw = {}
    if ins.block_scale:
        kw = dict(sa=np.asarray(sa)[:, None, :], sb=np.broadcast_to(np.asarray(sb)[None], (m,) + np.shape(sb)))
    d = compute_codes(dense, a[:, None, :], bg, c[:, None, :], arch=arch,
                      enable_input_d=enable_input_d, scale_input_d=scale_input_d, **kw)
    return d[:, 0, :]
