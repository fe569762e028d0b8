"""Device side of the Hopper async-copy validation (standalone: NumPy and ctypes only, so it runs
on a GPU machine without warpsim installed; copy ``device_parts.py`` beside it).

    python hopper_async_device.py async_kernels.cubin OUT.npz

Runs every case of :data:`CASES` (each section in a child process, so a fault loses one
section only) and writes one ``.npz``: the driver's tensor-map bytes for a sweep of
``cuTensorMapEncodeTiled`` parameters (with each call's return code), and for every kernel case
its inputs and outputs.  ``tests/test_hopper_async.py`` replays the same cases through warpsim.
"""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

# ------------------------------------------------------------------------------------------
# the cases (shared with the warpsim side, which imports this module)
# ------------------------------------------------------------------------------------------
#: CUtensorMapDataType codes -> (name, bytes per element)
DTYPES = {0: ("u8", 1), 1: ("u16", 2), 2: ("u32", 4), 3: ("s32", 4), 4: ("u64", 8), 5: ("s64", 8),
          6: ("f16", 2), 7: ("f32", 4), 8: ("f64", 8), 9: ("bf16", 2), 10: ("f32_ftz", 4),
          11: ("tf32", 4), 12: ("tf32_ftz", 4)}


def _enc(name, dtype=6, rank=2, addr=0x7F0000000000, dims=(1024, 512), strides=(2048,), box=(64, 32),
         es=None, inter=0, swz=0, l2=0, oob=0):
    es = tuple(es or (1,) * rank)
    return dict(name=name, dtype=dtype, rank=rank, addr=addr, dims=tuple(dims), strides=tuple(strides),
                box=tuple(box), es=es, inter=inter, swz=swz, l2=l2, oob=oob)


