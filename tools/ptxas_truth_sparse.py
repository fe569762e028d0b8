#!/usr/bin/env python3
"""Build and label the ptxas truth table for sparse ``mma.sp`` strings.

    python tools/ptxas_truth_sparse.py [-o FILE] [-j 2]

Candidates: every documented sparse form in both spellings (``.sp`` also for the ``kind::``
forms, which need ``::ordered_metadata``), mutations of them (missing, repeated, swapped,
misspelled and reordered qualifiers, the sparse qualifier anywhere), and the strings of the
dense table that carry a sparse qualifier (labelled there without the ``e, f`` operands).
Operand lists are those of tools/ptxas_truth.py plus ``%r95, 0`` (metadata, selector 0).
For the canonical strings, ``sel`` also records per target which selectors 0..3 ptxas accepts.

Output tests/data/ptxas_truth_sparse.jsonl.gz: the same row format as the dense table.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import ptxas_truth as pt  # noqa: E402

from warpsim.tensorcore.sparse import iter_sparse_instructions  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "data" / "ptxas_truth_sparse.jsonl.gz"
TARGETS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_110a",
           "sm_120", "sm_120a", "sm_120f", "sm_121a", "sm_121f")


def canonical() -> list[str]:
    out = []
    for ins in iter_sparse_instructions():
        out.append(ins.text)
        if ins.kind:  # the plain .sp spelling, which ptxas should reject for kind:: forms
            out.append(ins.text.replace("mma.sp::ordered_metadata.", "mma.sp.", 1))
    return list(dict.fromkeys(out))


def generate(seed: int = 2026) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    cands = [(s, "canonical") for s in canonical()]
    for s, _ in list(cands):
        if rng.random() < 0.35:
            cands += [(m, c) for m, c in pt._mutations(s, rng) if rng.random() < 0.5]
        toks = s.split(".")
        sp = toks[1]
        rest = toks[:1] + toks[2:]
        pos = rng.randrange(2, len(rest) + 1)  # the sparse qualifier elsewhere
        cands.append((".".join(rest[:pos] + [sp] + rest[pos:]), "sp-position"))
    cands += [("mma.sp::metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "misspell"),
              ("mma.sp.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "duplicate"),
              ("mma.sp.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
               "duplicate")]
    try:
        table = pt.read_table(pt.DEFAULT_OUT)
        cands += [(s, "from-dense-table") for s in table.rows if pt._sparse(s)]
    except OSError:
        pass
    seen: dict[str, str] = {}
    for s, c in cands:
        seen.setdefault(s, c)
    return sorted(seen.items())


def _write(rows: list[dict], build: str, path: Path) -> None:
    """The sparse table: a meta line, then {"s", "cat", "ok": [targets], "err": {target: first
    error}, "sel": {target: [selectors]}} per string (read by tests/test_sparse.py)."""
    import gzip
    import json

    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({"meta": {"ptxas": build, "targets": list(TARGETS), "rows": len(rows)}})
                 + "\n")
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--ptxas", default=None, help="the ptxas to label with (default: ptxas 13.0 on "
                    "the PATH, the one the stored table was made with)")
    args = ap.parse_args(argv)
    from warpsim.tools import ptxas as ptxas_mod

    px = ptxas_mod.find_ptxas(args.ptxas or __import__("shutil").which("ptxas"))
    if px is None:
        ap.error("no ptxas found")
    lab = pt.Labeller(px, (9, 0) if px.cuda == (13, 0) else px.max_ptx)
    cands = generate()
    print(f"{len(cands)} candidates", file=sys.stderr)
    strings = [s for s, _ in cands]
    verdicts = pt.label(lab, strings, TARGETS, args.jobs)
    rows = [{"s": s, "cat": c, "ok": [t for t in TARGETS if verdicts[t][s][0]],
             "err": {t: verdicts[t][s][1] for t in TARGETS if not verdicts[t][s][0]}}
            for s, c in cands]
    canon = [s for s, c in cands if c == "canonical"]
    sel: dict[str, dict[str, list[int]]] = {s: {} for s in canon}
    for f in range(4):
        ptxas_mod.SPARSE_SELECTOR = f  # the selector render() writes into each operand list
        res = pt.label(lab, canon, TARGETS, args.jobs, log=open("/dev/null", "w"))
        for t, by_s in res.items():
            for s, (ok, _) in by_s.items():
                if ok:
                    sel[s].setdefault(t, []).append(f)
    ptxas_mod.SPARSE_SELECTOR = 0
    for r in rows:
        if r["s"] in sel:
            r["sel"] = sel[r["s"]]
    _write(rows, px.build, Path(args.output))
    print(f"wrote {len(rows)} rows x {len(TARGETS)} targets to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
