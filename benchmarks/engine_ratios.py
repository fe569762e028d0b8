"""The mma engine against the NumPy float64 floor and MMA-Sim, per form, in one run.

    PYTHONPATH=. python benchmarks/engine_ratios.py [--batch 4096] [--calls 300] [--json PATH]

For each form, in this one process (ratios compare like with like):

* warpsim: ``warpsim.mma`` on register words of ``--batch`` warps (best of repeats), warp-mma/s;
* the NumPy float64 floor: batched float64 ``np.matmul`` of (M x K) @ (K x N) + C tiles of the
  same shape and batch (no registers, no rounding: the arithmetic alone);
* MMA-Sim 2.1.1 (``pip install mmasim==2.1.1 torch``), where it has the form: one tile per
  call (its API), torch on one thread; integer forms it does not model.

Ratios: warpsim time / floor time (how far above the floor), warpsim rate / MMA-Sim rate.
Times are the best CPU time of repeats (``time.process_time``), with BLAS and torch on one
thread: on a shared machine wall time measures the other jobs (run it with
``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from bench import machine_info, make_inputs  # noqa: E402

from warpsim.tensorcore.execute import mma  # noqa: E402

# (bench.py case key, MMA-Sim (arch, shape_and_type) or None)
FORMS = [
    ("f16_f32", ("Hopper", "m16n8k16.f32.f16.f16.f32")),
    ("f16_f16", ("Hopper", "m16n8k16.f16.f16.f16.f16")),
    ("bf16", ("Hopper", "m16n8k16.f32.bf16.bf16.f32")),
    ("tf32", ("Hopper", "m16n8k8.f32.tf32.tf32.f32")),
    ("e4m3_sm89", ("Ada Lovelace", "m16n8k32.f32.e4m3.e4m3.f32")),
    ("s8", None),
    ("f64", ("Hopper", "m16n8k8.f64.f64.f64.f64")),
    ("b1", None),
]


def best_time(fn, min_total=0.5, max_reps=50, min_reps=3):
    """Best CPU time (``time.process_time``: what holds on a shared, overloaded machine) of
    fn() over repeats; BLAS and torch are kept to one thread, so CPU time is the work done."""
    times = []
    start = time.process_time()
    while True:
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
        if len(times) >= max_reps or (len(times) >= min_reps and time.process_time() - start >= min_total):
            break
    return min(times), len(times)


def floor(batch: int, m: int, n: int, k: int) -> float:
    rng = np.random.default_rng(1)
    A, B, C = (rng.standard_normal((batch, m, k)), rng.standard_normal((batch, k, n)),
               rng.standard_normal((batch, m, n)))
    out = np.empty_like(C)

    def fn():
        np.matmul(A, B, out=out)
        np.add(out, C, out=out)
    return batch / best_time(fn, min_total=0.5)[0]


def mmasim_rate(spec, ins, calls: int) -> float | None:
    try:
        import torch
        from mmasim.nv_ptx import MMA
    except Exception:  # noqa: BLE001 - not installed
        return None
    torch.set_num_threads(1)
    op = MMA(*spec)
    rng = np.random.default_rng(3)
    tt = {"f16": torch.half, "bf16": torch.bfloat16, "tf32": torch.float32, "f32": torch.float32,
          "f64": torch.float64, "e4m3": torch.float8_e4m3fn}
    m, n, k = ins.m, ins.n, ins.k
    tiles = []
    for _ in range(32):
        a = torch.from_numpy(rng.standard_normal((m, k))).to(tt[ins.atype])
        b = torch.from_numpy(rng.standard_normal((k, n))).to(tt[ins.btype])
        c = torch.from_numpy(rng.standard_normal((m, n))).to(tt[ins.ctype])
        tiles.append((a, b, c))
    for t in tiles[:3]:
        op(*t)

    def fn():
        for i in range(calls):
            op(*tiles[i % 32])
    return calls / best_time(fn, min_total=1.0, max_reps=3, min_reps=1)[0]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--only", default=None)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    res = {"machine": machine_info(), "load_at_start": os.getloadavg()[0], "batch": a.batch, "forms": {}}
    keys = a.only.split(",") if a.only else [f[0] for f in FORMS]
    for key, spec in FORMS:
        if key not in keys:
            continue
        ins, arch, words, kw = make_inputs(key, a.batch)
        t, reps = best_time(lambda: mma(ins, *words, arch=arch, **kw), min_total=1.0)
        rate = a.batch / t
        fl = floor(a.batch, ins.m, ins.n, ins.k)
        ms = mmasim_rate(spec, ins, a.calls) if spec else None
        row = {"form": ins.text, "arch": arch, "warpsim_per_s": rate, "floor_per_s": fl,
               "x_floor": fl / rate, "mmasim_one_tile_per_s": ms,
               "x_mmasim": rate / ms if ms else None, "load": os.getloadavg()[0]}
        res["forms"][key] = row
        print(f"{key:10s} warpsim {rate:10,.0f}/s  floor {fl:12,.0f}/s  = {fl / rate:5.1f}x floor"
              + (f"  MMA-Sim {ms:8,.0f}/s  warpsim = {rate / ms:6.1f}x MMA-Sim" if ms else "")
              + f"  (load {row['load']:.2f})", flush=True)
    res["load_at_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
