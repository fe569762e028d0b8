"""Limits on what a kernel may declare and how it may be launched: the GPU's (with their
source) and the simulator's own (each a bound that keeps a launch's time and memory
proportional to the work; see docs/launch.md, "Limits")."""

from __future__ import annotations

#: Constant memory of a module: 64 KiB (CUDA C++ Programming Guide, "Technical
#: Specifications": constant memory size; ptxas refuses more in ``.const`` bank 0).
MAX_CONST_BYTES = 64 * 1024

#: Local memory per thread: 512 KiB (CUDA C++ Programming Guide, "Technical
#: Specifications": maximum amount of local memory per thread).
MAX_LOCAL_BYTES = 512 * 1024

#: Kernel parameter bytes: 32,764 (CUDA 12.1 and later on Volta and newer; CUDA C++
#: Programming Guide, "Function Parameters").
MAX_PARAM_BYTES = 32764

#: The largest ``.align`` accepted: PTX requires a power of two (PTX ISA, "Variable and
#: Parameter Attributes: .align"); no real kernel aligns beyond a 2 MiB page, so a larger
#: value is refused (warpsim places module variables in one dense global-memory array).
MAX_ALIGN = 1 << 21

#: Bytes of module-scope ``.global`` variables in all: 1 GiB (a simulator limit: they live in
#: one dense array of host memory).
MAX_GLOBAL_VARIABLE_BYTES = 1 << 30

#: Registers a routine may declare (``.reg`` names and ``%r<N>`` ranges together): 2^30.
#: PTX registers are virtual (ptxas allocates at most 255 per thread after register
#: allocation), so a legal module may declare many more than 255; warpsim keeps state only
#: for registers an instruction names, and this bound only stops absurd declarations.
MAX_DECLARED_REGISTERS = 1 << 30

#: Bytes of PTX module text read by ``warpsim launch``: 64 MiB (a simulator limit; the
#: largest nvcc output of real kernels is a few MiB).
MAX_MODULE_TEXT_BYTES = 64 << 20


def is_power_of_two(n: int) -> bool:
    """Whether ``n`` is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


#: Depth of nested ``call``s (warpsim inlines every call): 256, a simulator limit (each level
#: costs Python stack; nvcc inlines device functions itself, real PTX nests a few deep).
MAX_CALL_DEPTH = 256

#: Calls inlined into one kernel in all: 10,000, a simulator limit (26 functions each calling
#: the next twice would inline 2^26 copies).
MAX_INLINED_CALLS = 10_000


#: Warp instructions a whole launch may run by default (``max_total_steps``): 3x10^8, a
#: simulator limit.  One warp instruction is one instruction executed by one warp (a CTA of 8
#: warps running 100 instructions costs 800).  The largest launch of the tests and benchmarks,
#: the suite's 4096^3 f16 GEMM (tests/kernels/gemm_f16.cu, 4,096 CTAs of 4 warps, 880 + 8K
#: warp instructions per CTA), runs 1.4x10^8 and takes over an hour here, so real launches stay
#: under it with room; a runaway one (a grid of 2^31-1 CTAs of a trivial kernel, about 2.5x10^5
#: warp instructions a second) stops within about 20 minutes.  Pass a larger budget for a
#: bigger launch, a smaller one (or a wall-time ``timeout_s``) to stop sooner.
MAX_LAUNCH_WARP_INSTRUCTIONS = 3 * 10**8
