"""Validation of sparse ``mma.sp`` on a GPU: kernels, inputs, collection and check.

One kernel per (instruction, sparsity selector); the metadata register ``e`` is one word per
lane (array ``[warp][lane]``), the selector is an immediate in the instruction text.

Input distributions (A, B, C as for dense mma, A being the compressed matrix):

* the dense distributions of the A type, with every lane's metadata word made of random
  *defined* nibbles (so whatever lanes the hardware reads, the pattern is defined);
* ``garbage``: as ``normal`` (``uniform-bits`` for integers), but the lanes the selector does not
  choose (per :func:`warpsim.tensorcore.sparse.metadata_layout`) hold random 32-bit words: checks they are
  ignored;
* ``probe``: A has one 1 per row (compressed column ``w % (K/2)`` in warp w), B holds the bits
  of k (``B[k][n] = (k >> n) & 1`` for n < 7, ``B[k][7] = 1``), C = 0: D[m][0..6] spell the
  logical column the hardware placed that element at, which settles the metadata map.

Metadata words are saved beside D (``<key>_e``), so a check never depends on regenerating them.
``ub`` runs record undefined metadata (unsorted indices under ``::ordered_metadata``, equal
indices under ``.sp``) for the record only.
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from warpsim.tensorcore import sparse as sp
from warpsim.facts.isa import Instruction
from warpsim.tensorcore.packing import pack_bits

from warpsim.validation import inputs as _inputs
from warpsim.validation.compare import compare_words, finish_check, row_note
from warpsim.validation.kernels import (
    THREADS_PER_BLOCK, _load, _word_type, constraint, kernel_name, nvcc_arch)

ONE = {"f16": 0x3C00, "bf16": 0x3F80, "tf32": 0x3F800000, "e4m3": 0x38, "e5m2": 0x3C,
       "s8": 1, "u8": 1, "s4": 1, "u4": 1}
PROBE_REPEATS = 32


def sparse_kernel_name(ins: Instruction, selector: int) -> str:
    return f"{kernel_name(ins)}_f{selector}"


def sparse_kernel_source(ins: Instruction, selector: int) -> str:
    regs = ins.regs
    name = sparse_kernel_name(ins, selector)
    lines = [
        f"// {ins.text} selector {selector}",
        f'extern "C" __global__ void __launch_bounds__({THREADS_PER_BLOCK}) {name}(',
        f"    const {_word_type(ins, 'a')}* __restrict__ A,",
        f"    const {_word_type(ins, 'b')}* __restrict__ B,",
        f"    const {_word_type(ins, 'c')}* __restrict__ C,",
        "    const unsigned int* __restrict__ E,",
        f"    {_word_type(ins, 'd')}* __restrict__ D, int n_warps)",
        "{",
        "    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        "    if ((gid >> 5) >= n_warps) return;  // warp-uniform",
    ]
    for op in "abcd":
        lines.append(f"    const long long base_{op} = gid * {regs[op]};")
    ins_exprs, n = [], 0
    groups = []
    for op in "dabc":
        groups.append("{" + ", ".join(f"%{n + i}" for i in range(regs[op])) + "}")
        n += regs[op]
    for op in "abc":
        for i in range(regs[op]):
            decl, expr = _load(ins, op, i)
            lines.append("    " + decl)
            ins_exprs.append(expr)
    lines.append("    unsigned int e0 = E[gid];")
    ins_exprs.append('"r"(e0)')
    dc = constraint(ins, "d")
    dt = {"f": "float", "r": "unsigned int"}[dc]
    lines.append(f"    {dt} " + ", ".join(f"d{i}" for i in range(regs["d"])) + ";")
    asm = f"{ins.text} " + ", ".join(groups) + f", %{n}, {selector};"
    lines.append(f'    asm volatile("{asm}"')
    lines.append("        : " + ", ".join(f'"={dc}"(d{i})' for i in range(regs["d"])))
    lines.append("        : " + ", ".join(ins_exprs) + ");")
    for i in range(regs["d"]):
        v = f"__float_as_uint(d{i})" if dc == "f" else f"d{i}"
        lines.append(f"    D[base_d + {i}] = {v};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def runs(arch: str, only: list[str] | None = None) -> list[tuple[Instruction, int]]:
    """(instruction, selector) for every sparse form of ``arch`` and every defined selector."""
    out = []
    for ins in sp.iter_sparse_instructions(arch):
        if only and not any(s in ins.text for s in only):
            continue
        out += [(ins, f) for f in sp.legal_selectors(ins)]
    return out


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def dists_for(ins: Instruction) -> tuple[str, ...]:
    return _inputs.distributions_for(ins) + ("garbage", "probe")


def metadata_words(ins: Instruction, selector: int, dist: str, n_warps: int, seed: int,
                   choices: tuple[int, ...] | None = None) -> np.ndarray:
    """(n, 32) uint32 metadata: random nibbles from ``choices`` (default: the defined ones)."""
    key = _inputs.stable_key("warpsim-sparse-meta", seed, ins.text, selector, dist)
    rng = _inputs.CounterRNG(key, (n_warps, 32, 8))
    table = np.array(choices or sp.valid_nibbles(ins), dtype=np.uint64)
    nib = table[rng.below(0, len(table)).astype(np.intp)]
    words = np.bitwise_or.reduce(nib << (np.uint64(4) * np.arange(8, dtype=np.uint64)), axis=-1)
    words = words.astype(np.uint32)
    if dist == "garbage":
        used = (sp.metadata_layout(ins, selector)[..., 0] >= 0).any(-1)  # (32,)
        junk = (rng.draw(1)[..., 0] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        words = np.where(used, words, junk)
    return words


def probe_inputs(ins: Instruction, n_warps: int) -> dict[str, np.ndarray]:
    m, n, k = ins.shape
    kc = k // 2
    one = ONE[ins.atype]
    a = np.zeros((n_warps, m, kc), dtype=np.uint64)
    a[np.arange(n_warps), :, np.arange(n_warps) % kc] = one
    kk = np.arange(k)[:, None]
    nn = np.arange(n)[None, :]
    bbits = np.where(nn < 7, (kk >> np.minimum(nn, 6)) & 1, 1)
    b = np.broadcast_to(np.where(bbits == 1, ONE[ins.btype], 0).astype(np.uint64), (n_warps, k, n))
    c = np.zeros((n_warps, m, n), dtype=np.uint64)
    return {op: pack_bits(ins, op, x) for op, x in zip("abc", (a, b, c))}


def make_inputs(ins: Instruction, selector: int, dist: str, n_warps: int, seed: int) -> dict:
    """Register words a, b, c (as the dense generator) and metadata e for one run."""
    if dist == "probe":
        x = probe_inputs(ins, n_warps)
    else:
        base = ("uniform-bits" if not _inputs.is_float_type(ins.atype) else "normal") \
            if dist == "garbage" else dist
        x = _inputs.make_inputs(ins, base, n_warps, seed)
    x["e"] = metadata_words(ins, selector, dist, n_warps, seed)
    return x


def warps_for(ins: Instruction, dist: str, warps: int | None) -> int:
    if dist == "probe":
        return (ins.k // 2) * PROBE_REPEATS
    if warps:
        return warps
    return 128 if _inputs.is_float_type(ins.atype) else 16


# --------------------------------------------------------------------------------------------
# Build and run
# --------------------------------------------------------------------------------------------


def build(items, work: Path, arch: str, nvcc="nvcc", ptxas="ptxas") -> Path:
    work.mkdir(parents=True, exist_ok=True)
    cu, ptx, cubin = work / "sparse.cu", work / "sparse.ptx", work / "sparse.cubin"
    cu.write_text("\n".join(sparse_kernel_source(i, f) for i, f in items))
    target = nvcc_arch(arch)
    r = subprocess.run([nvcc, "-ptx", f"-arch={target}", "-O3", "-o", str(ptx), str(cu)],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("nvcc -ptx failed:\n" + r.stderr[-3000:])
    r = subprocess.run([ptxas, f"-arch={target}", "-O3", "-o", str(cubin), str(ptx)],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("ptxas failed:\n" + r.stderr[-3000:])
    return cubin


def _run_gpu(module, ins: Instruction, selector: int, x: dict) -> np.ndarray:
    import cupy as cp

    fn = module.get_function(sparse_kernel_name(ins, selector))
    n = x["a"].shape[0]
    dev = [cp.asarray(np.ascontiguousarray(x[op])) for op in "abce"]
    blocks = (n * 32 + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    res = []
    for poison in (0xA5A5A5A5, 0x5A5A5A5A):
        d = cp.full((n, 32, ins.regs["d"]), np.uint32(poison), dtype=np.uint32)
        fn((blocks,), (THREADS_PER_BLOCK,), (*dev, d, np.int32(n)))
        cp.cuda.Device().synchronize()
        res.append(cp.asnumpy(d))
    if not np.array_equal(res[0], res[1]):
        raise RuntimeError(f"{ins.text} f={selector}: D differs between two runs")
    return res[0]


def collect(arch: str, out_dir, *, warps: int | None = None, only=None, seed: int = 1,
            run_gpu: bool = True, nvcc="nvcc", ptxas="ptxas", cuobjdump="cuobjdump",
            log=print, runner=None) -> dict:
    """Build, dump SASS, run every (instruction, selector, distribution); save D and metadata."""
    from warpsim.validation.kernels import dump_sass, parse_sass

    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = runs(arch, only)
    sass_text = ""
    if runner is None:  # ``runner(ins, selector, inputs) -> D words`` replaces the GPU in tests
        build_dir = Path(tempfile.mkdtemp(prefix="warpsim-sparse-"))
        cubin = build(items, build_dir, arch, nvcc, ptxas)
        log(f"built {len(items)} sparse kernels in {time.time() - t0:.1f}s")
        try:
            sass_text = dump_sass(cubin, cuobjdump)
        except FileNotFoundError:
            if run_gpu:
                raise
    sass = parse_sass(sass_text)
    entries = []
    for idx, (ins, f) in enumerate(items):
        for dist in dists_for(ins):
            entries.append({"index": idx, "instr": ins.text, "form": ins.form, "selector": f,
                            "kernel": sparse_kernel_name(ins, f), "dist": dist, "seed": seed,
                            "n_warps": warps_for(ins, dist, warps), "file": f"d_{ins.form}.npz",
                            "key": f"{idx:03d}_{dist}"})
    manifest = {"kind": "sparse", "generator_version": _inputs.GENERATOR_VERSION, "arch": arch,
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "layout": "a/b/c/d [warp][lane][register]; e [warp][lane]; D raw bits",
                "sass": {sparse_kernel_name(i, f): sass.get(sparse_kernel_name(i, f), [])
                         for i, f in items},
                "entries": entries}
    arrays = {}
    if run_gpu:
        if runner is None:
            import cupy as cp

            from warpsim.validation.gpu import device_info

            manifest["device"] = device_info()
            module = cp.RawModule(path=str(cubin))
            runner = lambda i, f, x: _run_gpu(module, i, f, x)  # noqa: E731
        t1 = time.time()
        by_idx = dict(enumerate(items))
        for e in entries:
            ins, f = by_idx[e["index"]]
            x = make_inputs(ins, f, e["dist"], e["n_warps"], seed)
            arrays.setdefault(e["file"], {})[e["key"]] = runner(ins, f, x)
            arrays[e["file"]][e["key"] + "_e"] = x["e"]
        log(f"ran {len(entries)} runs in {time.time() - t1:.1f}s")
        for fname, arrs in arrays.items():
            np.savez_compressed(out / fname, **arrs)
    (out / "manifest_sparse.json").write_text(json.dumps(manifest, indent=1))
    log(f"sparse collect done in {time.time() - t0:.1f}s -> {out}")
    return manifest


def collect_ub(arch: str, out_dir, *, seed: int = 1, warps: int = 8, log=print, runner=None) -> dict:
    """Undefined metadata, for the record: unsorted (ordered) / equal-index (.sp) nibbles.

    Run in its own process: nothing else is lost if the GPU faults.
    """
    out = Path(out_dir)
    items = [(i, f) for i, f in runs(arch) if f == 0]
    if runner is None:
        import cupy as cp

        cubin = build(items, Path(tempfile.mkdtemp(prefix="warpsim-sparse-ub-")), arch)
        module = cp.RawModule(path=str(cubin))
        runner = lambda i, f, x: _run_gpu(module, i, f, x)  # noqa: E731
    arrays, rows = {}, []
    for idx, (ins, f) in enumerate(items):
        if ins.atype == "tf32":
            choices = tuple(v for v in range(16) if v not in sp.TF32_NIBBLES)
        elif ins.sparse == "sp":
            choices = (0x0, 0x5, 0xA, 0xF)
        else:
            choices = (0x1, 0x2, 0x3, 0x6, 0x7, 0xB)
        x = _inputs.make_inputs(ins, "uniform-bits" if not _inputs.is_float_type(ins.atype)
                                else "normal", warps, seed)
        x["e"] = metadata_words(ins, f, "ub", warps, seed, choices)
        key = f"{idx:03d}_ub"
        arrays[key] = runner(ins, f, x)
        arrays[key + "_e"] = x["e"]
        rows.append({"instr": ins.text, "selector": f, "key": key, "n_warps": warps,
                     "choices": list(choices)})
    meta = json.dumps({"arch": arch, "seed": seed, "rows": rows})
    np.savez_compressed(out / "ub_sparse.npz", manifest=np.array(meta), **arrays)
    log(f"ub runs: {len(rows)}")
    return {"rows": rows}


# --------------------------------------------------------------------------------------------
# Check
# --------------------------------------------------------------------------------------------


def check(data_dir, report_dir=None, only=None, log=print) -> dict:
    """Compare saved sparse D words with ``warpsim.mma``; write report_sparse.md/json."""
    from warpsim.tensorcore.execute import mma

    data = Path(data_dir)
    man = json.loads((data / "manifest_sparse.json").read_text())
    arch = man["arch"]
    table = {(i.text, f): (i, f) for i, f in runs(arch)}
    files: dict = {}
    rows = []
    t0 = time.time()
    for e in man["entries"]:
        if only and not any(s in e["instr"] for s in only):
            continue
        ins, f = table[(e["instr"], e["selector"])]
        x = make_inputs(ins, f, e["dist"], e["n_warps"], e["seed"])
        if e["file"] not in files:
            files[e["file"]] = np.load(data / e["file"])
        npz = files[e["file"]]
        x["e"] = npz[e["key"] + "_e"]
        hw = npz[e["key"]]
        row = {"instr": e["instr"], "selector": f, "dist": e["dist"]}
        try:
            sim = mma(ins, x["a"], x["b"], x["c"], metadata=x["e"], selector=f, arch=arch)
            row.update(compare_words(ins, hw, sim, x))
        except Exception as exc:
            row.update(words=int(hw.size), mismatches=int(hw.size), first=None,
                       error=f"{type(exc).__name__}: {exc}")
        rows.append(row)
    return finish_check(rows, {"arch": arch, "device": (man.get("device") or {}).get("gpu")}, {},
                        t0, report_dir, "report_sparse", render_markdown, log, "sparse check")


def render_markdown(rep: dict) -> str:
    s = rep["summary"]
    out = [f"# warpsim sparse validation report ({s['arch']}, {s.get('device') or 'unknown GPU'})",
           "", f"{s['runs_exact']} of {s['runs']} (instruction, selector, distribution) runs match "
           f"bit for bit; {s['mismatches']} of {s['words']} D words differ.", "",
           "| instruction | selector | dist | words | mismatches | note |", "|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        out.append(f"| `{r['instr']}` | {r['selector']} | {r['dist']} | {r['words']} | "
                   f"{r['mismatches']} | {row_note(r)} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Probe analysis: the metadata map as the hardware shows it
# --------------------------------------------------------------------------------------------


def analyse_probe(ins: Instruction, selector: int, d_words: np.ndarray, e_words: np.ndarray) -> dict:
    """Read a ``probe`` run: which (lane, nibble) places each compressed A element, and where.

    Returns ``{"hits_ok": bool, "map": {(row, col): (lane, nibble)}, "ambiguous": [...],
    "model_agrees": bool, "disagreements": [...]}``; a candidate (lane, nibble) explains an
    element when equal nibble values always give the same logical column.
    """
    from warpsim.tensorcore.packing import unpack

    m, n, k = ins.shape
    kc = k // 2
    d = unpack(ins, "d", d_words)  # (W, M, N) values
    hit = d != 0
    pos = (hit[..., :7] * (1 << np.arange(7))).sum(-1)  # (W, M)
    hits_ok = bool((d[..., 7] == 1).all())
    nib = ((e_words[..., None].astype(np.int64) >> (4 * np.arange(8))) & 0xF).reshape(-1, 256)
    w_all = np.arange(d.shape[0])
    found, ambiguous = {}, []
    for c in range(kc):
        ws = w_all[w_all % kc == c]
        sub = nib[ws]  # (R, 256)
        for row in range(m):
            p = pos[ws, row]
            same_nib = sub[:, None, :] == sub[None, :, :]  # (R, R, 256)
            diff_p = (p[:, None] != p[None, :])[..., None]
            ok = ~(same_nib & diff_p).any(axis=(0, 1))
            cands = np.nonzero(ok)[0]
            if len(cands) == 1:
                found[(row, c)] = (int(cands[0]) // 8, int(cands[0]) % 8)
            else:
                ambiguous.append((row, c, [(int(x) // 8, int(x) % 8) for x in cands[:6]]))
    # compare with warpsim's model (metadata layout + nibble decoding)
    disagree = []
    try:
        cols = sp.pattern(ins, e_words, selector, check=False)  # (W, M, kc)
        model_pos = cols[w_all, :, w_all % kc]  # (W, M)
        bad = np.argwhere(model_pos != pos)
        disagree = [tuple(int(v) for v in b) for b in bad[:10]]
        n_bad = int(len(bad))
    except Exception as exc:  # pragma: no cover - diagnostic path
        n_bad = -1
        disagree = [repr(exc)]
    return {"hits_ok": hits_ok, "map": found, "ambiguous": ambiguous,
            "model_agrees": n_bad == 0, "model_mismatches": n_bad, "disagreements": disagree}


def subset(data_dir, out_dir, n_warps: int = 2) -> dict:
    """A small fixture: the first ``n_warps`` warps of every run (``4 * n_warps`` for ``probe``
    runs), metadata included, in one ``d_sparse.npz``; SASS dropped."""
    src, dst = Path(data_dir), Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    man = json.loads((src / "manifest_sparse.json").read_text())
    arrays, entries, cache = {}, [], {}
    for e in man["entries"]:
        if e["file"] not in cache:
            cache[e["file"]] = np.load(src / e["file"])
        f = cache[e["file"]]
        w = min(e["n_warps"], n_warps if e["dist"] != "probe" else 4 * n_warps)
        for key in (e["key"], e["key"] + "_e"):
            arrays[key] = np.ascontiguousarray(f[key][:w])
        entries.append({**e, "n_warps": w, "file": "d_sparse.npz"})
    np.savez_compressed(dst / "d_sparse.npz", **arrays)
    small = {k: v for k, v in man.items() if k not in ("sass", "entries")}
    small.update(entries=entries, subset_of=str(src))
    (dst / "manifest_sparse.json").write_text(json.dumps(small, separators=(",", ":")))
    return small
