"""Run ``@triton.jit`` kernels on warpsim: Triton compiles, warpsim executes the PTX.

``warpsim.triton.jit(fn, target="sm_80")`` (or ``@warpsim.triton.jit`` in place of
``@triton.jit``) gives a kernel launched with Triton's syntax on NumPy arrays or torch CPU tensors::

    add = warpsim.triton.jit(add_kernel)
    add[(n + 1023) // 1024,](x, y, out, n, BLOCK=1024)   # out now holds the GPU's bits

Triton compiles ahead of time for the chosen target (``triton.compile(ASTSource(...),
target=GPUTarget("cuda", cc, 32))``, no GPU needed); warpsim runs the PTX through
:meth:`warpsim.Module.launch`.  As Triton's own launcher does: the arguments are specialised
with Triton's rules (pointer dtypes, integers equal to 1 as constants, 16-divisible integers and
pointers get the divisibility hint: every warpsim buffer is 256-byte aligned), constexprs and
specialised constants are left out of the parameter list, the global- and profile-scratch
pointers Triton appends are passed (a buffer of ``size * grid`` bytes when the kernel asks for
one, else NULL), the block is ``32 * num_warps`` threads and the dynamic shared memory is the
``shared`` bytes of the compiled metadata.  Compiled modules are cached by (source, signature
and specialisation, constexprs, options, target).

Unlike ``TRITON_INTERPRET=1``, which runs the kernel body in NumPy (fp32 arithmetic for a
``tl.dot`` whatever ``input_precision`` says), this runs what the GPU runs: a tf32 ``tl.dot``
rounds its inputs to tf32 and adds as the tensor core does.  Arrays are written back in place,
as on a GPU (``write_back=False`` leaves them alone); the launch returns the
:class:`TritonLaunch` with the outputs and the PTX.

The ``triton`` package is an optional extra (``pip install warpsim[triton]``), imported only
when a kernel is compiled.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from warpsim.errors import WarpsimError
from warpsim.kernel.launch import Module

__all__ = ["TARGETS", "TritonKernel", "TritonLaunch", "jit", "compile_kernel"]

#: targets the front-end compiles for: name -> (compute capability, warpsim numerics arch)
TARGETS = {"sm_80": (80, "sm_80"), "sm_86": (86, "sm_86"), "sm_89": (89, "sm_89"),
           "sm_90": (90, "sm_90"), "sm_90a": (90, "sm_90a"), "sm_100a": (100, "sm_100a")}

#: NumPy dtype name -> Triton pointer element type
_DTYPES = {"float32": "fp32", "float16": "fp16", "float64": "fp64", "bfloat16": "bf16",
           "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
           "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
           "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}

#: launch options Triton reads from the call's keywords rather than the kernel's parameters
_OPTIONS = ("num_warps", "num_stages", "num_ctas", "enable_fp_fusion", "maxnreg", "debug",
            "launch_pdl", "launch_cooperative_grid")

_CACHE: dict = {}


def _triton():
    try:
        import triton  # noqa: F401
    except ImportError as e:
        raise ImportError("warpsim.triton needs Triton: pip install warpsim[triton] "
                          "(or pip install triton)") from e
    return triton


class TritonArgError(WarpsimError, TypeError):
    """An argument the front-end cannot pass to a Triton kernel."""

    def __init__(self, msg: str, arg: str):
        super().__init__(msg)
        self.arg = arg


def _grid(grid) -> tuple[int, int, int]:
    """A launch grid (an int or 1 to 3 ints) as three dimensions."""
    dims = (grid,) if isinstance(grid, (int, np.integer)) else grid
    if not isinstance(dims, (tuple, list)) or not 1 <= len(dims) <= 3 or \
            any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) for d in dims):
        raise TritonArgError(f"grid must be an int or a tuple of 1 to 3 ints (or a callable "
                             f"returning one), got {grid!r}", "grid")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _as_numpy(name: str, v) -> np.ndarray | None:
    """A NumPy view of an array argument (NumPy array or torch tensor), or None for scalars."""
    if isinstance(v, np.ndarray):
        arr = v
    elif type(v).__module__.startswith("torch") and hasattr(v, "data_ptr"):
        t = v.detach()
        if t.device.type != "cpu":
            raise TritonArgError(f"argument {name!r}: warpsim runs on CPU tensors, this one is on "
                                 f"{t.device}", name)
        if not t.is_contiguous():
            raise TritonArgError(f"argument {name!r}: a non-contiguous tensor (pass .contiguous())",
                                 name)
        if str(t.dtype) == "torch.bfloat16":
            import ml_dtypes
            arr = t.view(_torch().int16).numpy().view(ml_dtypes.bfloat16)
        else:
            arr = t.numpy()
    else:
        return None
    if not arr.flags.c_contiguous:
        raise TritonArgError(f"argument {name!r}: a non-contiguous array (pass "
                             "np.ascontiguousarray(...))", name)
    if arr.dtype.name not in _DTYPES:
        raise TritonArgError(f"argument {name!r}: dtype {arr.dtype} has no Triton pointer type", name)
    return arr


def _torch():
    import torch
    return torch


@dataclass
class TritonLaunch:
    """One launch: the kernel's outputs (one array per array argument), PTX and metadata."""

    outputs: dict[str, np.ndarray]
    ptx: str
    metadata: Any
    grid: tuple[int, int, int]
    block: int
    shared_bytes: int


