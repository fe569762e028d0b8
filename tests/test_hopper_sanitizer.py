"""Planted bugs in mbarrier/TMA/cluster code, each beside its fixed twin: the sanitizer finds the
bug and passes the twin; clear errors for bad tensor maps, cluster shapes and operands."""

from __future__ import annotations

import numpy as np
import pytest

import warpsim

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def kernel(body: str, params: str = ".param .u64 out", shared: int = 4096) -> str:
    return (HEAD + f".visible .entry k({params})\n{{\n .reg .b32 %r<40>;\n .reg .b64 %rd<20>;\n"
            f" .reg .pred %p<8>;\n .shared .align 1024 .b8 smem[{shared}];\n{body}\n ret;\n}}\n")


def launch(src, args, grid=1, block=32, **kw):
    return warpsim.launch(src, "k", grid, block, args, arch="sm_90a", **kw)


# -- fence.proxy.async ----------------------------------------------------------------------
def _bulk_store(fence: bool) -> str:
    return kernel(f"""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 shl.b32 %r2, %r1, 2;
 mov.u32 %r3, smem;
 add.u32 %r4, %r3, %r2;
 add.u32 %r5, %r1, 100;
 st.shared.u32 [%r4], %r5;
 {'fence.proxy.async.shared::cta;' if fence else ''}
 bar.sync 0;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra DONE;
 cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r3], 128;
 cp.async.bulk.commit_group;
 cp.async.bulk.wait_group.read 0;
DONE:""")


def test_missing_proxy_fence_is_found():
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_bulk_store(False), [np.zeros(32, np.uint32)])
    f = e.value.findings[0]
    assert f.kind == "async-proxy" and "fence.proxy.async" in f.message


def test_fenced_twin_passes():
    out, = launch(_bulk_store(True), [np.zeros(32, np.uint32)])
    np.testing.assert_array_equal(out, np.arange(32) + 100)


# -- mbarrier phases ------------------------------------------------------------------------
def _phase(wait_parity: int) -> str:
    return kernel(f"""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r3, smem;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra SKIP;
 mbarrier.init.shared::cta.b64 [%r3], 1;
SKIP:
 bar.sync 0;
 @%p1 bra WAIT;
 mbarrier.arrive.shared::cta.b64 %rd2, [%r3];
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], {wait_parity};
 @!%p2 bra WAIT;
 mul.wide.u32 %rd3, %r1, 4;
 add.u64 %rd4, %rd1, %rd3;
 st.global.u32 [%rd4], %r1;""")


def test_phase_mismatch_deadlock_is_found():
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_phase(1), [np.zeros(64, np.uint32)], block=64)
    f = e.value.findings[0]
    assert f.kind == "deadlock" and "mbarrier deadlock" in f.message and "phase parity 1" in f.message


def test_phase_twin_passes():
    out, = launch(_phase(0), [np.zeros(64, np.uint32)], block=64)
    np.testing.assert_array_equal(out, np.arange(64))


@pytest.mark.parametrize("body,needle", [
    ("mbarrier.init.shared::cta.b64 [%r3], 1;\n mbarrier.complete_tx.shared::cta.b64 [%r3], 1048576;",
     "tx-count"),
    ("mbarrier.init.shared::cta.b64 [%r3], 1;\n mbarrier.init.shared::cta.b64 [%r3], 2;", "live mbarrier"),
    ("mbarrier.arrive.shared::cta.b64 %rd2, [%r3];", "no initialised mbarrier"),
    ("mbarrier.init.shared::cta.b64 [%r3], 1;\n mbarrier.inval.shared::cta.b64 [%r3];\n"
     " mbarrier.arrive.shared::cta.b64 %rd2, [%r3];", "no initialised mbarrier"),
    ("mbarrier.init.shared::cta.b64 [%r3], 1;\n mbarrier.arrive.shared::cta.b64 %rd2, [%r3], 1;\n"
     " mbarrier.expect_tx.shared::cta.b64 [%r3], 16;\n mbarrier.arrive.shared::cta.b64 %rd2, [%r3], 2;",
     "expects only 1 more"),
])
def test_mbarrier_misuse(body, needle):
    src = kernel(f""" mov.u32 %r3, smem;\n mov.u32 %r1, %tid.x;\n setp.ne.u32 %p1, %r1, 0;\n @%p1 bra END;
 {body}
END:""")
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(src, [np.zeros(4, np.uint32)])
    assert e.value.findings[0].kind == "mbarrier"
    assert needle in e.value.findings[0].message


