"""Warp-level validation cases as data: a PTX body per case, run by every warp on both sides.

Each :class:`Case` names the registers loaded with per-lane inputs before the body (and the
generator of their bits), the registers stored after it, and the shared / per-warp global
memory it uses (filled with random bytes before, compared byte for byte after).  The harness
(:mod:`warpsim.validation.warp_ptx`) provides ``%sb`` (the u32 shared address of the case's
shared buffer) and ``%gp`` (the u64 address of the warp's global buffer); one warp per CTA,
so ``%tid.x`` is the lane and ``%ctaid.x`` the warp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    body: str
    inputs: tuple[tuple[str, str], ...] = ()
    outputs: tuple[str, ...] = ()
    smem: int = 0  # shared bytes (random "smem_dist" contents before; compared after)
    gmem: int = 0  # global bytes per warp (random before; compared after)
    smem_dist: str = "bytes"
    warps: int = 96


# --------------------------------------------------------------------------------------------
# input generators: (rng, warps, width) -> (warps, 32) unsigned words
# --------------------------------------------------------------------------------------------
_SPECIAL32 = np.array([0, 1, 2, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x7F800000, 0xFF800000,
                       0x7FC00000, 0x7FA00001, 0xFFC00123, 0x00000001, 0x807FFFFF, 0x3F800000,
                       0x0000FFFF, 0xFFFF0000, 0x7C007C00, 0x7E017E01, 0x80008000, 0x00FF00FF,
                       31, 32, 33, 63, 64], np.uint64)


def _bits(rng, warps, width):
    n = (warps, 32)
    u = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    sp = _SPECIAL32[rng.integers(0, len(_SPECIAL32), n)]
    if width == 64:
        sp = sp | (_SPECIAL32[rng.integers(0, len(_SPECIAL32), n)] << np.uint64(32))
    pick = rng.random(n)
    out = np.where(pick < 0.55, u, np.where(pick < 0.85, sp, rng.integers(0, 70, n).astype(np.uint64)))
    return out & np.uint64((1 << width) - 1)


def _ints(lo, hi):
    return lambda rng, warps, width: rng.integers(lo, hi, (warps, 32)).astype(np.uint64)


def _small(rng, warps, width):
    v = rng.integers(0, 4, (warps, 32)).astype(np.uint64)
    v[::4] = v[::4, :1]  # every 4th warp uniform
    return v


def _boolmix(rng, warps, width):
    p = rng.random((warps, 32)) < rng.random((warps, 1))
    p[::5] = True
    p[1::5] = False
    return p.astype(np.uint64)


def _perm_rows(nrows):
    def gen(rng, warps, width):
        out = np.zeros((warps, 32), np.uint64)
        for w in range(warps):
            out[w] = rng.permutation(nrows)[np.arange(32) % nrows] * 16
        return out
    return gen


def _perm32(rng, warps, width):
    return np.stack([rng.permutation(32) for _ in range(warps)]).astype(np.uint64)


def _f32normal(rng, warps, width):
    v = (rng.standard_normal((warps, 32)) * np.exp2(rng.integers(-4, 5, (warps, 32)))).astype(np.float32)
    return v.view(np.uint32).astype(np.uint64)


def _f16pair(rng, warps, width):
    v = rng.standard_normal((warps, 32, 2)).astype(np.float16)
    return np.ascontiguousarray(v).view(np.uint32)[..., 0].astype(np.uint64)


def _cpsize(limit):
    vals = [v for v in (0, 1, 3, 4, 7, 8, 12, 16, 16, 16) if v <= limit] + [limit] * 3
    return lambda rng, warps, width: rng.choice(vals, (warps, 32)).astype(np.uint64)


GENERATORS = {
    "bits": _bits, "shift": _ints(0, 70), "pos": _ints(0, 300), "pos600": _ints(0, 600), "small16": lambda rng, w, width: (16 + rng.integers(0, 4, (w, 32))).astype(np.uint64), "small": _small,
    "bool": _boolmix, "perm32": _perm32, "rows64": _perm_rows(64), "rows128": _perm_rows(128),
    "f32": _f32normal, "f16x2": _f16pair, "cpsize16": _cpsize(16), "cpsize8": _cpsize(8), "lut": _ints(0, 256),
    "shflc": lambda rng, w, width: rng.choice([0x1F, 0x0, 0x101F, 0x181F, 0x1C1F, 0x1E1F, 0x1F1F,
                                               0x0800, 0x1000, 0x1810, 0x0F, 0x1FFF],
                                              (w, 32)).astype(np.uint64),
}


def smem_bytes(dist: str, rng, warps: int, nbytes: int) -> np.ndarray:
    if dist == "f16":
        v = rng.standard_normal((warps, nbytes // 2)).astype(np.float16)
        return np.ascontiguousarray(v).view(np.uint8)
    return rng.integers(0, 256, (warps, nbytes), dtype=np.uint8)


# --------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------
def _regs(prefix, n):
    return tuple(f"%{prefix}{i}" for i in range(n))


CASES: list[Case] = []


def case(*a, **k):
    CASES.append(Case(*a, **k))


case("mov_pack_special", "mov", """
    .reg .b32 %r<20>; .reg .b64 %rd<8>; .reg .b16 %h<8>;
    mov.b32 {%h1, %h2}, %r1;
    mov.b32 %r3, {%h2, %h1};
    mov.b64 %rd2, {%r1, %r2};
    mov.b64 {%r4, %r5}, %rd1;
    mov.b64 {%h3, %h4, %h5, %h6}, %rd1;
    mov.b64 %rd3, {%h6, %h4, %h5, %h3};
    mov.u32 %r6, %laneid;
    mov.u32 %r7, %lanemask_lt;
    mov.u32 %r8, %lanemask_le;
    mov.u32 %r9, %lanemask_gt;
    mov.u32 %r10, %lanemask_ge;
    mov.u32 %r11, %lanemask_eq;
    mov.u32 %r12, %tid.x;
    mov.u32 %r13, %ntid.x;
    mov.u32 %r14, %ctaid.x;
    mov.b32 %r15, 0f3FC00000;
    mov.b64 %rd4, 0d400921FB54442D18;
    mov.b16 %h7, 0xBEEF;
    mov.u64 %rd5, %rd1;
