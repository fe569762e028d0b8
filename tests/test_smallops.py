"""testp, copysign and fns.b32: bit-exact against pure-Python/NumPy references of the PTX ISA
semantics (not device-checked; ptxas 13.0 lowers testp/copysign to LOP3/ISETP bit operations)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import warpsim
from warpsim.errors import PtxError
from warpsim.ptx.ops.floating import TESTP_OPS, _copysign, _testp
from warpsim.ptx.ops.logic import _fns

_W = {"f32": (32, np.uint32, "<I", "<f"), "f64": (64, np.uint64, "<Q", "<d")}


def _special(w: int) -> list[int]:
    """Bit patterns of every class: signed zeros, smallest/largest subnormals and normals,
    infinities, quiet and signalling NaNs with payloads, both signs."""
    m, e = (23, 8) if w == 32 else (52, 11)
    emax = ((1 << e) - 1) << m
    pos = [0, 1, 2, (1 << m) - 1, 1 << m, emax - 1, emax, emax | 1, emax | (1 << (m - 1)),
           emax | ((1 << m) - 1), emax | 0x5A5A, (1 << (w - 2))]
    return pos + [p | (1 << (w - 1)) for p in pos]


def _ref_testp(bits: int, t: str, op: str) -> bool:
    w, _, pk, fk = _W[t]
    x = struct.unpack(fk, struct.pack(pk, bits))[0]
    tiny = 2.0 ** (-126 if t == "f32" else -1022)
    return {"finite": math.isfinite(x), "infinite": math.isinf(x), "number": not math.isnan(x),
            "notanumber": math.isnan(x),
            "normal": math.isfinite(x) and (abs(x) >= tiny or x == 0),  # +-0 too: the H100
            "subnormal": x != 0 and abs(x) < tiny}[op]


def _patterns(w):
    return st.one_of(st.sampled_from(_special(w)), st.integers(0, (1 << w) - 1))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_testp_every_class(t):
    w, ut, _, _ = _W[t]
    xs = _special(w)
    for op in TESTP_OPS:
        got = _testp([np.array(xs, ut)], type=t, op=op)
        assert got.dtype == bool
        assert got.tolist() == [_ref_testp(x, t, op) for x in xs], op


@settings(max_examples=60, deadline=None)
@given(t=st.sampled_from(["f32", "f64"]), data=st.data())
def test_testp_and_copysign_random(t, data):
    w, ut, pk, fk = _W[t]
    a = data.draw(st.lists(_patterns(w), min_size=1, max_size=8))
    b = data.draw(st.lists(_patterns(w), min_size=len(a), max_size=len(a)))
    for op in TESTP_OPS:
        assert _testp([np.array(a, ut)], type=t, op=op).tolist() == [_ref_testp(x, t, op) for x in a]
    src_a, src_b = np.array(a, ut), np.array(b, ut)
    got = _copysign([src_a, src_b], type=t)
    assert got.dtype == ut and src_a.tolist() == a and src_b.tolist() == b  # inputs untouched
    sign = 1 << (w - 1)
    for x, y, g in zip(a, b, got.tolist()):
        assert g == (x & sign) | (y & ~sign)  # the ISA: sign of a, all else (NaN payload) of b
        fy = struct.unpack(fk, struct.pack(pk, y))[0]
        if not math.isnan(fy):  # agrees with C copysign(b, a) on numbers
            fx = struct.unpack(fk, struct.pack(pk, x))[0]
            assert struct.pack(pk, g) == struct.pack(fk, math.copysign(fy, fx))


def _ref_fns(mask: int, base: int, offset: int) -> int:
    """The ISA pseudo-code, literally."""
    d = 0xFFFFFFFF
    if offset == 0:
        if base < 32 and (mask >> base) & 1:
            d = base
    else:
        pos, count, inc = base, abs(offset) - 1, 1 if offset > 0 else -1
        while 0 <= pos < 32:
            if (mask >> pos) & 1:
                if count == 0:
                    return pos
                count -= 1
            pos += inc
    return d


def test_fns_isa_examples():
    m = np.uint32(0xAAAAAAAA)
    for base, off, want in [(3, 1, 3), (3, -1, 3), (2, 1, 3), (2, -1, 1), (2, 0, 0xFFFFFFFF),
                            (0, 16, 31), (0, 17, 0xFFFFFFFF), (31, -16, 1), (40, 1, 0xFFFFFFFF)]:
        got = _fns([m, np.uint32(base), np.uint32(off & 0xFFFFFFFF)], type="b32")
        assert int(got) == want == _ref_fns(0xAAAAAAAA, base, off), (base, off)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2**31, 2**32 - 1])),
                          st.integers(0, 31),
                          st.one_of(st.integers(-34, 34), st.integers(-2**31, 2**31 - 1))),
                min_size=1, max_size=32))
def test_fns_random(rows):
    mask = np.array([r[0] for r in rows], np.uint32)
    base = np.array([r[1] for r in rows], np.uint32)
    off = np.array([r[2] & 0xFFFFFFFF for r in rows], np.uint32)
    got = _fns([mask, base, off], type="b32")
    assert got.dtype == np.uint32
    assert got.tolist() == [_ref_fns(*r) for r in rows]


_KERNEL = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pf, .param .u64 pd, .param .u64 pm, .param .u64 po)
{
  .reg .b32 %r<12>; .reg .f32 %f<4>; .reg .f64 %fd<4>; .reg .pred %p<8>; .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [pf]; ld.param.u64 %rd2, [pd]; ld.param.u64 %rd3, [pm]; ld.param.u64 %rd4, [po];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4; add.u64 %rd6, %rd1, %rd5; add.u64 %rd9, %rd3, %rd5; add.u64 %rd10, %rd4, %rd5;
  mul.wide.u32 %rd7, %r1, 8; add.u64 %rd8, %rd2, %rd7;
  ld.global.f32 %f1, [%rd6]; ld.global.f64 %fd1, [%rd8]; ld.global.u32 %r2, [%rd9];
  copysign.f32 %f2, %f1, 0f3F800000;
  copysign.f64 %fd2, 0dBFF0000000000000, %fd1;
  testp.notanumber.f32 %p1, %f1; testp.subnormal.f64 %p2, %fd1; testp.normal.f32 %p3, %f1;
  selp.u32 %r3, 1, 0, %p1; selp.u32 %r4, 2, 0, %p2; selp.u32 %r5, 4, 0, %p3;
  or.b32 %r3, %r3, %r4; or.b32 %r3, %r3, %r5;
  fns.b32 %r6, %r2, %r1, -2;
  st.global.f32 [%rd6], %f2; st.global.f64 [%rd8], %fd2; st.global.u32 [%rd9], %r6;
  st.global.u32 [%rd10], %r3;
  ret;
}
"""


