"""Decode ``mma.sync`` instruction text into a legal :class:`warpsim.facts.isa.Instruction`.

Legality follows ptxas per PTX ISA version (9.0 ... 9.5, CUDA 13.0 ... 13.5): a documented form
is accepted for a target at a ``.version`` exactly when ptxas assembles it there.
``tests/data/ptxas_truth.jsonl.gz`` holds the strings this module is checked against, labelled
by ptxas 13.0 at .version 9.0 and ptxas 13.5 at 9.0 ... 9.5; ``tools/ptxas_truth.py``
regenerates it with any ptxas.

Operand lists are read as ptxas reads them (:func:`split_operands`, :func:`check_operands`);
register types come from the PTX naming convention (%r .b32, %f .f32, %rd .b64, %fd .f64,
%h/%rs .b16, %p .pred), since declarations are not part of an instruction.

How qualifiers are read (this mirrors ptxas's parser):

* Qualifiers after ``mma`` form an unordered set, with three positional exceptions: the type
  tokens are read in order as dtype, atype, btype, ctype, and a fifth one is the block-scale
  ``.stype``; the first ``.row``/``.col`` is the A layout and the second the B layout; ``.and``
  or ``.xor`` must come before ``.popc``.
* ``.sync`` and ``.satfinite`` may repeat; any other repeated qualifier is an error.
* ``.acc::f32``, ``.acc::f16`` and ``.bf16x2`` are accepted and ignored, as ptxas ignores them.
* ``.scale_vec::NX`` takes its ISA default when omitted (1X for ``kind::mxf8f6f4``, 2X for
  ``kind::mxf4``); ``kind::mxf4nvf4`` requires it.
* f64 forms take an optional rounding modifier ``.rn`` (to nearest, ties to even: the default),
  ``.rz`` (toward zero), ``.rm`` (toward -inf) or ``.rp`` (toward +inf); it is kept verbatim in
  ``Instruction.rounding`` (None when omitted, meaning the ``.rn`` default).

Forms that ptxas assembles but the PTX ISA does not document (m8n8k4 with bf16/tf32, ``.popc``
with s4/u4, a ``.kind`` on the plain FP8 forms, ...) are rejected with a message saying so:
there is no specification of what they compute.

Sparse ``mma.sp`` / ``mma.sp::ordered_metadata`` (anywhere among the qualifiers) selects the
forms of :data:`warpsim.tensorcore.sparse.SPARSE_FORMS`; their operand list is ``d, a, b, c, e, f`` (e the
metadata register, f the sparsity-selector immediate, checked against the PTX ISA's legal set),
followed by the block-scale operands where present.
"""

from __future__ import annotations

import difflib
import re
import struct
from dataclasses import dataclass, replace

from warpsim.errors import PtxError, quote
from warpsim.facts.types import reg_type
from warpsim.facts.isa import (
    SELECTORS, ARCHS, FORMS, LATEST_PTX, OLDEST_PTX, PTX_VERSIONS, TYPE_BITS, Arch, Form, Instruction,
    form_allows)

__all__ = ["AUTO", "Imm", "SINK", "check_operands", "decode", "default_arch", "legal_archs",
           "operand_roles", "reg_type", "split_operands"]

# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------

#: Shapes are ASCII digits without leading zeros (ptxas: "Unknown modifier '.m016n8k16'").
_SHAPE_RE = re.compile(r"m([1-9][0-9]*)n([1-9][0-9]*)k([1-9][0-9]*)")
_SCALE_VEC_RE = re.compile(r"scale_vec::([124])X")
#: Type tokens that occupy a type position (PTX scalar types, element types and scale types).
_TYPE_TOKENS = frozenset(TYPE_BITS) | {
    "b8", "b16", "b32", "b64", "u16", "s16", "u32", "u64", "s64", "f16x2", "e4m3x2", "e5m2x2",
}
_STYPES = ("ue8m0", "ue4m3")
_ROUNDING = ("rn", "rz", "rm", "rp")
#: Qualifiers ptxas accepts anywhere and ignores.
_IGNORED = frozenset({"acc::f32", "acc::f16", "bf16x2"})
_MMA_KINDS = ("f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4")
#: tcgen05 kinds that ptxas's shared feature table lets through on the FP8 forms (sm_100 family).
_TCGEN05_KINDS = ("f16", "tf32", "i8", "f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4")
_F8 = ("e4m3", "e5m2")
_SUB_BYTE_FLOATS = ("e3m2", "e2m3", "e2m1")
_KNOWN_WORDS = sorted(
    {"sync", "aligned", "row", "col", "block_scale", "satfinite", "and", "xor", "popc", *_ROUNDING,
     *_TYPE_TOKENS, *(f"kind::{k}" for k in _MMA_KINDS), "scale_vec::1X", "scale_vec::2X",
     "scale_vec::4X", *_IGNORED}
)

_FORMS_BY_NAME = {f.name: f for f in FORMS}


def _shape_str(shape: tuple[int, int, int]) -> str:
    return ".m{}n{}k{}".format(*shape)


def _dots(names) -> str:
    return ", ".join("." + n for n in names)


def _fail(msg: str) -> PtxError:
    return PtxError(msg)


# --------------------------------------------------------------------------------------------
# Qualifier parsing
# --------------------------------------------------------------------------------------------


@dataclass
class _Quals:
    """The qualifiers of one mma opcode, parsed but not yet checked for legality."""

    shape: tuple[int, int, int] | None = None
    layouts: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    kind: str | None = None
    block_scale: bool = False
    scale_vec: int | None = None
    satfinite: bool = False
    bit_tokens: tuple[str, ...] = ()  # .and/.xor/.popc in the order given
    bf16x2_at: str | None = None  # 'before', 'inside' or 'after' the four type qualifiers
    rounding: str | None = None
    ignored: tuple[str, ...] = ()  # .acc::f32/.acc::f16/.bf16x2 seen (and ignored)
    sync: bool = False
    aligned: bool = False
    sparse: str | None = None  # 'sp' or 'sp::ordered_metadata'


