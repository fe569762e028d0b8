"""Text pictures of wgmma fragments and shared-memory swizzle atoms.

``render_wgmma(instr, operand)``: the 64-row matrix of operand 'a' (A from registers) or 'd',
each cell ``T<thread>:<register>`` (thread = 32 * warp + lane of the warpgroup).
``render_swizzle(mode, elem_bytes=16, rows=8)``: one swizzle atom, each cell the logical element
(row-major) stored in that physical slot; a K-major descriptor's 8 x S-byte atom.
"""

from __future__ import annotations

import numpy as np

from warpsim.facts.swizzle import atom, mode
from warpsim.tensorcore import wgmma as W

__all__ = ["render_wgmma", "render_swizzle"]


def render_wgmma(instr, operand: str = "d", *, max_cols: int | None = None) -> str:
    """Which thread and register hold each element of a wgmma fragment, as a text table."""
    ins = W._as(instr)
    op = "d" if operand == "c" else operand
    lay = W.layout(ins, op)
    per = 32 // W.TYPE_BITS[ins.type_of(op)]
    cols = int(lay[..., 1].max()) + 1
    if max_cols:
        cols = min(cols, max_cols)
    grid = np.full((64, cols), "", dtype=object)
    for t in range(128):
        for e in range(lay.shape[1]):
            r, c = lay[t, e]
            if c < cols:
                grid[r, c] = f"T{t}:{e // per}" + (f".{e % per}" if per > 1 else "")
    w = max(len(x) for x in grid.ravel())
    head = f"{ins.text} operand {op.upper()} (64 x {int(lay[..., 1].max()) + 1}; T<thread>:<register>[.<element>])"
    lines = [head, "      " + " ".join(f"{c:>{w}}" for c in range(cols))]
    for r in range(64):
        lines.append(f"{r:>4}  " + " ".join(f"{x:>{w}}" for x in grid[r]))
    return "\n".join(lines)


def render_swizzle(m="128B", elem_bytes: int = 16, rows: int = 8) -> str:
    """One swizzle atom: rows x (span / elem_bytes) slots, each the logical element stored there."""
    sm = mode(m)
    a = atom(sm, rows, elem_bytes)
    w = len(str(a.max()))
    lines = [f"swizzle {sm.name}: {rows} rows of {sm.span if sm.bits else 16} bytes, {elem_bytes}-byte "
             "elements; entry = logical element stored in that slot"]
    for r in range(rows):
        lines.append(f"row {r}: " + " ".join(f"{x:>{w}}" for x in a[r]))
    return "\n".join(lines)
