"""Sparse mma.sp throughput relative to dense mma.sync, measured in one run.

    PYTHONPATH=. python benchmarks/bench_sparse.py [--warps N] [--repeats R]

For each pair, the same number of warps goes through ``warpsim.mma`` (sm_90 model, register
words from the validation generator); the best of R repeats is reported in warp-mma/s, with the
ratio sparse / dense.  The dense partner is the instruction of half the K (the same work per
output as the sparse one) and the one of the same logical K.
"""

from __future__ import annotations

import argparse
import time

import warpsim
from warpsim.validation import inputs as vin
from warpsim.validation import sparse as vs

PAIRS = [
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
     "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",
     "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32",
     "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
]


def rate(fn, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warps", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    n = a.warps
    print(f"{n} warps per call, best of {a.repeats}, sm_90 model")
    for sp_text, dense_text in PAIRS:
        ins, dense = warpsim.decode(sp_text), warpsim.decode(dense_text)
        dist = "normal" if ins.atype != "s8" else "uniform-bits"
        x = vin.make_inputs(ins, dist, n, 1)
        e = vs.metadata_words(ins, 0, dist, n, 1)
        y = vin.make_inputs(dense, dist, n, 1)
        r_sp = rate(lambda: warpsim.mma(ins, x["a"], x["b"], x["c"], metadata=e, selector=0), n, a.repeats)
        r_d = rate(lambda: warpsim.mma(dense, y["a"], y["b"], y["c"]), n, a.repeats)
        print(f"{sp_text}: {r_sp:,.0f} warp-mma/s; {dense_text}: {r_d:,.0f}; sparse/dense {r_sp / r_d:.2f}")


if __name__ == "__main__":
    main()
