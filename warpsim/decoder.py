"""Decode ``mma.sync`` instruction text into a legal :class:`warpsim.isa.Instruction`.

Legality follows ptxas (CUDA 13.0, PTX ISA 9.0): a documented form is accepted for a target
exactly when ptxas assembles it there.  ``tests/data/ptxas_truth.jsonl.gz`` holds the labelled
strings this module is checked against; ``tools/ptxas_truth.py`` regenerates it.

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
forms of :data:`warpsim.sparse.SPARSE_FORMS`; their operand list is ``d, a, b, c, e, f`` (e the
metadata register, f the sparsity-selector immediate, checked against the PTX ISA's legal set),
followed by the block-scale operands where present.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace

from .errors import PtxError
from .isa import ARCHS, FORMS, TYPE_BITS, Arch, Form, Instruction, form_allows

__all__ = ["decode", "legal_archs", "split_operands"]

# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------

_SHAPE_RE = re.compile(r"m(\d+)n(\d+)k(\d+)")
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
        else:
            close = difflib.get_close_matches(tok, _KNOWN_WORDS, n=3, cutoff=0.6)
            hint = f"; did you mean {_dots(close)}?" if close else ""
            raise _fail(f"unknown qualifier .{tok}{hint}")
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
_SM100_FAMILY = ("sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_110a", "sm_110f")
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
    from .sparse import ORDERED_ONLY, SPARSE_FORMS

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
    if (at, bt) in f.pair_req:
        reqs.append((f"{_form_desc(f, at, bt)} with .{at}.{bt}", f.pair_req[(at, bt)]))
    if bitop and bitop in f.bitop_min_sm:
        reqs.append((f".{bitop}.popc", f.bitop_min_sm[bitop]))
    if q.sparse:
        from .sparse import extra_requirements

        reqs += extra_requirements(f.name, dt)
    if "bf16x2" in q.ignored:  # ignored, but ptxas still checks its feature level
        reqs.append((".bf16x2", 80))
    return _Resolved(instr, tuple(reqs))


def _form_desc(f: Form, at: str, bt: str) -> str:
    if f.kind:
        return f".kind::{f.kind}"
    return f".{at}" if at == bt else f".{at}.{bt}"


def _arch_of(arch: str) -> Arch:
    try:
        return ARCHS[arch]
    except (KeyError, TypeError):
        raise _fail(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}") from None


def _arch_error(res: _Resolved, a: Arch) -> PtxError | None:
    for what, req in res.reqs:
        if not form_allows(req, a):
            if isinstance(req, tuple):
                need = "one of " + ", ".join(req)
            else:
                need = f"sm_{int(req)} or later"  # type: ignore[arg-type]
            return _fail(f"{what} requires {need}; target is {a.name}")
    return None


# --------------------------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------------------------

_REG_RE = re.compile(r"%?[A-Za-z_$][\w$]*")
_INT_RE = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9]\d*)U?")


def _operand(tok: str, text: str):
    tok = tok.strip()
    if not tok:
        raise _fail(f"empty operand in '{text}'")
    if _INT_RE.fullmatch(tok):
        return int(tok.rstrip("U"), 0) if not re.fullmatch(r"[+-]?0[0-7]+U?", tok) \
            else int(tok.rstrip("U"), 8)
    if _REG_RE.fullmatch(tok):
        return tok
    raise _fail(f"bad operand '{tok}' in '{text}'")


def split_operands(text: str) -> tuple[str, list]:
    """Split ``mma... d, a, b, c;`` into the opcode and its operand groups.

    A ``{...}`` vector becomes a list of register names, a bare register a str, an immediate an
    int.  The opcode has no operand list when the text has none (the list is then empty).
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
        raise _fail(f"more than one instruction in '{text}'")
    parts = s.split(None, 1)
    if not parts:
        raise _fail("empty instruction text")
    opcode = parts[0]
    rest = parts[1].strip() if len(parts) > 1 else ""
    groups: list = []
    i = 0
    while i < len(rest):
        if rest[i] == "{":
            j = rest.find("}", i)
            if j < 0:
                raise _fail(f"unclosed '{{' in '{text}'")
            inner = rest[i + 1:j]
            if "{" in inner:
                raise _fail(f"nested '{{' in '{text}'")
            groups.append([_operand(t, text) for t in inner.split(",")])
            i = j + 1
        else:
            j = rest.find(",", i)
            j = len(rest) if j < 0 else j
            tok = rest[i:j]
            if "}" in tok or "{" in tok:
                raise _fail(f"unbalanced braces in '{text}'")
            groups.append(_operand(tok, text))
            i = j
        while i < len(rest) and rest[i] == " ":
            i += 1
        if i < len(rest):
            if rest[i] != ",":
                raise _fail(f"expected ',' between operands in '{text}'")
            i += 1
            if not rest[i:].strip():
                raise _fail(f"trailing ',' in '{text}'")
            while i < len(rest) and rest[i] in " \t":
                i += 1
    return opcode, groups


