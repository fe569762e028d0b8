"""Whole-kernel launch speed: the suite's cp.async + ldmatrix + mma GEMM (tests/kernels/gemm_f16.cu,
4 warps per CTA, 64 x 64 tiles, two-stage pipeline) run by ``warpsim.Module.launch``.

    PYTHONPATH=. python benchmarks/launch_gemm.py [--n 512] [--json PATH]

Measured in this one process, so ratios compare like with like:

* an N x N x N GEMM (default 512: 64 CTAs, 256 warps, 16 k-tiles) with the default CTA batching
  (every CTA of a batch runs each instruction together) and ``check=False``;
* the same with ``cta_batch=1`` (one CTA at a time), the cost of not vectorizing across CTAs;
* a 256^3 GEMM with ``check=True`` (one instrumented run: access recording, shadow state) against
  ``check=False``, the sanitizer's cost;
* peak memory (tracemalloc) of the default 512^3 launch;
* instructions executed per second (warp-batch dispatches) and lane-instructions per second.

Every result is checked against NumPy float64 (a tolerance only; the bit-exact check against the
H100 is tests/test_kernel_suite.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import tracemalloc

import numpy as np

import warpsim
from warpsim.validation.kernel_suite import CASES


def _gemm(m, n, check, cta_batch=None, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    C = np.zeros((n, n), np.float32)
    case = CASES["gemm_f16"]
    t = time.perf_counter()
    outs = m.launch(case.kernel, (n // 64, n // 64), 128, [A, B, C, n, n, n], check=check, cta_batch=cta_batch)
    dt = time.perf_counter() - t
    err = float(np.abs(outs[2] - A.astype(np.float64) @ B.astype(np.float64).T).max())
    assert err < 1e-2 * np.sqrt(n), err
    return dt


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    case = CASES["gemm_f16"]
    m = warpsim.Module(case.ptx_path.read_text())
    m.program(case.kernel)  # parse + decode once (not timed below)
    n = a.n
    res = {"machine": f"{platform.machine()} {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start",
           "n": n}
    res["batched_s"] = _gemm(m, n, False)
    tracemalloc.start()
    _gemm(m, n, False)
    res["batched_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    res["per_cta_s"] = _gemm(m, n, False, cta_batch=1)
    res["check_256_s"] = _gemm(m, 256, True)
    res["nocheck_256_s"] = _gemm(m, 256, False)
    ctas = (n // 64) ** 2
    instr = len(m.program(case.kernel).program)  # static instructions (the loop runs K/32 times)
    res["ctas"] = ctas
    res["static_instructions"] = instr
    res["ratio_per_cta_over_batched"] = res["per_cta_s"] / res["batched_s"]
    res["ratio_check_over_nocheck_256"] = res["check_256_s"] / res["nocheck_256_s"]
    for k, v in res.items():
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
