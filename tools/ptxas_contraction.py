"""Which mul + add/sub pairs ptxas contracts into one FMA: PTX patterns compiled by ptxas,
the SASS read with nvdisasm (no GPU needed), stored as tests/data/ptxas_contraction.json, which
tests/test_contract.py checks warpsim's pass (warpsim/ptx/contract.py) against.

A pattern's verdict is the number of FMA-class SASS instructions (FFMA*, DFMA, HFMA2*) it
compiles to minus the number with ``--fmad=false`` (ptxas's switch that turns contraction off):
the count of contracted add/sub instructions.  Named patterns cover the cases one by one;
``random_<seed>`` patterns are random straight-line/branching blocks of mul/add/sub/mov/neg with
several uses, checking the tie-breaking rules in bulk.

    python tools/ptxas_contraction.py build [--random 200] [--out tests/data/ptxas_contraction.json]
    python tools/ptxas_contraction.py corpus      # per kernel of tests/data/real, into the same file
    python tools/ptxas_contraction.py show PATTERN [--arch sm_90a]     # the SASS of one pattern
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

HEAD = """.version {ver}
.target {sm}
.address_size 64
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u32 n)
{{
 .reg .f32 %f<64>; .reg .f64 %fd<64>; .reg .b16 %h<64>; .reg .b32 %r<64>; .reg .b64 %rd<16>; .reg .pred %p<8>;
 ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u32 %r0, [n];
 cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
 ld.global.f32 %f1, [%rd1]; ld.global.f32 %f2, [%rd1+4]; ld.global.f32 %f3, [%rd1+8]; ld.global.f32 %f4, [%rd1+12];
 ld.global.f32 %f5, [%rd1+16]; ld.global.f32 %f6, [%rd1+20]; ld.global.f32 %f7, [%rd1+24]; ld.global.f32 %f8, [%rd1+28];
 ld.global.f64 %fd1, [%rd1+32]; ld.global.f64 %fd2, [%rd1+40]; ld.global.f64 %fd3, [%rd1+48]; ld.global.f64 %fd4, [%rd1+56];
 ld.global.b32 %r1, [%rd1+64]; ld.global.b32 %r2, [%rd1+68]; ld.global.b32 %r3, [%rd1+72]; ld.global.b32 %r4, [%rd1+76];
 ld.global.b16 %h1, [%rd1+80]; ld.global.b16 %h2, [%rd1+82]; ld.global.b16 %h3, [%rd1+84]; ld.global.b16 %h4, [%rd1+86];
 setp.gt.u32 %p1, %r0, 5;
{body}
 ret;
}}
"""
#: input bytes the kernel reads (HEAD's loads): 8 f32, 4 f64, 4 b32 (f16x2/bf16x2), 4 b16
IN_BYTES = 88
TARGETS = ("sm_80", "sm_89", "sm_90a", "sm_100a")
_FMA = re.compile(r"^(FFMA|DFMA|HFMA2)")


def _st(*regs, t="f32", w=4):
    return "\n".join(f" st.global.{t} [%rd2+{i * w}], {r};" for i, r in enumerate(regs))


def _f(body, *out):
    return body + "\n" + _st(*out)


PATTERNS: dict[str, str] = {
    # one mul, one add/sub
    "mul_add": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "add_mul": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f3, %f10;", "%f11"),
    "mul_sub": _f(" mul.f32 %f10, %f1, %f2;\n sub.f32 %f11, %f10, %f3;", "%f11"),
    "sub_mul": _f(" mul.f32 %f10, %f1, %f2;\n sub.f32 %f11, %f3, %f10;", "%f11"),
    "mul.rn_add": _f(" mul.rn.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "mul_add.rn": _f(" mul.f32 %f10, %f1, %f2;\n add.rn.f32 %f11, %f10, %f3;", "%f11"),
    "mul_add.rz": _f(" mul.f32 %f10, %f1, %f2;\n add.rz.f32 %f11, %f10, %f3;", "%f11"),
    "mul.rz_add": _f(" mul.rz.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "mul.ftz_add": _f(" mul.ftz.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "mul_add.ftz": _f(" mul.f32 %f10, %f1, %f2;\n add.ftz.f32 %f11, %f10, %f3;", "%f11"),
    "mul.ftz_add.ftz": _f(" mul.ftz.f32 %f10, %f1, %f2;\n add.ftz.f32 %f11, %f10, %f3;", "%f11"),
    "mul.sat_add": _f(" mul.sat.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "mul_add.sat": _f(" mul.f32 %f10, %f1, %f2;\n add.sat.f32 %f11, %f10, %f3;", "%f11"),
    "mul.ftz_add.ftz.sat": _f(" mul.ftz.f32 %f10, %f1, %f2;\n add.ftz.sat.f32 %f11, %f10, %f3;", "%f11"),
    "mul_add.ftz.sat": _f(" mul.f32 %f10, %f1, %f2;\n add.ftz.sat.f32 %f11, %f10, %f3;", "%f11"),
    "mul_imm_add": _f(" mul.f32 %f10, %f1, 0f40400000;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "mul_add_imm": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, 0f3F800000;", "%f11"),
    # uses
    "mul_add_and_store": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11", "%f10"),
    "mul_two_adds": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;\n sub.f32 %f12, %f4, %f10;",
                       "%f11", "%f12"),
    "mul_add_and_mul": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;\n mul.f32 %f12, %f10, %f4;",
                          "%f11", "%f12"),
    "mul_add_and_setp": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;\n"
                           " setp.gt.f32 %p2, %f10, 0f00000000;\n selp.f32 %f12, %f11, %f4, %p2;", "%f12"),
    "mul_self_add": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f10;", "%f11"),
    "mul_self_add_and_add": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f10;\n add.f32 %f12, %f10, %f3;",
                               "%f11", "%f12"),
    "mul_add_chain": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;\n add.f32 %f12, %f11, %f4;", "%f12"),
    "mul_used_twice_in_chain": _f(" mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f3, %f10;\n add.f32 %f12, %f11, %f10;",
                                  "%f12"),
    "mul_fma_addend": _f(" mul.f32 %f10, %f1, %f2;\n fma.rn.f32 %f11, %f3, %f4, %f10;", "%f11"),
    "fma_add": _f(" fma.rn.f32 %f10, %f1, %f2, %f5;\n add.f32 %f11, %f10, %f3;", "%f11"),
    # two products into one add: fewer uses wins, then the first operand
    "two_muls_add": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f11, %f10, %f12;", "%f11"),
    "two_muls_sub": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n sub.f32 %f11, %f12, %f10;", "%f11"),
    "two_muls_one_stored": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f11, %f10, %f12;",
                              "%f11", "%f10"),
    "two_muls_both_stored": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f11, %f10, %f12;",
                               "%f11", "%f10", "%f12"),
    "two_muls_rn_first": _f(" mul.rn.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f11, %f10, %f12;",
                            "%f11"),
    "fewer_uses_wins": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f13, %f10, %f5;\n"
                          " add.f32 %f11, %f10, %f12;", "%f11", "%f13"),
    "fewer_uses_wins_3v2": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f11, %f10, %f12;\n"
                              " add.f32 %f13, %f10, %f5;\n add.f32 %f15, %f10, %f7;\n add.f32 %f14, %f12, %f6;",
                              "%f11", "%f13", "%f14", "%f15"),
    "tie_2v2": _f(" mul.f32 %f10, %f1, %f2;\n mul.f32 %f12, %f3, %f4;\n add.f32 %f11, %f10, %f12;\n"
                  " add.f32 %f13, %f10, %f5;\n add.f32 %f14, %f12, %f6;", "%f11", "%f13", "%f14"),
    # through mov / neg
    "mul_mov_add": _f(" mul.f32 %f10, %f1, %f2;\n mov.f32 %f12, %f10;\n add.f32 %f11, %f12, %f3;", "%f11"),
    "mul_movb32_add": _f(" mul.f32 %f10, %f1, %f2;\n mov.b32 %r10, %f10;\n mov.b32 %f12, %r10;\n"
                         " add.f32 %f11, %f12, %f3;", "%f11"),
    "mul_mov_two_names": _f(" mul.f32 %f10, %f1, %f2;\n mov.f32 %f12, %f10;\n add.f32 %f11, %f12, %f3;\n"
                            " add.f32 %f13, %f10, %f4;", "%f11", "%f13"),
    "mul_neg_add": _f(" mul.f32 %f10, %f1, %f2;\n neg.f32 %f12, %f10;\n add.f32 %f11, %f12, %f3;", "%f11"),
    "mul_neg_add_neg_stored": _f(" mul.f32 %f10, %f1, %f2;\n neg.f32 %f12, %f10;\n add.f32 %f11, %f12, %f3;",
                                 "%f11", "%f12"),
    "neg_operand_mul_add": _f(" neg.f32 %f12, %f1;\n mul.f32 %f10, %f12, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    # predicates, blocks, barriers
    "mul_predicated_add": _f(" mul.f32 %f10, %f1, %f2;\n mov.f32 %f11, %f4;\n @%p1 add.f32 %f11, %f10, %f3;", "%f11"),
    "predicated_mul_add": _f(" mov.f32 %f10, %f4;\n @%p1 mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "both_predicated": _f(" mov.f32 %f10, %f4;\n @%p1 mul.f32 %f10, %f1, %f2;\n @%p1 add.f32 %f11, %f10, %f3;",
                          "%f11"),
    "add_after_branch": _f(" mul.f32 %f10, %f1, %f2;\n mov.f32 %f11, %f4;\n @%p1 bra L1;\n"
                           " add.f32 %f11, %f10, %f3;\nL1:", "%f11"),
    "add_at_join": _f(" mul.f32 %f10, %f1, %f2;\n @%p1 bra L1;\n mov.f32 %f5, %f6;\nL1:\n"
                      " add.f32 %f11, %f10, %f5;", "%f11"),
    "uses_in_two_blocks": " mul.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;\n st.global.f32 [%rd2], %f11;\n"
                          " @%p1 bra L1;\n add.f32 %f12, %f10, %f4;\n st.global.f32 [%rd2+4], %f12;\nL1:",
    "label_not_targeted": _f(" mul.f32 %f10, %f1, %f2;\nL1:\n add.f32 %f11, %f10, %f3;", "%f11"),
    "bar_between": _f(" mul.f32 %f10, %f1, %f2;\n bar.sync 0;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "loop_body": " mov.u32 %r20, 0;\n mov.f32 %f20, %f5;\nLOOP:\n .pragma \"nounroll\";\n mul.f32 %f10, %f1, %f20;\n"
                 " add.f32 %f20, %f10, %f3;\n add.u32 %r20, %r20, 1;\n setp.lt.u32 %p2, %r20, %r0;\n"
                 " @%p2 bra LOOP;\n st.global.f32 [%rd2], %f20;",
    # other types
    "f64_mul_add": " mul.f64 %fd10, %fd1, %fd2;\n add.f64 %fd11, %fd10, %fd3;\n" + _st("%fd11", t="f64", w=8),
    "f64_mul.rn_add": " mul.rn.f64 %fd10, %fd1, %fd2;\n add.f64 %fd11, %fd10, %fd3;\n" + _st("%fd11", t="f64", w=8),
    "f64_mul_two_subs": " mul.f64 %fd10, %fd1, %fd2;\n sub.f64 %fd11, %fd3, %fd10;\n sub.f64 %fd12, %fd10, %fd4;\n"
                        + _st("%fd11", "%fd12", t="f64", w=8),
    "f16_mul_add": " mul.f16 %h10, %h1, %h2;\n add.f16 %h11, %h10, %h3;\n" + _st("%h11", t="b16", w=2),
    "f16_mul.ftz_add": " mul.ftz.f16 %h10, %h1, %h2;\n add.f16 %h11, %h10, %h3;\n" + _st("%h11", t="b16", w=2),
    "f16_mul.ftz_add.ftz": " mul.ftz.f16 %h10, %h1, %h2;\n add.ftz.f16 %h11, %h10, %h3;\n" + _st("%h11", t="b16", w=2),
    "f16_mul_add.sat": " mul.f16 %h10, %h1, %h2;\n add.sat.f16 %h11, %h10, %h3;\n" + _st("%h11", t="b16", w=2),
    "f16x2_mul_add": " mul.f16x2 %r10, %r1, %r2;\n add.f16x2 %r11, %r10, %r3;\n" + _st("%r11", t="b32"),
    "f16x2_mul_sub": " mul.f16x2 %r10, %r1, %r2;\n sub.f16x2 %r11, %r3, %r10;\n" + _st("%r11", t="b32"),
    "f16x2_mul.rn_add": " mul.rn.f16x2 %r10, %r1, %r2;\n add.f16x2 %r11, %r10, %r3;\n" + _st("%r11", t="b32"),
    "bf16_mul_add": " mul.bf16 %h10, %h1, %h2;\n add.bf16 %h11, %h10, %h3;\n" + _st("%h11", t="b16", w=2),
    "bf16x2_mul_sub": " mul.bf16x2 %r10, %r1, %r2;\n sub.bf16x2 %r11, %r10, %r3;\n" + _st("%r11", t="b32"),
    # special-function sequences followed by add/sub
    "div.full_add": _f(" div.full.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "div.full_sub": _f(" div.full.f32 %f10, %f1, %f2;\n sub.f32 %f11, %f3, %f10;", "%f11"),
    "div.full_two_subs": _f(" div.full.f32 %f10, %f1, %f2;\n sub.f32 %f11, %f3, %f10;\n sub.f32 %f12, %f4, %f10;",
                            "%f11", "%f12"),
    "div.full_add_and_store": _f(" div.full.f32 %f10, %f1, %f2;\n add.f32 %f11, %f3, %f10;", "%f11", "%f10"),
    "div.full.ftz_add": _f(" div.full.ftz.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "div.full.ftz_add.ftz": _f(" div.full.ftz.f32 %f10, %f1, %f2;\n add.ftz.f32 %f11, %f10, %f3;", "%f11"),
    "div.full_add.sat": _f(" div.full.f32 %f10, %f1, %f2;\n add.sat.f32 %f11, %f10, %f3;", "%f11"),
    "div.approx_add": _f(" div.approx.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "div.approx.ftz_add.ftz": _f(" div.approx.ftz.f32 %f10, %f1, %f2;\n add.ftz.f32 %f11, %f10, %f3;", "%f11"),
    "div.rn_add": _f(" div.rn.f32 %f10, %f1, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "rcp.approx_add": _f(" rcp.approx.f32 %f10, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "rcp.approx_add.ftz": _f(" rcp.approx.f32 %f10, %f2;\n add.ftz.f32 %f11, %f10, %f3;", "%f11"),
    "rcp.approx.ftz_add.ftz": _f(" rcp.approx.ftz.f32 %f10, %f2;\n add.ftz.f32 %f11, %f10, %f3;", "%f11"),
    "rcp.approx_mul_add": _f(" rcp.approx.f32 %f10, %f2;\n mul.f32 %f12, %f1, %f10;\n add.f32 %f11, %f12, %f3;",
                             "%f11"),
    "rcp.rn_add": _f(" rcp.rn.f32 %f10, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "sqrt.approx_add": _f(" sqrt.approx.f32 %f10, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "rsqrt.approx_add": _f(" rsqrt.approx.f32 %f10, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "ex2.approx_add": _f(" ex2.approx.f32 %f10, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "lg2.approx_add": _f(" lg2.approx.f32 %f10, %f2;\n add.f32 %f11, %f10, %f3;", "%f11"),
    "rcp.approx.ftz.f64_add": " rcp.approx.ftz.f64 %fd10, %fd2;\n add.f64 %fd11, %fd10, %fd3;\n"
                              + _st("%fd11", t="f64", w=8),
}


def random_pattern(seed: int) -> str:
    """A random block (sometimes split by a branch) of f32 mul/add/sub/mov/neg over %f1..%f8:
    products get 1-3 uses of every kind; every value is used or stored (so ptxas removes
    nothing), and no expression is written twice (so ptxas merges nothing)."""
    rng = random.Random(seed)
    vals = [f"%f{i}" for i in range(1, 9)]
    prods: list[str] = []
    lines, nxt, stored, seen, used = [], 10, [], set(), set()
    for _ in range(rng.randint(4, 10)):
        d = f"%f{nxt}"
        r = rng.random()

        def pick():
            pool = prods if prods and rng.random() < 0.6 else vals
            return rng.choice(pool)
        a, b = pick(), pick()
        if r < 0.4:
            op = f"mul{rng.choice(['', '', '', '.rn'])}"
        elif r < 0.85:
            op = rng.choice(["add", "sub"])
        else:
            op = rng.choice(["mov", "neg"])
        key = (op, a) if op in ("mov", "neg") else (op, *((a, b) if op == "sub" else sorted((a, b))))
        if key in seen:
            continue
        seen.add(key)
        nxt += 1
        lines.append(f" {op}.f32 {d}, {a};" if op in ("mov", "neg") else f" {op}.f32 {d}, {a}, {b};")
        used.update((a, b) if op not in ("mov", "neg") else (a,))
        if op.startswith("mul"):
            prods.append(d)
        if rng.random() < 0.08:
            lines.append(" @%p1 bra L1;")
        vals.append(d)
        if rng.random() < 0.15:
            stored.append(d)
    while lines[-1] == " @%p1 bra L1;":
        lines.pop()
    out = [v for v in vals[8:] if v not in used and v not in stored] + stored
    body = "\n".join(lines) + "\n" + _st(*out)
    if "bra L1" in body:
        body += "\nL1:"
    return body


def ptxas_paths() -> dict[str, str]:
    """The ptxas binaries found: '13.0' on the PATH, '13.5' in the nvidia-cuda-nvcc wheel."""
    out = {}
    p = shutil.which("ptxas")
    if p:
        out[_version(p)] = p
    try:
        import nvidia.cu13 as cu13
        roots = list(getattr(cu13, "__path__", []))
    except ImportError:
        roots = []
    for r in roots:
        q = os.path.join(r, "bin", "ptxas")
        if os.path.exists(q):
            out[_version(q)] = q
    return out


def nvdisasm_path() -> str | None:
    p = shutil.which("nvdisasm")
    if p:
        return p
    import sys
    for base in sys.path + [os.path.expanduser(f"~/.local/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages")]:
        q = os.path.join(base, "nvidia", "cu13", "bin", "nvdisasm")
        if os.path.exists(q):
            return q
    return None


def _version(ptxas: str) -> str:
    v = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", v)
    return m.group(1) if m else "?"


def kernel(body: str, sm: str, ver: str = "8.0", name: str = "k") -> str:
    """The pattern as a whole module (HEAD's kernel ``name``)."""
    if sm.startswith("sm_100") and float(ver) < 8.6:
        ver = "8.6"
    text = HEAD.format(body=body, sm=sm, ver=ver)
    return text.replace(".visible .entry k(", f".visible .entry {name}(")


def _compile(text: str, sm: str, ptxas: str, fmad: bool, d: str) -> str | None:
    Path(d, "k.ptx").write_text(text)
    r = subprocess.run([ptxas, f"-arch={sm}", f"--fmad={'true' if fmad else 'false'}", f"{d}/k.ptx",
                        "-o", f"{d}/k.cubin"], capture_output=True, text=True)
    return None if r.returncode else f"{d}/k.cubin"


def sass_many(bodies: list[str], sm: str, ptxas: str, nvdisasm: str, fmad: bool = True) -> list:
    """The SASS instructions of each pattern (None where ptxas refuses it): all patterns as
    kernels of one module, one ptxas and one nvdisasm run (nvdisasm starts slowly)."""
    head, _, _ = kernel("", sm).partition(".visible .entry")
    ok = []
    with tempfile.TemporaryDirectory() as d:
        for i, b in enumerate(bodies):
            ok.append(_compile(kernel(b, sm, name=f"k{i}"), sm, ptxas, fmad, d) is not None)
        text = head + "\n".join(".visible .entry" + kernel(b, sm, name=f"k{i}").partition(".visible .entry")[2]
                                for i, b in enumerate(bodies) if ok[i])
        cubin = _compile(text, sm, ptxas, fmad, d)
        assert cubin, "the accepted patterns failed together"
        out = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True).stdout
    funcs: dict[str, list[str]] = {}
    cur = None
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(k\d+):", line) or re.match(r"\s*\.section\s+\.text\.(k\d+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            cur.append(m.group(1).strip())
    return [funcs.get(f"k{i}") if ok[i] else None for i in range(len(bodies))]


def n_fma(ins: list[str]) -> int:
    """FMA-class instructions that add a product: not HFMA2/FFMA used as a multiply (addend
    RZ) or to load a constant (a multiplicand RZ)."""
    n = 0
    for i in ins:
        i = re.sub(r"^@!?U?P\w+\s+", "", i)
        if not _FMA.match(i):
            continue
        srcs = [x.strip().split(".")[0] for x in i.split(None, 1)[1].split(",")][1:]
        if srcs[0] in ("RZ", "-RZ") or srcs[1] in ("RZ", "-RZ") or len(srcs) == 3 and srcs[2] in ("RZ", "-RZ"):
            continue
        n += 1
    return n


def verdicts(bodies: list[str], sm: str, ptxas: str, nvdisasm: str) -> list:
    """Contracted add/sub instructions per pattern: FMA count with contraction minus without."""
    on = sass_many(bodies, sm, ptxas, nvdisasm)
    off = sass_many(bodies, sm, ptxas, nvdisasm, fmad=False)
    return [None if a is None else n_fma(a) - n_fma(b) for a, b in zip(on, off)]


def build(n_random: int, out: Path) -> None:
    tools = ptxas_paths()
    nvd = nvdisasm_path()
    assert tools and nvd, "needs ptxas and nvdisasm"
    pats = dict(PATTERNS)
    pats.update({f"random_{s}": random_pattern(s) for s in range(n_random)})
    names = list(pats)
    rows = {n: {"body": pats[n], "fused": {}} for n in names}
    for ver, px in sorted(tools.items()):
        for sm in TARGETS:
            sel = [n for n in names if not n.startswith("random_") or sm == "sm_90a"]
            for n, v in zip(sel, verdicts([pats[n] for n in sel], sm, px, nvd)):
                rows[n]["fused"][f"{ver}/{sm}"] = v
            print(ver, sm, "done", flush=True)
    meta = {"ptxas": sorted(tools), "head": HEAD, "targets": TARGETS,
            "verdict": "FMA-class SASS instructions minus those with --fmad=false",
            "regenerate": "python tools/ptxas_contraction.py build --random %d" % n_random}
    out.write_text(json.dumps({"meta": meta, "patterns": rows}, indent=0) + "\n")


def _per_kernel(nvdisasm: str, cubin: str) -> dict[str, int]:
    out = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True).stdout
    funcs: dict[str, list[str]] = {}
    cur = None
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.([\w$]+):", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            cur.append(m.group(1).strip())
    return {k: n_fma(v) for k, v in funcs.items()}


