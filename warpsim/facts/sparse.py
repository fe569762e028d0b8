"""Facts of sparse ``mma.sp``: its forms, metadata maps, nibble sets and selector legality.

Legality follows ptxas 13.0 (tests/data/ptxas_truth_sparse.jsonl.gz) and the PTX ISA 9.0 text;
the metadata maps were measured on an H100 (docs/validation.md).  Everything here takes a decoded
:class:`~warpsim.facts.isa.Instruction`; :mod:`warpsim.tensorcore.sparse` builds on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import (
    F8, F8F6F4, SM100_SPECIFIC, SM120_ARCH_SPECIFIC, SM120_SPECIFIC, Form, Instruction, _pairs)


#: The two spellings of the sparse qualifier.
VARIANTS = ("sp", "sp::ordered_metadata")


# Legality follows ptxas 13.0 (tests/data/ptxas_truth.jsonl.gz) and the PTX ISA 9.0 text.
#: Every documented sparse form; shapes are the *logical* M x N x K.
SPARSE_FORMS: tuple[Form, ...] = (
    Form("sp-f16", {(16, 8, 16): 80, (16, 8, 32): 80}, (("f16", "f16"),),
         (("f16", "f16"), ("f32", "f32"))),
    Form("sp-bf16", {(16, 8, 16): 80, (16, 8, 32): 80}, (("bf16", "bf16"),), (("f32", "f32"),)),
    Form("sp-tf32", {(16, 8, 8): 80, (16, 8, 16): 80}, (("tf32", "tf32"),), (("f32", "f32"),)),
    Form("sp-fp8", {(16, 8, 64): 89}, _pairs(F8, F8), (("f32", "f32"),)),
    Form("sp-int8", {(16, 8, 32): 80, (16, 8, 64): 80}, _pairs(("s8", "u8"), ("s8", "u8")),
         (("s32", "s32"),), satfinite=True),
    Form("sp-int4", {(16, 8, 64): 80, (16, 8, 128): 80}, _pairs(("s4", "u4"), ("s4", "u4")),
         (("s32", "s32"),), satfinite=True),
    # e4m3/e5m2 on both sides also assembles on the sm_100 family (as the dense form does)
    Form("sp-f8f6f4", {(16, 8, 64): SM100_SPECIFIC + SM120_SPECIFIC}, _pairs(F8F6F4, F8F6F4),
         (("f16", "f16"), ("f32", "f32")), kind="f8f6f4",
         pair_req={p: SM120_SPECIFIC for p in _pairs(F8F6F4, F8F6F4) if p not in _pairs(F8, F8)}),
    Form("sp-mxf8f6f4", {(16, 8, 64): SM120_SPECIFIC}, _pairs(F8F6F4, F8F6F4), (("f32", "f32"),),
         kind="mxf8f6f4", block_scale=True, scale=((1, "ue8m0"),), default_scale_vec=1),
    Form("sp-mxf4", {(16, 8, 128): SM120_ARCH_SPECIFIC}, (("e2m1", "e2m1"),), (("f32", "f32"),),
         kind="mxf4", block_scale=True, scale=((2, "ue8m0"),), default_scale_vec=2),
    Form("sp-mxf4nvf4", {(16, 8, 128): SM120_ARCH_SPECIFIC}, (("e2m1", "e2m1"),),
         (("f32", "f32"),), kind="mxf4nvf4", block_scale=True,
         scale=((2, "ue8m0"), (4, "ue4m3"), (4, "ue8m0")), default_scale_vec=None,
         # ptxas 13.5 assembles the sparse 4X .ue8m0 form from .version 9.1, as the dense one
         scale_req={(4, "ue8m0"): ((9, 1), None)}),
)

#: Requirements beyond shape and type pair: (form, dtype) -> target requirement.  ptxas 13.0
#: rejects an f16 accumulator with FP8 operands on the sm_100 family ("F16 accumulator and F8
#: floating point type not supported").
DTYPE_REQ: Mapping[tuple[str, str], object] = MappingProxyType({("sp-f8f6f4", "f16"): SM120_SPECIFIC})


def extra_requirements(form: str, dtype: str) -> list[tuple[str, object]]:
    """(what needs it, requirement) pairs the decoder adds for a sparse form."""
    req = DTYPE_REQ.get((form, dtype))
    return [(f".{dtype} accumulator with .kind::f8f6f4 mma.sp", req)] if req is not None else []


#: Forms that exist only as ``.sp::ordered_metadata`` (the sm_120 ``kind::`` forms).
ORDERED_ONLY = frozenset(f.name for f in SPARSE_FORMS if f.kind)

# --------------------------------------------------------------------------------------------
# Metadata facts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataClass:
    """How the lanes and nibbles of the metadata words map onto (row, chunk) of A.

    Rows and chunks are bit concatenations (low bits first) of named fields: ``g`` = lane bits
    4:2, ``t0``/``t1`` = lane bits 0/1, ``j`` = the nibble index (0..7) in the word, ``j01`` its
    bits 1:0 and ``j2`` its bit 2.  ``select`` names the lane bits that must equal the selector
    for a lane to supply metadata ('' = every lane; the selector must then be 0).
    """

    name: str
    select: str
    row: str
    chunk: str

    @property
    def selectors(self) -> tuple[int, ...]:
        return tuple(range(1 << _FIELD_BITS[self.select])) if self.select else (0,)


_FIELD_BITS = {"g": 3, "t": 2, "t0": 1, "t1": 1, "j": 3, "j01": 2, "j2": 1, "": 0}

#: The four metadata maps (measured on an H100, docs/validation.md).
METADATA_CLASSES: Mapping[str, MetadataClass] = MappingProxyType({
    # one lane per quad (t == f): bits 15:0 row g, bits 31:16 row g+8
    "quad": MetadataClass("quad", "t", "g j2", "j01"),
    # a lane pair (t>>1 == f): lane bit 0 picks the half of K; bits 15:0 row g, 31:16 row g+8
    "pair-k": MetadataClass("pair-k", "t1", "g j2", "j01 t0"),
    # a lane pair (t>>1 == f): lane bit 0 picks the row (g or g+8); the word covers all of K
    "pair-row": MetadataClass("pair-row", "t1", "g t0", "j"),
    # every lane: lane bit 0 picks the row, lane bit 1 the half of K
    "all": MetadataClass("all", "", "g t0", "j t1"),
})

#: (form, logical K) -> metadata class.
_CLASS_OF = {
    ("sp-f16", 16): "quad", ("sp-f16", 32): "pair-k",
    ("sp-bf16", 16): "quad", ("sp-bf16", 32): "pair-k",
    ("sp-tf32", 8): "quad", ("sp-tf32", 16): "pair-k",
    ("sp-int8", 32): "pair-row", ("sp-int8", 64): "all",
    ("sp-int4", 64): "pair-row", ("sp-int4", 128): "all",
    ("sp-fp8", 64): "all", ("sp-f8f6f4", 64): "all", ("sp-mxf8f6f4", 64): "all",
    ("sp-mxf4", 128): "all", ("sp-mxf4nvf4", 128): "all",
}

#: Nibbles meaning (idx0, idx1) with idx0 < idx1: the only ones ``::ordered_metadata`` defines.
ORDERED_NIBBLES = (0x4, 0x8, 0x9, 0xC, 0xD, 0xE)
#: Nibbles plain ``.sp`` defines: any two different indices.
SP_NIBBLES = tuple(v for v in range(16) if (v & 3) != (v >> 2))
#: tf32 (1:2): keep element 0 (0x4) or element 1 (0xE).
TF32_NIBBLES = (0x4, 0xE)


def _require_sparse(ins: Instruction) -> None:
    if not ins.sparse:
        raise PtxError(f"{ins.text} is not a sparse mma.sp instruction")


def metadata_class(ins: Instruction) -> MetadataClass:
    """The metadata map of a sparse instruction."""
    _require_sparse(ins)
    return METADATA_CLASSES[_CLASS_OF[(ins.form, ins.k)]]


def legal_selectors(ins: Instruction) -> tuple[int, ...]:
    """Sparsity-selector values the PTX ISA defines for the instruction."""
    return metadata_class(ins).selectors


def check_selector(ins: Instruction, selector: object) -> int:
    """The selector as an int if the PTX ISA defines it for ``ins``; PtxError otherwise."""
    if isinstance(selector, (bool, np.bool_)) or not isinstance(selector, (int, np.integer)):
        raise TypeError(f"sparsity selector must be an integer immediate (Python or NumPy int, not "
                        f"bool or float), got {type(selector).__name__} {selector!r}")
    f = int(selector)
    legal = legal_selectors(ins)
    if f not in legal:
        note = ""
        if ins.form == "sp-f16" and ins.k == 32 and ins.dtype == "f32" and f in (2, 3):
            note = ("; ptxas 13.0 assembles it, but the H100 stops the kernel with an "
                    "illegal-instruction error")
        raise PtxError(f"sparsity selector {f} is undefined for {ins.text}: the PTX ISA allows "
                       f"{', '.join(map(str, legal))}{note}")
    return f
