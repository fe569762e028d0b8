"""How tests/kernels/blackwell/triton_matmul_sm100a.ptx.gz was made: Triton 3.8.0 compiling this
plain matmul ahead of time for sm_100a (compute capability 100, 4 warps, 2 stages; no GPU
needed).  Triton lowers tl.dot to tcgen05.mma into Tensor Memory (MMAv5): TMEM alloc, a zeroing
tcgen05.st, tcgen05.mma from shared-memory descriptors, commit + mbarrier wait, tcgen05.ld.

    python tests/kernels/blackwell/triton_matmul_sm100a.py && gzip -9 mm.ptx
"""
import triton, triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc)

sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
       "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
       "stride_cm": "i32", "stride_cn": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
src = ASTSource(fn=matmul_kernel, signature=sig, constexprs=consts)
k = triton.compile(src, target=GPUTarget("cuda", 100, 32), options={"num_warps": 4, "num_stages": 2})
open("mm.ptx", "w").write(k.asm["ptx"])
print("dynamic shared memory:", k.metadata.shared, "bytes; warps:", k.metadata.num_warps)
