"""The operand-width rule ptxas enforces on registers, family by family (ptxas: "Arguments
mismatch for instruction"): derived from ptxas 13.0's verdicts on every register operand of
199 legal statements replaced by a register of each other width
(``tools/ptxas_operand_widths.py`` -> ``tests/data/ptxas_operand_widths.json.gz``).

What ptxas takes: a register of exactly the operand's width almost everywhere; at least the
type's width for ``cvt`` operands and ``ld``/``st`` values (the value is truncated or
extended); shift amounts, bit-field positions, lane/mask operands and ``popc``/``clz``/``bfind``
results are 32-bit whatever the type; ``.wide`` results (and ``mad.wide``'s addend) twice the
type; a ``.global`` or generic address register 64-bit (.shared/.local: 32 or 64).
"""

from __future__ import annotations

from warpsim.errors import OperandWidthError, PtxError
from warpsim.facts.types import TYPE_BITS
from warpsim.ptx.parser import Addr, Pipe, Reg, Vec

__all__ = ["check_operand_widths"]

# operand rules, one per operand (the last repeats): W the type's width, W2 twice it, G at
# least the type's width, D / S the first / second type's width (two-type forms), GD / GS at
# least those, 32 32 bits, V 32 bits unless the type is .pred, M mov (vector packs), A an
# address, - not checked (predicates, immediates)
_SAME = ("add", "sub", "mul", "mad", "min", "max", "and", "or", "xor", "not", "cnot", "neg", "abs",
         "div", "rem", "add.cc", "addc", "sub.cc", "subc", "mad.cc", "madc", "mul24", "mad24", "sad",
         "lop3", "prmt", "dp4a", "dp2a", "brev", "copysign", "fma", "rcp", "sqrt", "rsqrt", "sin", "cos",
         "ex2", "lg2", "tanh", "cvta", "fns", "div.approx", "div.full", "rcp.approx", "sqrt.approx",
         "rsqrt.approx", "ex2.approx", "lg2.approx", "sin.approx", "cos.approx", "tanh.approx")
RULES: dict[str, tuple[str, ...]] = {k: ("W",) for k in _SAME}
RULES.update({
    "shl": ("W", "W", "32"), "shr": ("W", "W", "32"), "shf": ("32",),
    "bfe": ("W", "W", "32", "32"), "bfi": ("W", "W", "W", "32", "32"),
    "popc": ("32", "W"), "clz": ("32", "W"), "bfind": ("32", "W"),
    "setp": ("-", "W", "W", "-"), "set": ("D", "S", "S", "-"), "selp": ("W", "W", "W", "-"),
    "slct": ("D", "D", "D", "S"), "testp": ("-", "W"),
    "cvt": ("GD", "GS"), "ld": ("G", "A"), "ldu": ("G", "A"), "st": ("A", "G"),
    "atom": ("W", "A", "W"), "red": ("A", "W"),
    "shfl.sync": ("32",), "vote.sync": ("V", "-", "32"), "redux.sync": ("32",),
    "match.sync": ("32", "W", "32"), "activemask": ("32",), "bar.warp.sync": ("32",),
    "mov": ("M",),
})
_WIDE = {"mul": ("W2", "W", "W"), "mad": ("W2", "W", "W", "W2")}
_SPACES_64 = (None, "global")  # address registers: 64-bit (warpsim's global memory is 64-bit)
_SPACE_WORDS = {"global", "shared", "shared::cta", "shared::cluster", "local", "const", "param",
                "param::entry", "param::func"}


#: cvt types whose operands take exactly their width (the others: at least it)
_CVT_EXACT = ("bf16", "bf16x2", "tf32", "e4m3x2", "e5m2x2", "e2m3x2", "e3m2x2", "e2m1x2", "ue8m0x2",
              "e4m3x4", "e5m2x4", "e2m3x4", "e3m2x4", "e2m1x4", "s2f6x2")


def _flat(op, rule: str) -> list:
    """(register, rule) pairs of one operand (pipes and vectors item by item)."""
    if isinstance(op, Pipe):
        return [(x, rule if i == 0 else "-") for i, x in enumerate(op.items)]
    if isinstance(op, Vec):
        return [(x, rule) for x in op.items]
    return [(op, rule)]


