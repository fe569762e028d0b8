"""Hardware check of the real-compiler PTX corpus (tests/data/real, issue 19): every output byte
of the Triton tutorials, the CUDA corpus kernels and their printf text, GPU against warpsim.

    python -m warpsim.validation.real_kernels build DIR     # here: cubins (ptxas, sm_90) + inputs
    python -m warpsim.validation.real_kernels gpu DIR OUT   # on the GPU (CuPy): OUT/real_gpu.npz, printf text
    python -m warpsim.validation.real_kernels compare OUT   # here: warpsim on the same inputs, per kernel

Cubins are assembled here (the device driver JITs PTX only up to .version 9.0), for sm_90 from
the sm_80/sm_89 PTX (the PTX runs unchanged on the H100).  The GPU side needs only NumPy and CuPy.
printf kernels run in a child process whose stdout is the device printf buffer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "real"
ML_BF16 = None


def _meta(ptx: Path) -> dict:
    head = ptx.read_text().splitlines()[0]
    return dict(kv.split("=") for kv in head.split() if "=" in kv)


def _bf16(x):
    """float32 -> bfloat16 bits, round to nearest even (no ml_dtypes needed on the GPU host)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, (u >> 16).astype(np.uint16) | 0x40, r).astype(np.uint16)


def inputs_crc() -> int:
    """CRC of every input array of :func:`cases` (the GPU and warpsim must see the same)."""
    import zlib
    crc = 0
    for c in cases():
        for a in c["args"]:
            if isinstance(a, np.ndarray):
                crc = zlib.crc32(np.ascontiguousarray(a).view(np.uint8).tobytes(), crc)
    return crc


def cases() -> list[dict]:
    """Every launch: kernel file, entry, grid, block, shared bytes, args (arrays / scalars /
    None), which args are outputs; inputs seeded."""
    rng = np.random.default_rng(2026)
    out = []
    T = DATA / "triton"
    for arch in ("sm_80", "sm_89"):
        n = 5000
        out.append(dict(name=f"triton_add_{arch}", ptx=T / f"add_{arch}.ptx", entry="add_kernel", grid=(n + 255) // 256,
                        block=128, args=[rng.standard_normal(n).astype(np.float32),
                                         rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32), n, None, None],
                        outs=[2]))
        M = N = K = 128
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        out.append(dict(name=f"triton_matmul_{arch}", ptx=T / f"matmul_{arch}.ptx", entry="matmul_kernel",
                        grid=(M // 64) * (N // 64), block=128,
                        args=[a, b, np.zeros((M, N), np.float16), M, N, K, K, 1, N, 1, N, 1, None, None], outs=[2]))
        rows, cols = 64, 100
        x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
        out.append(dict(name=f"triton_softmax_{arch}", ptx=T / f"softmax_{arch}.ptx", entry="softmax_kernel",
                        grid=rows, block=128, args=[np.zeros_like(x), x, cols, cols, rows, cols, None, None], outs=[0]))
        M, N = 16, 300
        x = rng.standard_normal((M, N)).astype(np.float16)
        out.append(dict(name=f"triton_layernorm_{arch}", ptx=T / f"layernorm_{arch}.ptx", entry="layer_norm_fwd",
                        grid=M, block=128,
                        args=[x, np.zeros_like(x), rng.standard_normal(N).astype(np.float16),
                              rng.standard_normal(N).astype(np.float16), np.zeros(M, np.float32),
                              np.zeros(M, np.float32), N, N, np.float32(1e-5), None, None], outs=[1, 4, 5]))
        L, D = 128, 64
        q, k, v = (rng.standard_normal((L, D)).astype(np.float16) for _ in range(3))
        out.append(dict(name=f"triton_attention_{arch}", ptx=T / f"attention_{arch}.ptx", entry="attn_fwd",
                        grid=L // 64, block=128,
                        args=[q, k, v, np.float32(0.125), np.zeros((L, D), np.float16), D, D, D, D, L, None, None],
                        outs=[4]))
    C = DATA / "cuda"
    for arch in ("sm_80", "sm_90"):
        n = 256
        x = np.concatenate([np.linspace(-12, 12, 200), [0, -0.0, np.inf, -np.inf, np.nan, 65504, -65504, 1e-7],
                            rng.standard_normal(48) * 4]).astype(np.float16)
        y = np.concatenate([np.linspace(-90, 90, 200), [0, -0.0, np.inf, -np.inf, np.nan, 3e38, 1e-40, 1],
                            rng.standard_normal(48) * 4]).astype(np.float32)
        out.append(dict(name=f"cuda_half_math_{arch}", ptx=C / f"half_math_printf_{arch}.ptx", entry="half_math",
                        grid=n // 64, block=64, args=[x, _bf16(y), np.zeros(n * 6, np.float16),
                                                      np.zeros(n * 3, np.uint16), n], outs=[2, 3]))
        v = rng.integers(-50, 50, 128).astype(np.int32)
        out.append(dict(name=f"cuda_cg_reduce_{arch}", ptx=C / f"coop_groups_{arch}.ptx", entry="cg_reduce",
                        grid=2, block=64, args=[v, np.zeros(128 * 4, np.int32), np.zeros(128 * 2, np.uint32)],
                        outs=[1, 2]))
        a = rng.integers(0, 2**64, 256, dtype=np.uint64)
        b = rng.integers(0, 2**64, 256, dtype=np.uint64)
        a[:4] = [2**64 - 1, 0, 2**63, 0xFFFFFF]
        b[:4] = [2**64 - 1, 2**64 - 1, 2**63, 0x800000]
        out.append(dict(name=f"cuda_int_corners_{arch}", ptx=C / f"coop_groups_{arch}.ptx", entry="int_corners",
                        grid=4, block=64, args=[a, b, np.zeros(256 * 6, np.uint64), 256], outs=[2]))
    return out


