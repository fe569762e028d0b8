"""Real Hopper-era kernels on the GPU and on warpsim, every output byte: the suite's
FlashAttention-3-style warp-specialised kernel (tests/data/real/cuda/fa3_ws.cu: TMA +
mbarrier ring + setmaxnreg + wgmma with P from registers) and CuTe's tutorial GEMMs
(tests/data/real/cute: sgemm_1, sgemm_2, sgemm_sm80, wgmma_sm90, wgmma_tma_sm90), each on random
and on integer-exact inputs.

    python tools/hopper_real_device.py build DIR     # cubins (ptxas, sm_90a), cases.json, inputs.npz
    # on the GPU machine:  python3 DIR/launch_device.py DIR/cases.json DIR/inputs.npz $OUT/gpu.npz
    python tools/hopper_real_device.py check DIR GPU.npz [FIXTURE.npz]

``check`` replays every case through ``warpsim.Module.launch`` (tensor maps: the driver's bytes
via ``warpsim.TensorMap.from_bytes``; also compared with ``warpsim.tensor_map``), compares each
output byte and, given FIXTURE, stores what tests/test_hopper_real_hardware.py replays.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CUTE = ROOT / "tests" / "data" / "real" / "cute"
#: dynamic shared memory of the FA3 kernel: its Smem struct (6 tiles + 7 barriers) + 1 KiB alignment
FA3_SHARED = 6 * 8192 + 7 * 8 + 1024


def ptx_text(src: str) -> str:
    p = ROOT / src
    return gzip.decompress(p.read_bytes()).decode() if src.endswith(".gz") else p.read_text()


def _b(*xs) -> dict:
    return {"bytes": b"".join(x if isinstance(x, bytes) else np.asarray(x).tobytes() for x in xs).hex()}


def _s(value) -> dict:
    """A scalar parameter (.u32/.s32/.f32...): its bytes, and its NumPy type for warpsim."""
    v = np.asarray(value)
    return {"bytes": v.tobytes().hex(), "type": v.dtype.str}


_E = {"bytes": "00"}  # an empty CuTe struct (static layout, tiler, copy atom): one byte
_i32 = np.int32


def _inputs(rng, kind: str, shape, dtype):
    if kind == "int":  # small multiples of 1/4: products and sums exact in f16/f32
        return (rng.integers(-3, 4, shape) / 4).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _kernel(ptx: str, i: int) -> str:
    names = [k for k in _entries(ptx) if "gemm_device" in k]
    return names[i]


def _entries(ptx: str) -> list:
    import re
    return re.findall(r"\.entry\s+([\w$]+)\s*\(", ptx)


def cases() -> tuple[list, dict]:
    """(cases, inputs): the launch list of :mod:`warpsim.validation.launch_device` (with
    "ptx", the source of each cubin, relative to the project root) and its input arrays."""
    out, ins = [], {}
    rng = np.random.default_rng(2027)

    def put(name, arr):
        ins[name] = arr
        return name
    for kind in ("rand", "int"):
        # -- FA3-style attention: seqlen 256 (2 CTAs of 128 query rows), head dim 64, f16
        L, D = 256, 64
        q, k, v = (put(f"fa3_{kind}_{n}", _inputs(rng, kind, (L, D), np.float16)) for n in "qkv")
        o = put(f"fa3_{kind}_o", np.zeros((L, D), np.float16))
        enc = dict(dtype=6, dims=[D, L], strides=[D * 2], box=[64, 64], swizzle=3)
        out.append(dict(name=f"fa3_{kind}", ptx="tests/data/real/cuda/fa3_ws_sm_90a.ptx", kernel="fa3_fwd",
                        grid=[L // 128, 1, 1], block=384, cluster=None, shared=FA3_SHARED, out=[o],
                        args=[{"tmap": q, "enc": enc}, {"tmap": k, "enc": enc}, {"tmap": v, "enc": enc},
                              {"array": o}, _s(_i32(L)), _s(np.float32(0.125 * np.log2(np.e)))]))
        # -- CuTe sgemm_1 / sgemm_2 (f32, 256 threads, 128x128x8 tiles): NT and TN
        for src in ("sgemm_1", "sgemm_2"):
            for v_, lay in enumerate(("nt", "tn")):
                M = N = 128
                K = 64
                tag = f"{src}_{lay}_{kind}"
                a = put(tag + "_A", _inputs(rng, kind, (K, M) if lay == "nt" else (M, K), np.float32))
                b = put(tag + "_B", _inputs(rng, kind, (K, N) if lay == "nt" else (N, K), np.float32))
                c = put(tag + "_C", _inputs(rng, kind, (N, M), np.float32))
                lda, ldb = (M, N) if lay == "nt" else (K, K)
                out.append(dict(name=tag, ptx=f"tests/data/real/cute/{src}_sm_80.ptx.gz", entry=v_, grid=[1, 1, 1],
                                block=256, cluster=None, shared=0, out=[c],
                                args=[_b(_i32([M, N, K])), _E, {"array": a}, _b(_i32(lda)), _E, _E, {"array": b},
                                      _b(_i32(ldb)), _E, _E, {"array": c}, _b(_i32(M)), _E, _E,
                                      _s(np.float32(1.5)), _s(np.float32(0.25))]))
        # -- CuTe sgemm_sm80 (f16 TN, cp.async + ldmatrix + mma.sync m16n8k16, 3 stages, 128 threads)
        M, N, K = 128, 128, 192
        tag = f"sgemm_sm80_tn_{kind}"
        a = put(tag + "_A", _inputs(rng, kind, (M, K), np.float16))
        b = put(tag + "_B", _inputs(rng, kind, (N, K), np.float16))
        c = put(tag + "_C", _inputs(rng, kind, (N, M), np.float16))
        out.append(dict(name=tag, ptx="tests/data/real/cute/sgemm_sm80_sm_80.ptx.gz", entry=0, grid=[1, 1, 1],
                        block=128, cluster=None, shared=2 * 128 * 64 * 3 * 2, out=[c],
                        args=[_b(_i32([M, N, K])), _E, {"array": a}, _b(_i32(K)), _E, _E, _E, {"array": b},
                              _b(_i32(K)), _E, _E, _E, {"array": c}, _b(_i32(M)), _E, _E,
                              _b(np.float16(1)), _b(np.float16(0.5))]))
        # -- CuTe wgmma_sm90 (cp.async pipeline, wgmma m64n64k16 f16): TN and NT
        ptx90 = ptx_text("tests/data/real/cute/wgmma_sm90_sm_90a.ptx.gz")
        for lay in ("tn", "nt"):
            M = N = 128
            K = 192
            tag = f"wgmma_sm90_{lay}_{kind}"
            major = "MajorE1" if lay == "nt" else "MajorE0"
            entry = [k for k in _entries(ptx90) if "gemm_device" in k].index(
                next(k for k in _entries(ptx90) if "gemm_device" in k and major in k))
            a = put(tag + "_A", _inputs(rng, kind, (M, K) if lay == "tn" else (K, M), np.float16))
            b = put(tag + "_B", _inputs(rng, kind, (N, K) if lay == "tn" else (K, N), np.float16))
            c = put(tag + "_C", np.zeros((N, M), np.float16))
            lda, ldb = (K, K) if lay == "tn" else (M, N)
            out.append(dict(name=tag, ptx="tests/data/real/cute/wgmma_sm90_sm_90a.ptx.gz", entry=entry,
                            grid=[M // 128, N // 128, 1], block=128, cluster=None, shared=98304 + 1024, out=[c],
                            args=[_b(_i32([M, N, K])), _E, {"array": a}, _b(_i32(lda)), _E, _E, {"array": b},
                                  _b(_i32(ldb)), _E, _E, {"array": c}, _b(_i32(M)), _b(_i32([1, 0])),
                                  _b(np.float16(1)), _b(np.float16(0))]))
        # -- CuTe wgmma_tma_sm90 (TMA, 3-stage mbarrier pipeline, 2x1 cluster): NT and TN
        for v_, lay in enumerate(("nt", "tn")):
            M = N = 256
            K = 128
            tag = f"wgmma_tma_sm90_{lay}_{kind}"
            if lay == "nt":
                a = put(tag + "_A", _inputs(rng, kind, (K, M), np.float16))
                b = put(tag + "_B", _inputs(rng, kind, (K, N), np.float16))
                ea = dict(dtype=6, dims=[M, K], strides=[M * 2], box=[64, 8], swizzle=3)
                eb = dict(dtype=6, dims=[N, K], strides=[N * 2], box=[64, 8], swizzle=3)
            else:
                a = put(tag + "_A", _inputs(rng, kind, (M, K), np.float16))
                b = put(tag + "_B", _inputs(rng, kind, (N, K), np.float16))
                ea = dict(dtype=6, dims=[K, M], strides=[K * 2], box=[64, 128], swizzle=3)
                eb = dict(dtype=6, dims=[K, N], strides=[K * 2], box=[64, 128], swizzle=3)
            c = put(tag + "_C", np.zeros((N, M), np.float16))
            out.append(dict(name=tag, ptx="tests/data/real/cute/wgmma_tma_sm90_sm_90a.ptx.gz", entry=v_,
                            grid=[2, 2, 1], block=128, cluster=[2, 1, 1], shared=98352, out=[c],
                            args=[_b(_i32([M, N, K])), _E, {"array": a}, {"tmap": a, "enc": ea, "size": 256},
                                  {"array": b}, {"tmap": b, "enc": eb, "size": 256}, {"array": c}, _b(_i32(M)),
                                  _b(_i32([1, 1])), _b(np.float16(1)), _b(np.float16(0))]))
    for c in out:
        if "entry" in c:
            c["kernel"] = _kernel(ptx_text(c["ptx"]), c.pop("entry"))
    return out, ins


def _cubin_name(src: str) -> str:
    return os.path.basename(src).replace(".ptx.gz", "").replace(".ptx", "") + ".cubin"


def build(d: str) -> None:
    os.makedirs(d, exist_ok=True)
    cs, ins = cases()
    for src in sorted({c["ptx"] for c in cs}):
        tmp = os.path.join(d, _cubin_name(src)[:-6] + ".ptx")
        open(tmp, "w").write(ptx_text(src))
        subprocess.run(["ptxas", "-arch=sm_90a", tmp, "-o", tmp[:-4] + ".cubin"], check=True)
        os.remove(tmp)
    for c in cs:
        c["cubin"] = _cubin_name(c["ptx"])
    json.dump(cs, open(os.path.join(d, "cases.json"), "w"), indent=1)
    np.savez_compressed(os.path.join(d, "inputs.npz"), **ins)
    for f in ("launch_device.py", "device_parts.py"):  # the harness and its part runner
        shutil.copy(ROOT / "warpsim" / "validation" / f, d)
    print(f"{len(cs)} cases; wrote {d}")


def replay(case: dict, inputs, gpu=None, prefix: str = "", check: bool = False):
    """``case`` on warpsim (see :func:`warpsim.validation.launch_device.simulate`)."""
    from warpsim.validation.launch_device import simulate
    return simulate(case, ptx_text(case["ptx"]), inputs, gpu, prefix, check)


def check(d: str, results: str, fixture: str | None = None) -> int:
    import warpsim

    cs = json.load(open(os.path.join(d, "cases.json")))
    ins = np.load(os.path.join(d, "inputs.npz"))
    gpu = np.load(results)
    print("device:", gpu["device"][0] if "device" in gpu.files else "?")
    log = json.loads(str(gpu["log"][0]))
    bad_total, fix = 0, {"cases": np.array([json.dumps(cs)]), "device": gpu["device"]}
    for i, c in enumerate(cs):
        if log[str(i)]["rc"] != 0:
            print(f"{c['name']}: GPU run failed: {log[str(i)]['stderr'][-300:]}")
            bad_total += 1
            continue
        for j, a in enumerate(c["args"]):  # warpsim's encoder against the driver's bytes
            if "tmap" in a:
                e = a["enc"]
                mine = warpsim.tensor_map(e["dtype"], e["dims"], e["strides"], e["box"], swizzle=e["swizzle"],
                                          address=int(gpu[f"{i}/addr/{a['tmap']}"][0])).raw
                same = mine == gpu[f"{i}/map{j}"].tobytes()
                print(f"{c['name']}: tensor map of argument {j}: {'equal to' if same else 'DIFFERS from'} the driver's")
                bad_total += 0 if same else 1
                fix[f"{i}/map{j}"] = gpu[f"{i}/map{j}"]
                fix[f"{i}/addr/{a['tmap']}"] = gpu[f"{i}/addr/{a['tmap']}"]
        got = replay(c, ins, gpu, f"{i}/")
        for key in c["out"]:
            want = gpu[f"{i}/{key}"]
            nb = int(np.count_nonzero(np.ascontiguousarray(got[key]).view(np.uint8).reshape(-1)
                                      != np.ascontiguousarray(want).view(np.uint8).reshape(-1)))
            bad_total += nb
            print(f"{c['name']:28s} {key}: {want.nbytes} bytes, {nb} differ")
            fix[f"gpu/{i}/{key}"] = want
        for a in c["args"]:
            key = a.get("array", a.get("tmap"))
            if key is not None:
                fix[f"in/{key}"] = ins[key]
    if fixture:
        np.savez_compressed(fixture, **fix)
        print("wrote", fixture)
    return 1 if bad_total else 0


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
