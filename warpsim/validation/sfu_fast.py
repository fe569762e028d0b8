"""The compiled SFU path against the NumPy reference, exhaustively: every f32 pattern for each
unary f32 form and bare MUFU function, ``2**26`` operand pairs per div form, ``2**26`` f64
patterns per f64 form.

Usage (``--jobs`` worker processes; prints one line per form and a JSON summary)::

    python -m warpsim.validation.sfu_fast [--jobs 16] [--out summary.json] [FORM ...]

The NumPy reference is the one proved equal to the H100 (docs/validation.md), so equality here
carries that proof over to the compiled path.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

CHUNK = 1 << 22
PAIRS = 1 << 26


def forms() -> list[str]:
    from warpsim.ptx import sfu_accel

    # the 16-bit forms are all 65,536 patterns in the tests already
    return [f for f in sfu_accel.FORMS if "16" not in f] + [f"mufu.{n}" for n in sfu_accel.MUFU]


def _words(form: str, c: int) -> list[np.ndarray]:
    """Chunk ``c`` of the operands of ``form``."""
    with np.errstate(all="ignore"):
        return _draw(form, c)


def _draw(form, c):
    if form.endswith(".f64"):
        rng = np.random.default_rng(c)
        w = rng.integers(0, 1 << 64, CHUNK, dtype=np.uint64)
        q = CHUNK // 4                     # a quarter of normal magnitudes, a quarter with the low word 0
        w[:q] = np.abs(rng.standard_normal(q) * np.exp2(rng.integers(-1100, 1100, q))).view(np.uint64)
        w[q:2 * q] &= np.uint64(0xFFFFFFFF00000000)
        return [w]
    if form.startswith("div"):
        rng = np.random.default_rng(c)
        a = rng.integers(0, 1 << 32, CHUNK, dtype=np.uint64).astype(np.uint32)
        b = rng.integers(0, 1 << 32, CHUNK, dtype=np.uint64).astype(np.uint32)
        q = CHUNK // 2                     # half of the pairs: both normal floats near each other's scale
        a[:q] = (rng.standard_normal(q) * 2.0 ** rng.integers(-140, 128, q)).astype(np.float32).view(np.uint32)
        b[:q] = (rng.standard_normal(q) * 2.0 ** rng.integers(-140, 128, q)).astype(np.float32).view(np.uint32)
        return [a, b]
    return [np.arange(c * CHUNK, (c + 1) * CHUNK, dtype=np.uint64).astype(np.uint32)]


def nchunks(form: str) -> int:
    return PAIRS // CHUNK if form.endswith(".f64") or form.startswith("div") else (1 << 32) // CHUNK


def check(form: str, part: int, nparts: int, limit: int | None = None) -> int:
    """Words of ``form`` where compiled and NumPy differ, over chunks ``part::nparts`` (of the
    first ``limit`` chunks, if given)."""
    from warpsim.ptx import sfu, sfu_accel
    from warpsim.validation.alu_compare import all_ops, decode

    if not sfu_accel.available():
        raise RuntimeError(f"compiled SFU path unavailable: {sfu_accel.reason}")
    bad = 0
    if form.startswith("mufu."):
        name = form[5:]
        for c in range(part, min(nchunks(form), limit or 1 << 40), nparts):
            (w,) = _words(form, c)
            with np.errstate(all="ignore"):
                bad += int(np.count_nonzero(sfu_accel.mufu(name, w) != getattr(sfu, name)(w)))
        return bad
    spec, typ, mods = decode(form, all_ops())
    for c in range(part, min(nchunks(form), limit or 1 << 40), nparts):
        srcs = _words(form, c)
        y = spec.fn(srcs, type=typ, **mods)
        with sfu_accel.disabled(), np.errstate(all="ignore"):
            r = spec.fn(srcs, type=typ, **mods)
        bad += int(np.count_nonzero(y != r))
    return bad


def _job(args):
    form, part, nparts, limit = args
    t0 = time.process_time()
    return form, part, check(form, part, nparts, limit), time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("forms", nargs="*")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out")
    ap.add_argument("--limit", type=int, help="only the first LIMIT chunks of each form (a smoke test)")
    a = ap.parse_args()
    todo = a.forms or forms()
    import multiprocessing as mp

    from warpsim.ptx import sfu_accel

    from warpsim.ptx import sfu

    t0 = time.time()
    for f in todo:                     # tables decoded once, before the workers fork
        tab = sfu_accel.FORMS[f][1] if f in sfu_accel.FORMS else sfu_accel._MUFU_TABLE[f[5:]]
        sfu_accel.compact(tab)
        sfu.table(tab)
    for t in ("rcp", "rsq", "sqrt"):
        sfu._corrections(t)
    summary = {"forms": {}, "jobs": a.jobs, "compiled": sfu_accel.available(), "reason": sfu_accel.reason,
               "setup_s": round(time.time() - t0, 1)}
    parts = max(1, a.jobs)
    jobs = [(f, p, parts, a.limit) for f in todo for p in range(parts)]
    with mp.get_context("fork").Pool(a.jobs) as pool:
        for form, part, bad, cpu in pool.imap_unordered(_job, jobs):
            n = min(nchunks(form), a.limit or 1 << 40)
            s = summary["forms"].setdefault(form, {"words": 0, "mismatches": 0, "cpu_s": 0.0, "parts": 0})
            s["words"] += len(range(part, n, parts)) * CHUNK
            s["mismatches"] += bad
            s["cpu_s"] = round(s["cpu_s"] + cpu, 1)
            s["parts"] += 1
            if s["parts"] == parts:
                print(f"{form:26s} {s['words']:>14,d} words  {s['mismatches']} mismatches", flush=True)
            summary["total_words"] = sum(v["words"] for v in summary["forms"].values())
            summary["total_mismatches"] = sum(v["mismatches"] for v in summary["forms"].values())
            summary["wall_s"] = round(time.time() - t0, 1)
            if a.out:                  # as it goes: a run cut short keeps what it checked
                with open(a.out, "w") as f:
                    json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "forms"}))


if __name__ == "__main__":
    main()
