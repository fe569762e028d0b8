"""TMA im2col mode against an H100 (driver 580.159.04): the driver's bytes for 52
``cuTensorMapEncodeIm2col`` parameter sets, 31 im2col loads and 3 that fault (fixture
tests/data/h100_im2col.npz, made by warpsim/validation/hopper_im2col_device.py with
tests/kernels/hopper/im2col_kernels.cu)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import warpsim
from warpsim.facts import tensormap as fmt

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "warpsim", "validation"))
import hopper_im2col_device as H  # noqa: E402

Z = np.load(os.path.join(HERE, "data", "h100_im2col.npz"))
PTX = open(os.path.join(HERE, "kernels", "hopper", "im2col_kernels.ptx")).read()


def _fields(c) -> fmt.TensorMapFields:
    return fmt.TensorMapFields(c["dtype"], c["rank"], c["addr"], c["dims"], c["strides"], (c["cpp"],), c["es"],
                               c["inter"], c["swz"], c["l2"], c["oob"], True, c["lower"], c["upper"], c["ppc"])


def test_im2col_encoder_reproduces_the_driver():
    cases = H.sweep_cases()
    assert len(cases) == len(Z["sweep_rc"]) == 52
    legal = 0
    for c, rc, raw in zip(cases, Z["sweep_rc"], Z["sweep_bytes"]):
        if rc == 0:
            legal += 1
            mine = warpsim.tensor_map_im2col(c["dtype"], c["dims"], c["strides"], c["lower"], c["upper"], c["cpp"],
                                             c["ppc"], c["es"], c["inter"], c["swz"], c["l2"], c["oob"],
                                             address=c["addr"])
            assert mine.raw == bytes(raw), c["name"]
            assert fmt.decode(mine.raw) == _fields(c)
        else:
            with pytest.raises(warpsim.TensorMapError):
                fmt.encode(_fields(c))
    assert legal == 38


FULL = bool(os.environ.get("WARPSIM_FULL"))


def _loads():
    for i, c in enumerate(H.load_cases()):
        pre = f"im2col/{c['name']}/"
        if pre + "in" not in Z:
            continue
        for k in range(len(c["loads"])):
            if pre + f"{k}/out" in Z:
                yield i, k


#: loads that faulted on the H100 (illegal instruction): a start outside the bounding box
FAULTS = [(1, 3), (6, 1), (6, 3)]


@pytest.mark.parametrize("i,k", FAULTS)
def test_im2col_start_outside_the_box_is_an_error(i, k):
    c = H.load_cases()[i]
    assert f"im2col/{c['name']}/{k}/out" not in Z  # the device run lost it
    log = Z["log"][0]
    assert f"im2col:{i}:{k}" in str(log)
    tm = warpsim.tensor_map_im2col(c["dtype"], c["dims"], None, c["lower"], c["upper"], c["cpp"], c["ppc"], c["es"],
                                   swizzle=c["swz"], oob_fill=c["oob"], tensor=np.zeros(c["nbytes_tensor"], np.uint8))
    cc, oo = c["loads"][k]
    nb = c["ppc"] * c["cpp"] * H.DTYPES[c["dtype"]][1]
    with pytest.raises(warpsim.WarpsimError, match="outside the bounding box"):
        warpsim.Module(PTX).launch("im2col_load", 1, 128, [tm, np.array(cc, np.int32), np.array(oo, np.uint16),
                                                           c["rank"], nb, nb + 256, np.zeros(nb + 256, np.uint8),
                                                           np.zeros(1, np.int32), np.zeros(1, np.uint64)],
                                   arch="sm_90a", check=False)


def test_im2col_loads_match_the_h100():
    """Every load the H100 ran, unchecked (copies complete at issue)."""
    for i, k in _loads():
        _check_load(i, k, check=False)


@pytest.mark.parametrize("i,k", [(0, 5), (3, 2)] + ([x for x in _loads()] if FULL else []))
def test_im2col_load_under_the_sanitizer(i, k):
    """The same under the sanitizer (the copy lands when the wait observes it); all with
    WARPSIM_FULL=1."""
    _check_load(i, k, check=True)


def _check_load(i, k, check):
    c = H.load_cases()[i]
    pre = f"im2col/{c['name']}/"
    cc, oo = c["loads"][k]
    t = Z[pre + "in"].copy()
    tm = warpsim.TensorMap.from_bytes(Z[pre + "map"], tensor=t, device_base=int(Z[pre + "addr"][0]))
    assert tm.fields.im2col and tm.fields.pixels == c["ppc"]
    want = Z[pre + f"{k}/out"]
    nb = c["ppc"] * c["cpp"] * H.DTYPES[c["dtype"]][1]
    assert Z[pre + f"{k}/flag"][0] == 1
    m = warpsim.Module(PTX)
    outs = m.launch("im2col_load", 1, 128, [tm, np.array(cc, np.int32), np.array(oo, np.uint16), c["rank"], nb,
                                            want.size, np.zeros(want.size, np.uint8), np.zeros(1, np.int32),
                                            np.zeros(1, np.uint64)], arch="sm_90a", check=check)
    got, flag = outs[3], outs[4]
    assert flag[0] == 1
    np.testing.assert_array_equal(got, want)


# -- sm_100's gather4 / scatter4 (from the PTX ISA and its users; not compared with a GPU) -----
_G4 = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .align 64 .b8 src[128], .param .align 64 .b8 dst[128], .param .u64 out)
{
 .reg .b32 %r<20>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 .shared .align 1024 .b8 smem[1024];
 .shared .align 8 .b64 bar;
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, smem;
 mov.u32 %r3, bar;
 mov.u64 %rd1, src;
 cvta.param.u64 %rd1, %rd1;
 mov.u64 %rd2, dst;
 cvta.param.u64 %rd2, %rd2;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra WAIT;
 mbarrier.init.shared::cta.b64 [%r3], 1;
 mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r3], 512;
 mov.u32 %r4, 0; mov.u32 %r5, 3; mov.u32 %r6, 0; mov.u32 %r7, 7; mov.u32 %r8, -1;
 cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes [%r2], [%rd1, {%r4, %r5, %r6, %r7, %r8}], [%r3];
WAIT:
 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;
 @!%p2 bra WAIT;
 shl.b32 %r9, %r1, 4;
 add.u32 %r10, %r2, %r9;
 ld.shared.v4.u32 {%r11, %r12, %r13, %r14}, [%r10];
 ld.param.u64 %rd4, [out];
 cvt.u64.u32 %rd5, %r9;
 add.u64 %rd6, %rd4, %rd5;
 st.global.v4.u32 [%rd6], {%r11, %r12, %r13, %r14};
 @%p1 bra END;
 mov.u32 %r5, 5; mov.u32 %r6, 9; mov.u32 %r7, 12; mov.u32 %r8, 0;
 cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group [%rd2, {%r4, %r5, %r6, %r7, %r8}], [%r2];
 cp.async.bulk.commit_group;
 cp.async.bulk.wait_group 0;
END:
 ret;
}
"""


