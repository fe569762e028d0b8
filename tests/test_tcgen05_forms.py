"""tcgen05 forms on the machine beyond the dense cta_group::1 GEMM: .ws, block-scaled kinds with
scale factors in Tensor Memory, fp6/fp4 operands in shared memory, the 128B/32B-atom swizzle,
tcgen05.cp multicast and decompression, cta_group::2 with M=128.

One generated kernel stages A and B images in shared memory, writes a random image into all
256 Tensor Memory columns, issues one statement from thread 0 (an mma, or a cp), commits, waits
and reads every column back.  The expected image is built here from layouts restated from their
sources (CuTe ``tmem_frg*`` / ``tmem_sf_frg`` atoms, the PTX ISA packed formats) and the
matrix-level model (warpsim.tensorcore.tcgen05).  ptxas 13.5 accepts every statement used
(tests/data/ptxas_truth_tcgen05.jsonl.gz covers their forms).  No Blackwell GPU has run them.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warpsim
from warpsim.facts import formats
from warpsim.tensorcore import tcgen05 as T

COLS = 256
#: cases run only with WARPSIM_TCGEN05_FULL=1 (CI runs a sample: its time budget)
FULL = pytest.mark.skipif(not os.environ.get("WARPSIM_TCGEN05_FULL"), reason="WARPSIM_TCGEN05_FULL=1")


def _kernel(stmt: str, sa: int, sb: int, cg: int = 1, target: str = "sm_100a") -> str:
    """The harness kernel; ``stmt`` may use %r16 (TMEM base + D offset), %r17 (A), %r18 (SFA),
    %r19 (SFB) -- offsets substituted by the caller --, %rd15 / %rd17 (A / B descriptors with
    the shared-memory start added), %r15 (idesc), %p4 (enable-input-d)."""
    vec = "{" + ", ".join(f"%r{20 + i}" for i in range(128)) + "}"
    def block(cb, load):
        lines = []
        if load:
            lines += [f"    ld.global.v4.b32 {{%r{20 + 4 * i}, %r{21 + 4 * i}, %r{22 + 4 * i}, %r{23 + 4 * i}}}, "
                      f"[%rd13+{cb * 512 + 16 * i}];" for i in range(32)]
            lines += [f"    add.u32 %r160, %r13, {cb * 128};",
                      f"    tcgen05.st.sync.aligned.32x32b.x128.b32 [%r160], {vec};"]
        else:
            lines += [f"    add.u32 %r160, %r13, {cb * 128};",
                      f"    tcgen05.ld.sync.aligned.32x32b.x128.b32 {vec}, [%r160];",
                      "    tcgen05.wait::ld.sync.aligned;"]
            lines += [f"    st.global.v4.b32 [%rd19+{cb * 512 + 16 * i}], {{%r{20 + 4 * i}, %r{21 + 4 * i}, "
                      f"%r{22 + 4 * i}, %r{23 + 4 * i}}};" for i in range(32)]
        return "\n".join(lines)

    sync = ("    barrier.cluster.arrive.aligned;\n    barrier.cluster.wait.aligned;" if cg == 2 else "    bar.sync 0;")
    commit = ("    mov.b16 %rs1, 3;\n    tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster."
              "multicast::cluster.b64 [%r10], %rs1;" if cg == 2 else
              "    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r10];")
    return f""".version 9.0
