"""Lower a module function to one flat body: nested scopes renamed apart, calls inlined.

The body parser (:mod:`warpsim.ptx.parser`) flattens ``{ }`` scopes, so two scopes that
declare the same name (the inline asm of CUDA's headers does, e.g. ``.reg .f16 low, high;``
over and over) would collide.  :func:`flatten` renames every name declared in a nested scope
to a unique one (``low`` -> ``low$s3``, ``%r<4>`` -> ``%r$s3_<4>``), keeping line numbers.

:func:`lower` also inlines ``call`` (direct calls of ``.func`` of the same module): the
callee's registers and labels are renamed apart, its parameters become the caller's call-site
``.param`` variables, ``ret`` becomes a branch to the end of the inlined body.  Parameter
variables declared inside a body (call sites) are per-thread storage, so they are turned into
``.local`` variables (``st.param``/``ld.param`` on them into ``.local`` accesses); kernel
parameters stay in the ``.param`` space.  Recursion and indirect calls are rejected.
"""

from __future__ import annotations

import re

from warpsim.errors import PtxError, quote
from warpsim.ptx.module import Function, Module, strip_comments
from warpsim.ptx.parser import statements, terminate_debug_directives

__all__ = ["flatten", "lower"]

#: Functions of CUDA's device runtime that warpsim runs: a call becomes the pseudo-instruction of
#: the same name (warpsim.ptx.ops.calls), operands the addresses of its return and argument
#: parameters.  Those it refuses by name.
_DEVICE_RUNTIME = ("vprintf", "__assertfail")
_REFUSED_RUNTIME = ("malloc", "free", "__nv_aligned_device_malloc", "cudaMalloc", "cudaFree",
                    "cudaLaunchDevice", "cudaGetParameterBuffer", "cudaGetParameterBufferV2")
_TOKEN_RE = re.compile(r"%?[A-Za-z_$][\w$]*")
_SPECIAL_RE = re.compile(
    r"%(tid|ntid|ctaid|nctaid|laneid|warpid|nwarpid|warpsize|lanemask_\w+|clock\w*|smid|nsmid|"
    r"gridid|globaltimer\w*|envreg\d+|pm\d+\w*|dynamic_smem_size|total_smem_size|cluster\w*|"
    r"is_explicit_cluster|aggr_smem_size|reserved_smem\w*|current_graph_exec|nclusterid|clusterid)$")
_DECL_RE = re.compile(r"\.(reg|param|local|shared)\b")
_RANGE_RE = re.compile(r"(%?[A-Za-z_$][\w$]*?)<(\d+)>")
_LABEL_RE = re.compile(r"[A-Za-z_$][\w$]*")
_CALL_RE = re.compile(r"call(\.uni)?\s+(?:\(([^)]*)\)\s*,\s*)?([A-Za-z_$%][\w$]*)\s*(?:,\s*\(([^)]*)\))?\s*(?:,\s*(\S+))?$",
                      re.S)


def _declared(stmt: str) -> tuple[str, list[tuple[str, bool]]] | None:
    """(space, [(name, is_range)]) of a declaration statement, else None."""
    m = _DECL_RE.match(stmt)
    if not m:
        return None
    rest = stmt[m.end():]
    rest = rest.split("=", 1)[0]
    names = []
    # drop qualifiers (.align N, .v4, .b32 ...) then split the names
    body = re.sub(r"\.align\s+\d+|\.\w+", " ", rest)
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        r = _RANGE_RE.fullmatch(item)
        if r:
            names.append((r.group(1), True))
            continue
        n = re.match(r"%?[A-Za-z_$][\w$]*", item)
        if n:
            names.append((n.group(0), False))
    return m.group(1), names


class _Renamer:
    """Name maps of the open scopes; ``apply`` rewrites identifiers of a statement."""

    def __init__(self) -> None:
        self.scopes: list[tuple[dict, dict]] = [({}, {})]  # (exact names, range prefixes)

    def lookup(self, tok: str) -> str | None:
        for exact, ranges in reversed(self.scopes):
            if tok in exact:
                return exact[tok]
            m = re.fullmatch(r"(.*?)(\d+)", tok)
            if m and m.group(1) in ranges:
                new, n = ranges[m.group(1)]
                if int(m.group(2)) < n:
                    return f"{new}{m.group(2)}"
        return None

    def apply(self, s: str, extra=None) -> str:
        def sub(m):
            tok = m.group(0)
            start = m.start()
            if start and s[start - 1] == ".":  # a qualifier such as .param, .u32
                return tok
            new = self.lookup(tok)
            if new is None and extra is not None:
                new = extra(tok)
            return tok if new is None else new
        return _TOKEN_RE.sub(sub, s)


