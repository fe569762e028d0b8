#!/usr/bin/env python3
"""Build and label the ptxas truth table for ``tcgen05`` statements.

    python tools/ptxas_truth_tcgen05.py [-o FILE] [--ptxas PATH] [-j 2]

Candidates are whole statements (opcode and operand list, registers ``%r`` .b32, ``%rd`` .b64,
``%rs`` .b16, ``%p`` .pred): every documented qualifier combination of tcgen05.alloc, dealloc,
relinquish_alloc_permit, mma (.sp, .ws, every kind and scale-vector spelling, A from a
descriptor or TMEM, with and without disable-output-lane and scale-input-d, collector
qualifiers), commit, ld, st (every shape, .num, pack/unpack), wait, fence, cp and shift, plus
mutations: wrong operand counts, missing or repeated qualifiers, illegal immediates.  Each is
labelled by ptxas at every (PTX ISA version, target) of ``VERSIONS`` x ``TARGETS``: many
statements a module, errors attributed by line; a module with a syntax error is re-run with the
lines after it on their own, and the accepted lines are re-assembled together as a check.

Output tests/data/ptxas_truth_tcgen05.jsonl.gz: a meta line, then one row per statement,
{"s": statement, "cat": category, "ok": {"9.5": [targets], ...}, "err": first error per
version (on the first rejecting target)}.  Read by tests/test_tcgen05_legality.py.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warpsim.tools import ptxas as ptxas_mod  # noqa: E402
from warpsim.facts.tcgen05 import CP_DECOMPRESS, CP_SHAPES, LDST_NUMS, LDST_SHAPES  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "data" / "ptxas_truth_tcgen05.jsonl.gz"
TARGETS = ("sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_107a", "sm_110a",
           "sm_110f", "sm_120a", "sm_121a")
VERSIONS = ("9.0", "9.5")
BATCH = 300
_ERR = re.compile(r"line (\d+); (?:error|fatal)\s*:\s*(.*)")


def _vec(prefix: str, n: int, start: int = 10) -> str:
    return "{" + ", ".join(f"%{prefix}{start + i}" for i in range(n)) + "}"


def _mma() -> list[tuple[str, str]]:
    out = []
    kinds = ("f16", "tf32", "f8f6f4", "i8")
    bs = {"mxf8f6f4": ("", ".scale_vec::1X", ".block32", ".scale_vec::2X", ".block16"),
          "mxf4": ("", ".scale_vec::2X", ".block32", ".scale_vec::1X", ".scale_vec::4X", ".block16"),
          "mxf4nvf4": ("", ".scale_vec::2X", ".scale_vec::4X", ".block16", ".block32",
                       ".scale_vec::1X")}
    for sp, ws, cg in itertools.product(("", ".sp"), ("", ".ws"), (1, 2)):
        head = f"tcgen05.mma{sp}{ws}.cta_group::{cg}"
        meta = ", [%r3]" if sp else ""
        lanes = 4 if cg == 1 else 8
        for kind in kinds:
            for a in ("%rd1", "[%r1]"):
                base = f"{head}.kind::{kind} [%r2], {a}, %rd2{meta}, %r4"
                if ws:
                    out.append((f"{base}, %p1;", "mma-ws"))
                    out.append((f"{base}, %p1, %rd3;", "mma-ws"))
                    for col in ("b0", "b3"):
                        for u in ("fill", "use", "lastuse", "discard"):
                            out.append((f"{head}.kind::{kind}.collector::{col}::{u} [%r2], {a}, "
                                        f"%rd2{meta}, %r4, %p1;", "mma-ws-collector"))
                    out.append((f"{base}, {_vec('r', lanes)}, %p1;", "mma-ws-bad"))
                    continue
                out.append((f"{base}, %p1;", "mma"))
                out.append((f"{base}, {_vec('r', lanes)}, %p1;", "mma-disable-lane"))
                out.append((f"{base}, {_vec('r', 12 - lanes)}, %p1;", "mma-disable-lane-bad"))
                for s in (0, 15, 16):
                    out.append((f"{base}, %p1, {s};", "mma-scale-d"))
                out.append((f"{base}, {_vec('r', lanes)}, %p1, 3;", "mma-scale-d"))
                for u in ("fill", "use", "lastuse", "discard"):
                    out.append((f"{head}.kind::{kind}.collector::a::{u} [%r2], {a}, %rd2{meta}, "
                                f"%r4, %p1;", "mma-collector"))
                out.append((f"{head}.kind::{kind}.ashift [%r2], {a}, %rd2{meta}, %r4, %p1;",
                            "mma-ashift"))
                out.append((f"{head}.kind::{kind}.block_scale [%r2], {a}, %rd2{meta}, %r4, [%r5], "
                            f"[%r6], %p1;", "mma-kind-bad"))
        for kind, vecs in bs.items():
            for vec in vecs:
                for a in ("%rd1", "[%r1]"):
                    op = f"{head}.kind::{kind}.block_scale{vec}"
                    tail = f"[%r2], {a}, %rd2{meta}, %r4, [%r5], [%r6], %p1;"
                    out.append((f"{op} {tail}", "mma-block-scale"))
                    if not ws and vec in ("", ".block32"):
                        out.append((f"{head}.kind::{kind} [%r2], {a}, %rd2{meta}, %r4, %p1;",
                                    "mma-block-scale-bad"))
                        out.append((f"{op}.collector::a::fill {tail}", "mma-block-scale"))
                        out.append((f"{op} [%r2], {a}, %rd2{meta}, %r4, [%r5], [%r6], %p1, 1;",
                                    "mma-block-scale-bad"))
    out += [("tcgen05.mma.kind::f16 [%r2], %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1 [%r2], %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::3.kind::f16 [%r2], %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f64 [%r2], %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 %r2, %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %rd4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %r1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, [%r3], %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r4, 1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r4;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r4, %p1, %r5;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.kind::f16.cta_group::1 [%r2], %rd1, %rd2, %r4, %p1;", "mma-order"),
            ("tcgen05.mma.cta_group::1.kind::f16.sp [%r2], %rd1, %rd2, [%r3], %r4, %p1;", "mma-order"),
            ("tcgen05.mma.ws.sp.cta_group::1.kind::f16 [%r2], %rd1, %rd2, [%r3], %r4, %p1;", "mma-order"),
            ("tcgen05.mma.sync.aligned.cta_group::1.kind::f16 [%r2], %rd1, %rd2, %r4, %p1;", "mma-bad"),
            ("tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd2, 0x8400490, %p1;", "mma-imm")]
    return out


def _ldst() -> list[tuple[str, str]]:
    out = []
    for name, sh in LDST_SHAPES.items():
        for num in LDST_NUMS + (256,):
            for pk in ("", ".pack::16b", ".unpack::16b"):
                n = sh.regs * num
                regs = _vec("r", min(n, 128), 10) if n <= 128 else _vec("r", 128, 10)
                off = ", 16" if name == "16x32bx2" else ""
                out.append((f"tcgen05.ld.sync.aligned.{name}.x{num}{pk}.b32 {regs}, [%r1]{off};",
                            "ld"))
                upk = pk.replace("pack", "unpack") if pk == ".pack::16b" else pk.replace("unpack", "pack")
                out.append((f"tcgen05.st.sync.aligned.{name}.x{num}{upk}.b32 [%r1]{off}, {regs};",
                            "st"))
                if num in (1, 4) and not pk:
                    bad = _vec("r", n + 1, 10)
                    out.append((f"tcgen05.ld.sync.aligned.{name}.x{num}.b32 {bad}, [%r1]{off};",
                                "ld-bad"))
    out += [("tcgen05.ld.sync.aligned.16x32bx2.x1.b32 {%r10}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r10}, [%r1], 16;", "ld-bad"),
            ("tcgen05.ld.sync.aligned.16x32bx2.x1.b32 {%r10}, [%r1], %r2;", "ld-bad"),
            ("tcgen05.ld.32x32b.x1.b32 {%r10}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.b32 {%r10}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x1 {%r10}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x1.b32 %r10, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%rd1}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r10}, [%rd1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r10}, [%r1+4];", "ld-offset"),
            ("tcgen05.ld.sync.aligned.32x32b.x1.b16 {%r10}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.64x32b.x1.b32 {%r10}, [%r1];", "ld-bad"),
            ("tcgen05.ld.sync.aligned.32x32b.x3.b32 {%r10, %r11, %r12}, [%r1];", "ld-bad"),
            ("tcgen05.st.sync.aligned.32x32b.x1.b32 [%r1], {%r10};", "st"),
            ("tcgen05.st.sync.aligned.32x32b.x1.b32 [%r1], %r10;", "st-bad")]
    for w in ("ld", "st"):
        out += [(f"tcgen05.wait::{w}.sync.aligned;", "wait"), (f"tcgen05.wait::{w};", "wait-bad"),
                (f"tcgen05.wait::{w}.sync;", "wait-bad")]
    out += [("tcgen05.wait.sync.aligned;", "wait-bad"), ("tcgen05.wait::mma.sync.aligned;", "wait-bad")]
    return out


def _other() -> list[tuple[str, str]]:
    out = []
    for cg in (1, 2, 3):
        g = f".cta_group::{cg}"
        for n in (32, 64, 128, 256, 512, 0, 16, 48, 96, 1024, "%r5"):
            for sp in (".shared::cta", "", ".shared::cluster"):
                out.append((f"tcgen05.alloc{g}.sync.aligned{sp}.b32 [%r1], {n};", "alloc"))
            out.append((f"tcgen05.dealloc{g}.sync.aligned.b32 %r1, {n};", "dealloc"))
        out += [(f"tcgen05.alloc{g}.sync.aligned.shared::cta.b32 [%rd1], 32;", "alloc"),
                (f"tcgen05.alloc{g}.shared::cta.b32 [%r1], 32;", "alloc-bad"),
                (f"tcgen05.alloc{g}.sync.aligned.shared::cta.b64 [%r1], 32;", "alloc-bad"),
                (f"tcgen05.dealloc{g}.sync.aligned.b32 [%r1], 32;", "dealloc-bad"),
                (f"tcgen05.relinquish_alloc_permit{g}.sync.aligned;", "relinquish"),
                (f"tcgen05.relinquish_alloc_permit{g};", "relinquish-bad"),
                (f"tcgen05.shift{g}.down [%r1];", "shift"),
                (f"tcgen05.shift{g}.up [%r1];", "shift-bad"),
                (f"tcgen05.shift{g} [%r1];", "shift-bad")]
        for sc, mc in itertools.product(("", ".shared::cluster"), ("", ".multicast::cluster")):
            op = f"tcgen05.commit{g}.mbarrier::arrive::one{sc}{mc}.b64"
            out += [(f"{op} [%rd1];", "commit"), (f"{op} [%rd1], %rs1;", "commit"),
                    (f"{op} [%r1];", "commit")]
        out.append((f"tcgen05.commit{g}.b64 [%rd1];", "commit-bad"))
        for shape, (_, _, mcs) in CP_SHAPES.items():
            for mc in set(mcs) | {"", ".warpx4"}:
                for dc in CP_DECOMPRESS:
                    out.append((f"tcgen05.cp{g}.{shape}{mc}{dc} [%r1], %rd1;", "cp"))
        out.append((f"tcgen05.cp{g}.16x256b [%r1], %rd1;", "cp-bad"))
    out.append(("tcgen05.alloc.sync.aligned.shared::cta.b32 [%r1], 32;", "alloc-bad"))
    out += [("tcgen05.fence::before_thread_sync;", "fence"),
            ("tcgen05.fence::after_thread_sync;", "fence"),
            ("tcgen05.fence::before_thread_sync.sync.aligned;", "fence-bad"),
            ("tcgen05.fence;", "fence-bad"), ("tcgen05.fence::proxy_async;", "fence-bad")]
    return out


def generate() -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for s, c in _mma() + _ldst() + _other():
        seen.setdefault(s, c)
    return list(seen.items())


def _module(version: str, target: str, lines: list[str]) -> tuple[str, int]:
    head = [f".version {version}", f".target {target}", ".address_size 64",
            ".visible .entry k() {",
            " .reg .b32 %r<200>; .reg .b64 %rd<10>; .reg .b16 %rs<4>; .reg .pred %p<3>;"]
    return "\n".join(head + lines + [" ret;", "}", ""]), len(head) + 1


def _run(px: str, version: str, target: str, lines: list[str]) -> dict[int, str]:
    """Errors by line index (0-based into ``lines``); -1 for a module-level error."""
    text, first = _module(version, target, lines)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.ptx"
        p.write_text(text)
        r = subprocess.run([px, f"-arch={ptxas_mod.sass_target(target)}", str(p), "-o",
                            str(Path(d) / "t.cubin")], capture_output=True, text=True, timeout=600)
    errs: dict[int, str] = {}
    for ln in (r.stdout + r.stderr).splitlines():
        m = _ERR.search(ln)
        if m:
            i = int(m.group(1)) - first
            errs.setdefault(i if 0 <= i < len(lines) else -1, m.group(2).strip())
        elif "fatal" in ln and "aborted due to errors" not in ln:
            errs.setdefault(-1, ln.strip())
    if r.returncode != 0 and not errs:
        errs[-1] = (r.stderr or r.stdout).strip()[:200]
    return errs


def label_batch(px: str, version: str, target: str, lines: list[str]) -> list[str | None]:
    """None (accepted) or the first error, per line."""
    out: list[str | None] = [None] * len(lines)
    todo = list(range(len(lines)))
    while todo:
        errs = _run(px, version, target, [lines[i] for i in todo])
        if -1 in errs and len(errs) == 1:  # a module-level error: every line shares it
            if len(todo) == 1 or "target" in errs[-1] or "version" in errs[-1]:
                for i in todo:
                    out[i] = errs[-1]
                return out
            half = len(todo) // 2  # split and retry
            for part in (todo[:half], todo[half:]):
                for i, v in zip(part, label_batch(px, version, target, [lines[j] for j in part])):
                    out[i] = v
            return out
        syntax = [j for j, e in errs.items() if j >= 0 and "syntax error" in e]
        stop = min(syntax) if syntax else len(todo)
        for j, e in errs.items():
            if 0 <= j <= stop:
                out[todo[j]] = e
        todo = todo[stop + 1:]
    ok = [i for i, v in enumerate(out) if v is None]
    if ok and _run(px, version, target, [lines[i] for i in ok]):  # the check: all together
        for i in ok:  # disagreement: label each accepted line on its own
            e = _run(px, version, target, [lines[i]])
            out[i] = next(iter(e.values())) if e else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--ptxas", default=None)
    args = ap.parse_args(argv)
    px = ptxas_mod.find_ptxas(args.ptxas)
    if px is None or px.cuda < (13, 5):
        ap.error("needs ptxas 13.5 (pip install nvidia-cuda-nvcc==13.5.37)")
    cands = generate()
    strings = [s for s, _ in cands]
    print(f"{len(cands)} candidates", file=sys.stderr)
    jobs = [(v, t, i) for v in VERSIONS for t in TARGETS for i in range(0, len(strings), BATCH)]

    def work(job):
        v, t, i = job
        return job, label_batch(px.path, v, t, strings[i:i + BATCH])

    verdict: dict[tuple[str, str], list] = {}
    with ThreadPoolExecutor(args.jobs) as ex:
        for (v, t, i), res in ex.map(work, jobs):
            verdict.setdefault((v, t), [None] * len(strings))[i:i + len(res)] = res
    rows = []
    for k, (s, c) in enumerate(cands):
        ok = {v: [t for t in TARGETS if verdict[(v, t)][k] is None] for v in VERSIONS}
        err = {}
        for v in VERSIONS:
            bad = [verdict[(v, t)][k] for t in TARGETS if verdict[(v, t)][k] is not None
                   and t in ("sm_100a", "sm_110a")]
            if bad:
                err[v] = bad[0]
        rows.append({"s": s, "cat": c, "ok": ok, "err": err})
    with gzip.open(args.output, "wt") as fh:
        fh.write(json.dumps({"meta": {"ptxas": px.build, "versions": list(VERSIONS),
                                      "targets": list(TARGETS), "rows": len(rows)}}) + "\n")
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
    print(f"wrote {len(rows)} rows to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
