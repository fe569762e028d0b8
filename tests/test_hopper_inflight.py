"""Bulk/tensor copies in flight under the sanitizer (loads land when a wait observes their
mbarrier phase, stores hold their sources until cp.async.bulk.wait_group.read), the
fence.proxy.async check before wgmma, and races on distributed shared memory: each planted bug
beside its fixed twin; without the sanitizer the results are those of copies complete at issue."""

from __future__ import annotations

import os

import numpy as np
import pytest

import warpsim

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"
HERE = os.path.dirname(__file__)


def kernel(body: str, params: str = ".param .u64 inp, .param .u64 out") -> str:
    return (HEAD + f".visible .entry k({params})\n{{\n .reg .b32 %r<40>;\n .reg .b64 %rd<20>;\n"
            " .reg .f32 %f<8>;\n .reg .pred %p<8>;\n .shared .align 1024 .b8 smem[4096];\n"
            f" .shared .align 8 .b64 bar;\n{body}\n ret;\n}}\n")


def launch(src, args, grid=1, block=32, **kw):
    return warpsim.launch(src, "k", grid, block, args, arch="sm_90a", **kw)


def kinds(e) -> list:
    return [f.kind for f in e.value.findings]


def bulk_findings(e) -> list:
    return [f for f in e.value.findings if f.kind == "async-copy"]


_ISSUE = """
 ld.param.u64 %rd1, [inp];
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r3, smem;
 mov.u32 %r4, bar;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra SYNC;
 mbarrier.init.shared::cta.b64 [%r4], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r4], 256;
 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], 256, [%r4];
SYNC:
 bar.sync 0;"""
_WAIT = """
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;
 @!%p2 bra WAIT;"""
_READS = {
    "ld.shared": """
 shl.b32 %r5, %r1, 2;
 add.u32 %r6, %r3, %r5;
 ld.shared.u32 %r10, [%r6];""",
    "ldmatrix": """
 and.b32 %r5, %r1, 7;
 shl.b32 %r5, %r5, 4;
 add.u32 %r6, %r3, %r5;
 ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r10}, [%r6];""",
}
_OUT = """
 mul.wide.u32 %rd3, %r1, 4;
 add.u64 %rd4, %rd2, %rd3;
 st.global.u32 [%rd4], %r10;"""


def _load_kernel(read: str, early: bool) -> str:
    body = _ISSUE + (_READS[read] + _WAIT if early else _WAIT + _READS[read]) + _OUT
    return kernel(body)


@pytest.mark.parametrize("read", sorted(_READS))
def test_read_before_the_mbarrier_wait_is_found(read):
    data = np.arange(64, dtype=np.uint32) * 7 + 1
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_load_kernel(read, True), [data, np.zeros(32, np.uint32)])
    f = bulk_findings(e)
    assert f and "a copy in flight writes" in f[0].message and "cp.async.bulk" in f[0].message
    assert f[0].instruction.startswith(read)
    # the fixed twin: no finding, and the same words as an unchecked run (copies complete at issue)
    _, out = launch(_load_kernel(read, False), [data, np.zeros(32, np.uint32)])
    _, ref = launch(_load_kernel(read, False), [data, np.zeros(32, np.uint32)], check=False)
    _, early = launch(_load_kernel(read, True), [data, np.zeros(32, np.uint32)], check=False)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(early, ref)  # unchecked, the copy completed at issue
    if read == "ld.shared":
        np.testing.assert_array_equal(out, data[:32])


