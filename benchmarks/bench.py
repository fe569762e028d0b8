"""warpsim throughput benchmarks: warp-mma/s on register words, peak memory, a tiled GEMM.

Usage::

    PYTHONPATH=. python benchmarks/bench.py                   # full run (~10-15 min on 2 cores)
    PYTHONPATH=. python benchmarks/bench.py --quick           # smoke run (small batches)
    PYTHONPATH=. python benchmarks/bench.py --json out.json   # also write the results as JSON

What is measured (all in this one process unless said otherwise):

* throughput of ``warpsim.mma`` on register words, per instruction family and batch size
  (warps per call); the best of several repeats (the machine may be shared), in warp-mma/s;
* peak memory of one ``mma`` call, in a fresh subprocess per case: tracemalloc peak (numpy
  reports its buffers to tracemalloc) and the growth of ru_maxrss, both above the inputs;
* a 1024 x 1024 x 1024 bf16 GEMM through ``warpsim.gemm`` with m16n8k16 on sm_90: 64 x 128
  output tiles, 64 k-steps, every output tile of a k-step in one batched ``mma``, C chained
  through the steps (524,288 warp-mma); beside plain ``np.matmul`` of the same float64 tiles
  and the register-level floor (the same register words in and out, float64 arithmetic);
* the numpy floor per warp-mma: float64 batched (16x16)@(16x8)+C at the same batch size;
* MMA-Sim 2.1.1 (if installed) on the same m16n8k16 f16->f32 tiles, one tile per call as its
  API is meant to be used (and, for reference, its batched ``dpa`` on many tiles at once).

Ratios (warpsim / MMA-Sim, warpsim / numpy floor) are taken within the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import warpsim  # noqa: E402
from warpsim.tensorcore import blockscale
from warpsim.facts import formats  # noqa: E402
from warpsim.tensorcore.execute import mma, resolve  # noqa: E402
from warpsim.tensorcore.packing import pack, pack_bits, unpack  # noqa: E402

# (key, label, instruction, arch)
CASES = [
    ("f16_f32", "f16->f32 m16n8k16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90"),
    ("f16_f16", "f16->f16 m16n8k16", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "sm_90"),
    ("bf16", "bf16->f32 m16n8k16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "sm_90"),
    ("tf32", "tf32->f32 m16n8k8", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "sm_90"),
    ("e4m3_sm90", "e4m3->f32 m16n8k32 (lowered)", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_90"),
    ("e4m3_sm89", "e4m3->f32 m16n8k32", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_89"),
    ("e5m2_sm90", "e5m2->f32 m16n8k32 (lowered)", "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32", "sm_90"),
    ("e4m3_f16_sm90", "e4m3->f16 m16n8k32 (lowered)", "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
     "sm_90"),
    ("e4m3_f16_sm89", "e4m3->f16 m16n8k32", "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16", "sm_89"),
    ("f8f6f4", "kind::f8f6f4 e4m3 x e2m1 ->f32 m16n8k32",
     "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e2m1.f32", "sm_120a"),
    ("mxf4nvf4", "mxf4nvf4 4X ue4m3 m16n8k64",
     "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
     "sm_120a"),
    ("mxf8f6f4", "mxf8f6f4 e4m3 1X ue8m0 m16n8k32",
     "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0",
     "sm_120a"),
    ("f64", "f64 m16n8k8", "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", "sm_90"),
    ("s8", "s8->s32 m16n8k32", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "sm_90"),
    ("s4", "s4->s32 m16n8k64", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", "sm_90"),
    ("b1", "b1 and.popc m16n8k256", "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc", "sm_90"),
]
CASE_BY_KEY = {c[0]: c for c in CASES}

BATCHES = (1, 64, 4096, 65536)
QUICK_BATCHES = (1, 64, 512)
MAX_SECONDS = 20.0  # skip a batch whose single call is estimated to take longer


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def _values(rng, t: str, shape) -> np.ndarray:
    f = formats.FORMATS[t]
    if f.kind == "float":
        v = rng.standard_normal(shape)
        return np.clip(v, -f.max_finite, f.max_finite)
    if f.kind == "bits":
        return rng.integers(0, 2, shape)
    lo, hi = int(f.min_value), int(f.max_finite)
    return rng.integers(lo, hi + 1, shape)


def make_inputs(key: str, batch: int, seed: int = 0):
    """Register words (a, b, c) and scale kwargs for ``batch`` warps of case ``key``."""
    _, _, text, arch = CASE_BY_KEY[key]
    ins = resolve(text, arch)
    rng = np.random.default_rng(seed)
    words = []
    # generate at most 4096 distinct warps and tile them (packing is not what is measured)
    distinct = min(batch, 4096)
    reps = -(-batch // distinct)
    for op in "abc":
        shape = (distinct,) + ins.matrix_shape(op)
        w = pack(ins, op, _values(rng, ins.type_of(op), shape))
        if reps > 1:
            w = np.concatenate([w] * reps)[:batch]
        words.append(np.ascontiguousarray(w))
    kw = {}
    if ins.block_scale:
        v = ins.scale_vec
        lo, hi = (0x30, 0x48) if ins.stype == "ue4m3" else (120, 135)
        sa = rng.integers(lo, hi, (batch, ins.m, v))
        sb = rng.integers(lo, hi, (batch, v, ins.n))
        kw = dict(scale_a=blockscale.scatter_scales(ins, sa, "scale_a"),
                  scale_b=blockscale.scatter_scales(ins, sb, "scale_b"))
    return ins, arch, words, kw


# --------------------------------------------------------------------------------------------
# Timing helpers
# --------------------------------------------------------------------------------------------


def best_time(fn, min_total=0.5, max_reps=50, min_reps=2):
    """Best wall time of fn() over repeats (at least min_reps, until min_total seconds)."""
    times = []
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= max_reps:
            break
        if len(times) >= min_reps and time.perf_counter() - t_start >= min_total:
            break
    return min(times), len(times)


def machine_info() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or "unknown"
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    info = {
        "cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem, "python": platform.python_version(),
        "numpy": np.__version__, "platform": platform.platform(), "warpsim": warpsim.__version__,
        "loadavg_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "chunk": __import__("warpsim.tensorcore.execute", fromlist=["CHUNK"]).CHUNK,
    }
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "warpsim"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        info["git"] = rev + ("+dirty warpsim/" if dirty else "")
    except Exception:  # pragma: no cover
        info["git"] = None
    try:
        import ml_dtypes
        info["ml_dtypes"] = ml_dtypes.__version__
    except Exception:  # pragma: no cover
        pass
    return info


# --------------------------------------------------------------------------------------------
# Peak memory in a subprocess
# --------------------------------------------------------------------------------------------


def _mem_child(key: str, batch: int) -> dict:
    import gc
    import tracemalloc

    ins, arch, (a, b, c), kw = make_inputs(key, batch)
    mma(ins, a[:1], b[:1], c[:1], arch=arch, **{k: v[:1] for k, v in kw.items()})  # warm caches
    gc.collect()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is a high-water mark: measure the call first without tracemalloc
    mma(ins, a, b, c, arch=arch, **kw)
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    d = mma(ins, a, b, c, arch=arch, **kw)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    inputs = a.nbytes + b.nbytes + c.nbytes + sum(v.nbytes for v in kw.values())
    return {"tracemalloc_peak_bytes": int(peak), "maxrss_delta_bytes": int((rss1 - rss0) * 1024),
            "input_bytes": int(inputs), "output_bytes": int(d.nbytes)}


def measure_memory(key: str, batch: int, timeout=600) -> dict | None:
    cmd = [sys.executable, os.path.abspath(__file__), "--_mem", key, str(batch)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Benchmarks
# --------------------------------------------------------------------------------------------


def bench_throughput(batches, mem_batches, skip_est=MAX_SECONDS, log=print) -> list[dict]:
    rows = []
    for key, label, text, arch in CASES:
        rate = None
        for batch in batches:
            row = {"key": key, "label": label, "instr": text, "arch": arch, "batch": batch}
            if rate is not None and batch / rate > skip_est:
                row["skipped"] = f"estimated {batch / rate:.0f} s per call > {skip_est:.0f} s"
                rows.append(row)
                log(f"  {label:40s} {arch:8s} batch {batch:6d}: skipped ({row['skipped']})")
                continue
            ins, arch_, (a, b, c), kw = make_inputs(key, batch)
            fn = lambda: mma(ins, a, b, c, arch=arch_, **kw)  # noqa: E731
            fn()  # warm-up (decode caches, lookup tables)
            min_total = 0.3 if batch <= 64 else 1.0
            t, reps = best_time(fn, min_total=min_total, max_reps=200 if batch <= 64 else 5,
                                min_reps=3 if batch <= 4096 else 1)
            rate = batch / t
            row.update(seconds=t, reps=reps, warps_per_s=rate)
            if batch in mem_batches:
                m = measure_memory(key, batch)
                if m:
                    row.update(m)
            rows.append(row)
            mem = row.get("tracemalloc_peak_bytes")
            log(f"  {label:40s} {arch:8s} batch {batch:6d}: {t * 1e3:10.2f} ms  {rate:12.0f} warp-mma/s"
                + (f"  peak {mem / 2**20:8.1f} MiB" if mem else ""))
    return rows


def numpy_floor(batch: int, dtype_m=16, n=8, k=16) -> float:
    """warp-mma/s of float64 batched (16x16)@(16x8)+C: the arithmetic with nothing simulated."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((batch, dtype_m, k))
    B = rng.standard_normal((batch, k, n))
    C = rng.standard_normal((batch, dtype_m, n))
    out = np.empty_like(C)

    def fn():
        np.matmul(A, B, out=out)
        np.add(out, C, out=out)

    t, _ = best_time(fn, min_total=0.5, max_reps=50)
    return batch / t