def corpus(out: Path) -> None:
    """Per kernel of the real corpus (tests/data/real): contracted add/sub per ptxas release
    (None where that release refuses the module), stored under "corpus" in ``out``."""
    import gzip
    tools = ptxas_paths()
    nvd = nvdisasm_path()
    root = Path(__file__).parent.parent / "tests/data/real"
    table = json.loads(out.read_text())
    rows = {}
    for p in sorted(root.rglob("*.ptx*")):
        text = gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()
        arch = re.search(r"\.target\s+(sm_\w+)", text).group(1)
        res = {}
        with tempfile.TemporaryDirectory() as d:
            for ver, px in sorted(tools.items()):
                counts = []
                for fmad in (True, False):
                    cubin = _compile(text, arch, px, fmad, d)
                    counts.append(_per_kernel(nvd, cubin) if cubin else None)
                if counts[0] is not None:
                    for k in counts[0]:
                        res.setdefault(k, {})[ver] = counts[0][k] - counts[1][k]
        rows[str(p.relative_to(root))] = res
        print(p.name, res, flush=True)
    table["corpus"] = rows
    out.write_text(json.dumps(table, indent=0) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--random", type=int, default=200)
    b.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "tests/data/ptxas_contraction.json")
    c = sub.add_parser("corpus")
    c.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "tests/data/ptxas_contraction.json")
    s = sub.add_parser("show")
    s.add_argument("pattern")
    s.add_argument("--arch", default="sm_90a")
    a = ap.parse_args()
    if a.cmd == "build":
        build(a.random, a.out)
    elif a.cmd == "corpus":
        corpus(a.out)
    else:
        body = PATTERNS.get(a.pattern) or random_pattern(int(a.pattern.split("_")[-1]))
        tools = ptxas_paths()
        for ver, px in sorted(tools.items()):
            print(f"ptxas {ver} {a.arch}:")
            for i in sass_many([body], a.arch, px, nvdisasm_path())[0] or ["(refused)"]:
                print("   ", i)


if __name__ == "__main__":
    main()
