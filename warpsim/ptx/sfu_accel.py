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

from warpsim.ptx import _sfu_trig, sfu

_DIR = os.path.dirname(os.path.abspath(__file__))
_SRC = os.path.join(_DIR, "_sfu.c")
#: Every C file of the library (one per family of band kernels besides _sfu.c) and the header.
_SRCS = (_SRC,) + tuple(os.path.join(_DIR, f) for f in ("_sfu_band.c", "_sfu_tanh.c", "_sfu_rs.c", "_sfu_trig.c",
                                                        "_sfu_lg2.c"))
_DEPS = (os.path.join(_DIR, "_sfu.h"),)
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
                ("aux", ctypes.c_void_p), ("corr", ctypes.c_void_p), ("S", ctypes.c_int32), ("R", ctypes.c_int32),
                ("band", ctypes.c_void_p), ("dp", ctypes.c_void_p)]


class _DatapathC(ctypes.Structure):
    _fields_ = [("c0hi", ctypes.c_int32 * 64), ("c1", ctypes.c_int32 * 64), ("c2lo", ctypes.c_int32 * 64)]


class _BandC(ctypes.Structure):
    _fields_ = [("c1", ctypes.c_float * 128), ("c2", ctypes.c_float * 128), ("c0q", ctypes.c_uint32 * 128),
                ("base", ctypes.c_uint32), ("F", ctypes.c_int32), ("nseg", ctypes.c_int32),
                ("xbits", ctypes.c_int32), ("bits", ctypes.c_void_p), ("pl", ctypes.c_uint8 * 1536)]


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
    lib.warpsim_sfu_band_eval.argtypes = [p, i64, p]
    lib.warpsim_sfu_band_eval.restype = ctypes.c_int
    lib.warpsim_sfu_band_available.argtypes = []
    lib.warpsim_sfu_band_available.restype = ctypes.c_int
    lib.warpsim_sfu_datapath_available.argtypes = []
    lib.warpsim_sfu_datapath_available.restype = ctypes.c_int
    lib.warpsim_sfu_rs.argtypes = [ctypes.c_int, p, p, p, i64, p, p]
    lib.warpsim_sfu_rs.restype = ctypes.c_int
    lib.warpsim_sfu_rs_eval.argtypes = [p, i64, p]
    lib.warpsim_sfu_rs_eval.restype = None
    lib.warpsim_sfu_rs_simd.argtypes = []
    lib.warpsim_sfu_rs_simd.restype = ctypes.c_int
    lib.warpsim_sfu_trig_model.argtypes = [p, p]         # _sfu_trig.c
    lib.warpsim_sfu_trig_available.argtypes = []
    lib.warpsim_sfu_lg2_available.argtypes = []          # _sfu_lg2.c
    lib.warpsim_sfu_lg2_available.restype = ctypes.c_int
    from warpsim.ptx import sfu_tanh

    sfu_tanh.setup(lib)


def library() -> ctypes.CDLL | None:
    """The compiled SFU library, or None (see :data:`reason`)."""
    global _lib, _tried, reason
    if _tried:
        return _lib
    with _lock:
        if not _tried:
            from warpsim.tensorcore import accel

            _lib, reason = accel.load(lambda: accel._build(_SRCS, "warpsim_sfu", _DEPS), _setup)
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
        self.band: Band | None = None
        self.dp: Datapath | None = None
        self.tanh = None   # tanh: the datapath model of _sfu_tanh.c (sfu_tanh.TanhModel)
        self.rs: RsBand | None = None      # rcp/rsq/sqrt: the band kernels of _sfu_rs.c
        self.tab = _Tab(self.seg.ctypes.data, self.res.ctypes.data, self.dense.ctypes.data,
                        None if aux is None else self.aux.ctypes.data, None, S, R)

    def add_corrections(self, c: np.ndarray) -> None:
        """2-bit codes ``c + 1`` of the corrections ``c`` (table - model per key: for rcp/rsq/sqrt
        the IEEE operation, :func:`warpsim.ptx.sfu._corrections`; for ex2 the C's float64
        polynomial); 3 (c outside -1..1) sends the lane to the scalar path.  Those fast paths
        then need no segment lookup."""
        self.corr = _pack2(c)
        self.tab.corr = self.corr.ctypes.data

    @property
    def nbytes(self) -> int:
        return self.seg.nbytes + self.res.nbytes + self.dense.nbytes

    def expand(self) -> np.ndarray:
        """Every key's word (equal to the measured table: tests/test_sfu_accel.py)."""
        out = np.empty(self.n, np.uint32)
        library().warpsim_sfu_expand(ctypes.byref(self.tab), self.n, out.ctypes.data)
        return out