def test_write_to_a_load_destination_or_source_in_flight():
    """Overwriting a destination byte, or the global source, before the wait."""
    for body, needle in (("\n st.shared.u32 [%r3], %r1;", "the copy may land after this write"),
                         ("\n st.global.u32 [%rd1], %r1;", "a bulk/tensor load in flight reads")):
        src = kernel(_ISSUE.replace("SYNC:\n bar.sync 0;", body + "\nSYNC:\n bar.sync 0;") + _WAIT)
        with pytest.raises(warpsim.SanitizerError) as e:
            launch(src, [np.zeros(64, np.uint32), np.zeros(32, np.uint32)])
        assert any(needle in f.message for f in bulk_findings(e)), kinds(e)
        fixed = kernel(_ISSUE + _WAIT + body.replace("st.", "@!%p1 st."))
        launch(fixed, [np.zeros(64, np.uint32), np.zeros(32, np.uint32)])


def _store_kernel(reuse: str, wait: str) -> str:
    """All threads write 128 bytes, fence, barrier; thread 0 stores them to global with a bulk
    copy, then ``reuse`` after ``wait``."""
    return kernel(f"""
 ld.param.u64 %rd1, [inp];
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r3, smem;
 shl.b32 %r5, %r1, 2;
 add.u32 %r6, %r3, %r5;
 add.u32 %r7, %r1, 100;
 st.shared.u32 [%r6], %r7;
 fence.proxy.async.shared::cta;
 bar.sync 0;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra DONE;
 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r3], 128;
 cp.async.bulk.commit_group;
 {wait}
 {reuse}
 cp.async.bulk.wait_group 0;
DONE:""")


@pytest.mark.parametrize("reuse,needle,fix", [
    ("st.shared.u32 [%r3], %r1;", "still reads", "cp.async.bulk.wait_group.read 0;"),
    ("ld.global.u32 %r9, [%rd2];\n st.global.u32 [%rd1], %r9;", "a bulk/tensor store in flight writes",
     "cp.async.bulk.wait_group 0;"),
])
def test_bulk_store_buffers_in_flight(reuse, needle, fix):
    args = [np.zeros(4, np.uint32), np.zeros(32, np.uint32)]
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_store_kernel(reuse, ""), args)
    assert any(needle in f.message for f in bulk_findings(e)), [f.message for f in e.value.findings]
    _, out = launch(_store_kernel(reuse, fix), args)
    np.testing.assert_array_equal(out, np.arange(32) + 100)
    # the .read wait frees the source but not the destination
    if needle.startswith("a bulk/tensor store"):
        with pytest.raises(warpsim.SanitizerError):
            launch(_store_kernel(reuse, "cp.async.bulk.wait_group.read 0;"), args)


def _wgmma_kernel(wait_first: bool, fence: bool = True, generic: bool = False) -> str:
    """One warpgroup: B (8 x 16 f16, K-major, no swizzle) copied into shared memory by a bulk copy
    (or, ``generic``, by ordinary stores), A = 1.0 from registers; m64n8k16."""
    if generic:
        fill = f"""
 ld.param.u64 %rd1, [inp];
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r3, smem;
 setp.ge.u32 %p3, %r1, 64;
 @%p3 bra FILLED;
 shl.b32 %r5, %r1, 2;
 add.u32 %r6, %r3, %r5;
 cvt.u64.u32 %rd6, %r5;
 add.u64 %rd7, %rd1, %rd6;
 ld.global.u32 %r7, [%rd7];
 st.shared.u32 [%r6], %r7;
FILLED:
 {'fence.proxy.async.shared::cta;' if fence else ''}
 bar.sync 0;"""
        issue, wait = fill, ""
    else:
        issue, wait = _ISSUE, _WAIT
    mma = """
 mov.b32 %r20, 0x3C003C00;
 mov.f32 %f1, 0f00000000;
 mov.f32 %f2, 0f00000000;
 mov.f32 %f3, 0f00000000;
 mov.f32 %f4, 0f00000000;
 cvt.u64.u32 %rd8, %r3;
 shr.u64 %rd8, %rd8, 4;
 and.b64 %rd8, %rd8, 16383;
 or.b64 %rd8, %rd8, 0x1000080000;
 wgmma.fence.sync.aligned;
 wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, {%r20, %r20, %r20, %r20}, %rd8, 1, 1, 1, 0;
 wgmma.commit_group.sync.aligned;
 wgmma.wait_group.sync.aligned 0;"""
    out = """
 mul.wide.u32 %rd3, %r1, 16;
 add.u64 %rd4, %rd2, %rd3;
 st.global.v4.f32 [%rd4], {%f1, %f2, %f3, %f4};"""
    body = issue + (wait + mma if wait_first else mma + wait) + out
    return kernel(body)