def register_floor(batch: int) -> float:
    """warp-mma/s of the same register words in and out, with numpy float64 arithmetic.

    unpack the A/B/C words, decode, float64 batched matmul + C, round to f32, pack D: what a
    register-level simulator costs when it is not bit-exact (the like-for-like floor).
    """
    from warpsim.facts import formats
    from warpsim.tensorcore.packing import pack_bits, unpack_bits

    ins = resolve("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90")
    rng = np.random.default_rng(2)
    a = (rng.integers(0, 2**32, (batch, 32, 4), dtype=np.uint64).astype(np.uint32) & 0x3BFF3BFF)
    b = (rng.integers(0, 2**32, (batch, 32, 2), dtype=np.uint64).astype(np.uint32) & 0x3BFF3BFF)
    c = (rng.integers(0, 2**32, (batch, 32, 4), dtype=np.uint64).astype(np.uint32) & 0x3FFFFFFF)

    def fn():
        A = formats.decode(unpack_bits(ins, "a", a), "f16")
        B = formats.decode(unpack_bits(ins, "b", b), "f16")
        C = formats.decode(unpack_bits(ins, "c", c), "f32")
        D = (A @ B + C).astype(np.float32).view(np.uint32)
        return pack_bits(ins, "d", D)

    t, _ = best_time(fn, min_total=0.5, max_reps=50)
    return batch / t


