"""Runs of consecutive mma instructions executed as one engine call (program.fuse_runs):
same registers, errors, step counts and launch outputs as one instruction at a time."""

import copy

import numpy as np
import pytest

from warpsim import Warp
from warpsim.errors import RegisterError, WarpsimError
from warpsim.kernel.launch import Module

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
RNG = np.random.default_rng(7)

# 0, 1 fuse; 2 reads 0's D (a new run), 3 writes what 2 writes (fuses: written in order);
# 4 is guarded (alone); a label splits 5 from 6; 6, 7 fuse
BODY = f"""
.reg .b32 %r<40>; .reg .f32 %f<40>; .reg .pred %p<4>;
  {MMA} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, {{%f0, %f1, %f2, %f3}};
  {MMA} {{%f4, %f5, %f6, %f7}}, {{%r0, %r1, %r2, %r3}}, {{%r6, %r7}}, {{%f4, %f5, %f6, %f7}};
  {MMA} {{%f8, %f9, %f10, %f11}}, {{%r8, %r9, %r10, %r11}}, {{%r4, %r5}}, {{%f0, %f1, %f2, %f3}};
  {MMA} {{%f8, %f9, %f10, %f11}}, {{%r8, %r9, %r10, %r11}}, {{%r6, %r7}}, {{%f4, %f5, %f6, %f7}};
  @%p0 {MMA} {{%f12, %f13, %f14, %f15}}, {{%r0, %r1, %r2, %r3}}, {{%r6, %r7}}, {{%f12, %f13, %f14, %f15}};
  {MMA} {{%f16, %f17, %f18, %f19}}, {{%r8, %r9, %r10, %r11}}, {{%r4, %r5}}, {{%f16, %f17, %f18, %f19}};
$L_mid:
  {MMA} {{%f20, %f21, %f22, %f23}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, {{%f8, %f9, %f10, %f11}};
  {MMA} {{%f24, %f25, %f26, %f27}}, {{%r8, %r9, %r10, %r11}}, {{%r6, %r7}}, {{0f3F800000, 0f00000000, 0f3F800000, 0f00000000}};
"""


def _unfused(prog):
    P = copy.copy(prog)
    P.instrs = [copy.copy(i) for i in prog.instrs]
    for i in P.instrs:
        i.group = None
    return P


def _halves(shape):
    h = RNG.standard_normal(shape + (2,)).astype(np.float16)
    return h.view(np.uint32)[..., 0]


def _warp(batch, names=None):
    w = Warp(batch=batch)
    for i in (range(12) if names is None else names):
        w[f"%r{i}"] = _halves((batch, 32))
    for i in range(0, 20):
        w[f"%f{i}"] = RNG.standard_normal((batch, 32)).astype(np.float32).view(np.uint32)
    w["%p0"] = RNG.random((batch, 32)) < 2  # all true: the guard still keeps 4 apart
    return w


def _regs(w, n=28):
    return {k: np.array(w[k]) for k in [f"%f{i}" for i in range(n)]}


def test_runs_are_grouped_where_sequential_order_allows():
    prog = Warp().compile(BODY)
    assert [i.group[0] if i.group else None for i in prog.instrs] == \
        [2, None, 2, None, None, None, 2, None]


@pytest.mark.parametrize("batch", [1, 3])
def test_fused_and_one_by_one_give_the_same_bits(batch):
    w1 = _warp(batch)
    w2 = copy.deepcopy(w1)
    prog = w1.compile(BODY)
    n1 = w1.run(prog)
    n2 = w2.run(_unfused(prog))
    assert n1 == n2 == 8
    r1, r2 = _regs(w1), _regs(w2)
    for k in r1:
        assert np.array_equal(r1[k].view(np.uint32), r2[k].view(np.uint32)), k


def test_a_warp_that_left_keeps_its_registers():
    decl, rest = BODY.lstrip("\n").split("\n", 1)
    body = decl + "\n  setp.eq.u32 %p3, %r39, 1;\n  @%p3 exit;\n" + rest
    w1 = _warp(3)
    w1["%r39"] = np.array([0, 1, 0], np.uint32)[:, None] * np.ones(32, np.uint32)
    before = _regs(w1, 20)
    w2 = copy.deepcopy(w1)
    prog = w1.compile(body)
    assert any(i.group for i in prog.instrs)
    w1.run(prog)
    w2.run(_unfused(prog))
    r1, r2 = _regs(w1), _regs(w2)
    for k in r1:
        assert np.array_equal(r1[k].view(np.uint32), r2[k].view(np.uint32)), k
    assert np.array_equal(r1["%f0"][1].view(np.uint32), before["%f0"][1].view(np.uint32))
    assert not np.array_equal(r1["%f0"][0].view(np.uint32), before["%f0"][0].view(np.uint32))


