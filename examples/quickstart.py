"""warpsim quick start: decode an instruction, see its layout, pack matrices, run mma.sync.

Run: python examples/quickstart.py
"""

import numpy as np

import warpsim

INSTR = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"

# 1. Decode: the instruction's fields and registers per lane.
ins = warpsim.decode(INSTR, arch="sm_90")
print(ins.text)
print("shape", ins.shape, "A/B/C/D types", ins.atype, ins.btype, ins.ctype, ins.dtype)
print("registers per lane", dict(ins.regs))
print("legal on", ", ".join(warpsim.legal_archs(ins)))

# 2. Layout: which (row, col) of A each of lane 5's eight elements is.
print("lane 5 holds A elements (row, col):", warpsim.layout(ins, "a")[5].tolist())

# 3. Pack random matrices into register words (32 lanes x registers), for a batch of 2 warps.
rng = np.random.default_rng(0)
A = rng.standard_normal((2, 16, 16))
B = rng.standard_normal((2, 16, 8))
C = rng.standard_normal((2, 16, 8))
a, b, c = (warpsim.pack(ins, op, m) for op, m in zip("abc", (A, B, C)))
print("A registers:", a.shape, a.dtype, "lane 0:", [hex(w) for w in a[0, 0]])

# 4. Run the mma on the registers as an H100 would, and as exact arithmetic would.
d_hw = warpsim.mma(ins, a, b, c, arch="sm_90")
d_exact = warpsim.mma(ins, a, b, c, arch="exact")
D_hw = warpsim.unpack(ins, "d", d_hw)
D_exact = warpsim.unpack(ins, "d", d_exact)
diff = np.count_nonzero(d_hw != d_exact)
print(f"D words differing between sm_90 and exact rounding: {diff} of {d_hw.size}")
print("largest |sm_90 - exact|:", float(np.abs(D_hw - D_exact).max()))

# 5. The same through matmul (pack -> mma -> unpack).
D = warpsim.matmul(ins, A, B, C, arch="sm_90")
assert np.array_equal(D, D_hw)

# 6. A warp register file running the PTX text itself.
warp = warpsim.Warp(arch="sm_90", batch=2)
warp.load(ins, "a", A, regs=["%r0", "%r1", "%r2", "%r3"])
warp.load(ins, "b", B, regs=["%r4", "%r5"])
warp.load(ins, "c", C, regs=["%f4", "%f5", "%f6", "%f7"])
warp.execute(INSTR + " {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%f4,%f5,%f6,%f7};")
D_warp = warp.store(ins, "d", regs=["%f0", "%f1", "%f2", "%f3"])
assert np.array_equal(D_warp, D_hw)
print("Warp.execute result matches mma:", D_warp.shape)
