"""The ``warpsim`` command line (also ``python -m warpsim``).

Commands: ``decode``, ``layout``, ``run``, ``check-packing``, ``demo``, ``gemm``, ``list``;
``warpsim COMMAND --help``
explains each with an example.  Bad input (instruction, operand, file, shape) prints one line,
``warpsim: error: ...``, on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys

import numpy as np

from warpsim.errors import WarpsimError
from warpsim.validation.inputs import FLOAT_DISTS as DISTS

DEFAULT_INSTR = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
EXAMPLE_INSTR = "m16n8k16.row.col.f32.f16.f16.f32"
SPARSE_EXAMPLE = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"

MAIN_DESCRIPTION = f"""\
warpsim simulates NVIDIA GPU warps executing PTX, bit-exactly: one mma.sync at a time, or whole
kernels on the CPU (launch).

INSTR is an mma instruction: the full PTX text ({DEFAULT_INSTR})
or the same without the leading "mma.sync.aligned." ({EXAMPLE_INSTR}).

commands (each has its own --help with examples):
  decode         what an instruction is: fields, registers per operand, element packing,
                 the architectures that accept it
                   warpsim decode {EXAMPLE_INSTR}
  layout         which lane and register bits hold each matrix element (text, markdown,
                 csv or an SVG picture like the PTX ISA figures); or ask about one element
                 or one register
                   warpsim layout {EXAMPLE_INSTR} --operand a
                   warpsim layout {EXAMPLE_INSTR} --operand a --element 9 3
                   warpsim layout {EXAMPLE_INSTR} --operand b --out b.svg
  run            golden values: seeded inputs, simulated outputs, as register words and
                 matrices, in .npz, .json or a C header (.h) for a CUDA test
                   warpsim run {EXAMPLE_INSTR} --seed 1 --batch 64 --out golden.h
  check-packing  compare register words you packed with the matrix you meant; names each
                 misplaced element and the likely cause (transpose, swapped registers, ...)
                   warpsim check-packing {EXAMPLE_INSTR} --operand a regs.npy matrix.npy
  demo           one instruction end to end: layout, packed registers, the hardware model
                 against the exact answer
                   warpsim demo
  gemm           D = A @ B + C for whole matrices (.npy) through one instruction, tiled
                   warpsim gemm {EXAMPLE_INSTR} A.npy B.npy --out D.npy
  list           the instructions warpsim knows (filters: shape, type, kind, arch; text or JSON)
                   warpsim list --shape m16n8k64
  launch         run a whole kernel (.ptx, or .cu through nvcc) over a grid on the CPU
                   warpsim launch kernel.ptx --kernel NAME --grid 2,2 --block 128 --arg a.npy ...
  env            what runs fast here: compiled engines, special-function kernels, ptxas
                   warpsim env
"""

DECODE_HELP = f"""\
Decode INSTR: shape, layouts, types and qualifiers; for each operand the registers per lane,
elements per register and the bits each element occupies; the architectures that accept it.
With --arch, also check that the instruction is legal there (exit status 2 if not).
--ptx-version V checks legality for PTX ISA .version V (9.0 ... 9.5; default 9.5, the newest
warpsim knows).  --ptxas also asks a real ptxas (the newest found on the PATH or in the
nvidia-cuda-nvcc wheel, pip install warpsim[ptxas]; or --ptxas PATH) and prints its verdict.
INSTR may be pasted from CUDA source as C string literals (quotes, \\n, adjacent literals
joined, %%-escapes and %0-style inline-asm operands); any other PTX instruction warpsim runs
(ldmatrix, cvt, shfl, ...) is described by its family and qualifiers.

example:
  warpsim decode {EXAMPLE_INSTR}
  warpsim decode m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0 --arch sm_120a
  warpsim decode '"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                  "{{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%10,%11,%12,%13}};\\n"'
  warpsim decode "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r1,%r2,%r3,%r4}}, [%r5]"
"""

LAYOUT_HELP = f"""\
Show the fragment layout of one operand of INSTR.

Without a query: the matrix map (each cell "T5:a2" = lane 5, element a2 of its fragment, as in
the PTX ISA figures) and the register map (for each lane, which element each register's bit
field holds).  Queries:
  --element ROW COL          who holds that element: lane, register, bits
  --lane L [--register R]    what that lane's register(s) hold
Operands a, b, c, d; scale_a / scale_b for .block_scale forms (with --byte-id, --thread-id);
e, the metadata of sparse mma.sp (with --selector; A is then the compressed M x K/2 matrix).
Formats: text (default), markdown, csv (one row per element), svg (a picture; queries are
highlighted).  With --out the format defaults to the file's suffix.

examples:
  warpsim layout {EXAMPLE_INSTR} --operand a
  warpsim layout {EXAMPLE_INSTR} --operand a --element 9 3
  warpsim layout {EXAMPLE_INSTR} --operand a --lane 5 --register 1
  warpsim layout {EXAMPLE_INSTR} --operand c --format csv --out c.csv
  warpsim layout m8n8k4.row.col.f32.f16.f16.f32 --operand a --out a.svg --color-by thread
  warpsim layout m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0 --operand scale_a --thread-id 1
  warpsim layout mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 --operand e --selector 1
"""

RUN_HELP = f"""\
Generate golden values: --batch warps of inputs from --seed (a counter-based generator: the same
seed gives the same bits on every platform), run INSTR on the --arch model, and write inputs
and outputs both as register words ([warp][lane][register]) and as matrices, with the
instruction, arch, seed and warpsim version recorded.  The suffix of --out picks the format:
  .npz   numpy archive (read back with numpy.load or warpsim.read_golden)
  .json  JSON (arrays as {{"dtype", "shape", "data"}}; NaN/Inf as strings)
  .h     C header: static const uint32_t arrays per operand (uint64_t for .f64), element bit
         patterns as matrices, and macros for the instruction and shapes
Files have no timestamps: the same arguments write byte-identical files.

