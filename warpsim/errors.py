"""Exception types raised by warpsim."""

from __future__ import annotations


class WarpsimError(ValueError):
    """Base class of warpsim's input errors (a ValueError).

    The message (``args[0]``) says what is wrong; where it happened is in attributes (None where
    the raising site does not know), and ``str()`` renders them: ``instruction`` (the statement
    text) and ``line`` (its PTX line), ``warp`` (the warp: its index in the batch run together, a
    tuple; in a kernel launch its index in its CTA) and ``cta`` (the CTA of a kernel launch),
    ``lanes`` (the lanes of that warp concerned, a tuple), ``address`` and ``space`` (of a memory
    access).  Code reads the attributes, never the text.
    """

    instruction: str | None = None
    line: int | None = None
    warp: tuple | None = None
    cta: tuple | None = None
    lanes: tuple | None = None
    address: int | None = None
    space: str | None = None

    def at(self, **where) -> "WarpsimError":
        """Set the location attributes named in ``where``; returns the error itself."""
        for k, v in where.items():
            if not hasattr(type(self), k):
                raise AttributeError(f"{type(self).__name__} has no location attribute {k!r}")
            setattr(self, k, v)
        return self

    def __str__(self) -> str:
        msg = str(self.args[0]) if self.args else ""  # what is wrong; then where
        ins = self.instruction
        if ins:
            where = f"line {self.line}: {ins}" if self.line else ins
            if ins not in msg:
                msg = f"{where}: {msg}"
            elif self.line and where not in msg:
                msg = f"line {self.line}: {msg}"
            if len(ins) > QUOTE_LIMIT:
                msg = msg.replace(ins, quote(ins))
        if self.warp or self.cta:
            w = self.warp[0] if self.warp and len(self.warp) == 1 else self.warp
            who = [f"warp {w}"] if self.warp else []
            if self.cta is not None:
                who.append(f"CTA {self.cta}")
            msg += f" [{' of '.join(who)}]"
        return msg

    def __reduce__(self):
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls, args, state):
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class StepLimitError(WarpsimError):
    """An interpreter run stopped at its ``max_steps`` instruction budget (the program may not
    terminate).  ``steps``: the instructions it had run."""

    steps: int | None = None


class StepBudgetError(WarpsimError):
    """A launch stopped at its launch-wide budget ``max_total_steps`` (warp instructions over
    all CTAs).  ``budget``: that budget; ``executed``: the warp instructions run before the stop."""

    budget: int | None = None
    executed: int | None = None


class TimeBudgetError(WarpsimError):
    """A launch stopped at its wall-time budget ``timeout_s``.  ``budget``: that budget in
    seconds; ``elapsed``: the seconds it had run; ``executed``: the warp instructions run."""

    budget: float | None = None
    elapsed: float | None = None
    executed: int | None = None


class PtxError(WarpsimError):
    """An instruction string, qualifier or selector that PTX (or ptxas) rejects."""


class OperandWidthError(PtxError):
    """A register whose declared width an operand does not take (ptxas: "Arguments mismatch").
    ``operand``: the operand's position (0 = the first); ``register``: its name; ``width``:
    the register's bits; ``expected``: the bits the operand takes (at least, for ``cvt``,
    ``ld``/``st`` values)."""

    operand: int | None = None
    register: str | None = None
    width: int | None = None
    expected: int | None = None


class TargetError(PtxError):
    """An instruction the kernel's target or PTX ISA version does not have (ptxas: "not supported
    on .target" / "requires PTX ISA .version").  ``opcode``: the instruction; ``arch``: the
    target asked for; ``min_sm``: the first SM version that has it; ``version``: the module's
    ``.version`` (major, minor) where known; ``min_ptx``: the first PTX version that has it."""

    opcode: str | None = None
    arch: str | None = None
    min_sm: int | None = None
    version: tuple | None = None
    min_ptx: tuple | None = None


class PtxVersionError(TargetError):
    """A module whose ``.version`` is newer than any PTX ISA warpsim models (ptxas: "Unsupported
    .version").  ``version``: the module's (major, minor); ``max_ptx``: the newest warpsim
    models; ``line``: the directive's line."""

    max_ptx: tuple | None = None


