"""Immediates inside mma A/B/C operand vectors: which spellings ptxas accepts, and the register
words it builds from them, read from the SASS and checked on the GPU.

Three steps, each a subcommand of ``python -m warpsim.validation.immediates``:

``label OUT.json`` (ptxas only, no GPU)
    Every candidate (form x operand a/b/c x context x literal, :func:`candidates`) assembled by
    ptxas for sm_90; the verdicts (accepted, or ptxas's first message) are saved.
``build DIR`` (ptxas only)
    One kernel per accepted candidate in one module (``DIR/imm.ptx`` -> ``DIR/imm.cubin``).
    Each thread loads the vector's register items from ``in[warp][lane][k]`` (u64 slots),
    runs the statement, stores D to u64 slots.  With a disassembler (nvdisasm or cuobjdump) the
    SASS goes to ``DIR/imm.sass``.
``run DIR OUT.npz`` (GPU, CuPy)
    Launches every kernel on random register words (``WARPS`` warps) and saves inputs and D.
``compare DIR OUT.npz``
    warpsim (``Warp.execute`` and ``Warp.run``) against the saved D words.
``sass-probes OUT.json`` (ptxas and a disassembler, no GPU)
    :data:`SASS_PROBES` on their targets: the constant words in each kernel's SASS.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

TARGET = "sm_90"
WARPS = 4
SEED = 4242

#: Forms the candidates are built on (one per operand typing: f16x2/bf16x2/tf32/fp8/int/b1
#: words in .b32 registers, f32/f16x2/s32 accumulators, f64 registers, a sparse form).
FORMS = (
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
    "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32",
    "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc",
    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64",
    "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
)

#: Literal spellings: integers (decimal, hex, octal, binary, negative, U suffix, out of range),
#: 0f/0d hex floats (NaN payloads, signs), decimal floats (with and without exponent, values
#: that round differently in binary32 and binary64, out of range).
LITERALS = (
    "0", "7", "0x3c003c00", "0x7F800001", "-1", "-2", "-0x80000001", "0xFFFFFFFF", "0x100000000",
    "0xFFFFFFFFFFFFFFFF", "0x10000000000000000", "0x1FFFFFFFFFFFFFFFF", "18446744073709551615",
    "18446744073709551616", "017", "0b101", "5U",
    "0f3F800000", "0f3F800001", "0fBFC00000", "0f7FC00001", "0f00000001",
    "0d3FF8000000000000", "0d3FF199999999999A", "0d7FF8000000000001", "0d8000000000000000",
    "1.5", "1.1", "-2.5", "0.", ".5", "-0.0", "1e3", "1.5E-3", "1e39", "3.4028235677973366e38",
    "1.00000005960464477539062500000001", "1e300", "1e400", "4.9e-324", "2.2250738585072014e-308",
)

#: Register declarations of every kernel (the candidates use %r, %f, %rd, %fd; %q, %t are the
#: harness's own).
DECLS = (".reg .b32 %r<100>;", ".reg .f32 %f<100>;", ".reg .b64 %rd<100>;",
         ".reg .f64 %fd<100>;", ".reg .b64 %q<8>;", ".reg .b32 %t<4>;")


@dataclass(frozen=True)
class Candidate:
    form: str
    role: str           # 'a', 'b' or 'c'
    context: str        # register prefix of the other items ('%r', '%f', '%rd', '%fd'), or 'none'
    literal: str
    items: tuple        # the operand's vector items
    stmt: str           # the whole statement

    @property
    def key(self) -> str:
        return f"{self.form}|{self.role}|{self.context}|{self.literal}"


def _natural(instr, op: str) -> str:
    bits = instr.register_bits(op)
    if bits == 64:
        return "%fd"
    return "%f" if instr.type_of(op) == "f32" else "%r"


def _alternative(instr, op: str) -> str:
    bits = instr.register_bits(op)
    if bits == 64:
        return "%rd"
    return "%r" if instr.type_of(op) == "f32" else "%f"


def _vectors(instr) -> dict[str, list[str]]:
    base = {"d": 0, "a": 20, "b": 40, "c": 60}
    return {op: [f"{_natural(instr, op)}{base[op] + j}" for j in range(instr.regs[op])]
            for op in "dabc"}


def statement(form: str, vectors: dict[str, list]) -> str:
    from warpsim.tensorcore.decode import decode

    instr = decode(form, TARGET)
    ops = ["{" + ", ".join(vectors[op]) + "}" for op in "dabc"]
    if instr.sparse:
        ops += ["%r95", "0"]
    return f"{form} {', '.join(ops)}"


def candidates() -> list[Candidate]:
    """Every (form, operand, context, literal) candidate, deduplicated by statement."""
    from warpsim.tensorcore.decode import decode

    out: dict[str, Candidate] = {}
    for form in FORMS:
        instr = decode(form, TARGET)
        vecs = _vectors(instr)
        for role in "abc":
            regs = vecs[role]
            n = len(regs)
            contexts = {_natural(instr, role): regs,
                        _alternative(instr, role): [f"{_alternative(instr, role)}{r.lstrip('%rfd')}"
                                                    for r in regs],
                        "none": None}
            for ctx, names in contexts.items():
                for lit in LITERALS:
                    if names is None:
                        items = [lit] * n
                    else:
                        items = list(names)
                        items[min(1, n - 1)] = lit
                    v = dict(vecs)
                    v[role] = items
                    s = statement(form, v)
                    out.setdefault(s, Candidate(form, role, ctx, lit, tuple(items), s))
            # mixed literal kinds in one vector, beside a %r and beside %f/%r registers
            if n >= 3:
                for items in ([regs[0], "1", "1.5"] + regs[3:], [regs[0], "0f3F800000", "1.5"] + regs[3:],
                              ["%f" + regs[0].lstrip("%rfd"), "%r" + regs[1].lstrip("%rfd"), "1"] + regs[3:],
                              ["%r" + regs[0].lstrip("%rfd"), "%f" + regs[1].lstrip("%rfd"), "1.5"] + regs[3:]):
                    if any(x.startswith("%fd") for x in regs):
                        continue
                    v = dict(vecs)
                    v[role] = items
                    s = statement(form, v)
                    out.setdefault(s, Candidate(form, role, "mixed", ",".join(items[:3]), tuple(items), s))
    # random mixtures of register kinds and literal kinds (the typing rule is checked on them)
    import random
    rng = random.Random(SEED)
    pool32 = ["%r", "%f", "3", "0f3F800000", "0d3FF8000000000000", "1.5"]
    pool64 = ["%rd", "%fd", "3", "0f3F800000", "0d3FF8000000000000", "1.5"]
    for form in FORMS:
        instr = decode(form, TARGET)
        vecs = _vectors(instr)
        for role in "abc":
            n = len(vecs[role])
            if n < 2:
                continue
            pool = pool64 if instr.register_bits(role) == 64 else pool32
            for _ in range(40):
                items = [rng.choice(pool) for _ in range(n)]
                items = [f"{x}{70 + j}" if x.startswith("%") else x for j, x in enumerate(items)]
                v = dict(vecs)
                v[role] = items
                s = statement(form, v)
                out.setdefault(s, Candidate(form, role, "random", ",".join(items), tuple(items), s))
    return list(out.values())


# --------------------------------------------------------------------------------------------
# ptxas verdicts
# --------------------------------------------------------------------------------------------

def _module(body: list[str], version=(9, 0)) -> tuple[str, int]:
    head = [f".version {version[0]}.{version[1]}", f".target {TARGET}", ".address_size 64",
            ".visible .entry k()", "{", *DECLS]
    return "\n".join(head + body + ["ret;", "}", ""]), len(head)


def _assemble(ptxas: str, lines: list[str]) -> list[str | None]:
    """Per line: None when ptxas accepts it, else its first message.  Lines of a batch that
    fails without blaming them are re-checked in halves."""
    import os
    import tempfile

    text, nhead = _module([ln + ";" for ln in lines])
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
        fh.write(text)
        path = fh.name
    try:
        p = subprocess.run([ptxas, f"-arch={TARGET}", path, "-o", os.devnull],
                           capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    errs: dict[int, str] = {}
    for ln in (p.stdout + p.stderr).splitlines():
        m = re.match(r"ptxas .*?, line (\d+); error\s*:\s*(.*)", ln)
        if m:
            errs.setdefault(int(m.group(1)) - nhead - 1, m.group(2).strip())
    res: list[str | None] = [errs.get(i) for i in range(len(lines))]
    if p.returncode == 0:
        return res
    parse = [i for i, e in errs.items() if "syntax error" in e or "Parsing error" in e]
    if parse and min(parse) + 1 < len(lines):  # lines after a parse error: again on their own
        first = min(parse)
        return res[:first + 1] + _assemble(ptxas, lines[first + 1:])
    ok = [i for i, r in enumerate(res) if r is None]
    if ok and len(ok) < len(lines):
        again = _assemble(ptxas, [lines[i] for i in ok])
        for i, r in zip(ok, again):
            res[i] = r
    elif ok:  # nothing blamed, yet it failed
        if len(lines) == 1:
            return [f"ptxas failed (exit {p.returncode})"]
        h = len(lines) // 2
        return _assemble(ptxas, lines[:h]) + _assemble(ptxas, lines[h:])
    return res


def label(ptxas: str = "ptxas", cands: list[Candidate] | None = None, batch: int = 200) -> dict:
    cands = candidates() if cands is None else cands
    verdicts: dict[str, str | None] = {}
    for i in range(0, len(cands), batch):
        chunk = cands[i:i + batch]
        for c, r in zip(chunk, _assemble(ptxas, [c.stmt for c in chunk])):
            verdicts[c.stmt] = r
    build_line = subprocess.run([ptxas, "--version"], capture_output=True,
                                text=True).stdout.strip().splitlines()[-1]
    return {"ptxas": build_line, "target": TARGET,
            "rows": [{**asdict(c), "items": list(c.items), "error": verdicts[c.stmt]}
                     for c in cands]}


# --------------------------------------------------------------------------------------------
# Kernels, GPU run, comparison
# --------------------------------------------------------------------------------------------

#: The sparse form's metadata register: every lane holds METADATA_WORD (indices 0 and 1 of
#: every group of four, a legal pattern for selector 0).
METADATA, METADATA_WORD = "%r95", 0x44444444


def _decl_type(name: str) -> str:
    return ("f64" if name.startswith("%fd") else "b64" if name.startswith("%rd")
            else "f32" if name.startswith("%f") else "b32")


def _vector_regs(stmt: str) -> tuple[list[str], list[str]]:
    """(D registers, source registers in order of first use) of a statement."""
    from warpsim.tensorcore.decode import split_operands

    _, groups = split_operands(stmt)
    d = list(groups[0])
    src: list[str] = []
    for g in groups[1:]:
        for x in (g if isinstance(g, list) else [g]):
            if isinstance(x, str) and x not in src and x != METADATA:
                src.append(x)
    return d, src


def entry(i: int, stmt: str) -> str:
    """Kernel ``k<i>``: thread (warp w = ctaid.x, lane) loads source registers from
    ``in[w][lane][k]`` and stores D to ``out[w][lane][k]`` (u64 slots of 16)."""
    d, src = _vector_regs(stmt)
    lines = [f".visible .entry k{i}(.param .u64 pin, .param .u64 pout)", "{", *DECLS,
             "ld.param.u64 %q0, [pin]; ld.param.u64 %q1, [pout];",
             "mov.u32 %t0, %tid.x; mov.u32 %t1, %ctaid.x; mad.lo.u32 %t2, %t1, 32, %t0;",
             "mul.wide.u32 %q2, %t2, 128; add.s64 %q3, %q0, %q2; add.s64 %q4, %q1, %q2;"]
    for k, r in enumerate(src):
        lines.append(f"ld.global.{_decl_type(r)} {r}, [%q3+{8 * k}];")
    lines.append(f"mov.b32 {METADATA}, {METADATA_WORD};")
    lines.append(stmt + ";")
    for k, r in enumerate(d):
        lines.append(f"st.global.{_decl_type(r)} [%q4+{8 * k}], {r};")
    return "\n".join(lines + ["ret;", "}"])


SLOTS = 16


def build(outdir, labels: dict, ptxas: str = "ptxas", disasm: str | None = None) -> dict:
    """Write and assemble the module of every accepted candidate; with a disassembler, dump the
    SASS.  Returns the manifest (also saved as ``manifest.json``)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    from warpsim.tensorcore.decode import decode

    cases, refused = [], {}
    for r in labels["rows"]:
        if r["error"] is None:
            try:
                decode(r["stmt"], TARGET)
                cases.append(r)
            except ValueError as e:  # ptxas takes it; warpsim refuses it on purpose
                refused[r["stmt"]] = str(e)
    mod = [".version 9.0", f".target {TARGET}", ".address_size 64"]
    mod += [entry(i, r["stmt"]) for i, r in enumerate(cases)]
    (out / "imm.ptx").write_text("\n".join(mod) + "\n")
    subprocess.run([ptxas, f"-arch={TARGET}", str(out / "imm.ptx"), "-o", str(out / "imm.cubin")],
                   check=True, capture_output=True)
    manifest = {"cases": [{"stmt": r["stmt"], "form": r["form"], "role": r["role"],
                           "context": r["context"], "literal": r["literal"]} for r in cases],
                "refused": refused}
    (out / "manifest.json").write_text(json.dumps(manifest))
    tool = disasm or shutil.which("cuobjdump") or shutil.which("nvdisasm")
    if tool:
        args = [tool, "-sass", str(out / "imm.cubin")] if "cuobjdump" in tool else \
            [tool, "-c", str(out / "imm.cubin")]
        (out / "imm.sass").write_text(subprocess.run(args, capture_output=True, text=True).stdout)
    return manifest