def sweep_cases() -> list[dict]:
    """cuTensorMapEncodeTiled parameter sets: legal ones spanning every field, and illegal ones
    (the driver's return code says which)."""
    c = [_enc("base"), _enc("addr+0x100", addr=0x7F0000000100), _enc("addr_hi", addr=0x123456789A00)]
    for dt in DTYPES:
        esz = DTYPES[dt][1]
        c.append(_enc(f"dtype{dt}", dtype=dt, dims=(256, 64), strides=(256 * esz,), box=(128 // esz, 8)))
    c += [
        _enc("rank1", rank=1, dims=(1000,), strides=(), box=(256,)),
        _enc("rank3", rank=3, dims=(1024, 512, 7), strides=(2048, 2048 * 512), box=(64, 32, 2)),
        _enc("rank4", rank=4, dims=(16, 5, 6, 7), strides=(32, 160, 960), box=(8, 5, 6, 7)),
        _enc("rank5", rank=5, dims=(64, 3, 5, 7, 9), strides=(128, 384, 1920, 13440), box=(64, 2, 3, 4, 5)),
        _enc("rank5_es", rank=5, dims=(64, 3, 5, 7, 9), strides=(128, 384, 1920, 13440), box=(64, 2, 3, 4, 5),
             es=(1, 2, 3, 4, 5)),
        _enc("rank5_es8", rank=5, dims=(64, 30, 50, 70, 90), strides=(128, 3840, 192000, 13440000),
             box=(64, 16, 8, 8, 8), es=(1, 8, 7, 6, 8)),
        _enc("dim0=1000", dims=(1000, 512)), _enc("dim1=513", dims=(1024, 513)),
        _enc("dim0=2^32", dims=(1 << 32, 512), strides=(1 << 34,)),
        _enc("stride0=4096", strides=(4096,)),
        _enc("stride0=2^39", dims=(1024, 2), strides=(1 << 39,)),
        _enc("stride_hi_all", rank=5, dims=(8, 2, 2, 2, 2), strides=(0x1234567890, 0x2345678910, 0x3456789120,
                                                                     0x4567891230), box=(8, 1, 1, 1, 1)),
        _enc("stride_hi_r4", rank=4, dims=(8, 2, 2, 2), strides=(0xABCDEF0010, 0x10, 0xF000000000), box=(8, 1, 1, 1)),
        _enc("box0=128", box=(128, 32)), _enc("box1=256", box=(64, 256)), _enc("box1=1", box=(64, 1)),
        _enc("box0=8", box=(8, 3)),
        _enc("es1=2", es=(1, 2)), _enc("es1=8", es=(1, 8)), _enc("es0=2", es=(2, 1)), _enc("es1=3", es=(1, 3)),
        _enc("es0=3_box5", box=(40, 5), es=(3, 3)),
        _enc("l2_64", l2=1), _enc("l2_128", l2=2), _enc("l2_256", l2=3),
        _enc("oob_nan", oob=1), _enc("oob_nan_f32", dtype=7, box=(32, 32), oob=1),
        _enc("inter16", inter=1, rank=3, dims=(8, 512, 4), strides=(16 * 512, 16 * 512 * 4), box=(8, 32, 2)),
        _enc("inter32", inter=2, swz=1, rank=3, dims=(16, 512, 4), strides=(32 * 512, 32 * 512 * 4),
             box=(16, 32, 2)),
        _enc("inter16_swz128", inter=1, swz=3, rank=3, dims=(8, 512, 4), strides=(16 * 512, 16 * 512 * 4),
             box=(8, 32, 2)),
        _enc("all", dtype=9, rank=3, addr=0x7F12345678C0, dims=(300, 200, 3), strides=(640, 640 * 200),
             box=(32, 16, 3), es=(1, 2, 1), swz=2, l2=2, oob=1),
    ]
    for s in (1, 2, 3):
        for b0 in (8, 16, 32, 64, 128):
            c.append(_enc(f"swz{s}_box{b0}", swz=s, box=(b0, 32)))
    for s in (4, 5, 6):
        c.append(_enc(f"swz{s}", swz=s, box=(64, 32)))
    # illegal parameters
    c += [
        _enc("bad_rank0", rank=0, dims=(), strides=(), box=()),
        _enc("bad_rank6", rank=6, dims=(8,) * 6, strides=(16,) * 5, box=(8,) * 6),
        _enc("bad_addr_align8", addr=0x7F0000000008),
        _enc("bad_dim0_0", dims=(0, 512)), _enc("bad_dim_2^32+1", dims=((1 << 32) + 1, 2), strides=(1 << 34,)),
        _enc("bad_stride_15", strides=(2040,)), _enc("bad_stride_2^40", strides=(1 << 40,), dims=(8, 2)),
        _enc("bad_box0_0", box=(0, 32)), _enc("bad_box0_257", box=(257, 32), dims=(1024, 512)),
        _enc("bad_box_bytes_not16", box=(60, 32)),
        _enc("bad_es0", es=(0, 1)), _enc("bad_es9", es=(1, 9)),
        _enc("bad_swz128_box", swz=3, box=(128, 32)), _enc("bad_swz32_box", swz=1, box=(32, 32)),
        _enc("bad_dtype13", dtype=13), _enc("bad_dtype16", dtype=16),
        _enc("bad_inter_rank2", inter=1, box=(8, 32)),
        _enc("bad_inter32_noswz", inter=2, rank=3, dims=(16, 512, 4), strides=(32 * 512, 32 * 512 * 4),
             box=(16, 32, 2)),
        _enc("bad_l2_4", l2=4), _enc("bad_oob_2", oob=2), _enc("bad_oob_nan_int", dtype=2, box=(32, 32), oob=1),
        _enc("bad_swz7", swz=7),
        _enc("bad_stride_lt_row", strides=(1024,), dims=(1024, 512)),
        _enc("bad_box_gt_dim", dims=(32, 16), strides=(64,), box=(64, 32)),
    ]
    return c


def load_cases() -> list[dict]:
    """TMA tile loads: one map and several boxes (coordinates, innermost first) each."""
    out = []

    def add(name, dtype, dims, pitch_elems, box, coords, swz=0, oob=0, es=None, rank=None):
        rank = rank or len(dims)
        esz = DTYPES[dtype][1]
        # tensor stored densely with the given row pitch (elements) in dim 0, dense above
        shape = [pitch_elems] + list(dims[1:])
        strides, acc = [], pitch_elems * esz
        for d in dims[1:]:
            strides.append(acc)
            acc *= d
        out.append(dict(name=name, dtype=dtype, rank=rank, dims=tuple(dims), strides=tuple(strides),
                        box=tuple(box), es=tuple(es or (1,) * rank), swz=swz, oob=oob,
                        nbytes_tensor=int(np.prod(shape)) * esz, coords=[tuple(c) + (0,) * (5 - rank)
                                                                          for c in coords]))
    c2 = [(0, 0), (40, 50), (-8, -5), (96, 60), (-60, 0), (36, -31)]
    for s, b0 in ((0, 64), (1, 16), (2, 32), (3, 64)):
        add(f"f16_swz{s}", 6, (100, 70), 128, (b0, 32), c2, swz=s)
    add("f16_swz3_nan", 6, (100, 70), 128, (64, 32), c2, swz=3, oob=1)
    add("bf16_nan", 9, (100, 70), 104, (32, 16), c2, swz=2, oob=1)
    add("f32_swz3_nan", 7, (50, 40), 56, (32, 8), [(0, 0), (30, 35), (-4, -2), (20, 10)], swz=3, oob=1)
    add("u8_swz3", 0, (300, 20), 304, (128, 16), [(0, 0), (250, 10), (-16, 0), (128, 4)], swz=3)
    add("u8_swz1_box8rows", 0, (50, 9), 64, (32, 8), [(0, 0), (30, 3), (-3, -3)], swz=1)
    add("u32_1d", 2, (1000,), 1000, (256,), [(0,), (900,), (-100,), (372,)])
    add("f16_3d_es", 6, (40, 30, 5), 40, (16, 8, 4), [(0, 0, 0), (30, 25, 3), (-4, -3, -1)], es=(1, 2, 1))
    add("f32_4d", 7, (12, 5, 6, 7), 12, (8, 3, 4, 2), [(0, 0, 0, 0), (8, 4, 4, 6), (-2, -1, 0, 1)])
    add("u8_5d", 0, (32, 3, 5, 7, 9), 32, (16, 2, 3, 4, 5), [(0, 0, 0, 0, 0), (24, 2, 3, 5, 7), (-8, -1, 0, 0, -2)],
        es=(1, 1, 2, 1, 3))
    add("f16_box8", 6, (20, 10), 24, (8, 3), [(0, 0), (16, 9), (-4, 8)])
    return out


def store_cases() -> list[dict]:
    return [dict(name="f16_store", dtype=6, dims=(100, 70), pitch=128, box=(64, 32), swz=0, mode=0,
                 coords=[(0, 0), (60, 50), (96, 66)]),
            dict(name="f16_store_swz3", dtype=6, dims=(100, 70), pitch=128, box=(64, 32), swz=3, mode=0,
                 coords=[(8, 3), (70, 60)]),
            dict(name="f32_reduce", dtype=7, dims=(50, 40), pitch=56, box=(32, 8), swz=0, mode=1,
                 coords=[(0, 0), (30, 35), (10, 4)])]


def box_bytes(box, es, esz) -> int:
    return int(np.prod([-(-b // e) for b, e in zip(box, es)])) * esz


def tensor_bytes(seed: int, n: int) -> np.ndarray:
    """Random bytes of a tensor (with some f16/f32 special values sprinkled through)."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def f32_adversarial(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n).astype(np.float32) * np.float32(2.0) ** rng.integers(-130, 20, n).astype(np.float32)
    bits = v.view(np.uint32)
    bits[rng.random(n) < 0.05] = 0x7FC00001
    bits[rng.random(n) < 0.05] = 0x00000003
    return bits.view(np.float32)


# ------------------------------------------------------------------------------------------
# driver calls (ctypes)
# ------------------------------------------------------------------------------------------
class _Cuda:
    def __init__(self, cubin: str | None = None):
        self.lib = ctypes.CDLL("libcuda.so.1")
        c = self.lib
        assert c.cuInit(0) == 0
        dev = ctypes.c_int()
        assert c.cuDeviceGet(ctypes.byref(dev), 0) == 0
        self.ctx = ctypes.c_void_p()
        assert c.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev) == 0
        assert c.cuCtxSetCurrent(self.ctx) == 0
        drv = ctypes.c_int()
        c.cuDriverGetVersion(ctypes.byref(drv))
        self.driver = drv.value
        name = ctypes.create_string_buffer(256)
        c.cuDeviceGetName(name, 256, dev)
        self.name = name.value.decode()
        self.mod = None
        if cubin:
            data = open(cubin, "rb").read()
            self.mod = ctypes.c_void_p()
            r = c.cuModuleLoadData(ctypes.byref(self.mod), ctypes.c_char_p(data))
            assert r == 0, f"cuModuleLoadData: {r}"

    def encode(self, p: dict, addr=None) -> tuple[int, bytes]:
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        tm = (ctypes.c_uint8 * 128)()
        r = max(p["rank"], 1)
        D = (u64 * 6)(*p["dims"], *(1,) * (6 - len(p["dims"])))
        S = (u64 * 6)(*p["strides"], *(16,) * (6 - len(p["strides"])))
        B = (u32 * 6)(*p["box"], *(1,) * (6 - len(p["box"])))
        E = (u32 * 6)(*p["es"], *(1,) * (6 - len(p["es"])))
        rc = self.lib.cuTensorMapEncodeTiled(ctypes.byref(tm), u32(p["dtype"]), u32(p["rank"]),
                                             ctypes.c_void_p(p["addr"] if addr is None else addr), D, S, B, E,
                                             u32(p["inter"]), u32(p["swz"]), u32(p["l2"]), u32(p["oob"]))
        return rc, bytes(tm)

    def alloc(self, arr: np.ndarray) -> int:
        p = ctypes.c_uint64()
        n = max(arr.nbytes, 16)
        assert self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
        a = np.ascontiguousarray(arr)
        assert self.lib.cuMemcpyHtoD_v2(p, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)) == 0
        return p.value

    def get(self, ptr: int, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        assert self.lib.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr),
                                        ctypes.c_size_t(out.nbytes)) == 0
        return out

    def launch(self, kernel: str, grid, block, args: list):
        f = ctypes.c_void_p()
        assert self.lib.cuModuleGetFunction(ctypes.byref(f), self.mod, kernel.encode()) == 0
        holders = []
        for a in args:
            if isinstance(a, bytes):
                holders.append((ctypes.c_uint8 * len(a)).from_buffer_copy(a))
            elif isinstance(a, tuple) and a[0] == "ptr":
                holders.append(ctypes.c_uint64(a[1]))
            elif isinstance(a, tuple) and a[0] == "u32":
                holders.append(ctypes.c_uint32(a[1] & 0xFFFFFFFF))
            else:
                holders.append(ctypes.c_int32(int(a)))
        params = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        r = self.lib.cuLaunchKernel(f, *g, *b, 0, None, params, None)
        assert r == 0, f"cuLaunchKernel {kernel}: {r}"
        r = self.lib.cuCtxSynchronize()
        assert r == 0, f"{kernel}: cuCtxSynchronize {r}"


def _map_params(case, addr):
    return dict(dtype=case["dtype"], rank=case["rank"], addr=addr, dims=case["dims"], strides=case["strides"],
                box=case["box"], es=case["es"], inter=0, swz=case["swz"], l2=0, oob=case["oob"])


def section(name: str, cubin: str) -> dict:
    out: dict = {}
    if name == "sweep":
        cu = _Cuda()
        cases = sweep_cases()
        res = [cu.encode(p) for p in cases]
        out["sweep_rc"] = np.array([r for r, _ in res], np.int32)
        out["sweep_bytes"] = np.frombuffer(b"".join(b for _, b in res), np.uint8).reshape(-1, 128)
        out["driver"] = np.array([cu.driver])
        out["device"] = np.array([cu.name])
        return out
    cu = _Cuda(cubin)
    kind, i, k = (name.split(":") + ["0", "0"])[:3]
    i, k = int(i), int(k)
    if kind == "load":  # case i, box k (one CTA, own process: a faulting box loses itself only)
        c = load_cases()[i]
        esz = DTYPES[c["dtype"]][1]
        t = tensor_bytes(100 + i, c["nbytes_tensor"])
        ta = cu.alloc(t)
        rc, m = cu.encode(_map_params(c, ta))
        assert rc == 0, (c["name"], rc)
        nb = box_bytes(c["box"], c["es"], esz)
        ncopy = (nb + 128 + 3) // 4 * 4
        coords = np.array(c["coords"][k:k + 1], np.int32)
        o = np.zeros(ncopy, np.uint8)
        fl = np.zeros(1, np.int32)
        po, pf, pc = cu.alloc(o), cu.alloc(fl), cu.alloc(coords)
        out[f"load/{c['name']}/{k}/map"] = np.frombuffer(m, np.uint8)
        out[f"load/{c['name']}/{k}/addr"] = np.array([ta], np.uint64)
        cu.launch("tma_load_box", (1,), (128,), [m, ("ptr", pc), c["rank"], ("u32", nb), ("u32", ncopy),
                                                  ("ptr", po), ("ptr", pf)])
        out[f"load/{c['name']}/{k}/out"] = cu.get(po, o)
        out[f"load/{c['name']}/{k}/flag"] = cu.get(pf, fl)
    elif kind == "store":
        c = store_cases()[i]
        esz = DTYPES[c["dtype"]][1]
        W, H = c["dims"]
        if c["mode"] == 0:
            t = tensor_bytes(200 + i, c["pitch"] * H * esz)
        else:
            t = f32_adversarial(200 + i, c["pitch"] * H).view(np.uint8)
        ta = cu.alloc(t)
        p = dict(dtype=c["dtype"], rank=2, addr=ta, dims=(W, H), strides=(c["pitch"] * esz,), box=c["box"],
                 es=(1, 1), inter=0, swz=c["swz"], l2=0, oob=0)
        rc, m = cu.encode(p)
        assert rc == 0, (c["name"], rc)
        nb = box_bytes(c["box"], (1, 1), esz)
        x, y = c["coords"][k]
        s = (tensor_bytes(300 + 10 * i + k, nb) if c["mode"] == 0
             else f32_adversarial(300 + 10 * i + k, nb // 4).view(np.uint8))
        pre = f"store/{c['name']}/{k}/"
        out.update({pre + "map": np.frombuffer(m, np.uint8), pre + "addr": np.array([ta], np.uint64),
                    pre + "in": t, pre + "src": s})
        cu.launch("tma_store_box", (1,), (128,), [m, x, y, c["mode"], ("u32", nb), ("ptr", cu.alloc(s))])
        out[pre + "out"] = cu.get(ta, t)
    elif kind == "bulk":
        src = tensor_bytes(400, 8192)
        dst = np.zeros(8192, np.uint8)
        acc = f32_adversarial(401, 1024)
        pd, pa, pf = cu.alloc(dst), cu.alloc(acc), cu.alloc(np.zeros(1, np.int32))
        cu.launch("bulk_copy", (1,), (64,), [("ptr", cu.alloc(src)), ("ptr", pd), ("ptr", pa), 48, 32, 4096,
                                             ("ptr", pf)])
        out.update({"bulk/src": src, "bulk/acc_in": acc, "bulk/dst": cu.get(pd, dst), "bulk/acc": cu.get(pa, acc),
                    "bulk/flag": cu.get(pf, np.zeros(1, np.int32))})
        inp = np.random.default_rng(402).integers(0, 2**32, 256 * 7, dtype=np.uint32)
        o = np.zeros_like(inp)
        po = cu.alloc(o)
        cu.launch("pingpong", (1,), (96,), [("ptr", cu.alloc(inp)), ("ptr", po), 7])
        out.update({"pingpong/in": inp, "pingpong/out": cu.get(po, o)})
        o = np.zeros(32 * 8, np.uint32)
        po = cu.alloc(o)
        cu.launch("cluster_dsmem", (8,), (64,), [("ptr", po)])
        out["cluster/out"] = cu.get(po, o)
        w = np.zeros(32, np.uint64)
        pw = cu.alloc(w)
        cu.launch("mbar_words", (1,), (32,), [("ptr", pw)])
        out["mbar/words"] = cu.get(pw, w)
        v = np.array([0x45678A00, 0x7F12, 100, 70, 3, 256, 256 * 70, 64, 32, 2, 1, 2, 1], np.uint32)
        o = np.zeros(128, np.uint8)
        po = cu.alloc(o)
        cu.launch("tmap_replace", (1,), (32,), [("ptr", cu.alloc(v)), ("ptr", po)])
        out["replace/v"] = v
        out["replace/out"] = cu.get(po, o)
        rc, m = cu.encode(dict(dtype=6, rank=3, addr=0x7F1245678A00, dims=(100, 70, 3), strides=(256, 256 * 70),
                               box=(64, 32, 2), es=(1, 2, 1), inter=0, swz=3, l2=0, oob=1))
        out["replace/driver"] = np.frombuffer(m, np.uint8)
    elif kind == "multicast":
        t = tensor_bytes(500, 128 * 70 * 2)
        ta = cu.alloc(t)
        rc, m = cu.encode(dict(dtype=6, rank=2, addr=ta, dims=(100, 70), strides=(256,), box=(64, 32), es=(1, 1),
                               inter=0, swz=3, l2=0, oob=0))
        o = np.zeros(2 * 4096, np.uint8)
        po, pf = cu.alloc(o), cu.alloc(np.zeros(2, np.int32))
        cu.launch("tma_multicast", (2,), (64,), [m, 40, 50, ("u32", 4096), ("ptr", po), ("ptr", pf)])
        out.update({"multicast/map": np.frombuffer(m, np.uint8), "multicast/addr": np.array([ta], np.uint64),
                    "multicast/out": cu.get(po, o), "multicast/flag": cu.get(pf, np.zeros(2, np.int32))})
    return out


def sections() -> list[str]:
    return (["sweep", "bulk", "multicast"]
            + [f"load:{i}:{k}" for i, c in enumerate(load_cases()) for k in range(len(c["coords"]))]
            + [f"store:{i}:{k}" for i, c in enumerate(store_cases()) for k in range(len(c["coords"]))])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--section":
        name, cubin, path = argv[1:4]
        np.savez(path, **section(name, cubin))
        return 0
    cubin, path = argv[:2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from device_parts import run_parts  # copied beside this file
    parts = [(s, [__file__, "--section", s, cubin, part], part)
             for s in sections() for part in [path + f".{s.replace(':', '_')}.npz"]]
    run_parts(parts, path, print_tail=200)
    return 0


if __name__ == "__main__":
    sys.exit(main())
