"""MUFU.TANH's own datapath, for the AVX-512 kernel of ``tanh.approx.f32`` (``_sfu_tanh.c``).

Per segment of 2**17 keys of the measured table (51 over the 11 binades of ``|x|`` in
[2**-8, 8)), with ``X`` the key's low 17 bits, the measured word is, in units of the lowest
output binade of the input binade, ``C0 + floor((C1 X + C2 S) / 2**17)`` with integers
``C0, C1, C2`` and ``S`` the truncated square of :func:`warpsim.ptx.sfu.truncated_square`,
the fixed point converted to f32 toward zero.  The coefficients are derived here on first use from
:func:`warpsim.ptx.sfu.table` (least squares, then the exact integer range of ``C0`` that holds
every key) and the kernel is then run on every key and compared with the table
(benchmarks/results/sfu-tanh.txt tells how the datapath was found).
"""

from __future__ import annotations

import ctypes

import numpy as np

from warpsim.ptx import sfu

SEG = 17   #: key bits per segment (the unit's interpolation segments)


class TanhModelC(ctypes.Structure):
    """C view (``TanhModel`` in ``_sfu_tanh.c``)."""

    _fields_ = [("c0", ctypes.c_int32 * 64), ("c1", ctypes.c_int32 * 64), ("c2", ctypes.c_int32 * 64),
                ("dir", ctypes.c_int32 * 16), ("adj", ctypes.c_int32 * 16)]


def setup(lib: ctypes.CDLL) -> None:
    p = ctypes.c_void_p
    lib.warpsim_sfu_tanh.argtypes = [p, p, p, ctypes.c_int64]
    lib.warpsim_sfu_tanh.restype = ctypes.c_int
    lib.warpsim_sfu_tanh_available.argtypes = []
    lib.warpsim_sfu_tanh_available.restype = ctypes.c_int


def key_inputs() -> np.ndarray:
    """One input pattern per key of the table (``|x|`` with the ignored low bits clear)."""
    d = sfu.table("tanh")[-(sfu.TANH_E1 - sfu.TANH_E0 + 3):]
    parts = []
    for E in range(sfu.TANH_E0, sfu.TANH_E1 + 1):
        sh = int(d[E - sfu.TANH_E0 + 1] >> 27)
        parts.append((np.uint32(E) << np.uint32(23)) | (np.arange(1 << (23 - sh), dtype=np.uint32) << np.uint32(sh)))
    return np.concatenate(parts)


