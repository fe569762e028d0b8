"""The packing doctor: compare register words someone packed with the matrix they meant.

:func:`explain_packing` reads every element field of every register (lane, register, bits),
finds where that value occurs in the intended matrix, and compares with the fragment layout of
the instruction.  It reports each misplaced field in words a person can act on::

    lane 5 register 1 bits 16-31 holds A[1][3]; the layout puts A[9][3] there

and, when the misplacements follow a pattern, the likely cause: a transposed matrix (or a
row-major / column-major mix-up), swapped registers, the two halves (or the bytes) of each
register in the wrong order, or lanes mapped wrongly (groupID and threadID_in_group swapped).
Causes may combine (a transposed matrix whose halves are also swapped is recognised).

Matching is by value, so give the doctor a matrix of **distinct** values (``np.arange`` works
for every type wider than 8 bits).  Repeated values are matched to any of their positions; the
report warns when values repeat.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from . import formats
from .errors import ShapeError
from .isa import Instruction
from .layouts import as_instruction, check_operand, code_bits, layout, product_of_lane, register_map

__all__ = ["Mismatch", "Report", "explain_packing"]

#: How many mismatches ``str(report)`` lists before summarising the rest.
SHOW = 12


@dataclass(frozen=True)
class Mismatch:
    """One element field that does not hold what the layout puts there.

    ``expected``: (product, row, col) the layout puts in this field.  ``found``: every
    (product, row, col) of the matrix whose value equals the field's (empty: the value is
    nowhere in the matrix).  ``code``: the field's raw bits.  ``hi`` is inclusive.
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
    _quad: bool = False

    @property
    def ok(self) -> bool:
        return not self.mismatches

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
            for m in self.mismatches[:SHOW]:
                lines.append("  " + self.describe(m))
            if n > SHOW:
                lines.append(f"  ... and {n - SHOW} more")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def _pos(name: str, p: tuple[int, int, int], quad: bool) -> str:
    return f"{name}(product {p[0]})[{p[1]}][{p[2]}]" if quad else f"{name}[{p[1]}][{p[2]}]"


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
    if arr.size and (int(arr.min()) < 0 or (bits == 32 and int(arr.max()) >= 1 << 32)):
        raise ShapeError(f"register words must lie in [0, 2**{bits})")
    return arr.astype(np.uint64).reshape((-1, 32, nregs))


def _as_matrix_keys(matrix: object, ins: Instruction, op: str, codes: bool) -> np.ndarray:
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
        c = arr
    else:
        if arr.dtype.kind not in "iufb":
            raise ShapeError(f"the matrix must hold numbers; got dtype {arr.dtype}")
        c = formats.encode(arr.astype(np.float64) if arr.dtype.kind == "f" else arr, ty)
    return _keys(np.asarray(c), ty).reshape((-1, int(np.prod(tail))))


# --------------------------------------------------------------------------------------------
# Pattern search
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tables:
    exp: np.ndarray  # (32, epl) flat position the layout puts in each field
    name: str  # '' for the instruction's own layout, else what differs (quad-pair .row/.col)
    tag: str


def _flat_positions(ins: Instruction, op: str) -> np.ndarray:
    rows, cols = ins.matrix_shape(op)
    lay = layout(ins, op)
    return (product_of_lane(ins)[:, None] * rows + lay[..., 0]) * cols + lay[..., 1]


def _bases(ins: Instruction, op: str) -> list[_Tables]:
    out = [_Tables(_flat_positions(ins, op), "", "")]
    if ins.quadpair and op in "ab":
        attr = "alayout" if op == "a" else "blayout"
        cur = getattr(ins, attr)
        other = "col" if cur == "row" else "row"
        alt = replace(ins, **{attr: other})
        out.append(_Tables(_flat_positions(alt, op), f"the fragment was laid out for .{other} although the "
                           f"instruction says .{cur} (row/col layout swapped)", "row-col-swapped"))
    return out


