"""The FlashAttention-3-style warp-specialised kernel (tests/data/real/cuda/fa3_ws.cu) on warpsim:
CPU time of one launch (seqlen 256 -> 2 CTAs of 384 threads, head dim 64: 8 KV blocks of TMA +
mbarrier waits + 16 wgmma per consumer warpgroup), without and with the sanitizer, medians of
``--repeat`` runs; ``--profile`` prints the top of a cProfile of the unchecked launch.

    PYTHONPATH=. python benchmarks/fa3_ws.py [--seqlen 256] [--repeat 3] [--profile] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import warpsim

ROOT = Path(__file__).resolve().parent.parent
PTX = ROOT / "tests" / "data" / "real" / "cuda" / "fa3_ws_sm_90a.ptx"


def launch(m, L: int, check: bool):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((L, 64)).astype(np.float16) for _ in range(3))
    maps = [warpsim.tensor_map("f16", (64, L), (128,), (64, 64), swizzle="128B", tensor=t) for t in (q, k, v)]
    return m.launch("fa3_fwd", L // 128, 384, maps + [np.zeros((L, 64), np.float16), np.int32(L),
                    np.float32(0.125 * np.log2(np.e))], shared_bytes=6 * 8192 + 56 + 1024, arch="sm_90a",
                    check=check)[-1]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqlen", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    m = warpsim.Module(PTX.read_text())
    launch(m, a.seqlen, False)  # warm: parse, compile the program
    res = {"machine": f"{platform.machine()} {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
           "seqlen": a.seqlen, "ctas": a.seqlen // 128, "warps": 12 * (a.seqlen // 128), "repeats": a.repeat,
           "clock": "time.process_time (CPU seconds)"}
    for check in (False, True):
        ts = []
        for _ in range(a.repeat):
            t = time.process_time()
            launch(m, a.seqlen, check)
            ts.append(time.process_time() - t)
        res["checked_s" if check else "unchecked_s"] = float(np.median(ts))
    res["checked_over_unchecked"] = res["checked_s"] / res["unchecked_s"]
    for k, v in res.items():
        print(f"{k:24s} {v:.3f}" if isinstance(v, float) else f"{k:24s} {v}")
    if a.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        launch(m, a.seqlen, False)
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
