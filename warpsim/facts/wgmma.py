"""``wgmma.mma_async`` forms as data: shapes, types, operand lists, targets.

Source: PTX ISA 9.x section 9.7.15 (warpgroup MMA), corrected to the verdicts of ptxas 13.0
and 13.5 on the corpus in ``tests/data/ptxas_truth_wgmma.jsonl.gz`` (``tools/ptxas_truth_wgmma.py``).
Every form is legal on ``sm_90a`` only (not sm_90, not any Blackwell target) at every PTX ISA
version warpsim models (9.0 ... 9.5; wgmma itself arrived in 8.0).

M is always 64; K is fixed by the type so that one instruction covers 32 bytes of K (64 for
the sparse forms, whose A is stored compressed to half).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

__all__ = ["WgmmaForm", "FORMS", "TARGETS", "N_FLOAT", "N_INT", "form_of", "TYPE_BITS"]

#: Targets on which ptxas accepts wgmma.
TARGETS = ("sm_90a",)
#: N for the floating-point forms: 8 ... 256 in steps of 8.
N_FLOAT = tuple(range(8, 257, 8))
#: N for the integer and single-bit forms: 8, 16, 24, then 32 ... 256 in steps of 16.
N_INT = (8, 16, 24) + tuple(range(32, 257, 16))

TYPE_BITS: Mapping[str, int] = MappingProxyType(
    {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1,
     "f32": 32, "s32": 32})


@dataclass(frozen=True)
class WgmmaForm:
    """One family of wgmma forms.

    ``atypes``/``btypes``/``dtypes``: legal A, B and D types (any A with any B);
    ``k``: K of the dense form (the sparse form has 2k); ``ns``: legal N;
    ``scale``: takes imm-scale-a/b operands (+1 or -1); ``trans``: takes imm-trans-a/b
    (imm-trans-a only with A from a descriptor); ``satfinite``: may carry ``.satfinite``;
    ``bitop``: the b1 operation words (``and.popc``)."""

    family: str
    atypes: tuple[str, ...]
    btypes: tuple[str, ...]
    dtypes: tuple[str, ...]
    k: int
    ns: tuple[int, ...]
    scale: bool
    trans: bool
    satfinite: bool = False
    bitop: str | None = None

    def operand_names(self, a_desc: bool, sparse: bool = False) -> tuple[str, ...]:
        """The operand list after D, A, B, in order (as the PTX ISA names them)."""
        out = ("sp-meta", "sp-sel") if sparse else ()
        out += ("scale-d",)
        if self.scale:
            out += ("imm-scale-a", "imm-scale-b")
        if self.trans:
            out += ("imm-trans-a", "imm-trans-b") if a_desc else ("imm-trans-b",)
        return out


FORMS: tuple[WgmmaForm, ...] = (
    WgmmaForm("f16", ("f16",), ("f16",), ("f16", "f32"), 16, N_FLOAT, True, True),
    WgmmaForm("bf16", ("bf16",), ("bf16",), ("f32",), 16, N_FLOAT, True, True),
    WgmmaForm("tf32", ("tf32",), ("tf32",), ("f32",), 8, N_FLOAT, True, False),
    WgmmaForm("fp8", ("e4m3", "e5m2"), ("e4m3", "e5m2"), ("f16", "f32"), 32, N_FLOAT, True, False),
    WgmmaForm("int", ("s8", "u8"), ("s8", "u8"), ("s32",), 32, N_INT, False, False, satfinite=True),
    WgmmaForm("b1", ("b1",), ("b1",), ("s32",), 256, N_INT, False, False, bitop="and.popc"),
)


def form_of(atype: str, btype: str, dtype: str) -> WgmmaForm | None:
    """The form family taking these types, or None."""
    for f in FORMS:
        if atype in f.atypes and btype in f.btypes and dtype in f.dtypes:
            return f
    return None