""", (("%r1", "bits"), ("%r2", "bits"), ("%rd1", "bits")),
    ("%h1", "%h2", "%r3", "%rd2", "%r4", "%r5", "%h3", "%h6", "%rd3") + _regs("r", 16)[6:] + ("%rd4", "%h7", "%rd5"))

_LOGIC = """
    .reg .b{w} %x<40>; .reg .b32 %s<2>; .reg .pred %p<4>;
    and.b{w} %x10, %x1, %x2;
    or.b{w} %x11, %x1, %x2;
    xor.b{w} %x12, %x1, %x2;
    not.b{w} %x13, %x1;
    cnot.b{w} %x14, %x3;
    shl.b{w} %x15, %x1, %s1;
    shr.b{w} %x16, %x1, %s1;
    shr.u{w} %x17, %x1, %s1;
    shr.s{w} %x18, %x1, %s1;
    shl.b{w} %x19, %x2, 3;
    shr.s{w} %x20, %x2, 7;
    and.b{w} %x21, %x1, 0x5A;
"""
for _w in (16, 32, 64):
    case(f"logic_b{_w}", "logic", _LOGIC.format(w=_w),
         (("%x1", "bits"), ("%x2", "bits"), ("%x3", "small"), ("%s1", "shift")),
         tuple(f"%x{i}" for i in range(10, 22)))

case("logic_pred", "logic", """
    .reg .pred %p<12>; .reg .b32 %r<4>;
    and.pred %p3, %p1, %p2;
    or.pred %p4, %p1, %p2;
    xor.pred %p5, %p1, %p2;
    not.pred %p6, %p1;
""", (("%p1", "bool"), ("%p2", "bool")), ("%p3", "%p4", "%p5", "%p6"))

case("bitfield_32", "logic", """
    .reg .b32 %r<40>;
    bfe.u32 %r10, %r1, %r3, %r4;
    bfe.s32 %r11, %r1, %r3, %r4;
    bfi.b32 %r12, %r1, %r2, %r3, %r4;
    bfind.u32 %r13, %r1;
    bfind.s32 %r14, %r1;
    bfind.shiftamt.u32 %r15, %r1;
    bfind.shiftamt.s32 %r16, %r1;
    brev.b32 %r17, %r1;
    clz.b32 %r18, %r1;
    popc.b32 %r19, %r1;
    bfe.u32 %r20, %r1, 8, 12;
    bfe.s32 %r21, %r1, 4, 0;
    bfi.b32 %r22, %r1, %r2, 30, 5;
