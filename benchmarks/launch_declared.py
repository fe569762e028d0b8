"""What a kernel declares vs what it touches (issue 24): the same kernel declaring only what it
uses (8 bytes of ``.local``), then 10^6 registers more, then 256 KiB of ``.local`` per thread
of which it touches the same 8 bytes, then 256 KiB touching its first and last word (two pages
per thread); launched over 32 x 256 threads with and without the sanitizer.  CPU time (median of
``--repeat`` runs, interleaved) and peak memory (tracemalloc) of each, in this one process.

    PYTHONPATH=. python benchmarks/launch_declared.py [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import tracemalloc

import numpy as np

from warpsim.kernel.launch import launch

K = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
 .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .u32 %t;
 EXTRA
 ld.param.u64 %rd1, [p];
 cvta.to.global.u64 %rd1, %rd1;
 mov.u32 %t, %tid.x;
 mov.u32 %r1, %ctaid.x;
 st.local.u32 [l], %t;
 st.local.u32 [l+FAR], %r1;
 ld.local.u32 %r2, [l];
 ld.local.u32 %r3, [l+FAR];
 mad.lo.u32 %t, %r3, 256, %r2;
 mul.wide.u32 %rd2, %t, 4;
 add.u64 %rd1, %rd1, %rd2;
 st.global.u32 [%rd1], %t;
 ret;
}
"""
CASES = {"declares what it uses (8 B .local)": (".local .align 4 .b8 l[8];", 4),
         "+10^6 registers": (".reg .b32 %big<1000000>; .local .align 4 .b8 l[8];", 4),
         "+10^6 regs, 256 KiB .local, 8 B touched": (".reg .b32 %big<1000000>; .local .align 4 .b8 l[262144];", 4),
         "+10^6 regs, 256 KiB .local, 2 pages touched": (".reg .b32 %big<1000000>; .local .align 4 .b8 l[262144];",
                                                        262140)}
GRID, BLOCK = 32, 256


def once(text: str, check: bool) -> tuple[float, int]:
    a = np.zeros(GRID * BLOCK, np.uint32)
    tracemalloc.start()
    t = time.process_time()
    out = launch(text, "k", GRID, BLOCK, [a], check=check)[0]
    dt = time.process_time() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (out == np.arange(GRID * BLOCK)).all()
    return dt, peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    opt = ap.parse_args()
    texts = {n: K.replace("EXTRA", e).replace("FAR", str(far)) for n, (e, far) in CASES.items()}
    once(texts[next(iter(texts))], False)  # warm-up (imports)
    rows = []
    load0 = os.getloadavg()
    for check in (False, True):
        times: dict = {n: [] for n in texts}
        peaks: dict = {}
        for _ in range(opt.repeat):  # interleaved: the machine's load hits every case alike
            for n, text in texts.items():
                dt, peaks[n] = once(text, check)
                times[n].append(dt)
        base = statistics.median(times[next(iter(texts))])
        for n in texts:
            med = statistics.median(times[n])
            rows.append(dict(check=check, case=n, cpu_s=med, ratio=med / base, peak_mib=peaks[n] / 2**20))
            print(f"check={check!s:5} {n:44} {med:6.3f} s CPU ({med / base:4.2f}x)  "
                  f"peak {peaks[n] / 2**20:7.1f} MiB")
    info = dict(machine=platform.processor() or platform.machine(), cpus=os.cpu_count(),
                load_before=load0, load_after=os.getloadavg(), repeat=opt.repeat, grid=GRID, block=BLOCK)
    print(info)
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump(dict(info=info, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
