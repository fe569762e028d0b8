"""Deterministic, platform-independent register words for mma.sync validation runs.

Every random bit comes from a counter-based hash: splitmix64 evaluated in numpy ``uint64``
arithmetic (which wraps modulo 2**64 on every platform), keyed by a 64-bit key that
:func:`hashlib.blake2b` derives from ``(seed, instr.text, distribution, operand)``.  The counter is
the element's flat index in ``[warp][lane][register][element]`` order, so

* the same seed gives the same words on every numpy version and machine (numpy's ``Generator``
  is never used), and
* the words are *prefix-stable*: the first ``w`` warps of an ``n``-warp set equal the ``w``-warp
  set.  A small fixture can therefore be cut from a large collection without regenerating it.

Element codes of width ``storage_bits`` are packed low to high into each register.  In the
``.kind::f8f6f4`` byte containers an e2m1 code sits in bits 5:2 and an e3m2/e2m3 code in bits
5:0 of its byte.

Distributions (see :data:`DISTRIBUTIONS`): ``uniform-bits``, ``normal``, ``narrow``, ``wide`` and
``special`` for floating-point A/B types; ``uniform-bits`` and ``special`` for integer and b1.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from warpsim.facts.isa import Instruction

#: Bump when any generator changes: a manifest records it and ``check`` refuses a mismatch.
GENERATOR_VERSION = 1

FLOAT_DISTS = ("uniform-bits", "normal", "narrow", "wide", "special", "tiny")
INT_DISTS = ("uniform-bits", "special")
DISTRIBUTIONS = FLOAT_DISTS

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class FloatFormat:
    """Sign/exponent/fraction layout of a float element format.

    ``nan_style``: 'ieee' (max exponent field = Inf/NaN), 'fn' (e4m3: no Inf, only S.1111.111 is
    NaN) or 'finite' (fp6/fp4: every code is a finite number).  ``pad`` is the number of low
    container bits below the fraction that the format ignores (tf32 in an f32 container: 13).
    """

    name: str
    ebits: int
    mbits: int
    nan_style: str = "ieee"
    pad: int = 0

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits + self.pad

    @property
    def max_finite_field(self) -> int:
        """Largest exponent field holding finite numbers."""
        top = (1 << self.ebits) - 1
        return top - 1 if self.nan_style == "ieee" else top

    @property
    def emax(self) -> int:
        return self.max_finite_field - self.bias

    @property
    def emin_sub(self) -> int:
        """Exponent of the smallest subnormal."""
        return 1 - self.bias - self.mbits


FLOAT_FORMATS = {
    "f16": FloatFormat("f16", 5, 10),
    "bf16": FloatFormat("bf16", 8, 7),
    "tf32": FloatFormat("tf32", 8, 10, pad=13),
    "f32": FloatFormat("f32", 8, 23),
    "f64": FloatFormat("f64", 11, 52),
    "e4m3": FloatFormat("e4m3", 4, 3, "fn"),
    "e5m2": FloatFormat("e5m2", 5, 2),
    "e3m2": FloatFormat("e3m2", 3, 2, "finite"),
    "e2m3": FloatFormat("e2m3", 2, 3, "finite"),
    "e2m1": FloatFormat("e2m1", 2, 1, "finite"),
}

INT_TYPES = {"s8": (8, True), "u8": (8, False), "s4": (4, True), "u4": (4, False),
             "s32": (32, True), "b1": (1, False)}


def is_float_type(t: str) -> bool:
    return t in FLOAT_FORMATS


def distributions_for(instr: Instruction) -> tuple[str, ...]:
    """The distributions that apply to ``instr`` (by its A type)."""
    return FLOAT_DISTS if is_float_type(instr.atype) else INT_DISTS


# --------------------------------------------------------------------------------------------
# Counter-based random numbers
# --------------------------------------------------------------------------------------------


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = z.astype(np.uint64, copy=True)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def _mix_int(z: int) -> int:
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def stable_key(*parts: object) -> int:
    """A 64-bit key from text parts, identical on every platform and Python version."""
    h = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


class CounterRNG:
    """Independent uint64 streams over the element grid ``shape`` (prefix-stable in axis 0).
    ``start``: the grid begins at index ``start`` of axis 0 (the same draws as rows start..
    of a larger grid: a part of a sweep generated on its own)."""

    def __init__(self, key: int, shape: tuple[int, ...], start: int = 0):
        self.key = key & _M64
        self.shape = shape
        n = int(np.prod(shape, dtype=np.int64))
        first = int(start) * int(np.prod(shape[1:], dtype=np.int64))
        self._ctr = (np.arange(first, first + n, dtype=np.uint64) + np.uint64(1)) * np.uint64(_GOLDEN)

    def draw(self, stream: int) -> np.ndarray:
        base = _mix_int(self.key ^ _mix_int((stream + 1) * _GOLDEN))
        return _mix(self._ctr + np.uint64(base)).reshape(self.shape)

    def below(self, stream: int, n: int) -> np.ndarray:
        """Integers in [0, n) (modulo bias is irrelevant here: n is tiny against 2**64)."""
        return self.draw(stream) % np.uint64(n)

    def per_register(self, stream: int) -> np.ndarray:
        """One draw per register, broadcast over the register's elements."""
        r = self.draw(stream)
        return np.broadcast_to(r[..., :1], self.shape)