""", (("%r1", "bits"), ("%r2", "bits"), ("%r3", "pos"), ("%r4", "pos")), _regs("r", 23)[10:])

case("bitfield_64", "logic", """
    .reg .b64 %rd<20>; .reg .b32 %r<30>;
    bfe.u64 %rd10, %rd1, %r3, %r4;
    bfe.s64 %rd11, %rd1, %r3, %r4;
    bfi.b64 %rd12, %rd1, %rd2, %r3, %r4;
    bfind.u64 %r13, %rd1;
    bfind.s64 %r14, %rd1;
    bfind.shiftamt.u64 %r15, %rd1;
    brev.b64 %rd16, %rd1;
    clz.b64 %r17, %rd1;
    popc.b64 %r18, %rd1;
""", (("%rd1", "bits"), ("%rd2", "bits"), ("%r3", "pos"), ("%r4", "pos")),
    ("%rd10", "%rd11", "%rd12", "%r13", "%r14", "%r15", "%rd16", "%r17", "%r18"))

case("bitfield_64_wide", "logic", """
    .reg .b64 %rd<20>; .reg .b32 %r<30>;
    bfe.u64 %rd10, %rd1, %r3, %r4;
    bfe.s64 %rd11, %rd1, %r3, %r4;
    bfi.b64 %rd12, %rd1, %rd2, %r3, %r4;
    bfe.u64 %rd13, %rd1, %r5, %r6;
    bfe.s64 %rd14, %rd1, %r5, %r6;
    bfi.b64 %rd15, %rd1, %rd2, %r5, %r6;
    bfe.u32 %r16, %r7, %r3, %r4;
    bfe.s32 %r17, %r7, %r3, %r4;
    bfi.b32 %r18, %r7, %r8, %r3, %r4;
""", (("%rd1", "bits"), ("%rd2", "bits"), ("%r3", "bits"), ("%r4", "bits"), ("%r5", "pos600"),
      ("%r6", "pos600"), ("%r7", "bits"), ("%r8", "bits")),
    ("%rd10", "%rd11", "%rd12", "%rd13", "%rd14", "%rd15", "%r16", "%r17", "%r18"))

case("shf_prmt", "logic", """
    .reg .b32 %r<40>;
    shf.l.wrap.b32 %r10, %r1, %r2, %r4;
    shf.l.clamp.b32 %r11, %r1, %r2, %r4;
    shf.r.wrap.b32 %r12, %r1, %r2, %r4;
    shf.r.clamp.b32 %r13, %r1, %r2, %r4;
    prmt.b32 %r14, %r1, %r2, %r3;
    prmt.b32.f4e %r15, %r1, %r2, %r3;
    prmt.b32.b4e %r16, %r1, %r2, %r3;
    prmt.b32.rc8 %r17, %r1, %r2, %r3;
    prmt.b32.ecl %r18, %r1, %r2, %r3;
    prmt.b32.ecr %r19, %r1, %r2, %r3;
    prmt.b32.rc16 %r20, %r1, %r2, %r3;
    prmt.b32 %r21, %r1, 0, 0x5410;
    prmt.b32 %r22, %r1, %r2, 0x1302;
    prmt.b32 %r23, %r1, %r2, 0x8880;
""", (("%r1", "bits"), ("%r2", "bits"), ("%r3", "bits"), ("%r4", "shift")), _regs("r", 24)[10:])

_LUTS = (0x00, 0xFF, 0x96, 0xE8, 0xEA, 0xF8, 0x6A, 0x1E, 0xCA, 0xF0, 0xCC, 0xAA, 0x80, 0x01,
         0x3C, 0x5B, 0xB4, 0x27)
case("lop3", "logic", "\n    .reg .b32 %r<60>; .reg .pred %p<8>;\n" + "".join(
    f"    lop3.b32 %r{10 + i}, %r1, %r2, %r3, {lut:#04x};\n" for i, lut in enumerate(_LUTS)) + """
    lop3.or.b32 %r40|%p1, %r1, %r2, %r3, 0x80, %p4;
    lop3.and.b32 %r41|%p2, %r1, %r2, %r3, 0x96, %p4;
    lop3.or.b32 _|%p3, %r1, %r2, %r3, 0x01, %p5;