def printf_cases() -> list[dict]:
    C = DATA / "cuda"
    x = ((np.arange(40) - 20) / 7).astype(np.float32)
    return [dict(name="printf_hello", ptx=C / "half_math_printf_sm_90.ptx", entry="hello", grid=2, block=32, args=[x, 40]),
            dict(name="printf_divergent", ptx=C / "printf_cases_sm_80.ptx", entry="divergent", grid=2, block=8,
                 args=[np.zeros(8, np.int32)]),
            dict(name="printf_widths", ptx=C / "printf_cases_sm_80.ptx", entry="widths", grid=1, block=2,
                 args=[np.int64(-1234567890123), np.uint16(65535), np.int8(-5), np.float64(3.25), np.int32(7)]),
            dict(name="printf_probe", ptx=C / "printf_cases_sm_80.ptx", entry="probe", grid=1, block=1,
                 args=[np.int64(-1234567890123), np.uint16(65535), np.int8(-5), np.float64(3.25), np.int32(7),
                       np.int32(-42), np.frombuffer(b"str\0", np.uint8).copy()]),
            dict(name="printf_str_null", ptx=C / "printf_cases_sm_80.ptx", entry="str_arg", grid=1, block=1, args=[None])]


def assert_case() -> dict:
    x = np.zeros(64, np.int32)
    x[37] = -3
    return dict(name="assert_checked", ptx=DATA / "cuda" / "half_math_printf_sm_90.ptx", entry="checked", grid=2,
                block=32, args=[x, 64])


# ---------------------------------------------------------------------------------------------
def build(d) -> None:
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    ptxs = sorted({c["ptx"] for c in cases() + printf_cases() + [assert_case()]})
    for p in ptxs:
        subprocess.run(["ptxas", "-arch=sm_90", str(p), "-o", str(d / (p.stem + ".cubin"))], check=True)
    print(f"{len(ptxs)} cubins in {d}")


def _launch(d, c):
    """Launch case ``c`` through the driver with parameter bytes marshalled by
    :func:`warpsim.kernel.args.marshal` (the simulator's own code); returns the device arrays."""
    import ctypes

    import cupy as cp

    from warpsim.kernel.args import is_buffer, marshal
    from warpsim.ptx.module import parse_module

    path = str(Path(d) / (c["ptx"].stem + ".cubin"))
    sh = int(_meta(c["ptx"]).get("shared", 0)) if c["ptx"].parent.name == "triton" else 0
    cp.cuda.Device(0).use()
    cp.zeros(1)  # the context, before loading the module through the driver
    handle = cp.cuda.driver.moduleGetFunction(cp.cuda.driver.moduleLoad(path), c["entry"])
    entry = parse_module(c["ptx"].read_text()).functions[c["entry"]]
    dev = {i: cp.asarray(np.ascontiguousarray(a)) for i, a in enumerate(c["args"]) if is_buffer(a)}
    raw = marshal(entry, c["args"], lambda i, a: dev[i].data.ptr)
    bufs = [ctypes.create_string_buffer(b, max(len(b), 8)) for b in raw]
    ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
    cp.cuda.Device(0).use()
    cp.cuda.driver.launchKernel(handle, c["grid"], 1, 1, c["block"], 1, 1, sh, 0, ctypes.addressof(ptrs), 0)
    cp.cuda.Device().synchronize()
    return [dev[i] for i in sorted(dev)]


