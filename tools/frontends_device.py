"""Build (and later check) the device run for issue 19's front-ends and wmma.

``python tools/frontends_device.py build DIR`` writes into DIR: the wmma probe module
(``probe.cubin``, from warpsim.validation.wmma_probe), the nvcuda::wmma GEMM
(``wmma_gemm.cubin``, tests/kernels/wmma/wmma_gemm.cu), Triton's PTX for the example kernels
(examples/triton_kernels.py, target sm_80, assembled for sm_90 by ptxas), a launch list
(``launches.json``) with its inputs (``inputs.npz``) and ``run.sh``, which on the GPU machine
runs the probe and the launches (warpsim.validation.launches) into $OUT.

``python tools/frontends_device.py check DIR RESULTS_DIR`` replays the launches on warpsim and
compares every output byte.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

from warpsim.validation.launches import scalar_arg  # noqa: E402


def triton_cases(rng):
    """(name, kernel, grid, args, kwargs) of the Triton launches checked on the GPU."""
    import triton_kernels as tk

    n = 5000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    X = (rng.standard_normal((64, 781)) * 4).astype(np.float32)
    A16 = rng.standard_normal((128, 64)).astype(np.float16)
    B16 = rng.standard_normal((64, 128)).astype(np.float16)
    A32 = rng.standard_normal((128, 64)).astype(np.float32)
    B32 = rng.standard_normal((64, 128)).astype(np.float32)
    mm = lambda A, B: (A, B, np.zeros((A.shape[0], B.shape[1]), np.float32), A.shape[0], B.shape[1],
                       A.shape[1], A.shape[1], 1, B.shape[1], 1, B.shape[1], 1)
    return [
        ("add", tk.add_kernel, ((n + 1023) // 1024,), (x, y, np.zeros_like(x), n), dict(BLOCK=1024)),
        ("softmax", tk.softmax_kernel, (64,), (np.zeros_like(X), X, 781, 781, 781), dict(BLOCK=1024)),
        ("matmul_f16", tk.matmul_kernel, (4, 4), mm(A16, B16), dict(BM=32, BN=32, BK=32)),
        ("matmul_tf32", tk.matmul_kernel, (2, 2), mm(A32, B32), dict(BM=64, BN=64, BK=32)),
    ]


def gemm_cases(rng):
    """(kernel, args, grid) of the nvcuda::wmma GEMM launches (M = N = K = 64)."""
    import ml_dtypes

    M = N = K = 64
    def f(dt, shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dt)
    def i8(shape):
        return rng.integers(-128, 128, shape).astype(np.int8)
    cases = [
        ("wmma_f16_f32", f(np.float16, (M, K)), f(np.float16, (N, K)), f(np.float32, (M, N)), (16, 16)),
        ("wmma_f16_f16", f(np.float16, (K, M)), f(np.float16, (K, N)), f(np.float16, (M, N)), (32, 8)),
        ("wmma_bf16", f(ml_dtypes.bfloat16, (M, K)), f(ml_dtypes.bfloat16, (K, N)), f(np.float32, (M, N)), (8, 32)),
        ("wmma_s8", i8((M, K)), i8((N, K)), rng.integers(-2**30, 2**30, (M, N)).astype(np.int32), (16, 16)),
        ("wmma_f64", f(np.float64, (M, K)), f(np.float64, (N, K)), f(np.float64, (M, N)), (8, 8)),
        ("wmma_tf32", f(np.float32, (M, K)), f(np.float32, (N, K)), f(np.float32, (M, N)), (16, 16)),
    ]
    out = []
    for name, A, B, C, (tm, tn) in cases:
        grid = (N // (2 * tn), M // (2 * tm), 1)
        out.append((name, [A, B, C, np.zeros_like(C), M, N, K], grid))
    return out


def build(d: str) -> None:
    from warpsim.frontends.triton import jit
    from warpsim.validation.wmma_probe import probe_ptx
    from warpsim.kernel.launch import Module

    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(2019)
    open(os.path.join(d, "probe.ptx"), "w").write(probe_ptx())
    subprocess.run(["ptxas", "-arch=sm_90", os.path.join(d, "probe.ptx"), "-o",
                    os.path.join(d, "probe.cubin")], check=True)
    gemm_cu = os.path.join(ROOT, "tests/kernels/wmma/wmma_gemm.cu")
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", gemm_cu, "-o", os.path.join(d, "wmma_gemm.cubin")],
                   check=True)
    gemm_ptx = open(os.path.join(ROOT, "tests/kernels/wmma/wmma_gemm.ptx")).read()
    launches, inputs = [], {}

    def add(cubin, kernel, grid, block, shared, params, args):
        entry = []
        for j, (p, a) in enumerate(zip(params, args)):
            if isinstance(a, np.ndarray):
                key = f"L{len(launches)}_{j}"
                inputs[key] = a.view(np.uint8).reshape(-1) if a.dtype.name == "bfloat16" else a
                entry.append({"array": key})
            elif a is None:
                entry.append({"null": True})
            else:
                entry.append(scalar_arg(a, p.type))
        launches.append(dict(cubin=cubin, kernel=kernel, grid=list(grid), block=block, shared=shared,
                             args=entry))

    gm = Module(gemm_ptx)
    for name, args, grid in gemm_cases(rng):
        add("wmma_gemm.cubin", name, grid, 128, 0, gm.kernels[name].params, args)
    for name, fn, grid, args, kw in triton_cases(rng):
        comp = jit(fn, target="sm_80").compile(*args, **kw)
        ptx_path = os.path.join(d, f"triton_{name}.ptx")
        open(ptx_path, "w").write(comp.ptx)
        subprocess.run(["ptxas", "-arch=sm_90", ptx_path, "-o", ptx_path[:-4] + ".cubin"], check=True)
        md = comp.metadata
        kargs = [args[i] for i in comp.params] + [None, None]
        assert md.global_scratch_size == 0 and md.profile_scratch_size == 0
        add(f"triton_{name}.cubin", md.name, tuple(grid) + (1,) * (3 - len(grid)), 32 * md.num_warps,
            md.shared, comp.module.kernels[md.name].params, kargs)
    json.dump(launches, open(os.path.join(d, "launches.json"), "w"), indent=1)
    np.savez_compressed(os.path.join(d, "inputs.npz"), **inputs)
    for mod in ("warpsim/validation/launches.py", "warpsim/validation/wmma_probe.py",
                "warpsim/facts/wmma.py"):
        dst = os.path.join(d, "pkg", mod)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.join(ROOT, mod), dst)
    for init in ("warpsim", "warpsim/validation", "warpsim/facts"):
        open(os.path.join(d, "pkg", init, "__init__.py"), "w").close()
    open(os.path.join(d, "run.sh"), "w").write(
        "set -x\nexport PYTHONPATH=$PWD/pkg PYTHONUNBUFFERED=1\nnvidia-smi --query-gpu=name,driver_version --format=csv\n"
        "python3 -m warpsim.validation.wmma_probe device probe.cubin $OUT/probe.npz\n"
        "python3 -m warpsim.validation.launches launches.json inputs.npz $OUT/launches.npz\n")
    print(f"{len(launches)} launches; wrote {d}")


def check(d: str, results: str, arch: str = "sm_90") -> int:
    """Replay the launch list on warpsim (numerics of ``arch``) and compare every output byte."""
    from warpsim.kernel.launch import Module

    launches = json.load(open(os.path.join(d, "launches.json")))
    ins = np.load(os.path.join(d, "inputs.npz"))
    got = np.load(results)
    total = bad = 0
    for i, L in enumerate(launches):
        ptx = (os.path.join(ROOT, "tests/kernels/wmma/wmma_gemm.ptx") if L["cubin"] == "wmma_gemm.cubin"
               else os.path.join(d, L["cubin"][:-6] + ".ptx"))
        args, arrays = [], []
        for j, a in enumerate(L["args"]):
            if "array" in a:
                args.append(ins[a["array"]])
                arrays.append(j)
            elif "null" in a:
                args.append(None)
            else:
                (t, v), = a.items()
                args.append(v)
        outs = Module(open(ptx).read()).launch(L["kernel"], tuple(L["grid"]), L["block"], args,
                                               shared_bytes=L.get("shared", 0), arch=arch, check=False)
        n = nb = 0
        for j, o in zip(arrays, outs):
            g = got[f"{i}_{j}"]
            ob, gb = np.ascontiguousarray(o).view(np.uint8), np.ascontiguousarray(g).view(np.uint8)
            words = ob.size // o.dtype.itemsize
            n += words
            nb += int((ob.reshape(words, -1) != gb.reshape(words, -1)).any(axis=1).sum())
        total += n
        bad += nb
        print(f"{L['cubin']:28s} {L['kernel']:24s} {n:8d} words, {nb} differ")
    print(f"all: {total} words, {bad} differ")
    return bad


def fixtures(d: str, probe: str, results: str) -> None:
    """Small test fixtures from a device run: tests/data/wmma_h200.npz (every load form's random
    pass, every store, 2 tiles of every mma form, the repeat-register runs) and
    tests/data/frontends_h200.npz (the launch list with inputs and outputs)."""
    from warpsim.facts.wmma import FRAGMENTS
    from warpsim.validation import wmma_probe as wp

    P = np.load(probe)
    fx = {}
    for f in FRAGMENTS.values():
        for lay in f.layouts:
            name = wp.ld_name(f, lay, "s")
            fx[f"in_{name}"] = P[f"in_{name}_{wp.passes(f)}"]
            fx[name] = P[name][-1]
            if f.frag == "c":
                fx[wp.st_name(f, lay)] = P[wp.st_name(f, lay)]
    for g, al, bl, e in wp.mma_cases():
        name = wp.mma_name(g, al, bl, e)
        for op in "abc":
            full = P[f"{name}_{op}"]
            fx[f"{name}_{op}"] = full[:len(full) * 2 // wp.MMA_TILES]
        full = P[f"{name}_d"]
        fx[f"{name}_d"] = full[:len(full) * 2 // wp.MMA_TILES]
    for k in P.files:
        if k.startswith("dup_"):
            fx[k] = P[k]
    np.savez_compressed(os.path.join(ROOT, "tests/data/wmma_h200.npz"), **fx)
    launches = json.load(open(os.path.join(d, "launches.json")))
    ins = np.load(os.path.join(d, "inputs.npz"))
    got = np.load(results)
    out = {"launches": np.array(json.dumps(launches))}
    out.update({f"in_{k}": ins[k] for k in ins.files})
    for i, L in enumerate(launches):  # outputs: the arrays the launch changed
        for j, a in enumerate(L["args"]):
            if "array" in a and not np.array_equal(got[f"{i}_{j}"].view(np.uint8),
                                                   ins[a["array"]].view(np.uint8)):
                out[f"out_{i}_{j}"] = got[f"{i}_{j}"]
    for L in launches:
        if L["cubin"].startswith("triton_"):
            out[f"ptx_{L['cubin'][:-6]}"] = np.array(open(os.path.join(d, L["cubin"][:-6] + ".ptx")).read())
    np.savez_compressed(os.path.join(ROOT, "tests/data/frontends_h200.npz"), **out)


if __name__ == "__main__":
    if sys.argv[1] == "fixtures":
        fixtures(*sys.argv[2:5])
    if sys.argv[1] == "build":
        build(sys.argv[2])
    elif sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