""", (("%r1", "bits"), ("%r2", "bits"), ("%r3", "bits"), ("%p4", "bool"), ("%p5", "bool")),
    tuple(f"%r{10 + i}" for i in range(len(_LUTS))) + ("%r40", "%r41", "%p1", "%p2", "%p3"))

for _mode in ("up", "down", "bfly", "idx"):
    case(f"shfl_{_mode}", "warpops", f"""
    .reg .b32 %r<12>; .reg .pred %p<4>;
    shfl.sync.{_mode}.b32 %r5|%p1, %r1, %r2, %r3, 0xffffffff;
    shfl.sync.{_mode}.b32 %r6, %r1, 1, 0x1f, 0xffffffff;
    shfl.sync.{_mode}.b32 %r7|%p2, %r1, 5, 0x181f, 0xffffffff;
    shfl.sync.{_mode}.b32 %r8|%p3, %r1, %r4, 0x0, 0xffffffff;
""", (("%r1", "bits"), ("%r2", "shift"), ("%r3", "shflc"), ("%r4", "perm32")),
         ("%r5", "%p1", "%r6", "%r7", "%p2", "%r8", "%p3"))

case("vote_redux_match", "warpops", """
    .reg .b32 %r<30>; .reg .b64 %rd<4>; .reg .pred %p<12>;
    vote.sync.ballot.b32 %r10, %p1, 0xffffffff;
    vote.sync.all.pred %p2, %p1, 0xffffffff;
    vote.sync.any.pred %p3, %p1, 0xffffffff;
    vote.sync.uni.pred %p4, %p1, 0xffffffff;
    vote.sync.all.pred %p5, !%p1, 0xffffffff;
    vote.sync.ballot.b32 %r11, !%p1, 0xffffffff;
    redux.sync.add.u32 %r12, %r1, 0xffffffff;
    redux.sync.add.s32 %r13, %r1, 0xffffffff;
    redux.sync.min.u32 %r14, %r1, 0xffffffff;
    redux.sync.max.u32 %r15, %r1, 0xffffffff;
    redux.sync.min.s32 %r16, %r1, 0xffffffff;
    redux.sync.max.s32 %r17, %r1, 0xffffffff;
    redux.sync.and.b32 %r18, %r1, 0xffffffff;
    redux.sync.or.b32 %r19, %r1, 0xffffffff;
    redux.sync.xor.b32 %r20, %r1, 0xffffffff;
    match.sync.any.b32 %r21, %r2, 0xffffffff;
    match.sync.all.b32 %r22|%p6, %r2, 0xffffffff;
    match.sync.any.b64 %r23, %rd1, 0xffffffff;
    match.sync.all.b64 %r24|%p7, %rd1, 0xffffffff;
    activemask.b32 %r25;
""", (("%p1", "bool"), ("%r1", "bits"), ("%r2", "small"), ("%rd1", "small")),
    ("%r10", "%p2", "%p3", "%p4", "%p5", "%r11") + _regs("r", 26)[12:] + ("%p6", "%p7"))

case("warpops_partial_membermask", "warpops", """
    .reg .b32 %r<30>; .reg .pred %p<8>;
    mov.u32 %r2, %laneid;
    setp.ge.u32 %p1, %r2, 16;
    @%p1 bra HIGH;
    shfl.sync.bfly.b32 %r10, %r1, 3, 0x1f, 0x0000ffff;
    shfl.sync.down.b32 %r11|%p2, %r1, 2, 0x0f, 0x0000ffff;
    vote.sync.ballot.b32 %r12, %p4, 0x0000ffff;
    redux.sync.add.u32 %r13, %r1, 0x0000ffff;
    match.sync.any.b32 %r14, %r3, 0x0000ffff;
    activemask.b32 %r15;
    bar.warp.sync 0x0000ffff;
    bra.uni JOIN;