--arch defaults to sm_90, or to the first architecture that accepts INSTR; 'exact' gives the
exactly rounded result.  --dist: normal (default for float inputs), narrow, wide, special
(zeros, infinities, NaNs, subnormals, extremes), tiny (signed zeros and the smallest
subnormals), uniform-bits (default for integer inputs).

Sparse mma.sp forms: A is the compressed M x K/2 matrix; the metadata words (e_regs, one per
lane) are seeded valid index pairs for the sparsity selector --selector F (default 0), and the
files also hold the selector and the logical sparse A (a_sparse, M x K).

examples:
  warpsim run {EXAMPLE_INSTR} --out golden.npz
  warpsim run {EXAMPLE_INSTR} --arch sm_80 --seed 7 --dist special --batch 1000 --out special.h
  warpsim run {SPARSE_EXAMPLE} --selector 1 --out sparse.h
"""

CHECK_HELP = f"""\
Compare register words you packed (REGS.npy: uint32 (32, nregs), or (batch, 32, nregs)) with the
matrix you meant them to hold (MATRIX.npy: rows x cols values, or a batch of them).  Every
element field of every register is compared with what the layout puts there.  Prints each
misplaced field ("lane 5 register 1 bits 16-31 holds A[1][3]; the layout puts A[9][3] there")
and, when the misplacements follow a pattern, the likely cause: transposed matrix or row/col
mix-up; lanes mapped wrongly (groupID = lane % 4 and threadID_in_group = lane / 4 swapped, lane % 8
variants, m8n8k4 quad pairs); registers swapped or reversed; 16-bit halves, bytes, nibbles, bit or
element order inside each register; FP6/FP4 codes at the wrong offset of their byte.

Causes are found by positions (each candidate mistake is packed from MATRIX and compared with
REGS), so any values work, repeated ones included (b1, s4, e2m1, fp8).  --codes: MATRIX holds raw
element bit patterns instead of values.  --format json: the report as one JSON object.
Exit status: 0 all fields match, 1 mismatches found, 2 bad input.

example:
  python -c "import numpy as np, warpsim; A = np.arange(256.).reshape(16, 16); \\
np.save('matrix.npy', A); np.save('regs.npy', warpsim.pack('{DEFAULT_INSTR}', 'a', A.T))"
  warpsim check-packing {EXAMPLE_INSTR} --operand a regs.npy matrix.npy

Sparse mma.sp: --operand e checks metadata words (REGS: 32 words) against the logical, 2:4
sparse A (MATRIX: M x K) under --selector F: a wrong selector or metadata map, index pairs in
the wrong order, or swapped word halves are named.
"""

DEMO_HELP = f"""\
One instruction end to end: random inputs (seeded) -> the layout of A -> packed registers ->
mma on the hardware model (--arch, default sm_90) and exactly rounded -> the results, and where
the hardware model differs from the exact answer (count, largest difference in ulps, an example).

Sparse mma.sp forms also show the metadata words and the logical sparse A; --selector F picks
the sparsity selector (default 0).

examples:
  warpsim demo
  warpsim demo --instr m16n8k8.row.col.f32.tf32.tf32.f32 --arch sm_80 --seed 3
  warpsim demo --instr {SPARSE_EXAMPLE} --selector 1
