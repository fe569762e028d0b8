"""The mma engine against the NumPy float64 floor and MMA-Sim, per form, in one run.

    PYTHONPATH=. python benchmarks/engine_ratios.py [--batch 4096] [--calls 300] [--json PATH]

For each form, in this one process (ratios compare like with like):

* warpsim: ``warpsim.mma`` on register words of ``--batch`` warps, warp-mma/s (the compiled
  kernel of warpsim.tensorcore.accel where it runs the form and a C compiler is present, as a
  user gets it; ``--numpy`` (or WARPSIM_ACCEL=0): the NumPy engine alone);
* the NumPy float64 floor: batched float64 ``np.matmul`` of (M x K) @ (K x N) + C tiles of the
  same shape and batch (no registers, no rounding: the arithmetic alone);
* MMA-Sim 2.1.1 (``pip install mmasim==2.1.1 torch``), where it has the form: one tile per
  call (its API), torch on one thread; integer and block-scaled forms are not compared.

Ratios are medians over paired runs (``--pairs``): each pair times warpsim and the floor (or
MMA-Sim) back to back in CPU time (``time.process_time``), so that load from other jobs on a
shared machine hits both sides of a pair alike; BLAS and torch on one thread (run it with
``OPENBLAS_NUM_THREADS=1``: BLAS threads spinning count as CPU time).
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
    ("e4m3_sm90", None),  # lowered to two f16 HMMAs and an add on sm_90: MMA-Sim has no such model
    ("e5m2_sm90", None),
    ("e4m3_f16_sm90", None),
    ("e4m3_f16_sm89", None),
    ("s8", None),
    ("s4", None),
    ("mxf4nvf4", None),
    ("mxf8f6f4", None),
    ("f64", ("Hopper", "m16n8k8.f64.f64.f64.f64")),
    ("b1", None),
]


def cpu(fn, reps: int = 1) -> float:
    """CPU seconds of ``reps`` calls of fn."""
    t0 = time.process_time()
    for _ in range(reps):
        fn()
    return time.process_time() - t0


def floor_fn(batch: int, m: int, n: int, k: int):
    rng = np.random.default_rng(1)
    A, B, C = (rng.standard_normal((batch, m, k)), rng.standard_normal((batch, k, n)),
               rng.standard_normal((batch, m, n)))
    out = np.empty_like(C)

    def fn():
        np.matmul(A, B, out=out)
        np.add(out, C, out=out)
    return fn


def mmasim_fn(spec, ins, calls: int):
    """``calls`` one-tile MMA-Sim calls, or None where MMA-Sim is missing."""
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
    return fn


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--calls", type=int, default=200, help="MMA-Sim calls per pair")
    p.add_argument("--pairs", type=int, default=9)
    p.add_argument("--only", default=None)
    p.add_argument("--numpy", action="store_true", help="the NumPy engine only (no compiled kernel)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.numpy:
        os.environ["WARPSIM_ACCEL"] = "0"
    from warpsim.tensorcore import accel, accel_extra

    res = {"machine": machine_info(), "load_at_start": os.getloadavg()[0], "batch": a.batch,
           "pairs": a.pairs, "compiled_kernel": accel.available(),
           "compiled_kernel_note": accel.reason, "forms": {}}
    keys = a.only.split(",") if a.only else [f[0] for f in FORMS]
    for key, spec in FORMS:
        if key not in keys:
            continue
        ins, arch, words, kw = make_inputs(key, a.batch)
        run = lambda: mma(ins, *words, arch=arch, **kw)  # noqa: E731
        run()
        fl = floor_fn(a.batch, ins.m, ins.n, ins.k)
        inner = 10  # floor calls per timing: one call is well under a millisecond
        fl()
        ms = mmasim_fn(spec, ins, a.calls) if spec else None
        x_floor, x_ms, rates, fl_rates, ms_rates = [], [], [], [], []
        for _ in range(a.pairs):
            tw = cpu(run)
            tf = cpu(fl, inner) / inner
            rates.append(a.batch / tw)
            fl_rates.append(a.batch / tf)
            x_floor.append(tw / tf)
            if ms is not None:
                tw2 = cpu(run)
                tm = cpu(ms)
                ms_rates.append(a.calls / tm)
                x_ms.append((a.batch / tw2) / (a.calls / tm))
        med = lambda v: float(np.median(v)) if v else None  # noqa: E731
        row = {"form": ins.text, "arch": arch, "compiled": accel.supports(ins, arch) or accel_extra.supports(ins, arch),
               "warpsim_per_s": med(rates), "floor_per_s": med(fl_rates), "x_floor": med(x_floor),
               "mmasim_one_tile_per_s": med(ms_rates), "x_mmasim": med(x_ms),
               "x_floor_pairs": x_floor, "x_mmasim_pairs": x_ms, "load": os.getloadavg()[0]}
        res["forms"][key] = row
        print(f"{key:10s} warpsim {row['warpsim_per_s']:10,.0f}/s  floor {row['floor_per_s']:12,.0f}/s  "
              f"= {row['x_floor']:5.1f}x floor"
              + (f"  MMA-Sim {row['mmasim_one_tile_per_s']:7,.0f}/s  warpsim = {row['x_mmasim']:6.1f}x MMA-Sim"
                 if ms is not None else "")
              + f"  ({'compiled' if row['compiled'] else 'numpy'}; load {row['load']:.2f})", flush=True)
    res["load_at_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