def test_an_unwritten_register_names_the_instruction_that_reads_it():
    errs, states = [], []
    w0 = _warp(2, names=[0, 1, 2, 3, 4, 5, 8, 9, 10, 11])  # %r6, %r7 never written
    before = np.array(w0["%f0"])
    for fused in (True, False):
        w = copy.deepcopy(w0)
        prog = w.compile(BODY)
        with pytest.raises(RegisterError) as e:
            w.run(prog if fused else _unfused(prog))
        errs.append((str(e.value), e.value.line))
        states.append(np.array(w["%f0"]))
    assert errs[0] == errs[1] and "%r6" in errs[0][0] and errs[0][1] == 4
    assert np.array_equal(states[0], states[1])
    assert not np.array_equal(states[0], before)  # the first ran


def test_a_step_budget_inside_a_run_stops_where_one_by_one_stops():
    out = []
    w0 = _warp(2)
    for fused in (True, False):
        w = copy.deepcopy(w0)
        prog = w.compile(BODY)
        with pytest.raises(WarpsimError) as e:
            w.run(prog if fused else _unfused(prog), max_steps=1)
        out.append((str(e.value), np.array(w["%f0"]).tobytes(), np.array(w["%f4"]).tobytes()))
    assert out[0] == out[1]


KERNEL = f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pd)
{{
  .reg .b32 %r<40>; .reg .f32 %f<40>; .reg .b64 %rd<8>;
  ld.param.u64 %rd0, [pa];
  ld.param.u64 %rd1, [pd];
  cvta.to.global.u64 %rd0, %rd0;
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r30, %tid.x;
  mov.u32 %r31, %ctaid.x;
  mad.lo.u32 %r32, %r31, 64, %r30;
  mul.wide.u32 %rd2, %r32, 64;
  add.s64 %rd3, %rd0, %rd2;
  ld.global.v4.u32 {{%r0, %r1, %r2, %r3}}, [%rd3];
  ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd3+16];
  ld.global.v4.u32 {{%r8, %r9, %r10, %r11}}, [%rd3+32];
  ld.global.v4.f32 {{%f0, %f1, %f2, %f3}}, [%rd3+48];
  {MMA} {{%f4, %f5, %f6, %f7}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, {{%f0, %f1, %f2, %f3}};
  {MMA} {{%f8, %f9, %f10, %f11}}, {{%r8, %r9, %r10, %r11}}, {{%r6, %r7}}, {{%f0, %f1, %f2, %f3}};
  {MMA} {{%f12, %f13, %f14, %f15}}, {{%r0, %r1, %r2, %r3}}, {{%r6, %r7}}, {{%f0, %f1, %f2, %f3}};
  {MMA} {{%f16, %f17, %f18, %f19}}, {{%r8, %r9, %r10, %r11}}, {{%r4, %r5}}, {{%f4, %f5, %f6, %f7}};
  add.s64 %rd4, %rd1, %rd2;
  st.global.v4.f32 [%rd4], {{%f4, %f5, %f6, %f7}};
  st.global.v4.f32 [%rd4+16], {{%f8, %f9, %f10, %f11}};
  st.global.v4.f32 [%rd4+32], {{%f12, %f13, %f14, %f15}};
  st.global.v4.f32 [%rd4+48], {{%f16, %f17, %f18, %f19}};
  ret;
}}
"""


def test_a_launch_gives_the_bits_of_the_checked_one_by_one_run():
    m = Module(KERNEL)
    heads = [i.group[0] for i in m.program("k", 0, "sm_80").program.instrs if i.group]
    assert heads == [3]  # the fourth reads the first's D
    a = _halves((3 * 64, 16))
    a[:, 12:] = RNG.standard_normal((3 * 64, 4)).astype(np.float32).view(np.uint32)
    d = np.zeros((3 * 64, 16), np.float32)
    fast, = m.launch("k", 3, 64, [a, d], arch="sm_80", check=False)[1:]
    slow, = m.launch("k", 3, 64, [a, d], arch="sm_80", check=True)[1:]
    assert np.array_equal(fast.view(np.uint32), slow.view(np.uint32))
    assert np.isfinite(fast).all() and (fast != 0).any()

