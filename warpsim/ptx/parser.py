"""Parse a body of PTX into statements and declarations (text in, plain data out).

A *body* is what sits between the braces of a kernel: ``.reg``/``.shared``/``.local``
declarations, labels, instructions with optional guards, comments, ``.pragma`` and debug
directives (``.loc``, ``.file``), and nested ``{ ... }`` scopes (flattened).  The parser knows no
instruction semantics: it splits every statement into guard, opcode and operand trees
(:class:`Reg`, :class:`Imm`, :class:`Vec`, :class:`Addr`, :class:`Pipe`, :class:`Sink`); the
decoder (:mod:`warpsim.ptx.program`) turns those into executable instructions once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from warpsim.errors import PtxError, quote
from warpsim.tensorcore.immediates import check_decimal
from warpsim.facts.limits import MAX_ALIGN, MAX_DECLARED_REGISTERS
from warpsim.facts.types import TYPE_BITS

__all__ = ["Addr", "Body", "Decl", "Imm", "Pipe", "Reg", "Sink", "Statement", "Vec",
           "parse_body", "parse_immediate", "parse_operand", "parse_statement"]

NAME = r"%?[A-Za-z_$][\w$]*"
_NAME_RE = re.compile(NAME + r"(?:\.[xyz])?")
_IDENT_RE = re.compile(r"[A-Za-z_$%][\w$]*")
_GUARD_RE = re.compile(r"@\s*(!?)\s*(" + NAME + r")\s+")
_OPCODE_RE = re.compile(r"[A-Za-z_][\w.:]*")
_RANGE_RE = re.compile(r"(" + NAME + r")<(\d+)>")
_ARRAY_RE = re.compile(r"(" + NAME + r")\s*\[\s*(\d*)\s*\]")
# re.ASCII: \d is 0-9 only (int() and float() would read '1\u0661' or '\uff11' as digits)
_INT_RE = re.compile(r"(-?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9]\d*)[uU]?", re.ASCII)
_FLOAT_RE = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", re.ASCII)
_F32_RE = re.compile(r"0[fF]([0-9a-fA-F]{8})")
_DEBUG_RE = re.compile(r"(?m)^([ \t]*\.(?:loc|file)\b[^\n;]*)$")
_LOC_RE = re.compile(r"\.loc\s+(\d+)\s+(\d+)(?:\s+(\d+))?(.*)", re.S)
_F64_RE = re.compile(r"0[dD]([0-9a-fA-F]{16})")
#: Directives that carry no semantics for one warp's execution.
IGNORED_DIRECTIVES = frozenset({"pragma", "loc", "file", "section", "maxnreg", "maxntid", "reqntid",
                                "minnctapersm", "maxnctapersm", "noreturn", "alias", "dwarf"})


@dataclass(frozen=True)
class Reg:
    """A register, special register, symbol or label name (resolved by the decoder).
    ``neg``: written ``!name`` (a negated predicate source)."""
    name: str
    neg: bool = False


@dataclass(frozen=True)
class Imm:
    """An immediate: ``kind`` 'int' (value an int), 'f32'/'f64' (value the bit pattern of a
    ``0f``/``0d`` literal) or 'float' (a decimal floating-point literal, value a float)."""
    value: int | float
    kind: str
    text: str


@dataclass(frozen=True)
class Vec:
    """A ``{a, b, ...}`` vector operand."""
    items: tuple


@dataclass(frozen=True)
class Addr:
    """A ``[base+offset]`` address: ``base`` a register or symbol name (None for ``[imm]``);
    ``vec``: the coordinates of a tensor operand ``[tensorMap, {c0, ...}]`` (else None)."""
    base: str | None
    offset: int
    text: str
    vec: object = None


@dataclass(frozen=True)
class Pipe:
    """``a|b``: two destinations of one operand slot (``setp``, ``shfl.sync``)."""
    items: tuple


@dataclass(frozen=True)
class Sink:
    """``_``: a destination whose value is discarded."""


@dataclass(frozen=True)
class Statement:
    """One instruction: optional guard ``(name, negated)``, opcode text and operand trees."""
    opcode: str
    operands: tuple
    guard: tuple[str, bool] | None
    line: int
    text: str
    error: str | None = None  # operand syntax error, reported after the opcode is known
    #: source location from the last ``.loc`` before it: frames (file number, line, column,
    #: function-name label or None), innermost first, then each ``inlined_at`` call site
    loc: tuple | None = None


@dataclass(frozen=True)
class Decl:
    """A variable declared in a state space (``.shared``, ``.local``): element type, element
    count and alignment in bytes."""
    space: str
    name: str
    type: str
    count: int
    align: int
    line: int

    @property
    def nbytes(self) -> int:
        return max(1, TYPE_BITS[self.type] // 8) * self.count


@dataclass
class Body:
    """A parsed body: statements in order, label -> statement index, register declarations
    (name -> PTX type) and state-space variables."""
    statements: list[Statement] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    regs: dict[str, str] = field(default_factory=dict)
    reg_ranges: dict[str, tuple[str, int]] = field(default_factory=dict)
    vars: dict[str, Decl] = field(default_factory=dict)
    #: the ``{ }`` scope of each label (label -> (scope, line)) and of each statement; scopes
    #: are numbered in order of opening (0: the body itself), ``scope_parents[k]`` encloses k
    label_scopes: dict[str, tuple[int, int]] = field(default_factory=dict)
    statement_scopes: list[int] = field(default_factory=list)
    scope_parents: list[int] = field(default_factory=lambda: [-1])

    def encloses(self, outer: int, inner: int) -> bool:
        """Whether scope ``outer`` is scope ``inner`` or one around it."""
        while inner > outer:  # a scope opens after the scopes around it
            inner = self.scope_parents[inner]
        return inner == outer

    def reg_type(self, name: str) -> str | None:
        """The declared type of register ``name`` (``%r<10>`` ranges included), or None."""
        t = self.regs.get(name)
        if t is not None:
            return t
        if name.endswith(("$lo", "$hi")) and self.reg_type(name[:-3]) == "b128":
            return "b64"   # a .b128 register is held as two 64-bit halves (ld/st/mov.b128)
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if m and m.group(1) in self.reg_ranges:
            t, n = self.reg_ranges[m.group(1)]
            if int(m.group(2)) < n:
                return t
        return None


def strip_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments, keeping newlines (line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise PtxError("unterminated /* comment in PTX text")
            out.append("\n" * text.count("\n", i, j))
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def statements(text: str, *, scopes: bool = False, nest: str = "{[", label: re.Pattern = _IDENT_RE,
               strict: bool = True):
    """Split PTX text (comments stripped) into ('label', name, line) and ('stmt', text, line).

    The one statement splitter of warpsim (the body parser and the linker use it).  ``;`` and a
    label's ``:`` split only outside the brackets in ``nest``; a label's name matches ``label``.
    A ``{``/``}`` scope at the top level yields ('open', '{', line) / ('close', '}', line) with
    ``scopes``, else it is flattened.  ``strict`` rejects unbalanced brackets.  Linear in the
    text: ``filled`` says whether the statement so far holds a non-blank character.
    """
    closes = "".join({"{": "}", "[": "]", "(": ")"}[c] for c in nest)
    buf: list[str] = []
    filled = False
    depth = 0
    line = 1
    start = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        if not filled:
            start = line
        if c == "{" and depth == 0 and not filled:
            buf = []
            if scopes:
                yield "open", c, line
            continue
        if c == "}" and depth == 0:
            s = "".join(buf).strip()
            if s:
                raise PtxError(f"line {start}: statement '{quote(s)}' is missing its ';' before '}}'")
            buf, filled = [], False
            if scopes:
                yield "close", c, line
            continue
        if c in nest:
            depth += 1
        elif c in closes:
            depth -= 1
            if depth < 0 and strict:
                raise PtxError(f"line {line}: unbalanced '{c}'")
        if c == ";" and depth == 0:
            s = "".join(buf).strip()
            if s:
                yield "stmt", s, start
            buf, filled = [], False
            continue
        if c == ":" and depth == 0 and filled and len(buf) <= _MAX_LABEL:
            s = "".join(buf).strip()
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if s and label.fullmatch(s) and nxt != ":" and (i == 0 or text[i - 1] != ":"):
                yield "label", s, start
                buf, filled = [], False
                continue
        buf.append(c)
        filled = filled or not c.isspace()
    s = "".join(buf).strip()
    if depth and strict:
        raise PtxError(f"line {start}: unbalanced braces or brackets in '{quote(s)}'")
    if s:
        yield "stmt", s, start


#: Longest label name looked for (a longer run before ':' is statement text).
_MAX_LABEL = 1024


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside braces and brackets."""
    parts, depth, cur = [], 0, []
    for c in s:
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur).strip())
    return parts