def _transforms(ins: Instruction, op: str) -> list[tuple[np.ndarray, str, str]]:
    """(T, description, tag): the user wanted flat position x and fetched T[x]."""
    rows, cols = ins.matrix_shape(op)
    nprod = 4 if ins.quadpair else 1
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    base = (np.arange(nprod) * rows * cols)[:, None, None]
    out = [(np.arange(nprod * rows * cols), "", "")]
    cands = []
    if rows == cols:
        cands.append(((base + c * cols + r).ravel(),
                      "the matrix is transposed (its transpose was packed: a row-major/column-major "
                      "mix-up or row/col layout swapped)", "transposed"))
    a = r * cols + c  # row-major address of (r, c), read from column-major storage
    cands.append(((base + (a % rows) * cols + a // rows).ravel(),
                  "the matrix is stored column-major but was read as row-major (row/col layout swapped)",
                  "column-major-read-as-row-major"))
    a = c * rows + r  # column-major address, read from row-major storage
    cands.append(((base + (a // cols) * cols + a % cols).ravel(),
                  "the matrix is stored row-major but was read as column-major (row/col layout swapped)",
                  "row-major-read-as-column-major"))
    seen = [out[0][0]]
    for t in cands:
        if not any(np.array_equal(t[0], s) for s in seen):
            seen.append(t[0])
            out.append(t)
    return out


def _majority(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """For each v in range(n): the dst with the most weight where src == v (identity if none)."""
    votes = np.zeros((n, n))
    np.add.at(votes, (src, dst), weight)
    votes[np.arange(n), np.arange(n)] += 1e-9  # ties go to "unchanged"
    # greedy bijection: strongest votes first, so the result is always a permutation
    f = np.full(n, -1)
    used = np.zeros(n, bool)
    for flat in np.argsort(-votes, axis=None, kind="stable"):
        a, b = divmod(int(flat), n)
        if votes[a, b] <= 0:
            break
        if f[a] < 0 and not used[b]:
            f[a] = b
            used[b] = True
    free = iter(np.nonzero(~used)[0].tolist())
    for a in range(n):
        if f[a] < 0:
            f[a] = a if not used[a] else next(free)
            used[f[a]] = True
    return f


def _perm_words(f: np.ndarray, what: str, unit: str, epr: int = 0, width: int = 0) -> tuple[str, str]:
    """Describe a non-identity map f (field x holds what belongs in f[x])."""
    n = f.size
    moved = [i for i in range(n) if f[i] != i]
    if what == "half":
        if n == 2 and f.tolist() == [1, 0]:
            return (f"the two halves of each register are swapped (bits 0-{width - 1} hold what belongs in "
                    f"bits {width}-{2 * width - 1} and vice versa)", "halves-swapped")
        if f.tolist() == list(range(n))[::-1]:
            return (f"the {unit} order inside each register is reversed (the first element belongs in the "
                    f"top {unit}: an endianness mix-up)", "element-order-reversed")
        pairs = ", ".join(f"{unit} {i} holds {unit} {f[i]}'s element" for i in moved[:4])
        return f"elements inside each register are in the wrong order ({pairs})", "element-order-permuted"
    if what == "register":
        if len(moved) == 2 and f[moved[0]] == moved[1] and f[moved[1]] == moved[0]:
            return (f"registers {moved[0]} and {moved[1]} are swapped (register {moved[0]} holds what belongs "
                    f"in register {moved[1]} and vice versa)", "registers-swapped")
        if f.tolist() == list(range(n))[::-1]:
            return "the register order is reversed", "registers-reversed"
        pairs = ", ".join(f"register {i} holds register {f[i]}'s elements" for i in moved[:4])
        return f"registers are in the wrong order ({pairs})", "registers-permuted"
    # lanes
    lane = np.arange(32)
    swap = 4 * (lane % 8) + lane // 8  # thought groupID = lane % 8, threadID_in_group = lane / 8
    if np.array_equal(f, swap):
        return ("wrong lane mapping: groupID and threadID_in_group are swapped (the code used "
                "groupID = lane % 8 and threadID_in_group = lane / 8 instead of groupID = lane >> 2 and "
                "threadID_in_group = lane % 4)", "lane-mapping-swapped")
    pairs = ", ".join(f"lane {i} holds lane {f[i]}'s elements" for i in moved[:4])
    return f"wrong lane mapping ({pairs}{', ...' if len(moved) > 4 else ''})", "lanes-permuted"


def _explain(ins: Instruction, op: str, K: np.ndarray, S: np.ndarray) -> tuple[float, str | None, tuple[str, ...]]:
    """Best pattern for one warp: (fraction of fields explained, words, tags)."""
    epr = ins.elements_per_register(op)
    nregs = ins.regs[op]
    epl = S.shape[1]
    lane_of = np.repeat(np.arange(32), epl).reshape(32, epl)
    elem_of = np.tile(np.arange(epl), (32, 1))
    S = np.ascontiguousarray(S)
    # every (field, position holding the field's value) pair votes; repeated values split their vote
    order = np.argsort(K, kind="stable")
    Ks = K[order]
    lo = np.searchsorted(Ks, S.ravel(), "left")
    hi = np.searchsorted(Ks, S.ravel(), "right")
    cnt = hi - lo
    use = (cnt >= 1) & (cnt <= 8)
    slot = np.repeat(np.arange(S.size)[use], cnt[use])
    start = np.repeat(lo[use], cnt[use])
    offs = np.arange(slot.size) - np.repeat(np.cumsum(cnt[use]) - cnt[use], cnt[use])
    pair_pos = order[start + offs]
    weight = 1.0 / np.repeat(cnt[use], cnt[use])
    best = (-1.0, None, ())
    width = ins.storage_bits(op)
    for base in _bases(ins, op):
        inv_exp = np.full(K.size, -1)
        inv_exp[base.exp.ravel()] = np.arange(32 * epl)
        for T, tdesc, ttag in _transforms(ins, op):
            Tinv = np.argsort(T)
            tgt = inv_exp[Tinv[pair_pos]]
            ok = tgt >= 0
            l0, e0 = slot[ok] // epl, slot[ok] % epl
            l1, e1 = tgt[ok] // epl, tgt[ok] % epl
            wt = weight[ok]
            sigma = _majority(l0, l1, wt, 32)
            pi = _majority(e0 // epr, e1 // epr, wt, nregs)
            rho = _majority(e0 % epr, e1 % epr, wt, epr)
            src_elem = pi[elem_of // epr] * epr + rho[elem_of % epr]
            q = T[base.exp[sigma[lane_of], src_elem]]
            frac = float(np.mean(K[q] == S))
            parts = [d for d in (base.name, tdesc) if d]
            tags = [t for t in (base.tag, ttag) if t]
            for f, what in ((sigma, "lane"), (pi, "register"), (rho, "half")):
                if not np.array_equal(f, np.arange(f.size)):
                    unit = {4: "byte", 8: "nibble", 2: "half", 32: "bit"}.get(epr, "element")
                    w, t = _perm_words(f, what, unit, epr, width)
                    parts.append(w)
                    tags.append(t)
            # prefer the simplest explanation among equally good ones
            if frac > best[0] + 1e-12 or (abs(frac - best[0]) <= 1e-12 and best[1] is not None
                                          and len(tags) < len(best[2])):
                best = (frac, "; and ".join(parts) if parts else None, tuple(tags))
    return best


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def explain_packing(instr: Instruction | str, operand: str, regs: object, matrix: object, *,
                    codes: bool = False, max_warps: int = 64) -> Report:
    """Check register words ``regs`` ((32, nregs) or (batch, 32, nregs)) against ``matrix``.

    ``matrix`` holds the values the words were meant to carry ((rows, cols), or (4, rows, cols)
    for m8n8k4 .f16, optionally with the same leading batch dimension); they are rounded to the
    operand's element type as :func:`warpsim.pack` would.  ``codes=True``: the matrix holds raw
    bit patterns instead.  At most ``max_warps`` warps of a batch are examined.
    """
    ins = as_instruction(instr)
    op = check_operand(operand)
    words = _as_words(regs, ins, op)
    K_all = _as_matrix_keys(matrix, ins, op, codes)
    if K_all.shape[0] not in (1, words.shape[0]):
        raise ShapeError(f"the matrix batch ({K_all.shape[0]}) does not match the register batch ({words.shape[0]})")
    nw = min(words.shape[0], max_warps)
    words = words[:nw]
    K_all = np.broadcast_to(K_all, (nw, K_all.shape[1])) if K_all.shape[0] == 1 else K_all[:nw]
    ty = ins.type_of(op)
    rows, cols = ins.matrix_shape(op)
    reg = register_map(ins, op)
    width = code_bits(ins, op)
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    exp = _flat_positions(ins, op)
    epl = exp.shape[1]
    lanes = np.arange(32)[:, None]
    report = Report(ins.text, op, nw, nw * 32 * epl, _quad=ins.quadpair)

    def ppos(x: int) -> tuple[int, int, int]:
        p, rc = divmod(int(x), rows * cols)
        return (p, rc // cols, rc % cols)

    causes = []
    dup_warned = False
    for w in range(nw):
        fields_ = (words[w][lanes, reg[..., 0]] >> reg[..., 1].astype(np.uint64)) & mask  # (32, epl)
        S = _keys(fields_.astype(formats.get_format(ty).storage_dtype), ty)
        K = np.ascontiguousarray(K_all[w])
        if not dup_warned:
            vals, counts = np.unique(K, return_counts=True)
            if (counts > 1).any():
                dup_warned = True
                nrep = int((counts > 1).sum())
                v = vals[np.argmax(counts)]
                sample = _value_str(_key_value(v, ty))
                report.warnings.append(
                    f"the matrix repeats values ({nrep} distinct values occur more than once; {sample} occurs "
                    f"{int(counts.max())} times): a field holding a repeated value matches any of its positions, "
                    f"so some misplacements can go unnoticed. Use distinct values (e.g. np.arange) where the "
                    f"element type allows.")
        good = K[exp] == S
        if good.all():
            continue
        for ln, el in zip(*np.nonzero(~good)):
            found = tuple(ppos(x) for x in np.nonzero(K == S[ln, el])[0][:8])
            report.mismatches.append(Mismatch(
                warp=w, lane=int(ln), register=int(reg[ln, el, 0]), lo=int(reg[ln, el, 1]),
                hi=int(reg[ln, el, 1]) + width - 1, element=int(el), expected=ppos(exp[ln, el]),
                found=found, code=int(fields_[ln, el]), value=_key_value(S[ln, el], ty)))
        causes.append(_explain(ins, op, K, S))
    if causes:
        by = Counter((c[1], c[2]) for c in causes)
        (words_, tags), n = by.most_common(1)[0]
        frac = float(np.mean([c[0] for c in causes if (c[1], c[2]) == (words_, tags)]))
        if words_ is not None and frac > 0.5:
            report.cause, report.cause_tags, report.explained = words_, tags, frac
            if len(by) > 1:
                report.warnings.append(f"the warps disagree: this cause fits {n} of {len(causes)} warps with mismatches")
        notfound = sum(1 for m in report.mismatches if not m.found)
        if notfound:
            report.warnings.append(
                f"{notfound} field(s) hold values that are nowhere in the matrix: check the conversion to "
                f".{ty} (rounding, or a different element type), or that this is the matrix that was packed")
    return report


def _key_value(k, ty: str):
    if formats.get_format(ty).is_float:
        return float(np.int64(k).view(np.float64))
    return int(k)
