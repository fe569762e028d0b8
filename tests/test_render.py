"""warpsim.tools.render: every format parses and agrees with warpsim.tensorcore.layouts."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import pytest

from warpsim.errors import PtxError, ShapeError, WarpsimError
from warpsim.tensorcore.layouts import elements_of, locate
from warpsim.tools.render import CSV_HEADER, PALETTE, cells, render_layout

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
QUAD = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
MXF4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
B1 = "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc"
CASES = [(F16, "a", 16, 16), (F16, "b", 16, 8), (F16, "c", 16, 8), (F16, "d", 16, 8),
         (QUAD, "a", 8, 4), (QUAD, "c", 8, 8), (MXF4, "a", 16, 64), (MXF4, "scale_a", 16, 2),
         (MXF4, "scale_b", 2, 8), (B1, "a", 8, 128)]
SVG = "{http://www.w3.org/2000/svg}"


def nprod(instr, op):
    return 4 if instr == QUAD and not op.startswith("scale") else 1


@pytest.mark.parametrize("instr,op,rows,cols", CASES)
def test_csv_one_row_per_element(instr, op, rows, cols):
    out = list(csv.reader(io.StringIO(render_layout(instr, op, "csv"))))
    assert tuple(out[0]) == CSV_HEADER
    body = out[1:]
    assert len(body) == rows * cols * nprod(instr, op)
    coords = {(int(r[1]), int(r[2]), int(r[3])) for r in body}
    assert len(coords) == len(body)  # each element once


@pytest.mark.parametrize("instr,op,rows,cols", CASES)
def test_svg_is_well_formed_and_has_a_cell_per_element(instr, op, rows, cols):
    svg = render_layout(instr, op, "svg")
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    texts = [t.text for t in root.iter(SVG + "text")]
    assert any(instr in (t or "") for t in texts)  # the title names the instruction
    cell_rects = [r for r in root.iter(SVG + "rect") if r.get("width") == "46"]
    assert len(cell_rects) == rows * cols * nprod(instr, op)
    lanes = [t for t in texts if t and t.startswith("T") and t[1:].isdigit()]
    assert len(lanes) == rows * cols * nprod(instr, op)


@pytest.mark.parametrize("instr,op,rows,cols", CASES)
def test_markdown_table_shape(instr, op, rows, cols):
    md = render_layout(instr, op, "markdown", parts=("matrix",))
    table = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(table) == nprod(instr, op) * (rows + 2)
    for ln in table:
        assert ln.count("|") == cols + 2  # row label + cols cells


def test_text_matrix_matches_ptx_figure():
    txt = render_layout(F16, "a", "text")
    lines = txt.splitlines()
    row0 = next(ln for ln in lines if ln.lstrip().startswith("0 ") and "T0:a0" in ln)
    assert row0.split()[1:5] == ["T0:a0", "T0:a1", "T1:a0", "T1:a1"]
    row9 = next(ln for ln in lines if ln.lstrip().startswith("9 ") and "T4:a2" in ln)
    assert row9.split()[1:5] == ["T4:a2", "T4:a3", "T5:a2", "T5:a3"]
    assert "lane" in txt and "r1:16-31" in txt


def test_cells_agree_with_locate():
    for x in cells(F16, "b"):
        (lane, el, reg, lo, hi), = locate(F16, "b", x.row, x.col)
        assert (x.lane, x.element, x.register, x.lo, x.hi) == (lane, el, reg, lo, hi)


def test_element_query():
    txt = render_layout(F16, "a", element=(9, 3))
    assert "A[9][3] is a3 of lane 5: register 1, bits 16-31" in txt
    q = render_layout(QUAD, "c", element=(1, 2))
    assert q.count(" is c") == 4  # one per quad-pair product


def test_lane_register_query():
    txt = render_layout(F16, "a", lane=5, register=1)
    got = [ln for ln in txt.splitlines() if "of lane 5" in ln]
    want = elements_of(F16, "a", 5, 1)
    assert len(got) == len(want) == 2
    assert "A[9][2]" in got[0] and "bits 0-15" in got[0]
    rows = list(csv.reader(io.StringIO(render_layout(F16, "a", "csv", lane=5))))
    assert len(rows) == 1 + 8


def test_scale_selectors_move_lanes_and_bytes():
    t0 = cells(MXF4, "scale_a")
    t1 = cells(MXF4, "scale_a", byte_id=2, thread_id=1)
    assert (t0[0].lane, t0[0].element) == (0, 0)
    assert (t1[0].lane, t1[0].element, t1[0].lo) == (2, 2, 16)


def test_svg_selection_highlights():
    svg = render_layout(F16, "a", "svg", lane=5)
    root = ET.fromstring(svg)
    faded = [g for g in root.iter(SVG + "g") if g.get("opacity")]
    assert len(faded) == 256 - 8


def test_palette_is_32_distinct_colours():
    assert len(PALETTE) == 32 and len(set(PALETTE)) == 32


@pytest.mark.parametrize("kwargs,err", [
    (dict(operand="e"), PtxError), (dict(operand="a", format="pdf"), PtxError),
    (dict(operand="a", element=(16, 0)), ShapeError), (dict(operand="a", lane=32), ShapeError),
    (dict(operand="a", lane=0, register=4), ShapeError), (dict(operand="a", register=1), ShapeError),
    (dict(operand="a", color_by="rainbow"), PtxError), (dict(operand="scale_a"), PtxError),
    (dict(operand="a", byte_id=1), PtxError),
])
def test_bad_arguments(kwargs, err):
    with pytest.raises(err):
        render_layout(F16, **kwargs)
    assert issubclass(err, WarpsimError)