def bench_gemm(size=1024, log=print, mmasim_op=None) -> dict:
    """bf16 GEMM (size^3) through ``warpsim.gemm`` with m16n8k16 on sm_90 (all output tiles
    batched per k-step), beside two floors on the same tiles: plain ``np.matmul`` of the float64
    tiles, and the register-level floor (the same register words in and out per k-step, float64
    arithmetic instead of the bit-exact engine)."""
    from warpsim.tensorcore.packing import pack_bits, unpack_bits

    text = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    ins = resolve(text, "sm_90")
    M = N = K = size
    TM, TN, TK = M // 16, N // 8, K // 16
    rng = np.random.default_rng(7)
    A = formats.decode(formats.encode(rng.standard_normal((M, K)), "bf16"), "bf16")
    B = formats.decode(formats.encode(rng.standard_normal((K, N)), "bf16"), "bf16")
    t0 = time.perf_counter()
    D = warpsim.gemm(A, B, instr=ins, arch="sm_90")
    t1 = time.perf_counter()
    At = A.reshape(TM, 16, TK, 16).transpose(0, 2, 1, 3)
    Bt = B.reshape(TK, 16, TN, 8).transpose(0, 2, 1, 3)
    # floor 1: np.matmul of the same float64 tiles, C chained through the k-steps
    f0 = time.perf_counter()
    acc = np.zeros((TM, TN, 16, 8))
    for ks in range(TK):
        acc += np.matmul(At[:, ks][:, None], Bt[ks][None, :])
    f1 = time.perf_counter()
    # floor 2: register words in and out per k-step (unpack, decode, float64 matmul + C, round
    # to f32, pack), not bit-exact
    a_regs = pack(ins, "a", At)
    b_regs = pack(ins, "b", Bt)
    r0 = time.perf_counter()
    c = np.zeros((TM, TN, 32, 4), np.uint32)
    for ks in range(TK):
        a = formats.decode(unpack_bits(ins, "a", a_regs[:, ks][:, None]), "bf16")
        b = formats.decode(unpack_bits(ins, "b", b_regs[ks][None, :]), "bf16")
        cc = formats.decode(unpack_bits(ins, "c", c), "f32")
        c = pack_bits(ins, "d", (a @ b + cc).astype(np.float32).view(np.uint32))
    r1 = time.perf_counter()
    ref = A @ B
    rel = float(np.max(np.abs(D - ref)) / np.max(np.abs(ref)))
    res = {
        "size": size, "warp_mma": TM * TN * TK, "total_s": t1 - t0, "numpy_tiles_s": f1 - f0,
        "register_floor_s": (r1 - r0) + 0.0, "max_rel_err_vs_float64": rel,
        "warps_per_s": TM * TN * TK / (t1 - t0),
        "over_numpy_tiles": (t1 - t0) / (f1 - f0), "over_register_floor": (t1 - t0) / (r1 - r0),
    }
    log(f"  GEMM {size}^3 bf16 through warpsim.gemm: {res['total_s']:.2f} s ({TK} k-steps of {TM * TN} "
        f"warps); np.matmul of the float64 tiles {res['numpy_tiles_s']:.3f} s ({res['over_numpy_tiles']:.0f}x); "
        f"register-level floor {res['register_floor_s']:.2f} s ({res['over_register_floor']:.1f}x); "
        f"max rel err {rel:.2e}")
    return res


