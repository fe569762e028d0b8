"""A suite of real CUDA kernels (``tests/kernels/*.cu``, compiled to PTX with ``nvcc -ptx
-arch=sm_90``) with seeded host-side inputs, run on a GPU through CuPy and in warpsim.

Each :class:`Case` names a PTX file, an entry, a launch shape and an input generator.  On the
GPU, :func:`run_gpu` loads exactly the committed PTX (the driver JIT-compiles it) and launches
it with parameter bytes marshalled by :func:`warpsim.kernel.args.marshal`, the same code
``warpsim.Module.launch`` uses.  :func:`collect` writes one ``.npz`` per case holding every
argument array before (``in_<i>``) and after (``out_<i>``) the kernel; CI compares warpsim's
results with those files word for word (``tests/test_kernel_suite.py``).

Command line (on the GPU machine): ``python -m warpsim.validation.kernel_suite --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

KERNEL_DIR = Path(__file__).resolve().parents[2] / "tests" / "kernels"
DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "kernels"
POISON = 0xA5


def _poison(shape, dtype) -> np.ndarray:
    return np.full(int(np.prod(shape)) * np.dtype(dtype).itemsize, POISON, np.uint8).view(dtype).reshape(shape)


def _f16(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _bf16(rng, shape, scale=1.0):
    import ml_dtypes
    return (rng.standard_normal(shape) * scale).astype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class Case:
    """One kernel launch of the suite: PTX file stem, entry, shape, inputs."""

    name: str
    source: str
    kernel: str
    grid: tuple
    block: tuple
    make: Callable[[np.random.Generator], list]
    shared_bytes: int = 0
    seed: int = 0
    needs: tuple = field(default=())  # instruction families warpsim must have (else pending)
    #: argument index -> indices of the words (uint32 view, or the element width if smaller)
    #: to compare, or None to compare none: for results the hardware may order differently
    #: (the old values atomics return, floating-point sums, exch/cas winners)
    compare: dict = field(default_factory=dict)

    @property
    def ptx_path(self) -> Path:
        return KERNEL_DIR / f"{self.source}.ptx"

    def args(self) -> list:
        return self.make(np.random.default_rng(self.seed))


def _gemm(rng, M=128, N=128, K=128):
    return [_f16(rng, (M, K)), _f16(rng, (N, K)), _poison((M, N), np.float32), np.int32(M), np.int32(N), np.int32(K)]


def pack_marlin(q: np.ndarray) -> np.ndarray:
    """Pack unsigned int4 weights ``q`` (K x N, values 0..15) into the fragment-ordered words
    of ``marlin_w4a16``: word [(k/16, n/16, lane)] holds, for lane (g = lane/4, t = lane%4),
    nibbles 0/4 = B[2t, 2t+1][g], 1/5 = B[2t+8, 2t+9][g], 2/6 and 3/7 the same for column g+8."""
    K, N = q.shape
    out = np.zeros((K // 16, N // 16, 32), np.uint32)
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    for kt in range(K // 16):
        for nt in range(N // 16):
            blk = q[kt * 16:(kt + 1) * 16, nt * 16:(nt + 1) * 16].astype(np.uint32)
            nib = [blk[2 * t, g], blk[2 * t + 8, g], blk[2 * t, g + 8], blk[2 * t + 8, g + 8],
                   blk[2 * t + 1, g], blk[2 * t + 9, g], blk[2 * t + 1, g + 8], blk[2 * t + 9, g + 8]]
            w = np.zeros(32, np.uint32)
            for pos, v in enumerate(nib):
                w |= v << np.uint32(4 * pos)
            out[kt, nt] = w
    return out.reshape(-1).view(np.int32)


def _marlin(rng, M=32, N=128, K=128):
    q = rng.integers(0, 16, (K, N))
    scales = (rng.uniform(0.5, 2.0, N) / 16).astype(np.float16)
    return [_f16(rng, (M, K)), pack_marlin(q), scales, _poison((M, N), np.float16),
            np.int32(M), np.int32(N), np.int32(K), np.zeros(1, np.int32)]


def _fp8(rng, M=32, N=32, K=64):
    A = (rng.standard_normal((M, K)) * 40).astype(np.float32)
    A[0, 0], A[1, 5], A[2, 7], A[3, 9] = np.nan, np.inf, -np.inf, 1e6
    A[4, :4] = [1e-9, -1e-9, 3e-3, -2e-3]  # subnormal and underflow territory of e4m3
    B = (rng.standard_normal((K, N)) * 3).astype(np.float32)
    B[5, 3] = 1e9
    return [A, B, np.float32(4.0), np.float32(0.5), np.float32(0.5), _poison((M, N), np.float32),
            _poison((M * K,), np.uint8), np.int32(M), np.int32(N), np.int32(K)]


def _softmax(rng, rows=16, cols=128):
    X = rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(3)
    X[3, 17] = np.float32(-0.0)
    return [X, _poison((rows, cols), np.float32), _poison((rows, 2), np.float32), np.zeros(16, np.uint32),
            np.zeros(1, np.uint32), np.full(1, np.iinfo(np.int32).min, np.int32), np.int32(cols)]


_META_PAIRS = np.array([0b0100, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110], np.uint32)  # idx1<<2|idx0, idx0<idx1


def _sparse(rng, M=32, N=32, K=64):
    nib = _META_PAIRS[rng.integers(0, 6, (M // 16) * (K // 32) * 32 * 8)].reshape(-1, 8)
    meta = np.zeros(nib.shape[0], np.uint32)
    for k in range(8):
        meta |= nib[:, k] << np.uint32(4 * k)
    return [_f16(rng, (M, K // 2)), meta, _f16(rng, (N, K)), _poison((M, N), np.float32),
            np.int32(M), np.int32(N), np.int32(K)]


def _dmma(rng, M=32, N=32, K=16):
    A, B, C = (rng.standard_normal(s) for s in ((M, K), (K, N), (M, N)))
    return [A, B, C, _poison((M, N), np.float64), np.float64(1.5), np.float64(-0.75),
            np.int32(M), np.int32(N), np.int32(K)]


def _bf16g(relu):
    def make(rng, M=37, N=29, K=40):
        import ml_dtypes
        return [_bf16(rng, (M, K)), _bf16(rng, (K, N)), _poison((M, N), ml_dtypes.bfloat16),
                np.int32(M), np.int32(N), np.int32(K), np.int32(relu)]
    return make


PARAMS_DTYPE = np.dtype({"names": ["scale", "n", "shift"], "formats": [np.float32, np.int32, np.float64],
                         "offsets": [0, 4, 8], "itemsize": 16})


def _features(rng, n=200):
    p = np.zeros((), PARAMS_DTYPE)
    p["scale"], p["n"], p["shift"] = 0.75, n, 1.0 / 3.0
    return [p[()], rng.integers(-1000, 1000, 256).astype(np.int32), _poison((256,), np.float64)]


def _int8(rng, M=32, N=32, K=64):
    A = (rng.standard_normal((M, K)) * 2).astype(np.float32)
    amax = np.abs(A).max(axis=1)
    a_inv = (127 / amax).astype(np.float32)
    a_inv[::3] *= np.float32(2.0)  # every third row saturates at +-127
    A[5, 7] = np.float32(0.5) / a_inv[5]  # exact ties of the round-to-nearest-even quantiser
    A[6, 9] = np.float32(-2.5) / a_inv[6]
    a_s = (1 / a_inv).astype(np.float32)
    Bq = rng.integers(-128, 128, (N, K)).astype(np.int8)
    b_s = rng.uniform(0.001, 0.01, N).astype(np.float32)
    return [A, a_inv, a_s, Bq, b_s, _poison((M, N), np.int32), _poison((M, N), np.float16),
            _poison(((M // 16) * (N // 8) * 32,), np.uint32), np.int32(M), np.int32(N), np.int32(K)]


def _atomics(rng):
    return [np.array([0, 0, 0, 0, 0, 0x7FFFFFFF, 0xFFFFFFFF, 0, 0], np.uint32), np.zeros(2, np.uint64),
            np.zeros(2, np.float32), np.zeros(1, np.float64), np.zeros(128 * 8, np.uint32), np.zeros(2, np.uint32)]


def _feat_hand(rng):
    cfg = np.zeros((), np.dtype({"names": ["a", "k"], "formats": [np.float64, np.int32], "offsets": [0, 8],
                                 "itemsize": 16}))
    cfg["k"] = 40
    return [np.zeros((64, 6), np.uint32), cfg[()]]


_SAN = {  # the fixed variants of tests/kernels/sanitizer/sanitizer_cases.cu
    "race_shared": ((1, 1, 1), (64, 1, 1), lambda r: [r.integers(-99, 99, 64).astype(np.int32),
                                                      np.zeros(64, np.int32), np.int32(1)]),
    "race_global": ((2, 1, 1), (32, 1, 1), lambda r: [r.standard_normal(64).astype(np.float32),
                                                      np.zeros(64, np.float32), np.int32(1)]),
    "oob": ((1, 1, 1), (64, 1, 1), lambda r: [r.standard_normal(40).astype(np.float32),
                                              _poison((40,), np.float32), np.int32(40), np.int32(1)]),
    "ldsm_misaligned": ((1, 1, 1), (32, 1, 1), lambda r: [_f16(r, (128,)), _poison((32,), np.uint32), np.int32(1)]),
    "divergent_mma": ((1, 1, 1), (32, 1, 1), lambda r: [_f16(r, (384,)).view(np.uint32),
                                                        _poison((128,), np.float32), np.int32(1)]),
    "uninit_shared": ((1, 1, 1), (32, 1, 1), lambda r: [_poison((32,), np.float32), np.int32(1)]),
    "deadlock": ((1, 1, 1), (64, 1, 1), lambda r: [_poison((64,), np.float32), np.int32(1)]),
}


SUITE: tuple[Case, ...] = (
    Case("gemm_f16", "gemm_f16", "gemm_f16_f32", (2, 2, 1), (128, 1, 1), _gemm, seed=1),
    Case("marlin_w4a16", "marlin_w4a16", "marlin_w4a16", (2, 1, 1), (128, 1, 1), _marlin,
         shared_bytes=32 * 128 * 2, seed=2),
    Case("fp8_quant_mma", "fp8_quant_mma", "fp8_quant_mma", (2, 2, 1), (64, 1, 1), _fp8, seed=3),
    Case("row_softmax", "row_softmax", "row_softmax", (4, 1, 1), (128, 1, 1), _softmax, seed=4),
    Case("sparse_mma", "sparse_mma", "sparse_mma", (2, 2, 1), (64, 1, 1), _sparse, seed=5, needs=("mma.sp",)),
    Case("dmma_f64", "dmma_f64", "dmma_f64", (2, 2, 1), (128, 1, 1), _dmma, seed=6),
    Case("bf16_guarded", "bf16_guarded", "bf16_guarded", (1, 2, 1), (128, 1, 1), _bf16g(0), seed=7),
    Case("bf16_guarded_relu", "bf16_guarded", "bf16_guarded", (1, 2, 1), (128, 1, 1), _bf16g(1), seed=8),
    Case("module_features", "module_features", "module_features", (2, 1, 1), (128, 1, 1), _features, seed=9),
    Case("int8_gemm", "int8_gemm", "int8_gemm", (4, 2, 1), (32, 1, 1), _int8, seed=10),
    Case("features", "handwritten/features", "features", (1, 1, 1), (64, 1, 1), _feat_hand, shared_bytes=256),
    Case("atomics", "handwritten/atomics", "atomics", (2, 1, 1), (64, 1, 1), _atomics,
         compare={0: [0, 3, 4, 5, 6, 7, 8], 3: None, 4: None}),
) + tuple(Case(f"san_{k}", "sanitizer/sanitizer_cases", k, g, b, mk, seed=20 + i)
          for i, (k, (g, b, mk)) in enumerate(_SAN.items()))
CASES = {c.name: c for c in SUITE}


def _device_launch(cp, fn, entry, case, args):
    """Launch through the driver with marshalled parameter bytes; returns device arrays."""
    import ctypes

    from warpsim.kernel.args import is_buffer, marshal

    dev = {i: cp.asarray(np.ascontiguousarray(a)) for i, a in enumerate(args) if is_buffer(a)}
    raw = marshal(entry, args, lambda i, a: dev[i].data.ptr)
    bufs = [ctypes.create_string_buffer(b, max(len(b), 8)) for b in raw]
    ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
    cp.cuda.driver.launchKernel(fn.ptr, *case.grid, *case.block, case.shared_bytes, 0,
                                ctypes.addressof(ptrs), 0)
    cp.cuda.Device().synchronize()
    return dev


def run_gpu(case: Case, cp=None) -> dict[str, np.ndarray]:
    """Run ``case`` on the GPU twice; returns {'in_i': ..., 'out_i': ...} for every array."""
    from warpsim.ptx.module import parse_module

    if cp is None:
        import cupy as cp
    text = case.ptx_path.read_text()
    entry = parse_module(text).functions[case.kernel]
    cp.cuda.Device(0).use()
    cp.zeros(1)  # make sure the context exists
    try:  # the CUfunction handle that cuLaunchKernel takes
        raw = cp.RawModule(path=str(case.ptx_path)).get_function(case.kernel)
        fn = getattr(raw, "kernel", raw)
        fn.ptr
    except AttributeError:
        handle = cp.cuda.driver.moduleGetFunction(cp.cuda.driver.moduleLoad(str(case.ptx_path)), case.kernel)
        fn = type("Fn", (), {"ptr": handle})()
    args = case.args()
    runs = []
    for _ in range(2):
        dev = _device_launch(cp, fn, entry, case, args)
        runs.append({i: cp.asnumpy(d) for i, d in dev.items()})
    out = {}
    for i in runs[0]:
        a, b = runs[0][i].reshape(-1).view(np.uint8), runs[1][i].reshape(-1).view(np.uint8)
        if i in case.compare:  # only the words compared must be deterministic
            if case.compare[i] is None:
                a = b = a[:0]
            else:
                w = min(4, runs[0][i].dtype.itemsize)
                idx = np.asarray(case.compare[i])
                a, b = a.reshape(-1, w)[idx], b.reshape(-1, w)[idx]
        if a.tobytes() != b.tobytes():
            raise RuntimeError(f"{case.name}: argument {i} differs between two identical launches")
        out[f"in_{i}"] = np.asarray(args[i])
        out[f"out_{i}"] = runs[0][i]
    return out


def collect(out_dir: Path, only=None, isolate: bool = True) -> dict:
    """Run every case on the GPU; write ``kernel_suite.npz`` (keys ``<case>.in_<i>`` and
    ``<case>.out_<i>``) and ``manifest.json`` to ``out_dir``.  With ``isolate`` each case runs
    in its own process, so a kernel that faults cannot take the others' CUDA context down."""
    import subprocess
    import tempfile

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"cases": {}}
    arrays = {}
    for case in SUITE:
        if only and case.name not in only:
            continue
        if isolate:
            with tempfile.TemporaryDirectory() as tmp:
                proc = subprocess.run([sys.executable, "-m", "warpsim.validation.kernel_suite", "--out", tmp,
                                       "--only", case.name, "--no-isolate"], capture_output=True, text=True,
                                      cwd=str(Path(__file__).resolve().parents[2]), timeout=600)
                print(proc.stdout + proc.stderr, end="", flush=True)
                try:
                    sub = json.loads((Path(tmp) / "manifest.json").read_text())
                    manifest["cases"].update(sub["cases"])
                    manifest.setdefault("device", sub.get("device"))
                    with np.load(Path(tmp) / "kernel_suite.npz") as z:
                        arrays.update({k: z[k] for k in z.files})
                except Exception as e:
                    manifest["cases"][case.name] = {"status": f"error: process failed ({e}); "
                                                    f"exit {proc.returncode}: {proc.stderr[-500:]}"}
            continue
        import cupy as cp

        from warpsim.validation.gpu import device_info

        manifest.setdefault("device", device_info())
        try:
            res = run_gpu(case, cp)
            arrays.update({f"{case.name}.{k}": v for k, v in res.items()})
            words = sum(v.nbytes // 4 for k, v in res.items() if k.startswith("out_"))
            manifest["cases"][case.name] = {"kernel": case.kernel, "grid": case.grid, "block": case.block,
                                            "shared_bytes": case.shared_bytes, "seed": case.seed,
                                            "status": "ok", "out_words32": words}
            print(f"{case.name}: ok, {words} words", flush=True)
        except Exception as e:  # one failing kernel must not lose the others' results
            manifest["cases"][case.name] = {"status": f"error: {type(e).__name__}: {e}"}
            print(f"{case.name}: ERROR {type(e).__name__}: {e}", flush=True)
    np.savez_compressed(out_dir / "kernel_suite.npz", **arrays)
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    return manifest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m warpsim.validation.kernel_suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--only", action="append")
    p.add_argument("--no-isolate", action="store_true", help="run all cases in this process")
    a = p.parse_args(argv)
    m = collect(Path(a.out), a.only, isolate=not a.no_isolate)
    return 0 if all(c["status"] == "ok" for c in m["cases"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
