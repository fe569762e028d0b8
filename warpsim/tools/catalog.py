"""The instruction catalogue: every ``mma.sync`` and ``mma.sp`` form warpsim knows, filtered for people.

:func:`instructions` lists the documented instructions (canonical qualifier order, from
:func:`warpsim.facts.isa.iter_instructions` and :func:`warpsim.tensorcore.sparse.iter_sparse_instructions`) that match a shape, an element type, a ``.kind``, a form,
a target architecture and a PTX ISA version; :func:`describe` gives one of them as plain data
(what ``warpsim list --format json`` prints).

PTX ISA versions: :func:`min_ptx_version` is the first version warpsim models (9.0 ... 9.5) at
which the instruction is legal on some target ("9.0" means 9.0 or earlier: older versions are
not modelled); the ``ptx_version`` filter takes one of the modelled versions.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from warpsim.facts import isa
from warpsim.tensorcore.decode import legal_archs, ptx_version_of
from warpsim.errors import PtxError, WarpsimError
from warpsim.facts.isa import ARCHS, FORMS, TYPE_BITS, Instruction
from warpsim.facts.sparse import SPARSE_FORMS
from warpsim.tensorcore.sparse import iter_sparse_instructions

__all__ = ["describe", "instructions", "min_ptx_version"]

#: ASCII digits without leading zeros, as ptxas reads a shape (not 'm１６n8k16' or 'm016n8k16').
_SHAPE_RE = re.compile(r"m([1-9][0-9]*)n([1-9][0-9]*)k([1-9][0-9]*)")
_KINDS = ("f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4")
#: Type filters that name a family of element types.
TYPE_GROUPS = {"fp8": ("e4m3", "e5m2"), "fp6": ("e2m3", "e3m2"), "fp4": ("e2m1",),
               "int8": ("s8", "u8"), "int4": ("s4", "u4")}
#: Form filters that name a group of forms: every sparse ``mma.sp`` form, every dense one.
FORM_GROUPS = {"sparse": tuple(f.name for f in SPARSE_FORMS), "dense": tuple(f.name for f in FORMS)}


@lru_cache(maxsize=1)
def _all() -> tuple[Instruction, ...]:
    return tuple(isa.iter_instructions(None)) + tuple(iter_sparse_instructions(None))


@lru_cache(maxsize=None)
def min_ptx_version(instr: Instruction) -> str:
    """The first modelled PTX ISA version ("9.0" ... "9.5") at which ``instr`` is legal on
    some target ("9.0": 9.0 or earlier; versions before 9.0 are not modelled)."""
    for v in sorted(isa.PTX_VERSIONS):
        if legal_archs(instr, v):
            return f"{v[0]}.{v[1]}"
    raise PtxError(f"{instr.text} is legal at no modelled PTX ISA version")


def _shape(shape: object) -> tuple[int, int, int]:
    if isinstance(shape, str):
        m = _SHAPE_RE.fullmatch(shape.strip().lstrip(".").lower())
        if not m:
            raise PtxError(f"shape {shape!r} is not of the form 'm16n8k16'")
        return tuple(int(x) for x in m.groups())  # type: ignore[return-value]
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in shape):
        raise TypeError(f"shape must be 'mMnNkK' or a tuple of integers (m, n, k), got {shape!r}")
    t = tuple(int(x) for x in shape)
    if len(t) != 3:
        raise PtxError(f"shape must have three numbers (m, n, k), got {shape!r}")
    return t  # type: ignore[return-value]


def instructions(*, shape: object = None, type: str | None = None, kind: str | None = None,
                 form: str | None = None, arch: str | None = None,
                 ptx_version: str | None = None) -> list[Instruction]:
    """Documented instructions matching every filter given (None: no filter).

    ``shape``: 'm16n8k16' or (16, 8, 16).  ``type``: an element type of any operand, scale
    type included ('e2m1', 'f16', 's4', 'ue8m0'), or a group of them (:data:`TYPE_GROUPS`:
    'fp8', 'fp6', 'fp4', 'int8', 'int4').  ``kind``: a ``.kind`` ('f8f6f4', 'mxf8f6f4',
    'mxf4', 'mxf4nvf4') or 'none'.  ``form``: a form name as ``decode`` reports it (``f16``,
    ``sp-f16``, ...) or a group ('sparse', 'dense').  ``arch``:
    legal on that target (decoder verdicts, the same as ``decode``).  ``ptx_version``: accepted
    by that PTX ISA version (see the module docstring).  Each instruction appears once, in
    canonical qualifier order; f64 forms once per rounding modifier.  Unknown filter values raise
    PtxError naming the legal ones.
    """
    for name, value in (("type", type), ("kind", kind), ("form", form), ("arch", arch)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a string or None, got {value!r}")
    out = list(_all())
    if shape is not None:
        s = _shape(shape)
        known = sorted({i.shape for i in out})
        if s not in known:
            raise PtxError(f"no mma.sync instruction has shape m{s[0]}n{s[1]}k{s[2]}; shapes: "
                           + ", ".join("m{}n{}k{}".format(*x) for x in known))
        out = [i for i in out if i.shape == s]
    if type is not None:
        t = str(type).lower().lstrip(".")
        if t not in TYPE_BITS and t not in TYPE_GROUPS:
            raise PtxError(f"unknown element type {type!r}; known: {', '.join(TYPE_BITS)}, and "
                           f"the groups {', '.join(TYPE_GROUPS)}")
        ts = set(TYPE_GROUPS.get(t, (t,)))
        out = [i for i in out if ts & {i.atype, i.btype, i.ctype, i.dtype, i.stype}]
    if kind is not None:
        k = str(kind).lower().lstrip(".").removeprefix("kind::")
        if k not in _KINDS + ("none",):
            raise PtxError(f"unknown kind {kind!r}; known: {', '.join(_KINDS)}, none")
        out = [i for i in out if (i.kind or "none") == k]
    if form is not None:
        names = [f.name for f in FORMS + SPARSE_FORMS]
        if form not in names and form not in FORM_GROUPS:
            raise PtxError(f"unknown form {form!r}; known: {', '.join(names)}, and the groups "
                           f"{', '.join(FORM_GROUPS)}")
        forms = set(FORM_GROUPS.get(form, (form,)))
        out = [i for i in out if i.form in forms]
    if arch is not None:
        if arch not in ARCHS:
            raise PtxError(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}")
        out = [i for i in out if arch in _legal(i)]
    if ptx_version is not None:
        want = ptx_version_of(ptx_version)  # PtxError for versions warpsim does not model
        keep = [i for i in out if ptx_version_of(min_ptx_version(i)) <= want]
        out = keep
    return out


@lru_cache(maxsize=None)
def _legal(ins: Instruction) -> tuple[str, ...]:
    return tuple(legal_archs(ins))


def describe(ins: Instruction) -> dict:
    """One instruction as plain data: text, short form, form, shape, layouts, types, kind,
    qualifiers, registers per lane, legal targets and (where known) the minimum PTX version."""
    text = ins.text
    return {
        "instruction": text,
        "short": text.removeprefix("mma.sync.aligned."),
        "form": ins.form,
        "sparse": ins.sparse,
        "shape": list(ins.shape),
        "layouts": {"a": ins.alayout, "b": ins.blayout},
        "types": {"a": ins.atype, "b": ins.btype, "c": ins.ctype, "d": ins.dtype,
                  **({"scale": ins.stype} if ins.stype else {})},
        "kind": ins.kind,
        "block_scale": ins.block_scale,
        "scale_vec": ins.scale_vec,
        "satfinite": ins.satfinite,
        "bitop": ins.bitop,
        "rounding": ins.rounding,
        "registers": dict(ins.regs),
        "archs": list(_legal(ins)),
        "min_ptx_version": min_ptx_version(ins),
    }