HIGH:
    shfl.sync.idx.b32 %r10, %r1, %r3, 0x1f, 0xffff0000;
    vote.sync.any.pred %p2, %p4, 0xffff0000;
    redux.sync.max.s32 %r13, %r1, 0xffff0000;
    activemask.b32 %r15;
JOIN:
    activemask.b32 %r16;
""", (("%r1", "bits"), ("%r3", "small16"), ("%p4", "bool"), ("%r10", "bits"), ("%r11", "bits"),
      ("%r12", "bits"), ("%r13", "bits"), ("%r14", "bits"), ("%p2", "bool")),
    ("%r10", "%r11", "%p2", "%r12", "%r13", "%r14", "%r15", "%r16"))

case("divergence_loops", "control", """
    .reg .b32 %r<30>; .reg .pred %p<8>;
    mov.u32 %r10, 0;
    mov.u32 %r11, 0;
    and.b32 %r2, %r1, 15;
    mov.u32 %r3, 0;
LOOP:
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra DONE;
    and.b32 %r4, %r3, 1;
    setp.eq.u32 %p2, %r4, 0;
    @%p2 bra EVEN;
    xor.b32 %r10, %r10, %r3;
    activemask.b32 %r12;
    bra.uni NEXT;
EVEN:
    add.u32 %r11, %r11, %r3;
    activemask.b32 %r13;
NEXT:
    add.u32 %r3, %r3, 1;
    bra.uni LOOP;
DONE:
    activemask.b32 %r14;
    shfl.sync.bfly.b32 %r15, %r10, 1, 0x1f, 0xffffffff;
    vote.sync.ballot.b32 %r16, %p2, 0xffffffff;
    setp.lt.u32 %p3, %r2, 8;
    @%p3 bra SMALL;
    mul.lo.u32 %r17, %r11, 3;
    bra.uni JOIN;
SMALL:
    mul.lo.u32 %r17, %r11, 5;
    @%p2 bra JOIN;
    add.u32 %r17, %r17, 1;
JOIN:
    redux.sync.add.u32 %r18, %r17, 0xffffffff;
""", (("%r1", "bits"), ("%r12", "bits"), ("%r13", "bits"), ("%p2", "bool")),
    ("%r10", "%r11", "%r12", "%r13", "%r14", "%r15", "%r16", "%r17", "%r18"))

case("ld_st_shared", "ldst", """
    .reg .b32 %r<40>; .reg .b64 %rd<10>; .reg .b16 %h<4>;
    add.u32 %r2, %sb, %r1;
    ld.shared.u8 %r10, [%r2+3];
    ld.shared.s8 %r11, [%r2+5];
    ld.shared.u16 %r12, [%r2+6];
    ld.shared.s16 %r13, [%r2+10];
    ld.shared.b16 %h1, [%r2+2];
    ld.shared.u32 %r14, [%r2+4];
    ld.shared.u64 %rd1, [%r2+8];
    ld.shared.s8 %rd2, [%r2+1];
    ld.shared.v2.u32 {%r15, %r16}, [%r2+8];
    ld.shared.v4.b32 {%r17, %r18, %r19, %r20}, [%r2];
    ld.shared.v2.u64 {%rd3, %rd4}, [%r2];
    ld.volatile.shared.u32 %r21, [%r2+12];
    ld.relaxed.cta.shared.u32 %r22, [%r2];
    ld.acquire.gpu.shared.u32 %r23, [%r2+4];
    add.u32 %r3, %sb, %r4;
    st.shared.v4.b32 [%r3], {%r17, %r18, %r19, %r20};
    st.shared.u8 [%r3+1], %r14;
    st.shared.b16 [%r3+6], %h1;
    st.shared.v2.u32 [%r3+8], {%r12, %r13};
    st.shared.u64 [%r3+8], %rd2;
