"""Optional compiled path for the bit-exact MUFU forms (``_sfu.c``): one pass per instruction.

:mod:`warpsim.ptx.sfu` and :mod:`warpsim.ptx.ops.approx` (NumPy) are the reference; this module
runs the same per-lane arithmetic in C -- specials, ``.ftz``, the table lookup, the rescaling
and the ptxas sequence around MUFU -- for the sm_90 forms listed in :data:`FORMS`.  The C file
is compiled on first use by :mod:`warpsim.tensorcore.accel`'s builder (the system ``cc``,
cached in ``~/.cache/warpsim``); ``WARPSIM_ACCEL=0`` or no compiler: everything stays on NumPy.

Tables are held compact so that a lookup stays in cache: per segment of ``2**S`` keys a linear
model in integers plus a 2- or 4-bit code per key (``word = base + (slope * j >> 24) + code``);
segments whose codes would not fit keep their words.  They are derived from the measured tables
(:func:`warpsim.ptx.sfu.table`) on first use of each, and the tests expand them again and
compare every key with the measured table.  First use of a table costs its decode in
:mod:`warpsim.ptx.sfu` plus the derivation (about 50-100 ms per 2**24 keys).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import numpy as np

from warpsim.ptx import sfu

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sfu.c")
_SRC_LG2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sfu_lg2.c")
_lock = threading.RLock()
_lib = None
_tried = False
#: Why the compiled path is not in use (None while it is, or before the first try).
reason: str | None = None

#: PTX form -> (the C kernel's form number, the sfu table it reads).
FORMS: dict[str, tuple[int, str]] = {
    "ex2.approx.ftz.f32": (0, "ex2"), "ex2.approx.f32": (1, "ex2"),
    "lg2.approx.ftz.f32": (2, "lg2"), "lg2.approx.f32": (3, "lg2"),
    "rcp.approx.ftz.f32": (4, "rcp"), "rcp.approx.f32": (5, "rcp"),
    "rsqrt.approx.ftz.f32": (6, "rsq"), "rsqrt.approx.f32": (7, "rsq"),
    "sqrt.approx.ftz.f32": (8, "sqrt"), "sqrt.approx.f32": (9, "sqrt"),
    "sin.approx.f32": (10, "sin"), "sin.approx.ftz.f32": (10, "sin"),
    "cos.approx.f32": (11, "sin"), "cos.approx.ftz.f32": (11, "sin"),
    "tanh.approx.f32": (12, "tanh"),
    "div.approx.f32": (13, "rcp"), "div.approx.ftz.f32": (14, "rcp"),
    "div.full.f32": (15, "rcp"), "div.full.ftz.f32": (16, "rcp"),
    "ex2.approx.f16": (17, "ex2_f16"), "ex2.approx.f16x2": (18, "ex2_f16"),
    "ex2.approx.ftz.bf16": (17, "ex2_bf16"), "ex2.approx.ftz.bf16x2": (18, "ex2_bf16"),
    "tanh.approx.f16": (17, "tanh_f16"), "tanh.approx.f16x2": (18, "tanh_f16"),
    "tanh.approx.bf16": (17, "tanh_bf16"), "tanh.approx.bf16x2": (18, "tanh_bf16"),
    "rcp.approx.ftz.f64": (19, "rcp64h"), "rsqrt.approx.ftz.f64": (20, "rsq64h"),
    "rsqrt.approx.f64": (21, "rsq64h"),
}
#: The bare MUFU functions of :mod:`warpsim.ptx.sfu` (f32 words in and out) -> form number.
MUFU = {"ex2": 22, "lg2": 23, "rcp": 24, "rsq": 25, "sqrt": 26, "sin": 27, "cos": 28}
_MUFU_TABLE = {"ex2": "ex2", "lg2": "lg2", "rcp": "rcp", "rsq": "rsq", "sqrt": "sqrt", "sin": "sin",
               "cos": "sin"}
#: Segment size (keys) of the compact tables, as a power of two.
SEG_BITS = 10


class _Tab(ctypes.Structure):
    _fields_ = [("seg", ctypes.c_void_p), ("res", ctypes.c_void_p),
                ("dense", ctypes.c_void_p),
                ("aux", ctypes.c_void_p), ("corr", ctypes.c_void_p), ("S", ctypes.c_int32), ("R", ctypes.c_int32)]


def _setup(lib: ctypes.CDLL) -> None:
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.warpsim_sfu.argtypes = [ctypes.c_int, p, p, p, i64, p]
    lib.warpsim_sfu.restype = ctypes.c_int
    lib.warpsim_sfu_expand.argtypes = [p, i64, p]
    lib.warpsim_sfu_expand.restype = None
    lib.warpsim_sfu_stats.argtypes = [p, i64, ctypes.c_int, p]
    lib.warpsim_sfu_stats.restype = None
    lib.warpsim_sfu_fill.argtypes = [p, i64, ctypes.c_int, ctypes.c_int, p, p, p, p]
    lib.warpsim_sfu_fill.restype = None
    lib.warpsim_sfu_ex2_model.argtypes = [p, p, p]
    lib.warpsim_sfu_ex2_model.restype = None
    lib.warpsim_sfu_lg2_derive.argtypes = [p, p, p, p]
    lib.warpsim_sfu_lg2_derive.restype = ctypes.c_int
    lib.warpsim_sfu_lg2_certain.argtypes = [p, ctypes.c_int32, ctypes.c_int32, p, p]
    lib.warpsim_sfu_lg2_certain.restype = None


def library() -> ctypes.CDLL | None:
    """The compiled SFU library, or None (see :data:`reason`)."""
    global _lib, _tried, reason
    if _tried:
        return _lib
    with _lock:
        if not _tried:
            from warpsim.tensorcore import accel

            _lib, reason = accel.load(lambda: accel._build((_SRC, _SRC_LG2), "warpsim_sfu"), _setup)
            _tried = True
    return _lib


def available() -> bool:
    """Whether the compiled SFU path can be used here."""
    return library() is not None


class Compact:
    """A measured table in compact form (arrays kept alive; :attr:`tab` is the C view)."""

    def __init__(self, words: np.ndarray, aux: np.ndarray | None = None, seg_bits: int = SEG_BITS):
        lib = library()
        w = np.ascontiguousarray(words, np.uint32)
        n, S = w.size, seg_bits
        L = 1 << S
        nseg = -(-n // L)
        st = np.empty((nseg, 3), np.int64)
        lib.warpsim_sfu_stats(w.ctypes.data, n, S, st.ctypes.data)
        spread = st[:, 2] - st[:, 1]
        R = min((2, 4), key=lambda r: n * r // 8 + int((spread >= (1 << r)).sum()) * L * 4)
        dense = spread >= (1 << R)
        seg = (st[:, 1] & 0xFFFFFFFF).astype(np.uint32)           # base words, modulo 2**32
        slope = st[:, 0].astype(np.int32)
        seg[dense] = np.arange(int(dense.sum()), dtype=np.uint32) * L
        slope[dense] = np.iinfo(np.int32).min
        self.res = np.zeros(-(-nseg * L * R // 32), np.uint32)
        self.dense = np.zeros(max(int(dense.sum()), 1) * L, np.uint32)
        lib.warpsim_sfu_fill(w.ctypes.data, n, S, R, seg.ctypes.data, slope.ctypes.data, self.res.ctypes.data,
                             self.dense.ctypes.data)
        self.seg = seg.astype(np.uint64) | (slope.view(np.uint32).astype(np.uint64) << np.uint64(32))
        self.n, self.R, self.ndense = n, R, int(dense.sum())
        self.aux = None if aux is None else np.ascontiguousarray(aux)
        self.corr = None
        self.tab = _Tab(self.seg.ctypes.data, self.res.ctypes.data, self.dense.ctypes.data,
                        None if aux is None else self.aux.ctypes.data, None, S, R)

    def add_corrections(self, c: np.ndarray) -> None:
        """2-bit codes ``c + 1`` of the corrections ``c`` (table - model per key: for rcp/rsq/sqrt
        the IEEE operation, :func:`warpsim.ptx.sfu._corrections`; for ex2 the C's float64
        polynomial); 3 (c outside -1..1) sends the lane to the scalar path.  Those fast paths
        then need no segment lookup."""
        code = np.where((c >= -1) & (c <= 1), c.astype(np.int32) + 1, 3).astype(np.uint32)
        code = np.concatenate([code, np.zeros(-code.size % 16, np.uint32)]).reshape(-1, 16)
        self.corr = np.bitwise_or.reduce(code << (2 * np.arange(16, dtype=np.uint32)), axis=1).astype(np.uint32)
        self.tab.corr = self.corr.ctypes.data

    @property
    def nbytes(self) -> int:
        return self.seg.nbytes + self.res.nbytes + self.dense.nbytes

    def expand(self) -> np.ndarray:
        """Every key's word (equal to the measured table: tests/test_sfu_accel.py)."""
        out = np.empty(self.n, np.uint32)
        library().warpsim_sfu_expand(ctypes.byref(self.tab), self.n, out.ctypes.data)
        return out