def _u(x) -> np.uint64:
    return np.uint64(x)


# --------------------------------------------------------------------------------------------
# Element codes
# --------------------------------------------------------------------------------------------

# stream numbers
_S_BITS, _S_SIGN, _S_EXP, _S_FRAC, _S_CAT, _S_PAD, _S_PADSEL, _S_AUX = range(8)


def _compose(fmt: FloatFormat, sign, exp, frac) -> np.ndarray:
    sign = np.asarray(sign, dtype=np.uint64)
    exp = np.asarray(exp, dtype=np.uint64)
    frac = np.asarray(frac, dtype=np.uint64)
    sh = fmt.mbits + fmt.pad
    return (sign << _u(fmt.ebits + sh)) | (exp << _u(sh)) | (frac << _u(fmt.pad))


def _fix_fn_nan(fmt: FloatFormat, exp, frac):
    """e4m3 has its NaN at exponent and fraction all ones: step a finite draw off it."""
    if fmt.nan_style == "fn":
        top = (1 << fmt.ebits) - 1
        mmax = (1 << fmt.mbits) - 1
        hit = (exp == _u(top)) & (frac == _u(mmax))
        frac = np.where(hit, _u(mmax - 1), frac)
    return frac


def _exp_in(rng: CounterRNG, fmt: FloatFormat, lo: int, hi: int) -> np.ndarray:
    """Exponent fields uniform in [lo, hi], clipped to [0, max finite field]."""
    lo = max(0, min(lo, fmt.max_finite_field))
    hi = max(lo, min(hi, fmt.max_finite_field))
    return rng.below(_S_EXP, hi - lo + 1) + _u(lo)


def _float_codes(fmt: FloatFormat, dist: str, role: str, rng: CounterRNG,
                 ab_fmt: FloatFormat | None) -> np.ndarray:
    b = fmt.bias
    mmask = _u((1 << fmt.mbits) - 1)
    sign = rng.draw(_S_SIGN) & _u(1)
    frac = rng.draw(_S_FRAC) & mmask
    if dist == "uniform-bits":
        codes = rng.draw(_S_BITS) & _u((1 << fmt.width) - 1) if fmt.width < 64 else rng.draw(_S_BITS)
        return codes
    if dist == "normal":
        exp = _exp_in(rng, fmt, max(1, b - 3), b + 3)
    elif dist == "narrow":
        if role == "c":
            exp = _exp_in(rng, fmt, max(1, b - 1), b + 3)  # products' magnitude: [2^-2, 2^4)
        else:
            exp = _exp_in(rng, fmt, max(1, b - 1), b + 1)
    elif dist == "wide":
        if role == "c" and ab_fmt is not None and ab_fmt.name != fmt.name:
            lo, hi = 2 * ab_fmt.emin_sub - 4 + b, 2 * ab_fmt.emax + 4 + b
        else:
            lo, hi = 0, fmt.max_finite_field
        exp = _exp_in(rng, fmt, lo, hi)
        # one element in sixteen is subnormal (or zero) whatever the range
        exp = np.where(rng.below(_S_AUX, 16) == _u(0), _u(0), exp)
    elif dist == "special":
        return _special_float(fmt, role, rng, sign, frac)
    elif dist == "tiny":
        # signed zeros and the smallest subnormals: sums that are exactly zero, all -0, or
        # underflow with either sign (half the elements are +-0, the rest subnormal)
        frac = np.where(rng.below(_S_AUX, 2) == _u(0), _u(0), frac & _u(3))
        return _compose(fmt, sign, np.zeros_like(frac), frac)
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    frac = _fix_fn_nan(fmt, exp, frac)
    return _compose(fmt, sign, exp, frac)


