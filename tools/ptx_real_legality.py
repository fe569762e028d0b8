"""ptxas verdicts on the instruction forms issue 19 added (carry chains, mul24/mad24,
match.{any,all}.sync, mov.pred with an immediate, one-element vectors, .b128, redux.sync .f32,
three-input min/max) per target and PTX ISA version: writes tests/data/ptxas_real_truth.json.gz,
which tests/test_real_ptx.py checks warpsim's decoder against (at the newest version, per target).

    python tools/ptx_real_legality.py [--ptxas PTXAS]    (ptxas on the PATH by default; the committed table: 13.0)
"""
import argparse
import json
import subprocess
import tempfile
from pathlib import Path

DECL = (".reg .b16 %h<9>; .reg .b32 %r<9>; .reg .b64 %rd<9>; .reg .f32 %f<9>; .reg .pred %p<9>; "
        ".reg .b128 %q<4>;")
DECL_OLD = ".reg .b16 %h<9>; .reg .b32 %r<9>; .reg .b64 %rd<9>; .reg .f32 %f<9>; .reg .pred %p<9>;"
TARGETS = ("sm_80", "sm_90", "sm_90a", "sm_100a", "sm_120")
VERSIONS = ("8.0", "8.3", "8.6", "8.8", "9.0")


def candidates() -> list[str]:
    c = []
    for t, r in (("u32", "%r"), ("s32", "%r"), ("u64", "%rd"), ("s64", "%rd"), ("b32", "%r"), ("u16", "%h")):
        c += [f"add.cc.{t} {r}1, {r}2, {r}3;", f"addc.{t} {r}1, {r}2, {r}3;", f"addc.cc.{t} {r}1, {r}2, {r}3;",
              f"sub.cc.{t} {r}1, {r}2, {r}3;", f"subc.{t} {r}1, {r}2, {r}3;", f"subc.cc.{t} {r}1, {r}2, 1;",
              f"mad.lo.cc.{t} {r}1, {r}2, {r}3, {r}4;", f"mad.hi.cc.{t} {r}1, {r}2, {r}3, {r}4;",
              f"madc.lo.{t} {r}1, {r}2, {r}3, {r}4;", f"madc.hi.cc.{t} {r}1, {r}2, {r}3, {r}4;"]
    c += ["add.cc.sat.s32 %r1, %r2, %r3;", "madc.cc.u32 %r1, %r2, %r3, %r4;", "mad.cc.lo.u32 %r1, %r2, %r3, %r4;",
          "madc.wide.u32 %rd1, %r2, %r3, %rd4;"]
    for op in ("mul24", "mad24"):
        for m in ("lo", "hi"):
            for t, r in (("u32", "%r"), ("s32", "%r"), ("u64", "%rd")):
                extra = f", {r}4" if op == "mad24" else ""
                c.append(f"{op}.{m}.{t} {r}1, {r}2, {r}3{extra};")
    c += ["mad24.hi.sat.s32 %r1, %r2, %r3, %r4;", "mad24.lo.sat.s32 %r1, %r2, %r3, %r4;",
          "mad24.hi.sat.u32 %r1, %r2, %r3, %r4;"]
    for mode in ("any", "all"):
        for t, r in (("b32", "%r2"), ("b64", "%rd2")):
            c += [f"match.{mode}.sync.{t} %r1, {r}, 0xffffffff;", f"match.sync.{mode}.{t} %r1, {r}, 0xffffffff;"]
    c += ["match.all.sync.b32 %r1|%p1, %r2, 0xffffffff;", "match.any.sync.b32 %r1|%p1, %r2, 0xffffffff;"]
    c += ["mov.pred %p1, 0;", "mov.pred %p1, 1;", "mov.pred %p1, 2;", "mov.pred %p1, -1;", "mov.pred %p1, 1.0;"]
    c += ["ld.global.b32 {%r1}, [%rd1];", "st.global.b32 [%rd1], {%r1};", "ld.shared.u16 {%h1}, [%rd1];",
          "mov.b32 {%r1}, %r2;", "mov.b32 %r1, {%r2};", "ld.global.v1.b32 {%r1}, [%rd1];",
          "add.s32 {%r1}, %r2, %r3;", "cvt.u32.u64 {%r1}, %rd1;", "atom.global.add.u32 {%r1}, [%rd1], 1;",
          "ld.global.b32 {%r1, %r2}, [%rd1];"]
    c += ["ld.global.b128 %q1, [%rd1];", "st.global.b128 [%rd1], %q1;", "ld.shared.b128 %q1, [%rd1];",
          "ld.b128 %q1, [%rd1];", "mov.b128 %q1, %q2;", "mov.b128 {%rd1, %rd2}, %q1;", "mov.b128 %q1, {%rd1, %rd2};",
          "ld.global.v2.b128 {%q1, %q2}, [%rd1];", "ld.global.v2.b64 {%rd1, %rd2}, [%rd1];"]
    for op in ("min", "max"):
        for ext in ("", ".abs", ".NaN", ".abs.NaN"):
            c.append(f"redux.sync.{op}{ext}.f32 %f1, %f2, 0xffffffff;")
    c += ["redux.sync.add.f32 %f1, %f2, 0xffffffff;"]
    for op in ("min", "max"):
        c += [f"{op}.f32 %f1, %f2, %f3, %f4;", f"{op}.NaN.f32 %f1, %f2, %f3, %f4;", f"{op}.ftz.f32 %f1, %f2, %f3, %f4;",
              f"{op}.s32 %r1, %r2, %r3, %r4;", f"{op}.u32 %r1, %r2, %r3, %r4;", f"{op}.f16 %h1, %h2, %h3, %h4;",
              f"{op}.xorsign.abs.f32 %f1, %f2, %f3, %f4;"]
    return c


def main() -> None:
    p = argparse.ArgumentParser()
    default = "ptxas"
    try:
        import nvidia.cu13  # noqa: F401  (the nvidia-cuda-nvcc 13.5 wheel)
        import os
        import nvidia
        cand = Path(nvidia.__path__[0]) / "cu13" / "bin" / "ptxas"
        if cand.exists():
            default = str(cand)
    except Exception:
        pass
    p.add_argument("--ptxas", default=default)
    a = p.parse_args()
    ver = subprocess.run([a.ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    out = []
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "t.ptx"
        for s in candidates():
            for target in TARGETS:
                for v in VERSIONS:
                    decl = DECL if v >= "8.3" else DECL_OLD
                    if v < "8.3" and "b128" in s or v < "8.6" and target == "sm_100a" or \
                            v < "8.8" and target == "sm_120":
                        continue
                    f.write_text(f".version {v}\n.target {target}\n.address_size 64\n.visible .entry k() {{\n"
                                 f" {decl}\n {s}\n ret;\n}}\n")
                    r = subprocess.run([a.ptxas, f"-arch={target}", str(f), "-o", str(Path(d) / "t.cubin")],
                                       capture_output=True, text=True)
                    out.append({"ptx": s, "arch": target, "version": v, "ok": r.returncode == 0,
                                "msg": "" if r.returncode == 0 else r.stderr.strip().splitlines()[0][:160]})
    path = Path(__file__).resolve().parents[1] / "tests" / "data" / "ptxas_real_truth.json.gz"
    import gzip
    with gzip.open(path, "wt") as fh:
        json.dump({"decl": DECL, "decl_old": DECL_OLD, "ptxas": ver, "forms": out}, fh, separators=(",", ":"))
    print(f"{len(out)} verdicts, {sum(o['ok'] for o in out)} accepted -> {path}")


if __name__ == "__main__":
    main()
