"""tcgen05 on the machine: Tensor Memory, alloc/dealloc, mma from descriptors, ld/st, sanitizer.

The kernel tests/kernels/tcgen05_gemm_f16.ptx (hand-written for sm_100a; ptxas 13.5 accepts it)
runs two tcgen05.mma into Tensor Memory and reads D back with tcgen05.ld; its D must equal the
matrix-level model (warpsim.tensorcore.tcgen05) bit for bit.  No Blackwell GPU has run it.
"""

from __future__ import annotations

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
    _finding(ptx, "before tcgen05.wait::ld")


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
