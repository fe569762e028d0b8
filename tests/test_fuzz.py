"""Fuzzing every public entry point as a hostile user would (issue 13).

For every row of :data:`ENTRY_POINTS` (an entry point and a strategy for its arguments, valid
and hostile mixed) hypothesis draws inputs, derandomized and bounded, and each call must

* return, or raise only ``ValueError`` / ``TypeError`` subclasses (warpsim's errors are
  ValueErrors); ``read_golden`` / ``write_golden`` may also raise the ``OSError`` that opening
  a missing path or a directory raises (Python's convention for paths; the CLI turns it into
  one line and exit status 2); and the message is warpsim's, not one from inside Python or
  NumPy (:data:`WRONG_LAYER`: "unhashable type", "cannot reshape array", ...);
* leave its inputs unmodified;
* hand out no cached data for writing: everything reachable from a result (arrays, their
  ``.base``, lists, dicts) is written into, and calling again must give the same result;
* be deterministic: the same again in this process, and the same digests of all outcomes
  (results and error messages) in two fresh processes with different hash seeds;
* take under a second of CPU on these small inputs.

The CLI's file inputs (``check-packing`` REGS / MATRIX: truncated, corrupted, other formats,
pickled objects, directories, missing paths; ``run --out`` paths) get the same treatment: exit
status 0/1 with a report, or 2 with one line on stderr, files unmodified.

Deeper runs: ``WARPSIM_FUZZ_EXAMPLES=600 WARPSIM_FUZZ_RANDOM=1 pytest tests/test_fuzz.py``
(CI runs 40 derandomized examples per row, ~18 s in all on 2 cores).

Adding an entry point
---------------------
Append one ``Row(name, call, strategy)`` to ``ENTRY_POINTS``: ``strategy`` draws ``(args,
kwargs)`` (good values mostly, a hostile one now and then: see ``pick``) and ``call(*args,
**kwargs)`` runs the entry point.  The call is made three times (once more to compare, once
after writing into the result), so a stateful entry point gets a call that builds fresh state
each time, as ``run_warp`` does for the Warp methods.  Nothing else changes: the row joins every
property above and the cross-process digest.

The rows cover the dense API, sparse ``mma.sp`` (``mma``/``matmul`` with ``metadata=`` and
``selector=``, ``layout(..., "e")``, the compress / expand / explain / query helpers of
:mod:`warpsim.tensorcore.sparse`), ``gemm``, ``instructions``, the PTX interpreter (``Warp.execute`` and
``Warp.run`` of texts from the interpreter's tests and examples, edited copies, junk and
:data:`PTX_HOSTILE`: infinite loops, huge immediates, long operand lists, undeclared registers,
out-of-bounds shared addresses, deep or unbalanced braces), the CLI subcommands (``gemm``,
``list``, ``layout --operand e``, ``check-packing --operand e``) and kernel launch
(``Module``, ``Module.launch``, ``launch``; paged ``.local`` memory at offsets inside, at the
end of and far outside sizes up to the 512 KiB limit, and ``timeout_s``: a launch that never
ends stops with its facts, one that ends is unaffected).  A slow entry point draws a ``share`` of the
examples.  :func:`test_hostile_ptx_text` runs every hostile PTX text through ``Warp.run`` and
``Warp.execute`` (the step budget ends infinite loops).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import warpsim
from warpsim.tools import cli
from warpsim.tensorcore import sparse

#: Examples per row in this process, and in each of the two digest processes.
EXAMPLES = int(os.environ.get("WARPSIM_FUZZ_EXAMPLES", "40"))
DIGEST_EXAMPLES = 8
#: WARPSIM_FUZZ_RANDOM=1: fresh random examples (a deeper search; CI stays derandomized).
DERANDOMIZE = not os.environ.get("WARPSIM_FUZZ_RANDOM")
#: CPU seconds one call may take on these small inputs.
CALL_LIMIT_S = 1.0

ALLOWED = (ValueError, TypeError)

# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------

#: One instruction per family, with a target it is legal on.
INSTRS = {
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32": "sm_80",
    "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32": "sm_90",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32": "sm_80",
    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64": "sm_80",
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32": "sm_70",
    "mma.sync.aligned.m8n8k4.col.row.f16.f16.f16.f16": "sm_75",
    "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32": "sm_80",
    "mma.sync.aligned.m8n8k32.row.col.s32.u4.s4.s32": "sm_75",
    "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc": "sm_80",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32": "sm_89",
    "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32": "sm_120a",
    "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0": "sm_120a",
    "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3": "sm_120a",
}
DENSE_TEXTS = list(INSTRS)
#: Sparse forms: one per metadata class and chunk size, both spellings, the sm_120 kinds.
SPARSE_INSTRS = {
    "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32": "sm_80",  # quad, selectors 0-3
    "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32": "sm_80",  # pair-k
    "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32": "sm_80",  # 1:2
    "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32": "sm_80",  # pair-row
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.u8.s32": "sm_80",  # all
    "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.s4.s32": "sm_80",  # 4:8 pairwise
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e5m2.f32": "sm_89",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32": "sm_120a",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0": "sm_120a",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3": "sm_120a",
}
SP_TEXTS = list(SPARSE_INSTRS) + DENSE_TEXTS[:1]  # and one dense form (metadata must be refused)
INSTRS.update(SPARSE_INSTRS)
TEXTS = list(INSTRS)


class Opaque:
    """A foreign object with a stable repr (no memory address in error messages)."""

    def __repr__(self) -> str:
        return "Opaque()"


def once_in(draw, n: int) -> bool:
    """True about once in ``n`` draws (and not on hypothesis's simplest example)."""
    return draw(st.sampled_from(range(n))) == n - 1


def pick(draw, good: list, bad: list, odds: int = 10):
    """One of ``good`` mostly; one of ``bad`` about once in ``odds`` draws."""
    if bad and once_in(draw, odds):
        return draw(st.sampled_from(bad))
    return draw(st.sampled_from(good))


def _edit(text: str, data: st.DataObject) -> str:
    """``text`` with a few random character edits, or cut short."""
    how = data.draw(st.sampled_from(["insert", "delete", "replace", "cut", "case", "space"]))
    i = data.draw(st.integers(0, max(0, len(text) - 1)))
    ch = data.draw(st.sampled_from(list("._:0123456789abfkmnsx ,{}%;\n\t\u0661\uff11") + ["::", ".."]))
    if how == "insert":
        return text[:i] + ch + text[i:]
    if how == "delete":
        return text[:i] + text[i + 1:]
    if how == "replace":
        return text[:i] + ch + text[i + 1:]
    if how == "cut":
        return text[:i]
    if how == "case":
        return text.upper()
    return text.replace(".", " . ", 1)


@st.composite
def instrs(draw, hostile: bool = True, texts: list[str] | None = None):
    """An instruction: mostly valid text, sometimes a decoded Instruction, an edited text or
    no text at all."""
    data = draw(st.data())
    text = draw(st.sampled_from(texts or TEXTS))
    kind = pick(draw, ["text"] * 5 + ["instruction"], ["edit", "edit", "junk", "other"] if hostile else [])
    if kind == "instruction":
        return warpsim.decode(text, arch=None)
    if kind == "edit":
        return _edit(text, data)
    if kind == "junk":
        return draw(st.text(max_size=40))
    if kind == "other":
        return draw(st.sampled_from([None, 5, 1.5, b"mma.sync", [text], Opaque()]))
    return text


def _text(instr: object) -> str | None:
    """The text of a valid instruction from INSTRS, else None."""
    text = instr.text if isinstance(instr, warpsim.Instruction) else instr
    return text if isinstance(text, str) and text in INSTRS else None


def legal_arch(instr: object) -> str:
    text = _text(instr)
    return INSTRS[text] if text is not None else "sm_90"


@st.composite
def archs(draw, instr: object):
    return pick(draw, [legal_arch(instr)] * 3 + ["exact"], ["sm_90", "sm_1000", "", None, ["sm_90"], 90, "SM_90"])


OPERAND_NAMES = ["a", "b", "c", "d", "A", "D", "scale_a", "scale_b", "e", "", None, 0, ["a"]]


def operands(draw):
    return pick(draw, OPERAND_NAMES[:4], OPERAND_NAMES[4:])
selectors = st.one_of(st.integers(-2, 5), st.sampled_from([True, False, 0.0, 1.0, np.int64(1), np.uint8(0),
                                                           np.array([0, 0]), np.array(1), None, [0], "0"]))


def _decoded(instr: object):
    text = _text(instr)
    return warpsim.decode(text, arch=None) if text is not None else None


def _nregs(instr: object, op: object) -> tuple[int, int]:
    """(registers, bits) of the operand, or a plausible guess for instructions that do not decode."""
    ins = _decoded(instr)
    if ins is None or op not in ("a", "b", "c", "d"):
        return 4, 32
    return ins.regs[op], ins.register_bits(op)


@st.composite
def words(draw, instr: object, op: object, lanes: int = 32):
    """Register words for operand ``op``: the right shape and dtype mostly, then the wrong ones."""
    nregs, bits = _nregs(instr, op)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    shape = pick(draw, [(lanes, nregs)] * 3 + [(2, lanes, nregs), (1, 1, lanes, nregs)],
                 [(lanes, nregs + 1), (lanes - 1, nregs), (lanes,), (), (0, lanes, nregs)], odds=16)
    dt = pick(draw, ["native"] * 3 + ["list", "int64", "uint64"],
              ["negative", "uint32", "int32", "uint8", "float32", "bool", "object", "str", "ragged"], odds=16)
    hi = (1 << bits) - 1
    vals = rng.integers(0, 1 << min(bits, 63), size=shape, dtype=np.uint64)
    if draw(st.booleans()):
        vals.reshape(-1)[:1] = draw(st.sampled_from([0, hi, min(hi, 2**63 - 1), 1 << 31]))
    if dt == "native":
        return vals.astype(np.uint64 if bits == 64 else np.uint32)
    if dt == "list":
        return vals.tolist()
    if dt == "object":
        out = vals.astype(object)
        if out.size:
            out.reshape(-1)[0] = draw(st.sampled_from([-1, 1 << 64, 1 << 32, 2.5, "x", None, True]))
        return out
    if dt == "str":
        return vals.astype(str)
    if dt == "ragged":
        return [[1, 2], [3]]
    if dt == "negative":
        v = vals.astype(np.int64)
        v.reshape(-1)[:1] = -1
        return v
    return vals.astype(dt)


@st.composite
def matrices(draw, instr: object, op: object, batched: bool = True):
    """Values for operand ``op``: the right matrix shape mostly, with specials and wrong types."""
    ins = _decoded(instr)
    if ins is None or op not in ("a", "b", "c", "d"):
        tail = (16, 16)
    else:
        tail = ((4,) if ins.quadpair else ()) + ins.matrix_shape(op)
    shape = pick(draw, [tail] * 3 + ([(2,) + tail] if batched else []), [tail[:-1], tail[:-1] + (tail[-1] + 1,), (), (3, 0) + tail],
                 odds=16)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    vals = np.round(rng.normal(size=shape) * 4) / 4
    if vals.size and draw(st.booleans()):
        vals.reshape(-1)[: 3] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 1e300, -0.0, 5e-324, 2**31]))
    dt = pick(draw, ["float64"] * 3 + ["float32", "list", "int64"],
              ["float16", "int8", "bool", "complex", "object", "str"], odds=16)
    if dt == "list":
        return vals.tolist()
    if dt == "object":
        return vals.astype(object)
    if dt == "str":
        return vals.astype(str)
    if dt in ("int64", "int8"):
        with np.errstate(all="ignore"):
            return np.nan_to_num(vals, posinf=0, neginf=0).astype(dt)
    with np.errstate(all="ignore"):
        return vals.astype(dt)