"""


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr, exit status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"warpsim: error: {message} (see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=100)


def _version() -> str:
    from warpsim._util.version import VERSION as __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="warpsim", description=MAIN_DESCRIPTION, formatter_class=_Formatter)
    p.add_argument("--version", action="version", version=f"warpsim {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    d = sub.add_parser("decode", help="decode an instruction", description=DECODE_HELP,
                       formatter_class=_Formatter)
    d.add_argument("instr", metavar="INSTR", help="the instruction: mma, or any PTX instruction warpsim runs")
    d.add_argument("--arch", metavar="A", help="check legality on this target (sm_80, sm_90a, sm_120a, ...)")
    d.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    d.add_argument("--ptx-version", metavar="V", help="PTX ISA .version of the code (default: 9.5)")
    d.add_argument("--ptxas", nargs="?", const="", metavar="PATH",
                   help="also show a live ptxas verdict (default: the newest ptxas found)")
    d.set_defaults(func=cmd_decode)

    lay = sub.add_parser("layout", help="fragment layout of one operand", description=LAYOUT_HELP,
                         formatter_class=_Formatter)
    lay.add_argument("instr", metavar="INSTR", help="the mma instruction")
    lay.add_argument("--operand", required=True, metavar="OP",
                     help="a, b, c, d, scale_a / scale_b (.block_scale forms), e (mma.sp metadata)")
    lay.add_argument("--format", choices=("text", "markdown", "csv", "svg", "json"),
                     help="output format (default: text, or from the --out suffix)")
    lay.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    lay.add_argument("--element", nargs=2, type=int, metavar=("ROW", "COL"),
                     help="who holds this element (for B: ROW is k, COL is n)")
    lay.add_argument("--product", type=int, metavar="P", help="with --element for m8n8k4 .f16: one quad-pair product (0-3)")
    lay.add_argument("--lane", type=int, metavar="L", help="what this lane holds")
    lay.add_argument("--register", type=int, metavar="R", help="with --lane: only this register")
    lay.add_argument("--byte-id", type=int, default=0, metavar="N", help="scale operands: byte-id selector (default 0)")
    lay.add_argument("--thread-id", type=int, default=0, metavar="N", help="scale operands: thread-id selector (default 0)")
    lay.add_argument("--selector", type=int, default=0, metavar="F", help="sparse metadata (--operand e): sparsity selector (default 0)")
    lay.add_argument("--color-by", choices=("lane", "thread", "register"), default="lane",
                     help="svg cell colours: lane (default), thread = lane %% 4 (like the PTX figures), register")
    lay.add_argument("--title", help="svg title (default: the operand and instruction)")
    lay.set_defaults(func=cmd_layout)

    r = sub.add_parser("run", help="write golden values (.npz, .json, .h)", description=RUN_HELP,
                       formatter_class=_Formatter)
    r.add_argument("instr", metavar="INSTR", help="the mma instruction")
    r.add_argument("--arch", metavar="A", help="target model, or 'exact' (default: sm_90 if legal)")
    r.add_argument("--seed", type=int, default=0, metavar="N", help="input seed (default 0)")
    r.add_argument("--dist", choices=DISTS,
                   help="input distribution (default: normal for floats, uniform-bits for integers)")
    r.add_argument("--batch", type=int, default=1, metavar="B", help="number of warps (default 1)")
    r.add_argument("--selector", type=int, metavar="F", help="sparse mma.sp: the sparsity selector (default 0)")
    r.add_argument("--out", required=True, metavar="FILE", help="output file: .npz, .json or .h")
    r.add_argument("--prefix", metavar="NAME", help=".h only: prefix of the C names (default: the file name)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    r.add_argument("--workers", type=int, metavar="N",
                   help="spread the warps over N processes (same bits; default: this process)")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("check-packing", help="diagnose packed registers against the intended matrix",
                       description=CHECK_HELP, formatter_class=_Formatter)
    c.add_argument("instr", metavar="INSTR", help="the mma instruction")
    c.add_argument("--operand", required=True, metavar="OP",
                   help="a, b, c or d; e: mma.sp metadata words (32,) against the logical A (M, K)")
    c.add_argument("--selector", type=int, default=0, metavar="F", help="with --operand e: the sparsity selector")
    c.add_argument("regs", metavar="REGS.npy", help="register words, (32, nregs) or (batch, 32, nregs)")
    c.add_argument("matrix", metavar="MATRIX.npy", help="the intended matrix (values; see --codes)")
    c.add_argument("--codes", action="store_true", help="MATRIX holds element bit patterns, not values")
    c.add_argument("--show", type=int, default=12, metavar="N", help="list at most N mismatches (default 12)")
    c.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default) or json (the report as an object; exit status as for text)")
    c.set_defaults(func=cmd_check)

    m = sub.add_parser("demo", help="one instruction end to end", description=DEMO_HELP,
                       formatter_class=_Formatter)
    m.add_argument("--instr", default=DEFAULT_INSTR, metavar="INSTR", help=f"default: {DEFAULT_INSTR}")
    m.add_argument("--arch", metavar="A", help="hardware model (default: sm_90 if legal)")
    m.add_argument("--seed", type=int, default=0, metavar="N")
    m.add_argument("--dist", choices=DISTS)
    m.add_argument("--selector", type=int, metavar="F", help="sparse mma.sp: the sparsity selector (default 0)")
    m.set_defaults(func=cmd_demo)
    _add_user_commands(sub)

    from warpsim.tools.launch_cli import add_parser as add_launch_parser
    add_launch_parser(sub, _Formatter)
    return p


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


class CliError(WarpsimError):
    """A command-line problem, reported in one line."""


_C_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_C_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": ""}


def from_c_literal(s: str) -> str:
    """PTX text as it stands in CUDA source: adjacent string literals joined, escapes read,
    inline-asm ``%%`` -> ``%`` and operand placeholders ``%0`` -> ``%asm0`` (registers of
    unknown type), the statement's ``;`` and surrounding whitespace dropped.  Text with no
    double quote is returned as it is."""
    if '"' not in s:
        return s
    parts = _C_LITERAL.findall(s)
    if not parts or _C_LITERAL.sub("", s).strip(" \t\n,;"):
        raise CliError(f"cannot read {s!r} as C string literals: text outside the quotes")
    text = re.sub(r"\\(.)", lambda m: _C_ESCAPES.get(m.group(1), m.group(1)), "".join(parts))
    text = re.sub(r"%(\d+)", r"%asm\1", text).replace("%%", "%")
    return " ".join(text.split()).strip().rstrip(";").strip()


def instr_text(s: str) -> str:
    """Accept the instruction with or without the leading 'mma.sync.aligned.', or as C string
    literals pasted from source."""
    t = from_c_literal(s).strip()
    if not t:
        raise CliError("empty instruction")
    if not t.startswith("mma"):
        t = "mma.sync.aligned." + t.lstrip(".")
    return t


def _is_ptx_instruction(text: str) -> bool:
    """True for an instruction of the interpreter's families other than mma (ldmatrix, cvt...)."""
    from warpsim.ptx import registry

    word = from_c_literal(text).strip().lstrip("@!%").split(None, 1)[0] if text.strip() else ""
    if word.startswith("mma") or re.match(r"\.?m\d+n\d+k\d+", word):
        return False
    try:
        registry.lookup(word)
    except Exception:
        return False
    return True


def describe_ptx(text: str) -> str:
    """What ``warpsim decode`` says of a PTX instruction that is not mma."""
    from warpsim.ptx import registry
    from warpsim.ptx.parser import parse_statement
    from warpsim.ptx.program import Decoder, decode_statement

    st = parse_statement(from_c_literal(text).strip().rstrip(";"))
    key, specs, words = registry.lookup(st.opcode)
    fams = sorted({fam for spec, fam in registry.table()[key]})
    ins = decode_statement(st, Decoder("sm_90", lambda name: None))  # PtxError: what is wrong
    lines = [f"{st.text}",
             f"  PTX instruction '{key}' (family {', '.join(fams)}): {ins.spec.doc}",
             f"  qualifiers: {' '.join('.' + w for w in words) or '(none)'}",
             "  warpsim runs it (Warp.execute, Warp.run, Module.launch); which targets accept it "
             "is ptxas's verdict: add --ptxas"]
    return "\n".join(lines) + "\n"


def _decode(s: str, arch: str | None = None):
    from warpsim.tensorcore.decode import decode

    return decode(instr_text(s), arch)


def _pick_arch(ins, arch: str | None) -> str:
    """--arch, or sm_90 if legal, or the first primary target that accepts the instruction."""
    from warpsim.tensorcore.decode import default_arch

    if arch and arch != "auto":
        return arch
    a = default_arch(ins)  # the same rule as arch="auto" in the Python API
    if a != "sm_90":
        print(f"warpsim: note: {ins.text} is not legal on sm_90; using --arch {a}", file=sys.stderr)
    return a


