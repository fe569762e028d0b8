"""A slow, independent restatement of warpsim's per-architecture tensor-core models.

``warpsim.tensorcore.numerics`` states, in its docstrings and comments, how each architecture's mma.sync
floating-point arithmetic is modelled; ``warpsim.tensorcore.engine`` computes that model fast, on batches
of warps.  This module computes the *same model* again, one output element at a time, with
Python integers only (every finite value is ``(-1)**s * M * 2**e`` with integer ``M >= 0``).
It shares no arithmetic with warpsim: narrow elements are decoded from their bits by
``tests/reference.py`` (itself independent), f32/tf32 words from their fields here; the model
parameters (F, L, e_zero, fp8_F, fp8_out_frac, the m8n8k4 override, which forms are lowered,
block_F, block_e_zero) and the exponent floors ``EMIN`` are read from ``warpsim.tensorcore.numerics`` as
data; register words are unpacked with ``warpsim.tensorcore.packing`` (the layouts are tested on their
own).

The model, as restated here:

fused step
    every product exact; its exponent is the sum of the factors' exponents, each
    ``floor(log2|x|)`` clamped at its format's emin (plus the two scale exponents under block
    scaling); a zero product takes ``e_zero``; c takes its clamped exponent (``e_zero`` if
    zero); E = the largest; every term, c included, is truncated toward zero to a multiple of
    2**(E - F); the sum is exact; one rounding: toward zero to f32 (a magnitude >= 2**128
    becomes Inf), to nearest-even to f16, or toward zero to f32 with only ``fp8_out_frac``
    fraction bits (sm_89 fp8 with f32 D).  A zero result, exact or by underflow, is +0.
specials
    per step: a product with a NaN factor, or Inf * 0, is NaN; a NaN c is NaN; Infs of both
    signs among products and c give NaN; otherwise any Inf gives that Inf.  Under block
    scaling a scale multiplies its element first, so a NaN scale makes its block's products
    NaN, zero elements included.
steps
    the k range is cut into consecutive steps of L products (the model's L for the input
    family; the m8n8k4 override where the model has one); each step's rounded result is the
    next step's c, with the output format's emin.
lowered forms
    fp8 (sm_90, sm_100a): two fused steps over k % 4 < 2 and k % 4 >= 2 from +0, with f16
    operand emins, then one IEEE round-to-nearest add of C.  m8n8k4 .f16 (sm_80 and later):
    IEEE f32 FFMA/FMUL/FADD sequences, each rounded to nearest f32, then (f16 D) one
    round-to-nearest conversion to f16.
block scaling
    mxf8f6f4: one fused step over all k, products carrying the scale exponents.  mxf4 /
    mxf4nvf4: exact sums of 16 consecutive products times both scales, each group term at the
    scales' exponent (``block_e_zero`` when all its products or a scale are zero), aligned with
    ``block_F``.

A zero result of a fused step, exact or by underflow, is +0; the IEEE sequences keep IEEE
signed zeros.  NaN results are the canonical NaN words (f32 0x7FFFFFFF, f16 0x7FFF).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import repeat

import numpy as np

from tests import reference as R
from warpsim.tensorcore.numerics import EMIN, MODELS
from warpsim.tensorcore.packing import pack_bits, unpack_bits

# --------------------------------------------------------------------------------------------
# Values: ('nan',), ('inf', s), ('fin', s, M, e, x) meaning (-1)**s * M * 2**e, M >= 0 an int,
# x = floor(log2 of the magnitude) (meaningless for M == 0)
# --------------------------------------------------------------------------------------------

NAN = ("nan",)
PZERO = ("fin", 0, 0, 0, -1)


def _from_val(v: R.Val) -> tuple:
    if v.kind == "nan":
        return NAN
    if v.kind == "inf":
        return ("inf", v.sign)
    n, d = v.mag.numerator, v.mag.denominator  # d is a power of two
    e = -(d.bit_length() - 1)
    return ("fin", v.sign, n, e, e + n.bit_length() - 1)  # last: floor(log2|x|) (if x != 0)


@lru_cache(maxsize=None)
def _decode_small(code: int, t: str) -> tuple:
    return _from_val(R.decode(code, t))


def _decode_f32(code: int) -> tuple:
    """An f32 word from its fields, in integers (the 32-bit codes are too many to cache)."""
    s, e, m = code >> 31, (code >> 23) & 0xFF, code & 0x7FFFFF
    if e == 0xFF:
        return ("inf", s) if m == 0 else NAN
    if e == 0:
        return fin(s, m, -149)
    return fin(s, m | 0x800000, e - 150)


def value(code: int, t: str) -> tuple:
    """Decode one element code of type ``t``: tests/reference.py's bit-field decoding for the
    narrow types (cached), f32 fields here; tf32 is an f32 word without its low 13 bits."""
    code = int(code)
    if t == "f32":
        return _decode_f32(code)
    if t == "tf32":
        return _decode_f32(code & 0xFFFFE000)
    return _decode_small(code, t)


def is_zero(x: tuple) -> bool:
    return x[0] == "fin" and x[2] == 0


def fin(s: int, M: int, e: int) -> tuple:
    return ("fin", s, M, e, e + M.bit_length() - 1)


def flog2(x: tuple) -> int:
    """floor(log2|x|) of a finite non-zero value."""
    return x[4]


# --------------------------------------------------------------------------------------------
# Rounding an exact value (-1)**s * N * 2**q to f32 / f16 codes
# --------------------------------------------------------------------------------------------

#: name: (fraction bits, emin, emax, bias, canonical NaN, exponent bits, -0)
OUT = {"f32": (23, -126, 127, 127, 0x7FFFFFFF, 8, 0x80000000),
       "f16": (10, -14, 15, 15, 0x7FFF, 5, 0x8000)}


def inf_code(s: int, t: str) -> int:
    mb, ebits = OUT[t][0], OUT[t][5]
    return (s << (mb + ebits)) | (((1 << ebits) - 1) << mb)


def round_code(s: int, N: int, q: int, t: str, mode: str, frac_bits: int | None = None) -> int:
    """Code of (-1)**s * N * 2**q rounded to ``t``.  mode 'rn': nearest-even, IEEE overflow to
    Inf; 'rz': toward zero, Inf from 2**(emax+1) (the tensor-core rule).  ``frac_bits``: keep
    only that many fraction bits (toward zero).  N == 0 gives the zero of sign s."""
    mb, emin, emax, bias, _, ebits, _ = OUT[t]
    sign = s << (mb + ebits)
    inf = inf_code(s, t)
    if N == 0:
        return sign
    keep = mb if frac_bits is None else frac_bits
    e = max(N.bit_length() - 1 + q, emin)
    if mode == "rz" and e > emax:
        return inf
    qe = e - keep  # the quantum is 2**qe
    if q >= qe:
        m = N << (q - qe)
    else:
        sh = qe - q
        m, r = N >> sh, N & ((1 << sh) - 1)
        if mode == "rn":
            half = 1 << (sh - 1)
            if r > half or (r == half and m & 1):
                m += 1
        elif mode != "rz":
            raise ValueError(mode)
    if m == 1 << (keep + 1):
        m >>= 1
        e += 1
    if e > emax:
        return inf
    if m < (1 << keep):  # subnormal: e == emin
        return sign | (m << (mb - keep))
    return sign | ((e + bias) << mb) | ((m - (1 << keep)) << (mb - keep))


# --------------------------------------------------------------------------------------------
# IEEE operations (for the lowered instruction sequences)
# --------------------------------------------------------------------------------------------


def ieee_mul(x: tuple, y: tuple) -> tuple:
    if x[0] == "nan" or y[0] == "nan":
        return NAN
    s = x[1] ^ y[1]
    if x[0] == "inf" or y[0] == "inf":
        other = y if x[0] == "inf" else x
        return NAN if is_zero(other) else ("inf", s)
    return fin(s, x[2] * y[2], x[3] + y[3])


def ieee_sum_round(xs: list, t: str) -> tuple:
    """round-to-nearest(sum of xs) in ``t`` as a value, IEEE specials and signed zeros (an exact
    zero is -0 only when every addend is -0)."""
    if any(x[0] == "nan" for x in xs):
        return NAN
    infs = {x[1] for x in xs if x[0] == "inf"}
    if len(infs) == 2:
        return NAN
    if infs:
        return ("inf", infs.pop())
    q = min(x[3] for x in xs)
    S = sum((-1 if x[1] else 1) * (x[2] << (x[3] - q)) for x in xs)
    if S == 0:
        s = 1 if all(x[1] == 1 and x[2] == 0 for x in xs) else 0
        return fin(s, 0, 0)
    return value(round_code(int(S < 0), abs(S), q, t, "rn"), t)


# --------------------------------------------------------------------------------------------
# The fused step
# --------------------------------------------------------------------------------------------


def _special(prods_in: list, c: tuple, finite: bool = False):
    """The special result of one step, or None when every input is finite (``finite``: the
    caller knows that every factor is)."""
    if finite and c[0] == "fin":
        return None
    nan = c[0] == "nan"
    pos = c == ("inf", 0)
    neg = c == ("inf", 1)
    for a, b in prods_in:
        if a[0] == "fin" and b[0] == "fin":
            continue
        if a[0] == "nan" or b[0] == "nan":
            nan = True
            continue
        other = b if a[0] == "inf" else a
        if is_zero(other):
            nan = True
        elif a[1] ^ b[1]:
            neg = True
        else:
            pos = True
    if nan or (pos and neg):
        return NAN
    if pos:
        return ("inf", 0)
    if neg:
        return ("inf", 1)
    return None


def fused_step(pairs: list, c: tuple, *, emin_a: int, emin_b: int, emin_c: int, F: int,
               e_zero: int, out: str, rounding: str, frac_bits: int | None = None,
               scale_exps: list | None = None, finite: bool = False) -> int:
    """One fused step: D code of round(c + sum a*b) under the alignment rule.

    ``pairs``: [(a, b)] values; ``scale_exps``: per pair, an extra exponent (block scaling)
    added to the product's value and exponent; ``finite``: every a and b is finite."""
    sp = _special(pairs, c, finite)
    if sp is not None:
        return OUT[out][4] if sp == NAN else inf_code(sp[1], out)
    terms = []  # (sign, M, e) of the non-zero terms
    E = e_zero if c[2] == 0 else max(c[4], emin_c)
    for (a, b), sx in zip(pairs, scale_exps or repeat(0)):
        if a[2] == 0 or b[2] == 0:
            if e_zero > E:  # a zero product
                E = e_zero
            continue
        x = (a[4] if a[4] > emin_a else emin_a) + (b[4] if b[4] > emin_b else emin_b) + sx
        if x > E:
            E = x
        terms.append((a[1] ^ b[1], a[2] * b[2], a[3] + b[3] + sx))
    if c[2] != 0:
        terms.append((c[1], c[2], c[3]))
    q = E - F
    S = 0
    for s, M, e in terms:
        mag = M << (e - q) if e >= q else M >> (q - e)  # truncation toward zero
        S += -mag if s else mag
    if S == 0:
        return 0  # +0
    code = round_code(int(S < 0), abs(S), q, out, rounding, frac_bits)
    return 0 if code == OUT[out][6] else code  # a zero by underflow is +0 too


