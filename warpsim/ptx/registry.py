"""The instruction set: every family module's ``OPS`` table merged into one lookup.

A family module (one concept each) exports ``OPS: dict[str, OpSpec]`` keyed by opcode; a key
may hold several dotted words (``'cp.async'``, ``'bar.warp.sync'``).  An instruction's opcode
is the longest key that prefixes its dotted words; the words after it are its qualifiers.
Every family is listed in ``FAMILIES``; a listed module that is missing, or has no ``OPS``, is
an error.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from warpsim.errors import PtxError
from warpsim.ptx.optable import OpSpec

#: Family modules of :mod:`warpsim.ptx.ops`, in lookup order (an opcode may be defined once).
FAMILIES = ("integer", "carry", "floating", "convert", "compare", "approx", "logic", "datamove",
            "warpops", "matrix", "mma", "wmma", "control", "atomic", "calls", "wgmma", "mbarrier",
            "tma", "cluster", "tcgen05")


@lru_cache(maxsize=1)
def table() -> dict[str, tuple[tuple[OpSpec, str], ...]]:
    """opcode -> ((OpSpec, family module name), ...): an opcode may be split between families
    by type (``add`` on integers and on floats); the type written selects the row."""
    out: dict[str, tuple[tuple[OpSpec, str], ...]] = {}
    for fam in FAMILIES:
        mod = importlib.import_module(f"warpsim.ptx.ops.{fam}")
        ops = mod.OPS
        for key, spec in ops.items():
            prev = out.get(key, ())
            if prev and (spec.compile is not None or any(p.compile is not None for p, _ in prev)
                         or set(spec.types) & {t for p, _ in prev for t in p.types}):
                raise RuntimeError(f"opcode {key!r} is defined by both {prev[0][1]} and {fam} "
                                   "with overlapping types")
            out[key] = prev + ((spec, fam),)
    return out


def lookup(opcode: str) -> tuple[str, tuple[OpSpec, ...], list[str]]:
    """(key, candidate specs, qualifier words) of an opcode text such as 'ld.shared.v4.u32'."""
    words = opcode.split(".")
    ops = table()
    for k in range(len(words), 0, -1):
        key = ".".join(words[:k])
        hit = ops.get(key)
        if hit is not None:
            return key, tuple(sp for sp, _ in hit), words[k:]
    raise PtxError(f"unsupported instruction '{words[0]}' (in '{opcode}'); warpsim runs: "
                   + ", ".join(sorted(ops)))
