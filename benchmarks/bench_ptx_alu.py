"""Throughput of the ALU semantics (warpsim.ptx integer/floating/convert/compare/approx).

Usage::

    PYTHONPATH=. python benchmarks/bench_ptx_alu.py [--repeats 7]

For each instruction form: the best of ``--repeats`` calls of its OpSpec function on the
registers of 4,096 warps (131,072 lanes) and of one warp (32 lanes), as lane-instructions per
second, and the ratio to NumPy's own float32 add on the same number of lanes in the same run
(the floor: one vectorized pass).  Inputs are realistic values (normal floats, random integer
words), not NaN-heavy bit patterns.  The machine may be shared: the load average is printed.
Forms with a fast path (``OpSpec.specialize``, what the PTX machine runs) get a second line,
``fast``, measured the same way (shaped (warps, 32), as registers are).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from warpsim.validation.alu_compare import all_ops, decode

FORMS = [
    "add.rn.f32", "add.rz.f32", "mul.rn.ftz.f32", "fma.rn.f32", "fma.rn.f16x2", "fma.rn.bf16x2",
    "add.rn.f16x2", "max.f16x2", "min.f32", "div.rn.f32", "add.rn.f64", "fma.rn.f64",
    "add.s32", "mad.lo.s32", "mul.hi.u32", "mul.wide.s32", "dp4a.s32.s32",
    "cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32", "cvt.rn.satfinite.e4m3x2.f32",
    "cvt.rn.f16x2.e4m3x2", "cvt.f32.f16", "cvt.rzi.s32.f32", "cvt.rn.f32.s32",
    "setp.lt.f32", "selp.b32", "ex2.approx.ftz.f32",
]


def _sources(form: str, n: int, rng) -> list:
    spec, typ, mods = decode(form, OPS)
    out = []
    src_type = typ.split(".")[-1]
    from warpsim.ptx.ops.convert import NSRC

    nsrc = NSRC.get(typ, 1) if form.startswith("cvt") else spec.nsrc
    for k in range(nsrc):
        if form.startswith("selp") and k == 2:
            out.append(rng.random(n) < 0.5)
        elif src_type in ("f32",):
            out.append(rng.standard_normal(n).astype(np.float32).view(np.uint32))
        elif src_type == "f64":
            out.append(rng.standard_normal(n).view(np.uint64))
        elif src_type in ("f16x2", "bf16x2"):
            h = rng.standard_normal(2 * n).astype(np.float32)
            if src_type == "f16x2":
                out.append(h.astype(np.float16).view(np.uint32))
            else:
                out.append((h.view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(np.uint32))
        elif src_type in ("f16",):
            out.append(rng.standard_normal(n).astype(np.float16).view(np.uint16))
        elif src_type in ("e4m3x2",):
            out.append(rng.integers(0, 1 << 16, n).astype(np.uint16))
        else:
            out.append(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32))
    return out


def _best(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


OPS = all_ops()


def _fast(spec, typ, mods, nsrc):
    """The form's fast path bound to its qualifiers, or None."""
    if spec.specialize is None:
        return None

    def generic(*s):
        o = spec.fn(list(s), type=typ, **mods)
        return o[0] if isinstance(o, tuple) else o
    return spec.specialize(typ, mods, nsrc, generic)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    print(f"{'form':34s} {'4096 warps: lanes/s':>20s} {'x floor':>8s} {'1 warp: instr/s':>16s}")
    for n_warps in (4096,):
        n = 32 * n_warps
        x = rng.standard_normal(n).astype(np.float32)
        floor = _best(lambda: x + x, a.repeats)
        for form in FORMS:
            spec, typ, mods = decode(form, OPS)
            big = _sources(form, n, rng)
            one = [s[:32] for s in big]
            t_big = _best(lambda: spec.fn(big, type=typ, **mods), a.repeats)
            t_one = _best(lambda: spec.fn(one, type=typ, **mods), a.repeats)
            print(f"{form:34s} {n / t_big:20.3g} {t_big / floor:8.0f} {1 / t_one:16.3g}")
            fast = _fast(spec, typ, mods, len(big))
            if fast is not None:
                regs = [s.reshape(n_warps, 32) for s in big]
                with np.errstate(all="ignore"):
                    t_big = _best(lambda: fast(*regs), a.repeats)
                    t_one = _best(lambda: fast(*one), a.repeats)
                print(f"{'  fast':34s} {n / t_big:20.3g} {t_big / floor:8.0f} {1 / t_one:16.3g}")


if __name__ == "__main__":
    main()