def _inputs(n_cases: int, seed: int = SEED) -> np.ndarray:
    """Register input slots (cases, WARPS, 32, SLOTS) u64: random bits under a mask that
    keeps most f16/f32/f64 views finite, so that D depends on the immediates."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 63, size=(n_cases, WARPS, 32, SLOTS), dtype=np.uint64) \
        & np.uint64(0x3C3F3C3F3E3F3C3F)


def gpu_run(outdir, seed: int = SEED) -> dict:
    import cupy as cp

    out = Path(outdir)
    manifest = json.loads((out / "manifest.json").read_text())
    n = len(manifest["cases"])
    ins = _inputs(n, seed)
    mod = cp.RawModule(path=str(out / "imm.cubin"))
    d = np.empty((n, WARPS, 32, SLOTS), np.uint64)
    for i in range(n):
        fn = mod.get_function(f"k{i}")
        din = cp.asarray(ins[i])
        dout = cp.full((WARPS, 32, SLOTS), np.uint64(0xA5A5A5A5A5A5A5A5), dtype=cp.uint64)
        fn((WARPS,), (32,), (din, dout))
        d[i] = cp.asnumpy(dout)
    cp.cuda.Device().synchronize()
    return {"inputs": ins, "d": d, "seed": seed}


def simulate(stmt: str, slots: np.ndarray, how: str = "execute") -> np.ndarray:
    """D words (WARPS, 32, SLOTS) u64 of ``stmt`` in warpsim on input slots (WARPS, 32, SLOTS)."""
    from warpsim.kernel.warp import Warp

    dregs, src = _vector_regs(stmt)
    w = Warp("sm_90", batch=slots.shape[0])
    width = {r: (64 if _decl_type(r) in ("b64", "f64") else 32) for r in src + dregs}
    for k, r in enumerate(src):
        v = slots[..., k] if width[r] == 64 else (slots[..., k] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        w.write(r, v)
    w.write(METADATA, METADATA_WORD)
    if how == "execute":
        w.execute(stmt + ";")
    else:
        w.run("\n".join(DECLS[:4]) + "\n" + stmt + ";")
    out = np.zeros(slots.shape, np.uint64)
    for k, r in enumerate(dregs):
        out[..., k] = w.read(r).astype(np.uint64)
    return out


def compare(outdir, res: dict) -> dict:
    manifest = json.loads((Path(outdir) / "manifest.json").read_text())
    report = {"cases": 0, "words": 0, "mismatches": {}, "errors": {}}
    for i, c in enumerate(manifest["cases"]):
        dregs = _vector_regs(c["stmt"])[0]
        nd = len(dregs)
        gpu = res["d"][i][..., :nd]
        if _decl_type(dregs[0]) in ("b32", "f32"):  # a 32-bit store leaves the high poison
            gpu = gpu & np.uint64(0xFFFFFFFF)
        for how in ("execute", "run"):
            try:
                sim = simulate(c["stmt"], res["inputs"][i], how)[..., :nd]
            except Exception as e:  # noqa: BLE001 - reported per case
                report["errors"][f"{how}: {c['stmt']}"] = f"{type(e).__name__}: {e}"
                continue
            bad = int(np.count_nonzero(sim != gpu))
            report["words"] += gpu.size
            if bad:
                report["mismatches"][f"{how}: {c['stmt']}"] = bad
        report["cases"] += 1
    return report


# --------------------------------------------------------------------------------------------
# SASS probes: the constant words ptxas materialises, per target (no GPU needed)
# --------------------------------------------------------------------------------------------

#: (target, instruction, {operand: vector items}); the other operands are registers.
SASS_PROBES = (
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
     {"c": ["%f60", "1.1", "0f3F800001", "-2.5"]}),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
     {"a": ["%r20", "1.00000005960464477539062500000001", "123.456", "0.3"]}),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
     {"a": ["%r20", "0x1FFFFFFFF", "-3", "%r23"]}),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", {"c": ["%r60", "0d3FF199999999999A"]}),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", {"b": ["0.3", "0f3F800001"]}),
    ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
     {"c": ["123.456", "0f3F800003", "0.3", "0f3F800001"]}),
    ("sm_90", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", {"c": ["%fd60", "0f3F800001"]}),
    ("sm_90", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", {"c": ["%fd60", "1.1"]}),
    ("sm_90", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", {"c": ["1", "-2"]}),
    ("sm_90", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", {"a": ["0d3FF8000000000001"]}),
    *((t, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
       {"c": ["%f60", "1.1", "0f3F800001", "%f63"]}) for t in ("sm_89", "sm_90", "sm_100a", "sm_120")),
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32",
     {"c": ["%r60", "0f3F800001", "1.1", "%r63"]}),
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32", {"c": ["%r60", "7", "-0x80000001", "%r63"]}),
    *((t, "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", {"c": ["%r60", "0f3F800001", "1.1", "%r63"]})
      for t in ("sm_80", "sm_90")),
    *((t, "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc",
       {"c": ["%r60", "0f3F800001", "1.1", "%r63"]}) for t in ("sm_90", "sm_100a")),
    *((t, "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc",
       {"c": ["%r60", "0f3F800001", "1.1", "%r63"]}) for t in ("sm_89", "sm_90")),
)

_CONST_RES = (re.compile(r"\b(?:MOV|UMOV|IMAD\.MOV(?:\.U32)?|IADD3|LOP3\.LUT)\b[^;]*?(-?0x[0-9a-fA-F]+)\s*(?:,|;)"),
              re.compile(r"\bFADD\b[^;]*,\s*(-?[0-9.]+(?:e[-+]?[0-9]+)?)\s*;"))


def sass_constants(sass: str) -> set[int]:
    """32-bit words appearing as immediates in SASS text (MOV/IMAD.MOV/IADD3 hex, FADD floats)."""
    out: set[int] = set()
    for ln in sass.splitlines():
        for rx in _CONST_RES:
            for m in rx.finditer(ln):
                v = m.group(1)
                if "0x" in v:
                    out.add(int(v, 16) & 0xFFFFFFFF)
                else:
                    out.add(int(np.float32(float(v)).view(np.uint32)))
    return out


def probe_sass(ptxas: str = "ptxas", disasm: str = "nvdisasm") -> list[dict]:
    """For each :data:`SASS_PROBES` entry: its statement, the SASS constants of a kernel running
    it, and per literal the 32-bit halves warpsim encodes (checked against the constants by
    tests/test_vector_immediates.py)."""
    import tempfile

    from warpsim.tensorcore.decode import decode

    rows = []
    for target, form, over in SASS_PROBES:
        instr = decode(form, target)
        vecs = _vectors(instr)
        vecs.update(over)
        stmt = statement(form, vecs)
        with tempfile.TemporaryDirectory() as tmp:
            mod = "\n".join([".version 9.0", f".target {target}", ".address_size 64", entry(0, stmt)])
            Path(tmp, "p.ptx").write_text(mod + "\n")
            subprocess.run([ptxas, f"-arch={target}", f"{tmp}/p.ptx", "-o", f"{tmp}/p.cubin"],
                           check=True, capture_output=True)
            args = [disasm, "-sass", f"{tmp}/p.cubin"] if "cuobjdump" in disasm else \
                [disasm, "-c", f"{tmp}/p.cubin"]
            sass = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        rows.append({"target": target, "stmt": stmt, "constants": sorted(sass_constants(sass))})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m warpsim.validation.immediates")
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("label"); q.add_argument("out"); q.add_argument("--ptxas", default="ptxas")
    q = sub.add_parser("build"); q.add_argument("labels"); q.add_argument("dir")
    q.add_argument("--ptxas", default="ptxas"); q.add_argument("--disasm")
    q = sub.add_parser("run"); q.add_argument("dir"); q.add_argument("out")
    q = sub.add_parser("compare"); q.add_argument("dir"); q.add_argument("res")
    q = sub.add_parser("sass-probes"); q.add_argument("out"); q.add_argument("--ptxas", default="ptxas")
    q.add_argument("--disasm", default=shutil.which("nvdisasm") or "cuobjdump")
    a = p.parse_args(argv)
    if a.cmd == "label":
        Path(a.out).write_text(json.dumps(label(a.ptxas)))
    elif a.cmd == "sass-probes":
        rows = probe_sass(a.ptxas, a.disasm)
        Path(a.out).write_text(json.dumps(rows, indent=1))
        print(f"{len(rows)} probes -> {a.out}")
    elif a.cmd == "build":
        m = build(a.dir, json.loads(Path(a.labels).read_text()), a.ptxas, a.disasm)
        print(f"{len(m['cases'])} kernels in {a.dir}/imm.cubin")
    elif a.cmd == "run":
        res = gpu_run(a.dir)
        np.savez_compressed(a.out, d=res["d"], seed=res["seed"])  # inputs: _inputs(seed)
        print(f"saved {res['d'].shape} D slots to {a.out}")
    else:
        res = dict(np.load(a.res))
        res["inputs"] = _inputs(res["d"].shape[0], int(res["seed"]))
        rep = compare(a.dir, res)
        print(json.dumps({k: (v if k in ("cases", "words") else len(v)) for k, v in rep.items()}))
        for k, v in list(rep["mismatches"].items())[:20] + list(rep["errors"].items())[:20]:
            print(v, k)
        return 1 if rep["mismatches"] else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
