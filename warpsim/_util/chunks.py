"""Running an elementwise register function over a large batch in slices of warps.

A function of whole register arrays makes temporaries of the same size (a float64 copy of a
(4096, 32) f16x2 register is 2 MiB); run on slices of :data:`CHUNK_WARPS` warps, its
temporaries stay in cache and are reused by the allocator instead of being mapped afresh
(page faults) on every instruction.  Results are identical: the function is elementwise.
"""

from __future__ import annotations

import numpy as np

#: Warps per slice (16,384 lanes: float64 temporaries of 128-256 KiB).
CHUNK_WARPS = 512


def chunked(f):
    """Wrap ``f(*srcs) -> array``, elementwise over the batch, to run on slices of
    :data:`CHUNK_WARPS` warps when the batch holds more than twice that many.  Sources are
    register arrays of one shape (*batch, 32), or scalars (immediates) passed whole."""

    def run(*srcs):
        shape = None
        for s in srcs:
            if s.__class__ is np.ndarray and s.ndim:
                if shape is None:
                    shape = s.shape
                elif s.shape != shape:
                    return f(*srcs)
        if shape is None or len(shape) < 2 or shape[-1] != 32 or s is None \
                or np.prod(shape[:-1]) <= 2 * CHUNK_WARPS:
            return f(*srcs)
        flat = [s.reshape(-1, 32) if s.__class__ is np.ndarray and s.ndim else s for s in srcs]
        n = len(next(s for s in flat if s.__class__ is np.ndarray and s.ndim))
        parts = [f(*(s[i:i + CHUNK_WARPS] if s.__class__ is np.ndarray and s.ndim else s
                     for s in flat)) for i in range(0, n, CHUNK_WARPS)]
        return np.concatenate(parts).reshape(shape)
    return run
