"""The instruction table of docs/ptx.md, generated from the registry:
``python -m warpsim.tools.ptxdoc`` prints it."""

from __future__ import annotations

from warpsim.ptx import registry


def table(families: tuple[str, ...] | None = None) -> str:
    """Markdown rows: opcode, family, types, modifier groups, description."""
    rows = ["| opcode | family | types | modifiers | what |", "|---|---|---|---|---|"]
    t = registry.table()
    for key in sorted(t):
        for spec, fam in t[key]:
            if families is not None and fam not in families:
                continue
            if spec.compile is None:
                types = " ".join("." + x for x in spec.types)
                mods = "; ".join(f"{g}: {' '.join('.' + x for x in toks)}"
                                 for g, toks in spec.modifiers.items())
            else:
                types = mods = "see below"
            doc = spec.doc.replace("|", "\\|")
            rows.append(f"| `{key}` | {fam} | {types} | {mods} | {doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
