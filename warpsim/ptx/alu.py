"""The ALU families together: one registry and a decoder of instruction forms.

``ALU_OPS`` maps each key of the families' ``OPS`` (``integer``, ``floating``, ``convert``,
``compare``, ``approx``) to the list of rows that carry it: one opcode may have a row in two
families (``add`` in integer and floating point), told apart by the type suffix, and the
approximate variants of opcodes with exact forms are keyed ``opcode.qualifier``
(``rcp.approx``).  :func:`decode_form` turns ``op.q1.q2.type`` into ``(OpSpec, type, mods)``.
"""

from __future__ import annotations

from types import MappingProxyType

from warpsim.errors import PtxError

from warpsim.ptx.ops import approx, compare, convert, floating, integer


def _merge() -> dict:
    ops: dict = {}
    for mod in (integer, floating, convert, compare, approx):
        for k, v in mod.OPS.items():
            ops.setdefault(k, []).append(v)
    return {k: tuple(v) for k, v in ops.items()}


#: key -> tuple of OpSpec rows (see the module docstring).
ALU_OPS = MappingProxyType(_merge())


def decode_form(text: str, ops=ALU_OPS):
    """(OpSpec, type, mods) of an instruction form written ``op.q1.q2.type`` (no operands).

    Qualifiers may come in any order; each must belong to exactly one modifier group of the
    row, at most one per group; required groups must be present; the row's ``check`` then
    rejects what ptxas rejects.  Errors are :class:`PtxError` naming the form and qualifier.
    """
    tok = text.split(".")
    if len(tok) > 1 and f"{tok[0]}.{tok[1]}" in ops:
        specs, rest = ops[f"{tok[0]}.{tok[1]}"], tok[2:]
    elif tok[0] in ops:
        specs, rest = ops[tok[0]], tok[1:]
    else:
        raise PtxError(f"unsupported opcode {tok[0]!r} in {text!r}")
    for spec in specs:
        if len(rest) >= 2 and ".".join(rest[-2:]) in spec.types:
            typ, rest = ".".join(rest[-2:]), rest[:-2]
            break
        if rest and rest[-1] in spec.types:
            typ, rest = rest[-1], rest[:-1]
            break
    else:
        raise PtxError(f"{text!r}: missing or unsupported type for {tok[0]!r} (legal: "
                       f"{', '.join(t for s in specs for t in s.types)})")
    where = {t: g for g, toks in spec.modifiers.items() for t in toks}
    mods: dict = {g: None for g in spec.modifiers}
    for t in rest:
        g = where.get(t)
        if g is None:
            raise PtxError(f"{text!r}: modifier .{t} not accepted by {spec.opcode}")
        if mods[g] is not None:
            raise PtxError(f"{text!r}: modifiers .{mods[g]} and .{t} exclude each other")
        mods[g] = t
    for g in spec.required:
        if mods[g] is None:
            raise PtxError(f"{text!r}: {spec.opcode} needs one of "
                           f"{', '.join('.' + t for t in spec.modifiers[g])}")
    if spec.check is not None:
        spec.check(typ, mods)
    return spec, typ, mods
