"""Throughput of the bit-exact special-function forms against add.f32 (issue 21's bound: 3x).

Usage::

    PYTHONPATH=. python benchmarks/bench_sfu.py [--repeats 7] [--warps 4096]

For each form: the best of ``--repeats`` calls of its OpSpec function on the registers of
``--warps`` warps (realistic operands: normal floats of both signs), as lane-instructions per
second, and its time over ``add.rn.f32``'s (the same OpSpec path) in the same run.  The tables
are loaded before timing (their one-time decode is printed apart).  The machine may be shared:
the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from warpsim.ptx import sfu
from warpsim.validation.alu_compare import all_ops, decode

FORMS = ["ex2.approx.ftz.f32", "ex2.approx.f32", "lg2.approx.ftz.f32", "lg2.approx.f32",
         "rcp.approx.ftz.f32", "rcp.approx.f32", "rsqrt.approx.ftz.f32", "rsqrt.approx.f32",
         "sqrt.approx.ftz.f32", "sqrt.approx.f32", "div.full.f32", "div.full.ftz.f32",
         "div.approx.f32", "div.approx.ftz.f32", "ex2.approx.f16x2", "ex2.approx.ftz.bf16x2",
         "tanh.approx.f16x2", "rcp.approx.ftz.f64", "rsqrt.approx.ftz.f64", "rsqrt.approx.f64"]
TABLES = ["rcp", "rsq", "sqrt", "ex2", "lg2", "ex2_f16", "ex2_bf16", "tanh_f16", "tanh_bf16",
          "rcp64h", "rsq64h"]


def _best(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _sources(typ, nsrc, n, rng):
    if typ == "f64":
        return [np.abs(rng.standard_normal(n)).view(np.uint64) for _ in range(nsrc)]
    if typ.endswith("x2"):
        return [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(nsrc)]
    return [(rng.standard_normal(n) * 4).astype(np.float32).view(np.uint32) for _ in range(nsrc)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--warps", type=int, default=4096)
    a = ap.parse_args()
    ops = all_ops()
    rng = np.random.default_rng(0)
    n = 32 * a.warps
    print(f"load average {os.getloadavg()}, numpy {np.__version__}, {os.cpu_count()} CPUs, {n} lanes")
    for t in TABLES:
        t0 = time.perf_counter()
        sfu.table(t)
        print(f"table {t:10s} decoded in {1e3 * (time.perf_counter() - t0):6.1f} ms")
    spec, typ, mods = decode("add.rn.f32", ops)
    src = _sources("f32", 2, n, rng)
    base = _best(lambda: spec.fn(src, type=typ, **mods), a.repeats)
    print(f"{'add.rn.f32':26s} {n / base:12.3g} lanes/s  1.00x")
    for form in FORMS:
        spec, typ, mods = decode(form, ops)
        src = _sources(typ, spec.nsrc, n, rng)
        t = _best(lambda: spec.fn(src, type=typ, **mods), a.repeats)
        print(f"{form:26s} {n / t:12.3g} lanes/s  {t / base:4.2f}x")


if __name__ == "__main__":
    main()