def _pack2(c: np.ndarray) -> np.ndarray:
    """2-bit codes ``c + 1`` (3 where ``c`` is outside -1..1), 16 to a u32 word."""
    code = np.where((c >= -1) & (c <= 1), c.astype(np.int32) + 1, 3).astype(np.uint32)
    code = np.concatenate([code, np.zeros(-code.size % 16, np.uint32)]).reshape(-1, 16)
    return np.bitwise_or.reduce(code << (2 * np.arange(16, dtype=np.uint32)), axis=1).astype(np.uint32)


def kernels() -> dict[str, str]:
    """Which compiled kernel runs each family of forms on this machine (``warpsim env``):
    the unit's reconstructed ``datapath`` (no per-key data), a ``band`` kernel (a model per
    segment plus one bit per uncertain key), ``compact tables`` (session 6's gather pass, for
    CPUs without the AVX-512 subsets the kernels need), ``tables`` (16-bit forms), or ``NumPy``
    where there is no compiled path."""
    lib = library()
    if lib is None:
        return dict.fromkeys(("ex2", "lg2", "rcp rsqrt sqrt div", "sin cos", "tanh.f32", "f64", "16-bit"), "NumPy")
    trig = int(lib.warpsim_sfu_trig_available())
    return {
        "ex2": "datapath" if datapath_available() else "band" if bands_available() else "compact tables",
        "lg2": "datapath" if lib.warpsim_sfu_lg2_available() else "compact tables",
        "rcp rsqrt sqrt div": "band" if lib.warpsim_sfu_rs_simd() else "compact tables",
        "sin cos": {2: "datapath", 1: "band"}.get(trig, "compact tables"),
        "tanh.f32": "datapath" if lib.warpsim_sfu_tanh_available() else "compact tables",
        "f64": "band" if bands_available() else "compact tables",
        "16-bit": "tables",
    }


def bands_available() -> bool:
    """Whether the AVX-512 band kernels (``_sfu_band.c``) were built here."""
    lib = library()
    return lib is not None and bool(lib.warpsim_sfu_band_available())


def datapath_available() -> bool:
    """Whether the datapath kernels (``_sfu_band.c``: AVX-512 with VBMI and VNNI) were built here."""
    lib = library()
    return lib is not None and bool(lib.warpsim_sfu_datapath_available())


class Datapath:
    """MUFU's quadratic interpolator for a table of 64 segments of 2**17 keys, reconstructed from
    its words: per segment integers ``C1``, ``C2`` and a constant ``C0`` with 17 fraction bits
    such that every key's word is ``base + floor((C0 + C1 X + C2 S) / 2**17)``, X the key's low
    17 bits and S :func:`warpsim.ptx.sfu.truncated_square` of X.  Least squares through the
    words' midpoints gives C1, C2 (the nearest integers, or a neighbour), then every key bounds
    C0; a segment with no such integers raises :class:`ValueError`.
    ``benchmarks/sfu_datapath_fit.py`` checks the same form on ex2, rcp, rsq and sqrt
    (benchmarks/results/sfu-datapath.txt)."""

    def __init__(self, words: np.ndarray, base: int):
        L = 1 << 17
        w = np.ascontiguousarray(words, np.uint32)
        if w.size != 64 * L:
            raise ValueError(f"a datapath table has 64 segments of 2**17 keys, not {w.size} keys")
        self.c = _DatapathC()
        for s in range(64):
            N = w[s * L:(s + 1) * L].astype(np.int64) - base
            r = sfu.fit_datapath(N, N, 17)
            if r is None:
                raise ValueError(f"segment {s} fits no integer quadratic of the truncated square")
            C0, C1, C2 = r
            if not (0 <= C1 < 1 << 18 and -(1 << 14) <= C2 < 1 << 14):
                raise ValueError(f"segment {s}: coefficients out of the kernel's range: {C1}, {C2}")
            self.c.c0hi[s] = base + (C0 >> 17)
            self.c.c1[s] = C1
            self.c.c2lo[s] = (C0 & 0x1FFFF) | (C2 << 17)

    def words(self) -> np.ndarray:
        """Every key's word from the constants, in NumPy (the tests compare it with the table)."""
        X = np.arange(1 << 17, dtype=np.int64)
        S = sfu.truncated_square(X)
        c0hi, c1, c2lo = (np.frombuffer(f, np.int32).astype(np.int64) for f in (self.c.c0hi, self.c.c1, self.c.c2lo))
        lo, c2 = c2lo & 0x1FFFF, c2lo >> 17
        N = c0hi[:, None] + ((lo[:, None] + c1[:, None] * X + c2[:, None] * S) >> 17)
        return (N.reshape(-1) & 0xFFFFFFFF).astype(np.uint32)