def _parse_opcode(opcode: str) -> _Quals:
    tokens = opcode.split(".")
    head = tokens[0]
    if head != "mma":
        if head.startswith("mma") or head in ("wgmma", "tcgen05"):
            raise _fail(f"opcode '{head}' is not mma; only mma.sync is supported")
        raise _fail(f"'{opcode}' is not an mma instruction")
    q = _Quals()
    layouts: list[str] = []
    types: list[str] = []
    bits: list[str] = []
    seen: set[str] = set()

    def once(tok: str, what: str) -> None:
        if what in seen:
            raise _fail(f"repeated {what} qualifier .{tok}; only .sync and .satfinite may repeat")
        seen.add(what)

    for tok in tokens[1:]:
        if tok == "":
            raise _fail(f"empty qualifier in '{opcode}'")
        if tok == "sp" or tok.startswith("sp::"):
            once(tok, "sp")
            if tok not in _SP_VARIANTS:
                raise _fail(f"unknown qualifier .{tok}; the sparse variants are .sp and "
                            ".sp::ordered_metadata")
            q.sparse = tok
            continue
        if tok in _IGNORED:
            if tok == "bf16x2":
                q.bf16x2_at = "before" if not types else "inside" if len(types) < 4 else "after"
            q.ignored += (tok,)
            continue
        if tok == "sync":
            q.sync = True
        elif tok == "satfinite":
            q.satfinite = True
        elif tok == "aligned":
            once(tok, "aligned")
            q.aligned = True
        elif _SHAPE_RE.fullmatch(tok):
            once(tok, "shape")
            q.shape = tuple(int(x) for x in _SHAPE_RE.fullmatch(tok).groups())  # type: ignore
        elif tok in ("row", "col"):
            layouts.append(tok)
            if len(layouts) > 2:
                raise _fail(f"too many layout qualifiers: {_dots(layouts)}; give .alayout.blayout")
        elif tok in _TYPE_TOKENS:
            types.append(tok)
            if len(types) > 5:
                raise _fail(
                    f"too many type qualifiers: {_dots(types)}; expected .dtype.atype.btype.ctype "
                    "and, with .block_scale, .stype"
                )
        elif tok.startswith("kind::"):
            once(tok, "kind")
            name = tok[len("kind::"):]
            if name not in _TCGEN05_KINDS:
                raise _fail(f"unknown qualifier .{tok}; legal kinds for mma: "
                            + _dots(f"kind::{k}" for k in _MMA_KINDS))
            q.kind = name
        elif tok == "block_scale":
            once(tok, "block_scale")
            q.block_scale = True
        elif tok.startswith("scale_vec::"):
            once(tok, "scale_vec")
            mt = _SCALE_VEC_RE.fullmatch(tok)
            if not mt:
                raise _fail(f"unknown qualifier .{tok}; legal: .scale_vec::1X, .scale_vec::2X, "
                            ".scale_vec::4X")
            q.scale_vec = int(mt.group(1))
        elif tok in ("and", "xor", "popc"):
            bits.append(tok)
        elif tok in _ROUNDING:
            once(tok, "rounding")
            q.rounding = tok
        elif re.fullmatch(r"m\w+n\w+k\w+", tok) and any(c.isdigit() for c in tok):
            raise _fail(f"unknown qualifier .{quote(tok, 40)}: a shape is written .mMnNkK with "
                        "ASCII digits and no leading zeros (.m16n8k16)")
        else:
            close = difflib.get_close_matches(tok[:40], _KNOWN_WORDS, n=3, cutoff=0.6)
            hint = f"; did you mean {_dots(close)}?" if close else ""
            raise _fail(f"unknown qualifier .{quote(tok, 40)}{hint}")
    q.layouts = tuple(layouts)
    q.types = tuple(types)
    q.bit_tokens = tuple(bits)
    return q


def _bitop(q: _Quals) -> str | None:
    """The .and/.xor of a well-formed ``.bitop.popc`` pair (None when there is none)."""
    bits = q.bit_tokens
    if not bits:
        return None
    ops = [b for b in bits if b != "popc"]
    if len(ops) > 1 or bits.count("popc") > 1:
        raise _fail(f"repeated bit-operation qualifiers {_dots(bits)}; give one .and.popc or "
                    ".xor.popc")
    if not ops:
        raise _fail(".popc needs .and or .xor before it")
    if "popc" not in bits:
        raise _fail(f".{ops[0]} must be followed by .popc")
    if bits != (ops[0], "popc"):
        raise _fail(f".{ops[0]} must come before .popc")
    return ops[0]


# --------------------------------------------------------------------------------------------
# Legality
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Resolved:
    """A form-checked instruction and the architecture requirements it still has to meet."""

    instr: Instruction
    reqs: tuple[tuple[str, object], ...]  # (what needs it, requirement for form_allows)
    #: (what needs it, first PTX ISA version that has it)
    versions: tuple[tuple[str, tuple[int, int]], ...] = ()


def _undocumented(msg: str, req: object) -> PtxError:
    where = _req_text(req)
    return _fail(f"{msg} is not a documented mma form: ptxas assembles it ({where}), but the PTX "
                 "ISA defines no semantics for it")


def _req_text(req: object) -> str:
    if isinstance(req, tuple):
        return "only on " + ", ".join(req)
    return f"on sm_{int(req)} and later"  # type: ignore[arg-type]