@dataclass
class _Compiled:
    ptx: str
    metadata: Any
    module: Module
    params: list[int]  # indices of the Python arguments that are kernel parameters
    types: list[str]  # their Triton types


@dataclass
class TritonKernel:
    """A ``@triton.jit`` function bound to a target; ``kernel[grid](*args, **kw)`` runs it."""

    fn: Any
    target: str = "sm_80"
    arch: str | None = None  # warpsim numerics model; default: the target's own
    check: bool = False
    write_back: bool = True
    launch_options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.target not in TARGETS:
            raise WarpsimError(f"unknown Triton target {self.target!r}: one of {sorted(TARGETS)}")
        if not hasattr(self.fn, "params") or not hasattr(self.fn, "fn"):
            raise TypeError("warpsim.triton.jit takes a @triton.jit function (or a plain function "
                            "to wrap in one)")

    def __getitem__(self, grid) -> Callable[..., TritonLaunch]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    # -- specialisation, as triton.runtime.jit's binder does it
    def _bind(self, args, kwargs):
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}
        cached = self.__dict__.get("_signature")
        if cached is None or cached[0] is not self.fn:  # inspect.signature costs tens of us
            cached = self._signature = (self.fn, inspect.signature(self.fn.fn))
        try:
            bound = cached[1].bind(*args, **kwargs)
        except TypeError as exc:  # missing / extra / repeated arguments: name the kernel
            name = getattr(self.fn, "__name__", None) or getattr(self.fn.fn, "__name__", "kernel")
            raise TritonArgError(f"{name}{cached[1]}: {exc}", arg="") from None
        bound.apply_defaults()
        return dict(bound.arguments), options

    def specialize(self, bound: dict) -> list[tuple[str, Any]]:
        """Triton's (type, attribute) per parameter for these arguments."""
        _triton()
        from triton._C.libtriton import native_specialize_impl

        backend = _backend(self.target)
        out = []
        for kp, (name, v) in zip(self.fn.params, bound.items()):
            if kp.is_constexpr:
                out.append(("constexpr", v))
                continue
            arr = _as_numpy(name, v)
            if arr is not None:
                # every warpsim buffer starts 256-byte aligned: the divisibility hint holds
                ty = _DTYPES[arr.dtype.name]
                out.append((("*k" if kp.is_const else "*") + ty,
                            "D" if not kp.do_not_specialize_on_alignment else ""))
                continue
            if isinstance(v, np.generic):
                v = v.item()
            if v is not None and not isinstance(v, (bool, int, float)):
                raise TritonArgError(f"argument {name!r}: a {type(v).__name__}; pass a NumPy array "
                                     "(or a torch CPU tensor) for a pointer, a number for a scalar",
                                     name)
            spec = native_specialize_impl(type(backend), v, kp.is_const,
                                          not kp.do_not_specialize, not kp.do_not_specialize_on_alignment)
            ann = kp.annotation_type
            if ann:
                if ann == "u1" or ann[:2] in ("fp", "bf") or kp.do_not_specialize:
                    spec = (ann, None)
                else:
                    spec = (ann,) + tuple(spec[1:])
            out.append(tuple(spec))
        return out

    def compile(self, *args, **kwargs) -> _Compiled:
        """Compile (or fetch from the cache) the kernel for these arguments."""
        bound, options = self._bind(args, dict(kwargs))
        return self._compile(bound, {**self.launch_options, **options})

    def _compile(self, bound: dict, options: dict) -> _Compiled:
        spec = self.specialize(bound)
        src = self.fn.src
        hashed = self.__dict__.get("_src_hash")
        if hashed is None or hashed[0] is not src:  # the source's hash, again only if it changed
            hashed = self._src_hash = (src, hashlib.sha256(src.encode()).hexdigest())
        src_hash = hashed[1]
        key = (src_hash, self.fn.__name__, tuple((t, repr(a)) for t, a in spec),
               tuple(sorted(options.items())), self.target)
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        triton = _triton()
        from triton.compiler import ASTSource
        from triton.backends.compiler import GPUTarget

        names = list(bound)
        signature = {n: t for n, (t, _) in zip(names, spec)}
        constexprs = {(i,): a for i, (t, a) in enumerate(spec) if t == "constexpr"}
        attrs = {(i,): [["tt.divisibility", 16]] for i, (t, a) in enumerate(spec)
                 if t != "constexpr" and a == "D"}
        src = ASTSource(fn=self.fn, signature=signature, constexprs=constexprs, attrs=attrs)
        ck = triton.compile(src, target=GPUTarget("cuda", TARGETS[self.target][0], 32),
                            options=dict(options))
        ptx = ck.asm["ptx"]
        params = [i for i, (t, _) in enumerate(spec) if t != "constexpr"]
        comp = _Compiled(ptx, ck.metadata, Module(ptx), params, [spec[i][0] for i in params])
        _CACHE[key] = comp
        return comp

    def run(self, *args, grid, **kwargs) -> TritonLaunch:
        """Compile for these arguments and launch on ``grid`` (a tuple or a callable of the args)."""
        bound, options = self._bind(args, dict(kwargs))
        g = _grid(grid({**bound}) if callable(grid) else grid)  # checked before compiling
        comp = self._compile(bound, {**self.launch_options, **options})
        md = comp.metadata
        if getattr(md, "num_ctas", 1) != 1:
            raise WarpsimError("Triton thread-block clusters (num_ctas > 1) are not supported")
        names = list(bound)
        kargs: list[Any] = []
        arrays: list[str] = []  # names of the array arguments, in parameter order
        for i, ty in zip(comp.params, comp.types):
            name, v = names[i], bound[names[i]]
            arr = _as_numpy(name, v)
            if arr is not None:
                arrays.append(name)
                kargs.append(arr)
            elif ty.startswith("*") and v is None:
                kargs.append(None)
            else:
                kargs.append(_scalar(name, v, ty))
        nprog = g[0] * g[1] * g[2]
        for size in (md.global_scratch_size, md.profile_scratch_size):
            # as Triton's launcher: grid * num_ctas * size bytes, or NULL when none is needed
            kargs.append(np.zeros(nprog * size, np.uint8) if size > 0 else None)
        block = 32 * md.num_warps
        arch = self.arch or TARGETS[self.target][1]
        fn_name = md.name
        outs = comp.module.launch(fn_name, grid=g, block=block, args=kargs, shared_bytes=md.shared,
                                  arch=arch, check=self.check)
        result = {}
        for name, res in zip(arrays, outs):  # the scratch buffers come after the arguments
            result[name] = res
            if self.write_back:
                _write_back(bound[name], res)
        return TritonLaunch(result, comp.ptx, md, g, block, md.shared)