def _emit(out: dict, line: int, s: str) -> None:
    # a statement spanning lines is put on its first (its newlines would shift later lines)
    out.setdefault(line, []).append(s.replace("\n", " "))


def _render(out: dict) -> str:
    if not out:
        return ""
    last = max(out)
    return "\n".join(" ".join(out.get(i, ())) for i in range(1, last + 1)) + "\n"


class _Lowerer:
    def __init__(self, module: Module | None) -> None:
        self.module = module
        self.counter = 0
        self.param_vars: set[str] = set()

    def fresh(self, kind: str) -> int:
        self.counter += 1
        return self.counter

    def body(self, text: str, line0: int, stack: tuple[str, ...], out: dict, outer=None) -> None:
        """Flatten ``text`` (a body starting at line ``line0``) into ``out`` (line -> stmts)."""
        ren = _Renamer()
        extra = outer
        # ( ) nest too (call argument lists); unbalanced brackets are left to the body parser
        # .loc/.file end at their line's end without ';': terminate them before splitting
        # statements (else a '{' opening the next line's scope would join the directive)
        text = terminate_debug_directives(strip_comments(text))
        items = list(statements(text, scopes=True, nest="{[(", label=_LABEL_RE, strict=False))
        scope_labels = _scope_labels(items)
        nopen = 0
        for kind, s, line in items:
            line = line0 + line - 1
            if kind == "open":
                # labels are local to their { } scope: sibling scopes (the same inline asm
                # expanded twice) may reuse a name, so each nested scope's labels are renamed apart
                nopen += 1
                k = self.fresh("l")
                ren.scopes.append(({lab: f"{lab}$l{k}" for lab in scope_labels[nopen - 1]}, {}))
                continue
            if kind == "close":
                if len(ren.scopes) == 1:
                    raise PtxError(f"line {line}: unbalanced '}}'")
                ren.scopes.pop()
                continue
            if kind == "label":
                _emit(out, line, ren.apply(s, extra) + ":")
                continue
            decl = _declared(s)
            if decl is not None:
                space, names = decl
                if len(ren.scopes) > 1 or outer is not None:
                    k = self.fresh("s")
                    exact, ranges = ren.scopes[-1]
                    for name, is_range in names:
                        if is_range:
                            ranges[name] = (f"{name}$s{k}_", None)
                        else:
                            exact[name] = f"{name}$s{k}"
                    # ranges need their sizes; hide the range names from the renamer
                    hidden = []

                    def hide(m, ranges=ranges, k=k):
                        ranges[m.group(1)] = (f"{m.group(1)}$s{k}_", int(m.group(2)))
                        hidden.append(ranges[m.group(1)][0])
                        return f"\0{len(hidden) - 1}\0<{m.group(2)}>"
                    s = _RANGE_RE.sub(hide, s)
                    s = ren.apply(s, extra)
                    s = re.sub(r"\0(\d+)\0", lambda m: hidden[int(m.group(1))], s)
                else:
                    s = ren.apply(s, extra)
                if space == "param":
                    for name, _ in _declared(s)[1]:
                        self.param_vars.add(name)
                    s = ".local" + s[len(".param"):]
                _emit(out, line, s + ";")
                continue
            op = s.split(None, 1)[0] if not s.startswith("@") else s.split(None, 2)[1]
            if op == "call" or op.startswith("call."):
                self.call(ren.apply(s, extra), line, stack, out)
                continue
            _emit(out, line, ren.apply(s, extra) + ";")

    def call(self, s: str, line: int, stack, out: dict) -> None:
        if s.startswith("@"):
            raise PtxError(f"line {line}: a predicated call is not supported: '{quote(s)}'")
        m = _CALL_RE.match(" ".join(s.split()))
        if not m:
            raise PtxError(f"line {line}: cannot read call statement '{quote(' '.join(s.split()))}'")
        rets = [x.strip() for x in (m.group(2) or "").split(",") if x.strip()]
        name = m.group(3)
        args = [x.strip() for x in (m.group(4) or "").split(",") if x.strip()]
        if m.group(5) or name.startswith("%"):
            raise PtxError(f"line {line}: indirect calls (through a register or prototype) are not "
                           f"supported: '{quote(' '.join(s.split()))}'")
        fn = self.module.functions.get(name) if self.module is not None else None
        if fn is None or fn.kind != "func":
            raise PtxError(f"line {line}: call of unknown function {name}")
        if fn.body is None:
            if name in _DEVICE_RUNTIME:  # CUDA's device runtime: printf, assert (ops/calls.py)
                if len(args) != len(fn.params) or len(rets) not in (0, len(fn.returns)):
                    raise PtxError(f"line {line}: {name} takes {len(fn.params)} parameters; the call "
                                   f"passes {len(args)}")
                _emit(out, line, f"{name} " + ", ".join(f"[{x}]" for x in rets + args) + ";")
                return
            if name in _REFUSED_RUNTIME:
                raise PtxError(f"line {line}: device-side {name} is not supported by warpsim "
                               f"(the kernel calls {name}; allocate buffers on the host and pass them in)")
            raise PtxError(f"line {line}: {name} is declared but not defined in this module "
                           "(external functions other than vprintf and __assertfail are not supported)")
        if name in stack:
            raise PtxError(f"line {line}: recursive call of {name} is not supported")
        if len(args) != len(fn.params) or len(rets) != len(fn.returns):
            raise PtxError(f"line {line}: {name} takes {len(fn.params)} parameters and returns "
                           f"{len(fn.returns)} values; the call passes {len(args)} and {len(rets)}")
        k = self.fresh("c")
        bind = {p.name: a for p, a in zip(fn.params, args)}
        bind.update({p.name: r for p, r in zip(fn.returns, rets)})
        labels = set(re.findall(r"([A-Za-z_$][\w$]*)\s*:(?!:)", strip_comments(fn.body)))
        end = f"$Lret$c{k}"

        def rename(tok: str) -> str | None:
            if tok in bind:
                return bind[tok]
            if tok.startswith("%"):
                return None if _SPECIAL_RE.match(tok) else f"{tok}$c{k}"
            if tok in labels:
                return f"{tok}$c{k}"
            return None

        sub: dict = {}
        self.body(fn.body, 1, stack + (name,), sub, outer=rename)
        # ret -> branch to the end of the inlined body
        lines = []
        for i in sorted(sub):
            for st in sub[i]:
                lines.append(re.sub(r"^(@!?\s*\S+\s+)?ret(\.uni)?\s*;$",
                                    lambda mm: f"{mm.group(1) or ''}bra {end};", st))
        lines.append(f"{end}:")
        _emit(out, line, " ".join(lines))