def _check_undocumented(q: _Quals, dt: str, at: str, bt: str, ct: str) -> None:
    """Raise for the forms ptxas assembles although the PTX ISA does not document them."""
    shape = q.shape
    if shape == (8, 8, 4) and at == bt and at in ("bf16", "tf32") and dt == ct == "f32" \
            and not q.kind:
        raise _undocumented(f".m8n8k4 with .{at}", 80)
    if q.bit_tokens and at in ("s4", "u4") and bt in ("s4", "u4") and dt == ct == "s32" \
            and shape in _FORMS_BY_NAME["int4"].shapes:
        # ptxas ignores .and/.xor/.popc here (even repeated or misordered).
        raise _undocumented(f"{_dots(q.bit_tokens)} with .{at}.{bt}",
                            _FORMS_BY_NAME["int4"].shapes[shape])
    if q.kind and not q.block_scale and at in _F8 and bt in _F8 \
            and shape in ((16, 8, 16), (16, 8, 32)) \
            and not (q.kind == "f8f6f4" and shape == (16, 8, 32)):
        raise _undocumented(f".kind::{q.kind} on the FP8 form {_shape_str(shape)}.{at}.{bt}",
                            _UNDOC_KIND_ARCHS.get(q.kind, ()))


#: Targets on which ptxas lets a .kind through on the plain FP8 forms (see the truth table).
_SM100_FAMILY = ("sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_107a", "sm_107f", "sm_110a",
                 "sm_110f")
_SM120_FAMILY = ("sm_120a", "sm_120f", "sm_121a", "sm_121f")
_UNDOC_KIND_ARCHS: dict[str, tuple[str, ...]] = {
    **{k: _SM100_FAMILY + _SM120_FAMILY for k in _MMA_KINDS},
    "f16": _SM100_FAMILY, "tf32": _SM100_FAMILY, "i8": ("sm_100a", "sm_110a"),
}


def _candidate_forms(q: _Quals, at: str) -> list[Form]:
    """The FORMS rows an instruction with this atype (and kind) can belong to."""
    if q.kind:
        if q.kind not in _MMA_KINDS:
            raise _fail(f".kind::{q.kind} is not legal for mma; legal kinds: "
                        + _dots(f"kind::{k}" for k in _MMA_KINDS))
        return [_FORMS_BY_NAME[q.kind]]
    if at in _SUB_BYTE_FLOATS:
        raise _fail(f"atype .{at} needs a .kind qualifier (.kind::f8f6f4, .kind::mxf8f6f4"
                    + (", .kind::mxf4, .kind::mxf4nvf4" if at == "e2m1" else "") + ")")
    found = [f for f in FORMS if not f.kind and any(a == at for a, _ in f.ab)]
    if not found:
        legal = sorted({a for f in FORMS for a, _ in f.ab})
        raise _fail(f"type .{at} is not legal as atype; legal atypes: {_dots(legal)}")
    return found


_SP_VARIANTS = ("sp", "sp::ordered_metadata")
#: Sparse forms on which ptxas rejects a trailing .bf16x2 (it ignores it on the others).
_SP_NO_BF16X2 = ("sp-bf16", "sp-tf32", "sp-int8", "sp-int4")


def _sparse_candidates(q: _Quals, at: str) -> list[Form]:
    """The SPARSE_FORMS rows a sparse instruction with this atype (and kind) can belong to."""
    from warpsim.facts.sparse import ORDERED_ONLY, SPARSE_FORMS

    if q.kind:
        if q.kind not in _MMA_KINDS:
            raise _fail(f".kind::{q.kind} is not legal for mma.sp; legal kinds: "
                        + _dots(f"kind::{k}" for k in _MMA_KINDS))
        found = [f for f in SPARSE_FORMS if f.kind == q.kind]
        if q.sparse == "sp" and found[0].name in ORDERED_ONLY:
            raise _fail(f".kind::{q.kind} sparse mma requires .sp::ordered_metadata, not .sp")
        return found
    if at in _SUB_BYTE_FLOATS:
        raise _fail(f"atype .{at} needs a .kind qualifier with mma.sp (.kind::f8f6f4, "
                    ".kind::mxf8f6f4" + (", .kind::mxf4, .kind::mxf4nvf4" if at == "e2m1" else "")
                    + ")")
    found = [f for f in SPARSE_FORMS if not f.kind and any(a == at for a, _ in f.ab)]
    if not found:
        legal = sorted({a for f in SPARSE_FORMS if not f.kind for a, _ in f.ab})
        raise _fail(f"type .{at} is not legal as atype of mma.sp; legal atypes: {_dots(legal)}")
    return found


