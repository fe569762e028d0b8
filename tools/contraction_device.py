"""Hardware check of warpsim's contraction pass (warpsim/ptx/contract.py): the patterns of
tools/ptxas_contraction.py run on the GPU on inputs where a fused and an unfused pair differ,
and Triton's layer norm (tests/data/real, sm_80 and sm_89 PTX) on fresh inputs; compared here
with warpsim (contract=True, and contract=False to show what the check can see).

    python tools/contraction_device.py build DIR       # here: PTX + cubins (ptxas 13.0 and 13.5), inputs
    python3 DIR/contraction_device.py gpu DIR OUT      # on the GPU (CuPy; warpsim of the tree for
                                                       # the layer norm's parameter bytes)
    python tools/contraction_device.py compare DIR OUT # here

Each pattern thread reads its own 88 input bytes and writes 64; the module's kernels run as
the driver JITs the PTX (13.0 on the device) and as cubins of ptxas 13.0 and 13.5 (sm_90a).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

N_THREADS = 512
OUT_BYTES = 64
_OFFSET = (" mov.u32 %r60, %tid.x; mov.u32 %r61, %ctaid.x; mov.u32 %r62, %ntid.x;"
           " mad.lo.u32 %r60, %r61, %r62, %r60;\n mul.wide.u32 %rd3, %r60, 88; add.s64 %rd1, %rd1, %rd3;"
           " mul.wide.u32 %rd4, %r60, 64; add.s64 %rd2, %rd2, %rd4;\n")


def _tool():
    sys.path.insert(0, str(Path(__file__).parent))
    import ptxas_contraction as T
    return T


def module_text(T, names: list[str], sm: str = "sm_90a") -> str:
    """All patterns as kernels k0, k1, ... of one module, each thread at its own offsets."""
    table = json.loads((Path(__file__).parent.parent / "tests/data/ptxas_contraction.json").read_text())
    bodies = [table["patterns"][n]["body"] for n in names]
    head, _, _ = T.kernel("", sm).partition(".visible .entry")
    parts = []
    for i, b in enumerate(bodies):
        k = T.kernel(b, sm, name=f"k{i}").partition(".visible .entry")[2]
        k = k.replace(" cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;\n",
                      " cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;\n" + _OFFSET)
        parts.append(".visible .entry" + k)
    return head + "\n".join(parts)


def inputs(seed: int = 31) -> np.ndarray:
    """(N_THREADS, 88) bytes: f32 near 1 (products that round), cancelling addends (the fused
    residual shows), wide random values, specials and the rcp/div scaling ranges; f64 near 1;
    f16x2/bf16x2 words and f16 halves near 1 or random."""
    rng = np.random.default_rng(seed)
    n = N_THREADS
    f = (1 + rng.integers(1, 1 << 12, (n, 8)) * 2.0**-12) * rng.choice([-1, 1], (n, 8))
    wide = rng.standard_normal((n, 8)) * 10.0 ** rng.integers(-4, 5, (n, 8))
    f = np.where(rng.random((n, 8)) < 0.25, wide, f).astype(np.float32)
    cancel = rng.random(n) < 0.4
    f[cancel, 2] = -(f[cancel, 0] * f[cancel, 1])          # c = -round(a*b)
    f[cancel, 3] = f[cancel, 0] * f[cancel, 1]
    spec = np.array([0, -0.0, np.inf, -np.inf, np.nan, 2.0**127 * 1.5, -(2.0**-127), 1e-40, 3.0, 7.0], np.float32)
    s = rng.random((n, 8)) < 0.05
    f[s] = rng.choice(spec, int(s.sum()))
    d = (1 + rng.integers(1, 1 << 27, (n, 4)) * 2.0**-27) * rng.choice([-1, 1], (n, 4))
    dc = rng.random(n) < 0.4
    d[dc, 2] = -(d[dc, 0] * d[dc, 1])
    h = (1 + rng.integers(1, 64, (n, 8)) * 2.0**-6).astype(np.float16).view(np.uint16)
    h = np.where(rng.random((n, 8)) < 0.3, rng.integers(0, 1 << 16, (n, 8)), h).astype(np.uint16)
    b32 = h.reshape(n, 4, 2).copy().view(np.uint32).reshape(n, 4)
    b16 = (1 + rng.integers(1, 64, (n, 4)) * 2.0**-6).astype(np.float16).view(np.uint16)
    buf = np.concatenate([f.view(np.uint8), d.view(np.uint8), b32.view(np.uint8), b16.view(np.uint8)], axis=1)
    assert buf.shape == (n, 88)
    return np.ascontiguousarray(buf)


def layernorm_cases(seed: int = 41) -> list[dict]:
    """Triton's layer norm (tests/data/real) on fresh inputs: 64 rows of 300 f16."""
    rng = np.random.default_rng(seed)
    real = Path("tests/data/real/triton")   # run from the repository root (here and on the device)
    out = []
    for arch in ("sm_80", "sm_89"):
        M, N = 64, 300
        x = (rng.standard_normal((M, N)) * rng.choice([0.1, 1, 30], (M, 1))).astype(np.float16)
        out.append(dict(name=f"triton_layernorm_{arch}", ptx=real / f"layernorm_{arch}.ptx", entry="layer_norm_fwd",
                        grid=M, block=128,
                        args=[x, np.zeros_like(x), rng.standard_normal(N).astype(np.float16),
                              rng.standard_normal(N).astype(np.float16), np.zeros(M, np.float32),
                              np.zeros(M, np.float32), N, N, np.float32(1e-5), None, None], outs=[1, 4, 5]))
    return out


