"""Fragment layouts for people: text, Markdown, CSV and SVG pictures.

:func:`render_layout` draws who holds what for one operand of an ``mma.sync`` instruction:

* the **matrix map**: the operand's matrix, each cell labelled with the lane holding it and
  the element's index in that lane's fragment (``T5:a2``: thread 5, element a2), as in the
  "Matrix Fragments for mma.m16n8k16" figures of the PTX ISA;
* the **register map**: for every lane, which matrix element each bit field of each register
  holds (``r1:16-31`` -> ``9,3``).

Selectors turn the full map into a query:

* ``element=(row, col)``: which lane, register and bits hold that element;
* ``lane=L`` (and optionally ``register=R``): which elements that lane's register(s) hold.

Operands ``'a'``, ``'b'``, ``'c'``, ``'d'``, and for ``.block_scale`` forms ``'scale_a'`` and
``'scale_b'`` (the scale metadata, with the ``byte_id`` / ``thread_id`` selectors of the
instruction).  For m8n8k4 ``.f16`` each of the four quad-pair products has its own map.

Everything is plain strings: the SVG is written from templates, with no dependencies.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from xml.sax.saxutils import escape

import numpy as np

from warpsim.errors import PtxError, ShapeError
from warpsim.facts.isa import Instruction
from warpsim.tensorcore.decode import as_instruction
from warpsim.tensorcore.layouts import code_bits, layout, product_of_lane, register_map

__all__ = ["FORMATS", "OPERANDS", "Cell", "cells", "render_layout", "PALETTE"]

FORMATS = ("text", "markdown", "csv", "svg", "json")
OPERANDS = ("a", "b", "c", "d", "scale_a", "scale_b", "e")
COLOR_BY = ("lane", "thread", "register")

#: 32 fixed, light fill colours (one per lane): 8 hues x 4 lightness steps, so neighbouring
#: lanes differ in hue and lanes 8 apart differ in lightness.
PALETTE: tuple[str, ...] = (
    "#f4cccc", "#fce5cd", "#fff2cc", "#d9ead3", "#d0e0e3", "#cfe2f3", "#d9d2e9", "#ead1dc",
    "#ea9999", "#f9cb9c", "#ffe599", "#b6d7a8", "#a2c4c9", "#9fc5e8", "#b4a7d6", "#d5a6bd",
    "#f2b8a2", "#f6d8ae", "#e6ee9c", "#c5e1a5", "#b2dfdb", "#b3e5fc", "#c5cae9", "#e1bee7",
    "#ef9a9a", "#ffcc80", "#fff59d", "#a5d6a7", "#80cbc4", "#90caf9", "#9fa8da", "#ce93d8",
)
#: threadID_in_group (lane % 4) colours, like the PTX ISA figures.
THREAD_PALETTE = ("#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc")
REGISTER_PALETTE = ("#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3", "#d9d2e9",
                    "#f4cccc")


@dataclass(frozen=True)
class Cell:
    """One matrix element and where it lives.  ``element`` is the index in the lane's fragment
    (for scale operands: the byte of the metadata word); ``hi`` is inclusive."""

    product: int
    row: int
    col: int
    lane: int
    element: int
    register: int
    lo: int
    hi: int


# --------------------------------------------------------------------------------------------
# The table behind every format
# --------------------------------------------------------------------------------------------


def _check_operand(operand: object) -> str:
    if isinstance(operand, str) and operand.lower() in OPERANDS:
        return operand.lower()
    raise PtxError(f"unknown operand {operand!r}: expected one of {', '.join(OPERANDS)}")


def _scale_layout(ins: Instruction, operand: str, byte_id: int, thread_id: int) -> np.ndarray:
    from warpsim.tensorcore import blockscale

    if not ins.block_scale:
        raise PtxError(f"{ins.text} has no .block_scale, so it has no {operand} operand")
    return blockscale.scale_layout(ins, operand, byte_id, thread_id)


def cells(instr: Instruction | str, operand: str, *, byte_id: int = 0, thread_id: int = 0) -> list[Cell]:
    """Every element of the operand with its lane, fragment index, register and bits.

    Ordered by (product, row, col).  For scale operands the register is the single ``.b32``
    metadata word (0) and ``element`` is the byte.
    """
    ins = as_instruction(instr)
    op = _check_operand(operand)
    out: list[Cell] = []
    if op == "e":  # sparse metadata: one nibble per (row, chunk); the selector comes as thread_id
        from warpsim.tensorcore.sparse import metadata_layout

        if not ins.sparse:
            raise PtxError(f"{ins.text} is not sparse, so it has no metadata operand 'e'")
        lay = metadata_layout(ins, thread_id)
        for ln in range(32):
            for j in range(8):
                r, c = (int(x) for x in lay[ln, j])
                if r >= 0:
                    out.append(Cell(0, r, c, ln, j, 0, 4 * j, 4 * j + 3))
        out.sort(key=lambda x: (x.row, x.col))
        return out
    if op.startswith("scale"):
        lay = _scale_layout(ins, op, byte_id, thread_id)
        rows, cols = lay.shape[:2]
        for r in range(rows):
            for c in range(cols):
                ln, byte = (int(x) for x in lay[r, c])
                out.append(Cell(0, r, c, ln, byte, 0, 8 * byte, 8 * byte + 7))
        return out
    lay = layout(ins, op)
    reg = register_map(ins, op)
    prod = product_of_lane(ins)
    width = code_bits(ins, op)
    for ln in range(32):
        for el in range(lay.shape[1]):
            r, c = (int(x) for x in lay[ln, el])
            rg, lo = (int(x) for x in reg[ln, el])
            out.append(Cell(int(prod[ln]), r, c, ln, el, rg, lo, lo + width - 1))
    out.sort(key=lambda x: (x.product, x.row, x.col))
    return out


def _meta(op: str) -> bool:
    """Operands held in one metadata register per lane (scale data, sparse metadata)."""
    return op.startswith("scale") or op == "e"


def _shape(ins: Instruction, op: str, byte_id: int = 0, thread_id: int = 0) -> tuple[int, int]:
    if op == "e":
        from warpsim.tensorcore.sparse import chunk_size

        return (ins.m, ins.k // chunk_size(ins))
    if op.startswith("scale"):
        v = ins.scale_vec or 1
        return (ins.m, v) if op == "scale_a" else (v, ins.n)
    return ins.matrix_shape(op)


def _nproducts(ins: Instruction, op: str) -> int:
    return 4 if ins.quadpair and not op.startswith("scale") else 1


def _elem_name(op: str, element: int) -> str:
    if op.startswith("scale"):
        return f"byte{element}"
    if op == "e":
        return f"nib{element}"
    return f"{op}{element}"


def _label(op: str, c: Cell) -> str:
    return f"T{c.lane}:{_elem_name(op, c.element)}"


def _mat(op: str) -> str:
    return {"a": "A", "b": "B", "c": "C", "d": "D", "scale_a": "scale_A", "scale_b": "scale_B",
            "e": "E"}[op]


def _coord(ins: Instruction, op: str, c: Cell) -> str:
    p = f"(product {c.product})" if _nproducts(ins, op) > 1 else ""
    return f"{_mat(op)}{p}[{c.row}][{c.col}]"


def _bits(c: Cell) -> str:
    return f"bit {c.lo}" if c.lo == c.hi else f"bits {c.lo}-{c.hi}"


def _axis_names(op: str) -> tuple[str, str]:
    return {"a": ("m", "k"), "b": ("k", "n"), "c": ("m", "n"), "d": ("m", "n"),
            "scale_a": ("m", "k chunk"), "scale_b": ("k chunk", "n"), "e": ("m", "k chunk")}[op]


def _type_desc(ins: Instruction, op: str) -> str:
    if op.startswith("scale"):
        return f".{ins.stype}, .scale_vec::{ins.scale_vec}X"
    if op == "e":
        from warpsim.tensorcore.sparse import chunk_size

        return f"sparsity metadata, one 4-bit index pair per chunk of {chunk_size(ins)} columns of A"
    t = ins.type_of(op)
    s = f".{t}"
    if op in "ab" and ins.storage_bits(op) != code_bits(ins, op):
        s += f" in {ins.storage_bits(op)}-bit containers"
    if op == "a" and ins.quadpair:
        s += f", .{ins.alayout}"
    if op == "a" and ins.sparse:
        s += f", compressed: the kept half of the logical {ins.m} x {ins.k} A (see operand e)"
    if op == "b" and ins.quadpair:
        s += f", .{ins.blayout}"
    return s


def _packing_line(ins: Instruction, op: str, byte_id: int, thread_id: int) -> str:
    """One sentence on how elements sit in registers."""
    if op == "e":
        return (f"one .b32 metadata register per lane; sparsity selector {thread_id}; nibble N "
                f"is bits 4N..4N+3 (idx0 in its low two bits, idx1 in its high two)")
    if op.startswith("scale"):
        sel = "thread-id-a" if op == "scale_a" else "thread-id-b"
        return (f"one .b32 metadata register per lane; byte-id {byte_id}, {sel} {thread_id}; "
                f"byte N is bits 8N..8N+7")
    epr = ins.elements_per_register(op)
    regs = ins.regs[op]
    rbits = ins.register_bits(op)
    w = code_bits(ins, op)
    sb = ins.storage_bits(op)
    reg0 = register_map(ins, op)[0]
    if epr == 1:
        where = f"element {op}N is register N (bits 0-{w - 1})"
    elif w == 1:
        where = f"element {op}N is bit N % {epr} of register N // {epr}"
    else:
        off = int(reg0[0, 1])
        first = f"{off}" if w == 1 else f"{off}-{off + w - 1}"
        where = (f"element {op}N is in register N // {epr}, bits {first} + {sb}*(N % {epr})")
    return (f"{regs} x .b{rbits} register{'s' if regs > 1 else ''} per lane, "
            f"{epr} element{'s' if epr > 1 else ''} per register; {where}")


# --------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------


def _int_or_none(v: object, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    return int(v)


def _select(ins: Instruction, op: str, table: list[Cell], element, lane, register, product) -> list[Cell] | None:
    """The cells a query picks, or None when no query selector is given."""
    lane = _int_or_none(lane, "lane")
    register = _int_or_none(register, "register")
    product = _int_or_none(product, "product")
    rows, cols = _shape(ins, op)
    nregs = 1 if _meta(op) else ins.regs[op]
    if element is not None and (lane is not None or register is not None):
        raise ShapeError("give either element=(row, col) or lane=/register=, not both")
    if register is not None and lane is None:
        raise ShapeError("register= needs lane= as well (which lane's register)")
    if element is not None:
        try:
            r, c = (int(x) for x in element)
        except (TypeError, ValueError):
            raise ShapeError(f"element must be (row, col), got {element!r}") from None
        if not (0 <= r < rows and 0 <= c < cols):
            raise ShapeError(f"element ({r}, {c}) is outside {_mat(op)}, which is {rows} x {cols}")
        if product is not None and not 0 <= product < _nproducts(ins, op):
            raise ShapeError(f"product {product} is out of range: 0 <= product < {_nproducts(ins, op)}")
        return [x for x in table if x.row == r and x.col == c and (product is None or x.product == product)]
    if lane is not None:
        if not 0 <= lane < 32:
            raise ShapeError(f"lane {lane} is out of range: 0 <= lane < 32")
        if register is not None and not 0 <= register < nregs:
            raise ShapeError(f"register {register} is out of range: {_mat(op)} has {nregs} register"
                             f"{'s' if nregs > 1 else ''} per lane (0..{nregs - 1})")
        sel = [x for x in table if x.lane == lane and (register is None or x.register == register)]
        return sorted(sel, key=lambda x: (x.register, x.lo))
    if product is not None:
        raise ShapeError("product= only qualifies element=(row, col)")
    return None


# --------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------


def _title(ins: Instruction, op: str) -> str:
    rows, cols = _shape(ins, op)
    return f"{ins.text}: operand {_mat(op)} ({rows} x {cols}, {_type_desc(ins, op)})"


def _grid(ins: Instruction, op: str, table: list[Cell]) -> list[list[list[Cell]]]:
    """grid[product][row][col] -> Cell."""
    rows, cols = _shape(ins, op)
    g = [[[None] * cols for _ in range(rows)] for _ in range(_nproducts(ins, op))]
    for x in table:
        g[x.product][x.row][x.col] = x
    return g  # type: ignore[return-value]


def _product_note(ins: Instruction, p: int) -> str:
    lanes = [ln for ln in range(32) if int(product_of_lane(ins)[ln]) == p]
    return f"product {p} (lanes {lanes[0]}-{lanes[3]} and {lanes[4]}-{lanes[7]})"


def _bands(ncols: int, cell_w: int, label_w: int, width: int = 132) -> list[range]:
    per = max(1, (width - label_w) // (cell_w + 1))
    if per < ncols:  # a power of two, so bands line up with k blocks
        per = 1 << (per.bit_length() - 1)
    return [range(s, min(ncols, s + per)) for s in range(0, ncols, per)]


def _text_table(header: list[str], rows: list[list[str]], label_head: str, labels: list[str]) -> list[str]:
    cw = max([len(h) for h in header] + [len(v) for r in rows for v in r] + [1])
    lw = max([len(label_head)] + [len(s) for s in labels])
    out: list[str] = []
    bands = _bands(len(header), cw, lw)
    for bi, band in enumerate(bands):
        if bi:
            out.append("")
        out.append(label_head.rjust(lw) + " " + " ".join(header[j].rjust(cw) for j in band))
        for lab, r in zip(labels, rows):
            out.append(lab.rjust(lw) + " " + " ".join(r[j].rjust(cw) for j in band))
    return out


def _reg_header(ins: Instruction, op: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Column headers of the register map ('r1:16-31') and the (register, lo) of each."""
    if op.startswith("scale"):
        keys = [(0, 8 * b) for b in range(4)]
        return [f"byte{b}:{8 * b}-{8 * b + 7}" for b in range(4)], keys
    if op == "e":
        keys = [(0, 4 * j) for j in range(8)]
        return [f"nib{j}:{4 * j}-{4 * j + 3}" for j in range(8)], keys
    width = code_bits(ins, op)
    reg = register_map(ins, op)[0]
    keys = [(int(r), int(lo)) for r, lo in reg]
    hdr = [f"r{r}:{lo}" if width == 1 else f"r{r}:{lo}-{lo + width - 1}" for r, lo in keys]
    return hdr, keys


