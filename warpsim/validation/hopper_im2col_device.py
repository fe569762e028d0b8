"""Device side of the im2col / interleaved TMA validation (standalone: NumPy and ctypes only; copy
``hopper_async_device.py`` and ``device_parts.py`` beside it).

    python hopper_im2col_device.py im2col_kernels.cubin OUT.npz

Writes one ``.npz``: the driver's bytes for a sweep of ``cuTensorMapEncodeIm2col`` parameters
(each call's return code too), and for every load case (im2col through
``im2col_kernels.cu::im2col_load``, interleaved tile maps through ``async_kernels.cu::tma_load_box``)
the map, the tensor, the shared-memory image, the completion flag and the barrier's final word.
Each group of loads runs in a child process (a fault loses that group only).
``tests/test_hopper_im2col.py`` replays the cases through warpsim.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hopper_async_device import DTYPES, _Cuda, tensor_bytes  # noqa: E402


def _i2c(name, dtype=6, rank=4, addr=0x7F0000000000, dims=(64, 10, 9, 3), strides=None, lower=(-1, -1),
         upper=(-1, -1), cpp=64, ppc=32, es=None, inter=0, swz=0, l2=0, oob=0):
    esz = DTYPES.get(dtype, ("?", 2))[1]
    if strides is None:
        strides, acc = [], dims[0] * esz if dims else 16
        for d in dims[1:]:
            strides.append(acc)
            acc *= d
    return dict(name=name, dtype=dtype, rank=rank, addr=addr, dims=tuple(dims), strides=tuple(strides),
                lower=tuple(lower), upper=tuple(upper), cpp=cpp, ppc=ppc, es=tuple(es or (1,) * rank),
                inter=inter, swz=swz, l2=l2, oob=oob)


def sweep_cases() -> list[dict]:
    c = [_i2c("base"), _i2c("addr_hi", addr=0x123456789A00),
         _i2c("rank3", rank=3, dims=(64, 20, 2), lower=(-3,), upper=(2,)),
         _i2c("rank5", rank=5, dims=(32, 6, 5, 4, 2), lower=(-1, -2, -3), upper=(1, 0, -1), cpp=32),
         _i2c("r3_lo_min", rank=3, dims=(64, 20, 2), lower=(-32768,), upper=(32767,)),
         _i2c("r4_lo_min", lower=(-128, -128), upper=(127, 127)),
         _i2c("r5_lo_min", rank=5, dims=(32, 6, 5, 4, 2), lower=(-16, -16, -16), upper=(15, 15, 15), cpp=32),
         _i2c("r4_mixed", lower=(3, -5), upper=(-7, 9)),
         _i2c("r5_mixed", rank=5, dims=(32, 6, 5, 4, 2), lower=(1, -2, 3), upper=(-4, 5, -6), cpp=32)]
    for cpp in (8, 16, 32, 128, 256):
        c.append(_i2c(f"cpp{cpp}", dims=(256, 10, 9, 3), cpp=cpp))
    for ppc in (1, 2, 64, 128, 256, 1024):
        c.append(_i2c(f"ppc{ppc}", ppc=ppc))
    for dt in (0, 1, 2, 7, 8, 9, 11):
        esz = DTYPES[dt][1]
        c.append(_i2c(f"dtype{dt}", dtype=dt, dims=(128 // esz, 10, 9, 3), cpp=64 // esz))
    for es in ((1, 2, 1, 1), (1, 1, 2, 1), (2, 1, 1, 1), (1, 3, 2, 4), (1, 8, 8, 8)):
        c.append(_i2c("es" + "".join(map(str, es)), es=es))
    for s, cpp in ((1, 16), (2, 32), (3, 64)):
        c.append(_i2c(f"swz{s}", swz=s, cpp=cpp))
    c += [_i2c("oob_nan", oob=1), _i2c("l2_1", l2=1), _i2c("l2_3", l2=3),
          _i2c("inter16", inter=1, dims=(8, 10, 9, 3), cpp=8),
          _i2c("all", dtype=9, rank=5, addr=0x7F12345678C0, dims=(64, 7, 6, 5, 2), lower=(-2, -1, 0),
               upper=(1, 0, -3), cpp=32, ppc=40, es=(1, 2, 1, 3, 1), swz=2, l2=2, oob=1)]
    # illegal
    c += [_i2c("bad_rank2", rank=2, dims=(64, 10), lower=(), upper=()),
          _i2c("bad_r4_lo", lower=(-129, 0)), _i2c("bad_r4_hi", upper=(0, 128)),
          _i2c("bad_r5_lo", rank=5, dims=(32, 6, 5, 4, 2), lower=(-17, 0, 0), upper=(0, 0, 0), cpp=32),
          _i2c("bad_r3_hi", rank=3, dims=(64, 20, 2), lower=(0,), upper=(32768,)),
          _i2c("bad_cpp0", cpp=0), _i2c("bad_cpp257", dims=(512, 10, 9, 3), cpp=257),
          _i2c("bad_cpp_not16", cpp=60), _i2c("bad_ppc0", ppc=0), _i2c("bad_ppc1025", ppc=1025),
          _i2c("bad_swz128_cpp", swz=3, cpp=128), _i2c("bad_es9", es=(1, 9, 1, 1))]
    return c


def load_cases() -> list[dict]:
    """im2col maps (dense tensors) with (coords, offsets) pairs to load."""
    out = []

    def add(name, dtype, dims, lower, upper, cpp, ppc, loads, es=None, swz=0, oob=0):
        p = _i2c(name, dtype=dtype, rank=len(dims), dims=dims, lower=lower, upper=upper, cpp=cpp, ppc=ppc,
                 es=es, swz=swz, oob=oob)
        p["nbytes_tensor"] = int(np.prod(dims)) * DTYPES[dtype][1]
        p["loads"] = [(tuple(cc) + (0,) * (5 - len(cc)), tuple(oo) + (0,) * (3 - len(oo))) for cc, oo in loads]
        out.append(p)
    # 4D NHWC f16, a 3x3 convolution with padding 1 (lower -1, upper -1)
    add("f16_nhwc_3x3", 6, (16, 6, 5, 2), (-1, -1), (-1, -1), 16, 32,
        [((0, -1, -1, 0), (0, 0)), ((0, -1, -1, 0), (1, 1)), ((0, -1, -1, 0), (2, 2)), ((0, -1, -1, 0), (2, 0)),
         ((0, 2, 1, 0), (1, 0)), ((0, 3, 2, 1), (0, 1)), ((8, -1, -1, 0), (1, 1)), ((0, 0, 0, 0), (0, 0)),
         ((-8, -1, -1, 1), (0, 2))])
    # 3D NWC f32, conv stride 2 in W (element stride), lower -2, upper 1
    add("f32_nwc_s2", 7, (8, 20, 3), (-2,), (1,), 8, 40,
        [((0, -2, 0), (0,)), ((0, -2, 0), (3,)), ((0, 6, 1), (1,)), ((0, 21, 0), (0,))], es=(1, 2, 1))
    # 5D NDHWC u8, 32B swizzle
    add("u8_ndhwc_swz32", 0, (32, 5, 4, 3, 2), (-1, -1, -1), (0, 0, -1), 32, 48,
        [((0, -1, -1, -1, 0), (0, 0, 0)), ((0, -1, -1, -1, 0), (1, 2, 1)), ((0, 3, 2, 1, 1), (0, 1, 0))], swz=1)
    # 4D f16, 128B swizzle, NaN fill, shifted box (lower 0, upper -2)
    add("f16_swz128_nan", 6, (64, 8, 8, 1), (0, 0), (-2, -2), 64, 64,
        [((0, 0, 0, 0), (0, 0)), ((0, 0, 0, 0), (2, 1)), ((0, 5, 4, 0), (1, 1)), ((0, 3, 5, 0), (3, 3))],
        swz=3, oob=1)
    # 4D bf16 with element strides in W and H, 20 pixels
    add("bf16_es22", 9, (16, 9, 7, 2), (-1, -1), (0, 0), 16, 20,
        [((0, -1, -1, 0), (0, 0)), ((0, -1, -1, 0), (1, 2)), ((0, 5, 3, 1), (1, 0))], es=(1, 2, 2, 1))
    # cpp smaller than C (a channel slice), start channel 16
    add("f16_cslice", 6, (64, 4, 4, 2), (0, 0), (0, 0), 16, 24, [((16, 0, 0, 0), (0, 0)), ((48, 2, 3, 0), (0, 0))])
    # second run: starts off the element-stride lattice or outside the box, N's element stride,
    # offsets past 2^15
    add("bf16_offlattice", 9, (16, 9, 7, 2), (-1, -1), (0, 0), 16, 20,
        [((0, 0, -1, 0), (0, 0)), ((0, -2, -1, 0), (0, 0)), ((0, -1, 0, 0), (0, 0)), ((0, 9, -1, 0), (0, 0))],
        es=(1, 2, 2, 1))
    add("f16_es_n2", 6, (16, 4, 3, 5), (0, 0), (0, 0), 16, 40, [((0, 0, 0, 0), (0, 0)), ((0, 2, 1, 1), (0, 0))],
        es=(1, 1, 1, 2))
    add("f16_big_offsets", 6, (16, 6, 5, 2), (-1, -1), (-1, -1), 16, 32,
        [((0, 0, 0, 0), (65535, 0)), ((0, 1, 1, 0), (0, 65534)), ((0, 0, 0, 0), (32768, 0))])
    return out


def inter_cases() -> list[dict]:
    """Interleaved tile maps: (coords) boxes loaded through tma_load_box."""
    def p(name, dtype, dims, box, inter, swz, coords, es=None, oob=0):
        esz = DTYPES[dtype][1]
        strides, acc = [], dims[0] * esz
        for d in dims[1:]:
            strides.append(acc)
            acc *= d
        return dict(name=name, dtype=dtype, rank=len(dims), dims=dims, strides=tuple(strides), box=box,
                    es=tuple(es or (1,) * len(dims)), inter=inter, swz=swz, l2=0, oob=oob,
                    nbytes_tensor=int(np.prod(dims)) * esz, coords=[tuple(c) + (0,) * (5 - len(c)) for c in coords])
    return [p("i16_f16", 6, (8, 40, 6), (8, 16, 2), 1, 0, [(0, 0, 0), (0, 30, 5), (0, -3, -1)]),
            p("i16_u8_c4", 0, (16, 24, 3), (16, 8, 3), 1, 0, [(0, 0, 0), (0, 20, 1)]),
            p("i32_f16_swz32", 6, (16, 40, 6), (16, 16, 2), 2, 1, [(0, 0, 0), (0, 30, 5)]),
            p("i16_f32_swz64", 7, (4, 64, 3), (4, 32, 2), 1, 2, [(0, 0, 0), (0, 40, 2)]),
            p("i16_f16_4d", 6, (8, 10, 6, 3), (8, 8, 4, 2), 1, 0, [(0, 0, 0, 0), (0, 5, 4, 2)], oob=1)]


def probe_cases() -> list[dict]:
    """More interleaved tile loads (issue 20, second run): a whole 4D image, box[0] vs box[1]
    as the walked counts, element strides, a dimension-0 start past the first chunk, a box
    narrower than the chunk (shared memory copied out to 4x the box's bytes)."""
    base = {c["name"]: c for c in inter_cases()}
    def q(name, src, **kw):
        c = dict(base[src], name=name, **kw)
        dims, esz = c["dims"], DTYPES[c["dtype"]][1]
        strides, acc = [], dims[0] * esz
        for d in dims[1:]:
            strides.append(acc)
            acc *= d
        c.update(strides=tuple(strides), nbytes_tensor=int(np.prod(dims)) * esz, rank=len(dims),
                 es=tuple(kw.get("es", (1,) * len(dims))),
                 coords=[tuple(x) + (0,) * (5 - len(x)) for x in kw.get("coords", c["coords"])])
        return c
    return [q("p4d_whole", "i16_f16_4d", coords=[(0, 0, 0, 0), (0, 1, 2, 1)]),
            q("p4d_box0_ne_box1", "i16_f16_4d", box=(8, 4, 3, 2), coords=[(0, 0, 0, 0), (0, 2, 1, 0)]),
            q("p3d_box1_4", "i16_f16", box=(8, 4, 3), coords=[(0, 0, 0), (0, 3, 2)]),
            q("p3d_es", "i16_f16", box=(8, 4, 4), es=(1, 2, 2), coords=[(0, 0, 0), (0, 1, 1)]),
            q("p3d_c0", "i16_f16", dims=(16, 40, 6), coords=[(8, 0, 0), (0, 2, 1)]),
            q("p3d_es0", "i16_u8_c4", es=(2, 1, 1), coords=[(0, 0, 0)]),
            q("p3d_narrow", "i16_u8_c4", box=(8, 8, 3), coords=[(0, 0, 0)]),
            q("p4d_last", "i16_f16_4d", dims=(8, 10, 6, 5), box=(8, 2, 2, 3), coords=[(0, 0, 0, 0), (0, 3, 5, 3)])]


def encode_im2col(cu, p, addr=None):
    import ctypes
    u64, u32, i32 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32
    tm = (ctypes.c_uint8 * 128)()
    D = (u64 * 6)(*p["dims"], *(1,) * (6 - len(p["dims"])))
    S = (u64 * 6)(*p["strides"], *(16,) * (6 - len(p["strides"])))
    L = (i32 * 6)(*p["lower"], *(0,) * (6 - len(p["lower"])))
    U = (i32 * 6)(*p["upper"], *(0,) * (6 - len(p["upper"])))
    E = (u32 * 6)(*p["es"], *(1,) * (6 - len(p["es"])))
    rc = cu.lib.cuTensorMapEncodeIm2col(ctypes.byref(tm), u32(p["dtype"]), u32(p["rank"]),
                                        ctypes.c_void_p(p["addr"] if addr is None else addr), D, S, L, U,
                                        u32(p["cpp"]), u32(p["ppc"]), E, u32(p["inter"]), u32(p["swz"]),
                                        u32(p["l2"]), u32(p["oob"]))
    return rc, bytes(tm)


def section(name: str, cubins: list) -> dict:
    out: dict = {}
    if name == "sweep":
        cu = _Cuda()
        res = [encode_im2col(cu, p) for p in sweep_cases()]
        out["sweep_rc"] = np.array([r for r, _ in res], np.int32)
        out["sweep_bytes"] = np.frombuffer(b"".join(b for _, b in res), np.uint8).reshape(-1, 128)
        out["driver"] = np.array([cu.driver])
        out["device"] = np.array([cu.name])
        return out
    kind, i, *only = name.split(":")
    i = int(i)
    only = [int(x) for x in only]
    if kind == "im2col":
        cu = _Cuda(cubins[0])
        c = load_cases()[i]
        esz = DTYPES[c["dtype"]][1]
        t = tensor_bytes(600 + i, c["nbytes_tensor"])
        ta = cu.alloc(t)
        rc, m = encode_im2col(cu, dict(c, addr=ta))
        assert rc == 0, (c["name"], rc)
        pre = f"im2col/{c['name']}/"
        out.update({pre + "map": np.frombuffer(m, np.uint8), pre + "addr": np.array([ta], np.uint64),
                    pre + "in": t})
        nb = c["ppc"] * c["cpp"] * esz
        ncopy = (nb + 256 + 3) // 4 * 4
        for k, (cc, oo) in enumerate(c["loads"]):
            if only and k not in only:
                continue
            o = np.zeros(ncopy, np.uint8)
            pc, po = cu.alloc(np.array(cc, np.int32)), cu.alloc(np.array(oo, np.uint16))
            pout, pf, pw = cu.alloc(o), cu.alloc(np.zeros(1, np.int32)), cu.alloc(np.zeros(1, np.uint64))
            cu.launch("im2col_load", (1,), (128,), [m, ("ptr", pc), ("ptr", po), c["rank"], ("u32", nb),
                                                   ("u32", ncopy), ("ptr", pout), ("ptr", pf), ("ptr", pw)])
            out[pre + f"{k}/out"] = cu.get(pout, o)
            out[pre + f"{k}/flag"] = cu.get(pf, np.zeros(1, np.int32))
            out[pre + f"{k}/word"] = cu.get(pw, np.zeros(1, np.uint64))
    elif kind in ("inter", "probe"):
        cu = _Cuda(cubins[0])
        c = (inter_cases() if kind == "inter" else probe_cases())[i]
        esz = DTYPES[c["dtype"]][1]
        t = tensor_bytes(700 + i, c["nbytes_tensor"])
        ta = cu.alloc(t)
        rc, m = cu.encode(dict(c, addr=ta))
        pre = f"{kind}/{c['name']}/"
        out[pre + "rc"] = np.array([rc], np.int32)
        if rc != 0:
            return out
        out.update({pre + "map": np.frombuffer(m, np.uint8), pre + "addr": np.array([ta], np.uint64),
                    pre + "in": t})
        nb = int(np.prod(c["box"])) * esz
        ncopy = (nb + 256 + 3) // 4 * 4 if kind == "inter" else min(4 * nb + 256, 32768)
        for k, cc in enumerate(c["coords"]):
            o = np.zeros(ncopy, np.uint8)
            pc, pout, pf = cu.alloc(np.array([cc], np.int32)), cu.alloc(o), cu.alloc(np.zeros(1, np.int32))
            pw = cu.alloc(np.zeros(1, np.uint64))
            cu.launch("tile_load", (1,), (128,), [m, ("ptr", pc), c["rank"], ("u32", nb), ("u32", ncopy),
                                                 ("ptr", pout), ("ptr", pf), ("ptr", pw)])
            out[pre + f"{k}/out"] = cu.get(pout, o)
            out[pre + f"{k}/flag"] = cu.get(pf, np.zeros(1, np.int32))
            out[pre + f"{k}/word"] = cu.get(pw, np.zeros(1, np.uint64))
    return out


def sections() -> list[str]:
    return (["sweep"] + [f"im2col:{i}" for i in range(len(load_cases()))]
            + [f"inter:{i}" for i in range(len(inter_cases()))])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = None
    if argv and argv[0] == "--only":  # --only s1,s2,... : these sections only
        names, argv = argv[1].split(","), argv[2:]
    if argv and argv[0] == "--section":
        name, c1, path = argv[1:4]
        np.savez(path, **section(name, [c1]))
        return 0
    c1, path = argv[:2]
    from device_parts import run_parts  # copied beside this file (this directory is on sys.path)
    parts = [(s, [os.path.abspath(__file__), "--section", s, c1, part], part)
             for s in names or sections() for part in [path + f".{s.replace(':', '_')}.npz"]]
    run_parts(parts, path, timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
