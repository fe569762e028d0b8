"""A whole PTX module as nvcc emits it: header, module-scope variables, entries and functions.

Text in, plain data out.  :func:`parse_module` splits a module into its top-level items:
``.version``/``.target``/``.address_size``; module-scope ``.global``/``.const``/``.shared``
variables (with initialisers, ``.extern .shared`` arrays of unknown size for dynamic shared
memory); ``.entry`` kernels and ``.func`` functions with their parameter lists (scalars, ``.ptr``
attributes, ``.align``-ed ``.b8`` byte arrays for structs passed by value) and return
parameters.  Function bodies are kept as text with their first line number; the body parser
(:mod:`warpsim.ptx.parser`) reads them once per launch-able function.  ``.file`` paths and
the ``.debug_str`` section's strings (function names of ``.loc ... function_name``) are kept
for source locations; other sections are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from warpsim.errors import PtxError, PtxVersionError, quote
from warpsim.facts.isa import LATEST_PTX, PTX_VERSIONS
from warpsim.facts.limits import (MAX_ALIGN, MAX_CONST_BYTES, MAX_GLOBAL_VARIABLE_BYTES, MAX_PARAM_BYTES,
                                   is_power_of_two)
from warpsim.ptx.parser import strip_comments

__all__ = ["Function", "Module", "Param", "Variable", "parse_module", "SCALAR_BYTES"]

#: Size in bytes of each scalar PTX type that may appear in a parameter or variable.
SCALAR_BYTES: dict[str, int] = {
    "b8": 1, "u8": 1, "s8": 1, "pred": 1,
    "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "tf32": 4,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8,
    "b128": 16,
}
_SPACES = ("global", "const", "shared")
_PTR_SPACES = ("global", "shared", "const", "local")
_LINKAGE = ("visible", "extern", "weak", "common")
_IDENT = r"[A-Za-z_$%][\w$]*"
_VAR_RE = re.compile(r"(" + _IDENT + r")\s*(?:\[\s*(\d*)\s*\])?\s*$")


@dataclass(frozen=True)
class Param:
    """A kernel or function parameter: scalar type, element count (>1 or 0 for arrays;
    1 for scalars), alignment and byte offset within the parameter block."""

    name: str
    type: str
    count: int
    align: int
    offset: int
    is_array: bool = False
    ptr_space: str | None = None  # from ``.ptr.global`` and friends

    @property
    def nbytes(self) -> int:
        return SCALAR_BYTES[self.type] * self.count

    def describe(self) -> str:
        """The parameter's declared type as PTX writes it (``.u64``, ``.align 8 .b8 [24]``)."""
        if self.is_array:
            return f".align {self.align} .{self.type}[{self.count}]"
        return f".{self.type}"


@dataclass(frozen=True)
class Variable:
    """A module-scope variable: state space, element type and count, alignment, initial
    bytes (None for no initialiser) and whether it is ``.extern`` (dynamic shared memory)."""

    space: str
    name: str
    type: str
    count: int
    align: int
    init: bytes | None
    extern: bool
    line: int

    @property
    def nbytes(self) -> int:
        return SCALAR_BYTES[self.type] * self.count


@dataclass(frozen=True)
class Function:
    """An ``.entry`` (kernel) or ``.func``: parameters, return parameters, performance
    directives (``maxntid``, ``reqntid``, ...) and the body text with its first line."""

    name: str
    kind: str  # 'entry' or 'func'
    params: tuple[Param, ...]
    returns: tuple[Param, ...]
    directives: dict
    body: str | None  # None for a declaration without body
    body_line: int
    line: int

    @property
    def param_bytes(self) -> int:
        end = 0
        for p in self.params:
            end = max(end, p.offset + p.nbytes)
        return end


@dataclass
class Module:
    """A parsed PTX module."""

    version: tuple[int, int] | None = None
    target: tuple[str, ...] = ()
    address_size: int = 64
    functions: dict[str, Function] = field(default_factory=dict)
    variables: dict[str, Variable] = field(default_factory=dict)
    #: ``.file N "path"`` directives: file number -> path (for ``.loc`` source locations)
    files: dict[int, str] = field(default_factory=dict)
    #: ``.section .debug_str`` labels -> their NUL-terminated strings (``.loc ... function_name``)
    debug_strings: dict[str, str] = field(default_factory=dict)

    @property
    def entries(self) -> dict[str, Function]:
        return {n: f for n, f in self.functions.items() if f.kind == "entry"}


