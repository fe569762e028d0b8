"""The ALU instruction forms that the hardware harness runs, and their input words.

A :class:`Case` is one PTX instruction form as written (``add.rz.ftz.f32``) with the element
format of each destination and source operand.  :func:`candidate_cases` lists every
combination of qualifiers worth trying; ``ptxas`` prunes the ones it rejects for the target
(:mod:`warpsim.validation.alu`).  :func:`inputs` draws each operand's words: adversarial values
of its format (signed zeros, subnormals, min/max normals, infinities, NaNs with payloads, integer
edges, rounding ties) mixed with random bit patterns, deterministically from a seed.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

import numpy as np

# Operand format -> register width in bits ('pred' is a predicate).
WIDTH = {
    "pred": 1,
    "u8": 16, "s8": 16, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "e4m3x2": 16, "e5m2x2": 16,
    "u32": 32, "s32": 32, "b32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "u16x2": 32,
    "s16x2": 32, "tf32": 32,
    "u64": 64, "s64": 64, "b64": 64, "f64": 64, "b8": 8,
}


@dataclass(frozen=True)
class Case:
    """One instruction form: PTX text without operands, destination and source formats."""

    text: str
    dsts: tuple[str, ...]
    srcs: tuple[str, ...]
    pq: bool = False  # two predicate destinations written ``p|q``

    @property
    def name(self) -> str:
        return "k_" + self.text.replace(".", "_").replace(":", "_")


def _opt(*tokens):
    return [""] + [f".{t}" for t in tokens]


INT_T = ("s16", "u16", "s32", "u32", "s64", "u64")


def _integer():
    out = []
    for op in ("add", "sub"):
        for t in INT_T:
            out.append(Case(f"{op}.{t}", (t,), (t, t)))
        out.append(Case(f"{op}.sat.s32", ("s32",), ("s32", "s32")))
        for t in ("s16x2", "u16x2"):
            out.append(Case(f"{op}.{t}", (t,), (t, t)))
    for t in INT_T:
        for m in ("lo", "hi"):
            out.append(Case(f"mul.{m}.{t}", (t,), (t, t)))
            out.append(Case(f"mad.{m}.{t}", (t,), (t, t, t)))
        if t[1:] != "64":
            w = t[0] + str(int(t[1:]) * 2)
            out.append(Case(f"mul.wide.{t}", (w,), (t, t)))
            out.append(Case(f"mad.wide.{t}", (w,), (t, t, w)))
        out += [Case(f"div.{t}", (t,), (t, t)), Case(f"rem.{t}", (t,), (t, t)),
                Case(f"sad.{t}", (t,), (t, t, t)),
                Case(f"min.{t}", (t,), (t, t)), Case(f"max.{t}", (t,), (t, t))]
        if t[0] == "s":
            out += [Case(f"abs.{t}", (t,), (t,)), Case(f"neg.{t}", (t,), (t,))]
    out.append(Case("mad.hi.sat.s32", ("s32",), ("s32", "s32", "s32")))
    for op in ("min", "max"):
        for t in ("s16x2", "u16x2"):
            out.append(Case(f"{op}.{t}", (t,), (t, t)))
        out.append(Case(f"{op}.relu.s32", ("s32",), ("s32", "s32")))
        out.append(Case(f"{op}.relu.s16x2", ("s16x2",), ("s16x2", "s16x2")))
    for a, b in itertools.product(("u32", "s32"), repeat=2):
        out.append(Case(f"dp4a.{a}.{b}", ("s32" if "s" in a + b else "u32",), (a, b, "s32" if "s" in a + b else "u32")))
        for m in ("lo", "hi"):
            out.append(Case(f"dp2a.{m}.{a}.{b}", ("s32" if "s" in a + b else "u32",),
                            (a, b, "s32" if "s" in a + b else "u32")))
    return out


def _floating():
    out = []
    rnd = _opt("rn", "rz", "rm", "rp")
    for op in ("add", "sub", "mul"):
        for r, f, s in itertools.product(rnd, _opt("ftz"), _opt("sat")):
            out.append(Case(f"{op}{r}{f}{s}.f32", ("f32",), ("f32", "f32")))
        for r in rnd:
            out.append(Case(f"{op}{r}.f64", ("f64",), ("f64", "f64")))
        for t in ("f16", "f16x2"):
            for r, f, s in itertools.product(_opt("rn"), _opt("ftz"), _opt("sat")):
                out.append(Case(f"{op}{r}{f}{s}.{t}", (t,), (t, t)))
        for t in ("bf16", "bf16x2"):
            for r in _opt("rn"):
                out.append(Case(f"{op}{r}.{t}", (t,), (t, t)))
    for op in ("fma", "mad"):
        for r, f, s in itertools.product(rnd[1:], _opt("ftz"), _opt("sat")):
            out.append(Case(f"{op}{r}{f}{s}.f32", ("f32",), ("f32",) * 3))
        for r in rnd[1:]:
            out.append(Case(f"{op}{r}.f64", ("f64",), ("f64",) * 3))
    for t in ("f16", "f16x2"):
        for f, s in itertools.product(_opt("ftz"), _opt("sat", "relu")):
            out.append(Case(f"fma.rn{f}{s}.{t}", (t,), (t,) * 3))
    for t in ("bf16", "bf16x2"):
        for s in _opt("relu"):
            out.append(Case(f"fma.rn{s}.{t}", (t,), (t,) * 3))
    for r, f in itertools.product(rnd[1:], _opt("ftz")):
        out.append(Case(f"div{r}{f}.f32", ("f32",), ("f32", "f32")))
        out.append(Case(f"rcp{r}{f}.f32", ("f32",), ("f32",)))
        out.append(Case(f"sqrt{r}{f}.f32", ("f32",), ("f32",)))
    for r in rnd[1:]:
        out += [Case(f"div{r}.f64", ("f64",), ("f64", "f64")), Case(f"rcp{r}.f64", ("f64",), ("f64",)),
                Case(f"sqrt{r}.f64", ("f64",), ("f64",))]
    for f in _opt("ftz"):
        out.append(Case(f"div.approx{f}.f32", ("f32",), ("f32", "f32")))
        out.append(Case(f"div.full{f}.f32", ("f32",), ("f32", "f32")))
    for op in ("abs", "neg"):
        for f in _opt("ftz"):
            out.append(Case(f"{op}{f}.f32", ("f32",), ("f32",)))
            for t in ("f16", "f16x2"):
                out.append(Case(f"{op}{f}.{t}", (t,), (t,)))
        for t in ("f64", "bf16", "bf16x2"):
            out.append(Case(f"{op}.{t}", (t,), (t,)))
    for op in ("min", "max"):
        for f, n, x in itertools.product(_opt("ftz"), _opt("NaN"), ["", ".xorsign.abs"]):
            for t in ("f32", "f16", "f16x2"):
                out.append(Case(f"{op}{f}{n}{x}.{t}", (t,), (t, t)))
        for n, x in itertools.product(_opt("NaN"), ["", ".xorsign.abs"]):
            for t in ("bf16", "bf16x2"):
                out.append(Case(f"{op}{n}{x}.{t}", (t,), (t, t)))
        out.append(Case(f"{op}.f64", ("f64",), ("f64", "f64")))
    return out


CVT_INT = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64")
CVT_FLT = ("f16", "bf16", "f32", "f64")


def _convert():
    out = []
    allt = CVT_INT + CVT_FLT
    for d, a in itertools.product(allt, allt):
        if d in CVT_INT and a in CVT_INT:
            mods = ["", ".sat"]
        elif d in CVT_INT:
            mods = [f"{r}{f}{s}" for r in _opt("rni", "rzi", "rmi", "rpi") for f in _opt("ftz")
                    for s in _opt("sat")]
        elif a in CVT_INT:
            mods = [f"{r}{s}" for r in _opt("rn", "rz", "rm", "rp") for s in _opt("sat")]
        else:
            mods = [f"{r}{f}{s}{u}" for r in _opt("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")
                    for f in _opt("ftz") for s in _opt("sat") for u in _opt("relu")]
            if d in ("f16", "bf16") and a == "f32":
                mods += [f"{r}{u}.satfinite" for r in (".rn", ".rz") for u in _opt("relu")]
        for m in mods:
            out.append(Case(f"cvt{m}.{d}.{a}", (d,), (a,)))
    for d in ("f16x2", "bf16x2"):
        for r, u, s in itertools.product((".rn", ".rz"), _opt("relu"), _opt("satfinite")):
            out.append(Case(f"cvt{r}{u}{s}.{d}.f32", (d,), ("f32", "f32")))
    for d in ("e4m3x2", "e5m2x2"):
        for u in _opt("relu"):
            out.append(Case(f"cvt.rn.satfinite{u}.{d}.f32", (d,), ("f32", "f32")))
            out.append(Case(f"cvt.rn.satfinite{u}.{d}.f16x2", (d,), ("f16x2",)))
            out.append(Case(f"cvt.rn{u}.f16x2.{d}", ("f16x2",), (d,)))
    for s in _opt("satfinite"):
        out.append(Case(f"cvt.rna{s}.tf32.f32", ("tf32",), ("f32",)))
        for r, u in itertools.product((".rn", ".rz"), _opt("relu")):
            out.append(Case(f"cvt{r}{s}{u}.tf32.f32", ("tf32",), ("f32",)))
    return out


CMP_F = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
CMP_I = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")


def _compare():
    out = []
    for t in ("f32", "f64", "f16", "bf16"):
        for c, f in itertools.product(CMP_F, _opt("ftz") if t in ("f32", "f16") else [""]):
            out.append(Case(f"setp.{c}{f}.{t}", ("pred",), (t, t)))
    for t in ("f16x2", "bf16x2"):
        for c, f in itertools.product(CMP_F, _opt("ftz") if t == "f16x2" else [""]):
            out.append(Case(f"setp.{c}{f}.{t}", ("pred", "pred"), (t, t), pq=True))
    for t in ("s16", "u16", "b16", "s32", "u32", "b32", "s64", "u64", "b64"):
        for c in CMP_I:
            out.append(Case(f"setp.{c}.{t}", ("pred",), (t, t)))
    for b in ("and", "or", "xor"):
        out.append(Case(f"setp.ltu.{b}.f32", ("pred", "pred"), ("f32", "f32", "pred"), pq=True))
        out.append(Case(f"setp.lt.{b}.s32", ("pred",), ("s32", "s32", "pred")))
        out.append(Case(f"setp.nan.{b}.f16x2", ("pred", "pred"), ("f16x2", "f16x2", "pred"), pq=True))
    for t in ("b16", "b32", "b64", "f32", "f64"):
        out.append(Case(f"selp.{t}", (t,), (t, t, "pred")))
    for d in ("b16", "s16", "u32", "s64", "f32", "f64"):
        for c in ("s32", "f32"):
            for f in _opt("ftz") if c == "f32" else [""]:
                out.append(Case(f"slct{f}.{d}.{c}", (d,), (d, d, c)))
    for d in ("u32", "s32", "f32"):
        for c in ("lt", "equ", "nan", "ge"):
            out.append(Case(f"set.{c}.{d}.f32", (d,), ("f32", "f32")))
            out.append(Case(f"set.{c}.ftz.{d}.f32", (d,), ("f32", "f32")))
        for c in ("lt", "hs"):
            out.append(Case(f"set.{c}.{d}.u32", (d,), ("u32", "u32")))
        out.append(Case(f"set.gt.{d}.s64", (d,), ("s64", "s64")))
        out.append(Case(f"set.ltu.and.{d}.f64", (d,), ("f64", "f64", "pred")))
    for d in ("f16", "u16", "u32", "f16x2", "u32"):
        out.append(Case(f"set.ltu.{d}.f16", (d,) if d != "f16x2" else (d,), ("f16", "f16")))
    for d in ("f16x2", "u32", "bf16x2"):
        out.append(Case(f"set.le.{d}.f16x2", (d,), ("f16x2", "f16x2")))
        out.append(Case(f"set.gtu.{d}.bf16x2", (d,), ("bf16x2", "bf16x2")))
    return list(dict.fromkeys(out))


def _approx():
    out = []
    for op in ("ex2", "lg2", "rcp", "rsqrt", "sqrt", "sin", "cos"):
        for f in _opt("ftz"):
            out.append(Case(f"{op}.approx{f}.f32", ("f32",), ("f32",)))
    out.append(Case("tanh.approx.f32", ("f32",), ("f32",)))
    for t in ("f16", "f16x2", "bf16", "bf16x2"):
        out.append(Case(f"tanh.approx.{t}", (t,), (t,)))
        out.append(Case(f"ex2.approx.{t}", (t,), (t,)))
        out.append(Case(f"ex2.approx.ftz.{t}", (t,), (t,)))
    out += [Case("rcp.approx.ftz.f64", ("f64",), ("f64",)),
            Case("rsqrt.approx.f64", ("f64",), ("f64",)),
            Case("rsqrt.approx.ftz.f64", ("f64",), ("f64",))]
    return out


def candidate_cases() -> list[Case]:
    """Every form tried (ptxas rejects some)."""
    return list(dict.fromkeys(_integer() + _floating() + _convert() + _compare() + _approx()))


def exhaustive(case: Case) -> bool:
    """Whether a case runs on every 16-bit source pattern (one source of 16 bits or a 16x2
    pair) instead of sampled words: unary approximations and conversions from 16-bit formats."""
    if len(case.srcs) != 1:
        return False
    op = case.text.split(".")[0]
    f = case.srcs[0]
    if op in ("ex2", "tanh") or (op == "cvt" and f in ("f16", "bf16", "e4m3x2", "e5m2x2", "f16x2", "bf16x2")):
        return True
    return False


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

_FLOAT = {  # name: (bits, exponent bits, mantissa bits)
    "f16": (16, 5, 10), "bf16": (16, 8, 7), "f32": (32, 8, 23), "f64": (64, 11, 52),
    "tf32": (32, 8, 23),
}


def _float_specials(bits, e, m):
    sign = 1 << (bits - 1)
    expmask = ((1 << e) - 1) << m
    one = ((1 << (e - 1)) - 1) << m
    vals = [0, 1, 2, 3, (1 << m) - 1, 1 << m, (1 << m) + 1, expmask - 1, expmask,
            expmask | 1, expmask | (1 << (m - 1)), expmask | ((1 << m) - 1),
            expmask | (1 << (m - 1)) | 0x5, one, one - 1, one + 1, one | (1 << (m - 1)),
            (one + (1 << m)), one - (1 << m)]
    vals = vals + [v | sign for v in vals]
    return np.array(vals, dtype=np.uint64)


def _float_words(rng, fmt, n):
    bits, e, m = _FLOAT[fmt]
    sp = _float_specials(bits, e, m)
    k = rng.integers(0, 8, n)
    out = rng.integers(0, 1 << 63, n, dtype=np.uint64, endpoint=True) if bits == 64 else \
        rng.integers(0, 1 << bits, n, dtype=np.uint64)
    # exponents near the bias (values near 1) so that sums cancel and round
    bias = (1 << (e - 1)) - 1
    ex = (bias + rng.integers(-4, 5, n)).astype(np.uint64)
    mant = out & np.uint64((1 << m) - 1)
    near = (ex << np.uint64(m)) | mant | (out & np.uint64(1 << (bits - 1)))
    # short significands (few bits set): exact products, ties in every rounding
    keep = rng.integers(1, 5, n).astype(np.uint64)
    short = near & ~((np.uint64(1) << (np.uint64(m) - keep)) - np.uint64(1))
    # subnormals and values near the normal/subnormal boundary
    ex2 = rng.integers(0, 3, n).astype(np.uint64)
    sub = (ex2 << np.uint64(m)) | mant | (out & np.uint64(1 << (bits - 1)))
    res = np.select([k == 0, k == 1, k == 2, k == 3, k == 4],
                    [sp[rng.integers(0, len(sp), n)], near, short, sub,
                     (np.uint64(bias + m + 2 + rng.integers(-3, 8, n)) << np.uint64(m)) | mant],
                    out)
    return res.astype(np.uint64)


_INT_SPECIAL = [0, 1, 2, 3, -1, -2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF]


def _int_words(rng, bits, signed, n):
    lim = 1 << bits
    sp = [0, 1, 2, 3, lim - 1, lim - 2, (lim >> 1) - 1, lim >> 1, (lim >> 1) + 1, 0x7F, 0x80,
          0xFF, 0x7FFF, 0x8000, 0xFFFF, 1 << 24, (1 << 24) + 1, (1 << 24) + 3, (1 << 53) + 1,
          (1 << 11) + 1, 0x1000001]
    sp = np.array([v % lim for v in sp], dtype=np.uint64)
    k = rng.integers(0, 4, n)
    full = rng.integers(0, lim - 1 if bits == 64 else lim, n, dtype=np.uint64, endpoint=bits == 64)
    nb = rng.integers(1, bits + 1, n).astype(np.uint64)
    small = full >> (np.uint64(bits) - nb)
    neg = (np.uint64(lim - 1) ^ small) if bits < 64 else ~small
    res = np.select([k == 0, k == 1, k == 2], [sp[rng.integers(0, len(sp), n)], small, neg], full)
    return res.astype(np.uint64)


def operand_words(fmt: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """n words (uint64) for one operand of format ``fmt``."""
    if fmt == "pred":
        return rng.integers(0, 2, n).astype(np.uint64)
    if fmt in _FLOAT:
        return _float_words(rng, fmt, n)
    if fmt in ("f16x2", "bf16x2"):
        lo = _float_words(rng, fmt[:-2], n)
        hi = _float_words(rng, fmt[:-2], n)
        return lo | (hi << np.uint64(16))
    if fmt in ("e4m3x2", "e5m2x2"):
        return rng.integers(0, 1 << 16, n).astype(np.uint64)
    if fmt in ("u16x2", "s16x2"):
        return _int_words(rng, 16, True, n) | (_int_words(rng, 16, True, n) << np.uint64(16))
    bits = {8: 8, 16: 16, 32: 32, 64: 64}[int(fmt[1:])]
    w = _int_words(rng, bits, fmt[0] == "s", n)
    if bits == 8:  # sub-word sources sit in 16-bit registers: random upper byte too
        w = w | (rng.integers(0, 256, n).astype(np.uint64) << np.uint64(8))
    return w


def inputs(case: Case, n: int, seed: int = 0) -> np.ndarray:
    """(n, len(case.srcs)) uint64 source words of one case, deterministic in (case, seed).

    Where all sources share a format, a quarter of the rows reuse one value for every
    source (a + a, a == a, ...).
    """
    rng = np.random.default_rng([seed, zlib.crc32(case.text.encode())])
    if exhaustive(case):
        lo = np.arange(1 << 16, dtype=np.uint64)
        if WIDTH[case.srcs[0]] == 32:
            hi = rng.permutation(lo)
            lo = lo | (hi << np.uint64(16))
        return lo[:, None]
    cols = [operand_words(f, rng, n) for f in case.srcs]
    w = np.stack(cols, axis=1) if cols else np.zeros((n, 0), np.uint64)
    if len(set(case.srcs)) == 1 and len(case.srcs) > 1:
        same = rng.random(n) < 0.25
        w[same] = w[same, :1]
    return w


def sm100_convert_cases() -> list[Case]:
    """Candidate forms of the sm_100 packed conversions (fp4/fp6/ue8m0; legality check only:
    no such GPU here)."""
    out = []
    narrow = {"e2m1x2": "b8", "e2m3x2": "b16", "e3m2x2": "b16"}
    for d, reg in narrow.items():
        for r, s, u in itertools.product((".rn", ".rz"), _opt("satfinite"), _opt("relu")):
            out.append(Case(f"cvt{r}{s}{u}.{d}.f32", (reg,), ("f32", "f32")))
            for src in ("f16x2", "bf16x2"):
                out.append(Case(f"cvt{r}{s}{u}.{d}.{src}", (reg,), (src,)))
            out.append(Case(f"cvt{r}{s}{u}.f16x2.{d}", ("f16x2",), (reg,)))
    for r, s, u in itertools.product((".rn", ".rz", ".rp"), _opt("satfinite"), _opt("relu")):
        out.append(Case(f"cvt{r}{s}{u}.ue8m0x2.f32", ("b16",), ("f32", "f32")))
        out.append(Case(f"cvt{r}{s}{u}.ue8m0x2.bf16x2", ("b16",), ("bf16x2",)))
        out.append(Case(f"cvt{r}{s}{u}.bf16x2.ue8m0x2", ("bf16x2",), ("b16",)))
    for d in ("e4m3x2", "e5m2x2"):
        for u in _opt("relu"):
            out.append(Case(f"cvt.rn.satfinite{u}.{d}.bf16x2", (d,), ("bf16x2",)))
    return out


def load_cases(man: dict) -> list[Case]:
    return [Case(c["text"], tuple(c["dsts"]), tuple(c["srcs"]), c["pq"]) for c in man["cases"]]
