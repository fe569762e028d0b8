"""Triton kernels on warpsim (``warpsim.frontends.triton``) against Triton's own CPU
interpreter (``TRITON_INTERPRET=1``), at two sizes each, in one run.

    PYTHONPATH=. python benchmarks/triton_vs_interpret.py [--repeat 5] [--json PATH]

Kernels: examples/triton_kernels.py's ``matmul_kernel`` (f16 A, B; fp32 accumulation;
64 x 64 x 32 blocks, 4 warps) at 128^3 and 512^3, and ``softmax_kernel`` (one program per row
of 1,024 float32) on 4 and 256 rows.  Each side runs in its own child process (the
interpreter is chosen when triton is imported); per case: the first call (Triton's compile
and warpsim's decode included, for warpsim) and the median of ``--repeat`` calls after it,
wall and CPU time (``time.process_time``: the figure that holds on a shared machine; torch may
use several threads in the interpreter, which CPU time adds up).
warpsim runs what the GPU runs (sm_80 PTX, ``check=False``); the interpreter runs the body in
NumPy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = [("matmul", 128), ("matmul", 512), ("softmax", 4), ("softmax", 256)]


def child(side: str, repeat: int) -> dict:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import numpy as np
    import triton_kernels as tk

    if side == "warpsim":
        from warpsim.frontends.triton import jit

        mm, sm = jit(tk.matmul_kernel, check=False), jit(tk.softmax_kernel, check=False)
    else:
        mm, sm = tk.matmul_kernel, tk.softmax_kernel
    rng = np.random.default_rng(0)
    res = {}
    for name, size in CASES:
        if name == "matmul":
            n = size
            A = rng.standard_normal((n, n)).astype(np.float16)
            B = rng.standard_normal((n, n)).astype(np.float16)
            C = np.zeros((n, n), np.float32)
            if side == "interpret":
                import torch
                A, B, C = torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(C)

            def go():
                mm[(n // 64, n // 64)](A, B, C, n, n, n, n, 1, n, 1, n, 1, BM=64, BN=64, BK=32)
        else:
            rows, cols = size, 1024
            x = rng.standard_normal((rows, cols)).astype(np.float32)
            out = np.zeros_like(x)
            if side == "interpret":
                import torch
                x, out = torch.from_numpy(x), torch.from_numpy(out)

            def go():
                sm[(rows,)](out, x, cols, cols, cols, BLOCK=1024)
        t = time.perf_counter()
        go()
        first = time.perf_counter() - t
        ts, cs = [], []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            go()
            ts.append(time.perf_counter() - t)
            cs.append(time.process_time() - c)
        res[f"{name}_{size}"] = {"first_s": first, "median_s": sorted(ts)[len(ts) // 2],
                                 "median_cpu_s": sorted(cs)[len(cs) // 2], "load": os.getloadavg()[0]}
    return res


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--_child", choices=["warpsim", "interpret"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child:
        print(json.dumps(child(a._child, a.repeat)))
        return {}
    import platform

    import triton

    res = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
           "triton": triton.__version__, "load_at_start": os.getloadavg()[0]}
    for side in ("warpsim", "interpret"):
        env = dict(os.environ, PYTHONPATH=ROOT)
        if side == "interpret":
            env["TRITON_INTERPRET"] = "1"
        out = subprocess.run([sys.executable, __file__, "--_child", side, "--repeat", str(a.repeat)],
                             env=env, capture_output=True, text=True, check=True).stdout
        res[side] = json.loads(out.strip().splitlines()[-1])
    res["load_at_end"] = os.getloadavg()[0]
    for name, size in CASES:
        k = f"{name}_{size}"
        w, i = res["warpsim"][k], res["interpret"][k]
        res.setdefault("ratio_interpret_over_warpsim", {})[k] = i["median_s"] / w["median_s"]
        res.setdefault("cpu_ratio_interpret_over_warpsim", {})[k] = i["median_cpu_s"] / w["median_cpu_s"]
        print(f"{k:14s} warpsim {w['median_s'] * 1e3:9.1f} ms wall {w['median_cpu_s'] * 1e3:9.1f} ms CPU "
              f"(first {w['first_s']:.2f} s)   TRITON_INTERPRET {i['median_s'] * 1e3:9.1f} ms wall "
              f"{i['median_cpu_s'] * 1e3:9.1f} ms CPU (first {i['first_s']:.2f} s)   interpreter / warpsim: "
              f"wall {i['median_s'] / w['median_s']:.2f}, CPU {i['median_cpu_s'] / w['median_cpu_s']:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
