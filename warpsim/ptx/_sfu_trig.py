"""The constants of the AVX-512 MUFU.SIN/COS kernels of ``_sfu_trig.c``, derived on first use from
the measured sine table (:func:`warpsim.ptx.sfu.table` ``"sin"``).

The table's first half turn is symmetric under the ones' complement of the key
(``S[k] == S[2**24 - 1 - k]``), so the 2**23 keys ``q`` of a quarter turn hold every word, in 64
segments of 2**17 keys.  Where the build has AVX-512 VBMI + VNNI, the unit's datapath
(:func:`_datapath`: integers per segment, exact on every key of segments 1..63; segment 0 read
from its words), checked on every key before use.  Else, a register model per segment -- an f32
constant plus an f32 centred quadratic, least squares through the words' midpoints; segment 0,
whose words run down to 2**-37, relative: the unit's slope ``S[1]`` times the key plus a fitted
square term -- which the C kernel's own arithmetic (``warpsim_sfu_trig_model``, one FMA rounded
toward zero) brings within one word of the table on all keys but a few thousand of segment 0; a
2-bit code per key (word - model, two's complement, -2: not so) corrects it, and the other keys
read a dense copy of the first keys.
"""

from __future__ import annotations

import ctypes

import numpy as np

QBITS, SEGBITS = 23, 17


class Trig(ctypes.Structure):
    """``Trig`` of ``_sfu_trig.c``."""

    _fields_ = [("c0", ctypes.c_float * 64), ("d0", ctypes.c_float * 64), ("d1", ctypes.c_float * 64),
                ("d2", ctypes.c_float * 64), ("codes", ctypes.c_void_p),
                ("small", ctypes.c_void_p), ("nsmall", ctypes.c_int64), ("c0hi", ctypes.c_int32 * 64),
                ("c1x", ctypes.c_int32 * 64), ("c2lo", ctypes.c_int32 * 64), ("dense0", ctypes.c_void_p),
                ("dp", ctypes.c_int32)]


def _datapath(words: np.ndarray, m: Trig) -> bool:
    """The unit's datapath constants of every segment s >= 1 into ``m`` (False where a segment
    fits none): in units u of the ulp of the segment's lowest binade, integers C1, C2 and C0 (17
    fraction bits) with ``floor((C0 + C1 X + C2 S) / 2**17)`` inside every key's word (the word
    covers two units where it lies one binade up), S the truncated square of the key's low 17
    bits X (benchmarks/results/sfu-trig-interp.txt); least squares through the words' midpoints
    for C1, C2 (or a neighbour), then every key bounds C0."""
    from warpsim.ptx.sfu import fit_datapath, truncated_square

    L = 1 << SEGBITS
    S = truncated_square(np.arange(L, dtype=np.int64))
    for s in range(1, 1 << (QBITS - SEGBITS)):
        w = words[s * L:(s + 1) * L].astype(np.int64)
        e = (w >> 23) & 255
        emin = int(e.min())
        if int(e.max()) - emin > 1:
            return False
        sh = e - emin
        lo_k = ((w & 0x7FFFFF) | 0x800000) << sh
        r = fit_datapath(lo_k, lo_k + (1 << sh) - 1, 17)
        if r is None:
            return False
        C0, C1, C2 = r
        if not (0 <= C1 < 1 << 24 and -(1 << 14) <= C2 < 1 << 14
                and (1 << 17) + abs(C2) * int(S.max()) + 63 * C1 < 1 << 31):
            return False
        m.c0hi[s] = C0 >> 17
        m.c1x[s] = int(np.int64(C1 | ((emin - 150) & 0xFF) << 24).astype(np.uint32).view(np.int32))
        m.c2lo[s] = int(np.int64((C0 & 0x1FFFF) | (C2 << 17)).astype(np.uint32).view(np.int32))
    return True


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
    """The kernel's model of one sine table (arrays kept alive; :attr:`ptr` for ``Tab.aux``): the
    unit's datapath where the build has it (AVX-512 VBMI + VNNI) and every key fits it, else (or
    with ``codes``) the register model plus a 2-bit code per key."""

    def __init__(self, lib: ctypes.CDLL, table: np.ndarray, codes: bool = False):
        w = np.ascontiguousarray(table[: 1 << QBITS], np.uint32)
        model = np.empty(1 << QBITS, np.uint32)
        self.nrare, self.codes, self.small = 0, None, None
        if lib.warpsim_sfu_trig_available() == 2 and not codes:   # the unit's datapath: no per-key data
            self.m = Trig()
            self.dense0 = np.ascontiguousarray(w[: 1 << SEGBITS])
            self.m.dense0, self.m.dp = self.dense0.ctypes.data, 1
            if _datapath(w, self.m):
                lib.warpsim_sfu_trig_model(ctypes.byref(self.m), model.ctypes.data)
                if np.array_equal(model, w):
                    self.ptr = ctypes.addressof(self.m)
                    return
        self.m = _fit(w)                                 # else the register model and a code per key
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

    @property
    def datapath(self) -> bool:
        """Whether the kernel runs the unit's datapath (else the register model and the codes)."""
        return bool(self.m.dp)


def attach(lib: ctypes.CDLL, c) -> None:
    """Give the compact sine table ``c`` (:class:`warpsim.ptx.sfu_accel.Compact`) the kernel's
    model, where this build has the AVX-512 kernel (else ``c`` stays on _sfu.c's fast path)."""
    from warpsim.ptx import sfu

    if not lib.warpsim_sfu_trig_available():
        return
    c.trig = Model(lib, sfu.table("sin"))
    c.tab.aux = c.trig.ptr