def _reg_rows(ins: Instruction, op: str, table: list[Cell]) -> tuple[list[str], list[list[str]]]:
    hdr, keys = _reg_header(ins, op)
    col_of = {k: j for j, k in enumerate(keys)}
    q = _nproducts(ins, op) > 1
    rows = [["."] * len(keys) for _ in range(32)]
    for x in table:
        rows[x.lane][col_of[(x.register, x.lo)]] = (f"{x.product}:" if q else "") + f"{x.row},{x.col}"
    return hdr, rows


# --------------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------------


def _render_text(ins, op, table, sel, byte_id, thread_id, parts=("matrix", "registers")) -> str:
    rows, cols = _shape(ins, op)
    rn, cn = _axis_names(op)
    lines = [_title(ins, op), _packing_line(ins, op, byte_id, thread_id)]
    if sel is not None:
        lines.append("")
        lines += _query_lines(ins, op, sel)
        return "\n".join(lines) + "\n"
    grid = _grid(ins, op, table)
    for p, g in enumerate(grid if "matrix" in parts else []):
        lines.append("")
        head = f"Matrix map: cell = Tlane:{_elem_name(op, 0)[:-1]}N (row = {rn}, column = {cn})"
        if len(grid) > 1:
            head += f", {_product_note(ins, p)}"
        lines.append(head)
        lines += _text_table([str(c) for c in range(cols)],
                             [[_label(op, g[r][c]) for c in range(cols)] for r in range(rows)],
                             "", [str(r) for r in range(rows)])
    if "registers" not in parts:
        return "\n".join(lines) + "\n"
    lines.append("")
    q = " (product:row,col)" if len(grid) > 1 else " (row,col)"
    lines.append(f"Register map: register:bits -> element of {_mat(op)}{q} each lane holds there")
    hdr, rws = _reg_rows(ins, op, table)
    if _meta(op):
        keep = [ln for ln in range(32) if any(v != "." for v in rws[ln])]
    else:
        keep = list(range(32))
    lines += _text_table(hdr, [rws[ln] for ln in keep], "lane", [str(ln) for ln in keep])
    return "\n".join(lines) + "\n"


