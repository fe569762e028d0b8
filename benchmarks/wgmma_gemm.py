"""wgmma GEMM vs mma.sync GEMM on warpsim: the same 512^3 f16 problem (C = A B^T, f32
accumulate, 64 x 64 CTA tiles of 128 threads) through tests/kernels/hopper/gemm_wgmma.cu (one
warpgroup, K-major 128B-swizzled shared memory, 4 x m64n64k16 per 64-wide k-tile) and
tests/kernels/gemm_f16.cu (4 warps, cp.async + ldmatrix + mma.sync m16n8k16).

    PYTHONPATH=. python benchmarks/wgmma_gemm.py [--n 512] [--json PATH]

Both run with ``check=False`` (default CTA batching) in one process, ``--repeat`` paired rounds
(CPU time; medians of the per-round ratios); the two results must be equal bit for bit (both chain k16 steps in k order with the sm_90 numerics).  Also CuTe's
tutorial kernel (``wgmma_sm90.cu``, compiled unchanged: tests/kernels/hopper/cute_wgmma_sm90.ptx)
on the same problem, its ratio to the mma.sync GEMM.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import warpsim

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"


def run(n: int = 512, seed: int = 0, repeats: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    C = np.zeros((n, n), np.float32)
    wg = warpsim.Module((KERNELS / "hopper" / "gemm_wgmma.ptx").read_text())
    ms = warpsim.Module((KERNELS / "gemm_f16.ptx").read_text())
    wg.program("gemm_wgmma_f16", arch="sm_90a")
    ms.program("gemm_f16_f32")
    res = {"machine": f"{platform.machine()} {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} "
           f"(uptime before)", "n": n, "repeats": repeats, "clock": "time.process_time (CPU seconds)"}
    # CuTe's tutorial kernel (examples/cute/tutorial/hopper/wgmma_sm90.cu, TN: K-major A and B,
    # 128 x 128 x 64 tiles, 3-stage cp.async pipeline, f16 accumulate), compiled unchanged
    cute = warpsim.Module((KERNELS / "hopper" / "cute_wgmma_sm90.ptx").read_text())
    tn = next(k for k in cute.kernels if "gemm_device" in k and "MajorE0" in k)
    cute.program(tn, 98304 + 1024, arch="sm_90a")
    Ch = np.zeros((n, n), np.float16)
    times: dict = {"wgmma_s": [], "mma_sync_s": [], "cute_wgmma_s": []}
    for _ in range(repeats):  # paired runs: the three one after another, each round
        t = time.process_time()
        d_wg = wg.launch("gemm_wgmma_f16", (n // 64, n // 64), 128, [A, B, C, n, n, n], arch="sm_90a",
                         check=False)[2]
        times["wgmma_s"].append(time.process_time() - t)
        t = time.process_time()
        d_ms = ms.launch("gemm_f16_f32", (n // 64, n // 64), 128, [A, B, C, n, n, n], check=False)[2]
        times["mma_sync_s"].append(time.process_time() - t)
        t = time.process_time()
        cute.launch(tn, (n // 128, n // 128), 128, cute_args(A, B, Ch), shared_bytes=98304 + 1024,
                    arch="sm_90a", check=False)
        times["cute_wgmma_s"].append(time.process_time() - t)
    for k, v in times.items():
        res[k] = float(np.median(v))
    ms_t = np.array(times["mma_sync_s"])
    res["ratio_wgmma_over_mma_sync"] = float(np.median(np.array(times["wgmma_s"]) / ms_t))
    res["ratio_cute_wgmma_over_mma_sync"] = float(np.median(np.array(times["cute_wgmma_s"]) / ms_t))
    res["bit_equal"] = bool(np.array_equal(d_wg.view(np.uint32), d_ms.view(np.uint32)))
    return res


def cute_args(A, B, C, alpha=1.0, beta=0.0) -> list:
    """Launch arguments of CuTe's gemm_device for TN: A (M, K) and B (N, K) row-major f16, C
    (N, M) f16 (column-major M x N); the struct parameters as the host code passes them (the
    problem shape, the leading dimensions, TiledMMA with accumulate_ = One, alpha, beta)."""
    import struct
    m, k = A.shape
    n = B.shape[0]
    e = b"\0"
    return [struct.pack("<iii", m, n, k), e, A, struct.pack("<i", k), e, e, B, struct.pack("<i", k), e, e,
            C, struct.pack("<i", m), struct.pack("<ii", 1, 0), np.float16(alpha).tobytes(),
            np.float16(beta).tobytes()]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    res = run(a.n, repeats=a.repeat)
    for k, v in res.items():
        print(f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
