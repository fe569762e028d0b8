"""ptxas verdicts on the interpreter's own instruction forms (data movement, bit ops, warp
exchanges, matrix moves, control): writes tests/data/ptxas_interp_truth.json, which
tests/test_ptx_legality.py checks warpsim's decoder against.

    python tools/ptx_interp_legality.py [--ptxas ptxas]    (ptxas 13.0, sm_90, PTX 8.7)
"""
import argparse
import itertools
import json
import subprocess
import tempfile
from pathlib import Path

DECL = ".reg .b16 %h<9>; .reg .b32 %r<9>; .reg .b64 %rd<9>; .reg .f32 %f<9>; .reg .pred %p<9>; .reg .b8 %b<9>;"
R = {16: "%h", 32: "%r", 64: "%rd", 1: "%p"}


def candidates() -> list[str]:
    cands = []
    for op in ("and", "or", "xor", "not", "cnot", "shl", "shr", "brev", "popc", "clz", "bfind", "bfe", "bfi"):
        for t, w in (("pred",1),("b16",16),("b32",32),("b64",64),("u16",16),("u32",32),("u64",64),("s16",16),("s32",32),("s64",64)):
            r = R[w]
            if op in ("and","or","xor"): s = f"{op}.{t} {r}1, {r}2, {r}3;"
            elif op in ("not","cnot","brev"): s = f"{op}.{t} {r}1, {r}2;"
            elif op in ("popc","clz","bfind"): s = f"{op}.{t} %r1, {r}2;"
            elif op in ("shl","shr"): s = f"{op}.{t} {r}1, {r}2, %r3;"
            elif op == "bfe": s = f"bfe.{t} {r}1, {r}2, %r3, %r4;"
            else: s = f"bfi.{t} {r}1, {r}2, {r}3, %r4, %r5;"
            cands.append(s)
    for m in ("", ".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16"):
        cands.append(f"prmt.b32{m} %r1, %r2, %r3, %r4;")
    for d in ("l", "r"):
        for mode in ("wrap", "clamp"):
            for t in ("b32", "u32", "s32"):
                cands.append(f"shf.{d}.{mode}.{t} %r1, %r2, %r3, %r4;")
    for mode in ("up","down","bfly","idx"):
        cands.append(f"shfl.sync.{mode}.b32 %r1|%p1, %r2, %r3, %r4, 0xffffffff;")
        cands.append(f"shfl.sync.{mode}.u32 %r1, %r2, %r3, %r4, 0xffffffff;")
    for mode, t in itertools.product(("all","any","uni","ballot"), ("pred","b32")):
        cands.append(f"vote.sync.{mode}.{t} {'%r1' if t=='b32' else '%p1'}, %p2, 0xffffffff;")
    for op, t in itertools.product(("add","min","max","and","or","xor"), ("u32","s32","b32")):
        cands.append(f"redux.sync.{op}.{t} %r1, %r2, 0xffffffff;")
    for mode, t in itertools.product(("any","all"), ("b32","b64")):
        r = "%rd2" if t == "b64" else "%r2"
        cands.append(f"match.sync.{mode}.{t} %r1, {r}, 0xffffffff;")
    for sp in ("shared","global","local","const","param"):
        for t in ("u32","u64"):
            r = "%rd" if t == "u64" else "%r"
            cands.append(f"cvta.{sp}.{t} {r}1, {r}2;"); cands.append(f"cvta.to.{sp}.{t} {r}1, {r}2;")
    for sp in ("shared","global","local",""):
        for v in ("", ".v2", ".v4"):
            for t, w in (("b8",32),("u8",32),("s8",32),("b16",16),("u16",16),("s16",32),("b32",32),("u32",32),("f32",32),("b64",64),("u64",64),("f64",64)):
                r = R[w] if t != "f32" else "%f"
                n = {"": 1, ".v2": 2, ".v4": 4}[v]
                if n == 1: dst = f"{r}1"
                else: dst = "{" + ", ".join(f"{r}{i+1}" for i in range(n)) + "}"
                spc = f".{sp}" if sp else ""
                cands.append(f"ld{spc}{v}.{t} {dst}, [%rd5];")
                cands.append(f"st{spc}{v}.{t} [%rd5], {dst};")
    for n in (1, 2, 4):
        for tr in ("", ".trans"):
            regs = "{" + ", ".join(f"%r{i+1}" for i in range(n)) + "}"
            cands.append(f"ldmatrix.sync.aligned.m8n8.x{n}{tr}.shared.b16 {regs}, [%r5];")
            cands.append(f"stmatrix.sync.aligned.m8n8.x{n}{tr}.shared.b16 [%r5], {regs};")
            cands.append(f"ldmatrix.sync.aligned.m8n8.x{n}{tr}.b16 {regs}, [%rd5];")
    cands += ["movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;", "movmatrix.sync.aligned.m8n8.b16 %r1, %r2;",
              "cp.async.ca.shared.global [%r1], [%rd1], 4;", "cp.async.cg.shared.global [%r1], [%rd1], 16;",
              "cp.async.cg.shared.global [%r1], [%rd1], 8;", "cp.async.ca.shared.global [%r1], [%rd1], 16, %r2;",
              "cp.async.ca.shared.global [%r1], [%rd1], 16, %p1;", "cp.async.commit_group;", "cp.async.wait_group 1;",
              "cp.async.wait_all;", "activemask.b32 %r1;", "bar.warp.sync 0xffffffff;", "membar.gl;", "membar.cta;",
              "fence.acq_rel.gpu;", "fence.sc.sys;", "lop3.b32 %r1, %r2, %r3, %r4, 0x96;", "lop3.or.b32 %r1|%p1, %r2, %r3, %r4, 0x96, %p2;",
              "mov.b64 %rd1, {%r1, %r2};", "mov.b64 %rd1, {%h1, %h2, %h3, %h4};", "mov.b32 %r1, {%h1, %h2};", "mov.b32 {%h1, %h2}, %r1;",
              "mov.b16 {%b1, %b2}, %h1;", "mov.u32 %r1, %lanemask_lt;", "mov.u32 %r1, %warpid;", "mov.u64 %rd1, %tid.x;",
              "bar.sync 0;", "bar.sync 1, 64;", "barrier.sync 0;", "barrier.sync.aligned 0;", "bar.arrive 1, 64;"]
    return cands


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ptxas", default="ptxas")
    a = p.parse_args()
    out = []
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "t.ptx"
        for s in candidates():
            f.write_text(f".version 8.7\n.target sm_90\n.address_size 64\n.visible .entry k() {{\n"
                         f" {DECL}\n {s}\n ret;\n}}\n")
            r = subprocess.run([a.ptxas, "-arch=sm_90", str(f), "-o", str(Path(d) / "t.cubin")],
                               capture_output=True, text=True)
            out.append({"ptx": s, "ok": r.returncode == 0,
                        "msg": "" if r.returncode == 0 else r.stderr.strip().splitlines()[0][:160]})
    path = Path(__file__).resolve().parents[1] / "tests" / "data" / "ptxas_interp_truth.json"
    path.write_text(json.dumps({"decl": DECL, "arch": "sm_90", "ptxas": "13.0", "forms": out}, indent=0))
    print(f"{len(out)} forms, {sum(o['ok'] for o in out)} accepted -> {path}")


if __name__ == "__main__":
    main()