def parse_immediate(s: str) -> Imm | None:
    """An immediate literal in any PTX form, or None if ``s`` is not one."""
    s = s.strip()
    m = _F32_RE.fullmatch(s)
    if m:
        return Imm(int(m.group(1), 16), "f32", s)
    m = _F64_RE.fullmatch(s)
    if m:
        return Imm(int(m.group(1), 16), "f64", s)
    m = _INT_RE.fullmatch(s)
    if m:
        body = m.group(2)
        # a 64-bit value has at most 16 hex, 64 binary, 22 octal or 20 decimal digits: refuse
        # longer ones before int() (Python refuses over 4300 decimal digits with its own error)
        digits, most = ((body[2:], 16) if body[:2] in ("0x", "0X") else (body[2:], 64) if body[:2] in ("0b", "0B")
                        else (body[1:], 22) if len(body) > 1 and body[0] == "0" else (body, 20))
        if len(digits.lstrip("0")) > most:
            raise PtxError(f"integer literal {quote(s, 40)} does not fit 64 bits")
        if body[:2] in ("0x", "0X"):
            v = int(body[2:], 16)
        elif body[:2] in ("0b", "0B"):
            v = int(body[2:], 2)
        elif len(body) > 1 and body[0] == "0":
            v = int(body[1:], 8)
        else:
            v = int(body)
        v = -v if m.group(1) else v
        if not -(1 << 63) <= v < (1 << 64):
            raise PtxError(f"integer literal {quote(s, 40)} does not fit 64 bits")
        return Imm(v, "int", s)
    m = _FLOAT_RE.fullmatch(s)
    if m and ("." in s or "e" in s.lower()):
        check_decimal(s)  # ptxas: "Constant overflow" wherever the literal stands
        return Imm(float(s), "float", s)
    return None