def _same_widths(ins, where, k, op, reg_width, W) -> None:
    """The registers of a vector operand have one width (ptxas refuses {%r1, %rd2}): the
    first that differs from the type's width (where some item has it), else from the first."""
    regs = [(x.name, reg_width(x.name)) for x in op.items if isinstance(x, Reg)]
    regs = [(n, b) for n, b in regs if b is not None]
    if len({b for _, b in regs}) < 2:
        return
    ref = W if any(b == W for _, b in regs) else regs[0][1]
    n, b = next((n, b) for n, b in regs if b != ref)
    _refuse(ins, where, k, n, b, ref, f"the vector's other registers are {ref}-bit; this one", False)


def check_operand_widths(ins, reg_width, where) -> None:
    """Refuse a register operand of ``ins`` (a decoded :class:`~warpsim.ptx.program.Instr`)
    whose declared width (``reg_width(name)``) its operand does not take, as ptxas does:
    :class:`~warpsim.errors.OperandWidthError` naming the operand and register."""
    rules = RULES.get(ins.key)
    if rules is None:
        return
    reg_width = _known(reg_width)
    words = ins.words
    if "wide" in words and ins.key in _WIDE:
        rules = _WIDE[ins.key]
    types = [w for w in words if w in TYPE_BITS]
    if ins.key == "cvt" and any(t in _CVT_EXACT for t in types):
        rules = ("D", "S")
    W = TYPE_BITS[types[-1]] if types else None
    D = TYPE_BITS[types[0]] if types else None
    S = TYPE_BITS[types[1]] if len(types) > 1 else D
    ops = ins.operands or ()
    for k, op in enumerate(ops):
        rule = rules[min(k, len(rules) - 1)]
        if rule == "-":
            continue
        if rule == "A":
            if isinstance(op, Addr) and op.base is not None:
                space = next((w for w in words if w in _SPACE_WORDS), None)
                bits = reg_width(op.base)
                if space in _SPACES_64 and bits == 32:
                    _refuse(ins, where, k, op.base, bits, 64, f"a {space or 'generic'} address", False)
            continue
        if rule == "M":
            if W is None:  # a type the width table does not know (.b128): its own checks
                continue
            vec = [x for x in ops if isinstance(x, Vec)]
            n = len(vec[0].items) if vec else 1
            pairs = [(x, W // n if isinstance(o, Vec) else W) for o in (op,) for x, _ in _flat(o, "")]
            for reg, w in pairs:
                _check(ins, where, k, reg, reg_width, w, False, types)
            continue
        for reg, r in _flat(op, rule):
            if r == "-":
                continue
            want = {"W": W, "G": W, "W2": 2 * W if W else None, "D": D, "S": S, "GD": D, "GS": S,
                    "32": 32, "V": None if types and types[-1] == "pred" else 32}[r]
            _check(ins, where, k, reg, reg_width, want, r.startswith("G"), types)
        if isinstance(op, Vec):
            _same_widths(ins, where, k, op, reg_width, W)


def _known(reg_width):
    """``reg_width`` giving None where it refuses a name (a register outside its declared
    range: its own error comes where the register is read; a Warp's body may name registers
    its Warp holds)."""
    def width(name):
        try:
            return reg_width(name)
        except PtxError:
            return None
    return width


def _check(ins, where, k, reg, reg_width, want, at_least, types) -> None:
    if want is None or want == 1 or not isinstance(reg, Reg):
        return
    bits = reg_width(reg.name)
    if bits is None or bits == 1:  # not a declared register (special, symbol), or a predicate
        return
    if bits == want or at_least and bits > want:
        return
    t = "." + types[-1] if types else "this"
    _refuse(ins, where, k, reg.name, bits, want, f"this {t} operand", at_least)


def _refuse(ins, where, k, name, bits, want, what, at_least) -> None:
    err = OperandWidthError(f"{where}: {name} is a {bits}-bit register; {what} (operand {k + 1}) takes "
                            f"{'at least ' if at_least else ''}{want} bits (ptxas: arguments mismatch)")
    err.operand, err.register, err.width, err.expected = k, name, bits, want
    raise err
