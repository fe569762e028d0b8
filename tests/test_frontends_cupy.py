"""Module.from_cu and the CuPy face (RawKernel / RawModule), with nvcc from the PATH or the wheel."""

from __future__ import annotations

import os

import numpy as np
import pytest

import warpsim
from warpsim.errors import PtxError
from warpsim.kernel import cuda

try:
    cuda.find_nvcc()
    HAVE_NVCC = True
except cuda.NvccNotFound:
    HAVE_NVCC = False

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc (pip install nvidia-cuda-nvcc)")

# In the style of CuPy's "User-Defined Kernels" documentation: a raw elementwise add, and a
# module holding two kernels plus a template.
ADD = r'''
extern "C" __global__
void vec_add(const float* a, const float* b, float* out) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    out[i] = a[i] + b[i];
}
'''

MODULE = r'''
extern "C" {
__global__ void sum_kernel(const float* x, const float* y, float* out, unsigned int n) {
    unsigned int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
__global__ void mul_kernel(const float* x, const float* y, float* out, unsigned int n) {
    unsigned int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) out[i] = x[i] * y[i];
}
}
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''


def test_module_refuses_cuda_source():
    with pytest.raises(PtxError, match="this is CUDA source: use Module.from_cu"):
        warpsim.Module(ADD)


def test_looks_like_cuda():
    assert cuda.looks_like_cuda(ADD)
    assert not cuda.looks_like_cuda(".version 8.0\n.target sm_90\n// __global__ in a comment\n")


def test_missing_nvcc_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("WARPSIM_NVCC", raising=False)
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(cuda.NvccNotFound, match="pip install nvidia-cuda-nvcc"):
        cuda.find_nvcc()


@needs_nvcc
def test_raw_kernel_add():
    import warpsim.frontends.cupy as cp

    k = cp.RawKernel(ADD, "vec_add")
    a = cp.arange(25, dtype=cp.float32).reshape(5, 5)
    b = cp.arange(25, dtype=cp.float32).reshape(5, 5) * 0.5
    out = cp.zeros((5, 5), dtype=cp.float32)
    k((5,), (5,), (a, b, out))
    assert isinstance(out, cp.ndarray)
    np.testing.assert_array_equal(out.get(), a.get() + b.get())
    # NumPy arrays work too, written back as a device array would be
    o2 = np.zeros(25, np.float32)
    k((5,), (5,), (np.arange(25, dtype=np.float32), np.ones(25, np.float32), o2))
    np.testing.assert_array_equal(o2, np.arange(25) + 1)


@needs_nvcc
def test_raw_module_two_kernels_and_template():
    import warpsim.frontends.cupy as cp

    mod = cp.RawModule(code=MODULE, options=("-std=c++17",), name_expressions=("axpy<float>", "axpy<double>"))
    x = cp.arange(100, dtype=cp.float32)
    y = cp.full(100, 3.0, dtype=cp.float32)
    out = cp.zeros(100, dtype=cp.float32)
    mod.get_function("sum_kernel")((4,), (32,), (x, y, out, np.uint32(100)))
    np.testing.assert_array_equal(out.get(), np.arange(100) + 3.0)
    mod.get_function("mul_kernel")((4,), (32,), (x, y, out, 100), shared_mem=0)
    np.testing.assert_array_equal(out.get(), np.arange(100) * 3.0)
    yd = cp.ones(100, dtype=cp.float64)
    mod.get_function("axpy<double>")((4,), (32,), (2.0, x.astype(cp.float64), yd, 100))
    np.testing.assert_array_equal(yd.get(), 2.0 * np.arange(100) + 1.0)
    with pytest.raises(warpsim.WarpsimError, match="name_expressions"):
        mod.get_function("axpy<int>")


@needs_nvcc
def test_from_cu_path_arch_and_errors(tmp_path):
    p = tmp_path / "k.cu"
    p.write_text(ADD)
    m = warpsim.Module.from_cu(str(p), arch="sm_80")
    assert ".target sm_80" in m.text
    a = np.arange(64, dtype=np.float32)
    out, = m.launch("vec_add", 2, 32, [a, a, np.zeros(64, np.float32)], arch="sm_80")[2:]
    np.testing.assert_array_equal(out, 2 * a)
    with pytest.raises(cuda.CudaCompileError, match="nvcc failed") as e:
        warpsim.Module.from_cu("__global__ void f() { undeclared(); }")
    assert "undeclared" in e.value.log
    import warpsim.frontends.cupy as cp
    ptx = tmp_path / "k.ptx"
    ptx.write_text(m.text)
    k = cp.RawModule(path=str(ptx)).get_function("vec_add")
    o = cp.zeros(64, dtype=cp.float32)
    k((2,), (32,), (a, a, o))
    np.testing.assert_array_equal(o.get(), 2 * a)
    with pytest.raises(warpsim.WarpsimError, match="not SASS"):
        cp.RawModule(path=str(tmp_path / "k.cubin"))


def test_raw_module_from_ptx_text_needs_no_nvcc():
    import warpsim.frontends.cupy as cp

    ptx = open(os.path.join(os.path.dirname(__file__), "kernels", "wmma", "wmma_gemm.ptx")).read()
    mod = cp.RawModule(code=ptx)
    k = mod.get_function("wmma_f64")
    rng = np.random.default_rng(1)
    A, B, C = (rng.standard_normal((16, 16)) for _ in range(3))
    D = cp.zeros((16, 16), dtype=cp.float64)
    k((1, 1), (128,), (A, B.T.copy(), C, D, 16, 16, 16))
    np.testing.assert_allclose(D.get(), A @ B + C, rtol=1e-12)