def chained_steps(a_row: list, b_col: list, c: tuple, steps: list, *, emin_c: int, out: str,
                  **kw) -> int:
    """Steps over the k-index lists ``steps``; each result is the next step's c."""
    code = None
    for ks in steps:
        code = fused_step([(a_row[k], b_col[k]) for k in ks], c, emin_c=emin_c, out=out, **kw)
        c = value(code, out)
        emin_c = EMIN[out]
    return code


# --------------------------------------------------------------------------------------------
# One output element under a model
# --------------------------------------------------------------------------------------------


def family(ins) -> str:
    fp8 = ("e4m3", "e5m2")
    if ins.atype in ("f16", "bf16"):
        return "f16"
    if ins.atype == "tf32":
        return "tf32"
    return "fp8" if ins.atype in fp8 and ins.btype in fp8 else "f6f4"


def element(ins, model, a_row: list, b_col: list, c: tuple, finite: bool = False) -> int:
    """D code of one output element: a_row, b_col values over k, c the C value (``finite``:
    every a and b is finite, a shortcut only)."""
    out = ins.dtype
    K = len(a_row)
    e_zero = model.e_zero_f32 if out == "f32" else model.e_zero_f16
    rnd = "rz" if out == "f32" else "rn"
    if ins.form in model.lowered and ins.form in ("fp8", "f8f6f4"):
        lo = [k for k in range(K) if k % 4 < 2]
        hi = [k for k in range(K) if k % 4 >= 2]
        p = chained_steps(a_row, b_col, PZERO, [lo, hi], emin_c=EMIN[out], out=out,
                          emin_a=EMIN["f16"], emin_b=EMIN["f16"], F=model.F, e_zero=e_zero,
                          rounding=rnd, finite=finite)
        r = ieee_sum_round([value(p, out), c], out)
        return encode(r, out)
    if ins.form in model.lowered and ins.form == "f16-m8n8k4":
        def f32(xs):
            return ieee_sum_round(xs, "f32")

        prods = [ieee_mul(a_row[k], b_col[k]) for k in range(K)]
        if out == "f32":
            acc = f32([prods[0], PZERO])  # FFMA(a0, b0, +0)
            for k in range(1, K):
                acc = f32([prods[k], acc])
            return encode(f32([c, acc]), "f32")
        d = c
        for k0 in (0, 2):  # FFMA(a1, b1, FMUL(a0, b0)), FFMA(a3, b3, FMUL(a2, b2))
            pair = f32([prods[k0 + 1], f32([prods[k0]])])
            d = f32([d, pair])
        return encode(ieee_sum_round([d], "f16"), "f16")
    fam = family(ins)
    F, L = model.F, model.L[fam]
    if ins.quadpair and model.m8n8k4:
        F, L = model.m8n8k4
    frac = None
    if fam == "fp8" and model.fp8_F is not None:
        F = model.fp8_F
    if fam == "fp8" and out == "f32":
        frac = model.fp8_out_frac
    steps = [list(range(s, min(s + L, K))) for s in range(0, K, L)]
    return chained_steps(a_row, b_col, c, steps, emin_c=EMIN[ins.ctype], out=out,
                         emin_a=EMIN[ins.atype], emin_b=EMIN[ins.btype], F=F, e_zero=e_zero,
                         rounding=rnd, frac_bits=frac, finite=finite)