def _scale_shapes(instr: object) -> tuple[tuple[int, int], tuple[int, int]]:
    ins = _decoded(instr)
    if ins is None or not ins.block_scale:
        return (16, 1), (1, 8)
    return (ins.m, ins.scale_vec), (ins.scale_vec, ins.n)


@st.composite
def scale_words(draw):
    kind = pick(draw, ["words"], ["none", "list", "wrong", "float"])
    seed = draw(st.integers(0, 2**32 - 1))
    w = np.random.default_rng(seed).integers(0, 2**32, size=32, dtype=np.uint64).astype(np.uint32)
    return {"words": w, "none": None, "list": w.tolist(), "wrong": w[:31], "float": w.astype(np.float32)}[kind]


# --------------------------------------------------------------------------------------------
# Argument strategies: each draws (args, kwargs)
# --------------------------------------------------------------------------------------------

@st.composite
def decode_args(draw):
    instr = draw(instrs())
    if isinstance(instr, warpsim.Instruction):
        instr = instr.text
    return (instr,), {"arch": draw(archs(instr))}


@st.composite
def legal_archs_args(draw):
    return (draw(instrs()),), {}


@st.composite
def layout_args(draw):
    instr = draw(instrs())
    op = operands(draw)
    kw = {}
    for name in ("byte_id", "thread_id"):
        if once_in(draw, 4):
            kw[name] = draw(selectors)
    ins = _decoded(instr)
    if ins is not None and ins.block_scale and draw(st.booleans()):  # block-scale metadata layouts
        op = draw(st.sampled_from(["scale_a", "scale_b"]))
    return (instr, op), kw


@st.composite
def pack_args(draw):
    instr = draw(instrs())
    op = operands(draw)
    strict = pick(draw, [False, True], [None, 1])
    return (instr, op, draw(matrices(instr, op))), {"strict": strict}


@st.composite
def unpack_args(draw):
    instr = draw(instrs())
    op = operands(draw)
    return (instr, op, draw(words(instr, op))), {}


@st.composite
def mma_args(draw):
    instr = draw(instrs())
    a, b, c = (draw(words(instr, op)) for op in "abc")
    kw: dict[str, Any] = {"arch": draw(archs(instr))}
    ins = _decoded(instr)
    if (ins is not None and ins.block_scale and not once_in(draw, 4)) or once_in(draw, 8):
        kw["scale_a"], kw["scale_b"] = draw(scale_words()), draw(scale_words())
    for name in ("byte_id_a", "thread_id_a", "byte_id_b", "thread_id_b"):
        if once_in(draw, 6):
            kw[name] = draw(selectors)
    return (instr, a, b, c), kw


@st.composite
def matmul_args(draw):
    instr = draw(instrs())
    A, B, C = (draw(matrices(instr, op)) for op in "abc")
    kw: dict[str, Any] = {"arch": draw(archs(instr))}
    if draw(st.booleans()):
        sa, sb = _scale_shapes(instr)
        exps = st.sampled_from([1.0, 2.0, 0.5, 0.25, 3.0, np.nan, 0.0])
        kw["scale_A"] = np.full(draw(st.sampled_from([sa, sb, (2,) + sa])), draw(exps))
        kw["scale_B"] = np.full(draw(st.sampled_from([sb, sa])), draw(exps))
    return (instr, A, B, C), kw


@st.composite
def warp_args(draw):
    arch = pick(draw, ["sm_90", "sm_80", "exact", "sm_120a"], ["sm_1", 90, None], odds=3)
    batch = pick(draw, [(), 2, (1, 2), 0, (0,), [3], np.int64(2)], [-1, (2.0,), "2", True, 10**15], odds=3)
    return (), {"arch": arch, "batch": batch}


REG_NAMES = ["%r0", "%r1", "%r2", "%r3", "%f0", "%fd0", "%fd1", "%rd0", "%h0", "%rs0", "%p0", "%acc",
             "%r 0", "", "0r", 5, None]


def _frag_names(instr: object, op: str, base: int) -> list[str]:
    nregs, bits = _nregs(instr, op)
    return [f"%{'fd' if bits == 64 else 'r'}{base + i}" for i in range(nregs)]


@st.composite
def warp_steps(draw):
    """A Warp and a script of method calls on it: load A, B, C (and scales), execute, store,
    reads and writes, each with hostile variations."""
    batch = draw(st.sampled_from([(), (2,), (1, 3)]))
    instr = draw(instrs(hostile=False))
    arch = pick(draw, [legal_arch(instr), legal_arch(instr), "exact"], ["sm_90", "sm_70"])
    text = instr.text if isinstance(instr, warpsim.Instruction) else instr
    ins = _decoded(text)
    regs = {op: _frag_names(text, op, 10 * i) for i, op in enumerate("abcd")}
    steps: list[tuple] = []
    for op in "abc":
        names = pick(draw, [regs[op], "{" + ", ".join(regs[op]) + "}"], [regs[op][:-1] or ["%r0"], ["%h0"] * 4, "{%r0}", 7])
        steps.append(("load", instr, op, draw(matrices(instr, op, batched=False)), names))
    sel = ""
    if ins.block_scale:
        shapes = _scale_shapes(instr)
        for i, op in enumerate(("scale_a", "scale_b")):
            steps.append(("load_scales", instr, op, np.full(shapes[i], 2.0), f"%r{90 + i}",
                          draw(selectors) if once_in(draw, 5) else 0, 0))
        sel = ", %r90, {0, 0}, %r91, {0, 0}"
    stmt = (f"mma.sync.aligned{text[len('mma.sync.aligned'):]} {{{', '.join(regs['d'])}}}, "
            f"{{{', '.join(regs['a'])}}}, {{{', '.join(regs['b'])}}}, {{{', '.join(regs['c'])}}}{sel};")
    if once_in(draw, 5):
        stmt = _edit(stmt, draw(st.data()))
    if once_in(draw, 6):
        steps.append(("write", "%p0", draw(st.sampled_from([1, 0, [1] * 16 + [0] * 16, 2])), None))
        stmt = "@%p0 " + stmt
    steps.append(("execute", stmt if not once_in(draw, 10) else draw(st.sampled_from([None, b"mma", 5]))))
    steps.append(("store", instr, pick(draw, ["d", "D"], ["c", "e"]), regs["d"]))
    for _ in range(draw(st.sampled_from(range(4)))):
        what = draw(st.sampled_from(["write", "write_float", "read", "read_float", "declare"]))
        name = draw(st.sampled_from(REG_NAMES))
        if what in ("write", "write_float"):
            value = draw(st.sampled_from([0, -1, 2**32, 2**64, 1.5, np.nan, "x", [1, 2], list(range(32)), True,
                                          np.arange(32, dtype=np.int8), np.float32(1)]))
            steps.append((what, name, value, draw(st.sampled_from([None, 32, 64, 16, 3, True]))))
        elif what == "declare":
            steps.append((what, name, draw(st.sampled_from([32, 64, 1, 7, "32", None]))))
        else:
            steps.append((what, name))
    return (arch, batch, steps), {}


def run_warp(arch: object, batch: object, steps: list[tuple]) -> list:
    """Run a script on a fresh Warp: each step's result, or its (allowed) error."""
    w = warpsim.Warp(arch=arch, batch=batch)
    out = []
    for step in steps:
        name, args = step[0], step[1:]
        kw = {}
        if name in ("write", "write_float"):
            args, kw = args[:2], ({"bits": args[2]} if args[2] is not None else {})
        elif name == "load_scales":
            args, kw = args[:4], {"byte_id": args[4], "thread_id": args[5]}
        out.append(_outcome(getattr(w, name), args, kw, what=f"Warp.{name}"))
    out.append(("registers", w.registers))
    return out