def _special_float(fmt: FloatFormat, role: str, rng: CounterRNG, sign, frac) -> np.ndarray:
    b, mb = fmt.bias, fmt.mbits
    top = (1 << fmt.ebits) - 1
    mmax = (1 << mb) - 1
    cat = rng.below(_S_CAT, 16)
    normal_exp = _exp_in(rng, fmt, max(1, b - 3), b + 3)
    exp = normal_exp.copy()
    fr = _fix_fn_nan(fmt, exp, frac.copy())

    def put(mask, e, f):
        nonlocal exp, fr
        exp = np.where(mask, np.asarray(e, dtype=np.uint64), exp)
        fr = np.where(mask, np.asarray(f, dtype=np.uint64), fr)

    if fmt.nan_style == "fn":
        max_e, max_f = top, mmax - 1
    else:
        max_e, max_f = fmt.max_finite_field, mmax
    put((cat == _u(0)) | (cat == _u(1)), 0, 0)  # +-0
    if fmt.nan_style == "ieee":
        put(cat == _u(2), top, 0)  # +-Inf
        qbit = 1 << (mb - 1)
        payload = frac & _u(qbit - 1)
        put(cat == _u(3), top, payload | _u(qbit))  # quiet NaN, random payload
        if mb >= 2:
            # signalling NaN: quiet bit clear, payload non-zero (in the bits the format keeps)
            put(cat == _u(4), top, np.where(payload == _u(0), _u(1), payload))
        else:
            put(cat == _u(4), top, qbit)
    elif fmt.nan_style == "fn":
        put((cat == _u(2)) | (cat == _u(3)) | (cat == _u(4)), top, mmax)  # the only NaN
    else:
        put((cat == _u(2)) | (cat == _u(3)) | (cat == _u(4)), max_e, max_f)  # no Inf/NaN: max
    put(cat == _u(5), max_e, max_f)  # +-max finite
    if role == "c":
        # near overflow: the top binade, random fraction (e4m3: avoid the NaN code)
        nf = frac if fmt.nan_style != "fn" else np.minimum(frac, _u(mmax - 1))
        put(cat == _u(6), max_e, nf)
    else:
        put(cat == _u(6), max_e, frac if fmt.nan_style != "fn" else np.minimum(frac, _u(mmax - 1)))
    put(cat == _u(7), 1, 0)  # min normal
    put(cat == _u(8), 0, 1)  # min subnormal
    put(cat == _u(9), 0, np.where(frac == _u(0), _u(1), frac))  # random subnormal
    return _compose(fmt, sign, exp, fr)


