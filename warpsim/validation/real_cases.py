"""Warp-level cases for the instructions compilers emit that the first warp suite did not hold
(issue 19): carry chains, mul24/mad24, match.{any,all}.sync, mov.pred with 0/1, one-element
vector operands.  Same :class:`~warpsim.validation.warp_cases.Case` format and harness
(:mod:`warpsim.validation.warp_ptx`); run with ``python -m warpsim.validation.real_cases DIR``
(build + GPU + compare) or ``compare FILE`` against tests/data/h100_real_warp.npz.
"""

from __future__ import annotations

import sys
from pathlib import Path

from warpsim.validation.warp_cases import Case

CASES: list[Case] = []


def _case(*a, **k):
    CASES.append(Case(*a, **k))


_CARRY = """
    .reg .{t} %a<4>; .reg .{t} %b<4>; .reg .{t} %d<24>; .reg .pred %p<2>;
    mov.{u} %d19, 0;
    mov.{u} %d21, 0;
    add.cc.{u} %d0, %a0, %b0;
    addc.cc.{u} %d1, %a1, %b1;
    addc.{u} %d2, 0, 0;
    sub.cc.{u} %d3, %a0, %b0;
    subc.cc.{u} %d4, %a1, %b1;
    subc.{u} %d5, 0, 0;
    add.cc.{s} %d6, %a0, %b0;
    subc.cc.{s} %d7, %a1, %b1;
    addc.{s} %d8, %a2, 0;
    sub.cc.{u} %d9, %a2, %b2;
    addc.cc.{u} %d10, %a1, %b1;
    subc.{u} %d11, %a0, 0;
    mad.lo.cc.{u} %d12, %a0, %b0, %a1;
    madc.hi.cc.{u} %d13, %a0, %b0, %b1;
    madc.lo.cc.{s} %d14, %a1, %b1, %a2;
    madc.hi.{s} %d15, %a1, %b1, %b2;
    mad.hi.cc.{s} %d16, %a2, %b2, %a0;
    madc.lo.{u} %d17, 0, 0, 0;
    add.cc.{u} %d18, %a0, %b0;
    @%p1 add.cc.{u} %d19, %a2, %b2;
    addc.{u} %d20, 0, 0;
    @!%p1 sub.cc.{u} %d21, %a1, %b2;
    addc.{u} %d22, %a2, 0;
"""
for _w, _t in ((32, "b32"), (64, "b64")):
    _case(f"carry_{_w}", "carry", _CARRY.format(t=_t, u=f"u{_w}", s=f"s{_w}"),
          tuple((f"%a{i}", "bits") for i in range(3)) + tuple((f"%b{i}", "bits") for i in range(3))
          + (("%p1", "bool"),),
          tuple(f"%d{i}" for i in range(23)))

_case("mul24", "carry", """
    .reg .b32 %a<4>; .reg .b32 %d<12>;
    mul24.lo.u32 %d0, %a0, %a1;
    mul24.hi.u32 %d1, %a0, %a1;
    mul24.lo.s32 %d2, %a0, %a1;
    mul24.hi.s32 %d3, %a0, %a1;
    mad24.lo.u32 %d4, %a0, %a1, %a2;
    mad24.hi.u32 %d5, %a0, %a1, %a2;
    mad24.lo.s32 %d6, %a0, %a1, %a2;
    mad24.hi.s32 %d7, %a0, %a1, %a2;
    mad24.hi.sat.s32 %d8, %a0, %a1, %a2;
    mul24.hi.s32 %d9, %a1, 0x800000;
    mad24.hi.sat.s32 %d10, %a0, %a0, 0x7FFFFF00;
    mad24.hi.sat.s32 %d11, %a0, %a1, 0x80000010;
""", (("%a0", "bits"), ("%a1", "bits"), ("%a2", "bits")), tuple(f"%d{i}" for i in range(12)))

_case("match_spelled", "warp", """
    .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<6>;
    match.any.sync.b32 %r2, %r1, 0xffffffff;
    match.all.sync.b32 %r3|%p2, %r1, 0xffffffff;
    match.any.sync.b64 %r4, %rd1, 0xffffffff;
    match.all.sync.b64 %r5|%p3, %rd1, 0xffffffff;
    mov.pred %p4, 0;
    mov.pred %p5, 1;
""", (("%r1", "small"), ("%rd1", "small")), ("%r2", "%r3", "%p2", "%r4", "%r5", "%p3", "%p4", "%p5"))
# (the H100 run of 2026-11-26 also held `mov.b32 %r7, {%r2}`: it gave %r2 & 0xff, so warpsim
# refuses a one-element vector in mov; its two columns were dropped from the saved words)


def main(argv=None) -> int:
    """``DIR``: build, run on the GPU and compare; ``compare FILE``: warpsim against saved words."""
    from warpsim.validation import warp_ptx as W
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compare":
        rep = W.compare(W.load(argv[1]), cases=CASES)
        print(W.summary(rep))
        return 0
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    (out / "real.ptx").write_text(W.module(CASES, "sm_90"))
    import subprocess
    subprocess.run(["ptxas", "-arch=sm_90", str(out / "real.ptx"), "-o", str(out / "real.cubin")], check=True)
    if len(argv) > 1 and argv[1] == "--build-only":
        return 0
    res = W.gpu_run(out / "real.cubin", CASES)
    W.save(res, out / "real_words.npz")
    rep = W.compare(res, cases=CASES)
    print(W.summary(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
