"""Speed of the PTX machine on a representative fragment routine.

The routine (ROUTINE below) is what sits around an mma in a real kernel: address arithmetic,
a loop, swizzled ldmatrix loads, an int4 -> f16x2 dequantisation with lop3 and f16x2 math,
f16 mma accumulation, cvt packing of the accumulator, a shfl.sync row reduction and stmatrix.
It is parsed and decoded once (Warp.compile) and run on new inputs each time.

Reports instructions per second for one warp and lane-instructions per second (instructions
x 32 lanes x warps) for a batch of warps.  ``--no-mma`` runs the routine without its mma line
(103 instructions: what the interpreter itself costs, apart from the tensor-core engine).
Usage: python benchmarks/ptx_interp.py [--warps N ...] [--no-mma] [--breakdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from warpsim import Warp

ROUTINE = """
.reg .b32 %r<64>; .reg .f32 %f<32>; .reg .pred %p<4>;
    mov.u32 %r1, %laneid;
    and.b32 %r2, %r1, 15;
    shr.u32 %r3, %r1, 4;
    and.b32 %r4, %r2, 7;
    shl.b32 %r5, %r2, 7;
    and.b32 %r6, %r1, 15;
    mov.b32 %r40, 0x000f000f; mov.b32 %r41, 0x00f000f0; mov.b32 %r42, 0x64006400;
    mov.b32 %r43, 0x64086408; mov.b32 %r44, 0x2c002c00; mov.b32 %r45, 0xd480d480;
    mov.f32 %f0, 0f00000000; mov.f32 %f1, 0f00000000; mov.f32 %f2, 0f00000000; mov.f32 %f3, 0f00000000;
    mov.u32 %r7, 0;
KLOOP:
    shl.b32 %r8, %r7, 1;
    add.u32 %r8, %r8, %r3;
    xor.b32 %r9, %r8, %r4;
    shl.b32 %r9, %r9, 4;
    add.u32 %r10, %r5, %r9;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r10];
    shl.b32 %r11, %r7, 6;
    add.u32 %r11, %r11, 2048;
    shl.b32 %r12, %r1, 2;
    and.b32 %r12, %r12, 60;
    add.u32 %r11, %r11, %r12;
    ld.shared.u32 %r13, [%r11];
    lop3.b32 %r24, %r13, %r40, %r42, 0xea;
    lop3.b32 %r25, %r13, %r41, %r42, 0xea;
    sub.f16x2 %r24, %r24, %r43;
    fma.rn.f16x2 %r25, %r25, %r44, %r45;
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r20, %r21, %r22, %r23}, {%r24, %r25}, {%f0, %f1, %f2, %f3};
    add.u32 %r7, %r7, 1;
    setp.lt.u32 %p1, %r7, 4;
    @%p1 bra KLOOP;
    add.f32 %f8, %f0, %f1;
    shfl.sync.bfly.b32 %f9, %f8, 1, 0x1f, 0xffffffff;
    add.f32 %f8, %f8, %f9;
    shfl.sync.bfly.b32 %f9, %f8, 2, 0x1f, 0xffffffff;
    add.f32 %f8, %f8, %f9;
    cvt.rn.f16x2.f32 %r26, %f1, %f0;
    cvt.rn.f16x2.f32 %r27, %f3, %f2;
    shl.b32 %r28, %r6, 4;
    add.u32 %r28, %r28, 4096;
    stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r28], {%r26, %r27};
"""


#: The routine without its mma (the accumulators stay zero; everything else runs as above).
ROUTINE_NO_MMA = "\n".join(line for line in ROUTINE.splitlines() if "mma.sync" not in line)


def _setup(warps: int, routine: str = ROUTINE):
    rng = np.random.default_rng(0)
    w = Warp("sm_90", batch=(warps,) if warps > 1 else ())
    prog = w.compile(routine)
    shape = (warps, 4096 + 256) if warps > 1 else (4096 + 256,)
    smem = rng.standard_normal(shape).astype(np.float16)  # 2 bytes each: 8 KB + 512 B
    return w, prog, smem


def measure(warps: int, repeat: int, routine: str = ROUTINE) -> tuple[float, float, int]:
    """(best wall seconds, best CPU seconds, instructions) of one run of the routine."""
    w, prog, smem = _setup(warps, routine)
    best = best_cpu = float("inf")
    n = 0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        n = w.run(prog, shared=smem)
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best, best_cpu, n


def breakdown(warps: int, routine: str = ROUTINE) -> dict[str, float]:
    """CPU seconds per instruction family in one run (family = the opcode's registry module)."""
    from warpsim.ptx import registry
    w, prog, smem = _setup(warps, routine)
    fam = {k: v[0][1] for k, v in registry.table().items()}
    spent: dict[str, float] = {}
    for ins in prog.instrs:
        f = ins.exec
        name = f"{fam[ins.key]} ({ins.key})" if fam[ins.key] in ("tensor",) else fam[ins.key]

        def timed(ctx, mask, f=f, name=name):
            t = time.process_time()
            f(ctx, mask)
            spent[name] = spent.get(name, 0.0) + time.process_time() - t
        ins.exec = timed
    w.run(prog, shared=smem)
    spent.clear()
    t = time.process_time()
    w.run(prog, shared=smem)
    spent["(run loop, guards, setup)"] = time.process_time() - t - sum(spent.values())
    for ins in prog.instrs:  # the program is cached by text: restore it
        ins.exec = ins.exec.__defaults__[0]
    return spent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--warps", type=int, nargs="*", default=[1, 64, 4096])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--breakdown", action="store_true", help="CPU time per instruction family")
    p.add_argument("--no-mma", action="store_true", help="the routine without its mma")
    a = p.parse_args()
    routine = ROUTINE_NO_MMA if a.no_mma else ROUTINE
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; numpy {np.__version__}")
    for warps in a.warps:
        t, c, n = measure(warps, a.repeat, routine)
        print(f"{warps:6d} warps: {n} instructions, wall {t * 1e3:8.1f} ms, CPU {c * 1e3:8.1f} ms: "
              f"{n / c:10,.0f} instr/s, {n * 32 * warps / c:14,.0f} lane-instr/s (CPU time)")
        if a.breakdown:
            spent = breakdown(warps, routine)
            tot = sum(spent.values())
            for k, v in sorted(spent.items(), key=lambda x: -x[1]):
                print(f"        {k:32s} {v * 1e3:9.2f} ms  {100 * v / tot:5.1f}%")


if __name__ == "__main__":
    main()
