"""Sparse ``mma.sp`` / ``mma.sp::ordered_metadata``: forms, metadata facts and helpers.

Structured sparsity, restated from the PTX ISA ("Sparse matrix storage", "Matrix fragments for
mma.sp"):

* A is M x K logically, but every row is cut into *chunks* and only some elements of a chunk are
  stored: 2 of 4 (f16, bf16, s8/u8, e4m3/e5m2 and the ``kind::f8f6f4`` types), 1 of 2 (tf32),
  or 2 of 4 two-element *pairs* (s4/u4, e2m1 under ``kind::mxf4*``: "4:8 pairwise").  The
  register operand ``a`` holds the compressed M x K/2 matrix (kept elements in increasing K
  order); its fragment is the dense A fragment of the half-K shape (:mod:`warpsim.tensorcore.layouts`).
* The metadata register ``e`` holds one 4-bit *nibble* per chunk: two 2-bit indices, idx0 in
  bits 1:0 and idx1 in bits 3:2.  Stored element (or pair) 0 of the chunk goes to position idx0,
  element 1 to idx1.  For tf32 the indices count 16-bit halves, so only 0x4 (keep element 0) and
  0xE (keep element 1) mean anything.
* The sparsity selector ``f`` (an immediate) chooses which lanes of each quad supply metadata.
  How lanes and nibbles map onto (row, chunk) falls into four classes (:data:`METADATA_CLASSES`),
  measured on an H100 (docs/validation.md).

Invalid metadata is undefined behaviour in PTX; warpsim raises :class:`MetadataError` naming the
lane, nibble and value.  ``.sp`` rejects equal indices; ``.sp::ordered_metadata`` and all the
``kind::`` forms accept only the six increasing pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import numpy as np

from warpsim._util.arrays import as_array, as_uint
from warpsim._util.frozen import readonly
from warpsim.errors import MetadataError, ShapeError
from warpsim.facts import sparse as _facts
from warpsim.facts.isa import ARCHS, Instruction, form_allows
from warpsim.facts.sparse import (
    _CLASS_OF, _FIELD_BITS, DTYPE_REQ, METADATA_CLASSES, ORDERED_NIBBLES, ORDERED_ONLY, SP_NIBBLES,
    SPARSE_FORMS, TF32_NIBBLES, VARIANTS, MetadataClass, _require_sparse)
from warpsim.tensorcore.decode import as_instruction

__all__ = [
    "METADATA_CLASSES", "MetadataError", "MetadataReport", "SPARSE_FORMS", "VARIANTS",
    "check_metadata", "check_selector", "chunk_size", "compress", "compute", "dense_equivalent",
    "expand", "expand_codes", "explain_metadata", "gather_b", "iter_sparse_instructions",
    "legal_selectors", "metadata_class", "metadata_layout", "pattern", "positions", "valid_nibbles",
]


def _real(x: object, what: str) -> np.ndarray:
    """``x`` as an array of real numbers (bool, integer or float dtype); TypeError otherwise."""
    arr = as_array(x, what)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} must hold real numbers (bool, integer or float dtype), got dtype {arr.dtype}")
    return arr


def _meta_words(x: object) -> np.ndarray:
    """Metadata words (..., 32) as uint32: integers in [0, 2**32); TypeError / ShapeError otherwise."""
    arr = as_uint(x, "metadata words", 32, np.uint32)
    if arr.ndim < 1 or arr.shape[-1] != 32:
        raise ShapeError(f"metadata must be words of shape (..., 32); got {arr.shape}")
    return arr


def _ins(x: Instruction | str) -> Instruction:
    return as_instruction(x)


def metadata_class(ins: Instruction | str) -> MetadataClass:
    """The metadata map of a sparse instruction."""
    return _facts.metadata_class(_ins(ins))


def legal_selectors(ins: Instruction | str) -> tuple[int, ...]:
    """Sparsity-selector values the PTX ISA defines for the instruction."""
    return _facts.legal_selectors(_ins(ins))


def check_selector(ins: Instruction | str, selector: object) -> int:
    """The selector as an int if the PTX ISA defines it for ``ins``; PtxError otherwise."""
    return _facts.check_selector(_ins(ins), selector)


def valid_nibbles(ins: Instruction | str) -> tuple[int, ...]:
    """The metadata nibble values that define a pattern for ``ins``."""
    ins = _ins(ins)
    _require_sparse(ins)
    if ins.atype == "tf32":
        return TF32_NIBBLES
    return ORDERED_NIBBLES if ins.sparse == "sp::ordered_metadata" else SP_NIBBLES


def chunk_size(ins: Instruction | str) -> int:
    """Logical elements per metadata chunk: 4 (2:4), 2 (tf32 1:2) or 8 (4-bit 4:8 pairwise)."""
    ins = _ins(ins)
    _require_sparse(ins)
    return {"tf32": 2, "s4": 8, "u4": 8}.get(ins.atype, 8 if ins.kind in ("mxf4", "mxf4nvf4") else 4)


def _field(name: str, lane: np.ndarray, j: np.ndarray) -> np.ndarray:
    g, t = lane >> 2, lane & 3
    return {"g": g, "t": t, "t0": t & 1, "t1": t >> 1, "j": j, "j01": j & 3, "j2": j >> 2}[name]


def _concat(fields: str, lane, j) -> np.ndarray:
    out = np.zeros(np.broadcast_shapes(np.shape(lane), np.shape(j)), dtype=np.int64)
    shift = 0
    for name in fields.split():
        out = out + (_field(name, lane, j) << shift)
        shift += _FIELD_BITS[name]
    return out


@lru_cache(maxsize=None)
def _metadata_layout(ins: Instruction, selector: int) -> np.ndarray:
    cls = metadata_class(ins)
    m, _, k = ins.shape
    chunks = k // chunk_size(ins)
    lane = np.arange(32)[:, None]
    j = np.arange(8)[None, :]
    row = _concat(cls.row, lane, j)
    chunk = _concat(cls.chunk, lane, j)
    used = (_concat(cls.select, lane, j) == selector) if cls.select else np.ones((32, 8), bool)
    used = used & (chunk < chunks)
    out = np.where(used[..., None], np.stack([row, chunk], -1), -1)
    # each (row, chunk) of A is described by exactly one (lane, nibble)
    flat = (out[..., 0] * chunks + out[..., 1])[used]
    if sorted(flat.tolist()) != list(range(m * chunks)):
        raise AssertionError(f"metadata map of {ins.text} (selector {selector}) is not a bijection")
    return readonly(out)  # cached: no one may make it writable again


def metadata_layout(ins: Instruction | str, selector: int = 0) -> np.ndarray:
    """int64 (32, 8, 2): the (row, chunk) of A that nibble j of lane L's word describes.

    (-1, -1) where the nibble is ignored (lanes the selector does not choose).  Chunk c covers
    logical columns ``c * chunk_size .. (c+1) * chunk_size - 1``.  Cached and read-only.
    """
    ins = _ins(ins)
    return _metadata_layout(ins, check_selector(ins, selector))


# --------------------------------------------------------------------------------------------
# Metadata words <-> kept positions
# --------------------------------------------------------------------------------------------


def positions(ins: Instruction, nibbles: np.ndarray) -> np.ndarray:
    """Logical positions inside a chunk of the stored elements that a nibble describes.

    Returns int64 (..., kept): 2 for 2:4, 1 for tf32, 4 for the 4:8 pairwise forms (pair idx0,
    then pair idx1).  No validity check.
    """
    n = np.asarray(nibbles, dtype=np.int64)
    i0, i1 = n & 3, n >> 2
    cs = chunk_size(ins)
    if cs == 2:
        return (i0 >> 1)[..., None]
    if cs == 8:
        return np.stack([2 * i0, 2 * i0 + 1, 2 * i1, 2 * i1 + 1], -1)
    return np.stack([i0, i1], -1)


def _nibbles(words: np.ndarray) -> np.ndarray:
    return (words[..., None].astype(np.int64) >> (4 * np.arange(8))) & 0xF


def check_metadata(ins: Instruction | str, words: np.ndarray, selector: int) -> None:
    """Raise MetadataError naming the first invalid (lane, nibble, value) the selector reads."""
    ins = _ins(ins)
    lay = metadata_layout(ins, selector)
    used = lay[..., 0] >= 0
    nib = _nibbles(_meta_words(words))
    ok = np.isin(nib, valid_nibbles(ins)) | ~used
    if ok.all():
        return
    bad = np.argwhere(~ok)[0]
    *batch, lane, j = (int(v) for v in bad)
    v = int(nib[tuple(bad)])
    row, chunk = (int(x) for x in lay[lane, j])
    legal = ", ".join(f"0x{x:X}" for x in valid_nibbles(ins))
    raise MetadataError(
        f"invalid sparsity metadata for {ins.text} (selector {selector}): lane {lane}, "
        f"nibble {j} (bits {4 * j + 3}:{4 * j}) = 0x{v:X} describes row {row}, chunk {chunk}; "
        f"defined values: {legal} (the hardware result is undefined otherwise)"
    ).at(warp=tuple(batch), lanes=(lane,))


@lru_cache(maxsize=None)
def _gather_index(ins: Instruction, selector: int) -> np.ndarray:
    """For each (row, chunk): the flat (lane * 8 + nibble) that describes it."""
    lay = _metadata_layout(ins, selector)
    m, _, k = ins.shape
    chunks = k // chunk_size(ins)
    idx = np.empty(m * chunks, dtype=np.intp)
    lanes, js = np.nonzero(lay[..., 0] >= 0)
    idx[lay[lanes, js, 0] * chunks + lay[lanes, js, 1]] = lanes * 8 + js
    return readonly(idx.reshape(m, chunks))


def pattern(ins: Instruction | str, words: np.ndarray, selector: int, *, check: bool = True) -> np.ndarray:
    """int64 (..., M, K/2): the logical column of every compressed A element.

    ``words``: metadata (..., 32).  With ``check`` invalid metadata raises MetadataError.
    """
    ins = _ins(ins)
    selector = check_selector(ins, selector)
    w = np.asarray(words)
    if check:
        check_metadata(ins, w, selector)
    nib = _nibbles(w).reshape(w.shape[:-1] + (256,))
    per_chunk = nib[..., _gather_index(ins, selector)]  # (..., M, chunks)
    pos = positions(ins, per_chunk)  # (..., M, chunks, kept)
    cs = chunk_size(ins)
    base = (np.arange(per_chunk.shape[-1]) * cs)[:, None]
    out = pos + base
    return out.reshape(out.shape[:-2] + (out.shape[-2] * out.shape[-1],))  # (-1 fails on 0 warps)


def expand_codes(ins: Instruction, codes: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Scatter compressed A codes (..., M, K/2) to the logical (..., M, K) matrix (zeros elsewhere)."""
    codes = np.asarray(codes)
    shape = np.broadcast_shapes(codes.shape, cols.shape)
    out = np.zeros(shape[:-1] + (ins.k,), dtype=codes.dtype)
    np.put_along_axis(out, np.broadcast_to(cols, shape), np.broadcast_to(codes, shape), axis=-1)
    return out