def _check_operands(instr: Instruction, groups: list, text: str) -> None:
    regs = instr.regs
    names = "dabc"
    want = (8 if instr.block_scale else 4) + (2 if instr.sparse else 0)
    if len(groups) != want:
        what = " (d, a, b, c, e, f)" if instr.sparse and not instr.block_scale else ""
        raise _fail(f"{instr.text} takes {want} operands{what}, got {len(groups)} in '{text}'")
    if instr.sparse:
        from .sparse import check_selector

        if not isinstance(groups[4], str):
            raise _fail("operand e (sparsity metadata) must be a single .b32 register")
        if not isinstance(groups[5], int):
            raise _fail("operand f (sparsity selector) must be an integer immediate, got "
                        f"{groups[5]!r}")
        check_selector(instr, groups[5])
        groups = groups[:4] + groups[6:]
    for name, g in zip(names, groups):
        if not isinstance(g, list):
            raise _fail(f"operand {name} must be a {{...}} vector of {regs[name]} registers")
        if len(g) != regs[name]:
            raise _fail(f"operand {name} needs {regs[name]} registers per lane, got {len(g)}")
        if any(not isinstance(r, str) for r in g):
            raise _fail(f"operand {name} must hold registers, not immediates")
    if instr.block_scale:
        for name, g in (("scale-a-data", groups[4]), ("scale-b-data", groups[6])):
            if isinstance(g, list):
                raise _fail(f"operand {name} must be a single .b32 register or immediate")
        for name, g in (("{byte-id-a, thread-id-a}", groups[5]),
                        ("{byte-id-b, thread-id-b}", groups[7])):
            if not isinstance(g, list) or len(g) != 2:
                raise _fail(f"operand {name} must be a two-element vector")


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _decode_any(text: str) -> tuple[_Resolved, list]:
    opcode, groups = split_operands(text)
    res = _resolve(_parse_opcode(opcode))
    if groups:
        _check_operands(res.instr, groups, text)
    return res, groups


def decode(text: str | Instruction, arch: str | None = "sm_90") -> Instruction:
    """Decode an mma instruction (text, with or without operands) legal on ``arch``.

    ``arch=None`` accepts a form legal on any known architecture.  Raises PtxError otherwise.
    """
    if isinstance(text, Instruction):
        decode(text.text, arch)
        return text
    res, _ = _decode_any(text)
    if arch is None:
        if not any(_arch_error(res, a) is None for a in ARCHS.values()):
            raise _fail(f"{res.instr.text} is not legal on any known architecture: "
                        f"{_arch_error(res, ARCHS['sm_120a'])}")
        return res.instr
    a = _arch_of(arch)
    err = _arch_error(res, a)
    if err is not None:
        raise err
    return replace(res.instr, arch=a.name)


def legal_archs(instr_or_text: str | Instruction) -> list[str]:
    """Names in :data:`warpsim.isa.ARCHS` on which the instruction is legal ([] if none)."""
    text = instr_or_text.text if isinstance(instr_or_text, Instruction) else instr_or_text
    try:
        res, _ = _decode_any(text)
    except PtxError:
        return []
    return [name for name, a in ARCHS.items() if _arch_error(res, a) is None]
