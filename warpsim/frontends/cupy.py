"""A CuPy-compatible face: ``RawKernel`` and ``RawModule`` that run on warpsim.

Code written for CuPy's raw kernels runs by changing the import::

    import warpsim.frontends.cupy as cp          # instead of: import cupy as cp

    add = cp.RawKernel(r'''extern "C" __global__ void add(const float* x, const float* y,
                                                         float* z, int n) {...}''', "add")
    x = cp.arange(1000, dtype=cp.float32); y = cp.ones(1000, dtype=cp.float32)
    z = cp.zeros_like(x)
    add((4,), (256,), (x, y, z, 1000))          # z now holds the GPU's bits
    z.get()                                     # a NumPy copy

The source is compiled by nvcc (:func:`warpsim.kernel.cuda.compile_cu`; CuPy uses NVRTC, and
``backend`` is accepted and ignored), a ``.ptx`` path or text is loaded as it is.  Options pass
to nvcc, except an architecture option (``-arch=sm_80``, ``--gpu-architecture=compute_80``),
which picks the target; the default is ``sm_90``.  Arrays are this module's :class:`ndarray`
(a minimal device-array stand-in: ``asarray``, ``zeros``, ``.get()``) or NumPy arrays; as on a GPU,
a launch writes its results back into them.  Scalars take the kernel parameter's declared type
(CuPy would pass a Python int as 64 bits; warpsim converts it to the parameter's type, refusing
values out of its range).
"""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

import numpy as np

from warpsim.errors import WarpsimError
from warpsim.kernel.cuda import compile_cu, looks_like_cuda
from warpsim.kernel.launch import Module

__all__ = ["RawKernel", "RawModule", "ndarray", "asarray", "array", "asnumpy", "zeros", "ones",
           "empty", "zeros_like", "ones_like", "empty_like", "arange", "full", "cuda"]

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
bool_ = np.bool_


class ndarray:
    """A device array stand-in holding a NumPy array (``.get()`` returns a copy of it)."""

    __array_priority__ = 100

    def __init__(self, data: np.ndarray) -> None:
        self._data = np.ascontiguousarray(data)

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    size = property(lambda self: self._data.size)
    ndim = property(lambda self: self._data.ndim)
    nbytes = property(lambda self: self._data.nbytes)

    def get(self) -> np.ndarray:
        return self._data.copy()

    def __array__(self, dtype=None, copy=None):
        return self._data.astype(dtype) if dtype is not None else self._data.copy()

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"warpsim.frontends.cupy.ndarray({self._data!r})"

    def copy(self) -> "ndarray":
        return ndarray(self._data.copy())

    def astype(self, dtype) -> "ndarray":
        return ndarray(self._data.astype(dtype))

    def reshape(self, *shape) -> "ndarray":
        return ndarray(self._data.reshape(*shape))

    def __getitem__(self, idx):
        return ndarray(np.ascontiguousarray(self._data[idx]))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """Elementwise arithmetic computed by NumPy on the host (not a simulated kernel)."""
        args = [x._data if isinstance(x, ndarray) else x for x in inputs]
        out = getattr(ufunc, method)(*args, **kwargs)
        return ndarray(out) if isinstance(out, np.ndarray) else out


def _binop(name):
    def op(self, other):
        other = other._data if isinstance(other, ndarray) else other
        return ndarray(getattr(self._data, name)(other))
    return op


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
           "__rtruediv__"):
    setattr(ndarray, _n, _binop(_n))
ndarray.__neg__ = lambda self: ndarray(-self._data)


def asarray(a, dtype=None) -> ndarray:
    return a if isinstance(a, ndarray) and dtype is None else ndarray(np.array(np.asarray(a), dtype=dtype))


array = asarray


def asnumpy(a) -> np.ndarray:
    return a.get() if isinstance(a, ndarray) else np.asarray(a)


def zeros(shape, dtype=float) -> ndarray:
    return ndarray(np.zeros(shape, dtype))


def ones(shape, dtype=float) -> ndarray:
    return ndarray(np.ones(shape, dtype))


def empty(shape, dtype=float) -> ndarray:
    return ndarray(np.zeros(shape, dtype))  # zeros: uninitialised device memory has no model here


def full(shape, fill_value, dtype=None) -> ndarray:
    return ndarray(np.full(shape, fill_value, dtype))


def zeros_like(a, dtype=None) -> ndarray:
    return ndarray(np.zeros(np.shape(asnumpy(a)), dtype or a.dtype))


def ones_like(a, dtype=None) -> ndarray:
    return ndarray(np.ones(np.shape(asnumpy(a)), dtype or a.dtype))


empty_like = zeros_like


def arange(*args, dtype=None) -> ndarray:
    return ndarray(np.arange(*args, dtype=dtype))


