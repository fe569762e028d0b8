"""Every code block of README.md and docs/*.md runs (issue 18: docs that are true).

Per file, in a fresh process and a scratch directory (with ``tests/`` and ``examples/`` of the
checkout beside it), in document order: ``python`` blocks run in one shared namespace, as a
reader pasting them one after another would; the ``$ ...`` commands of a shell block run through
bash (a trailing backslash continues a command) and must exit 0.  Lines of a shell block that do
not start with ``$`` are the output the document shows and are not compared (most are random
data or timings).  A block preceded by ``<!-- doctest: skip (reason) -->`` is not run; one
preceded by ``<!-- doctest: exit N -->`` shows a command that fails on purpose: each of its
commands must exit 0 or N, and one must exit N.  One preceded by ``<!-- doctest: output -->``
(or ``exit N; output``) shows what its commands print: each command's stdout must be the lines
shown after it (trailing spaces aside; a line ``...`` stands for any number of lines), so a
figure or name that changes makes the document fail rather than go stale.  Blocks without a ``$`` prompt that only install (``pip install``) are
what CI itself runs and are skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
SKIP = re.compile(r"<!--\s*doctest:\s*skip\b(.*?)-->")
EXIT = re.compile(r"<!--\s*doctest:[^>]*?\bexit\s+(\d+)[^>]*-->")
OUTPUT = re.compile(r"<!--\s*doctest:[^>]*?\boutput\b[^>]*-->")


def collect(path: Path) -> list[dict]:
    """The runnable blocks of a Markdown file: {'kind': 'python'|'shell', 'line', 'code',
    'exit' (the status a shell block's failing command must give; 0: none fails)}."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        lang = lines[i][3:].strip()
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1:j]
        prev = next((x for x in reversed(lines[:i]) if x.strip()), "")
        if not SKIP.search(prev):
            if lang == "python":
                out.append({"kind": "python", "line": i + 2, "code": "\n".join(body)})
            elif lang in ("", "sh", "bash", "console"):
                cmds, shown, cur = [], [], None
                for x in body:
                    if cur is not None:
                        cur += "\n" + x
                    elif x.startswith("$ "):
                        cur = x[2:]
                    else:
                        if shown:
                            shown[-1].append(x)
                        continue
                    if cur.endswith("\\"):
                        continue
                    cmds.append(cur)
                    shown.append([])
                    cur = None
                if cmds:
                    m = EXIT.search(prev)
                    out.append({"kind": "shell", "line": i + 2, "code": cmds,
                                "exit": int(m.group(1)) if m else 0,
                                "shown": shown if OUTPUT.search(prev) else None})
        i = j + 1
    return out


def fence_problems(path: Path) -> list[str]:
    """Code fences that do not pair up: a fence with a language where a block is still open (the
    block before it was never closed, so everything after renders inside out and its blocks are
    never run), or a block left open at the end of the file."""
    out, open_at = [], None
    for n, line in enumerate(path.read_text().split("\n"), 1):
        if not line.startswith("```"):
            continue
        if open_at is None:
            open_at = n
        elif line[3:].strip():
            out.append(f"line {n}: {line.strip()!r} opens a block while the one from line "
                       f"{open_at} is still open")
            open_at = n
        else:
            open_at = None
    if open_at is not None:
        out.append(f"line {open_at}: a code block is never closed")
    return out


RUNNER = r'''
import json, subprocess, sys, traceback

def same(shown, got):
    """``got`` (lines) is what ``shown`` shows; a shown line '...' stands for any lines."""
    if not shown:
        return not got
    if shown[0].strip() == "...":
        return any(same(shown[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and got[0].rstrip() == shown[0].rstrip() and same(shown[1:], got[1:])

blocks = json.loads(sys.stdin.read())
ns = {"__name__": "__doc__"}
for b in blocks:
    where = f"{b['file']}:{b['line']}"
    if b["kind"] == "python":
        try:
            exec(compile(b["code"], where, "exec"), ns)
        except BaseException:
            traceback.print_exc()
            sys.exit(f"python block at {where} failed")
    else:
        codes = []
        for cmd in b["code"]:
            p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300)
            codes.append(p.returncode)
            if p.returncode not in (0, b["exit"]):
                sys.exit(f"command at {where} exited {p.returncode}: {cmd}\n{p.stdout[-2000:]}"
                         f"\n{p.stderr[-2000:]}")
            shown = b["shown"][len(codes) - 1] if b["shown"] else None
            if shown is not None and not same(shown, p.stdout.rstrip("\n").split("\n") if p.stdout else []):
                sys.exit(f"command at {where} printed what the document does not show: {cmd}\n"
                         f"--- shown:\n" + "\n".join(shown) + f"\n--- printed:\n{p.stdout[-3000:]}")
        if b["exit"] and b["exit"] not in codes:
            sys.exit(f"no command at {where} exited {b['exit']} as the document says")
'''


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_code_blocks_run(path, tmp_path):
    blocks = collect(path)
    if not blocks:
        pytest.skip("no runnable code block")
    for name in ("tests", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    p = _run(blocks, str(path.relative_to(ROOT)), tmp_path)
    assert p.returncode == 0, p.stderr[-4000:] + p.stdout[-2000:]


def _run(blocks: list[dict], name: str, cwd: Path) -> subprocess.CompletedProcess:
    for b in blocks:
        b["file"] = name
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(blocks), text=True,
                          capture_output=True, cwd=cwd, env=env, timeout=900)


def test_collect_reads_prompts_continuations_and_skips(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("text\n```\n$ echo a \\\n  b\noutput line\n$ true\n```\n"
                   "<!-- doctest: skip (needs a GPU) -->\n```\n$ false\n```\n"
                   "<!-- doctest: exit 2 -->\n```\n$ warpsim layout x\n```\n"
                   "```python\nx = 1\n```\n```\npip install .\n```\n")
    blocks = collect(doc)
    assert [b["kind"] for b in blocks] == ["shell", "shell", "python"]
    assert blocks[0]["code"] == ["echo a \\\n  b", "true"] and blocks[2]["code"] == "x = 1"
    assert (blocks[0]["exit"], blocks[1]["exit"]) == (0, 2)


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_code_fences_pair_up(path):
    assert fence_problems(path) == []


def test_fence_problems_finds_an_unclosed_block(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```\n$ warpsim list\nout\n\n## Next\n```\n$ x\n```\n\n```python\nx = 1\n```\n")
    assert fence_problems(doc) == ["line 10: '```python' opens a block while the one from line 8 "
                                   "is still open"]
    doc.write_text("```python\nx = 1\n```\n```\n$ a\n")
    assert fence_problems(doc) == ["line 4: a code block is never closed"]
    doc.write_text("```\n$ a\n```\n```python\nx = 1\n```\n")
    assert fence_problems(doc) == []


def test_output_blocks_compare_what_commands_print(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("<!-- doctest: output -->\n```\n$ printf 'a\\nb\\nc\\nd\\n'\na\n...\nd\n$ true\n```\n"
                   "<!-- doctest: exit 3; output -->\n```\n$ echo x; exit 3\nx  \n```\n"
                   "```\n$ echo not compared\nanything\n```\n")
    blocks = collect(doc)
    assert [b["shown"] for b in blocks] == [[["a", "...", "d"], []], [["x  "]], None]
    assert blocks[1]["exit"] == 3
    assert _run(blocks, "x.md", tmp_path).returncode == 0
    doc.write_text("<!-- doctest: output -->\n```\n$ echo 24 targets\n25 targets\n```\n")
    p = _run(collect(doc), "x.md", tmp_path)
    assert p.returncode != 0 and "printed what the document does not show" in p.stderr