.target {target}
.address_size 64
.visible .entry one(.param .u64 pA, .param .u64 pB, .param .u64 pT, .param .u64 pOut, .param .u32 pI,
                    .param .u64 pDA, .param .u64 pDB)
{{
    .reg .b32 %r<200>;
    .reg .b64 %rd<40>;
    .reg .b16 %rs<4>;
    .reg .pred %p<8>;
    .shared .align 1024 .b8 sA[{sa}];
    .shared .align 1024 .b8 sB[{sb}];
    .shared .align 8 .b64 mbar;
    .shared .align 16 .b32 tslot;
    ld.param.u64 %rd1, [pA];
    ld.param.u64 %rd2, [pB];
    ld.param.u64 %rd3, [pT];
    ld.param.u64 %rd4, [pOut];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    mov.u32 %r190, %cluster_ctarank;
    mul.wide.u32 %rd30, %r190, {sa};
    add.u64 %rd1, %rd1, %rd30;
    mul.wide.u32 %rd30, %r190, {sb};
    add.u64 %rd2, %rd2, %rd30;
    mul.wide.u32 %rd30, %r190, {128 * COLS * 4};
    add.u64 %rd3, %rd3, %rd30;
    add.u64 %rd4, %rd4, %rd30;
    mul.lo.u32 %r3, %r1, 16;
CA:
    setp.lt.u32 %p1, %r3, {sa};
    @!%p1 bra CAD;
    cvt.u64.u32 %rd10, %r3;
    add.u64 %rd11, %rd1, %rd10;
    ld.global.v4.b32 {{%r4, %r5, %r6, %r7}}, [%rd11];
    mov.u32 %r8, sA;
    add.u32 %r8, %r8, %r3;
    st.shared.v4.b32 [%r8], {{%r4, %r5, %r6, %r7}};
    add.u32 %r3, %r3, 2048;
    bra CA;
CAD:
    mul.lo.u32 %r3, %r1, 16;
CB:
    setp.lt.u32 %p1, %r3, {sb};
    @!%p1 bra CBD;
    cvt.u64.u32 %rd10, %r3;
    add.u64 %rd11, %rd2, %rd10;
    ld.global.v4.b32 {{%r4, %r5, %r6, %r7}}, [%rd11];
    mov.u32 %r8, sB;
    add.u32 %r8, %r8, %r3;
    st.shared.v4.b32 [%r8], {{%r4, %r5, %r6, %r7}};
    add.u32 %r3, %r3, 2048;
    bra CB;
CBD:
    fence.proxy.async.shared::cta;
    setp.eq.u32 %p2, %r2, 0;
    @!%p2 bra AL;
    mov.u32 %r9, tslot;
    tcgen05.alloc.cta_group::{cg}.sync.aligned.shared::cta.b32 [%r9], {COLS};
AL:
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra INI;
    mov.u32 %r10, mbar;
    mbarrier.init.shared::cta.b64 [%r10], 1;
INI:
    tcgen05.fence::before_thread_sync;
{sync}
    tcgen05.fence::after_thread_sync;
    ld.shared.b32 %r11, [tslot];
    shl.b32 %r12, %r2, 21;
    add.u32 %r13, %r11, %r12;
    cvt.u64.u32 %rd12, %r1;
    mul.lo.u64 %rd12, %rd12, {COLS * 4};
    add.u64 %rd13, %rd3, %rd12;
    add.u64 %rd19, %rd4, %rd12;
{block(0, True)}
{block(1, True)}
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
{sync}
    tcgen05.fence::after_thread_sync;
    or.b32 %r191, %r1, %r190;
    setp.ne.u32 %p3, %r191, {0 if cg == 2 else 0};
    @%p3 bra ISS;
    ld.param.u64 %rd5, [pDA];
    ld.param.u64 %rd6, [pDB];
    mov.u32 %r14, sA;
    shr.u32 %r14, %r14, 4;
    cvt.u64.u32 %rd14, %r14;
    add.u64 %rd15, %rd5, %rd14;
    mov.u32 %r14, sB;
    shr.u32 %r14, %r14, 4;
    cvt.u64.u32 %rd14, %r14;
    add.u64 %rd17, %rd6, %rd14;
    ld.param.u32 %r15, [pI];
    setp.eq.u32 %p4, %r1, 0;
{stmt}
    mov.u32 %r10, mbar;
{commit}
ISS:
    mov.u32 %r10, mbar;
W:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r10], 0;
    @!%p5 bra W;
    tcgen05.fence::after_thread_sync;
{block(0, False)}
{block(1, False)}
    tcgen05.fence::before_thread_sync;
{sync}
    @!%p2 bra DN;
    tcgen05.dealloc.cta_group::{cg}.sync.aligned.b32 %r11, {COLS};
DN:
    ret;
}}
"""


def _offsets(stmt: str, d=0, a=0, sfa=0, sfb=0) -> str:
    pre = "\n".join(f"    add.u32 %r{16 + i}, %r11, {v};" for i, v in enumerate((d, a, sfa, sfb)))
    return pre + "\n    " + stmt


def launch(stmt, A_img, B_img, tmem, idesc=0, da=0, db=0, cg=1, target="sm_100a"):
    """Run the harness; images per CTA (cg CTAs): A_img (cg, bytes), tmem (cg, 128, COLS) u32."""
    A_img, B_img = np.atleast_2d(A_img).astype(np.uint8), np.atleast_2d(B_img).astype(np.uint8)
    sa, sb = A_img.shape[1], B_img.shape[1]
    ptx = _kernel(stmt, sa, sb, cg, target)
    out = warpsim.launch(ptx, "one", grid=cg, block=128, arch=target, check=False,
                         cluster=(cg, 1, 1) if cg == 2 else None,
                         args=[A_img.ravel(), B_img.ravel(), np.ascontiguousarray(tmem, np.uint32).ravel(),
                               np.zeros(cg * 128 * COLS, np.uint32), np.uint32(idesc), np.uint64(da),
                               np.uint64(db)])
    return out[3].reshape(cg, 128, COLS)


# --- shared-memory images, restated from the PTX ISA canonical layouts ----------------------------

def k_major(rowbytes: np.ndarray) -> tuple[np.ndarray, int]:
    """No-swizzle K-major image of a (rows, kbytes) byte matrix: 8-row x 16-byte core matrices,
    LBO 128 between them along K, SBO = kbytes / 16 * 128 between 8-row groups.  Returns the
    image and the descriptor word (start 0, version 1)."""
    rows, kb = rowbytes.shape
    lbo, sbo = 128, kb // 16 * 128
    img = np.zeros(rows // 8 * sbo, np.uint8)
    r, k = np.meshgrid(np.arange(rows), np.arange(kb), indexing="ij")
    img[(r % 8) * 16 + (r // 8) * sbo + k % 16 + (k // 16) * lbo] = rowbytes
    return img, T.SmemDescriptor(0, lbo, sbo).encode()


def pack_padded(codes: np.ndarray, bits: int, rng) -> np.ndarray:
    """(rows, K) 4/6-bit codes -> (rows, K) bytes: each 16 elements packed little-endian into a
    16-byte chunk (.b4x16_p64: 8 data bytes; .b6x16_p32: 12), the padding random (ignored)."""
    rows, k = codes.shape
    bitsv = ((codes.reshape(rows, k // 16, 16, 1) >> np.arange(bits)) & 1).astype(np.uint8)
    data = np.packbits(bitsv.reshape(rows, k // 16, 16 * bits), axis=-1, bitorder="little")
    pad = rng.integers(0, 256, (rows, k // 16, 16 - 2 * bits), dtype=np.uint8)
    return np.concatenate([data, pad], -1).reshape(rows, k)


def pack_dense4(codes: np.ndarray) -> np.ndarray:
    """(rows, K) e2m1 codes -> (rows, K/2) bytes, two per byte (even k in the low nibble)."""
    return (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)


def random_codes(t: str, shape, rng) -> np.ndarray:
    """Random finite codes of type ``t`` (values kept small so sums stay well inside range)."""
    v = rng.standard_normal(shape)
    return formats.encode(v, t).astype(np.uint64)


# --- Tensor Memory layouts of D, restated from CuTe's tmem_frg atoms ------------------------------

def d_cells(m, n, cg=1, ws=False):
    """{(peer, lane, col)} of D(m, n), as three (M, N) arrays (CuTe tmem_frg_1sm, tmem_frg_2sm
    Interleaved, tmem_frg_ws: M64 ((16,4),N):((1,32),128), M128 (128,N):(1,128), 2SM/ws M64
    (64,(N/2,2)):(1,(128,64)), ws M32 (32,(N/4,4)):(1,(128,32)))."""
    P, L, C = (np.zeros((m, n), int) for _ in range(3))
    ml = m // cg
    for i in range(m):
        for j in range(n):
            p, r = divmod(i, ml)
            if ml == 128:
                lane, col = r, j
            elif ml == 64 and cg == 1 and not ws:
                lane, col = (r % 16) + 32 * (r // 16), j
            else:
                g = 128 // ml
                lane, col = r + ml * (j // (n // g)), j % (n // g)
            P[i, j], L[i, j], C[i, j] = p, lane, col
    return P, L, C


def _mma_case(kind, m, n, atype, btype, dtype="f32", ws=False, block=None, stype=None, seed=0,
              enable=True, d_off=32, zcm=None, a_tmem=None, **fields):
    rng = np.random.default_rng(seed)
    ins = T.make(kind, (m, n), dtype=dtype, atype=atype, btype=btype, block=block, stype=stype,
                 ws=ws, **fields)
    k = ins.k
    a = random_codes(atype, (m, k), rng)
    b = random_codes(btype, (k, n), rng)
    ebits = {"e2m1": 4, "e2m3": 6, "e3m2": 6}
    def image(codes, t):
        if kind in ("mxf4", "mxf4nvf4"):
            return k_major(pack_dense4(codes.astype(np.uint8)))
        if t in ebits:
            return k_major(pack_padded(codes.astype(np.uint8), ebits[t], rng))
        esz = {"f16": 2, "bf16": 2, "tf32": 4}.get(t, 1)
        by = codes.astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[esz]).view(np.uint8)
        return k_major(by.reshape(codes.shape[0], -1))
    zshift = (zcm >> 56) & 63 if zcm is not None else 0
    if zshift:  # B holds N + shift columns (rounded up to the 8-row core matrices)
        b_all = random_codes(btype, (k, n + -(-zshift // 8) * 8), rng)
        b = b_all[:, zshift:zshift + n]
    else:
        b_all = b
    A_img, da = image(a, atype)
    B_img, db = image(b_all.T.copy(), btype)
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    P, L, C = d_cells(m, n, 1, ws)
    L, C = L, C + d_off
    c_codes = tmem[0, L, C] & (0xFFFF if dtype == "f16" else 0xFFFFFFFF)
    extra, kw = "", {}
    op = ins.opcode
    if block:
        v = ins.scale_vec
        sfa = rng.integers(120, 134, (m, v)).astype(np.uint32) if stype == "ue8m0" else \
            formats.encode(2.0 ** rng.integers(-2, 3, (m, v)), "ue4m3").astype(np.uint32)
        sfb = rng.integers(120, 134, (v, n)).astype(np.uint32) if stype == "ue8m0" else \
            formats.encode(2.0 ** rng.integers(-2, 3, (v, n)), "ue4m3").astype(np.uint32)
        # CuTe tmem_sf_frg (4by1): row r at lane r%32 of every quarter, column r//32, byte id+j
        for (s, nmn, col0, sid) in ((sfa, m, 192, ins.a_scale_id), (sfb.T, n, 224, ins.b_scale_id)):
            for r in range(nmn):
                for j in range(v):
                    for q in range(4):
                        cell = tmem[0, r % 32 + 32 * q, col0 + r // 32]
                        sh = 8 * (sid + j)
                        tmem[0, r % 32 + 32 * q, col0 + r // 32] = (int(cell) & ~(0xFF << sh) | int(s[r, j]) << sh) & 0xFFFFFFFF
        kw = dict(sa=sfa, sb=sfb)
        extra = ", [%r18], [%r19]"
    if zcm is not None:  # .ws zero-column mask descriptor in %rd38
        extra = ", %rd38"
    a_arg = "%rd15"
    if a_tmem is not None:  # A in TMEM at column a_tmem, M=128: row m in lane m, K bytes along
        # the columns (four per 32-bit cell); mxf4: two e2m1 per byte, even k low; f8f6f4 fp4 /
        # fp6: one per byte at bits 5:2 / 6:1 (CUTLASS cp_narrow_a_to_tmem_mma.py), the holder's
        # other bits random (the mma reads only the code [INF])
        if kind in ("mxf4", "mxf4nvf4"):
            by = pack_dense4(a.astype(np.uint8))
        else:
            sh = {"e2m1": 2, "e2m3": 1, "e3m2": 1}.get(atype, 0)
            keep = 0xFF ^ (((1 << ebits.get(atype, 8)) - 1) << sh)
            junk = rng.integers(0, 256, a.shape).astype(np.uint8) & np.uint8(keep)
            by = (a.astype(np.uint8) << np.uint8(sh)) | junk
        w = by.astype(np.uint32).reshape(m, -1, 4)
        tmem[0, :m, a_tmem:a_tmem + w.shape[1]] = w[..., 0] | w[..., 1] << 8 | w[..., 2] << 16 | w[..., 3] << 24
        a_arg = "[%r17]"
    stmt = _offsets(f"{op} [%r16], {a_arg}, %rd17, %r15, {'%p4' if enable else 0}{extra};"
                    if zcm is not None else
                    f"{op} [%r16], {a_arg}, %rd17, %r15{extra}, {'%p4' if enable else 0};",
                    d=d_off, a=a_tmem or 0, sfa=192, sfb=224)
    if zcm is not None:
        stmt = f"mov.b64 %rd38, {zcm:#x};\n" + stmt
        b = b.copy()
        b[:, _zero_cols(zcm, m, n)] = 0  # the model: masked columns of B are +0
    out = launch(stmt, A_img, B_img, tmem, ins.idesc, da, db)
    want = tmem.copy()
    d = T.compute_codes(ins, a, b, c_codes, enable_input_d=enable, **kw).astype(np.uint32)
    # f16 D: the code in the low half of the cell, the high half zero [INF, as the machine does]
    want[0, L, C] = d
    return out, want


FORMS = [
    pytest.param(dict(kind="f16", m=32, n=64, atype="f16", btype="f16", ws=True), id="ws-m32n64-f16"),
    pytest.param(dict(kind="f16", m=64, n=128, atype="bf16", btype="bf16", ws=True), id="ws-m64n128-bf16", marks=FULL),
    pytest.param(dict(kind="f16", m=64, n=64, atype="f16", btype="f16"), id="m64n64-f16", marks=FULL),
    pytest.param(dict(kind="f8f6f4", m=128, n=64, atype="e2m1", btype="e3m2"), id="f8f6f4-e2m1xe3m2"),
    pytest.param(dict(kind="f8f6f4", m=128, n=32, atype="e2m3", btype="e4m3", dtype="f16"), id="f8f6f4-e2m3xe4m3-f16", marks=FULL),
    pytest.param(dict(kind="mxf8f6f4", m=128, n=64, atype="e4m3", btype="e2m1", block=32, stype="ue8m0",
                      a_scale_id=1, b_scale_id=3), id="mxf8f6f4-scale-ids"),
    pytest.param(dict(kind="mxf4", m=128, n=128, atype="e2m1", btype="e2m1", block=32, stype="ue8m0",
                      a_scale_id=2), id="mxf4-2x", marks=FULL),
    pytest.param(dict(kind="mxf4nvf4", m=128, n=64, atype="e2m1", btype="e2m1", block=16, stype="ue4m3"),
                 id="mxf4nvf4-4x-ue4m3"),
]


def _zero_cols(desc, m, n):
    """The zero-column mask restated (ISA examples 2-4, CUTLASS MaskAndShiftB): sub-mask i of
    128/M covers its N*M/128 D columns; from the LSB it alternates skip+1 ones (B read as 0)
    and use+1 zeros, starting with ones when first_i is 1, start_i columns into that pattern."""
    if not desc >> 39 & 1:
        return np.zeros(n, bool)
    zero, use = ((desc >> 40) & 0xFF) + 1, ((desc >> 48) & 0xFF) + 1
    out = []
    for i in range(128 // m):
        first, start = desc >> (32 + i) & 1, desc >> 8 * i & 0xFF
        runs = ([1] * zero + [0] * use) if first else ([0] * use + [1] * zero)
        out += [bool(runs[(p + start) % (zero + use)]) for p in range(n * m // 128)]
    return np.array(out)


def _zcm(starts, firsts, skip, use=None, nonzero=1, shift=0):
    d = sum(s_ << 8 * i for i, s_ in enumerate(starts)) | sum(f << 32 + i for i, f in enumerate(firsts))
    return d | nonzero << 39 | skip << 40 | (skip if use is None else use) << 48 | shift << 56


#: the ISA's Examples 2-4 (skip span 2, use span 3), each output sub-mask as the ISA prints it
#: (MSB ... LSB, spaces and the leading "..." dropped); example 4 also has a column shift of 2
ISA_ZCM_EXAMPLES = [
    (128, _zcm((0, 0, 0, 0), (0, 0, 0, 0), 2, 3), ["11100001110000"]),
    (64, _zcm((0, 0, 0, 0), (1, 0, 0, 0), 2, 3), ["11100001110000111", "000011100001110000"]),
    (32, _zcm((0, 1, 2, 1), (1, 1, 0, 0), 2, 3, shift=2),
     ["00001110000111", "0000111000011", "111000011100", "1110000111000"]),
]


def test_isa_zero_column_mask_examples():
    """The ISA's Examples 1-4 (unequal spans: skip 2 -> runs of three 1s, use 3 -> runs of four
    0s, as its printed masks and CUTLASS's MaskAndShiftB comments say) and its example-4 shift."""
    for m, desc, masks in ISA_ZCM_EXAMPLES:
        z = T.zero_columns(desc, m, 64).reshape(128 // m, -1).astype(int)
        for i, printed in enumerate(masks):
            lsb_first = printed[::-1]
            assert "".join(map(str, z[i, :len(lsb_first)])) == lsb_first, (m, i)
        assert np.array_equal(z.ravel(), _zero_cols(desc, m, 64))
    assert T.zcm_shift(ISA_ZCM_EXAMPLES[2][1], 32, 8) == 2
    # Example 1: non-zero-mask bit 0 -> no column masked
    assert not T.zero_columns(_zcm((0,) * 4, (0,) * 4, 4, 3, nonzero=0), 128, 64).any()
    for bad, m, mx in ((_zcm((0,) * 4, (1,) * 4, 2, shift=17), 32, 32),   # ISA: at most 16 for M=32
                       (_zcm((0,) * 4, (1,) * 4, 2, shift=9), 128, 8)):   # past the idesc maximum
        with pytest.raises(warpsim.errors.PtxError, match="shift"):
            T.zcm_shift(bad, m, mx)
    with pytest.raises(warpsim.errors.PtxError, match="first run"):  # start past the first run
        T.zero_columns(_zcm((3,) * 4, (1,) * 4, 2, 5), 128, 64)


@settings(max_examples=60, deadline=None)
@given(m=st.sampled_from([32, 64, 128]), n=st.sampled_from([64, 128, 256]), skip=st.integers(0, 20),
       use=st.integers(0, 20), firsts=st.lists(st.integers(0, 1), min_size=4, max_size=4),
       starts=st.lists(st.integers(0, 255), min_size=4, max_size=4), nonzero=st.integers(0, 1))
def test_zero_columns_property(m, n, skip, use, firsts, starts, nonzero):
    """zero_columns equals the run-by-run restatement for every start inside its first run, and
    refuses (PtxError) a start past it -- where the ISA's wording and a third-party simulator
    disagree."""
    starts = [s_ % ((skip + 1) if f else (use + 1)) if i % 2 else s_ for i, (s_, f) in enumerate(zip(starts, firsts))]
    desc = _zcm(starts, firsts, skip, use, nonzero=nonzero)
    inside = all(s_ < ((skip + 1) if f else (use + 1)) for s_, f in list(zip(starts, firsts))[:128 // m])
    if inside or not nonzero:
        assert np.array_equal(T.zero_columns(desc, m, n), _zero_cols(desc, m, n))
    else:
        with pytest.raises(warpsim.errors.PtxError, match="first run"):
            T.zero_columns(desc, m, n)


def test_matrix_level_zero_column_mask():
    """warpsim.tensorcore.tcgen05.matmul with zero_column_mask: B of N + shift columns, D column j
    from B column j + shift, masked columns +0."""
    rng = np.random.default_rng(4)
    ins = T.make("f16", (32, 64), dtype="f32", atype="f16", ws=True, max_shift=8)
    a, b = rng.standard_normal((32, 16)), rng.standard_normal((16, 72))
    desc = ISA_ZCM_EXAMPLES[2][1]
    d = T.matmul(ins, a, b, zero_column_mask=desc)
    bb = b[:, 2:66].copy()
    bb[:, _zero_cols(desc, 32, 64)] = 0
    assert np.array_equal(d, T.matmul(ins, a, bb))
    assert not np.array_equal(d, T.matmul(ins, a, b[:, :64]))
    with pytest.raises(warpsim.errors.ShapeError):
        T.matmul(ins, a, b[:, :65], zero_column_mask=desc)


ZCM = [
    pytest.param(dict(kind="f16", m=32, n=64, atype="f16", btype="f16", ws=True,
                      zcm=_zcm((0, 1, 2, 1), (1, 1, 0, 0), 2)), id="ws-zcm-m32n64-f16"),
    pytest.param(dict(kind="tf32", m=128, n=64, atype="tf32", btype="tf32", ws=True,
                      zcm=_zcm((3, 0, 0, 0), (0, 0, 0, 0), 4)), id="ws-zcm-m128n64-tf32"),
    pytest.param(dict(kind="f16", m=32, n=64, atype="bf16", btype="bf16", ws=True, max_shift=8,
                      zcm=ISA_ZCM_EXAMPLES[2][1]), id="ws-zcm-isa-example4-shift2"),
    pytest.param(dict(kind="f8f6f4", m=64, n=128, atype="e4m3", btype="e4m3", ws=True, max_shift=16,
                      zcm=_zcm((1, 6, 0, 0), (1, 0, 0, 0), 1, 6, shift=13)), id="ws-zcm-m64-unequal-shift13"),
    pytest.param(dict(kind="f8f6f4", m=64, n=128, atype="e4m3", btype="e2m1", ws=True,
                      zcm=_zcm((1, 7, 0, 0), (1, 0, 0, 0), 7)), id="ws-zcm-m64n128-f8f6f4",
                 marks=FULL),
    pytest.param(dict(kind="f16", m=128, n=64, atype="bf16", btype="bf16", ws=True, max_shift=32,
                      zcm=_zcm((9, 0, 0, 0), (1, 0, 0, 0), 2, nonzero=0, shift=24)),
                 id="ws-zcm-off-shift24", marks=FULL),
]


A_TMEM_FP4 = [
    pytest.param(dict(kind="mxf4", m=128, n=64, atype="e2m1", btype="e2m1", block=32, stype="ue8m0",
                      a_tmem=160), id="mxf4-a-tmem"),
    pytest.param(dict(kind="mxf4nvf4", m=128, n=32, atype="e2m1", btype="e2m1", block=16,
                      stype="ue4m3", a_tmem=168), id="mxf4nvf4-a-tmem", marks=FULL),
]


@pytest.mark.parametrize("case", A_TMEM_FP4)
def test_mxf4_a_in_tensor_memory_matches_the_model(case):
    """kind::mxf4 / mxf4nvf4 with A in Tensor Memory: two e2m1 per byte (ISA "Packing format used
    for matrix A by .kind::mxf4 and .kind::mxf4nvf4 in Tensor Memory"; even k in the low nibble as
    in shared memory [INF]), bytes four per 32-bit cell along the columns."""
    out, want = _mma_case(**case)
    assert np.array_equal(out, want)


SUB_BYTE_A_TMEM = [
    pytest.param(dict(kind="f8f6f4", m=128, n=64, atype="e2m1", btype="e4m3", a_tmem=160),
                 id="f8f6f4-e2m1-a-tmem"),
    pytest.param(dict(kind="mxf8f6f4", m=128, n=32, atype="e3m2", btype="e2m1", block=32,
                      stype="ue8m0", a_tmem=168), id="mxf8f6f4-e3m2-a-tmem"),
    pytest.param(dict(kind="f8f6f4", m=128, n=32, atype="e2m3", btype="e5m2", dtype="f16",
                      a_tmem=160), id="f8f6f4-e2m3-a-tmem", marks=FULL),
]


@pytest.mark.parametrize("case", SUB_BYTE_A_TMEM)
def test_sub_byte_a_of_f8f6f4_in_tensor_memory_matches_the_model(case):
    """f8f6f4 / mxf8f6f4 fp4 / fp6 A in TMEM: one code per byte, four bytes per cell (ISA), the
    code at bits 5:2 (fp4) / 6:1 (fp6) of its byte (CUTLASS's cp_narrow_a_to_tmem_mma example),
    the rest of the byte random: D equals the model; reading the low bits instead would not."""
    out, want = _mma_case(**case)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("case", ZCM)
def test_ws_zero_column_mask_matches_the_model(case):
    """.ws with a zero-column mask descriptor: D equals the model's with the masked columns of B
    replaced by +0 (and differs from the unmasked D where the mask has ones)."""
    out, want = _mma_case(**case)
    assert np.array_equal(out, want)
    if _zero_cols(case["zcm"], case["m"], case["n"]).any():
        plain, _ = _mma_case(**dict(case, zcm=None))
        assert not np.array_equal(out, plain)


@pytest.mark.parametrize("case", FORMS)
def test_mma_form_matches_the_model(case):
    out, want = _mma_case(**case)
    assert np.array_equal(out, want)


def test_tf32_mn_major_128b_base32b_swizzle():
    """tf32 A and B MN-major in the 128B swizzle with 32-byte atoms (descriptor layout 1), the
    canonical layout of CuTe's Layout_MN_SW128_32B_Atom: 32 tf32 of M (N) per 128-byte row, 4 K
    rows per 512-byte atom (LBO between atoms along M, SBO along K), Swizzle<2,5,2>."""
    rng = np.random.default_rng(9)
    m, n = 128, 64
    ins = T.make("tf32", (m, n), dtype="f32", atype="tf32", a_major="mn", b_major="mn")
    a = random_codes("tf32", (m, 8), rng)
    b = random_codes("tf32", (8, n), rng)

    def image(codes_mn_k, rows):
        lbo, sbo = 512, 512 * (rows // 32)
        img = np.zeros(sbo * 2, np.uint8)
        by = codes_mn_k.astype(np.uint32).view(np.uint8).reshape(rows, 8, 4)
        for r in range(rows):
            for kk in range(8):
                lin = (r % 32) * 4 + (r // 32) * lbo + (kk % 4) * 128 + (kk // 4) * sbo
                phys = lin ^ (((lin >> 7) & 3) << 5)
                img[phys:phys + 4] = by[r, kk]
        return img, T.SmemDescriptor(0, lbo, sbo, "128B_base32B").encode()

    A_img, da = image(a, m)
    B_img, db = image(b.T.copy(), n)
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    stmt = _offsets("tcgen05.mma.cta_group::1.kind::tf32 [%r16], %rd15, %rd17, %r15, %p4;", d=128)
    out = launch(stmt, A_img, B_img, tmem, ins.idesc, da, db)
    want = tmem.copy()
    want[0, :, 128:128 + n] = T.compute_codes(ins, a, b, tmem[0, :, 128:128 + n])
    assert np.array_equal(out, want)


def test_cta_group_2_m128_pair():
    """cta_group::2, M=128, N=64 on a cluster of 2: each CTA holds 64 rows of A and 32 rows of
    B (N) in its shared memory; D's 64 rows of each CTA in the 2x2 data-path layout
    (CuTe tmem_frg_2sm M64: lane m + 64 (n / 32), column n % 32); commit multicast to both."""
    rng = np.random.default_rng(11)
    m, n = 128, 64
    ins = T.make("f16", (m, n), dtype="f32", atype="f16", cta_group=2)
    a = random_codes("f16", (m, 16), rng)
    b = random_codes("f16", (16, n), rng)
    imgs = [k_major(a[64 * p:64 * p + 64].astype(np.uint16).view(np.uint8).reshape(64, 32)) for p in (0, 1)]
    bimg = [k_major(b[:, 32 * p:32 * p + 32].T.copy().astype(np.uint16).view(np.uint8).reshape(32, 32))
            for p in (0, 1)]
    tmem = rng.integers(0, 2**32, (2, 128, COLS), dtype=np.uint64).astype(np.uint32)
    stmt = _offsets("tcgen05.mma.cta_group::2.kind::f16 [%r16], %rd15, %rd17, %r15, %p4;", d=32)
    out = launch(stmt, np.stack([i[0] for i in imgs]), np.stack([i[0] for i in bimg]), tmem,
                 ins.idesc, imgs[0][1], bimg[0][1], cg=2)
    P, L, C = d_cells(m, n, 2)
    want = tmem.copy()
    want[P, L, C + 32] = T.compute_codes(ins, a, b, tmem[P, L, C + 32])
    assert np.array_equal(out, want)


CP = [("128x256b", "", ""), ("4x256b", "", ""), ("128x128b", "", ""), ("64x128b", "warpx2::02_13", ""),
      ("64x128b", "warpx2::01_23", ""), ("32x128b", "warpx4", ""), ("128x256b", "", "b6x16_p32"),
      ("128x128b", "", "b4x16_p64")]


CP = [pytest.param(*c, marks=() if c in (CP[3], CP[7]) else FULL) for c in CP]


@pytest.mark.parametrize("shape,warp,src", CP, ids=["-".join(x for x in c.values if x) for c in CP])
def test_cp_shapes_multicast_and_decompression(shape, warp, src):
    """tcgen05.cp: rows of the source (a K-major no-swizzle tile of row-bytes) land in TMEM lanes
    from the address; .warpx2::02_13 sends rows 0-31 to lane quarters 0 and 2 and rows 32-63 to
    1 and 3, ::01_23 to 0,1 and 2,3, .warpx4 rows 0-31 to all four (CuTe's UTCCP Copy_Traits);
    .b8x16.b6x16_p32 / .b4x16_p64 unpack each 16-byte chunk (16 packed values, then padding)
    into 16 bytes, one code per byte (PTX ISA) at bits 5:2 / 6:1 (CUTLASS)."""
    rng = np.random.default_rng(len(shape) + len(warp) + len(src))
    rows, bits = {"128x256b": (128, 256), "4x256b": (4, 256), "128x128b": (128, 128),
                  "64x128b": (64, 128), "32x128b": (32, 128)}[shape]
    nbytes = bits // 8
    if src:  # each code lands at bits 5:2 (fp4) / 6:1 (fp6) of its byte (CUTLASS example
        # cp_narrow_a_to_tmem_mma.py: "FP4 UTCCP holder byte 00xxxx00, FP6 0xxxxxx0")
        w = 6 if src == "b6x16_p32" else 4
        codes = rng.integers(0, 1 << w, (rows, nbytes), dtype=np.uint8)
        raw = pack_padded(codes, w, rng)
        expect_bytes = codes << (1 if w == 6 else 2)
    else:
        raw = rng.integers(0, 256, (rows, nbytes), dtype=np.uint8)
        expect_bytes = raw
    if rows < 8:
        raw = np.concatenate([raw, np.zeros((8 - rows, nbytes), np.uint8)])
    img, desc = k_major(raw)
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    q = "." + shape + ("." + warp if warp else "") + (".b8x16." + src if src else "")
    stmt = _offsets(f"tcgen05.cp.cta_group::1{q} [%r16], %rd15;", d=200)
    out = launch(stmt, img, np.zeros(16, np.uint8), tmem, 0, desc, 0)
    words = expect_bytes.astype(np.uint32).reshape(rows, -1, 4)
    words = words[..., 0] | words[..., 1] << 8 | words[..., 2] << 16 | words[..., 3] << 24
    want = tmem.copy()
    groups = {"": None, "warpx2::02_13": ((0, 2), (1, 3)), "warpx2::01_23": ((0, 1), (2, 3)),
              "warpx4": ((0, 1, 2, 3),)}[warp]
    for r in range(rows):
        lanes = [r] if groups is None else [32 * qq + r % 32 for qq in groups[r // 32]]
        for lane in lanes:
            want[0, lane, 200:200 + bits // 32] = words[r]
    assert np.array_equal(out, want)


def test_absolute_lbo_k96_straddles_two_buffers():
    """sm_103a kind::mxf4 K96 (48 bytes of A per row) with descriptors in the absolute-LBO mode
    (bit 52), as CuTe's SM103 mma_unpack builds them: LBO holds the start address of the next
    K buffer.  The start points 96 bytes into a row of 128B-swizzled buffer 0, so each row reads
    bytes 96..127 there and 0..15 of the same row of buffer 1 [INF: continuation at LBO]."""
    rng = np.random.default_rng(13)
    m, n = 128, 64
    ins = T.make("mxf4", (m, n), dtype="f32", atype="e2m1", block=32, stype="ue8m0", k96=True)
    assert ins.k == 96

    def sw128(rowbytes):  # K-major 128B swizzle, 8-row atoms of 1024 bytes (SBO 1024)
        rows = rowbytes.shape[0]
        img = np.zeros(rows // 8 * 1024, np.uint8)
        r, kb = np.meshgrid(np.arange(rows), np.arange(128), indexing="ij")
        lin = (r % 8) * 128 + (r // 8) * 1024 + kb
        img[lin ^ (((lin >> 7) & 7) << 4)] = rowbytes
        return img

    def operand(rows):
        codes = random_codes("e2m1", (rows, 512), rng).astype(np.uint8)
        by = pack_dense4(codes)  # (rows, 256): two 128-byte K buffers
        img = np.concatenate([sw128(by[:, :128]), sw128(by[:, 128:])])
        nxt = rows // 8 * 1024
        desc = T.SmemDescriptor(96, 0, 1024, "128B", lbo_mode=1).encode() | (nxt >> 4) << 16
        return codes[:, 192:288], img, desc

    a, A_img, da = operand(m)
    bT, B_img, db = operand(n)
    b = bT.T.astype(np.uint64)
    a = a.astype(np.uint64)
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    sfa = rng.integers(120, 134, (m, 3)).astype(np.uint32)
    sfb = rng.integers(120, 134, (3, n)).astype(np.uint32)
    for (sf, nmn, col0) in ((sfa, m, 192), (sfb.T, n, 224)):
        for r in range(nmn):
            for q in range(4):
                cell = int(tmem[0, r % 32 + 32 * q, col0 + r // 32]) & 0xFF000000
                tmem[0, r % 32 + 32 * q, col0 + r // 32] = cell | int(sf[r, 0]) | int(sf[r, 1]) << 8 | int(sf[r, 2]) << 16
    absolute = "\n".join(f"""    mov.u32 %r150, {v};
    shr.u32 %r150, %r150, 4;
    cvt.u64.u32 %rd21, %r150;
    shl.b64 %rd21, %rd21, 16;
    add.u64 {r}, {r}, %rd21;""" for v, r in (("sA", "%rd15"), ("sB", "%rd17")))
    stmt = absolute + "\n" + _offsets(f"{ins.opcode} [%r16], %rd15, %rd17, %r15, [%r18], [%r19], %p4;",
                                       d=32, sfa=192, sfb=224)
    out = launch(stmt, A_img, B_img, tmem, ins.idesc, da, db, target="sm_103a")
    want = tmem.copy()
    want[0, :, 32:32 + n] = T.compute_codes(ins, a, b, tmem[0, :, 32:32 + n], arch="sm_103a", sa=sfa, sb=sfb)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("layout,major,base", [("64B", "K", 0), ("128B", "MN", 0), ("128B", "K", 3),
                                               ("none", "K", 0), ("128B_base32B", "MN", 0)])
def test_absolute_lbo_outside_the_isa_restrictions_is_refused(layout, major, base):
    """The PTX ISA allows the absolute-LBO mode only for K-major operands in the 128B swizzle
    with base offset 0 ("Restrictions on the Leading Dimension Absolute Address Stride"):
    every other descriptor with bit 52 set is refused by name; the allowed one reads."""
    from warpsim.ptx.ops.tcgen05 import _smem_tile

    data = np.arange(8192, dtype=np.uint32).astype(np.uint8)
    ok = T.SmemDescriptor(0, 4096, 1024, "128B", lbo_mode=1).encode()
    assert _smem_tile(data, ok, 8, 32, 8, "K", "here", "A").shape == (8, 32)
    bad = T.SmemDescriptor(0, 4096, 1024, layout, base_offset=base, lbo_mode=1).encode()
    with pytest.raises(warpsim.errors.PtxError, match="allows it only for K-major operands in the 128B swizzle"):
        _smem_tile(data, bad, 8, 32, 8, major, "here", "A")


def test_cp_cta_group_2_fills_both_ctas_of_the_pair():
    """tcgen05.cp.cta_group::2 issued by the even CTA: each CTA of the pair receives the tile
    from its own shared memory at the descriptor's address [INF: as the mma's halves]."""
    rng = np.random.default_rng(17)
    raws = [rng.integers(0, 256, (128, 16), dtype=np.uint8) for _ in range(2)]
    imgs = [k_major(r) for r in raws]
    tmem = rng.integers(0, 2**32, (2, 128, COLS), dtype=np.uint64).astype(np.uint32)
    stmt = _offsets("tcgen05.cp.cta_group::2.128x128b [%r16], %rd15;", d=100)
    out = launch(stmt, np.stack([i[0] for i in imgs]), np.zeros((2, 16), np.uint8), tmem, 0,
                 imgs[0][1], 0, cg=2)
    want = tmem.copy()
    for p in range(2):
        w = raws[p].astype(np.uint32).reshape(128, 4, 4)
        want[p, :, 100:104] = w[..., 0] | w[..., 1] << 8 | w[..., 2] << 16 | w[..., 3] << 24
    assert np.array_equal(out, want)


@pytest.mark.parametrize("m", [256, pytest.param(128, marks=FULL)])
def test_cta_group_2_a_in_tensor_memory(m):
    """cta_group::2 with A in Tensor Memory: row r of each CTA's M/2 rows in lane r, k packed
    two f16 per 32-bit column (even k low); M=128 reads lanes 0..63 (CuTe's Duplicated A layout:
    the copy at 64..127 is left random here, so reading it would fail) [INF]; B halves from each
    CTA's shared memory."""
    rng = np.random.default_rng(19 + m)
    n = 32
    ins = T.make("f16", (m, n), dtype="f32", atype="f16", cta_group=2)
    ml = m // 2
    a = random_codes("f16", (m, 16), rng)
    b = random_codes("f16", (16, n), rng)
    tmem = rng.integers(0, 2**32, (2, 128, COLS), dtype=np.uint64).astype(np.uint32)
    for p in range(2):
        rows = a[ml * p:ml * p + ml].astype(np.uint32)
        tmem[p, :ml, 160:168] = rows[:, 0::2] | rows[:, 1::2] << 16
    bimg = [k_major(b[:, 16 * p:16 * p + 16].T.copy().astype(np.uint16).view(np.uint8).reshape(16, 32))
            for p in (0, 1)]
    stmt = _offsets("tcgen05.mma.cta_group::2.kind::f16 [%r16], [%r17], %rd17, %r15, %p4;", d=0, a=160)
    out = launch(stmt, np.zeros((2, 16), np.uint8), np.stack([i[0] for i in bimg]), tmem,
                 ins.idesc, 0, bimg[0][1], cg=2)
    P, L, C = d_cells(m, n, 2)
    want = tmem.copy()
    want[P, L, C] = T.compute_codes(ins, a, b, tmem[P, L, C])
    assert np.array_equal(out, want)


#: ptxas 13.5 (cuda_13.5.r13.5, 39125733) on the whole generated kernel of each ZCM,
#: A_TMEM_FP4 and SUB_BYTE_A_TMEM case: every one assembles on sm_100a / sm_103a / sm_110a
NEW_FORMS = ZCM + A_TMEM_FP4 + SUB_BYTE_A_TMEM
NEW_PTXAS_13_5 = {(p.id, t): True for p in NEW_FORMS for t in ("sm_100a", "sm_103a", "sm_110a")}


def _new_stmt(case):
    """The mma statement _mma_case generates for a ZCM / A_TMEM_FP4 / SUB_BYTE_A_TMEM case."""
    c = dict(case)
    ins = T.make(c["kind"], (c["m"], c["n"]), dtype=c.get("dtype", "f32"), atype=c["atype"],
                 btype=c["btype"], block=c.get("block"), stype=c.get("stype"), ws=c.get("ws", False))
    a = "[%r17]" if c.get("a_tmem") is not None else "%rd15"
    if "zcm" in c:
        return f"{ins.opcode} [%r16], {a}, %rd17, %r15, %p4, %rd38;"
    sf = ", [%r18], [%r19]" if ins.block_scale else ""
    return f"{ins.opcode} [%r16], {a}, %rd17, %r15{sf}, %p4;"


def _new_kernel(case, target):
    stmt = _offsets(_new_stmt(case), d=32, a=case.get("a_tmem") or 0, sfa=192, sfb=224)
    if "zcm" in case:
        stmt = f"mov.b64 %rd38, {case['zcm']:#x};\n" + stmt
    return _kernel(stmt, 4096, 8192, 1, target)


def test_new_forms_legality_agrees_with_ptxas(tmp_path):
    """The machine's checker accepts what ptxas 13.5 accepted (stored); live re-check of the
    whole generated kernels where ptxas 13.5 is installed (pip nvidia-cuda-nvcc==13.5.*)."""
    import glob
    import subprocess

    from warpsim.ptx.ops.tcgen05 import check

    for p in NEW_FORMS:
        for t in ("sm_100a", "sm_103a", "sm_110a"):
            try:
                check(_new_stmt(p.values[0]), t, (9, 0))
                ok = True
            except warpsim.errors.PtxError:
                ok = False
            assert ok == NEW_PTXAS_13_5[(p.id, t)], (p.id, t)
    found = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "nvidia", "cu13", "bin", "ptxas"))
    if not found or "13.5" not in subprocess.run([found[0], "--version"], capture_output=True, text=True).stdout:
        pytest.skip("ptxas 13.5 not installed")
    for p in NEW_FORMS:
        for t in ("sm_100a", "sm_103a", "sm_110a"):
            f = tmp_path / f"{p.id}_{t}.ptx"
            f.write_text(_new_kernel(p.values[0], t))
            r = subprocess.run([found[0], f"-arch={t}", str(f), "-o", str(tmp_path / "x.cubin")],
                               capture_output=True, text=True)
            assert (r.returncode == 0) == NEW_PTXAS_13_5[(p.id, t)], (p.id, t, r.stderr)
