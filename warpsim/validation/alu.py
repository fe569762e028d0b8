"""Hardware validation of the ALU families (integer, floating point, cvt, compare, approx).

One PTX ``.entry`` per instruction form (:mod:`warpsim.validation.alu_cases`): thread ``i``
loads its source words (one little-endian u64 per operand, narrowed to the register width),
runs the one instruction, and stores each destination widened to a u64.  All entries go into
one PTX file; ``ptxas`` prunes the forms it rejects for the target, and the rest build into
ONE cubin.

Steps (``python -m warpsim.validation.alu``):

* ``build DIR``: write ``alu.ptx``, ``alu.cubin`` and ``manifest.json`` (accepted forms, rejected
  forms with ptxas's message) -- no GPU needed.
* ``run DIR OUT``: on the GPU (CuPy), regenerate every case's inputs from the seed, launch, and
  write ``OUT/alu_words.npz`` (inputs and outputs per case) and ``OUT/device.json``.
* ``compare DIR WORDS``: evaluate warpsim's semantics on the same inputs, word for word; print and
  optionally write a JSON report (exact families: mismatch counts; approximate ones: ulp
  distances).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

from warpsim.validation.alu_cases import WIDTH, Case, candidate_cases, inputs, load_cases

N_WORDS = 4096
SEED = 11

_HEADER = """.version {version}
.target {arch}
.address_size 64
"""


def _reg(fmt: str, role: str, k: int) -> str:
    w = WIDTH[fmt]
    base = {1: "%p", 8: "%b", 16: "%h", 32: "%r", 64: "%rd"}[w]
    off = {"src": 0, "dst": 8}[role]
    return f"{base}{off + k}"


#: How a register of each width is loaded from, and stored as, the 64-bit word the harness moves.
_FROM_U64 = {1: "setp.ne.u64 {r}, {x}, 0", 8: "cvt.u8.u64 {r}, {x}", 16: "cvt.u16.u64 {r}, {x}",
             32: "cvt.u32.u64 {r}, {x}", 64: "mov.b64 {r}, {x}"}
_TO_U64 = {1: "selp.u64 {x}, 1, 0, {r}", 8: "cvt.u64.u8 {x}, {r}", 16: "cvt.u64.u16 {x}, {r}",
           32: "cvt.u64.u32 {x}, {r}", 64: "mov.b64 {x}, {r}"}


def entry_source(case: Case) -> str:
    """The PTX ``.entry`` running one case."""
    ns, nd = len(case.srcs), len(case.dsts)
    L = [f".visible .entry {case.name}(.param .u64 pin, .param .u64 pout, .param .u32 pn)", "{",
         "  .reg .b8 %b<16>; .reg .b16 %h<16>; .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .b64 %x<24>;"
         " .reg .pred %p<16>; .reg .b32 %i<8>;",
         "  ld.param.u64 %x0, [pin]; ld.param.u64 %x1, [pout]; ld.param.u32 %i0, [pn];",
         "  mov.u32 %i1, %tid.x; mov.u32 %i2, %ctaid.x; mov.u32 %i3, %ntid.x;",
         "  mad.lo.u32 %i4, %i2, %i3, %i1;",
         "  setp.ge.u32 %p15, %i4, %i0; @%p15 bra DONE;",
         "  cvta.to.global.u64 %x0, %x0; cvta.to.global.u64 %x1, %x1;",
         f"  mul.wide.u32 %x2, %i4, {8 * ns}; add.u64 %x3, %x0, %x2;",
         f"  mul.wide.u32 %x4, %i4, {8 * nd}; add.u64 %x5, %x1, %x4;"]
    for k, f in enumerate(case.srcs):
        L.append(f"  ld.global.u64 %x{8 + k}, [%x3+{8 * k}];")
        L.append("  " + _FROM_U64[WIDTH[f]].format(r=_reg(f, "src", k), x=f"%x{8 + k}") + ";")
    dregs = [_reg(f, "dst", j) for j, f in enumerate(case.dsts)]
    dtext = "|".join(dregs) if case.pq else ", ".join(dregs)
    srcs = [_reg(f, "src", k) for k, f in enumerate(case.srcs)]
    L.append(f"  {case.text} {', '.join([dtext] + srcs)};")
    for j, f in enumerate(case.dsts):
        L.append("  " + _TO_U64[WIDTH[f]].format(r=dregs[j], x=f"%x{16 + j}") + ";")
        L.append(f"  st.global.u64 [%x5+{8 * j}], %x{16 + j};")
    L += ["DONE:", "  ret;", "}"]
    return "\n".join(L) + "\n"


def ptx_module(cases, arch="sm_90", version="8.7") -> tuple[str, dict[int, Case]]:
    """PTX text of all cases and a map from each instruction's line number to its case."""
    text = _HEADER.format(version=version, arch=arch)
    lines: dict[int, Case] = {}
    for c in cases:
        src = entry_source(c)
        first = text.count("\n") + 1
        for i, ln in enumerate(src.split("\n")):
            lines[first + i] = c
        text += src
    return text, lines


_ERR = re.compile(r"line (\d+); (error|fatal)\s*:\s*(.*)")


