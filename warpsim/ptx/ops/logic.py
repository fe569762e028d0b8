"""Bit manipulation: logic, shifts, bit fields, counts, funnel shift, byte permute, lop3.

Every function takes and returns unsigned register words (uint16/32/64; predicates bool),
vectorized over any shape.  Facts from the PTX ISA 9.x instruction pages (restated).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Imm, Pipe

_U = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_S = {16: np.int16, 32: np.int32, 64: np.int64}
_W = {"b16": 16, "b32": 32, "b64": 64, "u16": 16, "u32": 32, "u64": 64, "s16": 16, "s32": 32,
      "s64": 64}


def _w(t: str) -> int:
    return _W[t]


# --- logic ------------------------------------------------------------------------------------
def _and(s, *, type):
    return s[0] & s[1]


def _or(s, *, type):
    return s[0] | s[1]


def _xor(s, *, type):
    return s[0] ^ s[1]


def _not(s, *, type):
    return ~s[0]


def _cnot(s, *, type):
    a = np.asarray(s[0])
    return (a == 0).astype(a.dtype)


_LOGIC_T = ("pred", "b16", "b32", "b64")


# --- shifts -----------------------------------------------------------------------------------
def _shl(s, *, type):
    w = _w(type)
    ut = _U[w]
    if np.ndim(s[1]) == 0:  # an immediate or uniform amount: one shift, no per-lane select
        k = int(s[1])
        return (np.asarray(s[0]) << ut(k)).astype(ut) if k < w else np.zeros(np.shape(s[0]), ut)
    a, b = np.asarray(s[0]), np.asarray(s[1]).astype(np.uint32)
    big = b >= w
    sh = np.where(big, 0, b).astype(ut)
    return np.where(big, ut(0), (a << sh)).astype(ut)


def _shr(s, *, type):
    w = _w(type)
    ut = _U[w]
    if np.ndim(s[1]) == 0:
        k = int(s[1])
        a = np.asarray(s[0])
        if type.startswith("s"):
            st = _S[w]
            return (a.view(st) >> st(min(k, w - 1))).view(ut)
        return (a >> ut(k)).astype(ut) if k < w else np.zeros(a.shape, ut)
    a, b = np.asarray(s[0]), np.asarray(s[1]).astype(np.uint32)
    if type.startswith("s"):
        st = _S[w]
        sh = np.minimum(b, w - 1).astype(st)
        return (a.view(st) >> sh).astype(st).view(ut)
    big = b >= w
    sh = np.where(big, 0, b).astype(ut)
    return np.where(big, ut(0), a >> sh).astype(ut)


def _shift_sig(t, mods):
    return (t,), (t, "u32")


# --- bit fields -------------------------------------------------------------------------------
def _pos_len(pos, ln, w: int):
    """Bit-field position and length: the low 8 bits for 32-bit fields (PTX ISA); the whole
    u32 values for 64-bit fields, as the H100 computes them (ptxas lowers bfe/bfi.64 to 32-bit
    operations that do not mask; measured, docs/validation.md)."""
    m = 0xFF if w == 32 else 0xFFFFFFFF
    return ((np.asarray(pos).astype(np.int64) & m), (np.asarray(ln).astype(np.int64) & m))


def _bfe(s, *, type):
    a = np.asarray(s[0])
    w = _w(type)
    ut, st = _U[w], _S[w]
    pos, ln = _pos_len(s[1], s[2], w)
    if pos.ndim == 0 and ln.ndim == 0 and a.dtype == ut:
        return _bfe_const(a, int(pos), int(ln), w, ut, type.startswith("s"))
    msb = w - 1
    i = np.arange(w, dtype=np.int64)
    pos, ln, a = np.broadcast_arrays(pos, ln, a)
    src = pos[..., None] + i
    take = (i < ln[..., None]) & (src <= msb)
    abits = (a[..., None] >> np.minimum(src, msb).astype(ut)) & ut(1)
    if type.startswith("s"):
        top = np.minimum(pos + ln - 1, msb)
        sbit = np.where(ln == 0, ut(0), (a >> np.maximum(top, 0).astype(ut)) & ut(1))
    else:
        sbit = np.zeros(a.shape, ut)
    bitsv = np.where(take, abits, sbit[..., None]).astype(ut)
    return np.bitwise_or.reduce(bitsv << i.astype(ut), axis=-1).astype(ut)


def _bfe_const(a, p: int, n: int, w: int, ut, signed: bool) -> np.ndarray:
    """bfe with one position and length for all lanes (immediates, as compilers write it): the
    field is a shift and a mask; a signed field is extended from its top bit (bit
    min(p + n, w) - 1 of ``a``), and a field starting past the top is that bit everywhere."""
    if n == 0:
        return np.zeros(a.shape, ut)
    if p >= w:
        return (ut(0) - (a >> ut(w - 1))).astype(ut) if signed else np.zeros(a.shape, ut)
    n = min(n, w - p)
    full = (1 << w) - 1
    field = (a >> ut(p)) & ut((1 << n) - 1)
    if signed and n < w:
        top = (field >> ut(n - 1)) & ut(1)
        field = field | ((ut(0) - top) & ut(full ^ ((1 << n) - 1)))
    return np.asarray(field).astype(ut)


def _bfe_sig(t, mods):
    return (t,), (t, "u32", "u32")


def _bfi(s, *, type):
    a, b = np.asarray(s[0]), np.asarray(s[1])
    w = _w(type)
    ut = _U[w]
    pos, ln = _pos_len(s[2], s[3], w)
    n = np.clip(np.minimum(ln, w - pos), 0, w)  # bits actually inserted
    ones = np.where(n >= w, ~ut(0), ((np.uint64(1) << np.minimum(n, 63).astype(np.uint64)) - np.uint64(1)).astype(ut))
    ones = np.where(n <= 0, ut(0), ones).astype(ut)
    sh = np.minimum(pos, w - 1).astype(ut)
    field = np.where(pos >= w, ut(0), (ones << sh)).astype(ut)
    return ((b & ~field) | ((a << sh) & field)).astype(ut)


def _bfi_sig(t, mods):
    return (t,), (t, t, "u32", "u32")


def _msb(x: np.ndarray, w: int) -> np.ndarray:
    """Index of the most significant set bit (-1 for zero), exact for 64-bit words."""
    x = np.asarray(x).astype(np.uint64)
    out = np.full(x.shape, -1, np.int64)
    for k in (32, 16, 8, 4, 2, 1):
        if k >= w:
            continue
    # binary search on bit position
    pos = np.zeros(x.shape, np.int64)
    y = x.copy()
    for k in (32, 16, 8, 4, 2, 1):
        hi = (y >> np.uint64(k)) != 0
        pos = np.where(hi, pos + k, pos)
        y = np.where(hi, y >> np.uint64(k), y)
    return np.where(x == 0, out, pos)


def _bfind(s, *, type, shiftamt=None):
    a = np.asarray(s[0])
    w = _w(type)
    if type.startswith("s"):
        neg = (a >> _U[w](w - 1)) & _U[w](1)
        a = np.where(neg != 0, ~a, a)
    m = _msb(a, w)
    if shiftamt:
        m = np.where(m < 0, -1, (w - 1) - m)
    return (m & 0xFFFFFFFF).astype(np.uint32)


def _u32_result(t, mods):
    return ("u32",), (t,)


def _brev(s, *, type):
    a = np.asarray(s[0])
    w = _w(type)
    ut = _U[w]
    v = a.astype(ut)
    out = np.zeros(v.shape, ut)
    for i in range(w):
        out |= ((v >> ut(i)) & ut(1)) << ut(w - 1 - i)
    return out


def _clz(s, *, type):
    w = _w(type)
    return ((w - 1) - _msb(s[0], w)).astype(np.uint32)


_POPC8 = np.array([bin(i).count("1") for i in range(256)], np.uint32)


def _popc(s, *, type):
    a = np.ascontiguousarray(np.asarray(s[0]))
    b = a.view(np.uint8).reshape(a.shape + (a.dtype.itemsize,))
    return _POPC8[b].sum(axis=-1, dtype=np.uint32)


# --- funnel shift -----------------------------------------------------------------------------
def _shf(s, *, type, dir, mode):
    a = np.asarray(s[0]).astype(np.uint64)
    b = np.asarray(s[1]).astype(np.uint64)
    c = np.asarray(s[2]).astype(np.uint64)
    n = np.minimum(c, 32) if mode == "clamp" else (c & np.uint64(31))
    both = (b << np.uint64(32)) | a
    if dir == "l":
        r = (both << n) >> np.uint64(32)
    else:
        r = both >> n
    return (r & np.uint64(0xFFFFFFFF)).astype(np.uint32)


# --- byte permute -----------------------------------------------------------------------------
_PRMT_MODES = {  # selector (c & 3) -> source byte of output bytes b0..b3
    "f4e": lambda s: [s, s + 1, s + 2, s + 3],
    "b4e": lambda s: [(s - k) % 8 for k in range(4)],
    "rc8": lambda s: [s] * 4,
    "ecl": lambda s: [max(k, s) for k in range(4)],
    "ecr": lambda s: [min(k, s) for k in range(4)],
    "rc16": lambda s: [0, 1, 0, 1] if s % 2 == 0 else [2, 3, 2, 3],
}
_PRMT_TABLE = {m: np.array([[f(s)[k] % 8 for k in range(4)] for s in range(4)], np.uint64)
               for m, f in _PRMT_MODES.items()}


def _prmt(s, *, type, mode=None):
    a = np.asarray(s[0]).astype(np.uint64)
    b = np.asarray(s[1]).astype(np.uint64)
    c = np.asarray(s[2]).astype(np.uint32)
    tmp = (b << np.uint64(32)) | a
    a, c = np.broadcast_arrays(tmp, c)
    out = np.zeros(a.shape, np.uint64)
    if mode is None:
        for k in range(4):
            sel = ((c >> np.uint32(4 * k)) & np.uint32(0xF)).astype(np.uint64)
            byte = (a >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where(byte >= 0x80, np.uint64(0xFF), np.uint64(0))
            byte = np.where(sel >= 8, sign, byte)
            out |= byte << np.uint64(8 * k)
    else:
        table = _PRMT_TABLE[mode][(c & np.uint32(3)).astype(np.intp)]  # (..., 4)
        for k in range(4):
            byte = (a >> (table[..., k] * np.uint64(8))) & np.uint64(0xFF)
            out |= byte << np.uint64(8 * k)
    return out.astype(np.uint32)


# --- lop3 -------------------------------------------------------------------------------------
_F2 = {  # two-input functions of (b, c) by 4-bit truth table (bit 2*b + c)
    0x0: lambda b, c: b & ~b, 0x1: lambda b, c: ~(b | c), 0x2: lambda b, c: ~b & c,
    0x3: lambda b, c: ~b, 0x4: lambda b, c: b & ~c, 0x5: lambda b, c: ~c,
    0x6: lambda b, c: b ^ c, 0x7: lambda b, c: ~(b & c), 0x8: lambda b, c: b & c,
    0x9: lambda b, c: ~(b ^ c), 0xA: lambda b, c: c, 0xB: lambda b, c: ~b | c,
    0xC: lambda b, c: b, 0xD: lambda b, c: b | ~c, 0xE: lambda b, c: b | c,
    0xF: lambda b, c: b | ~b,
}


def lop3_value(a, b, c, lut: int):
    """Bitwise F(a, b, c) with truth table ``lut`` (bit index 4·a + 2·b + c), evaluated as
    (a & F1(b, c)) | (~a & F0(b, c)) with F1, F0 the table's halves."""
    if not (np.shape(a) == np.shape(b) == np.shape(c)):
        a, b, c = np.broadcast_arrays(a, b, c)
    hi, lo = (lut >> 4) & 0xF, lut & 0xF
    if hi == lo:
        return _F2[hi](b, c)
    f1, f0 = _F2[hi](b, c), _F2[lo](b, c)
    return (a & f1) | (~a & f0)


