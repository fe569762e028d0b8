#!/usr/bin/env python3
"""Build and label the ptxas truth table for mma.sync instruction strings.

    python tools/ptxas_truth.py generate [-o FILE]      # candidate strings, one a line
    python tools/ptxas_truth.py label [-i FILE] [--ptxas PATH] [--ptx-version 9.x]
                                      [--targets sm_80,...] [--only-changed KEY_A,KEY_B]
    python tools/ptxas_truth.py all [--ptxas PATH]      # newest .version on everything, then
                                                        # older versions where verdicts change

``label`` writes every candidate into .ptx modules (many candidates a module, one a line; a
candidate that is a complete statement is written as it is, line breaks included; the others
get an operand list whose register counts fit) and runs ptxas for each target, attributing
errors to candidates by line number (errors ptxas reports inside its own macro expansions,
'<macro util>', are not attributed).  A candidate rejected only with operand complaints
("Arguments mismatch", "Argument vector size mismatch", ...) is retried with the other
plausible operand lists; it counts as accepted when any list is accepted.  Each batch is
checked: after a parse error later lines are re-run on their own, the accepted lines are
re-assembled together and must pass, and a batch on which ptxas crashes is bisected down to
the crashing line.  A module whose header is refused (a .target that the .version lacks)
rejects every candidate with that message.

The verdicts of each (ptxas, .version) pair are merged into the table as one label set, keyed
'13.5@9.5'; the format is described at :class:`Table`.  sm_70 and sm_72 are not SASS targets
of CUDA 13 ptxas: they are labelled with ``.target sm_7x`` in the module and ``-arch=sm_75``,
which makes ptxas check features against the .target.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warpsim.tools import ptxas as ptxas_mod  # noqa: E402
from warpsim.facts.isa import ARCHS, FORMS, PTX_VERSIONS, TYPE_BITS, iter_instructions  # noqa: E402
from warpsim.tools.ptxas import Ptxas  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "data" / "ptxas_truth.jsonl.gz"
#: Every target warpsim knows (ptxas is fast enough to label them all).
DEFAULT_TARGETS = tuple(ARCHS)
BATCH = 400

# --------------------------------------------------------------------------------------------
# Candidate generation
# --------------------------------------------------------------------------------------------

ELEM_TYPES = ("f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1",
              "s8", "u8", "s4", "u4", "b1", "s32")
ACC_TYPES = ("f16", "f32", "f64", "s32", "bf16")
KINDS = ("f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4", "f16", "tf32", "i8")
SHAPES = sorted({s for f in FORMS for s in f.shapes} | {(8, 8, 4), (8, 8, 8), (16, 8, 4),
                 (16, 16, 16), (8, 8, 16), (8, 8, 32), (16, 8, 128), (32, 8, 16), (16, 8, 64)})


def shape_tok(s) -> str:
    return "m{}n{}k{}".format(*s)


def _types_end(toks: list[str]) -> int:
    return max(i for i, t in enumerate(toks) if t in TYPE_BITS) + 1


def canonical_strings() -> list[tuple[str, str]]:
    """Every canonical documented form, plus rounding variants and undocumented forms."""
    out = [(i.text, "canonical") for i in iter_instructions()]
    for i in iter_instructions():
        if i.atype == "f64":
            for r in ("rn", "rz", "rm", "rp"):
                out.append((i.text.replace(".f64.f64", f".{r}.f64.f64", 1), "rounding"))
    # Undocumented forms ptxas is known to assemble.
    for t in ("bf16", "tf32"):
        for lay in ("row.col", "row.row", "col.row", "col.col"):
            out.append((f"mma.sync.aligned.m8n8k4.{lay}.f32.{t}.{t}.f32", "undocumented"))
    for s in ((8, 8, 32), (16, 8, 32), (16, 8, 64)):
        for a, b in itertools.product(("s4", "u4"), repeat=2):
            for op in ("and", "xor"):
                out.append((f"mma.sync.aligned.{shape_tok(s)}.row.col.s32.{a}.{b}.s32.{op}.popc",
                            "undocumented"))
    for s in ((16, 8, 16), (16, 8, 32)):
        for k in KINDS:
            for a, b in itertools.product(("e4m3", "e5m2"), repeat=2):
                for dc in ("f32", "f16"):
                    out.append((f"mma.sync.aligned.{shape_tok(s)}.row.col.kind::{k}"
                                f".{dc}.{a}.{b}.{dc}", "kind-on-fp8"))
    return out


def grid_strings() -> list[tuple[str, str]]:
    """Shape x type grid: every shape with every (same) a/b type and accumulator pair."""
    out = []
    for s in SHAPES:
        for t in ELEM_TYPES:
            for d, c in itertools.product(ACC_TYPES[:4], repeat=2):
                if d != c and random.random() < 0.7:
                    continue
                base = f"mma.sync.aligned.{shape_tok(s)}.row.col.{d}.{t}.{t}.{c}"
                out.append((base, "grid"))
    return out


def _mutations(text: str, rng: random.Random) -> list[tuple[str, str]]:
    toks = text.split(".")
    n = len(toks)
    out: list[tuple[str, str]] = []
    add = lambda ts, cat: out.append((".".join(ts), cat))  # noqa: E731
    tend = _types_end(toks)
    tstart = min(i for i, t in enumerate(toks) if t in TYPE_BITS)
    for i in range(1, n):  # drop / duplicate each token
        add(toks[:i] + toks[i + 1:], "missing")
        add(toks[:i + 1] + toks[i:], "duplicate")
    for i in range(tstart, tstart + 4):  # replace each type
        for t in rng.sample(ELEM_TYPES, 5):
            if t != toks[i]:
                add(toks[:i] + [t] + toks[i + 1:], "type-swap")
    lay = [i for i, t in enumerate(toks) if t in ("row", "col")]
    if len(lay) == 2:
        for a, b in itertools.product(("row", "col"), repeat=2):
            ts = list(toks)
            ts[lay[0]], ts[lay[1]] = a, b
            add(ts, "layout")
        add([t for i, t in enumerate(toks) if i not in lay], "layout-missing")
    extras = ["satfinite", "and.popc", "xor.popc", "popc", "block_scale", "scale_vec::1X",
              "scale_vec::2X", "scale_vec::4X", "rn", "rz", "sp", "sp::ordered_metadata",
              "acc::f32", "acc::f16", "bf16x2", "f16x2", "ue8m0", "ue4m3",
              *(f"kind::{k}" for k in KINDS)]
    for e in rng.sample(extras, 8):
        pos = rng.choice([tend, 3, 4, n]) if e not in ("ue8m0", "ue4m3") else tend
        add(toks[:pos] + e.split(".") + toks[pos:], "extra")
    for _ in range(2):  # misspell one token
        i = rng.randrange(1, n)
        t = toks[i]
        choices = [t.upper(), t[:-1], t + t[-1], t.replace("::", ":"), t.replace("_", "-")]
        bad = rng.choice([c for c in choices if c and c != t] or [t + "x"])
        add(toks[:i] + [bad] + toks[i + 1:], "misspell")
    for _ in range(3):  # structured reordering that keeps the positional parts
        ts = _shuffle(toks, rng)
        add(ts, "reorder")
    ts = list(toks)  # stype or popc out of place
    if any(t in ("ue8m0", "ue4m3") for t in ts):
        j = next(i for i, t in enumerate(ts) if t in ("ue8m0", "ue4m3"))
        st = ts.pop(j)
        ts.insert(tstart, st)
        add(ts, "misorder")
    if "popc" in toks:
        ts = [t for t in toks if t != "popc"]
        ts.insert(toks.index("popc") - 1, "popc")
        add(ts, "misorder")
    return out


def _shuffle(toks: list[str], rng: random.Random) -> list[str]:
    """Shuffle the qualifiers, keeping types (and stype) in order and bitop before popc."""
    head, rest = toks[0], toks[1:]
    typed = [t for t in rest if t in TYPE_BITS]
    bit = [t for t in rest if t in ("and", "xor", "popc")]
    lay = [t for t in rest if t in ("row", "col")]
    free = [t for t in rest if t not in TYPE_BITS and t not in ("and", "xor", "popc", "row", "col")]
    slots = ["T"] * len(typed) + ["B"] * len(bit) + ["L"] * len(lay) + free
    rng.shuffle(slots)
    it = {"T": iter(typed), "B": iter(bit), "L": iter(lay)}
    return [head] + [next(it[s]) if s in it else s for s in slots]


def generate(seed: int = 2025) -> list[tuple[str, str]]:
    random.seed(seed)
    rng = random.Random(seed)
    cands = canonical_strings() + grid_strings()
    for text, _ in list(canonical_strings()):
        if text.startswith("mma.sync.aligned.") and rng.random() < 0.9:
            cands += _mutations(text, rng)
        toks = text.split(".")  # the junk qualifiers before, inside and after the types
        t0 = min(i for i, t in enumerate(toks) if t in TYPE_BITS)
        for junk in ("bf16x2", "acc::f32", "acc::f16"):
            for pos in (3, t0, t0 + 2, len(toks)):
                cands.append((".".join(toks[:pos] + [junk] + toks[pos:]), "junk"))
    cands += operand_variants(rng)
    for s in ((16, 8, 16), (16, 8, 32)):  # a tcgen05 kind ptxas 13.5 lets through on sm_107a
        for a, b in itertools.product(("e4m3", "e5m2"), repeat=2):
            for dc in ("f32", "f16"):
                cands.append((f"mma.sync.aligned.{shape_tok(s)}.row.col.kind::ti16"
                              f".{dc}.{a}.{b}.{dc}", "kind-on-fp8"))
    for sh in ("m016n8k16", "m16n08k16", "m16n8k016", "m\u0661\u0666n8k16", "m\uff11\uff16n8k16",
               "m16n\u0668k16", "m16n8k\u00b9\u2076", "m16n8k16\u200b", "M16N8K16", "m16n8k+16",
               "m0x10n8k16", "m1_6n8k16", "m16 n8k16"):
        for t in ("row.col.f32.f16.f16.f32", "row.col.f32.bf16.bf16.f32"):
            cands.append((f"mma.sync.aligned.{sh}.{t}", "shape-spelling"))
    cands += [
        ("mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32", "missing"),
        ("mma.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "missing"),
        ("mma.sync.aligned.row.col.f32.bf16.bf16.f32", "missing"),
        ("mma.sync.aligned.m16n8k16.row.col.bf16.bf16.f32", "missing"),
        ("mma.sync.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "duplicate"),
    ]
    seen: dict[str, str] = {}
    for text, cat in cands:
        seen.setdefault(text, cat)
    return sorted(seen.items())


# --------------------------------------------------------------------------------------------
# Operand lists
# --------------------------------------------------------------------------------------------

from warpsim.tools.ptxas import is_sparse as _sparse  # noqa: E402,F401  (used by ptxas_truth_sparse)
from warpsim.tools.ptxas import operand_lists, render  # noqa: E402,F401  (used by tests)
from warpsim.tools.ptxas import _OPERAND_MSG_RE, _has_operands  # noqa: E402


# --------------------------------------------------------------------------------------------
# Operand-list variants: the operand lists as people write them
# --------------------------------------------------------------------------------------------

#: Immediates in every PTX spelling: decimal, hex, octal, binary integers, 0f/0d hex floats and
#: decimal floats, plus malformed ones.
IMMEDIATES = ("0", "1", "-1", "0x3F800000", "0X10", "017", "0b101", "0B1", "0f3F800000",
              "0F00000000", "0d3FF0000000000000", "0D0000000000000000", "0.", "1.5", "1.5e3",
              "-2.5E-2", ".5", "1e3", "0.0f", "1U", "0x10U", "08", "0b2", "0xG", "1.5.2", "--1",
              "0f3F80", "1e", "+1", "0x" + "F" * 17, "9" * 30, "½", "١")


def _vec(regs, sep=", ") -> str:
    return "{" + sep.join(regs) + "}"


def _op_lists(base: str) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """Register names for d, a, b, c of ``base`` (a canonical string) and its scale operands."""
    from warpsim.tensorcore.decode import decode

    i = decode(base, None)
    pab = "%fd" if i.atype == "f64" else "%r"
    pcd = "%fd" if i.dtype == "f64" else "%f" if i.dtype == "f32" else "%r"
    d = [f"{pcd}{j}" for j in range(i.regs["d"])]
    a = [f"{pab}{20 + j}" for j in range(i.regs["a"])]
    b = [f"{pab}{40 + j}" for j in range(i.regs["b"])]
    c = [f"{pcd}{60 + j}" for j in range(i.regs["c"])]
    return d, a, b, c, ["%r90", "{0, 0}", "%r91", "{0, 0}"] if i.block_scale else []


#: Canonical instructions the operand-list variants are built on (one per operand shape).
OPERAND_BASES = (
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32",
    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64",
    "mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f16",
    "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc",
    "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1"
    ".f32.ue8m0",
    "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1"
    ".f32.ue8m0",
    "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1"
    ".f32.ue8m0",
)


def operand_variants(rng: random.Random) -> list[tuple[str, str]]:
    """Complete statements: whitespace, immediates, sinks, braces and selector variants."""
    out: list[tuple[str, str]] = []
    add = lambda s: out.append((s, "operands"))  # noqa: E731
    for base in OPERAND_BASES:
        d, a, b, c, sc = _op_lists(base)
        V = [_vec(d), _vec(a), _vec(b), _vec(c)]
        ops = V + sc
        add(f"{base} {', '.join(ops)}")
        # whitespace: none, tabs, line breaks, spaces inside braces and before commas/semicolon
        add(f"{base}{','.join(v.replace(', ', ',') for v in ops)}")
        add(f"{base}\t{', '.join(ops)}")
        add(base + "\n  " + ",\n  ".join(ops))
        add(f"{base} " + ", ".join("{ " + " , ".join(x[1:-1].split(", ")) + " }"
                                  if x.startswith("{") else x for x in ops) + " ")
        add(f"{base} {' ,'.join(ops)}")
        add(base + " " + _vec(d, ",\n") + ",\n" + ", ".join(ops[1:]))
        # missing / extra operands and malformed punctuation
        add(f"{base} {', '.join(ops[:-1])}")
        add(f"{base} {', '.join(ops)}, %r99")
        add(f"{base} {', '.join(ops)},")
        add(f"{base} {' '.join(ops)}")
        add(f"{base} {', '.join(ops).replace('}', '', 1)}")
        add(f"{base} {{{', '.join(ops)}}}")
        add(f"{base} ,{', '.join(ops)}")
        # a one-register vector written without braces, and scalar written with braces
        for pos, regs in enumerate((d, a, b, c)):
            if len(regs) == 1:
                w = list(ops)
                w[pos] = regs[0]
                add(f"{base} {', '.join(w)}")
        # sinks and immediates in each of d, a, b, c
        for pos, regs in enumerate((d, a, b, c)):
            w = list(ops)
            w[pos] = _vec(["_"] + regs[1:])
            add(f"{base} {', '.join(w)}")
            w[pos] = _vec(["_"] * len(regs))
            add(f"{base} {', '.join(w)}")
            w[pos] = "_"
            add(f"{base} {', '.join(w)}")
            for imm in rng.sample(IMMEDIATES, 6 if pos != 3 else len(IMMEDIATES)):
                w = list(ops)
                w[pos] = _vec([imm] + regs[1:])
                add(f"{base} {', '.join(w)}")
        # vectors of immediates only, mixed register types, wrong register widths
        for pos, regs in enumerate((d, a, b, c)):
            for imm in ("0", "0f3F800000", "0d3FF0000000000000", "1.5", "0x1FFFFFFFF"):
                w = list(ops)
                w[pos] = _vec([imm] * len(regs))
                add(f"{base} {', '.join(w)}")
            wide = "%fd" if regs[0].startswith("%fd") else "%rd"
            for other in ("%f9", "%r9", "%rd9", "%fd9", "%h9", "%p1", "%x9", "9"):
                if len(regs) > 1:
                    w = list(ops)
                    w[pos] = _vec(regs[:-1] + [other])
                    add(f"{base} {', '.join(w)}")
            del wide
        for imm in ("- 1", "-0f3F800000", "~0", "0x1FFFFFFFF", "0xFFFFFFFF", "-0x80000000",
                    "0f7FC00001", "0d7FF8000000000001", "1E+3", "00", "0U", "0x0u"):
            w = list(ops)
            w[3] = _vec([imm] + c[1:])
            add(f"{base} {', '.join(w)}")
        for reg in ("% r9", "%r 9", "%9r", "r9", "%_9", "$r9", "%r9$"):
            w = list(ops)
            w[1] = _vec([reg] + a[1:])
            add(f"{base} {', '.join(w)}")
        if sc:
            for sa in ("{0f3F800000}", "-0f3F800000", "0F3F800000", "0d3FF0000000000000",
                       "%r90 ", "{%f90}", "{%r90, %r91, %r92, %r93}", "%r9x"):
                w = list(ops)
                w[4] = sa
                add(f"{base} {', '.join(w)}")
            for sel in ("{0U, 0}", "{+0, 1}", "{0x0000000000000000, 0}", "{%rs0, %h1}",
                        "{%p0, 0}", "{%x0, 0}", "{0f00000000, 0}", "{1, 1}", "{2, 0}", "{2, 2}"):
                for where in (5, 7):
                    w = list(ops)
                    w[where] = sel
                    add(f"{base} {', '.join(w)}")
            for sa in ("%r90", "{%r90}", "{ %r90 }", "0", "{0}", "0x7F7F7F7F", "0f3F800000", "1.5",
                       "{%r90, %r91}", "%rd90", "%h0", "_", "{_}", "{}", "%fd90", "%f90"):
                w = list(ops)
                w[4] = sa
                add(f"{base} {', '.join(w)}")
            for sel in ("{0, 0}", "{0,0}", "{%rs0, %rs1}", "{%h0, %h1}", "{%r0, %r1}", "{0, %rs1}",
                        "{%rs0, 1}", "{1, 0}", "{2, 1}", "{0, 3}", "{0, 4}", "{0x0, 0b1}",
                        "{0., 1.}", "{0}", "{0, 0, 0}", "%rs0", "{%rd0, %rd1}", "{%fd0, %fd1}",
                        "{%f0, %f1}", "{_, 0}", "{-1, 0}", "{0, 2}", "{3, 0}"):
                for where in (5, 7):
                    w = list(ops)
                    w[where] = sel
                    add(f"{base} {', '.join(w)}")
    # a guard predicate, a label and a trailing comment are not operand-list syntax: skipped
    seen: dict[str, str] = {}
    for s, c in out:
        seen.setdefault(s, c)
    return list(seen.items())


# --------------------------------------------------------------------------------------------
# Running ptxas
# --------------------------------------------------------------------------------------------

_PARSE_RE = re.compile(r"syntax error|Parsing error")
_SPURIOUS_RE = re.compile(r"_gen_proto")


@dataclass(frozen=True)
class Labeller:
    """One ptxas binary at one ``.version``."""

    ptxas: Ptxas
    version: tuple[int, int]

    @property
    def key(self) -> str:
        return f"{self.ptxas.cuda[0]}.{self.ptxas.cuda[1]}@{self.version[0]}.{self.version[1]}"


def _render_line(s: str, ol) -> str:
    return s if ol is None else render(s, ol)


def _all_errors(lab: Labeller, target: str, lines: list[str]
                ) -> tuple[int, dict[int, list[str]]]:
    """Assemble candidate ``lines`` (each may span several lines): (status, {index: errors}),
    index -1 for errors outside the candidates (the header)."""
    body: list[str] = []
    owner: list[int] = []
    for i, ln in enumerate(lines):
        text = ln if ln.rstrip().endswith(";") else ln + ";"
        for part in text.split("\n"):
            body.append(part)
            owner.append(i)
    rc, errs = ptxas_mod.run(lab.ptxas, target, body, lab.version)
    out: dict[int, list[str]] = {}
    for j, msgs in errs.items():
        out.setdefault(owner[j] if j >= 0 else -1, []).extend(msgs)
    return rc, out


def assemble_lines(lab: Labeller, target: str, lines: list[str]) -> list[list[str] | None]:
    """Per line: None if ptxas accepts it, else its error messages.  Robust to crashes and to
    parse errors that may hide later lines."""
    if not lines:
        return []
    rc, errs = _all_errors(lab, target, lines)
    if -1 in errs:  # the module itself is refused (a target this .version does not know)
        return [errs[-1] for _ in lines]
    crashed = rc < 0 or rc not in (0, 255, 1) or (rc != 0 and not errs)
    if crashed:
        if len(lines) == 1:
            return [[f"ptxas {'crashed' if rc < 0 else 'failed without a line number'} (exit {rc})"]]
        h = len(lines) // 2
        return assemble_lines(lab, target, lines[:h]) + assemble_lines(lab, target, lines[h:])
    res: list[list[str] | None] = [errs.get(i) for i in range(len(lines))]
    if len(lines) > 1:  # ptxas 13.5 blames later lowered lines ('_gen_proto') for an earlier
        for i, r in enumerate(res):  # line's error: such lines are re-checked on their own
            if r and any(_SPURIOUS_RE.search(x) for x in r):
                res[i] = assemble_lines(lab, target, [lines[i]])[0]
    parse = [i for i, e in errs.items() if 0 <= i < len(lines) and any(_PARSE_RE.search(x) for x in e)]
    if parse:  # lines after a parse error are re-run on their own
        first = min(parse)
        return res[:first + 1] + assemble_lines(lab, target, lines[first + 1:])
    ok = [i for i, r in enumerate(res) if r is None]
    if rc != 0 and ok and len(ok) < len(lines):  # accepted lines must also pass on their own
        rc2, errs2 = _all_errors(lab, target, [lines[i] for i in ok])
        if rc2 != 0:
            if len(lines) == 1:
                return [[f"ptxas failed without a line error (exit {rc})"]]
            h = len(lines) // 2
            return assemble_lines(lab, target, lines[:h]) + assemble_lines(lab, target, lines[h:])
    return res


def label_target(lab: Labeller, target: str, cands: list[str]) -> dict[str, tuple[bool, str]]:
    """{string: (accepted, first error)}.  Candidates without an operand list are tried with
    each plausible list (accepted when any is); complete statements are assembled as written."""
    out: dict[str, tuple[bool, str]] = {}
    lists = {s: ([None] if _has_operands(s) else operand_lists(s)) for s in cands}
    pending = list(cands)
    first_err: dict[str, str] = {}
    attempt = 0
    while pending:
        todo = [(s, lists[s][attempt]) for s in pending if attempt < len(lists[s])]
        for s in pending:
            if attempt >= len(lists[s]):
                out[s] = (False, first_err[s])
        if not todo:
            break
        nxt = []
        for i in range(0, len(todo), BATCH):
            chunk = todo[i:i + BATCH]
            res = assemble_lines(lab, target, [_render_line(s, ol) for s, ol in chunk])
            for (s, ol), r in zip(chunk, res):
                if r is None:
                    out[s] = (True, "")
                    continue
                first_err.setdefault(s, r[0])
                if ol is None or any(not _OPERAND_MSG_RE.search(x) for x in r):
                    # A qualifier error: the operand list is not what is wrong.
                    out[s] = (False, next((x for x in r if not _OPERAND_MSG_RE.search(x)), r[0]))
                else:
                    nxt.append(s)
        pending = nxt
        attempt += 1
    return out


def known_targets(lab: Labeller, targets) -> list[str]:
    """The targets this ptxas knows at all (at its newest .version)."""
    probe = Labeller(lab.ptxas, lab.ptxas.max_ptx)
    out = []
    for t in targets:
        rc, errs = _all_errors(probe, t, [])
        if rc == 0:
            out.append(t)
    return out


def label(lab: Labeller, strings: list[str], targets, jobs: int = 2, log=sys.stderr
          ) -> dict[str, dict[str, tuple[bool, str]]]:
    """{target: {string: (accepted, first error)}}."""
    results: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {t: ex.submit(label_target, lab, t, strings) for t in targets}
        for t, fu in futs.items():
            results[t] = fu.result()
            n_ok = sum(1 for v in results[t].values() if v[0])
            print(f"{lab.key} {t}: {n_ok}/{len(strings)} accepted", file=log)
    return results


# --------------------------------------------------------------------------------------------
# The stored table
# --------------------------------------------------------------------------------------------


class Table:
    """The labelled corpus: strings, their categories, and verdicts per label set.

    Stored as gzipped JSON lines.  Line 1: ``{"meta": {"format": 2, "labels": {KEY: {"ptxas":
    build, "targets": [...]}}, "msgs": [message, ...]}}``, KEY = "<CUDA>@<.version>", e.g.
    "13.5@9.5".  Then one row a line: ``{"s": string, "cat": category, KEY: [ok, [[msg, rej],
    ...]], ...}`` with ``ok`` and each ``rej`` a bit mask over that label set's targets (bit i =
    targets[i]) and ``msg`` an index into "msgs" (the first error ptxas gave on those targets).
    A row has a KEY only when that set labelled it.
    """

    def __init__(self, labels=None, msgs=None, rows=None):
        self.labels: dict[str, dict] = labels or {}
        self.msgs: list[str] = msgs or []
        self._msg_ix = {m: i for i, m in enumerate(self.msgs)}
        self.rows: dict[str, dict] = rows or {}

    # ---- reading -----------------------------------------------------------------------
    def targets(self, key: str) -> list[str]:
        return self.labels[key]["targets"]

    def ok(self, row: dict, key: str) -> set[str] | None:
        """Targets that accept the row under label set ``key`` (None: not labelled)."""
        v = row.get(key)
        if v is None:
            return None
        ts = self.targets(key)
        return {t for i, t in enumerate(ts) if v[0] >> i & 1}

    def labelled(self, row: dict, key: str) -> set[str]:
        """Targets that label set ``key`` labelled for the row (a set labelled only where
        verdicts may change covers some targets of some rows)."""
        v = row.get(key)
        if v is None:
            return set()
        mask = v[0]
        for _, m in v[1]:
            mask |= m
        return {t for i, t in enumerate(self.targets(key)) if mask >> i & 1}

    def err(self, row: dict, key: str, target: str) -> str | None:
        v = row.get(key)
        if v is None:
            return None
        i = self.targets(key).index(target)
        return next((self.msgs[m] for m, mask in v[1] if mask >> i & 1), None)

    # ---- writing -----------------------------------------------------------------------
    def add(self, lab: Labeller, targets: list[str], results, cats: dict[str, str]) -> None:
        key = lab.key
        old = self.labels.get(key)
        if old and old["targets"] != list(targets):  # merge into the existing target order
            all_t = list(old["targets"]) + [t for t in targets if t not in old["targets"]]
            self._retarget(key, all_t)
        self.labels.setdefault(key, {"ptxas": lab.ptxas.build, "targets": list(targets)})
        ts = self.labels[key]["targets"]
        strings = next(iter(results.values())).keys() if results else []
        for s in strings:
            row = self.rows.setdefault(s, {"s": s, "cat": cats.get(s, "?")})
            ok, rej = 0, {}
            prev = row.get(key)
            if prev is not None:
                ok = prev[0]
                rej = {m: mask for m, mask in prev[1]}
            for t in targets:
                if t not in results:
                    continue
                bit = 1 << ts.index(t)
                acc, msg = results[t][s]
                ok &= ~bit
                for m in rej:
                    rej[m] &= ~bit
                if acc:
                    ok |= bit
                else:
                    m = self._msg(msg)
                    rej[m] = rej.get(m, 0) | bit
            row[key] = [ok, sorted([m, mask] for m, mask in rej.items() if mask)]

    def _msg(self, msg: str) -> int:
        if msg not in self._msg_ix:
            self._msg_ix[msg] = len(self.msgs)
            self.msgs.append(msg)
        return self._msg_ix[msg]

    def _retarget(self, key: str, new: list[str]) -> None:
        old = self.labels[key]["targets"]
        perm = [new.index(t) for t in old]

        def remap(mask: int) -> int:
            return sum(1 << perm[i] for i in range(len(old)) if mask >> i & 1)

        for row in self.rows.values():
            if key in row:
                ok, rej = row[key]
                row[key] = [remap(ok), [[m, remap(k)] for m, k in rej]]
        self.labels[key]["targets"] = new

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"format": 2, "labels": self.labels, "msgs": self.msgs, "rows": len(self.rows)}
        with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as fh:
            fh.write((json.dumps({"meta": meta}, separators=(",", ":")) + "\n").encode())
            for s in sorted(self.rows):
                fh.write((json.dumps(self.rows[s], separators=(",", ":")) + "\n").encode())

    @classmethod
    def read(cls, path: Path = None) -> "Table":
        path = path or DEFAULT_OUT
        with gzip.open(path, "rt") as fh:
            meta = json.loads(fh.readline())["meta"]
            rows = [json.loads(ln) for ln in fh]
        if meta.get("format") != 2:  # the first format: one ptxas 13.0 label set, full messages
            t = cls()
            key = "13.0@9.0"
            ts = meta["targets"]
            t.labels[key] = {"ptxas": meta["ptxas"], "targets": ts}
            for r in rows:
                ok = sum(1 << ts.index(x) for x in r["ok"])
                rej: dict[int, int] = {}
                for x, m in r["err"].items():
                    k = t._msg(m)
                    rej[k] = rej.get(k, 0) | 1 << ts.index(x)
                t.rows[r["s"]] = {"s": r["s"], "cat": r["cat"], key: [ok, sorted(map(list, rej.items()))]}
            return t
        return cls(meta["labels"], meta["msgs"], {r["s"]: r for r in rows})


def read_table(path: Path = DEFAULT_OUT) -> Table:
    return Table.read(path)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _parse_version(s: str) -> tuple[int, int]:
    a, b = s.split(".")
    return int(a), int(b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("-o", "--output", default="-")
    lb = sub.add_parser("label", help="label strings with one ptxas at one .version and merge "
                        "the verdicts into the table")
    lb.add_argument("-i", "--input", help="candidate file from 'generate' (default: generate now)")
    lb.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    lb.add_argument("--table", help="table to merge into (default: --output if it exists)")
    lb.add_argument("--targets", default="", help="comma-separated (default: every target in "
                    "warpsim.facts.isa.ARCHS that this ptxas knows)")
    lb.add_argument("--ptxas", help="ptxas binary (default: the newest found, see "
                    "warpsim.tools.ptxas.find_ptxas)")
    lb.add_argument("--ptx-version", help="the .version to label at (default: the newest the "
                    "ptxas reads)")
    lb.add_argument("--only-changed", metavar="KEY_A,KEY_B", help="label only the (string, "
                    "target) pairs whose verdicts differ between these two label sets")
    lb.add_argument("-j", "--jobs", type=int, default=2)
    al = sub.add_parser("all", help="label every string with a ptxas at its newest .version, "
                        "then at each older modelled .version the pairs whose verdict differs "
                        "from the table's oldest label set")
    al.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    al.add_argument("--ptxas", help="ptxas binary (default: the newest found)")
    al.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.cmd == "all":
        px = ptxas_mod.find_ptxas(args.ptxas)
        if px is None:
            ap.error("no ptxas found (give --ptxas, or pip install nvidia-cuda-nvcc)")
        out = args.output
        newest = f"{px.max_ptx[0]}.{px.max_ptx[1]}"
        rc = main(["label", "--ptxas", px.path, "--ptx-version", newest, "-o", out, "-j",
                   str(args.jobs)])
        base = sorted(Table.read(Path(out)).labels, key=lambda k: tuple(map(float, k.split("@"))))
        top = Labeller(px, px.max_ptx).key
        older = [v for v in PTX_VERSIONS if v < px.max_ptx]
        if base and base[0] != top:
            for v in older:
                rc |= main(["label", "--ptxas", px.path, "--ptx-version", f"{v[0]}.{v[1]}",
                            "--only-changed", f"{base[0]},{top}", "-o", out, "-j",
                            str(args.jobs)])
        return rc
    if args.cmd == "generate":
        cands = generate()
        text = "".join(f"{s.replace(chr(10), chr(92) + 'n')}\t{c}\n" for s, c in cands)
        if args.output == "-":
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text)
        print(f"{len(cands)} candidates", file=sys.stderr)
        return 0
    px = ptxas_mod.find_ptxas(args.ptxas)
    if px is None:
        ap.error("no ptxas found (give --ptxas, or pip install nvidia-cuda-nvcc)")
    lab = Labeller(px, _parse_version(args.ptx_version) if args.ptx_version else px.max_ptx)
    src = Path(args.table or args.output)
    table = Table.read(src) if src.exists() else Table()
    if args.input:
        cands = [tuple(ln.rsplit("\t", 1)) for ln in Path(args.input).read_text().splitlines() if ln]
        cands = [(s.replace("\\n", "\n"), c) for s, c in cands]
    else:
        cands = generate()
    cats = dict(cands)
    for s, r in table.rows.items():
        cats.setdefault(s, r["cat"])
    targets = [t for t in args.targets.split(",") if t] or known_targets(lab, list(ARCHS))
    unknown = [t for t in targets if t not in ARCHS]
    if unknown:
        ap.error(f"unknown targets {unknown}")
    if args.only_changed:
        ka, kb = args.only_changed.split(",")
        pairs: dict[str, list[str]] = {}
        for s, row in table.rows.items():
            oa, ob = table.ok(row, ka), table.ok(row, kb)
            if oa is None or ob is None:
                continue
            for t in targets:
                if t in table.labels[ka]["targets"] and t in table.labels[kb]["targets"] \
                        and (t in oa) != (t in ob):
                    pairs.setdefault(t, []).append(s)
        for t, ss in pairs.items():
            res = label(lab, ss, [t], 1)
            table.add(lab, [t], res, cats)
        n = sum(map(len, pairs.values()))
        print(f"{lab.key}: labelled {n} (string, target) pairs that differ", file=sys.stderr)
    else:  # the input strings, or (without -i) every generated and stored string
        strings = [s for s, _ in cands] if args.input else list(cats)
        res = label(lab, strings, targets, args.jobs)
        table.add(lab, targets, res, cats)
    table.write(Path(args.output))
    print(f"wrote {len(table.rows)} rows, label sets {sorted(table.labels)} to {args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
