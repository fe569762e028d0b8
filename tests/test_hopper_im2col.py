"""TMA im2col mode against an H100 (driver 580.159.04): the driver's bytes for 52
``cuTensorMapEncodeIm2col`` parameter sets, 30 im2col loads and 3 that fault (fixture
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