def encode(x: tuple, t: str) -> int:
    """Code of a value already representable in ``t`` (NaN: canonical)."""
    if x[0] == "nan":
        return OUT[t][4]
    if x[0] == "inf":
        return inf_code(x[1], t)
    return round_code(x[1], x[2], x[3], t, "rz")


def block_element(ins, model, a_row, b_col, c, sa_row, sb_col, finite: bool = False) -> int:
    """D code of one output element of a .block_scale form; sa_row / sb_col: scale values per
    k (the scale that covers element k); ``finite``: every element and scale is finite."""
    # specials: the scale multiplies its element first (a NaN scale makes every product NaN)
    sp = None
    if not (finite and c[0] == "fin"):
        sp = _special([(ieee_mul(a, s), ieee_mul(b, t))
                       for a, b, s, t in zip(a_row, b_col, sa_row, sb_col)], c)
    if sp is not None:
        return OUT["f32"][4] if sp == NAN else inf_code(sp[1], "f32")
    if ins.kind == "mxf8f6f4":
        exps = [flog2(s) + flog2(t) for s, t in zip(sa_row, sb_col)]  # ue8m0: powers of two
        return fused_step(list(zip(a_row, b_col)), c, emin_a=EMIN[ins.atype],
                          emin_b=EMIN[ins.btype], emin_c=EMIN["f32"], F=model.F,
                          e_zero=model.e_zero_f32, out="f32", rounding="rz", scale_exps=exps,
                          finite=True)
    es = EMIN[ins.stype]
    terms = []  # (signed integer, e, exponent)
    for g in range(0, len(a_row), 16):
        idx = range(g, g + 16)
        sa, sb = sa_row[g], sb_col[g]
        nz = [k for k in idx if a_row[k][2] != 0 and b_col[k][2] != 0]
        if not nz or sa[2] == 0 or sb[2] == 0:
            terms.append((0, 0, model.block_e_zero))
            continue
        q = min(a_row[k][3] + b_col[k][3] for k in nz) + sa[3] + sb[3]
        S = 0  # the exact group sum times both scales, in units of 2**q
        for k in nz:
            mag = (a_row[k][2] * b_col[k][2] * sa[2] * sb[2]) << (
                a_row[k][3] + b_col[k][3] + sa[3] + sb[3] - q)
            S += -mag if a_row[k][1] ^ b_col[k][1] else mag
        terms.append((S, q, max(flog2(sa), es) + max(flog2(sb), es)))
    if c[2] == 0:
        terms.append((0, 0, model.block_e_zero))
    else:
        terms.append(((-1 if c[1] else 1) * c[2], c[3], max(flog2(c), EMIN["f32"])))
    E = max(t[2] for t in terms)
    q = E - model.block_F
    S = 0
    for M, e, _ in terms:
        mag = abs(M) << (e - q) if e >= q else abs(M) >> (q - e)
        S += mag if M >= 0 else -mag
    if S == 0:
        return 0
    code = round_code(int(S < 0), abs(S), q, "f32", "rz")
    return 0 if code == OUT["f32"][6] else code


