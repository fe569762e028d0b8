"""warpsim.tensorcore.doctor.explain_packing finds planted packing mistakes and names them."""

from __future__ import annotations

import numpy as np
import pytest

import warpsim
from warpsim.tensorcore.doctor import Report, explain_packing
from warpsim.errors import ShapeError

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
S8 = "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32"
QROW = "mma.sync.aligned.m8n8k4.row.row.f32.f16.f16.f32"
QCOL = "mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f32"

A = np.arange(256.0).reshape(16, 16)  # distinct, exact in f16
B = np.arange(128.0).reshape(16, 8)


def regs(instr=F16, op="a", m=A):
    return warpsim.pack(instr, op, m)


def swap_halves(w):
    return ((w >> 16) | (w << 16)) & 0xFFFFFFFF


def test_correct_packing_is_ok():
    r = explain_packing(F16, "a", regs(), A)
    assert isinstance(r, Report) and r.ok and r.cause is None
    assert str(r).startswith("OK: all 256")


def test_swapped_registers():
    r = explain_packing(F16, "a", regs()[:, [0, 2, 1, 3]], A)
    assert not r.ok and len(r.mismatches) == 128
    assert r.cause_tags == ("registers-swapped",) and r.explained == 1.0
    assert "registers 1 and 2 are swapped" in str(r)


def test_swapped_halves():
    r = explain_packing(F16, "a", swap_halves(regs()), A)
    assert r.cause_tags == ("halves-swapped",)
    assert "two halves of each register are swapped" in str(r)


def test_transposed_matrix():
    r = explain_packing(F16, "a", regs(m=A.T), A)
    assert r.cause_tags == ("transposed",)
    assert "transposed" in str(r)


def test_transposed_and_halves_swapped_together():
    r = explain_packing(F16, "a", swap_halves(regs(m=A.T)), A)
    assert set(r.cause_tags) == {"transposed", "halves-swapped"}


def test_column_major_read_as_row_major_non_square():
    wrong = B.T.reshape(16, 8)  # B stored column-major, read as row-major
    r = explain_packing(F16, "b", regs(op="b", m=wrong), B)
    assert r.cause_tags == ("column-major-read-as-row-major",)