@st.composite
def render_args(draw):
    instr = draw(instrs())
    op = operands(draw)
    ins = _decoded(instr)
    if ins is not None and ins.block_scale and draw(st.booleans()):
        op = draw(st.sampled_from(["scale_a", "scale_b"]))
    fmt = pick(draw, ["text", "markdown", "csv", "svg"], ["html", None])
    kw: dict[str, Any] = {}
    # keyword: (good values, hostile values)
    for k, (good, bad) in {"element": ([(0, 0), (1, 2)], [(99, 0), 3, "x"]),
                           "lane": ([0, 31], [32, -1, 1.0]),
                           "register": ([0], [9, True]),
                           "product": ([0, 3], [4]),
                           "color_by": (["lane", "thread", "register"], ["rainbow"]),
                           "title": (["t", "<&>"], [5]),
                           "parts": ([("matrix",), ("registers",)], [("x",), "matrix"]),
                           }.items():
        if once_in(draw, 6):
            kw[k] = pick(draw, good, bad, odds=4)
    if "register" in kw and "element" not in kw:
        kw.setdefault("lane", 0)
    for k in ("byte_id", "thread_id"):
        if once_in(draw, 6):
            kw[k] = draw(selectors)
    return (instr, op, fmt), kw


@st.composite
def explain_args(draw):
    instr = draw(instrs())
    op = operands(draw)
    regs = draw(words(instr, op))
    codes = pick(draw, [False, False, False, True], [1])
    if once_in(draw, 4):
        matrix = draw(matrices(instr, op))
    else:  # the values (codes) the words hold, perhaps: a consistent pair, or a transposed one
        try:
            matrix = (warpsim.tensorcore.packing.unpack_bits if codes else warpsim.unpack)(instr, op, regs)
            if draw(st.booleans()) and matrix.ndim >= 2:
                matrix = np.swapaxes(matrix, -1, -2).copy()
        except ALLOWED:
            matrix = draw(matrices(instr, op))
    kw = {"codes": codes, "max_warps": pick(draw, [64, 1], [0, -1, 2.5])}
    return (instr, op, regs, matrix), kw


@st.composite
def golden_args(draw):
    instr = draw(instrs())
    kw = {"arch": draw(archs(instr)),
          "seed": pick(draw, [0, 1, 2**64, np.uint8(7)], [-1, 1.5, True, "1"]),
          "dist": pick(draw, [None, None, "normal", "uniform-bits", "special", "tiny", "wide"], ["bogus", 3]),
          "batch": pick(draw, [1, 2], [0, -1, 1.0, True]),
          "selector": pick(draw, [None, None, 0, 1], [-1, 7, 1.5, True, "1", np.int8(1)])}
    return (instr,), kw


# Golden data to write and read back, made once.
_GOLDEN_TEXT = "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"


def _golden_data() -> dict:
    return warpsim.golden(_GOLDEN_TEXT, arch="sm_90", seed=3, batch=1)


@st.composite
def write_golden_args(draw):
    data = _golden_data()
    how = pick(draw, ["ok"], ["drop", "junk", "nondict", "wrongtype"], odds=2)
    if how == "drop":
        data.pop(draw(st.sampled_from(sorted(data))))
    elif how == "junk":
        data[draw(st.sampled_from(["a_regs", "d", "seed", "instruction", "batch"]))] = draw(
            st.sampled_from([None, "x", [1, [2]], np.array(["s"]), 1.5]))
    elif how == "nondict":
        data = draw(st.sampled_from([None, [], "data", 5]))
    elif how == "wrongtype":
        data["instruction"] = draw(instrs())
    name = pick(draw, ["g.npz", "g.json", "g.h", "G.H", "1g.h"], ["g.txt", "g", "sub/g.npz", ".npz"])
    prefix = pick(draw, [None, "ok_name"], ["1bad", "with space", 5])
    return (data, name), {"prefix": prefix}


def _write_golden_in_tmp(data: object, name: str, *, prefix: object) -> bytes:
    """write_golden into a fresh directory; returns the bytes written (for digests)."""
    d = tempfile.mkdtemp(prefix="warpsim-fuzz-")
    try:
        p = warpsim.write_golden(data, os.path.join(d, name), prefix=prefix)
        return Path(p).read_bytes()
    except FileNotFoundError as e:  # a directory that does not exist: open()'s own OSError
        assert "/" in name, f"OSError {e!r} for a file in an existing directory"
        raise ValueError("OSError FileNotFoundError") from None
    finally:
        shutil.rmtree(d)


def _pickled_npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, a=np.array([{"x": 1}], dtype=object))
    return buf.getvalue()


@st.composite
def golden_file_args(draw):
    """Hostile golden files: the bytes of a real one, truncated, corrupted or of another kind."""
    suffix = draw(st.sampled_from([".npz", ".json"]))
    valid = _valid_golden_bytes(suffix)
    how = draw(st.sampled_from(["valid", "truncate", "flip", "flip", "insert", "random", "pickled", "npy",
                                "other-format", "dir", "missing", "pickle"]))
    if how == "valid":
        content: object = valid
    elif how == "truncate":
        content = valid[: draw(st.integers(0, len(valid) - 1))]
    elif how == "flip":
        b = bytearray(valid)
        for _ in range(draw(st.integers(1, 4))):
            b[draw(st.integers(0, len(b) - 1))] ^= draw(st.integers(1, 255))
        content = bytes(b)
    elif how == "insert":
        i = draw(st.integers(0, len(valid)))
        content = valid[:i] + draw(st.binary(min_size=1, max_size=8)) + valid[i:]
    elif how == "random":
        content = draw(st.binary(max_size=200))
    elif how == "pickled":
        content = _pickled_npz()
    elif how == "npy":
        buf = io.BytesIO()
        np.save(buf, np.zeros(3))
        content = buf.getvalue()
    elif how == "other-format":
        content = _valid_golden_bytes(".json" if suffix == ".npz" else ".npz")
    elif how == "pickle":
        content = pickle.dumps({"instruction": "x"})
    else:
        content = how  # 'dir' or 'missing'
    return (content, suffix), {}


_VALID: dict[str, bytes] = {}


def _valid_golden_bytes(suffix: str) -> bytes:
    if suffix not in _VALID:
        _VALID[suffix] = _write_golden_in_tmp(_golden_data(), "g" + suffix, prefix=None)
    return _VALID[suffix]


def _read_golden_file(content: object, suffix: str) -> dict:
    """read_golden of a file holding ``content`` ('dir': a directory, 'missing': no file)."""
    d = tempfile.mkdtemp(prefix="warpsim-fuzz-")
    try:
        p = os.path.join(d, "g" + suffix)
        if content == "dir":
            os.mkdir(p)
        elif content != "missing":
            Path(p).write_bytes(content)
        before = Path(p).read_bytes() if isinstance(content, bytes) else None
        try:
            return warpsim.read_golden(p)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
            assert content in ("dir", "missing"), f"OSError {e!r} for an existing file"
            raise ValueError(f"OSError {type(e).__name__}") from None  # allowed, with a stable message
        finally:
            if before is not None:
                assert Path(p).read_bytes() == before, "read_golden modified its file"
    finally:
        shutil.rmtree(d)


# --------------------------------------------------------------------------------------------
# Sparse mma.sp: metadata, selectors, compress / expand (warpsim.tensorcore.sparse)
# --------------------------------------------------------------------------------------------

#: Selector values that are not integers, or no value at all (hostile in every row).
BAD_SELECTORS = [True, False, 0.0, 1.0, np.float32(0), np.array([0, 0]), np.array(1), None, [0], "0", -1, 4,
                 2**70, np.uint64(2**63)]


def _sp_selectors(instr: object) -> list:
    ins = _decoded(instr)
    return list(sparse.legal_selectors(ins)) if ins is not None and ins.sparse else [0]


@st.composite
def selector_of(draw, instr: object):
    """A sparsity selector the instruction defines mostly (Python or NumPy int), then others."""
    f = draw(st.sampled_from(_sp_selectors(instr)))
    return pick(draw, [f, f, np.int64(f), np.uint8(f)], BAD_SELECTORS, odds=6)


@st.composite
def metadata_words(draw, instr: object):
    """Metadata words (..., 32): valid nibbles of the instruction's spelling mostly (so any
    selector reads a valid pattern), then an invalid nibble, wrong shapes and dtypes."""
    ins = _decoded(instr)
    valid = list(sparse.valid_nibbles(ins)) if ins is not None and ins.sparse else [0x4]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = pick(draw, [(32,)] * 3 + [(2, 32), (1, 1, 32)], [(31,), (32, 1), (), (0, 32), (33,), (3, 32)], odds=12)
    nib = np.asarray(valid, np.uint64)[rng.integers(0, len(valid), size=shape + (8,))]
    how = pick(draw, ["valid"], ["bad-nibble", "bad-nibble", "ones", "zeros"], odds=5)
    if how == "bad-nibble" and nib.size:
        nib.reshape(-1)[draw(st.integers(0, nib.size - 1))] = draw(st.sampled_from(
            [v for v in range(16) if v not in valid]))
    w = (nib << (np.uint64(4) * np.arange(8, dtype=np.uint64))).sum(-1) if nib.size else np.zeros(shape, np.uint64)
    if how in ("ones", "zeros"):
        w = np.full(shape, 0xFFFFFFFF if how == "ones" else 0, np.uint64)
    dt = pick(draw, ["uint32"] * 3 + ["list", "int64"],
              ["negative", "big", "float32", "bool", "object", "str", "ragged"], odds=12)
    if dt == "list":
        return w.tolist()
    if dt == "negative":
        v = w.astype(np.int64)
        v.reshape(-1)[:1] = -1
        return v
    if dt == "big":
        return w | np.uint64(1 << 40)
    if dt == "object":
        return w.astype(object)
    if dt == "str":
        return w.astype(str)
    if dt == "ragged":
        return [[1, 2], [3]]
    return w.astype(dt)


def _sp_ins(instr: object):
    ins = _decoded(instr)
    return ins if ins is not None and ins.sparse else None


