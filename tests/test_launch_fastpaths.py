"""Launch fast paths: whole accesses of global ld/st/cp.async (GlobalMemory.units), mov pack/unpack,
mul/mad.wide, selp, max/min.f32, bfe with constant fields, lazily made special registers:
the same bits and errors as the general paths."""

import numpy as np
import pytest

from warpsim import Warp
from warpsim.ptx.memory import GLOBAL_BASE, FlatMemory, GlobalMemory, MemoryError_


class _PlainGlobal(GlobalMemory):
    """A GlobalMemory the fast paths do not recognise (they require the exact class)."""


class _PlainFlat(FlatMemory):
    pass


def _globals(cls, rng):
    g = cls()
    a = g.alloc(rng.integers(0, 256, 4096, dtype=np.uint64).astype(np.uint8))
    b = g.alloc(rng.integers(0, 256, 1000, dtype=np.uint64).astype(np.uint8))
    return g, a, b


def _run(body, regs, fast, seed=0, batch=2):
    rng = np.random.default_rng(seed)
    g, a, b = _globals(GlobalMemory if fast else _PlainGlobal, rng)
    sh = (FlatMemory if fast else _PlainFlat)("shared", 1024, (batch,), window=0x0000_1000_0000_0000)
    w = Warp(batch=batch)
    for k, v in regs(a, b).items():
        w[k] = v
    w.run(body, shared=sh, global_memory=g)
    return w, g.data.copy(), sh.data.copy()


