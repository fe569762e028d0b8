"""The packing doctor names each planted mistake for every element width (1, 4, 6, 8, 16, 32,
64 bits), on random tiles whose values repeat (the cause is found from positions, not by
looking values up).  Mistakes are planted by restating the wrong packing routine here."""

from __future__ import annotations

import numpy as np
import pytest

import warpsim
from warpsim.facts import formats
from warpsim.tensorcore.doctor import explain_packing

# (width, instruction, operand); every operand has at least two registers per lane
CASES = [
    (1, "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc", "a"),
    (4, "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", "a"),
    (4, "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", "b"),
    (6, "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32", "a"),
    (8, "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32", "a"),
    (16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "a"),
    (16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "b"),
    (32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "a"),
    (32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "c"),
    (64, "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", "a"),
    (64, "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", "c"),
]
BUGS = ["registers", "halves", "nibbles", "transposed", "lanes-textbook", "lanes-mod8"]
TAG = {"registers": "registers-swapped", "halves": "halves-swapped", "nibbles": "nibbles-swapped",
       "lanes-textbook": "lane-mapping-swapped", "lanes-mod8": "lane-mapping-mod8"}


def random_tile(ins, op, rng):
    """Values drawn from random codes of the type (finite; repeats expected for narrow types)."""
    t = ins.type_of(op)
    f = formats.get_format(t)
    rows, cols = ins.matrix_shape(op)
    bits = min(f.bits, 62)
    c = rng.integers(0, 1 << bits, (rows, cols), dtype=np.uint64)
    if t == "tf32":
        c = c << np.uint64(13) & np.uint64(0xFFFFFFFF)
    v = formats.decode(c.astype(f.storage_dtype), t)
    if v.dtype.kind == "f":
        v = np.where(np.isfinite(v), v, 1.0)
    return v


