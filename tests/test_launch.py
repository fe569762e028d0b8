"""warpsim.Module / warpsim.launch: module parsing, argument marshalling, CTAs of several
warps, shared memory and barriers, calls, atomics, the tracer (issue 12)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.errors import PtxError, WarpsimError
from warpsim.ptx.link import flatten
from warpsim.ptx.module import parse_module

HERE = Path(__file__).parent / "kernels"
FEATURES = (HERE / "handwritten" / "features.ptx").read_text()
ATOMICS = (HERE / "handwritten" / "atomics.ptx").read_text()
CFG = np.dtype({"names": ["a", "k"], "formats": [np.float64, np.int32], "offsets": [0, 8], "itemsize": 16})


def _cfg(k):
    c = np.zeros((), CFG)
    c["k"] = k
    return c[()]


def test_module_header_variables_and_kernels():
    m = parse_module(FEATURES)
    assert m.version == (8, 0) and m.target == ("sm_90",) and m.address_size == 64
    assert m.variables["tbl"].space == "const"
    assert np.frombuffer(m.variables["tbl"].init, np.float32).tolist() == [1.0, 2.5, np.float32(np.pi), -1.0]
    assert np.frombuffer(m.variables["gbase"].init, np.uint64).tolist() == [1000]
    assert m.variables["dyn"].extern and m.variables["dyn"].count == 0
    assert m.functions["divmod"].kind == "func" and m.functions["divmod"].returns[0].nbytes == 8
    k = warpsim.Module(FEATURES).kernels
    assert list(k) == ["features"]
    p = k["features"].params
    assert [(x.type, x.count, x.align, x.offset) for x in p] == [("u64", 1, 8, 0), ("b8", 16, 8, 8)]
    assert repr(k["features"]) == "features(.u64, .align 8 .b8[16])"


@pytest.mark.parametrize("k", [40, 3])
def test_features_kernel(k):
    """Nested calls with .param byte arrays, shadowing scopes, .const/.global initialisers,
    module .shared and .extern .shared, bar.sync between two warps."""
    out = np.zeros((64, 6), np.uint32)
    (o,) = warpsim.launch(FEATURES, "features", 1, 64, [out, _cfg(k)], shared_bytes=256)
    t = np.arange(64)
    tbl = np.array([1.0, 2.5, np.pi, -1.0], np.float32).view(np.uint32)
    assert (o[:, 0] == ((t + k) % 7) * 2).all()
    assert (o[:, 1] == t).all()
    assert (o[:, 2] == tbl[t & 3]).all()
    assert (o[:, 3] == 1000).all()
    assert (o[:, 4] == (t ^ 1)).all()          # another warp's shared store, after bar.sync
    assert (o[:, 5] == tbl[(t ^ 1) & 3]).all()  # dynamic shared memory
    assert (out == 0).all()                     # inputs are never modified


def test_dynamic_shared_memory_is_bounded():
    out = np.zeros((64, 6), np.uint32)
    with pytest.raises(warpsim.SanitizerError, match="outside"):
        warpsim.launch(FEATURES, "features", 1, 64, [out, _cfg(1)], shared_bytes=128)


def test_flatten_renames_shadowing_scopes():
    text = """
    .reg .b32 %r<3>;
    { .reg .f16 low, high; mov.b32 {low, high}, %r1; mov.b32 %r2, {high, low}; }
    { .reg .b32 low; add.u32 low, %r2, 1; mov.u32 %r1, low; }
    """
    flat = flatten(text)
    assert "low$s" in flat and "{low," not in flat
    lows = sorted(set(__import__("re").findall(r"low\$s\d+", flat)))
    assert len(lows) == 2  # one name per scope
    assert flat.count("\n") >= text.count("\n") - 1  # lines kept


def test_arguments_and_errors():
    m = warpsim.Module(FEATURES)
    out = np.zeros((64, 6), np.uint32)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        m.launch("features", 1, 64, [out])
    with pytest.raises(TypeError, match="byte-array parameter"):
        m.launch("features", 1, 64, [out, 5])
    with pytest.raises(PtxError, match="8 bytes given"):
        m.launch("features", 1, 64, [out, b"\0" * 8])
    with pytest.raises(TypeError, match="64-bit parameter"):
        m.launch("features", 1, 64, [out, np.zeros(16, np.uint8)])
    with pytest.raises(PtxError, match="no kernel named 'nope'"):
        m.launch("nope", 1, 64, [out, _cfg(1)])
    with pytest.raises(TypeError, match="grid"):
        m.launch("features", 1.5, 64, [out, _cfg(1)])
    with pytest.raises(WarpsimError, match="at most 1024"):
        m.launch("features", 1, (32, 33), [out, _cfg(1)])
    with pytest.raises(TypeError, match="list or tuple"):
        m.launch("features", 1, 64, out)


SPECIALS = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry ids(.param .u64 out, .param .u32 scale, .param .f32 add)
{
  .reg .b32 %r<20>; .reg .b64 %rd<4>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r15, [scale]; ld.param.f32 %f1, [add];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z;
  mov.u32 %r4, %ctaid.x; mov.u32 %r5, %ctaid.y; mov.u32 %r6, %ctaid.z;
  mov.u32 %r7, %ntid.x; mov.u32 %r8, %ntid.y; mov.u32 %r9, %nctaid.x; mov.u32 %r10, %nctaid.y;
  mad.lo.u32 %r11, %r3, %r8, %r2; mad.lo.u32 %r11, %r11, %r7, %r1;      // linear tid
  mad.lo.u32 %r12, %r6, %r10, %r5; mad.lo.u32 %r12, %r12, %r9, %r4;    // linear ctaid
  mov.u32 %r13, %ntid.z; mul.lo.u32 %r13, %r13, %r8; mul.lo.u32 %r13, %r13, %r7;
  mad.lo.u32 %r14, %r12, %r13, %r11;                                   // global id
  mul.wide.u32 %rd2, %r14, 16; add.u64 %rd2, %rd1, %rd2;
  mul.lo.u32 %r16, %r14, %r15;
  cvt.rn.f32.u32 %f2, %r14; add.f32 %f2, %f2, %f1;
  mov.u32 %r17, %laneid; mov.u32 %r18, %warpid;
  st.global.v4.u32 [%rd2], {%r16, %r17, %r18, %r12};
  ret;
}
"""


