"""Throughput of the bit-exact special-function forms against add.f32 (issue 21's bound: 3x).

Usage::

    PYTHONPATH=. python benchmarks/bench_sfu.py [--repeats 7] [--warps 4096]

For each form: ``--repeats`` paired calls (the form's OpSpec function, then ``add.rn.f32``'s, on
the registers of ``--warps`` warps; realistic operands: normal floats of both signs), timed in
CPU time (time.process_time), reported as lane-instructions per second (median) and as the
median of the paired ratios form / add (``/add``).  The last column, ``t/t_add``, is the
compiled form's median time over that of ``add.rn.f32`` paired with itself: the add that follows
a form in a pair runs slower when the form's table lookups have evicted its operands from the
cache (up to 2x after a 4 MB table here), which flatters the paired ratio of the big-table forms.
The tables are loaded before timing (their one-time decode is printed apart).  The machine may
be shared: the load average is printed.

Each form is timed twice in the same run: ``numpy`` (the reference path, as
:func:`warpsim.ptx.sfu_accel.disabled` selects it) and ``compiled`` (the C path of
:mod:`warpsim.ptx.sfu_accel`, where it is built), each paired with ``add.rn.f32``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from warpsim.ptx import sfu, sfu_accel
from warpsim.validation.alu_compare import all_ops, decode

FORMS = ["ex2.approx.ftz.f32", "ex2.approx.f32", "lg2.approx.ftz.f32", "lg2.approx.f32",
         "rcp.approx.ftz.f32", "rcp.approx.f32", "rsqrt.approx.ftz.f32", "rsqrt.approx.f32",
         "sqrt.approx.ftz.f32", "sqrt.approx.f32", "div.full.f32", "div.full.ftz.f32",
         "div.approx.f32", "div.approx.ftz.f32", "ex2.approx.f16x2", "ex2.approx.ftz.bf16x2",
         "tanh.approx.f16x2", "rcp.approx.ftz.f64", "rsqrt.approx.ftz.f64", "rsqrt.approx.f64",
         "sin.approx.f32", "cos.approx.f32", "tanh.approx.f32"]
TABLES = ["rcp", "rsq", "sqrt", "ex2", "lg2", "ex2_f16", "ex2_bf16", "tanh_f16", "tanh_bf16",
          "rcp64h", "rsq64h", "tanh", "sin.res", "sin.coef", "sin.xi", "sin.xv"]


def _paired(fn, base, repeats):
    """Median CPU time of ``fn`` and median of the paired ratios fn / base."""
    fn()
    base()
    ts, rs = [], []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        t1 = time.process_time()
        base()
        t2 = time.process_time()
        ts.append(t1 - t0)
        rs.append((t1 - t0) / max(t2 - t1, 1e-9))
    return float(np.median(ts)), float(np.median(rs))


def _sources(typ, nsrc, n, rng):
    if typ == "f64":
        return [np.abs(rng.standard_normal(n)).view(np.uint64) for _ in range(nsrc)]
    if typ.endswith("x2"):
        return [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(nsrc)]
    return [(rng.standard_normal(n) * 4).astype(np.float32).view(np.uint32) for _ in range(nsrc)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warps", type=int, default=4096)
    ap.add_argument("--forms", nargs="*", default=FORMS, help="a subset of the forms")
    ap.add_argument("--compiled-only", action="store_true", help="skip the NumPy path's timings")
    a = ap.parse_args()
    ops = all_ops()
    rng = np.random.default_rng(0)
    n = 32 * a.warps
    print(f"load average {os.getloadavg()}, numpy {np.__version__}, {os.cpu_count()} CPUs, {n} lanes")
    for t in TABLES + ["sin"]:
        t0 = time.perf_counter()
        try:
            sfu.table(t)
        except (KeyError, OSError):   # an older tree (benchmarking before/after)
            continue
        print(f"table {t:10s} decoded in {1e3 * (time.perf_counter() - t0):6.1f} ms")
    for t in ("rcp", "rsq", "sqrt"):
        if hasattr(sfu, "_corrections"):
            t0 = time.perf_counter()
            sfu._corrections(t)
            print(f"corrections {t:4s} derived in {1e3 * (time.perf_counter() - t0):6.1f} ms")
    print(f"compiled path: {sfu_accel.available()} ({sfu_accel.reason or 'built'})")
    if sfu_accel.available():
        for t in dict.fromkeys(tab for _, tab in sfu_accel.FORMS.values()):
            t0 = time.perf_counter()
            c = sfu_accel.compact(t)
            extra = f", {c.nbytes / 2**20:.2f} MB ({c.R}-bit codes, {c.ndense} dense segments)" if hasattr(c, "R") else ""
            if getattr(c, "band", None) is not None:
                extra += (f"; band model: {c.band.nseg} segments, {100 * c.band.uncertain:.1f}% of keys uncertain, "
                          f"{c.band.nbytes / 2**20:.2f} MB")
            print(f"compact {t:10s} derived in {1e3 * (time.perf_counter() - t0):6.1f} ms{extra}")
    aspec, atyp, amods = decode("add.rn.f32", ops)
    asrc = _sources("f32", 2, n, rng)
    add = lambda: aspec.fn(asrc, type=atyp, **amods)  # noqa: E731
    tadd, _ = _paired(add, add, a.repeats)
    print(f"{'add.rn.f32':26s} {n / tadd:12.3g} lanes/s  1.00x")
    print(f"{'form':26s} {'numpy lanes/s':>14s} {'/add':>7s} {'compiled lanes/s':>17s} {'/add':>7s} {'t/t_add':>8s}")
    for form in a.forms:
        spec, typ, mods = decode(form, ops)
        src = _sources(typ, spec.nsrc, n, rng)
        t, r = float("nan"), float("nan")
        if not a.compiled_only:
            with sfu_accel.disabled():
                t, r = _paired(lambda: spec.fn(src, type=typ, **mods), add, a.repeats)
        tc, rc = _paired(lambda: spec.fn(src, type=typ, **mods), add, a.repeats)
        print(f"{form:26s} {n / t:14.3g} {r:6.2f}x {n / tc:17.3g} {rc:6.2f}x {tc / tadd:7.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
