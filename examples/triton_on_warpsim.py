"""A Triton matmul on warpsim, and how its answer differs from TRITON_INTERPRET=1's.

    python examples/triton_on_warpsim.py

Triton compiles the kernel for sm_80 (no GPU needed); warpsim runs the PTX with the H100's
tensor-core numerics.  The default tl.dot input precision for float32 is tf32: the GPU (and
warpsim) truncate the inputs to tf32 and sum as the tensor core does, while the interpreter
multiplies in NumPy float32.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import triton  # noqa: F401
except ImportError:
    sys.exit("examples/triton_on_warpsim.py needs Triton to compile the kernel (no GPU needed): "
             "pip install warpsim[triton]")

import warpsim  # noqa: E402
from triton_kernels import matmul_kernel  # noqa: E402

rng = np.random.default_rng(2019)
A = rng.standard_normal((128, 64)).astype(np.float32)
B = rng.standard_normal((64, 128)).astype(np.float32)
C = np.zeros((128, 128), np.float32)
mm = warpsim.triton.jit(matmul_kernel, target="sm_80", arch="sm_90")
mm[(2, 2)](A, B, C, 128, 128, 64, 64, 1, 128, 1, 128, 1, BM=64, BN=64, BK=32)
interp = A @ B  # TRITON_INTERPRET=1 runs tl.dot as a NumPy float32 product
diff = C != interp
print("warpsim (sm_80 PTX, H100 numerics) vs NumPy float32 (what TRITON_INTERPRET=1 computes):")
print(f"  {C.size} outputs, {int(diff.sum())} differ, max |difference| {np.abs(C - interp).max():.4f}")