class _Device:
    def __init__(self, i: int = 0) -> None:
        self.id = i

    def synchronize(self) -> None:
        """Launches finish before they return; nothing to wait for."""

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class cuda:  # noqa: N801 - CuPy's namespace
    Device = _Device


_ARCH_OPT = re.compile(r"^(?:-arch|--gpu-architecture|-arch=|--gpu-architecture=)=?(?:sm_|compute_)(\w+)$")


def _split_options(options: Sequence[str]) -> tuple[str | None, list[str]]:
    arch, rest = None, []
    for o in options:
        m = _ARCH_OPT.match(o)
        if m:
            arch = "sm_" + m.group(1)
        else:
            rest.append(o)
    return arch, rest


class RawModule:
    """CuPy's ``RawModule``: CUDA source (``code``) or a ``.cu``/``.ptx`` file (``path``)."""

    def __init__(self, code: str | None = None, *, path: str | None = None,
                 options: Sequence[str] = (), backend: str = "nvrtc", translate_cucomplex: bool = False,
                 enable_cooperative_groups: bool = False, name_expressions: Sequence[str] | None = None,
                 jitify: bool = False, arch: str = "sm_90") -> None:
        if (code is None) == (path is None):
            raise TypeError("RawModule takes one of code= and path=")
        if backend not in ("nvrtc", "nvcc"):
            raise ValueError(f"backend must be 'nvrtc' or 'nvcc', got {backend!r}")
        if jitify:
            raise WarpsimError("jitify=True is not supported (nvcc compiles the source)")
        opt_arch, flags = _split_options(tuple(options))
        self.arch = opt_arch or arch
        self.options = tuple(options)
        if path is not None:
            if str(path).endswith((".cubin", ".fatbin")):
                raise WarpsimError(f"{path}: warpsim runs PTX, not SASS; load the .ptx (nvcc -ptx) "
                                   "or the .cu source")
            text = open(path).read()
            if str(path).endswith(".ptx") or not looks_like_cuda(text):
                self.module = Module(text)
            else:
                self.module = Module.from_cu(path, self.arch, flags, name_expressions or ())
        elif looks_like_cuda(code):
            self.module = Module.from_cu(code, self.arch, flags, name_expressions or ())
        else:
            self.module = Module(code)
        self.code = code

    def get_function(self, name: str) -> "RawKernel":
        """The kernel ``name``: an ``extern "C"`` name, a mangled name or a name expression."""
        mangled = self.module.names.get(name, name)
        if mangled not in self.module.kernels:
            raise WarpsimError(f"no kernel {name!r} in the module (kernels: "
                               f"{', '.join(self.module.kernels)}); a C++ kernel needs "
                               "name_expressions=[...] or extern \"C\"")
        k = RawKernel.__new__(RawKernel)
        k._init(self, mangled)
        return k


class RawKernel:
    """CuPy's ``RawKernel``: ``kernel(grid, block, args, shared_mem=0)`` runs it on warpsim."""

    def __init__(self, code: str, name: str, options: Sequence[str] = (), backend: str = "nvrtc",
                 translate_cucomplex: bool = False, enable_cooperative_groups: bool = False,
                 jitify: bool = False, arch: str = "sm_90") -> None:
        mod = RawModule(code=code, options=options, backend=backend, jitify=jitify, arch=arch)
        k = mod.get_function(name)
        self._init(mod, k.name)
        self.code = code

    def _init(self, mod: RawModule, name: str) -> None:
        self._mod = mod
        self.name = name
        self.max_dynamic_shared_size_bytes = 0
        self.check = False

    @property
    def kernel(self):
        return self._mod.module.kernels[self.name]

    def __call__(self, grid, block, args: Sequence[Any], *, shared_mem: int = 0,
                 stream=None, enable_cooperative_groups: bool = False) -> None:
        if not isinstance(args, (tuple, list)):
            raise TypeError("args must be a tuple (CuPy: kernel(grid, block, args))")
        conv, back = [], []
        for i, a in enumerate(args):
            if isinstance(a, ndarray):
                conv.append(a._data)
                back.append((i, a))
            elif isinstance(a, np.ndarray):
                if a.ndim == 0:
                    conv.append(a[()])
                else:
                    conv.append(np.ascontiguousarray(a))
                    back.append((i, a))
            else:
                conv.append(a)
        outs = self._mod.module.launch(self.name, grid, block, conv, shared_bytes=int(shared_mem),
                                       arch=self._mod.arch, check=self.check)
        for (i, orig), res in zip(back, outs):
            if isinstance(orig, ndarray):
                orig._data = res.reshape(orig.shape)
            elif orig.flags.writeable:
                orig[...] = res.reshape(orig.shape)
