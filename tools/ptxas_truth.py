#!/usr/bin/env python3
"""Build and label the ptxas truth table for mma.sync instruction strings.

    python tools/ptxas_truth.py generate [-o FILE]      # candidate strings, one a line
    python tools/ptxas_truth.py label [-i FILE] [-o OUT] [--targets sm_80,...] [-j 2]
    python tools/ptxas_truth.py all                     # generate + label into tests/data

``label`` writes every candidate into .ptx modules (many candidates a module, one a line) with an
operand list whose register counts fit the candidate, runs ptxas for each target, and attributes
the errors to candidates by line number.  A candidate rejected only with operand complaints
("Arguments mismatch", "Argument vector size mismatch", ...) is retried with the other plausible
operand lists; it counts as accepted when any list is accepted.  Each batch is checked: after a
parse error later lines are re-run on their own, the accepted lines are re-assembled together
and must pass, and a batch on which ptxas crashes is bisected down to the crashing line.

The table (tests/data/ptxas_truth.jsonl.gz) holds one JSON object a line: ``s`` the string,
``cat`` how it was generated, ``ok`` the targets that accept it, ``err`` {target: first error
message} for the others.  A first line with ``meta`` records the ptxas version and targets.
sm_70 and sm_72 are not SASS targets of CUDA 13 ptxas: they are labelled with ``.target sm_7x``
in the module and ``-arch=sm_75``, which makes ptxas check features against the .target.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warpsim.isa import ARCHS, FORMS, TYPE_BITS, iter_instructions  # noqa: E402

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

_SHAPE_RE = re.compile(r"m(\d+)n(\d+)k(\d+)")


def _regs(n_elems: int, bits: int, regbits: int) -> int:
    return max(1, -(-n_elems * bits // regbits))


def operand_lists(text: str) -> list[tuple[int, int, int, int, bool, bool]]:
    """Plausible (a, b, c, d register counts, f64 registers for a/b, f64 for c/d) tuples plus
    whether block-scale operands follow; the most likely first."""
    toks = text.split(".")
    shape = next((tuple(map(int, m.groups())) for t in toks if (m := _SHAPE_RE.fullmatch(t))),
                 (16, 8, 16))
    types = [t for t in toks if t in TYPE_BITS and t not in ("ue8m0", "ue4m3")]
    types += ["f32"] * (4 - len(types))
    d, a, b, c = types[:4]
    m, n, k = shape
    ka = k // 2 if _sparse(text) else k  # mma.sp: A holds the compressed M x K/2 matrix
    kinds = [t for t in toks if t.startswith("kind::")]
    mx = bool(kinds) and kinds[0].startswith("kind::mx")
    scaled = "block_scale" in toks or mx
    out = []
    a_bits = [TYPE_BITS[a]]
    if a in ("e3m2", "e2m3", "e2m1"):
        a_bits = [8, 4] if not (kinds and "mxf4" in kinds[0]) else [4, 8]
    for quad in ((m, n, k) == (8, 8, 4), (m, n, k) != (8, 8, 4)):
        lanes = 8 if quad else 32
        for ab in a_bits:
            for cd in dict.fromkeys([d, "f32", "f16"]):
                f64ab = a == "f64"
                f64cd = cd == "f64" or d == "f64"
                rb_ab = 64 if f64ab else 32
                rb_cd = 64 if f64cd else 32
                ra = _regs(m * ka // lanes, ab, rb_ab)
                rb = _regs(k * n // lanes, ab, rb_ab)
                rd = _regs(m * n // lanes, TYPE_BITS[cd], rb_cd)
                rc = _regs(m * n // lanes, TYPE_BITS[c if cd == d else cd], rb_cd)
                out.append((ra, rb, rc, rd, f64ab, f64cd, scaled))
    if text.count(".") and not scaled:
        out += [o[:-1] + (True,) for o in out[:1]]
    elif scaled:
        out += [o[:-1] + (False,) for o in out[:1]]
    # f16 B at m16n8k4 would be half a register: also try generic small lists.
    out += [(2, 1, 2, 2, False, False, scaled), (4, 2, 4, 4, False, False, scaled),
            (2, 2, 8, 8, False, False, scaled), (4, 4, 8, 8, False, False, scaled),
            (1, 1, 2, 2, True, True, scaled), (2, 2, 4, 4, True, True, scaled)]
    return list(dict.fromkeys(out))


#: The sparsity-selector immediate rendered for mma.sp strings (tools/ptxas_truth_sparse.py varies it).
SPARSE_SELECTOR = 0


def _sparse(text: str) -> bool:
    return any(t == "sp" or t.startswith("sp::") for t in text.split(" ")[0].split("."))


def render(text: str, ol) -> str:
    ra, rb, rc, rd, f64ab, f64cd, scaled = ol
    pab, pcd = ("%fd" if f64ab else "%r"), ("%fd" if f64cd else "%r")

    def vec(prefix, start, count):
        return "{" + ",".join(f"{prefix}{start + i}" for i in range(count)) + "}"

    ops = [vec(pcd, 0, rd), vec(pab, 20, ra), vec(pab, 40, rb), vec(pcd, 60, rc)]
    if _sparse(text):  # metadata register and sparsity selector
        ops += ["%r95", str(SPARSE_SELECTOR)]
    if scaled:
        ops += ["%r90", "{0, 0}", "%r91", "{0, 0}"]
    return f"{text} {', '.join(ops)};"


# --------------------------------------------------------------------------------------------
# Running ptxas
# --------------------------------------------------------------------------------------------

HEADER_LINES = 9
_ERR_RE = re.compile(r"line (\d+); error\s*:\s*(.*)")
_OPERAND_RE = re.compile(r"[Aa]rgument|[Vv]ector|operand|Illegal vector size")
_PARSE_RE = re.compile(r"syntax error|Parsing error")


def _module(target: str, lines: list[str]) -> str:
    head = [".version 9.0", f".target {target}", ".address_size 64", ".visible .entry k()", "{",
            ".reg .b32 %r<100>;", ".reg .f64 %fd<100>;", ".reg .b16 %h<10>;", ".reg .pred %p<2>;"]
    assert len(head) == HEADER_LINES
    return "\n".join(head + lines + ["ret;", "}", ""])


def _sass_arch(target: str) -> str:
    return "sm_75" if target in ("sm_70", "sm_72") else target


def _all_errors(target: str, lines: list[str]) -> tuple[int, dict[int, list[str]]]:
    """Assemble ``lines`` for ``target``: (exit status, {line index: its error messages})."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
        fh.write(_module(target, lines))
        path = fh.name
    try:
        p = subprocess.run(["ptxas", f"-arch={_sass_arch(target)}", path, "-o", os.devnull],
                           capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(path)
    errs: dict[int, list[str]] = {}
    for ln in (p.stdout + p.stderr).splitlines():
        mt = _ERR_RE.search(ln)
        if mt:
            errs.setdefault(int(mt.group(1)) - HEADER_LINES - 1, []).append(mt.group(2).strip())
    return p.returncode, errs


def assemble_lines(target: str, lines: list[str]) -> list[list[str] | None]:
    """Per line: None if ptxas accepts it, else its error messages.  Robust to crashes and to
    parse errors that may hide later lines."""
    if not lines:
        return []
    rc, errs = _all_errors(target, lines)
    crashed = rc < 0 or rc not in (0, 255, 1) or (rc != 0 and not errs)
    if crashed:
        if len(lines) == 1:
            return [[f"ptxas crashed (exit {rc})"]]
        h = len(lines) // 2
        return assemble_lines(target, lines[:h]) + assemble_lines(target, lines[h:])
    res: list[list[str] | None] = [errs.get(i) for i in range(len(lines))]
    parse = [i for i, e in errs.items() if 0 <= i < len(lines) and any(_PARSE_RE.search(x) for x in e)]
    if parse:  # lines after a parse error are re-run on their own
        first = min(parse)
        return res[:first + 1] + assemble_lines(target, lines[first + 1:])
    ok = [i for i, r in enumerate(res) if r is None]
    if rc != 0 and ok and len(ok) < len(lines):  # accepted lines must also pass on their own
        rc2, errs2 = _all_errors(target, [lines[i] for i in ok])
        if rc2 != 0:
            if len(lines) == 1:
                return [[f"ptxas failed without a line error (exit {rc})"]]
            h = len(lines) // 2
            return assemble_lines(target, lines[:h]) + assemble_lines(target, lines[h:])
    return res


def label_target(target: str, cands: list[str]) -> dict[str, tuple[bool, str, int]]:
    """{string: (accepted, first error or rendered operands, operand list index)}."""
    out: dict[str, tuple[bool, str, int]] = {}
    lists = {s: operand_lists(s) for s in cands}
    pending = list(cands)
    first_err: dict[str, str] = {}
    attempt = 0
    while pending:
        todo = [(s, lists[s][attempt]) for s in pending if attempt < len(lists[s])]
        for s in pending:
            if attempt >= len(lists[s]):
                out[s] = (False, first_err[s], attempt)
        if not todo:
            break
        nxt = []
        for i in range(0, len(todo), BATCH):
            chunk = todo[i:i + BATCH]
            res = assemble_lines(target, [render(s, ol) for s, ol in chunk])
            for (s, ol), r in zip(chunk, res):
                if r is None:
                    out[s] = (True, ",".join(map(str, ol[:4])) + ("+s" if ol[6] else ""), attempt)
                    continue
                first_err.setdefault(s, r[0])
                if any(not _OPERAND_RE.search(x) for x in r):
                    # A qualifier error: the operand list is not what is wrong. Report the first
                    # non-operand message.
                    out[s] = (False, next(x for x in r if not _OPERAND_RE.search(x)), attempt)
                else:
                    nxt.append(s)
        pending = nxt
        attempt += 1
    return out


def label(cands: list[tuple[str, str]], targets, jobs: int = 2, log=sys.stderr):
    strings = [s for s, _ in cands]
    results: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {t: ex.submit(label_target, t, strings) for t in targets}
        for t, fu in futs.items():
            results[t] = fu.result()
            n_ok = sum(1 for v in results[t].values() if v[0])
            print(f"{t}: {n_ok}/{len(strings)} accepted", file=log)
    rows = []
    for s, cat in cands:
        ok = [t for t in targets if results[t][s][0]]
        err = {t: results[t][s][1] for t in targets if not results[t][s][0]}
        row = {"s": s, "cat": cat, "ok": ok, "err": err}
        ops = {results[t][s][1] for t in ok}
        if ops:
            row["ops"] = sorted(ops)
        retry = max(results[t][s][2] for t in targets)
        if retry:
            row["retry"] = retry
        rows.append(row)
    return rows


def ptxas_version() -> str:
    try:
        out = subprocess.run(["ptxas", "--version"], capture_output=True, text=True).stdout
    except OSError:
        return "unavailable"
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def write_table(rows, targets, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", compresslevel=9) as fh:
        fh.write(json.dumps({"meta": {"ptxas": ptxas_version(), "targets": list(targets),
                                      "rows": len(rows)}}) + "\n")
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")


def read_table(path: Path = DEFAULT_OUT):
    with gzip.open(path, "rt") as fh:
        meta = json.loads(fh.readline())["meta"]
        rows = [json.loads(ln) for ln in fh]
    return meta, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("-o", "--output", default="-")
    lb = sub.add_parser("label")
    lb.add_argument("-i", "--input", help="candidate file from 'generate' (default: generate now)")
    for p in (lb, sub.add_parser("all")):
        p.add_argument("-o", "--output", default=str(DEFAULT_OUT))
        p.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
        p.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.cmd == "generate":
        cands = generate()
        text = "".join(f"{s}\t{c}\n" for s, c in cands)
        if args.output == "-":
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text)
        print(f"{len(cands)} candidates", file=sys.stderr)
        return 0
    if getattr(args, "input", None):
        cands = [tuple(ln.split("\t")) for ln in Path(args.input).read_text().splitlines() if ln]
    else:
        cands = generate()
    targets = [t for t in args.targets.split(",") if t]
    unknown = [t for t in targets if t not in ARCHS]
    if unknown:
        ap.error(f"unknown targets {unknown}")
    rows = label(cands, targets, args.jobs)
    write_table(rows, targets, Path(args.output))
    print(f"wrote {len(rows)} rows x {len(targets)} targets to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
