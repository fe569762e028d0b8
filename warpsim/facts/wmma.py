"""The ``wmma`` instruction family as data: shapes, element types and fragment sizes.

``wmma.load.{a,b,c}`` moves a matrix tile from memory into a warp's registers, ``wmma.mma``
multiplies fragments, ``wmma.store.d`` writes a result tile back.  This module lists, from the
PTX ISA's "Warp Level Matrix Multiply-Accumulate Instructions" section, every geometry (shape and
element type of each fragment), how many registers a fragment takes per lane, and the register
type.  Which spellings ptxas accepts on which target is the verdict table
``tests/data/ptxas_truth_wmma.jsonl.gz`` (see :mod:`warpsim.tensorcore.wmma` for the checker);
which register bit holds which matrix element is measured data (:mod:`warpsim.tensorcore.wmma`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterator, Mapping

#: shape name -> (M, N, K)
SHAPES: Mapping[str, tuple[int, int, int]] = MappingProxyType({
    "m16n16k16": (16, 16, 16), "m8n32k16": (8, 32, 16), "m32n8k16": (32, 8, 16),
    "m16n16k8": (16, 16, 8), "m8n8k4": (8, 8, 4), "m8n8k32": (8, 8, 32), "m8n8k128": (8, 8, 128),
})

#: element type -> bits per element in memory and in registers
ELEMENT_BITS: Mapping[str, int] = MappingProxyType({
    "f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8,
    "s4": 4, "u4": 4, "b1": 1, "s32": 32,
})


@dataclass(frozen=True)
class Fragment:
    """One fragment kind: ``frag`` 'a' | 'b' | 'c' (C and D share it), its shape and type."""

    frag: str
    shape: str
    type: str
    nregs: int  # registers per lane
    reg_bits: int  # 32, or 64 for f64
    since: str  # first target (PTX ISA "Target ISA notes")
    layouts: tuple[str, ...] = ("row", "col")

    @property
    def rows_cols(self) -> tuple[int, int]:
        """(rows, columns) of the matrix this fragment holds: A is MxK, B KxN, C/D MxN."""
        m, n, k = SHAPES[self.shape]
        return {"a": (m, k), "b": (k, n), "c": (m, n)}[self.frag]

    @property
    def elems_per_reg(self) -> int:
        return self.reg_bits // ELEMENT_BITS[self.type]


def _frags() -> Iterator[Fragment]:
    f16_shapes = ("m16n16k16", "m8n32k16", "m32n8k16")
    for s in f16_shapes:
        yield Fragment("a", s, "f16", 8, 32, "sm_70")
        yield Fragment("b", s, "f16", 8, 32, "sm_70")
        yield Fragment("c", s, "f16", 4, 32, "sm_70")
        yield Fragment("c", s, "f32", 8, 32, "sm_70")
        yield Fragment("c", s, "s32", 8, 32, "sm_72")
    bf16_a = {"m16n16k16": 4, "m8n32k16": 2, "m32n8k16": 8}
    bf16_b = {"m16n16k16": 4, "m8n32k16": 8, "m32n8k16": 2}
    i8_a = {"m16n16k16": 2, "m8n32k16": 1, "m32n8k16": 4}
    i8_b = {"m16n16k16": 2, "m8n32k16": 4, "m32n8k16": 1}
    for s in f16_shapes:
        yield Fragment("a", s, "bf16", bf16_a[s], 32, "sm_80")
        yield Fragment("b", s, "bf16", bf16_b[s], 32, "sm_80")
        for t in ("s8", "u8"):
            yield Fragment("a", s, t, i8_a[s], 32, "sm_72")
            yield Fragment("b", s, t, i8_b[s], 32, "sm_72")
    yield Fragment("a", "m16n16k8", "tf32", 4, 32, "sm_80")
    yield Fragment("b", "m16n16k8", "tf32", 4, 32, "sm_80")
    yield Fragment("c", "m16n16k8", "f32", 8, 32, "sm_80")
    yield Fragment("a", "m8n8k4", "f64", 1, 64, "sm_80")
    yield Fragment("b", "m8n8k4", "f64", 1, 64, "sm_80")
    yield Fragment("c", "m8n8k4", "f64", 2, 64, "sm_80")
    for t in ("s4", "u4"):
        yield Fragment("a", "m8n8k32", t, 1, 32, "sm_75", ("row",))
        yield Fragment("b", "m8n8k32", t, 1, 32, "sm_75", ("col",))
    yield Fragment("c", "m8n8k32", "s32", 2, 32, "sm_75")
    yield Fragment("a", "m8n8k128", "b1", 1, 32, "sm_75", ("row",))
    yield Fragment("b", "m8n8k128", "b1", 1, 32, "sm_75", ("col",))
    yield Fragment("c", "m8n8k128", "s32", 2, 32, "sm_75")


#: (frag, shape, type) -> Fragment, for every fragment the PTX ISA defines
FRAGMENTS: Mapping[tuple[str, str, str], Fragment] = MappingProxyType(
    {(f.frag, f.shape, f.type): f for f in _frags()})


@dataclass(frozen=True)
class MmaGeom:
    """One ``wmma.mma`` geometry: shape, D/A/B/C types, its qualifier options and first target."""

    shape: str
    dtype: str
    atype: str
    btype: str
    ctype: str
    since: str
    satfinite: bool = False  # whether the ISA lists .satfinite for it
    rnd: tuple[str, ...] = ()  # rounding qualifiers the ISA lists
    ops: tuple[str, ...] = ()  # b1: the bit operation (.xor/.and) with its first target
    layouts: tuple[tuple[str, str], ...] = (("row", "row"), ("row", "col"), ("col", "row"),
                                            ("col", "col"))


def _geoms() -> Iterator[MmaGeom]:
    for s in ("m16n16k16", "m8n32k16", "m32n8k16"):
        for d in ("f16", "f32"):
            for c in ("f16", "f32"):
                yield MmaGeom(s, d, "f16", "f16", c, "sm_70")
        yield MmaGeom(s, "f32", "bf16", "bf16", "f32", "sm_80")
        for a in ("s8", "u8"):
            yield MmaGeom(s, "s32", a, a, "s32", "sm_72", satfinite=True)
    yield MmaGeom("m16n16k8", "f32", "tf32", "tf32", "f32", "sm_80")
    yield MmaGeom("m8n8k4", "f64", "f64", "f64", "f64", "sm_80", rnd=("rn", "rz", "rm", "rp"))
    for a in ("s4", "u4"):
        yield MmaGeom("m8n8k32", "s32", a, a, "s32", "sm_75", satfinite=True,
                      layouts=(("row", "col"),))
    yield MmaGeom("m8n8k128", "s32", "b1", "b1", "s32", "sm_75", ops=("xor", "and"),
                  layouts=(("row", "col"),))


#: every wmma.mma geometry of the PTX ISA
MMA_GEOMS: tuple[MmaGeom, ...] = tuple(_geoms())

#: which fragment type C/D uses for each accumulator type
C_FRAG_TYPE = MappingProxyType({"f16": "f16", "f32": "f32", "s32": "s32", "f64": "f64"})