class Band:
    """The band model of a table of ``nseg << xbits`` words (``_sfu_band.c``).

    Per segment of the key, a quadratic in its low ``xbits`` bits, ``V = c0q + round(X (c1 +
    X c2))`` in units of ``2**-F`` word (f32 arithmetic, u32 sum), ``word = base + (V >> F)``:
    least squares through the words' midpoints, then shifted so that the words that differ from
    the model's sit symmetrically about the word boundaries.  Evaluating the C model on every key
    then gives each segment's certainty threshold (a key whose fraction of V is farther from a
    boundary has the model's word) and one bit per key (an uncertain key's word is one more than
    the model's when its fraction is >= 1/2, one less below, where the bit is set).  A table the
    model cannot carry so raises :class:`ValueError`; :meth:`words` gives every key's word as the
    kernels form it (the tests compare them with the measured table)."""

    def __init__(self, words: np.ndarray, nseg: int, xbits: int):
        w = np.ascontiguousarray(words, np.uint32)
        L = 1 << xbits
        if w.size != nseg * L or nseg > 128 or nseg & (nseg - 1):
            raise ValueError(f"a band model needs nseg * 2**xbits words, nseg a power of 2 <= 128: {w.size}, {nseg}")
        self.n, self.nseg, self.xbits = w.size, nseg, xbits
        base, F = int(w.min()), 8                        # F: _sfu.h's BAND_F
        span = int(w.max()) - base + (1 << 18)
        if span >= 1 << 24:
            raise ValueError(f"a band model needs words within 2**24 of each other, not {span}")
        self.c = _BandC(base=base, F=F, nseg=nseg, xbits=xbits)
        # least squares per segment through the midpoints, in x = j / L (normal equations, no BLAS)
        x = np.arange(L) / L
        y = (w.astype(np.int64) - base).astype(np.float64).reshape(nseg, L) + 0.5
        pw = np.stack([np.sum(x**i) for i in range(5)])
        A = np.array([[pw[i + j] for j in range(3)] for i in range(3)])
        rhs = np.stack([y.sum(1), (y * x).sum(1), (y * (x * x)).sum(1)])
        c0, c1, c2 = np.linalg.inv(A) @ rhs
        c1, c2 = c1 / L, c2 / L**2
        self._set(c0, c1, c2, np.zeros(nseg))
        V = self._eval()
        word, fr = (V >> np.uint32(F)) + np.uint32(base), V & np.uint32((1 << F) - 1)
        code = (w - word).view(np.int32).reshape(nseg, L)
        fr = fr.reshape(nseg, L).astype(np.int64)
        lo = np.where(code < 0, fr, 0).max(1)
        hi = np.where(code > 0, fr, 1 << F).min(1)
        self._set(c0 + ((1 << F) - hi - lo) / 2.0**(F + 1), c1, c2, np.zeros(nseg))   # centred on 0
        V = self._eval()
        word, fr = (V >> np.uint32(F)) + np.uint32(base), V & np.uint32((1 << F) - 1)
        code = (w - word).view(np.int32)
        d = fr.astype(np.int32) - (1 << (F - 1))
        if not np.all((code == 0) | (code == np.where(d >= 0, 1, -1))):
            raise ValueError(f"the band model misses some words by more than one ({nseg} segments)")
        m = np.where(code != 0, np.abs(d), 255).reshape(nseg, L).min(1)
        self._set(c0 + ((1 << F) - hi - lo) / 2.0**(F + 1), c1, c2, m)
        if not np.array_equal(self._eval(), V):
            raise AssertionError("the threshold bits changed the model")
        self.uncertain = float(np.mean(np.abs(d).reshape(nseg, L) >= m[:, None]))
        self.bits = np.packbits(code != 0, bitorder="little")
        self.bits = np.concatenate([self.bits, np.zeros(-self.bits.size % 4, np.uint8)]).view(np.uint32)
        self.c.bits = self.bits.ctypes.data

    def _set(self, c0, c1, c2, m):
        n, F = self.nseg, self.c.F
        self.c.c0q[:n] = (np.round(np.asarray(c0) * 2.0**F).astype(np.int64) & 0xFFFFFFFF).tolist()
        self.c.c1[:n] = (np.asarray(c1) * 2.0**F).astype(np.float32).tolist()
        c2b = (np.asarray(c2) * 2.0**F).astype(np.float32).view(np.uint32)
        self.c.c2[:n] = ((c2b & np.uint32(0xFFFFFF00)) | np.asarray(m, np.uint32)).view(np.float32).tolist()
        t = np.stack([np.frombuffer(a, np.uint32) for a in (self.c.c1, self.c.c2, self.c.c0q)])
        self.c.pl[:] = t.view(np.uint8).reshape(3, 128, 4).transpose(0, 2, 1).reshape(-1).tolist()

    def _eval(self) -> np.ndarray:
        V = np.empty(self.n, np.uint32)
        library().warpsim_sfu_band_eval(ctypes.byref(self.c), self.n, V.ctypes.data)
        return V

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes + ctypes.sizeof(self.c)

    def words(self) -> np.ndarray:
        """Every key's word as the band kernels form it: the model, corrected where uncertain."""
        F = self.c.F
        V = self._eval()
        word = (V >> np.uint32(F)) + np.uint32(self.c.base)
        d = (V & np.uint32((1 << F) - 1)).astype(np.int32) - (1 << (F - 1))
        m = np.frombuffer(self.c.c2, np.uint32)[: self.nseg] & np.uint32(0xFF)
        unc = np.abs(d) >= np.repeat(m, 1 << self.xbits).astype(np.int32)
        bit = np.unpackbits(self.bits.view(np.uint8), bitorder="little")[: self.n].astype(np.uint32)
        step = np.where(d >= 0, bit, np.uint32(0) - bit)
        return np.where(unc, word + step, word)