def test_arrive_states_and_parity_waits():
    """Two phases: arrive states carry the phase, test_wait on a state and on a parity."""
    src = kernel("""
 ld.param.u64 %rd1, [out];
 mov.u32 %r3, smem;
 mbarrier.init.shared::cta.b64 [%r3], 2;
 mbarrier.arrive.shared::cta.b64 %rd2, [%r3];
 mbarrier.test_wait.shared::cta.b64 %p1, [%r3], %rd2;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r3], 64;
 mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r3], 0;
 mbarrier.complete_tx.shared::cta.b64 [%r3], 64;
 mbarrier.test_wait.shared::cta.b64 %p3, [%r3], %rd2;
 mbarrier.test_wait.parity.shared::cta.b64 %p4, [%r3], 1;
 selp.u32 %r10, 1, 0, %p1;
 selp.u32 %r11, 1, 0, %p2;
 selp.u32 %r12, 1, 0, %p3;
 selp.u32 %r13, 1, 0, %p4;
 ld.shared.u64 %rd4, [%r3];
 st.global.v4.u32 [%rd1], {%r10, %r11, %r12, %r13};
 st.global.u64 [%rd1+16], %rd2;
 st.global.u64 [%rd1+24], %rd4;""", shared=64)
    src = src.replace("mov.u32 %r3, smem;", "mov.u32 %r3, smem;\n mov.u32 %r1, %tid.x;\n setp.ne.u32 %p7, %r1, 0;\n"
                      " @%p7 bra END;", 1).replace(" ret;", "END:\n ret;")
    out, = launch(src, [np.zeros(8, np.uint32)], check=False)
    assert list(out[:4]) == [0, 0, 1, 0]
    w = out.view(np.uint64)
    assert w[2] == 0x7FFFF00000000000  # phase 0, 2 pending before the first arrive
    assert w[3] >> 63 == 1  # one phase completed


# -- clusters ------------------------------------------------------------------------------
def test_cluster_shape_errors():
    src = kernel(" ld.param.u64 %rd1, [out];")
    with pytest.raises(warpsim.WarpsimError, match="does not divide"):
        launch(src, [np.zeros(4, np.uint32)], grid=6, cluster=4)
    with pytest.raises(warpsim.WarpsimError, match="at most 16"):
        launch(src, [np.zeros(4, np.uint32)], grid=32, cluster=32)