@pytest.mark.parametrize("grid,block,batch", [((3, 2), (8, 4, 2), None), (5, 96, 2), ((2, 1, 2), 40, 1)])
def test_grid_block_shapes_and_batches(grid, block, batch):
    g = (grid,) if isinstance(grid, int) else grid
    b = (block,) if isinstance(block, int) else block
    nthreads, nctas = int(np.prod(b)), int(np.prod(g))
    out = np.zeros((nctas * nthreads, 4), np.uint32)
    (o,) = warpsim.Module(SPECIALS).launch("ids", grid, block, [out, np.uint32(3), 0.5], cta_batch=batch)
    gid = np.arange(nctas * nthreads)
    assert (o[:, 0] == gid * 3).all()
    assert (o[:, 1] == (gid % nthreads) % 32).all()
    assert (o[:, 2] == (gid % nthreads) // 32).all()
    assert (o[:, 3] == gid // nthreads).all()


def test_scalar_parameters_are_range_checked():
    out = np.zeros((32, 4), np.uint32)
    m = warpsim.Module(SPECIALS)
    with pytest.raises(PtxError, match="does not fit .u32"):
        m.launch("ids", 1, 32, [out, -(1 << 31) - 1, 0.5])
    with pytest.raises(PtxError, match="does not fit .u32"):
        m.launch("ids", 1, 32, [out, 1 << 32, 0.5])
    with pytest.raises(TypeError, match="floating-point value"):
        m.launch("ids", 1, 32, [out, 2.0, 0.5])


def test_unsupported_instruction_names_it_and_its_line():
    text = SPECIALS.replace("mov.u32 %r17, %laneid;", "nanosleep.u32 100; mov.u32 %r17, %laneid;")
    line = text.split("\n").index(next(ln for ln in text.split("\n") if "nanosleep" in ln)) + 1
    with pytest.raises(PtxError, match=rf"line {line}: .*nanosleep"):
        warpsim.launch(text, "ids", 1, 32, [np.zeros((32, 4), np.uint32), 1, 0.5])


def _atomics_reference(order):
    """Sequential semantics of atomics.ptx in the given order of global thread ids."""
    M = 0xFFFFFFFF
    acc = [0, 0, 0, 0, 0, 0x7FFFFFFF, M, 0, 0]
    olds = np.zeros((128, 8), np.int64)
    for g in order:
        o = olds[g]
        o[0] = acc[0]; acc[0] = (acc[0] + g) & M
        o[1] = acc[1]; acc[1] = g
        o[2] = acc[2]; acc[2] = g + 1 if acc[2] == g else acc[2]
        o[3] = acc[3]; acc[3] = 0 if acc[3] >= 5 else acc[3] + 1
        o[4] = acc[4]; acc[4] = 3 if acc[4] == 0 or acc[4] > 3 else acc[4] - 1
        s = lambda v: v - (1 << 32) if v >= 1 << 31 else v  # noqa: E731
        o[5] = acc[5]; acc[5] = min(s(acc[5]), g - 50) & M
        o[6] = acc[6]; acc[6] &= ~g & M
        acc[7] |= g
        acc[8] ^= g
    return acc, olds


@pytest.mark.parametrize("batch", [None, 1])
def test_atomics_every_operation_in_documented_order(batch):
    acc = np.array([0, 0, 0, 0, 0, 0x7FFFFFFF, 0xFFFFFFFF, 0, 0], np.uint32)
    args = [acc, np.zeros(2, np.uint64), np.zeros(2, np.float32), np.zeros(1, np.float64),
            np.zeros(128 * 8, np.uint32), np.zeros(2, np.uint32)]
    a, a64, af, ad, out, sh = warpsim.launch(ATOMICS, "atomics", 2, 64, args, cta_batch=batch)
    # warps run one after the other; the CTAs of a batch run each instruction together
    order = list(range(128)) if batch == 1 else [*range(32), *range(64, 96), *range(32, 64), *range(96, 128)]
    ref, olds = _atomics_reference(order)
    assert a.tolist() == ref
    got = out.reshape(128, 8)
    assert (got[:, :7] == (olds[:, :7] & 0xFFFFFFFF)).all()
    assert a64.tolist() == [127, sum(range(128))]
    assert af.view(np.uint32).tolist() == [0, np.float32(64.0).view(np.uint32)]  # subnormal addends flushed
    s = 0.0
    for g in order:
        s += float(g) * 0.1
    assert ad[0] == s
    # shared atomics per CTA: atom returns 0..63 in lane order within each CTA
    assert sorted(got[:64, 7].tolist()) == list(range(64)) and (got[:32, 7] == np.arange(32)).all()
    assert sh.tolist() == [100 + sum(range(64))] * 2


def test_cta_batches_that_diverge_at_a_barrier_run_one_by_one():
    text = """
    .version 8.0
    .target sm_90
    .address_size 64
    .visible .entry k(.param .u64 out)
    {
      .reg .b32 %r<6>; .reg .b64 %rd<4>; .reg .pred %p<2>; .shared .align 4 .b32 s[64];
      ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x;
      shl.b32 %r3, %r1, 2; mov.u32 %r4, s; add.u32 %r4, %r4, %r3;
      st.shared.u32 [%r4], %r1;
      setp.eq.u32 %p1, %r2, 1;
      @%p1 bra SKIP;
      bar.sync 0;
      xor.b32 %r3, %r3, 128; mov.u32 %r4, s; add.u32 %r4, %r4, %r3; ld.shared.u32 %r5, [%r4];
      bra.uni STORE;
    SKIP:
      mov.u32 %r5, 7;
    STORE:
      mad.lo.u32 %r3, %r2, 64, %r1; mul.wide.u32 %rd2, %r3, 4; add.u64 %rd2, %rd1, %rd2;
      st.global.u32 [%rd2], %r5;
      ret;
    }
    """
    (o,) = warpsim.launch(text, "k", 3, 64, [np.zeros(192, np.uint32)])
    t = np.arange(64)
    assert (o[:64] == (t ^ 32)).all() and (o[64:128] == 7).all() and (o[128:] == (t ^ 32)).all()


def test_trace_records_register_values():
    out = np.zeros((64, 4), np.uint32)
    tr = warpsim.Trace(threads=[((1, 0), (5, 1, 0))], regs=["%r14", "%r16"])
    warpsim.launch(SPECIALS, "ids", (2, 1), (8, 4), [out, np.uint32(3), 0.5], trace=tr)
    gid = 1 * 32 + 1 * 8 + 5
    assert tr.records, "nothing traced"
    last = tr.records[-1]
    assert last.cta == (1, 0, 0) and last.tid == (5, 1, 0)
    assert last.values == {"%r14": gid, "%r16": gid * 3}
    lines = [r.line for r in tr.records]
    assert lines == sorted(lines)  # straight-line code: one record per instruction, in order
    # default: the registers each instruction writes, for thread (0, 0)
    tr2 = warpsim.Trace(lines=(9, 9))
    warpsim.launch(SPECIALS, "ids", 1, 32, [np.zeros((32, 4), np.uint32), np.uint32(3), 0.5], trace=tr2)
    assert [r.values for r in tr2.records] == [{"%r1": 0}, {"%r2": 0}, {"%r3": 0}]


def test_extern_shared_arrays_alias_and_large_grids_run_in_batches():
    text = """
    .version 8.0
    .target sm_80
    .address_size 64
    .extern .shared .align 16 .b8 dynA[];
    .extern .shared .align 4 .b32 dynB[];
    .visible .entry k(.param .u64 out)
    {
      .reg .b32 %r<8>; .reg .b64 %rd<4>; .shared .align 4 .b32 st[3];
      ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x;
      add.u32 %r3, %r1, %r2;
      shl.b32 %r4, %r1, 2; mov.u32 %r5, dynA; add.u32 %r5, %r5, %r4; st.shared.u32 [%r5], %r3;
      bar.sync 0;
      xor.b32 %r4, %r4, 4; mov.u32 %r5, dynB; add.u32 %r5, %r5, %r4; ld.shared.u32 %r6, [%r5];
      mov.u32 %r7, dynA;
      mad.lo.u32 %r3, %r2, 32, %r1; mul.wide.u32 %rd2, %r3, 8; add.u64 %rd2, %rd1, %rd2;
      st.global.v2.u32 [%rd2], {%r6, %r7};
      ret;
    }
    """
    ncta = 150  # three CTA batches of up to 64
    (o,) = warpsim.launch(text, "k", ncta, 32, [np.zeros((ncta * 32, 2), np.uint32)], shared_bytes=128)
    t, c = np.arange(32), np.repeat(np.arange(ncta), 32)
    assert (o[:, 0] == np.tile(t ^ 1, ncta) + c).all()  # dynB aliases dynA
    assert (o[:, 1] == 16).all()  # after the 12 static bytes, 16-byte aligned
    with pytest.raises(PtxError, match="built for .target sm_100a"):
        warpsim.launch(text.replace("sm_80", "sm_100a"), "k", 1, 32, [np.zeros((32, 2), np.uint32)])


ATOM16 = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 h, .param .u64 w, .param .u64 v)
{
  .reg .b16 %rs<4>; .reg .b32 %r<6>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [h]; ld.param.u64 %rd2, [w]; ld.param.u64 %rd3, [v];
  mov.u32 %r1, %tid.x; mul.wide.u32 %rd4, %r1, 2; add.u64 %rd4, %rd3, %rd4;
  ld.global.b16 %rs1, [%rd4];
  atom.global.add.noftz.f16 %rs2, [%rd1], %rs1;
  red.global.add.noftz.bf16 [%rd1+2], %rs1;
  mov.b32 %r2, {%rs1, %rs1};
  red.global.add.noftz.f16x2 [%rd1+4], %r2;
  atom.global.cas.b16 %rs3, [%rd1+8], 0, %rs1;
  cvt.u64.u32 %rd5, %r1;
  sub.s64 %rd6, 0, %rd5;
  atom.global.min.s64 %rd7, [%rd2], %rd6;
  atom.global.exch.b64 %rd7, [%rd2+8], %rd5;
  atom.global.xor.b64 %rd7, [%rd2+16], %rd5;
  ret;
}
"""


def test_atomics_16_and_64_bit_forms():
    import ml_dtypes

    v = (np.random.default_rng(5).standard_normal(32) * 4).astype(np.float16)
    h, w = warpsim.launch(ATOM16, "k", 1, 32, [np.zeros(5, np.uint16), np.zeros(3, np.int64), v])[:2]
    f16 = np.float16(0)
    f16x2 = np.float16(0)
    bf = ml_dtypes.bfloat16(0)
    vb = v.view(np.uint16).view(ml_dtypes.bfloat16)
    for x, xb in zip(v, vb):  # lane order; each sum rounded once to nearest even
        f16 = np.float16(np.float64(f16) + np.float64(x))
        f16x2 = np.float16(np.float64(f16x2) + np.float64(x))
        bf = ml_dtypes.bfloat16(np.float32(np.float64(bf) + np.float64(xb)))
    assert h[0] == f16.view(np.uint16) and h[2] == h[3] == f16x2.view(np.uint16)
    assert h[1] == bf.view(np.uint16)
    assert h[4] == v.view(np.uint16)[0]  # only lane 0 found the 0 it compared against
    assert w.tolist() == [-31, 31, np.bitwise_xor.reduce(np.arange(32))]


def test_atomic_forms_that_ptx_rejects():
    bad = ATOM16.replace("atom.global.add.noftz.f16 %rs2", "atom.global.add.f16 %rs2")
    with pytest.raises(PtxError, match="requires .noftz"):
        warpsim.launch(bad, "k", 1, 32, [np.zeros(5, np.uint16), np.zeros(3, np.int64), np.zeros(32, np.float16)])


def _big_shared(target: str, nbytes: int, extern: bool = False) -> str:
    ext = ".extern .shared .align 16 .b8 dyn[];\n" if extern else ""
    return (f".version 8.0\n.target {target}\n.address_size 64\n{ext}.visible .entry big()\n{{\n"
            f".reg .b32 %r<4>;\n.shared .align 4 .b8 buf[{nbytes}];\nmov.u32 %r1, buf;\n"
            "st.shared.u32 [%r1+4], %r1;\nret;\n}\n")


@pytest.mark.parametrize("target,static,ok", [("sm_90", 0xC000, True), ("sm_90", 0xC001, False),
                                              ("sm_90a", 0x38C00, True), ("sm_90a", 0x38C01, False)])
def test_static_shared_over_the_ptxas_limit_is_refused(target, static, ok):
    """ptxas 13.0: 'Entry function uses too much shared data (0xc001 bytes, 0xc000 max)' for
    sm_90, 0x38c00 max for sm_90a; such a module never loads on the GPU."""
    text = _big_shared(target, static)
    if ok:
        warpsim.launch(text, "big", 1, 32, [], check=False)
        return
    with pytest.raises(PtxError, match=rf"kernel big declares {static} bytes of static \.shared "
                                       rf"memory; ptxas accepts at most {static - 1} for \.target {target}"):
        warpsim.launch(text, "big", 1, 32, [], check=False)


@pytest.mark.parametrize("extern", [False, True])
def test_static_plus_dynamic_shared_over_a_cta_is_refused(extern):
    """40,000 static + 200,000 dynamic bytes: more than the 227 KiB a CTA of sm_90 can have."""
    text = _big_shared("sm_90", 40000, extern)
    warpsim.launch(text, "big", 1, 32, [], shared_bytes=0x38C00 - 40000, check=False)
    with pytest.raises(WarpsimError, match=r"kernel big: 40000 bytes of static \.shared plus 200000 bytes of "
                                           r"dynamic shared memory \(shared_bytes\) make 240000; a CTA on "
                                           r"sm_90 has at most 232448"):
        warpsim.launch(text, "big", 1, 32, [], shared_bytes=200000, check=False)
