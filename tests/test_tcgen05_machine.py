"""tcgen05 on the machine: Tensor Memory, alloc/dealloc, mma from descriptors, ld/st, sanitizer.

The kernel tests/kernels/tcgen05_gemm_f16.ptx (hand-written for sm_100a; ptxas 13.5 accepts it)
runs two tcgen05.mma into Tensor Memory and reads D back with tcgen05.ld; its D must equal the
matrix-level model (warpsim.tensorcore.tcgen05) bit for bit.  No Blackwell GPU has run it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.kernel.sanitizer import SanitizerError
from warpsim.tensorcore import tcgen05 as T

KERNEL = (Path(__file__).parent / "kernels" / "tcgen05_gemm_f16.ptx").read_text()
M, N, K = 128, 32, 32
LBO, SBO = 128, 512


def canonical_k_major(x: np.ndarray) -> np.ndarray:
    """Bytes of a rows x K f16 tile in the canonical K-major, no-swizzle layout (PTX ISA
    "Shared memory matrix layout": 8-row x 16-byte core matrices; LBO between core matrices
    along K, SBO between 8-row groups), restated here independently of warpsim."""
    rows, k = x.shape
    out = np.zeros(SBO * rows // 8, np.uint8)
    b = np.ascontiguousarray(x, np.float16).view(np.uint8).reshape(rows, k * 2)
    for r in range(rows):
        for kb in range(k * 2):
            out[(r % 8) * 16 + (r // 8) * SBO + kb % 16 + (kb // 16) * LBO] = b[r, kb]
    return out


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    return A, B


def _run(ptx=KERNEL, seed=0, **kw):
    A, B = _inputs(seed)
    ins = T.make("f16", (M, N), dtype="f32", atype="f16")
    D = np.zeros(M * N, np.float32)
    out = warpsim.launch(ptx, "tc_gemm", grid=1, block=128, arch="sm_100a",
                         args=[canonical_k_major(A), canonical_k_major(B.T), D, np.uint32(ins.idesc)],
                         **kw)
    return A, B, ins, out[2].reshape(M, N)


def test_kernel_matches_matrix_level_model():
    A, B, ins, D = _run()
    a = A.view(np.uint16)
    b = B.view(np.uint16)
    zero = np.zeros((M, N), np.uint32)
    d1 = T.compute_codes(ins, a[:, :16], b[:16], zero, enable_input_d=False)
    d2 = T.compute_codes(ins, a[:, 16:], b[16:], d1)
    assert np.array_equal(D.view(np.uint32), d2)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(D - ref).max() < 1e-4 * np.abs(ref).max()


def test_refused_on_hopper():
    with pytest.raises(warpsim.WarpsimError, match="sm_90a"):
        warpsim.launch(KERNEL.replace(".target sm_100a", ".target sm_90a"), "tc_gemm", grid=1,
                       block=128, arch="sm_90a", args=[np.zeros(8192, np.uint8), np.zeros(2048, np.uint8),
                                                        np.zeros(M * N, np.float32), np.uint32(0)])


def _finding(ptx, match):
    with pytest.raises(SanitizerError) as ei:
        _run(ptx)
    kinds = {f.kind for f in ei.value.findings}
    assert "tmem" in kinds, ei.value
    assert any(match in f.message for f in ei.value.findings), ei.value
    return ei.value


def test_ld_before_wait_is_a_finding():
    ptx = KERNEL.replace("    tcgen05.wait::ld.sync.aligned;\n", "")
    _finding(ptx, "used before tcgen05.wait::ld")


def test_other_lane_quarter_is_a_finding():
    ptx = KERNEL.replace("shl.b32 %r12, %r2, 21;", "mov.u32 %r12, 0;")
    _finding(ptx, "lane quarter")


def test_use_after_dealloc_is_a_finding():
    body = KERNEL.replace("    @!%p2 bra DONE;\n    tcgen05.dealloc", "    @!%p2 bra DONE2;\n    tcgen05.dealloc")
    body = body.replace("DONE:\n    ret;", "DONE2:\n    bar.sync 0;\n    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r20}, [%r13];\n"
                        "    tcgen05.wait::ld.sync.aligned;\n    ret;")
    # the dealloc path must also reach the barrier: every warp passes through DONE2
    _finding(body, "not allocated")


def test_leak_at_exit_is_a_finding():
    ptx = KERNEL.replace("    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r8, 32;\n", "")
    _finding(ptx, "still allocated when the CTA exits")


# --- tcgen05.st / tcgen05.ld thread maps ---------------------------------------------------------

def expected_map(shape: str, num: int, split: int = 0) -> dict:
    """(thread, register) -> (TMEM lane offset, column offset), restated from the CuTe
    copy_traits_sm100 layouts of the .x1 atoms (the PTX ISA figures are images); .xN repeats
    the atom every (atom bits / 32) columns."""
    out = {}
    width = {"32x32b": 1, "16x64b": 2, "16x128b": 4, "16x256b": 8, "16x32bx2": 1}[shape]
    regs = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}[shape]
    for t in range(32):
        for r in range(num):
            for j in range(regs):
                if shape == "32x32b":
                    lane, col = t, 0
                elif shape == "16x64b":
                    lane, col = 8 * (t % 2) + t // 4, (t // 2) % 2
                elif shape == "16x128b":
                    lane, col = t // 4 + 8 * j, t % 4
                elif shape == "16x256b":
                    lane, col = t // 4 + 8 * (j // 2), 2 * (t % 4) + j % 2
                else:
                    lane, col = t % 16, split if t >= 16 else 0
                out[(t, r * regs + j)] = (lane, col + r * width)
    return out


def _ldst_kernel(shape: str, num: int, split: int, pack: bool) -> tuple[str, int]:
    regs = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}[shape] * num
    vec = "{" + ", ".join(f"%r{100 + i}" for i in range(regs)) + "}"
    fill = "\n".join(f"    add.u32 %r{100 + i}, %r1, {i * 256};" for i in range(regs))
    off = f", {split}" if shape == "16x32bx2" else ""
    pk = ".unpack::16b" if pack else ""
    ncols = 64
    back = "{" + ", ".join(f"%r{400 + i}" for i in range(ncols)) + "}"
    stores = "\n".join(f"    st.global.b32 [%rd5+{4 * i}], %r{400 + i};" for i in range(ncols))
    ptx = f""".version 9.0