def test_cluster_specials_and_dsmem_ring():
    src = kernel("""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 shl.b32 %r4, %r1, 2;
 add.u32 %r5, %r3, %r4;
 mad.lo.u32 %r6, %r2, 1000, %r1;
 st.shared.u32 [%r5], %r6;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 mov.u32 %r7, %cluster_nctarank;
 add.u32 %r8, %r2, 1;
 rem.u32 %r8, %r8, %r7;
 mapa.shared::cluster.u32 %r9, %r5, %r8;
 ld.shared::cluster.u32 %r10, [%r9];
 getctarank.shared::cluster.u32 %r11, %r9;
 mov.u32 %r12, %clusterid.x;
 mov.u32 %r13, %ctaid.x;
 mad.lo.u32 %r14, %r13, 32, %r1;
 mul.wide.u32 %rd2, %r14, 16;
 add.u64 %rd3, %rd1, %rd2;
 st.global.v4.u32 [%rd3], {%r10, %r11, %r12, %r2};
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;""")
    out, = launch(src, [np.zeros(6 * 32 * 4, np.uint32)], grid=6, cluster=3)
    o = out.reshape(6, 32, 4)
    cta = np.arange(6)[:, None]
    rank = cta % 3
    np.testing.assert_array_equal(o[..., 3], np.broadcast_to(rank, (6, 32)))
    np.testing.assert_array_equal(o[..., 1], np.broadcast_to((rank + 1) % 3, (6, 32)))
    np.testing.assert_array_equal(o[..., 0], ((rank + 1) % 3) * 1000 + np.arange(32))
    np.testing.assert_array_equal(o[..., 2], np.broadcast_to(cta // 3, (6, 32)))


def test_elect_sync_outside_mask_is_an_error():
    src = kernel("""
 mov.u32 %r1, %tid.x;
 elect.sync %r2|%p1, 0x0000ffff;""")
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(src, [np.zeros(4, np.uint32)])
    assert e.value.findings[0].kind == "divergent-sync"


@pytest.mark.parametrize("n", [16, 100, 264])
def test_setmaxnreg_checks_count(n):
    src = kernel(f" setmaxnreg.inc.sync.aligned.u32 {n};")
    with pytest.raises(warpsim.PtxError, match="multiple of 8 in 24..256"):
        launch(src, [np.zeros(4, np.uint32)])


# -- tensor maps ---------------------------------------------------------------------------
@pytest.mark.parametrize("kw,param", [
    (dict(box=(60, 32)), "box_dim[0]"),
    (dict(box=(64, 32), swizzle="32B"), "box_dim[0]"),
    (dict(box=(64, 0)), "box_dim[1]"),
    (dict(strides=(2040,)), "global_stride[0]"),
    (dict(element_strides=(1, 9)), "element_stride[1]"),
    (dict(oob_fill="nan", dtype="u32", box=(32, 8)), "oob_fill"),
    (dict(dims=(0, 512)), "global_dim[0]"),
    (dict(address=0x7F0000000008), "global_address"),
    (dict(dtype="complex64"), "dtype"),
    (dict(swizzle="96B"), "swizzle"),
])
def test_tensor_map_illegal_parameters(kw, param):
    args = dict(dtype="f16", dims=(1024, 512), strides=(2048,), box=(64, 32))
    args.update(kw)
    with pytest.raises(warpsim.TensorMapError) as e:
        warpsim.tensor_map(**args)
    assert e.value.parameter == param
    assert param in str(e.value)


def test_tensor_map_roundtrip_and_defaults():
    t = np.zeros((70, 128), np.float16)
    tm = warpsim.tensor_map(np.float16, (100, 70), (256,), (64, 32), swizzle="128B", oob_fill="nan", tensor=t)
    back = warpsim.TensorMap.from_bytes(tm.raw, tensor=t, strict=True)
    assert back.fields == tm.fields and back.fields.box_bytes == 4096
    packed = warpsim.tensor_map("bf16", (8, 4, 2), box=(8, 4, 2))
    assert packed.fields.strides == (16, 64)
    with pytest.raises(warpsim.TensorMapError, match="tensor"):
        warpsim.tensor_map("f16", (100, 70), (256,), (64, 32), tensor=np.zeros(10, np.float16))


def test_device_built_tensor_map_feeds_tma():
    """Triton's device-side descriptor path: 128 zero bytes in shared memory, tensormap.replace
    of each field, tensormap.cp_fenceproxy to global, fence.proxy.tensormap, then a TMA load
    through the global map (128B swizzle)."""
    from warpsim.facts.swizzle import swizzle

    body = """
 ld.param.u64 %rd1, [tens];
 ld.param.u64 %rd2, [mapbuf];
 ld.param.u64 %rd3, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, tm;
 shl.b32 %r3, %r1, 2;
 add.u32 %r4, %r2, %r3;
 mov.u32 %r5, 0;
 st.shared.u32 [%r4], %r5;
 bar.sync 0;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra SYNC;
 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r2], %rd1;
 tensormap.replace.tile.rank.shared::cta.b1024.b32 [%r2], 1;
 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r2], 0, 64;
 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r2], 1, 16;
 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r2], 0, 128;
 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r2], 0, 64;
 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r2], 1, 16;
 tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r2], 0, 1;
 tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r2], 1, 1;
 tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%r2], 6;
 tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%r2], 3;
SYNC:
 bar.sync 0;
 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd2], [%r2], 128;
 fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
 @%p1 bra WAIT;
 mov.u32 %r6, smem;
 mov.u32 %r7, bar;
 mbarrier.init.shared::cta.b64 [%r7], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r7], 2048;
 mov.u32 %r8, 0;
 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd2, {%r8, %r8}], [%r7];
WAIT:
 bar.sync 0;
 mov.u32 %r7, bar;
LOOP:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r7], 0;
 @!%p2 bra LOOP;
 mov.u32 %r6, smem;
 mov.u32 %r9, 0;
COPY:
 add.u32 %r10, %r9, %r3;
 add.u32 %r11, %r6, %r10;
 ld.shared.u32 %r12, [%r11];
 cvt.u64.u32 %rd6, %r10;
 add.u64 %rd7, %rd3, %rd6;
 st.global.u32 [%rd7], %r12;
 add.u32 %r9, %r9, 128;
 setp.lt.u32 %p3, %r9, 2048;
 @%p3 bra COPY;"""
    src = kernel(body, ".param .u64 tens, .param .u64 mapbuf, .param .u64 out").replace(
        " .shared .align 1024 .b8 smem[4096];",
        " .shared .align 1024 .b8 smem[4096];\n .shared .align 128 .b8 tm[128];\n .shared .align 8 .b64 bar;")
    t = np.random.default_rng(7).integers(0, 256, 128 * 16, dtype=np.uint8)
    _, mapbuf, out = launch(src, [t, np.zeros(128, np.uint8), np.zeros(2048, np.uint8)])
    want = np.empty(2048, np.uint8)
    want[swizzle(np.arange(2048), "128B")] = t
    np.testing.assert_array_equal(out, want)
    f = warpsim.TensorMap.from_bytes(mapbuf).fields
    assert (f.dims, f.box, f.strides, f.swizzle) == ((64, 16), (64, 16), (128,), 3)


@pytest.mark.parametrize("final_sync", [False, True])
def test_dsmem_read_after_owner_exited(final_sync):
    """A CTA reading its neighbour's shared memory after the neighbour exited (no cluster
    barrier at the end) is a finding; the twin with the closing barrier.cluster passes."""
    src = kernel(f"""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 st.shared.u32 [%r3], %r2;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 setp.eq.u32 %p1, %r2, 0;
 @%p1 bra END;
 mapa.shared::cluster.u32 %r4, %r3, 0;
 ld.shared::cluster.u32 %r5, [%r4];
 st.global.u32 [%rd1], %r5;
END:
 {'barrier.cluster.arrive.aligned; barrier.cluster.wait.aligned;' if final_sync else ''}""")
    if final_sync:
        out, = launch(src, [np.ones(1, np.uint32)], grid=2, cluster=2)
        assert out[0] == 0
        return
    with pytest.raises(warpsim.SanitizerError, match="has exited"):
        launch(src, [np.ones(1, np.uint32)], grid=2, cluster=2)


def test_warp_api_mbarrier_and_cp_async_arrive():
    """One warp through Warp.run: 32 lanes arrive (a phase of 32), cp.async.mbarrier.arrive.noinc
    completes the next one; elect.sync picks lane 0."""
    w = warpsim.Warp()
    w.run("""
 .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<4>;
 mov.u32 %r1, 8;
 mbarrier.init.shared::cta.b64 [%r1], 32;
 mbarrier.arrive.shared::cta.b64 %rd1, [%r1];
 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
 cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r1];
 mbarrier.test_wait.parity.shared::cta.b64 %p3, [%r1], 1;
 selp.u32 %r2, 1, 0, %p1;
 selp.u32 %r4, 1, 0, %p3;
 elect.sync %r3|%p2, 0xffffffff;""", shared=np.zeros(64, np.uint8))
    assert (w["%r2"] == 1).all() and (w["%r4"] == 1).all()
    assert (w["%r3"] == 0).all() and w["%p2"].tolist() == [True] + [False] * 31


_PARAM_MAP_KERNEL = kernel("""
 ld.param.u64 %rd3, [out];
 mov.u32 %r1, %tid.x;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra WAIT;
 mov.u64 %rd1, map;
 cvta.param.u64 %rd2, %rd1;
 mov.u32 %r6, smem;
 mov.u32 %r7, bar;
 mbarrier.init.shared::cta.b64 [%r7], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r7], 512;
 mov.u32 %r8, 16;
 mov.u32 %r9, -2;
 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd2, {%r8, %r9}], [%r7];
WAIT:
 bar.sync 0;
 mov.u32 %r7, bar;
LOOP:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r7], 0;
 @!%p2 bra LOOP;
 mov.u32 %r6, smem;
 shl.b32 %r3, %r1, 4;
 add.u32 %r11, %r6, %r3;
 ld.shared.v4.u32 {%r12, %r13, %r14, %r15}, [%r11];
 cvt.u64.u32 %rd6, %r3;
 add.u64 %rd7, %rd3, %rd6;
 st.global.v4.u32 [%rd7], {%r12, %r13, %r14, %r15};""",
                           ".param .u64 tens, .param .align 64 .b8 map[128], .param .u64 out").replace(
    " .shared .align 1024 .b8 smem[4096];", " .shared .align 1024 .b8 smem[4096];\n .shared .align 8 .b64 bar;")


def test_raw_map_bytes_and_tensor_map_agree():
    """A map passed as 128 raw bytes (or a uint8 array) whose address is already the warpsim
    address of a pointer argument, and the same map as a TensorMap bound to the array."""
    from warpsim.ptx.memory import GLOBAL_BASE

    t = np.random.default_rng(3).integers(0, 2**16, (20, 40), dtype=np.uint16)  # 32 x 20 f16 used
    args = dict(dtype="f16", dims=(32, 20), strides=(80,), box=(32, 8), swizzle="64B", oob_fill="nan")
    raw = warpsim.tensor_map(**args, address=GLOBAL_BASE).raw
    out0 = launch(_PARAM_MAP_KERNEL, [t, raw, np.zeros(512, np.uint8)])[1]
    out1 = launch(_PARAM_MAP_KERNEL, [t, np.frombuffer(raw, np.uint8).copy(), np.zeros(512, np.uint8)])[1]
    tm = warpsim.tensor_map(**args, tensor=t)
    _, t2, out2 = launch(_PARAM_MAP_KERNEL, [np.zeros(4, np.uint32), tm, np.zeros(512, np.uint8)])
    np.testing.assert_array_equal(out0, out1)
    np.testing.assert_array_equal(out0, out2)
    np.testing.assert_array_equal(t2, t)
    # rows -2, -1 are NaN fill; row 0 starts at column 16
    got = out0.view(np.uint16)
    from warpsim.facts.swizzle import swizzle
    img = np.empty(512, np.uint8)
    img[np.arange(512)] = out0[swizzle(np.arange(512), "64B")]
    rows = img.view(np.uint16).reshape(8, 32)
    assert (rows[:2] == 0x7FF7).all()
    np.testing.assert_array_equal(rows[2:, :16], t[:6, 16:32])
    assert (rows[2:, 16:] == 0x7FF7).all()
    assert got.size == 256


def test_bulk_copy_between_cluster_ctas():
    """cp.async.bulk.shared::cluster.shared::cta: rank 0 pushes 64 bytes into rank 1's shared
    memory, signalling rank 1's mbarrier; rank 1 waits and writes them out."""
    src = kernel("""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 mov.u32 %r4, bar;
 shl.b32 %r5, %r1, 2;
 add.u32 %r6, %r3, %r5;
 mad.lo.u32 %r7, %r2, 100, %r1;
 st.shared.u32 [%r6], %r7;
 fence.proxy.async.shared::cta;
 setp.eq.u32 %p3, %r1, 0;
 @!%p3 bra INIT;
 mbarrier.init.shared::cta.b64 [%r4], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd9, [%r4], 64;
INIT:
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 setp.eq.u32 %p1, %r2, 0;
 and.pred %p4, %p1, %p3;
 @!%p4 bra SKIP;
 add.u32 %r8, %r3, 1024;
 mapa.shared::cluster.u32 %r9, %r8, 1;
 mapa.shared::cluster.u32 %r10, %r4, 1;
 cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r9], [%r3], 64, [%r10];
SKIP:
 @%p1 bra DONE;
LOOP:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;
 @!%p2 bra LOOP;
 setp.ge.u32 %p5, %r1, 16;
 @%p5 bra DONE;
 add.u32 %r11, %r6, 1024;
 ld.shared.u32 %r12, [%r11];
 mul.wide.u32 %rd2, %r1, 4;
 add.u64 %rd3, %rd1, %rd2;
 st.global.u32 [%rd3], %r12;
DONE:
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;""").replace(" .shared .align 1024 .b8 smem[4096];",
                                           " .shared .align 1024 .b8 smem[4096];\n .shared .align 8 .b64 bar;")
    out, = launch(src, [np.zeros(16, np.uint32)], grid=2, cluster=2)
    np.testing.assert_array_equal(out, np.arange(16))


# -- properties ----------------------------------------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def _legal_maps(draw):
    from warpsim.facts import tensormap as fmt

    dtype = draw(st.sampled_from(sorted(fmt.DATA_TYPES)))
    esz = fmt.DATA_TYPES[dtype][1]
    rank = draw(st.integers(1, 5))
    swz = draw(st.integers(0, 3))
    span = fmt.SWIZZLE_SPAN[swz] or 256 * esz
    box0 = 16 // esz * draw(st.integers(1, max(1, min(256 * esz, span) // 16)))
    box0 = min(box0, 256)
    dims = [draw(st.integers(1, 1 << 32)) for _ in range(rank)]
    strides = [16 * draw(st.integers(1, (1 << 36) - 1)) for _ in range(rank - 1)]
    box = [box0] + [draw(st.integers(1, 256)) for _ in range(rank - 1)]
    es = [draw(st.integers(1, 8)) for _ in range(rank)]
    fill = draw(st.integers(0, 1)) if dtype in fmt.FLOAT_TYPES else 0
    return fmt.TensorMapFields(dtype, rank, 16 * draw(st.integers(0, (1 << 40))), tuple(dims), tuple(strides),
                               tuple(box), tuple(es), 0, swz, draw(st.integers(0, 3)), fill)


@settings(max_examples=300, deadline=None)
@given(_legal_maps())
def test_tensor_map_encode_decode_roundtrip(f):
    from warpsim.facts import tensormap as fmt

    raw = fmt.encode(f)
    assert len(raw) == 128 and fmt.decode(raw) == f
    # tensormap.replace writes the same fields into zeros (the derived words aside)
    from warpsim.ptx.ops.tma import replace_field

    b = bytearray(128)
    replace_field(b, "global_address", None, f.address)
    replace_field(b, "rank", None, f.rank - 1)
    ptx_type = {v: k for k, v in fmt.PTX_ELEMTYPE.items()}[f.dtype]
    replace_field(b, "elemtype", None, ptx_type)
    replace_field(b, "swizzle_mode", None, f.swizzle)
    replace_field(b, "fill_mode", None, f.fill)
    for i in range(f.rank):
        replace_field(b, "global_dim", i, f.dims[i])
        replace_field(b, "box_dim", i, f.box[i])
        replace_field(b, "element_stride", i, f.element_strides[i])
    for i, s in enumerate(f.strides):
        replace_field(b, "global_stride", i, s)
    mine = bytearray(raw)
    mine[10] &= ~0x06  # L2 promotion (flag bits 18:17) is not a replace field
    assert bytes(b)[:64] == bytes(mine)[:64] and all(b[i] == 0 for i in range(64, 128))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 1), st.integers(0, (1 << 20) - 1), st.integers(-(1 << 20) + 1, (1 << 20) - 1),
       st.integers(1, (1 << 20) - 1))
