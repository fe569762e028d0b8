"""Read-only copies of tables that callers cannot make writable again."""

from __future__ import annotations

import numpy as np


def readonly(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` that no one can make writable again.

    ``setflags(write=False)`` alone is a request: the owner of the data (the array itself, or
    its ``.base``) can set it back to True and poison a cached table for the whole process.  The
    copy returned here reads from an immutable ``bytes`` object, so NumPy refuses that.
    """
    a = np.ascontiguousarray(a)
    return np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape)