def _query_lines(ins: Instruction, op: str, sel: list[Cell]) -> list[str]:
    if not sel:
        return ["(nothing selected)"]
    out = []
    for x in sel:
        out.append(f"{_coord(ins, op, x)} is {_elem_name(op, x.element)} of lane {x.lane}: "
                   f"register {x.register}, {_bits(x)}")
    return out


def _render_markdown(ins, op, table, sel, byte_id, thread_id, parts=("matrix", "registers")) -> str:
    rows, cols = _shape(ins, op)
    lines = [f"**{_title(ins, op)}**", "", _packing_line(ins, op, byte_id, thread_id), ""]
    if sel is not None:
        lines += ["| element | lane | fragment element | register | bits |", "|---|---|---|---|---|"]
        for x in sel:
            lo_hi = f"{x.lo}" if x.lo == x.hi else f"{x.lo}-{x.hi}"
            lines.append(f"| {_coord(ins, op, x)} | {x.lane} | {_elem_name(op, x.element)} | "
                         f"{x.register} | {lo_hi} |")
        return "\n".join(lines) + "\n"
    grid = _grid(ins, op, table)
    for p, g in enumerate(grid if "matrix" in parts else []):
        if len(grid) > 1:
            lines += [f"*{_product_note(ins, p)}*", ""]
        lines.append("| row \\ col | " + " | ".join(str(c) for c in range(cols)) + " |")
        lines.append("|---" * (cols + 1) + "|")
        for r in range(rows):
            lines.append(f"| **{r}** | " + " | ".join(_label(op, g[r][c]) for c in range(cols)) + " |")
        lines.append("")
    if "registers" not in parts:
        return "\n".join(lines) + "\n"
    hdr, rws = _reg_rows(ins, op, table)
    lines.append("| lane | " + " | ".join(hdr) + " |")
    lines.append("|---" * (len(hdr) + 1) + "|")
    for ln in range(32):
        if _meta(op) and all(v == "." for v in rws[ln]):
            continue
        lines.append(f"| {ln} | " + " | ".join(rws[ln]) + " |")
    return "\n".join(lines) + "\n"