def _parse_address(s: str, stmt: str) -> Addr:
    inner = s[1:-1].strip()
    if not inner:
        raise PtxError(f"empty address [] in '{quote(stmt)}'")
    parts = split_top(inner)
    if len(parts) == 2 and parts[1].startswith("{"):  # [tensorMap, {coordinates}]
        a = _parse_address("[" + parts[0] + "]", stmt)
        return Addr(a.base, a.offset, s, parse_operand(parts[1], stmt))
    m = re.fullmatch(r"(" + NAME + r")\s*(?:([+-])\s*(.+))?", inner)
    if m and parse_immediate(m.group(1)) is None:
        off = 0
        if m.group(2):
            imm = parse_immediate(m.group(3).replace(" ", ""))
            if imm is None or imm.kind != "int":
                raise PtxError(f"bad address offset '{quote(m.group(3))}' in '{quote(stmt)}'")
            off = imm.value if m.group(2) == "+" else -imm.value
        return Addr(m.group(1), off, s)
    imm = parse_immediate(inner.replace(" ", ""))
    if imm is not None and imm.kind == "int":
        return Addr(None, imm.value, s)
    raise PtxError(f"bad address '{quote(s)}' in '{quote(stmt)}': expected [reg], [reg+imm], [symbol+imm] or [imm]")


