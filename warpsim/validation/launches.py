"""Replay kernel launches on a GPU through CuPy and keep every output byte (for front-end checks).

A *launch list* is JSON: ``[{"cubin": file, "kernel": name, "grid": [x, y, z], "block": n,
"shared": bytes, "args": [arg, ...]}, ...]`` where each arg is ``{"array": key}`` (a buffer
from the inputs ``.npz``, copied to the device), ``{"null": true}`` or ``{"<type>": value}``
with type one of u32 s32 u64 s64 f32 f64.  ``python -m warpsim.validation.launches LIST.json
INPUTS.npz OUT.npz`` runs each launch in order (a fresh copy of its inputs each time) and saves
every array argument afterwards as ``<index>_<argpos>``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

_SCALARS = {"u32": np.uint32, "s32": np.int32, "u64": np.uint64, "s64": np.int64,
            "f32": np.float32, "f64": np.float64}


def scalar_arg(value, ptx_type: str) -> dict:
    """The launch-list entry for a scalar of a PTX parameter type (two's complement for ints)."""
    t = ptx_type.lstrip(".")
    if t in ("f32", "f64"):
        return {t: float(value)}
    bits = int(t[1:])
    v = int(value) & ((1 << bits) - 1)
    return {f"u{max(bits, 32)}": v}


def replay(list_path: str, inputs_path: str, out_path: str) -> None:  # pragma: no cover - GPU
    import cupy as cp

    launches = json.load(open(list_path))
    ins = np.load(inputs_path)
    mods: dict = {}
    res = {}
    for i, L in enumerate(launches):
        mod = mods.setdefault(L["cubin"], cp.RawModule(path=L["cubin"]))
        fn = mod.get_function(L["kernel"])
        args, dev = [], {}
        for j, a in enumerate(L["args"]):
            if "array" in a:
                dev[j] = cp.asarray(ins[a["array"]])
                args.append(dev[j])
            elif "null" in a:
                args.append(np.uint64(0))
            else:
                (t, v), = a.items()
                args.append(_SCALARS[t](v))
        if L.get("shared", 0) > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = L["shared"]
        fn(tuple(L["grid"]), (L["block"],), tuple(args), shared_mem=L.get("shared", 0))
        cp.cuda.Device().synchronize()
        for j, d in dev.items():
            res[f"{i}_{j}"] = cp.asnumpy(d)
    np.savez_compressed(out_path, **res)
    print(f"wrote {out_path}: {len(res)} arrays from {len(launches)} launches")


if __name__ == "__main__":  # pragma: no cover
    replay(*sys.argv[1:4])
