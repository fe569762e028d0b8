"""Build ``warpsim/data/sfu_sm90.npz`` (the MUFU tables of :mod:`warpsim.ptx.sfu`) from a
:mod:`warpsim.validation.sfu_collect` run.

``python -m warpsim.validation.sfu_tables RUN_DIR [OUT]``: reads ``tables_f32.npz``,
``tables_ex2lg2.npz``, ``samples.npz``, ``f64.npz`` and ``checks.json`` of one device run and writes
every table as its first value plus int8 first differences (larger ones listed apart) (the hardware's answers are smooth,
so the differences deflate to ~100 KB per 2**23 entries), with the run's provenance as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "sfu_sm90.npz"


def undelta(d: np.ndarray) -> np.ndarray:
    """Inverse of sfu_collect's transport encoding (first value as int64 bytes, then differences)."""
    d = np.asarray(d)
    w = d.dtype.itemsize
    if w == 8:
        return np.cumsum(d).astype(np.uint32)
    first = d[: 8 // w].view(np.int64)[0]
    return np.cumsum(np.concatenate([[first], d[8 // w:].astype(np.int64)])).astype(np.uint32)


def encode(t: np.ndarray) -> dict[str, np.ndarray]:
    """A u16/u32 table as int8 first differences (modulo the table's width) with the few larger
    differences listed apart; :func:`warpsim.ptx.sfu.table` inverts it."""
    t = np.asarray(t)
    signed = {2: np.int16, 4: np.int32}[t.dtype.itemsize]
    d = np.diff(t).view(signed).astype(np.int64)  # wraps modulo 2**bits
    big = np.abs(d) > 127
    return {"d": np.where(big, 0, d).astype(np.int8), "xi": np.flatnonzero(big).astype(np.int32),
            "xv": d[big], "first": np.array(int(t[0]), np.int64), "dtype": np.array(str(t.dtype))}


def build(run: Path, out: Path = DEFAULT_OUT) -> dict:
    t = {}
    for f in ("tables_f32.npz", "tables_ex2lg2.npz"):
        z = np.load(run / f)
        t.update({k: undelta(z[k]) for k in z.files})
    s = np.load(run / "samples.npz")
    f64 = np.load(run / "f64.npz")
    checks = json.loads((run / "checks.json").read_text())
    tables = {
        "rcp": t["rcp_1_2"],                         # MUFU.RCP of 1.M, M = 23 bits
        "rsq": t["rsq_1_4"],                         # MUFU.RSQ of [1, 4): key = parity:M
        "sqrt": t["sqrt_1_4"],                       # MUFU.SQRT of [1, 4)
        # MUFU.EX2 of +f then of -f, f = k * 2**-23 in [0, 1): key = sign:k
        "ex2": np.concatenate([t["ex2_pos24"][0::2], t["ex2_neg24"][0::2]]),
        "lg2": t["lg2_half_2"],                      # MUFU.LG2 of [0.5, 2): keys M (x/2) then M (x)
        "ex2_f16": s["t16_ex2_f16"], "ex2_bf16": s["t16_ex2_bf16"],
        "tanh_f16": s["t16_tanh_f16"], "tanh_bf16": s["t16_tanh_bf16"],
        "rcp64h": (f64["rcp64"] >> np.uint64(32)).astype(np.uint32),  # high words over [1, 2)
        "rsq64h": (f64["rsq64"] >> np.uint64(32)).astype(np.uint32),  # high words over [1, 4)
    }
    # the 2**-24 grid measured for ex2 repeats in pairs (the unit truncates to 23 fraction bits)
    assert np.array_equal(t["ex2_pos24"][0::2], t["ex2_pos24"][1::2])
    assert np.array_equal(t["ex2_neg24"][0::2], t["ex2_neg24"][1::2])
    arrays = {}
    for name, v in tables.items():
        arrays.update({f"{name}.{k}": a for k, a in encode(v).items()})
    meta = {"device": checks["device"], "harness": "warpsim.validation.sfu_collect",
            "note": "answers of the special-function unit (MUFU) over each function's reduced domain"}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)
    return meta


if __name__ == "__main__":
    r = Path(sys.argv[1])
    print(build(r, Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_OUT))