def parse_operand(s: str, stmt: str = ""):
    """One operand text -> Reg | Imm | Vec | Addr | Pipe | Sink."""
    s = s.strip()
    if not s:
        raise PtxError(f"empty operand in '{quote(stmt)}'")
    if s.startswith("{"):
        if not s.endswith("}"):
            raise PtxError(f"unterminated vector operand '{quote(s)}' in '{quote(stmt)}'")
        inner = s[1:-1].strip()
        items = tuple(parse_operand(x, stmt) for x in split_top(inner)) if inner else ()
        return Vec(items)
    if s.startswith("["):
        if not s.endswith("]"):
            raise PtxError(f"unterminated address '{quote(s)}' in '{quote(stmt)}'")
        return _parse_address(s, stmt)
    if "|" in s:
        return Pipe(tuple(parse_operand(x, stmt) for x in s.split("|")))
    if s == "_":
        return Sink()
    if s == "WARP_SZ":  # the PTX ISA's predefined constant (nvcc writes it for warpSize)
        return Imm(32, "int", s)
    imm = parse_immediate(s)
    if imm is not None:
        return imm
    neg = s.startswith("!")
    name = s[1:].strip() if neg else s
    if _NAME_RE.fullmatch(name):
        return Reg(name, neg)
    raise PtxError(f"bad operand '{quote(s)}' in '{quote(stmt)}'")


def parse_statement(s: str, line: int = 0) -> Statement:
    """One instruction statement (no trailing ';')."""
    text = " ".join(s.split())
    rest = text
    guard = None
    if rest.startswith("@"):
        m = _GUARD_RE.match(rest)
        if not m:
            raise PtxError(f"line {line}: bad guard predicate in '{quote(text)}'")
        guard = (m.group(2), bool(m.group(1)))
        rest = rest[m.end():]
    m = _OPCODE_RE.match(rest)
    if not m:
        raise PtxError(f"line {line}: expected an instruction, got '{quote(text)}'")
    opcode = m.group(0)
    ops = rest[m.end():].strip()
    try:
        operands = tuple(parse_operand(o, text) for o in split_top(ops)) if ops else ()
    except PtxError as e:
        return Statement(opcode, (), guard, line, text, str(e))
    return Statement(opcode, operands, guard, line, text)