def _write_text(text: str, out: str | None) -> None:
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _load_npy(path: str, what: str) -> np.ndarray:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise CliError(f"{what} file {path!r} does not exist") from None
    except IsADirectoryError:
        raise CliError(f"{what} file {path!r} is a directory") from None
    with f:
        try:
            raw = f.read()
        except OSError as e:
            raise CliError(f"cannot read {what} file {path!r}: {e.strerror or _first_line(e)}") from None
    if raw[:6] != b"\x93NUMPY":
        kind = "an .npz archive; save one array with numpy.save" if raw[:2] == b"PK" else \
            "not a .npy file (write it with numpy.save)"
        raise CliError(f"{what} file {path!r} is {kind}")
    from warpsim.tools.golden import load_npy

    try:
        return load_npy(raw)  # no pickles, no allocation beyond the file
    except ValueError as e:
        raise CliError(f"cannot read {what} file {path!r} as a .npy array: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    s = str(e).strip() or type(e).__name__
    return s.splitlines()[0]


def _bits_ranges(ins, op: str) -> str:
    from warpsim.tensorcore.layouts import code_bits, register_map

    w = code_bits(ins, op)
    reg0 = register_map(ins, op)[0]
    epr = ins.elements_per_register(op)
    los = [int(lo) for r, lo in reg0[:epr]]
    if w == 1:
        return f"bits 0..{epr - 1}, one element per bit"
    s = ", ".join(f"{lo}-{lo + w - 1}" for lo in los)
    if epr > 4:
        s = ", ".join(f"{lo}-{lo + w - 1}" for lo in los[:3]) + f", ..., {los[-1]}-{los[-1] + w - 1}"
    return "bits " + s


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


def decode_text(ins, arch: str | None = None) -> str:
    """The report ``warpsim decode`` prints."""
    from warpsim.tensorcore.decode import legal_archs
    from warpsim.tensorcore.layouts import code_bits

    m, n, k = ins.shape
    rows = [
        ("instruction", ins.text),
        ("form", ins.form + ("  (m8n8k4 .f16: four independent 8x8x4 products, one per quad pair)"
                             if ins.quadpair else "")),
        ("shape", f"m{m} n{n} k{k}: A is {m} x {k}, B is {k} x {n}, C and D are {m} x {n}"),
        ("layouts", f"A .{ins.alayout}, B .{ins.blayout}"),
        ("types", f"D .{ins.dtype} = A .{ins.atype} * B .{ins.btype} + C .{ins.ctype}"),
    ]
    q = []
    if ins.kind:
        q.append(f".kind::{ins.kind}")
    if ins.block_scale:
        q.append(f".block_scale .scale_vec::{ins.scale_vec}X, scale type .{ins.stype}")
    if ins.satfinite:
        q.append(".satfinite")
    if ins.bitop:
        q.append(f".{ins.bitop}.popc")
    if ins.rounding:
        q.append(f".{ins.rounding}")
    if ins.sparse:
        from warpsim.tensorcore.sparse import chunk_size, legal_selectors

        cs = chunk_size(ins)
        q.append(f".{ins.sparse}: A is stored compressed ({m} x {k // 2}, {cs // 2} "
                 f"of every {cs} columns kept), metadata register e, sparsity selector f in "
                 f"{{{', '.join(map(str, legal_selectors(ins)))}}}")
    if q:
        rows.append(("qualifiers", ", ".join(q)))
    if arch:
        from warpsim.tensorcore.numerics import model_for

        rows.append(("arch", f"{arch}: legal (numerics model {model_for(arch).name})"
                     if hasattr(model_for(arch), "name") else f"{arch}: legal"))
    w = max(len(r[0]) for r in rows)
    out = [f"{a.ljust(w)}  {b}" for a, b in rows]
    out.append("")
    out.append("registers per lane (each lane of the warp passes these to mma.sync):")
    table = [("operand", "type", "registers", "elements/register", "element bits in each register")]
    for op in "abcd":
        t = ins.type_of(op)
        sb, cb = ins.storage_bits(op), code_bits(ins, op)
        tdesc = f".{t}" + (f" in {sb}-bit containers" if sb != cb else "")
        table.append((op.upper(), tdesc, f"{ins.regs[op]} x .b{ins.register_bits(op)}",
                      str(ins.elements_per_register(op)), _bits_ranges(ins, op)))
    if ins.block_scale:
        for op, sel in (("scale_A", "byte-id-a, thread-id-a"), ("scale_B", "byte-id-b, thread-id-b")):
            table.append((op, f".{ins.stype}", "1 x .b32", "4 bytes",
                          f"scale_vec::{ins.scale_vec}X bytes picked by {sel}"))
    if ins.sparse:
        table.append(("E", "metadata", "1 x .b32", "8 nibbles",
                      "nibble N = bits 4N..4N+3; lanes and rows: warpsim layout INSTR --operand e"))
    widths = [max(len(r[i]) for r in table) for i in range(5)]
    for r in table:
        out.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(5)).rstrip())
    legal = legal_archs(ins)
    out.append("")
    out.append(f"legal on {len(legal)} architecture{'s' if len(legal) != 1 else ''}: {', '.join(legal) or 'none'}")
    out.append(f"layouts: warpsim layout {ins.text} --operand a")
    return "\n".join(out) + "\n"


def cmd_decode(args) -> int:
    from warpsim.tensorcore.decode import decode

    if _is_ptx_instruction(args.instr):
        if args.ptxas is not None or getattr(args, "format", "text") == "json":
            raise CliError("--ptxas and --format json describe mma instructions; for other PTX "
                           "instructions warpsim prints what it runs")
        sys.stdout.write(describe_ptx(args.instr))
        return 0
    text = instr_text(args.instr)
    if args.ptxas is None:
        ins = decode(text, args.arch, args.ptx_version)
        if getattr(args, "format", "text") == "json":
            sys.stdout.write(_json(decode_dict(ins, args.arch)))
            return 0
        sys.stdout.write(decode_text(ins, args.arch))
        return 0
    if getattr(args, "format", "text") == "json":
        raise CliError("--ptxas prints two verdicts as text; it does not combine with --format json")
    return _decode_with_ptxas(text, args)


