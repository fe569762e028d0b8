"""CuTe's Hopper tutorial kernel (wgmma_sm90.cu, compiled unchanged) on warpsim: D equals the
k-ordered chain of m64n64k16 wgmmas (the per-instruction model checked on the GPU) bit for bit,
and the sanitizer finds nothing."""

import struct
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.tensorcore import wgmma as W

PTX = Path(__file__).parent / "kernels" / "hopper" / "cute_wgmma_sm90.ptx"
SMEM = 98304 + 1024


@pytest.fixture(scope="module")
def module():
    return warpsim.Module(PTX.read_text())


def _chain(Am, Bn):
    """D (M, N) f16 as 64x64 tiles of chained m64n64k16 f16 wgmmas in k order."""
    i = W.decode_wgmma("wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16")
    M, K = Am.shape
    N = Bn.shape[0]
    a = Am.astype(float).reshape(M // 64, 64, K)[:, None]
    b = Bn.astype(float).T.reshape(K, N // 64, 64).transpose(1, 0, 2)[None]
    d = np.zeros((M // 64, N // 64, 64, 64))
    for k in range(0, K, 16):
        d = W.compute(i, a[..., k:k + 16], b[..., k:k + 16, :], d)
    return d.transpose(0, 2, 1, 3).reshape(M, N).astype(np.float16)


@pytest.mark.parametrize("layout", ["tn", "nt"])
def test_cute_gemm_equals_the_wgmma_chain(module, layout):
    M = N = 128
    K = 192
    rng = np.random.default_rng(3)
    major = "MajorE1" if layout == "nt" else "MajorE0"
    kern = next(k for k in module.kernels if "gemm_device" in k and major in k)
    if layout == "tn":  # A(m, k) at k + m K, B(n, k) at k + n K
        A = rng.standard_normal((M, K)).astype(np.float16)
        B = rng.standard_normal((N, K)).astype(np.float16)
        Am, Bn, lda, ldb = A, B, K, K
    else:  # A(m, k) at m + k M, B(n, k) at n + k N
        A = rng.standard_normal((K, M)).astype(np.float16)
        B = rng.standard_normal((K, N)).astype(np.float16)
        Am, Bn, lda, ldb = A.T, B.T, M, N
    C = np.zeros((N, M), np.float16)
    e = b"\0"
    args = [struct.pack("<iii", M, N, K), e, A, struct.pack("<i", lda), e, e, B, struct.pack("<i", ldb),
            e, e, C, struct.pack("<i", M), struct.pack("<ii", 1, 0), np.float16(1).tobytes(),
            np.float16(0).tobytes()]
    out = module.launch(kern, (M // 128, N // 128), 128, args, shared_bytes=SMEM, arch="sm_90a",
                        check=layout == "tn")
    D = out[2].T
    assert np.array_equal(D.view(np.uint16), _chain(Am, Bn).view(np.uint16))