.target sm_100a
.address_size 64
.visible .entry ldst(.param .u64 pOut)
{{
    .reg .b32 %r<500>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b32 tslot;
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %tid.x;
    shl.b32 %r1, %r1, 16;
    mov.u32 %r2, tslot;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 128;
    bar.sync 0;
    ld.shared.b32 %r3, [tslot];
    mov.u32 %r4, 0;
    tcgen05.st.sync.aligned.32x32b.x64.b32 [%r3], {", ".join(["%r4"] * ncols).join("{}")};
    tcgen05.wait::st.sync.aligned;
{fill}
    tcgen05.st.sync.aligned.{shape}.x{num}{pk}.b32 [%r3]{off}, {vec};
    tcgen05.wait::st.sync.aligned;
    tcgen05.ld.sync.aligned.32x32b.x{ncols}.b32 {back}, [%r3];
    tcgen05.wait::ld.sync.aligned;
    mov.u32 %r5, %tid.x;
    mul.wide.u32 %rd4, %r5, {4 * ncols};
    add.u64 %rd5, %rd1, %rd4;
{stores}
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 128;
    ret;
}}
"""
    return ptx, ncols


LDST_CASES = [("32x32b", 1), ("32x32b", 8), ("16x64b", 1), ("16x64b", 4), ("16x128b", 1),
              ("16x128b", 2), ("16x256b", 1), ("16x256b", 4), ("16x32bx2", 2)]


@pytest.mark.parametrize("shape,num", LDST_CASES)
def test_st_thread_map(shape, num):
    """tcgen05.st places register j of thread t at the CuTe-derived (lane, column); a
    32x32b load (thread = lane) reads the cells back."""
    split = 8 if shape == "16x32bx2" else 0
    ptx, ncols = _ldst_kernel(shape, num, split, False)
    out = warpsim.launch(ptx, "ldst", grid=1, block=32, arch="sm_100a",
                         args=[np.zeros(32 * ncols, np.uint32)])[0].reshape(32, ncols)
    want = np.zeros((32, ncols), np.uint32)
    for (t, j), (lane, col) in expected_map(shape, num, split).items():
        want[lane, col] = (t << 16) + j * 256
    assert np.array_equal(out, want)


def test_st_unpack_16b():
    """.unpack::16b: each register's halves go to two adjacent columns (low 16 bits each)."""
    ptx, ncols = _ldst_kernel("32x32b", 2, 0, True)
    out = warpsim.launch(ptx, "ldst", grid=1, block=32, arch="sm_100a",
                         args=[np.zeros(32 * ncols, np.uint32)])[0].reshape(32, ncols)
    t = np.arange(32)
    for j in range(2):
        v = (t << 16) + j * 256
        assert np.array_equal(out[:, 2 * j], v & 0xFFFF)
        assert np.array_equal(out[:, 2 * j + 1], v >> 16)
    assert not out[:, 4:].any()


