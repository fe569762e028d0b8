"""warpsim: a functional, bit-exact simulator of NVIDIA GPU warps executing PTX.

The main entry points:

- :func:`decode` - parse and check an instruction for a target architecture.
- :func:`layout`, :func:`pack`, :func:`unpack` - fragment layouts and register packing.
- :func:`mma` - run the instruction on register words of a batch of warps.
- :func:`matmul` - the same on matrices (pack -> mma -> unpack).
- :func:`gemm` - a whole M x K by K x N product through one instruction, tiled and batched.
- :func:`instructions` - the instructions warpsim knows, filtered by shape, type, kind, arch.
- :class:`Warp` - a register file per lane that executes ``mma.sync`` PTX text.
- :func:`render_layout`, :func:`explain_packing`, :func:`golden` - layout pictures, a packing
  doctor and golden-value export (also on the ``warpsim`` command line).
- ``warpsim.triton`` (``@triton.jit`` kernels), ``warpsim.cupy`` (CuPy's RawKernel/RawModule) and
  :meth:`Module.from_cu` (CUDA source): front-ends, see docs/frontends.md.
"""

from __future__ import annotations

from warpsim.tools.catalog import instructions
from warpsim.tensorcore.decode import decode, legal_archs
from warpsim.errors import FormatError, PtxError, ShapeError, WarpsimError
from warpsim.tensorcore.api import layout, matmul
from warpsim.tensorcore.execute import mma
from warpsim.tensorcore.gemm import gemm
from warpsim.facts.isa import ARCHS, Instruction
from warpsim.tensorcore.packing import pack, unpack
from warpsim.tensorcore.doctor import explain_packing
from warpsim.tools.golden import golden, read_golden, write_golden
from warpsim.tools.render import render_layout
from warpsim.errors import RegisterError
from warpsim.kernel.warp import Warp
from warpsim.kernel.launch import Kernel, Module, launch
from warpsim.kernel.sanitizer import Finding, SanitizerError, Trace
from warpsim.kernel.tensormap import TensorMap, tensor_map, tensor_map_im2col
from warpsim.errors import TensorMapError

from warpsim._util.version import VERSION as __version__


def __getattr__(name: str):
    # warpsim.triton: the Triton front-end, imported on first use (Triton itself only when a
    # kernel is compiled); warpsim.cupy: the CuPy face
    if name == "triton":
        from warpsim.frontends import triton as mod
        return mod
    if name == "cupy":
        from warpsim.frontends import cupy as mod
        return mod
    raise AttributeError(f"module 'warpsim' has no attribute {name!r}")

__all__ = [
    "ARCHS", "FormatError", "Instruction", "PtxError", "ShapeError", "WarpsimError", "__version__",
    "Finding", "Kernel", "Module", "RegisterError", "SanitizerError", "Trace", "Warp", "decode",
    "explain_packing", "gemm", "golden", "instructions", "launch", "layout", "legal_archs",
    "matmul", "mma", "pack", "read_golden", "render_layout", "unpack", "write_golden",
    "TensorMap", "TensorMapError", "tensor_map", "tensor_map_im2col"
]
