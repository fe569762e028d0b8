"""A slow, independent reference for mma.sync arithmetic (arch="exact"), written from the PTX ISA
and IEEE 754 alone.  It shares no arithmetic with warpsim: every element is decoded here from its
bit fields into a ``fractions.Fraction`` (or a special), D = C + sum_k A*B is formed exactly, and
one rounding to D's type is done with integer arithmetic.

Matrix elements are taken out of the register words with ``warpsim.tensorcore.packing.unpack_bits`` (the
fragment layouts are tested on their own); block-scale metadata is read straight from the PTX
selector rules (see :func:`scale_a_matrix` / :func:`scale_b_matrix`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from warpsim.tensorcore.packing import pack_bits, unpack_bits

# --------------------------------------------------------------------------------------------
# Element formats
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fmt:
    name: str
    ebits: int
    mbits: int
    bias: int
    signed: bool = True
    specials: str = "ieee"  # 'ieee' | 'none' (all finite) | 'e4m3' (S.1111.111 NaN, no Inf)

    @property
    def width(self) -> int:
        return int(self.signed) + self.ebits + self.mbits


FMTS = {
    "f64": Fmt("f64", 11, 52, 1023),
    "f32": Fmt("f32", 8, 23, 127),
    "f16": Fmt("f16", 5, 10, 15),
    "bf16": Fmt("bf16", 8, 7, 127),
    "e4m3": Fmt("e4m3", 4, 3, 7, specials="e4m3"),
    "e5m2": Fmt("e5m2", 5, 2, 15),
    "e3m2": Fmt("e3m2", 3, 2, 3, specials="none"),
    "e2m3": Fmt("e2m3", 2, 3, 1, specials="none"),
    "e2m1": Fmt("e2m1", 2, 1, 1, specials="none"),
}

#: Width of the code the reference decodes for each float type (tf32: the full f32 word).
CODE_BITS = {"f64": 64, "f32": 32, "tf32": 32, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8,
             "e3m2": 6, "e2m3": 6, "e2m1": 4, "ue8m0": 8, "ue4m3": 8}

CANON_NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF, "f64": 0x7FFFFFFFFFFFFFFF}


@dataclass(frozen=True)
class Val:
    """A decoded element: kind 'fin' (value ``mag`` >= 0 with ``sign``), 'inf' or 'nan'."""

    kind: str
    sign: int = 0
    mag: Fraction = Fraction(0)

    @property
    def value(self) -> Fraction:
        assert self.kind == "fin"
        return -self.mag if self.sign else self.mag


NAN = Val("nan")


def _decode_fields(code: int, f: Fmt) -> Val:
    sign = (code >> (f.ebits + f.mbits)) & 1 if f.signed else 0
    e = (code >> f.mbits) & ((1 << f.ebits) - 1)
    m = code & ((1 << f.mbits) - 1)
    emax_field = (1 << f.ebits) - 1
    if f.specials == "ieee" and e == emax_field:
        return Val("inf", sign) if m == 0 else NAN
    if f.specials == "e4m3" and e == emax_field and m == (1 << f.mbits) - 1:
        return NAN
    if e == 0:  # zero or subnormal: 0.m * 2**(1 - bias)
        mag = Fraction(m, 1 << f.mbits) * Fraction(2) ** (1 - f.bias)
    else:
        mag = Fraction((1 << f.mbits) + m, 1 << f.mbits) * Fraction(2) ** (e - f.bias)
    return Val("fin", sign, mag)


@lru_cache(maxsize=None)
def _decode_small(code: int, t: str) -> Val:
    return _decode_uncached(code, t)


def _decode_uncached(code: int, t: str) -> Val:
    if t == "tf32":  # f32 layout; the low 13 fraction bits are not part of the value
        return _decode_fields(code & ~0x1FFF & 0xFFFFFFFF, FMTS["f32"])
    if t == "ue8m0":
        return NAN if code == 0xFF else Val("fin", 0, Fraction(2) ** (code - 127))
    if t == "ue4m3":  # unsigned e4m3 in 7 bits (bias 7), 0x7F NaN
        c = code & 0x7F
        if c == 0x7F:
            return NAN
        return _decode_fields(c, Fmt("ue4m3", 4, 3, 7, signed=False, specials="none"))
    return _decode_fields(code, FMTS[t])


def decode(code: int, t: str) -> Val:
    """Decode one element code of float type ``t``."""
    code = int(code)
    if CODE_BITS[t] <= 16:
        return _decode_small(code, t)
    return _decode_uncached(code, t)


def decode_int(code: int, t: str) -> int:
    """Integer element codes: s8/u8/s4/u4/s32 (two's complement) and b1."""
    code = int(code)
    bits = {"s8": 8, "u8": 8, "s4": 4, "u4": 4, "s32": 32, "b1": 1}[t]
    if t.startswith("s") and code >> (bits - 1):
        return code - (1 << bits)
    return code


# --------------------------------------------------------------------------------------------
# Rounding a Fraction to a binary format (integer arithmetic only)
# --------------------------------------------------------------------------------------------


def _floor_log2(x: Fraction) -> int:
    """Largest e with 2**e <= x (x > 0)."""
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    # now 2**(e-1) < n/d < 2**(e+1)
    if e >= 0:
        if n < d << e:
            e -= 1
    else:
        if n << -e < d:
            e -= 1
    return e


def _div_round(n: int, d: int, mode: str, negative: bool) -> int:
    """round(n / d) for n >= 0, d > 0 in the given rounding mode (sign for directed modes)."""
    q, r = divmod(n, d)
    if r == 0:
        return q
    if mode == "rn":
        if 2 * r > d or (2 * r == d and q & 1):
            q += 1
    elif mode == "rz":
        pass
    elif mode == "rp":
        if not negative:
            q += 1
    elif mode == "rm":
        if negative:
            q += 1
    else:
        raise ValueError(mode)
    return q


def encode_exact(v: Val, t: str, mode: str = "rn") -> int:
    """Round a decoded value once to float type ``t`` (f16, f32, f64) and return its bits."""
    f = FMTS[t]
    sign_bit = 1 << (f.ebits + f.mbits)
    emax_field = (1 << f.ebits) - 1
    inf_bits = emax_field << f.mbits
    if v.kind == "nan":
        return CANON_NAN[t]
    s = sign_bit if v.sign else 0
    if v.kind == "inf":
        return s | inf_bits
    a = v.mag
    if a == 0:
        return s
    emin = 1 - f.bias
    e = max(_floor_log2(a), emin)
    # quantum 2**(e - mbits): a / quantum = n * 2**(mbits - e) / d
    sh = f.mbits - e
    n, d = a.numerator, a.denominator
    if sh >= 0:
        n <<= sh
    else:
        d <<= -sh
    m = _div_round(n, d, mode, bool(v.sign))
    if m == 1 << (f.mbits + 1):  # carried into the next binade
        m >>= 1
        e += 1
    if m < (1 << f.mbits):  # subnormal (only possible at e == emin) or zero
        return s | m
    efield = e + f.bias
    if efield >= emax_field:  # overflow
        to_inf = (mode == "rn" or (mode == "rp" and not v.sign) or (mode == "rm" and v.sign))
        return s | (inf_bits if to_inf else inf_bits - 1)  # inf_bits - 1: the largest finite
    return s | (efield << f.mbits) | (m - (1 << f.mbits))


# --------------------------------------------------------------------------------------------
# The exact dot product with IEEE specials
# --------------------------------------------------------------------------------------------


def mul(x: Val, y: Val) -> Val:
    if x.kind == "nan" or y.kind == "nan":
        return NAN
    s = x.sign ^ y.sign
    if x.kind == "inf" or y.kind == "inf":
        other = y if x.kind == "inf" else x
        if other.kind == "fin" and other.mag == 0:
            return NAN
        return Val("inf", s)
    return Val("fin", s, x.mag * y.mag)


def exact_sum(addends: list[Val], mode: str = "rn") -> Val:
    """The exact sum of the addends: NaN rules, then infinities, then the exact finite sum;
    an exact zero is +0 unless every addend is -0, or (IEEE 754, rounding toward -Inf) the
    zeros have mixed signs or non-zero addends cancel."""
    if any(v.kind == "nan" for v in addends):
        return NAN
    infs = {v.sign for v in addends if v.kind == "inf"}
    if len(infs) == 2:
        return NAN
    if infs:
        return Val("inf", infs.pop())
    # finite: all denominators are powers of two; sum as integers over the largest one
    den = max(v.mag.denominator for v in addends)
    tot = 0
    for v in addends:
        t = v.mag.numerator * (den // v.mag.denominator)
        tot += -t if v.sign else t
    if tot == 0:
        neg = all(v.sign == 1 for v in addends) or (mode == "rm" and not all(
            v.sign == 0 and v.mag == 0 for v in addends))
        return Val("fin", 1 if neg else 0, Fraction(0))
    return Val("fin", 1 if tot < 0 else 0, Fraction(abs(tot), den))


def dot_add(c: Val, a_row: list[Val], b_col: list[Val], dtype: str, mode: str = "rn") -> int:
    """Bits of round(c + sum a_row[k] * b_col[k]) in ``dtype``."""
    return encode_exact(exact_sum([c] + [mul(x, y) for x, y in zip(a_row, b_col)], mode), dtype, mode)


# --------------------------------------------------------------------------------------------
# Whole instructions
# --------------------------------------------------------------------------------------------


def _codes(ins, op, words):
    return np.asarray(unpack_bits(ins, op, words)).astype(object)


def _matrices(x):
    """Iterate 2-D matrices over all leading dims of an object array (..., rows, cols)."""
    lead = x.shape[:-2]
    for idx in np.ndindex(*lead):
        yield idx, x[idx]


def _float_codes_d(ins, A, B, C, mode="rn", SA=None, SB=None):
    """D codes for (..., M, K), (..., K, N), (..., M, N) code matrices."""
    at, bt, ct, dt = ins.atype, ins.btype, ins.ctype, ins.dtype
    D = np.empty(C.shape, dtype=object)
    for idx, Cm in _matrices(C):
        Am, Bm = A[idx], B[idx]
        M, K = Am.shape
        N = Bm.shape[1]
        av = [[decode(Am[i, k], at) for k in range(K)] for i in range(M)]
        bv = [[decode(Bm[k, j], bt) for k in range(K)] for j in range(N)]
        if SA is not None:
            sa, sb = SA[idx], SB[idx]
            chunk = K // sa.shape[1]
            av = [[mul(av[i][k], decode(sa[i, k // chunk], ins.stype)) for k in range(K)]
                  for i in range(M)]
            bv = [[mul(bv[j][k], decode(sb[k // chunk, j], ins.stype)) for k in range(K)]
                  for j in range(N)]
        for i in range(M):
            for j in range(N):
                D[idx + (i, j)] = dot_add(decode(Cm[i, j], ct), av[i], bv[j], dt, mode)
    return D


def ref_d_codes(ins, a, b, c, *, mode=None, scales=None):
    """Reference D element codes (..., M, N) (or (..., 4, 8, 8) for m8n8k4 .f16), object ints.

    a, b, c: register words with identical batch shapes.  scales: (SA, SB) scale codes
    (..., M, V) and (..., V, N) for .block_scale forms.
    """
    A, B, C = _codes(ins, "a", a), _codes(ins, "b", b), _codes(ins, "c", c)
    if ins.dtype == "s32":
        return ref_int_codes(ins, A, B, C)
    if mode is None:
        mode = ins.rounding or "rn"
    SA = SB = None
    if scales is not None:
        SA, SB = (np.asarray(s).astype(object) for s in scales)
    return _float_codes_d(ins, A, B, C, mode, SA, SB)


def ref_mma(ins, a, b, c, **kw):
    """Reference D register words."""
    D = ref_d_codes(ins, a, b, c, **kw)
    dt = np.uint64 if ins.dtype == "f64" else np.uint32
    return pack_bits(ins, "d", np.array(D.tolist(), dtype=np.uint64).astype(dt))


def ref_int_codes(ins, A, B, C):
    """s32 D codes from integer / b1 code matrices: exact in Python ints, then wrap or clamp."""
    D = np.empty(C.shape, dtype=object)
    for idx, Cm in _matrices(C):
        Am, Bm = A[idx], B[idx]
        M, K = Am.shape
        N = Bm.shape[1]
        for i in range(M):
            for j in range(N):
                acc = decode_int(Cm[i, j], "s32")
                if ins.bitop:
                    # explicit popcount of the bitwise op over the K bits
                    cnt = 0
                    for k in range(K):
                        x, y = int(Am[i, k]), int(Bm[k, j])
                        bit = (x ^ y) if ins.bitop == "xor" else (x & y)
                        cnt += bit
                    acc += cnt
                else:
                    acc += sum(decode_int(Am[i, k], ins.atype) * decode_int(Bm[k, j], ins.btype)
                               for k in range(K))
                if ins.satfinite:
                    acc = min(max(acc, -(1 << 31)), (1 << 31) - 1)
                D[idx + (i, j)] = acc & 0xFFFFFFFF
    return D


# --------------------------------------------------------------------------------------------
# Block-scale metadata, straight from the PTX selector rules
# --------------------------------------------------------------------------------------------


def scale_a_matrix(ins, words, byte_id, thread_id):
    """scale_A codes (..., M, V) from metadata words (..., 32).

    In quad g (lanes 4g..4g+3) the thread pair chosen by thread-id-a supplies SF_A: lane
    4g + 2*thread_id holds row g, lane 4g + 2*thread_id + 1 holds row g + 8.  Chunk j of the
    row comes from byte byte_id + j of that lane's word.
    """
    words = np.asarray(words).astype(object)
    V = ins.scale_vec
    out = np.empty(words.shape[:-1] + (ins.m, V), dtype=object)
    for g in range(8):
        for half, row in ((0, g), (1, g + 8)):
            if row >= ins.m:
                continue
            lane = 4 * g + 2 * thread_id + half
            for j in range(V):
                out[..., row, j] = (words[..., lane] >> (8 * (byte_id + j))) & 0xFF
    return out


def scale_b_matrix(ins, words, byte_id, thread_id):
    """scale_B codes (..., V, N): lane 4g + thread_id supplies column g; byte byte_id + j chunk j."""
    words = np.asarray(words).astype(object)
    V = ins.scale_vec
    out = np.empty(words.shape[:-1] + (V, ins.n), dtype=object)
    for g in range(ins.n):
        lane = 4 * g + thread_id
        for j in range(V):
            out[..., j, g] = (words[..., lane] >> (8 * (byte_id + j))) & 0xFF
    return out
