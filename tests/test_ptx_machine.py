"""The PTX machine: parser, registers, memory, SIMT control and the warp-level families.

References are restated from the PTX ISA, independently of the code under test.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warpsim
from warpsim import PtxError, Warp
from warpsim.ptx.memory import GlobalMemory, MemoryError_
from warpsim.ptx.parser import Addr, Imm, Pipe, Reg, Sink, Vec, parse_body, parse_immediate

LANE = np.arange(32)
RNG = np.random.default_rng(1234)


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------
def test_immediates_every_form():
    assert parse_immediate("0x1F").value == 31
    assert parse_immediate("0X1fU").value == 31
    assert parse_immediate("017").value == 15
    assert parse_immediate("0b101").value == 5
    assert parse_immediate("-12").value == -12
    assert parse_immediate("0").value == 0
    f = parse_immediate("0f3F800000")
    assert (f.kind, f.value) == ("f32", 0x3F800000)
    d = parse_immediate("0d3FF0000000000000")
    assert (d.kind, d.value) == ("f64", 0x3FF0000000000000)
    assert parse_immediate("1.5e3").value == 1500.0
    assert parse_immediate("%r1") is None
    with pytest.raises(PtxError, match="64 bits"):
        parse_immediate("0x1" + "0" * 16)


def test_body_declarations_labels_scopes_comments():
    b = parse_body("""
        .reg .b32 %r<10>; .reg .pred p, q;
        .shared .align 16 .b8 smem[1024];
        .pragma "nounroll";
        .loc 1 2 3
        ;
        /* block
           comment */ {
          .reg .b16 h;
        L0: @!p bra.uni L1;   // line comment
          ld.shared.v4.u32 {%r1, _, %r3, %r4}, [smem+-16];
        }
        $L__BB0_1:
        setp.lt.f32 p|q, 0f3F800000, 1.5;
    """)
    assert b.reg_type("%r9") == "b32" and b.reg_type("%r10") is None and b.regs["h"] == "b16"
    assert b.vars["smem"].count == 1024 and b.vars["smem"].align == 16
    assert b.labels == {"L0": 0, "$L__BB0_1": 2}
    s0, s1, s2 = b.statements
    assert s0.guard == ("p", True) and s0.opcode == "bra.uni" and s0.operands == (Reg("L1"),)
    assert s1.operands[0] == Vec((Reg("%r1"), Sink(), Reg("%r3"), Reg("%r4")))
    assert s1.operands[1] == Addr("smem", -16, "[smem+-16]")
    assert isinstance(s2.operands[0], Pipe) and s2.operands[1] == Imm(0x3F800000, "f32", "0f3F800000")
    assert s1.line == 11


def test_parse_errors_are_clear():
    with pytest.raises(PtxError, match="directive .global"):
        parse_body(".global .b32 x;")
    with pytest.raises(PtxError, match="twice"):
        parse_body("L: ret; L: ret;")
    with pytest.raises(PtxError, match="unsupported instruction 'frobnicate'"):
        Warp().run("frobnicate.b32 %r1, [%r2];")
    with pytest.raises(PtxError, match="unknown label NOWHERE"):
        Warp().run("bra NOWHERE;")


# --------------------------------------------------------------------------------------------
# mov, special registers, execute
# --------------------------------------------------------------------------------------------
def test_mov_pack_unpack_and_specials():
    w = Warp(batch=2)
    w["%h0"] = 0x1234
    w["%h1"] = 0xABCD
    w.execute("mov.b32 %r1, {%h0, %h1}")
    assert (w["%r1"] == 0xABCD1234).all()
    w.execute("mov.b64 %rd1, {%r1, %r1}; mov.b32 {%h2, %h3}, %r1; mov.b64 {%r2, _}, %rd1")
    assert (w["%rd1"] == 0xABCD1234ABCD1234).all()
    assert (w["%h2"] == 0x1234).all() and (w["%h3"] == 0xABCD).all() and (w["%r2"] == 0xABCD1234).all()
    w.execute("mov.u32 %r3, %laneid; mov.u32 %r4, %lanemask_lt; mov.u32 %r5, %lanemask_ge")
    assert (w["%r3"] == LANE).all()
    assert (w["%r4"] == (1 << LANE) - 1).all()
    assert (w["%r5"] == (0xFFFFFFFF << LANE) & 0xFFFFFFFF).all()
    w.execute("mov.b32 %r6, 0f3F800000; mov.f32 %f1, 1.5; mov.b16 %h4, -1")
    assert (w["%r6"] == 0x3F800000).all() and (w["%f1"] == 0x3FC00000).all() and (w["%h4"] == 0xFFFF).all()
    with pytest.raises(PtxError, match="64-bit register"):
        w.execute("mov.b32 %rd2, %r1")
    with pytest.raises(PtxError, match="does not fit"):
        w.execute("mov.b16 %h5, 0x12345")
    with pytest.raises(warpsim.RegisterError, match="%r77 has not been written"):
        w.execute("mov.b32 %r8, %r77")


def test_execute_guard_masks_lanes():
    w = Warp()
    w["%p1"] = LANE % 3 == 0
    w["%r1"] = 7
    w.execute("@%p1 mov.b32 %r1, 9; @!%p1 mov.b32 %r2, 5")
    assert (w["%r1"] == np.where(LANE % 3 == 0, 9, 7)).all()
    assert (w["%r2"] == np.where(LANE % 3 == 0, 0, 5)).all()


# --------------------------------------------------------------------------------------------
# SIMT control flow
# --------------------------------------------------------------------------------------------
LOOP = """
.reg .b32 %r<8>; .reg .pred %p<3>;
  mov.u32 %r1, %laneid;
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
LOOP:
  xor.b32 %r2, %r2, %r1;
  shl.b32 %r3, %r3, 1;
  or.b32 %r3, %r3, 1;
  shr.u32 %r1, %r1, 1;
  lop3.or.b32 _|%p1, %r1, 0, 0, 0xf0, %p0;
  @%p1 bra LOOP;
  ret;
