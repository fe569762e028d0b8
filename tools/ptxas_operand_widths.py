"""ptxas verdicts on register operands of the wrong width, family by family: every register
operand of a legal base statement replaced, one at a time, by a register of each other width
(.b16 %h, .b32 %r, .b64 %rd).  Writes tests/data/ptxas_operand_widths.json.gz, which
tests/test_hardening_kernel.py checks warpsim's compiler against (refuse what ptxas refuses,
accept what it accepts).

    python tools/ptxas_operand_widths.py [--ptxas ptxas] [--jobs 2]   (ptxas 13.0, sm_90, PTX 8.7)
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DECL = (".reg .b16 %h<9>; .reg .b32 %r<9>; .reg .b64 %rd<9>; .reg .f32 %f<9>; .reg .f64 %fd<9>; "
        ".reg .pred %p<9>;")
WIDTH = {"%h": 16, "%r": 32, "%rd": 64, "%f": 32, "%fd": 64}
OTHER = {16: ("%r", "%rd"), 32: ("%h", "%rd"), 64: ("%h", "%r")}
_REG = re.compile(r"%(rd|fd|h|r|f)(\d)\b")

#: Legal statements (sm_90), one or more per family; every register in them is replaced.
BASE = """
add.u32 %r1, %r2, %r3; add.s64 %rd1, %rd2, %rd3; add.u16 %h1, %h2, %h3; sub.s32 %r1, %r2, %r3;
add.cc.u32 %r1, %r2, %r3; addc.u32 %r1, %r2, %r3; sub.cc.u64 %rd1, %rd2, %rd3;
mul.lo.u32 %r1, %r2, %r3; mul.hi.s32 %r1, %r2, %r3; mul.lo.u64 %rd1, %rd2, %rd3;
mul.wide.u32 %rd1, %r2, %r3; mul.wide.s16 %r1, %h2, %h3;
mad.lo.u32 %r1, %r2, %r3, %r4; mad.hi.s64 %rd1, %rd2, %rd3, %rd4; mad.wide.u32 %rd1, %r2, %r3, %rd4;
mul24.lo.u32 %r1, %r2, %r3; mad24.lo.s32 %r1, %r2, %r3, %r4; sad.u32 %r1, %r2, %r3, %r4;
div.u32 %r1, %r2, %r3; div.s64 %rd1, %rd2, %rd3; rem.s32 %r1, %r2, %r3; rem.u64 %rd1, %rd2, %rd3;
abs.s32 %r1, %r2; neg.s64 %rd1, %rd2; min.u32 %r1, %r2, %r3; max.s64 %rd1, %rd2, %rd3; min.s16 %h1, %h2, %h3;
and.b32 %r1, %r2, %r3; or.b64 %rd1, %rd2, %rd3; xor.b16 %h1, %h2, %h3; not.b32 %r1, %r2; cnot.b64 %rd1, %rd2;
lop3.b32 %r1, %r2, %r3, %r4, 0x96;
shl.b32 %r1, %r2, %r3; shl.b64 %rd1, %rd2, %r3; shr.u32 %r1, %r2, %r3; shr.s64 %rd1, %rd2, %r3;
shr.u16 %h1, %h2, %r3; shf.l.wrap.b32 %r1, %r2, %r3, %r4; shf.r.clamp.b32 %r1, %r2, %r3, %r4;
bfe.u32 %r1, %r2, %r3, %r4; bfe.s64 %rd1, %rd2, %r3, %r4; bfi.b32 %r1, %r2, %r3, %r4, %r5;
bfi.b64 %rd1, %rd2, %rd3, %r4, %r5;
popc.b32 %r1, %r2; popc.b64 %r1, %rd2; clz.b32 %r1, %r2; clz.b64 %r1, %rd2; brev.b32 %r1, %r2;
brev.b64 %rd1, %rd2; bfind.u32 %r1, %r2; bfind.s64 %r1, %rd2; fns.b32 %r1, %r2, %r3, %r4;
prmt.b32 %r1, %r2, %r3, %r4; prmt.b32.f4e %r1, %r2, %r3, %r4;
dp4a.u32.u32 %r1, %r2, %r3, %r4; dp2a.lo.s32.s32 %r1, %r2, %r3, %r4;
setp.eq.u32 %p1, %r2, %r3; setp.lt.s64 %p1, %rd2, %rd3; setp.ne.b16 %p1, %h2, %h3;
setp.gt.f32 %p1, %f2, %f3; setp.eq.f64 %p1, %fd2, %fd3; setp.lt.and.s32 %p1|%p2, %r2, %r3, %p3;
set.eq.u32.u32 %r1, %r2, %r3; set.lt.u32.s64 %r1, %rd2, %rd3; set.gt.f32.f32 %f1, %f2, %f3;
selp.b32 %r1, %r2, %r3, %p1; selp.b64 %rd1, %rd2, %rd3, %p1; selp.f32 %f1, %f2, %f3, %p1;
selp.b16 %h1, %h2, %h3, %p1;
slct.u32.s32 %r1, %r2, %r3, %r4; slct.b64.s32 %rd1, %rd2, %rd3, %r4; slct.f32.f32 %f1, %f2, %f3, %f4;
add.f32 %f1, %f2, %f3; add.rn.f64 %fd1, %fd2, %fd3; sub.ftz.f32 %f1, %f2, %f3; mul.rz.f32 %f1, %f2, %f3;
mul.f64 %fd1, %fd2, %fd3; fma.rn.f32 %f1, %f2, %f3, %f4; fma.rn.f64 %fd1, %fd2, %fd3, %fd4;
mad.rn.f32 %f1, %f2, %f3, %f4;
div.rn.f32 %f1, %f2, %f3; div.approx.f32 %f1, %f2, %f3; div.full.f32 %f1, %f2, %f3; div.rn.f64 %fd1, %fd2, %fd3;
rcp.rn.f32 %f1, %f2; rcp.approx.ftz.f64 %fd1, %fd2; rcp.rn.f64 %fd1, %fd2;
sqrt.rn.f32 %f1, %f2; sqrt.approx.f32 %f1, %f2; sqrt.rn.f64 %fd1, %fd2; rsqrt.approx.f32 %f1, %f2;
rsqrt.approx.f64 %fd1, %fd2;
sin.approx.f32 %f1, %f2; cos.approx.f32 %f1, %f2; ex2.approx.f32 %f1, %f2; lg2.approx.f32 %f1, %f2;
tanh.approx.f32 %f1, %f2; ex2.approx.f16 %h1, %h2;
abs.f32 %f1, %f2; neg.f64 %fd1, %fd2; min.f32 %f1, %f2, %f3; max.f64 %fd1, %fd2, %fd3;
copysign.f32 %f1, %f2, %f3; copysign.f64 %fd1, %fd2, %fd3;
testp.finite.f32 %p1, %f2; testp.notanumber.f64 %p1, %fd2; testp.subnormal.f32 %p1, %f2;
add.f16 %h1, %h2, %h3; mul.rn.f16 %h1, %h2, %h3; fma.rn.f16 %h1, %h2, %h3, %h4; add.f16x2 %r1, %r2, %r3;
fma.rn.f16x2 %r1, %r2, %r3, %r4; fma.rn.bf16x2 %r1, %r2, %r3, %r4; max.bf16 %h1, %h2, %h3;
neg.f16x2 %r1, %r2; abs.bf16 %h1, %h2;
cvt.u32.u16 %r1, %h2; cvt.u16.u32 %h1, %r2; cvt.u64.u32 %rd1, %r2; cvt.u32.u64 %r1, %rd2;
cvt.s64.s16 %rd1, %h2; cvt.u8.u32 %h1, %r2; cvt.s32.s8 %r1, %r2;
cvt.rn.f32.f64 %f1, %fd2; cvt.f64.f32 %fd1, %f2; cvt.rn.f32.s32 %f1, %r2; cvt.rn.f64.u64 %fd1, %rd2;
cvt.rzi.s32.f32 %r1, %f2; cvt.rni.u64.f64 %rd1, %fd2; cvt.rn.f16.f32 %h1, %f2; cvt.f32.f16 %f1, %h2;
cvt.rn.f16x2.f32 %r1, %f2, %f3; cvt.rn.bf16.f32 %h1, %f2; cvt.rn.satfinite.e4m3x2.f32 %h1, %f2, %f3;
cvt.rni.f32.f32 %f1, %f2;
mov.b32 %r1, %r2; mov.u64 %rd1, %rd2; mov.f32 %f1, %f2; mov.f64 %fd1, %fd2; mov.b16 %h1, %h2;
mov.b64 %rd1, {%r1, %r2}; mov.b32 {%h1, %h2}, %r1; mov.b64 {%r1, %r2}, %rd1; mov.b32 %r1, {%h1, %h2};
cvta.to.global.u64 %rd1, %rd2; cvta.shared.u64 %rd1, %rd2;
ld.global.u32 %r1, [%rd2]; ld.global.u64 %rd1, [%rd2]; ld.global.u8 %r1, [%rd2]; ld.global.s16 %h1, [%rd2];
ld.global.f32 %f1, [%rd2]; ld.global.f64 %fd1, [%rd2]; ld.global.v2.u32 {%r1, %r2}, [%rd3];
ld.global.v4.b16 {%h1, %h2, %h3, %h4}, [%rd5]; ld.shared.u32 %r1, [%r2]; ld.shared.u32 %r1, [%rd2];
ld.local.u32 %r1, [%rd2]; ld.u32 %r1, [%rd2]; ld.global.u32 %r1, [%rd2+8]; ld.shared.b64 %rd1, [%r2];
st.global.u32 [%rd1], %r2; st.global.u64 [%rd1], %rd2; st.global.u8 [%rd1], %r2; st.global.u16 [%rd1], %h2;
st.global.f32 [%rd1], %f2; st.local.f64 [%rd1], %fd2; st.shared.b32 [%r1], %r2; st.shared.b32 [%rd1], %r2;
st.global.v2.b64 [%rd1], {%rd2, %rd3}; st.u32 [%rd1], %r2;
ld.global.v2.u8 {%h1, %h2}, [%rd3]; ld.global.v2.s8 {%h1, %h2}, [%rd3]; ld.global.v2.b16 {%h1, %h2}, [%rd3];
ld.global.v2.u16 {%h1, %h2}, [%rd3]; ld.global.v2.s16 {%h1, %h2}, [%rd3]; ld.global.v2.s32 {%r1, %r2}, [%rd3];
ld.global.v2.f32 {%f1, %f2}, [%rd3]; ld.global.v2.u64 {%rd1, %rd2}, [%rd3]; ld.global.v4.s8 {%h1, %h2, %h3, %h4}, [%rd5];
st.global.v2.u8 [%rd1], {%h2, %h3}; st.global.v2.s8 [%rd1], {%h2, %h3}; st.global.v2.b16 [%rd1], {%h2, %h3};
st.global.v2.u16 [%rd1], {%h2, %h3}; st.global.v2.s16 [%rd1], {%h2, %h3}; st.global.v2.s32 [%rd1], {%r2, %r3};
st.global.v2.f32 [%rd1], {%f2, %f3}; st.global.v4.u32 [%rd1], {%r2, %r3, %r4, %r5};
ld.global.s8 %h1, [%rd2]; ld.global.u16 %h1, [%rd2]; ld.global.s32 %r1, [%rd2]; st.global.s16 [%rd1], %h2;
st.global.s8 [%rd1], %h2; ld.global.v2.u32 {%rd1, %rd2}, [%rd3]; st.global.v2.b16 [%rd3], {%r1, %r2};
ld.global.v2.u8 {%rd1, %rd2}, [%rd3]; ld.global.v4.u8 {%r1, %r2, %r3, %r4}, [%rd5];
atom.global.add.u32 %r1, [%rd2], %r3; atom.global.add.u64 %rd1, [%rd2], %rd3;
atom.global.cas.b32 %r1, [%rd2], %r3, %r4; atom.shared.exch.b64 %rd1, [%r2], %rd3;
atom.global.add.f32 %f1, [%rd2], %f3; atom.shared.add.u32 %r1, [%r2], %r3; atom.global.inc.u32 %r1, [%rd2], %r3;
atom.global.max.s64 %rd1, [%rd2], %rd3; atom.global.cas.b64 %rd1, [%rd2], %rd3, %rd4;
red.global.add.u32 [%rd1], %r2; red.global.max.s64 [%rd1], %rd2; red.shared.add.f32 [%r1], %f2;
red.global.add.f64 [%rd1], %fd2;
shfl.sync.idx.b32 %r1, %r2, %r3, %r4, %r5; shfl.sync.bfly.b32 %r1|%p1, %r2, %r3, %r4, %r5;
shfl.sync.down.b32 %r1, %f2, 1, 31, 0xffffffff;
vote.sync.ballot.b32 %r1, %p1, %r2; vote.sync.all.pred %p1, %p2, %r3; redux.sync.add.u32 %r1, %r2, %r3;
redux.sync.max.s32 %r1, %r2, %r3; match.sync.any.b32 %r1, %r2, %r3; match.sync.any.b64 %r1, %rd2, %r3;
match.sync.all.b32 %r1|%p1, %r2, %r3;
activemask.b32 %r1; bar.warp.sync %r1; bar.sync %r1; bar.sync %r1, %r2; barrier.sync %r1;
"""


def base_statements() -> list[str]:
    return [s.strip() + ";" for s in BASE.replace("\n", " ").split(";") if s.strip()]


def mutations(stmt: str) -> list[dict]:
    """The statement with each register replaced, one at a time, by each other width."""
    out = []
    for k, m in enumerate(_REG.finditer(stmt)):
        pre = "%" + m.group(1)
        w = WIDTH[pre]
        for alt in OTHER[w]:
            new = stmt[:m.start()] + f"{alt}{m.group(2)}" + stmt[m.end():]
            out.append({"base": stmt, "ptx": new, "reg": k, "was": m.group(0), "now": f"{alt}{m.group(2)}",
                        "from": w, "to": WIDTH[alt]})
    return out


def verdict(ptxas: str, stmt: str, tmp: Path, i: int) -> tuple[bool, str]:
    f = tmp / f"t{i}.ptx"
    f.write_text(f".version 8.7\n.target sm_90\n.address_size 64\n.visible .entry k() {{\n"
                 f" {DECL}\n {stmt}\n ret;\n}}\n")
    r = subprocess.run([ptxas, "-arch=sm_90", str(f), "-o", str(tmp / f"t{i}.cubin")],
                       capture_output=True, text=True)
    msg = "" if r.returncode == 0 else re.sub(r"^ptxas \S+, line \d+; ", "", r.stderr.strip().splitlines()[0])[:160]
    return r.returncode == 0, msg


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ptxas", default="ptxas")
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args()
    version = subprocess.run([a.ptxas, "--version"], capture_output=True, text=True).stdout
    version = re.search(r"release (\d+\.\d+)", version).group(1)
    rows = []
    for b in base_statements():
        rows.append({"base": b, "ptx": b, "reg": None})
        rows.extend(mutations(b))
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(a.jobs) as pool:
        got = list(pool.map(lambda ir: verdict(a.ptxas, ir[1]["ptx"], Path(d), ir[0]), enumerate(rows)))
    for r, (ok, msg) in zip(rows, got):
        r["ok"], r["msg"] = ok, msg
    bad = [r["ptx"] for r in rows if r["reg"] is None and not r["ok"]]
    if bad:
        raise SystemExit(f"base statements ptxas refuses: {bad}")
    path = Path(__file__).resolve().parents[1] / "tests" / "data" / "ptxas_operand_widths.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"decl": DECL, "arch": "sm_90", "version": "8.7", "ptxas": version, "rows": rows}, f, indent=0)
    muts = [r for r in rows if r["reg"] is not None]
    print(f"{len(rows) - len(muts)} base statements, {len(muts)} mutations, "
          f"{sum(r['ok'] for r in muts)} accepted by ptxas {version} -> {path}")


if __name__ == "__main__":
    main()
