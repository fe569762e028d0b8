"""Two builds of the compiled mma kernel timed against each other in one process, interleaved.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/accel_ab.py OLD_accel.c [--forms f16_f32,tf32]

OLD_accel.c: another version of ``warpsim/tensorcore/_accel.c`` with the same ctypes structures
(e.g. ``git show e0ee9a6:warpsim/tensorcore/_accel.c > /tmp/old.c``).  Both are compiled (each
keyed by its source in the cache), and for each form of ``engine_ratios.py`` the compiled kernel
runs ``--batch`` warps of the same register words through each build in turn, ``--rounds``
times; it prints the median CPU time per warp of each and their ratio.  On a machine shared with
other jobs, interleaving in one process keeps load changes from favouring either side (separate
runs of engine_ratios.py move by up to 2x at a load of 5-6).
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

from warpsim.tensorcore import accel  # noqa: E402


def _plan_with(src: str, ins, arch):
    """The plan of ``ins`` on ``arch`` with the kernel compiled from ``src``."""
    build = accel._build
    accel._build = lambda: build(src)  # library() builds through the module's _build
    accel._tried, accel._lib = False, None
    accel._PLANS.clear()
    try:
        if not accel.available():
            raise SystemExit(f"kernel not built from {src}: {accel.reason}")
        if os.path.basename(accel.library()._name) != os.path.basename(build(src)._name):
            raise SystemExit(f"not the build of {src}")
        return accel.plan(ins, arch)
    finally:
        accel._build = build
        accel._PLANS.clear()


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", help="the other _accel.c")
    p.add_argument("--forms", default="f16_f32,f16_f16,bf16,tf32,e4m3_sm89,e4m3_sm90,e5m2_sm90,"
                                      "e4m3_f16_sm90,e4m3_f16_sm89,s8,s4")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=5, help="calls per timing")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    res = {"machine": machine_info(), "load_at_start": os.getloadavg()[0], "batch": a.batch,
           "old": os.path.abspath(a.old), "forms": {}}
    for key in a.forms.split(","):
        ins, arch, words, _ = make_inputs(key, a.batch)
        plans = {"old": _plan_with(os.path.abspath(a.old), ins, arch), "new": _plan_with(accel._SRC, ins, arch)}
        assert plans["old"].fn is not plans["new"].fn
        out = np.empty((a.batch, 32, ins.regs["d"]), np.uint32)
        same = []
        for pl in plans.values():
            pl(*words, out, "warp-first")
            same.append(out.copy())
        assert (same[0] == same[1]).all(), f"{key}: the two builds give different words"
        t = {k: [] for k in plans}
        for _ in range(a.rounds):
            for k, pl in plans.items():
                t0 = time.process_time()
                for _ in range(a.reps):
                    pl(*words, out, "warp-first")
                t[k].append((time.process_time() - t0) / a.reps / a.batch * 1e6)
        med = {k: float(np.median(v)) for k, v in t.items()}
        row = {"form": ins.text, "arch": arch, "old_us_per_warp": med["old"], "new_us_per_warp": med["new"],
               "speedup": med["old"] / med["new"], "load": os.getloadavg()[0]}
        res["forms"][key] = row
        print(f"{key:14s} old {med['old']:.3f} us/warp  new {med['new']:.3f} us/warp  = {row['speedup']:.2f}x"
              f"  (load {row['load']:.2f})", flush=True)
    res["load_at_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
