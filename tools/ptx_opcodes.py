"""Every opcode and directive in the PTX corpus of real compiler output (tests/data/real), and
what warpsim does with it.

    python tools/ptx_opcodes.py            # markdown tables on stdout
    python tools/ptx_opcodes.py --json     # the same as JSON

An opcode's status: ``runs`` (every kernel holding it decodes), ``refused: <reason>`` (the
PtxError a kernel holding it gets, naming it), or ``decodes`` (registered; it only occurs in
kernels refused for another instruction).  A kernel is decoded for the target in its file name.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from warpsim.errors import PtxError  # noqa: E402
from warpsim.ptx import registry  # noqa: E402
from warpsim.ptx.link import lower  # noqa: E402
from warpsim.ptx.module import parse_module  # noqa: E402
from warpsim.ptx.parser import _DEBUG_RE, parse_body, statements, strip_comments  # noqa: E402
from warpsim.ptx.program import Program  # noqa: E402

DATA = ROOT / "tests" / "data" / "real"
_TYPES = re.compile(r"^(?:[biuf]\d+|[su]\d+x\d|f16x2|bf16x2?|pred|e4m3x?\d?|e5m2x?\d?|tf32|v\d)$")


def _text(p: Path) -> str:
    return gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()


def _family(opcode: str) -> str:
    """The opcode with its type and vector qualifiers dropped (ld.global.v4.b32 -> ld.global)."""
    try:
        key, _, words = registry.lookup(opcode)
    except PtxError:
        key, words = opcode.split(".")[0], opcode.split(".")[1:]
    rest = [w for w in words if not _TYPES.match(w)]
    return ".".join([key] + rest)


#: What warpsim does with each directive the sweep may meet.
DIRECTIVE_STATUS = {
    ".version": "read (the module's PTX ISA version)", ".target": "read (a newer target is refused)",
    ".address_size": "read (32 or 64)", ".visible": "accepted", ".extern": "accepted (declarations; "
    "vprintf/__assertfail run, malloc/free are refused by name)", ".weak": "accepted",
    ".entry": "kernels", ".func": "inlined at call sites", ".param": "parameters (with .ptr, .align, "
    "byte arrays); call-site .param become per-thread storage", ".reg": "registers (also written "
    ".reg.b32 without a space)", ".local": "per-thread memory", ".shared": "CTA memory (static and "
    ".extern dynamic)", ".global": "module variables with initialisers", ".const": "module variables",
    ".align": "alignment (of a .ptr: the pointee's, no effect)", ".ptr": "parameter attribute "
    "(.ptr [.space] [.align N]); no effect", ".loc": "ignored (debug line info)", ".file": "ignored",
    ".section": "ignored (DWARF)", ".pragma": "ignored", ".maxntid": "ignored", ".reqntid": "ignored",
    ".minnctapersm": "ignored", ".maxnreg": "ignored", ".noreturn": "ignored", ".b8": "(inside .section)",
    ".b32": "(inside .section)", ".b64": "(inside .section)",
}
_DIR_RE = re.compile(r"(?<![\w%$])(\.(?:" + "|".join(d[1:] for d in DIRECTIVE_STATUS) + r"))\b")
_STMT_RE = re.compile(r"line \d+: (?:@!?\S+\s+)?([A-Za-z_][\w.:]*)")


def _call_target(s: str) -> str:
    s = re.sub(r"^call(\.uni)?\s*", "", " ".join(s.split()))
    s = re.sub(r"^\([^)]*\)\s*,\s*", "", s)
    m = re.match(r"[A-Za-z_$][\w$]*", s)
    return m.group(0) if m else "?"


def sweep():
    ops: dict = defaultdict(lambda: {"forms": set(), "files": set(), "status": None, "example": None})
    directives: dict = defaultdict(set)
    from warpsim.kernel.launch import Module
    for path in sorted(DATA.rglob("*.ptx*")):
        src = path.parent.name
        text = _text(path)
        arch = re.search(r"_(sm_\d+a?)\.ptx", path.name).group(1)
        clean = strip_comments(text)
        for line in clean.splitlines():
            s = line.strip()
            if s.startswith(".") or ".param" in s or ".reg" in s or ".ptr" in s:
                for d in _DIR_RE.findall(s):
                    directives[d].add(src)
                m = re.match(r"(\.[a-z_]+)\b", s)
                if m:
                    directives[m.group(1)].add(src)
        mod = parse_module(text)
        for fn in mod.functions.values():
            if fn.body is None:
                continue
            body = _DEBUG_RE.sub("", strip_comments(fn.body))
            seen = set()
            for kind, s, _ in statements(body, strict=False, nest="{[("):
                if kind != "stmt" or s.startswith("."):
                    continue
                s = re.sub(r"^@!?\s*\S+\s+", "", s)
                op = re.match(r"[A-Za-z_][\w.:]*", s).group(0)  # ('tcgen05.ld...b32{%r1}' has no space)
                fam = f"call {_call_target(s)}" if op in ("call", "call.uni") else _family(op)
                ops[fam]["forms"].add(op if not fam.startswith("call ") else fam)
                ops[fam]["files"].add(src)
                if ops[fam]["example"] is None:
                    decls = " ".join(x + ";" for k2, x, _ in statements(body, strict=False, nest="{[(")
                                     if k2 == "stmt" and x.startswith(".reg"))
                    ops[fam]["example"] = (decls, s, arch)
                seen.add(fam)
            if fn.kind != "entry":
                continue
            status, refused = "runs", None
            try:
                Module(text).program(fn.name, arch=arch)
            except PtxError as e:
                msg = str(e)
                status = "refused: " + msg.split(";")[0][:120]
                m = _STMT_RE.match(msg)
                refused = _family(m.group(1)) if m else None
                if "device-side" in msg:
                    refused = "call " + re.search(r"device-side (\w+)", msg).group(1)
            for fam in seen:
                if status == "runs" or fam.startswith("call ") and fam.split()[1] in ("vprintf", "__assertfail"):
                    ops[fam]["status"] = "runs"
                elif fam == refused or refused and fam.split(".")[0] == refused.split(".")[0] == "wgmma":
                    if ops[fam]["status"] != "runs":
                        ops[fam]["status"] = status
                elif ops[fam]["status"] is None:
                    ops[fam]["status"] = "decodes"
    for fam, o in ops.items():
        if fam.startswith("call ") and fam.split()[1] in ("malloc", "free"):
            o["status"] = f"refused by name: device-side {fam.split()[1]} is not supported"
        elif o["status"] == "decodes" and not fam.startswith("call "):
            # only in kernels refused for another instruction: decode it alone
            decls, s, arch = o["example"]
            try:
                Program(parse_body(decls + " " + s + ";"), arch)
            except PtxError as e:
                msg = str(e)
                if any(w in msg for w in ("support", "qualifier", "not legal", "expected")):
                    o["status"] = "refused: " + msg.split(";")[0][:120]
    return ops, directives


def main() -> None:
    ops, directives = sweep()
    if "--json" in sys.argv:
        print(json.dumps({"opcodes": {k: {"forms": sorted(v["forms"]), "sources": sorted(v["files"]),
                                          "status": v["status"]} for k, v in sorted(ops.items())},
                          "directives": {k: sorted(v) for k, v in sorted(directives.items())}}, indent=1))
        return
    print("| opcode (types dropped) | forms seen | sources | warpsim |")
    print("|---|---|---|---|")
    for fam, o in sorted(ops.items()):
        forms = sorted(o["forms"])
        shown = ", ".join(f"`{f}`" for f in forms[:4]) + (f" (+{len(forms) - 4})" if len(forms) > 4 else "")
        print(f"| `{fam}` | {shown} | {', '.join(sorted(o['files']))} | {o['status']} |")
    print()
    print("| directive | sources | warpsim |")
    print("|---|---|---|")
    for d, srcs in sorted(directives.items()):
        print(f"| `{d}` | {', '.join(sorted(srcs))} | {DIRECTIVE_STATUS.get(d, 'refused by name')} |")


if __name__ == "__main__":
    main()
