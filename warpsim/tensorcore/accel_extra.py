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
from warpsim.tensorcore import accel


class _XOp(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("s_reg", ctypes.c_int64), ("s_lane", ctypes.c_int64),
                ("s_warp", ctypes.c_int64), ("reg", ctypes.c_void_p), ("lane", ctypes.c_void_p),
                ("shift", ctypes.c_void_p), ("nelem", ctypes.c_int32)]


class _BSModel(ctypes.Structure):
    _fields_ = [("M", ctypes.c_int32), ("K", ctypes.c_int32), ("KC", ctypes.c_int32), ("V", ctypes.c_int32),
                ("grouped", ctypes.c_int32), ("F", ctypes.c_int32), ("e_zero", ctypes.c_int32),
                ("emin_a", ctypes.c_int32), ("emin_b", ctypes.c_int32), ("emin_s", ctypes.c_int32),
                ("mask_a", ctypes.c_uint32), ("mask_b", ctypes.c_uint32),
                ("ta", ctypes.c_void_p), ("tb", ctypes.c_void_p), ("ts", ctypes.c_void_p),
                ("sa_lane", ctypes.c_void_p), ("sa_shift", ctypes.c_void_p),
                ("sb_lane", ctypes.c_void_p), ("sb_shift", ctypes.c_void_p),
                ("meta", ctypes.c_void_p), ("cs", ctypes.c_int32)]


_ROUNDING = {"rn": 0, "rz": 1, "rm": 2, "rp": 3}


def declare(lib: ctypes.CDLL) -> None:
    """Argument types of this module's C functions (once, on first use of the library here)."""
    p = ctypes.POINTER(_XOp)
    lib.warpsim_f64_mma.argtypes = [p, p, p, p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64]
    lib.warpsim_f64_mma.restype = ctypes.c_int
    lib.warpsim_block_mma.argtypes = [p] * 7 + [ctypes.POINTER(_BSModel), ctypes.c_int64]
    lib.warpsim_block_mma.restype = ctypes.c_int
    lib.warpsim_meta_ok.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                    ctypes.c_int32, ctypes.c_uint32]
    lib.warpsim_meta_ok.restype = ctypes.c_int


_declared = False


def _lib():
    """The library (with this module's argument types declared), or None."""
    global _declared
    lib = accel.library()
    if lib is not None and not _declared:
        if not hasattr(lib, "warpsim_block_mma"):  # a library built from _accel.c alone
            return None
        declare(lib)  # idempotent: a racing thread sets the same types
        _declared = True
    return lib


def supports(ins: Instruction, arch: str) -> bool:
    """Whether this module's kernels run ``ins`` on ``arch`` (and the library is available)."""
    if arch == "exact" or ins.n != 8:
        return False
    if ins.atype == "f64":
        return ins.m * ins.k <= 256 and _lib() is not None
    if ins.block_scale:
        return ins.m <= 16 and ins.k <= 128 and ins.dtype == "f32" and _lib() is not None
    return False


_META: dict = {}


def metadata_ok(ins: Instruction, words: np.ndarray, selector: int) -> bool:
    """True when every metadata nibble that ``selector`` reads in ``words`` (..., 32) uint32 is
    defined for ``ins`` (the check of :func:`warpsim.tensorcore.sparse.check_metadata`, in C);
    False when one is not, or the library is unavailable (then run that function: it raises
    the error that names the first bad nibble)."""
    lib = _lib()
    if lib is None:
        return False
    key = (ins, selector)
    t = _META.get(key)
    if t is None:
        from warpsim.tensorcore import sparse

        idx = _i32(sparse._gather_index(ins, selector).ravel())
        t = _META[key] = (idx, sum(1 << v for v in sparse.valid_nibbles(ins)))
    w = words.reshape(-1, 32)
    if w.dtype != np.uint32 or any(s % 4 for s in w.strides):
        w = np.ascontiguousarray(w, dtype=np.uint32)
    return bool(lib.warpsim_meta_ok(w.ctypes.data, w.strides[0] // 4, w.strides[1] // 4, w.shape[0],
                                    t[0].ctypes.data, t[0].size, t[1]))


def _i32(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.int32))


class _F64Plan:
    """f64 forms: ``plan(a, b, c, out, layout)`` on uint64 register words (see accel._Plan);
    returns ``out``, or None where the strides are too large for the kernel (then use NumPy)."""

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
        n = accel.point(st, (a, b, c, out), layout, np.uint64)
        if self.fn(*self._local.refs, *self.args, n):
            return None  # strides too large for the kernel's 32-bit offsets: the caller uses NumPy
        return out


