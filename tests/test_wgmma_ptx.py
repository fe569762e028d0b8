"""wgmma in launched kernels: warpgroup execution, the async contract, bad input."""

import numpy as np
import pytest

import warpsim
from warpsim.facts import formats
from warpsim.tensorcore import wgmma as W
from warpsim.tensorcore.desc import encode
from warpsim.validation.wgmma import Case, _codes, make_inputs, simulate

CASES = [
    Case("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", nk=2),
    Case("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", nk=4, swz_a="64B", swz_b="32B"),
    Case("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", nk=2, a_desc=False, swz_b="none"),
    Case("wgmma.mma_async.sync.aligned.m64n32k16.f16.f16.f16", nk=2, trans_a=1, trans_b=1, swz_a="none", swz_b="64B"),
    Case("wgmma.mma_async.sync.aligned.m64n48k32.s32.s8.u8", nk=2),
    Case("wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32", nk=2, scale_a=-1),
    Case("wgmma.mma_async.sync.aligned.m64n24k32.f32.e4m3.e5m2", nk=1, a_desc=False),
    Case("wgmma.mma_async.sync.aligned.m64n16k256.s32.b1.b1.and.popc", nk=2, swz_a="none"),
]
SPARSE = [
    Case("wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.f16.f16", nk=2),
    Case("wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.bf16.bf16", nk=2, a_desc=False, sel=1),
    Case("wgmma.mma_async.sp.sync.aligned.m64n24k16.f32.tf32.tf32", nk=2, swz_b="32B"),
    Case("wgmma.mma_async.sp.sync.aligned.m64n32k64.s32.s8.u8", nk=2, swz_b="32B"),
    Case("wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e4m3", nk=1, a_desc=False),
    Case("wgmma.mma_async.sp.sync.aligned.m64n16k32.f16.f16.f16", nk=2, trans_a=1, trans_b=1, swz_a="64B",
         swz_b="none"),
]


def _reference(c: Case, seed: int, kind: str) -> np.ndarray:
    """D from the matrices the inputs were drawn from, through the matrix-level model."""
    i = c.ins
    rng = np.random.default_rng(seed)
    A = _codes(i.atype, (c.nk, 64, i.k), rng, kind)
    B = _codes(i.btype, (c.nk, i.k, i.n), rng, kind)
    C = _codes(i.dtype, (64, i.n), rng, kind)

    def vals(x, t):
        return x.astype(np.int64) if t == "b1" else formats.decode(x.astype(formats.get_format(t).storage_dtype), t)
    D = W.unpack(i, "d", W.pack_codes(i, "d", C))
    for s in range(c.nk):
        D = W.compute(i, vals(A[s], i.atype), vals(B[s], i.btype), D, scale_a=c.scale_a, scale_b=c.scale_b)
        if i.dtype != "s32":
            D = formats.decode(W.encode_d(i, D), i.dtype)
    return D


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kernel_equals_matrix_level(case):
    d = simulate(case, make_inputs(case, 0, "exact"))
    assert np.array_equal(W.unpack(case.ins, "d", d), _reference(case, 0, "exact"))