class _Direct:
    """A 16-bit table read directly (128 KB)."""

    def __init__(self, t: np.ndarray):
        self.aux = np.ascontiguousarray(t, np.uint16)
        self.tab = _Tab(None, None, None, self.aux.ctypes.data, None, 0, 0)


_tabs: dict[str, object] = {}


def _ex2_coefficients(words: np.ndarray) -> np.ndarray:
    """float64 ``[c0, c1, c2, 0]`` per segment of 2**17 keys of MUFU.EX2's positive half (the
    unit's 64 interpolation segments): the least-squares quadratic in the key's low 17 bits
    through each measured word's midpoint.  ``floor`` of it is within one word of the table on
    every key (benchmarks/results/sfu-interp.txt); the 2-bit codes carry the rest."""
    y = (words[: 1 << 23] & np.uint32(0x7FFFFF)).astype(np.float64).reshape(64, 1 << 17) + 0.5
    x = np.arange(1 << 17) * 2.0**-17
    c = np.linalg.lstsq(np.stack([np.ones_like(x), x, x * x], 1), y.T, rcond=None)[0]
    return np.stack([c[0], c[1] * 2.0**-17, c[2] * 2.0**-34, np.zeros(64)], 1)


def _lg2_model(words: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """MUFU.LG2's band model (``_sfu_lg2.c``): int32 ``c0``, f32 ``c1``, ``c2`` per segment of
    2**17 keys (64 for x < 1, then 64 for x >= 1), a least-squares quadratic in the centred low
    17 bits through the middle of each key's truncation cell, in units of 2**-31 (``c1``, ``c2``
    held times 2**7, 2**14); ``c2``'s low 7 bits hold the segment's band, derived over every key
    by the C with them in place (so the kernel's certain lanes are exact by construction); then
    the same as byte planes (for VPERMI2B).  Returns ``(model as 768 u32, table - w0 per key)``,
    or None where a band does not fit."""
    w = np.ascontiguousarray(words, np.uint32)
    sub = np.arange(1, 1 << 17, 7)                              # every 7th key fits (the band is exact)
    ws = w.reshape(128, 1 << 17)[:, sub]
    nxt = ((ws & np.uint32(0x7FFFFFFF)) + np.uint32(1)).view(np.float32).astype(np.float64)
    nxt[:64] *= -1.0                                            # x < 1: the words are negative
    mid = (ws.view(np.float32) + nxt) * 2.0**30                 # cell middles, units of 2**-31
    u = sub * 2.0**-16 - 1.0                                    # (hi key 0, x = 2**n, is apart)
    c = np.linalg.pinv(np.stack([np.ones_like(u), u, u * u], 1)) @ mid.T
    c[1] *= 2.0**-16
    c[2] *= 2.0**-32
    model = np.empty(384, np.uint32)
    model[:128] = np.rint(c[0]).astype(np.int64).astype(np.int32).view(np.uint32)
    model[128:256] = (c[1] * 2.0**7).astype(np.float32).view(np.uint32)
    model[256:] = (c[2] * 2.0**14).astype(np.float32).view(np.uint32) & np.uint32(~127 & 0xFFFFFFFF)
    band = np.empty(128, np.int32)
    d = np.empty(1 << 24, np.int32)
    for _ in range(4):   # c2's low 7 bits hold the band and take part in the model: until they cover it
        if library().warpsim_sfu_lg2_derive(w.ctypes.data, model.ctypes.data, band.ctypes.data, d.ctypes.data):
            return None
        held = (model[256:] & np.uint32(127)).astype(np.int32)
        if (band <= held).all():
            break
        if band.max() > 127:
            return None
        model[256:] = (model[256:] & np.uint32(~127 & 0xFFFFFFFF)) | np.maximum(band, held).astype(np.uint32)
    else:
        return None
    planes = model.view(np.uint8).reshape(3, 128, 4).transpose(0, 2, 1)   # the kernel's byte planes
    return np.concatenate([model, np.ascontiguousarray(planes).reshape(-1).view(np.uint32)]), d


def compact(name: str):
    """The C-side form of sfu table ``name``, built on first use and cached."""
    t = _tabs.get(name)
    if t is None:
        with _lock:
            if name not in _tabs:
                words = sfu.table(name)
                if words.dtype == np.uint16:
                    _tabs[name] = _Direct(words)
                elif name == "tanh":          # the last 13 words: the binade directory
                    k = sfu.TANH_E1 - sfu.TANH_E0 + 3
                    _tabs[name] = Compact(words[:-k], aux=words[-k:])
                else:
                    c = Compact(words, aux=_ex2_coefficients(words) if name == "ex2" else None)
                    if name in ("rcp", "rsq", "sqrt"):
                        c.add_corrections(sfu._corrections(name))
                    elif name == "lg2":   # the band kernel's model and codes (_sfu_lg2.c)
                        md = _lg2_model(words)
                        if md is not None:
                            c.aux = md[0]
                            c.tab.aux = c.aux.ctypes.data
                            c.add_corrections(md[1])
                    elif name == "ex2":   # the positive half against the C's per-segment quadratic
                        d = np.empty(1 << 23, np.int32)
                        library().warpsim_sfu_ex2_model(np.ascontiguousarray(words).ctypes.data,
                                                        c.aux.ctypes.data, d.ctypes.data)
                        c.add_corrections(d)
                    _tabs[name] = c
            t = _tabs[name]
    return t


def _call(num: int, table: str, a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    lib = library()
    t = compact(table)
    a = np.asarray(a, order="C")            # (keeps 0-d arrays 0-d, unlike ascontiguousarray)
    if b is not None:
        b = np.asarray(b, order="C")
    y = np.empty_like(a)
    rc = lib.warpsim_sfu(num, a.ctypes.data, None if b is None else b.ctypes.data, y.ctypes.data, a.size,
                         ctypes.byref(t.tab))
    if rc:
        raise AssertionError(f"warpsim_sfu: form {num} unknown to the compiled library")
    return y


_off = 0


@contextlib.contextmanager
def disabled():
    """Inside, :func:`run` and :func:`mufu` answer None: the callers run the NumPy reference
    (the tests compare the two)."""
    global _off
    _off += 1
    try:
        yield
    finally:
        _off -= 1


def run(form: str, *srcs: np.ndarray) -> np.ndarray | None:
    """``form`` (a key of :data:`FORMS`) on register words of the right width, in C; None where
    the compiled path is unavailable or the operands' shapes differ (the caller runs NumPy)."""
    if _off or form not in FORMS or library() is None:
        return None
    num, table = FORMS[form]
    if len(srcs) == 2:
        a, b = srcs
        if a.shape != b.shape:
            return None
        return _call(num, table, a, b)
    return _call(num, table, srcs[0])


def mufu(name: str, b: np.ndarray) -> np.ndarray | None:
    """The bare MUFU function ``name`` (``ex2``, ``lg2``, ``rcp``, ``rsq``, ``sqrt``, ``sin``,
    ``cos``; as :mod:`warpsim.ptx.sfu`) on f32 words, in C; None where unavailable."""
    if _off or library() is None:
        return None
    return _call(MUFU[name], _MUFU_TABLE[name], np.asarray(b, np.uint32))