def _wgmma_ref(b16: np.ndarray) -> np.ndarray:
    """D = ones(64 x 16) @ B^T where B (8 x 16) sits in two 8x8 core matrices (LBO 128, SBO 256)."""
    b = b16.reshape(2, 8, 8)  # core matrix j (k 8j..8j+7), row n, 8 k values
    B = np.concatenate([b[0], b[1]], axis=1).astype(np.float64)  # (8 n, 16 k)
    return np.broadcast_to(B.sum(1), (64, 8))


def _wgmma_words(out: np.ndarray) -> np.ndarray:
    o = out.reshape(128, 4)  # thread, regs: rows 16w + g (+8), cols 2t (+1)
    D = np.zeros((64, 8), np.float32)
    for tid in range(128):
        w, lane = divmod(tid, 32)
        g, t = divmod(lane, 4)
        r = 16 * w + g
        D[r, 2 * t], D[r, 2 * t + 1], D[r + 8, 2 * t], D[r + 8, 2 * t + 1] = o[tid]
    return D


def test_wgmma_reading_a_copy_in_flight_is_found():
    rng = np.random.default_rng(1)
    b16 = rng.integers(-4, 5, 128).astype(np.float16)
    args = [b16.view(np.uint32).copy(), np.zeros(512, np.float32)]
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_wgmma_kernel(False), args, block=128)
    f = bulk_findings(e)
    assert f and f[0].instruction.startswith("wgmma.mma_async") and "in flight" in f[0].message
    _, out = launch(_wgmma_kernel(True), args, block=128)
    np.testing.assert_array_equal(_wgmma_words(out), _wgmma_ref(b16))


def test_wgmma_after_generic_stores_needs_a_proxy_fence():
    rng = np.random.default_rng(2)
    b16 = rng.integers(-4, 5, 128).astype(np.float16)
    args = [b16.view(np.uint32).copy(), np.zeros(512, np.float32)]
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_wgmma_kernel(True, fence=False, generic=True), args, block=128)
    f = e.value.findings[0]
    assert f.kind == "async-proxy" and f.instruction.startswith("wgmma.mma_async")
    assert "fence.proxy.async" in f.message
    _, out = launch(_wgmma_kernel(True, fence=True, generic=True), args, block=128)
    np.testing.assert_array_equal(_wgmma_words(out), _wgmma_ref(b16))


def test_suite_gemm_without_its_proxy_fence_is_found():
    """tests/kernels/hopper/gemm_wgmma.ptx (st.shared.v4 tiles, fence.proxy.async, bar.sync,
    wgmma) with its fence removed."""
    ptx = open(os.path.join(HERE, "kernels", "hopper", "gemm_wgmma.ptx")).read()
    assert ptx.count("fence.proxy.async.shared::cta;") == 1
    rng = np.random.default_rng(3)
    M = N = K = 64
    A = rng.integers(-2, 3, (M, K)).astype(np.float16)
    B = rng.integers(-2, 3, (N, K)).astype(np.float16)
    args = [A, B, np.zeros((M, N), np.float32), M, N, K]
    m = warpsim.Module(ptx.replace("fence.proxy.async.shared::cta;", ""))
    with pytest.raises(warpsim.SanitizerError) as e:
        m.launch("gemm_wgmma_f16", (1, 1), 128, args, arch="sm_90a")
    assert e.value.findings[0].kind == "async-proxy"
    _, _, C = warpsim.Module(ptx).launch("gemm_wgmma_f16", (1, 1), 128, args, arch="sm_90a")
    np.testing.assert_array_equal(C, A.astype(np.float32) @ B.astype(np.float32).T)