class _BlockPlan:
    """Block-scaled forms, dense and sparse: ``plan(a, b, c, sa, sb, e, out)`` on warp-first
    words a, b, c, out (n, 32, regs) and per-lane words sa, sb, e (n, 32) (e: metadata of
    mma.sp, else None), any element strides; returns ``out``, or None where the strides are too
    large for the kernel (then use NumPy)."""

    def __init__(self, ins: Instruction, arch: str, byte_id_a: int, thread_id_a: int, byte_id_b: int,
                 thread_id_b: int, selector: int | None):
        from warpsim.facts import formats
        from warpsim.tensorcore import blockscale, numerics, sparse
        from warpsim.tensorcore.packing import batch_last_codec

        model = numerics.model_for(arch)
        self.keep, self.ops = [], []
        masks = {}
        for op in "abcd":
            codec = batch_last_codec(ins, op)
            reg, lane = np.divmod(codec.row.astype(np.int64), 32)
            arrs = [_i32(reg), _i32(lane), _i32(codec.shift.astype(np.int64))]
            self.keep += arrs
            self.ops.append(dict(reg=arrs[0].ctypes.data, lane=arrs[1].ctypes.data, shift=arrs[2].ctypes.data,
                                 nelem=int(reg.size)))
            masks[op] = int(codec.mask) & 0xFFFFFFFF
        tabs = [np.ascontiguousarray(formats._table(formats.get_format(t)), dtype=np.float64)
                for t in (ins.atype, ins.btype, ins.stype)]
        la = blockscale.scale_layout(ins, "scale_a", byte_id_a, thread_id_a).transpose(1, 0, 2)  # (V, M, 2)
        lb = blockscale.scale_layout(ins, "scale_b", byte_id_b, thread_id_b)  # (V, N, 2)
        scl = [_i32(la[..., 0]), _i32(8 * la[..., 1]), _i32(lb[..., 0]), _i32(8 * lb[..., 1])]
        meta, cs = None, 0
        if ins.sparse:
            meta = _i32(sparse._gather_index(ins, selector))  # (M, chunks): lane * 8 + nibble
            cs = sparse.chunk_size(ins)
            self.keep.append(meta)
        self.keep += tabs + scl
        grouped = ins.kind != "mxf8f6f4"
        kc = ins.k // 2 if ins.sparse else ins.k
        E = numerics.EMIN
        self.model = _BSModel(
            M=ins.m, K=ins.k, KC=kc, V=ins.scale_vec, grouped=int(grouped),
            F=model.block_F if grouped else model.F, e_zero=model.block_e_zero if grouped else model.e_zero_f32,
            emin_a=E[ins.atype], emin_b=E[ins.btype], emin_s=E[ins.stype], mask_a=masks["a"], mask_b=masks["b"],
            ta=tabs[0].ctypes.data, tb=tabs[1].ctypes.data, ts=tabs[2].ctypes.data,
            sa_lane=scl[0].ctypes.data, sa_shift=scl[1].ctypes.data, sb_lane=scl[2].ctypes.data,
            sb_shift=scl[3].ctypes.data, meta=None if meta is None else meta.ctypes.data, cs=cs)
        self.fn = _lib().warpsim_block_mma
        self._local = threading.local()

    def __call__(self, a, b, c, sa, sb, e, out) -> np.ndarray:
        st = getattr(self._local, "st", None)
        if st is None:
            st = self._local.st = ([_XOp(base=None, s_reg=0, s_lane=0, s_warp=0, **o) for o in self.ops]
                                   + [_XOp(base=None, s_reg=0, s_lane=0, s_warp=0, reg=None, lane=None, shift=None,
                                           nelem=32) for _ in range(3)])
            self._local.refs = [ctypes.byref(x) for x in st] + [ctypes.byref(self.model)]
        for s, x in zip(st, (a, b, c, out)):
            assert x.dtype == np.uint32
            s.base = x.ctypes.data
            s.s_warp, s.s_lane, s.s_reg = (v // 4 for v in x.strides)
        for s, x in zip(st[4:], (sa, sb, e if e is not None else sa)):
            assert x.dtype == np.uint32
            s.base = x.ctypes.data
            s.s_warp, s.s_lane = (v // 4 for v in x.strides)
        if self.fn(*self._local.refs, out.shape[0]):
            return None  # strides too large for the kernel's 32-bit offsets: the caller uses NumPy
        return out


_PLANS: dict = {}


def plan(ins: Instruction, arch: str):
    """The compiled kernel for an f64 ``ins`` on ``arch`` (check :func:`supports` first)."""
    key = (ins, arch)
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = _F64Plan(ins)
    return p


def block_plan(ins: Instruction, arch: str, byte_id_a: int = 0, thread_id_a: int = 0, byte_id_b: int = 0,
               thread_id_b: int = 0, selector: int | None = None) -> _BlockPlan:
    """The compiled kernel for a block-scaled ``ins`` (sparse: with its ``selector``) on ``arch``
    with the scale selectors bound (check :func:`supports` first)."""
    key = (ins, arch, byte_id_a, thread_id_a, byte_id_b, thread_id_b, selector)
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = _BlockPlan(ins, arch, byte_id_a, thread_id_a, byte_id_b, thread_id_b, selector)
    return p


def aligned32(x: np.ndarray) -> np.ndarray:
    """x as uint32 with whole-word strides."""
    if x.dtype != np.uint32 or any(s % 4 for s in x.strides):
        return np.ascontiguousarray(x, dtype=np.uint32)
    return x


def aligned64(x: np.ndarray) -> np.ndarray:
    """x as uint64 with whole-word strides."""
    if x.dtype != np.uint64 or any(s % 8 for s in x.strides):
        return np.ascontiguousarray(x, dtype=np.uint64)
    return x