def _decode_with_ptxas(text: str, args) -> int:
    """warpsim's verdict and a live ptxas's, side by side."""
    from warpsim.tensorcore.decode import decode, ptx_version_of
    from warpsim.errors import PtxError
    from warpsim.tools.ptxas import find_ptxas, verdict

    px = find_ptxas(args.ptxas or None)
    if px is None:
        raise CliError("no ptxas found: pip install warpsim[ptxas] (the nvidia-cuda-nvcc wheel), "
                       "put ptxas on the PATH, or give --ptxas PATH")
    version = ptx_version_of(args.ptx_version) if args.ptx_version else min(
        ptx_version_of(None), px.max_ptx)
    target = args.arch or "sm_90"
    try:
        ins = decode(text, target, version)
        sys.stdout.write(decode_text(ins, target) + "\n")
        mine = "accepts"
    except PtxError as e:
        mine = f"rejects: {e}"
    msgs = verdict(px, text, target, version)
    theirs = "accepts" if not msgs else "rejects: " + "; ".join(dict.fromkeys(msgs))
    where = f"(.version {version[0]}.{version[1]}, .target {target})"
    print(f"warpsim {where}: {mine}")
    print(f"{px.name} {where}: {theirs}")
    return 0 if mine.startswith("accepts") else 2


def decode_dict(ins, arch: str | None = None) -> dict:
    """What ``warpsim decode --format json`` prints: the fields of ``warpsim list --format json``
    plus, per operand, its registers, elements per register and the bits of each element."""
    from warpsim.tools.catalog import describe
    from warpsim.tensorcore.layouts import code_bits, register_map

    doc = describe(ins)
    doc["arch"] = arch
    ops = {}
    for op in "abcd":
        w = code_bits(ins, op)
        epr = ins.elements_per_register(op)
        ops[op] = {"type": ins.type_of(op), "registers": ins.regs[op], "register_bits": ins.register_bits(op),
                   "elements_per_register": epr, "code_bits": w, "storage_bits": ins.storage_bits(op),
                   "element_bits": [[int(lo), int(lo) + w - 1] for _, lo in register_map(ins, op)[0][:epr]]}
    doc["operands"] = ops
    return doc


def _json(doc) -> str:
    import json

    return json.dumps(doc) + "\n"


_SUFFIX_FORMAT = {".svg": "svg", ".md": "markdown", ".markdown": "markdown", ".csv": "csv", ".txt": "text",
                  ".json": "json"}


def cmd_layout(args) -> int:
    from warpsim.tools.render import render_layout

    ins = _decode(args.instr, None)
    fmt = args.format
    if fmt is None and args.out:
        suffix = os.path.splitext(args.out)[1].lower()
        fmt = _SUFFIX_FORMAT.get(suffix)
        if fmt is None:
            raise CliError(f"--out {args.out!r}: cannot tell the format from {suffix or 'a name without a suffix'}; "
                           f"use {', '.join(_SUFFIX_FORMAT)} or give --format (there is no PNG output: "
                           "write .svg and convert it)")
    fmt = fmt or "text"
    kw = dict(element=tuple(args.element) if args.element else None, lane=args.lane,
              register=args.register, product=args.product, color_by=args.color_by, title=args.title)
    if args.operand.lower().startswith("scale"):
        kw.update(byte_id=args.byte_id, thread_id=args.thread_id)
    elif args.byte_id or args.thread_id:
        raise CliError("--byte-id / --thread-id select scale metadata: use them with --operand scale_a or scale_b")
    if args.operand.lower() == "e":
        kw.update(selector=args.selector)
    elif args.selector:
        raise CliError("--selector is the sparsity selector: use it with --operand e")
    text = render_layout(ins, args.operand, fmt, **kw)
    _write_text(text, args.out)
    if args.out:
        print(f"wrote {args.out} ({fmt})")
    return 0