def gpu(d, out, printf_only: bool = False) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    res = {}
    only = [a for a in sys.argv if a.startswith("--only=")]
    for c in [] if printf_only else cases():
        keep = _launch(d, c)
        arrays = [a for a in c["args"] if isinstance(a, np.ndarray)]
        idx = [k for k, a in enumerate(c["args"]) if isinstance(a, np.ndarray)]
        for o in c["outs"]:
            res[f"{c['name']}/{o}"] = keep[idx.index(o)].get()
        print("ran", c["name"], flush=True)
    if not printf_only:
        res["inputs_crc"] = np.array(inputs_crc(), np.uint64)
        np.savez_compressed(out / "real_gpu.npz", **res)
    texts = {}
    for c in printf_cases() + [assert_case()]:
        if only and c["name"] not in only[0][7:].split(","):
            continue
        r = subprocess.run([sys.executable, "-m", "warpsim.validation.real_kernels", "child", str(d), c["name"]],
                           capture_output=True, text=True, timeout=120)
        texts[c["name"]] = {"stdout": r.stdout[:100000], "stderr": r.stderr[:3000] + r.stderr[-1000:],
                            "rc": r.returncode}
        print("ran", c["name"], "rc", r.returncode, flush=True)
    import gzip
    with gzip.open(out / "real_printf.json.gz", "wt") as f:
        json.dump(texts, f, indent=1)
    print({k: (len(v["stdout"]), len(v["stderr"]), v["rc"]) for k, v in texts.items()})


def child(d, name) -> None:
    c = next(c for c in printf_cases() + [assert_case()] if c["name"] == name)
    _launch(d, c)


# ---------------------------------------------------------------------------------------------
def simulate(c) -> dict:
    from warpsim.kernel.launch import Module
    m = Module(c["ptx"].read_text())
    sh = int(_meta(c["ptx"]).get("shared", 0)) if c["ptx"].parent.name == "triton" else 0
    arrays = [k for k, a in enumerate(c["args"]) if isinstance(a, np.ndarray)]
    r = m.launch(c["entry"], c["grid"], c["block"], c["args"], shared_bytes=sh, arch="sm_90", check=False)
    return {o: r[arrays.index(o)] for o in c["outs"]}, r


def compare(out) -> dict:
    out = Path(out)
    g = np.load(out / "real_gpu.npz")
    if int(g["inputs_crc"]) != inputs_crc():
        raise RuntimeError("the GPU ran on other inputs than these (NumPy's generators differ?)")
    report = {}
    for c in cases():
        sim, _ = simulate(c)
        tot = bad = 0
        for o, v in sim.items():
            ref = g[f"{c['name']}/{o}"]
            a, b = np.ascontiguousarray(v).view(np.uint8), np.ascontiguousarray(ref).view(np.uint8)
            tot += a.size
            bad += int(np.count_nonzero(a != b))
        report[c["name"]] = {"bytes": tot, "bytes_differing": bad}
    import gzip
    with gzip.open(out / "real_printf.json.gz", "rt") as f:
        texts = json.load(f)
    from warpsim.errors import WarpsimError
    for c in printf_cases():
        _, r = simulate(dict(c, outs=[]))
        gpu_lines = texts[c["name"]]["stdout"].splitlines()
        sim_lines = r.stdout.splitlines()
        report[c["name"]] = {"lines": len(gpu_lines), "same_text_as_multiset": sorted(gpu_lines) == sorted(sim_lines),
                             "same_order": gpu_lines == sim_lines}
    c = assert_case()
    try:
        simulate(dict(c, outs=[]))
        line = None
    except WarpsimError as e:
        err = getattr(e, "error", None) or e
        line = err.args[0] if err.args else str(err)
    t = texts[c["name"]]
    gpu_line = next((x for x in (t["stdout"] + t["stderr"]).splitlines() if "Assertion" in x), None)
    report[c["name"]] = {"gpu": gpu_line, "warpsim": line, "rc": t["rc"],
                         "same": bool(gpu_line and line and gpu_line.strip() in line)}
    return report


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "build":
        build(sys.argv[2])
    elif cmd == "gpu":
        gpu(sys.argv[2], sys.argv[3], "--printf-only" in sys.argv)
    elif cmd == "child":
        child(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        print(json.dumps(compare(sys.argv[2]), indent=1))