def _compile_lop3(ins, dec):
    words = ins.words
    boolop = None
    rest = list(words)
    for w in ("or", "and"):
        if w in rest:
            boolop = w
            rest.remove(w)
    if rest != ["b32"]:
        raise PtxError(f"{ins.text}: lop3 takes .b32 (and optionally .or/.and); got "
                       f"{'.'.join(words) or 'no type'}")
    ins.type = "b32"
    ops = list(ins.operands)
    want = 6 if boolop else 5
    if len(ops) != want:
        raise PtxError(f"{ins.text}: lop3{'.' + boolop if boolop else ''}.b32 takes {want} operands")
    lut_op = ops[4]
    if not isinstance(lut_op, Imm) or lut_op.kind != "int" or not 0 <= lut_op.value <= 255:
        raise PtxError(f"{ins.text}: immLut must be an integer constant 0..255")
    lut = int(lut_op.value)
    ra, rb, rc = (dec.reader(o, "b32") for o in ops[1:4])
    if boolop:
        dst = ops[0]
        if not isinstance(dst, Pipe) or len(dst.items) != 2:
            raise PtxError(f"{ins.text}: lop3.{boolop} needs a d|p destination")
        wd = dec.writer(dst.items[0], "b32")
        wp = dec.writer(dst.items[1], "pred")
        rq = dec.reader(ops[5], "pred")

        def run_bool(ctx, mask):
            d = lop3_value(ra(ctx), rb(ctx), rc(ctx), lut)
            nz = d != 0
            p = (nz | rq(ctx)) if boolop == "or" else (nz & rq(ctx))
            if wd is not None:
                wd(ctx, d, mask)
            wp(ctx, p, mask)
        return run_bool
    wd = dec.writer(ops[0], "b32")

    def run(ctx, mask):
        wd(ctx, lop3_value(ra(ctx), rb(ctx), rc(ctx), lut), mask)
    return run


