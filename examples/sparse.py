"""Sparse mma.sp with warpsim: compress a 2:4 sparse A, see the metadata layout, run on the warp.

Run: python examples/sparse.py
"""

import numpy as np

import warpsim
from warpsim.tensorcore import sparse

INSTR = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
SELECTOR = 1  # lanes 2 and 3 of each quad supply the metadata

ins = warpsim.decode(INSTR, arch="sm_90")
print(ins.text)
print("registers per lane", dict(ins.regs), "(A is the compressed 16 x 16 matrix)")
print("legal sparsity selectors", sparse.legal_selectors(ins))

# 1. A 2:4 sparse A: in every group of four columns of a row, two are zero.
rng = np.random.default_rng(0)
A = rng.standard_normal((16, 32)).astype(np.float16).astype(np.float64)
for r in range(16):
    for g in range(8):
        A[r, 4 * g + rng.choice(4, 2, replace=False)] = 0.0
B = rng.standard_normal((32, 8)).astype(np.float16).astype(np.float64)
C = rng.standard_normal((16, 8)).astype(np.float32).astype(np.float64)

# 2. Compress: the kept values (16 x 16) and one metadata word per lane.
values, meta = sparse.compress(ins, A, selector=SELECTOR)
print("lane 2 metadata word", hex(int(meta[2])), "- lane 0 (not read under selector 1)", hex(int(meta[0])))
lay = warpsim.layout(ins, "e", selector=SELECTOR)
print("lane 2 nibble 0 describes (row, chunk)", tuple(lay[2, 0].tolist()),
      "- nibble 4:", tuple(lay[2, 4].tolist()), "- lane 3 nibble 0:", tuple(lay[3, 0].tolist()))

# 3. matmul on the logical matrix (compressed internally) and on compressed A + metadata agree.
D1 = warpsim.matmul(ins, A, B, C, arch="sm_90")
D2 = warpsim.matmul(ins, values, B, C, metadata=meta, selector=SELECTOR, arch="sm_90")
print("logical and compressed matmul agree:", np.array_equal(D1, D2))

# 4. The same on a Warp, from PTX text.
w = warpsim.Warp("sm_90")
w.load_sparse(ins, A, ["%r0", "%r1", "%r2", "%r3"], "%r9", selector=SELECTOR)
w.load(ins, "b", B, ["%r4", "%r5", "%r6", "%r7"])
w.load(ins, "c", C, ["%f4", "%f5", "%f6", "%f7"])
w.execute(f"{INSTR} {{%f0,%f1,%f2,%f3}}, {{%r0,%r1,%r2,%r3}}, {{%r4,%r5,%r6,%r7}}, "
          f"{{%f4,%f5,%f6,%f7}}, %r9, {SELECTOR};")
D3 = w.store(ins, "d", ["%f0", "%f1", "%f2", "%f3"])
print("Warp.execute result matches matmul:", np.array_equal(D1, D3))
print("largest difference from float64 A @ B + C:", float(np.abs(D1 - (A @ B + C)).max()))

# 5. Mistakes get named: the wrong selector, and index pairs in the wrong order.
print(str(sparse.explain_metadata(ins, meta, A, selector=0)).splitlines()[1])
m = meta.astype(np.int64)
swapped = ((m & 0x33333333) << 2) | ((m >> 2) & 0x33333333)
print(str(sparse.explain_metadata(ins, swapped, A, selector=SELECTOR)).splitlines()[1])
try:
    warpsim.mma(ins, warpsim.pack(ins, "a", values), warpsim.pack(ins, "b", B),
                warpsim.pack(ins, "c", C), metadata=swapped, selector=SELECTOR)
except sparse.MetadataError as e:
    print("MetadataError:", str(e)[:120], "...")