@pytest.mark.parametrize("t,vec", [("u32", 1), ("b16", 1), ("u8", 1), ("b64", 1), ("b32", 2),
                                   ("b32", 4), ("b64", 2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_global_ld_st_fast_equals_general(t, vec, seed):
    nb = {"u8": 1, "b16": 2, "u32": 4, "b32": 4, "b64": 8}[t]
    size = nb * vec
    reg = {1: "%rs", 2: "%rs", 4: "%r", 8: "%rd"}[nb]
    names = [f"{reg}{10 + k}" for k in range(vec)]
    v = "{" + ", ".join(names) + "}" if vec > 1 else names[0]
    vq = f".v{vec}" if vec > 1 else ""
    body = (".reg .b16 %rs<20>; .reg .b32 %r<20>; .reg .b64 %rd<20>;\n"
            f"ld.global{vq}.{t} {v}, [%rd1];\nst.global{vq}.{t} [%rd2], {v};")

    def regs(a, b):
        rng = np.random.default_rng(seed + 10)
        src = a + rng.integers(0, 4096 // size, (2, 32)).astype(np.uint64) * size
        dst = b + rng.integers(0, 1000 // size, (2, 32)).astype(np.uint64) * size
        dst[1, 4] = dst[0, 9]  # two lanes of two warps store the same item: the later one wins
        dst[0, 3] = dst[0, 30]
        return {"%rd1": src, "%rd2": dst}
    (fw, fg, _), (sw, sg, _) = _run(body, regs, True, seed), _run(body, regs, False, seed)
    for n in names:
        assert np.array_equal(fw[n], sw[n])
    assert np.array_equal(fg, sg)
    assert not np.array_equal(fg, _globals(GlobalMemory, np.random.default_rng(seed))[0].data)


def test_cp_async_fast_equals_general_with_and_without_src_size():
    body = (".reg .b32 %r<20>; .reg .b64 %rd<20>;\n"
            "cp.async.cg.shared.global [%r1], [%rd1], 16;\n"
            "cp.async.cg.shared.global [%r1+512], [%rd1], 16, %r3;\n"
            "cp.async.ca.shared.global [%r2], [%rd2], 8, 8;\n"
            "cp.async.commit_group;\ncp.async.wait_all;")

    def regs(a, b):
        rng = np.random.default_rng(3)
        return {"%rd1": a + rng.integers(0, 4096 // 16, (2, 32)).astype(np.uint64) * 16,
                "%rd2": b + rng.integers(0, 1000 // 8, (2, 32)).astype(np.uint64) * 8,
                "%r1": rng.permutation(32).astype(np.uint32)[None].repeat(2, 0) * 16,
                "%r2": 768 + rng.integers(0, 32, (2, 32)).astype(np.uint32) * 8,
                "%r3": np.where(rng.random((2, 32)) < 0.5, 16, 5).astype(np.uint32)}
    (_, _, fs), (_, _, ss) = _run(body, regs, True), _run(body, regs, False)
    assert np.array_equal(fs, ss) and fs.any()


def test_an_access_across_two_buffers_still_checks_every_lane():
    """Addresses inside different buffers take the general path; one in the gap raises as ever."""
    body = ".reg .b32 %r<20>; .reg .b64 %rd<20>;\nld.global.u32 %r5, [%rd1];"

    def regs(a, b):
        r = np.full((2, 32), a, np.uint64)
        r[1] = b + 4 * np.arange(32, dtype=np.uint64)
        return {"%rd1": r}
    (fw, _, _), (sw, _, _) = _run(body, regs, True), _run(body, regs, False)
    assert np.array_equal(fw["%r5"], sw["%r5"])

    def gap(a, b):
        r = np.full((2, 32), a, np.uint64)
        r[0, 6] = a + 4096  # past the end of the first buffer
        return {"%rd1": r}
    for fast in (True, False):
        with pytest.raises(MemoryError_, match=r"lane 6 accesses 4 bytes at global address .* outside "
                                               r"every allocated buffer") as e:
            _run(body, gap, fast)
        assert e.value.lanes == (6,) and e.value.warp == (0,)
    g = GlobalMemory()
    assert g.units(np.full((1, 32), GLOBAL_BASE, np.uint64), 4) is None  # nothing allocated


@pytest.mark.parametrize("t,parts,reg", [("b32", 2, "%rs"), ("b64", 2, "%r"), ("b64", 4, "%rs")])
def test_mov_pack_unpack_fast_equal_shifts(t, parts, reg):
    decl = ".reg .b16 %rs<12>; .reg .b32 %r<12>; .reg .b64 %rd<4>;\n"
    wide = "%rd1" if t == "b64" else "%r9"
    ew = {"b32": 32, "b64": 64}[t] // parts
    rng = np.random.default_rng(parts)
    vals = [rng.integers(0, 1 << ew, (3, 32), dtype=np.uint64) for _ in range(parts)]
    w = Warp(batch=3)
    for k, v in enumerate(vals):
        w[f"{reg}{k}"] = v
    items = ", ".join(f"{reg}{k}" for k in range(parts))
    back = ", ".join(f"{reg}{4 + k}" for k in range(parts))
    sink = ", ".join(["_"] + [f"{reg}{8 + k}" for k in range(1, parts)])
    w.run(decl + f"mov.{t} {wide}, {{{items}}};\nmov.{t} {{{back}}}, {wide};\nmov.{t} {{{sink}}}, {wide};")
    want = sum(v << np.uint64(ew * k) for k, v in enumerate(vals))
    assert np.array_equal(w[wide].astype(np.uint64), want)
    for k in range(parts):
        assert np.array_equal(w[f"{reg}{4 + k}"].astype(np.uint64), vals[k])
        if k:
            assert np.array_equal(w[f"{reg}{8 + k}"].astype(np.uint64), vals[k])
    w2 = Warp(batch=3)  # an immediate among the parts takes the shifts: same word
    for k in range(1, parts):
        w2[f"{reg}{k}"] = vals[k]
    imm = ", ".join(["7"] + [f"{reg}{k}" for k in range(1, parts)])
    w2.run(decl + f"mov.{t} {wide}, {{{imm}}};")
    assert np.array_equal(w2[wide].astype(np.uint64), want - vals[0] + np.uint64(7))


@pytest.mark.parametrize("is_max", [True, False])
def test_minmax_f32_fast_path_equals_the_general_rule(is_max):
    """max/min.f32 through NumPy's fmax/fmin where no operand pair needs the special rules
    (both NaN, or +0 against -0): bit for bit what the general path gives."""
    from warpsim.ptx.ops.floating import _minmax

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    finite = bits & np.uint32(0xBFFFFFFF)  # exponent below all-ones: no NaN or Inf
    finite[::7] &= np.uint32(0x807FFFFF)  # subnormals and zeros
    special = np.array([0, 0x80000000, 0x7FC00000, 0x7F800001, 0xFFC00001, 0x7F800000,
                        0xFF800000, 1, 0x80000001], np.uint32)
    nan2 = np.array([0x7FC00000], np.uint32)  # a NaN pair sends a call down the general path
    for a, b in [(finite[:2000], finite[2000:]), (finite[:2000], finite[:2000] ^ np.uint32(0x80000000)),
                 (np.repeat(special, 9), np.tile(special, 9)), (finite[:2000], np.repeat(special, 223)[:2000])]:
        fast = _minmax([a, b], type="f32", is_max=is_max)
        ref = _minmax([np.concatenate([a, nan2]), np.concatenate([b, nan2])], type="f32", is_max=is_max)
        assert fast.dtype == np.uint32 and np.array_equal(fast, ref[:-1])
    z = _minmax([np.array([0x80000000], np.uint32), np.array([0], np.uint32)], type="f32", is_max=is_max)
    assert int(z[0]) == (0 if is_max else 0x80000000)


@pytest.mark.parametrize("text,nsrc", [("mul.wide.s32", 2), ("mul.wide.u32", 2), ("mul.wide.s16", 2),
                                       ("mul.wide.u16", 2), ("mad.wide.s32", 3), ("mad.wide.u32", 3),
                                       ("mad.wide.s16", 3), ("mad.wide.u16", 3), ("selp.b32", 3),
                                       ("selp.f64", 3), ("selp.u16", 3)])
def test_wide_and_selp_fast_paths_equal_the_general_ones(text, nsrc):
    """Extremes, random words, immediates (NumPy scalars) and c of the wrong width (generic)."""
    from warpsim.validation.alu_compare import all_ops, decode

    spec, typ, mods = decode(text, all_ops())

    def generic(*s):
        o = spec.fn(list(s), type=typ, **mods)
        return o[0] if isinstance(o, tuple) else o

    f = spec.specialize(typ, mods, nsrc, generic)
    assert f is not None
    bits = int(typ.lstrip("bfsu"))
    dt = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    wdt = {16: np.uint32, 32: np.uint64}.get(bits, dt)
    rng = np.random.default_rng(bits + nsrc)
    ext = np.array([0, 1, (1 << bits) - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1], np.uint64)
    a = np.concatenate([ext.repeat(5), rng.integers(0, 1 << bits, 231, dtype=np.uint64)]).astype(dt)
    b = np.concatenate([np.tile(ext, 5), rng.integers(0, 1 << bits, 231, dtype=np.uint64)]).astype(dt)
    a, b = a.reshape(8, 32), b.reshape(8, 32)
    if text.startswith("selp"):
        third = [rng.random((8, 32)) < 0.5, np.bool_(True)]
    else:
        c = rng.integers(0, 1 << 63, (8, 32), dtype=np.uint64).astype(wdt)
        third = [c, wdt(c[2, 3]), c.astype(np.uint64) if wdt != np.uint64 else c.astype(np.uint32)]
    args = [(a, b), (a, dt(b[1, 1])), (dt(a[0, 7]), b)]
    for x, y in args:
        if nsrc == 2:
            got, want = np.asarray(f(x, y)), np.asarray(generic(x, y))
            assert got.dtype == want.dtype and np.array_equal(got, want)
            continue
        for z in third:
            got, want = np.asarray(f(x, y, z)), np.asarray(generic(x, y, z))
            assert got.dtype == want.dtype and np.array_equal(got, want), (text, z.dtype)


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_bfe_with_constant_position_and_length_equals_the_bit_by_bit_rule(t):
    """bfe with scalar pos/len (a shift and a mask) against the per-bit general rule (which
    the H100 fixture checks), over every position and length around the word's edges."""
    from warpsim.ptx.ops import logic

    w = int(t[1:])
    ut = {32: np.uint32, 64: np.uint64}[w]
    rng = np.random.default_rng(w)
    a = rng.integers(0, 1 << 63, 64, dtype=np.uint64).astype(ut)
    a[:8] |= ut(1 << (w - 1))  # top bit set: sign extension from the top
    a[8] = 0
    ones = np.ones(64, np.int64)
    for p in list(range(0, w + 3)) + [255, 256, 300]:
        for n in list(range(0, w + 3)) + [255, 256]:
            fast = logic._bfe([a, np.uint32(p), np.uint32(n)], type=t)
            slow = logic._bfe([a, p * ones, n * ones], type=t)  # per-lane pos/len: general path
            assert fast.dtype == slow.dtype == ut and np.array_equal(fast, slow), (p, n)


def test_a_context_refuses_special_registers_of_another_batch():
    """Special registers are made on first read; their names and shapes are checked up front."""
    from warpsim.errors import PtxError
    from warpsim.ptx.machine import Context

    ctx = Context({}, (3,), specials={"%ctaid.x": np.arange(3, dtype=np.uint32)[:, None], "%ntid.x": 64})
    assert ctx.specials["%ctaid.x"].shape == (3, 32) and int(ctx.specials["%ctaid.x"][2, 7]) == 2
    assert int(ctx.specials["%clusterid.x"][1, 0]) == 1  # no explicit cluster: a CTA's own
    with pytest.raises(ValueError, match="do not broadcast"):
        Context({}, (3,), specials={"%ctaid.x": np.zeros((4, 1), np.uint32)})
    with pytest.raises(PtxError, match="unknown special register %foo"):
        Context({}, (3,), specials={"%foo": 1})
