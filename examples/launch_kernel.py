"""Run a real CUDA kernel's PTX on the CPU, bit for bit, and let the sanitizer find a bug.

    PYTHONPATH=. python examples/launch_kernel.py

The PTX comes from ``nvcc -ptx -arch=sm_90 tests/kernels/gemm_f16.cu`` (a cp.async + ldmatrix +
mma.sync GEMM, 4 warps per CTA); no GPU is needed for either step.
"""

from pathlib import Path

import numpy as np

import warpsim

ROOT = Path(__file__).resolve().parents[1]
m = warpsim.Module((ROOT / "tests" / "kernels" / "gemm_f16.ptx").read_text())
print("kernels:", m.kernels)

rng = np.random.default_rng(0)
A = rng.standard_normal((128, 128)).astype(np.float16)
B = rng.standard_normal((128, 128)).astype(np.float16)
C = np.zeros((128, 128), np.float32)
_, _, D = m.launch("gemm_f16_f32", grid=(2, 2), block=128, args=[A, B, C, 128, 128, 128])
err = np.abs(D - A.astype(np.float64) @ B.astype(np.float64).T).max()
print(f"2 x 2 CTAs of 4 warps: D = A @ B.T, max |D - float64 reference| = {err:.2e}")
print("the input C is untouched:", not C.any())

# a planted bug: claiming K = 136 (A and B have 128 columns) makes the kernel read past the end of A
try:
    m.launch("gemm_f16_f32", grid=(2, 2), block=128, args=[A, B, C, 128, 128, 136])
except warpsim.SanitizerError as e:
    f = e.findings[0]
    print(f"sanitizer: {f.kind} at PTX line {f.line} ({f.instruction}), CTA {f.cta}, warp {f.warp}")