_LINE_DIRECTIVE_RE = re.compile(r"\.(version|target|address_size|file|loc)\b")


def _matching(text: str, i: int, open_c: str, close_c: str) -> int:
    """Index of the bracket closing the one at ``i``."""
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j
    raise PtxError(f"line {text.count(chr(10), 0, i) + 1}: unbalanced '{open_c}'")


def _items(text: str):
    """Yield (header, body or None, header line, body line) for each top-level item."""
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return
        start = i
        m = _LINE_DIRECTIVE_RE.match(text, i)
        if m:  # .version/.target/.address_size/.file/.loc end at the line's end, not at ';'
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield text[i:j].strip().rstrip(";"), None, text.count("\n", 0, start) + 1, 0
            i = j
            continue
        paren = 0
        while i < n:
            c = text[i]
            if c == "(":
                paren += 1
            elif c == ")":
                paren -= 1
            elif c == ";" and paren == 0:
                yield text[start:i].strip(), None, text.count("\n", 0, start) + 1, 0
                i += 1
                break
            elif c == "{" and paren == 0:
                close = _matching(text, i, "{", "}")
                header = text[start:i]
                if "=" in header:  # an initialiser: the item continues to its ';'
                    i = close + 1
                    continue
                yield (header.strip(), text[i + 1:close], text.count("\n", 0, start) + 1,
                       text.count("\n", 0, i) + 1)
                i = close + 1
                break
            i += 1
        else:
            rest = text[start:].strip()
            if rest:
                raise PtxError(f"line {text.count(chr(10), 0, start) + 1}: '{quote(rest, 60)}' is missing its ';'")
            return


def _int(s: str, line: int) -> int:
    try:
        return int(s, 0)
    except ValueError:
        raise PtxError(f"line {line}: expected an integer, got '{quote(s)}'") from None


def _align(s: str, line: int, what: str) -> int:
    """The byte count of ``.align N``: a power of two up to ``MAX_ALIGN`` (PTX ISA)."""
    if not re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", s):
        raise PtxError(f"line {line}: .align needs a byte count in {what} declaration, got '{quote(s)}'")
    n = int(s, 0)
    if not is_power_of_two(n) or n > MAX_ALIGN:
        raise PtxError(f"line {line}: .align {n} in {what} declaration must be a power of two "
                       f"up to {MAX_ALIGN}")
    return n


def _parse_decl(words: list[str], line: int, what: str):
    """Parse ``[.align N] [.ptr...] .type name[count]`` -> (type, align, name, count|None, ptr_space)."""
    align = 0
    typ = None
    ptr_space = None
    k = 0
    while k < len(words) and words[k].startswith("."):
        w = words[k]
        if w == ".align":
            align = _align(words[k + 1] if k + 1 < len(words) else "", line, what)
            k += 2
            continue
        if w.startswith(".ptr"):
            # .ptr [.space] [.align N] (also written .ptr.global.align 16): the pointee's state
            # space and alignment, not the parameter's own alignment
            parts = [x for x in w.split(".")[2:] if x]
            k += 1
            while k < len(words) and words[k].startswith(".") and words[k][1:] in _PTR_SPACES + ("align",):
                parts.append(words[k][1:])
                k += 1
            if parts and parts[-1] == "align":
                if k >= len(words) or not words[k].isdigit():
                    raise PtxError(f"line {line}: .ptr .align needs a byte count in {what} declaration")
                k += 1  # the pointee alignment (no effect on the simulation)
                parts.pop()
            for part in parts:
                if part not in _PTR_SPACES:
                    raise PtxError(f"line {line}: unexpected '.{part}' after .ptr in {what} declaration")
                ptr_space = part
            continue
        if w in (".v2", ".v4", ".v8"):
            raise PtxError(f"line {line}: vector {what} declarations ({w}) are not supported")
        if w[1:] in SCALAR_BYTES:
            typ = w[1:]
            k += 1
            continue
        raise PtxError(f"line {line}: unexpected '{w}' in {what} declaration")
    if typ is None:
        raise PtxError(f"line {line}: {what} declaration '{quote(' '.join(words))}' needs a type such as .u64")
    rest = " ".join(words[k:])
    m = _VAR_RE.match(rest)
    if not m:
        raise PtxError(f"line {line}: bad {what} name '{quote(rest)}'")
    count = None if m.group(2) is None else (int(m.group(2)) if m.group(2) else 0)
    return typ, align, m.group(1), count, ptr_space