def test_lane_mapping_mod8_variant():
    lane = np.arange(32)
    r = explain_packing(F16, "a", regs()[4 * (lane % 8) + lane // 8], A)
    assert r.cause_tags == ("lane-mapping-mod8",)
    assert "groupID = lane % 8 and threadID_in_group = lane / 8" in str(r)


def test_byte_order_reversed_s8():
    m = (np.arange(256) - 128).reshape(16, 16)
    w = regs(S8, "a", m)
    rev = w.view(np.uint8).reshape(32, 2, 4)[:, :, ::-1].copy().view(np.uint32).reshape(32, 2)
    r = explain_packing(S8, "a", rev, m)
    assert r.cause_tags == ("byte-order-reversed",)


def test_quad_pair_row_col_swapped():
    m = np.arange(128.0).reshape(4, 8, 4)
    r = explain_packing(QROW, "a", warpsim.pack(QCOL, "a", m), m)
    assert r.cause_tags == ("row-col-swapped",)
    assert "product" in r.describe(r.mismatches[0])


def test_mismatch_sentence():
    w = regs()
    w[5, 1] = swap_halves(w[5, 1])
    r = explain_packing(F16, "a", w, A)
    assert len(r.mismatches) == 2
    assert r.describe(r.mismatches[1]) == \
        "lane 5 register 1 bits 16-31 holds A[9][2]; the layout puts A[9][3] there"


def test_value_not_in_matrix_and_duplicates_warned():
    r = explain_packing(F16, "a", regs(), np.zeros((16, 16)))
    assert not r.ok
    assert not any("repeats values" in w for w in r.warnings)  # no field is listed twice
    assert "nowhere in the matrix" in str(r)
    m = np.repeat(np.arange(8.0), 32).reshape(16, 16)  # every value 32 times
    w = regs(m=m)
    w[[0, 8], 0] = w[[8, 0], 0]  # two lanes' words exchanged: values found elsewhere, many times
    r = explain_packing(F16, "a", w, m + 0)
    assert any(len(x.found) > 1 for x in r.mismatches)
    assert any("repeats values" in x for x in r.warnings)


def test_random_narrow_data_with_an_explained_mistake_gives_no_repeat_warning():
    ins = warpsim.decode("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", None)
    A8 = np.random.default_rng(3).standard_normal((16, 32))  # e4m3: many repeated codes
    w = warpsim.pack(ins, "a", A8)
    w = ((w >> 16) | (w << 16)) & 0xFFFFFFFF
    r = explain_packing(ins, "a", w, A8)
    assert r.cause_tags == ("halves-swapped",) and r.explained == 1.0 and not r.warnings


def test_forgotten_plus_8_row_offset():
    A8 = A.copy()
    A8[8:] = A[:8]  # what a routine that forgot groupID + 8 packs
    r = explain_packing(F16, "a", warpsim.pack(F16, "a", A8), A)
    assert r.cause_tags == ("row-plus-8-forgotten",) and r.explained == 1.0
    Bm = np.arange(128.0).reshape(16, 8)
    B8 = Bm.copy()
    B8[8:] = Bm[:8]  # B's k rows 8-15 read from rows 0-7
    r = explain_packing(F16, "b", warpsim.pack(F16, "b", B8), Bm)
    assert r.cause_tags == ("row-plus-8-forgotten",)


def test_f16_bf16_mix_up_is_named():
    bf = warpsim.decode("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", None)
    r = explain_packing(F16, "a", warpsim.pack(bf, "a", A), A)
    assert r.cause_tags == ("encoding-bf16",) and "f16/bf16" in r.cause
    r = explain_packing(bf, "a", warpsim.pack(F16, "a", A / 64), A / 64)
    assert r.cause_tags == ("encoding-f16",)


def test_each_warp_of_a_batch_is_diagnosed_on_its_own():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((4, 16, 16))
    w = warpsim.pack(F16, "a", B).copy()
    for k in (1, 2):
        w[k] = warpsim.pack(F16, "a", B[k].T)
    w[3] = ((w[3] >> 16) | (w[3] << 16)) & 0xFFFFFFFF
    r = explain_packing(F16, "a", w, B)
    assert r.cause_tags == ("transposed",) and r.explained == 1.0
    assert list(r.warp_causes) == [3] and "halves" in r.warp_causes[3]
    assert "Warp 3 differs" in str(r) and r.to_dict()["warp_causes"] == {"3": r.warp_causes[3]}


def test_batch_and_codes():
    mats = np.stack([A, A + 256])
    w = regs(m=mats)[:, :, [1, 0, 2, 3]]
    r = explain_packing(F16, "a", w, mats)
    assert r.warps == 2 and r.cause_tags == ("registers-swapped",)
    assert "warp 1" in str(r) or r.mismatches[-1].warp == 1
    codes = warpsim.facts.formats.encode(A, "f16")
    assert explain_packing(F16, "a", regs(), codes, codes=True).ok


def test_bad_shapes():
    with pytest.raises(ShapeError):
        explain_packing(F16, "a", np.zeros((32, 3), np.uint32), A)
    with pytest.raises(ShapeError):
        explain_packing(F16, "a", regs(), np.zeros((8, 16)))
    with pytest.raises(ShapeError):
        explain_packing(F16, "a", regs().astype(float), A)


def test_signed_words_read_as_their_bits():
    # words a user built in int32 (negative where bit 31 is set) carry the same bits
    w = regs()[:, [0, 2, 1, 3]]
    r = explain_packing(F16, "a", w.view(np.int32), A)
    assert r.cause_tags == ("registers-swapped",)