class _Direct:
    """A 16-bit table read directly (128 KB)."""

    def __init__(self, t: np.ndarray):
        self.aux = np.ascontiguousarray(t, np.uint16)
        self.tab = _Tab(None, None, None, self.aux.ctypes.data, None, 0, 0)


_tabs: dict[str, object] = {}


def _tanh_model():
    """MUFU.TANH's datapath for the AVX-512 kernel (sfu_tanh.py), or None where that kernel was not
    built (no AVX-512 VBMI/VNNI: the compact table serves tanh)."""
    from warpsim.ptx import sfu_tanh

    lib = library()
    if not lib.warpsim_sfu_tanh_available():
        return None
    try:
        return sfu_tanh.TanhModel(lib)
    except ValueError:      # a table the datapath does not hold (checked on every key): the compact path
        return None


def _ex2_coefficients(words: np.ndarray) -> np.ndarray:
    """float64 ``[c0, c1, c2, 0]`` per segment of 2**17 keys of MUFU.EX2's positive half (the
    unit's 64 interpolation segments): the least-squares quadratic in the key's low 17 bits
    through each measured word's midpoint.  ``floor`` of it is within one word of the table on
    every key (benchmarks/results/sfu-interp.txt); the 2-bit codes carry the rest."""
    y = (words[: 1 << 23] & np.uint32(0x7FFFFF)).astype(np.float64).reshape(64, 1 << 17) + 0.5
    x = np.arange(1 << 17) * 2.0**-17
    c = np.linalg.lstsq(np.stack([np.ones_like(x), x, x * x], 1), y.T, rcond=None)[0]
    return np.stack([c[0], c[1] * 2.0**-17, c[2] * 2.0**-34, np.zeros(64)], 1)


