"""Drill into simulator-vs-hardware mismatches of a collected run (a developer's tool).

    python tools/hwdiff.py DATA_DIR SUBSTR [--dist D] [--arch A] [--show N]

Loads every run whose instruction contains SUBSTR, recomputes the simulator's D, and prints,
for the first N mismatching D elements, the matrix position, hardware and simulator bits, and
the row of A, column of B and C element that produced it (as values).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from warpsim.facts import formats
from warpsim.tensorcore.execute import mma
from warpsim.tensorcore.packing import unpack_bits
from warpsim.validation import inputs as _inputs
from warpsim.validation.compare import _instructions


def load(data: Path, substr: str, dist: str | None):
    man = json.loads((data / "manifest.json").read_text())
    table = _instructions(man["arch"])
    for e in man["entries"]:
        if substr in e["instr"] and (dist is None or e["dist"] == dist):
            ins = table[e["instr"]]
            hw = np.load(data / e["file"])[e["key"]]
            x = _inputs.make_inputs(ins, e["dist"], e["n_warps"], e["seed"])
            yield ins, e["dist"], x, hw, man["arch"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("substr")
    ap.add_argument("--dist")
    ap.add_argument("--arch")
    ap.add_argument("--show", type=int, default=3)
    args = ap.parse_args()
    for ins, dist, x, hw, arch in load(Path(args.data), args.substr, args.dist):
        arch = args.arch or arch
        sim = mma(ins, x["a"], x["b"], x["c"], arch=arch)
        H = unpack_bits(ins, "d", hw)
        S = unpack_bits(ins, "d", sim)
        bad = np.argwhere(H != S)
        print(f"{ins.text} [{dist}]: {len(bad)} of {H.size} elements differ")
        if not len(bad):
            continue
        A = formats.decode(unpack_bits(ins, "a", x["a"]), ins.atype)
        B = formats.decode(unpack_bits(ins, "b", x["b"]), ins.btype)
        C = formats.decode(unpack_bits(ins, "c", x["c"]), ins.ctype)
        for idx in bad[: args.show]:
            idx = tuple(idx)
            *batch, m, n = idx
            batch = tuple(batch)
            print(f"  D{list(idx)} hw={int(H[idx]):#x} sim={int(S[idx]):#x} "
                  f"hw={formats.decode(H[idx], ins.dtype)!r} sim={formats.decode(S[idx], ins.dtype)!r}")
            print("    a row:", A[batch + (m,)].tolist())
            print("    b col:", B[batch + (slice(None), n)].tolist())
            print("    c:", C[idx].item(), " products:", (A[batch + (m,)] * B[batch + (slice(None), n)]).tolist())


if __name__ == "__main__":
    main()