def test_kernel_through_module_launch():
    rng = np.random.default_rng(7)
    f = np.array(_special(32), np.uint32)
    f = np.concatenate([f, rng.integers(0, 2**32, 32 - len(f), dtype=np.uint32)])
    d = np.array(_special(64), np.uint64)
    d = np.concatenate([d, rng.integers(0, 2**63, 32 - len(d), dtype=np.uint64)])
    m = rng.integers(0, 2**32, 32, dtype=np.uint32)
    gf, gd, gm, go = warpsim.Module(_KERNEL).launch("k", 1, 32, [f, d, m, np.zeros(32, np.uint32)])
    assert gf.tolist() == [(x & 0x80000000) | 0x3F800000 for x in f.tolist()]
    assert gd.tolist() == [(x & ~(1 << 63)) | (0xBFF0000000000000 & (1 << 63)) for x in d.tolist()]
    assert gm.tolist() == [_ref_fns(int(x), i, -2) for i, x in enumerate(m.tolist())]
    assert go.tolist() == [_ref_testp(int(x), "f32", "notanumber") + 2 * _ref_testp(int(y), "f64", "subnormal")
                           + 4 * _ref_testp(int(x), "f32", "normal") for x, y in zip(f.tolist(), d.tolist())]


@pytest.mark.parametrize("body,what", [
    ("testp.f32 %p1, %f1;", "requires"),                  # ptxas takes it, the ISA has no default
    ("testp.finite.normal.f32 %p1, %f1;", "both set"),    # ptxas: multiple operation modifiers
    ("testp.finite.f16 %p1, %h1;", "needs a type"),
    ("copysign.ftz.f32 %f1, %f2, %f3;", "not supported"),
    ("copysign.f16 %h1, %h2, %h3;", "needs a type"),
    ("fns.u32 %r1, %r2, %r3, %r4;", "needs a type"),
])
def test_refused_like_ptxas(body, what):
    from warpsim.ptx.parser import parse_body
    from warpsim.ptx.program import Program
    decl = ".reg .b32 %r<5>; .reg .f32 %f<4>; .reg .b16 %h<4>; .reg .pred %p<2>;\n"
    with pytest.raises(PtxError, match=what):
        Program(parse_body(decl + body), "sm_90")


def test_testp_of_signed_zeros_is_the_h100s():
    """The H100 (tools/smallops_device.py) answers finite, number and normal for +-0, in f32 and
    f64: the six predicates packed as finite 1, infinite 2, number 4, notanumber 8, normal 16,
    subnormal 32 give 21; a subnormal gives 1 + 4 + 32."""
    for t, w in (("f32", 32), ("f64", 64)):
        for bits, want in ((0, 21), (1 << (w - 1), 21), (1, 37), ((1 << (w - 1)) | 1, 37)):
            got = sum(1 << k for k, op in enumerate(("finite", "infinite", "number", "notanumber",
                                                     "normal", "subnormal"))
                      if _ref_testp(bits, t, op))
            assert got == want, (t, hex(bits), got)
            dt = np.uint32 if w == 32 else np.uint64
            flags = sum(int(_testp([np.array([bits], dt)], type=t, op=op)[0]) << k
                        for k, op in enumerate(("finite", "infinite", "number", "notanumber",
                                                "normal", "subnormal")))
            assert flags == want, (t, hex(bits), flags)