def bench_mmasim(n_calls: int, batch_dpa: int, log=print) -> dict | None:
    try:
        import torch
        from mmasim.nv_ptx import MMA
    except Exception as e:  # not installed
        log(f"  MMA-Sim not available ({type(e).__name__}: {e}); skipped")
        return None
    import importlib.metadata as md

    torch.set_num_threads(1)
    op = MMA("Hopper", "m16n8k16.f32.f16.f16.f32")
    rng = np.random.default_rng(3)
    tiles = [(torch.from_numpy(rng.standard_normal((16, 16))).half(),
              torch.from_numpy(rng.standard_normal((16, 8))).half(),
              torch.from_numpy(rng.standard_normal((16, 8))).float()) for _ in range(64)]
    for t in tiles[:4]:
        op(*t)

    def calls():
        for i in range(n_calls):
            op(*tiles[i % len(tiles)])

    t, _ = best_time(calls, min_total=1.0, max_reps=3, min_reps=1)
    per_call = n_calls / t
    # batched dpa over many tiles (not the one-tile API; for reference)
    A = torch.from_numpy(rng.standard_normal((batch_dpa, 16, 16))).half()
    Bt = torch.from_numpy(rng.standard_normal((batch_dpa, 8, 16))).half()
    C = torch.from_numpy(rng.standard_normal((batch_dpa, 16, 8))).float()
    av = A[:, :, None, :].expand(batch_dpa, 16, 8, 16)
    bv = Bt[:, None, :, :].expand(batch_dpa, 16, 8, 16)
    tb, _ = best_time(lambda: op.dpa(av, bv, C), min_total=1.0, max_reps=5)
    res = {"version": md.version("mmasim"), "torch": torch.__version__, "torch_threads": 1,
           "calls": n_calls, "one_tile_calls_per_s": per_call,
           "dpa_batch": batch_dpa, "dpa_batched_warps_per_s": batch_dpa / tb}
    log(f"  MMA-Sim {res['version']} (torch {torch.__version__}): one tile per call "
        f"{per_call:.0f} tiles/s; batched dpa x{batch_dpa}: {res['dpa_batched_warps_per_s']:.0f} tiles/s")
    return res


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def fmt_rate(r):
    return "-" if r is None else f"{r:,.0f}"