# ---- rcp / rsq / sqrt: the band kernels of _sfu_rs.c (AVX-512) ----
class _RsTab(ctypes.Structure):
    _fields_ = [("planes", ctypes.c_void_p), ("bits", ctypes.c_void_p), ("L", ctypes.c_int32)]


#: Key bits per interpolation segment (128 segments per table) and the first word of the output binade.
_RS_L = {"rcp": 16, "rsq": 17, "sqrt": 17}
_RS_W0 = {"rcp": 0x3F000000, "rsq": 0x3F000000, "sqrt": 0x3F800000}
#: The forms the band kernels run (rcp, rsqrt, sqrt, div and the bare MUFU functions of those tables).
_RS_FORMS = frozenset({4, 5, 6, 7, 8, 9, 13, 14, 15, 16, 24, 25, 26})


class RsBand:
    """The band model of table ``name`` (rcp, rsq, sqrt) for the kernels of ``_sfu_rs.c``: per
    interpolation segment (128) a quadratic in the key's centred low bits, ``tot = base +
    round(X * (c1 + X * c2))`` in 24.8 fixed point (f32 arithmetic; least squares through the
    words' midpoints, the band then centred on the word boundaries), the segment's threshold
    ``th`` on the fraction byte's distance to a boundary, and one bit per key (word = model +-
    1 towards the fraction's side), all from every key of the measured table evaluated with
    the kernels' own arithmetic (``warpsim_sfu_rs_eval``).  :meth:`words` gives every key's
    word as the kernels form it; a table the model cannot carry raises ValueError."""

    def __init__(self, name: str, words: np.ndarray):
        L = _RS_L[name]
        self.w0, self.L = _RS_W0[name], L
        y = (words.view(np.int32) - np.int32(self.w0)).reshape(128, 1 << L)
        X = np.arange(1 << L, dtype=np.float64) - (1 << (L - 1))
        A = np.stack([np.ones_like(X), X, X * X], 1)
        rhs = np.stack([(row + 0.5) @ A for row in y], 1)
        c = np.linalg.solve(A.T @ A, rhs)                            # least squares through the midpoints
        self.coef = np.zeros((3, 128), np.uint32)                    # base, c1, c2 (+ th in c2's low byte)
        sc = 2.0 ** (L - 32)                                         # the kernels convert X 2**(32-L)
        self.coef[1] = (c[1] * 256 * sc).astype(np.float32).view(np.uint32)
        self.coef[2] = (c[2] * 256 * sc * sc).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFFF00)
        base = np.round(c[0] * 256).astype(np.int64)
        self.tab = _RsTab(None, None, L)
        for centre in (True, False):                                # centre each segment's band on 1/2
            fr, err = self._eval(base, y)
            k = np.flatnonzero(err)                                 # the keys whose floor is not the word
            lo, hi = self._edges(k, fr[k], err[k])
            if centre:
                base -= (lo + hi - 256) // 2
        th = np.clip(np.maximum(lo, 256 - hi), 0, 128)
        fk, ek, tk = fr[k], err[k], th[k >> L]
        if not np.all((np.minimum(fk, 256 - fk) <= tk) & (ek == np.where(fk >= 128, 1, -1))):
            raise ValueError(f"the band model of {name} misses some words by more than one")
        self.coef[2] |= (th + 1).astype(np.uint32)                  # certain: distance >= th + 1
        self._set_planes()
        bits = np.zeros(y.size, bool)
        bits[k] = True
        self.bits = np.packbits(bits, bitorder="little").view(np.uint32)
        self.tab.bits = self.bits.ctypes.data

    @property
    def uncertain(self) -> float:
        """The fraction of the table's keys outside the band (one bit read per such lane)."""
        tot = self.tot()
        fr = (tot & np.uint32(255)).astype(np.int32)
        th = np.repeat((self.coef[2] & np.uint32(255)).astype(np.int32) - 1, 1 << self.L)
        return float(np.mean(np.minimum(fr, 256 - fr) <= th))

    def _set_planes(self):
        # plane 4 c + j: byte j of coefficient c of every segment (the kernels' byte permutes)
        self.planes = np.ascontiguousarray(self.coef.view(np.uint8).reshape(3, 128, 4).transpose(0, 2, 1))
        self.tab.planes = self.planes.ctypes.data

    def _eval(self, base, y):
        self.coef[0] = (base & 0xFFFFFFFF).astype(np.uint32)
        self._set_planes()
        tot = self.tot()
        return (tot & np.uint32(255)).astype(np.int32), y.reshape(-1) - (tot >> np.uint32(8)).view(np.int32)

    def tot(self) -> np.ndarray:
        """The model of every key (24.8 fixed point relative to the binade's first word), as the kernels compute it."""
        out = np.empty(128 << self.L, np.uint32)
        library().warpsim_sfu_rs_eval(ctypes.byref(self.tab), out.size, out.ctypes.data)
        return out

    def _edges(self, k, fr, err):
        """Per segment, over keys k (fraction bytes fr, word - floor err): the greatest fraction
        byte of a key whose model is a word too high, the least of one a word too low (-1 / 256
        where none)."""
        lo, hi = np.full(128, -1, np.int64), np.full(128, 256, np.int64)
        s = k >> self.L
        np.maximum.at(lo, s[err == -1], fr[err == -1])
        np.minimum.at(hi, s[err == 1], fr[err == 1])
        return lo, hi

    def words(self) -> np.ndarray:
        """Every key's word as the kernels form it (certain: the model's; else corrected by its bit)."""
        tot = self.tot()
        th1 = np.repeat(self.coef[2] & np.uint32(255), 1 << self.L)
        fr = tot & np.uint32(255)
        unc = np.minimum(fr, 256 - fr) < th1
        bit = np.unpackbits(self.bits.view(np.uint8), bitorder="little").astype(np.uint32)
        step = np.where(unc, np.where(fr >= 128, bit, np.uint32(0) - bit), np.uint32(0))
        return np.uint32(self.w0) + (tot >> np.uint32(8)) + step

    @property
    def nbytes(self) -> int:
        return self.planes.nbytes + self.bits.nbytes


