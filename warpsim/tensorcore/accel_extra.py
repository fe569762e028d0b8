"""The compiled kernel (:mod:`warpsim.tensorcore.accel`) for the f64 forms and the block-scaled
forms, dense and sparse (``_accel_extra.c``, built into the same library).

f64: the FMA chain of :func:`warpsim.tensorcore.engine.fma_chain_batch_last` (C ``fma`` in the
instruction's rounding mode, the H100's NaN payloads).  Block scaling: the fused step of
:func:`warpsim.tensorcore.numerics.compute_block_scaled_batch_last`, and for ``mma.sp`` each
row's compressed A against the B rows its metadata selects (:func:`warpsim.tensorcore.sparse.compute`).
The NumPy engine stays the reference; results are identical bit for bit
(tests/test_accel_extra.py).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from warpsim.facts.isa import Instruction


class _XOp(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("s_reg", ctypes.c_int64), ("s_lane", ctypes.c_int64),
                ("s_warp", ctypes.c_int64), ("reg", ctypes.c_void_p), ("lane", ctypes.c_void_p),
                ("shift", ctypes.c_void_p), ("nelem", ctypes.c_int32)]


_ROUNDING = {"rn": 0, "rz": 1, "rm": 2, "rp": 3}


def declare(lib: ctypes.CDLL) -> None:
    """Argument types of this module's C functions (called once, when the library loads)."""
    p = ctypes.POINTER(_XOp)
    lib.warpsim_f64_mma.argtypes = [p, p, p, p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64]
    lib.warpsim_f64_mma.restype = ctypes.c_int


def _lib():
    from warpsim.tensorcore import accel

    return accel.library()


def supports(ins: Instruction, arch: str) -> bool:
    """Whether this module's kernels run ``ins`` on ``arch`` (and the library is available)."""
    if arch == "exact" or ins.n != 8:
        return False
    if ins.atype == "f64":
        return ins.m * ins.k <= 256 and _lib() is not None
    return False


def _i32(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.int32))


class _F64Plan:
    """f64 forms: ``plan(a, b, c, out, layout)`` on uint64 register words (see accel._Plan)."""

    def __init__(self, ins: Instruction):
        from warpsim.tensorcore.packing import batch_last_codec

        self.keep, self.ops = [], []
        for op in "abcd":
            reg, lane = np.divmod(batch_last_codec(ins, op).row.astype(np.int64), 32)
            arrs = [_i32(reg), _i32(lane)]
            self.keep += arrs
            self.ops.append(dict(reg=arrs[0].ctypes.data, lane=arrs[1].ctypes.data, shift=None,
                                 nelem=int(reg.size)))
        self.args = (ins.m, ins.k, _ROUNDING[ins.rounding or "rn"])
        self.fn = _lib().warpsim_f64_mma
        self._local = threading.local()

    def __call__(self, a, b, c, out, layout: str) -> np.ndarray:
        st = getattr(self._local, "st", None)
        if st is None:
            st = self._local.st = [_XOp(base=None, s_reg=0, s_lane=0, s_warp=0, **o) for o in self.ops]
            self._local.refs = [ctypes.byref(x) for x in st]
        warp_first = layout == "warp-first"
        for s, x in zip(st, (a, b, c, out)):
            assert x.dtype == np.uint64
            s.base = x.ctypes.data
            if warp_first:
                s.s_warp, s.s_lane, s.s_reg = (v // 8 for v in x.strides)
            else:
                s.s_reg, s.s_lane, s.s_warp = (v // 8 for v in x.strides)
        n = out.shape[0] if warp_first else out.shape[-1]
        if self.fn(*self._local.refs, *self.args, n):
            raise AssertionError("accelerator refused a plan it accepted")
        return out


_PLANS: dict = {}


def plan(ins: Instruction, arch: str):
    """The compiled kernel for ``ins`` on ``arch`` (check :func:`supports` first)."""
    key = (ins, arch)
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = _F64Plan(ins)
    return p


def aligned64(x: np.ndarray) -> np.ndarray:
    """x as uint64 with whole-word strides."""
    if x.dtype != np.uint64 or any(s % 8 for s in x.strides):
        return np.ascontiguousarray(x, dtype=np.uint64)
    return x
