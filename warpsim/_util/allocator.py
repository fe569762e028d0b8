"""The C allocator under NumPy's arrays, set up for batches of warps (glibc only).

A batch of thousands of warps makes temporaries of 0.1 to a few MB in every instruction.
glibc's default policy serves such blocks with a fresh ``mmap`` (or gives a freed heap top
back to the system at once), so each temporary pays one page fault per 4 KiB page when it is
first written: 106,000 minor faults per run of ``benchmarks/ptx_interp.py`` at 4,096 warps,
which made the run 2.6 times slower than the arithmetic alone (docs/performance.md).

:func:`tune` raises glibc's mmap threshold to 32 MiB and its trim threshold to 64 MiB
(``mallopt``), so that freed blocks are reused instead of returned: afterwards the run above
takes about 1,200 faults.  The cost is memory: up to 64 MiB of freed heap stays with the
process.  The setting is process-wide and is made once, the first time warpsim simulates a
batch of :data:`MIN_WARPS` warps or more (``Warp.run``/``execute``, ``launch``, ``mma``).
Set the environment variable ``WARPSIM_MALLOC=default`` to leave the allocator alone.
Elsewhere than glibc (macOS, musl, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: Batches at least this large tune the allocator (smaller ones make no blocks above 128 KiB).
MIN_WARPS = 64

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20

_state: bool | None = None  # None: not tried yet; True: tuned; False: not possible or refused


def tune() -> bool:
    """Apply the settings (once); True when they are in effect."""
    global _state
    if _state is None:
        _state = False
        if os.environ.get("WARPSIM_MALLOC", "").lower() in ("default", "off", "0", "no"):
            return False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError, TypeError):
            return False
        if not hasattr(libc, "gnu_get_libc_version"):  # mallopt's parameters are glibc's
            return False
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        _state = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _state


def for_batch(warps: int) -> None:
    """Tune the allocator if a batch of ``warps`` warps is large enough to need it."""
    if _state is None and warps >= MIN_WARPS:
        tune()