def _resolve(q: _Quals) -> _Resolved:
    """Check everything that does not depend on the target; return the instruction."""
    if not q.sync:
        raise _fail("missing .sync qualifier (mma.sync.aligned is required)")
    if not q.aligned:
        raise _fail("missing .aligned qualifier (mma.sync.aligned is required)")
    if q.shape is None:
        raise _fail("missing shape qualifier (.mMnNkK)")
    if len(q.types) < 4:
        raise _fail(f"expected four type qualifiers .dtype.atype.btype.ctype, got "
                    f"{len(q.types)}: {_dots(q.types) or 'none'}")
    dt, at, bt, ct = q.types[:4]
    stype = q.types[4] if len(q.types) == 5 else None
    for pos, t in zip(("dtype", "atype", "btype", "ctype"), (dt, at, bt, ct)):
        if t in _STYPES:
            raise _fail(f"scale type .{t} in the {pos} position; .stype must follow the four "
                        ".dtype.atype.btype.ctype types")
    if not q.sparse:
        _check_undocumented(q, dt, at, bt, ct)
    bitop = _bitop(q)

    forms = _sparse_candidates(q, at) if q.sparse else _candidate_forms(q, at)
    shape = q.shape
    with_shape = [f for f in forms if shape in f.shapes]
    if not with_shape:
        legal = sorted({s for f in forms for s in f.shapes})
        what = f".kind::{q.kind}" if q.kind else f".{at}"
        raise _fail(f"shape {_shape_str(shape)} with {what} is not legal; legal shapes for "
                    f"{what}: " + ", ".join(_shape_str(s) for s in legal))
    f = with_shape[0]
    what = f".kind::{f.kind}" if f.kind else f"{_shape_str(shape)} .{at}"

    # Types.
    if (at, bt) not in f.ab:
        if at not in {a for a, _ in f.ab}:
            raise _fail(f"atype .{at} is not legal with {what}; legal atypes: "
                        + _dots(sorted({a for a, _ in f.ab})))
        raise _fail(f"btype .{bt} with atype .{at} is not legal for {what}; legal btypes: "
                    + _dots(sorted({b for a, b in f.ab if a == at})))
    if (dt, ct) not in f.dc:
        dts = sorted({d for d, _ in f.dc})
        if dt not in dts:
            raise _fail(f"dtype .{dt} is not legal with {what}; legal dtypes: {_dots(dts)}")
        raise _fail(f"ctype .{ct} with dtype .{dt} is not legal for {what}; legal ctypes: "
                    + _dots(sorted({c for d, c in f.dc if d == dt})))

    # Layouts.
    if len(q.layouts) < 2:
        legal = " or ".join("." + ".".join(p) for p in f.layouts[:4])
        raise _fail(f"missing layout qualifiers (.alayout.blayout) for {what}; legal: {legal}")
    if q.layouts not in f.layouts:
        got = "." + ".".join(q.layouts)
        legal = ", ".join("." + ".".join(p) for p in f.layouts)
        raise _fail(f"layout {got} is not legal for {what}; legal layouts: {legal}")

    # Optional and mandatory modifiers.
    if q.satfinite and not f.satfinite:
        raise _fail(f".satfinite is not legal with {what}; it applies only to the s8/u8/s4/u4 "
                    "integer forms")
    if f.bitops and not bitop:
        raise _fail(f"{what} requires .xor.popc or .and.popc")
    if bitop and bitop not in f.bitops:
        raise _fail(f".{bitop}.popc is not legal with {what}; it applies only to .b1")
    # ptxas ignores .bf16x2 after the four types, except with .b1/.bf16/.tf32 operands; before or
    # among them it is read as a type, which only the f64 forms shrug off.
    if q.bf16x2_at in ("before", "inside") and f.name != "f64":
        raise _fail(f".bf16x2 {q.bf16x2_at} the type qualifiers is not legal with {what}; ptxas "
                    "ignores it only after the four types")
    if q.bf16x2_at == "after" and f.name in ("b1", "bf16", "tf32", *_SP_NO_BF16X2):
        raise _fail(f".bf16x2 is not legal with {what} (ptxas rejects it with .{at} operands)")
    if q.rounding and q.rounding not in f.rounding:
        raise _fail(f"rounding modifier .{q.rounding} is not legal with {what}; only the .f64 "
                    "forms take .rn/.rz/.rm/.rp")
    if q.block_scale and not f.block_scale:
        hint = "; use .kind::mxf8f6f4" if f.kind == "f8f6f4" else ""
        raise _fail(f".block_scale is not legal with {what}{hint}")
    if f.block_scale and not q.block_scale:
        raise _fail(f".kind::{f.kind} requires .block_scale")
    scale_vec = q.scale_vec
    if not f.block_scale:
        if scale_vec is not None:
            raise _fail(f".scale_vec::{scale_vec}X is not legal without .block_scale")
        if stype is not None:
            raise _fail(f"fifth type .{stype} is not legal with {what}; a .stype follows the "
                        "four types only with .block_scale")
    else:
        legal_sc = ", ".join(f".scale_vec::{v}X with .{s}" for v, s in f.scale)
        if stype is None:
            raise _fail(f".kind::{f.kind} .block_scale requires a .stype after the four types "
                        f"(legal: {legal_sc})")
        if scale_vec is None:
            if f.default_scale_vec is None:
                raise _fail(f".kind::{f.kind} requires an explicit .scale_vec qualifier "
                            f"(legal: {legal_sc})")
            scale_vec = f.default_scale_vec
        if (scale_vec, stype) not in f.scale:
            raise _fail(f".scale_vec::{scale_vec}X with .stype .{stype} is not legal for "
                        f".kind::{f.kind}; legal: {legal_sc}")

    instr = Instruction(
        shape=shape, alayout=q.layouts[0], blayout=q.layouts[1], dtype=dt, atype=at, btype=bt,
        ctype=ct, kind=f.kind, satfinite=q.satfinite, bitop=bitop, block_scale=f.block_scale,
        scale_vec=scale_vec if f.block_scale else None, stype=stype, rounding=q.rounding,
        form=f.name, arch=None, sparse=q.sparse,
    )
    reqs: list[tuple[str, object]] = [(f"{_shape_str(shape)} {_form_desc(f, at, bt)}",
                                       f.shapes[shape])]
    versions: list[tuple[str, tuple[int, int]]] = [(f"{_shape_str(shape)} {_form_desc(f, at, bt)}",
                                                    f.since)]
    if f.block_scale and (scale_vec, stype) in f.scale_req:
        since, sreq = f.scale_req[(scale_vec, stype)]
        what_sc = f".kind::{f.kind} with .scale_vec::{scale_vec}X and .{stype}"
        versions.append((what_sc, since))
        if sreq is not None:
            reqs.append((what_sc, sreq))
    if (at, bt) in f.pair_req:
        reqs.append((f"{_form_desc(f, at, bt)} with .{at}.{bt}", f.pair_req[(at, bt)]))
    if bitop and bitop in f.bitop_min_sm:
        reqs.append((f".{bitop}.popc", f.bitop_min_sm[bitop]))
    if q.sparse:
        from warpsim.facts.sparse import extra_requirements

        reqs += extra_requirements(f.name, dt)
    if "bf16x2" in q.ignored:  # ignored, but ptxas still checks its feature level
        reqs.append((".bf16x2", 80))
    reqs, versions = tuple(reqs), tuple(versions)
    return _Resolved(replace(instr, reqs=reqs, versions=versions), reqs, versions)


