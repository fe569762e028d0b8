"""ptxas verdicts on the instruction forms issue 19 added (carry chains, mul24/mad24,
match.{any,all}.sync, mov.pred with an immediate, one-element vectors, .b128, redux.sync .f32,
three-input min/max) per target and PTX ISA version: writes tests/data/ptxas_real_truth.json.gz,
which tests/test_real_ptx.py checks warpsim's decoder against (at the newest version, per target).

    python tools/ptx_real_legality.py [--ptxas PTXAS] [--out FILE]
        (the nvidia-cuda-nvcc wheel's ptxas by default, else the PATH's; committed: 13.0 ->
        ptxas_real_truth.json.gz, 13.5 -> ptxas_real_truth_135.json.gz; every form is followed
        by a store of its destination)
    python tools/ptx_real_legality.py --corpus   # ptxas on every module of tests/data/real
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


_ST = {"%r": "b32", "%f": "f32", "%rd": "b64", "%h": "b16", "%q": "b128"}


def use_of_result(s: str) -> str:
    """A store of the form's destination (ptxas refuses some forms whose result is never
    used: "Result register required"), or "" where the form has none."""
    import re
    if s.startswith(("st.", "red.")):
        return ""
    m = re.match(r"\S+\s+\{?\s*(%[a-z]+)(\d+)", s)
    if not m:
        return ""
    pre, n = m.group(1), m.group(2)
    if pre == "%p":
        return f" selp.b32 %r8, 1, 0, %p{n}; st.global.b32 [%rd8], %r8;"
    return f" st.global.{_ST[pre]} [%rd8], {pre}{n};" if pre in _ST else ""


def corpus(ptxas: str, out: Path) -> None:
    """ptxas's verdict on every module of the real corpus (tests/data/real) at its own .target
    and .version: tests/test_real_ptx.py checks that warpsim decodes what ptxas accepts."""
    import gzip
    import re
    root = Path(__file__).resolve().parents[1] / "tests" / "data" / "real"
    ver = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for p in sorted(root.rglob("*.ptx*")):
            text = gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()
            arch = re.search(r"\.target\s+(sm_\w+)", text).group(1)
            f = Path(d) / "m.ptx"
            f.write_text(text)
            r = subprocess.run([ptxas, f"-arch={arch}", str(f), "-o", str(Path(d) / "m.cubin")],
                               capture_output=True, text=True)
            rows[str(p.relative_to(root))] = {"arch": arch, "ok": r.returncode == 0,
                                              "msg": "" if r.returncode == 0 else r.stderr.strip()[:300]}
            print(p.name, rows[str(p.relative_to(root))]["ok"], flush=True)
    out.write_text(json.dumps({"ptxas": ver, "modules": rows}, indent=1) + "\n")


def main() -> None:
    p = argparse.ArgumentParser()
    default = "ptxas"
    try:
        import nvidia.cu13  # noqa: F401  (the nvidia-cuda-nvcc 13.5 wheel)
        import os
        import nvidia
        for root in nvidia.__path__:
            cand = Path(root) / "cu13" / "bin" / "ptxas"
            if cand.exists():
                default = str(cand)
    except Exception:
        pass
    p.add_argument("--ptxas", default=default)
    p.add_argument("--out", default=None, help="default: tests/data/ptxas_real_truth.json.gz")
    p.add_argument("--corpus", action="store_true",
                   help="instead: ptxas on every module of tests/data/real -> tests/data/ptxas_real_corpus.json")
    a = p.parse_args()
    if a.corpus:
        corpus(a.ptxas, Path(a.out) if a.out else
               Path(__file__).resolve().parents[1] / "tests" / "data" / "ptxas_real_corpus.json")
        return
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
                                 f" {decl}\n {s}\n{use_of_result(s)}\n ret;\n}}\n")
                    r = subprocess.run([a.ptxas, f"-arch={target}", str(f), "-o", str(Path(d) / "t.cubin")],
                                       capture_output=True, text=True)
                    out.append({"ptx": s, "arch": target, "version": v, "ok": r.returncode == 0,
                                "msg": "" if r.returncode == 0 else
                                (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()[0][:160]})
    path = Path(a.out) if a.out else Path(__file__).resolve().parents[1] / "tests" / "data" / "ptxas_real_truth.json.gz"
    import gzip
    with gzip.open(path, "wt") as fh:
        json.dump({"decl": DECL, "decl_old": DECL_OLD, "ptxas": ver, "forms": out,
                   "use": "each form followed by a store of its destination (use_of_result)"},
                  fh, separators=(",", ":"))
    print(f"{len(out)} verdicts, {sum(o['ok'] for o in out)} accepted -> {path}")


if __name__ == "__main__":
    main()