def prune(cases, arch="sm_90", version="8.7", ptxas="ptxas", rounds=8):
    """(accepted cases, {rejected text: ptxas message}) by compiling and dropping failures."""
    rejected: dict[str, str] = {}
    todo = list(cases)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.ptx"
        for _ in range(rounds):
            text, lines = ptx_module(todo, arch, version)
            p.write_text(text)
            r = subprocess.run([ptxas, f"-arch={arch}", str(p), "-o", str(Path(d) / "m.cubin")],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return todo, rejected
            bad = {}
            for m in _ERR.finditer(r.stderr):
                c = lines.get(int(m.group(1)))
                if c is not None and c.text not in bad:
                    bad[c.text] = m.group(3).strip()
            if not bad:
                raise RuntimeError(f"ptxas failed without a line number:\n{r.stderr[-2000:]}")
            rejected.update(bad)
            todo = [c for c in todo if c.text not in bad]
    raise RuntimeError("ptxas still failing after pruning rounds")


def build(outdir, arch="sm_90", ptxas="ptxas") -> dict:
    """Prune the candidate forms, build the cubin, write the manifest; returns the manifest."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    ok, rejected = prune(candidate_cases(), arch=arch, ptxas=ptxas)
    text, _ = ptx_module(ok, arch)
    (out / "alu.ptx").write_text(text)
    subprocess.run([ptxas, f"-arch={arch}", str(out / "alu.ptx"), "-o", str(out / "alu.cubin")],
                   check=True)
    man = {"arch": arch, "n_words": N_WORDS, "seed": SEED,
           "cases": [{"text": c.text, "dsts": list(c.dsts), "srcs": list(c.srcs), "pq": c.pq}
                     for c in ok],
           "rejected": rejected}
    (out / "manifest.json").write_text(json.dumps(man, indent=1))
    return man


def _group(c: Case) -> str:
    op = c.text.split(".")[0]
    if op == "cvt":
        return "cvt"
    if op in ("setp", "set", "selp", "slct"):
        return "compare"
    return "alu"


def _narrow(c: Case):
    """The narrowest dtype holding every destination word of a case."""
    w = max(WIDTH[f] for f in c.dsts)
    return {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[w]


def run(builddir, outdir, seed=None, n_words=None) -> None:
    """Run every case of a build on the GPU; writes ``alu_*.npz`` (destination words per form,
    and a CRC of its source words) and ``device.json``.  ``seed``/``n_words`` override the
    manifest's (a fresh seed is a hold-out check of rules fitted on an earlier run)."""
    import cupy as cp

    from warpsim.validation.gpu import device_info

    b, out = Path(builddir), Path(outdir)
    man = json.loads((b / "manifest.json").read_text())
    man["seed"] = man["seed"] if seed is None else seed
    man["n_words"] = man["n_words"] if n_words is None else n_words
    mod = cp.RawModule(path=str(b / "alu.cubin"))
    groups: dict[str, dict] = {}
    sizes: dict[str, int] = {}
    parts: dict[str, int] = {}
    for c in load_cases(man):
        x = inputs(c, man["n_words"], man["seed"])
        n = len(x)
        fn = mod.get_function(c.name)
        din = cp.asarray(np.ascontiguousarray(x))
        dout = cp.full((n, len(c.dsts)), np.uint64(0xA5A5A5A5A5A5A5A5), dtype=cp.uint64)
        fn(((n + 127) // 128,), (128,), (din, dout, np.uint32(n)))
        words = cp.asnumpy(dout)
        key = _group(c)
        size = sizes.get(key, 0) + words.size * np.dtype(_narrow(c)).itemsize
        if size > 15_000_000:  # keep every returned file well under the 16 MiB limit
            parts[key] = parts.get(key, 0) + 1
            size = words.size * np.dtype(_narrow(c)).itemsize
        sizes[key] = size
        g = groups.setdefault(f"{key}{parts.get(key, 0)}", {})
        g[c.text] = words.astype(_narrow(c))
        g[c.text + "|crc"] = np.uint32(zlib.crc32(x.tobytes()))
        g["|seed"], g["|n_words"] = np.int64(man["seed"]), np.int64(man["n_words"])
    cp.cuda.Device().synchronize()
    out.mkdir(parents=True, exist_ok=True)
    for name, arrays in groups.items():
        np.savez_compressed(out / f"alu_{name}.npz", **arrays)
    (out / "device.json").write_text(json.dumps(device_info(), indent=1, default=str))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m warpsim.validation.alu", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build")
    p.add_argument("dir")
    p.add_argument("--arch", default="sm_90")
    p = sub.add_parser("run")
    p.add_argument("dir")
    p.add_argument("out")
    p.add_argument("--seed", type=int)
    p.add_argument("--n-words", type=int)
    p = sub.add_parser("compare")
    p.add_argument("dir")
    p.add_argument("words")
    p.add_argument("--json")
    p.add_argument("--show", type=int, default=3)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        man = build(a.dir, a.arch)
        print(f"{len(man['cases'])} forms built into {a.dir}/alu.cubin; "
              f"{len(man['rejected'])} rejected by ptxas")
        return 0
    if a.cmd == "run":
        run(a.dir, a.out, a.seed, a.n_words)
        return 0
    from warpsim.validation.alu_compare import compare_main

    return compare_main(a.dir, a.words, a.json, a.show)


if __name__ == "__main__":
    sys.exit(main())