# --------------------------------------------------------------------------------------------
# Whole instructions on register words
# --------------------------------------------------------------------------------------------


def _values(ins, op: str, words) -> np.ndarray:
    codes = np.asarray(unpack_bits(ins, op, words)).astype(object)
    t = ins.type_of(op)
    out = np.empty(codes.shape, dtype=object)
    for idx in np.ndindex(*codes.shape):
        out[idx] = value(codes[idx], t)
    return out


def model_d_codes(ins, arch: str, a, b, c, scales=None) -> np.ndarray:
    """D element codes (..., M, N) (m8n8k4 .f16: (..., 4, 8, 8)) under ``arch``'s model, from
    register words a, b, c of equal batch shape; ``scales``: (SA, SB) scale codes (..., M, V),
    (..., V, N) for .block_scale forms (see tests/reference.py's scale_a_matrix)."""
    model = MODELS[arch]
    A, B, C = _values(ins, "a", a), _values(ins, "b", b), _values(ins, "c", c)
    D = np.empty(C.shape, dtype=object)
    K = A.shape[-1]
    for idx in np.ndindex(*C.shape[:-2]):
        Am, Bm, Cm = A[idx], B[idx], C[idx]
        M, N = Cm.shape
        brows = [list(Bm[:, j]) for j in range(N)]
        if scales is not None:
            SA, SB = scales
            sa, sb = np.asarray(SA)[idx], np.asarray(SB)[idx]
            chunk = K // sa.shape[-1]
            sav = [[value(sa[i, k // chunk], ins.stype) for k in range(K)] for i in range(M)]
            sbv = [[value(sb[k // chunk, j], ins.stype) for k in range(K)] for j in range(N)]
        arows = [list(Am[i]) for i in range(M)]
        afin = [all(x[0] == "fin" for x in r + (sav[i] if scales is not None else []))
                for i, r in enumerate(arows)]
        bfin = [all(x[0] == "fin" for x in r + (sbv[j] if scales is not None else []))
                for j, r in enumerate(brows)]
        for i in range(M):
            for j in range(N):
                if scales is not None:
                    D[idx + (i, j)] = block_element(ins, model, arows[i], brows[j], Cm[i, j],
                                                    sav[i], sbv[j], afin[i] and bfin[j])
                else:
                    D[idx + (i, j)] = element(ins, model, arows[i], brows[j], Cm[i, j],
                                              afin[i] and bfin[j])
    return D


def model_mma(ins, arch: str, a, b, c, scales=None) -> np.ndarray:
    """D register words under ``arch``'s model (see :func:`model_d_codes`)."""
    D = model_d_codes(ins, arch, a, b, c, scales)
    return pack_bits(ins, "d", np.array(D.tolist(), dtype=np.uint64).astype(np.uint32))
