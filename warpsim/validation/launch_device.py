"""Replay kernel launches on a GPU through the CUDA driver (ctypes) and keep every output byte:
arguments as raw parameter bytes, device buffers and tensor maps the driver encodes
(``cuTensorMapEncodeTiled``) for the buffers' device addresses; cluster launches through
``cuLaunchKernelEx``.  Standalone (NumPy and ctypes only; copy ``device_parts.py`` beside it) so
it runs where warpsim is not installed:

    python launch_device.py CASES.json INPUTS.npz OUT.npz

A case is ``{"name", "cubin", "kernel", "grid": [x, y, z], "block": n, "cluster": [x, y, z] or
null, "shared": bytes, "args": [...]}``; each argument is ``{"bytes": hex}`` (the parameter's
bytes), ``{"array": key}`` (a pointer to a device copy of ``INPUTS[key]``; one buffer per key
and launch) or ``{"tmap": key, "size": n, "enc": {dtype, dims, strides, box, es, swizzle,
interleave, l2, oob}}`` (the driver's 128-byte map of that buffer, zero-padded to ``n`` bytes).
Each case runs in a child process (a fault loses that case only).  The output holds, per case
``i``: ``{i}/{key}`` every buffer after the launch, ``{i}/addr/{key}`` its device address,
``{i}/map{j}`` the map bytes of argument ``j``; and ``log`` (each case's return code and
stderr), ``device``.  :func:`simulate` runs a case on warpsim (imported only there).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

import numpy as np


class _Driver:
    def __init__(self):
        c = self.lib = ctypes.CDLL("libcuda.so.1")
        assert c.cuInit(0) == 0
        dev = ctypes.c_int()
        assert c.cuDeviceGet(ctypes.byref(dev), 0) == 0
        self.ctx = ctypes.c_void_p()
        assert c.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev) == 0
        assert c.cuCtxSetCurrent(self.ctx) == 0
        name = ctypes.create_string_buffer(256)
        c.cuDeviceGetName(name, 256, dev)
        self.name = name.value.decode()

    def check(self, r, what):
        if r != 0:
            raise RuntimeError(f"{what}: CUDA error {r}")

    def alloc(self, a: np.ndarray) -> int:
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(a.nbytes, 16))), "cuMemAlloc")
        a = np.ascontiguousarray(a)
        self.check(self.lib.cuMemcpyHtoD_v2(p, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)),
                   "cuMemcpyHtoD")
        return p.value

    def get(self, ptr: int, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        self.check(self.lib.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr),
                                            ctypes.c_size_t(out.nbytes)), "cuMemcpyDtoH")
        return out

    def encode(self, e: dict, addr: int) -> bytes:
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        rank = len(e["dims"])
        tm = (ctypes.c_uint8 * 128)()
        D = (u64 * 5)(*e["dims"], *(1,) * (5 - rank))
        S = (u64 * 5)(*e["strides"], *(16,) * (5 - len(e["strides"])))
        B = (u32 * 5)(*e["box"], *(1,) * (5 - rank))
        E = (u32 * 5)(*e.get("es", (1,) * rank), *(1,) * (5 - rank))
        r = self.lib.cuTensorMapEncodeTiled(ctypes.byref(tm), u32(e["dtype"]), u32(rank), ctypes.c_void_p(addr),
                                            D, S, B, E, u32(e.get("interleave", 0)), u32(e.get("swizzle", 0)),
                                            u32(e.get("l2", 0)), u32(e.get("oob", 0)))
        self.check(r, "cuTensorMapEncodeTiled")
        return bytes(tm)

    def launch(self, case: dict, params: list) -> None:
        c = self.lib
        data = open(case["cubin"], "rb").read()
        mod, f = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(c.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data)), "cuModuleLoadData")
        self.check(c.cuModuleGetFunction(ctypes.byref(f), mod, case["kernel"].encode()), "cuModuleGetFunction")
        shared = int(case.get("shared", 0))
        if shared > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.check(c.cuFuncSetAttribute(f, 8, shared), "cuFuncSetAttribute")
        holders = [(ctypes.c_uint8 * len(p)).from_buffer_copy(p) for p in params]
        ptrs = (ctypes.c_void_p * max(len(holders), 1))(*[ctypes.cast(h, ctypes.c_void_p) for h in holders])
        g = list(case["grid"]) + [1] * (3 - len(case["grid"]))
        b = [int(case["block"]), 1, 1]
        cl = case.get("cluster")
        if cl:
            class Attr(ctypes.Structure):
                _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("x", ctypes.c_uint),
                            ("y", ctypes.c_uint), ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]

            class Config(ctypes.Structure):
                _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                            ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(Attr)), ("nattrs", ctypes.c_uint)]
            assert ctypes.sizeof(Attr) == 72
            attr = Attr(4, b"", *(list(cl) + [1] * (3 - len(cl))), b"")  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            cfg = Config((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*b), shared, None, ctypes.pointer(attr), 1)
            self.check(c.cuLaunchKernelEx(ctypes.byref(cfg), f, ptrs, None), "cuLaunchKernelEx")
        else:
            self.check(c.cuLaunchKernel(f, *g, *b, shared, None, ptrs, None), "cuLaunchKernel")
        self.check(c.cuCtxSynchronize(), f"{case['name']}: cuCtxSynchronize")


def run_case(case: dict, inputs) -> dict:
    drv = _Driver()
    out, bufs, params = {"device": np.array([drv.name])}, {}, []

    def buf(key):
        if key not in bufs:
            bufs[key] = drv.alloc(inputs[key])
        return bufs[key]
    for j, a in enumerate(case["args"]):
        if "bytes" in a:
            params.append(bytes.fromhex(a["bytes"]))
        elif "array" in a:
            params.append(buf(a["array"]).to_bytes(8, "little"))
        else:
            m = drv.encode(a["enc"], buf(a["tmap"]))
            out[f"map{j}"] = np.frombuffer(m, np.uint8)
            params.append(m + bytes(int(a.get("size", 128)) - 128))
    drv.launch(case, params)
    for key, p in bufs.items():
        out[key] = drv.get(p, inputs[key])
        out[f"addr/{key}"] = np.array([p], np.uint64)
    return out


def simulate(case: dict, ptx: str, inputs, gpu=None, prefix: str = "", check: bool = False) -> dict:
    """Run ``case`` (its kernel in ``ptx``) on warpsim at sm_90a, on copies of ``inputs``;
    tensor maps: the GPU run's bytes bound to the buffers (``gpu[prefix + "map{j}"]`` and
    ``gpu[prefix + "addr/{key}"]``, as :func:`run_case` saved them) or, without ``gpu``, made
    by ``warpsim.tensor_map``.  Returns {buffer key: its array after the launch}."""
    from warpsim.kernel.launch import Module
    from warpsim.kernel.tensormap import TensorMap, tensor_map

    arrays, args = {}, []
    for j, a in enumerate(case["args"]):
        if "bytes" in a:
            raw = bytes.fromhex(a["bytes"])
            args.append(np.frombuffer(raw, a["type"])[0] if "type" in a else raw)
            continue
        key = a.get("array", a.get("tmap"))
        if key not in arrays:  # one buffer per key, however many arguments name it
            arrays[key] = np.array(inputs[key], copy=True)
        if "array" in a:
            args.append(arrays[key])
        elif gpu is not None:
            args.append(TensorMap.from_bytes(gpu[f"{prefix}map{j}"], tensor=arrays[key],
                                             device_base=int(gpu[f"{prefix}addr/{key}"][0])))
        else:
            e = a["enc"]
            args.append(tensor_map(e["dtype"], e["dims"], e["strides"], e["box"], e.get("es"),
                                   swizzle=e.get("swizzle", 0), tensor=arrays[key]))
    outs = Module(ptx).launch(case["kernel"], tuple(case["grid"]), case["block"], args,
                              shared_bytes=case["shared"], arch="sm_90a",
                              cluster=tuple(case["cluster"]) if case.get("cluster") else None, check=check)
    keys = [a.get("array", a.get("tmap")) for a in case["args"] if "array" in a or "tmap" in a]
    got: dict = {}
    for key, o in zip(keys, outs):  # one output per buffer or map argument, in order
        got.setdefault(key, o)
    return got


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[0] == "--case":
        i, cases, inputs, path = int(argv[1]), argv[2], argv[3], argv[4]
        case = json.load(open(cases))[i]
        with np.load(inputs) as z:
            np.savez(path, **run_case(case, z))
        return 0
    cases, inputs, path = argv[:3]
    n = len(json.load(open(cases)))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from device_parts import run_parts  # copied beside this file
    parts = [(i, [__file__, "--case", str(i), cases, inputs, f"{path}.{i}.npz"], f"{path}.{i}.npz")
             for i in range(n)]
    run_parts(parts, path, timeout=90, log_tail=800,
              key=lambda i, k: k if k == "device" else f"{i}/{k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
