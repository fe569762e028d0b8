"""Regenerate the SVG layout gallery in examples/gallery/ (python examples/gallery.py).

Each picture is one operand's fragment layout in the style of the PTX ISA "Matrix Fragments"
figures: the matrix as a grid, every cell labelled with the thread (lane) holding it over the
element's index in that thread's fragment.  The same pictures come from the command line:

    warpsim layout m16n8k16.row.col.f32.f16.f16.f32 --operand a --out a.svg
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from warpsim.tools.render import render_layout  # noqa: E402

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

#: (file name, instruction, operand, options)
GALLERY = [
    ("m16n8k16_f16_a.svg", F16, "a", {}),
    ("m16n8k16_f16_b.svg", F16, "b", {}),
    ("m16n8k16_f32_c.svg", F16, "c", {}),
    ("m16n8k8_tf32_a.svg", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "a", {}),
    ("m16n8k32_s8_a.svg", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "a", {}),
    ("m8n8k4_f16_a_row.svg", "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "a", {"color_by": "thread"}),
    ("m16n8k64_mxf4_e2m1_a.svg",
     "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0", "a", {}),
    ("m16n8k64_mxf4_scale_a.svg",
     "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
     "scale_a", {}),
    ("m8n8k128_b1_a.svg", "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc", "a", {}),
    ("sp_m16n8k32_f16_e_sel1.svg", "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
     "e", {"selector": 1, "color_by": "thread"}),
    ("sp_m16n8k32_s8_e_sel0.svg", "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "e",
     {"color_by": "thread"}),
]


def main(out_dir: str = os.path.join(HERE, "gallery")) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, instr, operand, opts in GALLERY:
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_layout(instr, operand, "svg", **opts))
        written.append(path)
        print("wrote", os.path.relpath(path))
    return written


if __name__ == "__main__":
    main(*sys.argv[1:2])