def _tokens(s: str) -> list[str]:
    s = re.sub(r"(\.align|\.ptr)\s*\.", r"\1 .", s)
    s = s.replace(".ptr .", ".ptr.")
    return re.findall(r"\[[^\]]*\]|[^\s\[]+", s.replace("[", " [")) if s else []


def _param_list(text: str, line: int, what: str) -> tuple[Param, ...]:
    params = []
    offset = 0
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        part = re.sub(r"\s+", " ", part)
        if not part.startswith(".param") and not part.startswith(".reg"):
            raise PtxError(f"line {line}: {what} parameter '{quote(part)}' must be declared .param")
        toks = part.split(" ", 1)[1] if " " in part else ""
        words = re.findall(r"\.align|\d+|\.ptr(?:\.\w+)*|\.[\w]+|[A-Za-z_$%][\w$]*\s*\[\s*\d*\s*\]|[A-Za-z_$%][\w$]*", toks)
        typ, align, name, count, ptr_space = _parse_decl(words, line, f"{what} parameter")
        size = SCALAR_BYTES[typ]
        is_array = count is not None
        n = 1 if count is None else count
        if is_array and n == 0:
            raise PtxError(f"line {line}: parameter array {name}[] needs a size")
        align = align or size
        offset = (offset + align - 1) // align * align
        if any(q.name == name for q in params):
            raise PtxError(f"line {line}: {what} parameter {name} is declared twice")
        params.append(Param(name, typ, n, align, offset, is_array, ptr_space))
        offset += size * n
    return tuple(params)