def test_mbarrier_word_roundtrip(phase, pending, tx, expected):
    from warpsim.ptx.mbarrier_state import decode_word, encode_word

    w = encode_word([phase], [pending], [tx], [expected])
    assert [int(x[0]) for x in decode_word(w)] == [phase, pending, tx, expected]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["arrive", "expect", "complete"]), st.integers(1, 64)), max_size=40),
       st.integers(1, 8))
def test_mbarrier_phase_machine_matches_a_plain_model(ops, count):
    """The word-encoded machine against a restatement on Python ints."""
    from warpsim.ptx.mbarrier_state import MBarrierError, MBarriers, decode_word
    from warpsim.ptx.memory import FlatMemory

    m = MBarriers(FlatMemory("shared", 16, (1,)))
    b, o = np.array([0]), np.array([0])
    m.init(b, o, count)
    phase, pending, tx = 0, count, 0
    for op, n in ops:
        if op == "arrive":
            if tx and n > pending:  # more arrivals than the phase expects: an error
                with pytest.raises(MBarrierError):
                    m.update(b, o, arrive=n)
                continue
            n = n % (pending + 1) or pending
            m.update(b, o, arrive=n)
            pending -= n
        elif op == "expect":
            m.update(b, o, expect=n)
            tx -= n
        else:
            m.update(b, o, complete=n)
            tx += n
        if pending == 0 and tx == 0:
            phase, pending = phase + 1, count
        ph, pe, t, ex = (int(x[0]) for x in decode_word(m.read(b, o)))
        assert (ph, pe, t, ex) == (phase & 1, pending, tx, count)