""", (("%r1", "rows64"), ("%r4", "rows128")), _regs("r", 24)[10:] + ("%h1", "%rd1", "%rd2", "%rd3", "%rd4"),
    smem=2048 + 2048)

case("global_generic_cvta_cp_async", "ldst", """
    .reg .b32 %r<40>; .reg .b64 %rd<20>; .reg .pred %p<4>;
    mov.u32 %r1, %laneid;
    mul.wide.u32 %rd1, %r1, 16;
    add.u64 %rd2, %gp, %rd1;
    ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd2];
    ld.global.nc.u32 %r14, [%rd2+4];
    ld.u32 %r15, [%rd2+8];
    ld.global.ca.u16 %r16, [%rd2+2];
    ld.global.L1::evict_last.u32 %r17, [%rd2+12];
    cvt.u64.u32 %rd3, %sb;
    cvta.shared.u64 %rd4, %rd3;
    cvta.to.shared.u64 %rd5, %rd4;
    cvt.u32.u64 %r18, %rd5;
    sub.u32 %r19, %r18, %sb;
    mul.lo.u32 %r2, %r1, 16;
    add.u32 %r3, %sb, %r2;
    cp.async.cg.shared.global [%r3], [%rd2], 16, %r5;
    add.u32 %r4, %r3, 512;
    add.u64 %rd6, %rd2, 512;
    cp.async.ca.shared.global [%r4], [%rd6], 8, %r6;
    cp.async.ca.shared.global [%r4+8], [%rd6+8], 4;
    add.u32 %r7, %r3, 1024;
    add.u64 %rd7, %rd2, 1024;
    setp.ne.u32 %p1, %r8, 0;
    cp.async.ca.shared.global [%r7], [%rd7], 16, %p1;
    cp.async.commit_group;
    cp.async.wait_group 0;
    cp.async.wait_all;
    bar.sync 0;
    cvt.u64.u32 %rd8, %r3;
    cvta.shared.u64 %rd9, %rd8;
    ld.u32 %r20, [%rd9+4];
    ld.shared.u32 %r21, [%r3+4];
    add.u32 %r22, %r20, %r21;
    st.global.u32 [%rd2+1536], %r22;
    st.global.v2.u32 [%rd2+1544], {%r10, %r15};
    st.u16 [%rd2+1552], %r16;
    membar.cta;
    fence.acq_rel.gpu;
    fence.sc.cta;
""", (("%r5", "cpsize16"), ("%r6", "cpsize8"), ("%r8", "bool")),
    _regs("r", 23)[10:17] + _regs("r", 23)[19:], smem=2048, gmem=4096)

for _n in (1, 2, 4):
    for _t in ("", ".trans"):
        _regs_n = ", ".join(f"%r{10 + j}" for j in range(_n))
        case(f"ldmatrix_x{_n}{_t.replace('.', '_')}", "matrix", f"""
    .reg .b32 %r<20>;
    add.u32 %r2, %sb, %r1;
    ldmatrix.sync.aligned.m8n8.x{_n}{_t}.shared.b16 {{{_regs_n}}}, [%r2];
""", (("%r1", "rows128"),), tuple(f"%r{10 + j}" for j in range(_n)), smem=2048)
        case(f"stmatrix_x{_n}{_t.replace('.', '_')}", "matrix", f"""
    .reg .b32 %r<20>;
    add.u32 %r2, %sb, %r1;
    stmatrix.sync.aligned.m8n8.x{_n}{_t}.shared.b16 [%r2], {{{_regs_n}}};
""", (("%r1", "rows128"),) + tuple((f"%r{10 + j}", "bits") for j in range(_n)), (), smem=2048)

case("movmatrix_ldmatrix_x4_generic", "matrix", """
    .reg .b32 %r<20>; .reg .b64 %rd<4>;
    movmatrix.sync.aligned.m8n8.trans.b16 %r2, %r1;
    add.u32 %r3, %sb, %r4;
    cvt.u64.u32 %rd1, %r3;
    cvta.shared.u64 %rd2, %rd1;
    ldmatrix.sync.aligned.x4.m8n8.b16 {%r10, %r11, %r12, %r13}, [%rd2];
