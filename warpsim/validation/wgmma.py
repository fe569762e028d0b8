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
    sel: int = 0

    @property
    def ins(self) -> W.Wgmma:
        return W.decode_wgmma(self.opcode)

    @property
    def name(self) -> str:
        i = self.ins
        return (f"wg_{i.dtype}_{i.atype}_{i.btype}_n{i.n}{'_sat' if i.satfinite else ''}_"
                f"{'s' if self.a_desc else 'r'}{self.swz_a}_{self.swz_b}_t{self.trans_a}{self.trans_b}_"
                f"k{self.nk}_s{'m' if self.scale_a < 0 else 'p'}{'m' if self.scale_b < 0 else 'p'}"
                + (f"_sp{self.sel}" if i.sparse else ""))


# ------------------------------------------------------------------------------------------
# shared-memory layouts
# ------------------------------------------------------------------------------------------

def _layout(rows: int, ktot: int, esz: int, swz: str, major: str, base: int, step_b: int = 32):
    """Descriptor fields (lbo, sbo) and per-step start addresses for a rows x ktot operand
    (ktot elements; esz bytes each, b1: bytes) stored in a canonical layout from ``base``;
    ``step_b`` bytes of K per instruction (64 for a sparse B)."""
    sm = mode(swz)
    kb = ktot * esz  # bytes of K in all
    if major == "K":
        if not sm.bits:  # core matrices 8 rows x 16 B; K columns LBO apart, 8-row groups SBO
            lbo, sbo = 128, (kb // 16) * 128
            starts = [base + (s * step_b // 16) * lbo for s in range(kb // step_b)]
        else:  # atoms of 8 rows x S bytes; 8-row groups SBO = 8 S apart; atom columns after all rows
            sbo = 8 * sm.span
            col = (rows // 8) * sbo
            lbo = col if step_b > sm.span else 16  # a sparse B's 64 K bytes span two 32B atoms
            starts = [base + (s * step_b // sm.span) * col + (s * step_b) % sm.span
                      for s in range(kb // step_b)]
        return lbo, sbo, starts
    t = 16 // esz
    kstep = step_b // esz  # K per instruction (16 for 2-byte types; 32 for a sparse B)
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
    if i.sparse and which == "a":
        kk //= 2  # the compressed A
    swz = case.swz_a if which == "a" else case.swz_b
    major = "MN" if (case.trans_a if which == "a" else case.trans_b) else "K"
    base = 0 if which == "a" else B_BASE
    lbo, sbo, starts = _layout(rows, kk * case.nk, esz, swz, major, base, kk * esz)
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
    meta = np.zeros((case.nk, 128), np.uint32)
    if i.sparse:  # keep 2 of 4 (1 of 2 for tf32) at random positions, then compress per step
        cs = 2 if i.atype == "tf32" else 4
        keep = np.argsort(rng.random((case.nk, 64, kk // cs, cs)), axis=-1)[..., :cs // 2]
        mask = np.zeros((case.nk, 64, kk // cs, cs), bool)
        np.put_along_axis(mask, keep, True, axis=-1)
        vals = np.where(mask.reshape(A.shape), A.astype(np.int64) + 1, 0)  # code + 1: never 0
        comp, meta = W.compress(i, vals, selector=case.sel)
        A = (comp - 1).astype(np.uint32)
        meta = meta.astype(np.uint32)
    wb, ab = descriptors(case, "b")
    _place(img, ab, B.transpose(0, 2, 1), i.btype)
    if case.a_desc:
        wa, aa = descriptors(case, "a")
        _place(img, aa, A, i.atype)
        areg = np.zeros((case.nk, 128, 4), np.uint32)
    else:
        wa = np.zeros(case.nk, np.uint64)
        areg = np.stack([W.pack_codes(W.half(i) if i.sparse else i, "a", A[s]) for s in range(case.nk)])
    C = _codes(i.dtype, (64, i.n), rng, kind)
    creg = W.pack_codes(i, "d", C)
    sd = np.uint32(0 if kind == "random" and seed % 4 == 3 else 1)
    areg = np.concatenate([areg.reshape(-1), meta.reshape(-1)])  # metadata words after A's
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
             f"    .reg .b32 %rm<{case.nk}>; .reg .b32 %ra<{4 * case.nk}>; .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .pred %p<4>;",
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
    if i.sparse:  # every step's metadata word, after the A register words in the areg buffer
        lines.append("    mul.wide.u32 %rd12, %r2, 4; add.s64 %rd13, %rd3, %rd12;")
        for s in range(case.nk):
            lines.append(f"    ld.global.u32 %rm{s}, [%rd13+{case.nk * 128 * 16 + s * 128 * 4}];")
    if not case.a_desc:  # every step's A registers before the first wgmma (in flight until the wait)
        lines.append("    mul.wide.u32 %rd12, %r2, 16; add.s64 %rd13, %rd3, %rd12;")
        for s in range(case.nk):
            lines.append(f"    ld.global.v4.u32 {{%ra{4 * s}, %ra{4 * s + 1}, %ra{4 * s + 2}, %ra{4 * s + 3}}}, "
                         f"[%rd13+{s * 128 * 16}];")
    lines += ["    shr.u32 %r11, %r10, 4; cvt.u64.u32 %rd15, %r11;",
              "    setp.ne.u32 %p2, %r1, 0;",
              "    fence.proxy.async.shared::cta;",
              "    bar.sync 0;"]
    names = i.operand_names(case.a_desc)
    for s in range(case.nk):
        # descriptors hold offsets from smem's start; add smem's shared address (the GPU keeps
        # the first KB of shared memory for itself, so smem does not start at 0 there)
        lines.append(f"    ld.global.u64 %rd10, [%rd2+{8 * s}]; add.s64 %rd10, %rd10, %rd15;")
        lines.append(f"    ld.global.u64 %rd11, [%rd2+{8 * (case.nk + s)}]; add.s64 %rd11, %rd11, %rd15;")
        if s == 0:
            lines.append("    wgmma.fence.sync.aligned;")
        areg = "{" + ", ".join(f"%ra{4 * s + j}" for j in range(4)) + "}"
        ops = [dvec, "%rd10" if case.a_desc else areg, "%rd11"]
        for nm in names[3:]:
            ops.append({"sp-meta": f"%rm{s}", "sp-sel": str(case.sel), "scale-d": "%p2" if s == 0 else "1", "imm-scale-a": str(case.scale_a),
                        "imm-scale-b": str(case.scale_b), "imm-trans-a": str(case.trans_a),
                        "imm-trans-b": str(case.trans_b)}[nm])
        lines.append(f"    {case.opcode} {', '.join(ops)};")
    lines += ["    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 0;",
              "    add.s64 %rd14, %rd5, %rd8;"]
    for j in range(nd):
        lines.append(f"    st.global.{'f32' if dreg == 'f' else 'u32'} [%rd14+{4 * j}], %acc{j};")
    lines += ["    ret;", "}"]
    return "\n".join(lines)


def module_ptx(cases) -> str:
    head = [".version 8.7", ".target sm_90a", ".address_size 64",
            f".shared .align 1024 .b8 smem[{SMEM}];", ""]
    return "\n".join(head) + "\n\n".join(kernel_ptx(c) for c in cases) + "\n"


def simulate(case: Case, inp: dict, module=None, name: str | None = None) -> np.ndarray:
    """D words (128, nd) as warpsim runs the case's kernel (``name`` in ``module``)."""
    from warpsim.kernel.launch import Module
    mod = module or Module(module_ptx([case]))
    nd = case.ins.regs["d"]
    out = np.zeros(128 * nd, np.uint32)
    desc = np.ascontiguousarray(inp["desc"]).reshape(-1)
    res = mod.launch(name or case.name, 1, 128, [inp["img"], desc, inp["areg"].reshape(-1), inp["creg"].reshape(-1),
                                         out, np.uint32(inp["scale_d"])], arch="sm_90a", check=False)
    return res[4].reshape(128, nd)


# ------------------------------------------------------------------------------------------
# the hardware suite
# ------------------------------------------------------------------------------------------

_SWZ = ("none", "32B", "64B", "128B")


def _combos():
    out = []
    for f in W.FORMS:
        for at in f.atypes:
            for bt in f.btypes:
                for dt in f.dtypes:
                    sats = (False, True) if f.satfinite else (False,)
                    for sat in sats:
                        out.append((f, at, bt, dt, sat))
    return out


def _opcode(f, at, bt, dt, sat, n) -> str:
    return (f"wgmma.mma_async.sync.aligned.m64n{n}k{f.k}{'.satfinite' if sat else ''}.{dt}.{at}.{bt}"
            + (f".{f.bitop}" if f.bitop else ""))


@dataclass(frozen=True)
class Run:
    """One kernel launch of the suite: a case, its inputs' seed and kind, and scale-d."""
    case: Case
    seed: int
    kind: str
    scale_d: int = 1
    group: str = "shapes"


def suite() -> list[Run]:
    """Every form at every legal N (configurations rotated), numerics at N = 64 on every type
    combination and input kind, and every swizzle x swizzle x majorness pairing."""
    runs: list[Run] = []
    kinds = ("random", "exact", "special")
    i = 0
    for f, at, bt, dt, sat in _combos():
        for j, n in enumerate(f.ns):
            i += 1
            trans = f.trans and (i % 3 == 0)
            c = Case(_opcode(f, at, bt, dt, sat, n), a_desc=(i % 4 != 1),
                     swz_a=_SWZ[i % 4], swz_b=_SWZ[(i // 4) % 4], trans_a=int(trans and i % 2 == 0),
                     trans_b=int(trans), nk=1 + (i % 2),
                     scale_a=-1 if (f.scale and i % 5 == 2) else 1,
                     scale_b=-1 if (f.scale and i % 7 == 3) else 1)
            runs.append(Run(c, i, kinds[i % 3], 0 if i % 6 == 5 else 1, "shapes"))
        n = 64
        for kind in kinds:
            for seed in (1, 2):
                i += 1
                c = Case(_opcode(f, at, bt, dt, sat, n), a_desc=seed == 1, nk=2,
                         scale_a=-1 if (f.scale and seed == 2) else 1)
                runs.append(Run(c, 1000 + i, kind, 1, "numerics"))
    for at, dt in (("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("tf32", "f32"), ("e4m3", "f32"),
                   ("s8", "s32")):
        f = next(x for x in W.FORMS if at in x.atypes and dt in x.dtypes)
        for sa in _SWZ:
            for sb in _SWZ:
                for ta, tb in ((0, 0), (1, 0), (0, 1), (1, 1)) if f.trans else ((0, 0),):
                    i += 1
                    c = Case(_opcode(f, at, at, dt, False, 32), a_desc=True, swz_a=sa, swz_b=sb,
                             trans_a=ta, trans_b=tb, nk=4 if at in ("f16", "bf16", "e4m3") else 2)
                    runs.append(Run(c, 5000 + i, "exact" if i % 2 else "random", 1, "layouts"))
    runs += [Run(PROBE_CASE, v, "probe", 1, "probes") for v in range(len(PROBES))]
    return runs + sparse_suite()


def sparse_suite() -> list[Run]:
    """``wgmma.mma_async.sp``: every type combination at N = 8, 64 and 256 (integer: 8, 64, 256),
    both selectors where legal, rotating A source, swizzles and majorness, three input kinds."""
    runs: list[Run] = []
    kinds = ("random", "exact", "special")
    i = 0
    for f, at, bt, dt, sat in _combos():
        if f.bitop:
            continue
        for n in (8, 64, 256):
            for sel in ((0, 1) if f.family in ("f16", "bf16", "tf32") else (0,)):
                i += 1
                trans = f.trans and i % 3 == 0
                op = _opcode(f, at, bt, dt, sat, n).replace("mma_async.", "mma_async.sp.").replace(
                    f"k{f.k}", f"k{2 * f.k}")
                c = Case(op, a_desc=i % 4 != 1, swz_a=_SWZ[i % 4], swz_b=_SWZ[(i // 4) % 4],
                         trans_a=int(trans and i % 2 == 0), trans_b=int(trans), nk=1 + i % 2,
                         scale_a=-1 if (f.scale and i % 5 == 2) else 1, sel=sel)
                runs.append(Run(c, 9000 + i, kinds[i % 3], 0 if i % 7 == 6 else 1, "sparse"))
    return runs


#: Address probes (B through a descriptor the simulator may refuse): (swizzle, start offset
#: from B's 1024-aligned base, base offset).  A = identity blocks from registers, so that D row r
#: reads back B[r % 16, :], and shared memory holds each 2-byte slot's index + 1 as an f16.
PROBES = (("128B", 0, 0), ("128B", 32, 0), ("128B", 128, 0), ("128B", 128, 1), ("128B", 256, 0),
          ("128B", 256, 2), ("128B", 640, 0), ("128B", 640, 5), ("128B", 0, 1), ("128B", 0, 3),
          ("64B", 128, 0), ("64B", 128, 1), ("64B", 0, 1), ("32B", 128, 0), ("32B", 128, 1),
          ("32B", 0, 1), ("none", 0, 1))
PROBE_CASE = Case("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16", a_desc=False, nk=1)


def probe_inputs(variant: int) -> dict:
    swz, off, base = PROBES[variant]
    i = PROBE_CASE.ins
    img = np.zeros(SMEM, np.uint8)
    slots = np.arange(2047)
    img[B_BASE:B_BASE + 2 * 2047] = formats.encode(slots + 1.0, "f16").view(np.uint8)
    sbo = {"128B": 1024, "64B": 512, "32B": 256, "none": 256}[swz]
    lbo = 16 if swz != "none" else 128
    desc = encode(B_BASE + off, lbo, sbo, swz, base_offset=base)
    A = np.zeros((64, 16))
    A[np.arange(64), np.arange(64) % 16] = 1.0
    areg = W.pack(i, "a", A)[None]
    return {"img": img, "desc": np.array([[0], [desc]], np.uint64), "areg": areg,
            "creg": np.zeros((128, i.regs["d"]), np.uint32), "scale_d": np.uint32(1)}


def probe_addresses(words: np.ndarray) -> np.ndarray:
    """(16 n, 16 k) byte address each element of B was read from, from a probe's D words."""
    D = W.unpack(PROBE_CASE.ins, "d", words)  # (64, 16): row r = B[r % 16, :]
    slot = D[:16].T - 1  # (n, k)
    return B_BASE + 2 * slot.astype(np.int64)


def _digest(words: np.ndarray) -> str:
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(words, dtype=np.uint32).tobytes()).hexdigest()[:32]


def _run_inputs(run: Run) -> dict:
    if run.kind == "probe":
        return probe_inputs(run.seed)
    inp = make_inputs(run.case, run.seed, run.kind)
    inp["scale_d"] = np.uint32(run.scale_d)
    return inp


def rebuild_kernels(out_dir: str, ptxas: str | None = None) -> None:
    """Regenerate wgmma.ptx and wgmma.cubin of a built suite (same cases and inputs)."""
    with open(os.path.join(out_dir, "manifest.json")) as fh:
        man = json.load(fh)
    cases = [Case(**c) for c in man["cases"]]
    with open(os.path.join(out_dir, "wgmma.ptx"), "w") as fh:
        fh.write(module_ptx_named(cases, man["names"]))
    subprocess.run([ptxas or _ptxas(), "-arch=sm_90a", os.path.join(out_dir, "wgmma.ptx"), "-o",
                    os.path.join(out_dir, "wgmma.cubin")], check=True)


def build(out_dir: str, ptxas: str | None = None, limit: int | None = None, groups=None) -> dict:
    """Write the suite for the GPU into ``out_dir``: wgmma.ptx, wgmma.cubin, inputs.npz,
    manifest.json (cases, runs and the simulator's digest of every run's D words)."""
    from warpsim.kernel.launch import Module
    from warpsim.kernel.sanitizer import SanitizerError

    os.makedirs(out_dir, exist_ok=True)
    runs = [r for r in suite() if groups is None or r.group in groups][:limit]
    cases: list[Case] = []
    index: dict = {}
    for r in runs:
        if r.case not in index:
            index[r.case] = len(cases)
            cases.append(r.case)
    names = [f"k{j}" for j in range(len(cases))]
    ptx = module_ptx_named(cases, names)
    with open(os.path.join(out_dir, "wgmma.ptx"), "w") as fh:
        fh.write(ptx)
    px = ptxas or _ptxas()
    subprocess.run([px, "-arch=sm_90a", os.path.join(out_dir, "wgmma.ptx"), "-o",
                    os.path.join(out_dir, "wgmma.cubin")], check=True)
    mod = Module(ptx)
    arrays = {}
    manifest = {"cases": [asdict(c) for c in cases], "names": names, "runs": []}
    for j, r in enumerate(runs):
        inp = _run_inputs(r)
        try:
            d = simulate(r.case, inp, mod, names[index[r.case]])
            digest = _digest(d)
        except SanitizerError as e:  # probes of what the simulator refuses
            if r.kind != "probe":
                raise
            d, digest = np.zeros((128, r.case.ins.regs["d"]), np.uint32), "refused: " + str(e)[-200:]
        for k, v in inp.items():
            if k != "scale_d":
                arrays[f"r{j}_{k}"] = v
        manifest["runs"].append({"case": index[r.case], "seed": r.seed, "kind": r.kind,
                                 "scale_d": r.scale_d, "group": r.group, "digest": digest,
                                 "nd": int(d.shape[1])})
    np.savez_compressed(os.path.join(out_dir, "inputs.npz"), **arrays)
    with open(os.path.join(out_dir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh)
    return manifest


def module_ptx_named(cases, names) -> str:
    head = [".version 8.7", ".target sm_90a", ".address_size 64",
            f".shared .align 1024 .b8 smem[{SMEM}];", ""]
    body = []
    for c, nm in zip(cases, names):
        body.append(kernel_ptx(c).replace(f".entry {c.name}(", f".entry {nm}(", 1))
    return "\n".join(head) + "\n\n".join(body) + "\n"


def _ptxas() -> str:
    try:
        import nvidia.cu13  # noqa: F401  (pip install nvidia-cuda-nvcc==13.5.37)
        p = os.path.join(os.path.dirname(nvidia.cu13.__path__[0] + "/"), "bin", "ptxas")
        if os.path.exists(p):
            return p
    except ImportError:
        pass
    return "ptxas"


# ------------------------------------------------------------------------------------------
# comparing, fixtures
# ------------------------------------------------------------------------------------------

def compare(build_dir: str, gpu_dir: str) -> dict:
    """Simulator digests (manifest) vs the GPU's (wgmma_gpu.npz): counts per group and form
    family, the mismatching runs, and the probe address maps."""
    with open(os.path.join(build_dir, "manifest.json")) as fh:
        man = json.load(fh)
    z = np.load(os.path.join(gpu_dir, "wgmma_gpu.npz"))
    dig = z["digests"]
    out = {"runs": len(man["runs"]), "words": 0, "groups": {}, "mismatch": [], "probes": {}}
    for j, r in enumerate(man["runs"]):
        c = Case(**man["cases"][r["case"]])
        if r["kind"] == "probe":
            w = z[f"w{j}"] if f"w{j}" in z.files else None
            if w is not None:
                out["probes"][str(PROBES[r["seed"]])] = probe_addresses(w)
            continue
        ok = dig[j] == r["digest"]
        out["words"] += 128 * r["nd"]
        fam = c.ins.family
        g = out["groups"].setdefault(f"{r['group']}/{fam}", [0, 0])
        g[0] += 1
        g[1] += int(not ok)
        if not ok:
            out["mismatch"].append(j)
    return out


def write_fixture(build_dir: str, gpu_dir: str, path: str, max_nd: int = 32) -> int:
    """tests/data fixture: every run's spec and GPU digest, and the GPU's D words of the runs
    the GPU returned whole (those with at most ``max_nd`` registers)."""
    with open(os.path.join(build_dir, "manifest.json")) as fh:
        man = json.load(fh)
    z = np.load(os.path.join(gpu_dir, "wgmma_gpu.npz"))
    specs = []
    arrays = {}
    for j, r in enumerate(man["runs"]):
        specs.append({"case": man["cases"][r["case"]], "seed": r["seed"], "kind": r["kind"],
                      "scale_d": r["scale_d"], "group": r["group"], "gpu": str(z["digests"][j])})
        if f"w{j}" in z.files and r["nd"] <= max_nd:
            arrays[f"w{j}"] = z[f"w{j}"]
    np.savez_compressed(path, specs=np.array(json.dumps(specs)), **arrays)
    return len(arrays)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--ptxas")
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("gpu_dir")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        m = build(a.dir, a.ptxas)
        print(f"{len(m['runs'])} runs, {len(m['cases'])} kernels in {a.dir}; on the GPU: "
              f"python run_wgmma_gpu.py {a.dir} OUT (copy warpsim/validation/run_wgmma_gpu.py there)")
    else:
        res = compare(a.dir, a.gpu_dir)
        print(json.dumps({k: v for k, v in res.items() if k != "probes"}, default=str))
        for k, v in res["probes"].items():
            print(k, v[0, :8].tolist(), v[1, :8].tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main())