def test_inline_wait_loops_with_the_same_label():
    """CuTe's ClusterBarrier::wait inlines `{ .reg .pred P1; LAB_WAIT: ... bra LAB_WAIT; DONE: }`
    once per call: each block's labels are its own (forward branches included)."""
    wait = """
 {
 .reg .pred P1;
 LAB_WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 P1, [%r3], %r9, %r8;
 @P1 bra DONE;
 bra LAB_WAIT;
 DONE:
 }"""
    src = kernel(f"""
 ld.param.u64 %rd1, [out];
 mov.u32 %r3, smem;
 mov.u32 %r8, 1000000;
 mbarrier.init.shared::cta.b64 [%r3], 32;
 mbarrier.arrive.shared::cta.b64 %rd2, [%r3];
 mov.u32 %r9, 0;{wait}
 mbarrier.arrive.shared::cta.b64 %rd2, [%r3];
 mov.u32 %r9, 1;{wait}
 mov.u32 %r1, %tid.x;
 mul.wide.u32 %rd3, %r1, 4;
 add.u64 %rd4, %rd1, %rd3;
 st.global.u32 [%rd4], %r9;""")
    out, = launch(src, [np.zeros(32, np.uint32)])
    assert (out == 1).all()


# -- TMA bytes read before their mbarrier phase was seen ------------------------------------
_WAIT = """LOOP{n}:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [{bar}], 0;
 @!%p2 bra LOOP{n};"""