def _lg2_datapath(words: np.ndarray) -> np.ndarray:
    """MUFU.LG2's interpolator (``_sfu_lg2.c``): the table's two functions ``P`` of M (x < 1:
    the words are ``trunc24(P - 1)``; x >= 1: ``trunc24(P)``; P has 36 fraction bits), each 64
    segments of 2**17 keys, on which ``P * 2**36 = floor((C0 + C1 X + C2 S) / 4)`` with X the
    key's low 17 bits and S :func:`warpsim.ptx.sfu.truncated_square` of X -- on every key but
    those next to x = 1 (x >= 1: M < 2**10; x < 1: M >= 2**23 - 2**12; the kernel sends them to
    the scalar path; benchmarks/results/sfu-lg2-datapath.txt).  As
    :class:`Datapath`: least squares (every 7th key) gives C1, C2 or a neighbour, then every
    key's truncation cell bounds C0.  Returns the kernel's nine byte planes (as u32 words)."""
    w = np.ascontiguousarray(words, np.uint32)
    L = 1 << 17
    c0h, cb, c0l = (np.zeros(128, np.uint32) for _ in range(3))
    for s in range(128):
        ws = w[s * L:(s + 1) * L]
        T = (ws.view(np.float32).astype(np.float64) * 2.0**36).astype(np.int64)     # exact: 36 fraction bits
        u = (((ws & np.uint32(0x7FFFFFFF)) + np.uint32(1)).view(np.float32).astype(np.float64) * 2.0**36
             ).astype(np.int64) - np.abs(T)                                      # the word's ulp
        lo, hi = (T, T + u - 1) if s >= 64 else (T - u + 1 + (1 << 36), T + (1 << 36))   # P * 2**36 in
        keep = slice(1 << 10, None) if s == 64 else slice(0, L - (1 << 12)) if s == 63 else slice(None)
        r = sfu.fit_datapath(lo, hi, 2, keep=keep, ls=slice(1, L, 7), reach=4)
        if r is None:
            raise ValueError(f"lg2 segment {s} fits no integer quadratic of the truncated square")
        C0, C1, C2 = r
        if not (0 <= C0 < 1 << 38 and 0 <= C1 < 1 << 18 and -(1 << 13) <= C2 < 1 << 13):
            raise ValueError(f"lg2 segment {s}: coefficients out of the kernel's range: {C0}, {C1}, {C2}")
        c0h[s], cb[s], c0l[s] = C0 >> 7, (C1 << 14) | (C2 & 0x3FFF), C0 & 127
    t = np.stack([c0h, cb, c0l])
    planes = t.view(np.uint8).reshape(3, 128, 4).transpose(0, 2, 1).reshape(12, 128)[:9]   # C0 & 127: byte 0
    return np.ascontiguousarray(planes).reshape(-1).view(np.uint32)