""", (("%r1", "bits"), ("%r4", "rows128")), ("%r2", "%r10", "%r11", "%r12", "%r13"), smem=2048)

# ---- end-to-end fragment routines ------------------------------------------------------------
# 1. ldmatrix + mma + stmatrix on a 128-byte-swizzled shared tile (Swizzle<3,4,3>): A is 16 x 64
#    f16 (rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r & 7)), B is 64 x 8
#    f16 row-major (K rows of 16 bytes) at 2048; a loop of four k16 steps accumulates in f32;
#    D is packed to f16x2 and written with stmatrix.x2 to 4096 (16 rows of 16 bytes, rows
#    8..15 after rows 0..7).
case("e2e_ldmatrix_mma_stmatrix_swizzled", "e2e", """
    .reg .b32 %r<40>; .reg .f32 %f<12>; .reg .pred %p<2>;
    mov.u32 %r1, %laneid;
    and.b32 %r2, %r1, 15;                 // A row for ldmatrix.x4 (lanes 0-15 col chunk 0, 16-31 chunk 1)
    shr.u32 %r3, %r1, 4;
    and.b32 %r4, %r2, 7;                  // swizzle key = row & 7
    shl.b32 %r5, %r2, 7;                  // row * 128
    and.b32 %r6, %r1, 15;                 // B row within the k16 step (lanes 0-15)
    mov.f32 %f0, 0f00000000; mov.f32 %f1, 0f00000000; mov.f32 %f2, 0f00000000; mov.f32 %f3, 0f00000000;
    mov.u32 %r7, 0;                       // k step
KLOOP:
    shl.b32 %r8, %r7, 1;                  // chunk = 2*k + (lane >= 16)
    add.u32 %r8, %r8, %r3;
    xor.b32 %r9, %r8, %r4;                // swizzled chunk
    shl.b32 %r9, %r9, 4;
    add.u32 %r10, %r5, %r9;
    add.u32 %r10, %r10, %sb;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r10];
    shl.b32 %r11, %r7, 4;                 // B rows k*16 + lane%16
    add.u32 %r11, %r11, %r6;
    shl.b32 %r11, %r11, 4;
    add.u32 %r11, %r11, 2048;
    add.u32 %r11, %r11, %sb;
    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r24, %r25}, [%r11];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r20, %r21, %r22, %r23}, {%r24, %r25}, {%f0, %f1, %f2, %f3};
    add.u32 %r7, %r7, 1;
    setp.lt.u32 %p1, %r7, 4;
    @%p1 bra KLOOP;
    cvt.rn.f16x2.f32 %r26, %f1, %f0;
    cvt.rn.f16x2.f32 %r27, %f3, %f2;
    and.b32 %r12, %r1, 15;
    shl.b32 %r12, %r12, 4;
    add.u32 %r12, %r12, 4096;
    add.u32 %r12, %r12, %sb;
    stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r12], {%r26, %r27};
""", (), ("%f0", "%f1", "%f2", "%f3", "%r26", "%r27"), smem=4096 + 256, smem_dist="f16")

# 2. Marlin-style int4 -> f16x2 dequantisation (lop3 with the 0x6400 exponent trick, sub and
#    fma on f16x2) feeding an f16 mma as the B operand.
case("e2e_int4_dequant_lop3_mma", "e2e", """
    .reg .b32 %r<40>; .reg .f32 %f<12>;
    mov.b32 %r20, 0x000f000f; mov.b32 %r21, 0x00f000f0; mov.b32 %r22, 0x64006400;
    mov.b32 %r23, 0x64086408; mov.b32 %r24, 0x2c002c00; mov.b32 %r25, 0xd480d480;
    lop3.b32 %r10, %r1, %r20, %r22, 0xea;
    lop3.b32 %r11, %r1, %r21, %r22, 0xea;
    sub.f16x2 %r12, %r10, %r23;
    fma.rn.f16x2 %r13, %r11, %r24, %r25;
    shr.u32 %r2, %r1, 8;
    lop3.b32 %r14, %r2, %r20, %r22, 0xea;
    lop3.b32 %r15, %r2, %r21, %r22, 0xea;
    sub.f16x2 %r16, %r14, %r23;
    fma.rn.f16x2 %r17, %r15, %r24, %r25;
    mov.f32 %f0, 0f00000000; mov.f32 %f1, 0f00000000; mov.f32 %f2, 0f00000000; mov.f32 %f3, 0f00000000;
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f4, %f5, %f6, %f7}, {%r3, %r4, %r5, %r6}, {%r12, %r13}, {%f0, %f1, %f2, %f3};
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f4, %f5, %f6, %f7}, {%r3, %r4, %r5, %r6}, {%r16, %r17}, {%f4, %f5, %f6, %f7};
""", (("%r1", "bits"), ("%r3", "f16x2"), ("%r4", "f16x2"), ("%r5", "f16x2"), ("%r6", "f16x2")),
    ("%r12", "%r13", "%r16", "%r17", "%f4", "%f5", "%f6", "%f7"))

# 3. fp8 quantisation: cvt.rn.satfinite.e4m3x2.f32 packs, prmt/mov combine them into the A and B
#    registers of an e4m3 mma.
case("e2e_fp8_pack_cvt_prmt_mma", "e2e", """
    .reg .b32 %r<40>; .reg .f32 %f<40>; .reg .b16 %h<12>;
    cvt.rn.satfinite.e4m3x2.f32 %h0, %f1, %f0;
    cvt.rn.satfinite.e4m3x2.f32 %h1, %f3, %f2;
    cvt.rn.satfinite.e4m3x2.f32 %h2, %f5, %f4;
    cvt.rn.satfinite.e4m3x2.f32 %h3, %f7, %f6;
    cvt.rn.satfinite.e4m3x2.f32 %h4, %f9, %f8;
    cvt.rn.satfinite.e4m3x2.f32 %h5, %f11, %f10;
    cvt.u32.u16 %r1, %h0; cvt.u32.u16 %r2, %h1; cvt.u32.u16 %r3, %h2; cvt.u32.u16 %r4, %h3;
    prmt.b32 %r10, %r1, %r2, 0x5410;
    prmt.b32 %r11, %r3, %r4, 0x5410;
    prmt.b32 %r12, %r1, %r3, 0x4051;
    prmt.b32 %r13, %r2, %r4, 0x1504;
    mov.b32 %r14, {%h4, %h5};
    mov.b32 %r15, {%h5, %h0};
    mov.f32 %f20, 0f00000000; mov.f32 %f21, 0f3F800000; mov.f32 %f22, 0fBF800000; mov.f32 %f23, 0f00000000;
    mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f24, %f25, %f26, %f27}, {%r10, %r11, %r12, %r13}, {%r14, %r15}, {%f20, %f21, %f22, %f23};
