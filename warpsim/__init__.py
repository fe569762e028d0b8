"""warpsim: a functional, bit-exact simulator of one GPU warp executing PTX ``mma.sync``."""

from __future__ import annotations

from .errors import FormatError, PtxError, ShapeError, WarpsimError
from .isa import ARCHS, Instruction

__version__ = "0.1.0"

__all__ = [
    "ARCHS", "FormatError", "Instruction", "PtxError", "ShapeError", "WarpsimError", "__version__",
]
