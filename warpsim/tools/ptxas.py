"""NVIDIA's assembler as an optional oracle: find a ptxas, ask it whether an mma line assembles.

warpsim never needs ptxas; it is the ground truth that ``tools/ptxas_truth.py`` labels the
stored corpus with and that ``warpsim decode --ptxas`` shows beside warpsim's verdict.  The
newest ptxas comes without a GPU or a system CUDA in the ``nvidia-cuda-nvcc`` wheel
(``pip install warpsim[ptxas]``), which installs it under ``site-packages/nvidia/cu13/bin``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from warpsim.facts.isa import PTX_VERSIONS, TYPE_BITS

__all__ = ["Ptxas", "assemble", "find_ptxas", "operand_lists", "render"]

_BUILD_RE = re.compile(r"cuda_(\d+)\.(\d+)")
_ERR_RE = re.compile(r"^ptxas (.*?), line (\d+); (?:error|fatal)\s*:\s*(.*)")
_FATAL_LINE_RE = re.compile(r"^ptxas fatal\s*:\s*(.*) on line (\d+)\s*$")


@dataclass(frozen=True)
class Ptxas:
    """One ptxas binary: its path, CUDA release and the newest PTX ISA version it reads."""

    path: str
    cuda: tuple[int, int]
    build: str

    @property
    def max_ptx(self) -> tuple[int, int]:
        """Newest ``.version`` this ptxas reads (CUDA 13.y reads PTX ISA 9.y)."""
        known = [v for v, c in PTX_VERSIONS.items() if c <= self.cuda]
        return max(known) if known else (9, 0)

    @property
    def name(self) -> str:
        return f"ptxas {self.cuda[0]}.{self.cuda[1]}"


def _probe(path: str) -> Ptxas | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = _BUILD_RE.search(out)
    if not m:
        return None
    return Ptxas(path, (int(m.group(1)), int(m.group(2))), out.strip().splitlines()[-1])


def _wheel_ptxas() -> list[str]:
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [str(p) for loc in spec.submodule_search_locations
            for p in sorted(Path(loc).glob("cu*/bin/ptxas"))]


def find_ptxas(path: str | None = None) -> Ptxas | None:
    """The newest ptxas found: ``path`` if given, else ``$WARPSIM_PTXAS``, the nvidia-cuda-nvcc
    wheel and the PATH.  None when there is none."""
    if path:
        return _probe(path)
    cands = [os.environ.get("WARPSIM_PTXAS", ""), *_wheel_ptxas(), shutil.which("ptxas") or ""]
    found = [p for p in (_probe(c) for c in dict.fromkeys(cands) if c) if p is not None]
    return max(found, key=lambda p: p.cuda) if found else None


def sass_target(target: str) -> str:
    """The -arch ptxas compiles for: CUDA 13 has no sm_70/sm_72 code generator, so those are
    checked as ``.target sm_7x`` with ``-arch=sm_75`` (ptxas checks features against .target)."""
    return "sm_75" if target in ("sm_70", "sm_72") else target


# --------------------------------------------------------------------------------------------
# Operand lists for strings written without one
# --------------------------------------------------------------------------------------------

_SHAPE_RE = re.compile(r"m(\d+)n(\d+)k(\d+)")


def _regs(n_elems: int, bits: int, regbits: int) -> int:
    return max(1, -(-n_elems * bits // regbits))


#: The sparsity-selector immediate rendered for mma.sp strings (tools/ptxas_truth_sparse.py varies it).
SPARSE_SELECTOR = 0


def is_sparse(text: str) -> bool:
    """Whether an mma string is sparse (a .sp or .sp::... qualifier in its opcode)."""
    return any(t == "sp" or t.startswith("sp::") for t in text.split(" ")[0].split("."))


def operand_lists(text: str) -> list[tuple[int, int, int, int, bool, bool]]:
    """Plausible operand lists for an mma string without one: (a, b, c, d register counts, f64 registers for a/b, f64 for c/d) tuples plus
    whether block-scale operands follow; the most likely first."""
    toks = text.split(".")
    shape = next((tuple(map(int, m.groups())) for t in toks if (m := _SHAPE_RE.fullmatch(t))),
                 (16, 8, 16))
    types = [t for t in toks if t in TYPE_BITS and t not in ("ue8m0", "ue4m3")]
    types += ["f32"] * (4 - len(types))
    d, a, b, c = types[:4]
    m, n, k = shape
    ka = k // 2 if is_sparse(text) else k  # mma.sp: A holds the compressed M x K/2 matrix
    kinds = [t for t in toks if t.startswith("kind::")]
    mx = bool(kinds) and kinds[0].startswith("kind::mx")
    scaled = "block_scale" in toks or mx
    out = []
    a_bits = [TYPE_BITS[a]]
    if a in ("e3m2", "e2m3", "e2m1"):
        a_bits = [8, 4] if not (kinds and "mxf4" in kinds[0]) else [4, 8]
    for quad in ((m, n, k) == (8, 8, 4), (m, n, k) != (8, 8, 4)):
        lanes = 8 if quad else 32
        for ab in a_bits:
            for cd in dict.fromkeys([d, "f32", "f16"]):
                f64ab = a == "f64"
                f64cd = cd == "f64" or d == "f64"
                rb_ab = 64 if f64ab else 32
                rb_cd = 64 if f64cd else 32
                ra = _regs(m * ka // lanes, ab, rb_ab)
                rb = _regs(k * n // lanes, ab, rb_ab)
                rd = _regs(m * n // lanes, TYPE_BITS[cd], rb_cd)
                rc = _regs(m * n // lanes, TYPE_BITS[c if cd == d else cd], rb_cd)
                out.append((ra, rb, rc, rd, f64ab, f64cd, scaled))
    if text.count(".") and not scaled:
        out += [o[:-1] + (True,) for o in out[:1]]
    elif scaled:
        out += [o[:-1] + (False,) for o in out[:1]]
    # f16 B at m16n8k4 would be half a register: also try generic small lists.
    out += [(2, 1, 2, 2, False, False, scaled), (4, 2, 4, 4, False, False, scaled),
            (2, 2, 8, 8, False, False, scaled), (4, 4, 8, 8, False, False, scaled),
            (1, 1, 2, 2, True, True, scaled), (2, 2, 4, 4, True, True, scaled)]
    return list(dict.fromkeys(out))


def render(text: str, ol) -> str:
    ra, rb, rc, rd, f64ab, f64cd, scaled = ol
    pab, pcd = ("%fd" if f64ab else "%r"), ("%fd" if f64cd else "%r")

    def vec(prefix, start, count):
        return "{" + ",".join(f"{prefix}{start + i}" for i in range(count)) + "}"

    ops = [vec(pcd, 0, rd), vec(pab, 20, ra), vec(pab, 40, rb), vec(pcd, 60, rc)]
    if is_sparse(text):  # metadata register and sparsity selector
        ops += ["%r95", str(SPARSE_SELECTOR)]
    if scaled:
        ops += ["%r90", "{0, 0}", "%r91", "{0, 0}"]
    return f"{text} {', '.join(ops)};"


#: Registers every module declares (the truth corpus uses these names).
DECLARATIONS = (".reg .b32 %r<100>;", ".reg .f32 %f<100>;", ".reg .f64 %fd<100>;",
                ".reg .b64 %rd<100>;", ".reg .b16 %h<10>;", ".reg .b16 %rs<10>;",
                ".reg .pred %p<4>;")


def module(target: str, body: list[str], ptx_version: tuple[int, int]) -> tuple[str, int]:
    """A PTX module holding ``body`` lines in one kernel; (text, number of header lines)."""
    head = [f".version {ptx_version[0]}.{ptx_version[1]}", f".target {target}",
            ".address_size 64", ".visible .entry k()", "{", *DECLARATIONS]
    return "\n".join(head + body + ["ret;", "}", ""]), len(head)


def run(ptxas: Ptxas, target: str, body: list[str], ptx_version: tuple[int, int]
        ) -> tuple[int, dict[int, list[str]]]:
    """Assemble ``body``: (exit status, {body line index (-1: header): error messages})."""
    text, nhead = module(target, body, ptx_version)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
        fh.write(text)
        path = fh.name
    try:
        p = subprocess.run([ptxas.path, f"-arch={sass_target(target)}", path, "-o", os.devnull],
                           capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(path)
    errs: dict[int, list[str]] = {}
    for ln in (p.stdout + p.stderr).splitlines():
        m = _ERR_RE.search(ln)
        if m and m.group(1) == path:  # not '<macro util>': ptxas's own expansions
            line, msg = int(m.group(2)), m.group(3)
        else:
            m = _FATAL_LINE_RE.search(ln)
            if not m:
                continue
            line, msg = int(m.group(2)), m.group(1)
        i = line - nhead - 1
        if i < 0:
            errs.setdefault(-1, []).append(msg.strip())  # the header: the module is refused
        elif i < len(body):
            errs.setdefault(i, []).append(msg.strip())
    return p.returncode, errs


def assemble(ptxas: Ptxas, line: str, target: str, ptx_version: tuple[int, int] | None = None
             ) -> list[str]:
    """ptxas's error messages for one complete mma statement on ``target`` ([] = accepted)."""
    v = ptx_version or ptxas.max_ptx
    body = line if line.rstrip().endswith(";") else line + ";"
    rc, errs = run(ptxas, target, body.split("\n"), v)
    msgs = [m for _, ms in sorted(errs.items()) for m in ms]
    if rc != 0 and not msgs:
        msgs = [f"ptxas failed (exit {rc})"]
    return msgs


#: ptxas messages about the operand list (not the qualifiers).
_OPERAND_MSG_RE = re.compile(r"[Aa]rgument|[Vv]ector|operand|Illegal vector size")


def _has_operands(s: str) -> bool:
    """Whether statement text carries an operand list (whitespace or a '{' after the opcode)."""
    return any(ch.isspace() or ch == "{" for ch in s)


def verdict(ptxas: Ptxas, text: str, target: str, ptx_version: tuple[int, int] | None = None
            ) -> list[str]:
    """ptxas's errors for ``text`` on ``target`` ([] = assembled).  Text without an operand
    list is tried with each plausible list (accepted when any is); a qualifier error ends it."""
    s = text.strip().rstrip(";").rstrip()
    if _has_operands(s):
        return assemble(ptxas, s, target, ptx_version)
    first: list[str] = []
    for ol in operand_lists(s):
        msgs = assemble(ptxas, render(s, ol), target, ptx_version)
        if not msgs:
            return []
        first = first or msgs
        if any(not _OPERAND_MSG_RE.search(m) for m in msgs):
            return [m for m in msgs if not _OPERAND_MSG_RE.search(m)]
    return first
