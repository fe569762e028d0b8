"""Rewrite warpsim imports from the flat layout to the layered one (issue 18's move).

``python tools/relayer.py FILE...`` rewrites, in place, every ``import``/``from ... import``
statement (function-level ones included) that names a moved module, resolving relative imports
first and writing absolute ones.  Also rewrites dotted module paths inside string literals
(``"warpsim.launch"`` in a monkeypatch target).  A branch written against the flat layout runs
it after merging main.  Relative imports are resolved against the file's path; when that names no
module, against the path the file had before the move.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import textwrap

MOVES = {
    "warpsim.allocator": "warpsim._util.allocator",
    "warpsim.ptx.chunks": "warpsim._util.chunks",
    "warpsim.isa": "warpsim.facts.isa",
    "warpsim.formats": "warpsim.facts.formats",
    "warpsim.ptx.types": "warpsim.facts.types",
    "warpsim.engine": "warpsim.tensorcore.engine",
    "warpsim.decoder": "warpsim.tensorcore.decode",
    "warpsim.vector_immediates": "warpsim.tensorcore.immediates",
    "warpsim.blockscale": "warpsim.tensorcore.blockscale",
    "warpsim.sparse": "warpsim.tensorcore.sparse",
    "warpsim.layouts": "warpsim.tensorcore.layouts",
    "warpsim.packing": "warpsim.tensorcore.packing",
    "warpsim.numerics": "warpsim.tensorcore.numerics",
    "warpsim.execute": "warpsim.tensorcore.execute",
    "warpsim.gemm": "warpsim.tensorcore.gemm",
    **{f"warpsim.ptx.{m}": f"warpsim.ptx.ops.{m}" for m in (
        "approx", "atomic", "compare", "control", "convert", "datamove", "floating", "integer",
        "logic", "matrix", "warpops")},
    "warpsim.ptx.tensor": "warpsim.ptx.ops.mma",
    "warpsim.ptx.kernelargs": "warpsim.kernel.args",
    "warpsim.ptx.doc": "warpsim.tools.ptxdoc",
    "warpsim.launch": "warpsim.kernel.launch",
    "warpsim.sanitizer": "warpsim.kernel.sanitizer",
    "warpsim.warp": "warpsim.kernel.warp",
    "warpsim.cli": "warpsim.tools.cli",
    "warpsim.launch_cli": "warpsim.tools.launch_cli",
    "warpsim.render": "warpsim.tools.render",
    "warpsim.doctor": "warpsim.tensorcore.doctor",
    "warpsim.catalog": "warpsim.tools.catalog",
    "warpsim.golden_io": "warpsim.tools.golden",
    "warpsim.ptxas": "warpsim.tools.ptxas",
}
BACK = {v: k for k, v in MOVES.items()}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _module_of(path: str) -> str | None:
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    if not rel.startswith("warpsim" + os.sep):
        return None
    mod = rel[:-3].replace(os.sep, ".")
    return mod


def _is_module(name: str) -> bool:
    base = os.path.join(ROOT, *name.split("."))
    return os.path.exists(base + ".py") or os.path.isdir(base)


def _new(name: str) -> str:
    for old in sorted(MOVES, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return MOVES[old] + name[len(old):]
    return name


def _resolve(mod: str | None, level: int, here: str | None) -> str | None:
    if not level:
        return mod
    if here is None:
        return None
    pkg = here.split(".")
    if not here.endswith("__init__"):
        pkg = pkg[:-1]
    else:
        pkg = pkg[:-1]
    pkg = pkg[:len(pkg) - (level - 1)]
    return ".".join(pkg + ([mod] if mod else []))


def _rewrite_from(node: ast.ImportFrom, here: str | None) -> list[str] | None:
    base = _resolve(node.module, node.level, here)
    if node.level and here in BACK and (base is None or not _is_module(base)):
        base = _resolve(node.module, node.level, BACK[here])
    if base is None or not (base == "warpsim" or base.startswith("warpsim.")):
        return None
    groups: dict[str, list[str]] = {}
    for a in node.names:
        full = f"{base}.{a.name}"
        if full in MOVES or full in MOVES.values() or _is_module(full) or full in BACK:
            new = _new(full)
            pkg, name = new.rsplit(".", 1)
            alias = a.asname or (a.name if name != a.name else None)
            groups.setdefault(pkg, []).append(name + (f" as {alias}" if alias else ""))
        else:
            alias = f" as {a.asname}" if a.asname else ""
            groups.setdefault(_new(base), []).append(a.name + alias)
    out = []
    for pkg, names in groups.items():
        line = f"from {pkg} import {', '.join(names)}"
        if len(line) > 96:
            body = textwrap.fill(", ".join(names), 92, initial_indent="    ",
                                 subsequent_indent="    ")
            line = f"from {pkg} import (\n{body})"
        out.extend(line.split("\n"))
    return out


def rewrite(path: str) -> bool:
    src = open(path).read()
    tree = ast.parse(src)
    here = _module_of(path)
    lines = src.split("\n")
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            new = _rewrite_from(node, here)
        elif isinstance(node, ast.Import):
            if not any(a.name.startswith("warpsim") for a in node.names):
                continue
            new = [f"import {_new(a.name)}" + (f" as {a.asname}" if a.asname else "")
                   for a in node.names]
            if [_new(a.name) for a in node.names] == [a.name for a in node.names]:
                continue
        else:
            continue
        if new is None:
            continue
        first, last = node.lineno - 1, node.end_lineno - 1
        indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
        prefix = lines[first][len(indent):node.col_offset] if node.col_offset > len(indent) else ""
        tail = lines[last][node.end_col_offset:]
        text = [indent + prefix + new[0]] + [indent + t for t in new[1:]]
        text[-1] += tail
        edits.append((first, last, text))
    for first, last, text in sorted(edits, reverse=True):
        lines[first:last + 1] = text
    out = "\n".join(lines)
    pat = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in
                                               sorted(MOVES, key=len, reverse=True)) + r")(?![\w])")
    out = re.sub(r"([\"'])(warpsim\.[\w.]+)", lambda m: m.group(1) + pat.sub(
        lambda n: MOVES[n.group(1)], m.group(2)), out)
    if out != src:
        open(path, "w").write(out)
        return True
    return False


if __name__ == "__main__":
    changed = [p for p in sys.argv[1:] if p.endswith(".py") and rewrite(p)]
    print(f"relayer: {len(changed)} file(s) rewritten")
