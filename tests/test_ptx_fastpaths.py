"""The PTX machine's fast paths (OpSpec.specialize, chunked f16 arithmetic, one-gather memory
access) give exactly the bits of the general paths they shortcut, and the H100's words.

Each fast path covers common operands only (all lanes active, plain memory, operands of the
type's width); everything else takes the general path, which tests/test_ptx_alu.py and the
hardware fixtures check on their own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warpsim import Warp
from warpsim._util import chunks
from warpsim.ptx.memory import FlatMemory, MemoryError_
from warpsim.validation.alu_cases import Case, inputs
from warpsim.validation.alu_compare import all_ops, check_fixture, decode

FIXTURE = Path(__file__).parent / "data" / "h100_alu.npz"
SETTINGS = settings(max_examples=25, deadline=None)

# forms with a fast path, with their operand formats (destination first)
FAST_FORMS = [
    ("add.f16", "f16", ("f16", "f16")), ("sub.f16", "f16", ("f16", "f16")),
    ("mul.f16", "f16", ("f16", "f16")), ("fma.rn.f16", "f16", ("f16",) * 3),
    ("add.rn.f16x2", "f16x2", ("f16x2",) * 2), ("sub.f16x2", "f16x2", ("f16x2",) * 2),
    ("mul.f16x2", "f16x2", ("f16x2",) * 2), ("fma.rn.f16x2", "f16x2", ("f16x2",) * 3),
    ("add.bf16", "bf16", ("bf16", "bf16")), ("sub.rn.bf16x2", "bf16x2", ("bf16x2",) * 2),
    ("mul.bf16x2", "bf16x2", ("bf16x2",) * 2), ("fma.rn.bf16", "bf16", ("bf16",) * 3),
    ("fma.rn.bf16x2", "bf16x2", ("bf16x2",) * 3),
    ("add.f32", "f32", ("f32", "f32")), ("sub.rn.f32", "f32", ("f32", "f32")),
    ("mul.f32", "f32", ("f32", "f32")), ("fma.rn.f32", "f32", ("f32",) * 3),
    ("mad.rn.f32", "f32", ("f32",) * 3),
    ("add.ftz.f32", "f32", ("f32", "f32")), ("sub.rn.ftz.f32", "f32", ("f32", "f32")),
    ("mul.ftz.f32", "f32", ("f32", "f32")), ("fma.rn.ftz.f32", "f32", ("f32",) * 3),
    ("cvt.rn.f16x2.f32", "f16x2", ("f32", "f32")), ("cvt.rz.f16x2.f32", "f16x2", ("f32", "f32")),
    ("cvt.rn.bf16x2.f32", "bf16x2", ("f32", "f32")), ("cvt.rz.bf16x2.f32", "bf16x2", ("f32", "f32")),
    ("setp.lt.u32", "pred", ("u32", "u32")), ("setp.ge.s32", "pred", ("s32", "s32")),
    ("setp.hi.u64", "pred", ("u64", "u64")), ("setp.eq.b16", "pred", ("b16", "b16")),
    ("setp.gt.f32", "pred", ("f32", "f32")), ("setp.le.f64", "pred", ("f64", "f64")),
    ("add.u32", "u32", ("u32", "u32")), ("sub.s64", "s64", ("s64", "s64")),
    ("mul.lo.s32", "s32", ("s32", "s32")), ("mad.lo.u16", "u16", ("u16",) * 3),
    ("min.s32", "s32", ("s32", "s32")), ("max.u64", "u64", ("u64", "u64")),
    ("min.s16", "s16", ("s16", "s16")),
]
_DT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f16x2": 32, "bf16x2": 32, "u16": 16,
         "s16": 16, "b16": 16, "u32": 32, "s32": 32, "u64": 64, "s64": 64}


def _fast_and_generic(text, nsrc):
    spec, typ, mods = decode(text, all_ops())

    def generic(*s):
        o = spec.fn(list(s), type=typ, **mods)
        return o[0] if isinstance(o, tuple) else o

    f = spec.specialize(typ, mods, nsrc, generic)
    assert f is not None, f"{text} has no fast path"
    return f, generic


def test_h100_alu_fixture_through_the_fast_paths():
    bad, meta = check_fixture(FIXTURE, fast=True)
    assert bad == {}, f"fast paths disagreeing with the H100: {bad}"
    assert meta["fast"] >= 120  # the forms above and their siblings are in the fixture


@pytest.mark.parametrize("text,dst,srcs", FAST_FORMS)
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_fast_path_equals_general_path(text, dst, srcs, seed):
    """Adversarial words (NaN payloads, subnormals, Inf, ties, extremes: the hardware run's
    generator), register arrays and immediates (NumPy scalars) mixed."""
    f, generic = _fast_and_generic(text, len(srcs))
    w = inputs(Case(text, (dst,), srcs), 256, seed)
    cols = [w[:, k].astype(_DT[_BITS[s]]).reshape(8, 32) for k, s in enumerate(srcs)]
    with np.errstate(all="ignore"):
        assert np.array_equal(f(*cols), generic(*cols))
        for k in range(len(cols)):  # operand k an immediate, or the same lanes in every warp
            c = list(cols)
            c[k] = c[k].dtype.type(c[k][3, 5])
            assert np.array_equal(f(*c), generic(*c)), k
            c[k] = np.broadcast_to(cols[k][3], cols[k].shape)
            assert np.array_equal(f(*c), generic(*c)), k


def _exact_f16(q):
    """Round an exact non-zero Fraction to f16 bits (ties to even, overflow to Inf), from the
    IEEE rules."""
    from fractions import Fraction
    sign = 0x8000 if q < 0 else 0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, -14)  # 2**e <= a < 2**(e+1), or the subnormal range's quantum
    n = a / Fraction(2) ** (e - 10)
    m = n.numerator // n.denominator
    r = n - m
    if r > Fraction(1, 2) or r == Fraction(1, 2) and m % 2:
        m += 1
    v = Fraction(m) * Fraction(2) ** (e - 10)
    if v > 65504:
        return sign | 0x7C00
    return sign | int(np.array(float(v), np.float16).view(np.uint16))


@SETTINGS
@given(st.data())
def test_f16_fma_with_wide_exponent_gaps_is_correctly_rounded(data):
    """a*b + c where one addend lies far below the other's last place (the cases a float64
    sum rounds): the fast path equals the exact result, rounded here from Fractions."""
    from fractions import Fraction
    f, _ = _fast_and_generic("fma.rn.f16", 3)
    tiny = st.integers(1, 0x03FF) | st.integers(0x0400, 0x0BFF)  # subnormals, small normals
    big = st.integers(0x5000, 0x7BFF)
    words = [data.draw(st.lists(big | tiny, min_size=3, max_size=3)) for _ in range(64)]
    signs = [data.draw(st.lists(st.booleans(), min_size=3, max_size=3)) for _ in range(64)]
    w = np.array([[x | (0x8000 if s else 0) for x, s in zip(r, sg)] for r, sg in zip(words, signs)],
                 np.uint16)
    with np.errstate(all="ignore"):
        got = f(w[:, 0], w[:, 1], w[:, 2])
    for i, (a, b, c) in enumerate(w):
        v = [Fraction(float(np.array(x, np.uint16).view(np.float16))) for x in (a, b, c)]
        want = _exact_f16(v[0] * v[1] + v[2])
        if want & 0x7FFF == 0:  # exact zero: +0 unless both addends are -0 (RN)
            continue
        assert int(got[i]) == want, (hex(a), hex(b), hex(c))


def test_bf16_fma_midpoint_product_with_a_tiny_addend():
    """3 * 1.0078125 = 3.0234375 lies exactly between two bf16 values; an addend of +-2**-100
    (lost in a float64 sum) decides the rounding both ways."""
    f, _ = _fast_and_generic("fma.rn.bf16x2", 3)
    a, b = np.uint32(0x40404040), np.uint32(0x3F813F81)
    c = np.array([0x0D808D80, 0x8D800D80, 0x00000000], np.uint32)  # (hi, lo): +-tiny, 0
    got = f(np.full(3, a), np.full(3, b), c)
    assert [hex(int(x)) for x in got] == ["0x40424041", "0x40414042", "0x40424042"]


def test_f32_ftz_results_at_the_bottom_of_the_normal_range():
    """(1 - 2**-24) * 2**-126 = 2**-126 - 2**-150 rounds (ties to even) to 2**-126 in float32,
    yet is tiny after rounding to 24 bits with an unbounded exponent: .ftz flushes it."""
    f, generic = _fast_and_generic("mul.ftz.f32", 2)
    a = np.array([0x3F7FFFFF, 0x3F800000, 0x3F7FFFFF, 0x40000000], np.uint32)
    b = np.array([0x00800000, 0x00800000, 0x80800000, 0x00400000], np.uint32)
    want = [0x00000000, 0x00800000, 0x80000000, 0x00000000]  # last: a subnormal input
    assert [int(x) for x in f(a, b)] == want == [int(x) for x in generic(a, b)]
    assert [int(x) for x in f(a[1:2], b[1:2])] == [0x00800000]


def test_chunked_matches_whole_batch_and_keeps_odd_shapes():
    calls = []

    def f(a, b):
        calls.append(np.shape(a))
        return a * 3 + b

    g = chunks.chunked(f)
    a = np.arange(2100 * 32, dtype=np.uint32).reshape(2100, 32)
    assert np.array_equal(g(a, np.uint32(7)), a * 3 + 7)
    assert calls[0] == (chunks.CHUNK_WARPS, 32) and len(calls) == 5
    b = a.reshape(3, 700, 32)
    assert np.array_equal(g(b, b), b * 4)
    calls.clear()
    assert np.array_equal(g(a[:10], np.uint32(1)), a[:10] * 3 + 1) and calls == [(10, 32)]
    odd = np.arange(3000 * 2, dtype=np.uint32).reshape(3000, 2)  # not registers: whole
    calls.clear()
    assert np.array_equal(g(odd, odd), odd * 4) and calls == [(3000, 2)]


def test_chunked_f16x2_batch_through_the_machine():
    """A batch large enough to be sliced, against the general path on the same words."""
    rng = np.random.default_rng(5)
    n = chunks.CHUNK_WARPS * 2 + 37
    w = Warp(batch=n)
    x = {r: rng.integers(0, 2**32, (n, 32), dtype=np.uint64).astype(np.uint32) for r in ("%r1", "%r2", "%r3")}
    x["%r2"][::3] = 0x7C017E00  # NaN payloads in both halves
    for r, v in x.items():
        w[r] = v
    w.execute("fma.rn.f16x2 %r4, %r1, %r2, %r3; sub.f16x2 %r5, %r1, 0x3C00BC00")
    fma, _, mods4 = decode("fma.rn.f16x2", all_ops())
    sub, _, mods5 = decode("sub.f16x2", all_ops())
    with np.errstate(all="ignore"):
        want4 = fma.fn([x["%r1"], x["%r2"], x["%r3"]], type="f16x2", **mods4)
        want5 = sub.fn([x["%r1"], np.uint32(0x3C00BC00)], type="f16x2", **mods5)
    assert np.array_equal(w["%r4"], want4) and np.array_equal(w["%r5"], want5)


# --------------------------------------------------------------------------------------------
# memory: the one-gather paths against the general (per-byte) paths
# --------------------------------------------------------------------------------------------
class _Plain(FlatMemory):
    """A FlatMemory the fast paths do not recognise (they require the exact class)."""


def _run_both(body, batch, smem, regs):
    out = []
    for cls in (FlatMemory, _Plain):
        w = Warp(batch=batch)
        for k, v in regs.items():
            w[k] = v
        mem = cls("shared", smem.shape[-1], (batch,) if batch else (), window=0x0000_1000_0000_0000)
        mem.fill(smem, per_warp=bool(batch))
        w.run(body, shared=mem)
        out.append((w, mem.data.copy()))
    return out


@pytest.mark.parametrize("trans", ["", ".trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_ldmatrix_stmatrix_fast_equals_general(trans, num, seed):
    rng = np.random.default_rng(seed)
    batch = 3
    smem = rng.integers(0, 256, (batch, 1024), dtype=np.uint64).astype(np.uint8)
    rows = rng.integers(0, 1024 // 16, (batch, 32)).astype(np.uint32) * 16
    dst = rng.integers(0, 1024 // 16, (batch, 32)).astype(np.uint32) * 16
    dst[:, 5] = dst[:, 9]  # two lanes store the same row: the higher lane wins
    regs = {"%r1": rows, "%r2": dst}
    vec = ", ".join(f"%r{10 + j}" for j in range(num))
    body = (f".reg .b32 %r<20>;\nldmatrix.sync.aligned.m8n8.x{num}{trans}.shared.b16 {{{vec}}}, [%r1];\n"
            f"stmatrix.sync.aligned.m8n8.x{num}{trans}.shared.b16 [%r2], {{{vec}}};")
    (fast, mf), (slow, ms) = _run_both(body, batch, smem, regs)
    for j in range(num):
        assert np.array_equal(fast[f"%r{10 + j}"], slow[f"%r{10 + j}"])
    assert np.array_equal(mf, ms)


@pytest.mark.parametrize("t,vec", [("u32", 1), ("b16", 1), ("u8", 1), ("b64", 1), ("b32", 2),
                                   ("b32", 4), ("u16", 4), ("b64", 2)])
def test_ld_st_fast_equals_general(t, vec):
    rng = np.random.default_rng(vec)
    nb = {"u8": 1, "b16": 2, "u16": 2, "u32": 4, "b32": 4, "b64": 8}[t]
    size = nb * vec
    smem = rng.integers(0, 256, (2, 512), dtype=np.uint64).astype(np.uint8)
    addr = rng.integers(0, 512 // size, (2, 32)).astype(np.uint32) * size
    addr[:, 3] = addr[:, 30]
    reg = {1: "%rs", 2: "%rs", 4: "%r", 8: "%rd"}[nb]
    decl = {1: ".reg .b16 %rs<20>;", 2: ".reg .b16 %rs<20>;", 4: ".reg .b32 %r<20>;",
            8: ".reg .b64 %rd<20>;"}[nb]
    names = [f"{reg}{10 + k}" for k in range(vec)]
    v = "{" + ", ".join(names) + "}" if vec > 1 else names[0]
    vq = f".v{vec}" if vec > 1 else ""
    body = (f"{decl}\nld.shared{vq}.{t} {v}, [%r1];\n"
            f"st.shared{vq}.{t} [%r2+{size}], {v};")
    if nb != 4:
        body = ".reg .b32 %r<4>;\n" + body
    regs = {"%r1": addr, "%r2": (addr + size * 3) % (512 - size)}
    regs["%r2"] -= regs["%r2"] % size
    (fast, mf), (slow, ms) = _run_both(body, 2, smem, regs)
    for n in names:
        assert np.array_equal(fast[n], slow[n])
    assert np.array_equal(mf, ms)


def test_fast_memory_paths_raise_the_general_errors():
    w = Warp(batch=2)
    a = np.full((2, 32), 16, np.uint32)
    a[1, 7] = 24  # misaligned row
    w["%r1"] = a
    with pytest.raises(MemoryError_, match=r"lane 7 accesses shared address 0x18, not aligned to 16 bytes \[warp 1\]$") as ei:
        w.run(".reg .b32 %r<8>;\nldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2, %r3, %r4, %r5}, [%r1];",
              shared=256)
    assert (ei.value.warp, ei.value.lanes, ei.value.address) == ((1,), (7,), 0x18)
    a = np.full((2, 32), 240, np.uint32)
    a[0, 2] = 256
    w["%r1"] = a
    with pytest.raises(MemoryError_, match=r"lane 2 accesses 4 bytes at shared address 0x100.* \[warp 0\]$"):
        w.run(".reg .b32 %r<8>;\nst.shared.u32 [%r1], %r1;", shared=256)


def test_memory_fast_paths_take_broadcast_address_registers():
    """A register holding the same lanes in every warp may be a broadcast view (zero strides);
    the one-gather paths must not depend on the address array's layout."""
    smem = np.arange(4 * 512, dtype=np.uint32).reshape(4, 512).view(np.uint8)
    addr = np.broadcast_to((np.arange(32, dtype=np.uint32) % 8) * 16, (4, 32))
    got = []
    for cls in (FlatMemory, _Plain):
        w = Warp(batch=4)
        w["%r1"] = addr
        mem = cls("shared", 2048, (4,), window=0x0000_1000_0000_0000)
        mem.fill(smem, per_warp=True)
        w.run(".reg .b32 %r<16>;\nld.shared.v2.u32 {%r7, %r8}, [%r1];\n"
              "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r3, %r4, %r5, %r6}, [%r1];\n"
              "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r1+256], {%r3, %r4, %r5, %r6};", shared=mem)
        got.append([w[f"%r{k}"] for k in range(3, 9)] + [mem.data.copy()])
    for x, y in zip(*got):
        assert np.array_equal(x, y)
