"""The launch sanitizer: each check is shown by a kernel with the bug planted (reported, with
kernel, instruction and PTX line, CTA, warp, lanes, address) and the fixed kernel (clean).
The kernels are tests/kernels/sanitizer/sanitizer_cases.cu compiled with nvcc -ptx."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import warpsim

PTX = (Path(__file__).parent / "kernels" / "sanitizer" / "sanitizer_cases.ptx").read_text()
LINES = PTX.split("\n")


def line_of(pattern: str, start: str) -> int:
    """PTX line (1-based) of the first line matching ``pattern`` after the entry ``start``."""
    i0 = next(i for i, ln in enumerate(LINES) if f".entry {start}(" in ln)
    return next(i for i in range(i0, len(LINES)) if re.search(pattern, LINES[i])) + 1


_rng = np.random.default_rng(0)
_A = (_rng.integers(0, 2 ** 16, 192).astype(np.uint32) * 0x10001) & 0x3C003C00

CASES = {
    # name: (grid, block, args(fixed), kind, PTX line pattern, CTA, warp, lanes, address)
    "race_shared": ((1,), (64,), lambda f: [np.arange(64, dtype=np.int32), np.zeros(64, np.int32), np.int32(f)],
                    "race", r"st\.shared\.u32", (0, 0, 0), 0, tuple(range(32)), 0),
    "race_global": ((2,), (32,), lambda f: [np.arange(64, dtype=np.float32), np.zeros(64, np.float32), np.int32(f)],
                    "race", r"st\.global\.f32", (0, 0, 0), None, None, "buffer1"),
    "oob": ((1,), (64,), lambda f: [np.arange(40, dtype=np.float32), np.zeros(40, np.float32), np.int32(40), np.int32(f)],
            "out-of-bounds", r"ld\.global.*f32", (0, 0, 0), 1, (8,), "buffer0+160"),
    "ldsm_misaligned": ((1,), (32,), lambda f: [np.arange(128).astype(np.float16), np.zeros(32, np.uint32), np.int32(f)],
                        "misaligned", r"ldmatrix", (0, 0, 0), 0, (0,), 8),
    "divergent_mma": ((1,), (32,), lambda f: [_A, np.zeros(128, np.float32), np.int32(f)],
                      "divergent-sync", r"mma\.sync", (0, 0, 0), 0, tuple(range(16)), None),
    "uninit_shared": ((1,), (32,), lambda f: [np.zeros(32, np.float32), np.int32(f)],
                      "uninitialised", r"ld\.shared\.f32", (0, 0, 0), 0, (31,), "buffer0+124"),
    "deadlock": ((1,), (64,), lambda f: [np.zeros(64, np.float32), np.int32(f)],
                 "deadlock", r"bar\.sync 1, 64", (0, 0, 0), 0, None, None),
}


def _address(spec):
    from warpsim.ptx.memory import GLOBAL_BASE

    if not isinstance(spec, str):
        return spec
    m = re.fullmatch(r"buffer(\d)(?:\+(\d+))?", spec)
    # buffers are placed from GLOBAL_BASE, 256-byte aligned with a 256-byte gap
    base = GLOBAL_BASE + 512 * int(m.group(1))
    return base + int(m.group(2) or 0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_planted_bug_is_reported(name):
    grid, block, make, kind, pat, cta, warp, lanes, addr = CASES[name]
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PTX, name, grid, block, make(0))
    f = next((f for f in ei.value.findings if f.kind == kind), None)
    assert f is not None, [str(x) for x in ei.value.findings]
    assert f.kernel == name
    assert f.line == line_of(pat, name), str(f)
    assert re.search(pat, f.instruction), str(f)
    assert f.cta == cta and f.warp == warp, str(f)
    if lanes is not None:
        assert f.lanes == lanes, str(f)
    if addr is not None:
        a = _address(addr)
        assert f.address == a, f"{f.address:#x} != {a:#x}: {f}"
    assert f"line {f.line}" in str(ei.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_kernel_is_clean(name):
    grid, block, make, *_ = CASES[name]
    outs = warpsim.launch(PTX, name, grid, block, make(1))
    assert isinstance(outs, tuple) and len(outs) == sum(isinstance(a, np.ndarray) for a in make(1))


def test_fixed_results_are_right():
    outs = warpsim.launch(PTX, "race_shared", 1, 64, CASES["race_shared"][2](1))
    assert (outs[1] == (np.arange(64) + 32) % 64).all()


def test_check_false_skips_race_and_uninitialised_checks():
    outs = warpsim.launch(PTX, "race_global", 2, 32, CASES["race_global"][2](0), check=False)
    assert (outs[1][:32] == 2 * np.arange(32, 64)).all()  # CTA 1 ran after CTA 0 (batch order)
    with pytest.raises(warpsim.SanitizerError) as ei:  # a stopping error still raises
        warpsim.launch(PTX, "oob", 1, 64, CASES["oob"][2](0), check=False)
    assert ei.value.findings[0].kind == "out-of-bounds" and ei.value.outputs is None


def test_findings_carry_the_outputs():
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PTX, "uninit_shared", 1, 32, [np.zeros(32, np.float32), np.int32(0)])
    out = ei.value.outputs[0]
    assert (out[:31] == np.arange(1, 32) * 1.5).all()


def test_invalid_sparse_metadata():
    a = (np.random.default_rng(1).integers(0, 2 ** 16, 256).astype(np.uint32) * 0x10001) & 0x3C003C00
    good = np.full(32, 0x44444444, np.uint32)  # indices (0, 1) in every nibble
    bad = good.copy()
    bad[5] = 0x44444445  # lane 5 supplies metadata (selector 0: lanes 4g+h) with nibble 0b0101
    warpsim.launch(PTX, "sparse_meta", 1, 32, [a, good, np.zeros(128, np.float32)])  # clean
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PTX, "sparse_meta", 1, 32, [a, bad, np.zeros(128, np.float32)])
    f = ei.value.findings[0]
    assert f.kind == "sparse-metadata" and f.line == line_of(r"mma\.sp", "sparse_meta")
    assert f.lanes == (5,) and f.warp == 0 and f.cta == (0, 0, 0)


UNINIT_REG = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<5>; .reg .b64 %rd<3>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 mov.u32 %r2, 7;
  add.u32 %r3, %r2, 1;
  mul.wide.u32 %rd2, %r1, 4; add.u64 %rd2, %rd1, %rd2;
  st.global.u32 [%rd2], %r3;
  ret;
}
"""