def _coefficients(N: np.ndarray, u: np.ndarray, X: np.ndarray, S: np.ndarray) -> tuple[int, int, int]:
    """Integers (C0, C1, C2) with N <= C0 + (C1 X + C2 S) / 2**17 < N + u on every key of one
    segment (N, u: the words and their ulps in fixed point), or ValueError."""
    A = np.stack([np.ones(X.size), X * 2.0**-SEG, S * 2.0**-SEG], 1)
    c = np.linalg.lstsq(A, N + u / 2.0, rcond=None)[0]
    for d1, d2 in [(0, 0)] + [(i, j) for i in range(-2, 3) for j in range(-4, 5) if (i, j) != (0, 0)]:
        C1, C2 = int(round(c[1])) + d1, int(round(c[2])) + d2
        V = C1 * X + C2 * S
        lo = -((V - (N << SEG)).min() // (1 << SEG))             # ceil(max(N 2**17 - V) / 2**17)
        hi = (((N + u) << SEG) - V).min()                         # C0 2**17 < hi
        if lo << SEG < hi:
            return int(lo), C1, C2
    raise ValueError("MUFU.TANH: a segment fits no integer quadratic of the truncated square")


def derive() -> dict[str, np.ndarray]:
    """The datapath's constants from the measured table: per segment ``c0, c1, c2`` (int64; one
    more segment, all but ``c0 = 2**23`` zero, answers 1.0 for ``|x| >= 8``) and per exponent
    field ``E & 15`` the key directory ``dir`` (offset | shift << 27) and the rebase ``adj``."""
    t = sfu.table("tanh")
    nb = sfu.TANH_E1 - sfu.TANH_E0 + 3
    w = t[:-nb - 1]                                   # every key's word (positive; then 1.0)
    d = t[-nb:].astype(np.int64)                      # the binade directory, fields 118..130
    L = 1 << SEG
    if w.size % L or w.size // L > 63:
        raise ValueError(f"the tanh table does not fall into at most 63 segments of 2**{SEG} keys")
    one = w.size // L
    c = {"c0": np.zeros(64, np.int64), "c1": np.zeros(64, np.int64), "c2": np.zeros(64, np.int64),
         "dir": np.zeros(16, np.int64), "adj": np.zeros(16, np.int64)}
    X = np.arange(L, dtype=np.int64)
    S = sfu.truncated_square(X)
    for E in range(sfu.TANH_E0, sfu.TANH_E1 + 1):
        off, sh = int(d[E - sfu.TANH_E0 + 1] & 0x7FFFFFF), int(d[E - sfu.TANH_E0 + 1] >> 27)
        y = w[off: off + (1 << (23 - sh))].astype(np.int64)
        ey = y >> 23
        elo = int(ey.min())
        c["dir"][E & 15] = off | (sh << 27)
        c["adj"][E & 15] = (elo - 150) << 23
        N = ((1 << 23) | (y & 0x7FFFFF)) << (ey - elo)            # fixed point, units 2**(elo-150)
        u = np.left_shift(1, ey - elo)
        for q in range(y.size // L):
            sl = slice(q * L, (q + 1) * L)
            c["c0"][off // L + q], c["c1"][off // L + q], c["c2"][off // L + q] = _coefficients(N[sl], u[sl], X, S)
    c["c0"][one] = 1 << 23                            # |x| >= 8 (fields 130..255 read field 130's entry)
    c["dir"][(sfu.TANH_E1 + 1) & 15] = (one << SEG) | (23 << 27)
    c["adj"][(sfu.TANH_E1 + 1) & 15] = (127 - 150) << 23
    return c


def evaluate(c: dict[str, np.ndarray], b: np.ndarray) -> np.ndarray:
    """MUFU.TANH on f32 words ``b`` from the datapath constants ``c`` (:func:`derive`), in NumPy,
    step for step as the kernel computes it."""
    b = np.asarray(b, np.uint32)
    ab = (b & np.uint32(0x7FFFFFFF)).astype(np.int64)
    Ec = np.minimum(ab >> 23, sfu.TANH_E1 + 1) & 15
    k = (c["dir"][Ec] & 0x7FFFFFF) + ((ab & 0x7FFFFF) >> (c["dir"][Ec] >> 27))
    s, X = k >> SEG, k & ((1 << SEG) - 1)
    N = c["c0"][s] + ((c["c1"][s] * X + c["c2"][s] * sfu.truncated_square(X)) >> SEG)
    N = np.where(N >= 1 << 24, N & ~1, N)             # to f32 toward zero (N < 2**25)
    w = (N.astype(np.float32).view(np.uint32).astype(np.int64) + c["adj"][Ec]).astype(np.uint32)
    w |= b & np.uint32(0x80000000)
    w = np.where(ab <= 0x3B7FFFFF, b, w)              # |x| < 2**-8: x
    return np.where(ab > 0x7F800000, np.uint32(0x7FFFFFFF), w).astype(np.uint32)


class TanhModel:
    """The datapath constants in the kernel's struct, checked on every key through the kernel."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.coef = derive()
        self.c = TanhModelC()
        for f in ("c0", "c1", "c2", "dir", "adj"):
            getattr(self.c, f)[:] = (self.coef[f] & 0xFFFFFFFF).astype(np.uint32).view(np.int32).tolist()
        self.xs = key_inputs()
        w = sfu.table("tanh")[: self.xs.size]
        got = self.run(self.xs)
        if not np.array_equal(got, w):
            raise ValueError(f"MUFU.TANH model: {int((got != w).sum())} keys differ from the table")

    def run(self, a: np.ndarray) -> np.ndarray:
        """The kernel on f32 words ``a``."""
        a = np.ascontiguousarray(a, np.uint32)
        y = np.empty_like(a)
        self.lib.warpsim_sfu_tanh(ctypes.byref(self.c), a.ctypes.data, y.ctypes.data, a.size)
        return y
