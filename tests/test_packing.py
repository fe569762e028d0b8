"""Register packing: pack_bits / unpack_bits / pack / unpack for every documented instruction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from warpsim.tensorcore import layouts as L
from warpsim.tensorcore import packing as P
from warpsim.errors import PtxError, ShapeError
from warpsim.facts.isa import iter_instructions

ALL = list(iter_instructions(None))
IDS = [str(i) for i in ALL]
CASES = [(ins, op) for ins in ALL for op in "abcd"]

HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def find(shape, atype, **kw):
    for ins in ALL:
        if ins.shape == shape and ins.atype == atype and all(getattr(ins, k) == v for k, v in kw.items()):
            return ins
    raise LookupError((shape, atype, kw))


def reg_bits(ins, op):
    return 64 if ins.type_of(op) == "f64" else 32


def word_dtype(ins, op):
    return np.uint64 if reg_bits(ins, op) == 64 else np.uint32


def full_shape(ins, op):
    rows, cols = ins.matrix_shape(op)
    return (4, rows, cols) if ins.quadpair else (rows, cols)


def random_words(rng, ins, op, batch):
    bits = reg_bits(ins, op)
    hi = np.iinfo(np.uint64).max if bits == 64 else 2**32 - 1
    return rng.integers(0, hi, size=batch + (32, ins.regs[op]), dtype=np.uint64, endpoint=True).astype(
        word_dtype(ins, op))


def random_codes(rng, ins, op, batch):
    w = L.code_bits(ins, op)
    hi = np.iinfo(np.uint64).max if w == 64 else 2**w - 1
    return rng.integers(0, hi, size=batch + full_shape(ins, op), dtype=np.uint64, endpoint=True)


def used_bits_mask(ins, op):
    """(32, nregs) mask of the bits that hold element codes (the rest is padding)."""
    rm = L.register_map(ins, op)
    w = L.code_bits(ins, op)
    mask = np.zeros((32, ins.regs[op]), dtype=object)
    for ln in range(32):
        for reg, lo in rm[ln].tolist():
            mask[ln, reg] |= ((1 << w) - 1) << lo
    return mask.astype(np.uint64).astype(word_dtype(ins, op))


def slow_unpack(ins, op, words):
    """Reference: one warp, element by element, from layout() and register_map()."""
    lay, rm, w = L.layout(ins, op), L.register_map(ins, op), L.code_bits(ins, op)
    out = np.zeros(full_shape(ins, op), dtype=np.uint64)
    for ln in range(32):
        for el in range(lay.shape[1]):
            r, c = lay[ln, el]
            reg, lo = rm[ln, el]
            v = (int(words[ln, reg]) >> int(lo)) & ((1 << w) - 1)
            if ins.quadpair:
                out[(ln >> 2) % 4, r, c] = v
            else:
                out[r, c] = v
    return out


# --------------------------------------------------------------------------------------------
# Exact bit positions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ins", ALL, ids=IDS)
def test_one_hot_positions(ins):
    """Each matrix position, set alone to all ones, lands exactly on its documented bits."""
    for op in "abcd":
        shape = full_shape(ins, op)
        n = int(np.prod(shape))
        w = L.code_bits(ins, op)
        ones = (1 << w) - 1
        codes = np.zeros((n, n), dtype=np.uint64)
        codes[np.arange(n), np.arange(n)] = ones
        words = P.pack_bits(ins, op, codes.reshape((n,) + shape))
        assert words.dtype == word_dtype(ins, op) and words.shape == (n, 32, ins.regs[op])
        expected = np.zeros_like(words)
        lay, rm = L.layout(ins, op), L.register_map(ins, op)
        lane = np.arange(32)[:, None]
        prod = (lane >> 2) % 4 if ins.quadpair else 0
        pos = ((prod * shape[-2] + lay[..., 0]) * shape[-1] + lay[..., 1]).ravel()
        lanes = np.broadcast_to(lane, lay.shape[:2]).ravel()
        dt = word_dtype(ins, op)
        expected[pos, lanes, rm[..., 0].ravel()] = (dt(ones) << rm[..., 1].ravel().astype(dt))
        np.testing.assert_array_equal(words, expected, err_msg=f"{ins} {op}")
        back = P.unpack_bits(ins, op, words)
        np.testing.assert_array_equal(back, codes.reshape((n,) + shape))


@pytest.mark.parametrize("ins", ALL, ids=IDS)
def test_unpack_matches_slow_reference(ins):
    rng = np.random.default_rng(abs(hash(str(ins))) % 2**32)
    for op in "abcd":
        words = random_words(rng, ins, op, ())
        np.testing.assert_array_equal(P.unpack_bits(ins, op, words), slow_unpack(ins, op, words))


def test_known_words():
    f16 = find((16, 8, 8), "f16", ctype="f16", dtype="f16")
    a = np.arange(16 * 8, dtype=np.uint16).reshape(16, 8)
    words = P.pack_bits(f16, "a", a)
    # lane 5: groupID 1, threadID_in_group 1 -> a0,a1 = A[1][2], A[1][3]; a2,a3 = A[9][2], A[9][3]
    assert words[5].tolist() == [(int(a[1, 3]) << 16) | int(a[1, 2]), (int(a[9, 3]) << 16) | int(a[9, 2])]
    e2m1 = find((16, 8, 32), "e2m1", kind="f8f6f4", btype="e2m1")
    a = np.zeros((16, 32), dtype=np.uint8)
    a[0, 0:4] = [0x1, 0x2, 0x3, 0xF]
    assert P.pack_bits(e2m1, "a", a)[0, 0] == (0x1 << 2) | (0x2 << 10) | (0x3 << 18) | (0xF << 26)
    # padding bits are dropped on the way in
    w = np.zeros((32, 4), dtype=np.uint32)
    w[0, 0] = 0xFFFFFFFF
    codes = P.unpack_bits(e2m1, "a", w)
    assert codes.dtype == np.uint8 and codes[0, :4].tolist() == [0xF] * 4
    mx = find((16, 8, 64), "e2m1", kind="mxf4")
    a = np.zeros((16, 64), dtype=np.uint8)
    a[0, :8] = np.arange(1, 9)
    assert P.pack_bits(mx, "a", a)[0, 0] == 0x87654321  # dense: 8 codes per register


# --------------------------------------------------------------------------------------------
# Round trips (hypothesis)
# --------------------------------------------------------------------------------------------

batch_shapes = st.lists(st.integers(0, 3), min_size=0, max_size=2).map(tuple)


@HYP
@given(case=st.sampled_from(CASES), batch=batch_shapes, seed=st.integers(0, 2**32 - 1))
def test_words_round_trip(case, batch, seed):
    ins, op = case
    rng = np.random.default_rng(seed)
    words = random_words(rng, ins, op, batch)
    keep = words.copy()
    codes = P.unpack_bits(ins, op, words)
    np.testing.assert_array_equal(words, keep)
    assert codes.shape == batch + full_shape(ins, op)
    w = L.code_bits(ins, op)
    assert codes.dtype == np.dtype({1: np.uint8, 4: np.uint8, 6: np.uint8, 8: np.uint8, 16: np.uint16,
                                    32: np.uint32, 64: np.uint64}[w])
    again = P.pack_bits(ins, op, codes)
    assert again.dtype == word_dtype(ins, op)
    np.testing.assert_array_equal(again, words & used_bits_mask(ins, op))


@HYP
@given(case=st.sampled_from(CASES), batch=batch_shapes, seed=st.integers(0, 2**32 - 1))
def test_codes_round_trip(case, batch, seed):
    ins, op = case
    rng = np.random.default_rng(seed)
    codes = random_codes(rng, ins, op, batch)
    keep = codes.copy()
    words = P.pack_bits(ins, op, codes)
    np.testing.assert_array_equal(codes, keep)
    assert words.shape == batch + (32, ins.regs[op])
    assert not (words & ~used_bits_mask(ins, op)).any()
    np.testing.assert_array_equal(P.unpack_bits(ins, op, words), codes)


@HYP
@given(case=st.sampled_from(CASES), batch=batch_shapes, seed=st.integers(0, 2**32 - 1))
def test_values_round_trip(case, batch, seed):
    formats = pytest.importorskip("warpsim.facts.formats")
    ins, op = case
    rng = np.random.default_rng(seed)
    ty = ins.type_of(op)
    values = formats.decode(random_codes(rng, ins, op, batch), ty)
    keep = values.copy()
    words = P.pack(ins, op, values)
    np.testing.assert_array_equal(values, keep)
    assert words.dtype == word_dtype(ins, op) and words.shape == batch + (32, ins.regs[op])
    back = P.unpack(ins, op, words)
    assert back.shape == values.shape
    assert back.dtype == (np.float64 if values.dtype.kind == "f" else np.int64)
    np.testing.assert_array_equal(back, values)
    if back.dtype.kind == "f":
        real = ~np.isnan(values)  # NaN payload/sign is canonicalized by encode
        np.testing.assert_array_equal(np.signbit(back)[real], np.signbit(values)[real])
    # values decoded from codes are representable: strict encoding accepts them
    np.testing.assert_array_equal(P.pack(ins, op, values, strict=True), words)


def test_pack_values_rounds():
    pytest.importorskip("warpsim.facts.formats")
    ins = find((16, 8, 16), "f16", ctype="f32", dtype="f32")
    m = np.full((16, 16), 1.0 + 2.0**-12)  # between two f16 values: rounds to 1.0
    assert (P.unpack(ins, "a", P.pack(ins, "a", m)) == 1.0).all()
    with pytest.raises(ValueError):
        P.pack(ins, "a", m, strict=True)
    c = np.arange(16 * 8, dtype=np.float64).reshape(16, 8) - 64
    np.testing.assert_array_equal(P.unpack(ins, "c", P.pack(ins, "c", c)), c)
    s8 = find((16, 8, 32), "s8", btype="s8")
    a = (np.arange(16 * 32).reshape(16, 32) % 256) - 128
    np.testing.assert_array_equal(P.unpack(s8, "a", P.pack(s8, "a", a)), a)


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def test_accepts_any_integer_array_like():
    ins = find((16, 8, 8), "f16", ctype="f32", dtype="f32")
    rng = np.random.default_rng(0)
    words = random_words(rng, ins, "a", ())
    want = P.unpack_bits(ins, "a", words)
    for alt in (words.astype(np.int64), words.astype(np.uint64), words.tolist()):
        np.testing.assert_array_equal(P.unpack_bits(ins, "a", alt), want)
    codes = want.astype(np.int32)
    np.testing.assert_array_equal(P.pack_bits(ins, "a", codes.tolist()), words)
    f64 = find((16, 8, 8), "f64")
    big = [[[2**64 - 1] * 4] * 32]  # Python ints beyond int64
    out = P.unpack_bits(f64, "a", big)
    assert out.dtype == np.uint64 and (out == np.uint64(2**64 - 1)).all()
    np.testing.assert_array_equal(P.pack_bits(f64, "a", out), np.array(big, dtype=np.uint64))


def test_quadpair_products_separate():
    ins = find((8, 8, 4), "f16", alayout="col", blayout="row", ctype="f16", dtype="f32")
    codes = np.zeros((4, 8, 4), dtype=np.uint16)
    codes[2, 5, 3] = 0xABCD
    words = P.pack_bits(ins, "a", codes)
    # A .col: row 5 = i%4 + 4 -> i = 1, high group; col 3 = lane % 4; product 2 -> lane 16+8+3
    nz = np.argwhere(words)
    assert nz.tolist() == [[27, 0]] and words[27, 0] == 0xABCD << 16
    with pytest.raises(ShapeError, match=r"\(\.\.\., 4, 8, 4\)"):
        P.pack_bits(ins, "a", np.zeros((8, 4), dtype=np.uint16))
    assert P.matrix_shape(ins, "d") == (4, 8, 8)
    assert P.unpack_bits(ins, "c", np.zeros((32, 4), np.uint32)).shape == (4, 8, 8)
    assert P.unpack_bits(ins, "d", np.zeros((5, 32, 8), np.uint32)).shape == (5, 4, 8, 8)


def test_errors():
    ins = find((16, 8, 16), "f16", ctype="f32", dtype="f32")
    good = np.zeros((32, 4), dtype=np.uint32)
    with pytest.raises(ShapeError, match=r"\(\.\.\., 32, 4\).*\(31, 4\)"):
        P.unpack_bits(ins, "a", np.zeros((31, 4), np.uint32))
    with pytest.raises(ShapeError, match="32, 4"):
        P.unpack_bits(ins, "a", np.zeros((32, 3), np.uint32))
    with pytest.raises(ShapeError):
        P.unpack_bits(ins, "a", np.zeros(32, np.uint32))
    with pytest.raises(TypeError, match="float"):
        P.unpack_bits(ins, "a", good.astype(np.float32))
    with pytest.raises(TypeError):
        P.unpack_bits(ins, "a", good.astype(bool))
    with pytest.raises(ShapeError, match="-1"):
        P.unpack_bits(ins, "a", np.full((32, 4), -1, np.int64))
    with pytest.raises(ShapeError, match=str(2**32)):
        P.unpack_bits(ins, "a", np.full((32, 4), 2**32, np.int64))
    with pytest.raises(ShapeError, match=r"16, 16.*\(16, 8\)"):
        P.pack_bits(ins, "a", np.zeros((16, 8), np.uint16))
    with pytest.raises(ShapeError, match="65536"):
        P.pack_bits(ins, "a", np.full((16, 16), 65536, np.int64))
    with pytest.raises(ShapeError):
        P.pack_bits(ins, "a", np.full((16, 16), -1, np.int64))
    with pytest.raises(TypeError):
        P.pack_bits(ins, "a", np.zeros((16, 16), np.float64))
    s4 = find((16, 8, 32), "s4")
    with pytest.raises(ShapeError):
        P.pack_bits(s4, "a", np.full((16, 32), 16, np.uint8))  # codes are raw 4-bit patterns
    with pytest.raises(PtxError, match="'e'.*'a'"):
        P.unpack_bits(ins, "e", good)
    with pytest.raises(ShapeError):
        P.pack(ins, "a", np.zeros((16, 8)))
    with pytest.raises(TypeError):
        P.unpack_bits(ins, "a", np.array([[object()] * 4] * 32))


def test_read_only_inputs_work():
    ins = find((16, 8, 32), "s8", btype="s8")
    words = np.arange(32 * 4, dtype=np.uint32).reshape(32, 4)
    words.setflags(write=False)
    codes = P.unpack_bits(ins, "a", words)
    codes.setflags(write=False)
    np.testing.assert_array_equal(P.pack_bits(ins, "a", codes), words)


def test_strings():
    pytest.importorskip("warpsim.tensorcore.decode")
    text = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    ins = find((16, 8, 32), "s8", btype="s8", satfinite=False)
    w = np.arange(32 * 4, dtype=np.uint32).reshape(32, 4)
    np.testing.assert_array_equal(P.unpack_bits(text, "a", w), P.unpack_bits(ins, "a", w))


def test_large_batch_vectorized():
    """10,000 warps of m16n8k16 A in one call (one gather + shift; no per-warp loop)."""
    ins = find((16, 8, 16), "f16", ctype="f32", dtype="f32")
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**32, size=(10_000, 32, 4), dtype=np.uint64).astype(np.uint32)
    codes = P.unpack_bits(ins, "a", words)
    assert codes.shape == (10_000, 16, 16) and codes.dtype == np.uint16
    for k in (0, 4321, 9999):
        np.testing.assert_array_equal(codes[k], slow_unpack(ins, "a", words[k]))
    np.testing.assert_array_equal(P.pack_bits(ins, "a", codes), words)


def test_pack_strict_and_out_of_range_rule():
    # Documented rule: round to nearest even; no-Inf types saturate (cvt.rn.satfinite), types
    # with Inf overflow (IEEE); strict=True refuses any value that would change.
    import warpsim
    from warpsim.errors import FormatError

    ins = "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32"
    A = np.full((16, 16), 2.0)
    for v, want in ((449.0, 448.0), (464.0, 448.0), (465.0, 448.0), (1e9, 448.0), (-511.0, -448.0)):
        A[3, 5] = v
        assert warpsim.unpack(ins, "a", warpsim.pack(ins, "a", A))[3, 5] == want
    A[3, 5] = 449.0
    with pytest.raises(FormatError, match="rounds to the largest finite value 448"):
        warpsim.pack(ins, "a", A, strict=True)
    A[3, 5] = 500.0
    with pytest.raises(FormatError, match="would saturate"):
        warpsim.pack(ins, "a", A, strict=True)
    A[3, 5] = 448.0
    assert np.array_equal(warpsim.pack(ins, "a", A, strict=True), warpsim.pack(ins, "a", A))
    e5 = "mma.sync.aligned.m16n8k16.row.col.f32.e5m2.e5m2.f32"
    A[3, 5] = 1e6
    assert warpsim.unpack(e5, "a", warpsim.pack(e5, "a", A))[3, 5] == np.inf
    with pytest.raises(FormatError, match="overflow to Inf"):
        warpsim.pack(e5, "a", A, strict=True)
