"""The special-function unit (MUFU) of sm_90, bit-exact: each function is a table over its
reduced key plus exact rescaling, measured on the GPU.

Every function takes and returns raw bit patterns (vectorised, any shape; inputs are not
modified).  The MUFU instructions flush subnormal operands and results to zero and write the
canonical NaN ``0x7FFFFFFF`` (f32) for every NaN or invalid operand.  What each one reads:

=============  ===========================================================================
``rcp``        f32 ``s*1.M*2**e``: ``table[M] * 2**-e``                        (2**23 keys)
``rsq``        ``[p = e mod 2, M]``: ``table * 2**-(e-p)/2``                    (2**24 keys)
``sqrt``       ``[p, M]``: ``table * 2**(e-p)/2``                               (2**24 keys)
``ex2``        ``|x|`` as fixed point, 23 fraction bits, truncated: ``n + k*2**-23``;
               ``table[sign, k] * 2**(+-n)`` (sign-magnitude: 2 x 2**23 keys)
``lg2``        ``m = 1.M``, exponent ``e``: the unit's ``P(m)`` (36 fraction bits) plus ``e``,
               truncated to f32; the tables hold ``P`` truncated (x in [1, 2)) and
               ``P - 1`` truncated (x in [0.5, 1)), which together fix every result
``sin/cos``    the angle ``t`` in turns: ``k = frac(|t|)`` as 25-bit fixed point, truncated;
               ``sin = sign(t) S[k]``, ``cos = S[k + 2**23 mod 2**25]``, ``S[k + 2**24] = -S[k]``
``tanh``       ``x`` below 2**-8, +-1 from 8; between, a table per binade over the 17..21
               significand bits the unit reads (6,684,672 keys; the unit's datapath, an
               integer quadratic per 2**17 keys of a truncated square: :mod:`.sfu_tanh`)
``ex2/tanh``   ``.f16``/``.bf16``: all 65,536 patterns (the ``x2`` forms are two lookups)
``rcp64h``     f64 high word ``s:E:M20``: ``table[M20]``, exponent rescaled; the low word is
``rsq64h``     ignored and written as zero (``rsq64h``: key ``[p, M20]``)
=============  ===========================================================================

Provenance: ``warpsim/data/sfu_sm90.npz``, built by :mod:`warpsim.validation.sfu_tables` from
one :mod:`warpsim.validation.sfu_collect` run (NVIDIA H200, driver 580.159.04 / CUDA 13.0,
2026-11-26); the H100 (same GH100 die) gives the same words (docs/validation.md records the
exhaustive runs).  ``meta()`` returns the run's JSON.  ``warpsim/data/sfu_sm90_trig.npz``
(sin/cos/tanh) comes from :mod:`warpsim.validation.sfu_trig` runs on an H100: the sine over the
first half turn as a float64 cubic per 2**13 keys plus each key's int8 distance, tanh as
lzma-packed second differences.  The tables load lazily, one at a time, on first use.

Speed: the fast paths are branch-free vectorised passes around one gather (NumPy's ``where``
costs ~10x more on masks as unpredictable as random signs; rare lanes -- zeros, subnormals,
Inf/NaN, results near the range limits -- are patched apart).  ``rcp``/``rsq``/``sqrt`` gather
an int8 correction to the IEEE f32 operation (``1/x``, ``1/sqrt(x)``, ``sqrt(x)``) instead of
the 32/64 MB word table: ``model + correction`` is the measured word for every key, derived
from the table on first use (:func:`_corrections`).
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path

import numpy as np

_U32 = np.uint32
_NAN = _U32(0x7FFFFFFF)
_INF = _U32(0x7F800000)
_SIGN = _U32(0x80000000)
_MANT = _U32(0x007FFFFF)

_cache: dict[str, np.ndarray] = {}
_lock = threading.RLock()  # decoders may read other tables


_PATH = Path(__file__).resolve().parent.parent / "data" / "sfu_sm90.npz"


def _npz():
    return np.load(_PATH)


def meta() -> dict:
    """Where the tables come from: device, driver, date, harness."""
    with _npz() as z:
        return json.loads(bytes(z["meta"]).decode())


def truncated_square(X: np.ndarray) -> np.ndarray:
    """``S`` of the unit's squarer for 17-bit ``X`` (int64): ``2**18 S`` is ``X*X`` less every
    partial product of weight below 2**19 in the folded squarer array (pairs ``2 x_i x_j
    2**(i+j)`` with ``i + j < 18``, squares ``x_i 2**(2i)`` with ``i < 10``), computed as
    ``H*H - h0 + 2 Q``: ``H = X >> 9``, ``h0 = H & 1``, ``Q`` the sum over m = 2..8 of bit
    ``18 - m`` of X times ``(X & 511) >> m``.  Every MUFU interpolation segment reconstructed so
    far is ``floor((C0 + C1 X + C2 S) / 2**k)`` with it (benchmarks/results/sfu-tanh.txt,
    sfu-datapath.txt)."""
    X = np.asarray(X, np.int64)
    H, lo = X >> 9, X & 511
    Q = sum(((X >> (18 - m)) & 1) * (lo >> m) for m in range(2, 9))
    return H * H - (H & 1) + 2 * Q


@functools.lru_cache(maxsize=2)
def _keys_and_squares(n: int) -> tuple[np.ndarray, np.ndarray]:
    X = np.arange(n, dtype=np.int64)
    X.setflags(write=False)
    S = truncated_square(X)
    S.setflags(write=False)
    return X, S


def fit_datapath(lo: np.ndarray, hi: np.ndarray, shift: int, keep=slice(None), ls=slice(None),
                 reach: int = 3) -> tuple[int, int, int] | None:
    """The interpolator's integers on one segment: ``(C0, C1, C2)`` with ``lo <= floor((C0 + C1 X
    + C2 S) / 2**shift) <= hi`` on every key ``keep`` selects (``lo``, ``hi``: int64 per key of
    the segment, X the key, S its :func:`truncated_square`), C0 the middle of its feasible range;
    or None.  Least squares through the cells' midpoints (on the keys ``ls`` selects; normal
    equations, no BLAS) gives C1 and C2, or a neighbour within ``reach``."""
    lo, hi = np.asarray(lo), np.asarray(hi)
    if lo.ndim != 1 or lo.shape != hi.shape or lo.dtype.kind not in "iu" or hi.dtype.kind not in "iu":
        raise ValueError(f"fit_datapath needs integer lo and hi of one segment's keys, of one length: "
                         f"{lo.dtype}{lo.shape}, {hi.dtype}{hi.shape}")
    X, S = _keys_and_squares(lo.size)
    x, sq = X[ls] * 2.0**-shift, S[ls] * 2.0**-shift
    y = (lo[ls] + hi[ls]) / 2.0 + 0.5
    A = np.array([[x.size, x.sum(), sq.sum()], [x.sum(), (x * x).sum(), (x * sq).sum()],
                  [sq.sum(), (x * sq).sum(), (sq * sq).sum()]])
    c = np.linalg.solve(A, np.array([y.sum(), (y * x).sum(), (y * sq).sum()]))
    lo, hi, X, S = lo[keep], hi[keep], X[keep], S[keep]
    for d1, d2 in sorted(((i, j) for i in range(-reach, reach + 1) for j in range(-reach, reach + 1)),
                         key=lambda d: abs(d[0]) + abs(d[1])):
        C1, C2 = int(round(c[1])) + d1, int(round(c[2])) + d2
        V = C1 * X + C2 * S
        a, b = int(((lo << shift) - V).max()), int((((hi + 1) << shift) - V).min())
        if a < b:
            return (a + b - 1) // 2, C1, C2
    return None


def table(name: str) -> np.ndarray:
    """The measured table ``name`` (u16 or u32 words), decoded on first use and cached."""
    t = _cache.get(name)
    if t is not None:
        return t
    with _lock:
        if name in _TRIG_DECODERS and name not in _cache:
            with np.load(_TRIG_PATH) as z:
                v = _TRIG_DECODERS[name](z)
            v.flags.writeable = False
            _cache[name] = v
        if name not in _cache:
            with _npz() as z:
                dtype = np.dtype(str(z[name + ".dtype"]))
                small = z[name + ".d"]
                d = np.empty(small.size + 1, dtype)
                d[0] = int(z[name + ".first"])
                d[1:] = small.astype(dtype)                  # modulo the width: cumsum wraps
                d[1:][z[name + ".xi"]] = (z[name + ".xv"] & ((1 << (8 * dtype.itemsize)) - 1)).astype(dtype)
            v = np.cumsum(d, dtype=dtype)
            v.flags.writeable = False
            _cache[name] = v
    return _cache[name]


def _split(b):
    b = np.asarray(b, _U32)
    return b, b >> _U32(23) & _U32(255)


def patch(y, b, lanes, full):
    """``y`` with the lanes where ``lanes`` is set replaced by ``full`` of those operands (the
    fast paths leave zeros, infinities, NaNs and results near the range limits to ``full``)."""
    idx = np.flatnonzero(lanes)
    if idx.size:
        y = np.array(y, _U32, copy=True).reshape(-1)
        y[idx] = full(np.asarray(b).reshape(-1)[idx])
        y = y.reshape(np.shape(b))
    return y


def _special(b, E, zero, inf_pos, inf_neg, neg_nan=False):
    """The answers of the unit for exponent fields 0 and 255 (zero(sign) for +-0 and
    subnormals), and NaN for negative operands when ``neg_nan``; other lanes -> None."""
    s = b & _SIGN
    y = np.where(E == 0, zero(s), np.where(s != 0, inf_neg, inf_pos))
    y = np.where((E == 255) & ((b & _MANT) != 0), _NAN, y)
    if neg_nan:
        y = np.where((s != 0) & (E != 0), _NAN, y)
    return y.astype(_U32)


def _rcp_full(b):
    b, E = _split(b)
    t = table("rcp")[b & _MANT]
    y = t + ((_U32(127) - E) << _U32(23))                      # exponent rescaled (mod 2**32)
    y = np.where(E >= (t >> _U32(23)) + _U32(127), _U32(0), y) | (b & _SIGN)  # flushed results
    odd = (E == 0) | (E == 255)
    return np.where(odd, _special(b, E, lambda s: s | _INF, _U32(0), _SIGN), y)


def _corrections(name: str) -> np.ndarray:
    """int8 ``table - model`` per key of ``name`` (rcp: M; rsq/sqrt: the exponent's low bit and M),
    where the model is the IEEE f32 operation (``1/r``, ``1/sqrt(r)``, ``sqrt(r)``) on the reduced
    operand: derived from the measured table on first use, so ``model + correction`` is the table
    word for word.  The fast paths add it to the operation on the operand itself (the IEEE
    result scales exactly with the operand's exponent)."""
    key = name + ".c"
    c = _cache.get(key)
    if c is not None:
        return c
    t = table(name)
    with _lock:
        if key not in _cache:
            if name == "rcp":
                r = np.arange(0x3F800000, 0x40000000, dtype=_U32).view(np.float32)
                d = t.view(np.int32) - (np.float32(1) / r).view(np.int32)
            else:
                # key = the operand's low 24 bits: bit 23 set (odd exponent field) -> r in [1, 2),
                # stored at p = 0; clear -> r in [2, 4), stored at p = 1
                d = np.empty(1 << 24, np.int32)
                for lo, hi, base in ((0, 1 << 23, 0x40000000), (1 << 23, 1 << 24, 0x3F800000)):
                    s = np.sqrt(np.arange(base, base + (1 << 23), dtype=_U32).view(np.float32))
                    m = s if name == "sqrt" else np.float32(1) / s
                    stored = t[(1 << 23) - lo:(1 << 24) - lo] if lo == 0 else t[:1 << 23]
                    np.subtract(stored.view(np.int32), m.view(np.int32), out=d[lo:hi])
            if d.min() < -128 or d.max() > 127:
                raise AssertionError(f"MUFU {name}: corrections exceed int8")
            c = d.astype(np.int8)
            c.flags.writeable = False
            _cache[key] = c
    return _cache[key]


def rcp(b):
    """MUFU.RCP on f32 bit patterns."""
    b = np.asarray(b, _U32)
    with np.errstate(all="ignore"):
        y = (np.float32(1) / b.view(np.float32)).view(np.int32) + _take(_corrections("rcp"), b & _MANT)
    odd = ((b & ~_SIGN) - _U32(0x00800000)) >= _U32(0x7E000000)   # exponent field 0 or >= 253
    return patch(y.view(_U32), b, odd, _rcp_full)


def _rsq_sqrt_full(b, name, sgn, zero, inf_pos):
    b, E = _split(b)
    p = ~E & _U32(1)                                            # (E - 127) mod 2
    t = table(name)[(p << _U32(23)) | (b & _MANT)]
    h = (E.view(np.int32) - (127 + p.view(np.int32))) >> 1    # (e - p) / 2
    y = (t.view(np.int32) + (h << 23 if sgn > 0 else -(h << 23))).view(_U32)
    odd = ((E - _U32(1)) >= _U32(254)) | (b >= _SIGN)
    return np.where(odd, _special(b, E, zero, inf_pos, _NAN, neg_nan=True), y)


def _rsq_sqrt(b, name, sgn, zero, inf_pos):
    b = np.asarray(b, _U32)
    with np.errstate(all="ignore"):
        r = np.sqrt(b.view(np.float32))
        if sgn < 0:
            r = np.float32(1) / r
    y = (r.view(np.int32) + _take(_corrections(name), b & _U32(0xFFFFFF))).view(_U32)
    y = _sel(b >= _U32(0x80800000), _NAN, y)                    # negative normal, -Inf, -NaN
    rare = ((b & ~_SIGN) - _U32(0x00800000)) >= _U32(0x7F000000)  # zero, subnormal, Inf, NaN
    return patch(y, b, rare, lambda v: _rsq_sqrt_full(v, name, sgn, zero, inf_pos))


def rsq(b):
    """MUFU.RSQ on f32 bit patterns."""
    return _rsq_sqrt(b, "rsq", -1, lambda s: s | _INF, _U32(0))


def sqrt(b):
    """MUFU.SQRT on f32 bit patterns."""
    return _rsq_sqrt(b, "sqrt", 1, lambda s: s, _INF)


def _take(t, idx):
    """``t[idx]`` for u32 indices (np.take on intp indices is the fastest gather NumPy has)."""
    return t.take(idx.astype(np.intp))


def _ex2_full(b):
    b, E = _split(b)
    a = (b & ~_SIGN).view(np.float32)
    with np.errstate(invalid="ignore"):
        q = np.floor(np.minimum(a, np.float32(256)) * np.float32(2.0**23)).astype(_U32)
    n = (q >> _U32(23)).view(np.int32)
    neg = b >= _SIGN
    t = table("ex2")[(q & _MANT) | ((b & _SIGN) >> _U32(8))]
    f = (t >> _U32(23)).view(np.int32) + np.where(neg, -n, n)   # the result's exponent field
    shift = n.view(_U32) << _U32(23)
    y = np.where(neg, t - shift, t + shift)                     # modulo 2**32
    y = np.where(f <= 0, _U32(0), np.where(f >= 255, _INF, y))
    odd = (E == 0) | (E == 255)
    return np.where(odd, _special(b, E, lambda s: np.full_like(s, 0x3F800000), _INF, _U32(0)), y)


def _sel(cond, a, b):
    """``np.where(cond, a, b)`` for u32 words without a branch per element (NumPy's where and
    putmask cost ~10x more on unpredictable masks, such as operands of random sign)."""
    m = np.negative(cond.view(np.uint8).astype(_U32))           # all ones where cond
    return b ^ ((a ^ b) & m)


def ex2(b):
    """MUFU.EX2 on f32 bit patterns."""
    b = np.asarray(b, _U32)
    with np.errstate(all="ignore"):
        q = ((b & ~_SIGN).view(np.float32) * np.float32(2.0**23)).astype(np.int32).view(_U32)  # |x| < 64
    mask = (b.view(np.int32) >> 31).view(_U32)                  # 0 or all ones (negative)
    shift = (q >> _U32(23)) << _U32(23)
    y = _take(table("ex2"), (q & _MANT) | (mask & _U32(0x800000))) + ((shift ^ mask) - mask)
    rare = ((b & ~_SIGN) - _U32(0x00800000)) >= _U32(0x42000000)  # 0, subnormal, |x| >= 64
    return patch(y, b, rare, _ex2_full)


def _lg2_full(b):
    zero = lambda s: np.full_like(s, 0xFF800000)  # noqa: E731
    b, E = _split(b)
    return np.where(((E - _U32(1)) >= _U32(254)) | (b >= _SIGN), _special(b, E, zero, _INF, _NAN, neg_nan=True),
                    _lg2_fast(b))


def _lg2_fast(b):
    E1 = ((b >> _U32(23)) & _U32(255)) + _U32(1)
    up = (E1 >> _U32(7)) & _U32(1)                               # exponent field >= 127 (fields 1..254)
    v = _take(table("lg2"), (b & _MANT) | (up << _U32(23)))
    e = E1.view(np.int32) - (128 - 1) - up.view(np.int32)      # e (x >= 1) or e + 1 (x < 1)
    v = v.view(np.float32).astype(np.float64) + e               # e + P, exact
    y = (v.view(np.uint64) & np.uint64(0xFFFFFFFFE0000000)).view(np.float64)  # truncated
    return y.astype(np.float32).view(_U32)


def lg2(b):
    """MUFU.LG2 on f32 bit patterns."""
    b = np.asarray(b, _U32)
    y = _sel(b >= _U32(0x80800000), _NAN, _lg2_fast(b))         # negative normal, -Inf, -NaN
    rare = ((b & ~_SIGN) - _U32(0x00800000)) >= _U32(0x7F000000)  # zero, subnormal, Inf, NaN
    return patch(y, b, rare, _lg2_full)


def half(name: str, b):
    """A 16-bit MUFU function (``ex2_f16``, ``ex2_bf16``, ``tanh_f16``, ``tanh_bf16``)."""
    return table(name)[np.asarray(b, np.uint16)]


def _hi64_full(h, name):
    """RCP64H/RSQ64H on high words ``h`` (u32), every case (the fast paths patch with it)."""
    s, E, M = h & _SIGN, ((h >> _U32(20)) & _U32(2047)).astype(np.int32), h & _U32(0xFFFFF)
    e = E - 1023
    if name == "rcp64h":
        key, shift = M, -e
    else:
        p = e & 1
        key, shift = (p.astype(_U32) << _U32(20)) | M, -((e - p) >> 1)
    t = table(name)[key]
    f = ((t >> _U32(20)) & _U32(2047)).astype(np.int32) + shift
    mag = (t & _U32(0xFFFFF)) | (np.clip(f, 0, 2047).astype(_U32) << _U32(20))
    y = np.where(f <= 0, _U32(0), np.where(f >= 2047, _U32(0x7FF00000), mag)) | s
    if name == "rcp64h":
        y = np.where(E == 0, s | _U32(0x7FF00000), y)
        return np.where(E == 2047, np.where(M != 0, _NAN, s), y)
    y = np.where(s != 0, _NAN, y)
    y = np.where(E == 0, s | _U32(0x7FF00000), y)
    return np.where(E == 2047, np.where((M != 0) | (s != 0), _NAN, _U32(0)), y)


def rcp64h(b):
    """MUFU.RCP64H (rcp.approx.ftz.f64) on f64 bit patterns: the high word in, the high word
    out, the low word zero."""
    h = (np.asarray(b, np.uint64) >> np.uint64(32)).astype(_U32)
    E = (h >> _U32(20)) & _U32(2047)
    y = (table("rcp64h")[h & _U32(0xFFFFF)] + ((_U32(1023) - E) << _U32(20))) | (h & _SIGN)
    y = patch(y, h, (E - _U32(1)) >= _U32(2044), lambda v: _hi64_full(v, "rcp64h"))
    return y.astype(np.uint64) << np.uint64(32)


def rsq64h(b):
    """MUFU.RSQ64H (rsqrt.approx.ftz.f64) on f64 bit patterns, as :func:`rcp64h`."""
    h = (np.asarray(b, np.uint64) >> np.uint64(32)).astype(_U32)
    E = (h >> _U32(20)) & _U32(2047)
    p = ~E & _U32(1)                                            # (E - 1023) mod 2
    t = table("rsq64h")[(p << _U32(20)) | (h & _U32(0xFFFFF))]
    y = (t.view(np.int32) - (((E.view(np.int32) - (1023 + p.view(np.int32))) >> 1) << 20)).view(_U32)
    y = patch(y, h, ((E - _U32(1)) >= _U32(2046)) | (h >= _SIGN), lambda v: _hi64_full(v, "rsq64h"))
    return y.astype(np.uint64) << np.uint64(32)


# ---------------------------------------------------------------------------------------------
# MUFU.TANH, MUFU.SIN, MUFU.COS (warpsim/data/sfu_sm90_trig.npz, warpsim.validation.sfu_trig)
# ---------------------------------------------------------------------------------------------

_TRIG_PATH = Path(__file__).resolve().parent.parent / "data" / "sfu_sm90_trig.npz"

#: MUFU.TANH: |x| < 2**-8 (exponent field <= 118) -> x; >= 8 (field >= 130) -> +-1; in between a table
#: per binade over the mantissa bits the unit reads (the low ``tanh.shift[E - 119]`` bits are ignored).
TANH_E0, TANH_E1 = 119, 129
#: MUFU.SIN/COS: the angle in turns as fixed point, 25 fraction bits (truncated); the answers over
#: the first half turn (2**24 points; the second half is their negation, bit for bit, as the
#: device run checked) stored as a cubic per segment of 2**SIN_SEG points plus each point's
#: distance from it.
SIN_BITS, SIN_SEG, SIN_DEG = 25, 13, 3


def _unpack2(p: np.ndarray) -> np.ndarray:
    """u32 words from lzma-compressed int32 second differences (first two words kept)."""
    import lzma

    d = np.frombuffer(lzma.decompress(np.asarray(p).tobytes()), np.int32).astype(np.int64)
    v = np.empty_like(d)
    v[:2] = d[:2]
    if d.size > 2:
        with np.errstate(over="ignore"):
            v[1:] = d[0] + np.cumsum(np.cumsum(np.concatenate([[d[1] - d[0]], d[2:]])))
    return (v & 0xFFFFFFFF).astype(_U32)


def _tanh_table(z) -> np.ndarray:
    """[answers of binades 119..129 | 1.0 | 13 words (offset | shift << 27) for fields 118..130]."""
    t = _unpack2(z["tanh.d"])
    sh = z["tanh.shift"].astype(np.int64)
    n = np.cumsum(np.concatenate([[0], 1 << (23 - sh)]))
    off = np.concatenate([[0], n[:-1], [t.size]])               # 118: any word (patched), 130: the 1.0
    shift = np.concatenate([[23], sh, [23]])
    return np.concatenate([t, [0x3F800000], (off | (shift << 27)).astype(_U32)]).astype(_U32)


def _sin_res(z) -> np.ndarray:
    import lzma

    return np.frombuffer(lzma.decompress(np.asarray(z["sin.res"]).tobytes()), np.int8).copy()


_TRIG_DECODERS = {
    "tanh": _tanh_table,
    "sin": lambda z: _sin_table(z),
    "sin.res": _sin_res,
    "sin.coef": lambda z: np.array(z["sin.coef"], np.float64),
    "sin.xi": lambda z: np.array(z["sin.xi"], np.int64),
    "sin.xv": lambda z: np.array(z["sin.xv"], _U32),
}


def _tanh_full(b):
    a = b & ~_SIGN
    y = np.where(a <= _U32(0x3B7FFFFF), b, _tanh_fast(b))      # |x| < 2**-8: x itself
    return np.where(a > _INF, _NAN, y)


def _tanh_fast(b):
    t = table("tanh")
    a = b & ~_SIGN
    E = np.clip(a >> _U32(23), _U32(TANH_E0 - 1), _U32(TANH_E1 + 1)) - _U32(TANH_E0 - 1)
    w = _take(t[-(TANH_E1 - TANH_E0 + 3):], E)
    return _take(t, (w & _U32(0x7FFFFFF)) + ((a & _MANT) >> (w >> _U32(27)))) | (b & _SIGN)


def tanh(b):
    """MUFU.TANH on f32 bit patterns (odd; NaN -> 0x7FFFFFFF; subnormals pass unchanged)."""
    b = np.asarray(b, _U32)
    rare = ((b & ~_SIGN) - _U32(0x3B800000)) >= _U32(0x7F800000 - 0x3B800000)  # |x| < 2**-8, NaN
    return patch(_tanh_fast(b), b, rare, _tanh_full)


def sin_model(coef: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The smooth part of MUFU.SIN at fixed-point angles ``k`` (u32 f32 bits): the segment's cubic
    in float64, IEEE multiply and add only (the same bits everywhere), rounded to f32."""
    L = 1 << SIN_SEG
    x = ((k & (L - 1)).astype(np.float64) - L / 2) * (1.0 / L)
    seg = k >> SIN_SEG
    v = coef[:, 0].take(seg) * x
    for j in range(1, SIN_DEG):
        v += coef[:, j].take(seg)
        v *= x
    v += coef[:, SIN_DEG].take(seg)
    return v.astype(np.float32).view(_U32)


def _sin_table(z) -> np.ndarray:
    """MUFU.SIN over the first half turn (2**24 words, 64 MB), evaluated once from the stored
    cubics and distances: the fast paths then take one gather."""
    L = 1 << SIN_SEG
    c = table("sin.coef")
    x = (np.arange(L, dtype=np.float64) - L / 2) * (1.0 / L)       # as sin_model, per segment
    v = c[:, :1] * x
    for j in range(1, SIN_DEG):
        v += c[:, j:j + 1]
        v *= x
    v += c[:, SIN_DEG:]
    y = (v.astype(np.float32).view(np.int32).reshape(-1) + table("sin.res")).view(_U32)
    y[table("sin.xi")] = table("sin.xv")
    return y


def _sin_at(k: np.ndarray) -> np.ndarray:
    """MUFU.SIN's answer at fixed-point angles ``k`` (intp in [0, 2**24), the first half turn;
    the second half is the first negated, bit for bit), from the stored cubics and distances."""
    r = table("sin.res").take(k)
    y = (sin_model(table("sin.coef"), k).view(np.int32) + r).view(_U32)
    ex = r == -128
    if ex.any():
        xi = table("sin.xi")
        y[ex] = table("sin.xv")[np.searchsorted(xi, k[ex])]
    return y


def _turn_key(t):
    """The fixed-point angle the unit reads from ``t`` (turns, f32 bits): frac(|t|) truncated to
    25 bits (|t| >= 2**23 is an integer: 0; Inf/NaN lanes -> 0, masked by the caller).  All in
    f32, exactly: frac(a) of a float below 2**24 is representable, and so is its 2**25 multiple."""
    a = np.fmin((t & ~_SIGN).view(np.float32), np.float32(2.0**24))
    return ((a - np.floor(a)) * np.float32(1 << SIN_BITS)).astype(np.intp)


_HALF = (1 << (SIN_BITS - 1)) - 1


def sin(t):
    """MUFU.SIN on f32 bit patterns ``t`` (the angle in turns): odd; Inf/NaN -> 0x7FFFFFFF."""
    t = np.asarray(t, _U32)
    k = _turn_key(t)
    y = table("sin").take(k & _HALF) ^ (((k >> (SIN_BITS - 1)).astype(_U32) << _U32(31)) ^ (t & _SIGN))
    return patch(y, t, (t & ~_SIGN) >= _INF, lambda v: np.full_like(v, _NAN))


def cos(t):
    """MUFU.COS on f32 bit patterns ``t``: the sine a quarter turn on, in the same fixed point."""
    t = np.asarray(t, _U32)
    k = (_turn_key(t) + (1 << (SIN_BITS - 2))) & ((1 << SIN_BITS) - 1)
    y = table("sin").take(k & _HALF) ^ ((k >> (SIN_BITS - 1)).astype(_U32) << _U32(31))
    return patch(y, t, (t & ~_SIGN) >= _INF, lambda v: np.full_like(v, _NAN))
