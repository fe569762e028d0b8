"""What a kernel declares vs what it touches (issue 24): the same 3-instruction kernel declaring
only what it uses, 10^6 registers more, and 256 KiB of untouched ``.local`` per thread on top,
launched over 8 x 256 threads with and without the sanitizer; time and peak memory (tracemalloc)
of each, in this one process.

    PYTHONPATH=. python benchmarks/launch_declared.py
"""

from __future__ import annotations

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
 mad.lo.u32 %t, %r1, 256, %t;
 mul.wide.u32 %rd2, %t, 4;
 add.u64 %rd1, %rd1, %rd2;
 st.global.u32 [%rd1], %t;
 ret;
}
"""
CASES = {"declares what it uses": "",
         "+10^6 registers": ".reg .b32 %big<1000000>;",
         "+10^6 registers, 256 KiB .local": ".reg .b32 %big<1000000>; .local .u8 l[262144];"}


def main() -> None:
    launch(K.replace("EXTRA", ""), "k", 8, 256, [np.zeros(8 * 256, np.uint32)])  # warm-up (imports)
    for check in (False, True):
        for name, extra in CASES.items():
            a = np.zeros(8 * 256, np.uint32)
            tracemalloc.start()
            t = time.perf_counter()
            out = launch(K.replace("EXTRA", extra), "k", 8, 256, [a], check=check)[0]
            dt = time.perf_counter() - t
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert (out == np.arange(8 * 256)).all()
            print(f"check={check!s:5} {name:34} {dt:6.2f} s  peak {peak / 2**20:8.1f} MiB")


if __name__ == "__main__":
    main()