"""


def test_loop_with_per_lane_trip_count():
    w = Warp(batch=3)
    w["%p0"] = False
    n = w.run(LOOP)
    for lane in range(32):
        x, r, trips = 0, lane, 0
        while True:
            x ^= r
            r >>= 1
            trips += 1
            if not r:
                break
        assert (w["%r2"][:, lane] == x).all()
        assert (w["%r3"][:, lane] == (1 << trips) - 1).all()  # one bit per iteration
    assert n == 3 + 6 * 5 + 1  # lane 31 iterates 5 times; the others wait at reconvergence


def test_divergent_if_else_reconverges_before_a_collective():
    prog = """
    .reg .b32 %r<8>; .reg .pred %p<3>;
      mov.u32 %r1, %laneid;
      and.b32 %r2, %r1, 1;
      lop3.or.b32 _|%p1, %r2, 0, 0, 0xf0, %p0;
      @%p1 bra ODD;
      mov.b32 %r3, 100;
      bra.uni JOIN;
    ODD:
      mov.b32 %r3, 200;
    JOIN:
      shfl.sync.idx.b32 %r4, %r3, 1, 0x1f, 0xffffffff;
      vote.sync.ballot.b32 %r5, %p1, 0xffffffff;
      ret;
    """
    w = Warp()
    w["%p0"] = False
    w.run(prog)
    assert (w["%r3"] == np.where(LANE % 2, 200, 100)).all()
    assert (w["%r4"] == 200).all() and (w["%r5"] == 0xAAAAAAAA).all()


def test_partial_warp_at_aligned_instruction_is_an_error():
    prog = """
    .reg .b32 %r<8>; .reg .pred %p<3>;
      mov.u32 %r1, %laneid;
      shr.u32 %r2, %r1, 4;
      lop3.or.b32 _|%p1, %r2, 0, 0, 0xf0, %p0;
      @%p1 bra SKIP;
      shfl.sync.bfly.b32 %r4, %r1, 1, 0x1f, 0xffffffff;
    SKIP:
      ret;
    """
    w = Warp()
    w["%p0"] = False
    with pytest.raises(PtxError, match=r"line 7: shfl[^:]*: membermask names lanes 16-31"):
        w.run(prog)
    w2 = Warp()
    w2["%p1"] = LANE < 8
    w2["%r1"] = 0
    with pytest.raises(PtxError, match=r"partial warp: lanes 0-7 active, lanes 8-31 not"):
        w2.execute("@%p1 ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r2}, [%r1];")


def test_exit_in_some_lanes_and_bra_uni_check():
    prog = """
    .reg .b32 %r<4>; .reg .pred %p<3>;
      mov.u32 %r1, %laneid;
      shr.u32 %r2, %r1, 3;
      lop3.or.b32 _|%p1, %r2, 0, 0, 0xf0, %p0;
      @%p1 exit;
      mov.b32 %r3, 1;
    """
    w = Warp()
    w["%p0"] = False
    w.run(prog)
    assert (w["%r3"] == np.where(LANE < 8, 1, 0)).all()
    with pytest.raises(PtxError, match="bra.uni is not uniform"):
        w.run(".reg .pred %p<2>; @%p1 bra.uni L; L: ret;")


def test_batch_of_warps_diverge_independently():
    w = Warp(batch=2)
    w["%p1"] = np.stack([LANE < 32, LANE < 0])  # warp 0 all taken, warp 1 none
    w.run("""
      @%p1 bra T;
      mov.b32 %r1, 1;
      bra.uni E;
    T:
      mov.b32 %r1, 2;
    E:
      activemask.b32 %r2;
    """)
    assert (w["%r1"][0] == 2).all() and (w["%r1"][1] == 1).all()
    assert (w["%r2"] == 0xFFFFFFFF).all()


# --------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------
def test_ld_st_shared_vectors_and_errors():
    w = Warp()
    data = RNG.integers(0, 2**32, 256, dtype=np.uint32)
    w.run("""
    .reg .b32 %r<12>;
      mov.u32 %r1, %laneid;
      shl.b32 %r2, %r1, 4;
      ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [%r2];
      ld.shared.u8 %r8, [%r2+3];
      ld.shared.s8 %r9, [%r2+3];
      st.shared.v2.b32 [%r2+512], {%r7, %r4};
    """, shared=data)
    words = data[:128].reshape(32, 4)
    for k in range(4):
        assert (w[f"%r{4 + k}"] == words[:, k]).all()
    byte3 = words[:, 0] >> 24
    assert (w["%r8"] == byte3).all()
    assert (w["%r9"] == np.where(byte3 >= 128, byte3 | 0xFFFFFF00, byte3)).all()
    out = w.shared.read(np.uint32, 512, 128).reshape(32, 4)
    assert (out[:, 0] == words[:, 3]).all() and (out[:, 1] == words[:, 0]).all()
    assert (w.shared.read(np.uint32, 0, 128) == data[:128]).all()  # loads never modify memory
    assert (out[:, 2:] == words[:, 2:] * 0 + data[128:].reshape(32, 4)[:, 2:]).all()  # untouched
    with pytest.raises(MemoryError_, match=r"lane 0 accesses 4 bytes at shared address 0x400"):
        w.run("mov.b32 %r1, 1024; ld.shared.u32 %r2, [%r1];", shared=1024)
    with pytest.raises(MemoryError_, match=r"lane 0 .*0x2, not aligned to 4"):
        w.run("mov.b32 %r1, 2; ld.shared.u32 %r2, [%r1];", shared=1024)


def test_global_generic_cvta_and_cp_async_zero_fill():
    g = GlobalMemory()
    src = np.arange(64, dtype=np.uint32) * 3 + 1
    a = g.alloc(src)
    w = Warp()
    w["%rd1"] = a
    w["%r9"] = np.where(LANE % 4 == 3, 4, 16)  # src-size: lanes 3, 7, ... copy 4 bytes
    w.run("""
    .reg .b32 %r<12>; .reg .b64 %rd<8>;
      mov.u32 %r1, %laneid;
      shl.b32 %r2, %r1, 4;
      cvt.u64.u32 %rd2, %r2;
    """.replace("cvt.u64.u32 %rd2, %r2;", "mov.b64 %rd2, {%r2, %r10};").replace(
        ".reg .b64", "mov.b32 %r10, 0; .reg .b64") + """
      shr.u32 %r3, %r1, 3;
      lop3.or.b32 _|%p1, %r3, 0, 0, 0xf0, %p0;
      xor.b64 %rd3, %rd1, 0;
    """ if False else """
    .reg .b32 %r<12>; .reg .b64 %rd<8>;
      mov.u32 %r1, %laneid;
      shl.b32 %r2, %r1, 3;
      mov.b32 %r10, 0;
      mov.b64 %rd2, {%r2, %r10};
      or.b64 %rd3, %rd1, %rd2;
      ld.global.nc.v2.u32 {%r4, %r5}, [%rd3];
      ld.v2.u32 {%r6, %r7}, [%rd3];
      cvta.shared.u64 %rd4, 0;
      shl.b32 %r3, %r1, 4;
      cp.async.cg.shared.global [%r3], [%rd1+0], 16, %r9;
      cp.async.commit_group;
      cp.async.wait_group 0;
      mov.b64 {%r11, _}, %rd4;
    """, shared=512, global_memory=g)
    assert (w["%r4"] == src[0::2][:32]).all() and (w["%r5"] == src[1::2][:32]).all()
    assert (w["%r6"] == w["%r4"]).all() and (w["%r7"] == w["%r5"]).all()
    sm = w.shared.read(np.uint32).reshape(32, 4)
    want = np.where(np.arange(4) < np.where(LANE % 4 == 3, 1, 4)[:, None], src[:4], 0)
    assert (sm == want).all()
    with pytest.raises(MemoryError_, match="outside every allocated buffer"):
        w.run("ld.global.u32 %r1, [%rd1+256];", global_memory=g)


# --------------------------------------------------------------------------------------------
# ldmatrix / stmatrix / movmatrix feeding mma
# --------------------------------------------------------------------------------------------
def _ldmatrix_ref(mem16: np.ndarray, n: int, trans: bool) -> list[np.ndarray]:
    """Lane 8j+i addresses row i of matrix j = mem16[8j+i]; return register j of every lane."""
    out = []
    for j in range(n):
        M = mem16[8 * j:8 * j + 8].astype(np.uint32)
        reg = np.zeros(32, np.uint32)
        for lane in range(32):
            g, t = lane // 4, lane % 4
            lo, hi = (M[2 * t, g], M[2 * t + 1, g]) if trans else (M[g, 2 * t], M[g, 2 * t + 1])
            reg[lane] = lo | (hi << 16)
        out.append(reg)
    return out


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_stmatrix_roundtrip(n, trans):
    mem = RNG.integers(0, 2**16, (32, 8), dtype=np.uint16)
    w = Warp()
    tr = ".trans" if trans else ""
    regs = ", ".join(f"%r{10 + j}" for j in range(n))
    w.run(f"""
      mov.u32 %r1, %laneid;
      shl.b32 %r2, %r1, 4;
      ldmatrix.sync.aligned.m8n8.x{n}{tr}.shared.b16 {{{regs}}}, [%r2];
      or.b32 %r3, %r2, 512;
      stmatrix.sync.aligned.m8n8.x{n}{tr}.shared.b16 [%r3], {{{regs}}};
    """, shared=np.concatenate([mem.reshape(-1), np.zeros(256, np.uint16)]))
    for j, ref in enumerate(_ldmatrix_ref(mem, n, trans)):
        assert (w[f"%r{10 + j}"] == ref).all()
    back = w.shared.read(np.uint16, 512, 8 * 8 * n).reshape(8 * n, 8)
    assert (back == mem[:8 * n]).all()


def test_movmatrix_transposes():
    w = Warp()
    M = RNG.integers(0, 2**16, (8, 8), dtype=np.uint16).astype(np.uint32)
    g, t = LANE // 4, LANE % 4
    w["%r1"] = M[g, 2 * t] | (M[g, 2 * t + 1] << 16)
    w.execute("movmatrix.sync.aligned.m8n8.trans.b16 %r2, %r1;")
    assert (w["%r2"] == (M[2 * t, g] | (M[2 * t + 1, g] << 16))).all()


def test_ldmatrix_feeds_mma_inside_run():
    ins = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    A = RNG.standard_normal((16, 16)).astype(np.float16)
    B = RNG.standard_normal((16, 8)).astype(np.float16)
    smem = np.concatenate([A.view(np.uint16).reshape(-1), B.T.copy().view(np.uint16).reshape(-1)])
    w = Warp()
    w.run(f"""
    .reg .b32 %r<30>; .reg .f32 %f<8>;
      mov.u32 %r1, %laneid;
      and.b32 %r2, %r1, 15;          // row of A: lane % 16
      shl.b32 %r2, %r2, 5;           // * 32 bytes per row
      shr.u32 %r3, %r1, 4;
      shl.b32 %r3, %r3, 4;           // + 16 bytes for lanes 16-31 (columns 8-15)
      or.b32 %r4, %r2, %r3;
      ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r10, %r11, %r12, %r13}}, [%r4];
      and.b32 %r5, %r1, 7;           // B^T row n = lane % 8
      shl.b32 %r5, %r5, 5;
      shr.u32 %r6, %r1, 3;
      and.b32 %r6, %r6, 1;
      shl.b32 %r6, %r6, 4;           // k half
      or.b32 %r7, %r5, %r6;
      or.b32 %r7, %r7, 512;
      ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{%r14, %r15}}, [%r7];
      mov.b32 %f0, 0f00000000; mov.b32 %f1, 0f00000000; mov.b32 %f2, 0f00000000; mov.b32 %f3, 0f00000000;
      {ins} {{%f4, %f5, %f6, %f7}}, {{%r10, %r11, %r12, %r13}}, {{%r14, %r15}}, {{%f0, %f1, %f2, %f3}};
    """, shared=smem)
    D = w.store(ins, "d", ["%f4", "%f5", "%f6", "%f7"])
    assert np.array_equal(D, warpsim.matmul(ins, A.astype(float), B.astype(float), np.zeros((16, 8))))


# --------------------------------------------------------------------------------------------
# shfl / vote / redux / match
# --------------------------------------------------------------------------------------------
def _shfl_ref(mode, a, b, c):
    out, ok = np.zeros(32, np.uint32), np.zeros(32, bool)
    for lane in range(32):
        bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
        maxl = (lane & seg) | (cval & ~seg)
        minl = lane & seg
        j = {"up": lane - bval, "down": lane + bval, "bfly": lane ^ bval,
             "idx": minl | (bval & ~seg)}[mode]
        p = j >= maxl if mode == "up" else j <= maxl
        out[lane] = a[j if p else lane]
        ok[lane] = p
    return out, ok


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from(["up", "down", "bfly", "idx"]), b=st.integers(0, 63),
       c=st.integers(0, 0x1FFF))
def test_shfl_all_modes(mode, b, c):
    a = (LANE * 2654435761) & 0xFFFFFFFF
    w = Warp()
    w["%r1"] = a
    w.execute(f"shfl.sync.{mode}.b32 %r2|%p1, %r1, {b}, {c}, 0xffffffff;")
    d, ok = _shfl_ref(mode, a, b, c)
    assert (w["%r2"] == d).all() and (w["%p1"] == ok).all()


def test_vote_redux_match_activemask():
    w = Warp(batch=2)
    vals = RNG.integers(0, 4, (2, 32))
    w["%r1"] = vals
    w["%p1"] = vals > 1
    w.execute("""vote.sync.ballot.b32 %r2, %p1, 0xffffffff; vote.sync.all.pred %p2, %p1, 0xffffffff;
        vote.sync.any.pred %p3, !%p1, 0xffffffff; vote.sync.uni.pred %p4, %p1, 0xffffffff;
        redux.sync.add.u32 %r3, %r1, 0xffffffff; redux.sync.max.s32 %r4, %r1, 0xffffffff;
        match.sync.any.b32 %r5, %r1, 0xffffffff; match.sync.all.b32 %r6|%p5, %r1, 0xffffffff;
        redux.sync.xor.b32 %r7, %r1, 0xffffffff""")
    for k in range(2):
        p = vals[k] > 1
        assert (w["%r2"][k] == sum(1 << i for i in range(32) if p[i])).all()
        assert (w["%p2"][k] == p.all()).all() and (w["%p3"][k] == (~p).any()).all()
        assert (w["%p4"][k] == (p.all() or not p.any())).all()
        assert (w["%r3"][k] == vals[k].sum()).all() and (w["%r4"][k] == vals[k].max()).all()
        for lane in range(32):
            assert w["%r5"][k, lane] == sum(1 << i for i in range(32) if vals[k, i] == vals[k, lane])
        assert (w["%r6"][k] == 0).all() and not w["%p5"][k].any()
        x = 0
        for v in vals[k]:
            x ^= int(v)
        assert (w["%r7"][k] == x).all()


# --------------------------------------------------------------------------------------------
# bit families (property tests against the ISA pseudo-code)
# --------------------------------------------------------------------------------------------
u32 = st.integers(0, 2**32 - 1)


def _run1(text, **regs):
    w = Warp()
    for k, v in regs.items():
        w[f"%{k}"] = v
    w.execute(text)
    return w


@settings(max_examples=60, deadline=None)
@given(a=u32, b=u32, c=u32, lut=st.integers(0, 255), mode=st.sampled_from([None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"]))
def test_lop3_and_prmt(a, b, c, lut, mode):
    w = _run1(f"lop3.b32 %r4, %r1, %r2, %r3, {lut}; prmt.b32{'.' + mode if mode else ''} %r5, %r1, %r2, %r3",
              r1=a, r2=b, r3=c)
    want = 0
    for i in range(32):
        idx = ((a >> i & 1) << 2) | ((b >> i & 1) << 1) | (c >> i & 1)
        want |= ((lut >> idx) & 1) << i
    assert int(w["%r4"][0]) == want
    by = [(a >> (8 * k)) & 0xFF for k in range(4)] + [(b >> (8 * k)) & 0xFF for k in range(4)]
    s = c & 3
    sel = {None: None, "f4e": [s, s + 1, s + 2, s + 3], "b4e": [s, s - 1, s - 2, s - 3],
           "rc8": [s] * 4, "ecl": [max(k, s) for k in range(4)], "ecr": [min(k, s) for k in range(4)],
           "rc16": [0, 1, 0, 1] if s % 2 == 0 else [2, 3, 2, 3]}[mode]
    out = 0
    for k in range(4):
        if mode is None:
            n = (c >> (4 * k)) & 0xF
            v = by[n & 7]
            if n & 8:
                v = 0xFF if v & 0x80 else 0
        else:
            v = by[sel[k] % 8]
        out |= v << (8 * k)
    assert int(w["%r5"][0]) == out


@settings(max_examples=60, deadline=None)
@given(a=u32, b=u32, pos=st.integers(0, 300), ln=st.integers(0, 300), sh=st.integers(0, 40))
def test_bfe_bfi_shifts_counts(a, b, pos, ln, sh):
    w = _run1(f"""bfe.u32 %r3, %r1, {pos}, {ln}; bfe.s32 %r4, %r1, {pos}, {ln};
                bfi.b32 %r5, %r1, %r2, {pos}, {ln}; shl.b32 %r6, %r1, {sh}; shr.s32 %r7, %r1, {sh};
                shr.u32 %r8, %r1, {sh}; bfind.u32 %r9, %r1; bfind.s32 %r10, %r1;
                bfind.shiftamt.u32 %r11, %r1; clz.b32 %r12, %r1; popc.b32 %r13, %r1;
                brev.b32 %r14, %r1; shf.l.wrap.b32 %r15, %r1, %r2, {sh}; shf.r.clamp.b32 %r16, %r1, %r2, {sh};
                cnot.b32 %r17, %r1; not.b32 %r18, %r1""", r1=a, r2=b)
    bit = lambda x, i: (x >> i) & 1  # noqa: E731
    p, n = pos & 0xFF, ln & 0xFF
    for signed, reg in ((False, "%r3"), (True, "%r4")):
        sbit = 0 if (not signed or n == 0) else bit(a, min(p + n - 1, 31))
        want = sum(((bit(a, p + i) if (i < n and p + i <= 31) else sbit) << i) for i in range(32))
        assert int(w[reg][0]) == want
    f = b
    for i in range(n):
        if p + i > 31:
            break
        f = (f & ~(1 << (p + i))) | (bit(a, i) << (p + i))
    assert int(w["%r5"][0]) == f
    sa = a - (1 << 32) if a >> 31 else a
    assert int(w["%r6"][0]) == ((a << sh) & 0xFFFFFFFF if sh < 32 else 0)
    assert int(w["%r7"][0]) == (sa >> min(sh, 31)) & 0xFFFFFFFF
    assert int(w["%r8"][0]) == (a >> sh if sh < 32 else 0)
    msb = a.bit_length() - 1
    assert int(w["%r9"][0]) == (msb & 0xFFFFFFFF)
    na = ~sa if sa < 0 else sa
    assert int(w["%r10"][0]) == ((na.bit_length() - 1) & 0xFFFFFFFF)
    assert int(w["%r11"][0]) == ((31 - msb) if a else 0xFFFFFFFF)
    assert int(w["%r12"][0]) == 32 - a.bit_length()
    assert int(w["%r13"][0]) == bin(a).count("1")
    assert int(w["%r14"][0]) == int(f"{a:032b}"[::-1], 2)
    both = (b << 32) | a
    nw, nc = sh & 31, min(sh, 32)
    assert int(w["%r15"][0]) == ((both << nw) >> 32) & 0xFFFFFFFF
    assert int(w["%r16"][0]) == (both >> nc) & 0xFFFFFFFF
    assert int(w["%r17"][0]) == (1 if a == 0 else 0)
    assert int(w["%r18"][0]) == (~a) & 0xFFFFFFFF


def test_program_runs_again_without_reparsing():
    w = Warp(batch=4)
    prog = w.compile(LOOP)
    assert w.compile(LOOP) is prog
    w["%p0"] = False
    w.run(prog)
    first = w["%r2"].copy()
    w.run(prog)
    assert (w["%r2"] == first).all()


# --------------------------------------------------------------------------------------------
# resumable execution (for a launcher), local memory, arch-gated forms, error reporting
# --------------------------------------------------------------------------------------------
def test_run_stops_at_a_barrier_and_resumes():
    from warpsim.ptx.machine import Context, WarpState, run
    from warpsim.ptx.program import compile_body

    prog = compile_body("""
      mov.u32 %r1, 1;
      bar.sync 0;
      mov.u32 %r1, 2;
      barrier.sync 1, 64;
      mov.u32 %r2, 3;
    """)
    ctx = Context({}, (), "sm_90")
    st_ = WarpState.start(len(prog))
    run(prog, ctx, st_)
    assert st_.status == "barrier" and st_.barrier[0].info["op"] == "sync" and st_.pc == 2
    assert (ctx.regs["%r1"] == 1).all() and "%r2" not in ctx.regs
    run(prog, ctx, st_)
    assert st_.status == "barrier" and (ctx.regs["%r1"] == 2).all()
    assert int(st_.barrier[0].info["count"](ctx)) == 64
    run(prog, ctx, st_)
    assert st_.status == "exited" and (ctx.regs["%r2"] == 3).all() and ctx.executed == 5


def test_local_memory_is_per_lane():
    w = Warp(batch=2)
    w.run("""
    .reg .b32 %r<6>;
    .local .align 8 .b8 buf[16];
      mov.u32 %r1, %laneid;
      st.local.u32 [buf+4], %r1;
      mov.u32 %r2, buf;
      ld.local.u32 %r3, [%r2+4];
      ld.local.u32 %r4, [buf];
    """)
    assert (w["%r3"] == LANE).all() and (w["%r4"] == 0).all()


def test_sm100_matrix_forms_need_their_target():
    with pytest.raises(PtxError, match="requires sm_100a"):
        Warp("sm_90").execute("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r1, %r2}, [%r0];")
    mem = RNG.integers(0, 256, (32, 16), dtype=np.uint8)
    w = Warp("sm_100a")
    w.run("""
      mov.u32 %r1, %laneid;
      shl.b32 %r2, %r1, 4;
      ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8 {%r10, %r11, %r12, %r13}, [%r2];
      ldmatrix.sync.aligned.m8n16.x4.shared.b8x16.b4x16_p64 {%r20, %r21, %r22, %r23}, [%r2];
    """, shared=mem)
    g, t = LANE // 4, LANE % 4
    for m in range(2):
        for h in range(2):
            want = sum(mem[16 * m + 4 * t + e, g + 8 * h].astype(np.uint32) << (8 * e) for e in range(4))
            assert (w[f"%r{10 + 2 * m + h}"] == want).all()
    nib = np.stack([(mem[:, :8] >> 4 * k) & 0xF for k in range(2)], axis=-1).reshape(32, 16)
    for j in range(4):
        want = sum(nib[8 * j + g, 4 * t + e].astype(np.uint32) << (8 * e) for e in range(4))
        assert (w[f"%r{20 + j}"] == want).all()


def test_misaligned_ldmatrix_row_names_lane_and_address():
    w = Warp()
    w["%r1"] = np.where(LANE == 5, 88, LANE * 16)
    with pytest.raises(MemoryError_, match=r"ldmatrix.*lane 5 accesses shared address 0x58, not aligned to 16"):
        w.execute("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r2}, [%r1];") if False else \
            w.run("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r2}, [%r1];", shared=1024)


def test_type_and_width_errors_and_inputs_untouched():
    w = Warp()
    w["%rd1"] = 5
    before = w["%rd1"].copy()
    with pytest.raises(PtxError, match="64-bit register"):
        w.execute("shl.b32 %r2, %rd1, 1")
    with pytest.raises(PtxError, match=r"qualifier .wide is not supported for shl"):
        w.execute("shl.wide.b32 %r2, %r1, 1")
    with pytest.raises(PtxError, match="needs Warp.run"):
        w.execute("bra L1")
    with pytest.raises(PtxError, match=r"v4.u32 .*vector of 4"):
        w.run("ld.shared.v4.u32 {%r1, %r2}, [%r0];", shared=64)
    w["%r1"] = 1
    with pytest.raises(PtxError, match="guard %r1 must be a predicate"):
        w.run(".reg .b32 %r<3>; @%r1 mov.b32 %r2, 1;")
    assert (w["%rd1"] == before).all() and "%r2" not in w


def test_packing_doctor_on_registers_a_routine_wrote():
    ins = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    B = RNG.standard_normal((16, 8)).astype(np.float16)
    w = Warp()
    body = """
      mov.u32 %r1, %laneid;
      and.b32 %r2, %r1, 15;
      shl.b32 %r2, %r2, 4;
      ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r10, %r11}, [%r2];
      ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r12, %r13}, [%r2];
    """
    w.run(body, shared=B)  # row-major K x N: .trans is right, plain ldmatrix is the classic bug
    assert w.explain_packing(ins, "b", ["%r10", "%r11"], B.astype(float)).ok
    bad = w.explain_packing(ins, "b", ["%r12", "%r13"], B.astype(float))
    assert not bad.ok and "b" in str(bad).lower()


def test_ret_inside_a_divergent_loop_and_break_out_of_nested_loops():
    w = Warp(batch=2)
    w["%r9"] = np.stack([LANE, 31 - LANE])
    w.run("""
    .reg .b32 %r<8>; .reg .pred %p<4>;
      mov.u32 %r1, 0;
      mov.u32 %r2, 0;
    OUTER:
      mov.u32 %r3, 0;
    INNER:
      add.u32 %r2, %r2, 1;
      setp.eq.u32 %p1, %r2, %r9;
      @%p1 bra FOUND;
      add.u32 %r3, %r3, 1;
      setp.lt.u32 %p2, %r3, 4;
      @%p2 bra INNER;
      add.u32 %r1, %r1, 1;
      setp.gt.u32 %p3, %r1, 5;
      @%p3 ret;
      bra.uni OUTER;
    FOUND:
      mov.u32 %r4, 77;
    """)
    for k, target in enumerate([LANE, 31 - LANE]):
        for lane in range(32):
            t = int(target[lane])
            # each inner step adds 1 to %r2; the outer loop returns after 6 rounds of 4 steps
            if 1 <= t <= 24:
                assert w["%r2"][k, lane] == t and w["%r4"][k, lane] == 77
            else:
                assert w["%r2"][k, lane] == 24 and w["%r4"][k, lane] == 0


def test_param_and_const_spaces_through_a_context():
    from warpsim.ptx.machine import Context, WarpState, run
    from warpsim.ptx.memory import FlatMemory
    from warpsim.ptx.program import compile_body

    param = FlatMemory("param", 16, per="all", readonly=True)
    param.fill(np.array([7, 0x12345678], np.uint64))
    const = FlatMemory("const", 64, per="all", readonly=True)
    const.fill(np.arange(16, dtype=np.uint32))
    prog = compile_body("""
      ld.param.u64 %rd1, [8];
      mov.u32 %r1, %laneid;
      and.b32 %r1, %r1, 15;
      shl.b32 %r1, %r1, 2;
      ld.const.u32 %r2, [%r1];
    """)
    ctx = Context({}, (3,), "sm_90", {"param": param, "const": const})
    run(prog, ctx, WarpState.start(len(prog)))
    assert (ctx.regs["%rd1"] == 0x12345678).all() and (ctx.regs["%r2"] == LANE % 16).all()
    with pytest.raises(PtxError, match="cannot store to .const"):
        compile_body("st.const.u32 [0], %r1;")
    bad = compile_body("st.param.u32 [0], %r2;")
    with pytest.raises(MemoryError_, match="read-only"):
        run(bad, ctx, WarpState.start(len(bad)))


def test_cp_async_with_cache_hint_operand_and_ignore_src():
    g = GlobalMemory()
    a = g.alloc(np.arange(16, dtype=np.uint32) + 100)
    w = Warp()
    w["%rd1"] = a
    w["%rd2"] = 0  # cache policy (ignored)
    w["%p1"] = LANE % 2 == 1
    w.run("""
    .reg .b32 %r<4>;
      mov.u32 %r1, %laneid;
      and.b32 %r1, %r1, 3;
      shl.b32 %r2, %r1, 2;
      mov.u32 %r3, %laneid;
      shl.b32 %r3, %r3, 2;
      cp.async.ca.shared.global.L2::cache_hint [%r3], [%rd1+0], 4, %rd2;
      cp.async.ca.shared.global [%r3+128], [%rd1+4], 4, %p1;
      cp.async.wait_all;
    """, shared=256, global_memory=g)
    sm = w.shared.read(np.uint32)
    assert (sm[:32] == 100).all()
    assert (sm[32:64] == np.where(LANE % 2 == 1, 0, 101)).all()


def test_undeclared_destination_register_is_an_error():
    w = Warp()
    with pytest.raises(warpsim.RegisterError, match="%acc is not declared"):
        w.run("mov.u32 %acc, 1;")
    w.run(".reg .b32 %acc; mov.u32 %acc, 1;")
    w.declare("%tmp", 16)
    w.execute("mov.b16 %tmp, 3")
    assert (w["%acc"] == 1).all() and (w["%tmp"] == 3).all()


def test_program_with_outside_symbols_for_a_launcher():
    from warpsim.ptx.machine import Context, WarpState, run
    from warpsim.ptx.memory import FlatMemory
    from warpsim.ptx.parser import parse_body
    from warpsim.ptx.program import Program

    body = parse_body("""
    .reg .b64 %rd<3>; .reg .b32 %r<3>;
    .shared .align 4 .b32 mine[4];
      ld.param.u32 %r1, [k_param_1];
      mov.u32 %r2, mine;
      st.shared.u32 [mine+4], %r1;
    """)
    prog = Program(body, "sm_90", symbols={"k_param_1": ("param", 8)}, shared_base=64)
    assert prog.symbols["mine"] == ("shared", 64) and prog.shared_bytes == 80
    param = FlatMemory("param", 16, per="all", readonly=True)
    param.fill(np.array([0, 42], np.uint64))
    smem = FlatMemory("shared", prog.shared_bytes, (2,))
    ctx = Context({}, (2,), "sm_90", {"param": param, "shared": smem})
    run(prog, ctx, WarpState.start(len(prog)))
    assert (ctx.regs["%r2"] == 64).all() and (smem.read(np.uint32, 68, 1) == 42).all()


def test_docs_list_every_interpreter_opcode():
    from pathlib import Path

    from warpsim.tools.ptxdoc import table
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ptx.md").read_text()
    mine = ("logic", "datamove", "warpops", "matrix", "mma", "control")
    rows = table(mine).splitlines()[2:]
    assert len(rows) >= 35 and all(r in doc for r in rows)


def test_sparse_mma_inside_run_matches_execute():
    pytest.importorskip("warpsim.tensorcore.sparse")
    ins = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
    A = RNG.standard_normal((16, 32))
    A.reshape(16, 8, 4)[..., 1:3] = 0  # 2:4 sparse: keep elements 0 and 3 of every group of 4
    B = RNG.standard_normal((32, 8))
    w = Warp()
    w.load_sparse(ins, A, ["%r0", "%r1", "%r2", "%r3"], "%r9", selector=1)
    w.load(ins, "b", B, ["%r4", "%r5", "%r6", "%r7"])
    w.load(ins, "c", np.zeros((16, 8)), ["%f0", "%f1", "%f2", "%f3"])
    ops = "{%f4,%f5,%f6,%f7}, {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%f0,%f1,%f2,%f3}, %r9, 1"
    w.run(f"{ins} {ops};")
    D_run = w.store(ins, "d", ["%f4", "%f5", "%f6", "%f7"])
    w.execute(f"{ins} {ops.replace('%f4,%f5,%f6,%f7', '%f8,%f9,%f10,%f11')};")
    assert np.array_equal(D_run, w.store(ins, "d", ["%f8", "%f9", "%f10", "%f11"]))
    assert np.array_equal(D_run, warpsim.matmul(ins, A, B, np.zeros((16, 8))))
    with pytest.raises(PtxError, match="sparsity selector"):
        w.run(f"{ins} {ops[:-1]}%r9;")


def test_debug_directives_without_semicolons_as_nvcc_writes_them():
    w = Warp()
    w.run("""
    .reg .b32 %r<3>;
    \t.loc\t1 12 5
    \tmov.u32 \t%r1, %laneid;
    .file 2 "kernel.cu"
    \t.loc 1 13 3
    \tshl.b32 %r2, %r1, 1;
    """)
    assert (w["%r2"] == 2 * LANE).all()


def test_a_kernel_body_as_nvcc_emits_it():
    """tests/data/nvcc_ldmatrix_shfl.ptx: nvcc 13.0 -arch=sm_90 output of a kernel with inline
    ldmatrix, a __shfl_xor_sync sum, __floats2half2_rn, params and demoted shared memory; run
    its body on one warp with a hand-made parameter space and global buffers."""
    import re
    from pathlib import Path

    from warpsim.ptx.machine import Context, WarpState, run
    from warpsim.ptx.memory import SHARED_WINDOW, FlatMemory
    from warpsim.ptx.parser import parse_body
    from warpsim.ptx.program import Program

    text = (Path(__file__).parent / "data" / "nvcc_ldmatrix_shfl.ptx").read_text()
    body = text[text.index("{", text.index(".entry k")) + 1:text.rindex("}")]
    prog = Program(parse_body(body), "sm_90",
                   symbols={f"k_param_{i}": ("param", 8 * i) for i in range(3)})
    g = GlobalMemory()
    words = RNG.integers(0, 2**32, 128, dtype=np.uint32)
    pin, pout, pf = g.alloc(words), g.alloc(nbytes=128), g.alloc(nbytes=20)
    param = FlatMemory("param", 24, per="all", readonly=True)
    param.fill(np.array([pin, pout, pf], np.uint64))
    smem = FlatMemory("shared", prog.shared_bytes, (), window=SHARED_WINDOW)
    ctx = Context({}, (), "sm_90", {"param": param, "global": g, "shared": smem})
    st_ = WarpState.start(len(prog))
    run(prog, ctx, st_)
    assert st_.status == "exited"
    # independent reference: ldmatrix.x4 of the 32 rows written, xor-butterfly f32 sum, f16x2 pack
    rows = words.reshape(32, 4)  # lane L wrote row L (8 halves) at sm + 16 L
    g4, t4 = LANE // 4, LANE % 4
    a = [rows[8 * j + g4, t4] for j in range(4)]
    v = (a[0] & 0x3FFFFFFF).view(np.float32).copy()
    for o in (16, 8, 4, 2, 1):
        v = (v + v[LANE ^ o]).astype(np.float32)
    h = np.stack([v.astype(np.float16), LANE.astype(np.float16)], axis=-1).view(np.uint32)[:, 0]
    assert (g.view(pout, np.uint32, 32) == (a[1] ^ a[2] ^ a[3] ^ h)).all()
    assert (g.view(pf, np.float32, 5) == v[:5]).all()
    assert re.search(r"\.loc|// begin inline asm", text)  # the file is raw nvcc output


@settings(max_examples=100, deadline=None)
@given(v=st.integers(-(2**63), 2**64 - 1), form=st.sampled_from(["d", "x", "X", "o", "b"]),
       suffix=st.sampled_from(["", "U"]))
def test_integer_literals_in_every_base(v, form, suffix):
    mag = abs(v)
    body = {"d": str(mag), "x": f"0x{mag:x}", "X": f"0X{mag:X}", "o": f"0{mag:o}" if mag else "0",
            "b": f"0b{mag:b}"}[form]
    imm = parse_immediate(("-" if v < 0 else "") + body + suffix)
    assert imm.kind == "int" and imm.value == v


@settings(max_examples=60, deadline=None)
@given(bits=st.integers(0, 2**32 - 1))
def test_f32_hex_literal_is_its_bit_pattern_everywhere(bits):
    w = Warp()
    w.execute(f"mov.b32 %r1, 0f{bits:08X}; mov.f32 %f1, 0f{bits:08x};")
    assert int(w["%r1"][0]) == bits and int(w["%f1"][0]) == bits


def test_run_never_mutates_the_callers_shared_array():
    smem = np.arange(64, dtype=np.uint32)
    keep = smem.copy()
    w = Warp()
    w.run("mov.u32 %r1, %laneid; shl.b32 %r1, %r1, 2; st.shared.u32 [%r1], %r1;", shared=smem)
    assert (smem == keep).all() and (w.shared.read(np.uint32, 0, 32) == 4 * LANE).all()


def test_run_errors_carry_where_they_happened():
    """Memory and SIMT errors say which instruction, line, lanes and address as attributes
    (the sanitizer reads them there, not out of the message)."""
    from warpsim.errors import DivergenceError, MemoryAccessError, PtxError

    head = ".reg .b32 %r<4>; .reg .pred %p<4>;\nmov.u32 %r1, %laneid;\nshl.b32 %r1, %r1, 2;\n"
    w = Warp()
    with pytest.raises(MemoryAccessError) as ei:  # 4 * lane + 1000: lane 6 reads [1024, 1028)
        w.run(head + "add.u32 %r1, %r1, 1000;\nld.shared.u32 %r2, [%r1];", shared=1024)
    e = ei.value
    assert isinstance(e, PtxError) and "lane 6 accesses 4 bytes at shared address 0x400" in str(e)
    assert (e.instruction, e.line, e.lanes, e.warp) == ("ld.shared.u32 %r2, [%r1]", 5, (6,), ())
    assert (e.address, e.space, e.reason, e.nbytes) == (0x400, "shared", "outside", 4)
    with pytest.raises(MemoryAccessError) as ei:
        w.run(head + "add.u32 %r1, %r1, 2;\nst.shared.u32 [%r1], %r1;", shared=1024)
    e = ei.value
    assert (e.reason, e.lanes, e.address, e.align, e.line) == ("misaligned", (0,), 2, 4, 5)
    g = GlobalMemory()
    base = g.alloc(np.zeros(4, np.uint32))
    w["%rd1"] = base
    with pytest.raises(MemoryError_) as ei:  # the old name is the same class
        w.run("ld.global.u32 %r1, [%rd1+256];", global_memory=g)
    e = ei.value
    assert (e.space, e.reason, e.lanes, e.address) == ("global", "outside", (0,), base + 256)
    with pytest.raises(DivergenceError) as ei:  # lanes 0-3 and 7 branch, the others do not
        w.run(head + "setp.lt.u32 %p1, %r1, 16;\nsetp.eq.u32 %p2, %r1, 28;\nor.pred %p3, %p1, %p2;\n"
              "@%p3 bra.uni L;\nL: ret;")
    e = ei.value
    assert "lanes 0-3, 7 branch" in str(e)
    assert (e.lanes, e.warp, e.line, e.instruction) == ((0, 1, 2, 3, 7), (), 7, "@%p3 bra.uni L")
    with pytest.raises(DivergenceError) as ei:  # a membermask naming lanes that do not run it
        w.run(head + "setp.lt.u32 %p1, %r1, 16;\n@%p1 bar.warp.sync -1;")
    assert ei.value.lanes == tuple(range(4, 32)) and ei.value.line == 5


@pytest.mark.parametrize("lit,ok", [("1e400", False), ("-1e400", False), ("1e-400", False),
                                    ("4.9406564584124654e-324", False), ("1e-310", False),
                                    ("2.2250738585072014e-308", True), ("1e308", True),
                                    ("0.0", True), ("1.5", True)])
def test_decimal_immediates_out_of_double_range_are_refused_as_ptxas_does(lit, ok):
    """ptxas refuses a decimal literal that overflows binary64 or is an inexact value below its
    normal range ("Constant overflow") in any instruction, not only in mma vectors."""
    from warpsim import Warp
    from warpsim.errors import PtxError

    w = Warp("sm_90")
    w.declare("%f1", 32)
    for text in (f"mov.f32 %f1, {lit};", f"add.f32 %f1, %f1, {lit};"):
        if ok:
            w.execute(text)
        else:
            with pytest.raises(PtxError, match="constant overflow"):
                w.execute(text)