def test_uninitialised_register_names_the_first_instruction_using_it():
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(UNINIT_REG, "k", 1, 32, [np.zeros(32, np.uint32)])
    (f,) = ei.value.findings
    assert f.kind == "uninitialised" and f.instruction == "add.u32 %r3, %r2, 1" and f.line == 11
    assert f.lanes == tuple(range(16, 32)) and f.warp == 0 and f.cta == (0, 0, 0)
    fixed = UNINIT_REG.replace("@%p1 mov.u32 %r2, 7;", "mov.u32 %r2, 0; @%p1 mov.u32 %r2, 7;")
    (o,) = warpsim.launch(fixed, "k", 1, 32, [np.zeros(32, np.uint32)])
    assert o.tolist() == [8] * 16 + [1] * 16


def test_findings_take_lanes_and_warp_from_the_error():
    """CTA 1 reaches a bra.uni with lanes 0-3 and 7 taking it: the finding names all five lanes,
    the CTA and the line (read from the error's attributes, not its message)."""
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .pred %p<6>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  setp.lt.u32 %p1, %r1, 4;
  setp.eq.u32 %p2, %r1, 7;
  or.pred %p3, %p1, %p2;
  setp.eq.u32 %p4, %r2, 1;
  and.pred %p5, %p3, %p4;
  @%p5 bra.uni L;
L:
  ret;
}"""
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(ptx, "k", 2, 32, [np.zeros(1, np.uint32)])
    f = ei.value.findings[0]
    assert f.kind == "divergent-sync" and f.lanes == (0, 1, 2, 3, 7)
    assert f.cta == (1, 0, 0) and f.warp == 0 and f.line == 14 and f.instruction == "@%p5 bra.uni L"
    assert "lanes 0-3, 7 branch" in f.message and "[warp 0 of CTA (1, 0, 0)]" in f.message


_SHFL_REDUCE = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<3>;
  .reg .pred %p<3>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 4;
  @%p1 mov.b32 %r2, 7;                 // only lanes 0-3 write %r2
  shfl.sync.bfly.b32 %r3, %r2, OFFSET, 31, -1;
  add.s32 %r4, %r2, %r3;
  setp.eq.u32 %p2, %r1, 0;
  ld.param.u64 %rd1, [out];
  @%p2 st.global.u32 [%rd1], %r4;      // lane 0 stores
  ret;
}
"""


def test_shuffled_lanes_are_followed_one_by_one():
    """A Triton-style reduction: lanes 4-31 never write the shuffled register, and lane 0's
    partner is lane 2 (bfly 2): no finding.  With bfly 4 lane 0 reads lane 4's unwritten
    register: a finding."""
    out = np.zeros(1, np.uint32)
    (o,) = warpsim.launch(_SHFL_REDUCE.replace("OFFSET", "2"), "k", 1, 32, [out])
    assert o[0] == 14
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(_SHFL_REDUCE.replace("OFFSET", "4"), "k", 1, 32, [out])
    assert ei.value.findings[0].kind == "uninitialised"


def test_unwritten_registers_read_zero_without_the_sanitizer():
    (o,) = warpsim.launch(_SHFL_REDUCE.replace("OFFSET", "4"), "k", 1, 32,
                          [np.zeros(1, np.uint32)], check=False)
    assert o[0] == 7  # lane 0's 7 plus lane 4's never-written register, read as 0