def test_gather4_and_scatter4_on_sm100():
    rng = np.random.default_rng(5)
    A = rng.integers(0, 2**16, (10, 64), dtype=np.uint16)
    B = np.zeros((12, 64), np.uint16)
    src = warpsim.tensor_map("f16", (64, 10), box=(64, 1), tensor=A)
    dst = warpsim.tensor_map("f16", (64, 12), box=(64, 1), tensor=B)
    for check in (False, True):
        _, B2, out = warpsim.Module(_G4).launch("k", 1, 32, [src, dst, np.zeros(512, np.uint8)], arch="sm_100a",
                                               check=check)[0:3]
        rows = out.view(np.uint16).reshape(4, 64)
        np.testing.assert_array_equal(rows[:3], A[[3, 0, 7]])
        assert not rows[3].any()  # row -1: zero fill
        want = np.zeros((12, 64), np.uint16)
        want[5], want[9] = A[3], A[0]  # A[7] goes to row 12, outside: not written; row 0 gets the zero row
        np.testing.assert_array_equal(B2.reshape(12, 64), want)
    with pytest.raises(warpsim.WarpsimError, match="needs sm_100"):
        warpsim.Module(_G4.replace("sm_100a", "sm_90a")).launch("k", 1, 32, [src, dst, np.zeros(512, np.uint8)],
                                                                arch="sm_90a")