CSV_HEADER = ("operand", "product", "row", "col", "lane", "element", "register", "lo_bit", "hi_bit")


def _render_csv(ins, op, table, sel, byte_id, thread_id) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for x in (sel if sel is not None else table):
        w.writerow((op, x.product, x.row, x.col, x.lane, _elem_name(op, x.element), x.register, x.lo, x.hi))
    return buf.getvalue()


def _render_json(ins, op, table, sel, byte_id, thread_id) -> str:
    """One object: the instruction, operand, its shape and type, and one entry per element (the
    CSV columns), only the selected ones for a query."""
    import json

    scale = op.startswith("scale")
    rows, cols = _shape(ins, op)
    doc = {
        "instruction": ins.text, "operand": op, "rows": rows, "cols": cols,
        "products": _nproducts(ins, op),
        "type": ins.stype if scale else ins.type_of(op),
        "registers": 1 if scale else ins.regs[op],
        "register_bits": 32 if scale else ins.register_bits(op),
        **({"byte_id": byte_id, "thread_id": thread_id} if scale else {}),
        "query": sel is not None,
        "elements": [{"product": x.product, "row": x.row, "col": x.col, "lane": x.lane,
                      ("byte" if scale else "element"): x.element, "register": x.register,
                      "lo_bit": x.lo, "hi_bit": x.hi} for x in (sel if sel is not None else table)],
    }
    return json.dumps(doc) + "\n"


