"""Triton's sm_90a kernels (wgmma) on the GPU and on warpsim, every output byte.

``python tools/hopper_triton_device.py build DIR`` compiles with Triton for sm_90a the matmul
of examples/triton_kernels.py (f16 and e4m3 inputs, f32 accumulation) and the fused attention of
tests/data/real/triton_tutorials.py,
assembles each PTX for sm_90a with ptxas, and writes a launch list for
``python -m warpsim.validation.launches`` (run on the GPU machine:
``bash DIR/run.sh`` with $OUT set).  ``python tools/hopper_triton_device.py check DIR
RESULTS.npz`` replays the same launches through ``warpsim.Module.launch`` and compares bytes.
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


def cases(rng):
    """(name, kernel, grid, args, constexprs) of the launches: the matmul at M = N = 256,
    K = 128 (f16 and e4m3), and the tutorial's fused attention (one head, 256 x 64, f16)."""
    import ml_dtypes
    import triton_kernels as tk

    sys.path.insert(0, os.path.join(ROOT, "tests", "data", "real"))
    import triton_tutorials as tt

    A16 = rng.standard_normal((256, 128)).astype(np.float16)
    B16 = rng.standard_normal((128, 256)).astype(np.float16)
    A8 = (rng.standard_normal((256, 128)) * 4).astype(ml_dtypes.float8_e4m3fn)
    B8 = (rng.standard_normal((128, 256)) * 4).astype(ml_dtypes.float8_e4m3fn)
    L, D = 256, 64
    q, k, v = (rng.standard_normal((L, D)).astype(np.float16) for _ in range(3))
    blocks = dict(BM=128, BN=128, BK=64)
    return [("matmul_f16_sm90a", tk.matmul_kernel, (2, 2, 1), _args(A16, B16), blocks),
            ("matmul_e4m3_sm90a", tk.matmul_kernel, (2, 2, 1), _args(A8, B8), blocks),
            ("attention_sm90a", tt.attn_fwd, (L // 64, 1, 1),
             (q, k, v, np.float32(0.125), np.zeros((L, D), np.float16), D, D, D, D, L),
             dict(HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64))]


def _args(A, B):
    M, K = A.shape
    N = B.shape[1]
    return (A, B, np.zeros((M, N), np.float32), M, N, K, K, 1, N, 1, N, 1)


def build(d: str) -> None:
    from warpsim.frontends.triton import jit

    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(2026)
    launches, inputs = [], {}
    for name, fn, grid, args, kw in cases(rng):
        comp = jit(fn, target="sm_90a").compile(*args, **kw)
        assert "wgmma.mma_async" in comp.ptx, f"{name}: Triton did not use wgmma"
        ptx = os.path.join(d, name + ".ptx")
        open(ptx, "w").write(comp.ptx)
        subprocess.run(["ptxas", "-arch=sm_90a", ptx, "-o", ptx[:-4] + ".cubin"], check=True)
        md = comp.metadata
        kargs = [args[i] for i in comp.params] + [None, None]
        assert md.global_scratch_size == 0 and md.profile_scratch_size == 0
        entry = []
        for j, (p, a) in enumerate(zip(comp.module.kernels[md.name].params, kargs)):
            if isinstance(a, np.ndarray):
                key = f"L{len(launches)}_{j}"
                inputs[key] = a.view(np.uint8) if a.dtype.itemsize == 1 and a.dtype.kind == "V" \
                    else (a.view(np.uint8) if a.dtype.name.startswith("float8") else a)
                entry.append({"array": key})
            elif a is None:
                entry.append({"null": True})
            else:
                entry.append(scalar_arg(a, p.type))
        launches.append(dict(cubin=name + ".cubin", kernel=md.name, grid=list(grid),
                             block=32 * md.num_warps, shared=md.shared, args=entry, name=name))
    json.dump(launches, open(os.path.join(d, "launches.json"), "w"), indent=1)
    np.savez_compressed(os.path.join(d, "inputs.npz"), **inputs)
    dst = os.path.join(d, "pkg", "warpsim", "validation", "launches.py")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy(os.path.join(ROOT, "warpsim/validation/launches.py"), dst)
    for init in ("warpsim", "warpsim/validation"):
        open(os.path.join(d, "pkg", init, "__init__.py"), "w").close()
    open(os.path.join(d, "run.sh"), "w").write(
        "cd \"$(dirname \"$0\")\"\nexport PYTHONPATH=$PWD/pkg PYTHONUNBUFFERED=1\n"
        "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader\n"
        "python3 -m warpsim.validation.launches launches.json inputs.npz $OUT/launches.npz\n")
    print(f"{len(launches)} launches; wrote {d}")


def check(d: str, results: str) -> int:
    """Replay every launch on warpsim (sm_90a) and compare each output byte with the GPU's."""
    import warpsim

    launches = json.load(open(os.path.join(d, "launches.json")))
    ins = np.load(os.path.join(d, "inputs.npz"))
    gpu = np.load(results)
    bad_total = 0
    for i, L in enumerate(launches):
        m = warpsim.Module(open(os.path.join(d, L["cubin"][:-6] + ".ptx")).read())
        params = m.kernels[L["kernel"]].params
        args = []
        for p, a in zip(params, L["args"]):
            if "array" in a:
                args.append(ins[a["array"]].copy())
            elif "null" in a:
                args.append(None)
            else:
                (t, v), = a.items()
                args.append({"u32": np.uint32, "u64": np.uint64, "f32": np.float32,
                             "f64": np.float64}[t](v))
        outs = m.launch(L["kernel"], tuple(L["grid"]), L["block"], args, L["shared"],
                        arch="sm_90a", check=False)
        k = 0
        for j, a in enumerate(args):
            if isinstance(a, np.ndarray):
                got = np.ascontiguousarray(outs[k]).view(np.uint8)
                want = np.ascontiguousarray(gpu[f"{i}_{j}"]).view(np.uint8)
                k += 1
                nb = int(np.count_nonzero(got.reshape(-1) != want.reshape(-1)))
                bad_total += nb
                print(f"{L['name']:22s} argument {j}: {want.size} bytes, {nb} differ")
    return 1 if bad_total else 0


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