def _parse_init(text: str, typ: str, count: int, line: int, name: str) -> bytes:
    """Initial bytes of a variable from ``{v, v, ...}`` or a single value."""
    import numpy as np

    text = text.strip()
    if text.startswith("{"):
        inner = text[1:text.rfind("}")].replace("{", " ").replace("}", " ")
        vals = [v.strip() for v in inner.split(",") if v.strip()]
    else:
        vals = [text]
    if not vals:
        raise PtxError(f"line {line}: empty initialiser {{}} for {name}")
    size = SCALAR_BYTES[typ]
    if count and len(vals) > count:
        raise PtxError(f"line {line}: {len(vals)} initial values for {name}[{count}]")
    out = bytearray(size * max(count, len(vals), 1))
    for k, v in enumerate(vals):
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", v):
            word = int(v[2:], 16).to_bytes(4, "little")
        elif re.fullmatch(r"0[dD][0-9a-fA-F]{16}", v):
            word = int(v[2:], 16).to_bytes(8, "little")
        elif typ in ("f32", "f64", "f16"):
            try:
                if not _DECIMAL_RE.fullmatch(v):  # 'nan', 'inf', '1_0': float() reads them, ptxas not
                    raise ValueError(v)
                x = float(v)
                dt = {"f32": np.float32, "f64": np.float64, "f16": np.float16}[typ]
                if not np.isfinite(x) or abs(x) > float(np.finfo(dt).max):
                    raise PtxError(f"line {line}: initial value '{quote(v)}' of {name} overflows .{typ}")
                word = np.array(x, dtype=dt).tobytes()
            except ValueError as e:
                if isinstance(e, PtxError):
                    raise
                raise PtxError(f"line {line}: initial value '{quote(v)}' of {name} is not a number "
                               "(symbol addresses in initialisers are not supported)") from None
        else:
            try:
                iv = int(v.rstrip("uU"), 0)
            except ValueError:
                raise PtxError(f"line {line}: initial value '{quote(v)}' of {name} is not an integer "
                               "(symbol addresses in initialisers are not supported)") from None
            word = (iv & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        if len(word) != size:
            raise PtxError(f"line {line}: initial value '{quote(v)}' does not fit .{typ} of {name}")
        out[k * size:(k + 1) * size] = word
    return bytes(out)


def _variable(header: str, line: int, extern: bool) -> Variable:
    init_text = None
    if "=" in header:
        header, init_text = header.split("=", 1)
    words = header.split()
    space = words[0][1:]
    typ, align, name, count, _ = _parse_decl(_tokens(" ".join(words[1:])), line, f".{space} variable")
    n = 1 if count is None else count
    if n * SCALAR_BYTES[typ] > MAX_GLOBAL_VARIABLE_BYTES:
        raise PtxError(f"line {line}: .{space} variable {name} of {n * SCALAR_BYTES[typ]} bytes exceeds "
                       f"warpsim's limit of {MAX_GLOBAL_VARIABLE_BYTES} bytes per variable")
    init = None if init_text is None else _parse_init(init_text, typ, n, line, name)
    if init is not None and n == 0:
        n = len(init) // SCALAR_BYTES[typ]
    if n == 0 and not (extern and space == "shared"):
        raise PtxError(f"line {line}: array {name}[] needs a size (only .extern .shared may omit it)")
    return Variable(space, name, typ, n, align or SCALAR_BYTES[typ], init, extern, line)


_FUNC_RE = re.compile(r"\.(entry|func)\b")
#: directives a .entry/.func header may carry (the PTX ISA's performance-tuning and cluster
#: directives; .attribute(.unified(...)) of a .func)
_FUNCTION_DIRECTIVES = frozenset({
    "maxnreg", "maxntid", "reqntid", "minnctapersm", "maxnctapersm", "noreturn", "pragma",
    "reqnctapercluster", "explicitcluster", "maxclusterrank", "blocksareclusters",
    "abi_preserve", "abi_preserve_control", "attribute", "unified"})


def _function(header: str, body: str | None, line: int, body_line: int) -> Function:
    m = _FUNC_RE.search(header)
    kind = m.group(1)
    rest = header[m.end():].strip()
    returns: tuple[Param, ...] = ()
    if kind == "func" and rest.startswith("("):
        close = _matching(rest, 0, "(", ")")
        returns = _param_list(rest[1:close], line, "return")
        rest = rest[close + 1:].strip()
    nm = re.match(_IDENT, rest)
    if not nm:
        raise PtxError(f"line {line}: .{kind} needs a name: '{quote(header, 60)}'")
    name = nm.group(0)
    rest = rest[nm.end():].strip()
    params: tuple[Param, ...] = ()
    if rest.startswith("("):
        close = _matching(rest, 0, "(", ")")
        params = _param_list(rest[1:close], line, f"{name}")
        rest = rest[close + 1:].strip()
    directives = {}
    for d in re.finditer(r"\.(\w+)\s*([\d,\s]*)", rest):
        if d.group(1) not in _FUNCTION_DIRECTIVES:  # ptxas: "Parsing error near '.maxntidd'"
            raise PtxError(f"line {line}: unknown directive .{d.group(1)} on .{kind} {name}; "
                           f"ptxas knows {', '.join('.' + x for x in sorted(_FUNCTION_DIRECTIVES))}")
        vals = tuple(int(v) for v in re.findall(r"\d+", d.group(2)))
        directives[d.group(1)] = vals
    f = Function(name, kind, params, returns, directives, body, body_line, line)
    if kind == "entry" and f.param_bytes > MAX_PARAM_BYTES:
        raise PtxError(f"line {line}: the parameters of {name} take {f.param_bytes} bytes; a kernel "
                       f"takes at most {MAX_PARAM_BYTES} (CUDA's limit)")
    return f


_DECIMAL_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", re.ASCII)


def _check_sizes(mod: Module) -> None:
    """Module variables within the GPU's (and warpsim's) limits (warpsim.facts.limits)."""
    const = glob = 0
    for v in mod.variables.values():
        if v.space == "const":
            const = (const + v.align - 1) // v.align * v.align + v.nbytes
            if const > MAX_CONST_BYTES:
                raise PtxError(f"line {v.line}: .const variables of {const} bytes exceed the "
                               f"{MAX_CONST_BYTES} bytes of constant memory")
        elif v.space == "global":
            glob += v.nbytes + v.align
            if glob > MAX_GLOBAL_VARIABLE_BYTES:
                raise PtxError(f"line {v.line}: .global variables of {glob} bytes exceed warpsim's "
                               f"limit of {MAX_GLOBAL_VARIABLE_BYTES} bytes")


def parse_module(text: str) -> Module:
    """Parse a PTX module (see the module docstring); PtxError names the line of a problem."""
    if not isinstance(text, str):
        raise TypeError(f"PTX module text must be a str, got {type(text).__name__}")
    if "\r" in text:  # CR-LF and CR-only line endings: one line each
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    mod = _parse_module(text)
    if mod.version is None and (mod.functions or mod.target):
        raise PtxError("the module has no .version directive (ptxas: \"Missing .version directive "
                       "at start of file\"); begin it with e.g. '.version 8.0'")
    _check_sizes(mod)
    return mod


def _parse_module(text: str) -> Module:
    mod = Module()
    for header, body, line, body_line in _items(strip_comments(text)):
        if not header:
            raise PtxError(f"line {line}: a '{{ }}' block outside any function")
        words = header.split()
        first = words[0]
        if first == ".version":
            mv = re.fullmatch(r"(\d+)\.(\d+)", words[1] if len(words) > 1 else "")
            if not mv:
                raise PtxError(f"line {line}: bad .version '{quote(header)}'")
            mod.version = (int(mv.group(1)), int(mv.group(2)))
            if mod.version > LATEST_PTX:
                err = PtxVersionError(
                    f"line {line}: .version {mv.group(0)} is newer than PTX ISA "
                    f"{LATEST_PTX[0]}.{LATEST_PTX[1]}, the newest warpsim models (ptxas "
                    f"{PTX_VERSIONS[LATEST_PTX][0]}.{PTX_VERSIONS[LATEST_PTX][1]} refuses it too: "
                    f"\"Unsupported .version\")")
                err.version, err.max_ptx, err.line = mod.version, LATEST_PTX, line
                raise err
            continue
        if first == ".target":
            mod.target = tuple(t.strip() for t in header[len(".target"):].split(",") if t.strip())
            continue
        if first == ".address_size":
            if len(words) != 2:
                raise PtxError(f"line {line}: .address_size needs one value, 32 or 64")
            mod.address_size = _int(words[1], line)
            if mod.address_size not in (32, 64):
                raise PtxError(f"line {line}: .address_size must be 32 or 64")
            if mod.address_size == 32:
                raise PtxError(f"line {line}: .address_size 32 is not modelled: warpsim runs the "
                               f"64-bit ABI (ptxas refuses 32-bit addressing on sm_90 and later)")
            continue
        if first == ".file":
            _file_directive(mod, header, line)
            continue
        if first == ".section":
            if body is not None and words[1:2] == [".debug_str"]:
                mod.debug_strings.update(_debug_strings(body))
            continue
        if first in (".loc", ".pragma"):
            continue
        linkage = set()
        while words and words[0][1:] in _LINKAGE:
            linkage.add(words.pop(0)[1:])
        if not words:
            raise PtxError(f"line {line}: incomplete declaration '{quote(header)}'")
        if words[0] in (".entry", ".func"):
            f = _function(" ".join(words), body, line, body_line)
            old = mod.functions.get(f.name)
            if old is not None and old.body is not None and f.body is not None:
                raise PtxError(f"line {line}: {f.name} is defined twice")
            if old is None or f.body is not None:
                mod.functions[f.name] = f
            continue
        if body is not None:
            raise PtxError(f"line {line}: unexpected '{{' after '{quote(header, 60)}'")
        if words[0][1:] in _SPACES:
            v = _variable(" ".join(words), line, "extern" in linkage)
            if v.name in mod.variables:
                raise PtxError(f"line {line}: variable {v.name} is declared twice")
            mod.variables[v.name] = v
            continue
        raise PtxError(f"line {line}: unsupported module-level directive '{quote(header, 60)}'")
    return mod


_FILE_RE = re.compile(r'\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')


def _file_directive(mod: Module, header: str, line: int) -> None:
    """``.file N "path"[, timestamp, size]``: remember file N's path."""
    m = _FILE_RE.match(header)
    if m is None:
        raise PtxError(f"line {line}: bad .file directive '{quote(header, 60)}'")
    mod.files[int(m.group(1))] = m.group(2)


def _debug_strings(body: str) -> dict[str, str]:
    """Labels of a ``.debug_str`` section -> the string their ``.b8`` bytes spell (to NUL)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"([$\w]+)\s*:((?:\s*\.b8\s+[\d,\s]+)+)", body):
        data = bytes(int(x) for x in re.findall(r"\d+", re.sub(r"\.b8", " ", m.group(2))) if int(x) < 256)
        out[m.group(1)] = data.split(b"\0", 1)[0].decode("utf-8", "replace")
    return out
