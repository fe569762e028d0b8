"""The packing doctor: compare register words someone packed with the matrix they meant.

:func:`explain_packing` reads every element field of every register (lane, register, bits) and
compares it with what the fragment layout of the instruction puts there.  It reports each
misplaced field in words a person can act on::

    lane 5 register 1 bits 16-31 holds A[1][3]; the layout puts A[9][3] there

and, when the misplacements follow a pattern, the likely cause.

How causes are found: by *positions*, not by looking values up.  Each candidate mistake is a
packing routine with one thing wrong, written as a map from every bit of every register to the
matrix position (and code bit) it would read: the matrix transposed or read with the wrong
storage order; the lane mapping wrong (groupID and threadID_in_group swapped, ``lane % 8``
variants, quad pairs of m8n8k4 formed from adjacent quads or without the high half); the .row /
.col fragment of m8n8k4; registers swapped or reversed; the register bits rearranged (16-bit
halves, byte order, bytes within halves, nibbles within bytes, bit order, element order, the
container offset of FP6/FP4 codes under ``.kind::f8f6f4``).  Every candidate and every pair of
candidates from different groups is packed from the user's matrix and compared with the user's
words field by field; the one that explains the most fields wins, the simplest on ties.  So the
values need not be distinct: 1-, 4-, 6- and 8-bit tiles with repeated values are diagnosed as
well as an ``np.arange`` tile, and only where two candidates would pack the very same words
(values too uniform to tell them apart) does the report say the cause is ambiguous.  Where a
lane mapping reads past the matrix (the ``lane % 4`` / ``lane / 4`` swap does for some
operands), those fields are left out of the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warpsim.facts import formats
from warpsim.errors import ShapeError
from warpsim.facts.isa import Instruction
from warpsim.tensorcore.layouts import (
    as_instruction, check_operand, code_bits, layout, product_of_lane, register_map)

__all__ = ["Mismatch", "Report", "explain_packing"]

#: How many mismatches ``str(report)`` lists before summarising the rest.
SHOW = 12


@dataclass(frozen=True)
class Mismatch:
    """One element field that does not hold what the layout puts there.

    ``expected``: (product, row, col) the layout puts in this field.  ``found``: where the
    field's content comes from: the one position the diagnosed cause reads there (when the field
    holds exactly that element), else every position (up to 8) whose value equals the field's
    (empty: the value is nowhere in the matrix).  ``code``: the field's raw bits.  ``hi`` is
    inclusive.
    """

    warp: int
    lane: int
    register: int
    lo: int
    hi: int
    element: int
    expected: tuple[int, int, int]
    found: tuple[tuple[int, int, int], ...]
    code: int
    value: float | int


@dataclass
class Report:
    """What :func:`explain_packing` found.  ``str(report)`` is the text for people."""

    instruction: str
    operand: str
    warps: int
    fields: int  # element fields checked (over all warps)
    mismatches: list[Mismatch] = field(default_factory=list)
    cause: str | None = None  # the likely cause, in words, when the mismatches have a pattern
    cause_tags: tuple[str, ...] = ()  # machine-readable: 'transposed', 'registers-swapped', ...
    explained: float = 0.0  # fraction of fields the cause accounts for (1.0: all of them)
    warnings: list[str] = field(default_factory=list)
    #: warps of a batch whose mismatches the batch's cause does not explain -> their own cause
    warp_causes: dict = field(default_factory=dict)
    _quad: bool = False

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_dict(self) -> dict:
        """The report as plain data (what ``warpsim check-packing --format json`` prints)."""
        return {
            "instruction": self.instruction, "operand": self.operand, "ok": self.ok, "warps": self.warps,
            "fields": self.fields, "mismatches": len(self.mismatches), "cause": self.cause,
            "cause_tags": list(self.cause_tags), "explained": self.explained, "warnings": list(self.warnings),
            "warp_causes": {str(w): c for w, c in self.warp_causes.items()},
            "fields_wrong": [
                {"warp": m.warp, "lane": m.lane, "register": m.register, "bits": [m.lo, m.hi],
                 "element": m.element, "expected": list(m.expected), "found": [list(p) for p in m.found],
                 "code": m.code, "value": _json_value(m.value), "text": self.describe(m)}
                for m in self.mismatches[:SHOW]],
        }

    def describe(self, m: Mismatch) -> str:
        """One mismatch as a sentence."""
        name = self.operand.upper()
        where = f"lane {m.lane} register {m.register} " + (f"bit {m.lo}" if m.lo == m.hi else f"bits {m.lo}-{m.hi}")
        if self.warps > 1:
            where = f"warp {m.warp} " + where
        if not m.found:
            held = f"{_value_str(m.value)} (bits {m.code:#x}), which is nowhere in the matrix"
        elif len(m.found) == 1:
            held = _pos(name, m.found[0], self._quad)
        else:
            alts = " or ".join(_pos(name, p, self._quad) for p in m.found[:3])
            more = f" (or {len(m.found) - 3} more)" if len(m.found) > 3 else ""
            held = f"{_value_str(m.value)}, found at {alts}{more}"
        return f"{where} holds {held}; the layout puts {_pos(name, m.expected, self._quad)} there"

    def __str__(self) -> str:
        name = self.operand.upper()
        lines = []
        if self.ok:
            lines.append(f"OK: all {self.fields} element fields of operand {name} hold what the layout of "
                         f"{self.instruction} puts there.")
        else:
            n = len(self.mismatches)
            lines.append(f"{n} of {self.fields} element fields of operand {name} do not hold what the layout of "
                         f"{self.instruction} puts there.")
            if self.cause:
                lead = "Likely cause" if self.explained >= 1.0 else \
                    f"Partly explained ({self.explained:.0%} of fields) by"
                lines.append(f"{lead}: {self.cause}.")
            else:
                lines.append("No simple pattern (transpose, register order, half/byte order, lane mapping) "
                             "explains the mismatches.")
            for w, c in sorted(self.warp_causes.items())[:SHOW]:
                lines.append(f"Warp {w} differs: {c}.")
            for m in self.mismatches[:SHOW]:
                lines.append("  " + self.describe(m))
            if n > SHOW:
                lines.append(f"  ... and {n - SHOW} more")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def _pos(name: str, p: tuple[int, int, int], quad: bool) -> str:
    return f"{name}(product {p[0]})[{p[1]}][{p[2]}]" if quad else f"{name}[{p[1]}][{p[2]}]"


def _json_value(v):
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v


def _value_str(v) -> str:
    if isinstance(v, float):
        return repr(v) if np.isfinite(v) else str(v)
    return str(v)


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def _keys(codes: np.ndarray, ty: str) -> np.ndarray:
    """Comparable int64 keys of element codes: equal keys <=> equal values (NaNs all equal)."""
    vals = formats.decode(codes, ty)
    if vals.dtype.kind == "f":
        nan = np.isnan(vals)
        k = vals.astype(np.float64).view(np.int64).copy()
        k[nan] = np.int64(0x7FF8000000000000)
        return k
    return vals.astype(np.int64)


def _as_words(regs: object, ins: Instruction, op: str) -> np.ndarray:
    arr = np.asarray(regs)
    nregs = ins.regs[op]
    if arr.ndim < 2 or arr.shape[-2:] != (32, nregs):
        raise ShapeError(f"register words for operand {op} of {ins.text} must have shape (32, {nregs}) "
                         f"or (batch, 32, {nregs}) (lanes, registers); got {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ShapeError(f"register words must be integers (uint32{', uint64' if ins.register_bits(op) == 64 else ''}); "
                         f"got dtype {arr.dtype}")
    bits = ins.register_bits(op)
    if arr.dtype.kind == "i" and arr.dtype.itemsize * 8 == bits:
        arr = arr.view(np.uint32 if bits == 32 else np.uint64)  # words built as int32/int64: same bits
    if arr.size and (int(arr.min()) < 0 or (bits == 32 and int(arr.max()) >= 1 << 32)):
        raise ShapeError(f"register words must lie in [0, 2**{bits})")
    return arr.astype(np.uint64).reshape((-1, 32, nregs))


def _as_codes(matrix: object, ins: Instruction, op: str, codes: bool) -> np.ndarray:
    """The intended matrix as element codes (uint64), flattened: (batch or 1, positions)."""
    arr = np.asarray(matrix)
    rows, cols = ins.matrix_shape(op)
    tail = (4, rows, cols) if ins.quadpair else (rows, cols)
    nd = len(tail)
    if arr.ndim < nd or arr.shape[arr.ndim - nd:] != tail:
        shape = " x ".join(map(str, tail))
        extra = " (one matrix per quad-pair product)" if ins.quadpair else ""
        raise ShapeError(f"the matrix for operand {op} of {ins.text} must be {shape}{extra}, "
                         f"optionally with a leading batch dimension; got shape {arr.shape}")
    ty = ins.type_of(op)
    if codes:
        if arr.dtype.kind not in "iu":
            raise ShapeError(f"with codes=True the matrix must hold integer bit patterns; got dtype {arr.dtype}")
        width = code_bits(ins, op)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= 1 << width):
            raise ShapeError(f"with codes=True the matrix must hold .{ty} bit patterns in [0, 2**{width})")
        c = arr
    else:
        if arr.dtype.kind not in "iufb":
            raise ShapeError(f"the matrix must hold numbers; got dtype {arr.dtype}")
        c = formats.encode(arr.astype(np.float64) if arr.dtype.kind == "f" else arr, ty)
    return np.asarray(c).astype(np.uint64).reshape((-1, int(np.prod(tail))))


# --------------------------------------------------------------------------------------------
# Candidate mistakes, as position maps
# --------------------------------------------------------------------------------------------

#: Marks in a position map: the bit is 0 (register padding), or unknown (read outside the matrix).
_ZERO, _OUTSIDE = -1, -2


@dataclass(frozen=True)
class _Cand:
    """One candidate mistake of one group: what it changes, in words and as a tag."""

    group: str  # 'matrix' | 'lanes' | 'registers' | 'bits'
    desc: str
    tag: str
    data: object  # matrix: flat map T; lanes: (32, epl) positions; registers: perm; bits: source bit map


def _lane_fields(lane: np.ndarray, g: np.ndarray, t: np.ndarray, h: np.ndarray) -> dict:
    return {"g": g, "t": t, "l0": lane & 1, "l1": (lane >> 1) & 1, "h": h}


def _positions(ins: Instruction, op: str, key: tuple[str, str, str], fields: dict, prod: np.ndarray) -> np.ndarray:
    """(32, epl) flat positions a layout rule gives with the lane fields ``fields`` (not masked:
    a field too large for its slot spills into the next, as the arithmetic of a hand-written
    index does).  Coordinates outside the operand's shape are read through its natural storage
    (row-major, or column-major for .col A/B) and are _OUTSIDE past the end."""
    from warpsim.tensorcore.layouts import _log2, _rule_axes

    rows, cols = ins.matrix_shape(op)
    epl, epr = ins.elements_per_lane(op), ins.elements_per_register(op)
    coords = [v for v, _, _ in _rule_axes(key, _log2(epr), _log2(epl), epl,
                                          lambda name, lo, hi: np.asarray(fields[name], dtype=np.int64)[:, None])]
    r, c = coords
    col_major = (op == "a" and ins.alayout == "col") or (op == "b" and ins.blayout == "col")
    addr = c * rows + r if col_major else r * cols + c
    ok = (addr >= 0) & (addr < rows * cols)
    rr, cc = (addr % rows, addr // rows) if col_major else (addr // cols, addr % cols)
    flat = (prod[:, None] * rows + rr) * cols + cc
    return np.where(ok, flat, _OUTSIDE)


def _lane_cands(ins: Instruction, op: str) -> tuple[np.ndarray, list[_Cand]]:
    """The instruction's own positions and the lane-mapping / fragment-layout mistakes."""
    from warpsim.tensorcore.layouts import _rule_key

    lane = np.arange(32, dtype=np.int64)
    key = _rule_key(ins, op)
    prod = product_of_lane(ins)
    right = _lane_fields(lane, lane >> 2, lane & 3, (lane >> 4) & 1)
    own = _positions(ins, op, key, right, prod)
    out = []
    rows, cols = ins.matrix_shape(op)
    r, c = (own // cols) % rows, own % cols
    base = own - r * cols - c
    for size, axis, name in ((rows, "row", "rows" if op != "b" else "k rows"),
                             (cols, "col", "columns" if op != "a" else "k columns")):
        if size < 16:
            continue
        rr, cc = (r & ~8, c) if axis == "row" else (r, c & ~8)
        pos = np.where(own >= 0, base + rr * cols + cc, own)
        if not np.array_equal(pos, own):
            out.append(_Cand("lanes", f"the +8 {axis} offset was left out: the fragment elements "
                             f"meant for {name} 8-15 (and 24-31, ...) were read from {name} 0-7",
                             f"{axis}-plus-8-forgotten", pos))
    if not ins.quadpair:
        for g, t, desc, tag in (
            (lane & 3, lane >> 2, "groupID and threadID_in_group are swapped (groupID = lane % 4 and "
             "threadID_in_group = lane / 4 instead of groupID = lane / 4 and threadID_in_group = lane % 4)",
             "lane-mapping-swapped"),
            (lane & 7, lane >> 3, "lanes mapped with groupID = lane % 8 and threadID_in_group = lane / 8 "
             "(should be groupID = lane / 4, threadID_in_group = lane % 4)", "lane-mapping-mod8"),
            (lane >> 3, lane & 7, "lanes mapped with groupID = lane / 8 and threadID_in_group = lane % 8 "
             "(should be groupID = lane / 4, threadID_in_group = lane % 4)", "lane-mapping-div8"),
        ):
            out.append(_Cand("lanes", "wrong lane mapping: " + desc, tag,
                             _positions(ins, op, key, _lane_fields(lane, g, t, right["h"]), prod)))
        return own, out
    adj = _lane_fields(lane, lane >> 2, lane & 3, (lane >> 2) & 1)
    out.append(_Cand("lanes", "wrong quad pairs: product p was given to the adjacent quads 8p..8p+7 "
                     "(lanes 4p..4p+3 and 4p+16..4p+19 form quad pair p; lane >> 4 picks the high half)",
                     "quad-pairs-adjacent", _positions(ins, op, key, adj, (lane >> 3) & 3)))
    low = _lane_fields(lane, lane >> 2, lane & 3, np.zeros(32, np.int64))
    out.append(_Cand("lanes", "the high quad of each quad pair (lanes 16-31) was packed like the low "
                     "quad: lane >> 4 (the high-half bit) was left out", "quad-pair-high-half-ignored",
                     _positions(ins, op, key, low, prod)))
    from warpsim.tensorcore.layouts import LAYOUT_RULES

    for other in LAYOUT_RULES:
        if other[:2] == key[:2] and other != key:
            try:
                pos = _positions(ins, op, other, right, prod)
            except KeyError:
                continue
            if op in "ab":
                desc = (f"the fragment was laid out for .{other[2]} although the instruction says "
                        f".{key[2]} (row/col layout swapped)")
                tag = "row-col-swapped"
            else:
                desc = f"the fragment was laid out as for .{other[2]} C/D although it is .{key[2]}"
                tag = "cd-layout-of-other-type"
            out.append(_Cand("lanes", desc, tag, pos))
    return own, out


def _matrix_cands(ins: Instruction, op: str) -> list[_Cand]:
    """The user packed another matrix than they meant: position x holds matrix[T[x]]."""
    rows, cols = ins.matrix_shape(op)
    nprod = 4 if ins.quadpair else 1
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    base = (np.arange(nprod) * rows * cols)[:, None, None]
    out = []
    if rows == cols:
        out.append(_Cand("matrix", "the matrix is transposed (its transpose was packed: a row-major/"
                         "column-major mix-up or row/col layout swapped)", "transposed",
                         (base + c * cols + r).ravel()))
    a = r * cols + c
    out.append(_Cand("matrix", "the matrix is stored column-major but was read as row-major (row/col "
                     "layout swapped)", "column-major-read-as-row-major",
                     (base + (a % rows) * cols + a // rows).ravel()))
    a = c * rows + r
    out.append(_Cand("matrix", "the matrix is stored row-major but was read as column-major (row/col "
                     "layout swapped)", "row-major-read-as-column-major",
                     (base + (a // cols) * cols + a % cols).ravel()))
    ident = np.arange(nprod * rows * cols)
    uniq: list[_Cand] = []
    for cand in out:
        if not np.array_equal(cand.data, ident) and not any(np.array_equal(cand.data, u.data) for u in uniq):
            uniq.append(cand)
    return uniq


def _register_cands(n: int) -> list[_Cand]:
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            p = np.arange(n)
            p[[i, j]] = [j, i]
            out.append(_Cand("registers", f"registers {i} and {j} are swapped (register {i} holds what "
                             f"belongs in register {j} and vice versa)", "registers-swapped", p))
    if n > 2:
        out.append(_Cand("registers", "the register order is reversed", "registers-reversed", np.arange(n)[::-1]))
    if n == 4:
        out.append(_Cand("registers", "registers 0-1 and 2-3 are swapped as pairs", "register-pairs-swapped",
                         np.array([2, 3, 0, 1])))
    return out


def _bit_cands(ins: Instruction, op: str) -> list[_Cand]:
    """Rearrangements of the bits of every register: src[d] = the bit that lands in bit d."""
    rb = ins.register_bits(op)
    sb = ins.storage_bits(op)
    d = np.arange(rb)
    half = rb // 2
    cands = [
        (d ^ half, f"the two halves of each register are swapped (bits 0-{half - 1} hold what belongs in "
                   f"bits {half}-{rb - 1} and vice versa)", "halves-swapped"),
        ((rb // 8 - 1 - d // 8) * 8 + d % 8, "the byte order of each register is reversed (an endianness "
                                             "mix-up)", "byte-order-reversed"),
        (d ^ 8, "the two bytes of each 16-bit half are swapped", "bytes-swapped-in-halves"),
        (d ^ 4, "the two nibbles of every byte are swapped (nibble order within a byte)", "nibbles-swapped"),
        ((d // 8) * 8 + 7 - d % 8, "the bit order of every byte is reversed (MSB-first packing)",
         "bit-order-reversed-in-bytes"),
        (rb - 1 - d, "the bit order of each register is reversed", "bit-order-reversed"),
    ]
    if sb < rb:
        epr = rb // sb
        cands.append(((epr - 1 - d // sb) * sb + d % sb, f"the order of the {epr} elements in each register "
                      "is reversed (the first element belongs in the lowest bits)", "element-order-reversed"))
    if op in "ab" and ins.kind in ("f8f6f4", "mxf8f6f4"):
        from warpsim.tensorcore.layouts import container_offset

        off = container_offset(ins, op)
        t = ins.type_of(op)
        if code_bits(ins, op) < 8:
            for wrong in sorted({0, 2} - {off}):
                # the user put the code at bit `wrong` of its byte: bit d holds code bit d - wrong
                src = np.where((d % 8 >= wrong) & (d % 8 - wrong + off < 8), d - wrong + off, _ZERO)
                cands.append((src, f"the .{t} codes sit at bits {wrong}-{wrong + code_bits(ins, op) - 1} of "
                              f"each byte; under .kind::{ins.kind} they belong in bits {off}-"
                              f"{off + code_bits(ins, op) - 1}", "container-offset"))
    out: list[_Cand] = []
    for src, desc, tag in cands:
        src = np.asarray(src, dtype=np.int64)
        if np.array_equal(src, d) or any(np.array_equal(src, u.data) for u in out):
            continue
        out.append(_Cand("bits", desc, tag, src))
    return out


class _Search:
    """Scores candidate mistakes against the user's words, field by field."""

    def __init__(self, ins: Instruction, op: str, words: np.ndarray, codes: np.ndarray) -> None:
        self.ins, self.op = ins, op
        reg = register_map(ins, op)
        self.w = w = code_bits(ins, op)
        self.nregs, self.rb = ins.regs[op], ins.register_bits(op)
        epl = reg.shape[1]
        b = np.arange(w)
        self.FL = np.broadcast_to(np.arange(32)[:, None, None], (32, epl, w))
        self.FR = np.broadcast_to(reg[..., 0][..., None], (32, epl, w))
        self.FB = reg[..., 1][..., None] + b  # (32, epl, w)
        self.codes = codes  # (S or 1, npos) uint64
        self.user = ((words[:, self.FL, self.FR] >> self.FB.astype(np.uint64)) & np.uint64(1))  # (S, 32, epl, w)
        self.reg = reg

    def pre(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Words packed (correct register map) from fields holding positions ``pos`` (32, epl):
        (32, nregs, rb) source position (or _ZERO / _OUTSIDE) and source code bit of every bit."""
        P = np.full((32, self.nregs, self.rb), _ZERO, dtype=np.int64)
        Bt = np.zeros((32, self.nregs, self.rb), dtype=np.int64)
        P[self.FL, self.FR, self.FB] = pos[..., None]
        Bt[self.FL, self.FR, self.FB] = np.arange(self.w)
        return P, Bt

    def at_fields(self, P, Bt, perm=None, bits=None):
        if perm is not None:
            P, Bt = P[:, perm], Bt[:, perm]
        if bits is not None:
            src = np.where(bits >= 0, bits, 0)
            P = np.where(bits >= 0, P[:, :, src], _ZERO)
            Bt = Bt[:, :, src]
        return P[self.FL, self.FR, self.FB], Bt[self.FL, self.FR, self.FB]

    def score(self, fp: np.ndarray, fb: np.ndarray) -> float:
        known = fp != _OUTSIDE
        src = np.where(fp >= 0, fp, 0)
        pred = (np.take(self.codes, src, axis=-1) >> fb.astype(np.uint64)) & np.uint64(1)
        pred = np.where(fp >= 0, pred, np.uint64(0))
        good = ((pred == self.user) | ~known).all(-1)  # (S, 32, epl)
        seen = known.any(-1)
        n = int(seen.sum()) * self.user.shape[0]
        return float((good & seen).sum()) / n if n else 0.0


def _diagnose(ins: Instruction, op: str, words: np.ndarray, codes: np.ndarray, only: tuple | None = None):
    """The best candidate (or pair of candidates): (score, cands, field source positions (32, epl),
    alternatives with the same score and size).  ``only``: score just that combination."""
    own, lanes = _lane_cands(ins, op)
    mats = _matrix_cands(ins, op)
    regs = _register_cands(ins.regs[op])
    bits = _bit_cands(ins, op)
    s = _Search(ins, op, words, codes)
    lanes = lanes + _recovered_lanes(ins, op, words, codes, own, lanes)
    regs = regs + _recovered_registers(ins, op, words, codes, regs)
    groups = [lanes, mats, regs, bits]

    def evaluate(combo: tuple[_Cand, ...]):
        pos = own
        perm = bitmap = None
        for c in combo:
            if c.group == "lanes":
                pos = c.data
        for c in combo:
            if c.group == "matrix":
                pos = np.where(pos >= 0, c.data[np.where(pos >= 0, pos, 0)], pos)
            elif c.group == "registers":
                perm = c.data
            elif c.group == "bits":
                bitmap = c.data
        fp, fb = s.at_fields(*s.pre(pos), perm, bitmap)
        return s.score(fp, fb), fp, fb

    if only is not None:
        sc, fp, fb = evaluate(only)
        return sc, only, None, []
    results = []
    base = evaluate(())
    results.append((base[0], (), base[1], base[2]))
    singles = [(c,) for g in groups for c in g]
    for combo in singles:
        sc, fp, fb = evaluate(combo)
        results.append((sc, combo, fp, fb))
    if max(r[0] for r in results) < 1.0:
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                for a in groups[i]:
                    for b in groups[j]:
                        sc, fp, fb = evaluate((a, b))
                        results.append((sc, (a, b), fp, fb))
    best = max(results, key=lambda r: (round(r[0], 12), -len(r[1])))
    ties = [r[1] for r in results if r is not best and abs(r[0] - best[0]) < 1e-12 and len(r[1]) == len(best[1])]
    sc, combo, fp, fb = best
    whole = (fp >= 0).all(-1) & (fp == fp[..., :1]).all(-1) & (fb == np.arange(fb.shape[-1])).all(-1)
    src = np.where(whole, fp[..., 0], -1)
    return sc, combo, src, ties


def _match(user: np.ndarray, right: np.ndarray) -> np.ndarray | None:
    """A permutation p with user[:, i] == right[:, p[i]] for every i (identity preferred), read
    from the data: (S, n, ...) arrays of what each lane / register holds and should hold."""
    n = user.shape[1]
    u = user.reshape(user.shape[0], n, -1)
    r = right.reshape(right.shape[0], n, -1)
    eq = (u[:, :, None, :] == r[:, None, :, :]).all(-1).all(0)  # (n, n)
    p = np.where(eq[np.arange(n), np.arange(n)], np.arange(n), eq.argmax(1))
    if not eq[np.arange(n), p].all() or np.unique(p).size != n or np.array_equal(p, np.arange(n)):
        return None
    return p


def _moved(p: np.ndarray, unit: str) -> str:
    moved = [i for i in range(p.size) if p[i] != i]
    more = ", ..." if len(moved) > 4 else ""
    return ", ".join(f"{unit} {i} holds {unit} {p[i]}'s elements" for i in moved[:4]) + more


def _recovered_lanes(ins, op, words, codes, own, named) -> list[_Cand]:
    """Any lane permutation, read from whole lanes (all their fields at once), when no named
    mapping is it."""
    reg = register_map(ins, op)
    w = code_bits(ins, op)
    mask = np.uint64((1 << w) - 1) if w < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    user = (words[:, np.arange(32)[:, None], reg[..., 0]] >> reg[..., 1].astype(np.uint64)) & mask
    right = np.take(codes, own, axis=-1)
    p = _match(user, np.broadcast_to(right, user.shape))
    if p is None:
        return []
    pos = own[p]
    if any(np.array_equal(pos, c.data) for c in named):
        return []
    return [_Cand("lanes", f"wrong lane mapping ({_moved(p, 'lane')})", "lanes-permuted", pos)]


def _recovered_registers(ins, op, words, codes, named) -> list[_Cand]:
    """Any register permutation, read from whole registers of every lane."""
    from warpsim.tensorcore.packing import matrix_shape, pack_bits

    if ins.regs[op] < 2:
        return []
    right = pack_bits(ins, op, codes.reshape(codes.shape[:1] + matrix_shape(ins, op))).astype(np.uint64)
    p = _match(np.swapaxes(words, 1, 2), np.swapaxes(np.broadcast_to(right, words.shape), 1, 2))
    if p is None or any(np.array_equal(p, c.data) for c in named):
        return []
    return [_Cand("registers", f"registers are in the wrong order ({_moved(p, 'register')})",
                  "registers-permuted", p)]


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

#: Warps of a batch the cause is searched on (all of them are checked field by field).
SEARCH_WARPS = 4


def explain_packing(instr: Instruction | str, operand: str, regs: object, matrix: object, *,
                    codes: bool = False, max_warps: int = 64) -> Report:
    """Check register words ``regs`` ((32, nregs) or (batch, 32, nregs)) against ``matrix``.

    ``matrix`` holds the values the words were meant to carry ((rows, cols), or (4, rows, cols)
    for m8n8k4 .f16, optionally with the same leading batch dimension); they are rounded to the
    operand's element type as :func:`warpsim.pack` would.  ``codes=True``: the matrix holds raw
    bit patterns instead.  At most ``max_warps`` warps of a batch are examined; the cause is
    searched on the first few.  Values may repeat (see the module docstring).
    """
    ins = as_instruction(instr)
    op = check_operand(operand)
    words = _as_words(regs, ins, op)
    C_all = _as_codes(matrix, ins, op, codes)
    if C_all.shape[0] not in (1, words.shape[0]):
        raise ShapeError(f"the matrix batch ({C_all.shape[0]}) does not match the register batch ({words.shape[0]})")
    nw = min(words.shape[0], max_warps)
    words = words[:nw]
    C_all = np.broadcast_to(C_all, (nw, C_all.shape[1])) if C_all.shape[0] == 1 else C_all[:nw]
    ty = ins.type_of(op)
    rows, cols = ins.matrix_shape(op)
    reg = register_map(ins, op)
    width = code_bits(ins, op)
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    exp = _flat_positions(ins, op)
    epl = exp.shape[1]
    lanes = np.arange(32)[:, None]
    report = Report(ins.text, op, nw, nw * 32 * epl, _quad=ins.quadpair)
    fields_ = (words[:, lanes, reg[..., 0]] >> reg[..., 1].astype(np.uint64)) & mask  # (nw, 32, epl)
    bad = fields_ != np.take(C_all, exp, axis=-1)
    if not bad.any():
        return report

    def ppos(x: int) -> tuple[int, int, int]:
        p, rc = divmod(int(x), rows * cols)
        return (p, rc // cols, rc % cols)

    other = _other_encoding(ins, op, C_all, codes, matrix)
    if other is not None:
        o_ty, C_o = other
        hits = fields_ == np.take(C_o, exp, axis=-1)
        if hits[bad].mean() > 0.9:
            report.cause = (f"the values were encoded as .{o_ty}, but the instruction's "
                            f"operand {op.upper()} is .{ty} (an f16/bf16 mix-up)")
            report.cause_tags = ("encoding-" + o_ty,)
            report.explained = float((hits | ~bad).mean())
    S = min(nw, SEARCH_WARPS)
    score, combo, src, ties = _diagnose(ins, op, words[:S], C_all[:S]) if report.cause is None \
        else (0.0, (), np.full(exp.shape, -1), [])
    if combo and score > 0.5:
        report.cause = "; and ".join(c.desc for c in combo)
        report.cause_tags = tuple(c.tag for c in combo)
        report.explained = score
        if ties:
            alts = " / ".join("; and ".join(c.desc for c in t) for t in ties[:3])
            report.warnings.append(
                "these values cannot tell this cause from: " + alts + " (both pack the same words); "
                "values that differ more between positions would")
    store = formats.get_format(ty).storage_dtype
    notfound = 0
    for w in range(nw):
        K = _keys(C_all[w].astype(store), ty)
        S_ = _keys(fields_[w].astype(store), ty)
        order = np.argsort(K, kind="stable")
        Ks = K[order]
        for ln, el in zip(*np.nonzero(bad[w])):
            s_ = int(src[ln, el])
            if s_ >= 0 and C_all[w, s_] == fields_[w, ln, el]:
                found = (ppos(s_),)
            else:
                lo = np.searchsorted(Ks, S_[ln, el], "left")
                hi = np.searchsorted(Ks, S_[ln, el], "right")
                found = tuple(ppos(x) for x in np.sort(order[lo:min(hi, lo + 8)]))
                notfound += not found
            report.mismatches.append(Mismatch(
                warp=w, lane=int(ln), register=int(reg[ln, el, 0]), lo=int(reg[ln, el, 1]),
                hi=int(reg[ln, el, 1]) + width - 1, element=int(el), expected=ppos(exp[ln, el]),
                found=found, code=int(fields_[w, ln, el]), value=_key_value(S_[ln, el], ty)))
    if nw > 1 and report.cause_tags[:1] != ("encoding-" + (other[0] if other else ""),):
        _per_warp(report, ins, op, words, C_all, bad, combo if combo and score > 0.5 else ())
    if (report.cause is None or report.explained < 1.0) and any(
            len(m.found) > 1 for m in report.mismatches):
        report.warnings.append(
            "the matrix repeats values: a misplaced field holding a repeated value is listed with "
            "every position of that value")
    if notfound and report.explained < 1.0:
        report.warnings.append(
            f"{notfound} field(s) hold values that are nowhere in the matrix: check the conversion to "
            f".{ty} (rounding, or a different element type), or that this is the matrix that was packed")
    return report


def _other_encoding(ins: Instruction, op: str, C_all: np.ndarray, codes: bool, matrix: object):
    """For .f16 / .bf16 operands: (the other type, the matrix's codes in it), else None."""
    ty = ins.type_of(op)
    o_ty = {"f16": "bf16", "bf16": "f16"}.get(ty)
    if o_ty is None:
        return None
    values = formats.decode(C_all.astype(np.uint16), ty)  # the matrix as packed (rounded)
    if not codes:  # the values as given, where they line up with the warps examined
        given = np.asarray(matrix, dtype=np.float64).reshape(-1, C_all.shape[1])
        if given.shape[0] in (1, C_all.shape[0]) or given.shape[0] > C_all.shape[0]:
            values = np.broadcast_to(given[:C_all.shape[0]], C_all.shape)
    with np.errstate(all="ignore"):
        return o_ty, formats.encode(values, o_ty).astype(np.uint64)


def _per_warp(report: Report, ins: Instruction, op: str, words: np.ndarray, C_all: np.ndarray,
              bad: np.ndarray, combo: tuple) -> None:
    """Each warp of a batch on its own: a warp the batch's cause does not explain gets its own
    diagnosis (warps with the same mismatching fields share one), in ``report.warp_causes``."""
    seen: dict = {}
    causes: dict = {}
    for w in np.flatnonzero(bad.any(axis=(1, 2))):
        key = bad[w].tobytes()
        if key not in seen:
            one = (words[w:w + 1], C_all[w:w + 1])
            if combo and _diagnose(ins, op, *one, only=combo)[0] >= 1.0:
                seen[key] = (combo, 1.0)
            else:
                sc, cb, _, _ = _diagnose(ins, op, *one)
                seen[key] = (cb, sc) if cb and sc > 0.5 else ((), 0.0)
        causes[int(w)] = seen[key]
    if not causes:
        return
    def name(cb) -> tuple:  # candidates hold arrays: compare combinations by their descriptions
        return tuple(c.desc for c in cb)

    tally: dict = {}
    for cb, sc in causes.values():
        tally.setdefault(name(cb), [cb, 0])[1] += 1
    main = max(tally.values(), key=lambda t: (t[1], bool(t[0])))[0]
    if main:  # the cause of most mismatching warps, scored on those warps
        report.cause = "; and ".join(c.desc for c in main)
        report.cause_tags = tuple(c.tag for c in main)
        report.explained = float(np.mean([sc for cb, sc in causes.values() if name(cb) == name(main)]))
    for w, (cb, sc) in causes.items():
        if name(cb) != name(main):
            report.warp_causes[w] = "; and ".join(c.desc for c in cb) if cb else \
                "no simple pattern explains this warp's mismatches"


def _flat_positions(ins: Instruction, op: str) -> np.ndarray:
    rows, cols = ins.matrix_shape(op)
    lay = layout(ins, op)
    return (product_of_lane(ins)[:, None] * rows + lay[..., 0]) * cols + lay[..., 1]


def _key_value(k, ty: str):
    if formats.get_format(ty).is_float:
        return float(np.int64(k).view(np.float64))
    return int(k)