_TMA_MODES = {
    "wait": _WAIT.format(n=1, bar="%r7"),  # every warp waits for the copy's phase
    "no-wait": "@!%p3 bra READ;\n" + _WAIT.format(n=1, bar="%r7"),  # warp 1 reads without waiting
    "bar-sync": "@!%p3 bra SYNC;\n" + _WAIT.format(n=1, bar="%r7") + "\nSYNC:\n bar.sync 0;",  # warp 0 waits, then a CTA barrier
    "mbarrier-relay": "@!%p3 bra RELAY;\n" + _WAIT.format(n=1, bar="%r7")  # warp 0 waits, arrives on bar2;
    + "\n mbarrier.arrive.shared::cta.b64 %rd9, [%r17];\n bra.uni READ;\nRELAY:\n"  # warp 1 waits bar2
    + _WAIT.format(n=2, bar="%r17"),
}


def _tma_read(mode: str) -> str:
    return kernel(f"""
 ld.param.u64 %rd3, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r7, bar;
 mov.u32 %r17, bar2;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra INITED;
 mbarrier.init.shared::cta.b64 [%r7], 1;
 mbarrier.init.shared::cta.b64 [%r17], 32;
INITED:
 bar.sync 0;
 @%p1 bra ISSUED;
 mov.u64 %rd1, map;
 cvta.param.u64 %rd2, %rd1;
 mov.u32 %r6, smem;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r7], 512;
 mov.u32 %r8, 0;
 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd2, {{%r8, %r8}}], [%r7];
ISSUED:
 shr.u32 %r20, %r1, 5;
 setp.eq.u32 %p3, %r20, 0;
 {_TMA_MODES[mode]}
READ:
 mov.u32 %r6, smem;
 and.b32 %r2, %r1, 31;
 shl.b32 %r3, %r2, 4;
 add.u32 %r11, %r6, %r3;
 ld.shared.v4.u32 {{%r12, %r13, %r14, %r15}}, [%r11];
 shl.b32 %r4, %r1, 4;
 cvt.u64.u32 %rd6, %r4;
 add.u64 %rd7, %rd3, %rd6;
 st.global.v4.u32 [%rd7], {{%r12, %r13, %r14, %r15}};""",
                  ".param .align 64 .b8 map[128], .param .u64 out").replace(
        " .shared .align 1024 .b8 smem[4096];",
        " .shared .align 1024 .b8 smem[4096];\n .shared .align 8 .b64 bar;\n .shared .align 8 .b64 bar2;")


