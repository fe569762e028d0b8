"""Triton kernels on warpsim (``warpsim.frontends.triton``) against Triton's own CPU
interpreter (``TRITON_INTERPRET=1``), small and large launches, in one run.

    PYTHONPATH=. python benchmarks/triton_vs_interpret.py [--repeat 7] [--json PATH]

Kernels (examples/triton_kernels.py): ``matmul_kernel`` (f16 A, B; fp32 accumulation;
64 x 64 x 32 blocks, 4 warps) at 128^3 and 512^3, ``softmax_kernel`` (one program per row of
1,024 float32) on 4 and 256 rows, ``add_kernel`` (blocks of 1,024) on 1,024 and 2^20 elements.
Each side runs in its own child process (the interpreter is chosen when triton is imported),
both alive for the whole run: per case, the first call of each (Triton's compile, and warpsim's
decode, included) and then ``--repeat`` paired rounds, one call on each side per round (which
side goes first alternates), so that both see about the same load on a shared machine.
Reported: medians of CPU time (``time.process_time``: the figure that holds on a shared
machine; torch may use several threads in the interpreter, which CPU time adds up) and of wall
time, and the median over rounds of the paired CPU-time ratio interpreter / warpsim.
warpsim runs what the GPU runs (sm_80 PTX, ``check=False``); the interpreter runs the body in
NumPy/torch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = [("matmul", 128), ("softmax", 4), ("add", 1024),
         ("matmul", 512), ("softmax", 256), ("add", 1 << 20)]
SMALL = ("matmul_128", "softmax_4", "add_1024")


def _cases(side: str) -> dict:
    """name -> a function that launches the case once."""
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import numpy as np
    import triton_kernels as tk

    if side == "warpsim":
        from warpsim.frontends.triton import jit

        mm, sm, add = (jit(k, check=False) for k in (tk.matmul_kernel, tk.softmax_kernel, tk.add_kernel))
    else:
        mm, sm, add = tk.matmul_kernel, tk.softmax_kernel, tk.add_kernel

    def arr(a):
        if side == "interpret":
            import torch
            return torch.from_numpy(a)
        return a

    rng = np.random.default_rng(0)
    out = {}
    for name, size in CASES:
        if name == "matmul":
            n = size
            A = arr(rng.standard_normal((n, n)).astype(np.float16))
            B = arr(rng.standard_normal((n, n)).astype(np.float16))
            C = arr(np.zeros((n, n), np.float32))
            go = (lambda n, A, B, C: lambda: mm[(n // 64, n // 64)](
                A, B, C, n, n, n, n, 1, n, 1, n, 1, BM=64, BN=64, BK=32))(n, A, B, C)
        elif name == "softmax":
            rows, cols = size, 1024
            x = arr(rng.standard_normal((rows, cols)).astype(np.float32))
            o = arr(np.zeros((rows, cols), np.float32))
            go = (lambda rows, x, o: lambda: sm[(rows,)](o, x, cols, cols, cols, BLOCK=1024))(rows, x, o)
        else:
            x = arr(rng.standard_normal(size).astype(np.float32))
            y = arr(rng.standard_normal(size).astype(np.float32))
            o = arr(np.zeros(size, np.float32))
            go = (lambda n, x, y, o: lambda: add[((n + 1023) // 1024,)](x, y, o, n, BLOCK=1024))(size, x, y, o)
        out[f"{name}_{size}"] = go
    return out


def child(side: str) -> None:
    """Serve the parent: one line per request (a case name), one JSON line per answer."""
    cases = _cases(side)
    info = {"ready": True}
    if side == "warpsim":  # which mma kernel runs the matmul's mma.sync (NumPy, or compiled)
        try:
            from warpsim.tensorcore import accel
            from warpsim.tensorcore.execute import resolve

            mi = resolve("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_80")
            info["mma_kernel"] = "compiled (tensorcore.accel)" if accel.supports(mi, "sm_80") else "numpy"
        except ImportError:
            info["mma_kernel"] = "numpy"
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            break
        t, c = time.perf_counter(), time.process_time()
        cases[name]()
        print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c}), flush=True)


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", default=None)
    p.add_argument("--cases", nargs="*", default=None, help="case names (default: all)")
    p.add_argument("--_child", choices=["warpsim", "interpret"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child:
        child(a._child)
        return {}
    import platform

    import numpy
    import triton

    names = a.cases or [f"{n}_{s}" for n, s in CASES]
    procs, infos = {}, {}
    for side in ("warpsim", "interpret"):
        env = dict(os.environ, PYTHONPATH=ROOT)
        env.pop("TRITON_INTERPRET", None)
        if side == "interpret":
            env["TRITON_INTERPRET"] = "1"
        pr = subprocess.Popen([sys.executable, __file__, "--_child", side], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        info = json.loads(pr.stdout.readline())
        assert info.pop("ready")
        infos[side] = info
        procs[side] = pr

    def call(side, name):
        pr = procs[side]
        pr.stdin.write(name + "\n")
        pr.stdin.flush()
        return json.loads(pr.stdout.readline())

    res = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
                      f"numpy {numpy.__version__}",
           "triton": triton.__version__, "repeat": a.repeat, "load_at_start": os.getloadavg()[0],
           "mma_kernel": infos["warpsim"].get("mma_kernel"), "cases": {}}
    for name in names:
        first = {side: call(side, name) for side in procs}
        runs = {side: [] for side in procs}
        for r in range(a.repeat):
            order = ("warpsim", "interpret") if r % 2 == 0 else ("interpret", "warpsim")
            for side in order:
                runs[side].append(call(side, name))
        case = {"load": os.getloadavg()[0]}
        for side in procs:
            case[side] = {"first_s": first[side]["wall"], "first_cpu_s": first[side]["cpu"],
                          "median_s": _median([x["wall"] for x in runs[side]]),
                          "median_cpu_s": _median([x["cpu"] for x in runs[side]]),
                          "cpu_s": [x["cpu"] for x in runs[side]]}
        ratios = [i["cpu"] / w["cpu"] for w, i in zip(runs["warpsim"], runs["interpret"])]
        case["cpu_ratio_interpret_over_warpsim"] = _median(ratios)
        case["wall_ratio_interpret_over_warpsim"] = case["interpret"]["median_s"] / case["warpsim"]["median_s"]
        res["cases"][name] = case
        w, i = case["warpsim"], case["interpret"]
        print(f"{name:14s} warpsim {w['median_cpu_s'] * 1e3:9.1f} ms CPU {w['median_s'] * 1e3:9.1f} ms wall "
              f"(first {w['first_s']:.2f} s)   TRITON_INTERPRET {i['median_cpu_s'] * 1e3:9.1f} ms CPU "
              f"{i['median_s'] * 1e3:9.1f} ms wall (first {i['first_s']:.2f} s)   interpreter / warpsim "
              f"(paired CPU): {case['cpu_ratio_interpret_over_warpsim']:.2f}  (load {case['load']:.1f})",
              flush=True)
    for pr in procs.values():
        pr.stdin.write("\n")
        pr.stdin.flush()
        pr.wait()
    res["load_at_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
