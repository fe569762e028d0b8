"""The kernel suite (tests/kernels/*.cu -> nvcc -ptx sm_90) against the H100: every word of
every array argument after the kernel, as the GPU returned it (tests/data/kernels/, written by
``python -m warpsim.validation.kernel_suite`` on the device; see docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.errors import PtxError
from warpsim.validation.kernel_suite import CASES

DATA = Path(__file__).parent / "data" / "kernels" / "h100_kernel_suite.npz"

#: Cases whose PTX uses an instruction this build does not run yet (the launch must fail with a
#: PtxError naming it, never a wrong result).  Remove an entry once its instruction lands.
PENDING: dict[str, str] = {}


def _params():
    for name in CASES:
        marks = [pytest.mark.xfail(raises=PtxError, strict=True, reason=PENDING[name])] if name in PENDING else []
        yield pytest.param(name, marks=marks, id=name)


def _words(a: np.ndarray) -> np.ndarray:
    raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    w = min(4, a.dtype.itemsize)
    return raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[w])


@pytest.mark.parametrize("name", list(_params()))
def test_kernel_matches_h100_word_for_word(name):
    case = CASES[name]
    with np.load(DATA) as z:
        ref = {k.split(".", 1)[1]: z[k] for k in z.files if k.startswith(name + ".")}
    args = case.args()
    for i, a in enumerate(args):  # the exact inputs the GPU saw
        if f"in_{i}" in ref:
            stored = ref[f"in_{i}"]
            args[i] = stored.view(a.dtype) if stored.dtype != a.dtype else stored
            assert args[i].tobytes() == a.tobytes(), "input generator drifted from the stored inputs"
    m = warpsim.Module(case.ptx_path.read_text())
    outs = m.launch(case.kernel, case.grid, case.block, args, case.shared_bytes, check=False)
    k = 0
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.ndim:
            got, want = _words(outs[k]), _words(ref[f"out_{i}"])
            k += 1
            if i in case.compare:  # words the hardware may order differently are left out
                if case.compare[i] is None:
                    continue
                got, want = got[case.compare[i]], want[case.compare[i]]
            bad = np.flatnonzero(got != want)
            assert not bad.size, (f"argument {i}: {bad.size} of {want.size} words differ from the H100, "
                                  f"first at word {bad[0]}: {got[bad[0]]:#x} != {want[bad[0]]:#x}")


def test_suite_clean_under_the_sanitizer():
    """A real multi-warp kernel with cp.async, barriers, ldmatrix and mma: no finding."""
    case = CASES["gemm_f16"]
    args = case.args()
    args[:3] = [args[0][:64, :64].copy(), args[1][:64, :64].copy(), args[2][:64, :64].copy()]
    args[3:] = [np.int32(64)] * 3
    (A, B, C) = warpsim.launch(case.ptx_path.read_text(), case.kernel, 1, 128, args)
    assert np.abs(C - A.astype(np.float64) @ B.astype(np.float64).T).max() < 1e-3