def _int_codes(t: str, dist: str, role: str, rng: CounterRNG) -> np.ndarray:
    width, signed = INT_TYPES[t]
    mask = _u((1 << width) - 1)
    bits = rng.draw(_S_BITS) & mask
    if dist == "uniform-bits":
        return bits
    if dist != "special":
        raise ValueError(f"distribution {dist!r} does not apply to integer type {t}")
    if t == "b1":
        mode = rng.per_register(_S_CAT) % _u(5)
        sparse = (rng.below(_S_AUX, 16) == _u(0)).astype(np.uint64)
        out = np.where(mode == _u(0), _u(0), bits)
        out = np.where(mode == _u(1), _u(1), out)
        out = np.where(mode == _u(3), sparse, out)
        out = np.where(mode == _u(4), _u(1) - sparse, out)
        return out
    if t == "s32":
        cat = rng.below(_S_CAT, 8)
        r = rng.draw(_S_AUX) & _u(0x7FFFF)  # up to 2^19: reaches the largest k=64 product sums
        imax, imin = 0x7FFFFFFF, 0x80000000
        out = bits.copy()  # cat 6, 7: full random
        out = np.where((cat == _u(0)) | (cat == _u(1)), _u(imax) - r, out)
        out = np.where((cat == _u(2)) | (cat == _u(3)), _u(imin) + r, out)
        out = np.where(cat == _u(4), np.where(r & _u(1), _u(0xFFFFFFFF), _u(0)), out)
        small = (r & _u(0xFFFF))
        out = np.where(cat == _u(5), np.where(r & _u(0x10000), (_u(0) - small) & mask, small), out)
        return out & mask
    if signed:
        lo = 1 << (width - 1)  # code of the most negative value
        table = [lo, lo + 1, (1 << width) - 1, 0, 1, lo - 2, lo - 1]  # min, min+1, -1, 0, 1, max-1, max
    else:
        table = [0, 1, 2, (1 << width) - 2, (1 << width) - 1, 1 << (width - 1), (1 << (width - 1)) - 1]
    cat = rng.below(_S_CAT, 10)
    out = bits.copy()
    for i, v in enumerate(table):
        out = np.where(cat == _u(i), _u(v), out)
    return out


def element_codes(instr: Instruction, operand: str, dist: str, n_warps: int, seed: int,
                  start: int = 0) -> np.ndarray:
    """Element codes (n_warps, 32, regs, elements_per_register) uint64 for one operand (warps
    start .. start + n_warps - 1 of the seed's stream)."""
    t = instr.type_of(operand)
    regs = instr.regs[operand]
    epr = instr.elements_per_register(operand)
    key = stable_key("warpsim-validation", GENERATOR_VERSION, seed, instr.text, dist, operand)
    rng = CounterRNG(key, (n_warps, 32, regs, epr), start)
    role = "c" if operand == "c" else "ab"
    if is_float_type(t):
        ab_fmt = FLOAT_FORMATS.get(instr.atype)
        codes = _float_codes(FLOAT_FORMATS[t], dist, role, rng, ab_fmt)
        if FLOAT_FORMATS[t].pad and dist != "uniform-bits":
            # tf32: half of the elements get random bits in the 13 ignored low bits
            sel = rng.below(_S_PADSEL, 2) == _u(1)
            pad = rng.draw(_S_PAD) & _u((1 << FLOAT_FORMATS[t].pad) - 1)
            codes = np.where(sel, codes | pad, codes)
        return codes
    return _int_codes(t, dist, role, rng)


def container_shift(instr: Instruction, operand: str) -> int:
    """Left shift of an element code inside its storage container (f8f6f4 fp4: 2)."""
    if operand in "ab" and instr.kind in ("f8f6f4", "mxf8f6f4") and instr.type_of(operand) == "e2m1":
        return 2
    return 0


def pack(codes: np.ndarray, storage_bits: int, register_bits: int, shift: int = 0) -> np.ndarray:
    """Pack (..., regs, epr) element codes low to high into (..., regs) register words."""
    epr = codes.shape[-1]
    assert epr * storage_bits == register_bits
    sh = (np.arange(epr, dtype=np.uint64) * np.uint64(storage_bits) + np.uint64(shift))
    words = np.bitwise_or.reduce(codes << sh, axis=-1)
    return words.astype(np.uint64 if register_bits == 64 else np.uint32)


def unpack(words: np.ndarray, storage_bits: int, register_bits: int, shift: int = 0,
           code_bits: int | None = None) -> np.ndarray:
    """Inverse of :func:`pack`: (..., regs) words to (..., regs, epr) codes."""
    epr = register_bits // storage_bits
    code_bits = storage_bits if code_bits is None else code_bits
    w = words.astype(np.uint64)[..., None]
    sh = np.arange(epr, dtype=np.uint64) * np.uint64(storage_bits) + np.uint64(shift)
    mask = np.uint64((1 << code_bits) - 1) if code_bits < 64 else np.uint64(_M64)
    return (w >> sh) & mask