""", tuple((f"%f{i}", "f32") for i in range(12)),
    ("%h0", "%h3", "%h5", "%r10", "%r11", "%r12", "%r13", "%r14", "%r15", "%f24", "%f25", "%f26", "%f27"))

# 4. Row reduction of an mma accumulator with shfl.sync (sum and max over the quad that holds
#    each row, as softmax does).
case("e2e_mma_shfl_row_reduce", "e2e", """
    .reg .b32 %r<40>; .reg .f32 %f<40>;
    mov.f32 %f0, 0f00000000; mov.f32 %f1, 0f00000000; mov.f32 %f2, 0f00000000; mov.f32 %f3, 0f00000000;
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f4, %f5, %f6, %f7}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f0, %f1, %f2, %f3};
    add.f32 %f8, %f4, %f5;
    add.f32 %f9, %f6, %f7;
    max.f32 %f10, %f4, %f5;
    max.f32 %f11, %f6, %f7;
    shfl.sync.bfly.b32 %f12, %f8, 1, 0x1f, 0xffffffff;
    add.f32 %f8, %f8, %f12;
    shfl.sync.bfly.b32 %f12, %f8, 2, 0x1f, 0xffffffff;
    add.f32 %f8, %f8, %f12;
    shfl.sync.bfly.b32 %f13, %f9, 1, 0x1f, 0xffffffff;
    add.f32 %f9, %f9, %f13;
    shfl.sync.bfly.b32 %f13, %f9, 2, 0x1f, 0xffffffff;
    add.f32 %f9, %f9, %f13;
    shfl.sync.bfly.b32 %f14, %f10, 1, 0x1f, 0xffffffff;
    max.f32 %f10, %f10, %f14;
    shfl.sync.bfly.b32 %f14, %f10, 2, 0x1f, 0xffffffff;
    max.f32 %f10, %f10, %f14;
    shfl.sync.down.b32 %f15, %f11, 1, 0x1c1f, 0xffffffff;
    max.f32 %f11, %f11, %f15;
    shfl.sync.idx.b32 %f16, %f8, 0, 0x1c1f, 0xffffffff;
""", tuple((f"%r{i}", "f16x2") for i in range(1, 7)),
    ("%f4", "%f5", "%f6", "%f7", "%f8", "%f9", "%f10", "%f11", "%f16"))
