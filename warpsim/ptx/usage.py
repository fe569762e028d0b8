"""Which declared registers a body's instructions name: state (register files, the
sanitizer's poison) is kept for those only, so a ``.reg .b32 %r<1000000000>;`` declaration
costs nothing until its registers are used."""

from __future__ import annotations

from warpsim.ptx.parser import Addr, Body, Pipe, Reg, Vec


def _names(op, out: set) -> None:
    if isinstance(op, Reg):
        out.add(op.name)
    elif isinstance(op, (Vec, Pipe)):
        for x in op.items:
            _names(x, out)
    elif isinstance(op, Addr):
        if op.base is not None:
            out.add(op.base)
        if op.vec is not None:
            _names(op.vec, out)


def used_registers(body: Body) -> dict[str, str]:
    """name -> declared PTX type of every declared register that an instruction (operand or
    guard) names, in first-use order; cached on ``body``."""
    cached = getattr(body, "_used_registers", None)
    if cached is not None:
        return cached
    seen: set = set()
    for st in body.statements:
        if st.guard is not None:
            seen.add(st.guard[0])
        for op in st.operands:
            _names(op, seen)
    out = {}
    for name in sorted(seen):
        t = body.reg_type(name)
        if t == "b128":  # held as two 64-bit halves (ld/st/mov.b128)
            out[name + "$lo"] = out[name + "$hi"] = "b64"
        elif t is not None:
            out[name] = t
    body._used_registers = out
    return out
