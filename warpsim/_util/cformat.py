"""C's printf formatting as CUDA's device printf applies it, on bytes.

:func:`parse` splits a format string into literal bytes and conversion specifications;
:func:`arg_layout` says where each argument sits in the argument buffer ``vprintf`` receives
(CUDA's ABI: arguments in order, each aligned to its size; ``float`` promoted to ``double``,
``char``/``short`` to ``int``; ``%s``/``%p`` 8-byte pointers); :func:`format_one` formats one
conversion.  Pure functions, no NumPy.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass

__all__ = ["Conv", "FormatSpecError", "arg_layout", "format_one", "parse"]

_SPEC_RE = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|j|z|t|L)?([diouxXcsfFeEgGaApn%])?")
_INT_CONV = b"diouxXc"
_FLOAT_CONV = b"fFeEgGaA"


class FormatSpecError(ValueError):
    """A malformed conversion specification (message says which, at which byte)."""


@dataclass(frozen=True)
class Conv:
    """One conversion: flags, width / precision (int, None, or '*'), length modifier, conversion
    character, and the text as written."""
    flags: bytes
    width: int | str | None
    precision: int | str | None
    length: bytes
    conv: bytes
    text: bytes


def parse(fmt: bytes, device: bool = False) -> list:
    """Literal ``bytes`` and :class:`Conv` items of ``fmt`` (``%%`` becomes a literal ``%``).

    ``device``: refuse what CUDA's device printf does not do as C does (measured on an H100 /
    H200, docs/validation.md): a ``.*`` precision (the GPU prints the conversion literally) and
    an ``hh`` length modifier followed by another conversion (the GPU then reads the next
    arguments 4 bytes too far)."""
    out: list = []
    i, n = 0, len(fmt)
    lit = bytearray()
    while i < n:
        j = fmt.find(b"%", i)
        if j < 0:
            lit += fmt[i:]
            break
        lit += fmt[i:j]
        m = _SPEC_RE.match(fmt, j)
        if m is None or m.group(5) is None:
            bad = fmt[j:j + 8].split(b"\n")[0].decode("latin-1")
            raise FormatSpecError(f"malformed conversion '{bad}' at byte {j} of the format string")
        flags, width, prec, length, conv = m.groups()
        if conv == b"%":
            if m.end() - j != 2:
                raise FormatSpecError(f"malformed conversion '{fmt[j:m.end()].decode('latin-1')}' "
                                      f"at byte {j} of the format string")
            lit += b"%"
            i = m.end()
            continue
        if conv == b"n":
            raise FormatSpecError(f"%n (at byte {j}) is not supported by device printf")
        if length == b"L" and conv not in _FLOAT_CONV or length and conv in b"sp" or \
                length in (b"hh", b"h", b"j", b"z", b"t", b"ll") and conv in _FLOAT_CONV:
            raise FormatSpecError(f"length modifier '{length.decode()}' does not apply to "
                                  f"%{conv.decode()} (at byte {j} of the format string)")
        if lit:
            out.append(bytes(lit))
            lit = bytearray()
        w = None if width is None else (b"*" if width == b"*" else int(width))
        p = None if prec is None else (b"*" if prec == b"*" else int(prec or b"0"))
        out.append(Conv(flags, "*" if w == b"*" else w, "*" if p == b"*" else p, length or b"",
                        conv, fmt[j:m.end()]))
        i = m.end()
    if lit:
        out.append(bytes(lit))
    if device:
        convs = [c for c in out if isinstance(c, Conv)]
        for k, c in enumerate(convs):
            if c.precision == "*":
                raise FormatSpecError(f"'{c.text.decode('latin-1')}': a '.*' precision is not supported by "
                                      "CUDA's device printf (the GPU prints the conversion literally)")
            if c.length == b"hh" and k + 1 < len(convs):
                raise FormatSpecError(f"'{c.text.decode('latin-1')}' followed by another conversion: CUDA's "
                                      "device printf misreads the arguments after an hh conversion "
                                      "(write %d with a cast instead)")
    return out


def _size(c: Conv) -> int:
    if c.conv in _FLOAT_CONV or c.conv in b"sp":
        return 8
    return 8 if c.length in (b"l", b"ll", b"j", b"z", b"t") else 4


def arg_layout(items: list) -> list[tuple[str, int, int]]:
    """(role, byte offset, size) of every argument the items consume, in order: role 'width',
    'precision' (4-byte ints for ``*``) or 'value'."""
    out, off = [], 0
    for c in items:
        if not isinstance(c, Conv):
            continue
        roles = [("width", 4)] * (c.width == "*") + [("precision", 4)] * (c.precision == "*")
        for role, size in roles + [("value", _size(c))]:
            off = (off + size - 1) // size * size
            out.append((role, off, size))
            off += size
    return out


def _float_text(c: Conv, x: float, width, prec) -> bytes:
    flags = c.flags.decode()
    conv = c.conv.decode()
    if math.isnan(x) or math.isinf(x):
        neg = math.copysign(1.0, x) < 0
        body = ("nan" if math.isnan(x) else "inf")
        body = body.upper() if conv.isupper() else body
        sign = "-" if neg else ("+" if "+" in flags else (" " if " " in flags else ""))
        s = sign + body
        w = width or 0
        return (s.ljust(w) if "-" in flags else s.rjust(w)).encode()
    if conv in "aA":
        return _hexfloat(c, x, width, prec)
    spec = "%" + flags + ("" if width is None else str(width)) + ("" if prec is None else f".{prec}") + conv
    return (spec % x).encode()


def _hexfloat(c: Conv, x: float, width, prec) -> bytes:
    flags = c.flags.decode()
    neg = math.copysign(1.0, x) < 0
    x = abs(x)
    if x == 0:
        mant, exp = "", 0
        lead = "0"
    else:
        h = x.hex()  # 0x1.8000000000000p+1 (subnormals 0x0.xxxp-1022)
        m = re.fullmatch(r"0x([01])\.([0-9a-f]+)p([+-]\d+)", h)
        lead, mant, exp = m.group(1), m.group(2), int(m.group(3))
        mant = mant.rstrip("0")
        if prec is not None:
            v = int(lead + (mant + "0" * 13)[:13], 16)
            shift = 4 * (13 - prec)
            if shift > 0:
                half = 1 << (shift - 1)
                r = v >> shift
                rem = v & ((1 << shift) - 1)
                if rem > half or rem == half and r & 1:
                    r += 1
                digits = f"{r:x}".rjust(prec + 1, "0")
                lead, mant = digits[:-prec] if prec else digits, digits[-prec:] if prec else ""
                if len(lead) > 1:  # rounded up to 2.0
                    lead, exp = "1", exp + 1
            else:
                mant = (mant + "0" * prec)[:prec]
    if prec is not None and x == 0:
        mant = "0" * prec
    dot = "." if mant or "#" in flags else ""
    body = f"0x{lead}{dot}{mant}p{exp:+d}"
    if c.conv == b"A":
        body = body.upper()
    sign = "-" if neg else ("+" if "+" in flags else (" " if " " in flags else ""))
    s = sign + body
    w = width or 0
    if "-" in flags:
        s = s.ljust(w)
    elif "0" in flags and len(s) < w:
        s = sign + body[:2] + "0" * (w - len(s)) + body[2:]
    else:
        s = s.rjust(w)
    return s.encode()


def format_one(c: Conv, raw: int, width: int | None, prec: int | None, string: bytes | None = None) -> bytes:
    """The text of conversion ``c`` for argument bits ``raw`` (an unsigned int of the
    argument's size; the bytes of the string for ``%s``, passed as ``string``)."""
    if width is not None and width < 0:  # a negative * width: left-justify
        c = Conv(c.flags + b"-", abs(width), c.precision, c.length, c.conv, c.text)
        width = abs(width)
    if prec is not None and prec < 0:
        prec = None
    conv = c.conv
    spec = b"%" + c.flags + (b"" if width is None else str(width).encode()) + \
        (b"" if prec is None else b"." + str(prec).encode())
    if conv in _FLOAT_CONV:
        return _float_text(c, struct.unpack("<d", struct.pack("<Q", raw & (2**64 - 1)))[0], width, prec)
    if conv == b"s":
        if string is None:  # glibc: "(null)", or nothing where the precision cuts it short
            string = b"(null)" if prec is None or prec >= 6 else b""
        return (spec + b"s") % string
    if conv == b"p":
        s = b"(nil)" if raw == 0 else b"0x%x" % raw
        return (b"%" + c.flags.replace(b"0", b"") + (b"" if width is None else str(width).encode()) + b"s") % s
    if conv == b"c":
        return (b"%" + c.flags.replace(b"0", b"") + (b"" if width is None else str(width).encode()) + b"c") % (raw & 0xFF)
    bits = 64 if c.length in (b"l", b"ll", b"j", b"z", b"t") else 32
    if c.length == b"h":
        bits = 16
    elif c.length == b"hh":
        bits = 8
    v = raw & ((1 << bits) - 1)
    if conv in b"di":
        if v >> (bits - 1):
            v -= 1 << bits
    if prec == 0 and v == 0 and not (conv == b"o" and b"#" in c.flags):
        s = b""  # C: precision 0 prints no digits for 0
        if conv in b"di" and (b"+" in c.flags or b" " in c.flags):
            s = b"+" if b"+" in c.flags else b" "
        w = width or 0
        return s.ljust(w) if b"-" in c.flags else s.rjust(w)
    flags = c.flags
    if conv not in b"di":
        flags = flags.replace(b"+", b"").replace(b" ", b"")  # no sign for unsigned conversions
    if conv == b"o" and b"#" in flags:  # C writes 017, Python 0o17
        digits = b"%o" % v
        if not digits.startswith(b"0"):
            digits = b"0" + digits
        if prec is not None and len(digits) < prec:
            digits = digits.rjust(prec, b"0")
        w = width or 0
        pad = b"0" if b"0" in flags and b"-" not in flags and prec is None else b" "
        return digits.ljust(w) if b"-" in flags else digits.rjust(w, pad)
    if prec is not None:
        flags = flags.replace(b"0", b"")  # C ignores 0 when a precision is given
    spec = b"%" + flags + (b"" if width is None else str(width).encode()) + \
        (b"" if prec is None else b"." + str(prec).encode())
    return (spec + (b"d" if conv in b"diu" else conv)) % v
