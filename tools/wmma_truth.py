#!/usr/bin/env python3
"""The ptxas verdict table for wmma instruction strings (issue 19).

    python tools/wmma_truth.py [--ptxas PATH ...] [-o FILE]

Generates the candidate statements (every load/store/mma form of warpsim.facts.wmma in every
state space, with and without a stride, plus near misses: types on the wrong shape, mixed or
swapped types, .satfinite/rounding/bit operations where they do not belong, layouts the
sub-byte forms lack, qualifiers in other orders), writes them many per module (one a line) and
runs each ptxas on every target of warpsim.facts.isa.ARCHS, attributing errors to lines (an
error can hide others, so the survivors are re-run; a batch with errors ptxas reports in its own
macro expansion, which name no line of ours, is split in halves down to single lines).  The
table (``tests/data/ptxas_truth_wmma.jsonl.gz``) has one JSON object per string:
``{"s": text, "<cuda>@<version>": [accepted targets]}``.  sm_70/sm_72 are labelled with their
``.target`` and ``-arch=sm_75`` (CUDA 13 has no SASS for them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from warpsim.facts.isa import ARCHS  # noqa: E402
from warpsim.facts.wmma import ELEMENT_BITS, FRAGMENTS, MMA_GEOMS, SHAPES  # noqa: E402
from warpsim.tools.ptxas import find_ptxas  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "ptxas_truth_wmma.jsonl.gz")
TYPES = tuple(ELEMENT_BITS)
SPACES = ("", ".global", ".shared", ".shared::cta")


def _nregs(frag: str, shape: str, t: str) -> tuple[int, str]:
    f = FRAGMENTS.get((frag, shape, t))
    if f is None:
        return 1, "%r"
    if f.reg_bits == 64:
        return f.nregs, "%fd"
    return f.nregs, ("%f" if t == "f32" else "%r")


def _vec(n: int, pre: str, base: int) -> str:
    return "{" + ", ".join(f"{pre}{base + i}" for i in range(n)) + "}"


def load_text(frag, layout, shape, ss, t, stride=True) -> str:
    n, pre = _nregs(frag, shape, t)
    st = ", 16" if stride else ""
    return f"wmma.load.{frag}.sync.aligned.{layout}.{shape}{ss}.{t} {_vec(n, pre, 0)}, [%rd1]{st};"


def store_text(layout, shape, ss, t, stride=True) -> str:
    n, pre = _nregs("c", shape, t)
    st = ", 16" if stride else ""
    return f"wmma.store.d.sync.aligned.{layout}.{shape}{ss}.{t} [%rd1], {_vec(n, pre, 0)}{st};"


def mma_text(quals: str, shape: str, d: str, a: str, b: str, c: str) -> str:
    nd, pd = _nregs("c", shape, d)
    na, pa = _nregs("a", shape, a)
    nb, pb = _nregs("b", shape, b)
    nc, pc = _nregs("c", shape, c)
    return (f"wmma.mma{quals} {_vec(nd, pd, 0 if pd != '%fd' else 8)}, {_vec(na, pa, 16 if pa != '%fd' else 0)}, "
            f"{_vec(nb, pb, 32 if pb != '%fd' else 2)}, {_vec(nc, pc, 48 if pc != '%fd' else 4)};")


def candidates() -> list[str]:
    out: list[str] = []
    add = out.append
    for frag in "abc":
        for shape in SHAPES:
            for t in TYPES:
                for lay in ("row", "col"):
                    legal = (frag, shape, t) in FRAGMENTS
                    for ss in (SPACES if legal else ("",)):
                        add(load_text(frag, lay, shape, ss, t))
                        if legal and ss == "":
                            add(load_text(frag, lay, shape, ss, t, stride=False))
    for shape in SHAPES:
        for t in TYPES:
            for lay in ("row", "col"):
                legal = ("c", shape, t) in FRAGMENTS
                for ss in (SPACES if legal else ("",)):
                    add(store_text(lay, shape, ss, t))
                if legal:
                    add(store_text(lay, shape, "", t, stride=False))
    lays = [(a, b) for a in ("row", "col") for b in ("row", "col")]
    for g in MMA_GEOMS:
        for al, bl in lays:
            base = f".sync.aligned.{al}.{bl}.{g.shape}"
            if g.atype == "f16":
                for d in ("f16", "f32", "s32", "bf16"):
                    for c in ("f16", "f32", "s32", "bf16"):
                        add(mma_text(base + f".{d}.{c}", g.shape, d, "f16", "f16", c))
                add(mma_text(base + f".{g.dtype}.{g.ctype}.satfinite", g.shape, g.dtype, "f16", "f16", g.ctype))
                add(mma_text(base + f".{g.dtype}.f16.f16.{g.ctype}", g.shape, g.dtype, "f16", "f16", g.ctype))
                continue
            types = f".{g.dtype}.{g.atype}.{g.btype}.{g.ctype}"
            if g.atype == "b1":
                for op in ("xor", "and", "or"):
                    add(mma_text(f".{op}.popc{base}{types}", g.shape, "s32", "b1", "b1", "s32"))
                    add(mma_text(f"{base}{types}.{op}.popc", g.shape, "s32", "b1", "b1", "s32"))
                add(mma_text(f"{base}{types}", g.shape, "s32", "b1", "b1", "s32"))
                continue
            add(mma_text(base + types, g.shape, g.dtype, g.atype, g.btype, g.ctype))
            add(mma_text(base + types + ".satfinite", g.shape, g.dtype, g.atype, g.btype, g.ctype))
            add(mma_text(base + ".satfinite" + types, g.shape, g.dtype, g.atype, g.btype, g.ctype))
            for r in ("rn", "rz", "rm", "rp"):
                add(mma_text(f"{base}.{r}{types}", g.shape, g.dtype, g.atype, g.btype, g.ctype))
                add(mma_text(f"{base}{types}.{r}", g.shape, g.dtype, g.atype, g.btype, g.ctype))
            other = {"s8": "u8", "u8": "s8", "s4": "u4", "u4": "s4", "bf16": "f16", "tf32": "f32",
                     "f64": "f32"}[g.atype]
            add(mma_text(f"{base}.{g.dtype}.{g.atype}.{other}.{g.ctype}", g.shape, g.dtype, g.atype, other, g.ctype))
            add(mma_text(f"{base}.{g.dtype}.{other}.{g.atype}.{g.ctype}", g.shape, g.dtype, other, g.atype, g.ctype))
            add(mma_text(f"{base}.{g.dtype}.{other}.{other}.{g.ctype}", g.shape, g.dtype, other, other, g.ctype))
            if g.dtype == "f32":
                add(mma_text(f"{base}.f16.{g.atype}.{g.btype}.f32", g.shape, "f16", g.atype, g.btype, "f32"))
    # qualifier order and missing .sync/.aligned
    add("wmma.load.a.aligned.sync.row.m16n16k16.f16 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd1], 16;")
    add("wmma.load.a.sync.row.m16n16k16.f16 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd1], 16;")
    add("wmma.load.a.sync.aligned.m16n16k16.row.f16 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd1], 16;")
    add("wmma.load.a.sync.aligned.row.m16n16k16.f16.global {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd1], 16;")
    add("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r0, %r1, %r2, %r3, %r4, %r5, %r6}, [%rd1], 16;")
    add("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd1], %r9;")
    add("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}, "
        "{%r16, %r17, %r18, %r19, %r20, %r21, %r22, %r23}, {%r32, %r33, %r34, %r35, %r36, %r37, %r38}, "
        "{%f48, %f49, %f50, %f51, %f52, %f53, %f54, %f55};")
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


_HEAD = (".version {ver}\n.target {target}\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n"
         "  .reg .b32 %r<80>;\n  .reg .f32 %f<80>;\n  .reg .f64 %fd<16>;\n  .reg .b64 %rd<4>;\n"
         "  ld.param.u64 %rd1, [p];\n  mov.u32 %r9, 16;\n")
_NHEAD = _HEAD.count("\n")
_ERR = re.compile(r"c\.ptx, line (\d+); (error|fatal)")  # ptxas's own '<builtin>' lines are not ours


def _run(ptxas: str, target: str, ver: str, lines: list[str]) -> set[int] | None:
    """Indices of lines ptxas rejects, or None when the batch could not be attributed."""
    arch = "sm_75" if target in ("sm_70", "sm_72") else target
    text = _HEAD.format(ver=ver, target=target) + "\n".join("  " + s for s in lines) + "\n  ret;\n}\n"
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "c.ptx")
        open(p, "w").write(text)
        r = subprocess.run([ptxas, f"-arch={arch}", p, "-o", os.path.join(d, "c.cubin")],
                           capture_output=True, text=True)
    if r.returncode == 0:
        return set()
    if re.search(r"<[a-z ]+>, line \d+", r.stderr):  # an error inside ptxas's macro expansion
        return None
    bad = set()
    for m in _ERR.finditer(r.stderr):
        i = int(m.group(1)) - _NHEAD - 1
        if 0 <= i < len(lines):
            bad.add(i)
    if not bad:
        return None
    return bad


def _accepted(ptxas: str, target: str, ver: str, lines: list[str]) -> list[str]:
    """The lines ptxas accepts: attributed errors drop their lines and the rest is re-run (an
    error can hide others); a batch whose errors cannot be attributed (ptxas's own macro lines)
    is split in halves down to single lines."""
    if not lines:
        return []
    bad = _run(ptxas, target, ver, lines)
    if bad is None:
        if len(lines) == 1:
            return []
        h = len(lines) // 2
        return _accepted(ptxas, target, ver, lines[:h]) + _accepted(ptxas, target, ver, lines[h:])
    if not bad:
        return lines
    return _accepted(ptxas, target, ver, [s for j, s in enumerate(lines) if j not in bad])


def label_target(ptxas: str, target: str, ver: str, cands: list[str]) -> set[str]:
    """Accepted strings on ``target``, in batches of 300."""
    acc: set[str] = set()
    for i in range(0, len(cands), 300):
        acc.update(_accepted(ptxas, target, ver, cands[i:i + 300]))
    return acc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptxas", action="append", default=[])
    ap.add_argument("-o", default=OUT)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    cands = candidates()
    table = {s: {} for s in cands}
    for path in args.ptxas or [None]:
        px = find_ptxas(path)
        ver = f"{px.max_ptx[0]}.{px.max_ptx[1]}"
        key = f"{px.cuda[0]}.{px.cuda[1]}@{ver}"
        targets = [t for t in ARCHS if ARCHS[t].since <= px.max_ptx]
        print(f"{key}: {len(cands)} strings x {len(targets)} targets", file=sys.stderr)
        with ThreadPoolExecutor(args.jobs) as ex:
            res = dict(zip(targets, ex.map(lambda t: label_target(px.path, t, ver, cands), targets)))
        for s in cands:
            table[s][key] = [t for t in targets if s in res[t]]
    with gzip.open(args.o, "wt") as f:
        for s in cands:
            f.write(json.dumps({"s": s, **table[s]}) + "\n")
    print(f"wrote {args.o}: {len(cands)} strings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