def _declare(body: Body, s: str, line: int) -> None:
    # the directive ends at the first space or dot: CUDA's headers write `.reg.b32 t` with no space
    m = re.match(r"\.(\w+)\s*", s)
    kind = m.group(1) if m else s.split(None, 1)[0][1:]
    rest = s[m.end():] if m else ""
    if kind in IGNORED_DIRECTIVES:
        return
    if kind not in ("reg", "shared", "local"):
        raise PtxError(f"line {line}: directive .{kind} is not supported in a routine body")
    align = 0
    m = re.match(r"\.align\s+(\d+)\s*", rest)
    if m:
        align = int(m.group(1))
        if align < 1 or align & (align - 1) or align > MAX_ALIGN:
            raise PtxError(f"line {line}: .align {align} must be a power of two up to {MAX_ALIGN}: "
                           f"'{quote(s)}'")
        rest = rest[m.end():]
    m = re.match(r"\.(v[248])\s*", rest)
    if m:
        raise PtxError(f"line {line}: vector registers (.{m.group(1)}) are not supported: '{quote(s)}'")
    m = re.match(r"\.(\w+)\s+", rest)
    if m and m.group(1) == "b128" and kind != "reg":
        raise PtxError(f"line {line}: .b128 variables are not supported (only .reg .b128, for "
                       f"ld/st/mov.b128): '{quote(s)}'")
    if not m or m.group(1) not in TYPE_BITS and m.group(1) != "b128":
        raise PtxError(f"line {line}: declaration '{quote(s)}' needs a type such as .b32")
    t = m.group(1)
    names = rest[m.end():]
    if "=" in names:
        raise PtxError(f"line {line}: initialisers are not supported in a routine body: '{quote(s)}'")
    for item in split_top(names):
        if kind == "reg":
            r = _RANGE_RE.fullmatch(item)
            if r:
                _declare_reg(body, r.group(1), line, int(r.group(2)))
                body.reg_ranges[r.group(1)] = (t, int(r.group(2)))
            elif _NAME_RE.fullmatch(item):
                _declare_reg(body, item, line)
                body.regs[item] = t
            else:
                raise PtxError(f"line {line}: bad register name '{quote(item)}' in '{quote(s)}'")
        else:
            a = _ARRAY_RE.fullmatch(item)
            if a:
                if not a.group(2):
                    raise PtxError(f"line {line}: array {a.group(1)}[] needs a size here: '{quote(s)}'")
                name, count = a.group(1), int(a.group(2))
            elif _NAME_RE.fullmatch(item):
                name, count = item, 1
            else:
                raise PtxError(f"line {line}: bad variable name '{quote(item)}' in '{quote(s)}'")
            if name in body.vars:
                raise PtxError(f"line {line}: {name} is declared twice")
            natural = max(1, TYPE_BITS[t] // 8)
            body.vars[name] = Decl(kind, name, t, count, max(align, natural), line)


def _declare_reg(body: Body, name: str, line: int, n: int = 0) -> None:
    """Refuse a register (or ``%r<n>`` range prefix) declared twice, and more than
    MAX_DECLARED_REGISTERS registers in one body (ptxas: "duplicate definition")."""
    if name in body.regs or name in body.reg_ranges:
        raise PtxError(f"line {line}: register {name} is declared twice")
    total = len(body.regs) + sum(c for _, c in body.reg_ranges.values()) + max(n, 1)
    if total > MAX_DECLARED_REGISTERS:
        raise PtxError(f"line {line}: {total} registers declared; warpsim allows at most "
                       f"{MAX_DECLARED_REGISTERS} per routine")


def parse_body(text: str) -> Body:
    """Parse a routine body (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"PTX text must be a str, got {type(text).__name__}")
    body = Body()
    if "\r" in text:  # CR-LF and CR-only line endings
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = terminate_debug_directives(strip_comments(text))
    loc = None
    seen: dict = {}
    scope = 0  # the innermost open { } scope (labels are visible only within their scope)
    for kind, s, line in statements(text, scopes=True):
        if kind == "open":
            body.scope_parents.append(scope)
            scope = len(body.scope_parents) - 1
        elif kind == "close":
            scope = max(body.scope_parents[scope], 0)  # an unbalanced '}' stays at the top
        elif kind == "label":
            if s in body.labels:
                raise PtxError(f"line {line}: label {s} is defined twice")
            body.labels[s] = len(body.statements)
            body.label_scopes[s] = (scope, line)
        elif s.startswith(".loc") and s[4:5].isspace():
            loc = parse_loc(s, seen)
        elif s.startswith("."):
            _declare(body, s, line)
        else:
            st = parse_statement(s, line)
            body.statements.append(st if loc is None else replace(st, loc=loc))
            body.statement_scopes.append(scope)
    return body


def terminate_debug_directives(text: str) -> str:
    """``.loc``/``.file`` end at the end of their line (nvcc writes no ';'): give them one, so
    that they never run into the next statement (its line number stays right)."""
    return _DEBUG_RE.sub(r"\1;", text)


def parse_loc(s: str, seen: dict) -> tuple | None:
    """The frames of a ``.loc file line col[, function_name LABEL, inlined_at f l c]``
    statement (see :attr:`Statement.loc`); ``seen`` maps (file, line, col) of earlier ``.loc``
    statements to their frames, to follow an ``inlined_at`` call site to its own caller."""
    m = _LOC_RE.match(s)
    if m is None:
        return None
    f, ln, col = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    rest = m.group(4)
    fn = re.search(r"function_name\s+([$\w]+)", rest)
    at = re.search(r"inlined_at\s+(\d+)\s+(\d+)(?:\s+(\d+))?", rest)
    frames: tuple = ((f, ln, col, fn.group(1) if fn else None),)
    if at:
        key = (int(at.group(1)), int(at.group(2)), int(at.group(3) or 0))
        frames += seen.get(key, (key + (None,),))
    seen[(f, ln, col)] = frames
    return frames
