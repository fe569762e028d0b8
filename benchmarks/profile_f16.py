"""Where the time goes: sm_90 m16n8k16 f16->f32 through ``warpsim.mma`` at batch 4096.

    PYTHONPATH=. python benchmarks/profile_f16.py [--batch 4096] [--json PATH]

Four views, all measured in this process (nothing in warpsim is changed on disk):

1. cProfile of one call (top functions by own time);
2. stage timings: wrappers around the functions the call goes through (the batch-last codecs'
   gather / scatter, formats.decode_codes, numerics.compute_batch_last / dot_steps,
   engine.special_values / finite_or_zero / truncated_dot_add / exponents / truncated_sum /
   round_to, _encode_d);
3. line-level timings (a sys.settrace line tracer on the engine's hot functions: self time
   per source line, so it follows the code as it is now);
4. a what-if the lead can apply: the batch chunk size (execute.CHUNK) swept on the same inputs.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from warpsim.tensorcore import engine, execute, numerics, packing
from warpsim.facts import formats  # noqa: E402

sys.path.insert(0, HERE)
from bench import best_time, make_inputs  # noqa: E402

TEXT_KEY = "f16_f32"


def run_once(ins, arch, a, b, c):
    return execute.mma(ins, a, b, c, arch=arch)


def stage_timings(ins, arch, a, b, c, reps=3):
    """Cumulative seconds per wrapped function over one call (best of reps)."""
    targets = [
        (packing.BatchLastCodec, "gather"), (packing.BatchLastCodec, "scatter"),
        (formats, "decode_codes"), (execute, "_encode_d"),
        (numerics, "compute_batch_last"), (numerics, "dot_steps"),
        (engine, "special_values"), (engine, "finite_or_zero"), (engine, "truncated_dot_add"),
        (engine, "exponents"), (engine, "truncated_sum"), (engine, "round_to"),
    ]
    acc = defaultdict(float)
    calls = defaultdict(int)
    originals = {}

    def wrap(mod, name):
        fn = getattr(mod, name)
        originals[(mod, name)] = fn
        label = f"{mod.__name__.split('.')[-1]}.{name}"

        def w(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                acc[label] += time.perf_counter() - t0
                calls[label] += 1
        setattr(mod, name, w)

    for mod, name in targets:
        wrap(mod, name)
    best = None
    try:
        for _ in range(reps):
            acc.clear()
            calls.clear()
            t0 = time.perf_counter()
            run_once(ins, arch, a, b, c)
            total = time.perf_counter() - t0
            if best is None or total < best[0]:
                best = (total, dict(acc), dict(calls))
    finally:
        for (mod, name), fn in originals.items():
            setattr(mod, name, fn)
    return best


def line_timings(ins, arch, a, b, c, funcs=None, reps=3):
    """Per-source-line wall time inside the engine's hot functions over one mma call.

    A sys.settrace line tracer (only frames of the listed functions are traced, so numpy-level
    work dominates and the tracer's own cost is small: each line is one array operation of
    ~0.1-20 ms).  It follows the code as it is now, whatever the engine's current shape.
    """
    import inspect
    import linecache

    if funcs is None:
        funcs = [getattr(engine, n) for n in ("truncated_dot_add", "truncated_sum", "exponents",
                                              "round_to", "special_values", "finite_or_zero", "pow2")]
        funcs += [numerics.dot_steps, numerics.compute_batch_last, execute.mma,
                  packing.BatchLastCodec.gather, packing.BatchLastCodec.scatter, formats.decode_codes]
    codes = {f.__code__: f.__qualname__ for f in funcs}
    best = None
    for _ in range(reps):
        acc = defaultdict(float)
        state = {}

        def tracer(frame, event, arg):
            co = frame.f_code
            if co not in codes:
                return None

            def local(frame, event, arg):
                now = time.perf_counter()
                key = state.get(id(frame))
                if key is not None:
                    acc[key] += now - state[("t", id(frame))]
                if event == "line":
                    state[id(frame)] = (co.co_filename, frame.f_lineno, codes[co])
                    state[("t", id(frame))] = time.perf_counter()
                elif event == "return":
                    state.pop(id(frame), None)
                return local
            return local

        sys.settrace(tracer)
        t0 = time.perf_counter()
        try:
            run_once(ins, arch, a, b, c)
        finally:
            sys.settrace(None)
        total = time.perf_counter() - t0
        if best is None or total < best[0]:
            best = (total, dict(acc))
    total, acc = best
    rows = []
    for (fn, line, qual), t in sorted(acc.items(), key=lambda kv: -kv[1]):
        src = linecache.getline(fn, line).strip()
        rows.append((f"{os.path.basename(fn)}:{line} {qual}", src[:70], t))
    return total, rows


def chunk_sweep(ins, arch, a, b, c, chunks=(16, 32, 64, 128, 256, 512, 1024, 2048)):
    out = {}
    orig = execute.CHUNK
    try:
        for ch in chunks:
            execute.CHUNK = ch
            t, _ = best_time(lambda: run_once(ins, arch, a, b, c), min_total=1.0, max_reps=5)
            out[ch] = a.shape[0] / t
    finally:
        execute.CHUNK = orig
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--json")
    args = p.parse_args(argv)
    ins, arch, (a, b, c), _ = make_inputs(TEXT_KEY, args.batch)
    run_once(ins, arch, a[:1], b[:1], c[:1])
    print(f"{ins.text} on {arch}, batch {args.batch}, CHUNK {execute.CHUNK}, load {os.getloadavg()}")

    t, _ = best_time(lambda: run_once(ins, arch, a, b, c), min_total=2.0, max_reps=5)
    print(f"\nwall time per call: {t * 1e3:.1f} ms  ({args.batch / t:,.0f} warp-mma/s)")

    pr = cProfile.Profile()
    pr.enable()
    run_once(ins, arch, a, b, c)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    print("\n== cProfile (tottime) ==")
    print("\n".join(s.getvalue().splitlines()[4:32]))

    total, acc, calls = stage_timings(ins, arch, a, b, c)
    print(f"\n== stage timings (cumulative, nested; one call {total * 1e3:.1f} ms) ==")
    for k, v in sorted(acc.items(), key=lambda kv: -kv[1]):
        print(f"  {k:28s} {v * 1e3:9.1f} ms  {100 * v / total:5.1f}%   calls {calls[k]}")

    lt, lines = line_timings(ins, arch, a, b, c)
    print(f"\n== line timings (wall time per source line, calls made on the line included; traced call "
          f"{lt * 1e3:.1f} ms) ==")
    for where, src, v in lines[:28]:
        print(f"  {v * 1e3:8.2f} ms {100 * v / lt:5.1f}%  {where:42s} {src}")

    sweep = chunk_sweep(ins, arch, a, b, c)
    print("\n== what-if: execute.CHUNK (warps per chunk) ==")
    for ch, r in sweep.items():
        print(f"  CHUNK {ch:5d}: {r:10,.0f} warp-mma/s")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch": args.batch, "wall_s": t, "stages": acc, "calls": calls,
                       "lines": [list(x) for x in lines], "chunk_sweep": sweep}, f, indent=1)


if __name__ == "__main__":
    main()
