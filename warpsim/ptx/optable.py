"""The PTX instruction set as data: one :class:`OpSpec` row per opcode.

An instruction family module (``integer``, ``floating``, ``convert``, ...) exports ``OPS``, a
mapping from opcode to OpSpec.  The interpreter decodes the opcode's qualifiers against the row
once (type suffix, modifier groups, legality), then calls ``fn`` on whole register arrays.

Semantics functions take bit patterns, never Python scalars: NumPy unsigned arrays of the
register width of each operand (uint16 for .b16/.u16/.s16/.f16/.bf16, uint32 for 32-bit types
and packed x2 types, uint64 for 64-bit types; predicates bool), of any (broadcastable) shape, and
return new arrays of the destination's width.  Inputs are never modified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class OpSpec:
    """One PTX opcode: its legal types and modifiers, and its semantics.

    ``types``: the legal type suffixes (``'f32'``, ``'s32'``, ``'f16x2'``; for two-type opcodes
    such as ``cvt`` the pair ``'f16.f32'`` as written, destination first).
    ``modifiers``: modifier group -> legal tokens (``{'rnd': ('rn', 'rz', 'rm', 'rp'),
    'ftz': ('ftz',), 'sat': ('sat',)}``); at most one token per group.  ``required`` names the
    groups that must be present.
    ``fn(srcs, *, type, **mods)``: ``srcs`` the source operands' bit arrays in PTX operand order,
    ``type`` the type suffix, ``mods`` group name -> token given (or None).  Returns the
    destination array, or a tuple for several destinations.
    ``check(type, mods)``: optional; raises :class:`warpsim.errors.PtxError` for type-dependent
    combinations ptxas rejects (e.g. ``.ftz`` on ``.f64``).
    ``nsrc``: number of source operands; ``ndst``: number of destinations.
    ``exact``: False for approximate instructions (``.approx``), whose model is documented with
    its measured distance from the hardware.

    Optional, for the interpreter (:mod:`warpsim.ptx.program`):
    ``nsrc``/``ndst`` may be tuples of legal counts (``setp`` with or without ``.and`` and its
    ``c`` operand); ``fn`` then sees as many sources as were written, and may return more
    destinations than written (``p|q``: the extra ones are dropped when absent).
    ``signature(type, mods) -> (dst_types, src_types)``: the PTX type of each operand (e.g.
    ``(('pred',), ('f32', 'f32'))`` for ``setp.lt.f32``); immediates are encoded in it and
    registers checked against its widths.  Default: every operand has ``type`` (two-type
    ``'d.s'``: destinations ``d``, sources ``s``).
    ``compile(ins, dec) -> exec(ctx, mask)``: machine-level instructions (memory, lanes,
    control) decode their own operands with the :class:`~warpsim.ptx.program.Decoder` ``dec``
    and return the function that runs them; ``fn`` is then unused.
    ``aligned``: warp-synchronous (``.sync.aligned``): reaching it with a partial warp is an error.
    ``kind``: 'op' (default), 'branch', 'exit' or 'barrier' (the run loop's control classes).
    ``relaxed``: registers wider than the type are allowed (``ld``, ``st``, ``cvt``: sources
    truncated, destinations zero- or sign-extended by the type's signedness).
    ``specialize(type, mods, nsrc, generic) -> f | None``: optional, for speed: a function of
    the sources (positional) computing the one destination written, bound once for the
    decoded qualifiers; ``generic(*srcs)`` is ``fn`` with those qualifiers, for ``f`` to fall
    back on for operands its fast path does not cover.  Must give ``fn``'s bits exactly.
    """

    opcode: str
    types: tuple[str, ...]
    fn: Callable[..., Any]
    nsrc: int
    ndst: int = 1
    modifiers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    check: Callable[[str, Mapping[str, Any]], None] | None = None
    min_sm: int = 0
    min_ptx: tuple[int, int] = (1, 0)
    exact: bool = True
    doc: str = ""
    signature: Callable[[str | None, Mapping[str, Any]], tuple[tuple[str, ...], tuple[str, ...]]] | None = None
    compile: Callable[..., Any] | None = None
    aligned: bool = False
    kind: str = "op"
    relaxed: bool = False
    specialize: Callable[..., Any] | None = None


def decode_qualifiers(spec: OpSpec, words: list[str], text: str) -> tuple[str | None, dict]:
    """Read an opcode's qualifier words against ``spec``: (type suffix, {group: token or None}).

    The type is the trailing word (or trailing two words for two-type opcodes such as
    ``cvt.f16.f32``) when ``spec.types`` is non-empty; every other word must belong to one
    modifier group, at most once per group, in any order.
    """
    from warpsim.errors import PtxError

    t = None
    rest = list(words)
    if spec.types:
        if len(rest) >= 2 and ".".join(rest[-2:]) in spec.types:
            t = ".".join(rest[-2:])
            rest = rest[:-2]
        elif sum(w in spec.types for w in rest) == 1:
            t = next(w for w in rest if w in spec.types)  # e.g. prmt.b32.f4e: mode after type
            rest.remove(t)
        else:
            got = "." + ".".join(rest[-2:]) if rest else "none"
            raise PtxError(f"'{text}': {spec.opcode} needs a type, one of "
                           f"{', '.join('.' + x for x in spec.types)}; got {got}")
    mods: dict[str, Any] = {g: None for g in spec.modifiers}
    for w in rest:
        groups = [g for g, toks in spec.modifiers.items() if w in toks]
        if not groups:
            legal = sorted({x for toks in spec.modifiers.values() for x in toks})
            raise PtxError(f"'{text}': qualifier .{w} is not supported for {spec.opcode}"
                           + (f" (legal: {', '.join('.' + x for x in legal)})" if legal else ""))
        g = groups[0]
        if mods[g] is not None:
            raise PtxError(f"'{text}': .{mods[g]} and .{w} both set {spec.opcode}'s {g} "
                           "modifier; give one")
        mods[g] = w
    for g in spec.required:
        if mods.get(g) is None:
            raise PtxError(f"'{text}': {spec.opcode} requires a .{g} qualifier, one of "
                           f"{', '.join('.' + x for x in spec.modifiers[g])}")
    if spec.check is not None:
        spec.check(t, mods)
    return t, mods
