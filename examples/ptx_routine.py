"""Run a real fragment routine on a simulated warp: ldmatrix from swizzled shared memory,
mma.sync in a loop over K, cvt packing and stmatrix back to shared memory.

    PYTHONPATH=. python examples/ptx_routine.py
"""

import numpy as np

import warpsim

ROUTINE = """
.reg .b32 %r<32>; .reg .f32 %f<4>; .reg .pred %p1;
    mov.u32 %r1, %laneid;
    and.b32 %r2, %r1, 15;           // ldmatrix.x4: lane -> row of A (lanes 16-31: next 8 columns)
    shr.u32 %r3, %r1, 4;
    and.b32 %r4, %r2, 7;            // 128-byte swizzle: 16-byte chunk c of row r sits at c ^ (r & 7)
    shl.b32 %r5, %r2, 7;
    mov.f32 %f0, 0f00000000; mov.f32 %f1, 0f00000000;
    mov.f32 %f2, 0f00000000; mov.f32 %f3, 0f00000000;
    mov.u32 %r7, 0;
KLOOP:
    shl.b32 %r8, %r7, 1;
    add.u32 %r8, %r8, %r3;
    xor.b32 %r9, %r8, %r4;
    shl.b32 %r9, %r9, 4;
    add.u32 %r10, %r5, %r9;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r10];
    shl.b32 %r11, %r7, 4;           // B is K x 8, row-major, at byte 2048: .trans gives the fragment
    add.u32 %r11, %r11, %r2;
    shl.b32 %r11, %r11, 4;
    add.u32 %r11, %r11, 2048;
    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r24, %r25}, [%r11];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r20, %r21, %r22, %r23}, {%r24, %r25}, {%f0, %f1, %f2, %f3};
    add.u32 %r7, %r7, 1;
    setp.lt.u32 %p1, %r7, 4;
    @%p1 bra KLOOP;
    cvt.rn.f16x2.f32 %r26, %f1, %f0;   // cvt packs its FIRST source into the HIGH half
    cvt.rn.f16x2.f32 %r27, %f3, %f2;
    shl.b32 %r12, %r2, 4;
    add.u32 %r12, %r12, 4096;
    stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r12], {%r26, %r27};
"""

rng = np.random.default_rng(0)
A = rng.standard_normal((16, 64)).astype(np.float16)
B = rng.standard_normal((64, 8)).astype(np.float16)

# Shared memory image: A swizzled (16 rows of 128 bytes), B row-major at 2048, D goes to 4096.
smem = np.zeros(4096 + 256, np.uint8)
chunks = A.view(np.uint8).reshape(16, 8, 16)
for r in range(16):
    for c in range(8):
        smem[r * 128 + (c ^ (r & 7)) * 16:][:16] = chunks[r, c]
smem[2048:3072] = B.view(np.uint8).reshape(-1)

warp = warpsim.Warp("sm_90")
routine = warp.compile(ROUTINE)          # parsed and decoded once
n = warp.run(routine, shared=smem)
D = warp.shared.read(np.float16, 4096, 128).reshape(16, 8)

# The same product through warpsim.matmul, one k16 step at a time (f32 accumulation as the warp does).
ins = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
C = np.zeros((16, 8))
for k in range(0, 64, 16):
    C = warpsim.matmul(ins, A[:, k:k + 16], B[k:k + 16], C)
print(f"{n} instructions executed")
print("D (f16) from stmatrix equals matmul, bit for bit:", np.array_equal(D, C.astype(np.float16)))
print("accumulator register %f0 of lanes 0-3:", warp.read_float("%f0")[:4])