# --- fast paths bound at decode (OpSpec.specialize) -------------------------------------------
_DT = {"pred": np.dtype(np.bool_), **{t: np.dtype(_U[w]) for t, w in _W.items()}}


def _spec_bitwise(op):
    """and/or/xor/not: the NumPy operator where the operands have the type's width."""
    ufunc = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}.get(op)

    def specialize(type, mods, nsrc, generic):
        dt = _DT.get(type)
        if dt is None:
            return None
        if op == "not":
            def f(a):
                return ~a if a.dtype is dt else generic(a)
            return f

        def f(a, b):
            return ufunc(a, b) if a.dtype is dt and b.dtype is dt else generic(a, b)
        return f
    return specialize


def _spec_shift(left):
    """shl/shr by an immediate (a scalar amount): one shift; lane-varying amounts: generic."""
    def specialize(type, mods, nsrc, generic):
        w = _w(type)
        ut = _U[w]
        dt = np.dtype(ut)
        sdt = _S[w] if type.startswith("s") else None

        def f(a, b):
            if a.dtype is not dt or b.__class__ is np.ndarray:
                return generic(a, b)
            k = int(b)
            if sdt is not None and not left:
                return (a.view(sdt) >> sdt(min(k, w - 1))).view(dt) if a.__class__ is np.ndarray \
                    else generic(a, b)
            if k >= w:
                return np.zeros(np.shape(a), ut)
            return a << ut(k) if left else a >> ut(k)
        return f
    return specialize