@pytest.mark.parametrize("case", SPARSE, ids=lambda c: c.name)
def test_sparse_kernel_on_exact_inputs(case):
    """Sparse kernels: D = (logical A) B + C, the logical A rebuilt from the same draws."""
    i = case.ins
    d = simulate(case, make_inputs(case, 0, "exact"))
    rng = np.random.default_rng(0)
    A = _codes(i.atype, (case.nk, 64, i.k), rng, "exact")
    B = _codes(i.btype, (case.nk, i.k, i.n), rng, "exact")
    cs = 2 if i.atype == "tf32" else 4
    keep = np.argsort(rng.random((case.nk, 64, i.k // cs, cs)), axis=-1)[..., :cs // 2]
    mask = np.zeros((case.nk, 64, i.k // cs, cs), bool)
    np.put_along_axis(mask, keep, True, axis=-1)
    C = _codes(i.dtype, (64, i.n), rng, "exact")

    def v(x, t):
        return formats.decode(x.astype(formats.get_format(t).storage_dtype), t)
    Av = np.where(mask.reshape(A.shape), v(A, i.atype), 0)
    D = W.unpack(i, "d", W.pack_codes(i, "d", C))
    for s in range(case.nk):
        D = Av[s] @ v(B[s], i.btype) + D
        if i.dtype == "f16":
            D = D.astype(np.float16).astype(float)
    assert np.array_equal(W.unpack(i, "d", d), D)


_HEAD = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 1024 .b8 smem[4096];
.visible .entry k(.param .u64 out)
{
    .reg .f32 %f<8>; .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16; add.s64 %rd3, %rd1, %rd2;
    mov.b64 %rd4, DESC;
    mov.f32 %f0, 0f00000000; mov.f32 %f1, 0f00000000; mov.f32 %f2, 0f00000000; mov.f32 %f3, 0f00000000;
    mov.u32 %r2, smem; shl.b32 %r3, %r1, 2; add.u32 %r2, %r2, %r3;
    mov.u32 %r4, 0x3C003C00; st.shared.u32 [%r2], %r4; st.shared.u32 [%r2+512], %r4;
    st.shared.u32 [%r2+1024], %r4; st.shared.u32 [%r2+1536], %r4;
    fence.proxy.async.shared::cta;
    bar.sync 0;
"""
_WG = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, %rd4, %rd4, 1, 1, 1, 0, 0;"
_TAIL = """    st.global.v4.f32 [%rd3], {%f0, %f1, %f2, %f3};
    ret;
}
"""


def _kernel(body: str, desc: int = encode(0, 128, 256)) -> str:
    return _HEAD.replace("DESC", str(desc)) + body + _TAIL


def _run(ptx, threads=128, **kw):
    out = np.zeros(threads * 4, np.float32)
    return warpsim.launch(ptx, "k", 1, threads, [out], arch="sm_90a", **kw)[0]


GOOD = f"""    wgmma.fence.sync.aligned;
    {_WG}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
"""


def test_fixed_twin_runs():
    d = _run(_kernel(GOOD)).reshape(128, 4)
    assert (d == 16.0).all()  # all-ones 64x16 times 16x8: 16 everywhere


def _finding(ptx, kind="wgmma-async", threads=128):
    with pytest.raises(warpsim.SanitizerError) as e:
        _run(ptx, threads)
    f = e.value.findings[0]
    assert f.kind == kind, f
    return f


def test_accumulator_read_before_wait_is_a_finding():
    bad = GOOD.replace("    wgmma.wait_group.sync.aligned 0;\n",
                       "    add.f32 %f5, %f0, %f1;\n    wgmma.wait_group.sync.aligned 0;\n")
    f = _finding(_kernel(bad))
    assert "%f0" in f.message and "in flight" in f.message


def test_wait_for_older_group_only_keeps_newer_in_flight():
    bad = GOOD.replace("wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned 1;")
    _finding(_kernel(bad))  # N = 1 leaves the only group in flight: the store reads %f0
    ok = GOOD.replace("    wgmma.commit_group.sync.aligned;\n",
                      "    wgmma.commit_group.sync.aligned;\n    wgmma.commit_group.sync.aligned;\n"
                      ).replace("wait_group.sync.aligned 0;", "wait_group.sync.aligned 1;")
    assert (_run(_kernel(ok)).reshape(128, 4) == 16.0).all()  # the empty group is the newer


def test_accumulator_written_before_wait_is_a_finding():
    bad = GOOD.replace("    wgmma.commit_group.sync.aligned;\n",
                       "    mov.f32 %f2, 0f3F800000;\n    wgmma.commit_group.sync.aligned;\n")
    assert "%f2" in _finding(_kernel(bad)).message


def test_missing_fence_is_a_finding():
    assert "wgmma.fence" in _finding(_kernel(GOOD.replace("    wgmma.fence.sync.aligned;\n", ""))).message
    # accumulators touched after the fence need another one
    late = GOOD.replace("    wgmma.fence.sync.aligned;\n",
                        "    wgmma.fence.sync.aligned;\n    mov.f32 %f0, 0f00000000;\n")
    assert "%f0" in _finding(_kernel(late)).message


def test_chained_wgmmas_need_no_fence_between():
    two = GOOD.replace(_WG, _WG + "\n    " + _WG)
    assert (_run(_kernel(two)).reshape(128, 4) == 32.0).all()


def test_outside_a_full_warpgroup():
    f = _finding(_kernel(GOOD), kind="error", threads=64)
    assert "full warpgroup" in f.message


def test_descriptor_outside_shared_memory():
    f = _finding(_kernel(GOOD, desc=encode(0xF00, 128, 256)), kind="error")
    assert "outside" in f.message and "operand A" in f.message


def test_needs_sm_90a():
    out = np.zeros(512, np.float32)
    with pytest.raises(warpsim.PtxError, match="sm_90a"):
        warpsim.launch(_kernel(GOOD).replace(".target sm_90a", ".target sm_90"), "k", 1, 128, [out], arch="sm_90")


def test_shared_memory_write_during_wgmma_is_a_finding():
    bad = GOOD.replace("    wgmma.commit_group.sync.aligned;\n",
                       "    wgmma.commit_group.sync.aligned;\n    st.shared.u32 [%r2], %r4;\n")
    f = _finding(_kernel(bad))
    assert "shared-memory byte" in f.message and "in flight" in f.message
    ok = GOOD.replace("    wgmma.wait_group.sync.aligned 0;\n",
                      "    wgmma.wait_group.sync.aligned 0;\n    st.shared.u32 [%r2], %r4;\n")
    assert (_run(_kernel(ok)).reshape(128, 4) == 16.0).all()
    # bytes the wgmma does not read may be written while it runs
    far = GOOD.replace("    wgmma.commit_group.sync.aligned;\n",
                       "    wgmma.commit_group.sync.aligned;\n    st.shared.u32 [%r2+2048], %r4;\n")
    assert (_run(_kernel(far)).reshape(128, 4) == 16.0).all()
