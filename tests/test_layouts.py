"""Fragment layouts against the PTX ISA formulas, written out here independently per shape/type."""

from __future__ import annotations

import numpy as np
import pytest

from warpsim.tensorcore import layouts as L
from warpsim.errors import PtxError, ShapeError, WarpsimError
from warpsim.facts.isa import Instruction, iter_instructions

ALL = list(iter_instructions(None))
IDS = [str(i) for i in ALL]

WIDTH = {"f64": 64, "f32": 32, "tf32": 32, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "e3m2": 6,
         "e2m3": 6, "e2m1": 4, "s32": 32, "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1}
EIGHT_BIT = ("s8", "u8", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1")


def find(shape, atype, **kw):
    for ins in ALL:
        if ins.shape == shape and ins.atype == atype and all(getattr(ins, k) == v for k, v in kw.items()):
            return ins
    raise LookupError((shape, atype, kw))


def ptx_position(ins: Instruction, op: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of element i of lane's fragment, transcribed from the PTX ISA formulas."""
    g, t = lane >> 2, lane % 4
    m, n, k = ins.shape
    ty = ins.type_of(op)
    if op in "cd":
        if ins.quadpair:
            hi = 4 if lane >= 16 else 0
            if ty == "f16":
                return (t + hi, i)
            x = (lane & 0b1) + (i & 0b10)
            return (x + hi, (i & 0b100) + (lane & 0b10) + (i & 0b1))
        if m == 8:
            return (g, t * 2 + (i & 1))
        return (g if i < 2 else g + 8, t * 2 + (i & 1))
    if ins.quadpair:
        hi = lane >= 16
        lay = ins.alayout if op == "a" else ins.blayout
        if op == "a" and lay == "row":
            return (t + 4 * hi, i)
        if op == "a":
            return (i % 4 + 4 * hi, t)
        if lay == "row":
            return (t, i + 4 * hi)
        return (i, t + 4 * hi)
    a = op == "a"
    shape = (m, n, k)
    if shape == (8, 8, 4):  # f64
        return (lane >> 2, lane % 4) if a else (lane % 4, lane >> 2)
    if shape == (8, 8, 16):
        return (g, 4 * t + i) if a else (4 * t + i, g)
    if shape == (8, 8, 32):
        return (g, 8 * t + i) if a else (8 * t + i, g)
    if shape == (8, 8, 128):
        return (g, 32 * t + i) if a else (32 * t + i, g)
    if shape == (16, 8, 4):
        return (g if i == 0 else g + 8, t) if a else (t, g)
    if shape == (16, 8, 8):
        if ty in ("f16", "bf16"):
            return (g if i < 2 else g + 8, 2 * t + (i & 1)) if a else (2 * t + i, g)
        # tf32, f64
        if a:
            return (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)
        return (t if i == 0 else t + 4, g)
    if shape == (16, 8, 16):
        if ty in ("f16", "bf16"):
            if a:
                return (g if (0 <= i < 2 or 4 <= i < 6) else g + 8, 2 * t + (i & 1) + (8 if i >= 4 else 0))
            return (2 * t + (i & 1) + (8 if i >= 2 else 0), g)
        if ty == "f64":
            if a:
                return (g if i % 2 == 0 else g + 8, 2 * i + t if i % 2 == 0 else 2 * i - 2 + t)
            return (t + 4 * i, g)
        # s8 / u8 / e4m3 / e5m2
        return (g if i < 4 else g + 8, 4 * t + (i & 3)) if a else (4 * t + i, g)
    if shape == (16, 8, 32):
        if ty in ("s4", "u4"):
            return (g if i < 8 else g + 8, 8 * t + (i & 7)) if a else (8 * t + (i & 7), g)
        assert ty in EIGHT_BIT
        if a:
            return (g if (0 <= i < 4 or 8 <= i < 12) else g + 8, 4 * t + (i & 3) + (16 if i >= 8 else 0))
        return (4 * t + (i & 3) + (16 if i >= 4 else 0), g)
    if shape == (16, 8, 64):  # s4 / u4 / e2m1 (dense)
        if a:
            return (g if (0 <= i < 8 or 16 <= i < 24) else g + 8, 8 * t + (i & 7) + (32 if i >= 16 else 0))
        return (8 * t + (i & 7) + (32 if i >= 8 else 0), g)
    if shape == (16, 8, 128):
        return (g if i < 32 else g + 8, 32 * t + (i & 31)) if a else (32 * t + i, g)
    if shape == (16, 8, 256):
        if a:
            # The PTX text prints "(threadID_in_group * 32) + i for i < 64"; read literally that is
            # not a bijection (row g+8 would miss columns 0..31 and hit 128..159 twice).  The
            # m16n8k128 section and the figure use (i & 0x1F), as here.
            return (g if (0 <= i < 32 or 64 <= i < 96) else g + 8,
                    32 * t + (i & 31) + (128 if i >= 64 else 0))
        return (32 * t + (i & 31) + (128 if i >= 32 else 0), g)
    raise AssertionError(f"no PTX formula transcribed for {ins}")


def ptx_elements_per_lane(ins: Instruction, op: str) -> int:
    m, n, k = ins.shape
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[op]
    return rows * cols // (8 if ins.quadpair else 32)


def ptx_packing(ins: Instruction, op: str) -> tuple[int, int, int]:
    """(elements per register, slot bits, code offset inside the slot) from the PTX text."""
    ty = ins.type_of(op)
    if ty == "f64":
        return 1, 64, 0
    if op in "ab" and ins.kind in ("f8f6f4", "mxf8f6f4"):
        return 4, 8, 2 if ty == "e2m1" else 0
    return 32 // WIDTH[ty], WIDTH[ty], 0


def expected_layout(ins, op):
    epl = ptx_elements_per_lane(ins, op)
    return np.array([[ptx_position(ins, op, ln, i) for i in range(epl)] for ln in range(32)], dtype=np.int64)


def expected_regmap(ins, op):
    epl = ptx_elements_per_lane(ins, op)
    epr, slot, off = ptx_packing(ins, op)
    row = [(i // epr, (i % epr) * slot + off) for i in range(epl)]
    return np.array([row] * 32, dtype=np.int64)


@pytest.mark.parametrize("ins", ALL, ids=IDS)
def test_layout_matches_ptx_formulas(ins):
    for op in "abcd":
        lay = L.layout(ins, op)
        assert lay.dtype == np.int64
        assert lay.shape == (32, ptx_elements_per_lane(ins, op), 2)
        np.testing.assert_array_equal(lay, expected_layout(ins, op), err_msg=f"{ins} {op}")


@pytest.mark.parametrize("ins", ALL, ids=IDS)
def test_layout_is_bijection(ins):
    for op in "abcd":
        rows, cols = ins.matrix_shape(op)
        lay = L.layout(ins, op)
        prod = (np.arange(32) >> 2) % 4 if ins.quadpair else np.zeros(32, dtype=int)
        assert (lay[..., 0] >= 0).all() and (lay[..., 0] < rows).all()
        assert (lay[..., 1] >= 0).all() and (lay[..., 1] < cols).all()
        flat = (prod[:, None] * rows + lay[..., 0]) * cols + lay[..., 1]
        nprod = 4 if ins.quadpair else 1
        assert sorted(flat.ravel().tolist()) == list(range(nprod * rows * cols))
        np.testing.assert_array_equal(L.product_of_lane(ins), prod)


@pytest.mark.parametrize("ins", ALL, ids=IDS)
def test_register_map_matches_packing_rule(ins):
    for op in "abcd":
        rm = L.register_map(ins, op)
        assert rm.dtype == np.int64
        np.testing.assert_array_equal(rm, expected_regmap(ins, op), err_msg=f"{ins} {op}")
        assert rm[..., 0].max() + 1 == ins.regs[op]
        # Every element's bits lie inside its register and no two elements overlap.
        w = L.code_bits(ins, op)
        assert w == WIDTH[ins.type_of(op)]
        assert (rm[..., 1] + w <= ins.register_bits(op)).all()
        spans = {(int(r), b) for r, lo in rm[0].tolist() for b in range(lo, lo + w)}
        assert len(spans) == rm.shape[1] * w


def test_register_counts_from_ptx_tables():
    # A few counts read directly off the PTX "Fragment" tables.
    cases = [
        (find((16, 8, 16), "f16"), {"a": 4, "b": 2}),
        (find((16, 8, 8), "tf32"), {"a": 4, "b": 2, "c": 4}),
        (find((16, 8, 32), "s8"), {"a": 4, "b": 2, "c": 4}),
        (find((16, 8, 32), "s4"), {"a": 2, "b": 1}),
        (find((16, 8, 64), "e2m1", kind="mxf4"), {"a": 4, "b": 2}),
        (find((16, 8, 32), "e2m1", kind="f8f6f4"), {"a": 4, "b": 2}),
        (find((16, 8, 256), "b1"), {"a": 4, "b": 2, "c": 4}),
        (find((8, 8, 4), "f64"), {"a": 1, "b": 1, "c": 2}),
        (find((16, 8, 16), "f64"), {"a": 8, "b": 4, "c": 4}),
        (find((8, 8, 4), "f16", ctype="f32", dtype="f32"), {"a": 2, "b": 2, "c": 8, "d": 8}),
        (find((8, 8, 4), "f16", ctype="f16", dtype="f16"), {"a": 2, "b": 2, "c": 4, "d": 4}),
    ]
    for ins, want in cases:
        for op, n in want.items():
            assert ins.regs[op] == n, (str(ins), op)
            assert L.register_map(ins, op)[..., 0].max() + 1 == n


def test_locate_examples():
    ins = find((16, 8, 32), "s8")
    # A[9][2]: row 9 = groupID 1 + 8, col 2 = 4*0 + 2 -> lane 4, element 6 (register 1, byte 2)
    assert L.locate(ins, "a", 9, 2) == [(4, 6, 1, 16, 23)]
    f16 = find((16, 8, 16), "f16")
    assert L.locate(f16, "b", 9, 3) == [(12, 3, 1, 16, 31)]
    e2m1 = find((16, 8, 32), "e2m1", kind="f8f6f4")
    assert L.locate(e2m1, "a", 0, 1) == [(0, 1, 0, 10, 13)]
    f64 = find((8, 8, 4), "f64")
    assert L.locate(f64, "c", 7, 7) == [(31, 1, 1, 0, 63)]


@pytest.mark.parametrize("ins", ALL, ids=IDS)
def test_locate_and_elements_of_agree_with_tables(ins):
    for op in "abcd":
        rows, cols = ins.matrix_shape(op)
        lay, rm, w = L.layout(ins, op), L.register_map(ins, op), L.code_bits(ins, op)
        rng = np.random.default_rng(hash((str(ins), op)) % 2**32)
        for r, c in zip(rng.integers(0, rows, 4).tolist(), rng.integers(0, cols, 4).tolist()):
            hits = L.locate(ins, op, r, c)
            assert len(hits) == (4 if ins.quadpair else 1)
            if ins.quadpair:
                assert [(ln >> 2) % 4 for ln, *_ in hits] == [0, 1, 2, 3]
            for ln, el, reg, lo, hi in hits:
                assert tuple(lay[ln, el]) == (r, c)
                assert (reg, lo) == tuple(rm[ln, el])
                assert hi == lo + w - 1
                assert (el, r, c, lo, hi) in L.elements_of(ins, op, ln, reg)
        for ln in (0, 17, 31):
            got = [e for reg in range(ins.regs[op]) for e in L.elements_of(ins, op, ln, reg)]
            assert [e[0] for e in got] == list(range(rm.shape[1]))


def test_quadpair_locate_lanes():
    ins = find((8, 8, 4), "f16", alayout="row", blayout="col", ctype="f32", dtype="f32")
    # A .row: row 5 -> high group (lane >= 16), lane%4 = 1; col 3 -> element 3
    assert [h[:2] for h in L.locate(ins, "a", 5, 3)] == [(17, 3), (21, 3), (25, 3), (29, 3)]
    # C .f32: row 3 col 5 -> lane&1 = 1, i&2 = 2, i&4 = 4, lane&2 = 0, i&1 = 1 -> lanes 1,5,9,13, i=7
    assert [h[:2] for h in L.locate(ins, "d", 3, 5)] == [(1, 7), (5, 7), (9, 7), (13, 7)]


def test_bad_operand_and_indices():
    ins = ALL[0]
    for bad in ("e", "ab", "", "scale_a", 3, None):
        with pytest.raises((PtxError, ShapeError)) as ei:
            L.layout(ins, bad)
        assert isinstance(ei.value, ValueError)
        msg = str(ei.value)
        assert repr(bad) in msg and "'a'" in msg and "'d'" in msg
    with pytest.raises(WarpsimError):
        L.register_map(ins, "x")
    with pytest.raises(ShapeError):
        L.locate(ins, "a", 8, 0)
    with pytest.raises(ShapeError):
        L.locate(ins, "a", -1, 0)
    with pytest.raises(ShapeError):
        L.elements_of(ins, "a", 32, 0)
    with pytest.raises(ShapeError):
        L.elements_of(ins, "a", 0, ins.regs["a"])
    with pytest.raises(TypeError):
        L.locate(ins, "a", 1.5, 0)
    with pytest.raises(TypeError):
        L.as_instruction(42)


def test_tables_cached_and_read_only():
    ins = find((16, 8, 16), "f16")
    a1, a2 = L.layout(ins, "a"), L.layout(ins, "a")
    assert a1 is a2
    assert not a1.flags.writeable
    with pytest.raises(ValueError):
        a1[0, 0, 0] = 5
    assert not L.register_map(ins, "b").flags.writeable


def test_string_instructions():
    pytest.importorskip("warpsim.tensorcore.decode")
    ins = find((16, 8, 16), "f16", ctype="f32", dtype="f32")
    text = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    assert L.as_instruction(text).shape == (16, 8, 16)
    np.testing.assert_array_equal(L.layout(text, "a"), L.layout(ins, "a"))
    assert L.locate(text, "a", 9, 2) == L.locate(ins, "a", 9, 2)


def test_layout_scale_operands_follow_the_selector_rules():
    from warpsim.tensorcore.layouts import layout

    ins = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
    sa = layout(ins, "scale_a", thread_id=1)
    assert sa.shape == (16, 4, 2)
    # thread-id-a 1 picks lanes 4g+2 (row g) and 4g+3 (row g+8); bytes 0..3 are chunks 0..3
    assert sa[3, 2].tolist() == [4 * 3 + 2, 2] and sa[11, 0].tolist() == [4 * 3 + 3, 0]
    sb = layout(ins, "scale_b", thread_id=3)
    assert sb.shape == (4, 8, 2) and sb[1, 5].tolist() == [4 * 5 + 3, 1]
    with pytest.raises(ValueError):
        layout("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "scale_a")