_BITS_T = ("b16", "b32", "b64")

# --- find n-th set bit ------------------------------------------------------------------------
_BIT = np.arange(32, dtype=np.uint32)


def _fns(s, *, type):
    """fns.b32 d, mask, base, offset (PTX ISA): the position of the |offset|-th set bit of mask
    counting from bit ``base`` upward (offset > 0) or downward (offset < 0); offset 0: base if
    that bit is set; 0xFFFFFFFF when there is none.  A base over 31 (undefined in the ISA) finds
    nothing, as the ISA's pseudo-code does.  Vectorised over a 32-bit axis: no per-lane loop."""
    mask = np.asarray(s[0]).astype(np.uint32)
    base = np.asarray(s[1]).astype(np.uint32).astype(np.int64)
    off = np.asarray(s[2]).astype(np.uint32).view(np.int32).astype(np.int64)
    mask, base, off = np.broadcast_arrays(mask, base, off)
    bits = ((mask[..., None] >> _BIT) & np.uint32(1)).astype(bool)  # (..., 32)
    pos = _BIT.astype(np.int64)
    b, o = base[..., None], off[..., None]
    # the bits searched, in the search's direction: at or above base (offset >= 0), at or below
    inside = np.where(o >= 0, pos >= b, pos <= b) & bits
    want = np.maximum(np.abs(off), 1)[..., None]
    # rank of each searched bit in search order: count from the low end up, or the high end down
    up = np.cumsum(inside, axis=-1)
    down = np.cumsum(inside[..., ::-1], axis=-1)[..., ::-1]
    rank = np.where(o >= 0, up, down)
    hit = inside & (rank == want) & ((o != 0) | (pos == b))
    found = hit.any(axis=-1) & (base <= 31)
    where = np.argmax(hit, axis=-1).astype(np.uint32)
    return np.where(found, where, np.uint32(0xFFFFFFFF)).astype(np.uint32)


