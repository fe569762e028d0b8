"""``collect``: build every kernel, dump its SASS, run it on the GPU and save the D words.

Output folder (flat, so that it fits a transfer of a few files):

* ``manifest.json``: instruction text, distribution, seed, warps, data file and key of every
  run; GPU name, driver and CUDA versions; instructions ptxas rejected; per-kernel SASS.
* ``sass_<arch>.txt``: the full ``cuobjdump -sass`` listing of the module.
* ``d_NN.npz``: D words, one array ``(n_warps, 32, regs_d)`` per (instruction, distribution),
  keyed ``"<index>_<dist>"``; instructions are packed in order into files of at most
  ``max_file_mb`` raw bytes.

Inputs are never saved: ``check`` regenerates them from (instruction, distribution, seed,
n_warps) with :func:`warpsim.validation.inputs.make_inputs`.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from warpsim.facts.isa import Instruction, iter_instructions

from warpsim.validation import inputs as _inputs
from warpsim.validation.kernels import build_module, dump_sass, kernel_name, parse_sass

MANIFEST_VERSION = 1

#: Warps per (instruction, distribution) for a first collection, by form name.
DEFAULT_WARPS = {
    "f16-m8n8k4": 512, "f16": 512, "tf32": 768, "bf16": 768, "fp8": 512, "f64": 256,
    "int8": 16, "int4": 16, "b1": 16,
}
DEFAULT_WARPS_OTHER = 64


def select(arch: str, only: list[str] | None = None) -> list[Instruction]:
    out = list(iter_instructions(arch))
    if only:
        out = [i for i in out if any(s in i.text for s in only)]
    return out


def warps_for(instr: Instruction, warps: int | None = None, family_words: int | None = None,
              family_sizes: dict[str, int] | None = None) -> int:
    """Warps per distribution: fixed, or enough for ``family_words`` D words per family."""
    if warps:
        return warps
    if family_words:
        n_fam = (family_sizes or {}).get(instr.form, 1)
        per_warp = 32 * instr.regs["d"] * len(_inputs.distributions_for(instr)) * n_fam
        return max(4, 4 * math.ceil(family_words / per_warp / 4))
    return DEFAULT_WARPS.get(instr.form, DEFAULT_WARPS_OTHER)


def d_bytes(instr: Instruction, n_warps: int) -> int:
    return n_warps * 32 * instr.regs["d"] * (instr.register_bits("d") // 8)


def plan(instrs, seed: int, warps=None, family_words=None, max_file_mb: float = 15.0):
    """Entries (one per instruction and distribution) with their data file assigned."""
    fam: dict[str, int] = {}
    for i in instrs:
        fam[i.form] = fam.get(i.form, 0) + 1
    entries, file_no, used = [], 0, 0
    cap = int(max_file_mb * 2**20)
    for idx, ins in enumerate(instrs):
        nw = warps_for(ins, warps, family_words, fam)
        size = d_bytes(ins, nw) * len(_inputs.distributions_for(ins))
        if used and used + size > cap:
            file_no, used = file_no + 1, 0
        used += size
        for dist in _inputs.distributions_for(ins):
            entries.append({
                "index": idx, "instr": ins.text, "form": ins.form, "kernel": kernel_name(ins),
                "dist": dist, "seed": seed, "n_warps": nw, "file": f"d_{file_no:02d}.npz",
                "key": f"{idx:03d}_{dist}", "d_dtype": "uint64" if ins.register_bits("d") == 64 else "uint32",
                "d_shape": [nw, 32, ins.regs["d"]],
            })
    return entries


def collect(arch: str, out_dir, *, warps: int | None = None, family_words: int | None = None,
            only: list[str] | None = None, seed: int = 1, max_file_mb: float = 15.0,
            max_files: int | None = None, build_dir=None, run_gpu: bool = True,
            nvcc: str = "nvcc", ptxas: str = "ptxas", cuobjdump: str = "cuobjdump",
            log=print) -> dict:
    """Compile, dump SASS, run every selected instruction on every distribution, save.

    With ``run_gpu=False`` only the module, the SASS and the plan are produced (no GPU
    needed): useful to check a build where no GPU is present.
    """
    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build = Path(build_dir) if build_dir else Path(tempfile.mkdtemp(prefix="warpsim-build-"))
    instrs = select(arch, only)
    cubin, kept, rejected = build_module(instrs, build, arch, nvcc=nvcc, ptxas=ptxas)
    log(f"built {len(kept)} kernels ({len(rejected)} rejected by ptxas) in {time.time() - t0:.1f}s")
    for text, msg in rejected.items():
        log(f"  ptxas rejects {text}: {msg}")
    sass_text = dump_sass(cubin, cuobjdump)
    (out / f"sass_{arch}.txt").write_text(sass_text)
    sass = parse_sass(sass_text)
    entries = plan(kept, seed, warps, family_words, max_file_mb)
    n_files = len({e["file"] for e in entries})
    total = sum(int(np.prod(e["d_shape"])) * (8 if e["d_dtype"] == "uint64" else 4) for e in entries)
    log(f"plan: {len(entries)} runs, {total / 2**20:.1f} MiB of D words in {n_files} files")
    if max_files is not None and n_files > max_files:
        raise RuntimeError(f"plan needs {n_files} data files, more than max_files={max_files}: "
                           "use fewer warps or a larger --max-file-mb")
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "generator_version": _inputs.GENERATOR_VERSION,
        "arch": arch,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "layout": "operand arrays [warp][lane][register]; D words raw bits",
        "rejected_by_ptxas": rejected,
        "sass_file": f"sass_{arch}.txt",
        "sass": {kernel_name(i): sass.get(kernel_name(i), []) for i in kept},
        "entries": entries,
    }
    if run_gpu:
        from warpsim.validation.gpu import GpuRunner, device_info

        manifest["device"] = device_info()
        log(f"device: {manifest['device'].get('gpu')} driver {manifest['device'].get('driver_version')}")
        runner = GpuRunner(cubin)
        by_text = {i.text: i for i in kept}
        files: dict[str, dict[str, np.ndarray]] = {}
        t1 = time.time()
        for e in entries:
            ins = by_text[e["instr"]]
            x = _inputs.make_inputs(ins, e["dist"], e["n_warps"], e["seed"])
            files.setdefault(e["file"], {})[e["key"]] = runner.run(ins, x)
        log(f"ran {len(entries)} runs in {time.time() - t1:.1f}s")
        for fname, arrays in files.items():
            np.savez_compressed(out / fname, **arrays)
        manifest["data_files"] = sorted(files)
    else:
        manifest["device"] = None
        manifest["data_files"] = []
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    if not build_dir:
        shutil.rmtree(build, ignore_errors=True)
    log(f"collect done in {time.time() - t0:.1f}s -> {out}")
    return manifest


def subset(data_dir, out_dir, n_warps: int = 4) -> dict:
    """Cut the first ``n_warps`` warps of every run into a small, compressed copy.

    Valid because the generated inputs are prefix-stable in the warp count.  The copy keeps
    the manifest (without SASS) and writes one ``d_00.npz``.
    """
    src, dst = Path(data_dir), Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    man = json.loads((src / "manifest.json").read_text())
    arrays, entries = {}, []
    cache: dict[str, np.lib.npyio.NpzFile] = {}
    for e in man["entries"]:
        f = cache.setdefault(e["file"], np.load(src / e["file"]))
        w = min(n_warps, e["n_warps"])
        arrays[e["key"]] = np.ascontiguousarray(f[e["key"]][:w])
        entries.append({**e, "n_warps": w, "file": "d_00.npz", "d_shape": [w, 32, e["d_shape"][2]]})
    np.savez_compressed(dst / "d_00.npz", **arrays)
    small = {k: v for k, v in man.items() if k not in ("sass", "entries", "data_files")}
    small.update(entries=entries, data_files=["d_00.npz"], subset_of=str(src))
    (dst / "manifest.json").write_text(json.dumps(small, indent=1))
    return small
