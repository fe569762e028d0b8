"""Hardware validation of wgmma: generated kernels, inputs, the simulator's answer.

One kernel per :class:`Case` (an instruction form, where A comes from, the swizzle and
majorness of each shared-memory operand, the number of chained K steps, scale-d and the
imm-scale/imm-trans constants).  Each of the 128 threads copies the shared-memory image from
global memory, loads its D (and A) register words, then the warpgroup runs ``nk`` wgmmas
(descriptors read from a global array: one pair per K step, so a step inside a swizzle atom is
the "+32 B on the start address" that libraries use), commits, waits and stores D.  The host
lays A and B out in the image with :func:`warpsim.tensorcore.desc.operand_addresses`; since the
GPU reads them through its own address generation, any error in that model (or in the
fragment layouts or the numerics) shows up as mismatching D words.

    python -m warpsim.validation.wgmma build DIR      # PTX, cubin (ptxas -arch=sm_90a), inputs
    python DIR/run_wgmma.py DIR                       # on the GPU: DIR/wgmma_gpu.npz
    python -m warpsim.validation.wgmma compare DIR    # simulator vs GPU, word for word
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass

import numpy as np

from warpsim.facts import formats
from warpsim.facts.swizzle import mode
from warpsim.tensorcore import wgmma as W
from warpsim.tensorcore.desc import encode, operand_addresses

SMEM = 49152
B_BASE = 16384  # A's image starts at 0, B's here (both 1024-aligned)


@dataclass(frozen=True)
class Case:
    opcode: str
    a_desc: bool = True
    swz_a: str = "128B"
    swz_b: str = "128B"
    trans_a: int = 0
    trans_b: int = 0
    nk: int = 1
    scale_a: int = 1
    scale_b: int = 1

    @property
    def ins(self) -> W.Wgmma:
        return W.decode_wgmma(self.opcode)

    @property
    def name(self) -> str:
        i = self.ins
        return (f"wg_{i.dtype}_{i.atype}_{i.btype}_n{i.n}{'_sat' if i.satfinite else ''}_"
                f"{'s' if self.a_desc else 'r'}{self.swz_a}_{self.swz_b}_t{self.trans_a}{self.trans_b}_"
                f"k{self.nk}_s{'m' if self.scale_a < 0 else 'p'}{'m' if self.scale_b < 0 else 'p'}")


# ------------------------------------------------------------------------------------------
# shared-memory layouts
# ------------------------------------------------------------------------------------------

def _layout(rows: int, ktot: int, esz: int, swz: str, major: str, base: int):
    """Descriptor fields (lbo, sbo) and per-step start addresses for a rows x ktot operand
    (ktot elements; esz bytes each, b1: bytes) stored in a canonical layout from ``base``."""
    sm = mode(swz)
    kb = ktot * esz  # bytes of K in all
    step_b = 32  # bytes of K per instruction
    if major == "K":
        if not sm.bits:  # core matrices 8 rows x 16 B; K columns LBO apart, 8-row groups SBO
            lbo, sbo = 128, (kb // 16) * 128
            starts = [base + (s * step_b // 16) * lbo for s in range(kb // step_b)]
        else:  # atoms of 8 rows x S bytes; 8-row groups SBO = 8 S apart; atom columns after all rows
            lbo, sbo = 16, 8 * sm.span
            col = (rows // 8) * sbo
            starts = [base + (s * step_b // sm.span) * col + (s * step_b) % sm.span
                      for s in range(kb // step_b)]
        return lbo, sbo, starts
    t = 16 // esz
    kstep = step_b // esz  # K per instruction (16 for 2-byte types)
    if not sm.bits:  # (mn % T) contiguous, k % 8 rows 16 B apart, k groups LBO, MN chunks SBO
        lbo = 128
        sbo = (ktot // 8) * 128
        starts = [base + (s * kstep // 8) * lbo for s in range(ktot // kstep)]
    else:  # S bytes of MN per k row, 8 k rows = one atom (8 S bytes); k groups SBO, MN atoms LBO
        sbo = 8 * sm.span
        lbo = (ktot // 8) * sbo
        starts = [base + (s * kstep // 8) * sbo for s in range(ktot // kstep)]
    del t
    return lbo, sbo, starts


def descriptors(case: Case, which: str):
    """(descriptor words per K step, element addresses (steps, rows, k))."""
    i = case.ins
    rows = 64 if which == "a" else i.n
    t = i.atype if which == "a" else i.btype
    bits = W.TYPE_BITS[t]
    esz = max(bits // 8, 1)
    kk = i.k if bits > 1 else 32  # b1: 256 bits = 32 bytes per step
    swz = case.swz_a if which == "a" else case.swz_b
    major = "MN" if (case.trans_a if which == "a" else case.trans_b) else "K"
    base = 0 if which == "a" else B_BASE
    lbo, sbo, starts = _layout(rows, kk * case.nk, esz, swz, major, base)
    words = np.array([encode(s, lbo, sbo, swz) for s in starts], dtype=np.uint64)
    addr = operand_addresses(words, rows=rows, k=kk, elem_bits=8 if bits == 1 else bits, major=major,
                             smem_bytes=SMEM)
    return words, addr


# ------------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------------

def _codes(t: str, shape, rng, kind: str) -> np.ndarray:
    """Element codes of type t: 'random' (normal values; integers uniform), 'exact' (small
    integers: every sum exact), 'special' (random bit patterns: NaN, Inf, subnormals)."""
    fmt = formats.get_format(t)
    if t == "b1":
        return rng.integers(0, 2, shape).astype(np.uint32)
    if fmt.kind != "float":
        lo, hi = (-128, 128) if t == "s8" else (0, 256)
        if t == "s32":
            lo, hi = -2**31, 2**31
        v = rng.integers(lo, hi, shape)
        if kind == "exact" and t == "s32":
            v = rng.integers(-1000, 1000, shape)
        return (v & ((1 << fmt.bits) - 1)).astype(np.uint32)
    if kind == "special":
        return rng.integers(0, 1 << fmt.bits, shape, dtype=np.uint64).astype(np.uint32)
    if kind == "exact":
        vals = rng.integers(-4, 5, shape).astype(np.float64)
    else:
        vals = rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 4, shape)
    return formats.encode(vals, t).astype(np.uint32)


def make_inputs(case: Case, seed: int, kind: str) -> dict:
    """smem image bytes, descriptor words (2, nk), A register words (nk, 128, 4), C words
    (128, nd), scale-d (uint32) of one run."""
    rng = np.random.default_rng(seed)
    i = case.ins
    img = np.zeros(SMEM, np.uint8)
    kk = i.k
    A = _codes(i.atype, (case.nk, 64, kk), rng, kind)
    B = _codes(i.btype, (case.nk, kk, i.n), rng, kind)
    wb, ab = descriptors(case, "b")
    _place(img, ab, B.transpose(0, 2, 1), i.btype)
    if case.a_desc:
        wa, aa = descriptors(case, "a")
        _place(img, aa, A, i.atype)
        areg = np.zeros((case.nk, 128, 4), np.uint32)
    else:
        wa = np.zeros(case.nk, np.uint64)
        areg = np.stack([W.pack_codes(i, "a", A[s]) for s in range(case.nk)])
    C = _codes(i.dtype, (64, i.n), rng, kind)
    creg = W.pack_codes(i, "d", C)
    sd = np.uint32(0 if kind == "random" and seed % 4 == 3 else 1)
    return {"img": img, "desc": np.stack([wa, wb]), "areg": areg, "creg": creg, "scale_d": sd}


def _place(img, addr, codes, t):
    """Write element codes at byte addresses (steps, rows, k) (b1: pack 8 per byte)."""
    bits = W.TYPE_BITS[t]
    if bits == 1:
        by = np.packbits(codes.astype(np.uint8).reshape(codes.shape[:-1] + (32, 8)), axis=-1,
                         bitorder="little")[..., 0]
        flat_a, flat_v = addr.reshape(-1), by.reshape(-1)
        assert len(np.unique(flat_a)) == flat_a.size
        img[flat_a] = flat_v
        return
    esz = bits // 8
    flat_a = addr.reshape(-1)
    assert len(np.unique(flat_a)) == flat_a.size, "layout maps two elements to one address"
    v = codes.reshape(-1).astype(np.uint32)
    for j in range(esz):
        img[flat_a + j] = (v >> (8 * j)) & 0xFF


# ------------------------------------------------------------------------------------------
# kernels
# ------------------------------------------------------------------------------------------

def kernel_ptx(case: Case) -> str:
    """The .entry of one case: params (img, desc, areg, creg, out, scale_d)."""
    i = case.ins
    nd = i.regs["d"]
    dreg = "f" if i.dtype == "f32" else "r"
    dvec = "{" + ", ".join(f"%acc{j}" for j in range(nd)) + "}"
    lines = [f".visible .entry {case.name}(.param .u64 img, .param .u64 desc, .param .u64 areg,",
             "    .param .u64 creg, .param .u64 out, .param .u32 sd)", "{",
             f"    .reg .{'f32' if dreg == 'f' else 'b32'} %acc<{nd}>;",
             f"    .reg .b32 %ra<{4 * case.nk}>; .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .pred %p<4>;",
             "    ld.param.u64 %rd1, [img]; ld.param.u64 %rd2, [desc]; ld.param.u64 %rd3, [areg];",
             "    ld.param.u64 %rd4, [creg]; ld.param.u64 %rd5, [out]; ld.param.u32 %r1, [sd];",
             "    cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;",
             "    cvta.to.global.u64 %rd3, %rd3; cvta.to.global.u64 %rd4, %rd4; cvta.to.global.u64 %rd5, %rd5;",
             "    mov.u32 %r2, %tid.x;",
             "    mov.u32 %r3, %r2;",
             "    mov.u32 %r10, smem;",
             "COPY:",
             "    mul.wide.u32 %rd6, %r3, 16; add.s64 %rd7, %rd1, %rd6;",
             "    ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd7];",
             "    shl.b32 %r8, %r3, 4; add.u32 %r8, %r8, %r10;",
             "    st.shared.v4.u32 [%r8], {%r4, %r5, %r6, %r7};",
             "    add.u32 %r3, %r3, 128;",
             f"    setp.lt.u32 %p1, %r3, {SMEM // 16};",
             "    @%p1 bra COPY;",
             f"    mul.wide.u32 %rd8, %r2, {nd * 4}; add.s64 %rd9, %rd4, %rd8;"]
    for j in range(nd):
        lines.append(f"    ld.global.{'f32' if dreg == 'f' else 'u32'} %acc{j}, [%rd9+{4 * j}];")
    if not case.a_desc:  # every step's A registers before the first wgmma (in flight until the wait)
        lines.append("    mul.wide.u32 %rd12, %r2, 16; add.s64 %rd13, %rd3, %rd12;")
        for s in range(case.nk):
            lines.append(f"    ld.global.v4.u32 {{%ra{4 * s}, %ra{4 * s + 1}, %ra{4 * s + 2}, %ra{4 * s + 3}}}, "
                         f"[%rd13+{s * 128 * 16}];")
    lines += ["    setp.ne.u32 %p2, %r1, 0;",
              "    fence.proxy.async.shared::cta;",
              "    bar.sync 0;"]
    names = i.operand_names(case.a_desc)
    for s in range(case.nk):
        lines.append(f"    ld.global.u64 %rd10, [%rd2+{8 * s}];")
        lines.append(f"    ld.global.u64 %rd11, [%rd2+{8 * (case.nk + s)}];")
        if s == 0:
            lines.append("    wgmma.fence.sync.aligned;")
        areg = "{" + ", ".join(f"%ra{4 * s + j}" for j in range(4)) + "}"
        ops = [dvec, "%rd10" if case.a_desc else areg, "%rd11"]
        for nm in names[3:]:
            ops.append({"scale-d": "%p2" if s == 0 else "1", "imm-scale-a": str(case.scale_a),
                        "imm-scale-b": str(case.scale_b), "imm-trans-a": str(case.trans_a),
                        "imm-trans-b": str(case.trans_b)}[nm])
        lines.append(f"    {case.opcode} {', '.join(ops)};")
    lines += ["    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 0;",
              f"    add.s64 %rd14, %rd5, %rd8;"]
    for j in range(nd):
        lines.append(f"    st.global.{'f32' if dreg == 'f' else 'u32'} [%rd14+{4 * j}], %acc{j};")
    lines += ["    ret;", "}"]
    return "\n".join(lines)


def module_ptx(cases) -> str:
    head = [".version 8.7", ".target sm_90a", ".address_size 64",
            f".shared .align 1024 .b8 smem[{SMEM}];", ""]
    return "\n".join(head) + "\n\n".join(kernel_ptx(c) for c in cases) + "\n"


def simulate(case: Case, inp: dict, module=None) -> np.ndarray:
    """D words (128, nd) as warpsim runs the case's kernel."""
    import warpsim
    mod = module or warpsim.Module(module_ptx([case]))
    nd = case.ins.regs["d"]
    out = np.zeros(128 * nd, np.uint32)
    desc = np.ascontiguousarray(inp["desc"]).reshape(-1)
    res = mod.launch(case.name, 1, 128, [inp["img"], desc, inp["areg"].reshape(-1), inp["creg"].reshape(-1),
                                         out, np.uint32(inp["scale_d"])], arch="sm_90a", check=False)
    return res[4].reshape(128, nd)
