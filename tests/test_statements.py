"""One PTX statement splitter (the body parser and the linker) and how error messages quote
statements: a long one is shortened to its head and tail with its length."""

from __future__ import annotations

import re

import numpy as np
import pytest

import warpsim
from warpsim.errors import PtxError, quote
from warpsim.ptx import link, parser

HUGE = "add.u32 %r1, " + ", ".join(["%r2"] * 20000)  # about 100 KB


def _kernel(body: str) -> str:
    return (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
            ".reg .b32 %r<4>;\n" + body + "\nret;\n}\n")


def test_quote_keeps_head_tail_and_length():
    assert quote("abc") == "abc" and quote("x" * 200) == "x" * 200
    s = "".join(chr(65 + i % 26) for i in range(1000))
    q = quote(s)
    head, rest = q.split(" ... ")
    tail, length = rest.split(" (")
    assert s.startswith(head) and s.endswith(tail) and length == "1000 characters)"
    assert len(head) + len(tail) == 200 and len(tail) == 50
    assert len(quote(s, 40)) < 80


def test_linker_and_parser_share_the_splitter():
    """The linker splits with parser.statements: scopes as events, ( ) nesting its call lists."""
    assert not hasattr(link, "_statements") and link.statements is parser.statements
    text = "a.b %r1;\n{ L1: call (r), f, (x;y);\n}\n%p: mov %r2, 1;"
    got = list(parser.statements(text, scopes=True, nest="{[(", label=re.compile(r"[A-Za-z_$][\w$]*"),
                                 strict=False))
    assert got == [("stmt", "a.b %r1", 1), ("open", "{", 2), ("label", "L1", 2),
                   ("stmt", "call (r), f, (x;y)", 2), ("close", "}", 3), ("stmt", "%p: mov %r2, 1", 4)]
    # the body parser flattens scopes, splits at ';' inside ( ) and takes %-names as labels
    assert list(parser.statements(text)) == [
        ("stmt", "a.b %r1", 1), ("label", "L1", 2), ("stmt", "call (r), f, (x", 2),
        ("stmt", "y)", 2), ("label", "%p", 4), ("stmt", "mov %r2, 1", 4)]
    with pytest.raises(PtxError, match=r"line 1: unbalanced '\]'"):
        list(parser.statements("a ];"))


@pytest.mark.parametrize("where", ["run", "execute", "decode", "launch", "launch_no_semicolon",
                                   "vector", "parse_error"])
def test_long_statements_are_quoted_short(where):
    """A 20,000-operand statement once made a 100 KB message (and took the linker half a
    minute to split: its splitter was quadratic)."""
    calls = {
        "run": lambda: warpsim.Warp().run(HUGE + ";"),
        "execute": lambda: warpsim.Warp().execute(HUGE + ";"),
        "decode": lambda: warpsim.decode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                                         + "%r1 " * 20000),
        "launch": lambda: warpsim.launch(_kernel(HUGE + ";"), "k", 1, 32, []),
        "launch_no_semicolon": lambda: warpsim.launch(_kernel("{ " + HUGE + " }"), "k", 1, 32, []),
        "vector": lambda: warpsim.Warp().run("mov.b32 {" + ", ".join(["%r2"] * 5000) + "}, %rd1;"),
        "parse_error": lambda: warpsim.Warp().run(HUGE + ", 1x;"),
    }
    with pytest.raises(PtxError) as ei:
        calls[where]()
    msg = str(ei.value)
    assert len(msg) < 1000, msg[:300]
    assert re.search(r" \.\.\. .* \(\d{5,6} characters\)", msg), msg


def test_findings_quote_a_long_instruction_short():
    f = warpsim.Finding("race", "k", HUGE, 7, (0, 0, 0), 0, (1,), 16, "shared-memory race")
    s = str(f)
    assert len(s) < 500 and s.startswith("[race] k: line 7: add.u32 %r1, %r2,") and f"({len(HUGE)} characters)" in s