def _scope_labels(items: list) -> list[set[str]]:
    """The labels defined directly in each nested scope of ``items``, in order of opening."""
    out: list[set[str]] = []
    stack: list[int] = []
    for kind, s, _ in items:
        if kind == "open":
            stack.append(len(out))
            out.append(set())
        elif kind == "close":
            if stack:
                stack.pop()
        elif kind == "label" and stack:
            out[stack[-1]].add(s)
    return out


def flatten(text: str) -> str:
    """``text`` with nested scopes renamed apart and flattened (line numbers kept)."""
    lw = _Lowerer(None)
    out: dict = {}
    lw.body(text, 1, (), out)
    return _fix_params(_render(out), lw.param_vars)


def _fix_params(text: str, names: set[str]) -> str:
    if not names:
        return text
    pat = re.compile(r"\b(ld|st)\.param((?:\.\w+)*)(\s+[^;]*?\[\s*)([A-Za-z_$%][\w$]*)")

    def sub(m):
        if m.group(4) in names:
            return f"{m.group(1)}.local{m.group(2)}{m.group(3)}{m.group(4)}"
        return m.group(0)
    return pat.sub(sub, text)


def lower(module: Module, fn: Function) -> str:
    """The flat body text of ``fn`` with calls inlined; its lines are the module's lines."""
    if fn.body is None:
        raise PtxError(f"{fn.name} has no body")
    lw = _Lowerer(module)
    out: dict = {}
    lw.body(fn.body, fn.body_line, (fn.name,), out)
    return _fix_params(_render(out), lw.param_vars)
