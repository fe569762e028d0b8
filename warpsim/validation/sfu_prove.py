"""Prove warpsim's special-function forms equal to the GPU, exhaustively where the input space allows.

Two steps::

    python -m warpsim.validation.sfu_prove build DIR        # here: sfu_forms.cu -> sfu_forms.cubin (nvcc)
    python -m warpsim.validation.sfu_prove run DIR OUT [--only F,..] [--workers N]   # on the GPU machine

``run`` loads the cubin with CuPy, and for each form computes the GPU's answers chunk by chunk
(2**28 words), while a pool of worker processes evaluates warpsim's OpSpec semantics (the code
under test, NumPy on the CPUs) on the same inputs and counts the words that differ.  Inputs:
every 32-bit pattern for the unary f32 forms and the x2 forms, every 16-bit pattern for the
16-bit forms, every high word (with a hashed low word) for the .ftz.f64 forms, and seeded random
operands (uniform bit patterns, operands near 1, near the range limits, subnormal) for div and
rsqrt.approx.f64.  ``OUT/prove.json`` gets, per form: words compared, mismatches, the first
mismatching inputs, seconds; it is rewritten after every form, so a cut-off run keeps its results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CHUNK = 1 << 28

#: form -> (PTX type of the operands, number of operands, input space)
FORMS = {
    "ex2.approx.f32": ("f32", 1, "all32"), "ex2.approx.ftz.f32": ("f32", 1, "all32"),
    "rcp.approx.f32": ("f32", 1, "all32"), "rcp.approx.ftz.f32": ("f32", 1, "all32"),
    "div.full.f32": ("f32", 2, "rand"), "div.full.ftz.f32": ("f32", 2, "rand"),
    "div.approx.f32": ("f32", 2, "rand"), "div.approx.ftz.f32": ("f32", 2, "rand"),
    "rsqrt.approx.f32": ("f32", 1, "all32"), "rsqrt.approx.ftz.f32": ("f32", 1, "all32"),
    "sqrt.approx.f32": ("f32", 1, "all32"), "sqrt.approx.ftz.f32": ("f32", 1, "all32"),
    "lg2.approx.f32": ("f32", 1, "all32"), "lg2.approx.ftz.f32": ("f32", 1, "all32"),
    "ex2.approx.f16": ("f16", 1, "all16"), "ex2.approx.ftz.bf16": ("bf16", 1, "all16"),
    "tanh.approx.f16": ("f16", 1, "all16"), "tanh.approx.bf16": ("bf16", 1, "all16"),
    "ex2.approx.f16x2": ("b32", 1, "all32"), "ex2.approx.ftz.bf16x2": ("b32", 1, "all32"),
    "tanh.approx.f16x2": ("b32", 1, "all32"), "tanh.approx.bf16x2": ("b32", 1, "all32"),
    "rcp.approx.ftz.f64": ("f64", 1, "hi32"), "rsqrt.approx.ftz.f64": ("f64", 1, "hi32"),
    "rsqrt.approx.f64": ("f64", 1, "rand64"),
    "tanh.approx.f32": ("f32", 1, "all32"),
    "sin.approx.f32": ("f32", 1, "all32"), "sin.approx.ftz.f32": ("f32", 1, "all32"),
    "cos.approx.f32": ("f32", 1, "all32"), "cos.approx.ftz.f32": ("f32", 1, "all32"),
}
RAND_WORDS = 1 << 30


def _kname(form: str) -> str:
    return "k_" + form.replace(".", "_")


def cuda_source() -> str:
    """One kernel per form: out[i] = form(in), in = base + i (exhaustive) or loaded words."""
    L = ["#include <cuda_fp16.h>"]
    for form, (typ, nsrc, space) in FORMS.items():
        k = _kname(form)
        if typ == "f32":
            args = ", ".join(f"const unsigned* in{j}" for j in range(nsrc))
            L.append(f'extern "C" __global__ void {k}(unsigned base, unsigned n, {args}, unsigned* out){{')
            L.append("  unsigned i = blockIdx.x*blockDim.x + threadIdx.x; if (i >= n) return;")
            for j in range(nsrc):
                L.append(f"  float x{j} = __uint_as_float(in{j} ? in{j}[i] : base + i);")
            ops = ", ".join(f"%{j + 1}" for j in range(nsrc))
            cons = ", ".join(f'"f"(x{j})' for j in range(nsrc))
            L.append(f'  float y; asm("{form} %0, {ops};" : "=f"(y) : {cons}); out[i] = __float_as_uint(y);}}')
        elif typ in ("f16", "bf16"):
            L.append(f'extern "C" __global__ void {k}(unsigned base, unsigned n, const unsigned* in0, unsigned* out){{')
            L.append("  unsigned i = blockIdx.x*blockDim.x + threadIdx.x; if (i >= n) return;")
            L.append("  unsigned short x = (unsigned short)(base + i), y;")
            L.append(f'  asm("{form} %0, %1;" : "=h"(y) : "h"(x)); out[i] = y;}}')
        elif typ == "b32":
            L.append(f'extern "C" __global__ void {k}(unsigned base, unsigned n, const unsigned* in0, unsigned* out){{')
            L.append("  unsigned i = blockIdx.x*blockDim.x + threadIdx.x; if (i >= n) return;")
            L.append("  unsigned x = base + i, y;")
            L.append(f'  asm("{form} %0, %1;" : "=r"(y) : "r"(x)); out[i] = y;}}')
        else:  # f64: in0 holds 64-bit words, or (hi32) high word = base + i, low word hashed
            L.append(f'extern "C" __global__ void {k}(unsigned base, unsigned n, const unsigned long long* in0, '
                     "unsigned long long* out){")
            L.append("  unsigned i = blockIdx.x*blockDim.x + threadIdx.x; if (i >= n) return;")
            L.append("  unsigned hi = base + i; unsigned lo = hi * 0x9E3779B1u; lo ^= lo >> 15;")
            L.append("  unsigned long long w = in0 ? in0[i] : (((unsigned long long)hi << 32) | lo);")
            L.append(f'  double y; asm("{form} %0, %1;" : "=d"(y) : "d"(__longlong_as_double(w)));'
                     " out[i] = __double_as_longlong(y);}")
    return "\n".join(L) + "\n"


def build(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "sfu_forms.cu").write_text(cuda_source())
    subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(d / "sfu_forms.cubin"), str(d / "sfu_forms.cu")],
                   check=True)


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------


def _lo_hash(hi: np.ndarray) -> np.ndarray:
    lo = hi * np.uint32(0x9E3779B1)
    return lo ^ (lo >> np.uint32(15))


BLOCK = 1 << 16
SEED = 21
SLICE = 1 << 18


def rand_words(form: str, start: int, n: int, nsrc: int) -> list[np.ndarray]:
    """Seeded random operands ``start .. start+n`` of ``form`` (``start``, ``n`` multiples of
    BLOCK; each block seeded by its index, so any aligned slice regenerates alike)."""
    parts = [_rand_block(form, b, nsrc) for b in range(start // BLOCK, (start + n) // BLOCK)]
    return [np.concatenate([p[j] for p in parts]) for j in range(len(parts[0]))]


def _rand_block(form: str, block: int, nsrc: int) -> list[np.ndarray]:
    """One block: a quarter each of uniform bit patterns, exponents near 1, the divisor (or
    operand) near the range limits, subnormal or extreme operands."""
    n = BLOCK
    rng = np.random.default_rng([SEED, block, sum(map(ord, form))])
    if nsrc == 1 and form.endswith("f64"):
        w = rng.integers(0, 1 << 64, n, dtype=np.uint64, endpoint=False)
        q = n // 4
        e = rng.integers(0, 2048, n).astype(np.uint64)
        w[q:2 * q] = (w[q:2 * q] & np.uint64(0x800FFFFFFFFFFFFF)) | (e[q:2 * q] << np.uint64(52))
        w[2 * q:3 * q] &= np.uint64(0x000FFFFFFFFFFFFF)                      # positive subnormals
        w[3 * q:] = (w[3 * q:] & np.uint64(0x000FFFFFFFFFFFFF)) | (np.uint64(1023) << np.uint64(52))
        return [w]
    out = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(nsrc)]
    q = n // 4
    mant = np.uint32(0x807FFFFF)
    for j, w in enumerate(out):
        e = rng.integers(0, 256, n).astype(np.uint32)
        near = (rng.integers(112, 143, n)).astype(np.uint32)
        w[q:2 * q] = (w[q:2 * q] & mant) | (near[q:2 * q] << np.uint32(23))
        if j == nsrc - 1:  # divisor near the limits: subnormal, tiny, huge
            lim = np.array([0, 1, 2, 252, 253, 254], np.uint32)[e[2 * q:3 * q] % 6]
            w[2 * q:3 * q] = (w[2 * q:3 * q] & mant) | (lim << np.uint32(23))
            w[3 * q:] = (w[3 * q:] & mant) | (near[3 * q:] << np.uint32(23))
        else:
            w[2 * q:3 * q] = (w[2 * q:3 * q] & mant) | (near[2 * q:3 * q] << np.uint32(23))
            w[3 * q:] = (w[3 * q:] & mant) | (np.array([0, 1, 253, 254], np.uint32)[e[3 * q:] % 4] << np.uint32(23))
    if nsrc == 2:  # an eighth with quotients near 2**-126 (where .ftz flushes)
        a, b = out
        eb = (b[7 * n // 8:] >> np.uint32(23)) & np.uint32(255)
        ea = np.clip(eb.astype(np.int64) - 126 + rng.integers(-1, 2, eb.size), 0, 254).astype(np.uint32)
        a[7 * n // 8:] = (a[7 * n // 8:] & mant) | (ea << np.uint32(23))
    return out


def space_words(form: str, start: int, n: int) -> list[np.ndarray]:
    typ, nsrc, space = FORMS[form]
    if space in ("all32", "all16"):
        w = np.arange(start, start + n, dtype=np.uint64).astype(np.uint32)
        return [w.astype(np.uint16) if space == "all16" else w]
    if space == "hi32":
        hi = np.arange(start, start + n, dtype=np.uint64).astype(np.uint32)
        return [(hi.astype(np.uint64) << np.uint64(32)) | _lo_hash(hi).astype(np.uint64)]
    return rand_words(form, start, n, nsrc)


def total_words(form: str) -> int:
    space = FORMS[form][2]
    return {"all32": 1 << 32, "all16": 1 << 16, "hi32": 1 << 32}.get(space, RAND_WORDS)


# ---------------------------------------------------------------------------------------------
# the model side (worker processes)
# ---------------------------------------------------------------------------------------------

_BUFS: list = []  # anonymous shared mappings, inherited by the forked workers


def _model(form: str, srcs):
    from warpsim.ptx.alu import decode_form

    spec, typ, mods = decode_form(form)
    return spec.fn(list(srcs), type=typ, **mods)


def _work(args):
    form, buf, dtype, start, off, n = args
    hw = np.ndarray((n,), np.dtype(dtype), buffer=_BUFS[buf], offset=off * np.dtype(dtype).itemsize)
    count, first = 0, []
    for o in range(0, n, SLICE):  # slices small enough for the caches
        m = min(SLICE, n - o)
        srcs = space_words(form, start + off + o, m)
        with np.errstate(all="ignore"):
            sim = np.asarray(_model(form, srcs)).astype(hw.dtype)
        bad = np.flatnonzero(sim != hw[o:o + m])
        count += int(bad.size)
        first += [[*(hex(int(s[i])) for s in srcs), hex(int(hw[o + i])), hex(int(sim[i]))] for i in bad[:8]]
    return count, first[:8]


def run(d: Path, out: Path, only=None, workers=None) -> dict:
    import mmap
    import multiprocessing as mp

    from warpsim.ptx import sfu

    out.mkdir(parents=True, exist_ok=True)
    for name in ("rcp", "rsq", "sqrt", "ex2", "lg2", "ex2_f16", "ex2_bf16", "tanh_f16", "tanh_bf16",
                 "rcp64h", "rsq64h", "tanh", "sin.res", "sin.coef", "sin.xi", "sin.xv"):
        sfu.table(name)  # decoded once, shared copy-on-write by the forked workers
    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    _BUFS[:] = [mmap.mmap(-1, CHUNK * 8) for _ in range(2)]
    pool = mp.get_context("fork").Pool(workers)  # before CUDA starts in this process
    import cupy as cp

    mod = cp.RawModule(path=str(d / "sfu_forms.cubin"))
    dev = cp.cuda.runtime.getDeviceProperties(0)
    report = {"seed": SEED, "device": {"name": dev["name"].decode(), "driver": cp.cuda.runtime.driverGetVersion(),
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         "cpus": os.cpu_count()}, "forms": {}}
    try:
        for form in FORMS:
            if only and form not in only:
                continue
            typ, nsrc, space = FORMS[form]
            total = total_words(form)
            dt = np.uint64 if typ == "f64" else (np.uint16 if typ in ("f16", "bf16") else np.uint32)
            k = mod.get_function(_kname(form))
            t0 = time.time()
            mism, first, pending, flip = 0, [], None, 0
            for start in range(0, total, CHUNK):
                n = min(CHUNK, total - start)
                if space in ("rand", "rand64"):
                    ins = [cp.asarray(w) for w in space_words(form, start, n)]
                else:
                    ins = [np.uint64(0)] * nsrc
                o = cp.empty(n, np.uint64 if typ == "f64" else np.uint32)
                k(((n + 255) // 256,), (256,), (np.uint32(start & 0xFFFFFFFF), np.uint32(n), *ins, o))
                hwc = o.get().astype(dt)
                del o, ins
                if pending is not None:  # collect the previous chunk before reusing its buffer
                    for c, f in pending.get():
                        mism += c
                        first += f[: max(0, 32 - len(first))]
                np.ndarray((n,), dt, buffer=_BUFS[flip])[:] = hwc
                step = max(1, n // (4 * workers) // BLOCK) * BLOCK
                jobs = [(form, flip, np.dtype(dt).str, start, off, min(step, n - off)) for off in range(0, n, step)]
                pending = pool.map_async(_work, jobs)
                flip ^= 1
            for c, f in pending.get():
                mism += c
                first += f[: max(0, 32 - len(first))]
            r = {"words": total, "space": space, "mismatches": mism, "first": first,
                 "seconds": round(time.time() - t0, 1)}
            report["forms"][form] = r
            print(form, r["words"], r["mismatches"], r["seconds"], first[:2], flush=True)
            (out / "prove.json").write_text(json.dumps(report, indent=1))
    finally:
        pool.terminate()
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m warpsim.validation.sfu_prove")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir", type=Path)
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--only", default="")
    r.add_argument("--workers", type=int, default=0)
    r.add_argument("--seed", type=int, default=SEED, help="seed of the random operands")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        build(a.dir)
    else:
        globals()["SEED"] = a.seed
        run(a.dir, a.out, [f for f in a.only.split(",") if f] or None, a.workers or None)


if __name__ == "__main__":
    main(sys.argv[1:])