_BACKENDS: dict = {}


def _backend(target: str):
    """Triton's CUDA backend object for ``target`` (made once per target)."""
    b = _BACKENDS.get(target)
    if b is None:
        from triton.compiler import make_backend
        from triton.backends.compiler import GPUTarget

        b = _BACKENDS[target] = make_backend(GPUTarget("cuda", TARGETS[target][0], 32))
    return b


def _scalar(name: str, v, ty: str):
    if isinstance(v, np.generic):
        v = v.item()
    if ty.startswith("fp") or ty.startswith("bf"):
        return {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}.get(ty, np.float32)(v)
    if ty == "u1" or ty == "i1":
        return int(bool(v))
    if isinstance(v, (bool, int)):
        return int(v)
    raise TritonArgError(f"argument {name!r}: cannot pass {type(v).__name__} as {ty}", name)


def _write_back(orig, res: np.ndarray) -> None:
    if isinstance(orig, np.ndarray):
        if orig.flags.writeable:
            orig[...] = res.reshape(orig.shape)
        return
    torch = _torch()
    t = torch.from_numpy(np.ascontiguousarray(res.view(np.int16) if res.dtype.name == "bfloat16"
                                              else res))
    if str(orig.dtype) == "torch.bfloat16":
        t = t.view(torch.bfloat16)
    with torch.no_grad():
        orig.copy_(t.reshape(orig.shape))


def jit(fn=None, *, target: str = "sm_80", arch: str | None = None, check: bool = False,
        write_back: bool = True, **launch_options) -> TritonKernel | Callable[[Any], TritonKernel]:
    """Wrap a ``@triton.jit`` function (or a plain one, jitted here) to run on warpsim.

    Usable as ``warpsim.triton.jit(kernel, target="sm_89")`` or as a decorator, with or
    without arguments.  ``arch`` picks warpsim's numerics model (default: the target's);
    ``check`` runs the sanitizer; ``launch_options`` (num_warps, num_stages, ...) are defaults
    for every launch.
    """
    def wrap(f):
        if not hasattr(f, "params"):
            f = _triton().jit(f)
        return TritonKernel(f, target, arch, check, write_back, dict(launch_options))
    return wrap if fn is None else wrap(fn)


def compile_kernel(fn, *args, target: str = "sm_80", **kwargs) -> _Compiled:
    """The PTX and metadata Triton produces for ``fn`` on these arguments (nothing runs)."""
    return jit(fn, target=target).compile(*args, **kwargs)