# -- distributed shared memory races ---------------------------------------------------------
def _dsmem_kernel(sync: str) -> str:
    """Each CTA writes its shared word, then reads its neighbour's through mapa."""
    return kernel(f"""
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 shl.b32 %r5, %r1, 2;
 add.u32 %r6, %r3, %r5;
 mad.lo.u32 %r7, %r2, 1000, %r1;
 st.shared.u32 [%r6], %r7;
 {sync}
 xor.b32 %r8, %r2, 1;
 mapa.shared::cluster.u32 %r9, %r6, %r8;
 ld.shared::cluster.u32 %r10, [%r9];
 mov.u32 %r11, %ctaid.x;
 mad.lo.u32 %r12, %r11, 32, %r1;
 mul.wide.u32 %rd3, %r12, 4;
 add.u64 %rd4, %rd2, %rd3;
 st.global.u32 [%rd4], %r10;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;""")


def test_dsmem_race_without_cluster_barrier_is_found():
    args = [np.zeros(1, np.uint32), np.zeros(64, np.uint32)]
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_dsmem_kernel(""), args, grid=2, cluster=2)
    races = [f for f in e.value.findings if f.kind == "race"]
    assert races and "distributed shared memory" in races[0].message and "CTA (" in races[0].message
    _, out = launch(_dsmem_kernel("barrier.cluster.arrive.aligned;\n barrier.cluster.wait.aligned;"), args,
                    grid=2, cluster=2)
    np.testing.assert_array_equal(out.reshape(2, 32), [np.arange(32) + 1000, np.arange(32)])


def test_dsmem_remote_store_race_and_mbarrier_ordered_twin():
    """Rank 0 stores into rank 1's shared memory while rank 1 reads it: a race; ordered by an
    mbarrier (remote arrive, local wait) it is not."""
    def src(ordered: bool) -> str:
        return kernel(f"""
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 mov.u32 %r4, bar;
 shl.b32 %r5, %r1, 2;
 add.u32 %r6, %r3, %r5;
 setp.eq.u32 %p3, %r1, 0;
 @!%p3 bra INIT;
 mbarrier.init.shared::cta.b64 [%r4], 32;
INIT:
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 setp.ne.u32 %p1, %r2, 0;
 @%p1 bra READER;
 mapa.shared::cluster.u32 %r9, %r6, 1;
 add.u32 %r7, %r1, 500;
 st.shared::cluster.u32 [%r9], %r7;
 mapa.shared::cluster.u32 %r10, %r4, 1;
 {'mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r10];' if ordered else ''}
 bra END;
READER:
 {'WAIT: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r4], 0; @!%p2 bra WAIT;' if ordered else ''}
 ld.shared.u32 %r10, [%r6];
 mul.wide.u32 %rd3, %r1, 4;
 add.u64 %rd4, %rd2, %rd3;
 st.global.u32 [%rd4], %r10;
END:
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;""")
    args = [np.zeros(1, np.uint32), np.zeros(32, np.uint32)]
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(src(False), args, grid=2, cluster=2)
    assert "race" in kinds(e)
    _, out = launch(src(True), args, grid=2, cluster=2)
    np.testing.assert_array_equal(out, np.arange(32) + 500)


def _tensor_kernel(early: bool) -> str:
    """A TMA tile load (64 x 4 f16 box) read before (or after) the wait."""
    read = """
 shl.b32 %r5, %r1, 4;
 add.u32 %r6, %r3, %r5;
 ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r6];"""
    wait = """
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;
 @!%p2 bra WAIT;"""
    return kernel("""
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r3, smem;
 mov.u32 %r4, bar;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra SYNC;
 mov.u64 %rd1, map;
 cvta.param.u64 %rd1, %rd1;
 mbarrier.init.shared::cta.b64 [%r4], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r4], 512;
 mov.u32 %r8, 0;
 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd1, {%r8, %r8}], [%r4];
SYNC:
 bar.sync 0;""" + (read + wait if early else wait + read) + """
 mul.wide.u32 %rd3, %r1, 16;
 add.u64 %rd4, %rd2, %rd3;
 st.global.v4.u32 [%rd4], {%r10, %r11, %r12, %r13};""", ".param .align 64 .b8 map[128], .param .u64 out")