def operand_words(instr: Instruction, operand: str, dist: str, n_warps: int, seed: int,
                  start: int = 0) -> np.ndarray:
    codes = element_codes(instr, operand, dist, n_warps, seed, start)
    return pack(codes, instr.storage_bits(operand), instr.register_bits(operand),
                container_shift(instr, operand))


def make_inputs(instr: Instruction, dist: str, n_warps: int, seed: int, *, start: int = 0,
                executor=None, workers: int | None = None) -> dict[str, np.ndarray]:
    """Register words for A, B and C: {'a': (n, 32, ra), 'b': ..., 'c': ...}.

    uint32 words, or uint64 for f64 operands.  Deterministic in (instr.text, dist, seed) and
    prefix-stable in ``n_warps``; ``start``: warps start .. start + n_warps - 1 of that stream.
    ``executor`` / ``workers``: generate parts of the warps on a ``concurrent.futures``
    executor ('process': a process pool of ``workers``), as ``launch`` spreads CTAs; the same
    bits whatever the executor and worker count.
    """
    if dist not in distributions_for(instr):
        raise ValueError(f"distribution {dist!r} does not apply to {instr.text}")
    if executor is None and workers is None:
        return {op: operand_words(instr, op, dist, n_warps, seed, start) for op in "abc"}
    parts = spread_ranges(_inputs_part, (instr.text, dist, seed), start, n_warps, executor, workers)
    return {op: np.concatenate([p[op] for p in parts]) for op in "abc"}


def _inputs_part(text: str, dist: str, seed: int, start: int, count: int) -> dict:
    from warpsim.tensorcore.execute import resolve

    instr = resolve(text, None)  # instructions travel as text: decoded ones carry caches
    return {op: operand_words(instr, op, dist, count, seed, start) for op in "abc"}


#: Warps per part of a spread sweep at the least (smaller parts cost more to ship than to run).
PART_MIN = 256


def spread_ranges(fn, args: tuple, start: int, count: int, executor, workers: int | None,
                  progress=None) -> list:
    """``fn(*args, part_start, part_count)`` over ``count`` warps from ``start`` cut into parts
    (at most ``workers``, each a multiple of :data:`PART_MIN` warps but the last), run on
    ``executor`` (any ``concurrent.futures.Executor``; 'process' or None: a process pool of
    ``workers``, default the cores this process may use); the results in warp order.  ``progress(done, total)``
    after each part, in order.  ``fn`` must be a module-level function (it is pickled)."""
    from concurrent.futures import Executor, ProcessPoolExecutor

    from warpsim._util.cores import usable_cores

    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, (int, np.integer))
                                or workers < 1):
        raise TypeError(f"workers must be a positive integer, got {workers!r}")
    if executor is not None and executor != "process" and not isinstance(executor, Executor) \
            and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor must be a concurrent.futures.Executor or 'process', got {executor!r}")
    own = executor is None or executor == "process"
    n = int(workers) if workers is not None else usable_cores() if own \
        else int(getattr(executor, "_max_workers", None) or usable_cores())
    blocks = -(-count // PART_MIN)
    k = max(1, min(n, blocks))
    cuts = [start + min(count, i * blocks // k * PART_MIN) for i in range(k)] + [start + count]
    ranges = [(a, b - a) for a, b in zip(cuts, cuts[1:]) if b > a]
    if len(ranges) <= 1:  # nothing to spread: no pool to start
        out = [fn(*args, a, c) for a, c in ranges]
        if progress is not None and ranges:
            progress(count, count)
        return out
    pool = ProcessPoolExecutor(min(n, len(ranges))) if own else executor
    ok = False
    try:
        futures = [pool.submit(fn, *args, a, c) for a, c in ranges]
        out, done = [], 0
        for f, (_, c) in zip(futures, ranges):
            out.append(f.result())  # a part's error is raised here, the first in warp order
            done += c
            if progress is not None:
                progress(done, count)
        ok = True
        return out
    finally:
        if own:  # after an error: do not wait on parts that may never finish
            pool.shutdown(wait=ok, cancel_futures=True)
