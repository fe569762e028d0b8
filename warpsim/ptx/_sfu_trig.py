"""The register model of MUFU.SIN/COS for the AVX-512 kernel of ``_sfu_trig.c``, derived on first
use from the measured sine table (:func:`warpsim.ptx.sfu.table` ``"sin"``).

The table's first half turn is symmetric under the ones' complement of the key
(``S[k] == S[2**24 - 1 - k]``), so the 2**23 keys ``q`` of a quarter turn hold every word.  Per
segment of 2**17 keys (the interpolator's 64) the least-squares quadratic through the words'
midpoints -- an f32 constant plus an f32 centred quadratic; segment 0, whose words run down to
2**-37, relative: the unit's slope ``S[1]`` times the key plus a fitted square term -- evaluated
by the C kernel's own arithmetic (``warpsim_sfu_trig_model``, one FMA rounded toward zero to
f32) is within one word of the table on all keys but a few thousand of segment 0.  A 2-bit code
per key (word - model, two's complement, -2: not so) corrects it; the other keys are read from a
dense copy of the first keys.
"""

from __future__ import annotations

import ctypes

import numpy as np

QBITS, SEGBITS = 23, 17


class Trig(ctypes.Structure):
    """``Trig`` of ``_sfu_trig.c``."""

    _fields_ = [("c0", ctypes.c_float * 64), ("d0", ctypes.c_float * 64), ("d1", ctypes.c_float * 64),
                ("d2", ctypes.c_float * 64), ("codes", ctypes.c_void_p),
                ("small", ctypes.c_void_p), ("nsmall", ctypes.c_int64)]


def _fit(words: np.ndarray) -> Trig:
    """The per-segment coefficients from the quarter's words (u32, 2**23)."""
    L, ns = 1 << SEGBITS, 1 << (QBITS - SEGBITS)
    e = ((words >> np.uint32(23)) & np.uint32(255)).astype(np.int64)
    ulp = np.ldexp(1.0, np.maximum(e, 1) - 150)
    mid = words.view(np.float32).astype(np.float64) + ulp / 2
    m = Trig()
    x = (np.arange(L) - L / 2) / (L / 2)                       # X / 2**16 in [-1, 1)
    c = np.linalg.lstsq(np.stack([np.ones(L), x, x * x], 1), mid.reshape(ns, L)[1:].T, rcond=None)[0]
    c0 = c[0].astype(np.float32)
    m.c0[1:] = c0.tolist()
    m.d0[1:] = (c[0] - c0.astype(np.float64)).astype(np.float32).tolist()
    m.d1[1:] = (c[1] * 2.0**-16).astype(np.float32).tolist()
    m.d2[1:] = (c[2] * 2.0**-32).astype(np.float32).tolist()
    X = np.arange(1, L, dtype=np.float64)                     # segment 0: X c0 + X**2 d2, relative
    c0 = words[1].view(np.float32)                             # S[1] = the unit's slope (S[k] = k S[1] for small k)
    wt = X / ulp[1:L]
    m.c0[0] = float(c0)
    m.d2[0] = float(np.float32(np.linalg.lstsq((X * wt)[:, None], (mid[1:L] / X - float(c0)) * wt, rcond=None)[0][0]))
    return m


class Model:
    """The kernel's model of one sine table (arrays kept alive; :attr:`ptr` for ``Tab.aux``)."""

    def __init__(self, lib: ctypes.CDLL, table: np.ndarray):
        w = np.ascontiguousarray(table[: 1 << QBITS], np.uint32)
        self.m = _fit(w)
        model = np.empty(1 << QBITS, np.uint32)
        if lib.warpsim_sfu_trig_model(ctypes.byref(self.m), model.ctypes.data) != 0:
            raise OSError("no AVX-512 trig kernel in this build")
        d = w.view(np.int32).astype(np.int64) - model.view(np.int32)
        code = np.where(np.abs(d) <= 1, d, -2).astype(np.int64) & 3
        self.nrare = int((code == 2).sum())
        n = int(np.flatnonzero(code == 2).max()) + 1 if self.nrare else 1
        self.small = np.ascontiguousarray(w[: -(-n // 16) * 16])
        sh = (30 - 2 * np.arange(16, dtype=np.uint64)).astype(np.uint64)
        self.codes = np.bitwise_or.reduce(code.astype(np.uint64).reshape(-1, 16) << sh, axis=1).astype(np.uint32)
        self.codes = np.ascontiguousarray(self.codes, np.uint32)
        self.m.codes, self.m.small, self.m.nsmall = self.codes.ctypes.data, self.small.ctypes.data, self.small.size
        self.ptr = ctypes.addressof(self.m)


def attach(lib: ctypes.CDLL, c) -> None:
    """Give the compact sine table ``c`` (:class:`warpsim.ptx.sfu_accel.Compact`) the kernel's
    model, where this build has the AVX-512 kernel (else ``c`` stays on _sfu.c's fast path)."""
    from warpsim.ptx import sfu

    if not lib.warpsim_sfu_trig_available():
        return
    c.trig = Model(lib, sfu.table("sin"))
    c.tab.aux = c.trig.ptr