@pytest.mark.parametrize("mode", list(_TMA_MODES))
def test_reading_tma_bytes_needs_their_mbarrier_phase(mode):
    """A warp that reads shared memory a TMA copy wrote must have seen the copy's mbarrier
    phase complete: by its own wait, or passed on through a bar.sync or an mbarrier arrive/wait
    from a warp that waited.  Warp 1 reading without any of these is an async-copy finding at
    the load, naming the copy (under the sanitizer a copy lands when a wait observes its phase;
    the bytes stay per warp until a CTA barrier or an arrive -> wait passes them on)."""
    t = np.random.default_rng(7).integers(0, 2**16, (20, 32), dtype=np.uint16)
    tm = warpsim.tensor_map("f16", (32, 20), None, (32, 8), tensor=t)
    args = [tm, np.zeros(1024, np.uint8)]
    if mode == "no-wait":
        with pytest.raises(warpsim.SanitizerError) as e:
            launch(_tma_read(mode), args, block=64, check=True)
        f = e.value.findings
        assert [(x.kind, x.warp) for x in f] == [("async-copy", 1)]
        assert f[0].instruction.startswith("ld.shared.v4.u32") and "cp.async.bulk.tensor" in f[0].message
        out = e.value.outputs[1] if e.value.outputs else None
    else:
        out = launch(_tma_read(mode), args, block=64, check=True)[1]
    if out is not None:  # both warps read the 512 bytes of the box
        np.testing.assert_array_equal(out.view(np.uint16).reshape(2, 256), np.stack([t[:8].reshape(-1)] * 2))


# -- setmaxnreg: warpgroup-uniform --------------------------------------------------------
def _setmaxnreg(plant: str) -> str:
    first = {"fixed": " setmaxnreg.dec.sync.aligned.u32 40;",
             "half": " @%p1 setmaxnreg.dec.sync.aligned.u32 40;",
             "other": " @%p1 bra A;\n setmaxnreg.dec.sync.aligned.u32 48;\n bra.uni B;\nA:\n"
                      " setmaxnreg.dec.sync.aligned.u32 40;\nB:"}[plant]
    return kernel(f"""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 shr.u32 %r2, %r1, 5;
 setp.lt.u32 %p1, %r2, 2;
 setp.ge.u32 %p2, %r2, 4;
 @%p2 bra CONSUMER;
{first}
 bra.uni DONE;
CONSUMER:
 setmaxnreg.inc.sync.aligned.u32 232;
DONE:
 mul.wide.u32 %rd2, %r1, 4;
 add.u64 %rd3, %rd1, %rd2;
 st.global.u32 [%rd3], %r2;""")