# --------------------------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------------------------

_CW, _CH = 46, 36  # cell size
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


def _fill(ins: Instruction, op: str, x: Cell, color_by: str) -> str:
    if color_by == "thread":
        return THREAD_PALETTE[x.lane % 4]
    if color_by == "register":
        return REGISTER_PALETTE[x.register % len(REGISTER_PALETTE)]
    return PALETTE[x.lane]


def _svg_text(x: float, y: float, s: str, size: float, *, anchor: str = "middle", weight: str = "normal",
              fill: str = "#222") -> str:
    return (f'<text x="{x:g}" y="{y:g}" font-size="{size:g}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}">{escape(s)}</text>')


def _render_svg(ins, op, table, sel, byte_id, thread_id, color_by="lane", title=None) -> str:
    rows, cols = _shape(ins, op)
    rn, cn = _axis_names(op)
    grid = _grid(ins, op, table)
    picked = {(x.product, x.row, x.col) for x in sel} if sel is not None else None
    band_cols = 32 if cols > 32 else cols
    bands = [range(s, min(cols, s + band_cols)) for s in range(0, cols, band_cols)]
    corner = f"{rn}\\{cn}"
    margin_l, gap = max(56, 16 + int(6.2 * len(corner))), 34
    panel_w = band_cols * _CW
    panel_h = rows * _CH
    # quad-pair products side by side (2 x 2), bands stacked
    npr = len(grid)
    pcols = 2 if npr > 1 else 1
    block_w = panel_w + margin_l + (40 if npr > 1 else 0)
    block_h = len(bands) * (panel_h + gap) + (24 if npr > 1 else 0)
    color_desc = {"lane": "lane (32 colours)", "thread": "threadID_in_group (lane % 4)",
                  "register": "register index"}[color_by]
    head = [
        (title or f"{_mat(op)} fragment of {ins.text}", 15, "bold", "#222"),
        (f"{_mat(op)} is {rows} x {cols} ({rn} x {cn}), {_type_desc(ins, op)}. Each cell: the thread "
         + ("(lane) Tn whose metadata register holds it, over the byte of that register."
            if _meta(op) else "(lane) Tn holding it, over its element in that thread's fragment."),
         11.5, "normal", "#444"),
        (_packing_line(ins, op, byte_id, thread_id) + f". Colour: {color_desc}.", 11.5, "normal", "#444"),
    ]
    if sel is not None:
        q = "; ".join(_query_lines(ins, op, sel)) if len(sel) <= 4 else f"{len(sel)} cells"
        head.append((f"Highlighted: {q}", 11.5, "bold", "#000"))
    margin_t = 40 + 18 * len(head)
    text_w = max(len(t) * size * (0.62 if w == "bold" else 0.56) for t, size, w, _ in head) + 32
    width = int(max(margin_l + pcols * block_w + 10, text_w))
    height = margin_t + ((npr + pcols - 1) // pcols) * block_h - gap + 16
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{_FONT}">',
        "<style>.t,.e,.ax{text-anchor:middle}"
        ".t{font-size:12px;font-weight:bold;fill:#222}.e{font-size:10.5px;fill:#333}"
        ".ax{font-size:10.5px;fill:#555}.end{text-anchor:end}"
        ".cell{stroke:#888;stroke-width:0.6}.sel{stroke:#000;stroke-width:2.5}</style>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
    ]
    for i, (t, size, w, color) in enumerate(head):
        out.append(_svg_text(16, 26 + 18 * i + (2 if i else 0), t, size, anchor="start", weight=w, fill=color))
    for p, g in enumerate(grid):
        ox = margin_l + (p % pcols) * block_w
        oy = margin_t + (p // pcols) * block_h
        if npr > 1:
            lanes = [ln for ln in range(32) if int(product_of_lane(ins)[ln]) == p]
            out.append(_svg_text(ox - 40, oy - 4, f"product {p}: lanes {lanes[0]}-{lanes[3]}, "
                                 f"{lanes[4]}-{lanes[7]}", 12, anchor="start", weight="bold"))
            oy += 24
        for bi, band in enumerate(bands):
            by = oy + bi * (panel_h + gap)
            # column labels
            for j, c in enumerate(band):
                out.append(f'<text x="{ox + j * _CW + _CW / 2:g}" y="{by - 6:g}" class="ax">{c}</text>')
            if bi == 0:
                out.append(f'<text x="{ox - 8:g}" y="{by - 6:g}" class="ax end">{escape(corner)}</text>')
            for r in range(rows):
                y = by + r * _CH
                out.append(f'<text x="{ox - 8:g}" y="{y + _CH / 2 + 4:g}" class="ax end">{r}</text>')
                for j, c in enumerate(band):
                    x = g[r][c]
                    cx = ox + j * _CW
                    on = picked is None or (p, r, c) in picked
                    g_attr = "" if on else ' opacity="0.25"'
                    cls = "cell sel" if (picked and on) else "cell"
                    out.append(f'<g{g_attr}><rect x="{cx}" y="{y}" width="{_CW}" height="{_CH}" '
                               f'fill="{_fill(ins, op, x, color_by)}" class="{cls}"/>'
                               f'<text x="{cx + _CW / 2:g}" y="{y + 15}" class="t">T{x.lane}</text>'
                               f'<text x="{cx + _CW / 2:g}" y="{y + 29}" class="e">{_elem_name(op, x.element)}</text></g>')
            # k-block separators every 8 columns for readability
            out.append(f'<rect x="{ox}" y="{by}" width="{len(band) * _CW}" height="{panel_h}" '
                       f'fill="none" stroke="#333" stroke-width="1.2"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def render_layout(instr: Instruction | str, operand: str, format: str = "text", *, element=None,
                  lane: int | None = None, register: int | None = None, product: int | None = None,
                  byte_id: int = 0, thread_id: int = 0, color_by: str = "lane",
                  title: str | None = None, parts: tuple[str, ...] = ("matrix", "registers"),
                  selector: int = 0) -> str:
    """The layout of one operand as a string in ``format`` ('text', 'markdown', 'csv', 'svg',
    'json': one object with an entry per element, the CSV columns).

    Selectors (optional): ``element=(row, col)`` (with ``product=`` for m8n8k4 .f16) asks who
    holds that element; ``lane=L`` with optional ``register=R`` asks what that lane's
    register(s) hold.  Without selectors the whole matrix map and register map are drawn; with
    them text/markdown/csv give the answer and SVG highlights the selected cells.

    ``operand``: 'a', 'b', 'c', 'd', or 'scale_a' / 'scale_b' for ``.block_scale`` forms, whose
    layout depends on ``byte_id`` and ``thread_id`` (the instruction's selector operands), or
    'e' for sparse ``mma.sp`` (the metadata nibbles; ``selector`` is the sparsity selector).
    ``color_by`` (SVG): 'lane' (32 colours), 'thread' (lane % 4, like the PTX figures) or
    'register'.  ``parts`` (text, markdown): which maps to include, of 'matrix' and 'registers'.
    """
    ins = as_instruction(instr)
    op = _check_operand(operand)
    if format not in FORMATS:
        raise PtxError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")
    if color_by not in COLOR_BY:
        raise PtxError(f"unknown color_by {color_by!r}: expected one of {', '.join(COLOR_BY)}")
    byte_id = _int_or_none(byte_id, "byte_id") or 0
    thread_id = _int_or_none(thread_id, "thread_id") or 0
    if not op.startswith("scale") and (byte_id or thread_id):
        raise PtxError("byte_id / thread_id select scale metadata: use them with operand scale_a or scale_b")
    selector = _int_or_none(selector, "selector") or 0
    if selector and op != "e":
        raise PtxError("selector is the sparsity selector: use it with operand 'e'")
    if op == "e":
        thread_id = selector  # internally the metadata operands' selector travels as thread_id
    table = cells(ins, op, byte_id=byte_id, thread_id=thread_id)
    sel = _select(ins, op, table, element, lane, register, product)
    parts = tuple(parts)
    bad = [x for x in parts if x not in ("matrix", "registers")]
    if bad or not parts:
        raise PtxError(f"parts must name 'matrix' and/or 'registers', got {parts!r}")
    if format == "text":
        return _render_text(ins, op, table, sel, byte_id, thread_id, parts)
    if format == "markdown":
        return _render_markdown(ins, op, table, sel, byte_id, thread_id, parts)
    if format == "csv":
        return _render_csv(ins, op, table, sel, byte_id, thread_id)
    if format == "json":
        return _render_json(ins, op, table, sel, byte_id, thread_id)
    return _render_svg(ins, op, table, sel, byte_id, thread_id, color_by=color_by, title=title)