def build(d: Path) -> None:
    T = _tool()
    d.mkdir(parents=True, exist_ok=True)
    table = json.loads((Path(__file__).parent.parent / "tests/data/ptxas_contraction.json").read_text())
    names = [n for n, p in table["patterns"].items() if p["fused"].get("13.0/sm_90a") is not None]
    text = module_text(T, names)
    (d / "patterns.ptx").write_text(text)
    for ver, px in T.ptxas_paths().items():
        subprocess.run([px, "-arch=sm_90a", str(d / "patterns.ptx"), "-o", str(d / f"patterns_{ver}.cubin")],
                       check=True)
    for c in layernorm_cases():
        subprocess.run(["ptxas", "-arch=sm_90", str(c["ptx"]), "-o", str(d / (c["ptx"].stem + ".cubin"))], check=True)
    np.save(d / "inputs.npy", inputs())
    (d / "names.json").write_text(json.dumps(names))
    shutil.copy(__file__, d / "contraction_device.py")
    print(len(names), "patterns;", sorted(p.name for p in d.iterdir()))


def gpu(d: Path, out: Path) -> None:
    import cupy as cp
    out.mkdir(parents=True, exist_ok=True)
    names = json.loads((d / "names.json").read_text())
    x = np.load(d / "inputs.npy")
    res = {}
    cp.cuda.Device(0).use()
    cp.zeros(1)  # the context, before loading modules through the driver
    mods = {"jit": cp.cuda.driver.moduleLoadData((d / "patterns.ptx").read_bytes() + b"\0")}
    for c in sorted(d.glob("patterns_*.cubin")):
        mods[c.stem.split("_", 1)[1]] = cp.cuda.driver.moduleLoad(str(c))
    din = cp.asarray(x)
    for tag, mod in mods.items():
        outs = np.zeros((len(names), N_THREADS, OUT_BYTES), np.uint8)
        for i in range(len(names)):
            fn = cp.cuda.driver.moduleGetFunction(mod, f"k{i}")
            dout = cp.zeros((N_THREADS, OUT_BYTES), cp.uint8)
            import ctypes
            args = [ctypes.c_uint64(din.data.ptr), ctypes.c_uint64(dout.data.ptr), ctypes.c_uint32(7)]
            ptrs = (ctypes.c_void_p * 3)(*[ctypes.addressof(a) for a in args])
            cp.cuda.driver.launchKernel(fn, N_THREADS // 128, 1, 1, 128, 1, 1, 0, 0, ctypes.addressof(ptrs), 0)
            cp.cuda.Device().synchronize()
            outs[i] = dout.get()
        res[f"patterns/{tag}"] = outs
        print("patterns", tag, flush=True)
    sys.path.insert(0, str(Path.cwd()))
    from warpsim.validation.real_kernels import _launch
    for c in layernorm_cases():
        keep = _launch(d, c)
        idx = [k for k, a in enumerate(c["args"]) if isinstance(a, np.ndarray)]
        for o in c["outs"]:
            res[f"{c['name']}/{o}"] = keep[idx.index(o)].get()
        print("ran", c["name"], flush=True)
    np.savez_compressed(out / "contraction_gpu.npz", **res)


def compare(d: Path, out: Path) -> dict:
    import warpsim
    names = json.loads((d / "names.json").read_text())
    x = np.load(d / "inputs.npy")
    g = np.load(out / "contraction_gpu.npz")
    text = (d / "patterns.ptx").read_text()
    rep = {}
    sims = {}
    for contract in (True, False):
        m = warpsim.Module(text, contract=contract)
        sims[contract] = np.stack([m.launch(f"k{i}", grid=N_THREADS // 128, block=128, arch="sm_90a",
                                            args=[x.reshape(-1), np.zeros(N_THREADS * OUT_BYTES, np.uint8),
                                                  np.uint32(7)])[1].reshape(N_THREADS, OUT_BYTES)
                                   for i in range(len(names))])
    for key in g.files:
        if not key.startswith("patterns/"):
            continue
        gw = g[key].view(np.uint32)
        for contract in (True, False):
            bad = (sims[contract].view(np.uint32) != gw)
            per = {names[i]: int(bad[i].sum()) for i in range(len(names)) if bad[i].any()}
            rep[f"{key} contract={contract}"] = {"words": int(gw.size), "mismatches": int(bad.sum()),
                                                 "patterns_differing": len(per),
                                                 "first": dict(list(per.items())[:8])}
    from warpsim.validation.real_kernels import simulate
    for c in layernorm_cases():
        for contract in (True, False):
            sim, _ = simulate(dict(c)) if contract else _simulate_literal(c)
            bad = total = 0
            for o, v in sim.items():
                a = np.ascontiguousarray(v).view(np.uint8)
                b = np.ascontiguousarray(g[f"{c['name']}/{o}"]).view(np.uint8)
                total += a.size
                bad += int(np.count_nonzero(a != b))
            rep[f"{c['name']} contract={contract}"] = {"bytes": total, "mismatches": bad}
    return rep


def _simulate_literal(c):
    import warpsim
    from warpsim.validation import real_kernels as R
    orig = warpsim.Module.__init__

    def literal(self, text, *, contract=True):
        orig(self, text, contract=False)
    warpsim.Module.__init__ = literal
    try:
        return R.simulate(dict(c))
    finally:
        warpsim.Module.__init__ = orig


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "build":
        build(Path(sys.argv[2]))
    elif cmd == "gpu":
        gpu(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        print(json.dumps(compare(Path(sys.argv[2]), Path(sys.argv[3])), indent=1))
