#!/usr/bin/env python3
"""Label wgmma instruction statements with ptxas verdicts (the wgmma legality corpus).

    python tools/ptxas_truth_wgmma.py [--ptxas PATH ...] [-o tests/data/ptxas_truth_wgmma.jsonl.gz]

Every candidate is a complete statement (operands included), written many to a module, one a
line; ptxas errors are attributed by line number.  Each (ptxas release, .version, target)
label set is stored as ``{"text": ..., "labels": {"13.5@9.5/sm_90a": [accepted, message]}}``.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warpsim.facts.wgmma import FORMS, TYPE_BITS  # noqa: E402

OUT = ROOT / "tests" / "data" / "ptxas_truth_wgmma.jsonl.gz"
TARGETS = ("sm_90a", "sm_90", "sm_100a")
ALL_N = tuple(range(8, 265, 8))


def _vec(pfx: str, n: int, start: int = 0) -> str:
    return "{" + ", ".join(f"%{pfx}{start + i}" for i in range(n)) + "}"


def statement(shape_n: int, k: int, dtype: str, atype: str, btype: str, *, sparse=False,
              satfinite=False, bitop=None, a_desc=True, scale=None, trans=None, scale_d="p",
              nd=None) -> str:
    op = "wgmma.mma_async" + (".sp" if sparse else "") + f".sync.aligned.m64n{shape_n}k{k}"
    op += (".satfinite" if satfinite else "") + f".{dtype}.{atype}.{btype}" + (f".{bitop}" if bitop else "")
    if nd is None:
        nd = shape_n // 2 if dtype in ("f32", "s32") else shape_n // 4
    d = _vec("f" if dtype == "f32" else "r", nd, 100)
    a = "%rd1" if a_desc else _vec("r", 4, 10)
    ops = [d, a, "%rd2"]
    if sparse:
        ops += ["%r20", "0"]
    ops.append(scale_d)
    ops += [str(x) for x in (scale or ())]
    ops += [str(x) for x in (trans or ())]
    return f"{op} {', '.join(ops)};"


def candidates() -> list[str]:
    out: list[str] = []
    floats = ("f16", "bf16", "tf32", "e4m3", "e5m2")
    all_types = floats + ("s8", "u8", "b1")
    for f in FORMS:
        for sparse in (False, True):
            k = f.k * (2 if sparse else 1)
            for at in f.atypes:
                for bt in f.btypes:
                    for dt in f.dtypes:
                        for n in ALL_N:
                            for a_desc in (True, False):
                                for sat in ((False, True) if f.satfinite else (False,)):
                                    out.append(statement(
                                        n, k, dt, at, bt, sparse=sparse, satfinite=sat,
                                        bitop=f.bitop, a_desc=a_desc,
                                        scale=(1, 1) if f.scale else None,
                                        trans=((0, 0) if a_desc else (0,)) if f.trans else None))
    # type combinations and words that no form has, at a few N
    for n in (8, 64, 256):
        for at in all_types:
            for bt in all_types:
                for dt in ("f16", "f32", "s32", "bf16"):
                    for k in (8, 16, 32, 256):
                        if any(at in f.atypes and bt in f.btypes and dt in f.dtypes and k == f.k
                               for f in FORMS):
                            continue
                        if (at == bt or {at, bt} <= {"e4m3", "e5m2"} or {at, bt} <= {"s8", "u8"}) \
                                and k == {8: 8, 16: 16, 32: 8, 1: 256}[TYPE_BITS[at] if TYPE_BITS[at] != 32 else 32] * 0 + k:
                            out.append(statement(n, k, dt, at, bt, scale=(1, 1), trans=(0, 0)))
                            out.append(statement(n, k, dt, at, bt))
        out.append(statement(n, 256, "s32", "b1", "b1", bitop="xor.popc"))
        out.append(statement(n, 256, "s32", "b1", "b1"))
        out.append(statement(n, 16, "f32", "f16", "f16", satfinite=True, scale=(1, 1), trans=(0, 0)))
    # immediates and operand lists
    f16 = dict(scale=(1, 1), trans=(0, 0))
    for sc in ((1, 1), (-1, 1), (1, -1), (-1, -1), (2, 1), (0, 1)):
        for tr in ((0, 0), (1, 0), (0, 1), (1, 1), (2, 0)):
            out.append(statement(64, 16, "f32", "f16", "f16", scale=sc, trans=tr))
            out.append(statement(64, 8, "f32", "tf32", "tf32", scale=sc, trans=tr))
        out.append(statement(64, 8, "f32", "tf32", "tf32", scale=sc))
        out.append(statement(64, 32, "f32", "e4m3", "e4m3", scale=sc))
        out.append(statement(64, 32, "s32", "s8", "s8", scale=sc))
        out.append(statement(64, 16, "f32", "bf16", "bf16", a_desc=False, scale=sc, trans=(1,)))
    for sd in ("p", "1", "0", "%r5", "!p"):
        out.append(statement(64, 16, "f32", "f16", "f16", scale_d=sd, **f16))
        out.append(statement(64, 32, "s32", "s8", "s8", scale_d=sd))
    out.append(statement(64, 16, "f32", "f16", "f16", a_desc=False, scale=(1, 1), trans=(0, 0)))
    out.append(statement(64, 16, "f32", "f16", "f16", nd=16, **f16))
    out.append(statement(64, 16, "f32", "f16", "f16", nd=64, **f16))
    out.append(statement(64, 16, "f16", "f16", "f16", nd=32, **f16))
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


_HEAD = """.version {ver}
.target {target}
.address_size 64
.visible .entry k()
{{
    .reg .f32 %f<300>; .reg .b32 %r<300>; .reg .b64 %rd<10>; .reg .pred p;
"""


def label(ptxas: str, ver: str, target: str, cands: list[str]) -> dict[str, tuple[bool, str]]:
    head = _HEAD.format(ver=ver, target=target)
    first = head.count("\n") + 1
    body = "".join(f"    {c}\n" for c in cands) + "    ret;\n}\n"
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.ptx")
        with open(p, "w") as fh:
            fh.write(head + body)
        r = subprocess.run([ptxas, f"-arch={target}", p, "-o", os.path.join(d, "t.cubin")],
                           capture_output=True, text=True)
    errs: dict[int, str] = {}
    header_error = None
    for line in (r.stderr + r.stdout).splitlines():
        m = re.search(r"line (\d+); error\s*:\s*(.*)", line)
        if m:
            ln = int(m.group(1))
            if ln < first:
                header_error = m.group(2)
            errs.setdefault(ln, m.group(2).strip())
    if header_error:
        return {c: (False, header_error) for c in cands}
    if r.returncode != 0 and not errs:
        raise RuntimeError(f"ptxas failed without line errors: {r.stderr[:500]}")
    return {c: (first + i not in errs, errs.get(first + i, "")) for i, c in enumerate(cands)}


def _release(ptxas: str) -> str:
    v = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", v)
    return m.group(1) if m else "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptxas", action="append", help="ptxas binaries (default: ptxas on PATH)")
    ap.add_argument("--versions", default="9.0", help="comma-separated .version values per ptxas, "
                    "'newest' for the newest this ptxas reads")
    ap.add_argument("-o", "--out", default=str(OUT))
    args = ap.parse_args(argv)
    cands = candidates()
    table: dict[str, dict] = {c: {} for c in cands}
    for px in args.ptxas or ["ptxas"]:
        rel = _release(px)
        vers = [f"9.{int(rel.split('.')[1])}" if v == "newest" else v for v in args.versions.split(",")]
        for ver in vers:
            for t in TARGETS:
                for c, v in label(px, ver, t, cands).items():
                    table[c][f"{rel}@{ver}/{t}"] = list(v)
                print(f"ptxas {rel} .version {ver} {t}: "
                      f"{sum(table[c][f'{rel}@{ver}/{t}'][0] for c in cands)} of {len(cands)} accepted",
                      file=sys.stderr)
    with gzip.open(args.out, "wt") as fh:
        for c in cands:
            fh.write(json.dumps({"text": c, "labels": table[c]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