class FormatError(WarpsimError):
    """A value or bit pattern that an element format cannot represent.  ``index``: where in the
    array given (a tuple), ``value``: the value there, ``why``: what the format cannot do with
    it, where the raising site knows them."""

    index: tuple | None = None
    value: object = None
    why: str | None = None


class ShapeError(WarpsimError):
    """Arrays whose shape, lane count or register count do not fit the instruction."""


class FileTypeError(WarpsimError):
    """A file of a kind the function does not read or write: its name's suffix, or its bytes,
    say another format.  ``path``: the file."""

    path: str | None = None


class MemoryAccessError(PtxError):
    """An access outside a state space (or every global buffer), not aligned to its width, or a
    store to a read-only space.  ``reason``: 'outside', 'misaligned' or 'read-only'; ``nbytes``
    and ``align``: the access width and the alignment it needs."""

    reason: str | None = None
    nbytes: int | None = None
    align: int | None = None


class DivergenceError(PtxError):
    """A warp-synchronous instruction (``.sync.aligned``, a membermask, ``bra.uni``) whose lanes
    do not agree: part of a warp runs it, lanes differ in their membermask, or read from lanes
    that do not run it.  ``lanes``: the lanes named first in the message."""


class MetadataError(WarpsimError):
    """Metadata words that do not encode a valid sparsity pattern (undefined in PTX)."""


class RegisterError(WarpsimError, KeyError):
    """A register name that is unknown, malformed, or used with the wrong width.

    Both a :class:`WarpsimError` (ValueError) and a KeyError (whose quoting ``str()`` it does
    not use).
    """


def first_lanes(mask) -> dict:
    """Location attributes of the first warp where the boolean array ``mask`` (``(*batch, 32)``)
    is set: ``{'warp': its batch index (a tuple), 'lanes': its set lanes (a tuple)}``, for
    :meth:`WarpsimError.at`."""
    import numpy as np

    m = np.asarray(mask)
    first = tuple(int(i) for i in np.argwhere(m)[0][:-1])
    sel = m[first] if first else m
    return {"warp": first, "lanes": tuple(int(i) for i in np.flatnonzero(sel))}


#: Longest text quoted whole in an error message.
QUOTE_LIMIT = 200


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` for an error message: whole up to ``limit`` characters, else its head and tail
    around ' ... ' and its length (a statement of 20,000 operands quoted whole would make a
    100 KB message)."""
    if len(text) <= limit:
        return text
    tail = max(limit // 4, 1)
    return f"{text[:limit - tail]} ... {text[-tail:]} ({len(text)} characters)"


class TensorMapError(WarpsimError):
    """A tensor-map parameter the CUDA driver refuses (or 128 bytes that are no tensor map).
    ``parameter``: its name as ``cuTensorMapEncodeTiled`` calls it (``box_dim[0]``,
    ``global_stride[1]``, ``swizzle``, ...); ``value``: the value given."""

    parameter: str | None = None
    value: object = None

    def __init__(self, parameter: str, value: object = None, reason: str = "") -> None:
        shown = (f"<array of shape {value.shape}, dtype {value.dtype}>"  # not its whole repr
                 if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "ndim")
                 and value.ndim > 0 else repr(value))
        super().__init__(f"tensor map: {parameter} = {shown} {reason}".rstrip()
                         if reason or value is not None else parameter)
        self.parameter, self.value = parameter, value


class DeviceAssertError(WarpsimError):
    """A device-side ``assert`` failed (``__assertfail``): the launch stops, as on the GPU.
    ``assertion``, ``file``, ``source_line``, ``function``: what the call passed; ``cta`` and
    ``thread``: the (x, y, z) of the first failing thread."""

    finding_kind = "assert"  # the sanitizer finding's kind
    assertion: str | None = None
    file: str | None = None
    source_line: int | None = None
    function: str | None = None
    cta: tuple | None = None
    thread: tuple | None = None


class PrintfError(PtxError):
    """A device ``printf`` (``vprintf``) whose format string is malformed or whose argument
    cannot be read (a ``%s`` with a bad pointer)."""