def textbook(ins, op, M):
    """The packing routine with groupID = lane % 4 and threadID_in_group = lane / 4, reading a
    flat buffer (row-major; column-major for a .col B) with the PTX ISA's index formulas; reads
    past the buffer give 0.  Restated here from the PTX ISA fragment sections."""
    rows, cols = M.shape
    epl = ins.elements_per_lane(op)
    epr = ins.elements_per_register(op)
    flat = M.T.ravel() if op == "b" else M.ravel()
    out = np.zeros((rows, cols))
    words = []
    vals = np.zeros((32, epl))
    for lane in range(32):
        g, t = lane % 4, lane // 4
        for i in range(epl):
            p, j = i % epr, i // epr
            if op == "a":
                r, c = g + 8 * (j % 2) * (rows == 16), p + epr * t + 4 * epr * (j // (2 if rows == 16 else 1))
                addr = r * cols + c
            elif op == "b":
                r, c = p + epr * t + 4 * epr * j, g
                addr = c * rows + r
            else:
                r, c = g + 8 * (i // 2), (i % 2) + 2 * t
                addr = r * cols + c
            vals[lane, i] = flat[addr] if addr < flat.size else 0
    # place each lane's values where the correct layout would, then pack with warpsim
    lay = warpsim.layout(ins, op)
    out[lay[..., 0], lay[..., 1]] = vals
    return warpsim.pack(ins, op, out)


def plant(bug, ins, op, M):
    w = warpsim.pack(ins, op, M).astype(np.uint64)
    rb = ins.register_bits(op)
    full = np.uint64((1 << rb) - 1)
    if bug == "registers":
        return w[:, [1, 0] + list(range(2, w.shape[1]))]
    if bug == "halves":
        h = np.uint64(rb // 2)
        return ((w >> h) | (w << h)) & full
    if bug == "nibbles":
        lo = np.uint64(int("0F" * (rb // 8), 16))
        return ((w & lo) << np.uint64(4)) | ((w >> np.uint64(4)) & lo)
    if bug == "transposed":
        rows, cols = M.shape
        wrong = M.T if rows == cols else M.T.reshape(rows, cols)  # column-major storage read row-major
        return warpsim.pack(ins, op, wrong)
    if bug == "lanes-textbook":
        return textbook(ins, op, M)
    if bug == "lanes-mod8":
        lane = np.arange(32)
        return w[4 * (lane % 8) + lane // 8]
    raise AssertionError(bug)


@pytest.mark.parametrize("bug", BUGS)
@pytest.mark.parametrize("width,instr,op", CASES, ids=[f"{c[0]}bit-{c[2]}-{c[1].split('.')[3]}" for c in CASES])
def test_names_the_planted_cause(width, instr, op, bug):
    ins = warpsim.decode(instr, None)
    assert ins.storage_bits(op) == width or warpsim.tensorcore.layouts.code_bits(ins, op) == width
    rng = np.random.default_rng(width * 100 + BUGS.index(bug))
    M = random_tile(ins, op, rng)
    r = explain_packing(ins, op, plant(bug, ins, op, M), M)
    assert not r.ok
    want = TAG.get(bug) or ("transposed" if M.shape[0] == M.shape[1] else "column-major-read-as-row-major")
    assert r.cause_tags == (want,), (str(r).splitlines()[:2], r.cause_tags)
    assert r.explained == 1.0
    assert not any("np.arange" in w for w in r.warnings)


def test_quad_pair_mixups():
    # m8n8k4 .f16: quad pair p is lanes 4p..4p+3 and 4p+16..4p+19
    lane = np.arange(32)
    rng = np.random.default_rng(1)
    for instr, op in (("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "a"),
                      ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "c")):
        ins = warpsim.decode(instr, None)
        M = rng.integers(-4, 5, (4,) + ins.matrix_shape(op)).astype(float)  # few distinct values
        w = warpsim.pack(ins, op, M)
        adjacent = 4 * (lane >> 3) + 16 * ((lane >> 2) & 1) + (lane & 3)  # quads 2p, 2p+1 as pair p
        r = explain_packing(ins, op, w[adjacent], M)
        assert r.cause_tags == ("quad-pairs-adjacent",) and r.explained == 1.0
        r = explain_packing(ins, op, w[lane & 15], M)  # the high quad packed like the low one
        assert r.cause_tags == ("quad-pair-high-half-ignored",)


def test_container_offset_and_fp8_without_distinct_values():
    ins = warpsim.decode("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32", None)
    rng = np.random.default_rng(4)
    M = rng.choice([0, 0.5, 1, 1.5, 2, 3, 4, 6, -1, -6], (16, 32))
    w = warpsim.pack(ins, "a", M)
    # e2m1 codes belong in bits 2-5 of each byte; a packer that forgot the shift puts them at 0-3
    r = explain_packing(ins, "a", (w >> 2) & 0x3F3F3F3F, M)
    assert r.cause_tags == ("container-offset",) and "bits 2-5" in r.cause
    # a fully wrong lane mapping on an e4m3 tile of 512 elements (at most 253 distinct values)
    fp8 = warpsim.decode("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", None)
    M = formats.decode(rng.integers(0, 0x7F, (16, 32)).astype(np.uint8), "e4m3")
    lane = np.arange(32)
    r = explain_packing(fp8, "a", warpsim.pack(fp8, "a", M)[4 * (lane % 8) + lane // 8], M)
    assert r.cause_tags == ("lane-mapping-mod8",)
    # positions are named: the field holds the element the mistaken routine read
    m = r.mismatches[0]
    assert len(m.found) == 1


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(st.permutations(list(range(32))), st.sampled_from(CASES[:6]), st.integers(0, 2**32 - 1))
def test_any_lane_permutation_is_recovered(perm, case, seed):
    # an arbitrary lane permutation on random (repeating) values: the doctor explains every field,
    # and each misplaced field is traced to the element the permuted lane really holds
    _, instr, op = case
    ins = warpsim.decode(instr, None)
    M = random_tile(ins, op, np.random.default_rng(seed))
    w = warpsim.pack(ins, op, M)
    perm = np.array(perm)
    r = explain_packing(ins, op, w[perm], M)
    if r.ok:  # the values happen to make the permuted words equal
        return
    assert r.explained == 1.0 and len(r.cause_tags) == 1
    assert r.cause_tags[0] in ("lanes-permuted", "lane-mapping-mod8", "lane-mapping-div8", "lane-mapping-swapped")
    lay = warpsim.layout(ins, op)
    for m in r.mismatches[:20]:
        if len(m.found) == 1:
            assert m.found[0][1:] == tuple(lay[perm[m.lane], m.element])


@pytest.mark.parametrize("instr,op,tag", [
    ("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", "a", "element-order-reversed"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", "a", "element-order-reversed"),
    ("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc", "b", "bit-order-reversed"),
])
def test_element_order_reversed_in_sub_byte_registers(instr, op, tag):
    # the first element packed into the top nibble (bit) instead of the bottom one
    ins = warpsim.decode(instr, None)
    M = random_tile(ins, op, np.random.default_rng(9))
    w = warpsim.pack(ins, op, M).astype(np.uint64)
    width = ins.storage_bits(op)
    rev = np.zeros_like(w)
    for i in range(32 // width):  # slot i -> slot (n - 1 - i)
        field = (w >> np.uint64(i * width)) & np.uint64((1 << width) - 1)
        rev |= field << np.uint64(32 - width - i * width)
    r = explain_packing(ins, op, rev, M)
    assert r.cause_tags == (tag,) and r.explained == 1.0