def test_tensor_copy_read_before_the_wait_is_found():
    t = np.random.default_rng(4).integers(0, 2**16, (4, 64), dtype=np.uint16)
    tm = warpsim.tensor_map("f16", (64, 4), box=(64, 4), tensor=t)
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_tensor_kernel(True), [tm, np.zeros(512, np.uint8)])
    f = bulk_findings(e)
    assert f and "cp.async.bulk.tensor" in f[0].message and f[0].instruction.startswith("ld.shared")
    _, out = launch(_tensor_kernel(False), [tm, np.zeros(512, np.uint8)])
    np.testing.assert_array_equal(out.view(np.uint16).reshape(4, 64), t)


def test_read_by_a_warp_that_did_not_wait_is_found():
    """Only warp 0 waits on the mbarrier; warp 1 reads the copied bytes with no barrier after
    that wait: a finding. The twin puts bar.sync after warp 0's wait."""
    def src(sync: bool) -> str:
        return kernel(_ISSUE + """
 setp.ge.u32 %p3, %r1, 32;
 @%p3 bra READ;""" + _WAIT + """
READ:""" + ("\n bar.sync 0;" if sync else "") + """
 and.b32 %r7, %r1, 31;
 shl.b32 %r5, %r7, 2;
 add.u32 %r6, %r3, %r5;
 ld.shared.u32 %r10, [%r6];""" + _OUT + ("" if sync else "\n bar.sync 0;"))
    data = np.arange(64, dtype=np.uint32) + 5
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(src(False), [data, np.zeros(64, np.uint32)], block=64)
    f = bulk_findings(e)
    assert f and "has not observed" in f[0].message and f[0].warp == 1
    _, out = launch(src(True), [data, np.zeros(64, np.uint32)], block=64)
    np.testing.assert_array_equal(out, np.r_[data[:32], data[:32]])


@pytest.mark.parametrize("early", [True, False])
def test_dsmem_atomics_race_with_plain_reads_not_with_each_other(early):
    """Ranks 1-3 add to rank 0's counter with atom.shared::cluster (no race among them); rank 0
    reading it before the cluster barrier that orders the atomics is a race."""
    read = """
 @%p1 bra SKIPREAD;
 @!%p2 ld.shared.u32 %r10, [%r3];
 @!%p2 st.global.u32 [%rd2], %r10;
SKIPREAD:"""
    src = kernel(f"""
 ld.param.u64 %rd2, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 mov.u32 %r4, 0;
 setp.ne.u32 %p2, %r1, 0;
 @!%p2 st.shared.u32 [%r3], %r4;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 setp.ne.u32 %p1, %r2, 0;
 @!%p1 bra ADDED;
 mapa.shared::cluster.u32 %r9, %r3, 0;
 add.u32 %r5, %r2, 10;
 @!%p2 atom.shared::cluster.add.u32 %r6, [%r9], %r5;
ADDED:{read if early else ''}
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;{'' if early else read}
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;""")
    args = [np.zeros(1, np.uint32), np.zeros(1, np.uint32)]
    if early:
        with pytest.raises(warpsim.SanitizerError) as e:
            launch(src, args, grid=4, cluster=4)
        races = [f for f in e.value.findings if f.kind == "race"]
        assert races and "atomically updates" in races[0].message
        return
    _, out = launch(src, args, grid=4, cluster=4)
    assert out[0] == 11 + 12 + 13
