"""Fuzzing every public entry point as a hostile user would (issue 13).

For every row of :data:`ENTRY_POINTS` (an entry point and a strategy for its arguments, valid
and hostile mixed) hypothesis draws inputs, derandomized and bounded, and each call must

* return, or raise only ``ValueError`` / ``TypeError`` subclasses (warpsim's errors are
  ValueErrors); ``read_golden`` / ``write_golden`` may also raise the ``OSError`` that opening
  a missing path or a directory raises (Python's convention for paths; the CLI turns it into
  one line and exit status 2);
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
(CI runs 40 derandomized examples per row, ~15 s in all).

Adding an entry point
---------------------
Append one ``Row(name, call, strategy)`` to ``ENTRY_POINTS``: ``strategy`` draws ``(args,
kwargs)`` (good values mostly, a hostile one now and then: see ``pick``) and ``call(*args,
**kwargs)`` runs the entry point.  The call is made three times (once more to compare, once
after writing into the result), so a stateful entry point gets a call that builds fresh state
each time, as ``run_warp`` does for the Warp methods.  Nothing else changes: the row joins every
property above and the cross-process digest.  Rows expected once the work in progress merges:

* sparse ``mma.sp``: add ``mma.sp`` forms to ``INSTRS`` and a row like ``mma`` that also draws
  ``metadata=`` with ``words(instr, "e")``-style arrays (right shape mostly) and ``selector=``
  from ``selectors``;
* the PTX interpreter: a row whose strategy draws PTX text (valid kernels from the
  interpreter's tests, then copies changed by ``_edit``) and whose call is
  ``lambda arch, text: Warp(arch=arch).execute(text)`` (fresh Warp per call);
* kernel launch: a row drawing a small grid/block, PTX text and arguments for the launch
  function.
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
from warpsim import cli

#: Examples per row in this process, and in each of the two digest processes.
EXAMPLES = int(os.environ.get("WARPSIM_FUZZ_EXAMPLES", "40"))
DIGEST_EXAMPLES = 12
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
def instrs(draw, hostile: bool = True):
    """An instruction: mostly valid text, sometimes a decoded Instruction, an edited text or
    no text at all."""
    data = draw(st.data())
    text = draw(st.sampled_from(TEXTS))
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
            matrix = (warpsim.packing.unpack_bits if codes else warpsim.unpack)(instr, op, regs)
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
          "batch": pick(draw, [1, 2], [0, -1, 1.0, True])}
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
# The table
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    call: Callable[..., Any]
    strategy: Callable[[], st.SearchStrategy]


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


def _outcome(f: Callable, args: tuple, kwargs: dict, what: str) -> tuple:
    """Call ``f``, checking the properties; ('ok', digest) or ('error', type, message)."""
    before = snapshot((args, kwargs))
    t0 = time.process_time()
    try:
        result = f(*args, **kwargs)
    except ALLOWED as e:
        out: tuple = ("error", type(e).__name__, _stable(str(e)))
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
    @settings(max_examples=examples, derandomize=DERANDOMIZE, database=None, deadline=None,
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