@pytest.mark.parametrize("plant", ["half", "other"])
def test_setmaxnreg_must_be_warpgroup_uniform(plant):
    """setmaxnreg.sync.aligned run by 2 of a warpgroup's 4 warps (or by them at another
    instruction than the other 2) is a divergent-sync finding naming the line; its twin
    (all 4 warps at the same setmaxnreg) passes."""
    src = _setmaxnreg(plant)
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(src, [np.zeros(256, np.uint32)], block=256, check=True)
    f = e.value.findings[0]
    assert f.kind == "divergent-sync" and "warpgroup 0" in f.message
    assert f.instruction.endswith("setmaxnreg.dec.sync.aligned.u32 40")
    assert f.line == src.splitlines().index(next(x for x in src.splitlines() if x.endswith("u32 40;"))) + 1
    if plant == "half":
        assert "warps [0, 1] of warpgroup 0 ran it" in f.message and "warps [2, 3] did not run it" in f.message
    else:
        assert "setmaxnreg.dec.sync.aligned.u32 48 instead" in f.message
    with pytest.raises(warpsim.SanitizerError) as e:  # an error without the sanitizer too
        launch(src, [np.zeros(256, np.uint32)], block=256)
    err = e.value.error
    assert (err.warpgroup, err.ran) == (0, (0, 1)) and set(err.instead) == {2, 3}
    assert all((v is None) == (plant == "half") for v in err.instead.values())
    out, = launch(_setmaxnreg("fixed"), [np.zeros(256, np.uint32)], block=256, check=True)
    np.testing.assert_array_equal(out, np.arange(256) // 32)


def _tma_reload(wait_second: bool) -> str:
    """Two copies of the same box into the same bytes, phases 0 and 1 of one mbarrier; the
    reads after the second copy wait for phase 1 (or, planted, only phase 0 was waited)."""
    second = _WAIT.format(n=2, bar="%r7").replace("], 0;", "], 1;") if wait_second else ""
    return kernel(f"""
 ld.param.u64 %rd3, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r7, bar;
 mov.u32 %r6, smem;
 mov.u64 %rd1, map;
 cvta.param.u64 %rd2, %rd1;
 mov.u32 %r8, 0;
 mov.u32 %r9, 8;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra INITED;
 mbarrier.init.shared::cta.b64 [%r7], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r7], 512;
 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd2, {{%r8, %r8}}], [%r7];
INITED:
 {_WAIT.format(n=1, bar="%r7")}
 bar.sync 0;
 @%p1 bra ISSUED;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r7], 512;
 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd2, {{%r8, %r9}}], [%r7];
ISSUED:
 {second}
 and.b32 %r2, %r1, 31;
 shl.b32 %r3, %r2, 4;
 add.u32 %r11, %r6, %r3;
 ld.shared.v4.u32 {{%r12, %r13, %r14, %r15}}, [%r11];
 shl.b32 %r4, %r1, 4;
 cvt.u64.u32 %rd6, %r4;
 add.u64 %rd7, %rd3, %rd6;
 st.global.v4.u32 [%rd7], {{%r12, %r13, %r14, %r15}};""",
                  ".param .align 64 .b8 map[128], .param .u64 out").replace(
        " .shared .align 1024 .b8 smem[4096];", " .shared .align 1024 .b8 smem[4096];\n .shared .align 8 .b64 bar;")


def test_reading_a_reloaded_buffer_needs_the_new_phase():
    """Having waited for phase 0 does not cover the next copy into the same bytes (phase 1)."""
    t = np.random.default_rng(8).integers(0, 2**16, (20, 32), dtype=np.uint16)
    args = [warpsim.tensor_map("f16", (32, 20), None, (32, 8), tensor=t), np.zeros(1024, np.uint8)]
    with pytest.raises(warpsim.SanitizerError) as e:
        launch(_tma_reload(False), args, block=64, check=True)
    f = e.value.findings
    assert {x.kind for x in f} == {"async-copy"} and {x.warp for x in f} == {0, 1}
    assert "parity 1" in f[0].message  # the second copy's phase (parity 1) was not waited for
    out = launch(_tma_reload(True), args, block=64, check=True)[1]
    np.testing.assert_array_equal(out.view(np.uint16).reshape(2, 256), np.stack([t[8:16].reshape(-1)] * 2))
