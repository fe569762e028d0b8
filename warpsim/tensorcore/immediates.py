"""Immediates inside the A, B and C operand vectors of ``mma``: which mixtures ptxas accepts,
and the register word it builds from each literal.

Both facts were read from ptxas 13.0 (sm_90) and its SASS, and the words checked on an H100
(``warpsim.validation.immediates``, docs/validation.md); the table of verdicts is
``tests/data/mma_vector_immediates.json``.

The word.  ptxas does not convert a literal to the vector's element type: it takes the
literal's own bits and keeps as many as the register holds.
- an integer (decimal, hex, octal, binary, negative, ``U``): its 64-bit two's complement value,
  reduced modulo 2**width (``-1`` -> ``0xFFFFFFFF``; ``0x1FFFFFFFF`` -> ``0xFFFFFFFF``);
- ``0fXXXXXXXX``: those 32 bits; in a 64-bit vector that also holds a register, zero-extended;
- ``0dXXXXXXXXXXXXXXXX`` and decimal floats (``1.5``, ``1e3``, ``.5``): the binary64 bits (the
  decimal rounded to nearest double), reduced modulo 2**width: in a 32-bit register that is the
  LOW word of the double (``1.5`` -> ``0x00000000``, ``1.1`` -> ``0x9999999A``), even among
  ``.f32`` registers.
- on a target where ptxas lowers an fp8 (or kind::f8f6f4) form to f16 HMMA plus FADD (sm_90,
  sm_100a...: :attr:`warpsim.tensorcore.numerics.ArchModel.lowered`), C's elements are FADD operands: an
  ``0d`` or decimal literal in an f32 C becomes the double rounded to nearest binary32
  (``1.1`` -> ``0x3F8CCCCD``); there ptxas refuses integer literals in C, any literal in an
  f16 C, and ``0d``/decimal literals in A and B.
- in the C of an integer form that the target's MMA instruction runs natively (s8/u8 always;
  s4/u4 and b1 .xor below sm_90; b1 .and below sm_100), a float literal (0f, 0d, decimal)
  becomes 0; where ptxas lowers the form and adds C with IADD3, its bits as above.
Refused although ptxas assembles them, because what it builds is not defined by the text:
- a ``0f`` literal in a 64-bit vector of immediates only: ptxas reads 8 bytes from the 4-byte
  literal, and the high word is whatever its memory holds next (another literal, ``0xFFFFFFFF``
  or, after other code, ``0x000000E7``);
- integers of more than 64 bits, which ptxas sometimes takes and mangles
  (``0x1ABCDEF0123456789`` -> ``0x2BCDEF0123456789``); the decoder refuses them already.

Which mixtures of registers and literals assemble is :func:`warpsim.tensorcore.decode.check_operands`'s
business; this module adds the refusals above and ptxas's range check on decimal floats
(:func:`check_decimal`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from warpsim.errors import PtxError

__all__ = ["LITERAL_ONLY", "STRICT", "c_literal_rule", "check_decimal", "check_mixture",
           "check_vector", "literal_kind", "lowered", "vector_word"]

_TINY = Fraction(2) ** -1022


def literal_kind(x) -> str:
    """'int', 'f32' (0f) or 'f64' (0d, decimal) of a decoder or PTX-machine immediate."""
    if isinstance(x, int) and not isinstance(x, bool):
        return "int"
    k = x.kind
    return "int" if k == "int" else "f32" if k == "f32" else "f64"


def literal_text(x) -> str:
    return str(x) if isinstance(x, int) else x.text


def check_decimal(text: str) -> None:
    """ptxas's "Constant overflow" for a decimal float: its value overflows binary64, or it is
    nonzero, below 2**-1022 and not exactly a double (strtod's range error)."""
    body = text.lstrip("+-")
    exact = Fraction(body)
    v = float(body)
    if math.isinf(v) or (exact != 0 and exact < _TINY and Fraction(v) != exact):
        raise PtxError(f"decimal immediate {text} is out of the range of .f64 (ptxas: "
                       "constant overflow)")


def _where(instr, op: str) -> str:
    return f"operand {op.upper()} of {instr.text}"


#: Integer forms: the first SM at which ptxas lowers them (C then added by IADD3); below it the
#: native IMMA/BMMA reads C, and a float literal there becomes 0.  Read from ptxas 13.0's SASS
#: on sm_75..sm_121 (s8/u8 are never lowered).
INT_LOWERED_FROM = {"s4": 90, "u4": 90, "xor": 90, "and": 100}


def c_literal_rule(instr) -> str:
    """How a literal in operand C of ``instr`` on its target becomes a word: 'fadd' (an f32 C
    element of a :func:`lowered` fp8 form: a double rounds to binary32), 'int-native' (an
    integer form whose native MMA reads C: float literals become 0) or 'bits'."""
    if lowered(instr):
        return "fadd"
    if instr.atype in ("s8", "u8", "s4", "u4", "b1") and instr.arch is not None:
        from warpsim.facts.isa import ARCHS

        key = instr.bitop if instr.atype == "b1" else instr.atype
        first = INT_LOWERED_FROM.get(key)
        if first is None or ARCHS[instr.arch].sm < first:
            return "int-native"
    return "bits"


#: Literal kinds ptxas takes in a vector of immediates only, by (operand class, element type);
#: fp8 forms' f32 C also takes doubles ("c", "f32", "fp8").  ptxas 13.0, sm_90 labels.
LITERAL_ONLY: dict[tuple, frozenset] = {
    ("ab", "f64"): frozenset({"int", "f32", "f64"}), ("c", "f64"): frozenset({"int", "f32", "f64"}),
    ("c", "f32"): frozenset({"f32"}), ("c", "f32", "fp8"): frozenset({"f32", "f64"}),
    ("c", "s32"): frozenset({"int"}),
    **{("ab", t): frozenset({"f32"}) for t in ("s8", "u8", "s4", "u4", "b1")},
    **{("ab", t, "fp8"): frozenset({"f32"}) for t in ("e4m3", "e5m2")},
}

#: Element types that refuse a vector of .f32 registers and 0f literals only (C and D classed "c").
STRICT = frozenset({("ab", "f16"), ("ab", "bf16"), ("ab", "tf32"), ("c", "f16"), ("c", "s32")})


def _kind(x) -> str | None:
    """'B' (bit-size or integer register), 'F' (.f32/.f64 register), None (a name whose type
    the PTX naming convention does not say), or a literal kind."""
    if isinstance(x, str):
        from warpsim.facts.types import reg_type

        t = reg_type(x)
        return None if t is None else "F" if t[0] == "f" else "B"
    return literal_kind(x)


def check_mixture(instr, op: str, items: list) -> None:
    """Registers and literals mixed in one A/B/C vector, as ptxas types them (read from its
    verdicts on 4,042 spellings, tests/data/ptxas_mma_vector_immediates.json.gz): an integer
    literal next to a float register or literal, or anywhere in a vector that starts with a
    float literal, is "elements of different types"; a vector of
    literals only takes the kinds :data:`LITERAL_ONLY` lists, or a 0d/decimal literal first and
    0f literals after it, which every element type takes; a vector of .f32 registers (and 0f
    literals) only is refused for the element types in :data:`STRICT` (a bit-size register or
    a double literal among them lifts it; D is checked the same way).  Mixtures of 0f literals with .f32 registers or
    doubles are otherwise accepted; ptxas's verdict on some of them depends on their order
    (docs/design.md counts those differences)."""
    where = _where(instr, op)
    kinds = [_kind(x) for x in items]
    late_int = bool(kinds) and kinds[0] in ("f32", "f64") and "int" in kinds
    for a, b in list(zip(kinds, kinds[1:])) + ([("f32", "int")] if late_int else []):
        if (a == "int" and b in ("F", "f32", "f64")) or (b == "int" and a in ("F", "f32", "f64")):
            raise PtxError(f"{where}: an integer immediate next to a float register or literal "
                           "(ptxas: elements of different types); write integers beside "
                           "bit-size registers, floats as 0f/0d or decimal literals")
    role = "c" if op in "cd" else "ab"
    t = instr.type_of(op)
    lits = {k for k in kinds if k in ("int", "f32", "f64")}
    if all(isinstance(x, (int, float)) or not isinstance(x, str) for x in items):
        allowed = LITERAL_ONLY.get((role, t, instr.form), LITERAL_ONLY.get((role, t), frozenset()))
        if lits == {"f32", "f64"} and kinds[0] == "f64":  # observed: every element type takes
            return                                         # a 0d/decimal first, then some 0f
        if not lits <= allowed:
            took = ", ".join(sorted(allowed)) if allowed else "none"
            raise PtxError(f"{where} holds only immediates ({', '.join(sorted(lits))}); for .{t} "
                           f"ptxas takes such a vector of: {took} (write a register)")
        return
    if "F" in kinds and set(kinds) <= {"F", "f32"} and (role, t) in STRICT:
        raise PtxError(f"{where}: only .f32 registers{' and 0f immediates' if 'f32' in kinds else ''}"
                       f" for .{t} elements (ptxas: arguments mismatch); use bit-size (.b32) "
                       "registers")


def lowered(instr) -> bool:
    """Whether ptxas runs ``instr`` (an fp8 or kind::f8f6f4 form) on its target as f16 HMMA plus
    FADD of C, so that C's literals are FADD immediates."""
    if instr.arch is None or instr.form not in ("fp8", "f8f6f4"):
        return False
    from warpsim.tensorcore.numerics import model_for

    try:
        return instr.form in model_for(instr.arch).lowered
    except ValueError:
        return False


def check_vector(instr, op: str, items: list) -> None:
    """Refuse the literals whose word ptxas leaves undefined or cannot represent (the typing of
    mixtures is :func:`warpsim.tensorcore.decode.check_operands`'s): decimal floats out of binary64's
    range, 0f literals in a 64-bit vector of immediates only, and what ptxas refuses in the
    forms it lowers (:func:`lowered`)."""
    lits = [x for x in items if not isinstance(x, str)]
    for x in lits:
        if literal_kind(x) == "f64" and x.kind not in ("f64",):
            check_decimal(x.text)
    if lits and lowered(instr):
        kinds = {literal_kind(x) for x in lits}
        bad = (kinds if instr.type_of(op) == "f16" else kinds & {"int"}) if op == "c" \
            else kinds & {"f64"}
        if bad:
            raise PtxError(f"{_where(instr, op)}: {', '.join(sorted(bad))} immediates are refused "
                           f"by ptxas on {instr.arch}, where it lowers this form to f16 MMA "
                           "instructions plus additions (ptxas: arguments mismatch)")
    if len(lits) == len(items) and instr.register_bits(op) == 64 and \
            any(literal_kind(x) == "f32" for x in lits):
        raise PtxError(f"{_where(instr, op)}: a 0f immediate in a 64-bit vector of immediates "
                       "only; ptxas reads 8 bytes from the 4-byte literal, so the register's "
                       "high word is not defined by the text (write 0d or a decimal literal, or "
                       "put a register in the vector)")


def vector_word(x, bits: int, rule: str = "bits") -> int:
    """The register word ptxas builds from literal ``x`` in a ``bits``-wide vector item (see the
    module docstring; :func:`check_vector` has refused the undefined cases).  ``rule``: 'bits',
    or for operand C :func:`c_literal_rule`'s answer."""
    kind = literal_kind(x)
    mask = (1 << bits) - 1
    if kind == "int":
        return int(x if isinstance(x, int) else x.value) & mask
    if rule == "int-native":
        return 0
    if kind == "f32":
        return _bits_of(x, 32)
    b = _bits_of(x, 64)
    if rule == "fadd" and bits == 32:
        with np.errstate(all="ignore"):
            return int(np.uint64(b).view(np.float64).astype(np.float32).view(np.uint32))
    return b & mask


def _bits_of(x, width: int) -> int:
    """The IEEE bits of a 0f (width 32) or 0d/decimal (width 64) literal."""
    if x.kind in ("f32", "f64"):
        b = getattr(x, "bits", None)  # the decoder's Imm; the PTX machine's holds them in value
        return int(x.value if b is None else b)
    check_decimal(x.text)
    return int(np.float64(x.value).view(np.uint64))
