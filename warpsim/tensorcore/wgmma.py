"""``wgmma.mma_async`` (sm_90a): decode, fragment layouts, numerics, matrix-level product.

A warpgroup (4 consecutive warps, 128 threads) computes D (64 x N) = A (64 x K) · B (K x N)
(+ D when ``scale-d`` is true).  Warp w of the warpgroup holds rows 16w..16w+15 of D (and of A
when A comes from registers), in the layout of mma.sync's m16n8 C fragment repeated N/8 times
along N; B (and A from a descriptor) is read from shared memory through a matrix descriptor
(:mod:`warpsim.tensorcore.desc`).

Numerics (:data:`WGMMA_MODELS`): every floating-point form is one truncated fused step over its
whole K with the old D as the addend (the engine of :mod:`warpsim.numerics`): f16/bf16/tf32 keep
F = 25 fraction bits (the sm_90 mma.sync parameters: one wgmma k16 equals the m16n8k16 mma.sync
tiles it covers, bit for bit), fp8 (e4m3/e5m2) keeps F = 13 and truncates an f32 D to 13
fraction bits (E8M13).  Integer forms are exact, wrapping or (``.satfinite``) clamping.
Sources: MMA-Sim 2.1.1 (Hopper wgmma), checked on the H100 (docs/validation.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Mapping

import numpy as np

from warpsim.tensorcore import engine, numerics
from warpsim.facts import formats
from warpsim.errors import PtxError, ShapeError
from warpsim.facts.wgmma import FORMS, TARGETS, TYPE_BITS, WgmmaForm

__all__ = ["Wgmma", "WgmmaModel", "WGMMA_MODELS", "decode_wgmma", "is_wgmma", "layout",
           "compute", "matmul", "pack", "unpack", "operand_elements"]

M = 64


@dataclass(frozen=True)
class WgmmaModel:
    """Numerics of wgmma on one target: fraction bits kept per input family (``F``), the
    f32-D output fraction bits of fp8 (``fp8_out_frac``), zero-term exponents."""

    name: str
    source: str
    verified: str
    F: Mapping[str, int]
    fp8_out_frac: int | None
    e_zero_f32: int
    e_zero_f16: int


WGMMA_MODELS: Mapping[str, WgmmaModel] = MappingProxyType({
    "sm_90a": WgmmaModel(
        "sm_90a", "[HW-pub] MMA-Sim 2.1.1 Hopper WGMMA; [HW-here] H100 (docs/validation.md)",
        "hardware here", F=MappingProxyType({"f16": 25, "bf16": 25, "tf32": 25, "fp8": 13}),
        fp8_out_frac=13, e_zero_f32=-133, e_zero_f16=-21),
})


@dataclass(frozen=True)
class Wgmma:
    """A decoded ``wgmma.mma_async`` form (operands aside).  ``a_desc``: A from a descriptor
    (True), from registers (False), or not known (None: decoded without operands)."""

    text: str
    n: int
    k: int
    atype: str
    btype: str
    dtype: str
    form: WgmmaForm
    sparse: bool = False
    satfinite: bool = False
    arch: str = "sm_90a"
    a_desc: bool | None = None

    m = M
    rounding = None
    quadpair = False
    block_scale = False

    @property
    def ctype(self) -> str:
        return self.dtype

    @property
    def bitop(self) -> str | None:
        return "and" if self.form.bitop else None

    @property
    def family(self) -> str:
        return self.form.family

    @property
    def regs(self) -> dict[str, int]:
        """32-bit registers per thread: D (N/2, or N/4 for f16 D) and A from registers (4)."""
        return {"a": 4, "d": self.n // 2 if self.dtype in ("f32", "s32") else self.n // 4}

    def register_bits(self, operand: str) -> int:
        return 32

    def type_of(self, operand: str) -> str:
        return {"a": self.atype, "b": self.btype, "c": self.dtype, "d": self.dtype}[operand]

    def operand_names(self, a_desc: bool) -> tuple[str, ...]:
        return ("d", "a-desc" if a_desc else "a", "b-desc") + self.form.operand_names(a_desc, self.sparse)


_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)$")
_PREFIX = "wgmma.mma_async"


def is_wgmma(text: str) -> bool:
    """Whether ``text`` is a wgmma.mma_async instruction (with or without operands)."""
    return isinstance(text, str) and text.lstrip().startswith(_PREFIX)


def decode_wgmma(text: str, arch: str | None = "sm_90a", ptx_version=None) -> Wgmma:
    """Decode a ``wgmma.mma_async`` opcode (operands, if present, are checked for count and
    kind: A a descriptor or a {4 registers} vector).  ``arch``: a target (only sm_90a has
    wgmma), 'auto' or None.  Raises :class:`PtxError` naming the offending qualifier."""
    from warpsim.tensorcore.decode import ptx_version_of

    if not isinstance(text, str):
        raise PtxError(f"expected wgmma instruction text, got {type(text).__name__}")
    opcode, groups = split_operands(text)
    ins = _decode_opcode(opcode)
    ptx_version_of(ptx_version)  # 9.0 ... 9.5: wgmma is in every version warpsim models
    if arch not in (None, "auto", "exact") and arch not in TARGETS:
        from warpsim.facts.isa import ARCHS
        if arch not in ARCHS:
            raise PtxError(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}")
        raise PtxError(f"{ins.text} is not supported on {arch}: wgmma needs sm_90a "
                       "(.target sm_90a; not sm_90, and Blackwell has tcgen05 instead)")
    if groups:
        ins = check_operands(ins, groups)
    return ins


_TOKEN = re.compile(r"\s*(\{[^{}]*\}|[^,{}]+)\s*(,|$)")
_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)U?$")


def _item(tok: str):
    t = tok.strip()
    if _INT.match(t):
        return int(t.rstrip("U"), 0) if not re.match(r"[+-]?0\d", t) else int(t.rstrip("U"), 8)
    if not t:
        raise PtxError("empty operand in a wgmma operand list")
    return t


def split_operands(text: str) -> tuple[str, list]:
    """``'wgmma... {d}, a, b, p, 1, 1;'`` -> (opcode, [[d regs...], 'a', 'b', 'p', 1, 1]):
    vectors become lists, integers ints, everything else its text."""
    s = text.strip()
    if s.startswith("@"):
        raise PtxError(f"wgmma is .aligned: it cannot be guarded ('{s.split(None, 1)[0]}')")
    s = s.rstrip().rstrip(";").rstrip()
    if ";" in s:
        raise PtxError("more than one instruction in the text")
    m = re.match(r"[\w.:]+", s)
    if not m:
        raise PtxError(f"no opcode in '{text}'")
    opcode, rest = m.group(0), s[m.end():].strip()
    groups: list = []
    pos = 0
    while pos < len(rest):
        t = _TOKEN.match(rest, pos)
        if not t or t.end() == pos:
            raise PtxError(f"cannot read the operand list of {opcode} at '{rest[pos:pos + 20]}'")
        tok = t.group(1).strip()
        if tok.startswith("{"):
            groups.append([_item(x) for x in tok[1:-1].split(",")])
        else:
            groups.append(_item(tok))
        pos = t.end()
    return opcode, groups


@lru_cache(maxsize=2048)
def _decode_opcode(opcode: str) -> Wgmma:
    words = opcode.split(".")
    if ".".join(words[:2]) != _PREFIX:
        raise PtxError(f"'{opcode}' is not a wgmma.mma_async instruction")
    rest = words[2:]
    sparse = False
    if rest and rest[0] == "sp":
        sparse = True
        rest = rest[1:]
    if rest[:2] != ["sync", "aligned"]:
        raise PtxError(f"'{opcode}': wgmma.mma_async needs .sync.aligned after the opcode"
                       + (" (and .sp before them)" if sparse else ""))
    rest = rest[2:]
    if not rest or not _SHAPE.match(rest[0]):
        raise PtxError(f"'{opcode}': expected a shape .m64nNkK after .sync.aligned, got "
                       f"{'.' + rest[0] if rest else 'nothing'}")
    m, n, k = (int(x) for x in _SHAPE.match(rest[0]).groups())
    rest = rest[1:]
    sat = False
    if rest and rest[0] == "satfinite":
        sat, rest = True, rest[1:]
    bitop_words = []
    if len(rest) >= 5:
        bitop_words, rest = rest[3:], rest[:3]
    if len(rest) != 3:
        raise PtxError(f"'{opcode}': expected .dtype.atype.btype after the shape")
    dt, at, bt = rest
    for t, role in ((dt, "D"), (at, "A"), (bt, "B")):
        if t not in TYPE_BITS:
            raise PtxError(f"'{opcode}': .{t} is not a wgmma {role} type")
    form = next((f for f in FORMS if at in f.atypes and bt in f.btypes and dt in f.dtypes), None)
    if form is None:
        legal = "; ".join(f"{'/'.join(f.dtypes)}.{'/'.join(f.atypes)}.{'/'.join(f.btypes)}" for f in FORMS)
        raise PtxError(f"'{opcode}': no wgmma form takes D .{dt} with A .{at} and B .{bt} "
                       f"(legal: {legal})")
    if form.bitop and ".".join(bitop_words) != form.bitop:
        raise PtxError(f"'{opcode}': b1 wgmma needs .and.popc after the types (wgmma has no .xor)")
    if bitop_words and not form.bitop:
        raise PtxError(f"'{opcode}': unexpected qualifiers .{'.'.join(bitop_words)}")
    if sat and not form.satfinite:
        raise PtxError(f"'{opcode}': .satfinite is legal only on the integer (.s32 .s8/.u8) forms")
    kk = form.k * (2 if sparse else 1)
    if m != M:
        raise PtxError(f"'{opcode}': wgmma has M = 64 only, got m{m}")
    if k != kk:
        raise PtxError(f"'{opcode}': K must be {kk} for {'sparse ' if sparse else ''}.{at} "
                       f"operands, got k{k}")
    if n not in form.ns:
        raise PtxError(f"'{opcode}': N = {n} is not legal for {form.family} wgmma (legal: "
                       + ("8..256 in steps of 8" if len(form.ns) == 32 else "8, 16, 24, 32..256 in steps of 16")
                       + ")")
    if sparse and form.bitop:
        raise PtxError(f"'{opcode}': there is no sparse b1 wgmma")
    return Wgmma(opcode, n, k, at, bt, dt, form, sparse=sparse, satfinite=sat)


def check_operands(ins: Wgmma, groups: list) -> Wgmma:
    """Check an operand list (as :func:`warpsim.decoder.split_operands` gives it); returns the
    instruction with ``a_desc`` set."""
    if len(groups) < 3:
        raise PtxError(f"{ins.text} takes d, a, b-desc, ...; got {len(groups)} operands")
    a = groups[1]
    a_desc = not isinstance(a, list)
    if not a_desc and len(a) != 4:
        raise PtxError(f"operand A of {ins.text} from registers is a vector of 4 32-bit registers, "
                       f"got {len(a)}")
    names = ins.operand_names(a_desc)
    if len(groups) != len(names):
        raise PtxError(f"{ins.text} with A from {'a descriptor' if a_desc else 'registers'} takes "
                       f"{len(names)} operands ({', '.join(names)}); got {len(groups)}")
    d = groups[0]
    nd = ins.regs["d"]
    if not isinstance(d, list) or len(d) != nd:
        raise PtxError(f"operand D of {ins.text} is a vector of {nd} 32-bit registers per thread, "
                       f"got {len(d) if isinstance(d, list) else 'a scalar'}")
    for name, v in zip(names[3:], groups[3:]):
        if name == "sp-sel":
            legal = legal_selectors_of(ins)
            if not isinstance(v, int) or v not in legal:
                raise PtxError(f"operand sp-sel of {ins.text} must be the integer "
                               f"{' or '.join(map(str, legal))}, got {v!r}")
        elif name == "sp-meta":
            if isinstance(v, (list, int)):
                raise PtxError(f"operand sp-meta of {ins.text} must be a 32-bit register, got {v!r}")
        elif name == "scale-d":
            if isinstance(v, list) or (isinstance(v, int) and v not in (0, 1)) or \
                    (isinstance(v, str) and re.match(r"!?%(r|rd|f|fd|h|rs)\d+$", v)):
                raise PtxError(f"operand scale-d of {ins.text} must be a predicate (or the integer "
                               f"0 or 1), got {v!r}")
        elif name.startswith("imm-scale"):
            if not isinstance(v, int) or v not in (1, -1):
                raise PtxError(f"operand {name} of {ins.text} must be the integer 1 or -1, got {v!r}")
        elif name.startswith("imm-trans"):
            if not isinstance(v, int) or v not in (0, 1):
                raise PtxError(f"operand {name} of {ins.text} must be the integer 0 or 1, got {v!r}")
    return Wgmma(**{**ins.__dict__, "a_desc": a_desc})


@lru_cache(maxsize=256)
def mma_sp_equivalent(ins: Wgmma):
    """The mma.sp::ordered_metadata m16n8 instruction whose metadata map each warp of a sparse
    wgmma uses (same types and K; PTX ISA 9.7.15.6: the wgmma.sp metadata figures are mma.sp's)."""
    from warpsim.tensorcore.decode import decode
    sat = ".satfinite" if ins.satfinite else ""
    dt = "f32" if ins.family == "fp8" else ins.dtype  # mma.sp fp8 has f32 D only; same map
    return decode(f"mma.sp::ordered_metadata.sync.aligned.m16n8k{ins.k}.row.col{sat}.{dt}."
                  f"{ins.atype}.{ins.btype}.{dt}", arch="sm_90")


def legal_selectors_of(ins: Wgmma) -> tuple[int, ...]:
    """The sparsity selectors (sp-sel) ptxas accepts: 0 or 1 for f16/bf16/tf32, 0 otherwise."""
    from warpsim.tensorcore.sparse import legal_selectors
    return legal_selectors(mma_sp_equivalent(ins))


def half(ins: Wgmma) -> Wgmma:
    """The dense form of half the K: the layout and addressing of a sparse form's compressed A."""
    return Wgmma(_dense_text(ins), ins.n, ins.k // 2, ins.atype, ins.btype, ins.dtype, ins.form,
                 satfinite=ins.satfinite, a_desc=ins.a_desc)


def _dense_text(ins: Wgmma) -> str:
    return ins.text.replace(".sp.", ".").replace(f"k{ins.k}", f"k{ins.k // 2}")


def sparse_columns(ins: Wgmma, words, selector: int, *, check: bool = True) -> np.ndarray:
    """Logical K column of every compressed A element, (..., 64, K/2), from the metadata words
    (..., 128) of the warpgroup's threads (each warp's by the mma.sp map of its 16 rows)."""
    from warpsim.tensorcore.sparse import pattern
    w = np.asarray(words).astype(np.uint32)
    mi = mma_sp_equivalent(ins)
    per = w.reshape(w.shape[:-1] + (4, 32))
    cols = pattern(mi, per, selector, check=check)  # (..., 4, 16, K/2)
    return cols.reshape(cols.shape[:-3] + (64, ins.k // 2))


def compress(ins: Wgmma, A, *, selector: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A structurally sparse logical A (..., 64, K) -> (compressed values (..., 64, K/2),
    metadata words (..., 128) of the warpgroup's threads)."""
    from warpsim.tensorcore.sparse import compress as sp_compress
    A = np.asarray(A)
    v, w = sp_compress(mma_sp_equivalent(ins), A.reshape(A.shape[:-2] + (4, 16, ins.k)), selector=selector)
    return v.reshape(A.shape[:-2] + (64, ins.k // 2)), w.reshape(A.shape[:-2] + (128,))


# --------------------------------------------------------------------------------------------
# Fragment layouts
# --------------------------------------------------------------------------------------------

def _lane():
    t = np.arange(128)
    return t // 32, (t % 32) // 4, t % 4


@lru_cache(maxsize=512)
def _layout(ins_key: tuple, operand: str) -> np.ndarray:
    n, atype, dtype = ins_key
    w, g, t = _lane()
    if operand == "d":
        e = np.arange(n // 2)
        v0, v1, j = e % 2, (e // 2) % 2, e // 4
        row = 16 * w[:, None] + g[:, None] + 8 * v1[None]
        col = 8 * j[None] + 2 * t[:, None] + v0[None]
    elif operand == "a":
        bits = TYPE_BITS[atype]
        if bits == 32:  # tf32: v = v0 + 2 v1 -> row g + 8 v0, k t + 4 v1
            e = np.arange(4)
            v0, v1 = e % 2, e // 2
            row = 16 * w[:, None] + g[:, None] + 8 * v0[None]
            col = t[:, None] + 4 * v1[None]
        elif bits == 16:  # v = v0 + 2 v1 + 4 v2 -> row g + 8 v1, k 2t + v0 + 8 v2
            e = np.arange(8)
            v0, v1, v2 = e % 2, (e // 2) % 2, e // 4
            row = 16 * w[:, None] + g[:, None] + 8 * v1[None]
            col = 2 * t[:, None] + v0[None] + 8 * v2[None]
        elif bits == 8:  # v = v0 + 4 v1 + 8 v2 -> row g + 8 v1, k 4t + v0 + 16 v2
            e = np.arange(16)
            v0, v1, v2 = e % 4, (e // 4) % 2, e // 8
            row = 16 * w[:, None] + g[:, None] + 8 * v1[None]
            col = 4 * t[:, None] + v0[None] + 16 * v2[None]
        else:  # b1: register r (32 bits): row g + 8 (r % 2), bits 32 t + 128 (r // 2)
            e = np.arange(128)
            r, b = e // 32, e % 32
            row = 16 * w[:, None] + g[:, None] + 8 * (r % 2)[None]
            col = 32 * t[:, None] + 128 * (r // 2)[None] + b[None]
    else:
        raise ShapeError(f"wgmma fragments exist for operands 'a' (from registers) and 'd' ('c'), "
                         f"not {operand!r}: B always comes from shared memory")
    out = np.stack(np.broadcast_arrays(row, col), axis=-1).astype(np.int64)
    out.flags.writeable = False
    return out


def _key(ins: Wgmma) -> tuple:
    return (ins.n, ins.atype, ins.dtype)


def layout(ins: "Wgmma | str", operand: str) -> np.ndarray:
    """(128, elements, 2) array: the (row, col) of each element a thread of the warpgroup holds
    (thread = 32 * warp + lane), in register order.  Operand 'a' (A from registers: (row, k))
    or 'd'/'c' (the accumulator)."""
    ins = _as(ins)
    op = "d" if operand == "c" else operand
    return _layout(_key(ins), op)


def _as(ins) -> Wgmma:
    if isinstance(ins, Wgmma):
        return ins
    return decode_wgmma(ins, None)


def _per_reg(ins: Wgmma, operand: str) -> int:
    t = ins.dtype if operand in "cd" else ins.atype
    return 32 // TYPE_BITS[t]


def pack(ins: "Wgmma | str", operand: str, matrix, *, strict: bool = False) -> np.ndarray:
    """Matrix values (..., 64, K) for 'a' or (..., 64, N) for 'c'/'d' -> register words
    (..., 128, nregs) uint32 of the warpgroup's threads (rounded to nearest even)."""
    ins = _as(ins)
    op = "d" if operand == "c" else operand
    t = ins.type_of(op)
    codes = formats.encode(matrix, t, strict=strict)
    return pack_codes(ins, op, codes)


def pack_codes(ins: Wgmma, operand: str, codes) -> np.ndarray:
    pos = layout(ins, operand)
    c = np.asarray(codes)
    el = c[..., pos[..., 0], pos[..., 1]].astype(np.uint32)  # (..., 128, E)
    per = _per_reg(ins, operand)
    bits = 32 // per
    el = el & np.uint32((1 << bits) - 1) if bits < 32 else el
    el = el.reshape(el.shape[:-1] + (el.shape[-1] // per, per))
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    return np.bitwise_or.reduce(el << shifts, axis=-1).astype(np.uint32)


def unpack_codes(ins: Wgmma, operand: str, regs) -> np.ndarray:
    """Register words (..., 128, nregs) -> element codes in matrix form (..., 64, cols)."""
    pos = layout(ins, operand)
    r = np.asarray(regs).astype(np.uint32)
    per = _per_reg(ins, operand)
    bits = 32 // per
    shifts = np.arange(per, dtype=np.uint32) * bits
    mask = np.uint32((1 << bits) - 1) if bits < 32 else np.uint32(0xFFFFFFFF)
    el = ((r[..., None] >> shifts) & mask).reshape(r.shape[:-1] + (-1,))  # (..., 128, E)
    cols = int(pos[..., 1].max()) + 1
    out = np.zeros(r.shape[:-2] + (M, cols), dtype=np.uint32)
    out[..., pos[..., 0], pos[..., 1]] = el
    return out


def unpack(ins: "Wgmma | str", operand: str, regs) -> np.ndarray:
    """Register words -> matrix values (float64, or int64 for integers)."""
    ins = _as(ins)
    op = "d" if operand == "c" else operand
    codes = unpack_codes(ins, op, regs)
    t = ins.type_of(op)
    return formats.decode(codes.astype(formats.get_format(t).storage_dtype), t)


# --------------------------------------------------------------------------------------------
# Numerics
# --------------------------------------------------------------------------------------------

def _model(arch: str) -> WgmmaModel | None:
    if arch == "exact":
        return None
    a = "sm_90a" if arch in (None, "auto") else arch
    try:
        return WGMMA_MODELS[a]
    except KeyError:
        raise PtxError(f"wgmma runs on sm_90a only (or arch='exact'); got {arch!r}") from None


def compute(ins: Wgmma, A, B, C, *, arch: str = "sm_90a", scale_a: int = 1, scale_b: int = 1,
            scale_d=True, cols=None) -> np.ndarray:
    """D values from exact A (..., m, K), B (..., K, N), C (..., m, N) values (m: 64 rows, or a
    warp's 16): float64 already rounded to D's type, or int64.  ``scale_d`` False (a bool or a
    boolean array over the leading dimensions) drops C.  Sparse forms: A is the compressed
    (..., m, K/2) and ``cols`` (same shape) the logical K of each of its elements; the step
    fuses the kept products only (warpsim's mma.sp rule, measured on the H100)."""
    A = np.asarray(A)
    B = np.asarray(B)
    C = np.asarray(C)
    sd = np.asarray(scale_d, dtype=bool)
    if cols is not None and (ins.dtype == "s32" or arch == "exact"):
        full = np.zeros(A.shape[:-1] + (ins.k,), dtype=A.dtype)
        np.put_along_axis(full, np.broadcast_to(cols, A.shape), A, axis=-1)
        A, cols = full, None
    if ins.dtype == "s32":
        Cz = np.where(sd[..., None, None], C, 0).astype(np.int64)
        # |products| < 2**16, K <= 256: every float64 sum is exact (b1: popc(row AND col))
        d = Cz + np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.int64)
        if ins.satfinite:
            return np.clip(d, -(1 << 31), (1 << 31) - 1)
        return ((d + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    if scale_a == -1:
        A = -A
    if scale_b == -1:
        B = -B
    Cz = np.where(sd[..., None, None], C, 0.0) if not sd.all() else C
    model = _model(arch)
    if model is None:
        return engine.exact_dot_add(A, B, Cz, ins.dtype, "rn")
    fam = "fp8" if ins.atype in ("e4m3", "e5m2") else ins.atype
    out = ins.dtype
    dt = numerics.operand_dtype(ins)
    rows = None
    if cols is not None:  # batch-last (K/2, M, n): the B row each compressed element meets
        shp = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], Cz.shape[:-2])
        A = np.broadcast_to(A, shp + A.shape[-2:])
        rows = np.moveaxis(np.broadcast_to(cols, A.shape).reshape((-1,) + A.shape[-2:]), 0, -1).transpose(1, 0, 2)
        Bf = np.broadcast_to(B, shp + B.shape[-2:])
        Cf = np.broadcast_to(Cz, shp + Cz.shape[-2:])
        a, _, c, batch = engine.to_batch_last(A, np.zeros(shp + (A.shape[-1], B.shape[-1])), Cf, dt)
        b = np.ascontiguousarray(np.moveaxis(Bf.reshape((-1,) + B.shape[-2:]), 0, -1)).astype(dt)
        rows = np.ascontiguousarray(rows)
    else:
        a, b, c, batch = engine.to_batch_last(A, B, Cz, dt)
    with np.errstate(all="ignore"):
        d = numerics.dot_steps(
            a, b, c, groups=[slice(0, A.shape[-1])], rows=rows, emin_a=numerics.EMIN[ins.atype],
            emin_b=numerics.EMIN[ins.btype], emin_c=numerics.EMIN[out], emin_out=numerics.EMIN[out],
            F=model.F[fam], e_zero=model.e_zero_f32 if out == "f32" else model.e_zero_f16,
            out=out, rounding="rz" if out == "f32" else "rn",
            frac_bits=model.fp8_out_frac if (fam == "fp8" and out == "f32") else None,
            short=ins.atype in numerics.SHORT and ins.btype in numerics.SHORT)
    return engine.from_batch_last(d, batch)


_CANON_NAN = {"f32": (np.float32, np.uint32, 0x7FFFFFFF), "f16": (np.float16, np.uint16, 0x7FFF)}


def encode_d(ins: Wgmma, d: np.ndarray) -> np.ndarray:
    """D values (already rounded to D's type) -> element codes; NaN is the canonical NaN."""
    if ins.dtype == "s32":
        return (np.asarray(d).astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    ft, ut, nan = _CANON_NAN[ins.dtype]
    with np.errstate(all="ignore"):
        codes = np.asarray(d).astype(ft).view(ut)
    return np.where(np.isnan(d), ut(nan), codes)


def operand_elements(ins: Wgmma, values, operand: str) -> np.ndarray:
    """Round matrix values to the operand's element type and decode them back (exact values)."""
    t = ins.type_of(operand)
    return formats.decode(formats.encode(values, t), t)


def matmul(ins: "Wgmma | str", A, B, C=None, *, arch: str = "sm_90a", scale_a: int = 1,
           scale_b: int = 1, scale_d: bool = True) -> np.ndarray:
    """D = A @ B + C as one wgmma computes it: A (..., 64, K), B (..., K, N), C (..., 64, N)
    values (rounded to the element types, to nearest even; C None: zeros).  Returns D values
    (float64 rounded to D's type, or int64).  ``scale_a``/``scale_b`` (+1 or -1) are the
    imm-scale operands, ``scale_d`` False computes D = A @ B.  Sparse forms take the logical,
    structurally sparse A (2 of every 4, 1 of 2 for tf32)."""
    ins = _as(ins)
    A, B = np.asarray(A), np.asarray(B)
    if A.shape[-2:] != (M, ins.k) or B.shape[-2:] != (ins.k, ins.n):
        raise ShapeError(f"{ins.text} multiplies A (..., 64, {ins.k}) by B (..., {ins.k}, {ins.n}); "
                         f"got A {A.shape} and B {B.shape}")
    if C is None:
        C = np.zeros(A.shape[:-2] + (M, ins.n))
    C = np.asarray(C)
    if C.shape[-2:] != (M, ins.n):
        raise ShapeError(f"{ins.text}: C must be (..., 64, {ins.n}), got {C.shape}")
    for name, v in (("scale_a", scale_a), ("scale_b", scale_b)):
        if v not in (1, -1):
            raise PtxError(f"{name} (imm-{name.replace('_', '-')}) must be 1 or -1, got {v!r}")
        if v == -1 and ins.dtype == "s32":
            raise PtxError(f"{ins.text}: integer wgmma has no imm-scale operands")
    Av, Bv, Cv = (operand_elements(ins, x, op) for x, op in ((A, "a"), (B, "b"), (C, "c")))
    cols = None
    if ins.sparse:  # A must be structurally sparse: compressed as the metadata would say
        Av, words = compress(ins, Av)
        cols = sparse_columns(ins, words, 0)
    d = compute(ins, Av, Bv, Cv, arch=arch, scale_a=scale_a, scale_b=scale_b, scale_d=scale_d,
                cols=cols)
    t = ins.dtype
    return formats.decode(encode_d(ins, d), t) if t != "s32" else d