# --------------------------------------------------------------------------------------------
# Matrices: compress and expand
# --------------------------------------------------------------------------------------------


def _nibble_of_mask(ins: Instruction, keep: np.ndarray) -> np.ndarray:
    """(..., chunks, chunk_size) bool kept mask -> canonical nibble (sorted indices)."""
    cs = chunk_size(ins)
    if cs == 8:
        keep = keep[..., 0::2]
    elif cs == 2:
        keep = np.repeat(keep, 2, axis=-1)
    # the two kept slots among four, in increasing order
    order = np.argsort(~keep, axis=-1, kind="stable")[..., :2]
    return order[..., 0] | (order[..., 1] << 2)


def compress(ins: Instruction | str, A: np.ndarray, *, selector: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split a dense, structurally sparse A (..., M, K) into (values (..., M, K/2), metadata (..., 32)).

    Each chunk must have at most the kept count of non-zeros (2 of 4; 1 of 2 for tf32; 2 of 4
    pairs for the 4:8 forms, a pair counting as non-zero when either element is).  A chunk with
    fewer keeps zeros in the lowest free positions.  Metadata uses increasing indices (valid for
    both spellings); lanes the selector does not choose get 0.  ShapeError names the first
    chunk that breaks the pattern.
    """
    ins = as_instruction(ins)
    selector = check_selector(ins, selector)
    A = _real(A, "A")
    m, _, k = ins.shape
    if A.shape[-2:] != (m, k):
        raise ShapeError(f"A must be (..., {m}, {k}) (the logical sparse matrix) for {ins.text}; "
                         f"got {A.shape}")
    cs = chunk_size(ins)
    chunks = A.reshape(A.shape[:-1] + (k // cs, cs))
    nz = chunks != 0
    if cs == 8:
        nzp = nz[..., 0::2] | nz[..., 1::2]
        nz = np.repeat(nzp, 2, axis=-1)
        limit, unit = 4, 2
    else:
        limit, unit = cs // 2, 1
    count = nz.sum(-1)
    if (count > limit).any():
        *batch, row, ch = (int(v) for v in np.argwhere(count > limit)[0])
        cols = f"{ch * cs}..{ch * cs + cs - 1}"
        what = "pairs" if cs == 8 else "elements"
        raise ShapeError(f"A is not {'4:8 pairwise' if cs == 8 else '1:2' if cs == 2 else '2:4'} "
                         f"sparse: row {row}, columns {cols}{' of matrix ' + str(tuple(batch)) if batch else ''} "
                         f"hold {int(count[tuple(np.argwhere(count > limit)[0])]) // unit} non-zero "
                         f"{what}, at most {limit // unit} allowed")
    # keep the non-zeros, then fill with the lowest zero positions
    rank = np.where(nz, 0, 1) * cs + np.arange(cs)
    keep_idx = np.sort(np.argsort(rank, axis=-1, kind="stable")[..., :limit], axis=-1)
    keep = np.zeros(nz.shape, bool)
    np.put_along_axis(keep, keep_idx, True, axis=-1)
    values = np.take_along_axis(chunks, keep_idx, axis=-1).reshape(A.shape[:-1] + (k // 2,))
    nib = _nibble_of_mask(ins, keep)  # (..., M, chunks)
    lay = _metadata_layout(ins, selector)
    used = lay[..., 0] >= 0
    per = nib[..., lay[..., 0].clip(0), lay[..., 1].clip(0)]  # (..., 32, 8)
    per = np.where(used, per, 0).astype(np.uint64) << (4 * np.arange(8, dtype=np.uint64))
    words = per.sum(-1).astype(np.uint32)
    return values, words


def expand(ins: Instruction | str, values: np.ndarray, metadata: np.ndarray, *, selector: int = 0) -> np.ndarray:
    """The logical A (..., M, K) from compressed values (..., M, K/2) and metadata (..., 32)."""
    ins = as_instruction(ins)
    values = _real(values, "values")
    m, _, k = ins.shape
    if values.shape[-2:] != (m, k // 2):
        raise ShapeError(f"values must be (..., {m}, {k // 2}) (compressed A) for {ins.text}; "
                         f"got {values.shape}")
    cols = pattern(ins, _meta_words(metadata), selector)
    return expand_codes(ins, values, cols)


def dense_equivalent(ins: Instruction) -> Instruction:
    """The dense instruction of the same types and half the K (no legality implied).

    A sparse mma computes, per row, what this instruction computes on the compressed row.
    """
    from dataclasses import replace

    _require_sparse(ins)
    m, n, k = ins.shape
    return replace(ins, sparse=None, shape=(m, n, k // 2), form=ins.form[3:])


# --------------------------------------------------------------------------------------------
# Enumeration
# --------------------------------------------------------------------------------------------


def iter_sparse_instructions(arch: str | None = None) -> Iterator[Instruction]:
    """Every documented sparse instruction (canonical qualifiers, both spellings) legal on ``arch``."""
    archs = [ARCHS[arch]] if arch else list(ARCHS.values())
    for f in SPARSE_FORMS:
        for shape, req in f.shapes.items():
            if not any(form_allows(req, a) for a in archs):
                continue
            for variant in VARIANTS:
                if f.name in ORDERED_ONLY and variant == "sp":
                    continue
                for (at, bt) in f.ab:
                    pr = f.pair_req.get((at, bt))
                    if pr is not None and not any(form_allows(pr, a) for a in archs):
                        continue
                    for (dt, ct) in f.dc:
                        dr = DTYPE_REQ.get((f.name, dt))
                        if dr is not None and not any(form_allows(dr, a) for a in archs):
                            continue
                        for sat in ((False, True) if f.satfinite else (False,)):
                            for sv, st in (f.scale or ((None, None),)):
                                yield Instruction(
                                    shape=shape, alayout="row", blayout="col", dtype=dt, atype=at,
                                    btype=bt, ctype=ct, kind=f.kind, satfinite=sat,
                                    block_scale=f.block_scale, scale_vec=sv, stype=st,
                                    form=f.name, arch=arch, sparse=variant)


# --------------------------------------------------------------------------------------------
# Numerics
# --------------------------------------------------------------------------------------------


def gather_b(b: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """B rows (..., K, N) picked per row of A: (..., M, K/2, N) with [m, c] = B[cols[m, c]]."""
    shape = np.broadcast_shapes(b.shape[:-2], cols.shape[:-2])
    m, kc = cols.shape[-2:]
    k, n = b.shape[-2:]
    bf = np.broadcast_to(b, shape + (k, n)).reshape(-1, k * n)
    idx = (np.broadcast_to(cols, shape + (m, kc)).reshape(-1, m * kc, 1) * n + np.arange(n)).reshape(len(bf), -1)
    return np.take_along_axis(bf, idx, axis=-1).reshape(shape + (m, kc, n))


def compute(ins: Instruction, arch: str, a, b, c, cols, dense_compute, sa=None, sb=None):
    """D codes of a sparse mma from compressed A codes, B, C codes and the A column pattern.

    The tensor core multiplies only the kept elements: each D row is the dense instruction of
    half the K (:func:`dense_equivalent`) applied to the compressed row of A and the B rows its
    metadata selects.  Dropped positions take no part at all (an Inf or NaN in a B row that no
    kept element selects does not reach D).  The H100 agrees bit for bit on every sparse sm_90
    form (docs/validation.md).  ``dense_compute`` is ``warpsim.tensorcore.execute._compute``.
    """
    dense = dense_equivalent(ins)
    if ins.dtype == "s32":  # exact integer sums: the logical product is the same and cheaper
        from dataclasses import replace

        return dense_compute(replace(dense, shape=ins.shape), arch, expand_codes(ins, a, cols),
                             b, c, sa, sb)
    bg = gather_b(b, cols)  # (..., M, Kc, N)
    a_rows = a[..., :, None, :]  # (..., M, 1, Kc)
    c_rows = c[..., :, None, :]  # (..., M, 1, N)
    if sa is not None:
        sa = sa[..., :, None, :]  # (..., M, 1, V)
        sb = sb[..., None, :, :]  # (..., 1, V, N)
    d = dense_compute(dense, arch, a_rows, bg, c_rows, sa, sb)
    return d[..., 0, :]


# --------------------------------------------------------------------------------------------
# The packing doctor for metadata
# --------------------------------------------------------------------------------------------


@dataclass
class MetadataReport:
    """What :func:`explain_metadata` found; ``str(report)`` is the text for people."""

    instruction: str
    selector: int
    chunks: int
    mismatches: list[str]
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __str__(self) -> str:
        if self.ok:
            return (f"OK: all {self.chunks} metadata nibbles of {self.instruction} (selector "
                    f"{self.selector}) place the compressed values where A has them.")
        lines = [f"{len(self.mismatches)} of {self.chunks} metadata nibbles of {self.instruction} "
                 f"(selector {self.selector}) do not rebuild A."]
        lines.append(f"Likely cause: {self.cause}." if self.cause else
                     "No simple pattern (selector, metadata map, swapped index pair, word halves) "
                     "explains the mismatches.")
        lines += ["  " + m for m in self.mismatches[:12]]
        if len(self.mismatches) > 12:
            lines.append(f"  ... and {len(self.mismatches) - 12} more")
        return "\n".join(lines)


def _bad_chunks(ins: Instruction, words: np.ndarray, A: np.ndarray, lay: np.ndarray) -> list:
    """(row, chunk, lane, nibble, value, wanted) of every chunk the metadata does not rebuild."""
    cs = chunk_size(ins)
    m, _, k = ins.shape
    values, good = compress(ins, A)  # canonical metadata, selector 0
    want_nib = np.zeros((m, k // cs), dtype=np.int64)
    lay0 = _metadata_layout(ins, 0)
    gn = _nibbles(good)
    for ln, j in zip(*np.nonzero(lay0[..., 0] >= 0)):
        want_nib[lay0[ln, j, 0], lay0[ln, j, 1]] = gn[ln, j]
    nib = _nibbles(words)
    out = []
    vals = values.reshape(m, k // cs, -1)
    for ln, j in zip(*np.nonzero(lay[..., 0] >= 0)):
        r, c = (int(x) for x in lay[ln, j])
        v = int(nib[ln, j])
        rebuilt = np.zeros(cs, dtype=A.dtype)
        np.add.at(rebuilt, positions(ins, np.array(v)), vals[r, c])
        if not np.array_equal(rebuilt, A[r, c * cs:(c + 1) * cs]):
            out.append((r, c, int(ln), int(j), v, int(want_nib[r, c])))
    return out


def explain_metadata(ins: Instruction | str, metadata: object, A: object, *,
                     selector: int = 0) -> MetadataReport:
    """Check metadata words (32,) against the structurally sparse logical A (M, K) they describe.

    Every chunk whose nibble (read where the metadata map of ``selector`` says) would not put
    the compressed values back where A holds them is reported, with the likely cause when the
    mismatches follow a pattern: the words fit another selector, another form's metadata map,
    index pairs written in the wrong order, or the two 16-bit halves of each word swapped.
    """
    ins = as_instruction(ins)
    selector = check_selector(ins, selector)
    words = _meta_words(metadata)
    if words.shape != (32,):
        raise ShapeError(f"metadata must be 32 words (one per lane); got shape {words.shape}")
    words = words.astype(np.int64)
    A = _real(A, "A").astype(np.float64)
    m, _, k = ins.shape
    if A.shape != (m, k):
        raise ShapeError(f"A must be the logical {m} x {k} matrix for {ins.text}; got {A.shape}")
    cs = chunk_size(ins)
    lay = _metadata_layout(ins, selector)
    bad = _bad_chunks(ins, words, A, lay)
    msgs = [f"lane {ln} nibble {j} (bits {4 * j + 3}:{4 * j}) = 0x{v:X} describes A row {r}, "
            f"columns {c * cs}..{c * cs + cs - 1}; A's non-zeros there need 0x{w:X}"
            for r, c, ln, j, v, w in bad]
    rep = MetadataReport(ins.text, selector, m * k // cs, msgs)
    if not bad:
        return rep
    # patterns, most specific first
    for f in legal_selectors(ins):
        if f != selector and not _bad_chunks(ins, words, A, _metadata_layout(ins, f)):
            rep.cause = (f"the words hold the metadata for sparsity selector {f} ("
                         f"{_lanes_text(_metadata_layout(ins, f))}), not {selector} ("
                         f"{_lanes_text(lay)})")
            return rep
    own = _CLASS_OF[(ins.form, ins.k)]
    for name, cls in METADATA_CLASSES.items():
        if name == own:
            continue
        for f in cls.selectors:
            other = _class_layout(ins, cls, f)
            if other is not None and not _bad_chunks(ins, words, A, other):
                rep.cause = (f"the words follow the '{name}' metadata map (selector {f}); "
                             f"{ins.text} uses the '{own}' map: {_class_text(own)}")
                return rep
    swapped = ((words & 0x33333333) << 2) | ((words >> 2) & 0x33333333)
    if not _bad_chunks(ins, swapped, A, lay):
        rep.cause = ("the two 2-bit indices of each nibble are in the wrong order: idx0 (the "
                     "position of the first kept element) belongs in bits 1:0, idx1 in bits 3:2")
        return rep
    halves = ((words & 0xFFFF) << 16) | (words >> 16)
    if not _bad_chunks(ins, halves, A, lay):
        rep.cause = "the two 16-bit halves of each metadata word are swapped"
    return rep


def _lanes_text(lay: np.ndarray) -> str:
    lanes = sorted({int(x) for x in np.nonzero((lay[..., 0] >= 0).any(-1))[0]})
    quad = [x for x in lanes if x < 4]
    if not quad:
        return "none"
    return f"lane{'s' if len(quad) > 1 else ''} {', '.join(map(str, quad))} of each quad"


def _class_layout(ins: Instruction, cls: MetadataClass, f: int) -> np.ndarray | None:
    """The metadata layout ``ins`` would have under another class (None if it does not fit)."""
    m, _, k = ins.shape
    chunks = k // chunk_size(ins)
    lane = np.arange(32)[:, None]
    j = np.arange(8)[None, :]
    row, chunk = _concat(cls.row, lane, j), _concat(cls.chunk, lane, j)
    used = (_concat(cls.select, lane, j) == f) if cls.select else np.ones((32, 8), bool)
    used &= chunk < chunks
    if used.sum() != m * chunks or (row[used] >= m).any():
        return None
    return np.where(used[..., None], np.stack([row, chunk], -1), -1)


def _class_text(name: str) -> str:
    return {"quad": "one lane per quad, bits 15:0 row g, bits 31:16 row g+8",
            "pair-k": "a lane pair per quad, its first lane the low half of K, bits 15:0 row g, "
                      "bits 31:16 row g+8",
            "pair-row": "a lane pair per quad, its first lane row g, its second row g+8, each "
                        "word all of K",
            "all": "every lane: lane bit 0 picks row g or g+8, lane bit 1 the half of K"}[name]
