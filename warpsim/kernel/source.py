"""Source locations of PTX instructions: ``.file``/``.loc`` (with ``inlined_at`` chains) as
``file.cu:LINE (in function f(int), inlined from file.cu:40 in kernel)``, and C++ demangling.

:class:`SourceMap` is built from a parsed module (its ``.file`` table and ``.debug_str``
strings) and turns an instruction's ``loc`` frames (see
:attr:`warpsim.ptx.parser.Statement.loc`) into text or a (file, line) pair.  Itanium C++ names
are demangled by ``c++filt`` when it is on the PATH, else by :func:`demangle_basic` (plain and
nested names with builtin, pointer, reference and const parameter types; anything else stays
mangled).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

__all__ = ["SourceMap", "demangle", "demangle_basic"]

_BUILTIN = {"v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
            "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long",
            "m": "unsigned long", "x": "long long", "y": "unsigned long long", "f": "float",
            "d": "double", "e": "long double", "n": "__int128", "o": "unsigned __int128",
            "w": "wchar_t", "z": "..."}


class _Fail(Exception):
    pass


def demangle_basic(name: str) -> str:
    """A small Itanium demangler for the common cases (``_Z3fooPKfi`` -> ``foo(float const*,
    int)``, nested ``_ZN2ns3fooEv``); ``name`` unchanged where it does not cover it."""
    if not name.startswith("_Z"):
        return name
    s, i = name, 2
    subs: list[str] = []

    def number():
        nonlocal i
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        if j == i:
            raise _Fail
        v = int(s[i:j])
        i = j
        return v

    def source_name():
        nonlocal i
        n = number()
        out = s[i:i + n]
        if len(out) != n:
            raise _Fail
        i += n
        return out

    def sub_ref():
        nonlocal i
        j = s.index("_", i)
        k = 0 if j == i else int(s[i:j], 36) + 1
        i = j + 1
        return subs[k]

    def typ():
        nonlocal i
        if i >= len(s):
            raise _Fail
        c = s[i]
        if c in _BUILTIN:
            i += 1
            return _BUILTIN[c]
        if c in "PRK":
            i += 1
            inner = typ()
            out = inner + {"P": "*", "R": "&", "K": " const"}[c]
            subs.append(out)
            return out
        if c.isdigit():
            out = source_name()
            subs.append(out)
            return out
        if c == "S":
            i += 1
            return sub_ref()
        raise _Fail

    try:
        if s[i] == "N":
            i += 1
            parts = []
            while s[i] != "E":
                parts.append(source_name())
                subs.append("::".join(parts))
            subs.pop()  # a function's own name is no substitution candidate
            i += 1
            fn = "::".join(parts)
        else:
            fn = source_name()
        params = []
        while i < len(s):
            params.append(typ())
        if params == ["void"]:
            params = []
        return f"{fn}({', '.join(params)})"
    except (_Fail, IndexError, ValueError):
        return name


@functools.lru_cache(maxsize=None)
def _cxxfilt() -> str | None:
    return shutil.which("c++filt")


def demangle(names) -> dict[str, str]:
    """mangled -> demangled for every name of ``names`` (one ``c++filt`` run for all of them
    when it exists, else :func:`demangle_basic`)."""
    names = sorted(set(names))
    exe = _cxxfilt()
    if exe and names:
        try:
            out = subprocess.run([exe], input="\n".join(names) + "\n", capture_output=True, text=True,
                                 timeout=20).stdout.split("\n")
            if len(out) >= len(names):
                return dict(zip(names, out))
        except (OSError, subprocess.SubprocessError):
            pass
    return {n: demangle_basic(n) for n in names}


class SourceMap:
    """Source text of instruction locations of one module (``files``: number -> path;
    ``strings``: ``.debug_str`` label -> mangled function name)."""

    def __init__(self, files: dict, strings: dict, kernel: str = "") -> None:
        self.files = dict(files)
        self.kernel = kernel
        self._names = demangle(list(strings.values()) + ([kernel] if kernel else []))
        self.functions = {label: self._names.get(v, v) for label, v in strings.items()}

    def file(self, number: int) -> str:
        return os.path.basename(self.files.get(number, f"file{number}"))

    def function(self, label) -> str:
        if label is None:
            return self._names.get(self.kernel, self.kernel)
        return self.functions.get(label, label)

    def position(self, loc) -> tuple[str, int] | None:
        """(file path as in ``.file``, line) of the innermost frame, or None."""
        if not loc:
            return None
        f, ln = loc[0][0], loc[0][1]
        return self.files.get(f, f"file{f}"), ln

    def short(self, loc) -> str | None:
        """``file.cu:LINE`` of the innermost frame, or None."""
        if not loc:
            return None
        return f"{self.file(loc[0][0])}:{loc[0][1]}"

    def describe(self, loc) -> str | None:
        """``file.cu:LINE (in function f(int), inlined from file.cu:40 in kernel)``, or None."""
        if not loc:
            return None
        f, ln, _, label = loc[0]
        text = f"{self.file(f)}:{ln} (in function {self.function(label)}"
        for k in range(1, len(loc)):
            cf, cl, _, clabel = loc[k]
            text += f", inlined from {self.file(cf)}:{cl} in {self.function(clabel)}"
        return text + ")"

    def matches(self, loc, file: str, line: int) -> bool:
        """Whether the innermost frame of ``loc`` is at ``file`` (a path or its base name,
        or '' for any file) line ``line``."""
        if not loc or loc[0][1] != line:
            return False
        if not file:
            return True
        path = self.files.get(loc[0][0], "")
        return path == file or os.path.basename(path) == os.path.basename(file)

    def matches_any(self, loc, file: str, line: int) -> bool:
        """Whether any frame of ``loc`` (the instruction or a call site it is inlined at) is
        at ``file`` (path, base name, or '' for any) line ``line``."""
        return any(self.matches((fr,), file, line) for fr in loc or ())


_SITE_RE = re.compile(r"line (\d+): (.*)", re.S)


def site_source(program, line, text=None) -> tuple | None:
    """The ``loc`` frames of the instruction of ``program`` at PTX ``line`` (and ``text`` when
    several share the line: a function inlined at a call), or None."""
    table = getattr(program, "_loc_table", None)
    if table is None:
        table = {}
        for ins in program.instrs:
            table.setdefault((ins.line, ins.text), ins.loc)
            table.setdefault(ins.line, ins.loc)
        program._loc_table = table
    if text is not None and (line, text) in table:
        return table[(line, text)]
    return table.get(line)


def with_source_line(e: Exception, body, smap: SourceMap) -> Exception:
    """``e`` (an error whose message starts 'line N: ...' for a statement of ``body``) with
    the statement's CUDA source location put before it, when the PTX has ``.loc``."""
    m = _SITE_RE.match(str(e))
    if m is None:
        return e
    ln = int(m.group(1))
    st = next((s for s in body.statements if s.line == ln and s.loc), None)
    src = smap.describe(st.loc) if st is not None else None
    if src is None:
        return e
    try:
        new = type(e)(f"{src}, PTX {e}")
    except Exception:  # pragma: no cover - exotic exception types
        return e
    new.__dict__.update(e.__dict__)
    return new