def _fns_sig(t, mods):
    return ("b32",), ("b32", "u32", "s32")


OPS: dict[str, OpSpec] = {
    "and": OpSpec("and", _LOGIC_T, _and, 2, specialize=_spec_bitwise("and"), doc="bitwise AND"),
    "or": OpSpec("or", _LOGIC_T, _or, 2, specialize=_spec_bitwise("or"), doc="bitwise OR"),
    "xor": OpSpec("xor", _LOGIC_T, _xor, 2, specialize=_spec_bitwise("xor"), doc="bitwise XOR"),
    "not": OpSpec("not", _LOGIC_T, _not, 1, specialize=_spec_bitwise("not"), doc="bitwise NOT"),
    "cnot": OpSpec("cnot", _BITS_T, _cnot, 1, doc="C logical not: 1 if a == 0 else 0"),
    "shl": OpSpec("shl", _BITS_T, _shl, 2, signature=_shift_sig, specialize=_spec_shift(True),
                  doc="shift left; amounts >= width give 0"),
    "shr": OpSpec("shr", _BITS_T + ("u16", "u32", "u64", "s16", "s32", "s64"), _shr, 2,
                  signature=_shift_sig, specialize=_spec_shift(False),
                  doc="shift right, logical (.b/.u) or arithmetic (.s)"),
    "bfe": OpSpec("bfe", ("u32", "u64", "s32", "s64"), _bfe, 3, signature=_bfe_sig,
                  doc="bit-field extract (pos, len: low 8 bits), sign-filled for .s"),
    "bfi": OpSpec("bfi", ("b32", "b64"), _bfi, 4, signature=_bfi_sig, doc="bit-field insert"),
    "bfind": OpSpec("bfind", ("u32", "u64", "s32", "s64"), _bfind, 1,
                    modifiers={"shiftamt": ("shiftamt",)}, signature=_u32_result,
                    doc="position of the most significant non-sign bit (0xffffffff if none)"),
    "brev": OpSpec("brev", ("b32", "b64"), _brev, 1, doc="bit reverse"),
    "clz": OpSpec("clz", ("b32", "b64"), _clz, 1, signature=_u32_result, doc="count leading zeros"),
    "popc": OpSpec("popc", ("b32", "b64"), _popc, 1, signature=_u32_result, doc="population count"),
    "shf": OpSpec("shf", ("b32",), _shf, 3, modifiers={"dir": ("l", "r"), "mode": ("clamp", "wrap")},
                  required=("dir", "mode"), signature=lambda t, m: (("b32",), ("b32", "b32", "u32")),
                  doc="funnel shift of the 64-bit pair b:a"),
    "prmt": OpSpec("prmt", ("b32",), _prmt, 3,
                   modifiers={"mode": tuple(_PRMT_MODES)}, doc="byte permute of b:a by selector c"),
    "lop3": OpSpec("lop3", ("b32",), None, 4, compile=_compile_lop3,
                   doc="arbitrary 3-input logic by truth table; .or/.and forms with predicate out"),
    "fns": OpSpec("fns", ("b32",), _fns, 3, signature=_fns_sig, min_sm=30, min_ptx=(6, 0),
                  doc="find the n-th set bit of mask from base (offset > 0 up, < 0 down, 0: base "
                      "itself); 0xFFFFFFFF if none"),
}