class _Progress:
    """A progress bar on stderr: '\\r'-redrawn on a terminal, a few lines otherwise."""

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.total, self.label, self.enabled = total, label, enabled
        self.tty = sys.stderr.isatty()
        self.last_pct = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        pct = 100 * done // max(total, 1)
        if not self.tty and pct < 100 and pct - self.last_pct < 25:
            return
        self.last_pct = pct
        bar = "#" * (pct * 30 // 100)
        line = f"{self.label} [{bar:<30}] {pct:3d}% {done}/{total} warps"
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if done >= total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def cmd_run(args) -> int:
    from warpsim.tensorcore.execute import CHUNK
    from warpsim.tools.golden import SUFFIXES, golden, write_golden

    suffix = os.path.splitext(args.out)[1].lower()
    if suffix not in SUFFIXES:
        raise CliError(f"--out {args.out!r}: the file name must end in {', '.join(SUFFIXES)} (it picks the format)")
    if args.batch < 1:
        raise CliError(f"--batch must be at least 1, got {args.batch}")
    if args.seed < 0:
        raise CliError(f"--seed must be non-negative, got {args.seed}")
    if args.prefix and suffix != ".h":
        raise CliError("--prefix applies to .h output only")
    ins = _decode(args.instr, None)
    arch = _pick_arch(ins, args.arch)
    ins = _decode(args.instr, None if arch == "exact" else arch)
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers must be at least 1, got {args.workers}")
    bar = _Progress(args.batch, "run", enabled=not args.no_progress and args.batch > CHUNK)
    data = golden(ins, arch=arch, seed=args.seed, dist=args.dist, batch=args.batch,
                  selector=_selector(ins, args.selector), progress=bar, workers=args.workers)
    kw = {"prefix": args.prefix} if suffix == ".h" else {}
    write_golden(data, args.out, **kw)
    with open(args.out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    sel = f", selector {int(data['selector'])}" if ins.sparse else ""
    print(f"wrote {args.out}: {args.batch} warp{'s' if args.batch != 1 else ''} of {ins.text} on {arch} "
          f"(seed {args.seed}, dist {data['dist']}{sel}, warpsim {data['warpsim_version']}); sha256 {digest}...")
    return 0


def _selector(ins, selector):
    """--selector: only for sparse forms."""
    if selector is not None and not ins.sparse:
        raise CliError(f"--selector is the sparsity selector of mma.sp; {ins.text} is not sparse")
    return selector


def cmd_check(args) -> int:
    from warpsim.tensorcore.doctor import explain_packing

    ins = _decode(args.instr, None)
    op = args.operand.lower()
    if op not in ("a", "b", "c", "d", "e"):
        raise CliError(f"check-packing --operand must be a, b, c, d or e, got {args.operand!r}")
    regs = _load_npy(args.regs, "REGS")
    matrix = _load_npy(args.matrix, "MATRIX")
    if op == "e":  # sparse metadata words (32,) against the logical A
        from warpsim.tensorcore.sparse import explain_metadata

        report = explain_metadata(ins, regs, matrix, selector=args.selector)
        print(report)
        return 0 if report.ok else 1
    if args.selector:
        raise CliError("--selector is the sparsity selector: use it with --operand e")
    from warpsim.tensorcore import doctor

    doctor.SHOW = max(0, args.show)
    report = explain_packing(ins, op, regs, matrix, codes=args.codes)
    if getattr(args, "format", "text") == "json":
        sys.stdout.write(_json(report.to_dict()))
    else:
        print(report)
    return 0 if report.ok else 1


def _ulps(codes_x: np.ndarray, codes_y: np.ndarray, ty: str) -> np.ndarray:
    """|difference| in units in the last place between two arrays of element codes."""
    bits = {"f16": 16, "f32": 32, "f64": 64}.get(ty)
    if bits is None:  # s32: plain integer difference
        return np.abs(codes_x.astype(np.int64).astype(np.int32).astype(np.int64)
                      - codes_y.astype(np.int64).astype(np.int32).astype(np.int64))

    def ordered(c):
        u = c.astype(np.uint64)
        sign = (u >> np.uint64(bits - 1)) & np.uint64(1)
        mag = (u & np.uint64((1 << (bits - 1)) - 1)).astype(object if bits == 64 else np.int64)
        return np.where(sign == 1, -mag, mag)

    return np.abs(ordered(codes_x) - ordered(codes_y))


def cmd_demo(args) -> int:
    from warpsim.facts import formats
    from warpsim.tensorcore.execute import mma
    from warpsim.tools.golden import golden
    from warpsim.tensorcore.packing import unpack, unpack_bits
    from warpsim.tools.render import render_layout

    ins = _decode(args.instr, None)
    arch = _pick_arch(ins, args.arch)
    if arch == "exact":
        raise CliError("demo compares a hardware model with 'exact': give a target such as --arch sm_90")
    ins = _decode(args.instr, arch)
    data = golden(ins, arch=arch, seed=args.seed, dist=args.dist, batch=1,
                  selector=_selector(ins, args.selector))
    kw = {}
    if ins.block_scale:
        kw = dict(scale_a=data["scale_a_regs"], scale_b=data["scale_b_regs"])
    if ins.sparse:
        kw = dict(metadata=data["e_regs"], selector=int(data["selector"]))
    exact = mma(ins, data["a_regs"], data["b_regs"], data["c_regs"], arch="exact", **kw)
    hw_codes = unpack_bits(ins, "d", data["d_regs"])[0]
    ex_codes = unpack_bits(ins, "d", exact)[0]
    hw, ex = unpack(ins, "d", data["d_regs"])[0], unpack(ins, "d", exact)[0]
    out = []
    say = out.append
    say(f"warpsim demo: {ins.text}")
    say(f"  {data['dist']} inputs from seed {args.seed}; D = A * B + C on the {arch} model and exactly rounded")
    say("")
    say("1. The layout of A: which lane holds each element (T5:a2 = lane 5, its element a2)")
    lay = render_layout(ins, "a", "text", parts=("matrix",)).splitlines()
    say("\n".join("   " + x if x else "" for x in lay[1:]))
    say("   (B, C, D and the register maps: warpsim layout INSTR --operand b|c|d)")
    say("")
    say("2. Packed registers: lanes 0-3 of A (hex words; each lane passes these to mma.sync)")
    for ln in range(4):
        words = " ".join(f"{int(w):#0{2 + ins.register_bits('a') // 4}x}" for w in data["a_regs"][0, ln])
        say(f"   lane {ln}: {words}")
    if ins.sparse:
        from warpsim.tensorcore.sparse import chunk_size, metadata_layout

        f = int(data["selector"])
        used = [ln for ln in range(32) if (metadata_layout(ins, f)[ln, :, 0] >= 0).any()]
        say(f"   metadata e (sparsity selector {f}; {len(used)} lanes supply it: "
            f"{', '.join(map(str, used[:4]))}, ...): "
            + ", ".join(f"lane {ln}: {int(data['e_regs'][0, ln]):#010x}" for ln in used[:2]))
        cs = chunk_size(ins)
        say(f"   A above is compressed ({ins.shape[0]} x {ins.shape[2] // 2}); the logical A "
            f"({ins.shape[0]} x {ins.shape[2]}, {cs // 2} of every {cs} columns kept), row 0:")
        say("   " + " ".join(_fmt(v) for v in data["a_sparse"][0, 0]))
    say("")
    quad = ins.quadpair
    say(f"3. D on {arch}" + (" (product 0 of 4)" if quad else "") + ":")
    D = hw[0] if quad else hw
    for row in D:
        say("   " + " ".join(f"{_fmt(v):>11}" for v in row))
    say("")
    say(f"4. {arch} against the exact answer:")
    nan_h = formats.is_nan(hw_codes, ins.dtype) if ins.dtype != "s32" else np.zeros(hw_codes.shape, bool)
    nan_e = formats.is_nan(ex_codes, ins.dtype) if ins.dtype != "s32" else np.zeros(ex_codes.shape, bool)
    both_nan = nan_h & nan_e
    diff = (hw_codes != ex_codes) & ~both_nan
    nd = int(diff.sum())
    total = diff.size
    if nd == 0:
        say(f"   all {total} elements of D are bit-identical.")
    else:
        finite = diff & ~nan_h & ~nan_e
        u = _ulps(hw_codes, ex_codes, ins.dtype)
        unit = "ulp" if ins.dtype != "s32" else ""
        say(f"   {nd} of {total} elements of D differ.")
        if finite.any():
            umax = max(int(x) for x in np.asarray(u)[finite].ravel())
            idx = tuple(int(i) for i in np.argwhere(finite & (u == umax))[0])
            say(f"   largest difference: {umax} {unit}{'s' if umax != 1 and unit else ''} of .{ins.dtype}".rstrip())
            where = (f"D(product {idx[0]})[{idx[1]}][{idx[2]}]" if quad else
                     "D" + "".join(f"[{i}]" for i in idx))
            w = 2 + formats.get_format(ins.dtype).bits // 4
            say(f"   e.g. {where}: {arch} {_fmt(hw[idx], 9)} ({int(hw_codes[idx]):#0{w}x}), "
                f"exact {_fmt(ex[idx], 9)} ({int(ex_codes[idx]):#0{w}x})")
        if (diff & (nan_h ^ nan_e)).any():
            say(f"   {int((diff & (nan_h ^ nan_e)).sum())} element(s) are NaN on one side only")
        say("   (the hardware model truncates and aligns products as the tensor cores do; 'exact' rounds once)")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _fmt(v, digits: int = 6) -> str:
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


# --------------------------------------------------------------------------------------------
# gemm, list
# --------------------------------------------------------------------------------------------

GEMM_HELP = f"""\
D = A @ B + C through INSTR, tiled as a GPU kernel tiles it: A (M x K), B (K x N) and C (M x N,
default zeros) from .npy files are cut into the instruction's tiles (zero-padded at ragged
edges); for each k-tile in increasing order all output tiles run as one batch, each tile's D
feeding the next k-tile's C.  Values are rounded to the element types as warpsim.pack rounds
them (--strict: refuse values that would be rounded or saturated).  D (float64, int64 for .s32)
is written to --out.  Block-scaled forms take --scale-a (M x ceil(K/b)) and --scale-b
(ceil(K/b) x N), b = k / scale_vec.

examples:
  warpsim gemm {EXAMPLE_INSTR} A.npy B.npy --out D.npy
  warpsim gemm m16n8k16.row.col.f32.bf16.bf16.f32 A.npy B.npy --c C.npy --arch exact --out D.npy
"""

LIST_HELP = """\
List the mma.sync and mma.sp instructions warpsim knows (canonical qualifier order), with their
registers per lane and the targets that accept them.  Filters combine:
  --shape m16n8k16     --type e2m1 (any operand's type)     --kind mxf4 (.kind, or 'none')
  --arch sm_90 (legal there)    --form f8f6f4 or sp-f16 (the form decode reports; groups:
                                sparse, dense)    --type fp8 (groups: fp8 fp6 fp4 int8 int4)
  --ptx-version 9.0 (legal at PTX ISA .version 9.0; warpsim models 9.0 ... 9.5)
--format json prints a list of objects for scripts.  The short form of each instruction (no
"mma.sync.aligned.") is what INSTR takes in the other commands.

examples:
  warpsim list --shape m16n8k64
  warpsim list --kind mxf4nvf4 --format json
  warpsim list --type e4m3 --arch sm_89
"""


def _add_user_commands(sub) -> None:
    g = sub.add_parser("gemm", help="a whole matrix product through one instruction (.npy files)",
                       description=GEMM_HELP, formatter_class=_Formatter)
    g.add_argument("instr", metavar="INSTR", help="the mma instruction")
    g.add_argument("a", metavar="A.npy", help="M x K values")
    g.add_argument("b", metavar="B.npy", help="K x N values")
    g.add_argument("--c", metavar="C.npy", help="M x N values (default: zeros)")
    g.add_argument("--out", required=True, metavar="D.npy", help="where to write D")
    g.add_argument("--arch", metavar="A", help="target model, or 'exact' (default: sm_90 if legal)")
    g.add_argument("--scale-a", metavar="SA.npy", help="block-scaled forms: scale_A values")
    g.add_argument("--scale-b", metavar="SB.npy", help="block-scaled forms: scale_B values")
    g.add_argument("--strict", action="store_true", help="refuse values the element types cannot hold exactly")
    g.set_defaults(func=cmd_gemm)

    ls = sub.add_parser("list", help="list instructions (filters; text or JSON)", description=LIST_HELP,
                        formatter_class=_Formatter)
    ls.add_argument("--shape", metavar="mMnNkK")
    ls.add_argument("--type", metavar="T", help="an element type of any operand (f16, e2m1, s4, b1, ...)")
    ls.add_argument("--kind", metavar="K", help="the .kind (f8f6f4, mxf8f6f4, mxf4, mxf4nvf4) or 'none'")
    ls.add_argument("--form", metavar="F", help="warpsim's form name (f16, fp8, int4, ...)")
    ls.add_argument("--arch", metavar="A", help="only instructions legal on this target")
    ls.add_argument("--ptx-version", metavar="V", help="only instructions PTX ISA version V accepts")
    ls.add_argument("--format", choices=("text", "json"), default="text")
    ls.set_defaults(func=cmd_list)

    ev = sub.add_parser("env", help="what runs fast here: compiled engines, SFU kernels, ptxas, extras",
                        description=ENV_HELP, formatter_class=_Formatter)
    ev.add_argument("--format", choices=("text", "json"), default="text")
    ev.set_defaults(func=cmd_env)


ENV_HELP = """\
What this machine gives warpsim: the CPU's vector features, whether the compiled tensor-core
engine and the compiled special-function path are built (and why not), which kernel runs each
family of special-function forms (the unit's reconstructed datapath, a band kernel, the compact
tables, or NumPy), the ptxas found, and the optional packages installed.  Builds the compiled
libraries if they are not cached yet (a few seconds, once).

example:
  warpsim env
  warpsim env --format json
"""

_CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vbmi", "avx512_vnni")
_EXTRAS = ("triton", "torch", "mmasim", "dask", "cupy", "hypothesis")


def environment() -> dict:
    """The facts ``warpsim env`` prints, as a dict."""
    import importlib.util
    import platform

    from warpsim.ptx import sfu_accel
    from warpsim.tensorcore import accel
    from warpsim.tools.ptxas import find_ptxas

    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name") and model in ("", platform.machine(), platform.processor()):
                    model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    px = find_ptxas()
    return {
        "warpsim": _version(), "python": platform.python_version(), "numpy": np.__version__,
        "cpu": {"model": model, "cores": os.cpu_count(),
                "features": {f: f in flags for f in _CPU_FEATURES} if flags else {}},
        "mma_engine": {"compiled": accel.available(), "reason": accel.reason},
        "sfu": {"compiled": sfu_accel.available(), "reason": sfu_accel.reason, "kernels": sfu_accel.kernels()},
        "cache_dir": accel.cache_dir(),
        "ptxas": None if px is None else {"path": px.path, "cuda": "%d.%d" % px.cuda,
                                          "max_ptx": "%d.%d" % px.max_ptx},
        "extras": {m: importlib.util.find_spec(m) is not None for m in _EXTRAS},
    }


def cmd_env(args) -> int:
    import json

    d = environment()
    if args.format == "json":
        print(json.dumps(d, indent=1))
        return 0
    feats = d["cpu"]["features"]
    print(f"warpsim {d['warpsim']}, Python {d['python']}, NumPy {d['numpy']}")
    print(f"CPU: {d['cpu']['model']} ({d['cpu']['cores']} cores)"
          + (": " + " ".join(f for f, on in feats.items() if on) if feats else ""))
    for name, key in (("tensor-core engine", "mma_engine"), ("special-function path", "sfu")):
        e = d[key]
        print(f"{name}: " + ("compiled" if e["compiled"] else f"NumPy only ({e['reason']})"))
    for fam, k in d["sfu"]["kernels"].items():
        print(f"  {fam:20s} {k}")
    print(f"compiled libraries cached in {d['cache_dir']}")
    p = d["ptxas"]
    print("ptxas: " + ("not found (pip install warpsim[ptxas])" if p is None
                       else f"{p['path']} (CUDA {p['cuda']}, PTX ISA up to {p['max_ptx']})"))
    print("optional packages: " + ", ".join(f"{m} {'yes' if on else 'no'}" for m, on in d["extras"].items()))
    return 0


def cmd_gemm(args) -> int:
    from warpsim.tensorcore.gemm import gemm

    if not args.out.endswith(".npy"):  # np.save would write OUT.npy while we report OUT
        raise CliError(f"--out {args.out!r}: D is written as a .npy file; give a name ending in .npy")
    ins = _decode(args.instr, None)
    arch = _pick_arch(ins, args.arch)
    ins = _decode(args.instr, None if arch == "exact" else arch)
    A = _load_npy(args.a, "A")
    B = _load_npy(args.b, "B")
    C = _load_npy(args.c, "C") if args.c else None
    kw = {}
    if args.scale_a or args.scale_b:
        kw = dict(scale_A=_load_npy(args.scale_a, "scale_A") if args.scale_a else None,
                  scale_B=_load_npy(args.scale_b, "scale_B") if args.scale_b else None)
    D, stats = gemm(A, B, C, instr=ins, arch=arch, strict=args.strict, return_stats=True, **kw)
    np.save(args.out, D)
    for name, counts in stats.items():
        changed = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
        if changed:
            ty = {"A": ins.atype, "B": ins.btype, "C": ins.ctype}[name]
            print(f"warpsim: note: converting {name} to .{ty}: {changed} (--strict refuses them)",
                  file=sys.stderr)
    m, n, k = ins.shape
    tiles = f"{-(-D.shape[0] // m)} x {-(-D.shape[1] // n)} output tiles, {max(1, -(-A.shape[1] // k))} k-steps"
    print(f"wrote {args.out}: D {D.shape[0]} x {D.shape[1]} ({D.dtype}) = A @ B + C through {ins.text} "
          f"on {arch} ({tiles})")
    return 0


def cmd_list(args) -> int:
    import json

    from warpsim.tools.catalog import describe, instructions

    found = instructions(shape=args.shape, type=args.type, kind=args.kind, form=args.form, arch=args.arch,
                         ptx_version=args.ptx_version)
    rows = [describe(i) for i in found]
    if args.format == "json":
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    if not rows:
        print("no instruction matches these filters")
        return 1
    w = max(len(r["short"]) for r in rows)
    for r in rows:
        regs = " ".join(f"{k}{v}" for k, v in r["registers"].items())
        sys.stdout.write(f"{r['short'].ljust(w)}  {r['form']:<9} regs {regs:<14} {_arch_span(r['archs'])}\n")
    print(f"{len(rows)} instruction{'s' if len(rows) != 1 else ''}")
    return 0


def _arch_span(archs: list[str]) -> str:
    if not archs:
        return "legal nowhere"
    return f"{archs[0]} .. {archs[-1]} ({len(archs)} targets)" if len(archs) > 3 else ", ".join(archs)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. piped into head
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        print("warpsim: interrupted", file=sys.stderr)
        return 130
    except (WarpsimError, ValueError, TypeError, LookupError) as e:
        print(f"warpsim: error: {_first_line(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        name = f" {e.filename!r}" if getattr(e, "filename", None) else ""
        print(f"warpsim: error: cannot access{name}: {e.strerror or _first_line(e)}", file=sys.stderr)
        return 2
    except MemoryError as e:  # the input asked for more than the machine has: not a bug
        print(f"warpsim: error: not enough memory ({_first_line(e)}); ask for less (a smaller "
              f"--batch, grid or array)", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: still one line, but say so  # noqa: BLE001
        if os.environ.get("WARPSIM_DEBUG"):
            raise
        print(f"warpsim: internal error: {type(e).__name__}: {_first_line(e)} "
              f"(set WARPSIM_DEBUG=1 for a traceback; please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