#: Tables read through a band model (``_sfu_band.c``) where the CPU has AVX-512, besides ex2:
#: name -> (segments, low key bits).  MUFU.RCP64H and RSQ64H interpolate over 128 segments
#: (RSQ64H: 64 per binade of its key [p, M]); the band model leaves 1.4% / 1.6% of keys uncertain.
_BANDS = {"rcp64h": (128, 13), "rsq64h": (128, 14)}


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
                    c = Compact(words[:-k], aux=words[-k:])
                    c.tanh = _tanh_model()
                    _tabs[name] = c
                else:
                    band = bands_available() and (name == "ex2" or name in _BANDS)   # (the datapath needs them too)
                    c = Compact(words, aux=_ex2_coefficients(words) if name == "ex2" and not band else None)
                    if name in ("rcp", "rsq", "sqrt"):
                        c.add_corrections(sfu._corrections(name))
                    if name == "sin":   # the AVX-512 kernel's model (_sfu_trig.c)
                        _sfu_trig.attach(library(), c)
                    elif name == "lg2" and library().warpsim_sfu_lg2_available():   # _sfu_lg2.c's datapath
                        c.aux = _lg2_datapath(words)
                        c.tab.aux = c.aux.ctypes.data
                    elif name == "ex2" and datapath_available():   # the unit's own datapath: no key data
                        c.dp = Datapath(words[: 1 << 23], 0x3F800000)
                        c.tab.dp = ctypes.addressof(c.dp.c)
                    elif band:     # ex2: the positive half, the unit's 64 segments of 2**17 keys
                        c.band = Band(words[: 1 << 23], 64, 17) if name == "ex2" else Band(words, *_BANDS[name])
                        c.tab.band = ctypes.addressof(c.band.c)
                    elif name == "ex2":   # the positive half against the C's per-segment quadratic
                        d = np.empty(1 << 23, np.int32)
                        library().warpsim_sfu_ex2_model(np.ascontiguousarray(words).ctypes.data,
                                                        c.aux.ctypes.data, d.ctypes.data)
                        c.add_corrections(d)
                    if name in _RS_L and library().warpsim_sfu_rs_simd():
                        with contextlib.suppress(ValueError):   # a model that misses: _sfu.c's path
                            c.rs = RsBand(name, words)
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
    if table == "tanh" and t.tanh is not None and num == FORMS["tanh.approx.f32"][0]:   # _sfu_tanh.c
        lib.warpsim_sfu_tanh(ctypes.byref(t.tanh.c), a.ctypes.data, y.ctypes.data, a.size)
        return y
    rs = getattr(t, "rs", None)
    if rs is not None and num in _RS_FORMS:          # rcp/rsq/sqrt/div: the band kernels (_sfu_rs.c)
        rc = lib.warpsim_sfu_rs(num, a.ctypes.data, None if b is None else b.ctypes.data, y.ctypes.data, a.size,
                                ctypes.byref(t.tab), ctypes.byref(rs.tab))
        if rc:
            raise AssertionError(f"warpsim_sfu_rs: form {num} unknown to the compiled library")
        return y
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