def _form_desc(f: Form, at: str, bt: str) -> str:
    if f.kind:
        return f".kind::{f.kind}"
    return f".{at}" if at == bt else f".{at}.{bt}"


def _arch_of(arch: str) -> Arch:
    try:
        return ARCHS[arch]
    except (KeyError, TypeError):
        raise _fail(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}") from None


def _vtext(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def ptx_version_of(v: object) -> tuple[int, int]:
    """A PTX ISA version given as '9.1', 9.1, (9, 1) or None (the newest known) -> (9, 1)."""
    if v is None:
        return LATEST_PTX
    if isinstance(v, bool):
        raise TypeError(f"ptx_version must be a version such as '9.1', got {v!r}")
    if isinstance(v, (str, float)):
        m = re.fullmatch(r"([0-9])\.([0-9])", str(v).strip())
        parsed = (int(m.group(1)), int(m.group(2))) if m else None
    elif isinstance(v, tuple) and len(v) == 2 and all(type(x) is int for x in v):
        parsed = v
    else:
        raise TypeError(f"ptx_version must be a version such as '9.1', got {v!r}")
    if parsed not in PTX_VERSIONS:
        raise _fail(f"PTX ISA version {v!r} is not modelled; warpsim knows .version "
                    + ", ".join(map(_vtext, PTX_VERSIONS)))
    return parsed  # type: ignore[return-value]


def _needs(v: tuple[int, int]) -> str:
    cuda = PTX_VERSIONS[v]
    return f"needs .version {_vtext(v)} or later (CUDA {cuda[0]}.{cuda[1]})"


def _arch_error(res: _Resolved, a: Arch, version: tuple[int, int] = LATEST_PTX
                ) -> PtxError | None:
    if a.since > version:
        return _fail(f"target {a.name} {_needs(a.since)}; requested .version {_vtext(version)}")
    for what, req in res.reqs:
        if not form_allows(req, a):
            if isinstance(req, tuple):
                need = "one of " + ", ".join(req)
            else:
                need = f"sm_{int(req)} or later"  # type: ignore[arg-type]
            return _fail(f"{what} requires {need}; target is {a.name}")
    for what, since in res.versions:
        if since > version:
            return _fail(f"{what} {_needs(since)}; requested .version {_vtext(version)}")
    return None


# --------------------------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------------------------

#: A register name: PTX identifiers are ASCII ([A-Za-z][A-Za-z0-9_$]* or [_$%][A-Za-z0-9_$]+).
_REG_RE = re.compile(r"%?[A-Za-z][A-Za-z0-9_$]*|%?[_$][A-Za-z0-9_$]+|%[A-Za-z0-9_$]+")
#: Integer immediates (PTX "Constants"): hex, binary, octal, decimal, with an optional U.
_INT_RES = ((re.compile(r"0[xX]([0-9a-fA-F]+)U?"), 16), (re.compile(r"0[bB]([01]+)U?"), 2),
            (re.compile(r"0([0-7]+)U?"), 8), (re.compile(r"([1-9][0-9]*|0)U?"), 10))
#: Digits a 64-bit immediate can have in each base.
_MAX_DIGITS = {16: 16, 2: 64, 8: 22, 10: 20}
_HEXFLOAT_RE = re.compile(r"0([fF])([0-9a-fA-F]{8})|0([dD])([0-9a-fA-F]{16})")
_DECFLOAT_RE = re.compile(r"([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
#: The sink: a destination whose value is discarded.
SINK = "_"
#: No mma statement has more operand entries than this (8 operands, vectors of at most 8).
MAX_OPERAND_ENTRIES = 64
#: Longest operand token read (a 64-bit binary immediate with a sign and a suffix fits).
MAX_TOKEN = 80


@dataclass(frozen=True)
class Imm:
    """A floating-point immediate as written: ``0f``/``0d`` hex floats (kind 'f32'/'f64',
    ``bits`` their IEEE encoding) or a decimal float (kind 'dec', ``bits`` its binary64 bits)."""

    text: str
    kind: str
    value: float
    bits: int


def _immediate(tok: str):
    """An int for an integer immediate, an :class:`Imm` for a float one, None otherwise.

    Integers may carry unary ``+``, ``-`` and ``~`` (ptxas reads them as a constant expression);
    decimal floats ``+`` and ``-``; ``0f``/``0d`` hex floats no sign at all (as in ptxas).
    """
    i = 0
    while i < len(tok) and tok[i] in "+-~":
        i += 1
    ops, body = tok[:i], tok[i:]
    for rx, base in _INT_RES:
        m = rx.fullmatch(body)
        if m:
            digits = m.group(1).lstrip("0") or "0"
            if len(digits) > _MAX_DIGITS[base] or int(digits, base) >= 1 << 64:
                raise _fail(f"immediate {tok[:24]}{'...' if len(tok) > 24 else ''} "
                            f"({len(m.group(1))} digits) does not fit in 64 bits")
            v = int(digits, base)
            for op in reversed(ops):
                v = -v if op == "-" else ~v if op == "~" else v
            return v
    if "~" in ops:
        return None
    if not ops:
        m = _HEXFLOAT_RE.fullmatch(body)
        if m:
            if m.group(1):
                bits = int(m.group(2), 16)
                return Imm(tok, "f32", struct.unpack("<f", struct.pack("<I", bits))[0], bits)
            bits = int(m.group(4), 16)
            return Imm(tok, "f64", struct.unpack("<d", struct.pack("<Q", bits))[0], bits)
    if _DECFLOAT_RE.fullmatch(body):
        v = float(body) * (-1) ** ops.count("-")
        return Imm(tok, "dec", v, struct.unpack("<Q", struct.pack("<d", v))[0])
    return None


def _operand(tok: str, text: str):
    if not tok:
        raise _fail(f"empty operand in '{quote(text)}'")
    if len(tok) > MAX_TOKEN:
        raise _fail(f"operand {tok[:24]}... is {len(tok)} characters long; no register or "
                    "immediate is that long")
    if tok == SINK:
        return SINK
    if _REG_RE.fullmatch(tok):
        return tok
    imm = _immediate(tok)
    if imm is not None:
        return imm
    raise _fail(f"bad operand '{tok}' in '{quote(text)}'")


_OPCODE_RE = re.compile(r"[^\s{},;]+")


def split_operands(text: str) -> tuple[str, list]:
    """Split ``mma... d, a, b, c;`` into the opcode and its operand groups.

    Whitespace (line breaks included) may stand between any two tokens, and need not separate
    the opcode from a ``{``.  A ``{...}`` vector becomes a list, a bare operand an item: a
    register name (str), the sink ``'_'`` (:data:`SINK`), an integer immediate (int: decimal,
    hex ``0x``, octal ``0``, binary ``0b``, optional ``U`` suffix, optional ``-``) or a float
    immediate (:class:`Imm`: ``0f``/``0d`` hex floats, decimal floats such as ``0.`` or
    ``1.5e3``).  The group list is empty when the text has no operand list.  Runs in linear
    time; lists longer than :data:`MAX_OPERAND_ENTRIES` entries are refused before parsing.
    """
    if not isinstance(text, str):
        raise _fail(f"expected instruction text, got {type(text).__name__}")
    s = text.strip()
    if s.startswith("@"):
        parts = s.split(None, 1)
        s = parts[1] if len(parts) > 1 else ""
    s = s.rstrip()
    if s.endswith(";"):
        s = s[:-1].rstrip()
    if ";" in s:
        raise _fail(f"more than one instruction in '{quote(text)}'")
    m = _OPCODE_RE.match(s)
    if not m:
        raise _fail("empty instruction text" if not s else f"no opcode in '{quote(text)}'")
    opcode = m.group(0)
    rest = s[m.end():]
    n_entries = rest.count(",") + 1
    if n_entries > MAX_OPERAND_ENTRIES:
        raise _fail(f"operand list of {opcode} has {n_entries} entries; an mma statement has at "
                    f"most 8 operands of at most 8 registers ({MAX_OPERAND_ENTRIES} entries)")
    groups: list = []
    vec: list | None = None
    tok: list[str] = []  # characters of the current token
    expect = True  # an operand is expected next (start, or after ',')
    gap = False  # whitespace seen inside the current token position

    def end_token() -> None:
        nonlocal expect
        t = "".join(tok)
        tok.clear()
        item = _operand(t, text)
        (vec if vec is not None else groups).append(item)
        expect = False

    for ch in rest:
        if ch.isspace():
            if tok and any(c not in "+-~" for c in tok):  # '- 1' is one constant expression
                gap = True
            continue
        if ch == "{":
            if vec is not None:
                raise _fail(f"nested '{{' in '{quote(text)}'")
            if tok or not expect:
                raise _fail(f"expected ',' before '{{' in '{quote(text)}'")
            vec = []
            expect = True
        elif ch == "}":
            if vec is None:
                raise _fail(f"unbalanced braces in '{quote(text)}'")
            if tok:
                end_token()
            elif expect and vec:
                raise _fail(f"empty operand in '{quote(text)}'")
            groups.append(vec)
            vec = None
            expect = False
        elif ch == ",":
            if tok:
                end_token()
            elif expect:
                raise _fail(f"empty operand in '{quote(text)}'")
            expect = True
        else:
            if gap or (not expect and not tok):
                raise _fail(f"expected ',' between operands in '{quote(text)}'")
            tok.append(ch)
            if len(tok) > MAX_TOKEN:
                raise _fail(f"operand {''.join(tok)[:24]}... in '{quote(text, 60)}' is longer "
                            f"than {MAX_TOKEN} characters; no register or immediate is that long")
        gap = False if not tok else gap
    if vec is not None:
        raise _fail(f"unclosed '{{' in '{quote(text)}'")
    if tok:
        end_token()
    elif expect and groups:
        raise _fail(f"trailing ',' in '{quote(text)}'")
    return opcode, groups


#: Register types by the PTX naming convention (the names nvcc and the truth corpus use):
#: (kind, bits), kind 'b' bit-size/integer, 'f' float, 'p' predicate.  Other names: unknown.
def _vector_type(items: list, what: str, bits: int, instr: Instruction) -> None:
    """Check a register/immediate vector as ptxas types it: the first typed register gives the
    vector's type; other registers must match its width (a predicate only joins a bit-size
    vector), integer immediates only join bit-size vectors, float immediates any."""
    regs = [x for x in items if isinstance(x, str) and x != SINK]
    vt = next((t for t in map(reg_type, regs) if t is not None), None)
    if vt is None:
        return  # no typed register: the names' declarations decide, which decode cannot see
    if vt[0] == "p":
        raise _fail(f"operand {what} of {instr.text}: a predicate register cannot hold mma data")
    if vt[1] != bits:
        first = next(r for r in regs if reg_type(r) is not None)
        raise _fail(f"operand {what} of {instr.text} needs {bits}-bit registers; "
                    f"{first} is {vt[1]}-bit")
    for x in items:
        t = reg_type(x) if isinstance(x, str) else None
        if t is not None and t != vt and not (t[1] == vt[1] and "p" not in (t[0], vt[0])) \
                and not (t[0] == "p" and vt[0] == "b"):
            raise _fail(f"operand {what} of {instr.text}: {x} is {t[1]}-bit"
                        + (f" ({t[0]})" if t[1] == vt[1] else "")
                        + f"; the vector's first register is {vt[1]}-bit ({vt[0]})")


def _check_vector(instr: Instruction, name: str, g, dest: bool) -> None:
    n = instr.regs[name]
    bits = instr.register_bits(name)
    label = name.upper()
    if not isinstance(g, list):
        raise _fail(f"operand {label} of {instr.text} must be a {{...}} vector of {n} "
                    f"registers, even with one register; got {_show(g)}")
    if len(g) != n:
        raise _fail(f"operand {label} of {instr.text} needs {n} {bits}-bit registers per lane, "
                    f"got {len(g)}")
    if dest:
        if any(not isinstance(x, str) for x in g):
            raise _fail(f"operand D of {instr.text} must hold registers (or the sink _), not "
                        "immediates")
        if all(x == SINK for x in g):
            raise _fail(f"operand D of {instr.text} has only sinks; at least one register is "
                        "needed (ptxas infers the vector's type from it)")
    else:
        if SINK in g:
            raise _fail(f"operand {label} of {instr.text}: the sink _ is only for destinations")
    _vector_type(g, label, bits, instr)
    if dest:
        from warpsim.tensorcore.immediates import check_mixture
        check_mixture(instr, "d", [x for x in g if x != SINK])  # .f32 registers only
    if not dest:
        from warpsim.tensorcore.immediates import check_mixture, check_vector
        check_mixture(instr, name, g)  # registers and literals mixed as ptxas types them
        check_vector(instr, name, g)  # literals whose word ptxas leaves undefined


def _show(g) -> str:
    if isinstance(g, list):
        return "{" + ", ".join(map(_show, g)) + "}"
    return g.text if isinstance(g, Imm) else str(g)


def _check_scale_data(instr: Instruction, name: str, g) -> None:
    """Scale data: one 32-bit register, braced or not, or an f32 hex-float immediate."""
    item = g
    if isinstance(g, list):
        if len(g) != 1:
            raise _fail(f"operand {name} of {instr.text} is one .b32 register; got the vector "
                        f"{_show(g)} (ptxas assembles some, but the PTX ISA defines one register)")
        item = g[0]
    if isinstance(item, str):
        if item == SINK:
            raise _fail(f"operand {name} of {instr.text}: the sink _ is only for destinations")
        t = reg_type(item)
        if t is not None and (t[1] != 32 or t[0] == "p"):
            raise _fail(f"operand {name} of {instr.text} needs a 32-bit register; {item} is "
                        f"{t[1]}-bit")
        return
    if isinstance(item, Imm) and item.kind == "f32":
        return
    raise _fail(f"operand {name} of {instr.text}: immediate {_show(item)} is not accepted as "
                "scale data; ptxas takes a 32-bit register or a 0fXXXXXXXX immediate")


def _check_selectors(instr: Instruction, name: str, side: str, g) -> None:
    """{byte-id, thread-id}: integer immediates with legal values, or 16-bit registers."""
    if not isinstance(g, list) or len(g) != 2:
        raise _fail(f"operand {name} of {instr.text} must be a two-element vector "
                    f"{{byte-id, thread-id}}; got {_show(g)}")
    bytes_ok, ta_ok, tb_ok = SELECTORS[instr.scale_vec]
    for part, x, legal in (("byte-id", g[0], bytes_ok),
                           ("thread-id", g[1], ta_ok if side == "a" else tb_ok)):
        label = f"{part}-{side}"
        if isinstance(x, bool) or isinstance(x, Imm) or x == SINK:
            raise _fail(f"operand {name} of {instr.text}: {label} must be an integer immediate "
                        f"or a 16-bit register, not {_show(x)}")
        if isinstance(x, int):
            if x not in legal:
                raise _fail(f"operand {name} of {instr.text}: {label} = {x} is undefined for "
                            f".scale_vec::{instr.scale_vec}X; legal values: "
                            + ", ".join(map(str, legal)))
            continue
        t = reg_type(x)
        if t is not None and (t[1] != 16 or t[0] == "p"):
            raise _fail(f"operand {name} of {instr.text}: {label} register {x} is {t[1]}-bit; "
                        "selector registers are 16-bit (.b16/.u16: %rs, %h)")


def _check_metadata(instr: Instruction, g) -> None:
    """Sparsity metadata e: one 32-bit register (also written ``{%e}``, as ptxas accepts)."""
    if isinstance(g, list) and len(g) == 1:
        g = g[0]
    if not isinstance(g, str) or g == SINK:
        raise _fail(f"operand e (sparsity metadata) of {instr.text} must be a single .b32 "
                    f"register; got {_show(g)}")
    t = reg_type(g)
    if t is not None and (t[1] != 32 or t[0] == "p"):
        raise _fail(f"operand e (sparsity metadata) of {instr.text} needs a 32-bit register; {g} "
                    f"is {t[1]}-bit")


def _check_sparsity_selector(instr: Instruction, g) -> None:
    """Sparsity selector f: an integer immediate in the PTX ISA's set for the form."""
    from warpsim.facts.sparse import check_selector

    if not isinstance(g, int) or isinstance(g, bool):
        raise _fail(f"operand f (sparsity selector) of {instr.text} must be an integer "
                    f"immediate, got {_show(g)}")
    check_selector(instr, g)


#: Operand roles of an mma statement, in order: d, a, b, c, then e, f (sparse: metadata and
#: sparsity selector), then the block-scale operands.
def operand_roles(instr: Instruction) -> tuple[str, ...]:
    roles = ("d", "a", "b", "c")
    if instr.sparse:
        roles += ("e", "f")
    if instr.block_scale:
        roles += ("scale-a-data", "{byte-id-a, thread-id-a}", "scale-b-data",
                  "{byte-id-b, thread-id-b}")
    return roles


def check_operands(instr: Instruction, groups: list, text: str) -> None:
    """Check an operand list as ptxas does (structure, sinks, immediates, register widths by
    the PTX naming convention; register declarations are not visible here)."""
    roles = operand_roles(instr)
    if len(groups) != len(roles):
        raise _fail(f"{instr.text} takes {len(roles)} operands ({', '.join(roles)}), got "
                    f"{len(groups)} in '{quote(text)}'")
    for role, g in zip(roles, groups):
        if role in ("d", "a", "b", "c"):
            _check_vector(instr, role, g, dest=role == "d")
        elif role == "e":
            _check_metadata(instr, g)
        elif role == "f":
            _check_sparsity_selector(instr, g)
        elif role.startswith("scale-"):
            _check_scale_data(instr, role, g)
        else:
            _check_selectors(instr, role, role[-2], g)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _decode_any(text: str) -> tuple[_Resolved, list]:
    opcode, groups = split_operands(text)
    if not opcode.startswith("mma") and _SHORT_RE.match(opcode):
        # the short form the command line takes: 'm16n8k16.row.col...' (no 'mma.sync.aligned.')
        opcode = opcode.lstrip(".")
        opcode = ("mma." if opcode.startswith("sync") else "mma.sync.aligned.") + opcode
    res = _resolve(_parse_opcode(opcode))
    if groups:
        check_operands(res.instr, groups, text)
    return res, groups


#: The opcode of the short form: a shape or a qualifier first ('m16n8k16.row.col...').
_SHORT_RE = re.compile(r"\.?(m\d+n\d+k\d+|kind::|row\b|col\b|sync\b|aligned\b)")

#: ``arch="auto"``: :func:`default_arch` of the instruction (the rule the command line uses).
AUTO = "auto"


def default_arch(instr_or_text: str | Instruction,
                 ptx_version: str | float | tuple[int, int] | None = None) -> str:
    """The target warpsim uses when none is given: sm_90 (the model verified on an H100) when
    the instruction is legal there, else the first of ``isa.PRIMARY_ARCHS`` that accepts it
    (sm_100a for ``.kind::f8f6f4`` with fp8 operands, sm_120a for the other ``.kind`` forms),
    else the first legal target.  PtxError if no target accepts it."""
    from warpsim.facts.isa import PRIMARY_ARCHS

    legal = legal_archs(instr_or_text, ptx_version)
    for a in ("sm_90",) + PRIMARY_ARCHS + tuple(legal):
        if a in legal:
            return a
    decode(instr_or_text, None, ptx_version)  # raises the reason
    raise _fail(f"{instr_or_text} is not legal on any known architecture")


def decode(text: str | Instruction, arch: str | None = AUTO,
           ptx_version: str | float | tuple[int, int] | None = None) -> Instruction:
    """Decode an mma instruction (text, with or without operands) legal on ``arch``.

    The text may omit the leading ``mma.sync.aligned.`` (``m16n8k16.row.col.f32.f16.f16.f32``),
    as on the command line.  ``arch``: a target name; ``"auto"`` (the default) picks
    :func:`default_arch` (sm_90 where the instruction is legal there); ``None`` accepts a form
    legal on any known architecture and leaves ``Instruction.arch`` unset.  ``ptx_version`` is
    the PTX ISA ``.version`` the code is written for ('9.0' ... '9.5'; None: the newest, 9.5):
    forms and targets newer than it are rejected.  Raises PtxError otherwise.
    """
    if not isinstance(text, (str, Instruction)):
        raise TypeError(f"decode takes an instruction string or Instruction, got {type(text).__name__}")
    version = ptx_version_of(ptx_version)
    if arch == AUTO:
        arch = default_arch(text, version)
    if isinstance(text, Instruction):
        res, groups = _resolved(text), []
    else:
        res, groups = _decode_any(text)
    if arch is None:
        if not any(_arch_error(res, a, version) is None for a in ARCHS.values()):
            # the reason on the target most likely meant: the newest that has the form
            ok = [a for a in ARCHS.values() if _arch_error(res, a) is None]
            raise _fail(f"{res.instr.text} is not legal on any known architecture at .version "
                        f"{_vtext(version)}: "
                        f"{_arch_error(res, ok[0] if ok else ARCHS['sm_120a'], version)}")
        return res.instr
    a = _arch_of(arch)
    err = _arch_error(res, a, version)
    if err is not None:
        raise err
    if isinstance(text, Instruction):
        return text  # legal on the target: the caller's Instruction, as given
    out = replace(res.instr, arch=a.name)
    if groups:  # literals ptxas refuses where it lowers the form on this target
        from warpsim.tensorcore.immediates import check_vector
        for role, g in zip("abc", groups[1:4]):
            check_vector(out, role, g)
    return out


def _resolved(x: str | Instruction) -> _Resolved:
    """The legality facts of an instruction: those the decoder stored on it, or (text, or an
    Instruction built by hand) those of decoding its text."""
    if isinstance(x, Instruction) and x.reqs is not None:
        return _Resolved(x, x.reqs, x.versions)
    return _decode_any(x.text if isinstance(x, Instruction) else x)[0]


def legal_archs(instr_or_text: str | Instruction,
                ptx_version: str | float | tuple[int, int] | None = None) -> list[str]:
    """Names in :data:`warpsim.facts.isa.ARCHS` on which the instruction is legal ([] if none) at
    PTX ISA ``ptx_version`` (None: the newest known).

    TypeError for anything but an instruction string or :class:`Instruction`.
    """
    if not isinstance(instr_or_text, (str, Instruction)):
        raise TypeError(f"legal_archs takes an instruction string or Instruction, got "
                        f"{type(instr_or_text).__name__}")
    version = ptx_version_of(ptx_version)
    try:
        res = _resolved(instr_or_text)
    except PtxError:
        return []
    return [name for name, a in ARCHS.items() if _arch_error(res, a, version) is None]


def as_instruction(x: object) -> Instruction:
    """``x`` itself if it is an :class:`Instruction`; an instruction string is decoded (any arch).

    The one place where text given to a layer below the public API becomes an Instruction."""
    if isinstance(x, Instruction):
        return x
    if isinstance(x, str):
        return decode(x, arch=None)
    raise TypeError(f"expected an Instruction or an instruction string, got {type(x).__name__}")
