"""The package's import graph: layers point only down, and no module takes part in a circle.

Every ``import`` in warpsim/ is read with ``ast``, function-level ones included.  Layers, lowest
first: errors and _util; facts; tensorcore; ptx; kernel; then tools, validation and frontends
(which may import each other only as stated below).  ``warpsim/__init__.py`` and ``__main__.py``
sit above everything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "warpsim"

#: Layer of each top-level part of the package; a module may import its own layer or lower ones.
LAYERS = {"errors": 0, "_util": 0, "facts": 1, "tensorcore": 2, "ptx": 3, "kernel": 4,
          "frontends": 5, "tools": 6, "validation": 6}


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """warpsim modules ``name`` imports (a ``from pkg import sub`` names the submodule)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            if not base.startswith("warpsim"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in MODULES else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("warpsim"))
    return {m for m in found if m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return None  # the package root sits above every layer
    return LAYERS[parts[1]]


def test_every_module_has_a_layer():
    unknown = {m.split(".")[1] for m in MODULES if "." in m and m.split(".")[1] not in LAYERS
               and m.split(".")[1] != "__main__"}
    assert not unknown, f"modules outside any layer: {sorted(unknown)}"


def test_imports_point_down():
    up = []
    for name, deps in GRAPH.items():
        mine = _layer(name)
        if mine is None:
            continue
        for dep in deps:
            theirs = _layer(dep)
            if theirs is None or theirs > mine:
                up.append(f"{name} -> {dep}")
    assert not up, "imports that go up a layer:\n" + "\n".join(sorted(up))


def test_frontends_never_import_tools():
    bad = [f"{n} -> {d}" for n, deps in GRAPH.items() if n.startswith("warpsim.frontends")
           for d in deps if d.startswith("warpsim.tools")]
    assert not bad, bad


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
                continue
            if nxt not in graph:
                continue
            if nxt not in index:
                index[nxt] = low[nxt] = counter
                counter += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
    return out


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_the_circle_finder_finds_a_planted_circle():
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(planted) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("warpsim.ptx.ops.")
                                        and not n.endswith("ops")))
def test_every_family_module_is_registered(name):
    from warpsim.ptx import registry
    assert name.rsplit(".", 1)[1] in registry.FAMILIES
