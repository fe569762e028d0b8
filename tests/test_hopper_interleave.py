"""TMA tile loads through interleaved tensor maps (16B / 32B interleave) against the hardware
(driver 580.159.04): 11 loads through 5 maps on an H100 (tests/data/h100_im2col.npz,
``inter/...``) and 13 through 6 more on an H200 (tests/data/h200_interleave.npz, ``probe/...``;
one more map the driver refused), made by warpsim/validation/hopper_im2col_device.py with the
``tile_load`` kernel of tests/kernels/hopper/im2col_kernels.cu, replayed byte for byte; and the
refusals for what was not measured."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import warpsim
from warpsim.facts import tensormap as fmt
from warpsim.ptx.ops import tma

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "warpsim", "validation"))
import hopper_im2col_device as H  # noqa: E402

Z = np.load(os.path.join(HERE, "data", "h100_im2col.npz"))
P = np.load(os.path.join(HERE, "data", "h200_interleave.npz"))
PTX = open(os.path.join(HERE, "kernels", "hopper", "im2col_kernels.ptx")).read()
#: zero bytes appended to each tensor: three loads read in-bounds chunks past the tensor's end,
#: which the GPUs returned as zeros (their allocation's padding; 20 chunks in all)
PAD = 1024


def _loads():
    return ([("inter", c, k) for c in H.inter_cases() for k in range(len(c["coords"]))]
            + [("probe", c, k) for c in H.probe_cases() if P[f"probe/{c['name']}/rc"][0] == 0
               for k in range(len(c["coords"]))])


_MOD: list = []


def _run(c, tm, coords, nbytes, ncopy, check=False):
    if not _MOD:
        _MOD.append(warpsim.Module(PTX))
    out = _MOD[0].launch(
        "tile_load", 1, 128, [tm, np.array([coords], np.int32), c["rank"], nbytes, ncopy, np.zeros(ncopy, np.uint8),
                              np.zeros(1, np.int32), np.zeros(1, np.uint64)], arch="sm_90a", check=check)
    return out[2], out[3]


def test_interleaved_loads_match_the_hardware():
    """All 24 recorded loads: the whole shared-memory image (box and the marker bytes past it)."""
    words = 0
    for kind, c, k in _loads():
        F = Z if kind == "inter" else P
        pre = f"{kind}/{c['name']}/"
        assert F[pre + "rc"][0] == 0
        f = fmt.decode(F[pre + "map"].tobytes(), strict=False)
        assert f.interleave == c["inter"] and f.box == c["box"] and f.element_strides == c["es"]
        off, inb, _ = tma.interleave_coords(f, c["coords"][k])
        nbytes = off.size * tma.INTERLEAVE_CHUNK[f.interleave]   # what warpsim signals (complete_tx)
        t = np.concatenate([F[pre + "in"], np.zeros(PAD, np.uint8)])
        tm = warpsim.TensorMap.from_bytes(F[pre + "map"], tensor=t, device_base=int(F[pre + "addr"][0]))
        want = F[pre + f"{k}/out"]
        got, flag = _run(c, tm, c["coords"][k], nbytes, want.size, check=(c["name"], k) == ("i16_f16_4d", 1))
        assert flag[0] == 1
        np.testing.assert_array_equal(got, want, err_msg=f"{c['name']} load {k}")
        words += want.size // 4
    assert words == 2816 + 6336   # 11,264 bytes (H100) + 25,344 bytes (H200)


def test_driver_refusal_is_an_error():
    """The driver refused a 16B-interleaved u8 map whose box[0] is 8 bytes; so does warpsim."""
    c = next(c for c in H.probe_cases() if c["name"] == "p3d_narrow")
    assert P[f"probe/{c['name']}/rc"][0] != 0
    with pytest.raises(warpsim.TensorMapError) as e:
        warpsim.tensor_map(c["dtype"], c["dims"], box=c["box"], interleave=c["inter"])
    assert e.value.parameter == "box_dim[0]"


def test_interleaved_walk():
    """The traversal the hardware showed: dimension 0 in whole chunks, dimension rank-2 not walked."""
    f = fmt.TensorMapFields(6, 4, 0, (8, 10, 6, 3), (16, 160, 960), (8, 8, 4, 2), (1,) * 4, 1, 0, 0, 0)
    off, inb, n = tma.interleave_coords(f, (0, 5, 4, 2))
    assert n == [8, 8, 1, 2]
    o = off.reshape(2, 8, 8) // 16
    np.testing.assert_array_equal(o[0], 5 + 4 * 10 + 2 * 60 + np.add.outer(np.arange(8), np.arange(8)))
    np.testing.assert_array_equal(inb.reshape(2, 8, 8)[0].all(1), np.arange(8) < 5)   # W = 5 + g < 10
    assert not inb.reshape(2, 8, 8)[1].any()                                         # N = 3 is outside
    f3 = fmt.TensorMapFields(6, 3, 0, (16, 40, 6), (32, 1280), (16, 16, 4), (2, 1, 2), 2, 1, 0, 0, 0)
    off, inb, n = tma.interleave_coords(f3, (0, -3, 0))
    assert n == [8, 1, 2] and not inb.any()        # H (dimension 1) is checked at its start only
    off, inb, n = tma.interleave_coords(f3, (2, 1, 1))
    np.testing.assert_array_equal(off.reshape(2, 8), 32 * (2 + 2 * np.arange(8))[None, :] + 32
                                  + 1280 * np.array([[1], [3]]))
    np.testing.assert_array_equal(inb.reshape(2, 8), np.broadcast_to(2 + 2 * np.arange(8) < 16, (2, 8)))


@pytest.mark.parametrize("what", ["dim0_start", "rank5", "store", "im2col"])
def test_unmeasured_interleaved_copies_are_refused(what):
    tm = warpsim.tensor_map("f16", (8, 40, 6), box=(8, 16, 2), interleave="16B",
                            tensor=np.zeros(8 * 40 * 6, np.uint16))
    if what == "dim0_start":
        with pytest.raises(warpsim.WarpsimError, match="dimension 0"):
            _run(dict(rank=3), tm, (-8, 0, 0), 256, 512)
        return
    if what == "im2col":
        tm = warpsim.tensor_map_im2col("f16", (8, 6, 5), None, (-1,), (-1,), 8, 4, interleave="16B",
                                       tensor=np.zeros(8 * 6 * 5, np.uint16))
        src = _KERNEL.replace("COPY", "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::"
                                      "complete_tx::bytes [%r2], [%rd1, {%r1, %r1, %r1}], [%r3], {%rs1};")
        with pytest.raises(warpsim.WarpsimError, match="interleave"):
            warpsim.Module(src).launch("k", 1, 32, [tm], arch="sm_90a")
        return
    if what == "rank5":
        tm = warpsim.tensor_map("f16", (8, 4, 3, 2, 2), box=(8, 4, 3, 2, 2), interleave="16B",
                                tensor=np.zeros(8 * 4 * 3 * 2 * 2, np.uint16))
        src = _KERNEL.replace("COPY", "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx"
                                      "::bytes [%r2], [%rd1, {%r1, %r1, %r1, %r1, %r1}], [%r3];")
        with pytest.raises(warpsim.WarpsimError, match="rank 5"):
            warpsim.Module(src).launch("k", 1, 32, [tm], arch="sm_90a")
        return
    src = _KERNEL.replace("COPY", "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group "
                                  "[%rd1, {%r1, %r1, %r1}], [%r2];")
    with pytest.raises(warpsim.WarpsimError, match="interleave 16B"):
        warpsim.Module(src).launch("k", 1, 32, [tm], arch="sm_90a")


_KERNEL = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 map[128])
{
 .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .b16 %rs<2>;
 .shared .align 1024 .b8 smem[8192];
 .shared .align 8 .b64 bar;
 mov.u32 %r1, 0;
 mov.u16 %rs1, 0;
 mov.u32 %r2, smem;
 mov.u32 %r3, bar;
 mov.u64 %rd1, map;
 cvta.param.u64 %rd1, %rd1;
 COPY
 ret;
}
"""