def table(rows, batches) -> str:
    by = {}
    for r in rows:
        by.setdefault((r["key"], r["arch"]), {})[r["batch"]] = r
    head = "| family | arch | " + " | ".join(f"batch {b}" for b in batches) + \
        f" | peak MiB @{max(batches)} (inputs) |"
    lines = [head, "|" + "---|" * (len(batches) + 3)]
    for key, label, text, arch in CASES:
        d = by.get((key, arch), {})
        cells = []
        for b in batches:
            r = d.get(b)
            if r is None:
                cells.append("-")
            elif "skipped" in r:
                cells.append("skipped (" + r["skipped"].split(" per")[0] + ")")
            else:
                cells.append(fmt_rate(r["warps_per_s"]))
        mem = "-"
        for b in sorted(d, reverse=True):
            r = d[b]
            if "tracemalloc_peak_bytes" in r:
                mem = f"{r['tracemalloc_peak_bytes'] / 2**20:.1f} ({r['input_bytes'] / 2**20:.1f}) @{b}"
                break
        lines.append(f"| {label} | {arch} | " + " | ".join(cells) + f" | {mem} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="warpsim benchmarks")
    p.add_argument("--quick", action="store_true", help="small batches, small GEMM (smoke run)")
    p.add_argument("--json", metavar="PATH", help="write results as JSON")
    p.add_argument("--only", help="comma-separated case keys (" + ",".join(CASE_BY_KEY) + ")")
    p.add_argument("--no-gemm", action="store_true")
    p.add_argument("--_mem", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._mem:
        print(json.dumps(_mem_child(args._mem[0], int(args._mem[1]))))
        return 0
    global CASES
    if args.only:
        keep = set(args.only.split(","))
        CASES = [c for c in CASES if c[0] in keep]
    batches = QUICK_BATCHES if args.quick else BATCHES
    mem_batches = {max(batches)} if args.quick else {4096, 65536}
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['mem_gib']} GiB; Python {info['python']}, "
          f"numpy {info['numpy']}; warpsim git {info.get('git')}; load average at start {info['loadavg_start']}")
    t_all = time.perf_counter()
    print("throughput (best of repeats):")
    rows = bench_throughput(batches, mem_batches)
    ref_batch = 4096 if not args.quick else max(batches)
    floor = numpy_floor(ref_batch)
    print(f"numpy float64 batched (16x16)@(16x8)+C at batch {ref_batch}: {floor:,.0f} tiles/s")
    rfloor = register_floor(ref_batch)
    print(f"same register words in/out, float64 arithmetic, at batch {ref_batch}: {rfloor:,.0f} warp-mma/s")
    sim = bench_mmasim(n_calls=200 if args.quick else 1000, batch_dpa=ref_batch)
    gemm = None if args.no_gemm else bench_gemm(256 if args.quick else 1024)
    ws = next((r for r in rows if r["key"] == "f16_f32" and r["batch"] == ref_batch and "warps_per_s" in r), None)
    ratios = {}
    if ws:
        ratios["warpsim_f16_f32_batch"] = ref_batch
        ratios["warpsim_f16_f32_warps_per_s"] = ws["warps_per_s"]
        ratios["numpy_floor_warps_per_s"] = floor
        ratios["numpy_floor_over_warpsim"] = floor / ws["warps_per_s"]
        ratios["register_floor_warps_per_s"] = rfloor
        ratios["register_floor_over_warpsim"] = rfloor / ws["warps_per_s"]
        if sim:
            ratios["warpsim_over_mmasim_one_tile"] = ws["warps_per_s"] / sim["one_tile_calls_per_s"]
            ratios["warpsim_over_mmasim_batched_dpa"] = ws["warps_per_s"] / sim["dpa_batched_warps_per_s"]
    mem_1m = None
    f16 = {r["batch"]: r for r in rows if r["key"] == "f16_f32" and "tracemalloc_peak_bytes" in r}
    if len(f16) >= 2:
        b0, b1 = sorted(f16)[-2:]
        m0, m1 = f16[b0]["tracemalloc_peak_bytes"] + f16[b0]["input_bytes"], \
            f16[b1]["tracemalloc_peak_bytes"] + f16[b1]["input_bytes"]
        slope = (m1 - m0) / (b1 - b0)
        mem_1m = m1 + slope * (1_000_000 - b1)
        ratios["est_bytes_1M_warps_f16_f32_incl_inputs"] = mem_1m
    print()
    print(table(rows, batches))
    print()
    for k, v in ratios.items():
        print(f"{k}: {v:,.3f}" if isinstance(v, float) else f"{k}: {v}")
    print(f"total benchmark time {time.perf_counter() - t_all:.0f} s; load average at end {os.getloadavg()}")
    if args.json:
        out = {"machine": info, "quick": args.quick, "batches": list(batches), "throughput": rows,
               "numpy_floor": {"batch": ref_batch, "warps_per_s": floor}, "mmasim": sim,
               "gemm": gemm, "ratios": ratios, "loadavg_end": os.getloadavg()}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
