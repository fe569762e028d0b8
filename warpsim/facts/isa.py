"""The mma.sync instruction family as data: forms, architectures and the decoded Instruction.

Every documented ``mma.sync`` form is one row of :data:`FORMS`.  A row fixes the shape(s), the
legal type tuples, layouts and optional qualifiers, and the first architecture that has it.  The
parser (:mod:`warpsim.tensorcore.decode`) turns text into an :class:`Instruction`; everything downstream
(layouts, packing, execution) reads only the Instruction's fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Iterator, Mapping

# --------------------------------------------------------------------------------------------
# Architectures
# --------------------------------------------------------------------------------------------


#: PTX ISA versions warpsim models, each with the CUDA release whose ptxas first reads it
#: (PTX ISA 9.y ships with CUDA 13.y: the PTX ISA release history; ptxas 13.0 reads up to 9.0
#: and ptxas 13.5 up to 9.5, observed).  Legality before 9.0 is not modelled.
PTX_VERSIONS: Mapping[tuple[int, int], tuple[int, int]] = MappingProxyType(
    {(9, y): (13, y) for y in range(6)}
)
#: The newest PTX ISA version warpsim knows: ``decode(..., ptx_version=None)`` means this one.
LATEST_PTX = max(PTX_VERSIONS)
OLDEST_PTX = min(PTX_VERSIONS)


@dataclass(frozen=True)
class Arch:
    """A PTX target: its SM version number and feature suffix ('' | 'a' | 'f')."""

    name: str
    sm: int
    suffix: str = ""
    model: str = ""  # the numerics model this target runs (see warpsim.tensorcore.numerics)
    since: tuple[int, int] = OLDEST_PTX  # first PTX ISA version with this .target
    #: Why ``model`` simulates this target when it is not the target's own measured model.
    model_source: str = ""


def _arch(name: str, model: str, since: tuple[int, int] = OLDEST_PTX, source: str = "") -> Arch:
    base = name[3:]
    suffix = base[-1] if base[-1] in "af" else ""
    sm = int(base[:-1] if suffix else base)
    return Arch(name, sm, suffix, model, since, source)


#: sm_107: the PTX ISA 9.4 target that ptxas 13.5 treats like sm_103 for every mma form
#: (tests/data/ptxas_truth.jsonl.gz: identical verdicts but for the meaningless .kind::ti16).  No numerics of its own are
#: published; it runs the sm_100a model, like sm_103.
_SM107 = ("sm_100a model: ptxas 13.5 accepts on sm_107a the documented mma forms of sm_103a; "
          "no published measurement of sm_107 numerics")


#: Every target name warpsim accepts, mapped to the numerics model that simulates it.
ARCHS: Mapping[str, Arch] = MappingProxyType(
    {
        a.name: a
        for a in (
            _arch("sm_70", "sm_70"),
            _arch("sm_72", "sm_70"),
            _arch("sm_75", "sm_75"),
            _arch("sm_80", "sm_80"),
            _arch("sm_86", "sm_80"),
            _arch("sm_87", "sm_80"),
            _arch("sm_88", "sm_80"),
            _arch("sm_89", "sm_89"),
            _arch("sm_90", "sm_90"),
            _arch("sm_90a", "sm_90"),
            _arch("sm_100", "sm_100a"),
            _arch("sm_100a", "sm_100a"),
            _arch("sm_100f", "sm_100a"),
            _arch("sm_103", "sm_100a"),
            _arch("sm_103a", "sm_100a"),
            _arch("sm_103f", "sm_100a"),
            _arch("sm_107", "sm_100a", (9, 4), _SM107),
            _arch("sm_107a", "sm_100a", (9, 4), _SM107),
            _arch("sm_107f", "sm_100a", (9, 4), _SM107),
            _arch("sm_110", "sm_100a"),
            _arch("sm_110a", "sm_100a"),
            _arch("sm_110f", "sm_100a"),
            _arch("sm_120", "sm_120a"),
            _arch("sm_120a", "sm_120a"),
            _arch("sm_120f", "sm_120a"),
            _arch("sm_121", "sm_120a"),
            _arch("sm_121a", "sm_120a"),
            _arch("sm_121f", "sm_120a"),
        )
    }
)

#: The targets whose legality the project checks against ptxas.
PRIMARY_ARCHS = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120a")

# --------------------------------------------------------------------------------------------
# Forms
# --------------------------------------------------------------------------------------------

F8 = ("e4m3", "e5m2")
F8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
ROWCOL = (("row", "col"),)
ANY_LAYOUT = (("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"))


def _pairs(xs, ys):
    return tuple((x, y) for x in xs for y in ys)


@dataclass(frozen=True)
class Form:
    """One documented mma.sync syntax line, expanded to its legal qualifier combinations.

    ``shapes`` maps (m, n, k) to the requirement for that shape: a minimum SM number, or a
    tuple of exact target-family predicates (see :func:`form_allows`).
    """

    name: str
    shapes: Mapping[tuple[int, int, int], object]
    ab: tuple[tuple[str, str], ...]  # legal (atype, btype)
    dc: tuple[tuple[str, str], ...]  # legal (dtype, ctype)
    layouts: tuple[tuple[str, str], ...] = ROWCOL
    kind: str | None = None
    satfinite: bool = False  # .satfinite allowed (optional)
    bitops: tuple[str, ...] = ()  # required one of these when non-empty
    block_scale: bool = False
    scale: tuple[tuple[int, str], ...] = ()  # legal (scale_vec, stype)
    default_scale_vec: int | None = None  # scale_vec when omitted (None: mandatory)
    rounding: tuple[str, ...] = ()  # optional rounding modifiers accepted
    bitop_min_sm: Mapping[str, int] = field(default_factory=dict)
    #: Extra requirement (same encoding as ``shapes`` values) for particular (atype, btype)
    #: pairs, on top of the shape's requirement.
    pair_req: Mapping[tuple[str, str], object] = field(default_factory=dict)
    #: First PTX ISA version with this form (OLDEST_PTX: at or before it).
    since: tuple[int, int] = OLDEST_PTX
    #: Extra requirement of particular (scale_vec, stype) pairs: (PTX ISA version, target
    #: requirement or None for the shape's own).
    scale_req: Mapping[tuple[int, str], tuple[tuple[int, int], object]] = \
        field(default_factory=dict)


#: Requirement meaning "only the sm_120 family with architecture- or family-specific features".
SM120_SPECIFIC = ("sm_120a", "sm_120f", "sm_121a", "sm_121f")
SM120_ARCH_SPECIFIC = ("sm_120a", "sm_121a")
#: The sm_100 family targets with architecture- or family-specific features.
SM100_SPECIFIC = ("sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_107a", "sm_107f", "sm_110a",
                  "sm_110f")

# Legality follows ptxas (CUDA 13.0 at PTX ISA 9.0; CUDA 13.5 at 9.0 ... 9.5), checked by
# tests/data/ptxas_truth.jsonl.gz:
# * .kind::mxf4nvf4 with .scale_vec::4X and .ue8m0 needs PTX ISA 9.1 (ptxas 13.5: "Feature 'mma
#   with .scale_vec::4X and .ue8m0 scale type' requires PTX ISA .version 9.1 or later").
# * .f16 at m16n8k8/m16n8k16 needs dtype == ctype (ptxas: ".dtype must be '.f32' when .ctype is
#   '.f32'", and the same for .f16); m8n8k4 .f16 also takes .f32 <- .f16 but not .f16 <- .f32.
# * .kind::f8f6f4 with e4m3/e5m2 on both sides is also assembled by the sm_100 family
#   (a/f targets); with an FP6/FP4 operand it needs the sm_120 family.
# * .kind::mxf4 and .kind::mxf4nvf4 are assembled on sm_120f and sm_121f as well.

FORMS: tuple[Form, ...] = (
    Form("f16-m8n8k4", {(8, 8, 4): 70}, (("f16", "f16"),),
         (("f16", "f16"), ("f32", "f16"), ("f32", "f32")), layouts=ANY_LAYOUT),
    Form("f16", {(16, 8, 8): 75, (16, 8, 16): 80}, (("f16", "f16"),),
         (("f16", "f16"), ("f32", "f32"))),
    Form("tf32", {(16, 8, 4): 80, (16, 8, 8): 80}, (("tf32", "tf32"),), (("f32", "f32"),)),
    Form("bf16", {(16, 8, 8): 80, (16, 8, 16): 80}, (("bf16", "bf16"),), (("f32", "f32"),)),
    Form("fp8", {(16, 8, 16): 89, (16, 8, 32): 89}, _pairs(F8, F8), (("f16", "f16"), ("f32", "f32"))),
    Form("f8f6f4", {(16, 8, 32): SM100_SPECIFIC + SM120_SPECIFIC}, _pairs(F8F6F4, F8F6F4),
         (("f16", "f16"), ("f32", "f32")), kind="f8f6f4",
         pair_req={p: SM120_SPECIFIC for p in _pairs(F8F6F4, F8F6F4) if p not in _pairs(F8, F8)}),
    Form("mxf8f6f4", {(16, 8, 32): SM120_SPECIFIC}, _pairs(F8F6F4, F8F6F4), (("f32", "f32"),),
         kind="mxf8f6f4", block_scale=True, scale=((1, "ue8m0"),), default_scale_vec=1),
    Form("mxf4", {(16, 8, 64): SM120_SPECIFIC}, (("e2m1", "e2m1"),), (("f32", "f32"),),
         kind="mxf4", block_scale=True, scale=((2, "ue8m0"),), default_scale_vec=2),
    Form("mxf4nvf4", {(16, 8, 64): SM120_SPECIFIC}, (("e2m1", "e2m1"),), (("f32", "f32"),),
         kind="mxf4nvf4", block_scale=True, scale=((2, "ue8m0"), (4, "ue4m3"), (4, "ue8m0")),
         default_scale_vec=None, scale_req={(4, "ue8m0"): ((9, 1), None)}),
    Form("f64", {(8, 8, 4): 80, (16, 8, 4): 90, (16, 8, 8): 90, (16, 8, 16): 90},
         (("f64", "f64"),), (("f64", "f64"),), rounding=("rn", "rz", "rm", "rp")),
    Form("int8", {(8, 8, 16): 75, (16, 8, 16): 80, (16, 8, 32): 80},
         _pairs(("s8", "u8"), ("s8", "u8")), (("s32", "s32"),), satfinite=True),
    Form("int4", {(8, 8, 32): 75, (16, 8, 32): 80, (16, 8, 64): 80},
         _pairs(("s4", "u4"), ("s4", "u4")), (("s32", "s32"),), satfinite=True),
    Form("b1", {(8, 8, 128): 75, (16, 8, 128): 80, (16, 8, 256): 80}, (("b1", "b1"),),
         (("s32", "s32"),), bitops=("xor", "and"), bitop_min_sm={"and": 80}),
)

#: Element width in bits of every PTX element type.
TYPE_BITS: Mapping[str, int] = MappingProxyType(
    {
        "f64": 64, "f32": 32, "tf32": 32, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "e3m2": 6,
        "e2m3": 6, "e2m1": 4, "ue8m0": 8, "ue4m3": 8, "s32": 32, "s8": 8, "u8": 8, "s4": 4,
        "u4": 4, "b1": 1,
    }
)


def form_allows(req: object, arch: Arch) -> bool:
    """Whether a shape requirement (minimum SM, or a tuple of target names) admits ``arch``."""
    if isinstance(req, tuple):
        return arch.name in req
    return arch.sm >= int(req)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# The decoded instruction
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    """A decoded, legal ``mma.sync`` instruction.  Immutable and hashable.

    Type fields hold PTX type names without the dot ('f16', 'e4m3', ...).
    """

    shape: tuple[int, int, int]
    alayout: str
    blayout: str
    dtype: str
    atype: str
    btype: str
    ctype: str
    kind: str | None = None
    satfinite: bool = False
    bitop: str | None = None
    block_scale: bool = False
    scale_vec: int | None = None
    stype: str | None = None
    rounding: str | None = None
    form: str = ""
    arch: str | None = None
    #: 'sp' or 'sp::ordered_metadata' for sparse ``mma.sp`` (A is stored compressed), else None.
    sparse: str | None = None
    #: What the decoder found the form needs of a target: ((what, requirement), ...) and
    #: ((what, first PTX ISA version), ...).  Checking the instruction against another target
    #: reads these instead of decoding its text again; None on an Instruction built by hand.
    reqs: tuple | None = field(default=None, compare=False, repr=False)
    versions: tuple | None = field(default=None, compare=False, repr=False)

    # ---- derived facts -----------------------------------------------------------------
    @property
    def m(self) -> int:
        return self.shape[0]

    @property
    def n(self) -> int:
        return self.shape[1]

    @property
    def k(self) -> int:
        return self.shape[2]

    @property
    def quadpair(self) -> bool:
        """True for m8n8k4 .f16: the warp runs four independent 8x8x4 products."""
        return self.form == "f16-m8n8k4"

    def type_of(self, operand: str) -> str:
        """The element type of operand 'a', 'b', 'c' or 'd'."""
        return {"a": self.atype, "b": self.btype, "c": self.ctype, "d": self.dtype}[operand]

    def storage_bits(self, operand: str) -> int:
        """Bits one element occupies inside its register (its container for f8f6f4 kinds)."""
        t = self.type_of(operand)
        if operand in "ab" and self.kind in ("f8f6f4", "mxf8f6f4"):
            return 8
        return TYPE_BITS[t]

    def register_bits(self, operand: str) -> int:
        """Width of one register of the operand: 64 for f64, else 32."""
        return 64 if self.type_of(operand) == "f64" else 32

    def matrix_shape(self, operand: str) -> tuple[int, int]:
        """(rows, cols) of the operand's matrix: A is MxK, B is KxN, C and D are MxN.

        For sparse ``mma.sp`` the A operand is the *compressed* M x K/2 matrix (the kept
        elements of each row in increasing K order; see :mod:`warpsim.tensorcore.sparse`).
        """
        m, n, k = self.shape
        return {"a": (m, k // 2 if self.sparse else k), "b": (k, n), "c": (m, n), "d": (m, n)}[operand]

    def elements_per_lane(self, operand: str) -> int:
        rows, cols = self.matrix_shape(operand)
        lanes = 8 if self.quadpair else 32
        return rows * cols // lanes

    def elements_per_register(self, operand: str) -> int:
        return self.register_bits(operand) // self.storage_bits(operand)

    @cached_property
    def regs(self) -> Mapping[str, int]:
        """Registers per lane for each operand: {'a': n, 'b': n, 'c': n, 'd': n}."""
        return MappingProxyType(
            {op: self.elements_per_lane(op) // self.elements_per_register(op) for op in "abcd"}
        )

    @property
    def text(self) -> str:
        """The canonical instruction string (documented qualifier order, no operands)."""
        parts = ["mma"] + ([self.sparse] if self.sparse else []) + ["sync", "aligned", "m{}n{}k{}".format(*self.shape), self.alayout, self.blayout]
        if self.kind:
            parts.append(f"kind::{self.kind}")
        if self.block_scale:
            parts.append("block_scale")
            if self.scale_vec:
                parts.append(f"scale_vec::{self.scale_vec}X")
        if self.rounding:
            parts.append(self.rounding)
        if self.satfinite:
            parts.append("satfinite")
        parts += [self.dtype, self.atype, self.btype, self.ctype]
        if self.stype:
            parts.append(self.stype)
        if self.bitop:
            parts += [self.bitop, "popc"]
        return ".".join(parts)

    def __str__(self) -> str:
        return self.text


#: Rounding variants enumerated per form: the default (None, meaning .rn) and each directed mode.
_ROUNDINGS = {(): (None,), ("rn", "rz", "rm", "rp"): (None, "rz", "rm", "rp")}


def iter_instructions(arch: str | None = None) -> Iterator[Instruction]:
    """Every documented instruction (canonical qualifiers) legal on ``arch`` (None: any).

    f64 forms come with each directed rounding modifier (.rz, .rm, .rp) as well as the default.
    """
    archs = [ARCHS[arch]] if arch else list(ARCHS.values())
    for f in FORMS:
        for shape, req in f.shapes.items():
            ok = [a for a in archs if form_allows(req, a)]
            if not ok:
                continue
            for (at, bt) in f.ab:
                pr = f.pair_req.get((at, bt))
                if pr is not None and not any(form_allows(pr, a) for a in ok):
                    continue
                for (dt, ct) in f.dc:
                    for (al, bl) in f.layouts:
                        for sat in ((False, True) if f.satfinite else (False,)):
                            for bop in (f.bitops or (None,)):
                                if bop and all(a.sm < f.bitop_min_sm.get(bop, 0) for a in ok):
                                    continue
                                for sv, st in (f.scale or ((None, None),)):
                                    for rnd in _ROUNDINGS[f.rounding]:
                                        yield Instruction(
                                            shape=shape, alayout=al, blayout=bl, dtype=dt,
                                            atype=at, btype=bt, ctype=ct, kind=f.kind,
                                            satfinite=sat, bitop=bop, block_scale=f.block_scale,
                                            scale_vec=sv, stype=st, rounding=rnd, form=f.name,
                                            arch=arch,
                                        )


#: Legal selector values per scale_vec size: (byte-id, thread-id-a, thread-id-b).
SELECTORS = MappingProxyType({
    1: ((0, 1, 2, 3), (0, 1), (0, 1, 2, 3)),
    2: ((0, 2), (0, 1), (0, 1, 2, 3)),
    4: ((0,), (0, 1), (0, 1, 2, 3)),
})
