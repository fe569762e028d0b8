"""Block-scaled mma, dense and sparse: the compiled kernel, the NumPy engine and the float64 floor,
in one run.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/block_scaled.py [--batch 4096] [--json PATH]

Per form (sm_120a model): ``warpsim.mma`` on ``--batch`` warps of register words, scale words and
(mma.sp) metadata words, as a user calls it, with the compiled kernel (warpsim.tensorcore.accel_extra)
and with the NumPy engine alone (the compiled kernel switched off in-process); the floor is
batched float64 ``np.matmul`` + C of the tiles the hardware multiplies (M x K' @ K' x N, K' = K,
or K / 2 for mma.sp: the kept elements).  Medians over paired runs (``--pairs``) of CPU time
(``time.process_time``), each pair timing the three back to back.
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

from bench import machine_info  # noqa: E402
from engine_ratios import cpu, floor_fn  # noqa: E402

from warpsim.tensorcore import accel_extra, sparse  # noqa: E402
from warpsim.tensorcore.blockscale import scatter_scales  # noqa: E402
from warpsim.tensorcore.execute import mma, resolve  # noqa: E402
from warpsim.tensorcore.packing import pack  # noqa: E402

FORMS = [
    "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0",
    "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
]


def inputs(ins, n: int, seed: int = 0):
    """Register words of normal values, finite scales, valid metadata (mma.sp)."""
    rng = np.random.default_rng(seed)
    words = [pack(ins, op, rng.standard_normal((n,) + ins.matrix_shape(op))) for op in "abc"]
    lo, hi = (0x30, 0x48) if ins.stype == "ue4m3" else (120, 135)
    v = ins.scale_vec
    kw = dict(scale_a=scatter_scales(ins, rng.integers(lo, hi, (n, ins.m, v)), "scale_a"),
              scale_b=scatter_scales(ins, rng.integers(lo, hi, (n, v, ins.n)), "scale_b"))
    if ins.sparse:
        nib = rng.choice(sparse.valid_nibbles(ins), (n, 32, 8)).astype(np.uint32)
        kw.update(metadata=(nib << (4 * np.arange(8, dtype=np.uint32))).sum(-1).astype(np.uint32), selector=0)
    return words, kw


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    res = {"machine": machine_info(), "load_at_start": os.getloadavg()[0], "batch": a.batch, "pairs": a.pairs,
           "forms": {}}
    supports = accel_extra.supports
    for text in FORMS:
        ins = resolve(text, "sm_120a")
        words, kw = inputs(ins, a.batch)
        run = lambda: mma(ins, *words, arch="sm_120a", **kw)  # noqa: E731

        def numpy_run():
            accel_extra.supports = lambda *x: False
            try:
                return run()
            finally:
                accel_extra.supports = supports
        assert supports(ins, "sm_120a") and (run() == numpy_run()).all()
        fl = floor_fn(a.batch, ins.m, ins.n, ins.k // 2 if ins.sparse else ins.k)
        fl()
        xf, xn, rates = [], [], []
        for _ in range(a.pairs):
            tw = cpu(run)
            tn = cpu(numpy_run)
            tf = cpu(fl, 10) / 10
            rates.append(a.batch / tw)
            xf.append(tw / tf)
            xn.append(tn / tw)
        row = {"compiled_per_s": float(np.median(rates)), "x_floor": float(np.median(xf)),
               "numpy_over_compiled": float(np.median(xn)), "load": os.getloadavg()[0]}
        res["forms"][text] = row
        print(f"{text.replace('mma.sp::ordered_metadata.sync.aligned.', 'sp ').replace('mma.sync.aligned.', ''):80s} "
              f"{row['compiled_per_s']:9,.0f}/s  {row['x_floor']:5.1f}x floor  "
              f"{row['numpy_over_compiled']:5.1f}x faster than NumPy  (load {row['load']:.2f})", flush=True)
    res["load_at_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
