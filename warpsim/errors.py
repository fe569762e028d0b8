"""Exception types raised by warpsim."""

from __future__ import annotations


class WarpsimError(ValueError):
    """Base class of warpsim's input errors (a ValueError)."""


class PtxError(WarpsimError):
    """An instruction string, qualifier or selector that PTX (or ptxas) rejects."""


class FormatError(WarpsimError):
    """A value or bit pattern that an element format cannot represent."""


class ShapeError(WarpsimError):
    """Arrays whose shape, lane count or register count do not fit the instruction."""
