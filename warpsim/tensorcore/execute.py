"""Execute mma.sync on warp registers: gather fragments, compute, scatter D.

``mma`` works on register words (the hardware view); ``matmul`` on matrices (pack -> mma ->
unpack).  Both broadcast over leading batch dimensions and process large batches in chunks so
memory stays bounded.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from warpsim._util import allocator
from warpsim.tensorcore import accel, accel_extra, blockscale, engine, numerics, sparse
from warpsim.facts import formats
from warpsim.tensorcore.decode import decode, default_arch
from warpsim.errors import ShapeError
from warpsim.facts.isa import Instruction
from warpsim._util.arrays import as_array, as_uint
from warpsim.tensorcore.packing import batch_last_codec, pack, pack_bits, unpack, unpack_bits

#: Warps per chunk of the batch: keeps temporaries cache-sized (m16n8k16: ~16 KB per warp and
#: array) and bounds memory; 256 measured fastest on a 2-core machine (benchmarks/profile_f16.py).
CHUNK = 256

_CANON_NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF, "f64": 0x7FFFFFFFFFFFFFFF}


@lru_cache(maxsize=4096)
def _resolve_text(text: str, arch: str | None) -> Instruction:
    return decode(text, arch)


def resolve(instr: str | Instruction, arch: str | None) -> Instruction:
    """``instr`` legal on ``arch`` ('exact' or None: legal on any known target; 'auto':
    :func:`warpsim.tensorcore.decode.default_arch`, recorded in ``Instruction.arch``).  Text is
    decoded (once per text and target); an Instruction is checked against the target from the
    facts it carries, never decoded again."""
    if arch is not None and not isinstance(arch, str):
        raise TypeError(f"arch must be a target name such as 'sm_90', or 'exact'; got "
                        f"{type(arch).__name__} {arch!r}")
    if not isinstance(instr, (str, Instruction)):
        raise TypeError(f"instr must be an instruction string or Instruction, got {type(instr).__name__}")
    target = None if arch in (None, "exact") else arch
    if target not in (None, "auto"):
        numerics.model_for(target)  # unknown names -> PtxError listing the known ones
    if isinstance(instr, str):
        return _resolve_text(instr, target)
    if target == "auto":
        return instr if instr.arch is not None else replace(instr, arch=default_arch(instr))
    if target is None or target == instr.arch:
        return instr
    return replace(decode(instr, target), arch=target)


def resolve_target(instr: str | Instruction, arch: str | None) -> tuple[Instruction, str | None]:
    """:func:`resolve`, and the target to simulate: ``arch`` itself, or for 'auto' the target
    decode chose."""
    ins = resolve(instr, arch)
    return ins, (ins.arch if arch == "auto" else arch)


def _words(x: object, ins: Instruction, op: str) -> np.ndarray:
    """Validate register words of operand ``op``: (..., 32, regs) integers in range."""
    arr = as_array(x, f"operand {op} register words")
    nregs = ins.regs[op]
    if arr.ndim < 2 or arr.shape[-2:] != (32, nregs):
        raise ShapeError(
            f"operand {op} of {ins.text} needs register words of shape (..., 32, {nregs}) "
            f"(lanes, registers); got shape {arr.shape}")
    bits = ins.register_bits(op)
    return as_uint(arr, f"operand {op} register words", bits, np.uint64 if bits == 64 else np.uint32)


def _values(ins: Instruction, op: str, codes: np.ndarray) -> np.ndarray:
    return formats.decode(codes, ins.type_of(op))


def _encode_d(ins: Instruction, d: np.ndarray, keep_nan: bool = False) -> np.ndarray:
    """Exact D values (already rounded to D's type) -> element codes.

    NaN becomes the canonical NaN, except with ``keep_nan`` (the hardware f64 path, whose NaN
    payloads the engine computes as the GPU propagates them).
    """
    t = ins.dtype
    if t == "s32":
        return (d.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    dt, ut = {"f32": (np.float32, np.uint32), "f16": (np.float16, np.uint16),
              "f64": (np.float64, np.uint64)}[t]
    with np.errstate(all="ignore"):
        codes = d.astype(dt).view(ut)
    nan = np.isnan(d)
    if nan.any() and not keep_nan:
        codes = np.where(nan, ut(_CANON_NAN[t]), codes)
    return codes


def _integer(ins: Instruction, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """s32 results of integer and single-bit mma: exact, then wrap or saturate."""
    if ins.bitop:
        af = a.astype(np.float64)
        bf = b.astype(np.float64)
        both = af @ bf  # popc(row AND col): exact in float64 for K <= 256
        if ins.bitop == "xor":
            cnt = af.sum(-1)[..., :, None] + bf.sum(-2)[..., None, :] - 2 * both
        else:
            cnt = both
        d = c + cnt.astype(np.int64)
    else:  # BLAS in float64: |products| < 2**16 and K <= 64, so every sum is exact
        d = c + np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    if ins.satfinite:
        return np.clip(d, -(1 << 31), (1 << 31) - 1)
    return ((d + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _compute(ins: Instruction, arch: str, a, b, c, sa=None, sb=None) -> np.ndarray:
    """D codes (matrix-shaped) from A, B, C codes for one chunk of the batch."""
    A, B, C = _values(ins, "a", a), _values(ins, "b", b), _values(ins, "c", c)
    if ins.dtype == "s32":
        return _encode_d(ins, _integer(ins, A, B, C))
    if ins.block_scale:
        SA = formats.decode(sa, ins.stype)
        SB = formats.decode(sb, ins.stype)
        if arch == "exact":
            sa_k, sb_k = blockscale.expand(ins, SA, SB)
            d = engine.exact_dot_add(A * sa_k, B * sb_k, C, "f32")
        else:
            d = numerics.compute_block_scaled(ins, A, B, C, SA, SB, numerics.model_for(arch))
        return _encode_d(ins, d)
    if arch == "exact":
        return _encode_d(ins, engine.exact_dot_add(A, B, C, ins.dtype, ins.rounding or "rn"))
    d = numerics.compute(ins, A, B, C, numerics.model_for(arch))
    return _encode_d(ins, d, keep_nan=ins.dtype == "f64")


def batch_last_form(ins: Instruction) -> bool:
    """Whether :func:`words_kernel` runs ``ins``: floating-point forms (dense and sparse) with
    f32, f16 or f64 D, and the single-bit (b1) forms; not block scaling, the m8n8k4 .f16
    quad-pair products or the other integer forms (BLAS products on matrices are faster)."""
    if ins.block_scale or ins.quadpair:
        return False
    if ins.atype == "b1":
        return _popcount_words(ins) is not None
    return ins.dtype in ("f32", "f16", "f64")


def _popcount_words(ins: Instruction):
    """For a b1 form: per operand A and B, the register word (reg * 32 + lane) holding each
    32-element run of a row of A / column of B, (K / 32, M) and (K / 32, N), when the
    layout keeps every run in one register in bit order (and NumPy counts bits); else None."""
    if not hasattr(np, "bitwise_count") or ins.k % 32:
        return None
    out = []
    for op in "ab":
        c = batch_last_codec(ins, op)  # element (k, m) of A or (k, n) of B, k-major
        kk, mm = c.shape
        row = c.row.reshape(kk, mm)
        bit = c.shift.astype(np.int64).reshape(kk, mm)
        runs = row.reshape(kk // 32, 32, mm)
        if not ((runs == runs[:, :1]).all()
                and (bit.reshape(kk // 32, 32, mm) == np.arange(32)[None, :, None]).all()):
            return None
        out.append(np.ascontiguousarray(runs[:, 0]))
    return tuple(out)


@lru_cache(maxsize=1024)
def words_kernel(ins: Instruction, arch: str, selector: int | None = None):
    """The engine's fast path for one :func:`batch_last_form` instruction and target, with its
    tables bound: ``kernel(a, b, c) -> d`` on batch-last register words (nregs, 32, n), straight
    from registers to batch-last element values and back, without validation.  Sparse forms
    take ``selector`` here and ``kernel(a, b, c, e)`` the (already checked) metadata words
    (32, n); a then holds the compressed A."""
    if ins.atype == "b1":
        return _popcount_kernel(ins)
    if ins.atype == "f64":
        return _accel_f64_kernel(ins, arch) if accel_extra.supports(ins, arch) else _f64_kernel(ins)
    if not ins.sparse and accel.supports(ins, arch):
        return _accel_kernel(ins, arch)
    return numpy_words_kernel(ins, arch, selector)


@lru_cache(maxsize=1024)
def numpy_words_kernel(ins: Instruction, arch: str, selector: int | None = None):
    """:func:`words_kernel` on the NumPy engine only (the reference for the compiled kernel)."""
    if ins.atype == "b1":
        return _popcount_kernel(ins)
    if ins.atype == "f64":
        return _f64_kernel(ins)
    compute = sparse.dense_equivalent(ins) if ins.sparse else ins
    dt = numerics.operand_dtype(ins)
    model = numerics.model_for(arch)
    codecs = [batch_last_codec(ins, op) for op in "abcd"]
    fmts = [formats.get_format(ins.type_of(op)) for op in "abc"]
    dtypes = (dt, dt, np.float64)

    def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray, e: np.ndarray | None = None) -> np.ndarray:
        A, B, C = (formats.decode_codes(codec.gather(w), f, t)
                   for codec, w, f, t in zip(codecs, (a, b, c), fmts, dtypes))
        rows = None  # sparse: the logical B row of each compressed A element, (K/2, M, n)
        if e is not None:
            rows = sparse.pattern(ins, e.T, selector, check=False).transpose(2, 1, 0)
        with np.errstate(all="ignore"):  # overflow, Inf and NaN are results here, not errors
            d = numerics.compute_batch_last(compute, A, B, C, model, rows=rows)
        return codecs[3].scatter(_encode_d(ins, d))
    return kernel


@lru_cache(maxsize=1024)
def block_scale_kernel(ins: Instruction, arch: str, byte_id_a: int = 0, thread_id_a: int = 0,
                       byte_id_b: int = 0, thread_id_b: int = 0):
    """Dense .block_scale forms on the batch-last path: ``kernel(a, b, c, sa, sb) -> d`` on
    batch-last register words (nregs, 32, n) and scale metadata words (32, n) (trusted, as
    :func:`words_kernel`), with the selectors bound."""
    model = numerics.model_for(arch)
    codecs = [batch_last_codec(ins, op) for op in "abcd"]
    fmts = [formats.get_format(ins.type_of(op)) for op in "abc"]
    # (lane, byte shift) of each scale value, batch-last: (V, M) for scale_A, (V, N) for scale_B
    lay = [blockscale.scale_layout(ins, "scale_a", byte_id_a, thread_id_a).transpose(1, 0, 2),
           blockscale.scale_layout(ins, "scale_b", byte_id_b, thread_id_b)]
    lanes = [x[..., 0] for x in lay]
    shifts = [(8 * x[..., 1]).astype(np.uint32)[..., None] for x in lay]

    def kernel(a, b, c, sa, sb) -> np.ndarray:
        A, B, C = (formats.decode_codes(codec.gather(w), f)
                   for codec, w, f in zip(codecs, (a, b, c), fmts))
        SA, SB = (formats.decode(((np.asarray(w)[ln] >> sh) & np.uint32(0xFF)).astype(np.uint8), ins.stype)
                  for w, ln, sh in zip((sa, sb), lanes, shifts))
        with np.errstate(all="ignore"):
            d = numerics.compute_block_scaled_batch_last(ins, A, B, C, SA, SB, model)
        return codecs[3].scatter(_encode_d(ins, d))
    return kernel


def _accel_kernel(ins: Instruction, arch: str):
    """:func:`words_kernel` through the compiled kernel (:mod:`warpsim.tensorcore.accel`)."""
    plan = accel.plan(ins, arch)
    nregs = ins.regs["d"]

    def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        a, b, c = (_aligned(x) for x in (a, b, c))
        return plan(a, b, c, np.empty((nregs, 32, a.shape[-1]), np.uint32), "batch-last")
    return kernel


def _aligned(x: np.ndarray) -> np.ndarray:
    """x as uint32 with whole-element strides (the compiled kernel's only requirement)."""
    if x.dtype != np.uint32 or any(s % 4 for s in x.strides):
        return np.ascontiguousarray(x, dtype=np.uint32)
    return x


def _f64_kernel(ins: Instruction):
    """f64 forms: register words straight to batch-last binary64 values, the FMA chain on
    them, D's words back (NaN payloads as the hardware propagates them)."""
    codecs = [batch_last_codec(ins, op) for op in "abcd"]
    rounding = ins.rounding or "rn"

    def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        A, B, C = (codec.gather(w).view(np.float64) for codec, w in zip(codecs, (a, b, c)))
        with np.errstate(all="ignore"):
            d = engine.fma_chain_batch_last(A, B, C, rounding)
        return codecs[3].scatter(_encode_d(ins, d, keep_nan=True))
    return kernel


def _accel_f64_kernel(ins: Instruction, arch: str):
    """:func:`_f64_kernel` through the compiled kernel (:mod:`warpsim.tensorcore.accel_extra`)."""
    plan = accel_extra.plan(ins, arch)
    nregs = ins.regs["d"]

    def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        a, b, c = (accel_extra.aligned64(x) for x in (a, b, c))
        d = plan(a, b, c, np.empty((nregs, 32, a.shape[-1]), np.uint64), "batch-last")
        return _f64_kernel(ins)(a, b, c) if d is None else d
    return kernel


def _popcount_kernel(ins: Instruction):
    """b1 forms (``.and.popc`` / ``.xor.popc``): each row of A and column of B is K / 32
    whole register words, so D = C + the bit count of (row AND/XOR column) summed over those
    words: no unpacking into single bits and no float products."""
    wa, wb = _popcount_words(ins)
    codecs = {op: batch_last_codec(ins, op) for op in "cd"}
    combine = np.bitwise_and if ins.bitop == "and" else np.bitwise_xor

    def kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        n = a.shape[-1]
        ra = np.ascontiguousarray(a).reshape(-1, n)[wa]  # (K/32, M, n)
        rb = np.ascontiguousarray(b).reshape(-1, n)[wb]  # (K/32, N, n)
        bits = np.bitwise_count(combine(ra[:, :, None], rb[:, None]))  # (K/32, M, N, n) uint8
        cnt = np.add.reduce(bits, axis=0, dtype=np.int64)
        d = codecs["c"].gather(c).view(np.int32).astype(np.int64) + cnt
        if ins.satfinite:
            d = np.clip(d, -(1 << 31), (1 << 31) - 1)
        return codecs["d"].scatter((d & 0xFFFFFFFF).astype(np.uint32))  # wraps modulo 2**32
    return kernel


def mma(
    instr: str | Instruction,
    a: object,
    b: object,
    c: object,
    *,
    arch: str = "auto",
    scale_a: object = None,
    scale_b: object = None,
    byte_id_a: int = 0,
    thread_id_a: int = 0,
    byte_id_b: int = 0,
    thread_id_b: int = 0,
    metadata: object = None,
    selector: int | None = None,
) -> np.ndarray:
    """Run one ``mma.sync`` per warp of a batch on register words; return D's register words.

    a, b, c: register words (..., 32, regs) (uint32; uint64 for f64 operands); leading batch
    dimensions broadcast.  scale_a / scale_b: the per-lane ``.b32`` scale metadata (..., 32) for
    ``.block_scale`` forms, with the byte / thread selectors of the PTX operand list (integers,
    Python or NumPy; never bool or float).
    ``arch``: a target name (its numerics model), 'exact' (one exact rounding, IEEE
    specials) or 'auto' (the default: sm_90 where the instruction is legal there, else the
    first target that accepts it, e.g. sm_120a for block scaling; see
    :func:`warpsim.tensorcore.decode.default_arch`).  Returns (batch..., 32, regs['d']).  Inputs are never
    modified.

    Sparse ``mma.sp``: ``a`` holds the compressed A, ``metadata`` the metadata register words
    (..., 32) and ``selector`` the sparsity-selector immediate; invalid metadata raises
    :class:`warpsim.tensorcore.sparse.MetadataError` (see :mod:`warpsim.tensorcore.sparse`).
    """
    ins, arch = resolve_target(instr, arch)
    A, B, C = _words(a, ins, "a"), _words(b, ins, "b"), _words(c, ins, "c")
    batch = _broadcast(ins, A, B, C)
    E = None
    if ins.sparse:
        if metadata is None or selector is None:
            raise ShapeError(f"{ins.text} is sparse: pass metadata= (words (..., 32)) and selector=")
        selector = sparse.check_selector(ins, selector)
        E = _scale_words(metadata, "metadata")
        if not accel_extra.metadata_ok(ins, E, selector):  # the compiled check, else NumPy's
            sparse.check_metadata(ins, E, selector)  # which raises naming the first bad nibble
        batch = np.broadcast_shapes(batch, E.shape[:-1])
    elif metadata is not None or selector is not None:
        raise ShapeError(f"{ins.text} is not sparse; metadata/selector must be None")
    byte_id_a, thread_id_a, byte_id_b, thread_id_b = blockscale.check_selectors(
        ins, byte_id_a, thread_id_a, byte_id_b, thread_id_b)
    SA = SB = None
    if ins.block_scale:
        if scale_a is None or scale_b is None:
            raise ShapeError(f"{ins.text} needs scale_a and scale_b metadata words (..., 32)")
        SA = _scale_words(scale_a, "scale_a")
        SB = _scale_words(scale_b, "scale_b")
        batch = np.broadcast_shapes(batch, SA.shape[:-1], SB.shape[:-1])
    elif scale_a is not None or scale_b is not None:
        raise ShapeError(f"{ins.text} has no .block_scale; scale_a/scale_b must be None")
    n = int(np.prod(batch, dtype=np.int64))
    allocator.for_batch(n)
    flat = [np.broadcast_to(x, batch + x.shape[-2:]).reshape((n,) + x.shape[-2:]) for x in (A, B, C)]
    if E is not None:
        E = np.broadcast_to(E, batch + (32,)).reshape(n, 32)
    if SA is not None:
        SA = np.broadcast_to(SA, batch + (32,)).reshape(n, 32)
        SB = np.broadcast_to(SB, batch + (32,)).reshape(n, 32)
    out = np.empty((n, 32, ins.regs["d"]), np.uint64 if ins.dtype == "f64" else np.uint32)
    if n and arch != "exact" and ins.atype == "f64" and accel_extra.supports(ins, arch):
        if accel_extra.plan(ins, arch)(*(accel_extra.aligned64(x) for x in flat), out, "warp-first") is not None:
            return out.reshape(batch + out.shape[1:])
    if n and arch != "exact" and ins.block_scale and accel_extra.supports(ins, arch):
        if accel_extra.block_plan(ins, arch, byte_id_a, thread_id_a, byte_id_b, thread_id_b, selector)(
                *(accel_extra.aligned32(x) for x in flat), accel_extra.aligned32(SA), accel_extra.aligned32(SB),
                None if E is None else accel_extra.aligned32(E), out) is not None:
            return out.reshape(batch + out.shape[1:])
    if n and arch != "exact" and accel.supports(ins, arch):  # the compiled kernel: all warps at once
        accel.plan(ins, arch)(*(_aligned(x) for x in flat), out, "warp-first")
        return out.reshape(batch + out.shape[1:])
    kernel = None
    if arch != "exact" and batch_last_form(ins):
        kernel = words_kernel(ins, arch, selector if ins.sparse else None)
    elif arch != "exact" and ins.block_scale and not ins.sparse:
        kernel = block_scale_kernel(ins, arch, byte_id_a, thread_id_a, byte_id_b, thread_id_b)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        if kernel is not None:
            extra = (() if E is None else (E[s:e].T,)) + (() if SA is None else (SA[s:e].T, SB[s:e].T))
            out[s:e] = kernel(*(x[s:e].transpose(2, 1, 0) for x in flat), *extra).transpose(2, 1, 0)
            continue
        ca, cb, cc = (unpack_bits(ins, op, x[s:e]) for op, x in zip("abc", flat))
        sa = sb = None
        if SA is not None:
            sa = blockscale.gather_scales(ins, SA[s:e], "scale_a", byte_id_a, thread_id_a)
            sb = blockscale.gather_scales(ins, SB[s:e], "scale_b", byte_id_b, thread_id_b)
        with np.errstate(all="ignore"):  # overflow, Inf and NaN are results here, not errors
            if E is not None:
                d = sparse.compute(ins, arch, ca, cb, cc, sparse.pattern(ins, E[s:e], selector,
                                   check=False), _compute, sa, sb)
            else:
                d = _compute(ins, arch, ca, cb, cc, sa, sb)
        out[s:e] = pack_bits(ins, "d", d)
    return out.reshape(batch + out.shape[1:])


def _broadcast(ins: Instruction, *xs: np.ndarray) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(x.shape[:-2] for x in xs))
    except ValueError:
        shapes = ", ".join(f"{op}: {x.shape}" for op, x in zip("abc", xs))
        raise ShapeError(f"batch dimensions of a, b, c do not broadcast ({shapes})") from None


def _scale_words(x: object, name: str) -> np.ndarray:
    arr = as_array(x, f"{name} words")
    if arr.ndim < 1 or arr.shape[-1] != 32:
        raise ShapeError(f"{name} must be metadata words of shape (..., 32); got {arr.shape}")
    return as_uint(arr, f"{name} words", 32, np.uint32)


def matmul(
    instr: str | Instruction,
    A: object,
    B: object,
    C: object,
    *,
    arch: str = "auto",
    scale_A: object = None,
    scale_B: object = None,
    metadata: object = None,
    selector: int | None = None,
) -> np.ndarray:
    """D = A @ B + C through the warp: pack the matrices, run ``mma``, unpack D.

    A (..., M, K), B (..., K, N), C (..., M, N) values (for m8n8k4 .f16: (..., 4, M, K) etc.,
    one matrix per quad-pair product); values the element type cannot hold are rounded to
    nearest even.  For .block_scale forms scale_A (..., M, V) and scale_B (..., V, N) hold the
    scale values (powers of two for .ue8m0).  ``arch`` as for :func:`mma`.  Returns D values
    (float64, or int64 for s32).

    Sparse ``mma.sp``: A is either the logical (..., M, K) matrix, which must be structurally
    sparse (it is compressed with :func:`warpsim.tensorcore.sparse.compress`), or, with ``metadata``
    words (..., 32), the compressed (..., M, K/2) values.  ``selector`` defaults to 0.
    """
    ins, arch = resolve_target(instr, arch)
    kw = {}
    if ins.sparse:
        selector = 0 if selector is None else selector
        if metadata is None:  # zeros of either sign may be dropped
            A, metadata = sparse.compress(ins, formats.decode(formats.encode(A, ins.atype),
                                                              ins.atype), selector=selector)
        kw = dict(metadata=metadata, selector=selector)
    elif metadata is not None or selector is not None:
        raise ShapeError(f"{ins.text} is not sparse; metadata/selector must be None")
    if ins.block_scale:
        if scale_A is None or scale_B is None:
            raise ShapeError(f"{ins.text} needs scale_A (M x V) and scale_B (V x N)")
        ca = formats.encode(scale_A, ins.stype)
        cb = formats.encode(scale_B, ins.stype)
        v = ins.scale_vec
        if ca.shape[-2:] != (ins.m, v) or cb.shape[-2:] != (v, ins.n):
            raise ShapeError(f"scale_A must be (..., {ins.m}, {v}) and scale_B (..., {v}, {ins.n}); "
                             f"got {ca.shape} and {cb.shape}")
        kw.update(scale_a=blockscale.scatter_scales(ins, ca, "scale_a"),
                  scale_b=blockscale.scatter_scales(ins, cb, "scale_b"))
    d = mma(ins, pack(ins, "a", A), pack(ins, "b", B), pack(ins, "c", C), arch=arch, **kw)
    return unpack(ins, "d", d)