def swizzled_128b_k_major(x: np.ndarray) -> np.ndarray:
    """Bytes of a rows x K f16 tile in the canonical K-major 128-byte-swizzle layout: 128-byte
    rows, 8-row atoms of 1024 bytes (SBO), the 16-byte chunk index XORed with the row within
    the atom (PTX ISA swizzling modes), restated independently of warpsim."""
    rows, k = x.shape
    out = np.zeros(1024 * rows // 8, np.uint8)
    b = np.ascontiguousarray(x, np.float16).view(np.uint8).reshape(rows, k * 2)
    for r in range(rows):
        for kb in range(k * 2):
            lin = (r % 8) * 128 + (r // 8) * 1024 + kb
            out[lin ^ (((lin >> 7) & 7) << 4)] = b[r, kb]
    return out


def test_kernel_with_128b_swizzle():
    ptx = (KERNEL.replace("sA[8192]", "sA[16384]").replace("sB[2048]", "sB[4096]")
           .replace("setp.lt.u32 %p1, %r3, 2048;", "setp.lt.u32 %p1, %r3, 4096;")
           .replace("setp.lt.u32 %p1, %r3, 512;", "setp.lt.u32 %p1, %r3, 1024;")
           .replace("0x0000402000080000", "0x4000404000010000")
           .replace("add.u64 %rd6, %rd6, 16;", "add.u64 %rd6, %rd6, 2;")
           .replace("add.u64 %rd7, %rd7, 16;", "add.u64 %rd7, %rd7, 2;"))
    A, B = _inputs(5)
    ins = T.make("f16", (M, N), dtype="f32", atype="f16")
    D = warpsim.launch(ptx, "tc_gemm", grid=1, block=128, arch="sm_100a",
                       args=[swizzled_128b_k_major(A), swizzled_128b_k_major(B.T),
                             np.zeros(M * N, np.float32), np.uint32(ins.idesc)])[2].reshape(M, N)
    a, b = A.view(np.uint16), B.view(np.uint16)
    d1 = T.compute_codes(ins, a[:, :16], b[:16], np.zeros((M, N), np.uint32), enable_input_d=False)
    assert np.array_equal(D.view(np.uint32), T.compute_codes(ins, a[:, 16:], b[16:], d1))


def test_kernel_f16_accumulator():
    """The same kernel with another instruction descriptor: f16 D (the low half
    of each TMEM cell)."""
    A, B = _inputs(6)
    ins = T.make("f16", (M, N), dtype="f16", atype="f16")
    out = warpsim.launch(KERNEL, "tc_gemm", grid=1, block=128, arch="sm_100a",
                         args=[canonical_k_major(A), canonical_k_major(B.T),
                               np.zeros(M * N, np.uint32), np.uint32(ins.idesc)])[2].reshape(M, N)
    a, b = A.view(np.uint16), B.view(np.uint16)
    d1 = T.compute_codes(ins, a[:, :16], b[:16], np.zeros((M, N), np.uint16), enable_input_d=False)
    d2 = T.compute_codes(ins, a[:, 16:], b[16:], d1)
    assert np.array_equal(out & 0xFFFF, d2.astype(np.uint32))


def test_kernel_with_a_in_tensor_memory():
    """A stored row-major into TMEM by tcgen05.st (row m in lane m, two f16 per column, even k
    in the low half [INF from the ISA's A-in-TMEM layout]), B from shared memory."""
    stage = """    ld.shared.b32 %r8, [tslot];          // TMEM address: lane 0, first column
    mul.wide.u32 %rd10, %r1, 64;         // this thread's row of A (row-major f16)
    add.u64 %rd10, %rd1, %rd10;
    ld.global.v4.b32 {%r20, %r21, %r22, %r23}, [%rd10];
    ld.global.v4.b32 {%r24, %r25, %r26, %r27}, [%rd10+16];
    ld.global.v4.b32 {%r28, %r29, %r30, %r31}, [%rd10+32];
    ld.global.v4.b32 {%r32, %r33, %r34, %r35}, [%rd10+48];
    shl.b32 %r14, %r2, 21;
    add.u32 %r14, %r14, %r8;
    add.u32 %r14, %r14, 32;
    tcgen05.st.sync.aligned.32x32b.x16.b32 [%r14], {%r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27, %r28, %r29, %r30, %r31, %r32, %r33, %r34, %r35};
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
"""
    ptx = (KERNEL.replace("[%r7], 32;", "[%r7], 64;").replace("%r8, 32;", "%r8, 64;")
           .replace("    ld.shared.b32 %r8, [tslot];          // TMEM address: lane 0, first column\n", stage)
           .replace("tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd6, %rd7, %r60, %p1;\n    add.u64 %rd6",
                    "add.u32 %r15, %r8, 32;\n    tcgen05.mma.cta_group::1.kind::f16 [%r8], [%r15], %rd7, %r60, %p1;\n    add.u64 %rd6")
           .replace("setp.eq.u32 %p1, %r1, 0;             // true: accumulate\n    tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd6,",
                    "setp.eq.u32 %p1, %r1, 0;             // true: accumulate\n    add.u32 %r15, %r8, 40;\n    tcgen05.mma.cta_group::1.kind::f16 [%r8], [%r15],"))
    assert ptx.count("[%r15]") == 2
    A, B = _inputs(7)
    ins = T.make("f16", (M, N), dtype="f32", atype="f16")
    D = warpsim.launch(ptx, "tc_gemm", grid=1, block=128, arch="sm_100a",
                       args=[np.ascontiguousarray(A).view(np.uint8).ravel(), canonical_k_major(B.T),
                             np.zeros(M * N, np.float32), np.uint32(ins.idesc)])[2].reshape(M, N)
    a, b = A.view(np.uint16), B.view(np.uint16)
    d1 = T.compute_codes(ins, a[:, :16], b[:16], np.zeros((M, N), np.uint32), enable_input_d=False)
    assert np.array_equal(D.view(np.uint32), T.compute_codes(ins, a[:, 16:], b[16:], d1))


# --- CuTe's Blackwell tutorial 01 (nvcc 13.0, sm_100a) ---------------------------------------------

def _cute_launch(M, Nn, Kk, seed, check):
    import gzip
    import struct
    from dataclasses import dataclass

    from warpsim.kernel.tensormap import TensorMap

    @dataclass(frozen=True, eq=False)
    class CuteTensor(TensorMap):
        """A CuTe gmem Tensor passed by value: shape (int, int), stride (int), pointer."""
        dims: tuple = ()

        def param_bytes(self, buffer_address=None):
            return struct.pack("<iiiiQ", *self.dims, 0, int(buffer_address or 0))

    ptx = gzip.open(Path(__file__).parent / "kernels" / "blackwell" / "cute_01_mma_sm100.ptx.gz",
                    "rt").read()
    m = warpsim.Module(ptx)
    name = next(k for k in m.kernels if "gemm_device" in k)
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, Kk)).astype(np.float16)
    B = rng.standard_normal((Nn, Kk)).astype(np.float16)
    C = rng.standard_normal((M, Nn)).astype(np.float32)
    D = np.zeros((M, Nn), np.float32)
    ins = T.make("f16", (128, 256), dtype="f32", atype="f16")  # the tutorial's TiledMMA
    tiled_mma = struct.pack("<IBxxx", ins.idesc, 1)  # UMMA::InstrDescriptor, accumulate_
    args = [CuteTensor(b"", None, A, 0, (M, Kk, Kk)), CuteTensor(b"", None, B, 0, (Nn, Kk, Kk)),
            CuteTensor(b"", None, C, 0, (M, Nn, Nn)), CuteTensor(b"", None, D, 0, (M, Nn, Nn)),
            b"\0", tiled_mma, b"\0", np.float32(1.0), np.float32(0.0)]
    out = m.launch(name, grid=(M // 128, Nn // 256), block=128, arch="sm_100a",
                   shared_bytes=64 * 1024, args=args, check=check)
    return A, B, ins, out


def test_cute_tutorial_01_runs_and_matches_the_model():
    """CuTe's Blackwell tutorial GEMM (TMEM alloc, 4 x tcgen05.mma per 64-wide K tile from
    128B-swizzled shared memory, commit + mbarrier wait, tcgen05.ld epilogue, alpha=1, beta=0)
    on a 256 x 512 x 128 problem (4 CTAs): D equals chained matrix-level tcgen05 mmas bit for bit."""
    A, B, ins, D = _cute_launch(256, 512, 128, 0, check=False)
    assert "mA:" in D.stdout  # the tutorial prints its tensors from thread 0
    D = D[3]
    a, b = A.view(np.uint16), B.view(np.uint16).T
    for i in range(2):
        for j in range(2):
            d = np.zeros((128, 256), np.uint32)
            for kb in range(128 // 16):
                d = T.compute_codes(ins, a[128 * i:128 * i + 128, 16 * kb:16 * kb + 16],
                                    b[16 * kb:16 * kb + 16, 256 * j:256 * j + 256], d,
                                    enable_input_d=kb > 0)
            assert np.array_equal(D[128 * i:128 * i + 128, 256 * j:256 * j + 256].view(np.uint32), d)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    assert np.abs(D - ref).max() < 1e-5 * np.abs(ref).max()


@pytest.mark.skipif(not os.environ.get("WARPSIM_TCGEN05_FULL"), reason="~5 s; WARPSIM_TCGEN05_FULL=1 (CI keeps the planted tmem twins)")
def test_cute_tutorial_01_reads_tcgen05_ld_results_without_wait():
    """The tutorial never executes tcgen05.wait::ld (its epilogue uses the tcgen05.ld registers
    directly); the PTX ISA makes them undefined until the wait, so the sanitizer reports it."""
    with pytest.raises(SanitizerError) as ei:
        _cute_launch(128, 256, 64, 1, check=True)
    assert any(f.kind == "tmem" and "used before tcgen05.wait::ld" in f.message
               for f in ei.value.findings)


def _cute_tma_run(fixture, Mm, Nn, Kk, box_a, box_b, cluster=None, seed=2):
    """Run a CuTe TMA tutorial kernel; check every 128 x 256 tile of D against chained
    matrix-level tcgen05 mmas, bit for bit."""
    import gzip
    import struct
    from dataclasses import dataclass

    from warpsim.kernel.tensormap import TensorMap, tensor_map

    @dataclass(frozen=True, eq=False)
    class CuteTensor(TensorMap):
        dims: tuple = ()

        def param_bytes(self, buffer_address=None):
            return struct.pack("<iiiiQ", *self.dims, 0, int(buffer_address or 0))

    def tma(arr, rows, k, box_rows):  # K-major f16, 64 x box_rows boxes, 128B swizzle
        # CuTe's TMA Copy_Atom by value is the CUtensorMap, then aux params (not read): a map
        # fills the head of a larger .b8 parameter (kernel.args)
        return tensor_map("f16", (k, rows), box=(64, box_rows), swizzle="128B", tensor=arr)

    ptx = gzip.open(Path(__file__).parent / "kernels" / "blackwell" / fixture, "rt").read()
    m = warpsim.Module(ptx)
    name = next(k for k in m.kernels if "gemm_device" in k)
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((Mm, Kk)).astype(np.float16)
    B = rng.standard_normal((Nn, Kk)).astype(np.float16)
    C = rng.standard_normal((Mm, Nn)).astype(np.float32)
    D = np.zeros((Mm, Nn), np.float32)
    ins = T.make("f16", (128, 256), dtype="f32", atype="f16")
    args = [struct.pack("<iii", Mm, Kk, 0), struct.pack("<iii", Nn, Kk, 0),
            CuteTensor(b"", None, C, 0, (Mm, Nn, Nn)), CuteTensor(b"", None, D, 0, (Mm, Nn, Nn)),
            b"\0", struct.pack("<IBxxx", ins.idesc, 1), b"\0", tma(A, Mm, Kk, box_a),
            tma(B, Nn, Kk, box_b), np.float32(1.0), np.float32(0.0)]
    out = m.launch(name, grid=(Mm // 128, Nn // 256), block=128, arch="sm_100a",
                   shared_bytes=64 * 1024, args=args, check=False, cluster=cluster)
    Dout = out[1]  # the array arguments in parameter order: C, D, A (map 1), B (map 2)
    a, b = A.view(np.uint16), B.view(np.uint16).T
    for i in range(Mm // 128):
        for j in range(Nn // 256):
            d = np.zeros((128, 256), np.uint32)
            for kb in range(Kk // 16):
                d = T.compute_codes(ins, a[128 * i:128 * i + 128, 16 * kb:16 * kb + 16],
                                    b[16 * kb:16 * kb + 16, 256 * j:256 * j + 256], d,
                                    enable_input_d=kb > 0)
            assert np.array_equal(Dout[128 * i:128 * i + 128, 256 * j:256 * j + 256].view(np.uint32), d)


def test_cute_tutorial_02_tma_runs_and_matches_the_model():
    """Tutorial 02: A and B tiles arrive by TMA (128B-swizzled tensor maps, mbarrier
    expect_tx/complete_tx), then 4 tcgen05.mma per K tile, commit, mbarrier wait, tcgen05.ld
    epilogue; 256 x 512 x 128 on 4 CTAs.  The nested-scope labels of CUTLASS's inline-asm
    mbarrier wait (LAB_WAIT in every copy) are scoped as ptxas scopes them."""
    _cute_tma_run("cute_02_mma_tma_sm100.ptx.gz", 256, 512, 128, 128, 256)


@pytest.mark.skipif(not os.environ.get("WARPSIM_TCGEN05_FULL"), reason="~6 s; WARPSIM_TCGEN05_FULL=1 (CI runs tutorials 01, 02 and 04)")
def test_cute_tutorial_03_multicast_runs_and_matches_the_model():
    """Tutorial 03: a 4 x 4 cluster; each CTA loads a quarter of the A and B tiles and TMA
    multicasts it to its row / column of the cluster; tcgen05.commit.multicast::cluster
    releases the shared-memory stage in every CTA that fed it; 512 x 1024 x 64 on 16 CTAs."""
    _cute_tma_run("cute_03_mma_tma_multicast_sm100.ptx.gz", 512, 1024, 64, 32, 64, (4, 4, 1))


def test_labels_in_nested_scopes_are_scoped():
    """Two inline-asm blocks defining the same label (as CUTLASS's barrier wait does) lower to
    distinct labels; each branch reaches its own."""
    ptx = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 0;
    {
    .reg .pred P1;
    LOOP:
    add.u32 %r1, %r1, 1;
    setp.lt.u32 P1, %r1, 3;
    @P1 bra LOOP;
    }
    {
    .reg .pred P1;
    LOOP:
    add.u32 %r1, %r1, 10;
    setp.lt.u32 P1, %r1, 40;
    @P1 bra LOOP;
    }
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    out = warpsim.launch(ptx, "k", grid=1, block=1, args=[np.zeros(1, np.uint32)])[0]
    assert out[0] == 43


def test_triton_sm100a_matmul_runs_and_matches_the_model():
    """Triton 3.8.0's sm_100a matmul (tests/kernels/blackwell/triton_matmul_sm100a.py: BLOCK 128 x
    128 x 64, tl.dot lowered to tcgen05.mma into Tensor Memory) on a 256 x 256 x 128 problem:
    D equals chained matrix-level tcgen05 mmas (accumulating onto the TMEM its tcgen05.st
    zeroed) bit for bit, and the sanitizer finds nothing (it waits with tcgen05.wait::ld)."""
    import gzip

    ptx = gzip.open(Path(__file__).parent / "kernels" / "blackwell" / "triton_matmul_sm100a.ptx.gz",
                    "rt").read()
    Mm = Nn = 256
    Kk = 128
    rng = np.random.default_rng(3)
    A = rng.standard_normal((Mm, Kk)).astype(np.float16)
    B = rng.standard_normal((Kk, Nn)).astype(np.float16)
    out = warpsim.launch(ptx, "matmul_kernel", grid=(Mm // 128, Nn // 128), block=128, arch="sm_100a",
                         shared_bytes=65552,  # with the sanitizer: no finding
                         args=[A, B, np.zeros((Mm, Nn), np.float32), np.int32(Mm), np.int32(Nn),
                               np.int32(Kk), np.int32(Kk), np.int32(Nn), np.int32(Nn),
                               np.zeros(1, np.uint8), np.zeros(1, np.uint8)])
    D = out[2]
    ins = T.make("f16", (128, 128), dtype="f32", atype="f16")
    a, b = A.view(np.uint16), B.view(np.uint16)
    for i in range(2):
        for j in range(2):
            d = np.zeros((128, 128), np.uint32)
            for kb in range(Kk // 16):
                d = T.compute_codes(ins, a[128 * i:128 * i + 128, 16 * kb:16 * kb + 16],
                                    b[16 * kb:16 * kb + 16, 128 * j:128 * j + 128], d)
            assert np.array_equal(D[128 * i:128 * i + 128, 128 * j:128 * j + 128].view(np.uint32), d)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(D - ref).max() < 1e-5 * np.abs(ref).max()


# --- mma results in flight until the commit's mbarrier phase is observed (sanitizer) ------------

def test_mma_result_read_before_commit_phase_is_a_finding():
    """Planted: the threads synchronise with bar.sync instead of waiting on the mbarrier the
    commit arrives on, then tcgen05.ld the mma's D: the mma may still be writing it."""
    wait = ("WAITD:                                   // every thread waits for phase 0 of the barrier\n"
            "    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r16], 0;\n    @!%p3 bra WAITD;\n")
    assert wait in KERNEL
    ptx = KERNEL.replace(wait, "    bar.sync 0;\n")
    err = _finding(ptx, "still writing")
    f = next(f for f in err.findings if "still writing" in f.message)
    assert "tcgen05.mma" in f.message and "tcgen05.commit" in f.message


def test_mma_result_read_after_commit_phase_is_clean():
    """The fixed twin (the kernel as written: every thread waits for the phase) has no finding,
    and the sanitizer changes no bit of D."""
    A, B, ins, D = _run(check=True)
    assert np.array_equal(D, _run(check=False)[3])


def test_commit_phase_seen_by_another_barrier_does_not_complete_the_mma():
    """Waiting on a different (already completed) mbarrier does not make the mma's result
    readable: the finding names the read."""
    ptx = KERNEL.replace("    mbarrier.init.shared::cta.b64 [%r16], 1;",
                         "    mbarrier.init.shared::cta.b64 [%r16], 1;\n"
                         "    mbarrier.init.shared::cta.b64 [%r16+8], 1;\n"
                         "    mbarrier.arrive.shared::cta.b64 _, [%r16+8];")
    ptx = ptx.replace("mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r16], 0;",
                      "mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r16+8], 0;")
    ptx = ptx.replace(".shared .align 8 .b64 mbar;", ".shared .align 8 .b64 mbar[2];")
    assert "[%r16+8], 0" in ptx
    _finding(ptx, "still writing")


# --- CuTe's Blackwell tutorials 04 and 05: CTA pairs (cta_group::2) ------------------------------

def _cute_2sm_run(fixture, Kk, epi_tma, seed):
    """Run CuTe tutorial 04 or 05 (PTX in tests/data/real/cute, nvcc 13.0, sm_100a: see
    tools/real_corpus.py) on a 512 x 1024 x Kk problem: one 4 x 4 cluster of 16 CTAs, 8 CTA
    pairs each computing a 256 x 256 tile with tcgen05.mma.cta_group::2.  D must equal chained
    matrix-level m256n256k16 cta_group::2 mmas bit for bit, and a float64 reference closely."""
    import gzip
    import struct
    from dataclasses import dataclass

    from warpsim.kernel.tensormap import TensorMap, tensor_map

    @dataclass(frozen=True, eq=False)
    class CuteTensor(TensorMap):
        dims: tuple = ()

        def param_bytes(self, buffer_address=None):
            return struct.pack("<iiiiQ", *self.dims, 0, int(buffer_address or 0))

    Mm, Nn = 512, 1024
    ptx = gzip.open(Path(__file__).parent / "data" / "real" / "cute" / fixture, "rt").read()
    m = warpsim.Module(ptx)
    name = next(k for k in m.kernels if "gemm_device" in k)
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((Mm, Kk)).astype(np.float16)
    B = rng.standard_normal((Nn, Kk)).astype(np.float16)
    C = rng.standard_normal((Mm, Nn)).astype(np.float32)
    D = np.zeros((Mm, Nn), np.float32)
    ins = T.make("f16", (256, 256), dtype="f32", atype="f16", cta_group=2)
    # 2SM multicast TMA: each CTA loads a quarter of its 128 A rows (multicast along the
    # cluster's N mode) and half of its 128 B rows (along M), 128B-swizzled
    ab = lambda arr, rows, box: tensor_map("f16", (Kk, rows), box=(64, box), swizzle="128B", tensor=arr)
    mma = struct.pack("<IBxxx", ins.idesc, 1)
    if epi_tma:  # tutorial 05: C and D through TMA, 128 x 32 f32 boxes
        cd = lambda arr: tensor_map("f32", (Nn, Mm), box=(32, 128), swizzle="128B", tensor=arr)
        tup = lambda r, c: struct.pack("<iii", r, c, 0)
        args = [tup(Mm, Kk), tup(Nn, Kk), tup(Mm, Nn), tup(Mm, Nn), b"\0", b"\0", mma, b"\0",
                ab(A, Mm, 32), ab(B, Nn, 64), cd(C), cd(D), np.float32(1.0), np.float32(0.0)]
    else:
        args = [struct.pack("<iii", Mm, Kk, 0), struct.pack("<iii", Nn, Kk, 0),
                CuteTensor(b"", None, C, 0, (Mm, Nn, Nn)), CuteTensor(b"", None, D, 0, (Mm, Nn, Nn)),
                b"\0", mma, b"\0", ab(A, Mm, 32), ab(B, Nn, 64), np.float32(1.0), np.float32(0.0)]
    out = m.launch(name, grid=(4, 4), block=128, arch="sm_100a", shared_bytes=200 * 1024,
                   args=args, check=False, cluster=(4, 4, 1))
    assert "tma_mcast_mask_a" in out.stdout  # the tutorial's thread-0 prints
    Dout = out[3] if epi_tma else out[1]
    a, b = A.view(np.uint16), B.view(np.uint16).T
    for i in range(Mm // 256):
        for j in range(Nn // 256):
            d = np.zeros((256, 256), np.uint32)
            for kb in range(Kk // 16):
                d = T.compute_codes(ins, a[256 * i:256 * i + 256, 16 * kb:16 * kb + 16],
                                    b[16 * kb:16 * kb + 16, 256 * j:256 * j + 256], d,
                                    enable_input_d=kb > 0)
            assert np.array_equal(Dout[256 * i:256 * i + 256, 256 * j:256 * j + 256].view(np.uint32), d)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    assert np.abs(Dout - ref).max() < 1e-5 * np.abs(ref).max()


def test_cute_tutorial_04_2sm_runs_and_matches_the_model():
    """Tutorial 04: Allocator2Sm (tcgen05.alloc/dealloc/relinquish .cta_group::2), 2SM TMA
    multicast (cp.async.bulk.tensor .cta_group::2: both CTAs' halves complete on the even CTA's
    barrier), the even CTA issuing m256n256k16 tcgen05.mma.cta_group::2 (A and B halves from each
    CTA's shared memory, D halves into each CTA's Tensor Memory), commit .multicast::cluster."""
    _cute_2sm_run("04_mma_tma_2sm_sm100_sm_100a.ptx.gz", 64, False, 4)


@pytest.mark.skipif(not os.environ.get("WARPSIM_TCGEN05_FULL"), reason="~10 s; WARPSIM_TCGEN05_FULL=1")
def test_cute_tutorial_05_2sm_tma_epilogue_runs_and_matches_the_model():
    """Tutorial 05: tutorial 04 plus a TMA epilogue (C loaded and D stored through f32 tensor
    maps in 128 x 64 tiles), two K tiles."""
    _cute_2sm_run("05_mma_tma_epi_sm100_sm_100a.ptx.gz", 128, True, 5)
