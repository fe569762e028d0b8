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