@st.composite
def logical_sparse(draw, instr: object):
    """A logical A (..., M, K) for a sparse instruction: structurally sparse mostly (random kept
    positions per chunk, values with specials), then dense, wrong shapes and dtypes."""
    ins = _sp_ins(instr)
    m, k = (ins.m, ins.k) if ins is not None else (16, 32)
    cs = sparse.chunk_size(ins) if ins is not None else 4
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = pick(draw, [(m, k)] * 3 + [(2, m, k)], [(m, k // 2), (m, k + 1), (m,), (), (0, m, k)], odds=12)
    vals = np.round(rng.normal(size=shape) * 4) / 4
    if len(shape) >= 2 and shape[-1] == k and not once_in(draw, 8):  # 2:4, 1:2 or 4:8 pairwise
        units = 2 if cs == 2 else 4
        keep = rng.random(shape[:-1] + (k // cs, units)).argsort(-1) < units // 2
        keep &= rng.random(keep.shape) < 0.9  # some chunks keep fewer
        if cs == 8:
            keep = np.repeat(keep, 2, axis=-1)
        vals = vals * keep.reshape(shape)
    if vals.size and draw(st.booleans()):
        vals.reshape(-1)[:2] = draw(st.sampled_from([np.nan, np.inf, -0.0, 1e300, 5e-324]))
    dt = pick(draw, ["float64"] * 3 + ["float32", "list"], ["complex", "object", "str", "bool", "int8"], odds=12)
    with np.errstate(all="ignore"):
        if dt == "list":
            return vals.tolist()
        if dt == "object":
            return vals.astype(object)
        if dt == "str":
            return vals.astype(str)
        if dt == "int8":
            return np.nan_to_num(vals, posinf=0, neginf=0).astype(np.int8)
        return vals.astype(dt)


def sp_instrs(hostile: bool = True):
    """A sparse instruction (text or decoded) mostly; a dense one or junk now and then."""
    return instrs(hostile=hostile, texts=SP_TEXTS)


@st.composite
def mma_sp_args(draw):
    instr = draw(sp_instrs())
    a, b, c = (draw(words(instr, op)) for op in "abc")
    kw: dict[str, Any] = {"arch": draw(archs(instr))}
    if not once_in(draw, 12):
        kw["metadata"] = draw(metadata_words(instr))
    if not once_in(draw, 12):
        kw["selector"] = draw(selector_of(instr))
    ins = _decoded(instr)
    if (ins is not None and ins.block_scale and not once_in(draw, 6)) or once_in(draw, 12):
        kw["scale_a"], kw["scale_b"] = draw(scale_words()), draw(scale_words())
    if once_in(draw, 8):
        kw[draw(st.sampled_from(["byte_id_a", "thread_id_b"]))] = draw(selectors)
    return (instr, a, b, c), kw


@st.composite
def matmul_sp_args(draw):
    instr = draw(sp_instrs())
    ins = _sp_ins(instr)
    B, C = draw(matrices(instr, "b")), draw(matrices(instr, "c"))
    kw: dict[str, Any] = {"arch": draw(archs(instr))}
    if draw(st.booleans()):  # the logical A, compressed by matmul
        A = draw(logical_sparse(instr))
    else:  # compressed values and their metadata
        A = draw(matrices(instr, "a"))
        kw["metadata"] = draw(metadata_words(instr))
    if not once_in(draw, 3):
        kw["selector"] = draw(selector_of(instr))
    if ins is not None and ins.block_scale and not once_in(draw, 6):
        v = ins.scale_vec
        kw["scale_A"] = np.full(pick(draw, [(ins.m, v)], [(v, ins.m), (ins.m,)]), 2.0)
        kw["scale_B"] = np.full((v, ins.n), draw(st.sampled_from([1.0, 0.5, np.nan])))
    return (instr, A, B, C), kw


@st.composite
def layout_e_args(draw):
    instr = draw(sp_instrs())
    op = pick(draw, ["e", "e", "E"], ["a", "scale_a", " e", "ee"])
    kw = {}
    if not once_in(draw, 4):
        kw["selector"] = draw(selector_of(instr))
    if once_in(draw, 6):
        kw[draw(st.sampled_from(["byte_id", "thread_id"]))] = draw(st.sampled_from([0, 1, 3, True]))
    return (instr, op), kw


@st.composite
def compress_args(draw):
    instr = draw(sp_instrs())
    kw = {"selector": draw(selector_of(instr))} if not once_in(draw, 3) else {}
    return (instr, draw(logical_sparse(instr))), kw


@st.composite
def expand_args(draw):
    instr = draw(sp_instrs())
    ins = _sp_ins(instr)
    kw = {"selector": draw(selector_of(instr))} if not once_in(draw, 3) else {}
    if ins is not None and not once_in(draw, 3):  # compressed values of the right shape
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        shape = pick(draw, [(ins.m, ins.k // 2), (2, ins.m, ins.k // 2)], [(ins.m, ins.k), (ins.k // 2,)])
        values = pick(draw, [np.round(rng.normal(size=shape) * 4) / 4], [rng.integers(0, 9, shape).astype(object)])
    else:
        values = draw(matrices(instr, "a"))
    return (instr, values, draw(metadata_words(instr))), kw


@st.composite
def explain_metadata_args(draw):
    instr = draw(sp_instrs())
    ins = _sp_ins(instr)
    A = draw(logical_sparse(instr))
    if isinstance(A, np.ndarray) and A.ndim == 3 and len(A) and not once_in(draw, 4):
        A = A[0]  # one matrix: explain_metadata takes no batch
    kw = {"selector": draw(selector_of(instr))} if not once_in(draw, 3) else {}
    try:  # the metadata of A mostly (perhaps under another selector, or with swapped halves)
        if ins is None or once_in(draw, 3):
            raise ValueError
        f = draw(st.sampled_from(_sp_selectors(ins)))
        meta = sparse.compress(ins, np.asarray(A, dtype=np.float64), selector=f)[1]
        if meta.ndim != 1:
            raise ValueError
        if once_in(draw, 3):
            meta = ((meta & 0xFFFF) << 16) | (meta >> 16)
    except (ValueError, TypeError):
        meta = draw(metadata_words(instr))
    return (instr, meta, A), kw


SPARSE_QUERIES = ["legal_selectors", "valid_nibbles", "chunk_size", "metadata_class", "metadata_layout",
                  "check_metadata", "check_selector"]


def sparse_query(name: str, instr: object, *args: object) -> object:
    """One of warpsim.tensorcore.sparse's small query functions."""
    return getattr(sparse, name)(instr, *args)


@st.composite
def sparse_query_args(draw):
    name = draw(st.sampled_from(SPARSE_QUERIES))
    instr = draw(sp_instrs())
    args: tuple = ()
    if name == "metadata_layout":
        args = (draw(selector_of(instr)),)
    elif name == "check_selector":
        args = (draw(selector_of(instr)),)
    elif name == "check_metadata":
        args = (draw(metadata_words(instr)), draw(selector_of(instr)))
    return (name, instr) + args, {}


# --------------------------------------------------------------------------------------------
# gemm, instructions
# --------------------------------------------------------------------------------------------

class Progress:
    """A progress callback with a stable repr that records its calls."""

    def __init__(self) -> None:
        self.calls: list = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))

    def __repr__(self) -> str:
        return "Progress()"


@st.composite
def gemm_args(draw):
    instr = draw(instrs(texts=DENSE_TEXTS * 4 + SP_TEXTS[:1]))
    ins = _decoded(instr)
    tm, tn, tk = ins.shape if ins is not None else (16, 8, 16)
    M = draw(st.sampled_from([tm, 1, 2 * tm - 3, 0]))
    N = draw(st.sampled_from([tn, 3, tn + 5]))
    K = draw(st.sampled_from([tk, 2 * tk, tk // 2 + 1, 0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def mat(r, c):
        shape = pick(draw, [(r, c)], [(c, r) if r != c else (r + 1, c), (r,), (1, r, c)], odds=16)
        v = np.round(rng.normal(size=shape) * 3) / 4
        if v.size and once_in(draw, 4):
            v.reshape(-1)[:1] = draw(st.sampled_from([np.nan, np.inf, 1e300, -0.0, 2**40]))
        dt = pick(draw, ["float64", "float64", "float32", "int64", "list"], ["complex", "object", "str", "bool"], odds=16)
        with np.errstate(all="ignore"):
            if dt == "list":
                return v.tolist()
            if dt in ("int64", "bool"):
                return np.nan_to_num(v, posinf=0, neginf=0).astype(dt)
            if dt == "object":
                return v.astype(object)
            return v.astype(dt)

    A, B = mat(M, K), mat(K, N)
    kw: dict[str, Any] = {"instr": instr, "arch": draw(archs(instr))}
    if draw(st.booleans()):
        kw["C"] = pick(draw, [mat(M, N), None], [np.zeros((M + 1, N))])
    if ins is not None and ins.block_scale and not once_in(draw, 6):
        nb = -(-K // (tk // ins.scale_vec))
        kw["scale_A"] = np.full(pick(draw, [(M, nb)], [(nb, M), (M, nb + 1)]), 2.0)
        kw["scale_B"] = np.full((nb, N), draw(st.sampled_from([1.0, 0.5, 3.0, np.nan])))
    elif once_in(draw, 10):
        kw["scale_A"] = kw["scale_B"] = np.ones((2, 2))
    if once_in(draw, 4):
        kw["strict"] = pick(draw, [True, False], [None, 1, "yes"])
    if once_in(draw, 4):
        kw["progress"] = pick(draw, [Progress()], [5, "bar"])
    return (A, B), kw


SHAPES = ["m16n8k16", (16, 8, 16), "M16N8K16", ".m16n8k16", "m8n8k4", (16, 8, 256)]
BAD_SHAPES = [(16, 8), "m16n8", 5, [16, 8, 16], ("16", "8", "16"), (16.5, 8, 16), (True, 8, 16),
              (np.int64(16), 8, 16), "m16n8k16x", "m１６n8k16", "m016n8k16", (16, 8, 16, 1), b"m16n8k16",
              (2**70, 8, 16), (-16, 8, 16)]


@st.composite
def instructions_args(draw):
    kw: dict[str, Any] = {}
    for name, good, bad in [
            ("shape", SHAPES, BAD_SHAPES),
            ("type", ["f16", "e2m1", ".s4", "UE8M0", "tf32"], ["f17", "", 5, None, ["f16"], "f16 "]),
            ("kind", ["f8f6f4", "kind::mxf4", "none", ".mxf8f6f4"], ["mxf9", 1, ["none"], "kind:"]),
            ("form", ["f16", "int4", "fp8"], ["F16", 3, ["f16"], ""]),
            ("arch", ["sm_90", "sm_120a", "sm_80"], ["sm_1000", "SM_90", ["sm_90"], 90, "", "exact"]),
            ("ptx_version", ["8.7", "9.0", 8.7], ["8", "x.y", ["8.7"], -1, "08.7", "٨.٧"])]:
        if once_in(draw, 3):
            kw[name] = pick(draw, good, bad, odds=3)
    return (), kw


# --------------------------------------------------------------------------------------------
# The PTX interpreter: Warp.execute, Warp.run, Warp.compile
# --------------------------------------------------------------------------------------------

def _ptx_corpus() -> list[str]:
    """PTX texts from the interpreter's tests and the examples (every string literal that reads
    as PTX), and the body of the nvcc-generated kernel in tests/data."""
    import ast
    import re

    root = Path(__file__).resolve().parent.parent
    out: list[str] = []
    for f in ("tests/test_ptx_machine.py", "examples/ptx_routine.py", "tests/test_sparse.py"):
        tree = ast.parse((root / f).read_text())
        for n in ast.walk(tree):
            if (isinstance(n, ast.Constant) and isinstance(n.value, str) and "%" in n.value and ";" in n.value
                    and re.match(r"\s*[.@A-Za-z_]", n.value) and n.value not in out):
                out.append(n.value)
    text = (root / "tests/data/nvcc_ldmatrix_shfl.ptx").read_text()
    out.append(text[text.index("{", text.index(".entry k")) + 1:text.rindex("}")])
    return out


PTX_CORPUS = _ptx_corpus()
#: Single statements of the corpus (for Warp.execute, which runs no control flow).
PTX_STATEMENTS = sorted({s.strip() for t in PTX_CORPUS for s in t.split(";")
                         if "%" in s and ":" not in s.split("%")[0] and not s.strip().startswith((".", "//"))})

#: Hostile texts: each must end with a clear error (or run), never hang or crash.
PTX_HOSTILE = [
    "L: bra L;",  # infinite loops: the step budget (max_steps) stops them
    "L: bar.sync 0; bra L;",
    ".reg .b32 %r<4>; L: add.u32 %r1, %r1, 1; bra.uni L;",
    ".reg .pred %p<2>; L: setp.eq.u32 %p1, 0, 0; @%p1 bra L;",
    "mov.u32 %r1, " + "9" * 5000 + ";",  # huge immediates
    "mov.u32 %r1, 0x" + "f" * 40 + ";",
    "mov.b64 %rd1, 18446744073709551616;",
    "mov.f32 %f1, 1e99999;",
    "mov.u32 %r1, -99999999999999999999999;",
    "add.u32 %r1, " + ", ".join(["%r2"] * 20000) + ";",  # long operand lists
    "mov.b32 {" + ", ".join(["%r2"] * 5000) + "}, %rd1;",
    "mov.u32 %undeclared, %r1;",  # undeclared registers
    "add.u32 %r1, %nope, 1;",
    ".reg .b32 %r<999999999>;",
    ".reg .b32 %r<4>; mov.u32 %r1, %r9999999;",
    "ld.shared.u32 %r1, [4096000];",  # out-of-bounds / misaligned shared addresses
    "ld.shared.u32 %r1, [3];",
    "st.shared.u32 [-4], %r1;",
    "ld.shared.u32 %r1, [%r0+2147483647];",
    "ld.shared.v4.u32 {%r1, %r2, %r3, %r4}, [8];",
    "ld.shared.u32 %r1, [0x" + "f" * 30 + "];",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r0];",
    "{" * 400 + "mov.u32 %r1, 1;" + "}" * 400,  # deep / unbalanced braces
    "{" * 50000,
    "}" * 20,
    "{ mov.u32 %r1, 1;",
    "mov.b32 {%r1, {%r2}}, %rd1;",
    "mov.b64 %rd1, {%r1, %r2, %r3;",
    "@@%p1 mov.u32 %r1, 1;", "@%p1 @%p1 mov.u32 %r1, 1;", "@ mov.u32 %r1, 1;",
    ":", "L:", "L: L: ret;", ".", ";;;;", "\x00", "\ud800", "mov.u32\t\v%r1,\f1;",
    "mov.u32 %r1, %r1" * 300,
    "// just a comment", "/* unterminated", "/* c */ mov.u32 %r1, 1;",
    "bra NOWHERE;", "@%p1 bra L; L:", "ret; ret;", "exit;",
    ".shared .b8 big[" + "9" * 30 + "];",
    ".shared .align 3 .b8 s[4];",
    ".local .b8 buf[-1];",
    "shfl.sync.idx.b32 %r1, %r2, 99, 0x1f, 0xffffffff;",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0}, {%r0}, {%r1}, {%f1};",
    "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1}, {%r2,%r3}, "
    "{%f0,%f1,%f2,%f3}, %r4, 7;",
    ".version 8.7", ".target sm_90", ".entry k() { ret; }",
]


@st.composite
def ptx_text(draw, pool: list[str]):
    """Valid text from ``pool`` mostly; then edited copies, hostile texts and junk."""
    data = draw(st.data())
    text = draw(st.sampled_from(pool))
    kind = pick(draw, ["valid"] * 2 + ["edit"], ["hostile", "hostile", "junk", "other", "edit2", "splice"], odds=3)
    if kind == "edit":
        return _edit(text, data)
    if kind == "edit2":
        return _edit(_edit(text, data), data)
    if kind == "hostile":
        return draw(st.sampled_from(PTX_HOSTILE))
    if kind == "junk":
        return draw(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
    if kind == "splice":
        return text + "\n" + draw(st.sampled_from(pool))
    if kind == "other":
        return draw(st.sampled_from([None, b"mov.u32 %r1, 1;", 5, ["mov.u32 %r1, 1;"], Opaque()]))
    return text


def _fresh_warp(arch: object, batch: object, seed: int) -> "warpsim.Warp":
    """A Warp whose usual registers hold random words (so texts have something to read)."""
    w = warpsim.Warp(arch=arch, batch=batch)
    rng = np.random.default_rng(seed)
    shape = w.shape
    for i in range(16):
        w.write(f"%r{i}", rng.integers(0, 2**32, shape, dtype=np.uint64))
    for i in range(8):
        w.write(f"%f{i}", rng.integers(0, 2**32, shape, dtype=np.uint64), bits=32)
    for i in range(4):
        w.write(f"%rd{i}", rng.integers(0, 2**64, shape, dtype=np.uint64), bits=64)
    w.write("%p0", np.zeros(shape, bool))
    w.write("%p1", rng.random(shape) < 0.5)
    return w


def _warp_state(w: "warpsim.Warp") -> dict:
    state = {n: w.read(n) for n in sorted(w)}
    if w.shared is not None:
        state["<shared>"] = w.shared.read(np.uint8)
    return state


def _describe(x: object) -> object:
    """Decoded instructions by their text (their repr may hold addresses)."""
    return [getattr(i, "text", type(i).__name__) for i in x] if isinstance(x, tuple) else x


def warp_execute(arch: object, batch: object, seed: int, text: object) -> tuple:
    """Warp.execute on a fresh Warp: the instructions' texts and the registers after."""
    w = _fresh_warp(arch, batch, seed)
    return _describe(w.execute(text)), _warp_state(w)


def warp_run(arch: object, batch: object, seed: int, text: object, compiled: bool, **kw) -> tuple:
    """Warp.run (of text, or of Warp.compile's Program) on a fresh Warp: steps and the state after."""
    w = _fresh_warp(arch, batch, seed)
    prog = w.compile(text) if compiled else text
    return w.run(prog, **kw), _warp_state(w)


@st.composite
def warp_execute_args(draw):
    arch = pick(draw, ["sm_90", "sm_80", "sm_100a"], ["sm_1", None, 90], odds=20)
    batch = draw(st.sampled_from([(), (), (2,)]))
    text = draw(ptx_text(PTX_STATEMENTS + [s for s in PTX_CORPUS if len(s) < 200]))
    return (arch, batch, draw(st.integers(0, 2**16)), text), {}


@st.composite
def warp_run_args(draw):
    arch = pick(draw, ["sm_90", "sm_90", "sm_100a"], ["sm_1", None], odds=20)
    batch = draw(st.sampled_from([(), (), (2,)]))
    text = draw(ptx_text(PTX_CORPUS))
    kw: dict[str, Any] = {"max_steps": pick(draw, [3000, 3000, 50], [0, -1, 1.5, True, None, "10"], odds=8)}
    if not once_in(draw, 3):
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        kw["shared"] = pick(draw, [rng.integers(0, 256, 4096 + 256, dtype=np.uint8), 8192,
                                   rng.integers(0, 2**32, (2, 1024) if batch else (1024,), dtype=np.uint32)],
                            [-1, 2**62, 1.5, True, "x", np.zeros(3, object), np.zeros(4, complex)], odds=6)
    if once_in(draw, 6):
        kw["specials"] = pick(draw, [{"%tid.x": 5}, {"%ctaid.x": 2, "%nctaid.x": 4}],
                              [{"%bogus": 1}, {"%tid.x": "x"}, {"%tid.x": -1}, {"%tid.x": 2**40}, [1]])
    return (arch, batch, draw(st.integers(0, 2**16)), text, draw(st.booleans())), kw


# --------------------------------------------------------------------------------------------
# CLI subcommands: gemm, list, layout --operand e, check-packing --operand e
# --------------------------------------------------------------------------------------------

def cli_call(argv: list, files: dict) -> tuple:
    """``warpsim ARGV`` with ``files`` (name -> bytes, 'dir' or 'missing') in a fresh directory
    ('{name}' in ARGV is its path).  Exit 0/1 with output, or 2 with one line on stderr; files
    unmodified.  Returns (status, stdout, stderr, bytes of the files written) for digests."""
    d = tempfile.mkdtemp(prefix="warpsim-fuzz-")
    try:
        paths = {name: _place(d, name, content) for name, content in files.items()}
        args = list(argv)
        for name, path in paths.items():
            args = [a.replace("{" + name + "}", path) for a in args]
        before = {n: Path(p).read_bytes() for n, p in paths.items() if os.path.isfile(p)}
        rc, out, err = run_cli(args)
        assert {n: Path(p).read_bytes() for n, p in paths.items() if os.path.isfile(p) and n in before} == before
        written = {str(q.relative_to(d)): q.read_bytes() for q in sorted(Path(d).rglob("*"))
                   if q.is_file() and q.name not in files}
    finally:
        shutil.rmtree(d)
    # 'warpsim: note: ...' lines (a default the CLI chose, such as --arch) may come first
    lines = [ln for ln in err.splitlines() if not ln.startswith("warpsim: note: ")]
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith("warpsim: error: "), err
    else:
        assert rc in (0, 1) and not lines and (out.strip() or written), (rc, err)
    return rc, _stable(out.replace(d, "<dir>")), _stable(err.replace(d, "<dir>")), written


@st.composite
def cli_npy(draw, arr: np.ndarray):
    """The .npy bytes of ``arr`` mostly; then a corrupted, truncated or pickled file, or none."""
    valid = _npy(arr)
    return draw(cli_file(valid)) if once_in(draw, 5) else valid


@st.composite
def cli_args(draw):
    cmd = draw(st.sampled_from(["gemm", "list", "layout-e", "check-packing-e", "run-e", "demo-e"]))
    files: dict = {}
    if cmd == "list":
        argv = ["list"]
        for flag, good, bad in [("--shape", ["m16n8k16", "m8n8k4"], ["m16n8", "x", "m１６n8k16"]),
                                ("--type", ["f16", "e2m1"], ["f17"]), ("--kind", ["none", "mxf4"], ["zzz"]),
                                ("--form", ["f16"], ["F16"]), ("--arch", ["sm_90", "sm_120a"], ["sm_1"]),
                                ("--ptx-version", ["8.7"], ["x"]), ("--format", ["text", "json"], ["xml"])]:
            if once_in(draw, 3):
                argv += [flag, pick(draw, good, bad, odds=3)]
        if once_in(draw, 10):
            argv.append(draw(st.sampled_from(["--bogus", "extra", "--shape"])))
        return (argv, files), {}
    instr = draw(st.sampled_from(SP_TEXTS if cmd.endswith("-e") else TEXTS))
    ins = _decoded(instr)
    if draw(st.booleans()) and once_in(draw, 4):
        instr = _edit(instr, draw(st.data()))
    if cmd == "layout-e":
        argv = ["layout", instr, "--operand", pick(draw, ["e", "E"], ["a", "x"]),
                "--selector", str(pick(draw, _sp_selectors(ins), [-1, 4, 99]))]
        if draw(st.booleans()):
            argv += ["--format", draw(st.sampled_from(["text", "markdown", "csv", "svg", "json"]))]
        if once_in(draw, 5):
            argv += draw(st.sampled_from([["--lane", "3"], ["--lane", "40"], ["--element", "0", "0"],
                                          ["--byte-id", "1"], ["--selector", "x"]]))
        return (argv, files), {}
    if cmd in ("run-e", "demo-e"):  # sparse golden values and demo: --selector
        sel = str(pick(draw, _sp_selectors(ins), [-1, 4, "x"]))
        if cmd == "demo-e":
            return (["demo", "--instr", instr, "--selector", sel], files), {}
        files["dir"] = "dir"
        argv = ["run", draw(st.sampled_from(TEXTS)) if once_in(draw, 6) else instr, "--selector", sel,
                "--no-progress", "--out", pick(draw, ["{dir}/g.npz", "{dir}/g.h", "{dir}/g.json"], ["{dir}/g.txt"])]
        return (argv, files), {}
    if cmd == "check-packing-e":
        A = draw(logical_sparse(instr))
        f = draw(st.sampled_from(_sp_selectors(ins)))
        try:
            meta = sparse.compress(ins, np.asarray(A, dtype=np.float64), selector=f)[1]
        except (ValueError, TypeError):
            meta = np.zeros(32, np.uint32)
        if draw(st.booleans()):
            meta = draw(metadata_words(instr))
        files = {"regs.npy": draw(cli_npy(np.asarray(meta) if not isinstance(meta, list) else np.zeros(3))),
                 "matrix.npy": draw(cli_npy(np.asarray(A) if not isinstance(A, list) else np.zeros(3)))}
        argv = ["check-packing", instr, "--operand", "e", "--selector",
                str(pick(draw, [f], [-1, 7])), "{regs.npy}", "{matrix.npy}"]
        if once_in(draw, 4):
            argv += draw(st.sampled_from([["--format", "json"], ["--codes"], ["--show", "1"]]))
        return (argv, files), {}
    # gemm
    (A, B), kw = draw(gemm_args())
    if isinstance(kw["instr"], str):
        instr = kw["instr"]
    for name, arr in (("a.npy", A), ("b.npy", B)):
        files[name] = draw(cli_npy(np.asarray(arr) if not isinstance(arr, list) else np.array(arr)))
    argv = ["gemm", instr, "{a.npy}", "{b.npy}", "--out", pick(draw, ["{dir}/d.npy"], ["{dir}/sub/d.npy", "{dir}/d.txt",
                                                                                      "{dir}"], odds=8)]
    files["dir"] = "dir"
    if kw.get("C") is not None:
        files["c.npy"] = draw(cli_npy(np.asarray(kw["C"])))
        argv += ["--c", "{c.npy}"]
    if "scale_A" in kw:
        files["sa.npy"], files["sb.npy"] = _npy(kw["scale_A"]), _npy(kw["scale_B"])
        argv += ["--scale-a", "{sa.npy}", "--scale-b", "{sb.npy}"]
    if isinstance(kw.get("arch"), str) and kw["arch"]:
        argv += ["--arch", kw["arch"]]
    if kw.get("strict") is True:
        argv.append("--strict")
    return (argv, files), {}


# --------------------------------------------------------------------------------------------
# Kernel launch: Module(ptx_text), Module.launch, warpsim.launch
# --------------------------------------------------------------------------------------------

def _launch_corpus() -> dict[str, str]:
    """Small kernels: the handwritten ones and SPECIALS of tests/test_launch.py, and the nvcc
    kernels of tests/kernels (parsed only)."""
    import ast

    root = Path(__file__).resolve().parent
    src = (root / "test_launch.py").read_text()
    out = {"ids": next(n.value.value for n in ast.parse(src).body
                       if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SPECIALS")}
    for p in sorted((root / "kernels").rglob("*.ptx")):
        out[p.stem] = p.read_text()
    return out


KERNELS = _launch_corpus()
_CFG = np.dtype({"names": ["a", "k"], "formats": [np.float64, np.int32], "offsets": [0, 8], "itemsize": 16})


def _launch_case(name: str, grid: object, block: object, rng) -> tuple[list, int]:
    """(args, shared_bytes) of a runnable launch of kernel ``name`` (sized from grid and block)."""
    def count(v):  # threads or CTAs of a sane dimension; 1 for a hostile one
        v = v if isinstance(v, tuple) else (v,)
        ok = all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 1024 for x in v)
        return int(np.prod(v)) if ok else 1
    n = count(grid) * count(block)
    if name == "ids":
        return [np.zeros((n, 4), np.uint32), np.uint32(rng.integers(0, 9)), float(rng.integers(-4, 4)) / 2], 0
    if name == "features":
        cfg = np.zeros((), _CFG)
        cfg["k"] = rng.integers(0, 50)
        return [np.zeros((64, 6), np.uint32), cfg[()]], 256
    acc = np.array([0, 0, 0, 0, 0, 0x7FFFFFFF, 0xFFFFFFFF, 0, 0], np.uint32)
    return [acc, np.zeros(2, np.uint64), np.zeros(2, np.float32), np.zeros(1, np.float64),
            np.zeros(128 * 8, np.uint32), np.zeros(2, np.uint32)], 0


GOOD_DIMS = {"ids": ([1, 2, (2, 1), (1, 1, 2)], [32, 40, (8, 4), 64]), "features": ([1], [64]), "atomics": ([2], [64])}
BAD_DIMS = [0, -1, (0,), 1.5, True, (1, 2, 3, 4), 2**40, "2", (1025,), None, (2**31, 1), np.int64(1), [1], (1, 0)]


def _hostile_arg(draw, args: list) -> list:
    args = list(args)
    how = draw(st.sampled_from(["drop", "extra", "scalar", "array", "readonly", "view", "list"]))
    i = draw(st.integers(0, max(0, len(args) - 1)))
    if how == "drop" and args:
        args.pop(i)
    elif how == "extra":
        args.append(draw(st.sampled_from([0, np.zeros(4, np.uint32)])))
    elif how == "scalar" and args:
        args[i] = draw(st.sampled_from(["x", None, 2**70, -1, np.float64(1.5), b"", Opaque(), True, 1j]))
    elif how == "array" and args:
        args[i] = draw(st.sampled_from([np.zeros(0, np.uint32), np.zeros(3, object), np.zeros((2, 2), complex),
                                        np.array(["s"]), np.zeros(4, np.float16)]))
    elif how == "readonly" and args and isinstance(args[i], np.ndarray):
        a = args[i].copy()
        a.setflags(write=False)
        args[i] = a
    elif how == "view" and args and isinstance(args[i], np.ndarray) and args[i].ndim:
        args[i] = np.repeat(args[i], 2, axis=0)[::2]  # non-contiguous
    elif how == "list" and args and isinstance(args[i], np.ndarray):
        args[i] = args[i].tolist()
    return args


@st.composite
def launch_args(draw):
    """(text, name, grid, block, args) and keywords of a launch: the small kernels as they are
    mostly, then edited texts, other kernels' names, hostile grids, blocks and arguments."""
    data = draw(st.data())
    name = draw(st.sampled_from(["ids", "ids", "features", "atomics"]))
    text = KERNELS[name]
    if once_in(draw, 4):
        text = _edit(text, data)
    elif once_in(draw, 12):
        text = draw(st.sampled_from(list(KERNELS.values()) + PTX_HOSTILE[:4] + ["", ".version 8.0", "x"]))
    entry = pick(draw, [name], ["nope", "", None, 5, "ids "], odds=16)
    grids, blocks = GOOD_DIMS[name]
    grid = pick(draw, grids, BAD_DIMS, odds=10)
    block = pick(draw, blocks, BAD_DIMS, odds=10)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    args, shared = _launch_case(name, grid, block, rng)
    if once_in(draw, 5):
        args = _hostile_arg(draw, args)
    if once_in(draw, 10):
        args = draw(st.sampled_from([None, (), "args", np.zeros(3)]))
    kw: dict[str, Any] = {"check": pick(draw, [False, False, True], [1, None]),
                          "max_steps": pick(draw, [20_000, 500], [0, None, 1.5, True], odds=12)}
    if shared or once_in(draw, 10):
        kw["shared_bytes"] = pick(draw, [shared, shared + 64], [-1, 1.5, 2**40, True, "256"], odds=8)
    if once_in(draw, 8):
        kw["arch"] = pick(draw, ["sm_90", "sm_100a"], ["sm_80", "sm_1", None, 90], odds=2)
    if once_in(draw, 8):
        kw["cta_batch"] = pick(draw, [1, 2], [0, -1, 1.5, True], odds=2)
    return (text, entry, grid, block, args), kw


def module_kernels(text: object) -> dict:
    """Module(text): its kernels by name, as their signatures (a Module's repr holds addresses)."""
    return {k: repr(v) for k, v in warpsim.Module(text).kernels.items()}


def module_launch(text: object, *args: object, **kw: object) -> tuple:
    """Module(text).launch(...), on a fresh Module each call."""
    return warpsim.Module(text).launch(*args, **kw)


def _launch_outcome(f: Callable, *args: object, **kw: object) -> tuple:
    """A launch; a SanitizerError (a ValueError) keeps the outputs it carries for the digest."""
    return f(*args, **kw)


@st.composite
def module_args(draw):
    text = draw(st.sampled_from(list(KERNELS.values())))
    kind = pick(draw, ["valid", "edit"], ["hostile", "junk", "other"], odds=4)
    if kind == "edit":
        text = _edit(text, draw(st.data()))
    elif kind == "hostile":
        text = draw(st.sampled_from(PTX_HOSTILE))
    elif kind == "junk":
        text = draw(st.text(max_size=80))
    elif kind == "other":
        text = draw(st.sampled_from([None, b".version 8.0", 5, [text], Opaque()]))
    return (text,), {}


@st.composite
def module_launch_args(draw):
    """launch_args, drawn after one more choice (so that this row's examples differ from those
    of the launch row): the sanitizer's mode."""
    check = draw(st.booleans())
    args, kw = draw(launch_args())
    if isinstance(kw.get("check"), bool):
        kw["check"] = check
    return args, kw


# .local is paged (issue 24): each thread stores at an offset drawn per thread (pages near and
# far, the last word, past the end, 2**40, -4 wrapped, misaligned) and reads one fixed word
LOCAL_KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 offs)
{
 .reg .b32 %r<4>; .reg .b64 %rd<8>;
 .local .align 8 .b8 l[SIZE];
 ld.param.u64 %rd1, [out];
 cvta.to.global.u64 %rd1, %rd1;
 ld.param.u64 %rd2, [offs];
 cvta.to.global.u64 %rd2, %rd2;
 mov.u32 %r1, %tid.x;
 mul.wide.u32 %rd3, %r1, 8;
 add.u64 %rd4, %rd2, %rd3;
 ld.global.u64 %rd5, [%rd4];
 mov.u64 %rd6, l;
 add.u64 %rd6, %rd6, %rd5;
 st.local.u32 [%rd6], %r1;
 ld.local.u32 %r2, [%rd6];
 ld.local.u32 %r3, [l+READ];
 add.u32 %r2, %r2, %r3;
 mul.wide.u32 %rd3, %r1, 4;
 add.u64 %rd7, %rd1, %rd3;
 st.global.u32 [%rd7], %r2;
 ret;
}
"""


@st.composite
def local_launch_args(draw):
    """A launch of LOCAL_KERNEL: .local sizes up to the 512 KiB limit (and past it), offsets
    inside and outside, a timeout_s that never hits (or a hostile one)."""
    size = pick(draw, [8, 100, 4096, 5000, 65536, 262144, 524288], [524289, 10**12], odds=12)
    block = draw(st.sampled_from([1, 32, 40, 64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    top = max(1, min(size, 524288) // 4)
    offs = rng.integers(0, top, block).astype(np.uint64) * np.uint64(4)
    if once_in(draw, 2):  # a few threads elsewhere: the last word, out of range, misaligned
        for i in rng.integers(0, block, 2):
            offs[i] = draw(st.sampled_from([size - 4, size, size + 4096, 2**40, 2**64 - 4, 1, 4 * (top - 1) + 2]))
    read = pick(draw, [0, 4 * (top // 2)], [size, 2**31], odds=8)
    text = LOCAL_KERNEL.replace("SIZE", str(size)).replace("READ", str(read))
    kw: dict[str, Any] = {"check": draw(st.booleans()),
                          "timeout_s": pick(draw, [None, 60.0], [0, -1.0, float("nan"), "1", True], odds=10)}
    return (text, "k", 1, block, [np.zeros(block, np.uint32), offs]), kw


# a launch that never ends, and one that does, under a timeout_s that stops the first
SPIN_KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k()
{
 .reg .pred %p;
L:
 setp.eq.u32 %p, 1, 1;
 @%p bra L;
 ret;
}
"""


def launch_timed(*args: object, **kw: object) -> tuple:
    """warpsim.launch; a TimeBudgetError becomes its facts that do not depend on the clock."""
    from warpsim.errors import TimeBudgetError

    try:
        return warpsim.launch(*args, **kw)
    except TimeBudgetError as e:
        return ("TimeBudgetError", e.budget, e.elapsed >= e.budget, e.executed > 0, "timeout_s=" in str(e))


@st.composite
def timed_launch_args(draw):
    spin = draw(st.booleans())
    text = SPIN_KERNEL if spin else KERNELS["ids"]
    grid = draw(st.sampled_from([1, 2**31 - 1] if spin else [1, 2]))
    block = 32
    args = [] if spin else _launch_case("ids", grid, block, np.random.default_rng(0))[0]
    kw = {"timeout_s": draw(st.sampled_from([0.05, 0.1])) if spin else 60, "check": draw(st.booleans())}
    return (text, "k" if spin else "ids", grid, block, args), kw


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    call: Callable[..., Any]
    strategy: Callable[[], st.SearchStrategy]
    #: Share of EXAMPLES (and DIGEST_EXAMPLES) this row draws: less for slow entry points.
    share: float = 1.0


ENTRY_POINTS = [
    Row("decode", warpsim.decode, decode_args),
    Row("legal_archs", warpsim.legal_archs, legal_archs_args),
    Row("layout", warpsim.layout, layout_args),
    Row("pack", warpsim.pack, pack_args),
    Row("unpack", warpsim.unpack, unpack_args),
    Row("mma", warpsim.mma, mma_args),
    Row("matmul", warpsim.matmul, matmul_args),
    Row("Warp", warpsim.Warp, warp_args),
    Row("Warp methods", run_warp, warp_steps),
    Row("render_layout", warpsim.render_layout, render_args),
    Row("explain_packing", warpsim.explain_packing, explain_args),
    Row("golden", warpsim.golden, golden_args),
    Row("write_golden", _write_golden_in_tmp, write_golden_args),
    Row("read_golden", _read_golden_file, golden_file_args),
    # sparse mma.sp (warpsim.tensorcore.sparse)
    Row("mma.sp", warpsim.mma, mma_sp_args),
    Row("matmul.sp", warpsim.matmul, matmul_sp_args),
    Row("layout e", warpsim.layout, layout_e_args),
    Row("sparse.compress", sparse.compress, compress_args),
    Row("sparse.expand", sparse.expand, expand_args),
    Row("sparse.explain_metadata", sparse.explain_metadata, explain_metadata_args),
    Row("sparse queries", sparse_query, sparse_query_args),
    Row("gemm", warpsim.gemm, gemm_args),
    Row("instructions", warpsim.instructions, instructions_args),
    # the PTX interpreter
    Row("Warp.execute", warp_execute, warp_execute_args),
    Row("Warp.run", warp_run, warp_run_args),
    # CLI subcommands
    Row("cli", cli_call, cli_args),
    # kernel launch
    Row("Module", module_kernels, module_args),
    Row("Module.launch", module_launch, module_launch_args, share=0.3),
    Row("launch", warpsim.launch, launch_args, share=0.3),
    Row("launch .local", warpsim.launch, local_launch_args, share=0.3),
    Row("launch timeout_s", launch_timed, timed_launch_args, share=0.1),
]

# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


def snapshot(x: object, depth: int = 0) -> object:
    """A comparable picture of ``x``: arrays by dtype, shape and bytes; containers recursively."""
    if depth > 20:
        return "..."
    if isinstance(x, np.ndarray):
        if x.dtype.hasobject:
            return ("ndarray-object", x.shape, snapshot(x.tolist(), depth + 1))
        return ("ndarray", x.dtype.str, x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [snapshot(v, depth + 1) for v in x])
    if isinstance(x, dict):
        return ("dict", [(repr(k), snapshot(v, depth + 1)) for k, v in x.items()])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, [(f.name, snapshot(getattr(x, f.name), depth + 1))
                                   for f in dataclasses.fields(x)])
    if isinstance(x, float) and x != x:
        return "nan"
    if isinstance(x, warpsim.Warp):
        return ("Warp", repr(x), [(n, snapshot(x.read(n))) for n in x])
    return (type(x).__name__, repr(x))


def poke(x: object, depth: int = 0) -> None:
    """Write into everything reachable from ``x`` that lets itself be written."""
    if depth > 20:
        return
    if isinstance(x, np.ndarray):
        node = x
        while isinstance(node, np.ndarray):
            try:
                node.setflags(write=True)
            except ValueError:
                pass
            if node.flags.writeable and node.size and not node.dtype.hasobject:
                flat = node.reshape(-1).view(np.uint8) if node.flags.c_contiguous else None
                if flat is not None and flat.size:
                    flat ^= 0x5A
            node = node.base
    elif isinstance(x, list):
        for v in x:
            poke(v, depth + 1)
        x.append("poked")
    elif isinstance(x, tuple):
        for v in x:
            poke(v, depth + 1)
    elif isinstance(x, dict):
        for v in list(x.values()):
            poke(v, depth + 1)
        x["poked"] = True
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            poke(getattr(x, f.name), depth + 1)


def digest(x: object) -> str:
    return hashlib.sha256(repr(snapshot(x)).encode()).hexdigest()[:16]


_TMP = tempfile.gettempdir()


def _stable(msg: str) -> str:
    """An error message without the temporary directory names in it."""
    import re

    return re.sub(re.escape(_TMP) + r"/warpsim-fuzz-[^/'\" ]*", "<tmp>", msg)


#: Messages that come from inside Python or NumPy, not from warpsim naming the argument.
WRONG_LAYER = __import__("re").compile(
    r"object is not callable|unhashable type|inhomogeneous|Exceeds the limit|truth value of an array"
    r"|has no attribute|not subscriptable|unsupported operand type|invalid literal for int"
    r"|could not convert|is out of bounds for axis|object cannot be interpreted|not supported between"
    r"|positional argument|unexpected keyword|cannot reshape array|operands could not be broadcast")


def _outcome(f: Callable, args: tuple, kwargs: dict, what: str) -> tuple:
    """Call ``f``, checking the properties; ('ok', digest) or ('error', type, message)."""
    before = snapshot((args, kwargs))
    t0 = time.process_time()
    try:
        result = f(*args, **kwargs)
    except ALLOWED as e:
        out: tuple = ("error", type(e).__name__, _stable(str(e)))
        wrong = WRONG_LAYER.search(str(e))
        assert wrong is None, f"{what}: an error message from inside Python or NumPy: {type(e).__name__}: {e}"
    else:
        out = ("ok", digest(result))
    finally:
        spent = time.process_time() - t0
    assert spent < CALL_LIMIT_S, f"{what} took {spent:.2f} s of CPU"
    assert snapshot((args, kwargs)) == before, f"{what} modified its input"
    return out


def check_row(row: Row, args: tuple, kwargs: dict) -> tuple:
    """All properties for one call of ``row``; returns the outcome for digests."""
    keep = copy.deepcopy((args, kwargs)) if row.name == "Warp methods" else None
    first = _outcome(row.call, args, kwargs, row.name)
    if first[0] == "ok" and row.name not in ("Warp",):
        # Cached data must not be reachable for writing: write into the result, call again.
        args2, kwargs2 = keep if keep is not None else (args, kwargs)
        result = row.call(*args2, **kwargs2)
        assert digest(result) == first[1], f"{row.name} gave a different result the second time"
        poke(result)
        again = row.call(*args2, **kwargs2)
        assert digest(again) == first[1], f"{row.name}: writing into a result changed a later result"
    return first


def run_row(row: Row, examples: int, record: list | None = None) -> None:
    @settings(max_examples=max(1, round(examples * row.share)), derandomize=DERANDOMIZE, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(row.strategy())
    def fuzz(drawn):
        args, kwargs = drawn
        if record is not None:
            record.append((row.name, repr(snapshot((args, kwargs)))[:200], check_row(row, args, kwargs)))
        else:
            check_row(row, args, kwargs)

    fuzz()


@pytest.mark.parametrize("row", ENTRY_POINTS, ids=[r.name for r in ENTRY_POINTS])
def test_entry_point(row):
    run_row(row, EXAMPLES)


def digests(examples: int) -> dict[str, str]:
    """Per row: a digest of every drawn input and its outcome."""
    out = {}
    for row in ENTRY_POINTS:
        rec: list = []
        run_row(row, examples, rec)
        out[row.name] = hashlib.sha256(repr(rec).encode()).hexdigest()
    return out


def test_deterministic_across_processes():
    env = dict(os.environ)
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    procs = []
    for seed in ("1", "2"):
        env["PYTHONHASHSEED"] = seed
        procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--digest"],
                                      env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=str(root)))
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=300)
        assert p.returncode == 0, e[-2000:]
        outs.append(dict(line.rsplit(" ", 1) for line in o.strip().splitlines()))
    assert set(outs[0]) == {r.name for r in ENTRY_POINTS}
    differ = [k for k in outs[0] if outs[0][k] != outs[1][k]]
    assert not differ, f"outcomes differ between two processes for {differ}"


# --------------------------------------------------------------------------------------------
# The CLI's file inputs
# --------------------------------------------------------------------------------------------

CHECK_INSTR = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def _valid_check_files() -> tuple[bytes, bytes]:
    A = np.arange(16 * 16).reshape(16, 16) % 13 - 6.0
    return _npy(warpsim.pack(CHECK_INSTR, "a", A)), _npy(A)


@st.composite
def cli_file(draw, valid: bytes):
    how = pick(draw, ["valid", "flip"], ["truncate", "flip", "random", "npz", "pickled-npz", "object-npy", "text",
                                         "dir", "missing", "float-npy", "wrong-shape"], odds=3)
    if how == "valid":
        return valid
    if how == "truncate":
        return valid[: draw(st.integers(0, len(valid) - 1))]
    if how == "flip":
        b = bytearray(valid)
        for _ in range(draw(st.integers(1, 3))):
            b[draw(st.integers(0, len(b) - 1))] ^= draw(st.integers(1, 255))
        return bytes(b)
    if how == "random":
        return draw(st.binary(max_size=300))
    if how == "npz":
        buf = io.BytesIO()
        np.savez(buf, x=np.zeros(3))
        return buf.getvalue()
    if how == "pickled-npz":
        return _pickled_npz()
    if how == "object-npy":
        return _npy(np.array([{"x": 1}, None], dtype=object))
    if how == "text":
        return b"1 2 3\n"
    if how == "float-npy":
        return _npy(np.full((32, 4), 0.5))
    if how == "wrong-shape":
        return _npy(np.zeros((draw(st.integers(0, 40)), 3), np.uint32))
    return how


def _place(d: str, name: str, content: object) -> str:
    p = os.path.join(d, name)
    if content == "dir":
        os.mkdir(p)
    elif content != "missing":
        Path(p).write_bytes(content)
    return p


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


@settings(max_examples=int(os.environ.get("WARPSIM_FUZZ_EXAMPLES", "60")), derandomize=DERANDOMIZE, database=None, deadline=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(st.data())
def test_cli_check_packing_file_inputs(data):
    regs_ok, matrix_ok = _valid_check_files()
    regs = data.draw(cli_file(regs_ok), label="REGS")
    matrix = data.draw(cli_file(matrix_ok), label="MATRIX")
    extra = pick(data.draw, [[], ["--codes"], ["--show", "0"]], [["--show", "x"]])
    d = tempfile.mkdtemp(prefix="warpsim-fuzz-")
    try:
        rp, mp = _place(d, "regs.npy", regs), _place(d, "matrix.npy", matrix)
        before = [Path(p).read_bytes() if os.path.isfile(p) else None for p in (rp, mp)]
        t0 = time.process_time()
        rc, out, err = run_cli(["check-packing", CHECK_INSTR, "--operand", "a", rp, mp] + extra)
        assert time.process_time() - t0 < CALL_LIMIT_S
        assert [Path(p).read_bytes() if os.path.isfile(p) else None for p in (rp, mp)] == before
    finally:
        shutil.rmtree(d)
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("warpsim: error: "), err
    else:
        assert rc in (0, 1) and err == "" and out.strip(), (rc, err)


@pytest.mark.parametrize("out", ["sub/g.npz", "d.npz", "g.txt", "g", ".h"])
def test_cli_run_output_paths(tmp_path, out):
    """``warpsim run --out`` to a missing directory, a directory, an unknown suffix: exit 2, one line."""
    (tmp_path / "d.npz").mkdir()
    rc, stdout, err = run_cli(["run", CHECK_INSTR, "--no-progress", "--out", str(tmp_path / out)])
    assert rc == 2, (rc, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warpsim: error: "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npz"]


@pytest.mark.parametrize("case", ["missing", "dir", "pickled-npz", "truncated"])
def test_cli_file_errors_through_the_entry_point(tmp_path, case):
    """The same through ``python -m warpsim``: exit status 2 and one line on stderr."""
    regs_ok, matrix_ok = _valid_check_files()
    content = {"missing": "missing", "dir": "dir", "pickled-npz": _pickled_npz(), "truncated": regs_ok[:70]}[case]
    rp = _place(str(tmp_path), "regs.npy", content)
    mp = _place(str(tmp_path), "matrix.npy", matrix_ok)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    p = subprocess.run([sys.executable, "-m", "warpsim", "check-packing", CHECK_INSTR, "--operand", "a", rp, mp],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warpsim: error: ") and "regs.npy" in lines[0], p.stderr


if __name__ == "__main__" and sys.argv[1:] == ["--digest"]:
    for name, h in digests(DIGEST_EXAMPLES).items():
        print(name, h)


ROWS = {r.name: r for r in ENTRY_POINTS}


@pytest.mark.parametrize("i", range(len(PTX_HOSTILE)), ids=[repr(t[:24]) for t in PTX_HOSTILE])
def test_hostile_ptx_text(i):
    """Every hostile text through Warp.run (default step budget, small shared memory) and
    Warp.execute: a clear error or a result, within the time limit, never a hang."""
    text = PTX_HOSTILE[i]
    check_row(ROWS["Warp.run"], ("sm_90", (), 1, text, False), {"shared": 64, "max_steps": 2000})
    check_row(ROWS["Warp.execute"], ("sm_90", (2,), 1, text), {})
